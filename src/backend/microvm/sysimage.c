/* The system image: a read-only ext4 file system of the host's own files
 * of a set of Debian packages and their dependencies, which the guest
 * agent shows as the guest's root (read-only, its top-level entries bound).
 *
 * The packages' files (dpkg's lists, without documentation, manuals,
 * locales and info pages) are staged as hard links to the host's files (a
 * copy where a link cannot be made, as across file systems), each path
 * seen through the host's merged-/usr links, so that /lib/x/y.so lands in
 * usr/lib/x/y.so and the image's own /lib, /bin, /sbin and /lib64 are the
 * same links. mkfs.ext4 -d then copies the staging tree into a new image,
 * which is renamed into the cache; the staging tree is removed. */
/* The low-level SHA-256, as supervisor/copy.c uses it. */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/sha.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/microvm/image-internal.h"
#include "core/cleanup.h"
#include "core/sys.h"
#include "core/util.h"

#ifndef MOUNT_ATTR_NOSYMFOLLOW
#define MOUNT_ATTR_NOSYMFOLLOW 0x00200000 /* Linux 5.14 */
#endif

#define DPKG_INFO	  "/var/lib/dpkg/info"
#define DPKG_ALTERNATIVES "/var/lib/dpkg/alternatives"

/* What a guest does not need of a package; and the host's home and boot
 * directories, which no guest has (as under native: they do not exist). */
static const char *const skipped[] = {"/usr/share/doc",
				      "/usr/share/man",
				      "/usr/share/locale",
				      "/usr/share/info",
				      "/root",
				      "/home",
				      "/boot",
				      "/mnt",
				      "/media",
				      "/srv"};

/* The host's top-level links into /usr (merged /usr), made again in the
 * image where the host has them. */
static const char *const usr_links[] = {"bin", "lib", "lib32", "lib64", "libx32", "sbin"};

/* /etc files written for the guest rather than taken from the host: the
 * host's accounts and host names are not the guest's business. */
static const struct {
	const char *name, *text;
} etc_files[] = {
    {"passwd", "root:x:0:0:root:/root:/bin/sh\n"
	       "sandbox:x:1000:1000:sandbox:/work:/bin/sh\n"
	       "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"},
    {"group", "root:x:0:\nsandbox:x:1000:\nnogroup:x:65534:\n"},
    /* The agent binds its own (nameserver 127.0.0.1) over this one. */
    {"resolv.conf", ""},
    {"hosts", "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"},
    {"nsswitch.conf", "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n"},
};

struct stage {
	int root;	  /* the staging directory */
	const char *path; /* its path, for messages */
	uint64_t bytes;	  /* file data staged, in 4 KiB blocks */
	uint64_t inodes;  /* entries staged */
	char *last_dir;	  /* the last directory resolved, and what it resolved to */
	char *last_real;
};

static bool is_skipped(const char *path)
{
	for (size_t i = 0; i < AL_ARRAY_SIZE(skipped); i++) {
		size_t n = strlen(skipped[i]);
		if (strncmp(path, skipped[i], n) == 0 && (path[n] == '\0' || path[n] == '/'))
			return true;
	}
	return false;
}

/* dir (absolute, resolved) in the staging tree, each missing component
 * made with the host directory's mode and owner. */
static int ensure_dir(struct stage *s, const char *dir, struct al_error *err)
{
	if (strcmp(dir, "/") == 0)
		return 0;
	_cleanup_free_ char *p = xstrdup(dir);
	for (char *c = p + 1;; c++) {
		bool last = *c == '\0';
		if (*c != '/' && !last)
			continue;
		*c = '\0';
		struct stat st;
		if (lstat(p, &st) < 0 || !S_ISDIR(st.st_mode))
			st.st_mode = S_IFDIR | 0755, st.st_uid = 0, st.st_gid = 0;
		if (mkdirat(s->root, p + 1, 0700) == 0) {
			s->inodes++;
			if (fchownat(s->root, p + 1, st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW) <
				0 ||
			    fchmodat(s->root, p + 1, st.st_mode & 07777, 0) < 0)
				return al_error_setsys(err, errno, "%s%s", s->path, p);
		} else if (errno != EEXIST) {
			return al_error_setsys(err, errno, "%s%s: mkdir", s->path, p);
		}
		if (last)
			return 0;
		*c = '/';
	}
}

static int copy_file(struct stage *s, const char *host, const char *rel, const struct stat *st,
		     struct al_error *err)
{
	_cleanup_close_ int in = open(host, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (in < 0)
		return al_error_setsys(err, errno, "%s", host);
	_cleanup_close_ int out =
	    openat(s->root, rel, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0 && errno == EEXIST)
		return 0;
	if (out < 0)
		return al_error_setsys(err, errno, "%s/%s", s->path, rel);
	char buf[65536];
	ssize_t n;
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (al_write_all(out, buf, (size_t)n) < 0)
			return al_error_setsys(err, errno, "%s/%s: write", s->path, rel);
	if (n < 0)
		return al_error_setsys(err, errno, "%s: read", host);
	if (fchown(out, st->st_uid, st->st_gid) < 0 || fchmod(out, st->st_mode & 07777) < 0)
		return al_error_setsys(err, errno, "%s/%s", s->path, rel);
	return 1;
}

/* One host path (absolute, its directory resolved) into the staging tree. */
static int stage_entry(struct stage *s, const char *path, const char *dir, struct al_error *err)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		return 0; /* listed but gone (a removed conffile, a diversion) */
	const char *rel = path + 1;
	if (S_ISDIR(st.st_mode))
		return ensure_dir(s, path, err);
	int r = ensure_dir(s, dir, err);
	if (r < 0)
		return r;
	if (S_ISLNK(st.st_mode)) {
		char target[PATH_MAX];
		ssize_t n = readlink(path, target, sizeof(target) - 1);
		if (n < 0)
			return al_error_setsys(err, errno, "%s: readlink", path);
		target[n] = '\0';
		if (symlinkat(target, s->root, rel) < 0)
			return errno == EEXIST ? 0
					       : al_error_setsys(err, errno, "%s/%s", s->path, rel);
		s->inodes++;
		if (fchownat(s->root, rel, st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW) < 0)
			return al_error_setsys(err, errno, "%s/%s", s->path, rel);
		return 0;
	}
	if (!S_ISREG(st.st_mode))
		return 0; /* no package ships a device or a FIFO a guest needs */
	if (linkat(AT_FDCWD, path, s->root, rel, 0) < 0) {
		if (errno == EEXIST)
			return 0;
		r = copy_file(s, path, rel, &st, err);
		if (r <= 0)
			return r;
	}
	s->inodes++;
	s->bytes += ((uint64_t)st.st_size + 4095) / 4096 * 4096;
	return 0;
}

/* One line of a dpkg list: the path with its directory resolved through
 * the host's links (realpath of the parent, cached: lists go directory by
 * directory). */
static int stage_path(struct stage *s, const char *path, struct al_error *err)
{
	if (path[0] != '/' || strcmp(path, "/.") == 0 || strcmp(path, "/") == 0)
		return 0;
	const char *slash = strrchr(path, '/');
	_cleanup_free_ char *dir = strndup(path, (size_t)(slash - path));
	if (!dir)
		return al_error_set(err, ENOMEM, "out of memory");
	if (!*dir) {
		free(dir);
		dir = xstrdup("/");
	}
	if (!s->last_dir || strcmp(s->last_dir, dir) != 0) {
		char real[PATH_MAX];
		if (!realpath(dir, real))
			return 0; /* the directory is gone */
		free(s->last_dir);
		free(s->last_real);
		s->last_dir = xstrdup(dir);
		s->last_real = xstrdup(real);
	}
	_cleanup_free_ char *canon =
	    xasprintf("%s/%s", strcmp(s->last_real, "/") == 0 ? "" : s->last_real, slash + 1);
	if (is_skipped(canon))
		return 0;
	return stage_entry(s, canon, s->last_real, err);
}

static int stage_package(struct stage *s, const char *pkg, struct al_error *err)
{
	_cleanup_fclose_ FILE *f = NULL;
	static const char *const suffixes[] = {"", ":amd64"};
	_cleanup_free_ char *list = NULL;
	for (size_t i = 0; i < AL_ARRAY_SIZE(suffixes) && !f; i++) {
		free(list);
		list = xasprintf(DPKG_INFO "/%s%s.list", pkg, suffixes[i]);
		f = fopen(list, "re");
	}
	if (!f)
		return al_error_set(err, ENOENT, "package %s: no file list in %s", pkg, DPKG_INFO);
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int r = 0;
	while (r == 0 && (n = getline(&line, &cap, f)) > 0) {
		if (line[n - 1] == '\n')
			line[n - 1] = '\0';
		r = stage_path(s, line, err);
	}
	free(line);
	return r < 0 ? al_error_wrap(err, "package %s", pkg) : 0;
}

static int write_at(struct stage *s, const char *rel, const char *text, struct al_error *err)
{
	unlinkat(s->root, rel, 0); /* a staged hard link is replaced, never written */
	_cleanup_close_ int fd =
	    openat(s->root, rel, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0 || al_write_all(fd, text, strlen(text)) < 0 || fchmod(fd, 0644) < 0)
		return al_error_setsys(err, errno, "%s/%s", s->path, rel);
	s->inodes++;
	return 0;
}

/* Whether the host path target (a file an alternative chose) is in the
 * staging tree, seen through the host's links as the staging saw it. */
static bool staged(struct stage *s, const char *target)
{
	char real[PATH_MAX];
	struct stat st;
	return realpath(target, real) && fstatat(s->root, real + 1, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* One link of an alternative (update-alternatives' links are in no
 * package's list): link -> /etc/alternatives/name -> the chosen file,
 * made in the image when the chosen file is staged. */
static int stage_alternative(struct stage *s, const char *name, const char *link,
			     struct al_error *err)
{
	_cleanup_free_ char *alt = xasprintf("/etc/alternatives/%s", name);
	char target[PATH_MAX], via[PATH_MAX];
	ssize_t n = readlink(alt, target, sizeof(target) - 1);
	if (n <= 0 || strchr(name, '/'))
		return 0;
	target[n] = '\0';
	if (target[0] != '/' || !staged(s, target))
		return 0;
	if (symlinkat(target, s->root, alt + 1) == 0)
		s->inodes++;
	else if (errno != EEXIST)
		return al_error_setsys(err, errno, "%s%s", s->path, alt);
	n = readlink(link, via, sizeof(via) - 1);
	if (n <= 0)
		return 0;
	via[n] = '\0';
	/* The link itself, at its path seen through the host's links. */
	const char *slash = strrchr(link, '/');
	_cleanup_free_ char *dir = strndup(link, (size_t)(slash - link));
	char real[PATH_MAX];
	if (!dir || !*dir || !realpath(dir, real) || is_skipped(real))
		return 0;
	int r = ensure_dir(s, real, err);
	if (r < 0)
		return r;
	_cleanup_free_ char *rel = xasprintf("%s/%s", real + 1, slash + 1);
	if (symlinkat(via, s->root, rel) == 0)
		s->inodes++;
	else if (errno != EEXIST)
		return al_error_setsys(err, errno, "%s/%s", s->path, rel);
	return 0;
}

/* dpkg's alternatives database: each file NAME holds the mode, the master
 * link, then pairs of a slave's name and link up to an empty line. */
static int stage_alternatives(struct stage *s, struct al_error *err)
{
	DIR *d = opendir(DPKG_ALTERNATIVES);
	if (!d)
		return 0;
	int r = 0;
	struct dirent *de;
	while (r == 0 && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		_cleanup_free_ char *file = xasprintf(DPKG_ALTERNATIVES "/%s", de->d_name);
		_cleanup_fclose_ FILE *f = fopen(file, "re");
		if (!f)
			continue;
		char *line = NULL, *name = xstrdup(de->d_name);
		size_t cap = 0;
		ssize_t n;
		for (int i = 0; r == 0 && (n = getline(&line, &cap, f)) > 0; i++) {
			if (line[n - 1] == '\n')
				line[--n] = '\0';
			if (n == 0)
				break;
			if (i == 0)
				continue; /* the mode */
			if (i > 1 && i % 2 == 0) {
				free(name);
				name = xstrdup(line); /* a slave's name; its link follows */
				continue;
			}
			r = stage_alternative(s, name, line, err);
		}
		free(line);
		free(name);
	}
	closedir(d);
	return r;
}

/* /etc for the guest, the alternatives whose chosen file is staged (from
 * dpkg's alternatives database: their links are in no package's list),
 * and the merged-/usr links. */
static int stage_rest(struct stage *s, struct al_error *err)
{
	int r = ensure_dir(s, "/etc/alternatives", err);
	for (size_t i = 0; i < AL_ARRAY_SIZE(etc_files) && r == 0; i++) {
		_cleanup_free_ char *rel = xasprintf("etc/%s", etc_files[i].name);
		r = write_at(s, rel, etc_files[i].text, err);
	}
	if (r == 0) {
		/* A copy, not a link: the host's cache is rewritten in place by
		 * nothing, but a copy keeps the image's bytes its own. */
		struct stat st;
		unlinkat(s->root, "etc/ld.so.cache", 0);
		if (lstat("/etc/ld.so.cache", &st) == 0 && S_ISREG(st.st_mode))
			r = copy_file(s, "/etc/ld.so.cache", "etc/ld.so.cache", &st, err);
		r = r < 0 ? r : 0;
	}
	if (r == 0)
		r = stage_alternatives(s, err);
	for (size_t i = 0; i < AL_ARRAY_SIZE(usr_links) && r == 0; i++) {
		_cleanup_free_ char *host = xasprintf("/%s", usr_links[i]);
		char target[PATH_MAX];
		ssize_t n = readlink(host, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = '\0';
		if (symlinkat(target, s->root, usr_links[i]) == 0)
			s->inodes++;
		else if (errno != EEXIST)
			r = al_error_setsys(err, errno, "%s/%s", s->path, usr_links[i]);
	}
	return r;
}

/* Remove name in dirfd and everything under it, following no link. */
static void remove_tree(int dirfd, const char *name)
{
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		unlinkat(dirfd, name, 0);
		return;
	}
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return;
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (de->d_type == DT_DIR)
			remove_tree(fd, de->d_name);
		else if (unlinkat(fd, de->d_name, 0) < 0 && errno == EISDIR)
			remove_tree(fd, de->d_name);
	}
	closedir(d);
	unlinkat(dirfd, name, AT_REMOVEDIR);
}

static const char *mkfs_path(void)
{
	static const char *const paths[] = {"/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"};
	for (size_t i = 0; i < AL_ARRAY_SIZE(paths); i++)
		if (access(paths[i], X_OK) == 0)
			return paths[i];
	return NULL;
}

/* The child that becomes mkfs: stdin /dev/null, stdout and stderr out.
 * With src_fd (a container's root): in a mount namespace of its own, that
 * directory alone (no mount below it) bound read-only at staging with no
 * link followed, no device, setuid or exec, so that mkfs reads nothing
 * else whatever the tree holds or becomes. Never returns. */
static __attribute__((noreturn)) void mkfs_child(const char *mkfs, char *const *argv,
						 char *const *envp, int out, int src_fd,
						 const char *staging)
{
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (null < 0 || dup2(null, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0)
		_exit(126);
	if (src_fd >= 0) {
		/* A detached copy of that one mount (not of those below it),
		 * its attributes set, then attached in a namespace of our own. */
		struct mount_attr attr = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSYMFOLLOW |
						      MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
						      MOUNT_ATTR_NOEXEC};
		int tree = (int)syscall(SYS_open_tree, src_fd, "",
					OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
		if (tree < 0 ||
		    al_sys_mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0 ||
		    unshare(CLONE_NEWNS) < 0 ||
		    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
		    syscall(SYS_move_mount, tree, "", AT_FDCWD, staging, MOVE_MOUNT_F_EMPTY_PATH) <
			0) {
			/* errno's number only: strerror is not safe after a fork */
			dprintf(2, "isolating the root for mkfs: errno %d\n", errno);
			_exit(126);
		}
	}
	execve(mkfs, argv, envp);
	dprintf(2, "%s: errno %d\n", mkfs, errno);
	_exit(127);
}

int al_vm_mkfs(const char *staging, const char *image, uint64_t size, uint64_t inodes,
	       const char *label, uid_t uid, gid_t gid, int src_fd, unsigned timeout_s,
	       struct al_error *err)
{
	const char *mkfs = mkfs_path();
	if (!mkfs)
		return al_error_set(err, ENOENT, "mkfs.ext4 not found: install e2fsprogs");
	char size_k[32], n_inodes[32], owner[48];
	snprintf(size_k, sizeof(size_k), "%lluk", (unsigned long long)(size / 1024));
	snprintf(n_inodes, sizeof(n_inodes), "%llu", (unsigned long long)inodes);
	snprintf(owner, sizeof(owner), "root_owner=%u:%u", (unsigned)uid, (unsigned)gid);
	char *const argv[] = {
	    (char *)mkfs,  "-q",	  "-d", (char *)staging, "-E", owner, "-O", "^has_journal",
	    "-L",	   (char *)label, "-b", "4096",		 "-m", "0",   "-N", n_inodes,
	    (char *)image, size_k,	  NULL};
	char *const envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", NULL};
	int pipefd[2];
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return al_error_setsys(err, errno, "pipe");
	pid_t pid = fork();
	if (pid == 0)
		mkfs_child(mkfs, argv, envp, pipefd[1], src_fd, staging);
	close(pipefd[1]);
	if (pid < 0) {
		close(pipefd[0]);
		return al_error_setsys(err, errno, "fork for %s", mkfs);
	}
	/* Read to the end (the last 1 KiB kept) within the deadline, then
	 * reap. */
	char out[1024] = "";
	size_t used = 0;
	char buf[4096];
	ssize_t n;
	struct timespec t0;
	bool late = false;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		long long left =
		    (long long)timeout_s * 1000 -
		    ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000);
		if (timeout_s && left <= 0) {
			late = true;
			kill(pid, SIGKILL);
			break;
		}
		struct pollfd pfd = {.fd = pipefd[0], .events = POLLIN};
		int pr = poll(&pfd, 1, timeout_s ? (int)(left < 1000 ? left : 1000) : -1);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr < 0) {
			kill(pid, SIGKILL);
			break;
		}
		if (pr == 0)
			continue;
		n = read(pipefd[0], buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		for (ssize_t i = 0; i < n; i++) {
			if (used == sizeof(out) - 1) {
				memmove(out, out + 1, used - 1);
				used--;
			}
			out[used++] = buf[i] == '\n' ? ' ' : buf[i];
		}
	}
	out[used] = '\0';
	close(pipefd[0]);
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return al_error_setsys(err, errno, "waitpid %s", mkfs);
	if (late)
		return al_error_set(err, ETIMEDOUT, "%s -d %s %s: not done within %u s", mkfs,
				    staging, image, timeout_s);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return al_error_set(err, EIO, "%s -d %s %s: failed (status %d): %s", mkfs, staging,
				    image, status, out);
	return 0;
}

/* The image's size: the data in 4 KiB blocks, room for the inode tables,
 * directories and the block groups' metadata, and a margin. */
static uint64_t image_size(const struct stage *s)
{
	uint64_t size = s->bytes + s->bytes / 8 + s->inodes * 1024 + (32ull << 20);
	return (size + (1 << 20) - 1) & ~(uint64_t)((1 << 20) - 1);
}

static int build(int dirfd, const char *cache_dir, const char *name, char **pkgs,
		 struct al_error *err)
{
	char id[17];
	al_random_id(id, sizeof(id));
	_cleanup_free_ char *staging_name = xasprintf(".staging-%s", id);
	_cleanup_free_ char *staging = xasprintf("%s/%s", cache_dir, staging_name);
	_cleanup_free_ char *tmp_name = xasprintf(".system-%s.tmp", id);
	_cleanup_free_ char *tmp = xasprintf("%s/%s", cache_dir, tmp_name);
	if (mkdirat(dirfd, staging_name, 0755) < 0)
		return al_error_setsys(err, errno, "%s", staging);
	struct stage s = {.path = staging};
	s.root = openat(dirfd, staging_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int r = s.root < 0 ? al_error_setsys(err, errno, "%s", staging) : 0;
	for (size_t i = 0; pkgs[i] && r == 0; i++)
		r = stage_package(&s, pkgs[i], err);
	if (r == 0)
		r = stage_rest(&s, err);
	if (r == 0) {
		uint64_t inodes = s.inodes + s.inodes / 4 + 1024;
		r = al_vm_mkfs(staging, tmp, image_size(&s), inodes, "airlock-sys", 0, 0, -1, 0,
			       err);
		if (r == 0 && (chmod(tmp, 0644) < 0 || chown(tmp, 0, 0) < 0))
			r = al_error_setsys(err, errno, "%s", tmp);
		if (r == 0 && renameat(dirfd, tmp_name, dirfd, name) < 0)
			r = al_error_setsys(err, errno, "%s/%s", cache_dir, name);
		if (r < 0)
			unlinkat(dirfd, tmp_name, 0);
	}
	if (s.root >= 0)
		close(s.root);
	remove_tree(dirfd, staging_name);
	free(s.last_dir);
	free(s.last_real);
	return r;
}

int al_vm_system_image_in(const char *cache_dir, const char *const *packages, char *path_out,
			  size_t len, struct al_error *err)
{
	_cleanup_(al_strv_freep) char **names = NULL;
	_cleanup_(al_strv_freep) char **versions = NULL;
	int r = al_vm_package_closure(packages, &names, &versions, err);
	if (r < 0)
		return r;
	/* The name's hash covers every package's name and version (the closure
	 * is sorted) and the builder's format. */
	SHA256_CTX ctx;
	SHA256_Init(&ctx);
	SHA256_Update(&ctx, AL_VM_IMAGE_FORMAT, sizeof(AL_VM_IMAGE_FORMAT));
	for (size_t i = 0; names[i]; i++) {
		SHA256_Update(&ctx, names[i], strlen(names[i]) + 1);
		SHA256_Update(&ctx, versions[i], strlen(versions[i]) + 1);
	}
	unsigned char md[SHA256_DIGEST_LENGTH];
	SHA256_Final(md, &ctx);
	char hex[65];
	al_vm_sha256_hex(md, hex);
	_cleanup_free_ char *name = xasprintf("system-%.16s.ext4", hex);
	if ((size_t)snprintf(path_out, len, "%s/%s", cache_dir, name) >= len)
		return al_error_set(err, ENAMETOOLONG, "%s/%s: path too long", cache_dir, name);
	r = al_vm_cache_mkdir(cache_dir, err);
	if (r < 0)
		return r;
	_cleanup_close_ int dirfd = open(cache_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return al_error_setsys(err, errno, "%s", cache_dir);
	if (al_vm_cache_usable(dirfd, name))
		return 0;
	/* One builder at a time: a second run waits, then finds the file. */
	_cleanup_close_ int lock = al_vm_cache_lock(dirfd, cache_dir, err);
	if (lock < 0)
		return lock;
	if (al_vm_cache_usable(dirfd, name))
		return 0;
	r = build(dirfd, cache_dir, name, names, err);
	return r < 0 ? al_error_wrap(err, "building the system image %s/%s", cache_dir, name) : 0;
}
