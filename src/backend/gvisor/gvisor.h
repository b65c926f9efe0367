/* The gvisor backend's own declarations, shared by the files of
 * src/backend/gvisor/ only. The plan becomes an OCI bundle (bundle.c) run
 * by runsc (gvisor.c); what this machine's runsc can do is probed once per
 * process, under a timeout (probe.c). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "core/error.h"
#include "policy/plan.h"

/* Where each run's directory is made, named "PID-STARTTIME-N" after the
 * supervisor, so that `airlock gc` can tell a killed run's directory from
 * a live one's. Root's, 0711: each run's runsc (its slot's root, userns.c)
 * passes through to its own directory (0700, that user's) and lists none. */
#define AL_GVISOR_DIR "/run/airlock/gvisor"

/* What the probe found: runsc's path, version line and the platform runs
 * use (kvm where /dev/kvm opens and runsc lists it, else ptrace). */
struct al_gvisor_host {
	char runsc[256];
	char version[128];
	const char *platform;
};

/* Probe once per process (cached): 1 usable, 0 with why. */
int al_gvisor_host(const struct al_gvisor_host **ret, char *why, size_t len);

/* The task's inputs (the plan's as_owner entries), by fs entry: fds[i]
 * the detached tree to attach at sources[i] (host paths in the run's
 * directory), -1 and NULL for every other entry. */
struct al_gvisor_inputs {
	int *fds;
	char **sources;
	size_t n;
};

/* Write the bundle for plan under dirfd: config.json and the read-only
 * root tree "rootfs" (airlock's files, directories, links and the mount
 * points). scratch is the host path of the scratch's root, whose parts
 * ("tmp", "work", "shm") the bundle binds; in the inputs' mount points. */
int al_gvisor_bundle(int dirfd, const struct al_plan *plan, const char *scratch,
		     const struct al_gvisor_inputs *in, struct al_error *err);

/* userns.c: runsc in a user namespace of the run's host ids. */
/* Write the uid and gid maps of pid's user namespace (runsc's parent's). */
int al_gvisor_write_maps(pid_t pid, const struct al_host_ids *ids, struct al_error *err);
/* Give the tree at name under at to uid:gid (no link followed); -errno. */
int al_gvisor_chown_tree(int at, const char *name, uid_t uid, gid_t gid);
/* Open the plan's inputs as native does and make their mount points under
 * dirfd (the run's directory, dir): in filled; 0 or -errno with err. */
int al_gvisor_open_inputs(const struct al_plan *p, const struct al_host_ids *ids, int dirfd,
			  const char *dir, struct al_gvisor_inputs *in, struct al_error *err);
/* In runsc's parent, as host root in its mount namespace: attach each. */
int al_gvisor_attach_inputs(const struct al_gvisor_inputs *in);
void al_gvisor_close_inputs(struct al_gvisor_inputs *in);

/* Why the plan cannot run under gvisor (one line in err), or 0. */
int al_gvisor_check_plan(const struct al_plan *plan, struct al_error *err);

/* Remove the tree at name under dirfd (no link followed). */
int al_gvisor_rmtree(int dirfd, const char *name);
