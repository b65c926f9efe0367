/* mcp/http.h: the answer parser of airlock mcp's HTTP client, fed framings
 * good and bad; and one request against a stand-in server on a Unix socket
 * in a temporary directory (the deadline, the answer read to the close). */
#include "unit.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mcp/http.h"

static int parse(const char *s, struct al_mcp_http_answer *a, struct al_error *err)
{
	return al_mcp_http_parse(s, strlen(s), 64, a, err);
}

static void expect_refused(const char *s, int code, const char *words)
{
	struct al_mcp_http_answer a;
	struct al_error err = {0};

	if (parse(s, &a, &err) != -code)
		fail_msg("not refused with %d: %s", code, s);
	assert_null(a.body);
	assert_contains(err.msg, words);
}

static void test_framings(void **state)
{
	struct al_mcp_http_answer a;
	struct al_error err = {0};

	(void)state;
	assert_int_equal(parse("HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n"
			       "content-length: 4\r\n\r\n{}{}extra",
			       &a, &err),
			 0);
	assert_int_equal(a.status, 201);
	assert_string_equal(a.content_type, "application/json");
	assert_int_equal(a.body_len, 4);
	assert_string_equal(a.body, "{}{}");
	al_mcp_http_answer_clear(&a);

	assert_int_equal(parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n"
			       "3;x=y\r\nabc\r\na\r\n0123456789\r\n0\r\nT: 1\r\n\r\n",
			       &a, &err),
			 0);
	assert_int_equal(a.body_len, 13);
	assert_string_equal(a.body, "abc0123456789");
	al_mcp_http_answer_clear(&a);

	/* No framing: the body runs to the close. */
	assert_int_equal(parse("HTTP/1.0 404 Not Found\r\n\r\nno route", &a, &err), 0);
	assert_int_equal(a.status, 404);
	assert_string_equal(a.body, "no route");
	assert_string_equal(a.content_type, "");
	al_mcp_http_answer_clear(&a);

	assert_int_equal(parse("HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n", &a, &err),
			 0);
	assert_int_equal(a.body_len, 0);
	assert_string_equal(a.body, "");
	al_mcp_http_answer_clear(&a);
}

static void test_refused(void **state)
{
	char *big;

	(void)state;
	expect_refused("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n", EPROTO, "no end of head");
	expect_refused("HTTP/2 200\r\n\r\n", EPROTO, "status line");
	expect_refused("HTTP/1.1 2x0 OK\r\n\r\n", EPROTO, "status code");
	expect_refused("HTTP/1.1 100 Continue\r\n\r\n", EPROTO, "1xx");
	expect_refused("HTTP/1.1 200 OK\r\nno colon\r\n\r\n", EPROTO, "header field");
	expect_refused("HTTP/1.1 200 OK\r\nBad Name: 1\r\n\r\n", EPROTO, "field name");
	expect_refused("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx", EPROTO,
		       "Content-Length");
	expect_refused("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", EPROTO, "Content-Length");
	expect_refused("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort", EPROTO, "shorter");
	expect_refused("HTTP/1.1 200 OK\r\nContent-Length: 65\r\n\r\n", EFBIG, "body over 64");
	expect_refused("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
		       EPROTO, "both");
	expect_refused("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", EPROTO,
		       "transfer coding");
	expect_refused("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", EPROTO,
		       "chunk size");
	expect_refused("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", EPROTO,
		       "truncated chunk");
	expect_refused("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXY0\r\n\r\n",
		       EPROTO, "CRLF");
	expect_refused("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n", EPROTO,
		       "truncated chunk size");
	expect_refused("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n", EPROTO,
		       "trailer");
	expect_refused("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
		       "40\r\n0123456789012345678901234567890123456789012345678901234567890123\r\n"
		       "1\r\nx\r\n0\r\n\r\n",
		       EFBIG, "body over 64");
	expect_refused("HTTP/1.1 200 OK\r\n\r\n0123456789012345678901234567890123456789012345678901"
		       "234567890123456789",
		       EFBIG, "body over 64");
	/* A head that does not end within 64 KiB. */
	big = malloc(AL_MCP_HTTP_HEAD_MAX + 64);
	memset(big, 'a', AL_MCP_HTTP_HEAD_MAX + 63);
	memcpy(big, "HTTP/1.1 200 OK\r\nX: ", 20);
	big[AL_MCP_HTTP_HEAD_MAX + 63] = '\0';
	expect_refused(big, E2BIG, "head over");
	free(big);
}

/* A stand-in server: accepts one connection, reads the request's head,
 * then answers ans (NULL: answers nothing, holds the connection). */
static pid_t serve_once(const char *path, const char *ans)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int l = socket(AF_UNIX, SOCK_STREAM, 0);

	strcpy(sa.sun_path, path);
	assert_int_equal(bind(l, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(l, 1), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char buf[4096];
		size_t n = 0;
		int c = accept(l, NULL, NULL);
		while (n < sizeof(buf) - 1 && !memmem(buf, n, "\r\n\r\nbody", 8)) {
			ssize_t r = read(c, buf + n, sizeof(buf) - 1 - n);
			if (r <= 0)
				_exit(1);
			n += (size_t)r;
		}
		if (!ans) {
			pause();
			_exit(0);
		}
		_exit(write(c, ans, strlen(ans)) == (ssize_t)strlen(ans) ? 0 : 1);
	}
	close(l);
	return pid;
}

static void test_request(void **state)
{
	char dir[] = "/tmp/airlock-test-mcp-XXXXXX", path[128];
	struct al_mcp_http_answer a;
	struct al_error err = {0};
	int status;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/s", dir);
	pid_t pid = serve_once(path, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
	assert_int_equal(al_mcp_http_request(path, "POST", "/v1/x", "body", 4, "text/plain", 10000,
					     NULL, &a, &err),
			 0);
	assert_int_equal(a.status, 200);
	assert_string_equal(a.body, "ok");
	al_mcp_http_answer_clear(&a);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_int_equal(status, 0);
	unlink(path);

	/* A server that never answers: the deadline ends the request. */
	pid = serve_once(path, NULL);
	assert_int_equal(
	    al_mcp_http_request(path, "POST", "/v1/x", "body", 4, NULL, 200, NULL, &a, &err),
	    -ETIMEDOUT);
	assert_contains(err.msg, "in time");
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	unlink(path);

	/* Nothing listening. */
	assert_true(al_mcp_http_request(path, "GET", "/", NULL, 0, NULL, 1000, NULL, &a, &err) < 0);
	assert_contains(err.msg, "connect to");
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_framings),
	    cmocka_unit_test(test_refused),
	    cmocka_unit_test(test_request),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
