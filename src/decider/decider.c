/* The external decider's client (decider.h): one HTTP/1.1 question per
 * connection, its answer read and checked within one deadline (the cache
 * of answers is cache.c). The decider is a local service the operator
 * runs, but its answer is still read as untrusted bytes: bounded, framed
 * strictly, and any doubt is an error (callers then refuse). */
#include "decider/decider.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/sys.h"
#include "core/util.h"

/* All that may be read: the head, the answer, and chunked framing around
 * it (a chunk header per 4 KiB or more is what servers write). */
#define READ_MAX (AL_DECIDER_HEAD_MAX + AL_DECIDER_ANSWER_MAX + 65536u)
#define WHO_MAX	 160

enum state {
	CONNECTING,
	WRITING,
	READING,
	FINISHED,
};

struct al_decider_call {
	int fd;
	enum state state;
	char who[WHO_MAX];
	char path[AL_DECIDER_PATH_MAX + 1];
	uint64_t timeout_ms, deadline;
	char *out;
	size_t out_len, out_off;
	char *in;
	size_t in_len, in_cap;
	bool eof;
};

/* s[0..n) with everything but printable ASCII as '?', cut to fit. */
static void printable(const char *s, size_t n, char *out, size_t size)
{
	size_t i;

	for (i = 0; i < n && i + 1 < size; i++)
		out[i] = (unsigned char)s[i] >= ' ' && (unsigned char)s[i] < 0x7f ? s[i] : '?';
	if (size)
		out[i] = '\0';
}

void al_decider_describe(const struct al_decider_conf *conf, char *buf, size_t len)
{
	char clean[WHO_MAX];

	if (conf->socket) {
		printable(conf->socket, strlen(conf->socket), clean, sizeof(clean));
		snprintf(buf, len, "%s", clean);
	} else {
		const char *h = conf->host ? conf->host : "";
		printable(h, strlen(h), clean, sizeof(clean));
		snprintf(buf, len, strchr(clean, ':') ? "http://[%s]:%u" : "http://%s:%u", clean,
			 conf->port);
	}
}

static void finish(struct al_decider_call *c)
{
	c->state = FINISHED;
	free(c->out);
	c->out = NULL;
	free(c->in);
	c->in = NULL;
	c->in_len = c->in_cap = 0;
}

static int fail(struct al_decider_call *c, struct al_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(struct al_decider_call *c, struct al_error *err, int code, const char *fmt, ...)
{
	char what[600];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	finish(c);
	return al_error_set(err, code, "decider %s: POST %s: %s", c->who, c->path, what);
}

/* ---- the answer, as bytes ---------------------------------------------- */

struct answer {
	int status;
	const char *body;
	size_t body_len;
	char *decoded; /* the chunked body without its framing (malloc'd) */
};

static bool is_tchar(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	       strchr("!#$%&'*+-.^_`|~", ch) != NULL;
}

/* "HTTP/1.x NNN[ reason]" */
static int status_line(const char *s, size_t n)
{
	if (n < 12 || memcmp(s, "HTTP/1.", 7) != 0 || (s[7] != '0' && s[7] != '1') || s[8] != ' ')
		return -1;
	for (size_t i = 9; i < 12; i++)
		if (s[i] < '0' || s[i] > '9')
			return -1;
	if (n > 12 && s[12] != ' ')
		return -1;
	for (size_t i = 12; i < n; i++)
		if (((unsigned char)s[i] < ' ' && s[i] != '\t') || s[i] == 0x7f)
			return -1;
	return (s[9] - '0') * 100 + (s[10] - '0') * 10 + (s[11] - '0');
}

struct framing {
	bool have_length, chunked;
	uint64_t length;
};

/* One "Name: value" line of the head. 0, or -1 with why. */
static int header_line(const char *s, size_t n, struct framing *f, char *why, size_t wl)
{
	size_t colon = 0, vs, ve;
	char clean[48];

	while (colon < n && is_tchar(s[colon]))
		colon++;
	if (colon == 0 || colon == n || s[colon] != ':') {
		printable(s, n < 40 ? n : 40, clean, sizeof(clean));
		snprintf(why, wl, "the answer has a malformed header line \"%s\"", clean);
		return -1;
	}
	for (size_t i = colon + 1; i < n; i++)
		if (((unsigned char)s[i] < ' ' && s[i] != '\t') || s[i] == 0x7f) {
			snprintf(why, wl, "the answer has a control character in a header");
			return -1;
		}
	for (vs = colon + 1; vs < n && (s[vs] == ' ' || s[vs] == '\t'); vs++)
		;
	for (ve = n; ve > vs && (s[ve - 1] == ' ' || s[ve - 1] == '\t'); ve--)
		;
	if (colon == 14 && strncasecmp(s, "content-length", 14) == 0) {
		uint64_t v = 0;
		if (ve == vs || ve - vs > 12) {
			snprintf(why, wl, "the answer has an invalid Content-Length");
			return -1;
		}
		for (size_t i = vs; i < ve; i++) {
			if (s[i] < '0' || s[i] > '9') {
				snprintf(why, wl, "the answer has an invalid Content-Length");
				return -1;
			}
			v = v * 10 + (uint64_t)(s[i] - '0');
		}
		if (f->have_length && f->length != v) {
			snprintf(why, wl, "the answer has two different Content-Length fields");
			return -1;
		}
		f->have_length = true;
		f->length = v;
	} else if (colon == 17 && strncasecmp(s, "transfer-encoding", 17) == 0) {
		if (f->chunked || ve - vs != 7 || strncasecmp(s + vs, "chunked", 7) != 0) {
			printable(s + vs, ve - vs < 40 ? ve - vs : 40, clean, sizeof(clean));
			snprintf(why, wl, "the answer's transfer coding \"%s\" is not supported",
				 clean);
			return -1;
		}
		f->chunked = true;
	}
	return 0;
}

/* The chunked body at p[0..len): 1 complete (*ret, *ret_len malloc'd), 0
 * more is needed, -EPROTO malformed or -E2BIG over the cap (why). */
static int dechunk(const char *p, size_t len, char **ret, size_t *ret_len, char *why, size_t wl)
{
	_cleanup_free_ char *out = NULL;
	size_t off = 0, out_len = 0, cap = 0;

	for (;;) {
		const char *nl = memmem(p + off, len - off, "\r\n", 2);
		size_t size = 0, i, digits = 0;

		if (!nl) {
			if (len - off > 256) {
				snprintf(why, wl,
					 "the answer has a chunk size line over 256 bytes");
				return -EPROTO;
			}
			return 0;
		}
		size_t line = (size_t)(nl - (p + off));
		for (i = 0; i < line; i++) {
			char ch = p[off + i];
			int d = ch >= '0' && ch <= '9'	 ? ch - '0'
				: ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
				: ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
							 : -1;
			if (d < 0)
				break;
			if (++digits > 8) {
				snprintf(why, wl, "the answer has a chunk size over 8 hex digits");
				return -EPROTO;
			}
			size = size * 16 + (size_t)d;
		}
		if (digits == 0 || (i < line && p[off + i] != ';')) {
			snprintf(why, wl, "the answer has a malformed chunk size line");
			return -EPROTO;
		}
		for (; i < line; i++)
			if ((unsigned char)p[off + i] < ' ' && p[off + i] != '\t') {
				snprintf(why, wl, "the answer has a malformed chunk size line");
				return -EPROTO;
			}
		off += line + 2;
		if (size > AL_DECIDER_ANSWER_MAX - out_len) {
			snprintf(why, wl, "the answer is over %u bytes", AL_DECIDER_ANSWER_MAX);
			return -E2BIG;
		}
		if (size == 0) {
			/* Trailer fields, then the empty line. */
			for (;;) {
				nl = memmem(p + off, len - off, "\r\n", 2);
				if (!nl)
					return 0;
				if (nl == p + off)
					break;
				off = (size_t)(nl - p) + 2;
			}
			*ret_len = out_len;
			*ret = out ? TAKE_PTR(out) : xstrdup("");
			return 1;
		}
		if (len - off < size + 2)
			return 0;
		if (p[off + size] != '\r' || p[off + size + 1] != '\n') {
			snprintf(why, wl, "the answer has a chunk that does not end in CRLF");
			return -EPROTO;
		}
		if (out_len + size + 1 > cap) {
			cap = (out_len + size + 1) * 2;
			out = xrealloc(out, cap);
		}
		memcpy(out + out_len, p + off, size);
		out_len += size;
		out[out_len] = '\0';
		off += size + 2;
	}
}

/* Frame the answer in buf[0..len) (eof: nothing more will come): 1 when
 * complete (*a filled), 0 when more is needed, -EPROTO (malformed) or
 * -E2BIG (over a cap) with why. */
static int frame_answer(const char *buf, size_t len, bool eof, struct answer *a, char *why,
			size_t wl)
{
	size_t lim = len < AL_DECIDER_HEAD_MAX ? len : AL_DECIDER_HEAD_MAX;
	const char *end = memmem(buf, lim, "\r\n\r\n", 4);
	struct framing f = {0};

	if (!end) {
		if (len >= AL_DECIDER_HEAD_MAX) {
			snprintf(why, wl, "the answer's head is over %u bytes",
				 AL_DECIDER_HEAD_MAX);
			return -E2BIG;
		}
		if (eof && len == 0)
			snprintf(why, wl, "the connection closed without an answer");
		else if (eof)
			snprintf(why, wl, "the answer ends inside its head");
		else
			return 0;
		return -EPROTO;
	}
	const char *nl = memmem(buf, (size_t)(end - buf) + 2, "\r\n", 2);
	int status = status_line(buf, (size_t)(nl - buf));
	if (status < 0) {
		snprintf(why, wl, "the answer does not start with an HTTP/1.x status line");
		return -EPROTO;
	}
	for (const char *p = nl + 2; p < end + 2;) {
		const char *e = memmem(p, (size_t)(end + 2 - p), "\r\n", 2);
		if (header_line(p, (size_t)(e - p), &f, why, wl) < 0)
			return -EPROTO;
		p = e + 2;
	}
	if (f.have_length && f.chunked) {
		snprintf(why, wl, "the answer has both Content-Length and Transfer-Encoding");
		return -EPROTO;
	}
	size_t head = (size_t)(end - buf) + 4, have = len - head;
	*a = (struct answer){.status = status, .body = buf + head};
	if (status / 100 == 1 || status == 204 || status == 304)
		return 1; /* no body (an interim answer is as wrong as any other) */
	if (f.have_length) {
		if (f.length > AL_DECIDER_ANSWER_MAX) {
			snprintf(why, wl, "the answer is %llu bytes, over the cap of %u",
				 (unsigned long long)f.length, AL_DECIDER_ANSWER_MAX);
			return -E2BIG;
		}
		if (have >= f.length) {
			a->body_len = (size_t)f.length;
			return 1;
		}
		if (!eof)
			return 0;
		snprintf(why, wl, "the answer ends after %zu of its %llu bytes", have,
			 (unsigned long long)f.length);
		return -EPROTO;
	}
	if (f.chunked) {
		int r = dechunk(buf + head, have, &a->decoded, &a->body_len, why, wl);
		if (r == 0 && eof) {
			snprintf(why, wl, "the answer ends inside its chunked body");
			return -EPROTO;
		}
		a->body = a->decoded;
		return r;
	}
	if (have > AL_DECIDER_ANSWER_MAX) {
		snprintf(why, wl, "the answer is over %u bytes", AL_DECIDER_ANSWER_MAX);
		return -E2BIG;
	}
	if (!eof)
		return 0;
	a->body_len = have;
	return 1;
}

/* ---- the question ------------------------------------------------------ */

static bool clean_path(const char *p)
{
	size_t n = strlen(p);

	if (n == 0 || n > AL_DECIDER_PATH_MAX || p[0] != '/')
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)p[i] <= ' ' || (unsigned char)p[i] >= 0x7f)
			return false;
	return true;
}

/* The request, and the call without its socket. */
static int prepare(const struct al_decider_conf *conf, const char *path, json_t *input,
		   uint64_t deadline, struct al_decider_call **ret, struct al_error *err)
{
	struct al_decider_call *c = xcalloc(1, sizeof(*c));
	char host[64];

	c->fd = -1;
	c->state = FINISHED;
	al_decider_describe(conf, c->who, sizeof(c->who));
	printable(path ? path : "", path ? strlen(path) : 0, c->path, sizeof(c->path));
	c->timeout_ms = conf->timeout_ms ? conf->timeout_ms : AL_DECIDER_TIMEOUT_MS;
	c->deadline = deadline ? deadline : al_add_sat(al_now_ms(), c->timeout_ms);
	*ret = c;
	if (!path || !clean_path(path))
		return fail(c, err, EINVAL,
			    "the path is not an absolute HTTP path of printable ASCII (at most %u "
			    "bytes)",
			    AL_DECIDER_PATH_MAX);
	json_t *body = json_pack("{s:O?}", "input", input);
	_cleanup_free_ char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	json_decref(body);
	if (!text)
		return fail(c, err, EINVAL, "the input cannot be written as JSON");
	if (conf->socket)
		snprintf(host, sizeof(host), "localhost");
	else
		snprintf(host, sizeof(host),
			 strchr(conf->host ? conf->host : "", ':') ? "[%s]:%u" : "%s:%u",
			 conf->host ? conf->host : "", conf->port);
	c->out = xasprintf("POST %s HTTP/1.1\r\n"
			   "Host: %s\r\n"
			   "Content-Type: application/json\r\n"
			   "Accept: application/json\r\n"
			   "Content-Length: %zu\r\n"
			   "Connection: close\r\n"
			   "\r\n"
			   "%s",
			   path, host, strlen(text), text);
	c->out_len = strlen(c->out);
	c->state = WRITING;
	return 0;
}

/* 127.0.0.1 or ::1 and a port, or -1: no other host is ever connected to. */
static int loopback(const struct al_decider_conf *conf, struct sockaddr_storage *ss,
		    socklen_t *ret_len)
{
	struct in_addr a4;
	struct in6_addr a6;

	memset(ss, 0, sizeof(*ss));
	if (!conf->host || conf->port == 0)
		return -1;
	if (inet_pton(AF_INET, conf->host, &a4) == 1 && ntohl(a4.s_addr) == INADDR_LOOPBACK) {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;
		sin->sin_family = AF_INET;
		sin->sin_port = htons(conf->port);
		sin->sin_addr = a4;
		*ret_len = sizeof(*sin);
		return 0;
	}
	if (inet_pton(AF_INET6, conf->host, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6)) {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(conf->port);
		sin6->sin6_addr = a6;
		*ret_len = sizeof(*sin6);
		return 0;
	}
	return -1;
}

static int open_socket(const struct al_decider_conf *conf, struct al_decider_call *c,
		       struct al_error *err)
{
	struct sockaddr_storage ss;
	socklen_t len;

	if (conf->socket) {
		struct sockaddr_un *sun = (struct sockaddr_un *)&ss;
		size_t n = strlen(conf->socket);
		memset(&ss, 0, sizeof(ss));
		sun->sun_family = AF_UNIX;
		if (n == 0 || conf->socket[0] != '/')
			return fail(c, err, EINVAL, "the socket's path is not absolute");
		if (n >= sizeof(sun->sun_path))
			return fail(c, err, ENAMETOOLONG,
				    "the socket's path is %zu bytes; at most %zu fit", n,
				    sizeof(sun->sun_path) - 1);
		memcpy(sun->sun_path, conf->socket, n);
		len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
	} else if (loopback(conf, &ss, &len) < 0) {
		return fail(c, err, EPERM,
			    "not a loopback address and port: a decider is only asked on "
			    "127.0.0.1 or ::1");
	}
	c->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		return fail(c, err, errno, "socket: %s", strerror(errno));
	if (connect(c->fd, (struct sockaddr *)&ss, len) == 0)
		return 0;
	if (errno == EINPROGRESS) {
		c->state = CONNECTING;
		return 0;
	}
	if (errno == EAGAIN)
		return fail(c, err, EAGAIN, "it accepts no more connections (its backlog is full)");
	return fail(c, err, errno, "connect: %s", strerror(errno));
}

int al_decider_call_start(const struct al_decider_conf *conf, const char *path, json_t *input,
			  struct al_decider_call **ret, struct al_error *err)
{
	struct al_decider_call *c = NULL;
	int r = prepare(conf, path, input, 0, &c, err);

	if (r == 0)
		r = open_socket(conf, c, err);
	if (r < 0) {
		al_decider_call_free(c);
		return r;
	}
	*ret = c;
	return 0;
}

char *al_decider_body(json_t *input)
{
	json_t *body = json_pack("{s:O?}", "input", input);
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;

	json_decref(body);
	return text;
}

int al_decider_call_start_fd(const struct al_decider_conf *conf, const char *path, json_t *input,
			     int fd, uint64_t deadline_ms, struct al_decider_call **ret,
			     struct al_error *err)
{
	struct al_decider_call *c = NULL;
	int flags, r = prepare(conf, path, input, deadline_ms, &c, err);

	/* No input: the question was sent on fd already (the connector
	 * writes it): only the answer is read. */
	if (r == 0 && !input) {
		free(c->out);
		c->out = NULL;
		c->out_len = 0;
		c->state = READING;
	}
	c->fd = fd;
	if (r == 0 &&
	    ((flags = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0))
		r = fail(c, err, errno, "fcntl: %s", strerror(errno));
	if (r < 0) {
		al_decider_call_free(c);
		return r;
	}
	*ret = c;
	return 0;
}

int al_decider_call_fd(const struct al_decider_call *call)
{
	return call->fd;
}

uint32_t al_decider_call_events(const struct al_decider_call *call)
{
	switch (call->state) {
	case CONNECTING:
	case WRITING:
		return EPOLLOUT;
	case READING:
		return EPOLLIN;
	default:
		return 0;
	}
}

uint64_t al_decider_call_deadline(const struct al_decider_call *call)
{
	return call->deadline;
}

/* The complete answer: its "result", or an error. */
static int judge(struct al_decider_call *c, const struct answer *a, json_t **ret,
		 struct al_error *err)
{
	json_error_t jerr;
	char clean[200];

	json_t *root = json_loadb(a->body, a->body_len, JSON_REJECT_DUPLICATES, &jerr);
	if (a->status != 200) {
		const char *msg = json_string_value(json_object_get(root, "message"));
		if (msg)
			printable(msg, strlen(msg), clean, 161);
		json_decref(root);
		return fail(c, err, EPROTO, "status %d%s%s%s", a->status, msg ? " (" : "",
			    msg ? clean : "", msg ? ")" : "");
	}
	if (!root) {
		printable(jerr.text, strlen(jerr.text), clean, sizeof(clean));
		return fail(c, err, EPROTO, "the answer is not JSON: %s", clean);
	}
	json_t *result = json_object_get(root, "result");
	if (!json_is_object(root) || !result) {
		bool obj = json_is_object(root);
		json_decref(root);
		if (!obj)
			return fail(c, err, EPROTO, "the answer is not a JSON object");
		return fail(c, err, ENOENT,
			    "the answer has no \"result\" (undefined decision at %s)", c->path);
	}
	*ret = json_incref(result);
	json_decref(root);
	finish(c);
	return 1;
}

static int read_some(struct al_decider_call *c, json_t **ret, struct al_error *err)
{
	char why[300];

	for (;;) {
		if (c->in_len == c->in_cap) {
			if (c->in_cap > READ_MAX)
				return fail(c, err, E2BIG, "the answer is over %u bytes",
					    AL_DECIDER_ANSWER_MAX);
			c->in_cap = c->in_cap ? c->in_cap * 2 : 4096;
			if (c->in_cap > READ_MAX + 1)
				c->in_cap = READ_MAX + 1;
			c->in = xrealloc(c->in, c->in_cap);
		}
		ssize_t n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN)
			return fail(c, err, errno, "reading the answer: %s", strerror(errno));
		if (n == 0)
			c->eof = true;
		if (n > 0)
			c->in_len += (size_t)n;
		if (c->in_len > READ_MAX)
			return fail(c, err, E2BIG, "the answer is over %u bytes",
				    AL_DECIDER_ANSWER_MAX);
		struct answer a = {0};
		int r = frame_answer(c->in, c->in_len, c->eof, &a, why, sizeof(why));
		if (r < 0)
			return fail(c, err, -r, "%s", why);
		if (r > 0) {
			r = judge(c, &a, ret, err);
			free(a.decoded);
			return r;
		}
		if (n <= 0)
			return 0; /* EAGAIN: wait; EOF was judged above */
	}
}

static int progress(struct al_decider_call *c, json_t **ret, struct al_error *err)
{
	if (c->state == CONNECTING) {
		struct pollfd p = {.fd = c->fd, .events = POLLOUT};
		int e = 0;
		socklen_t len = sizeof(e);
		if (poll(&p, 1, 0) != 1)
			return 0;
		if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &e, &len) < 0)
			e = errno;
		if (e)
			return fail(c, err, e, "connect: %s", strerror(e));
		c->state = WRITING;
	}
	while (c->state == WRITING) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n < 0)
			return fail(c, err, errno, "sending the question: %s", strerror(errno));
		c->out_off += (size_t)n;
		if (c->out_off == c->out_len)
			c->state = READING;
	}
	return read_some(c, ret, err);
}

int al_decider_call_step(struct al_decider_call *call, json_t **ret_result, struct al_error *err)
{
	json_t *res = NULL;
	int r;

	if (call->state == FINISHED)
		return al_error_set(err, EALREADY, "decider %s: POST %s: the question is over",
				    call->who, call->path);
	r = progress(call, &res, err);
	if (r == 0 && al_now_ms() >= call->deadline)
		r = fail(call, err, ETIMEDOUT, "no answer within %llu ms",
			 (unsigned long long)call->timeout_ms);
	if (r > 0)
		*ret_result = res;
	return r;
}

void al_decider_call_free(struct al_decider_call *call)
{
	if (!call)
		return;
	al_closep(&call->fd);
	finish(call);
	free(call);
}

int al_decider_ask(const struct al_decider_conf *conf, const char *path, json_t *input,
		   json_t **ret_result, struct al_error *err)
{
	struct al_decider_call *c = NULL;
	json_t *res = NULL;
	int r = al_decider_call_start(conf, path, input, &c, err);

	if (r < 0)
		return r;
	while ((r = al_decider_call_step(c, &res, err)) == 0) {
		uint64_t now = al_now_ms();
		uint64_t left = c->deadline > now ? c->deadline - now : 0;
		struct pollfd p = {.fd = c->fd, .events = c->state == READING ? POLLIN : POLLOUT};
		if (poll(&p, 1, left > INT_MAX ? INT_MAX : (int)left) < 0 && errno != EINTR) {
			r = fail(c, err, errno, "poll: %s", strerror(errno));
			break;
		}
	}
	al_decider_call_free(c);
	if (r < 0)
		return r;
	*ret_result = res;
	return 0;
}
