/* TLS endpoints over memory BIOs (end.h): the contexts with what each side
 * accepts and the server side's gates (SNI, ALPN) as OpenSSL callbacks,
 * then the ends and their bounded buffers. */
#include "tls/end.h"

#include <errno.h>
#include <limits.h>
#include <openssl/err.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "net/allow.h"
#include "tls/tls.h"

struct al_tls_end {
	SSL *ssl;
	BIO *in, *out; /* SSL's read and write BIOs, owned by it: ciphertext in and out */
	bool server;
	bool failed;
	char host[AL_HOST_MAX + 1]; /* server: the decided host; client: the upstream's name */
	char sni[AL_HOST_MAX + 1];  /* server: the client's, normalised; "" for none */
	char error[AL_TLS_END_ERROR_MAX];
};

/* The end has failed, for the reason fmt says; the first reason stays
 * (an OpenSSL error that follows a callback's refusal says less). */
static void fail(struct al_tls_end *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(struct al_tls_end *e, const char *fmt, ...)
{
	va_list ap;
	int n;

	e->failed = true;
	if (e->error[0])
		return;
	va_start(ap, fmt);
	n = vsnprintf(e->error, sizeof(e->error), fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n < sizeof(e->error))
		snprintf(e->error + n, sizeof(e->error) - (size_t)n, " (%s)", e->host);
}

/* TLS 1.2 suites: ECDHE with an AEAD only (TLS 1.3's are all of that kind
 * and OpenSSL's defaults stay). The server end's key is ECDSA; upstreams
 * may have RSA keys. */
static const char server_ciphers[] = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
				     "ECDHE-ECDSA-CHACHA20-POLY1305";
static const char client_ciphers[] = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
				     "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
				     "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";
static const char groups[] = "X25519:P-256:P-384";

/* ALPN as it goes on the wire: one length-prefixed protocol. */
static const unsigned char alpn_http11[] = "\x08http/1.1";

struct al_tls_server_ctx {
	SSL_CTX *ssl;
	struct al_tls_ca *ca;
};

struct al_tls_client_ctx {
	SSL_CTX *ssl;
};

/* What both sides share. Session resumption would need a ticket key or a
 * cache per run for little gain (the gateway is one hop on loopback), and
 * renegotiation is how a peer makes an endpoint redo work at will. */
static int setup(SSL_CTX *c, const char *ciphers, struct al_error *err)
{
	SSL_CTX_set_options(c, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | SSL_OP_NO_TICKET);
	SSL_CTX_set_session_cache_mode(c, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_security_level(c, 2);
	if (!SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION) ||
	    !SSL_CTX_set_cipher_list(c, ciphers) || !SSL_CTX_set1_groups_list(c, groups))
		return al_tls_error(err, EIO, "setting up a TLS context");
	return 0;
}

/* The client's SNI must be the host the gateway decided on: otherwise a
 * sandbox could ask, under an allowed connection, for another host's
 * certificate (and injection). */
static int on_servername(SSL *ssl, int *alert, void *arg)
{
	struct al_tls_end *e = SSL_get_app_data(ssl);
	const char *sni = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
	struct al_error perr = {0};
	struct al_host h;

	if (!sni)
		return SSL_TLSEXT_ERR_OK;
	if (al_host_parse(sni, strlen(sni), &h, &perr) < 0) {
		fail(e, "client sent an SNI that is no host name: %s", perr.msg);
		*alert = SSL_AD_UNRECOGNIZED_NAME;
		return SSL_TLSEXT_ERR_ALERT_FATAL;
	}
	snprintf(e->sni, sizeof(e->sni), "%s", h.text);
	if (strcmp(h.text, e->host) != 0) {
		fail(e, "client sent SNI %s, not the decided host", h.text);
		*alert = SSL_AD_UNRECOGNIZED_NAME;
		return SSL_TLSEXT_ERR_ALERT_FATAL;
	}
	return SSL_TLSEXT_ERR_OK;
}

/* The client's protocols as "h2,spdy/3.1": each length byte becomes a
 * comma (hostile bytes: printable and cut short). */
static void alpn_text(const unsigned char *in, unsigned len, char *buf, size_t size)
{
	unsigned char raw[128];
	size_t n = len < sizeof(raw) ? len : sizeof(raw);

	memcpy(raw, in, n);
	for (size_t i = 0; i < n; i += 1u + in[i])
		raw[i] = ',';
	al_tls_printable(raw + 1, n ? n - 1 : 0, buf, size);
}

static int on_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen,
		   const unsigned char *in, unsigned inlen, void *arg)
{
	struct al_tls_end *e = SSL_get_app_data(ssl);
	char offered[64];

	for (unsigned i = 0; i < inlen; i += 1u + in[i]) {
		if (in[i] == 8 && i + 9 <= inlen && memcmp(in + i + 1, "http/1.1", 8) == 0) {
			*out = in + i + 1;
			*outlen = 8;
			return SSL_TLSEXT_ERR_OK;
		}
	}
	alpn_text(in, inlen, offered, sizeof(offered));
	fail(e, "client offered ALPN %s, not http/1.1", offered);
	return SSL_TLSEXT_ERR_ALERT_FATAL;
}

int al_tls_server_ctx_new(struct al_tls_ca *ca, struct al_tls_server_ctx **ret,
			  struct al_error *err)
{
	_cleanup_(al_ssl_ctx_freep) SSL_CTX *c = SSL_CTX_new(TLS_server_method());
	struct al_tls_server_ctx *ctx;
	int r;

	if (!c)
		return al_tls_error(err, EIO, "making the server TLS context");
	if ((r = setup(c, server_ciphers, err)) < 0)
		return r;
	/* TLS 1.3 sends tickets unless told not to, even with no use for
	 * them. */
	SSL_CTX_set_num_tickets(c, 0);
	SSL_CTX_set_options(c, SSL_OP_CIPHER_SERVER_PREFERENCE);
	SSL_CTX_set_tlsext_servername_callback(c, on_servername);
	SSL_CTX_set_alpn_select_cb(c, on_alpn, NULL);
	ctx = xcalloc(1, sizeof(*ctx));
	ctx->ssl = TAKE_PTR(c);
	ctx->ca = ca;
	*ret = ctx;
	return 0;
}

void al_tls_server_ctx_free(struct al_tls_server_ctx *ctx)
{
	if (!ctx)
		return;
	SSL_CTX_free(ctx->ssl);
	free(ctx);
}

/* Every certificate of file, now: the store gets no lookup that would read
 * a file or a hashed directory during a handshake. */
static int load_store(SSL_CTX *c, const char *file, struct al_error *err)
{
	X509_STORE *st = SSL_CTX_get_cert_store(c);
	char what[300];

	snprintf(what, sizeof(what), "trust store %s", file);
	if (X509_STORE_load_file(st, file) != 1) {
		unsigned long e = ERR_peek_error();
		return al_tls_error(err, ERR_SYSTEM_ERROR(e) ? ERR_GET_REASON(e) : EINVAL, what);
	}
	if (sk_X509_OBJECT_num(X509_STORE_get0_objects(st)) == 0)
		return al_error_set(err, EINVAL, "%s: no certificate in it", what);
	return 0;
}

int al_tls_client_ctx_new(const char *ca_file, struct al_tls_client_ctx **ret, struct al_error *err)
{
	_cleanup_(al_ssl_ctx_freep) SSL_CTX *c = SSL_CTX_new(TLS_client_method());
	struct al_tls_client_ctx *ctx;
	int r;

	if (!c)
		return al_tls_error(err, EIO, "making the client TLS context");
	if ((r = setup(c, client_ciphers, err)) < 0 ||
	    (r = load_store(c, ca_file ? ca_file : X509_get_default_cert_file(), err)) < 0)
		return r;
	SSL_CTX_set_verify(c, SSL_VERIFY_PEER, NULL);
	/* Returns 0 on success, unlike its neighbours. */
	if (SSL_CTX_set_alpn_protos(c, alpn_http11, sizeof(alpn_http11) - 1) != 0)
		return al_tls_error(err, EIO, "setting ALPN");
	ctx = xcalloc(1, sizeof(*ctx));
	ctx->ssl = TAKE_PTR(c);
	*ret = ctx;
	return 0;
}

void al_tls_client_ctx_free(struct al_tls_client_ctx *ctx)
{
	if (!ctx)
		return;
	SSL_CTX_free(ctx->ssl);
	free(ctx);
}

/* An end over two memory BIOs, with what it is for. */
static int new_end(SSL_CTX *c, bool server, const char *host, struct al_tls_end **ret,
		   struct al_error *err)
{
	_cleanup_(al_tls_end_freep) struct al_tls_end *e = xcalloc(1, sizeof(*e));
	BIO *in, *out;

	e->server = server;
	snprintf(e->host, sizeof(e->host), "%s", host);
	e->ssl = SSL_new(c);
	if (!e->ssl)
		return al_tls_error(err, EIO, "making a TLS end");
	in = BIO_new(BIO_s_mem());
	out = BIO_new(BIO_s_mem());
	if (!in || !out) {
		BIO_free(in);
		BIO_free(out);
		return al_tls_error(err, EIO, "making a TLS end's buffers");
	}
	SSL_set_bio(e->ssl, in, out);
	e->in = in;
	e->out = out;
	SSL_set_app_data(e->ssl, e);
	if (server)
		SSL_set_accept_state(e->ssl);
	else
		SSL_set_connect_state(e->ssl);
	*ret = TAKE_PTR(e);
	return 0;
}

static int parse_host(const char *s, struct al_host *ret, struct al_error *err)
{
	char text[AL_HOST_MAX + 4];
	int r;

	if (!s)
		return al_error_set(err, EINVAL, "no host");
	r = al_host_parse(s, strlen(s), ret, err);
	if (r < 0) {
		al_tls_printable(s, strlen(s), text, sizeof(text));
		return al_error_wrap(err, "\"%s\"", text);
	}
	return 0;
}

int al_tls_end_server(struct al_tls_server_ctx *ctx, const char *host, struct al_tls_end **ret,
		      struct al_error *err)
{
	_cleanup_(al_tls_end_freep) struct al_tls_end *e = NULL;
	struct al_host h;
	EVP_PKEY *key;
	X509 *cert;
	int r;

	if ((r = parse_host(host, &h, err)) < 0 ||
	    (r = al_tls_ca_leaf(ctx->ca, h.text, &cert, &key, err)) < 0 ||
	    (r = new_end(ctx->ssl, true, h.text, &e, err)) < 0)
		return al_error_wrap(err, "TLS server end");
	/* The SSL takes its own references: a later leaf may evict these. */
	if (SSL_use_certificate(e->ssl, cert) != 1 || SSL_use_PrivateKey(e->ssl, key) != 1)
		return al_tls_error(err, EIO, "TLS server end: using the leaf");
	*ret = TAKE_PTR(e);
	return 0;
}

/* The upstream's certificate must name it: a host name among its DNS
 * names (a wildcard only as a whole leftmost label; never the subject's
 * CN, as browsers do), an address among its IP names. */
static int expect_name(SSL *ssl, const struct al_host *h, struct al_error *err)
{
	X509_VERIFY_PARAM *param = SSL_get0_param(ssl);

	if (h->kind != AL_HOST_NAME) {
		bool v4 = h->kind == AL_HOST_IPV4;
		if (X509_VERIFY_PARAM_set1_ip(param, h->addr.s6_addr + (v4 ? 12 : 0),
					      v4 ? 4 : 16) != 1)
			return al_tls_error(err, EIO, "TLS client end: setting the address");
		return 0;
	}
	SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS |
				   X509_CHECK_FLAG_NEVER_CHECK_SUBJECT);
	if (SSL_set_tlsext_host_name(ssl, h->text) != 1 || SSL_set1_host(ssl, h->text) != 1)
		return al_tls_error(err, EIO, "TLS client end: setting the name");
	return 0;
}

int al_tls_end_client(struct al_tls_client_ctx *ctx, const char *name, struct al_tls_end **ret,
		      struct al_error *err)
{
	_cleanup_(al_tls_end_freep) struct al_tls_end *e = NULL;
	struct al_host h;
	int r;

	if ((r = parse_host(name, &h, err)) < 0 ||
	    (r = new_end(ctx->ssl, false, h.text, &e, err)) < 0)
		return al_error_wrap(err, "TLS client end");
	if ((r = expect_name(e->ssl, &h, err)) < 0)
		return r;
	*ret = TAKE_PTR(e);
	return 0;
}

void al_tls_end_free(struct al_tls_end *e)
{
	if (!e)
		return;
	SSL_free(e->ssl);
	free(e);
}

/* Output over the bound: the end neither reads nor writes until it is
 * taken. */
static bool out_full(const struct al_tls_end *e)
{
	return BIO_ctrl_pending(e->out) >= AL_TLS_CIPHER_MAX;
}

int al_tls_end_put_cipher(struct al_tls_end *e, const void *buf, size_t len)
{
	size_t held = BIO_ctrl_pending(e->in);

	if (e->failed)
		return -EPROTO;
	if (len > AL_TLS_CIPHER_MAX - held) {
		fail(e, "over %d bytes of TLS data from the %s not yet read", AL_TLS_CIPHER_MAX,
		     e->server ? "client" : "upstream");
		return -ENOBUFS;
	}
	if (len && BIO_write(e->in, buf, (int)len) != (int)len) {
		fail(e, "buffering TLS data: %s", al_tls_reason("out of memory"));
		ERR_clear_error();
		return -EPROTO;
	}
	return 0;
}

size_t al_tls_end_cipher_room(const struct al_tls_end *e)
{
	size_t held = BIO_ctrl_pending(e->in);

	if (e->failed || out_full(e) || held >= AL_TLS_CIPHER_MAX)
		return 0;
	return AL_TLS_CIPHER_MAX - held;
}

ssize_t al_tls_end_get_cipher(struct al_tls_end *e, void *buf, size_t size)
{
	int n;

	if (size == 0 || BIO_ctrl_pending(e->out) == 0)
		return -EAGAIN;
	n = BIO_read(e->out, buf, size > INT_MAX ? INT_MAX : (int)size);
	return n > 0 ? n : -EAGAIN;
}

size_t al_tls_end_pending_cipher(const struct al_tls_end *e)
{
	return BIO_ctrl_pending(e->out);
}

/* Why OpenSSL failed, in the end's terms: the upstream's certificate, an
 * alert the peer sent, or what OpenSSL found wrong. */
static void fail_ssl(struct al_tls_end *e)
{
	unsigned long code = ERR_peek_error();
	int reason = ERR_GET_REASON(code);
	long v = SSL_get_verify_result(e->ssl);
	const char *peer = e->server ? "client" : "upstream";

	if (!e->server && v != X509_V_OK)
		fail(e, "upstream certificate verify failed: %s", X509_verify_cert_error_string(v));
	else if (code && ERR_GET_LIB(code) == ERR_LIB_SSL && reason >= SSL_AD_REASON_OFFSET &&
		 reason < SSL_AD_REASON_OFFSET + 256)
		fail(e, "%s sent alert: %s", peer,
		     SSL_alert_desc_string_long(reason - SSL_AD_REASON_OFFSET));
	else
		fail(e, "%s TLS failed: %s", peer, al_tls_reason("no reason given"));
	ERR_clear_error();
}

/* What an OpenSSL call that returned r <= 0 means for the caller. */
static int outcome(struct al_tls_end *e, int r)
{
	switch (SSL_get_error(e->ssl, r)) {
	case SSL_ERROR_WANT_READ:
	case SSL_ERROR_WANT_WRITE:
		ERR_clear_error();
		return -EAGAIN;
	case SSL_ERROR_ZERO_RETURN:
		return 0;
	default:
		fail_ssl(e);
		return -EPROTO;
	}
}

int al_tls_end_handshake(struct al_tls_end *e)
{
	int r;

	if (e->failed)
		return -EPROTO;
	if (SSL_is_init_finished(e->ssl))
		return 0;
	if (out_full(e))
		return -EAGAIN;
	ERR_clear_error();
	r = SSL_do_handshake(e->ssl);
	if (r == 1)
		return 0;
	r = outcome(e, r);
	if (r == 0) {
		fail(e, "%s closed the connection during the handshake",
		     e->server ? "client" : "upstream");
		return -EPROTO;
	}
	return r;
}

ssize_t al_tls_end_read(struct al_tls_end *e, void *buf, size_t size)
{
	int r;

	if (e->failed)
		return -EPROTO;
	if (size == 0)
		return -EINVAL;
	if (out_full(e))
		return -EAGAIN;
	ERR_clear_error();
	r = SSL_read(e->ssl, buf, size > INT_MAX ? INT_MAX : (int)size);
	return r > 0 ? r : outcome(e, r);
}

ssize_t al_tls_end_write(struct al_tls_end *e, const void *buf, size_t len)
{
	int r;

	if (e->failed)
		return -EPROTO;
	if (len == 0)
		return 0;
	if (SSL_get_shutdown(e->ssl) & SSL_SENT_SHUTDOWN)
		return -EPIPE;
	if (out_full(e))
		return -EAGAIN;
	ERR_clear_error();
	/* One record at a time: the output stays within one record of its
	 * bound, and a memory BIO takes all of it, so OpenSSL never holds a
	 * half-written record that a retry must repeat. */
	r = SSL_write(e->ssl, buf,
		      len > SSL3_RT_MAX_PLAIN_LENGTH ? SSL3_RT_MAX_PLAIN_LENGTH : (int)len);
	if (r > 0)
		return r;
	r = outcome(e, r);
	return r == 0 ? -EPIPE : r;
}

int al_tls_end_shutdown(struct al_tls_end *e)
{
	if (e->failed)
		return -EPROTO;
	if (!SSL_is_init_finished(e->ssl))
		return -ENOTCONN;
	if (SSL_get_shutdown(e->ssl) & SSL_SENT_SHUTDOWN)
		return 0;
	ERR_clear_error();
	if (SSL_shutdown(e->ssl) < 0) {
		fail_ssl(e);
		return -EPROTO;
	}
	return 0;
}

bool al_tls_end_handshake_done(const struct al_tls_end *e)
{
	return SSL_is_init_finished(e->ssl);
}

const char *al_tls_end_sni(const struct al_tls_end *e)
{
	return e->server && e->sni[0] ? e->sni : NULL;
}

const char *al_tls_end_alpn(const struct al_tls_end *e)
{
	const unsigned char *p = NULL;
	unsigned n = 0;

	SSL_get0_alpn_selected(e->ssl, &p, &n);
	return n == 8 && memcmp(p, "http/1.1", 8) == 0 ? "http/1.1" : NULL;
}

const char *al_tls_end_error(const struct al_tls_end *e)
{
	return e->failed ? e->error : NULL;
}

/* Move the ciphertext a has to send into b. */
static int pass_cipher(struct al_tls_end *a, struct al_tls_end *b)
{
	char buf[4096];
	ssize_t n;
	int r;

	while ((n = al_tls_end_get_cipher(a, buf, sizeof(buf))) > 0)
		if ((r = al_tls_end_put_cipher(b, buf, (size_t)n)) < 0)
			return r;
	return 0;
}

/* A handshake between a server end of srv for host and a client end that
 * trusts srv's CA, both in memory, then one record each way. */
static int warm_handshake(struct al_tls_server_ctx *srv, const char *host, struct al_error *err)
{
	_cleanup_(al_ssl_ctx_freep) SSL_CTX *c = SSL_CTX_new(TLS_client_method());
	_cleanup_(al_tls_end_freep) struct al_tls_end *s = NULL;
	_cleanup_(al_tls_end_freep) struct al_tls_end *cl = NULL;
	struct al_tls_client_ctx cctx;
	char byte = 'w';
	int r;

	if (!c)
		return al_tls_error(err, EIO, "making the warm-up's TLS context");
	/* Set up as every client end's context is, so that the same
	 * algorithms are fetched, with the run's CA as its only trust. */
	if ((r = setup(c, client_ciphers, err)) < 0)
		return r;
	if (X509_STORE_add_cert(SSL_CTX_get_cert_store(c), al_tls_ca_cert(srv->ca)) != 1)
		return al_tls_error(err, EIO, "trusting the run's CA for the warm-up");
	SSL_CTX_set_verify(c, SSL_VERIFY_PEER, NULL);
	if (SSL_CTX_set_alpn_protos(c, alpn_http11, sizeof(alpn_http11) - 1) != 0)
		return al_tls_error(err, EIO, "setting ALPN");
	cctx.ssl = c;
	if ((r = al_tls_end_server(srv, host, &s, err)) < 0 ||
	    (r = al_tls_end_client(&cctx, host, &cl, err)) < 0)
		return r;
	/* A TLS 1.3 handshake takes two flights from the client and one from
	 * the server; a few more turns are allowed for TLS 1.2. */
	for (int turn = 0; turn < 8; turn++) {
		int rc = al_tls_end_handshake(cl);
		if (rc == -EPROTO || pass_cipher(cl, s) < 0)
			break;
		int rs = al_tls_end_handshake(s);
		if (rs == -EPROTO || pass_cipher(s, cl) < 0)
			break;
		if (rc == 0 && rs == 0)
			break;
	}
	if (!al_tls_end_handshake_done(s) || !al_tls_end_handshake_done(cl) ||
	    al_tls_end_write(cl, &byte, 1) != 1 || pass_cipher(cl, s) < 0 ||
	    al_tls_end_read(s, &byte, 1) != 1)
		return al_error_set(err, EPROTO, "the warm-up handshake failed: %s",
				    al_tls_end_error(cl)  ? al_tls_end_error(cl)
				    : al_tls_end_error(s) ? al_tls_end_error(s)
							  : "it did not finish");
	return 0;
}

int al_tls_warm(struct al_tls_server_ctx *srv, const char *host,
		struct al_tls_client_ctx *const *clients, size_t n_clients, struct al_error *err)
{
	X509 *leaf;
	EVP_PKEY *key;
	int r;

	if ((r = warm_handshake(srv, host, err)) < 0)
		return r;
	/* Each trust store's first look-up sorts its certificates: a verify
	 * of the leaf against it (which fails: the run's CA is in none of
	 * them) does that now. */
	if ((r = al_tls_ca_leaf(srv->ca, host, &leaf, &key, err)) < 0)
		return r;
	for (size_t i = 0; i < n_clients; i++) {
		X509_STORE_CTX *v = X509_STORE_CTX_new();
		if (!v || X509_STORE_CTX_init(v, SSL_CTX_get_cert_store(clients[i]->ssl), leaf,
					      NULL) != 1) {
			X509_STORE_CTX_free(v);
			return al_tls_error(err, EIO, "warming a trust store");
		}
		(void)X509_verify_cert(v);
		X509_STORE_CTX_free(v);
	}
	ERR_clear_error();
	return 0;
}
