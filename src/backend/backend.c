#include "backend/backend.h"

#include <errno.h>
#include <string.h>

#include "core/log.h"
#include "policy/kmem.h"

/* Weakest first, as policy/operator-parse.c's backends[] ranks them; a
 * backend's name also goes in that file's built[] list. */
const struct al_backend_ops *const al_backends[] = {
    &al_backend_process,
    &al_backend_native,
    &al_backend_wasm,
    &al_backend_gvisor,
    &al_backend_microvm,
    &al_backend_vm,
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

int al_backend_admit(const struct al_backend_ops *ops, const struct al_plan *plan, bool live,
		     struct al_error *err)
{
	unsigned f = ops->facts ? ops->facts->features : ~0u;

	if (live && !(f & AL_BACKEND_EXEC))
		return al_error_set(err, EOPNOTSUPP,
				    "backend %s cannot exec in a live sandbox, which sessions "
				    "(airlock serve, airlock mcp) and warm pools need (see airlock "
				    "backends)",
				    ops->name);
	if (plan->tty && !(f & AL_BACKEND_TTY))
		return al_error_set(err, EOPNOTSUPP,
				    "backend %s cannot give the command a terminal (-t, the "
				    "policy's \"tty\")",
				    ops->name);
	if (plan->root && !(f & AL_BACKEND_OCI_ROOT))
		return al_error_set(
		    err, EOPNOTSUPP,
		    "backend %s cannot run a container's own root filesystem "
		    "(io.airlock.backend: the OCI runtime's containers run on native, "
		    "microvm or vm)",
		    ops->name);
	if (plan->gateway && !(f & AL_BACKEND_NETWORK))
		return al_error_set(err, EOPNOTSUPP,
				    "backend %s has no network: it cannot keep egress rules "
				    "(--allow, --map-host, the policy's \"network\")",
				    ops->name);
	return 0;
}

int al_backend_usable(const struct al_backend_ops *ops, char *why, size_t len)
{
	if (len)
		why[0] = '\0';
	return ops->usable ? ops->usable(why, len) : 1;
}

void al_sandbox_gc_cgroups(const struct al_sandbox *sb)
{
	struct al_error err = {0};

	if (sb->cg && al_cgroup_gc_except(sb->cg, &err) < 0)
		al_debug("ignoring: %s", err.msg);
	al_log_phase("stale cgroups collected");
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
	    .socket_bytes = al_kmem_socket_limit(p),
	    .want_freezer = sb->session || sb->hosts_session, /* its pause */
	    .exec_children = sb->session,		      /* each exec's cgroup */
	    .path = p->root ? p->root->cgroup_path : NULL,
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
				  .remove_dirfd = -1,
				  .slot_dirfd = -1};
}

/* The events at the first member of d's struct. */
#define RELAY(d) (*(const struct al_sandbox_events *const *)(d))

static void rl_listener(void *d, enum al_gateway_listener kind, int fd)
{
	RELAY(d)->listener(RELAY(d)->data, kind, fd);
}
static void rl_peers(void *d, uid_t uid, int diag)
{
	RELAY(d)->peers(RELAY(d)->data, uid, diag);
}
static void rl_scratch(void *d, int fd)
{
	RELAY(d)->scratch(RELAY(d)->data, fd);
}
static void rl_terminal(void *d, int fd)
{
	RELAY(d)->terminal(RELAY(d)->data, fd);
}
static void rl_ready(void *d)
{
	RELAY(d)->ready(RELAY(d)->data);
}
static void rl_running(void *d)
{
	RELAY(d)->running(RELAY(d)->data);
}
static void rl_exited(void *d, int status)
{
	RELAY(d)->exited(RELAY(d)->data, status);
}
static void rl_exec_failed(void *d, int e, const char *what)
{
	RELAY(d)->exec_failed(RELAY(d)->data, e, what);
}
static void rl_failed(void *d, const char *step, int e, const char *msg)
{
	RELAY(d)->failed(RELAY(d)->data, step, e, msg);
}
static void rl_gone(void *d)
{
	RELAY(d)->gone(RELAY(d)->data);
}

void al_sandbox_events_relay(struct al_sandbox_events *ev, void *data)
{
	const struct al_sandbox_events *o = RELAY(data);

	*ev = (struct al_sandbox_events){.data = data,
					 .meter = o->meter,
					 .res = o->res,
					 .listener = o->listener ? rl_listener : NULL,
					 .peers = o->peers ? rl_peers : NULL,
					 .scratch = o->scratch ? rl_scratch : NULL,
					 .terminal = o->terminal ? rl_terminal : NULL,
					 .ready = rl_ready,
					 .running = rl_running,
					 .exited = rl_exited,
					 .exec_failed = rl_exec_failed,
					 .failed = rl_failed,
					 .gone = rl_gone};
}
