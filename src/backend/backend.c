#include "backend/backend.h"

#include <string.h>

/* Weakest first, as policy/operator-parse.c's backends[] ranks them; a
 * backend's name also goes in that file's built[] list. */
const struct al_backend_ops *const al_backends[] = {
    &al_backend_native,
    &al_backend_gvisor,
    NULL,
};

const struct al_backend_ops *al_backend_lookup(const char *name)
{
	if (!name)
		return &al_backend_native;
	for (size_t i = 0; al_backends[i]; i++)
		if (strcmp(name, al_backends[i]->name) == 0)
			return al_backends[i];
	return NULL;
}

int al_backend_usable(const struct al_backend_ops *ops, char *why, size_t len)
{
	if (len)
		why[0] = '\0';
	return ops->usable ? ops->usable(why, len) : 1;
}

void al_sandbox_cgroup_limits(const struct al_sandbox *sb, struct al_cgroup_limits *limits)
{
	const struct al_plan *p = sb->plan;

	*limits = (struct al_cgroup_limits){
	    .memory_bytes = p->memory_bytes,
	    .pids = p->pids,
	    .cpu_quota_us = p->cpus_milli * AL_CPU_PERIOD_US / 1000,
	    .cpu_period_us = AL_CPU_PERIOD_US,
	    .want_cpu_time = p->cpu_time_ms != 0 || p->budget.cpu_second != 0,
	    .socket_bytes = p->socket_bytes,
	    .want_freezer = sb->session,  /* its pause */
	    .exec_children = sb->session, /* each exec's cgroup */
	};
}

void al_sandbox_init_handle(struct al_sandbox *sb, const struct al_backend_ops *ops,
			    const struct al_plan *plan, struct al_audit *audit,
			    struct al_loop *loop, const struct al_sandbox_events *events)
{
	*sb = (struct al_sandbox){.ops = ops,
				  .plan = plan,
				  .audit = audit,
				  .loop = loop,
				  .events = events,
				  .stdin_wr = -1,
				  .stdout_rd = -1,
				  .stderr_rd = -1,
				  .remove_dirfd = -1};
}
