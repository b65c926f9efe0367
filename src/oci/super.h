/* A container's supervisor: the process `create` leaves behind (its pid
 * is the container's for the engine, which waits for it: it exits as the
 * container's process ended, with its code, or killed by its signal).
 * It holds the container's sandbox as a session run (run/session.h):
 * built and checked at create, the config's process its first exec at
 * start, `exec` more execs, each confined exactly as the first. Between
 * create and its end it answers the verbs on the socket in the state
 * directory (proto.h). It writes nothing of its own on the container's
 * stdio: its messages go to the runtime's --log. */
#pragma once

#include <stdbool.h>

#include "audit/audit.h"
#include "cred/store.h"
#include "policy/plan.h"

struct al_oci_super {
	const struct al_plan *plan; /* final */
	struct al_cred *cred;	    /* may be NULL */
	/* The audit stream's file (opened by the supervisor itself), or NULL. */
	const char *audit_path;
	json_t *start_extra; /* for run.start: the container, the exceptions applied */
	const char *run_id;
	const char *id; /* the container's */
	int dirfd;	/* the state directory (O_PATH) */
	int rootfd;	/* the runtime's root (O_PATH): an abandoned create's directory removed */
	int listen_fd;	/* its socket, listening */
	/* To create's parent: "ready" or "error: ..." once the sandbox is
	 * built and checked; then the parent's "go" once it has written
	 * state.json and the pid file. Without "go" (the parent died) the
	 * container is removed again. */
	int sync_fd;
	/* The container's process gets a terminal: our stdio is the slave of
	 * the host pty whose master went to the engine's console socket, our
	 * controlling terminal (its size is read at SIGWINCH). */
	bool tty;
	int keep_fd; /* another descriptor to keep (the --log file), or -1 */
	/* A pod's sandbox container: the pod's network namespace, which the
	 * supervisor enters first (the sandbox gets its own), so that
	 * /proc/PID/ns/net of the state's pid is the pod's; or -1. */
	int pod_netns_fd;
};

/* Run the container's supervisor in this (forked, single-threaded)
 * process; it never returns. */
_Noreturn void al_oci_super_main(const struct al_oci_super *s);

/* How a process ended as a wait status would say it, for the exit of the
 * process whose pid the engine waits for: the code, or the signal. */
_Noreturn void al_oci_exit_as(int code, int sig);
