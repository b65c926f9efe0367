/* The run's certificate authority: the sandbox trusts it (the supervisor
 * writes its certificate into the sandbox's trust bundle), and the gateway
 * presents leaves it mints for the hosts whose TLS it terminates.
 *
 * Its key is an ECDSA P-256 key made in memory for this run; it is never
 * serialized, and freeing the CA (or al_tls_ca_drop_key()) frees it and
 * every leaf key, which OpenSSL wipes (BN_clear_free) as it frees them.
 * The supervisor makes the CA before the sandbox starts and the gateway's
 * process inherits it by fork; the supervisor then drops its copy of the
 * keys.
 *
 * A leaf carries one name, is valid from a minute ago to the leaves' end
 * (the CA's own end unless al_tls_ca_set_leaf_end() set an earlier one), and
 * passes OpenSSL's X509_V_FLAG_X509_STRICT (Python's ssl.VERIFY_X509_STRICT)
 * checks. Leaves are cached per name for the run, at most
 * AL_TLS_LEAF_CACHE of them (the oldest is evicted).
 *
 * Not thread-safe: one CA belongs to one thread (the gateway's loop). */
#pragma once

#include <openssl/evp.h>
#include <openssl/x509.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

/* The longest a CA lives, from when it is made: a run with a later (or no)
 * deadline gets a CA, and leaves, that expire then. */
#define AL_TLS_CA_MAX_LIFETIME (7 * 24 * 3600)

/* Leaves kept per CA. */
#define AL_TLS_LEAF_CACHE 256

/* Most names a CA's nameConstraints may list. */
#define AL_TLS_CA_PERMITTED_MAX 1024

/* Longest run id a CA names (its subject is "airlock run RUN_ID"). */
#define AL_TLS_RUN_ID_MAX 32

struct al_tls_ca;

/* A new CA for the run run_id (1 to AL_TLS_RUN_ID_MAX characters of
 * [A-Za-z0-9._-]), valid from a minute ago until not_after (seconds since
 * the epoch; at most AL_TLS_CA_MAX_LIFETIME from now, later is capped).
 *
 * permitted (n_permitted entries; NULL and 0 for none) are the hosts the CA
 * may issue for: a host name ("api.example.com": that name and the names
 * below it, as RFC 5280 has it), a wildcard ("*.example.com": only the
 * names below example.com, as the allowlist's wildcard), an IPv4 or IPv6
 * literal (that one address). When given, the CA carries a critical
 * nameConstraints extension with them as permitted subtrees, so a client
 * refuses any leaf for another name, even one made with the CA's key; when
 * none of them is an address, every address is excluded, and when none is a
 * name, every name is. Without permitted, the CA is unconstrained.
 *
 * Returns 0 and *ret (free with al_tls_ca_free()); -EINVAL for a bad run
 * id, a not_after that has passed, or a bad permitted entry (err names it);
 * -EIO when OpenSSL fails. Call al_tls_init() first. */
int al_tls_ca_new(const char *run_id, int64_t not_after, const char *const *permitted,
		  size_t n_permitted, struct al_tls_ca **ret, struct al_error *err);

/* The CA certificate, PEM, NUL-terminated. Borrowed: valid until
 * al_tls_ca_free(), also after al_tls_ca_drop_key(). */
const char *al_tls_ca_pem(const struct al_tls_ca *ca);

/* The CA certificate itself. Borrowed, as al_tls_ca_pem(). */
X509 *al_tls_ca_cert(const struct al_tls_ca *ca);

/* When the CA, and so every leaf, expires (seconds since the epoch): the
 * not_after it was made with, capped. */
int64_t al_tls_ca_not_after(const struct al_tls_ca *ca);

/* Leaves minted from now on end at leaf_not_after (seconds since the
 * epoch), capped at the CA's own end; the cached ones are dropped when it
 * changes, so each name's next leaf is minted with it. A session's run
 * keeps its CA (the sandbox trusts its certificate) and moves this with
 * its deadline. Returns the end in force. */
int64_t al_tls_ca_set_leaf_end(struct al_tls_ca *ca, int64_t leaf_not_after);
int64_t al_tls_ca_leaf_end(const struct al_tls_ca *ca);

/* Whether a leaf for name (as al_host_parse() writes it) is cached: for
 * tests of the leaves the gateway mints ahead. */
bool al_tls_ca_has_leaf(const struct al_tls_ca *ca, const char *name);

/* The leaf for name (a host name, or an IPv4 or IPv6 literal; normalised as
 * al_host_parse() does, so "API.test." is "api.test"): the cached one, or a
 * new one with its own ECDSA P-256 key, signed by the CA, a random 126-bit
 * serial, subjectAltName DNS (or IP) name, keyUsage digitalSignature,
 * extendedKeyUsage serverAuth, subject and authority key identifiers. A
 * name the CA's nameConstraints exclude is minted all the same (and no
 * client accepts it).
 *
 * Returns 0 with *ret_cert and *ret_key borrowed: valid until the next
 * al_tls_ca_leaf() (which may evict them), al_tls_ca_drop_key() or
 * al_tls_ca_free(); take a reference (X509_up_ref(), EVP_PKEY_up_ref(); an
 * SSL takes its own) to keep them longer. -EINVAL for a bad name (a
 * wildcard is one), -ENOKEY after al_tls_ca_drop_key(), -EIO when OpenSSL
 * fails; err says which. */
int al_tls_ca_leaf(struct al_tls_ca *ca, const char *name, X509 **ret_cert, EVP_PKEY **ret_key,
		   struct al_error *err);

/* Free the CA's key and every cached leaf (their keys too), keeping its
 * certificate: for the supervisor's copy once the gateway's process has
 * forked with its own. Leaves can no longer be minted. */
void al_tls_ca_drop_key(struct al_tls_ca *ca);

/* Free ca and its leaves, wiping the keys. ca may be NULL. */
void al_tls_ca_free(struct al_tls_ca *ca);
static inline void al_tls_ca_freep(struct al_tls_ca **ca)
{
	al_tls_ca_free(*ca);
}
