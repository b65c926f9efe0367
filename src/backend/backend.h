/* Backends: one small ops table per way of running a plan (STYLE.md 2).
 * Every backend takes the same plan and keeps the same promises, or refuses
 * the plan in probe() with a reason. The native backend is the default;
 * fake runs the command without isolation through the same init and
 * supervisor, for tests only — it cannot be chosen by name. */
#pragma once

#include "core/error.h"
#include "policy/plan.h"
#include "supervisor/supervisor.h"

struct al_sandbox {
	const struct al_backend_ops *ops;
	const struct al_plan *plan; /* borrowed */
	struct al_audit *audit;	    /* borrowed; may be NULL */
	struct al_cgroup *cg;	    /* owned; NULL when the run has no cgroup */
	struct al_supervised proc;  /* filled by start() */
	bool started;
};

struct al_backend_ops {
	const char *name;
	/* Can this machine run the plan with this backend? */
	int (*probe)(const struct al_plan *plan, struct al_error *err);
	/* Create what must exist before the child (cgroups, later). */
	int (*prepare)(struct al_sandbox *sb, struct al_error *err);
	/* Create the sandbox and release its child. */
	int (*start)(struct al_sandbox *sb, struct al_error *err);
	/* Send sig to the whole sandbox. */
	int (*kill)(struct al_sandbox *sb, int sig);
	/* Kill anything left and release every resource. Safe after any failure. */
	void (*destroy)(struct al_sandbox *sb);
};

extern const struct al_backend_ops al_backend_native;
extern const struct al_backend_ops al_backend_fake;

/* Kill the sandbox's init if it still runs, reap it and close every fd in
 * sb->proc: the shared body of the backends' destroy(). */
void al_sandbox_release(struct al_sandbox *sb);

/* The backend called `name` (NULL = native), or NULL if there is none. */
const struct al_backend_ops *al_backend_lookup(const char *name);
