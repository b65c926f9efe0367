/* AWS Signature Version 4 re-signing (pure: no syscalls beyond malloc for
 * the chunk being re-signed; OpenSSL's HMAC and SHA-256 only).
 *
 * The sandbox is given a placeholder AWS key pair (and a placeholder session
 * token when the real credentials have one) and signs its requests as usual.
 * The gateway sees each request in clear and, for the secret's scoped hosts,
 * re-signs it with the real key: the same canonical request, the same date,
 * region and service, the real access key id and the real secret. The
 * request's own Authorization header (or its presigned query) is checked
 * strictly first, because it is hostile input; every refusal names what was
 * wrong.
 *
 * The canonical request is built as botocore builds it (and AWS documents):
 * - the canonical URI is the path as sent; for every service but S3 (and
 *   s3-object-lambda, s3-outposts) dot segments and empty segments are
 *   removed first and the result is percent-encoded once more (so "%20"
 *   becomes "%2520"), except unreserved characters and '/';
 * - the canonical query is the query's name=value pairs as sent (SDKs send
 *   them percent-encoded), sorted by name, then by value;
 * - the canonical headers are the SignedHeaders' fields, values trimmed,
 *   runs of spaces and tabs collapsed to one space, repeated fields joined
 *   with ',' in order.
 * When the placeholder secret is given, the request's signature must verify
 * with it before anything is signed with the real one: a canonical request
 * that differs from the one the client signed (a signed header changed on
 * the way, a client that canonicalizes differently) is refused here with a
 * clear message rather than sent to AWS to fail there.
 *
 * Bodies: a hash, UNSIGNED-PAYLOAD and STREAMING-UNSIGNED-PAYLOAD-TRAILER
 * need only the head re-signed. A body whose chunks are signed
 * (x-amz-content-sha256: STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER])
 * chains each chunk's signature from the one before, starting at the
 * head's: al_sigv4_resign_chunked() re-signs the head and returns a filter
 * that re-signs the body as it streams; al_sigv4_resign() refuses it.
 *
 * Not re-signed, refused with ENOTSUP: SigV4a (AWS4-ECDSA-P256-SHA256, in
 * the head or the chunks) and a request dated by a Date header without
 * X-Amz-Date.
 *
 * Errors: -EINVAL for malformed input (the request, or credentials that are
 * not well-formed), -EACCES when the request is not signed with the
 * placeholder key (another access key id, a signature that does not verify,
 * a session token that is not the run's), -ENOTSUP as above, -E2BIG past a
 * limit below, -ENOSPC when the output does not fit, -EIO when OpenSSL
 * fails. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"

#define AL_SIGV4_TARGET_MAX  16384	/* a request target (the gateway's head is 16 KiB) */
#define AL_SIGV4_HEADERS_MAX 64		/* fields in a request */
#define AL_SIGV4_PARAMS_MAX  512	/* name=value pairs in a query */
#define AL_SIGV4_AUTH_MAX    4096	/* an Authorization value; a decoded X-Amz-SignedHeaders */
#define AL_SIGV4_KEY_ID_MAX  128	/* an access key id */
#define AL_SIGV4_SECRET_MAX  256	/* a secret access key */
#define AL_SIGV4_TOKEN_MAX   8192	/* a session token */
#define AL_SIGV4_CHUNK_MAX   (1u << 20) /* one signed chunk's data (SDKs send 8 to 128 KiB) */
#define AL_SIGV4_TRAILER_MAX 4096	/* a signed body's trailer fields */

/* A header field as it is sent upstream: name and value (trimmed) are
 * borrowed slices, not NUL-terminated. */
struct al_sigv4_header {
	const char *name;
	size_t name_len;
	const char *value;
	size_t value_len;
};

/* One request, all of it borrowed. */
struct al_sigv4_request {
	const char *method;
	size_t method_len;
	/* The request line's origin-form target as sent: "/path[?query]". */
	const char *target;
	size_t target_len;
	/* Every field, in the order sent. The Authorization field (header
	 * auth) is among them. */
	const struct al_sigv4_header *headers;
	size_t n_headers;
	/* 64 lowercase hex digits, the SHA-256 of the body, or NULL. When
	 * NULL, an x-amz-content-sha256 field must say what was signed
	 * (presigned S3 URLs default to UNSIGNED-PAYLOAD). When both are
	 * given and the field is a hash, they must agree. */
	const char *payload_hash;
};

/* An access key: NUL-terminated strings, borrowed. An access key id is 1 to
 * 128 of [A-Za-z0-9._~-] (so it needs no encoding in a query); a secret 1
 * to 256 bytes; a session token (NULL when there is none) 1 to 8192 bytes
 * with no control characters. */
struct al_sigv4_creds {
	const char *access_key_id;
	const char *secret_access_key; /* may be NULL in `fake`: then nothing is verified */
	const char *session_token;     /* NULL: none */
};

/* Re-sign a request whose Authorization header is
 *   AWS4-HMAC-SHA256 Credential=AKID/DATE/REGION/SERVICE/aws4_request,
 *   SignedHeaders=a;b;c, Signature=HEX
 * (parts in any order, each once, separated by ',' and optional spaces).
 * Checks: exactly one Authorization field, with exactly that syntax; AKID
 * is fake->access_key_id; SignedHeaders lowercase, sorted, without
 * duplicates, naming only fields present in r, among them host and
 * x-amz-date; exactly one X-Amz-Date field, YYYYMMDDTHHMMSSZ, whose day is
 * DATE; no presigned-query parameters in the target as well; the payload
 * as described above; with fake->secret_access_key, that Signature
 * verifies with it.
 *
 * Session tokens: the caller substitutes the X-Amz-Security-Token field's
 * value with real->session_token BEFORE calling, so that r is what goes
 * upstream. It must then be exactly real->session_token (a field still
 * carrying the placeholder is refused, and so is a missing one when the
 * credentials have a token); the placeholder's signature is verified
 * with fake->session_token put back. fake and real must both have a token
 * or both have none: adding or dropping the field would change what the
 * client signed.
 *
 * On success writes the new Authorization value, NUL-terminated, into out:
 * the same scope and SignedHeaders with real->access_key_id and the new
 * Signature. Returns its length; on failure a negative errno (see above)
 * with err filled, and out untouched. */
int al_sigv4_resign(const struct al_sigv4_request *r, const struct al_sigv4_creds *fake,
		    const struct al_sigv4_creds *real, char *out, size_t size,
		    struct al_error *err);

/* Re-sign a presigned URL: the target's query carries X-Amz-Algorithm
 * (AWS4-HMAC-SHA256), X-Amz-Credential, X-Amz-Date, X-Amz-Expires (1 to
 * 604800), X-Amz-SignedHeaders and X-Amz-Signature, and
 * X-Amz-Security-Token exactly when the credentials have a token; each
 * once, checked as al_sigv4_resign() checks the header's parts, and no
 * Authorization field. The payload is x-amz-content-sha256's value when
 * that field is sent, else UNSIGNED-PAYLOAD for S3, else r->payload_hash.
 *
 * Here r->target is the target as the sandbox sent it, placeholder token
 * included: do not substitute inside it. The new target (written
 * NUL-terminated to out_target) keeps the path and every parameter in
 * order, with the real credential, the real session token (percent-encoded)
 * and the new signature in place of theirs. Returns its length, or a
 * negative errno as al_sigv4_resign(). */
int al_sigv4_resign_query(const struct al_sigv4_request *r, const struct al_sigv4_creds *fake,
			  const struct al_sigv4_creds *real, char *out_target, size_t size,
			  struct al_error *err);

/* True if the request claims a signature by access_key_id: an Authorization
 * field of an AWS4-* algorithm whose Credential= names it, or an
 * X-Amz-Credential query parameter that does. Such a request is for
 * al_sigv4_resign() (it has an Authorization field) or
 * al_sigv4_resign_query(), which check everything else; one that is not
 * re-signable (SigV4a, for one) is refused there with the reason. */
bool al_sigv4_uses_key(const struct al_sigv4_request *r, const char *access_key_id);

/* A body of signed chunks as it streams: the sandbox's bytes in, the same
 * bytes with every chunk's (and the trailer's) signature re-signed out.
 * The signatures have the same length, so Content-Length and
 * x-amz-decoded-content-length stay true. A chunk is held until it is
 * whole (its signature covers its data and comes first), so the filter
 * holds at most one chunk: AL_SIGV4_CHUNK_MAX bytes of data, more is
 * refused. Each chunk's signature is verified with the placeholder key
 * when al_sigv4_resign_chunked() had its secret. */
struct al_sigv4_chunked;

/* As al_sigv4_resign(), for any body. When its chunks are signed, *ret is
 * a new filter for the body (free with al_sigv4_chunked_free()); for any
 * other body *ret is NULL and the body goes through as it is. *ret is
 * written only on success. */
int al_sigv4_resign_chunked(const struct al_sigv4_request *r, const struct al_sigv4_creds *fake,
			    const struct al_sigv4_creds *real, char *out, size_t size,
			    struct al_sigv4_chunked **ret, struct al_error *err);

/* Take body bytes from in (len of them): *ret_taken says how many were
 * taken, fewer than len when a whole chunk is ready (send it first, with
 * al_sigv4_chunked_pending()) or the body has ended (bytes after it are
 * not the body's). Returns 0, or a negative errno when the body is
 * malformed (-EINVAL: framing; -E2BIG: a chunk or trailer past its limit;
 * -EACCES: a signature that does not verify; -EIO), after which every
 * call fails the same way. */
int al_sigv4_chunked_feed(struct al_sigv4_chunked *c, const char *in, size_t len, size_t *ret_taken,
			  struct al_error *err);

/* The re-signed bytes ready to send upstream, NULL (and 0) when none:
 * borrowed, valid until the next call on c. */
const char *al_sigv4_chunked_pending(const struct al_sigv4_chunked *c, size_t *ret_len);

/* n of the pending bytes were sent. */
void al_sigv4_chunked_sent(struct al_sigv4_chunked *c, size_t n);

/* True once the last chunk (and the trailer) went out: a body that ends
 * before that is truncated. */
bool al_sigv4_chunked_done(const struct al_sigv4_chunked *c);

/* Wipe the keys and free c (NULL is fine). */
void al_sigv4_chunked_free(struct al_sigv4_chunked *c);

static inline void al_sigv4_chunked_freep(struct al_sigv4_chunked **c)
{
	al_sigv4_chunked_free(*c);
}
