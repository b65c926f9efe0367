/* What the files of src/cgroup share (internal to the folder). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "cgroup/cgroup.h"
#include "core/error.h"

#define CG_ROOT	 "/sys/fs/cgroup"
#define MAX_HIER 5

struct hier {
	char ctrls[64]; /* "memory", "pids", "cpu,cpuacct", or "" for v2 */
	char *base;	/* <mount><own path>/airlock */
	char *own;	/* <mount><own path>: where the supervisor itself is */
	char *dir;	/* <base>/<id>: the run's cgroup */
};

struct al_cgroup {
	bool v2;
	struct hier h[MAX_HIER];
	size_t n;
	int dirfd; /* v2 run dir, for CLONE_INTO_CGROUP */
	enum al_sockmem sockmem;
	int sockfd; /* v1 limited: memory.kmem.tcp.usage_in_bytes, for pread */
	char desc[512];
};

/* "memory", "pids", "cpu", "cpuacct", "freezer", NULL */
extern const char *const al_cg_v1_controllers[];

/* teardown.c: SIGKILL every process listed in dir's cgroup.procs through
 * pidfds, only those still listed once their pidfd is open (never a pid
 * that was reaped and reused meanwhile). */
void al_cg_kill_listed(const char *dir);

/* Our own cgroup path for a v1 controller, or v2 (NULL). */
char *al_cg_own_path(const char *controller);
char *al_cg_join(const char *mount, const char *path);
bool al_cg_v2_usable(const char **ret_mount, char **ret_own);
int al_cg_write_str(const char *dir, const char *file, const char *value, struct al_error *err);

/* freeze.c: the directory whose freezer file freezes the run (v2: its
 * cgroup; v1: its freezer cgroup), or NULL; thaw any cgroup directory
 * (before killing what is in it). */
const char *al_cg_freezer_dir(const struct al_cgroup *cg);
void al_cg_thaw_dir(const char *dir);
