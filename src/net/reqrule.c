#include "net/reqrule.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/util.h"

static bool is_alpha(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* RFC 3986 unreserved: what a normalised path holds unencoded. */
static bool is_unreserved(char c)
{
	return is_alpha(c) || is_digit(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

/* A segment (len bytes) that a server could resolve as "." or "..": the
 * part before a path parameter (';', also encoded) is what counts, since
 * some servers strip parameters before resolving dot segments. */
static bool is_dot_segment(const char *s, size_t len)
{
	size_t core = 0;

	while (core < len && s[core] != ';' &&
	       !(s[core] == '%' && core + 2 < len && s[core + 1] == '3' && s[core + 2] == 'B'))
		core++;
	return (core == 1 && s[0] == '.') || (core == 2 && s[0] == '.' && s[1] == '.');
}

/* The checks a pattern character gets; *i is advanced past it. */
static int pattern_char(const char *p, size_t *i, struct al_error *err)
{
	unsigned char c = (unsigned char)p[*i];
	int hi, lo, v;

	if (c == '?')
		return al_error_set(err, EINVAL,
				    "a query ('?') at character %zu: the query is "
				    "not matched",
				    *i + 1);
	if (c == '#')
		return al_error_set(err, EINVAL, "a fragment ('#') at character %zu", *i + 1);
	if (c == '\\')
		return al_error_set(err, EINVAL, "a backslash at character %zu", *i + 1);
	if (c <= ' ' || c >= 0x7f)
		return al_error_set(err, EINVAL,
				    "a space, control or non-ASCII character at character %zu",
				    *i + 1);
	if (c != '%') {
		(*i)++;
		return 0;
	}
	hi = al_hex_digit(p[*i + 1]);
	lo = hi < 0 ? -1 : al_hex_digit(p[*i + 2]);
	if (lo < 0)
		return al_error_set(err, EINVAL,
				    "'%%' not followed by two hex digits at character %zu", *i + 1);
	v = hi * 16 + lo;
	if (is_unreserved((char)v))
		return al_error_set(
		    err, EINVAL,
		    "%%%c%c at character %zu is '%c': write it unencoded (paths are "
		    "matched normalised)",
		    p[*i + 1], p[*i + 2], *i + 1, v);
	if (v == '/' || v == '\\' || v < 0x20 || v == 0x7f)
		return al_error_set(
		    err, EINVAL, "%%%c%c at character %zu can never match (such paths are refused)",
		    p[*i + 1], p[*i + 2], *i + 1);
	if ((p[*i + 1] >= 'a' && p[*i + 1] <= 'f') || (p[*i + 2] >= 'a' && p[*i + 2] <= 'f'))
		return al_error_set(
		    err, EINVAL, "%%%c%c at character %zu: write percent-encodings in upper case",
		    p[*i + 1], p[*i + 2], *i + 1);
	*i += 3;
	return 0;
}

/* One segment: the len bytes at s, which start at character start + 1. */
static int pattern_segment(const char *s, size_t len, size_t start, bool last, struct al_error *err)
{
	if (len == 0 && !last)
		return al_error_set(err, EINVAL, "an empty segment (\"//\") at character %zu",
				    start);
	if (is_dot_segment(s, len))
		return al_error_set(err, EINVAL, "a dot segment at character %zu", start + 1);
	for (size_t i = 0; i + 1 < len; i++) {
		if (s[i] != '*' || s[i + 1] != '*')
			continue;
		if (!(last && len == 2))
			return al_error_set(
			    err, EINVAL,
			    "\"**\" at character %zu: it is only allowed as the last "
			    "segment (\"/**\")",
			    start + 1 + i);
	}
	return 0;
}

static int pattern_check(const char *p, struct al_error *err)
{
	size_t len = strlen(p), seg = 1;
	int r;

	if (len == 0 || p[0] != '/')
		return al_error_set(err, EINVAL, "does not start with '/'");
	if (len > AL_REQRULE_PATTERN_MAX)
		return al_error_set(err, EINVAL, "longer than %d characters",
				    AL_REQRULE_PATTERN_MAX);
	for (size_t i = 1; i <= len;) {
		if (i == len || p[i] == '/') {
			r = pattern_segment(p + seg, i - seg, seg, i == len, err);
			if (r < 0)
				return r;
			seg = ++i;
			continue;
		}
		r = pattern_char(p, &i, err);
		if (r < 0)
			return r;
	}
	return 0;
}

int al_reqrule_pattern_check(const char *pattern, struct al_error *err)
{
	if (!pattern)
		return al_error_set(err, EINVAL, "path pattern missing");
	if (pattern_check(pattern, err) < 0) {
		/* Quoted only once it is known to be printable and short. */
		if (strlen(pattern) <= AL_REQRULE_PATTERN_MAX &&
		    strspn(pattern, "!\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ"
				    "[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~") == strlen(pattern))
			return al_error_wrap(err, "path pattern \"%s\"", pattern);
		return al_error_wrap(err, "path pattern");
	}
	return 0;
}

int al_reqrule_method_check(const char *method, struct al_error *err)
{
	size_t n = method ? strlen(method) : 0;

	if (n == 0)
		return al_error_set(err, EINVAL, "empty method");
	if (n > 32)
		return al_error_set(err, EINVAL, "method longer than 32 characters");
	for (size_t i = 0; i < n; i++)
		if (!al_is_tchar(method[i]))
			return al_error_set(err, EINVAL,
					    "method has a character that is not allowed in a "
					    "token (at %zu)",
					    i + 1);
	return 0;
}

/* One segment against one pattern segment, '*' being one or more
 * characters. Backtracking goes only to the last '*' (complete for this
 * kind of glob), so the cost is at most plen * slen. */
static bool segment_match(const char *p, size_t plen, const char *s, size_t slen)
{
	size_t pi = 0, si = 0, star = SIZE_MAX, mark = 0;

	while (si < slen) {
		if (pi < plen && p[pi] == '*') {
			star = pi++;
			mark = ++si; /* the one character '*' must take */
		} else if (pi < plen && p[pi] == s[si]) {
			pi++;
			si++;
		} else if (star != SIZE_MAX) {
			pi = star + 1;
			si = ++mark;
		} else {
			return false;
		}
	}
	return pi == plen;
}

static size_t segment_len(const char *s, size_t len)
{
	const char *slash = memchr(s, '/', len);

	return slash ? (size_t)(slash - s) : len;
}

bool al_reqrule_path_match(const char *pattern, const char *path, size_t len)
{
	const char *p = pattern;
	size_t plen = pattern ? strlen(pattern) : 0;

	if (!pattern || !path)
		return false;
	for (;;) {
		size_t ps, ss;

		if (plen == 3 && memcmp(p, "/**", 3) == 0)
			return len == 0 || path[0] == '/';
		if (plen == 0 || len == 0)
			return plen == 0 && len == 0;
		if (p[0] != '/' || path[0] != '/')
			return false;
		ps = segment_len(p + 1, plen - 1);
		ss = segment_len(path + 1, len - 1);
		if (!segment_match(p + 1, ps, path + 1, ss))
			return false;
		p += 1 + ps;
		plen -= 1 + ps;
		path += 1 + ss;
		len -= 1 + ss;
	}
}

struct norm {
	char *out;
	size_t size, len;
	size_t seg;  /* where the current segment starts in out */
	size_t step; /* how many bytes of the target the last character took */
	struct al_error *err;
};

static int norm_put(struct norm *n, const char *s, size_t len)
{
	if (len >= n->size - n->len)
		return -ENOSPC;
	memcpy(n->out + n->len, s, len);
	n->len += len;
	return 0;
}

/* The segment that ends at n->len; last: the path's final one, which may
 * be empty (a trailing slash). */
static int norm_segment_end(struct norm *n, bool last)
{
	size_t len = n->len - n->seg;

	if (len == 0 && !last)
		return al_error_set(n->err, EINVAL, "empty segment (\"//\") in the path");
	if (is_dot_segment(n->out + n->seg, len))
		return al_error_set(n->err, EINVAL, "dot segment (\".\" or \"..\") in the path");
	return 0;
}

/* The byte that %XX at t[i] encodes, or -1 when t[i] does not start one. */
static int percent_byte(const char *t, size_t end, size_t i)
{
	int hi = i + 1 < end && t[i] == '%' ? al_hex_digit(t[i + 1]) : -1;
	int lo = hi >= 0 && i + 2 < end ? al_hex_digit(t[i + 2]) : -1;

	return lo < 0 ? -1 : hi * 16 + lo;
}

/* A percent-encoded byte past ASCII at t[i] and the ones that continue
 * it: they must be one well-formed UTF-8 character (RFC 3629: no overlong
 * form, no UTF-16 surrogate, nothing past U+10FFFF, nothing cut short),
 * or servers that decode the path could each read something else in it
 * ("%C0%AE" is '.' to a lax decoder). Written out with upper-case hex. */
static int norm_utf8(struct norm *n, const char *t, size_t end, size_t i)
{
	static const char hex[] = "0123456789ABCDEF";
	int b[4] = {percent_byte(t, end, i)}, len, lo = 0x80, hi = 0xbf;
	const char *why = NULL;

	if (b[0] >= 0xc2 && b[0] <= 0xdf)
		len = 2;
	else if (b[0] >= 0xe0 && b[0] <= 0xef)
		len = 3;
	else if (b[0] >= 0xf0 && b[0] <= 0xf4)
		len = 4;
	else
		return al_error_set(n->err, EINVAL,
				    "percent-encoded byte %%%02X at character %zu of the path "
				    "does not start a UTF-8 character (%s)",
				    (unsigned)b[0], i,
				    b[0] < 0xc0	  ? "a continuation byte"
				    : b[0] < 0xc2 ? "an overlong form"
						  : "past U+10FFFF");
	/* The second byte's range is what rules out the overlong forms, the
	 * surrogates (U+D800-U+DFFF) and code points past U+10FFFF. */
	if (b[0] == 0xe0)
		lo = 0xa0, why = "an overlong form";
	else if (b[0] == 0xed)
		hi = 0x9f, why = "a UTF-16 surrogate";
	else if (b[0] == 0xf0)
		lo = 0x90, why = "an overlong form";
	else if (b[0] == 0xf4)
		hi = 0x8f, why = "past U+10FFFF";
	for (int k = 1; k < len; k++) {
		b[k] = percent_byte(t, end, i + 3 * (size_t)k);
		if (b[k] < 0x80 || b[k] > 0xbf)
			return al_error_set(n->err, EINVAL,
					    "truncated UTF-8 character at character %zu of the "
					    "path (its byte %d is not a percent-encoded "
					    "continuation byte)",
					    i, k + 1);
		if (k == 1 && (b[1] < lo || b[1] > hi))
			return al_error_set(n->err, EINVAL,
					    "percent-encoded UTF-8 at character %zu of the path is "
					    "not valid: %s",
					    i, why);
	}
	for (int k = 0; k < len; k++) {
		char enc[3] = {'%', hex[b[k] >> 4], hex[b[k] & 15]};
		int r = norm_put(n, enc, 3);
		if (r < 0)
			return r;
	}
	n->step = 3 * (size_t)len;
	return 0;
}

static int norm_percent(struct norm *n, const char *t, size_t end, size_t i)
{
	static const char hex[] = "0123456789ABCDEF";
	int b = percent_byte(t, end, i);
	char v, enc[3];

	if (b < 0)
		return al_error_set(n->err, EINVAL, "malformed percent-encoding in the path");
	if (b >= 0x80)
		return norm_utf8(n, t, end, i);
	n->step = 3;
	v = (char)b;
	if (is_unreserved(v))
		return norm_put(n, &v, 1);
	if (v == '/')
		return al_error_set(n->err, EINVAL, "encoded '/' (%%2F) in the path");
	if (v == '\\')
		return al_error_set(n->err, EINVAL, "encoded '\\' (%%5C) in the path");
	if ((unsigned char)v < 0x20 || v == 0x7f)
		return al_error_set(n->err, EINVAL, "encoded control character in the path");
	enc[0] = '%';
	enc[1] = hex[b >> 4];
	enc[2] = hex[b & 15];
	return norm_put(n, enc, 3);
}

static int norm_char(struct norm *n, const char *t, size_t end, size_t i)
{
	unsigned char c = (unsigned char)t[i];
	int r;

	n->step = 1;
	if (c == '/') {
		r = norm_segment_end(n, false);
		if (r < 0)
			return r;
		r = norm_put(n, "/", 1);
		n->seg = n->len;
		return r;
	}
	if (c == '%')
		return norm_percent(n, t, end, i);
	if (c == '\\')
		return al_error_set(n->err, EINVAL, "backslash in the path");
	if (c == '#')
		return al_error_set(n->err, EINVAL, "fragment ('#') in the path");
	if (c <= ' ' || c >= 0x7f)
		return al_error_set(n->err, EINVAL,
				    "space, control or non-ASCII character in the path");
	return norm_put(n, t + i, 1);
}

int al_reqrule_path_normalize(const char *target, size_t len, char *out, size_t size,
			      struct al_error *err)
{
	struct norm n = {out, size, 0, 1, 1, err};
	const char *q = target ? memchr(target, '?', len) : NULL;
	size_t end = q ? (size_t)(q - target) : (target ? len : 0);
	int r;

	if (!out || size < 2)
		return -ENOSPC;
	out[0] = '/';
	n.len = 1;
	if (end > 0 && target[0] != '/')
		return al_error_set(err, EINVAL, "the path does not start with '/'");
	for (size_t i = 1; i < end; i += n.step) {
		r = norm_char(&n, target, end, i);
		if (r < 0)
			return r;
	}
	r = norm_segment_end(&n, true);
	if (r < 0)
		return r;
	out[n.len] = '\0';
	return (int)n.len;
}

static bool method_listed(const struct al_reqrule *r, const char *m, size_t len)
{
	for (size_t i = 0; i < r->n_methods; i++)
		if (strlen(r->methods[i]) == len && memcmp(r->methods[i], m, len) == 0)
			return true;
	return false;
}

static bool path_listed(const struct al_reqrule *r, const char *path, size_t len)
{
	for (size_t i = 0; i < r->n_paths; i++)
		if (al_reqrule_path_match(r->paths[i], path, len))
			return true;
	return false;
}

int al_reqrule_check(const struct al_reqrule *r, const char *method, size_t method_len,
		     const char *path, size_t path_len, int64_t content_length, const char **why)
{
	const char *unused;

	if (!why)
		why = &unused;
	if (r->n_methods > 0 && !method_listed(r, method, method_len)) {
		*why = "method not allowed";
		return 403;
	}
	if (r->n_paths > 0 && !path_listed(r, path, path_len)) {
		*why = "path not allowed";
		return 403;
	}
	if (r->max_body > 0 && content_length > 0 && (uint64_t)content_length > r->max_body) {
		*why = "body larger than max_body";
		return 413;
	}
	*why = NULL;
	return 0;
}

char *al_reqrule_text(const struct al_reqrule *r, const char *host)
{
	_cleanup_free_ char **mv = xcalloc(r->n_methods + 1, sizeof(char *));
	_cleanup_free_ char **pv = xcalloc(r->n_paths + 1, sizeof(char *));
	_cleanup_free_ char *methods = NULL, *paths = NULL;
	char max[32] = "";
	char *text;

	/* al_strv_join() wants NULL-terminated vectors: copies of the
	 * pointers, not of the strings. */
	if (r->n_methods)
		memcpy(mv, r->methods, r->n_methods * sizeof(char *));
	if (r->n_paths)
		memcpy(pv, r->paths, r->n_paths * sizeof(char *));
	methods = al_strv_join(mv, ",");
	paths = al_strv_join(pv, ",");
	if (r->max_body > 0)
		snprintf(max, sizeof(max), " max_body=%llu", (unsigned long long)r->max_body);
	text = xasprintf("%s%s%s%s%s%s", host ? host : "", r->n_methods ? " methods=" : "", methods,
			 r->n_paths ? " paths=" : "", paths, max);
	if (!host && text[0] == ' ')
		memmove(text, text + 1, strlen(text));
	return text;
}

void al_reqrule_clear(struct al_reqrule *r)
{
	for (size_t i = 0; i < r->n_methods; i++)
		free(r->methods[i]);
	for (size_t i = 0; i < r->n_paths; i++)
		free(r->paths[i]);
	free(r->methods);
	free(r->paths);
	free(r->text);
	*r = (struct al_reqrule){0};
}
