/* The floor for bench/startup.py: the least a program does to start a
 * command in the seven namespaces airlock makes (user, mount, pid, net,
 * ipc, uts, cgroup), on a read-only tmpfs root reached by pivot_root, with
 * the system directories bound read-only as airlock binds them (/usr and
 * the links to it, /etc/ld.so.cache, /proc, a /dev tmpfs with /dev/null).
 * No cgroup, seccomp, landlock, capability drop, id slot, checks or
 * supervisor: what airlock adds on top of this is what it pays for those.
 *
 * Usage: floor COMMAND [ARG...]   (as root, or as a user where
 * unprivileged user namespaces are allowed). Exits with the command's
 * status, or 125 with a message naming the step that failed. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define NS_FLAGS                                                                                   \
	(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | \
	 CLONE_NEWCGROUP)
/* Where the new root is built: any directory will do, since the mount
 * namespace is the child's own and private. */
#define ROOT "/tmp"

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
	/* pivot_root(".", ".") stacks the old root on the new one; detaching
	 * "." drops it, and with it every path to the host's tree. */
	if (chdir(ROOT) < 0 || syscall(SYS_pivot_root, ".", ".") < 0)
		die("pivot_root");
	if (umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
		die("detaching the old root");
	if (mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) <
	    0)
		die("making / read-only");
	execv(argv[0], argv);
	die(argv[0]);
}

int main(int argc, char **argv)
{
	struct clone_args args = {.flags = NS_FLAGS, .exit_signal = SIGCHLD};
	char path[64], map[64];
	int gate[2], status;
	long pid;

	if (argc < 2) {
		fprintf(stderr, "usage: floor COMMAND [ARG...]\n");
		return 125;
	}
	if (pipe2(gate, O_CLOEXEC) < 0)
		die("pipe");
	pid = syscall(SYS_clone3, &args, sizeof(args));
	if (pid < 0)
		die("clone3 into new namespaces");
	if (pid == 0) {
		close(gate[1]);
		child(gate[0], argv + 1);
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
