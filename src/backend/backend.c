#include "backend/backend.h"

#include <string.h>

const struct al_backend_ops *al_backend_lookup(const char *name)
{
	if (!name || strcmp(name, al_backend_native.name) == 0)
		return &al_backend_native;
	return NULL;
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
