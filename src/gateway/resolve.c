/* The resolve stage: the gateway's own lookup of an allowed name, through
 * c-ares in the gateway's loop, and the operator's never rules and the
 * private-address guard on what it finds (no rebinding to loopback,
 * private or metadata space). */
#include "gateway/conn.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "core/log.h"
#include "core/util.h"
#include "gateway/socks.h"

static void ares_rearm(struct al_gateway *gw)
{
	struct timeval tv, *t = ares_timeout(gw->ares, NULL, &tv);

	if (!t) {
		al_timer_disarm(gw->ares_timer);
		return;
	}
	uint64_t ms = (uint64_t)t->tv_sec * 1000 + (uint64_t)(t->tv_usec + 999) / 1000;
	al_timer_arm(gw->ares_timer, ms, false);
}

static void on_ares_sock(struct al_watch *w, uint32_t events, void *data)
{
	struct ares_sock *a = data;
	struct al_gateway *gw = a->gw;
	int fd = a->fd;

	(void)w;
	ares_process_fd(gw->ares, (events & (EPOLLIN | EPOLLERR | EPOLLHUP)) ? fd : ARES_SOCKET_BAD,
			(events & EPOLLOUT) ? fd : ARES_SOCKET_BAD);
	ares_rearm(gw);
}

static void on_ares_timer(struct al_timer *t, uint64_t expirations, void *data)
{
	struct al_gateway *gw = data;

	(void)t;
	(void)expirations;
	ares_process_fd(gw->ares, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
	ares_rearm(gw);
}

/* The resolver's socket state callback: keep its sockets in our loop. */
static void ares_sock_state(void *data, ares_socket_t fd, int readable, int writable)
{
	struct al_gateway *gw = data;
	struct ares_sock **pp = &gw->ares_socks, *a;
	uint32_t events = (readable ? EPOLLIN : 0) | (writable ? EPOLLOUT : 0);

	while (*pp && (*pp)->fd != fd)
		pp = &(*pp)->next;
	a = *pp;
	if (!events) {
		if (a) {
			al_watch_remove(a->w);
			*pp = a->next;
			free(a);
		}
		return;
	}
	if (!a) {
		a = xcalloc(1, sizeof(*a));
		a->gw = gw;
		a->fd = fd;
		a->w = al_loop_add(gw->loop, fd, 0, on_ares_sock, a);
		if (!a->w) {
			al_debug("gateway: cannot watch a resolver socket: %s", strerror(errno));
			free(a);
			return;
		}
		a->next = gw->ares_socks;
		gw->ares_socks = a;
	}
	al_watch_set(a->w, events);
}

int gw_resolver_start(struct al_gateway *gw, struct al_error *err)
{
	/* c-ares's own initialisation, once per process (the library keeps
	 * a plain counter). Safe as process-wide state: the gateway runs in a
	 * process of its own for each run (process.c), with one thread. */
	static bool library_ready;
	struct ares_options opts = {.sock_state_cb = ares_sock_state, .sock_state_cb_data = gw};
	int r;

	if (gw->ares)
		return 0;
	if (gw->ares_failed)
		return al_error_set(err, EIO, "the resolver could not start");
	gw->ares_failed = true; /* until it has */
	if (!library_ready && ares_library_init(ARES_LIB_INIT_ALL) != ARES_SUCCESS)
		return al_error_set(err, ENOMEM, "gateway: c-ares library init failed");
	library_ready = true;
	gw->ares_timer = al_loop_timer(gw->loop, on_ares_timer, gw);
	if (!gw->ares_timer)
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

void gw_resolver_free(struct al_gateway *gw)
{
	/* Pending lookups call back with ARES_EDESTRUCTION and free their
	 * abandoned connections. */
	if (gw->ares)
		ares_destroy(gw->ares);
	gw->ares = NULL;
	while (gw->ares_socks) {
		struct ares_sock *a = gw->ares_socks;
		gw->ares_socks = a->next;
		al_watch_remove(a->w);
		free(a);
	}
	al_timer_freep(&gw->ares_timer);
}

/* Of the addresses a name resolved to, the first that no never rule
 * refuses and that is public or that the allowlist names literally. The
 * first a never rule refused is kept for the verdict. */
static bool pick_address(struct conn *c, const struct ares_addrinfo_node *n, struct in6_addr *ret)
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
		const struct al_allow_rule *rule = gw_never_addr(c->gw, &addr, c->port);
		if (rule) {
			if (!c->never_rule) {
				c->never_rule = rule;
				c->never_addr = addr;
			}
			continue;
		}
		if (al_addr_class(&addr) == AL_ADDR_PUBLIC ||
		    (al_allow_match_addr(c->gw->plan->allow, &addr, c->port, &rule) &&
		     al_allow_rule_covers_class(rule, &addr))) {
			*ret = addr;
			return true;
		}
	}
	return false;
}

static void on_resolved(void *arg, int status, int timeouts, struct ares_addrinfo *res)
{
	struct conn *c = arg;

	(void)timeouts;
	c->resolving = false;
	c->resolved = true;
	c->resolve_ok = status == ARES_SUCCESS;
	c->have_dest = c->resolve_ok && res && pick_address(c, res->nodes, &c->dest);
	if (res)
		ares_freeaddrinfo(res);
	if (c->abandoned) {
		free(c);
		return;
	}
	/* Inside ares_getaddrinfo (an answer from /etc/hosts), the stage
	 * itself goes on; else the connection's dispatcher does. */
	gw_conn_run(c, NULL, 0);
}

enum gw_step gw_stage_resolve(struct conn *c)
{
	struct ares_addrinfo_hints hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};

	if (c->have_dest)
		return GW_NEXT;
	if (c->resolving)
		return GW_WAIT;
	if (!c->resolved) {
		if (gw_resolver_start(c->gw, NULL) < 0)
			return gw_deny(c, GW_ANSWER_DEFAULT, 502, AL_SOCKS_REP_GENERAL_FAILURE,
				       "the resolver could not start");
		c->resolving = true;
		gw_side_set(&c->client, 0);
		ares_getaddrinfo(c->gw->ares, c->name, NULL, &hints, on_resolved, c);
		ares_rearm(c->gw);
		if (c->resolving)
			return GW_WAIT;
	}
	if (c->have_dest)
		return GW_NEXT;
	if (c->never_rule) {
		char text[INET6_ADDRSTRLEN];
		al_addr_format(&c->never_addr, text, sizeof(text));
		al_addr_format(&c->never_addr, c->addr, sizeof(c->addr));
		return gw_deny_never(c, text, c->never_rule);
	}
	return gw_deny(c, GW_ANSWER_DEFAULT, 403, AL_SOCKS_REP_NOT_ALLOWED,
		       c->resolve_ok ? "the name resolves only to loopback, private, "
				       "link-local or other non-public addresses"
				     : "the name does not resolve");
}
