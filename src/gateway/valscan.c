#include "gateway/valscan.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/util.h"

/* ---- the forms of a value ---- */

/* A form being made: grows as needed, at most AL_VALSCAN_MAX bytes. */
struct form {
	char *d;
	size_t len, size;
	bool over;
};

static void put(struct form *f, const char *p, size_t n)
{
	if (f->over || f->len + n > AL_VALSCAN_MAX) {
		f->over = true;
		return;
	}
	if (f->len + n > f->size) {
		f->size = (f->len + n) * 2;
		f->d = xrealloc(f->d, f->size);
	}
	memcpy(f->d + f->len, p, n);
	f->len += n;
}

static void putc1(struct form *f, char c)
{
	put(f, &c, 1);
}

static bool unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '.' || c == '_' || c == '~';
}

/* Percent-encoding as the common encoders write it: the unreserved
 * characters and those in keep as they are, a space as '+' with plus. */
static void pct(struct form *f, const char *v, size_t n, const char *keep, bool upper, bool plus)
{
	const char *hex = upper ? "0123456789ABCDEF" : "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)v[i];
		char e[3] = {'%', hex[c >> 4], hex[c & 15]};
		if (unreserved(c) || (c && strchr(keep, c)))
			putc1(f, (char)c);
		else if (plus && c == ' ')
			putc1(f, '+');
		else
			put(f, e, 3);
	}
}

/* Base64 (or base64url) of the value placed after align bytes of
 * something else: only the characters that depend on the value alone. */
static void b64(struct form *f, const char *v, size_t n, unsigned align, bool url)
{
	const char *abc = url ? "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
			      : "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t total = align + n, first = (8 * align + 5) / 6, last = 8 * total / 6;

	for (size_t k = first; k < last; k++) {
		/* Character k covers bits 6k .. 6k+5 of the whole. */
		unsigned bits = 0;
		for (unsigned b = 0; b < 6; b++) {
			size_t bit = 6 * k + b, byte = bit / 8;
			unsigned char c = byte < align ? 0 : (unsigned char)v[byte - align];
			bits = bits << 1 | ((c >> (7 - bit % 8)) & 1);
		}
		putc1(f, abc[bits]);
	}
}

/* The code point of the UTF-8 sequence at v[i] (its length in *len), or
 * -1 when it is not valid UTF-8. */
static long utf8_at(const unsigned char *v, size_t n, size_t i, size_t *len)
{
	unsigned char c = v[i];
	size_t k = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
	long cp = k == 4 ? c & 7 : k == 3 ? c & 15 : c & 31;

	if (c >= 0xf5 || k == 0 || i + k > n)
		return -1;
	for (size_t j = 1; j < k; j++) {
		if ((v[i + j] & 0xc0) != 0x80)
			return -1;
		cp = cp << 6 | (v[i + j] & 63);
	}
	if ((k == 3 && cp < 0x800) || (k == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return -1;
	*len = k;
	return cp;
}

static void json_u(struct form *f, long cp, bool upper)
{
	char e[7];

	snprintf(e, sizeof(e), upper ? "\\u%04lX" : "\\u%04lx", cp);
	put(f, e, 6);
}

/* How a JSON encoder writes a string: '/' as "\/" (slash), non-ASCII as
 * \u escapes (ascii: false when the value is not UTF-8), the characters
 * of always as \u escapes too, hex in upper or lower case. */
struct json_style {
	bool slash, ascii, upper;
	const char *always;
};

static bool json(struct form *f, const char *v, size_t n, const struct json_style *js)
{
	const unsigned char *u = (const unsigned char *)v;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = u[i];
		const char *esc = c == '"'    ? "\\\""
				  : c == '\\' ? "\\\\"
				  : c == '\b' ? "\\b"
				  : c == '\f' ? "\\f"
				  : c == '\n' ? "\\n"
				  : c == '\r' ? "\\r"
				  : c == '\t' ? "\\t"
					      : NULL;
		if (c && strchr(js->always, c))
			json_u(f, c, js->upper);
		else if (esc)
			put(f, esc, strlen(esc));
		else if (c == '/' && js->slash)
			put(f, "\\/", 2);
		else if (c < 0x20 || c == 0x7f)
			json_u(f, c, js->upper);
		else if (c < 0x80 || !js->ascii)
			putc1(f, (char)c);
		else {
			size_t k;
			long cp = utf8_at(u, n, i, &k);
			if (cp < 0)
				return false;
			if (cp >= 0x10000) {
				json_u(f, 0xd800 + ((cp - 0x10000) >> 10), js->upper);
				json_u(f, 0xdc00 + ((cp - 0x10000) & 0x3ff), js->upper);
			} else {
				json_u(f, cp, js->upper);
			}
			i += k - 1;
		}
	}
	return true;
}

/* HTML's escapes: & < > always, and the characters of more (quote,
 * apostrophe, backquote, equals sign) in the spelling an encoder uses. */
struct html_style {
	const char *quot, *apos, *grave, *equals;
};

static void html(struct form *f, const char *v, size_t n, const struct html_style *hs)
{
	for (size_t i = 0; i < n; i++) {
		const char *e = v[i] == '&'		    ? "&amp;"
				: v[i] == '<'		    ? "&lt;"
				: v[i] == '>'		    ? "&gt;"
				: v[i] == '"'		    ? hs->quot
				: v[i] == '\''		    ? hs->apos
				: v[i] == '`' && hs->grave  ? hs->grave
				: v[i] == '=' && hs->equals ? hs->equals
							    : NULL;
		if (e)
			put(f, e, strlen(e));
		else
			putc1(f, v[i]);
	}
}

struct forms {
	struct form seen[64];
	size_t n;
	bool over;
	void (*fn)(const char *form, size_t len, void *data);
	void *data;
};

/* Hand on a finished form unless it is short or one handed on before. */
static void emit(struct forms *fs, struct form *f)
{
	if (f->over) {
		fs->over = true;
		free(f->d);
		return;
	}
	bool dup = f->len < AL_VALSCAN_MIN || fs->n == AL_ARRAY_SIZE(fs->seen);
	for (size_t i = 0; i < fs->n && !dup; i++)
		dup = fs->seen[i].len == f->len && memcmp(fs->seen[i].d, f->d, f->len) == 0;
	if (dup) {
		if (f->d)
			explicit_bzero(f->d, f->len);
		free(f->d);
		return;
	}
	fs->fn(f->d, f->len, fs->data);
	fs->seen[fs->n++] = *f;
}

int al_valscan_forms(const char *v, size_t n, void (*fn)(const char *form, size_t len, void *data),
		     void *data)
{
	static const struct {
		const char *keep;
		bool upper, plus;
	} pcts[] = {
	    {"", true, false},	{"", false, false}, {"", true, true},	    {"", false, true},
	    {"/", true, false}, {"/", true, true},  {"!'()*", true, false},
	};
	static const struct json_style jsons[] = {
	    {false, false, false, ""},	     {true, false, false, ""}, {false, true, false, ""},
	    {true, true, false, ""},	     {false, true, true, ""},  {false, false, false, "<>&"},
	    {false, true, true, "\"&'+<>`"},
	};
	static const struct html_style htmls[] = {
	    {"&quot;", "&#x27;", NULL, NULL},	      {"&quot;", "&#39;", NULL, NULL},
	    {"&quot;", "&#039;", NULL, NULL},	      {"&quot;", "&apos;", NULL, NULL},
	    {"&#34;", "&#39;", NULL, NULL},	      {"&#34;", "&#x27;", NULL, NULL},
	    {"&quot;", "&#x27;", "&#x60;", "&#x3D;"},
	};
	struct forms fs = {.fn = fn, .data = data};
	struct form f;

	f = (struct form){0};
	put(&f, v, n);
	emit(&fs, &f);
	/* Spaces as '+' and the rest as it is (a form's space; also what the
	 * unescaped view searches for, so that a stretch of the stream it
	 * leaves as it is need not be searched twice). */
	f = (struct form){0};
	for (size_t i = 0; i < n; i++)
		putc1(&f, v[i] == ' ' ? '+' : v[i]);
	emit(&fs, &f);
	for (size_t i = 0; i < AL_ARRAY_SIZE(pcts); i++) {
		f = (struct form){0};
		pct(&f, v, n, pcts[i].keep, pcts[i].upper, pcts[i].plus);
		/* A URL kept with its '/' in a JSON string comes back as "\/". */
		if (strchr(pcts[i].keep, '/') && !f.over && memchr(f.d, '/', f.len)) {
			struct form j = {0};
			json(&j, f.d, f.len, &jsons[1]);
			emit(&fs, &j);
		}
		emit(&fs, &f);
	}
	for (unsigned url = 0; url < 2; url++)
		for (unsigned a = 0; a < 3; a++) {
			f = (struct form){0};
			b64(&f, v, n, a, url);
			emit(&fs, &f);
		}
	for (size_t k = 0; k < AL_ARRAY_SIZE(jsons); k++) {
		f = (struct form){0};
		if (json(&f, v, n, &jsons[k]))
			emit(&fs, &f);
		else
			free(f.d);
	}
	for (size_t k = 0; k < AL_ARRAY_SIZE(htmls); k++) {
		f = (struct form){0};
		html(&f, v, n, &htmls[k]);
		emit(&fs, &f);
	}
	for (size_t i = 0; i < fs.n; i++) {
		explicit_bzero(fs.seen[i].d, fs.seen[i].len);
		free(fs.seen[i].d);
	}
	return fs.over ? -EINVAL : (int)fs.n;
}

/* ---- the set: a multi-pattern Horspool scan over 2-byte blocks ---- */

/* As in needles.c (after Wu and Manber): a window of m bytes slides along
 * the text; the block at its end says how far it may jump, or, at 0,
 * which forms end their first m bytes with it. */
#define BLOCKS	   65536
#define WINDOW_MAX 64

struct al_valscan_set {
	size_t n, max_len, min_len, m;
	char **v;
	size_t *len;
	int *id;
	uint32_t *sorted; /* the forms in byte order, for al_valscan_pending */
	uint8_t shift[BLOCKS];
	uint16_t first[BLOCKS]; /* 1 + the first form whose block this is, or 0 */
	uint16_t *next;		/* 1 + the next form with the same block, or 0 */
	bool starts[256];	/* bytes a form starts with */
};

static unsigned block(const char *p)
{
	return (unsigned)(unsigned char)p[0] << 8 | (unsigned char)p[1];
}

struct adder {
	struct al_valscan_set *set;
	int id;
	bool whole, full;
};

static void add_needle(struct adder *a, const char *p, size_t len)
{
	struct al_valscan_set *s = a->set;

	if (s->n == AL_VALSCAN_NEEDLES_MAX) {
		a->full = true;
		return;
	}
	s->v[s->n] = xmalloc(len);
	memcpy(s->v[s->n], p, len);
	s->len[s->n] = len;
	s->id[s->n] = a->id;
	s->n++;
}

/* A form, and unless the value is searched whole, its two halves. */
static void add_form(const char *form, size_t len, void *data)
{
	struct adder *a = data;
	size_t h = (len + 1) / 2 > AL_VALSCAN_MIN ? (len + 1) / 2 : AL_VALSCAN_MIN;

	add_needle(a, form, len);
	if (!a->whole && h < len) {
		add_needle(a, form, h);
		add_needle(a, form + len - h, h);
	}
}

/* For a view that undoes the escapes itself: the value, and its base64
 * and base64url at each alignment (an echo of those percent-encoded or
 * JSON-escaped comes out of the view as they are). */
static void plain_forms(const char *v, size_t n, struct adder *a)
{
	add_form(v, n, a);
	for (unsigned url = 0; url < 2; url++)
		for (unsigned al = 0; al < 3; al++) {
			struct form f = {0};
			b64(&f, v, n, al, url);
			if (!f.over && f.len >= AL_VALSCAN_MIN)
				add_form(f.d, f.len, a);
			if (f.d)
				explicit_bzero(f.d, f.len);
			free(f.d);
		}
}

/* The set is qsort_r's argument, not a file-scope pointer: sets may be
 * compiled in several threads of one process at once. */
static int cmp_sorted(const void *a, const void *b, void *arg)
{
	const struct al_valscan_set *sort_set = arg;
	uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
	size_t li = sort_set->len[i], lj = sort_set->len[j];
	int r = memcmp(sort_set->v[i], sort_set->v[j], li < lj ? li : lj);

	return r ? r : li < lj ? -1 : li > lj;
}

static void compile(struct al_valscan_set *s)
{
	size_t m = s->min_len < WINDOW_MAX ? s->min_len : WINDOW_MAX;

	s->m = m;
	memset(s->shift, (int)(m - 1), sizeof(s->shift));
	for (size_t i = 0; i < s->n; i++) {
		s->starts[(unsigned char)s->v[i][0]] = true;
		for (size_t j = 0; j + 1 < m; j++) {
			unsigned b = block(s->v[i] + j);
			uint8_t sh = (uint8_t)(m - 2 - j);
			if (sh < s->shift[b])
				s->shift[b] = sh;
		}
	}
	for (size_t i = s->n; i-- > 0;) {
		unsigned b = block(s->v[i] + m - 2);
		s->next[i] = s->first[b];
		s->first[b] = (uint16_t)(i + 1);
	}
	for (size_t i = 0; i < s->n; i++)
		s->sorted[i] = (uint32_t)i;
	qsort_r(s->sorted, s->n, sizeof(*s->sorted), cmp_sorted, s);
}

int al_valscan_new(const struct al_valscan_value *v, size_t n, struct al_valscan_set **ret,
		   struct al_error *err)
{
	struct al_valscan_set *s = xcalloc(1, sizeof(*s));
	size_t cap = AL_VALSCAN_NEEDLES_MAX;

	s->v = xcalloc(cap, sizeof(*s->v));
	s->len = xcalloc(cap, sizeof(*s->len));
	s->id = xcalloc(cap, sizeof(*s->id));
	s->min_len = SIZE_MAX;
	for (size_t i = 0; i < n; i++) {
		struct adder a = {s, v[i].id, v[i].whole || v[i].exact, false};
		if (v[i].len < AL_VALSCAN_MIN || v[i].len > AL_VALSCAN_MAX) {
			al_valscan_free(s);
			return al_error_set(err, EINVAL, "value %zu is not %d to %u bytes long", i,
					    AL_VALSCAN_MIN, AL_VALSCAN_MAX);
		}
		if (v[i].exact || v[i].bare)
			add_form(v[i].data, v[i].len, &a);
		else if (v[i].plain)
			plain_forms(v[i].data, v[i].len, &a);
		else if (al_valscan_forms(v[i].data, v[i].len, add_form, &a) < 0) {
			al_valscan_free(s);
			return al_error_set(err, EINVAL,
					    "value %zu: one of its encoded forms is longer than %u "
					    "bytes",
					    i, AL_VALSCAN_MAX);
		}
		if (a.full) {
			al_valscan_free(s);
			return al_error_set(err, EINVAL, "more than %d forms of the values",
					    AL_VALSCAN_NEEDLES_MAX);
		}
	}
	for (size_t i = 0; i < s->n; i++) {
		s->max_len = s->len[i] > s->max_len ? s->len[i] : s->max_len;
		s->min_len = s->len[i] < s->min_len ? s->len[i] : s->min_len;
	}
	s->next = xcalloc(s->n + 1, sizeof(*s->next));
	s->sorted = xcalloc(s->n + 1, sizeof(*s->sorted));
	if (s->n)
		compile(s);
	*ret = s;
	return 0;
}

void al_valscan_free(struct al_valscan_set *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++) {
		explicit_bzero(s->v[i], s->len[i]);
		free(s->v[i]);
	}
	free(s->v);
	free(s->len);
	free(s->id);
	free(s->next);
	free(s->sorted);
	free(s);
}

size_t al_valscan_count(const struct al_valscan_set *s)
{
	return s ? s->n : 0;
}

size_t al_valscan_max_len(const struct al_valscan_set *s)
{
	return s ? s->max_len : 0;
}

/* A form that ends after byte `after` of buf (ends count as one past the
 * last byte), or -1. */
static int find_after(const struct al_valscan_set *s, const char *buf, size_t len, size_t after)
{
	size_t m = s->m;

	for (size_t i = m - 1; i < len;) {
		unsigned b = block(buf + i - 1);
		size_t start = i + 1 - m;
		if (s->shift[b]) {
			i += s->shift[b];
			continue;
		}
		for (unsigned k = s->first[b]; k; k = s->next[k - 1]) {
			size_t nl = s->len[k - 1], end = start + nl;
			if (end <= len && end > after && memcmp(buf + start, s->v[k - 1], nl) == 0)
				return s->id[k - 1];
		}
		i++;
	}
	return -1;
}

int al_valscan_find(const struct al_valscan_set *s, const char *buf, size_t len)
{
	if (!s || !s->n || !buf)
		return -1;
	return find_after(s, buf, len, 0);
}

void al_valscan_init(struct al_valscan *sc, const struct al_valscan_set *set)
{
	size_t keep = set && set->n ? set->max_len - 1 : 0;

	*sc = (struct al_valscan){.set = set};
	if (keep) {
		sc->carry = xmalloc(keep);
		sc->joint = xmalloc(2 * keep);
	}
}

void al_valscan_fini(struct al_valscan *sc)
{
	size_t keep = sc->set && sc->set->n ? sc->set->max_len - 1 : 0;

	if (sc->carry) {
		explicit_bzero(sc->carry, keep);
		explicit_bzero(sc->joint, 2 * keep);
	}
	free(sc->carry);
	free(sc->joint);
	*sc = (struct al_valscan){0};
}

void al_valscan_reset(struct al_valscan *sc)
{
	sc->carry_len = 0;
}

/* Keep the stream's last max_len - 1 bytes. */
static void keep_tail(struct al_valscan *sc, const char *buf, size_t len)
{
	size_t keep = sc->set->max_len - 1;

	if (len >= keep) {
		memcpy(sc->carry, buf + len - keep, keep);
		sc->carry_len = keep;
		return;
	}
	if (sc->carry_len + len > keep) {
		size_t drop = sc->carry_len + len - keep;
		memmove(sc->carry, sc->carry + drop, sc->carry_len - drop);
		sc->carry_len -= drop;
	}
	memcpy(sc->carry + sc->carry_len, buf, len);
	sc->carry_len += len;
}

int al_valscan_feed(struct al_valscan *sc, const char *buf, size_t len)
{
	const struct al_valscan_set *s = sc->set;
	int found = -1;

	if (!s || !s->n || !len)
		return -1;
	if (sc->carry_len) {
		/* Forms across the boundary: the carried bytes and as many new
		 * ones as a form could still need. */
		size_t head = len < s->max_len - 1 ? len : s->max_len - 1;
		memcpy(sc->joint, sc->carry, sc->carry_len);
		memcpy(sc->joint + sc->carry_len, buf, head);
		found = find_after(s, sc->joint, sc->carry_len + head, sc->carry_len);
	}
	if (found < 0)
		found = find_after(s, buf, len, 0);
	keep_tail(sc, buf, len);
	return found;
}

/* Whether some form is longer than the n bytes at p and starts with them. */
static bool is_start(const struct al_valscan_set *s, const char *p, size_t n)
{
	size_t lo = 0, hi = s->n;

	/* The first form not below p in byte order (a shorter form equal to
	 * p's start sorts below it). */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2, i = s->sorted[mid], l = s->len[i];
		int r = memcmp(s->v[i], p, l < n ? l : n);
		if (r < 0 || (r == 0 && l < n))
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < s->n; lo++) {
		size_t i = s->sorted[lo];
		if (s->len[i] < n || memcmp(s->v[i], p, n) != 0)
			return false;
		if (s->len[i] > n)
			return true;
	}
	return false;
}

size_t al_valscan_pending(const struct al_valscan *sc)
{
	const struct al_valscan_set *s = sc->set;

	if (!s || !s->n)
		return 0;
	for (size_t p = 0; p < sc->carry_len; p++)
		if (s->starts[(unsigned char)sc->carry[p]] &&
		    is_start(s, sc->carry + p, sc->carry_len - p))
			return sc->carry_len - p;
	return 0;
}
