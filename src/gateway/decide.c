/* The decision stages: the operator's never rules, the allowlist, the
 * private-address guard and the limits for where the client asked to go
 * (decide), and the check that the stream's first bytes name the same host
 * (inspect). */
#include "gateway/conn.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "core/util.h"
#include "gateway/socks.h"
#include "gateway/tls.h"

static const struct in6_addr *mapped_addr(const struct al_plan *p, const char *name)
{
	for (size_t i = 0; i < p->n_hosts; i++)
		if (strcmp(p->hosts[i].name, name) == 0)
			return &p->hosts[i].addr;
	return NULL;
}

static struct host_use *host_use(struct al_gateway *gw, const char *name)
{
	struct host_use *u;

	for (u = gw->hosts; u; u = u->next)
		if (strcmp(u->name, name) == 0)
			return u;
	u = xcalloc(1, sizeof(*u));
	snprintf(u->name, sizeof(u->name), "%s", name);
	u->next = gw->hosts;
	gw->hosts = u;
	return u;
}

/* Which network limit a new connection to u's host would break, or NULL. */
static const char *limit_for_new(const struct al_gateway *gw, const struct host_use *u)
{
	const struct al_net_limits *run = &gw->plan->net_run, *host = &gw->plan->net_host;

	if (run->connections && gw->active >= run->connections)
		return "network.limits.connections";
	if (run->requests && gw->requests >= run->requests)
		return "network.limits.requests";
	if (run->bytes_out && gw->st.bytes_up >= run->bytes_out)
		return "network.limits.bytes_out";
	if (host->connections && u->active >= host->connections)
		return "network.per_host.connections";
	if (host->requests && u->requests >= host->requests)
		return "network.per_host.requests";
	if (host->bytes_out && u->bytes_out >= host->bytes_out)
		return "network.per_host.bytes_out";
	return NULL;
}

void gw_audit_limit(struct conn *c, const char *limit)
{
	al_audit_emit(
	    c->gw->audit, "limit.hit",
	    json_pack("{s:s, s:s, s:i}", "limit", limit, "name", c->name, "port", c->port));
}

const struct al_allow_rule *gw_never_addr(const struct al_gateway *gw, const struct in6_addr *addr,
					  uint16_t port)
{
	const struct al_allow_rule *r = NULL;

	if (!gw->plan->never || !al_allow_match_never(gw->plan->never, addr, port, &r))
		return NULL;
	return r;
}

enum gw_step gw_deny_never(struct conn *c, const char *what, const struct al_allow_rule *rule)
{
	return gw_deny(c, GW_ANSWER_DEFAULT, 403, AL_SOCKS_REP_NOT_ALLOWED,
		       "the operator policy never allows %s (rule %s)", what,
		       al_allow_rule_text(rule));
}

enum gw_step gw_stage_decide(struct conn *c)
{
	const struct al_plan *p = c->gw->plan;
	const struct al_host *host = &c->target;
	const struct al_allow_rule *rule = NULL;
	const struct in6_addr *mapped = NULL;
	bool ok;

	/* An IPv4 address written as [::ffff:a.b.c.d] is that address, and
	 * is named so to the decider, its cache and the audit (the rules
	 * compare addresses, and the connection goes to the IPv4 one). */
	if (c->target.kind == AL_HOST_IPV6 && al_addr_is_ipv4(&c->target.addr)) {
		c->target.kind = AL_HOST_IPV4;
		al_addr_format(&c->target.addr, c->target.text, sizeof(c->target.text));
	}
	snprintf(c->name, sizeof(c->name), "%s", host->text);
	/* A warm pool's sandbox not claimed yet has no egress at all. */
	if (c->gw->held)
		return gw_deny(c, GW_ANSWER_DEFAULT, 403, AL_SOCKS_REP_NOT_ALLOWED, "%s",
			       AL_GATEWAY_HELD);
	ssize_t needle = gw_needle_in_name(c->gw, c->name);
	if (needle >= 0)
		return gw_deny_misuse(c, (size_t)needle, "host name");
	/* The operator's rules win over the task's: checked first, so the
	 * refusal names them. */
	if (host->kind == AL_HOST_NAME && p->never &&
	    al_allow_match_name(p->never, host->text, c->port, &rule))
		return gw_deny_never(c, host->text, rule);
	if (host->kind != AL_HOST_NAME && (rule = gw_never_addr(c->gw, &host->addr, c->port)))
		return gw_deny_never(c, host->text, rule);
	if (host->kind == AL_HOST_NAME)
		ok = al_allow_match_name(p->allow, host->text, c->port, &rule);
	else
		ok = al_allow_match_addr(p->allow, &host->addr, c->port, &rule);
	if (!ok)
		return gw_deny(c, GW_ANSWER_DEFAULT, 403, AL_SOCKS_REP_NOT_ALLOWED,
			       "no rule allows %s:%u", host->text, c->port);
	enum al_addr_class cls = al_addr_class(&host->addr);
	if (host->kind != AL_HOST_NAME && cls != AL_ADDR_PUBLIC &&
	    !al_allow_rule_covers_class(rule, &host->addr))
		/* No rule may name the host's loopback (policy.h): a name
		 * mapped to it is the way there. */
		return gw_deny(c, GW_ANSWER_DEFAULT, 403, AL_SOCKS_REP_NOT_ALLOWED,
			       "%s is %s space, which the rule %s only contains; %s", host->text,
			       al_addr_class_name(cls), al_allow_rule_text(rule),
			       cls == AL_ADDR_LOOPBACK || cls == AL_ADDR_UNSPECIFIED
				   ? "map a name to it (--map-host)"
				   : "name it in a rule");
	c->rule = al_allow_rule_text(rule);
	c->opts = gw_rule_opts(c->gw, c->rule);
	/* network.hosts is trusted as given, but not past the operator. */
	if (host->kind == AL_HOST_NAME && (mapped = mapped_addr(p, c->name))) {
		const struct al_allow_rule *never = gw_never_addr(c->gw, mapped, c->port);
		if (never) {
			char text[INET6_ADDRSTRLEN];
			al_addr_format(mapped, text, sizeof(text));
			al_addr_format(mapped, c->addr, sizeof(c->addr));
			return gw_deny_never(c, text, never);
		}
	}
	struct host_use *u = host_use(c->gw, c->name);
	const char *limit = limit_for_new(c->gw, u);
	if (limit) {
		gw_audit_limit(c, limit);
		return gw_deny(c, GW_ANSWER_DEFAULT, 403, AL_SOCKS_REP_NOT_ALLOWED, "limit: %s",
			       limit);
	}
	c->use = u;
	u->active++;
	u->requests++;
	c->gw->requests++;
	c->gw->active++;
	if (host->kind != AL_HOST_NAME) {
		c->dest = host->addr;
		c->have_dest = true;
	} else if (mapped) {
		c->dest = *mapped;
		c->have_dest = true;
	}
	return GW_NEXT;
}

/* Whether the first line of buf is an HTTP request line (ends in a
 * version), whatever else is wrong with it. */
static bool looks_like_http(const char *buf, size_t len)
{
	const char *nl = memchr(buf, '\n', len);
	return memmem(buf, nl ? (size_t)(nl - buf) : len, " HTTP/", 6) != NULL;
}

int gw_name_in_stream(const char *buf, size_t len, struct al_host *ret)
{
	static const char h2_preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
	struct al_http_request req;
	int r;

	if (len == 0)
		return -EAGAIN;
	if ((uint8_t)buf[0] == 0x16) { /* a TLS handshake record */
		r = al_tls_parse_sni((const uint8_t *)buf, len, ret, NULL);
		return r == -EAGAIN || r == -ENOENT ? r : r < 0 ? -EPROTO : 0;
	}
	if (len >= sizeof(h2_preface) - 1 && memcmp(buf, h2_preface, sizeof(h2_preface) - 1) == 0)
		return -ENOENT;
	/* Empty lines first, which servers skip (RFC 9112 2.2): HTTP whose
	 * host this cannot read. */
	if (buf[0] == '\r' || buf[0] == '\n')
		return -EPROTO;
	r = al_http_parse_request(buf, len, &req, NULL);
	if (r == -EAGAIN)
		return len < AL_HTTP_HEAD_MAX ? -EAGAIN : -EPROTO;
	if (r < 0)
		return looks_like_http(buf, len) ? -EPROTO : -ENOENT;
	if (req.host.kind == AL_HOST_NONE)
		return -ENOENT;
	*ret = req.host;
	return 0;
}

/* Before the first byte goes upstream through a CONNECT or SOCKS tunnel or
 * a transparent connection to a name: if the client names a server (SNI,
 * Host), it must be the one decided on, and bytes that start like TLS or
 * HTTP but cannot be read do not pass. Blocks domain fronting and a
 * Host-header switch behind an allowed address. Meanwhile the client's
 * bytes are held and the server's go through (it may speak first). */
enum gw_step gw_stage_inspect(struct conn *c, struct side *s, uint32_t events)
{
	uint32_t ce = s == &c->client ? events : 0;
	uint32_t ue = s == &c->upstream ? events : s ? 0 : EPOLLOUT;
	struct buf *b = &c->up.b;
	struct al_host h;
	int r;

	if (!c->check_first)
		return GW_NEXT;
	if ((ce & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !c->client.eof) {
		ssize_t n = recv(c->client.fd, b->data + b->off + b->len,
				 AL_GW_BUF_SIZE - b->off - b->len, MSG_DONTWAIT);
		if (n > 0)
			b->len += (size_t)n;
		else if (n == 0)
			c->client.eof = true;
		ce &= ~(uint32_t)(EPOLLIN | EPOLLHUP | EPOLLERR);
	}
	r = gw_name_in_stream(b->data + b->off, b->len, &h);
	if (r == -EAGAIN && b->off + b->len < AL_GW_BUF_SIZE && !c->client.eof) {
		if (ce & EPOLLOUT || ue)
			return gw_relay_move(c, ce, ue, true);
		gw_side_set(&c->client, EPOLLIN | (gw_flow_waiting(&c->down) ? EPOLLOUT : 0));
		gw_side_set(&c->upstream,
			    !c->upstream.eof && gw_flow_has_room(&c->down) ? EPOLLIN : 0);
		return GW_WAIT;
	}
	c->check_first = false;
	if (r == -EAGAIN || r == -EPROTO)
		return gw_deny(c, GW_ANSWER_NONE, 0, 0,
			       "the stream starts like TLS or HTTP but its host cannot be checked");
	if (r == 0 && h.kind == AL_HOST_NAME && strcmp(h.text, c->name) != 0)
		return gw_deny(c, GW_ANSWER_NONE, 0, 0, "the stream names %s, not %s", h.text,
			       c->name);
	return GW_NEXT;
}
