/* The supervisor: one single-threaded epoll loop in the parent that owns
 * the sandbox's init (through a pidfd), the sync socket, the stdio pipes
 * (relayed, so the sandbox never holds a host terminal), the wall-clock
 * timer and the forwarded signals. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/error.h"
#include "policy/plan.h"

enum al_end_reason {
	AL_END_EXITED,      /* the command exited */
	AL_END_SIGNALED,    /* the command died by a signal */
	AL_END_TIMEOUT,     /* wall clock: the sandbox was killed */
	AL_END_KILLED,      /* airlock was told to stop and killed the sandbox */
	AL_END_SETUP_ERROR, /* a setup step failed; nothing ran */
	AL_END_EXEC_FAILED, /* the command could not be executed */
};

struct al_run_result {
	enum al_end_reason reason;
	int exit_code;   /* what airlock exits with (see DESIGN.md) */
	int signal;      /* SIGNALED / KILLED: the signal */
	uint64_t wall_ms;
	uint64_t stdout_bytes;
	uint64_t stderr_bytes;
	/* SETUP_ERROR and EXEC_FAILED */
	char step[32];
	int err;
	char msg[256];
};

/* What a backend hands over: the init process and our ends of its pipes.
 * The supervisor takes ownership of the fds and closes them. */
struct al_supervised {
	pid_t pid;
	int pidfd;
	int sync;
	int stdin_wr;
	int stdout_rd;
	int stderr_rd;
	bool exiting; /* init reported the end and emptied the namespace */
};

/* Block the signals the supervisor forwards (SIGINT, SIGTERM, SIGHUP,
 * SIGQUIT) so none is lost between clone and the loop, and ignore SIGPIPE.
 * Call before starting the sandbox. */
void al_supervisor_block_signals(void);

/* Run the loop until the sandbox's init is gone and its output drained,
 * then fill *res. Returns 0, or a negative errno when the loop itself
 * failed (the sandbox is killed first). */
int al_supervise(const struct al_plan *plan, struct al_supervised *sv, struct al_run_result *res,
		 struct al_error *err);

/* One line describing how the run ended, or NULL when it ended normally
 * (the command exited or died by a signal of its own). */
const char *al_result_describe(const struct al_run_result *res, char *buf, size_t len);
