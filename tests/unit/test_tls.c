/* tls/: the run's CA and its leaves, and TLS ends over memory, in process.
 * The peers are plain OpenSSL: a client in the sandbox's place that trusts
 * only the run's CA (X509_V_FLAG_X509_STRICT, a name check), and upstream
 * servers with a test PKI made here with OpenSSL directly (not with
 * tls/ca.c, so that one mistake cannot hide on both sides). The gateway's
 * part is played by relay(): plaintext from one end into the other. */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/filter.h>
#include <linux/seccomp.h>

#include "core/cleanup.h"
#include "core/sys.h"
#include "core/util.h"
#include "policy/seccomp.h"
#include "tls/ca.h"
#include "tls/end.h"
#include "tls/tls.h"

/* The test PKI: a CA the client ends trust (its PEM in ca_file), another
 * that nothing trusts, and the upstreams' leaves. */
struct pki {
	EVP_PKEY *ca_key, *other_key, *leaf_key;
	X509 *ca, *other;
	X509 *api, *ip, *wrong_name, *expired, *untrusted, *cn_only, *wildcard, *partial;
	char ca_file[64];
};

static struct pki pki;

static void add_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX v3;
	X509_EXTENSION *ext;

	X509V3_set_ctx(&v3, issuer, x, NULL, NULL, 0);
	ext = X509V3_EXT_nconf_nid(NULL, &v3, nid, value);
	assert_non_null(ext);
	assert_int_equal(X509_add_ext(x, ext, -1), 1);
	X509_EXTENSION_free(ext);
}

/* A certificate for key: a CA (self-signed) when issuer is NULL, else a
 * server leaf with subjectAltName san (NULL: none, only the CN); valid
 * from `from` to `to` seconds from now. */
static X509 *make_cert(EVP_PKEY *key, const char *cn, X509 *issuer, EVP_PKEY *issuer_key,
		       const char *san, long from, long to)
{
	static long serial = 1000;
	X509 *x = X509_new();
	X509_NAME *name = X509_get_subject_name(x);
	bool ca = !issuer;

	assert_int_equal(X509_set_version(x, X509_VERSION_3), 1);
	assert_int_equal(ASN1_INTEGER_set(X509_get_serialNumber(x), serial++), 1);
	assert_int_equal(X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
						    (const unsigned char *)cn, -1, -1, 0),
			 1);
	assert_int_equal(X509_set_issuer_name(x, ca ? name : X509_get_subject_name(issuer)), 1);
	assert_non_null(X509_time_adj_ex(X509_getm_notBefore(x), 0, from, NULL));
	assert_non_null(X509_time_adj_ex(X509_getm_notAfter(x), 0, to, NULL));
	assert_int_equal(X509_set_pubkey(x, key), 1);
	add_ext(x, ca ? x : issuer, NID_basic_constraints, ca ? "critical,CA:TRUE" : "CA:FALSE");
	add_ext(x, ca ? x : issuer, NID_key_usage,
		ca ? "critical,keyCertSign,cRLSign" : "critical,digitalSignature");
	add_ext(x, ca ? x : issuer, NID_subject_key_identifier, "hash");
	add_ext(x, ca ? x : issuer, NID_authority_key_identifier, "keyid:always");
	if (!ca) {
		add_ext(x, issuer, NID_ext_key_usage, "serverAuth");
		if (san)
			add_ext(x, issuer, NID_subject_alt_name, san);
	}
	assert_true(X509_sign(x, ca ? key : issuer_key, EVP_sha256()) > 0);
	return x;
}

static EVP_PKEY *make_key(void)
{
	EVP_PKEY *k = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	assert_non_null(k);
	return k;
}

static int setup_pki(void **state)
{
	struct al_error err = {0};
	FILE *f;
	int fd;

	assert_int_equal(al_tls_init(&err), 0);
	pki.ca_key = make_key();
	pki.other_key = make_key();
	pki.leaf_key = make_key();
	pki.ca = make_cert(pki.ca_key, "test CA", NULL, NULL, NULL, -60, 3600);
	pki.other = make_cert(pki.other_key, "untrusted CA", NULL, NULL, NULL, -60, 3600);
	pki.api =
	    make_cert(pki.leaf_key, "api.test", pki.ca, pki.ca_key, "DNS:api.test", -60, 3600);
	pki.ip = make_cert(pki.leaf_key, "ip", pki.ca, pki.ca_key, "IP:127.0.0.1", -60, 3600);
	pki.wrong_name =
	    make_cert(pki.leaf_key, "other.test", pki.ca, pki.ca_key, "DNS:other.test", -60, 3600);
	pki.expired =
	    make_cert(pki.leaf_key, "api.test", pki.ca, pki.ca_key, "DNS:api.test", -7200, -3600);
	pki.untrusted = make_cert(pki.leaf_key, "api.test", pki.other, pki.other_key,
				  "DNS:api.test", -60, 3600);
	pki.cn_only = make_cert(pki.leaf_key, "api.test", pki.ca, pki.ca_key, NULL, -60, 3600);
	pki.wildcard =
	    make_cert(pki.leaf_key, "wild", pki.ca, pki.ca_key, "DNS:*.example.test", -60, 3600);
	pki.partial = make_cert(pki.leaf_key, "partial", pki.ca, pki.ca_key, "DNS:a*.example.test",
				-60, 3600);
	snprintf(pki.ca_file, sizeof(pki.ca_file), "/tmp/airlock-test-tls-XXXXXX");
	fd = mkstemp(pki.ca_file);
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	assert_non_null(f);
	assert_int_equal(PEM_write_X509(f, pki.ca), 1);
	assert_int_equal(fclose(f), 0);
	return 0;
}

static int teardown_pki(void **state)
{
	X509 *certs[] = {pki.ca,	 pki.other,   pki.api,	    pki.ip,
			 pki.wrong_name, pki.expired, pki.untrusted};

	if (pki.ca_file[0])
		unlink(pki.ca_file);
	for (size_t i = 0; i < AL_ARRAY_SIZE(certs); i++)
		X509_free(certs[i]);
	EVP_PKEY_free(pki.ca_key);
	EVP_PKEY_free(pki.other_key);
	EVP_PKEY_free(pki.leaf_key);
	return 0;
}

/* Plain OpenSSL peers over memory BIOs. */

struct peer {
	SSL *ssl;
	BIO *in, *out; /* its read and write BIOs (owned by ssl) */
	/* what it sends (then close_notify when close is set), and got */
	const unsigned char *send;
	size_t send_len, sent;
	bool close, closed, got_close;
	unsigned char *recv;
	size_t recv_len, recv_cap;
	bool failed;
	char error[160]; /* its OpenSSL reason when failed */
};

static void peer_init(struct peer *p, SSL_CTX *c, bool server)
{
	memset(p, 0, sizeof(*p));
	p->ssl = SSL_new(c);
	assert_non_null(p->ssl);
	p->in = BIO_new(BIO_s_mem());
	p->out = BIO_new(BIO_s_mem());
	SSL_set_bio(p->ssl, p->in, p->out);
	if (server)
		SSL_set_accept_state(p->ssl);
	else
		SSL_set_connect_state(p->ssl);
}

static void peer_free(struct peer *p)
{
	SSL_free(p->ssl);
	free(p->recv);
	p->ssl = NULL;
	p->recv = NULL;
}

static void peer_fail(struct peer *p)
{
	p->failed = true;
	snprintf(p->error, sizeof(p->error), "%s", al_tls_reason("no reason"));
	ERR_clear_error();
}

/* The sandbox's client: trusts only trust, strictly, checks name (a host
 * name or an address), sends sni (NULL: none) and offers alpn (wire form,
 * NULL: no ALPN). */
static SSL_CTX *client_ctx(X509 *trust, const char *alpn)
{
	SSL_CTX *c = SSL_CTX_new(TLS_client_method());

	assert_non_null(c);
	assert_int_equal(X509_STORE_add_cert(SSL_CTX_get_cert_store(c), trust), 1);
	assert_int_equal(
	    X509_VERIFY_PARAM_set_flags(SSL_CTX_get0_param(c), X509_V_FLAG_X509_STRICT), 1);
	SSL_CTX_set_verify(c, SSL_VERIFY_PEER, NULL);
	if (alpn)
		assert_int_equal(
		    SSL_CTX_set_alpn_protos(c, (const unsigned char *)alpn, strlen(alpn)), 0);
	return c;
}

static void client_init(struct peer *p, SSL_CTX *c, const char *name, const char *sni)
{
	peer_init(p, c, false);
	if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(p->ssl), name) != 1)
		assert_int_equal(SSL_set1_host(p->ssl, name), 1);
	ERR_clear_error();
	if (sni)
		assert_int_equal(SSL_set_tlsext_host_name(p->ssl, sni), 1);
}

/* The run CA's certificate, as the sandbox reads it from its bundle. */
static X509 *ca_x509(const struct al_tls_ca *ca)
{
	_cleanup_(al_bio_freep) BIO *b = BIO_new_mem_buf(al_tls_ca_pem(ca), -1);
	X509 *x = PEM_read_bio_X509(b, NULL, NULL, NULL);

	assert_non_null(x);
	return x;
}

static int upstream_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen,
			 const unsigned char *in, unsigned inlen, void *arg)
{
	static const unsigned char ours[] = "\x08http/1.1";

	if (SSL_select_next_proto((unsigned char **)out, outlen, ours, sizeof(ours) - 1, in,
				  inlen) == OPENSSL_NPN_NEGOTIATED)
		return SSL_TLSEXT_ERR_OK;
	return SSL_TLSEXT_ERR_NOACK;
}

/* An upstream server presenting cert (with the test leaf key). */
static SSL_CTX *upstream_ctx(X509 *cert)
{
	SSL_CTX *c = SSL_CTX_new(TLS_server_method());

	assert_non_null(c);
	assert_int_equal(SSL_CTX_use_certificate(c, cert), 1);
	assert_int_equal(SSL_CTX_use_PrivateKey(c, pki.leaf_key), 1);
	SSL_CTX_set_alpn_select_cb(c, upstream_alpn, NULL);
	return c;
}

/* One round for a plain peer: its handshake, what it still has to send,
 * what has arrived. True when anything happened. */
static bool peer_step(struct peer *p)
{
	unsigned char buf[16384];
	bool moved = false;
	int r;

	if (p->failed)
		return false;
	if (!SSL_is_init_finished(p->ssl)) {
		r = SSL_do_handshake(p->ssl);
		if (r != 1) {
			int e = SSL_get_error(p->ssl, r);
			if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
				peer_fail(p);
			return false;
		}
		moved = true;
	}
	while (p->sent < p->send_len) {
		size_t n = p->send_len - p->sent;
		r = SSL_write(p->ssl, p->send + p->sent, (int)(n > sizeof(buf) ? sizeof(buf) : n));
		if (r <= 0)
			break;
		p->sent += (size_t)r;
		moved = true;
	}
	if (p->close && !p->closed && p->sent == p->send_len) {
		assert_true(SSL_shutdown(p->ssl) >= 0);
		p->closed = moved = true;
	}
	while (!p->got_close) {
		r = SSL_read(p->ssl, buf, sizeof(buf));
		if (r <= 0) {
			int e = SSL_get_error(p->ssl, r);
			if (e == SSL_ERROR_ZERO_RETURN)
				p->got_close = moved = true;
			else if (e != SSL_ERROR_WANT_READ)
				peer_fail(p);
			break;
		}
		if (p->recv_len + (size_t)r > p->recv_cap) {
			p->recv_cap = 2 * (p->recv_len + (size_t)r);
			p->recv = xrealloc(p->recv, p->recv_cap);
		}
		memcpy(p->recv + p->recv_len, buf, (size_t)r);
		p->recv_len += (size_t)r;
		moved = true;
	}
	return moved;
}

/* Ciphertext both ways between a plain peer and an end, as the gateway's
 * loop would move it between the end and a socket: never more than the
 * end has room for. */
static bool wire(struct peer *p, struct al_tls_end *e)
{
	unsigned char buf[16384];
	bool moved = false;
	size_t room;
	ssize_t n;

	while (BIO_ctrl_pending(p->out) > 0 && (room = al_tls_end_cipher_room(e)) > 0) {
		int got = BIO_read(p->out, buf, (int)(room < sizeof(buf) ? room : sizeof(buf)));
		assert_true(got > 0);
		assert_int_equal(al_tls_end_put_cipher(e, buf, (size_t)got), 0);
		moved = true;
	}
	while ((n = al_tls_end_get_cipher(e, buf, sizeof(buf))) > 0) {
		assert_int_equal(BIO_write(p->in, buf, (int)n), (int)n);
		moved = true;
	}
	return moved;
}

/* The gateway's part for one direction: plaintext read from src is written
 * to dst; src's close_notify becomes dst's. */
struct relay {
	unsigned char buf[16384];
	size_t len, off;
	bool eof, closed;
};

static bool relay(struct al_tls_end *src, struct al_tls_end *dst, struct relay *r)
{
	bool moved = false;
	ssize_t n;

	for (;;) {
		if (r->off < r->len) {
			n = al_tls_end_write(dst, r->buf + r->off, r->len - r->off);
			if (n < 0) {
				assert_true(n == -EAGAIN || n == -EPROTO);
				break;
			}
			r->off += (size_t)n;
			moved = true;
			continue;
		}
		if (r->eof) {
			if (!r->closed && al_tls_end_handshake_done(dst)) {
				assert_int_equal(al_tls_end_shutdown(dst), 0);
				r->closed = moved = true;
			}
			break;
		}
		n = al_tls_end_read(src, r->buf, sizeof(r->buf));
		if (n < 0) {
			assert_true(n == -EAGAIN || n == -EPROTO);
			break;
		}
		if (n == 0)
			r->eof = true;
		r->len = (size_t)n;
		r->off = 0;
		moved = true;
	}
	return moved;
}

/* An intercepted connection: client -> server end -> client end ->
 * upstream and back. Either half may be absent (NULL ends). */
struct mitm {
	struct peer client, upstream;
	struct al_tls_end *server_end, *client_end;
	struct relay up, down;
};

static void mitm_run(struct mitm *m)
{
	for (int i = 0; i < 100000; i++) {
		bool moved = false;
		if (m->server_end) {
			moved |= peer_step(&m->client);
			moved |= wire(&m->client, m->server_end);
		}
		if (m->server_end && m->client_end) {
			moved |= relay(m->server_end, m->client_end, &m->up);
			moved |= relay(m->client_end, m->server_end, &m->down);
		} else if (m->server_end) {
			al_tls_end_handshake(m->server_end);
		} else if (m->client_end) {
			al_tls_end_handshake(m->client_end);
		}
		if (m->client_end) {
			moved |= wire(&m->upstream, m->client_end);
			moved |= peer_step(&m->upstream);
		}
		if (!moved)
			return;
	}
	fail_msg("the connection never settled");
}

static void mitm_free(struct mitm *m)
{
	peer_free(&m->client);
	peer_free(&m->upstream);
	al_tls_end_free(m->server_end);
	al_tls_end_free(m->client_end);
}

static unsigned char *pattern(size_t len, unsigned seed)
{
	unsigned char *b = xmalloc(len);
	uint32_t x = seed * 2654435761u + 1;

	for (size_t i = 0; i < len; i++) {
		x = x * 1103515245u + 12345u;
		b[i] = (unsigned char)(x >> 16);
	}
	return b;
}

/* The run's side, made per test: its CA, the gateway's two contexts, the
 * sandbox client's context trusting the run's CA. */
struct run {
	struct al_tls_ca *ca;
	struct al_tls_server_ctx *sctx;
	struct al_tls_client_ctx *cctx;
	X509 *ca_cert;
	SSL_CTX *client, *client_h2, *client_other;
	SSL_CTX *up_api, *up_ip, *up_wrong, *up_expired, *up_untrusted;
	SSL_CTX *up_cn_only, *up_wildcard, *up_partial;
};

static struct run run;

static int setup_run(void **state)
{
	struct al_error err = {0};

	assert_int_equal(al_tls_ca_new("r1", time(NULL) + 3600, NULL, 0, &run.ca, &err), 0);
	assert_int_equal(al_tls_server_ctx_new(run.ca, &run.sctx, &err), 0);
	if (al_tls_client_ctx_new(pki.ca_file, &run.cctx, &err) < 0)
		fail_msg("%s", err.msg);
	run.ca_cert = ca_x509(run.ca);
	run.client = client_ctx(run.ca_cert, "\x08http/1.1");
	run.client_h2 = client_ctx(run.ca_cert, "\x02h2");
	run.client_other = client_ctx(pki.other, "\x08http/1.1");
	run.up_api = upstream_ctx(pki.api);
	run.up_ip = upstream_ctx(pki.ip);
	run.up_wrong = upstream_ctx(pki.wrong_name);
	run.up_expired = upstream_ctx(pki.expired);
	run.up_untrusted = upstream_ctx(pki.untrusted);
	run.up_cn_only = upstream_ctx(pki.cn_only);
	run.up_wildcard = upstream_ctx(pki.wildcard);
	run.up_partial = upstream_ctx(pki.partial);
	return 0;
}

static int teardown_run(void **state)
{
	SSL_CTX *ctxs[] = {run.client, run.client_h2, run.client_other, run.up_api,
			   run.up_ip,  run.up_wrong,  run.up_expired,	run.up_untrusted};

	for (size_t i = 0; i < AL_ARRAY_SIZE(ctxs); i++)
		SSL_CTX_free(ctxs[i]);
	SSL_CTX_free(run.up_cn_only);
	SSL_CTX_free(run.up_wildcard);
	SSL_CTX_free(run.up_partial);
	X509_free(run.ca_cert);
	al_tls_client_ctx_free(run.cctx);
	al_tls_server_ctx_free(run.sctx);
	al_tls_ca_free(run.ca);
	memset(&run, 0, sizeof(run));
	return 0;
}

/* Both halves for host, the client sending sni, the upstream with up. */
static void mitm_open(struct mitm *m, const char *host, const char *sni, SSL_CTX *client,
		      SSL_CTX *up)
{
	struct al_error err = {0};

	memset(m, 0, sizeof(*m));
	client_init(&m->client, client, host, sni);
	peer_init(&m->upstream, up, true);
	if (al_tls_end_server(run.sctx, host, &m->server_end, &err) < 0 ||
	    al_tls_end_client(run.cctx, host, &m->client_end, &err) < 0)
		fail_msg("%s", err.msg);
}

/* 1 MiB each way through the loop, then close_notify each way. */
static void test_mitm_transfer(void **state)
{
	const size_t len = 1 << 20;
	_cleanup_free_ unsigned char *up = pattern(len, 1), *down = pattern(len, 2);
	struct mitm m;

	mitm_open(&m, "api.test", "api.test", run.client, run.up_api);
	m.client.send = up;
	m.client.send_len = len;
	m.client.close = true;
	m.upstream.send = down;
	m.upstream.send_len = len;
	m.upstream.close = true;
	mitm_run(&m);
	assert_false(m.client.failed);
	assert_false(m.upstream.failed);
	assert_null(al_tls_end_error(m.server_end));
	assert_null(al_tls_end_error(m.client_end));
	assert_int_equal(m.upstream.recv_len, len);
	assert_memory_equal(m.upstream.recv, up, len);
	assert_int_equal(m.client.recv_len, len);
	assert_memory_equal(m.client.recv, down, len);
	assert_true(m.upstream.got_close);
	assert_true(m.client.got_close);
	assert_string_equal(al_tls_end_sni(m.server_end), "api.test");
	assert_null(al_tls_end_sni(m.client_end));
	assert_string_equal(al_tls_end_alpn(m.server_end), "http/1.1");
	assert_string_equal(al_tls_end_alpn(m.client_end), "http/1.1");
	/* The client verified the run's leaf (strict, by name) and was given
	 * only the leaf, whose issuer is the run's CA. */
	assert_int_equal(SSL_get_verify_result(m.client.ssl), X509_V_OK);
	assert_int_equal(
	    X509_NAME_cmp(X509_get_issuer_name(SSL_get0_peer_certificate(m.client.ssl)),
			  X509_get_subject_name(run.ca_cert)),
	    0);
	assert_int_equal(sk_X509_num(SSL_get_peer_cert_chain(m.client.ssl)), 1);
	assert_true(SSL_version(m.client.ssl) == TLS1_3_VERSION);
	mitm_free(&m);
}

/* An address: no SNI from the client (none is sent for one), the leaf's IP
 * name, the upstream checked by its IP name; a DNS-only cert would fail. */
static void test_mitm_address(void **state)
{
	_cleanup_free_ unsigned char *data = pattern(5000, 3);
	struct mitm m;

	mitm_open(&m, "127.0.0.1", NULL, run.client, run.up_ip);
	m.client.send = data;
	m.client.send_len = 5000;
	m.client.close = true;
	mitm_run(&m);
	assert_null(al_tls_end_error(m.server_end));
	assert_null(al_tls_end_error(m.client_end));
	assert_null(al_tls_end_sni(m.server_end));
	assert_int_equal(m.upstream.recv_len, 5000);
	assert_memory_equal(m.upstream.recv, data, 5000);
	assert_true(m.upstream.got_close);
	mitm_free(&m);

	mitm_open(&m, "127.0.0.1", NULL, run.client, run.up_api);
	mitm_run(&m);
	assert_string_equal(al_tls_end_error(m.client_end),
			    "upstream certificate verify failed: IP address mismatch (127.0.0.1)");
	mitm_free(&m);
}

/* Only the upstream half, for host, against up; the client end's error. */
static void expect_upstream_error(const char *host, SSL_CTX *up, const char *want)
{
	struct al_error err = {0};
	struct mitm m = {0};
	char buf[16];

	peer_init(&m.upstream, up, true);
	assert_int_equal(al_tls_end_client(run.cctx, host, &m.client_end, &err), 0);
	mitm_run(&m);
	assert_false(al_tls_end_handshake_done(m.client_end));
	assert_int_equal(al_tls_end_read(m.client_end, buf, sizeof(buf)), -EPROTO);
	assert_int_equal(al_tls_end_write(m.client_end, "x", 1), -EPROTO);
	assert_int_equal(al_tls_end_put_cipher(m.client_end, "x", 1), -EPROTO);
	assert_string_equal(al_tls_end_error(m.client_end), want);
	/* The upstream was told, by an alert. */
	assert_true(m.upstream.failed);
	mitm_free(&m);
}

static void test_upstream_failures(void **state)
{
	expect_upstream_error("api.test", run.up_wrong,
			      "upstream certificate verify failed: hostname mismatch (api.test)");
	expect_upstream_error("api.test", run.up_untrusted,
			      "upstream certificate verify failed: unable to get local issuer "
			      "certificate (api.test)");
	expect_upstream_error(
	    "api.test", run.up_expired,
	    "upstream certificate verify failed: certificate has expired (api.test)");
	/* The name only in the subject's CN is not enough (as in browsers), nor
	 * a partial wildcard. */
	expect_upstream_error("api.test", run.up_cn_only,
			      "upstream certificate verify failed: hostname mismatch (api.test)");
	expect_upstream_error(
	    "api.example.test", run.up_partial,
	    "upstream certificate verify failed: hostname mismatch (api.example.test)");
	/* A wildcard in the name asked for is no name at all. */
	struct al_error err = {0};
	struct al_tls_end *e = NULL;
	assert_int_equal(al_tls_end_client(run.cctx, "*.test", &e, &err), -EINVAL);
	assert_contains(err.msg, "\"*.test\"");
	assert_null(e);
}

/* A whole-label wildcard is fine. */
static void test_upstream_wildcard(void **state)
{
	struct al_error err = {0};
	struct mitm m = {0};

	peer_init(&m.upstream, run.up_wildcard, true);
	assert_int_equal(al_tls_end_client(run.cctx, "api.example.test", &m.client_end, &err), 0);
	mitm_run(&m);
	if (al_tls_end_error(m.client_end))
		fail_msg("%s", al_tls_end_error(m.client_end));
	assert_true(al_tls_end_handshake_done(m.client_end));
	assert_string_equal(al_tls_end_alpn(m.client_end), "http/1.1");
	mitm_free(&m);
}

/* Only the sandbox half: client (on ctx, sending sni) to a server end for
 * host. Returns the server end's error. */
static void expect_client_error(SSL_CTX *ctx, const char *host, const char *sni, const char *want,
				const char *client_reason)
{
	struct al_error err = {0};
	struct mitm m = {0};

	client_init(&m.client, ctx, host, sni);
	assert_int_equal(al_tls_end_server(run.sctx, host, &m.server_end, &err), 0);
	mitm_run(&m);
	assert_false(al_tls_end_handshake_done(m.server_end));
	assert_string_equal(al_tls_end_error(m.server_end), want);
	assert_true(m.client.failed);
	assert_contains(m.client.error, client_reason);
	mitm_free(&m);
}

static void test_client_failures(void **state)
{
	expect_client_error(run.client_other, "api.test", "api.test",
			    "client sent alert: unknown CA (api.test)",
			    "certificate verify failed");
	expect_client_error(run.client_h2, "api.test", "api.test",
			    "client offered ALPN h2, not http/1.1 (api.test)",
			    "no application protocol");
	expect_client_error(run.client, "api.test", "other.test",
			    "client sent SNI other.test, not the decided host (api.test)",
			    "unrecognized name");
	expect_client_error(
	    run.client, "api.test", "bad name",
	    "client sent an SNI that is no host name: invalid character in host name (api.test)",
	    "unrecognized name");
}

/* The SNI is compared in normal form, and so is the decided host. */
static void test_sni_normalised(void **state)
{
	struct al_error err = {0};
	struct mitm m = {0};

	client_init(&m.client, run.client, "api.test", "API.Test.");
	assert_int_equal(al_tls_end_server(run.sctx, "Api.TEST", &m.server_end, &err), 0);
	mitm_run(&m);
	assert_null(al_tls_end_error(m.server_end));
	assert_true(al_tls_end_handshake_done(m.server_end));
	assert_string_equal(al_tls_end_sni(m.server_end), "api.test");
	mitm_free(&m);
}

/* Bytes put straight into a fresh server end; its error after a read. */
static void expect_garbage(const void *bytes, size_t len, const char *want)
{
	struct al_error err = {0};
	_cleanup_(al_tls_end_freep) struct al_tls_end *e = NULL;
	char buf[64];

	assert_int_equal(al_tls_end_server(run.sctx, "api.test", &e, &err), 0);
	assert_int_equal(al_tls_end_put_cipher(e, bytes, len), 0);
	assert_int_equal(al_tls_end_read(e, buf, sizeof(buf)), -EPROTO);
	assert_string_equal(al_tls_end_error(e), want);
	assert_int_equal(al_tls_end_cipher_room(e), 0);
	/* What is left to send is an alert (21), if anything. */
	ssize_t n = al_tls_end_get_cipher(e, buf, sizeof(buf));
	if (n > 0)
		assert_int_equal(buf[0], 21);
}

static void test_garbage(void **state)
{
	static const char http[] = "GET / HTTP/1.1\r\nHost: api.test\r\n\r\n";
	/* A handshake record holding a ServerHello, not a ClientHello. */
	static const unsigned char not_hello[] = {0x16, 0x03, 0x01, 0x00, 0x06, 0x02,
						  0x00, 0x00, 0x02, 0x03, 0x03};
	/* A record header claiming 64 KiB. */
	static const unsigned char huge[] = {0x16, 0x03, 0x01, 0xff, 0xff, 0x01};

	expect_garbage(http, sizeof(http) - 1, "client TLS failed: http request (api.test)");
	expect_garbage(not_hello, sizeof(not_hello),
		       "client TLS failed: unexpected message (api.test)");
	expect_garbage(huge, sizeof(huge), "client TLS failed: packet length too long (api.test)");
}

/* More ciphertext than the bound at once: refused whole, and the end
 * fails; exactly the bound is taken, and then there is no room. */
static void test_oversized_input(void **state)
{
	struct al_error err = {0};
	_cleanup_(al_tls_end_freep) struct al_tls_end *e = NULL, *f = NULL;
	_cleanup_free_ unsigned char *junk = xcalloc(1, AL_TLS_CIPHER_MAX + 1);

	assert_int_equal(al_tls_end_server(run.sctx, "api.test", &e, &err), 0);
	assert_int_equal(al_tls_end_cipher_room(e), AL_TLS_CIPHER_MAX);
	assert_int_equal(al_tls_end_put_cipher(e, junk, AL_TLS_CIPHER_MAX + 1), -ENOBUFS);
	assert_string_equal(al_tls_end_error(e),
			    "over 65536 bytes of TLS data from the client not yet read (api.test)");
	assert_int_equal(al_tls_end_put_cipher(e, junk, 1), -EPROTO);

	assert_int_equal(al_tls_end_client(run.cctx, "api.test", &f, &err), 0);
	assert_int_equal(al_tls_end_put_cipher(f, junk, AL_TLS_CIPHER_MAX - 10), 0);
	assert_int_equal(al_tls_end_cipher_room(f), 10);
	assert_int_equal(al_tls_end_put_cipher(f, junk, 11), -ENOBUFS);
	assert_string_equal(
	    al_tls_end_error(f),
	    "over 65536 bytes of TLS data from the upstream not yet read (api.test)");
}

/* A peer that never takes what the end sends: once the bound is reached
 * the end takes no plaintext and no ciphertext, and holds at most a record
 * more than the bound. */
static void test_output_bound(void **state)
{
	_cleanup_free_ unsigned char *data = pattern(1 << 20, 4);
	struct mitm m;
	size_t taken = 0;
	ssize_t n;

	mitm_open(&m, "api.test", "api.test", run.client, run.up_api);
	al_tls_end_free(m.client_end);
	m.client_end = NULL;
	mitm_run(&m);
	assert_true(al_tls_end_handshake_done(m.server_end));
	while ((n = al_tls_end_write(m.server_end, data + taken, (1 << 20) - taken)) > 0)
		taken += (size_t)n;
	assert_int_equal(n, -EAGAIN);
	assert_true(taken >= AL_TLS_CIPHER_MAX - 16384);
	assert_true(taken < 2 * AL_TLS_CIPHER_MAX);
	assert_true(al_tls_end_pending_cipher(m.server_end) >= AL_TLS_CIPHER_MAX);
	assert_true(al_tls_end_pending_cipher(m.server_end) < AL_TLS_CIPHER_MAX + 16384 + 256);
	assert_int_equal(al_tls_end_cipher_room(m.server_end), 0);
	assert_int_equal(al_tls_end_read(m.server_end, data, 16), -EAGAIN);
	/* Taking it lets it go on, and what it took arrives whole. */
	mitm_run(&m);
	assert_int_equal(m.client.recv_len, taken);
	assert_memory_equal(m.client.recv, data, taken);
	assert_true(al_tls_end_write(m.server_end, data, 10) == 10);
	mitm_free(&m);
}

/* Calls before and around the handshake. */
static void test_end_calls(void **state)
{
	struct al_error err = {0};
	_cleanup_(al_tls_end_freep) struct al_tls_end *e = NULL;
	char buf[16];

	assert_int_equal(al_tls_end_server(run.sctx, "api.test", &e, &err), 0);
	assert_false(al_tls_end_handshake_done(e));
	assert_int_equal(al_tls_end_read(e, buf, sizeof(buf)), -EAGAIN);
	assert_int_equal(al_tls_end_read(e, buf, 0), -EINVAL);
	assert_int_equal(al_tls_end_write(e, "x", 1), -EAGAIN);
	assert_int_equal(al_tls_end_write(e, "x", 0), 0);
	assert_int_equal(al_tls_end_handshake(e), -EAGAIN);
	assert_int_equal(al_tls_end_shutdown(e), -ENOTCONN);
	assert_int_equal(al_tls_end_get_cipher(e, buf, sizeof(buf)), -EAGAIN);
	assert_int_equal(al_tls_end_pending_cipher(e), 0);
	assert_null(al_tls_end_error(e));
	assert_null(al_tls_end_sni(e));
	assert_null(al_tls_end_alpn(e));
	/* A client end says its ClientHello at once. */
	_cleanup_(al_tls_end_freep) struct al_tls_end *c = NULL;
	assert_int_equal(al_tls_end_client(run.cctx, "api.test", &c, &err), 0);
	assert_int_equal(al_tls_end_handshake(c), -EAGAIN);
	assert_true(al_tls_end_pending_cipher(c) > 0);
	assert_int_equal(al_tls_end_get_cipher(c, buf, 1), 1);
	assert_int_equal(buf[0], 0x16);
	/* Bad hosts. */
	struct al_tls_end *x = NULL;
	assert_int_equal(al_tls_end_server(run.sctx, "bad\001host", &x, &err), -EINVAL);
	assert_contains(err.msg, "TLS server end: \"bad?host\": invalid character");
	assert_int_equal(al_tls_end_server(run.sctx, NULL, &x, &err), -EINVAL);
	assert_null(x);
}

/* A client without ALPN speaks HTTP/1.1 all the same. */
static void test_no_alpn(void **state)
{
	SSL_CTX *plain = client_ctx(run.ca_cert, NULL);
	struct mitm m;

	mitm_open(&m, "api.test", "api.test", plain, run.up_api);
	m.client.send = (const unsigned char *)"hello";
	m.client.send_len = 5;
	mitm_run(&m);
	assert_null(al_tls_end_error(m.server_end));
	assert_null(al_tls_end_alpn(m.server_end));
	assert_int_equal(m.upstream.recv_len, 5);
	mitm_free(&m);
	SSL_CTX_free(plain);
}

/* Verify leaf against ca alone as the sandbox's client would: strict, for
 * a TLS server, by name (a host name or an address; NULL: the chain only).
 * Returns the X509_V_* result. */
static int verify_leaf(X509 *ca, X509 *leaf, const char *name)
{
	X509_STORE *st = X509_STORE_new();
	X509_STORE_CTX *ctx = X509_STORE_CTX_new();
	X509_VERIFY_PARAM *param;
	int r;

	assert_int_equal(X509_STORE_add_cert(st, ca), 1);
	assert_int_equal(X509_STORE_CTX_init(ctx, st, leaf, NULL), 1);
	param = X509_STORE_CTX_get0_param(ctx);
	X509_VERIFY_PARAM_set_flags(param, X509_V_FLAG_X509_STRICT);
	if (name) {
		X509_VERIFY_PARAM_set_purpose(param, X509_PURPOSE_SSL_SERVER);
		if (X509_VERIFY_PARAM_set1_ip_asc(param, name) != 1)
			assert_int_equal(X509_VERIFY_PARAM_set1_host(param, name, 0), 1);
	}
	ERR_clear_error();
	r = X509_verify_cert(ctx) == 1 ? X509_V_OK : X509_STORE_CTX_get_error(ctx);
	X509_STORE_CTX_free(ctx);
	X509_STORE_free(st);
	return r;
}

static void expect_verify(struct al_tls_ca *ca, const char *name, int want)
{
	struct al_error err = {0};
	EVP_PKEY *key;
	X509 *leaf;
	int r;

	assert_int_equal(al_tls_ca_leaf(ca, name, &leaf, &key, &err), 0);
	r = verify_leaf(al_tls_ca_cert(ca), leaf, name);
	if (r != want)
		fail_msg("leaf for %s: %s, expected %s", name, X509_verify_cert_error_string(r),
			 X509_verify_cert_error_string(want));
}

/* The CA: self-signed, strict, a CA with no room for intermediates,
 * signing only certificates; its end is the run's, capped at 7 days. */
static void test_ca(void **state)
{
	struct al_error err = {0};
	_cleanup_(al_tls_ca_freep) struct al_tls_ca *ca = NULL, *capped = NULL;
	_cleanup_(al_x509_freep) X509 *x = NULL;
	int64_t now = time(NULL);
	int day, sec;

	assert_int_equal(al_tls_ca_new("0123456789abcdef", now + 600, NULL, 0, &ca, &err), 0);
	assert_non_null(strstr(al_tls_ca_pem(ca), "-----BEGIN CERTIFICATE-----\n"));
	x = ca_x509(ca);
	assert_int_equal(X509_cmp(x, al_tls_ca_cert(ca)), 0);
	assert_int_equal(verify_leaf(x, x, NULL), X509_V_OK);
	assert_int_equal(X509_check_ca(x), 1);
	assert_int_equal(X509_get_pathlen(x), 0);
	/* Critical, as strict clients (Python 3.13's default) want. */
	assert_int_equal(X509_EXTENSION_get_critical(
			     X509_get_ext(x, X509_get_ext_by_NID(x, NID_basic_constraints, -1))),
			 1);
	/* No critical extension that OpenSSL does not know. */
	assert_false(X509_get_extension_flags(x) & EXFLAG_CRITICAL);
	assert_int_equal(X509_get_key_usage(x), KU_KEY_CERT_SIGN | KU_CRL_SIGN);
	assert_non_null(X509_get0_subject_key_id(x));
	assert_int_equal(
	    X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, (char[64]){0}, 64),
	    (int)strlen("airlock run 0123456789abcdef"));
	assert_int_equal(ASN1_TIME_diff(&day, &sec, NULL, X509_get0_notAfter(x)), 1);
	assert_true(day == 0 && sec > 590 && sec <= 600);
	assert_int_equal(ASN1_TIME_diff(&day, &sec, NULL, X509_get0_notBefore(x)), 1);
	assert_true(day == 0 && sec < -55 && sec >= -61);
	assert_int_equal(al_tls_ca_not_after(ca), now + 600);
	assert_int_equal(X509_get_signature_nid(x), NID_ecdsa_with_SHA256);

	assert_int_equal(al_tls_ca_new("r", now + 30 * 86400, NULL, 0, &capped, &err), 0);
	assert_true(al_tls_ca_not_after(capped) - now >= AL_TLS_CA_MAX_LIFETIME - 1);
	assert_true(al_tls_ca_not_after(capped) - now <= AL_TLS_CA_MAX_LIFETIME + 1);

	struct al_tls_ca *bad = NULL;
	assert_int_equal(al_tls_ca_new("r", now - 1, NULL, 0, &bad, &err), -EINVAL);
	assert_contains(err.msg, "run CA: its end");
	assert_int_equal(al_tls_ca_new("r/1", now + 60, NULL, 0, &bad, &err), -EINVAL);
	assert_contains(err.msg, "run id must be");
	assert_int_equal(al_tls_ca_new("", now + 60, NULL, 0, &bad, &err), -EINVAL);
	assert_int_equal(
	    al_tls_ca_new("012345678901234567890123456789012", now + 60, NULL, 0, &bad, &err),
	    -EINVAL);
	assert_null(bad);
}

/* A leaf: the name given, strict, the CA's end, a key of its own. */
static void test_leaf(void **state)
{
	struct al_error err = {0};
	_cleanup_(al_tls_ca_freep) struct al_tls_ca *ca = NULL;
	EVP_PKEY *key;
	X509 *leaf;
	int day, sec;

	assert_int_equal(al_tls_ca_new("r", time(NULL) + 3600, NULL, 0, &ca, &err), 0);
	expect_verify(ca, "api.test", X509_V_OK);
	expect_verify(ca, "127.0.0.1", X509_V_OK);
	expect_verify(ca, "::1", X509_V_OK);
	assert_int_equal(al_tls_ca_leaf(ca, "api.test", &leaf, &key, &err), 0);
	assert_int_equal(verify_leaf(al_tls_ca_cert(ca), leaf, "other.test"),
			 X509_V_ERR_HOSTNAME_MISMATCH);
	assert_int_equal(verify_leaf(pki.ca, leaf, "api.test"),
			 X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY);
	assert_int_equal(X509_check_private_key(leaf, key), 1);
	assert_int_equal(X509_check_ca(leaf), 0);
	assert_int_equal(X509_get_key_usage(leaf), KU_DIGITAL_SIGNATURE);
	assert_int_equal(X509_get_extended_key_usage(leaf), XKU_SSL_SERVER);
	assert_int_equal(
	    ASN1_TIME_compare(X509_get0_notAfter(leaf), X509_get0_notAfter(al_tls_ca_cert(ca))), 0);
	assert_int_equal(ASN1_TIME_diff(&day, &sec, NULL, X509_get0_notBefore(leaf)), 1);
	assert_true(day == 0 && sec < -55 && sec >= -61);
	assert_int_equal(ASN1_OCTET_STRING_cmp(X509_get0_authority_key_id(leaf),
					       X509_get0_subject_key_id(al_tls_ca_cert(ca))),
			 0);
	const ASN1_INTEGER *serial = X509_get0_serialNumber(leaf);
	assert_int_equal(ASN1_STRING_length(serial), 16);
	assert_int_equal(serial->type, V_ASN1_INTEGER);

	assert_int_equal(al_tls_ca_leaf(ca, "*.test", &leaf, &key, &err), -EINVAL);
	assert_contains(err.msg, "leaf for \"*.test\": invalid character in host name");
	assert_int_equal(al_tls_ca_leaf(ca, "a\nb", &leaf, &key, &err), -EINVAL);
	assert_contains(err.msg, "leaf for \"a?b\"");
	assert_int_equal(al_tls_ca_leaf(ca, "1.2.3.0x4", &leaf, &key, &err), -EINVAL);
	assert_int_equal(al_tls_ca_leaf(ca, NULL, &leaf, &key, &err), -EINVAL);
}

/* The same leaf per name (in normal form), another per name, the oldest
 * evicted past the bound. */
static void test_leaf_cache(void **state)
{
	struct al_error err = {0};
	_cleanup_(al_tls_ca_freep) struct al_tls_ca *ca = NULL;
	EVP_PKEY *k1, *k2, *k3;
	X509 *a, *b, *c;
	char name[32];

	assert_int_equal(al_tls_ca_new("r", time(NULL) + 3600, NULL, 0, &ca, &err), 0);
	assert_int_equal(al_tls_ca_leaf(ca, "a.test", &a, &k1, &err), 0);
	assert_int_equal(al_tls_ca_leaf(ca, "A.Test.", &b, &k2, &err), 0);
	assert_ptr_equal(a, b);
	assert_ptr_equal(k1, k2);
	assert_int_equal(al_tls_ca_leaf(ca, "b.test", &c, &k3, &err), 0);
	assert_ptr_not_equal(a, c);
	assert_int_not_equal(EVP_PKEY_eq(k1, k3), 1);
	assert_int_not_equal(ASN1_INTEGER_cmp(X509_get0_serialNumber(a), X509_get0_serialNumber(c)),
			     0);
	/* "a.test" is the oldest: AL_TLS_LEAF_CACHE - 1 more names evict it,
	 * and b.test stays. */
	X509_up_ref(a);
	for (int i = 0; i < AL_TLS_LEAF_CACHE - 1; i++) {
		snprintf(name, sizeof(name), "n%d.test", i);
		assert_int_equal(al_tls_ca_leaf(ca, name, &b, &k2, &err), 0);
	}
	assert_int_equal(al_tls_ca_leaf(ca, "b.test", &b, &k2, &err), 0);
	assert_ptr_equal(b, c);
	assert_int_equal(al_tls_ca_leaf(ca, "a.test", &b, &k2, &err), 0);
	assert_int_not_equal(X509_cmp(a, b), 0);
	assert_int_equal(verify_leaf(al_tls_ca_cert(ca), b, "a.test"), X509_V_OK);
	X509_free(a);
}

/* Dropping the key: no new leaf (not even one that was cached), the
 * certificate stays. */
static void test_drop_key(void **state)
{
	struct al_error err = {0};
	_cleanup_(al_tls_ca_freep) struct al_tls_ca *ca = NULL;
	EVP_PKEY *key;
	X509 *leaf;

	assert_int_equal(al_tls_ca_new("r", time(NULL) + 3600, NULL, 0, &ca, &err), 0);
	assert_int_equal(al_tls_ca_leaf(ca, "a.test", &leaf, &key, &err), 0);
	al_tls_ca_drop_key(ca);
	assert_int_equal(al_tls_ca_leaf(ca, "a.test", &leaf, &key, &err), -ENOKEY);
	assert_string_equal(err.msg, "leaf for a.test: the run CA's key was dropped");
	assert_int_equal(al_tls_ca_leaf(ca, "b.test", &leaf, &key, &err), -ENOKEY);
	assert_non_null(strstr(al_tls_ca_pem(ca), "BEGIN CERTIFICATE"));
	assert_non_null(al_tls_ca_cert(ca));
}

/* nameConstraints: leaves for what the CA permits verify, others do not. */
static void test_name_constraints(void **state)
{
	static const char *const permitted[] = {"api.test", "*.svc.test", "127.0.0.1", "::1"};
	static const char *const names_only[] = {"api.test"};
	static const char *const addrs_only[] = {"127.0.0.1"};
	struct al_error err = {0};
	_cleanup_(al_tls_ca_freep) struct al_tls_ca *ca = NULL, *names = NULL, *addrs = NULL;
	int crit = 0;

	assert_int_equal(al_tls_ca_new("r", time(NULL) + 3600, permitted, 4, &ca, &err), 0);
	NAME_CONSTRAINTS *nc =
	    X509_get_ext_d2i(al_tls_ca_cert(ca), NID_name_constraints, &crit, NULL);
	assert_non_null(nc);
	assert_int_equal(crit, 1);
	assert_int_equal(sk_GENERAL_SUBTREE_num(nc->permittedSubtrees), 4);
	assert_null(nc->excludedSubtrees);
	NAME_CONSTRAINTS_free(nc);
	expect_verify(ca, "api.test", X509_V_OK);
	expect_verify(ca, "v1.api.test", X509_V_OK);
	expect_verify(ca, "a.svc.test", X509_V_OK);
	expect_verify(ca, "a.b.svc.test", X509_V_OK);
	expect_verify(ca, "127.0.0.1", X509_V_OK);
	expect_verify(ca, "::1", X509_V_OK);
	expect_verify(ca, "svc.test", X509_V_ERR_PERMITTED_VIOLATION);
	expect_verify(ca, "evil.test", X509_V_ERR_PERMITTED_VIOLATION);
	expect_verify(ca, "api.test.evil", X509_V_ERR_PERMITTED_VIOLATION);
	expect_verify(ca, "xapi.test", X509_V_ERR_PERMITTED_VIOLATION);
	expect_verify(ca, "127.0.0.2", X509_V_ERR_PERMITTED_VIOLATION);
	expect_verify(ca, "::2", X509_V_ERR_PERMITTED_VIOLATION);

	/* Only names: every address is excluded; only addresses: every name. */
	assert_int_equal(al_tls_ca_new("r", time(NULL) + 3600, names_only, 1, &names, &err), 0);
	expect_verify(names, "api.test", X509_V_OK);
	expect_verify(names, "10.0.0.1", X509_V_ERR_EXCLUDED_VIOLATION);
	expect_verify(names, "fd00::1", X509_V_ERR_EXCLUDED_VIOLATION);
	assert_int_equal(al_tls_ca_new("r", time(NULL) + 3600, addrs_only, 1, &addrs, &err), 0);
	expect_verify(addrs, "127.0.0.1", X509_V_OK);
	expect_verify(addrs, "api.test", X509_V_ERR_EXCLUDED_VIOLATION);

	/* Bad entries name themselves. */
	static const char *const bad1[] = {"ok.test", "*"};
	static const char *const bad2[] = {"*.10.0.0.1"};
	static const char *const bad3[] = {"10.0.0.0/8"};
	static const char *const bad4[] = {NULL};
	struct al_tls_ca *x = NULL;
	assert_int_equal(al_tls_ca_new("r", time(NULL) + 60, bad1, 2, &x, &err), -EINVAL);
	assert_string_equal(err.msg,
			    "run CA: permitted host 1 \"*\": invalid character in host name");
	assert_int_equal(al_tls_ca_new("r", time(NULL) + 60, bad2, 1, &x, &err), -EINVAL);
	assert_contains(err.msg, "a wildcard needs a host name");
	assert_int_equal(al_tls_ca_new("r", time(NULL) + 60, bad3, 1, &x, &err), -EINVAL);
	assert_contains(err.msg, "permitted host 0 \"10.0.0.0/8\"");
	assert_int_equal(al_tls_ca_new("r", time(NULL) + 60, bad4, 1, &x, &err), -EINVAL);
	assert_int_equal(
	    al_tls_ca_new("r", time(NULL) + 60, permitted, AL_TLS_CA_PERMITTED_MAX + 1, &x, &err),
	    -EINVAL);
	assert_null(x);
}

/* Through an end: the sandbox's client refuses a leaf the CA may not
 * issue, and the gateway hears of it as an alert. */
static void test_name_constraints_handshake(void **state)
{
	static const char *const permitted[] = {"api.test"};
	struct al_error err = {0};
	_cleanup_(al_tls_ca_freep) struct al_tls_ca *ca = NULL;
	_cleanup_(al_tls_server_ctx_freep) struct al_tls_server_ctx *sctx = NULL;
	_cleanup_(al_x509_freep) X509 *cert = NULL;
	struct mitm m = {0};
	SSL_CTX *c;

	assert_int_equal(al_tls_ca_new("r", time(NULL) + 3600, permitted, 1, &ca, &err), 0);
	assert_int_equal(al_tls_server_ctx_new(ca, &sctx, &err), 0);
	cert = ca_x509(ca);
	c = client_ctx(cert, "\x08http/1.1");
	client_init(&m.client, c, "evil.test", "evil.test");
	assert_int_equal(al_tls_end_server(sctx, "evil.test", &m.server_end, &err), 0);
	mitm_run(&m);
	assert_true(m.client.failed);
	assert_int_equal(SSL_get_verify_result(m.client.ssl), X509_V_ERR_PERMITTED_VIOLATION);
	assert_string_equal(al_tls_end_error(m.server_end),
			    "client sent alert: certificate unknown (evil.test)");
	mitm_free(&m);
	SSL_CTX_free(c);
}

/* The warm-up (al_tls_warm) is a real handshake: it verifies the leaf
 * against the run's CA with the client's checks, so a name the CA may not
 * sign for fails it; and the leaf it used stays cached for the host. */
static void test_warm(void **state)
{
	static const char *const permitted[] = {"api.test"};
	struct al_error err = {0};
	_cleanup_(al_tls_ca_freep) struct al_tls_ca *ca = NULL;
	_cleanup_(al_tls_server_ctx_freep) struct al_tls_server_ctx *sctx = NULL;
	struct al_tls_client_ctx *stores[] = {run.cctx};

	assert_int_equal(al_tls_ca_new("r", time(NULL) + 3600, permitted, 1, &ca, &err), 0);
	assert_int_equal(al_tls_server_ctx_new(ca, &sctx, &err), 0);
	assert_false(al_tls_ca_has_leaf(ca, "api.test"));
	if (al_tls_warm(sctx, "api.test", stores, 1, &err) < 0)
		fail_msg("%s", err.msg);
	assert_true(al_tls_ca_has_leaf(ca, "api.test"));
	assert_int_equal(al_tls_warm(sctx, "evil.test", stores, 1, &err), -EPROTO);
	assert_non_null(strstr(err.msg, "upstream certificate verify failed"));
	assert_int_equal(al_tls_warm(sctx, "*.test", NULL, 0, &err), -EINVAL);
}

/* Trust stores: a missing file, one with no certificate, the host's. */
static void test_client_ctx(void **state)
{
	struct al_error err = {0};
	struct al_tls_client_ctx *c = NULL;
	char empty[] = "/tmp/airlock-test-tls-empty-XXXXXX";
	int fd;

	assert_int_equal(al_tls_client_ctx_new("/nonexistent/ca.pem", &c, &err), -ENOENT);
	assert_string_equal(err.msg, "trust store /nonexistent/ca.pem: No such file or directory");
	fd = mkstemp(empty);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "not a certificate\n", 18), 18);
	close(fd);
	assert_int_equal(al_tls_client_ctx_new(empty, &c, &err), -EINVAL);
	unlink(empty);
	assert_contains(err.msg, "trust store /tmp/airlock-test-tls-empty-");
	assert_contains(err.msg, ": no certificate or crl found");
	assert_null(c);

	/* The host's store: the test CA is not in it. */
	if (access(X509_get_default_cert_file(), R_OK) != 0) {
		skip();
	}
	assert_int_equal(al_tls_client_ctx_new(NULL, &c, &err), 0);
	struct al_tls_client_ctx *saved = run.cctx;
	run.cctx = c;
	expect_upstream_error("api.test", run.up_api,
			      "upstream certificate verify failed: unable to get local issuer "
			      "certificate (api.test)");
	run.cctx = saved;
	al_tls_client_ctx_free(c);
}

/* The gateway's process is forked from the supervisor after the CA is
 * made: OpenSSL's random state must not be shared with it, or both would
 * mint the same serials and keys. */
static void test_fork_random(void **state)
{
	struct al_error err = {0};
	_cleanup_(al_tls_ca_freep) struct al_tls_ca *ca = NULL;
	unsigned char mine[16], theirs[16];
	EVP_PKEY *key;
	X509 *leaf;
	int p[2], status;
	pid_t pid;

	assert_int_equal(al_tls_ca_new("r", time(NULL) + 3600, NULL, 0, &ca, &err), 0);
	assert_int_equal(pipe(p), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(p[0]);
		if (al_tls_ca_leaf(ca, "f.test", &leaf, &key, &err) < 0 ||
		    ASN1_STRING_length(X509_get0_serialNumber(leaf)) != 16 ||
		    write(p[1], ASN1_STRING_get0_data(X509_get0_serialNumber(leaf)), 16) != 16)
			_exit(1);
		_exit(0);
	}
	close(p[1]);
	assert_int_equal(read(p[0], theirs, 16), 16);
	close(p[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(al_tls_ca_leaf(ca, "f.test", &leaf, &key, &err), 0);
	memcpy(mine, ASN1_STRING_get0_data(X509_get0_serialNumber(leaf)), 16);
	assert_memory_not_equal(mine, theirs, 16);
}

/* Everything after setup under the gateway's own confinement: no file
 * access at all (landlock, when the kernel has it) and the gateway's
 * seccomp allowlist, which kills the process on any other syscall. A leaf
 * is minted there, both handshakes run and 256 KiB go each way. */
static void confined_run(void)
{
	struct sock_fprog prog = {.len = al_gateway_seccomp_program_len,
				  .filter = (struct sock_filter *)al_gateway_seccomp_program};
	const size_t len = 256 << 10;
	_cleanup_free_ unsigned char *up = pattern(len, 5), *down = pattern(len, 6);
	struct al_error err = {0};
	struct mitm m;
	int abi = al_landlock_abi();

	/* A failed assertion aborts the child instead of going on with the
	 * next test in it. */
	setenv("CMOCKA_TEST_ABORT", "1", 1);
	assert_int_equal(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
	if (abi > 0) {
		struct al_landlock_attr attr = {.handled_access_fs = al_landlock_fs_all(abi)};
		int rs = al_sys_landlock_create_ruleset(&attr, al_landlock_attr_size(abi), 0);
		assert_true(rs >= 0);
		assert_int_equal(al_sys_landlock_restrict_self(rs, 0), 0);
		close(rs);
	}
	assert_int_equal(syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog), 0);

	memset(&m, 0, sizeof(m));
	client_init(&m.client, run.client, "new.test", "new.test");
	peer_init(&m.upstream, run.up_api, true);
	assert_int_equal(al_tls_end_server(run.sctx, "new.test", &m.server_end, &err), 0);
	assert_int_equal(al_tls_end_client(run.cctx, "api.test", &m.client_end, &err), 0);
	m.client.send = up;
	m.client.send_len = len;
	m.client.close = true;
	m.upstream.send = down;
	m.upstream.send_len = len;
	m.upstream.close = true;
	mitm_run(&m);
	assert_null(al_tls_end_error(m.server_end));
	assert_null(al_tls_end_error(m.client_end));
	assert_int_equal(m.upstream.recv_len, len);
	assert_memory_equal(m.upstream.recv, up, len);
	assert_int_equal(m.client.recv_len, len);
	assert_memory_equal(m.client.recv, down, len);
	assert_true(m.client.got_close && m.upstream.got_close);
	/* The upstream's verification failing is no different. */
	expect_upstream_error(
	    "api.test", run.up_expired,
	    "upstream certificate verify failed: certificate has expired (api.test)");
	mitm_free(&m);
}

static void test_confined(void **state)
{
	int status;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		confined_run();
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (WIFSIGNALED(status))
		fail_msg("the confined child was killed by signal %d%s", WTERMSIG(status),
			 WTERMSIG(status) == SIGSYS
			     ? " (SIGSYS: a syscall outside the gateway's allowlist, or a failed "
			       "assertion's abort; see its output)"
			     : "");
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_mitm_transfer, setup_run, teardown_run),
	    cmocka_unit_test_setup_teardown(test_mitm_address, setup_run, teardown_run),
	    cmocka_unit_test_setup_teardown(test_upstream_failures, setup_run, teardown_run),
	    cmocka_unit_test_setup_teardown(test_upstream_wildcard, setup_run, teardown_run),
	    cmocka_unit_test_setup_teardown(test_client_failures, setup_run, teardown_run),
	    cmocka_unit_test_setup_teardown(test_sni_normalised, setup_run, teardown_run),
	    cmocka_unit_test_setup_teardown(test_garbage, setup_run, teardown_run),
	    cmocka_unit_test_setup_teardown(test_oversized_input, setup_run, teardown_run),
	    cmocka_unit_test_setup_teardown(test_output_bound, setup_run, teardown_run),
	    cmocka_unit_test_setup_teardown(test_end_calls, setup_run, teardown_run),
	    cmocka_unit_test_setup_teardown(test_no_alpn, setup_run, teardown_run),
	    cmocka_unit_test(test_ca),
	    cmocka_unit_test(test_leaf),
	    cmocka_unit_test(test_leaf_cache),
	    cmocka_unit_test(test_drop_key),
	    cmocka_unit_test(test_name_constraints),
	    cmocka_unit_test(test_name_constraints_handshake),
	    cmocka_unit_test_setup_teardown(test_client_ctx, setup_run, teardown_run),
	    cmocka_unit_test_setup_teardown(test_warm, setup_run, teardown_run),
	    cmocka_unit_test(test_fork_random),
	    cmocka_unit_test_setup_teardown(test_confined, setup_run, teardown_run),
	};
	return cmocka_run_group_tests(tests, setup_pki, teardown_pki);
}
