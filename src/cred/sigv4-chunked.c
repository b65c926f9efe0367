/* Bodies of signed chunks (sigv4.h), re-signed as they stream. On the wire
 * each chunk is
 *   HEX-SIZE ";chunk-signature=" SIGNATURE CRLF DATA CRLF
 * the last one has size 0 (and no data), and with a trailer the last chunk
 * is followed by "name:value" CRLF lines, "x-amz-trailer-signature:"
 * SIGNATURE CRLF, and CRLF. A chunk's string to sign is
 *   "AWS4-HMAC-SHA256-PAYLOAD" \n TIMESTAMP \n SCOPE \n PREVIOUS \n
 *   SHA256("") \n SHA256(DATA)
 * and the trailer's
 *   "AWS4-HMAC-SHA256-TRAILER" \n TIMESTAMP \n SCOPE \n PREVIOUS \n
 *   SHA256(each field as "name:value\n")
 * where PREVIOUS is the signature before it, the head's for the first
 * chunk. So two chains run side by side: the placeholder's, to verify what
 * the sandbox signed, and the real key's, written in its place. */
#include "cred/sigv4-internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/crypto.h>
#include <openssl/sha.h>

#include "core/util.h"

#define SIG_FIELD   ";chunk-signature="
#define TRAILER_SIG "x-amz-trailer-signature:"
#define HEAD_MAX    (8 + sizeof(SIG_FIELD) - 1 + SV4_HEX_LEN + 2) /* with CRLF */
#define EMPTY_HASH  "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

enum state {
	ST_HEAD,    /* reading a chunk's header line */
	ST_DATA,    /* reading its data and CRLF (the body's last CRLF for the last) */
	ST_TRAILER, /* reading the trailer's lines, after the last chunk's header */
	ST_OUT,	    /* the re-signed unit is pending */
	ST_DONE,
	ST_FAILED,
};

struct al_sigv4_chunked {
	struct sv4_key fake_key, real_key;
	bool verify, trailer;
	char timestamp[17];
	char scope[9 + 2 * (SV4_SCOPE_PART_MAX + 1) + 13];
	char fake_prev[SV4_HEX_LEN + 1], real_prev[SV4_HEX_LEN + 1];
	enum state state;
	bool last;		 /* the unit held is the last chunk */
	unsigned long chunk;	 /* chunks seen, for messages */
	char *buf;		 /* the unit: header line, data or trailer */
	size_t cap, len, need;	 /* need: the unit's length, once known */
	size_t head_len;	 /* the header line's, CRLF included */
	size_t line;		 /* where the trailer line being read starts */
	size_t trailer_sig;	 /* the trailer signature's offset, 0 before it */
	size_t sent;		 /* of the pending unit */
	struct al_error failure; /* what every call says once failed */
};

static void reserve(struct al_sigv4_chunked *c, size_t n)
{
	if (n > c->cap) {
		c->buf = xrealloc(c->buf, n);
		c->cap = n;
	}
}

/* SIGNATURE of the string to sign kind \n ts \n scope \n prev \n rest. */
static int chain_sig(const struct sv4_key *key, const struct al_sigv4_chunked *c, const char *kind,
		     const char *prev, const char *rest, char hex[65], struct al_error *err)
{
	char sts[64 + sizeof(c->scope) + 3 * SV4_HEX_LEN];
	int n = snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256-%s\n%s\n%s\n%s\n%s", kind,
			 c->timestamp, c->scope, prev, rest);

	if (n < 0 || (size_t)n >= sizeof(sts))
		return al_error_set(err, EIO, "string to sign too long");
	return sv4_hmac_hex(key, sts, (size_t)n, hex, err);
}

/* Verify the placeholder's signature at sig (in buf) and write the real
 * key's over it; both chains move on. */
static int resign_at(struct al_sigv4_chunked *c, const char *kind, const char *rest, char *sig,
		     struct al_error *err)
{
	char hex[SV4_HEX_LEN + 1];
	int r;

	if (c->verify) {
		r = chain_sig(&c->fake_key, c, kind, c->fake_prev, rest, hex, err);
		if (r < 0)
			return r;
		if (memcmp(hex, sig, SV4_HEX_LEN) != 0)
			return al_error_set(err, EACCES,
					    "chunk %lu: the %s signature does not verify with the "
					    "placeholder key",
					    c->chunk,
					    strcmp(kind, "PAYLOAD") == 0 ? "chunk" : "trailer");
		memcpy(c->fake_prev, sig, SV4_HEX_LEN);
	}
	r = chain_sig(&c->real_key, c, kind, c->real_prev, rest, hex, err);
	if (r < 0)
		return r;
	memcpy(sig, hex, SV4_HEX_LEN);
	memcpy(c->real_prev, hex, SV4_HEX_LEN);
	return 0;
}

static int resign_chunk(struct al_sigv4_chunked *c, const char *data, size_t n,
			struct al_error *err)
{
	unsigned char md[32];
	char rest[2 * SV4_HEX_LEN + 2];
	SHA256_CTX ctx;

	if (SHA256_Init(&ctx) != 1 || SHA256_Update(&ctx, data, n) != 1 ||
	    SHA256_Final(md, &ctx) != 1)
		return al_error_set(err, EIO, "SHA-256 of a chunk failed");
	memcpy(rest, EMPTY_HASH "\n", SV4_HEX_LEN + 1);
	sv4_hex(md, sizeof(md), rest + SV4_HEX_LEN + 1);
	return resign_at(c, "PAYLOAD", rest, c->buf + c->head_len - 2 - SV4_HEX_LEN, err);
}

/* The trailer's fields are each line before the signature's, hashed as
 * "name:value\n". */
static int resign_trailer(struct al_sigv4_chunked *c, struct al_error *err)
{
	unsigned char md[32];
	char rest[SV4_HEX_LEN + 1];
	SHA256_CTX ctx;
	bool ok = SHA256_Init(&ctx) == 1;
	size_t i = c->head_len;

	while (ok && i < c->trailer_sig) {
		const char *eol = memchr(c->buf + i, '\r', c->trailer_sig - i);
		size_t n = (size_t)(eol - (c->buf + i));

		ok = SHA256_Update(&ctx, c->buf + i, n) == 1 && SHA256_Update(&ctx, "\n", 1) == 1;
		i += n + 2;
	}
	if (!ok || SHA256_Final(md, &ctx) != 1)
		return al_error_set(err, EIO, "SHA-256 of the trailer failed");
	sv4_hex(md, sizeof(md), rest);
	return resign_at(c, "TRAILER", rest, c->buf + c->trailer_sig + strlen(TRAILER_SIG), err);
}

/* HEX-SIZE ";chunk-signature=" SIGNATURE CRLF, whole in buf. */
static int parse_head(struct al_sigv4_chunked *c, struct al_error *err)
{
	const char *b = c->buf;
	size_t i = 0, size = 0;

	c->chunk++;
	while (i < c->len && i < 8 && sv4_is_hex_digit(b[i]))
		size = size * 16 + (size_t)sv4_hex_value(b[i++]);
	if (i == 0 || c->len != i + strlen(SIG_FIELD) + SV4_HEX_LEN + 2 ||
	    memcmp(b + i, SIG_FIELD, strlen(SIG_FIELD)) != 0 ||
	    !sv4_is_hex64(b + i + strlen(SIG_FIELD), SV4_HEX_LEN) || b[c->len - 2] != '\r')
		return al_error_set(err, EINVAL,
				    "chunk %lu: expected HEX-SIZE;chunk-signature=SIGNATURE CRLF",
				    c->chunk);
	if (size > AL_SIGV4_CHUNK_MAX)
		return al_error_set(err, E2BIG, "chunk %lu: %zu bytes, more than %u", c->chunk,
				    size, AL_SIGV4_CHUNK_MAX);
	c->head_len = c->len;
	c->last = size == 0;
	if (c->last && c->trailer) {
		c->line = c->len;
		reserve(c, c->head_len + AL_SIGV4_TRAILER_MAX);
		c->state = ST_TRAILER;
		return 0;
	}
	c->need = c->head_len + size + 2;
	reserve(c, c->need);
	c->state = ST_DATA;
	return 0;
}

static int take_head(struct al_sigv4_chunked *c, const char *in, size_t len, size_t *ret_n,
		     struct al_error *err)
{
	size_t n = 0;

	while (n < len && c->len < HEAD_MAX) {
		c->buf[c->len++] = in[n++];
		if (c->buf[c->len - 1] == '\n') {
			*ret_n = n;
			return parse_head(c, err);
		}
	}
	*ret_n = n;
	if (c->len >= HEAD_MAX)
		return al_error_set(err, EINVAL, "chunk %lu: header line longer than %zu bytes",
				    c->chunk + 1, HEAD_MAX);
	return 0;
}

static int take_data(struct al_sigv4_chunked *c, const char *in, size_t len, size_t *ret_n,
		     struct al_error *err)
{
	size_t n = len < c->need - c->len ? len : c->need - c->len;

	memcpy(c->buf + c->len, in, n);
	c->len += n;
	*ret_n = n;
	if (c->len < c->need)
		return 0;
	if (memcmp(c->buf + c->need - 2, "\r\n", 2) != 0)
		return al_error_set(err, EINVAL, "chunk %lu: %s not followed by CRLF", c->chunk,
				    c->last ? "the last chunk is" : "its data is");
	c->state = ST_OUT;
	return resign_chunk(c, c->buf + c->head_len, c->need - c->head_len - 2, err);
}

/* One whole trailer line, [c->line, c->len). */
static int trailer_line(struct al_sigv4_chunked *c, struct al_error *err)
{
	const char *l = c->buf + c->line;
	size_t n = c->len - c->line, sig = strlen(TRAILER_SIG);
	int r;

	if (n < 2 || l[n - 2] != '\r')
		return al_error_set(err, EINVAL, "trailer: a line without CRLF");
	if (n == 2) {
		if (c->trailer_sig == 0)
			return al_error_set(err, EINVAL, "trailer: no x-amz-trailer-signature");
		c->state = ST_OUT;
		/* The last chunk's signature, then the trailer's after it. */
		r = resign_chunk(c, "", 0, err);
		return r < 0 ? r : resign_trailer(c, err);
	}
	if (c->trailer_sig != 0)
		return al_error_set(err, EINVAL, "trailer: a line after x-amz-trailer-signature");
	if (n > sig && memcmp(l, TRAILER_SIG, sig) == 0) {
		if (n != sig + SV4_HEX_LEN + 2 || !sv4_is_hex64(l + sig, SV4_HEX_LEN))
			return al_error_set(err, EINVAL,
					    "trailer: x-amz-trailer-signature is not 64 lowercase "
					    "hex digits");
		c->trailer_sig = c->line;
		return 0;
	}
	for (size_t i = 0; i < n - 2; i++)
		if ((unsigned char)l[i] < 0x20 || l[i] == 0x7f)
			return al_error_set(err, EINVAL, "trailer: control character");
	if (!memchr(l, ':', n) || l[0] == ':')
		return al_error_set(err, EINVAL, "trailer: a line that is not name:value");
	return 0;
}

static int take_trailer(struct al_sigv4_chunked *c, const char *in, size_t len, size_t *ret_n,
			struct al_error *err)
{
	size_t n = 0;
	int r = 0;

	while (r == 0 && n < len && c->state == ST_TRAILER) {
		if (c->len - c->head_len >= AL_SIGV4_TRAILER_MAX)
			return al_error_set(err, E2BIG, "trailer: more than %d bytes",
					    AL_SIGV4_TRAILER_MAX);
		c->buf[c->len++] = in[n++];
		if (c->buf[c->len - 1] == '\n') {
			r = trailer_line(c, err);
			c->line = c->len;
		}
	}
	*ret_n = n;
	return r;
}

static int fail(struct al_sigv4_chunked *c, int r, struct al_error *err)
{
	c->state = ST_FAILED;
	al_error_set(&c->failure, -r, "%s", err ? err->msg : "malformed signed body");
	return r;
}

int al_sigv4_chunked_feed(struct al_sigv4_chunked *c, const char *in, size_t len, size_t *ret_taken,
			  struct al_error *err)
{
	size_t taken = 0, n = 0;
	int r = 0;

	*ret_taken = 0;
	if (c->state == ST_FAILED)
		return al_error_set(err, c->failure.code, "%s", c->failure.msg);
	while (r == 0 && taken < len && c->state <= ST_TRAILER) {
		if (c->state == ST_HEAD)
			r = take_head(c, in + taken, len - taken, &n, err);
		else if (c->state == ST_DATA)
			r = take_data(c, in + taken, len - taken, &n, err);
		else
			r = take_trailer(c, in + taken, len - taken, &n, err);
		taken += n;
	}
	*ret_taken = taken;
	return r < 0 ? fail(c, r, err) : 0;
}

const char *al_sigv4_chunked_pending(const struct al_sigv4_chunked *c, size_t *ret_len)
{
	if (c->state != ST_OUT) {
		*ret_len = 0;
		return NULL;
	}
	*ret_len = c->len - c->sent;
	return c->buf + c->sent;
}

void al_sigv4_chunked_sent(struct al_sigv4_chunked *c, size_t n)
{
	if (c->state != ST_OUT)
		return;
	c->sent += n < c->len - c->sent ? n : c->len - c->sent;
	if (c->sent < c->len)
		return;
	c->len = c->sent = c->trailer_sig = 0;
	c->state = c->last ? ST_DONE : ST_HEAD;
}

bool al_sigv4_chunked_done(const struct al_sigv4_chunked *c)
{
	return c->state == ST_DONE;
}

void al_sigv4_chunked_free(struct al_sigv4_chunked *c)
{
	if (!c)
		return;
	free(c->buf);
	OPENSSL_cleanse(c, sizeof(*c));
	free(c);
}

static int start(struct al_sigv4_chunked *c, const struct sv4_auth *a, const char *seed,
		 const struct al_sigv4_creds *fake, const struct al_sigv4_creds *real,
		 struct al_error *err)
{
	int r = 0;

	c->verify = fake->secret_access_key != NULL;
	if (c->verify)
		r = sv4_signing_key(fake->secret_access_key, &a->scope, &c->fake_key, err);
	if (r == 0)
		r = sv4_signing_key(real->secret_access_key, &a->scope, &c->real_key, err);
	if (r < 0)
		return r;
	memcpy(c->timestamp, a->timestamp, sizeof(c->timestamp));
	snprintf(c->scope, sizeof(c->scope), "%s/%s/%s/aws4_request", a->scope.date,
		 a->scope.region, a->scope.service);
	memcpy(c->fake_prev, a->signature, sizeof(c->fake_prev));
	memcpy(c->real_prev, seed, sizeof(c->real_prev));
	c->cap = HEAD_MAX;
	c->buf = xmalloc(c->cap);
	return 0;
}

int al_sigv4_resign_chunked(const struct al_sigv4_request *r, const struct al_sigv4_creds *fake,
			    const struct al_sigv4_creds *real, char *out, size_t size,
			    struct al_sigv4_chunked **ret, struct al_error *err)
{
	char head[AL_SIGV4_AUTH_MAX + 512], seed[SV4_HEX_LEN + 1];
	struct al_sigv4_chunked *c;
	struct sv4_auth a;
	enum sv4_body body;
	int n = sv4_resign_head(r, fake, real, true, head, sizeof(head), &a, seed, &body, err), k;

	if (n < 0)
		return n;
	if ((size_t)n >= size)
		return al_error_set(err, ENOSPC, "the new Authorization value needs %d bytes",
				    n + 1);
	c = NULL;
	if (body != SV4_BODY_PLAIN) {
		c = xcalloc(1, sizeof(*c));
		c->trailer = body == SV4_BODY_CHUNKED_TRAILER;
		k = start(c, &a, seed, fake, real, err);
		if (k < 0) {
			al_sigv4_chunked_free(c);
			return k;
		}
	}
	memcpy(out, head, (size_t)n + 1);
	*ret = c;
	return n;
}
