/* A session process (`airlock __session`, exec'd by the monitor with its
 * socket at fd 3): it holds one sandbox's request, plan, credentials and
 * run, and no other's (its gateway is forked from it). Its first message
 * says what it is for: a one-shot run (the task request plus argv or code,
 * run once, answered with the record and the output), or a live sandbox
 * (POST /v1/sandboxes): the task request made a plan through the request
 * layer, a run started in session mode, then every request for that
 * sandbox served in a loop (execs: sexec.c, files: sfiles.c, the audit
 * stream, the lifetime) until it is deleted, its lifetime or idle timeout
 * ends it, or the monitor goes. */
#include "serve/sess.h"

#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "audit/audit.h"
#include "core/cleanup.h"
#include "core/sys.h"
#include "core/util.h"
#include "serve/internal.h"
#include "serve/serve.h"

/* --- answers ---------------------------------------------------------- */

static void send_frame(struct sess *s, struct al_msg_out *o)
{
	if (al_msg_end(o) < 0) {
		free(o->buf);
		return;
	}
	al_chan_queue(&s->ch, o, -1);
}

void sess_answer_raw(struct sess *s, uint64_t req, unsigned status, const char *ctype,
		     const void *body, size_t len)
{
	struct al_msg_out o;

	al_msg_begin(&o, AL_MSG_SESSION_DONE, req);
	al_msg_put_u32(&o, AL_TAG_STATUS, status);
	al_msg_put_str(&o, AL_TAG_CTYPE, ctype);
	al_msg_put_bytes(&o, AL_TAG_BODY, body, len);
	send_frame(s, &o);
}

void sess_answer(struct sess *s, uint64_t req, unsigned status, json_t *body)
{
	/* body is NULL when it could not be packed (text that is not UTF-8):
	 * a 500 with a fixed message, and the session goes on. */
	static const char failed[] = "{\"error\":\"the answer could not be encoded\"}";
	char *t = body ? json_dumps(body, JSON_COMPACT) : NULL;
	/* Over what one message carries it would be dropped and the request
	 * left waiting: a 500 saying so instead. */
	static const char big[] = "{\"error\":\"the answer is over 48 MiB as JSON\"}";

	if (t && strlen(t) > AL_MSG_MAX - 4096)
		sess_answer_raw(s, req, 500, "application/json", big, sizeof(big) - 1);
	else if (t)
		sess_answer_raw(s, req, status, "application/json", t, strlen(t));
	else
		sess_answer_raw(s, req, 500, "application/json", failed, sizeof(failed) - 1);
	free(t);
	json_decref(body);
}

void sess_error(struct sess *s, uint64_t req, unsigned status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	json_t *body = al_serve_error_json(fmt, ap);
	va_end(ap);
	sess_answer(s, req, status, body);
}

void sess_stream_head(struct sess *s, uint64_t req, const char *ctype)
{
	struct al_msg_out o;

	al_msg_begin(&o, AL_MSG_SESSION_DONE, req);
	al_msg_put_u32(&o, AL_TAG_STATUS, 200);
	al_msg_put_str(&o, AL_TAG_CTYPE, ctype);
	al_msg_put_u32(&o, AL_TAG_STREAM, 1);
	al_msg_put_bytes(&o, AL_TAG_BODY, "", 0);
	send_frame(s, &o);
}

void sess_chunk(struct sess *s, uint64_t req, const void *p, size_t len, bool end)
{
	struct al_msg_out o;

	al_msg_begin(&o, AL_MSG_CHUNK, req);
	al_msg_put_bytes(&o, AL_TAG_BODY, p, len);
	if (end)
		al_msg_put_u32(&o, AL_TAG_END, 1);
	send_frame(s, &o);
}

void sess_event(struct sess *s, enum al_sess_event ev, const char *name, uint64_t n)
{
	struct al_msg_out o;

	al_msg_begin(&o, AL_MSG_SESSION_EVENT, 0);
	al_msg_put_u32(&o, AL_TAG_EVENT, ev);
	if (name)
		al_msg_put_str(&o, AL_TAG_REASON, name);
	if (ev == AL_SEV_EXEC)
		al_msg_put_u64(&o, AL_TAG_US, n);
	if (ev == AL_SEV_DENIAL)
		al_msg_put_u64(&o, AL_TAG_DENIALS, n);
	send_frame(s, &o);
}

/* --- the audit stream --------------------------------------------------- */

/* The run's audit sink: every event a line in the bounded buffer the
 * audit endpoint serves, and its followers'; denials (metrics.c says
 * which events are) also to the execs and, by kind, to the metrics. */
static void on_audit(void *data, const char *event, json_t *fields)
{
	struct sess *s = data;
	char ts[40];
	json_t *o = json_object();

	al_audit_timestamp(ts, sizeof(ts));
	json_object_set_new(o, "ts", json_string(ts));
	json_object_set_new(o, "run", json_string(s->id));
	json_object_set_new(o, "event", json_string(event));
	if (fields)
		json_object_update(o, fields);
	int kind = fields ? al_denial_kind_of(event, fields) : -1;
	if (kind >= 0) {
		sess_exec_denial(s, o);
		sess_ctx_denial(s, o);
		sess_event(s, AL_SEV_DENIAL, al_denial_kind_name(kind), 1);
	}
	sess_publish(s, &s->audit, &s->audit_subs, o);
	json_decref(fields);
}

struct al_audit *sess_audit_open(struct sess *s)
{
	s->audit.max = AL_SESS_AUDIT_MAX;
	return s->audit_stream = al_audit_sink(on_audit, s);
}

static void audit_get(struct sess *s, uint64_t req, const char *query)
{
	if (!sess_query_flag(query, "follow"))
		return sess_answer_raw(s, req, 200, "application/x-ndjson", s->audit.buf,
				       s->audit.len);
	sess_stream_head(s, req, "application/x-ndjson");
	if (s->audit.len)
		sess_chunk(s, req, s->audit.buf, s->audit.len, false);
	sess_subs_add(&s->audit_subs, req);
}

/* --- the request -------------------------------------------------------- */

static json_t *errors_json(const char *what, const struct al_errors *errs)
{
	json_t *a = json_array();

	for (size_t i = 0; i < errs->n; i++)
		json_array_append_new(a, json_string(errs->v[i].text));
	return json_pack("{s:s, s:o}", "error", errs->n ? errs->v[0].text : what, "errors", a);
}

bool sess_seconds(json_t *v, uint64_t *ms)
{
	double d = json_is_number(v) ? json_number_value(v) : -1;

	/* Checked before any cast: a double past the target's range makes the
	 * cast undefined (0 or INT64_MIN on x86-64). Under a millisecond is
	 * one, never 0 (which means "none"). */
	if (!isfinite(d) || d <= 0 || d > AL_SERVE_SECONDS_MAX)
		return false;
	*ms = d * 1000.0 < 1.0 ? 1 : (uint64_t)(d * 1000.0);
	return true;
}

/* A number of seconds (integer or fraction) in field name of o, as ms. */
static int seconds_field(json_t *o, const char *name, uint64_t *ms, struct al_errors *errs)
{
	json_t *v = json_object_get(o, name);

	if (!v)
		return 0;
	if (!sess_seconds(v, ms)) {
		al_errors_add(errs, EINVAL, "request", name,
			      "must be a number of seconds, above 0 and at most a year (%d)",
			      AL_SERVE_SECONDS_MAX);
		return -EINVAL;
	}
	json_object_del(o, name);
	return 0;
}

/* The request's own fields taken out of req (what is left is the task
 * policy): for a sandbox its profile, lifetimes, idle timeout, metadata,
 * execs at once; for a one-shot run its profile, command and stdin. */
static int take_sandbox_fields(struct sess *s, json_t *req, uint64_t *lifetime,
			       struct al_errors *errs)
{
	json_t *prof = json_object_get(req, "profile"), *meta = json_object_get(req, "metadata"),
	       *act = json_object_get(req, "idle_action"), *mx = json_object_get(req, "max_execs");

	seconds_field(req, "lifetime", lifetime, errs);
	seconds_field(req, "max_lifetime", &s->max_lifetime_ms, errs);
	seconds_field(req, "idle_timeout", &s->idle_ms, errs);
	if (prof && !json_is_string(prof))
		al_errors_add(errs, EINVAL, "request", "profile", "must be a string");
	else if (prof)
		s->profile = xstrdup(json_string_value(prof));
	if (meta) {
		char *t = json_dumps(meta, JSON_COMPACT);
		size_t n = t ? strlen(t) : 0;
		free(t);
		if (!json_is_object(meta))
			al_errors_add(errs, EINVAL, "request", "metadata", "must be an object");
		else if (n > AL_SERVE_META_MAX)
			al_errors_add(errs, EINVAL, "request", "metadata",
				      "is %zu bytes as JSON; at most %u", n, AL_SERVE_META_MAX);
		else {
			const char *k;
			json_t *v;
			json_object_foreach(meta, k, v) if (!json_is_string(v))
			{
				al_errors_add(errs, EINVAL, "request", "metadata",
					      "\"%s\": values must be strings", k);
				break;
			}
		}
	}
	s->meta = meta ? json_incref(meta) : json_object();
	if (act && (!json_is_string(act) || (strcmp(json_string_value(act), "kill") != 0 &&
					     strcmp(json_string_value(act), "pause") != 0)))
		al_errors_add(errs, EINVAL, "request", "idle_action",
			      "must be \"kill\" or \"pause\"");
	else if (act)
		s->idle_pause = strcmp(json_string_value(act), "pause") == 0;
	if (mx &&
	    (!json_is_integer(mx) || json_integer_value(mx) < 1 || json_integer_value(mx) > 64))
		al_errors_add(errs, EINVAL, "request", "max_execs", "must be an integer, 1 to 64");
	else if (mx)
		s->max_execs = (unsigned)json_integer_value(mx);
	if (*lifetime && s->max_lifetime_ms && *lifetime > s->max_lifetime_ms)
		al_errors_add(errs, EINVAL, "request", "lifetime", "is over max_lifetime");
	for (const char *const *f =
		 (const char *const[]){"profile", "metadata", "idle_action", "max_execs", NULL};
	     *f; f++)
		json_object_del(req, *f);
	return al_errors_count(errs) ? -EINVAL : 0;
}

/* The body as a task policy (its format version may be left out: {}
 * takes the defaults). */
static int load_policy(json_t *req, struct al_policy **ret, struct al_errors *errs)
{
	if (!json_object_get(req, "version"))
		json_object_set_new(req, "version", json_integer(1));
	char *text = json_dumps(req, JSON_COMPACT);
	int r = al_policy_load_string_all("request", text, strlen(text), ret, errs);
	free(text);
	return r;
}

/* The request layer, from the task to the final plan. 0, or < 0 with the
 * answer sent (400, 403 with the engine's reasons, 500). */
static int build(struct sess *s, uint64_t req, const char *operator_file, const char *operator_env,
		 unsigned flags)
{
	_cleanup_(al_errors_clear) struct al_errors errs = {0};
	struct al_error err = {0};

	s->cfg = (struct al_request_config){.operator_file = operator_file,
					    .operator_env = operator_env,
					    .plan_flags = flags,
					    .run_id = s->id,
					    .identity = &s->who,
					    .never_paths = (const char *const *)s->never};
	al_request_init(&s->rq, &s->cfg, s->policy);
	if (al_request_plan(&s->rq, &errs) < 0) {
		if (!s->rq.refused) {
			sess_answer(s, req, 400, errors_json("the request cannot be run", &errs));
			return -EINVAL;
		}
		struct al_errors lines = {0};
		json_t *a = json_array();
		al_request_refusals(&s->rq, &lines);
		for (size_t i = 0; i < lines.n; i++)
			json_array_append_new(a, json_string(lines.v[i].text));
		al_errors_clear(&lines);
		sess_answer(s, req, 403,
			    json_pack("{s:s, s:o}", "error",
				      "the operator policy refused the request", "reasons", a));
		return -EPERM;
	}
	/* A layer that cannot keep what the request asks (a live sandbox
	 * where it cannot exec, a terminal, egress rules) is the client's
	 * to fix: 400 with the reason, before the backend is probed. */
	const struct al_backend_ops *ops = al_backend_lookup(s->rq.plan->backend);
	if (ops && al_backend_admit(ops, s->rq.plan, flags & AL_PLAN_COMMAND_OPTIONAL, &err) < 0) {
		sess_error(s, req, 400, "%s", err.msg);
		return -EINVAL;
	}
	struct rlimit no_core = {0, 0};
	if (al_request_probe(&s->rq, NULL, &err) < 0 || setrlimit(RLIMIT_CORE, &no_core) < 0 ||
	    (geteuid() == 0 && prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0) ||
	    al_request_finish(&s->rq, &err) < 0) {
		sess_error(s, req, 500, "%s", err.msg[0] ? err.msg : strerror(errno));
		return -EIO;
	}
	return 0;
}

/* --- a one-shot run ------------------------------------------------------ */

struct out {
	char *buf[2];
	size_t len[2];
	bool cut[2];
};

static void on_output(void *data, int which, const void *p, size_t n)
{
	struct out *o = data;

	if (o->len[which] + n > AL_SERVE_OUTPUT_MAX) {
		o->cut[which] = true;
		n = AL_SERVE_OUTPUT_MAX - o->len[which];
	}
	o->buf[which] = xrealloc(o->buf[which], o->len[which] + n + 1);
	memcpy(o->buf[which] + o->len[which], p, n);
	o->len[which] += n;
}

static int stdin_fd(const char *s)
{
	int fd = memfd_create("airlock-stdin", MFD_CLOEXEC);

	if (fd < 0 || al_write_all(fd, s, strlen(s)) < 0 || lseek(fd, 0, SEEK_SET) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* The run started: the monitor's setup deadline ends. Then the run is
 * stepped until it ends, and killed when the client leaves (a CANCEL for
 * id) or the monitor goes (the channel's end: the daemon is stopping). */
static void wait_cancellable(struct sess *s, uint64_t id, struct al_run *run)
{
	struct al_msg_out o;
	bool killed = false;

	al_msg_begin(&o, AL_MSG_SESSION_STARTED, id);
	send_frame(s, &o);
	al_chan_flush(&s->ch); /* still blocking: whole */
	fcntl(s->ch.fd, F_SETFL, O_NONBLOCK);
	while (!al_run_step(run, 0)) {
		struct pollfd pf[2] = {{.fd = killed ? -1 : s->ch.fd, .events = POLLIN},
				       {.fd = al_loop_fd(al_run_loop(run)), .events = POLLIN}};
		if (poll(pf, 2, 1000) < 0 && errno != EINTR)
			break;
		if (!(pf[0].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		struct al_msg in;
		struct al_error err = {0};
		int r = al_chan_read(&s->ch);
		bool cancel = r < 0 || s->ch.eof;
		while (!cancel && (r = al_chan_next(&s->ch, &in, &err)) > 0)
			cancel = in.type == AL_MSG_CANCEL && in.id == id;
		if (cancel || r < 0) {
			al_run_kill(run);
			killed = true;
		}
	}
	fcntl(s->ch.fd, F_SETFL, 0);
}

static int oneshot(struct sess *s, uint64_t id, json_t *req, const char *operator_file,
		   const char *operator_env)
{
	_cleanup_(al_errors_clear) struct al_errors errs = {0};
	_cleanup_(al_strv_freep) char **argv = NULL;
	_cleanup_free_ char *in_text = NULL;
	struct al_error err = {0}, rec_err = {0};
	struct out out = {0};
	json_t *prof = json_object_get(req, "profile");

	sess_take_command(req, &argv, &in_text, &errs);
	if (prof && !json_is_string(prof))
		al_errors_add(&errs, EINVAL, "request", "profile", "must be a string");
	else if (prof)
		s->profile = xstrdup(json_string_value(prof));
	json_object_del(req, "profile");
	if (!al_errors_count(&errs))
		load_policy(req, &s->policy, &errs);
	if (al_errors_count(&errs)) {
		sess_answer(s, id, 400, errors_json("bad request", &errs));
		return 0;
	}
	if (argv) {
		al_strv_free(s->policy->command);
		s->policy->command = TAKE_PTR(argv);
	}
	if (!s->policy->command) {
		sess_error(s, id, 400, "no command: give \"argv\", or \"code\" and \"language\"");
		return 0;
	}
	if (s->profile) {
		free(s->policy->profile);
		s->policy->profile = xstrdup(s->profile);
	}
	if (build(s, id, operator_file, operator_env, 0) < 0)
		return 0;
	int in_fd = in_text ? stdin_fd(in_text) : -1;
	struct al_supervisor_io io = {
	    .stdin_fd = in_fd, .stdout_fd = -1, .stderr_fd = -1, .output = on_output, .data = &out};
	struct al_run_request rq = {.plan = s->rq.plan,
				    .run_id = s->id,
				    .cred = s->rq.cred,
				    .probed = s->rq.probed,
				    .result_dirfd = -1,
				    .confine_self = true};
	struct al_run *run = NULL;
	if (al_run_start(&rq, &io, &run, &err) == 0)
		wait_cancellable(s, id, run);
	const struct al_run_result *res = al_run_wait(run, &rec_err);
	json_t *o = al_result_json(s->rq.plan, res, s->id);
	sess_put_output(o, "stdout", out.buf[0], out.len[0], out.cut[0]);
	sess_put_output(o, "stderr", out.buf[1], out.len[1], out.cut[1]);
	if (err.msg[0])
		json_object_set_new(o, "error", json_string(err.msg));
	/* What it was refused, by kind, to the metrics (before its answer:
	 * the monitor forgets the run then). */
	const uint64_t nd[AL_DENIAL_N] = {[AL_DENIAL_NETWORK] = res->network.denied,
					  [AL_DENIAL_DNS] = res->network.dns_refused,
					  [AL_DENIAL_CUT] = res->network.cut,
					  [AL_DENIAL_SECRET] = res->network.misuse,
					  [AL_DENIAL_SYSCALL] = res->syscalls_denied};
	for (int k = 0; k < AL_DENIAL_N; k++)
		if (nd[k])
			sess_event(s, AL_SEV_DENIAL, al_denial_kind_name(k), nd[k]);
	const char *reason = al_reason_name(res->reason);
	unsigned status = res->reason == AL_END_SETUP_ERROR ? 500 : 200;
	/* The sandbox is gone before the answer goes. */
	char *t = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	al_run_free(run);
	if (in_fd >= 0)
		close(in_fd);
	free(out.buf[0]);
	free(out.buf[1]);
	struct al_msg_out m;
	al_msg_begin(&m, AL_MSG_SESSION_DONE, id);
	al_msg_put_u32(&m, AL_TAG_STATUS, status);
	al_msg_put_bytes(&m, AL_TAG_BODY, t, strlen(t));
	al_msg_put_str(&m, AL_TAG_REASON, reason);
	free(t);
	send_frame(s, &m);
	return 0;
}

/* --- a live sandbox -------------------------------------------------------- */

int sess_create_request(struct sess *s, uint64_t id, json_t *req, const char *operator_file,
			const char *operator_env, uint64_t *lifetime)
{
	_cleanup_(al_errors_clear) struct al_errors errs = {0};

	*lifetime = 0;
	s->max_execs = AL_SESS_MAX_EXECS;
	if (take_sandbox_fields(s, req, lifetime, &errs) == 0)
		load_policy(req, &s->policy, &errs);
	if (al_errors_count(&errs)) {
		sess_answer(s, id, 400, errors_json("bad request", &errs));
		return -EINVAL;
	}
	if (s->profile) {
		free(s->policy->profile);
		s->policy->profile = xstrdup(s->profile);
	}
	/* The run's deadline is the sandbox's longest lifetime: what its
	 * tokens and interception CA are bounded by; the lifetime asked
	 * for (and extended) ends it sooner. */
	if (s->max_lifetime_ms || *lifetime)
		s->policy->timeout_ms = s->max_lifetime_ms ? s->max_lifetime_ms : *lifetime;
	if (build(s, id, operator_file, operator_env, AL_PLAN_COMMAND_OPTIONAL) < 0)
		return -EINVAL;
	s->max_lifetime_ms = s->rq.plan->timeout_ms;
	return 0;
}

void sess_created(struct sess *s, uint64_t id, uint64_t lifetime)
{
	s->created_ms = s->last_active_ms = sess_now(s);
	al_audit_timestamp(s->created_ts, sizeof(s->created_ts));
	s->deadline_ms = s->created_ms + (int64_t)(lifetime ? lifetime : s->max_lifetime_ms);
	char *meta = json_dumps(s->meta, JSON_COMPACT);
	json_t *o = sess_info(s);
	char *body = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	struct al_msg_out m;
	al_msg_begin(&m, AL_MSG_SESSION_DONE, id);
	al_msg_put_u32(&m, AL_TAG_STATUS, 201);
	al_msg_put_str(&m, AL_TAG_CTYPE, "application/json");
	al_msg_put_bytes(&m, AL_TAG_BODY, body, strlen(body));
	al_msg_put_bytes(&m, AL_TAG_META, meta, strlen(meta));
	free(body);
	free(meta);
	send_frame(s, &m);
}

/* A cold create: the request's plan, its own sandbox made for it. */
static int create(struct sess *s, uint64_t id, json_t *req, const char *operator_file,
		  const char *operator_env)
{
	struct al_error err = {0};
	uint64_t lifetime = 0;

	if (sess_create_request(s, id, req, operator_file, operator_env, &lifetime) < 0)
		return -EINVAL;
	struct al_audit *audit = sess_audit_open(s);
	static const struct al_supervisor_io io = {
	    .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1};
	struct al_run_request rq = {.plan = s->rq.plan,
				    .audit = audit,
				    .run_id = s->id,
				    .cred = s->rq.cred,
				    .probed = s->rq.probed,
				    .result_dirfd = -1,
				    .session = true,
				    .max_execs = s->max_execs};
	if (al_run_start(&rq, &io, &s->run, &err) < 0) {
		sess_error(s, id, 500, "the sandbox could not start: %s", err.msg);
		return -EIO;
	}
	/* Until it takes execs (its own setup is bounded by the run). */
	while (!al_run_session_ready(s->run))
		if (al_run_step(s->run, 100))
			break;
	if (!al_run_session_ready(s->run)) {
		const struct al_run_result *res = al_run_wait(s->run, NULL);
		sess_error(s, id, 500, "the sandbox ended before it was ready (%s)",
			   al_reason_name(res->reason));
		return -EIO;
	}
	sess_created(s, id, lifetime);
	return 0;
}

/* Everything of the sandbox ended and removed; then the answer. */
static void end_run(struct sess *s)
{
	if (s->run) {
		al_run_kill(s->run);
		const struct al_run_result *res = al_run_wait(s->run, NULL);
		/* A limit hit, counted once: one that ended by a limit of its
		 * own (its max_lifetime, pids, budget, ...), or killed here as
		 * its lifetime ran out (not for a DELETE or an idle timeout). */
		const char *limit = res ? al_reason_name(res->reason) : NULL;
		if (al_metrics_limit_index(limit) < 0)
			limit = s->lifetime_over ? "timeout" : NULL;
		if (limit)
			sess_event(s, AL_SEV_LIMIT, limit, 0);
		sess_exec_finish(s);
		sess_ctx_free(s);
		sess_files_free(s);
		al_run_free(s->run);
		s->run = NULL;
	}
	for (size_t i = 0; i < s->audit_subs.n; i++)
		sess_chunk(s, s->audit_subs.v[i], "", 0, true);
	s->audit_subs.n = 0;
	s->ended = true;
}

static void dispatch(struct sess *s, const struct al_msg *in)
{
	_cleanup_free_ char *path = al_msg_strdup(in, AL_TAG_PATH);
	size_t len = 0;
	const uint8_t *body = al_msg_bytes(in, AL_TAG_BODY, &len);
	uint64_t req = in->id;
	char *sp = strchr(path, ' '), *query;

	if (!sp)
		return sess_error(s, req, 400, "bad request path");
	*sp = '\0';
	const char *method = path, *rest = sp + 1;
	if ((query = strchr(sp + 1, '?')))
		*query++ = '\0';
	if (body == NULL)
		body = (const uint8_t *)"";
	bool get = !strcmp(method, "GET"), post = !strcmp(method, "POST"),
	     del = !strcmp(method, "DELETE");
	if (!*rest && get)
		return sess_answer(s, req, 200, sess_info(s));
	if (!*rest && del) {
		end_run(s);
		return sess_answer(s, req, 200, json_pack("{s:s, s:b}", "id", s->id, "deleted", 1));
	}
	if (!strcmp(rest, "timeout") && post)
		return sess_extend(s, req, body, len);
	if (!strcmp(rest, "pause") && post)
		return sess_pause_op(s, req, true);
	if (!strcmp(rest, "resume") && post)
		return sess_pause_op(s, req, false);
	/* What acts in the sandbox: refused while a request paused it, and
	 * resumes one paused while idle (reading what it did does not). */
	if (!strcmp(rest, "exec") && post)
		return sess_act(s, req) ? sess_exec_start(s, req, body, len) : (void)0;
	if (!strcmp(rest, "execs") && get)
		return sess_exec_list(s, req);
	if (!strncmp(rest, "execs/", 6) && (get || sess_act(s, req)))
		return sess_exec_op(s, req, method, rest + 6, query, body, len);
	if (!strncmp(rest, "execs/", 6))
		return;
	if (!strncmp(rest, "files/", 6) || !strcmp(rest, "files"))
		return sess_act(s, req)
			   ? sess_files(s, req, method, rest[5] ? rest + 6 : "", query, body, len)
			   : (void)0;
	/* Code contexts: reading them does not resume a paused sandbox;
	 * making, running or deleting one acts in it. */
	if (!strncmp(rest, "contexts", 8) && (!rest[8] || rest[8] == '/'))
		return get || sess_act(s, req) ? sess_ctx(s, req, method, rest + 8, body, len)
					       : (void)0;
	if (!strcmp(rest, "audit") && get)
		return audit_get(s, req, query);
	sess_error(s, req, 404, "no route for %s /v1/sandboxes/%s/%s", method, s->id, rest);
}

static void on_msg(struct sess *s, const struct al_msg *in)
{
	if (in->type == AL_MSG_SESSION_REQ)
		return dispatch(s, in);
	if (in->type == AL_MSG_CANCEL) {
		sess_subs_del(&s->audit_subs, in->id);
		sess_exec_cancel(s, in->id);
	}
}

/* Serve the sandbox until it ends (deleted, its lifetime or idle timeout
 * over, the monitor gone) and every answer went out. */
static void serve(struct sess *s)
{
	for (;;) {
		int wake = 1000;
		if (s->run && sess_clocks(s, &wake))
			end_run(s);
		if (s->run)
			sess_ctx_tick(s, &wake);
		if (s->ended && !al_chan_pending(&s->ch))
			return;
		struct pollfd pf[2] = {
		    {.fd = s->ch.fd, .events = POLLIN | (al_chan_pending(&s->ch) ? POLLOUT : 0)},
		    {.fd = s->run ? al_loop_fd(al_run_loop(s->run)) : -1, .events = POLLIN}};
		if (poll(pf, 2, s->ended ? 1000 : wake) < 0 && errno != EINTR)
			return;
		if (s->run && al_run_step(s->run, 0)) {
			/* It ended on its own (its run's timeout, a failure). */
			end_run(s);
		}
		if (pf[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			struct al_msg in;
			struct al_error err = {0};
			int r;
			if (al_chan_read(&s->ch) < 0 || s->ch.eof) {
				end_run(s); /* the monitor is gone */
				return;
			}
			while ((r = al_chan_next(&s->ch, &in, &err)) > 0)
				on_msg(s, &in);
			if (r < 0) {
				end_run(s);
				return;
			}
		}
		if (al_chan_flush(&s->ch) < 0) {
			end_run(s);
			return;
		}
	}
}

/* Who asked, as the monitor says: "uid:N" with its gids, or
 * "token:NAME"; and the daemon's own paths. */
int sess_who_from(struct sess *s, const struct al_msg *in)
{
	_cleanup_free_ char *id = al_msg_strdup(in, AL_TAG_IDENTITY);
	size_t len = 0, nl = 0;
	const uint8_t *g = al_msg_bytes(in, AL_TAG_GIDS, &len);
	const uint8_t *never = al_msg_bytes(in, AL_TAG_NEVER, &nl);
	char *end;

	if (strncmp(id, "token:", 6) == 0) {
		snprintf(s->token, sizeof(s->token), "%s", id + 6);
		s->who.token = s->token;
	} else if (strncmp(id, "uid:", 4) == 0) {
		errno = 0;
		unsigned long u = strtoul(id + 4, &end, 10);
		if (errno || *end || end == id + 4 || u > UINT32_MAX - 1)
			return -EINVAL;
		s->who.uid = (uid_t)u;
	} else {
		return -EINVAL;
	}
	for (size_t i = 0; g && i < len / 4 && i < AL_SERVE_GIDS_MAX; i++) {
		uint32_t v;
		memcpy(&v, g + 4 * i, 4);
		s->gids[s->who.n_gids++] = v;
	}
	s->who.gids = s->gids;
	/* NUL-ended paths, one after the other. */
	for (size_t off = 0; never && off < nl;) {
		const uint8_t *z = memchr(never + off, 0, nl - off);
		if (!z)
			return -EINVAL;
		al_strv_push(&s->never, (const char *)never + off);
		off = (size_t)(z - never) + 1;
	}
	return 0;
}

int al_session_main(int fd, const char *operator_env)
{
	struct sess s = {0};
	struct al_msg in;
	struct al_error err = {0};
	size_t len;

	signal(SIGPIPE, SIG_IGN);
	fcntl(fd, F_SETFD, FD_CLOEXEC);
	al_chan_init(&s.ch, fd);
	if (al_chan_recv_sync(&s.ch, &in, &err) <= 0 || in.type != AL_MSG_SESSION_RUN)
		return 125;
	uint64_t id = in.id;
	unsigned op = al_msg_u32(&in, AL_TAG_OP, AL_OP_RUN);
	const uint8_t *body = al_msg_bytes(&in, AL_TAG_BODY, &len);
	_cleanup_free_ char *operator_file = al_msg_strdup(&in, AL_TAG_OPERATOR);
	_cleanup_free_ char *sid = al_msg_strdup(&in, AL_TAG_SESSION_ID);
	snprintf(s.id, sizeof(s.id), "%s", sid);
	if (op != AL_OP_POOL && sess_who_from(&s, &in) < 0)
		return 125;
	json_error_t je;
	json_t *req = json_loadb((const char *)body, len, JSON_REJECT_DUPLICATES, &je);
	if (!req || !json_is_object(req))
		sess_error(&s, id, 400, "the body must be a JSON object");
	else if (op == AL_OP_RUN)
		oneshot(&s, id, req, operator_file, operator_env);
	else if ((op == AL_OP_POOL ? sess_pool_main(&s, id, &in, operator_env)
				   : create(&s, id, req, operator_file, operator_env)) == 0) {
		fcntl(fd, F_SETFL, O_NONBLOCK);
		serve(&s);
		fcntl(fd, F_SETFL, 0);
	}
	json_decref(req);
	/* What is left to say, said (blocking: nothing else to do). */
	while (al_chan_pending(&s.ch) && al_chan_flush(&s.ch) == 0) {
		struct pollfd pf = {.fd = fd, .events = POLLOUT};
		poll(&pf, 1, 1000);
	}
	end_run(&s);
	sess_pool_free(&s); /* the pool's plan, once its run is gone */
	sess_ctx_free(&s);
	sess_files_free(&s);
	sess_exec_free(&s);
	al_audit_close(s.audit_stream);
	al_request_clear(&s.rq);
	al_policy_free(s.policy);
	json_decref(s.meta);
	al_strv_free(s.never);
	free(s.profile);
	free(s.audit.buf);
	free(s.audit_subs.v);
	al_chan_close(&s.ch);
	return 0;
}
