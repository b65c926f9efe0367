/* The choose stage: which stream a connection gets, from its rule, the
 * run's secrets and budget, and its first bytes. A connection the gateway
 * must read request by request (request rules, a secret scoped to its
 * host, a priced host, any placeholder to watch for, interception) gets
 * the filtered stream (filter.c): plain HTTP as it is, TLS only when its
 * rule intercepts. Everything else is relayed as it is (relay.c), and
 * counts as one request for the budget.
 *
 * Also the TLS contexts of interception, made before the gateway confines
 * itself (they read the trust stores). */
#include "gateway/conn.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <time.h>

#include "core/log.h"
#include "core/util.h"
#include "cred/store.h"
#include "gateway/filter.h"
#include "gateway/socks.h"
#include "tls/ca.h"
#include "tls/end.h"
#include "tls/tls.h"

struct gw_tls {
	struct al_tls_server_ctx *server;
	struct al_tls_client_ctx *host_store; /* for rules without their own CA */
	struct rule_ctx {
		const char *file;
		struct al_tls_client_ctx *ctx;
	} * rules;
	size_t n_rules;
	char warm_host[AL_HOST_MAX + 1]; /* premint's first host: "" for none */
};

/* At most this many leaves are minted when the gateway starts. */
#define PREMINT_MAX 16

/* The leaf of each intercepting rule that names one host (not a wildcard,
 * a network or an IPv6 literal), minted now, before the sandbox's first
 * connection: a mint is an ECDSA key and a signature, 0.7-1.2 ms that the
 * first request to the host would otherwise wait for. The gateway starts
 * while the sandbox sets itself up, so this is off the way to exec. A
 * failure here is not one: the connection mints again and says why.
 * Writes the first host minted to first ("" for none). */
static void premint(struct al_gateway *gw, char first[AL_HOST_MAX + 1])
{
	const struct al_plan *p = gw->plan;
	size_t n = 0;

	first[0] = '\0';
	for (size_t i = 0; i < p->n_rule_opts && n < PREMINT_MAX; i++) {
		const struct al_rule_opts *o = p->rule_opts[i];
		char host[AL_HOST_MAX + 1];
		struct al_error err = {0};
		X509 *cert;
		EVP_PKEY *key;

		if (!o->intercept || !o->rule || o->rule[0] == '[' || strpbrk(o->rule, "*/"))
			continue;
		const char *colon = strchr(o->rule, ':');
		size_t len = colon ? (size_t)(colon - o->rule) : strlen(o->rule);
		if ((colon && strchr(colon + 1, ':')) || !len || len >= sizeof(host))
			continue; /* a bare IPv6 literal, or nothing to name */
		memcpy(host, o->rule, len);
		host[len] = '\0';
		if (al_tls_ca_leaf(gw->cred->ca, host, &cert, &key, &err) < 0)
			al_debug("gateway: %s: not minted ahead: %s", o->rule, err.msg);
		else if (!first[0])
			snprintf(first, AL_HOST_MAX + 1, "%s", host);
		n++;
	}
}

/* OpenSSL's first handshake in a process pays for set-up it does lazily
 * (the algorithms' fetches, the first ECDSA sign and verify, the key
 * exchange, each trust store's first look-up): 1.2 ms of CPU here, which
 * the first intercepted request would wait for. One handshake in memory
 * with a leaf minted ahead pays it (2 ms) once the gateway has said it
 * started, so that the sandbox's release does not wait for it: it runs
 * while the command starts, and a connection that comes meanwhile waits
 * in the listener's queue for what is left of it. A failure is not one:
 * the first connection pays instead. */
void gw_tls_warm(struct al_gateway *gw)
{
	struct gw_tls *t = gw->tls;
	const char *host = t ? t->warm_host : "";

	if (!host[0])
		return;
	struct al_tls_client_ctx **clients = xcalloc(t->n_rules + 1, sizeof(*clients));
	struct al_error err = {0};
	size_t n = 0;

	if (t->host_store)
		clients[n++] = t->host_store;
	for (size_t i = 0; i < t->n_rules; i++)
		clients[n++] = t->rules[i].ctx;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (al_tls_warm(t->server, host, clients, n, &err) < 0) {
		al_debug("gateway: TLS warm-up with %s: %s", host, err.msg);
	} else {
		clock_gettime(CLOCK_MONOTONIC, &t1);
		al_debug("gateway: TLS warmed up with %s's leaf in %.2f ms", host,
			 (double)(t1.tv_sec - t0.tv_sec) * 1e3 +
			     (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
	}
	free(clients);
}

int gw_tls_prepare(struct al_gateway *gw, struct al_error *err)
{
	const struct al_plan *p = gw->plan;
	struct gw_tls *t;
	int r;

	if (!gw->cred || !gw->cred->ca)
		return 0;
	t = gw->tls = xcalloc(1, sizeof(*t));
	t->rules = xcalloc(p->n_rule_opts + 1, sizeof(*t->rules));
	if ((r = al_tls_init(err)) < 0 ||
	    (r = al_tls_server_ctx_new(gw->cred->ca, &t->server, err)) < 0)
		return r;
	for (size_t i = 0; i < p->n_rule_opts; i++) {
		const struct al_rule_opts *o = p->rule_opts[i];
		bool have = false;
		if (!o->intercept)
			continue;
		if (!o->ca_file) {
			if (!t->host_store &&
			    (r = al_tls_client_ctx_new(NULL, &t->host_store, err)) < 0)
				return al_error_wrap(err, "the host's trust store");
			continue;
		}
		for (size_t k = 0; k < t->n_rules; k++)
			have |= strcmp(t->rules[k].file, o->ca_file) == 0;
		if (have)
			continue;
		t->rules[t->n_rules].file = o->ca_file;
		if ((r = al_tls_client_ctx_new(o->ca_file, &t->rules[t->n_rules].ctx, err)) < 0)
			return al_error_wrap(err, "network.allow %s: ca", o->rule);
		t->n_rules++;
	}
	premint(gw, t->warm_host);
	return 0;
}

void gw_tls_free(struct al_gateway *gw)
{
	struct gw_tls *t = gw->tls;

	if (!t)
		return;
	al_tls_server_ctx_free(t->server);
	al_tls_client_ctx_free(t->host_store);
	for (size_t i = 0; i < t->n_rules; i++)
		al_tls_client_ctx_free(t->rules[i].ctx);
	free(t->rules);
	free(t);
	gw->tls = NULL;
}

int gw_tls_ends(struct conn *c, struct al_tls_end **srv, struct al_tls_end **cli,
		struct al_error *err)
{
	struct gw_tls *t = c->gw->tls;
	struct al_tls_client_ctx *ctx = t ? t->host_store : NULL;
	int r;

	if (!t)
		return al_error_set(err, EINVAL, "no interception in this run");
	for (size_t i = 0; c->opts && c->opts->ca_file && i < t->n_rules; i++)
		if (strcmp(t->rules[i].file, c->opts->ca_file) == 0)
			ctx = t->rules[i].ctx;
	if (!ctx)
		return al_error_set(err, EINVAL, "no trust store for %s", c->name);
	if ((r = al_tls_end_server(t->server, c->name, srv, err)) < 0)
		return r;
	return al_tls_end_client(ctx, c->name, cli, err);
}

/* What makes a connection one to read request by request. */
static bool wants_filter(const struct conn *c)
{
	const struct al_gateway *gw = c->gw;
	const struct al_cred *cr = gw->cred;

	if (al_rule_opts_has_requests(c->opts) || (c->opts && c->opts->intercept) || gw->n_needles)
		return true;
	if (gw->plan->budget.set && al_budget_request_price(&gw->plan->budget, c->name))
		return true;
	for (size_t i = 0; cr && i < cr->n; i++)
		if (gw_secret_scoped(&cr->v[i], c))
			return true;
	return false;
}

static bool looks_like_request(const char *buf, size_t len)
{
	struct al_http_request req;
	/* Servers skip empty lines before a request (RFC 9112 2.2): so does
	 * this look, and the filter refuses them (400). */
	if (len && (buf[0] == '\r' || buf[0] == '\n'))
		return true;
	int r = al_http_parse_request(buf, len, &req, NULL);
	/* A method, a space and a target: enough to be read as HTTP. */
	return r > 0 || (r == -EAGAIN && len > 0 && memchr(buf, ' ', len));
}

/* An opaque stream: relayed as it is, one request for the budget; in
 * plaintext, searched for placeholders on the way out. */
static enum gw_step opaque(struct conn *c)
{
	const struct buf *b = &c->up.b;
	if (c->gw->needle_set && !(b->len && (uint8_t)b->data[b->off] == 0x16)) {
		c->scanning = true;
		c->stream = &gw_stream_copy; /* splice would pass bytes unseen */
		al_needle_scan_init(&c->scan, c->gw->needle_set, 0);
		int k = al_needle_scan_feed(&c->scan, b->data + b->off, b->len);
		if (k >= 0)
			return gw_deny_misuse(c, (size_t)k, "stream");
	}
	if (!gw_budget_charge(c->gw, c->name, 1, 0))
		return gw_deny(c, GW_ANSWER_DEFAULT, 402, AL_SOCKS_REP_NOT_ALLOWED,
			       "the run's spend budget is spent");
	return GW_NEXT;
}

static enum gw_step start_filter(struct conn *c, bool tls, bool proxy_form, const char *first,
				 size_t len)
{
	struct al_error err = {0};

	if (gw_filter_new(c, tls, proxy_form, &err) < 0)
		return gw_deny(c, GW_ANSWER_DEFAULT, 500, AL_SOCKS_REP_GENERAL_FAILURE, "%s",
			       err.msg);
	/* Requests and answers go as they are made (a head written in two
	 * pieces would otherwise wait for a delayed ACK). */
	int one = 1;
	setsockopt(c->client.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(c->upstream.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* The proxy's head is in c->head: move it where the early bytes go. */
	if (first == c->head) {
		c->up.b.off = 0;
		c->up.b.len = 0;
		gw_buf_put(&c->up.b, first, len);
	}
	c->stream = &gw_stream_filter;
	return GW_NEXT;
}

/* The client's first bytes, for a tunnel whose stream depends on them. */
static int first_bytes(struct conn *c)
{
	struct buf *b = &c->up.b;

	if (b->len || c->client.eof)
		return 1;
	ssize_t n = recv(c->client.fd, b->data + b->off, AL_GW_BUF_SIZE - b->off, MSG_DONTWAIT);
	if (n > 0) {
		b->len += (size_t)n;
		return 1;
	}
	if (n == 0) {
		c->client.eof = true;
		return 1;
	}
	return errno == EAGAIN || errno == EINTR ? 0 : -1;
}

enum gw_step gw_stage_choose(struct conn *c, struct side *s, uint32_t events)
{
	struct buf *b = &c->up.b;

	if (c->path == GW_PATH_DNS_TCP)
		return GW_NEXT;
	bool checked = al_rule_opts_has_requests(c->opts) || (c->opts && c->opts->intercept);
	/* An intercepting rule promises TLS verified upstream: plain HTTP to
	 * its host would carry its secrets in the clear, unverified. */
	if (c->opts && c->opts->intercept && c->path == GW_PATH_HTTP && c->have_request)
		return gw_deny(c, GW_ANSWER_DEFAULT, 403, 0,
			       "the rule %s intercepts TLS: plain HTTP to it is refused", c->rule);
	if (c->path == GW_PATH_HTTP && c->have_request) {
		if (wants_filter(c))
			return start_filter(c, false, true, c->head, c->head_len);
		return gw_http_forward(c) == GW_CLOSE ? GW_CLOSE : opaque(c);
	}
	if (!wants_filter(c))
		return opaque(c);
	/* A server that speaks first: not TLS or HTTP from the client. A rule
	 * that checks requests does not let it pass unread. */
	if (s == &c->upstream && (events & EPOLLIN) && !b->len)
		return checked ? gw_deny(c, GW_ANSWER_NONE, 0, 0,
					 "the rule %s checks requests, and the server spoke "
					 "first",
					 c->rule)
			       : opaque(c);
	int r = first_bytes(c);
	if (r < 0)
		return GW_CLOSE;
	if (r == 0) {
		gw_side_set(&c->client, EPOLLIN);
		gw_side_set(&c->upstream, EPOLLIN);
		return GW_WAIT;
	}
	const char *p = b->data + b->off;
	if (b->len && (uint8_t)p[0] == 0x16) {
		if (c->opts && c->opts->intercept)
			return start_filter(c, true, false, p, b->len);
		if (al_rule_opts_has_requests(c->opts))
			return gw_deny(c, GW_ANSWER_NONE, 0, 0,
				       "the rule %s checks requests, which in TLS it can only "
				       "see with \"tls\": \"intercept\"",
				       c->rule);
		return opaque(c);
	}
	if (c->opts && c->opts->intercept)
		return gw_deny(c, GW_ANSWER_NONE, 0, 0,
			       "the rule %s intercepts TLS, and this stream is not TLS", c->rule);
	if (b->len && looks_like_request(p, b->len))
		return start_filter(c, false, false, p, b->len);
	if (checked)
		return gw_deny(c, GW_ANSWER_NONE, 0, 0,
			       "the rule %s checks requests, and this stream is not HTTP", c->rule);
	return opaque(c);
}
