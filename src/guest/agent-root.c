/* A container's root in the guest (config.container: an OCI container
 * whose io.airlock.backend is microvm or vm). The root device holds the
 * container's files with their own ids (mkfs.ext4 -d of its bundle's
 * root on the host); it is mounted read-only and shown through an overlay
 * whose upper half is on the scratch tmpfs, so that what the container
 * writes counts against the scratch and goes with the guest. The agent
 * switches into it first, then makes /proc, /dev and the config's mounts
 * there: every target is resolved inside the container's root (its links
 * followed there, never out), as runc resolves them in the bundle's. What
 * a mount brings from the initramfs (an input's tree, a file, the scratch's
 * directories) is held by a descriptor opened before the switch.
 * Libc only: part of the static agent. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/filter.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "guest/agent.h"

/* The kernel's bound on a seccomp program (BPF_MAXINSNS). */
#define SECCOMP_MAX_INSNS 4096

void agent_read_seccomp(struct agent *a)
{
	size_t len;
	if (!a->cfg.c.seccomp)
		return;
	char *p =
	    agent_read_file(a->cfg.c.seccomp, SECCOMP_MAX_INSNS * sizeof(struct sock_filter), &len);
	if (!p || len == 0 || len % sizeof(struct sock_filter))
		agent_die(a, "guest agent: the container's seccomp program %s: %s",
			  a->cfg.c.seccomp,
			  p ? "not a whole number of instructions" : strerror(errno));
	a->seccomp = p;
	a->seccomp_len = (unsigned short)(len / sizeof(struct sock_filter));
}

/* The tree held by src (opened before the switch) attached at t, read-only
 * (and nosuid, nodev) when ro: a detached copy moved there, so that no
 * /proc is needed to name it. */
static void bind_fd(struct agent *a, int src, const char *t, bool ro)
{
	struct mount_attr attr = {.attr_set =
				      MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV};
	int tree = (int)syscall(SYS_open_tree, src, "",
				OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
	if (tree < 0 ||
	    (ro && syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr,
			   sizeof(attr)) < 0) ||
	    syscall(SYS_move_mount, tree, "", AT_FDCWD, t, MOVE_MOUNT_F_EMPTY_PATH) < 0)
		agent_die(a, "guest agent: mounting on %s: %s", t, strerror(errno));
	close(tree);
}

/* mkdir -p of path's parents inside the root (and of path itself when
 * dir); a file's mount point is an empty file. Links are followed as the
 * root resolves them: the agent is chrooted in it already. */
static int make_parents(const char *path)
{
	char p[4096];
	if (snprintf(p, sizeof(p), "%s", path) >= (int)sizeof(p))
		return -ENAMETOOLONG;
	for (char *s = p + 1; (s = strchr(s, '/')); s++) {
		*s = 0;
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	return 0;
}

static int make_point(const char *p, bool dir)
{
	int r = make_parents(p);
	if (r < 0)
		return r;
	if (dir)
		return mkdir(p, 0755) < 0 && errno != EEXIST ? -errno : 0;
	/* Read-only and non-blocking: a FIFO the image planted there must
	 * not hold the setup, and nothing is written to what is there. */
	int fd = open(p, O_RDONLY | O_CREAT | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	close(fd);
	return 0;
}

/* Whether fd is on one of the guest kernel's own file systems (its /proc,
 * /sys, cgroups), where nothing of a mount may land. */
static bool kernel_fs(int fd)
{
	struct statfs sf;
	if (fstatfs(fd, &sf) < 0)
		return true;
	return sf.f_type == PROC_SUPER_MAGIC || sf.f_type == SYSFS_MAGIC ||
	       sf.f_type == CGROUP2_SUPER_MAGIC || sf.f_type == CGROUP_SUPER_MAGIC;
}

/* A mount's target as the image resolves it (its links followed inside
 * the root) may not be in the guest kernel's /proc or /sys: a link the
 * image planted there (/etc/hostname -> /proc/sysrq-trigger) refuses the
 * setup. Its parent is checked, and (final) the target itself when it
 * exists. */
static bool kernel_path(const char *p)
{
	static const char *const dirs[] = {"/proc", "/sys"};
	for (size_t i = 0; i < sizeof(dirs) / sizeof(*dirs); i++) {
		size_t n = strlen(dirs[i]);
		if (strncmp(p, dirs[i], n) == 0 && (p[n] == '/' || p[n] == 0))
			return true;
	}
	return false;
}

static void check_target(struct agent *a, const char *t, bool final)
{
	char parent[4096], rp[PATH_MAX];
	snprintf(parent, sizeof(parent), "%s", t);
	char *slash = strrchr(parent, '/');
	if (slash == parent)
		slash[1] = 0;
	else if (slash)
		*slash = 0;
	/* Where the image's links take it (the guest's /proc is not there
	 * yet: by its path), and on which file system it is. */
	bool bad = realpath(parent, rp) && kernel_path(rp);
	bad |= final && realpath(t, rp) && kernel_path(rp);
	int fd = open(parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
	bad |= fd < 0 || kernel_fs(fd);
	if (fd >= 0)
		close(fd);
	fd = final ? open(t, O_PATH | O_CLOEXEC) : -1;
	bad |= fd >= 0 && kernel_fs(fd);
	if (fd >= 0)
		close(fd);
	if (bad)
		agent_die(a,
			  "guest agent: the container's mount target %s resolves into the guest "
			  "kernel's /proc, /sys or cgroups (a link in the image)",
			  t);
}

/* A mount point at t, made where missing; checked (check_target) for
 * what the image brings (binds, tmpfs), not for the guest kernel's own
 * file systems, which may sit in one another (cgroup2 at /sys/fs/cgroup). */
/* The first link of the image on t's way ("" when none): for messages. */
static const char *link_on_path(const char *t, char *buf, size_t len)
{
	char p[4096], l[4096];
	struct stat st;
	snprintf(p, sizeof(p), "%s", t);
	for (char *s = p + 1;; s++) {
		char *slash = strchr(s, '/');
		if (slash)
			*slash = 0;
		ssize_t n;
		if (lstat(p, &st) == 0 && S_ISLNK(st.st_mode) &&
		    (n = readlink(p, l, sizeof(l) - 1)) > 0) {
			l[n] = 0;
			snprintf(buf, len, " (through the image's link %s -> %s)", p, l);
			return buf;
		}
		if (!slash)
			return "";
		*slash = '/';
		s = slash;
	}
}

static void point(struct agent *a, const char *t, bool dir, bool check)
{
	char why[600];
	int r = make_parents(t);
	if (r == 0 && check)
		check_target(a, t, true);
	if (r == 0)
		r = make_point(t, dir);
	if (r < 0)
		agent_die(a, "guest agent: the container's mount point %s: %s%s", t, strerror(-r),
			  link_on_path(t, why, sizeof(why)));
}

/* A writable copy of the file held by src at t (an engine's rw bind of a
 * file, /etc/hosts: the guest cannot write the host's). What the image has
 * at t itself is replaced, never written through: a link there (to
 * /proc/sys/..., say) is removed first, anything but a regular file
 * refused. */
static void copy_file(struct agent *a, int src, const char *t)
{
	struct stat st;
	char buf[65536];
	ssize_t n;
	int r = make_parents(t);
	if (r < 0)
		agent_die(a, "guest agent: copying to %s: %s", t, strerror(-r));
	check_target(a, t, false); /* what is at t itself is replaced */
	/* A link or a file there is replaced, not written (nor copied up);
	 * a directory, FIFO or device refuses the setup. */
	if (lstat(t, &st) == 0 && (S_ISLNK(st.st_mode) || S_ISREG(st.st_mode)) && unlink(t) < 0)
		agent_die(a, "guest agent: copying to %s: %s", t, strerror(errno));
	int out = open(t, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
	if (out < 0 || fstat(out, &st) < 0 || fstat(src, &st) < 0)
		agent_die(a, "guest agent: copying to %s: %s", t, strerror(errno));
	while ((n = read(src, buf, sizeof(buf))) > 0)
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(out, buf + off, (size_t)(n - off));
			if (w < 0)
				agent_die(a, "guest agent: copying to %s: %s", t, strerror(errno));
			off += w;
		}
	if (n < 0 || fchmod(out, st.st_mode & 0777) < 0)
		agent_die(a, "guest agent: copying to %s: %s", t, strerror(errno));
	close(out);
}

/* A masked or read-only path (the config's, or the list below), once the
 * container's /proc is there: found (1, its stat in st) or not (0, left
 * alone); one reached through a magic link of /proc (/proc/2/root/...,
 * /proc/1/fd/N: out of the container's root) refuses the setup. */
static bool hidden_target(struct agent *a, const char *t, struct stat *st)
{
	struct open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_NO_MAGICLINKS};
	int fd = (int)syscall(SYS_openat2, AT_FDCWD, t, &how, sizeof(how));
	if (fd < 0 && errno == ELOOP)
		agent_die(a,
			  "guest agent: the container's path %s is reached through a link of "
			  "/proc",
			  t);
	if (fd < 0)
		return false;
	int r = fstat(fd, st);
	close(fd);
	return r == 0;
}

static void one_mount(struct agent *a, const struct al_guest_mount *m, int src)
{
	const char *t = m->target;
	struct stat st;

	switch (m->kind) {
	case AL_GM_BIND:
		if (fstat(src, &st) < 0)
			agent_die(a, "guest agent: %s: %s", m->source, strerror(errno));
		point(a, t, S_ISDIR(st.st_mode), true);
		bind_fd(a, src, t, true);
		break;
	case AL_GM_COPY:
		copy_file(a, src, t);
		break;
	case AL_GM_TMPFS:
		point(a, t, true, true);
		bind_fd(a, src, t, false);
		break;
	case AL_GM_SPECIAL: {
		bool rw = strcmp(m->source, "mqueue") == 0;
		point(a, t, true, false);
		agent_mount(a, m->source, t, m->source,
			    MS_NOSUID | MS_NODEV | MS_NOEXEC | (rw ? 0 : MS_RDONLY), NULL);
		break;
	}
	case AL_GM_MASK:
		if (!hidden_target(a, t, &st))
			break; /* nothing there to hide */
		if (S_ISDIR(st.st_mode))
			agent_mount(a, "tmpfs", t, "tmpfs",
				    MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
				    "size=4k,mode=0555");
		else
			agent_mount(a, "/dev/null", t, NULL, MS_BIND, NULL);
		break;
	case AL_GM_RDONLY: {
		struct statvfs sv;
		if (!hidden_target(a, t, &st))
			break;
		agent_mount(a, t, t, NULL, MS_BIND | MS_REC, NULL);
		/* The remount sets every flag: noexec kept where it was. */
		bool noexec = statvfs(t, &sv) == 0 && (sv.f_flag & ST_NOEXEC);
		agent_mount(a, NULL, t, NULL,
			    MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV |
				(noexec ? MS_NOEXEC : 0),
			    NULL);
		break;
	}
	}
}

void agent_container_root(struct agent *a)
{
	const struct al_guest_config *c = &a->cfg.c;
	int src[AL_GUEST_CONFIG_MAX_MOUNTS];
	char opt[160];
	struct stat st;

	if (agent_wait_device(c->root_device) < 0)
		agent_die(a, "guest agent: no root device %s", c->root_device);
	agent_mount(a, c->root_device, SYSIMG, c->root_fstype, MS_RDONLY | MS_NOSUID | MS_NODEV,
		    NULL);
	if (stat(SYSIMG, &st) < 0)
		agent_die(a, "guest agent: the container's root: %s", strerror(errno));
	snprintf(opt, sizeof(opt), "mode=0755,size=%" PRIu64, c->scratch_bytes);
	agent_mount(a, "tmpfs", SCRATCH, "tmpfs", MS_NOSUID | MS_NODEV, opt);
	/* The overlay's upper root takes the image root's owner and mode. */
	if (mkdir(SCRATCH "/upper", 0755) < 0 || chmod(SCRATCH "/upper", st.st_mode & 07777) < 0 ||
	    chown(SCRATCH "/upper", st.st_uid, st.st_gid) < 0 || mkdir(SCRATCH "/ovl", 0700) < 0 ||
	    mkdir(SCRATCH "/work", 0700) < 0 || mkdir(SCRATCH "/shm", 01777) < 0 ||
	    chmod(SCRATCH "/shm", 01777) < 0 || mkdir(SCRATCH "/faces", 0700) < 0)
		agent_die(a, "guest agent: making the scratch: %s", strerror(errno));
	agent_mount(a, "overlay", NEWROOT, "overlay", MS_NOSUID | MS_NODEV,
		    "lowerdir=" SYSIMG ",upperdir=" SCRATCH "/upper,workdir=" SCRATCH "/ovl");
	a->work = open(SCRATCH "/work", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int shm = open(SCRATCH "/shm", O_PATH | O_CLOEXEC);
	if (a->work < 0 || shm < 0)
		agent_die(a, "guest agent: the scratch: %s", strerror(errno));
	for (size_t i = 0; i < c->n_mounts; i++) {
		const struct al_guest_mount *m = &c->mounts[i];
		char face[64];
		src[i] = -1;
		if (m->kind == AL_GM_BIND || m->kind == AL_GM_COPY) {
			src[i] = open(m->source,
				      (m->kind == AL_GM_COPY ? O_RDONLY : O_PATH) | O_CLOEXEC);
		} else if (m->kind == AL_GM_TMPFS) {
			snprintf(face, sizeof(face), SCRATCH "/faces/%zu", i);
			if (mkdir(face, 01777) == 0 && chmod(face, 01777) == 0)
				src[i] = open(face, O_PATH | O_CLOEXEC);
		} else {
			continue;
		}
		if (src[i] < 0)
			agent_die(a, "guest agent: the source of %s: %s", m->target,
				  strerror(errno));
	}
	/* switch_root's way (agent.c), before anything goes on the root. */
	if (chdir(NEWROOT) < 0 || mount(NEWROOT, "/", NULL, MS_MOVE, NULL) < 0 || chroot(".") < 0 ||
	    chdir("/") < 0)
		agent_die(a, "guest agent: switching root: %s", strerror(errno));
	point(a, "/dev", true, false);
	agent_make_dev(a, "", NULL);
	bind_fd(a, shm, "/dev/shm", false);
	close(shm);
	/* The config's mounts before the container's /proc: while there is
	 * no procfs in the root, no path of the image can reach a magic link
	 * of it (/proc/2/root: the kernel threads' root, the initramfs). */
	for (size_t i = 0; i < c->n_mounts; i++) {
		if (c->mounts[i].kind == AL_GM_MASK || c->mounts[i].kind == AL_GM_RDONLY)
			continue;
		one_mount(a, &c->mounts[i], src[i]);
		if (src[i] >= 0)
			close(src[i]);
	}
	point(a, "/proc", true, false);
	agent_mount(a, "proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		    "hidepid=invisible");
	for (size_t i = 0; i < c->n_mounts; i++)
		if (c->mounts[i].kind == AL_GM_MASK || c->mounts[i].kind == AL_GM_RDONLY)
			one_mount(a, &c->mounts[i], -1);
	/* Whatever the config's masked and read-only paths (an engine may
	 * unmask /proc/sys): the container's uid may be the guest's 0, which
	 * owns the kernel's settings, so they are always read-only, and what
	 * shows the kernel's memory, keys and timers hidden. */
	static const struct al_guest_mount always[] = {{AL_GM_MASK, "/proc/kcore", NULL},
						       {AL_GM_MASK, "/proc/keys", NULL},
						       {AL_GM_MASK, "/proc/timer_list", NULL},
						       {AL_GM_MASK, "/proc/sched_debug", NULL},
						       {AL_GM_MASK, "/proc/acpi", NULL},
						       {AL_GM_MASK, "/proc/scsi", NULL},
						       {AL_GM_MASK, "/proc/dynamic_debug", NULL},
						       {AL_GM_MASK, "/proc/latency_stats", NULL},
						       {AL_GM_MASK, "/proc/slabinfo", NULL},
						       {AL_GM_MASK, "/proc/pagetypeinfo", NULL},
						       {AL_GM_MASK, "/proc/vmallocinfo", NULL},
						       {AL_GM_RDONLY, "/proc/sys", NULL},
						       {AL_GM_RDONLY, "/proc/sysrq-trigger", NULL},
						       {AL_GM_RDONLY, "/proc/irq", NULL},
						       {AL_GM_RDONLY, "/proc/bus", NULL},
						       {AL_GM_RDONLY, "/proc/fs", NULL},
						       {AL_GM_RDONLY, "/proc/pressure", NULL}};
	for (size_t i = 0; i < sizeof(always) / sizeof(*always); i++)
		one_mount(a, &always[i], -1);
	if (c->hostname && sethostname(c->hostname, strlen(c->hostname)) < 0)
		agent_die(a, "guest agent: sethostname: %s", strerror(errno));
	if (c->container_ro)
		agent_mount(a, NULL, "/", NULL,
			    MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL);
}
