/* A warm pool's sandbox in its session process (docs/pool.md, the daemon's
 * side). The monitor starts the process with the pool's task request (the
 * profile's, {} unless the operator policy's serve.pool gives one): its
 * plan is built through the request layer with no client and no
 * credentials, and its run started in session mode with pool set, held:
 * no exec runs and its gateway refuses everything. Then it waits. A
 * create the monitor sends it is a client's: the request layer runs for
 * that client's identity as for a cold create (400 and 403 answered here,
 * the sandbox still held); a final plan that fits the pool's
 * (al_plan_fits()) claims the sandbox (al_run_claim()) and the session
 * serves it as any other; one that does not is answered POOL_COLD with
 * its reason's class, the monitor makes it cold, and this sandbox stays in
 * the pool. A claimed sandbox is never claimed again: this process then
 * serves that one sandbox until it ends. */
#include "serve/sess.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "policy/plan-fit.h"

struct spool {
	struct al_request_config cfg;
	struct al_policy *policy;
	struct al_request rq; /* the pool's plan: lives as long as the run */
	char *operator_file;
	char *claim_operator; /* the claim's request's (its cfg borrows it) */
	json_t *claim_req;
};

void sess_pool_free(struct sess *s)
{
	struct spool *p = s->pool;

	if (!p)
		return;
	al_request_clear(&p->rq);
	al_policy_free(p->policy);
	free(p->operator_file);
	free(p->claim_operator);
	json_decref(p->claim_req);
	free(p);
	s->pool = NULL;
}

static void send_msg(struct sess *s, struct al_msg_out *o)
{
	if (al_msg_end(o) < 0) {
		free(o->buf);
		return;
	}
	al_chan_queue(&s->ch, o, -1);
}

/* The create (id) goes cold: class names what did not fit. */
static void cold(struct sess *s, uint64_t id, const char *class)
{
	struct al_msg_out o;

	al_msg_begin(&o, AL_MSG_POOL_COLD, id);
	al_msg_put_str(&o, AL_TAG_REASON, class);
	send_msg(s, &o);
}

/* The daemon's own paths, NUL-ended one after the other. */
static int take_never(struct sess *s, const struct al_msg *in)
{
	size_t nl = 0;
	const uint8_t *never = al_msg_bytes(in, AL_TAG_NEVER, &nl);

	for (size_t off = 0; never && off < nl;) {
		const uint8_t *z = memchr(never + off, 0, nl - off);
		if (!z)
			return -EINVAL;
		al_strv_push(&s->never, (const char *)never + off);
		off = (size_t)(z - never) + 1;
	}
	return 0;
}

/* The pool's plan, final, with nothing of a client's: no identity (the
 * claim's request is held to its client's grants), the decider not asked
 * (it judges each claim's request), no credentials. 0, or < 0 with why. */
static int pool_plan(struct sess *s, struct spool *p, const uint8_t *body, size_t len,
		     const char *operator_env, char *why, size_t n)
{
	_cleanup_(al_errors_clear) struct al_errors errs = {0};
	struct al_error err = {0};
	struct rlimit no_core = {0, 0};

	if (al_policy_load_string_all("serve.pool", (const char *)body, len, &p->policy, &errs) <
	    0) {
		snprintf(why, n, "%s", errs.n ? errs.v[0].text : "bad task request");
		return -EINVAL;
	}
	p->cfg = (struct al_request_config){.operator_file = p->operator_file,
					    .operator_env = operator_env,
					    .plan_flags = AL_PLAN_COMMAND_OPTIONAL,
					    .run_id = s->id,
					    .never_paths = (const char *const *)s->never};
	al_request_init(&p->rq, &p->cfg, p->policy);
	if (al_request_build(&p->rq, &errs) < 0) {
		struct al_errors lines = {0};
		if (p->rq.refused)
			al_request_refusals(&p->rq, &lines);
		snprintf(why, n, "%s",
			 lines.n  ? lines.v[0].text
			 : errs.n ? errs.v[0].text
				  : "refused");
		al_errors_clear(&lines);
		return -EINVAL;
	}
	if (p->rq.plan->n_secrets || p->rq.plan->intercept) {
		snprintf(why, n,
			 "its plan has credentials (secrets or TLS interception), which a "
			 "pool's sandbox never holds");
		return -EINVAL;
	}
	/* A pool's sandboxes are live: a layer that cannot exec has none. */
	const struct al_backend_ops *ops = al_backend_lookup(p->rq.plan->backend);
	if (ops && al_backend_admit(ops, p->rq.plan, true, &err) < 0) {
		snprintf(why, n, "%s", err.msg);
		return -EINVAL;
	}
	if (al_request_probe(&p->rq, NULL, &err) < 0 || setrlimit(RLIMIT_CORE, &no_core) < 0 ||
	    (geteuid() == 0 && prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0) ||
	    al_request_finish(&p->rq, &err) < 0) {
		snprintf(why, n, "%s", err.msg[0] ? err.msg : strerror(errno));
		return -EIO;
	}
	return 0;
}

/* What one claim attempt left in s, cleared for the next client. */
static void claim_reset(struct sess *s, struct spool *p)
{
	al_request_clear(&s->rq); /* wipes what credentials it opened */
	memset(&s->rq, 0, sizeof(s->rq));
	al_policy_free(s->policy);
	s->policy = NULL;
	json_decref(s->meta);
	s->meta = NULL;
	free(s->profile);
	s->profile = NULL;
	s->idle_ms = s->max_lifetime_ms = 0;
	memset(&s->who, 0, sizeof(s->who));
	memset(s->token, 0, sizeof(s->token));
	al_strv_free(s->never);
	s->never = NULL;
	free(p->claim_operator);
	p->claim_operator = NULL;
	json_decref(p->claim_req);
	p->claim_req = NULL;
}

/* The class of the first field that did not fit ("limits.memory":
 * "limits"), for the monitor's miss counters. */
static void fit_class(const struct al_errors *why, char *buf, size_t n)
{
	const char *path = why->n && why->v[0].path ? why->v[0].path : "other";
	size_t len = strcspn(path, ".");

	snprintf(buf, n, "%.*s", (int)len, path);
}

/* A client's create (in), tried on this sandbox. 0: claimed, answered
 * 201; 1: still held (answered 4xx/5xx, or cold); < 0: cold, and the run
 * has ended (the claim failed in its gateway). */
static int try_claim(struct sess *s, struct spool *p, const struct al_msg *in,
		     const char *operator_env)
{
	_cleanup_(al_errors_clear) struct al_errors why = {0};
	struct al_error err = {0};
	size_t len = 0;
	const uint8_t *body = al_msg_bytes(in, AL_TAG_BODY, &len);
	uint64_t id = in->id, lifetime = 0;
	json_error_t je;
	char class[64];
	int r;

	claim_reset(s, p);
	if (al_msg_u32(in, AL_TAG_OP, 0) != AL_OP_SANDBOX_CREATE || sess_who_from(s, in) < 0) {
		sess_error(s, id, 500, "the pool's session was sent something not a create");
		return 1;
	}
	p->claim_operator = al_msg_strdup(in, AL_TAG_OPERATOR);
	p->claim_req = json_loadb((const char *)body, len, JSON_REJECT_DUPLICATES, &je);
	if (!json_is_object(p->claim_req)) {
		sess_error(s, id, 400, "the body must be a JSON object");
		return 1;
	}
	if (sess_create_request(s, id, p->claim_req, p->claim_operator, operator_env, &lifetime) <
	    0)
		return 1;
	if (s->max_execs != AL_SESS_MAX_EXECS) {
		cold(s, id, "max_execs");
		return 1;
	}
	if (al_plan_fits(p->rq.plan, s->rq.plan, &why) < 0) {
		fit_class(&why, class, sizeof(class));
		cold(s, id, class);
		return 1;
	}
	r = al_run_claim(s->run, s->rq.plan, s->rq.cred, NULL, &err);
	if (r == 0) {
		s->pooled = true;
		sess_created(s, id, lifetime);
		return 0;
	}
	al_warn("serve: pool sandbox %s: %s", s->id, err.msg);
	cold(s, id, "claim");
	/* Not carried by a claim (EOPNOTSUPP, E2BIG) or not fitting: still
	 * held. Any other failure ended the run. */
	return r == -EOPNOTSUPP || r == -E2BIG || r == -EINVAL ? 1 : -EIO;
}

/* Held: the run stepped, the monitor's messages read, until a create
 * claims the sandbox (0) or the run or the monitor ends (< 0). */
static int hold(struct sess *s, struct spool *p, const char *operator_env)
{
	fcntl(s->ch.fd, F_SETFL, O_NONBLOCK);
	for (;;) {
		struct pollfd pf[2] = {
		    {.fd = s->ch.fd, .events = POLLIN | (al_chan_pending(&s->ch) ? POLLOUT : 0)},
		    {.fd = al_loop_fd(al_run_loop(s->run)), .events = POLLIN}};
		if (poll(pf, 2, 1000) < 0 && errno != EINTR)
			return -errno;
		if (al_run_step(s->run, 0))
			return -ESRCH; /* it ended on its own */
		if (pf[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			struct al_msg in;
			struct al_error err = {0};
			int r;
			if (al_chan_read(&s->ch) < 0 || s->ch.eof)
				return -EPIPE; /* the monitor is gone or stopping */
			while ((r = al_chan_next(&s->ch, &in, &err)) > 0) {
				if (in.type != AL_MSG_SESSION_RUN)
					continue; /* a cancel of a create answered already */
				int c = try_claim(s, p, &in, operator_env);
				if (c <= 0)
					return c;
			}
			if (r < 0)
				return -EBADMSG;
		}
		if (al_chan_flush(&s->ch) < 0)
			return -EPIPE;
	}
}

int sess_pool_main(struct sess *s, uint64_t id, const struct al_msg *in, const char *operator_env)
{
	struct spool *p = s->pool = xcalloc(1, sizeof(*p));
	struct al_error err = {0};
	size_t len = 0;
	const uint8_t *body = al_msg_bytes(in, AL_TAG_BODY, &len);
	char why[768];

	p->operator_file = al_msg_strdup(in, AL_TAG_OPERATOR);
	if (take_never(s, in) < 0 ||
	    pool_plan(s, p, body, len, operator_env, why, sizeof(why)) < 0) {
		sess_error(s, id, 500, "the pool's sandbox cannot be made: %s", why);
		return -EINVAL;
	}
	static const struct al_supervisor_io io = {
	    .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1};
	struct al_run_request rq = {.plan = p->rq.plan,
				    .audit = sess_audit_open(s),
				    .run_id = s->id,
				    .probed = p->rq.probed,
				    .result_dirfd = -1,
				    .session = true,
				    .pool = true,
				    .max_execs = AL_SESS_MAX_EXECS};
	if (al_run_start(&rq, &io, &s->run, &err) < 0) {
		sess_error(s, id, 500, "the pool's sandbox could not start: %s", err.msg);
		return -EIO;
	}
	struct al_msg_out o;
	al_msg_begin(&o, AL_MSG_SESSION_STARTED, id);
	send_msg(s, &o);
	while (!al_run_session_ready(s->run))
		if (al_run_step(s->run, 100))
			break;
	if (!al_run_session_ready(s->run)) {
		const struct al_run_result *res = al_run_wait(s->run, NULL);
		sess_error(s, id, 500, "the pool's sandbox ended before it was ready (%s)",
			   al_reason_name(res->reason));
		return -EIO;
	}
	al_msg_begin(&o, AL_MSG_POOL_READY, id);
	send_msg(s, &o);
	return hold(s, p, operator_env);
}
