/* Shared by the files of src/serve only. */
#pragma once

#include <jansson.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/error.h"
#include "serve/chan.h"
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
struct al_metrics {
	uint64_t requests[6]; /* by status class: 1xx .. 5xx, [0] other */
	uint64_t status[600]; /* by exact status */
	uint64_t runs;
	uint64_t denials;
	uint64_t limit_hits[16];  /* by enum al_end_reason */
	uint64_t refused_clients; /* past --max-clients */
	struct al_hist run_s, create_s, exec_s;
};
void al_metrics_status(struct al_metrics *m, unsigned status);
void al_hist_add(struct al_hist *h, double seconds);
/* The text format; running/starting: sandboxes in each state. */
char *al_metrics_text(const struct al_metrics *m, unsigned running, unsigned clients);
/* A reason's name to its index in limit_hits, or -1 when it is no limit. */
int al_metrics_limit_index(const char *reason);

/* spawn.c: a session process (`__session`, its channel at fd 3), and the
 * front, started as its own confined program (fork,
 * drop everything, exec `__front`); its request ids start above
 * first_req. The pid, with *chan the monitor's end of its channel; or
 * -errno with err set. */
pid_t al_serve_front_spawn(const struct al_serve_config *cfg, uint64_t first_req, int *chan,
			   struct al_error *err);
pid_t al_serve_spawn_session(const char *exe, int *chan, struct al_error *err);

/* answer.c: the monitor's answers to the front (on its channel) for the
 * front's request req: a status and body, a JSON body (taken), an error
 * {"error": ...}, a chunk of a streamed answer. And a fixed answer
 * written on a client's socket, which is then closed. */
void al_serve_respond(struct al_chan *front, uint64_t req, unsigned status, const char *ctype,
		      const char *body, size_t len);
void al_serve_respond_json(struct al_chan *front, uint64_t req, unsigned status, json_t *o);
void al_serve_respond_error(struct al_chan *front, uint64_t req, unsigned status, const char *fmt,
			    ...) __attribute__((format(printf, 4, 5)));
void al_serve_chunk(struct al_chan *front, uint64_t req, const void *p, size_t len, bool end);
void al_serve_refuse(int fd, unsigned status, const char *phrase, const char *error);

/* stale.c: a killed daemon's cgroups and host id slots, removed. */
void al_serve_cleanup_stale(void);
