/* The request stream filter's state, shared by its three files (internal
 * to src/gateway/reqstream*.c):
 *   reqstream.c       the filter's life, the events, each head's checks
 *   reqstream-head.c  the conf's secrets, and the head that goes upstream
 *   reqstream-body.c  bodies: framing (Content-Length, chunked), streaming,
 *                     buffering and rewriting */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway/needles.h"
#include "gateway/reqstream.h"

#define RS_IN_SIZE	  AL_HTTP_HEAD_MAX /* the input buffer: one head fits */
#define RS_LINE_MAX	  4096		   /* longest chunk-size line, extensions included */
#define RS_TRAILER_MAX	  8192		   /* the trailer section's bytes */
#define RS_TRAILERS_MAX	  64		   /* and fields */
#define RS_INJECT_MAX	  16		   /* most secrets on one connection */
#define RS_BODY_MAX_LIMIT (64u << 20)	   /* the largest body_max */
#define RS_PARAM_MAX	  256		   /* longest QUERY parameter name */
#define RS_OCC_UNKNOWN	  (SIZE_MAX - 1)   /* rs->occ: not searched yet */
#define RS_OCC_NONE	  SIZE_MAX	   /* rs->occ: no more occurrences */

enum rs_state {
	RS_HEAD,	/* reading the next head */
	RS_ANNOUNCE,	/* the REQUEST event is due */
	RS_SEND_HEAD,	/* out[out_off, out_len) goes upstream */
	RS_BODY_STREAM, /* the body is checked in place and passed on */
	RS_BODY_BUFFER, /* the body is collected in body[] */
	RS_SEND_BODY,	/* the collected body goes upstream, rewritten */
	RS_FINAL,	/* fin is the answer to every call */
};

enum rs_chunk {
	RS_CK_SIZE,	/* a chunk-size line is due */
	RS_CK_DATA,	/* left bytes of chunk data */
	RS_CK_DATA_END, /* the CRLF after chunk data */
	RS_CK_TRAILER,	/* a trailer field or the final blank line */
	RS_CK_DONE,
};

/* How a body's placeholder is encoded, by the body's Content-Type. */
enum rs_ctype {
	RS_CT_RAW,
	RS_CT_FORM, /* application/x-www-form-urlencoded: percent-encoded */
	RS_CT_JSON, /* application/json, ...+json: JSON string escaping */
	RS_CT_N,
};

/* What is computed once per secret (reqstream-head.c). */
struct rs_secret {
	char *field; /* HEADER, BASIC: the field's value */
	size_t field_len;
	char *query; /* QUERY: "param=value", both percent-encoded */
	size_t query_len;
	char *enc[RS_CT_N]; /* body: the value as each body type carries it */
	size_t enc_len[RS_CT_N];
	size_t ph_len;
};

struct al_reqstream {
	const struct al_reqstream_conf *conf;
	struct al_host host;
	char host_field[AL_HOST_MAX + 16]; /* Host when the request has none */
	struct rs_secret *sec;		   /* one per conf->inject */
	bool any_body;			   /* a secret with body: every body is buffered */
	int sigv4;			   /* the SIGV4 secret's index, or -1 */
	const struct al_needles *needles;  /* conf->needles */
	al_needle_mask scoped;		   /* those of the secrets scoped here */

	enum rs_state st;
	bool eof;
	uint64_t n_requests;
	struct al_needle_scan oscan; /* everything sent, as one stream */

	/* Input: [in_off, in_pos) is checked and waits to go out (or, while
	 * buffering, is already used); [in_pos, in_len) is not looked at yet. */
	char in[RS_IN_SIZE];
	size_t in_off, in_pos, in_len;
	size_t head_tried; /* head bytes the parser saw without an answer */

	/* The current request. */
	char head[AL_HTTP_HEAD_MAX];
	struct al_http_request req;
	char path[AL_HTTP_HEAD_MAX + 1];
	size_t path_len;
	/* The method as the REQUEST event shows it (its path is shown in
	 * target, which is free again once the head is built). */
	char shown_method[AL_HTTP_METHOD_MAX];
	const char *query; /* in head: from the '?', or NULL */
	size_t query_len;
	bool sent_any; /* bytes of it went out: a refusal now is a cut */
	bool close;    /* the client asked for the connection to close after it */
	bool has_body, buffer, chunked;
	bool resign;	/* SIGV4: the sandbox signed it, it is re-signed */
	int amz_sha;	/* the x-amz-content-sha256 field's index, or -1 */
	bool hashed;	/* sha_hex holds the body's hash */
	bool rewritten; /* a placeholder in the body was replaced */
	uint64_t left;	/* Content-Length body or chunk data bytes still due */
	enum rs_chunk ck;
	size_t trailer_bytes, trailer_fields;
	uint64_t body_seen;	    /* decoded body bytes so far */
	int64_t body_len;	    /* for the REQUEST event */
	struct al_needle_scan scan; /* the decoded body (chunked or buffered) */
	const char **injected;
	size_t n_injected;

	/* The head that goes upstream. */
	char *out;
	size_t out_size, out_len, out_off;
	struct al_http_header_view *views;
	size_t n_views, cap_views;
	char *target;
	size_t target_size, target_len;
	char auth[AL_REQSTREAM_SIGV4_MAX];
	char sha_hex[65];
	char clen[24];
	char accept_enc[128]; /* Accept-Encoding as it goes (answers are decoded) */

	/* A buffered body (allocated at the first one), its type, how often
	 * each secret's placeholder is in it, and the walk that sends it. */
	char *body;
	size_t body_used;
	enum rs_ctype ctype;
	size_t *occ;  /* per secret: its next placeholder at or after walk_pos */
	size_t *hits; /* per secret: placeholders replaced */
	size_t walk_pos;
	int walk_sec; /* the secret whose value is being sent, or -1 */
	size_t walk_voff;

	struct al_reqstream_event fin;
	char reason[256];
	char where[96];
	/* The request a final event is about, when its head was parsed: its
	 * method and its path (placeholders shown as "{secret}") for the
	 * caller's audit. */
	bool req_known;
	char fin_path[256];
};

/* reqstream.c: end the stream with a refusal (status, the rule's text or
 * NULL, a reason: never a value or anything the sandbox sent) or a misuse
 * of needle set_index of rs->needles found in where. */
void rs_refuse(struct al_reqstream *rs, int status, const char *rule, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void rs_misuse(struct al_reqstream *rs, int set_index, const char *where);
bool rs_same_ci(const char *a, size_t alen, const char *b);
/* Look at bytes about to be sent, as one stream for the whole connection:
 * a needle could form only there (a decoded path joined to its query, the
 * end of one request and the start of the next), and a Content-Length body
 * that streams is looked at only there. A head or a buffered body is
 * looked at whole before any of it goes, a streamed body as it goes. False
 * (and a misuse in where) when a needle ends in them. */
bool rs_out_ok(struct al_reqstream *rs, const char *data, size_t n, const char *where);
/* The request's first field called name, or -1. */
int rs_find_field(const struct al_reqstream *rs, const char *name);

/* reqstream-head.c */
int rs_secrets_prepare(struct al_reqstream *rs, struct al_error *err);
void rs_secrets_free(struct al_reqstream *rs);
/* Decide whether the request is re-signed (rs->resign, rs->amz_sha);
 * -1 when it was refused. */
int rs_sigv4_plan(struct al_reqstream *rs);
/* Build the upstream head into out; -1 when it was refused. */
int rs_head_build(struct al_reqstream *rs);
/* SHA-256 of the len bytes at buf as lower-case hex (65 bytes with NUL). */
int rs_sha256_hex(const char *buf, size_t len, char hex[65]);

/* reqstream-body.c */
/* How placeholders in this request's body are encoded (its Content-Type). */
enum rs_ctype rs_body_type(const struct al_reqstream *rs);
void rs_body_stream(struct al_reqstream *rs);
void rs_body_collect(struct al_reqstream *rs);
bool rs_body_done(const struct al_reqstream *rs);
/* The collected body is complete: count and hash what will be sent, then
 * build the head; -1 when it was refused. */
int rs_body_finish(struct al_reqstream *rs);
/* The next bytes of the rewritten body (at most room, > 0); 0 when it is
 * all sent. */
size_t rs_body_emit(struct al_reqstream *rs, size_t room, const char **data);
