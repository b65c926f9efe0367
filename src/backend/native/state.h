/* The native backend's own state of one sandbox (struct al_backend_state,
 * behind struct al_sandbox's private pointer). The fake backend runs
 * through the same init and monitor, so it uses this state too. Nothing
 * outside src/backend/ includes this header. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "backend/backend.h"
#include "ids/slots.h"

struct al_monitor;
struct al_netns_join;
struct al_native_exec;
struct al_native_plan;
struct al_process;

struct al_backend_state {
	/* Init and its sync socket. */
	pid_t pid;
	int pidfd;
	int sync;
	int userns;   /* native: init's user namespace, opened right after its maps */
	bool exiting; /* init reported the end, emptied the namespace and left the cgroup */
	bool reaped;  /* init was waited for: nothing of the sandbox runs */
	bool emptied; /* init reported the end: no process of the sandbox but it, exiting */
	struct al_monitor *mon;
	struct al_native_plan *lowered; /* native: the plan in its terms (owned) */
	int *inputs; /* native, as root: the task's inputs as detached mounts, until clone */
	/* native, as root: the pool's slot the sandbox's host ids come from. */
	struct al_id_slot slot;
	/* native: the engine's network namespace the sandbox joins, set up
	 * by us (netns.h); NULL: a namespace of its own. */
	struct al_netns_join *join;
	/* A session's execs (exec.c). */
	struct al_native_exec *execs;
	size_t n_execs;
	uint64_t exec_ooms;    /* OOM kills counted in ended execs' own cgroups */
	bool exec_uncontained; /* an exec ran without a cgroup of its own */
	/* A backend that runs through this init and monitor without the
	 * native namespaces (process): its own checks from outside when init
	 * reports ready, in place of the native ones. 0, or -1 with what is
	 * not in force in msg (the run is refused). */
	struct al_process *process; /* the process backend's own (process/process.h) */
	int (*check_ready)(struct al_sandbox *sb, int landlock_abi, char *msg, size_t len);
	/* A backend that runs inside this one (wasm): its own, freed by it. */
	void *outer;
};

/* Give sb a fresh state (every fd -1), the first thing prepare does. */
void al_native_state_new(struct al_sandbox *sb);
/* Free sb's state (its fds already closed by al_monitor_release_all()). */
void al_native_state_free(struct al_sandbox *sb);
