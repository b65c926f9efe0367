/* Child setup steps (internal to src/sandbox). Each returns 0 or a negative
 * errno and, on failure, leaves a short description in c->msg. No step
 * allocates memory or parses input: all of that happened in the parent. */
#pragma once

#include "backend/native/child.h"
#include "backend/native/lower.h"

struct al_child {
	const struct al_plan *plan;
	const struct al_native_plan *np; /* the plan in the native terms */
	const struct al_child_fds *fds;
	int sync;			 /* the sync socket; fd 3 after step_stdio */
	int landlock_abi;		 /* the ABI of the ruleset in force, 0 if none */
	int cg_leave[AL_CGROUP_MAX_FDS]; /* kept for init; fds 4.. after step_stdio */
	size_t n_cg;
	uid_t uid; /* who the command runs as: AL_SANDBOX_UID inside a
		    * namespace; the run's host ids in the process backend */
	gid_t gid;
	char msg[256];
};

int step_wait_parent(struct al_child *c);
int step_die_with_parent(struct al_child *c);
int step_cgroup_namespace(struct al_child *c);
int step_become_ns_root(struct al_child *c);
int step_ns_limits(struct al_child *c);
int step_stdio(struct al_child *c);
int step_private_mounts(struct al_child *c);
int step_staging_root(struct al_child *c);
int step_build_root(struct al_child *c);
int step_pivot_root(struct al_child *c);
int step_terminal(struct al_child *c);
int step_hostname(struct al_child *c);
int step_loopback(struct al_child *c);
int step_sysctl(struct al_child *c);
int step_gateway_listeners(struct al_child *c);
int step_rlimits(struct al_child *c);
int step_close_fds(struct al_child *c);
int step_new_session(struct al_child *c);
int step_drop_privileges(struct al_child *c);
int step_no_new_privs(struct al_child *c);
int step_landlock(struct al_child *c);
int step_seccomp(struct al_child *c);
int step_report_ready(struct al_child *c);

/* Helpers of the steps, shared with rooted.c: c->msg set from fmt, -e
 * returned; one op of the tree run by path in the staging view; an op's
 * bind source as a detached tree with its flags (*ret, the caller's). */
int al_step_fail(struct al_child *c, int e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int al_step_op(struct al_child *c, const struct al_mount_op *op);
int al_step_bind_tree(struct al_child *c, const struct al_mount_op *op, int *ret);

/* rooted.c: the tree on a container's own root (lower.h np->rooted).
 * Before clone, on the host: the mountpoints that lie in the root's own
 * files made there by the supervisor (as root: where the root cannot be
 * idmapped, its files are not the sandbox's to add to). */
int al_rooted_build(struct al_child *c);
int al_rooted_prepare(const struct al_native_plan *np, const struct al_plan *plan,
		      struct al_error *err);

/* Send one sync message, with an fd attached when fd >= 0. */
/* m on the sync socket, with fd (>= 0) as SCM_RIGHTS; EINTR retried. */
void al_child_send_msg(int sync, const struct al_sync_msg *m, int fd);
void al_child_send(int sync, uint32_t type, int err, int status, const char *step, const char *msg,
		   int fd);
