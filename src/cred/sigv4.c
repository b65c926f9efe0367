/* SigV4 re-signing: what sigv4-parse.c checked, then the same canonical
 * request (sigv4-canon.c) verified with the placeholder key and signed
 * with the real one. */
#include "cred/sigv4-internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>

#include "core/cleanup.h"
#include "core/util.h"

/* ---- payload, session token, signatures --------------------------------- */

#define PAYLOAD_MAX (SV4_HEX_LEN + 1) /* an x-amz-content-sha256 value taken, with NUL */

static const char *const literal_payloads[] = {"UNSIGNED-PAYLOAD",
					       "STREAMING-UNSIGNED-PAYLOAD-TRAILER"};
#define CHUNKED		"STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
#define CHUNKED_TRAILER CHUNKED "-TRAILER"
#define CHUNKED_SIGV4A	"STREAMING-AWS4-ECDSA-P256-SHA256"

/* What an x-amz-content-sha256 value says about the body: *ret_body is
 * SV4_BODY_CHUNKED* when its chunks are signed (refused unless
 * chunked_ok). */
static int payload_kind(const char *v, size_t n, bool chunked_ok, enum sv4_body *ret_body,
			struct al_error *err)
{
	char c[SV4_CLIP_MAX];

	*ret_body = SV4_BODY_PLAIN;
	if (sv4_slice_is(v, n, CHUNKED))
		*ret_body = SV4_BODY_CHUNKED;
	else if (sv4_slice_is(v, n, CHUNKED_TRAILER))
		*ret_body = SV4_BODY_CHUNKED_TRAILER;
	else if (n >= strlen(CHUNKED_SIGV4A) &&
		 memcmp(v, CHUNKED_SIGV4A, strlen(CHUNKED_SIGV4A)) == 0)
		return al_error_set(err, ENOTSUP,
				    "x-amz-content-sha256 %s: SigV4a chunks are not re-signed",
				    sv4_clip(v, n, c, sizeof(c)));
	else if (!sv4_is_hex64(v, n) && !sv4_slice_is(v, n, literal_payloads[0]) &&
		 !sv4_slice_is(v, n, literal_payloads[1]))
		return al_error_set(err, EINVAL, "x-amz-content-sha256: unknown value \"%s\"",
				    sv4_clip(v, n, c, sizeof(c)));
	if (*ret_body != SV4_BODY_PLAIN && !chunked_ok)
		return al_error_set(err, ENOTSUP,
				    "x-amz-content-sha256 %s: the chunks are signed too, so the "
				    "body must be re-signed as it streams",
				    sv4_clip(v, n, c, sizeof(c)));
	return 0;
}

static int payload_value(const struct al_sigv4_request *r, const char *v, size_t n, bool presigned,
			 bool chunked_ok, char *out, enum sv4_body *ret_body, struct al_error *err)
{
	char c[SV4_CLIP_MAX];
	int ret = payload_kind(v, n, chunked_ok, ret_body, err);

	if (ret < 0)
		return ret;
	if (sv4_is_hex64(v, n) && r->payload_hash && memcmp(v, r->payload_hash, n) != 0)
		return al_error_set(err, EINVAL, "x-amz-content-sha256 is not the body's SHA-256");
	if (presigned && !sv4_is_hex64(v, n) && !sv4_slice_is(v, n, literal_payloads[0]))
		return al_error_set(err, EINVAL, "x-amz-content-sha256 %s in a presigned request",
				    sv4_clip(v, n, c, sizeof(c)));
	memcpy(out, v, n);
	out[n] = '\0';
	return 0;
}

/* The canonical request's last line: what x-amz-content-sha256 says, else
 * UNSIGNED-PAYLOAD for a presigned S3 request (botocore's
 * S3SigV4QueryAuth), else the body's hash. */
static int payload_line(const struct al_sigv4_request *r, bool presigned, bool s3, bool chunked_ok,
			char out[PAYLOAD_MAX], enum sv4_body *ret_body, struct al_error *err)
{
	const struct al_sigv4_header *f;
	int n = sv4_find_field(r, "x-amz-content-sha256", &f, err);

	*ret_body = SV4_BODY_PLAIN;
	if (n < 0)
		return n;
	if (n == 1)
		return payload_value(r, f->value, f->value_len, presigned, chunked_ok, out,
				     ret_body, err);
	if (presigned && s3) {
		strcpy(out, literal_payloads[0]);
		return 0;
	}
	if (!r->payload_hash)
		return al_error_set(err, EINVAL,
				    "no x-amz-content-sha256 field: the body's SHA-256 is needed");
	memcpy(out, r->payload_hash, SV4_HEX_LEN + 1);
	return 0;
}

/* Header auth: the field already carries the real token (sigv4.h). */
static int check_token_field(const struct al_sigv4_request *r, const struct al_sigv4_creds *fake,
			     const struct al_sigv4_creds *real, struct al_error *err)
{
	const struct al_sigv4_header *f;
	int n = sv4_find_field(r, "x-amz-security-token", &f, err);

	if (n < 0)
		return n;
	if (!real->session_token) {
		if (n == 1)
			return al_error_set(err, EINVAL,
					    "X-Amz-Security-Token sent, but the credentials have "
					    "no session token");
		return 0;
	}
	if (n == 0)
		return al_error_set(err, EINVAL,
				    "no X-Amz-Security-Token field: the credentials need their "
				    "session token");
	if (sv4_slice_is(f->value, f->value_len, real->session_token))
		return 0;
	if (sv4_slice_is(f->value, f->value_len, fake->session_token))
		return al_error_set(err, EINVAL,
				    "X-Amz-Security-Token still carries the placeholder: it is "
				    "replaced before re-signing");
	return al_error_set(err, EACCES, "X-Amz-Security-Token is not the placeholder's");
}

static int signature_with(const struct sv4_canon *c, const char *secret, char hex[65],
			  struct al_error *err)
{
	unsigned char md[32];
	struct sv4_key key;
	int r = sv4_canonical_hash(c, md, err);

	if (r == 0)
		r = sv4_signing_key(secret, &c->a->scope, &key, err);
	if (r == 0)
		r = sv4_sign(&key, c->a, md, hex, err);
	OPENSSL_cleanse(&key, sizeof(key));
	return r;
}

/* The request's own signature, by the placeholder key. It is no secret (the
 * sandbox holds that key), so a plain comparison will do. */
static int verify(const struct sv4_canon *c, const struct al_sigv4_creds *fake,
		  struct al_error *err)
{
	char hex[SV4_HEX_LEN + 1];
	int r;

	if (!fake->secret_access_key)
		return 0;
	r = signature_with(c, fake->secret_access_key, hex, err);
	if (r < 0)
		return r;
	if (strcmp(hex, c->a->signature) != 0)
		return al_error_set(err, EACCES,
				    "the signature does not verify with the placeholder key (was "
				    "a signed part of the request changed after signing?)");
	return 0;
}

/* ---- header auth -------------------------------------------------------- */

static int read_date_field(const struct al_sigv4_request *r, struct sv4_auth *a,
			   struct al_error *err)
{
	const struct al_sigv4_header *f;
	int n = sv4_find_field(r, "x-amz-date", &f, err);

	if (n < 0)
		return n;
	if (n == 0 && sv4_has_field(r, "date"))
		return al_error_set(err, ENOTSUP,
				    "no X-Amz-Date field (a Date field alone is "
				    "not re-signed)");
	if (n == 0)
		return al_error_set(err, EINVAL, "no X-Amz-Date field");
	return sv4_parse_timestamp(f->value, f->value_len, a->timestamp, err);
}

static int read_header_auth(const struct al_sigv4_request *r, const struct al_sigv4_creds *fake,
			    struct sv4_auth *a, struct al_error *err)
{
	const struct al_sigv4_header *f;
	struct sv4_parts p;
	struct sv4_qparams q;
	size_t qlen;
	const char *query = sv4_query_of(r, &qlen);
	int n = sv4_find_field(r, "authorization", &f, err);

	if (n == 0)
		return al_error_set(err, EINVAL, "no Authorization field");
	if (n < 0 || (n = sv4_split_parts(f->value, f->value_len, &p, err)) < 0)
		return n;
	n = sv4_parse_credential(p.v[P_CREDENTIAL], p.len[P_CREDENTIAL], fake->access_key_id,
				 &a->scope, err);
	if (n == 0)
		n = read_date_field(r, a, err);
	if (n == 0 && memcmp(a->timestamp, a->scope.date, 8) != 0)
		n = al_error_set(err, EINVAL, "Credential: date %s is not X-Amz-Date's day (%.8s)",
				 a->scope.date, a->timestamp);
	if (n == 0)
		n = sv4_copy_signed_headers(p.v[P_SIGNED], p.len[P_SIGNED], a, err);
	if (n == 0)
		n = sv4_check_signed_headers(r, a->signed_headers, a->signed_len, true, err);
	if (n == 0)
		n = sv4_parse_signature(p.v[P_SIGNATURE], p.len[P_SIGNATURE], a, err);
	if (n == 0)
		n = sv4_scan_query(query, qlen, &q, err);
	if (n == 0 && (q.seen[Q_CREDENTIAL] || q.seen[Q_SIGNATURE] || q.seen[Q_ALGORITHM]))
		n = al_error_set(err, EINVAL, "both an Authorization field and a presigned query");
	return n;
}

static int format_authorization(const struct sv4_auth *a, const char *akid, const char *sig,
				char *out, size_t size, struct al_error *err)
{
	int n = snprintf(NULL, 0,
			 SV4_ALGORITHM " Credential=%s/%s/%s/%s/aws4_request, SignedHeaders=%s, "
				       "Signature=%s",
			 akid, a->scope.date, a->scope.region, a->scope.service, a->signed_headers,
			 sig);

	if (n < 0 || (size_t)n >= size)
		return al_error_set(err, ENOSPC, "the new Authorization value needs %d bytes",
				    n + 1);
	snprintf(out, size,
		 SV4_ALGORITHM
		 " Credential=%s/%s/%s/%s/aws4_request, SignedHeaders=%s, Signature=%s",
		 akid, a->scope.date, a->scope.region, a->scope.service, a->signed_headers, sig);
	return n;
}

int sv4_resign_head(const struct al_sigv4_request *r, const struct al_sigv4_creds *fake,
		    const struct al_sigv4_creds *real, bool chunked_ok, char *out, size_t size,
		    struct sv4_auth *a, char sig[65], enum sv4_body *ret_body, struct al_error *err)
{
	char payload[PAYLOAD_MAX];
	struct sv4_canon c = {.r = r, .a = a, .payload = payload};
	int ret = sv4_check_all(r, fake, real, err);

	if (ret == 0)
		ret = read_header_auth(r, fake, a, err);
	if (ret == 0)
		ret = check_token_field(r, fake, real, err);
	if (ret == 0)
		ret = payload_line(r, false, sv4_is_service_s3(a->scope.service), chunked_ok,
				   payload, ret_body, err);
	if (ret < 0)
		return ret;
	c.query = sv4_query_of(r, &c.query_len);
	c.token = fake->session_token;
	ret = verify(&c, fake, err);
	c.token = NULL;
	if (ret == 0)
		ret = signature_with(&c, real->secret_access_key, sig, err);
	if (ret < 0)
		return ret;
	return format_authorization(a, real->access_key_id, sig, out, size, err);
}

int al_sigv4_resign(const struct al_sigv4_request *r, const struct al_sigv4_creds *fake,
		    const struct al_sigv4_creds *real, char *out, size_t size, struct al_error *err)
{
	char sig[SV4_HEX_LEN + 1];
	struct sv4_auth a;
	enum sv4_body body;

	return sv4_resign_head(r, fake, real, false, out, size, &a, sig, &body, err);
}

/* ---- presigned query ------------------------------------------------------ */

static int decode_param(const struct sv4_qparams *q, int k, char *out, size_t size, size_t *ret_len,
			struct al_error *err)
{
	if (!q->seen[k])
		return al_error_set(err, EINVAL, "query: no %s", sv4_qnames[k]);
	return sv4_pct_decode(q->v[k], q->len[k], sv4_qnames[k], out, size, ret_len, err);
}

static int read_expires(const struct sv4_qparams *q, struct al_error *err)
{
	char v[16];
	size_t n;
	long secs = 0;
	int r = decode_param(q, Q_EXPIRES, v, sizeof(v), &n, err);

	if (r < 0)
		return r == -E2BIG ? al_error_set(err, EINVAL, "X-Amz-Expires: out of range") : r;
	for (size_t i = 0; i < n; i++) {
		if (!sv4_is_digit(v[i]) || (i == 0 && v[i] == '0') || n > 6)
			return al_error_set(err, EINVAL, "X-Amz-Expires: not a number of seconds");
		secs = secs * 10 + (v[i] - '0');
	}
	if (secs < 1 || secs > 604800)
		return al_error_set(err, EINVAL, "X-Amz-Expires: expected 1 to 604800 seconds");
	return 0;
}

static int read_query_scope(const struct sv4_qparams *q, const struct al_sigv4_creds *fake,
			    struct sv4_auth *a, struct al_error *err)
{
	char v[AL_SIGV4_KEY_ID_MAX + 2 * SV4_SCOPE_PART_MAX + 32];
	size_t n;
	int r = decode_param(q, Q_ALGORITHM, v, sizeof(v), &n, err);

	if (r == 0 && sv4_slice_is(v, n, SV4_SIGV4A))
		return al_error_set(err, ENOTSUP, "X-Amz-Algorithm: SigV4a (%s) is not re-signed",
				    SV4_SIGV4A);
	if (r == 0 && !sv4_slice_is(v, n, SV4_ALGORITHM))
		return al_error_set(err, EINVAL, "X-Amz-Algorithm: not %s", SV4_ALGORITHM);
	if (r == 0)
		r = decode_param(q, Q_CREDENTIAL, v, sizeof(v), &n, err);
	if (r == 0)
		r = sv4_parse_credential(v, n, fake->access_key_id, &a->scope, err);
	if (r == 0)
		r = decode_param(q, Q_DATE, v, sizeof(v), &n, err);
	if (r == 0)
		r = sv4_parse_timestamp(v, n, a->timestamp, err);
	if (r == 0 && memcmp(a->timestamp, a->scope.date, 8) != 0)
		r = al_error_set(err, EINVAL,
				 "X-Amz-Credential: date %s is not X-Amz-Date's day (%.8s)",
				 a->scope.date, a->timestamp);
	return r;
}

static int check_query_token(const struct sv4_qparams *q, const struct al_sigv4_creds *fake,
			     struct al_error *err)
{
	char v[AL_SIGV4_TOKEN_MAX + 1];
	size_t n;
	int r;

	if (!fake->session_token) {
		if (q->seen[Q_TOKEN])
			return al_error_set(err, EINVAL,
					    "X-Amz-Security-Token sent, but the credentials have "
					    "no session token");
		return 0;
	}
	if (!q->seen[Q_TOKEN])
		return al_error_set(err, EINVAL,
				    "query: no X-Amz-Security-Token: the credentials need their "
				    "session token");
	r = decode_param(q, Q_TOKEN, v, sizeof(v), &n, err);
	if (r < 0)
		return r;
	if (!sv4_slice_is(v, n, fake->session_token))
		return al_error_set(err, EACCES, "X-Amz-Security-Token is not the placeholder's");
	return 0;
}

static int read_query_auth(const struct al_sigv4_request *r, const struct sv4_qparams *q,
			   const struct al_sigv4_creds *fake, struct sv4_auth *a,
			   struct al_error *err)
{
	const struct al_sigv4_header *f;
	int ret = read_query_scope(q, fake, a, err);

	if (ret == 0)
		ret = read_expires(q, err);
	if (ret == 0)
		ret = decode_param(q, Q_SIGNED, a->signed_headers, sizeof(a->signed_headers),
				   &a->signed_len, err);
	if (ret == 0)
		ret = sv4_check_signed_headers(r, a->signed_headers, a->signed_len, false, err);
	if (ret == 0 && !q->seen[Q_SIGNATURE])
		ret = al_error_set(err, EINVAL, "query: no X-Amz-Signature");
	if (ret == 0 && !sv4_is_hex64(q->v[Q_SIGNATURE], q->len[Q_SIGNATURE]))
		ret =
		    al_error_set(err, EINVAL, "X-Amz-Signature: expected 64 lowercase hex digits");
	if (ret < 0)
		return ret;
	memcpy(a->signature, q->v[Q_SIGNATURE], SV4_HEX_LEN);
	a->signature[SV4_HEX_LEN] = '\0';
	ret = check_query_token(q, fake, err);
	if (ret == 0 && (ret = sv4_find_field(r, "authorization", &f, err)) > 0)
		ret =
		    al_error_set(err, EINVAL, "both an Authorization field and a presigned query");
	if (ret == 0 && (ret = sv4_find_field(r, "x-amz-security-token", &f, err)) > 0)
		ret = al_error_set(err, EINVAL,
				   "an X-Amz-Security-Token field with a presigned query");
	return ret;
}

struct buf {
	char *p;
	size_t len;
};

static void buf_put(struct buf *b, const char *s, size_t n)
{
	memcpy(b->p + b->len, s, n);
	b->len += n;
}

static void buf_put_encoded(struct buf *b, const char *s, size_t n)
{
	static const char digits[] = "0123456789ABCDEF";

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (sv4_is_unreserved(c)) {
			b->p[b->len++] = (char)c;
		} else {
			b->p[b->len++] = '%';
			b->p[b->len++] = digits[c >> 4];
			b->p[b->len++] = digits[c & 15];
		}
	}
}

/* The target with the real credential, token and a signature slot (its
 * offset in *ret_sig). b->p has room for the worst case (see the caller). */
static void write_target(const struct al_sigv4_request *r, const struct sv4_auth *a,
			 const struct al_sigv4_creds *real, struct buf *b, size_t *ret_sig)
{
	size_t qlen, start = 0;
	const char *q = sv4_query_of(r, &qlen);
	char cred[AL_SIGV4_KEY_ID_MAX + 2 * SV4_SCOPE_PART_MAX + 32];
	int cl = snprintf(cred, sizeof(cred), "%s/%s/%s/%s/aws4_request", real->access_key_id,
			  a->scope.date, a->scope.region, a->scope.service);

	buf_put(b, r->target, (size_t)(q - r->target));
	for (size_t i = 0; i <= qlen; i++) {
		if (i < qlen && q[i] != '&')
			continue;
		const char *p = q + start, *eq = memchr(p, '=', i - start);
		size_t kl = eq ? (size_t)(eq - p) : i - start;

		if (start > 0)
			buf_put(b, "&", 1);
		if (sv4_slice_is(p, kl, sv4_qnames[Q_CREDENTIAL])) {
			buf_put(b, "X-Amz-Credential=", 17);
			buf_put_encoded(b, cred, (size_t)cl);
		} else if (sv4_slice_is(p, kl, sv4_qnames[Q_TOKEN])) {
			buf_put(b, "X-Amz-Security-Token=", 21);
			buf_put_encoded(b, real->session_token, strlen(real->session_token));
		} else if (sv4_slice_is(p, kl, sv4_qnames[Q_SIGNATURE])) {
			buf_put(b, "X-Amz-Signature=", 16);
			*ret_sig = b->len;
			buf_put(b, a->signature, SV4_HEX_LEN);
		} else {
			buf_put(b, p, i - start);
		}
		start = i + 1;
	}
	b->p[b->len] = '\0';
}

static int resign_target(const struct al_sigv4_request *r, struct sv4_canon *c,
			 const struct al_sigv4_creds *real, char *out, size_t size,
			 struct al_error *err)
{
	size_t token = real->session_token ? 3 * strlen(real->session_token) : 0;
	_cleanup_free_ char *p = xmalloc(r->target_len + token + 3 * sizeof(struct sv4_scope) + 1);
	struct buf b = {p, 0};
	size_t sig = 0, path = 0;
	char hex[SV4_HEX_LEN + 1];
	int ret;

	write_target(r, c->a, real, &b, &sig);
	path = (size_t)((const char *)memchr(b.p, '?', b.len) - b.p);
	c->query = b.p + path + 1;
	c->query_len = b.len - path - 1;
	ret = signature_with(c, real->secret_access_key, hex, err);
	if (ret < 0)
		return ret;
	memcpy(b.p + sig, hex, SV4_HEX_LEN);
	if (b.len >= size)
		return al_error_set(err, ENOSPC, "the new target needs %zu bytes", b.len + 1);
	memcpy(out, b.p, b.len + 1);
	return (int)b.len;
}

int al_sigv4_resign_query(const struct al_sigv4_request *r, const struct al_sigv4_creds *fake,
			  const struct al_sigv4_creds *real, char *out_target, size_t size,
			  struct al_error *err)
{
	char payload[PAYLOAD_MAX];
	struct sv4_auth a;
	struct sv4_qparams q;
	enum sv4_body body;
	struct sv4_canon c = {.r = r, .a = &a, .payload = payload, .query_auth = true};
	int ret = sv4_check_all(r, fake, real, err);

	if (ret < 0)
		return ret;
	c.query = sv4_query_of(r, &c.query_len);
	ret = sv4_scan_query(c.query, c.query_len, &q, err);
	if (ret == 0)
		ret = read_query_auth(r, &q, fake, &a, err);
	if (ret == 0)
		ret = payload_line(r, true, sv4_is_service_s3(a.scope.service), false, payload,
				   &body, err);
	if (ret == 0)
		ret = verify(&c, fake, err);
	if (ret < 0)
		return ret;
	return resign_target(r, &c, real, out_target, size, err);
}

/* ---- detection ---------------------------------------------------------- */

static bool credential_names(const char *v, size_t n, const char *akid, size_t akid_len)
{
	return n > akid_len && memcmp(v, akid, akid_len) == 0 && v[akid_len] == '/';
}

/* Whether the percent-decoded s starts with akid and '/': only that much
 * is decoded. */
static bool encoded_credential_names(const char *s, size_t n, const char *akid, size_t akid_len)
{
	char v[AL_SIGV4_KEY_ID_MAX + 1];
	size_t o = 0;

	for (size_t i = 0; i < n && o <= akid_len; i++) {
		if (s[i] != '%') {
			v[o++] = s[i];
			continue;
		}
		if (i + 2 >= n || !sv4_is_hex_digit(s[i + 1]) || !sv4_is_hex_digit(s[i + 2]))
			return false;
		v[o++] = (char)(sv4_hex_value(s[i + 1]) * 16 + sv4_hex_value(s[i + 2]));
		i += 2;
	}
	return credential_names(v, o, akid, akid_len);
}

static bool header_names(const struct al_sigv4_header *h, const char *akid, size_t akid_len)
{
	const char *cred;

	if (!sv4_name_is(h->name, h->name_len, "authorization") || h->value_len < 5 ||
	    memcmp(h->value, "AWS4-", 5) != 0)
		return false;
	cred = memmem(h->value, h->value_len, "Credential=", 11);
	return cred && credential_names(cred + 11, h->value_len - (size_t)(cred + 11 - h->value),
					akid, akid_len);
}

bool al_sigv4_uses_key(const struct al_sigv4_request *r, const char *access_key_id)
{
	size_t akid_len = access_key_id ? strlen(access_key_id) : 0, qlen;
	struct sv4_qparams q;
	const char *query;

	if (akid_len == 0 || akid_len > AL_SIGV4_KEY_ID_MAX)
		return false;
	for (size_t i = 0; i < r->n_headers; i++)
		if (header_names(&r->headers[i], access_key_id, akid_len))
			return true;
	query = sv4_query_of(r, &qlen);
	if (sv4_scan_query(query, qlen, &q, NULL) < 0 || !q.seen[Q_CREDENTIAL])
		return false;
	return encoded_credential_names(q.v[Q_CREDENTIAL], q.len[Q_CREDENTIAL], access_key_id,
					akid_len);
}
