/* The MCP server's HTTP/1.1 client over a Unix socket (http.h). */
#include "mcp/http.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "core/util.h"

void al_mcp_http_answer_clear(struct al_mcp_http_answer *a)
{
	free(a->body);
	memset(a, 0, sizeof(*a));
}

/* The end of the line that starts at p (its "\r\n"), or NULL. */
static const char *line_end(const char *p, const char *end)
{
	for (; p + 1 < end; p++)
		if (p[0] == '\r' && p[1] == '\n')
			return p;
	return NULL;
}

/* A decimal or hex number of at most 15 digits (no sign, no space). */
static int parse_number(const char *p, size_t n, int base, uint64_t *ret)
{
	uint64_t v = 0;

	if (n == 0 || n > 15)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		int d = base == 16 ? al_hex_digit(p[i])
				   : (p[i] >= '0' && p[i] <= '9' ? p[i] - '0' : -1);
		if (d < 0)
			return -EINVAL;
		v = v * (uint64_t)base + (uint64_t)d;
	}
	*ret = v;
	return 0;
}

static bool field_is(const char *name, size_t n, const char *want)
{
	return strlen(want) == n && strncasecmp(name, want, n) == 0;
}

/* The chunked body from p to end, decoded into a->body. */
static int parse_chunked(const char *p, const char *end, size_t body_max,
			 struct al_mcp_http_answer *a, struct al_error *err)
{
	size_t cap = 0;

	for (;;) {
		const char *le = line_end(p, end);
		if (!le)
			return al_error_set(err, EPROTO, "HTTP answer: truncated chunk size line");
		const char *semi = memchr(p, ';', (size_t)(le - p));
		size_t digits = (size_t)((semi ? semi : le) - p);
		uint64_t size;
		if (parse_number(p, digits, 16, &size) < 0)
			return al_error_set(err, EPROTO, "HTTP answer: malformed chunk size");
		p = le + 2;
		if (size == 0)
			break;
		if (size > body_max - a->body_len)
			return al_error_set(err, EFBIG, "HTTP answer: body over %zu bytes",
					    body_max);
		if ((uint64_t)(end - p) < size + 2)
			return al_error_set(err, EPROTO, "HTTP answer: truncated chunk");
		if (p[size] != '\r' || p[size + 1] != '\n')
			return al_error_set(err, EPROTO, "HTTP answer: chunk not ended by CRLF");
		if (a->body_len + size + 1 > cap) {
			cap = (a->body_len + size + 1) * 2;
			if (cap > body_max + 1)
				cap = body_max + 1;
			a->body = xrealloc(a->body, cap);
		}
		memcpy(a->body + a->body_len, p, size);
		a->body_len += size;
		p += size + 2;
	}
	/* Trailer fields, each one line, then the empty line. */
	for (;;) {
		const char *le = line_end(p, end);
		if (!le)
			return al_error_set(err, EPROTO, "HTTP answer: truncated trailer");
		if (le == p)
			return 0;
		p = le + 2;
	}
}

int al_mcp_http_parse(const char *buf, size_t len, size_t body_max, struct al_mcp_http_answer *a,
		      struct al_error *err)
{
	const char *end = buf + len, *p = buf, *le;
	bool chunked = false, have_length = false;
	uint64_t length = 0;
	int r;

	memset(a, 0, sizeof(*a));
	/* The head must end (an empty line) within the cap. */
	size_t scan = len < AL_MCP_HTTP_HEAD_MAX ? len : AL_MCP_HTTP_HEAD_MAX;
	if (!memmem(buf, scan, "\r\n\r\n", 4))
		return al_error_set(err, len >= AL_MCP_HTTP_HEAD_MAX ? E2BIG : EPROTO,
				    len >= AL_MCP_HTTP_HEAD_MAX
					? "HTTP answer: head over %d bytes"
					: "HTTP answer: no end of head (%d bytes at most)",
				    AL_MCP_HTTP_HEAD_MAX);
	le = line_end(p, end);
	if ((size_t)(le - p) < 12 || memcmp(p, "HTTP/1.", 7) != 0 || (p[7] != '0' && p[7] != '1') ||
	    p[8] != ' ' || (le - p > 12 && p[12] != ' '))
		return al_error_set(err, EPROTO, "HTTP answer: malformed status line");
	uint64_t status;
	if (parse_number(p + 9, 3, 10, &status) < 0 || status < 100)
		return al_error_set(err, EPROTO, "HTTP answer: malformed status code");
	if (status < 200)
		return al_error_set(err, EPROTO, "HTTP answer: unexpected 1xx status %d",
				    (int)status);
	a->status = (int)status;
	p = le + 2;
	for (;;) {
		le = line_end(p, end);
		if (le == p)
			break;
		const char *colon = memchr(p, ':', (size_t)(le - p));
		if (!colon || colon == p)
			return al_error_set(err, EPROTO, "HTTP answer: malformed header field");
		for (const char *q = p; q < colon; q++)
			if (!al_is_tchar(*q))
				return al_error_set(err, EPROTO,
						    "HTTP answer: malformed header field name");
		const char *v = colon + 1, *ve = le;
		while (v < ve && (*v == ' ' || *v == '\t'))
			v++;
		while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
			ve--;
		size_t name_len = (size_t)(colon - p), vlen = (size_t)(ve - v);
		if (field_is(p, name_len, "content-length")) {
			uint64_t n;
			if (have_length || parse_number(v, vlen, 10, &n) < 0)
				return al_error_set(err, EPROTO,
						    "HTTP answer: malformed or repeated "
						    "Content-Length");
			have_length = true;
			length = n;
		} else if (field_is(p, name_len, "transfer-encoding")) {
			if (chunked || vlen != 7 || strncasecmp(v, "chunked", 7) != 0)
				return al_error_set(err, EPROTO,
						    "HTTP answer: transfer coding other than one "
						    "chunked");
			chunked = true;
		} else if (field_is(p, name_len, "content-type")) {
			size_t n =
			    vlen < sizeof(a->content_type) - 1 ? vlen : sizeof(a->content_type) - 1;
			memcpy(a->content_type, v, n);
			a->content_type[n] = '\0';
		}
		p = le + 2;
	}
	p = le + 2;
	if (chunked && have_length)
		return al_error_set(err, EPROTO,
				    "HTTP answer: both Content-Length and Transfer-Encoding");
	if (chunked) {
		r = parse_chunked(p, end, body_max, a, err);
		if (r < 0) {
			al_mcp_http_answer_clear(a);
			return r;
		}
	} else {
		size_t n = (size_t)(end - p);
		if (have_length) {
			if (length > body_max)
				return al_error_set(err, EFBIG, "HTTP answer: body over %zu bytes",
						    body_max);
			if (n < length)
				return al_error_set(err, EPROTO,
						    "HTTP answer: body shorter than its "
						    "Content-Length");
			n = (size_t)length;
		} else if (n > body_max) {
			return al_error_set(err, EFBIG, "HTTP answer: body over %zu bytes",
					    body_max);
		}
		a->body = xmalloc(n + 1);
		memcpy(a->body, p, n);
		a->body_len = n;
	}
	if (!a->body)
		a->body = xmalloc(1);
	a->body[a->body_len] = '\0';
	return 0;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait until fd is ready for events or the deadline passes. */
static int wait_fd(int fd, short events, int64_t deadline, volatile const int *stop,
		   struct al_error *err)
{
	for (;;) {
		int64_t left = deadline - now_ms();
		/* A signal that came before the poll (not during it) counts too. */
		if (stop && *stop)
			return al_error_set(err, EINTR, "interrupted by a signal");
		if (left <= 0)
			return al_error_set(err, ETIMEDOUT, "no answer from the daemon in time");
		struct pollfd pfd = {.fd = fd, .events = events};
		int n = poll(&pfd, 1, left > INT32_MAX ? INT32_MAX : (int)left);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return al_error_setsys(err, errno, "poll");
		if (n < 0 && stop && *stop)
			return al_error_set(err, EINTR, "interrupted by a signal");
	}
}

/* Once the head has come (its end at head_len): whether the answer is
 * whole, by its framing: Content-Length bytes after the head, or a chunked
 * body whose last chunk and trailer have come (the buffer ends in an empty
 * line and parses). Without either it runs to the close. The daemon closes
 * after its answer; one that does not must not hold the call until the
 * deadline. The parse that follows checks everything again. */
static bool answer_whole(const char *in, size_t len, size_t head_len)
{
	const char *p = in, *end = in + head_len, *le;
	bool chunked = false;

	while ((le = line_end(p, end)) && le > p) {
		const char *colon = memchr(p, ':', (size_t)(le - p));
		const char *v = colon ? colon + 1 : le;
		while (v < le && (*v == ' ' || *v == '\t'))
			v++;
		if (colon && field_is(p, (size_t)(colon - p), "content-length")) {
			uint64_t n;
			const char *ve = le;
			while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
				ve--;
			return parse_number(v, (size_t)(ve - v), 10, &n) == 0 &&
			       len - head_len >= n;
		}
		if (colon && field_is(p, (size_t)(colon - p), "transfer-encoding"))
			chunked = true;
		p = le + 2;
	}
	if (!chunked || len < head_len + 5 || memcmp(in + len - 4, "\r\n\r\n", 4) != 0)
		return false;
	struct al_mcp_http_answer a;
	struct al_error e = {0};
	if (al_mcp_http_parse(in, len, AL_MCP_HTTP_BODY_MAX, &a, &e) < 0)
		return false;
	al_mcp_http_answer_clear(&a);
	return true;
}

int al_mcp_http_request(const char *sock_path, const char *method, const char *target,
			const char *body, size_t body_len, const char *content_type, int timeout_ms,
			volatile const int *stop, struct al_mcp_http_answer *a,
			struct al_error *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int64_t deadline = now_ms() + timeout_ms;
	char *head = NULL, *in = NULL;
	size_t in_len = 0, in_cap = 0, max_in = AL_MCP_HTTP_HEAD_MAX + 2 * AL_MCP_HTTP_BODY_MAX;
	size_t head_len = 0;
	int fd, r;

	memset(a, 0, sizeof(*a));
	if (strlen(sock_path) >= sizeof(sa.sun_path))
		return al_error_set(err, ENAMETOOLONG, "socket path %s is too long", sock_path);
	strcpy(sa.sun_path, sock_path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return al_error_setsys(err, errno, "socket");
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		r = al_error_setsys(err, errno, "connect to %s", sock_path);
		goto out;
	}
	head = xasprintf("%s %s HTTP/1.1\r\nHost: airlock\r\nConnection: close\r\n"
			 "Content-Length: %zu\r\n%s%s%s\r\n",
			 method, target, body ? body_len : 0, content_type ? "Content-Type: " : "",
			 content_type ? content_type : "", content_type ? "\r\n" : "");
	/* Head, then body, written as the socket takes them. A daemon may
	 * answer and close before it has read the body (a refusal): then the
	 * send fails, and its answer is read all the same. */
	int send_err = 0;
	for (int part = 0; part < 2 && !send_err; part++) {
		const char *p = part == 0 ? head : body;
		size_t n = part == 0 ? strlen(head) : (body ? body_len : 0);
		while (n > 0) {
			ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
			if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
				r = wait_fd(fd, POLLOUT, deadline, stop, err);
				if (r < 0)
					goto out;
				continue;
			}
			if (w < 0 && (errno == EPIPE || errno == ECONNRESET)) {
				send_err = errno;
				break;
			}
			if (w < 0) {
				r = al_error_setsys(err, errno, "send to %s", sock_path);
				goto out;
			}
			p += w;
			n -= (size_t)w;
		}
	}
	/* The answer, to the daemon's close. */
	for (;;) {
		if (in_cap - in_len < 65536) {
			in_cap = in_cap ? in_cap * 2 : 131072;
			in = xrealloc(in, in_cap);
		}
		ssize_t n = recv(fd, in + in_len, in_cap - in_len, 0);
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			r = wait_fd(fd, POLLIN, deadline, stop, err);
			if (r < 0)
				goto out;
			continue;
		}
		if (n < 0 && errno == ECONNRESET && send_err)
			break; /* what came before the reset is the answer, if any */
		if (n < 0) {
			r = al_error_setsys(err, errno, "read from %s", sock_path);
			goto out;
		}
		if (n == 0)
			break;
		in_len += (size_t)n;
		if (!head_len) {
			/* The end of the head, looked for in what is new (and the 3
			 * bytes before it). */
			size_t from = in_len - (size_t)n >= 3 ? in_len - (size_t)n - 3 : 0;
			const char *he = memmem(in + from, in_len - from, "\r\n\r\n", 4);
			if (he)
				head_len = (size_t)(he - in) + 4;
		}
		if (head_len && answer_whole(in, in_len, head_len))
			break;
		if (in_len > max_in) {
			r = al_error_set(err, EFBIG, "the daemon's answer is over %zu bytes",
					 max_in);
			goto out;
		}
	}
	if (in_len == 0 && send_err) {
		r = al_error_setsys(err, send_err, "send to %s", sock_path);
		goto out;
	}
	r = al_mcp_http_parse(in ? in : "", in_len, AL_MCP_HTTP_BODY_MAX, a, err);
out:
	free(head);
	free(in);
	close(fd);
	return r;
}
