/* The SigV4 canonical request, hashed as it is built (nothing the size of
 * the request is kept), the signing key and the signature. The rules are
 * botocore's (auth.py's SigV4Auth and S3SigV4Auth), which AWS's services
 * accept; sigv4.h lists them. */
#include "cred/sigv4-internal.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The low-level SHA256_* (as copy.c and operator.c use them): the canonical
 * request is hashed piece by piece without an EVP context to allocate. */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

struct hasher {
	SHA256_CTX ctx;
	bool ok;
};

static void put(struct hasher *h, const char *s, size_t n)
{
	if (n > 0 && SHA256_Update(&h->ctx, s, n) != 1)
		h->ok = false;
}

static void put_str(struct hasher *h, const char *s)
{
	put(h, s, strlen(s));
}

static void put_encoded(struct hasher *h, const char *s, size_t n)
{
	static const char digits[] = "0123456789ABCDEF";

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		char e[3] = {'%', digits[c >> 4], digits[c & 15]};

		if (sv4_is_unreserved(c))
			put(h, s + i, 1);
		else
			put(h, e, 3);
	}
}

bool sv4_is_unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '.' || c == '_' || c == '~';
}

bool sv4_is_service_s3(const char *service)
{
	/* botocore signs these with S3SigV4Auth (signature version s3v4),
	 * which leaves the path as sent. */
	return strcmp(service, "s3") == 0 || strcmp(service, "s3-object-lambda") == 0 ||
	       strcmp(service, "s3-outposts") == 0;
}

#define SEGMENTS_MAX (AL_SIGV4_TARGET_MAX + 1) /* a path of only '/' */

/* Which '/'-separated segments of path survive botocore's
 * remove_dot_segments(): empty and "." segments go, and ".." goes with the
 * nearest surviving segment before it (none at the root). Scanned
 * backwards, each ".." cancels the first plain segment to its left that is
 * not yet cancelled: the same pairing as the forward pass with a stack,
 * with one bit per segment instead. Returns how many survive. */
static size_t mark_segments(const char *path, size_t len, uint8_t *keep)
{
	size_t n = 1, kept = 0, pending = 0, end = len;

	for (size_t i = 0; i < len; i++)
		n += path[i] == '/';
	memset(keep, 0, (n + 7) / 8);
	for (size_t s = n; s-- > 0;) {
		size_t start = end;

		while (start > 0 && path[start - 1] != '/')
			start--;
		size_t sl = end - start;
		const char *seg = path + start;

		if (sl == 2 && seg[0] == '.' && seg[1] == '.') {
			pending++;
		} else if (sl == 0 || (sl == 1 && seg[0] == '.')) {
			/* dropped */
		} else if (pending > 0) {
			pending--;
		} else {
			keep[s / 8] |= (uint8_t)(1u << (s % 8));
			kept++;
		}
		end = start > 0 ? start - 1 : 0;
	}
	return kept;
}

static void put_uri(struct hasher *h, const char *path, size_t len, bool s3)
{
	uint8_t keep[SEGMENTS_MAX / 8 + 1];
	size_t s = 0, start = 0;
	bool any = false;

	if (s3) {
		put(h, path, len);
		return;
	}
	if (mark_segments(path, len, keep) == 0) {
		put(h, "/", 1);
		return;
	}
	for (size_t i = 0; i <= len; i++) {
		if (i < len && path[i] != '/')
			continue;
		if (keep[s / 8] & (1u << (s % 8))) {
			put(h, "/", 1);
			put_encoded(h, path + start, i - start);
			any = true;
		}
		s++;
		start = i + 1;
	}
	if (any && path[len - 1] == '/')
		put(h, "/", 1);
}

struct param {
	uint32_t k, klen, v, vlen; /* offsets into the query */
};

static int slice_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
	int r = memcmp(a, b, alen < blen ? alen : blen);

	if (r != 0)
		return r;
	return alen < blen ? -1 : alen > blen;
}

/* By name, then by value, byte by byte: Python's sort of (name, value)
 * pairs, which is what botocore does. */
static int param_cmp(const void *pa, const void *pb, void *query)
{
	const struct param *a = pa, *b = pb;
	const char *q = query;
	int r = slice_cmp(q + a->k, a->klen, q + b->k, b->klen);

	return r != 0 ? r : slice_cmp(q + a->v, a->vlen, q + b->v, b->vlen);
}

static int split_query(const struct sv4_canon *c, struct param *p, size_t *ret_n,
		       struct al_error *err)
{
	const char *q = c->query;
	size_t n = 0, start = 0, len = c->query_len;

	for (size_t i = 0; len > 0 && i <= len; i++) {
		if (i < len && q[i] != '&')
			continue;
		const char *eq = memchr(q + start, '=', i - start);
		size_t kl = eq ? (size_t)(eq - (q + start)) : i - start;
		size_t vs = eq ? start + kl + 1 : i;

		if (!(c->query_auth && slice_cmp(q + start, kl, "X-Amz-Signature", 15) == 0)) {
			if (n == AL_SIGV4_PARAMS_MAX)
				return al_error_set(err, E2BIG, "more than %d query parameters",
						    AL_SIGV4_PARAMS_MAX);
			p[n++] = (struct param){(uint32_t)start, (uint32_t)kl, (uint32_t)vs,
						(uint32_t)(i - vs)};
		}
		start = i + 1;
	}
	*ret_n = n;
	return 0;
}

static int put_query(struct hasher *h, const struct sv4_canon *c, struct al_error *err)
{
	struct param p[AL_SIGV4_PARAMS_MAX];
	size_t n = 0;
	int r;

	r = split_query(c, p, &n, err);
	if (r < 0)
		return r;
	qsort_r(p, n, sizeof(p[0]), param_cmp, (void *)c->query);
	for (size_t i = 0; i < n; i++) {
		if (i > 0)
			put(h, "&", 1);
		put(h, c->query + p[i].k, p[i].klen);
		put(h, "=", 1);
		put(h, c->query + p[i].v, p[i].vlen);
	}
	return 0;
}

/* A value trimmed, with runs of spaces and tabs as one space (botocore's
 * ' '.join(value.split())). */
static int put_value(struct hasher *h, const char *name, const char *v, size_t len,
		     struct al_error *err)
{
	bool space = false, started = false;

	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)v[i];

		if (ch == ' ' || ch == '\t') {
			space = started;
			continue;
		}
		if (ch < 0x20 || ch == 0x7f)
			return al_error_set(
			    err, EINVAL, "signed header %s: control character in its value", name);
		if (space)
			put(h, " ", 1);
		put(h, v + i, 1);
		space = false;
		started = true;
	}
	return 0;
}

static int put_header(struct hasher *h, const struct sv4_canon *c, const char *name,
		      struct al_error *err)
{
	bool first = true;
	int r;

	put_str(h, name);
	put(h, ":", 1);
	for (size_t i = 0; i < c->r->n_headers; i++) {
		const struct al_sigv4_header *f = &c->r->headers[i];

		if (!sv4_name_is(f->name, f->name_len, name))
			continue;
		if (!first)
			put(h, ",", 1);
		first = false;
		if (c->token && strcmp(name, "x-amz-security-token") == 0)
			r = put_value(h, name, c->token, strlen(c->token), err);
		else
			r = put_value(h, name, f->value, f->value_len, err);
		if (r < 0)
			return r;
	}
	put(h, "\n", 1);
	return 0;
}

static int put_headers(struct hasher *h, const struct sv4_canon *c, struct al_error *err)
{
	const char *s = c->a->signed_headers;
	char name[AL_SIGV4_AUTH_MAX + 1];
	size_t start = 0;
	int r;

	for (size_t i = 0; i <= c->a->signed_len; i++) {
		if (i < c->a->signed_len && s[i] != ';')
			continue;
		memcpy(name, s + start, i - start);
		name[i - start] = '\0';
		r = put_header(h, c, name, err);
		if (r < 0)
			return r;
		start = i + 1;
	}
	return 0;
}

int sv4_canonical_hash(const struct sv4_canon *c, unsigned char md[32], struct al_error *err)
{
	const char *t = c->r->target;
	const char *qm = memchr(t, '?', c->r->target_len);
	size_t path_len = qm ? (size_t)(qm - t) : c->r->target_len;
	struct hasher h = {.ok = SHA256_Init(&h.ctx) == 1};
	int r;

	put(&h, c->r->method, c->r->method_len);
	put(&h, "\n", 1);
	put_uri(&h, t, path_len, sv4_is_service_s3(c->a->scope.service));
	put(&h, "\n", 1);
	r = put_query(&h, c, err);
	if (r < 0)
		return r;
	put(&h, "\n", 1);
	r = put_headers(&h, c, err);
	if (r < 0)
		return r;
	put(&h, "\n", 1);
	put(&h, c->a->signed_headers, c->a->signed_len);
	put(&h, "\n", 1);
	put_str(&h, c->payload);
	if (SHA256_Final(md, &h.ctx) != 1 || !h.ok)
		return al_error_set(err, EIO, "SHA-256 of the canonical request failed");
	return 0;
}

static int hmac(const unsigned char *key, size_t key_len, const char *msg, size_t len,
		unsigned char out[32], struct al_error *err)
{
	unsigned int n = 0;

	if (!HMAC(EVP_sha256(), key, (int)key_len, (const unsigned char *)msg, len, out, &n) ||
	    n != 32)
		return al_error_set(err, EIO, "HMAC-SHA256 failed");
	return 0;
}

int sv4_signing_key(const char *secret, const struct sv4_scope *s, struct sv4_key *ret,
		    struct al_error *err)
{
	unsigned char k[4 + AL_SIGV4_SECRET_MAX], a[32], b[32];
	size_t n = strlen(secret);
	int r;

	if (n > AL_SIGV4_SECRET_MAX)
		return al_error_set(err, EINVAL, "secret access key longer than %d bytes",
				    AL_SIGV4_SECRET_MAX);
	memcpy(k, "AWS4", 4);
	memcpy(k + 4, secret, n);
	r = hmac(k, 4 + n, s->date, strlen(s->date), a, err);
	if (r == 0)
		r = hmac(a, 32, s->region, strlen(s->region), b, err);
	if (r == 0)
		r = hmac(b, 32, s->service, strlen(s->service), a, err);
	if (r == 0)
		r = hmac(a, 32, "aws4_request", 12, ret->k, err);
	/* The secret's copies on the stack go now, not when the frame is
	 * reused. */
	OPENSSL_cleanse(k, sizeof(k));
	OPENSSL_cleanse(a, sizeof(a));
	OPENSSL_cleanse(b, sizeof(b));
	return r;
}

void sv4_hex(const unsigned char *md, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[md[i] >> 4];
		out[2 * i + 1] = digits[md[i] & 15];
	}
	out[2 * n] = '\0';
}

int sv4_hmac_hex(const struct sv4_key *key, const char *text, size_t len, char hex[65],
		 struct al_error *err)
{
	unsigned char md[32];
	int r = hmac(key->k, sizeof(key->k), text, len, md, err);

	if (r == 0)
		sv4_hex(md, sizeof(md), hex);
	return r;
}

int sv4_sign(const struct sv4_key *key, const struct sv4_auth *a, const unsigned char md[32],
	     char hex[65], struct al_error *err)
{
	char sts[64 + 2 * SV4_SCOPE_PART_MAX + 2 * SV4_HEX_LEN], mdhex[SV4_HEX_LEN + 1];
	int n;

	sv4_hex(md, 32, mdhex);
	n = snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256\n%s\n%s/%s/%s/aws4_request\n%s",
		     a->timestamp, a->scope.date, a->scope.region, a->scope.service, mdhex);
	if (n < 0 || (size_t)n >= sizeof(sts))
		return al_error_set(err, EINVAL, "string to sign too long");
	return sv4_hmac_hex(key, sts, (size_t)n, hex, err);
}

const char *sv4_clip(const char *s, size_t n, char *buf, size_t size)
{
	size_t max = n, o = 0;

	if (size == 0)
		return buf;
	if (max > size - 1)
		max = size > 4 ? size - 4 : 0;
	for (size_t i = 0; i < max; i++) {
		unsigned char c = (unsigned char)s[i];

		buf[o++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
	}
	if (max < n && size > 4) {
		memcpy(buf + o, "...", 3);
		o += 3;
	}
	buf[o] = '\0';
	return buf;
}

bool sv4_name_is(const char *name, size_t len, const char *lower)
{
	size_t n = strlen(lower);

	if (len != n)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];

		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		if (c != lower[i])
			return false;
	}
	return true;
}
