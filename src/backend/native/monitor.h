/* The parent side of the sandbox init's protocol (native and fake
 * backends): the sync socket, init's pidfd, and for native the seccomp
 * notification listener, the socket-memory view of the sandbox's network
 * namespace, the cgroup tick and the pre-exec checks. It turns what init
 * says into struct al_sandbox_events and feeds the meter. */
#pragma once

#include "backend/backend.h"

/* Watch sb (started: pidfd and sync set) in sb->loop. */
int al_monitor_start(struct al_sandbox *sb, struct al_error *err);
/* The backend ops of both backends, past start. */
void al_monitor_release(struct al_sandbox *sb);
void al_monitor_stop(struct al_sandbox *sb);
int al_monitor_kill(struct al_sandbox *sb, int sig);
void al_monitor_finish(struct al_sandbox *sb, struct al_sandbox_end *end);
/* Stop watching, kill init if it still runs, reap it and close every fd
 * of sb: the shared body of the backends' destroy(). */
void al_monitor_release_all(struct al_sandbox *sb);
