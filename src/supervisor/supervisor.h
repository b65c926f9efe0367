/* The supervisor: one per run, in the run's event loop. It owns the
 * command's stdio (relayed and counted, so the sandbox never holds a host
 * terminal), the wall-clock timer, the meter every limit reads, the egress
 * gateway and the signals passed on; it hears from the sandbox only through
 * struct al_sandbox_events and acts on it only through struct
 * al_sandbox_ctl, so it knows no backend. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "audit/audit.h"
#include "core/loop.h"
#include "cgroup/cgroup.h"
#include "core/error.h"
#include "net/layout.h"
#include "policy/plan.h"
#include "supervisor/meter.h"
#include "supervisor/result.h"

/* What happens to a sandbox, as its backend reports it (in neutral terms:
 * the supervisor knows no backend). Every callback gets data. */
struct al_sandbox_events {
	void *data;
	struct al_meter *meter;	   /* fed with the backend's measurements */
	struct al_run_result *res; /* the backend's own fields: checks, denials */
	/* A gateway listening socket inside the sandbox's network (the fd is
	 * the callee's). */
	void (*listener)(void *data, enum al_gateway_listener kind, int fd);
	/* Before the listeners, when they are on the host's network (any
	 * host user can connect to them): the gateway accepts only clients
	 * whose socket uid owns, looked up on diag (a NETLINK_SOCK_DIAG
	 * socket, the callee's). */
	void (*peers)(void *data, uid_t uid, int diag);
	/* The scratch's root (fd borrowed), which the backend reads after
	 * the run for --copy-out: the supervisor keeps read access to it when
	 * it confines itself. Before ready. */
	void (*scratch)(void *data, int fd);
	/* The master of the command's terminal (plan->tty), made inside the
	 * sandbox (the fd is the callee's): relayed as the command's stdio. */
	void (*terminal)(void *data, int fd);
	/* Built and checked from outside; the command waits for release. */
	void (*ready)(void *data);
	/* The command was started. */
	void (*running)(void *data);
	/* The command ended with wait status; nothing else is left running. */
	void (*exited)(void *data, int status);
	/* The command could not be executed (err: errno). */
	void (*exec_failed)(void *data, int err, const char *what);
	/* Setup (or a check) failed: nothing ran; the backend stops the
	 * sandbox itself. err: errno or 0. */
	void (*failed)(void *data, const char *step, int err, const char *msg);
	/* The sandbox is gone; everything it reported came first. */
	void (*gone)(void *data);
};

/* How a sandbox ended, as its backend saw it. */
struct al_sandbox_end {
	bool reported;	  /* exited() came: status is the command's */
	int code, status; /* else how it ended: CLD_EXITED or CLD_KILLED, and the status */
	uint64_t user_us; /* CPU of everything in the sandbox, for when no cgroup counts it */
	uint64_t system_us;
	bool empty; /* nothing of the sandbox runs any more (its files hold still) */
	/* Init shares the command's uid on this layer (process): a signal
	 * that killed it may have come from the sandbox's own code, and ends
	 * a running sandbox as that signal, not as a failure of airlock's. */
	bool init_killable;
};

/* What the supervisor asks of the sandbox (the run layer binds it to the
 * backend's ops). */
struct al_sandbox_ctl {
	void *data;
	void (*release)(void *data);	    /* after ready: start the command */
	void (*stop)(void *data);	    /* stop everything, counting its CPU if possible */
	int (*signal)(void *data, int sig); /* to the command (SIGKILL: to everything) */
	/* The command is gone or the run is being torn down: wait for the
	 * sandbox's end; its final counters go to the meter. */
	void (*finish)(void *data, struct al_sandbox_end *end);
	/* A directory the backend removes a file of its own from at the end
	 * (the host id slot's, ids/slots.h), which a confined supervisor must
	 * keep; -1: none. */
	int remove_dirfd;
	bool remove_tree; /* a whole tree beneath it (directories too) */
	int slot_dirfd;	  /* and a slot's file from here (-1: none; gvisor) */
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
	/* With a terminal (plan->tty): the size it starts with (0: 24x80).
	 * Raw mode on the caller's own terminal is the caller's to set. */
	unsigned short rows, cols;
};

struct al_supervisor_config {
	const struct al_plan *plan;
	struct al_audit *audit; /* may be NULL */
	const char *run_id;	/* may be NULL; the gateway tells the operator's decider */
	struct al_cred *cred;	/* the run's credentials (cred/store.h), or NULL */
	struct al_loop *loop;	/* where the run's fds are watched */
	const struct al_supervisor_io *io;
	/* The process holds only this sandbox (the CLI): confine it before
	 * the command starts, keeping confine_dirfd (or -1) writable. A
	 * daemon cannot confine itself; it leaves this false. */
	bool confine_self;
	int confine_dirfd;
	/* A session (run/session.h): the scratch's root is kept for it. */
	bool session;
	/* A warm pool's sandbox (docs/pool.md): its gateway starts held, with
	 * no credentials, refusing everything until al_supervisor_claim(). */
	bool held;
};

struct al_supervisor;

/* A supervisor for one run, before its sandbox exists: the backend is
 * given al_supervisor_events() to report to. Nothing process-wide is
 * touched (no signal mask, no fixed fds, no RUSAGE_CHILDREN); the caller
 * ignores SIGPIPE. */
struct al_supervisor *al_supervisor_new(const struct al_supervisor_config *cfg);
const struct al_sandbox_events *al_supervisor_events(struct al_supervisor *s);

/* With a gateway in the plan, fork its process now, before the backend
 * makes the sandbox: its start (resolver, interception's trust stores,
 * confinement) then runs while the child sets itself up, and the
 * listeners the child hands over go to it as they come. Without this call
 * the first listener starts it. 0 without a gateway; on failure nothing
 * was started. */
int al_supervisor_start_gateway(struct al_supervisor *s, struct al_error *err);

/* The sandbox is started: take over our ends of its stdio (closed as
 * they finish), start the wall clock, and (confine_self) prepare our own
 * confinement, keeping cg's directories. On failure the sandbox is
 * stopped. */
int al_supervisor_attach(struct al_supervisor *s, const struct al_sandbox_ctl *ctl, int stdin_wr,
			 int stdout_rd, int stderr_rd, const struct al_cgroup *cg,
			 struct al_error *err);

/* True once the command is gone and its output drained. */
bool al_supervisor_done(const struct al_supervisor *s);

/* A signal for the run (the CLI's SIGINT, SIGTERM, SIGHUP, SIGQUIT): passed
 * on to the command once it runs; before that, or on a second SIGINT or
 * SIGTERM, the sandbox is stopped and the run ends as killed by sig. */
void al_supervisor_signal(struct al_supervisor *s, int sig);

/* tty: the caller's terminal is now rows x cols (SIGWINCH): the
 * sandbox's pty gets that size. Ignored without a terminal, or when either
 * is 0. */
void al_supervisor_resize(struct al_supervisor *s, unsigned short rows, unsigned short cols);

/* The sandbox is being killed from outside (al_run_kill): the run ends as
 * killed by sig, unless a limit, the timeout or a failed setup ended it
 * first. */
void al_supervisor_killed(struct al_supervisor *s, int sig);

/* Once done, or to end early (the loop failed): wait for the sandbox's
 * end, read the final counters, and fill *res. */
void al_supervisor_finish(struct al_supervisor *s, struct al_run_result *res);

/* The scratch's root (O_PATH, borrowed) the backend reported, kept for
 * --copy-out or a session; -1 if none. */
int al_supervisor_scratch_fd(const struct al_supervisor *s);

/* True once the command was started (a session: once it takes execs). */
bool al_supervisor_running(const struct al_supervisor *s);

/* A held sandbox claimed: the gateway serves wanted's allowlist, rule
 * options and cred's secrets (borrowed; may be NULL), and the lifetime
 * (wanted->timeout_ms) counts from now. 0, or -errno with err set. */
int al_supervisor_claim(struct al_supervisor *s, const struct al_plan *wanted,
			const struct al_cred *cred, struct al_error *err);
/* A session's wall clock (clock.c). Paused (al_run_pause), the deadline's
 * timer stops and the deadline moves by the time spent paused; the time
 * left is what runs before it. set_remaining moves the deadline to ms of
 * running time from now (al_run_extend). Before attach they do nothing. */
void al_supervisor_pause_clock(struct al_supervisor *s, bool paused);
uint64_t al_supervisor_remaining_ms(const struct al_supervisor *s);
int al_supervisor_set_remaining(struct al_supervisor *s, uint64_t ms);
/* Extend the lifetime: ms of running time from now (its pauses left
 * out), and the gateway told the new deadline so that the run's tokens
 * and its CA's leaves follow (al_cred_set_deadline). Refused (ERANGE) past
 * the end of the run's interception CA; ESRCH when not running; an error
 * telling the gateway leaves the deadline as it was. 0, or -errno with
 * err set. */
int al_supervisor_extend(struct al_supervisor *s, uint64_t ms, struct al_error *err);
/* The time spent paused so far (ms). */
uint64_t al_supervisor_paused_ms(const struct al_supervisor *s);
/* The gateway's waiting messages (its audit lines) handled now
 * (al_gateway_proc_drain); nothing without a gateway. */
void al_supervisor_sync_gateway(struct al_supervisor *s);

void al_supervisor_free(struct al_supervisor *s);
