/* bench-tls: what TLS interception (src/tls) costs, in process, over
 * memory: minting a leaf (first time, and from the cache), a full
 * handshake on each side of the gateway, and plaintext throughput through
 * the man-in-the-middle loop (client -> server end -> client end ->
 * upstream). Each number is the median of many repetitions.
 *
 * usage: bench-tls [ROUNDS]   (default and least 256; throughput runs
 *                              ROUNDS / 10 of 16 MiB each)
 *        bench-tls --first N  (the first interception in N fresh processes
 *                              without the gateway's warm-up and N with it,
 *                              al_tls_warm, taken in turn)
 * Times are the thread's CPU time unless AL_BENCH_CLOCK=wall. */
#include <errno.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "tls/ca.h"
#include "tls/end.h"
#include "tls/tls.h"

#define TRANSFER (16u << 20)

/* The bench's own CPU time: everything here runs in this one thread, so on
 * an idle machine it is the wall time, and on a busy one it leaves out the
 * time others had the CPU (AL_BENCH_CLOCK=wall measures wall time). */
static clockid_t bench_clock = CLOCK_THREAD_CPUTIME_ID;

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(bench_clock, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void die(const char *what, const struct al_error *err) __attribute__((noreturn));
static void die(const char *what, const struct al_error *err)
{
	fprintf(stderr, "bench-tls: %s: %s\n", what, err ? err->msg : al_tls_reason("?"));
	exit(1);
}

/* A plain OpenSSL peer over memory BIOs (in: what it reads, out: what it
 * wrote). */
struct peer {
	SSL *ssl;
	BIO *in, *out;
};

static void peer_init(struct peer *p, SSL_CTX *c, bool server)
{
	p->ssl = SSL_new(c);
	p->in = BIO_new(BIO_s_mem());
	p->out = BIO_new(BIO_s_mem());
	if (!p->ssl || !p->in || !p->out)
		die("a peer", NULL);
	SSL_set_bio(p->ssl, p->in, p->out);
	if (server)
		SSL_set_accept_state(p->ssl);
	else
		SSL_set_connect_state(p->ssl);
}

/* Ciphertext both ways between a peer and an end. */
static void wire(struct peer *p, struct al_tls_end *e)
{
	static unsigned char buf[16384];
	size_t room;
	ssize_t n;

	while (BIO_ctrl_pending(p->out) > 0 && (room = al_tls_end_cipher_room(e)) > 0) {
		int got = BIO_read(p->out, buf, (int)(room < sizeof(buf) ? room : sizeof(buf)));
		if (al_tls_end_put_cipher(e, buf, (size_t)got) < 0)
			die("put", NULL);
	}
	while ((n = al_tls_end_get_cipher(e, buf, sizeof(buf))) > 0)
		BIO_write(p->in, buf, (int)n);
}

static bool peer_done(struct peer *p)
{
	int r = SSL_do_handshake(p->ssl);

	if (r != 1 && SSL_get_error(p->ssl, r) != SSL_ERROR_WANT_READ)
		die("peer handshake", NULL);
	return r == 1;
}

static void handshake(struct peer *p, struct al_tls_end *e)
{
	for (int i = 0; i < 100; i++) {
		bool a = peer_done(p);
		int r = al_tls_end_handshake(e);
		if (r == -EPROTO)
			die(al_tls_end_error(e), NULL);
		wire(p, e);
		if (a && r == 0)
			return;
	}
	die("handshake did not finish", NULL);
}

struct setup {
	struct al_tls_ca *ca, *up_ca;
	struct al_tls_server_ctx *sctx;
	struct al_tls_client_ctx *cctx;
	SSL_CTX *client, *upstream;
	SSL_CTX *plain; /* a client as the sandbox's, trusting the upstream's CA */
	char ca_file[64];
};

/* The sandbox's client trusts the run CA; the upstream has a leaf from a
 * second CA, which the client ends trust through a CA file. */
static void make_setup(struct setup *s)
{
	struct al_error err = {0};
	X509 *cert, *up_cert;
	EVP_PKEY *key;
	FILE *f;
	int fd;

	if (al_tls_init(&err) < 0 ||
	    al_tls_ca_new("bench", time(NULL) + 3600, NULL, 0, &s->ca, &err) < 0 ||
	    al_tls_ca_new("upstream", time(NULL) + 3600, NULL, 0, &s->up_ca, &err) < 0 ||
	    al_tls_server_ctx_new(s->ca, &s->sctx, &err) < 0)
		die("setup", &err);
	snprintf(s->ca_file, sizeof(s->ca_file), "/tmp/airlock-bench-tls-XXXXXX");
	fd = mkstemp(s->ca_file);
	f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f || fputs(al_tls_ca_pem(s->up_ca), f) < 0 || fclose(f) != 0)
		die("writing the upstream CA", NULL);
	if (al_tls_client_ctx_new(s->ca_file, &s->cctx, &err) < 0)
		die("client context", &err);
	unlink(s->ca_file);

	s->client = SSL_CTX_new(TLS_client_method());
	cert = al_tls_ca_cert(s->ca);
	if (!s->client || X509_STORE_add_cert(SSL_CTX_get_cert_store(s->client), cert) != 1)
		die("client", NULL);
	SSL_CTX_set_verify(s->client, SSL_VERIFY_PEER, NULL);
	X509_VERIFY_PARAM_set_flags(SSL_CTX_get0_param(s->client), X509_V_FLAG_X509_STRICT);
	SSL_CTX_set_alpn_protos(s->client, (const unsigned char *)"\x08http/1.1", 9);
	s->plain = SSL_CTX_new(TLS_client_method());
	if (!s->plain ||
	    X509_STORE_add_cert(SSL_CTX_get_cert_store(s->plain), al_tls_ca_cert(s->up_ca)) != 1)
		die("plain client", NULL);
	SSL_CTX_set_verify(s->plain, SSL_VERIFY_PEER, NULL);

	if (al_tls_ca_leaf(s->up_ca, "api.bench", &up_cert, &key, &err) < 0)
		die("upstream leaf", &err);
	s->upstream = SSL_CTX_new(TLS_server_method());
	if (!s->upstream || SSL_CTX_use_certificate(s->upstream, up_cert) != 1 ||
	    SSL_CTX_use_PrivateKey(s->upstream, key) != 1)
		die("upstream", NULL);
	SSL_CTX_set_num_tickets(s->upstream, 0);
}

static void bench_mint(struct setup *s, size_t rounds)
{
	struct al_error err = {0};
	double *t = xcalloc(rounds, sizeof(double)), *c = xcalloc(rounds, sizeof(double));
	char name[64];
	EVP_PKEY *key;
	X509 *cert;

	for (size_t i = 0; i < rounds; i++) {
		snprintf(name, sizeof(name), "m%zu.bench", i);
		double t0 = now_ns();
		if (al_tls_ca_leaf(s->ca, name, &cert, &key, &err) < 0)
			die("mint", &err);
		t[i] = now_ns() - t0;
	}
	/* The cache is full now (rounds >= AL_TLS_LEAF_CACHE): look up each
	 * cached name in turn, 1000 at a time. */
	for (size_t i = 0; i < rounds; i++) {
		double t0 = now_ns();
		for (size_t j = 0; j < 1000; j++) {
			snprintf(name, sizeof(name), "m%zu.bench", rounds - 1 - (i + j) % 256);
			if (al_tls_ca_leaf(s->ca, name, &cert, &key, &err) < 0)
				die("cached", &err);
		}
		c[i] = (now_ns() - t0) / 1000;
	}
	printf("leaf mint, first:               %8.3f ms  (median of %zu names)\n",
	       median(t, rounds) / 1e6, rounds);
	printf("leaf, cached (256 held):        %8.3f us  (median of %zu x 1000 lookups, "
	       "snprintf of the name included)\n",
	       median(c, rounds) / 1e3, rounds);
	free(t);
	free(c);
}

/* Both plain OpenSSL: the sandbox's client to the upstream, directly. */
static void plain_handshake(struct setup *s)
{
	static unsigned char buf[16384];
	struct peer c, u;
	int n;

	peer_init(&c, s->plain, false);
	SSL_set1_host(c.ssl, "api.bench");
	SSL_set_tlsext_host_name(c.ssl, "api.bench");
	peer_init(&u, s->upstream, true);
	for (int i = 0; i < 100; i++) {
		bool a = peer_done(&c), b = peer_done(&u);
		if (a && b)
			break;
		while ((n = BIO_read(c.out, buf, sizeof(buf))) > 0)
			BIO_write(u.in, buf, n);
		while ((n = BIO_read(u.out, buf, sizeof(buf))) > 0)
			BIO_write(c.in, buf, n);
	}
	if (!SSL_is_init_finished(c.ssl) || !SSL_is_init_finished(u.ssl))
		die("plain handshake", NULL);
	SSL_free(c.ssl);
	SSL_free(u.ssl);
}

static void bench_handshakes(struct setup *s, size_t rounds)
{
	struct al_error err = {0};
	double *a = xcalloc(rounds, sizeof(double)), *b = xcalloc(rounds, sizeof(double));
	double *c = xcalloc(rounds, sizeof(double));

	for (size_t i = 0; i < rounds; i++) {
		struct peer p;
		struct al_tls_end *e;
		double t0 = now_ns();
		peer_init(&p, s->client, false);
		SSL_set1_host(p.ssl, "api.bench");
		SSL_set_tlsext_host_name(p.ssl, "api.bench");
		if (al_tls_end_server(s->sctx, "api.bench", &e, &err) < 0)
			die("server end", &err);
		handshake(&p, e);
		a[i] = now_ns() - t0;
		SSL_free(p.ssl);
		al_tls_end_free(e);

		t0 = now_ns();
		peer_init(&p, s->upstream, true);
		if (al_tls_end_client(s->cctx, "api.bench", &e, &err) < 0)
			die("client end", &err);
		handshake(&p, e);
		b[i] = now_ns() - t0;
		SSL_free(p.ssl);
		al_tls_end_free(e);

		t0 = now_ns();
		plain_handshake(s);
		c[i] = now_ns() - t0;
	}
	printf("handshake, client <-> server end: %6.3f ms  (median of %zu; both sides' work, "
	       "leaf cached)\n",
	       median(a, rounds) / 1e6, rounds);
	printf("handshake, client end <-> upstream: %4.3f ms  (median of %zu; both sides' work)\n",
	       median(b, rounds) / 1e6, rounds);
	printf("handshake, plain OpenSSL both sides: %3.3f ms  (median of %zu; for comparison)\n",
	       median(c, rounds) / 1e6, rounds);
	free(a);
	free(b);
	free(c);
}

/* One fresh process's first interception (the sandbox's handshake with a
 * server end, then a client end's with the upstream), its CPU time in ns,
 * after the gateway's start as it is: the leaf for the host minted ahead,
 * and with warm the warm-up handshake (al_tls_warm). *warm_ns: what the
 * warm-up took. */
static void first_interception(bool warm, double *ret, double *warm_ns)
{
	struct setup s = {0};
	struct al_error err = {0};
	struct al_tls_end *e;
	struct peer p;
	EVP_PKEY *key;
	X509 *cert;

	make_setup(&s);
	if (al_tls_ca_leaf(s.ca, "api.bench", &cert, &key, &err) < 0)
		die("premint", &err);
	double t0 = now_ns();
	if (warm && al_tls_warm(s.sctx, "api.bench", &s.cctx, 1, &err) < 0)
		die("warm-up", &err);
	*warm_ns = now_ns() - t0;
	t0 = now_ns();
	peer_init(&p, s.client, false);
	SSL_set1_host(p.ssl, "api.bench");
	SSL_set_tlsext_host_name(p.ssl, "api.bench");
	if (al_tls_end_server(s.sctx, "api.bench", &e, &err) < 0)
		die("server end", &err);
	handshake(&p, e);
	SSL_free(p.ssl);
	al_tls_end_free(e);
	peer_init(&p, s.upstream, true);
	if (al_tls_end_client(s.cctx, "api.bench", &e, &err) < 0)
		die("client end", &err);
	handshake(&p, e);
	*ret = now_ns() - t0;
}

/* --first N: N fresh processes each way, in turn (cold, warm, cold...):
 * the first interception's CPU time without and with the warm-up. */
static int bench_first(size_t n)
{
	double *cold = xcalloc(n, sizeof(double)), *warm = xcalloc(n, sizeof(double));
	double *cost = xcalloc(n, sizeof(double));

	for (size_t i = 0; i < 2 * n; i++) {
		double v[2];
		int fd[2], st;
		pid_t pid;

		if (pipe(fd) < 0 || (pid = fork()) < 0)
			die("fork", NULL);
		if (pid == 0) {
			first_interception(i % 2 == 1, &v[0], &v[1]);
			_exit(write(fd[1], v, sizeof(v)) == sizeof(v) ? 0 : 1);
		}
		close(fd[1]);
		if (read(fd[0], v, sizeof(v)) != sizeof(v) || waitpid(pid, &st, 0) != pid || st)
			die("a fresh process", NULL);
		close(fd[0]);
		if (i % 2)
			warm[i / 2] = v[0], cost[i / 2] = v[1];
		else
			cold[i / 2] = v[0];
	}
	printf("first interception in a fresh process (both handshakes, leaf minted ahead), "
	       "median of %zu processes each:\n",
	       n);
	printf("  without warm-up:  %6.3f ms\n", median(cold, n) / 1e6);
	printf("  after warm-up:    %6.3f ms\n", median(warm, n) / 1e6);
	printf("  the warm-up:      %6.3f ms  (at the gateway's start)\n", median(cost, n) / 1e6);
	free(cold);
	free(warm);
	free(cost);
	return 0;
}

/* Plaintext from src into dst, as the gateway moves it. */
static void relay(struct al_tls_end *src, struct al_tls_end *dst, unsigned char *buf, size_t *len,
		  size_t *off)
{
	ssize_t n;

	for (;;) {
		if (*off < *len) {
			n = al_tls_end_write(dst, buf + *off, *len - *off);
			if (n < 0)
				return;
			*off += (size_t)n;
			continue;
		}
		n = al_tls_end_read(src, buf, 16384);
		if (n <= 0)
			return;
		*len = (size_t)n;
		*off = 0;
	}
}

/* TRANSFER bytes from the sandbox's client to the upstream through both
 * ends: the seconds it took, handshakes excluded. */
static double transfer(struct setup *s, const unsigned char *data)
{
	struct al_error err = {0};
	static unsigned char buf[16384], sink[65536];
	struct peer c, u;
	struct al_tls_end *se, *ce;
	size_t sent = 0, got = 0, len = 0, off = 0;
	double t0;

	peer_init(&c, s->client, false);
	SSL_set1_host(c.ssl, "api.bench");
	SSL_set_tlsext_host_name(c.ssl, "api.bench");
	peer_init(&u, s->upstream, true);
	if (al_tls_end_server(s->sctx, "api.bench", &se, &err) < 0 ||
	    al_tls_end_client(s->cctx, "api.bench", &ce, &err) < 0)
		die("ends", &err);
	handshake(&c, se);
	handshake(&u, ce);
	t0 = now_ns();
	while (got < TRANSFER) {
		/* The client writes what its peer can take in flight. */
		while (sent < TRANSFER && BIO_ctrl_pending(c.out) < AL_TLS_CIPHER_MAX) {
			int r = SSL_write(c.ssl, data + sent, 16384);
			if (r <= 0)
				die("client write", NULL);
			sent += (size_t)r;
		}
		wire(&c, se);
		relay(se, ce, buf, &len, &off);
		wire(&u, ce);
		for (int r; (r = SSL_read(u.ssl, sink, sizeof(sink))) > 0;)
			got += (size_t)r;
	}
	t0 = (now_ns() - t0) / 1e9;
	SSL_free(c.ssl);
	SSL_free(u.ssl);
	al_tls_end_free(se);
	al_tls_end_free(ce);
	return t0;
}

static void bench_throughput(struct setup *s, size_t rounds)
{
	unsigned char *data = xmalloc(TRANSFER);
	double *v = xcalloc(rounds, sizeof(double));

	for (size_t i = 0; i < TRANSFER; i++)
		data[i] = (unsigned char)(i * 131 + (i >> 9));
	for (size_t i = 0; i < rounds; i++)
		v[i] = TRANSFER / transfer(s, data) / 1e6;
	printf("MITM throughput:                %8.1f MB/s (median of %zu x 16 MiB, one way; "
	       "every byte is decrypted and encrypted twice)\n",
	       median(v, rounds), rounds);
	free(v);
	free(data);
}

int main(int argc, char **argv)
{
	size_t rounds = argc > 1 ? strtoul(argv[1], NULL, 10) : 200;
	struct setup s = {0};

	const char *clock = getenv("AL_BENCH_CLOCK");

	if (rounds < AL_TLS_LEAF_CACHE)
		rounds = AL_TLS_LEAF_CACHE;
	if (clock && strcmp(clock, "wall") == 0)
		bench_clock = CLOCK_MONOTONIC;
	if (argc > 2 && strcmp(argv[1], "--first") == 0)
		return bench_first(strtoul(argv[2], NULL, 10) ?: 1);
	make_setup(&s);
	printf("OpenSSL %s, %s time\n", OpenSSL_version(OPENSSL_VERSION_STRING),
	       bench_clock == CLOCK_MONOTONIC ? "wall" : "CPU");
	bench_mint(&s, rounds);
	bench_handshakes(&s, rounds);
	bench_throughput(&s, rounds / 10 < 5 ? 5 : rounds / 10);
	SSL_CTX_free(s.client);
	SSL_CTX_free(s.plain);
	SSL_CTX_free(s.upstream);
	al_tls_client_ctx_free(s.cctx);
	al_tls_server_ctx_free(s.sctx);
	al_tls_ca_free(s.ca);
	al_tls_ca_free(s.up_ca);
	return 0;
}
