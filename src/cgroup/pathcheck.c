/* A container's cgroupsPath checked (cgroup.h): pure, no syscalls, so
 * that the unit tests run it without root or a cgroup mount. */
#include "cgroup/cgroup.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/util.h"

/* Files of a cgroup directory: names no component may have or start
 * with (v1 and v2; the controllers' files start with their name and a
 * dot). */
static const char *const control_names[] = {"tasks", "notify_on_release", "release_agent", NULL};
static const char *const control_prefixes[] = {
    "cgroup.",	"memory.", "pids.",    "cpu.",	   "cpuacct.",	"blkio.",
    "freezer.", "io.",	   "hugetlb.", "net_cls.", "net_prio.", "perf_event.",
    "devices.", "cpuset.", "rdma.",    "misc.",	   NULL};

/* One component of the path (len bytes at s). */
static int check_component(const char *s, size_t len, struct al_error *err)
{
	if (len == 0)
		return al_error_set(err, EINVAL, "an empty component (\"//\" or a trailing \"/\")");
	if (s[0] == '.')
		return al_error_set(err, EINVAL,
				    "\"%.*s\": a component may not start with \".\" (no \".\" or "
				    "\"..\")",
				    (int)len, s);
	if (len > AL_CGROUP_COMPONENT_MAX)
		return al_error_set(err, EINVAL, "a component of %zu bytes (at most %d)", len,
				    AL_CGROUP_COMPONENT_MAX);
	/* airlock's own run cgroups live in directories named so, in any
	 * cgroup a caller of airlock runs in: a container kept out of them
	 * is never taken for a stale run by gc, nor put inside one. */
	if (len == strlen("airlock") && strncmp(s, "airlock", len) == 0)
		return al_error_set(err, EPERM, "\"airlock\" is airlock's own (its run cgroups)");
	/* The name of a cgroupfs file: its mkdir fails (EEXIST) only once
	 * the parents are made, or it reads as a control file to tools. */
	for (size_t i = 0; control_names[i]; i++)
		if (len == strlen(control_names[i]) && strncmp(s, control_names[i], len) == 0)
			return al_error_set(err, EINVAL, "\"%.*s\" is the name of a cgroup file",
					    (int)len, s);
	for (size_t i = 0; control_prefixes[i]; i++)
		if (len >= strlen(control_prefixes[i]) &&
		    strncmp(s, control_prefixes[i], strlen(control_prefixes[i])) == 0)
			return al_error_set(err, EINVAL,
					    "\"%.*s\": a component may not start with \"%s\" (the "
					    "cgroup files' prefix)",
					    (int)len, s, control_prefixes[i]);
	return 0;
}

int al_cgroup_path_check(const char *path, char **ret, struct al_error *err)
{
	static const char ok[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
				 "0123456789._-+@=/";
	const char *s = path;
	size_t len = path ? strlen(path) : 0;
	int r;

	if (len == 0)
		return al_error_set(err, EINVAL, "empty");
	if (strchr(path, ':'))
		return al_error_set(err, EOPNOTSUPP,
				    "\"%.64s\": the systemd form slice:prefix:name needs systemd's "
				    "cgroup driver; airlock takes a cgroupfs path (/a/b)",
				    path);
	if (len > AL_CGROUP_PATH_MAX)
		return al_error_set(err, EINVAL, "%zu bytes (at most %d)", len, AL_CGROUP_PATH_MAX);
	size_t bad = strspn(path, ok);
	if (bad < len)
		return al_error_set(err, EINVAL,
				    "byte 0x%02x at offset %zu: only letters, digits, \"._-+@=\" "
				    "and \"/\" between components",
				    (unsigned char)path[bad], bad);
	if (*s == '/')
		s++;
	if (*s == '\0')
		return al_error_set(err, EPERM, "the root of the hierarchy is not a container's");
	for (size_t depth = 1;; depth++) {
		const char *slash = strchr(s, '/');
		size_t n = slash ? (size_t)(slash - s) : strlen(s);
		/* Each component is a cgroup in every hierarchy (v1 memory
		 * cgroup ids are a host-wide 65535). */
		if (depth > AL_CGROUP_DEPTH_MAX)
			return al_error_set(err, EINVAL, "more than %d components",
					    AL_CGROUP_DEPTH_MAX);
		if ((r = check_component(s, n, err)) < 0)
			return r;
		if (!slash)
			break;
		s = slash + 1;
	}
	if (ret)
		*ret = xasprintf("%s%s", path[0] == '/' ? "" : "/", path);
	return 0;
}
