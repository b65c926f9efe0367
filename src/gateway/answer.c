#include "gateway/answer.h"
#include "gateway/answer-internal.h"

#include <brotli/decode.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "gateway/unescape.h"

#define LINE_MAX_ 1024 /* a chunk-size line */
#define PIECE	  512  /* coded bytes decoded at a time: the finest hold */

enum state {
	ST_HEAD,       /* an answer's head (or the next one) */
	ST_LEN,	       /* a body of Content-Length bytes */
	ST_CHUNK_SIZE, /* a chunk-size line */
	ST_CHUNK_DATA, /* a chunk's data */
	ST_CHUNK_CRLF, /* the CRLF after it */
	ST_TRAILER,    /* the trailer section */
	ST_CLOSE,      /* a body that ends with the connection */
	ST_DEAD,       /* found or refused: nothing more */
};

/* Raw bytes [raw, raw + raw_len) made the search's bytes [dec, dec +
 * dec_len): one for one (ident), none (framing), or as a decoder made
 * them (neither). */
struct seg {
	uint64_t raw, raw_len, dec, dec_len;
	bool ident;
};

struct al_answer {
	const struct al_valscan_set *set;
	struct al_valscan dec, raw;   /* the search's stream; a coded body's bytes */
	struct al_valscan dec_whole;  /* a body that is not text: whole forms only */
	bool bin;		      /* such a body is being read */
	struct al_unescape_view view; /* the search's stream unescaped, or none */
	int late;		      /* a value found where no verdict could be given yet, or -1 */
	bool view_body;		      /* the body is searched through the view too */
	enum state st;
	uint64_t raw_pos, dec_pos, released;
	bool waiting[AL_ANSWER_WAITING_MAX]; /* HEAD or not, oldest first */
	size_t w_first, w_n;
	char *head; /* a head or trailer section being read */
	size_t head_len;
	uint64_t remaining; /* of a Content-Length body or a chunk */
	char line[LINE_MAX_];
	size_t line_len, crlf;
	enum coding coding;
	bool z_live, z_done, z_member_end, br_done;
	/* Where the section being read started (a head, a trailer section, a
	 * chunk-size line): nothing from there on goes until it is whole and
	 * valid. UINT64_MAX when none is open. */
	uint64_t open_at;
	char deflate_pre[2]; /* "deflate": the first bytes, to tell zlib from raw */
	size_t n_pre;
	z_stream z;
	BrotliDecoderState *br;
	uint64_t body_decoded;
	struct seg *segs;
	size_t seg_first, seg_n, seg_cap;
	char obuf[16384];
};

struct al_answer *al_answer_new(const struct al_valscan_set *set)
{
	struct al_answer *a = xcalloc(1, sizeof(*a));

	a->set = set;
	a->open_at = UINT64_MAX;
	a->late = -1;
	al_valscan_init(&a->dec, set);
	al_valscan_init(&a->raw, set);
	a->head = xmalloc(AL_ANSWER_HEAD_MAX);
	return a;
}

static void coding_end(struct al_answer *a)
{
	if (a->z_live)
		inflateEnd(&a->z);
	if (a->br)
		BrotliDecoderDestroyInstance(a->br);
	a->z_live = a->z_done = a->z_member_end = a->br_done = false;
	a->br = NULL;
	a->coding = CODE_NONE;
	a->n_pre = 0;
	a->body_decoded = 0;
}

void al_answer_free(struct al_answer *a)
{
	if (!a)
		return;
	coding_end(a);
	al_valscan_fini(&a->dec);
	al_valscan_fini(&a->dec_whole);
	al_valscan_fini(&a->raw);
	al_unescape_view_fini(&a->view);
	explicit_bzero(a->head, AL_ANSWER_HEAD_MAX);
	free(a->head);
	explicit_bzero(a->obuf, sizeof(a->obuf));
	free(a->segs);
	free(a);
}

void al_answer_whole(struct al_answer *a, const struct al_valscan_set *set)
{
	if (set && al_valscan_count(set))
		al_valscan_init(&a->dec_whole, set);
}

void al_answer_unescaped(struct al_answer *a, const struct al_valscan_set *set)
{
	if (set && al_valscan_count(set))
		al_unescape_view_init(&a->view, set);
}

int al_answer_expect(struct al_answer *a, bool head)
{
	if (a->w_n == AL_ANSWER_WAITING_MAX)
		return -ENOSPC;
	a->waiting[(a->w_first + a->w_n++) % AL_ANSWER_WAITING_MAX] = head;
	return 0;
}

uint64_t al_answer_fed(const struct al_answer *a)
{
	return a->raw_pos;
}

uint64_t al_answer_release(const struct al_answer *a)
{
	return a->released;
}

static enum al_answer_verdict bad(struct al_answer *a, struct al_answer_out *out, const char *fmt,
				  ...) __attribute__((format(printf, 3, 4)));

static enum al_answer_verdict bad(struct al_answer *a, struct al_answer_out *out, const char *fmt,
				  ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(out->why, sizeof(out->why), fmt, ap);
	va_end(ap);
	a->st = ST_DEAD;
	return AL_ANSWER_BAD;
}

static enum al_answer_verdict found(struct al_answer *a, struct al_answer_out *out, int id)
{
	out->id = id;
	a->st = ST_DEAD;
	return AL_ANSWER_FOUND;
}

/* ---- what the raw bytes made ---- */

static void seg_add(struct al_answer *a, uint64_t raw_len, uint64_t dec_len, bool ident)
{
	if (a->seg_n) {
		struct seg *l = &a->segs[(a->seg_first + a->seg_n - 1) % a->seg_cap];
		bool frame = !dec_len && !ident, lframe = !l->dec_len && !l->ident;
		if ((ident && l->ident) || (frame && lframe)) {
			l->raw_len += raw_len;
			l->dec_len += dec_len;
			goto done;
		}
	}
	if (a->seg_n == a->seg_cap) {
		size_t cap = a->seg_cap ? 2 * a->seg_cap : 64;
		struct seg *s = xcalloc(cap, sizeof(*s));
		for (size_t i = 0; i < a->seg_n; i++)
			s[i] = a->segs[(a->seg_first + i) % a->seg_cap];
		free(a->segs);
		a->segs = s;
		a->seg_cap = cap;
		a->seg_first = 0;
	}
	a->segs[(a->seg_first + a->seg_n++) % a->seg_cap] =
	    (struct seg){a->raw_pos, raw_len, a->dec_pos, dec_len, ident};
done:
	a->raw_pos += raw_len;
	a->dec_pos += dec_len;
}

/* Bytes that are the search's as they are (heads, trailers, a body with
 * no coding). */
/* The search's next n bytes, through each view. */
static int search(struct al_answer *a, const char *p, size_t n, uint64_t at)
{
	bool body = a->st == ST_LEN || a->st == ST_CHUNK_DATA || a->st == ST_CLOSE;
	int id = al_valscan_feed(body && a->bin ? &a->dec_whole : &a->dec, p, n);

	if (id >= 0 || (body && !a->view_body))
		return id;
	return al_unescape_view_feed(&a->view, p, n, at);
}

static int emit_ident(struct al_answer *a, const char *p, size_t n)
{
	int id = search(a, p, n, a->dec_pos);

	seg_add(a, n, n, true);
	return id;
}

/* Framing: the client reads it, nothing of it is the body. */
static void emit_frame(struct al_answer *a, size_t n)
{
	seg_add(a, n, 0, false);
}

/* The decoder's output: searched and counted. */
static enum al_answer_verdict decoded(struct al_answer *a, size_t n, uint64_t *made,
				      struct al_answer_out *out)
{
	int id;

	if ((id = search(a, a->obuf, n, a->dec_pos + *made)) >= 0)
		return found(a, out, id);
	*made += n;
	a->body_decoded += n;
	if (a->body_decoded > AL_ANSWER_DECODED_MAX)
		return bad(a, out, "its body decodes to more than %llu MiB",
			   (unsigned long long)(AL_ANSWER_DECODED_MAX >> 20));
	return AL_ANSWER_OK;
}

static enum al_answer_verdict inflate_piece(struct al_answer *a, const char *p, size_t n,
					    uint64_t *made, struct al_answer_out *out)
{
	enum al_answer_verdict v;

	a->z.next_in = (Bytef *)p;
	a->z.avail_in = (uInt)n;
	if (a->z_member_end && n) {
		/* gzip may hold several members, one after another. */
		inflateReset(&a->z);
		a->z_member_end = false;
	}
	while (a->z.avail_in) {
		if (a->z_done)
			return bad(a, out, "it has bytes after the end of its compressed body");
		uInt in0 = a->z.avail_in;
		a->z.next_out = (Bytef *)a->obuf;
		a->z.avail_out = sizeof(a->obuf);
		int r = inflate(&a->z, Z_NO_FLUSH);
		size_t got = sizeof(a->obuf) - a->z.avail_out;
		/* What came out is searched first, also when the call failed
		 * (a bad check value at the end): found is found. */
		if (got && (v = decoded(a, got, made, out)) != AL_ANSWER_OK)
			return v;
		if (r == Z_OK && !got && a->z.avail_in == in0)
			return bad(a, out, "its compressed body does not decode");
		if (r != Z_OK && r != Z_STREAM_END && !(r == Z_BUF_ERROR && !got))
			return bad(a, out, "its %s body is not valid (%s)",
				   a->coding == CODE_GZIP ? "gzip" : "deflate",
				   a->z.msg ? a->z.msg : "zlib error");
		if (r == Z_STREAM_END) {
			if (a->coding == CODE_GZIP && a->z.avail_in)
				inflateReset(&a->z);
			else if (a->coding == CODE_GZIP)
				a->z_member_end = true;
			else
				a->z_done = true;
		} else if (!got && r == Z_BUF_ERROR) {
			break;
		}
	}
	/* Output the last call could not hold. */
	for (;;) {
		if (a->z_done || a->z_member_end)
			break;
		a->z.next_out = (Bytef *)a->obuf;
		a->z.avail_out = sizeof(a->obuf);
		int r = inflate(&a->z, Z_NO_FLUSH);
		size_t got = sizeof(a->obuf) - a->z.avail_out;
		if (got && (v = decoded(a, got, made, out)) != AL_ANSWER_OK)
			return v;
		if (r == Z_STREAM_END && a->coding == CODE_GZIP)
			a->z_member_end = true;
		else if (r == Z_STREAM_END)
			a->z_done = true;
		if (!got)
			break;
	}
	return AL_ANSWER_OK;
}

static enum al_answer_verdict brotli_piece(struct al_answer *a, const char *p, size_t n,
					   uint64_t *made, struct al_answer_out *out)
{
	const uint8_t *in = (const uint8_t *)p;
	size_t avail_in = n;
	enum al_answer_verdict v;

	for (;;) {
		if (a->br_done && avail_in)
			return bad(a, out, "it has bytes after the end of its compressed body");
		if (a->br_done)
			return AL_ANSWER_OK;
		uint8_t *o = (uint8_t *)a->obuf;
		size_t avail_out = sizeof(a->obuf);
		BrotliDecoderResult r =
		    BrotliDecoderDecompressStream(a->br, &avail_in, &in, &avail_out, &o, NULL);
		size_t got = sizeof(a->obuf) - avail_out;
		if (got && (v = decoded(a, got, made, out)) != AL_ANSWER_OK)
			return v;
		if (r == BROTLI_DECODER_RESULT_ERROR)
			return bad(a, out, "its br body is not valid (%s)",
				   BrotliDecoderErrorString(BrotliDecoderGetErrorCode(a->br)));
		if (r == BROTLI_DECODER_RESULT_SUCCESS)
			a->br_done = true;
		else if (r == BROTLI_DECODER_RESULT_NEEDS_MORE_INPUT)
			return AL_ANSWER_OK;
	}
}

/* "deflate" is zlib's format by the RFC, a bare deflate stream from some
 * servers: clients take either, so does this (told by the first two
 * bytes, as a zlib header's check says). */
static int deflate_start(struct al_answer *a, const char **p, size_t *n)
{
	while (a->n_pre < 2 && *n) {
		a->deflate_pre[a->n_pre++] = **p;
		(*p)++;
		(*n)--;
	}
	if (a->n_pre < 2)
		return 0;
	unsigned b0 = (unsigned char)a->deflate_pre[0], b1 = (unsigned char)a->deflate_pre[1];
	bool zlib = (b0 & 15) == 8 && (b0 >> 4) <= 7 && (b0 * 256 + b1) % 31 == 0;
	if (inflateInit2(&a->z, zlib ? 15 : -15) != Z_OK)
		return -ENOMEM;
	a->z_live = true;
	return 1;
}

/* A coded body's bytes: searched as they are, then decoded a piece at a
 * time (each piece a segment: the finest a hold can be). */
static enum al_answer_verdict emit_coded(struct al_answer *a, const char *p, size_t n,
					 struct al_answer_out *out)
{
	enum al_answer_verdict v = AL_ANSWER_OK;
	int id;

	if ((id = al_valscan_feed(&a->raw, p, n)) >= 0)
		return found(a, out, id);
	while (n) {
		size_t k = n < PIECE ? n : PIECE;
		uint64_t made = 0;
		if (a->coding == CODE_DEFLATE && !a->z_live) {
			const char *q = p;
			size_t m = k;
			int r = deflate_start(a, &q, &m);
			if (r < 0)
				return bad(a, out, "no memory to decode its body");
			if (r > 0) {
				/* The two bytes held for the check, then the rest. */
				if ((v = inflate_piece(a, a->deflate_pre, 2, &made, out)) ==
				    AL_ANSWER_OK)
					v = inflate_piece(a, q, m, &made, out);
			}
		} else if (a->coding == CODE_BR) {
			v = brotli_piece(a, p, k, &made, out);
		} else {
			v = inflate_piece(a, p, k, &made, out);
		}
		if (v != AL_ANSWER_OK)
			return v;
		seg_add(a, k, made, false);
		p += k;
		n -= k;
	}
	return AL_ANSWER_OK;
}

static enum al_answer_verdict body(struct al_answer *a, const char *p, size_t n,
				   struct al_answer_out *out)
{
	int id;

	if (a->coding != CODE_NONE)
		return emit_coded(a, p, n, out);
	if ((id = emit_ident(a, p, n)) >= 0)
		return found(a, out, id);
	return AL_ANSWER_OK;
}

/* An answer is whole: the next one is another thing for the client (and
 * starts with "HTTP/1."), so what could start a value at the end of this
 * one starts none. */
static void answer_end(struct al_answer *a)
{
	int id = al_unescape_view_end(&a->view);

	if (id >= 0 && a->late < 0)
		a->late = id;
	a->bin = false;
	al_valscan_reset(&a->dec);
	a->st = ST_HEAD;
}

static void body_end(struct al_answer *a)
{
	coding_end(a);
	al_valscan_reset(&a->raw);
	answer_end(a);
}

/* ---- heads: answer-head.c ---- */

static enum al_answer_verdict start_body(struct al_answer *a, const struct framing *fr,
					 struct al_answer_out *out)
{
	if (fr->n_codings > 1)
		return bad(a, out, "it has more than one Content-Encoding");
	if (fr->bad_coding[0])
		return bad(a, out, "its Content-Encoding %s cannot be decoded", fr->bad_coding);
	a->coding = fr->coding;
	a->view_body = !fr->binary;
	/* Not text: searched for every whole form, not by halves (the scan
	 * then jumps twice as far: bulk downloads). */
	a->bin = fr->binary && a->dec_whole.set;
	if (a->bin)
		al_valscan_reset(&a->dec_whole);
	if (!a->view_body) {
		/* The head's last bytes are searched as they are; the body
		 * goes without the view. */
		int id = al_unescape_view_end(&a->view);
		if (id >= 0)
			return found(a, out, id);
	}
	if (a->coding == CODE_GZIP) {
		if (inflateInit2(&a->z, 15 + 16) != Z_OK)
			return bad(a, out, "no memory to decode its body");
		a->z_live = true;
	} else if (a->coding == CODE_BR &&
		   !(a->br = BrotliDecoderCreateInstance(NULL, NULL, NULL))) {
		return bad(a, out, "no memory to decode its body");
	}
	al_valscan_reset(&a->raw);
	return AL_ANSWER_OK;
}

static enum al_answer_verdict head_done(struct al_answer *a, struct al_answer_out *out)
{
	struct framing fr = {0};
	int code = 0;

	if (!gw_answer_lines(a->head, a->head_len, true, &fr, &code))
		return bad(a, out, "its head is not valid HTTP/1.1");
	if (code == 101)
		return bad(a, out, "it switches protocols (101)");
	if (code < 200) {
		answer_end(a); /* an interim answer: the final one follows */
		return AL_ANSWER_OK;
	}
	if (!a->w_n)
		return bad(a, out, "it answers no request");
	bool head_req = a->waiting[a->w_first];
	a->w_first = (a->w_first + 1) % AL_ANSWER_WAITING_MAX;
	a->w_n--;
	if (code == 206)
		return bad(a, out, "it is a partial answer (206)");
	if (head_req || code == 204 || code == 304) {
		answer_end(a);
		return AL_ANSWER_OK;
	}
	if (fr.te) {
		if (!fr.chunked_ok || fr.te > 1 || fr.cl || memcmp(a->head, "HTTP/1.0", 8) == 0)
			return bad(a, out, "its Transfer-Encoding is not one \"chunked\" alone");
		a->st = ST_CHUNK_SIZE;
		a->line_len = 0;
	} else if (fr.cl) {
		if (fr.cl_mismatch)
			return bad(a, out, "its Content-Length is not one number");
		a->remaining = fr.length;
		a->st = ST_LEN;
	} else {
		a->st = ST_CLOSE;
	}
	enum al_answer_verdict v = start_body(a, &fr, out);
	if (v == AL_ANSWER_OK && a->st == ST_LEN && a->remaining == 0)
		body_end(a);
	return v;
}

/* Head or trailer bytes, up to the empty line that ends them. */
static size_t section(struct al_answer *a, const char *p, size_t n, bool *complete)
{
	size_t k = 0;

	*complete = false;
	while (k < n && a->head_len < AL_ANSWER_HEAD_MAX) {
		a->head[a->head_len++] = p[k++];
		size_t h = a->head_len;
		/* A trailer section may be the empty line alone. */
		if ((h >= 4 && memcmp(a->head + h - 4, "\r\n\r\n", 4) == 0) ||
		    (a->st == ST_TRAILER && h == 2 && memcmp(a->head, "\r\n", 2) == 0)) {
			*complete = true;
			break;
		}
	}
	return k;
}

/* A chunk-size line: hex digits, then extensions if any. */
static enum al_answer_verdict chunk_size(struct al_answer *a, struct al_answer_out *out)
{
	uint64_t size = 0;
	size_t i = 0;
	int id;

	if ((id = al_valscan_find(a->set, a->line, a->line_len)) >= 0)
		return found(a, out, id);
	for (; i < a->line_len && al_hex_digit(a->line[i]) >= 0 && i < 15; i++)
		size = size * 16 + (uint64_t)al_hex_digit(a->line[i]);
	if (i == 0 ||
	    (i < a->line_len && a->line[i] != ';' && a->line[i] != ' ' && a->line[i] != '\t'))
		return bad(a, out, "a chunk's size line is not valid");
	for (size_t j = i; j < a->line_len; j++)
		if ((unsigned char)a->line[j] < 0x20 && a->line[j] != '\t')
			return bad(a, out, "a chunk's size line is not valid");
	if (size == 0) {
		a->st = ST_TRAILER;
		a->head_len = 0;
	} else {
		a->remaining = size;
		a->st = ST_CHUNK_DATA;
	}
	return AL_ANSWER_OK;
}

static enum al_answer_verdict step(struct al_answer *a, const char *p, size_t n, size_t *used,
				   struct al_answer_out *out)
{
	enum al_answer_verdict v = AL_ANSWER_OK;
	bool complete;
	size_t k;
	int id;

	switch (a->st) {
	case ST_HEAD:
	case ST_TRAILER:
		if (!a->head_len)
			a->open_at = a->raw_pos;
		k = section(a, p, n, &complete);
		*used = k;
		if ((id = emit_ident(a, p, k)) >= 0)
			return found(a, out, id);
		if (!complete && a->head_len == AL_ANSWER_HEAD_MAX)
			return bad(a, out, "its head or trailers pass %u KiB",
				   AL_ANSWER_HEAD_MAX >> 10);
		if (!complete)
			return AL_ANSWER_OK;
		a->open_at = UINT64_MAX;
		if (a->st == ST_TRAILER) {
			struct framing fr = {0};
			int code;
			if (!gw_answer_lines(a->head, a->head_len, false, &fr, &code))
				return bad(a, out, "its trailer section is not valid");
			a->head_len = 0;
			body_end(a);
			return AL_ANSWER_OK;
		}
		v = head_done(a, out);
		a->head_len = 0;
		return v;
	case ST_LEN:
		k = n < a->remaining ? n : (size_t)a->remaining;
		*used = k;
		if ((v = body(a, p, k, out)) != AL_ANSWER_OK)
			return v;
		if (!(a->remaining -= k))
			body_end(a);
		return AL_ANSWER_OK;
	case ST_CLOSE:
		*used = n;
		return body(a, p, n, out);
	case ST_CHUNK_SIZE:
		if (!a->line_len)
			a->open_at = a->raw_pos;
		for (k = 0; k < n; k++) {
			char c = p[k];
			if (a->line_len && a->line[a->line_len - 1] == '\r') {
				if (c != '\n')
					return bad(a, out, "a chunk's size line is not valid");
				a->line_len--;
				emit_frame(a, k + 1);
				*used = k + 1;
				a->open_at = UINT64_MAX;
				return chunk_size(a, out);
			}
			if (a->line_len == sizeof(a->line))
				return bad(a, out, "a chunk's size line passes %d bytes",
					   LINE_MAX_);
			a->line[a->line_len++] = c;
		}
		emit_frame(a, n);
		*used = n;
		return AL_ANSWER_OK;
	case ST_CHUNK_DATA:
		k = n < a->remaining ? n : (size_t)a->remaining;
		*used = k;
		if ((v = body(a, p, k, out)) != AL_ANSWER_OK)
			return v;
		if (!(a->remaining -= k)) {
			a->st = ST_CHUNK_CRLF;
			a->crlf = 0;
		}
		return AL_ANSWER_OK;
	case ST_CHUNK_CRLF:
		for (k = 0; k < n && a->crlf < 2; k++, a->crlf++)
			if (p[k] != "\r\n"[a->crlf])
				return bad(a, out, "a chunk does not end with CRLF");
		emit_frame(a, k);
		*used = k;
		if (a->crlf == 2) {
			a->st = ST_CHUNK_SIZE;
			a->line_len = 0;
		}
		return AL_ANSWER_OK;
	case ST_DEAD:
		break;
	}
	return bad(a, out, "the answer was refused before");
}

/* What may go: every segment whose search bytes end before the pending
 * start, and of one made byte for byte, its bytes before it; never past
 * a pending start in a coded body's own bytes. */
static void release(struct al_answer *a, bool all)
{
	uint64_t x = a->dec_pos - (all ? 0 : al_valscan_pending(a->bin ? &a->dec_whole : &a->dec));
	uint64_t vx = all ? UINT64_MAX : al_unescape_view_hold(&a->view);

	x = vx < x ? vx : x;
	uint64_t lim =
	    a->raw_pos - (all || a->coding == CODE_NONE ? 0 : al_valscan_pending(&a->raw));

	if (!all && a->open_at < lim)
		lim = a->open_at;

	while (a->seg_n) {
		struct seg *s = &a->segs[a->seg_first];
		uint64_t can = s->dec + s->dec_len <= x ? s->raw_len
			       : s->ident && x > s->dec ? x - s->dec
							: 0;
		uint64_t room = lim > s->raw ? lim - s->raw : 0;
		if (can > room)
			can = room;
		if (can == s->raw_len) {
			a->seg_first = (a->seg_first + 1) % a->seg_cap;
			a->seg_n--;
			continue;
		}
		s->raw += can;
		s->raw_len -= can;
		if (s->ident) {
			s->dec += can;
			s->dec_len -= can;
		}
		break;
	}
	a->released = a->seg_n ? a->segs[a->seg_first].raw : a->raw_pos;
}

enum al_answer_verdict al_answer_feed(struct al_answer *a, const char *buf, size_t len,
				      struct al_answer_out *out)
{
	out->id = -1;
	out->why[0] = '\0';
	while (len) {
		size_t used = 0;
		enum al_answer_verdict v = step(a, buf, len, &used, out);
		if (v != AL_ANSWER_OK)
			return v;
		if (a->late >= 0)
			return found(a, out, a->late);
		buf += used;
		len -= used;
	}
	release(a, false);
	return AL_ANSWER_OK;
}

enum al_answer_verdict al_answer_end(struct al_answer *a, struct al_answer_out *out)
{
	uint64_t open = a->open_at;
	int id;

	out->id = -1;
	out->why[0] = '\0';
	if (a->st == ST_DEAD)
		return AL_ANSWER_OK;
	/* An escape left open at the end is searched as it is. */
	if ((id = al_unescape_view_end(&a->view)) >= 0)
		return found(a, out, id);
	release(a, true);
	/* A section the server left unfinished (a head, a chunk-size line,
	 * trailers) was never searched whole: it stays. */
	if (open < a->released)
		a->released = open;
	a->st = ST_DEAD;
	return AL_ANSWER_OK;
}
