/* A session's execs in the run layer (session.h): each one's stdio pipes,
 * relay, output cap, timeout and record; the backend starts it in the
 * sandbox and reports its start and end. */
#include "run/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <time.h>
#include <termios.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/sys.h"
#include "core/util.h"
#include "cgroup/cgroup.h"
#include "supervisor/relay.h"

#define DEFAULT_MAX_EXECS 16
#define STDIN_QUEUE_MAX	  (1u << 20)
#define DRAIN_GRACE_MS	  200 /* after its end, output still held open elsewhere */

struct al_exec {
	struct al_run *run;
	uint32_t num;
	struct al_exec_io io;
	struct al_exec_result res;
	/* Its stdio (supervisor/relay.h): the pipes' our ends, or a terminal
	 * exec's pty master as stdout and a dup of it as stdin, from the
	 * backend's terminal event; its output cap; its stdin queue. */
	struct al_relay relay;
	struct al_timer *timeout, *drain;
	bool ended_seen, forced, done;
	/* started: the backend reported it running (it can be signalled);
	 * pending_sigs: signals asked for before that (bit sig - 1), sent
	 * when it starts. */
	bool started;
	uint64_t pending_sigs;
	bool tty, tty_wait; /* tty_wait: the master has not come yet */
	/* A size asked for while tty_wait (a resize right after the exec was
	 * made): set on the master when it comes, else the size init gave the
	 * pty would stay and the resize be lost. 0: none. */
	unsigned short want_rows, want_cols;
	enum al_exec_reason forced_reason;
	int status;
	struct timespec t0;
	uint64_t paused0; /* the run's time paused when it started */
	/* its timeout: when it falls (al_now_ms; 0 none), and what was left
	 * of it when the sandbox was paused */
	uint64_t due, left;
};

static const char *const reasons[] = {"exited", "signaled", "timeout",	  "memory",
				      "output", "killed",   "exec-failed"};

const char *al_exec_reason_name(enum al_exec_reason r)
{
	return (unsigned)r < AL_ARRAY_SIZE(reasons) ? reasons[r] : "unknown";
}

json_t *al_exec_result_json(const struct al_exec_result *r)
{
	json_t *o = json_pack(
	    "{s:s, s:s, s:i, s:I, s:I, s:I, s:I, s:I, s:I}", "exec_id", r->id, "reason",
	    al_exec_reason_name(r->reason), "exit_code", r->exit_code, "cpu_user_us",
	    (json_int_t)r->cpu_user_us, "cpu_system_us", (json_int_t)r->cpu_system_us,
	    "memory_peak", (json_int_t)r->memory_peak, "stdout_bytes", (json_int_t)r->stdout_bytes,
	    "stderr_bytes", (json_int_t)r->stderr_bytes, "duration_ms", (json_int_t)r->duration_ms);
	if (r->signal)
		json_object_set_new(o, "signal", json_string(strsignal(r->signal)));
	if (r->exec_errno)
		json_object_set_new(o, "errno", json_string(strerrorname_np(r->exec_errno)));
	return o;
}

static struct al_exec *by_num(struct al_run *run, uint32_t num)
{
	for (size_t i = 0; i < run->n_execs; i++)
		if (run->execs[i]->num == num)
			return run->execs[i];
	return NULL;
}

static void exec_free(struct al_exec *x)
{
	al_timer_freep(&x->timeout);
	al_timer_freep(&x->drain);
	al_relay_close(&x->relay);
	free(x);
}

static bool output_open(const struct al_exec *x)
{
	return al_relay_out_open(&x->relay, 0) || al_relay_out_open(&x->relay, 1);
}

/* Its end and its output's EOF are both in (or the drain grace is over):
 * the record, exec.end, the caller's callback. */
static void maybe_done(struct al_exec *x, bool force)
{
	struct al_run *run = x->run;
	struct timespec t1;

	if (x->done || !x->ended_seen || (!force && output_open(x)))
		return;
	x->done = true;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	/* Its running time: time paused is not counted. */
	x->res.duration_ms = (t1.tv_sec - x->t0.tv_sec) * 1000 +
			     (t1.tv_nsec - x->t0.tv_nsec) / 1000000 -
			     (int64_t)(al_supervisor_paused_ms(run->sup) - x->paused0);
	for (size_t i = 0; i < run->n_execs; i++)
		if (run->execs[i] == x)
			run->execs[i] = run->execs[--run->n_execs];
	/* What the gateway refused the exec is in before its end is told. */
	al_supervisor_sync_gateway(run->sup);
	json_t *o = al_exec_result_json(&x->res);
	al_audit_emit(run->req.audit, "exec.end", o);
	if (x->io.ended)
		x->io.ended(x->io.data, &x->res);
	exec_free(x);
}

static int run_backend_signal(struct al_exec *x, int sig)
{
	struct al_sandbox *sb = &x->run->sb;

	/* Asked for, not started yet: the backend has no process to signal
	 * until init reports it; the signal waits for that (ev_started). */
	if (!x->started && !x->ended_seen && sig > 0 && sig <= 64) {
		x->pending_sigs |= 1ULL << (sig - 1);
		return 0;
	}
	return sb->ops && sb->ops->exec_signal ? sb->ops->exec_signal(sb, x->num, sig) : -ESRCH;
}

static void stop_exec(struct al_exec *x, enum al_exec_reason why)
{
	if (!x->forced) {
		x->forced = true;
		x->forced_reason = why;
	}
	if (run_backend_signal(x, SIGKILL) < 0)
		al_debug("exec %s: kill: not running", x->res.id);
}

/* Its relay's callbacks: output to the caller, the cap stops it, an
 * output's end may be the last thing awaited. */
static void relay_output(void *data, int which, const char *buf, size_t len)
{
	struct al_exec *x = data;

	if (x->io.output)
		x->io.output(x->io.data, which, buf, len);
}

static void relay_over(void *data, int which)
{
	(void)which;
	stop_exec(data, AL_EXEC_OUTPUT);
}

static void relay_eof(void *data, int which)
{
	(void)which;
	maybe_done(data, false);
}

static const struct al_relay_ops relay_ops = {
    .output = relay_output, .over = relay_over, .eof = relay_eof};

static void on_timeout(struct al_timer *t, uint64_t n, void *data)
{
	(void)t;
	(void)n;
	stop_exec(data, AL_EXEC_TIMEOUT);
}

static void on_drain(struct al_timer *t, uint64_t n, void *data)
{
	(void)t;
	(void)n;
	maybe_done(data, true);
}

/* Its pty's master: the output read from it, stdin written to a dup. */
static void ev_terminal(void *data, uint32_t id, int master)
{
	struct al_exec *x = by_num(data, id);
	struct al_error err = {0};

	if (!x || !x->tty_wait) {
		close(master);
		return;
	}
	x->tty_wait = false;
	/* One description, read and written through two descriptors. */
	int in = fcntl(master, F_DUPFD_CLOEXEC, 3);
	int r = in < 0 ? al_error_setsys(&err, errno, "dup of its pty's master") : 0;
	if (r == 0 && (r = al_relay_out(&x->relay, 0, master, &err)) < 0)
		close(in);
	else if (r == 0)
		r = al_relay_in(&x->relay, in, &err);
	else
		close(master);
	if (r == 0 && x->want_rows)
		al_exec_resize(x, x->want_rows, x->want_cols);
	if (r < 0) {
		al_warn("warning: exec %s: its terminal: %s", x->res.id, err.msg);
		al_relay_in_drop(&x->relay);
		stop_exec(x, AL_EXEC_KILLED);
	}
}

static void ev_started(void *data, uint32_t id, pid_t pid)
{
	struct al_exec *x = by_num(data, id);
	if (!x)
		return;
	x->started = true;
	al_audit_emit(x->run->req.audit, "exec.start",
		      json_pack("{s:s, s:i}", "exec_id", x->res.id, "pid", (int)pid));
	/* What was asked before it started, now: a kill alone ends it;
	 * otherwise each signal once, in number order. */
	uint64_t pend = x->pending_sigs;
	x->pending_sigs = 0;
	if (pend & (1ULL << (SIGKILL - 1)))
		pend = 1ULL << (SIGKILL - 1);
	for (int sig = 1; sig <= 64; sig++)
		if ((pend & (1ULL << (sig - 1))) && run_backend_signal(x, sig) < 0)
			al_debug("exec %s: signal %d: not running", x->res.id, sig);
	if (x->io.started)
		x->io.started(x->io.data, pid);
}

static void ev_ended(void *data, uint32_t id, int status, int exec_err, uint64_t user_us,
		     uint64_t system_us, uint64_t memory_peak, bool oom)
{
	struct al_exec *x = by_num(data, id);
	struct al_exec_result *r;

	if (!x)
		return;
	r = &x->res;
	x->ended_seen = true;
	r->cpu_user_us = user_us;
	r->cpu_system_us = system_us;
	r->memory_peak = memory_peak;
	r->exec_errno = exec_err;
	if (WIFSIGNALED(status)) {
		r->signal = WTERMSIG(status);
		r->exit_code = 128 + r->signal;
		r->reason = AL_EXEC_SIGNALED;
	} else {
		r->exit_code = WEXITSTATUS(status);
		r->reason = AL_EXEC_EXITED;
	}
	if (exec_err)
		r->reason = AL_EXEC_FAILED;
	else if (oom)
		r->reason = AL_EXEC_MEMORY;
	else if (x->forced)
		r->reason = x->forced_reason;
	al_timer_disarm(x->timeout);
	/* Output a process of it still holds would keep it open: it was
	 * killed with its cgroup, so EOF is near; do not wait past this. */
	if (output_open(x) && x->drain)
		al_timer_arm(x->drain, DRAIN_GRACE_MS, false);
	maybe_done(x, false);
}

void al_session_attach(struct al_run *run)
{
	run->exec_ev = (struct al_exec_events){
	    .data = run, .started = ev_started, .terminal = ev_terminal, .ended = ev_ended};
	run->sb.session = true;
	run->sb.exec_events = &run->exec_ev;
}

void al_session_end(struct al_run *run)
{
	/* The sandbox is gone or going: every exec ends as killed. */
	while (run->n_execs) {
		struct al_exec *x = run->execs[run->n_execs - 1];
		if (!x->forced) {
			x->forced = true;
			x->forced_reason = AL_EXEC_KILLED;
		}
		if (!x->ended_seen) {
			/* Its end may finish it (output drained) and free it:
			 * find it again by its number. */
			uint32_t num = x->num;
			ev_ended(run, num, SIGKILL, 0, 0, 0, 0, false);
			x = NULL;
			for (size_t i = 0; i < run->n_execs && !x; i++)
				if (run->execs[i]->num == num)
					x = run->execs[i];
			if (!x)
				continue;
		}
		maybe_done(x, true);
	}
	free(run->execs);
	run->execs = NULL;
}

bool al_run_session_ready(const struct al_run *run)
{
	return run->req.session && !run->ended && al_supervisor_running(run->sup);
}

/* Its three pipes: the far ends in child[], ours in its relay. With
 * stdin_fd (> 0), a dup of it is its stdin instead of a pipe. */
static int make_pipes(struct al_exec *x, int stdin_fd, int child[3], struct al_error *err)
{
	int p[3][2];

	for (int i = 0; i < 3; i++) {
		if (i == 0 && stdin_fd > 0)
			p[0][0] = fcntl(stdin_fd, F_DUPFD_CLOEXEC, 3), p[0][1] = -1;
		if (i == 0 && stdin_fd > 0 ? p[0][0] < 0 : pipe2(p[i], O_CLOEXEC) < 0) {
			int e = errno;
			for (int j = 0; j < i; j++) {
				close(p[j][0]);
				if (p[j][1] >= 0)
					close(p[j][1]);
			}
			return al_error_setsys(err, e, "exec: pipe2");
		}
	}
	child[0] = p[0][0];
	child[1] = p[1][1];
	child[2] = p[2][1];
	int r = p[0][1] < 0 ? 0 : al_relay_in(&x->relay, p[0][1], err);
	if (r == 0)
		r = al_relay_out(&x->relay, 0, p[1][0], err);
	else
		close(p[1][0]);
	if (r == 0)
		r = al_relay_out(&x->relay, 1, p[2][0], err);
	else
		close(p[2][0]);
	return r;
}

int al_run_exec(struct al_run *run, const struct al_exec_request *req, const struct al_exec_io *io,
		struct al_exec **ret, struct al_error *err)
{
	const struct al_plan *p = run->req.plan;
	unsigned max = run->req.max_execs ? run->req.max_execs : DEFAULT_MAX_EXECS;
	int child[3] = {-1, -1, -1}, r;

	*ret = NULL;
	if (!run->req.session)
		return al_error_set(err, EOPNOTSUPP, "exec: the run is not a session");
	if (!al_run_session_ready(run))
		return al_error_set(err, EAGAIN, "exec: the session is not ready (or has ended)");
	if (run->paused)
		return al_error_set(err, EAGAIN, "exec: the sandbox is paused (resume it first)");
	if (!run->sb.ops->exec)
		return al_error_set(err, EOPNOTSUPP, "exec: backend %s has no sessions",
				    run->sb.ops->name);
	if (run->req.pool && !run->claim)
		return al_error_set(err, EPERM,
				    "exec: a pool's sandbox runs nothing before it is claimed");
	if (req->file_op &&
	    (!al_run_exec_files(run) || req->tty || !req->argv[0] || !req->argv[1] || req->argv[2]))
		return al_error_set(err, EOPNOTSUPP,
				    "exec: backend %s does no file operations in its sandbox",
				    run->sb.ops->name);
	if (run->n_execs >= max)
		return al_error_set(err, EAGAIN, "exec: %u execs already run in this sandbox", max);
	if (req->timeout_ms < 0)
		return al_error_set(err, EINVAL, "exec: timeout_ms %lld is negative",
				    (long long)req->timeout_ms);
	/* An exec's own limits stay within the plan's, which the operator
	 * policy bounded: a lower one is taken, a higher one refused (the
	 * plan's 0 is "none", so anything goes under it). */
	char have[32], asked[32];
	if (req->memory_bytes && p->memory_bytes && req->memory_bytes > p->memory_bytes) {
		al_format_size(p->memory_bytes, have, sizeof(have));
		al_format_size(req->memory_bytes, asked, sizeof(asked));
		return al_error_set(err, EINVAL,
				    "exec: memory %s is over the sandbox's memory limit %s (an "
				    "exec's limits may only be lower)",
				    asked, have);
	}
	if (!req->file_op && req->output_bytes && p->output_bytes &&
	    req->output_bytes > p->output_bytes) {
		al_format_size(p->output_bytes, have, sizeof(have));
		al_format_size(req->output_bytes, asked, sizeof(asked));
		return al_error_set(err, EINVAL,
				    "exec: output %s is over the sandbox's output limit %s (an "
				    "exec's limits may only be lower)",
				    asked, have);
	}
	struct al_exec *x = xcalloc(1, sizeof(*x));
	x->run = run;
	x->num = ++run->next_exec;
	x->io = *io;
	uint64_t cap = req->output_bytes || req->file_op ? req->output_bytes : p->output_bytes;
	al_relay_init(&x->relay, run->loop, &relay_ops, x, cap ? cap : UINT64_MAX,
		      &x->res.stdout_bytes, &x->res.stderr_bytes, STDIN_QUEUE_MAX);
	snprintf(x->res.id, sizeof(x->res.id), "e%u", (unsigned)x->num);
	clock_gettime(CLOCK_MONOTONIC, &x->t0);
	x->tty = x->tty_wait = req->tty;
	x->relay.src[0].filtered = req->tty && req->ttyfilter;
	if (!req->tty && (r = make_pipes(x, req->stdin_fd, child, err)) < 0)
		goto fail;
	if (!req->tty && req->stdin_fd > 0)
		al_relay_in_close(&x->relay); /* its stdin is the caller's: none to queue */
	if (!(x->timeout = al_loop_timer(run->loop, on_timeout, x)) ||
	    !(x->drain = al_loop_timer(run->loop, on_drain, x))) {
		r = al_error_setsys(err, errno, "exec: its timers");
		goto fail;
	}
	if (req->timeout_ms > 0 &&
	    (r = al_timer_arm(x->timeout, (uint64_t)req->timeout_ms, false)) < 0) {
		r = al_error_setsys(err, -r, "exec: its timer");
		goto fail;
	}
	/* A claimed pool's sandbox: the claim's environment under the
	 * request's (the backend copies it into its message at once). */
	char **env = al_claim_exec_env(run, req->env);
	if (req->timeout_ms > 0)
		x->due = al_now_ms() + (uint64_t)req->timeout_ms;
	x->paused0 = al_supervisor_paused_ms(run->sup);
	const struct al_sandbox_exec sx = {
	    .id = x->num,
	    .argv = req->argv,
	    .env = env ? env : req->env,
	    .cwd = al_claim_exec_cwd(run, req->cwd),
	    .stdin_rd = child[0],
	    .stdout_wr = child[1],
	    .stderr_wr = child[2],
	    .tty = req->tty,
	    .rows = req->rows,
	    .cols = req->cols,
	    .memory_bytes = req->memory_bytes ? req->memory_bytes : p->memory_bytes,
	    .pids = p->pids,
	    .memory_asked = req->memory_bytes != 0,
	    .file_op = req->file_op,
	};
	r = run->sb.ops->exec(&run->sb, &sx, err);
	al_strv_free(env);
	if (r < 0)
		goto fail;
	for (int i = 0; i < 3; i++)
		al_closep(&child[i]);
	run->execs = realloc(run->execs, (run->n_execs + 1) * sizeof(*run->execs));
	if (!run->execs)
		abort();
	run->execs[run->n_execs++] = x;
	json_t *argv = json_array();
	for (size_t i = 0; req->argv[i]; i++)
		json_array_append_new(argv, al_json_text(req->argv[i]));
	json_t *ev = json_pack("{s:s, s:o, s:s?, s:I}", "exec_id", x->res.id, "argv", argv, "cwd",
			       req->cwd, "timeout_ms", (json_int_t)req->timeout_ms);
	if (req->file_op)
		json_object_set_new(ev, "file_op", json_true());
	al_audit_emit(run->req.audit, "exec.request", ev);
	*ret = x;
	return 0;
fail:
	for (int i = 0; i < 3; i++)
		al_closep(&child[i]);
	exec_free(x);
	return r;
}

int al_exec_stdin(struct al_exec *x, const void *buf, size_t len)
{
	/* A terminal exec's input is queued until its master comes. */
	int r = al_relay_in_push(&x->relay, buf, len);
	if (r == 0)
		al_relay_in_flush(&x->relay);
	return r;
}

void al_exec_close_stdin(struct al_exec *x)
{
	/* A terminal has no end of input but the one typed: ^D (at the start
	 * of a line in canonical mode, as a user would). */
	if (x->tty && al_relay_in_open(&x->relay))
		al_exec_stdin(x, "\004", 1);
	al_relay_in_close(&x->relay);
}

int al_exec_signal(struct al_exec *x, int sig)
{
	if (sig == SIGKILL && !x->forced) {
		x->forced = true;
		x->forced_reason = AL_EXEC_KILLED;
	}
	return run_backend_signal(x, sig);
}

void al_exec_output_hold(struct al_exec *x, int which, bool hold)
{
	if (which == 0 || which == 1)
		al_relay_out_pause(&x->relay, which, hold);
}

void al_exec_resize(struct al_exec *x, unsigned short rows, unsigned short cols)
{
	struct winsize ws = {.ws_row = rows, .ws_col = cols};

	if (x->tty && x->tty_wait && rows && cols) {
		x->want_rows = rows;
		x->want_cols = cols;
		return;
	}
	/* The kernel sends its process group SIGWINCH. */
	if (x->tty && x->relay.src[0].fd >= 0 && rows && cols &&
	    ioctl(x->relay.src[0].fd, TIOCSWINSZ, &ws) < 0)
		al_debug("exec %s: resize: %s", x->res.id, strerror(errno));
}

const char *al_exec_id(const struct al_exec *x)
{
	return x->res.id;
}

int al_run_scratch_fd(struct al_run *run)
{
	return al_supervisor_scratch_fd(run->sup);
}

bool al_run_exec_files(const struct al_run *run)
{
	const struct al_backend_ops *o = run->sb.ops;
	return o && o->facts && (o->facts->features & AL_BACKEND_EXEC_FILES);
}

/* Stop (paused) or restart each exec's timeout: what was left of it is
 * what it has after the pause. */
static void exec_clocks(struct al_run *run, bool paused)
{
	uint64_t now = al_now_ms();

	for (size_t i = 0; i < run->n_execs; i++) {
		struct al_exec *x = run->execs[i];
		if (!x->due || x->ended_seen)
			continue;
		if (paused) {
			x->left = x->due > now ? x->due - now : 0;
			al_timer_disarm(x->timeout);
		} else {
			x->due = now + x->left;
			al_timer_arm(x->timeout, x->left, false); /* 0: due at once */
		}
	}
}

static int set_paused(struct al_run *run, bool paused, const char *event)
{
	struct al_error err = {0};
	int r;

	if (!run->req.session)
		return -EOPNOTSUPP;
	if (run->ended || !al_supervisor_running(run->sup))
		return -ESRCH;
	if (run->paused == paused)
		return 0;
	if (!run->sb.ops->pause)
		return -EOPNOTSUPP;
	if ((r = run->sb.ops->pause(&run->sb, paused, &err)) < 0) {
		al_warn("warning: %s: %s", event, err.msg);
		return r;
	}
	run->paused = paused;
	al_supervisor_pause_clock(run->sup, paused);
	exec_clocks(run, paused);
	al_audit_emit(run->req.audit, event,
		      json_pack("{s:I, s:I}", "remaining_ms",
				(json_int_t)al_supervisor_remaining_ms(run->sup), "paused_ms",
				(json_int_t)al_supervisor_paused_ms(run->sup)));
	return 0;
}

int al_run_pause(struct al_run *run)
{
	return set_paused(run, true, "run.pause");
}

int al_run_resume(struct al_run *run)
{
	return set_paused(run, false, "run.resume");
}

bool al_run_paused(const struct al_run *run)
{
	return run->paused;
}

uint64_t al_run_remaining_ms(const struct al_run *run)
{
	return run->sup ? al_supervisor_remaining_ms(run->sup) : 0;
}

int al_run_extend(struct al_run *run, uint64_t ms_from_now, struct al_error *err)
{
	int r;

	if (run->ended || !run->sup || !al_supervisor_running(run->sup))
		return al_error_set(err, ESRCH, "extend: the run has ended (or not started)");
	if (run->req.pool && !run->claim)
		return al_error_set(err, EPERM,
				    "extend: a pool's sandbox has no lifetime before its claim");
	if ((r = al_supervisor_extend(run->sup, ms_from_now, err)) < 0)
		return r;
	al_audit_emit(run->req.audit, "run.extend",
		      json_pack("{s:I, s:b}", "remaining_ms",
				(json_int_t)al_supervisor_remaining_ms(run->sup), "paused",
				run->paused));
	return 0;
}

void al_session_thaw(struct al_run *run)
{
	struct al_error err = {0};

	if (!run->paused)
		return;
	if (run->sb.ops && run->sb.ops->pause && run->sb.ops->pause(&run->sb, false, &err) < 0)
		al_warn("warning: thawing the sandbox to end it: %s", err.msg);
	run->paused = false;
	if (run->sup)
		al_supervisor_pause_clock(run->sup, false);
	exec_clocks(run, false);
}

void al_run_sync_gateway(struct al_run *run)
{
	al_supervisor_sync_gateway(run->sup);
}

int al_run_pids(struct al_run *run, pid_t **ret, size_t *n)
{
	return al_cgroup_pids(run->sb.cg, ret, n);
}

int al_run_cgroup_stats(struct al_run *run, struct al_cgroup_stats *st)
{
	if (!run->sb.cg)
		return -ENOENT;
	al_cgroup_stats(run->sb.cg, st);
	return 0;
}
