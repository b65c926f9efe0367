/* Sessions: a run whose sandbox stays alive and runs execs (a request with
 * session set, run.h). Each exec is forked by the sandbox's own init,
 * confined exactly as a first command, in its own cgroup below the
 * sandbox's (cgroup v1 and v2; see cgroup/child.h) with its own limits; it
 * has its own stdio relay and output cap (supervisor/relay.h, as the run's
 * command has), timeout, result record and exec.start / exec.end events in
 * the run's audit stream. Everything is driven from the
 * run's loop (al_run_step); callbacks come from there. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/error.h"

struct al_run;
struct al_exec;

struct al_exec_request {
	char *const *argv; /* argv[0] searched in the plan's PATH */
	char *const *env;  /* NAME=VALUE, added to the plan's (NULL: none) */
	const char *cwd;   /* NULL: the plan's workdir */
	/* A terminal of its own (a pty from the sandbox's devpts, its
	 * controlling terminal) instead of pipes: stdin goes to it, its output
	 * comes as stdout (which 0), al_exec_close_stdin types ^D. rows x cols
	 * (0: 24 x 80), changed by al_exec_resize. */
	bool tty;
	unsigned short rows, cols;
	/* tty: re-encode its output as ttyfilter.c does for `airlock run -t`
	 * to a terminal (no query the client's terminal would answer, no mode
	 * that reports). Front ends should default it to true. */
	bool ttyfilter;
	int64_t timeout_ms;    /* 0: none beyond the sandbox's lifetime */
	uint64_t memory_bytes; /* 0: the sandbox's */
	uint64_t output_bytes; /* stdout + stderr; 0: the sandbox's */
	/* A file operation of the daemon's file API instead of a program
	 * (backend.h al_sandbox_exec.file_op: argv [OP, PATH], env, cwd and
	 * tty unused), for a backend with AL_BACKEND_EXEC_FILES only
	 * (-EOPNOTSUPP otherwise). Its output_bytes is the caller's cap on
	 * what the operation returns, not bounded by the sandbox's output
	 * limit (it is no output of the sandbox's code). */
	bool file_op;
	/* > 0: the exec's stdin is this descriptor (borrowed: a sealed memfd
	 * of a file to write, read from its offset to its end) instead of a
	 * pipe; al_exec_stdin then answers -EPIPE. */
	int stdin_fd;
};

enum al_exec_reason {
	AL_EXEC_EXITED,
	AL_EXEC_SIGNALED,
	AL_EXEC_TIMEOUT,
	AL_EXEC_MEMORY,
	AL_EXEC_OUTPUT,
	AL_EXEC_KILLED, /* al_exec_signal(SIGKILL), or the run ended under it */
	AL_EXEC_FAILED, /* could not be executed (exec_errno) */
};

struct al_exec_result {
	char id[16];
	enum al_exec_reason reason;
	int exit_code; /* 128 + signal when signaled */
	int signal;
	int exec_errno;
	uint64_t cpu_user_us, cpu_system_us, memory_peak;
	uint64_t stdout_bytes, stderr_bytes;
	int64_t duration_ms;
};

struct al_exec_io {
	void *data;
	/* A chunk of its output (which: 0 stdout, 1 stderr). Must not block. */
	void (*output)(void *data, int which, const void *buf, size_t len);
	/* Optional: the backend reported its process (host pid), which can
	 * be signalled from now on and is about to exec the command. */
	void (*started)(void *data, pid_t pid);
	/* It ended and its output is drained; the exec is freed right after
	 * this returns (res too). */
	void (*ended)(void *data, const struct al_exec_result *res);
};

/* True while the session takes execs (started, not ended). */
bool al_run_session_ready(const struct al_run *run);

/* Start an exec (io borrowed until ended). *ret is the run's until its
 * ended() callback. -EAGAIN: not ready yet, or max_execs running;
 * -EOPNOTSUPP: not a session, or tty; other errors with err set. */
int al_run_exec(struct al_run *run, const struct al_exec_request *req, const struct al_exec_io *io,
		struct al_exec **ret, struct al_error *err);

/* Queue bytes for its stdin (at most 1 MiB waiting: -ENOBUFS); -EPIPE
 * once closed. */
int al_exec_stdin(struct al_exec *x, const void *buf, size_t len);
/* Its stdin ends once what is queued was written. */
void al_exec_close_stdin(struct al_exec *x);
/* Send sig to it (its process group); SIGKILL kills everything of it and
 * its reason becomes killed. A signal asked for before the exec started
 * (init has not reported it yet) is sent when it starts. */
int al_exec_signal(struct al_exec *x, int sig);
/* Stop reading its output (which: 0 stdout, a terminal's too; 1 stderr)
 * while the caller cannot take more, and read it again (hold false).
 * Once it has ended, output still held after the drain grace (200 ms) is
 * lost, as output held open elsewhere is. */
void al_exec_output_hold(struct al_exec *x, int which, bool hold);
/* Its terminal's size (ignored without one; asked before its terminal
 * came, set on it when it comes). */
void al_exec_resize(struct al_exec *x, unsigned short rows, unsigned short cols);
const char *al_exec_id(const struct al_exec *x);

/* The record as JSON (new reference). */
json_t *al_exec_result_json(const struct al_exec_result *res);
const char *al_exec_reason_name(enum al_exec_reason r);

/* The scratch's root (O_PATH, borrowed), or -1 (no scratch: the fake
 * backend; microvm and vm, whose scratch is in the guest). */
int al_run_scratch_fd(struct al_run *run);
/* Whether the run's backend does file operations in its sandbox
 * (al_exec_request.file_op; AL_BACKEND_EXEC_FILES). */
bool al_run_exec_files(const struct al_run *run);

/* Claim a warm pool's sandbox (a run started with pool and session, ready,
 * not claimed before) for the request whose final plan is wanted
 * (borrowed; must outlive the run) with its credentials (borrowed, may be
 * NULL: owned by the caller, the session process that holds only this
 * sandbox's). Refused with -EINVAL and every reason in why (may be NULL)
 * when wanted does not fit the sandbox (policy/plan-fit.h: make it cold
 * instead); otherwise the gateway serves wanted's allowlist and cred's
 * secrets before this returns, the lifetime counts from now
 * (wanted->timeout_ms), each exec gets wanted's environment (the
 * request's own over it) and workdir, and run.claim is audited. Other
 * errors with err set: -EAGAIN not ready, -EALREADY claimed, -EPERM not a
 * pool's; a gateway that failed ends the run. */
struct al_plan;
struct al_cred;
struct al_errors;
int al_run_claim(struct al_run *run, const struct al_plan *wanted, struct al_cred *cred,
		 struct al_errors *why, struct al_error *err);

/* Freeze and thaw the sandbox (the cgroup freezer: v2 cgroup.freeze, v1 the
 * run's own freezer cgroup). Paused, nothing in it runs or uses CPU, its
 * memory is kept, and its clocks stop: the run's deadline and each exec's
 * timeout move by the time spent paused, and an exec's duration_ms leaves
 * it out. al_run_exec answers -EAGAIN while paused; killing or signalling
 * the run thaws it first. Both return 0 (also when already so), -ESRCH
 * (the session has ended), -EOPNOTSUPP (not a session, or no cgroup that
 * can be frozen) or another -errno (warned on stderr); audited as
 * run.pause / run.resume with the time left and the time paused. */
int al_run_pause(struct al_run *run);
int al_run_resume(struct al_run *run);
bool al_run_paused(const struct al_run *run);
/* Extend the run's lifetime: its deadline falls ms_from_now of running
 * time from now (a pause stops that clock too), sooner or later than it
 * was. What the old deadline bounded is made anew for the new one, in the
 * gateway's process (cred/store.h al_cred_set_deadline): per-request
 * tokens are bounded by the new deadline, each run token the gateway
 * presents is minted again (same jti, exp the new deadline), and the
 * interception CA's leaves are minted again to end a minute after it. The
 * CA itself, whose certificate is in the sandbox's files, was made valid
 * for AL_TLS_CA_MAX_LIFETIME (7 days) from the run's start: an extension
 * past its end less a minute is refused (-ERANGE). An exposed token (in
 * the sandbox's environment) is not renewed. Audited as run.extend. 0, or
 * -errno with err set: -ESRCH the run has ended, -EPERM a pool's sandbox
 * not claimed yet, -EINVAL 0 ms, -EAGAIN the gateway's channel was full
 * (the deadline is unchanged). */
int al_run_extend(struct al_run *run, uint64_t ms_from_now, struct al_error *err);

/* The host pids of the sandbox's processes (its cgroup's, sorted; *ret
 * the caller's), and its cgroup's counters. -ENOENT with no cgroup. */
int al_run_pids(struct al_run *run, pid_t **ret, size_t *n);
struct al_cgroup_stats;
int al_run_cgroup_stats(struct al_run *run, struct al_cgroup_stats *st);

/* The running time left before the run's deadline (ms; 0: none or due). */
uint64_t al_run_remaining_ms(const struct al_run *run);
/* Every audit line the run's gateway has sent so far emitted now (its
 * refusals: the gateway sends each before it answers the refused client),
 * for a caller about to report what was denied during something that just
 * ended. An exec's end does this itself. */
void al_run_sync_gateway(struct al_run *run);
