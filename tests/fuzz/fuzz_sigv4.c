/* libFuzzer target: SigV4 re-signing (cred/sigv4.c), whose input is a
 * request from code inside the sandbox. An input is a flags byte, then
 * lines: the method, the target, then "Name: value" fields.
 *   flags 1: the body's hash is given; 2: the credentials have session
 *   tokens; 4: the placeholder's secret is given (the signature is
 *   verified).
 * Beyond the sanitizers, what is re-signed must itself verify: the output
 * put back into the request re-signs to itself with the real key as the
 * placeholder. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "cred/sigv4.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define OUT_MAX (AL_SIGV4_TARGET_MAX + 4 * AL_SIGV4_TOKEN_MAX)

static const struct al_sigv4_creds fake_key = {
    "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "FAKE-session-token-0123456789"};
static const struct al_sigv4_creds real_key = {
    "AKIAREALKEY000000001", "realSecretKey/With+Slashes0123456789abcd", "REAL/session+token=="};

static struct al_sigv4_header fields[AL_SIGV4_HEADERS_MAX + 1];

static size_t line_end(const char *s, size_t i, size_t n)
{
	while (i < n && s[i] != '\n')
		i++;
	return i;
}

/* Split the input into r; false when it has no method and target. */
static bool split(const char *s, size_t n, struct al_sigv4_request *r)
{
	size_t i = 1, e;

	memset(r, 0, sizeof(*r));
	r->headers = fields;
	e = line_end(s, i, n);
	r->method = s + i;
	r->method_len = e - i;
	if (e >= n)
		return false;
	i = e + 1;
	e = line_end(s, i, n);
	r->target = s + i;
	r->target_len = e - i;
	for (i = e + 1; i < n && r->n_headers <= AL_SIGV4_HEADERS_MAX; i = e + 1) {
		const char *colon;
		size_t v;

		e = line_end(s, i, n);
		colon = memchr(s + i, ':', e - i);
		if (!colon)
			continue;
		v = (size_t)(colon + 1 - s);
		while (v < e && s[v] == ' ')
			v++;
		fields[r->n_headers++] =
		    (struct al_sigv4_header){s + i, (size_t)(colon - (s + i)), s + v, e - v};
	}
	return true;
}

static void check_result(int r, const char *out, const struct al_error *err)
{
	if (r >= 0) {
		if (strlen(out) != (size_t)r)
			__builtin_trap();
		return;
	}
	if (err->msg[0] == '\0' || (r != -EINVAL && r != -EACCES && r != -ENOTSUP && r != -E2BIG &&
				    r != -ENOSPC && r != -EIO))
		__builtin_trap();
}

/* The new Authorization value in place of the old one verifies with the
 * real key and re-signs to itself. */
static void check_header_roundtrip(struct al_sigv4_request *r, const char *auth, size_t len,
				   const struct al_sigv4_creds *real)
{
	static char again[OUT_MAX];
	struct al_error err = {0};

	for (size_t i = 0; i < r->n_headers; i++)
		if (fields[i].name_len == 13 &&
		    strncasecmp(fields[i].name, "authorization", 13) == 0)
			fields[i] = (struct al_sigv4_header){fields[i].name, 13, auth, len};
	if (!al_sigv4_uses_key(r, real->access_key_id))
		__builtin_trap();
	if (al_sigv4_resign(r, real, real, again, sizeof(again), &err) != (int)len ||
	    memcmp(again, auth, len) != 0)
		__builtin_trap();
}

static void check_query_roundtrip(struct al_sigv4_request *r, const char *target, size_t len,
				  const struct al_sigv4_creds *real)
{
	static char again[OUT_MAX];
	struct al_error err = {0};

	r->target = target;
	r->target_len = len;
	if (!al_sigv4_uses_key(r, real->access_key_id))
		__builtin_trap();
	if (al_sigv4_resign_query(r, real, real, again, sizeof(again), &err) != (int)len ||
	    memcmp(again, target, len) != 0)
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char out[OUT_MAX];
	struct al_sigv4_creds fake = fake_key, real = real_key;
	struct al_sigv4_request r;
	struct al_error err = {0};
	const char *s = (const char *)data;
	int ret;

	if (size < 1 || !split(s, size, &r))
		return 0;
	if (data[0] & 1)
		r.payload_hash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
	if (!(data[0] & 2))
		fake.session_token = real.session_token = NULL;
	if (!(data[0] & 4))
		fake.secret_access_key = NULL;
	(void)al_sigv4_uses_key(&r, fake.access_key_id);

	ret = al_sigv4_resign(&r, &fake, &real, out, sizeof(out), &err);
	check_result(ret, out, &err);
	if (ret >= 0)
		check_header_roundtrip(&r, out, (size_t)ret, &real);

	split(s, size, &r);
	r.payload_hash = data[0] & 1 ? "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b"
				       "7852b855"
				     : NULL;
	memset(&err, 0, sizeof(err));
	ret = al_sigv4_resign_query(&r, &fake, &real, out, sizeof(out), &err);
	check_result(ret, out, &err);
	if (ret >= 0)
		check_query_roundtrip(&r, out, (size_t)ret, &real);
	return 0;
}
