/* The supervisor: one single-threaded epoll loop in the parent that owns
 * the sandbox's init (through a pidfd), the sync socket, the stdio pipes
 * (relayed and counted, so the sandbox never holds a host terminal), the
 * wall-clock timer, the limit checks on the run's cgroup, the seccomp
 * notification fd and the forwarded signals. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "audit/audit.h"
#include "core/loop.h"
#include "cgroup/cgroup.h"
#include "core/error.h"
#include "gateway/gateway.h"
#include "policy/plan.h"
#include "supervisor/result.h"

/* What a backend hands over: the init process and our ends of its pipes.
 * The supervisor closes them as they finish. */
struct al_supervised {
	pid_t pid;
	int pidfd;
	int sync;
	int stdin_wr;
	int stdout_rd;
	int stderr_rd;
	bool exiting;	    /* init reported the end, emptied the namespace and left the cgroup */
	pid_t rules_helper; /* the gateway's nft helper, still running; 0 when none */
	int rules_errfd;
};

/* Where the sandbox's stdio goes. */
struct al_supervisor_io {
	int stdin_fd; /* read for the sandbox's stdin; -1: it reads EOF */
	/* Written with the sandbox's stdout and stderr (never blocking:
	 * whatever a slow reader leaves waits, and the sandbox's pipe is not
	 * read meanwhile); -1 discards (the bytes still count). */
	int stdout_fd, stderr_fd;
	/* Instead of the two fds: called with each chunk (which: 0 stdout,
	 * 1 stderr). Must not block. */
	void (*output)(void *data, int which, const void *buf, size_t len);
	void *data;
};

struct al_supervisor_config {
	const struct al_plan *plan;
	struct al_supervised *sv; /* the backend's; its fds are closed as they finish */
	struct al_cgroup *cg;	  /* may be NULL */
	struct al_audit *audit;	  /* may be NULL */
	struct al_loop *loop;	  /* where the run's fds are watched */
	const struct al_supervisor_io *io;
	/* The process holds only this sandbox (the CLI): confine it before
	 * the command starts, keeping confine_dirfd (or -1) writable. A
	 * daemon cannot confine itself; it leaves this false. */
	bool confine_self;
	int confine_dirfd;
};

struct al_supervisor;

/* Watch a started sandbox in cfg->loop: its init, pipes, limits, timers,
 * seccomp notifications and gateway. Nothing process-wide is touched
 * (no signal mask, no fixed fds, no RUSAGE_CHILDREN); the caller ignores
 * SIGPIPE. On failure the sandbox is killed. */
int al_supervisor_start(const struct al_supervisor_config *cfg, struct al_supervisor **ret,
			struct al_error *err);

/* True once the command is gone and its output drained. */
bool al_supervisor_done(const struct al_supervisor *s);

/* A signal for the run (the CLI's SIGINT, SIGTERM, SIGHUP, SIGQUIT): passed
 * on to the command once it runs; before that, or on a second SIGINT or
 * SIGTERM, the sandbox is stopped and the run ends as killed by sig. */
void al_supervisor_signal(struct al_supervisor *s, int sig);

/* The sandbox is being killed from outside (the backend's kill): the run
 * ends as killed by sig, unless a limit or the timeout ended it first. */
void al_supervisor_killed(struct al_supervisor *s, int sig);

/* The loop failed: kill everything now. */
void al_supervisor_abort(struct al_supervisor *s);

/* Once done (or aborted): wait for init, read the final counters, and
 * fill *res. */
void al_supervisor_finish(struct al_supervisor *s, struct al_run_result *res);

void al_supervisor_free(struct al_supervisor *s);

/* Check, from outside, that the child's layers are what the plan asked
 * for: mounts and their flags, ids, capabilities, no_new_privs, seccomp,
 * landlock (as the child reported it), network interfaces, cgroup
 * membership, rlimits. Fills res->checks; returns the number not in force. */
int al_verify_child(const struct al_plan *plan, pid_t pid, int landlock_abi,
		    const struct al_cgroup *cg, struct al_run_result *res);
