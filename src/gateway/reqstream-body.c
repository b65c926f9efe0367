/* The request stream filter's bodies: framing by Content-Length or chunked
 * (sizes, extensions and trailers parsed strictly and bounded), checked in
 * place and passed on, or collected, rewritten and sent with a
 * Content-Length of their own. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "gateway/reqstream-internal.h"

#define RS_CHUNK_SIZE_MAX (1ull << 62) /* beyond it a size reads differently elsewhere */

static size_t skip_ws(const char *s, size_t i, size_t len)
{
	while (i < len && (s[i] == ' ' || s[i] == '\t'))
		i++;
	return i;
}

static size_t skip_token(const char *s, size_t i, size_t len)
{
	while (i < len && al_is_tchar(s[i]))
		i++;
	return i;
}

/* A quoted-string from s[i] == '"'; returns the index after it, or 0. */
static size_t skip_quoted(const char *s, size_t i, size_t len)
{
	for (i++; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '"')
			return i + 1;
		if (c == '\\' && i + 1 < len &&
		    ((unsigned char)s[i + 1] >= ' ' || s[i + 1] == '\t') &&
		    (unsigned char)s[i + 1] < 0x7f)
			i++;
		else if ((c < ' ' && c != '\t') || c >= 0x7f || c == '\\')
			return 0;
	}
	return 0;
}

/* chunk-size [ chunk-ext ], the line without its CRLF (RFC 9112 7.1.1):
 * chunk-ext = *( BWS ";" BWS name [ BWS "=" BWS ( token / quoted-string ) ] ). */
static int parse_size_line(const char *s, size_t len, uint64_t *ret, const char **why)
{
	uint64_t v = 0;
	size_t i = 0;

	for (; i < len && al_hex_digit(s[i]) >= 0; i++) {
		v = v * 16 + (uint64_t)al_hex_digit(s[i]);
		if (v > RS_CHUNK_SIZE_MAX) {
			*why = "chunk size too large";
			return -1;
		}
	}
	*why = "malformed chunk size";
	if (i == 0)
		return -1;
	*why = "malformed chunk extension";
	while (i < len) {
		size_t n;

		i = skip_ws(s, i, len);
		if (i >= len || s[i] != ';')
			return -1;
		i = skip_ws(s, i + 1, len);
		n = skip_token(s, i, len);
		if (n == i)
			return -1;
		i = skip_ws(s, n, len);
		if (i < len && s[i] == '=') {
			i = skip_ws(s, i + 1, len);
			n = i < len && s[i] == '"' ? skip_quoted(s, i, len) : skip_token(s, i, len);
			if (n == 0 || n == i)
				return -1;
			i = n;
		} else if (i < len && s[i] != ';') {
			return -1;
		}
	}
	*ret = v;
	return 0;
}

/* The line at in_pos: its length without CRLF in *ret_len; 0 when it is
 * complete, 1 when more is needed, -1 when it was refused. */
static int line_at(struct al_reqstream *rs, size_t max, const char *what, size_t *ret_len)
{
	const char *p = rs->in + rs->in_pos;
	size_t avail = rs->in_len - rs->in_pos, look = avail < max ? avail : max;
	const char *lf = memchr(p, '\n', look);

	if (!lf) {
		if (avail >= max) {
			rs_refuse(rs, 400, NULL, "%s too long", what);
			return -1;
		}
		return 1;
	}
	if (lf == p || lf[-1] != '\r' || memchr(p, '\r', (size_t)(lf - p) - 1)) {
		rs_refuse(rs, 400, NULL, "%s not ended by CRLF", what);
		return -1;
	}
	*ret_len = (size_t)(lf - p) - 1;
	return 0;
}

/* Decoded body bytes, streamed or collected: looked at for needles (across
 * any split, chunks too: the scan keeps the last bytes), counted, bounded. */
static int sink(struct al_reqstream *rs, const char *data, size_t n)
{
	const struct al_reqrule *rules = rs->conf->rules;
	/* A Content-Length body that streams is the same bytes as it is sent,
	 * which the output's own scan looks at (reqstream.c). */
	int i = rs->chunked || rs->buffer ? al_needle_scan_feed(&rs->scan, data, n) : -1;

	if (i >= 0) {
		rs_misuse(rs, i, "body");
		return -1;
	}
	rs->body_seen = al_add_sat(rs->body_seen, n);
	if (rules && rules->max_body > 0 && rs->body_seen > rules->max_body) {
		rs_refuse(rs, 413, rules->text, "body larger than max_body");
		return -1;
	}
	if (!rs->buffer)
		return 0;
	if (rs->body_seen > rs->conf->body_max) {
		rs_refuse(rs, 413, NULL,
			  "a body the gateway must rewrite or hash may be at most %zu bytes",
			  rs->conf->body_max);
		return -1;
	}
	memcpy(rs->body + rs->body_used, data, n);
	rs->body_used += n;
	return 0;
}

static int size_line(struct al_reqstream *rs)
{
	const char *why = NULL;
	uint64_t size = 0;
	size_t len = 0;
	int r = line_at(rs, RS_LINE_MAX, "chunk-size line", &len), i;

	if (r != 0)
		return r;
	if (parse_size_line(rs->in + rs->in_pos, len, &size, &why) < 0) {
		rs_refuse(rs, 400, NULL, "%s", why);
		return -1;
	}
	/* Extensions go upstream when the body is streamed. */
	i = al_needles_find(rs->needles, rs->scoped, rs->in + rs->in_pos, len, NULL);
	if (i >= 0) {
		rs_misuse(rs, i, "body");
		return -1;
	}
	rs->in_pos += len + 2;
	rs->left = size;
	rs->ck = size ? RS_CK_DATA : RS_CK_TRAILER;
	return 0;
}

/* Trailer fields may not say what the head decided: framing, routing,
 * credentials. */
static bool trailer_forbidden(const struct al_reqstream *rs, const char *n, size_t len)
{
	static const char *const names[] = {
	    "content-length",
	    "transfer-encoding",
	    "host",
	    "trailer",
	    "authorization",
	    "connection",
	    "te",
	    "upgrade",
	    "keep-alive",
	    "expect",
	    "content-type",
	    "x-amz-security-token",
	    "cookie",
	};

	for (size_t i = 0; i < AL_ARRAY_SIZE(names); i++)
		if (rs_same_ci(n, len, names[i]))
			return true;
	for (size_t i = 0; i < rs->conf->n_inject; i++)
		if (rs->conf->inject[i].how == AL_SECRET_HEADER &&
		    rs_same_ci(n, len, rs->conf->inject[i].header))
			return true;
	return len >= 6 && rs_same_ci(n, 6, "proxy-");
}

static int trailer_field(struct al_reqstream *rs, const char *s, size_t len)
{
	size_t n = skip_token(s, 0, len);
	char where[96];
	int i;

	if (n == 0 || n >= len || s[n] != ':') {
		rs_refuse(rs, 400, NULL, "malformed trailer field");
		return -1;
	}
	for (size_t k = n + 1; k < len; k++)
		if (((unsigned char)s[k] < ' ' && s[k] != '\t') || s[k] == 0x7f) {
			rs_refuse(rs, 400, NULL, "control character in a trailer field");
			return -1;
		}
	i = al_needles_find(rs->needles, rs->scoped, s, len, NULL);
	if (i >= 0) {
		bool named = n <= 64 && al_needles_find(rs->needles, 0, s, n, NULL) < 0;

		snprintf(where, sizeof(where), "trailer %.*s", named ? (int)n : 0, s);
		rs_misuse(rs, i, named ? where : "trailer");
		return -1;
	}
	if (trailer_forbidden(rs, s, n)) {
		rs_refuse(rs, 400, NULL,
			  "a trailer field may not set framing, routing or "
			  "credentials");
		return -1;
	}
	return 0;
}

static int trailer_line(struct al_reqstream *rs)
{
	size_t len = 0, max = RS_TRAILER_MAX - rs->trailer_bytes + 2;
	int r = line_at(rs, max, "trailer section", &len);

	if (r != 0)
		return r;
	if (len == 0) {
		rs->in_pos += 2;
		rs->ck = RS_CK_DONE;
		return 0;
	}
	if (rs->buffer) {
		rs_refuse(rs, 400, NULL,
			  "trailer fields in a chunked body the gateway rewrites or hashes");
		return -1;
	}
	if (++rs->trailer_fields > RS_TRAILERS_MAX) {
		rs_refuse(rs, 400, NULL, "more than %d trailer fields", RS_TRAILERS_MAX);
		return -1;
	}
	if (trailer_field(rs, rs->in + rs->in_pos, len) < 0)
		return -1;
	rs->trailer_bytes += len + 2;
	rs->in_pos += len + 2;
	return 0;
}

static int data_end(struct al_reqstream *rs)
{
	size_t avail = rs->in_len - rs->in_pos;
	const char *p = rs->in + rs->in_pos;

	if ((avail >= 1 && p[0] != '\r') || (avail >= 2 && p[1] != '\n')) {
		rs_refuse(rs, 400, NULL, "chunk data not followed by CRLF");
		return -1;
	}
	if (avail < 2)
		return 1;
	rs->in_pos += 2;
	rs->ck = RS_CK_SIZE;
	return 0;
}

/* Move in_pos over what can be checked; data go to sink(). */
static void advance(struct al_reqstream *rs)
{
	int r = 0;

	while (r == 0 && rs->st != RS_FINAL && !rs_body_done(rs) && rs->in_pos < rs->in_len) {
		size_t avail = rs->in_len - rs->in_pos, n;

		if (rs->chunked && rs->ck == RS_CK_SIZE) {
			r = size_line(rs);
		} else if (rs->chunked && rs->ck == RS_CK_DATA_END) {
			r = data_end(rs);
		} else if (rs->chunked && rs->ck == RS_CK_TRAILER) {
			r = trailer_line(rs);
		} else {
			n = rs->left < avail ? (size_t)rs->left : avail;
			if (sink(rs, rs->in + rs->in_pos, n) < 0)
				return;
			rs->in_pos += n;
			rs->left -= n;
			if (rs->chunked && rs->left == 0)
				rs->ck = RS_CK_DATA_END;
		}
	}
}

enum rs_ctype rs_body_type(const struct al_reqstream *rs)
{
	int i = rs_find_field(rs, "Content-Type");
	const char *v, *semi;
	size_t n;

	if (i < 0)
		return RS_CT_RAW;
	v = rs->head + rs->req.headers[i].value.off;
	n = rs->req.headers[i].value.len;
	semi = memchr(v, ';', n);
	if (semi)
		n = (size_t)(semi - v);
	while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
		n--;
	if (rs_same_ci(v, n, "application/x-www-form-urlencoded"))
		return RS_CT_FORM;
	if (rs_same_ci(v, n, "application/json") || (n > 5 && rs_same_ci(v + n - 5, 5, "+json")))
		return RS_CT_JSON;
	return RS_CT_RAW;
}

bool rs_body_done(const struct al_reqstream *rs)
{
	return rs->chunked ? rs->ck == RS_CK_DONE : rs->left == 0;
}

void rs_body_stream(struct al_reqstream *rs)
{
	advance(rs);
}

void rs_body_collect(struct al_reqstream *rs)
{
	advance(rs);
	/* Framing is dropped and data are copied: nothing waits in in. */
	rs->in_off = rs->in_pos;
}

/* Where the next placeholder of a body secret starts, at or after from,
 * and whose it is. Each secret's next occurrence is remembered, so the
 * whole walk costs one search per secret and occurrence. */
static size_t next_placeholder(struct al_reqstream *rs, size_t from, int *ret_sec)
{
	size_t best = rs->body_used;

	*ret_sec = -1;
	for (size_t i = 0; i < rs->conf->n_inject; i++) {
		const struct al_secret_use *s = &rs->conf->inject[i];
		const char *hit;

		if (!s->body || rs->occ[i] == RS_OCC_NONE)
			continue;
		if (rs->occ[i] == RS_OCC_UNKNOWN || rs->occ[i] < from) {
			hit = memmem(rs->body + from, rs->body_used - from, s->placeholder,
				     rs->sec[i].ph_len);
			rs->occ[i] = hit ? (size_t)(hit - rs->body) : RS_OCC_NONE;
		}
		if (rs->occ[i] < best) {
			best = rs->occ[i];
			*ret_sec = (int)i;
		}
	}
	return best;
}

static void walk_start(struct al_reqstream *rs)
{
	for (size_t i = 0; i < rs->conf->n_inject; i++)
		rs->occ[i] = RS_OCC_UNKNOWN;
	rs->walk_pos = 0;
	rs->walk_sec = -1;
	rs->walk_voff = 0;
}

int rs_body_finish(struct al_reqstream *rs)
{
	bool hash = rs->resign || rs->amz_sha >= 0;
	unsigned char md[SHA256_DIGEST_LENGTH];
	uint64_t len = 0;
	SHA256_CTX ctx;
	int sec;

	if (hash && SHA256_Init(&ctx) != 1)
		hash = false;
	walk_start(rs);
	for (size_t pos = 0; pos < rs->body_used;) {
		size_t at = next_placeholder(rs, pos, &sec);
		const struct rs_secret *e = sec >= 0 ? &rs->sec[sec] : NULL;

		if (hash)
			SHA256_Update(&ctx, rs->body + pos, at - pos);
		len += at - pos;
		if (!e)
			break;
		if (hash)
			SHA256_Update(&ctx, e->enc[rs->ctype], e->enc_len[rs->ctype]);
		len += e->enc_len[rs->ctype];
		rs->hits[sec]++;
		rs->rewritten = true;
		pos = at + e->ph_len;
	}
	if (hash && SHA256_Final(md, &ctx) == 1) {
		for (size_t i = 0; i < sizeof(md); i++)
			snprintf(rs->sha_hex + 2 * i, 3, "%02x", md[i]);
		rs->hashed = true;
	}
	if (rs->resign && !rs->hashed) {
		rs_refuse(rs, 500, NULL, "the body could not be hashed");
		return -1;
	}
	rs->body_len = (int64_t)len;
	if (rs_head_build(rs) < 0 || !rs_out_ok(rs, rs->out, rs->out_len, "request line"))
		return -1;
	walk_start(rs);
	for (const char *d = NULL; (len = rs_body_emit(rs, SIZE_MAX, &d)) > 0;)
		if (!rs_out_ok(rs, d, len, "body"))
			return -1;
	walk_start(rs);
	rs->st = RS_ANNOUNCE;
	return 0;
}

size_t rs_body_emit(struct al_reqstream *rs, size_t room, const char **data)
{
	size_t at, n;
	int sec;

	if (rs->walk_sec >= 0) {
		const struct rs_secret *e = &rs->sec[rs->walk_sec];

		n = e->enc_len[rs->ctype] - rs->walk_voff;
		n = n < room ? n : room;
		*data = e->enc[rs->ctype] + rs->walk_voff;
		rs->walk_voff += n;
		if (rs->walk_voff == e->enc_len[rs->ctype]) {
			rs->walk_pos += e->ph_len;
			rs->walk_sec = -1;
		}
		return n;
	}
	if (rs->walk_pos >= rs->body_used)
		return 0;
	at = next_placeholder(rs, rs->walk_pos, &sec);
	if (at == rs->walk_pos && sec >= 0) {
		rs->walk_sec = sec;
		rs->walk_voff = 0;
		return rs_body_emit(rs, room, data);
	}
	n = at - rs->walk_pos < room ? at - rs->walk_pos : room;
	*data = rs->body + rs->walk_pos;
	rs->walk_pos += n;
	return n;
}
