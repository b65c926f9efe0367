/* cred/sigv4.h, presigned URLs (al_sigv4_resign_query) and
 * al_sigv4_uses_key(). The vectors are described in sigv4_util.h. */
#include "unit.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "sigv4_util.h"

static void test_s3_presigned_example(void **state)
{
	start("GET",
	      DOC_PRESIGNED_QUERY("AKIAIOSFODNN7EXAMPLE",
				  "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f60"
				  "4d404"));
	field("Host", "examplebucket.s3.amazonaws.com");
	expect_out(resign_query(&doc_key, &doc_key), req.target);
	expect_out(resign_query(&doc_key, &real_key),
		   DOC_PRESIGNED_QUERY("AKIAREALKEY000000001",
				       "6d2823a4e82ef9c6f5bbcc9e3bb4239cf908c47401579aed10cfed2123d"
				       "f11d3"));
}

#define TOKEN_PRESIGNED(akid, token, sig)                                                          \
	"/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=" akid                               \
	"%2F20150830%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20150830T123600Z&"                 \
	"X-Amz-Expires=300&X-Amz-SignedHeaders=host&X-Amz-Security-Token=" token                   \
	"&X-Amz-Signature=" sig
#define FAKE_TOKEN_SIG "1714dcb36b60f14a3ea3f20a152dbce858582544485b4f5731dafcbd6045f674"

static void test_session_token_presigned(void **state)
{
	start("GET",
	      TOKEN_PRESIGNED("AKIDEXAMPLE", "FAKE-session-token-0123456789", FAKE_TOKEN_SIG));
	field("Host", "bucket.s3.amazonaws.com");
	/* Here the target is as sent: the real token goes in encoded. */
	expect_out(
	    resign_query(&fake_tok, &real_tok),
	    TOKEN_PRESIGNED("AKIAREALKEY000000001", "REAL%2Fsession%2Btoken%3D%3D",
			    "619c0b35f058b34937d4aa5f6e04f9fd94e996958f5d262ac04f67a647d22c3f"));
	start("GET",
	      TOKEN_PRESIGNED("AKIDEXAMPLE", "REAL%2Fsession%2Btoken%3D%3D", FAKE_TOKEN_SIG));
	field("Host", "bucket.s3.amazonaws.com");
	expect_refused(resign_query(&fake_tok, &real_tok), EACCES,
		       "X-Amz-Security-Token is not the placeholder's");
	start("GET",
	      TOKEN_PRESIGNED("AKIDEXAMPLE", "FAKE-session-token-0123456789", FAKE_TOKEN_SIG));
	field("Host", "bucket.s3.amazonaws.com");
	expect_refused(resign_query(&suite_key, &real_key), EINVAL, "have no session token");
	start("GET", DOC_PRESIGNED_QUERY("AKIDEXAMPLE", FAKE_TOKEN_SIG));
	field("Host", "bucket.s3.amazonaws.com");
	expect_refused(resign_query(&fake_tok, &real_tok), EINVAL, "no X-Amz-Security-Token");
}

/* ---- presigned queries, refused ------------------------------------------- */

#define Q_ALG	  "X-Amz-Algorithm=AWS4-HMAC-SHA256"
#define Q_CRED	  "X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request"
#define Q_DATE	  "X-Amz-Date=20130524T000000Z"
#define Q_EXPIRES "X-Amz-Expires=86400"
#define Q_SH	  "X-Amz-SignedHeaders=host"
#define Q_SIG	  "X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"

static void expect_query_refused(const char *target, int code, const char *what)
{
	start("GET", target);
	field("Host", "examplebucket.s3.amazonaws.com");
	expect_refused(resign_query(&doc_key, &real_key), code, what);
}

static void test_presigned_refused(void **state)
{
	static const struct {
		const char *target;
		int code;
		const char *what;
	} v[] = {
	    {"/test.txt?" Q_CRED "&" Q_DATE "&" Q_EXPIRES "&" Q_SH "&" Q_SIG, EINVAL,
	     "query: no X-Amz-Algorithm"},
	    {"/test.txt?" Q_ALG "&" Q_DATE "&" Q_EXPIRES "&" Q_SH "&" Q_SIG, EINVAL,
	     "query: no X-Amz-Credential"},
	    {"/test.txt?" Q_ALG "&" Q_CRED "&" Q_EXPIRES "&" Q_SH "&" Q_SIG, EINVAL,
	     "query: no X-Amz-Date"},
	    {"/test.txt?" Q_ALG "&" Q_CRED "&" Q_DATE "&" Q_SH "&" Q_SIG, EINVAL,
	     "query: no X-Amz-Expires"},
	    {"/test.txt?" Q_ALG "&" Q_CRED "&" Q_DATE "&" Q_EXPIRES "&" Q_SIG, EINVAL,
	     "query: no X-Amz-SignedHeaders"},
	    {"/test.txt?" Q_ALG "&" Q_CRED "&" Q_DATE "&" Q_EXPIRES "&" Q_SH, EINVAL,
	     "query: no X-Amz-Signature"},
	    {"/test.txt?" Q_ALG "&" Q_CRED "&" Q_DATE "&" Q_EXPIRES "&" Q_SH "&" Q_SIG "&" Q_SIG,
	     EINVAL, "query: X-Amz-Signature twice"},
	    {"/test.txt?" Q_ALG "&" Q_CRED "&" Q_CRED "&" Q_DATE "&" Q_EXPIRES "&" Q_SH "&" Q_SIG,
	     EINVAL, "query: X-Amz-Credential twice"},
	    {"/test.txt?X-Amz-Algorithm=AWS4-ECDSA-P256-SHA256&" Q_CRED "&" Q_DATE "&" Q_EXPIRES
	     "&" Q_SH "&" Q_SIG,
	     ENOTSUP, "SigV4a"},
	    {"/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA1&" Q_CRED "&" Q_DATE "&" Q_EXPIRES "&" Q_SH
	     "&" Q_SIG,
	     EINVAL, "X-Amz-Algorithm: not AWS4-HMAC-SHA256"},
	    {"/test.txt?" Q_ALG "&X-Amz-Credential=AKIAOTHER%2F20130524%2Fus-east-1%2Fs3%2Faws4_"
	     "request&" Q_DATE "&" Q_EXPIRES "&" Q_SH "&" Q_SIG,
	     EACCES, "access key id \"AKIAOTHER\" is not the placeholder's"},
	    {"/test.txt?" Q_ALG "&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2G20130524&" Q_DATE
	     "&" Q_EXPIRES "&" Q_SH "&" Q_SIG,
	     EINVAL, "X-Amz-Credential: malformed percent-encoding"},
	    {"/test.txt?" Q_ALG "&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2&" Q_DATE "&" Q_EXPIRES
	     "&" Q_SH "&" Q_SIG,
	     EINVAL, "X-Amz-Credential: malformed percent-encoding"},
	    {"/test.txt?" Q_ALG "&" Q_CRED "&X-Amz-Date=20130525T000000Z&" Q_EXPIRES "&" Q_SH
	     "&" Q_SIG,
	     EINVAL, "date 20130524 is not X-Amz-Date's day (20130525)"},
	    {"/test.txt?" Q_ALG "&" Q_CRED "&X-Amz-Date=20130524&" Q_EXPIRES "&" Q_SH "&" Q_SIG,
	     EINVAL, "is not YYYYMMDDTHHMMSSZ"},
	    {"/test.txt?" Q_ALG "&" Q_CRED "&" Q_DATE "&X-Amz-Expires=0&" Q_SH "&" Q_SIG, EINVAL,
	     "X-Amz-Expires: not a number of seconds"},
	    {"/test.txt?" Q_ALG "&" Q_CRED "&" Q_DATE "&X-Amz-Expires=604801&" Q_SH "&" Q_SIG,
	     EINVAL, "X-Amz-Expires: expected 1 to 604800 seconds"},
	    {"/test.txt?" Q_ALG "&" Q_CRED "&" Q_DATE "&X-Amz-Expires=060&" Q_SH "&" Q_SIG, EINVAL,
	     "X-Amz-Expires: not a number of seconds"},
	    {"/test.txt?" Q_ALG "&" Q_CRED "&" Q_DATE "&X-Amz-Expires=1e3&" Q_SH "&" Q_SIG, EINVAL,
	     "X-Amz-Expires: not a number of seconds"},
	    {"/test.txt?" Q_ALG "&" Q_CRED "&" Q_DATE "&X-Amz-Expires=99999999999999999&" Q_SH
	     "&" Q_SIG,
	     EINVAL, "X-Amz-Expires: out of range"},
	    {"/test.txt?" Q_ALG "&" Q_CRED "&" Q_DATE "&" Q_EXPIRES
	     "&X-Amz-SignedHeaders=host%3Brange&" Q_SIG,
	     EINVAL, "\"range\" is not a field of the request"},
	    {"/test.txt?" Q_ALG "&" Q_CRED "&" Q_DATE "&" Q_EXPIRES
	     "&X-Amz-SignedHeaders=x-amz-date&" Q_SIG,
	     EINVAL, "not a field of the request"},
	    {"/test.txt?" Q_ALG "&" Q_CRED "&" Q_DATE "&" Q_EXPIRES "&" Q_SH
	     "&X-Amz-Signature=AEEED9BBCCD4D02EE5C0109B86D86835F995330DA4C265957D157751F604D404",
	     EINVAL, "X-Amz-Signature: expected 64 lowercase hex digits"},
	    {"/test.txt?" Q_ALG "&" Q_CRED "&" Q_DATE "&" Q_EXPIRES "&" Q_SH
	     "&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d405",
	     EACCES, "does not verify with the placeholder key"},
	    {"/test2.txt?" Q_ALG "&" Q_CRED "&" Q_DATE "&" Q_EXPIRES "&" Q_SH "&" Q_SIG, EACCES,
	     "does not verify with the placeholder key"},
	    {"/test.txt", EINVAL, "query: no X-Amz-Algorithm"},
	};

	for (size_t i = 0; i < AL_ARRAY_SIZE(v); i++)
		expect_query_refused(v[i].target, v[i].code, v[i].what);

	start("GET",
	      DOC_PRESIGNED_QUERY("AKIAIOSFODNN7EXAMPLE",
				  "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f60"
				  "4d404"));
	field("Host", "examplebucket.s3.amazonaws.com");
	field("Authorization", "Basic dXNlcjpwYXNz");
	expect_refused(resign_query(&doc_key, &real_key), EINVAL,
		       "both an Authorization field and a presigned query");
	fields[1] = (struct al_sigv4_header){"X-Amz-Security-Token", 20, "t", 1};
	expect_refused(resign_query(&doc_key, &real_key), EINVAL,
		       "an X-Amz-Security-Token field with a presigned query");
	req.n_headers = 1;
	field("X-Amz-Content-SHA256", "STREAMING-UNSIGNED-PAYLOAD-TRAILER");
	expect_refused(resign_query(&doc_key, &real_key), EINVAL, "in a presigned request");
}

/* ---- al_sigv4_uses_key() ----------------------------------------------------- */

static void test_uses_key(void **state)
{
	vanilla(VANILLA_AUTH);
	assert_true(al_sigv4_uses_key(&req, "AKIDEXAMPLE"));
	assert_false(al_sigv4_uses_key(&req, "AKIDEXAMPL"));
	assert_false(al_sigv4_uses_key(&req, "AKIDEXAMPLEX"));
	assert_false(al_sigv4_uses_key(&req, ""));
	assert_false(al_sigv4_uses_key(&req, NULL));
	fields[2].name = "X-Authorization";
	fields[2].name_len = strlen(fields[2].name);
	assert_false(al_sigv4_uses_key(&req, "AKIDEXAMPLE"));

	/* SigV4a names the key too: al_sigv4_resign() then says why not. */
	vanilla("AWS4-ECDSA-P256-SHA256 Credential=AKIDEXAMPLE/20150830/service/aws4_request, " SH
		", " SIG);
	assert_true(al_sigv4_uses_key(&req, "AKIDEXAMPLE"));
	vanilla("AWS AKIDEXAMPLE:frJIUN8DYpKDtOLCwo//yllqDzg=");
	assert_false(al_sigv4_uses_key(&req, "AKIDEXAMPLE"));

	start("GET", DOC_PRESIGNED_QUERY("AKIAIOSFODNN7EXAMPLE", "00"));
	assert_true(al_sigv4_uses_key(&req, "AKIAIOSFODNN7EXAMPLE"));
	assert_false(al_sigv4_uses_key(&req, "AKIAIOSFODNN7"));
	start("GET", "/k?X-Amz-Credential=AKIAIOSFODNN7EXAMPLE/20130524/x");
	assert_true(al_sigv4_uses_key(&req, "AKIAIOSFODNN7EXAMPLE"));
	start("GET", "/k?X-Amz-Credential=%41KIAIOSFODNN7EXAMPLE%2f2013");
	assert_true(al_sigv4_uses_key(&req, "AKIAIOSFODNN7EXAMPLE"));
	start("GET", "/k?X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2");
	assert_false(al_sigv4_uses_key(&req, "AKIAIOSFODNN7EXAMPLE"));
	start("GET", "/k?x-amz-credential=AKIAIOSFODNN7EXAMPLE%2F2013");
	assert_false(al_sigv4_uses_key(&req, "AKIAIOSFODNN7EXAMPLE"));
	start("GET", "/k?a=AKIAIOSFODNN7EXAMPLE%2F2013");
	assert_false(al_sigv4_uses_key(&req, "AKIAIOSFODNN7EXAMPLE"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_s3_presigned_example),
	    cmocka_unit_test(test_session_token_presigned),
	    cmocka_unit_test(test_presigned_refused),
	    cmocka_unit_test(test_uses_key),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
