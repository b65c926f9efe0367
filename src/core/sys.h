/* Thin wrappers over syscalls glibc 2.36 lacks or hides, plus small file
 * helpers that make syscalls. Each returns what the syscall returns (-1 and
 * errno on failure) unless noted. */
#pragma once

#include <linux/landlock.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <linux/sched.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct al_error;

long al_sys_clone3(struct clone_args *args, size_t size);
int al_sys_pivot_root(const char *new_root, const char *put_old);
int al_sys_pidfd_open(pid_t pid, unsigned int flags);
int al_sys_pidfd_send_signal(int pidfd, int sig);
/* sig to the process group of the process pidfd stands for
 * (PIDFD_SIGNAL_PROCESS_GROUP, Linux 6.9): that group even once its leader
 * is reaped, never one that took its number since. EINVAL before 6.9. */
int al_sys_pidfd_signal_group(int pidfd, int sig);
int al_sys_close_range(unsigned int first, unsigned int last, unsigned int flags);
int al_sys_openat2(int dirfd, const char *path, struct open_how *how, size_t size);
int al_sys_mount_setattr(int dirfd, const char *path, unsigned int flags, struct mount_attr *attr,
			 size_t size);
/* Landlock ABI pieces newer than the 6.1 uapi headers Debian 12 ships. */
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif
#ifndef LANDLOCK_ACCESS_NET_BIND_TCP
#define LANDLOCK_ACCESS_NET_BIND_TCP	(1ULL << 0)
#define LANDLOCK_ACCESS_NET_CONNECT_TCP (1ULL << 1)
#endif
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define LANDLOCK_SCOPE_SIGNAL		    (1ULL << 1)
#endif

/* The ruleset attribute as of landlock ABI 6; pass al_landlock_attr_size()
 * so older kernels see only the fields they know. */
/* A TCP port rule (ABI 4+), as the kernel's struct landlock_net_port_attr,
 * which older headers lack. */
#define AL_LANDLOCK_RULE_NET_PORT 2
struct al_landlock_net_port {
	uint64_t allowed_access;
	uint64_t port;
};

struct al_landlock_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net;
	uint64_t scoped;
};
size_t al_landlock_attr_size(int abi);

int al_sys_landlock_create_ruleset(const struct al_landlock_attr *attr, size_t size,
				   uint32_t flags);
int al_sys_landlock_add_rule(int ruleset_fd, enum landlock_rule_type type, const void *attr,
			     uint32_t flags);
int al_sys_landlock_restrict_self(int ruleset_fd, uint32_t flags);

/* The kernel's landlock ABI version, or 0 when landlock is absent or
 * disabled. Cached after the first call. */
int al_landlock_abi(void);

/* CLOCK_MONOTONIC in milliseconds. */
uint64_t al_now_ms(void);

/* Every filesystem access right landlock ABI abi knows. */
uint64_t al_landlock_fs_all(int abi);

/* Open the directory of an output file the invoker named (what: "--result",
 * "--audit") as an O_PATH fd, refusing a symbolic link anywhere in the
 * path: code in a sandbox that can write to a directory on the way could
 * have planted one to turn airlock's write (as root) to another file. The
 * final component is returned in *ret_name (malloc'd); open it relative
 * to the fd with O_NOFOLLOW. Returns the fd, or -errno with err naming the
 * path. */
int al_open_output_dir(const char *path, const char *what, char **ret_name, struct al_error *err);

/* fd is an open descriptor that can be written (what names it, e.g.
 * "--result-fd 5"). 0, or -EBADF with err saying why not. */
int al_fd_check_writable(int fd, const char *what, struct al_error *err);

/* Write len bytes to an existing file (O_WRONLY, no create), as for
 * /proc/PID/uid_map. Returns 0 or -errno. */
int al_write_file_at(int dirfd, const char *path, const char *data, size_t len);

/* Open a namespace file (/proc/PID/ns/net, a bind mount of one under
 * /run/netns): first as O_PATH, which never blocks on a FIFO nor opens a
 * device, then, once fstatfs says it is of nsfs, again through
 * /proc/self/fd as O_RDONLY (setns and the NS_GET_* ioctls need a real
 * descriptor). Returns the fd (O_CLOEXEC), -EINVAL when the path is not a
 * namespace file, or -errno. */
int al_open_ns(const char *path);

/* Write all of buf to fd, retrying on EINTR and short writes. 0 or -errno. */
int al_write_all(int fd, const void *buf, size_t len);

/* Read up to len-1 bytes of a small file and NUL-terminate. Returns bytes
 * read or -errno. */
ssize_t al_read_file(const char *path, char *buf, size_t len);

/* A random run id: 16 lowercase hex digits (buf needs 17 bytes). */
void al_random_id(char *buf, size_t len);

/* Field 22 of /proc/PID/stat, the process's start time in clock ticks
 * since boot: with the pid, an identity that survives pid reuse. 0 or
 * -errno (-ESRCH: a zombie, gone but not yet reaped). */
int al_proc_starttime(pid_t pid, unsigned long long *ret);

/* A stack for a clone(CLONE_VM) child that runs on the caller's memory:
 * mapped per call, so that two runs (or threads) of one process never
 * share one, with a PROT_NONE guard page under it, so that an overflow
 * faults instead of writing over other memory. */
struct al_clone_stack {
	void *map; /* the mapping, guard page included; NULL when none */
	size_t len;
};

/* Map a stack of size bytes (rounded up to pages) in s. Returns its top,
 * the address to pass to clone(), or NULL with errno set. Unmap it with
 * al_clone_stack_free() only once the child has exited. */
void *al_clone_stack_new(struct al_clone_stack *s, size_t size);
void al_clone_stack_free(struct al_clone_stack *s);

/* The process's umask, read from /proc/self/status without changing it
 * (umask() can only be read by setting it, which another thread's files
 * would get meanwhile). Where /proc does not say, set and set back. */
mode_t al_umask_get(void);
