/* The parent side of the sandbox init's protocol (native and fake
 * backends): the sync socket, init's pidfd, and for native the seccomp
 * notification listener, the socket-memory view of the sandbox's network
 * namespace, the cgroup tick and the pre-exec checks. It turns what init
 * says into struct al_sandbox_events and feeds the meter. */
#pragma once

#include "backend/backend.h"
#include "backend/native/child.h"

/* Watch sb (started: pidfd and sync set) in sb->loop. */
int al_monitor_start(struct al_sandbox *sb, struct al_error *err);
/* The backend ops of both backends, past start. */
void al_monitor_release(struct al_sandbox *sb);
void al_monitor_stop(struct al_sandbox *sb);
int al_monitor_kill(struct al_sandbox *sb, int sig);
/* The sandbox cannot go on (a session's init no longer reads its socket):
 * the run ends as a setup error at step, with e and msg, and is stopped. */
void al_monitor_fail(struct al_sandbox *sb, const char *step, int e, const char *msg);
void al_monitor_finish(struct al_sandbox *sb, struct al_sandbox_end *end);
/* Stop watching, kill init if it still runs, reap it and close every fd
 * of sb: the shared body of the backends' destroy(). */
void al_monitor_release_all(struct al_sandbox *sb);

/* Sessions (exec.c): the backend ops exec and exec_signal; init's EXEC_*
 * messages (true if msg was one; fd is the callee's); the OOM kills of
 * execs' own cgroups (which the run's counter also shows, hierarchical,
 * and which end an exec, not the run); every exec's cgroup removed. */
int al_monitor_exec(struct al_sandbox *sb, const struct al_sandbox_exec *x, struct al_error *err);
int al_monitor_exec_signal(struct al_sandbox *sb, uint32_t id, int sig);
bool al_monitor_exec_msg(struct al_sandbox *sb, const struct al_sync_msg *msg, int *fd);
uint64_t al_monitor_exec_ooms(struct al_sandbox *sb);
/* An exec was added or ended: the cgroup tick follows (monitor.c). */
void al_monitor_execs_changed(struct al_sandbox *sb);
/* Freeze or thaw the sandbox's cgroup (its pause). */
int al_monitor_pause(struct al_sandbox *sb, bool frozen, struct al_error *err);
/* Stop (SIGSTOP) or continue every exec's process group: the fake
 * backend's pause, which has no cgroup. */
int al_monitor_exec_stop_all(struct al_sandbox *sb, bool stopped);
void al_monitor_exec_release_all(struct al_sandbox *sb);
