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

/* Where each run's directory is made (0700, root's), named
 * "PID-STARTTIME-N" after the supervisor, so that `airlock gc` can tell a
 * killed run's directory from a live one's. */
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

/* Write the bundle for plan under dirfd: config.json and the read-only
 * root tree "rootfs" (airlock's files, directories, links and the mount
 * points). scratch is the host path of the scratch's root, whose parts
 * ("tmp", "work", "shm") the bundle binds. */
int al_gvisor_bundle(int dirfd, const struct al_plan *plan, const char *scratch,
		     struct al_error *err);

/* Why the plan cannot run under gvisor (one line in err), or 0. */
int al_gvisor_check_plan(const struct al_plan *plan, struct al_error *err);

/* Remove the tree at name under dirfd (no link followed). */
int al_gvisor_rmtree(int dirfd, const char *name);
