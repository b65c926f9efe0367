/* decider/decider.h: the external decider's client against a stand-in
 * server in a thread of this test, on a Unix socket in a temporary
 * directory or on 127.0.0.1 (a port the kernel picked). Each case gives the
 * stand-in the exact bytes to answer (or makes it hang, or hang up) and
 * checks what the client asked and made of the answer; the cache is pure.
 * No other address is ever connected to: the non-loopback hosts are
 * refused before a socket exists, which the case checks. */
#include "unit.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/epoll.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/sys.h"
#include "core/util.h"
#include "decider/decider.h"

#define EGRESS "/v1/data/airlock/egress"

enum mode {
	ANSWER, /* read the question, write answer, close */
	HANG,	/* read the question, then wait until the test ends */
	HANG_UP /* read the question, close without a word */
};

struct server {
	int lfd;
	int stop[2];
	char dir[64];
	char path[108];
	uint16_t port;
	pthread_t th;
	enum mode mode;
	const char *answer;
	size_t answer_len;
	int accepted;
	char request[8192];
	size_t request_len;
};

/* The question's head and its Content-Length body, or what came before
 * EOF. */
static void read_question(struct server *s, int fd)
{
	size_t want = 0;

	s->request_len = 0;
	for (;;) {
		struct pollfd p[2] = {{.fd = fd, .events = POLLIN},
				      {.fd = s->stop[0], .events = POLLIN}};
		if (poll(p, 2, 5000) <= 0 || p[1].revents)
			return;
		ssize_t n =
		    read(fd, s->request + s->request_len, sizeof(s->request) - 1 - s->request_len);
		if (n <= 0)
			return;
		s->request_len += (size_t)n;
		s->request[s->request_len] = '\0';
		char *end = strstr(s->request, "\r\n\r\n");
		const char *cl = strcasestr(s->request, "\r\nContent-Length: ");
		if (end && cl && !want)
			want = (size_t)(end + 4 - s->request) + strtoul(cl + 18, NULL, 10);
		if (end && want && s->request_len >= want)
			return;
	}
}

static void *serve(void *data)
{
	struct server *s = data;

	for (;;) {
		struct pollfd p[2] = {{.fd = s->lfd, .events = POLLIN},
				      {.fd = s->stop[0], .events = POLLIN}};
		if (poll(p, 2, -1) < 0 || p[1].revents)
			return NULL;
		int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		s->accepted++;
		read_question(s, fd);
		if (s->mode == ANSWER) {
			size_t off = 0;
			while (off < s->answer_len) {
				ssize_t n =
				    send(fd, s->answer + off, s->answer_len - off, MSG_NOSIGNAL);
				if (n <= 0)
					break;
				off += (size_t)n;
			}
		} else if (s->mode == HANG) {
			struct pollfd q = {.fd = s->stop[0], .events = POLLIN};
			poll(&q, 1, 10000);
		}
		close(fd);
	}
}

static void server_start(struct server *s, bool tcp, enum mode mode, const char *answer, size_t len)
{
	memset(s, 0, sizeof(*s));
	s->mode = mode;
	s->answer = answer;
	s->answer_len = len ? len : (answer ? strlen(answer) : 0);
	assert_int_equal(pipe2(s->stop, O_CLOEXEC), 0);
	if (tcp) {
		struct sockaddr_in sin = {.sin_family = AF_INET,
					  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		socklen_t sl = sizeof(sin);
		s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		assert_true(s->lfd >= 0);
		assert_int_equal(bind(s->lfd, (struct sockaddr *)&sin, sizeof(sin)), 0);
		assert_int_equal(getsockname(s->lfd, (struct sockaddr *)&sin, &sl), 0);
		s->port = ntohs(sin.sin_port);
	} else {
		struct sockaddr_un sun = {.sun_family = AF_UNIX};
		snprintf(s->dir, sizeof(s->dir), "/tmp/al-decider-XXXXXX");
		assert_non_null(mkdtemp(s->dir));
		snprintf(s->path, sizeof(s->path), "%s/opa.sock", s->dir);
		snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", s->path);
		s->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		assert_true(s->lfd >= 0);
		assert_int_equal(bind(s->lfd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	}
	assert_int_equal(listen(s->lfd, 8), 0);
	assert_int_equal(pthread_create(&s->th, NULL, serve, s), 0);
}

static void server_stop(struct server *s)
{
	assert_int_equal(write(s->stop[1], "x", 1), 1);
	pthread_join(s->th, NULL);
	close(s->lfd);
	close(s->stop[0]);
	close(s->stop[1]);
	if (s->path[0])
		unlink(s->path);
	if (s->dir[0])
		rmdir(s->dir);
}

static struct al_decider_conf conf_for(struct server *s, uint64_t timeout_ms)
{
	struct al_decider_conf c = {.timeout_ms = timeout_ms};
	if (s->path[0]) {
		c.socket = s->path;
	} else {
		c.host = "127.0.0.1";
		c.port = s->port;
	}
	return c;
}

static json_t *egress_input(void)
{
	return json_pack("{s:s, s:s, s:i, s:s, s:s, s:s}", "method", "GET", "host", "api.test",
			 "port", 443, "path", "/x", "run", "0123456789abcdef", "profile",
			 "default");
}

/* Ask s, answering with answer; the call's return value. */
static int ask(struct server *s, uint64_t timeout_ms, json_t **res, struct al_error *err)
{
	struct al_decider_conf c = conf_for(s, timeout_ms);
	json_t *in = egress_input();
	int r = al_decider_ask(&c, EGRESS, in, res, err);
	json_decref(in);
	return r;
}

#define OK_HEAD "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"

/* head (status line and fields), Content-Length, body: free() it. */
static char *framed(const char *head, const char *body)
{
	return xasprintf("%sContent-Length: %zu\r\n\r\n%s", head, strlen(body), body);
}

static void test_good_answer_unix(void **state)
{
	char *answer = framed(OK_HEAD, "{\"result\": {\"allow\": true, \"reason\": \"ok\"}}");
	struct server s;
	struct al_error err = {0};
	json_t *res = NULL;

	(void)state;
	server_start(&s, false, ANSWER, answer, 0);
	assert_int_equal(ask(&s, 2000, &res, &err), 0);
	assert_true(json_is_object(res));
	assert_true(json_is_true(json_object_get(res, "allow")));
	assert_string_equal(json_string_value(json_object_get(res, "reason")), "ok");
	json_decref(res);
	server_stop(&s);
	free(answer);
	/* What was asked: the request line, the headers the data API needs,
	 * and {"input": ...} exactly as given. */
	assert_int_equal(s.accepted, 1);
	assert_true(strncmp(s.request, "POST " EGRESS " HTTP/1.1\r\n", 36) == 0);
	assert_contains(s.request, "\r\nHost: localhost\r\n");
	assert_contains(s.request, "\r\nContent-Type: application/json\r\n");
	assert_contains(s.request, "\r\nConnection: close\r\n");
	const char *body = strstr(s.request, "\r\n\r\n") + 4;
	char cl[64];
	snprintf(cl, sizeof(cl), "\r\nContent-Length: %zu\r\n", strlen(body));
	assert_contains(s.request, cl);
	json_error_t jerr;
	json_t *q = json_loads(body, 0, &jerr);
	assert_non_null(q);
	json_t *in = json_object_get(q, "input");
	assert_string_equal(json_string_value(json_object_get(in, "host")), "api.test");
	assert_int_equal(json_integer_value(json_object_get(in, "port")), 443);
	assert_string_equal(json_string_value(json_object_get(in, "run")), "0123456789abcdef");
	json_decref(q);
}

static void test_boolean_answer_tcp(void **state)
{
	static const char answer[] = OK_HEAD "Content-Length: 16\r\n\r\n{\"result\": true}";
	struct server s;
	struct al_error err = {0};
	json_t *res = NULL;
	char host[32];

	(void)state;
	server_start(&s, true, ANSWER, answer, 0);
	assert_int_equal(ask(&s, 2000, &res, &err), 0);
	assert_true(json_is_true(res));
	json_decref(res);
	server_stop(&s);
	snprintf(host, sizeof(host), "\r\nHost: 127.0.0.1:%u\r\n", s.port);
	assert_contains(s.request, host);
}

/* Answers that frame differently: read to EOF, chunked, and a result of
 * false (any type is the caller's to judge). */
static void test_framings(void **state)
{
	static const char to_eof[] = "HTTP/1.0 200 OK\r\n\r\n{\"result\": false}";
	static const char chunked[] = OK_HEAD "Transfer-Encoding: chunked\r\n\r\n"
					      "5\r\n{\"res\r\n"
					      "b;ext=1\r\nult\": [1, 2\r\n"
					      "2\r\n]}\r\n"
					      "0\r\nX-Trailer: y\r\n\r\n";
	struct server s;
	struct al_error err = {0};
	json_t *res = NULL;

	(void)state;
	server_start(&s, false, ANSWER, to_eof, 0);
	assert_int_equal(ask(&s, 2000, &res, &err), 0);
	assert_true(json_is_false(res));
	json_decref(res);
	server_stop(&s);

	server_start(&s, true, ANSWER, chunked, 0);
	res = NULL;
	assert_int_equal(ask(&s, 2000, &res, &err), 0);
	assert_true(json_is_array(res));
	assert_int_equal(json_array_size(res), 2);
	json_decref(res);
	server_stop(&s);
}

/* One bad answer: the call fails with code, its message naming the
 * decider, the path and want. */
static void expect_bad(bool tcp, const char *answer, size_t len, int code, const char *want)
{
	struct server s;
	struct al_error err = {0};
	json_t *res = NULL;
	char who[160];

	server_start(&s, tcp, ANSWER, answer, len);
	struct al_decider_conf c = conf_for(&s, 2000);
	al_decider_describe(&c, who, sizeof(who));
	assert_int_equal(ask(&s, 2000, &res, &err), -code);
	assert_null(res);
	server_stop(&s);
	assert_contains(err.msg, who);
	assert_contains(err.msg, "POST " EGRESS);
	assert_contains(err.msg, want);
}

static void test_status_not_200(void **state)
{
	char *a = framed("HTTP/1.1 500 Internal Server Error\r\n",
			 "{\"code\": \"internal_error\", \"message\": \"boom\\u0001\"}");

	(void)state;
	expect_bad(false, a, 0, EPROTO, "status 500 (boom?)");
	free(a);
	expect_bad(true, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n", 0, EPROTO,
		   "status 404");
	/* An interim answer is not the answer. */
	expect_bad(false, "HTTP/1.1 100 Continue\r\n\r\n", 0, EPROTO, "status 100");
}

static void test_garbage(void **state)
{
	(void)state;
	expect_bad(false, OK_HEAD "Content-Length: 16\r\n\r\nthis is not json", 0, EPROTO,
		   "the answer is not JSON: ");
	/* Two "result" members: which one would count? Neither. */
	char *a = framed(OK_HEAD, "{\"result\": true, \"result\": false}");
	expect_bad(false, a, 0, EPROTO, "the answer is not JSON: ");
	free(a);
	expect_bad(true, OK_HEAD "Content-Length: 6\r\n\r\n[true]", 0, EPROTO,
		   "the answer is not a JSON object");
	expect_bad(false, "SSH-2.0-OpenSSH\r\n\r\n", 0, EPROTO,
		   "does not start with an HTTP/1.x status line");
	expect_bad(false, OK_HEAD "Bad Header\r\n\r\n{}", 0, EPROTO, "malformed header line");
	expect_bad(false, OK_HEAD "Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}", 0, EPROTO,
		   "two different Content-Length");
	expect_bad(false, OK_HEAD "Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n{}", 0,
		   EPROTO, "both Content-Length and Transfer-Encoding");
	expect_bad(false, OK_HEAD "Transfer-Encoding: gzip\r\n\r\n{}", 0, EPROTO,
		   "transfer coding \"gzip\" is not supported");
	expect_bad(false, OK_HEAD "Transfer-Encoding: chunked\r\n\r\n2\r\n{}XX0\r\n\r\n", 0, EPROTO,
		   "a chunk that does not end in CRLF");
	expect_bad(false, OK_HEAD "Transfer-Encoding: chunked\r\n\r\nzz\r\n", 0, EPROTO,
		   "malformed chunk size line");
	expect_bad(false, OK_HEAD "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n", 0, EPROTO,
		   "ends inside its chunked body");
	expect_bad(true, OK_HEAD "Content-Length: 40\r\n\r\n{\"result\": 1}", 0, EPROTO,
		   "ends after 13 of its 40 bytes");
	expect_bad(false, "HTTP/1.1 200 OK\r\nContent-", 0, EPROTO, "ends inside its head");
	expect_bad(false, "", 0, EPROTO, "closed without an answer");
}

static void test_undefined(void **state)
{
	(void)state;
	expect_bad(false, OK_HEAD "Content-Length: 2\r\n\r\n{}", 0, ENOENT,
		   "the answer has no \"result\" (undefined decision at " EGRESS ")");
}

/* Over the cap: said in advance, sent without a length, in chunks, or a
 * head that never ends. */
static void test_too_big(void **state)
{
	size_t big = AL_DECIDER_ANSWER_MAX + 4096;
	char *buf = xmalloc(big + 256);
	int n;

	(void)state;
	expect_bad(false, OK_HEAD "Content-Length: 2097152\r\n\r\n{", 0, E2BIG, "over the cap");
	n = snprintf(buf, 256, "HTTP/1.1 200 OK\r\n\r\n{\"result\": \"");
	memset(buf + n, 'a', big - (size_t)n);
	expect_bad(true, buf, big, E2BIG, "over 1048576 bytes");
	free(buf);
	size_t chunks = AL_DECIDER_ANSWER_MAX / 4096 + 2, clen = 256 + chunks * (4096 + 8);
	buf = xmalloc(clen);
	n = snprintf(buf, clen, OK_HEAD "Transfer-Encoding: chunked\r\n\r\n");
	for (size_t k = 0; k < chunks; k++) {
		n += snprintf(buf + n, clen - (size_t)n, "1000\r\n");
		memset(buf + n, 'b', 4096);
		n += 4096;
		n += snprintf(buf + n, clen - (size_t)n, "\r\n");
	}
	expect_bad(false, buf, (size_t)n, E2BIG, "over 1048576 bytes");
	free(buf);
	size_t hlen = AL_DECIDER_HEAD_MAX + 100;
	buf = xmalloc(hlen);
	n = snprintf(buf, hlen, "HTTP/1.1 200 OK\r\nX: ");
	memset(buf + n, 'h', hlen - (size_t)n);
	expect_bad(false, buf, hlen, E2BIG, "head is over 16384 bytes");
	free(buf);
}

/* A decider that accepts and never answers: the question ends at its
 * timeout, not later. */
static void test_hang_times_out(void **state)
{
	struct server s;
	struct al_error err = {0};
	json_t *res = NULL;

	(void)state;
	for (int tcp = 0; tcp < 2; tcp++) {
		server_start(&s, tcp, HANG, NULL, 0);
		uint64_t t0 = al_now_ms();
		assert_int_equal(ask(&s, 200, &res, &err), -ETIMEDOUT);
		uint64_t took = al_now_ms() - t0;
		server_stop(&s);
		/* Not before its 200 ms; the upper bound is a hang guard (how
		 * late a timer fires depends on the machine's load). */
		assert_true(took >= 150 && took <= 5000);
		assert_contains(err.msg, "no answer within 200 ms");
		assert_null(res);
	}
	/* One that hangs up after reading: no answer is no. */
	server_start(&s, false, HANG_UP, NULL, 0);
	assert_int_equal(ask(&s, 2000, &res, &err), -EPROTO);
	server_stop(&s);
	assert_contains(err.msg, "closed without an answer");
}

static void test_refused(void **state)
{
	struct al_decider_conf c = {.socket = "/nonexistent/airlock-decider.sock",
				    .timeout_ms = 500};
	struct al_error err = {0};
	json_t *res = NULL;

	(void)state;
	assert_int_equal(al_decider_ask(&c, EGRESS, NULL, &res, &err), -ENOENT);
	assert_contains(err.msg,
			"decider /nonexistent/airlock-decider.sock: POST " EGRESS ": connect: ");
	/* A loopback port nobody listens on: bound here and closed. */
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &sl), 0);
	close(fd);
	c = (struct al_decider_conf){
	    .host = "127.0.0.1", .port = ntohs(sin.sin_port), .timeout_ms = 500};
	assert_int_equal(al_decider_ask(&c, EGRESS, NULL, &res, &err), -ECONNREFUSED);
	assert_contains(err.msg, "connect: Connection refused");
	char who[64];
	snprintf(who, sizeof(who), "decider http://127.0.0.1:%u: ", ntohs(sin.sin_port));
	assert_contains(err.msg, who);
	/* A socket path that does not fit a sockaddr_un. */
	char longp[200];
	memset(longp, 'x', sizeof(longp) - 1);
	longp[0] = '/';
	longp[sizeof(longp) - 1] = '\0';
	c = (struct al_decider_conf){.socket = longp};
	assert_int_equal(al_decider_ask(&c, EGRESS, NULL, &res, &err), -ENAMETOOLONG);
	assert_contains(err.msg, "at most 107 fit");
}

/* Whatever the configuration says, no host but 127.0.0.1 and ::1: refused
 * before a socket is made (the next fd number is unchanged). */
static void test_not_loopback(void **state)
{
	static const char *hosts[] = {
	    "10.0.0.1", "127.0.0.2", "::ffff:127.0.0.1", "localhost", "0.0.0.0", "", NULL};
	struct al_error err = {0};
	json_t *res = NULL;

	(void)state;
	for (size_t i = 0; i < AL_ARRAY_SIZE(hosts); i++) {
		struct al_decider_conf c = {.host = (char *)hosts[i], .port = 8181};
		int before = dup(0);
		close(before);
		assert_int_equal(al_decider_ask(&c, EGRESS, NULL, &res, &err), -EPERM);
		int after = dup(0);
		close(after);
		assert_int_equal(before, after);
		assert_contains(err.msg, "only asked on 127.0.0.1 or ::1");
	}
	struct al_decider_conf c = {.host = "127.0.0.1", .port = 0};
	assert_int_equal(al_decider_ask(&c, EGRESS, NULL, &res, &err), -EPERM);
}

static void test_bad_path(void **state)
{
	static const char *paths[] = {"v1/data/x", "/v1/data x", "/v1/\r\nHost: evil", "", NULL};
	struct al_decider_conf c = {.socket = "/nonexistent/x.sock"};
	struct al_error err = {0};
	json_t *res = NULL;

	(void)state;
	for (size_t i = 0; i < AL_ARRAY_SIZE(paths); i++) {
		assert_int_equal(al_decider_ask(&c, paths[i], NULL, &res, &err), -EINVAL);
		assert_contains(err.msg, "not an absolute HTTP path");
	}
}

/* The non-blocking call over a socket given to it (the gateway's way):
 * the answer comes in two pieces, the call waits in between; a call past
 * its deadline fails at its next step. */
static void test_call_on_fd(void **state)
{
	static const char part1[] = OK_HEAD "Content-Length: 16\r\n\r\n{\"resul";
	static const char part2[] = "t\": null}";
	struct al_decider_conf conf = {.socket = "/unused.sock", .timeout_ms = 5000};
	struct al_decider_call *call = NULL;
	struct al_error err = {0};
	json_t *res = NULL;
	char buf[4096];
	int sv[2];

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	json_t *null_input = json_null();
	assert_int_equal(al_decider_call_start_fd(&conf, EGRESS, null_input, sv[0], 0, &call, &err),
			 0);
	json_decref(null_input);
	assert_int_equal(al_decider_call_fd(call), sv[0]);
	assert_int_equal(al_decider_call_events(call), EPOLLOUT);
	assert_true(al_decider_call_deadline(call) > al_now_ms() + 4000);
	assert_int_equal(al_decider_call_step(call, &res, &err), 0);
	assert_int_equal(al_decider_call_events(call), EPOLLIN);
	ssize_t n = read(sv[1], buf, sizeof(buf) - 1);
	assert_true(n > 0);
	buf[n] = '\0';
	assert_contains(buf, "{\"input\":null}");
	assert_int_equal(write(sv[1], part1, strlen(part1)), (ssize_t)strlen(part1));
	assert_int_equal(al_decider_call_step(call, &res, &err), 0);
	assert_int_equal(write(sv[1], part2, strlen(part2)), (ssize_t)strlen(part2));
	assert_int_equal(al_decider_call_step(call, &res, &err), 1);
	assert_true(json_is_null(res));
	json_decref(res);
	assert_int_equal(al_decider_call_step(call, &res, &err), -EALREADY);
	al_decider_call_free(call);
	close(sv[1]);

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(
	    al_decider_call_start_fd(&conf, EGRESS, NULL, sv[0], al_now_ms() + 50, &call, &err), 0);
	/* No input: the question was written already (the connector's
	 * way); the call only reads. */
	assert_int_equal(al_decider_call_events(call), EPOLLIN);
	assert_int_equal(al_decider_call_step(call, &res, &err), 0);
	usleep(80 * 1000);
	assert_int_equal(al_decider_call_step(call, &res, &err), -ETIMEDOUT);
	assert_contains(err.msg, "no answer within 5000 ms");
	al_decider_call_free(call);
	close(sv[1]);
}

/* Answers cut, flipped and spliced at random, fed whole through a socket
 * the call is given (then EOF): each is an answer or an error, never a
 * crash, a hang or a read past what came (the sanitizer builds check). */
static void test_random_answers(void **state)
{
	static const char *const seeds[] = {
	    OK_HEAD "Content-Length: 16\r\n\r\n{\"result\": true}",
	    "HTTP/1.0 200 OK\r\n\r\n{\"result\": {\"allow\": false, \"reason\": \"x\"}}",
	    OK_HEAD "Transfer-Encoding: chunked\r\n\r\n5\r\n{\"res\r\n"
		    "b;e=1\r\nult\": [1, 2\r\n2\r\n]}\r\n0\r\nT: y\r\n\r\n",
	    "HTTP/1.1 500 Oops\r\nContent-Length: 20\r\n\r\n{\"message\": \"boom\"}",
	};
	struct al_decider_conf conf = {.socket = "/unused.sock", .timeout_ms = 2000};
	unsigned seed = 12345, answered = 0, failed = 0;
	char buf[512], sink[4096];

	(void)state;
	for (int i = 0; i < 3000; i++) {
		const char *s = seeds[(unsigned)i % AL_ARRAY_SIZE(seeds)];
		size_t n = strlen(s);
		memcpy(buf, s, n);
		for (int k = rand_r(&seed) % 4; k >= 0 && n > 0; k--) {
			size_t at = (size_t)rand_r(&seed) % n;
			switch (rand_r(&seed) % 4) {
			case 0: /* cut */
				n = at;
				break;
			case 1: /* flip a byte */
				buf[at] = (char)rand_r(&seed);
				break;
			case 2: /* a CRLF, a digit or a colon in */
				buf[at] = "\r\n0:f;"[rand_r(&seed) % 6];
				break;
			default: /* repeat a piece */
				if (n + 16 < sizeof(buf)) {
					memmove(buf + at + 16, buf + at, n - at);
					n += 16;
				}
			}
		}
		struct al_decider_call *call = NULL;
		struct al_error err = {0};
		json_t *res = NULL;
		int sv[2], r;
		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
		assert_int_equal(write(sv[1], buf, n), (ssize_t)n);
		shutdown(sv[1], SHUT_WR);
		assert_int_equal(
		    al_decider_call_start_fd(&conf, EGRESS, NULL, sv[0], 0, &call, &err), 0);
		while ((r = al_decider_call_step(call, &res, &err)) == 0)
			assert_true(read(sv[1], sink, sizeof(sink)) >= 0);
		if (r > 0) {
			answered++;
			json_decref(res);
		} else {
			failed++;
			assert_contains(err.msg, "decider /unused.sock: POST " EGRESS ": ");
		}
		al_decider_call_free(call);
		close(sv[1]);
	}
	print_message("random answers: %u answered, %u refused\n", answered, failed);
	assert_true(answered > 100 && failed > 100);
}

static void test_cache(void **state)
{
	struct al_decider_cache *c = al_decider_cache_new(2, 1000);
	const char *reason = "x";
	bool allow = false;

	(void)state;
	assert_null(al_decider_cache_new(0, 1000));
	assert_null(al_decider_cache_new(10, 0));
	assert_false(al_decider_cache_get(NULL, "a", 0, &allow, &reason));
	al_decider_cache_put(NULL, "a", 0, true, NULL);

	assert_false(al_decider_cache_get(c, "a", 10, &allow, &reason));
	al_decider_cache_put(c, "a", 10, true, NULL);
	al_decider_cache_put(c, "b", 20, false, "not b");
	assert_true(al_decider_cache_get(c, "a", 500, &allow, &reason));
	assert_true(allow);
	assert_null(reason);
	assert_true(al_decider_cache_get(c, "b", 500, &allow, &reason));
	assert_false(allow);
	assert_string_equal(reason, "not b");
	/* Eviction: "a" was used last, so "b" goes for "c". */
	assert_true(al_decider_cache_get(c, "a", 600, &allow, NULL));
	al_decider_cache_put(c, "c", 600, true, NULL);
	assert_int_equal(al_decider_cache_count(c), 2);
	assert_false(al_decider_cache_get(c, "b", 600, &allow, &reason));
	assert_true(al_decider_cache_get(c, "a", 600, &allow, NULL));
	assert_true(al_decider_cache_get(c, "c", 600, &allow, NULL));
	/* Expiry: "a" was answered at 10, so at 1010 it is gone. */
	assert_true(al_decider_cache_get(c, "a", 1009, &allow, NULL));
	assert_false(al_decider_cache_get(c, "a", 1010, &allow, NULL));
	assert_int_equal(al_decider_cache_count(c), 1);
	/* A new answer replaces the old and restarts its clock. */
	al_decider_cache_put(c, "c", 1500, false, "changed");
	assert_true(al_decider_cache_get(c, "c", 2400, &allow, &reason));
	assert_false(allow);
	assert_string_equal(reason, "changed");
	assert_int_equal(al_decider_cache_count(c), 1);
	/* Too long a key is not kept; a long reason is cut. */
	char key[AL_DECIDER_KEY_MAX + 2], why[1000];
	memset(key, 'k', sizeof(key) - 1);
	key[sizeof(key) - 1] = '\0';
	memset(why, 'r', sizeof(why) - 1);
	why[sizeof(why) - 1] = '\0';
	al_decider_cache_put(c, key, 2400, true, NULL);
	assert_false(al_decider_cache_get(c, key, 2400, &allow, NULL));
	key[AL_DECIDER_KEY_MAX] = '\0';
	al_decider_cache_put(c, key, 2400, false, why);
	assert_true(al_decider_cache_get(c, key, 2400, &allow, &reason));
	assert_int_equal(strlen(reason), AL_DECIDER_REASON_MAX);
	al_decider_cache_free(c);

	/* Many keys through a small cache: never more than its size. */
	c = al_decider_cache_new(64, 100000);
	for (unsigned i = 0; i < 5000; i++) {
		char k[32];
		snprintf(k, sizeof(k), "GET\nhost%u\n443\n/", i);
		al_decider_cache_put(c, k, i, i % 2, NULL);
		assert_true(al_decider_cache_count(c) <= 64);
		assert_true(al_decider_cache_get(c, k, i, &allow, NULL));
		assert_int_equal(allow, i % 2);
	}
	assert_int_equal(al_decider_cache_count(c), 64);
	assert_false(al_decider_cache_get(c, "GET\nhost0\n443\n/", 5000, &allow, NULL));
	al_decider_cache_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_good_answer_unix), cmocka_unit_test(test_boolean_answer_tcp),
	    cmocka_unit_test(test_framings),	     cmocka_unit_test(test_status_not_200),
	    cmocka_unit_test(test_garbage),	     cmocka_unit_test(test_undefined),
	    cmocka_unit_test(test_too_big),	     cmocka_unit_test(test_hang_times_out),
	    cmocka_unit_test(test_refused),	     cmocka_unit_test(test_not_loopback),
	    cmocka_unit_test(test_bad_path),	     cmocka_unit_test(test_call_on_fd),
	    cmocka_unit_test(test_random_answers),   cmocka_unit_test(test_cache),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
