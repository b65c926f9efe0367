/* The event loop: one dispatcher over epoll for everything a run waits on
 * (the supervisor's child, pipes, timers and signals; the gateway's
 * listeners, connections and resolver). Each watched fd has a callback and
 * a data pointer: no tags, no casts of epoll data.
 *
 * Callbacks may add and remove watches, timers and signal sets, including
 * their own: a removed watch gets no further callbacks, even for events
 * already fetched in the same batch, and its memory is released after the
 * batch. A loop belongs to one thread; several loops may live in one
 * process, and a loop's fd can itself be watched by another loop. */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>

#include "core/error.h"

struct al_loop;
struct al_watch;
struct al_timer;
struct al_signals;

/* events: the EPOLL* bits that fired (EPOLLERR and EPOLLHUP come whatever
 * was asked). */
typedef void (*al_watch_fn)(struct al_watch *w, uint32_t events, void *data);
/* expirations: how often the timer fired since the last call (repeating
 * timers may fire more than once between dispatches). */
typedef void (*al_timer_fn)(struct al_timer *t, uint64_t expirations, void *data);
typedef void (*al_signal_fn)(struct al_signals *s, int sig, void *data);

int al_loop_new(struct al_loop **ret, struct al_error *err);
/* Frees the loop and every watch still in it (without closing their fds:
 * those belong to their owners). Timers and signal sets must be freed
 * before (al_timer_free, al_signals_free). */
void al_loop_free(struct al_loop *l);

/* The epoll fd: readable when a dispatch would find something. */
int al_loop_fd(const struct al_loop *l);

/* Wait at most timeout_ms (-1: no limit) for one batch of events and call
 * their callbacks. Returns the number of events, 0 on timeout or EINTR,
 * or -errno. */
int al_loop_dispatch(struct al_loop *l, int timeout_ms);

/* Watch fd for events (0: registered later with al_watch_set). Returns
 * NULL with errno set when epoll refuses the fd (EPERM: a regular file
 * or /dev/null, which cannot be polled). The fd stays the caller's. */
struct al_watch *al_loop_add(struct al_loop *l, int fd, uint32_t events, al_watch_fn fn,
			     void *data);
/* Change what w waits for. 0 takes the fd out of the epoll set (the kernel
 * reports EPOLLHUP and EPOLLERR whatever is asked, and an unread one would
 * spin the loop). Returns 0 or -errno. */
int al_watch_set(struct al_watch *w, uint32_t events);
uint32_t al_watch_events(const struct al_watch *w);
int al_watch_fd(const struct al_watch *w);
/* Stop watching (w is invalid afterwards); NULL is ignored. Call before
 * closing the fd. */
void al_watch_remove(struct al_watch *w);
static inline void al_watch_removep(struct al_watch **w)
{
	al_watch_remove(*w);
	*w = 0;
}
/* Stop watching and close the fd, without the epoll_ctl that
 * al_watch_remove makes: closing the last descriptor of a file takes it
 * out of the epoll set. Only for an fd no other descriptor (a dup, a
 * forked child's copy, one in flight over a socket) refers to; else its
 * events would still come, for a watch that is gone. NULL is ignored. */
void al_watch_close(struct al_watch *w);

/* A monotonic timer, disarmed until al_timer_arm. NULL with errno set. */
struct al_timer *al_loop_timer(struct al_loop *l, al_timer_fn fn, void *data);
/* Fire after ms (at least 1 ns when 0), then every ms if repeat. */
int al_timer_arm(struct al_timer *t, uint64_t ms, bool repeat);
int al_timer_disarm(struct al_timer *t);
void al_timer_free(struct al_timer *t);
static inline void al_timer_freep(struct al_timer **t)
{
	al_timer_free(*t);
	*t = 0;
}

/* Deliver the signals in set to fn through a signalfd. They must be
 * blocked in every thread by whoever owns the process (a CLI; never a
 * library that shares its process). NULL with errno set. */
struct al_signals *al_loop_signals(struct al_loop *l, const sigset_t *set, al_signal_fn fn,
				   void *data);
void al_signals_free(struct al_signals *s);
