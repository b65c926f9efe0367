/* The heads and trailer sections of answers (gateway/answer.h): their
 * lines checked strictly, and what they say of the framing. Pure. */
#include "gateway/answer-internal.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/cleanup.h"
#include "core/util.h"

/* The next element of a comma-separated list in [*p, end), without its
 * spaces: false at the end. */
static bool list_next(const char **p, const char *end, const char **ret, size_t *ret_len)
{
	const char *s = *p;

	while (s < end && (*s == ' ' || *s == '\t' || *s == ','))
		s++;
	if (s == end)
		return false;
	const char *e = s;
	while (e < end && *e != ',')
		e++;
	*p = e;
	while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
		e--;
	*ret = s;
	*ret_len = (size_t)(e - s);
	return true;
}

static bool is(const char *s, size_t n, const char *word)
{
	return strlen(word) == n && strncasecmp(s, word, n) == 0;
}

/* A media type a server echoes text in (escaped, perhaps): text, JSON,
 * XML, script, forms, multipart. Others (images, archives, octet-stream)
 * are searched for every form, but not through the unescaped view, which
 * costs several times more per byte. */
static bool textual(const char *v, size_t n)
{
	static const char *const words[] = {"json",	  "xml",       "javascript", "ecmascript",
					    "x-www-form", "multipart", "yaml",	     "graphql"};
	char t[128];
	size_t k = 0;

	while (n && (*v == ' ' || *v == '\t'))
		v++, n--;
	for (; k < n && k + 1 < sizeof(t) && v[k] != ';'; k++)
		t[k] = (char)(v[k] >= 'A' && v[k] <= 'Z' ? v[k] + 32 : v[k]);
	t[k] = '\0';
	if (strncmp(t, "text/", 5) == 0)
		return true;
	for (size_t i = 0; i < AL_ARRAY_SIZE(words); i++)
		if (strstr(t, words[i]))
			return true;
	return false;
}

/* One field line: its checks, and what it says of the framing. */
static bool field(const char *l, size_t n, struct framing *fr)
{
	size_t k = 0;

	while (k < n && al_is_tchar(l[k]))
		k++;
	if (k == 0 || k == n || l[k] != ':')
		return false;
	const char *v = l + k + 1, *end = l + n;
	for (const char *q = v; q < end; q++)
		if (((unsigned char)*q < 0x20 && *q != '\t') || *q == 0x7f)
			return false;
	const char *e;
	size_t el;
	if (is(l, k, "Transfer-Encoding")) {
		size_t items = 0;
		fr->te++;
		fr->chunked_ok = true;
		while (list_next(&v, end, &e, &el))
			fr->chunked_ok &= items++ == 0 && is(e, el, "chunked");
		fr->chunked_ok &= items == 1;
	} else if (is(l, k, "Content-Length")) {
		uint64_t x = 0;
		size_t digits = 0;
		while (v < end && (*v == ' ' || *v == '\t'))
			v++;
		for (; v < end && *v >= '0' && *v <= '9' && digits < 18; v++, digits++)
			x = x * 10 + (uint64_t)(*v - '0');
		while (v < end && (*v == ' ' || *v == '\t'))
			v++;
		if (!digits || v != end || (fr->cl && x != fr->length))
			fr->cl_mismatch = true;
		fr->length = x;
		fr->cl++;
	} else if (is(l, k, "Content-Type")) {
		fr->binary = !textual(v, (size_t)(end - v));
	} else if (is(l, k, "Content-Encoding")) {
		while (list_next(&v, end, &e, &el)) {
			enum coding c = is(e, el, "gzip") || is(e, el, "x-gzip") ? CODE_GZIP
					: is(e, el, "deflate")			 ? CODE_DEFLATE
					: is(e, el, "br")			 ? CODE_BR
										 : CODE_NONE;
			if (is(e, el, "identity"))
				continue;
			if (c == CODE_NONE && !fr->bad_coding[0])
				snprintf(fr->bad_coding, sizeof(fr->bad_coding), "%.*s",
					 (int)(el < 40 ? el : 40), e);
			fr->coding = c;
			fr->n_codings++;
		}
	}
	return true;
}

/* The lines of a head or trailer section of n bytes (ending in an empty
 * line): each a field but the first with status; CR only before LF. */
bool gw_answer_lines(const char *h, size_t n, bool status, struct framing *fr, int *code)
{
	const char *p = h, *end = h + n;
	bool first = status;

	for (size_t i = 0; i < n; i++)
		if (h[i] == '\0' || (h[i] == '\n' && (i == 0 || h[i - 1] != '\r')) ||
		    (h[i] == '\r' && (i + 1 == n || h[i + 1] != '\n')))
			return false;
	while (p < end) {
		const char *eol = memchr(p, '\r', (size_t)(end - p));
		size_t l = (size_t)(eol - p);
		if (l == 0)
			break; /* the empty line that ends it */
		if (first) {
			/* HTTP/1.x SP 3DIGIT [SP reason] */
			if (l < 12 || memcmp(p, "HTTP/1.", 7) != 0 ||
			    (p[7] != '0' && p[7] != '1') || p[8] != ' ' || p[9] < '1' ||
			    p[9] > '5' || p[10] < '0' || p[10] > '9' || p[11] < '0' ||
			    p[11] > '9' || (l > 12 && p[12] != ' '))
				return false;
			*code = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
			first = false;
		} else if (*p == ' ' || *p == '\t' || !field(p, l, fr)) {
			return false; /* obs-fold too */
		}
		p = eol + 2;
	}
	return !first; /* a head starts with its status line */
}
