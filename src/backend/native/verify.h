/* The pre-exec checks of the native backend (verify.c). */
#pragma once

#include <sys/types.h>

#include "cgroup/cgroup.h"
#include "backend/native/lower.h"
#include "policy/plan.h"
#include "supervisor/result.h"

/* Check, from outside, that the child's layers are what the plan asked
 * for: mounts and their flags, ids (and the owner of userns, the child's
 * user namespace), capabilities, no_new_privs, seccomp, landlock (as the
 * child reported it), network interfaces, cgroup membership, rlimits; with
 * limits_userns >= 0 (airlock verify) also that namespace's limits, read
 * from inside it. Fills res->checks; returns the number not in force. */
int al_verify_child(const struct al_plan *plan, const struct al_native_plan *np, pid_t pid,
		    int limits_userns, int userns, int landlock_abi, const struct al_cgroup *cg,
		    struct al_run_result *res);
