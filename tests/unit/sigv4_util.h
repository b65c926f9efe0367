/* Fixtures of the SigV4 unit tests (test_sigv4.c, test_sigv4_query.c,
 * test_sigv4_chunked.c): keys, one request built field by field, the
 * calls and what their results must be. Include after unit.h.
 *
 * The published vectors use AWS's SigV4 test suite key (AKIDEXAMPLE,
 * 20150830T123600Z, us-east-1, service "service") and the S3
 * documentation's (AKIAIOSFODNN7EXAMPLE, 20130524T000000Z). Expected
 * values with another key ("real") were computed with Debian's
 * python3-botocore 1.29 (SigV4Auth, S3SigV4Auth, S3SigV4QueryAuth) at the
 * same instant. */
#pragma once

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/cleanup.h"
#include "cred/sigv4.h"

#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define SUITE_SCOPE  "AKIDEXAMPLE/20150830/us-east-1/service/aws4_request"
#define REAL_SCOPE   "AKIAREALKEY000000001/20150830/us-east-1/service/aws4_request"
#define VANILLA_SIG  "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"
#define VANILLA_AUTH                                                                               \
	"AWS4-HMAC-SHA256 Credential=" SUITE_SCOPE ", SignedHeaders=host;x-amz-date, "             \
	"Signature=" VANILLA_SIG

static const struct al_sigv4_creds __attribute__((unused))
suite_key = {"AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", NULL};
static const struct al_sigv4_creds __attribute__((unused))
doc_key = {"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", NULL};
static const struct al_sigv4_creds __attribute__((unused))
real_key = {"AKIAREALKEY000000001", "realSecretKey/With+Slashes0123456789abcd", NULL};

static struct al_sigv4_header fields[AL_SIGV4_HEADERS_MAX + 2];
static struct al_sigv4_request req;
static char out[AL_SIGV4_TARGET_MAX + 4096];
static struct al_error err;

static inline void start(const char *method, const char *target)
{
	memset(&req, 0, sizeof(req));
	req.method = method;
	req.method_len = strlen(method);
	req.target = target;
	req.target_len = strlen(target);
	req.headers = fields;
}

static inline void field(const char *name, const char *value)
{
	fields[req.n_headers++] =
	    (struct al_sigv4_header){name, strlen(name), value, strlen(value)};
}

/* The test suite's get-vanilla, with auth as its Authorization value. */
static inline void vanilla(const char *auth)
{
	start("GET", "/");
	field("Host", "example.amazonaws.com");
	field("X-Amz-Date", "20150830T123600Z");
	field("Authorization", auth);
	req.payload_hash = EMPTY_SHA256;
}

static inline int resign(const struct al_sigv4_creds *fake, const struct al_sigv4_creds *real)
{
	memset(out, 'Z', sizeof(out));
	memset(&err, 0, sizeof(err));
	return al_sigv4_resign(&req, fake, real, out, sizeof(out), &err);
}

static inline int resign_query(const struct al_sigv4_creds *fake, const struct al_sigv4_creds *real)
{
	memset(out, 'Z', sizeof(out));
	memset(&err, 0, sizeof(err));
	return al_sigv4_resign_query(&req, fake, real, out, sizeof(out), &err);
}

static inline void expect_out(int r, const char *want)
{
	if (r < 0)
		fail_msg("refused (%d): %s", r, err.msg);
	assert_string_equal(out, want);
	assert_int_equal(r, strlen(want));
}

/* Refused with code and a message containing what; out untouched. */
static inline void expect_refused(int r, int code, const char *what)
{
	if (r >= 0)
		fail_msg("accepted (\"%s\"), expected \"%s\"", out, what);
	if (r != -code)
		fail_msg("gave %d (%s), expected %d (%s)", r, err.msg, -code, what);
	assert_contains(err.msg, what);
	assert_int_equal(out[0], 'Z');
}

static inline void expect_auth_refused(const char *auth, int code, const char *what)
{
	vanilla(auth);
	expect_refused(resign(&suite_key, &real_key), code, what);
}

static const struct al_sigv4_creds __attribute__((unused)) fake_tok = {
    "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "FAKE-session-token-0123456789"};
static const struct al_sigv4_creds __attribute__((unused)) real_tok = {
    "AKIAREALKEY000000001", "realSecretKey/With+Slashes0123456789abcd", "REAL/session+token=="};

/* The parts of an Authorization value. */
#define CRED "Credential=" SUITE_SCOPE
#define SH   "SignedHeaders=host;x-amz-date"
#define SIG  "Signature=" VANILLA_SIG
#define ALG  "AWS4-HMAC-SHA256 "

#define DOC_PRESIGNED_QUERY(akid, sig)                                                             \
	"/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=" akid                        \
	"%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&"                 \
	"X-Amz-Expires=86400&X-Amz-SignedHeaders=host&X-Amz-Signature=" sig
