/* The gateway's ask stage (gateway/ask.c) and the operator's never rules
 * (decide.c, resolve.c, relay.c), with a gateway served in this test's
 * loop: an HTTP proxy listener on 127.0.0.1, an upstream on 127.0.0.1 that
 * counts the connections it gets, and a stand-in decider in a thread (on a
 * Unix socket in a temporary directory, or on 127.0.0.1) that answers by
 * the host asked about and records every question. Clients run in threads
 * while the loop turns here. Then the same through the gateway's own
 * confined process and its connector, against tests/e2e/decider_standin.py
 * (its path is the first argument; without it those cases are skipped).
 *
 * Safety: every address is loopback; a never rule is shown to refuse by
 * the verdict and by an upstream that sees no connection. */
#include "unit.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "audit/audit.h"
#include "core/cleanup.h"
#include "core/loop.h"
#include "core/sys.h"
#include "core/util.h"
#include "gateway/conn.h"
#include "gateway/gateway.h"
#include "gateway/process.h"
#include "policy/plan.h"

#define EGRESS "/v1/data/airlock/egress"

static const char *standin_script; /* tests/e2e/decider_standin.py */

static void listen_loopback(int *ret_fd, uint16_t *ret_port)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(listen(fd, 64), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &sl), 0);
	*ret_fd = fd;
	*ret_port = ntohs(sin.sin_port);
}

/* Read a request head and its Content-Length body (or until EOF, or stop). */
static size_t read_request(int fd, int stop, char *buf, size_t size)
{
	size_t len = 0, want = 0;

	for (;;) {
		struct pollfd p[2] = {{.fd = fd, .events = POLLIN}, {.fd = stop, .events = POLLIN}};
		if (poll(p, 2, 5000) <= 0 || p[1].revents)
			return len;
		ssize_t n = read(fd, buf + len, size - 1 - len);
		if (n <= 0)
			return len;
		len += (size_t)n;
		buf[len] = '\0';
		char *end = strstr(buf, "\r\n\r\n");
		const char *cl = strcasestr(buf, "\r\nContent-Length: ");
		if (end && !want)
			want = (size_t)(end + 4 - buf) +
			       (cl && cl < end ? strtoul(cl + 18, NULL, 10) : 0);
		if (end && len >= want)
			return len;
	}
}

/* ---- the upstream ------------------------------------------------------ */

struct upstream {
	int lfd, stop[2];
	uint16_t port;
	pthread_t th;
	int accepted;
	pthread_mutex_t lock;
};

static void *upstream_main(void *data)
{
	static const char ok[] = "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok";
	struct upstream *u = data;
	char buf[4096];

	for (;;) {
		struct pollfd p[2] = {{.fd = u->lfd, .events = POLLIN},
				      {.fd = u->stop[0], .events = POLLIN}};
		if (poll(p, 2, -1) < 0 || p[1].revents)
			return NULL;
		int fd = accept4(u->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		pthread_mutex_lock(&u->lock);
		u->accepted++;
		pthread_mutex_unlock(&u->lock);
		read_request(fd, u->stop[0], buf, sizeof(buf));
		send(fd, ok, sizeof(ok) - 1, MSG_NOSIGNAL);
		close(fd);
	}
}

static int upstream_count(struct upstream *u)
{
	pthread_mutex_lock(&u->lock);
	int n = u->accepted;
	pthread_mutex_unlock(&u->lock);
	return n;
}

/* ---- the stand-in decider ---------------------------------------------- */

#define MAX_QUESTIONS 64

struct standin {
	int lfd, stop[2];
	char dir[64], path[108];
	uint16_t port; /* on 127.0.0.1 when path is empty */
	pthread_t th;
	pthread_mutex_t lock;
	int questions;
	json_t *inputs[MAX_QUESTIONS];
	int hung[16];
	int n_hung;
};

static const char *answer_for(const char *host)
{
	if (strcmp(host, "deny.test") == 0)
		return "{\"result\": {\"allow\": false, \"reason\": \"deny.test is not\\u0001 on "
		       "the "
		       "list\"}}";
	if (strcmp(host, "noreason.test") == 0)
		return "{\"result\": false}";
	if (strcmp(host, "garbage.test") == 0)
		return "this is not JSON";
	if (strcmp(host, "num.test") == 0)
		return "{\"result\": 3}";
	if (strcmp(host, "obj.test") == 0)
		return "{\"result\": {\"allow\": true}}";
	return "{\"result\": true}";
}

static void *standin_main(void *data)
{
	struct standin *s = data;
	char buf[8192], out[512];

	for (;;) {
		struct pollfd p[2] = {{.fd = s->lfd, .events = POLLIN},
				      {.fd = s->stop[0], .events = POLLIN}};
		if (poll(p, 2, -1) < 0 || p[1].revents)
			return NULL;
		int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		size_t len = read_request(fd, s->stop[0], buf, sizeof(buf));
		const char *body = strstr(buf, "\r\n\r\n");
		json_t *q = len && body ? json_loads(body + 4, 0, NULL) : NULL;
		json_t *in = json_incref(json_object_get(q, "input"));
		const char *host = json_string_value(json_object_get(in, "host"));
		json_decref(q);
		pthread_mutex_lock(&s->lock);
		if (s->questions < MAX_QUESTIONS)
			s->inputs[s->questions] = in;
		else
			json_decref(in);
		s->questions++;
		pthread_mutex_unlock(&s->lock);
		if (host && strcmp(host, "hang.test") == 0 && s->n_hung < 16) {
			s->hung[s->n_hung++] = fd; /* never answered, closed at the end */
			continue;
		}
		const char *a = answer_for(host ? host : "");
		int n = snprintf(out, sizeof(out),
				 "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
				 "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
				 strlen(a), a);
		send(fd, out, (size_t)n, MSG_NOSIGNAL);
		close(fd);
	}
}

static void standin_start(struct standin *s, bool tcp)
{
	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->lock, NULL);
	assert_int_equal(pipe2(s->stop, O_CLOEXEC), 0);
	if (tcp) {
		listen_loopback(&s->lfd, &s->port);
	} else {
		struct sockaddr_un sun = {.sun_family = AF_UNIX};
		snprintf(s->dir, sizeof(s->dir), "/tmp/al-gwask-XXXXXX");
		assert_non_null(mkdtemp(s->dir));
		snprintf(s->path, sizeof(s->path), "%s/opa.sock", s->dir);
		snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", s->path);
		s->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		assert_int_equal(bind(s->lfd, (struct sockaddr *)&sun, sizeof(sun)), 0);
		assert_int_equal(listen(s->lfd, 64), 0);
	}
	assert_int_equal(pthread_create(&s->th, NULL, standin_main, s), 0);
}

static void standin_stop(struct standin *s)
{
	if (s->stop[1] <= 0)
		return;
	assert_int_equal(write(s->stop[1], "x", 1), 1);
	pthread_join(s->th, NULL);
	for (int i = 0; i < s->n_hung; i++)
		close(s->hung[i]);
	close(s->lfd);
	close(s->stop[0]);
	close(s->stop[1]);
	s->stop[1] = 0;
	if (s->path[0])
		unlink(s->path);
	if (s->dir[0])
		rmdir(s->dir);
	for (int i = 0; i < s->questions && i < MAX_QUESTIONS; i++)
		json_decref(s->inputs[i]);
}

static int questions(struct standin *s)
{
	pthread_mutex_lock(&s->lock);
	int n = s->questions;
	pthread_mutex_unlock(&s->lock);
	return n;
}

/* ---- the fixture: a plan, a gateway, its proxy listener ---------------- */

static const char *const mapped_names[] = {"allow.test",   "deny.test", "hang.test",
					   "garbage.test", "num.test",	"noreason.test",
					   "obj.test",	   "meta.test", "other.test"};

struct fx {
	struct al_plan plan;
	struct al_host_map hosts[AL_ARRAY_SIZE(mapped_names)];
	struct al_decider_conf dec;
	struct al_loop *loop;
	struct al_audit *audit;
	struct al_gateway *gw;	    /* in this process, or */
	struct al_gateway_proc *gp; /* its own */
	struct al_gateway_proc_events ev;
	uint16_t proxy_port;
	struct upstream up;
	struct standin sd;
	json_t *events; /* net.connect */
	char resp[4096];
};

static void on_event(void *data, const char *event, json_t *fields)
{
	struct fx *f = data;

	if (strcmp(event, "net.connect") == 0)
		json_array_append(f->events, fields);
	json_decref(fields);
}

static void add_rule(struct al_allowlist *l, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void add_rule(struct al_allowlist *l, const char *fmt, ...)
{
	struct al_error err = {0};
	char rule[128];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(rule, sizeof(rule), fmt, ap);
	va_end(ap);
	if (al_allow_add(l, rule, &err) < 0)
		fail_msg("rule %s: %s", rule, err.msg);
}

enum decider_kind {
	NO_DECIDER,
	DECIDER_UNIX,
	DECIDER_TCP,
};

/* The plan, the upstream and (kind) the stand-in decider; never: the
 * operator's never rules (NULL-terminated, may be NULL). */
static void fx_plan(struct fx *f, const char *const *never, enum decider_kind kind)
{
	struct in6_addr lo;

	memset(f, 0, sizeof(*f));
	f->events = json_array();
	pthread_mutex_init(&f->up.lock, NULL);
	assert_int_equal(pipe2(f->up.stop, O_CLOEXEC), 0);
	listen_loopback(&f->up.lfd, &f->up.port);
	assert_int_equal(pthread_create(&f->up.th, NULL, upstream_main, &f->up), 0);

	uint8_t v4[4] = {127, 0, 0, 1};
	al_addr_from_ipv4(v4, &lo);
	for (size_t i = 0; i < AL_ARRAY_SIZE(mapped_names); i++)
		f->hosts[i] = (struct al_host_map){.name = (char *)mapped_names[i], .addr = lo};
	f->plan.gateway = true;
	f->plan.hosts = f->hosts;
	f->plan.n_hosts = AL_ARRAY_SIZE(f->hosts);
	f->plan.profile = "default";
	f->plan.allow = al_allow_new();
	add_rule(f->plan.allow, "*.test:*");
	add_rule(f->plan.allow, "127.0.0.1:%u", f->up.port);
	add_rule(f->plan.allow, "localhost:%u", f->up.port);
	add_rule(f->plan.allow, "127.0.0.0/8:%u", f->up.port);
	if (never) {
		f->plan.never = al_allow_new();
		for (size_t i = 0; never[i]; i++)
			add_rule(f->plan.never, "%s", never[i]);
	}
	if (kind != NO_DECIDER) {
		standin_start(&f->sd, kind == DECIDER_TCP);
		f->dec = (struct al_decider_conf){.egress_path = EGRESS,
						  .timeout_ms = 300,
						  .cache_size = 16,
						  .cache_ttl_ms = 60000};
		if (kind == DECIDER_TCP) {
			f->dec.host = "127.0.0.1";
			f->dec.port = f->sd.port;
		} else {
			f->dec.socket = f->sd.path;
		}
		f->plan.decider = &f->dec;
	}
	struct al_error err = {0};
	assert_int_equal(al_loop_new(&f->loop, &err), 0);
	f->audit = al_audit_sink(on_event, f);
}

/* ... served in this process. */
static void fx_start(struct fx *f, const char *const *never, enum decider_kind kind)
{
	struct al_error err = {0};
	int fd;

	fx_plan(f, never, kind);
	f->gw = al_gateway_new(&f->plan, f->audit, f->loop);
	al_gateway_set_run(f->gw, "run-1");
	listen_loopback(&fd, &f->proxy_port);
	assert_int_equal(al_gateway_listen(f->gw, AL_GATEWAY_HTTP, fd, &err), 0);
}

static void fx_stop(struct fx *f)
{
	al_gateway_free(f->gw);
	al_gateway_proc_free(f->gp);
	standin_stop(&f->sd);
	assert_int_equal(write(f->up.stop[1], "x", 1), 1);
	pthread_join(f->up.th, NULL);
	close(f->up.lfd);
	close(f->up.stop[0]);
	close(f->up.stop[1]);
	al_audit_close(f->audit);
	al_loop_free(f->loop);
	al_allow_free(f->plan.allow);
	al_allow_free(f->plan.never);
	json_decref(f->events);
}

/* ---- clients ----------------------------------------------------------- */

struct client {
	pthread_t th;
	uint16_t proxy;
	char text[1024];
	int status;
	char resp[4096];
	uint64_t took_ms;
	uint64_t end_ms; /* when its answer had come, al_now_ms() */
	int done;	 /* __atomic */
};

static void *client_main(void *data)
{
	struct client *cl = data;
	struct sockaddr_in sin = {.sin_family = AF_INET,
				  .sin_port = htons(cl->proxy),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	uint64_t t0 = al_now_ms();
	size_t len = 0;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	cl->status = -1;
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0 &&
	    send(fd, cl->text, strlen(cl->text), MSG_NOSIGNAL) == (ssize_t)strlen(cl->text)) {
		for (;;) {
			struct pollfd p = {.fd = fd, .events = POLLIN};
			if (poll(&p, 1, 10000) <= 0)
				break;
			ssize_t n = read(fd, cl->resp + len, sizeof(cl->resp) - 1 - len);
			if (n <= 0)
				break;
			len += (size_t)n;
		}
		cl->resp[len] = '\0';
		if (len > 12 && strncmp(cl->resp, "HTTP/1.", 7) == 0)
			cl->status = atoi(cl->resp + 9);
	}
	if (fd >= 0)
		close(fd);
	cl->end_ms = al_now_ms();
	cl->took_ms = cl->end_ms - t0;
	__atomic_store_n(&cl->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void client_start(struct fx *f, struct client *cl, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void client_start(struct fx *f, struct client *cl, const char *fmt, ...)
{
	va_list ap;

	memset(cl, 0, sizeof(*cl));
	cl->proxy = f->proxy_port;
	va_start(ap, fmt);
	vsnprintf(cl->text, sizeof(cl->text), fmt, ap);
	va_end(ap);
	assert_int_equal(pthread_create(&cl->th, NULL, client_main, cl), 0);
}

/* Turn the loop until the clients are done and n_events net.connect
 * events have come (10 s at most). */
static void drive(struct fx *f, struct client **cls, size_t n, size_t n_events)
{
	uint64_t end = al_now_ms() + 10000;

	while (al_now_ms() < end) {
		bool done = true;
		for (size_t i = 0; i < n; i++)
			done = done && __atomic_load_n(&cls[i]->done, __ATOMIC_ACQUIRE);
		if (done && json_array_size(f->events) >= n_events)
			break;
		al_loop_dispatch(f->loop, 20);
	}
	for (size_t i = 0; i < n; i++)
		pthread_join(cls[i]->th, NULL);
	assert_true(json_array_size(f->events) >= n_events);
}

/* One request through the proxy: its status; its answer in f->resp. */
static int request(struct fx *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int request(struct fx *f, const char *fmt, ...)
{
	struct client cl, *p = &cl;
	char text[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	size_t before = json_array_size(f->events);
	client_start(f, &cl, "%s", text);
	drive(f, &p, 1, before + 1);
	snprintf(f->resp, sizeof(f->resp), "%s", cl.resp);
	return cl.status;
}

static int get(struct fx *f, const char *host, uint16_t port, const char *path)
{
	return request(f, "GET http://%s:%u%s HTTP/1.1\r\nHost: %s:%u\r\n\r\n", host, port, path,
		       host, port);
}

static const char *last_reason(struct fx *f)
{
	json_t *e = json_array_get(f->events, json_array_size(f->events) - 1);
	return json_string_value(json_object_get(e, "reason"));
}

static const char *last_field(struct fx *f, const char *name)
{
	json_t *e = json_array_get(f->events, json_array_size(f->events) - 1);
	return json_string_value(json_object_get(e, name));
}

static json_t *question_input(struct standin *s, int i)
{
	pthread_mutex_lock(&s->lock);
	json_t *in = i < s->questions && i < MAX_QUESTIONS ? s->inputs[i] : NULL;
	pthread_mutex_unlock(&s->lock);
	return in;
}

/* ---- never rules ------------------------------------------------------- */

/* A name network.hosts maps to an address a never rule names: refused
 * before any connect, whatever the allowlist says. */
static void test_never_mapped(void **state)
{
	static const char *const never[] = {"127.0.0.0/8:*", NULL};
	struct fx f;

	(void)state;
	fx_start(&f, NULL, NO_DECIDER);
	assert_int_equal(get(&f, "meta.test", f.up.port, "/"), 200);
	assert_int_equal(upstream_count(&f.up), 1);
	fx_stop(&f);

	fx_start(&f, never, NO_DECIDER);
	assert_int_equal(get(&f, "meta.test", f.up.port, "/latest/meta-data"), 403);
	assert_string_equal(last_reason(&f),
			    "the operator policy never allows 127.0.0.1 (rule 127.0.0.0/8:*)");
	assert_string_equal(last_field(&f, "decision"), "deny");
	assert_string_equal(last_field(&f, "address"), "127.0.0.1");
	assert_contains(f.resp, "the operator policy never allows 127.0.0.1");
	assert_int_equal(upstream_count(&f.up), 0);
	fx_stop(&f);
}

/* A literal address, and a rule's port: only the ports it names. */
static void test_never_literal(void **state)
{
	char rule[32], want[96];
	struct fx f;

	(void)state;
	fx_start(&f, NULL, NO_DECIDER);
	assert_int_equal(get(&f, "127.0.0.1", f.up.port, "/"), 200);
	f.plan.never = al_allow_new();
	add_rule(f.plan.never, "127.0.0.1:1");
	assert_int_equal(get(&f, "127.0.0.1", f.up.port, "/"), 200);
	assert_int_equal(upstream_count(&f.up), 2);
	snprintf(rule, sizeof(rule), "127.0.0.1:%u", f.up.port);
	add_rule(f.plan.never, "%s", rule);
	assert_int_equal(get(&f, "127.0.0.1", f.up.port, "/"), 403);
	snprintf(want, sizeof(want), "the operator policy never allows 127.0.0.1 (rule %s)", rule);
	assert_string_equal(last_reason(&f), want);
	/* The same address written as IPv4-mapped IPv6 is that address, and
	 * named so (to the audit, and to a decider). */
	assert_int_equal(get(&f, "[::ffff:127.0.0.1]", f.up.port, "/"), 403);
	assert_string_equal(last_reason(&f), want);
	assert_string_equal(last_field(&f, "name"), "127.0.0.1");
	assert_int_equal(upstream_count(&f.up), 2);
	fx_stop(&f);
}

static void test_never_name(void **state)
{
	static const char *const never[] = {"*.blocked.test:*", NULL};
	struct fx f;

	(void)state;
	fx_start(&f, never, NO_DECIDER);
	assert_int_equal(get(&f, "x.blocked.test", f.up.port, "/"), 403);
	assert_string_equal(last_reason(&f), "the operator policy never allows x.blocked.test "
					     "(rule *.blocked.test:*)");
	assert_int_equal(get(&f, "meta.test", f.up.port, "/"), 200);
	assert_int_equal(upstream_count(&f.up), 1);
	fx_stop(&f);
}

/* What the gateway's own resolver finds (localhost, from /etc/hosts). */
static void test_never_resolved(void **state)
{
	static const char *const never[] = {"127.0.0.0/8:*", "[::1]:*", NULL};
	struct fx f;

	(void)state;
	fx_start(&f, NULL, NO_DECIDER);
	assert_int_equal(get(&f, "localhost", f.up.port, "/"), 200);
	assert_string_equal(last_field(&f, "address"), "127.0.0.1");
	assert_int_equal(upstream_count(&f.up), 1);
	fx_stop(&f);

	fx_start(&f, never, NO_DECIDER);
	assert_int_equal(get(&f, "localhost", f.up.port, "/"), 403);
	assert_string_equal(last_reason(&f),
			    "the operator policy never allows 127.0.0.1 (rule 127.0.0.0/8:*)");
	assert_int_equal(upstream_count(&f.up), 0);
	fx_stop(&f);
}

/* ---- the decider ------------------------------------------------------- */

static void test_egress_verdict(void **state)
{
	char reason[300], longer[400];

	(void)state;
	json_t *t = json_true(), *fl = json_false();
	assert_int_equal(gw_egress_verdict(t, reason, sizeof(reason)), 1);
	assert_int_equal(gw_egress_verdict(fl, reason, sizeof(reason)), 0);
	assert_string_equal(reason, "");
	json_t *o = json_pack("{s:b, s:s}", "allow", 1, "reason", "ignored");
	assert_int_equal(gw_egress_verdict(o, reason, sizeof(reason)), 1);
	json_decref(o);
	o = json_pack("{s:b, s:s}", "allow", 0, "reason", "not\nhere \xc3\xa9");
	assert_int_equal(gw_egress_verdict(o, reason, sizeof(reason)), 0);
	assert_string_equal(reason, "not?here ??");
	json_decref(o);
	memset(longer, 'x', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = '\0';
	o = json_pack("{s:b, s:s}", "allow", 0, "reason", longer);
	assert_int_equal(gw_egress_verdict(o, reason, sizeof(reason)), 0);
	assert_int_equal(strlen(reason), 200);
	json_decref(o);
	o = json_pack("{s:s}", "allow", "yes");
	assert_int_equal(gw_egress_verdict(o, reason, sizeof(reason)), -1);
	assert_contains(reason, "without a boolean \"allow\"");
	json_decref(o);
	json_t *others[] = {json_integer(1), json_string("true"), json_array(), json_null()};
	const char *names[] = {"a number", "a string", "an array", "null"};
	for (size_t i = 0; i < AL_ARRAY_SIZE(others); i++) {
		assert_int_equal(gw_egress_verdict(others[i], reason, sizeof(reason)), -1);
		assert_contains(reason, names[i]);
		json_decref(others[i]);
	}
	assert_int_equal(gw_egress_verdict(NULL, reason, sizeof(reason)), -1);
}

/* Allow, deny with the decider's reason, and the cache: the same request
 * again is not asked again; another path is. */
static void test_decider_answers(void **state)
{
	struct fx f;
	char want[160];

	(void)state;
	fx_start(&f, NULL, DECIDER_UNIX);
	uint16_t port = f.up.port;
	assert_int_equal(get(&f, "allow.test", port, "/a?x=1"), 200);
	assert_int_equal(questions(&f.sd), 1);
	assert_int_equal(upstream_count(&f.up), 1);
	json_t *in = question_input(&f.sd, 0);
	assert_non_null(in);
	assert_string_equal(json_string_value(json_object_get(in, "method")), "GET");
	assert_string_equal(json_string_value(json_object_get(in, "host")), "allow.test");
	assert_int_equal(json_integer_value(json_object_get(in, "port")), port);
	assert_string_equal(json_string_value(json_object_get(in, "path")), "/a?x=1");
	assert_string_equal(json_string_value(json_object_get(in, "run")), "run-1");
	assert_string_equal(json_string_value(json_object_get(in, "profile")), "default");

	assert_int_equal(get(&f, "deny.test", port, "/"), 403);
	snprintf(want, sizeof(want),
		 "the decider denies deny.test:%u: deny.test is not? on the list", port);
	assert_string_equal(last_reason(&f), want);
	assert_contains(f.resp, "deny.test is not? on the list");
	assert_int_equal(questions(&f.sd), 2);
	assert_int_equal(upstream_count(&f.up), 1);

	/* Cached: no second question. */
	assert_int_equal(get(&f, "deny.test", port, "/"), 403);
	assert_contains(last_reason(&f), "deny.test is not? on the list (a cached answer)");
	assert_int_equal(get(&f, "allow.test", port, "/a?x=1"), 200);
	assert_int_equal(questions(&f.sd), 2);
	assert_int_equal(upstream_count(&f.up), 2);
	/* Another path, another method: asked. */
	assert_int_equal(get(&f, "allow.test", port, "/b"), 200);
	assert_int_equal(
	    request(&f,
		    "POST http://allow.test:%u/a?x=1 HTTP/1.1\r\nHost: allow.test:%u\r\n"
		    "Content-Length: 2\r\n\r\nhi",
		    port, port),
	    200);
	assert_int_equal(questions(&f.sd), 4);
	in = question_input(&f.sd, 3);
	assert_string_equal(json_string_value(json_object_get(in, "method")), "POST");

	/* CONNECT: the method is CONNECT and there is no path. */
	assert_int_equal(request(&f,
				 "CONNECT allow.test:%u HTTP/1.1\r\nHost: allow.test:%u\r\n\r\n"
				 "GET / HTTP/1.0\r\nHost: allow.test\r\n\r\n",
				 port, port),
			 200);
	assert_int_equal(questions(&f.sd), 5);
	in = question_input(&f.sd, 4);
	assert_string_equal(json_string_value(json_object_get(in, "method")), "CONNECT");
	assert_true(json_is_null(json_object_get(in, "path")));
	assert_contains(f.resp, "\r\n\r\nok");

	assert_int_equal(get(&f, "noreason.test", port, "/"), 403);
	assert_contains(last_reason(&f), "no reason given");
	assert_int_equal(get(&f, "obj.test", port, "/"), 200);
	fx_stop(&f);
}

/* No answer, a bad answer, no decider: each is no, in about its timeout,
 * and a hanging question holds up no other connection. */
static void test_decider_fails_closed(void **state)
{
	struct fx f;
	struct client hang, quick, *both[] = {&hang, &quick};

	(void)state;
	fx_start(&f, NULL, DECIDER_UNIX);
	uint16_t port = f.up.port;
	client_start(&f, &hang, "GET http://hang.test:%u/ HTTP/1.1\r\nHost: hang.test\r\n\r\n",
		     port);
	usleep(50 * 1000);
	client_start(&f, &quick, "GET http://allow.test:%u/ HTTP/1.1\r\nHost: allow.test\r\n\r\n",
		     port);
	drive(&f, both, 2, 2);
	assert_int_equal(hang.status, 403);
	/* Not before the decider's 300 ms; the upper bound is a hang guard
	 * (how late a timer fires depends on the machine's load). */
	assert_true(hang.took_ms >= 250 && hang.took_ms <= 5000);
	assert_int_equal(quick.status, 200);
	/* It did not wait for the hanging one: answered before it, whatever
	 * the load makes either take. */
	assert_true(quick.end_ms < hang.end_ms);
	char want[256];
	snprintf(want, sizeof(want),
		 "the decider did not answer, so the request is refused: decider %s: POST " EGRESS
		 ": no answer within 300 ms",
		 f.sd.path);
	bool found = false;
	for (size_t i = 0; i < json_array_size(f.events); i++) {
		const char *r =
		    json_string_value(json_object_get(json_array_get(f.events, i), "reason"));
		found = found || (r && strcmp(r, want) == 0);
	}
	assert_true(found);
	/* Not cached: asked again. */
	int q = questions(&f.sd);
	assert_int_equal(get(&f, "hang.test", port, "/"), 403);
	assert_int_equal(questions(&f.sd), q + 1);

	assert_int_equal(get(&f, "garbage.test", port, "/"), 403);
	assert_contains(last_reason(&f), "the decider did not answer, so the request is refused");
	assert_contains(last_reason(&f), "the answer is not JSON");
	assert_int_equal(get(&f, "num.test", port, "/"), 403);
	assert_contains(last_reason(&f), "its answer is a number, not true, false or");
	assert_int_equal(upstream_count(&f.up), 1);

	/* The decider is gone: what was cached still answers, the rest is no. */
	standin_stop(&f.sd);
	assert_int_equal(get(&f, "allow.test", port, "/"), 200);
	assert_int_equal(get(&f, "allow.test", port, "/new"), 403);
	assert_contains(last_reason(&f), ": connect: No such file or directory");
	assert_int_equal(upstream_count(&f.up), 2);
	fx_stop(&f);
}

static void test_decider_tcp(void **state)
{
	struct fx f;

	(void)state;
	fx_start(&f, NULL, DECIDER_TCP);
	assert_int_equal(get(&f, "deny.test", f.up.port, "/"), 403);
	assert_contains(last_reason(&f), "the decider denies deny.test:");
	assert_int_equal(get(&f, "allow.test", f.up.port, "/"), 200);
	assert_int_equal(questions(&f.sd), 2);
	assert_int_equal(upstream_count(&f.up), 1);
	fx_stop(&f);
}

/* ---- the gateway's own process, its connector, the Python stand-in ----- */

struct py {
	pid_t pid;
	char dir[64], sock[108], log[128], port_file[128];
	uint16_t port;
};

/* The stand-in still running (a failed assertion leaves its case early):
 * the case's teardown ends it. */
static struct py *live_py;

static void py_start(struct py *p, bool tcp, const char *mode, const char *arg)
{
	memset(p, 0, sizeof(*p));
	live_py = p;
	snprintf(p->dir, sizeof(p->dir), "/tmp/al-gwpy-XXXXXX");
	assert_non_null(mkdtemp(p->dir));
	snprintf(p->sock, sizeof(p->sock), "%s/opa.sock", p->dir);
	snprintf(p->log, sizeof(p->log), "%s/questions.jsonl", p->dir);
	snprintf(p->port_file, sizeof(p->port_file), "%s/port", p->dir);
	p->pid = fork();
	assert_true(p->pid >= 0);
	if (p->pid == 0) {
		int null = open("/dev/null", O_WRONLY);
		dup2(null, 1);
		execl("/usr/bin/python3", "python3", standin_script, mode, arg,
		      tcp ? "--port-file" : "--socket", tcp ? p->port_file : p->sock, "--log",
		      p->log, (char *)NULL);
		_exit(127);
	}
	struct stat st;
	const char *wait_for = tcp ? p->port_file : p->sock;
	for (int i = 0; i < 500 && stat(wait_for, &st) < 0; i++)
		usleep(10 * 1000);
	assert_int_equal(stat(wait_for, &st), 0);
	if (tcp) {
		char buf[16] = "";
		FILE *fp = fopen(p->port_file, "r");
		assert_non_null(fp);
		assert_non_null(fgets(buf, sizeof(buf), fp));
		fclose(fp);
		p->port = (uint16_t)atoi(buf);
	}
}

static int py_questions(struct py *p)
{
	FILE *fp = fopen(p->log, "r");
	int n = 0, ch;

	if (!fp)
		return 0;
	while ((ch = fgetc(fp)) != EOF)
		n += ch == '\n';
	fclose(fp);
	return n;
}

static void py_stop(struct py *p)
{
	int status;

	live_py = NULL;
	if (p->pid <= 0)
		return;
	kill(p->pid, SIGTERM);
	waitpid(p->pid, &status, 0);
	unlink(p->log);
	unlink(p->port_file);
	unlink(p->sock);
	rmdir(p->dir);
}

static void on_changed(void *data)
{
	(void)data;
}

static const char *on_usage(void *data, const struct al_gateway_usage *use)
{
	(void)data;
	(void)use;
	return NULL;
}

static void on_denied(void *data, const char *host, int port, const char *reason)
{
	(void)data;
	(void)host;
	(void)port;
	(void)reason;
}

/* The status line of /proc/PID/status that starts with key, or "". */
static void proc_status(pid_t pid, const char *key, char *out, size_t size)
{
	char path[64], line[256];

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	out[0] = '\0';
	FILE *fp = fopen(path, "r");
	if (!fp)
		return;
	while (fgets(line, sizeof(line), fp))
		if (strncmp(line, key, strlen(key)) == 0) {
			snprintf(out, size, "%s", line + strlen(key));
			out[strcspn(out, "\n")] = '\0';
		}
	fclose(fp);
}

static void confined(bool tcp)
{
	static struct py py; /* not on the stack: py_teardown may need it */
	struct al_gateway_stats st;
	struct al_error err = {0};
	struct fx f;
	int fd;

	if (!standin_script)
		skip();
	py_start(&py, tcp, "deny-egress", "deny.test");
	fx_plan(&f, NULL, NO_DECIDER);
	f.dec = (struct al_decider_conf){
	    .egress_path = EGRESS, .timeout_ms = 2000, .cache_size = 16, .cache_ttl_ms = 60000};
	if (tcp) {
		f.dec.host = "127.0.0.1";
		f.dec.port = py.port;
	} else {
		f.dec.socket = py.sock;
	}
	f.plan.decider = &f.dec;
	f.ev = (struct al_gateway_proc_events){
	    .changed = on_changed, .usage = on_usage, .denied = on_denied, .data = &f};
	assert_int_equal(
	    al_gateway_proc_start(&f.plan, NULL, "run-2", f.loop, f.audit, &f.ev, &f.gp, &err), 0);
	for (int i = 0; i < 500 && al_gateway_proc_state(f.gp) == AL_GATEWAY_STARTING; i++)
		al_loop_dispatch(f.loop, 20);
	if (al_gateway_proc_state(f.gp) != AL_GATEWAY_RUNNING)
		fail_msg("the gateway did not start: %s", al_gateway_proc_error(f.gp));
	listen_loopback(&fd, &f.proxy_port);
	assert_int_equal(al_gateway_proc_listen(f.gp, AL_GATEWAY_HTTP, fd, &err), 0);

	/* The connector (a Unix socket only) is the gateway's child, and
	 * confined: seccomp filter, no_new_privs, no capabilities. */
	json_t *info = al_gateway_proc_json(f.gp);
	pid_t gw_pid = (pid_t)json_integer_value(json_object_get(info, "pid"));
	json_decref(info);
	char path[96], children[64] = "", v[64];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)gw_pid, (int)gw_pid);
	assert_true(al_read_file(path, children, sizeof(children)) >= 0);
	if (tcp) {
		assert_string_equal(children, "");
	} else {
		pid_t cpid = (pid_t)atoi(children);
		assert_true(cpid > 0);
		proc_status(cpid, "Seccomp:\t", v, sizeof(v));
		assert_string_equal(v, "2");
		proc_status(cpid, "NoNewPrivs:\t", v, sizeof(v));
		assert_string_equal(v, "1");
		proc_status(cpid, "CapEff:\t", v, sizeof(v));
		assert_string_equal(v, "0000000000000000");
	}

	assert_int_equal(get(&f, "allow.test", f.up.port, "/x"), 200);
	assert_int_equal(get(&f, "deny.test", f.up.port, "/"), 403);
	assert_contains(last_reason(&f), "the decider denies deny.test:");
	assert_contains(last_reason(&f), ": deny.test is not on the list");
	assert_int_equal(get(&f, "deny.test", f.up.port, "/"), 403);
	assert_contains(last_reason(&f), "(a cached answer)");
	assert_int_equal(py_questions(&py), 2);
	assert_int_equal(upstream_count(&f.up), 1);
	/* It ends cleanly, with its counters. */
	assert_int_equal(al_gateway_proc_end(f.gp, &st), 0);
	assert_int_equal(st.denied, 2);
	assert_int_equal(st.allowed, 1);
	py_stop(&py);
	fx_stop(&f);
}

static int py_teardown(void **state)
{
	(void)state;
	if (live_py)
		py_stop(live_py);
	return 0;
}

static void test_confined_unix(void **state)
{
	(void)state;
	confined(false);
}

static void test_confined_tcp(void **state)
{
	(void)state;
	confined(true);
}

/* The connector writes the question itself (POST to its one egress
 * path, the gateway's body, its own Content-Length) and shuts the write
 * side before it passes the socket: a gateway taken over cannot send the
 * decider anything else on it (a PUT of a new policy, say). */
static char conn_dir[] = "/tmp/al-conn-XXXXXX";

/* Whatever the case did, its socket and directory go. */
static int conn_teardown(void **state)
{
	char path[64];

	(void)state;
	snprintf(path, sizeof(path), "%s/d.sock", conn_dir);
	unlink(path);
	rmdir(conn_dir);
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	return 0;
}

static void test_connector_writes_the_request(void **state)
{
	static const char body[] = "{\"input\": {\"host\": \"a.test\"}}";
	char *dir = conn_dir, path[64], buf[4096], cbuf[CMSG_SPACE(sizeof(int))];
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	struct gw_connector_reply m;
	char msg[256] = "";
	int cfd = -1, fd = -1;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/d.sock", dir);
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
	int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(ls >= 0);
	assert_int_equal(bind(ls, (struct sockaddr *)&sun, sizeof(sun)), 0);
	assert_int_equal(listen(ls, 4), 0);
	pid_t before = getpid();
	assert_int_equal(
	    gw_connector_start(path, "/v1/data/airlock/egress", &cfd, msg, sizeof(msg)), 0);
	assert_int_equal(getpid(), before);

	char q[sizeof(uint64_t) + sizeof(body) - 1];
	uint64_t token = 42;
	memcpy(q, &token, sizeof(token));
	memcpy(q + sizeof(token), body, sizeof(body) - 1);
	assert_int_equal(send(cfd, q, sizeof(q), 0), (ssize_t)sizeof(q));
	struct pollfd p = {.fd = cfd, .events = POLLIN};
	assert_int_equal(poll(&p, 1, 5000), 1);
	struct iovec iov = {&m, sizeof(m)};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
	assert_int_equal(recvmsg(cfd, &mh, MSG_CMSG_CLOEXEC), (ssize_t)sizeof(m));
	assert_int_equal(m.token, 42);
	assert_int_equal(m.error, 0);
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	assert_non_null(cm);
	memcpy(&fd, CMSG_DATA(cm), sizeof(int));

	/* The gateway's end cannot write: the connector shut it. */
	errno = 0;
	assert_int_equal(send(fd, "PUT /v1/policies/x HTTP/1.1\r\n\r\n", 32, MSG_NOSIGNAL), -1);
	assert_int_equal(errno, EPIPE);

	int as = accept(ls, NULL, NULL);
	assert_true(as >= 0);
	size_t n = 0;
	ssize_t r;
	while ((r = read(as, buf + n, sizeof(buf) - 1 - n)) > 0)
		n += (size_t)r;
	buf[n] = '\0';
	static const char line[] = "POST /v1/data/airlock/egress HTTP/1.1\r\n";
	assert_true(strncmp(buf, line, sizeof(line) - 1) == 0);
	char cl[48];
	snprintf(cl, sizeof(cl), "Content-Length: %zu\r\n", sizeof(body) - 1);
	assert_non_null(strstr(buf, cl));
	assert_non_null(strstr(buf, "Connection: close\r\n"));
	assert_non_null(strstr(buf, "\r\n\r\n{\"input\": {\"host\": \"a.test\"}}"));
	assert_null(strstr(buf, "PUT"));
	close(as);
	close(fd);
	close(cfd); /* the connector ends when its socket does */
	close(ls);
	while (waitpid(-1, NULL, 0) > 0)
		;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_never_mapped),
	    cmocka_unit_test(test_never_literal),
	    cmocka_unit_test(test_never_name),
	    cmocka_unit_test(test_never_resolved),
	    cmocka_unit_test(test_egress_verdict),
	    cmocka_unit_test(test_decider_answers),
	    cmocka_unit_test(test_decider_fails_closed),
	    cmocka_unit_test(test_decider_tcp),
	    cmocka_unit_test_teardown(test_connector_writes_the_request, conn_teardown),
	    cmocka_unit_test_teardown(test_confined_unix, py_teardown),
	    cmocka_unit_test_teardown(test_confined_tcp, py_teardown),
	};

	signal(SIGPIPE, SIG_IGN);
	if (argc > 1)
		standin_script = argv[1];
	return cmocka_run_group_tests(tests, NULL, NULL);
}
