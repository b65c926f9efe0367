/* Many runs alive at once in this one process, as a daemon holds them:
 * nothing a run uses may be a single buffer or a fixed-size table shared
 * by the process (issue 25).
 *
 * - fake backend (no root; needs user namespaces): RUNS runs, more than
 *   any table of runs the library ever had (cred/store.c's 64), started
 *   one after another in this thread and stepped round-robin; none is
 *   given its stdin until every one has said it runs, so all are alive
 *   at once. Each must end with its own output, exit code and result
 *   record.
 * - native backend (as root; skipped otherwise): NATIVE runs, each in a
 *   thread of its own started at the same moment, each with an input
 *   owned by a different host user (idmapped by inputs.c in a cloned
 *   process) and the read-back of the user namespace's limits (verify.c,
 *   in a cloned process): each reads its own input, sees no other's,
 *   finds its scratch empty and has its own host ids.
 *
 * Bounded: RUNS small shells, a deadline (a guard against a hang, far
 * above what the runs need on a loaded machine) and no busy loop. */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h"
#include "core/sys.h"
#include "core/util.h"
#include "policy/plan.h"
#include "policy/policy.h"
#include "run/run.h"

#define RUNS	    72
#define NATIVE	    8
#define DEADLINE_MS 120000

struct capture {
	char out[512], err[256];
	size_t n_out, n_err;
	atomic_bool ready; /* "ready" seen on stdout */
};

static void capture_cb(void *data, int which, const void *buf, size_t len)
{
	struct capture *c = data;
	char *dst = which == 0 ? c->out : c->err;
	size_t *n = which == 0 ? &c->n_out : &c->n_err;
	size_t room = (which == 0 ? sizeof(c->out) : sizeof(c->err)) - 1 - *n;

	if (len > room)
		len = room;
	memcpy(dst + *n, buf, len);
	*n += len;
	if (which == 0 && strstr(c->out, "ready\n"))
		atomic_store(&c->ready, true);
}

static struct al_plan *plan_for(const char *script, const char *input_host)
{
	struct al_policy *p = al_policy_new("test");
	struct al_plan *plan = NULL;
	struct al_error err = {0};

	al_strv_push(&p->command, "/bin/sh");
	al_strv_push(&p->command, "-c");
	al_strv_push(&p->command, script);
	if (al_landlock_abi() == 0)
		p->landlock = AL_LANDLOCK_BEST_EFFORT;
	p->timeout_ms = DEADLINE_MS;
	if (input_host) {
		p->mounts = xcalloc(1, sizeof(*p->mounts));
		p->mounts[0] = (struct al_policy_mount){.host = xstrdup(input_host),
							.path = xstrdup("/input"),
							.mode = AL_MOUNT_RO,
							.exec = AL_UNSET,
							.origin = xstrdup("--ro")};
		p->n_mounts = 1;
	}
	if (al_plan_build(p, 0, &plan, &err) < 0)
		fail_msg("al_plan_build: %s", err.msg);
	al_policy_free(p);
	return plan;
}

static void raise_fd_limit(void)
{
	struct rlimit rl;

	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_cur < 4096 && rl.rlim_max > rl.rlim_cur) {
		rl.rlim_cur = rl.rlim_max < 4096 ? rl.rlim_max : 4096;
		assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
	}
}

/* Each test's temporary tree, removed by remove_tmp() after the test,
 * whether it passed or not. */
static char tmp[64];

static const char *make_tmp(void)
{
	snprintf(tmp, sizeof(tmp), "/tmp/airlock-many-XXXXXX");
	assert_non_null(mkdtemp(tmp));
	return tmp;
}

static int remove_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return type == FTW_DP ? rmdir(path) : unlink(path);
}

static int remove_tmp(void **state)
{
	(void)state;
	if (tmp[0] && nftw(tmp, remove_one, 16, FTW_DEPTH | FTW_PHYS) < 0)
		return -1;
	tmp[0] = '\0';
	return 0;
}

/* The record run i wrote in dir: its exit code must be its own. */
static void check_record(int dir, int i, int want_exit)
{
	char name[32];
	json_error_t jerr;

	snprintf(name, sizeof(name), "run-%d.json", i);
	int fd = openat(dir, name, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	json_t *rec = json_loadfd(fd, 0, &jerr);
	close(fd);
	if (!rec)
		fail_msg("%s: %s", name, jerr.text);
	assert_int_equal(json_integer_value(json_object_get(rec, "exit_code")), want_exit);
	assert_string_equal(json_string_value(json_object_get(rec, "reason")), "exited");
	json_decref(rec);
}

static void test_many_fake_runs(void **state)
{
	static struct capture cap[RUNS];
	struct al_plan *plan[RUNS];
	struct al_supervisor_io io[RUNS];
	struct al_run *run[RUNS];
	char names[RUNS][32];
	int in[RUNS][2], ended = 0, said = 0;
	bool done[RUNS] = {0}, fed = false;
	uint64_t deadline = al_now_ms() + DEADLINE_MS;

	(void)state;
	raise_fd_limit();
	int dir = open(make_tmp(), O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(dir >= 0);
	for (int i = 0; i < RUNS; i++) {
		char script[160];
		/* Exit codes 1..RUNS, outputs that name the run, and stdin that
		 * only this run is given. */
		snprintf(script, sizeof(script),
			 "echo ready; read x; echo \"run %d got $x\"; echo \"err %d\" >&2; exit %d",
			 i, i, i + 1);
		plan[i] = plan_for(script, NULL);
		assert_int_equal(pipe2(in[i], O_CLOEXEC), 0);
		io[i] = (struct al_supervisor_io){
		    .stdin_fd = in[i][0], .output = capture_cb, .data = &cap[i]};
		snprintf(names[i], sizeof(names[i]), "run-%d.json", i);
		struct al_run_request req = {.plan = plan[i],
					     .backend = &al_backend_fake,
					     .result_dirfd = dir,
					     .result_name = names[i],
					     .result_path = names[i]};
		struct al_error err = {0};
		if (al_run_start(&req, &io[i], &run[i], &err) < 0)
			fail_msg("run %d: al_run_start: %s", i, err.msg);
	}
	/* Round-robin: wait on every run's loop, step each that has work. */
	while (ended < RUNS) {
		struct pollfd p[RUNS];
		int n = 0;
		for (int i = 0; i < RUNS; i++)
			if (!done[i])
				p[n++] = (struct pollfd){.fd = al_loop_fd(al_run_loop(run[i])),
							 .events = POLLIN};
		if (al_now_ms() > deadline)
			fail_msg("%d of %d runs ended before the deadline", ended, RUNS);
		assert_true(poll(p, (nfds_t)n, 100) >= 0);
		for (int i = 0; i < RUNS; i++)
			if (!done[i] && al_run_step(run[i], 0)) {
				done[i] = true;
				ended++;
			}
		if (!fed) {
			said = 0;
			for (int i = 0; i < RUNS; i++)
				said += atomic_load(&cap[i].ready);
			if (said < RUNS)
				continue;
			/* Every run is alive and waiting on its stdin. */
			assert_int_equal(ended, 0);
			for (int i = 0; i < RUNS; i++) {
				char tok[32];
				int len = snprintf(tok, sizeof(tok), "token-%d\n", i * 7919);
				assert_int_equal(write(in[i][1], tok, (size_t)len), len);
				close(in[i][1]);
			}
			fed = true;
		}
	}
	for (int i = 0; i < RUNS; i++) {
		char want[96], err_want[32];
		const struct al_run_result *res = al_run_wait(run[i], NULL);
		snprintf(want, sizeof(want), "ready\nrun %d got token-%d\n", i, i * 7919);
		snprintf(err_want, sizeof(err_want), "err %d\n", i);
		assert_string_equal(cap[i].out, want);
		assert_string_equal(cap[i].err, err_want);
		assert_int_equal(res->reason, AL_END_EXITED);
		assert_int_equal(res->exit_code, i + 1);
		assert_int_equal(res->stdout_bytes, strlen(want));
		assert_int_equal(res->stderr_bytes, strlen(err_want));
		check_record(dir, i, i + 1);
		al_run_free(run[i]);
		close(in[i][0]);
		al_plan_free(plan[i]);
	}
	close(dir);
}

/* A child on a mapped stack writes one byte at arg. cmocka's SIGSEGV
 * handler is the parent's; the child's copy is put back to the default
 * first, so that a fault kills the child alone. */
static int touch(void *arg)
{
	signal(SIGSEGV, SIG_DFL);
	*(volatile char *)arg = 1;
	return 0;
}

static int touch_in_child(char *top, char *where)
{
	int st = 0;
	long pid = clone(touch, top, CLONE_VM | CLONE_VFORK | SIGCHLD, where);

	assert_true(pid > 0);
	assert_int_equal(waitpid((pid_t)pid, &st, 0), pid);
	return st;
}

/* Each call maps a stack of its own (two runs' clones never share one),
 * all of its size usable, with a guard page under it that faults. */
static void test_clone_stacks(void **state)
{
	struct al_clone_stack a = {0}, b = {0};
	const size_t size = 16384;
	char *ta = al_clone_stack_new(&a, size), *tb = al_clone_stack_new(&b, size);

	(void)state;
	assert_non_null(ta);
	assert_non_null(tb);
	assert_true(ta - size >= tb || tb - size >= ta); /* no overlap */
	int st = touch_in_child(ta, ta - size);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	st = touch_in_child(ta, ta - size - 1);
	assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV);
	al_clone_stack_free(&a);
	al_clone_stack_free(&b);
	assert_null(a.map);
}

/* One native run in its own thread. */
struct native {
	int i;
	char input[96]; /* host dir of its input, owned by its own user */
	char script[1024];
	struct al_plan *plan;
	struct capture cap;
	int in[2];
	pthread_barrier_t *go;
	int start_r;
	char start_err[256];
	struct al_run_result res; /* copied out of the run */
	atomic_bool finished;	  /* the thread is done with all of the above */
};

static void *native_thread(void *arg)
{
	struct native *n = arg;
	struct al_supervisor_io io = {.stdin_fd = n->in[0], .output = capture_cb, .data = &n->cap};
	struct al_run_request req = {.plan = n->plan, .result_dirfd = -1, .verify_all = true};
	struct al_run *run = NULL;
	struct al_error err = {0};

	pthread_barrier_wait(n->go); /* every thread sets up its sandbox at once */
	n->start_r = al_run_start(&req, &io, &run, &err);
	snprintf(n->start_err, sizeof(n->start_err), "%s", err.msg);
	const struct al_run_result *res = al_run_wait(run, NULL);
	n->res = *res;
	n->res.copy_out = n->res.credentials = n->res.minted = NULL; /* owned by run */
	al_run_free(run);
	atomic_store(&n->finished, true);
	return NULL;
}

static void test_native_runs_in_threads(void **state)
{
	static struct native nat[NATIVE];
	pthread_t th[NATIVE];
	pthread_barrier_t go;
	const char *top;
	uint64_t deadline = al_now_ms() + DEADLINE_MS;

	(void)state;
	if (geteuid() != 0)
		skip(); /* inputs are idmapped to their owners as root only */
	raise_fd_limit();
	top = make_tmp();
	assert_int_equal(chmod(top, 0755), 0);
	assert_int_equal(pthread_barrier_init(&go, NULL, NATIVE), 0);
	for (int i = 0; i < NATIVE; i++) {
		struct native *n = &nat[i];
		char path[160], text[32];
		uid_t owner = 41000 + (uid_t)i; /* a different host user for each */

		n->i = i;
		n->go = &go;
		snprintf(n->input, sizeof(n->input), "%s/in-%d", top, i);
		assert_int_equal(mkdir(n->input, 0700), 0);
		snprintf(path, sizeof(path), "%s/f", n->input);
		int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		assert_true(fd >= 0);
		int len = snprintf(text, sizeof(text), "secret-%d\n", i);
		assert_int_equal(write(fd, text, (size_t)len), len);
		assert_int_equal(fchown(fd, owner, owner), 0);
		close(fd);
		assert_int_equal(chown(n->input, owner, owner), 0);
		/* Its own input, shown as owned by the sandbox user; an empty
		 * scratch; none of the other runs' inputs (their host paths,
		 * and this one's, are not in its tree). */
		snprintf(n->script, sizeof(n->script),
			 "cat /input/f; stat -c %%u /input/f; ls -A /tmp | wc -l; "
			 "echo mine-%d > /tmp/mark; echo ready; read x; echo \"got $x\"; "
			 "cat /tmp/mark; ls -A /tmp; "
			 "for d in %s/in-*; do cat \"$d/f\" 2>/dev/null && echo LEAK; done; "
			 "exit %d",
			 i, top, i + 1);
		n->plan = plan_for(n->script, n->input);
		assert_int_equal(pipe2(n->in, O_CLOEXEC), 0);
	}
	for (int i = 0; i < NATIVE; i++)
		assert_int_equal(pthread_create(&th[i], NULL, native_thread, &nat[i]), 0);
	/* Every run says "ready" before any gets its stdin: all alive at
	 * once. A run that failed to start never does; its thread ends. */
	for (bool all = false; !all;) {
		all = true;
		for (int i = 0; i < NATIVE; i++)
			all = all && atomic_load(&nat[i].cap.ready);
		/* A run stuck in its setup may never end: fail without
		 * joining (the process's exit ends the sandboxes, which die
		 * with their parent). */
		for (int i = 0; !all && i < NATIVE; i++) {
			if (atomic_load(&nat[i].cap.ready))
				continue;
			if (atomic_load(&nat[i].finished))
				fail_msg("run %d ended before it said ready: %s%s%s", i,
					 nat[i].start_err, nat[i].start_err[0] ? "; " : "",
					 nat[i].res.msg);
			if (al_now_ms() > deadline)
				fail_msg("run %d never said ready", i);
		}
		if (!all)
			usleep(20000);
	}
	for (int i = 0; i < NATIVE; i++) {
		char tok[32];
		int len = snprintf(tok, sizeof(tok), "token-%d\n", i * 104729);
		assert_int_equal(write(nat[i].in[1], tok, (size_t)len), len);
		close(nat[i].in[1]);
	}
	for (int i = 0; i < NATIVE; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	for (int i = 0; i < NATIVE; i++) {
		struct native *n = &nat[i];
		char want[256];
		snprintf(want, sizeof(want),
			 "secret-%d\n1000\n0\nready\ngot token-%d\nmine-%d\nmark\n", i, i * 104729,
			 i);
		if (n->start_r < 0)
			fail_msg("run %d: al_run_start: %s", i, n->start_err);
		assert_string_equal(n->cap.out, want);
		assert_int_equal(n->res.reason, AL_END_EXITED);
		assert_int_equal(n->res.exit_code, i + 1);
		/* Every check in force, the user namespace's limits read from
		 * inside this run's namespace among them. */
		bool ns_limits = false;
		for (size_t k = 0; k < n->res.n_checks; k++) {
			if (!n->res.checks[k].in_force)
				fail_msg("run %d: %s: %s", i, n->res.checks[k].layer,
					 n->res.checks[k].detail);
			ns_limits |= strcmp(n->res.checks[k].layer, "userns limits") == 0;
		}
		assert_true(ns_limits);
		/* Its own host ids. */
		assert_true(n->res.have_ids);
		for (int j = 0; j < i; j++)
			assert_int_not_equal(n->res.ids.uid, nat[j].res.ids.uid);
	}
	for (int i = 0; i < NATIVE; i++) {
		close(nat[i].in[0]);
		al_plan_free(nat[i].plan);
	}
	pthread_barrier_destroy(&go);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_clone_stacks),
	    cmocka_unit_test_teardown(test_many_fake_runs, remove_tmp),
	    cmocka_unit_test_teardown(test_native_runs_in_threads, remove_tmp),
	};
	/* As a CLI or a daemon would: the run layer leaves SIGPIPE to its
	 * caller. */
	signal(SIGPIPE, SIG_IGN);
	/* The fake backend's pid namespace lives in a user namespace. */
	pid_t probe = fork();
	if (probe == 0)
		_exit(unshare(CLONE_NEWUSER | CLONE_NEWPID) == 0 ? 0 : 1);
	int st = 0;
	if (probe < 0 || waitpid(probe, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		printf("SKIP: user namespaces are not available here (the fake backend needs "
		       "one)\n");
		return 77;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
