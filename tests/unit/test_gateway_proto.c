/* gateway/proto.h: the messages between the supervisor and the gateway
 * process. Round trips, and every way a message can be wrong. */
#include "unit.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "gateway/proto.h"

static uint8_t buf[AL_GWP_MAX + 64];

static void raw(uint32_t type, const void *payload, uint32_t len, size_t *n)
{
	struct al_gwp_hdr h = {type, len};
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), payload, len);
	*n = sizeof(h) + len;
}

static void expect_bad(size_t n, const char *why)
{
	struct al_gwp_msg m;
	struct al_error err = {0};

	assert_int_equal(al_gwp_decode(buf, n, &m, &err), -EINVAL);
	assert_contains(err.msg, why);
	assert_null(m.fields);
}

static void test_round_trips(void **state)
{
	struct al_gwp_msg m;
	struct al_error err = {0};
	struct al_gateway_stats st = {1, 2, 3, 4, 5, 6, 7, 8, 9};
	int n;

	(void)state;
	n = al_gwp_encode_listener(AL_GATEWAY_TRANSPARENT, buf, sizeof(buf));
	assert_int_equal(al_gwp_decode(buf, (size_t)n, &m, &err), 0);
	assert_int_equal(m.type, AL_GWP_LISTENER);
	assert_int_equal(m.kind, AL_GATEWAY_TRANSPARENT);

	n = al_gwp_encode_end(buf, sizeof(buf));
	assert_int_equal(al_gwp_decode(buf, (size_t)n, &m, &err), 0);
	assert_int_equal(m.type, AL_GWP_END);

	n = al_gwp_encode_started(0, 7, EACCES, "", buf, sizeof(buf));
	assert_int_equal(al_gwp_decode(buf, (size_t)n, &m, &err), 0);
	assert_int_equal(m.type, AL_GWP_STARTED);
	assert_int_equal(m.error, 0);
	assert_int_equal(m.landlock_abi, 7);
	assert_int_equal(m.file_errno, EACCES);
	n = al_gwp_encode_started(EINVAL, 0, 0, "resolver \"x\"\n bad", buf, sizeof(buf));
	assert_int_equal(al_gwp_decode(buf, (size_t)n, &m, &err), 0);
	assert_string_equal(m.text, "resolver \"x\"? bad"); /* control characters replaced */

	n = al_gwp_encode_stats(&st, buf, sizeof(buf));
	assert_int_equal(al_gwp_decode(buf, (size_t)n, &m, &err), 0);
	assert_memory_equal(&m.stats, &st, sizeof(st));

	struct al_gateway_usage use = {"api.example.com", 1, 1u << 20, (uint64_t)1 << 40};
	n = al_gwp_encode_usage(&use, buf, sizeof(buf));
	assert_int_equal(al_gwp_decode(buf, (size_t)n, &m, &err), 0);
	assert_int_equal(m.type, AL_GWP_USAGE);
	assert_string_equal(m.usage.host, "api.example.com");
	assert_int_equal(m.usage.requests, 1);
	assert_int_equal(m.usage.bytes_up, 1u << 20);
	assert_int_equal(m.usage.bytes_down, (uint64_t)1 << 40);
	memset(use.host, 'a', AL_HOST_MAX); /* the longest name */
	use.host[AL_HOST_MAX] = '\0';
	n = al_gwp_encode_usage(&use, buf, sizeof(buf));
	assert_int_equal(al_gwp_decode(buf, (size_t)n, &m, &err), 0);
	assert_int_equal(strlen(m.usage.host), AL_HOST_MAX);

	struct al_gateway_refusal rf = {AL_GW_REFUSED_MISUSE, 8080, "TOK", "header X-Leak",
					"other.internal"};
	n = al_gwp_encode_refusal(&rf, buf, sizeof(buf));
	assert_int_equal(al_gwp_decode(buf, (size_t)n, &m, &err), 0);
	assert_int_equal(m.type, AL_GWP_REFUSAL);
	assert_memory_equal(&m.refusal, &rf, sizeof(rf));
	struct al_gateway_refusal dns = {AL_GW_REFUSED_DNS, 0, "", "no rule", ""};
	n = al_gwp_encode_refusal(&dns, buf, sizeof(buf));
	assert_int_equal(al_gwp_decode(buf, (size_t)n, &m, &err), 0);
	assert_int_equal(m.refusal.kind, AL_GW_REFUSED_DNS);
	assert_string_equal(m.refusal.why, "no rule");
	assert_string_equal(m.refusal.host, "");

	json_t *o = json_pack("{s:s, s:i}", "name", "api.example.com", "port", 443);
	n = al_gwp_encode_audit("net.connect", o, buf, sizeof(buf));
	assert_true(n > 0);
	assert_int_equal(al_gwp_decode(buf, (size_t)n, &m, &err), 0);
	assert_string_equal(m.event, "net.connect");
	assert_true(json_equal(m.fields, o));
	json_decref(m.fields);
	json_decref(o);
}

static void test_malformed(void **state)
{
	struct al_gwp_hdr h = {AL_GWP_END, 0};
	uint32_t kind = AL_GATEWAY_N_LISTENERS;
	int32_t started[3] = {0, 7, 13};
	struct al_gwp_msg m;
	struct al_error err = {0};
	size_t n;

	(void)state;
	memcpy(buf, &h, sizeof(h));
	expect_bad(sizeof(h) - 1, "bad size");
	expect_bad(AL_GWP_MAX + 1, "bad size");
	h.len = 4; /* says more than there is */
	memcpy(buf, &h, sizeof(h));
	expect_bad(sizeof(h), "length does not match");
	raw(99, "", 0, &n);
	expect_bad(n, "unknown type");
	raw(AL_GWP_LISTENER, &kind, sizeof(kind), &n);
	expect_bad(n, "unknown listener kind");
	raw(AL_GWP_LISTENER, &kind, 2, &n);
	expect_bad(n, "wrong size");
	raw(AL_GWP_END, "x", 1, &n);
	expect_bad(n, "payload");
	raw(AL_GWP_STATS, "12345678", 8, &n);
	expect_bad(n, "wrong size");
	raw(AL_GWP_STARTED, started, 8, &n);
	expect_bad(n, "wrong size");
	started[0] = -1;
	raw(AL_GWP_STARTED, started, sizeof(started), &n);
	expect_bad(n, "out of range");
	started[0] = 0;
	started[1] = 1000;
	raw(AL_GWP_STARTED, started, sizeof(started), &n);
	expect_bad(n, "out of range");

	/* usage: the three counters and a host of 1 to AL_HOST_MAX printable
	 * characters, of 1 to AL_GWP_MAX_USE_REQUESTS connections */
	uint8_t u[24 + AL_HOST_MAX + 1] = {0};
	raw(AL_GWP_USAGE, u, 24, &n);
	expect_bad(n, "wrong size"); /* no host */
	memset(u + 24, 'a', AL_HOST_MAX + 1);
	raw(AL_GWP_USAGE, u, sizeof(u), &n);
	expect_bad(n, "wrong size"); /* a host too long */
	memcpy(u + 24, "a\0b", 3);
	raw(AL_GWP_USAGE, u, 27, &n);
	expect_bad(n, "not printable");
	memcpy(u + 24, "a b", 3);
	raw(AL_GWP_USAGE, u, 27, &n);
	expect_bad(n, "not printable");
	memcpy(u + 24, "a\nb", 3);
	raw(AL_GWP_USAGE, u, 27, &n);
	expect_bad(n, "not printable");
	memcpy(u + 24, "abc", 3);
	uint64_t r = 0; /* no connection */
	memcpy(u, &r, sizeof(r));
	raw(AL_GWP_USAGE, u, 27, &n);
	expect_bad(n, "no connection or of too many");
	r = AL_GWP_MAX_USE_REQUESTS + 1;
	memcpy(u, &r, sizeof(r));
	raw(AL_GWP_USAGE, u, 27, &n);
	expect_bad(n, "no connection or of too many");
	r = AL_GWP_MAX_USE_REQUESTS; /* what closed since the last report */
	memcpy(u, &r, sizeof(r));
	raw(AL_GWP_USAGE, u, 27, &n);
	assert_int_equal(al_gwp_decode(buf, n, &m, &err), 0);
	assert_string_equal(m.usage.host, "abc");
	assert_int_equal(m.usage.requests, AL_GWP_MAX_USE_REQUESTS);
}

/* A refusal: a known kind, a port for misuse only, three printable
 * fields that fit, nothing after them. */
static void test_refusal_malformed(void **state)
{
#define B(s)                                                                                       \
	{                                                                                          \
		s, sizeof(s) - 1                                                                   \
	}
	static const struct {
		const char *s;
		size_t len;
	} bad[] = {
	    B("\x03\0\0\0\0\0\0\0\0no rule\0a.test"),	 /* unknown kind */
	    B("\x01\0\0\0\x35\0\0\0\0no rule\0a.test"),	 /* a port for DNS */
	    B("\x02\0\0\0\0\0\x01\0T\0body\0a.test"),	 /* port past 65535 */
	    B("\x02\0\0\0\x50\0\0\0T\0body"),		 /* a field missing */
	    B("\x02\0\0\0\x50\0\0\0T\0\0a.test"),	 /* no where */
	    B("\x02\0\0\0\x50\0\0\0T\0body\0"),		 /* misuse with no host */
	    B("\x02\0\0\0\x50\0\0\0T\0bo\ndy\0a.test"),	 /* not printable */
	    B("\x02\0\0\0\x50\0\0\0T\0body\0a.test\0x"), /* bytes after the host */
	    B("\x02\0\0\0\x50\0"),			 /* too short */
	};
#undef B
	struct al_gwp_msg m;
	struct al_error err = {0};
	uint8_t p[8 + AL_GW_REFUSAL_TEXT + 16];
	size_t n;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		raw(AL_GWP_REFUSAL, bad[i].s, (uint32_t)bad[i].len, &n);
		assert_int_equal(al_gwp_decode(buf, n, &m, NULL), -EINVAL);
	}
	/* a secret's name as long as its field allows, and one byte more */
	memcpy(p, "\x02\0\0\0\x50\0\0\0", 8);
	memset(p + 8, 'S', AL_GW_REFUSAL_TEXT - 1);
	memcpy(p + 8 + AL_GW_REFUSAL_TEXT - 1, "\0body\0h", 7);
	raw(AL_GWP_REFUSAL, p, 8 + AL_GW_REFUSAL_TEXT - 1 + 7, &n);
	assert_int_equal(al_gwp_decode(buf, n, &m, &err), 0);
	assert_int_equal(strlen(m.refusal.secret), AL_GW_REFUSAL_TEXT - 1);
	memset(p + 8, 'S', AL_GW_REFUSAL_TEXT);
	memcpy(p + 8 + AL_GW_REFUSAL_TEXT, "\0body\0h", 7);
	raw(AL_GWP_REFUSAL, p, 8 + AL_GW_REFUSAL_TEXT + 7, &n);
	expect_bad(n, "too long or not printable");
}

static void test_audit_refusals(void **state)
{
#define B(s)                                                                                       \
	{                                                                                          \
		s, sizeof(s) - 1                                                                   \
	}
	static const struct {
		const char *s;
		size_t len;
	} bad[] = {
	    B("run.end\0{\"reason\":\"exited\"}"),  /* not the gateway's to send */
	    B("net.connect\0[1,2]"),		    /* not an object */
	    B("net.connect\0{\"run\":\"forged\"}"), /* sets a field the stream owns */
	    B("net.connect\0{\"ts\":\"2000-01-01\"}"),
	    B("net.dns\0{\"event\":\"run.end\"}"),
	    B("net.dns\0{\"a\":1,\"a\":2}"), /* duplicate key */
	    B("net.dns\0{\"a\":1} trailing"),
	    B("net.dns"),					  /* no NUL, no JSON */
	    B("a-very-long-event-name-that-never-ends-here\0{}"), /* no NUL in 32 bytes */
	};
#undef B
	size_t n;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		raw(AL_GWP_AUDIT, bad[i].s, (uint32_t)bad[i].len, &n);
		struct al_gwp_msg m;
		assert_int_equal(al_gwp_decode(buf, n, &m, NULL), -EINVAL);
		assert_null(m.fields);
	}
	/* Too large to encode: refused, not cut. */
	json_t *o = json_object();
	char big[AL_GWP_MAX];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	json_object_set_new(o, "name", json_string(big));
	assert_int_equal(al_gwp_encode_audit("net.dns", o, buf, sizeof(buf)), -E2BIG);
	json_decref(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_round_trips),
	    cmocka_unit_test(test_malformed),
	    cmocka_unit_test(test_refusal_malformed),
	    cmocka_unit_test(test_audit_refusals),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
