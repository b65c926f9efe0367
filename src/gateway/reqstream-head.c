/* The request stream filter's secrets (checked and encoded once, when the
 * filter is made) and the head it sends upstream for each request. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
/* The low-level SHA-256 and base64 (see supervisor/copy.c: EVP's digests
 * would link libcrypto's provider machinery into the static binary). */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/evp.h>
#include <openssl/sha.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "gateway/reqstream-internal.h"

static bool is_printable(const char *s, size_t n, bool tab)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if ((c < 0x20 && !(tab && c == '\t')) || c >= 0x7f)
			return false;
	}
	return true;
}

static bool is_token(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n == 0 || n > 64)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      strchr("!#$%&'*+-.^_`|~", c)))
			return false;
	}
	return true;
}

static bool is_needle_text(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	return n >= AL_NEEDLE_MIN && n <= AL_NEEDLE_MAX && is_printable(s, n, false) &&
	       !strchr(s, ' ');
}

/* Fields the filter itself owns (framing, routing, hop-by-hop): a secret
 * may not be presented in them. */
static bool is_reserved_field(const char *name)
{
	static const char *const reserved[] = {
	    "host",
	    "content-length",
	    "transfer-encoding",
	    "connection",
	    "keep-alive",
	    "te",
	    "trailer",
	    "upgrade",
	    "expect",
	    "x-amz-security-token",
	    "x-amz-content-sha256",
	};

	for (size_t i = 0; i < AL_ARRAY_SIZE(reserved); i++)
		if (strcasecmp(name, reserved[i]) == 0)
			return true;
	return strncasecmp(name, "proxy-", 6) == 0;
}

static bool is_unreserved(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '.' || c == '_' || c == '~';
}

static char *percent_encode(const char *s, size_t n, size_t *ret_len)
{
	static const char hex[] = "0123456789ABCDEF";
	char *out = xmalloc(3 * n + 1);
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (is_unreserved((char)c)) {
			out[o++] = (char)c;
			continue;
		}
		out[o++] = '%';
		out[o++] = hex[c >> 4];
		out[o++] = hex[c & 15];
	}
	out[o] = '\0';
	*ret_len = o;
	return out;
}

/* The inside of a JSON string: the placeholder was inside one. */
static char *json_escape(const char *s, size_t n, size_t *ret_len)
{
	char *out = xmalloc(6 * n + 1);
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '"' || c == '\\') {
			out[o++] = '\\';
			out[o++] = (char)c;
		} else if (c < 0x20) {
			o += (size_t)snprintf(out + o, 7, "\\u%04x", c);
		} else {
			out[o++] = (char)c;
		}
	}
	out[o] = '\0';
	*ret_len = o;
	return out;
}

static char *header_field(const struct al_secret_use *s, size_t *ret_len)
{
	const char *brace = strstr(s->tmpl, "{}");
	size_t pre = (size_t)(brace - s->tmpl), post = strlen(brace + 2);
	char *out = xmalloc(pre + s->value_len + post + 1);

	memcpy(out, s->tmpl, pre);
	memcpy(out + pre, s->value, s->value_len);
	memcpy(out + pre + s->value_len, brace + 2, post + 1);
	*ret_len = pre + s->value_len + post;
	return out;
}

static char *basic_field(const struct al_secret_use *s, size_t *ret_len)
{
	size_t ul = strlen(s->user), n = ul + 1 + s->value_len;
	char *plain = xmalloc(n), *out = xmalloc(6 + 4 * ((n + 2) / 3) + 1);
	int len;

	memcpy(plain, s->user, ul);
	plain[ul] = ':';
	memcpy(plain + ul + 1, s->value, s->value_len);
	memcpy(out, "Basic ", 6);
	len = EVP_EncodeBlock((unsigned char *)out + 6, (const unsigned char *)plain, (int)n);
	explicit_bzero(plain, n);
	free(plain);
	*ret_len = 6 + (size_t)len;
	return out;
}

/* What each kind needs; the value is never quoted in a message. */
static int check_kind(const struct al_reqstream *rs, const struct al_secret_use *s,
		      struct al_error *err)
{
	switch (s->how) {
	case AL_SECRET_HEADER:
		if (!is_token(s->header) || is_reserved_field(s->header))
			return al_error_set(err, EINVAL,
					    "secret %s: header is missing, not a field "
					    "name, or one the gateway sets itself",
					    s->name);
		if (!s->tmpl || !strstr(s->tmpl, "{}") || strstr(strstr(s->tmpl, "{}") + 2, "{}") ||
		    !is_printable(s->tmpl, strlen(s->tmpl), true))
			return al_error_set(err, EINVAL,
					    "secret %s: the template must be printable and hold "
					    "\"{}\" exactly once",
					    s->name);
		if (!is_printable(s->value, s->value_len, true))
			return al_error_set(
			    err, EINVAL,
			    "secret %s: its value has control characters and cannot "
			    "go in a header",
			    s->name);
		return 0;
	case AL_SECRET_BASIC:
		if (!s->user || strchr(s->user, ':') ||
		    !is_printable(s->user, strlen(s->user), false))
			return al_error_set(err, EINVAL,
					    "secret %s: the user is missing, has a ':' or is not "
					    "printable",
					    s->name);
		return 0;
	case AL_SECRET_QUERY:
		if (!s->param || !*s->param || strlen(s->param) > RS_PARAM_MAX ||
		    !is_printable(s->param, strlen(s->param), false))
			return al_error_set(
			    err, EINVAL,
			    "secret %s: the query parameter is missing, longer than "
			    "%d bytes or not printable",
			    s->name, RS_PARAM_MAX);
		return 0;
	case AL_SECRET_SIGV4:
		if (!rs->conf->sigv4)
			return al_error_set(err, EINVAL, "secret %s: SigV4 needs a signer",
					    s->name);
		if (!is_needle_text(s->fake_key_id))
			return al_error_set(err, EINVAL,
					    "secret %s: the fake key id is not 8-256 "
					    "printable characters",
					    s->name);
		if (s->token_placeholder &&
		    (!is_needle_text(s->token_placeholder) || !s->token || s->token_len == 0 ||
		     !is_printable(s->token, s->token_len, false)))
			return al_error_set(
			    err, EINVAL,
			    "secret %s: a session token needs a placeholder of 8-256 "
			    "printable characters and a printable real token",
			    s->name);
		if (s->body)
			return al_error_set(err, EINVAL,
					    "secret %s: a SigV4 secret key never goes in a body",
					    s->name);
		return 0;
	case AL_SECRET_BODY:
		if (!s->body)
			return al_error_set(err, EINVAL,
					    "secret %s: presented in bodies, but body is off",
					    s->name);
		return 0;
	}
	return al_error_set(err, EINVAL, "secret %s: unknown presentation %d", s->name, s->how);
}

static int check_secret(const struct al_reqstream *rs, size_t i, struct al_error *err)
{
	const struct al_secret_use *s = &rs->conf->inject[i];
	size_t bmax = rs->conf->body_max;

	if (!s->name || !*s->name || strlen(s->name) > 128 ||
	    !is_printable(s->name, strlen(s->name), false))
		return al_error_set(err, EINVAL,
				    "secret %zu: no name, or one that is not 1-128 printable "
				    "characters",
				    i);
	if (!is_needle_text(s->placeholder))
		return al_error_set(err, EINVAL,
				    "secret %s: the placeholder is not 8-256 printable characters",
				    s->name);
	if (!s->value || s->value_len == 0)
		return al_error_set(err, EINVAL, "secret %s: no value", s->name);
	if ((s->body || s->how == AL_SECRET_SIGV4) && (bmax == 0 || bmax > RS_BODY_MAX_LIMIT))
		return al_error_set(err, EINVAL,
				    "secret %s: body_max must be 1 to %u bytes to rewrite or hash "
				    "bodies",
				    s->name, RS_BODY_MAX_LIMIT);
	return check_kind(rs, s, err);
}

static const char *presented_in(const struct al_secret_use *s)
{
	if (s->how == AL_SECRET_HEADER)
		return s->header;
	if (s->how == AL_SECRET_BASIC || s->how == AL_SECRET_SIGV4)
		return "Authorization";
	return NULL;
}

/* Two secrets in one field or one parameter: which one goes out would be
 * an accident of order. */
static int check_clashes(const struct al_reqstream_conf *conf, struct al_error *err)
{
	for (size_t i = 0; i < conf->n_inject; i++)
		for (size_t j = i + 1; j < conf->n_inject; j++) {
			const struct al_secret_use *a = &conf->inject[i], *b = &conf->inject[j];
			const char *fa = presented_in(a), *fb = presented_in(b);

			if (fa && fb && strcasecmp(fa, fb) == 0)
				return al_error_set(err, EINVAL,
						    "secrets %s and %s are both presented in %s",
						    a->name, b->name, fa);
			if (a->how == AL_SECRET_QUERY && b->how == AL_SECRET_QUERY &&
			    strcmp(a->param, b->param) == 0)
				return al_error_set(
				    err, EINVAL,
				    "secrets %s and %s are both the query parameter "
				    "%s",
				    a->name, b->name, a->param);
		}
	return 0;
}

static void encode_secret(struct al_reqstream *rs, size_t i, size_t *extra_head,
			  size_t *extra_target)
{
	const struct al_secret_use *s = &rs->conf->inject[i];
	struct rs_secret *e = &rs->sec[i];

	e->ph_len = strlen(s->placeholder);
	if (s->how == AL_SECRET_HEADER)
		e->field = header_field(s, &e->field_len);
	else if (s->how == AL_SECRET_BASIC)
		e->field = basic_field(s, &e->field_len);
	if (e->field)
		*extra_head += strlen(presented_in(s)) + e->field_len + 4;
	if (s->how == AL_SECRET_QUERY) {
		size_t pl, vl;
		char *p = percent_encode(s->param, strlen(s->param), &pl);
		char *v = percent_encode(s->value, s->value_len, &vl);

		e->query = xasprintf("%s=%s", p, v);
		e->query_len = pl + 1 + vl;
		explicit_bzero(v, vl);
		free(p);
		free(v);
		*extra_target += e->query_len + 1;
	}
	if (s->how == AL_SECRET_SIGV4 && s->token_placeholder)
		*extra_head += s->token_len;
	if (s->body) {
		e->enc[RS_CT_RAW] = xmalloc(s->value_len);
		memcpy(e->enc[RS_CT_RAW], s->value, s->value_len);
		e->enc_len[RS_CT_RAW] = s->value_len;
		e->enc[RS_CT_FORM] =
		    percent_encode(s->value, s->value_len, &e->enc_len[RS_CT_FORM]);
		e->enc[RS_CT_JSON] = json_escape(s->value, s->value_len, &e->enc_len[RS_CT_JSON]);
		rs->any_body = true;
	}
}

static void wipe_free(char **p, size_t len)
{
	if (*p) {
		explicit_bzero(*p, len);
		free(*p);
		*p = NULL;
	}
}

int al_reqstream_set_value(struct al_reqstream *rs, size_t i, const char *value, size_t len)
{
	const struct al_secret_use *s = &rs->conf->inject[i];
	struct rs_secret *e = &rs->sec[i];
	struct al_secret_use now = *s;
	size_t fl = 0, ql = 0;
	char *field = NULL, *query = NULL;

	if (i >= rs->conf->n_inject || s->body || s->how == AL_SECRET_SIGV4 ||
	    !is_printable(value, len, true))
		return -EINVAL;
	now.value = value;
	now.value_len = len;
	if (s->how == AL_SECRET_HEADER)
		field = header_field(&now, &fl);
	else if (s->how == AL_SECRET_BASIC)
		field = basic_field(&now, &fl);
	if (s->how == AL_SECRET_QUERY) {
		size_t pl, vl;
		char *p = percent_encode(s->param, strlen(s->param), &pl);
		char *v = percent_encode(value, len, &vl);
		query = xasprintf("%s=%s", p, v);
		ql = pl + 1 + vl;
		explicit_bzero(v, vl);
		free(p);
		free(v);
	}
	/* The head's room was sized for the first value. */
	if ((field && fl > e->field_len) || (query && ql > e->query_len)) {
		wipe_free(&field, fl);
		wipe_free(&query, ql);
		return -ENOSPC;
	}
	if (field) {
		wipe_free(&e->field, e->field_len);
		e->field = field;
		e->field_len = fl;
	}
	if (query) {
		wipe_free(&e->query, e->query_len);
		e->query = query;
		e->query_len = ql;
	}
	return 0;
}

int rs_secrets_prepare(struct al_reqstream *rs, struct al_error *err)
{
	const struct al_reqstream_conf *conf = rs->conf;
	size_t extra_head = 0, extra_target = 0;
	int r;

	if (conf->n_inject > RS_INJECT_MAX)
		return al_error_set(err, EINVAL, "more than %d secrets on one connection",
				    RS_INJECT_MAX);
	if (conf->body_max > RS_BODY_MAX_LIMIT)
		return al_error_set(err, EINVAL, "body_max over %u bytes", RS_BODY_MAX_LIMIT);
	for (size_t i = 0; i < conf->n_inject; i++) {
		r = check_secret(rs, i, err);
		if (r < 0)
			return r;
	}
	r = check_clashes(conf, err);
	if (r < 0)
		return r;
	rs->sec = xcalloc(conf->n_inject + 1, sizeof(*rs->sec));
	for (size_t i = 0; i < conf->n_inject; i++) {
		encode_secret(rs, i, &extra_head, &extra_target);
		if (conf->inject[i].how == AL_SECRET_SIGV4)
			rs->sigv4 = (int)i;
	}
	rs->injected = xcalloc(conf->n_inject + 1, sizeof(char *));
	rs->occ = xcalloc(conf->n_inject + 1, sizeof(size_t));
	rs->hits = xcalloc(conf->n_inject + 1, sizeof(size_t));
	rs->cap_views = AL_HTTP_HEADERS_MAX + conf->n_inject + 4;
	rs->views = xcalloc(rs->cap_views, sizeof(*rs->views));
	rs->target_size = AL_HTTP_HEAD_MAX + extra_target + 2;
	rs->target = xmalloc(rs->target_size);
	/* The parsed head bounds everything taken from it; the rest is what
	 * the filter adds: secrets, a signature, Host, framing. */
	rs->out_size = AL_HTTP_HEAD_MAX + extra_head + extra_target + AL_REQSTREAM_SIGV4_MAX +
		       sizeof(rs->host_field) + 256;
	rs->out = xmalloc(rs->out_size);
	return 0;
}

static void wipe(char *p, size_t n)
{
	if (p) {
		explicit_bzero(p, n);
		free(p);
	}
}

void rs_secrets_free(struct al_reqstream *rs)
{
	for (size_t i = 0; rs->sec && i < rs->conf->n_inject; i++) {
		struct rs_secret *e = &rs->sec[i];

		wipe(e->field, e->field_len);
		wipe(e->query, e->query_len);
		for (int k = 0; k < RS_CT_N; k++)
			wipe(e->enc[k], e->enc_len[k]);
	}
	free(rs->sec);
	free(rs->injected);
	free(rs->occ);
	free(rs->hits);
	free(rs->views);
	free(rs->target);
	if (rs->out)
		explicit_bzero(rs->out, rs->out_size);
	free(rs->out);
}

int rs_sha256_hex(const char *buf, size_t len, char hex[65])
{
	unsigned char md[SHA256_DIGEST_LENGTH];
	SHA256_CTX ctx;

	if (SHA256_Init(&ctx) != 1 || SHA256_Update(&ctx, buf, len) != 1 ||
	    SHA256_Final(md, &ctx) != 1)
		return -EIO;
	for (size_t i = 0; i < sizeof(md); i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	return 0;
}

static bool starts_with(const char *s, size_t len, const char *lit)
{
	size_t n = strlen(lit);

	return len >= n && memcmp(s, lit, n) == 0;
}

int rs_sigv4_plan(struct al_reqstream *rs)
{
	const struct al_http_header *h;
	int auth;

	rs->amz_sha = rs_find_field(rs, "x-amz-content-sha256");
	if (rs->sigv4 < 0)
		return 0;
	auth = rs_find_field(rs, "Authorization");
	if (auth < 0)
		return 0;
	h = &rs->req.headers[auth];
	/* Only what the sandbox signed with the fake key is re-signed:
	 * anonymous and other requests go as they are. */
	if (!starts_with(rs->head + h->value.off, h->value.len, "AWS4-HMAC-SHA256 "))
		return 0;
	if (rs->amz_sha >= 0) {
		h = &rs->req.headers[rs->amz_sha];
		if (starts_with(rs->head + h->value.off, h->value.len, "STREAMING-") &&
		    !starts_with(rs->head + h->value.off, h->value.len,
				 "STREAMING-UNSIGNED-PAYLOAD-TRAILER")) {
			rs_refuse(rs, 501, NULL,
				  "a SigV4 streaming payload (signed chunks) cannot be re-signed");
			return -1;
		}
	}
	rs->resign = true;
	return 0;
}

/* Bounded appends (o->len counts on past the end, for the caller's
 * -ENOSPC), as in http.c. */
struct out {
	char *buf;
	size_t size, len;
};

static void put(struct out *o, const char *s, size_t n)
{
	if (n <= o->size - o->len && o->len <= o->size)
		memcpy(o->buf + o->len, s, n);
	o->len += n;
}

/* Is the query pair p (len bytes) the parameter param, once its name is
 * decoded as a server decodes it (%XX, '+' for space)? */
static bool pair_is(const char *p, size_t len, const char *param)
{
	const char *eq = memchr(p, '=', len);
	size_t n = eq ? (size_t)(eq - p) : len, j = 0;

	for (size_t i = 0; i < n; j++) {
		char c = p[i];
		int hi = p[i] == '%' && i + 2 < n ? al_hex_digit(p[i + 1]) : -1;
		int lo = hi >= 0 ? al_hex_digit(p[i + 2]) : -1;

		if (lo >= 0) {
			c = (char)(hi * 16 + lo);
			i += 3;
		} else {
			c = c == '+' ? ' ' : c;
			i++;
		}
		if (param[j] != c)
			return false;
	}
	return param[j] == '\0';
}

static int query_secret(const struct al_reqstream *rs, const char *p, size_t len)
{
	for (size_t i = 0; i < rs->conf->n_inject; i++) {
		const struct al_secret_use *s = &rs->conf->inject[i];

		if (s->how == AL_SECRET_QUERY && pair_is(p, len, s->param))
			return (int)i;
	}
	return -1;
}

static void injected(struct al_reqstream *rs, const char *name)
{
	for (size_t i = 0; i < rs->n_injected; i++)
		if (rs->injected[i] == name)
			return;
	rs->injected[rs->n_injected++] = name;
}

/* The normalised path, then the query with every QUERY secret's parameter
 * set: in place of its first occurrence (others dropped), or at the end. */
static int build_target(struct al_reqstream *rs)
{
	struct out o = {rs->target, rs->target_size, 0};
	const char *q = rs->query ? rs->query + 1 : "";
	size_t ql = rs->query ? rs->query_len - 1 : 0, n_pairs = 0;
	uint32_t placed = 0, wanted = 0;

	put(&o, rs->path, rs->path_len);
	for (size_t k = 0; k < rs->conf->n_inject; k++)
		if (rs->conf->inject[k].how == AL_SECRET_QUERY)
			wanted |= 1u << k;
	if (!wanted && rs->query)
		put(&o, rs->query, rs->query_len);
	for (size_t s = 0, e; wanted && s < ql; s = e + 1) {
		const char *amp = memchr(q + s, '&', ql - s);
		int k;

		e = amp ? (size_t)(amp - q) : ql;
		k = query_secret(rs, q + s, e - s);
		if (k >= 0 && (placed & (1u << k)))
			continue;
		put(&o, n_pairs++ ? "&" : "?", 1);
		if (k >= 0)
			put(&o, rs->sec[k].query, rs->sec[k].query_len);
		else
			put(&o, q + s, e - s);
		if (k >= 0)
			placed |= 1u << k;
	}
	for (size_t k = 0; k < rs->conf->n_inject; k++) {
		if (!(wanted & (1u << k)))
			continue;
		injected(rs, rs->conf->inject[k].name);
		if (placed & (1u << k))
			continue;
		put(&o, n_pairs++ ? "&" : "?", 1);
		put(&o, rs->sec[k].query, rs->sec[k].query_len);
	}
	if (o.len > o.size) {
		rs_refuse(rs, 414, NULL, "the request target is too long once rewritten");
		return -1;
	}
	rs->target_len = o.len;
	return 0;
}

static void view(struct al_reqstream *rs, const char *name, size_t nl, const char *value, size_t vl)
{
	/* cap_views counts every field a head can have plus every one the
	 * filter adds. */
	if (rs->n_views < rs->cap_views)
		rs->views[rs->n_views++] = (struct al_http_header_view){name, nl, value, vl};
}

/* A field of the sandbox's that does not go upstream as it is. */
static bool dropped(const struct al_reqstream *rs, const struct al_http_header *h)
{
	const char *name = rs->head + h->name.off;

	if (h->flags & (AL_HTTP_HDR_HOP | AL_HTTP_HDR_PROXY | AL_HTTP_HDR_HOST))
		return true;
	for (size_t i = 0; i < rs->conf->n_inject; i++) {
		const struct al_secret_use *s = &rs->conf->inject[i];
		const char *f = presented_in(s);

		if (f && (s->how != AL_SECRET_SIGV4 || rs->resign) &&
		    rs_same_ci(name, h->name.len, f))
			return true;
	}
	/* A buffered body goes with a Content-Length of its own, and its head
	 * only once the body is all here: nothing to expect a 100 for. */
	return rs->buffer && (rs_same_ci(name, h->name.len, "Content-Length") ||
			      rs_same_ci(name, h->name.len, "Transfer-Encoding") ||
			      rs_same_ci(name, h->name.len, "Expect"));
}

static bool is_hex64(const char *s, size_t len)
{
	if (len != 64)
		return false;
	for (size_t i = 0; i < len; i++)
		if (al_hex_digit(s[i]) < 0)
			return false;
	return true;
}

/* Accept-Encoding where answers are searched: the codings of the
 * sandbox's list the search can undo (gateway/answer.h), or identity. */
static void accept_encoding(struct al_reqstream *rs, const char *v, size_t vl)
{
	static const char *const ok[] = {"gzip", "x-gzip", "deflate", "br", "identity"};
	const char *p = v, *end = v + vl;
	size_t o = 0;

	while (p < end) {
		while (p < end && (*p == ' ' || *p == '\t' || *p == ','))
			p++;
		const char *e = p;
		while (e < end && *e != ',')
			e++;
		size_t name = 0;
		while (p + name < e && al_is_tchar(p[name]))
			name++;
		size_t len = (size_t)(e - p);
		while (len && (p[len - 1] == ' ' || p[len - 1] == '\t'))
			len--;
		for (size_t i = 0; name && i < AL_ARRAY_SIZE(ok); i++)
			if (rs_same_ci(p, name, ok[i]) && o + len + 2 < sizeof(rs->accept_enc)) {
				if (o)
					o += (size_t)snprintf(rs->accept_enc + o, 3, ", ");
				memcpy(rs->accept_enc + o, p, len);
				o += len;
				break;
			}
		p = e;
	}
	if (!o)
		o = (size_t)snprintf(rs->accept_enc, sizeof(rs->accept_enc), "identity");
	rs->accept_enc[o] = '\0';
}

/* The sandbox's fields as they go: the fake session token becomes the real
 * one, a body hash follows a rewritten body, Accept-Encoding names only
 * what the answers' search can decode. */
static void copy_fields(struct al_reqstream *rs)
{
	const struct al_secret_use *sv = rs->sigv4 >= 0 ? &rs->conf->inject[rs->sigv4] : NULL;

	for (size_t i = 0; i < rs->req.n_headers; i++) {
		const struct al_http_header *h = &rs->req.headers[i];
		const char *name = rs->head + h->name.off, *v = rs->head + h->value.off;
		size_t vl = h->value.len;

		if (dropped(rs, h))
			continue;
		if ((int)i == rs->amz_sha && rs->rewritten && rs->hashed && is_hex64(v, vl)) {
			v = rs->sha_hex;
			vl = 64;
		} else if (sv && sv->token_placeholder &&
			   rs_same_ci(name, h->name.len, "X-Amz-Security-Token") &&
			   vl == strlen(sv->token_placeholder) &&
			   memcmp(v, sv->token_placeholder, vl) == 0) {
			v = sv->token;
			vl = sv->token_len;
			injected(rs, sv->name);
		} else if (rs->conf->n_inject && rs_same_ci(name, h->name.len, "Accept-Encoding")) {
			accept_encoding(rs, v, vl);
			v = rs->accept_enc;
			vl = strlen(v);
		}
		view(rs, name, h->name.len, v, vl);
	}
}

static int resign(struct al_reqstream *rs)
{
	const struct al_secret_use *s = &rs->conf->inject[rs->sigv4];
	const struct al_http_request *q = &rs->req;
	int auth = rs_find_field(rs, "Authorization"), r;

	/* The signer checks the sandbox's own signature before it signs
	 * anew: it gets that Authorization too, as the last field (then it
	 * goes: the new one takes its place below). */
	size_t n = rs->n_views;
	view(rs, rs->head + q->headers[auth].name.off, q->headers[auth].name.len,
	     rs->head + q->headers[auth].value.off, q->headers[auth].value.len);
	if (rs->n_views == n) {
		rs_refuse(rs, 500, NULL, "the request could not be re-signed (SigV4)");
		return -1;
	}
	rs->n_views = n;
	r = rs->conf->sigv4(rs->conf->sigv4_data, s, rs->head + q->method.off, q->method.len,
			    rs->target, rs->target_len, rs->views, n + 1,
			    rs->hashed && rs->amz_sha < 0 ? rs->sha_hex : NULL, rs->auth,
			    sizeof(rs->auth));
	if (r < 0 || r >= (int)sizeof(rs->auth)) {
		rs_refuse(rs, r == -EINVAL ? 400 : 500, NULL,
			  "the request could not be re-signed (SigV4)");
		return -1;
	}
	if (r == 0) {
		view(rs, rs->head + q->headers[auth].name.off, q->headers[auth].name.len,
		     rs->head + q->headers[auth].value.off, q->headers[auth].value.len);
		return 0;
	}
	view(rs, "Authorization", 13, rs->auth, (size_t)r);
	injected(rs, s->name);
	return 0;
}

int rs_head_build(struct al_reqstream *rs)
{
	const struct al_http_request *q = &rs->req;
	int n;

	rs->n_views = 0;
	rs->n_injected = 0;
	if (q->host_header >= 0)
		view(rs, "Host", 4, rs->head + q->headers[q->host_header].value.off,
		     q->headers[q->host_header].value.len);
	else
		view(rs, "Host", 4, rs->host_field, strlen(rs->host_field));
	copy_fields(rs);
	for (size_t i = 0; i < rs->conf->n_inject; i++) {
		const struct al_secret_use *s = &rs->conf->inject[i];

		if (!rs->sec[i].field)
			continue;
		view(rs, presented_in(s), strlen(presented_in(s)), rs->sec[i].field,
		     rs->sec[i].field_len);
		injected(rs, s->name);
	}
	if (rs->buffer) {
		snprintf(rs->clen, sizeof(rs->clen), "%lld", (long long)rs->body_len);
		view(rs, "Content-Length", 14, rs->clen, strlen(rs->clen));
	}
	if (rs->close)
		view(rs, "Connection", 10, "close", 5);
	if (build_target(rs) < 0)
		return -1;
	for (size_t i = 0; i < rs->conf->n_inject; i++)
		if (rs->hits[i] > 0)
			injected(rs, rs->conf->inject[i].name);
	if (rs->resign && resign(rs) < 0)
		return -1;
	n = al_http_format_head(rs->head + q->method.off, q->method.len, rs->target, rs->target_len,
				rs->views, rs->n_views, rs->out, rs->out_size);
	if (n < 0) {
		rs_refuse(rs, 431, NULL, "the request head is too large once rewritten");
		return -1;
	}
	rs->out_len = (size_t)n;
	rs->out_off = 0;
	return 0;
}
