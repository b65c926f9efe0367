/* The floor for bench/startup.py: the least a program does to start a
 * command in the seven namespaces airlock makes (user, mount, pid, net,
 * ipc, uts, cgroup), on a read-only tmpfs root reached by pivot_root, with
 * the system directories bound read-only as airlock binds them (/usr and
 * the links to it, /etc/ld.so.cache, /proc, a /dev tmpfs with /dev/null).
 * No cgroup, seccomp, landlock, capability drop, id slot, checks or
 * supervisor: what airlock adds on top of this is what it pays for those.
 *
 * Two of those layers can be put back one at a time, to measure what each
 * costs a running program (bench/opens.py):
 *   --landlock  a ruleset shaped as airlock's (src/backend/native/lower.c):
 *               every right of the kernel's ABI handled, the root readable
 *               as a directory, each bind with the rights its access asks
 *               for; plus airlock's scopes (ABI 6 and later)
 *   --seccomp   airlock's own program (al_seccomp_program, compiled from
 *               src/policy/seccomp.c at build time), with no listener: a
 *               call it sends to the supervisor fails with ENOSYS
 *   --ro DIR    DIR bound read-only (with exec) at the same path (at most 4)
 *
 * Usage: floor [--landlock] [--seccomp] [--ro DIR]... COMMAND [ARG...]
 * (as root, or as a user where unprivileged user namespaces are allowed).
 * Exits with the command's status, or 125 with a message naming the step
 * that failed. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/landlock.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/sys.h"
#include "policy/seccomp.h"

#define NS_FLAGS                                                                                   \
	(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | \
	 CLONE_NEWCGROUP)
/* Where the new root is built: any directory will do, since the mount
 * namespace is the child's own and private. */
#define ROOT "/tmp"

#define MAX_RO 4

static bool want_landlock, want_seccomp;
static const char *ro_dirs[MAX_RO];
static size_t n_ro;

static void die(const char *what)
{
	fprintf(stderr, "floor: %s: %s\n", what, strerror(errno));
	_exit(125);
}

static void write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);

	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		die(path);
	close(fd);
}

/* A read-only bind of the host's path at the same place under ROOT. */
static void bind_ro(const char *host, const char *target, unsigned long extra)
{
	if (mount(host, target, NULL, MS_BIND | MS_REC, NULL) < 0)
		die(host);
	if (mount(NULL, target, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | extra, NULL) < 0)
		die(target);
}

/* The rights lower.c gives: read is a file's and a directory's read; a
 * device bind may also be written and take device ioctls. */
#define LL_READ	  (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)
#define LL_DEVICE (LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_IOCTL_DEV)

static void ll_rule(int ruleset, const char *path, uint64_t access, uint64_t handled)
{
	struct landlock_path_beneath_attr pb = {.allowed_access = access & handled};
	struct stat st;

	pb.parent_fd = open(path, O_PATH | O_CLOEXEC);
	if (pb.parent_fd < 0 || fstat(pb.parent_fd, &st) < 0)
		die(path);
	/* A file takes no directory right (landlock refuses them). */
	if (!S_ISDIR(st.st_mode))
		pb.allowed_access &= LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |
				     LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE |
				     LANDLOCK_ACCESS_FS_IOCTL_DEV;
	if (al_sys_landlock_add_rule(ruleset, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0)
		die(path);
	close(pb.parent_fd);
}

/* As step_landlock in src/backend/native/steps.c, over this tree. */
static void apply_landlock(void)
{
	int abi = al_landlock_abi();
	struct al_landlock_attr attr = {.handled_access_fs = al_landlock_fs_all(abi)};
	uint64_t h = attr.handled_access_fs;
	int ruleset;

	if (abi == 0) {
		errno = EOPNOTSUPP;
		die("landlock");
	}
	if (abi >= 6)
		attr.scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL;
	ruleset = al_sys_landlock_create_ruleset(&attr, al_landlock_attr_size(abi), 0);
	if (ruleset < 0)
		die("landlock_create_ruleset");
	ll_rule(ruleset, "/", LANDLOCK_ACCESS_FS_READ_DIR, h);
	ll_rule(ruleset, "/usr", LL_READ | LANDLOCK_ACCESS_FS_EXECUTE, h);
	ll_rule(ruleset, "/etc/ld.so.cache", LL_READ, h);
	ll_rule(ruleset, "/proc", LL_READ, h);
	ll_rule(ruleset, "/dev", LL_READ, h);
	ll_rule(ruleset, "/dev/null", LL_READ | LL_DEVICE, h);
	for (size_t i = 0; i < n_ro; i++)
		ll_rule(ruleset, ro_dirs[i], LL_READ | LANDLOCK_ACCESS_FS_EXECUTE, h);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    al_sys_landlock_restrict_self(ruleset, 0) < 0)
		die("landlock_restrict_self");
	close(ruleset);
}

static void apply_seccomp(void)
{
	struct sock_fprog prog = {.len = al_seccomp_program_len,
				  .filter = (struct sock_filter *)al_seccomp_program};

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
		die("seccomp");
}

/* An empty file or directory at ROOT/path to bind host's path onto, with
 * the directories above it. */
static void mount_point(const char *path, bool dir)
{
	char t[4096];

	snprintf(t, sizeof(t), "%s%s", ROOT, path);
	for (char *p = t + strlen(ROOT) + 1; (p = strchr(p, '/')); p++) {
		*p = '\0';
		if (mkdir(t, 0755) < 0 && errno != EEXIST)
			die(t);
		*p = '/';
	}
	if (dir ? mkdir(t, 0755) < 0 && errno != EEXIST : mknod(t, S_IFREG | 0644, 0) < 0)
		die(t);
}

static void child(int gate, char **argv)
{
	static const char *const links[][2] = {
	    {"usr/bin", ROOT "/bin"},
	    {"usr/lib", ROOT "/lib"},
	    {"usr/lib64", ROOT "/lib64"},
	    {"usr/sbin", ROOT "/sbin"},
	};
	char c;

	/* Wait for the id maps: before them the child has no ids at all. */
	if (read(gate, &c, 1) != 1)
		_exit(125);
	close(gate);
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		die("making / private");
	if (mount("floor", ROOT, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755") < 0)
		die("tmpfs root");
	if (mkdir(ROOT "/usr", 0755) < 0 || mkdir(ROOT "/etc", 0755) < 0 ||
	    mkdir(ROOT "/proc", 0755) < 0 || mkdir(ROOT "/dev", 0755) < 0)
		die("mkdir in the root");
	bind_ro("/usr", ROOT "/usr", MS_NOSUID | MS_NODEV);
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++)
		if (symlink(links[i][0], links[i][1]) < 0)
			die(links[i][1]);
	int fd = open(ROOT "/etc/ld.so.cache", O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	if (fd < 0)
		die("ld.so.cache's mount point");
	close(fd);
	bind_ro("/etc/ld.so.cache", ROOT "/etc/ld.so.cache", MS_NOSUID | MS_NODEV | MS_NOEXEC);
	if (mount("proc", ROOT "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		die("proc");
	if (mount("dev", ROOT "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,mode=0755") < 0)
		die("dev tmpfs");
	fd = open(ROOT "/dev/null", O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	if (fd < 0)
		die("/dev/null's mount point");
	close(fd);
	if (mount("/dev/null", ROOT "/dev/null", NULL, MS_BIND, NULL) < 0)
		die("/dev/null");
	for (size_t i = 0; i < n_ro; i++) {
		char t[4096];
		snprintf(t, sizeof(t), "%s%s", ROOT, ro_dirs[i]);
		mount_point(ro_dirs[i], true);
		bind_ro(ro_dirs[i], t, MS_NOSUID | MS_NODEV);
	}
	/* pivot_root(".", ".") stacks the old root on the new one; detaching
	 * "." drops it, and with it every path to the host's tree. */
	if (chdir(ROOT) < 0 || syscall(SYS_pivot_root, ".", ".") < 0)
		die("pivot_root");
	if (umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
		die("detaching the old root");
	if (mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) <
	    0)
		die("making / read-only");
	if (want_landlock)
		apply_landlock();
	if (want_seccomp)
		apply_seccomp();
	execv(argv[0], argv);
	die(argv[0]);
}

int main(int argc, char **argv)
{
	struct clone_args args = {.flags = NS_FLAGS, .exit_signal = SIGCHLD};
	char path[64], map[64];
	int gate[2], status;
	long pid;

	int a = 1;

	for (; a < argc && argv[a][0] == '-'; a++) {
		if (strcmp(argv[a], "--landlock") == 0)
			want_landlock = true;
		else if (strcmp(argv[a], "--seccomp") == 0)
			want_seccomp = true;
		else if (strcmp(argv[a], "--ro") == 0 && a + 1 < argc) {
			const char *d = argv[++a];
			if (d[0] != '/' || strcmp(d, "/") == 0 || strncmp(d, "/tmp/", 5) == 0) {
				fprintf(stderr,
					"floor: --ro %s: not an absolute path outside / and /tmp\n",
					d);
				return 125;
			}
			if (n_ro == MAX_RO) {
				fprintf(stderr, "floor: --ro %s: more than %d directories\n", d,
					MAX_RO);
				return 125;
			}
			ro_dirs[n_ro++] = d;
		} else {
			fprintf(stderr, "floor: unknown option %s\n", argv[a]);
			return 125;
		}
	}
	if (a >= argc) {
		fprintf(stderr,
			"usage: floor [--landlock] [--seccomp] [--ro DIR]... COMMAND [ARG...]\n");
		return 125;
	}
	if (pipe2(gate, O_CLOEXEC) < 0)
		die("pipe");
	pid = syscall(SYS_clone3, &args, sizeof(args));
	if (pid < 0)
		die("clone3 into new namespaces");
	if (pid == 0) {
		close(gate[1]);
		child(gate[0], argv + a);
	}
	close(gate[0]);
	/* The caller's own ids as root inside: one line each, as an ordinary
	 * user may write them (setgroups denied first). */
	snprintf(path, sizeof(path), "/proc/%ld/setgroups", pid);
	write_file(path, "deny");
	snprintf(path, sizeof(path), "/proc/%ld/uid_map", pid);
	snprintf(map, sizeof(map), "0 %u 1", (unsigned)getuid());
	write_file(path, map);
	snprintf(path, sizeof(path), "/proc/%ld/gid_map", pid);
	snprintf(map, sizeof(map), "0 %u 1", (unsigned)getgid());
	write_file(path, map);
	if (write(gate[1], "g", 1) != 1)
		die("releasing the child");
	close(gate[1]);
	if (waitpid((pid_t)pid, &status, 0) < 0)
		die("waitpid");
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
