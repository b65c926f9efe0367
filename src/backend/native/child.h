/* The child side of the native backend: everything that runs after clone3.
 *
 * The child is pid 1 of the new pid namespace. It carries out the plan's
 * steps (the table in child.c; steps.c), then stays as the sandbox's init: it forks the
 * command, forwards signals to it, reaps orphans, and reports the command's
 * wait status to the supervisor. When it exits, the kernel kills every
 * other process in the namespace, which is how nothing outlives the run.
 *
 * Parent and child talk over a SOCK_SEQPACKET socketpair with fixed-size
 * messages (no parsing on either side). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <signal.h>
#include <stdint.h>
#include <sys/types.h>

#include "cgroup/cgroup.h"
#include "policy/plan.h"

enum al_sync_type {
	AL_SYNC_GO = 1,	     /* parent → child: go on (after the id maps; after the checks) */
	AL_SYNC_ERROR,	     /* child → parent: a setup step failed */
	AL_SYNC_LISTENER,    /* child → parent: the seccomp notification fd (SCM_RIGHTS) */
	AL_SYNC_SOCKDIAG,    /* child → parent: a NETLINK_SOCK_DIAG socket in the
			      * sandbox's network namespace (SCM_RIGHTS) */
	AL_SYNC_GATEWAY,     /* child → parent: a gateway listening socket (SCM_RIGHTS),
			      * status = enum al_gateway_listener */
	AL_SYNC_CAPTURE,     /* child → parent: a NETLINK_NETFILTER socket in the
			      * sandbox's network namespace, for the capture rules */
	AL_SYNC_SCRATCH,     /* child → parent: an O_PATH fd of the scratch's root
			      * (SCM_RIGHTS), for copies in and out */
	AL_SYNC_TERMINAL,    /* child → parent: the master of the command's pty, from
			      * the sandbox's own devpts (SCM_RIGHTS; plan->tty) */
	AL_SYNC_READY,	     /* child → parent: every layer is applied; status = landlock
			      * ABI in force (0 = none); waits for AL_SYNC_GO */
	AL_SYNC_EXEC_FAILED, /* child → parent: execve of the command failed */
	AL_SYNC_RUNNING,     /* child → parent: the command was exec'd */
	AL_SYNC_EXIT,	     /* child → parent: the command ended and the namespace is
			      * empty; status = wait status. Init has already left the
			      * run's cgroups (v1) and exits right after sending it. */
	/* Sessions (the last AL_SYNC_GO has status AL_GO_SESSION: init starts
	 * no command and serves execs until it is stopped). */
	AL_SYNC_EXEC,	      /* parent → init: struct al_sync_exec + its strings, the
			       * exec's stdin, stdout, stderr attached (SCM_RIGHTS) */
	AL_SYNC_EXEC_GO,      /* parent → init: exec_id may exec now (status 0) or is
			       * to be killed before it execs (status 1) */
	AL_SYNC_EXEC_STARTED, /* init → parent: exec_id was forked, pid (in the
			       * sandbox); its pidfd attached; it waits for EXEC_GO */
	AL_SYNC_EXEC_END,     /* init → parent: exec_id ended (reaped); status = wait
			       * status, utime/stime its CPU (wait4), err: errno of a
			       * failed exec (then status is 126 or 127 exited) */
	AL_SYNC_EXEC_TTY,     /* init → parent: the master of exec_id's pty, from the
			       * sandbox's devpts (SCM_RIGHTS); sent before its STARTED */
	AL_SYNC_STOP,	      /* parent → init: stop the session (kill everything,
			       * report AL_SYNC_EXIT). A message, not a signal: this
			       * socket is the supervisor's alone, while a signal's
			       * sender can be forged from inside (see session.c) */
};

/* AL_SYNC_GO's status for the last GO: a session, no command. */
#define AL_GO_SESSION 1

struct al_sync_msg {
	uint32_t type;
	int32_t err;	  /* positive errno */
	int32_t status;	  /* see the types */
	int64_t utime_us; /* EXIT: CPU of everything init reaped (RUSAGE_CHILDREN) */
	int64_t stime_us;
	uint32_t exec_id; /* EXEC_*: which exec */
	int32_t pid;	  /* EXEC_STARTED: its pid in the sandbox */
	char step[32];	  /* ERROR: failed step name */
	char msg[256];	  /* ERROR / EXEC_FAILED: what failed */
};

/* An exec request: this header, then argc + envc + 1 strings, each ending
 * in NUL (argv, env entries NAME=VALUE added to the plan's, cwd: "" for
 * the plan's workdir), len bytes in all. The whole message is at most
 * AL_EXEC_MSG_MAX bytes; both sides check every length against it. */
#define AL_EXEC_MSG_MAX	 32768
#define AL_EXEC_MAX_ARGS 1024 /* argc + envc */
struct al_sync_exec {
	uint32_t type; /* AL_SYNC_EXEC */
	uint32_t exec_id;
	uint32_t argc, envc;
	uint32_t len;	     /* bytes of strings after the header */
	uint32_t flags;	     /* AL_EXEC_FLAG_* */
	uint16_t rows, cols; /* AL_EXEC_FLAG_TTY: the terminal's size */
};

/* The exec gets a terminal of its own: init opens a pty from the sandbox's
 * devpts, makes its slave the exec's stdio and controlling terminal, and
 * sends the master back (AL_SYNC_EXEC_TTY); no stdio is attached to the
 * request then. */
#define AL_EXEC_FLAG_TTY 1u

/* Pack an exec request into buf (AL_EXEC_MSG_MAX bytes): returns its
 * length, or -E2BIG (too long, too many strings) / -EINVAL (no argv[0],
 * an env entry without '='). Pure. */
ssize_t al_exec_pack(void *buf, uint32_t exec_id, char *const *argv, char *const *env,
		     const char *cwd);
/* Check and unpack n received bytes in place: argv and env (NULL-ended,
 * each with room for AL_EXEC_MAX_ARGS + 1 pointers) point into buf; *cwd
 * is NULL for the plan's workdir. Returns 0 or -EINVAL. Pure. */
int al_exec_unpack(void *buf, size_t n, uint32_t *exec_id, char **argv, char **env,
		   const char **cwd);

/* Init serving a session (child.c, after the last AL_SYNC_GO): fork each
 * exec on AL_SYNC_EXEC, report it, reap everything, and on AL_SYNC_STOP
 * kill everything and report AL_SYNC_EXIT (it takes no signal as a stop).
 * It never blocks on an exec. Never returns. */
_Noreturn void al_session_init(const struct al_plan *plan, int sync, const int *cg_leave,
			       size_t n_cg);
/* The end of init (child.c): kill and reap everything, leave the cgroups,
 * report AL_SYNC_EXIT with status, exit. */
_Noreturn void al_init_finish(int sync, int status, const int *cg_leave, size_t n_cg);

/* Sent by the supervisor to a one-shot run's init to stop the run: init
 * kills every other process, reaps them (so their CPU time is counted)
 * and reports as usual. A real-time signal, so it never collides with one
 * the command uses. Init does not check who sent it: in a one-shot run
 * every other process is the command's, which may end itself anyway. A
 * session's init takes AL_SYNC_STOP instead. */
#define AL_SIGNAL_STOP_ALL (SIGRTMIN + 2)

/* What the child inherits from clone besides the plan. */
struct al_child_fds {
	int sync;      /* child's end of the socketpair */
	int stdin_rd;  /* becomes fd 0 */
	int stdout_wr; /* becomes fd 1 */
	int stderr_wr; /* becomes fd 2 */
	/* cgroup v1 (see al_cgroup_task_fds): "tasks" files of the run's
	 * cgroups, to move ourselves in first thing, and of the supervisor's,
	 * for init to move itself out before it reports the end. */
	int cg_enter[AL_CGROUP_MAX_FDS];
	int cg_leave[AL_CGROUP_MAX_FDS];
	size_t n_cg;
	/* As root: the task's inputs as detached mounts, by al_mount_op.input
	 * (close-on-exec; each is closed once attached). */
	const int *inputs;
	/* A session: init serves execs (al_session_init) instead of the
	 * plan's command. */
	bool session;
};

/* Run the setup pipeline and then act as init. Never returns; exits 125
 * after reporting a failed step. */
struct al_native_plan;
_Noreturn void al_sandbox_child(const struct al_plan *plan, const struct al_native_plan *np,
				const struct al_child_fds *fds);

/* The sandbox init alone: fork and exec the plan's command, forward
 * signals, reap, report AL_SYNC_RUNNING / EXEC_FAILED / EXIT on sync and
 * exit. al_sandbox_child() ends here; the fake backend calls it directly.
 * Never returns. */
_Noreturn void al_sandbox_init(const struct al_plan *plan, int sync, const int *cg_leave,
			       size_t n_cg);

/* A container's own seccomp program (plan->root->seccomp), on top of
 * airlock's, installed in the command's process alone right before it
 * execs (init keeps only airlock's): 0, or -1 with errno. */
int al_own_seccomp(const struct al_plan *p);

/* Search PATH from envp (like execvp, without allocating) and exec argv;
 * returns the errno of the most telling failure. */
int al_exec_path(char *const *argv, char *const *envp);

/* Name of setup step i in order, or NULL past the last (for -v and tests). */
const char *al_sandbox_step_name(size_t i);
