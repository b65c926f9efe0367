/* gateway/proto.h: the messages between the supervisor and the gateway
 * process. Round trips, and every way a message can be wrong. */
#include "unit.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "cred/store.h"
#include "gateway/proto.h"
#include "policy/cred.h"

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

	/* The process backend's peer check: the run's uid, round trip; a
	 * payload of another size is refused. */
	n = al_gwp_encode_peers(0x70010000u, buf, sizeof(buf));
	assert_int_equal(al_gwp_decode(buf, (size_t)n, &m, &err), 0);
	assert_int_equal(m.type, AL_GWP_PEERS);
	assert_int_equal(m.uid, 0x70010000u);
	buf[4] = 2; /* the header's length: 2 bytes */
	assert_true(al_gwp_decode(buf, 8 + 2, &m, &err) < 0);

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

/* The run's new deadline (al_run_extend, a resume): eight bytes, a time
 * from 1 to the year 9999. */
static void test_deadline(void **state)
{
	struct al_gwp_msg m;
	struct al_error err = {0};
	int64_t d = 1796155800;
	size_t n;

	(void)state;
	int len = al_gwp_encode_deadline(d, buf, sizeof(buf));
	assert_int_equal(len, (int)(sizeof(struct al_gwp_hdr) + 8));
	assert_int_equal(al_gwp_decode(buf, (size_t)len, &m, &err), 0);
	assert_int_equal(m.type, AL_GWP_DEADLINE);
	assert_int_equal(m.deadline, d);
	d = AL_GWP_DEADLINE_MAX;
	raw(AL_GWP_DEADLINE, &d, sizeof(d), &n);
	assert_int_equal(al_gwp_decode(buf, n, &m, &err), 0);
	assert_int_equal(m.deadline, AL_GWP_DEADLINE_MAX);
	raw(AL_GWP_DEADLINE, &d, 4, &n);
	expect_bad(n, "deadline of the wrong size");
	raw(AL_GWP_DEADLINE, "123456789", 9, &n);
	expect_bad(n, "deadline of the wrong size");
	d = 0;
	raw(AL_GWP_DEADLINE, &d, sizeof(d), &n);
	expect_bad(n, "deadline out of range");
	d = -5;
	raw(AL_GWP_DEADLINE, &d, sizeof(d), &n);
	expect_bad(n, "deadline out of range");
	d = AL_GWP_DEADLINE_MAX + 1;
	raw(AL_GWP_DEADLINE, &d, sizeof(d), &n);
	expect_bad(n, "deadline out of range");
	assert_int_equal(al_gwp_encode_deadline(1, buf, 8), -ENOSPC);
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

/* ---- the claim of a warm pool's sandbox (proto-claim.c) ---------------- */

#define PH "airlock-ph-0123456789abcdef0123456789abcdef"

/* A claim message by hand: json, NUL, then each value with its length. */
static size_t claim_raw(const char *json, const char *const *values)
{
	size_t n = sizeof(struct al_gwp_hdr), l = strlen(json) + 1;

	memcpy(buf + n, json, l);
	n += l;
	for (size_t i = 0; values && values[i]; i++) {
		uint32_t vl = (uint32_t)strlen(values[i]);
		memcpy(buf + n, &vl, 4);
		memcpy(buf + n + 4, values[i], vl);
		n += 4 + vl;
	}
	struct al_gwp_hdr h = {AL_GWP_CLAIM, (uint32_t)(n - sizeof(h))};
	memcpy(buf, &h, sizeof(h));
	return n;
}

static void test_claim_round_trip(void **state)
{
	(void)state;
	struct al_plan p = {0};
	char *hosts[] = {"a.test:443", NULL}, *methods[] = {"GET", NULL},
	     *paths[] = {"/v1/*", NULL};
	struct al_rule_opts ro = {
	    .rule = "a.test:443", .methods = methods, .paths = paths, .max_body = 100};
	struct al_rule_opts *rop = &ro;
	struct al_secret_def d = {
	    .name = "KEY", .hosts = hosts, .how = AL_HOW_HEADER, .header = "X-Key", .tmpl = "k={}"};
	struct al_plan_secret ps = {.def = &d, .placeholder = PH};
	struct al_cred_secret cs = {.ps = &ps, .value = {.data = "s3cr\0t", .len = 6}};
	struct al_cred c = {.v = &cs, .n = 1};
	struct al_gwp_msg m;
	struct al_error err = {0};

	p.allow = al_allow_new();
	assert_int_equal(al_allow_add(p.allow, "a.test:443", &err), 0);
	assert_int_equal(al_allow_add(p.allow, "*.b.test", &err), 0);
	p.rule_opts = &rop;
	p.n_rule_opts = 1;
	int n = al_gwp_encode_claim(&p, &c, buf, sizeof(buf));
	assert_true(n > 0);
	assert_int_equal(al_gwp_decode(buf, (size_t)n, &m, &err), 0);
	assert_int_equal(m.type, AL_GWP_CLAIM);
	assert_non_null(m.claim);
	const json_t *allow = json_object_get(m.claim, "allow");
	assert_int_equal(json_array_size(allow), 2);
	assert_string_equal(json_string_value(json_array_get(allow, 1)), "*.b.test");
	const json_t *r = json_array_get(json_object_get(m.claim, "rules"), 0);
	assert_string_equal(json_string_value(json_array_get(json_object_get(r, "methods"), 0)),
			    "GET");
	assert_int_equal(json_integer_value(json_object_get(r, "max_body")), 100);
	const json_t *s = json_array_get(json_object_get(m.claim, "secrets"), 0);
	assert_string_equal(json_string_value(json_object_get(s, "placeholder")), PH);
	assert_string_equal(json_string_value(json_object_get(s, "header")), "X-Key");
	/* The value is not in the JSON, only after it, bytes as they are. */
	assert_null(
	    memmem(buf, (size_t)(sizeof(struct al_gwp_hdr) + m.claim_value[0].off - 4), "s3cr", 4));
	assert_int_equal(m.claim_value[0].len, 6);
	assert_memory_equal(buf + sizeof(struct al_gwp_hdr) + m.claim_value[0].off, "s3cr\0t", 6);
	json_decref(m.claim);

	/* What a claim does not carry. */
	p.intercept = true;
	assert_int_equal(al_gwp_encode_claim(&p, &c, buf, sizeof(buf)), -EOPNOTSUPP);
	p.intercept = false;
	d.token = true;
	assert_int_equal(al_gwp_encode_claim(&p, &c, buf, sizeof(buf)), -EOPNOTSUPP);
	d.token = false;
	d.how = AL_HOW_SIGV4;
	assert_int_equal(al_gwp_encode_claim(&p, &c, buf, sizeof(buf)), -EOPNOTSUPP);
	d.how = AL_HOW_HEADER;
	/* Too big for one message. */
	static char big[AL_GWP_MAX];
	memset(big, 'x', sizeof(big) - 1);
	cs.value = (struct al_secret_value){.data = big, .len = sizeof(big) - 1};
	assert_int_equal(al_gwp_encode_claim(&p, &c, buf, sizeof(buf)), -E2BIG);
	al_allow_free(p.allow);

	/* The gateway's answer. */
	n = al_gwp_encode_claimed(EINVAL, "bad\nthing", buf, sizeof(buf));
	assert_int_equal(al_gwp_decode(buf, (size_t)n, &m, &err), 0);
	assert_int_equal(m.type, AL_GWP_CLAIMED);
	assert_int_equal(m.error, EINVAL);
	assert_string_equal(m.text, "bad?thing");
}

static void claim_bad(const char *json, const char *const *values, const char *why)
{
	struct al_gwp_msg m;
	struct al_error err = {0};
	size_t n = claim_raw(json, values);

	if (al_gwp_decode(buf, n, &m, &err) != -EINVAL)
		fail_msg("accepted: %s", json);
	assert_contains(err.msg, why);
	assert_null(m.claim);
}

#define SECRET(extra)                                                                              \
	"{\"allow\": [\"a.test:443\"], \"rules\": [], \"secrets\": [{\"name\": \"KEY\", "          \
	"\"hosts\": [\"a.test:443\"], \"how\": \"header\", \"header\": \"X-Key\", \"template\": "  \
	"\"{}\", \"body\": false, \"placeholder\": \"" PH "\"" extra "}]}"

static void test_claim_malformed(void **state)
{
	(void)state;
	const char *const one[] = {"v", NULL}, *const two[] = {"v", "w", NULL};
	struct al_gwp_msg m;
	struct al_error err = {0};

	/* The well-formed one these vary. */
	size_t n = claim_raw(SECRET(""), one);
	assert_int_equal(al_gwp_decode(buf, n, &m, &err), 0);
	json_decref(m.claim);

	claim_bad("{\"allow\": []", NULL, "not the object");
	claim_bad("{\"allow\": [], \"rules\": [], \"secrets\": [], \"x\": 1}", NULL,
		  "not the object");
	claim_bad("{\"rules\": [], \"secrets\": []}", NULL, "allow: missing");
	claim_bad("{\"allow\": [\"127.1\"], \"rules\": [], \"secrets\": []}", NULL, "allow");
	claim_bad("{\"allow\": [\"a\\u0001\"], \"rules\": [], \"secrets\": []}", NULL,
		  "not printable");
	claim_bad("{\"allow\": [\"a.test\"], \"rules\": [{\"rule\": \"b.test\", \"max_body\": 0}], "
		  "\"secrets\": []}",
		  NULL, "not in the allowlist");
	claim_bad(
	    "{\"allow\": [\"a.test\"], \"rules\": [{\"rule\": \"a.test\", \"max_body\": -1}], "
	    "\"secrets\": []}",
	    NULL, "max_body");
	claim_bad("{\"allow\": [\"a.test\"], \"rules\": [{\"rule\": \"a.test\", \"max_body\": 0, "
		  "\"methods\": [\"G T\"]}], \"secrets\": []}",
		  NULL, "rules.methods");
	claim_bad("{\"allow\": [\"a.test\"], \"rules\": [{\"rule\": \"a.test\", \"max_body\": 0, "
		  "\"paths\": [\"no-slash\"]}], \"secrets\": []}",
		  NULL, "rules.paths");
	/* Values: missing, one too many, empty, longer than the message. */
	claim_bad(SECRET(""), NULL, "a value missing");
	claim_bad(SECRET(""), two, "bytes after its values");
	claim_bad(SECRET(""), (const char *const[]){"", NULL}, "wrong size");
	n = claim_raw(SECRET(""), one);
	uint32_t huge = 1000;
	memcpy(buf + n - 5, &huge, 4);
	assert_int_equal(al_gwp_decode(buf, n, &m, &err), -EINVAL);
	assert_contains(err.msg, "wrong size");
	/* Secrets. */
	claim_bad(SECRET(", \"extra\": 1"), one, "unknown fields");
	claim_bad("{\"allow\": [], \"rules\": [], \"secrets\": [{\"name\": \"bad name\"}]}", one,
		  "not a variable's");
	const struct {
		const char *from, *to, *why;
	} edits[] = {
	    {PH, "airlock-ph-XYZ", "placeholder"},
	    {"\"X-Key\"", "\"Host\"", "a header that is not"},
	    {"\"X-Key\"", "\"X Key\"", "a header that is not"},
	    {"\"template\": \"{}\"", "\"template\": \"no braces\"", "a header that is not"},
	    {"\"template\": \"{}\"", "\"template\": \"{}{}\"", "a header that is not"},
	    {"\"how\": \"header\"", "\"how\": \"sigv4\"", "unknown way"},
	    {"\"how\": \"header\"", "\"how\": \"basic\"", "basic without a user"},
	    {"\"body\": false", "\"body\": 1", "body is not a boolean"},
	    {"\"hosts\": [\"a.test:443\"]", "\"hosts\": []", "secrets.hosts: empty"},
	    {"\"hosts\": [\"a.test:443\"]", "\"hosts\": [\"0x7f.1\"]", "secrets.hosts"},
	};
	for (size_t i = 0; i < sizeof(edits) / sizeof(edits[0]); i++) {
		char text[2048];
		const char *base = SECRET("");
		const char *at = strstr(base, edits[i].from);
		assert_non_null(at);
		snprintf(text, sizeof(text), "%.*s%s%s", (int)(at - base), base, edits[i].to,
			 at + strlen(edits[i].from));
		claim_bad(text, one, edits[i].why);
	}
	/* More secrets than a plan has. */
	char many[8192] = "{\"allow\": [], \"rules\": [], \"secrets\": [";
	for (int i = 0; i <= AL_PLAN_SECRETS_MAX; i++)
		strcat(many, i ? ", {}" : "{}");
	strcat(many, "]}");
	claim_bad(many, NULL, "secrets: not an array of its size");
	/* The answer: an error out of range. */
	int32_t e = -1;
	raw(AL_GWP_CLAIMED, &e, sizeof(e), &n);
	expect_bad(n, "out of range");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_round_trips),	    cmocka_unit_test(test_malformed),
	    cmocka_unit_test(test_deadline),	    cmocka_unit_test(test_refusal_malformed),
	    cmocka_unit_test(test_audit_refusals),  cmocka_unit_test(test_claim_round_trip),
	    cmocka_unit_test(test_claim_malformed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
