/* A connection's life: accept, read the first bytes (the head stage of each
 * path), the dispatcher that moves it from stage to stage, and the close
 * that audits and counts its verdict. */
#include "gateway/conn.h"
#include "gateway/filter.h"

#include <errno.h>
#include <linux/netfilter_ipv4.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "gateway/socks.h"

static const char *path_name(const struct conn *c)
{
	switch (c->path) {
	case GW_PATH_TRANSPARENT:
		return "transparent";
	case GW_PATH_SOCKS:
		return "socks";
	default:
		return "http";
	}
}

/* decision: "allow", "deny", or "cut" (allowed by c->rule, then cut for
 * the reason: a secret's misuse). */
static void audit_decision(struct conn *c, const char *decision, const char *reason)
{
	bool allowed = strcmp(decision, "deny") != 0;
	json_t *o = json_pack("{s:s, s:s?, s:i, s:s, s:s, s:s?}", "name", c->name, "address",
			      c->addr[0] ? c->addr : NULL, "port", c->port, "path", path_name(c),
			      "decision", decision, "rule", c->rule);
	if (reason)
		json_object_set_new(o, "reason", json_string(reason));
	if (allowed) {
		json_object_set_new(o, "bytes_up", json_integer((json_int_t)c->up.bytes));
		json_object_set_new(o, "bytes_down", json_integer((json_int_t)c->down.bytes));
	}
	al_audit_emit(c->gw->audit, "net.connect", o);
}

void gw_reply(struct conn *c, const void *buf, size_t len)
{
	/* Best effort: the sockets are non-blocking and these replies are small. */
	if (send(c->client.fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		al_debug("gateway: reply not sent: %s", strerror(errno));
}

void gw_buf_put(struct buf *b, const void *data, size_t n)
{
	size_t room = AL_GW_BUF_SIZE - b->off - b->len;
	if (n > room)
		n = room; /* callers never pass more than a head's worth */
	memcpy(b->data + b->off + b->len, data, n);
	b->len += n;
}

int gw_side_set(struct side *s, uint32_t events)
{
	if (!s->w)
		return 0;
	int r = al_watch_set(s->w, events);
	if (r < 0)
		al_debug("gateway: ignoring epoll_ctl failure: %s", strerror(-r));
	return r;
}

enum gw_step gw_deny(struct conn *c, enum gw_answer answer, int http_status, uint8_t socks_code,
		     const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->reason, sizeof(c->reason), fmt, ap);
	va_end(ap);
	c->verdict = GW_DENIED;
	c->answer = answer;
	c->http_status = http_status;
	c->socks_code = socks_code;
	return GW_CLOSE;
}

enum gw_step gw_cut(struct conn *c, enum gw_answer answer, int http_status, uint8_t socks_code,
		    const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->reason, sizeof(c->reason), fmt, ap);
	va_end(ap);
	c->cut = true;
	/* A SOCKS or CONNECT client was told it is connected, and bytes from
	 * upstream may have reached an HTTP client: an answer of ours now
	 * would read as the server's. */
	if (c->path == GW_PATH_SOCKS || c->is_connect || (c->path == GW_PATH_HTTP && c->down.bytes))
		answer = GW_ANSWER_NONE;
	c->answer = answer;
	c->http_status = http_status;
	c->socks_code = socks_code;
	return GW_CLOSE;
}

/* The answer to a refused or failed connection, on its own path. */
static void answer(struct conn *c)
{
	if (c->answer == GW_ANSWER_NONE || c->client.fd < 0)
		return;
	if (c->path == GW_PATH_SOCKS) {
		uint8_t out[AL_SOCKS_REPLY_MAX];
		struct in6_addr any = IN6ADDR_ANY_INIT;
		int n = al_socks_format_reply(c->socks_code, &any, 0, out, sizeof(out));
		if (n > 0)
			gw_reply(c, out, (size_t)n);
	} else if (c->path == GW_PATH_HTTP) {
		char out[1024];
		int n = c->http_status == 403
			    ? al_http_format_denied(c->reason, out, sizeof(out))
			    : al_http_format_response(c->http_status,
						      c->answer_text ? c->answer_text : c->reason,
						      out, sizeof(out));
		if (n > 0)
			gw_reply(c, out, (size_t)n);
	} else if (c->verdict == GW_DENIED || c->cut) {
		/* A transparent client spoke to what it thought was the server:
		 * reset rather than close, so it sees "connection reset", not a
		 * server that hung up after accepting. */
		struct linger rst = {.l_onoff = 1, .l_linger = 0};
		setsockopt(c->client.fd, SOL_SOCKET, SO_LINGER, &rst, sizeof(rst));
	}
}

/* A connection's sockets are this process's alone (the gateway forks
 * nothing once it serves, and passes no descriptor on): their close takes
 * them out of the epoll set, with no epoll_ctl of ours. */
static void close_side(struct side *s)
{
	if (s->w) {
		al_watch_close(TAKE_PTR(s->w));
		s->fd = -1;
	}
	al_closep(&s->fd);
}

void gw_conn_close(struct conn *c, const char *end_reason)
{
	struct al_gateway *gw = c->gw;

	switch (c->verdict) {
	case GW_ALLOWED:
		gw->st.allowed++;
		gw->st.cut += c->cut;
		audit_decision(c, c->cut ? "cut" : "allow", c->cut ? c->reason : NULL);
		break;
	case GW_FAILED:
		gw->st.allowed++;
		gw->st.failed++;
		audit_decision(c, "allow", c->reason);
		break;
	case GW_DENIED:
		gw->st.denied++;
		audit_decision(c, "deny", c->reason);
		break;
	case GW_UNDECIDED:
		/* Gone before asking anything, a DNS query (audited as such),
		 * or still asking when the run ended. */
		if (end_reason)
			audit_decision(c, "deny", end_reason);
		break;
	}
	answer(c);
	if (c->use) {
		c->use->active--;
		gw->active--;
		if (gw->usage) {
			struct al_gateway_usage u = {
			    .requests = 1, .bytes_up = c->up.bytes, .bytes_down = c->down.bytes};
			snprintf(u.host, sizeof(u.host), "%s", c->use->name);
			gw->usage(gw->usage_data, &u);
		}
	}
	gw_ask_free(c);
	gw_filter_free(c);
	close_side(&c->client);
	close_side(&c->upstream);
	gw_flows_close(c);
	if (c->prev)
		c->prev->next = c->next;
	else
		gw->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	gw->n_conns--;
	if (c->resolving) {
		c->abandoned = true; /* the resolver still holds c */
		return;
	}
	free(c);
}

/* Read more of the client's first bytes into c->head: 1 when some came,
 * 0 to wait, -1 when the client is gone. A head stage that waits is
 * watched for more (gw_conn_run). */
static int read_head(struct conn *c)
{
	ssize_t n;

	if (c->head_len == sizeof(c->head))
		return -1; /* each head stage refuses a full head before it reads again */
	n = recv(c->client.fd, c->head + c->head_len, sizeof(c->head) - c->head_len, MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n <= 0)
		return -1;
	c->head_len += (size_t)n;
	return 1;
}

static enum gw_step head_http(struct conn *c)
{
	struct al_http_request req;
	struct al_error err = {0};
	int r = read_head(c);

	if (r <= 0)
		return r < 0 ? GW_CLOSE : GW_WAIT;
	r = al_http_parse_request(c->head, c->head_len, &req, &err);
	if (r == -EAGAIN) {
		if (c->head_len == sizeof(c->head))
			return gw_deny(c, GW_ANSWER_DEFAULT, 431, 0, "request head too large");
		return GW_WAIT;
	}
	if (r < 0)
		return gw_deny(c, GW_ANSWER_DEFAULT, al_http_status_for_error(r), 0, "%s", err.msg);
	c->is_connect = req.is_connect;
	c->check_first = req.is_connect && req.host.kind == AL_HOST_NAME;
	c->have_request = !req.is_connect;
	c->method = req.method;
	c->req_path = req.path;
	if (req.is_connect)
		gw_buf_put(&c->up.b, c->head + req.head_len, c->head_len - req.head_len);
	c->target = req.host;
	c->port = req.port;
	return GW_NEXT;
}

enum gw_step gw_http_forward(struct conn *c)
{
	struct al_http_request req;
	char out[AL_HTTP_HEAD_MAX + 512];

	if (al_http_parse_request(c->head, c->head_len, &req, NULL) <= 0)
		return gw_deny(c, GW_ANSWER_DEFAULT, 400, 0, "cannot forward this request");
	/* One request per connection upstream: a second request on the same
	 * connection could name another host behind the same server. */
	if (req.chunked)
		/* Its end can only be found by parsing the body; refuse it
		 * rather than relay bytes past it unchecked. */
		return gw_deny(c, GW_ANSWER_DEFAULT, 501, 0,
			       "chunked request bodies are not relayed by the proxy");
	int n = al_http_format_upstream(c->head, &req, AL_HTTP_UPSTREAM_CLOSE, out, sizeof(out));
	if (n < 0)
		return gw_deny(c, GW_ANSWER_DEFAULT, 400, 0, "cannot forward this request");
	gw_buf_put(&c->up.b, out, (size_t)n);
	/* Exactly this request's body follows, nothing after it: a
	 * pipelined second request could name another host. */
	c->up_limited = true;
	c->up_left = req.content_length > 0 ? (uint64_t)req.content_length : 0;
	size_t body = c->head_len - req.head_len;
	if (body > c->up_left)
		body = (size_t)c->up_left;
	gw_buf_put(&c->up.b, c->head + req.head_len, body);
	c->up_left -= body;
	return GW_NEXT;
}

static enum gw_step head_socks(struct conn *c)
{
	struct al_error err = {0};
	int n, r = read_head(c);

	if (r <= 0)
		return r < 0 ? GW_CLOSE : GW_WAIT;
	if (!c->socks_greeted) {
		struct al_socks_greeting g;
		uint8_t out[4];
		n = al_socks_parse_greeting((const uint8_t *)c->head, c->head_len, &g, &err);
		if (n == -EAGAIN)
			return GW_WAIT;
		if (n < 0)
			return gw_deny(c, GW_ANSWER_NONE, 0, 0, "%s", err.msg);
		int m = al_socks_format_method_reply(&g, out, sizeof(out));
		if (m > 0)
			gw_reply(c, out, (size_t)m);
		if (!g.no_auth)
			return gw_deny(c, GW_ANSWER_NONE, 0, 0,
				       "SOCKS client offers no method we accept");
		memmove(c->head, c->head + n, c->head_len - (size_t)n);
		c->head_len -= (size_t)n;
		c->socks_greeted = true;
	}
	struct al_socks_request req;
	n = al_socks_parse_request((const uint8_t *)c->head, c->head_len, &req, &err);
	if (n == -EAGAIN)
		return GW_WAIT;
	if (n < 0)
		return gw_deny(c, GW_ANSWER_DEFAULT, 0, (uint8_t)al_socks_reply_code_for_error(n),
			       "%s", err.msg);
	if (req.cmd != AL_SOCKS_CMD_CONNECT)
		return gw_deny(c, GW_ANSWER_DEFAULT, 0, AL_SOCKS_REP_CMD_NOT_SUPPORTED,
			       "only SOCKS CONNECT is served");
	gw_buf_put(&c->up.b, c->head + n, c->head_len - (size_t)n);
	/* As for CONNECT: what the client then says must name this host. */
	c->check_first = req.host.kind == AL_HOST_NAME;
	c->target = req.host;
	c->port = req.port;
	return GW_NEXT;
}

/* A redirected connection: its original destination is either a fake
 * address the DNS stub handed out (so we know the name) or an address the
 * code had on its own — allowed as a literal, or by the name its first
 * bytes give (TLS SNI, HTTP Host); then the gateway connects to its own
 * resolution of that name, not to this address. */
static enum gw_step head_transparent(struct conn *c)
{
	struct al_gateway *gw = c->gw;

	if (!c->orig_read) {
		struct sockaddr_in orig;
		socklen_t len = sizeof(orig);
		const char *name;

		c->orig_read = true;
		if (getsockopt(c->client.fd, SOL_IP, SO_ORIGINAL_DST, &orig, &len) < 0)
			return gw_deny(c, GW_ANSWER_NONE, 0, 0, "no original destination");
		c->port = ntohs(orig.sin_port);
		if ((name = gw_fake_name(gw, ntohl(orig.sin_addr.s_addr)))) {
			c->target.kind = AL_HOST_NAME;
			snprintf(c->target.text, sizeof(c->target.text), "%s", name);
			c->check_first = true;
			return GW_NEXT;
		}
		al_addr_from_ipv4((const uint8_t *)&orig.sin_addr, &c->orig);
		if (al_allow_match_addr(gw->plan->allow, &c->orig, c->port, NULL)) {
			c->target.kind = AL_HOST_IPV4;
			c->target.addr = c->orig;
			al_addr_format(&c->orig, c->target.text, sizeof(c->target.text));
			return GW_NEXT;
		}
	}
	/* Peek: read the name from the first bytes. */
	int r = read_head(c);
	if (r <= 0)
		return r < 0 ? GW_CLOSE : GW_WAIT;
	r = gw_name_in_stream(c->head, c->head_len, &c->target);
	if (r == -EAGAIN && c->head_len == sizeof(c->head))
		r = -EPROTO; /* a record that claims more than we hold: cannot be checked */
	if (r == -EAGAIN)
		return GW_WAIT;
	if (r < 0) {
		al_addr_format(&c->orig, c->name, sizeof(c->name));
		return gw_deny(c, GW_ANSWER_DEFAULT, 0, 0,
			       "no rule allows %s:%u, and the stream names no host%s", c->name,
			       c->port, r == -EPROTO ? " that can be checked" : "");
	}
	gw_buf_put(&c->up.b, c->head, c->head_len);
	return GW_NEXT;
}

static enum gw_step stage(struct conn *c, struct side *s, uint32_t events)
{
	switch (c->stage) {
	case GW_HEAD:
		switch (c->path) {
		case GW_PATH_HTTP:
			return head_http(c);
		case GW_PATH_SOCKS:
			return head_socks(c);
		case GW_PATH_TRANSPARENT:
			return head_transparent(c);
		case GW_PATH_DNS_TCP:
			return gw_head_dns_tcp(c);
		}
		break;
	case GW_DECIDE:
		return gw_stage_decide(c);
	case GW_ASK:
		return gw_stage_ask(c);
	case GW_RESOLVE:
		return gw_stage_resolve(c);
	case GW_CONNECT:
		return gw_stage_connect(c, s, events);
	case GW_INSPECT:
		return gw_stage_inspect(c, s, events);
	case GW_CHOOSE:
		return gw_stage_choose(c, s, events);
	case GW_STREAM:
		return c->stream->pump(c, s, events);
	}
	return GW_CLOSE;
}

void gw_conn_run(struct conn *c, struct side *s, uint32_t events)
{
	enum gw_step r;

	if (c->in_dispatch)
		return; /* the resolver answered inside the resolve stage */
	c->in_dispatch = true;
	while ((r = stage(c, s, events)) == GW_NEXT && c->stage < GW_STREAM) {
		c->stage++;
		s = NULL;
		events = 0;
	}
	c->in_dispatch = false;
	if (r == GW_CLOSE)
		gw_conn_close(c, NULL);
	else if (r == GW_WAIT && c->stage == GW_HEAD)
		/* Every head stage waits for more of the client's bytes. Only
		 * then is the client watched: a head that came whole with the
		 * accept (the usual case) costs no epoll_ctl, and every later
		 * stage says itself what it waits for. */
		gw_side_set(&c->client, EPOLLIN);
}

static void on_side(struct al_watch *w, uint32_t events, void *data)
{
	struct side *s = data;

	(void)w;
	gw_conn_run(s->c, s, events);
}

void gw_accept(struct al_gateway *gw, enum al_gateway_listener kind, int lfd)
{
	int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	struct conn *c;

	if (fd < 0) {
		if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
			gw_accept_pause(gw);
		return;
	}
	if (gw->peer_diag >= 0) {
		uid_t uid = (uid_t)-1;
		int r = gw_peer_uid(gw->peer_diag, fd, &uid);
		if (r < 0 || uid != gw->peer_uid) {
			char why[96];
			if (r < 0)
				snprintf(why, sizeof(why), "its owner could not be read (%s)",
					 strerrorname_np(-r));
			else
				snprintf(why, sizeof(why), "its socket belongs to uid %u",
					 (unsigned)uid);
			close(fd);
			gw->st.denied++;
			al_audit_emit(gw->audit, "net.connect",
				      json_pack("{s:s, s:s, s:s}", "decision", "deny", "reason",
						"not the run's: a client of another user", "peer",
						why));
			return;
		}
	}
	if (gw->n_conns >= AL_GW_MAX_CONNS) {
		close(fd);
		gw->st.denied++;
		al_audit_emit(gw->audit, "net.connect",
			      json_pack("{s:s, s:s}", "decision", "deny", "reason",
					"too many concurrent connections"));
		return;
	}
	c = xcalloc(1, sizeof(*c));
	c->gw = gw;
	c->path = kind == AL_GATEWAY_SOCKS	   ? GW_PATH_SOCKS
		  : kind == AL_GATEWAY_DNS_TCP	   ? GW_PATH_DNS_TCP
		  : kind == AL_GATEWAY_TRANSPARENT ? GW_PATH_TRANSPARENT
						   : GW_PATH_HTTP;
	c->stream = &gw_stream_splice;
	c->up.pipe[0] = c->up.pipe[1] = c->down.pipe[0] = c->down.pipe[1] = -1;
	c->client = (struct side){.c = c, .fd = fd};
	c->upstream = (struct side){.c = c, .fd = -1};
	c->client.w = al_loop_add(gw->loop, fd, 0, on_side, &c->client);
	if (!c->client.w) {
		close(fd);
		free(c);
		return;
	}
	c->next = gw->conns;
	if (gw->conns)
		gw->conns->prev = c;
	gw->conns = c;
	gw->n_conns++;
	/* The listener defers the accept until the client has spoken, so its
	 * request is usually here already: read it now, not after a round
	 * through the loop. */
	gw_conn_run(c, &c->client, EPOLLIN);
}

int gw_side_open(struct conn *c, struct side *s, int fd, uint32_t events)
{
	s->fd = fd;
	s->w = al_loop_add(c->gw->loop, fd, events, on_side, s);
	return s->w ? 0 : -errno;
}
