/* The strict checks of what the sandbox sent: the request's shape, the
 * credentials, the Authorization field's parts and the presigned query's
 * parameters. */
#include "cred/sigv4-internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/util.h"

bool sv4_is_digit(char c)
{
	return c >= '0' && c <= '9';
}

bool sv4_is_hex64(const char *s, size_t n)
{
	if (n != SV4_HEX_LEN)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!sv4_is_digit(s[i]) && !(s[i] >= 'a' && s[i] <= 'f'))
			return false;
	return true;
}

/* RFC 9110 token characters. */

static bool is_key_id(const char *s, size_t n)
{
	if (n == 0 || n > AL_SIGV4_KEY_ID_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!sv4_is_unreserved((unsigned char)s[i]))
			return false;
	return true;
}

bool sv4_slice_is(const char *s, size_t n, const char *lit)
{
	return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

/* ---- the request and the credentials ---------------------------------- */

static int check_target(const char *t, size_t n, struct al_error *err)
{
	if (n == 0 || t[0] != '/')
		return al_error_set(err, EINVAL, "request target does not start with '/'");
	if (n > AL_SIGV4_TARGET_MAX)
		return al_error_set(err, E2BIG, "request target longer than %d bytes",
				    AL_SIGV4_TARGET_MAX);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)t[i];

		if (c <= ' ' || c >= 0x7f || c == '#')
			return al_error_set(
			    err, EINVAL, "request target: byte 0x%02x at %zu is not allowed", c, i);
	}
	return 0;
}

static int check_request(const struct al_sigv4_request *r, struct al_error *err)
{
	if (r->method_len == 0 || r->method_len > 32)
		return al_error_set(err, EINVAL, "method: expected 1 to 32 characters");
	for (size_t i = 0; i < r->method_len; i++)
		if (!al_is_tchar(r->method[i]))
			return al_error_set(err, EINVAL, "method: not a token");
	if (r->n_headers > AL_SIGV4_HEADERS_MAX)
		return al_error_set(err, E2BIG, "more than %d header fields", AL_SIGV4_HEADERS_MAX);
	for (size_t i = 0; i < r->n_headers; i++) {
		const struct al_sigv4_header *h = &r->headers[i];

		if (h->name_len == 0 || h->name_len > AL_SIGV4_AUTH_MAX)
			return al_error_set(err, EINVAL, "header field %zu: bad name length", i);
		for (size_t j = 0; j < h->name_len; j++)
			if (!al_is_tchar(h->name[j]))
				return al_error_set(err, EINVAL,
						    "header field %zu: name is not a token", i);
	}
	if (r->payload_hash && !sv4_is_hex64(r->payload_hash, strlen(r->payload_hash)))
		return al_error_set(err, EINVAL, "payload hash: expected 64 lowercase hex digits");
	return check_target(r->target, r->target_len, err);
}

static int check_creds(const struct al_sigv4_creds *c, const char *which, bool need_secret,
		       struct al_error *err)
{
	const char *t = c->session_token;

	if (!c->access_key_id || !is_key_id(c->access_key_id, strlen(c->access_key_id)))
		return al_error_set(err, EINVAL,
				    "%s access key id: expected 1 to %d of [A-Za-z0-9._~-]", which,
				    AL_SIGV4_KEY_ID_MAX);
	if (need_secret && !c->secret_access_key)
		return al_error_set(err, EINVAL, "%s secret access key missing", which);
	if (c->secret_access_key &&
	    (!c->secret_access_key[0] || strlen(c->secret_access_key) > AL_SIGV4_SECRET_MAX))
		return al_error_set(err, EINVAL, "%s secret access key: expected 1 to %d bytes",
				    which, AL_SIGV4_SECRET_MAX);
	if (!t)
		return 0;
	if (!t[0] || strlen(t) > AL_SIGV4_TOKEN_MAX)
		return al_error_set(err, EINVAL, "%s session token: expected 1 to %d bytes", which,
				    AL_SIGV4_TOKEN_MAX);
	for (const char *p = t; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return al_error_set(err, EINVAL, "%s session token: control character",
					    which);
	return 0;
}

int sv4_check_all(const struct al_sigv4_request *r, const struct al_sigv4_creds *fake,
		  const struct al_sigv4_creds *real, struct al_error *err)
{
	int ret = check_creds(fake, "placeholder", false, err);

	if (ret == 0)
		ret = check_creds(real, "real", true, err);
	if (ret == 0 && !fake->session_token != !real->session_token)
		ret = al_error_set(err, EINVAL,
				   "the placeholder and the real credentials must both have a "
				   "session token or both have none");
	if (ret == 0)
		ret = check_request(r, err);
	return ret;
}

int sv4_find_field(const struct al_sigv4_request *r, const char *lname,
		   const struct al_sigv4_header **ret, struct al_error *err)
{
	const struct al_sigv4_header *found = NULL;

	for (size_t i = 0; i < r->n_headers; i++) {
		if (!sv4_name_is(r->headers[i].name, r->headers[i].name_len, lname))
			continue;
		if (found)
			return al_error_set(err, EINVAL, "more than one %s field", lname);
		found = &r->headers[i];
	}
	*ret = found;
	return found != NULL;
}

/* ---- parts of a signature ---------------------------------------------- */

static int two(const char *s)
{
	return (s[0] - '0') * 10 + (s[1] - '0');
}

static bool is_date(const char *s, size_t n)
{
	static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	int y, m, d, max;

	if (n != 8)
		return false;
	for (size_t i = 0; i < 8; i++)
		if (!sv4_is_digit(s[i]))
			return false;
	y = two(s) * 100 + two(s + 2);
	m = two(s + 4);
	d = two(s + 6);
	if (m < 1 || m > 12)
		return false;
	max = days[m - 1] + (m == 2 && y % 4 == 0 && (y % 100 != 0 || y % 400 == 0));
	return d >= 1 && d <= max;
}

int sv4_parse_timestamp(const char *s, size_t n, char out[17], struct al_error *err)
{
	char c[SV4_CLIP_MAX];
	bool ok = n == 16 && is_date(s, 8) && s[8] == 'T' && s[15] == 'Z';

	for (size_t i = 9; ok && i < 15; i++)
		ok = sv4_is_digit(s[i]);
	if (!ok || two(s + 9) > 23 || two(s + 11) > 59 || two(s + 13) > 59)
		return al_error_set(err, EINVAL, "X-Amz-Date: \"%s\" is not YYYYMMDDTHHMMSSZ",
				    sv4_clip(s, n, c, sizeof(c)));
	memcpy(out, s, 16);
	out[16] = '\0';
	return 0;
}

static int scope_part(const char *s, size_t n, const char *what, char *out, struct al_error *err)
{
	char c[SV4_CLIP_MAX];
	bool ok = n > 0 && n <= SV4_SCOPE_PART_MAX;

	for (size_t i = 0; ok && i < n; i++)
		ok = sv4_is_unreserved((unsigned char)s[i]) && s[i] != '~';
	if (!ok)
		return al_error_set(err, EINVAL,
				    "Credential: %s \"%s\": expected 1 to %d of [A-Za-z0-9._-]",
				    what, sv4_clip(s, n, c, sizeof(c)), SV4_SCOPE_PART_MAX);
	memcpy(out, s, n);
	out[n] = '\0';
	return 0;
}

/* AKID/DATE/REGION/SERVICE/aws4_request */
int sv4_parse_credential(const char *s, size_t n, const char *fake_akid, struct sv4_scope *sc,
			 struct al_error *err)
{
	const char *part[5];
	size_t len[5], k = 0, start = 0;
	char c[SV4_CLIP_MAX];
	int r;

	for (size_t i = 0; i <= n; i++) {
		if (i < n && s[i] != '/')
			continue;
		if (k == 5)
			return al_error_set(err, EINVAL, "Credential: more than 5 parts");
		part[k] = s + start;
		len[k++] = i - start;
		start = i + 1;
	}
	if (k != 5 || !sv4_slice_is(part[4], len[4], "aws4_request"))
		return al_error_set(err, EINVAL,
				    "Credential: expected AKID/DATE/REGION/SERVICE/aws4_request");
	if (!is_key_id(part[0], len[0]))
		return al_error_set(err, EINVAL, "Credential: access key id \"%s\" is malformed",
				    sv4_clip(part[0], len[0], c, sizeof(c)));
	if (!sv4_slice_is(part[0], len[0], fake_akid))
		return al_error_set(err, EACCES,
				    "Credential: access key id \"%s\" is not the placeholder's",
				    sv4_clip(part[0], len[0], c, sizeof(c)));
	if (!is_date(part[1], len[1]))
		return al_error_set(err, EINVAL, "Credential: date \"%s\" is not YYYYMMDD",
				    sv4_clip(part[1], len[1], c, sizeof(c)));
	memcpy(sc->akid, part[0], len[0]);
	sc->akid[len[0]] = '\0';
	memcpy(sc->date, part[1], 8);
	sc->date[8] = '\0';
	r = scope_part(part[2], len[2], "region", sc->region, err);
	if (r == 0)
		r = scope_part(part[3], len[3], "service", sc->service, err);
	return r;
}

bool sv4_has_field(const struct al_sigv4_request *r, const char *name)
{
	for (size_t i = 0; i < r->n_headers; i++)
		if (sv4_name_is(r->headers[i].name, r->headers[i].name_len, name))
			return true;
	return false;
}

static int signed_name(const struct al_sigv4_request *r, const char *s, size_t n, const char *prev,
		       size_t prev_len, struct al_error *err)
{
	char name[AL_SIGV4_AUTH_MAX + 1], c[SV4_CLIP_MAX], p[SV4_CLIP_MAX];
	int order;

	if (n == 0)
		return al_error_set(err, EINVAL, "SignedHeaders: empty name");
	for (size_t i = 0; i < n; i++)
		if (!al_is_tchar(s[i]) || (s[i] >= 'A' && s[i] <= 'Z'))
			return al_error_set(err, EINVAL,
					    "SignedHeaders: \"%s\" is not a lowercase field name",
					    sv4_clip(s, n, c, sizeof(c)));
	order = prev ? memcmp(prev, s, prev_len < n ? prev_len : n) : -1;
	if (order == 0)
		order = prev_len < n ? -1 : prev_len > n;
	if (order == 0)
		return al_error_set(err, EINVAL, "SignedHeaders: \"%s\" twice",
				    sv4_clip(s, n, c, sizeof(c)));
	if (order > 0)
		return al_error_set(err, EINVAL, "SignedHeaders: not sorted (\"%s\" before \"%s\")",
				    sv4_clip(prev, prev_len, p, sizeof(p)),
				    sv4_clip(s, n, c, sizeof(c)));
	memcpy(name, s, n);
	name[n] = '\0';
	if (strcmp(name, "authorization") == 0)
		return al_error_set(err, EINVAL, "SignedHeaders: authorization cannot be signed");
	if (!sv4_has_field(r, name))
		return al_error_set(err, EINVAL,
				    "SignedHeaders: \"%s\" is not a field of the request",
				    sv4_clip(s, n, c, sizeof(c)));
	return 0;
}

int sv4_check_signed_headers(const struct al_sigv4_request *r, const char *s, size_t n,
			     bool need_date, struct al_error *err)
{
	const char *prev = NULL;
	size_t prev_len = 0, start = 0;
	bool host = false, date = false;
	int ret;

	for (size_t i = 0; i <= n; i++) {
		if (i < n && s[i] != ';')
			continue;
		ret = signed_name(r, s + start, i - start, prev, prev_len, err);
		if (ret < 0)
			return ret;
		host |= sv4_slice_is(s + start, i - start, "host");
		date |= sv4_slice_is(s + start, i - start, "x-amz-date");
		prev = s + start;
		prev_len = i - start;
		start = i + 1;
	}
	if (!host)
		return al_error_set(err, EINVAL, "SignedHeaders: host is not signed");
	if (need_date && !date)
		return al_error_set(err, EINVAL, "SignedHeaders: x-amz-date is not signed");
	return 0;
}

int sv4_copy_signed_headers(const char *s, size_t n, struct sv4_auth *a, struct al_error *err)
{
	if (n > AL_SIGV4_AUTH_MAX)
		return al_error_set(err, E2BIG, "SignedHeaders: longer than %d bytes",
				    AL_SIGV4_AUTH_MAX);
	memcpy(a->signed_headers, s, n);
	a->signed_headers[n] = '\0';
	a->signed_len = n;
	return 0;
}

int sv4_parse_signature(const char *s, size_t n, struct sv4_auth *a, struct al_error *err)
{
	if (!sv4_is_hex64(s, n))
		return al_error_set(err, EINVAL, "Signature: expected 64 lowercase hex digits");
	memcpy(a->signature, s, SV4_HEX_LEN);
	a->signature[SV4_HEX_LEN] = '\0';
	return 0;
}

/* ---- the Authorization field ------------------------------------------- */

static int one_part(const char *s, size_t n, struct sv4_parts *p, bool *seen, struct al_error *err)
{
	static const char *const names[P_N] = {"Credential", "SignedHeaders", "Signature"};
	const char *eq = memchr(s, '=', n);
	char c[SV4_CLIP_MAX];

	if (n == 0)
		return al_error_set(err, EINVAL, "Authorization: empty part");
	if (!eq || memchr(s, ' ', n) || memchr(s, '\t', n))
		return al_error_set(err, EINVAL, "Authorization: part \"%s\" is not NAME=VALUE",
				    sv4_clip(s, n, c, sizeof(c)));
	for (int i = 0; i < P_N; i++) {
		if (!sv4_slice_is(s, (size_t)(eq - s), names[i]))
			continue;
		if (seen[i])
			return al_error_set(err, EINVAL, "Authorization: %s twice", names[i]);
		seen[i] = true;
		p->v[i] = eq + 1;
		p->len[i] = n - (size_t)(eq + 1 - s);
		return 0;
	}
	return al_error_set(err, EINVAL, "Authorization: unknown part \"%s\"",
			    sv4_clip(s, (size_t)(eq - s), c, sizeof(c)));
}

int sv4_split_parts(const char *v, size_t len, struct sv4_parts *p, struct al_error *err)
{
	static const char *const names[P_N] = {"Credential", "SignedHeaders", "Signature"};
	const size_t skip = strlen(SV4_ALGORITHM " ");
	bool seen[P_N] = {false};
	char c[SV4_CLIP_MAX];
	size_t i = skip;
	int r;

	if (len > AL_SIGV4_AUTH_MAX)
		return al_error_set(err, E2BIG, "Authorization: longer than %d bytes",
				    AL_SIGV4_AUTH_MAX);
	if (len >= strlen(SV4_SIGV4A) && memcmp(v, SV4_SIGV4A, strlen(SV4_SIGV4A)) == 0)
		return al_error_set(err, ENOTSUP, "Authorization: SigV4a (%s) is not re-signed",
				    SV4_SIGV4A);
	if (len < skip || memcmp(v, SV4_ALGORITHM " ", skip) != 0)
		return al_error_set(err, EINVAL, "Authorization: \"%s\" is not %s",
				    sv4_clip(v, len, c, 24), SV4_ALGORITHM);
	for (;;) {
		size_t start = i;

		while (i < len && v[i] != ',')
			i++;
		r = one_part(v + start, i - start, p, seen, err);
		if (r < 0)
			return r;
		if (i == len)
			break;
		for (i++; i < len && v[i] == ' '; i++)
			;
	}
	for (int k = 0; k < P_N; k++)
		if (!seen[k])
			return al_error_set(err, EINVAL, "Authorization: no %s", names[k]);
	return 0;
}

/* ---- presigned-query parameters ----------------------------------------- */

const char *const sv4_qnames[Q_N] = {
    "X-Amz-Algorithm",	   "X-Amz-Credential", "X-Amz-Date",	       "X-Amz-Expires",
    "X-Amz-SignedHeaders", "X-Amz-Signature",  "X-Amz-Security-Token",
};

const char *sv4_query_of(const struct al_sigv4_request *r, size_t *ret_len)
{
	const char *qm = memchr(r->target, '?', r->target_len);

	if (!qm) {
		*ret_len = 0;
		return r->target + r->target_len;
	}
	*ret_len = r->target_len - (size_t)(qm + 1 - r->target);
	return qm + 1;
}

int sv4_scan_query(const char *q, size_t n, struct sv4_qparams *p, struct al_error *err)
{
	size_t start = 0;

	memset(p, 0, sizeof(*p));
	for (size_t i = 0; n > 0 && i <= n; i++) {
		if (i < n && q[i] != '&')
			continue;
		const char *eq = memchr(q + start, '=', i - start);
		size_t kl = eq ? (size_t)(eq - (q + start)) : i - start;

		for (int k = 0; k < Q_N; k++) {
			if (!sv4_slice_is(q + start, kl, sv4_qnames[k]))
				continue;
			if (p->seen[k])
				return al_error_set(err, EINVAL, "query: %s twice", sv4_qnames[k]);
			p->seen[k] = true;
			p->v[k] = eq ? eq + 1 : q + i;
			p->len[k] = eq ? i - (start + kl + 1) : 0;
		}
		start = i + 1;
	}
	return 0;
}

int sv4_hex_value(char c)
{
	if (sv4_is_digit(c))
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int sv4_pct_decode(const char *s, size_t n, const char *what, char *out, size_t size,
		   size_t *ret_len, struct al_error *err)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		int c = (unsigned char)s[i];

		if (c == '%') {
			int hi = i + 2 < n ? sv4_hex_value(s[i + 1]) : -1;
			int lo = hi >= 0 ? sv4_hex_value(s[i + 2]) : -1;

			if (lo < 0)
				return al_error_set(err, EINVAL, "%s: malformed percent-encoding",
						    what);
			c = hi * 16 + lo;
			i += 2;
		}
		if (o + 1 >= size)
			return al_error_set(err, E2BIG, "%s: longer than %zu bytes", what,
					    size - 1);
		out[o++] = (char)c;
	}
	out[o] = '\0';
	*ret_len = o;
	return 0;
}
