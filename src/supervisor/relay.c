/* One command's stdio relay (relay.h). */
#include "supervisor/relay.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"

#define CHUNK 65536

void al_relay_init(struct al_relay *r, struct al_loop *loop, const struct al_relay_ops *ops,
		   void *data, uint64_t cap, uint64_t *stdout_count, uint64_t *stderr_count,
		   size_t q_max)
{
	*r = (struct al_relay){.loop = loop,
			       .ops = ops,
			       .data = data,
			       .cap = cap,
			       .count = {stdout_count, stderr_count},
			       .in = -1,
			       .q_max = q_max};
	r->src[0].fd = r->src[1].fd = -1;
}

/* ---- output -------------------------------------------------------------- */

static void deliver(struct al_relay *r, int which, const char *buf, size_t len)
{
	struct al_relay_src *s = &r->src[which];

	if (!len)
		return;
	if (!s->filtered && !s->ttyf.answer) {
		r->ops->output(r->data, which, buf, len);
		return;
	}
	char clean[CHUNK + AL_TTY_HELD_MAX];
	size_t m = al_tty_filter(&s->ttyf, buf, len, clean);
	/* Not filtered (to a pipe or a file): the bytes pass as they are,
	 * the filter ran only to find the queries to answer. */
	if (!s->filtered)
		r->ops->output(r->data, which, buf, len);
	else if (m)
		r->ops->output(r->data, which, clean, m);
	if (s->ttyf.n_reply) {
		if (r->ops->replies)
			r->ops->replies(r->data, &s->ttyf);
		s->ttyf.n_reply = 0;
	}
}

static void on_out(struct al_watch *w, uint32_t events, void *data)
{
	struct al_relay *r = data;
	int which = w == r->src[1].w;
	char buf[CHUNK];
	ssize_t n = read(r->src[which].fd, buf, sizeof(buf));

	(void)events;
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		al_relay_out_close(r, which);
		if (r->ops->eof)
			r->ops->eof(r->data, which);
		return;
	}
	if (r->over)
		return; /* past the cap: drained until the command is stopped */
	if (r->ops->chunk)
		r->ops->chunk(r->data, which);
	uint64_t used = *r->count[0] + *r->count[1];
	size_t keep = (size_t)n;
	bool over = used + (uint64_t)n > r->cap;
	if (over) {
		keep = used < r->cap ? (size_t)(r->cap - used) : 0;
		r->over = true;
	}
	*r->count[which] += keep;
	deliver(r, which, buf, keep);
	if (over && r->ops->over)
		r->ops->over(r->data, which);
}

int al_relay_out(struct al_relay *r, int which, int fd, struct al_error *err)
{
	struct al_relay_src *s = &r->src[which];

	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	s->fd = fd;
	if (!(s->w = al_loop_add(r->loop, fd, EPOLLIN, on_out, r))) {
		int e = errno;
		al_closep(&s->fd);
		return al_error_setsys(err, e, "watching the command's %s",
				       which ? "stderr" : "stdout");
	}
	return 0;
}

void al_relay_out_pause(struct al_relay *r, int which, bool paused)
{
	if (r->src[which].w && al_watch_set(r->src[which].w, paused ? 0 : EPOLLIN) < 0)
		al_relay_out_close(r, which);
}

void al_relay_out_close(struct al_relay *r, int which)
{
	al_watch_removep(&r->src[which].w);
	al_closep(&r->src[which].fd);
}

bool al_relay_out_open(const struct al_relay *r, int which)
{
	return r->src[which].fd >= 0;
}

/* ---- stdin --------------------------------------------------------------- */

/* Its watch: room wanted while something waits, or when asked for. */
static void in_watch(struct al_relay *r)
{
	if (r->w_in)
		al_watch_set(r->w_in, r->q_len || r->want_room ? EPOLLOUT : 0);
}

static void on_in(struct al_watch *w, uint32_t events, void *data)
{
	struct al_relay *r = data;

	(void)w;
	(void)events;
	if (al_relay_in_flush(r) && r->ops->in_room)
		r->ops->in_room(r->data);
}

int al_relay_in(struct al_relay *r, int fd, struct al_error *err)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	r->in = fd;
	if (!(r->w_in = al_loop_add(r->loop, fd, 0, on_in, r))) {
		int e = errno;
		al_closep(&r->in);
		return al_error_setsys(err, e, "watching the command's stdin");
	}
	al_relay_in_flush(r); /* what was queued before it came */
	return 0;
}

int al_relay_in_push(struct al_relay *r, const void *buf, size_t len)
{
	if (r->closing)
		return -EPIPE;
	if (r->q_len + len > r->q_max)
		return -ENOBUFS;
	if (r->q_off) { /* what was written is dropped first */
		memmove(r->q, r->q + r->q_off, r->q_len);
		r->q_off = 0;
	}
	char *q = realloc(r->q, r->q_len + len + 1);
	if (!q)
		return -ENOMEM;
	r->q = q;
	memcpy(r->q + r->q_len, buf, len);
	r->q_len += len;
	return 0;
}

bool al_relay_in_flush(struct al_relay *r)
{
	while (r->q_len && r->in >= 0) {
		ssize_t n = write(r->in, r->q + r->q_off, r->q_len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n < 0) {
			/* The command closed its end: the rest is unwanted. */
			al_relay_in_drop(r);
			if (r->ops->in_gone)
				r->ops->in_gone(r->data);
			return false;
		}
		r->q_off += (size_t)n;
		r->q_len -= (size_t)n;
	}
	if (!r->q_len)
		r->q_off = 0;
	if (r->in >= 0 && !r->q_len && r->closing) {
		al_watch_removep(&r->w_in);
		al_closep(&r->in);
		return true;
	}
	in_watch(r);
	return r->q_len == 0;
}

size_t al_relay_in_pending(const struct al_relay *r)
{
	return r->q_len;
}

void al_relay_in_close(struct al_relay *r)
{
	r->closing = true;
	al_relay_in_flush(r);
}

void al_relay_in_want_room(struct al_relay *r, bool want)
{
	r->want_room = want;
	in_watch(r);
}

void al_relay_in_drop(struct al_relay *r)
{
	al_watch_removep(&r->w_in);
	al_closep(&r->in);
	r->q_len = r->q_off = 0;
	r->closing = true;
}

bool al_relay_in_open(const struct al_relay *r)
{
	return !r->closing;
}

void al_relay_close(struct al_relay *r)
{
	al_relay_out_close(r, 0);
	al_relay_out_close(r, 1);
	al_relay_in_drop(r);
	free(r->q);
	r->q = NULL;
}
