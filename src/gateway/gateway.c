/* The egress gateway's event-driven core: accept, parse the request (HTTP
 * or SOCKS5), decide, connect from the host side, relay. The parsers it
 * uses (http.c, socks.c) and the allowlist (allow.c) are pure and fuzzed;
 * this file holds the I/O and the decisions. */
#include "gateway/gateway.h"

#include <arpa/inet.h>
#include <ares.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/netfilter_ipv4.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <sched.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/sys.h"
#include "core/util.h"
#include "gateway/dns.h"
#include "gateway/http.h"
#include "gateway/socks.h"
#include "gateway/tls.h"

#define BUF_SIZE  65536
#define MAX_CONNS 256

enum handle_kind {
	H_LISTEN_HTTP,
	H_LISTEN_SOCKS,
	H_DNS_UDP,
	H_LISTEN_DNS_TCP,
	H_LISTEN_TRANSPARENT,
	H_ARES_SOCK,
	H_ARES_TIMER,
	H_CLIENT,
	H_UPSTREAM
};

/* First member of everything registered in epoll. */
struct handle {
	enum handle_kind kind;
};

struct listener {
	struct handle h;
	int fd;
};

/* Per-host use, for network.per_host limits. */
/* Per-host counters. Each is its own allocation: connections keep a
 * pointer to theirs while others are added. */
struct host_use {
	struct host_use *next;
	char name[AL_HOST_MAX + 1];
	uint64_t active, requests, bytes_out;
};

enum conn_state {
	C_HTTP_HEAD,
	C_SOCKS_GREETING,
	C_SOCKS_REQUEST,
	C_DNS_TCP,
	C_PEEK,	     /* transparent, to an address we did not hand out: read the name */
	C_RESOLVING, /* waiting for the asynchronous resolver */
	C_CONNECTING,
	C_RELAY
};

struct side {
	struct handle h;
	struct conn *c;
	int fd;
	uint32_t events; /* what is registered */
	bool registered; /* in the epoll set (events may be 0) */
	bool eof;	 /* read side done */
	bool shut;	 /* write side shut down */
};

struct buf {
	size_t off, len;
	char data[BUF_SIZE];
};

/* One direction of a connection. Bytes pass through user space (b) while
 * the transfer is small, or must be read (heads, replies, the first bytes
 * to check); once a direction has moved more than BULK bytes it switches
 * to splice() through a pipe, and the payload is no longer copied. */
struct flow {
	struct buf b;
	int pipe[2]; /* -1 until bulk */
	size_t in_pipe, pipe_cap;
	bool pipe_full; /* out of pipe buffers (each splice takes one) before pipe_cap bytes */
	uint64_t bytes; /* delivered to the other side */
};

struct conn {
	struct al_gateway *gw;
	struct conn *prev, *next;
	bool dead;	/* closed; freed by al_gateway_collect() */
	bool abandoned; /* closed while resolving: the resolver's callback frees it */
	struct conn *next_dead;
	enum conn_state state;
	bool socks;
	bool transparent;
	struct side client, upstream;
	char head[AL_HTTP_HEAD_MAX];
	size_t head_len;
	struct flow up, down; /* client → upstream, upstream → client */
	char name[AL_HOST_MAX + 1];
	char addr[INET6_ADDRSTRLEN];
	uint16_t port;
	const char *rule;
	bool is_connect;      /* HTTP CONNECT: answer 200 once connected */
	bool check_first;     /* the first client bytes must name c->name (SNI or Host) */
	struct host_use *use; /* set once counted against the limits */
	bool up_limited;      /* absolute-URI request: only its body may follow the head */
	uint64_t up_left;     /* body bytes still allowed upstream */
	struct in6_addr orig; /* transparent: where the client was going */
};

/* A socket of the resolver's, in our epoll set. */
struct ares_sock {
	struct handle h;
	int fd;
	bool dead; /* closed by c-ares; freed after the epoll batch */
	struct ares_sock *next;
};

struct al_gateway {
	const struct al_plan *plan;
	ares_channel ares; /* created on the first lookup */
	struct ares_sock *ares_socks;
	struct ares_sock *dead_socks; /* closed this epoll batch, freed after it */
	bool ares_failed;	      /* the resolver could not start: lookups fail */
	struct handle ares_timer_h;
	int ares_timerfd;
	struct host_use *hosts;
	uint64_t active;   /* allowed connections open now */
	uint64_t requests; /* connections counted against network.limits.requests */
	struct al_audit *audit;
	int epfd;
	struct listener listeners[AL_GATEWAY_N_LISTENERS];
	char **fake_names; /* index i answers as 198.18.0.0 + i + 1 */
	size_t n_fake, cap_fake;
	uint32_t *fake_slots; /* open addressing by name: index + 1, 0 = empty */
	size_t n_slots;	      /* a power of two, at least twice n_fake */
	struct conn *conns;
	struct conn *dead; /* closed this epoll batch, freed after it */
	size_t n_conns;
	struct al_gateway_stats st;
};

struct al_gateway *al_gateway_new(const struct al_plan *plan, struct al_audit *audit, int epfd)
{
	struct al_gateway *gw = xcalloc(1, sizeof(*gw));

	gw->plan = plan;
	gw->audit = audit;
	gw->epfd = epfd;
	gw->ares_timerfd = -1;
	gw->listeners[AL_GATEWAY_HTTP] = (struct listener){{H_LISTEN_HTTP}, -1};
	gw->listeners[AL_GATEWAY_SOCKS] = (struct listener){{H_LISTEN_SOCKS}, -1};
	gw->listeners[AL_GATEWAY_DNS_UDP] = (struct listener){{H_DNS_UDP}, -1};
	gw->listeners[AL_GATEWAY_DNS_TCP] = (struct listener){{H_LISTEN_DNS_TCP}, -1};
	gw->listeners[AL_GATEWAY_TRANSPARENT] = (struct listener){{H_LISTEN_TRANSPARENT}, -1};
	return gw;
}

int al_gateway_listen(struct al_gateway *gw, enum al_gateway_listener kind, int fd,
		      struct al_error *err)
{
	if ((unsigned)kind >= AL_GATEWAY_N_LISTENERS) {
		close(fd);
		return al_error_set(err, EINVAL, "gateway: unknown listener kind %d", (int)kind);
	}
	struct listener *l = &gw->listeners[kind];
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &l->h};

	if (l->fd >= 0) {
		close(fd);
		return al_error_set(err, EEXIST, "gateway: a second listener of one kind");
	}
	if (epoll_ctl(gw->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		int e = errno;
		close(fd);
		return al_error_setsys(err, e, "gateway: epoll_ctl");
	}
	l->fd = fd;
	return 0;
}

static const char *path_name(const struct conn *c)
{
	return c->transparent ? "transparent" : c->socks ? "socks" : "http";
}

static void audit_decision(struct conn *c, bool allowed, const char *reason)
{
	json_t *o = json_pack("{s:s, s:s?, s:i, s:s, s:s, s:s?}", "name", c->name, "address",
			      c->addr[0] ? c->addr : NULL, "port", c->port, "path", path_name(c),
			      "decision", allowed ? "allow" : "deny", "rule", c->rule);
	if (reason)
		json_object_set_new(o, "reason", json_string(reason));
	if (allowed) {
		json_object_set_new(o, "bytes_up", json_integer((json_int_t)c->up.bytes));
		json_object_set_new(o, "bytes_down", json_integer((json_int_t)c->down.bytes));
	}
	al_audit_emit(c->gw->audit, "net.connect", o);
}

/* Register what side s waits for. Nothing to wait for means out of the
 * epoll set, not in it with no events: the kernel reports EPOLLHUP and
 * EPOLLERR whatever is asked, and an unread one would spin the loop. */
static void set_events(struct conn *c, struct side *s, uint32_t want)
{
	struct epoll_event ev = {.events = want, .data.ptr = &s->h};

	if (s->fd < 0 || (s->registered && want == s->events) || (!s->registered && !want))
		return;
	if (!want) {
		epoll_ctl(c->gw->epfd, EPOLL_CTL_DEL, s->fd, NULL);
		s->registered = false;
		s->events = 0;
		return;
	}
	if (epoll_ctl(c->gw->epfd, s->registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, s->fd, &ev) < 0)
		al_debug("gateway: ignoring epoll_ctl failure: %s", strerror(errno));
	s->registered = true;
	s->events = want;
}

static void close_side(struct conn *c, struct side *s)
{
	if (s->fd < 0)
		return;
	if (s->registered)
		epoll_ctl(c->gw->epfd, EPOLL_CTL_DEL, s->fd, NULL);
	close(s->fd);
	s->fd = -1;
	s->events = 0;
	s->registered = false;
}

static void conn_free(struct conn *c, const char *deny_reason)
{
	struct al_gateway *gw = c->gw;

	if (c->state == C_RELAY || c->state == C_CONNECTING)
		audit_decision(c, true, NULL);
	else if (deny_reason)
		audit_decision(c, false, deny_reason);
	if (c->use) {
		c->use->active--;
		gw->active--;
	}
	close_side(c, &c->client);
	close_side(c, &c->upstream);
	for (size_t i = 0; i < 2; i++) {
		al_closep(&c->up.pipe[i]);
		al_closep(&c->down.pipe[i]);
	}
	if (c->prev)
		c->prev->next = c->next;
	else
		gw->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	gw->n_conns--;
	if (c->state == C_RESOLVING) {
		c->abandoned = true; /* the resolver still holds c */
		return;
	}
	/* Another event of this epoll batch may still point at c. */
	c->dead = true;
	c->next_dead = gw->dead;
	gw->dead = c;
}

void al_gateway_collect(struct al_gateway *gw)
{
	while (gw && gw->dead) {
		struct conn *c = gw->dead;
		gw->dead = c->next_dead;
		free(c);
	}
	while (gw && gw->dead_socks) {
		struct ares_sock *a = gw->dead_socks;
		gw->dead_socks = a->next;
		free(a);
	}
}

/* Best effort: the sockets are non-blocking and these replies are small. */
static void reply(struct conn *c, const void *buf, size_t len)
{
	if (send(c->client.fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		al_debug("gateway: reply not sent: %s", strerror(errno));
}

static void deny_http(struct conn *c, int status, const char *why)
{
	char out[1024];
	int n = status == 403 ? al_http_format_denied(why, out, sizeof(out))
			      : al_http_format_response(status, why, out, sizeof(out));
	if (n > 0)
		reply(c, out, (size_t)n);
}

static void deny_socks(struct conn *c, uint8_t code)
{
	uint8_t out[AL_SOCKS_REPLY_MAX];
	struct in6_addr any = IN6ADDR_ANY_INIT;
	int n = al_socks_format_reply(code, &any, 0, out, sizeof(out));
	if (n > 0)
		reply(c, out, (size_t)n);
}

static void refuse(struct conn *c, int http_status, uint8_t socks_code, const char *why)
{
	/* A transparent connection gets no message: the client spoke to
	 * what it thought was the server. Closing is the answer. */
	if (c->socks) {
		deny_socks(c, socks_code);
	} else if (!c->transparent) {
		deny_http(c, http_status, why);
	} else {
		/* Reset rather than close: the client sees "connection reset",
		 * not a server that hung up after accepting. */
		struct linger rst = {.l_onoff = 1, .l_linger = 0};
		setsockopt(c->client.fd, SOL_SOCKET, SO_LINGER, &rst, sizeof(rst));
	}
	c->gw->st.denied++;
	conn_free(c, why);
}

static const struct in6_addr *mapped_addr(const struct al_plan *p, const char *name)
{
	for (size_t i = 0; i < p->n_hosts; i++)
		if (strcmp(p->hosts[i].name, name) == 0)
			return &p->hosts[i].addr;
	return NULL;
}

/* Of the addresses a name resolved to, the first that is public or that
 * the allowlist names literally: no rebinding to loopback, private or
 * metadata space. */
static bool pick_address(const struct conn *c, const struct ares_addrinfo_node *n,
			 struct in6_addr *ret)
{
	for (; n; n = n->ai_next) {
		struct in6_addr addr = IN6ADDR_ANY_INIT;
		if (n->ai_family == AF_INET) {
			const struct sockaddr_in *sin = (const void *)n->ai_addr;
			al_addr_from_ipv4((const uint8_t *)&sin->sin_addr, &addr);
		} else if (n->ai_family == AF_INET6) {
			addr = ((const struct sockaddr_in6 *)(const void *)n->ai_addr)->sin6_addr;
		} else {
			continue;
		}
		const struct al_allow_rule *rule = NULL;
		if (al_addr_class(&addr) == AL_ADDR_PUBLIC ||
		    (al_allow_match_addr(c->gw->plan->allow, &addr, c->port, &rule) &&
		     al_allow_rule_covers_class(rule, &addr))) {
			*ret = addr;
			return true;
		}
	}
	return false;
}

static void ares_rearm(struct al_gateway *gw)
{
	struct timeval tv, *t = ares_timeout(gw->ares, NULL, &tv);
	struct itimerspec its = {0};

	if (t) {
		its.it_value.tv_sec = t->tv_sec;
		its.it_value.tv_nsec = t->tv_usec * 1000L;
		if (!its.it_value.tv_sec && !its.it_value.tv_nsec)
			its.it_value.tv_nsec = 1;
	}
	timerfd_settime(gw->ares_timerfd, 0, &its, NULL);
}

/* The resolver's socket state callback: keep its sockets in our epoll set. */
static void ares_sock_state(void *data, ares_socket_t fd, int readable, int writable)
{
	struct al_gateway *gw = data;
	struct ares_sock **pp = &gw->ares_socks, *a;

	while (*pp && (*pp)->fd != fd)
		pp = &(*pp)->next;
	a = *pp;
	if (!readable && !writable) {
		if (a) {
			/* Another event of this epoll batch may still point at a. */
			epoll_ctl(gw->epfd, EPOLL_CTL_DEL, fd, NULL);
			*pp = a->next;
			a->dead = true;
			a->next = gw->dead_socks;
			gw->dead_socks = a;
		}
		return;
	}
	struct epoll_event ev = {.events = (readable ? EPOLLIN : 0) | (writable ? EPOLLOUT : 0)};
	if (!a) {
		a = xcalloc(1, sizeof(*a));
		a->h.kind = H_ARES_SOCK;
		a->fd = fd;
		a->next = gw->ares_socks;
		gw->ares_socks = a;
		ev.data.ptr = &a->h;
		epoll_ctl(gw->epfd, EPOLL_CTL_ADD, fd, &ev);
	} else {
		ev.data.ptr = &a->h;
		epoll_ctl(gw->epfd, EPOLL_CTL_MOD, fd, &ev);
	}
}

/* Start the resolver once. A failure is final (no retry per lookup):
 * every lookup after it is refused. */
static int ares_start(struct al_gateway *gw, struct al_error *err)
{
	static bool library_ready;
	struct ares_options opts = {.sock_state_cb = ares_sock_state, .sock_state_cb_data = gw};
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &gw->ares_timer_h};
	int r;

	if (gw->ares)
		return 0;
	if (gw->ares_failed)
		return al_error_set(err, EIO, "the resolver could not start");
	gw->ares_failed = true; /* until it has */
	if (!library_ready && ares_library_init(ARES_LIB_INIT_ALL) != ARES_SUCCESS)
		return al_error_set(err, ENOMEM, "gateway: c-ares library init failed");
	library_ready = true;
	gw->ares_timer_h.kind = H_ARES_TIMER;
	gw->ares_timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (gw->ares_timerfd < 0 || epoll_ctl(gw->epfd, EPOLL_CTL_ADD, gw->ares_timerfd, &ev) < 0)
		return al_error_setsys(err, errno, "gateway: resolver timer");
	if ((r = ares_init_options(&gw->ares, &opts, ARES_OPT_SOCK_STATE_CB)) != ARES_SUCCESS) {
		gw->ares = NULL;
		return al_error_set(err, EIO, "gateway: the resolver could not start: %s",
				    ares_strerror(r));
	}
	/* network.resolver replaces the host's name servers. Never fall back
	 * to the host's servers when it cannot be used. */
	if (gw->plan->resolver &&
	    (r = ares_set_servers_ports_csv(gw->ares, gw->plan->resolver)) != ARES_SUCCESS) {
		ares_destroy(gw->ares);
		gw->ares = NULL;
		return al_error_set(err, EINVAL, "network.resolver \"%s\" cannot be used: %s",
				    gw->plan->resolver, ares_strerror(r));
	}
	gw->ares_failed = false;
	return 0;
}

static void connect_allowed(struct conn *c, const struct in6_addr *addr);
static void on_connected(struct conn *c);
static void relay(struct conn *c, struct side *s, uint32_t events);

static void on_resolved(void *arg, int status, int timeouts, struct ares_addrinfo *res)
{
	struct conn *c = arg;
	struct in6_addr addr;
	bool ok = status == ARES_SUCCESS && res && pick_address(c, res->nodes, &addr);

	(void)timeouts;
	if (res)
		ares_freeaddrinfo(res);
	if (c->abandoned) {
		free(c);
		return;
	}
	c->state = c->socks ? C_SOCKS_REQUEST : C_HTTP_HEAD; /* audited as a denial if refused */
	if (!ok) {
		refuse(c, 403, AL_SOCKS_REP_NOT_ALLOWED,
		       status != ARES_SUCCESS ? "the name does not resolve"
					      : "the name resolves only to loopback, private, "
						"link-local or other non-public addresses");
		return;
	}
	connect_allowed(c, &addr);
}

/* Resolve an allowed name without blocking the loop. The callback may run
 * before this returns (answers from the host's /etc/hosts): the caller
 * must not touch c afterwards. */
int al_gateway_prepare(struct al_gateway *gw, struct al_error *err)
{
	struct al_error e = {0};
	int r = ares_start(gw, &e);

	if (r < 0 && gw->plan->resolver) /* asked for and unusable: refuse */
		return al_error_set(err, -r, "%s", e.msg);
	if (r < 0) /* the host's own configuration: its names then fail */
		al_warn("%s; names that need resolving will be refused", e.msg);
	return 0;
}

static void resolve_async(struct conn *c)
{
	struct ares_addrinfo_hints hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};

	if (ares_start(c->gw, NULL) < 0) {
		refuse(c, 502, AL_SOCKS_REP_GENERAL_FAILURE, "the resolver could not start");
		return;
	}
	c->state = C_RESOLVING;
	set_events(c, &c->client, 0);
	ares_getaddrinfo(c->gw->ares, c->name, NULL, &hints, on_resolved, c);
	ares_rearm(c->gw);
}

/* Connect to addr: 1 when done (or failed) at once, 0 while in
 * progress (EPOLLOUT tells), or -errno. */
static int start_connect(struct conn *c, const struct in6_addr *addr)
{
	struct sockaddr_storage ss = {0};
	socklen_t len;
	int fd;

	if (IN6_IS_ADDR_V4MAPPED(addr)) {
		struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
		sin->sin_family = AF_INET;
		sin->sin_port = htons(c->port);
		memcpy(&sin->sin_addr, &addr->s6_addr[12], 4);
		len = sizeof(*sin);
	} else {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(c->port);
		sin6->sin6_addr = *addr;
		len = sizeof(*sin6);
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&ss, len) < 0 && errno != EINPROGRESS) {
		int e = errno;
		close(fd);
		return -e;
	}
	c->upstream.fd = fd;
	c->state = C_CONNECTING;
	/* To a nearby server the handshake is often done by now: go on
	 * without a round through epoll. */
	struct pollfd p = {.fd = fd, .events = POLLOUT};
	if (poll(&p, 1, 0) == 1)
		return 1;
	set_events(c, &c->client, 0);
	set_events(c, &c->upstream, EPOLLOUT);
	return 0;
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

static void audit_limit(struct conn *c, const char *limit)
{
	al_audit_emit(
	    c->gw->audit, "limit.hit",
	    json_pack("{s:s, s:s, s:i}", "limit", limit, "name", c->name, "port", c->port));
}

/* The decision: allowlist by name or address, then where to connect. */
static void decide(struct conn *c, const struct al_host *host, uint16_t port)
{
	const struct al_plan *p = c->gw->plan;
	const struct al_allow_rule *rule = NULL;
	struct in6_addr addr = host->addr;
	char denied[AL_HOST_MAX + 64];
	bool ok;

	snprintf(c->name, sizeof(c->name), "%s", host->text);
	c->port = port;
	if (host->kind == AL_HOST_NAME)
		ok = al_allow_match_name(p->allow, host->text, port, &rule);
	else
		ok = al_allow_match_addr(p->allow, &host->addr, port, &rule);
	if (!ok) {
		snprintf(denied, sizeof(denied), "no rule allows %s:%u", host->text, port);
		refuse(c, 403, AL_SOCKS_REP_NOT_ALLOWED, denied);
		return;
	}
	if (host->kind != AL_HOST_NAME && al_addr_class(&host->addr) != AL_ADDR_PUBLIC &&
	    !al_allow_rule_covers_class(rule, &host->addr)) {
		snprintf(denied, sizeof(denied),
			 "%s is %s space, which the rule %s only contains; name it in a rule",
			 host->text, al_addr_class_name(al_addr_class(&host->addr)),
			 al_allow_rule_text(rule));
		refuse(c, 403, AL_SOCKS_REP_NOT_ALLOWED, denied);
		return;
	}
	c->rule = al_allow_rule_text(rule);
	struct host_use *u = host_use(c->gw, c->name);
	const char *limit = limit_for_new(c->gw, u);
	if (limit) {
		snprintf(denied, sizeof(denied), "limit: %s", limit);
		audit_limit(c, limit);
		refuse(c, 403, AL_SOCKS_REP_NOT_ALLOWED, denied);
		return;
	}
	c->use = u;
	u->active++;
	u->requests++;
	c->gw->requests++;
	c->gw->active++;
	if (host->kind == AL_HOST_NAME) {
		const struct in6_addr *m = mapped_addr(p, c->name);
		if (!m) {
			resolve_async(c);
			return;
		}
		addr = *m; /* network.hosts is trusted as given */
	}
	connect_allowed(c, &addr);
}

static void connect_allowed(struct conn *c, const struct in6_addr *addr)
{
	al_addr_format(addr, c->addr, sizeof(c->addr));
	c->gw->st.allowed++;
	int r = start_connect(c, addr);
	if (r > 0) {
		on_connected(c);
		if (c->state == C_RELAY)
			relay(c, &c->upstream, EPOLLOUT);
	} else if (r < 0) {
		c->gw->st.failed++;
		c->state = C_HTTP_HEAD; /* not connected: audit as a failure */
		audit_decision(c, true, "could not connect");
		if (c->socks)
			deny_socks(c, AL_SOCKS_REP_HOST_UNREACHABLE);
		else if (!c->transparent)
			deny_http(c, 502, "could not connect upstream");
		conn_free(c, NULL);
	}
}

static void buf_put(struct buf *b, const void *data, size_t n)
{
	size_t room = BUF_SIZE - b->off - b->len;
	if (n > room)
		n = room; /* callers never pass more than a head's worth */
	memcpy(b->data + b->off + b->len, data, n);
	b->len += n;
}

static void on_http_head(struct conn *c)
{
	struct al_http_request req;
	struct al_error err = {0};
	int r = al_http_parse_request(c->head, c->head_len, &req, &err);

	if (r == -EAGAIN) {
		if (c->head_len == sizeof(c->head))
			refuse(c, 431, 0, "request head too large");
		return;
	}
	if (r < 0) {
		refuse(c, al_http_status_for_error(r), 0, err.msg);
		return;
	}
	c->is_connect = req.is_connect;
	c->check_first = req.is_connect && req.host.kind == AL_HOST_NAME;
	if (req.is_connect) {
		buf_put(&c->up.b, c->head + req.head_len, c->head_len - req.head_len);
	} else {
		/* One request per connection upstream: a second request on
		 * the same connection could name another host behind the
		 * same server. */
		char out[AL_HTTP_HEAD_MAX + 512];
		if (req.chunked) {
			/* Its end can only be found by parsing the body; refuse it
			 * rather than relay bytes past it unchecked. */
			refuse(c, 501, 0, "chunked request bodies are not relayed by the proxy");
			return;
		}
		int n = al_http_format_upstream(c->head, &req, AL_HTTP_UPSTREAM_CLOSE, out,
						sizeof(out));
		if (n < 0) {
			refuse(c, 400, 0, "cannot forward this request");
			return;
		}
		buf_put(&c->up.b, out, (size_t)n);
		/* Exactly this request's body follows, nothing after it: a
		 * pipelined second request could name another host. */
		c->up_limited = true;
		c->up_left = req.content_length > 0 ? (uint64_t)req.content_length : 0;
		size_t body = c->head_len - req.head_len;
		if (body > c->up_left)
			body = (size_t)c->up_left;
		buf_put(&c->up.b, c->head + req.head_len, body);
		c->up_left -= body;
	}
	decide(c, &req.host, req.port);
}

static void on_socks(struct conn *c)
{
	struct al_error err = {0};
	int n;

	if (c->state == C_SOCKS_GREETING) {
		struct al_socks_greeting g;
		uint8_t out[4];
		n = al_socks_parse_greeting((const uint8_t *)c->head, c->head_len, &g, &err);
		if (n == -EAGAIN)
			return;
		if (n < 0) {
			c->gw->st.denied++;
			conn_free(c, err.msg);
			return;
		}
		int m = al_socks_format_method_reply(&g, out, sizeof(out));
		if (m > 0)
			reply(c, out, (size_t)m);
		if (!g.no_auth) {
			c->gw->st.denied++;
			conn_free(c, "SOCKS client offers no method we accept");
			return;
		}
		memmove(c->head, c->head + n, c->head_len - (size_t)n);
		c->head_len -= (size_t)n;
		c->state = C_SOCKS_REQUEST;
	}
	struct al_socks_request req;
	n = al_socks_parse_request((const uint8_t *)c->head, c->head_len, &req, &err);
	if (n == -EAGAIN)
		return;
	if (n < 0) {
		refuse(c, 0, (uint8_t)al_socks_reply_code_for_error(n), err.msg);
		return;
	}
	if (req.cmd != AL_SOCKS_CMD_CONNECT) {
		refuse(c, 0, AL_SOCKS_REP_CMD_NOT_SUPPORTED, "only SOCKS CONNECT is served");
		return;
	}
	buf_put(&c->up.b, c->head + n, c->head_len - (size_t)n);
	/* As for CONNECT: what the client then says must name this host. */
	c->check_first = req.host.kind == AL_HOST_NAME;
	decide(c, &req.host, req.port);
}

static void on_connected(struct conn *c)
{
	int e = 0;
	socklen_t len = sizeof(e);

	if (getsockopt(c->upstream.fd, SOL_SOCKET, SO_ERROR, &e, &len) < 0)
		e = errno;
	if (e) {
		c->gw->st.failed++;
		c->state = C_HTTP_HEAD;
		audit_decision(c, true, strerror(e));
		if (c->socks)
			deny_socks(c, e == ECONNREFUSED ? AL_SOCKS_REP_REFUSED
							: AL_SOCKS_REP_HOST_UNREACHABLE);
		else if (!c->transparent)
			deny_http(c, 502, strerror(e));
		conn_free(c, NULL);
		return;
	}
	if (c->socks) {
		uint8_t out[AL_SOCKS_REPLY_MAX];
		struct in6_addr any = IN6ADDR_ANY_INIT;
		int n = al_socks_format_reply(AL_SOCKS_REP_SUCCEEDED, &any, 0, out, sizeof(out));
		if (n > 0)
			reply(c, out, (size_t)n); /* ours, not upstream bytes */
	} else if (c->is_connect) {
		char out[128];
		int n = al_http_format_connect_ok(out, sizeof(out));
		if (n > 0)
			reply(c, out, (size_t)n); /* ours, not upstream bytes */
	}
	c->state = C_RELAY;
}

/* Whether the first line of buf is an HTTP request line (ends in a
 * version), whatever else is wrong with it. */
static bool looks_like_http(const char *buf, size_t len)
{
	const char *nl = memchr(buf, '\n', len);
	return memmem(buf, nl ? (size_t)(nl - buf) : len, " HTTP/", 6) != NULL;
}

/* The name the first bytes of a stream give: a TLS ClientHello's SNI or
 * an HTTP request's Host. 0 and *ret filled; -EAGAIN: too few bytes yet;
 * -ENOENT: no name to check (another protocol, TLS without SNI, HTTP
 * without Host, the HTTP/2 cleartext preface); -EPROTO: TLS or HTTP that
 * cannot be checked (malformed, too long, split too far), which must not
 * pass. */
static int name_in_stream(const char *buf, size_t len, struct al_host *ret)
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

/* Before the first byte goes upstream through a CONNECT tunnel or a
 * transparent connection to a name: if the client names a server (SNI,
 * Host), it must be the one decided on, and bytes that start like TLS or
 * HTTP but cannot be read do not pass. Blocks domain fronting and a
 * Host-header switch behind an allowed address. */
static int check_first_bytes(struct conn *c)
{
	struct al_host h;
	int r = name_in_stream(c->up.b.data + c->up.b.off, c->up.b.len, &h);
	char why[2 * AL_HOST_MAX + 64] = "";

	if (r == -EAGAIN && c->up.b.off + c->up.b.len < BUF_SIZE && !c->client.eof)
		return -EAGAIN;
	c->check_first = false;
	if (r == -EAGAIN || r == -EPROTO)
		snprintf(why, sizeof(why),
			 "the stream starts like TLS or HTTP but its host cannot be checked");
	else if (r == 0 && h.kind == AL_HOST_NAME && strcmp(h.text, c->name) != 0)
		snprintf(why, sizeof(why), "the stream names %s, not %s", h.text, c->name);
	if (why[0]) {
		c->state = C_HTTP_HEAD; /* audited as a denial, not as a relay */
		c->gw->st.denied++;
		c->gw->st.allowed--;
		conn_free(c, why);
		return -EACCES;
	}
	return 0;
}

#define PIPE_CAP (1u << 20)
/* A direction turns to splice() once it has moved this much: a short
 * request and its answer never pay for two pipes. */
#define BULK BUF_SIZE

static int open_pipe(struct flow *f)
{
	if (pipe2(f->pipe, O_NONBLOCK | O_CLOEXEC) < 0)
		return -errno;
	/* Bigger pipes, fewer wake-ups; the kernel may cap the size. */
	fcntl(f->pipe[1], F_SETPIPE_SZ, PIPE_CAP);
	int n = fcntl(f->pipe[1], F_GETPIPE_SZ);
	if (n <= 0) {
		al_closep(&f->pipe[0]);
		al_closep(&f->pipe[1]);
		return -EIO;
	}
	f->pipe_cap = (size_t)n;
	return 0;
}

static bool flow_spliced(const struct flow *f)
{
	return f->pipe[0] >= 0;
}

/* Whether the flow can take more from its sending side now. */
static bool flow_has_room(const struct flow *f)
{
	return flow_spliced(f) ? !f->pipe_full && f->in_pipe < f->pipe_cap
			       : f->b.off + f->b.len < BUF_SIZE;
}

static bool flow_waiting(const struct flow *f)
{
	return f->b.len || f->in_pipe;
}

/* Send what waits in the buffer, at most *budget. False when broken. */
static bool flush_buf(struct flow *f, struct side *to, uint64_t *budget)
{
	struct buf *b = &f->b;
	size_t want = b->len < *budget ? b->len : (size_t)*budget;
	ssize_t n;

	if (!want)
		return true;
	n = send(to->fd, b->data + b->off, want, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR;
	b->off += (size_t)n;
	b->len -= (size_t)n;
	f->bytes += (uint64_t)n;
	*budget -= (uint64_t)n;
	if (b->len == 0)
		b->off = 0;
	return true;
}

/* Move bytes one way: first what waits in the buffer (generated replies,
 * inspected heads, small transfers), then, once the flow is bulk, straight
 * from socket to socket through a pipe with splice(), so the payload is
 * never copied through user space. At most budget bytes go to `to`; at
 * most *read_cap are taken from `from`. False when the connection is
 * broken. */
static bool pump(struct flow *f, struct side *from, struct side *to, uint64_t budget,
		 uint64_t *read_cap, uint32_t events_from, uint32_t events_to)
{
	const unsigned flags = SPLICE_F_NONBLOCK | SPLICE_F_MOVE;
	/* EPOLLERR/EPOLLHUP come without EPOLLOUT: try, and let the send fail. */
	bool can_write = (events_to & (EPOLLOUT | EPOLLERR | EPOLLHUP)) || events_to == 0;
	struct buf *b = &f->b;
	ssize_t n;

	if (can_write && !flush_buf(f, to, &budget))
		return false;
	/* Without a pipe (none to be had) the flow stays in user space. */
	if (!flow_spliced(f) && !from->eof && f->bytes + b->len >= BULK && open_pipe(f) < 0)
		al_debug("gateway: no pipe for splice, copying");
	size_t room = flow_spliced(f) ? f->pipe_cap - f->in_pipe : BUF_SIZE - b->off - b->len;
	if (read_cap && *read_cap < room)
		room = (size_t)*read_cap;
	if ((events_from & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !from->eof && room) {
		if (flow_spliced(f))
			n = splice(from->fd, NULL, f->pipe[1], NULL, room, flags);
		else
			n = recv(from->fd, b->data + b->off + b->len, room, MSG_DONTWAIT);
		if (n > 0) {
			if (flow_spliced(f))
				f->in_pipe += (size_t)n;
			else
				b->len += (size_t)n;
			if (read_cap)
				*read_cap -= (uint64_t)n;
		} else if (n == 0) {
			from->eof = true;
		} else if (errno == EAGAIN && flow_spliced(f) && f->in_pipe) {
			/* Readable, yet nothing fits: many small packets took
			 * every pipe buffer. Stop reading until it drains. */
			f->pipe_full = true;
		} else if (errno != EAGAIN && errno != EINTR) {
			return false;
		}
	}
	if (can_write && !flush_buf(f, to, &budget))
		return false;
	/* Pipe bytes are newer than buffered ones: only once those are out. */
	if (!b->len && f->in_pipe && budget && can_write) {
		size_t want = f->in_pipe < budget ? f->in_pipe : (size_t)budget;
		n = splice(f->pipe[0], NULL, to->fd, NULL, want, flags);
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return false;
		if (n > 0) {
			f->in_pipe -= (size_t)n;
			f->bytes += (uint64_t)n;
			f->pipe_full = false;
		}
	}
	return true;
}

/* A half-close goes on to the other side once everything before it has:
 * the client's to the server and back, as a tunnel must. The end of a
 * proxied request's body does not: like other proxies, keep the upstream
 * write side open, since some servers take a half-close as an aborted
 * request. */
static void half_close(const struct flow *f, const struct side *from, struct side *to)
{
	if (from->eof && !flow_waiting(f) && !to->shut) {
		shutdown(to->fd, SHUT_WR);
		to->shut = true;
	}
}

static void relay(struct conn *c, struct side *s, uint32_t events)
{
	uint32_t ce = s == &c->client ? events : 0, ue = s == &c->upstream ? events : 0;

	if (c->check_first) {
		/* Read what the client sends, but hold it until it is checked. */
		if ((ce & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !c->client.eof) {
			struct buf *b = &c->up.b;
			ssize_t n = recv(c->client.fd, b->data + b->off + b->len,
					 BUF_SIZE - b->off - b->len, MSG_DONTWAIT);
			if (n > 0)
				b->len += (size_t)n;
			else if (n == 0)
				c->client.eof = true;
			ce &= ~(uint32_t)(EPOLLIN | EPOLLHUP | EPOLLERR);
		}
		int r = check_first_bytes(c);
		if (r == -EACCES)
			return;
		if (r == -EAGAIN) {
			set_events(c, &c->client,
				   EPOLLIN | (flow_waiting(&c->down) ? EPOLLOUT : 0));
			set_events(c, &c->upstream,
				   !c->upstream.eof && flow_has_room(&c->down) ? EPOLLIN : 0);
			if (!(ce & EPOLLOUT) && !ue)
				return;
		}
		if (!c->check_first)
			ue |= EPOLLOUT;
	}
	struct al_gateway *gw = c->gw;
	const struct al_net_limits *run = &gw->plan->net_run, *host = &gw->plan->net_host;
	uint64_t budget = UINT64_MAX;
	if (run->bytes_out)
		budget = run->bytes_out > gw->st.bytes_up ? run->bytes_out - gw->st.bytes_up : 0;
	if (c->use && host->bytes_out) {
		uint64_t h =
		    host->bytes_out > c->use->bytes_out ? host->bytes_out - c->use->bytes_out : 0;
		budget = h < budget ? h : budget;
	}
	uint64_t up0 = c->up.bytes, down0 = c->down.bytes;
	/* While the first bytes are being checked, nothing goes upstream
	 * and nothing more is taken from the client. */
	uint32_t cread = c->check_first ? 0 : ce;
	bool ok = pump(&c->up, &c->client, &c->upstream, c->check_first ? 0 : budget,
		       c->up_limited ? &c->up_left : NULL, cread, ue) &&
		  pump(&c->down, &c->upstream, &c->client, UINT64_MAX, NULL, ue, ce);
	gw->st.bytes_up += c->up.bytes - up0;
	gw->st.bytes_down += c->down.bytes - down0;
	if (c->use)
		c->use->bytes_out += c->up.bytes - up0;
	if (!ok) {
		conn_free(c, NULL);
		return;
	}
	/* Out of budget with bytes still waiting: the limit is hit. */
	const char *limit = !flow_waiting(&c->up) ? NULL
			    : run->bytes_out && gw->st.bytes_up >= run->bytes_out
				? "network.limits.bytes_out"
			    : c->use && host->bytes_out && c->use->bytes_out >= host->bytes_out
				? "network.per_host.bytes_out"
				: NULL;
	if (limit) {
		audit_limit(c, limit);
		conn_free(c, NULL);
		return;
	}
	bool up_waiting = flow_waiting(&c->up), down_waiting = flow_waiting(&c->down);
	bool client_done = c->client.eof || (c->up_limited && !c->up_left);
	if (client_done && c->upstream.eof && !up_waiting && !down_waiting) {
		/* FIN before the close: a client whose further bytes we did
		 * not read then sees the answer and an end, not a reset. */
		if (!c->client.shut)
			shutdown(c->client.fd, SHUT_WR);
		conn_free(c, NULL);
		return;
	}
	half_close(&c->up, &c->client, &c->upstream);
	half_close(&c->down, &c->upstream, &c->client);
	bool client_read = !client_done && (c->check_first ? c->up.b.off + c->up.b.len < BUF_SIZE
							   : flow_has_room(&c->up));
	set_events(c, &c->client, (client_read ? EPOLLIN : 0) | (down_waiting ? EPOLLOUT : 0));
	set_events(c, &c->upstream,
		   (!c->upstream.eof && flow_has_room(&c->down) ? EPOLLIN : 0) |
		       (up_waiting && !c->check_first ? EPOLLOUT : 0));
}

static uint64_t name_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 0x100000001b3ULL;
	return h;
}

/* The slot for name: where it is, or the empty one where it would go. */
static size_t fake_slot(const struct al_gateway *gw, const char *name)
{
	size_t mask = gw->n_slots - 1, i = (size_t)name_hash(name) & mask;

	while (gw->fake_slots[i] && strcmp(gw->fake_names[gw->fake_slots[i] - 1], name) != 0)
		i = (i + 1) & mask;
	return i;
}

static void fake_grow(struct al_gateway *gw)
{
	free(gw->fake_slots);
	gw->n_slots = gw->n_slots ? gw->n_slots * 2 : 256;
	gw->fake_slots = xcalloc(gw->n_slots, sizeof(*gw->fake_slots));
	for (size_t i = 0; i < gw->n_fake; i++)
		gw->fake_slots[fake_slot(gw, gw->fake_names[i])] = (uint32_t)i + 1;
}

/* The fake address answering for name, allocated on first use. A name is
 * found in constant time however many a wildcard rule let the sandbox ask
 * for. */
static bool fake_addr(struct al_gateway *gw, const char *name, struct in6_addr *ret)
{
	uint8_t v4[4];
	size_t slot, i;

	if (2 * (gw->n_fake + 1) > gw->n_slots)
		fake_grow(gw);
	slot = fake_slot(gw, name);
	if (gw->fake_slots[slot]) {
		i = gw->fake_slots[slot] - 1;
	} else {
		if (gw->n_fake >= AL_GATEWAY_FAKE_MAX)
			return false;
		if (gw->n_fake == gw->cap_fake) {
			gw->cap_fake = gw->cap_fake ? 2 * gw->cap_fake : 64;
			gw->fake_names = xrealloc(gw->fake_names, gw->cap_fake * sizeof(char *));
		}
		i = gw->n_fake++;
		gw->fake_names[i] = xstrdup(name);
		gw->fake_slots[slot] = (uint32_t)i + 1;
	}
	uint32_t a = AL_GATEWAY_FAKE_NET + (uint32_t)i + 1;
	v4[0] = (uint8_t)(a >> 24);
	v4[1] = (uint8_t)(a >> 16);
	v4[2] = (uint8_t)(a >> 8);
	v4[3] = (uint8_t)a;
	al_addr_from_ipv4(v4, ret);
	return true;
}

static void audit_dns(struct al_gateway *gw, const struct al_dns_query *q, const char *decision,
		      const char *answer, const char *reason)
{
	al_audit_emit(gw->audit, "net.dns",
		      json_pack("{s:s, s:i, s:s, s:s?, s:s?}", "name", q->name, "qtype", q->qtype,
				"decision", decision, "answer", answer, "reason", reason));
}

/* Answer one DNS query: allowed names (by some rule, or mapped in
 * network.hosts) get a fake address for A and no record for AAAA; every
 * other name, type or class is refused, and every query is audited —
 * a name that carries a secret never leaves the gateway. */
static int dns_answer(struct al_gateway *gw, const uint8_t *msg, size_t len, unsigned flags,
		      uint8_t *out, size_t size)
{
	struct al_dns_query q;
	struct al_error err = {0};
	struct in6_addr addr;
	char text[INET6_ADDRSTRLEN];
	int r = al_dns_parse_query(msg, len, &q, &err);

	if (r < 0) {
		gw->st.dns_refused++;
		al_audit_emit(gw->audit, "net.dns",
			      json_pack("{s:s, s:s}", "decision", "malformed", "reason", err.msg));
		return al_dns_format_bare_error(
		    msg, len, r == -EOPNOTSUPP ? AL_DNS_RCODE_NOTIMP : AL_DNS_RCODE_FORMERR, out,
		    size);
	}
	/* network.hosts only says where a name is; the allowlist says whether
	 * it may be reached, and only then does it resolve in here. */
	if (!al_allow_match_name_any_port(gw->plan->allow, q.name, NULL)) {
		gw->st.dns_refused++;
		audit_dns(gw, &q, "deny", NULL, "no rule allows this name");
		return al_dns_format_error(&q, AL_DNS_RCODE_NXDOMAIN, out, size);
	}
	if (q.qclass != AL_DNS_CLASS_IN ||
	    (q.qtype != AL_DNS_TYPE_A && q.qtype != AL_DNS_TYPE_AAAA)) {
		gw->st.dns_refused++;
		audit_dns(gw, &q, "deny", NULL, "only A and AAAA queries are answered");
		return al_dns_format_error(&q, AL_DNS_RCODE_REFUSED, out, size);
	}
	if (!fake_addr(gw, q.name, &addr)) {
		audit_dns(gw, &q, "deny", NULL, "the fake address range is used up");
		return al_dns_format_error(&q, AL_DNS_RCODE_SERVFAIL, out, size);
	}
	gw->st.dns_answered++;
	al_addr_format(&addr, text, sizeof(text));
	audit_dns(gw, &q, "allow", q.qtype == AL_DNS_TYPE_A ? text : NULL, NULL);
	/* AAAA gets NODATA: the fake range is IPv4 and clients fall back. */
	return al_dns_format_answer(&q, &addr, 1, 60, flags, out, size);
}

static void on_dns_udp(struct al_gateway *gw, struct listener *l)
{
	uint8_t msg[4096], out[4096];
	struct sockaddr_storage from;
	socklen_t flen = sizeof(from);
	ssize_t n =
	    recvfrom(l->fd, msg, sizeof(msg), MSG_DONTWAIT, (struct sockaddr *)&from, &flen);

	if (n <= 0)
		return;
	int m = dns_answer(gw, msg, (size_t)n, 0, out, sizeof(out));
	if (m > 0 &&
	    sendto(l->fd, out, (size_t)m, MSG_DONTWAIT, (struct sockaddr *)&from, flen) < 0)
		al_debug("gateway: DNS answer not sent: %s", strerror(errno));
}

/* DNS over TCP: one query per connection, answered and closed. */
static void on_dns_tcp(struct conn *c)
{
	size_t off, len;
	uint8_t out[4096 + 2];
	int r = al_dns_tcp_frame((const uint8_t *)c->head, c->head_len, &off, &len);

	if (r == -EAGAIN && c->head_len < sizeof(c->head))
		return;
	if (r >= 0) {
		int m = dns_answer(c->gw, (const uint8_t *)c->head + off, len, AL_DNS_TCP, out + 2,
				   sizeof(out) - 2);
		if (m > 0) {
			out[0] = (uint8_t)(m >> 8);
			out[1] = (uint8_t)m;
			reply(c, out, (size_t)m + 2);
		}
	}
	conn_free(c, NULL);
}

/* A redirected connection: its original destination is either a fake
 * address the DNS stub handed out (so we know the name) or an address the
 * code had on its own (decided as an IP literal). */
static void on_transparent(struct conn *c)
{
	struct al_gateway *gw = c->gw;
	struct sockaddr_in orig;
	socklen_t len = sizeof(orig);
	struct al_host host = {0};
	uint32_t a;

	if (getsockopt(c->client.fd, SOL_IP, SO_ORIGINAL_DST, &orig, &len) < 0) {
		gw->st.denied++;
		conn_free(c, "no original destination");
		return;
	}
	a = ntohl(orig.sin_addr.s_addr);
	c->port = ntohs(orig.sin_port);
	if (a > AL_GATEWAY_FAKE_NET && a - AL_GATEWAY_FAKE_NET <= gw->n_fake) {
		host.kind = AL_HOST_NAME;
		snprintf(host.text, sizeof(host.text), "%s",
			 gw->fake_names[a - AL_GATEWAY_FAKE_NET - 1]);
		c->check_first = true;
		decide(c, &host, c->port);
		return;
	}
	/* An address the code had on its own: allowed as a literal, or by the
	 * name its first bytes give (TLS SNI, HTTP Host) — then the gateway
	 * connects to its own resolution of that name, not to this address. */
	al_addr_from_ipv4((const uint8_t *)&orig.sin_addr, &c->orig);
	if (al_allow_match_addr(gw->plan->allow, &c->orig, c->port, NULL)) {
		host.kind = AL_HOST_IPV4;
		host.addr = c->orig;
		al_addr_format(&host.addr, host.text, sizeof(host.text));
		decide(c, &host, c->port);
		return;
	}
	c->state = C_PEEK;
	set_events(c, &c->client, EPOLLIN);
}

static void on_peek(struct conn *c)
{
	struct al_host host;
	int r = name_in_stream(c->head, c->head_len, &host);

	if (r == -EAGAIN)
		return;
	if (r < 0) {
		al_addr_format(&c->orig, c->name, sizeof(c->name));
		char why[160];
		snprintf(why, sizeof(why), "no rule allows %s:%u, and the stream names no host%s",
			 c->name, c->port, r == -EPROTO ? " that can be checked" : "");
		refuse(c, 0, 0, why);
		return;
	}
	buf_put(&c->up.b, c->head, c->head_len);
	decide(c, &host, c->port);
}

static void on_client_request(struct conn *c);

static void on_accept(struct al_gateway *gw, struct listener *l)
{
	int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	struct conn *c;

	if (fd < 0)
		return;
	if (gw->n_conns >= MAX_CONNS) {
		close(fd);
		gw->st.denied++;
		al_audit_emit(gw->audit, "net.connect",
			      json_pack("{s:s, s:s}", "decision", "deny", "reason",
					"too many concurrent connections"));
		return;
	}
	c = xcalloc(1, sizeof(*c));
	c->gw = gw;
	c->socks = l->h.kind == H_LISTEN_SOCKS;
	c->state = c->socks			   ? C_SOCKS_GREETING
		   : l->h.kind == H_LISTEN_DNS_TCP ? C_DNS_TCP
						   : C_HTTP_HEAD;
	c->up.pipe[0] = c->up.pipe[1] = c->down.pipe[0] = c->down.pipe[1] = -1;
	c->client = (struct side){.h = {H_CLIENT}, .c = c, .fd = fd};
	c->upstream = (struct side){.h = {H_UPSTREAM}, .c = c, .fd = -1};
	c->next = gw->conns;
	if (gw->conns)
		gw->conns->prev = c;
	gw->conns = c;
	gw->n_conns++;
	if (l->h.kind == H_LISTEN_TRANSPARENT) {
		c->transparent = true;
		on_transparent(c);
		return;
	}
	/* The listener defers the accept until the client has spoken, so its
	 * request is usually here already: read it now, not after a round
	 * through epoll. */
	on_client_request(c);
	bool asking = c->state == C_HTTP_HEAD || c->state == C_SOCKS_GREETING ||
		      c->state == C_SOCKS_REQUEST || c->state == C_DNS_TCP;
	if (!c->dead && asking && c->client.fd >= 0 && !c->client.registered)
		set_events(c, &c->client, EPOLLIN);
}

static void on_client_request(struct conn *c)
{
	ssize_t n =
	    recv(c->client.fd, c->head + c->head_len, sizeof(c->head) - c->head_len, MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		conn_free(c, NULL); /* gone before asking anything */
		return;
	}
	c->head_len += (size_t)n;
	if (c->state == C_DNS_TCP)
		on_dns_tcp(c);
	else if (c->state == C_PEEK)
		on_peek(c);
	else if (c->socks)
		on_socks(c);
	else
		on_http_head(c);
}

void al_gateway_event(struct al_gateway *gw, void *ptr, uint32_t events)
{
	struct handle *h = ptr;

	if (h->kind == H_ARES_SOCK || h->kind == H_ARES_TIMER) {
		if (h->kind == H_ARES_TIMER) {
			uint64_t ticks;
			if (read(gw->ares_timerfd, &ticks, sizeof(ticks)) < 0)
				al_debug("gateway: resolver timer read: %s", strerror(errno));
			ares_process_fd(gw->ares, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
		} else {
			if (((struct ares_sock *)h)->dead)
				return; /* closed earlier in this batch */
			int fd = ((struct ares_sock *)h)->fd;
			ares_process_fd(
			    gw->ares,
			    (events & (EPOLLIN | EPOLLERR | EPOLLHUP)) ? fd : ARES_SOCKET_BAD,
			    (events & EPOLLOUT) ? fd : ARES_SOCKET_BAD);
		}
		ares_rearm(gw);
		return;
	}
	if (h->kind == H_DNS_UDP) {
		on_dns_udp(gw, (struct listener *)h);
		return;
	}
	if (h->kind == H_LISTEN_HTTP || h->kind == H_LISTEN_SOCKS || h->kind == H_LISTEN_DNS_TCP ||
	    h->kind == H_LISTEN_TRANSPARENT) {
		on_accept(gw, (struct listener *)h);
		return;
	}
	struct side *s = (struct side *)h;
	struct conn *c = s->c;
	if (c->dead)
		return;
	switch (c->state) {
	case C_HTTP_HEAD:
	case C_SOCKS_GREETING:
	case C_SOCKS_REQUEST:
	case C_DNS_TCP:
	case C_PEEK:
		on_client_request(c);
		return;
	case C_RESOLVING:
		return; /* the client's events wait for the answer */
	case C_CONNECTING:
		if (s != &c->upstream)
			return; /* the client waits (it is not registered) */
		on_connected(c);
		if (c->state == C_RELAY)
			relay(c, &c->upstream, EPOLLOUT);
		return;
	case C_RELAY:
		relay(c, s, events);
		return;
	}
}

void al_gateway_stats(const struct al_gateway *gw, struct al_gateway_stats *ret)
{
	*ret = gw->st;
}

void al_gateway_free(struct al_gateway *gw)
{
	if (!gw)
		return;
	while (gw->conns)
		conn_free(gw->conns, "the run ended");
	/* Pending lookups call back with ARES_EDESTRUCTION and free their
	 * abandoned connections. */
	if (gw->ares)
		ares_destroy(gw->ares);
	al_gateway_collect(gw);
	if (gw->ares_timerfd >= 0)
		close(gw->ares_timerfd);
	while (gw->ares_socks) {
		struct ares_sock *a = gw->ares_socks;
		gw->ares_socks = a->next;
		free(a);
	}
	for (size_t i = 0; i < AL_GATEWAY_N_LISTENERS; i++)
		if (gw->listeners[i].fd >= 0) {
			epoll_ctl(gw->epfd, EPOLL_CTL_DEL, gw->listeners[i].fd, NULL);
			close(gw->listeners[i].fd);
		}
	for (size_t i = 0; i < gw->n_fake; i++)
		free(gw->fake_names[i]);
	free(gw->fake_names);
	free(gw->fake_slots);
	while (gw->hosts) {
		struct host_use *u = gw->hosts;
		gw->hosts = u->next;
		free(u);
	}
	free(gw);
}

/* The nat table makes the kernel track every connection in the sandbox's
 * network namespace, in memory no cgroup is charged for: raw_out takes
 * loopback traffic out of tracking (all but the transparent listener's
 * replies, which the redirect needs to translate back), ct_out gives the
 * redirected connections short timeouts once they are closing or never
 * answered (half-closed ones keep the kernel's: a server may still be
 * answering), and nat_out takes at most 5,000 new redirected connections a
 * second: at most about 25,000 entries (6 MB) linger (docs/security.md,
 * "Kernel memory"). */
const char al_gateway_nft_rules[] =
    "table ip airlock {\n"
    "  ct timeout closing {\n"
    "    protocol tcp;\n"
    "    l3proto ip;\n"
    "    policy = { syn_sent : 5, syn_recv : 5, last_ack : 2, time_wait : 1, close : 1 }\n"
    "  }\n"
    "  chain raw_out {\n"
    "    type filter hook output priority -300; policy accept;\n"
    "    ip daddr 127.0.0.0/8 meta l4proto != tcp notrack\n"
    "    ip daddr 127.0.0.0/8 ip saddr != 127.0.0.1 notrack\n"
    "    ip daddr 127.0.0.0/8 tcp sport != " AL_PORT_STR(AL_GATEWAY_TRANSPARENT_PORT) " notrack\n"
    "  }\n"
    "  chain ct_out {\n"
    "    type filter hook output priority -150; policy accept;\n"
    "    meta l4proto tcp ct timeout set \"closing\"\n"
    "  }\n"
    "  chain nat_out {\n"
    "    type nat hook output priority -100; policy accept;\n"
    "    ip daddr != 127.0.0.0/8 meta l4proto tcp limit rate over 5000/second burst 1000 "
    "packets drop\n"
    "    ip daddr != 127.0.0.0/8 meta l4proto tcp redirect to :" AL_PORT_STR(AL_GATEWAY_TRANSPARENT_PORT) "\n"
    "  }\n"
    "  chain filter_out {\n"
    "    type filter hook output priority 0; policy accept;\n"
    "    ip daddr != 127.0.0.0/8 drop\n"
    "  }\n"
    "}\n"
    "table ip6 airlock {\n"
    "  chain filter_out {\n"
    "    type filter hook output priority 0; policy accept;\n"
    "    ip6 daddr != ::1 drop\n"
    "  }\n"
    "}\n";

static _Noreturn void rules_helper(pid_t pid, bool rootless, int in, int errfd)
{
	char path[64];
	int fd;

	/* Rootless, the user namespace first: it gives the capabilities the
	 * network namespace asks for. */
	if (rootless) {
		snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0 || setns(fd, CLONE_NEWUSER) < 0)
			_exit(90);
	}
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0 || setns(fd, CLONE_NEWNET) < 0)
		_exit(91);
	if (dup2(in, 0) < 0 || dup2(errfd, 2) < 0)
		_exit(92);
	if (rootless) {
		/* Our uid in that namespace is not 0, so execve would drop the
		 * capabilities setns gave us: carry CAP_NET_ADMIN across as an
		 * ambient capability (inheritable first). */
		struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
		struct __user_cap_data_struct data[2];
		if (syscall(SYS_capget, &hdr, data) < 0)
			_exit(95);
		data[CAP_TO_INDEX(CAP_NET_ADMIN)].inheritable |= CAP_TO_MASK(CAP_NET_ADMIN);
		if (syscall(SYS_capset, &hdr, data) < 0 ||
		    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_NET_ADMIN, 0, 0) < 0)
			_exit(95);
	}
	char *const argv[] = {(char *)"nft", (char *)"-f", (char *)"-", NULL};
	char *const envp[] = {(char *)"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
	execve("/usr/sbin/nft", argv, envp);
	_exit(errno == ENOENT ? 93 : 94);
}

pid_t al_gateway_rules_start(pid_t pid, bool rootless, int *ret_errfd, struct al_error *err)
{
	int p[2], e[2];
	pid_t helper;

	if (pipe2(p, O_CLOEXEC) < 0)
		return al_error_setsys(err, errno, "gateway: pipe");
	if (pipe2(e, O_CLOEXEC) < 0) {
		close(p[0]);
		close(p[1]);
		return al_error_setsys(err, errno, "gateway: pipe");
	}
	/* vfork: the helper only enters namespaces, moves fds, sets its own
	 * capabilities and execs; sharing our memory until then is safe. */
	helper = vfork();
	if (helper < 0) {
		int x = errno;
		close(p[0]);
		close(p[1]);
		close(e[0]);
		close(e[1]);
		return al_error_setsys(err, x, "gateway: fork of the rules helper");
	}
	if (helper == 0)
		rules_helper(pid, rootless, p[0], e[1]);
	close(p[0]);
	close(e[1]);
	/* The ruleset is far below a pipe's capacity: this does not block. */
	if (al_write_all(p[1], al_gateway_nft_rules, strlen(al_gateway_nft_rules)) < 0)
		al_debug("gateway: writing the rules: %s", strerror(errno));
	close(p[1]);
	*ret_errfd = e[0];
	return helper;
}

int al_gateway_rules_wait(pid_t helper, int errfd, struct al_error *err)
{
	char said[256] = "";
	int status = 0;

	/* nft's complaint, if any, goes into our one-line error. */
	ssize_t got = read(errfd, said, sizeof(said) - 1);
	said[got > 0 ? got : 0] = '\0';
	said[strcspn(said, "\n")] = '\0';
	close(errfd);
	while (waitpid(helper, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 93)
		return al_error_set(
		    err, ENOENT,
		    "gateway: /usr/sbin/nft not found (Debian package nftables); the "
		    "transparent capture cannot be installed");
	if (WIFEXITED(status) && (WEXITSTATUS(status) == 90 || WEXITSTATUS(status) == 91))
		return al_error_set(
		    err, EPERM,
		    "gateway: cannot enter the sandbox's network namespace to install "
		    "the transparent capture");
	return al_error_set(err, EIO,
			    "gateway: nft failed to install the transparent-capture rules (status "
			    "%d%s%s)",
			    WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status),
			    said[0] ? ": " : "", said);
}
