/* What jwt.c (tokens) and jwt-key.c (keys) share: the key's fields. */
#pragma once

#include <openssl/evp.h>
#include <stdbool.h>
#include <stddef.h>

#include "cred/jwt.h"

#define JWT_ED25519_LEN	   32 /* bytes of an Ed25519 public key */
#define JWT_ED25519_SIG	   64 /* bytes of an Ed25519 signature */
#define JWT_HS256_SIG	   32 /* bytes of an HMAC-SHA-256 */
#define JWT_THUMBPRINT_LEN 43 /* base64url of a SHA-256 */

struct al_jwt_key {
	enum al_jwt_alg alg;
	bool can_sign;
	EVP_PKEY *pkey;			    /* EdDSA: the key (private or public only) */
	unsigned char pub[JWT_ED25519_LEN]; /* EdDSA: the raw public key */
	EVP_MAC_CTX *mac;		    /* HS256: HMAC-SHA-256 keyed with the secret */
	char kid[JWT_THUMBPRINT_LEN + 1];   /* the RFC 7638 thumbprint */
	char *header;			    /* base64url of the header mint writes */
	size_t header_len;
};

/* The JOSE name of alg: "HS256" or "EdDSA". */
const char *al_jwt_alg_name(enum al_jwt_alg alg);

/* Fill err with what failed and OpenSSL's reason, and empty OpenSSL's
 * error queue. Returns -code. */
int al_jwt_ossl_error(struct al_error *err, int code, const char *what);

/* Sign n bytes at in with k (which can sign) into sig (room for
 * JWT_ED25519_SIG bytes); *ret_len gets the signature's length. */
int al_jwt_sign(const struct al_jwt_key *k, const char *in, size_t n, unsigned char *sig,
		size_t *ret_len, struct al_error *err);

/* 0 when sig is k's signature of n bytes at in (compared in constant
 * time); -EBADMSG when not. */
int al_jwt_check_signature(const struct al_jwt_key *k, const char *in, size_t n,
			   const unsigned char *sig, size_t sig_len, struct al_error *err);
