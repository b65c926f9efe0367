/* JSON Web Tokens (RFC 7519) that airlock mints per run and verifies: HS256
 * (HMAC-SHA-256 over a shared secret) and EdDSA (Ed25519, RFC 8037). All
 * crypto is OpenSSL's.
 *
 * A key is loaded once (its file read on the host, by the supervisor) and
 * then only used: minting is cheap enough to do per request in the egress
 * gateway (the header, its kid and the HMAC state are prepared at load).
 * Freeing a key wipes its material.
 *
 * Verification treats the token as hostile and is strict on purpose:
 * - at most AL_JWT_TOKEN_MAX bytes, three base64url parts without padding,
 *   in canonical form (no stray bits in the last character), so one
 *   signature has exactly one spelling;
 * - the header is a JSON object without duplicate names whose "alg" is the
 *   key's own ("none", and HS256 with an Ed25519 key or EdDSA with an HS256
 *   key, are refused before any signature is looked at), whose "kid", when
 *   present, is the key's, whose "typ", when present, is "JWT", and which
 *   has no "crit";
 * - the signature is checked (in constant time) before the payload is
 *   parsed;
 * - the payload is a JSON object without duplicate names; "exp" is
 *   required and must be after now; "nbf" and "iat", when present, must not
 *   be after now; times are JSON numbers (seconds since the epoch); "aud",
 *   when an audience is wanted, must be that string or an array holding it.
 * The error names the one check that failed, and quotes what the token
 * said only JSON-escaped (hostile bytes never reach a log raw). */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#define AL_JWT_TOKEN_MAX    8192	/* the longest token verify reads or mint makes */
#define AL_JWT_KEY_FILE_MAX (64 * 1024) /* the largest key file or buffer */
#define AL_JWT_HS256_MIN    32		/* bytes of an HS256 secret, at least (RFC 7518 3.2) */
#define AL_JWT_JTI_LEN	    32		/* hex digits of al_jwt_new_jti() */

enum al_jwt_alg {
	AL_JWT_HS256 = 1,
	AL_JWT_EDDSA,
};

/* A signing or verifying key; holds the key material. */
struct al_jwt_key;

/* Load a key file (at most AL_JWT_KEY_FILE_MAX bytes, a regular file;
 * symbolic links are followed, as key stores such as Kubernetes secret
 * volumes use them):
 * - a PEM Ed25519 private key ("PRIVATE KEY", PKCS#8, what
 *   `openssl genpkey -algorithm ed25519` and al_jwt_keygen() write) or
 *   public key ("PUBLIC KEY", SubjectPublicKeyInfo) is an EdDSA key;
 * - any other PEM block (RSA, EC, an encrypted key, a certificate) is
 *   refused, never taken for an HS256 secret: an RSA public key used as an
 *   HMAC secret is the classic algorithm-confusion forgery;
 * - anything else is an HS256 secret: the file's exact bytes (a trailing
 *   newline included), at least AL_JWT_HS256_MIN of them.
 * A file that holds a secret (an HS256 secret, an Ed25519 private key) must
 * be owned by the effective uid and have no permission bits for group or
 * others (whoever can read it can mint tokens; this holds for root too, as
 * ssh does for its keys); a public key file must not be writable by group
 * or others (whoever can replace it decides which tokens verify).
 * The key is tried once (a signature made and checked): it is known to
 * work, and OpenSSL has read its configuration and fetched the algorithms
 * before the process that holds the key confines itself.
 * Returns 0 with *ret set (free with al_jwt_key_free()), or -errno with err
 * naming the file and what was wrong (-EPERM for a mode or owner, -EINVAL
 * for content, -EFBIG for size). Buffers that held the file are wiped. */
int al_jwt_key_load(const char *path, struct al_jwt_key **ret, struct al_error *err);

/* As al_jwt_key_load() from len bytes at buf (borrowed; not wiped: the
 * caller owns it), without the file checks. */
int al_jwt_key_from_mem(const void *buf, size_t len, struct al_jwt_key **ret, struct al_error *err);

/* Free k and wipe its key material (OPENSSL_clear_free, and OpenSSL's own
 * wiping of its EVP_PKEY and HMAC state). NULL is fine. */
void al_jwt_key_free(struct al_jwt_key *k);
static inline void al_jwt_key_freep(struct al_jwt_key **k)
{
	al_jwt_key_free(*k);
}

enum al_jwt_alg al_jwt_key_alg(const struct al_jwt_key *k);

/* False for a public-only Ed25519 key: it verifies, it cannot mint. */
bool al_jwt_key_can_sign(const struct al_jwt_key *k);

/* The key's id, the "kid" of its tokens (borrowed, lives as long as k): the
 * RFC 7638 thumbprint (SHA-256, base64url) of its public JWK for EdDSA
 * ({"crv","kty","x"}), and of its symmetric JWK ({"k","kty":"oct"}) for
 * HS256, which a service holding the secret can compute and which does not
 * reveal the secret. */
const char *al_jwt_key_kid(const struct al_jwt_key *k);

/* Generate a new key and write it to path, created with O_EXCL and mode
 * 0600 (an existing file is never overwritten, a symbolic link never
 * followed): for EdDSA an Ed25519 private key as PKCS#8 PEM, for HS256 32
 * random bytes (RAND_bytes) as 64 lowercase hex digits without a newline,
 * the file's exact bytes being the secret. Returns 0, or -errno with err
 * naming the path (-EEXIST when it exists); a file half written is
 * removed. */
int al_jwt_keygen(enum al_jwt_alg alg, const char *path, struct al_error *err);

/* The claims of a token to mint. Strings are borrowed; NULL ones, and iat
 * and nbf when 0, are left out; exp is required. One audience is written
 * as "aud":"x", several as an array, none leaves "aud" out. */
struct al_jwt_claims {
	const char *iss, *sub, *scope, *jti;
	const char *const *aud;
	size_t n_aud;
	int64_t iat, nbf, exp; /* seconds since the epoch */
};

/* A fresh jti: 128 random bits (RAND_bytes) as 32 lowercase hex digits and
 * a NUL. 0, or -EIO with err set when OpenSSL has no randomness. */
int al_jwt_new_jti(char out[AL_JWT_JTI_LEN + 1], struct al_error *err);

/* Mint a token for c with k: header {"alg":"HS256"|"EdDSA","typ":"JWT",
 * "kid":KID}, payload iss, sub, aud, iat, nbf, exp, jti, scope in that
 * order. Refused (-EINVAL, err says which) when exp is not positive, not
 * after iat or nbf, a string is not UTF-8, or the token would be longer than
 * AL_JWT_TOKEN_MAX; -ENOKEY for a public-only key. On success *ret_token is
 * a NUL-terminated string to free(). */
int al_jwt_mint(const struct al_jwt_key *k, const struct al_jwt_claims *c, char **ret_token,
		struct al_error *err);

/* The start that every token k mints with these iss and sub shares, when
 * an audience follows them (as a per-request token's does): the header,
 * '.', and the base64url of the payload's text up to the sub, whole
 * groups of three bytes only. *ret is a string to free(). */
int al_jwt_prefix(const struct al_jwt_key *k, const char *iss, const char *sub, char **ret,
		  struct al_error *err);

/* Verify len bytes of token (hostile; need not be NUL-terminated) with k at
 * time now (seconds since the epoch), wanting audience want_aud (NULL: any
 * audience, or none). On success returns 0 and, when ret_claims is not
 * NULL, sets *ret_claims to the payload object (json_decref() it). On
 * failure err says which check failed, e.g. "expired at
 * 2026-12-01T20:10:00Z (now 2026-12-01T20:11:40Z)", "audience \"x\" not in
 * [\"a\"]", "bad signature", and the return says what kind of failure:
 * -EINVAL the token is malformed or its header refused (alg, kid, typ,
 * crit), -EBADMSG the signature does not match, -EKEYEXPIRED expired or not
 * yet valid, -EACCES not for want_aud. */
int al_jwt_verify(const struct al_jwt_key *k, const char *token, size_t len, const char *want_aud,
		  int64_t now, json_t **ret_claims, struct al_error *err);

/* The public key as a JWK Set, compact JSON to free():
 * {"keys":[{"kty":"OKP","crv":"Ed25519","x":X,"kid":KID,"alg":"EdDSA","use":"sig"}]}.
 * -EINVAL for an HS256 key: its JWK would be the secret itself. */
int al_jwt_jwks(const struct al_jwt_key *k, char **ret_json, struct al_error *err);
