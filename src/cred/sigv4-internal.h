/* What the SigV4 files share: the parsed authorization, the canonical
 * request and the signing key (sigv4-canon.c), the checks
 * (sigv4-parse.c), the head's re-signing for sigv4-chunked.c (sigv4.c),
 * text helpers. Not for other modules. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "cred/sigv4.h"

#define SV4_SCOPE_PART_MAX 64 /* a region or a service name */
#define SV4_HEX_LEN	   64 /* a SHA-256 in hex */

#define SV4_ALGORITHM "AWS4-HMAC-SHA256"
#define SV4_SIGV4A    "AWS4-ECDSA-P256-SHA256"

/* A credential scope: AKID/DATE/REGION/SERVICE/aws4_request. */
struct sv4_scope {
	char akid[AL_SIGV4_KEY_ID_MAX + 1];
	char date[9];
	char region[SV4_SCOPE_PART_MAX + 1];
	char service[SV4_SCOPE_PART_MAX + 1];
};

/* A request's signature, from its Authorization field or its query. */
struct sv4_auth {
	struct sv4_scope scope;
	char timestamp[17]; /* YYYYMMDDTHHMMSSZ */
	char signed_headers[AL_SIGV4_AUTH_MAX + 1];
	size_t signed_len;
	char signature[SV4_HEX_LEN + 1];
};

/* What the canonical request is made of. */
struct sv4_canon {
	const struct al_sigv4_request *r;
	const struct sv4_auth *a;
	const char *query; /* the raw query after '?' (may be another target's) */
	size_t query_len;
	bool query_auth; /* leave X-Amz-Signature out of the canonical query */
	/* The x-amz-security-token value to use instead of the field's, or
	 * NULL for the field's own. */
	const char *token;
	const char *payload; /* the last line: a hash, UNSIGNED-PAYLOAD, ... */
};

/* The signing key of a scope, HMAC-SHA256("AWS4" + secret, date, region,
 * service, "aws4_request"). */
struct sv4_key {
	unsigned char k[32];
};

/* SHA-256 of the canonical request. Fails (with the reason) on a control
 * character in a signed field's value, too many query parameters, or
 * OpenSSL. */
int sv4_canonical_hash(const struct sv4_canon *c, unsigned char md[32], struct al_error *err);

int sv4_signing_key(const char *secret, const struct sv4_scope *s, struct sv4_key *ret,
		    struct al_error *err);

/* Hex HMAC-SHA256 of text under key (65 bytes with the NUL). */
int sv4_hmac_hex(const struct sv4_key *key, const char *text, size_t len, char hex[65],
		 struct al_error *err);

/* The string to sign of a canonical request, and its signature. */
int sv4_sign(const struct sv4_key *key, const struct sv4_auth *a, const unsigned char md[32],
	     char hex[65], struct al_error *err);

void sv4_hex(const unsigned char *md, size_t n, char *out);

bool sv4_is_service_s3(const char *service);

/* Unreserved characters (RFC 3986): never percent-encoded. */
bool sv4_is_unreserved(unsigned char c);

/* s (n bytes) made printable for a message in buf: non-printable bytes
 * become '?', and what does not fit is cut with "...". Returns buf. */
const char *sv4_clip(const char *s, size_t n, char *buf, size_t size);
#define SV4_CLIP_MAX 48

/* Case-insensitive comparison of a field name with a lowercase literal. */
bool sv4_name_is(const char *name, size_t len, const char *lower);

/* What the body is, as x-amz-content-sha256 says. */
enum sv4_body {
	SV4_BODY_PLAIN,		  /* hashed, unsigned, or unsigned chunks */
	SV4_BODY_CHUNKED,	  /* signed chunks */
	SV4_BODY_CHUNKED_TRAILER, /* signed chunks and a signed trailer */
};

/* al_sigv4_resign(), and also for a body of signed chunks when chunked_ok;
 * fills *a, sig (the new seed signature) and *ret_body. */
int sv4_resign_head(const struct al_sigv4_request *r, const struct al_sigv4_creds *fake,
		    const struct al_sigv4_creds *real, bool chunked_ok, char *out, size_t size,
		    struct sv4_auth *a, char sig[65], enum sv4_body *ret_body,
		    struct al_error *err);

/* ---- sigv4-parse.c: the checks --------------------------------------- */

bool sv4_is_digit(char c);
/* Exactly 64 lowercase hex digits. */
bool sv4_is_hex64(const char *s, size_t n);
bool sv4_slice_is(const char *s, size_t n, const char *lit);
/* A hex digit's value (either case), or -1. */
int sv4_hex_value(char c);
static inline bool sv4_is_hex_digit(char c)
{
	return sv4_hex_value(c) >= 0;
}

/* The request's shape (method, target, field names, payload hash) and
 * both credentials (fake's secret may be NULL). */
int sv4_check_all(const struct al_sigv4_request *r, const struct al_sigv4_creds *fake,
		  const struct al_sigv4_creds *real, struct al_error *err);

/* The only field called lname: 1 and *ret, 0 (and NULL) when there is
 * none, -EINVAL when there are several. */
int sv4_find_field(const struct al_sigv4_request *r, const char *lname,
		   const struct al_sigv4_header **ret, struct al_error *err);
bool sv4_has_field(const struct al_sigv4_request *r, const char *lname);

/* YYYYMMDDTHHMMSSZ into out. */
int sv4_parse_timestamp(const char *s, size_t n, char out[17], struct al_error *err);

/* AKID/DATE/REGION/SERVICE/aws4_request, whose AKID must be fake_akid
 * (-EACCES otherwise). */
int sv4_parse_credential(const char *s, size_t n, const char *fake_akid, struct sv4_scope *sc,
			 struct al_error *err);

/* Lowercase, sorted, no duplicates, each a field of r, host among them
 * (and x-amz-date when need_date: AWS requires it signed with header
 * auth). */
int sv4_check_signed_headers(const struct al_sigv4_request *r, const char *s, size_t n,
			     bool need_date, struct al_error *err);
int sv4_copy_signed_headers(const char *s, size_t n, struct sv4_auth *a, struct al_error *err);
int sv4_parse_signature(const char *s, size_t n, struct sv4_auth *a, struct al_error *err);

/* An Authorization value's three parts. */
enum {
	P_CREDENTIAL,
	P_SIGNED,
	P_SIGNATURE,
	P_N
};

struct sv4_parts {
	const char *v[P_N];
	size_t len[P_N];
};

/* "AWS4-HMAC-SHA256 " part *("," *SP part): each of Credential,
 * SignedHeaders and Signature once. */
int sv4_split_parts(const char *v, size_t len, struct sv4_parts *p, struct al_error *err);

/* The presigned query's parameters. */
enum {
	Q_ALGORITHM,
	Q_CREDENTIAL,
	Q_DATE,
	Q_EXPIRES,
	Q_SIGNED,
	Q_SIGNATURE,
	Q_TOKEN,
	Q_N
};

struct sv4_qparams {
	const char *v[Q_N];
	size_t len[Q_N];
	bool seen[Q_N];
};

extern const char *const sv4_qnames[Q_N];

/* The query after '?' in r's target (empty when there is none). */
const char *sv4_query_of(const struct al_sigv4_request *r, size_t *ret_len);

/* Find the authentication parameters among the query's (names spelled as
 * AWS does): each at most once. */
int sv4_scan_query(const char *q, size_t n, struct sv4_qparams *p, struct al_error *err);

/* Percent-decode s into out (NUL-terminated, at most size - 1 bytes);
 * what names it in messages. */
int sv4_pct_decode(const char *s, size_t n, const char *what, char *out, size_t size,
		   size_t *ret_len, struct al_error *err);
