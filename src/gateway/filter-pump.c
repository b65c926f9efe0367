/* The filtered stream's bytes (filter.c has the filter): the client's
 * into the filter, its output to the upstream, the upstream's answers back,
 * in plain HTTP or through the two TLS ends of an intercepted connection;
 * then the end of each side, and a refusal's own answer. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/log.h"
#include "cred/store.h"
#include "gateway/filter-internal.h"
#include "tls/end.h"

/* Send what b holds to fd, at most max bytes: false when the peer is
 * gone. */
static bool fb_flush_max(struct fbuf *b, int fd, uint64_t *count, uint64_t max)
{
	while (b->len && max) {
		size_t want = b->len < max ? b->len : (size_t)max;
		ssize_t n = send(fd, b->d + b->off, want, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0)
			return errno == EAGAIN || errno == EINTR;
		fb_take(b, (size_t)n);
		max -= (uint64_t)n;
		if (count)
			*count += (uint64_t)n;
	}
	return true;
}

/* Send what b holds to fd: false when the peer is gone. */
static bool fb_flush(struct fbuf *b, int fd, uint64_t *count)
{
	while (b->len) {
		ssize_t n = send(fd, b->d + b->off, b->len, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0)
			return errno == EAGAIN || errno == EINTR;
		fb_take(b, (size_t)n);
		if (count)
			*count += (uint64_t)n;
	}
	return true;
}

/* Read from fd into b: 1 read, 0 nothing now, -1 end or error. */
static int fb_fill(struct fbuf *b, int fd, size_t max)
{
	size_t want = fb_room(b);

	if (!want) {
		fb_compact(b);
		want = fb_room(b);
	}
	if (max < want)
		want = max;
	if (!want)
		return 0;
	ssize_t n = recv(fd, b->d + b->off + b->len, want, MSG_DONTWAIT);
	if (n > 0) {
		b->len += (size_t)n;
		return 1;
	}
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	return -1;
}

/* Ciphertext an end has to send into out, and out to the socket;
 * *moved (may be NULL) is set when some was taken from the end. */
static bool cipher_out_moved(struct al_tls_end *e, struct fbuf *out, int fd, bool *moved)
{
	for (;;) {
		if (fb_room(out) < FBUF / 2)
			fb_compact(out);
		ssize_t n = al_tls_end_get_cipher(e, out->d + out->off + out->len, fb_room(out));
		if (n <= 0)
			break;
		out->len += (size_t)n;
		if (moved)
			*moved = true;
		if (!fb_flush(out, fd, NULL))
			return false;
	}
	return fb_flush(out, fd, NULL);
}

static bool cipher_out(struct al_tls_end *e, struct fbuf *out, int fd)
{
	return cipher_out_moved(e, out, fd, NULL);
}

/* Ciphertext from the socket into an end: 1 took some, 0 none, -1 end. */
static int cipher_in(struct al_tls_end *e, int fd)
{
	char buf[FBUF];
	size_t want = al_tls_end_cipher_room(e);

	if (!want)
		return 0;
	if (want > sizeof(buf))
		want = sizeof(buf);
	ssize_t n = recv(fd, buf, want, MSG_DONTWAIT);
	if (n > 0)
		return al_tls_end_put_cipher(e, buf, (size_t)n) == 0 ? 1 : -1;
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	return -1;
}

/* Plaintext an end read into b: 1 some, 0 none now, -1 closed, -2 failed. */
static int plain_in(struct al_tls_end *e, struct fbuf *b)
{
	if (fb_room(b) < FBUF / 4)
		fb_compact(b);
	if (!fb_room(b))
		return 0;
	ssize_t n = al_tls_end_read(e, b->d + b->off + b->len, fb_room(b));
	if (n > 0) {
		b->len += (size_t)n;
		return 1;
	}
	return n == 0 ? -1 : n == -EAGAIN ? 0 : -2;
}

/* Plaintext of b written into an end, at most max bytes: 1 some, 0 none
 * now, -2 failed. */
static int plain_out_max(struct al_tls_end *e, struct fbuf *b, uint64_t *count, uint64_t max)
{
	int moved = 0;

	while (b->len && max) {
		size_t want = b->len < RECORD_MAX ? b->len : RECORD_MAX;
		if (want > max)
			want = (size_t)max;
		ssize_t n = al_tls_end_write(e, b->d + b->off, want);
		if (n == -EAGAIN || n == 0)
			break;
		if (n < 0)
			return -2;
		fb_take(b, (size_t)n);
		*count += (uint64_t)n;
		max -= (uint64_t)n;
		moved = 1;
	}
	return moved;
}

static int plain_out(struct al_tls_end *e, struct fbuf *b, uint64_t *count)
{
	return plain_out_max(e, b, count, UINT64_MAX);
}

/* What network.limits.bytes_out and network.per_host.bytes_out still let
 * go up (as relay.c holds them); limit names the one that binds. */
static uint64_t up_allowance(const struct conn *c, const char **limit)
{
	const struct al_gateway *gw = c->gw;
	const struct al_net_limits *run = &gw->plan->net_run, *host = &gw->plan->net_host;
	uint64_t a = UINT64_MAX;

	*limit = NULL;
	if (run->bytes_out) {
		a = run->bytes_out > gw->st.bytes_up ? run->bytes_out - gw->st.bytes_up : 0;
		*limit = "network.limits.bytes_out";
	}
	if (c->use && host->bytes_out) {
		uint64_t h =
		    host->bytes_out > c->use->bytes_out ? host->bytes_out - c->use->bytes_out : 0;
		if (h < a) {
			a = h;
			*limit = "network.per_host.bytes_out";
		}
	}
	return a;
}

static enum gw_step tls_failed(struct conn *c, struct al_tls_end *e, const char *side)
{
	struct gw_filter *f = c->filter;
	const char *why = al_tls_end_error(e);

	/* The alert that says so goes out first; an upstream that failed
	 * its check is a 502 to a client whose own TLS is up. */
	if (e == f->cli && al_tls_end_handshake_done(f->srv) && !f->forwarded) {
		char out[512];
		int n = al_http_format_response(502, "the upstream's TLS failed", out, sizeof(out));
		if (n > 0 && al_tls_end_write(f->srv, out, (size_t)n) == n)
			al_tls_end_shutdown(f->srv);
	}
	cipher_out(f->srv, &f->c_out, c->client.fd);
	return gw_deny(c, GW_ANSWER_NONE, 0, 0, "TLS with the %s failed: %s", side,
		       why ? why : "(no reason given)");
}

/* The answer bytes not searched yet, searched (gateway/answer.h): a
 * value found, or an answer that cannot be searched, closes the
 * connection with nothing of it sent on. A possible start of a value
 * held back waits for the bytes that settle it, as long as they come
 * within GW_ANSWER_STALL_MS of each other. */
/* A verdict on the answers: found or unsearchable, the connection is
 * cut with nothing more of them sent on. */
static enum gw_step judged(struct conn *c, struct gw_filter *f, enum al_answer_verdict v,
			   const struct al_answer_out *out)
{
	switch (v) {
	case AL_ANSWER_OK:
		break;
	case AL_ANSWER_FOUND:
		f->down.len = 0;
		gw_answer_misuse(c->gw, out->id, "answer", c->name, c->port);
		return gw_cut(c, GW_ANSWER_NONE, 0, 0,
			      "the answer from %s holds the value of secret %s", c->name,
			      c->gw->cred->v[out->id].ps->def->name);
	case AL_ANSWER_BAD:
		f->down.len = 0;
		gw_answer_misuse(c->gw, -1, "answer that could not be searched", c->name, c->port);
		return gw_cut(c, GW_ANSWER_NONE, 0, 0,
			      "the answer from %s cannot be searched for the secrets that went "
			      "there: %s",
			      c->name, out->why);
	}
	return GW_WAIT;
}

static enum gw_step search(struct conn *c, struct gw_filter *f, bool fresh)
{
	struct al_answer_out out;
	enum gw_step st;

	if (!f->ans || f->answered)
		return GW_WAIT; /* after a refusal, f->down holds the gateway's own answer */
	uint64_t fed = al_answer_fed(f->ans) - f->down_out;
	if (f->down.len > fed && (st = judged(c, f,
					      al_answer_feed(f->ans, f->down.d + f->down.off + fed,
							     f->down.len - fed, &out),
					      &out)) != GW_WAIT)
		return st;
	if (c->upstream.eof && !f->up_ended) {
		/* The gateway cut the upstream (a refusal): what was held back
		 * goes nowhere. */
		uint64_t keep = al_answer_release(f->ans) - f->down_out;
		if (f->down.len > keep)
			f->down.len = (size_t)keep;
		return GW_WAIT;
	}
	if (c->upstream.eof && (st = judged(c, f, al_answer_end(f->ans, &out), &out)) != GW_WAIT)
		return st;
	bool holding = al_answer_release(f->ans) < al_answer_fed(f->ans);
	if (!holding || fresh) {
		if (f->stall_armed)
			al_timer_disarm(f->stall_timer);
		f->stall_armed = f->stalled = false;
	}
	if (holding && f->stalled) {
		f->down.len = 0;
		gw_answer_misuse(c->gw, -1, "answer stalled on what could be a secret", c->name,
				 c->port);
		return gw_cut(c, GW_ANSWER_NONE, 0, 0,
			      "the answer from %s stopped for %d s on what could be the start of "
			      "a secret's value",
			      c->name, GW_ANSWER_STALL_MS / 1000);
	}
	if (holding && !f->stall_armed &&
	    al_timer_arm(f->stall_timer, GW_ANSWER_STALL_MS, false) == 0)
		f->stall_armed = true;
	return GW_WAIT;
}

/* Move every byte that can move now; GW_CLOSE when a side broke. */
static enum gw_step move(struct conn *c, struct gw_filter *f, bool *progress)
{
	uint64_t up0 = c->up.bytes, down0 = c->down.bytes;
	int r;

	/* The client's bytes: first those read before, then the socket's. */
	gw_filter_early(c);
	if (!c->client.eof && !c->up.b.len) {
		if (f->srv) {
			if ((r = cipher_in(f->srv, c->client.fd)) < 0)
				c->client.eof = true;
			*progress |= r != 0;
			while ((r = plain_in(f->srv, &f->in)) > 0)
				*progress = true;
			if (r == -2)
				return tls_failed(c, f->srv, "sandbox");
			if (r == -1)
				c->client.eof = true;
		} else if (!f->refused) {
			if ((r = fb_fill(&f->in, c->client.fd, SIZE_MAX)) < 0)
				c->client.eof = true;
			*progress |= r != 0;
		}
	}
	if (f->refused)
		f->in.len = 0; /* nothing more is read for the upstream */
	else
		gw_filter_feed(c, f);
	/* The filter's output to the upstream, within the network limits. */
	if (!c->upstream.shut && f->up.len) {
		const char *limit;
		uint64_t allow = up_allowance(c, &limit);
		if (!allow) {
			gw_audit_limit(c, limit);
			return GW_CLOSE;
		}
		if (f->cli) {
			if ((r = plain_out_max(f->cli, &f->up, &c->up.bytes, allow)) == -2)
				return tls_failed(c, f->cli, "upstream");
			*progress |= r > 0;
		} else if (!fb_flush_max(&f->up, c->upstream.fd, &c->up.bytes, allow)) {
			return GW_CLOSE;
		}
	}
	if (f->cli && !cipher_out_moved(f->cli, &f->u_out, c->upstream.fd, progress))
		return GW_CLOSE;
	/* The upstream's answers. */
	size_t down_before = f->down.len;
	enum gw_step st;
	if (!c->upstream.eof) {
		if (f->cli) {
			if ((r = cipher_in(f->cli, c->upstream.fd)) < 0)
				c->upstream.eof = f->up_ended = true;
			*progress |= r != 0;
			while ((r = plain_in(f->cli, &f->down)) > 0)
				*progress = true;
			if (r == -2)
				return tls_failed(c, f->cli, "upstream");
			if (r == -1)
				c->upstream.eof = f->up_ended = true;
			/* What reading made the end say (its handshake's next
			 * flight) goes now, not when the sandbox next speaks. */
			if (!cipher_out_moved(f->cli, &f->u_out, c->upstream.fd, progress))
				return GW_CLOSE;
		} else {
			if ((r = fb_fill(&f->down, c->upstream.fd, SIZE_MAX)) < 0)
				c->upstream.eof = f->up_ended = true;
			*progress |= r != 0;
		}
	}
	if ((st = search(c, f, f->down.len > down_before)) != GW_WAIT)
		return st;
	uint64_t deliver =
	    f->ans && !f->answered ? al_answer_release(f->ans) - f->down_out : f->down.len;
	size_t down_len0 = f->down.len;
	if (f->srv) {
		if ((r = plain_out_max(f->srv, &f->down, &c->down.bytes, deliver)) == -2)
			return tls_failed(c, f->srv, "sandbox");
		*progress |= r > 0;
		if (!cipher_out_moved(f->srv, &f->c_out, c->client.fd, progress))
			return GW_CLOSE;
	} else if (!fb_flush_max(&f->down, c->client.fd, &c->down.bytes, deliver)) {
		return GW_CLOSE;
	}
	f->down_out += down_len0 - f->down.len;
	c->gw->st.bytes_up += c->up.bytes - up0;
	c->gw->st.bytes_down += c->down.bytes - down0;
	if (c->use)
		c->use->bytes_out += c->up.bytes - up0;
	return GW_WAIT;
}

/* A refused request's answer, once the answers before it have gone. */
static enum gw_step answer(struct conn *c, struct gw_filter *f)
{
	if (!f->answered && f->answer_len) {
		f->answered = true;
		if (f->srv) {
			struct fbuf *b = &f->down;
			fb_put(b, f->answer, f->answer_len);
			uint64_t n = 0;
			if (plain_out(f->srv, b, &n) == -2)
				return GW_CLOSE;
			al_tls_end_shutdown(f->srv);
			cipher_out(f->srv, &f->c_out, c->client.fd);
		} else {
			fb_put(&f->c_out, f->answer, f->answer_len);
		}
	}
	if (!fb_flush(&f->c_out, c->client.fd, NULL))
		return GW_CLOSE;
	if (f->c_out.len || f->down.len) {
		gw_side_set(&c->client, EPOLLOUT);
		gw_side_set(&c->upstream, 0);
		return GW_WAIT;
	}
	shutdown(c->client.fd, SHUT_WR);
	return GW_CLOSE;
}

static void half_close_upstream(struct conn *c, struct gw_filter *f)
{
	if (c->upstream.shut || f->up.len || f->u_out.len)
		return;
	if (f->cli) {
		al_tls_end_shutdown(f->cli);
		cipher_out(f->cli, &f->u_out, c->upstream.fd);
		if (f->u_out.len)
			return;
	}
	shutdown(c->upstream.fd, SHUT_WR);
	c->upstream.shut = true;
}

static enum gw_step filter_pump(struct conn *c, struct side *s, uint32_t events)
{
	struct gw_filter *f = c->filter;
	enum gw_step st;
	bool progress = true;

	(void)s;
	(void)events;
	for (int round = 0; progress && round < 32; round++) {
		progress = false;
		if ((st = move(c, f, &progress)) == GW_CLOSE)
			return st;
	}
	bool down_done = c->upstream.eof && !f->down.len && !f->c_out.len;
	if (f->refused && down_done)
		return answer(c, f);
	if (f->client_done || c->client.eof || f->refused)
		half_close_upstream(c, f);
	if (down_done) {
		/* The server closed: the client learns it (its next request
		 * would have nowhere to go). */
		if (f->srv) {
			al_tls_end_shutdown(f->srv);
			cipher_out(f->srv, &f->c_out, c->client.fd);
		}
		shutdown(c->client.fd, SHUT_WR);
		return GW_CLOSE;
	}
	/* Read a side only when there is room for what it sends: the loop
	 * is level-triggered. */
	bool client_in = !c->client.eof && (!f->refused || f->srv) && !c->up.b.len &&
			 (f->srv ? al_tls_end_cipher_room(f->srv) > 0 : f->in.len < FBUF);
	/* Answer bytes waiting (not only those held back): the client's room
	 * lets them on, through the server end too. */
	bool client_out =
	    f->c_out.len ||
	    (f->ans && !f->answered ? al_answer_release(f->ans) > f->down_out : f->down.len > 0);
	bool up_in =
	    !c->upstream.eof && (f->cli ? al_tls_end_cipher_room(f->cli) > 0 : f->down.len < FBUF);
	bool up_out = f->u_out.len || (!f->cli && f->up.len);
	gw_side_set(&c->client, (client_in ? EPOLLIN : 0) | (client_out ? EPOLLOUT : 0));
	gw_side_set(&c->upstream, (up_in ? EPOLLIN : 0) | (up_out ? EPOLLOUT : 0));
	return GW_WAIT;
}

const struct gw_stream_ops gw_stream_filter = {"filter", false, filter_pump};
