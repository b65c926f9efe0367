/* A container's own root in a guest (microvm.h: the OCI runtime's plans
 * with io.airlock.backend microvm or vm). The bundle's root directory
 * becomes an ext4 image made by mkfs.ext4 -d, its files keeping their own
 * ids, modes and links; the guest boots it as its root device in place of
 * the system image, read-only, under an overlay whose upper half is on the
 * guest's scratch (src/guest/agent-root.c). Nothing the container writes
 * reaches the host: its root's changes, like its tmpfs, go with the guest.
 *
 * The plan's other entries become the agent's mounts, in the plan's order:
 * a host file or tree bound read-only (a copy of it in the initramfs, as
 * airlock run's --ro inputs travel), a host file the engine binds writable
 * (podman's /etc/hosts) as a writable copy, a file airlock writes
 * (resolv.conf, a credential's files) bound read-only, tmpfs faces on the
 * scratch, sysfs, cgroup2 and mqueue of the guest's own, masked and
 * read-only paths. /proc and /dev are the agent's. A writable host
 * directory is refused: a guest cannot write it back. */
#include <errno.h>
#include <fcntl.h>
#include <fts.h>
#include <limits.h>
#include <linux/filter.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "backend/microvm/image-internal.h"
#include "backend/microvm/microvm.h"
#include "core/cleanup.h"
#include "core/util.h"
#include "guest/config-parse.h"

/* A root image's bounds: its files' bytes and entries. */
#define ROOT_MAX_BYTES (16ull << 30)
#define ROOT_MAX_FILES 4000000ull
/* How long mkfs.ext4 may copy it (a root of ROOT_MAX_FILES entries takes
 * minutes). */
#define ROOT_MKFS_TIMEOUT_S 600
/* What the initramfs carries for the mounts, in the guest's RAM. */
#define ROOT_INPUTS_MAX	     (256ull << 20)
#define ROOT_INPUT_FILES_MAX 100000u

static const struct al_fs_entry *root_entry(const struct al_plan *p)
{
	return p->n_fs && p->fs[0].kind == AL_FS_HOST && strcmp(p->fs[0].path, "/") == 0 ? &p->fs[0]
											 : NULL;
}

/* The tree's data in 4 KiB blocks and its entries, without following a
 * link or leaving its file system; dir (/proc/self/fd/N: followed as the
 * walk's start only) is called name in messages. */
static int measure(const char *dir, const char *name, uint64_t *bytes, uint64_t *files,
		   struct al_error *err)
{
	char *const paths[] = {(char *)dir, NULL};
	FTS *t = fts_open(paths, FTS_PHYSICAL | FTS_COMFOLLOW | FTS_XDEV | FTS_NOCHDIR, NULL);
	FTSENT *e;
	size_t skip = strlen(dir);
	int r = 0;

	if (!t)
		return al_error_setsys(err, errno, "reading the container's root %s", name);
	*bytes = *files = 0;
	while ((e = fts_read(t))) {
		if (e->fts_info == FTS_DP)
			continue;
		if (e->fts_info == FTS_DNR || e->fts_info == FTS_ERR || e->fts_info == FTS_NS) {
			const char *rel = strlen(e->fts_path) >= skip ? e->fts_path + skip : "";
			r = al_error_setsys(err, e->fts_errno, "reading the container's root: %s%s",
					    name, rel);
			break;
		}
		(*files)++;
		if (e->fts_statp)
			*bytes += ((uint64_t)e->fts_statp->st_size + 4095) & ~4095ull;
		if (*bytes > ROOT_MAX_BYTES || *files > ROOT_MAX_FILES) {
			r = al_error_set(err, EFBIG,
					 "root.path: %s is over what a guest's root image holds "
					 "(%llu GiB, %llu entries)",
					 name, ROOT_MAX_BYTES >> 30, ROOT_MAX_FILES);
			break;
		}
	}
	if (r == 0 && errno && !e)
		r = al_error_setsys(err, errno, "reading the container's root %s", name);
	fts_close(t);
	return r;
}

int al_vm_container_image(struct vm_run *w, struct al_error *err)
{
	const struct al_fs_entry *e = root_entry(w->orig);
	uint64_t bytes = 0, files = 0;
	struct stat st;
	struct statvfs sv;
	int r;

	if (!e)
		return al_error_set(err, EINVAL, "backend %s: the plan's root is not a directory",
				    w->kind->name);
	/* The root as the plan found it, held from here on: mkfs reads it
	 * through this descriptor (al_vm_mkfs), whatever its path becomes. */
	_cleanup_close_ int dir = open(e->source, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dir < 0 || fstat(dir, &st) < 0 || st.st_dev != e->dev || st.st_ino != e->ino)
		return al_error_set(err, ESTALE, "root.path: %s changed since the plan was made",
				    e->source);
	/* The tree mkfs will copy: the one held, not what the path leads to
	 * now. */
	char held[32];
	snprintf(held, sizeof(held), "/proc/self/fd/%d", dir);
	errno = 0;
	if ((r = measure(held, e->source, &bytes, &files, err)) < 0)
		return r;
	if ((r = al_vm_cache_mkdir("/var/lib/airlock", err)) < 0)
		return r;
	struct stat ds;
	if ((mkdir(AL_VM_ROOT_DIR, 0700) < 0 && errno != EEXIST) || lstat(AL_VM_ROOT_DIR, &ds) < 0)
		return al_error_setsys(err, errno, "creating %s", AL_VM_ROOT_DIR);
	if (!S_ISDIR(ds.st_mode) || ds.st_uid != 0 || (ds.st_mode & 077))
		return al_error_set(err, EPERM, "%s is not a directory of root's alone",
				    AL_VM_ROOT_DIR);
	/* As the system image's: the data, an eighth more, the inode tables
	 * and a margin; the upper half in the guest holds the writes. */
	uint64_t size = bytes + bytes / 8 + files * 1024 + (32ull << 20);
	size = (size + (1 << 20) - 1) & ~(uint64_t)((1 << 20) - 1);
	if (statvfs(AL_VM_ROOT_DIR, &sv) == 0 && (uint64_t)sv.f_bavail * sv.f_frsize < size)
		return al_error_set(
		    err, ENOSPC,
		    "root.path: its image needs up to %llu MiB in %s, which has %llu "
		    "MiB free",
		    (unsigned long long)(size >> 20), AL_VM_ROOT_DIR,
		    (unsigned long long)((uint64_t)sv.f_bavail * sv.f_frsize >> 20));
	w->rootimg = xasprintf("%s/root-%d-XXXXXX", AL_VM_ROOT_DIR, (int)getpid());
	int fd = mkostemp(w->rootimg, O_CLOEXEC);
	if (fd < 0) {
		r = al_error_setsys(err, errno, "creating %s", w->rootimg);
		free(w->rootimg);
		w->rootimg = NULL;
		return r;
	}
	close(fd);
	/* Where mkfs sees the root (its own mount namespace binds it there). */
	_cleanup_free_ char *at = xasprintf("%s.d", w->rootimg);
	if (mkdir(at, 0700) < 0)
		return al_error_setsys(err, errno, "creating %s", at);
	r = al_vm_mkfs(at, w->rootimg, size, files + files / 4 + 1024, "airlock-root", st.st_uid,
		       st.st_gid, dir, ROOT_MKFS_TIMEOUT_S, err);
	rmdir(at);
	if (r < 0)
		al_error_wrap(err, "root.path: making the guest's root image");
	return r;
}

/* One payload of the initramfs for a mount: a host file or tree (HOST),
 * or a file airlock writes (FILE). */
struct payload {
	const struct al_fs_entry *e;
	char *name; /* in the initramfs, no leading slash */
};

static bool under_dev(const char *path)
{
	return al_path_is_under(path, "/dev");
}

/* The plan's entry as the agent's mount (0), nothing for the agent to do
 * (1: its own /proc and /dev), or a refusal. */
static int to_mount(const struct vm_run *w, const struct al_fs_entry *e, struct al_guest_mount *m,
		    bool *payload, struct al_error *err)
{
	const char *n = w->kind->name;

	*payload = false;
	*m = (struct al_guest_mount){.target = e->path};
	switch (e->kind) {
	case AL_FS_PROC:
		return strcmp(e->path, "/proc") == 0 ? 1 : -EINVAL;
	case AL_FS_DIR:
	case AL_FS_DEVICE:
	case AL_FS_LINK:
	case AL_FS_PTYS:
		if (under_dev(e->path))
			return 1;
		return al_error_set(err, EINVAL, "backend %s: %s is not one a guest makes", n,
				    e->what);
	case AL_FS_SCRATCH:
		if (strcmp(e->path, "/dev/shm") == 0)
			return 1;
		m->kind = AL_GM_TMPFS;
		return 0;
	case AL_FS_HOST:
		if ((e->access & AL_FS_WRITE) && e->dir)
			return al_error_set(err, EOPNOTSUPP,
					    "mounts: %s: backend %s cannot write a host directory "
					    "(a guest gets a copy, whose writes would be lost): "
					    "mount it read-only, or use io.airlock.backend native",
					    e->path, n);
		m->kind = (e->access & AL_FS_WRITE) ? AL_GM_COPY : AL_GM_BIND;
		*payload = true;
		return 0;
	case AL_FS_FILE:
		m->kind = AL_GM_BIND;
		*payload = true;
		return 0;
	case AL_FS_SPECIAL:
		m->kind = AL_GM_SPECIAL;
		m->source = e->source;
		return 0;
	case AL_FS_MASK:
		m->kind = AL_GM_MASK;
		return 0;
	case AL_FS_RDONLY:
		m->kind = AL_GM_RDONLY;
		return 0;
	}
	return al_error_set(err, EINVAL, "backend %s: %s: an entry of an unknown kind", n, e->what);
}

int al_vm_container_check(const struct vm_run *w, struct al_error *err)
{
	const struct al_plan *p = w->orig;
	size_t n = 0;

	if (!root_entry(p))
		return al_error_set(err, EINVAL, "backend %s: the plan's root is not a directory",
				    w->kind->name);
	if (p->n_groups > AL_GUEST_CONFIG_MAX_GROUPS)
		return al_error_set(err, E2BIG,
				    "process.user.additionalGids: backend %s takes at most %u",
				    w->kind->name, AL_GUEST_CONFIG_MAX_GROUPS);
	for (size_t i = 1; i < p->n_fs; i++) {
		struct al_guest_mount m;
		bool payload;
		int r = to_mount(w, &p->fs[i], &m, &payload, err);
		if (r < 0)
			return r;
		if (r == 0 && ++n > AL_GUEST_CONFIG_MAX_MOUNTS)
			return al_error_set(err, E2BIG, "mounts: backend %s takes at most %u",
					    w->kind->name, AL_GUEST_CONFIG_MAX_MOUNTS);
	}
	return 0;
}

/* A payload into the initramfs at name, within *left bytes. */
static int put_payload(const struct vm_run *w, struct al_cpio *cp, const struct payload *pl,
		       uint64_t *left, struct al_error *err)
{
	const struct al_fs_entry *e = pl->e;
	struct stat st;
	int r;

	if (e->kind == AL_FS_FILE) {
		if (e->len > *left)
			return al_error_set(err, EFBIG,
					    "backend %s: %s is over what the guest's "
					    "initramfs may carry",
					    w->kind->name, e->what);
		*left -= e->len;
		r = al_cpio_file(cp, pl->name, e->mode & 0777, e->source, e->len);
		return r < 0 ? al_error_setsys(err, -r, "writing the guest's initramfs") : 0;
	}
	_cleanup_close_ int fd =
	    open(e->source, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | (e->dir ? O_DIRECTORY : 0));
	if (fd < 0)
		return al_error_setsys(err, errno, "mounts: %s: %s", e->path, e->source);
	if (fstat(fd, &st) < 0 || st.st_dev != e->dev || st.st_ino != e->ino)
		return al_error_set(err, ESTALE, "mounts: %s: %s changed since the plan was made",
				    e->path, e->source);
	if (e->dir) {
		r = al_cpio_host_tree(cp, pl->name, fd, *left, ROOT_INPUT_FILES_MAX, err);
		if (r == -EFBIG)
			al_error_wrap(err,
				      "mounts: %s: a guest gets its host trees as a copy in its "
				      "RAM, within a quarter of it (at most %llu MiB) in all",
				      e->path, ROOT_INPUTS_MAX >> 20);
		if (r == 0)
			*left -= al_cpio_tree_bytes(cp);
		return r;
	}
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > *left)
		return al_error_set(err, EFBIG,
				    "mounts: %s: a guest gets host files as a copy in its RAM, "
				    "within a quarter of it (at most %llu MiB) in all",
				    e->path, ROOT_INPUTS_MAX >> 20);
	*left -= (uint64_t)st.st_size;
	r = al_cpio_host_file(cp, pl->name, st.st_mode & 0777, fd, (uint64_t)st.st_size);
	return r < 0 ? al_error_setsys(err, -r, "mounts: %s: %s", e->path, e->source) : 0;
}

int al_vm_container_initrd(struct vm_run *w, struct al_error *err)
{
	const struct al_plan *p = w->orig;
	const struct al_plan_root *root = p->root;
	struct al_guest_mount mounts[AL_GUEST_CONFIG_MAX_MOUNTS];
	struct payload pls[AL_GUEST_CONFIG_MAX_MOUNTS];
	const char *mods[AL_VM_MAX_MODULES];
	size_t n_m = 0, n_pl = 0;
	uint64_t left =
	    al_vm_guest_ram(p) / 4 < ROOT_INPUTS_MAX ? al_vm_guest_ram(p) / 4 : ROOT_INPUTS_MAX;
	_cleanup_close_ int fd = -1;
	struct al_cpio *cp = NULL;
	int r = 0;

	if ((r = al_vm_container_check(w, err)) < 0)
		return r;
	for (size_t i = 1; i < p->n_fs; i++) {
		struct al_guest_mount m;
		bool payload;
		r = to_mount(w, &p->fs[i], &m, &payload, err);
		if (r < 0)
			goto out;
		if (r == 1)
			continue;
		if (n_m == AL_GUEST_CONFIG_MAX_MOUNTS) { /* the check counted them */
			r = al_error_set(err, E2BIG, "mounts: backend %s takes at most %u",
					 w->kind->name, AL_GUEST_CONFIG_MAX_MOUNTS);
			goto out;
		}
		mounts[n_m] = m;
		if (payload) {
			pls[n_pl] = (struct payload){.e = &p->fs[i],
						     .name = xasprintf("airlock/in/%zu", n_pl)};
			mounts[n_m].source = xasprintf("/%s", pls[n_pl].name);
			n_pl++;
		}
		n_m++;
	}
	r = 0;
	struct al_guest_config c;
	al_vm_guest_config_init(w, &c, mods);
	c.uid = p->uid;
	c.gid = p->gid;
	c.container = true;
	c.container_ro = root->readonly;
	c.mounts = mounts;
	c.n_mounts = n_m;
	c.groups = p->groups;
	c.n_groups = p->n_groups;
	c.umask = root->umask;
	c.seccomp = root->seccomp_len ? "/airlock/seccomp" : NULL;
	c.nofile = p->open_files;
	c.nofile_soft = p->open_files_soft;
	if ((r = al_vm_initrd_begin(w, &c, &fd, &cp, err)) < 0)
		goto out;
	if (r == 0 && root->seccomp_len)
		r = al_cpio_file(cp, "airlock/seccomp", 0400, root->seccomp,
				 root->seccomp_len * sizeof(struct sock_filter));
	if (r == 0 && n_pl)
		r = al_cpio_dir(cp, &AL_GUEST_INPUTS_DIR[1], 0755);
	if (r < 0) {
		r = al_error_setsys(err, -r, "writing %s", w->initrd);
	} else {
		for (size_t i = 0; r == 0 && i < n_pl; i++)
			r = put_payload(w, cp, &pls[i], &left, err);
	}
	int f = al_cpio_finish(cp);
	if (r == 0 && f < 0)
		r = al_error_setsys(err, -f, "writing %s", w->initrd);
out:
	for (size_t i = 0; i < n_pl; i++)
		free(pls[i].name);
	for (size_t i = 0; i < n_m; i++)
		if (mounts[i].kind == AL_GM_BIND || mounts[i].kind == AL_GM_COPY)
			free((char *)mounts[i].source);
	if (r < 0)
		al_vm_guest_unlink(w);
	return r;
}
