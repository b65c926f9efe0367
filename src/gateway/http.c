#include "gateway/http.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

struct parser {
	const char *buf;
	struct al_http_request *req;
	struct al_error *err;
};

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static char lower(char c)
{
	return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

/* RFC 9110 token characters. */
static bool is_tchar(char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c))
		return true;
	return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static bool mem_eq_ci(const char *a, size_t alen, const char *lit)
{
	size_t n = strlen(lit);

	if (alen != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (lower(a[i]) != lit[i])
			return false;
	return true;
}

static bool same_ci(const char *a, size_t alen, const char *b, size_t blen)
{
	if (alen != blen)
		return false;
	for (size_t i = 0; i < alen; i++)
		if (lower(a[i]) != lower(b[i]))
			return false;
	return true;
}

static bool prefix_ci(const char *a, size_t alen, const char *lit)
{
	size_t n = strlen(lit);

	return alen >= n && mem_eq_ci(a, n, lit);
}

static const char *at(const struct parser *p, struct al_http_slice s)
{
	return p->buf + s.off;
}

/* Re-label an error from a helper (al_host_parse gives EINVAL) with the
 * code this module promises, prefixing where it happened. */
static int relabel(struct al_error *err, int code, const char *where)
{
	al_error_wrap(err, "%s", where);
	if (err)
		err->code = code;
	return -code;
}

/* Byte-level pass: find the end of the head and refuse bad bytes as soon as
 * they arrive, so a prefix of a valid head always gives -EAGAIN and garbage
 * fails early instead of filling 16 KiB first. */
static int scan_head(const char *buf, size_t len, size_t *ret_len, struct al_error *err)
{
	size_t limit = len < AL_HTTP_HEAD_MAX ? len : AL_HTTP_HEAD_MAX;
	unsigned lines = 0;

	for (size_t i = 0; i < limit; i++) {
		unsigned char c = (unsigned char)buf[i];

		if (c == '\n') {
			if (i == 0 || buf[i - 1] != '\r')
				return al_error_set(err, EPROTO, "bare LF in request head");
			if (i >= 3 && buf[i - 2] == '\n') {
				*ret_len = i + 1;
				return 0;
			}
			if (++lines > AL_HTTP_HEADERS_MAX + 1)
				return al_error_set(err, E2BIG, "more than %d header fields",
						    AL_HTTP_HEADERS_MAX);
		} else if (c == '\r') {
			if (i == 0)
				return al_error_set(err, EPROTO, "empty line before request line");
			if (i + 1 < len && buf[i + 1] != '\n')
				return al_error_set(err, EPROTO, "bare CR in request head");
		} else if ((c < 0x20 && c != '\t') || c == 0x7f) {
			return al_error_set(err, EPROTO, "control character in request head");
		} else if ((c == ' ' || c == '\t') && i > 0 && buf[i - 1] == '\n') {
			return al_error_set(err, EPROTO,
					    "line folding or whitespace before a header");
		}
	}
	if (len >= AL_HTTP_HEAD_MAX)
		return al_error_set(err, E2BIG, "request head larger than %d bytes",
				    AL_HTTP_HEAD_MAX);
	return al_error_set(err, EAGAIN, "request head incomplete");
}

/* 1-65535, decimal, no sign or leading zeros. */
static int parse_port(const char *s, size_t len, uint16_t *ret)
{
	unsigned v = 0;

	if (len == 0 || len > 5 || s[0] == '0')
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		if (!is_digit(s[i]))
			return -EINVAL;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (v > 65535)
		return -EINVAL;
	*ret = (uint16_t)v;
	return 0;
}

/* host[:port] or [v6][:port], as in an authority-form target, an
 * absolute-URI authority or a Host field. Fails with -EINVAL. */
static int parse_authority(const char *s, size_t len, bool port_required, struct al_host *host,
			   uint16_t *port, bool *port_explicit, struct al_error *err)
{
	const char *hs = s, *rest;
	size_t hl;

	if (len == 0)
		return al_error_set(err, EINVAL, "empty authority");
	if (memchr(s, '@', len))
		return al_error_set(err, EINVAL, "userinfo is not allowed");
	if (s[0] == '[') {
		const char *close = memchr(s, ']', len);

		if (!close)
			return al_error_set(err, EINVAL, "missing ']'");
		hs = s + 1;
		hl = (size_t)(close - s) - 1;
		if (!memchr(hs, ':', hl))
			return al_error_set(err, EINVAL, "brackets are only for IPv6 addresses");
		rest = close + 1;
	} else {
		const char *colon = memchr(s, ':', len);

		hl = colon ? (size_t)(colon - s) : len;
		if (colon && memchr(colon + 1, ':', len - hl - 1))
			return al_error_set(err, EINVAL, "IPv6 address without brackets");
		rest = s + hl;
	}
	if (al_host_parse(hs, hl, host, err) < 0)
		return -EINVAL;
	if (rest == s + len) {
		if (port_required)
			return al_error_set(err, EINVAL, "port required");
		*port = 80;
		*port_explicit = false;
		return 0;
	}
	if (rest[0] != ':' || parse_port(rest + 1, (size_t)(s + len - rest) - 1, port) < 0)
		return al_error_set(err, EINVAL, "invalid port");
	*port_explicit = true;
	return 0;
}

static int parse_version(struct parser *p, const char *v, size_t len)
{
	if (len == 8 && memcmp(v, "HTTP/1.", 7) == 0 && (v[7] == '0' || v[7] == '1')) {
		p->req->version_minor = v[7] - '0';
		return 0;
	}
	if (len == 8 && memcmp(v, "HTTP/", 5) == 0 && is_digit(v[5]) && v[6] == '.' &&
	    is_digit(v[7]))
		return al_error_set(p->err, EPROTONOSUPPORT, "HTTP version not supported");
	return al_error_set(p->err, EPROTO, "malformed HTTP version");
}

/* method SP request-target SP HTTP-version, with exactly one space each. */
static int parse_request_line(struct parser *p, size_t end)
{
	const char *b = p->buf;
	size_t i = 0, t;

	while (i < end && is_tchar(b[i]))
		i++;
	if (i == 0 || i >= end || b[i] != ' ')
		return al_error_set(p->err, EPROTO, "malformed request line");
	if (i > AL_HTTP_METHOD_MAX)
		return al_error_set(p->err, EPROTO, "method longer than 32 characters");
	p->req->method = (struct al_http_slice){0, i};
	t = ++i;
	while (i < end && (unsigned char)b[i] > ' ' && (unsigned char)b[i] < 0x7f)
		i++;
	if (i == t || i >= end || b[i] != ' ')
		return al_error_set(p->err, EPROTO, "malformed request line");
	p->req->target = (struct al_http_slice){t, i - t};
	p->req->is_connect = p->req->method.len == 7 && memcmp(b, "CONNECT", 7) == 0;
	return parse_version(p, b + i + 1, end - i - 1);
}

static int parse_absolute(struct parser *p, size_t skip)
{
	struct al_http_request *req = p->req;
	const char *a = at(p, req->target) + skip;
	size_t rest = req->target.len - skip, alen = 0;

	while (alen < rest && a[alen] != '/' && a[alen] != '?')
		alen++;
	if (parse_authority(a, alen, false, &req->host, &req->port, &req->port_explicit, p->err) <
	    0)
		return relabel(p->err, EPROTO, "request target");
	req->form = AL_HTTP_FORM_ABSOLUTE;
	req->path = (struct al_http_slice){req->target.off + skip + alen, rest - alen};
	return 0;
}

static int parse_target(struct parser *p)
{
	struct al_http_request *req = p->req;
	const char *t = at(p, req->target);
	size_t tl = req->target.len;

	if (memchr(t, '#', tl))
		return al_error_set(p->err, EPROTO, "fragment in request target");
	if (req->is_connect) {
		if (parse_authority(t, tl, true, &req->host, &req->port, &req->port_explicit,
				    p->err) < 0)
			return relabel(p->err, EPROTO, "CONNECT target");
		req->form = AL_HTTP_FORM_AUTHORITY;
		return 0;
	}
	if (t[0] == '/') {
		req->form = AL_HTTP_FORM_ORIGIN;
		req->path = req->target;
		return 0;
	}
	if (tl == 1 && t[0] == '*')
		return al_error_set(p->err, ENOTSUP, "asterisk-form request target not supported");
	if (prefix_ci(t, tl, "http://"))
		return parse_absolute(p, 7);
	if (prefix_ci(t, tl, "https://"))
		return al_error_set(p->err, ENOTSUP, "https:// request target: use CONNECT");
	return al_error_set(p->err, EPROTO, "unsupported request target");
}

static unsigned header_flags(const char *n, size_t len)
{
	static const char *const hop[] = {"connection", "keep-alive", "te", "trailer", "upgrade"};

	if (mem_eq_ci(n, len, "host"))
		return AL_HTTP_HDR_HOST;
	if (prefix_ci(n, len, "proxy-"))
		return AL_HTTP_HDR_PROXY | AL_HTTP_HDR_HOP;
	for (size_t i = 0; i < sizeof(hop) / sizeof(hop[0]); i++)
		if (mem_eq_ci(n, len, hop[i]))
			return AL_HTTP_HDR_HOP;
	return 0;
}

static int parse_header(struct parser *p, size_t start, size_t end)
{
	struct al_http_request *req = p->req;
	struct al_http_header *h;
	const char *b = p->buf;
	size_t i = start, vs, ve;

	if (req->n_headers == AL_HTTP_HEADERS_MAX)
		return al_error_set(p->err, E2BIG, "more than %d header fields",
				    AL_HTTP_HEADERS_MAX);
	while (i < end && is_tchar(b[i]))
		i++;
	if (i == start || i >= end || b[i] != ':')
		return al_error_set(p->err, EPROTO, "malformed header field name");
	vs = i + 1;
	while (vs < end && (b[vs] == ' ' || b[vs] == '\t'))
		vs++;
	ve = end;
	while (ve > vs && (b[ve - 1] == ' ' || b[ve - 1] == '\t'))
		ve--;
	h = &req->headers[req->n_headers++];
	h->name = (struct al_http_slice){start, i - start};
	h->value = (struct al_http_slice){vs, ve - vs};
	h->flags = header_flags(b + start, i - start);
	return 0;
}

/* Find the only field called name; -EPROTO if there are several. */
static int find_single(struct parser *p, const char *name, int *ret_index)
{
	int found = -1;

	for (size_t i = 0; i < p->req->n_headers; i++) {
		const struct al_http_header *h = &p->req->headers[i];

		if (!same_ci(at(p, h->name), h->name.len, name, strlen(name)))
			continue;
		if (found >= 0)
			return al_error_set(p->err, EPROTO, "duplicate %s header", name);
		found = (int)i;
	}
	*ret_index = found;
	return 0;
}

static int check_framing(struct parser *p)
{
	struct al_http_request *req = p->req;
	int cl, te, r;

	r = find_single(p, "Content-Length", &cl);
	if (r == 0)
		r = find_single(p, "Transfer-Encoding", &te);
	if (r < 0)
		return r;
	if (cl >= 0 && te >= 0)
		return al_error_set(p->err, EPROTO, "both Content-Length and Transfer-Encoding");
	if (cl >= 0) {
		const struct al_http_header *h = &req->headers[cl];
		const char *v = at(p, h->value);
		int64_t n = 0;

		if (h->value.len == 0 || h->value.len > 18)
			return al_error_set(p->err, EPROTO, "invalid Content-Length");
		for (size_t i = 0; i < h->value.len; i++) {
			if (!is_digit(v[i]))
				return al_error_set(p->err, EPROTO, "invalid Content-Length");
			n = n * 10 + (v[i] - '0');
		}
		req->content_length = n;
	}
	if (te >= 0) {
		const struct al_http_header *h = &req->headers[te];

		if (req->version_minor == 0)
			return al_error_set(p->err, EPROTO, "Transfer-Encoding in HTTP/1.0");
		if (!mem_eq_ci(at(p, h->value), h->value.len, "chunked"))
			return al_error_set(p->err, ENOTSUP, "transfer coding not supported");
		req->chunked = true;
	}
	if (req->is_connect && (req->chunked || req->content_length > 0))
		return al_error_set(p->err, EPROTO, "CONNECT with a body");
	return 0;
}

/* One Connection option: refuse the framing headers, mark the rest hop. */
static int connection_option(struct parser *p, const char *o, size_t len)
{
	if (mem_eq_ci(o, len, "host") || mem_eq_ci(o, len, "content-length") ||
	    mem_eq_ci(o, len, "transfer-encoding"))
		return al_error_set(p->err, EPROTO, "Connection names a framing header");
	for (size_t i = 0; i < p->req->n_headers; i++) {
		struct al_http_header *h = &p->req->headers[i];

		if (same_ci(at(p, h->name), h->name.len, o, len))
			h->flags |= AL_HTTP_HDR_HOP;
	}
	return 0;
}

static int check_connection(struct parser *p, const struct al_http_header *h)
{
	const char *v = at(p, h->value);
	size_t i = 0, n = h->value.len;

	while (i < n) {
		size_t s, e;

		while (i < n && (v[i] == ' ' || v[i] == '\t'))
			i++;
		s = i;
		while (i < n && is_tchar(v[i]))
			i++;
		e = i;
		while (i < n && (v[i] == ' ' || v[i] == '\t'))
			i++;
		if (i < n && v[i] != ',')
			return al_error_set(p->err, EPROTO, "malformed Connection header");
		i++;
		if (e > s && connection_option(p, v + s, e - s) < 0)
			return -EPROTO;
	}
	return 0;
}

static int check_host(struct parser *p)
{
	struct al_http_request *req = p->req;
	const struct al_http_header *h;
	int idx, r;

	r = find_single(p, "Host", &idx);
	if (r < 0)
		return r;
	req->host_header = idx;
	if (idx < 0) {
		if (req->version_minor == 1)
			return al_error_set(p->err, EPROTO, "missing Host header");
		return 0;
	}
	h = &req->headers[idx];
	if (req->form == AL_HTTP_FORM_ORIGIN) {
		if (parse_authority(at(p, h->value), h->value.len, false, &req->host, &req->port,
				    &req->port_explicit, p->err) < 0)
			return relabel(p->err, EPROTO, "Host header");
		return 0;
	}
	if (!al_http_host_matches(&req->host, req->port, at(p, h->value), h->value.len))
		return al_error_set(p->err, EPROTO,
				    "Host header does not match the request target");
	return 0;
}

static int parse_lines(struct parser *p, size_t head_len)
{
	const char *b = p->buf;
	size_t start = 0, end;
	int r;

	end = (size_t)((const char *)memchr(b, '\r', head_len) - b);
	r = parse_request_line(p, end);
	if (r == 0)
		r = parse_target(p);
	for (start = end + 2; r == 0 && start < head_len - 2; start = end + 2) {
		end = start + (size_t)((const char *)memchr(b + start, '\r', head_len - start) -
				       (b + start));
		r = parse_header(p, start, end);
	}
	return r;
}

int al_http_parse_request(const char *buf, size_t len, struct al_http_request *ret,
			  struct al_error *err)
{
	struct al_http_request req = {.host_header = -1, .content_length = -1};
	struct parser p = {.buf = buf, .req = &req, .err = err};
	size_t head_len = 0;
	int r;

	if (!buf)
		return al_error_set(err, EAGAIN, "request head incomplete");
	r = scan_head(buf, len, &head_len, err);
	if (r < 0)
		return r;
	req.head_len = head_len;
	r = parse_lines(&p, head_len);
	if (r < 0)
		return r;
	r = check_framing(&p);
	if (r < 0)
		return r;
	for (size_t i = 0; i < req.n_headers; i++)
		if (mem_eq_ci(at(&p, req.headers[i].name), req.headers[i].name.len, "connection") &&
		    check_connection(&p, &req.headers[i]) < 0)
			return -EPROTO;
	r = check_host(&p);
	if (r < 0)
		return r;
	*ret = req;
	return (int)head_len;
}

int al_http_status_for_error(int r)
{
	switch (r) {
	case -EAGAIN:
		return 0;
	case -E2BIG:
		return 431;
	case -ENOTSUP:
		return 501;
	case -EPROTONOSUPPORT:
		return 505;
	default:
		return 400;
	}
}

bool al_http_host_matches(const struct al_host *host, uint16_t port, const char *value, size_t len)
{
	struct al_host h;
	uint16_t p = 0;
	bool explicit = false; /* both set when parse_authority succeeds */

	if (!host || host->kind == AL_HOST_NONE || !value)
		return false;
	if (parse_authority(value, len, false, &h, &p, &explicit, NULL) < 0)
		return false;
	if (h.kind != host->kind || strcmp(h.text, host->text) != 0)
		return false;
	return !explicit || p == port;
}

/* Bounded appends: o->len keeps counting past the end so the caller can
 * tell -ENOSPC. */
struct out {
	char *buf;
	size_t size;
	size_t len;
};

static void put(struct out *o, const char *s, size_t n)
{
	if (o->len < o->size && n <= o->size - o->len)
		memcpy(o->buf + o->len, s, n);
	o->len += n;
}

static void puts_(struct out *o, const char *s)
{
	put(o, s, strlen(s));
}

static int finish(struct out *o)
{
	if (o->len >= o->size)
		return -ENOSPC;
	o->buf[o->len] = '\0';
	return (int)o->len;
}

int al_http_format_upstream(const char *buf, const struct al_http_request *req, unsigned flags,
			    char *out, size_t size)
{
	struct out o = {out, size, 0};
	char host[AL_HOST_MAX + 16];
	int n;

	if (!buf || !req || req->is_connect || req->host.kind == AL_HOST_NONE)
		return -EINVAL;
	put(&o, buf + req->method.off, req->method.len);
	puts_(&o, " ");
	if (req->path.len == 0 || buf[req->path.off] == '?')
		puts_(&o, "/");
	put(&o, buf + req->path.off, req->path.len);
	puts_(&o, " HTTP/1.1\r\nHost: ");
	n = al_host_format(&req->host, host, sizeof(host));
	if (n < 0)
		return -EINVAL;
	if (req->port != 80)
		snprintf(host + n, sizeof(host) - (size_t)n, ":%u", req->port);
	puts_(&o, host);
	puts_(&o, "\r\n");
	for (size_t i = 0; i < req->n_headers; i++) {
		const struct al_http_header *h = &req->headers[i];

		if (h->flags & (AL_HTTP_HDR_HOP | AL_HTTP_HDR_PROXY | AL_HTTP_HDR_HOST))
			continue;
		put(&o, buf + h->name.off, h->name.len);
		puts_(&o, ": ");
		put(&o, buf + h->value.off, h->value.len);
		puts_(&o, "\r\n");
	}
	if (flags & AL_HTTP_UPSTREAM_CLOSE)
		puts_(&o, "Connection: close\r\n");
	puts_(&o, "\r\n");
	return finish(&o);
}

int al_http_format_head(const char *method, size_t method_len, const char *target,
			size_t target_len, const struct al_http_header_view *headers, size_t n,
			char *out, size_t size)
{
	struct out o = {out, size, 0};

	put(&o, method, method_len);
	puts_(&o, " ");
	put(&o, target, target_len);
	puts_(&o, " HTTP/1.1\r\n");
	for (size_t i = 0; i < n; i++) {
		put(&o, headers[i].name, headers[i].name_len);
		puts_(&o, ": ");
		put(&o, headers[i].value, headers[i].value_len);
		puts_(&o, "\r\n");
	}
	puts_(&o, "\r\n");
	return finish(&o);
}

static const char *reason_phrase(int status)
{
	static const struct {
		int status;
		const char *reason;
	} table[] = {
	    {400, "Bad Request"},
	    {402, "Payment Required"},
	    {403, "Forbidden"},
	    {404, "Not Found"},
	    {408, "Request Timeout"},
	    {413, "Content Too Large"},
	    {414, "URI Too Long"},
	    {421, "Misdirected Request"},
	    {431, "Request Header Fields Too Large"},
	    {500, "Internal Server Error"},
	    {501, "Not Implemented"},
	    {502, "Bad Gateway"},
	    {503, "Service Unavailable"},
	    {504, "Gateway Timeout"},
	    {505, "HTTP Version Not Supported"},
	};

	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (table[i].status == status)
			return table[i].reason;
	return NULL;
}

/* Printable ASCII only and at most 256 characters: the text may carry a
 * host name from the sandbox into a header. */
static void clean_text(const char *s, char *out, size_t size)
{
	size_t i = 0;

	for (; s && s[i] && i + 1 < size; i++)
		out[i] = ((unsigned char)s[i] >= ' ' && (unsigned char)s[i] < 0x7f) ? s[i] : '?';
	out[i] = '\0';
}

static int format_response(int status, const char *header, const char *detail, char *out,
			   size_t size)
{
	const char *reason = reason_phrase(status);
	char clean[257], body[320];
	int blen, n;

	if (!reason)
		return -EINVAL;
	clean_text(detail, clean, sizeof(clean));
	blen =
	    snprintf(body, sizeof(body), "airlock: %s%s%s\n", reason, clean[0] ? ": " : "", clean);
	n = snprintf(out, size,
		     "HTTP/1.1 %d %s\r\n%sContent-Type: text/plain\r\nContent-Length: %d\r\n"
		     "Connection: close\r\n\r\n%s",
		     status, reason, header, blen, body);
	if (n < 0 || (size_t)n >= size)
		return -ENOSPC;
	return n;
}

int al_http_format_response(int status, const char *detail, char *out, size_t size)
{
	return format_response(status, "", detail, out, size);
}

int al_http_format_denied(const char *rule_text, char *out, size_t size)
{
	char clean[257], header[300];

	clean_text(rule_text, clean, sizeof(clean));
	snprintf(header, sizeof(header), "X-Airlock-Denied: %s\r\n", clean);
	return format_response(403, header, clean, out, size);
}

int al_http_format_connect_ok(char *out, size_t size)
{
	static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";

	if (size < sizeof(ok))
		return -ENOSPC;
	memcpy(out, ok, sizeof(ok));
	return (int)sizeof(ok) - 1;
}
