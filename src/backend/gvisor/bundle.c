/* The plan as an OCI bundle for runsc: config.json (written with jansson)
 * and "rootfs", a tree airlock writes that runsc shows read-only: the
 * plan's directories, files and links, and an empty mount point for each
 * host path, the proc and each face of the scratch, which config.json's
 * mounts fill. gVisor brings its own /dev (null, zero, full, random,
 * urandom, tty, ptmx, pts): the plan's device entries are not mounted. */
#include "backend/gvisor/gvisor.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/sys.h"
#include "core/util.h"

/* Make every missing directory of rel (relative to rootfs) up to, but not
 * including, its last component. Each must be a directory, not a link the
 * plan put there: a path through a link (such as /dev/fd ->
 * /proc/self/fd) would resolve on the host, outside the rootfs, where
 * airlock writes as root. */
static int make_parents(int rootfd, const char *rel)
{
	char buf[4096];
	size_t n = strlen(rel);
	struct stat st;

	if (n >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, rel, n + 1);
	for (char *s = strchr(buf, '/'); s; s = strchr(s + 1, '/')) {
		*s = '\0';
		if (buf[0] && mkdirat(rootfd, buf, 0755) < 0 && errno != EEXIST)
			return -errno;
		if (buf[0] &&
		    (fstatat(rootfd, buf, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode)))
			return -ENOTDIR;
		*s = '/';
	}
	return 0;
}

/* A mount point at rel: a directory, or an empty file for a file. */
static int mount_point(int rootfd, const char *rel, bool dir)
{
	int r = make_parents(rootfd, rel), fd;

	if (r < 0)
		return r;
	if (dir)
		return mkdirat(rootfd, rel, 0755) < 0 && errno != EEXIST ? -errno : 0;
	fd = openat(rootfd, rel, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0444);
	if (fd < 0)
		return errno == EEXIST ? 0 : -errno;
	close(fd);
	return 0;
}

static json_t *mount(const char *dest, const char *type, const char *source, bool ro, bool exec)
{
	json_t *opts = json_array();

	if (strcmp(type, "bind") == 0)
		json_array_append_new(opts, json_string("rbind"));
	json_array_append_new(opts, json_string(ro ? "ro" : "rw"));
	json_array_append_new(opts, json_string("nosuid"));
	json_array_append_new(opts, json_string("nodev"));
	if (!exec)
		json_array_append_new(opts, json_string("noexec"));
	return json_pack("{s:s, s:s, s:s, s:o}", "destination", dest, "type", type, "source",
			 source, "options", opts);
}

/* Is path at or beneath one of the mounts so far (where airlock cannot
 * write a file of the rootfs)? */
static bool under_mount(json_t *mounts, const char *path)
{
	size_t i;
	json_t *m;

	json_array_foreach(mounts, i, m)
	{
		const char *d = json_string_value(json_object_get(m, "destination"));
		if (d && strcmp(d, "/") != 0 && al_path_is_under(path, d))
			return true;
	}
	return false;
}

/* One entry of the plan's file tree into the rootfs or the mounts. */
static int add_entry(int rootfd, json_t *mounts, const struct al_plan *p,
		     const struct al_fs_entry *e, const char *scratch, const char *input,
		     struct al_error *err)
{
	const char *rel = e->path + 1; /* the plan's paths are absolute and clean */
	int r = 0;

	if (!rel[0] && e->kind == AL_FS_DIR)
		return 0; /* the root itself */
	switch (e->kind) {
	case AL_FS_MASK:
	case AL_FS_RDONLY:
	case AL_FS_SPECIAL: /* a container's root: refused (backend.c admit) */
	case AL_FS_DEVICE:
	case AL_FS_PTYS:
		return 0; /* gVisor's own /dev */
	case AL_FS_DIR:
		if ((r = make_parents(rootfd, rel)) == 0 && mkdirat(rootfd, rel, e->mode) < 0 &&
		    errno != EEXIST)
			r = -errno;
		break;
	case AL_FS_FILE:
	case AL_FS_LINK:
		if (under_mount(mounts, e->path))
			return al_error_set(err, EOPNOTSUPP,
					    "backend gvisor: %s (%s) lies inside a mounted path, "
					    "where airlock writes no file",
					    e->path, e->what ? e->what : "file");
		if ((r = make_parents(rootfd, rel)) < 0)
			break;
		if (e->kind == AL_FS_LINK) {
			r = symlinkat(e->source, rootfd, rel) < 0 ? -errno : 0;
		} else {
			int fd =
			    openat(rootfd, rel,
				   O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, e->mode);
			if (fd < 0 || al_write_all(fd, e->source, e->len) < 0 ||
			    fchmod(fd, e->mode) < 0)
				r = -errno;
			if (fd >= 0)
				close(fd);
		}
		break;
	case AL_FS_HOST:
		/* A task's input: where runsc's parent attaches the tree the
		 * supervisor opened (userns.c). */
		if ((r = mount_point(rootfd, rel, e->dir)) == 0)
			json_array_append_new(mounts,
					      mount(e->path, "bind", input ? input : e->source,
						    true, (e->access & AL_FS_EXEC) != 0));
		break;
	case AL_FS_PROC:
		if ((r = mount_point(rootfd, rel, true)) == 0)
			json_array_append_new(mounts, mount(e->path, "proc", "proc", false, false));
		break;
	case AL_FS_SCRATCH: {
		char *src = xasprintf("%s/%s", scratch, e->source);
		if ((r = mount_point(rootfd, rel, true)) == 0)
			json_array_append_new(mounts,
					      mount(e->path, "bind", src, false, p->scratch_exec));
		free(src);
		break;
	}
	}
	if (r < 0)
		return al_error_setsys(err, -r, "backend gvisor: making %s (%s) in the bundle",
				       e->path, e->what ? e->what : "entry");
	return 0;
}

static json_t *rlimit(const char *name, uint64_t soft, uint64_t hard)
{
	return json_pack("{s:s, s:I, s:I}", "type", name, "hard", (json_int_t)hard, "soft",
			 (json_int_t)soft);
}

int al_gvisor_bundle(int dirfd, const struct al_plan *p, const char *scratch,
		     const struct al_gvisor_inputs *in, struct al_error *err)
{
	_cleanup_close_ int rootfd = -1;
	json_t *mounts = json_array(), *args = json_array(), *env = json_array();
	json_t *rlimits = json_array(), *cfg;
	char *text = NULL;
	int r = 0, fd = -1;

	if (mkdirat(dirfd, "rootfs", 0755) < 0 ||
	    (rootfd = openat(dirfd, "rootfs", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		r = al_error_setsys(err, errno, "backend gvisor: making the bundle's rootfs");
		goto out;
	}
	for (size_t i = 0; i < p->n_fs && r == 0; i++)
		r = add_entry(rootfd, mounts, p, &p->fs[i], scratch,
			      i < in->n ? in->sources[i] : NULL, err);
	if (r < 0)
		goto out;
	for (size_t i = 0; p->argv[i]; i++)
		json_array_append_new(args, json_string(p->argv[i]));
	for (size_t i = 0; p->envp && p->envp[i]; i++)
		json_array_append_new(env, json_string(p->envp[i]));
	if (p->open_files)
		json_array_append_new(
		    rlimits,
		    rlimit("RLIMIT_NOFILE", p->open_files_soft ? p->open_files_soft : p->open_files,
			   p->open_files));
	if (p->file_size)
		json_array_append_new(rlimits, rlimit("RLIMIT_FSIZE", p->file_size, p->file_size));
	/* No capabilities at all, no new privileges; namespaces of its own. */
	cfg = json_pack("{s:s, s:{s:b, s:{s:i, s:i}, s:o, s:o, s:s, s:o, s:b, s:{s:[], s:[], s:[], "
			"s:[], s:[]}},"
			" s:{s:s, s:b}, s:s, s:o,"
			" s:{s:[{s:s},{s:s},{s:s},{s:s}]}}",
			"ociVersion", "1.0.2", "process", "terminal", 0, "user", "uid",
			AL_SANDBOX_UID, "gid", AL_SANDBOX_GID, "args", args, "env", env, "cwd",
			p->workdir ? p->workdir : "/", "rlimits", rlimits, "noNewPrivileges", 1,
			"capabilities", "bounding", "effective", "inheritable", "permitted",
			"ambient", "root", "path", "rootfs", "readonly", 1, "hostname",
			p->hostname ? p->hostname : AL_DEFAULT_HOSTNAME, "mounts", mounts, "linux",
			"namespaces", "type", "pid", "type", "ipc", "type", "uts", "type", "mount");
	/* Without network rules runsc's --network=none gives the sentry a
	 * loopback of its own; with them (--network=host) the sentry's
	 * sockets are host sockets in the namespace airlock made for the run
	 * (gvisor.c), so the spec asks for none of its own. */
	if (cfg && !p->gateway)
		json_array_append_new(json_object_get(json_object_get(cfg, "linux"), "namespaces"),
				      json_pack("{s:s}", "type", "network"));
	args = env = rlimits = mounts = NULL;
	if (!cfg) {
		r = al_error_set(err, ENOMEM, "backend gvisor: building config.json");
		goto out;
	}
	text = json_dumps(cfg, JSON_COMPACT);
	json_decref(cfg);
	fd = openat(dirfd, "config.json", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (!text || fd < 0 || al_write_all(fd, text, strlen(text)) < 0)
		r = al_error_setsys(err, errno ? errno : ENOMEM,
				    "backend gvisor: writing the bundle's config.json");
out:
	if (fd >= 0)
		close(fd);
	free(text);
	json_decref(mounts);
	json_decref(args);
	json_decref(env);
	json_decref(rlimits);
	return r;
}
