/* The front's request decoder: one HTTP request (method, raw path, raw
 * query, headers, body) to the typed message the monitor reads, or an
 * HTTP status and the reason. Pure (no libmicrohttpd, no I/O): front.c
 * feeds it what libmicrohttpd read, and tests/fuzz/fuzz_front_decode.c
 * feeds it anything. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "serve/msg.h"

/* Bounds on what one request may carry into the decoder (the front passes
 * at most these many; more is a 400 / 431). */
#define AL_FRONT_QUERY_MAX   32
#define AL_FRONT_HEADERS_MAX 100

struct al_front_kv {
	const char *key, *value; /* value may be NULL (a query key without '=') */
};

/* What the head says, as it came (the path and query not decoded). */
struct al_front_head {
	const char *method;
	const char *path;
	const struct al_front_kv *query;
	size_t n_query;
	const struct al_front_kv *headers;
	size_t n_headers;
};

/* A request decoded: the operation and what goes with it. */
struct al_front_req {
	enum al_serve_op op;
	char sandbox[64];  /* the sandbox id, or "" */
	char path[512];	   /* AL_OP_SANDBOX_OTHER: "METHOD rest?flags", decoded once */
	char token[257];   /* the bearer token, or "" */
	size_t max;	   /* the body's bound for this route */
	char *filter;	   /* AL_OP_SANDBOX_LIST: the metadata filter as JSON (owned) */
	char err[640];	   /* the reason of a status */
	const char *allow; /* a 405's Allow header */
};

/* The head: route, method, query, framing headers, the token. 0, or an
 * HTTP status (400, 404, 405, 411, 413, 414) with rq->err set. */
unsigned al_front_decode_head(const struct al_front_head *h, struct al_front_req *rq);
/* The body, whole: bounded, and a JSON object where the route takes one.
 * 0, or a status (400, 413) with rq->err set. */
unsigned al_front_decode_body(struct al_front_req *rq, const char *body, size_t len);
/* The typed message (AL_MSG_REQUEST, id req) for the monitor: 0, or 413
 * when it would be over a frame's bound (o freed). */
unsigned al_front_encode(const struct al_front_req *rq, uint64_t req, uint64_t conn,
			 const char *body, size_t len, struct al_msg_out *o);
void al_front_req_free(struct al_front_req *rq);

/* Percent-decode src[0..n) once into dst (at least n + 1 bytes), refusing
 * an escape of NUL or '/' and a '%' not followed by two hex digits:
 * the decoded length, or -1 with *bad the offset of the refused escape. */
long al_front_unescape(const char *src, size_t n, char *dst, size_t *bad);
