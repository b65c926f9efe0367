/* Per-run cgroups on cgroup v2, and on v1 or hybrid hosts (v1 memory, pids,
 * cpu and cpuacct hierarchies beside a v2 mount without controllers).
 *
 * Each run gets its own cgroup under "<own cgroup>/airlock/<id>" in every
 * hierarchy it needs, created before the child starts and removed after.
 * The id carries the supervisor's pid and start time, so a directory left
 * by a killed supervisor is recognised as stale by the next run or by
 * `airlock gc`. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/error.h"

struct al_cgroup;

struct al_cgroup_limits {
	uint64_t memory_bytes;   /* 0 = none */
	uint64_t pids;           /* 0 = none */
	uint64_t cpu_quota_us;   /* per period; 0 = none */
	uint64_t cpu_period_us;
	bool want_cpu_time;      /* CPU accounting is needed (cpu-time limit or stats) */
};

struct al_cgroup_stats {
	uint64_t cpu_usage_us;   /* user + system, all processes */
	uint64_t cpu_user_us;
	uint64_t cpu_system_us;
	uint64_t memory_peak;    /* bytes */
	uint64_t oom_kills;
	uint64_t pids_max_hits;  /* forks refused at the pids limit */
};

/* Which layout this host has, as a word for messages: "v2", "v1", or
 * "none" when no usable cgroup hierarchy is mounted. */
const char *al_cgroup_layout(void);

/* Create the run's cgroup(s) and write the limits, then read them back:
 * a limit that does not read back as written fails the call (fail closed).
 * Unprivileged callers without a writable (delegated) cgroup get EACCES
 * with a message saying how to delegate. */
int al_cgroup_create(const struct al_cgroup_limits *limits, struct al_cgroup **ret,
		     struct al_error *err);

/* v2: an O_DIRECTORY fd for clone3's CLONE_INTO_CGROUP, or -1 on v1. */
int al_cgroup_clone_fd(const struct al_cgroup *cg);

/* v1: move pid into every hierarchy's run cgroup (v2: no-op). */
int al_cgroup_attach(const struct al_cgroup *cg, pid_t pid, struct al_error *err);

/* Move pid back to the cgroup the supervisor itself is in. */
int al_cgroup_detach(const struct al_cgroup *cg, pid_t pid, struct al_error *err);

/* Read the counters. Missing files leave their fields 0. */
void al_cgroup_stats(const struct al_cgroup *cg, struct al_cgroup_stats *st);

/* Kill every process in the run cgroup (v2 cgroup.kill; v1 SIGKILL to each
 * listed pid). */
void al_cgroup_kill(const struct al_cgroup *cg);

/* Remove the run's directories (retrying briefly while the last tasks
 * leave) and free cg. Returns 0 or -errno (the directory is left for gc). */
int al_cgroup_destroy(struct al_cgroup *cg, struct al_error *err);

/* A short description for the plan dump: "v1 memory,pids,cpu,cpuacct at ...". */
const char *al_cgroup_describe(const struct al_cgroup *cg);

/* Remove stale run cgroups whose supervisor is gone. Returns how many were
 * removed, or -errno. */
int al_cgroup_gc(struct al_error *err);

/* The run's directory in the given controller's hierarchy, for tests and
 * the verify command; NULL if not used. */
const char *al_cgroup_path(const struct al_cgroup *cg, const char *controller);
