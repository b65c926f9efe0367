/* The front: the daemon's only parser of what clients send. It has no
 * listening socket (the monitor accepts and passes each connection over
 * the channel, SCM_RIGHTS), serves HTTP with libmicrohttpd in an external
 * epoll loop, checks and parses each request (route, method, size, JSON)
 * and passes it on as a typed message; the monitor's answer goes back as
 * the response. It runs confined (confine.c) and knows nobody's identity:
 * the monitor holds those. */
#include "serve/api/front.h"

#include <errno.h>
#include <jansson.h>
#include <microhttpd.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/log.h"
#include "core/util.h"
#include "serve/chan.h"
#include "serve/serve.h"

#define HEADERS_MAX (32u << 10) /* request line + headers: MHD's 431 past it */
#define STREAM_MAX  (16u << 20) /* a streamed answer buffered for a slow client */

struct request {
	uint64_t id;
	enum al_serve_op op;
	char sandbox[80], path[512];
	char *body;
	size_t len;
	size_t max; /* the body's bound for this route */
	bool too_big, sent, answered;
	/* A streamed answer: chunks buffered until the client reads them
	 * (at most STREAM_MAX; past it the connection is dropped). */
	bool stream, ended, waiting, overflow;
	char *sbuf;
	size_t slen;
	unsigned status;
	char *ctype;
	char *answer;
	size_t answer_len;
	struct MHD_Connection *conn;
	struct request *next;
};

struct front {
	struct MHD_Daemon *d;
	struct al_chan mon;
	uint64_t next_req;
	uint64_t adding; /* the monitor's id of the connection being added */
	struct request *pending;
};

static struct front F;

static void status_seen(unsigned status)
{
	struct al_msg_out o;

	al_msg_begin(&o, AL_MSG_STATUS, 0);
	al_msg_put_u32(&o, AL_TAG_STATUS, status);
	al_msg_end(&o);
	al_chan_queue(&F.mon, &o, -1);
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *ctype,
			     const char *body, size_t len)
{
	struct MHD_Response *r =
	    MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", ctype);
	if (status == 405)
		MHD_add_response_header(r, "Allow", "GET, POST, PUT, DELETE");
	if (status == 429 || status == 503)
		MHD_add_response_header(r, "Retry-After", "1");
	enum MHD_Result ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	status_seen(status);
	return ret;
}

static enum MHD_Result reply_error(struct MHD_Connection *c, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static enum MHD_Result reply_error(struct MHD_Connection *c, unsigned status, const char *fmt, ...)
{
	char raw[768], msg[768];
	va_list ap;

	/* The message may hold the client's URL, whose escapes can decode to
	 * bytes that are not UTF-8 (which JSON cannot carry): they are sent as
	 * \xNN, and a message that still cannot be packed gets a fixed one. */
	va_start(ap, fmt);
	vsnprintf(raw, sizeof(raw), fmt, ap);
	va_end(ap);
	al_utf8_escape(msg, sizeof(msg), raw);
	json_t *o = json_pack("{s:s}", "error", msg);
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	static const char fixed[] = "{\"error\":\"the request was refused\"}";
	enum MHD_Result r =
	    reply(c, status, "application/json", s ? s : fixed, s ? strlen(s) : sizeof(fixed) - 1);
	free(s);
	json_decref(o);
	return r;
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

/* The route: an operation, or a status to answer with at once (404 for
 * no such path, 405 for a method the path does not take). */
static enum MHD_Result meta_arg(void *cls, enum MHD_ValueKind kind, const char *key,
				const char *value)
{
	/* Key and value as UTF-8 (json_string gives NULL for other bytes,
	 * which would drop the filter and widen the list). */
	if (strncmp(key, "metadata.", 9) == 0 && key[9]) {
		char k[512], v[1024];
		al_utf8_escape(k, sizeof(k), key + 9);
		al_utf8_escape(v, sizeof(v), value ? value : "");
		json_object_set_new(cls, k, json_string(v));
	}
	return MHD_YES;
}

/* The query flags a sandbox's routes take, passed on after the path. */
static void query_flags(struct MHD_Connection *c, char *out, size_t len)
{
	static const char *const flags[] = {"list", "follow", "close", "mkdir"};
	size_t n = 0;

	out[0] = '\0';
	for (size_t i = 0; i < sizeof(flags) / sizeof(*flags); i++) {
		const char *v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, flags[i]);
		if (!v)
			continue;
		if (strlen(v) > 8)
			v = "1";
		n += (size_t)snprintf(out + n, len - n, "%s%s=%s", n ? "&" : "?", flags[i],
				      *v ? v : "1");
		if (n >= len)
			n = len - 1;
	}
}

static unsigned route(struct MHD_Connection *c, const char *method, const char *url,
		      struct request *rq)
{
	bool get = strcmp(method, "GET") == 0, post = strcmp(method, "POST") == 0,
	     del = strcmp(method, "DELETE") == 0;
	const char *p;

	if (strcmp(url, "/v1/health") == 0)
		return get ? (rq->op = AL_OP_HEALTH, 0) : 405;
	if (strcmp(url, "/metrics") == 0)
		return get ? (rq->op = AL_OP_METRICS, 0) : 405;
	if (strcmp(url, "/v1/run") == 0)
		return post ? (rq->op = AL_OP_RUN, 0) : 405;
	if (strcmp(url, "/v1/sandboxes") == 0) {
		if (get) { /* ?metadata.KEY=VALUE...: the filter, as the body */
			json_t *f = json_object();
			MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, meta_arg, f);
			rq->body = json_dumps(f, JSON_COMPACT);
			rq->len = strlen(rq->body);
			json_decref(f);
		}
		return post  ? (rq->op = AL_OP_SANDBOX_CREATE, 0)
		       : get ? (rq->op = AL_OP_SANDBOX_LIST, 0)
			     : 405;
	}
	if (strncmp(url, "/v1/sandboxes/", 14) != 0)
		return 404;
	p = url + 14;
	size_t n = strcspn(p, "/");
	if (!id_ok(p, n))
		return 404;
	memcpy(rq->sandbox, p, n);
	rq->sandbox[n] = '\0';
	p += n;
	if (!*p)
		return get   ? (rq->op = AL_OP_SANDBOX_GET, 0)
		       : del ? (rq->op = AL_OP_SANDBOX_DELETE, 0)
			     : 405;
	/* exec, files/..., pause, resume, timeout, audit: the method and the
	 * rest of the path go to the monitor as they are (bounded). */
	char q[64];
	query_flags(c, q, sizeof(q));
	if (strlen(method) + strlen(p) + strlen(q) + 2 > sizeof(rq->path))
		return 414;
	snprintf(rq->path, sizeof(rq->path), "%s %s%s", method, p + 1, q);
	rq->op = AL_OP_SANDBOX_OTHER;
	/* An upload's body may be as large as a file. */
	if (strcmp(method, "PUT") == 0 && strncmp(p + 1, "files/", 6) == 0)
		rq->max = AL_SERVE_FILE_MAX;
	return 0;
}

/* A streamed answer's bytes as the client takes them; with none
 * buffered the connection waits (suspended) for the next chunk. */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct request *rq = cls;

	if (rq->overflow)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	if (rq->slen) {
		size_t n = rq->slen < max ? rq->slen : max;
		memcpy(buf, rq->sbuf, n);
		memmove(rq->sbuf, rq->sbuf + n, rq->slen - n);
		rq->slen -= n;
		return (ssize_t)n;
	}
	if (rq->ended)
		return MHD_CONTENT_READER_END_OF_STREAM;
	rq->waiting = true;
	MHD_suspend_connection(rq->conn);
	return 0;
}

static enum MHD_Result reply_stream(struct MHD_Connection *c, struct request *rq)
{
	struct MHD_Response *r =
	    MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, rq, NULL);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", rq->ctype);
	enum MHD_Result ret = MHD_queue_response(c, rq->status, r);
	MHD_destroy_response(r);
	status_seen(rq->status);
	return ret;
}

static bool needs_json(enum al_serve_op op)
{
	return op == AL_OP_RUN || op == AL_OP_SANDBOX_CREATE;
}

static enum MHD_Result forward(struct MHD_Connection *c, struct request *rq)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	uint64_t conn = ci && ci->socket_context ? *(uint64_t *)ci->socket_context : 0;
	const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
	struct al_msg_out o;

	if (needs_json(rq->op)) {
		json_error_t je;
		json_t *j =
		    json_loadb(rq->body ? rq->body : "", rq->len, JSON_REJECT_DUPLICATES, &je);
		if (!j)
			return reply_error(c, 400, "the body is not JSON: line %d, column %d: %s",
					   je.line, je.column, je.text);
		bool obj = json_is_object(j);
		json_decref(j);
		if (!obj)
			return reply_error(c, 400, "the body must be a JSON object");
	}
	rq->id = ++F.next_req;
	al_msg_begin(&o, AL_MSG_REQUEST, rq->id);
	al_msg_put_u64(&o, AL_TAG_CONN, conn);
	al_msg_put_u32(&o, AL_TAG_OP, rq->op);
	if (auth && strncasecmp(auth, "Bearer ", 7) == 0 && strlen(auth + 7) <= 256)
		al_msg_put_str(&o, AL_TAG_TOKEN, auth + 7);
	if (rq->sandbox[0])
		al_msg_put_str(&o, AL_TAG_SANDBOX, rq->sandbox);
	if (rq->path[0])
		al_msg_put_str(&o, AL_TAG_PATH, rq->path);
	if (rq->body)
		al_msg_put_bytes(&o, AL_TAG_BODY, rq->body, rq->len);
	if (al_msg_end(&o) < 0) {
		free(o.buf);
		return reply_error(c, 413, "the request is too large");
	}
	al_chan_queue(&F.mon, &o, -1);
	rq->sent = true;
	rq->conn = c;
	rq->next = F.pending;
	F.pending = rq;
	MHD_suspend_connection(c);
	return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *data,
				  size_t *data_len, void **ctx)
{
	struct request *rq = *ctx;
	unsigned st;

	if (!rq) { /* the head is in: route and size now, before any body */
		rq = *ctx = xcalloc(1, sizeof(*rq));
		rq->max = AL_SERVE_BODY_MAX;
		if ((st = route(c, method, url, rq)) != 0) {
			rq->too_big = true; /* the body, if any, is not kept */
			if (st == 405)
				return reply_error(c, 405, "%s does not take %s", url, method);
			if (st == 414)
				return reply_error(c, 414, "the URL is too long");
			return reply_error(c, 404, "no route for %s %s", method, url);
		}
		const char *cl =
		    MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
		if (cl && strtoull(cl, NULL, 10) > rq->max) {
			rq->too_big = true;
			return reply_error(c, 413, "the body is %s bytes; at most %zu are taken",
					   cl, rq->max);
		}
		return MHD_YES;
	}
	if (*data_len) {
		if (!rq->too_big && rq->len + *data_len > rq->max) {
			rq->too_big = true;
			free(rq->body);
			rq->body = NULL;
			*data_len = 0;
			return reply_error(c, 413, "the body is over %zu bytes", rq->max);
		}
		if (!rq->too_big) {
			rq->body = xrealloc(rq->body, rq->len + *data_len + 1);
			memcpy(rq->body + rq->len, data, *data_len);
			rq->len += *data_len;
		}
		*data_len = 0;
		return MHD_YES;
	}
	if (rq->too_big)
		return MHD_YES; /* answered already */
	if (rq->answered && rq->stream)
		return reply_stream(c, rq);
	if (rq->answered)
		return reply(c, rq->status, rq->ctype, rq->answer, rq->answer_len);
	if (rq->sent)
		return MHD_YES;
	return forward(c, rq);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **ctx,
			 enum MHD_RequestTerminationCode toe)
{
	struct request *rq = *ctx;

	if (!rq)
		return;
	/* The client left before the answer, or during a stream: the
	 * sandbox stops sending it. */
	if (rq->sent && (!rq->answered || (rq->stream && !rq->ended))) {
		struct al_msg_out o;
		al_msg_begin(&o, AL_MSG_CANCEL, rq->id);
		al_msg_end(&o);
		al_chan_queue(&F.mon, &o, -1);
	}
	for (struct request **p = &F.pending; *p; p = &(*p)->next)
		if (*p == rq) {
			*p = rq->next;
			break;
		}
	free(rq->body);
	free(rq->ctype);
	free(rq->answer);
	free(rq->sbuf);
	free(rq);
	*ctx = NULL;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **sctx,
			  enum MHD_ConnectionNotificationCode toe)
{
	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		uint64_t *id = xmalloc(sizeof(*id));
		*id = F.adding;
		*sctx = id;
		return;
	}
	if (*sctx) { /* the monitor counts it out */
		struct al_msg_out o;
		al_msg_begin(&o, AL_MSG_CLOSED, *(uint64_t *)*sctx);
		al_msg_end(&o);
		al_chan_queue(&F.mon, &o, -1);
		free(*sctx);
		*sctx = NULL;
	}
}

static void on_monitor_msg(const struct al_msg *in)
{
	if (in->type == AL_MSG_CONN) {
		int fd = al_chan_take_fd(&F.mon);
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		if (fd < 0)
			return;
		F.adding = in->id;
		if (MHD_add_connection(F.d, fd, (struct sockaddr *)&sa, sizeof(sa.sun_family)) !=
		    MHD_YES) {
			/* MHD closed it; the monitor counts it out. */
			struct al_msg_out o;
			al_msg_begin(&o, AL_MSG_CLOSED, in->id);
			al_msg_end(&o);
			al_chan_queue(&F.mon, &o, -1);
		}
		F.adding = 0;
		return;
	}
	if (in->type == AL_MSG_CHUNK) {
		for (struct request *rq = F.pending; rq; rq = rq->next) {
			if (rq->id != in->id || !rq->stream || rq->ended)
				continue;
			size_t len;
			const uint8_t *b = al_msg_bytes(in, AL_TAG_BODY, &len);
			if (rq->slen + len > STREAM_MAX) {
				rq->overflow = true; /* a client that does not read */
			} else if (len) {
				rq->sbuf = xrealloc(rq->sbuf, rq->slen + len);
				memcpy(rq->sbuf + rq->slen, b, len);
				rq->slen += len;
			}
			if (al_msg_u32(in, AL_TAG_END, 0) == 1 || rq->overflow)
				rq->ended = true;
			if (rq->waiting) {
				rq->waiting = false;
				MHD_resume_connection(rq->conn);
			}
			return;
		}
		return;
	}
	if (in->type != AL_MSG_RESPONSE)
		return;
	for (struct request *rq = F.pending; rq; rq = rq->next) {
		if (rq->id != in->id || rq->answered)
			continue;
		size_t len;
		const uint8_t *b = al_msg_bytes(in, AL_TAG_BODY, &len);
		rq->status = al_msg_u32(in, AL_TAG_STATUS, 500);
		rq->ctype = al_msg_strdup(in, AL_TAG_CTYPE);
		rq->answer = xmalloc(len + 1);
		memcpy(rq->answer, b, len);
		rq->answer_len = len;
		rq->answered = true;
		rq->stream = al_msg_u32(in, AL_TAG_STREAM, 0) == 1;
		MHD_resume_connection(rq->conn);
		return;
	}
}

void al_front_main(int fd, const struct al_serve_config *cfg)
{
	struct al_error err = {0};
	const union MHD_DaemonInfo *di;

	al_chan_init(&F.mon, fd);
	F.d = MHD_start_daemon(MHD_USE_NO_LISTEN_SOCKET | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME,
			       0, NULL, NULL, on_request, NULL, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
			       (size_t)HEADERS_MAX, MHD_OPTION_CONNECTION_TIMEOUT,
			       (unsigned)cfg->client_timeout_s, MHD_OPTION_CONNECTION_LIMIT,
			       (unsigned)cfg->max_clients + 1, MHD_OPTION_NOTIFY_COMPLETED,
			       on_completed, NULL, MHD_OPTION_NOTIFY_CONNECTION, on_connection,
			       NULL, MHD_OPTION_END);
	if (!F.d || !(di = MHD_get_daemon_info(F.d, MHD_DAEMON_INFO_EPOLL_FD))) {
		al_err("serve: front: cannot start libmicrohttpd");
		_exit(125);
	}
	int epfd = di->epoll_fd;
	if (al_front_confine(&err) < 0) {
		al_err("serve: %s", err.msg);
		_exit(125);
	}
	for (;;) {
		MHD_UNSIGNED_LONG_LONG to;
		int timeout =
		    MHD_get_timeout(F.d, &to) == MHD_YES ? (int)(to > 60000 ? 60000 : to) : -1;
		struct pollfd pf[2] = {
		    {.fd = F.mon.fd, .events = POLLIN | (al_chan_pending(&F.mon) ? POLLOUT : 0)},
		    {.fd = epfd, .events = POLLIN}};
		if (poll(pf, 2, timeout) < 0 && errno != EINTR)
			_exit(125);
		if (pf[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			struct al_msg in;
			int r;
			if (al_chan_read(&F.mon) < 0 || F.mon.eof)
				_exit(0); /* the monitor is gone */
			while ((r = al_chan_next(&F.mon, &in, &err)) > 0)
				on_monitor_msg(&in);
			if (r < 0) {
				al_err("serve: front: the monitor's message: %s", err.msg);
				_exit(125);
			}
		}
		MHD_run(F.d);
		if (al_chan_flush(&F.mon) < 0)
			_exit(125);
	}
}
