/* gateway/http.h: request-head parsing, Host checks, the upstream head and
 * the proxy's own responses. */
#include "unit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <string.h>

#include "core/cleanup.h"
#include "gateway/http.h"

static struct al_http_request req;

static int parse(const char *s)
{
	struct al_error err = {0};

	memset(&req, 0, sizeof(req));
	return al_http_parse_request(s, strlen(s), &req, &err);
}

static const char *slice(const char *buf, struct al_http_slice s)
{
	static char out[AL_HTTP_HEAD_MAX + 1];

	memcpy(out, buf + s.off, s.len);
	out[s.len] = '\0';
	return out;
}

/* Every strict prefix of a valid head is "need more", never an error. */
static void expect_prefixes_again(const char *s, size_t head_len)
{
	struct al_http_request r;

	for (size_t n = 0; n < head_len; n++) {
		struct al_error err = {0};
		int ret = al_http_parse_request(s, n, &r, &err);

		if (ret != -EAGAIN)
			fail_msg("prefix of %zu bytes of \"%s\" gave %d (%s), expected -EAGAIN", n,
				 s, ret, err.msg);
	}
}

static void expect_ok(const char *s)
{
	struct al_error err = {0};
	size_t head = strstr(s, "\r\n\r\n") + 4 - s;
	int r;

	memset(&req, 0, sizeof(req));
	r = al_http_parse_request(s, strlen(s), &req, &err);
	if (r < 0)
		fail_msg("parsing \"%s\" gave %d (%s), expected success", s, r, err.msg);
	assert_int_equal(r, head);
	assert_int_equal(req.head_len, head);
	expect_prefixes_again(s, head);
}

static void expect_error(const char *s, int want, const char *reason)
{
	struct al_error err = {0};
	struct al_http_request r;
	int ret;

	memset(&r, 0x5a, sizeof(r));
	ret = al_http_parse_request(s, strlen(s), &r, &err);
	if (ret != want)
		fail_msg("parsing \"%s\" gave %d (%s), expected %d", s, ret, err.msg, want);
	assert_int_equal(err.code, -want);
	if (reason)
		assert_contains(err.msg, reason);
	assert_int_equal(((unsigned char *)&r)[0], 0x5a);
}

static int find_header(const char *buf, const char *name)
{
	for (size_t i = 0; i < req.n_headers; i++)
		if (strcasecmp(slice(buf, req.headers[i].name), name) == 0)
			return (int)i;
	return -1;
}

static void test_connect(void **state)
{
	const char *s = "CONNECT Example.COM:443 HTTP/1.1\r\n"
			"Host: example.com:443\r\n"
			"Proxy-Authorization: Basic dXNlcjpwYXNz\r\n"
			"User-Agent: curl/8.0\r\n"
			"\r\n"
			"\x16\x03\x01 tunnel bytes";
	int i;

	expect_ok(s);
	assert_int_equal(req.form, AL_HTTP_FORM_AUTHORITY);
	assert_true(req.is_connect);
	assert_string_equal(slice(s, req.method), "CONNECT");
	assert_string_equal(slice(s, req.target), "Example.COM:443");
	assert_int_equal(req.host.kind, AL_HOST_NAME);
	assert_string_equal(req.host.text, "example.com");
	assert_int_equal(req.port, 443);
	assert_true(req.port_explicit);
	assert_int_equal(req.version_minor, 1);
	assert_int_equal(req.n_headers, 3);
	assert_int_equal(req.host_header, 0);
	assert_int_equal(req.path.len, 0);
	assert_int_equal(req.content_length, -1);
	i = find_header(s, "proxy-authorization");
	assert_int_equal(i, 1);
	assert_int_equal(req.headers[i].flags, AL_HTTP_HDR_PROXY | AL_HTTP_HDR_HOP);
	assert_string_equal(slice(s, req.headers[i].value), "Basic dXNlcjpwYXNz");
	assert_int_equal(req.headers[0].flags, AL_HTTP_HDR_HOST);
	assert_int_equal(req.headers[2].flags, 0);

	expect_ok("CONNECT [::1]:443 HTTP/1.1\r\nHost: [::1]:443\r\n\r\n");
	assert_int_equal(req.host.kind, AL_HOST_IPV6);
	assert_string_equal(req.host.text, "::1");
	assert_int_equal(req.port, 443);

	expect_ok("CONNECT [2001:DB8::1]:8443 HTTP/1.1\r\nHost: [2001:db8::1]:8443\r\n\r\n");
	assert_string_equal(req.host.text, "2001:db8::1");

	expect_ok("CONNECT 10.0.0.1:65535 HTTP/1.0\r\n\r\n");
	assert_int_equal(req.host.kind, AL_HOST_IPV4);
	assert_int_equal(req.port, 65535);
	assert_int_equal(req.host_header, -1);

	/* Host without a port is accepted for CONNECT; with one it must agree. */
	expect_ok("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com\r\n\r\n");
	expect_ok("CONNECT example.com:443 HTTP/1.1\r\nHost: EXAMPLE.com.\r\n\r\n");
	expect_ok("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n"
		  "Content-Length: 0\r\n\r\n");
}

static void test_absolute(void **state)
{
	const char *s = "GET http://Example.COM/path/x?q=1&r=%20 HTTP/1.1\r\n"
			"Host: example.com\r\n"
			"Accept: */*\r\n"
			"\r\n";

	expect_ok(s);
	assert_int_equal(req.form, AL_HTTP_FORM_ABSOLUTE);
	assert_false(req.is_connect);
	assert_string_equal(req.host.text, "example.com");
	assert_int_equal(req.port, 80);
	assert_false(req.port_explicit);
	assert_string_equal(slice(s, req.path), "/path/x?q=1&r=%20");

	s = "GET HTTP://example.com:8080 HTTP/1.1\r\nHost: example.com:8080\r\n\r\n";
	expect_ok(s);
	assert_int_equal(req.port, 8080);
	assert_true(req.port_explicit);
	assert_int_equal(req.path.len, 0);

	s = "GET http://example.com?x=1 HTTP/1.0\r\n\r\n";
	expect_ok(s);
	assert_string_equal(slice(s, req.path), "?x=1");
	assert_int_equal(req.version_minor, 0);

	expect_ok("GET http://[::1]:8080/ HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n");
	assert_int_equal(req.host.kind, AL_HOST_IPV6);
	expect_ok("GET http://192.0.2.1/ HTTP/1.1\r\nHost: 192.0.2.1:80\r\n\r\n");
	assert_int_equal(req.host.kind, AL_HOST_IPV4);
	expect_ok("DELETE http://example.com/x HTTP/1.1\r\nHost: example.com\r\n\r\n");
}

static void test_origin(void **state)
{
	const char *s = "GET /index.html HTTP/1.1\r\nHost: WWW.Example.com:8080\r\n\r\n";

	expect_ok(s);
	assert_int_equal(req.form, AL_HTTP_FORM_ORIGIN);
	assert_string_equal(req.host.text, "www.example.com");
	assert_int_equal(req.port, 8080);
	assert_true(req.port_explicit);
	assert_string_equal(slice(s, req.path), "/index.html");

	expect_ok("GET / HTTP/1.1\r\nHost: example.com\r\n\r\n");
	assert_int_equal(req.port, 80);
	assert_false(req.port_explicit);

	/* HTTP/1.0 may omit Host: transparent capture then has no name. */
	expect_ok("GET / HTTP/1.0\r\n\r\n");
	assert_int_equal(req.host.kind, AL_HOST_NONE);
	assert_int_equal(req.host_header, -1);
}

static void test_headers(void **state)
{
	const char *s = "POST /upload HTTP/1.1\r\n"
			"Host: example.com\r\n"
			"X-Spaces: \t a  b \t \r\n"
			"X-Empty:\r\n"
			"X-Obs-Text: caf\xc3\xa9\r\n"
			"Content-Length: 1234567890\r\n"
			"\r\n";
	int i;

	expect_ok(s);
	i = find_header(s, "x-spaces");
	assert_string_equal(slice(s, req.headers[i].value), "a  b");
	i = find_header(s, "x-empty");
	assert_int_equal(req.headers[i].value.len, 0);
	i = find_header(s, "x-obs-text");
	assert_string_equal(slice(s, req.headers[i].value), "caf\xc3\xa9");
	assert_int_equal(req.content_length, 1234567890);
	assert_false(req.chunked);

	expect_ok("POST / HTTP/1.1\r\nHost: a.com\r\nTransfer-Encoding: Chunked\r\n\r\n");
	assert_true(req.chunked);
	assert_int_equal(req.content_length, -1);
	expect_ok("POST / HTTP/1.1\r\nHost: a.com\r\nContent-Length: 0\r\n\r\n");
	assert_int_equal(req.content_length, 0);
}

static void test_hop_by_hop(void **state)
{
	const char *s = "GET / HTTP/1.1\r\n"
			"Host: a.com\r\n"
			"Connection: keep-alive, X-Secret , ,x-other\r\n"
			"Keep-Alive: timeout=5\r\n"
			"X-Secret: 1\r\n"
			"X-Other: 2\r\n"
			"X-Kept: 3\r\n"
			"Proxy-Connection: keep-alive\r\n"
			"TE: trailers\r\n"
			"Trailer: X\r\n"
			"Upgrade: h2c\r\n"
			"\r\n";
	static const struct {
		const char *name;
		unsigned flags;
	} want[] = {
	    {"Host", AL_HTTP_HDR_HOST},
	    {"Connection", AL_HTTP_HDR_HOP},
	    {"Keep-Alive", AL_HTTP_HDR_HOP},
	    {"X-Secret", AL_HTTP_HDR_HOP},
	    {"X-Other", AL_HTTP_HDR_HOP},
	    {"X-Kept", 0},
	    {"Proxy-Connection", AL_HTTP_HDR_HOP | AL_HTTP_HDR_PROXY},
	    {"TE", AL_HTTP_HDR_HOP},
	    {"Trailer", AL_HTTP_HDR_HOP},
	    {"Upgrade", AL_HTTP_HDR_HOP},
	};

	expect_ok(s);
	assert_int_equal(req.n_headers, AL_ARRAY_SIZE(want));
	for (size_t i = 0; i < AL_ARRAY_SIZE(want); i++) {
		assert_string_equal(slice(s, req.headers[i].name), want[i].name);
		if (req.headers[i].flags != want[i].flags)
			fail_msg("%s: flags %u, expected %u", want[i].name, req.headers[i].flags,
				 want[i].flags);
	}
}

static void test_limits(void **state)
{
	static char s[AL_HTTP_HEAD_MAX + 64];
	size_t n;

	/* Exactly 64 fields parse; 65 do not. */
	n = (size_t)sprintf(s, "GET / HTTP/1.1\r\nHost: a.com\r\n");
	for (int i = 1; i < AL_HTTP_HEADERS_MAX; i++)
		n += (size_t)sprintf(s + n, "X-%d: v\r\n", i);
	strcpy(s + n, "\r\n");
	expect_ok(s);
	assert_int_equal(req.n_headers, AL_HTTP_HEADERS_MAX);
	strcpy(s + n, "X-65: v\r\n\r\n");
	expect_error(s, -E2BIG, "64");

	/* A head of exactly 16 KiB parses; one byte more does not. */
	n = (size_t)sprintf(s, "GET / HTTP/1.1\r\nHost: a.com\r\nX-Pad: ");
	memset(s + n, 'p', AL_HTTP_HEAD_MAX - n - 4);
	strcpy(s + AL_HTTP_HEAD_MAX - 4, "\r\n\r\n");
	assert_int_equal(strlen(s), AL_HTTP_HEAD_MAX);
	assert_int_equal(parse(s), AL_HTTP_HEAD_MAX);
	n = (size_t)sprintf(s, "GET / HTTP/1.1\r\nHost: a.com\r\nX-Pad: ");
	memset(s + n, 'p', AL_HTTP_HEAD_MAX - n - 3);
	strcpy(s + AL_HTTP_HEAD_MAX - 3, "\r\n\r\n");
	expect_error(s, -E2BIG, "16384");
	/* Until 16 KiB have arrived it is only incomplete. */
	assert_int_equal(al_http_parse_request(s, AL_HTTP_HEAD_MAX - 1, &req, NULL), -EAGAIN);
	assert_int_equal(al_http_parse_request(s, AL_HTTP_HEAD_MAX, &req, NULL), -E2BIG);
	assert_int_equal(al_http_status_for_error(-E2BIG), 431);

	memset(s, 'A', AL_HTTP_HEAD_MAX + 10);
	assert_int_equal(al_http_parse_request(s, AL_HTTP_HEAD_MAX + 10, &req, NULL), -E2BIG);
	assert_int_equal(al_http_parse_request(NULL, 0, &req, NULL), -EAGAIN);
}

static void test_bad_bytes(void **state)
{
	static const char nul[] = "GET / HTTP/1.1\r\nHost: a\0.com\r\n\r\n";
	struct al_error err = {0};

	expect_error("GET / HTTP/1.1\nHost: a.com\n\n", -EPROTO, "bare LF");
	/* ... and as soon as it arrives. */
	expect_error("GET / HTTP/1.1\n", -EPROTO, "bare LF");
	expect_error("GET / HTTP/1.1\r\nHost: a.com\n\r\n", -EPROTO, "bare LF");
	expect_error("GET / HTTP/1.1\rHost: a.com\r\n\r\n", -EPROTO, "bare CR");
	expect_error("GET / HTTP/1.1\r\nHost: a.com\r\r\n\r\n", -EPROTO, "bare CR");
	expect_error("GET / HTTP/1.1\r\nX: a\rb\r\nHost: a.com\r\n\r\n", -EPROTO, "bare CR");
	assert_int_equal(al_http_parse_request(nul, sizeof(nul) - 1, &req, &err), -EPROTO);
	assert_contains(err.msg, "control");
	expect_error("GET / HTTP/1.1\r\nHost: a.com\r\nX: \x01\r\n\r\n", -EPROTO, "control");
	expect_error("GET / HTTP/1.1\r\nHost: a.com\r\nX: \x7f\r\n\r\n", -EPROTO, "control");
	expect_error("GET / HTTP/1.1\r\nHost: a.com\r\nX: \x1b[31m\r\n\r\n", -EPROTO, "control");
	expect_error("\r\nGET / HTTP/1.1\r\nHost: a.com\r\n\r\n", -EPROTO, "empty line");
	expect_error("GET / HTTP/1.1\r\nHost: a.com\r\nX: a\r\n b\r\n\r\n", -EPROTO, "folding");
	expect_error("GET / HTTP/1.1\r\nHost: a.com\r\nX: a\r\n\tb\r\n\r\n", -EPROTO, "folding");
	expect_error("GET / HTTP/1.1\r\n Host: a.com\r\n\r\n", -EPROTO, "whitespace");
	expect_error("GET\t/ HTTP/1.1\r\nHost: a.com\r\n\r\n", -EPROTO, "request line");
	expect_error("GET /\xc3\xa9 HTTP/1.1\r\nHost: a.com\r\n\r\n", -EPROTO, "request line");
}

static void test_bad_request_line(void **state)
{
	expect_error("GET  / HTTP/1.1\r\nHost: a.com\r\n\r\n", -EPROTO, "request line");
	expect_error("GET /  HTTP/1.1\r\nHost: a.com\r\n\r\n", -EPROTO, "version");
	expect_error("GET / HTTP/1.1 \r\nHost: a.com\r\n\r\n", -EPROTO, "version");
	expect_error(" GET / HTTP/1.1\r\nHost: a.com\r\n\r\n", -EPROTO, "request line");
	expect_error("GET /\r\nHost: a.com\r\n\r\n", -EPROTO, "request line");
	expect_error("GET\r\n\r\n", -EPROTO, "request line");
	expect_error("G(T / HTTP/1.1\r\nHost: a.com\r\n\r\n", -EPROTO, "request line");
	expect_error("GETGETGETGETGETGETGETGETGETGETGET1 / HTTP/1.1\r\nHost: a.com\r\n\r\n",
		     -EPROTO, "method");
	expect_error("GET / http/1.1\r\nHost: a.com\r\n\r\n", -EPROTO, "version");
	expect_error("GET / HTTP/1.10\r\nHost: a.com\r\n\r\n", -EPROTO, "version");
	expect_error("GET / HTTP/2.0\r\nHost: a.com\r\n\r\n", -EPROTONOSUPPORT, "version");
	expect_error("GET / HTTP/0.9\r\nHost: a.com\r\n\r\n", -EPROTONOSUPPORT, "version");
	expect_error("GET / HTTP/1.2\r\nHost: a.com\r\n\r\n", -EPROTONOSUPPORT, "version");
	assert_int_equal(al_http_status_for_error(-EPROTONOSUPPORT), 505);
}

static void test_bad_targets(void **state)
{
	/* CONNECT: authority-form only, port required, no userinfo. */
	expect_error("CONNECT example.com HTTP/1.1\r\nHost: example.com\r\n\r\n", -EPROTO,
		     "port required");
	expect_error("CONNECT user:pw@example.com:443 HTTP/1.1\r\n\r\n", -EPROTO, "userinfo");
	expect_error("CONNECT example.com@evil.com:443 HTTP/1.1\r\n\r\n", -EPROTO, "userinfo");
	expect_error("CONNECT example.com:0 HTTP/1.1\r\n\r\n", -EPROTO, "port");
	expect_error("CONNECT example.com:65536 HTTP/1.1\r\n\r\n", -EPROTO, "port");
	expect_error("CONNECT example.com:80x HTTP/1.1\r\n\r\n", -EPROTO, "port");
	expect_error("CONNECT example.com:080 HTTP/1.1\r\n\r\n", -EPROTO, "port");
	expect_error("CONNECT example.com: HTTP/1.1\r\n\r\n", -EPROTO, "port");
	expect_error("CONNECT example.com:+443 HTTP/1.1\r\n\r\n", -EPROTO, "port");
	expect_error("CONNECT example.com:443:443 HTTP/1.1\r\n\r\n", -EPROTO, "IPv6");
	expect_error("CONNECT ::1:443 HTTP/1.1\r\n\r\n", -EPROTO, "IPv6");
	expect_error("CONNECT [::1] HTTP/1.1\r\n\r\n", -EPROTO, "port required");
	expect_error("CONNECT [::1]443 HTTP/1.1\r\n\r\n", -EPROTO, "port");
	expect_error("CONNECT [::1:443 HTTP/1.1\r\n\r\n", -EPROTO, "]");
	expect_error("CONNECT [1.2.3.4]:443 HTTP/1.1\r\n\r\n", -EPROTO, "brackets");
	expect_error("CONNECT [fe80::1%eth0]:443 HTTP/1.1\r\n\r\n", -EPROTO, "zone");
	expect_error("CONNECT [fe80::1%25eth0]:443 HTTP/1.1\r\n\r\n", -EPROTO, "zone");
	expect_error("CONNECT / HTTP/1.1\r\nHost: a.com\r\n\r\n", -EPROTO, "CONNECT");
	expect_error("CONNECT http://a.com:443 HTTP/1.1\r\n\r\n", -EPROTO, "CONNECT");
	expect_error("CONNECT 127.1:443 HTTP/1.1\r\n\r\n", -EPROTO, "IPv4");
	expect_error("CONNECT 0x7f000001:443 HTTP/1.1\r\n\r\n", -EPROTO, "numeric");
	expect_error("CONNECT a.com:443 HTTP/1.1\r\nContent-Length: 5\r\n\r\n", -EPROTO, "body");
	/* A lower-case "connect" is some other method with the wrong target. */
	expect_error("connect a.com:443 HTTP/1.1\r\nHost: a.com\r\n\r\n", -EPROTO, "target");
	expect_error("GET a.com:443 HTTP/1.1\r\nHost: a.com\r\n\r\n", -EPROTO, "target");

	/* Absolute-form */
	expect_error("GET http://allowed.com@evil.com/ HTTP/1.1\r\nHost: evil.com\r\n\r\n", -EPROTO,
		     "userinfo");
	expect_error("GET http://allowed.com:80@evil.com/ HTTP/1.1\r\n\r\n", -EPROTO, "userinfo");
	/* '@' in the path is not userinfo. */
	expect_ok("GET http://a.com/x@y HTTP/1.1\r\nHost: a.com\r\n\r\n");
	expect_error("GET http://a.com:80x/ HTTP/1.1\r\n\r\n", -EPROTO, "port");
	expect_error("GET http:///path HTTP/1.1\r\n\r\n", -EPROTO, "empty");
	expect_error("GET http://a.com\\@evil.com/ HTTP/1.1\r\n\r\n", -EPROTO, NULL);
	expect_error("GET http://[fe80::1%25eth0]/ HTTP/1.1\r\n\r\n", -EPROTO, "zone");
	expect_error("GET http://127.1/ HTTP/1.1\r\n\r\n", -EPROTO, "IPv4");
	expect_error("GET http://a.com/#frag HTTP/1.1\r\nHost: a.com\r\n\r\n", -EPROTO, "fragment");
	expect_error("GET /#frag HTTP/1.1\r\nHost: a.com\r\n\r\n", -EPROTO, "fragment");
	expect_error("GET https://a.com/ HTTP/1.1\r\nHost: a.com\r\n\r\n", -ENOTSUP, "CONNECT");
	expect_error("GET ftp://a.com/ HTTP/1.1\r\nHost: a.com\r\n\r\n", -EPROTO, "target");
	expect_error("GET http:/a.com/ HTTP/1.1\r\nHost: a.com\r\n\r\n", -EPROTO, "target");
	expect_error("OPTIONS * HTTP/1.1\r\nHost: a.com\r\n\r\n", -ENOTSUP, "asterisk");
	assert_int_equal(al_http_status_for_error(-ENOTSUP), 501);
	assert_int_equal(al_http_status_for_error(-EPROTO), 400);
	assert_int_equal(al_http_status_for_error(-EAGAIN), 0);
}

static void test_bad_headers(void **state)
{
	expect_error("GET / HTTP/1.1\r\nHost: a.com\r\nBad Name: x\r\n\r\n", -EPROTO, "name");
	expect_error("GET / HTTP/1.1\r\nHost : a.com\r\n\r\n", -EPROTO, "name");
	expect_error("GET / HTTP/1.1\r\nHost\t: a.com\r\n\r\n", -EPROTO, "name");
	expect_error("GET / HTTP/1.1\r\nHost: a.com\r\n: x\r\n\r\n", -EPROTO, "name");
	expect_error("GET / HTTP/1.1\r\nHost: a.com\r\nNoColon\r\n\r\n", -EPROTO, "name");
	expect_error("GET / HTTP/1.1\r\nHost: a.com\r\nX\xc3\xa9: 1\r\n\r\n", -EPROTO, "name");
	expect_error("GET / HTTP/1.1\r\nHost: a.com\r\nX(y): 1\r\n\r\n", -EPROTO, "name");
}

static void test_host_rules(void **state)
{
	/* Smuggling: two Host fields, same or different. */
	expect_error("GET / HTTP/1.1\r\nHost: a.com\r\nHost: b.com\r\n\r\n", -EPROTO, "Host");
	expect_error("GET / HTTP/1.1\r\nHost: a.com\r\nhost: a.com\r\n\r\n", -EPROTO, "Host");
	expect_error("GET / HTTP/1.1\r\n\r\n", -EPROTO, "missing Host");
	expect_error("GET / HTTP/1.1\r\nHost:\r\n\r\n", -EPROTO, "Host");
	expect_error("GET / HTTP/1.1\r\nHost: a.com, b.com\r\n\r\n", -EPROTO, "Host");
	expect_error("GET / HTTP/1.1\r\nHost: user@a.com\r\n\r\n", -EPROTO, "userinfo");
	expect_error("GET / HTTP/1.1\r\nHost: a.com:80x\r\n\r\n", -EPROTO, "port");
	expect_error("GET / HTTP/1.1\r\nHost: a.com:0\r\n\r\n", -EPROTO, "port");
	expect_error("GET / HTTP/1.1\r\nHost: [fe80::1%eth0]\r\n\r\n", -EPROTO, "zone");
	expect_error("GET / HTTP/1.1\r\nHost: ::1\r\n\r\n", -EPROTO, "IPv6");
	/* The target and Host must agree. */
	expect_error("CONNECT a.com:443 HTTP/1.1\r\nHost: b.com:443\r\n\r\n", -EPROTO, "match");
	expect_error("CONNECT a.com:443 HTTP/1.1\r\nHost: a.com:444\r\n\r\n", -EPROTO, "match");
	expect_error("CONNECT a.com:443 HTTP/1.1\r\nHost: a.com.evil\r\n\r\n", -EPROTO, "match");
	expect_error("GET http://a.com/ HTTP/1.1\r\nHost: b.com\r\n\r\n", -EPROTO, "match");
	expect_error("GET http://a.com/ HTTP/1.1\r\nHost: a.com:8080\r\n\r\n", -EPROTO, "match");
	expect_error("GET http://1.2.3.4/ HTTP/1.1\r\nHost: [::ffff:1.2.3.4]\r\n\r\n", -EPROTO,
		     "match");
	expect_error("GET http://a.com/ HTTP/1.1\r\nHost: a.com\r\nHost: a.com\r\n\r\n", -EPROTO,
		     "duplicate");
}

static void test_host_matches(void **state)
{
	struct al_host h;

	assert_int_equal(al_host_parse("example.com", 11, &h, NULL), 0);
	assert_true(al_http_host_matches(&h, 443, "example.com", 11));
	assert_true(al_http_host_matches(&h, 443, "EXAMPLE.COM:443", 15));
	assert_true(al_http_host_matches(&h, 443, "example.com.:443", 16));
	assert_false(al_http_host_matches(&h, 443, "example.com:80", 14));
	assert_false(al_http_host_matches(&h, 443, "example.co", 10));
	assert_false(al_http_host_matches(&h, 443, "x@example.com", 13));
	assert_false(al_http_host_matches(&h, 443, "example.com:", 12));
	assert_false(al_http_host_matches(&h, 443, "", 0));
	assert_false(al_http_host_matches(&h, 443, NULL, 0));
	assert_false(al_http_host_matches(NULL, 443, "example.com", 11));
	assert_int_equal(al_host_parse("::1", 3, &h, NULL), 0);
	assert_true(al_http_host_matches(&h, 80, "[::1]", 5));
	assert_true(al_http_host_matches(&h, 80, "[0::1]:80", 9));
	assert_false(al_http_host_matches(&h, 80, "::1", 3));
}

static void test_framing(void **state)
{
	expect_error("POST / HTTP/1.1\r\nHost: a.com\r\nContent-Length: 5\r\n"
		     "Transfer-Encoding: chunked\r\n\r\n",
		     -EPROTO, "both");
	expect_error("POST / HTTP/1.1\r\nHost: a.com\r\nTransfer-Encoding: chunked\r\n"
		     "Content-Length: 5\r\n\r\n",
		     -EPROTO, "both");
	expect_error("POST / HTTP/1.1\r\nHost: a.com\r\nContent-Length: 5\r\n"
		     "Content-Length: 5\r\n\r\n",
		     -EPROTO, "duplicate");
	expect_error("POST / HTTP/1.1\r\nHost: a.com\r\nContent-Length: 5, 5\r\n\r\n", -EPROTO,
		     "Content-Length");
	expect_error("POST / HTTP/1.1\r\nHost: a.com\r\nContent-Length: +5\r\n\r\n", -EPROTO,
		     "Content-Length");
	expect_error("POST / HTTP/1.1\r\nHost: a.com\r\nContent-Length: -1\r\n\r\n", -EPROTO,
		     "Content-Length");
	expect_error("POST / HTTP/1.1\r\nHost: a.com\r\nContent-Length: 0x10\r\n\r\n", -EPROTO,
		     "Content-Length");
	expect_error("POST / HTTP/1.1\r\nHost: a.com\r\nContent-Length:\r\n\r\n", -EPROTO,
		     "Content-Length");
	expect_error("POST / HTTP/1.1\r\nHost: a.com\r\nContent-Length: 1234567890123456789\r\n"
		     "\r\n",
		     -EPROTO, "Content-Length");
	expect_error("POST / HTTP/1.1\r\nHost: a.com\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
		     -ENOTSUP, "transfer coding");
	expect_error("POST / HTTP/1.1\r\nHost: a.com\r\nTransfer-Encoding: chunked, chunked\r\n"
		     "\r\n",
		     -ENOTSUP, "transfer coding");
	expect_error("POST / HTTP/1.1\r\nHost: a.com\r\nTransfer-Encoding: xchunked\r\n\r\n",
		     -ENOTSUP, "transfer coding");
	expect_error("POST / HTTP/1.1\r\nHost: a.com\r\nTransfer-Encoding: chunked\r\n"
		     "Transfer-Encoding: chunked\r\n\r\n",
		     -EPROTO, "duplicate");
	expect_error("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", -EPROTO, "1.0");
	expect_error("GET / HTTP/1.1\r\nHost: a.com\r\nConnection: close, Host\r\n\r\n", -EPROTO,
		     "framing");
	expect_error("GET / HTTP/1.1\r\nHost: a.com\r\nConnection: content-length\r\n\r\n", -EPROTO,
		     "framing");
	expect_error("GET / HTTP/1.1\r\nHost: a.com\r\nConnection: Transfer-Encoding\r\n\r\n",
		     -EPROTO, "framing");
	expect_error("GET / HTTP/1.1\r\nHost: a.com\r\nConnection: a b\r\n\r\n", -EPROTO,
		     "Connection");
	expect_error("GET / HTTP/1.1\r\nHost: a.com\r\nConnection: a;b\r\n\r\n", -EPROTO,
		     "Connection");
}

static void test_upstream(void **state)
{
	const char *s = "POST http://Example.com:8080/api?x=1 HTTP/1.1\r\n"
			"Proxy-Authorization: Basic Zm9v\r\n"
			"Host: example.com:8080\r\n"
			"Proxy-Connection: keep-alive\r\n"
			"Connection: keep-alive, X-Hop\r\n"
			"X-Hop: secret\r\n"
			"Keep-Alive: 300\r\n"
			"Content-Length: 3\r\n"
			"X-Keep:  v  \r\n"
			"\r\n"
			"abc";
	const char *want = "POST /api?x=1 HTTP/1.1\r\n"
			   "Host: example.com:8080\r\n"
			   "Content-Length: 3\r\n"
			   "X-Keep: v\r\n"
			   "Connection: close\r\n"
			   "\r\n";
	char out[1024];
	int n;

	expect_ok(s);
	n = al_http_format_upstream(s, &req, AL_HTTP_UPSTREAM_CLOSE, out, sizeof(out));
	assert_int_equal(n, strlen(want));
	assert_string_equal(out, want);
	/* Every buffer too small is refused, never overrun; one with room
	 * for the NUL works. */
	for (size_t size = 0; size <= strlen(want); size++) {
		memset(out, 'Z', sizeof(out));
		assert_int_equal(
		    al_http_format_upstream(s, &req, AL_HTTP_UPSTREAM_CLOSE, out, size), -ENOSPC);
		assert_int_equal(out[size], 'Z');
	}
	assert_int_equal(
	    al_http_format_upstream(s, &req, AL_HTTP_UPSTREAM_CLOSE, out, strlen(want) + 1),
	    strlen(want));

	s = "GET http://a.com?q HTTP/1.0\r\nUser-Agent: x\r\n\r\n";
	expect_ok(s);
	n = al_http_format_upstream(s, &req, 0, out, sizeof(out));
	assert_true(n > 0);
	assert_string_equal(out, "GET /?q HTTP/1.1\r\nHost: a.com\r\nUser-Agent: x\r\n\r\n");

	s = "GET http://[2001:db8::1]:81 HTTP/1.1\r\nHost: [2001:db8::1]:81\r\n\r\n";
	expect_ok(s);
	n = al_http_format_upstream(s, &req, 0, out, sizeof(out));
	assert_true(n > 0);
	assert_string_equal(out, "GET / HTTP/1.1\r\nHost: [2001:db8::1]:81\r\n\r\n");

	s = "GET /x HTTP/1.1\r\nhost: A.com\r\n\r\n";
	expect_ok(s);
	n = al_http_format_upstream(s, &req, 0, out, sizeof(out));
	assert_true(n > 0);
	assert_string_equal(out, "GET /x HTTP/1.1\r\nHost: a.com\r\n\r\n");

	s = "CONNECT a.com:443 HTTP/1.1\r\nHost: a.com:443\r\n\r\n";
	expect_ok(s);
	assert_int_equal(al_http_format_upstream(s, &req, 0, out, sizeof(out)), -EINVAL);
	s = "GET / HTTP/1.0\r\n\r\n";
	expect_ok(s);
	assert_int_equal(al_http_format_upstream(s, &req, 0, out, sizeof(out)), -EINVAL);
}

static void test_responses(void **state)
{
	char out[1024];
	int n;

	n = al_http_format_denied("rule: no rule allows evil.com:443", out, sizeof(out));
	assert_true(n > 0);
	assert_int_equal(n, strlen(out));
	assert_true(strncmp(out, "HTTP/1.1 403 Forbidden\r\n", 24) == 0);
	assert_contains(out, "\r\nX-Airlock-Denied: rule: no rule allows evil.com:443\r\n");
	assert_contains(out, "\r\nConnection: close\r\n");
	assert_contains(out, "\r\n\r\nairlock: Forbidden: rule: no rule allows evil.com:443\n");
	{
		const char *body = strstr(out, "\r\n\r\n") + 4;
		char cl[64];

		snprintf(cl, sizeof(cl), "Content-Length: %zu\r\n", strlen(body));
		assert_contains(out, cl);
	}

	/* No header injection through the rule text. */
	n = al_http_format_denied("a.com\r\nSet-Cookie: x=1\x7f\xff", out, sizeof(out));
	assert_true(n > 0);
	assert_not_contains(out, "\r\nSet-Cookie");
	assert_contains(out, "X-Airlock-Denied: a.com??Set-Cookie: x=1??\r\n");

	n = al_http_format_response(502, "upstream refused the connection", out, sizeof(out));
	assert_true(n > 0);
	assert_true(strncmp(out, "HTTP/1.1 502 Bad Gateway\r\n", 26) == 0);
	assert_contains(out, "airlock: Bad Gateway: upstream refused the connection\n");
	n = al_http_format_response(504, NULL, out, sizeof(out));
	assert_true(n > 0);
	assert_true(strncmp(out, "HTTP/1.1 504 Gateway Timeout\r\n", 30) == 0);
	assert_contains(out, "\r\n\r\nairlock: Gateway Timeout\n");
	assert_true(al_http_format_response(431, NULL, out, sizeof(out)) > 0);
	assert_true(al_http_format_response(400, "x", out, sizeof(out)) > 0);
	assert_true(al_http_format_response(505, "x", out, sizeof(out)) > 0);
	assert_int_equal(al_http_format_response(200, NULL, out, sizeof(out)), -EINVAL);
	assert_int_equal(al_http_format_response(299, NULL, out, sizeof(out)), -EINVAL);
	assert_int_equal(al_http_format_response(502, NULL, out, 20), -ENOSPC);

	/* Long details are cut, so the response always fits a small buffer. */
	{
		char big[2000];

		memset(big, 'x', sizeof(big) - 1);
		big[sizeof(big) - 1] = '\0';
		n = al_http_format_denied(big, out, sizeof(out));
		assert_true(n > 0 && n < 800);
	}

	n = al_http_format_connect_ok(out, sizeof(out));
	assert_int_equal(n, 39);
	assert_string_equal(out, "HTTP/1.1 200 Connection established\r\n\r\n");
	assert_int_equal(al_http_format_connect_ok(out, 39), -ENOSPC);
}

int main(void)
{
	/* clang-format off */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_connect),
		cmocka_unit_test(test_absolute),
		cmocka_unit_test(test_origin),
		cmocka_unit_test(test_headers),
		cmocka_unit_test(test_hop_by_hop),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_bad_bytes),
		cmocka_unit_test(test_bad_request_line),
		cmocka_unit_test(test_bad_targets),
		cmocka_unit_test(test_bad_headers),
		cmocka_unit_test(test_host_rules),
		cmocka_unit_test(test_host_matches),
		cmocka_unit_test(test_framing),
		cmocka_unit_test(test_upstream),
		cmocka_unit_test(test_responses),
	};
	/* clang-format on */

	return cmocka_run_group_tests(tests, NULL, NULL);
}
