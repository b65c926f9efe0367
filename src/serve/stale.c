/* What a daemon killed with SIGKILL left, removed by the next one before
 * it serves (monitor.c calls it). */
#include "serve/internal.h"

#include "cgroup/cgroup.h"
#include "core/log.h"
#include "ids/slots.h"

#include <unistd.h>

/* What a daemon killed with SIGKILL left: its sessions' sandboxes died
 * with it (PR_SET_PDEATHSIG, then the sandbox's own die-with-parent);
 * their cgroups and host id slots are removed here, as `airlock gc`
 * does, before anything is served. */
void al_serve_cleanup_stale(void)
{
	struct al_error err = {0};
	int n = al_cgroup_gc(&err);

	if (n < 0)
		al_warn("serve: stale cgroups: %s", err.msg);
	else if (n > 0)
		al_info("serve: removed %d stale cgroup%s", n, n == 1 ? "" : "s");
	if (geteuid() != 0)
		return;
	al_error_clear(&err);
	if ((n = al_ids_gc(NULL, &err)) < 0)
		al_warn("serve: stale host id slots: %s", err.msg);
	else if (n > 0)
		al_info("serve: reclaimed %d host id slot%s", n, n == 1 ? "" : "s");
}
