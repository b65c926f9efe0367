/* run/run.h with the fake backend (a pid namespace, no other isolation):
 * start and wait, output through the callback, stdin from a pipe, the
 * timeout, kill, a start that fails, and two runs alive at once in this one
 * process; sessions: execs one after another and at once, files kept between
 * them, an exec's timeout and kill, stdin streamed, the session killed. This
 * is the model for testing the next backends. Needs user
 * namespaces (the fake backend's pid namespace lives in one). */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <time.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/backend.h"
#include "core/sys.h"
#include "core/util.h"
#include "policy/plan.h"
#include "policy/policy.h"
#include "run/run.h"
#include "run/session.h"

struct capture {
	char out[256], err[256];
	size_t n_out, n_err;
};

static void capture_cb(void *data, int which, const void *buf, size_t len)
{
	struct capture *c = data;
	char *dst = which == 0 ? c->out : c->err;
	size_t *n = which == 0 ? &c->n_out : &c->n_err;
	size_t room = sizeof(c->out) - 1 - *n;

	if (len > room)
		len = room;
	memcpy(dst + *n, buf, len);
	*n += len;
}

static struct al_plan *plan_for(const char *script, uint64_t timeout_ms)
{
	struct al_policy *p = al_policy_new("test");
	struct al_plan *plan = NULL;
	struct al_error err = {0};

	al_strv_push(&p->command, "/bin/sh");
	al_strv_push(&p->command, "-c");
	al_strv_push(&p->command, script);
	if (al_landlock_abi() == 0)
		p->landlock = AL_LANDLOCK_BEST_EFFORT;
	p->timeout_ms = timeout_ms;
	if (al_plan_build(p, 0, &plan, &err) < 0)
		fail_msg("al_plan_build: %s", err.msg);
	al_policy_free(p);
	return plan;
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	assert_non_null(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static struct al_run *start(const struct al_plan *plan, const struct al_supervisor_io *io)
{
	struct al_run_request req = {.plan = plan, .backend = &al_backend_fake, .result_dirfd = -1};
	struct al_run *run = NULL;
	struct al_error err = {0};

	if (al_run_start(&req, io, &run, &err) < 0)
		fail_msg("al_run_start: %s", err.msg);
	return run;
}

static void test_exit_and_output(void **state)
{
	struct capture cap = {0};
	struct al_supervisor_io io = {.stdin_fd = -1, .output = capture_cb, .data = &cap};
	struct al_plan *plan = plan_for("echo out; echo err >&2; read x || echo eof; exit 7", 0);
	int fds = count_fds();

	(void)state;
	struct al_run *run = start(plan, &io);
	const struct al_run_result *res = al_run_wait(run, NULL);
	assert_int_equal(res->reason, AL_END_EXITED);
	assert_int_equal(res->exit_code, 7);
	assert_string_equal(cap.out, "out\neof\n");
	assert_string_equal(cap.err, "err\n");
	assert_int_equal(res->stdout_bytes, 8);
	assert_int_equal(res->stderr_bytes, 4);
	al_run_free(run);
	assert_int_equal(count_fds(), fds); /* nothing left open */
	al_plan_free(plan);
}

static void test_timeout(void **state)
{
	struct al_supervisor_io io = {.stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1};
	struct al_plan *plan = plan_for("exec sleep 30", 200);

	(void)state;
	struct al_run *run = start(plan, &io);
	const struct al_run_result *res = al_run_wait(run, NULL);
	assert_int_equal(res->reason, AL_END_TIMEOUT);
	assert_int_equal(res->exit_code, 124);
	assert_true(res->wall_ms < 10000);
	al_run_free(run);
	al_plan_free(plan);
}

static void test_kill(void **state)
{
	struct capture cap = {0};
	struct al_supervisor_io io = {.stdin_fd = -1, .output = capture_cb, .data = &cap};
	struct al_plan *plan = plan_for("echo started; exec sleep 30", 0);

	(void)state;
	struct al_run *run = start(plan, &io);
	/* Once it runs (it said so), kill it through the backend. */
	for (int i = 0; i < 1000 && !cap.n_out; i++)
		assert_false(al_run_step(run, 10));
	assert_string_equal(cap.out, "started\n");
	assert_int_equal(al_run_kill(run), 0);
	const struct al_run_result *res = al_run_wait(run, NULL);
	assert_int_equal(res->reason, AL_END_KILLED);
	assert_int_equal(res->signal, SIGKILL);
	assert_int_equal(res->exit_code, 128 + SIGKILL);
	assert_true(res->wall_ms < 10000);
	assert_int_equal(al_run_kill(run), -ESRCH); /* ended */
	al_run_free(run);
	al_plan_free(plan);
}

static int failing_prepare(struct al_sandbox *sb, struct al_error *err)
{
	(void)sb;
	return al_error_set(err, ENOSPC, "test: no room for this sandbox");
}

static void test_failing_start(void **state)
{
	struct al_backend_ops broken = al_backend_fake;
	struct al_supervisor_io io = {.stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1};
	struct al_plan *plan = plan_for("exit 0", 0);
	struct al_run_request req = {.plan = plan, .backend = &broken, .result_dirfd = -1};
	struct al_run *run = NULL;
	struct al_error err = {0};
	int fds = count_fds();

	(void)state;
	broken.prepare = failing_prepare;
	assert_int_equal(al_run_start(&req, &io, &run, &err), -ENOSPC);
	assert_contains(err.msg, "no room for this sandbox");
	assert_non_null(run);
	const struct al_run_result *res = al_run_wait(run, NULL);
	assert_int_equal(res->reason, AL_END_SETUP_ERROR);
	assert_int_equal(res->exit_code, 125);
	assert_string_equal(res->step, "start");
	assert_contains(res->msg, "no room for this sandbox");
	assert_int_equal(al_run_kill(run), -ESRCH);
	al_run_free(run);
	assert_int_equal(count_fds(), fds);
	al_plan_free(plan);
}

/* Two runs in one process at once: A echoes its stdin, which the test
 * writes only once B has said something. A can only finish after B ran
 * while A was running. */
static void test_two_runs(void **state)
{
	struct capture ca = {0}, cb = {0};
	int in[2];

	(void)state;
	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	struct al_supervisor_io ioa = {.stdin_fd = in[0], .output = capture_cb, .data = &ca};
	struct al_supervisor_io iob = {.stdin_fd = -1, .output = capture_cb, .data = &cb};
	struct al_plan *pa = plan_for("read x; echo \"A got $x\"", 20000);
	struct al_plan *pb = plan_for("echo B", 20000);
	struct al_run *a = start(pa, &ioa);
	struct al_run *b = start(pb, &iob);
	bool a_done = false, b_done = false, wrote = false;

	for (int i = 0; i < 2000 && !(a_done && b_done); i++) {
		struct pollfd p[2] = {{.fd = al_loop_fd(al_run_loop(a)), .events = POLLIN},
				      {.fd = al_loop_fd(al_run_loop(b)), .events = POLLIN}};
		assert_true(poll(p, 2, 10) >= 0);
		if (!a_done)
			a_done = al_run_step(a, 0);
		if (!b_done)
			b_done = al_run_step(b, 0);
		if (!wrote && cb.n_out) {
			assert_false(a_done);
			assert_int_equal(write(in[1], "go\n", 3), 3);
			close(in[1]);
			wrote = true;
		}
	}
	assert_true(a_done);
	assert_true(b_done);
	assert_string_equal(cb.out, "B\n");
	assert_string_equal(ca.out, "A got go\n");
	assert_int_equal(al_run_wait(a, NULL)->exit_code, 0);
	assert_int_equal(al_run_wait(b, NULL)->exit_code, 0);
	al_run_free(a);
	al_run_free(b);
	close(in[0]);
	al_plan_free(pa);
	al_plan_free(pb);
}

/* Sessions. */
struct exec_done {
	struct capture cap;
	struct al_exec_result res;
	bool ended;
};

static void exec_ended_cb(void *data, const struct al_exec_result *res)
{
	struct exec_done *d = data;
	d->res = *res;
	d->ended = true;
}

static void exec_output_cb(void *data, int which, const void *buf, size_t len)
{
	capture_cb(&((struct exec_done *)data)->cap, which, buf, len);
}

static struct al_run *start_session(const struct al_plan *plan)
{
	static const struct al_supervisor_io io = {
	    .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1};
	struct al_run_request req = {
	    .plan = plan, .backend = &al_backend_fake, .result_dirfd = -1, .session = true};
	struct al_run *run = NULL;
	struct al_error err = {0};

	if (al_run_start(&req, &io, &run, &err) < 0)
		fail_msg("al_run_start: %s", err.msg);
	for (int i = 0; i < 1000 && !al_run_session_ready(run); i++)
		assert_false(al_run_step(run, 10));
	assert_true(al_run_session_ready(run));
	return run;
}

static struct al_exec *exec_start(struct al_run *run, const char *script, int64_t timeout_ms,
				  struct exec_done *d)
{
	char *argv[] = {"/bin/sh", "-c", (char *)script, NULL};
	char *env[] = {"GREETING=hi", NULL};
	struct al_exec_request req = {.argv = argv, .env = env, .timeout_ms = timeout_ms};
	struct al_exec_io io = {.data = d, .output = exec_output_cb, .ended = exec_ended_cb};
	struct al_exec *x = NULL;
	struct al_error err = {0};

	memset(d, 0, sizeof(*d));
	if (al_run_exec(run, &req, &io, &x, &err) < 0)
		fail_msg("al_run_exec: %s", err.msg);
	return x;
}

static void exec_wait(struct al_run *run, struct exec_done *d)
{
	for (int i = 0; i < 2000 && !d->ended; i++)
		assert_false(al_run_step(run, 10));
	assert_true(d->ended);
}

static void test_session_execs(void **state)
{
	char dir[] = "/tmp/airlock-session-XXXXXX", script[256];
	struct al_plan *plan = plan_for("exit 99", 0);
	struct exec_done a, b, c;
	int fds = count_fds();

	(void)state;
	assert_non_null(mkdtemp(dir));
	struct al_run *run = start_session(plan);
	/* The first writes a file, the second reads it: the sandbox's state
	 * lasts between execs. */
	snprintf(script, sizeof(script), "echo $GREETING > %s/f; echo one; exit 3", dir);
	exec_start(run, script, 0, &a);
	exec_wait(run, &a);
	assert_int_equal(a.res.reason, AL_EXEC_EXITED);
	assert_int_equal(a.res.exit_code, 3);
	assert_string_equal(a.cap.out, "one\n");
	assert_string_equal(a.res.id, "e1");
	snprintf(script, sizeof(script), "cat %s/f; echo err >&2; rm %s/f", dir, dir);
	exec_start(run, script, 0, &b);
	/* Two at once. */
	exec_start(run, "echo three", 0, &c);
	exec_wait(run, &b);
	exec_wait(run, &c);
	assert_string_equal(b.cap.out, "hi\n");
	assert_string_equal(b.cap.err, "err\n");
	assert_int_equal(b.res.exit_code, 0);
	assert_int_equal(b.res.stdout_bytes, 3);
	assert_string_equal(c.cap.out, "three\n");
	/* An exec that cannot be executed. */
	char *bad[] = {"/nonexistent/prog", NULL};
	struct al_exec_request breq = {.argv = bad};
	struct al_exec_io bio = {.data = &a, .output = exec_output_cb, .ended = exec_ended_cb};
	struct al_exec *x;
	struct al_error err = {0};
	memset(&a, 0, sizeof(a));
	assert_int_equal(al_run_exec(run, &breq, &bio, &x, &err), 0);
	exec_wait(run, &a);
	assert_int_equal(a.res.reason, AL_EXEC_FAILED);
	assert_int_equal(a.res.exec_errno, ENOENT);
	assert_int_equal(a.res.exit_code, 127);
	/* Bad requests say what was wrong. */
	char *empty[] = {NULL};
	breq.argv = empty;
	assert_int_equal(al_run_exec(run, &breq, &bio, &x, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "argv"));
	/* An exec's own limits may not be above the plan's. */
	breq.argv = bad;
	assert_true(plan->output_bytes != 0);
	breq.output_bytes = plan->output_bytes + 1;
	assert_int_equal(al_run_exec(run, &breq, &bio, &x, &err), -EINVAL);
	assert_contains(err.msg, "over the sandbox's output limit");
	breq.output_bytes = 0;
	assert_int_equal(al_run_kill(run), 0);
	const struct al_run_result *res = al_run_wait(run, NULL);
	assert_int_equal(res->reason, AL_END_KILLED);
	al_run_free(run);
	assert_int_equal(rmdir(dir), 0); /* the file was removed by an exec */
	assert_int_equal(count_fds(), fds);
	al_plan_free(plan);
}

static void test_session_timeout_kill_stdin(void **state)
{
	struct al_plan *plan = plan_for("exit 99", 0);
	struct exec_done a, b;
	int fds = count_fds();

	(void)state;
	struct al_run *run = start_session(plan);
	exec_start(run, "exec sleep 30", 200, &a);
	exec_wait(run, &a);
	assert_int_equal(a.res.reason, AL_EXEC_TIMEOUT);
	assert_int_equal(a.res.signal, SIGKILL);
	assert_true(a.res.duration_ms < 10000);
	/* Killed by the caller: sleep's child too (its process group). */
	struct al_exec *x = exec_start(run, "sleep 30 & echo started; wait", 0, &a);
	for (int i = 0; i < 1000 && !a.cap.n_out; i++)
		assert_false(al_run_step(run, 10));
	assert_int_equal(al_exec_signal(x, SIGKILL), 0);
	exec_wait(run, &a);
	assert_int_equal(a.res.reason, AL_EXEC_KILLED);
	/* stdin streamed in two parts, then closed. */
	x = exec_start(run, "cat; echo end", 0, &b);
	assert_int_equal(al_exec_stdin(x, "hel", 3), 0);
	assert_false(al_run_step(run, 10));
	assert_int_equal(al_exec_stdin(x, "lo\n", 3), 0);
	al_exec_close_stdin(x);
	assert_int_equal(al_exec_stdin(x, "x", 1), -EPIPE);
	exec_wait(run, &b);
	assert_string_equal(b.cap.out, "hello\nend\n");
	assert_int_equal(b.res.exit_code, 0);
	/* The session killed with an exec still running: it ends as killed,
	 * and nothing is left open. */
	exec_start(run, "exec sleep 30", 0, &a);
	assert_false(al_run_step(run, 10));
	assert_int_equal(al_run_kill(run), 0);
	const struct al_run_result *res = al_run_wait(run, NULL);
	assert_int_equal(res->reason, AL_END_KILLED);
	assert_true(a.ended);
	assert_int_equal(a.res.reason, AL_EXEC_KILLED);
	char *argv[] = {"/bin/true", NULL};
	struct al_exec_request req = {.argv = argv};
	struct al_exec_io io = {.data = &a, .ended = exec_ended_cb};
	struct al_error err = {0};
	assert_int_equal(al_run_exec(run, &req, &io, &x, &err), -EAGAIN); /* ended */
	al_run_free(run);
	assert_int_equal(count_fds(), fds);
	al_plan_free(plan);
}

/* A signal asked for right after the exec request, before init reported
 * the exec started (no step of the loop between them), is not lost: it is
 * sent when the exec starts. (It was lost: the exec ran on, and the
 * daemon's DELETE of a background exec answered 200 for nothing.) */
static void test_session_signal_before_start(void **state)
{
	struct al_plan *plan = plan_for("exit 99", 0);
	struct exec_done a;

	(void)state;
	struct al_run *run = start_session(plan);
	struct al_exec *x = exec_start(run, "exec sleep 30", 0, &a);
	assert_int_equal(al_exec_signal(x, SIGTERM), 0);
	exec_wait(run, &a);
	assert_int_equal(a.res.reason, AL_EXEC_SIGNALED);
	assert_int_equal(a.res.signal, SIGTERM);
	x = exec_start(run, "exec sleep 30", 0, &a);
	assert_int_equal(al_exec_signal(x, SIGSTOP), 0);
	assert_int_equal(al_exec_signal(x, SIGKILL), 0);
	exec_wait(run, &a);
	assert_int_equal(a.res.reason, AL_EXEC_KILLED);
	assert_int_equal(a.res.signal, SIGKILL);
	assert_true(a.res.duration_ms < 10000);
	assert_int_equal(al_run_kill(run), 0);
	al_run_wait(run, NULL);
	al_run_free(run);
	al_plan_free(plan);
}

/* A warm pool's sandbox: nothing runs before its claim; a request that does
 * not fit is refused with the field named; one that fits gives each exec
 * its environment and workdir, starts its lifetime and is audited; a
 * second claim is refused. */
struct claim_audit {
	int claims;
	json_t *last;
	json_int_t timeout_hit; /* limit.hit's limit_value for the timeout */
	json_int_t end_timeout; /* run.end's limits.timeout_ms */
};

static void claim_sink(void *data, const char *event, json_t *fields)
{
	struct claim_audit *a = data;

	if (strcmp(event, "run.claim") == 0) {
		a->claims++;
		json_decref(a->last);
		a->last = json_incref(fields);
	}
	if (strcmp(event, "limit.hit") == 0 &&
	    strcmp(json_string_value(json_object_get(fields, "limit")), "timeout") == 0)
		a->timeout_hit = json_integer_value(json_object_get(fields, "limit_value"));
	if (strcmp(event, "run.end") == 0)
		a->end_timeout = json_integer_value(
		    json_object_get(json_object_get(fields, "limits"), "timeout_ms"));
	json_decref(fields);
}

static void test_pool_claim(void **state)
{
	static const struct al_supervisor_io io = {
	    .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1};
	struct claim_audit seen = {0};
	struct al_audit *audit = al_audit_sink(claim_sink, &seen);
	struct al_plan *pooled = plan_for("exit 99", 60000);
	struct al_run_request req = {.plan = pooled,
				     .backend = &al_backend_fake,
				     .audit = audit,
				     .result_dirfd = -1,
				     .session = true,
				     .pool = true};
	struct al_run *run = NULL;
	struct al_error err = {0};
	struct al_errors why = {0};
	struct exec_done d;
	struct al_exec *x;
	char *argv[] = {"/bin/sh", "-c", "echo $A $B; pwd", NULL};
	char *env[] = {"B=request", NULL};
	struct al_exec_request xr = {.argv = argv, .env = env};
	struct al_exec_io xio = {.data = &d, .output = exec_output_cb, .ended = exec_ended_cb};

	(void)state;
	assert_int_equal(al_run_start(&req, &io, &run, &err), 0);
	for (int i = 0; i < 1000 && !al_run_session_ready(run); i++)
		assert_false(al_run_step(run, 10));
	assert_true(al_run_session_ready(run));
	/* Nothing before the claim. */
	assert_int_equal(al_run_exec(run, &xr, &xio, &x, &err), -EPERM);
	assert_contains(err.msg, "before it is claimed");

	/* Another memory limit: made cold, the field named. */
	struct al_policy *p = al_policy_new("test");
	al_strv_push(&p->command, "/bin/true");
	if (al_landlock_abi() == 0)
		p->landlock = AL_LANDLOCK_BEST_EFFORT;
	p->memory_bytes = 100 << 20;
	struct al_plan *big = NULL;
	assert_int_equal(al_plan_build(p, 0, &big, &err), 0);
	assert_int_equal(al_run_claim(run, big, NULL, &why, &err), -EINVAL);
	assert_contains(err.msg, "limits.memory");
	assert_true(why.n >= 1);
	assert_string_equal(why.v[0].path, "limits.memory");
	al_errors_clear(&why);
	assert_int_equal(seen.claims, 0);

	/* One that fits: its environment (the request's over it), its workdir
	 * and a short lifetime. */
	p->memory_bytes = 0;
	p->timeout_ms = 1500;
	al_strv_push(&p->env, "A=claimed");
	al_strv_push(&p->env, "B=claimed");
	struct al_plan *wanted = NULL;
	assert_int_equal(al_plan_build(p, 0, &wanted, &err), 0);
	free(wanted->workdir);
	wanted->workdir = xstrdup("/tmp");
	assert_int_equal(al_run_claim(run, wanted, NULL, NULL, &err), 0);
	assert_int_equal(seen.claims, 1);
	assert_int_equal(json_integer_value(json_object_get(seen.last, "timeout_ms")), 1500);
	assert_int_equal(al_run_claim(run, wanted, NULL, NULL, &err), -EALREADY);
	memset(&d, 0, sizeof(d));
	assert_int_equal(al_run_exec(run, &xr, &xio, &x, &err), 0);
	exec_wait(run, &d);
	assert_string_equal(d.cap.out, "claimed request\n/tmp\n");
	/* The lifetime counts from the claim: the session ends by it. */
	bool ended = false;
	for (int i = 0; i < 500 && !ended; i++)
		ended = al_run_step(run, 10);
	assert_true(ended);
	assert_int_equal(al_run_wait(run, NULL)->reason, AL_END_TIMEOUT);
	al_run_free(run);
	al_policy_free(p);
	al_plan_free(big);
	al_plan_free(wanted);
	al_plan_free(pooled);
	json_decref(seen.last);
	al_audit_close(audit);
}

/* Paused, an exec's timeout and the run's deadline stop, no exec starts,
 * and the time paused is not in the exec's duration; resumed, the timeout
 * runs out. (The fake backend stops the execs with SIGSTOP; the native one
 * freezes the cgroup: run_session.py.) */
static void test_session_pause(void **state)
{
	struct al_plan *plan = plan_for("exit 99", 60000);
	struct exec_done a, b;
	int fds = count_fds();

	(void)state;
	struct al_run *run = start_session(plan);
	uint64_t t0 = al_now_ms();
	exec_start(run, "exec sleep 30", 400, &a);
	while (al_now_ms() - t0 < 100)
		assert_false(al_run_step(run, 10));
	uint64_t rem0 = al_run_remaining_ms(run);
	assert_true(rem0 > 50000 && rem0 <= 60000);
	assert_int_equal(al_run_pause(run), 0);
	assert_true(al_run_paused(run));
	assert_int_equal(al_run_pause(run), 0); /* already */
	char *argv[] = {"/bin/true", NULL};
	struct al_exec_request req = {.argv = argv};
	struct al_exec_io io = {.data = &b, .ended = exec_ended_cb};
	struct al_error err = {0};
	struct al_exec *x;
	assert_int_equal(al_run_exec(run, &req, &io, &x, &err), -EAGAIN);
	assert_non_null(strstr(err.msg, "paused"));
	uint64_t tp = al_now_ms();
	while (al_now_ms() - tp < 700)
		assert_false(al_run_step(run, 10));
	assert_false(a.ended); /* its 400 ms did not run out while paused */
	assert_true(rem0 - al_run_remaining_ms(run) < 50);
	assert_int_equal(al_run_resume(run), 0);
	assert_false(al_run_paused(run));
	exec_wait(run, &a);
	uint64_t wall = al_now_ms() - t0;
	assert_int_equal(a.res.reason, AL_EXEC_TIMEOUT);
	assert_true(a.res.duration_ms >= 390);
	assert_true((uint64_t)a.res.duration_ms + 600 < wall);
	/* The deadline moved by the pause: what is left is what was left
	 * when it paused, less the running time since. */
	assert_true(rem0 - al_run_remaining_ms(run) < wall - 600);
	assert_int_equal(al_run_kill(run), 0);
	al_run_wait(run, NULL);
	assert_int_equal(al_run_pause(run), -ESRCH);
	al_run_free(run);
	assert_int_equal(count_fds(), fds);
	al_plan_free(plan);
}

/* al_run_extend: the deadline moves to the time asked for from now (later
 * or sooner), a pause stops it as before; 0 ms is refused, and so is a
 * run that has ended. The lifetime of 300 ms, extended to 60 s, does not
 * end the run at 300 ms; extended back to 200 ms, it does. */
static void test_session_extend(void **state)
{
	static const struct al_supervisor_io io = {
	    .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1};
	struct claim_audit seen = {0};
	struct al_audit *audit = al_audit_sink(claim_sink, &seen);
	struct al_plan *plan = plan_for("exit 99", 300);
	struct al_run_request req = {.plan = plan,
				     .backend = &al_backend_fake,
				     .audit = audit,
				     .result_dirfd = -1,
				     .session = true};
	struct al_error err = {0};
	struct al_run *run = NULL;

	(void)state;
	if (al_run_start(&req, &io, &run, &err) < 0)
		fail_msg("al_run_start: %s", err.msg);
	for (int i = 0; i < 1000 && !al_run_session_ready(run); i++)
		assert_false(al_run_step(run, 10));
	assert_true(al_run_session_ready(run));
	assert_true(al_run_remaining_ms(run) <= 300);
	assert_int_equal(al_run_extend(run, 60000, &err), 0);
	uint64_t rem = al_run_remaining_ms(run);
	assert_true(rem > 59000 && rem <= 60000);
	assert_int_equal(al_run_extend(run, 0, &err), -EINVAL);
	uint64_t t0 = al_now_ms();
	while (al_now_ms() - t0 < 500)
		assert_false(al_run_step(run, 10)); /* past the first deadline */
	assert_true(al_run_session_ready(run));
	assert_int_equal(al_run_pause(run), 0);
	assert_int_equal(al_run_extend(run, 200, &err), 0);
	assert_int_equal(al_run_remaining_ms(run), 200); /* paused: it stands still */
	assert_int_equal(al_run_resume(run), 0);
	bool ended = false;
	for (int i = 0; i < 1000 && !ended; i++)
		ended = al_run_step(run, 10);
	assert_true(ended);
	const struct al_run_result *res = al_run_wait(run, NULL);
	assert_int_equal(res->reason, AL_END_TIMEOUT);
	/* The timeout hit names the lifetime it ran: over 500 + 200 ms, not
	 * the plan's 300 nor the 60 s it was extended to first. */
	assert_true(seen.timeout_hit >= 700 && seen.timeout_hit < 30000);
	assert_int_equal(al_run_extend(run, 1000, &err), -ESRCH);
	al_run_free(run);
	al_audit_close(audit);
	json_decref(seen.last);
	al_plan_free(plan);
}

/* A held sandbox has no lifetime yet: the pool's plan's timeout (100 ms)
 * does not end it while it waits (300 ms here, longer on a busy machine),
 * the claim's lifetime (200 ms) does, and the audit (limit.hit, run.end's
 * limits) names the claim's. */
static void test_pool_held_lifetime(void **state)
{
	static const struct al_supervisor_io io = {
	    .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1};
	struct claim_audit seen = {0};
	struct al_audit *audit = al_audit_sink(claim_sink, &seen);
	struct al_plan *pooled = plan_for("exit 99", 100);
	struct al_plan *wanted = plan_for("exit 99", 200);
	struct al_run_request req = {.plan = pooled,
				     .backend = &al_backend_fake,
				     .audit = audit,
				     .result_dirfd = -1,
				     .session = true,
				     .pool = true};
	struct al_run *run = NULL;
	struct al_error err = {0};

	(void)state;
	assert_int_equal(al_run_start(&req, &io, &run, &err), 0);
	uint64_t until = al_now_ms() + 300;
	while (al_now_ms() < until)
		assert_false(al_run_step(run, 10));
	assert_true(al_run_session_ready(run));
	uint64_t claimed = al_now_ms();
	assert_int_equal(al_run_claim(run, wanted, NULL, NULL, &err), 0);
	bool ended = false;
	for (int i = 0; i < 1000 && !ended; i++)
		ended = al_run_step(run, 10);
	assert_true(ended);
	assert_true(al_now_ms() - claimed >= 200);
	assert_int_equal(al_run_wait(run, NULL)->reason, AL_END_TIMEOUT);
	assert_int_equal(seen.timeout_hit, 200);
	assert_int_equal(seen.end_timeout, 200); /* the record's lifetime is the claim's */
	al_run_free(run);
	al_plan_free(wanted);
	al_plan_free(pooled);
	json_decref(seen.last);
	al_audit_close(audit);
}

/* Where an exec has no cgroup of its own (the fake backend; docs/security.md,
 * "A session's execs") its end reaches its process group only: a process
 * that left it (setsid) lives on until the session ends, and the session's
 * end takes it. A memory limit of its own is refused there, not ignored.
 * The background writers sleep at most 2 s: bounded. */
static bool wait_file(struct al_run *run, const char *path, int ms)
{
	struct stat st;

	for (int i = 0; i < ms / 10; i++) {
		if (stat(path, &st) == 0)
			return true;
		assert_false(al_run_step(run, 10));
	}
	return stat(path, &st) == 0;
}

static void test_session_timeout_kills_escaped(void **state)
{
	char dir[] = "/tmp/airlock-session-XXXXXX", script[1024], group[300], escaped[300],
	     after[300];
	struct al_plan *plan = plan_for("exit 99", 0);
	struct exec_done a, b;
	struct stat st;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(group, sizeof(group), "%s/group", dir);
	snprintf(escaped, sizeof(escaped), "%s/escaped", dir);
	snprintf(after, sizeof(after), "%s/after", dir);
	struct al_run *run = start_session(plan);

	/* No cgroup of its own: its own memory limit is refused. */
	char *argv[] = {"/bin/true", NULL};
	struct al_exec_request mr = {.argv = argv, .memory_bytes = 64 << 20};
	struct al_exec_io mio = {.data = &a, .output = exec_output_cb, .ended = exec_ended_cb};
	struct al_exec *mx = NULL;
	struct al_error err = {0};
	assert_int_equal(al_run_exec(run, &mr, &mio, &mx, &err), -EOPNOTSUPP);
	assert_contains(err.msg, "memory_bytes");
	assert_contains(err.msg, "cgroup of its own");

	/* The timeout (2 s: time enough for the setsid below on a loaded
	 * machine) kills its process group (the writer at 4 s), not the
	 * process that left it (the one at 5 s). */
	snprintf(script, sizeof(script),
		 "(sleep 4; echo g > %s) & "
		 "setsid sh -c 'sleep 5; echo x > %s' </dev/null >/dev/null 2>&1 & exec sleep 30",
		 group, escaped);
	exec_start(run, script, 2000, &a);
	exec_wait(run, &a);
	assert_int_equal(a.res.reason, AL_EXEC_TIMEOUT);
	assert_true(wait_file(run, escaped, 20000));
	assert_int_not_equal(stat(group, &st), 0);

	/* The session's end takes what an exec left running. */
	snprintf(script, sizeof(script),
		 "setsid sh -c 'sleep 1; echo z > %s' </dev/null >/dev/null 2>&1 &", after);
	exec_start(run, script, 0, &b);
	exec_wait(run, &b);
	assert_int_equal(b.res.reason, AL_EXEC_EXITED);
	assert_int_equal(al_run_kill(run), 0);
	al_run_wait(run, NULL);
	al_run_free(run);
	struct timespec ts = {2, 0};
	nanosleep(&ts, NULL);
	assert_int_not_equal(stat(after, &st), 0);
	unlink(escaped);
	assert_int_equal(rmdir(dir), 0);
	al_plan_free(plan);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_exit_and_output),
	    cmocka_unit_test(test_timeout),
	    cmocka_unit_test(test_kill),
	    cmocka_unit_test(test_failing_start),
	    cmocka_unit_test(test_two_runs),
	    cmocka_unit_test(test_session_execs),
	    cmocka_unit_test(test_session_timeout_kill_stdin),
	    cmocka_unit_test(test_session_signal_before_start),
	    cmocka_unit_test(test_pool_claim),
	    cmocka_unit_test(test_session_pause),
	    cmocka_unit_test(test_session_extend),
	    cmocka_unit_test(test_pool_held_lifetime),
	    cmocka_unit_test(test_session_timeout_kills_escaped),
	};
	/* As a CLI would: the run layer leaves SIGPIPE to its caller. */
	signal(SIGPIPE, SIG_IGN);
	/* The fake backend's pid namespace lives in a user namespace. */
	pid_t probe = fork();
	if (probe == 0)
		_exit(unshare(CLONE_NEWUSER | CLONE_NEWPID) == 0 ? 0 : 1);
	int st = 0;
	if (probe < 0 || waitpid(probe, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		printf(
		    "SKIP: user namespaces are not available here (the fake backend needs one)\n");
		return 77;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
