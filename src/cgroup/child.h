/* A child cgroup of a run's, for one exec of a session: its own memory and
 * pids limits and its own CPU and memory accounting, under the run's (whose
 * limits cap the total). On v1, one in each of the run's memory, pids and
 * cpuacct hierarchies. On v2 one below the run's cgroup: a session's run
 * is made with exec_children (cgroup.h), its init in a leaf cgroup of its
 * own beside the execs', so that the run's cgroup holds no process and
 * may enable the memory, pids and cpu controllers for its children (the
 * kernel's "no internal processes" rule). A v2 run made without it has no
 * exec cgroups (al_cgroup_child_create gives NULL) and the run's limits
 * alone hold. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "cgroup/cgroup.h"
#include "core/error.h"

struct al_cgroup_child;

/* mkdir NAME under each of the run's v1 hierarchies (memory, pids,
 * cpuacct), or under its v2 cgroup, with memory_bytes and pids as its
 * limits (0: none of its own). *ret is NULL when there is nothing to make
 * (no cgroup, v2 without exec_children). Returns 0 or -errno with err set
 * (nothing left behind). */
int al_cgroup_child_create(const struct al_cgroup *cg, const char *name, uint64_t memory_bytes,
			   uint64_t pids, struct al_cgroup_child **ret, struct al_error *err);

/* Move the process pid (host pid) in. */
int al_cgroup_child_attach(const struct al_cgroup_child *c, pid_t pid, struct al_error *err);

/* Its counters: OOM kills, memory peak, CPU (user and system). */
struct al_cgroup_child_stats {
	uint64_t oom_kills, memory_peak, cpu_user_us, cpu_system_us;
};
void al_cgroup_child_stats(const struct al_cgroup_child *c, struct al_cgroup_child_stats *st);

/* SIGKILL every process in it, until it is empty (a bounded number of
 * rounds). */
void al_cgroup_child_kill(const struct al_cgroup_child *c);

/* Kill what is left, remove the directories, free c (NULL is fine). */
void al_cgroup_child_destroy(struct al_cgroup_child *c);
