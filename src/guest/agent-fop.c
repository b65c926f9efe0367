/* The guest agent's file operations (proto.h AL_GUEST_EXEC_FILE_OP): the
 * daemon's file API on a microvm/vm session, done in an exec's child
 * (agent-chan.c forks it as any exec: its own cgroup, the command's uid
 * and gid, no_new_privs, the exec's stdio) instead of a program. Every path
 * is resolved with openat2 beneath its scratch face's directory (/work,
 * /tmp, /dev/shm), no link followed and no other mount crossed (an input
 * mounted below /work is not reached), as the host's file API does in its
 * scratch (src/serve/sfiles.c); regular files and directories only. The
 * child ends with exit code 0 or the errno that stopped it. */
#include "guest/agent.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define RESOLVE_FLAGS                                                                              \
	(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)

/* The scratch's faces in the guest (agent.c binds them from its tmpfs). */
static const char *const faces[] = {"/work", "/tmp", "/dev/shm"};

/* Output to stdout through one buffer (a listing is many small records).
 * File-scope state of a file operation's child alone: it does one
 * operation and exits (leave); the agent itself never touches these. */
static char out_buf[65536];
static size_t out_len;

static __attribute__((noreturn)) void leave(int e)
{
	/* An exit code is a byte: an errno past it (none today) is EIO. */
	_exit(e > 0 && e < 256 ? e : e == 0 ? 0 : EIO);
}

static void out_flush(void)
{
	size_t off = 0;
	while (off < out_len) {
		ssize_t n = write(1, out_buf + off, out_len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			leave(n < 0 ? errno : EIO);
		off += (size_t)n;
	}
	out_len = 0;
}

static void out(const void *p, size_t n)
{
	while (n) {
		size_t k = sizeof(out_buf) - out_len < n ? sizeof(out_buf) - out_len : n;
		memcpy(out_buf + out_len, p, k);
		out_len += k;
		p = (const char *)p + k;
		n -= k;
		if (out_len == sizeof(out_buf))
			out_flush();
	}
}

static int open_in(int face, const char *rel, uint64_t flags)
{
	struct open_how how = {.flags = flags | O_CLOEXEC, .resolve = RESOLVE_FLAGS};
	if (flags & O_CREAT)
		how.mode = 0644;
	return (int)syscall(SYS_openat2, face, rel, &how, sizeof(how));
}

/* 0, or EXDEV when name in pfd is a mount point (an input bound inside a
 * face): it is not the scratch's, as for get, which no mount crosses.
 * Only the agent mounts, so this cannot change between the check and
 * the operation. */
static int on_mount(int pfd, const char *name)
{
	struct open_how how = {.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
			       .resolve = RESOLVE_BENEATH | RESOLVE_NO_XDEV};
	int fd = (int)syscall(SYS_openat2, pfd, name, &how, sizeof(how));
	if (fd >= 0)
		close(fd);
	return fd < 0 && errno == EXDEV ? EXDEV : 0;
}

static char type_char(mode_t m)
{
	return S_ISREG(m) ? 'f' : S_ISDIR(m) ? 'd' : S_ISLNK(m) ? 'l' : 'o';
}

/* 'd', then one "T SIZE MODE NAME\0" record per entry (proto.h). */
static __attribute__((noreturn)) void list(int fd)
{
	DIR *d = fdopendir(fd);
	struct dirent *de;
	unsigned n = 0;
	if (!d)
		leave(errno);
	out("d", 1);
	while (n < AL_GUEST_FILE_OP_LIST && (de = readdir(d))) {
		struct stat st;
		char head[64];
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		int k = snprintf(head, sizeof(head), "%c %lld %o ", type_char(st.st_mode),
				 (long long)st.st_size, (unsigned)(st.st_mode & 07777));
		out(head, (size_t)k);
		out(de->d_name, strlen(de->d_name) + 1);
		n++;
	}
	out_flush();
	leave(0);
}

/* 'f' and a regular file's bytes, or a directory's listing. */
static __attribute__((noreturn)) void get(int face, const char *rel)
{
	int fd = open_in(face, rel, O_RDONLY | O_NONBLOCK);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		leave(errno);
	if (S_ISDIR(st.st_mode))
		list(fd);
	if (!S_ISREG(st.st_mode))
		leave(ENXIO);
	if ((uint64_t)st.st_size > AL_GUEST_FILE_OP_MAX) {
		/* Its size for the host's answer, on stderr. */
		dprintf(2, "%lld", (long long)st.st_size);
		leave(EFBIG);
	}
	out("f", 1);
	/* A file that grows meanwhile: one byte past the cap tells the host. */
	uint64_t left = (uint64_t)AL_GUEST_FILE_OP_MAX + 1;
	for (;;) {
		size_t room = sizeof(out_buf) - out_len;
		ssize_t n = read(fd, out_buf + out_len, room < left ? room : (size_t)left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			leave(errno);
		if (n == 0)
			break;
		out_len += (size_t)n;
		left -= (uint64_t)n;
		if (out_len == sizeof(out_buf) || !left)
			out_flush();
		if (!left)
			break;
	}
	out_flush();
	leave(0);
}

/* stdin into the regular file name in pfd (made 0644, or truncated). */
static __attribute__((noreturn)) void put(int pfd, const char *name)
{
	/* No link followed and no mount crossed at the name either: a file
	 * bound there (an input) is EXDEV, never opened for writing. */
	int fd = open_in(pfd, name, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		leave(errno);
	if (!S_ISREG(st.st_mode))
		leave(S_ISDIR(st.st_mode) ? EISDIR : ENXIO);
	if (ftruncate(fd, 0) < 0)
		leave(errno);
	uint64_t total = 0;
	for (;;) {
		ssize_t n = read(0, out_buf, sizeof(out_buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			leave(errno);
		if (n == 0)
			break;
		if ((total += (uint64_t)n) > AL_GUEST_FILE_OP_MAX)
			leave(EFBIG);
		for (ssize_t off = 0; off < n;) {
			ssize_t k = write(fd, out_buf + off, (size_t)(n - off));
			if (k < 0 && errno == EINTR)
				continue;
			if (k <= 0)
				leave(k < 0 ? errno : EIO);
			off += k;
		}
	}
	if (close(fd) < 0)
		leave(errno);
	leave(0);
}

void agent_fop(const char *op, const char *path)
{
	/* The host checked all this; the check is cheap here too. */
	size_t len = strlen(path), i = 0, fl = 0;
	if (path[0] != '/' || al_guest_path_ok(path + 1, len - 1) < 0)
		leave(EINVAL);
	for (; i < sizeof(faces) / sizeof(faces[0]); i++) {
		fl = strlen(faces[i]);
		if (!strncmp(path, faces[i], fl) && (path[fl] == '/' || !path[fl]))
			break;
	}
	if (i == sizeof(faces) / sizeof(faces[0]))
		leave(EACCES); /* not the scratch's */
	int face = open(faces[i], O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (face < 0)
		leave(errno);
	const char *rel = path[fl] ? path + fl + 1 : ".";
	if (!strcmp(op, "get"))
		get(face, rel);
	bool known = !strcmp(op, "put") || !strcmp(op, "mkdir") || !strcmp(op, "delete");
	if (!known)
		leave(EINVAL);
	if (!path[fl])
		leave(EISDIR); /* the face itself is neither written nor removed */
	/* The directory that holds the last component, then that name. */
	char parent[4096];
	const char *slash = strrchr(rel, '/');
	snprintf(parent, sizeof(parent), "%.*s", slash ? (int)(slash - rel) : 1, slash ? rel : ".");
	const char *name = slash ? slash + 1 : rel;
	int pfd = open_in(face, parent, O_PATH | O_DIRECTORY);
	if (pfd < 0)
		leave(errno);
	if (!strcmp(op, "put"))
		put(pfd, name);
	if (!strcmp(op, "mkdir"))
		leave(mkdirat(pfd, name, 0755) < 0 ? errno : 0);
	/* delete: a file, else an empty directory; not a mount point. */
	int e = on_mount(pfd, name);
	if (e)
		leave(e);
	if (unlinkat(pfd, name, 0) < 0) {
		e = errno;
		if (e == EISDIR || e == EPERM)
			e = unlinkat(pfd, name, AT_REMOVEDIR) < 0 ? errno : 0;
	}
	leave(e);
}
