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
