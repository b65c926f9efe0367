/* Plan building: who the sandbox's ids are on the host (per run, a fixed
 * range, or rootless the caller) and its user namespace's own limits. */
#include "policy/plan.h"

#include <errno.h>
#include <unistd.h>

#include "ids/slots.h"
#include "policy/plan-internal.h"

void al_plan_build_ids(struct al_plan *p, const struct al_policy *pol, struct al_errors *errs)
{
	uid_t uid = geteuid();
	gid_t gid = getegid();

	p->inotify_instances =
	    pol->inotify_instances ? pol->inotify_instances : AL_DEFAULT_INOTIFY_INSTANCES;
	p->inotify_watches =
	    pol->inotify_watches ? pol->inotify_watches : AL_DEFAULT_INOTIFY_WATCHES;
	if (uid != 0) {
		/* Rootless: the caller's own ids are all there is. */
		if (pol->host_ids == AL_HOST_IDS_FIXED)
			al_errors_add(errs, EPERM, NULL, "identity.host_ids",
				      "a fixed range of host ids needs airlock to run as root "
				      "(rootless, the sandbox user is you, uid %u)",
				      (unsigned)uid);
		p->rootless = true;
		p->host_uid = uid;
		p->host_gid = gid;
		return;
	}
	p->rootless = false;
	if (pol->host_ids == AL_HOST_IDS_FIXED) {
		p->host_base = pol->host_ids_base;
		p->host_uid = p->host_base + AL_SANDBOX_UID;
		p->host_gid = p->host_base + AL_SANDBOX_GID;
	} else {
		p->ids_per_run = true;
	}
}

void al_plan_host_ids(const struct al_plan *p, int slot, struct al_host_ids *ids)
{
	uid_t base = p->ids_per_run ? al_ids_slot_base((unsigned)slot) : p->host_base;

	*ids = (struct al_host_ids){.rootless = p->rootless, .slot = -1};
	if (p->rootless) {
		ids->root_uid = (uid_t)-1;
		ids->root_gid = (gid_t)-1;
		ids->uid = ids->owner = p->host_uid;
		ids->gid = p->host_gid;
		return;
	}
	ids->root_uid = ids->owner = base;
	ids->root_gid = base;
	ids->uid = base + AL_SANDBOX_UID;
	ids->gid = base + AL_SANDBOX_GID;
	ids->slot = p->ids_per_run ? slot : -1;
}

size_t al_plan_ns_limits(const struct al_plan *p, struct al_ns_limit *out)
{
	/* inotify as the plan says; no user namespace, so no capability
	 * anywhere again: every other kind of namespace needs CAP_SYS_ADMIN in
	 * the user namespace that would own it, which the command has in none,
	 * so their counters need no limit of their own (and each costs a
	 * sysctl write on the way to every command). No fanotify group, which
	 * an unprivileged process may make (seccomp refuses fanotify_init and
	 * unshare, setns and clone's CLONE_NEW* flags as well). */
	size_t n = 0;

	out[n++] = (struct al_ns_limit){"max_inotify_instances", p->inotify_instances, false};
	out[n++] = (struct al_ns_limit){"max_inotify_watches", p->inotify_watches, false};
	out[n++] = (struct al_ns_limit){"max_user_namespaces", 0, false};
	out[n++] = (struct al_ns_limit){"max_fanotify_groups", 0, true};
	return n;
}
