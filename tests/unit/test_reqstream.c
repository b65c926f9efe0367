/* gateway/reqstream.h: the HTTP request stream filter (rules, injection,
 * placeholder detection, framing), and gateway/needles.h.
 *
 * Every case runs three times: in one feed, byte by byte with DATA events
 * of at most 5 bytes, and in 7-byte feeds with 3-byte events. The events
 * must be the same each time, and so must the bytes sent upstream (when a
 * request is cut, the bytes before the cut may differ in length: the
 * one-feed run's are then a prefix of the others). Each run also checks,
 * whatever the case: no DATA event is larger than its room, nothing is
 * sent after a final event, no needle that is not scoped to the host is
 * ever sent, and no text the filter produced holds a secret's value
 * (every value holds "SECRETVALUE") or any needle. */
#include "unit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "gateway/needles.h"
#include "gateway/reqstream.h"

#define MARK	     "SECRETVALUE"
#define PH_HDR	     "airlock-ph-hdr-0123456789abcdef0123456789"
#define PH_BASIC     "airlock-ph-basic-0123456789abcdef01234567"
#define PH_QUERY     "airlock-ph-query-0123456789abcdef01234567"
#define PH_BODY	     "airlock-ph-body-0123456789abcdef012345678"
#define PH_AWS	     "airlock-ph-awssecret-0123456789abcdef0123"
#define PH_TOKEN     "airlock-ph-token-0123456789abcdef01234567"
#define FAKE_KEY     "AKIAAIRLOCKFAKE00001"
#define PH_FOREIGN   "airlock-ph-foreign-0123456789abcdef012345"
#define FAKE_FOREIGN "AKIAAIRLOCKFAKE99999"

static const char *const needles[] = {
    PH_HDR, PH_BASIC, PH_QUERY, PH_BODY, PH_AWS, PH_TOKEN, FAKE_KEY, PH_FOREIGN, FAKE_FOREIGN,
};
#define N_NEEDLES     (sizeof(needles) / sizeof(needles[0]))
#define I_FOREIGN     7
#define I_FAKEFOREIGN 8
#define RS_TEST_MANY  17

static const struct al_secret_use s_header = {
    .name = "api-token",
    .placeholder = PH_HDR,
    .value = MARK "-hdr",
    .value_len = sizeof(MARK "-hdr") - 1,
    .how = AL_SECRET_HEADER,
    .header = "Authorization",
    .tmpl = "Bearer {}",
};

static const struct al_secret_use s_basic = {
    .name = "basic-pass",
    .placeholder = PH_BASIC,
    .value = MARK "-basic",
    .value_len = sizeof(MARK "-basic") - 1,
    .how = AL_SECRET_BASIC,
    .user = "me",
};

static const struct al_secret_use s_query = {
    .name = "query-key",
    .placeholder = PH_QUERY,
    .value = MARK " q&=",
    .value_len = sizeof(MARK " q&=") - 1,
    .how = AL_SECRET_QUERY,
    .param = "api_key",
};

static const struct al_secret_use s_body = {
    .name = "body-key",
    .placeholder = PH_BODY,
    .value = MARK "+body\"\\",
    .value_len = sizeof(MARK "+body\"\\") - 1,
    .how = AL_SECRET_HEADER,
    .header = "X-Api-Key",
    .tmpl = "{}",
    .body = true,
};

static const struct al_secret_use s_aws = {
    .name = "aws",
    .placeholder = PH_AWS,
    .value = MARK "-aws-secret-key",
    .value_len = sizeof(MARK "-aws-secret-key") - 1,
    .how = AL_SECRET_SIGV4,
    .fake_key_id = FAKE_KEY,
    .key_id = "AKIAREALKEY",
    .token_placeholder = PH_TOKEN,
    .token = MARK "-real-token",
    .token_len = sizeof(MARK "-real-token") - 1,
};

static struct al_needles *needle_set; /* needles[], compiled (setup) */

static struct al_reqstream_conf base(void)
{
	return (struct al_reqstream_conf){
	    .host = "api.example.com",
	    .port = 80,
	    .needles = needle_set,
	    .body_max = 4096,
	};
}

/* What one run saw. */
struct result {
	char *out;
	size_t out_len;
	char log[8192];	   /* one line per event other than DATA */
	char texts[16384]; /* every text the filter produced */
	size_t n_requests;
	bool final, cut;
	enum al_reqstream_kind kind;
	int status, needle;
	char reason[256], rule[320], where[96];
	int refuse_at; /* refuse the request with this index (402), or -1 */
};

static void logf_(struct result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(struct result *r, const char *fmt, ...)
{
	size_t n = strlen(r->log);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->log + n, sizeof(r->log) - n, fmt, ap);
	va_end(ap);
}

static void text(struct result *r, const char *s, size_t len)
{
	size_t n = strlen(r->texts);

	if (!s)
		return;
	snprintf(r->texts + n, sizeof(r->texts) - n, "%.*s\n", (int)len, s);
}

static void on_request(struct al_reqstream *rs, struct result *r,
		       const struct al_reqstream_event *ev)
{
	const struct al_reqstream_request *q = &ev->req;

	assert_int_equal(q->index, r->n_requests);
	r->n_requests++;
	logf_(r, "REQUEST %llu %.*s %.*s host=%s:%u body=%lld inj=", (unsigned long long)q->index,
	      (int)q->method_len, q->method, (int)q->path_len, q->path, q->host, q->port,
	      (long long)q->body_len);
	for (size_t i = 0; i < q->n_injected; i++)
		logf_(r, "%s%s", i ? "," : "", q->injected[i]);
	logf_(r, "\n");
	text(r, q->path, q->path_len);
	text(r, q->method, q->method_len);
	if ((int)q->index == r->refuse_at)
		al_reqstream_refuse(rs, 402, "the spend budget is spent");
}

static void on_final(struct result *r, const struct al_reqstream_event *ev)
{
	r->final = true;
	r->kind = ev->kind;
	r->status = ev->status;
	r->needle = ev->needle;
	r->cut = ev->cut;
	snprintf(r->reason, sizeof(r->reason), "%s", ev->reason ? ev->reason : "");
	snprintf(r->rule, sizeof(r->rule), "%s", ev->rule ? ev->rule : "");
	snprintf(r->where, sizeof(r->where), "%s", ev->where ? ev->where : "");
	text(r, r->reason, strlen(r->reason));
	text(r, r->rule, strlen(r->rule));
	text(r, r->where, strlen(r->where));
	if (ev->kind == AL_REQSTREAM_END)
		logf_(r, "END incomplete=%d cut=%d\n", ev->incomplete, ev->cut);
	else
		logf_(r, "%s %d cut=%d needle=%d where=%s rule=%s reason=%s\n",
		      ev->kind == AL_REQSTREAM_MISUSE ? "MISUSE" : "REFUSED", ev->status, ev->cut,
		      ev->needle, r->where, r->rule, r->reason);
}

static void pull(struct al_reqstream *rs, size_t room, struct result *r)
{
	struct al_reqstream_event ev;

	for (;;) {
		enum al_reqstream_kind k = al_reqstream_next(rs, room, &ev);

		assert_int_equal(k, ev.kind);
		if (r->final) {
			/* A final event is the answer from then on. */
			assert_int_equal(k, r->kind);
			return;
		}
		switch (k) {
		case AL_REQSTREAM_MORE:
			return;
		case AL_REQSTREAM_DATA:
			assert_true(ev.len > 0 && ev.len <= room);
			assert_true(r->out_len + ev.len <= (4u << 20));
			memcpy(r->out + r->out_len, ev.data, ev.len);
			r->out_len += ev.len;
			break;
		case AL_REQSTREAM_REQUEST:
			on_request(rs, r, &ev);
			break;
		default:
			on_final(r, &ev);
			break;
		}
	}
}

static void run_one(const struct al_reqstream_conf *conf, const char *in, size_t len, size_t step,
		    size_t room, bool eof, struct result *r)
{
	struct al_reqstream *rs = NULL;
	struct al_error err = {0};
	size_t off = 0;
	int stuck = 0;

	if (al_reqstream_new(conf, &rs, &err) != 0)
		fail_msg("al_reqstream_new: %s", err.msg);
	r->out = xmalloc(4u << 20);
	while (off < len) {
		size_t n = len - off < step ? len - off : step;
		size_t took = al_reqstream_feed(rs, in + off, n);

		off += took;
		stuck = took ? 0 : stuck + 1;
		if (stuck > 2)
			fail_msg("the filter takes no input and gives no event");
		pull(rs, room, r);
	}
	if (eof) {
		al_reqstream_eof(rs);
		pull(rs, room, r);
	}
	/* Fed after the end: taken and dropped. */
	if (r->final) {
		assert_int_equal(al_reqstream_feed(rs, "GET / HTTP/1.1\r\n\r\n", 18), 18);
		pull(rs, room, r);
	}
	al_reqstream_free(rs);
}

static bool scoped(const struct al_reqstream_conf *conf, const char *needle)
{
	for (size_t i = 0; i < conf->n_inject; i++) {
		const struct al_secret_use *s = &conf->inject[i];

		if ((s->placeholder && !strcmp(s->placeholder, needle)) ||
		    (s->fake_key_id && !strcmp(s->fake_key_id, needle)) ||
		    (s->token_placeholder && !strcmp(s->token_placeholder, needle)))
			return true;
	}
	return false;
}

static void check_invariants(const struct al_reqstream_conf *conf, const struct result *r)
{
	assert_not_contains(r->texts, MARK);
	for (size_t i = 0; i < N_NEEDLES; i++) {
		assert_not_contains(r->texts, needles[i]);
		if (!scoped(conf, needles[i]) &&
		    memmem(r->out, r->out_len, needles[i], strlen(needles[i])))
			fail_msg("needle %zu went upstream", i);
	}
}

static void result_free(struct result *r)
{
	free(r->out);
}

/* Run in the three ways; the first (one feed) is returned in r. */
static void run_eof(const struct al_reqstream_conf *conf, const char *in, size_t len, bool eof,
		    int refuse_at, struct result *r)
{
	static const size_t steps[][2] = {{1, 5}, {7, 3}};
	struct result other;

	memset(r, 0, sizeof(*r));
	r->refuse_at = refuse_at;
	run_one(conf, in, len, len ? len : 1, 1u << 20, eof, r);
	check_invariants(conf, r);
	for (size_t i = 0; i < AL_ARRAY_SIZE(steps); i++) {
		memset(&other, 0, sizeof(other));
		other.refuse_at = refuse_at;
		run_one(conf, in, len, steps[i][0], steps[i][1], eof, &other);
		check_invariants(conf, &other);
		if (strcmp(r->log, other.log) != 0)
			fail_msg("feeds of %zu bytes gave\n%s\none feed gave\n%s", steps[i][0],
				 other.log, r->log);
		if (r->cut ? other.out_len < r->out_len || memcmp(r->out, other.out, r->out_len)
			   : other.out_len != r->out_len || memcmp(r->out, other.out, r->out_len))
			fail_msg("feeds of %zu bytes sent\n%.*s\none feed sent\n%.*s", steps[i][0],
				 (int)other.out_len, other.out, (int)r->out_len, r->out);
		result_free(&other);
	}
}

static void run(const struct al_reqstream_conf *conf, const char *in, struct result *r)
{
	run_eof(conf, in, strlen(in), true, -1, r);
}

static void expect_out(const struct result *r, const char *want)
{
	if (r->out_len != strlen(want) || memcmp(r->out, want, r->out_len) != 0)
		fail_msg("sent\n%.*s\nexpected\n%s", (int)r->out_len, r->out, want);
}

static void expect_log(const struct result *r, const char *want)
{
	if (strcmp(r->log, want) != 0)
		fail_msg("events\n%s\nexpected\n%s", r->log, want);
}

#define HOST "Host: api.example.com\r\n"

static void test_plain(void **state)
{
	struct al_reqstream_conf conf = base();
	struct result r;

	run(&conf,
	    "GET /x/%61b?y=1 HTTP/1.1\r\n" HOST "Accept: */*\r\n"
	    "Proxy-Authorization: Basic abc\r\nConnection: keep-alive\r\nKeep-Alive: 5\r\n\r\n",
	    &r);
	/* The path as matched goes out; Proxy-* and hop-by-hop fields do not. */
	expect_out(&r, "GET /x/ab?y=1 HTTP/1.1\r\n" HOST "Accept: */*\r\n\r\n");
	expect_log(&r, "REQUEST 0 GET /x/ab host=api.example.com:80 body=0 inj=\n"
		       "END incomplete=0 cut=0\n");
	result_free(&r);

	/* HTTP/1.0 without Host: the connection's host, and a close. */
	run(&conf, "GET / HTTP/1.0\r\n\r\n", &r);
	expect_out(&r, "GET / HTTP/1.1\r\n" HOST "Connection: close\r\n\r\n");
	result_free(&r);
	run(&conf, "GET / HTTP/1.1\r\nHost: API.Example.COM.\r\nConnection: close\r\n\r\n", &r);
	expect_out(&r, "GET / HTTP/1.1\r\nHost: API.Example.COM.\r\nConnection: close\r\n\r\n");
	result_free(&r);

	/* Without the end of the stream, no END. */
	run_eof(&conf, "GET / HTTP/1.1\r\n" HOST "\r\n", strlen("GET / HTTP/1.1\r\n" HOST "\r\n"),
		false, -1, &r);
	expect_log(&r, "REQUEST 0 GET / host=api.example.com:80 body=0 inj=\n");
	assert_false(r.final);
	result_free(&r);
}

static void test_keepalive_refused(void **state)
{
	char *methods[] = {"GET"}, *paths[] = {"/x/*"};
	struct al_reqrule rule = {methods, 1, paths,
				  1,	   0, "api.example.com:80 methods=GET paths=/x/*"};
	struct al_reqstream_conf conf = base();
	struct result r;

	conf.rules = &rule;
	run(&conf,
	    "GET /x/1 HTTP/1.1\r\n" HOST "\r\n"
	    "POST /x/2 HTTP/1.1\r\n" HOST "Content-Length: 3\r\n\r\nabc",
	    &r);
	expect_out(&r, "GET /x/1 HTTP/1.1\r\n" HOST "\r\n");
	expect_log(&r, "REQUEST 0 GET /x/1 host=api.example.com:80 body=0 inj=\n"
		       "REFUSED 403 cut=0 needle=-1 where= rule=api.example.com:80 methods=GET "
		       "paths=/x/* reason=method not allowed\n");
	result_free(&r);

	run(&conf, "GET /x/1 HTTP/1.1\r\n" HOST "\r\nGET /y/1 HTTP/1.1\r\n" HOST "\r\n", &r);
	assert_int_equal(r.n_requests, 1);
	assert_int_equal(r.status, 403);
	assert_string_equal(r.reason, "path not allowed");
	result_free(&r);

	/* The path is matched normalised: an encoded letter is the letter,
	 * a way around it is refused. */
	run(&conf, "GET /%78/1 HTTP/1.1\r\n" HOST "\r\n", &r);
	assert_int_equal(r.n_requests, 1);
	result_free(&r);
	run(&conf, "GET /x/../admin HTTP/1.1\r\n" HOST "\r\n", &r);
	assert_int_equal(r.status, 400);
	assert_contains(r.reason, "dot segment");
	assert_int_equal(r.out_len, 0);
	result_free(&r);
}

static void test_pipelined(void **state)
{
	static const char in[] = "GET /a HTTP/1.1\r\n" HOST "\r\n"
				 "POST /b HTTP/1.1\r\n" HOST "Content-Length: 5\r\n\r\nhello"
				 "GET /c HTTP/1.1\r\n" HOST "\r\n";
	struct al_reqstream_conf conf = base();
	struct result r;

	run(&conf, in, &r);
	expect_out(&r, in);
	expect_log(&r, "REQUEST 0 GET /a host=api.example.com:80 body=0 inj=\n"
		       "REQUEST 1 POST /b host=api.example.com:80 body=5 inj=\n"
		       "REQUEST 2 GET /c host=api.example.com:80 body=0 inj=\n"
		       "END incomplete=0 cut=0\n");
	result_free(&r);
	/* After a request that closes, nothing more goes. */
	run(&conf,
	    "GET /a HTTP/1.1\r\n" HOST "Connection: keep-alive, close\r\n\r\n"
	    "GET /b HTTP/1.1\r\n" HOST "\r\n",
	    &r);
	expect_out(&r, "GET /a HTTP/1.1\r\n" HOST "Connection: close\r\n\r\n");
	expect_log(&r, "REQUEST 0 GET /a host=api.example.com:80 body=0 inj=\n"
		       "END incomplete=0 cut=0\n");
	result_free(&r);
}

static void test_chunked(void **state)
{
	static const char body[] = "5;name=\"q \\\"x\";y\r\nhello\r\n6 ; z = t\r\n world\r\n"
				   "0\r\nX-Sum: 42\r\n\r\n";
	static const char in[] = "POST /up HTTP/1.1\r\n" HOST "Transfer-Encoding: chunked\r\n"
				 "Trailer: X-Sum\r\n\r\n";
	static const char next[] = "GET /next HTTP/1.1\r\n" HOST "\r\n";
	struct al_reqstream_conf conf = base();
	char buf[512];
	struct result r;

	snprintf(buf, sizeof(buf), "%s%s%s", in, body, next);
	run(&conf, buf, &r);
	snprintf(buf, sizeof(buf),
		 "POST /up HTTP/1.1\r\n" HOST "Transfer-Encoding: chunked\r\n\r\n%s%s", body, next);
	expect_out(&r, buf);
	expect_log(&r, "REQUEST 0 POST /up host=api.example.com:80 body=-1 inj=\n"
		       "REQUEST 1 GET /next host=api.example.com:80 body=0 inj=\n"
		       "END incomplete=0 cut=0\n");
	result_free(&r);

	static const struct {
		const char *body, *reason;
	} bad[] = {
	    {"zz\r\n", "malformed chunk size"},
	    {"5\r\nhelloXX", "chunk data not followed by CRLF"},
	    {"5\nhello\r\n", "not ended by CRLF"},
	    {"5\r\r\nhello\r\n", "not ended by CRLF"},
	    {"5;\r\nhello\r\n", "malformed chunk extension"},
	    {"5 \r\nhello\r\n", "malformed chunk extension"},
	    {"5;a=\"x\r\nhello\r\n", "malformed chunk extension"},
	    {"5;a=b c\r\nhello\r\n", "malformed chunk extension"},
	    {"-5\r\n", "malformed chunk size"},
	    {"fffffffffffffffff\r\n", "chunk size too large"},
	    {"0\r\nContent-Length: 5\r\n\r\n", "framing, routing or credentials"},
	    {"0\r\nAuthorization: x\r\n\r\n", "framing, routing or credentials"},
	    {"0\r\nProxy-X: x\r\n\r\n", "framing, routing or credentials"},
	    {"0\r\nX: a\x01\r\n\r\n", "control character in a trailer"},
	    {"0\r\nX : a\r\n\r\n", "malformed trailer field"},
	    {"0\r\nX-Sum\r\n\r\n", "malformed trailer field"},
	};
	for (size_t i = 0; i < AL_ARRAY_SIZE(bad); i++) {
		snprintf(buf, sizeof(buf), "%s%s", in, bad[i].body);
		run(&conf, buf, &r);
		if (r.status != 400 || !strstr(r.reason, bad[i].reason))
			fail_msg("body \"%s\": %d %s", bad[i].body, r.status, r.reason);
		assert_true(r.cut);
		result_free(&r);
	}
}

static void test_inject_header(void **state)
{
	struct al_reqstream_conf conf = base();
	struct result r;

	conf.inject = &s_header;
	conf.n_inject = 1;
	run(&conf,
	    "GET /a HTTP/1.1\r\n" HOST "Authorization: Bearer " PH_HDR "\r\n"
	    "authorization: other\r\nAccept: x\r\n\r\n"
	    "GET /b HTTP/1.1\r\n" HOST "\r\n",
	    &r);
	expect_out(&r, "GET /a HTTP/1.1\r\n" HOST "Accept: x\r\nAuthorization: Bearer " MARK
		       "-hdr\r\n\r\n"
		       "GET /b HTTP/1.1\r\n" HOST "Authorization: Bearer " MARK "-hdr\r\n\r\n");
	expect_log(&r, "REQUEST 0 GET /a host=api.example.com:80 body=0 inj=api-token\n"
		       "REQUEST 1 GET /b host=api.example.com:80 body=0 inj=api-token\n"
		       "END incomplete=0 cut=0\n");
	result_free(&r);
}

static void test_inject_basic(void **state)
{
	struct al_reqstream_conf conf = base();
	struct result r;

	conf.inject = &s_basic;
	conf.n_inject = 1;
	run(&conf, "GET /a HTTP/1.1\r\n" HOST "Authorization: Basic bWU6eA==\r\n\r\n", &r);
	/* base64("me:SECRETVALUE-basic") */
	expect_out(&r, "GET /a HTTP/1.1\r\n" HOST
		       "Authorization: Basic bWU6U0VDUkVUVkFMVUUtYmFzaWM=\r\n\r\n");
	expect_log(&r, "REQUEST 0 GET /a host=api.example.com:80 body=0 inj=basic-pass\n"
		       "END incomplete=0 cut=0\n");
	result_free(&r);
}

#define QV "api_key=" MARK "%20q%26%3D"

static void test_inject_query(void **state)
{
	static const struct {
		const char *target, *want;
	} cases[] = {
	    {"/s?x=1&api_key=" PH_QUERY "&api%5Fkey=dup&z", "/s?x=1&" QV "&z"},
	    {"/s?api+key=1&api_key", "/s?api+key=1&" QV},
	    {"/s", "/s?" QV},
	    {"/s?", "/s?" QV},
	    {"/s?a=1", "/s?a=1&" QV},
	    {"/s?a=1&&b", "/s?a=1&&b&" QV},
	    {"/s?api_key=1&api_key=2", "/s?" QV},
	};
	struct al_reqstream_conf conf = base();
	char in[512], want[512];
	struct result r;

	conf.inject = &s_query;
	conf.n_inject = 1;
	for (size_t i = 0; i < AL_ARRAY_SIZE(cases); i++) {
		snprintf(in, sizeof(in), "GET %s HTTP/1.1\r\n" HOST "\r\n", cases[i].target);
		snprintf(want, sizeof(want), "GET %s HTTP/1.1\r\n" HOST "\r\n", cases[i].want);
		run(&conf, in, &r);
		expect_out(&r, want);
		assert_contains(r.log, "inj=query-key\n");
		result_free(&r);
	}
}

/* POST path with a body and Content-Type: what goes upstream. */
static void expect_body(const struct al_reqstream_conf *conf, const char *type, const char *body,
			const char *want_body)
{
	char in[1024], want[1024];
	struct result r;

	snprintf(in, sizeof(in),
		 "POST /f HTTP/1.1\r\n" HOST "Content-Type: %s\r\nContent-Length: %zu\r\n\r\n%s",
		 type, strlen(body), body);
	snprintf(want, sizeof(want),
		 "POST /f HTTP/1.1\r\n" HOST "Content-Type: %s\r\nX-Api-Key: " MARK
		 "+body\"\\\r\nContent-Length: %zu\r\n\r\n%s",
		 type, strlen(want_body), want_body);
	run(conf, in, &r);
	expect_out(&r, want);
	snprintf(in, sizeof(in),
		 "REQUEST 0 POST /f host=api.example.com:80 body=%zu inj=body-key\n",
		 strlen(want_body));
	assert_contains(r.log, in);
	result_free(&r);
}

static void test_inject_body(void **state)
{
	struct al_reqstream_conf conf = base();
	char in[1024], want[1024];
	struct result r;

	conf.inject = &s_body;
	conf.n_inject = 1;
	expect_body(&conf, "application/x-www-form-urlencoded", "a=" PH_BODY "&b=2",
		    "a=" MARK "%2Bbody%22%5C&b=2");
	expect_body(&conf, "application/json; charset=utf-8",
		    "{\"k\":\"" PH_BODY "\",\"k2\":\"" PH_BODY "\"}",
		    "{\"k\":\"" MARK "+body\\\"\\\\\",\"k2\":\"" MARK "+body\\\"\\\\\"}");
	expect_body(&conf, "application/vnd.api+json", "\"" PH_BODY "\"",
		    "\"" MARK "+body\\\"\\\\\"");
	expect_body(&conf, "text/plain", "x " PH_BODY " y", "x " MARK "+body\"\\ y");
	expect_body(&conf, "text/plain", "no placeholder", "no placeholder");
	expect_body(&conf, "text/plain", PH_BODY, MARK "+body\"\\");

	/* Chunked, the placeholder split across chunks: collected, sent with
	 * a Content-Length; Expect is dropped (the head waits for the body). */
	snprintf(in, sizeof(in),
		 "POST /c HTTP/1.1\r\n" HOST
		 "Transfer-Encoding: chunked\r\nExpect: 100-continue\r\n"
		 "\r\nc\r\nab%.10s\r\n%zx\r\n%scd\r\n0\r\n\r\n",
		 PH_BODY, strlen(PH_BODY) - 10 + 2, &PH_BODY[10]);
	run(&conf, in, &r);
	snprintf(want, sizeof(want),
		 "POST /c HTTP/1.1\r\n" HOST "X-Api-Key: " MARK "+body\"\\\r\n"
		 "Content-Length: %zu\r\n\r\nab" MARK "+body\"\\cd",
		 strlen(MARK "+body\"\\") + 4);
	expect_out(&r, want);
	result_free(&r);

	/* Trailers cannot follow a body sent with a Content-Length. */
	run(&conf,
	    "POST /c HTTP/1.1\r\n" HOST "Transfer-Encoding: chunked\r\n\r\n"
	    "1\r\na\r\n0\r\nX-T: 1\r\n\r\n",
	    &r);
	assert_int_equal(r.status, 400);
	assert_contains(r.reason, "trailer fields");
	assert_false(r.cut);
	assert_int_equal(r.out_len, 0);
	result_free(&r);

	/* Past body_max: 413 before anything of it went out. */
	conf.body_max = 64;
	run(&conf, "POST /c HTTP/1.1\r\n" HOST "Content-Length: 65\r\n\r\n", &r);
	assert_int_equal(r.status, 413);
	assert_false(r.cut);
	assert_int_equal(r.out_len, 0);
	result_free(&r);
	snprintf(in, sizeof(in),
		 "POST /c HTTP/1.1\r\n" HOST "Transfer-Encoding: chunked\r\n\r\n"
		 "20\r\n%032d\r\n21\r\n%033d\r\n0\r\n\r\n",
		 0, 0);
	run(&conf, in, &r);
	assert_int_equal(r.status, 413);
	assert_contains(r.reason, "at most 64 bytes");
	assert_false(r.cut);
	assert_int_equal(r.out_len, 0);
	result_free(&r);
}

static void test_scoped_placeholder_passes(void **state)
{
	static const char body[] = "token=" PH_HDR;
	struct al_reqstream_conf conf = base();
	char in[512], want[512];
	struct result r;

	conf.inject = &s_header;
	conf.n_inject = 1;
	snprintf(in, sizeof(in),
		 "POST /p?also=" PH_HDR " HTTP/1.1\r\n" HOST "X-Copy: " PH_HDR
		 "\r\nContent-Length: %zu\r\n\r\n%s",
		 strlen(body), body);
	snprintf(want, sizeof(want),
		 "POST /p?also=" PH_HDR " HTTP/1.1\r\n" HOST "X-Copy: " PH_HDR
		 "\r\nContent-Length: %zu\r\nAuthorization: Bearer " MARK "-hdr\r\n\r\n%s",
		 strlen(body), body);
	run(&conf, in, &r);
	expect_out(&r, want);
	/* The value went only where it is presented. */
	assert_ptr_equal(memmem(r.out, r.out_len, MARK, strlen(MARK)),
			 strstr(r.out, "Bearer ") + 7);
	result_free(&r);

	/* In the path it goes too, but the event shows it as "{secret}". */
	run(&conf, "GET /p/" PH_HDR "/x HTTP/1.1\r\n" HOST "\r\n", &r);
	expect_log(&r, "REQUEST 0 GET /p/{secret}/x host=api.example.com:80 body=0 inj=api-token\n"
		       "END incomplete=0 cut=0\n");
	assert_contains(r.out, "GET /p/" PH_HDR "/x HTTP/1.1\r\n");
	result_free(&r);
}

static void test_host(void **state)
{
	struct al_reqstream_conf conf = base();
	struct result r;

	run(&conf, "GET / HTTP/1.1\r\nHost: evil.example.com\r\n\r\n", &r);
	assert_int_equal(r.status, 421);
	assert_int_equal(r.out_len, 0);
	result_free(&r);
	run(&conf,
	    "GET / HTTP/1.1\r\n" HOST "\r\nGET / HTTP/1.1\r\nHost: api.example.com:8080\r\n\r\n",
	    &r);
	assert_int_equal(r.n_requests, 1);
	assert_int_equal(r.status, 421);
	result_free(&r);
	run(&conf, "GET http://api.example.com/ HTTP/1.1\r\n" HOST "\r\n", &r);
	assert_int_equal(r.status, 400);
	assert_contains(r.reason, "origin-form");
	result_free(&r);

	/* The proxy: absolute-form in, origin-form out, one host and port. */
	conf.proxy_form = true;
	run(&conf,
	    "GET http://api.example.com/a?b HTTP/1.1\r\n" HOST
	    "Proxy-Connection: keep-alive\r\n\r\n"
	    "GET http://other.example.com/b HTTP/1.1\r\nHost: other.example.com\r\n\r\n",
	    &r);
	expect_out(&r, "GET /a?b HTTP/1.1\r\n" HOST "\r\n");
	assert_int_equal(r.n_requests, 1);
	assert_int_equal(r.status, 421);
	result_free(&r);
	/* HTTP/1.0 without Host: the target's host; and it is the last. */
	run(&conf,
	    "GET http://API.example.com HTTP/1.0\r\n\r\n"
	    "GET http://other.example.com/b HTTP/1.1\r\nHost: other.example.com\r\n\r\n",
	    &r);
	expect_out(&r, "GET / HTTP/1.1\r\n" HOST "Connection: close\r\n\r\n");
	expect_log(&r, "REQUEST 0 GET / host=api.example.com:80 body=0 inj=\n"
		       "END incomplete=0 cut=0\n");
	result_free(&r);
	run(&conf,
	    "GET http://api.example.com:8080/ HTTP/1.1\r\nHost: api.example.com:8080\r\n\r\n", &r);
	assert_int_equal(r.status, 421);
	result_free(&r);
	run(&conf, "GET / HTTP/1.1\r\n" HOST "\r\n", &r);
	assert_int_equal(r.status, 400);
	assert_contains(r.reason, "absolute-form");
	result_free(&r);
}

static void test_body_limits(void **state)
{
	char *none[] = {NULL};
	struct al_reqrule rule = {none, 0, none, 0, 10, "api.example.com:80 max_body=10"};
	struct al_reqstream_conf conf = base();
	struct result r;

	conf.rules = &rule;
	run(&conf, "POST /x HTTP/1.1\r\n" HOST "Content-Length: 10\r\n\r\n0123456789", &r);
	assert_int_equal(r.n_requests, 1);
	assert_int_equal(r.kind, AL_REQSTREAM_END);
	result_free(&r);
	run(&conf, "POST /x HTTP/1.1\r\n" HOST "Content-Length: 11\r\n\r\nhello world", &r);
	expect_log(&r, "REFUSED 413 cut=0 needle=-1 where= rule=api.example.com:80 max_body=10 "
		       "reason=body larger than max_body\n");
	assert_int_equal(r.out_len, 0);
	result_free(&r);
	/* Chunked: known only as it comes, so the request is cut. */
	run(&conf,
	    "POST /x HTTP/1.1\r\n" HOST "Transfer-Encoding: chunked\r\n\r\n"
	    "6\r\nhello \r\n6\r\nworld!\r\n0\r\n\r\n",
	    &r);
	assert_int_equal(r.n_requests, 1);
	assert_int_equal(r.status, 413);
	assert_true(r.cut);
	assert_string_equal(r.rule, "api.example.com:80 max_body=10");
	assert_true(r.out_len >=
		    strlen("POST /x HTTP/1.1\r\n" HOST "Transfer-Encoding: chunked\r\n\r\n"));
	assert_null(memmem(r.out, r.out_len, "world!", 6));
	result_free(&r);
}

static void expect_misuse(const struct al_reqstream_conf *conf, const char *in, int needle,
			  const char *where, bool cut)
{
	struct result r;

	run(conf, in, &r);
	if (r.kind != AL_REQSTREAM_MISUSE || r.needle != needle || strcmp(r.where, where) != 0 ||
	    r.cut != cut)
		fail_msg("for\n%s\nexpected misuse of needle %d in %s (cut %d), got\n%s", in,
			 needle, where, cut, r.log);
	assert_int_equal(r.status, 403);
	if (!cut)
		assert_int_equal(r.out_len, 0);
	result_free(&r);
}

static void test_misuse(void **state)
{
	struct al_reqstream_conf conf = base();
	char in[1024];

	conf.inject = &s_header;
	conf.n_inject = 1;
	expect_misuse(&conf, "GET /x?k=" PH_FOREIGN " HTTP/1.1\r\n" HOST "\r\n", I_FOREIGN,
		      "request line", false);
	expect_misuse(&conf,
		      "GET /x/%61irlock-ph-foreign-0123456789abcdef012345 HTTP/1.1\r\n" HOST "\r\n",
		      I_FOREIGN, "request line", false);
	expect_misuse(&conf, "GET / HTTP/1.1\r\n" HOST "X-Foo: a" PH_FOREIGN "b\r\n\r\n", I_FOREIGN,
		      "header X-Foo", false);
	expect_misuse(&conf, "GET / HTTP/1.1\r\n" HOST PH_FOREIGN ": 1\r\n\r\n", I_FOREIGN,
		      "header name", false);
	/* A header whose name holds a needle is not named. */
	expect_misuse(&conf, "GET / HTTP/1.1\r\n" HOST "X-" PH_HDR ": " PH_FOREIGN "\r\n\r\n",
		      I_FOREIGN, "header", false);
	expect_misuse(&conf,
		      "GET / HTTP/1.1\r\n" HOST
		      "Authorization: AWS4-HMAC-SHA256 Credential=" FAKE_FOREIGN "/x\r\n\r\n",
		      I_FAKEFOREIGN, "header Authorization", false);
	/* Another secret's fake key id in a presigned URL. */
	expect_misuse(&conf,
		      "GET /b?X-Amz-Credential=" FAKE_FOREIGN "%2Fx HTTP/1.1\r\n" HOST "\r\n",
		      I_FAKEFOREIGN, "request line", false);
	/* A secret of another kind is still another host's. */
	expect_misuse(&conf, "GET / HTTP/1.1\r\n" HOST "X-K: " PH_BASIC "\r\n\r\n", 1, "header X-K",
		      false);
	snprintf(in, sizeof(in),
		 "POST / HTTP/1.1\r\n" HOST "Content-Length: %zu\r\n\r\nv=" PH_FOREIGN "&x=1",
		 strlen("v=" PH_FOREIGN "&x=1"));
	expect_misuse(&conf, in, I_FOREIGN, "body", true);
	/* Split across chunks: the upstream would join it. */
	snprintf(in, sizeof(in),
		 "POST / HTTP/1.1\r\n" HOST "Transfer-Encoding: chunked\r\n\r\n"
		 "5\r\n%.5s\r\n%zx\r\n%s\r\n0\r\n\r\n",
		 PH_FOREIGN, strlen(PH_FOREIGN) - 5, &PH_FOREIGN[5]);
	expect_misuse(&conf, in, I_FOREIGN, "body", true);
	expect_misuse(&conf,
		      "POST / HTTP/1.1\r\n" HOST "Transfer-Encoding: chunked\r\n\r\n"
		      "1;e=" PH_FOREIGN "\r\nx\r\n0\r\n\r\n",
		      I_FOREIGN, "body", true);
	expect_misuse(&conf,
		      "POST / HTTP/1.1\r\n" HOST "Transfer-Encoding: chunked\r\n\r\n"
		      "1\r\nx\r\n0\r\nX-T: " PH_FOREIGN "\r\n\r\n",
		      I_FOREIGN, "trailer X-T", true);
	/* In the second request of a connection, after the first went. */
	{
		struct result r;

		run(&conf,
		    "GET / HTTP/1.1\r\n" HOST "\r\nGET /?" PH_FOREIGN " HTTP/1.1\r\n" HOST "\r\n",
		    &r);
		assert_int_equal(r.n_requests, 1);
		assert_int_equal(r.kind, AL_REQSTREAM_MISUSE);
		assert_false(r.cut);
		result_free(&r);
	}
	/* A needle split between one request's body and the next request's
	 * line is in the bytes sent: refused before the second head goes. */
	{
		struct result r;

		run(&conf,
		    "POST / HTTP/1.1\r\n" HOST "Content-Length: 12\r\n\r\nxxairlock-ph"
		    "-foreign-0123456789abcdef012345 / HTTP/1.1\r\n" HOST "\r\n",
		    &r);
		assert_int_equal(r.n_requests, 1);
		assert_int_equal(r.kind, AL_REQSTREAM_MISUSE);
		assert_int_equal(r.needle, I_FOREIGN);
		assert_string_equal(r.where, "request line");
		assert_false(r.cut);
		assert_true(r.out_len > 0 && r.out[r.out_len - 1] == 'h');
		result_free(&r);
	}
	/* Buffered bodies are refused before anything of them goes. */
	conf.inject = &s_body;
	snprintf(in, sizeof(in),
		 "POST / HTTP/1.1\r\n" HOST "Content-Length: %zu\r\n\r\nv=" PH_FOREIGN "&x=1",
		 strlen("v=" PH_FOREIGN "&x=1"));
	expect_misuse(&conf, in, I_FOREIGN, "body", false);
}

static void expect_refusal(const struct al_reqstream_conf *conf, const char *in, int status,
			   const char *reason)
{
	struct result r;

	run(conf, in, &r);
	if (r.kind != AL_REQSTREAM_REFUSED || r.status != status || !strstr(r.reason, reason))
		fail_msg("for\n%s\nexpected %d (%s), got\n%s", in, status, reason, r.log);
	assert_int_equal(r.out_len, 0);
	assert_false(r.cut);
	result_free(&r);
}

static void test_refusals(void **state)
{
	struct al_reqstream_conf conf = base();

	expect_refusal(&conf, "GARBAGE\r\n\r\n", 400, "malformed request line");
	expect_refusal(&conf, "\x16\x03\x01\x02\x00", 400, "control character");
	expect_refusal(&conf, "GET / HTTP/2.0\r\n" HOST "\r\n", 505, "not supported");
	expect_refusal(&conf, "OPTIONS * HTTP/1.1\r\n" HOST "\r\n", 501, "asterisk");
	expect_refusal(&conf,
		       "CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n",
		       501, "CONNECT");
	expect_refusal(&conf,
		       "GET / HTTP/1.1\r\n" HOST "Connection: Upgrade\r\nUpgrade: h2c\r\n\r\n", 501,
		       "Upgrade");
	expect_refusal(&conf, "GET /a//b HTTP/1.1\r\n" HOST "\r\n", 400, "empty segment");
	expect_refusal(&conf, "GET /%C0%AE%C0%AE/x HTTP/1.1\r\n" HOST "\r\n", 400, "overlong");
	expect_refusal(&conf, "GET /%ED%A0%80 HTTP/1.1\r\n" HOST "\r\n", 400, "surrogate");
	expect_refusal(&conf, "GET /%F4%90%80%80 HTTP/1.1\r\n" HOST "\r\n", 400, "past U+10FFFF");
	expect_refusal(&conf, "GET /%E2%82 HTTP/1.1\r\n" HOST "\r\n", 400, "truncated");
	expect_refusal(&conf, "GET /a%2fb HTTP/1.1\r\n" HOST "\r\n", 400, "encoded '/'");
	expect_refusal(&conf,
		       "POST / HTTP/1.1\r\n" HOST
		       "Content-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
		       400, "both");
}

static void test_caller_refuses(void **state)
{
	static const char in[] = "GET /a HTTP/1.1\r\n" HOST "\r\n"
				 "POST /b HTTP/1.1\r\n" HOST "Content-Length: 5\r\n\r\nhello"
				 "GET /c HTTP/1.1\r\n" HOST "\r\n";
	struct al_reqstream_conf conf = base();
	struct result r;

	run_eof(&conf, in, strlen(in), true, 1, &r);
	expect_out(&r, "GET /a HTTP/1.1\r\n" HOST "\r\n");
	expect_log(&r,
		   "REQUEST 0 GET /a host=api.example.com:80 body=0 inj=\n"
		   "REQUEST 1 POST /b host=api.example.com:80 body=5 inj=\n"
		   "REFUSED 402 cut=0 needle=-1 where= rule= reason=the spend budget is spent\n");
	result_free(&r);
}

static void test_eof(void **state)
{
	struct al_reqstream_conf conf = base();
	struct result r;

	run(&conf, "GET / HTTP/1.1\r\nHost: api.exa", &r);
	expect_log(&r, "END incomplete=1 cut=0\n");
	assert_int_equal(r.out_len, 0);
	result_free(&r);
	run(&conf, "POST / HTTP/1.1\r\n" HOST "Content-Length: 10\r\n\r\nabc", &r);
	expect_log(&r, "REQUEST 0 POST / host=api.example.com:80 body=10 inj=\n"
		       "END incomplete=1 cut=1\n");
	expect_out(&r, "POST / HTTP/1.1\r\n" HOST "Content-Length: 10\r\n\r\nabc");
	result_free(&r);
	run(&conf, "POST / HTTP/1.1\r\n" HOST "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n1",
	    &r);
	assert_contains(r.log, "END incomplete=1 cut=1\n");
	result_free(&r);
	run(&conf, "", &r);
	expect_log(&r, "END incomplete=0 cut=0\n");
	result_free(&r);
}

static void test_bounds(void **state)
{
	static const char head[] = "POST / HTTP/1.1\r\n" HOST "Transfer-Encoding: chunked\r\n\r\n";
	struct al_reqstream_conf conf = base();
	size_t size = 128 * 1024, n;
	char *in = xmalloc(size), *p;
	struct result r;

	/* A chunk-size line of leading zeros: bounded before it ends. */
	n = (size_t)snprintf(in, size, "%s", head);
	memset(in + n, '0', 5000);
	strcpy(in + n + 5000, "1\r\nx\r\n0\r\n\r\n");
	run(&conf, in, &r);
	assert_int_equal(r.status, 400);
	assert_contains(r.reason, "chunk-size line too long");
	result_free(&r);

	/* 10,000 one-byte chunks stream through unchanged. */
	p = in + snprintf(in, size, "%s", head);
	for (int i = 0; i < 10000; i++)
		p += snprintf(p, 8, "1\r\n%c\r\n", 'a' + i % 26);
	strcpy(p, "0\r\n\r\n");
	run(&conf, in, &r);
	expect_out(&r, in);
	assert_int_equal(r.kind, AL_REQSTREAM_END);
	result_free(&r);

	/* 64 header fields pass, 65 do not; nor a head over 16 KiB. */
	p = in + snprintf(in, size, "GET / HTTP/1.1\r\n" HOST);
	for (int i = 0; i < 63; i++)
		p += snprintf(p, 32, "X-%d: %d\r\n", i, i);
	strcpy(p, "\r\n");
	run(&conf, in, &r);
	assert_int_equal(r.n_requests, 1);
	result_free(&r);
	strcpy(p, "X-Last: 1\r\n\r\n");
	run(&conf, in, &r);
	assert_int_equal(r.status, 431);
	result_free(&r);
	p = in + snprintf(in, size, "GET / HTTP/1.1\r\n" HOST "X-Big: ");
	memset(p, 'b', 17000);
	strcpy(p + 17000, "\r\n\r\n");
	run(&conf, in, &r);
	assert_int_equal(r.status, 431);
	result_free(&r);

	/* Trailers: 64 fields and 8 KiB at most. */
	p = in + snprintf(in, size, "%s0\r\n", head);
	for (int i = 0; i < 65; i++)
		p += snprintf(p, 32, "X-%d: %d\r\n", i, i);
	strcpy(p, "\r\n");
	run(&conf, in, &r);
	assert_int_equal(r.status, 400);
	assert_contains(r.reason, "more than 64 trailer fields");
	result_free(&r);
	p = in + snprintf(in, size, "%s0\r\nX-Long: ", head);
	memset(p, 'l', 9000);
	strcpy(p + 9000, "\r\n\r\n");
	run(&conf, in, &r);
	assert_int_equal(r.status, 400);
	assert_contains(r.reason, "trailer section too long");
	result_free(&r);
	free(in);
}

/* The stand-in signer: what it was given, and what it answers. */
static struct {
	int calls;
	int answer; /* 1: a signature; 0: leave; < 0: that error */
	char method[16], target[256], headers[2048], sha[80];
	const struct al_secret_use *secret;
} signer;

#define NEW_AUTH                                                                                   \
	"AWS4-HMAC-SHA256 Credential=AKIAREALKEY/20240101/us-east-1/s3/aws4_request, "             \
	"SignedHeaders=host, Signature=0123"

static int stub_sigv4(void *data, const struct al_secret_use *s, const char *method,
		      size_t method_len, const char *target, size_t target_len,
		      const struct al_http_header_view *headers, size_t n, const char *body_sha256,
		      char *out, size_t size)
{
	size_t len = 0;

	assert_ptr_equal(data, &signer);
	signer.calls++;
	signer.secret = s;
	snprintf(signer.method, sizeof(signer.method), "%.*s", (int)method_len, method);
	snprintf(signer.target, sizeof(signer.target), "%.*s", (int)target_len, target);
	signer.headers[0] = '\0';
	for (size_t i = 0; i < n; i++)
		len += (size_t)snprintf(signer.headers + len, sizeof(signer.headers) - len,
					"%.*s: %.*s\n", (int)headers[i].name_len, headers[i].name,
					(int)headers[i].value_len, headers[i].value);
	snprintf(signer.sha, sizeof(signer.sha), "%s", body_sha256 ? body_sha256 : "(none)");
	if (signer.answer <= 0)
		return signer.answer;
	assert_true(size >= sizeof(NEW_AUTH));
	memcpy(out, NEW_AUTH, sizeof(NEW_AUTH) - 1);
	return (int)sizeof(NEW_AUTH) - 1;
}

#define SIGNED                                                                                     \
	"X-Amz-Date: 20240101T000000Z\r\nX-Amz-Security-Token: " PH_TOKEN "\r\n"                   \
	"Authorization: AWS4-HMAC-SHA256 Credential=" FAKE_KEY                                     \
	"/20240101/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-date, Signature=00\r\n"

static void test_sigv4(void **state)
{
	struct al_reqstream_conf conf = base();
	struct result r;

	conf.inject = &s_aws;
	conf.n_inject = 1;
	conf.sigv4 = stub_sigv4;
	conf.sigv4_data = &signer;
	signer.answer = 1;

	/* No x-amz-content-sha256: the body is hashed (sha256("hello")). */
	run(&conf, "PUT /bucket/key?x=1 HTTP/1.1\r\n" HOST SIGNED "Content-Length: 5\r\n\r\nhello",
	    &r);
	expect_out(&r,
		   "PUT /bucket/key?x=1 HTTP/1.1\r\n" HOST
		   "X-Amz-Date: 20240101T000000Z\r\nX-Amz-Security-Token: " MARK "-real-token\r\n"
		   "Content-Length: 5\r\nAuthorization: " NEW_AUTH "\r\n\r\nhello");
	assert_string_equal(signer.method, "PUT");
	assert_string_equal(signer.target, "/bucket/key?x=1");
	/* The fields as they go, then the sandbox's own Authorization. */
	assert_string_equal(signer.headers,
			    "Host: api.example.com\nX-Amz-Date: 20240101T000000Z\n"
			    "X-Amz-Security-Token: " MARK "-real-token\n"
			    "Content-Length: 5\n"
			    "Authorization: AWS4-HMAC-SHA256 Credential=" FAKE_KEY
			    "/20240101/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-date, "
			    "Signature=00\n");
	assert_string_equal(signer.sha,
			    "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824");
	assert_ptr_equal(signer.secret, &s_aws);
	assert_contains(r.log, "body=5 inj=aws\n");
	result_free(&r);

	/* No body: the hash of nothing. */
	run(&conf, "GET /bucket HTTP/1.1\r\n" HOST SIGNED "\r\n", &r);
	assert_string_equal(signer.sha,
			    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	assert_contains(r.out, "Authorization: " NEW_AUTH "\r\n\r\n");
	result_free(&r);

	/* With x-amz-content-sha256 the body streams and the signer uses it. */
	run(&conf,
	    "PUT /k HTTP/1.1\r\n" HOST SIGNED "x-amz-content-sha256: UNSIGNED-PAYLOAD\r\n"
	    "Content-Length: 5\r\n\r\nhello",
	    &r);
	assert_string_equal(signer.sha, "(none)");
	assert_contains(signer.headers, "x-amz-content-sha256: UNSIGNED-PAYLOAD\n");
	assert_contains(r.out, "Authorization: " NEW_AUTH "\r\n\r\nhello");
	result_free(&r);

	/* Signed chunks cannot be re-signed. */
	signer.calls = 0;
	run(&conf,
	    "PUT /k HTTP/1.1\r\n" HOST SIGNED
	    "x-amz-content-sha256: STREAMING-AWS4-HMAC-SHA256-PAYLOAD\r\n\r\n",
	    &r);
	assert_int_equal(r.status, 501);
	assert_int_equal(signer.calls, 0);
	result_free(&r);

	/* Not signed by the sandbox: not re-signed, but the token is real. */
	run(&conf, "GET /pub HTTP/1.1\r\n" HOST "X-Amz-Security-Token: " PH_TOKEN "\r\n\r\n", &r);
	assert_int_equal(signer.calls, 0);
	expect_out(&r, "GET /pub HTTP/1.1\r\n" HOST "X-Amz-Security-Token: " MARK
		       "-real-token\r\n\r\n");
	assert_contains(r.log, "inj=aws\n");
	result_free(&r);

	/* A presigned URL the sandbox made with the fake key id is not
	 * re-signed: misuse, raw or percent-encoded, in the query or the
	 * path, and nothing of it goes. */
	signer.calls = 0;
	expect_misuse(&conf,
		      "GET /b?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=" FAKE_KEY
		      "%2F20240101%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Signature=00 "
		      "HTTP/1.1\r\n" HOST "\r\n",
		      6, "request line", false);
	expect_misuse(
	    &conf,
	    "GET /b?X-Amz-Credential=%41KIAAIRLOCK%46AKE00001%2F20240101 HTTP/1.1\r\n" HOST "\r\n",
	    6, "request line", false);
	expect_misuse(&conf, "GET /" FAKE_KEY "/b HTTP/1.1\r\n" HOST "\r\n", 6, "request line",
		      false);
	assert_int_equal(signer.calls, 0);
	run(&conf, "GET /b?X-Amz-Credential=" FAKE_KEY " HTTP/1.1\r\n" HOST "\r\n", &r);
	assert_contains(r.reason, "presigned URL");
	result_free(&r);
	/* Near misses are not it. */
	run(&conf, "GET /b?X-Amz-Credential=AKIAAIRLOCKFAKE0000 HTTP/1.1\r\n" HOST "\r\n", &r);
	assert_int_equal(r.kind, AL_REQSTREAM_END);
	result_free(&r);

	/* The signer leaves it, or cannot. */
	signer.answer = 0;
	run(&conf, "GET /b HTTP/1.1\r\n" HOST SIGNED "\r\n", &r);
	assert_contains(r.out, "Authorization: AWS4-HMAC-SHA256 Credential=" FAKE_KEY);
	result_free(&r);
	signer.answer = -EINVAL;
	run(&conf, "GET /b HTTP/1.1\r\n" HOST SIGNED "\r\n", &r);
	assert_int_equal(r.status, 400);
	assert_contains(r.reason, "re-signed");
	assert_int_equal(r.out_len, 0);
	result_free(&r);
	signer.answer = -EIO;
	run(&conf, "GET /b HTTP/1.1\r\n" HOST SIGNED "\r\n", &r);
	assert_int_equal(r.status, 500);
	result_free(&r);
}

/* A body secret and SigV4 on one host: the hash follows the rewritten
 * body, in x-amz-content-sha256 too when the sandbox sent a hash. */
static void test_sigv4_rewritten_body(void **state)
{
	const struct al_secret_use both[] = {s_aws, s_body};
	struct al_reqstream_conf conf = base();
	char in[1024];
	struct result r;

	conf.inject = both;
	conf.n_inject = 2;
	conf.sigv4 = stub_sigv4;
	conf.sigv4_data = &signer;
	signer.answer = 1;
	snprintf(in, sizeof(in),
		 "PUT /k HTTP/1.1\r\n" HOST SIGNED "x-amz-content-sha256: %064d\r\n"
		 "Content-Type: text/plain\r\nContent-Length: %zu\r\n\r\n" PH_BODY,
		 0, strlen(PH_BODY));
	run(&conf, in, &r);
	assert_string_equal(signer.sha, "(none)");
	/* sha256 of the value as sent. */
	assert_contains(signer.headers, "x-amz-content-sha256: ");
	assert_not_contains(signer.headers, "x-amz-content-sha256: 0000");
	assert_contains(r.out, "\r\n\r\n" MARK "+body\"\\");
	assert_contains(r.log, "inj=aws,body-key\n");
	result_free(&r);
}

static void expect_conf_error(const struct al_reqstream_conf *conf, const char *want)
{
	struct al_reqstream *rs = NULL;
	struct al_error err = {0};

	if (al_reqstream_new(conf, &rs, &err) != -EINVAL)
		fail_msg("conf accepted, expected \"%s\"", want);
	assert_null(rs);
	assert_contains(err.msg, want);
	assert_not_contains(err.msg, MARK);
	for (size_t i = 0; i < N_NEEDLES; i++)
		assert_not_contains(err.msg, needles[i]);
}

static void test_conf(void **state)
{
	struct al_secret_use s[RS_TEST_MANY];
	struct al_reqstream_conf conf = base();

	conf.host = "bad host";
	expect_conf_error(&conf, "host");
	conf = base();
	conf.port = 0;
	expect_conf_error(&conf, "port");
	conf = base();
	conf.body_max = 65u << 20;
	expect_conf_error(&conf, "body_max");

	conf = base();
	conf.inject = s;
	conf.n_inject = 1;
	s[0] = s_header;
	s[0].header = "Host";
	expect_conf_error(&conf, "secret api-token: header");
	s[0] = s_header;
	s[0].header = "Proxy-Authorization";
	expect_conf_error(&conf, "gateway sets itself");
	s[0] = s_header;
	s[0].tmpl = "Bearer";
	expect_conf_error(&conf, "\"{}\" exactly once");
	s[0].tmpl = "{} {}";
	expect_conf_error(&conf, "\"{}\" exactly once");
	s[0] = s_header;
	s[0].value = MARK "\r\nX-Evil: 1";
	s[0].value_len = strlen(s[0].value);
	expect_conf_error(&conf, "control characters");
	s[0] = s_header;
	s[0].value_len = 0;
	expect_conf_error(&conf, "no value");
	s[0] = s_header;
	s[0].placeholder = "short";
	expect_conf_error(&conf, "placeholder");
	s[0] = s_header;
	s[0].name = NULL;
	expect_conf_error(&conf, "secret 0");
	s[0] = s_basic;
	s[0].user = "a:b";
	expect_conf_error(&conf, "':'");
	s[0] = s_query;
	s[0].param = NULL;
	expect_conf_error(&conf, "query parameter");
	s[0] = s_aws;
	expect_conf_error(&conf, "signer");
	conf.sigv4 = stub_sigv4;
	s[0].body = true;
	expect_conf_error(&conf, "never goes in a body");
	s[0] = s_aws;
	s[0].fake_key_id = NULL;
	expect_conf_error(&conf, "fake key id");
	s[0] = s_aws;
	s[0].token = NULL;
	expect_conf_error(&conf, "session token");
	s[0] = s_body;
	conf.body_max = 0;
	expect_conf_error(&conf, "body_max");
	conf.body_max = 4096;
	s[0] = s_header;
	s[0].how = 99;
	expect_conf_error(&conf, "unknown presentation");

	conf.n_inject = 2;
	s[0] = s_header;
	s[1] = s_basic;
	expect_conf_error(&conf, "secrets api-token and basic-pass are both presented in "
				 "Authorization");
	s[0] = s_query;
	s[1] = s_query;
	s[1].name = "q2";
	expect_conf_error(&conf, "both the query parameter api_key");

	conf.n_inject = RS_TEST_MANY;
	for (size_t i = 0; i < RS_TEST_MANY; i++)
		s[i] = s_query;
	expect_conf_error(&conf, "more than 16 secrets");
}

static int setup(void **state)
{
	struct al_error err = {0};

	return al_needles_new(needles, N_NEEDLES, &needle_set, &err);
}

static int teardown(void **state)
{
	al_needles_free(needle_set);
	return 0;
}

int main(void)
{
	/* clang-format off */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plain),
		cmocka_unit_test(test_keepalive_refused),
		cmocka_unit_test(test_pipelined),
		cmocka_unit_test(test_chunked),
		cmocka_unit_test(test_inject_header),
		cmocka_unit_test(test_inject_basic),
		cmocka_unit_test(test_inject_query),
		cmocka_unit_test(test_inject_body),
		cmocka_unit_test(test_scoped_placeholder_passes),
		cmocka_unit_test(test_host),
		cmocka_unit_test(test_body_limits),
		cmocka_unit_test(test_misuse),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_caller_refuses),
		cmocka_unit_test(test_eof),
		cmocka_unit_test(test_bounds),
		cmocka_unit_test(test_sigv4),
		cmocka_unit_test(test_sigv4_rewritten_body),
		cmocka_unit_test(test_conf),
	};
	/* clang-format on */
	return cmocka_run_group_tests(tests, setup, teardown);
}
