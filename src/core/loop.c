#include "core/loop.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/util.h"

#define BATCH 32

struct al_watch {
	struct al_loop *loop;
	int fd;
	uint32_t events;
	bool registered; /* in the epoll set (events may be 0 only when not) */
	bool dead;	 /* removed; freed after the batch */
	al_watch_fn fn;
	void *data;
	struct al_watch *prev, *next; /* the loop's live watches, or its dead ones */
};

struct al_timer {
	struct al_watch *w;
	int fd;
	al_timer_fn fn;
	void *data;
};

struct al_signals {
	struct al_watch *w;
	int fd;
	al_signal_fn fn;
	void *data;
};

struct al_loop {
	int epfd;
	int depth; /* dispatches running (a callback may dispatch again) */
	struct al_watch *live;
	struct al_watch *dead;
};

int al_loop_new(struct al_loop **ret, struct al_error *err)
{
	struct al_loop *l = xcalloc(1, sizeof(*l));

	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0) {
		int e = errno;
		free(l);
		return al_error_setsys(err, e, "epoll_create1");
	}
	*ret = l;
	return 0;
}

static void reap(struct al_loop *l)
{
	while (l->dead) {
		struct al_watch *w = l->dead;
		l->dead = w->next;
		free(w);
	}
}

void al_loop_free(struct al_loop *l)
{
	if (!l)
		return;
	while (l->live)
		al_watch_remove(l->live);
	reap(l);
	close(l->epfd);
	free(l);
}

int al_loop_fd(const struct al_loop *l)
{
	return l->epfd;
}

int al_loop_dispatch(struct al_loop *l, int timeout_ms)
{
	struct epoll_event evs[BATCH];
	int n = epoll_wait(l->epfd, evs, BATCH, timeout_ms);

	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	l->depth++;
	for (int i = 0; i < n; i++) {
		struct al_watch *w = evs[i].data.ptr;
		if (!w->dead)
			w->fn(w, evs[i].events, w->data);
	}
	/* Only the outermost dispatch frees: an outer batch may still hold
	 * events for watches removed in here. */
	if (--l->depth == 0)
		reap(l);
	return n;
}

struct al_watch *al_loop_add(struct al_loop *l, int fd, uint32_t events, al_watch_fn fn, void *data)
{
	struct al_watch *w = xcalloc(1, sizeof(*w));

	*w = (struct al_watch){.loop = l, .fd = fd, .fn = fn, .data = data};
	if (events && al_watch_set(w, events) < 0) {
		int e = errno;
		free(w);
		errno = e;
		return NULL;
	}
	w->next = l->live;
	if (l->live)
		l->live->prev = w;
	l->live = w;
	return w;
}

int al_watch_set(struct al_watch *w, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.ptr = w};
	int op;

	if (w->dead)
		return -EBADF;
	if (w->registered && events == w->events)
		return 0;
	if (!w->registered && !events)
		return 0;
	op = !events ? EPOLL_CTL_DEL : w->registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
	if (epoll_ctl(w->loop->epfd, op, w->fd, &ev) < 0 && op != EPOLL_CTL_DEL)
		return -errno;
	w->registered = events != 0;
	w->events = events;
	return 0;
}

uint32_t al_watch_events(const struct al_watch *w)
{
	return w->events;
}

int al_watch_fd(const struct al_watch *w)
{
	return w->fd;
}

static void unlink_watch(struct al_watch *w, bool deregister)
{
	struct al_loop *l;

	if (!w || w->dead)
		return;
	l = w->loop;
	if (deregister)
		al_watch_set(w, 0);
	if (w->prev)
		w->prev->next = w->next;
	else
		l->live = w->next;
	if (w->next)
		w->next->prev = w->prev;
	/* An event of this batch may still point at w. */
	w->dead = true;
	w->prev = NULL;
	w->next = l->dead;
	l->dead = w;
}

void al_watch_remove(struct al_watch *w)
{
	unlink_watch(w, true);
}

void al_watch_close(struct al_watch *w)
{
	int fd = w ? w->fd : -1;

	/* The close takes the fd's file out of the epoll set, when it is the
	 * last reference to it: the caller's promise. */
	unlink_watch(w, false);
	if (fd >= 0)
		close(fd);
}

static void on_timer(struct al_watch *w, uint32_t events, void *data)
{
	struct al_timer *t = data;
	uint64_t ticks;

	(void)w;
	(void)events;
	if (read(t->fd, &ticks, sizeof(ticks)) != sizeof(ticks))
		return; /* disarmed or re-armed since it fired */
	t->fn(t, ticks, t->data);
}

struct al_timer *al_loop_timer(struct al_loop *l, al_timer_fn fn, void *data)
{
	struct al_timer *t = xcalloc(1, sizeof(*t));
	int e;

	t->fn = fn;
	t->data = data;
	t->fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (t->fd < 0)
		goto fail;
	t->w = al_loop_add(l, t->fd, EPOLLIN, on_timer, t);
	if (!t->w)
		goto fail;
	return t;
fail:
	e = errno;
	if (t->fd >= 0)
		close(t->fd);
	free(t);
	errno = e;
	return NULL;
}

int al_timer_arm(struct al_timer *t, uint64_t ms, bool repeat)
{
	struct itimerspec its = {0};

	its.it_value.tv_sec = (time_t)(ms / 1000);
	its.it_value.tv_nsec = (long)(ms % 1000) * 1000000L;
	if (!ms)
		its.it_value.tv_nsec = 1;
	if (repeat)
		its.it_interval = its.it_value;
	return timerfd_settime(t->fd, 0, &its, NULL) < 0 ? -errno : 0;
}

int al_timer_disarm(struct al_timer *t)
{
	struct itimerspec its = {0};
	return timerfd_settime(t->fd, 0, &its, NULL) < 0 ? -errno : 0;
}

void al_timer_free(struct al_timer *t)
{
	if (!t)
		return;
	al_watch_remove(t->w);
	close(t->fd);
	free(t);
}

static void on_signal(struct al_watch *w, uint32_t events, void *data)
{
	struct al_signals *s = data;
	struct signalfd_siginfo si;

	(void)w;
	(void)events;
	if (read(s->fd, &si, sizeof(si)) != sizeof(si))
		return;
	s->fn(s, (int)si.ssi_signo, s->data);
}

struct al_signals *al_loop_signals(struct al_loop *l, const sigset_t *set, al_signal_fn fn,
				   void *data)
{
	struct al_signals *s = xcalloc(1, sizeof(*s));
	int e;

	s->fn = fn;
	s->data = data;
	s->fd = signalfd(-1, set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (s->fd < 0)
		goto fail;
	s->w = al_loop_add(l, s->fd, EPOLLIN, on_signal, s);
	if (!s->w)
		goto fail;
	return s;
fail:
	e = errno;
	if (s->fd >= 0)
		close(s->fd);
	free(s);
	errno = e;
	return NULL;
}

void al_signals_free(struct al_signals *s)
{
	if (!s)
		return;
	al_watch_remove(s->w);
	close(s->fd);
	free(s);
}
