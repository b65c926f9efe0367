/* The filtered stream's parts (filter.c: the filter's configuration and
 * events; filter-pump.c: the bytes, through TLS ends or not). Internal to
 * src/gateway. */
#pragma once

#include <stdbool.h>
#include <string.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway/answer.h"
#include "gateway/conn.h"
#include "gateway/reqstream.h"
#include "net/reqrule.h"

#define FBUF	   (32u << 10)
#define BODY_MAX   (256u << 10) /* a body buffered to be rewritten or hashed */
#define INJECT_MAX 16
#define RECORD_MAX (16u << 10) /* plaintext moved per TLS write */

struct fbuf {
	size_t off, len;
	char d[FBUF];
};

struct gw_filter {
	struct al_reqstream *rs;
	struct al_reqstream_conf conf;
	struct al_reqrule rule;
	char **paths_also; /* the operator's paths (borrowed from the plan) */
	struct al_secret_use inject[INJECT_MAX];
	const struct al_cred_secret *inject_src[INJECT_MAX];
	size_t n_inject;
	/* Per-request tokens: the one the next request gets, when it was
	 * minted, when it expires and whether a request took it. */
	char *token[INJECT_MAX];
	char jti[INJECT_MAX][33];
	int64_t token_iat[INJECT_MAX], token_exp[INJECT_MAX];
	bool token_used[INJECT_MAX];
	/* TLS: the ends, NULL for plain HTTP. */
	struct al_tls_end *srv, *cli;
	bool tls_up;		  /* both handshakes done */
	struct fbuf in;		  /* the client's plaintext, waiting for the filter */
	struct fbuf up;		  /* filtered plaintext for the upstream */
	struct fbuf down;	  /* the upstream's plaintext for the client */
	struct fbuf c_out, u_out; /* ciphertext (TLS) or plaintext to send */
	uint64_t forwarded;	  /* requests that went out */
	/* A refusal: the answer, once what came before it has drained. */
	bool refused, answered, client_done;
	char answer[1024];
	size_t answer_len;
	/* The answers are searched for the values put into the requests
	 * (gateway/answer.h) when any can be: NULL otherwise. down_out
	 * counts the answer bytes that left f->down. */
	struct al_answer *ans;
	uint64_t down_out;
	bool up_ended; /* the upstream's own end (not the gateway's cut) */
	/* A possible start of a value held back waits for the bytes that
	 * settle it: at most GW_ANSWER_STALL_MS with none, then the
	 * connection is closed. */
	struct al_timer *stall_timer;
	bool stall_armed, stalled;
	struct conn *c;
};

/* filter.c: the client's plaintext in f->in through the filter into
 * f->up, with each request's audit and charge. */
void gw_filter_feed(struct conn *c, struct gw_filter *f);
/* The client's bytes the stages before the stream read (c->up.b), into
 * the filter as they fit. */
void gw_filter_early(struct conn *c);

#define GW_ANSWER_STALL_MS 30000

static inline size_t fb_room(const struct fbuf *b)
{
	return FBUF - b->off - b->len;
}

static inline void fb_compact(struct fbuf *b)
{
	if (b->off && b->len)
		memmove(b->d, b->d + b->off, b->len);
	b->off = 0;
}

static inline void fb_put(struct fbuf *b, const void *p, size_t n)
{
	if (fb_room(b) < n)
		fb_compact(b);
	memcpy(b->d + b->off + b->len, p, n);
	b->len += n;
}

static inline void fb_take(struct fbuf *b, size_t n)
{
	b->off += n;
	b->len -= n;
	if (!b->len)
		b->off = 0;
}
