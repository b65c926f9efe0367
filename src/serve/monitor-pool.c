/* The monitor's warm pool (docs/pool.md, "In the daemon"). For each
 * profile the operator policy's serve.pool names, the monitor keeps that
 * many pool sandboxes: session processes (spool.c) that made a sandbox
 * from the pool's task request and hold it. They are in the state table
 * like any sandbox (they count against --max-sandboxes) but belong to no
 * one: no identity can name, list or count them. A create for the
 * profile goes to a held one, whose session runs the request layer for
 * the client and claims the sandbox when the plan fits; one that does
 * not fit comes back as POOL_COLD and is started cold here, the pool
 * sandbox held again. The pool refills in the background: at most its
 * count being made at once, none past --max-sandboxes, and after a
 * failure not before a back-off (1 s, doubling, at most 60 s). */
#include "serve/monitor.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/sys.h"
#include "core/util.h"

/* Why a create was made cold: a bounded set of labels. */
static const char *const classes[] = {
    "empty",	 /* no held sandbox of the profile */
    "max_execs", /* another max_execs than the pool's */
    "claim",	 /* the claim failed (the gateway, or not carried) */
    "profile",	 "backend", "operator_policy", "identity",    "limits", "fs",	 "tty",
    "hostname",	 "network", "decider",	       "credentials", "env",	"other",
};
#define N_CLASSES (sizeof(classes) / sizeof(classes[0]))

struct mon_pool {
	char *profile;
	unsigned want;
	char *body; /* the task request each is made from, with its profile */
	unsigned fails;
	uint64_t next_ms; /* none made before this (back-off) */
	uint64_t hits, made, failed;
	uint64_t misses[N_CLASSES];
};

#define BACKOFF_MS     1000u
#define BACKOFF_MAX_MS 60000u

static size_t class_index(const char *c)
{
	if (strncmp(c, "copy_", 5) == 0 || strcmp(c, "scratch_exec") == 0 ||
	    strcmp(c, "landlock_required") == 0)
		c = "fs";
	for (size_t i = 0; i < N_CLASSES; i++)
		if (strcmp(classes[i], c) == 0)
			return i;
	return N_CLASSES - 1;
}

void mon_pool_init(struct monitor *m, const struct al_operator *op)
{
	if (!op || !op->serve.n_pool)
		return;
	m->pools = xcalloc(op->serve.n_pool, sizeof(*m->pools));
	for (size_t i = 0; i < op->serve.n_pool; i++) {
		const struct al_op_pool *e = &op->serve.pool[i];
		json_error_t je;
		json_t *o = e->request ? json_loads(e->request, 0, &je) : json_object();
		if (!json_is_object(o)) { /* checked when parsed: not reached */
			json_decref(o);
			continue;
		}
		if (!json_object_get(o, "version"))
			json_object_set_new(o, "version", json_integer(1));
		json_object_set_new(o, "profile", json_string(e->profile));
		struct mon_pool *p = &m->pools[m->n_pools++];
		p->profile = xstrdup(e->profile);
		p->want = e->count;
		p->body = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
		json_decref(o);
		if (p->want)
			al_info("serve: warm pool of profile \"%s\": %u sandboxes", p->profile,
				p->want);
	}
}

void mon_pool_free(struct monitor *m)
{
	for (size_t i = 0; i < m->n_pools; i++) {
		free(m->pools[i].profile);
		free(m->pools[i].body);
	}
	free(m->pools);
	m->pools = NULL;
	m->n_pools = 0;
	for (size_t i = 0; i < m->n_cold; i++)
		free(m->cold[i].body);
	free(m->cold);
	m->cold = NULL;
	m->n_cold = 0;
}

unsigned mon_pool_count(const struct monitor *m, unsigned *held)
{
	unsigned n = 0, h = 0;

	for (size_t i = 0; i < m->n_sb; i++)
		if (m->sb[i]->pool) {
			n++;
			h += m->sb[i]->pool_state == POOL_HELD;
		}
	if (held)
		*held = h;
	return n;
}

static unsigned pool_size(const struct monitor *m, const struct mon_pool *p, int state)
{
	unsigned n = 0;

	for (size_t i = 0; i < m->n_sb; i++)
		n += m->sb[i]->pool == p && (state < 0 || (int)m->sb[i]->pool_state == state);
	return n;
}

static void backoff(struct mon_pool *p)
{
	unsigned shift = p->fails < 7 ? p->fails : 6;
	uint64_t wait = (uint64_t)BACKOFF_MS << shift;

	p->fails++;
	p->failed++;
	p->next_ms = al_now_ms() + (wait < BACKOFF_MAX_MS ? wait : BACKOFF_MAX_MS);
}

/* One more pool sandbox for p: a session process given the pool's task
 * request, owned by no one. */
static void fill_one(struct monitor *m, struct mon_pool *p)
{
	struct al_error err = {0};
	struct sandbox *s = xcalloc(1, sizeof(*s));

	al_random_id(s->id, sizeof(s->id));
	s->pool = p;
	s->pool_state = POOL_STARTING;
	s->pidfd = -1;
	s->started_ms = al_now_ms();
	s->setup_deadline_ms = s->started_ms + AL_SERVE_SETUP_MAX_MS;
	if (mon_spawn_session(m, s, &err) < 0) {
		al_warn("serve: warm pool of \"%s\": %s", p->profile, err.msg);
		free(s);
		backoff(p);
		return;
	}
	m->sb = xrealloc(m->sb, (m->n_sb + 1) * sizeof(*m->sb));
	m->sb[m->n_sb++] = s;
	p->made++;
	mon_session_run(m, s, 0, NULL, "pool", (const uint8_t *)p->body, strlen(p->body),
			AL_OP_POOL);
}

static struct conn *conn_by_id(struct monitor *m, uint64_t id)
{
	for (size_t i = 0; i < m->n_conns; i++)
		if (m->conns[i].id == id)
			return &m->conns[i];
	return NULL;
}

int mon_pool_tick(struct monitor *m)
{
	uint64_t now = al_now_ms();
	int next = -1;

	/* Creates that did not fit, started cold (their client still
	 * there). Here, not where POOL_COLD came: this may end a held pool
	 * sandbox to make room, which must not be the one being read. */
	for (size_t i = 0; i < m->n_cold; i++) {
		struct mon_create *k = &m->cold[i];
		struct conn *c = conn_by_id(m, k->conn);
		if (c && !m->stop)
			mon_start_session(m, k->req, c, k->identity, k->body, k->len,
					  AL_OP_SANDBOX_CREATE);
		free(k->body);
	}
	m->n_cold = 0;
	for (size_t i = 0; i < m->n_pools && !m->stop; i++) {
		struct mon_pool *p = &m->pools[i];
		unsigned have = pool_size(m, p, -1);
		while (have < p->want && m->n_sb < m->cfg->max_sandboxes && now >= p->next_ms) {
			fill_one(m, p);
			have++;
		}
		if (have < p->want && p->next_ms > now) {
			int wait = (int)(p->next_ms - now);
			if (next < 0 || wait < next)
				next = wait;
		}
	}
	return next;
}

/* The profile a create asks for: its "profile", or its identity's
 * default (as the request layer picks it). NULL: none to be had here. */
static char *profile_of(const struct monitor *m, const struct conn *c, const char *identity,
			const uint8_t *body, size_t len)
{
	json_error_t je;
	json_t *o = json_loadb((const char *)body, len, 0, &je);
	const char *asked = json_string_value(json_object_get(o, "profile"));
	char *def = NULL;

	if (!json_is_object(o) || asked || json_object_get(o, "profile")) {
		char *r = asked ? xstrdup(asked) : NULL;
		json_decref(o);
		return r;
	}
	json_decref(o);
	struct al_identity who = {0};
	gid_t gids[AL_SERVE_GIDS_MAX];
	if (strncmp(identity, "token:", 6) == 0) {
		who.token = identity + 6;
	} else {
		who.uid = c->uid;
		for (size_t i = 0; i < c->n_gids; i++)
			gids[i] = c->gids[i];
		who.gids = gids;
		who.n_gids = c->n_gids;
	}
	al_strv_free(al_op_serve_grants(m->op, &who, &def));
	return def;
}

bool mon_pool_create(struct monitor *m, uint64_t req, const struct conn *c, const char *identity,
		     const uint8_t *body, size_t len)
{
	struct mon_pool *p = NULL;
	struct sandbox *s = NULL;

	if (!m->n_pools || !m->op || !body)
		return false;
	char *profile = profile_of(m, c, identity, body, len);
	for (size_t i = 0; profile && i < m->n_pools; i++)
		if (strcmp(m->pools[i].profile, profile) == 0 && m->pools[i].want)
			p = &m->pools[i];
	free(profile);
	if (!p)
		return false;
	for (size_t i = 0; i < m->n_sb && !s; i++)
		if (m->sb[i]->pool == p && m->sb[i]->pool_state == POOL_HELD)
			s = m->sb[i];
	if (!s) {
		p->misses[class_index("empty")]++;
		return false;
	}
	s->pool_state = POOL_CLAIMING;
	s->claim = (struct mon_create){.req = req, .conn = c->id, .len = len};
	snprintf(s->claim.identity, sizeof(s->claim.identity), "%s", identity);
	s->claim.body = xmalloc(len ? len : 1);
	memcpy(s->claim.body, body, len);
	snprintf(s->owner, sizeof(s->owner), "%s", identity);
	s->req_id = req;
	s->started_ms = al_now_ms();
	s->setup_deadline_ms = s->started_ms + AL_SERVE_SETUP_MAX_MS;
	mon_owe(s, req, c->id);
	mon_session_run(m, s, req, c, identity, body, len, AL_OP_SANDBOX_CREATE);
	return true;
}

/* The create tried on s is over: s is held again, owned by no one. */
static void unclaim(struct sandbox *s)
{
	free(s->claim.body);
	s->claim = (struct mon_create){0};
	s->pool_state = POOL_HELD;
	s->owner[0] = '\0';
	s->req_id = 0;
	s->setup_deadline_ms = 0;
}

int mon_pool_session_msg(struct monitor *m, struct sandbox *s, const struct al_msg *in)
{
	struct mon_pool *p = s->pool;

	if (!p)
		return 0;
	switch (in->type) {
	case AL_MSG_POOL_READY:
		if (s->pool_state != POOL_STARTING)
			return -EBADMSG;
		s->pool_state = POOL_HELD;
		s->setup_deadline_ms = 0;
		p->fails = 0;
		return 1;
	case AL_MSG_POOL_COLD: {
		if (s->pool_state != POOL_CLAIMING || in->id != s->claim.req)
			return -EBADMSG;
		_cleanup_free_ char *why = al_msg_strdup(in, AL_TAG_REASON);
		p->misses[class_index(why)]++;
		m->cold = xrealloc(m->cold, (m->n_cold + 1) * sizeof(*m->cold));
		m->cold[m->n_cold++] = s->claim;
		s->claim.body = NULL; /* the queue's now */
		mon_owed_del(s, in->id);
		unclaim(s);
		return 1;
	}
	case AL_MSG_SESSION_DONE:
		if (s->pool_state == POOL_STARTING) {
			/* The pool's sandbox could not be made: said once here,
			 * then the session ends and the pool backs off. */
			size_t len = 0;
			const uint8_t *b = al_msg_bytes(in, AL_TAG_BODY, &len);
			al_warn("serve: warm pool of \"%s\": %.*s", p->profile,
				(int)(len < 600 ? len : 600), b ? (const char *)b : "");
			return 1;
		}
		if (s->pool_state != POOL_CLAIMING || in->id != s->claim.req)
			return 0;
		if (al_msg_u32(in, AL_TAG_STATUS, 0) != 201) {
			/* Answered (400, 403, 500): the sandbox is still held. */
			unclaim(s);
			return 0;
		}
		/* Claimed: the client's sandbox from now, never the pool's
		 * again; the pool refills. */
		p->hits++;
		s->warm = true;
		s->pool = NULL;
		free(s->claim.body);
		s->claim = (struct mon_create){0};
		return 0;
	default:
		return 0;
	}
}

void mon_pool_gone(struct monitor *m, struct sandbox *s)
{
	(void)m;
	if (!s->pool)
		return;
	if (s->pool_state == POOL_STARTING) {
		al_warn("serve: warm pool of \"%s\": a sandbox could not be made; retrying later",
			s->pool->profile);
		backoff(s->pool);
	}
	free(s->claim.body);
	s->claim.body = NULL;
	s->pool = NULL;
}

bool mon_pool_evict(struct monitor *m)
{
	for (size_t i = 0; i < m->n_sb; i++)
		if (m->sb[i]->pool && m->sb[i]->pool_state == POOL_HELD) {
			mon_sandbox_free(m, i);
			return true;
		}
	return false;
}

void mon_pool_metrics(const struct monitor *m, FILE *f)
{
	fprintf(f, "# HELP airlock_pool_sandboxes Warm pool sandboxes by profile and state (held: "
		   "ready for a claim; starting; claiming: a create being tried).\n"
		   "# TYPE airlock_pool_sandboxes gauge\n");
	for (size_t i = 0; i < m->n_pools; i++) {
		const struct mon_pool *p = &m->pools[i];
		fprintf(f,
			"airlock_pool_sandboxes{profile=\"%s\",state=\"held\"} %u\n"
			"airlock_pool_sandboxes{profile=\"%s\",state=\"starting\"} %u\n"
			"airlock_pool_sandboxes{profile=\"%s\",state=\"claiming\"} %u\n",
			p->profile, pool_size(m, p, POOL_HELD), p->profile,
			pool_size(m, p, POOL_STARTING), p->profile, pool_size(m, p, POOL_CLAIMING));
	}
	fprintf(f, "# HELP airlock_pool_target Warm pool sandboxes kept per profile "
		   "(serve.pool).\n# TYPE airlock_pool_target gauge\n");
	for (size_t i = 0; i < m->n_pools; i++)
		fprintf(f, "airlock_pool_target{profile=\"%s\"} %u\n", m->pools[i].profile,
			m->pools[i].want);
	fprintf(f, "# HELP airlock_pool_hits_total Creates served from the warm pool.\n"
		   "# TYPE airlock_pool_hits_total counter\n");
	for (size_t i = 0; i < m->n_pools; i++)
		fprintf(f, "airlock_pool_hits_total{profile=\"%s\"} %llu\n", m->pools[i].profile,
			(unsigned long long)m->pools[i].hits);
	fprintf(f, "# HELP airlock_pool_misses_total Creates for a pooled profile made cold, by "
		   "reason (empty, or the class of the first field that did not fit).\n"
		   "# TYPE airlock_pool_misses_total counter\n");
	for (size_t i = 0; i < m->n_pools; i++)
		for (size_t k = 0; k < N_CLASSES; k++)
			fprintf(f, "airlock_pool_misses_total{profile=\"%s\",reason=\"%s\"} %llu\n",
				m->pools[i].profile, classes[k],
				(unsigned long long)m->pools[i].misses[k]);
	fprintf(f, "# HELP airlock_pool_fills_total Pool sandboxes started, and those that "
		   "failed before they were ready.\n# TYPE airlock_pool_fills_total counter\n");
	for (size_t i = 0; i < m->n_pools; i++)
		fprintf(f,
			"airlock_pool_fills_total{profile=\"%s\",result=\"started\"} %llu\n"
			"airlock_pool_fills_total{profile=\"%s\",result=\"failed\"} %llu\n",
			m->pools[i].profile, (unsigned long long)m->pools[i].made,
			m->pools[i].profile, (unsigned long long)m->pools[i].failed);
}
