/* The scratch's files over the channel, on the VMM's side
 * (vmm-internal.h). --copy-in: the native supervisor copied the files into
 * the VMM's /work; they are walked with openat and O_NOFOLLOW (no link
 * followed; directories, regular files and symbolic links, anything else
 * skipped) and sent as FILE_BEGIN, FILE_DATA (a file's bytes, a link's
 * target), FILE_END, then FILES_DONE. --copy-out: the VMM's /work is
 * emptied, then what the guest sends in the same form is written there,
 * each path checked (al_guest_path_ok), each parent opened one component
 * at a time with O_NOFOLLOW (openat2 is not in the sandbox's seccomp
 * table), each entry made with O_EXCL (mkdirat, symlinkat), and the caps
 * of FILES_GET counted here whatever the guest claims; the native
 * supervisor's copy-out then takes /work with its own rules. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/microvm/vmm-internal.h"

#define WORK "/work"

void vmm_walk_free(struct vmm *v)
{
	while (v->walk.depth > 0)
		closedir(v->walk.dirs[--v->walk.depth]);
	if (v->walk.reg >= 0)
		close(v->walk.reg);
	v->walk.reg = -1;
}

static int walk_fail(struct vmm *v, int err)
{
	return vmm_fail(v, "--copy-in: %s/%s: %s", WORK, v->walk.path, strerror(err));
}

static int begin(struct vmm *v, uint32_t mode, uint8_t kind)
{
	uint8_t p[4 + 1 + sizeof(v->walk.path)];
	size_t n = strlen(v->walk.path) + 1;
	al_guest_put32(p, mode);
	p[4] = kind;
	memcpy(p + 5, v->walk.path, n);
	return vmm_send(v, AL_G_FILE_BEGIN, 0, ++v->walk.id, p, (uint32_t)(5 + n));
}

/* One directory entry of the level on top: sent whole unless it is a
 * regular file, whose bytes follow in later steps. */
static int walk_entry(struct vmm *v, DIR *d, const char *name)
{
	int dfd = dirfd(d);
	size_t base = v->walk.depth > 1 ? v->walk.plen[v->walk.depth - 1] : 0;
	int n = snprintf(v->walk.path + base, sizeof(v->walk.path) - base, "%s%s", base ? "/" : "",
			 name);
	if (n < 0 || (size_t)n >= sizeof(v->walk.path) - base - 1 || base + (size_t)n > 4000)
		return walk_fail(v, ENAMETOOLONG);
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return walk_fail(v, errno);
	uint32_t mode = st.st_mode & 07777;
	if (S_ISLNK(st.st_mode)) {
		char target[4096];
		ssize_t len = readlinkat(dfd, name, target, sizeof(target));
		if (len < 0 || (size_t)len >= sizeof(target))
			return walk_fail(v, len < 0 ? errno : ENAMETOOLONG);
		if (begin(v, mode, AL_GUEST_FILE_LINK) < 0 ||
		    vmm_send(v, AL_G_FILE_DATA, 0, v->walk.id, target, (uint32_t)len) < 0)
			return -1;
		return vmm_send(v, AL_G_FILE_END, 0, v->walk.id, NULL, 0);
	}
	if (S_ISREG(st.st_mode)) {
		int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0)
			return walk_fail(v, errno);
		v->walk.reg = fd;
		return begin(v, mode, AL_GUEST_FILE_REG);
	}
	if (!S_ISDIR(st.st_mode))
		return 0; /* a FIFO, socket or device: not copied */
	if (v->walk.depth == VMM_DEPTH)
		return walk_fail(v, ELOOP);
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *sub = fd >= 0 ? fdopendir(fd) : NULL;
	if (!sub) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return walk_fail(v, e);
	}
	if (begin(v, mode, AL_GUEST_FILE_DIR) < 0 ||
	    vmm_send(v, AL_G_FILE_END, 0, v->walk.id, NULL, 0) < 0) {
		closedir(sub);
		return -1;
	}
	v->walk.plen[v->walk.depth] = base + (size_t)n;
	v->walk.dirs[v->walk.depth++] = sub;
	return 0;
}

int vmm_walk_step(struct vmm *v)
{
	if (!v->walk.started) {
		v->walk.started = true;
		int fd = open(WORK, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
		if (!d) {
			int e = errno;
			if (fd >= 0)
				close(fd);
			return walk_fail(v, e);
		}
		v->walk.dirs[v->walk.depth++] = d;
		v->walk.plen[0] = 0;
	}
	while (v->out.len < VMM_OUT_SOFT && !v->failed) {
		if (v->walk.reg >= 0) {
			uint8_t buf[AL_GUEST_MAX_PAYLOAD];
			ssize_t n = read(v->walk.reg, buf, sizeof(buf));
			if (n < 0)
				return walk_fail(v, errno);
			if (n > 0) {
				vmm_send(v, AL_G_FILE_DATA, 0, v->walk.id, buf, (uint32_t)n);
				continue;
			}
			close(v->walk.reg);
			v->walk.reg = -1;
			vmm_send(v, AL_G_FILE_END, 0, v->walk.id, NULL, 0);
			continue;
		}
		if (v->walk.depth == 0) {
			uint8_t zero[4] = {0};
			v->walk.done = true;
			return vmm_send(v, AL_G_FILES_DONE, 0, 0, zero, 4) < 0 ? -1 : 1;
		}
		DIR *d = v->walk.dirs[v->walk.depth - 1];
		errno = 0;
		struct dirent *e = readdir(d);
		if (!e) {
			if (errno)
				return walk_fail(v, errno);
			closedir(d);
			v->walk.depth--;
			continue;
		}
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (walk_entry(v, d, e->d_name) < 0)
			return -1;
	}
	return v->failed ? -1 : 0;
}

/* Remove everything below the directory dfd (closed here). */
static int clear_dir(int dfd, unsigned depth)
{
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return -errno;
	}
	int r = 0;
	struct dirent *e;
	while (r == 0 && (e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (unlinkat(dirfd(d), e->d_name, 0) == 0)
			continue;
		if (errno != EISDIR && errno != EPERM) {
			r = -errno;
			break;
		}
		int sub =
		    openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0 || depth >= 256) {
			r = sub < 0 ? -errno : -ELOOP;
			if (sub >= 0)
				close(sub);
			break;
		}
		r = clear_dir(sub, depth + 1);
		if (r == 0 && unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR) < 0)
			r = -errno;
		if (r == 0)
			rewinddir(d); /* entries may shift while we remove */
	}
	closedir(d);
	return r;
}

int vmm_work_clear(struct vmm *v)
{
	if (v->dry)
		return 0;
	int fd = open(WORK, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return vmm_fail(v, "--copy-out: %s: %s", WORK, strerror(errno));
	v->work_fd = dup(fd);
	int r = clear_dir(fd, 0);
	if (r < 0 || v->work_fd < 0)
		return vmm_fail(v, "--copy-out: emptying %s: %s", WORK,
				strerror(r < 0 ? -r : errno));
	return 0;
}

void vmm_file_abort(struct vmm *v)
{
	if (v->get.fd >= 0)
		close(v->get.fd);
	if (v->get.dir >= 0)
		close(v->get.dir);
	v->get.fd = v->get.dir = -1;
	v->get.id = 0;
	if (v->work_fd >= 0)
		close(v->work_fd);
	v->work_fd = -1;
}

/* The parent directory of path under /work, one component at a time
 * with no link followed; its last component in name. */
static int open_parent(struct vmm *v, const char *path, char name[256])
{
	int dfd = dup(v->work_fd);
	const char *p = path;
	for (;;) {
		const char *slash = strchr(p, '/');
		size_t n = slash ? (size_t)(slash - p) : strlen(p);
		if (n >= 256) {
			close(dfd);
			errno = ENAMETOOLONG;
			return -1;
		}
		if (!slash) {
			memcpy(name, p, n);
			name[n] = 0;
			return dfd;
		}
		char comp[256];
		memcpy(comp, p, n);
		comp[n] = 0;
		int sub = openat(dfd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		int e = errno;
		close(dfd);
		if (sub < 0) {
			errno = e;
			return -1;
		}
		dfd = sub;
		p = slash + 1;
	}
}

int vmm_file_begin(struct vmm *v, uint32_t id, const uint8_t *p, uint32_t len)
{
	if (v->get.id)
		return vmm_proto(v, "FILE_BEGIN %u inside file %u", id, v->get.id);
	if (id == 0 || len < 6 || p[len - 1] != 0)
		return vmm_proto(v, "FILE_BEGIN with %s", id ? "a bad payload" : "id 0");
	const char *path = (const char *)p + 5;
	uint8_t kind = p[4];
	uint32_t mode = al_guest_get32(p) & 0777;
	if (al_guest_path_ok(path, len - 6) < 0)
		return vmm_proto(v, "FILE_BEGIN with a path refused");
	if (kind < AL_GUEST_FILE_DIR || kind > AL_GUEST_FILE_LINK)
		return vmm_proto(v, "FILE_BEGIN of kind %u", kind);
	if (++v->get.files > v->cfg->out_files)
		return vmm_proto(v, "more files than the %llu asked for",
				 (unsigned long long)v->cfg->out_files);
	v->get.id = id;
	v->get.kind = kind;
	v->get.target_len = 0;
	if (v->dry)
		return 0;
	int dfd = open_parent(v, path, v->get.name);
	if (dfd < 0)
		return vmm_fail(v, "--copy-out: %s/%s: %s", WORK, path, strerror(errno));
	v->get.dir = dfd;
	int r = 0;
	if (kind == AL_GUEST_FILE_DIR)
		r = mkdirat(dfd, v->get.name, mode | 0700);
	else if (kind == AL_GUEST_FILE_REG)
		r = v->get.fd =
		    openat(dfd, v->get.name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			   mode | 0600);
	if (r < 0)
		return vmm_fail(v, "--copy-out: %s/%s: %s", WORK, path, strerror(errno));
	return 0;
}

int vmm_file_data(struct vmm *v, uint32_t id, const uint8_t *p, uint32_t len)
{
	if (!v->get.id || id != v->get.id || v->get.kind == AL_GUEST_FILE_DIR)
		return vmm_proto(v, "FILE_DATA for %u, which is no open file", id);
	if (v->get.kind == AL_GUEST_FILE_LINK) {
		if (len >= sizeof(v->get.target) - v->get.target_len)
			return vmm_proto(v, "a link's target over %zu bytes",
					 sizeof(v->get.target));
		memcpy(v->get.target + v->get.target_len, p, len);
		v->get.target_len += len;
		return 0;
	}
	if (len > v->cfg->out_bytes - v->get.bytes)
		return vmm_proto(v, "more bytes than the %llu asked for",
				 (unsigned long long)v->cfg->out_bytes);
	v->get.bytes += len;
	for (uint32_t off = 0; v->get.fd >= 0 && off < len;) {
		ssize_t n = write(v->get.fd, p + off, len - off);
		if (n < 0 && errno != EINTR)
			return vmm_fail(v, "--copy-out: writing into %s: %s", WORK,
					strerror(errno));
		off += n > 0 ? (uint32_t)n : 0;
	}
	return 0;
}

int vmm_file_end(struct vmm *v, uint32_t id)
{
	if (!v->get.id || id != v->get.id)
		return vmm_proto(v, "FILE_END for %u, which is no open file", id);
	int r = 0;
	if (v->get.kind == AL_GUEST_FILE_LINK) {
		v->get.target[v->get.target_len] = 0;
		if (v->get.target_len == 0 || memchr(v->get.target, 0, v->get.target_len))
			return vmm_proto(v, "a link with %s target",
					 v->get.target_len ? "a NUL in its" : "an empty");
		if (v->get.dir >= 0)
			r = symlinkat(v->get.target, v->get.dir, v->get.name);
	}
	int e = errno;
	if (v->get.fd >= 0 && close(v->get.fd) < 0 && r == 0)
		r = -1, e = errno;
	if (v->get.dir >= 0)
		close(v->get.dir);
	v->get.fd = v->get.dir = -1;
	v->get.id = 0;
	if (r < 0)
		return vmm_fail(v, "--copy-out: %s/...%s: %s", WORK, v->get.name, strerror(e));
	return 0;
}
