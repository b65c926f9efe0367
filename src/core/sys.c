#include "core/sys.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "core/util.h"

long al_sys_clone3(struct clone_args *args, size_t size)
{
	return syscall(SYS_clone3, args, size);
}

int al_sys_pivot_root(const char *new_root, const char *put_old)
{
	return (int)syscall(SYS_pivot_root, new_root, put_old);
}

int al_sys_pidfd_open(pid_t pid, unsigned int flags)
{
	return (int)syscall(SYS_pidfd_open, pid, flags);
}

int al_sys_pidfd_send_signal(int pidfd, int sig)
{
	return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
}

#ifndef PIDFD_SIGNAL_PROCESS_GROUP
#define PIDFD_SIGNAL_PROCESS_GROUP (1U << 2)
#endif

int al_sys_pidfd_signal_group(int pidfd, int sig)
{
	return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, PIDFD_SIGNAL_PROCESS_GROUP);
}

int al_sys_close_range(unsigned int first, unsigned int last, unsigned int flags)
{
	return (int)syscall(SYS_close_range, first, last, flags);
}

int al_sys_openat2(int dirfd, const char *path, struct open_how *how, size_t size)
{
	return (int)syscall(SYS_openat2, dirfd, path, how, size);
}

int al_sys_mount_setattr(int dirfd, const char *path, unsigned int flags, struct mount_attr *attr,
			 size_t size)
{
	return (int)syscall(SYS_mount_setattr, dirfd, path, flags, attr, size);
}

size_t al_landlock_attr_size(int abi)
{
	if (abi >= 6)
		return sizeof(struct al_landlock_attr);
	if (abi >= 4)
		return 2 * sizeof(uint64_t);
	return sizeof(uint64_t);
}

int al_sys_landlock_create_ruleset(const struct al_landlock_attr *attr, size_t size, uint32_t flags)
{
	return (int)syscall(SYS_landlock_create_ruleset, attr, size, flags);
}

int al_sys_landlock_add_rule(int ruleset_fd, enum landlock_rule_type type, const void *attr,
			     uint32_t flags)
{
	return (int)syscall(SYS_landlock_add_rule, ruleset_fd, type, attr, flags);
}

int al_sys_landlock_restrict_self(int ruleset_fd, uint32_t flags)
{
	return (int)syscall(SYS_landlock_restrict_self, ruleset_fd, flags);
}

uint64_t al_landlock_fs_all(int abi)
{
	uint64_t m = 0;
	if (abi >= 1)
		m |= LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR |
		     LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |
		     LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |
		     LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR |
		     LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_SOCK |
		     LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |
		     LANDLOCK_ACCESS_FS_MAKE_SYM;
	if (abi >= 2)
		m |= LANDLOCK_ACCESS_FS_REFER;
	if (abi >= 3)
		m |= LANDLOCK_ACCESS_FS_TRUNCATE;
	if (abi >= 5)
		m |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
	return m;
}

int al_open_output_dir(const char *path, const char *what, char **ret_name, struct al_error *err)
{
	struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
			       .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
	const char *slash = strrchr(path, '/');
	char *dir =
	    slash ? xasprintf("%.*s", slash == path ? 1 : (int)(slash - path), path) : xstrdup(".");
	const char *name = slash ? slash + 1 : path;
	int fd;

	if (!*name || strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
		free(dir);
		return al_error_set(err, EINVAL, "%s %s: not a file name", what, path);
	}
	fd = al_sys_openat2(AT_FDCWD, dir, &how, sizeof(how));
	if (fd < 0) {
		int e = errno;
		if (e == ELOOP || e == EXDEV)
			al_error_set(err, e,
				     "%s %s: the path to its directory %s has a symbolic link; "
				     "give the real path (a sandbox could have planted the link)",
				     what, path, dir);
		else
			al_error_setsys(err, e, "%s %s: directory %s", what, path, dir);
		free(dir);
		return -e;
	}
	free(dir);
	*ret_name = xstrdup(name);
	return fd;
}

int al_fd_check_writable(int fd, const char *what, struct al_error *err)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return al_error_set(err, EBADF, "%s: no such open descriptor", what);
	if ((fl & O_ACCMODE) == O_RDONLY || (fl & O_PATH))
		return al_error_set(err, EBADF, "%s: the descriptor is not open for writing", what);
	return 0;
}

uint64_t al_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Cached for the process: the kernel's answer never changes. Atomic, so
 * that threads asking at once at worst both ask the kernel. */
int al_landlock_abi(void)
{
	static atomic_int abi = -1;
	int v = atomic_load_explicit(&abi, memory_order_relaxed);

	if (v < 0) {
		int r = al_sys_landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
		v = r < 0 ? 0 : r;
		atomic_store_explicit(&abi, v, memory_order_relaxed);
	}
	return v;
}

int al_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int al_open_ns(const char *path)
{
	struct statfs fs;
	char self[40];
	int o = open(path, O_PATH | O_CLOEXEC);

	if (o < 0)
		return -errno;
	int e = fstatfs(o, &fs) < 0 ? errno : fs.f_type != NSFS_MAGIC ? EINVAL : 0;
	if (e) {
		close(o);
		return -e;
	}
	snprintf(self, sizeof(self), "/proc/self/fd/%d", o);
	int fd = open(self, O_RDONLY | O_CLOEXEC);
	e = errno;
	close(o);
	return fd < 0 ? -e : fd;
}

int al_write_file_at(int dirfd, const char *path, const char *data, size_t len)
{
	int fd = openat(dirfd, path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
	int r;

	if (fd < 0)
		return -errno;
	r = al_write_all(fd, data, len);
	if (close(fd) < 0 && r == 0)
		r = -errno;
	return r;
}

ssize_t al_read_file(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	size_t got = 0;

	if (fd < 0)
		return -errno;
	while (got + 1 < len) {
		ssize_t n = read(fd, buf + got, len - 1 - got);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			close(fd);
			return -e;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	buf[got] = '\0';
	close(fd);
	return (ssize_t)got;
}

void al_random_id(char *buf, size_t len)
{
	unsigned char r[8];

	if (getrandom(r, sizeof(r), 0) != sizeof(r)) {
		/* getrandom cannot fail this early after boot in practice; fall
		 * back to something unique rather than to nothing. */
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		uint64_t v =
		    (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid();
		memcpy(r, &v, sizeof(r));
	}
	snprintf(buf, len, "%02x%02x%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2], r[3], r[4], r[5],
		 r[6], r[7]);
}

int al_proc_starttime(pid_t pid, unsigned long long *ret)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (al_read_file(path, buf, sizeof(buf)) <= 0)
		return -ENOENT;
	char *p = strrchr(buf, ')');
	if (!p)
		return -EINVAL;
	/* A zombie (or a dying one) is gone: it only waits to be reaped. */
	if (p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X' || p[2] == 'x'))
		return -ESRCH;
	/* Field 22 (starttime); p points at the end of field 2. */
	for (int field = 2; field < 22 && p; field++)
		p = strchr(p + 1, ' ');
	if (!p)
		return -EINVAL;
	*ret = strtoull(p + 1, NULL, 10);
	return 0;
}

void *al_clone_stack_new(struct al_clone_stack *s, size_t size)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	size = (size + page - 1) / page * page;
	s->len = size + page;
	s->map = mmap(NULL, s->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK,
		      -1, 0);
	if (s->map == MAP_FAILED) {
		s->map = NULL;
		return NULL;
	}
	/* The stack grows down: the guard is its lowest page. */
	if (mprotect(s->map, page, PROT_NONE) < 0) {
		int e = errno;
		al_clone_stack_free(s);
		errno = e;
		return NULL;
	}
	return (char *)s->map + s->len;
}

void al_clone_stack_free(struct al_clone_stack *s)
{
	if (s->map)
		munmap(s->map, s->len);
	s->map = NULL;
}

mode_t al_umask_get(void)
{
	char buf[4096];
	const char *l;
	mode_t m;

	if (al_read_file("/proc/self/status", buf, sizeof(buf)) > 0 &&
	    (l = strstr(buf, "\nUmask:\t")))
		return (mode_t)strtoul(l + 8, NULL, 8) & 0777;
	m = umask(022);
	umask(m);
	return m;
}
