/* The newc ("070701") cpio writer for a guest's initramfs: what the kernel
 * unpacks into its rootfs before it runs /init.
 *
 * Each entry is a 110-byte header of ASCII hex fields, the name with its
 * NUL padded to a multiple of 4 (counting the header), then the data
 * padded to a multiple of 4. The archive is deterministic: inode numbers
 * are counted from 1, mtime is 0, uid and gid are 0, every nlink is 1
 * (dirs 2), so the same inputs give the same bytes and the same hash. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/microvm/image.h"
#include "core/cleanup.h"
#include "core/sys.h"
#include "core/util.h"

/* Past this depth a host tree is refused: each level holds a descriptor. */
#define TREE_DEPTH_MAX 64
/* Names (the whole path in the archive) longer than this are refused. */
#define NAME_MAX_LEN 4096

struct al_cpio {
	int fd;		/* borrowed */
	int error;	/* the first write's -errno, sticky */
	uint32_t ino;	/* the last inode number given */
	uint64_t bytes; /* written so far, for the padding */
	uint64_t files; /* entries of the current host tree */
	uint64_t data;	/* file bytes of the current host tree */
};

struct al_cpio *al_cpio_new(int fd)
{
	struct al_cpio *c = xcalloc(1, sizeof(*c));
	c->fd = fd;
	return c;
}

static void put(struct al_cpio *c, const void *buf, size_t len)
{
	if (c->error || len == 0)
		return;
	int r = al_write_all(c->fd, buf, len);
	if (r < 0)
		c->error = r;
	else
		c->bytes += len;
}

static void pad4(struct al_cpio *c)
{
	static const char zeros[4];
	size_t n = (4 - (c->bytes & 3)) & 3;
	put(c, zeros, n);
}

/* The header and the name; the caller then puts size bytes of data and
 * pads. Leading slashes are dropped: names are relative to the rootfs, as
 * every cpio tool writes them. */
static int header(struct al_cpio *c, const char *path, mode_t mode, uint64_t size)
{
	while (*path == '/')
		path++;
	size_t namesize = strlen(path) + 1;
	if (namesize == 1 || namesize > NAME_MAX_LEN || size > UINT32_MAX)
		return -EINVAL;
	if (c->error)
		return c->error;
	char h[111];
	snprintf(h, sizeof(h), "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		 ++c->ino, (unsigned)mode, 0u, 0u, S_ISDIR(mode) ? 2u : 1u, 0u, (unsigned)size, 0u,
		 0u, 0u, 0u, (unsigned)namesize, 0u);
	put(c, h, 110);
	put(c, path, namesize);
	pad4(c);
	return c->error;
}

int al_cpio_dir(struct al_cpio *c, const char *path, mode_t mode)
{
	int r = header(c, path, S_IFDIR | (mode & 07777), 0);
	return r < 0 ? r : c->error;
}

int al_cpio_file(struct al_cpio *c, const char *path, mode_t mode, const void *data, size_t len)
{
	int r = header(c, path, S_IFREG | (mode & 07777), len);
	if (r < 0)
		return r;
	put(c, data, len);
	pad4(c);
	return c->error;
}

static int symlink_entry(struct al_cpio *c, const char *path, const char *target)
{
	int r = header(c, path, S_IFLNK | 0777, strlen(target));
	if (r < 0)
		return r;
	put(c, target, strlen(target));
	pad4(c);
	return c->error;
}

/* Exactly size bytes of fd: a file that shrinks meanwhile is an error (the
 * header already promised its size), one that grows is cut at size. */
static int copy_data(struct al_cpio *c, int fd, uint64_t size)
{
	char buf[65536];
	uint64_t done = 0;
	while (done < size && !c->error) {
		size_t want = size - done < sizeof(buf) ? (size_t)(size - done) : sizeof(buf);
		ssize_t n = read(fd, buf, want);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		put(c, buf, (size_t)n);
		done += (uint64_t)n;
	}
	pad4(c);
	return c->error;
}

int al_cpio_host_file(struct al_cpio *c, const char *path, mode_t mode, int host_fd, uint64_t max)
{
	struct stat st;
	if (fstat(host_fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	if ((uint64_t)st.st_size > max)
		return -EFBIG;
	int r = header(c, path, S_IFREG | (mode & 07777), (uint64_t)st.st_size);
	if (r < 0)
		return r;
	return copy_data(c, host_fd, (uint64_t)st.st_size);
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* dfd's entries but . and .., sorted so that the archive does not depend
 * on the directory's hash order. */
static int list_dir(int dfd, char ***out)
{
	int fd = dup(dfd);
	if (fd < 0)
		return -errno;
	DIR *d = fdopendir(fd);
	if (!d) {
		int e = errno;
		close(fd);
		return -e;
	}
	char **v = NULL;
	size_t n = 0;
	struct dirent *de;
	errno = 0;
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		v = xrealloc(v, (n + 2) * sizeof(*v));
		v[n++] = xstrdup(de->d_name);
		v[n] = NULL;
	}
	int e = errno;
	closedir(d);
	if (e) {
		al_strv_free(v);
		return -e;
	}
	if (n)
		qsort(v, n, sizeof(*v), cmp_names);
	*out = v ? v : xcalloc(1, sizeof(*v));
	return 0;
}

static int count_entry(struct al_cpio *c, const char *path, uint64_t bytes, uint64_t max_bytes,
		       uint64_t max_files, struct al_error *err)
{
	if (++c->files > max_files)
		return al_error_set(err, EFBIG, "%s: more than %llu entries", path,
				    (unsigned long long)max_files);
	c->data = al_add_sat(c->data, bytes);
	if (c->data > max_bytes)
		return al_error_set(err, EFBIG, "%s: the tree holds more than %llu bytes", path,
				    (unsigned long long)max_bytes);
	return 0;
}

static int walk(struct al_cpio *c, const char *path, int dfd, int depth, uint64_t max_bytes,
		uint64_t max_files, struct al_error *err);

/* One entry of dfd, name, at path in the archive. */
static int walk_entry(struct al_cpio *c, const char *path, int dfd, const char *name, int depth,
		      uint64_t max_bytes, uint64_t max_files, struct al_error *err)
{
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return al_error_setsys(err, errno, "%s: stat", path);
	if (S_ISLNK(st.st_mode)) {
		char target[NAME_MAX_LEN];
		ssize_t n = readlinkat(dfd, name, target, sizeof(target) - 1);
		if (n < 0)
			return al_error_setsys(err, errno, "%s: readlink", path);
		target[n] = '\0';
		int r = count_entry(c, path, (uint64_t)n, max_bytes, max_files, err);
		if (r < 0)
			return r;
		r = symlink_entry(c, path, target);
		return r < 0 ? al_error_setsys(err, -r, "%s: writing the archive", path) : 0;
	}
	if (S_ISDIR(st.st_mode)) {
		if (depth >= TREE_DEPTH_MAX)
			return al_error_set(err, ELOOP, "%s: deeper than %d directories", path,
					    TREE_DEPTH_MAX);
		_cleanup_close_ int sub =
		    openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0)
			return al_error_setsys(err, errno, "%s: open", path);
		return walk(c, path, sub, depth + 1, max_bytes, max_files, err);
	}
	if (!S_ISREG(st.st_mode))
		return al_error_set(err, EINVAL,
				    "%s: not a regular file, directory or symbolic link", path);
	/* O_NONBLOCK: had it become a FIFO since the stat, open must not wait. */
	_cleanup_close_ int fd =
	    openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return al_error_setsys(err, errno, "%s: open", path);
	if (fstat(fd, &st) < 0)
		return al_error_setsys(err, errno, "%s: stat", path);
	if (!S_ISREG(st.st_mode))
		return al_error_set(err, EINVAL, "%s: not a regular file", path);
	int r = count_entry(c, path, (uint64_t)st.st_size, max_bytes, max_files, err);
	if (r < 0)
		return r;
	r = header(c, path, S_IFREG | (st.st_mode & 0777), (uint64_t)st.st_size);
	if (r == 0)
		r = copy_data(c, fd, (uint64_t)st.st_size);
	if (r == -EIO)
		return al_error_set(err, EIO, "%s: changed while it was read", path);
	return r < 0 ? al_error_setsys(err, -r, "%s: writing the archive", path) : 0;
}

static int walk(struct al_cpio *c, const char *path, int dfd, int depth, uint64_t max_bytes,
		uint64_t max_files, struct al_error *err)
{
	struct stat st;
	if (fstat(dfd, &st) < 0)
		return al_error_setsys(err, errno, "%s: stat", path);
	int r = count_entry(c, path, 0, max_bytes, max_files, err);
	if (r < 0)
		return r;
	/* Permission bits only: no set-id or sticky bit comes from a host tree. */
	r = al_cpio_dir(c, path, st.st_mode & 0777);
	if (r < 0)
		return al_error_setsys(err, -r, "%s: writing the archive", path);
	_cleanup_(al_strv_freep) char **names = NULL;
	r = list_dir(dfd, &names);
	if (r < 0)
		return al_error_setsys(err, -r, "%s: reading the directory", path);
	for (size_t i = 0; names[i]; i++) {
		_cleanup_free_ char *sub = xasprintf("%s/%s", path, names[i]);
		if (strlen(sub) >= NAME_MAX_LEN)
			return al_error_set(err, ENAMETOOLONG, "%s: name too long", path);
		r = walk_entry(c, sub, dfd, names[i], depth, max_bytes, max_files, err);
		if (r < 0)
			return r;
	}
	return 0;
}

int al_cpio_host_tree(struct al_cpio *c, const char *path, int host_dirfd, uint64_t max_bytes,
		      uint64_t max_files, struct al_error *err)
{
	c->files = 0;
	c->data = 0;
	return walk(c, path, host_dirfd, 0, max_bytes, max_files, err);
}

uint64_t al_cpio_tree_bytes(const struct al_cpio *c)
{
	return c->data;
}

int al_cpio_finish(struct al_cpio *c)
{
	static const char trailer[] = "TRAILER!!!";
	int r = c->error;
	if (r == 0) {
		/* The trailer is a regular entry of no data, inode 0. */
		char h[111];
		snprintf(h, sizeof(h), "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
			 0u, 0u, 0u, 0u, 1u, 0u, 0u, 0u, 0u, 0u, 0u, (unsigned)sizeof(trailer), 0u);
		put(c, h, 110);
		put(c, trailer, sizeof(trailer));
		pad4(c);
		r = c->error;
	}
	free(c);
	return r;
}
