/* The ask stage: when the operator policy names an external decider with
 * an egress path, every request the allowlist and the limits let through
 * is put to it ({"method", "host", "port", "path", "run", "profile"}),
 * without stalling the gateway's other connections: the question is a
 * non-blocking call (decider/decider.h) watched in the loop, with a timer
 * at its deadline. Only true or {"allow": true} allows; false or
 * {"allow": false, "reason": ...} denies with that reason; anything else,
 * and no answer in time, denies. Answers are kept in a cache keyed on
 * method, host, port and path.
 *
 * A confined gateway may not make Unix sockets (its seccomp allowlist), so
 * for a decider on one it asks its connector (connector.c) for each
 * connection; the reply names the question by a token. */
#include "gateway/conn.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/sys.h"
#include "core/util.h"
#include "gateway/socks.h"

/* The decider's reason as the audit and the client see it. */
#define REASON_MAX 200

struct gw_ask {
	struct al_decider_call *call;
	struct al_watch *w;
	struct al_timer *timer;
	json_t *input;
	char key[AL_DECIDER_KEY_MAX + 1];
	bool cacheable;
	uint64_t token, deadline;
	bool waiting_fd; /* for the connector's socket */
	bool failed;	 /* before the call could start: err says why */
	struct al_error err;
};

void al_gateway_set_run(struct al_gateway *gw, const char *run_id)
{
	snprintf(gw->run_id, sizeof(gw->run_id), "%s", run_id ? run_id : "");
}

static void clean(const char *s, char *out, size_t size)
{
	size_t i;

	for (i = 0; s[i] && i + 1 < size; i++)
		out[i] = (unsigned char)s[i] >= ' ' && (unsigned char)s[i] < 0x7f ? s[i] : '?';
	if (size)
		out[i] = '\0';
}

int gw_egress_verdict(const json_t *result, char *reason, size_t len)
{
	const char *type = "null";

	if (len)
		reason[0] = '\0';
	if (json_is_boolean(result))
		return json_is_true(result) ? 1 : 0;
	if (json_is_object(result)) {
		const json_t *allow = json_object_get(result, "allow");
		const char *why = json_string_value(json_object_get(result, "reason"));
		if (json_is_boolean(allow)) {
			if (json_is_true(allow))
				return 1;
			if (why)
				clean(why, reason, len < REASON_MAX + 1 ? len : REASON_MAX + 1);
			return 0;
		}
		snprintf(reason, len, "an object without a boolean \"allow\"");
		return -1;
	}
	if (json_is_string(result))
		type = "a string";
	else if (json_is_number(result))
		type = "a number";
	else if (json_is_array(result))
		type = "an array";
	snprintf(reason, len, "%s, not true, false or {\"allow\": ...}", type);
	return -1;
}

static void free_ask(struct gw_ask *a)
{
	if (!a)
		return;
	al_watch_remove(a->w);
	al_decider_call_free(a->call);
	al_timer_free(a->timer);
	json_decref(a->input);
	free(a);
}

void gw_ask_free(struct conn *c)
{
	free_ask(c->ask);
	c->ask = NULL;
}

/* reason is borrowed from the cache or the caller, never from the question. */
static enum gw_step verdict(struct conn *c, bool allow, const char *reason, bool cached)
{
	gw_ask_free(c);
	if (allow)
		return GW_NEXT;
	return gw_deny(c, GW_ANSWER_DEFAULT, 403, AL_SOCKS_REP_NOT_ALLOWED,
		       "the decider denies %s:%u: %s%s", c->name, c->port,
		       reason && reason[0] ? reason : "no reason given",
		       cached ? " (a cached answer)" : "");
}

/* why may be the question's own (its error): copied before it goes. */
static enum gw_step no_answer(struct conn *c, const char *why)
{
	char text[AL_ERROR_MAX];

	snprintf(text, sizeof(text), "%s", why);
	gw_ask_free(c);
	return gw_deny(c, GW_ANSWER_DEFAULT, 403, AL_SOCKS_REP_NOT_ALLOWED,
		       "the decider did not answer, so the request is refused: %s", text);
}

/* What the decider is told, and the cache key: method, host, port, path. */
static void question(struct conn *c, struct gw_ask *a)
{
	const struct al_gateway *gw = c->gw;
	char method[AL_HTTP_METHOD_MAX + 1] = "CONNECT";
	_cleanup_free_ char *path = NULL;

	if (c->have_request) {
		/* The parser took at most AL_HTTP_METHOD_MAX: never cut, so the
		 * decider and the cache see the method sent upstream. */
		size_t n = c->method.len;
		if (n >= sizeof(method)) {
			a->input = NULL;
			return;
		}
		memcpy(method, c->head + c->method.off, n);
		method[n] = '\0';
		/* What the upstream's request line says: "" is "/", and a query
		 * alone gets its "/". */
		const char *p = c->head + c->req_path.off;
		size_t len = c->req_path.len;
		path = xasprintf("%s%.*s", len == 0 || p[0] == '?' ? "/" : "", (int)len, p);
	}
	a->input =
	    json_pack("{s:s, s:s, s:i, s:o, s:o, s:o}", "method", method, "host", c->name, "port",
		      (int)c->port, "path", path ? al_json_text(path) : json_null(), "run",
		      gw->run_id[0] ? al_json_text(gw->run_id) : json_null(), "profile",
		      gw->plan->profile ? al_json_text(gw->plan->profile) : json_null());
	int n = snprintf(a->key, sizeof(a->key), "%s\n%s\n%u\n%s", method, c->name, c->port,
			 path ? path : "");
	a->cacheable = n > 0 && (size_t)n < sizeof(a->key);
}

static void on_call(struct al_watch *w, uint32_t events, void *data)
{
	(void)w;
	(void)events;
	gw_conn_run(data, NULL, 0);
}

static void on_timer(struct al_timer *t, uint64_t expirations, void *data)
{
	(void)t;
	(void)expirations;
	gw_conn_run(data, NULL, 0);
}

/* Wait for the call's fd as it asks, and for the deadline. */
static enum gw_step wait_call(struct conn *c)
{
	struct gw_ask *a = c->ask;
	uint64_t now = al_now_ms();

	if (a->call) {
		uint32_t ev = al_decider_call_events(a->call);
		if (!a->w)
			a->w =
			    al_loop_add(c->gw->loop, al_decider_call_fd(a->call), ev, on_call, c);
		else if (al_watch_set(a->w, ev) < 0)
			return no_answer(c, "its socket cannot be watched");
		if (!a->w)
			return no_answer(c, "its socket cannot be watched");
	}
	/* The call's own deadline can be a millisecond past ours: fire at
	 * whichever is later, and again if a step came early. */
	uint64_t deadline = a->call ? al_decider_call_deadline(a->call) : a->deadline;
	if (deadline < a->deadline)
		deadline = a->deadline;
	if (al_timer_arm(a->timer, deadline > now ? deadline - now : 1, false) < 0)
		return no_answer(c, "no timer for its deadline");
	return GW_WAIT;
}

static enum gw_step ask_connector(struct conn *c)
{
	struct al_gateway *gw = c->gw;
	struct gw_ask *a = c->ask;
	struct gw_connector_ask q = {.token = ++gw->next_token};
	_cleanup_free_ char *body = al_decider_body(a->input);

	if (gw->connector_fd < 0)
		return no_answer(c, "the gateway's connector to its socket is gone");
	if (!body || strlen(body) > GW_CONNECTOR_BODY_MAX)
		return no_answer(c, "the question is too large for the connector");
	struct iovec iov[2] = {{&q.token, sizeof(q.token)}, {body, strlen(body)}};
	struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2};
	if (sendmsg(gw->connector_fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) !=
	    (ssize_t)(sizeof(q.token) + strlen(body)))
		return no_answer(c, "the gateway's connector to its socket is busy");
	a->token = q.token;
	a->waiting_fd = true;
	return wait_call(c);
}

static enum gw_step start(struct conn *c)
{
	struct al_gateway *gw = c->gw;
	const struct al_decider_conf *d = gw->plan->decider;
	struct gw_ask *a = xcalloc(1, sizeof(*a));
	const char *reason = NULL;
	bool allow;

	c->ask = a;
	question(c, a);
	if (!a->input)
		return no_answer(c, "the question cannot be written");
	if (a->cacheable && al_decider_cache_get(gw->cache, a->key, al_now_ms(), &allow, &reason))
		return verdict(c, allow, reason, true);
	a->deadline =
	    al_add_sat(al_now_ms(), d->timeout_ms ? d->timeout_ms : AL_DECIDER_TIMEOUT_MS);
	if (!(a->timer = al_loop_timer(gw->loop, on_timer, c)))
		return no_answer(c, "no timer for its deadline");
	/* The client waits: nothing of it is read while the decider thinks. */
	gw_side_set(&c->client, 0);
	if (d->socket && gw->use_connector)
		return ask_connector(c);
	if (al_decider_call_start(d, d->egress_path, a->input, &a->call, &a->err) < 0)
		return no_answer(c, a->err.msg);
	return wait_call(c);
}

static enum gw_step step(struct conn *c)
{
	struct al_gateway *gw = c->gw;
	const struct al_decider_conf *d = gw->plan->decider;
	struct gw_ask *a = c->ask;
	char reason[REASON_MAX + 1], who[160];
	json_t *res = NULL;
	int r;

	if (a->failed)
		return no_answer(c, a->err.msg);
	if (a->waiting_fd) {
		if (al_now_ms() < a->deadline)
			return wait_call(c);
		al_decider_describe(d, who, sizeof(who));
		al_error_set(
		    &a->err, ETIMEDOUT, "decider %s: POST %s: no connection within %llu ms", who,
		    d->egress_path,
		    (unsigned long long)(d->timeout_ms ? d->timeout_ms : AL_DECIDER_TIMEOUT_MS));
		return no_answer(c, a->err.msg);
	}
	r = al_decider_call_step(a->call, &res, &a->err);
	if (r == 0)
		return wait_call(c);
	if (r < 0)
		return no_answer(c, a->err.msg);
	r = gw_egress_verdict(res, reason, sizeof(reason));
	json_decref(res);
	if (r < 0) {
		char why[REASON_MAX + 64];
		snprintf(why, sizeof(why), "its answer is %s", reason);
		return no_answer(c, why);
	}
	if (a->cacheable)
		al_decider_cache_put(gw->cache, a->key, al_now_ms(), r == 1,
				     reason[0] ? reason : NULL);
	return verdict(c, r == 1, reason, false);
}

enum gw_step gw_stage_ask(struct conn *c)
{
	const struct al_decider_conf *d = c->gw->plan->decider;

	if (!d || !d->egress_path)
		return GW_NEXT;
	if (!c->gw->cache && d->cache_size && d->cache_ttl_ms)
		c->gw->cache = al_decider_cache_new(d->cache_size, d->cache_ttl_ms);
	return c->ask ? step(c) : start(c);
}

/* ---- the connector's replies ------------------------------------------- */

static struct conn *asking(struct al_gateway *gw, uint64_t token)
{
	for (struct conn *c = gw->conns; c; c = c->next)
		if (c->ask && c->ask->waiting_fd && c->ask->token == token)
			return c;
	return NULL;
}

/* The connector is gone: every question waiting for it is over. */
static void connector_gone(struct al_gateway *gw)
{
	struct conn *c, *next;

	al_warn("gateway: its connector to the decider's socket is gone; egress is refused");
	al_watch_removep(&gw->connector_w);
	al_closep(&gw->connector_fd);
	for (c = gw->conns; c; c = next) {
		next = c->next;
		if (c->ask && c->ask->waiting_fd) {
			c->ask->waiting_fd = false;
			c->ask->failed = true;
			al_error_set(&c->ask->err, EPIPE,
				     "the gateway's connector to its socket is gone");
			gw_conn_run(c, NULL, 0);
		}
	}
}

static void on_connector(struct al_watch *w, uint32_t events, void *data)
{
	struct al_gateway *gw = data;
	const struct al_decider_conf *d = gw->plan->decider;

	(void)w;
	(void)events;
	for (int i = 0; i < 64; i++) {
		struct gw_connector_reply m;
		char cbuf[CMSG_SPACE(sizeof(int))];
		struct iovec iov = {&m, sizeof(m)};
		struct msghdr mh = {.msg_iov = &iov,
				    .msg_iovlen = 1,
				    .msg_control = cbuf,
				    .msg_controllen = sizeof(cbuf)};
		_cleanup_close_ int fd = -1;
		char who[160];

		ssize_t n = recvmsg(gw->connector_fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		/* Every fd that came is taken or closed; one is expected. */
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
			if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
				continue;
			size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (size_t j = 0; j < k; j++) {
				int got;
				memcpy(&got, CMSG_DATA(cm) + j * sizeof(int), sizeof(int));
				if (fd < 0 && j == 0)
					fd = got;
				else
					close(got);
			}
		}
		if (n != sizeof(m) || (mh.msg_flags & MSG_TRUNC)) {
			connector_gone(gw);
			return;
		}
		/* The socket did not come (no fd left for it here: EMFILE):
		 * that question fails, the connector goes on. */
		if (m.error == 0 && fd < 0 && (mh.msg_flags & MSG_CTRUNC))
			m.error = EMFILE;
		if ((m.error == 0) != (fd >= 0)) {
			connector_gone(gw);
			return;
		}
		struct conn *c = asking(gw, m.token);
		if (!c)
			continue; /* that connection closed meanwhile */
		struct gw_ask *a = c->ask;
		a->waiting_fd = false;
		if (m.error) {
			al_decider_describe(d, who, sizeof(who));
			a->failed = true;
			al_error_set(&a->err, m.error, "decider %s: POST %s: connect: %s", who,
				     d->egress_path, strerror(m.error));
		} else if (al_decider_call_start_fd(d, d->egress_path, NULL, TAKE_FD(fd),
						    a->deadline, &a->call, &a->err) < 0) {
			a->failed = true;
		}
		gw_conn_run(c, NULL, 0);
	}
}

void al_gateway_use_connector(struct al_gateway *gw, int fd)
{
	gw->use_connector = true;
	gw->connector_fd = fd;
	gw->connector_w = al_loop_add(gw->loop, fd, EPOLLIN, on_connector, gw);
	if (!gw->connector_w)
		al_closep(&gw->connector_fd); /* every question then fails closed */
}

void gw_asker_free(struct al_gateway *gw)
{
	al_watch_removep(&gw->connector_w);
	al_closep(&gw->connector_fd);
	al_decider_cache_free(gw->cache);
	gw->cache = NULL;
}
