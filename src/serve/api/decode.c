/* The front's request decoder (decode.h): routes, methods, the framing
 * headers, the query's flags and filter, the path decoded once, the body's
 * bound and JSON. Everything here reads what a client sent. */
#include "serve/api/decode.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "serve/serve.h"

#define PATH_MAX_RAW 4096 /* the raw path; past it: 414 */

static unsigned fail(struct al_front_req *rq, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static unsigned fail(struct al_front_req *rq, unsigned status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(rq->err, sizeof(rq->err), fmt, ap);
	va_end(ap);
	return status;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

long al_front_unescape(const char *src, size_t n, char *dst, size_t *bad)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		if (src[i] != '%') {
			dst[o++] = src[i];
			continue;
		}
		int hi = i + 1 < n ? hexval(src[i + 1]) : -1;
		int lo = i + 2 < n ? hexval(src[i + 2]) : -1;
		if (bad)
			*bad = i;
		if (hi < 0 || lo < 0)
			return -1;
		char c = (char)(hi * 16 + lo);
		/* An escaped NUL would cut the string short further on; an
		 * escaped '/' or '?' would make one segment two, or a path a
		 * query. */
		if (c == '\0' || c == '/' || c == '?')
			return -2;
		dst[o++] = c;
		i += 2;
	}
	dst[o] = '\0';
	return (long)o;
}

static bool id_ok(const char *s, size_t n)
{
	if (n == 0 || n >= 64)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '-' || s[i] == '_'))
			return false;
	return true;
}

static bool flag_value_ok(const char *v)
{
	size_t n = strlen(v);

	if (n > 8)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((v[i] >= 'a' && v[i] <= 'z') || (v[i] >= 'A' && v[i] <= 'Z') ||
		      (v[i] >= '0' && v[i] <= '9')))
			return false;
	return true;
}

/* One query key or value decoded into buf (cap bytes): 0, or a status. */
static unsigned query_part(struct al_front_req *rq, const char *what, const char *s, char *buf,
			   size_t cap)
{
	size_t n = strlen(s), bad = 0;

	if (n >= cap)
		return fail(rq, 414, "the query's %s \"%.32s...\" is over %zu bytes", what, s,
			    cap - 1);
	if (al_front_unescape(s, n, buf, &bad) < 0)
		return fail(rq, 400,
			    "the query's %s \"%.64s\": a bad escape at byte %zu (an escaped NUL, "
			    "'/' or '?', or '%%' without two hex digits)",
			    what, s, bad);
	return 0;
}

/* The query: the flags a sandbox's routes take (appended to rq->path as
 * "?k=v&..."), and for a list the filter metadata.KEY=VALUE. */
static unsigned query(const struct al_front_head *h, struct al_front_req *rq, json_t *filter,
		      char *flags, size_t cap)
{
	static const char *const names[] = {"list", "follow", "close", "mkdir"};
	bool seen[4] = {0};
	size_t n = 0;
	unsigned st;

	flags[0] = '\0';
	if (h->n_query > AL_FRONT_QUERY_MAX)
		return fail(rq, 400, "the query has over %d parameters", AL_FRONT_QUERY_MAX);
	for (size_t i = 0; i < h->n_query; i++) {
		char key[256], val[1024];
		if ((st = query_part(rq, "key", h->query[i].key ? h->query[i].key : "", key,
				     sizeof(key))) ||
		    (st = query_part(rq, "value", h->query[i].value ? h->query[i].value : "", val,
				     sizeof(val))))
			return st;
		if (filter && strncmp(key, "metadata.", 9) == 0 && key[9]) {
			/* Key and value as UTF-8: json_string() gives NULL for
			 * other bytes, which would drop the filter and widen
			 * the list. */
			char k[256], v[1024];
			al_utf8_escape(k, sizeof(k), key + 9);
			al_utf8_escape(v, sizeof(v), val);
			json_object_set_new(filter, k, json_string(v));
			continue;
		}
		for (size_t k = 0; k < AL_ARRAY_SIZE(names); k++) {
			if (strcmp(key, names[k]) != 0)
				continue;
			if (seen[k])
				return fail(rq, 400, "the query names \"%s\" twice", key);
			if (!flag_value_ok(val))
				return fail(rq, 400,
					    "the query's %s=\"%.32s\": a flag's value is at most 8 "
					    "letters or digits",
					    key, val);
			seen[k] = true;
			n += (size_t)snprintf(flags + n, cap - n, "%s%s=%s", n ? "&" : "?", key,
					      *val ? val : "1");
			if (n >= cap)
				return fail(rq, 414, "the query is too long");
		}
	}
	return 0;
}

/* The framing headers (one Content-Length at most, never with
 * Transfer-Encoding; chunked the only coding), and the bearer token. */
static unsigned headers(const struct al_front_head *h, struct al_front_req *rq)
{
	const char *cl = NULL, *te = NULL, *auth = NULL;
	unsigned n_cl = 0, n_te = 0, n_auth = 0;

	if (h->n_headers > AL_FRONT_HEADERS_MAX)
		return fail(rq, 431, "the request has over %d headers", AL_FRONT_HEADERS_MAX);
	for (size_t i = 0; i < h->n_headers; i++) {
		const char *k = h->headers[i].key, *v = h->headers[i].value;
		if (!k)
			continue;
		if (strcasecmp(k, "Content-Length") == 0)
			cl = v, n_cl++;
		else if (strcasecmp(k, "Transfer-Encoding") == 0)
			te = v, n_te++;
		else if (strcasecmp(k, "Authorization") == 0)
			auth = v, n_auth++;
	}
	if (n_cl > 1)
		return fail(rq, 400, "Content-Length is given %u times; one at most", n_cl);
	if (n_te > 1)
		return fail(rq, 400, "Transfer-Encoding is given %u times; one at most", n_te);
	if (cl && te)
		return fail(rq, 400, "Content-Length and Transfer-Encoding together: give one");
	if (te && strcasecmp(te, "chunked") != 0)
		return fail(rq, 400, "Transfer-Encoding \"%.32s\": only chunked is taken", te);
	if (cl) {
		size_t digits = strspn(cl, "0123456789");
		if (!*cl || cl[digits] || digits > 19)
			return fail(rq, 400, "Content-Length \"%.32s\" is not a number", cl);
		unsigned long long v = strtoull(cl, NULL, 10);
		if (v > rq->max)
			return fail(rq, 413, "the body is %llu bytes; at most %zu are taken", v,
				    rq->max);
	}
	if (n_auth > 1)
		return fail(rq, 400, "Authorization is given %u times; one at most", n_auth);
	if (auth && strncasecmp(auth, "Bearer ", 7) == 0) {
		if (strlen(auth + 7) >= sizeof(rq->token))
			return fail(rq, 400, "the bearer token is over %zu bytes",
				    sizeof(rq->token) - 1);
		snprintf(rq->token, sizeof(rq->token), "%s", auth + 7);
	}
	return 0;
}

static unsigned method_not(struct al_front_req *rq, const char *path, const char *method,
			   const char *allow)
{
	rq->allow = allow;
	return fail(rq, 405, "%s does not take %.16s; it takes %s", path, method, allow);
}

/* The route of the decoded path p: the operation, or a status. */
static unsigned route(const struct al_front_head *h, struct al_front_req *rq, const char *p)
{
	const char *m = h->method;
	bool get = strcmp(m, "GET") == 0, post = strcmp(m, "POST") == 0,
	     put = strcmp(m, "PUT") == 0, del = strcmp(m, "DELETE") == 0;
	char flags[64];
	unsigned st;

	if (strcmp(p, "/v1/health") == 0 || strcmp(p, "/metrics") == 0) {
		if (!get)
			return method_not(rq, p, m, "GET");
		rq->op = p[1] == 'v' ? AL_OP_HEALTH : AL_OP_METRICS;
		return query(h, rq, NULL, flags, sizeof(flags));
	}
	if (strcmp(p, "/v1/run") == 0) {
		if (!post)
			return method_not(rq, p, m, "POST");
		rq->op = AL_OP_RUN;
		return query(h, rq, NULL, flags, sizeof(flags));
	}
	if (strcmp(p, "/v1/sandboxes") == 0) {
		if (post) {
			rq->op = AL_OP_SANDBOX_CREATE;
			return query(h, rq, NULL, flags, sizeof(flags));
		}
		if (!get)
			return method_not(rq, p, m, "GET, POST");
		/* ?metadata.KEY=VALUE...: the filter, sent as the body. */
		json_t *f = json_object();
		st = query(h, rq, f, flags, sizeof(flags));
		rq->filter = st ? NULL : json_dumps(f, JSON_COMPACT);
		json_decref(f);
		rq->op = AL_OP_SANDBOX_LIST;
		return st;
	}
	if (strncmp(p, "/v1/sandboxes/", 14) != 0)
		return fail(rq, 404, "no route for %.16s %.200s", m, p);
	p += 14;
	size_t n = strcspn(p, "/");
	if (!id_ok(p, n))
		return fail(rq, 404, "no sandbox \"%.*s\"", (int)(n > 64 ? 64 : n), p);
	memcpy(rq->sandbox, p, n);
	rq->sandbox[n] = '\0';
	p += n;
	if (!*p || strcmp(p, "/") == 0) {
		if (!get && !del)
			return method_not(rq, "/v1/sandboxes/{id}", m, "GET, DELETE");
		rq->op = get ? AL_OP_SANDBOX_GET : AL_OP_SANDBOX_DELETE;
		return query(h, rq, NULL, flags, sizeof(flags));
	}
	if (!get && !post && !put && !del)
		return method_not(rq, "/v1/sandboxes/{id}/...", m, "GET, POST, PUT, DELETE");
	/* exec, execs/..., files/..., pause, resume, timeout, audit: the
	 * method, the rest of the path (decoded) and the flags go to the
	 * sandbox's session as "METHOD rest?flags". */
	if ((st = query(h, rq, NULL, flags, sizeof(flags))))
		return st;
	if (strlen(m) + strlen(p) + strlen(flags) + 2 > sizeof(rq->path))
		return fail(rq, 414, "the path is over %zu bytes", sizeof(rq->path) - 16);
	snprintf(rq->path, sizeof(rq->path), "%s %s%s", m, p + 1, flags);
	rq->op = AL_OP_SANDBOX_OTHER;
	/* An upload's body may be as large as a file. */
	if (put && strncmp(p + 1, "files/", 6) == 0)
		rq->max = AL_SERVE_FILE_MAX;
	return 0;
}

unsigned al_front_decode_head(const struct al_front_head *h, struct al_front_req *rq)
{
	size_t n = h->path ? strlen(h->path) : 0, bad = 0;
	unsigned st;

	memset(rq, 0, sizeof(*rq));
	rq->max = AL_SERVE_BODY_MAX;
	if (!h->method || !h->path || h->path[0] != '/')
		return fail(rq, 400, "the request's path must start with \"/\"");
	if (n > PATH_MAX_RAW)
		return fail(rq, 414, "the path is over %d bytes", PATH_MAX_RAW);
	_cleanup_free_ char *p = xmalloc(n + 1);
	long r = al_front_unescape(h->path, n, p, &bad);
	if (r < 0)
		return fail(rq, 400,
			    r == -2 ? "the path holds an escaped NUL, '/' or '?' (%%00, %%2F, "
				      "%%3F) at byte %zu: ids and file paths take none"
				    : "the path has a '%%' without two hex digits at byte %zu",
			    bad);
	/* The query is not part of the path (libmicrohttpd splits it off);
	 * a '?' or space here would confuse "METHOD rest?flags". */
	if (strpbrk(p, " ?"))
		return fail(rq, 400, "the path holds a space or '?'");
	if ((st = route(h, rq, p)))
		return st;
	return headers(h, rq);
}

static bool needs_json(enum al_serve_op op)
{
	return op == AL_OP_RUN || op == AL_OP_SANDBOX_CREATE;
}

unsigned al_front_decode_body(struct al_front_req *rq, const char *body, size_t len)
{
	if (len > rq->max)
		return fail(rq, 413, "the body is over %zu bytes", rq->max);
	if (!needs_json(rq->op))
		return 0;
	json_error_t je;
	json_t *j = json_loadb(body ? body : "", len, JSON_REJECT_DUPLICATES, &je);
	if (!j)
		return fail(rq, 400, "the body is not JSON: line %d, column %d: %s", je.line,
			    je.column, je.text);
	bool obj = json_is_object(j);
	json_decref(j);
	if (!obj)
		return fail(rq, 400, "the body must be a JSON object");
	return 0;
}

unsigned al_front_encode(const struct al_front_req *rq, uint64_t req, uint64_t conn,
			 const char *body, size_t len, struct al_msg_out *o)
{
	al_msg_begin(o, AL_MSG_REQUEST, req);
	al_msg_put_u64(o, AL_TAG_CONN, conn);
	al_msg_put_u32(o, AL_TAG_OP, rq->op);
	if (rq->token[0])
		al_msg_put_str(o, AL_TAG_TOKEN, rq->token);
	if (rq->sandbox[0])
		al_msg_put_str(o, AL_TAG_SANDBOX, rq->sandbox);
	if (rq->path[0])
		al_msg_put_str(o, AL_TAG_PATH, rq->path);
	if (rq->filter)
		al_msg_put_bytes(o, AL_TAG_BODY, rq->filter, strlen(rq->filter));
	else if (body)
		al_msg_put_bytes(o, AL_TAG_BODY, body, len);
	if (al_msg_end(o) < 0) {
		free(o->buf);
		o->buf = NULL;
		return 413;
	}
	return 0;
}

void al_front_req_free(struct al_front_req *rq)
{
	free(rq->filter);
	rq->filter = NULL;
}
