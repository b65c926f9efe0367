/* The kernel-memory bound: what a run can make the kernel hold for it
 * beyond what its memory cgroup counts, computed from the plan and what
 * the host's cgroup does with socket buffers (docs/security.md). Shown by
 * `airlock check`, checked by verify, recorded in the result. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cgroup/cgroup.h"
#include "core/error.h"
#include "policy/plan.h"

#define AL_KMEM_UNBOUNDED UINT64_MAX

/* The kernel's own limit on the run's socket buffers where cgroup v1 has
 * one (memory.kmem.tcp.limit_in_bytes): half the plan's socket_stop, since
 * the kernel may let each socket pass it by one buffer and the supervisor
 * stops the run at socket_stop. Page-aligned. */
uint64_t al_kmem_socket_limit(const struct al_plan *p);

/* Bytes a run can pin outside the memory limit on a host whose cgroup
 * treats socket buffers as `mode`: the supervisor's stop point (on v1 for
 * the socket buffers and the connections waiting to be accepted, on v2
 * for those connections, which no cgroup is charged for), or
 * AL_KMEM_UNBOUNDED where nothing counts them. */
uint64_t al_kmem_bound(const struct al_plan *p, enum al_sockmem mode);

/* Whether a run may start with socket buffers held as `mode`: 0 when they
 * are bounded; 0 and *ret_unbounded = true when they are not but the
 * policy said "best-effort"; -EOPNOTSUPP with err naming the problem and
 * the way out otherwise. */
int al_kmem_admit(const struct al_plan *p, enum al_sockmem mode, bool *ret_unbounded,
		  struct al_error *err);

/* Why a host leaves socket buffers unbounded, for messages and the audit. */
extern const char al_kmem_unbounded_why[];

/* One line for humans: "at most 64M (socket buffers: ...)". */
void al_kmem_describe(const struct al_plan *p, enum al_sockmem mode, char *buf, size_t len);

/* {"sockets": "limited", "bound_bytes": N|null, "socket_limit_bytes": N|null,
 *  "stop_bytes": N|null, "mode": "enforced"|"best-effort", ...}; st (may be
 * NULL) adds the socket buffers' peak. */
json_t *al_kmem_json(const struct al_plan *p, enum al_sockmem mode,
		     const struct al_cgroup_stats *st);
