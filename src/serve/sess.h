/* A live sandbox's session process (serve-design's "session"), shared by
 * session.c (its request, its run, its loop, its audit), sexec.c (execs)
 * and sfiles.c (the file API). One process holds one sandbox: its plan,
 * credentials and run, and nobody else's. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "request/request.h"
#include "run/run.h"
#include "run/session.h"
#include "serve/chan.h"
#include "serve/serve.h"

/* What an exec's event log and the audit buffer keep (the oldest lines
 * go first past it; a reconnect says how many were dropped). */
#define AL_SESS_LOG_MAX	  (1u << 20)
#define AL_SESS_AUDIT_MAX (4u << 20)
/* Ended execs kept for listing and reconnecting. */
#define AL_SESS_ENDED_MAX 64
/* Execs at once in a sandbox whose create names no max_execs (a warm
 * pool's sandboxes are made with this: another count is made cold). */
#define AL_SESS_MAX_EXECS 8
/* File operations in flight at once in a sandbox whose files are its
 * agent's (sfiles-vm.c; 429 past it). Each is also one of its max_execs
 * while it runs. */
#define AL_SESS_FILE_OPS_MAX 4

struct spool;
struct sctx;
struct sfop;

/* An exec the session starts for itself (a code context's interpreter,
 * sctx.c): its output and its end go to these instead of its event log. */
struct sx_tap {
	void (*output)(void *data, int which, const void *p, size_t n);
	void (*ended)(void *data, const struct al_exec_result *res);
};

enum sx_mode {
	SX_WAIT,       /* one answer at the end */
	SX_STREAM,     /* NDJSON events to the request that started it */
	SX_BACKGROUND, /* its id at once; events kept for reconnects */
};

/* A bounded buffer of NDJSON lines (whole lines dropped from the front). */
struct sess_log {
	char *buf;
	size_t len, max;
	uint64_t dropped;
};

/* Requests following a stream (their ids, the front's). */
struct sess_subs {
	uint64_t *v;
	size_t n;
};

struct sx {
	struct sess *s;
	char id[16];
	struct al_exec *x; /* NULL once ended */
	enum sx_mode mode;
	uint64_t wait_req;
	char *out[2];
	size_t len[2];
	bool cut[2];
	json_t *denials; /* SX_WAIT: the denials seen while it ran */
	json_t *argv;
	struct sess_log log;
	struct sess_subs subs;
	json_t *result; /* once ended */
	int64_t started_ms;
	uint64_t t0_us;		  /* its request came (monotonic), for the latency */
	bool tty;		  /* a terminal of its own: one output stream, resizable */
	const struct sx_tap *tap; /* sess_exec_spawn's, or NULL */
	void *tap_data;
};

struct sess {
	struct al_chan ch;
	char id[24];
	struct al_request rq;
	struct al_request_config cfg;
	struct al_policy *policy;
	struct al_run *run;
	struct al_audit *audit_stream; /* the run's: a sink into audit */
	struct sess_log audit;
	struct sess_subs audit_subs;
	struct sx **x;
	size_t n_x;
	json_t *meta;
	char *profile;
	int64_t created_ms, deadline_ms, last_active_ms; /* monotonic */
	char created_ts[40];				 /* wall clock, RFC 3339 */
	uint64_t idle_ms, max_lifetime_ms;
	unsigned max_execs;
	bool ended;
	/* Paused (al_run_pause) by a request, or by idleness (idle_action
	 * "pause": the next exec or file operation resumes it). The times
	 * above are on the session's clock (sess_now), which stops while it
	 * is paused, as the run's do. */
	bool idle_pause;    /* idle_action "pause" */
	bool lifetime_over; /* ended because its lifetime ran out */
	bool paused, paused_idle;
	int64_t paused_at, paused_total_ms; /* monotonic */
	/* Who asked (the monitor's word), and the daemon's own paths: the
	 * request layer holds the task to both (cfg.identity, never_paths). */
	struct al_identity who;
	char token[64];
	gid_t gids[AL_SERVE_GIDS_MAX];
	char **never;
	/* A warm pool's sandbox (spool.c): its own plan, kept as long as its
	 * run; pooled once claimed (the create's answer says so). */
	struct spool *pool;
	bool pooled;
	/* Code contexts (sctx.c), and the number the next one takes. */
	struct sctx **ctx;
	size_t n_ctx;
	unsigned ctx_seq;
	/* File operations in flight in the sandbox (sfiles-vm.c). */
	struct sfop *fops;
	unsigned n_fops;
};

/* Answers to the front's request req (through the monitor). */
void sess_answer(struct sess *s, uint64_t req, unsigned status, json_t *body);
void sess_answer_raw(struct sess *s, uint64_t req, unsigned status, const char *ctype,
		     const void *body, size_t len);
void sess_error(struct sess *s, uint64_t req, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The longest number of seconds the API takes anywhere (a year). */
#define AL_SERVE_SECONDS_MAX 31536000
/* v a JSON number of seconds, finite, above 0 and at most
 * AL_SERVE_SECONDS_MAX: true with *ms set (at least 1). */
bool sess_seconds(json_t *v, uint64_t *ms);
/* A streamed answer: its head, then chunks (end: the last). */
void sess_stream_head(struct sess *s, uint64_t req, const char *ctype);
void sess_chunk(struct sess *s, uint64_t req, const void *p, size_t len, bool end);

void sess_log_add(struct sess_log *l, const char *line, size_t len);
void sess_subs_add(struct sess_subs *u, uint64_t req);
bool sess_subs_del(struct sess_subs *u, uint64_t req);
/* One JSON line (o taken) to the log and every follower. */
void sess_publish(struct sess *s, struct sess_log *l, struct sess_subs *u, json_t *o);

/* session.c, for spool.c: a create's request to its final plan (400,
 * 403, 500 answered: < 0); its 201; the run's audit sink; who asked. */
int sess_create_request(struct sess *s, uint64_t id, json_t *req, const char *operator_file,
			const char *operator_env, uint64_t *lifetime);
void sess_created(struct sess *s, uint64_t id, uint64_t lifetime);
struct al_audit *sess_audit_open(struct sess *s);
int sess_who_from(struct sess *s, const struct al_msg *in);

/* spool.c: a warm pool's sandbox made from the first message (in: its
 * task request, the profile's), held until a create fits it. 0 once
 * claimed (s->run serves that create's sandbox), < 0 when it ended. */
int sess_pool_main(struct sess *s, uint64_t id, const struct al_msg *in, const char *operator_env);
void sess_pool_free(struct sess *s);

/* Something the daemon's metrics count, to the monitor (n: an exec's
 * microseconds from request to end, or a number of denials). */
void sess_event(struct sess *s, enum al_sess_event ev, const char *name, uint64_t n);

/* sclock.c: the sandbox's clocks (lifetime, idle timeout) and pausing. */
/* The session's clock: monotonic ms less the time spent paused. */
int64_t sess_now(const struct sess *s);
/* The sandbox as GET /v1/sandboxes/{id} shows it. */
json_t *sess_info(struct sess *s);
/* POST timeout: a new lifetime from now. */
void sess_extend(struct sess *s, uint64_t req, const uint8_t *body, size_t len);
/* POST pause, POST resume. */
void sess_pause_op(struct sess *s, uint64_t req, bool pause);
/* Before a request that acts in the sandbox (an exec, a file operation,
 * an exec's stdin, signal or resize): false with 409 answered when a
 * request paused it; one paused by idleness is resumed first. It counts
 * as activity for the idle timeout. */
bool sess_act(struct sess *s, uint64_t req);
/* The lifetime and the idle timeout checked (an idle sandbox paused when
 * so asked): true when the sandbox is to end now; else *wake is set to the
 * ms until the next check is due (at most 1000). */
bool sess_clocks(struct sess *s, int *wake);

/* sexec.c */
/* argv, or code + language, taken out of o into *argv; stdin into *in. */
int sess_take_command(json_t *o, char ***argv, char **in, struct al_errors *errs);
void sess_exec_start(struct sess *s, uint64_t req, const uint8_t *body, size_t len);
void sess_exec_list(struct sess *s, uint64_t req);
/* execs/EID[/stdin|/signal] with method and query. */
void sess_exec_op(struct sess *s, uint64_t req, const char *method, const char *rest,
		  const char *query, const uint8_t *body, size_t len);
/* An audit event that is a denial: to every running exec. */
void sess_exec_denial(struct sess *s, json_t *event);
/* A request following a stream left. */
void sess_exec_cancel(struct sess *s, uint64_t req);
unsigned sess_exec_running(const struct sess *s);
/* What keeps the sandbox from being idle: execs running but a code
 * context's interpreter waiting for its next run, and file operations in
 * flight. */
unsigned sess_exec_busy(const struct sess *s);
/* The run ended: every exec's followers get the end. */
void sess_exec_finish(struct sess *s);
void sess_exec_free(struct sess *s);
/* An exec's env, cwd (taken), memory and output fields of o, checked
 * (errors named for where). */
void sess_exec_fields(json_t *o, const char *where, char ***env, char **cwd, uint64_t *memory,
		      uint64_t *output, struct al_errors *errs);
/* Start an exec in the background for the session itself (xr as given;
 * its listing shows argv, taken): its output and end go to tap (data).
 * NULL with *rc (-errno) and err set when it could not start. */
struct sx *sess_exec_spawn(struct sess *s, const struct al_exec_request *xr, json_t *argv,
			   const struct sx_tap *tap, void *data, int *rc, struct al_error *err);
/* Its tap no longer called (its owner is going). */
void sess_exec_untap(struct sx *x);
/* Output as a JSON string when it is UTF-8, else base64 (NAME_base64). */
void sess_put_output(json_t *o, const char *name, const char *p, size_t n, bool cut);

/* sfiles.c: GET, PUT, DELETE files/PATH (rest: PATH). */
void sess_files(struct sess *s, uint64_t req, const char *method, const char *rest,
		const char *query, const uint8_t *body, size_t len);
/* sfiles-vm.c: the sandbox ended; a file operation still in flight is
 * answered 500. */
void sess_files_free(struct sess *s);

/* sctx.c: code contexts. contexts[/CID[/run]] with method (rest: what
 * follows "contexts"). */
void sess_ctx(struct sess *s, uint64_t req, const char *method, const char *rest,
	      const uint8_t *body, size_t len);
/* Contexts with a run in progress. */
unsigned sess_ctx_busy(const struct sess *s);
/* A denial while a run is in progress: to its answer. */
void sess_ctx_denial(struct sess *s, json_t *event);
/* Runs past their timeout: their interpreter killed; *wake lowered to the
 * ms until the next deadline. */
void sess_ctx_tick(struct sess *s, int *wake);
/* The sandbox ended: runs in progress answered, contexts freed. */
void sess_ctx_free(struct sess *s);

/* A query flag ("list", "follow", ...) in query ("a&b=1"), not "0". */
bool sess_query_flag(const char *query, const char *name);
