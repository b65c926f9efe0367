/* The gateway object: its listeners, the resolver's start, its counters,
 * and the end of every connection when the run ends. A connection's stages
 * are in conn.c (head, dispatcher), decide.c, ask.c, resolve.c, relay.c
 * and choose.c, the filtered stream in filter.c; the DNS stub in
 * dnsstub.c, the fake-address map in fakeip.c, the decider's connector in
 * connector.c. The parsers
 * (http.c, socks.c, dns.c, tls.c) and the allowlist (net/allow.c) are pure
 * and fuzzed. */
#include "gateway/gateway.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "cred/store.h"
#include "gateway/conn.h"

struct al_gateway *al_gateway_new(const struct al_plan *plan, struct al_audit *audit,
				  struct al_loop *loop)
{
	struct al_gateway *gw = xcalloc(1, sizeof(*gw));

	gw->plan = plan;
	gw->audit = audit;
	gw->loop = loop;
	for (size_t i = 0; i < AL_GATEWAY_N_LISTENERS; i++)
		gw->listen_fd[i] = -1;
	gw->connector_fd = -1;
	gw->peer_diag = -1;
	return gw;
}

void al_gateway_on_usage(struct al_gateway *gw,
			 void (*fn)(void *data, const struct al_gateway_usage *use), void *data)
{
	gw->usage = fn;
	gw->usage_data = data;
}

void al_gateway_on_refusal(struct al_gateway *gw,
			   void (*fn)(void *data, const struct al_gateway_refusal *r), void *data)
{
	gw->refusal = fn;
	gw->refusal_data = data;
}

int al_gateway_prepare(struct al_gateway *gw, struct al_error *err)
{
	struct al_error e = {0};
	int r = gw_resolver_start(gw, &e);

	if (r < 0 && gw->plan->resolver) /* asked for and unusable: refuse */
		return al_error_set(err, -r, "%s", e.msg);
	if (r < 0) /* the host's own configuration: its names then fail */
		al_warn("%s; names that need resolving will be refused", e.msg);
	/* Without the placeholders to look for, misuse would pass unseen. */
	if (gw->needles_failed)
		return al_error_set(
		    err, EINVAL, "the secrets' placeholders could not be compiled for the gateway");
	/* Without the values to search answers for, one could come back. */
	if (gw->answer_failed[0])
		return al_error_set(err, EINVAL, "%s", gw->answer_failed);
	/* Interception's trust stores are read now, before the walls. */
	if ((r = gw_tls_prepare(gw, err)) < 0)
		return r;
	return 0;
}

void al_gateway_warm(struct al_gateway *gw)
{
	gw_tls_warm(gw);
}

static void on_listener(struct al_watch *w, uint32_t events, void *data)
{
	struct al_gateway *gw = data;
	int fd = al_watch_fd(w);

	(void)events;
	for (size_t k = 0; k < AL_GATEWAY_N_LISTENERS; k++) {
		if (gw->listen_fd[k] != fd)
			continue;
		if (k == AL_GATEWAY_DNS_UDP)
			gw_dns_udp(gw, fd);
		else
			gw_accept(gw, (enum al_gateway_listener)k, fd);
		return;
	}
}

void al_gateway_peers(struct al_gateway *gw, uid_t uid, int diag)
{
	al_closep(&gw->peer_diag);
	gw->peer_diag = diag;
	gw->peer_uid = uid;
}

int al_gateway_listen(struct al_gateway *gw, enum al_gateway_listener kind, int fd,
		      struct al_error *err)
{
	if ((unsigned)kind >= AL_GATEWAY_N_LISTENERS) {
		close(fd);
		return al_error_set(err, EINVAL, "gateway: unknown listener kind %d", (int)kind);
	}
	if (gw->listen_fd[kind] >= 0) {
		close(fd);
		return al_error_set(err, EEXIST, "gateway: a second listener of one kind");
	}
	gw->listen_w[kind] = al_loop_add(gw->loop, fd, EPOLLIN, on_listener, gw);
	if (!gw->listen_w[kind]) {
		int e = errno;
		close(fd);
		return al_error_setsys(err, e, "gateway: epoll_ctl");
	}
	gw->listen_fd[kind] = fd;
	return 0;
}

#define ACCEPT_PAUSE_MS 50

static void on_accept_resume(struct al_timer *t, uint64_t expirations, void *data)
{
	struct al_gateway *gw = data;

	(void)t;
	(void)expirations;
	for (size_t k = 0; k < AL_GATEWAY_N_LISTENERS; k++)
		if (gw->listen_w[k])
			al_watch_set(gw->listen_w[k], EPOLLIN);
}

void gw_accept_pause(struct al_gateway *gw)
{
	if (!gw->accept_resume &&
	    !(gw->accept_resume = al_loop_timer(gw->loop, on_accept_resume, gw)))
		return;
	if (al_timer_arm(gw->accept_resume, ACCEPT_PAUSE_MS, false) < 0)
		return;
	al_debug("gateway: out of file descriptors; not accepting for %d ms", ACCEPT_PAUSE_MS);
	for (size_t k = 0; k < AL_GATEWAY_N_LISTENERS; k++)
		if (gw->listen_w[k] && k != AL_GATEWAY_DNS_UDP)
			al_watch_set(gw->listen_w[k], 0);
}

void al_gateway_stats(const struct al_gateway *gw, struct al_gateway_stats *ret)
{
	*ret = gw->st;
}

void al_gateway_close_all(struct al_gateway *gw)
{
	while (gw && gw->conns)
		gw_conn_close(gw->conns, AL_GATEWAY_RUN_ENDED);
}

void al_gateway_free(struct al_gateway *gw)
{
	if (!gw)
		return;
	al_gateway_close_all(gw);
	gw_asker_free(gw);
	gw_resolver_free(gw);
	gw_tls_free(gw);
	al_needles_free(gw->needle_set);
	al_valscan_free(gw->answer_set);
	al_valscan_free(gw->answer_plain);
	al_valscan_free(gw->answer_whole);
	al_timer_freep(&gw->accept_resume);
	for (size_t i = 0; i < AL_GATEWAY_N_LISTENERS; i++) {
		al_watch_remove(gw->listen_w[i]);
		al_closep(&gw->listen_fd[i]);
	}
	al_closep(&gw->peer_diag);
	gw_fake_free(gw);
	gw_claimed_free(gw->claimed);
	while (gw->hosts) {
		struct host_use *u = gw->hosts;
		gw->hosts = u->next;
		free(u);
	}
	free(gw);
}

void al_gateway_set_cred(struct al_gateway *gw, const struct al_cred *cred)
{
	gw->cred = cred;
	gw_needles_build(gw);
	gw_answer_set_build(gw);
}

void gw_cred_rebuild(struct al_gateway *gw, const struct al_cred *cred)
{
	al_needles_free(gw->needle_set);
	gw->needle_set = NULL;
	gw->n_needles = 0;
	gw->needles_failed = false;
	al_valscan_free(gw->answer_set);
	al_valscan_free(gw->answer_plain);
	al_valscan_free(gw->answer_whole);
	gw->answer_set = gw->answer_plain = gw->answer_whole = NULL;
	gw->answer_failed[0] = '\0';
	al_gateway_set_cred(gw, cred);
}

int al_gateway_set_deadline(struct al_gateway *gw, int64_t deadline, struct al_error *err)
{
	/* This process's own copy of the run's credentials (the gateway's
	 * process was forked with it; a claim's are its own too): changing
	 * it changes nothing elsewhere. */
	struct al_cred *c = (struct al_cred *)gw->cred;
	int r;

	if (!c)
		return 0;
	if ((r = al_cred_set_deadline(c, deadline, err)) < 0)
		return r;
	/* A run token minted again is another value to keep out of answers. */
	gw_cred_rebuild(gw, c);
	return 0;
}
