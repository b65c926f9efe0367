/* One command's stdio relay (supervisor/relay.c), over pipes on a loop:
 * the output cap over stdout and stderr together (what fits passes, the
 * rest is dropped, the owner told once), the filter, the ends; the stdin
 * queue's bound, its bytes queued before the command's stdin comes, its
 * close, and what a push after it gets. */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/loop.h"
#include "supervisor/relay.h"

struct seen {
	char out[2][256];
	size_t n[2];
	int over, over_which, eof[2], room;
};

static void on_output(void *data, int which, const char *buf, size_t len)
{
	struct seen *s = data;
	assert_true(s->n[which] + len <= sizeof(s->out[which]));
	memcpy(s->out[which] + s->n[which], buf, len);
	s->n[which] += len;
}

static void on_over(void *data, int which)
{
	struct seen *s = data;
	s->over++;
	s->over_which = which;
}

static void on_eof(void *data, int which)
{
	((struct seen *)data)->eof[which]++;
}

static void on_room(void *data)
{
	((struct seen *)data)->room++;
}

static const struct al_relay_ops ops = {
    .output = on_output, .over = on_over, .eof = on_eof, .in_room = on_room};

/* A relay on a loop of its own, counting into out and errb. */
struct fix {
	struct al_loop *l;
	struct al_relay r;
	struct seen s;
	uint64_t out, errb;
	struct al_error err;
};

static void fix_init(struct fix *f, uint64_t cap, size_t q_max)
{
	*f = (struct fix){0};
	assert_int_equal(al_loop_new(&f->l, &f->err), 0);
	al_relay_init(&f->r, f->l, &ops, &f->s, cap, &f->out, &f->errb, q_max);
}

static void fix_free(struct fix *f)
{
	al_relay_close(&f->r);
	al_loop_free(f->l);
}

/* Dispatch until nothing happens for a moment (bounded). */
static void settle(struct al_loop *l)
{
	for (int i = 0; i < 100 && al_loop_dispatch(l, 50) > 0; i++)
		;
}

static void test_output_cap(void **state)
{
	(void)state;
	struct fix f;
	int p1[2], p2[2];
	char buf[64];

	fix_init(&f, 100, 0);
	assert_int_equal(pipe2(p1, O_CLOEXEC), 0);
	assert_int_equal(pipe2(p2, O_CLOEXEC), 0);
	assert_int_equal(al_relay_out(&f.r, 0, p1[0], &f.err), 0);
	assert_int_equal(al_relay_out(&f.r, 1, p2[0], &f.err), 0);
	memset(buf, 'o', sizeof(buf));
	assert_int_equal(write(p1[1], buf, 60), 60);
	settle(f.l);
	assert_int_equal(f.s.n[0], 60);
	assert_int_equal(f.s.over, 0);
	/* 40 more fit, exactly the cap: not over. */
	memset(buf, 'e', sizeof(buf));
	assert_int_equal(write(p2[1], buf, 40), 40);
	settle(f.l);
	assert_int_equal(f.s.n[1], 40);
	assert_int_equal(f.s.over, 0);
	/* One byte past it: dropped, the owner told once, and what follows
	 * is dropped too (read, so the writer does not block). */
	assert_int_equal(write(p2[1], buf, 1), 1);
	settle(f.l);
	assert_int_equal(f.s.over, 1);
	assert_int_equal(f.s.over_which, 1);
	assert_int_equal(write(p1[1], buf, 30), 30);
	settle(f.l);
	assert_int_equal(f.s.n[0], 60);
	assert_int_equal(f.s.n[1], 40);
	assert_int_equal(f.out, 60);
	assert_int_equal(f.errb, 40);
	assert_int_equal(f.s.over, 1);
	/* The ends: each told once, each closed. */
	close(p1[1]);
	close(p2[1]);
	settle(f.l);
	assert_int_equal(f.s.eof[0], 1);
	assert_int_equal(f.s.eof[1], 1);
	assert_false(al_relay_out_open(&f.r, 0));
	assert_false(al_relay_out_open(&f.r, 1));
	fix_free(&f);
}

static void test_filter(void **state)
{
	(void)state;
	struct fix f;
	int p[2];

	fix_init(&f, UINT64_MAX, 0);
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	f.r.src[0].filtered = true;
	assert_int_equal(al_relay_out(&f.r, 0, p[0], &f.err), 0);
	/* A cursor position query is left out on its way to a terminal; the
	 * bytes read are counted as they came. */
	assert_int_equal(write(p[1], "a\033[6nb", 6), 6);
	settle(f.l);
	assert_int_equal(f.s.n[0], 2);
	assert_memory_equal(f.s.out[0], "ab", 2);
	assert_int_equal(f.out, 6);
	close(p[1]);
	fix_free(&f);
}

static void test_stdin_queue(void **state)
{
	(void)state;
	struct fix f;
	int p[2];
	char buf[16];

	fix_init(&f, UINT64_MAX, 8);
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	/* Queued before its stdin comes (a terminal's master comes late),
	 * at most 8 bytes. */
	assert_int_equal(al_relay_in_push(&f.r, "hello", 5), 0);
	assert_int_equal(al_relay_in_push(&f.r, "worl", 4), -ENOBUFS);
	assert_int_equal(al_relay_in_pending(&f.r), 5);
	assert_true(al_relay_in_open(&f.r));
	assert_int_equal(al_relay_in(&f.r, p[1], &f.err), 0);
	assert_int_equal(al_relay_in_pending(&f.r), 0);
	assert_int_equal(read(p[0], buf, sizeof(buf)), 5);
	assert_memory_equal(buf, "hello", 5);
	/* Room again: the queue takes 8 more. */
	assert_int_equal(al_relay_in_push(&f.r, "12345678", 8), 0);
	assert_true(al_relay_in_flush(&f.r));
	assert_int_equal(read(p[0], buf, sizeof(buf)), 8);
	/* Closed: its end sees EOF, and a push is refused. */
	al_relay_in_close(&f.r);
	assert_false(al_relay_in_open(&f.r));
	assert_int_equal(read(p[0], buf, sizeof(buf)), 0);
	assert_int_equal(al_relay_in_push(&f.r, "x", 1), -EPIPE);
	close(p[0]);
	fix_free(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_output_cap),
	    cmocka_unit_test(test_filter),
	    cmocka_unit_test(test_stdin_queue),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
