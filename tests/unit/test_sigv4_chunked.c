/* cred/sigv4.h, bodies of signed chunks: al_sigv4_resign_chunked() and the
 * filter that re-signs the body as it streams.
 *
 * The vectors are the S3 documentation's two streaming examples (PUT
 * /examplebucket/chunkObject.txt: 65,536 and 1,024 bytes of 'a' in two
 * chunks and the empty last one; without and with a signed trailer,
 * x-amz-checksum-crc32c:sOO8/Q==): re-signed with their own key they must
 * come back byte for byte, which checks both chains against the published
 * signatures. Re-signed with another key, the result must verify and
 * re-sign to itself. */
#include "unit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sigv4_util.h"

#define DOC_SCOPE "AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request"
#define SIGNED_PLAIN                                                                               \
	"content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;"                    \
	"x-amz-decoded-content-length;x-amz-storage-class"
#define SIGNED_TRAILER                                                                             \
	"content-encoding;host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;"      \
	"x-amz-storage-class;x-amz-trailer"

static const char *const plain_sigs[] = {
    "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9",
    "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648",
    "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497",
    "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9",
};
static const char *const trailer_sigs[] = {
    "106e2a8a18243abcf37539882f36619c00e2dfc72633413f02d3b74544bfeb8e",
    "b474d8862b1487a5145d686f57f013e54db672cee1c953b3010fb58501ef5aa2",
    "1c1344b170168f8e65b41376b44b20fe354e373826ccbbe2c1d40a8cae51e5c7",
    "2ca2aba2005185cf7159c6277faf83795951dd77a3a99e6e65d5c9f85863f992",
    "d81f82fc3505edab99d459891051a732e8730629a2e4a59689829ca17fe2e435",
};

#define BODY_MAX 70000

static char auth[1024], body[BODY_MAX], got[BODY_MAX], again[BODY_MAX];
static size_t body_len;

/* The example's request; sigs[0] is the seed. */
static void example(bool trailer, const char *const *sigs)
{
	snprintf(auth, sizeof(auth),
		 "AWS4-HMAC-SHA256 Credential=" DOC_SCOPE ", SignedHeaders=%s, Signature=%s",
		 trailer ? SIGNED_TRAILER : SIGNED_PLAIN, sigs[0]);
	start("PUT", "/examplebucket/chunkObject.txt");
	field("content-encoding", "aws-chunked");
	if (!trailer)
		field("content-length", "66824");
	field("host", "s3.amazonaws.com");
	field("x-amz-content-sha256", trailer ? "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
					      : "STREAMING-AWS4-HMAC-SHA256-PAYLOAD");
	field("x-amz-date", "20130524T000000Z");
	field("x-amz-decoded-content-length", "66560");
	field("x-amz-storage-class", "REDUCED_REDUNDANCY");
	if (trailer)
		field("x-amz-trailer", "x-amz-checksum-crc32c");
	field("Authorization", auth);

	body_len = (size_t)snprintf(body, sizeof(body), "10000;chunk-signature=%s\r\n", sigs[1]);
	memset(body + body_len, 'a', 65536);
	body_len += 65536;
	body_len += (size_t)snprintf(body + body_len, sizeof(body) - body_len,
				     "\r\n400;chunk-signature=%s\r\n", sigs[2]);
	memset(body + body_len, 'a', 1024);
	body_len += 1024;
	body_len += (size_t)snprintf(body + body_len, sizeof(body) - body_len,
				     "\r\n0;chunk-signature=%s\r\n", sigs[3]);
	if (trailer)
		body_len += (size_t)snprintf(body + body_len, sizeof(body) - body_len,
					     "x-amz-checksum-crc32c:sOO8/Q==\r\n"
					     "x-amz-trailer-signature:%s\r\n",
					     sigs[4]);
	body_len += (size_t)snprintf(body + body_len, sizeof(body) - body_len, "\r\n");
}

static struct al_sigv4_chunked *start_filter(const struct al_sigv4_creds *fake,
					     const struct al_sigv4_creds *real)
{
	struct al_sigv4_chunked *c = NULL;
	int r;

	memset(&err, 0, sizeof(err));
	r = al_sigv4_resign_chunked(&req, fake, real, out, sizeof(out), &c, &err);
	if (r < 0)
		fail_msg("head refused (%d): %s", r, err.msg);
	assert_non_null(c);
	return c;
}

/* Feed in steps of step bytes, sending what is pending in halves; returns
 * the filter's result and the output's length in *ret_len. */
static int run(struct al_sigv4_chunked *c, const char *in, size_t len, size_t step, char *dst,
	       size_t *ret_len)
{
	size_t off = 0, o = 0, taken, plen;
	const char *p;
	int r = 0;

	while (off < len && r == 0) {
		r = al_sigv4_chunked_feed(c, in + off, step < len - off ? step : len - off, &taken,
					  &err);
		off += taken;
		while ((p = al_sigv4_chunked_pending(c, &plen))) {
			size_t half = plen > 1 ? plen / 2 : plen;

			memcpy(dst + o, p, half);
			o += half;
			al_sigv4_chunked_sent(c, half);
		}
		if (taken == 0 && r == 0)
			break;
	}
	*ret_len = o;
	return r;
}

static void expect_identity(bool trailer, const char *const *sigs)
{
	static const size_t steps[] = {1, 7, 4096, BODY_MAX};
	size_t n;

	for (size_t i = 0; i < AL_ARRAY_SIZE(steps); i++) {
		example(trailer, sigs);
		_cleanup_(al_sigv4_chunked_freep) struct al_sigv4_chunked *c =
		    start_filter(&doc_key, &doc_key);

		assert_string_equal(out, auth);
		if (run(c, body, body_len, steps[i], got, &n) < 0)
			fail_msg("step %zu: refused: %s", steps[i], err.msg);
		assert_true(al_sigv4_chunked_done(c));
		assert_int_equal(n, body_len);
		assert_memory_equal(got, body, body_len);
	}
}

static void test_published_example(void **state)
{
	expect_identity(false, plain_sigs);
	assert_int_equal(body_len, 66824); /* the documented Content-Length */
}

static void test_published_example_with_trailer(void **state)
{
	expect_identity(true, trailer_sigs);
}

/* The real key's body verifies with the real key and comes back the same;
 * only the signatures changed. */
static void expect_real_roundtrip(bool trailer, const char *const *sigs)
{
	char head[1024];
	size_t n, m, diff = 0;

	example(trailer, sigs);
	_cleanup_(al_sigv4_chunked_freep) struct al_sigv4_chunked *c =
	    start_filter(&doc_key, &real_key);
	assert_int_equal(run(c, body, body_len, 1000, got, &n), 0);
	assert_true(al_sigv4_chunked_done(c));
	assert_int_equal(n, body_len);
	for (size_t i = 0; i < n; i++)
		diff += got[i] != body[i];
	assert_true(diff > 3 * 50 && diff <= (trailer ? 4 : 3) * 64);

	strcpy(head, out);
	fields[req.n_headers - 1].value = head;
	fields[req.n_headers - 1].value_len = strlen(head);
	_cleanup_(al_sigv4_chunked_freep) struct al_sigv4_chunked *d =
	    start_filter(&real_key, &real_key);
	assert_string_equal(out, head);
	assert_int_equal(run(d, got, n, 333, again, &m), 0);
	assert_true(al_sigv4_chunked_done(d));
	assert_int_equal(m, n);
	assert_memory_equal(again, got, n);
}

static void test_real_key(void **state)
{
	expect_real_roundtrip(false, plain_sigs);
	expect_real_roundtrip(true, trailer_sigs);
}

/* Without the placeholder's secret the chunks are not checked, and come
 * out as they would have. */
static void test_unverified(void **state)
{
	struct al_sigv4_creds fake = {doc_key.access_key_id, NULL, NULL};
	size_t n, m;

	example(false, plain_sigs);
	_cleanup_(al_sigv4_chunked_freep) struct al_sigv4_chunked *c =
	    start_filter(&doc_key, &real_key);
	assert_int_equal(run(c, body, body_len, BODY_MAX, got, &n), 0);

	memcpy(body + strlen("10000;chunk-signature="), "00000000", 8);
	_cleanup_(al_sigv4_chunked_freep) struct al_sigv4_chunked *d =
	    start_filter(&fake, &real_key);
	assert_int_equal(run(d, body, body_len, BODY_MAX, again, &m), 0);
	assert_int_equal(m, n);
	assert_memory_equal(again, got, n);
}

/* The example's body changed at off (from its end when negative) to text
 * is refused with code and what; then the filter stays failed. */
static void expect_body_refused(bool trailer, long at, const char *text, int code, const char *what)
{
	size_t n, taken, off;
	int r;

	example(trailer, trailer ? trailer_sigs : plain_sigs);
	off = at < 0 ? body_len - (size_t)-at : (size_t)at;
	_cleanup_(al_sigv4_chunked_freep) struct al_sigv4_chunked *c =
	    start_filter(&doc_key, &real_key);
	memcpy(body + off, text, strlen(text));
	r = run(c, body, body_len, 4096, got, &n);
	if (r != -code)
		fail_msg("gave %d (%s), expected %d (%s)", r, err.msg, -code, what);
	assert_contains(err.msg, what);
	assert_false(al_sigv4_chunked_done(c));
	memset(&err, 0, sizeof(err));
	assert_int_equal(al_sigv4_chunked_feed(c, "0", 1, &taken, &err), -code);
	assert_int_equal(taken, 0);
	assert_contains(err.msg, what);
}

static void test_bodies_refused(void **state)
{
	const size_t chunk2 = 22 + 64 + 2 + 65536 + 2; /* where the second chunk starts */

	expect_body_refused(
	    false, 22, "1", EACCES,
	    "chunk 1: the chunk signature does not verify with the placeholder key");
	expect_body_refused(false, chunk2 + 100, "b", EACCES,
			    "chunk 2: the chunk signature does not verify");
	expect_body_refused(true, -10, "0", EACCES,
			    "chunk 3: the trailer signature does not verify");
	expect_body_refused(true, -100, "2", EACCES, "the trailer signature does not verify");
	expect_body_refused(false, 5, "x", EINVAL, "chunk 1: expected HEX-SIZE;chunk-signature=");
	expect_body_refused(false, 0, "g", EINVAL, "chunk 1: expected HEX-SIZE");
	expect_body_refused(false, 22, "AD", EINVAL, "chunk 1: expected HEX-SIZE");
	expect_body_refused(false, 0, "1000000000;", EINVAL, "chunk 1: expected HEX-SIZE");
	expect_body_refused(false, 22 + 64, "\n\n", EINVAL, "chunk 1: expected HEX-SIZE");
	expect_body_refused(false, chunk2 - 2, "ab", EINVAL,
			    "chunk 1: its data is not followed by CRLF");
	expect_body_refused(false, -2, "\r\r", EINVAL,
			    "chunk 3: the last chunk is not followed by CRLF");
	expect_body_refused(true, -2 - 90, "x-amz-trailer-signaturX", EINVAL,
			    "trailer: no x-amz-trailer-signature");
	expect_body_refused(true, -2 - 90, "\x01", EINVAL, "trailer: control character");
	expect_body_refused(true, -20, "-", EINVAL,
			    "x-amz-trailer-signature is not 64 lowercase hex digits");

	/* A header line that never ends. */
	static char junk[200];

	memset(junk, '1', sizeof(junk));
	example(false, plain_sigs);
	_cleanup_(al_sigv4_chunked_freep) struct al_sigv4_chunked *c =
	    start_filter(&doc_key, &real_key);
	size_t n;

	assert_int_equal(run(c, junk, sizeof(junk), 50, got, &n), -EINVAL);
	assert_contains(err.msg, "header line longer than 91 bytes");

	/* A field after the trailer's signature. */
	example(true, trailer_sigs);
	memcpy(body + body_len - 2, "x:1\r\n\r\n", 7);
	_cleanup_(al_sigv4_chunked_freep) struct al_sigv4_chunked *e =
	    start_filter(&doc_key, &real_key);
	assert_int_equal(run(e, body, body_len + 5, 4096, got, &n), -EINVAL);
	assert_contains(err.msg, "trailer: a line after x-amz-trailer-signature");

	/* A chunk past the bound, refused at its header. */
	char big_head[128];
	_cleanup_(al_sigv4_chunked_freep) struct al_sigv4_chunked *d =
	    start_filter(&doc_key, &real_key);

	snprintf(big_head, sizeof(big_head), "100001;chunk-signature=%s\r\n", plain_sigs[1]);
	assert_int_equal(run(d, big_head, strlen(big_head), 1000, got, &n), -E2BIG);
	assert_contains(err.msg, "chunk 1: 1048577 bytes, more than 1048576");
}

static void test_trailer_bound(void **state)
{
	static char big[AL_SIGV4_TRAILER_MAX + 200];
	size_t head = strlen("0;chunk-signature=") + 64 + 2, n;

	example(true, trailer_sigs);
	_cleanup_(al_sigv4_chunked_freep) struct al_sigv4_chunked *c =
	    start_filter(&doc_key, &real_key);
	snprintf(big, sizeof(big), "0;chunk-signature=%s\r\nx-amz-meta-a:", trailer_sigs[3]);
	memset(big + strlen(big), 'v', sizeof(big) - strlen(big));
	assert_int_equal(run(c, big, sizeof(big), 100, got, &n), -E2BIG);
	assert_contains(err.msg, "trailer: more than 4096 bytes");
	assert_true(head < sizeof(big));
}

/* Bytes after the body's end are not the body's: they are not taken. */
static void test_end_of_body(void **state)
{
	size_t n, taken;

	example(false, plain_sigs);
	memcpy(body + body_len, "GET / HTTP/1.1\r\n", 16);
	_cleanup_(al_sigv4_chunked_freep) struct al_sigv4_chunked *c =
	    start_filter(&doc_key, &doc_key);
	assert_int_equal(run(c, body, body_len + 16, BODY_MAX, got, &n), 0);
	assert_int_equal(n, body_len);
	assert_true(al_sigv4_chunked_done(c));
	assert_int_equal(al_sigv4_chunked_feed(c, "GET", 3, &taken, &err), 0);
	assert_int_equal(taken, 0);
	assert_null(al_sigv4_chunked_pending(c, &n));
	assert_int_equal(n, 0);
}

/* Any other body: the head as al_sigv4_resign() writes it, no filter. */
static void test_plain_body(void **state)
{
	struct al_sigv4_chunked *c = (struct al_sigv4_chunked *)&c;
	char want[512];

	vanilla(VANILLA_AUTH);
	assert_true(resign(&suite_key, &real_key) > 0);
	strcpy(want, out);
	assert_int_equal(
	    al_sigv4_resign_chunked(&req, &suite_key, &real_key, out, sizeof(out), &c, &err),
	    (int)strlen(want));
	assert_null(c);
	assert_string_equal(out, want);

	/* Refusals are al_sigv4_resign()'s, and *ret stays as it was. */
	c = (struct al_sigv4_chunked *)&c;
	fields[1].value = "20150830T123601Z";
	assert_int_equal(
	    al_sigv4_resign_chunked(&req, &suite_key, &real_key, out, sizeof(out), &c, &err),
	    -EACCES);
	assert_ptr_equal(c, (struct al_sigv4_chunked *)&c);

	example(false, plain_sigs);
	assert_int_equal(al_sigv4_resign_chunked(&req, &doc_key, &real_key, out, 100, &c, &err),
			 -ENOSPC);
	assert_ptr_equal(c, (struct al_sigv4_chunked *)&c);
	al_sigv4_chunked_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_published_example),
	    cmocka_unit_test(test_published_example_with_trailer),
	    cmocka_unit_test(test_real_key),
	    cmocka_unit_test(test_unverified),
	    cmocka_unit_test(test_bodies_refused),
	    cmocka_unit_test(test_trailer_bound),
	    cmocka_unit_test(test_end_of_body),
	    cmocka_unit_test(test_plain_body),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
