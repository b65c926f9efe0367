/* gateway/valscan.h and gateway/answer.h: a secret's value found in the
 * forms servers echo it in, and in answers as the client reads them
 * (chunked, gzip, deflate, br), however the bytes are split; what may go
 * on never holds the start of a value; answers that cannot be searched
 * are refused. The encodings here are made independently of valscan.c
 * (zlib, brotli's encoder, OpenSSL's base64, the test's own loops). */
#include "unit.h"

#include <brotli/encode.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include <openssl/evp.h>

#include "core/cleanup.h"
#include "cred/jwt.h"
#include "gateway/answer.h"
#include "gateway/valscan.h"

static const char VALUE[] = "s3cr/t v+l=\"x\"&<y>'z'-9";

static struct al_valscan_set *set_of(const char *v)
{
	struct al_valscan_value val = {v, strlen(v), 7, false};
	struct al_valscan_set *set = NULL;
	struct al_error err = {0};

	assert_int_equal(al_valscan_new(&val, 1, &set, &err), 0);
	return set;
}

/* Percent-encoding: every byte but letters and digits, hex in case. */
static void pct_all(const char *v, bool upper, char *out)
{
	for (; *v; v++)
		out += isalnum((unsigned char)*v)
			   ? sprintf(out, "%c", *v)
			   : sprintf(out, upper ? "%%%02X" : "%%%02x", (unsigned char)*v);
}

static void test_forms_found(void **state)
{
	struct al_valscan_set *set = set_of(VALUE);
	char buf[1024];

	(void)state;
	assert_int_equal(al_valscan_find(set, VALUE, strlen(VALUE)), 7);
	/* As RFC 3986 encoders write it (unreserved kept), both cases. */
	assert_int_equal(
	    al_valscan_find(set, "a=s3cr%2Ft%20v%2Bl%3D%22x%22%26%3Cy%3E%27z%27-9&b", 48), 7);
	assert_int_equal(al_valscan_find(set, "?s3cr%2ft%20v%2bl%3d%22x%22%26%3cy%3e%27z%27-9", 46),
			 7);
	/* A form's '+' for a space; Python's quote keeping '/'. */
	assert_int_equal(al_valscan_find(set, "s3cr%2Ft+v%2Bl%3D%22x%22%26%3Cy%3E%27z%27-9", 43),
			 7);
	assert_int_equal(al_valscan_find(set, "s3cr/t%20v%2Bl%3D%22x%22%26%3Cy%3E%27z%27-9", 43),
			 7);
	/* A JSON string, with "\/" and without. */
	assert_int_equal(al_valscan_find(set, "{\"h\":\"s3cr\\/t v+l=\\\"x\\\"&<y>'z'-9\"}", 35),
			 7);
	assert_int_equal(al_valscan_find(set, "\"s3cr/t v+l=\\\"x\\\"&<y>'z'-9\"", 28), 7);
	/* Go's HTML-safe JSON. */
	const char *go = "s3cr/t v+l=\\\"x\\\"\\u0026\\u003cy\\u003e'z'-9";
	assert_int_equal(al_valscan_find(set, go, strlen(go)), 7);
	/* HTML entities, two spellings of the quotes. */
	const char *h1 = "<p>s3cr/t v+l=&quot;x&quot;&amp;&lt;y&gt;&#x27;z&#x27;-9</p>";
	const char *h2 = "s3cr/t v+l=&#34;x&#34;&amp;&lt;y&gt;&#39;z&#39;-9";
	assert_int_equal(al_valscan_find(set, h1, strlen(h1)), 7);
	assert_int_equal(al_valscan_find(set, h2, strlen(h2)), 7);
	/* Base64 and base64url at each alignment, padding around. */
	for (int url = 0; url < 2; url++)
		for (int a = 0; a < 3; a++) {
			char plain[128], enc[256];
			int n = snprintf(plain, sizeof(plain), "%.*s%s..", a, "AB", VALUE);
			EVP_EncodeBlock((unsigned char *)enc, (unsigned char *)plain, n);
			for (char *p = enc; url && *p; p++)
				*p = *p == '+' ? '-' : *p == '/' ? '_' : *p;
			assert_int_equal(al_valscan_find(set, enc, strlen(enc)), 7);
		}
	/* Nothing like it. */
	pct_all("s3cr/t v+l", true, buf);
	assert_int_equal(al_valscan_find(set, buf, strlen(buf)), -1);
	/* Half of it, or more: an echo cut short, one character escaped
	 * some other way. */
	assert_int_equal(al_valscan_find(set, "bad key: s3cr/t v+l=\"...", 25), 7);
	assert_int_equal(al_valscan_find(set, "s3cr/t v+l=\"x\"&<y>'z'-8", 23), 7);
	assert_int_equal(al_valscan_find(set, "..l=\"x\"&<y>'z'-9", 17), 7);
	assert_int_equal(al_valscan_find(set, "s3cr/t v+l=", 11), -1);
	al_valscan_free(set);

	/* Non-ASCII as JSON's \u escapes (Python's ensure_ascii). */
	set = set_of("caf\xc3\xa9-t\xf0\x9f\x94\x91k");
	const char *j = "\"caf\\u00e9-t\\ud83d\\udd11k\"";
	assert_int_equal(al_valscan_find(set, j, strlen(j)), 7);
	al_valscan_free(set);
}

static void test_forms_limits(void **state)
{
	struct al_valscan_value v = {"short", 5, 1, false};
	struct al_valscan_set *set = NULL;
	struct al_error err = {0};

	(void)state;
	assert_int_equal(al_valscan_new(&v, 1, &set, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "value 0"));
	/* An empty set finds nothing and holds nothing. */
	assert_int_equal(al_valscan_new(NULL, 0, &set, &err), 0);
	struct al_valscan sc;
	al_valscan_init(&sc, set);
	assert_int_equal(al_valscan_feed(&sc, "abc", 3), -1);
	assert_int_equal(al_valscan_pending(&sc), 0);
	al_valscan_fini(&sc);
	al_valscan_free(set);
}

/* Split anywhere, the value is found, and until its last byte the bytes
 * that could start it are pending. */
static void test_scan_split(void **state)
{
	struct al_valscan_set *set = set_of(VALUE);
	size_t vl = strlen(VALUE);
	char text[256];

	(void)state;
	int n = snprintf(text, sizeof(text), "xx s3cr yy %s zz", VALUE);
	size_t at = (size_t)(strstr(text, VALUE) - text);
	for (size_t cut = 0; cut <= (size_t)n; cut++) {
		struct al_valscan sc;
		al_valscan_init(&sc, set);
		int a = al_valscan_feed(&sc, text, cut);
		/* Until half of it is there, the start is pending. */
		if (cut >= at && cut < at + (vl + 1) / 2) {
			assert_int_equal(a, -1);
			assert_int_equal(al_valscan_pending(&sc), cut - at);
		}
		int b = al_valscan_feed(&sc, text + cut, (size_t)n - cut);
		assert_int_equal(a >= 0 ? a : b, 7);
		al_valscan_fini(&sc);
	}
	/* Byte by byte. */
	struct al_valscan sc;
	int hit = -1;
	al_valscan_init(&sc, set);
	for (int i = 0; i < n && hit < 0; i++)
		hit = al_valscan_feed(&sc, text + i, 1);
	assert_int_equal(hit, 7);
	al_valscan_fini(&sc);
	al_valscan_free(set);
}

/* Feed an answer in pieces of `piece` bytes: the verdict, and never a
 * release that takes in byte `guard` (or later) before FOUND. */
static enum al_answer_verdict feed(struct al_answer *a, const char *buf, size_t len, size_t piece,
				   size_t guard, struct al_answer_out *out)
{
	enum al_answer_verdict v = AL_ANSWER_OK;

	for (size_t off = 0; off < len && v == AL_ANSWER_OK; off += piece) {
		size_t k = len - off < piece ? len - off : piece;
		v = al_answer_feed(a, buf + off, k, out);
		if (v == AL_ANSWER_OK)
			assert_true(al_answer_release(a) <= guard);
	}
	return v;
}

static size_t chunked(const char *body, size_t len, size_t cut, char *out)
{
	int n = sprintf(out, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
	n += sprintf(out + n, "%zx\r\n%.*s\r\n", cut, (int)cut, body);
	n += sprintf(out + n, "%zx;ext=1\r\n%.*s\r\n0\r\nX-T: 1\r\n\r\n", len - cut,
		     (int)(len - cut), body + cut);
	return (size_t)n;
}

static void test_answer_chunked(void **state)
{
	struct al_valscan_set *set = set_of(VALUE);
	char body[256], ans[1024];
	struct al_answer_out out;

	(void)state;
	int bl = snprintf(body, sizeof(body), "echo: GET /?k=%s HTTP/1.1", VALUE);
	size_t at = (size_t)(strstr(body, VALUE) - body);
	for (size_t cut = 1; cut < (size_t)bl; cut++) {
		size_t n = chunked(body, (size_t)bl, cut, ans);
		for (size_t piece = 1; piece <= n; piece = piece * 3 + 1) {
			struct al_answer *a = al_answer_new(set);
			assert_int_equal(al_answer_expect(a, false), 0);
			/* The guard: where the value starts in the raw bytes. */
			char l1[32], l2[32];
			size_t h = (size_t)(strstr(ans, "\r\n\r\n") - ans) + 4;
			size_t n1 = (size_t)sprintf(l1, "%zx\r\n", cut);
			size_t n2 = (size_t)sprintf(l2, "%zx;ext=1\r\n", (size_t)bl - cut);
			size_t guard = at < cut ? h + n1 + at : h + n1 + cut + 2 + n2 + (at - cut);
			assert_int_equal(feed(a, ans, n, piece, guard, &out), AL_ANSWER_FOUND);
			assert_int_equal(out.id, 7);
			al_answer_free(a);
		}
	}
	/* An innocent chunked answer: all of it goes, framing and trailer. */
	size_t n = chunked("hello world, nothing here", 25, 5, ans);
	struct al_answer *a = al_answer_new(set);
	assert_int_equal(al_answer_expect(a, false), 0);
	assert_int_equal(feed(a, ans, n, 7, n, &out), AL_ANSWER_OK);
	assert_int_equal(al_answer_release(a), n);
	al_answer_free(a);
	al_valscan_free(set);
}

static size_t zip(const char *in, size_t len, int window, char *out, size_t size)
{
	z_stream z = {0};

	assert_int_equal(deflateInit2(&z, 9, Z_DEFLATED, window, 8, Z_DEFAULT_STRATEGY), Z_OK);
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)len;
	z.next_out = (Bytef *)out;
	z.avail_out = (uInt)size;
	assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
	size_t n = z.total_out;
	deflateEnd(&z);
	return n;
}

static size_t coded(const char *coding, const char *body, size_t bl, char *out)
{
	char enc[4096];
	size_t el;

	if (strcmp(coding, "br") == 0) {
		el = sizeof(enc);
		assert_true(BrotliEncoderCompress(5, 22, BROTLI_MODE_TEXT, bl,
						  (const uint8_t *)body, &el, (uint8_t *)enc));
	} else {
		int w = strcmp(coding, "gzip") == 0	 ? 31
			: strcmp(coding, "deflate") == 0 ? 15
							 : -15;
		el = zip(body, bl, w, enc, sizeof(enc));
	}
	int n =
	    sprintf(out, "HTTP/1.1 200 OK\r\nContent-Encoding: %s\r\nContent-Length: %zu\r\n\r\n",
		    strcmp(coding, "raw") == 0 ? "deflate" : coding, el);
	memcpy(out + n, enc, el);
	return (size_t)n + el;
}

static void test_answer_coded(void **state)
{
	static const char *const codings[] = {"gzip", "deflate", "raw", "br"};
	struct al_valscan_set *set = set_of(VALUE);
	char body[4096], ans[8192];
	struct al_answer_out out;

	(void)state;
	/* The value deep in a compressible body. */
	int bl = 0;
	for (int i = 0; i < 60; i++)
		bl += sprintf(body + bl, "line %d of the echo\n", i);
	bl += sprintf(body + bl, "{\"q\":\"%s\"}\n", VALUE);
	for (size_t c = 0; c < AL_ARRAY_SIZE(codings); c++) {
		size_t n = coded(codings[c], body, (size_t)bl, ans);
		for (size_t piece = 1; piece <= n; piece *= 5) {
			struct al_answer *a = al_answer_new(set);
			assert_int_equal(al_answer_expect(a, false), 0);
			assert_int_equal(feed(a, ans, n, piece, n, &out), AL_ANSWER_FOUND);
			al_answer_free(a);
		}
		/* Without the value it all goes. */
		size_t m = coded(codings[c], body, (size_t)bl - 30, ans);
		struct al_answer *a = al_answer_new(set);
		assert_int_equal(al_answer_expect(a, false), 0);
		assert_int_equal(feed(a, ans, m, 100, m, &out), AL_ANSWER_OK);
		assert_int_equal(al_answer_release(a), m);
		al_answer_free(a);
	}
	al_valscan_free(set);
}

/* A Content-Length body fed byte by byte: nothing from the value's first
 * byte on goes before the verdict. */
static void test_answer_hold(void **state)
{
	struct al_valscan_set *set = set_of(VALUE);
	char ans[512];
	struct al_answer_out out;

	(void)state;
	int n = sprintf(ans, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\nab %s cd",
			strlen(VALUE) + 6, VALUE);
	size_t at = (size_t)(strstr(ans, VALUE) - ans);
	struct al_answer *a = al_answer_new(set);
	assert_int_equal(al_answer_expect(a, false), 0);
	assert_int_equal(feed(a, ans, (size_t)n, 1, at, &out), AL_ANSWER_FOUND);
	al_answer_free(a);
	/* A start that is disproven goes at once; one left at the end goes
	 * when the server closes. */
	a = al_answer_new(set);
	assert_int_equal(al_answer_expect(a, false), 0);
	const char *h = "HTTP/1.1 200 OK\r\n\r\nxx s3cr/t v+l yy s3cr/t";
	assert_int_equal(al_answer_feed(a, h, strlen(h), &out), AL_ANSWER_OK);
	assert_int_equal(al_answer_release(a), strlen(h) - strlen("s3cr/t"));
	assert_int_equal(al_answer_end(a, &out), AL_ANSWER_OK);
	assert_int_equal(al_answer_release(a), strlen(h));
	al_answer_free(a);
	al_valscan_free(set);
}

static void expect_bad(const struct al_valscan_set *set, const char *ans, size_t n, bool head,
		       const char *why)
{
	struct al_answer *a = al_answer_new(set);
	struct al_answer_out out;

	assert_int_equal(al_answer_expect(a, head), 0);
	assert_int_equal(al_answer_feed(a, ans, n, &out), AL_ANSWER_BAD);
	if (!strstr(out.why, why))
		fail_msg("\"%s\" does not say \"%s\"", out.why, why);
	al_answer_free(a);
}

static void test_answer_refused(void **state)
{
	struct al_valscan_set *set = set_of(VALUE);
#define S(x) x, sizeof(x) - 1
	(void)state;
	expect_bad(set, S("HTTP/1.1 200 OK\r\nContent-Encoding: zstd\r\n\r\nxx"), false,
		   "zstd cannot be decoded");
	expect_bad(set, S("HTTP/1.1 200 OK\r\nContent-Encoding: gzip, br\r\n\r\nxx"), false,
		   "more than one Content-Encoding");
	expect_bad(set,
		   S("HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n"
		     "Content-Encoding: gzip\r\n\r\nxx"),
		   false, "more than one");
	expect_bad(set, S("HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n"), false, "101");
	expect_bad(set, S("HTTP/1.1 206 Partial\r\nContent-Length: 2\r\n\r\nxx"), false, "206");
	expect_bad(set,
		   S("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n"),
		   false, "Transfer-Encoding");
	expect_bad(set, S("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"), false,
		   "Transfer-Encoding");
	expect_bad(set, S("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n"),
		   false, "Content-Length");
	expect_bad(set, S("HTTP/1.1 200 OK\nContent-Length: 2\r\n\r\nxx"), false, "not valid");
	expect_bad(set, S("HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n"), false, "not valid");
	expect_bad(set, S("\r\nHTTP/1.1 200 OK\r\n\r\n"), false, "not valid");
	expect_bad(set, S("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"), false,
		   "size line");
	expect_bad(set, S("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabX"), false,
		   "CRLF");
	expect_bad(set, S("HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n\r\nnot gzip at all"),
		   false, "not valid");
	/* An answer to no request. */
	struct al_answer *a = al_answer_new(set);
	struct al_answer_out out;
	assert_int_equal(al_answer_feed(a, S("HTTP/1.1 200 OK\r\n\r\n"), &out), AL_ANSWER_BAD);
	assert_non_null(strstr(out.why, "no request"));
	al_answer_free(a);
	/* Bytes after a gzip body's end. */
	char ans[512], gz[256];
	for (int w = 0; w < 2; w++) {
		size_t gl = zip("hello", 5, w ? 31 : 15, gz, sizeof(gz));
		int n = sprintf(
		    ans, "HTTP/1.1 200 OK\r\nContent-Encoding: %s\r\nContent-Length: %zu\r\n\r\n",
		    w ? "gzip" : "deflate", gl + 4);
		memcpy(ans + n, gz, gl);
		memcpy(ans + n + gl, "junk", 4);
		/* gzip: the next member's header is wrong. */
		expect_bad(set, ans, (size_t)n + gl + 4, false, w ? "not valid" : "after the end");
	}
	al_valscan_free(set);
#undef S
}

/* HEAD, 1xx, 204 and 304 have no body; the next answer's head follows. */
static void test_answer_framing(void **state)
{
	struct al_valscan_set *set = set_of(VALUE);
	struct al_answer *a = al_answer_new(set);
	struct al_answer_out out;
	char ans[1024];

	(void)state;
	int n = sprintf(ans,
			"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n"
			"HTTP/1.1 100 Continue\r\n\r\n"
			"HTTP/1.1 204 No Content\r\n\r\n"
			"HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n%s",
			strlen(VALUE), VALUE);
	assert_int_equal(al_answer_expect(a, true), 0);
	assert_int_equal(al_answer_expect(a, false), 0);
	assert_int_equal(al_answer_expect(a, false), 0);
	assert_int_equal(al_answer_feed(a, ans, (size_t)n, &out), AL_ANSWER_FOUND);
	al_answer_free(a);
	/* Read to the close: found there too. */
	a = al_answer_new(set);
	assert_int_equal(al_answer_expect(a, false), 0);
	n = sprintf(ans, "HTTP/1.0 200 OK\r\n\r\nx%s", VALUE);
	assert_int_equal(feed(a, ans, (size_t)n, 2, (size_t)n, &out), AL_ANSWER_FOUND);
	al_answer_free(a);
	/* Too many waiting. */
	a = al_answer_new(set);
	for (int i = 0; i < AL_ANSWER_WAITING_MAX; i++)
		assert_int_equal(al_answer_expect(a, false), 0);
	assert_int_equal(al_answer_expect(a, false), -ENOSPC);
	al_answer_free(a);
	al_valscan_free(set);
}

/* ---- the view with escapes undone ---- */

static struct al_valscan_set *plain_set(const char *v)
{
	char n[128];
	size_t len = strlen(v);
	for (size_t i = 0; i <= len; i++)
		n[i] = v[i] == ' ' ? '+' : v[i];
	/* As present.c makes it: as it is, and with '+' for its spaces. */
	struct al_valscan_value val[] = {{.data = v, .len = len, .id = 7, .plain = true},
					 {.data = n, .len = len, .id = 7, .bare = true}};
	struct al_valscan_set *set = NULL;
	struct al_error err = {0};

	assert_int_equal(al_valscan_new(val, 2, &set, &err), 0);
	return set;
}

/* Escapes no list of forms has (every other character as \u00XX, or as
 * &#NN;, or in a mix with %XX), split anywhere: found, and nothing from
 * the escape that starts the value on goes before. */
static void test_unescaped_view(void **state)
{
	static const char *const echoes[] = {
	    "{\"e\": "
	    "\"s3cr\\u002ft\\u0020v\\u002bl\\u003d\\u0022x\\u0022\\u0026\\u003cy\\u003e\\u0027z\\u0"
	    "027\\u002d9"
	    "\"}",
	    "<p>s3cr&#47;t&#32;v&#43;l&#61;&#34;x&#34;&#38;&#60;y&#62;&#39;z&#39;-9</p>",
	    "s3cr%2ft v\\u002Bl&#x3d;\"x\"%26&lt;y&gt;'z'-9",
	    "s3cr/t+v%2Bl=\\\"x\\\"&<y>'z'-9",
	};
	struct al_valscan_set *set = set_of(VALUE), *plain = plain_set(VALUE);
	struct al_answer_out out;
	char ans[1024];

	(void)state;
	for (size_t e = 0; e < AL_ARRAY_SIZE(echoes); e++) {
		int n = sprintf(ans, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n%s",
				strlen(echoes[e]), echoes[e]);
		size_t at = (size_t)(strstr(ans, "s3cr") - ans);
		for (size_t piece = 1; piece <= (size_t)n; piece = piece * 2 + 1) {
			struct al_answer *a = al_answer_new(set);
			al_answer_unescaped(a, plain);
			assert_int_equal(al_answer_expect(a, false), 0);
			if (feed(a, ans, (size_t)n, piece, at, &out) != AL_ANSWER_FOUND)
				fail_msg("echo %zu in pieces of %zu: not found", e, piece);
			al_answer_free(a);
		}
		/* Without the view the first two pass. */
		struct al_answer *a = al_answer_new(set);
		assert_int_equal(al_answer_expect(a, false), 0);
		enum al_answer_verdict v = al_answer_feed(a, ans, (size_t)n, &out);
		if (e < 2)
			assert_int_equal(v, AL_ANSWER_OK);
		al_answer_free(a);
	}
	/* Escapes that are not the value go on whole, an unfinished one at
	 * the end of the answer too. */
	const char *body = "a%41b \\u0041 &amp; &#65; s3cr%2";
	int n =
	    sprintf(ans, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n%s", strlen(body), body);
	struct al_answer *a = al_answer_new(set);
	al_answer_unescaped(a, plain);
	assert_int_equal(al_answer_expect(a, false), 0);
	assert_int_equal(al_answer_feed(a, ans, (size_t)n, &out), AL_ANSWER_OK);
	assert_int_equal(al_answer_release(a), (uint64_t)n);
	al_answer_free(a);
	al_valscan_free(plain);
	al_valscan_free(set);
}

/* A body that is not text is searched for the whole forms only (the
 * scan jumps twice as far); a text body and the head also by halves. */
static void test_binary_body_whole_forms(void **state)
{
	struct al_valscan_value v = {.data = VALUE, .len = strlen(VALUE), .id = 7, .whole = true};
	struct al_valscan_set *set = set_of(VALUE), *whole = NULL;
	struct al_error err = {0};
	struct al_answer_out out;
	char ans[512], half[32];

	(void)state;
	assert_int_equal(al_valscan_new(&v, 1, &whole, &err), 0);
	snprintf(half, sizeof(half), "%.*s", (int)(strlen(VALUE) + 1) / 2, VALUE);
	for (int bin = 0; bin < 2; bin++)
		for (int full = 0; full < 2; full++) {
			const char *body = full ? VALUE : half;
			int n =
			    sprintf(ans,
				    "HTTP/1.1 200 OK\r\nContent-Type: %s\r\n"
				    "Content-Length: %zu\r\n\r\nx %s y",
				    bin ? "application/octet-stream" : "text/plain; charset=utf-8",
				    strlen(body) + 4, body);
			struct al_answer *a = al_answer_new(set);
			al_answer_whole(a, whole);
			assert_int_equal(al_answer_expect(a, false), 0);
			enum al_answer_verdict want = full || !bin ? AL_ANSWER_FOUND : AL_ANSWER_OK;
			assert_int_equal(al_answer_feed(a, ans, (size_t)n, &out), want);
			al_answer_free(a);
		}
	al_valscan_free(whole);
	al_valscan_free(set);
}

/* ---- from the review of the first version ---- */

/* A value like an API key: letters, digits, '+', '/', '=' padding. */
static const char KEY[] = "s3cr3tV4lu3+Zk9/Qw7=";

static struct al_valscan_set *key_set(const char *v, bool whole)
{
	struct al_valscan_value val = {.data = v, .len = strlen(v), .id = 3, .whole = whole};
	struct al_valscan_set *set = NULL;
	struct al_error err = {0};

	assert_int_equal(al_valscan_new(&val, 1, &set, &err), 0);
	return set;
}

static size_t gzip_of(const char *in, size_t len, char *out, size_t size)
{
	z_stream z = {0};

	assert_int_equal(deflateInit2(&z, 9, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY), Z_OK);
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)len;
	z.next_out = (Bytef *)out;
	z.avail_out = (uInt)size;
	assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
	size_t n = z.total_out;
	deflateEnd(&z);
	return n;
}

/* A complete Content-Length answer whose body ends with a byte a form of
 * the value starts with ('s'): the client waits for that byte, the server
 * for the client's next request. Everything must go once the body is
 * whole; today the last byte waits until GW_ANSWER_STALL_MS closes the
 * connection (filter-pump.c search()). */
static void test_whole_body_goes(void **state)
{
	struct al_valscan_set *set = key_set(KEY, false);
	struct al_answer_out out;
	char ans[256];

	(void)state;
	int n = sprintf(ans, "HTTP/1.1 200 OK\r\nContent-Length: 15\r\n\r\nstatus: success");
	struct al_answer *a = al_answer_new(set);
	assert_int_equal(al_answer_expect(a, false), 0);
	assert_int_equal(al_answer_feed(a, ans, (size_t)n, &out), AL_ANSWER_OK);
	assert_int_equal(al_answer_fed(a), (uint64_t)n);
	assert_int_equal(al_answer_release(a), (uint64_t)n);
	al_answer_free(a);
	al_valscan_free(set);
}

/* The same with a gzip body: its last piece of raw bytes (the gzip
 * trailer the client needs) is held. */
static void test_whole_gzip_body_goes(void **state)
{
	struct al_valscan_set *set = key_set(KEY, false);
	struct al_answer_out out;
	char body[] = "all went well: success", gz[256], ans[512];

	(void)state;
	size_t gl = gzip_of(body, strlen(body), gz, sizeof(gz));
	int n = sprintf(
	    ans, "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %zu\r\n\r\n", gl);
	memcpy(ans + n, gz, gl);
	n += (int)gl;
	struct al_answer *a = al_answer_new(set);
	assert_int_equal(al_answer_expect(a, false), 0);
	assert_int_equal(al_answer_feed(a, ans, (size_t)n, &out), AL_ANSWER_OK);
	assert_int_equal(al_answer_release(a), (uint64_t)n);
	al_answer_free(a);
	al_valscan_free(set);
}

/* A server that echoes a value cut short (an error message that quotes
 * the first N characters of a parameter: the sandbox pads the query so
 * the cut falls before the last character) hands over all but one
 * character; the rest is a guess the API itself confirms. */
static void test_truncated_value_found(void **state)
{
	struct al_valscan_set *set = key_set(KEY, false);
	struct al_answer_out out;
	char ans[256];

	(void)state;
	int bl = (int)strlen(KEY) - 1 + 20;
	int n = sprintf(ans, "HTTP/1.1 400 Bad\r\nContent-Length: %d\r\n\r\nbad key: %.*s...\n", bl,
			(int)strlen(KEY) - 1, KEY);
	struct al_answer *a = al_answer_new(set);
	assert_int_equal(al_answer_expect(a, false), 0);
	assert_int_equal(al_answer_feed(a, ans, (size_t)n, &out), AL_ANSWER_FOUND);
	al_answer_free(a);
	al_valscan_free(set);
}

/* ASP.NET Core's JSON (System.Text.Json's default encoder) writes '+' as
 * \u002B, in upper-case hex. */
static void test_dotnet_json_found(void **state)
{
	struct al_valscan_set *set = key_set(KEY, false);
	const char *echo = "{\"key\":\"s3cr3tV4lu3\\u002BZk9/Qw7=\"}";

	(void)state;
	assert_int_equal(al_valscan_find(set, echo, strlen(echo)), 3);
	al_valscan_free(set);
}

/* A value whose '=' an HTML template escapes as &#x3D; (Handlebars,
 * Mustache.js). */
static void test_html_equals_found(void **state)
{
	struct al_valscan_set *set = key_set(KEY, false);
	const char *echo = "<td>s3cr3tV4lu3+Zk9/Qw7&#x3D;</td>";

	(void)state;
	assert_int_equal(al_valscan_find(set, echo, strlen(echo)), 3);
	al_valscan_free(set);
}

/* The request was a HEAD for the gateway, not for the server (a method
 * override, a server that ignores HEAD): the body that follows is read as
 * the next head, searched only as raw bytes and let go as it comes, so a
 * gzip body carrying the value reaches the client before the head is
 * found invalid. Nothing of it should go before it is known to be a head. */
static void test_body_after_head_held(void **state)
{
	struct al_valscan_set *set = key_set(KEY, false);
	struct al_answer_out out;
	char body[256], gz[512], ans[1024];

	(void)state;
	int bl = sprintf(body, "{\"headers\":{\"X-Api-Key\":\"%s\"}}", KEY);
	size_t gl = gzip_of(body, (size_t)bl, gz, sizeof(gz));
	assert_null(memmem(gz, gl, "\r\n\r\n", 4));
	int h = sprintf(
	    ans, "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %zu\r\n\r\n", gl);
	memcpy(ans + h, gz, gl);
	struct al_answer *a = al_answer_new(set);
	assert_int_equal(al_answer_expect(a, true), 0);
	enum al_answer_verdict v = al_answer_feed(a, ans, (size_t)h + gl, &out);
	if (v == AL_ANSWER_OK && al_answer_release(a) > (uint64_t)h)
		fail_msg("%llu bytes of a gzip body holding the value may go (head %d bytes)",
			 (unsigned long long)(al_answer_release(a) - (uint64_t)h), h);
	al_answer_free(a);
	al_valscan_free(set);
}

/* A chunk-size line's extension is let go before the line is searched:
 * a value there is found only after its first bytes went. */
static void test_chunk_line_held(void **state)
{
	struct al_valscan_set *set = key_set(KEY, false);
	struct al_answer_out out;
	char ans[512];

	(void)state;
	sprintf(ans,
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
		"2;k=%s\r\nok\r\n0\r\n\r\n",
		KEY);
	size_t at = (size_t)(strstr(ans, KEY) - ans);
	struct al_answer *a = al_answer_new(set);
	assert_int_equal(al_answer_expect(a, false), 0);
	assert_int_equal(al_answer_feed(a, ans, at + 6, &out), AL_ANSWER_OK);
	assert_true(al_answer_release(a) <= at);
	al_answer_free(a);
	al_valscan_free(set);
}

/* A per-request token presented as basic auth ("basic": {"user": ...} is
 * allowed for tokens) goes out as base64("svc:" + token); present.c
 * searches answers for the tokens' shared start in its raw form only, so
 * an endpoint that echoes the Authorization field hands the token over. */
static void test_basic_token_found(void **state)
{
	static const char secret[] = "0123456789abcdef0123456789abcdef0123456789abcdef";
	const char *aud[] = {"api.example.com"};
	struct al_jwt_key *k = NULL;
	struct al_error err = {0};
	char *tok = NULL, *prefix = NULL, jti[AL_JWT_JTI_LEN + 1];

	(void)state;
	assert_int_equal(al_jwt_key_from_mem(secret, strlen(secret), &k, &err), 0);
	assert_int_equal(al_jwt_new_jti(jti, &err), 0);
	struct al_jwt_claims c = {.iss = "airlock",
				  .sub = "run-1",
				  .jti = jti,
				  .aud = aud,
				  .n_aud = 1,
				  .iat = 1700000000,
				  .nbf = 1700000000,
				  .exp = 1700000015};
	assert_int_equal(al_jwt_mint(k, &c, &tok, &err), 0);
	assert_int_equal(al_jwt_prefix(k, "airlock", "run-1", &prefix, &err), 0);
	/* The set as gw_answer_set_build makes it for a per-request token
	 * presented as basic auth: its start, and "svc:" and its start, in
	 * their forms but not by halves. */
	char *basic = NULL;
	assert_true(asprintf(&basic, "svc:%s", prefix) > 0);
	struct al_valscan_value vals[] = {
	    {.data = prefix, .len = strlen(prefix), .id = 3, .whole = true},
	    {.data = basic, .len = strlen(basic), .id = 3, .whole = true}};
	struct al_valscan_set *set = NULL;
	assert_int_equal(al_valscan_new(vals, 2, &set, &err), 0);
	assert_int_equal(al_valscan_find(set, tok, strlen(tok)), 3);
	char plain[1024], enc[2048], echo[2100];
	int pl = snprintf(plain, sizeof(plain), "svc:%s", tok);
	EVP_EncodeBlock((unsigned char *)enc, (unsigned char *)plain, pl);
	int n = snprintf(echo, sizeof(echo), "{\"Authorization\":\"Basic %s\"}", enc);
	assert_int_equal(al_valscan_find(set, echo, (size_t)n), 3);
	/* Another run's token (another sub) is not found. */
	c.sub = "run-2";
	char *tok2 = NULL;
	assert_int_equal(al_jwt_mint(k, &c, &tok2, &err), 0);
	assert_int_equal(al_valscan_find(set, tok2, strlen(tok2)), -1);
	free(tok2);
	al_valscan_free(set);
	free(basic);
	free(prefix);
	free(tok);
	al_jwt_key_free(k);
}

/* ---- from the review of the unescaped view ---- */

struct sets {
	struct al_valscan_set *forms, *plain;
};

static struct sets sets_of(const char *v)
{
	struct al_valscan_value f = {.data = v, .len = strlen(v), .id = 0};
	char *p = strdup(v);
	struct sets s = {0};
	struct al_error err = {0};

	for (char *c = p; *c; c++)
		if (*c == ' ')
			*c = '+';
	struct al_valscan_value pv = {.data = p, .len = strlen(p), .id = 0, .plain = true};
	assert_int_equal(al_valscan_new(&f, 1, &s.forms, &err), 0);
	assert_int_equal(al_valscan_new(&pv, 1, &s.plain, &err), 0);
	free(p);
	return s;
}

static void sets_free(struct sets *s)
{
	al_valscan_free(s->forms);
	al_valscan_free(s->plain);
}

/* "ab^&cdef" echoed as encodeURI / Express's encodeurl write it (they keep
 * '&'): "ab%5E&cdef". No form of the value matches those bytes; the view
 * decodes it, but the '&' opens an entity that the end of the stream
 * closes. At the end of an answer with a length (answer_end) the view is
 * flushed and the value found; when the server closes a body that ends
 * with the connection, al_answer_end() releases everything without that
 * flush. */
static const char V1[] = "ab^&cdef";
static const char HEAD_CLOSE[] = "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n";
static const char BODY1[] = "ab%5E&cdef";

static void control_open_escape_at_end_of_length_body(void **state)
{
	struct sets s = sets_of(V1);
	struct al_answer *a = al_answer_new(s.forms);
	struct al_answer_out out;
	char buf[256];

	(void)state;
	al_answer_unescaped(a, s.plain);
	assert_int_equal(al_answer_expect(a, false), 0);
	int n = snprintf(buf, sizeof(buf), "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n%s",
			 strlen(BODY1), BODY1);
	assert_int_equal(al_answer_feed(a, buf, (size_t)n, &out), AL_ANSWER_FOUND);
	al_answer_free(a);
	sets_free(&s);
}

static void open_escape_at_end_of_close_body(void **state)
{
	struct sets s = sets_of(V1);
	struct al_answer *a = al_answer_new(s.forms);
	struct al_answer_out out;
	char buf[256];

	(void)state;
	al_answer_unescaped(a, s.plain);
	assert_int_equal(al_answer_expect(a, false), 0);
	int n = snprintf(buf, sizeof(buf), "%s%s", HEAD_CLOSE, BODY1);
	enum al_answer_verdict v = al_answer_feed(a, buf, (size_t)n, &out);
	if (v == AL_ANSWER_OK && (v = al_answer_end(a, &out)) == AL_ANSWER_OK) {
		/* The server closes: nothing from the value's first byte on may
		 * go (the client URL-decodes "ab%5E&cdef" to the value). */
		uint64_t start = strlen(HEAD_CLOSE);
		if (al_answer_release(a) > start)
			fail_msg("released %llu of %d bytes: \"%s\" (the value %s) reached the "
				 "client",
				 (unsigned long long)al_answer_release(a), n, BODY1, V1);
	} else {
		assert_int_equal(v, AL_ANSWER_FOUND);
	}
	al_answer_free(a);
	sets_free(&s);
}

/* base64 of a value, percent-encoded ('+' '/' as %2B %2F, as in a URL's
 * query): the forms hold base64 only as it is, and both halves hold a '+'
 * or '/'; the view undoes the percent-encoding but searches the value
 * plain only, not its base64. */
static const char V2[] = "k3y-~~>x?Q0aZ>>?-t0k3n~~1x9";
static const char B64[] = "azN5LX5+Png/UTBhWj4+Py10MGszbn5+MXg5";
static const char B64_PCT[] = "azN5LX5%2BPng%2FUTBhWj4%2BPy10MGszbn5%2BMXg5";

static enum al_answer_verdict feed_body(const char *v, const char *body)
{
	struct sets s = sets_of(v);
	struct al_answer *a = al_answer_new(s.forms);
	struct al_answer_out out;
	char buf[512];

	al_answer_unescaped(a, s.plain);
	assert_int_equal(al_answer_expect(a, false), 0);
	int n = snprintf(
	    buf, sizeof(buf),
	    "HTTP/1.1 302 Found\r\nLocation: /cb?state=%s\r\nContent-Length: 0\r\n\r\n", body);
	enum al_answer_verdict r = al_answer_feed(a, buf, (size_t)n, &out);
	al_answer_free(a);
	sets_free(&s);
	return r;
}

static void control_base64_found(void **state)
{
	(void)state;
	assert_int_equal(feed_body(V2, B64), AL_ANSWER_FOUND);
}

static void base64_percent_encoded_found(void **state)
{
	(void)state;
	assert_int_equal(feed_body(V2, B64_PCT), AL_ANSWER_FOUND);
}

/* A chunk-size line is searched only when its CRLF comes (chunk_size());
 * until then its bytes are framing, held by open_at. When the server
 * closes in the middle of one, al_answer_end() releases everything (the
 * hold of an open section is skipped for all): the line's bytes, a chunk
 * extension holding the raw value, go on unsearched. */
static const char V3[] = "sk-live-0123456789abcdef";

static void partial_chunk_line_at_close(void **state)
{
	struct sets s = sets_of(V3);
	struct al_answer *a = al_answer_new(s.forms);
	struct al_answer_out out;
	char buf[256];

	(void)state;
	al_answer_unescaped(a, s.plain);
	assert_int_equal(al_answer_expect(a, false), 0);
	int head = snprintf(buf, sizeof(buf),
			    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n");
	int n = head + snprintf(buf + head, sizeof(buf) - (size_t)head, "5;echo=%s", V3);
	enum al_answer_verdict v = al_answer_feed(a, buf, (size_t)n, &out);
	if (v == AL_ANSWER_OK) {
		assert_int_equal(al_answer_end(a, &out), AL_ANSWER_OK);
		if (al_answer_release(a) > (uint64_t)head)
			fail_msg("released %llu of %d bytes: the chunk line \"%s\" went unsearched",
				 (unsigned long long)al_answer_release(a), n, buf + head);
	} else {
		assert_int_equal(v, AL_ANSWER_FOUND);
	}
	al_answer_free(a);
	sets_free(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_forms_found),
	    cmocka_unit_test(test_forms_limits),
	    cmocka_unit_test(test_scan_split),
	    cmocka_unit_test(test_answer_chunked),
	    cmocka_unit_test(test_answer_coded),
	    cmocka_unit_test(test_answer_hold),
	    cmocka_unit_test(test_answer_refused),
	    cmocka_unit_test(test_answer_framing),
	    cmocka_unit_test(test_whole_body_goes),
	    cmocka_unit_test(test_whole_gzip_body_goes),
	    cmocka_unit_test(test_truncated_value_found),
	    cmocka_unit_test(test_dotnet_json_found),
	    cmocka_unit_test(test_html_equals_found),
	    cmocka_unit_test(test_body_after_head_held),
	    cmocka_unit_test(test_chunk_line_held),
	    cmocka_unit_test(test_basic_token_found),
	    cmocka_unit_test(test_unescaped_view),
	    cmocka_unit_test(test_binary_body_whole_forms),
	    cmocka_unit_test(control_open_escape_at_end_of_length_body),
	    cmocka_unit_test(open_escape_at_end_of_close_body),
	    cmocka_unit_test(control_base64_found),
	    cmocka_unit_test(base64_percent_encoded_found),
	    cmocka_unit_test(partial_chunk_line_at_close),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
