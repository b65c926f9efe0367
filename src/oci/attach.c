/* An exec tied to the caller's descriptors (attach.h). Descriptors are
 * not made non-blocking (they may be shared with an engine's): a read
 * comes only after the loop said it is readable, and a write of at most
 * PIPE_BUF bytes only after it said there is room. */
#include "oci/attach.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/sys.h"
#include "core/util.h"

#define RETRY_MS 20

static void on_out(struct al_watch *w, uint32_t events, void *data);
static void on_in(struct al_watch *w, uint32_t events, void *data);
static void on_retry(struct al_timer *t, uint64_t expirations, void *data);

void al_oci_attach_init(struct al_oci_attach *a, struct al_loop *loop, int in, int out, int err)
{
	*a = (struct al_oci_attach){.loop = loop, .in = in, .out = {out, err}};
	if (err >= 0 && err == out) {
		a->out[1] = -1;
		a->err_to_out = true;
	}
}

static void in_end(struct al_oci_attach *a)
{
	al_watch_removep(&a->w_in);
	a->in_done = true;
	if (a->x)
		al_exec_close_stdin(a->x);
}

/* Give what waits to the exec; false while its queue is full. */
static bool feed(struct al_oci_attach *a)
{
	if (!a->n_pend)
		return true;
	if (al_exec_stdin(a->x, a->pend, a->n_pend) < 0)
		return false;
	a->n_pend = 0;
	return true;
}

static void read_in(struct al_oci_attach *a)
{
	if (!feed(a)) {
		if (a->w_in)
			al_watch_set(a->w_in, 0);
		al_timer_arm(a->retry, RETRY_MS, false);
		return;
	}
	ssize_t n = read(a->in, a->pend, sizeof(a->pend));
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) { /* its end; EIO: a terminal's master closed */
		in_end(a);
		return;
	}
	a->n_pend = (size_t)n;
	if (!feed(a)) {
		if (a->w_in)
			al_watch_set(a->w_in, 0);
		al_timer_arm(a->retry, RETRY_MS, false);
	} else if (!a->w_in) {
		al_timer_arm(a->retry, 1, false); /* a file: read on */
	}
}

static void on_in(struct al_watch *w, uint32_t events, void *data)
{
	(void)w;
	(void)events;
	read_in(data);
}

static void on_retry(struct al_timer *t, uint64_t expirations, void *data)
{
	struct al_oci_attach *a = data;

	(void)t;
	(void)expirations;
	if (a->in_done || !a->x)
		return;
	if (!feed(a)) {
		al_timer_arm(a->retry, RETRY_MS, false);
		return;
	}
	if (a->w_in)
		al_watch_set(a->w_in, EPOLLIN);
	else
		read_in(a);
}

void al_oci_attach_start(struct al_oci_attach *a, struct al_exec *x)
{
	a->x = x;
	a->retry = al_loop_timer(a->loop, on_retry, a);
	if (a->in < 0 || !a->retry) {
		in_end(a);
		return;
	}
	a->w_in = al_loop_add(a->loop, a->in, EPOLLIN, on_in, a);
	if (!a->w_in) {
		if (errno == EPERM) /* a file, or /dev/null: read it as it is */
			al_timer_arm(a->retry, 1, false);
		else
			in_end(a);
	}
}

static void out_drop(struct al_oci_attach *a, int which)
{
	al_watch_removep(&a->w_out[which]);
	free(a->buf[which]);
	a->buf[which] = NULL;
	a->len[which] = 0;
	al_closep(&a->out[which]);
	if (a->held[which] && a->x)
		al_exec_output_hold(a->x, which, false);
	a->held[which] = false;
}

/* Write one piece of what waits (the loop said there is room). */
static void out_write(struct al_oci_attach *a, int which)
{
	size_t n = a->len[which] < PIPE_BUF ? a->len[which] : PIPE_BUF;
	ssize_t k = write(a->out[which], a->buf[which], n);

	if (k < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (k <= 0) { /* the reader is gone: what it would have read is dropped */
		out_drop(a, which);
		return;
	}
	memmove(a->buf[which], a->buf[which] + k, a->len[which] - (size_t)k);
	a->len[which] -= (size_t)k;
	if (a->len[which] == 0 && a->w_out[which])
		al_watch_set(a->w_out[which], 0);
	if (a->held[which] && a->len[which] < AL_OCI_OUT_MAX / 4 && a->x) {
		a->held[which] = false;
		al_exec_output_hold(a->x, which, false);
	}
}

static void on_out(struct al_watch *w, uint32_t events, void *data)
{
	struct al_oci_attach *a = data;
	int which = w == a->w_out[0] ? 0 : 1;

	(void)events;
	out_write(a, which);
}

void al_oci_attach_output(void *data, int which, const void *buf, size_t len)
{
	struct al_oci_attach *a = data;
	int to = which == 1 && a->err_to_out ? 0 : which;

	if (to < 0 || to > 1 || a->out[to] < 0)
		return;
	a->buf[to] = xrealloc(a->buf[to], a->len[to] + len);
	memcpy(a->buf[to] + a->len[to], buf, len);
	a->len[to] += len;
	if (!a->w_out[to]) {
		a->w_out[to] = al_loop_add(a->loop, a->out[to], EPOLLOUT, on_out, a);
		if (!a->w_out[to]) {
			/* A file (or /dev/null): written as it comes. */
			if (al_write_all(a->out[to], a->buf[to], a->len[to]) < 0)
				out_drop(a, to);
			else
				a->len[to] = 0;
			return;
		}
	} else {
		al_watch_set(a->w_out[to], EPOLLOUT);
	}
	if (a->len[to] > AL_OCI_OUT_MAX && !a->held[to] && a->x) {
		a->held[to] = true;
		al_exec_output_hold(a->x, which, true);
	}
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void al_oci_attach_drain(struct al_oci_attach *a, int ms)
{
	int64_t end = now_ms() + ms;

	for (int which = 0; which < 2; which++) {
		while (a->out[which] >= 0 && a->len[which]) {
			int64_t left = end - now_ms();
			struct pollfd pf = {.fd = a->out[which], .events = POLLOUT};
			if (left <= 0 || poll(&pf, 1, (int)left) <= 0)
				break;
			out_write(a, which);
		}
	}
}

void al_oci_attach_stop(struct al_oci_attach *a)
{
	al_watch_removep(&a->w_in);
	al_timer_freep(&a->retry);
	a->in_done = true;
	a->x = NULL;
}

void al_oci_attach_free(struct al_oci_attach *a)
{
	al_oci_attach_stop(a);
	for (int which = 0; which < 2; which++) {
		al_watch_removep(&a->w_out[which]);
		free(a->buf[which]);
		al_closep(&a->out[which]);
	}
	al_closep(&a->in);
}
