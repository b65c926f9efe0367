/* libFuzzer target: SigV4 re-signing (cred/sigv4.c, sigv4-chunked.c),
 * whose input is a request from code inside the sandbox. An input is a
 * flags byte, then lines: the method, the target, "Name: value" fields, an
 * empty line and the body.
 *   flags 1: the body's hash is given; 2: the credentials have session
 *   tokens; 4: the placeholder's secret is given (the signature is
 *   verified); the high nibble: the pieces the body is fed in (16 bytes
 *   times it, plus 1).
 * Beyond the sanitizers, what is re-signed must itself verify: the output
 * put back into the request re-signs to itself with the real key as the
 * placeholder, and so does a re-signed body, which keeps its length. */
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

/* Split the input into r and the body; false when it has no method and
 * target. */
static bool split(const char *s, size_t n, struct al_sigv4_request *r, const char **ret_body,
		  size_t *ret_body_len)
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
	*ret_body = s + n;
	*ret_body_len = 0;
	for (i = e + 1; i < n && r->n_headers <= AL_SIGV4_HEADERS_MAX; i = e + 1) {
		const char *colon;
		size_t v;

		e = line_end(s, i, n);
		if (e == i) {
			*ret_body = s + e + 1 < s + n ? s + e + 1 : s + n;
			*ret_body_len = (size_t)(s + n - *ret_body);
			break;
		}
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

static void put_auth(struct al_sigv4_request *r, const char *auth, size_t len)
{
	for (size_t i = 0; i < r->n_headers; i++)
		if (fields[i].name_len == 13 &&
		    strncasecmp(fields[i].name, "authorization", 13) == 0)
			fields[i] = (struct al_sigv4_header){fields[i].name, 13, auth, len};
}

/* The new Authorization value in place of the old one verifies with the
 * real key and re-signs to itself. */
static void check_header_roundtrip(struct al_sigv4_request *r, const char *auth, size_t len,
				   const struct al_sigv4_creds *real)
{
	static char again[OUT_MAX];
	struct al_error err = {0};

	put_auth(r, auth, len);
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

/* Feed body in pieces of step; the output goes to dst. Returns the feed's
 * result; *ret_out is the output's length, which is never more than what
 * was taken, and all of it once the body is done. */
static int filter(struct al_sigv4_chunked *c, const char *body, size_t len, size_t step, char *dst,
		  size_t *ret_out)
{
	struct al_error err = {0};
	size_t off = 0, o = 0, taken, plen;
	const char *p;
	int r = 0;

	while (off < len && r == 0) {
		r = al_sigv4_chunked_feed(c, body + off, step < len - off ? step : len - off,
					  &taken, &err);
		off += taken;
		while ((p = al_sigv4_chunked_pending(c, &plen))) {
			if (o + plen > len)
				__builtin_trap();
			memcpy(dst + o, p, plen);
			o += plen;
			al_sigv4_chunked_sent(c, plen);
		}
		if (taken == 0)
			break;
	}
	/* Bytes of a chunk not yet whole are held back: only a finished body
	 * has all of them out. */
	if (al_sigv4_chunked_done(c) && o != off)
		__builtin_trap();
	if (r < 0 && err.msg[0] == '\0')
		__builtin_trap();
	*ret_out = o;
	return r;
}

static void check_chunked(struct al_sigv4_request *r, const struct al_sigv4_creds *fake,
			  const struct al_sigv4_creds *real, const char *body, size_t len,
			  size_t step)
{
	static char head[OUT_MAX], head2[OUT_MAX], body_out[1 << 16], again[1 << 16];
	struct al_sigv4_chunked *c = NULL, *d = NULL;
	struct al_error err = {0};
	size_t n, m;
	int ret;

	if (len > sizeof(body_out))
		return;
	ret = al_sigv4_resign_chunked(r, fake, real, head, sizeof(head), &c, &err);
	check_result(ret, head, &err);
	if (ret < 0 || !c)
		return;
	if (filter(c, body, len, step, body_out, &n) == 0 && al_sigv4_chunked_done(c)) {
		put_auth(r, head, (size_t)ret);
		if (al_sigv4_resign_chunked(r, real, real, head2, sizeof(head2), &d, &err) != ret ||
		    memcmp(head, head2, (size_t)ret) != 0 || !d ||
		    filter(d, body_out, n, 4096, again, &m) != 0 || m != n ||
		    !al_sigv4_chunked_done(d) || memcmp(again, body_out, n) != 0)
			__builtin_trap();
	}
	al_sigv4_chunked_free(c);
	al_sigv4_chunked_free(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char out[OUT_MAX];
	struct al_sigv4_creds fake = fake_key, real = real_key;
	struct al_sigv4_request r;
	struct al_error err = {0};
	const char *s = (const char *)data, *body;
	size_t body_len;
	int ret;

	if (size < 1 || !split(s, size, &r, &body, &body_len))
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

	split(s, size, &r, &body, &body_len);
	r.payload_hash = data[0] & 1 ? "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b"
				       "7852b855"
				     : NULL;
	memset(&err, 0, sizeof(err));
	ret = al_sigv4_resign_query(&r, &fake, &real, out, sizeof(out), &err);
	check_result(ret, out, &err);
	if (ret >= 0)
		check_query_roundtrip(&r, out, (size_t)ret, &real);

	split(s, size, &r, &body, &body_len);
	r.payload_hash = NULL;
	check_chunked(&r, &fake, &real, body, body_len, 16 * (size_t)(data[0] >> 4) + 1);
	return 0;
}
