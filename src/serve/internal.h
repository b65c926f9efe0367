/* Shared by the files of src/serve only. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "core/error.h"
#include "serve/chan.h"
#include "serve/msg.h"
#include "serve/serve.h"

/* listen.c: the sockets the monitor accepts on, and the bearer tokens. */
struct al_token {
	char token[AL_SERVE_TOKEN_MAX + 1];
	char identity[64];
};
int al_serve_listen_unix(const char *path, const char *group, struct al_error *err);
int al_serve_listen_tcp(const char *spec, struct al_error *err);
int al_serve_tokens_load(const char *path, struct al_token **ret, size_t *ret_n,
			 struct al_error *err);
/* The identity of token (compared in constant time), or NULL. */
const char *al_serve_token_identity(const struct al_token *t, size_t n, const char *token);

/* metrics.c: the monitor's counters, and their Prometheus text. */
#define AL_HIST_BUCKETS 12
struct al_hist {
	uint64_t counts[AL_HIST_BUCKETS + 1]; /* the last: +Inf */
	uint64_t n;
	double sum;
};
/* The kinds of denial (airlock_denials_total{kind}), from a live sandbox's
 * audit lines and a one-shot run's record alike. */
enum al_denial_kind {
	AL_DENIAL_NETWORK, /* a connection or request refused (net.connect, net.request) */
	AL_DENIAL_DNS,	   /* a name refused (net.dns) */
	AL_DENIAL_CUT,	   /* a connection cut for a secret (net.connect "cut") */
	AL_DENIAL_SECRET,  /* a secret kept from where it does not go (secret.misuse) */
	AL_DENIAL_SYSCALL, /* a system call denied (syscall.denied) */
	AL_DENIAL_N
};
const char *al_denial_kind_name(int kind);
/* An audit event's kind of denial, or -1 when it is none. */
int al_denial_kind_of(const char *event, json_t *fields);
#define AL_EXEC_REASONS 7 /* enum al_exec_reason (run/session.h) */

struct al_metrics {
	uint64_t requests[6]; /* by status class: 1xx .. 5xx, [0] other */
	uint64_t status[600]; /* by exact status */
	uint64_t runs;
	uint64_t denials[AL_DENIAL_N];
	uint64_t execs[AL_EXEC_REASONS]; /* by enum al_exec_reason */
	uint64_t limit_hits[16];	 /* by enum al_end_reason */
	uint64_t refused_clients;	 /* past --max-clients */
	struct al_hist run_s, create_s, exec_s;
	/* Creates answered 201, split: claimed from the warm pool or cold. */
	struct al_hist create_warm_s, create_cold_s;
};
void al_metrics_status(struct al_metrics *m, unsigned status);
void al_hist_add(struct al_hist *h, double seconds);
/* The text format; running, paused: the clients' sandboxes in each
 * state; ready: the warm pool's held ones. */
char *al_metrics_text(const struct al_metrics *m, unsigned running, unsigned paused, unsigned ready,
		      unsigned clients);
/* A histogram's lines (no HELP or TYPE), each with labels ("a=\"b\"",
 * or "") before its le. */
void al_hist_text(FILE *f, const char *name, const char *labels, const struct al_hist *h);
/* A session's AL_MSG_SESSION_EVENT counted; *paused follows its pause
 * and resume. -EBADMSG for an event not known. */
int al_metrics_event(struct al_metrics *m, const struct al_msg *in, bool *paused);
/* A reason's name to its index in limit_hits, or -1 when it is no limit. */
int al_metrics_limit_index(const char *reason);

/* spawn.c: a session process (`__session`, its channel at fd 3; the
 * static airlock's cfg->exe_fd when set, else cfg->exe), and the
 * front, started as its own confined program (fork,
 * drop everything, exec `__front`); its request ids start above
 * first_req. The pid, with *chan the monitor's end of its channel; or
 * -errno with err set. */
pid_t al_serve_front_spawn(const struct al_serve_config *cfg, uint64_t first_req, int *chan,
			   struct al_error *err);
pid_t al_serve_spawn_session(const struct al_serve_config *cfg, int *chan, struct al_error *err);

/* answer.c: the monitor's answers to the front (on its channel) for the
 * front's request req: a status and body, a JSON body (taken; NULL: a
 * fixed 500), a chunk of a streamed answer. And a fixed answer
 * written on a client's socket, which is then closed. */
void al_serve_respond(struct al_chan *front, uint64_t req, unsigned status, const char *ctype,
		      const char *body, size_t len);
void al_serve_respond_json(struct al_chan *front, uint64_t req, unsigned status, json_t *o);
void al_serve_chunk(struct al_chan *front, uint64_t req, const void *p, size_t len, bool end);
void al_serve_refuse(int fd, unsigned status, const char *phrase, const char *error);

/* stale.c: a killed daemon's cgroups and host id slots, removed. */
void al_serve_cleanup_stale(void);
