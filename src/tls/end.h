/* TLS endpoints over memory: the gateway's event loop moves ciphertext
 * between an end and its socket, and plaintext between the two ends of an
 * intercepted connection; an end never touches a socket or a file.
 *
 * A server end faces the sandbox. It presents the leaf the run's CA mints
 * for the host the gateway decided on, and it is one of the injection
 * gates: a ClientHello whose SNI names another host is refused with a
 * fatal unrecognized_name alert before any certificate is sent (a client
 * that sends no SNI, as for an address, gets the decided host's leaf).
 * ALPN: http/1.1 is selected when offered, and a client that offers ALPN
 * without http/1.1 (h2 only, say) is refused with no_application_protocol,
 * as RFC 7301 has it, rather than left to speak a protocol the gateway
 * cannot read; a client that offers no ALPN speaks HTTP/1.1.
 *
 * A client end faces the real upstream: it verifies the upstream's chain
 * against a trust store loaded whole when its context is made, and its
 * name (host name or address) against the leaf; it sends SNI for a host
 * name and offers ALPN http/1.1.
 *
 * Both speak TLS 1.2 and 1.3 only, with forward-secret AEAD suites, no
 * renegotiation, no compression, no session tickets or resumption.
 *
 * Bounds: an end holds at most AL_TLS_CIPHER_MAX bytes of ciphertext that
 * came in and has not been read; while AL_TLS_CIPHER_MAX bytes it has to
 * send are waiting (al_tls_end_get_cipher() takes them), it neither reads
 * nor writes, so a peer that sends without reading cannot make it grow.
 *
 * The loop, for each end: put what arrives (at most al_tls_end_cipher_room()
 * bytes), read plaintext until -EAGAIN, write what the other end gave, and
 * send what al_tls_end_get_cipher() returns. After a fatal error (-EPROTO),
 * what is still pending (an alert for the peer) may be sent, then the end
 * is freed.
 *
 * Not thread-safe; an end uses its context and (server) its CA, which must
 * outlive it. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "core/error.h"
#include "tls/ca.h"

/* Ciphertext an end holds each way, at most (beyond it: one record). */
#define AL_TLS_CIPHER_MAX (64 * 1024)

/* Longest text al_tls_end_error() gives, NUL included. */
#define AL_TLS_END_ERROR_MAX 256

struct al_tls_server_ctx;
struct al_tls_client_ctx;
struct al_tls_end;

/* The context for server ends, presenting leaves from ca (borrowed: it
 * must outlive the context and its ends). Returns 0 and *ret (free with
 * al_tls_server_ctx_free()), or -EIO when OpenSSL fails. */
int al_tls_server_ctx_new(struct al_tls_ca *ca, struct al_tls_server_ctx **ret,
			  struct al_error *err);
void al_tls_server_ctx_free(struct al_tls_server_ctx *ctx);
static inline void al_tls_server_ctx_freep(struct al_tls_server_ctx **ctx)
{
	al_tls_server_ctx_free(*ctx);
}

/* The context for client ends, trusting the certificates in the PEM file
 * ca_file (a rule's own CA, or a bundle), or in the host's trust store
 * (OpenSSL's default file, on Debian /etc/ssl/certs/ca-certificates.crt)
 * when ca_file is NULL. The file is read whole here and never again.
 * Returns 0 and *ret (free with al_tls_client_ctx_free()); -ENOENT (or the
 * error opening it) and -EINVAL for a file with no certificate, err naming
 * the file; -EIO when OpenSSL fails otherwise. */
int al_tls_client_ctx_new(const char *ca_file, struct al_tls_client_ctx **ret,
			  struct al_error *err);
void al_tls_client_ctx_free(struct al_tls_client_ctx *ctx);
static inline void al_tls_client_ctx_freep(struct al_tls_client_ctx **ctx)
{
	al_tls_client_ctx_free(*ctx);
}

/* A server end for a connection the gateway decided is for host (a host
 * name or an address, normalised as al_host_parse() does): the leaf for
 * host is minted now (or taken from the cache), and the client's SNI, when
 * it sends one, must be host. Returns 0 and *ret (free with
 * al_tls_end_free()), or an error of al_tls_ca_leaf(). */
int al_tls_end_server(struct al_tls_server_ctx *ctx, const char *host, struct al_tls_end **ret,
		      struct al_error *err);

/* A client end to the upstream name (a host name, sent as SNI and checked
 * against the certificate's names, without partial wildcards; or an
 * address, checked against its IP names). Returns 0 and *ret (free with
 * al_tls_end_free()), -EINVAL for a bad name, -EIO when OpenSSL fails. */
int al_tls_end_client(struct al_tls_client_ctx *ctx, const char *name, struct al_tls_end **ret,
		      struct al_error *err);

void al_tls_end_free(struct al_tls_end *e);
static inline void al_tls_end_freep(struct al_tls_end **e)
{
	al_tls_end_free(*e);
}

/* Ciphertext from the network: all len bytes are taken (0), or none when
 * that would hold more than AL_TLS_CIPHER_MAX unread bytes (-ENOBUFS: the
 * caller read more than al_tls_end_cipher_room(); the end fails, see
 * al_tls_end_error()). -EPROTO after a fatal error. */
int al_tls_end_put_cipher(struct al_tls_end *e, const void *buf, size_t len);

/* How many bytes al_tls_end_put_cipher() takes now: 0 after a fatal error
 * and while AL_TLS_CIPHER_MAX bytes wait to be sent. */
size_t al_tls_end_cipher_room(const struct al_tls_end *e);

/* Up to size bytes of ciphertext to send: their count, or -EAGAIN when
 * there is none. Also after a fatal error (the alert that says so). */
ssize_t al_tls_end_get_cipher(struct al_tls_end *e, void *buf, size_t size);

/* Bytes of ciphertext waiting to be sent. */
size_t al_tls_end_pending_cipher(const struct al_tls_end *e);

/* Drive the handshake: 0 once it is done, -EAGAIN while it needs
 * ciphertext from the peer (or its output taken), -EPROTO when it failed
 * (al_tls_end_error() says why). al_tls_end_read() and al_tls_end_write()
 * drive it too; a client end starts it with either. */
int al_tls_end_handshake(struct al_tls_end *e);

/* Read up to size (> 0) bytes of plaintext: their count; 0 when the peer
 * closed cleanly (close_notify; again on every later call); -EAGAIN when
 * more ciphertext is needed or output must be taken first; -EPROTO on a
 * fatal TLS error, -EINVAL for size 0. */
ssize_t al_tls_end_read(struct al_tls_end *e, void *buf, size_t size);

/* Write plaintext: the count taken (at most one record, 16 KiB; 0 for len
 * 0), -EAGAIN during the handshake (which it drives) or while output
 * waits, -EPROTO on a fatal error. */
ssize_t al_tls_end_write(struct al_tls_end *e, const void *buf, size_t len);

/* Queue close_notify (the end can still read): 0, -ENOTCONN before the
 * handshake is done (there is nothing to close: drop the connection),
 * -EPROTO after a fatal error. */
int al_tls_end_shutdown(struct al_tls_end *e);

bool al_tls_end_handshake_done(const struct al_tls_end *e);

/* Server end: the SNI the client sent, normalised, or NULL when it sent
 * none (or none yet). NULL for a client end. */
const char *al_tls_end_sni(const struct al_tls_end *e);

/* The protocol ALPN agreed on: "http/1.1", or NULL when none was. */
const char *al_tls_end_alpn(const struct al_tls_end *e);

/* Why the end failed, one line naming the host at the end: "upstream
 * certificate verify failed: hostname mismatch (api.example.com)", "client
 * sent alert: unknown CA (api.example.com)"; NULL while it has not. */
const char *al_tls_end_error(const struct al_tls_end *e);

/* Pay OpenSSL's first-use costs now rather than on a connection: a
 * handshake in memory between a server end of srv for host (its leaf, the
 * run's own, minted or taken from the cache) and a client end set up as
 * every client context is but trusting only srv's CA (an ECDSA sign and
 * verify, a key exchange, the record layer's ciphers), then a verify
 * against each of the n_clients contexts' trust stores, whose first
 * look-up sorts them. Nothing it makes outlives the call but the leaf in
 * the CA's cache and the stores' order; no check of a real connection is
 * changed. Returns 0, an error of al_tls_end_server(), or -EPROTO when the
 * handshake failed (err says why). */
int al_tls_warm(struct al_tls_server_ctx *srv, const char *host,
		struct al_tls_client_ctx *const *clients, size_t n_clients, struct al_error *err);
