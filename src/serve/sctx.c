/* Code contexts (contexts[/CID[/run]]): a long-lived interpreter per
 * context, Python or Node, running a small driver that airlock ships
 * (src/serve/ctx/driver.py, driver.js, embedded at build time) as one of
 * the sandbox's background execs (sexec.c), so that it is confined, limited
 * and listed as any exec is. A run's code goes to it as one JSON line on
 * its stdin with a fresh nonce; the driver runs it in its persistent
 * globals, then writes a frame "\x1eALCTX:NONCE:" JSON "\n" on stdout and
 * "\x1eALCTX:NONCE:end\n" on stderr. What comes before the two markers is
 * the run's output. The user's code runs in that same interpreter and can
 * write anything, so the frame is hostile input: capped, parsed by
 * ctxframe.c, and a frame that does not parse ends the interpreter. A run
 * over its timeout, an interpreter killed by its memory or output limit,
 * or one that exited ends its state; the next run starts a new one. */
#include "serve/sess.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "core/cleanup.h"
#include "core/sys.h"
#include "core/util.h"
#include "policy/engine.h"
#include "serve/ctxframe.h"

/* Contexts at once in one sandbox. */
#define CTX_MAX 8

/* The drivers' text (ctx-drivers.c, generated from src/serve/ctx/). */
extern const char al_ctx_driver_py[], al_ctx_driver_js[];

/* Each language's interpreter and how it is started; the driver's text
 * is the last argument. */
static const struct {
	const char *name, *interp, *opt1, *opt2;
	const char *driver;
} langs[] = {
    {"python", "python3", "-u", "-c", al_ctx_driver_py},
    {"node", "node", "-e", NULL, al_ctx_driver_js},
};

/* One of the run's two streams, up to its marker. */
struct cstream {
	char *buf; /* the run's output on it, at most AL_SERVE_OUTPUT_MAX */
	size_t len;
	bool cut;
	char pend[AL_CTX_MARK_MAX]; /* a chunk's end that may start the marker */
	size_t npend;
	bool marked; /* the marker was seen */
};

struct sctx {
	struct sess *s;
	char id[24];
	unsigned lang;
	char **env;
	char *cwd;
	uint64_t memory, output;
	struct sx *x; /* the interpreter's exec; NULL when it is gone */
	unsigned runs, restarts;
	const char *gone; /* why the last interpreter ended (a reason) */
	/* The run in progress. */
	bool running;
	uint64_t req, run_id;
	char nonce[33];
	int64_t deadline;  /* sess_now(); 0: none */
	const char *kill;  /* why the session killed the interpreter */
	const char *found; /* restart_reason: it was gone when this run came */
	bool restarted;
	struct cstream st[2];
	char *frame; /* stdout's bytes after its marker, up to the newline */
	size_t flen;
	bool framed; /* the frame's line is whole */
	struct al_ctx_frame fr;
	json_t *denials;
	uint64_t t0;
	char start_error[160]; /* the interpreter could not be executed */
};

static void run_reset(struct sctx *c)
{
	for (int i = 0; i < 2; i++) {
		free(c->st[i].buf);
		c->st[i] = (struct cstream){0};
	}
	free(c->frame);
	c->frame = NULL;
	c->flen = 0;
	c->framed = false;
	al_ctx_frame_clear(&c->fr);
	json_decref(c->denials);
	c->denials = NULL;
	c->running = false;
	c->kill = c->found = NULL;
	c->restarted = false;
	c->deadline = 0;
	c->start_error[0] = '\0';
}

static json_t *ctx_json(const struct sctx *c)
{
	json_t *o = json_pack("{s:s, s:s, s:s, s:i, s:i}", "context_id", c->id, "language",
			      langs[c->lang].name, "state",
			      c->running ? "running"
			      : c->x	 ? "idle"
					 : "stopped",
			      "runs", c->runs, "restarts", c->restarts);
	json_object_set_new(o, "exec_id", c->x ? json_string(c->x->id) : json_null());
	return o;
}

static void tap_output(void *data, int which, const void *p, size_t n);
static void tap_ended(void *data, const struct al_exec_result *res);
static const struct sx_tap tap = {.output = tap_output, .ended = tap_ended};

/* Its interpreter started: 0, or -errno with err set. */
static int start(struct sctx *c, struct al_error *err)
{
	const char *d = langs[c->lang].driver;
	char *argv[] = {(char *)langs[c->lang].interp, (char *)langs[c->lang].opt1,
			(char *)(langs[c->lang].opt2 ? langs[c->lang].opt2 : d),
			langs[c->lang].opt2 ? (char *)d : NULL, NULL};
	struct al_exec_request xr = {.argv = argv,
				     .env = c->env,
				     .cwd = c->cwd,
				     .memory_bytes = c->memory,
				     .output_bytes = c->output};
	int rc = 0;

	/* The listing shows the interpreter, not the driver's text. */
	json_t *shown = json_pack("[s, s]", argv[0], argv[1]);
	if (langs[c->lang].opt2)
		json_array_append_new(shown, json_string(argv[2]));
	json_array_append_new(shown, json_string("<airlock context driver>"));
	c->x = sess_exec_spawn(c->s, &xr, shown, &tap, c, &rc, err);
	return c->x ? 0 : rc;
}

static struct sctx *find(struct sess *s, const char *id, size_t n)
{
	for (size_t i = 0; i < s->n_ctx; i++)
		if (strlen(s->ctx[i]->id) == n && !memcmp(s->ctx[i]->id, id, n))
			return s->ctx[i];
	return NULL;
}

static void free_ctx(struct sctx *c)
{
	if (c->x) {
		sess_exec_untap(c->x);
		if (c->x->x)
			al_exec_signal(c->x->x, SIGKILL);
	}
	run_reset(c);
	al_strv_free(c->env);
	free(c->cwd);
	free(c);
}

/* --- a run's answer --------------------------------------------------- */

/* The run answered with reason (and the frame's value and error when it
 * came); the context is idle again. */
static void answer(struct sctx *c, const char *reason)
{
	struct sess *s = c->s;

	/* The refusals the code saw are in c->denials before it is answered
	 * (the gateway sends each one's line before it answers the refused
	 * client; its socket may not have been read yet). */
	if (s->run)
		al_run_sync_gateway(s->run);
	json_t *o = json_pack("{s:s, s:s}", "context_id", c->id, "language", langs[c->lang].name);

	sess_put_output(o, "stdout", c->st[0].buf, c->st[0].len, c->st[0].cut);
	sess_put_output(o, "stderr", c->st[1].buf, c->st[1].len, c->st[1].cut);
	json_object_set_new(o, "value", c->fr.value ? json_string(c->fr.value) : json_null());
	json_object_set_new(o, "error", c->fr.error ? json_incref(c->fr.error) : json_null());
	json_object_set_new(o, "reason", json_string(reason));
	json_object_set_new(o, "restarted", json_boolean(c->restarted));
	json_object_set_new(o, "restart_reason", c->found ? json_string(c->found) : json_null());
	json_object_set_new(o, "duration_ms", json_integer((json_int_t)(al_now_ms() - c->t0)));
	json_object_set(o, "denials", c->denials);
	json_object_set_new(o, "exec_id", c->x ? json_string(c->x->id) : json_null());
	if (c->start_error[0])
		json_object_set_new(o, "start_error", json_string(c->start_error));
	uint64_t req = c->req;
	run_reset(c);
	s->last_active_ms = sess_now(s); /* its end is activity, as an exec's */
	sess_answer(s, req, 200, o);
}

/* Its interpreter killed for why (timeout, protocol): the run is answered
 * when its end comes. */
static void kill_for(struct sctx *c, const char *why)
{
	if (c->kill || !c->x || !c->x->x)
		return;
	c->kill = why;
	al_exec_signal(c->x->x, SIGKILL);
}

static void out_add(struct cstream *st, const char *p, size_t n)
{
	if (st->len + n > AL_SERVE_OUTPUT_MAX) {
		st->cut = true;
		n = AL_SERVE_OUTPUT_MAX - st->len;
	}
	if (!n)
		return;
	st->buf = xrealloc(st->buf, st->len + n + 1);
	memcpy(st->buf + st->len, p, n);
	st->len += n;
}

/* A chunk of one stream before its marker: the output before the marker
 * kept, a tail that may be the marker's start held back. The bytes of p
 * after the marker's end (-1: not seen yet). */
static long scan(struct cstream *st, const char *mark, size_t mlen, const char *p, size_t n)
{
	size_t tn = st->npend + n;
	_cleanup_free_ char *t = xmalloc(tn);

	memcpy(t, st->pend, st->npend);
	memcpy(t + st->npend, p, n);
	const char *m = memmem(t, tn, mark, mlen);
	if (m) {
		out_add(st, t, (size_t)(m - t));
		st->marked = true;
		st->npend = 0;
		/* pend is shorter than the marker: it ends inside p. */
		return (long)((size_t)(m - t) + mlen - (tn - n));
	}
	size_t keep = mlen - 1 < tn ? mlen - 1 : tn;
	while (keep && memcmp(t + tn - keep, mark, keep))
		keep--;
	out_add(st, t, tn - keep);
	memcpy(st->pend, t + tn - keep, keep);
	st->npend = keep;
	return -1;
}

static void maybe_done(struct sctx *c)
{
	if (!c->framed || !c->st[1].marked || c->kill)
		return;
	answer(c, c->fr.error ? "error" : "ok");
}

static void tap_output(void *data, int which, const void *p, size_t n)
{
	struct sctx *c = data;
	char mark[AL_CTX_MARK_MAX];

	/* Between runs (a thread or a child still writing): dropped. */
	if (!c->running || c->kill)
		return;
	struct cstream *st = &c->st[which];
	if (!st->marked) {
		size_t ml = al_ctx_marker(mark, c->nonce, which == 1);
		long at = scan(st, mark, ml, p, n);
		if (at < 0)
			return;
		p = (const char *)p + at;
		n -= (size_t)at;
	}
	/* After stderr's marker, or stdout's frame line: nothing more. */
	if (which == 1 || c->framed) {
		maybe_done(c);
		return;
	}
	const char *nl = memchr(p, '\n', n);
	size_t take = nl ? (size_t)(nl - (const char *)p) : n;
	if (c->flen + take > AL_CTX_FRAME_MAX)
		return kill_for(c, "protocol");
	c->frame = xrealloc(c->frame, c->flen + take + 1);
	memcpy(c->frame + c->flen, p, take);
	c->flen += take;
	if (!nl)
		return;
	c->framed = true;
	if (al_ctx_frame_parse(c->frame, c->flen, c->run_id, &c->fr) < 0)
		return kill_for(c, "protocol");
	maybe_done(c);
}

static void tap_ended(void *data, const struct al_exec_result *res)
{
	struct sctx *c = data;
	static const char *const why[] = {
	    [AL_EXEC_EXITED] = "exited",   [AL_EXEC_SIGNALED] = "exited",
	    [AL_EXEC_TIMEOUT] = "timeout", [AL_EXEC_MEMORY] = "memory",
	    [AL_EXEC_OUTPUT] = "output",   [AL_EXEC_KILLED] = "killed",
	    [AL_EXEC_FAILED] = "exited"};
	const char *reason = c->kill					  ? c->kill
			     : (unsigned)res->reason < AL_ARRAY_SIZE(why) ? why[res->reason]
									  : "killed";

	c->x = NULL;
	c->gone = reason;
	if (res->reason == AL_EXEC_FAILED)
		snprintf(c->start_error, sizeof(c->start_error), "%s could not be executed: %s",
			 langs[c->lang].interp, strerror(res->exec_errno));
	if (!c->running)
		return;
	/* Its state is gone with it: the next run starts a new one. */
	c->restarted = true;
	/* A frame that came whole before the end still gives its value and
	 * error; the reason is the interpreter's end. */
	answer(c, reason);
}

/* --- the endpoints ---------------------------------------------------- */

static void bad(struct sess *s, uint64_t req, struct al_errors *errs)
{
	json_t *a = json_array();

	for (size_t i = 0; i < errs->n; i++)
		json_array_append_new(a, json_string(errs->v[i].text));
	sess_answer(s, req, 400, json_pack("{s:s, s:o}", "error", errs->v[0].text, "errors", a));
}

static json_t *body_object(struct sess *s, uint64_t req, const uint8_t *body, size_t len)
{
	json_error_t je;
	json_t *o = json_loadb((const char *)body, len, JSON_REJECT_DUPLICATES, &je);

	if (o && json_is_object(o))
		return o;
	sess_error(s, req, 400, "the body must be a JSON object: %s",
		   o ? "not an object" : je.text);
	json_decref(o);
	return NULL;
}

/* POST contexts {"language", "cwd"?, "env"?, "memory"?, "output"?}. */
static void create(struct sess *s, uint64_t req, const uint8_t *body, size_t len)
{
	_cleanup_(al_errors_clear) struct al_errors errs = {0};
	struct al_error err = {0};
	json_t *o = body_object(s, req, body, len), *v;
	const char *k;

	if (!o)
		return;
	const char *l = json_string_value(json_object_get(o, "language"));
	unsigned lang = 0;
	while (l && lang < AL_ARRAY_SIZE(langs) && strcmp(l, langs[lang].name))
		lang++;
	if (!json_object_get(o, "language"))
		al_errors_add(&errs, EINVAL, "context", "language", "is needed: python or node");
	else if (!l || lang == AL_ARRAY_SIZE(langs))
		al_errors_add(&errs, EINVAL, "context", "language", "\"%s\" is not python or node",
			      l ? l : "(not a string)");
	struct sctx *c = xcalloc(1, sizeof(*c));
	c->s = s;
	c->lang = lang;
	/* cwd, env, memory and output are read as an exec's are. */
	sess_exec_fields(o, "context", &c->env, &c->cwd, &c->memory, &c->output, &errs);
	static const char *const known[] = {"language", "cwd", "env", "memory", "output"};
	json_object_foreach(o, k, v)
	{
		size_t i = 0;
		while (i < AL_ARRAY_SIZE(known) && strcmp(k, known[i]))
			i++;
		if (i == AL_ARRAY_SIZE(known)) {
			al_errors_add(&errs, EINVAL, "context", k,
				      "is not a field of a context (language, cwd, env, memory, "
				      "output)");
			break;
		}
	}
	json_decref(o);
	if (al_errors_count(&errs)) {
		free_ctx(c);
		return bad(s, req, &errs);
	}
	if (al_engine_exec_env(&s->rq.dec, c->env, &errs) < 0) {
		json_t *a = json_array();
		for (size_t i = 0; i < errs.n; i++)
			json_array_append_new(a, json_string(errs.v[i].text));
		free_ctx(c);
		return sess_answer(s, req, 403,
				   json_pack("{s:s, s:o}", "error",
					     "the operator policy refused the context", "reasons",
					     a));
	}
	if (s->n_ctx >= CTX_MAX) {
		free_ctx(c);
		return sess_error(
		    s, req, 429, "this sandbox has %d contexts already; delete one first", CTX_MAX);
	}
	int r = start(c, &err);
	if (r < 0) {
		free_ctx(c);
		if (r == -EAGAIN)
			return sess_error(s, req, 429,
					  "%s: this sandbox's max_execs (%u) are running, and a "
					  "context's interpreter is one",
					  err.msg, s->max_execs);
		return sess_error(s, req, r == -EOPNOTSUPP || r == -EINVAL ? 400 : 500,
				  "the context's interpreter: %s", err.msg);
	}
	snprintf(c->id, sizeof(c->id), "ctx-%u", ++s->ctx_seq);
	s->ctx = xrealloc(s->ctx, (s->n_ctx + 1) * sizeof(*s->ctx));
	s->ctx[s->n_ctx++] = c;
	sess_answer(s, req, 201, ctx_json(c));
}

/* POST contexts/CID/run {"code", "timeout"?}. */
static void run(struct sctx *c, uint64_t req, const uint8_t *body, size_t len)
{
	struct sess *s = c->s;
	_cleanup_(al_errors_clear) struct al_errors errs = {0};
	struct al_error err = {0};
	json_t *o = body_object(s, req, body, len), *v;
	uint64_t ms = 0;
	const char *k;

	if (!o)
		return;
	if (!json_is_string(json_object_get(o, "code")))
		al_errors_add(&errs, EINVAL, "run", "code", "is needed, a string");
	if ((v = json_object_get(o, "timeout")) && !sess_seconds(v, &ms))
		al_errors_add(&errs, EINVAL, "run", "timeout",
			      "must be a number of seconds above 0 and at most %d (a year)",
			      AL_SERVE_SECONDS_MAX);
	json_object_foreach(o, k, v) if (strcmp(k, "code") && strcmp(k, "timeout"))
	{
		al_errors_add(&errs, EINVAL, "run", k, "is not a field of a run (code, timeout)");
		break;
	}
	if (al_errors_count(&errs)) {
		json_decref(o);
		return bad(s, req, &errs);
	}
	if (c->running) {
		json_decref(o);
		return sess_error(s, req, 409,
				  "context %s is running code already; retry when it "
				  "ended",
				  c->id);
	}
	run_reset(c);
	/* Gone since the last run (a limit, its exit): a new interpreter,
	 * and the answer says so. */
	if (!c->x) {
		int r = start(c, &err);
		if (r < 0) {
			json_decref(o);
			if (r == -EAGAIN)
				return sess_error(s, req, 429,
						  "context %s could not start its interpreter: %s: "
						  "this sandbox's max_execs (%u) are running",
						  c->id, err.msg, s->max_execs);
			return sess_error(s, req, 500,
					  "context %s could not start its interpreter: %s", c->id,
					  err.msg);
		}
		c->restarted = true;
		c->found = c->gone;
		c->restarts++;
	}
	unsigned char rnd[16];
	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd)) {
		json_decref(o);
		return sess_error(s, req, 500, "getrandom: %s", strerror(errno));
	}
	for (int i = 0; i < 16; i++)
		snprintf(c->nonce + 2 * i, 3, "%02x", rnd[i]);
	c->run_id = ++c->runs;
	json_t *line = json_pack("{s:I, s:O, s:s}", "id", (json_int_t)c->run_id, "code",
				 json_object_get(o, "code"), "nonce", c->nonce);
	json_decref(o);
	char *t = json_dumps(line, JSON_COMPACT | JSON_ENSURE_ASCII);
	json_decref(line);
	if (!t)
		return sess_error(s, req, 400, "the code could not be encoded as JSON");
	size_t n = strlen(t);
	t[n++] = '\n'; /* over the dump's NUL: the line's end */
	int r = al_exec_stdin(c->x->x, t, n);
	free(t);
	if (r < 0) {
		c->runs--;
		return sess_error(s, req, r == -ENOBUFS ? 413 : 409, "context %s: %s", c->id,
				  r == -ENOBUFS ? "the code is over 1 MiB as JSON"
						: "its interpreter's stdin is closed");
	}
	c->running = true;
	c->req = req;
	c->t0 = al_now_ms();
	c->deadline = ms ? sess_now(s) + (int64_t)ms : 0;
	c->denials = json_array();
}

void sess_ctx(struct sess *s, uint64_t req, const char *method, const char *rest,
	      const uint8_t *body, size_t len)
{
	bool get = !strcmp(method, "GET"), post = !strcmp(method, "POST"),
	     del = !strcmp(method, "DELETE");

	if (!*rest && post)
		return create(s, req, body, len);
	if (!*rest && get) {
		json_t *a = json_array();
		for (size_t i = 0; i < s->n_ctx; i++)
			json_array_append_new(a, ctx_json(s->ctx[i]));
		return sess_answer(s, req, 200, json_pack("{s:o}", "contexts", a));
	}
	if (!*rest)
		return sess_error(s, req, 405, "contexts takes GET and POST, not %s", method);
	rest++; /* the '/' */
	size_t n = strcspn(rest, "/");
	const char *op = rest[n] ? rest + n + 1 : NULL;
	struct sctx *c = find(s, rest, n);
	if (!c)
		return sess_error(s, req, 404, "no context \"%.*s\" in sandbox %s",
				  (int)(n > 64 ? 64 : n), rest, s->id);
	if (!op && get)
		return sess_answer(s, req, 200, ctx_json(c));
	if (!op && del) {
		/* A run in progress ends with it, answered as killed. */
		if (c->running) {
			c->restarted = true;
			answer(c, "killed");
		}
		size_t i = 0;
		while (s->ctx[i] != c)
			i++;
		memmove(&s->ctx[i], &s->ctx[i + 1], (s->n_ctx - i - 1) * sizeof(*s->ctx));
		s->n_ctx--;
		json_t *o = json_pack("{s:s, s:b}", "context_id", c->id, "deleted", 1);
		free_ctx(c);
		return sess_answer(s, req, 200, o);
	}
	if (op && !strcmp(op, "run") && post)
		return run(c, req, body, len);
	sess_error(s, req, 404, "no route for %s contexts/%s", method, rest);
}

unsigned sess_ctx_busy(const struct sess *s)
{
	unsigned n = 0;

	for (size_t i = 0; i < s->n_ctx; i++)
		n += s->ctx[i]->running;
	return n;
}

void sess_ctx_denial(struct sess *s, json_t *event)
{
	for (size_t i = 0; i < s->n_ctx; i++)
		if (s->ctx[i]->running)
			json_array_append(s->ctx[i]->denials, event);
}

void sess_ctx_tick(struct sess *s, int *wake)
{
	int64_t now = sess_now(s);

	for (size_t i = 0; i < s->n_ctx; i++) {
		struct sctx *c = s->ctx[i];
		if (!c->running || !c->deadline || c->kill)
			continue;
		if (now >= c->deadline)
			kill_for(c, "timeout");
		else if (c->deadline - now < *wake)
			*wake = (int)(c->deadline - now);
	}
}

void sess_ctx_free(struct sess *s)
{
	for (size_t i = 0; i < s->n_ctx; i++) {
		struct sctx *c = s->ctx[i];
		if (c->running)
			sess_error(s, c->req, 500, "the sandbox ended during the run");
		/* Its exec's record is the session's; nothing of it is run
		 * any more. */
		if (c->x)
			sess_exec_untap(c->x);
		c->x = NULL;
		free_ctx(c);
	}
	free(s->ctx);
	s->ctx = NULL;
	s->n_ctx = 0;
}
