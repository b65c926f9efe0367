/* gateway/socks.h: SOCKS5 greeting and request parsing, replies. */
#include "unit.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "gateway/socks.h"

#define B(...) ((const uint8_t[]){__VA_ARGS__}), sizeof((const uint8_t[]){__VA_ARGS__})

static void expect_greeting_prefixes(const uint8_t *m, size_t len)
{
	struct al_socks_greeting g;

	for (size_t n = 0; n < len; n++)
		if (al_socks_parse_greeting(m, n, &g, NULL) != -EAGAIN)
			fail_msg("greeting prefix of %zu bytes is not -EAGAIN", n);
}

static void test_greeting(void **state)
{
	struct al_socks_greeting g = {0};
	struct al_error err = {0};
	uint8_t out[4];
	uint8_t many[2 + 255 + 3];

	assert_int_equal(al_socks_parse_greeting(B(5, 1, 0), &g, &err), 3);
	assert_true(g.no_auth);
	assert_int_equal(g.n_methods, 1);
	assert_int_equal(al_socks_format_method_reply(&g, out, sizeof(out)), 2);
	assert_int_equal(out[0], 5);
	assert_int_equal(out[1], 0);
	expect_greeting_prefixes(B(5, 1, 0));

	/* Username/password and GSSAPI only: no acceptable method. */
	assert_int_equal(al_socks_parse_greeting(B(5, 2, 2, 1), &g, &err), 4);
	assert_false(g.no_auth);
	assert_int_equal(al_socks_format_method_reply(&g, out, sizeof(out)), 2);
	assert_int_equal(out[1], 0xff);
	assert_int_equal(al_socks_format_method_reply(&g, out, 1), -ENOSPC);

	/* 0x00 somewhere in the list; bytes after the greeting are left. */
	assert_int_equal(al_socks_parse_greeting(B(5, 3, 2, 1, 0, 5, 1, 0, 1), &g, &err), 5);
	assert_true(g.no_auth);

	/* 255 methods, 0x00 last. */
	many[0] = 5;
	many[1] = 255;
	memset(many + 2, 0x80, 254);
	many[256] = 0;
	assert_int_equal(al_socks_parse_greeting(many, 257, &g, &err), 257);
	assert_true(g.no_auth);
	assert_int_equal(g.n_methods, 255);
	expect_greeting_prefixes(many, 257);
}

static void test_greeting_bad(void **state)
{
	struct al_socks_greeting g;
	struct al_error err = {0};

	memset(&g, 0x5a, sizeof(g));
	assert_int_equal(al_socks_parse_greeting(B(4, 1, 0), &g, &err), -EPROTO);
	assert_contains(err.msg, "version 4");
	assert_int_equal(al_socks_parse_greeting(B(4), &g, &err), -EPROTO);
	assert_int_equal(al_socks_parse_greeting(B('G', 'E', 'T'), &g, &err), -EPROTO);
	assert_int_equal(al_socks_parse_greeting(B(5, 0), &g, &err), -EPROTO);
	assert_contains(err.msg, "no methods");
	assert_int_equal(al_socks_parse_greeting(B(5, 0, 0), &g, &err), -EPROTO);
	assert_int_equal(al_socks_parse_greeting(B(5, 2, 0), &g, &err), -EAGAIN);
	assert_int_equal(al_socks_parse_greeting(NULL, 0, &g, &err), -EAGAIN);
	assert_int_equal(((uint8_t *)&g)[0], 0x5a);
	assert_int_equal(al_socks_format_method_reply(NULL, (uint8_t[2]){0}, 2), 2);
}

static struct al_socks_request req;

static int parse_req(const uint8_t *m, size_t len, struct al_error *err)
{
	memset(&req, 0, sizeof(req));
	return al_socks_parse_request(m, len, &req, err);
}

static void expect_request(const uint8_t *m, size_t len, uint8_t cmd, enum al_host_kind kind,
			   const char *host, uint16_t port)
{
	struct al_socks_request r;
	struct al_error err = {0};
	int ret = parse_req(m, len, &err);

	if (ret != (int)len)
		fail_msg("request gave %d (%s), expected %zu", ret, err.msg, len);
	assert_int_equal(req.cmd, cmd);
	assert_int_equal(req.host.kind, kind);
	assert_string_equal(req.host.text, host);
	assert_int_equal(req.port, port);
	for (size_t n = 0; n < len; n++)
		if (al_socks_parse_request(m, n, &r, NULL) != -EAGAIN)
			fail_msg("request prefix of %zu bytes is not -EAGAIN", n);
}

static void test_request(void **state)
{
	struct al_error err = {0};
	uint8_t big[4 + 1 + 255 + 2];
	struct in6_addr a;

	expect_request(B(5, 1, 0, 1, 93, 184, 216, 34, 0x01, 0xbb), AL_SOCKS_CMD_CONNECT,
		       AL_HOST_IPV4, "93.184.216.34", 443);
	assert_int_equal(req.atyp, AL_SOCKS_ATYP_IPV4);
	assert_true(al_addr_is_ipv4(&req.host.addr));
	expect_request(
	    B(5, 1, 0, 3, 11, 'E', 'x', 'a', 'm', 'p', 'l', 'e', '.', 'c', 'o', 'm', 0x00, 0x50),
	    AL_SOCKS_CMD_CONNECT, AL_HOST_NAME, "example.com", 80);
	assert_int_equal(req.atyp, AL_SOCKS_ATYP_DOMAIN);
	expect_request(
	    B(5, 1, 0, 4, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0xff),
	    AL_SOCKS_CMD_CONNECT, AL_HOST_IPV6, "2001:db8::1", 65535);
	inet_pton(AF_INET6, "2001:db8::1", &a);
	assert_memory_equal(&req.host.addr, &a, 16);
	/* BIND and UDP ASSOCIATE parse, for the caller to refuse. */
	expect_request(B(5, 2, 0, 1, 0, 0, 0, 0, 0, 1), AL_SOCKS_CMD_BIND, AL_HOST_IPV4, "0.0.0.0",
		       1);
	expect_request(B(5, 3, 0, 1, 0, 0, 0, 0, 0, 1), AL_SOCKS_CMD_UDP_ASSOCIATE, AL_HOST_IPV4,
		       "0.0.0.0", 1);
	/* A domain that is an IP literal is normalised as one. */
	expect_request(B(5, 1, 0, 3, 7, '1', '.', '2', '.', '3', '.', '4', 0, 80),
		       AL_SOCKS_CMD_CONNECT, AL_HOST_IPV4, "1.2.3.4", 80);
	/* Bytes after the request (early data) are not consumed. */
	assert_int_equal(parse_req(B(5, 1, 0, 1, 1, 2, 3, 4, 0, 80, 'G', 'E', 'T'), &err), 10);

	/* 253-character name in the domain field. */
	big[0] = 5;
	big[1] = 1;
	big[2] = 0;
	big[3] = 3;
	big[4] = 253;
	for (int i = 0; i < 253; i++)
		big[5 + i] = (i % 64 == 63) ? '.' : 'a';
	big[5 + 252] = 'z';
	big[258] = 1;
	big[259] = 187;
	assert_int_equal(parse_req(big, 260, &err), 260);
	assert_int_equal(strlen(req.host.text), 253);
}

static void expect_request_error(const uint8_t *m, size_t len, int want, int code,
				 const char *reason)
{
	struct al_socks_request r;
	struct al_error err = {0};
	int ret;

	memset(&r, 0x5a, sizeof(r));
	ret = al_socks_parse_request(m, len, &r, &err);
	if (ret != want)
		fail_msg("request gave %d (%s), expected %d", ret, err.msg, want);
	assert_int_equal(err.code, -want);
	assert_int_equal(al_socks_reply_code_for_error(ret), code);
	if (reason)
		assert_contains(err.msg, reason);
	assert_int_equal(((uint8_t *)&r)[0], 0x5a);
}

static void test_request_bad(void **state)
{
	uint8_t big[4 + 1 + 255 + 2];

	expect_request_error(B(4, 1, 0, 1, 1, 2, 3, 4, 0, 80), -EPROTO,
			     AL_SOCKS_REP_GENERAL_FAILURE, "version");
	/* Errors show as soon as the byte arrives. */
	expect_request_error(B(4), -EPROTO, AL_SOCKS_REP_GENERAL_FAILURE, "version");
	expect_request_error(B(5, 4), -EOPNOTSUPP, AL_SOCKS_REP_CMD_NOT_SUPPORTED, "command");
	expect_request_error(B(5, 0, 0, 1, 1, 2, 3, 4, 0, 80), -EOPNOTSUPP,
			     AL_SOCKS_REP_CMD_NOT_SUPPORTED, "command");
	expect_request_error(B(5, 1, 1), -EPROTO, AL_SOCKS_REP_GENERAL_FAILURE, "reserved");
	expect_request_error(B(5, 1, 0, 2), -EAFNOSUPPORT, AL_SOCKS_REP_ATYP_NOT_SUPPORTED,
			     "address type");
	expect_request_error(B(5, 1, 0, 0, 1, 2, 3, 4, 0, 80), -EAFNOSUPPORT,
			     AL_SOCKS_REP_ATYP_NOT_SUPPORTED, "address type");
	expect_request_error(B(5, 1, 0, 3, 0), -EPROTO, AL_SOCKS_REP_GENERAL_FAILURE, "empty");
	expect_request_error(B(5, 1, 0, 1, 1, 2, 3, 4, 0, 0), -EPROTO, AL_SOCKS_REP_GENERAL_FAILURE,
			     "port 0");
	expect_request_error(B(5, 1, 0, 3, 3, 'a', 0, 'b', 0, 80), -EPROTO,
			     AL_SOCKS_REP_GENERAL_FAILURE, "NUL");
	expect_request_error(B(5, 1, 0, 3, 4, 'a', ' ', 'b', 'c', 0, 80), -EPROTO,
			     AL_SOCKS_REP_GENERAL_FAILURE, "invalid character");
	expect_request_error(B(5, 1, 0, 3, 5, '1', '2', '7', '.', '1', 0, 80), -EPROTO,
			     AL_SOCKS_REP_GENERAL_FAILURE, "IPv4");
	expect_request_error(
	    B(5, 1, 0, 3, 10, '0', 'x', '7', 'f', '0', '0', '0', '0', '0', '1', 0, 80), -EPROTO,
	    AL_SOCKS_REP_GENERAL_FAILURE, "numeric");
	expect_request_error(
	    B(5, 1, 0, 3, 12, 'f', 'e', '8', '0', ':', ':', '1', '%', 'e', 't', 'h', '0', 0, 80),
	    -EPROTO, AL_SOCKS_REP_GENERAL_FAILURE, "zone");
	expect_request_error(B(5, 1, 0, 3, 5, 'a', '.', 'c', 'o', 'm'), -EAGAIN, -1, NULL);
	assert_int_equal(al_socks_reply_code_for_error(-EAGAIN), -1);

	/* A 254-byte and a 255-byte name are too long. */
	memset(big, 'a', sizeof(big));
	big[0] = 5;
	big[1] = 1;
	big[2] = 0;
	big[3] = 3;
	big[4] = 255;
	for (int i = 63; i < 255; i += 64)
		big[5 + i] = '.';
	big[260] = 0;
	big[261] = 80;
	expect_request_error(big, 262, -EPROTO, AL_SOCKS_REP_GENERAL_FAILURE, "253");
	expect_request_error(NULL, 0, -EAGAIN, -1, NULL);
}

static void test_reply(void **state)
{
	uint8_t out[32];
	struct in6_addr a;

	assert_int_equal(al_socks_format_reply(AL_SOCKS_REP_SUCCEEDED, NULL, 0, out, sizeof(out)),
			 10);
	assert_memory_equal(out, ((uint8_t[]){5, 0, 0, 1, 0, 0, 0, 0, 0, 0}), 10);
	al_addr_from_ipv4((const uint8_t[]){127, 0, 0, 1}, &a);
	assert_int_equal(al_socks_format_reply(AL_SOCKS_REP_NOT_ALLOWED, &a, 1080, out, 10), 10);
	assert_memory_equal(out, ((uint8_t[]){5, 2, 0, 1, 127, 0, 0, 1, 0x04, 0x38}), 10);
	inet_pton(AF_INET6, "::1", &a);
	assert_int_equal(al_socks_format_reply(AL_SOCKS_REP_HOST_UNREACHABLE, &a, 443, out, 22),
			 22);
	assert_memory_equal(out, ((uint8_t[]){5, 4, 0, 4, 0, 0, 0, 0, 0, 0,    0,
					      0, 0, 0, 0, 0, 0, 0, 0, 1, 0x01, 0xbb}),
			    22);
	assert_int_equal(al_socks_format_reply(AL_SOCKS_REP_REFUSED, &a, 443, out, 21), -ENOSPC);
	assert_int_equal(al_socks_format_reply(AL_SOCKS_REP_SUCCEEDED, NULL, 0, out, 9), -ENOSPC);
	assert_int_equal(al_socks_format_reply(9, NULL, 0, out, sizeof(out)), -EINVAL);
	for (uint8_t code = 0; code <= AL_SOCKS_REP_ATYP_NOT_SUPPORTED; code++) {
		assert_int_equal(al_socks_format_reply(code, NULL, 0, out, sizeof(out)), 10);
		assert_int_equal(out[1], code);
	}
}

int main(void)
{
	/* clang-format off */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_greeting),
		cmocka_unit_test(test_greeting_bad),
		cmocka_unit_test(test_request),
		cmocka_unit_test(test_request_bad),
		cmocka_unit_test(test_reply),
	};
	/* clang-format on */

	return cmocka_run_group_tests(tests, NULL, NULL);
}
