#include "gateway/unescape.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/util.h"

enum {
	ST_NORMAL,
	ST_BACKSLASH,
	ST_U,
	ST_PCT,
	ST_ENTITY
};

struct sink {
	char *out;
	size_t k;
};

static void put(struct sink *s, char c)
{
	s->out[s->k++] = c;
}

/* A code point as UTF-8. */
static void put_cp(struct sink *s, long cp)
{
	if (cp < 0x80) {
		put(s, (char)cp);
	} else if (cp < 0x800) {
		put(s, (char)(0xc0 | cp >> 6));
		put(s, (char)(0x80 | (cp & 63)));
	} else if (cp < 0x10000) {
		put(s, (char)(0xe0 | cp >> 12));
		put(s, (char)(0x80 | ((cp >> 6) & 63)));
		put(s, (char)(0x80 | (cp & 63)));
	} else {
		put(s, (char)(0xf0 | cp >> 18));
		put(s, (char)(0x80 | ((cp >> 12) & 63)));
		put(s, (char)(0x80 | ((cp >> 6) & 63)));
		put(s, (char)(0x80 | (cp & 63)));
	}
}

void al_unescape_init(struct al_unescape *u)
{
	*u = (struct al_unescape){.st = ST_NORMAL, .high = -1};
}

/* A high surrogate no low half followed: its text as it was. */
static void flush_high(struct al_unescape *u, struct sink *s)
{
	char t[8];

	if (u->high < 0)
		return;
	snprintf(t, sizeof(t), "\\u%04lx", u->high);
	for (size_t i = 0; i < 6; i++)
		put(s, t[i]);
	u->high = -1;
}

/* An escape that is none after all: its bytes as they were. */
static void flush_seq(struct al_unescape *u, struct sink *s)
{
	flush_high(u, s);
	for (size_t i = 0; i < u->seq_len; i++)
		put(s, u->seq[i]);
	u->seq_len = 0;
	u->st = ST_NORMAL;
}

static void start(struct al_unescape *u, int st, char c, uint64_t at)
{
	u->st = st;
	u->seq[0] = c;
	u->seq_len = 1;
	u->seq_at = at;
}

static long hex_value(const char *p, size_t n)
{
	long v = 0;

	for (size_t i = 0; i < n; i++)
		v = v * 16 + al_hex_digit(p[i]);
	return v;
}

/* A \uXXXX escape whole: surrogates paired, a lone half as its text. */
static void u_escape(struct al_unescape *u, struct sink *s)
{
	long cp = hex_value(u->seq + 2, 4);
	uint64_t at = u->seq_at;

	u->seq_len = 0;
	u->st = ST_NORMAL;
	if (cp >= 0xdc00 && cp <= 0xdfff && u->high >= 0) {
		put_cp(s, 0x10000 + ((u->high - 0xd800) << 10) + (cp - 0xdc00));
		u->high = -1;
		return;
	}
	flush_high(u, s);
	if (cp >= 0xd800 && cp <= 0xdbff) {
		u->high = cp;
		u->high_at = at;
	} else if (cp >= 0xdc00 && cp <= 0xdfff) {
		char t[8];
		snprintf(t, sizeof(t), "\\u%04lx", cp);
		for (size_t i = 0; i < 6; i++)
			put(s, t[i]);
	} else {
		put_cp(s, cp);
	}
}

/* An HTML character reference between '&' and ';': its code point, or -1
 * (the named ones in any case: HTML5 has &AMP; &LT; &GT; &QUOT; too). */
static long entity(const char *p, size_t n)
{
	static const struct {
		const char *name;
		long cp;
	} names[] = {{"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}};

	if (n >= 2 && p[0] == '#') {
		bool hex = p[1] == 'x' || p[1] == 'X';
		size_t i = hex ? 2 : 1;
		long v = 0;
		if (i == n || n - i > 7)
			return -1;
		for (; i < n; i++) {
			int d = hex ? al_hex_digit(p[i])
				    : (p[i] >= '0' && p[i] <= '9' ? p[i] - '0' : -1);
			if (d < 0)
				return -1;
			v = v * (hex ? 16 : 10) + d;
		}
		return v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff) ? -1 : v;
	}
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strlen(names[i].name) == n && strncasecmp(names[i].name, p, n) == 0)
			return names[i].cp;
	return -1;
}

/* One byte; false when it must be taken again in the normal state. */
static bool step(struct al_unescape *u, struct sink *s, char c, uint64_t at)
{
	static const char simple[] = "\"\"\\\\//b\bf\fn\nr\rt\t";

	switch (u->st) {
	case ST_NORMAL:
		if (c == '\\' || c == '%' || c == '&') {
			if (c != '\\')
				flush_high(u, s);
			start(u, c == '\\' ? ST_BACKSLASH : c == '%' ? ST_PCT : ST_ENTITY, c, at);
			return true;
		}
		flush_high(u, s);
		put(s, c);
		return true;
	case ST_BACKSLASH:
		if (c == 'u') {
			u->seq[u->seq_len++] = c;
			u->st = ST_U;
			return true;
		}
		for (size_t i = 0; c && simple[i]; i += 2)
			if (simple[i] == c) {
				flush_high(u, s);
				put(s, simple[i + 1]);
				u->seq_len = 0;
				u->st = ST_NORMAL;
				return true;
			}
		flush_seq(u, s);
		return false;
	case ST_U:
		if (al_hex_digit(c) < 0) {
			flush_seq(u, s);
			return false;
		}
		u->seq[u->seq_len++] = c;
		if (u->seq_len == 6)
			u_escape(u, s);
		return true;
	case ST_PCT:
		if (al_hex_digit(c) < 0) {
			flush_seq(u, s);
			return false;
		}
		u->seq[u->seq_len++] = c;
		if (u->seq_len == 3) {
			put(s, (char)hex_value(u->seq + 1, 2));
			u->seq_len = 0;
			u->st = ST_NORMAL;
		}
		return true;
	case ST_ENTITY:
		if (c == ';') {
			long cp = entity(u->seq + 1, u->seq_len - 1);
			if (cp < 0) {
				flush_seq(u, s);
				return false;
			}
			put_cp(s, cp);
			u->seq_len = 0;
			u->st = ST_NORMAL;
			return true;
		}
		if (u->seq_len < AL_UNESCAPE_SEQ_MAX - 1 &&
		    ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		     c == '#')) {
			u->seq[u->seq_len++] = c;
			return true;
		}
		flush_seq(u, s);
		return false;
	}
	return true;
}

/* Where the next byte that may start an escape is in [p, p + n), or n. */
static size_t plain_run(const char *p, size_t n)
{
	static const char starts[] = {'\\', '%', '&'};
	size_t end = n;

	for (size_t i = 0; i < sizeof(starts); i++) {
		const char *q = memchr(p, starts[i], end);
		if (q)
			end = (size_t)(q - p);
	}
	return end;
}

size_t al_unescape_feed(struct al_unescape *u, const char *in, size_t n, uint64_t pos, char *out)
{
	struct sink s = {out, 0};

	for (size_t i = 0; i < n; i++) {
		/* The common case: a run of plain bytes, copied as it is. */
		if (u->st == ST_NORMAL && u->high < 0) {
			size_t r = plain_run(in + i, n - i);
			memcpy(out + s.k, in + i, r);
			s.k += r;
			if ((i += r) == n)
				break;
		}
		if (!step(u, &s, in[i], pos + i))
			step(u, &s, in[i], pos + i);
	}
	return s.k;
}

uint64_t al_unescape_open(const struct al_unescape *u)
{
	if (u->high >= 0)
		return u->high_at;
	return u->st != ST_NORMAL ? u->seq_at : UINT64_MAX;
}

size_t al_unescape_end(struct al_unescape *u, char *out)
{
	struct sink s = {out, 0};

	flush_seq(u, &s);
	flush_high(u, &s);
	al_unescape_init(u);
	return s.k;
}

/* ---- the view the answers' search uses ---- */

#define VIEW_CHUNK 16384

void al_unescape_view_init(struct al_unescape_view *v, const struct al_valscan_set *set)
{
	*v = (struct al_unescape_view){0};
	al_unescape_init(&v->u);
	al_valscan_init(&v->scan, set);
	v->buf = xmalloc(VIEW_CHUNK + 2 * AL_UNESCAPE_SEQ_MAX);
}

void al_unescape_view_fini(struct al_unescape_view *v)
{
	if (v->buf)
		explicit_bzero(v->buf, VIEW_CHUNK + 2 * AL_UNESCAPE_SEQ_MAX);
	explicit_bzero(&v->u, sizeof(v->u));
	al_valscan_fini(&v->scan);
	free(v->buf);
	*v = (struct al_unescape_view){0};
}

int al_unescape_view_feed(struct al_unescape_view *v, const char *p, size_t n, uint64_t pos)
{
	int id = -1;

	if (!v->buf)
		return -1;
	size_t edge = al_valscan_max_len(v->scan.set) ? al_valscan_max_len(v->scan.set) - 1 : 0;

	for (size_t off = 0; off < n && id < 0; off += VIEW_CHUNK) {
		size_t m = n - off < VIEW_CHUNK ? n - off : VIEW_CHUNK;
		/* A stretch with no escape comes out as it is. What this view
		 * searches for, the stream's own search does too (valscan.c's
		 * forms hold it), so only the stretch's edges are searched here:
		 * a value that began before it, or runs on past it. */
		if (v->u.st == ST_NORMAL && v->u.high < 0 && m > 2 * edge &&
		    plain_run(p + off, m) == m) {
			id = al_valscan_feed(&v->scan, p + off, edge);
			al_valscan_reset(&v->scan);
			if (id < 0)
				id = al_valscan_feed(&v->scan, p + off + m - edge, edge);
			continue;
		}
		size_t k = al_unescape_feed(&v->u, p + off, m, pos + off, v->buf);
		id = al_valscan_feed(&v->scan, v->buf, k);
	}
	v->end = pos + n;
	return id;
}

uint64_t al_unescape_view_hold(const struct al_unescape_view *v)
{
	if (!v->buf)
		return UINT64_MAX;
	uint64_t open = al_unescape_open(&v->u), base = open < v->end ? open : v->end;
	uint64_t back = (uint64_t)al_valscan_pending(&v->scan) * AL_UNESCAPE_SEQ_MAX;
	/* Where the view's last bytes came from is not kept: each came from
	 * at most AL_UNESCAPE_SEQ_MAX bytes of the stream, so the start of a
	 * possible value lies no further back than that many per byte. */
	if (!back)
		return open;
	return base > back ? base - back : 0;
}

int al_unescape_view_end(struct al_unescape_view *v)
{
	if (!v->buf)
		return -1;
	size_t k = al_unescape_end(&v->u, v->buf);
	int id = k ? al_valscan_feed(&v->scan, v->buf, k) : -1;
	al_valscan_reset(&v->scan);
	return id;
}
