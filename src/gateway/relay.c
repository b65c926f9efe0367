/* Upstream: the connect stage, and the stream stage's two implementations,
 * which move bytes both ways within the network limits. The splice relay
 * passes small transfers (and everything the gateway wrote or inspected)
 * through user space and a direction that has moved more than BULK bytes
 * through a pipe with splice(2), so the payload is never copied; the copy
 * stream keeps everything in user space (where the kernel gives no pipe). */
#include "gateway/conn.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "gateway/socks.h"

#define PIPE_CAP (1u << 20)
/* A direction turns to splice() once it has moved this much: a short
 * request and its answer never pay for two pipes. */
#define BULK AL_GW_BUF_SIZE

/* Connect to c->dest: 1 when done (or failed) at once, 0 while in
 * progress (EPOLLOUT tells), or -errno. */
static int start_connect(struct conn *c)
{
	struct sockaddr_storage ss = {0};
	socklen_t len;
	int fd;

	if (IN6_IS_ADDR_V4MAPPED(&c->dest)) {
		struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
		sin->sin_family = AF_INET;
		sin->sin_port = htons(c->port);
		memcpy(&sin->sin_addr, &c->dest.s6_addr[12], 4);
		len = sizeof(*sin);
	} else {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(c->port);
		sin6->sin6_addr = c->dest;
		len = sizeof(*sin6);
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&ss, len) < 0 && errno != EINPROGRESS) {
		int e = errno;
		close(fd);
		return -e;
	}
	if (gw_side_open(c, &c->upstream, fd, 0) < 0) {
		close(fd);
		c->upstream.fd = -1;
		return -ENOMEM;
	}
	c->connecting = true;
	/* To a nearby server the handshake is often done by now: go on
	 * without a round through the loop. */
	struct pollfd p = {.fd = fd, .events = POLLOUT};
	if (poll(&p, 1, 0) == 1) {
		/* Writable with no error or hang-up: connected, and
		 * connected() need not ask SO_ERROR. */
		c->connect_ok = !(p.revents & (POLLERR | POLLHUP | POLLNVAL));
		return 1;
	}
	gw_side_set(&c->client, 0);
	gw_side_set(&c->upstream, EPOLLOUT);
	return 0;
}

static enum gw_step failed(struct conn *c, int http_status, uint8_t socks_code, const char *why,
			   const char *answer_text)
{
	c->answer_text = answer_text;
	c->verdict = GW_FAILED;
	c->answer = GW_ANSWER_DEFAULT;
	c->http_status = http_status;
	c->socks_code = socks_code;
	snprintf(c->reason, sizeof(c->reason), "%s", why);
	return GW_CLOSE;
}

/* The handshake is over: did it work? Then tell the client (SOCKS, HTTP
 * CONNECT; a transparent client learns by the stream itself). */
static enum gw_step connected(struct conn *c)
{
	int e = 0;
	socklen_t len = sizeof(e);

	c->connecting = false;
	if (!c->connect_ok && getsockopt(c->upstream.fd, SOL_SOCKET, SO_ERROR, &e, &len) < 0)
		e = errno;
	if (e)
		return failed(c, 502,
			      e == ECONNREFUSED ? AL_SOCKS_REP_REFUSED
						: AL_SOCKS_REP_HOST_UNREACHABLE,
			      strerror(e), NULL);
	if (c->path == GW_PATH_SOCKS) {
		uint8_t out[AL_SOCKS_REPLY_MAX];
		struct in6_addr any = IN6ADDR_ANY_INIT;
		int n = al_socks_format_reply(AL_SOCKS_REP_SUCCEEDED, &any, 0, out, sizeof(out));
		if (n > 0)
			gw_reply(c, out, (size_t)n); /* ours, not upstream bytes */
	} else if (c->is_connect) {
		char out[128];
		int n = al_http_format_connect_ok(out, sizeof(out));
		if (n > 0)
			gw_reply(c, out, (size_t)n); /* ours, not upstream bytes */
	}
	return GW_NEXT;
}

enum gw_step gw_stage_connect(struct conn *c, struct side *s, uint32_t events)
{
	(void)events;
	if (c->connecting)
		return s == &c->upstream ? connected(c) : GW_WAIT; /* the client waits */
	al_addr_format(&c->dest, c->addr, sizeof(c->addr));
	/* Each stage before checked where its address came from; this is
	 * the one place every address passes on its way to connect(). */
	const struct al_allow_rule *never = gw_never_addr(c->gw, &c->dest, c->port);
	if (never)
		return gw_deny_never(c, c->addr, never);
	c->verdict = GW_ALLOWED;
	int r = start_connect(c);
	if (r < 0)
		return failed(c, 502, AL_SOCKS_REP_HOST_UNREACHABLE, "could not connect",
			      "could not connect upstream");
	return r > 0 ? connected(c) : GW_WAIT;
}

void gw_flows_close(struct conn *c)
{
	for (size_t i = 0; i < 2; i++) {
		al_closep(&c->up.pipe[i]);
		al_closep(&c->down.pipe[i]);
	}
}

static int open_pipe(struct flow *f)
{
	if (pipe2(f->pipe, O_NONBLOCK | O_CLOEXEC) < 0)
		return -errno;
	/* Bigger pipes, fewer wake-ups; the kernel may cap the size. */
	fcntl(f->pipe[1], F_SETPIPE_SZ, PIPE_CAP);
	int n = fcntl(f->pipe[1], F_GETPIPE_SZ);
	if (n <= 0) {
		al_closep(&f->pipe[0]);
		al_closep(&f->pipe[1]);
		return -EIO;
	}
	f->pipe_cap = (size_t)n;
	return 0;
}

static bool flow_spliced(const struct flow *f)
{
	return f->pipe[0] >= 0;
}

bool gw_flow_has_room(const struct flow *f)
{
	return flow_spliced(f) ? !f->pipe_full && f->in_pipe < f->pipe_cap
			       : f->b.off + f->b.len < AL_GW_BUF_SIZE;
}

bool gw_flow_waiting(const struct flow *f)
{
	return f->b.len || f->in_pipe;
}

/* Send what waits in the buffer, at most *budget. False when broken. */
static bool flush_buf(struct flow *f, struct side *to, uint64_t *budget)
{
	struct buf *b = &f->b;
	size_t want = b->len < *budget ? b->len : (size_t)*budget;
	ssize_t n;

	if (!want)
		return true;
	n = send(to->fd, b->data + b->off, want, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR;
	b->off += (size_t)n;
	b->len -= (size_t)n;
	f->bytes += (uint64_t)n;
	*budget -= (uint64_t)n;
	if (b->len == 0)
		b->off = 0;
	return true;
}

/* Move bytes one way: first what waits in the buffer (generated replies,
 * inspected heads, small transfers), then, once the flow is bulk and the
 * stream splices, straight from socket to socket through a pipe. At most
 * budget bytes go to `to`; at most *read_cap are taken from `from`. False
 * when the connection is broken. */
static bool pump(struct conn *c, struct flow *f, struct side *from, struct side *to,
		 uint64_t budget, uint64_t *read_cap, uint32_t events_from, uint32_t events_to)
{
	const unsigned flags = SPLICE_F_NONBLOCK | SPLICE_F_MOVE;
	/* EPOLLERR/EPOLLHUP come without EPOLLOUT: try, and let the send fail. */
	bool can_write = (events_to & (EPOLLOUT | EPOLLERR | EPOLLHUP)) || events_to == 0;
	struct buf *b = &f->b;
	ssize_t n;

	if (can_write && !flush_buf(f, to, &budget))
		return false;
	if (c->stream->splice && !flow_spliced(f) && !from->eof && f->bytes + b->len >= BULK &&
	    open_pipe(f) < 0) {
		al_debug("gateway: no pipe for splice, copying");
		c->stream = &gw_stream_copy;
	}
	size_t room = flow_spliced(f) ? f->pipe_cap - f->in_pipe : AL_GW_BUF_SIZE - b->off - b->len;
	if (read_cap && *read_cap < room)
		room = (size_t)*read_cap;
	if ((events_from & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !from->eof && room) {
		if (flow_spliced(f))
			n = splice(from->fd, NULL, f->pipe[1], NULL, room, flags);
		else
			n = recv(from->fd, b->data + b->off + b->len, room, MSG_DONTWAIT);
		if (n > 0 && f == &c->up && c->scanning && !flow_spliced(f) &&
		    (c->scan_hit =
			 al_needle_scan_feed(&c->scan, b->data + b->off + b->len, (size_t)n)) >= 0)
			return false; /* stream_pump refuses it */
		if (n > 0) {
			if (flow_spliced(f))
				f->in_pipe += (size_t)n;
			else
				b->len += (size_t)n;
			if (read_cap)
				*read_cap -= (uint64_t)n;
		} else if (n == 0) {
			from->eof = true;
		} else if (errno == EAGAIN && flow_spliced(f) && f->in_pipe) {
			/* Readable, yet nothing fits: many small packets took
			 * every pipe buffer. Stop reading until it drains. */
			f->pipe_full = true;
		} else if (errno != EAGAIN && errno != EINTR) {
			return false;
		}
	}
	if (can_write && !flush_buf(f, to, &budget))
		return false;
	/* Pipe bytes are newer than buffered ones: only once those are out. */
	if (!b->len && f->in_pipe && budget && can_write) {
		size_t want = f->in_pipe < budget ? f->in_pipe : (size_t)budget;
		n = splice(f->pipe[0], NULL, to->fd, NULL, want, flags);
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return false;
		if (n > 0) {
			f->in_pipe -= (size_t)n;
			f->bytes += (uint64_t)n;
			f->pipe_full = false;
		}
	}
	return true;
}

/* A half-close goes on to the other side once everything before it has:
 * the client's to the server and back, as a tunnel must. The end of a
 * proxied request's body does not: like other proxies, keep the upstream
 * write side open, since some servers take a half-close as an aborted
 * request. */
static void half_close(const struct flow *f, const struct side *from, struct side *to)
{
	if (from->eof && !gw_flow_waiting(f) && !to->shut) {
		shutdown(to->fd, SHUT_WR);
		to->shut = true;
	}
}

enum gw_step gw_relay_move(struct conn *c, uint32_t ce, uint32_t ue, bool hold)
{
	struct al_gateway *gw = c->gw;
	const struct al_net_limits *run = &gw->plan->net_run, *host = &gw->plan->net_host;
	uint64_t budget = UINT64_MAX;

	if (run->bytes_out)
		budget = run->bytes_out > gw->st.bytes_up ? run->bytes_out - gw->st.bytes_up : 0;
	if (c->use && host->bytes_out) {
		uint64_t h =
		    host->bytes_out > c->use->bytes_out ? host->bytes_out - c->use->bytes_out : 0;
		budget = h < budget ? h : budget;
	}
	/* Priced egress: no more goes out than the spend budget pays for. */
	uint64_t paid = gw_budget_egress_allowance(gw);
	budget = paid < budget ? paid : budget;
	uint64_t up0 = c->up.bytes, down0 = c->down.bytes;
	/* While held, nothing goes upstream and nothing more is taken from
	 * the client. */
	bool ok = pump(c, &c->up, &c->client, &c->upstream, hold ? 0 : budget,
		       c->up_limited ? &c->up_left : NULL, hold ? 0 : ce, ue) &&
		  pump(c, &c->down, &c->upstream, &c->client, UINT64_MAX, NULL, ue, ce);
	gw->st.bytes_up += c->up.bytes - up0;
	gw->st.bytes_down += c->down.bytes - down0;
	if (c->use)
		c->use->bytes_out += c->up.bytes - up0;
	if (c->up.bytes > up0)
		gw_budget_charge(gw, c->name, 0, c->up.bytes - up0); /* within the allowance */
	if (!ok)
		return GW_CLOSE;
	if (!paid && gw_flow_waiting(&c->up)) {
		gw_budget_charge(gw, c->name, 0, 1); /* says the budget is spent */
		gw_audit_limit(c, "limits.budget");
		return GW_CLOSE;
	}
	/* Out of budget with bytes still waiting: the limit is hit. */
	const char *limit = !gw_flow_waiting(&c->up) ? NULL
			    : run->bytes_out && gw->st.bytes_up >= run->bytes_out
				? "network.limits.bytes_out"
			    : c->use && host->bytes_out && c->use->bytes_out >= host->bytes_out
				? "network.per_host.bytes_out"
				: NULL;
	if (limit) {
		gw_audit_limit(c, limit);
		return GW_CLOSE;
	}
	bool up_waiting = gw_flow_waiting(&c->up), down_waiting = gw_flow_waiting(&c->down);
	bool client_done = c->client.eof || (c->up_limited && !c->up_left);
	if (client_done && c->upstream.eof && !up_waiting && !down_waiting) {
		/* FIN before the close: a client whose further bytes we did
		 * not read then sees the answer and an end, not a reset. */
		if (!c->client.shut)
			shutdown(c->client.fd, SHUT_WR);
		return GW_CLOSE;
	}
	half_close(&c->up, &c->client, &c->upstream);
	half_close(&c->down, &c->upstream, &c->client);
	bool client_read = !client_done && (hold ? c->up.b.off + c->up.b.len < AL_GW_BUF_SIZE
						 : gw_flow_has_room(&c->up));
	gw_side_set(&c->client, (client_read ? EPOLLIN : 0) | (down_waiting ? EPOLLOUT : 0));
	gw_side_set(&c->upstream, (!c->upstream.eof && gw_flow_has_room(&c->down) ? EPOLLIN : 0) |
				      (up_waiting && !hold ? EPOLLOUT : 0));
	return GW_WAIT;
}

/* Right after connect (or inspect) the stage runs without an event: flush
 * what waits both ways, as if the upstream had just become writable. */
static enum gw_step stream_pump(struct conn *c, struct side *s, uint32_t events)
{
	uint32_t ce = s == &c->client ? events : 0;
	uint32_t ue = s == &c->upstream ? events : s ? 0 : EPOLLOUT;

	c->scan_hit = -1;
	enum gw_step r = gw_relay_move(c, ce, ue, false);
	if (r == GW_CLOSE && c->scan_hit >= 0)
		return gw_deny_misuse(c, (size_t)c->scan_hit, "stream");
	return r;
}

const struct gw_stream_ops gw_stream_splice = {"splice", true, stream_pump};
const struct gw_stream_ops gw_stream_copy = {"copy", false, stream_pump};
