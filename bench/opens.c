/* The per-call cost of path lookups, for issue 27's pandas item: the same
 * opens and stats a program makes, repeated, timed.
 * Run bare, under bench/floor.c (with or without its --landlock and
 * --seccomp layers) and under airlock: the differences are what each layer
 * adds to one open or one stat, with no start-up in them. Each pass is
 * timed with the thread's CPU clock (see now_ns).
 *
 * Usage: opens [ITERATIONS] < LIST
 * LIST has one call a line, "open PATH" or "stat PATH" (bench/opens.py
 * makes it from `strace -e trace=openat,newfstatat`). Each iteration does
 * every open (O_RDONLY|O_CLOEXEC, closed at once), then every stat
 * (fstatat with flags 0), then as many ioctl(TCGETS) calls on a directory
 * (they fail with ENOTTY, as Python's on its files do) and getppid() calls
 * as there were lines: system calls with no path in them, one that airlock's
 * seccomp program checks an argument of (its BPF runs) and one it allows
 * whole (the kernel's cache answers without running the BPF). Prints one line a kind: "open N ns" etc., the median over the
 * iterations of the mean per call, then how many of the calls failed (a
 * missing file fails the same way everywhere; a count that differs between
 * runs means the sandbox shows other files). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define MAX_CALLS 100000
#define MAX_ITER  100000

enum kind {
	OPEN,
	STAT,
	IOCTL,
	NULLCALL,
	N_KINDS
};
static const char *const names[N_KINDS] = {"open", "stat", "ioctl", "getppid"};
/* A descriptor for the ioctl pass: any open file. */
static int some_fd;

static char *paths[N_KINDS][MAX_CALLS];
static size_t n_paths[N_KINDS];
static double per_call[N_KINDS][MAX_ITER];

/* The thread's CPU time, user and system: time spent waiting for a core on
 * a loaded machine is not in it, so the other helpers' load moves it far
 * less than it moves CLOCK_MONOTONIC (which AIRLOCK_OPENS_WALL=1 picks). */
static clockid_t clock_id = CLOCK_THREAD_CPUTIME_ID;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(clock_id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* One pass over a kind's calls: how many failed. */
static size_t pass(enum kind k)
{
	size_t failed = 0;
	struct stat st;

	for (size_t i = 0; i < n_paths[k]; i++) {
		switch (k) {
		case OPEN: {
			int fd = open(paths[k][i], O_RDONLY | O_CLOEXEC);
			if (fd < 0)
				failed++;
			else
				close(fd);
			break;
		}
		case STAT:
			if (fstatat(AT_FDCWD, paths[k][i], &st, 0) < 0)
				failed++;
			break;
		case IOCTL: {
			struct termios t;
			if (ioctl(some_fd, TCGETS, &t) < 0)
				failed++;
			break;
		}
		case NULLCALL:
			syscall(SYS_getppid);
			break;
		case N_KINDS:
			break;
		}
	}
	return failed;
}

static int read_list(void)
{
	char line[4200];
	size_t lineno = 0;

	while (fgets(line, sizeof(line), stdin)) {
		size_t len = strlen(line);
		enum kind k;

		lineno++;
		if (len && line[len - 1] == '\n')
			line[--len] = '\0';
		if (len == 0)
			continue;
		if (strncmp(line, "open ", 5) == 0)
			k = OPEN;
		else if (strncmp(line, "stat ", 5) == 0)
			k = STAT;
		else {
			fprintf(stderr,
				"opens: stdin line %zu: not \"open PATH\" or \"stat PATH\"\n",
				lineno);
			return -1;
		}
		if (n_paths[k] == MAX_CALLS) {
			fprintf(stderr, "opens: stdin line %zu: more than %d calls of a kind\n",
				lineno, MAX_CALLS);
			return -1;
		}
		paths[k][n_paths[k]++] = strdup(line + 5);
	}
	n_paths[IOCTL] = n_paths[NULLCALL] = n_paths[OPEN] + n_paths[STAT];
	return 0;
}

int main(int argc, char **argv)
{
	long iters = argc > 1 ? strtol(argv[1], NULL, 10) : 200;
	size_t failed[N_KINDS] = {0};

	if (argc > 2 || iters < 1 || iters > MAX_ITER) {
		fprintf(stderr, "usage: opens [ITERATIONS (1-%d)] < LIST\n", MAX_ITER);
		return 2;
	}
	if (getenv("AIRLOCK_OPENS_WALL"))
		clock_id = CLOCK_MONOTONIC;
	if (read_list() < 0)
		return 2;
	if (n_paths[OPEN] + n_paths[STAT] == 0) {
		fprintf(stderr, "opens: no calls on stdin\n");
		return 2;
	}
	some_fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (some_fd < 0) {
		perror("opens: opening /");
		return 2;
	}
	/* One pass of each untimed: the dentries and inodes are then cached,
	 * as they are for all but the first import. */
	for (int k = 0; k < N_KINDS; k++)
		failed[k] = pass((enum kind)k);
	for (long it = 0; it < iters; it++) {
		for (int k = 0; k < N_KINDS; k++) {
			uint64_t t = now_ns();
			pass((enum kind)k);
			per_call[k][it] =
			    n_paths[k] ? (double)(now_ns() - t) / (double)n_paths[k] : 0.0;
		}
	}
	for (int k = 0; k < N_KINDS; k++) {
		qsort(per_call[k], (size_t)iters, sizeof(double), cmp_double);
		printf("%-8s %8.0f ns  (p10 %.0f, p90 %.0f; %zu calls, %zu failed)\n", names[k],
		       per_call[k][iters / 2], per_call[k][iters / 10], per_call[k][iters * 9 / 10],
		       n_paths[k], failed[k]);
	}
	return 0;
}
