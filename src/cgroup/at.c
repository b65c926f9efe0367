/* A run's cgroup at a path the caller chose (a container's cgroupsPath,
 * cgroup.h's al_cgroup_limits.path): its parents made on the way down. */
#include "cgroup/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/file.h>
#include <sys/statfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/sys.h"
#include "core/util.h"

const char *const al_cg_tag_names[] = {"blkio", "perf_event", "net_cls", "hugetlb", NULL};

int al_cg_mark(const char *dir, const char *what, struct al_error *err)
{
	if (setxattr(dir, AL_CG_XATTR, what, strlen(what), 0) < 0)
		return al_error_setsys(err, errno,
				       "cgroup: marking %s as airlock's (xattr " AL_CG_XATTR
				       "); without the mark a container could be made inside "
				       "another's, refusing",
				       dir);
	return 0;
}

bool al_cg_marked(const char *dir, const char *what)
{
	char v[32];
	ssize_t n = getxattr(dir, AL_CG_XATTR, v, sizeof(v));

	return n == (ssize_t)strlen(what) && memcmp(v, what, (size_t)n) == 0;
}

int al_cg_at_lock(struct al_error *err)
{
	if (mkdir("/run/airlock", 0755) < 0 && errno != EEXIST)
		return al_error_setsys(err, errno, "cgroup: mkdir /run/airlock");
	int fd = open(AL_CG_AT_LOCK, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return al_error_setsys(err, errno, "cgroup: open " AL_CG_AT_LOCK);
	while (flock(fd, LOCK_EX) < 0) {
		if (errno != EINTR) {
			int e = errno;
			close(fd);
			return al_error_setsys(err, e, "cgroup: flock " AL_CG_AT_LOCK);
		}
	}
	return fd;
}

void al_cg_remove_parents(const char *mount, const char *path)
{
	_cleanup_free_ char *dir = xasprintf("%s%s", mount, path);

	/* Deepest first; the first that is not ours, or not empty (another
	 * container's parent too), ends the walk: those above hold it. */
	for (char *slash; (slash = strrchr(dir, '/')) && slash > dir + strlen(mount);) {
		*slash = '\0';
		if (!al_cg_marked(dir, AL_CG_MARK_PARENT))
			return;
		if (rmdir(dir) < 0) {
			if (errno != EBUSY && errno != ENOTEMPTY)
				al_debug("cgroup: ignoring rmdir %s: %s", dir, strerror(errno));
			return;
		}
	}
}

int al_cg_mkdir_parents(const char *mount, const char *path, bool v2, struct al_error *err)
{
	_cleanup_free_ char *dir = xstrdup(mount);
	const char *s = path;
	int r;

	/* path is checked (al_cgroup_path_check): "/a/b/c", no empty, "." or
	 * ".." component. Each proper prefix is a parent. */
	for (const char *slash; (slash = strchr(s + 1, '/')); s = slash) {
		char *next = xasprintf("%s%.*s", dir, (int)(slash - s), s);
		free(dir);
		dir = next;
		/* v2: a parent passes the controllers on to its children; the
		 * kernel refuses that where the parent holds processes. */
		if (v2) {
			_cleanup_free_ char *up = xstrdup(dir);
			*strrchr(up, '/') = '\0';
			if ((r = al_cg_write_str(up, "cgroup.subtree_control", "+memory +pids +cpu",
						 err)) < 0)
				return r;
		}
		if (mkdir(dir, 0755) == 0) {
			/* Ours to remove once empty (al_cg_remove_parents). */
			if ((r = al_cg_mark(dir, AL_CG_MARK_PARENT, err)) < 0) {
				rmdir(dir);
				return r;
			}
		} else if (errno != EEXIST) {
			return al_error_setsys(err, errno, "cgroup: mkdir %s", dir);
		}
	}
	if (v2)
		return al_cg_write_str(dir, "cgroup.subtree_control", "+memory +pids +cpu", err);
	return 0;
}

/* dir/cgroup.procs lists a process. */
static bool holds_procs(const char *dir)
{
	_cleanup_free_ char *p = xasprintf("%s/cgroup.procs", dir);
	char buf[16];

	return al_read_file(p, buf, sizeof(buf)) > 0;
}

int al_cg_check_ancestors(const char *mount, const char *path, bool v2, struct al_error *err)
{
	_cleanup_free_ char *dir = xstrdup(mount);
	const char *s = path;

	for (const char *slash; (slash = strchr(s + 1, '/')); s = slash) {
		char *next = xasprintf("%s%.*s", dir, (int)(slash - s), s);
		free(dir);
		dir = next;
		_cleanup_free_ char *leaf = xasprintf("%s/" AL_CG_INIT_LEAF, dir);
		if (al_cg_marked(dir, AL_CG_MARK_CONTAINER))
			return al_error_set(err, EBUSY,
					    "linux.cgroupsPath: \"%s\": %s is another airlock "
					    "container's cgroup; a container's cgroup is not made "
					    "inside one",
					    path, dir);
		if (holds_procs(dir) || (v2 && holds_procs(leaf)))
			return al_error_set(
			    err, EBUSY,
			    "linux.cgroupsPath: \"%s\": %s holds processes (a "
			    "container's?); a container's cgroup is not made inside "
			    "one",
			    path, dir);
	}
	return 0;
}

void al_cg_tags_find(struct al_cgroup *cg, const char *path)
{
	for (size_t i = 0; al_cg_tag_names[i] && cg->n_tags < MAX_TAGS; i++) {
		_cleanup_free_ char *mount = xasprintf(CG_ROOT "/%s", al_cg_tag_names[i]);
		struct statfs sf;
		char real[4096];
		bool dup = false;

		if (statfs(mount, &sf) < 0 || (long)sf.f_type != CGROUP_SUPER_MAGIC ||
		    !realpath(mount, real))
			continue;
		for (size_t j = 0; j < cg->n_tags; j++)
			dup |= strcmp(cg->tag[j].mount, real) == 0; /* co-mounted */
		for (size_t j = 0; j < cg->n; j++)
			dup |= cg->h[j].mount && strcmp(cg->h[j].mount, real) == 0;
		if (dup)
			continue;
		struct tag *t = &cg->tag[cg->n_tags++];
		t->mount = xstrdup(real);
		t->dir = xasprintf("%s%s", real, path);
		t->base = xstrdup(t->dir);
		*strrchr(t->base, '/') = '\0';
		t->back_fd = -1;
	}
}

int al_cg_tags_enter(struct al_cgroup *cg, const char *path, struct al_error *err)
{
	int r;

	for (size_t i = 0; i < cg->n_tags; i++) {
		struct tag *t = &cg->tag[i];
		/* The way back: where we are now in this hierarchy (its mount
		 * is named after its controllers: "net_cls,net_prio"). */
		const char *c = strrchr(t->mount, '/') + 1;
		_cleanup_free_ char *first = xasprintf("%.*s", (int)strcspn(c, ","), c);
		_cleanup_free_ char *own = al_cg_own_path(first);
		if (!own)
			return al_error_set(err, ENOENT, "cgroup: not in any cgroup of %s",
					    t->mount);
		_cleanup_free_ char *back =
		    xasprintf("%s%s/cgroup.procs", t->mount, strcmp(own, "/") == 0 ? "" : own);
		t->back_fd = open(back, O_WRONLY | O_CLOEXEC);
		if (t->back_fd < 0)
			return al_error_setsys(err, errno, "cgroup: open %s", back);
		if ((r = al_cg_mkdir_parents(t->mount, path, false, err)) < 0)
			return r;
		if (mkdir(t->dir, 0755) < 0)
			return al_error_setsys(err, errno, "linux.cgroupsPath \"%s\": mkdir %s",
					       path, t->dir);
		t->made = true;
		if ((r = al_cg_write_str(t->dir, "cgroup.procs", "0", err)) < 0)
			return r;
		t->in = true;
	}
	return 0;
}

void al_cg_tags_leave(struct al_cgroup *cg)
{
	for (size_t i = 0; i < cg->n_tags; i++) {
		struct tag *t = &cg->tag[i];
		/* Never rmdir (nor kill what is in) a directory we may still
		 * be in: `delete` removes it once we are gone. */
		int r = 0;
		if (t->in && (t->back_fd < 0 || write(t->back_fd, "0", 1) != 1))
			al_warn("cgroup: cannot leave %s: %s; left for delete", t->dir,
				strerror(errno));
		else if (t->made && (r = al_cg_rmdir_wait(t->dir)) < 0)
			al_warn("cgroup: cannot remove %s: %s; left for delete", t->dir,
				strerror(-r));
		al_closep(&t->back_fd);
		free(t->mount);
		free(t->dir);
		free(t->base);
	}
	cg->n_tags = 0;
}
