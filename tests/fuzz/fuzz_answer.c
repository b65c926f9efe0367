/* libFuzzer target: the search of upstream answers for the run's secret
 * values (gateway/answer.c: HTTP/1.1 framing undone, content codings
 * decoded; gateway/valscan.c: each value's forms, the pending start).
 *
 * The input:
 *   byte 0  bits 0-1: how many requests are expected, less one (1 to 4);
 *           bits 2-5: which of them are HEAD (bit 2 the first);
 *           bit 6: a second, fixed value in the set (id 2);
 *           bit 7: construct mode (below)
 *   byte 1  the seed of the feed sizes
 *   byte 2  the largest feed, less one (0: byte by byte)
 *   byte 3  the value (id 1): bit 7, exact (its raw form only); the low
 *           seven bits v: below 4, one of the fixed values; else the next
 *           8 + (v - 4) % 56 bytes of the input (a fixed value when fewer
 *           remain)
 *   then    the answer's bytes as a server sends them, or in construct
 *           mode (one request, not HEAD):
 *             byte   bit 0: chunked (else Content-Length); bit 1: a 100
 *                    Continue first; bit 2: chunk extensions; bit 3: a
 *                    trailer; bits 4-5: the body as it is, or compressed
 *                    with zlib in gzip, deflate (zlib's format) or deflate
 *                    (raw)
 *             byte   where the value goes in the filler (modulo its
 *                    length + 1)
 *             byte   the seed of the chunk sizes (1 to 16 bytes), and of
 *                    the compression level
 *             rest   the filler: the body is the filler with the value
 *                    put in at that place
 *
 * Each answer is fed whole, in the pieces the control bytes say, and byte
 * by byte when short. Beyond the sanitizers, these trap:
 * 1. the verdict (OK, FOUND, BAD) differs between the ways of feeding, or
 *    FOUND's id does (with one value in the set); for an answer with a
 *    Content-Encoding, only OK against FOUND or BAD (see agree());
 * 2. al_answer_release() decreases, passes al_answer_fed(), or is not
 *    al_answer_fed() after al_answer_end() (less an unfinished section); OK
 *    with bytes left unfed;
 *    BAD without a reason; bytes taken after FOUND or BAD;
 * 3. construct mode: the answer is not FOUND, however fed, or a release
 *    before it passes the first byte of the value (in a compressed body,
 *    the first coded byte whose decoding makes the value's first byte);
 * 4. an answer with no Content-Encoding that holds a value whole in a
 *    head, trailers, a chunk-size line, a Content-Length body, a chunk's
 *    data or a body read to the close (as this file's own reading of the
 *    framing finds them) is OK. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

#include "core/error.h"
#include "gateway/answer.h"
#include "gateway/valscan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
	do {                                                                                       \
		if (!(x))                                                                          \
			__builtin_trap();                                                          \
	} while (0)

#define N_FIXED	  4
#define SECOND	  "tok_2nd+Secret/=q"
#define BYTE_MAX_ 2048 /* answers at most this long are also fed byte by byte */

static const char *const fixed[N_FIXED] = {
    "s3cr/t v+l=\"x\"&<y>'z'-9",      /* every escape */
    "sk-live-0123456789abcdef",	      /* a plain token */
    "caf\xc3\xa9-t\xf0\x9f\x94\x91k", /* non-ASCII */
    "aaaaaaaaaa",		      /* overlaps itself */
};

struct val {
	const char *data;
	size_t len;
};

/* The sets of the fixed values, made once: [value][exact][second]; and
 * for the view with escapes undone, [value][exact][second]. */
static struct al_valscan_set *fixed_sets[N_FIXED][2][2], *fixed_plain[N_FIXED][2][2];

static struct al_valscan_set *make_set(const struct val *v, size_t n, bool exact)
{
	struct al_valscan_value vv[2];
	struct al_valscan_set *set = NULL;
	struct al_error err = {0};

	for (size_t i = 0; i < n; i++)
		vv[i] = (struct al_valscan_value){v[i].data, v[i].len, (int)i + 1, i == 0 && exact};
	/* Values of 8 to 63 bytes have forms well under AL_VALSCAN_MAX. */
	CHECK(al_valscan_new(vv, n, &set, &err) == 0);
	CHECK(al_valscan_count(set) >= 1);
	return set;
}

/* The values for the unescaped view, as present.c makes them: as they
 * are, and with '+' for their spaces; not one searched exactly (as
 * present.c leaves out a token's start). */
static struct al_valscan_set *make_plain(const struct val *v, size_t n, bool exact)
{
	struct al_valscan_value vv[4];
	struct al_valscan_set *set = NULL;
	struct al_error err = {0};
	char buf[2][64];
	size_t m = 0;

	for (size_t i = 0; i < n; i++) {
		if (i == 0 && exact)
			continue;
		vv[m++] = (struct al_valscan_value){
		    .data = v[i].data, .len = v[i].len, .id = (int)i + 1, .plain = true};
		for (size_t k = 0; k < v[i].len; k++)
			buf[i][k] = v[i].data[k] == ' ' ? '+' : v[i].data[k];
		vv[m++] = (struct al_valscan_value){
		    .data = buf[i], .len = v[i].len, .id = (int)i + 1, .bare = true};
	}
	CHECK(al_valscan_new(vv, m, &set, &err) == 0);
	return set;
}

struct sizer {
	uint32_t s;
	size_t max;
};

static struct sizer sizer(uint8_t seed, size_t max)
{
	return (struct sizer){(0x9e3779b9u ^ (uint32_t)seed * 0x01000193u) | 1, max};
}

static size_t next_size(struct sizer *z)
{
	z->s ^= z->s << 13;
	z->s ^= z->s >> 17;
	z->s ^= z->s << 5;
	return 1 + z->s % z->max;
}

struct plan {
	const uint8_t *ans;
	size_t len;
	bool heads[4];
	size_t n_req;
	uint64_t guard; /* no release may pass this before FOUND */
};

/* Feed the answer in pieces of z's sizes (whole when z is NULL), with
 * invariant 2 and the guard checked after each; the verdict, and FOUND's
 * id in *id. */
static const struct al_valscan_set *plain_set; /* the view's, for run() */

static enum al_answer_verdict run(const struct al_valscan_set *set, const struct plan *p,
				  struct sizer *z, int *id)
{
	struct al_answer *a = al_answer_new(set);

	al_answer_unescaped(a, plain_set);
	struct al_answer_out out;
	enum al_answer_verdict v = AL_ANSWER_OK;
	uint64_t last = 0, off = 0;

	for (size_t i = 0; i < p->n_req; i++)
		CHECK(al_answer_expect(a, p->heads[i]) == 0);
	while (off < p->len && v == AL_ANSWER_OK) {
		size_t k = z ? next_size(z) : p->len;
		if (k > p->len - off)
			k = p->len - off;
		v = al_answer_feed(a, (const char *)p->ans + off, k, &out);
		off += k;
		uint64_t fed = al_answer_fed(a), rel = al_answer_release(a);
		CHECK(fed <= off && (v != AL_ANSWER_OK || fed == off));
		CHECK(rel >= last && rel <= fed && rel <= p->guard);
		last = rel;
	}
	*id = -1;
	if (v == AL_ANSWER_OK && (v = al_answer_end(a, &out)) == AL_ANSWER_OK) {
		/* All goes but a section the server left unfinished. */
		CHECK(al_answer_fed(a) == p->len && al_answer_release(a) <= p->len);
		CHECK(al_answer_release(a) >= last);
	}
	if (v != AL_ANSWER_OK) {
		if (v == AL_ANSWER_FOUND)
			CHECK(out.id == 1 || out.id == 2);
		else
			CHECK(v == AL_ANSWER_BAD && out.why[0] &&
			      memchr(out.why, 0, sizeof(out.why)));
		*id = out.id;
		/* Nothing more is taken. */
		uint64_t fed = al_answer_fed(a), rel = al_answer_release(a);
		CHECK(al_answer_feed(a, "x", 1, &out) == AL_ANSWER_BAD);
		CHECK(al_answer_fed(a) == fed && al_answer_release(a) == rel);
	}
	al_answer_free(a);
	return v;
}

/* Invariant 1 for two feedings of one answer. With a Content-Encoding,
 * FOUND and BAD may trade places: each feed's coded bytes are searched
 * whole before any of them is decoded, so a value's raw form late in a
 * feed is found before a decoding error early in it, or the error comes
 * first when the feeds are smaller. Both refuse the answer; OK against
 * either never may be. */
static void agree(enum al_answer_verdict a, int id_a, enum al_answer_verdict b, int id_b,
		  bool coded, bool one_value)
{
	if (!coded || a == AL_ANSWER_OK || b == AL_ANSWER_OK)
		CHECK(a == b);
	if (a == AL_ANSWER_FOUND && b == AL_ANSWER_FOUND && one_value)
		CHECK(id_a == id_b);
}

/* ---- the reference: where the raw bytes are searched as they are ---- */

struct ref {
	const struct val *v;
	size_t n_v;
	bool hit;
};

static void region(struct ref *r, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < r->n_v; i++)
		if (n >= r->v[i].len && memmem(p, n, r->v[i].data, r->v[i].len))
			r->hit = true;
}

static bool has_coding(const uint8_t *p, size_t n)
{
	static const char name[] = "content-encoding";

	for (size_t i = 0; i + sizeof(name) - 1 <= n; i++)
		if (strncasecmp((const char *)p + i, name, sizeof(name) - 1) == 0)
			return true;
	return false;
}

/* The status code of a head, or -1. */
static int status_of(const uint8_t *h, size_t n)
{
	int code = 0;

	if (n < 12 || memcmp(h, "HTTP/1.", 7) != 0)
		return -1;
	for (int i = 9; i < 12; i++) {
		if (h[i] < '0' || h[i] > '9')
			return -1;
		code = code * 10 + (h[i] - '0');
	}
	return code;
}

/* The value of the first field called name in a head of n bytes (ending
 * in the empty line). */
static bool field_of(const uint8_t *h, size_t n, const char *name, const uint8_t **val, size_t *len)
{
	size_t nl = strlen(name);
	const uint8_t *end = h + n, *p = memmem(h, n, "\r\n", 2);

	while (p && end - p > 2) {
		p += 2;
		const uint8_t *e = memmem(p, (size_t)(end - p), "\r\n", 2);
		if (!e || e == p)
			break;
		if ((size_t)(e - p) > nl && p[nl] == ':' &&
		    strncasecmp((const char *)p, name, nl) == 0) {
			*val = p + nl + 1;
			*len = (size_t)(e - *val);
			return true;
		}
		p = e;
	}
	return false;
}

/* A chunked body from pos: the searched regions; false when the answer
 * ends in it or it cannot be read. */
static bool ref_chunked(struct ref *r, const uint8_t *p, size_t n, size_t *pos)
{
	for (;;) {
		const uint8_t *eol = memmem(p + *pos, n - *pos, "\r\n", 2);
		if (!eol)
			return false;
		size_t ll = (size_t)(eol - (p + *pos)), size = 0, digits = 0;
		region(r, p + *pos, ll); /* the size line: its extensions */
		for (; digits < ll; digits++) {
			char c = (char)p[*pos + digits];
			int d = c >= '0' && c <= '9'   ? c - '0'
				: c >= 'a' && c <= 'f' ? c - 'a' + 10
				: c >= 'A' && c <= 'F' ? c - 'A' + 10
						       : -1;
			if (d < 0)
				break;
			size = size * 16 + (size_t)d;
		}
		if (digits == 0 || digits > 15)
			return false;
		*pos += ll + 2;
		if (size == 0) {
			/* The trailer section: the empty line alone, or fields. */
			if (n - *pos >= 2 && memcmp(p + *pos, "\r\n", 2) == 0) {
				*pos += 2;
				return true;
			}
			const uint8_t *e = memmem(p + *pos, n - *pos, "\r\n\r\n", 4);
			size_t te = e ? (size_t)(e - p) + 4 : n;
			region(r, p + *pos, te - *pos);
			*pos = te;
			return e != NULL;
		}
		size_t k = n - *pos < size ? n - *pos : size;
		region(r, p + *pos, k);
		if (k < size || n - *pos - k < 2)
			return false;
		*pos += k + 2;
	}
}

/* Invariant 4: whether a value is whole where the answer's own bytes are
 * searched, by a reading of the framing of its own (only what a valid
 * answer means: anything else the answer refuses). */
static bool reference(const struct val *v, size_t n_v, const struct plan *pl)
{
	struct ref r = {v, n_v, false};
	const uint8_t *p = pl->ans;
	size_t n = pl->len, pos = 0, req = 0;

	while (pos < n && !r.hit) {
		const uint8_t *e = memmem(p + pos, n - pos, "\r\n\r\n", 4), *f;
		size_t hend = e ? (size_t)(e - p) + 4 : n, fl;
		region(&r, p + pos, hend - pos);
		int code = status_of(p + pos, hend - pos);
		if (!e || code < 100 || code == 101 || code == 206)
			break;
		const uint8_t *h = p + pos;
		size_t hl = hend - pos;
		pos = hend;
		if (code < 200)
			continue;
		if (req == pl->n_req)
			break;
		if (pl->heads[req++] || code == 204 || code == 304)
			continue;
		if (field_of(h, hl, "Transfer-Encoding", &f, &fl)) {
			if (!ref_chunked(&r, p, n, &pos))
				break;
		} else if (field_of(h, hl, "Content-Length", &f, &fl)) {
			uint64_t cl = 0;
			size_t i = 0, digits = 0;
			while (i < fl && (f[i] == ' ' || f[i] == '\t'))
				i++;
			for (; i < fl && f[i] >= '0' && f[i] <= '9' && digits < 18; i++, digits++)
				cl = cl * 10 + (f[i] - '0');
			size_t k = n - pos < cl ? n - pos : (size_t)cl;
			region(&r, p + pos, k);
			pos += k;
		} else {
			region(&r, p + pos, n - pos);
			break;
		}
	}
	return r.hit;
}

/* ---- construct mode ---- */

/* The body compressed by zlib (window: 31 gzip, 15 zlib's format, -15
 * raw); *first: the first coded byte after which a decoder fed byte by
 * byte has made more than put bytes, the one that gives the value's first
 * byte away. */
static uint8_t *compress_body(const uint8_t *body, size_t bl, int window, int level, size_t put,
			      size_t *len, size_t *first)
{
	z_stream z = {0}, d = {0};
	uint8_t o[4096];
	size_t made = 0;

	CHECK(deflateInit2(&z, level, Z_DEFLATED, window, 8, Z_DEFAULT_STRATEGY) == Z_OK);
	size_t cap = deflateBound(&z, bl);
	uint8_t *out = malloc(cap);
	CHECK(out);
	z.next_in = (Bytef *)body;
	z.avail_in = (uInt)bl;
	z.next_out = out;
	z.avail_out = (uInt)cap;
	CHECK(deflate(&z, Z_FINISH) == Z_STREAM_END);
	*len = z.total_out;
	deflateEnd(&z);
	CHECK(inflateInit2(&d, window) == Z_OK);
	*first = *len;
	for (size_t i = 0; i < *len && *first == *len; i++) {
		d.next_in = out + i;
		d.avail_in = 1;
		do {
			d.next_out = o;
			d.avail_out = sizeof(o);
			int r = inflate(&d, Z_NO_FLUSH);
			CHECK(r == Z_OK || r == Z_STREAM_END || r == Z_BUF_ERROR);
			made += sizeof(o) - d.avail_out;
		} while (d.avail_out == 0);
		if (made > put)
			*first = i;
	}
	inflateEnd(&d);
	CHECK(*first < *len);
	return out;
}

/* An answer of one 200 whose body holds v at a known place; *at: the raw
 * offset of v's first byte (compressed: of the coded byte that gives it
 * away). */
static uint8_t *construct(const uint8_t *in, size_t n, const struct val *v, size_t *len,
			  uint64_t *at)
{
	static const char *const names[] = {"", "gzip", "deflate", "deflate"};
	static const int windows[] = {0, 31, 15, -15};
	uint8_t mode = n > 0 ? in[0] : 0, where = n > 1 ? in[1] : 0, seed = n > 2 ? in[2] : 0;
	unsigned coding = mode >> 4 & 3;
	const uint8_t *fill = n > 3 ? in + 3 : in;
	size_t fl = n > 3 ? n - 3 : 0, put = where % (fl + 1), bl = fl + v->len;
	uint8_t *body = malloc(bl);
	CHECK(body);
	memcpy(body, fill, put);
	memcpy(body + put, v->data, v->len);
	memcpy(body + put + v->len, fill + put, fl - put);
	if (coding) {
		uint8_t *c = compress_body(body, bl, windows[coding], 1 + seed % 9, put, &bl, &put);
		free(body);
		body = c;
	}

	size_t cap = 256 + 32 * bl, o = 0;
	uint8_t *out = malloc(cap);
	char ce[64] = "";
	CHECK(out);
	if (coding)
		snprintf(ce, sizeof(ce), "Content-Encoding: %s\r\n", names[coding]);
	if (mode & 2)
		o += (size_t)snprintf((char *)out + o, cap - o, "HTTP/1.1 100 Continue\r\n\r\n");
	if (mode & 1) {
		struct sizer z = sizer(seed, 16);
		o +=
		    (size_t)snprintf((char *)out + o, cap - o,
				     "HTTP/1.1 200 OK\r\n%sTransfer-Encoding: chunked\r\n\r\n", ce);
		for (size_t done = 0; done < bl;) {
			size_t k = next_size(&z);
			if (k > bl - done)
				k = bl - done;
			o += (size_t)snprintf((char *)out + o, cap - o, "%zx%s\r\n", k,
					      mode & 4 ? ";e=1" : "");
			if (put >= done && put < done + k)
				*at = o + (put - done);
			memcpy(out + o, body + done, k);
			o += k;
			out[o++] = '\r';
			out[o++] = '\n';
			done += k;
		}
		o += (size_t)snprintf((char *)out + o, cap - o, "0\r\n%s\r\n",
				      mode & 8 ? "X-Trailer: t\r\n" : "");
	} else {
		o += (size_t)snprintf((char *)out + o, cap - o,
				      "HTTP/1.1 200 OK\r\n%sContent-Length: %zu\r\n\r\n", ce, bl);
		*at = o + put;
		memcpy(out + o, body, bl);
		o += bl;
	}
	CHECK(o <= cap);
	free(body);
	*len = o;
	return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 4)
		return 0;
	uint8_t flags = data[0], seed = data[1], max = data[2], vb = data[3];
	bool second = flags & 0x40, build = flags & 0x80, exact = vb & 0x80;
	size_t choice = vb & 0x7f, want = choice < N_FIXED ? 0 : 8 + (choice - N_FIXED) % 56;
	struct val vals[2] = {{NULL, 0}, {SECOND, sizeof(SECOND) - 1}};
	struct al_valscan_set *set, *own = NULL, *own_plain = NULL;

	data += 4;
	size -= 4;
	if (want && size >= want) {
		vals[0] = (struct val){(const char *)data, want};
		data += want;
		size -= want;
		set = own = make_set(vals, second ? 2 : 1, exact);
		plain_set = own_plain = make_plain(vals, second ? 2 : 1, exact);
	} else {
		choice %= N_FIXED;
		vals[0] = (struct val){fixed[choice], strlen(fixed[choice])};
		struct al_valscan_set **s = &fixed_sets[choice][exact][second];
		if (!*s)
			*s = make_set(vals, second ? 2 : 1, exact);
		set = *s;
		struct al_valscan_set **ps = &fixed_plain[choice][exact][second];
		if (!*ps)
			*ps = make_plain(vals, second ? 2 : 1, exact);
		plain_set = *ps;
	}

	struct plan pl = {.ans = data, .len = size, .guard = UINT64_MAX};
	uint8_t *built = NULL;
	if (build) {
		pl.n_req = 1;
		built = construct(data, size, &vals[0], &pl.len, &pl.guard);
		pl.ans = built;
	} else {
		pl.n_req = (flags & 3) + 1;
		for (size_t i = 0; i < pl.n_req; i++)
			pl.heads[i] = flags >> (2 + i) & 1;
	}

	/* 1: the same verdict however the bytes are split. */
	int id_whole, id_split, id_bytes;
	bool coded = has_coding(pl.ans, pl.len);
	struct sizer z = sizer(seed, (size_t)max + 1);
	enum al_answer_verdict whole = run(set, &pl, NULL, &id_whole);
	enum al_answer_verdict split = run(set, &pl, &z, &id_split);
	agree(whole, id_whole, split, id_split, coded, !second);
	/* 3: the value put in the body is found (the guard was checked in
	 * run). */
	CHECK(!build || (whole == AL_ANSWER_FOUND && split == AL_ANSWER_FOUND));
	if (max && pl.len <= BYTE_MAX_) {
		struct sizer one = sizer(0, 1);
		enum al_answer_verdict bytes = run(set, &pl, &one, &id_bytes);
		agree(whole, id_whole, bytes, id_bytes, coded, !second);
		CHECK(!build || bytes == AL_ANSWER_FOUND);
	}
	/* 4: what the reference sees in the raw bytes is found. */
	if (!build && whole == AL_ANSWER_OK && !coded)
		CHECK(!reference(vals, second ? 2 : 1, &pl));
	free(built);
	al_valscan_free(own);
	al_valscan_free(own_plain);
	return 0;
}
