/* The front: the daemon's only parser of what clients send. It has no
 * listening socket (the monitor accepts and passes each connection over
 * the channel, SCM_RIGHTS), serves HTTP with libmicrohttpd in an external
 * epoll loop, checks and parses each request (route, method, size, JSON)
 * and passes it on as a typed message; the monitor's answer goes back as
 * the response. It is its own program (`airlock-serve __front`, exec'd by
 * the monitor with nothing of the monitor's), runs confined (confine.c)
 * and knows nobody's identity: the monitor holds those. The decoding of a
 * request is decode.c's; this file is libmicrohttpd's side. */
#include "serve/api/front.h"
#include "serve/api/decode.h"

#include <errno.h>
#include <jansson.h>
#include <microhttpd.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "core/sys.h"
#include "core/util.h"
#include "serve/chan.h"
#include "serve/serve.h"

#define HEADERS_MAX (32u << 10) /* request line + headers: MHD's 431 past it */

/* One client connection: while a request's head or body is being read,
 * the time it began (the whole request must arrive within the request
 * timeout, however slowly it trickles). */
struct fconn {
	uint64_t id; /* the monitor's */
	int fd;
	bool reading;
	uint64_t since_ms;
	struct fconn *next;
};

struct request {
	uint64_t id;
	struct al_front_req d; /* decoded head */
	char *body;
	size_t len;
	bool too_big, sent, answered;
	/* A streamed answer: chunks buffered until the client reads them
	 * (at most AL_SERVE_STREAM_MAX; past it, or when it is the slowest
	 * and all streams together are past AL_SERVE_STREAM_TOTAL, the
	 * connection is dropped). */
	bool stream, ended, waiting, overflow;
	char *sbuf;
	size_t slen;
	unsigned status;
	char *ctype;
	char *answer; /* handed to libmicrohttpd's response (no second copy) */
	size_t answer_len;
	size_t held; /* bytes of its answer counted in F.answers */
	struct MHD_Connection *conn;
	struct request *next;
};

struct front {
	struct MHD_Daemon *d;
	struct al_chan mon;
	uint64_t next_req;
	uint64_t adding; /* the monitor's id of the connection being added */
	int adding_fd;
	struct request *pending;
	struct fconn *conns;
	size_t streamed; /* bytes buffered in every stream together */
	size_t answers;	 /* bytes of non-streamed answers held together */
	unsigned request_timeout_s;
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
	va_list ap;

	/* The message may hold the client's URL (al_serve_error_json escapes
	 * what is not UTF-8); one that still cannot be packed gets a fixed one. */
	va_start(ap, fmt);
	json_t *o = al_serve_error_json(fmt, ap);
	va_end(ap);
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	static const char fixed[] = "{\"error\":\"the request was refused\"}";
	enum MHD_Result r =
	    reply(c, status, "application/json", s ? s : fixed, s ? strlen(s) : sizeof(fixed) - 1);
	free(s);
	json_decref(o);
	return r;
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
		F.streamed -= n;
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

static struct fconn *fconn_of(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return ci ? ci->socket_context : NULL;
}

static enum MHD_Result forward(struct MHD_Connection *c, struct request *rq)
{
	struct fconn *fc = fconn_of(c);
	struct al_msg_out o;
	unsigned st;

	if ((st = al_front_decode_body(&rq->d, rq->body, rq->len)))
		return reply_error(c, st, "%s", rq->d.err);
	rq->id = ++F.next_req;
	if (al_front_encode(&rq->d, rq->id, fc ? fc->id : 0, rq->body, rq->len, &o))
		return reply_error(c, 413, "the request is too large");
	al_chan_queue(&F.mon, &o, -1);
	rq->sent = true;
	rq->conn = c;
	rq->next = F.pending;
	F.pending = rq;
	MHD_suspend_connection(c);
	return MHD_YES;
}

struct kvs {
	struct al_front_kv v[AL_FRONT_HEADERS_MAX + 1];
	size_t n, max;
};

static enum MHD_Result collect(void *cls, enum MHD_ValueKind kind, const char *key,
			       const char *value)
{
	struct kvs *k = cls;

	(void)kind;
	if (k->n < k->max)
		k->v[k->n++] = (struct al_front_kv){key, value};
	else
		k->n = k->max + 1; /* one more than the decoder takes: refused */
	return k->n <= k->max ? MHD_YES : MHD_NO;
}

/* The head is in: decode it (decode.c) before any of the body is read. */
static enum MHD_Result on_head(struct MHD_Connection *c, const char *url, const char *method,
			       struct request *rq)
{
	struct kvs q = {.max = AL_FRONT_QUERY_MAX}, hd = {.max = AL_FRONT_HEADERS_MAX};

	MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, collect, &q);
	MHD_get_connection_values(c, MHD_HEADER_KIND, collect, &hd);
	struct al_front_head h = {.method = method,
				  .path = url,
				  .query = q.v,
				  .n_query = q.n,
				  .headers = hd.v,
				  .n_headers = hd.n};
	unsigned st = al_front_decode_head(&h, &rq->d);
	if (!st)
		return MHD_YES;
	rq->too_big = true; /* the body, if any, is not kept */
	if (st != 405)
		return reply_error(c, st, "%s", rq->d.err);
	json_t *o = json_pack("{s:s}", "error", rq->d.err);
	char *txt = json_dumps(o, JSON_COMPACT);
	struct MHD_Response *r =
	    MHD_create_response_from_buffer(strlen(txt), txt, MHD_RESPMEM_MUST_COPY);
	enum MHD_Result ret = MHD_NO;
	if (r) {
		MHD_add_response_header(r, "Content-Type", "application/json");
		MHD_add_response_header(r, "Allow", rq->d.allow);
		ret = MHD_queue_response(c, 405, r);
		MHD_destroy_response(r);
		status_seen(405);
	}
	free(txt);
	json_decref(o);
	return ret;
}

/* A non-streamed answer: its buffer handed to libmicrohttpd as it is
 * (freed with the response), counted in F.answers until the request
 * completes. */
static enum MHD_Result reply_answer(struct MHD_Connection *c, struct request *rq)
{
	if (!rq->answer)
		return reply_error(c, 503,
				   "the daemon holds too many answers for clients that have not "
				   "read them (%u MiB); retry",
				   AL_SERVE_ANSWER_TOTAL >> 20);
	struct MHD_Response *r =
	    MHD_create_response_from_buffer(rq->answer_len, rq->answer, MHD_RESPMEM_MUST_FREE);
	if (!r)
		return MHD_NO;
	rq->answer = NULL;
	MHD_add_response_header(r, "Content-Type", rq->ctype ? rq->ctype : "application/json");
	if (rq->status == 429 || rq->status == 503)
		MHD_add_response_header(r, "Retry-After", "1");
	enum MHD_Result ret = MHD_queue_response(c, rq->status, r);
	MHD_destroy_response(r);
	status_seen(rq->status);
	return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *data,
				  size_t *data_len, void **ctx)
{
	struct request *rq = *ctx;

	(void)cls;
	(void)version;
	if (!rq) { /* the head is in: route and size now, before any body */
		rq = *ctx = xcalloc(1, sizeof(*rq));
		return on_head(c, url, method, rq);
	}
	if (*data_len) {
		if (!rq->too_big && rq->len + *data_len > rq->d.max) {
			rq->too_big = true;
			free(rq->body);
			rq->body = NULL;
			*data_len = 0;
			return reply_error(c, 413, "the body is over %zu bytes", rq->d.max);
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
	/* The whole request is in: its deadline no longer runs. */
	struct fconn *fc = fconn_of(c);
	if (fc)
		fc->reading = false;
	if (rq->answered && rq->stream)
		return reply_stream(c, rq);
	if (rq->answered)
		return reply_answer(c, rq);
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
	/* A kept-alive connection's next request starts its clock now. */
	struct fconn *fc = fconn_of(c);
	if (fc) {
		fc->reading = true;
		fc->since_ms = al_now_ms();
	}
	F.streamed -= rq->slen;
	F.answers -= rq->held;
	al_front_req_free(&rq->d);
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
	(void)cls;
	(void)c;
	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		struct fconn *fc = xcalloc(1, sizeof(*fc));
		fc->id = F.adding;
		fc->fd = F.adding_fd;
		fc->reading = true;
		fc->since_ms = al_now_ms();
		fc->next = F.conns;
		F.conns = fc;
		*sctx = fc;
		return;
	}
	struct fconn *fc = *sctx;
	if (fc) { /* the monitor counts it out */
		struct al_msg_out o;
		al_msg_begin(&o, AL_MSG_CLOSED, fc->id);
		al_msg_end(&o);
		al_chan_queue(&F.mon, &o, -1);
		for (struct fconn **p = &F.conns; *p; p = &(*p)->next)
			if (*p == fc) {
				*p = fc->next;
				break;
			}
		free(fc);
		*sctx = NULL;
	}
}

/* A stream's client is dropped: what it has buffered goes, and its
 * connection ends (with an error: the chunked answer is cut short). */
static void drop_stream(struct request *rq)
{
	F.streamed -= rq->slen;
	free(rq->sbuf);
	rq->sbuf = NULL;
	rq->slen = 0;
	rq->overflow = true;
	rq->ended = true;
	if (rq->waiting) {
		rq->waiting = false;
		MHD_resume_connection(rq->conn);
	}
}

/* The stream with the most buffered (its client reads slowest), counting
 * len more for rq, which is about to get them. */
static struct request *slowest(struct request *rq, size_t len)
{
	struct request *worst = rq;
	size_t most = rq->slen + len;

	for (struct request *p = F.pending; p; p = p->next)
		if (p->stream && !p->overflow && p->slen > most) {
			worst = p;
			most = p->slen;
		}
	return worst;
}

/* Connections whose request has not arrived whole within the request
 * timeout (a head or body trickled in) are shut down; libmicrohttpd then
 * sees their end and closes them. */
static void drop_slow(void)
{
	uint64_t now = al_now_ms(), max = (uint64_t)F.request_timeout_s * 1000;

	for (struct fconn *fc = F.conns; fc; fc = fc->next)
		if (fc->reading && now - fc->since_ms >= max) {
			fc->reading = false;
			shutdown(fc->fd, SHUT_RDWR);
		}
}

/* Room for a non-streamed answer of len bytes within
 * AL_SERVE_ANSWER_TOTAL: the clients of larger answers held (they read
 * slowest, or not at all) are dropped until it fits. false: rq's own is
 * the largest, and does not fit. */
static bool hold_answer(struct request *rq, size_t len)
{
	while (F.answers + len > AL_SERVE_ANSWER_TOTAL) {
		struct request *worst = NULL;
		for (struct request *p = F.pending; p; p = p->next)
			if (p != rq && p->held > (worst ? worst->held : len))
				worst = p;
		if (!worst)
			return false;
		/* Its connection is shut; libmicrohttpd ends the request
		 * (and frees the answer) on its next run. */
		struct fconn *fc = fconn_of(worst->conn);
		if (fc)
			shutdown(fc->fd, SHUT_RDWR);
		F.answers -= worst->held;
		worst->held = 0;
	}
	F.answers += len;
	rq->held = len;
	return true;
}

/* No decoding of the URL by libmicrohttpd: decode.c decodes the path and
 * the query once, and refuses escapes that would change their shape. */
static size_t no_unescape(void *cls, struct MHD_Connection *c, char *s)
{
	(void)cls;
	(void)c;
	return strlen(s);
}

static void on_monitor_msg(const struct al_msg *in)
{
	if (in->type == AL_MSG_CONN) {
		int fd = al_chan_take_fd(&F.mon);
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		if (fd < 0)
			return;
		F.adding = in->id;
		F.adding_fd = fd;
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
			if (rq->slen + len > AL_SERVE_STREAM_MAX)
				drop_stream(rq); /* a client that does not read */
			while (!rq->overflow && len && F.streamed + len > AL_SERVE_STREAM_TOTAL)
				drop_stream(slowest(rq, len));
			if (!rq->overflow && len) {
				rq->sbuf = xrealloc(rq->sbuf, rq->slen + len);
				memcpy(rq->sbuf + rq->slen, b, len);
				rq->slen += len;
				F.streamed += len;
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
		rq->answered = true;
		rq->stream = al_msg_u32(in, AL_TAG_STREAM, 0) == 1;
		/* (a stream's head has a small body: not counted) */
		if (rq->stream || hold_answer(rq, len)) {
			rq->answer = xmalloc(len + 1);
			memcpy(rq->answer, b, len);
			rq->answer_len = len;
		}
		MHD_resume_connection(rq->conn);
		return;
	}
}

void al_front_main(int fd, const struct al_front_config *cfg)
{
	struct al_error err = {0};
	const union MHD_DaemonInfo *di;

	al_chan_init(&F.mon, fd);
	F.next_req = cfg->first_request;
	F.request_timeout_s = cfg->request_timeout_s;
	F.d = MHD_start_daemon(
	    MHD_USE_NO_LISTEN_SOCKET | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME, 0, NULL, NULL,
	    on_request, NULL, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HEADERS_MAX,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->client_timeout_s,
	    MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->max_clients + 1,
	    MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_NOTIFY_CONNECTION,
	    on_connection, NULL, MHD_OPTION_UNESCAPE_CALLBACK, no_unescape, NULL, MHD_OPTION_END);
	if (!F.d || !(di = MHD_get_daemon_info(F.d, MHD_DAEMON_INFO_EPOLL_FD))) {
		al_err("serve: front: cannot start libmicrohttpd");
		_exit(125);
	}
	int epfd = di->epoll_fd;
	if (al_front_confine(cfg->no_landlock, &err) < 0) {
		al_err("serve: %s", err.msg);
		_exit(124);
	}
	for (;;) {
		MHD_UNSIGNED_LONG_LONG to;
		int timeout =
		    MHD_get_timeout(F.d, &to) == MHD_YES ? (int)(to > 60000 ? 60000 : to) : -1;
		/* The request deadline is looked at every second at least. */
		if (F.conns && (timeout < 0 || timeout > 1000))
			timeout = 1000;
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
		drop_slow();
		MHD_run(F.d);
		if (al_chan_flush(&F.mon) < 0)
			_exit(125);
	}
}
