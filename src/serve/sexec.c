/* A live sandbox's execs (POST /v1/sandboxes/{id}/exec and execs/...):
 * each one the run layer's exec (run/session.h: started by the sandbox's
 * own init, confined as the first command, in its own cgroup), answered
 * three ways: "wait" (the record with its output at the end), streamed
 * (newline-delimited JSON events as they happen: stdout, stderr, denial,
 * end), or "background" (its id at once; its events kept in a bounded
 * log that a reconnect replays and then follows). */
#include "serve/sess.h"

#include <errno.h>
#include <openssl/evp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/cleanup.h"
#include "core/sys.h"
#include "core/util.h"
#include "policy/engine.h"
#include "serve/serve.h"

/* The length of p[0..n) as a JSON string's text (compact, UTF-8 kept):
 * a control byte is 6 ("\u0001"), a quote, backslash or \b\f\n\r\t 2. */
static size_t json_text_len(const char *p, size_t n)
{
	size_t len = n;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)p[i];
		if (c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' ||
		    c == '\t')
			len += 1;
		else if (c < 0x20)
			len += 5;
	}
	return len;
}

void sess_put_output(json_t *o, const char *name, const char *p, size_t n, bool cut)
{
	/* Text when it is UTF-8, unless as JSON it would be more than 64 KiB
	 * longer than as base64: 8 MiB of control bytes would be 48 MiB of
	 * escapes, over what one answer carries (AL_MSG_MAX) with both
	 * streams. (A short chunk of terminal escapes stays text.) */
	json_t *s = p && json_text_len(p, n) > 4 * ((n + 2) / 3) + (64u << 10)
			? NULL
			: json_stringn(p ? p : "", n);
	char key[32];

	snprintf(key, sizeof(key), "%s_base64", name);
	if (!s) {
		char *b = xmalloc(4 * ((n + 2) / 3) + 1);
		EVP_EncodeBlock((unsigned char *)b, (const unsigned char *)p, (int)n);
		s = json_string(b);
		free(b);
		json_object_set_new(o, key, json_true());
	}
	json_object_set_new(o, name, s);
	snprintf(key, sizeof(key), "%s_truncated", name);
	if (cut)
		json_object_set_new(o, key, json_true());
}

int sess_take_command(json_t *o, char ***argv, char **in, struct al_errors *errs)
{
	json_t *a = json_object_get(o, "argv"), *code = json_object_get(o, "code"),
	       *lang = json_object_get(o, "language"), *sin = json_object_get(o, "stdin");
	size_t i;
	json_t *v;

	if (a && code)
		al_errors_add(errs, EINVAL, "request", NULL, "give \"argv\" or \"code\", not both");
	if (a) {
		if (!json_is_array(a) || json_array_size(a) == 0)
			al_errors_add(errs, EINVAL, "request", "argv",
				      "must be a non-empty array of strings");
		json_array_foreach(a, i, v)
		{
			if (!json_is_string(v)) {
				al_errors_add(errs, EINVAL, "request", "argv",
					      "element %zu is not a string", i);
				break;
			}
			al_strv_push(argv, json_string_value(v));
		}
	}
	if (code) {
		const char *l = json_string_value(lang);
		if (!json_is_string(code))
			al_errors_add(errs, EINVAL, "request", "code", "must be a string");
		else if (!l)
			al_errors_add(errs, EINVAL, "request", "language",
				      "\"code\" needs \"language\": python, bash or node");
		else if (!strcmp(l, "python") || !strcmp(l, "bash") || !strcmp(l, "node")) {
			/* The interpreter inside the sandbox, found in its PATH. */
			al_strv_push(argv, !strcmp(l, "python") ? "python3" : l);
			al_strv_push(argv, !strcmp(l, "node") ? "-e" : "-c");
			al_strv_push(argv, json_string_value(code));
		} else
			al_errors_add(errs, EINVAL, "request", "language",
				      "\"%s\" is not python, bash or node", l);
	} else if (lang) {
		al_errors_add(errs, EINVAL, "request", "language", "only goes with \"code\"");
	}
	if (sin && !json_is_string(sin))
		al_errors_add(errs, EINVAL, "request", "stdin", "must be a string");
	else if (sin)
		*in = xstrdup(json_string_value(sin));
	for (const char *const *f =
		 (const char *const[]){"argv", "code", "language", "stdin", NULL};
	     *f; f++)
		json_object_del(o, *f);
	return al_errors_count(errs) ? -EINVAL : 0;
}

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static struct sx *find(struct sess *s, const char *id)
{
	for (size_t i = 0; i < s->n_x; i++)
		if (!strcmp(s->x[i]->id, id))
			return s->x[i];
	return NULL;
}

unsigned sess_exec_running(const struct sess *s)
{
	unsigned n = 0;

	for (size_t i = 0; i < s->n_x; i++)
		n += s->x[i]->x != NULL;
	return n;
}

unsigned sess_exec_busy(const struct sess *s)
{
	unsigned n = 0;

	for (size_t i = 0; i < s->n_x; i++)
		n += s->x[i]->x != NULL && !s->x[i]->tap;
	return n + sess_ctx_busy(s) + s->n_fops;
}

static void on_output(void *data, int which, const void *p, size_t n)
{
	struct sx *x = data;

	if (x->tap) {
		x->tap->output(x->tap_data, which, p, n);
		return;
	}
	if (x->mode == SX_WAIT) {
		if (x->len[which] + n > AL_SERVE_OUTPUT_MAX) {
			x->cut[which] = true;
			n = AL_SERVE_OUTPUT_MAX - x->len[which];
		}
		x->out[which] = xrealloc(x->out[which], x->len[which] + n + 1);
		memcpy(x->out[which] + x->len[which], p, n);
		x->len[which] += n;
		return;
	}
	json_t *o = json_pack("{s:s}", "type", which ? "stderr" : "stdout");
	sess_put_output(o, "data", p, n, false);
	sess_publish(x->s, &x->log, &x->subs, o);
}

static void free_sx(struct sx *x)
{
	free(x->out[0]);
	free(x->out[1]);
	json_decref(x->denials);
	json_decref(x->argv);
	json_decref(x->result);
	free(x->log.buf);
	free(x->subs.v);
	free(x);
}

/* Past AL_SESS_ENDED_MAX ended execs, the oldest ended one that nobody
 * follows goes. */
static void trim_ended(struct sess *s)
{
	size_t ended = 0;

	for (size_t i = 0; i < s->n_x; i++)
		ended += s->x[i]->x == NULL;
	for (size_t i = 0; ended > AL_SESS_ENDED_MAX && i < s->n_x; i++)
		if (!s->x[i]->x && !s->x[i]->subs.n) {
			free_sx(s->x[i]);
			memmove(&s->x[i], &s->x[i + 1], (s->n_x - i - 1) * sizeof(*s->x));
			s->n_x--;
			ended--;
			i--;
		}
}

static void on_ended(void *data, const struct al_exec_result *res)
{
	struct sx *x = data;
	struct sess *s = x->s;

	x->x = NULL;
	x->result = al_exec_result_json(res);
	s->last_active_ms = sess_now(s);
	sess_event(s, AL_SEV_EXEC, al_exec_reason_name(res->reason), now_us() - x->t0_us);
	if (x->tap) {
		x->tap->ended(x->tap_data, res);
		x->tap = NULL;
	} else if (x->mode == SX_WAIT) {
		json_t *o = json_deep_copy(x->result);
		sess_put_output(o, "stdout", x->out[0], x->len[0], x->cut[0]);
		sess_put_output(o, "stderr", x->out[1], x->len[1], x->cut[1]);
		json_object_set(o, "denials", x->denials);
		sess_answer(s, x->wait_req, 200, o);
		free(x->out[0]);
		free(x->out[1]);
		x->out[0] = x->out[1] = NULL;
	} else {
		sess_publish(s, &x->log, &x->subs,
			     json_pack("{s:s, s:O}", "type", "end", "result", x->result));
		for (size_t i = 0; i < x->subs.n; i++)
			sess_chunk(s, x->subs.v[i], "", 0, true);
		x->subs.n = 0;
	}
	trim_ended(s);
}

/* A size as bytes (an integer) or text ("64M"). */
static int size_field(json_t *o, const char *where, const char *name, uint64_t *ret,
		      struct al_errors *errs)
{
	json_t *v = json_object_get(o, name);

	if (!v)
		return 0;
	if ((json_is_integer(v) && json_integer_value(v) > 0 &&
	     (uint64_t)json_integer_value(v) <= AL_SIZE_MAX &&
	     (*ret = (uint64_t)json_integer_value(v))) ||
	    (json_is_string(v) && al_parse_size(json_string_value(v), ret) == 0 && *ret))
		return 0;
	al_errors_add(errs, EINVAL, where, name,
		      "must be a size above 0 and at most 4 EiB (bytes, or \"64M\")");
	return -EINVAL;
}

void sess_exec_fields(json_t *o, const char *where, char ***env, char **cwd, uint64_t *memory,
		      uint64_t *output, struct al_errors *errs)
{
	json_t *v, *val;
	const char *k;

	if ((v = json_object_get(o, "env"))) {
		if (!json_is_object(v))
			al_errors_add(errs, EINVAL, where, "env", "must be an object of strings");
		/* (val apart from v: the loop walks v, and took only the first
		 * variable while the two were one) */
		json_object_foreach(v, k, val) if (!json_is_string(val) || !*k || strchr(k, '='))
		{
			al_errors_add(errs, EINVAL, where, "env",
				      "\"%s\": a name without '=' and a string value", k);
			break;
		}
		else al_strv_push_take(env, xasprintf("%s=%s", k, json_string_value(val)));
	}
	if ((v = json_object_get(o, "cwd")) &&
	    (!json_is_string(v) || json_string_value(v)[0] != '/'))
		al_errors_add(errs, EINVAL, where, "cwd", "must be an absolute path");
	else if (v)
		*cwd = xstrdup(json_string_value(v));
	size_field(o, where, "memory", memory, errs);
	size_field(o, where, "output", output, errs);
}

/* A terminal's rows or cols: 1 to 1000 (absent: *ret unchanged). */
static void dim_field(json_t *o, const char *where, const char *name, unsigned short *ret,
		      struct al_errors *errs)
{
	json_t *v = json_object_get(o, name);

	if (!v)
		return;
	if (json_is_integer(v) && json_integer_value(v) >= 1 && json_integer_value(v) <= 1000)
		*ret = (unsigned short)json_integer_value(v);
	else
		al_errors_add(errs, EINVAL, where, name, "must be an integer, 1 to 1000");
}

/* tty, rows, cols, ttyfilter into xr. */
static void tty_fields(json_t *o, struct al_exec_request *xr, struct al_errors *errs)
{
	json_t *t = json_object_get(o, "tty"), *f = json_object_get(o, "ttyfilter");

	if (t && !json_is_boolean(t))
		al_errors_add(errs, EINVAL, "exec", "tty", "must be true or false");
	if (f && !json_is_boolean(f))
		al_errors_add(errs, EINVAL, "exec", "ttyfilter", "must be true or false");
	xr->tty = json_is_true(t);
	/* Re-encoded unless the request says not: the run layer's flag is
	 * off when zeroed. */
	xr->ttyfilter = xr->tty && !json_is_false(f);
	dim_field(o, "exec", "rows", &xr->rows, errs);
	dim_field(o, "exec", "cols", &xr->cols, errs);
	if (!xr->tty && (f || json_object_get(o, "rows") || json_object_get(o, "cols")))
		al_errors_add(errs, EINVAL, "exec", f ? "ttyfilter" : "rows",
			      "only goes with \"tty\": true");
}

void sess_exec_start(struct sess *s, uint64_t req, const uint8_t *body, size_t len)
{
	_cleanup_(al_errors_clear) struct al_errors errs = {0};
	_cleanup_(al_strv_freep) char **argv = NULL, **env = NULL;
	_cleanup_free_ char *in = NULL, *cwd = NULL;
	struct al_exec_request xr = {0};
	struct al_error err = {0};
	json_error_t je;
	json_t *o = json_loadb((const char *)body, len, JSON_REJECT_DUPLICATES, &je), *v;
	const char *k;

	if (!o || !json_is_object(o)) {
		json_decref(o);
		return sess_error(s, req, 400, "the body must be a JSON object: %s",
				  o ? "not an object" : je.text);
	}
	json_t *argv_copy = json_deep_copy(json_object_get(o, "argv"));
	sess_take_command(o, &argv, &in, &errs);
	if (!argv && !al_errors_count(&errs))
		al_errors_add(&errs, EINVAL, "exec", NULL,
			      "no command: give \"argv\", or \"code\" and \"language\"");
	bool wait = json_is_true(json_object_get(o, "wait")),
	     bg = json_is_true(json_object_get(o, "background"));
	if (wait && bg)
		al_errors_add(&errs, EINVAL, "exec", "background", "does not go with \"wait\"");
	sess_exec_fields(o, "exec", &env, &cwd, &xr.memory_bytes, &xr.output_bytes, &errs);
	if ((v = json_object_get(o, "timeout"))) {
		uint64_t ms;
		if (!sess_seconds(v, &ms))
			al_errors_add(&errs, EINVAL, "exec", "timeout",
				      "must be a number of seconds above 0 and at most %d (a year)",
				      AL_SERVE_SECONDS_MAX);
		else
			xr.timeout_ms = (int64_t)ms;
	}
	tty_fields(o, &xr, &errs);
	static const char *const known[] = {"wait",	 "background", "env",	 "cwd",
					    "timeout",	 "memory",     "output", "tty",
					    "ttyfilter", "rows",       "cols"};
	json_object_foreach(o, k, v)
	{
		size_t i = 0;
		while (i < AL_ARRAY_SIZE(known) && strcmp(k, known[i]))
			i++;
		if (i < AL_ARRAY_SIZE(known))
			continue;
		al_errors_add(&errs, EINVAL, "exec", k, "is not a field of an exec request");
		break;
	}
	if (al_errors_count(&errs)) {
		json_t *a = json_array();
		for (size_t i = 0; i < errs.n; i++)
			json_array_append_new(a, json_string(errs.v[i].text));
		json_decref(argv_copy);
		sess_answer(s, req, 400,
			    json_pack("{s:s, s:o}", "error", errs.v[0].text, "errors", a));
		return json_decref(o);
	}
	/* Its env is held to the profile as the task's env was. */
	if (al_engine_exec_env(&s->rq.dec, env, &errs) < 0) {
		json_t *a = json_array();
		for (size_t i = 0; i < errs.n; i++)
			json_array_append_new(a, json_string(errs.v[i].text));
		json_decref(argv_copy);
		json_decref(o);
		return sess_answer(s, req, 403,
				   json_pack("{s:s, s:o}", "error",
					     "the operator policy refused the exec", "reasons", a));
	}
	struct sx *x = xcalloc(1, sizeof(*x));
	x->s = s;
	x->mode = wait ? SX_WAIT : bg ? SX_BACKGROUND : SX_STREAM;
	x->wait_req = req;
	x->denials = json_array();
	x->log.max = AL_SESS_LOG_MAX;
	x->argv = argv_copy ? argv_copy : json_pack("[s]", argv[0]);
	x->started_ms = (int64_t)al_now_ms();
	x->t0_us = now_us();
	x->tty = xr.tty;
	xr.argv = argv;
	xr.env = env;
	xr.cwd = cwd;
	struct al_exec_io io = {.data = x, .output = on_output, .ended = on_ended};
	int r = al_run_exec(s->run, &xr, &io, &x->x, &err);
	json_decref(o);
	if (r < 0) {
		free_sx(x);
		if (r == -EAGAIN)
			return sess_error(s, req, 429,
					  "%s: this sandbox's max_execs (%u) are running; retry "
					  "when one ended",
					  err.msg, s->max_execs);
		return sess_error(s, req, r == -EOPNOTSUPP || r == -EINVAL ? 400 : 500, "%s",
				  err.msg);
	}
	snprintf(x->id, sizeof(x->id), "%s", al_exec_id(x->x));
	s->x = xrealloc(s->x, (s->n_x + 1) * sizeof(*s->x));
	s->x[s->n_x++] = x;
	if (in) {
		al_exec_stdin(x->x, in, strlen(in));
		al_exec_close_stdin(x->x);
	}
	if (x->mode == SX_BACKGROUND)
		return sess_answer(s, req, 201, json_pack("{s:s}", "exec_id", x->id));
	if (x->mode == SX_STREAM) {
		sess_stream_head(s, req, "application/x-ndjson");
		sess_subs_add(&x->subs, req);
		sess_publish(s, &x->log, &x->subs,
			     json_pack("{s:s, s:s}", "type", "start", "exec_id", x->id));
	}
}

struct sx *sess_exec_spawn(struct sess *s, const struct al_exec_request *xr, json_t *argv,
			   const struct sx_tap *tap, void *data, int *rc, struct al_error *err)
{
	struct sx *x = xcalloc(1, sizeof(*x));

	x->s = s;
	x->mode = SX_BACKGROUND;
	x->denials = json_array();
	x->log.max = AL_SESS_LOG_MAX;
	x->argv = argv;
	x->started_ms = (int64_t)al_now_ms();
	x->t0_us = now_us();
	x->tap = tap;
	x->tap_data = data;
	struct al_exec_io io = {.data = x, .output = on_output, .ended = on_ended};
	if ((*rc = al_run_exec(s->run, xr, &io, &x->x, err)) < 0) {
		free_sx(x);
		return NULL;
	}
	snprintf(x->id, sizeof(x->id), "%s", al_exec_id(x->x));
	s->x = xrealloc(s->x, (s->n_x + 1) * sizeof(*s->x));
	s->x[s->n_x++] = x;
	return x;
}

void sess_exec_untap(struct sx *x)
{
	x->tap = NULL;
}

static json_t *summary(const struct sx *x)
{
	json_t *o =
	    json_pack("{s:s, s:s, s:O, s:I}", "exec_id", x->id, "state", x->x ? "running" : "ended",
		      "argv", x->argv, "started_ms", (json_int_t)x->started_ms);
	json_object_set_new(o, "background", json_boolean(x->mode == SX_BACKGROUND));
	json_object_set_new(o, "tty", json_boolean(x->tty));
	if (x->result)
		json_object_set(o, "result", x->result);
	return o;
}

void sess_exec_list(struct sess *s, uint64_t req)
{
	json_t *a = json_array();

	for (size_t i = 0; i < s->n_x; i++)
		json_array_append_new(a, summary(s->x[i]));
	sess_answer(s, req, 200, json_pack("{s:o}", "execs", a));
}

static int signal_number(json_t *v)
{
	static const struct {
		const char *name;
		int sig;
	} names[] = {{"SIGTERM", SIGTERM}, {"SIGKILL", SIGKILL}, {"SIGINT", SIGINT},
		     {"SIGHUP", SIGHUP},   {"SIGQUIT", SIGQUIT}, {"SIGUSR1", SIGUSR1},
		     {"SIGUSR2", SIGUSR2}, {"SIGSTOP", SIGSTOP}, {"SIGCONT", SIGCONT}};

	if (json_is_integer(v) && json_integer_value(v) > 0 && json_integer_value(v) < 65)
		return (int)json_integer_value(v);
	for (size_t i = 0; json_is_string(v) && i < AL_ARRAY_SIZE(names); i++)
		if (!strcmp(json_string_value(v), names[i].name))
			return names[i].sig;
	return -1;
}

/* POST execs/EID/resize {"rows", "cols"}: its terminal's new size (its
 * process group gets SIGWINCH). */
static void resize(struct sess *s, uint64_t req, struct sx *x, const uint8_t *body, size_t len)
{
	_cleanup_(al_errors_clear) struct al_errors errs = {0};
	json_error_t je;
	json_t *o = json_loadb((const char *)body, len, JSON_REJECT_DUPLICATES, &je);
	unsigned short rows = 0, cols = 0;

	dim_field(o, "resize", "rows", &rows, &errs);
	dim_field(o, "resize", "cols", &cols, &errs);
	json_decref(o);
	if (!rows || !cols || errs.n)
		return sess_error(s, req, 400,
				  "the body must be {\"rows\": N, \"cols\": N}, integers 1 to "
				  "1000%s%s",
				  errs.n ? ": " : "", errs.n ? errs.v[0].text : "");
	if (!x->tty)
		return sess_error(s, req, 409,
				  "exec %s has no terminal (start it with \"tty\": true)", x->id);
	if (!x->x)
		return sess_error(s, req, 409, "exec %s has ended", x->id);
	al_exec_resize(x->x, rows, cols);
	sess_answer(s, req, 200,
		    json_pack("{s:s, s:i, s:i}", "exec_id", x->id, "rows", rows, "cols", cols));
}

void sess_exec_op(struct sess *s, uint64_t req, const char *method, const char *rest,
		  const char *query, const uint8_t *body, size_t len)
{
	char id[64];
	size_t n = strcspn(rest, "/");
	const char *op = rest[n] ? rest + n + 1 : "";
	struct sx *x;

	snprintf(id, sizeof(id), "%.*s", (int)(n < sizeof(id) - 1 ? n : sizeof(id) - 1), rest);
	if (!(x = find(s, id)))
		return sess_error(s, req, 404, "no exec \"%s\" in sandbox %s", id, s->id);
	if (!*op && !strcmp(method, "GET")) {
		/* Reconnect: what the log kept, then what comes. */
		if (x->mode == SX_WAIT)
			return sess_answer(s, req, 200, summary(x));
		sess_stream_head(s, req, "application/x-ndjson");
		if (x->log.dropped) {
			char *t = xasprintf("{\"type\":\"dropped\",\"lines\":%llu}\n",
					    (unsigned long long)x->log.dropped);
			sess_chunk(s, req, t, strlen(t), false);
			free(t);
		}
		sess_chunk(s, req, x->log.buf ? x->log.buf : "", x->log.len, x->x == NULL);
		if (x->x)
			sess_subs_add(&x->subs, req);
		return;
	}
	if (!*op && !strcmp(method, "DELETE")) {
		if (x->x)
			al_exec_signal(x->x, SIGKILL);
		return sess_answer(s, req, 200, summary(x));
	}
	if (!strcmp(op, "stdin") && !strcmp(method, "POST")) {
		if (!x->x)
			return sess_error(s, req, 409, "exec %s has ended", x->id);
		int r = len ? al_exec_stdin(x->x, body, len) : 0;
		if (r == -ENOBUFS)
			return sess_error(s, req, 429,
					  "exec %s: 1 MiB of stdin is waiting already; retry",
					  x->id);
		if (r == -EPIPE)
			return sess_error(s, req, 409, "exec %s: its stdin is closed", x->id);
		if (sess_query_flag(query, "close"))
			al_exec_close_stdin(x->x);
		return sess_answer(
		    s, req, 200,
		    json_pack("{s:s, s:I}", "exec_id", x->id, "written", (json_int_t)len));
	}
	if (!strcmp(op, "resize") && !strcmp(method, "POST"))
		return resize(s, req, x, body, len);
	if (!strcmp(op, "signal") && !strcmp(method, "POST")) {
		json_error_t je;
		json_t *o = json_loadb((const char *)body, len, 0, &je);
		int sig = signal_number(json_object_get(o, "signal"));
		json_decref(o);
		if (sig < 0)
			return sess_error(
			    s, req, 400,
			    "the body must be {\"signal\": NAME or NUMBER} (SIGTERM, "
			    "SIGKILL, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, ...)");
		if (!x->x)
			return sess_error(s, req, 409, "exec %s has ended", x->id);
		al_exec_signal(x->x, sig);
		return sess_answer(s, req, 200, summary(x));
	}
	sess_error(s, req, 404, "no route for %s execs/%s", method, rest);
}

void sess_exec_denial(struct sess *s, json_t *event)
{
	for (size_t i = 0; i < s->n_x; i++) {
		struct sx *x = s->x[i];
		if (!x->x)
			continue;
		if (x->mode == SX_WAIT)
			json_array_append(x->denials, event);
		else
			sess_publish(s, &x->log, &x->subs,
				     json_pack("{s:s, s:O}", "type", "denial", "event", event));
	}
}

void sess_exec_cancel(struct sess *s, uint64_t req)
{
	for (size_t i = 0; i < s->n_x; i++) {
		struct sx *x = s->x[i];
		/* A streamed exec whose client left is killed: nobody could
		 * reconnect to it. A background one runs on. */
		if (sess_subs_del(&x->subs, req) && x->mode == SX_STREAM && x->x)
			al_exec_signal(x->x, SIGKILL);
	}
}

void sess_exec_finish(struct sess *s)
{
	for (size_t i = 0; i < s->n_x; i++) {
		struct sx *x = s->x[i];
		if (x->x && x->mode == SX_WAIT)
			sess_error(s, x->wait_req, 500, "the sandbox ended during the exec");
		for (size_t k = 0; k < x->subs.n; k++)
			sess_chunk(s, x->subs.v[k], "", 0, true);
		x->subs.n = 0;
		x->x = NULL;
	}
}

void sess_exec_free(struct sess *s)
{
	for (size_t i = 0; i < s->n_x; i++)
		free_sx(s->x[i]);
	free(s->x);
	s->x = NULL;
	s->n_x = 0;
}
