/* Plan building: who the sandbox's ids are on the host (per run, a fixed
 * range, or rootless the caller), its user namespace's own limits, and,
 * rootless, the check that a --rw tree holds no directory of another
 * user's (which only the caller's ids could show as its owner). */
#include "policy/plan.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "ids/slots.h"
#include "policy/plan-internal.h"

/* How much of a --rw tree the rootless owner check looks at. */
#define RW_CHECK_DEPTH	 64
#define RW_CHECK_ENTRIES 100000u

struct rw_walk {
	const char *origin;
	uid_t self;
	unsigned left; /* entries still to look at */
	char path[PATH_MAX];
	struct al_error *err;
};

/* The directories below fd (at w->path), depth first: the first that
 * belongs to someone else is refused. Only our own are gone into. */
static int rw_dir(struct rw_walk *w, int fd, int depth)
{
	int list = dup(fd);
	DIR *d = list >= 0 ? fdopendir(list) : NULL;
	size_t len = strlen(w->path);
	struct dirent *de;
	struct stat st;
	int r = 0;

	if (!d) {
		if (list >= 0)
			close(list);
		return 0; /* unreadable: the sandbox cannot list it either */
	}
	while (r == 0 && w->left && (de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		w->left--;
		if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
			continue;
		snprintf(w->path + len, sizeof(w->path) - len, "/%s", de->d_name);
		if (st.st_uid != w->self) {
			r = al_error_set(
			    w->err, EPERM,
			    "%s: %s belongs to uid %u%s, not to you (uid %u): rootless, it would "
			    "show inside as nobody and could not be written; chown it to "
			    "yourself, run airlock as root (its inputs are then mapped to their "
			    "owners), or mount it with --ro",
			    w->origin, w->path, (unsigned)st.st_uid,
			    st.st_uid == 0 ? " (root)" : "", (unsigned)w->self);
		} else if (depth < RW_CHECK_DEPTH) {
			int sub =
			    openat(fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub >= 0) {
				r = rw_dir(w, sub, depth + 1);
				close(sub);
			}
		}
		w->path[len] = '\0';
	}
	closedir(d);
	return r;
}

int al_plan_check_rw_owner(const char *origin, const char *dir, struct al_error *err)
{
	struct rw_walk w = {
	    .origin = origin, .self = geteuid(), .left = RW_CHECK_ENTRIES, .err = err};
	_cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return 0; /* the mount itself says what is wrong */
	snprintf(w.path, sizeof(w.path), "%s", dir);
	return rw_dir(&w, fd, 0);
}

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
	/* The command's: a container's user, or the sandbox's. */
	ids->uid = base + (p->root ? p->uid : AL_SANDBOX_UID);
	ids->gid = base + (p->root ? p->gid : AL_SANDBOX_GID);
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
