/* TLS interception for the egress gateway: OpenSSL set up once per process
 * (this header), the run's certificate authority and the leaves it mints
 * (tls/ca.h), and TLS endpoints that run over memory, not sockets
 * (tls/end.h).
 *
 * The gateway's process confines itself after setup: landlock leaves it no
 * file but /etc/hosts and its seccomp allowlist (gateway/seccomp.c) has no
 * file-opening syscall for anything else. So everything here that reads a
 * file (a trust store, a CA file) does so when it is created, and nothing
 * that runs later (minting a leaf, a handshake, a record) touches the
 * filesystem: OpenSSL's configuration file is never read, trust stores are
 * loaded whole, and no hashed-directory lookup is ever installed. */
#pragma once

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "core/error.h"

/* Initialise OpenSSL for this process without reading its configuration
 * file (openssl.cnf): call it before any other OpenSSL use in the process
 * (the first initialisation decides whether the file is read) and before
 * confinement. Idempotent. Returns 0, or -EIO with the reason in err. */
int al_tls_init(struct al_error *err);

/* Fill err with "what: REASON", where REASON is the earliest error in this
 * thread's OpenSSL error queue ("unknown OpenSSL error" when it is empty),
 * and clear the queue. Returns -code (code as for al_error_set()). */
int al_tls_error(struct al_error *err, int code, const char *what);

/* The earliest error in this thread's OpenSSL error queue as one line
 * ("wrong version number"), or fallback when there is none; the queue is
 * left as it is. A static string. */
const char *al_tls_reason(const char *fallback);

/* Copy len bytes of s (hostile, not NUL-terminated) into buf as one
 * printable line: bytes outside ' '..'~' become '?', and what does not fit
 * in size bytes (NUL included) is cut off and ends in "...". */
void al_tls_printable(const void *s, size_t len, char *buf, size_t size);

/* Scope-bound cleanup for the OpenSSL objects this folder and its tests
 * use (core/cleanup.h). */
static inline void al_x509_freep(X509 **p)
{
	X509_free(*p);
}

static inline void al_x509_name_freep(X509_NAME **p)
{
	X509_NAME_free(*p);
}

static inline void al_pkey_freep(EVP_PKEY **p)
{
	EVP_PKEY_free(*p);
}

static inline void al_bio_freep(BIO **p)
{
	BIO_free(*p);
}

static inline void al_ssl_freep(SSL **p)
{
	SSL_free(*p);
}

static inline void al_ssl_ctx_freep(SSL_CTX **p)
{
	SSL_CTX_free(*p);
}
