/* core/loop.h: the event loop every run and the gateway use. Pipes and
 * socketpairs stand in for the sandbox's fds. */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/loop.h"

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

struct counter {
	int calls;
	uint32_t events;
	struct al_watch *other; /* removed by the first callback */
	int *other_calls;
};

static void count_cb(struct al_watch *w, uint32_t events, void *data)
{
	struct counter *c = data;
	char b[16];

	c->calls++;
	c->events |= events;
	if (events & EPOLLIN)
		(void)!read(al_watch_fd(w), b, sizeof(b));
	if (c->other) {
		al_watch_remove(c->other);
		c->other = NULL;
	}
}

static void test_watch_read(void **state)
{
	struct al_loop *l;
	struct al_error err = {0};
	int p[2];
	struct counter c = {0};

	(void)state;
	assert_int_equal(al_loop_new(&l, &err), 0);
	assert_int_equal(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
	struct al_watch *w = al_loop_add(l, p[0], EPOLLIN, count_cb, &c);
	assert_non_null(w);
	assert_int_equal(al_loop_dispatch(l, 0), 0); /* nothing yet */
	assert_int_equal(c.calls, 0);
	assert_int_equal(write(p[1], "x", 1), 1);
	assert_int_equal(al_loop_dispatch(l, 1000), 1);
	assert_int_equal(c.calls, 1);
	assert_true(c.events & EPOLLIN);
	/* Out of the set: no callback even with data waiting. */
	assert_int_equal(al_watch_set(w, 0), 0);
	assert_int_equal(al_watch_events(w), 0);
	assert_int_equal(write(p[1], "y", 1), 1);
	assert_int_equal(al_loop_dispatch(l, 0), 0);
	assert_int_equal(c.calls, 1);
	assert_int_equal(al_watch_set(w, EPOLLIN), 0);
	assert_int_equal(al_loop_dispatch(l, 1000), 1);
	assert_int_equal(c.calls, 2);
	al_watch_remove(w);
	assert_int_equal(write(p[1], "z", 1), 1);
	assert_int_equal(al_loop_dispatch(l, 0), 0);
	assert_int_equal(c.calls, 2);
	al_loop_free(l);
	close(p[0]);
	close(p[1]);
}

/* A watch removed by an earlier callback of the same batch is not called,
 * though its event was already fetched. */
static void test_remove_in_batch(void **state)
{
	struct al_loop *l;
	struct al_error err = {0};
	int a[2], b[2];
	struct counter ca = {0}, cb = {0};

	(void)state;
	assert_int_equal(al_loop_new(&l, &err), 0);
	assert_int_equal(pipe2(a, O_CLOEXEC | O_NONBLOCK), 0);
	assert_int_equal(pipe2(b, O_CLOEXEC | O_NONBLOCK), 0);
	struct al_watch *wa = al_loop_add(l, a[0], EPOLLIN, count_cb, &ca);
	struct al_watch *wb = al_loop_add(l, b[0], EPOLLIN, count_cb, &cb);
	assert_non_null(wa);
	assert_non_null(wb);
	ca.other = wb;
	cb.other = wa;
	assert_int_equal(write(a[1], "x", 1), 1);
	assert_int_equal(write(b[1], "x", 1), 1);
	assert_int_equal(al_loop_dispatch(l, 1000), 2);
	/* Whichever ran first removed the other. */
	assert_int_equal(ca.calls + cb.calls, 1);
	al_loop_free(l); /* frees the one still in it */
	for (int i = 0; i < 2; i++) {
		close(a[i]);
		close(b[i]);
	}
}

/* al_watch_close: the fd is closed and gone from the set without an
 * epoll_ctl; a callback of the same batch is not run for it, and a new fd
 * with the same number is watched anew. */
static void close_cb(struct al_watch *w, uint32_t events, void *data)
{
	struct counter *c = data;

	(void)events;
	c->calls++;
	if (c->other) {
		al_watch_close(c->other);
		c->other = NULL;
	}
	(void)w;
}

static void test_watch_close(void **state)
{
	struct al_loop *l;
	struct al_error err = {0};
	int a[2], b[2];
	struct counter ca = {0}, cb = {0};

	(void)state;
	assert_int_equal(al_loop_new(&l, &err), 0);
	assert_int_equal(pipe2(a, O_CLOEXEC | O_NONBLOCK), 0);
	assert_int_equal(pipe2(b, O_CLOEXEC | O_NONBLOCK), 0);
	struct al_watch *wa = al_loop_add(l, a[0], EPOLLIN, close_cb, &ca);
	struct al_watch *wb = al_loop_add(l, b[0], EPOLLIN, close_cb, &cb);
	assert_non_null(wa);
	assert_non_null(wb);
	ca.other = wb;
	cb.other = wa;
	assert_int_equal(write(a[1], "x", 1), 1);
	assert_int_equal(write(b[1], "x", 1), 1);
	assert_int_equal(al_loop_dispatch(l, 1000), 2);
	/* Whichever ran first closed the other: not called, and its fd shut. */
	assert_int_equal(ca.calls + cb.calls, 1);
	int closed = ca.calls ? b[0] : a[0], open_fd = ca.calls ? a[0] : b[0];
	struct al_watch *left = ca.calls ? wa : wb;
	assert_int_equal(fcntl(closed, F_GETFD), -1);
	assert_int_equal(errno, EBADF);
	/* Only the other's unread "x" is left to wake the loop. */
	assert_int_equal(al_loop_dispatch(l, 0), 1);
	assert_int_equal(ca.calls + cb.calls, 2);
	/* The same number again, a new pipe: watched from scratch. */
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
	struct counter cp = {0};
	struct al_watch *wp = al_loop_add(l, p[0], EPOLLIN, count_cb, &cp);
	assert_non_null(wp);
	assert_int_equal(write(p[1], "z", 1), 1);
	al_watch_close(left);
	assert_int_equal(fcntl(open_fd, F_GETFD), -1);
	assert_int_equal(al_loop_dispatch(l, 1000), 1);
	assert_int_equal(cp.calls, 1);
	al_watch_close(wp);
	al_watch_close(NULL);
	al_loop_free(l);
	close(p[1]);
	close(a[1]);
	close(b[1]);
}

static void test_unpollable(void **state)
{
	struct al_loop *l;
	struct al_error err = {0};
	struct counter c = {0};
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(al_loop_new(&l, &err), 0);
	errno = 0;
	assert_null(al_loop_add(l, fd, EPOLLIN, count_cb, &c));
	assert_int_equal(errno, EPERM);
	al_loop_free(l);
	close(fd);
}

struct ticks {
	int calls;
	uint64_t expirations;
	bool free_self;
};

static void tick_cb(struct al_timer *t, uint64_t expirations, void *data)
{
	struct ticks *k = data;

	k->calls++;
	k->expirations += expirations;
	if (k->free_self)
		al_timer_free(t);
}

static void test_timers(void **state)
{
	struct al_loop *l;
	struct al_error err = {0};
	struct ticks once = {0}, rep = {0}, self = {.free_self = true};

	(void)state;
	assert_int_equal(al_loop_new(&l, &err), 0);
	struct al_timer *t1 = al_loop_timer(l, tick_cb, &once);
	struct al_timer *t2 = al_loop_timer(l, tick_cb, &rep);
	struct al_timer *t3 = al_loop_timer(l, tick_cb, &self);
	assert_non_null(t1);
	assert_non_null(t2);
	assert_non_null(t3);
	/* Disarmed until armed. */
	assert_int_equal(al_loop_dispatch(l, 20), 0);
	uint64_t t0 = now_ms();
	assert_int_equal(al_timer_arm(t1, 30, false), 0);
	assert_int_equal(al_timer_arm(t2, 5, true), 0);
	assert_int_equal(al_timer_arm(t3, 0, false), 0); /* fires at once */
	while (once.calls == 0)
		assert_true(al_loop_dispatch(l, 1000) >= 0);
	assert_true(now_ms() - t0 >= 29);
	assert_int_equal(self.calls, 1); /* freed itself inside its callback */
	assert_true(rep.expirations >= 4);
	assert_int_equal(al_timer_disarm(t2), 0);
	int before = rep.calls;
	assert_int_equal(al_loop_dispatch(l, 20), 0);
	assert_int_equal(rep.calls, before);
	assert_int_equal(once.calls, 1);
	al_timer_free(t1);
	al_timer_free(t2);
	al_loop_free(l);
}

struct sigs {
	int sig;
};

static void sig_cb(struct al_signals *s, int sig, void *data)
{
	(void)s;
	((struct sigs *)data)->sig = sig;
}

static void test_signals(void **state)
{
	struct al_loop *l;
	struct al_error err = {0};
	sigset_t set, old;
	struct sigs got = {0};

	(void)state;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR2);
	assert_int_equal(sigprocmask(SIG_BLOCK, &set, &old), 0);
	assert_int_equal(al_loop_new(&l, &err), 0);
	struct al_signals *s = al_loop_signals(l, &set, sig_cb, &got);
	assert_non_null(s);
	assert_int_equal(kill(getpid(), SIGUSR2), 0);
	assert_int_equal(al_loop_dispatch(l, 1000), 1);
	assert_int_equal(got.sig, SIGUSR2);
	al_signals_free(s);
	al_loop_free(l);
	sigprocmask(SIG_SETMASK, &old, NULL);
}

/* Two loops in one process, the second nested in the first through its fd
 * (how a daemon can hold many runs). */
static void test_nested(void **state)
{
	struct al_loop *outer, *inner;
	struct al_error err = {0};
	struct counter c = {0}, seen = {0};
	int p[2];

	(void)state;
	assert_int_equal(al_loop_new(&outer, &err), 0);
	assert_int_equal(al_loop_new(&inner, &err), 0);
	assert_int_equal(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
	assert_non_null(al_loop_add(inner, p[0], EPOLLIN, count_cb, &c));
	struct al_watch *wi = al_loop_add(outer, al_loop_fd(inner), EPOLLIN, count_cb, &seen);
	assert_non_null(wi);
	assert_int_equal(write(p[1], "x", 1), 1);
	assert_int_equal(al_loop_dispatch(outer, 1000), 1);
	assert_int_equal(seen.calls, 1);
	assert_int_equal(c.calls, 0);
	assert_int_equal(al_loop_dispatch(inner, 0), 1);
	assert_int_equal(c.calls, 1);
	al_loop_free(outer);
	al_loop_free(inner);
	close(p[0]);
	close(p[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_watch_read),	cmocka_unit_test(test_remove_in_batch),
	    cmocka_unit_test(test_watch_close), cmocka_unit_test(test_unpollable),
	    cmocka_unit_test(test_timers),	cmocka_unit_test(test_signals),
	    cmocka_unit_test(test_nested),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
