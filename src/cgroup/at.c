/* A run's cgroup at a path the caller chose (a container's cgroupsPath,
 * cgroup.h's al_cgroup_limits.path): its parents made on the way down. */
#include "cgroup/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/cleanup.h"
#include "core/util.h"

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
		if (mkdir(dir, 0755) < 0 && errno != EEXIST)
			return al_error_setsys(err, errno, "cgroup: mkdir %s", dir);
	}
	if (v2)
		return al_cg_write_str(dir, "cgroup.subtree_control", "+memory +pids +cpu", err);
	return 0;
}
