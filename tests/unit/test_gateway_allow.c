/* net/allow.h: host parsing, address classes, allowlist rules and
 * matching. */
#include "unit.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/cleanup.h"
#include "net/allow.h"

static void expect_host(const char *in, enum al_host_kind kind, const char *text)
{
	struct al_error err = {0};
	struct al_host h;
	int r = al_host_parse(in, strlen(in), &h, &err);

	if (r != 0)
		fail_msg("al_host_parse(\"%s\") = %d (%s), expected success", in, r, err.msg);
	if (h.kind != kind)
		fail_msg("al_host_parse(\"%s\") kind %d, expected %d", in, h.kind, kind);
	if (strcmp(h.text, text) != 0)
		fail_msg("al_host_parse(\"%s\") gave \"%s\", expected \"%s\"", in, h.text, text);
}

static void expect_bad_host_len(const char *in, size_t len, const char *reason)
{
	struct al_error err = {0};
	struct al_host h;
	int r;

	memset(&h, 0x5a, sizeof(h));
	r = al_host_parse(in, len, &h, &err);
	if (r != -EINVAL)
		fail_msg("al_host_parse(\"%.*s\") = %d, expected -EINVAL", (int)len, in, r);
	assert_int_equal(err.code, EINVAL);
	if (reason)
		assert_contains(err.msg, reason);
	/* Output parameters are written only on success. */
	assert_int_equal(((unsigned char *)&h)[0], 0x5a);
}

static void expect_bad_host(const char *in, const char *reason)
{
	expect_bad_host_len(in, strlen(in), reason);
}

static void test_host_names(void **state)
{
	char name[300];

	expect_host("example.com", AL_HOST_NAME, "example.com");
	expect_host("API.Example.COM", AL_HOST_NAME, "api.example.com");
	expect_host("example.com.", AL_HOST_NAME, "example.com");
	expect_host("localhost", AL_HOST_NAME, "localhost");
	expect_host("a-b.c_d.example", AL_HOST_NAME, "a-b.c_d.example");
	expect_host("1password.com", AL_HOST_NAME, "1password.com");
	expect_host("0x7f.example.com", AL_HOST_NAME, "0x7f.example.com");
	expect_host("xn--bcher-kva.example", AL_HOST_NAME, "xn--bcher-kva.example");
	expect_host("a.b0x", AL_HOST_NAME, "a.b0x");

	/* 63-character label, 253-character name (and 254 with the dot). */
	memset(name, 'a', 63);
	strcpy(name + 63, ".com");
	expect_host(name, AL_HOST_NAME, name);
	for (int i = 0; i < 4; i++) {
		memset(name + i * 64, 'b', 63);
		name[i * 64 + 63] = '.';
	}
	name[253] = '\0';
	name[252] = 'c';
	name[251] = 'c';
	assert_int_equal(strlen(name), 253);
	expect_host(name, AL_HOST_NAME, name);
	strcat(name, ".");
	name[253] = '.';
	{
		char want[254];

		memcpy(want, name, 253);
		want[253] = '\0';
		expect_host(name, AL_HOST_NAME, want);
	}
}

static void test_host_bad_names(void **state)
{
	char name[300];

	expect_bad_host("", "empty");
	expect_bad_host(".", NULL);
	expect_bad_host("..", NULL);
	expect_bad_host("a..b", "empty label");
	expect_bad_host(".a.com", "empty label");
	expect_bad_host("a.com..", "empty label");
	expect_bad_host("-a.com", "'-'");
	expect_bad_host("a-.com", "'-'");
	expect_bad_host("a.-com", "'-'");
	expect_bad_host("a b.com", "invalid character");
	expect_bad_host("a*.com", "invalid character");
	expect_bad_host("*.com", "invalid character");
	expect_bad_host("a/b.com", "invalid character");
	expect_bad_host("a@b.com", "invalid character");
	expect_bad_host("a%2eb.com", "invalid character");
	expect_bad_host("b\xc3\xbc"
			"cher.de",
			"invalid character");
	expect_bad_host("a\tb", "invalid character");
	expect_bad_host_len("a.com\0.evil.com", 15, "NUL");
	expect_bad_host_len("a\0", 2, "NUL");

	memset(name, 'a', 64);
	strcpy(name + 64, ".com");
	expect_bad_host(name, "63");
	for (int i = 0; i < 4; i++) {
		memset(name + i * 64, 'b', 63);
		name[i * 64 + 63] = '.';
	}
	name[254] = '\0';
	name[253] = 'c';
	name[252] = 'c';
	expect_bad_host(name, "253");
}

static void test_host_numeric(void **state)
{
	/* Forms that inet_aton() and so getaddrinfo() would read as numbers. */
	expect_bad_host("127.1", "IPv4");
	expect_bad_host("127.0.1", "IPv4");
	expect_bad_host("2130706433", "IPv4");
	expect_bad_host("0x7f000001", "numeric");
	expect_bad_host("0X7F000001", "numeric");
	expect_bad_host("0x7f.0.0.1", "numeric");
	expect_bad_host("1.2.3.0x4", "numeric");
	expect_bad_host("0177.0.0.1", "IPv4");
	expect_bad_host("01.2.3.4", "IPv4");
	expect_bad_host("1.2.3.04", "IPv4");
	expect_bad_host("256.1.1.1", "IPv4");
	expect_bad_host("1.2.3.4.5", "IPv4");
	expect_bad_host("1.2.3.4.", "IPv4");
	expect_bad_host("1..2.3", "IPv4");
	expect_bad_host("1234.1.1.1", "IPv4");
	expect_bad_host("a.123", "numeric");
	expect_bad_host("example.0x", "numeric");

	expect_host("1.2.3.4", AL_HOST_IPV4, "1.2.3.4");
	expect_host("0.0.0.0", AL_HOST_IPV4, "0.0.0.0");
	expect_host("255.255.255.255", AL_HOST_IPV4, "255.255.255.255");
	expect_host("10.0.0.1", AL_HOST_IPV4, "10.0.0.1");
}

static void test_host_ipv6(void **state)
{
	struct al_host h;
	char buf[64];

	expect_host("::1", AL_HOST_IPV6, "::1");
	expect_host("2001:DB8::1", AL_HOST_IPV6, "2001:db8::1");
	expect_host("2001:0db8:0000:0000:0000:0000:0000:0001", AL_HOST_IPV6, "2001:db8::1");
	expect_host("::ffff:127.0.0.1", AL_HOST_IPV6, "::ffff:127.0.0.1");
	expect_bad_host("fe80::1%eth0", "zone");
	expect_bad_host("fe80::1%25eth0", "zone");
	expect_bad_host("::1::2", "IPv6");
	expect_bad_host("[::1]", "IPv6");
	expect_bad_host("1:2:3:4:5:6:7:8:9", "IPv6");
	expect_bad_host("::g", "IPv6");
	expect_bad_host("::ffff:127.0.0.01", "IPv6");
	expect_bad_host("host:80", "IPv6");
	expect_bad_host("0000:0000:0000:0000:0000:0000:0000:0000:0", "IPv6");

	assert_int_equal(al_host_parse("::ffff:10.0.0.1", 15, &h, NULL), 0);
	assert_true(al_addr_is_ipv4(&h.addr));
	assert_int_equal(al_host_format(&h, buf, sizeof(buf)), 17);
	assert_string_equal(buf, "[::ffff:10.0.0.1]");
	assert_int_equal(al_host_format(&h, buf, 17), -ENOSPC);
	assert_int_equal(al_host_format(&h, buf, 18), 17);
	assert_int_equal(al_host_parse("Example.com", 11, &h, NULL), 0);
	assert_int_equal(al_host_format(&h, buf, sizeof(buf)), 11);
	assert_string_equal(buf, "example.com");
	assert_int_equal(al_host_parse(NULL, 0, &h, NULL), -EINVAL);
}

/* Address classes */

static void expect_class(const char *addr, enum al_addr_class want)
{
	struct in6_addr a;
	uint8_t v4[4];

	if (inet_pton(AF_INET, addr, v4) == 1)
		al_addr_from_ipv4(v4, &a);
	else if (inet_pton(AF_INET6, addr, &a) != 1)
		fail_msg("test address %s does not parse", addr);
	if (al_addr_class(&a) != want)
		fail_msg("al_addr_class(%s) = %s, expected %s", addr,
			 al_addr_class_name(al_addr_class(&a)), al_addr_class_name(want));
}

static void test_addr_class_v4(void **state)
{
	expect_class("8.8.8.8", AL_ADDR_PUBLIC);
	expect_class("1.1.1.1", AL_ADDR_PUBLIC);
	expect_class("93.184.216.34", AL_ADDR_PUBLIC);
	expect_class("0.0.0.0", AL_ADDR_UNSPECIFIED);
	expect_class("0.1.2.3", AL_ADDR_RESERVED);
	expect_class("127.0.0.1", AL_ADDR_LOOPBACK);
	expect_class("127.255.255.254", AL_ADDR_LOOPBACK);
	expect_class("10.0.0.1", AL_ADDR_PRIVATE);
	expect_class("172.16.0.1", AL_ADDR_PRIVATE);
	expect_class("172.31.255.255", AL_ADDR_PRIVATE);
	expect_class("172.32.0.1", AL_ADDR_PUBLIC);
	expect_class("172.15.255.255", AL_ADDR_PUBLIC);
	expect_class("192.168.1.1", AL_ADDR_PRIVATE);
	expect_class("169.254.169.254", AL_ADDR_LINK_LOCAL);
	expect_class("169.254.0.1", AL_ADDR_LINK_LOCAL);
	expect_class("100.64.0.1", AL_ADDR_CGNAT);
	expect_class("100.127.255.255", AL_ADDR_CGNAT);
	expect_class("100.128.0.1", AL_ADDR_PUBLIC);
	expect_class("100.63.255.255", AL_ADDR_PUBLIC);
	expect_class("198.18.0.1", AL_ADDR_RESERVED);
	expect_class("198.19.255.255", AL_ADDR_RESERVED);
	expect_class("198.20.0.1", AL_ADDR_PUBLIC);
	expect_class("192.0.2.1", AL_ADDR_RESERVED);
	expect_class("198.51.100.7", AL_ADDR_RESERVED);
	expect_class("203.0.113.9", AL_ADDR_RESERVED);
	expect_class("192.0.0.8", AL_ADDR_RESERVED);
	expect_class("192.88.99.1", AL_ADDR_RESERVED);
	expect_class("224.0.0.1", AL_ADDR_MULTICAST);
	expect_class("239.255.255.250", AL_ADDR_MULTICAST);
	expect_class("240.0.0.1", AL_ADDR_RESERVED);
	expect_class("255.255.255.255", AL_ADDR_RESERVED);
}

static void test_addr_class_v6(void **state)
{
	expect_class("2606:4700:4700::1111", AL_ADDR_PUBLIC);
	expect_class("2a00:1450:4001::200e", AL_ADDR_PUBLIC);
	expect_class("::", AL_ADDR_UNSPECIFIED);
	expect_class("::1", AL_ADDR_LOOPBACK);
	expect_class("::2", AL_ADDR_RESERVED);
	expect_class("::ffff:127.0.0.1", AL_ADDR_LOOPBACK);
	expect_class("::ffff:169.254.169.254", AL_ADDR_LINK_LOCAL);
	expect_class("::ffff:10.1.2.3", AL_ADDR_PRIVATE);
	expect_class("::ffff:8.8.8.8", AL_ADDR_PUBLIC);
	expect_class("::ffff:0.0.0.0", AL_ADDR_UNSPECIFIED);
	expect_class("::127.0.0.1", AL_ADDR_RESERVED);
	expect_class("64:ff9b::7f00:1", AL_ADDR_LOOPBACK);
	expect_class("64:ff9b::808:808", AL_ADDR_PUBLIC);
	expect_class("64:ff9b:1::1", AL_ADDR_RESERVED);
	expect_class("100::1", AL_ADDR_RESERVED);
	expect_class("2001:db8::1", AL_ADDR_RESERVED);
	expect_class("2001::1", AL_ADDR_RESERVED);
	expect_class("2002:7f00:1::1", AL_ADDR_RESERVED);
	expect_class("3fff::1", AL_ADDR_RESERVED);
	expect_class("fc00::1", AL_ADDR_UNIQUE_LOCAL);
	expect_class("fd12:3456::1", AL_ADDR_UNIQUE_LOCAL);
	expect_class("fe80::1", AL_ADDR_LINK_LOCAL);
	expect_class("febf::1", AL_ADDR_LINK_LOCAL);
	expect_class("fec0::1", AL_ADDR_PRIVATE);
	expect_class("ff02::1", AL_ADDR_MULTICAST);
	expect_class("4000::1", AL_ADDR_RESERVED);
	expect_class("8000::1", AL_ADDR_RESERVED);
	assert_string_equal(al_addr_class_name(AL_ADDR_CGNAT), "cgnat");
	assert_string_equal(al_addr_class_name(AL_ADDR_LINK_LOCAL), "link-local");
	assert_string_equal(al_addr_class_name(AL_ADDR_PUBLIC), "public");
}

/* Rules */

static void expect_rule(const char *rule)
{
	struct al_error err = {0};
	int r = al_allow_add(NULL, rule, &err);

	if (r != 0)
		fail_msg("al_allow_add(\"%s\") = %d (%s), expected success", rule, r, err.msg);
}

static void expect_bad_rule(const char *rule, const char *reason)
{
	_cleanup_(al_allow_freep) struct al_allowlist *l = al_allow_new();
	struct al_error err = {0};
	int r = al_allow_add(l, rule, &err);

	if (r != -EINVAL)
		fail_msg("al_allow_add(\"%s\") = %d, expected -EINVAL", rule, r);
	assert_int_equal(al_allow_count(l), 0);
	assert_contains(err.msg, "allow rule");
	if (reason)
		assert_contains(err.msg, reason);
}

static void test_rules_valid(void **state)
{
	expect_rule("api.example.com");
	expect_rule("API.example.com:443");
	expect_rule("example.com.");
	expect_rule("*.example.com");
	expect_rule("*.example.com:8000-8100");
	expect_rule("*.com:*");
	expect_rule("localhost:8080");
	expect_rule("10.0.0.1");
	expect_rule("10.0.0.1:5432");
	expect_rule("10.1.0.0/16");
	expect_rule("10.1.0.0/16:443");
	expect_rule("0.0.0.0/0:*");
	expect_rule("1.2.3.4/32");
	expect_rule("2001:db8::1");
	expect_rule("[2001:db8::1]");
	expect_rule("[2001:db8::1]:443");
	expect_rule("fd00::/8");
	expect_rule("[fd00::/8]:*");
	expect_rule("::/0");
	expect_rule("example.com:1");
	expect_rule("example.com:65535");
	expect_rule("example.com:1-65535");
	expect_rule("example.com:443-443");
}

static void test_rules_invalid(void **state)
{
	char big[400];

	expect_bad_rule("", "empty");
	expect_bad_rule(NULL, "missing");
	expect_bad_rule(" example.com", "space");
	expect_bad_rule("example.com ", "space");
	expect_bad_rule("exa mple.com", "space");
	expect_bad_rule("example.com\n", "control");
	expect_bad_rule("a*.x.com", "first label");
	expect_bad_rule("x.*.com", "first label");
	expect_bad_rule("*.*.com", "first label");
	expect_bad_rule("*", "every host");
	expect_bad_rule("*:443", "every host");
	expect_bad_rule("*.", NULL);
	expect_bad_rule("*example.com", "first label");
	expect_bad_rule("*.10.0.0.1", "wildcard");
	expect_bad_rule("a..com", "empty label");
	expect_bad_rule("-a.com", "'-'");
	expect_bad_rule("example.com:0", "port");
	expect_bad_rule("example.com:65536", "port");
	expect_bad_rule("example.com:", "port");
	expect_bad_rule("example.com:80x", "port");
	expect_bad_rule("example.com:080", "port");
	expect_bad_rule("example.com:-1", "port");
	expect_bad_rule("example.com:8100-8000", "inverted");
	expect_bad_rule("example.com:0-80", "port");
	expect_bad_rule("example.com:80-", "port");
	expect_bad_rule("example.com:1-2-3", "port");
	expect_bad_rule("example.com:**", "port");
	expect_bad_rule(":443", "empty host");
	expect_bad_rule("10.0.0.0/33", "prefix");
	expect_bad_rule("10.0.0.0/", "prefix");
	expect_bad_rule("10.0.0.0/016", "prefix");
	expect_bad_rule("10.1.2.3/16", "bits set");
	expect_bad_rule("fd00::/129", "prefix");
	expect_bad_rule("fd00::1/8", "bits set");
	expect_bad_rule("example.com/8", "CIDR");
	expect_bad_rule("/8", "empty");
	expect_bad_rule("10.0.1", "IPv4");
	expect_bad_rule("127.1", "IPv4");
	expect_bad_rule("[10.0.0.1]:80", "only for IPv6");
	expect_bad_rule("[example.com]", "only for IPv6");
	expect_bad_rule("[::1", "']'");
	expect_bad_rule("[::1]443", "':PORT'");
	expect_bad_rule("[::1]:", "port");
	expect_bad_rule("fe80::1%eth0", "zone");
	expect_bad_rule("[fe80::1%eth0]:443", "zone");
	expect_bad_rule("user@example.com", "invalid character");
	expect_bad_rule("http://example.com", NULL);
	expect_bad_rule("::/0:*", NULL);
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	expect_bad_rule(big, "longer than");
}

static struct al_allowlist *make_list(const char *const *rules)
{
	struct al_allowlist *l = al_allow_new();
	struct al_error err = {0};

	for (size_t i = 0; rules[i]; i++)
		if (al_allow_add(l, rules[i], &err) < 0)
			fail_msg("rule %s: %s", rules[i], err.msg);
	return l;
}

static void expect_name(const struct al_allowlist *l, const char *name, uint16_t port,
			const char *rule)
{
	const struct al_allow_rule *r = NULL;
	bool ok = al_allow_match_name(l, name, port, &r);

	if (!rule) {
		if (ok)
			fail_msg("%s:%u allowed by \"%s\", expected denied", name, port,
				 al_allow_rule_text(r));
		assert_null(r);
		return;
	}
	if (!ok)
		fail_msg("%s:%u denied, expected allowed by \"%s\"", name, port, rule);
	assert_string_equal(al_allow_rule_text(r), rule);
}

static void test_match_names(void **state)
{
	static const char *const rules[] = {
	    "api.example.com", "*.example.org:443", "Mixed.Case.Net:8000-8100",
	    "any.test:*",      "dot.test.",	    NULL};
	_cleanup_(al_allow_freep) struct al_allowlist *l = make_list(rules);

	assert_int_equal(al_allow_count(l), 5);
	expect_name(l, "api.example.com", 443, "api.example.com");
	expect_name(l, "api.example.com", 80, "api.example.com");
	expect_name(l, "API.EXAMPLE.COM", 443, "api.example.com");
	expect_name(l, "api.example.com.", 443, "api.example.com");
	expect_name(l, "api.example.com..", 443, NULL);
	expect_name(l, "api.example.com", 8080, NULL);
	expect_name(l, "api.example.com", 0, NULL);
	expect_name(l, "example.com", 443, NULL);
	expect_name(l, "x.api.example.com", 443, NULL);
	expect_name(l, "api.example.com.evil.com", 443, NULL);
	expect_name(l, "evilapi.example.com", 443, NULL);

	expect_name(l, "a.example.org", 443, "*.example.org:443");
	expect_name(l, "a.b.c.example.org", 443, "*.example.org:443");
	expect_name(l, "A.Example.Org.", 443, "*.example.org:443");
	expect_name(l, "example.org", 443, NULL);
	expect_name(l, "example.org.", 443, NULL);
	expect_name(l, "evilexample.org", 443, NULL);
	expect_name(l, ".example.org", 443, NULL);
	expect_name(l, "..example.org", 443, NULL);
	expect_name(l, "a.example.org", 80, NULL);
	expect_name(l, "a.example.org.evil", 443, NULL);

	expect_name(l, "mixed.case.net", 8000, "Mixed.Case.Net:8000-8100");
	expect_name(l, "mixed.case.net", 8100, "Mixed.Case.Net:8000-8100");
	expect_name(l, "mixed.case.net", 8050, "Mixed.Case.Net:8000-8100");
	expect_name(l, "mixed.case.net", 7999, NULL);
	expect_name(l, "mixed.case.net", 8101, NULL);
	expect_name(l, "mixed.case.net", 443, NULL);

	expect_name(l, "any.test", 1, "any.test:*");
	expect_name(l, "any.test", 65535, "any.test:*");
	expect_name(l, "dot.test", 80, "dot.test.");

	/* Names that are not names never match. */
	expect_name(l, "", 443, NULL);
	expect_name(l, "api.example.com ", 443, NULL);
	expect_name(l, "api example.com", 443, NULL);
	expect_name(l, "*.example.org", 443, NULL);
	assert_false(al_allow_match_name(l, NULL, 443, NULL));
	assert_false(al_allow_match_name(NULL, "api.example.com", 443, NULL));
	assert_true(al_allow_match_name(l, "api.example.com", 443, NULL));
}

static void expect_addr(const struct al_allowlist *l, const char *addr, uint16_t port,
			const char *rule)
{
	const struct al_allow_rule *r = NULL;
	struct in6_addr a;
	uint8_t v4[4];
	bool ok;

	if (inet_pton(AF_INET, addr, v4) == 1)
		al_addr_from_ipv4(v4, &a);
	else if (inet_pton(AF_INET6, addr, &a) != 1)
		fail_msg("test address %s does not parse", addr);
	ok = al_allow_match_addr(l, &a, port, &r);
	if (!rule) {
		if (ok)
			fail_msg("%s:%u allowed by \"%s\", expected denied", addr, port,
				 al_allow_rule_text(r));
		return;
	}
	if (!ok)
		fail_msg("%s:%u denied, expected allowed by \"%s\"", addr, port, rule);
	assert_string_equal(al_allow_rule_text(r), rule);
}

static void test_match_addrs(void **state)
{
	static const char *const rules[] = {"10.1.0.0/16:443",
					    "192.168.1.10",
					    "[2001:db8::1]:8443",
					    "fd00::/8",
					    "[::ffff:172.16.0.0/108]:5432",
					    "example.com:*",
					    NULL};
	_cleanup_(al_allow_freep) struct al_allowlist *l = make_list(rules);

	expect_addr(l, "10.1.0.0", 443, "10.1.0.0/16:443");
	expect_addr(l, "10.1.255.255", 443, "10.1.0.0/16:443");
	expect_addr(l, "10.2.0.1", 443, NULL);
	expect_addr(l, "10.1.0.1", 80, NULL);
	expect_addr(l, "::ffff:10.1.2.3", 443, "10.1.0.0/16:443");
	expect_addr(l, "192.168.1.10", 80, "192.168.1.10");
	expect_addr(l, "192.168.1.10", 443, "192.168.1.10");
	expect_addr(l, "192.168.1.10", 22, NULL);
	expect_addr(l, "192.168.1.11", 80, NULL);
	expect_addr(l, "2001:db8::1", 8443, "[2001:db8::1]:8443");
	expect_addr(l, "2001:db8::2", 8443, NULL);
	expect_addr(l, "fd12::1", 443, "fd00::/8");
	expect_addr(l, "fe80::1", 443, NULL);
	expect_addr(l, "172.16.5.5", 5432, "[::ffff:172.16.0.0/108]:5432");
	expect_addr(l, "172.32.0.1", 5432, NULL);

	/* Name lookups of literals go through the address rules. */
	expect_name(l, "10.1.2.3", 443, "10.1.0.0/16:443");
	expect_name(l, "[2001:db8::1]", 8443, "[2001:db8::1]:8443");
	expect_name(l, "2001:DB8::1", 8443, "[2001:db8::1]:8443");
	expect_name(l, "[10.1.2.3]", 443, NULL);
	expect_name(l, "10.1.2.3:443", 443, NULL);
	expect_name(l, "010.1.2.3", 443, NULL);
	expect_name(l, "example.com", 1234, "example.com:*");
	/* A name rule never matches an address, and a port 0 never matches. */
	expect_addr(l, "93.184.216.34", 1234, NULL);
	expect_addr(l, "10.1.0.1", 0, NULL);
}

static void test_match_families(void **state)
{
	static const char *const rules[] = {"[::/0]:*", NULL};
	static const char *const rules4[] = {"0.0.0.0/0:*", NULL};
	_cleanup_(al_allow_freep) struct al_allowlist *l6 = make_list(rules);
	_cleanup_(al_allow_freep) struct al_allowlist *l4 = make_list(rules4);

	/* An IPv6 rule does not cover IPv4-mapped addresses and vice versa. */
	expect_addr(l6, "2001:4860::1", 443, "[::/0]:*");
	expect_addr(l6, "1.2.3.4", 443, NULL);
	expect_addr(l4, "1.2.3.4", 443, "0.0.0.0/0:*");
	expect_addr(l4, "2001:4860::1", 443, NULL);
	expect_name(l4, "::ffff:1.2.3.4", 443, "0.0.0.0/0:*");
}

static void test_rule_order_and_empty(void **state)
{
	static const char *const rules[] = {"*.example.com:443", "a.example.com", NULL};
	_cleanup_(al_allow_freep) struct al_allowlist *l = make_list(rules);
	_cleanup_(al_allow_freep) struct al_allowlist *empty = al_allow_new();

	expect_name(l, "a.example.com", 443, "*.example.com:443");
	expect_name(l, "a.example.com", 80, "a.example.com");
	expect_name(empty, "a.example.com", 443, NULL);
	expect_addr(empty, "1.2.3.4", 443, NULL);
	assert_int_equal(al_allow_count(empty), 0);
	assert_int_equal(al_allow_count(NULL), 0);
	al_allow_free(NULL);
}

static void test_match_any_port(void **state)
{
	static const char *const rules[] = {"api.example.com:8443", "*.example.org:9000-9001",
					    "10.0.0.1:*", NULL};
	_cleanup_(al_allow_freep) struct al_allowlist *l = make_list(rules);
	const struct al_allow_rule *r = NULL;

	assert_true(al_allow_match_name_any_port(l, "API.example.com.", &r));
	assert_string_equal(al_allow_rule_text(r), "api.example.com:8443");
	assert_true(al_allow_match_name_any_port(l, "a.b.example.org", &r));
	assert_string_equal(al_allow_rule_text(r), "*.example.org:9000-9001");
	assert_true(al_allow_match_name_any_port(l, "api.example.com", NULL));
	r = NULL;
	assert_false(al_allow_match_name_any_port(l, "example.org", &r));
	assert_null(r);
	/* Only names: the DNS stub never answers for a literal. */
	assert_false(al_allow_match_name_any_port(l, "10.0.0.1", NULL));
	assert_false(al_allow_match_name_any_port(l, "a..example.org", NULL));
	assert_false(al_allow_match_name_any_port(l, "", NULL));
	assert_false(al_allow_match_name_any_port(l, NULL, NULL));
	assert_false(al_allow_match_name_any_port(NULL, "api.example.com", NULL));
}

/* The kind of space a rule names, and what the private-address guard lets
 * through for it. */
static void expect_rule_class(const char *rule, enum al_addr_class want)
{
	_cleanup_(al_allow_freep) struct al_allowlist *l =
	    make_list((const char *const[]){rule, NULL});
	enum al_addr_class got = al_allow_rule_class(al_allow_rule_at(l, 0));

	if (got != want)
		fail_msg("rule %s names %s space, expected %s", rule, al_addr_class_name(got),
			 al_addr_class_name(want));
}

static bool covers(const char *rule, const char *addr)
{
	_cleanup_(al_allow_freep) struct al_allowlist *l =
	    make_list((const char *const[]){rule, NULL});
	struct al_host h;

	assert_int_equal(al_host_parse(addr, strlen(addr), &h, NULL), 0);
	return al_allow_rule_covers_class(al_allow_rule_at(l, 0), &h.addr);
}

static void test_rule_class(void **state)
{
	expect_rule_class("127.0.0.1:8080", AL_ADDR_LOOPBACK);
	expect_rule_class("127.0.0.0/8:*", AL_ADDR_LOOPBACK);
	expect_rule_class("127.5.0.0/16", AL_ADDR_LOOPBACK);
	expect_rule_class("::1", AL_ADDR_LOOPBACK);
	expect_rule_class("[::ffff:127.0.0.1]:80", AL_ADDR_LOOPBACK);
	expect_rule_class("[64:ff9b::7f00:1]:80", AL_ADDR_LOOPBACK);
	expect_rule_class("localhost:8080", AL_ADDR_LOOPBACK);
	expect_rule_class("LOCALHOST.", AL_ADDR_LOOPBACK);
	expect_rule_class("a.b.localhost", AL_ADDR_LOOPBACK);
	expect_rule_class("*.localhost:*", AL_ADDR_LOOPBACK);
	expect_rule_class("notlocalhost", AL_ADDR_PUBLIC);
	expect_rule_class("localhost.example.com", AL_ADDR_PUBLIC);
	expect_rule_class("0.0.0.0:80", AL_ADDR_UNSPECIFIED);
	expect_rule_class("::", AL_ADDR_UNSPECIFIED);
	expect_rule_class("10.0.0.0/8:5432", AL_ADDR_PRIVATE);
	expect_rule_class("169.254.169.254:80", AL_ADDR_LINK_LOCAL);
	/* A network across classes names none of them. */
	expect_rule_class("0.0.0.0/0:*", AL_ADDR_PUBLIC);
	expect_rule_class("::/0", AL_ADDR_PUBLIC);
	expect_rule_class("0.0.0.0/8", AL_ADDR_PUBLIC);
	expect_rule_class("126.0.0.0/7", AL_ADDR_PUBLIC);
	expect_rule_class("10.0.0.0/7", AL_ADDR_PUBLIC);
	expect_rule_class("203.0.113.0/24", AL_ADDR_RESERVED);
	expect_rule_class("api.example.com", AL_ADDR_PUBLIC);
}

static void test_rule_covers_class(void **state)
{
	assert_true(covers("10.0.0.0/8:5432", "10.1.2.3"));
	assert_true(covers("169.254.169.254:80", "169.254.169.254"));
	assert_true(covers("127.0.0.0/8", "127.0.0.1"));
	/* A broad rule only contains such space: not even the unspecified
	 * address its first address is (connecting there reaches this host). */
	assert_false(covers("0.0.0.0/0:*", "0.0.0.0"));
	assert_false(covers("0.0.0.0/0:*", "127.0.0.1"));
	assert_false(covers("0.0.0.0/0:*", "10.1.2.3"));
	assert_false(covers("::/0", "::"));
	assert_false(covers("::/0", "::1"));
	assert_false(covers("0.0.0.0/8", "0.0.0.0"));
	assert_false(covers("10.0.0.0/7", "10.1.2.3"));
	assert_false(covers("api.example.com", "10.1.2.3"));
	assert_false(al_allow_rule_covers_class(NULL, &(struct in6_addr){0}));
}

static void test_rule_accessors(void **state)
{
	static const char *const rules[] = {"a.test",	"b.test:8080",	       "c.test:8000-8100",
					    "d.test:*", "10.1.0.0/16:1-65535", NULL};
	static const char *const ports[] = {"", ":8080", ":8000-8100", ":*", ":*"};
	_cleanup_(al_allow_freep) struct al_allowlist *l = make_list(rules);
	struct in6_addr net;
	unsigned prefix = 0;
	char buf[32];

	for (size_t i = 0; rules[i]; i++) {
		al_allow_rule_ports(al_allow_rule_at(l, i), buf, sizeof(buf));
		assert_string_equal(buf, ports[i]);
	}
	assert_null(al_allow_rule_at(l, 5));
	assert_null(al_allow_rule_at(NULL, 0));
	assert_false(al_allow_rule_network(al_allow_rule_at(l, 0), &net, &prefix));
	assert_true(al_allow_rule_network(al_allow_rule_at(l, 4), &net, &prefix));
	assert_int_equal(prefix, 96 + 16);
	al_addr_format(&net, buf, sizeof(buf));
	assert_string_equal(buf, "10.1.0.0");
}

int main(void)
{
	/* clang-format off */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_host_names),
		cmocka_unit_test(test_host_bad_names),
		cmocka_unit_test(test_host_numeric),
		cmocka_unit_test(test_host_ipv6),
		cmocka_unit_test(test_addr_class_v4),
		cmocka_unit_test(test_addr_class_v6),
		cmocka_unit_test(test_rules_valid),
		cmocka_unit_test(test_rules_invalid),
		cmocka_unit_test(test_match_names),
		cmocka_unit_test(test_match_addrs),
		cmocka_unit_test(test_match_families),
		cmocka_unit_test(test_match_any_port),
		cmocka_unit_test(test_rule_order_and_empty),
		cmocka_unit_test(test_rule_class),
		cmocka_unit_test(test_rule_covers_class),
		cmocka_unit_test(test_rule_accessors),
	};
	/* clang-format on */

	return cmocka_run_group_tests(tests, NULL, NULL);
}
