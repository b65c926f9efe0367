/* Sessions: a run whose sandbox stays alive and runs execs (a request with
 * session set, run.h). Each exec is forked by the sandbox's own init,
 * confined exactly as a first command, in its own cgroup below the
 * sandbox's (cgroup v1; see cgroup/child.h) with its own limits; it has its
 * own stdio relay, output cap, timeout, result record and exec.start /
 * exec.end events in the run's audit stream. Everything is driven from the
 * run's loop (al_run_step); callbacks come from there. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"

struct al_run;
struct al_exec;

struct al_exec_request {
	char *const *argv; /* argv[0] searched in the plan's PATH */
	char *const *env;  /* NAME=VALUE, added to the plan's (NULL: none) */
	const char *cwd;   /* NULL: the plan's workdir */
	bool tty;	   /* a terminal: not supported yet (EOPNOTSUPP) */
	unsigned short rows, cols;
	bool ttyfilter;
	int64_t timeout_ms;    /* 0: none beyond the sandbox's lifetime */
	uint64_t memory_bytes; /* 0: the sandbox's */
	uint64_t output_bytes; /* stdout + stderr; 0: the sandbox's */
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
 * its reason becomes killed. */
int al_exec_signal(struct al_exec *x, int sig);
/* Its terminal's size (ignored without one). */
void al_exec_resize(struct al_exec *x, unsigned short rows, unsigned short cols);
const char *al_exec_id(const struct al_exec *x);

/* The record as JSON (new reference). */
json_t *al_exec_result_json(const struct al_exec_result *res);
const char *al_exec_reason_name(enum al_exec_reason r);

/* The scratch's root (O_PATH, borrowed), or -1 (no scratch: the fake
 * backend). */
int al_run_scratch_fd(struct al_run *run);

/* Freeze and thaw the sandbox: not supported yet (-EOPNOTSUPP). */
int al_run_pause(struct al_run *run);
int al_run_resume(struct al_run *run);
