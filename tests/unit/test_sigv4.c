/* cred/sigv4.h, header auth: re-signing the Authorization field, the
 * canonical request, and refusing malformed requests. The vectors are
 * described in sigv4_util.h; tests/e2e/run_sigv4.py compares many more
 * requests with botocore. */
#include "unit.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>

#include "cred/sigv4-internal.h"
#include "sigv4_util.h"

/* ---- published vectors ------------------------------------------------- */

static void test_suite_vectors_resign_to_themselves(void **state)
{
	static const struct {
		const char *method, *target, *sig;
	} v[] = {
	    {"GET", "/", VANILLA_SIG},
	    {"POST", "/", "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"},
	    {"GET", "/?Param2=value2&Param1=value1",
	     "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"},
	};
	char auth[512];

	for (size_t i = 0; i < AL_ARRAY_SIZE(v); i++) {
		snprintf(auth, sizeof(auth),
			 "AWS4-HMAC-SHA256 Credential=" SUITE_SCOPE
			 ", SignedHeaders=host;x-amz-date, Signature=%s",
			 v[i].sig);
		vanilla(auth);
		req.method = v[i].method;
		req.method_len = strlen(v[i].method);
		req.target = v[i].target;
		req.target_len = strlen(v[i].target);
		expect_out(resign(&suite_key, &suite_key), auth);
	}
}

static void test_suite_vectors_with_the_real_key(void **state)
{
	vanilla(VANILLA_AUTH);
	expect_out(resign(&suite_key, &real_key),
		   "AWS4-HMAC-SHA256 Credential=" REAL_SCOPE ", SignedHeaders=host;x-amz-date, "
		   "Signature=eb6d6724a0cf4afc66400cdd2bd6bdd3583b42a0bcc2aa710aaef32c9588b0aa");
	req.method = "POST";
	req.method_len = 4;
	fields[2].value = "AWS4-HMAC-SHA256 Credential=" SUITE_SCOPE ", SignedHeaders=host;"
			  "x-amz-date, Signature="
			  "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b";
	fields[2].value_len = strlen(fields[2].value);
	expect_out(resign(&suite_key, &real_key),
		   "AWS4-HMAC-SHA256 Credential=" REAL_SCOPE ", SignedHeaders=host;x-amz-date, "
		   "Signature=75d220f02a60f7c813c12cf0cdd1c896852cd4dbb8caae4d39152d09e2a3fbc9");
}

static void test_s3_get_object_example(void **state)
{
	start("GET", "/test.txt");
	field("Host", "examplebucket.s3.amazonaws.com");
	field("Range", "bytes=0-9");
	field("x-amz-content-sha256", EMPTY_SHA256);
	field("x-amz-date", "20130524T000000Z");
	field("Authorization", "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/"
			       "us-east-1/s3/aws4_request,SignedHeaders=host;range;"
			       "x-amz-content-sha256;x-amz-date,Signature=f0e8bdb87c964420e857bd35"
			       "b5d6ed310bd44f0170aba48dd91039c6036bdb41");
	/* The documentation's own spelling has no spaces after the commas;
	 * what is written back is botocore's. */
	expect_out(resign(&doc_key, &doc_key),
		   "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
		   "aws4_request, SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
		   "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
	expect_out(resign(&doc_key, &real_key),
		   "AWS4-HMAC-SHA256 Credential=AKIAREALKEY000000001/20130524/us-east-1/s3/"
		   "aws4_request, SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
		   "Signature=f1863c1045a04deb722be6457c984b86f45b7f2763cff2174c50f862a3ef6b5a");
}

/* ---- session tokens (vectors from botocore) ------------------------------ */

static void s3_token_request(const char *token)
{
	start("GET", "/k");
	field("Host", "bucket.s3.amazonaws.com");
	field("X-Amz-Date", "20150830T123600Z");
	field("X-Amz-Security-Token", token);
	field("X-Amz-Content-SHA256", EMPTY_SHA256);
	field("Authorization",
	      "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/s3/aws4_request, "
	      "SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token, "
	      "Signature=f533f35c5f2eff466b140b684f769ddfe14c8429f1b4cb4f9e6b7bd618250215");
}

static void test_session_token_header(void **state)
{
	/* The caller has put the real token in the field (sigv4.h). */
	s3_token_request("REAL/session+token==");
	expect_out(resign(&fake_tok, &real_tok),
		   "AWS4-HMAC-SHA256 Credential=AKIAREALKEY000000001/20150830/us-east-1/s3/"
		   "aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date;"
		   "x-amz-security-token, Signature=8b6f17d6fbfaee97036c4e248b7a25e44f6b7a390f6c"
		   "67167ade5e5fe61e8960");
	s3_token_request("FAKE-session-token-0123456789");
	expect_refused(resign(&fake_tok, &real_tok), EINVAL, "still carries the placeholder");
	s3_token_request("some-other-token");
	expect_refused(resign(&fake_tok, &real_tok), EACCES, "not the placeholder's");
	s3_token_request("REAL/session+token==");
	field("X-Amz-Security-Token", "REAL/session+token==");
	expect_refused(resign(&fake_tok, &real_tok), EINVAL, "more than one x-amz-security-token");
	/* Without a token in the credentials the field has no business here. */
	s3_token_request("REAL/session+token==");
	expect_refused(resign(&suite_key, &real_key), EINVAL, "have no session token");
	/* One side with a token, the other without. */
	expect_refused(resign(&fake_tok, &real_key), EINVAL, "both have a session token");
}

/* ---- canonical requests (white box: sigv4-internal.h) -------------------- */

static void expect_canonical(const char *method, const char *target, const char *service,
			     const char *signed_headers, const char *want)
{
	struct sv4_auth a = {0};
	struct sv4_canon c = {.r = &req, .a = &a, .payload = EMPTY_SHA256};
	unsigned char got[32], md[32];
	const char *q;

	start(method, target);
	field("Host", "h.example");
	field("X-Amz-Date", "20150830T123600Z");
	field("My-Header", "  a \t  b   c ");
	field("My-Header", "d");
	strcpy(a.scope.service, service);
	strcpy(a.signed_headers, signed_headers);
	a.signed_len = strlen(signed_headers);
	q = strchr(target, '?');
	c.query = q ? q + 1 : "";
	c.query_len = strlen(c.query);
	assert_int_equal(sv4_canonical_hash(&c, got, &err), 0);
	SHA256((const unsigned char *)want, strlen(want), md);
	if (memcmp(got, md, 32) != 0)
		fail_msg("%s %s (%s): canonical request is not\n%s", method, target, service, want);
}

static void test_canonical_paths(void **state)
{
	/* Dot segments and empty segments go; what remains is encoded once
	 * more ('%' too). */
	expect_canonical("GET", "/a/./b//../c%20d/", "service", "host",
			 "GET\n/a/c%2520d/\n\nhost:h.example\n\nhost\n" EMPTY_SHA256);
	expect_canonical("GET", "/..", "service", "host",
			 "GET\n/\n\nhost:h.example\n\nhost\n" EMPTY_SHA256);
	expect_canonical("GET", "/a/b/..", "service", "host",
			 "GET\n/a\n\nhost:h.example\n\nhost\n" EMPTY_SHA256);
	expect_canonical("GET", "//", "service", "host",
			 "GET\n/\n\nhost:h.example\n\nhost\n" EMPTY_SHA256);
	expect_canonical("GET", "/x/a:b=c~d", "service", "host",
			 "GET\n/x/a%3Ab%3Dc~d\n\nhost:h.example\n\nhost\n" EMPTY_SHA256);
	/* S3 keeps the path as sent. */
	expect_canonical("GET", "/a/./b//../c%20d/", "s3", "host",
			 "GET\n/a/./b//../c%20d/\n\nhost:h.example\n\nhost\n" EMPTY_SHA256);
}

static void test_canonical_query_and_headers(void **state)
{
	expect_canonical("GET", "/?b=2&a=1&a=&a-b=3&c", "service", "host;my-header;x-amz-date",
			 "GET\n/\na=&a=1&a-b=3&b=2&c=\nhost:h.example\nmy-header:a b c,d\n"
			 "x-amz-date:20150830T123600Z\n\nhost;my-header;x-amz-date\n" EMPTY_SHA256);
	expect_canonical("GET", "/?", "service", "host",
			 "GET\n/\n\nhost:h.example\n\nhost\n" EMPTY_SHA256);
}

static void test_path_and_query_vector(void **state)
{
	start("GET", "/a/./b//../c%20d/?b=2&a=1&a=");
	field("Host", "example.amazonaws.com");
	field("My-Header", "x   y");
	field("X-Amz-Date", "20150830T123600Z");
	field("Authorization",
	      "AWS4-HMAC-SHA256 Credential=" SUITE_SCOPE ", SignedHeaders=host;my-header;"
	      "x-amz-date, "
	      "Signature=287026295831c92bda7b363c7d79404ea6265d24ed502842f49e803cbf31c93b");
	req.payload_hash = EMPTY_SHA256;
	expect_out(resign(&suite_key, &real_key),
		   "AWS4-HMAC-SHA256 Credential=" REAL_SCOPE ", SignedHeaders=host;my-header;"
		   "x-amz-date, Signature=b89f36c947fcf54a9662535f4725865d3dd4607a2142995a31e709f66"
		   "1f5da64");
}

/* ---- the Authorization field, refused ------------------------------------ */

static void test_auth_syntax(void **state)
{
	/* The parts in another order, without spaces: the same request. */
	vanilla(ALG SIG "," SH "," CRED);
	assert_true(resign(&suite_key, &real_key) > 0);

	expect_auth_refused(ALG SH ", " SIG, EINVAL, "Authorization: no Credential");
	expect_auth_refused(ALG CRED ", " SIG, EINVAL, "Authorization: no SignedHeaders");
	expect_auth_refused(ALG CRED ", " SH, EINVAL, "Authorization: no Signature");
	expect_auth_refused(ALG CRED ", " SH ", " SIG ", " CRED, EINVAL,
			    "Authorization: Credential twice");
	expect_auth_refused(ALG CRED ", " SH ", " SIG ", " SIG, EINVAL,
			    "Authorization: Signature twice");
	expect_auth_refused(ALG CRED ", " SH ", " SIG ", Foo=bar", EINVAL,
			    "Authorization: unknown part \"Foo\"");
	expect_auth_refused(ALG CRED ", " SH ", " SIG ",", EINVAL, "Authorization: empty part");
	expect_auth_refused(ALG CRED ",, " SH ", " SIG, EINVAL, "Authorization: empty part");
	expect_auth_refused(ALG CRED ", " SH ", Signature = " VANILLA_SIG, EINVAL,
			    "is not NAME=VALUE");
	expect_auth_refused(ALG CRED ", " SH ", Signature", EINVAL, "is not NAME=VALUE");
	expect_auth_refused("AWS4-HMAC-SHA256  " CRED ", " SH ", " SIG, EINVAL,
			    "is not NAME=VALUE");
	expect_auth_refused("AWS4-HMAC-SHA1 " CRED ", " SH ", " SIG, EINVAL,
			    "is not AWS4-HMAC-SHA256");
	expect_auth_refused("AWS AKIDEXAMPLE:frJIUN8DYpKDtOLCwo//yllqDzg=", EINVAL,
			    "is not AWS4-HMAC-SHA256");
	expect_auth_refused("", EINVAL, "is not AWS4-HMAC-SHA256");
	expect_auth_refused("AWS4-ECDSA-P256-SHA256 " CRED ", " SH ", " SIG, ENOTSUP, "SigV4a");
}

static void test_auth_oversized(void **state)
{
	static char big[AL_SIGV4_AUTH_MAX + 64];

	snprintf(big, sizeof(big), ALG CRED ", " SH ", " SIG ", Foo=");
	memset(big + strlen(big), 'x', sizeof(big) - strlen(big) - 1);
	big[sizeof(big) - 1] = '\0';
	expect_auth_refused(big, E2BIG, "Authorization: longer than 4096 bytes");
}

static void test_auth_credential(void **state)
{
	expect_auth_refused(
	    ALG "Credential=AKIAOTHERKEY/20150830/us-east-1/service/aws4_request, " SH ", " SIG,
	    EACCES, "access key id \"AKIAOTHERKEY\" is not the placeholder's");
	expect_auth_refused(ALG "Credential=AKIDEXAMPLE/20150830/us-east-1/service, " SH ", " SIG,
			    EINVAL, "expected AKID/DATE/REGION/SERVICE/aws4_request");
	expect_auth_refused(
	    ALG "Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request/x, " SH ", " SIG,
	    EINVAL, "more than 5 parts");
	expect_auth_refused(
	    ALG "Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws3_request, " SH ", " SIG,
	    EINVAL, "expected AKID/DATE/REGION/SERVICE/aws4_request");
	expect_auth_refused(
	    ALG "Credential=AKID\"EXAMPLE/20150830/us-east-1/service/aws4_request, " SH ", " SIG,
	    EINVAL, "access key id \"AKID\"EXAMPLE\" is malformed");
	expect_auth_refused(
	    ALG "Credential=AKIDEXAMPLE/20150230/us-east-1/service/aws4_request, " SH ", " SIG,
	    EINVAL, "date \"20150230\" is not YYYYMMDD");
	expect_auth_refused(
	    ALG "Credential=AKIDEXAMPLE/20150831/us-east-1/service/aws4_request, " SH ", " SIG,
	    EINVAL, "date 20150831 is not X-Amz-Date's day (20150830)");
	expect_auth_refused(ALG "Credential=AKIDEXAMPLE/20150830/us east/service/aws4_request, " SH
				", " SIG,
			    EINVAL, "is not NAME=VALUE");
	expect_auth_refused(ALG "Credential=AKIDEXAMPLE/20150830/us~east/service/aws4_request, " SH
				", " SIG,
			    EINVAL, "region \"us~east\"");
	expect_auth_refused(ALG "Credential=AKIDEXAMPLE/20150830/us-east-1//aws4_request, " SH
				", " SIG,
			    EINVAL, "service \"\"");
}

static void test_auth_signed_headers(void **state)
{
	expect_auth_refused(ALG CRED ", SignedHeaders=x-amz-date;host, " SIG, EINVAL,
			    "not sorted (\"x-amz-date\" before \"host\")");
	expect_auth_refused(ALG CRED ", SignedHeaders=host;host;x-amz-date, " SIG, EINVAL,
			    "\"host\" twice");
	expect_auth_refused(ALG CRED ", SignedHeaders=Host;x-amz-date, " SIG, EINVAL,
			    "\"Host\" is not a lowercase field name");
	expect_auth_refused(ALG CRED ", SignedHeaders=host;range;x-amz-date, " SIG, EINVAL,
			    "\"range\" is not a field of the request");
	expect_auth_refused(ALG CRED ", SignedHeaders=x-amz-date, " SIG, EINVAL,
			    "host is not signed");
	expect_auth_refused(ALG CRED ", SignedHeaders=host, " SIG, EINVAL,
			    "x-amz-date is not signed");
	expect_auth_refused(ALG CRED ", SignedHeaders=authorization;host;x-amz-date, " SIG, EINVAL,
			    "authorization cannot be signed");
	expect_auth_refused(ALG CRED ", SignedHeaders=host;;x-amz-date, " SIG, EINVAL,
			    "SignedHeaders: empty name");
	expect_auth_refused(ALG CRED ", SignedHeaders=, " SIG, EINVAL, "SignedHeaders: empty name");
}

static void test_auth_signature(void **state)
{
	expect_auth_refused(ALG CRED ", " SH
				     ", Signature=5FA00FA31553B73EBF1942676E86291E8372FF2A2260"
				     "956D9B8AAE1D763FBF31",
			    EINVAL, "Signature: expected 64 lowercase hex digits");
	expect_auth_refused(ALG CRED ", " SH ", Signature=5fa0", EINVAL,
			    "Signature: expected 64 lowercase hex digits");
	expect_auth_refused(ALG CRED ", " SH ", Signature=" VANILLA_SIG "00", EINVAL,
			    "Signature: expected 64 lowercase hex digits");
	expect_auth_refused(
	    ALG CRED ", " SH
		     ", Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf32",
	    EACCES, "does not verify with the placeholder key");
}

static void test_request_fields(void **state)
{
	vanilla(VANILLA_AUTH);
	field("Authorization", VANILLA_AUTH);
	expect_refused(resign(&suite_key, &real_key), EINVAL, "more than one authorization field");

	start("GET", "/");
	field("Host", "example.amazonaws.com");
	field("X-Amz-Date", "20150830T123600Z");
	req.payload_hash = EMPTY_SHA256;
	expect_refused(resign(&suite_key, &real_key), EINVAL, "no Authorization field");

	vanilla(VANILLA_AUTH);
	fields[1].name = "Date";
	fields[1].name_len = 4;
	fields[1].value = "Sun, 30 Aug 2015 12:36:00 GMT";
	fields[1].value_len = strlen(fields[1].value);
	expect_refused(resign(&suite_key, &real_key), ENOTSUP, "a Date field alone");
	fields[1].name = "X-Foo";
	fields[1].name_len = 5;
	expect_refused(resign(&suite_key, &real_key), EINVAL, "no X-Amz-Date field");

	vanilla(VANILLA_AUTH);
	field("x-amz-date", "20150830T123600Z");
	expect_refused(resign(&suite_key, &real_key), EINVAL, "more than one x-amz-date field");

	static const char *const bad_dates[] = {"20150830T123600",  "20150830 123600Z",
						"20150830T243600Z", "20150830T126000Z",
						"20151330T123600Z", "2015083OT123600Z"};
	for (size_t i = 0; i < AL_ARRAY_SIZE(bad_dates); i++) {
		vanilla(VANILLA_AUTH);
		fields[1].value = bad_dates[i];
		fields[1].value_len = strlen(bad_dates[i]);
		expect_refused(resign(&suite_key, &real_key), EINVAL, "is not YYYYMMDDTHHMMSSZ");
	}

	vanilla(VANILLA_AUTH);
	fields[0].value = "example.amazonaws.com\r\nX-Injected: 1";
	fields[0].value_len = strlen(fields[0].value);
	expect_refused(resign(&suite_key, &real_key), EINVAL,
		       "signed header host: control character");

	vanilla(VANILLA_AUTH);
	fields[0].name = "Ho st";
	fields[0].name_len = 5;
	expect_refused(resign(&suite_key, &real_key), EINVAL, "name is not a token");
}

static void test_request_target_and_method(void **state)
{
	static char long_target[AL_SIGV4_TARGET_MAX + 2];
	static char many[AL_SIGV4_PARAMS_MAX * 4 + 8];
	static const char *const bad[] = {"", "x/", "/a b", "/a\tb", "/a#frag", "/caf\xc3\xa9"};

	for (size_t i = 0; i < AL_ARRAY_SIZE(bad); i++) {
		vanilla(VANILLA_AUTH);
		req.target = bad[i];
		req.target_len = strlen(bad[i]);
		expect_refused(resign(&suite_key, &real_key), EINVAL, "request target");
	}
	vanilla(VANILLA_AUTH);
	memset(long_target, 'a', sizeof(long_target) - 1);
	long_target[0] = '/';
	req.target = long_target;
	req.target_len = strlen(long_target);
	expect_refused(resign(&suite_key, &real_key), E2BIG, "request target longer than 16384");

	/* Past 512 query parameters: refused before anything is sorted. */
	strcpy(many, "/?");
	for (int i = 0; i <= AL_SIGV4_PARAMS_MAX; i++)
		strcat(many, "a&");
	vanilla(VANILLA_AUTH);
	req.target = many;
	req.target_len = strlen(many);
	expect_refused(resign(&suite_key, &real_key), E2BIG, "more than 512 query parameters");

	vanilla(VANILLA_AUTH);
	req.method = "GE T";
	req.method_len = 4;
	expect_refused(resign(&suite_key, &real_key), EINVAL, "method: not a token");
	req.method_len = 0;
	expect_refused(resign(&suite_key, &real_key), EINVAL, "method: expected 1 to 32");

	vanilla(VANILLA_AUTH);
	req.target = "/?X-Amz-Signature=" VANILLA_SIG;
	req.target_len = strlen(req.target);
	expect_refused(resign(&suite_key, &real_key), EINVAL,
		       "both an Authorization field and a presigned query");

	vanilla(VANILLA_AUTH);
	req.n_headers = AL_SIGV4_HEADERS_MAX + 1;
	expect_refused(resign(&suite_key, &real_key), E2BIG, "more than 64 header fields");
}

static void test_payload(void **state)
{
	vanilla(VANILLA_AUTH);
	req.payload_hash = NULL;
	expect_refused(resign(&suite_key, &real_key), EINVAL,
		       "no x-amz-content-sha256 field: the body's SHA-256 is needed");
	req.payload_hash = "E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855";
	expect_refused(resign(&suite_key, &real_key), EINVAL,
		       "payload hash: expected 64 lowercase hex digits");

	static const struct {
		const char *value;
		int code;
		const char *what;
	} v[] = {
	    {"5e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b85", EINVAL,
	     "x-amz-content-sha256 is not the body's SHA-256"},
	    {"unsigned-payload", EINVAL, "unknown value \"unsigned-payload\""},
	    {"STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD", ENOTSUP,
	     "SigV4a chunks are not re-signed"},
	    {"STREAMING-AWS4-HMAC-SHA256-PAYLOAD", ENOTSUP, "the chunks are signed too"},
	    {"STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER", ENOTSUP, "the chunks are signed too"},
	    {"STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILERS", EINVAL, "unknown value"},
	    {"", EINVAL, "unknown value \"\""},
	};
	for (size_t i = 0; i < AL_ARRAY_SIZE(v); i++) {
		vanilla(VANILLA_AUTH);
		field("X-Amz-Content-SHA256", v[i].value);
		expect_refused(resign(&suite_key, &real_key), v[i].code, v[i].what);
	}
	vanilla(VANILLA_AUTH);
	field("X-Amz-Content-SHA256", EMPTY_SHA256);
	field("x-amz-content-sha256", EMPTY_SHA256);
	expect_refused(resign(&suite_key, &real_key), EINVAL,
		       "more than one x-amz-content-sha256 field");
	/* An unsigned x-amz-content-sha256 still names the payload (as
	 * botocore and S3 read it): the same hash signs the same. */
	vanilla(VANILLA_AUTH);
	field("X-Amz-Content-SHA256", EMPTY_SHA256);
	req.payload_hash = NULL;
	assert_true(resign(&suite_key, &real_key) > 0);
	vanilla(VANILLA_AUTH);
	field("X-Amz-Content-SHA256", "UNSIGNED-PAYLOAD");
	expect_refused(resign(&suite_key, &real_key), EACCES, "does not verify");
}

static void test_credentials_checked(void **state)
{
	struct al_sigv4_creds c = real_key;

	vanilla(VANILLA_AUTH);
	c.access_key_id = "AKIA/REAL";
	expect_refused(resign(&suite_key, &c), EINVAL, "real access key id");
	c.access_key_id = "";
	expect_refused(resign(&suite_key, &c), EINVAL, "real access key id");
	c = real_key;
	c.secret_access_key = NULL;
	expect_refused(resign(&suite_key, &c), EINVAL, "real secret access key missing");
	c.secret_access_key = "";
	expect_refused(resign(&suite_key, &c), EINVAL, "real secret access key");
	c = real_key;
	c.session_token = "tok\nen";
	expect_refused(resign(&fake_tok, &c), EINVAL, "real session token: control character");
	c = suite_key;
	c.access_key_id = NULL;
	expect_refused(resign(&c, &real_key), EINVAL, "placeholder access key id");
}

/* Without the placeholder's secret nothing is verified, and the real
 * signature is the same. */
static void test_without_verification(void **state)
{
	struct al_sigv4_creds fake = {"AKIDEXAMPLE", NULL, NULL};
	char want[512];

	vanilla(VANILLA_AUTH);
	assert_true(resign(&suite_key, &real_key) > 0);
	strcpy(want, out);
	vanilla(ALG CRED ", " SH ", Signature=" EMPTY_SHA256);
	expect_out(resign(&fake, &real_key), want);
}

static void test_output_space(void **state)
{
	char small[64];

	vanilla(VANILLA_AUTH);
	memset(small, 'Z', sizeof(small));
	assert_int_equal(al_sigv4_resign(&req, &suite_key, &real_key, small, sizeof(small), &err),
			 -ENOSPC);
	assert_contains(err.msg, "needs 196 bytes");
	assert_int_equal(small[0], 'Z');
	assert_int_equal(al_sigv4_resign(&req, &suite_key, &real_key, out, 196, &err), 195);
	assert_int_equal(al_sigv4_resign(&req, &suite_key, &real_key, out, 195, &err), -ENOSPC);

	start("GET",
	      DOC_PRESIGNED_QUERY("AKIAIOSFODNN7EXAMPLE",
				  "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f60"
				  "4d404"));
	field("Host", "examplebucket.s3.amazonaws.com");
	assert_int_equal(
	    al_sigv4_resign_query(&req, &doc_key, &real_key, out, req.target_len, &err), -ENOSPC);
	assert_int_equal(
	    al_sigv4_resign_query(&req, &doc_key, &real_key, out, req.target_len + 1, &err),
	    (int)req.target_len);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_suite_vectors_resign_to_themselves),
	    cmocka_unit_test(test_suite_vectors_with_the_real_key),
	    cmocka_unit_test(test_s3_get_object_example),
	    cmocka_unit_test(test_session_token_header),
	    cmocka_unit_test(test_canonical_paths),
	    cmocka_unit_test(test_canonical_query_and_headers),
	    cmocka_unit_test(test_path_and_query_vector),
	    cmocka_unit_test(test_auth_syntax),
	    cmocka_unit_test(test_auth_oversized),
	    cmocka_unit_test(test_auth_credential),
	    cmocka_unit_test(test_auth_signed_headers),
	    cmocka_unit_test(test_auth_signature),
	    cmocka_unit_test(test_request_fields),
	    cmocka_unit_test(test_request_target_and_method),
	    cmocka_unit_test(test_payload),
	    cmocka_unit_test(test_credentials_checked),
	    cmocka_unit_test(test_without_verification),
	    cmocka_unit_test(test_output_space),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
