/* runsc under the run's own host ids: runsc, its gofer and its sentry run
 * inside a user namespace that maps the run's ids (a slot of the pool,
 * ids/slots.h, or the plan's fixed range) and nothing else, so that none
 * of them is host root or holds a capability on the host, and an escape
 * lands on ids no other run has.
 *
 * The map: 0 (runsc and the gofer) to the slot's root, 1000 (the
 * command; what it writes in the scratch) to the sandbox user's host id,
 * 65534 (the sentry: runsc maps it alone into the sentry's own user
 * namespace) to the slot's id 65534.
 *
 * The run's directory is handed to the slot's root (the gofer opens the
 * bundle and the scratch by path, as that user). The task's inputs, which
 * that user may not be able to reach (a 0600 file under a 0700 home), are
 * opened by the supervisor as native opens them (backend/native/inputs.c:
 * detached trees, idmapped so that the sandbox user is their owner) and
 * attached by runsc's parent, still host root, at "inputs/N" in the run's
 * directory, which config.json binds. */
#include "backend/gvisor/gvisor.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backend/native/inputs.h"
#include "core/cleanup.h"
#include "core/sys.h"
#include "core/util.h"
#include "ids/slots.h"

/* The sentry's uid and gid in runsc's namespace (gVisor's nobody). */
#define SENTRY_ID 65534u

static void id_map(char *buf, size_t len, unsigned root, unsigned user)
{
	snprintf(buf, len, "0 %u 1\n%u %u 1\n%u %u 1\n", root, AL_SANDBOX_UID, user, SENTRY_ID,
		 root + SENTRY_ID);
}

int al_gvisor_write_maps(pid_t pid, const struct al_host_ids *ids, struct al_error *err)
{
	char map[128], path[64];
	int r;

	id_map(map, sizeof(map), ids->root_uid, ids->uid);
	snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)pid);
	if ((r = al_write_file_at(AT_FDCWD, path, map, strlen(map))) < 0)
		return al_error_setsys(err, -r, "backend gvisor: writing runsc's uid_map");
	id_map(map, sizeof(map), ids->root_gid, ids->gid);
	snprintf(path, sizeof(path), "/proc/%d/gid_map", (int)pid);
	if ((r = al_write_file_at(AT_FDCWD, path, map, strlen(map))) < 0)
		return al_error_setsys(err, -r, "backend gvisor: writing runsc's gid_map");
	return 0;
}

int al_gvisor_chown_tree(int at, const char *name, uid_t uid, gid_t gid)
{
	int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct dirent *de;
	DIR *d;
	int r = 0;

	if (fd < 0)
		return fchownat(at, name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
	if (fchown(fd, uid, gid) < 0 || !(d = fdopendir(fd))) {
		r = -errno;
		close(fd);
		return r;
	}
	while ((de = readdir(d)) && r == 0)
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
			r = al_gvisor_chown_tree(dirfd(d), de->d_name, uid, gid);
	closedir(d);
	return r;
}

/* One input as native opens it: read-only, its flags, its owner. */
static int open_one(const struct al_plan *p, size_t i, const struct al_host_ids *ids,
		    struct al_idmaps *maps, struct al_error *err)
{
	const struct al_fs_entry *e = &p->fs[i];
	struct al_mount_op op = {.dir = e->dir,
				 .attr = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
					 ((e->access & AL_FS_EXEC) ? 0 : MOUNT_ATTR_NOEXEC),
				 .dev = e->dev,
				 .ino = e->ino,
				 .input = (int)i,
				 .owner_uid = e->owner_uid,
				 .owner_gid = e->owner_gid,
				 .copy = e->copy,
				 .what = e->what ? e->what : "input"};
	bool copy = false;
	int fd = al_native_open_input(&op, e->source, ids, maps, &copy, err);

	if (fd < 0 && copy)
		return al_error_set(err, EOPNOTSUPP,
				    "backend gvisor: %s: %s is on a filesystem that cannot be "
				    "idmapped and others may not read it, and gvisor does not "
				    "copy inputs (\"copy\": true) in this release; make it "
				    "readable by others or use --backend native",
				    op.what, e->source);
	return fd;
}

int al_gvisor_open_inputs(const struct al_plan *p, const struct al_host_ids *ids, int dirfd,
			  const char *dir, struct al_gvisor_inputs *in, struct al_error *err)
{
	struct al_idmaps maps = {0};
	int r = 0;

	in->n = p->n_fs;
	in->fds = xcalloc(p->n_fs ? p->n_fs : 1, sizeof(*in->fds));
	in->sources = xcalloc(p->n_fs ? p->n_fs : 1, sizeof(*in->sources));
	for (size_t i = 0; i < p->n_fs; i++)
		in->fds[i] = -1;
	for (size_t i = 0; i < p->n_fs && r == 0; i++) {
		const struct al_fs_entry *e = &p->fs[i];
		char name[32];
		int fd;

		if (e->kind != AL_FS_HOST || !e->as_owner)
			continue;
		if (mkdirat(dirfd, "inputs", 0700) < 0 && errno != EEXIST) {
			r = al_error_setsys(err, errno, "backend gvisor: making %s/inputs", dir);
			break;
		}
		if ((r = open_one(p, i, ids, &maps, err)) < 0)
			break;
		in->fds[i] = r;
		r = 0;
		/* Its mount point, a directory or an empty file like it. */
		snprintf(name, sizeof(name), "inputs/%zu", i);
		if (e->dir)
			fd = mkdirat(dirfd, name, 0700);
		else if ((fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
				      0400)) >= 0)
			close(fd);
		if (fd < 0) {
			r = al_error_setsys(err, errno, "backend gvisor: making %s/%s", dir, name);
			break;
		}
		in->sources[i] = xasprintf("%s/%s", dir, name);
	}
	al_idmaps_free(&maps);
	if (r < 0)
		al_gvisor_close_inputs(in);
	return r;
}

int al_gvisor_attach_inputs(const struct al_gvisor_inputs *in)
{
	for (size_t i = 0; i < in->n; i++) {
		if (in->fds[i] < 0)
			continue;
		if (syscall(SYS_move_mount, in->fds[i], "", AT_FDCWD, in->sources[i],
			    MOVE_MOUNT_F_EMPTY_PATH) < 0)
			return -errno;
		close(in->fds[i]);
	}
	return 0;
}

void al_gvisor_close_inputs(struct al_gvisor_inputs *in)
{
	for (size_t i = 0; i < in->n; i++) {
		if (in->fds && in->fds[i] >= 0)
			close(in->fds[i]);
		if (in->sources)
			free(in->sources[i]);
	}
	free(in->fds);
	free(in->sources);
	*in = (struct al_gvisor_inputs){0};
}
