/* Shared by the files of src/serve only. */
#pragma once

#include <stdint.h>
#include <stdio.h>
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
	/* Creates answered 201, split: claimed from the warm pool or cold. */
	struct al_hist create_warm_s, create_cold_s;
};
void al_metrics_status(struct al_metrics *m, unsigned status);
void al_hist_add(struct al_hist *h, double seconds);
/* The text format; running: the clients' sandboxes, ready: the warm
 * pool's held ones. */
char *al_metrics_text(const struct al_metrics *m, unsigned running, unsigned ready,
		      unsigned clients);
/* A histogram's lines (no HELP or TYPE), each with labels ("a=\"b\"",
 * or "") before its le. */
void al_hist_text(FILE *f, const char *name, const char *labels, const struct al_hist *h);
/* A reason's name to its index in limit_hits, or -1 when it is no limit. */
int al_metrics_limit_index(const char *reason);

/* stale.c: a killed daemon's cgroups and host id slots, removed. */
void al_serve_cleanup_stale(void);
