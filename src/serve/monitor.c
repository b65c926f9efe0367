/* The daemon's monitor: the privileged process. It accepts every client
 * itself (the identity comes from SO_PEERCRED or a bearer token, never
 * from the front), hands each connection to the confined front, holds the
 * state table (sandbox id -> owner, state, session process), checks every
 * request the front passes on against it, spawns a session process per
 * sandbox and keeps the metrics. */
#include "serve/monitor.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "core/cleanup.h"
#include "core/log.h"
#include "core/sys.h"
#include "core/util.h"
#include "policy/operator.h"

static struct conn *conn_find(struct monitor *m, uint64_t id)
{
	for (size_t i = 0; i < m->n_conns; i++)
		if (m->conns[i].id == id)
			return &m->conns[i];
	return NULL;
}

/* Answers to the front (answer.c), on the current front's channel. */
#define respond(m, ...)	       al_serve_respond(&(m)->front, __VA_ARGS__)
#define respond_json(m, ...)   al_serve_respond_json(&(m)->front, __VA_ARGS__)
#define chunk_to_front(m, ...) al_serve_chunk(&(m)->front, __VA_ARGS__)

void mon_respond_error(struct monitor *m, uint64_t req, unsigned status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	json_t *body = al_serve_error_json(fmt, ap);
	va_end(ap);
	respond_json(m, req, status, body);
}

/* --- sessions --------------------------------------------------------- */

void mon_owe(struct sandbox *s, uint64_t req, uint64_t conn)
{
	s->owed = xrealloc(s->owed, (s->n_owed + 1) * sizeof(*s->owed));
	s->owed[s->n_owed++] = (struct owed){.req = req, .conn = conn};
}

static struct owed *owed_find(struct sandbox *s, uint64_t req)
{
	for (size_t i = 0; i < s->n_owed; i++)
		if (s->owed[i].req == req)
			return &s->owed[i];
	return NULL;
}

void mon_owed_del(struct sandbox *s, uint64_t req)
{
	struct owed *o = owed_find(s, req);

	if (o)
		*o = s->owed[--s->n_owed];
}

void mon_session_run(struct monitor *m, struct sandbox *s, uint64_t req, const struct conn *c,
		     const char *identity, const uint8_t *body, size_t len, unsigned op)
{
	struct al_msg_out o;

	al_msg_begin(&o, AL_MSG_SESSION_RUN, req);
	al_msg_put_str(&o, AL_TAG_IDENTITY, identity);
	al_msg_put_str(&o, AL_TAG_SESSION_ID, s->id);
	al_msg_put_u32(&o, AL_TAG_OP, op);
	if (c && !c->tcp) {
		uint32_t g[AL_SERVE_GIDS_MAX];
		for (size_t i = 0; i < c->n_gids; i++)
			g[i] = c->gids[i];
		al_msg_put_bytes(&o, AL_TAG_GIDS, g, c->n_gids * sizeof(*g));
	}
	if (m->never_len)
		al_msg_put_bytes(&o, AL_TAG_NEVER, m->never, m->never_len);
	if (m->operator_file)
		al_msg_put_str(&o, AL_TAG_OPERATOR, m->operator_file);
	al_msg_put_bytes(&o, AL_TAG_BODY, body ? body : (const uint8_t *)"", len);
	al_msg_end(&o);
	al_chan_queue(&s->ch, &o, -1);
	al_chan_flush(&s->ch);
}

/* A one-shot run (op AL_OP_RUN) or a live sandbox (AL_OP_SANDBOX_CREATE):
 * a session process of its own, given the request. At --max-sandboxes a
 * held pool sandbox makes room (the pool refills once there is room). */
void mon_start_session(struct monitor *m, uint64_t req, const struct conn *c, const char *identity,
		       const uint8_t *body, size_t len, unsigned op)
{
	struct al_error err = {0};

	/* The front refuses these already; a front that does not is not
	 * let past (the session would parse it as root). */
	if (len > AL_SERVE_BODY_MAX)
		return mon_respond_error(m, req, 413, "the request body is over %u bytes",
					 AL_SERVE_BODY_MAX);
	if (m->n_sb >= m->cfg->max_sandboxes && !mon_pool_evict(m))
		return mon_respond_error(
		    m, req, 429,
		    "too many sandboxes: the daemon's --max-sandboxes (%u) are "
		    "all in use; retry later",
		    m->cfg->max_sandboxes);
	struct sandbox *s = xcalloc(1, sizeof(*s));
	al_random_id(s->id, sizeof(s->id));
	snprintf(s->owner, sizeof(s->owner), "%s", identity);
	s->oneshot = op == AL_OP_RUN;
	s->req_id = req;
	mon_owe(s, req, c->id);
	s->pidfd = -1;
	s->started_ms = al_now_ms();
	s->setup_deadline_ms = s->started_ms + AL_SERVE_SETUP_MAX_MS;
	if (mon_spawn_session(m, s, &err) < 0) {
		free(s->owed);
		free(s);
		return mon_respond_error(m, req, 500, "cannot start the session process: %s",
					 err.msg);
	}
	m->sb = xrealloc(m->sb, (m->n_sb + 1) * sizeof(*m->sb));
	m->sb[m->n_sb++] = s;
	mon_session_run(m, s, req, c, identity, body, len, op);
}

static void op_run(struct monitor *m, uint64_t req, const struct conn *c, const char *identity,
		   const struct al_msg *in, unsigned op)
{
	size_t len = 0;
	const uint8_t *body = al_msg_bytes(in, AL_TAG_BODY, &len);
	unsigned mine = 0, cap = m->cfg->max_sandboxes_per_identity;

	/* Its identity's own cap first (a held pool sandbox is no one's). */
	if (!cap || cap > m->cfg->max_sandboxes)
		cap = m->cfg->max_sandboxes;
	for (size_t i = 0; i < m->n_sb; i++)
		mine += strcmp(m->sb[i]->owner, identity) == 0;
	if (mine >= cap)
		return mon_respond_error(
		    m, req, 429,
		    "too many sandboxes of %s: the daemon's "
		    "--max-sandboxes-per-identity (%u) are in use (one-shot runs "
		    "included); retry when one ended",
		    identity, cap);
	/* A create whose profile has a ready pool sandbox goes there first. */
	if (op == AL_OP_SANDBOX_CREATE && len <= AL_SERVE_BODY_MAX &&
	    mon_pool_create(m, req, c, identity, body, len))
		return;
	mon_start_session(m, req, c, identity, body, len, op);
}

/* A sandbox the caller may name: it exists and is the caller's own.
 * Another identity's sandbox is answered exactly as one that does not
 * exist (404), so ids cannot be probed. */
static struct sandbox *sandbox_owned(struct monitor *m, const char *id, const char *identity)
{
	for (size_t i = 0; id && i < m->n_sb; i++)
		if (!m->sb[i]->oneshot && !m->sb[i]->deleting && !m->sb[i]->pool &&
		    strcmp(m->sb[i]->id, id) == 0 && strcmp(m->sb[i]->owner, identity) == 0)
			return m->sb[i];
	return NULL;
}

/* Does the sandbox's metadata hold every key = value of filter? */
static bool meta_matches(const json_t *meta, const json_t *filter)
{
	const char *k;
	json_t *v;

	json_object_foreach((json_t *)filter, k, v)
	{
		const char *have = json_string_value(json_object_get(meta, k));
		if (!have || !json_is_string(v) || strcmp(have, json_string_value(v)) != 0)
			return false;
	}
	return true;
}

static void op_list(struct monitor *m, uint64_t req, const char *identity, const struct al_msg *in)
{
	size_t len = 0;
	const uint8_t *body = al_msg_bytes(in, AL_TAG_BODY, &len);
	json_error_t je;
	json_t *filter = body ? json_loadb((const char *)body, len, 0, &je) : json_object();
	json_t *a = json_array();

	if (!json_is_object(filter)) {
		json_decref(filter);
		json_decref(a);
		return mon_respond_error(m, req, 400, "bad metadata filter");
	}
	for (size_t i = 0; i < m->n_sb; i++) {
		struct sandbox *s = m->sb[i];
		if (s->oneshot || !s->ready || s->deleting || s->pool ||
		    strcmp(s->owner, identity) != 0 || !meta_matches(s->meta, filter))
			continue;
		json_array_append_new(a, json_pack("{s:s, s:O}", "id", s->id, "metadata", s->meta));
	}
	json_decref(filter);
	respond_json(m, req, 200, json_pack("{s:o}", "sandboxes", a));
}

/* A request for a live sandbox, passed on to its session process as
 * "METHOD rest-of-path". */
static void op_forward(struct monitor *m, uint64_t req, struct sandbox *s, unsigned op,
		       const struct al_msg *in, uint64_t conn)
{
	size_t len = 0;
	const uint8_t *body = al_msg_bytes(in, AL_TAG_BODY, &len);
	_cleanup_free_ char *path = al_msg_strdup(in, AL_TAG_PATH);
	struct al_msg_out o;
	/* Checked again here: a file upload may be up to its own cap, every
	 * other body up to the API's. */
	bool upload = path && strncmp(path, "PUT files/", 10) == 0;

	if (len > (upload ? AL_SERVE_FILE_MAX : AL_SERVE_BODY_MAX))
		return mon_respond_error(m, req, 413, "the request body is over %u bytes",
					 upload ? AL_SERVE_FILE_MAX : AL_SERVE_BODY_MAX);
	if (!s->ready)
		return mon_respond_error(m, req, 409, "sandbox %s is still starting", s->id);
	al_msg_begin(&o, AL_MSG_SESSION_REQ, req);
	al_msg_put_str(&o, AL_TAG_PATH,
		       op == AL_OP_SANDBOX_GET	    ? "GET "
		       : op == AL_OP_SANDBOX_DELETE ? "DELETE "
		       : path			    ? path
						    : "GET ");
	if (body)
		al_msg_put_bytes(&o, AL_TAG_BODY, body, len);
	if (al_msg_end(&o) < 0) {
		free(o.buf);
		return mon_respond_error(m, req, 413, "the request is too large");
	}
	if (op == AL_OP_SANDBOX_DELETE)
		s->deleting = true;
	mon_owe(s, req, conn);
	al_chan_queue(&s->ch, &o, -1);
}

/* A request's client left: its session stops sending a streamed answer,
 * kills a streamed exec or a one-shot run. */
void mon_cancel(struct monitor *m, uint64_t req)
{
	for (size_t i = 0; i < m->n_sb; i++) {
		struct sandbox *s = m->sb[i];
		struct owed *ow = owed_find(s, req);
		if (!ow)
			continue;
		/* A stream ends here; a single answer still comes, and is
		 * dropped by the front. */
		if (ow->stream)
			mon_owed_del(s, req);
		struct al_msg_out o;
		al_msg_begin(&o, AL_MSG_CANCEL, req);
		al_msg_end(&o);
		al_chan_queue(&s->ch, &o, -1);
		return;
	}
}

static void on_request(struct monitor *m, const struct al_msg *in)
{
	uint64_t req = in->id;
	struct conn *c = conn_find(m, al_msg_u64(in, AL_TAG_CONN, 0));
	_cleanup_free_ char *token = al_msg_strdup(in, AL_TAG_TOKEN);
	_cleanup_free_ char *sbid = al_msg_strdup(in, AL_TAG_SANDBOX);
	char identity[80];

	if (req > m->req_floor)
		m->req_floor = req;
	if (!c)
		return mon_respond_error(m, req, 400, "the connection is gone");
	/* Who asks: the monitor's own record of the connection, or on TCP
	 * the identity the token maps to. The front only passes the token
	 * on. */
	if (c->tcp) {
		const char *who =
		    token ? al_serve_token_identity(m->tokens, m->n_tokens, token) : NULL;
		if (!who)
			return mon_respond_error(
			    m, req, 401,
			    token ? "the bearer token is not known"
				  : "this listener needs \"Authorization: Bearer "
				    "TOKEN\"");
		snprintf(identity, sizeof(identity), "token:%s", who);
		/* The connection counts for the first identity it shows. */
		if (!c->identity[0]) {
			if (mon_conns_of(m, identity) >= mon_per_identity(m))
				return mon_respond_error(
				    m, req, 429,
				    "too many connections from %s: the daemon's "
				    "--max-clients-per-identity (%u) is reached; "
				    "retry later",
				    identity, mon_per_identity(m));
			snprintf(c->identity, sizeof(c->identity), "%s", identity);
		}
	} else {
		snprintf(identity, sizeof(identity), "%s", c->identity);
	}
	switch (al_msg_u32(in, AL_TAG_OP, 0)) {
	case AL_OP_HEALTH: {
		/* uid 0 sees every sandbox; any other identity its own. */
		bool all = !c->tcp && c->uid == 0;
		int n = 0;
		for (size_t i = 0; i < m->n_sb; i++)
			n += !m->sb[i]->pool && (all || strcmp(m->sb[i]->owner, identity) == 0);
		return respond_json(m, req, 200,
				    json_pack("{s:s, s:s, s:s, s:i}", "status", "ok", "version",
					      AL_VERSION, "identity", identity, "sandboxes", n));
	}
	case AL_OP_METRICS: {
		unsigned paused = 0, held, pooled = mon_pool_count(m, &held);
		for (size_t i = 0; i < m->n_sb; i++)
			paused += m->sb[i]->paused;
		char *t = al_metrics_text(&m->metrics, (unsigned)m->n_sb - pooled - paused, paused,
					  held, (unsigned)m->n_conns);
		char *all = NULL;
		size_t n = 0;
		FILE *f = open_memstream(&all, &n);
		if (f) {
			fputs(t ? t : "", f);
			mon_pool_metrics(m, f);
			fclose(f);
		}
		respond(m, req, 200, "text/plain; version=0.0.4", all ? all : "", all ? n : 0);
		free(all);
		free(t);
		return;
	}
	case AL_OP_RUN:
	case AL_OP_SANDBOX_CREATE:
		return op_run(m, req, c, identity, in, al_msg_u32(in, AL_TAG_OP, 0));
	case AL_OP_SANDBOX_LIST:
		return op_list(m, req, identity, in);
	case AL_OP_SANDBOX_GET:
	case AL_OP_SANDBOX_DELETE:
	case AL_OP_SANDBOX_OTHER: {
		struct sandbox *s = sandbox_owned(m, sbid, identity);
		if (!s)
			return mon_respond_error(m, req, 404, "no sandbox \"%s\"",
						 sbid ? sbid : "");
		return op_forward(m, req, s, al_msg_u32(in, AL_TAG_OP, 0), in, c->id);
	}
	default:
		return mon_respond_error(m, req, 400, "unknown operation");
	}
}

static int on_front_msg(struct monitor *m, const struct al_msg *in)
{
	switch (in->type) {
	case AL_MSG_REQUEST:
		on_request(m, in);
		return 0;
	case AL_MSG_CLOSED:
		for (size_t i = 0; i < m->n_conns; i++)
			if (m->conns[i].id == in->id) {
				mon_conn_gone(m, i);
				break;
			}
		return 0;
	case AL_MSG_STATUS:
		al_metrics_status(&m->metrics, al_msg_u32(in, AL_TAG_STATUS, 0));
		return 0;
	case AL_MSG_CANCEL:
		mon_cancel(m, in->id);
		return 0;
	default:
		return -EBADMSG; /* not a message the front sends */
	}
}

/* A session's answer goes to the front as the request's, checked first:
 * only to a request that session is owed, only one head per request,
 * chunks only on a streamed one. A one-shot run's numbers go to the
 * metrics. Returns -EBADMSG when the session broke the protocol. */
static int on_session_msg(struct monitor *m, struct sandbox *s, const struct al_msg *in)
{
	size_t len;
	const uint8_t *body = al_msg_bytes(in, AL_TAG_BODY, &len);
	struct owed *ow = owed_find(s, in->id);
	int pr = mon_pool_session_msg(m, s, in);

	if (pr)
		return pr < 0 ? pr : 0;
	if (in->type == AL_MSG_SESSION_STARTED) {
		s->setup_deadline_ms = 0;
		return 0;
	}
	if (in->type == AL_MSG_SESSION_EVENT)
		return al_metrics_event(&m->metrics, in, &s->paused);
	if (in->type == AL_MSG_CHUNK) {
		/* One whose client left (cancelled) is dropped; none goes to
		 * a request this session is not streaming. */
		if (!ow || !ow->stream)
			return 0;
		bool end = al_msg_u32(in, AL_TAG_END, 0) == 1;
		if (!ow->stale)
			chunk_to_front(m, in->id, body, len, end);
		if (end)
			mon_owed_del(s, in->id);
		return 0;
	}
	if (in->type != AL_MSG_SESSION_DONE || !ow || ow->stream)
		return -EBADMSG;
	_cleanup_free_ char *reason = al_msg_strdup(in, AL_TAG_REASON);
	_cleanup_free_ char *ctype = al_msg_strdup(in, AL_TAG_CTYPE);
	unsigned status = al_msg_u32(in, AL_TAG_STATUS, 500);
	bool stream = al_msg_u32(in, AL_TAG_STREAM, 0) == 1;
	if (status < 200 || status > 599)
		status = 500;
	if (in->id == s->req_id && !s->oneshot && !s->ready && status == 201) {
		size_t ml = 0;
		const uint8_t *meta = al_msg_bytes(in, AL_TAG_META, &ml);
		json_error_t je;
		s->ready = true;
		s->meta = meta ? json_loadb((const char *)meta, ml, 0, &je) : NULL;
		if (!json_is_object(s->meta)) {
			json_decref(s->meta);
			s->meta = json_object();
		}
		double t = (double)(al_now_ms() - s->started_ms) / 1000.0;
		al_hist_add(&m->metrics.create_s, t);
		al_hist_add(s->warm ? &m->metrics.create_warm_s : &m->metrics.create_cold_s, t);
	}
	if (in->id == s->req_id) {
		s->done = true;
		s->setup_deadline_ms = 0;
	}
	struct al_msg_out o;
	al_msg_begin(&o, AL_MSG_RESPONSE, in->id);
	al_msg_put_u32(&o, AL_TAG_STATUS, status);
	al_msg_put_str(&o, AL_TAG_CTYPE, ctype ? ctype : "application/json");
	al_msg_put_bytes(&o, AL_TAG_BODY, body, len);
	if (stream)
		al_msg_put_u32(&o, AL_TAG_STREAM, 1);
	if (ow->stale) {
		free(o.buf);
	} else if (al_msg_end(&o) < 0) {
		free(o.buf);
		mon_respond_error(m, in->id, 500, "the answer is too large to send");
	} else {
		al_chan_queue(&m->front, &o, -1);
	}
	if (stream)
		ow->stream = true;
	else
		mon_owed_del(s, in->id);
	if (reason && s->oneshot) {
		m->metrics.runs++;
		int li = al_metrics_limit_index(reason);
		if (li >= 0 && (size_t)li < AL_ARRAY_SIZE(m->metrics.limit_hits))
			m->metrics.limit_hits[li]++;
		al_hist_add(&m->metrics.run_s, (double)(al_now_ms() - s->started_ms) / 1000.0);
	}
	return 0;
}

/* --- the loop --------------------------------------------------------- */

static void reap(struct monitor *m)
{
	int status;
	pid_t pid;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		if (pid == m->front_pid) {
			char why[64];
			snprintf(why, sizeof(why), "ended (%s %d)",
				 WIFEXITED(status) ? "exit" : "signal",
				 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
			m->front_pid = 0;
			/* One that cannot be confined never will be. */
			if (WIFEXITED(status) && WEXITSTATUS(status) == 124) {
				al_err("serve: the front could not confine itself "
				       "(landlock, seccomp); stopping");
				m->stop = true;
			}
			mon_front_lost(m, why);
		}
	}
}

static void on_signal(struct monitor *m)
{
	struct signalfd_siginfo si;

	while (read(m->sig_fd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGCHLD)
			reap(m);
		else
			m->stop = true;
	}
}

/* A session's channel is readable: its answers, or its end. When it
 * ends, whatever it still owed is answered here (500, or the end of a
 * stream), and the sandbox is gone from the table. */
static void session_io(struct monitor *m, size_t i, short revents)
{
	struct sandbox *s = m->sb[i];
	struct al_error err = {0};
	struct al_msg in;
	int r;

	if (revents & POLLOUT)
		al_chan_flush(&s->ch);
	if (revents & (POLLIN | POLLHUP | POLLERR)) {
		al_chan_read(&s->ch);
		while ((r = al_chan_next(&s->ch, &in, &err)) > 0)
			if (on_session_msg(m, s, &in) < 0) {
				al_warn("serve: session %s broke its protocol (message type %u)",
					s->id, in.type);
				s->ch.eof = true;
				break;
			}
		if (r < 0) {
			al_warn("serve: session %s: %s", s->id, err.msg);
			s->ch.eof = true;
		}
	}
	if (s->ch.eof || (s->done && s->oneshot)) {
		for (size_t k = 0; k < s->n_owed; k++) {
			if (s->owed[k].stale)
				continue;
			if (s->owed[k].stream)
				chunk_to_front(m, s->owed[k].req, "", 0, true);
			else
				mon_respond_error(
				    m, s->owed[k].req, 500,
				    "the sandbox's session process ended without an answer");
		}
		s->n_owed = 0;
		mon_sandbox_free(m, i);
	}
}

static int loop(struct monitor *m, struct al_error *err)
{
	struct pollfd *pf = NULL;

	while (!m->stop) {
		size_t n = 0, base, cbase;
		int timeout = mon_setup_deadlines(m), pool_timeout = mon_pool_tick(m);
		if (pool_timeout >= 0 && (timeout < 0 || pool_timeout < timeout))
			timeout = pool_timeout;
		int front_timeout = mon_front_restart(m);
		bool front = m->front.fd >= 0;
		if (front_timeout >= 0 && (timeout < 0 || front_timeout < timeout))
			timeout = front_timeout;
		/* A front that does not read holds back the sessions and its
		 * own requests (whose answers would queue), not the monitor's
		 * memory: past the bound nothing is read that could add to
		 * the queue (one read's worth may still come: the bound plus
		 * the largest answer). */
		bool full = m->front.queued > AL_SERVE_FRONT_QUEUE_MAX;
		pf = xrealloc(pf, (4 + m->n_sb + m->n_conns) * sizeof(*pf));
		pf[n++] = (struct pollfd){.fd = m->sig_fd, .events = POLLIN};
		pf[n++] = (struct pollfd){.fd = m->front.fd,
					  .events = (full ? 0 : POLLIN) |
						    (al_chan_pending(&m->front) ? POLLOUT : 0)};
		pf[n++] = (struct pollfd){.fd = front ? m->unix_fd : -1, .events = POLLIN};
		pf[n++] = (struct pollfd){.fd = front ? m->tcp_fd : -1, .events = POLLIN};
		base = n;
		for (size_t i = 0; i < m->n_sb; i++)
			pf[n++] = (struct pollfd){
			    .fd = m->sb[i]->ch.fd,
			    .events = (full ? 0 : POLLIN) |
				      (al_chan_pending(&m->sb[i]->ch) ? POLLOUT : 0)};
		/* Each client's own descriptor: only its hang-up is watched
		 * (the front reads what it sends). */
		cbase = n;
		for (size_t i = 0; i < m->n_conns; i++)
			pf[n++] = (struct pollfd){.fd = m->conns[i].dup, .events = POLLRDHUP};
		if (poll(pf, n, timeout) < 0) {
			if (errno == EINTR)
				continue;
			free(pf);
			return al_error_setsys(err, errno, "poll");
		}
		if (pf[0].revents)
			on_signal(m);
		/* Sessions from the last down: one may go (swapped with the
		 * last, already seen). */
		for (size_t i = m->n_sb; i-- > 0;)
			if (pf[base + i].revents)
				session_io(m, i, pf[base + i].revents);
		/* Clients gone, from the last down (the same way); none is
		 * left when the front was lost meanwhile. */
		for (size_t i = n - cbase; i-- > 0;)
			if (i < m->n_conns && m->conns[i].dup == pf[cbase + i].fd &&
			    (pf[cbase + i].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)))
				mon_conn_gone(m, i);
		if (m->front.fd >= 0 && (pf[1].revents & (POLLIN | POLLHUP | POLLERR))) {
			struct al_msg in;
			int r;
			if (al_chan_read(&m->front) < 0 || m->front.eof) {
				mon_front_lost(m, "closed its channel");
				continue;
			}
			while ((r = al_chan_next(&m->front, &in, err)) > 0)
				if (on_front_msg(m, &in) < 0)
					break;
			if (r != 0 || m->front.eof) {
				mon_front_lost(m, "broke the protocol");
				continue;
			}
		}
		if (m->front.fd >= 0 && pf[2].revents)
			mon_accept(m, m->unix_fd, false);
		if (m->front.fd >= 0 && pf[3].revents)
			mon_accept(m, m->tcp_fd, true);
		if (m->front.fd >= 0 && al_chan_flush(&m->front) < 0)
			mon_front_lost(m, "stopped reading its channel");
	}
	free(pf);
	al_error_clear(err);
	return 0;
}

/* The operator policy the sessions are held to, found once (as the CLI
 * finds it) and checked now, so that a bad file stops the start. */
static int load_operator(struct monitor *m, struct al_operator **ret, struct al_error *err)
{
	_cleanup_(al_errors_clear) struct al_errors errs = {0};
	const char *how;

	*ret = NULL;
	if (al_operator_find(m->cfg->operator_file, getenv(AL_OPERATOR_ENV), &m->operator_file,
			     &how, err) < 0)
		return -EINVAL;
	if (!m->operator_file) {
		al_info("serve: no operator policy: only uid 0 is served");
		return 0;
	}
	if (al_operator_load_file(m->operator_file, ret, &errs) < 0)
		return al_error_set(err, EINVAL, "%s",
				    errs.n ? errs.v[0].text : "bad operator policy");
	return 0;
}

/* The daemon's own files, which no run may show: the socket, the token
 * file, the operator policy. */
static void add_never(struct monitor *m, const char *path)
{
	size_t n = path ? strlen(path) + 1 : 0;

	if (!n || m->never_len + n > 4 * 4096)
		return;
	m->never = xrealloc(m->never, m->never_len + n);
	memcpy(m->never + m->never_len, path, n);
	m->never_len += n;
}

int al_serve_run(const struct al_serve_config *cfg, struct al_error *err)
{
	struct monitor m = {.cfg = cfg, .unix_fd = -1, .tcp_fd = -1, .sig_fd = -1};
	_cleanup_(al_operator_freep) struct al_operator *op = NULL;
	const char *group;
	sigset_t set;
	int r;

	if (cfg->listen && !cfg->token_file)
		return al_error_set(err, EINVAL, "--listen needs --token-file (bearer tokens)");
	if (cfg->token_file && !cfg->listen)
		return al_error_set(err, EINVAL, "--token-file is only for --listen");
	if (al_landlock_abi() <= 0 && !cfg->no_landlock)
		return al_error_set(err, ENOSYS,
				    "this kernel has no landlock, which confines the daemon's "
				    "HTTP front; --no-landlock starts without it");
	m.front.fd = -1;
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, NULL);
	if ((m.sig_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK)) < 0) {
		r = al_error_setsys(err, errno, "signalfd");
		goto out;
	}
	/* The front is started before anything else is read (tokens, the
	 * operator policy, keys): it never held them, even before its exec. */
	if ((r = mon_front_start(&m, err)) < 0)
		goto out;
	if (cfg->token_file &&
	    al_serve_tokens_load(cfg->token_file, &m.tokens, &m.n_tokens, err) < 0) {
		r = -EINVAL;
		goto out;
	}
	if ((r = load_operator(&m, &op, err)) < 0)
		goto out;
	group = cfg->socket_group;
	if (op && op->serve.socket_group) {
		if (group && strcmp(group, op->serve.socket_group) != 0) {
			r = al_error_set(err, EINVAL,
					 "--socket-group %s: the operator policy %s names group %s "
					 "(serve.socket_group)",
					 group, m.operator_file, op->serve.socket_group);
			goto out;
		}
		group = op->serve.socket_group;
	}
	add_never(&m, cfg->socket_path);
	add_never(&m, cfg->token_file);
	add_never(&m, m.operator_file);
	al_serve_cleanup_stale();
	/* A socket systemd passed is used as it is (its unit made it). */
	if ((m.unix_fd = cfg->socket_fd > 0
			     ? cfg->socket_fd
			     : al_serve_listen_unix(cfg->socket_path, group, err)) < 0 ||
	    (cfg->listen && (m.tcp_fd = al_serve_listen_tcp(cfg->listen, err)) < 0)) {
		r = -EINVAL;
		goto out;
	}
	m.op = op;
	mon_pool_init(&m, op);
	al_info("serve: listening on %s%s%s", cfg->socket_path, cfg->listen ? " and " : "",
		cfg->listen ? cfg->listen : "");
	r = loop(&m, err);
out:
	mon_stop_sessions(&m);
	mon_pool_free(&m);
	free(m.sb);
	if (m.front_pid > 0) {
		kill(m.front_pid, SIGKILL);
		waitpid(m.front_pid, NULL, 0);
	}
	al_chan_close(&m.front);
	if (m.unix_fd >= 0) {
		close(m.unix_fd);
		if (cfg->socket_fd <= 0) /* systemd's stays for the next start */
			unlink(cfg->socket_path);
	}
	if (m.tcp_fd >= 0)
		close(m.tcp_fd);
	if (m.sig_fd >= 0)
		close(m.sig_fd);
	for (size_t i = 0; i < m.n_conns; i++)
		close(m.conns[i].dup);
	free(m.conns);
	free(m.tokens);
	free(m.never);
	free(m.operator_file);
	return r;
}
