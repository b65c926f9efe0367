/* The cache of what guests boot from (AL_VM_CACHE_DIR), and the base
 * initramfs: the guest agent as /init, the directories it mounts on and
 * the kernel modules it loads. The per-run part (the agent's config and the
 * inputs) is a second archive the backend writes with the same cpio
 * writer; the kernel unpacks concatenated archives one after the other. */
/* The low-level SHA-256, as supervisor/copy.c uses it. */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/microvm/image-internal.h"
#include "core/cleanup.h"
#include "core/sys.h"
#include "core/util.h"
#include "guest/config.h"

/* The directories of the base initramfs, parents first, that the agent
 * can rely on: its mount points (/dev, /proc, /sys, /mnt for the system
 * image) and its own tree (/airlock, with the modules, the config and the
 * inputs under it). */
static const char *const base_dirs[] = {"/dev", "/proc",    "/sys",
					"/mnt", "/airlock", AL_GUEST_MODULES_DIR};

int al_vm_cache_mkdir(const char *dir, struct al_error *err)
{
	if (!al_path_is_clean_absolute(dir))
		return al_error_set(err, EINVAL, "%s: not a clean absolute path", dir);
	_cleanup_free_ char *p = xstrdup(dir);
	for (char *s = p + 1;; s++) {
		bool last = *s == '\0';
		if (*s != '/' && !last)
			continue;
		*s = '\0';
		if (mkdir(p, 0755) == 0) {
			if (chown(p, 0, 0) < 0)
				return al_error_setsys(err, errno, "%s: chown", p);
		} else if (errno != EEXIST) {
			return al_error_setsys(err, errno, "%s: mkdir", p);
		}
		if (last)
			break;
		*s = '/';
	}
	struct stat st;
	if (lstat(dir, &st) < 0)
		return al_error_setsys(err, errno, "%s", dir);
	if (!S_ISDIR(st.st_mode))
		return al_error_set(err, ENOTDIR, "%s: not a directory", dir);
	/* Whoever may write here could swap a cached file between our check
	 * and QEMU's open. */
	if (st.st_uid != 0 || (st.st_mode & 022))
		return al_error_set(err, EPERM,
				    "%s: the cache directory must be root's and writable by "
				    "root only (it is uid %u, mode %04o)",
				    dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
	return 0;
}

bool al_vm_cache_usable(int dirfd, const char *name)
{
	struct stat st;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return false;
	return S_ISREG(st.st_mode) && st.st_uid == 0 && !(st.st_mode & 022) && st.st_size > 0;
}

void al_vm_sha256_hex(const unsigned char md[32], char out[65])
{
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; i < 32; i++) {
		out[2 * i] = digits[md[i] >> 4];
		out[2 * i + 1] = digits[md[i] & 15];
	}
	out[64] = '\0';
}

/* Hash what fd holds from its start. */
static int hash_fd(SHA256_CTX *ctx, int fd)
{
	char buf[65536];
	if (lseek(fd, 0, SEEK_SET) < 0)
		return -errno;
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return 0;
		SHA256_Update(ctx, buf, (size_t)n);
	}
}

/* A host file the initramfs takes: opened without following a link, and
 * a regular file. */
static int open_regular(const char *path, struct al_error *err)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return al_error_setsys(err, errno, "%s", path);
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return al_error_set(err, EINVAL, "%s: not a regular file", path);
	}
	return fd;
}

static void fds_close(int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	free(fds);
}

/* The archive into a temporary file of dirfd, renamed to name when whole. */
static int write_initramfs(int dirfd, const char *dir, const char *name, int agent_fd, char **mods,
			   int *mod_fds, struct al_error *err)
{
	char tmp[64];
	int fd = -1;
	for (int tries = 0; fd < 0 && tries < 16; tries++) {
		char id[17];
		al_random_id(id, sizeof(id));
		snprintf(tmp, sizeof(tmp), ".initramfs-%s.tmp", id);
		fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (fd < 0 && errno != EEXIST)
			return al_error_setsys(err, errno, "%s/%s", dir, tmp);
	}
	if (fd < 0)
		return al_error_set(err, EEXIST, "%s: no free temporary name", dir);
	struct al_cpio *c = al_cpio_new(fd);
	int r = 0;
	for (size_t i = 0; i < AL_ARRAY_SIZE(base_dirs) && r == 0; i++)
		r = al_cpio_dir(c, base_dirs[i], 0755);
	/* The hash read the agent and the modules to their ends. */
	if (r == 0 && lseek(agent_fd, 0, SEEK_SET) < 0)
		r = -errno;
	if (r == 0)
		r = al_cpio_host_file(c, AL_GUEST_AGENT_PATH, 0755, agent_fd, UINT64_MAX);
	for (size_t i = 0; mods[i] && r == 0; i++) {
		const char *base = strrchr(mods[i], '/');
		_cleanup_free_ char *p =
		    xasprintf("%s/%s", AL_GUEST_MODULES_DIR, base ? base + 1 : mods[i]);
		if (lseek(mod_fds[i], 0, SEEK_SET) < 0)
			r = -errno;
		else
			r = al_cpio_host_file(c, p, 0644, mod_fds[i], UINT64_MAX);
	}
	int f = al_cpio_finish(c);
	if (r == 0)
		r = f;
	if (r == 0 && (fchmod(fd, 0644) < 0 || fsync(fd) < 0))
		r = -errno;
	close(fd);
	if (r == 0 && renameat(dirfd, tmp, dirfd, name) < 0)
		r = -errno;
	if (r < 0) {
		unlinkat(dirfd, tmp, 0);
		return al_error_setsys(err, -r, "%s/%s: writing the initramfs", dir, name);
	}
	return 0;
}

int al_vm_initramfs_in(const char *cache_dir, const struct al_vm_kernel *k, const char *agent,
		       const char *const *modules, char *path_out, size_t len, char ***mods_out,
		       size_t *n_mods_out, struct al_error *err)
{
	_cleanup_(al_strv_freep) char **mods = NULL;
	int r = al_vm_module_closure(k->modules, modules, &mods, err);
	if (r < 0)
		return r;
	size_t n = al_strv_len(mods);
	_cleanup_close_ int agent_fd = open_regular(agent, err);
	if (agent_fd < 0)
		return al_error_wrap(err, "the guest agent");
	/* The name's hash covers the agent's bytes and each module's path and
	 * bytes in load order: a rebuilt agent or module is a new file. */
	SHA256_CTX ctx;
	SHA256_Init(&ctx);
	SHA256_Update(&ctx, AL_VM_IMAGE_FORMAT, sizeof(AL_VM_IMAGE_FORMAT));
	r = hash_fd(&ctx, agent_fd);
	if (r < 0)
		return al_error_setsys(err, -r, "%s", agent);
	int *fds = xcalloc(n + 1, sizeof(int));
	for (size_t i = 0; i < n; i++)
		fds[i] = -1;
	for (size_t i = 0; i < n && r == 0; i++) {
		_cleanup_free_ char *p = xasprintf("%s/%s", k->modules, mods[i]);
		fds[i] = open_regular(p, err);
		if (fds[i] < 0)
			r = fds[i];
		SHA256_Update(&ctx, mods[i], strlen(mods[i]) + 1);
		if (r == 0 && (r = hash_fd(&ctx, fds[i])) < 0)
			al_error_setsys(err, -r, "%s", p);
	}
	unsigned char md[SHA256_DIGEST_LENGTH];
	SHA256_Final(md, &ctx);
	char hex[65];
	al_vm_sha256_hex(md, hex);
	_cleanup_free_ char *name = xasprintf("initramfs-%s-%.16s.cpio", k->version, hex);
	_cleanup_close_ int dirfd = -1;
	if (r == 0)
		r = al_vm_cache_mkdir(cache_dir, err);
	if (r == 0 && (dirfd = open(cache_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		r = al_error_setsys(err, errno, "%s", cache_dir);
	/* A file that is not root's or that others may write is rebuilt, not
	 * trusted: the rename replaces it. */
	if (r == 0 && !al_vm_cache_usable(dirfd, name))
		r = write_initramfs(dirfd, cache_dir, name, agent_fd, mods, fds, err);
	fds_close(fds, n);
	if (r < 0)
		return r;
	if ((size_t)snprintf(path_out, len, "%s/%s", cache_dir, name) >= len)
		return al_error_set(err, ENAMETOOLONG, "%s/%s: path too long", cache_dir, name);
	char **out = xcalloc(n + 1, sizeof(*out));
	for (size_t i = 0; i < n; i++) {
		const char *base = strrchr(mods[i], '/');
		out[i] = xasprintf("%s/%s", AL_GUEST_MODULES_DIR, base ? base + 1 : mods[i]);
	}
	*mods_out = out;
	*n_mods_out = n;
	return 0;
}

int al_vm_initramfs(const struct al_vm_kernel *k, const char *agent, const char *const *modules,
		    char *path_out, size_t len, char ***mods_out, size_t *n_mods_out,
		    struct al_error *err)
{
	return al_vm_initramfs_in(AL_VM_CACHE_DIR, k, agent, modules, path_out, len, mods_out,
				  n_mods_out, err);
}

int al_vm_system_image(const char *const *packages, char *path_out, size_t len,
		       struct al_error *err)
{
	return al_vm_system_image_in(AL_VM_CACHE_DIR, packages, path_out, len, err);
}

int al_vm_cache_lock(int dirfd, const char *cache_dir, struct al_error *err)
{
	int lock = openat(dirfd, ".lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (lock < 0)
		return al_error_setsys(err, errno, "%s/.lock", cache_dir);
	while (flock(lock, LOCK_EX) < 0)
		if (errno != EINTR) {
			int e = errno;
			close(lock);
			return al_error_setsys(err, e, "%s/.lock: flock", cache_dir);
		}
	return lock;
}

/* Whether name is a cached file (initramfs-*.cpio, system-*.ext4) or a
 * builder's temporary one (.initramfs-*.tmp, .system-*.tmp): 1 cached, 2
 * temporary, 0 neither (left alone). */
static int cache_kind(const char *name)
{
	size_t n = strlen(name);
	bool cpio = n > 5 && !strcmp(name + n - 5, ".cpio");
	bool ext4 = n > 5 && !strcmp(name + n - 5, ".ext4");
	bool tmp = n > 4 && !strcmp(name + n - 4, ".tmp");

	if ((!strncmp(name, "initramfs-", 10) && cpio) || (!strncmp(name, "system-", 7) && ext4))
		return 1;
	if ((!strncmp(name, ".initramfs-", 11) || !strncmp(name, ".system-", 8)) && tmp)
		return 2;
	return 0;
}

int al_vm_cache_gc_in(const char *cache_dir, time_t now, struct al_error *err)
{
	_cleanup_close_ int dirfd =
	    open(cache_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dirfd < 0)
		return errno == ENOENT ? 0 : al_error_setsys(err, errno, "%s", cache_dir);
	/* The system image's builder holds this lock while it writes and
	 * renames: none is half-made while the directory is read. */
	_cleanup_close_ int lock = al_vm_cache_lock(dirfd, cache_dir, err);
	if (lock < 0)
		return lock;
	int d2 = dup(dirfd);
	DIR *d = d2 < 0 ? NULL : fdopendir(d2);
	if (!d) {
		if (d2 >= 0)
			close(d2);
		return al_error_setsys(err, errno, "%s", cache_dir);
	}
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		struct stat st;
		int kind = cache_kind(de->d_name);
		if (!kind || fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISREG(st.st_mode))
			continue;
		/* A run reads its cached files at every start (the kernel
		 * refreshes atime at least daily under relatime): one unread
		 * and unchanged for AL_VM_CACHE_UNUSED_DAYS is one no current
		 * airlock uses (an older airlock's, or packages since
		 * upgraded). A builder's temporary file a day old is one whose
		 * builder died. */
		time_t age = kind == 1 ? (time_t)AL_VM_CACHE_UNUSED_DAYS * 86400 : 86400;
		time_t last = st.st_atime > st.st_mtime ? st.st_atime : st.st_mtime;
		if (now - last < age)
			continue;
		if (unlinkat(dirfd, de->d_name, 0) == 0) {
			n++;
		} else if (errno != ENOENT) {
			n = al_error_setsys(err, errno, "removing %s/%s", cache_dir, de->d_name);
			break;
		}
	}
	closedir(d);
	return n;
}

int al_vm_cache_gc(struct al_error *err)
{
	return al_vm_cache_gc_in(AL_VM_CACHE_DIR, time(NULL), err);
}
