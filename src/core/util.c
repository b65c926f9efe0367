#include "core/util.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void oom(void)
{
	fputs("airlock: out of memory\n", stderr);
	abort();
}

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		oom();
	return p;
}

void *xcalloc(size_t nmemb, size_t size)
{
	void *p = calloc(nmemb ? nmemb : 1, size ? size : 1);
	if (!p)
		oom();
	return p;
}

void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		oom();
	return p;
}

char *xstrdup(const char *s)
{
	char *p = strdup(s);
	if (!p)
		oom();
	return p;
}

char *xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *p = NULL;
	int r;

	va_start(ap, fmt);
	r = vasprintf(&p, fmt, ap);
	va_end(ap);
	if (r < 0)
		oom();
	return p;
}

size_t al_strv_len(char *const *v)
{
	size_t n = 0;
	while (v && v[n])
		n++;
	return n;
}

void al_strv_push_take(char ***v, char *s)
{
	size_t n = al_strv_len(*v);
	*v = xrealloc(*v, (n + 2) * sizeof(char *));
	(*v)[n] = s;
	(*v)[n + 1] = NULL;
}

void al_strv_push(char ***v, const char *s)
{
	al_strv_push_take(v, xstrdup(s));
}

char **al_strv_dup(char *const *v)
{
	char **out = NULL;
	for (size_t i = 0; v && v[i]; i++)
		al_strv_push(&out, v[i]);
	if (!out)
		out = xcalloc(1, sizeof(char *));
	return out;
}

void al_strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

char *al_strv_join(char *const *v, const char *sep)
{
	size_t n = 1, sl = strlen(sep);
	char *out, *p;

	for (size_t i = 0; v && v[i]; i++)
		n += strlen(v[i]) + sl;
	p = out = xmalloc(n);
	for (size_t i = 0; v && v[i]; i++) {
		if (i) {
			memcpy(p, sep, sl);
			p += sl;
		}
		memcpy(p, v[i], strlen(v[i]));
		p += strlen(v[i]);
	}
	*p = '\0';
	return out;
}

int al_parse_size(const char *s, uint64_t *ret)
{
	uint64_t value = 0, mult = 1;
	const char *p = s;

	if (!s || !isdigit((unsigned char)*p))
		return -EINVAL;
	while (isdigit((unsigned char)*p)) {
		unsigned d = (unsigned)(*p - '0');
		if (value > (UINT64_MAX - d) / 10)
			return -ERANGE;
		value = value * 10 + d;
		p++;
	}
	switch (toupper((unsigned char)*p)) {
	case '\0':
		break;
	case 'K':
		mult = 1ULL << 10;
		p++;
		break;
	case 'M':
		mult = 1ULL << 20;
		p++;
		break;
	case 'G':
		mult = 1ULL << 30;
		p++;
		break;
	case 'T':
		mult = 1ULL << 40;
		p++;
		break;
	case 'B':
		break;
	default:
		return -EINVAL;
	}
	if (mult > 1 && (*p == 'i' || *p == 'I'))
		p++;
	if (*p == 'B' || *p == 'b')
		p++;
	if (*p != '\0')
		return -EINVAL;
	/* At most 2^62: every size fits a JSON integer (the record, the
	 * audit, the decider's question) and any sum of a few of them. */
	if (value > AL_SIZE_MAX / mult)
		return -ERANGE;
	*ret = value * mult;
	return 0;
}

/* One "NUMBER[UNIT]" at *s; advances *s. Returns ms (> 0 not checked) or
 * a negative errno. A bare number (seconds) is only allowed alone. */
static int duration_part(const char **s, bool alone, int *rank, double *ret)
{
	static const struct {
		const char *unit;
		double mult;
	} units[] = {{"ms", 1.0}, {"h", 3600000.0}, {"m", 60000.0}, {"s", 1000.0}};
	size_t n = 0, dots = 0;
	char num[64];

	/* Plain decimal only (strtod alone would take hex and exponents). */
	while (isdigit((unsigned char)(*s)[n]) || (*s)[n] == '.')
		dots += (*s)[n++] == '.';
	if (n == 0 || n >= sizeof(num) || dots > 1 || (n == 1 && dots == 1))
		return -EINVAL;
	memcpy(num, *s, n);
	num[n] = '\0';
	*s += n;
	if (**s == '\0' && alone) {
		*ret = strtod(num, NULL) * 1000.0;
		return 0;
	}
	/* h, m, s, ms: each at most once, larger units first ("1m30s"). */
	static const int order[] = {3, 0, 1, 2}; /* ms, h, m, s → rank */
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		size_t ul = strlen(units[i].unit);
		if (strncmp(*s, units[i].unit, ul) != 0 || isalpha((unsigned char)(*s)[ul]))
			continue;
		if (order[i] <= *rank)
			return -EINVAL;
		*rank = order[i];
		*s += ul;
		*ret = strtod(num, NULL) * units[i].mult;
		return 0;
	}
	return -EINVAL;
}

int al_parse_duration_ms(const char *s, uint64_t *ret)
{
	double v = 0, part;
	int rank = -1, r;
	bool first = true;

	if (!s || !*s)
		return -EINVAL;
	while (*s) {
		if ((r = duration_part(&s, first && !strpbrk(s, "hms"), &rank, &part)) < 0)
			return r;
		v += part;
		first = false;
	}
	if (!isfinite(v) || v <= 0)
		return -EINVAL;
	if (v < 1.0 || v > 1e12)
		return -ERANGE;
	*ret = (uint64_t)v;
	return 0;
}

void al_format_size(uint64_t bytes, char *buf, size_t len)
{
	static const char units[] = "KMGT";
	int u = -1;
	uint64_t v = bytes;

	while (v && v % 1024 == 0 && u < 3) {
		v /= 1024;
		u++;
	}
	if (u < 0)
		snprintf(buf, len, "%" PRIu64, bytes);
	else
		snprintf(buf, len, "%" PRIu64 "%c", v, units[u]);
}

bool al_path_is_clean_absolute(const char *p)
{
	if (!p || p[0] != '/')
		return false;
	if (strcmp(p, "/") == 0)
		return true;
	for (const char *c = p; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			return false;
	for (const char *c = p; *c;) {
		const char *comp = c + 1, *next = strchr(comp, '/');
		size_t n = next ? (size_t)(next - comp) : strlen(comp);
		if (n == 0)
			return false; /* "//" or trailing "/" */
		if ((n == 1 && comp[0] == '.') || (n == 2 && comp[0] == '.' && comp[1] == '.'))
			return false;
		if (!next)
			break;
		c = next;
	}
	return true;
}

bool al_path_is_under(const char *path, const char *prefix)
{
	size_t n = strlen(prefix);
	if (strcmp(prefix, "/") == 0)
		return path[0] == '/';
	return strncmp(path, prefix, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

bool al_env_name_is_valid(const char *name)
{
	if (!name || !(isalpha((unsigned char)name[0]) || name[0] == '_'))
		return false;
	for (const char *c = name; *c; c++)
		if (!(isalnum((unsigned char)*c) || *c == '_'))
			return false;
	return true;
}

bool al_hostname_is_valid(const char *name)
{
	size_t n = name ? strlen(name) : 0;
	if (n == 0 || n > 63 || name[0] == '-' || name[n - 1] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(isalnum((unsigned char)name[i]) || name[i] == '-'))
			return false;
	return true;
}

int al_hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

bool al_is_tchar(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c != '\0' && strchr("!#$%&'*+-.^_`|~", c));
}

/* The length of the well-formed UTF-8 character at s (at most n bytes
 * available), or 0 when s does not start one: overlong forms, surrogates
 * and code points over U+10FFFF are not well formed (RFC 3629). */
static size_t utf8_char_len(const unsigned char *s, size_t n)
{
	unsigned c = s[0];
	size_t len;
	unsigned cp;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2, cp = c & 0x1f;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3, cp = c & 0x0f;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4, cp = c & 0x07;
	else
		return 0;
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		return 0;
	return len;
}

bool al_utf8_escape(char *out, size_t outlen, const char *in)
{
	const unsigned char *s = (const unsigned char *)in;
	size_t n = strlen(in), o = 0;
	bool escaped = false;

	if (outlen == 0)
		return false;
	for (size_t i = 0; i < n;) {
		size_t len = utf8_char_len(s + i, n - i);
		if (len == 0) {
			if (o + 4 >= outlen)
				break;
			snprintf(out + o, outlen - o, "\\x%02x", s[i]);
			o += 4, i++, escaped = true;
			continue;
		}
		if (o + len >= outlen) /* a whole character or none */
			break;
		memcpy(out + o, s + i, len);
		o += len, i += len;
	}
	out[o] = '\0';
	return escaped;
}
