/* probe: a static helper that runs inside an airlock sandbox and reports what
 * it can see and do, for tests/e2e/run_e2e.py and tests/security/.
 *
 * Every subcommand prints machine-parsable lines and exits 0 when the probe
 * itself ran, whatever the answer was ("ok", "errno=EPERM", "ret=3"). Exit 2
 * means a usage error: the test asked for something the probe doesn't know.
 * Exit 1 means the probe itself failed (e.g. fork failed in `daemon`).
 * Exit 3: a setuid copy was asked for something other than `id`.
 * Exit 4: an attack subcommand (syscall, kill, ptrace, mount-tmpfs, chroot,
 * sethostname, mknod, fill) was run outside a sandbox; see confined().
 *
 * Every denied syscall is issued with arguments that would make it fail
 * harmlessly (or succeed harmlessly) if seccomp let it through, and where
 * possible with arguments that make the kernel return something other than
 * EPERM in that case (a bad pointer gives EFAULT, a bad fd EBADF), so that
 * "errno=EPERM" is evidence of the filter and not of a missing capability.
 *
 * Linked statically against plain libc: no libairlock, no shared libraries,
 * so it runs in any sandbox root. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <asm/ldt.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/filter.h>
#include <linux/keyctl.h>
#include <linux/kcmp.h>
#include <linux/reboot.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#ifndef AF_ALG
#define AF_ALG 38
#endif
#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#ifndef IPPROTO_MPTCP
#define IPPROTO_MPTCP 262
#endif
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
#ifndef SYS_clone3
#define SYS_clone3 435
#endif
#ifndef SYS_lookup_dcookie
#define SYS_lookup_dcookie 212
#endif

/* An address that is never mapped: a syscall that copies from it fails with
 * EFAULT, which tells "the kernel ran it" apart from "seccomp denied it". */
#define BAD ((void *)1)

extern char **environ;

static const char *errname(int e)
{
	const char *n = strerrorname_np(e);
	static char buf[32];

	if (n)
		return n;
	snprintf(buf, sizeof(buf), "E%d", e);
	return buf;
}

/* Print the result of a call that returns -1/errno on failure. */
static void report(const char *label, long r, int e)
{
	if (label)
		printf("%s ", label);
	if (r < 0)
		printf("errno=%s\n", errname(e));
	else
		printf("ret=%ld\n", r);
}

/* True when this process is confined the way airlock confines a command:
 * no_new_privs set, a seccomp filter installed, not uid 0. The attack
 * subcommands refuse to run otherwise, so that running the probe on the host
 * by mistake (or under a broken airlock) cannot signal host processes,
 * create namespaces or touch the terminal; the test then fails on the exit
 * code (4) instead of doing harm. */
static bool confined(void)
{
	char line[256];
	int nnp = 0, seccomp = 0;
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "NoNewPrivs:", 11) == 0)
			nnp = atoi(line + 11);
		if (strncmp(line, "Seccomp:", 8) == 0)
			seccomp = atoi(line + 8);
	}
	fclose(f);
	if (getuid() == 0 || geteuid() == 0)
		return false;
	/* Under gVisor (the gvisor backend) the sentry serves every system
	 * call and shows no seccomp or no_new_privs of its own: its kernel
	 * is known by the fixed version it reports, which no host kernel
	 * this suite runs on has. */
	static const char gvisor[] = "Linux version 4.4.0 #1 SMP Sun Jan 10 15:06:54 PST 2016\n";
	char version[sizeof(gvisor) + 1] = "";
	FILE *v = fopen("/proc/version", "re");
	if (v) {
		if (!fgets(version, sizeof(version), v))
			version[0] = '\0';
		fclose(v);
	}
	/* In a microvm/vm guest the command runs on the guest's own kernel,
	 * with no_new_privs but no seccomp of airlock's: airlock marks the
	 * guest kernel's command line, which no host's has. */
	char cmdline[4096] = "";
	FILE *c = fopen("/proc/cmdline", "re");
	if (c) {
		if (!fgets(cmdline, sizeof(cmdline), c))
			cmdline[0] = '\0';
		fclose(c);
	}
	bool guest = strstr(cmdline, " airlock.guest=1") != NULL;
	return (nnp == 1 && (seccomp == 2 || guest)) || strcmp(version, gvisor) == 0;
}

static int usage(void)
{
	fprintf(stderr,
		"usage: probe id | env | caps | hostname | fds | sid\n"
		"       probe read PATH | open PATH r|w|rw | write PATH [DATA] | ls PATH\n"
		"       probe find PATH NEEDLE\n"
		"       probe stat PATH | mkdir PATH | mknod PATH | fill PATH\n"
		"       probe connect HOST PORT | connect-unix PATH|@ABSTRACT | listen-self\n"
		"       probe syscall (NAME | nr N)... | mount-tmpfs TARGET | chroot DIR\n"
		"       probe kill PID SIG | ptrace PID | sethostname NAME\n"
		"       probe daemon NAME | sleep SECONDS [TAG] | spew BYTES\n");
	return 2;
}

/* ---- identity and environment ---------------------------------------- */

static int cmd_id(void)
{
	uid_t r, e, s;
	gid_t rg, eg, sg;
	gid_t groups[64];
	int n;

	getresuid(&r, &e, &s);
	getresgid(&rg, &eg, &sg);
	printf("uid=%u\neuid=%u\nsuid=%u\ngid=%u\negid=%u\nsgid=%u\n", r, e, s, rg, eg, sg);
	n = getgroups(64, groups);
	printf("groups=");
	for (int i = 0; i < n; i++)
		printf("%s%u", i ? "," : "", groups[i]);
	printf("\n");
	return 0;
}

static int cmd_env(void)
{
	for (char **e = environ; *e; e++)
		printf("%s\n", *e);
	return 0;
}

/* The capability, no_new_privs and seccomp lines of /proc/self/status. */
static int cmd_caps(void)
{
	static const char *const keys[] = {
	    "CapInh:",	   "CapPrm:",  "CapEff:",	   "CapBnd:", "CapAmb:",
	    "NoNewPrivs:", "Seccomp:", "Seccomp_filters:", NULL};
	char line[512];
	FILE *f = fopen("/proc/self/status", "re");

	if (!f) {
		report("status", -1, errno);
		return 0;
	}
	while (fgets(line, sizeof(line), f))
		for (size_t i = 0; keys[i]; i++)
			if (strncmp(line, keys[i], strlen(keys[i])) == 0)
				fputs(line, stdout);
	fclose(f);
	return 0;
}

static int cmd_hostname(void)
{
	struct utsname u;

	if (uname(&u) < 0) {
		report("uname", -1, errno);
		return 0;
	}
	printf("%s\n", u.nodename);
	return 0;
}

/* Open file descriptors and where they point. */
static int cmd_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;

	if (!d) {
		report("opendir", -1, errno);
		return 0;
	}
	while ((de = readdir(d))) {
		char p[300], target[4096];
		ssize_t n;

		if (de->d_name[0] == '.' || atoi(de->d_name) == dirfd(d))
			continue;
		snprintf(p, sizeof(p), "/proc/self/fd/%s", de->d_name);
		n = readlink(p, target, sizeof(target) - 1);
		target[n < 0 ? 0 : n] = '\0';
		printf("%s %s\n", de->d_name, target);
	}
	closedir(d);
	return 0;
}

/* Session, process group and controlling terminal. */
static int cmd_sid(void)
{
	int fd;

	printf("pid=%d\nsid=%d\npgid=%d\n", getpid(), getsid(0), getpgrp());
	fd = open("/dev/tty", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		report("tty", -1, errno);
	} else {
		printf("tty ok\n");
		close(fd);
	}
	return 0;
}

/* ---- files -------------------------------------------------------------- */

static int cmd_read(const char *path)
{
	char buf[65536];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		report(NULL, -1, errno);
		return 0;
	}
	printf("ok\n");
	fflush(stdout);
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		if (write(1, buf, (size_t)n) != n)
			return 1;
	if (n < 0)
		printf("\nerrno=%s\n", errname(errno));
	close(fd);
	return 0;
}

/* Look for NEEDLE in the first MiB of PATH without blocking (PATH may be
 * a pipe): prints found, absent or errno=. The content is never printed. */
static int cmd_find(const char *path, const char *needle)
{
	static char buf[1 << 20];
	size_t len = 0;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);

	if (fd < 0) {
		report(NULL, -1, errno);
		return 0;
	}
	while (len < sizeof(buf) - 1 && (n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
		len += (size_t)n;
	close(fd);
	buf[len] = '\0';
	printf("%s\n", memmem(buf, len, needle, strlen(needle)) ? "found" : "absent");
	return 0;
}

static int cmd_open(const char *path, const char *mode)
{
	int flags;
	int fd;

	if (strcmp(mode, "r") == 0)
		flags = O_RDONLY;
	else if (strcmp(mode, "w") == 0)
		flags = O_WRONLY;
	else if (strcmp(mode, "rw") == 0)
		flags = O_RDWR;
	else
		return usage();
	fd = open(path, flags | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		report(NULL, -1, errno);
		return 0;
	}
	printf("ok\n");
	close(fd);
	return 0;
}

/* Create or append. The default data is one harmless byte run. */
static int cmd_write(const char *path, const char *data)
{
	size_t len = strlen(data);
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY, 0644);

	if (fd < 0) {
		report(NULL, -1, errno);
		return 0;
	}
	if (write(fd, data, len) != (ssize_t)len) {
		report(NULL, -1, errno);
		close(fd);
		return 0;
	}
	if (close(fd) < 0) {
		report(NULL, -1, errno);
		return 0;
	}
	printf("ok\n");
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Entries of a directory, sorted, without . and .. */
static int cmd_ls(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;
	char **names = NULL;
	size_t n = 0;

	if (!d) {
		report(NULL, -1, errno);
		return 0;
	}
	errno = 0;
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		names = realloc(names, (n + 1) * sizeof(*names));
		if (!names)
			return 1;
		names[n++] = strdup(de->d_name);
	}
	if (errno) {
		report(NULL, -1, errno);
		closedir(d);
		return 0;
	}
	closedir(d);
	qsort(names, n, sizeof(*names), cmp_str);
	printf("ok\n");
	for (size_t i = 0; i < n; i++)
		printf("%s\n", names[i]);
	return 0;
}

static int cmd_stat(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0) {
		report(NULL, -1, errno);
		return 0;
	}
	printf("ok\nmode=%04o\ntype=%s\nuid=%u\ngid=%u\nsize=%lld\n", st.st_mode & 07777,
	       S_ISDIR(st.st_mode)   ? "dir"
	       : S_ISREG(st.st_mode) ? "file"
	       : S_ISLNK(st.st_mode) ? "link"
	       : S_ISCHR(st.st_mode) ? "char"
	       : S_ISBLK(st.st_mode) ? "block"
				     : "other",
	       st.st_uid, st.st_gid, (long long)st.st_size);
	return 0;
}

static int cmd_mkdir(const char *path)
{
	int r = mkdir(path, 0755);
	report(NULL, r, errno);
	return 0;
}

/* mknod of /dev/mem's numbers (1:1): a device node would read host memory. */
static int cmd_mknod(const char *path)
{
	int r = mknod(path, S_IFCHR | 0666, makedev(1, 1));
	report(NULL, r, errno);
	return 0;
}

/* Write 1 MiB chunks until the write fails; report the bytes written. The
 * scratch size limit must stop this with ENOSPC. Bounded at 1 GiB. The file
 * is kept, so a second fill elsewhere shows whether the space is shared. */
static int cmd_fill(const char *path)
{
	static char buf[1 << 20];
	long long total = 0;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int e = 0;

	if (fd < 0) {
		report(NULL, -1, errno);
		return 0;
	}
	memset(buf, 'x', sizeof(buf));
	while (total < (1LL << 30)) {
		ssize_t n = write(fd, buf, sizeof(buf));
		if (n < 0) {
			e = errno;
			break;
		}
		total += n; /* after a short write, the next one reports the errno */
	}
	close(fd);
	printf("bytes=%lld\n", total);
	if (e)
		printf("errno=%s\n", errname(e));
	else
		printf("errno=none\n");
	return 0;
}

/* ---- network ------------------------------------------------------------ */

/* Connect with a 3 s timeout so a silently dropped SYN cannot hang a test. */
static int cmd_connect(const char *host, const char *port)
{
	struct sockaddr_storage ss = {0};
	socklen_t len;
	int fd, r, e = 0;
	struct pollfd pfd;
	socklen_t elen = sizeof(e);

	if (strchr(host, ':')) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)atoi(port));
		if (inet_pton(AF_INET6, host, &s6->sin6_addr) != 1)
			return usage();
		len = sizeof(*s6);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)atoi(port));
		if (inet_pton(AF_INET, host, &s4->sin_addr) != 1)
			return usage();
		len = sizeof(*s4);
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		report("socket", -1, errno);
		return 0;
	}
	r = connect(fd, (struct sockaddr *)&ss, len);
	if (r < 0 && errno != EINPROGRESS) {
		report(NULL, -1, errno);
		close(fd);
		return 0;
	}
	if (r < 0) {
		pfd = (struct pollfd){.fd = fd, .events = POLLOUT};
		r = poll(&pfd, 1, 3000);
		if (r == 0) {
			printf("errno=ETIMEDOUT\n");
			close(fd);
			return 0;
		}
		getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &elen);
		if (e) {
			report(NULL, -1, e);
			close(fd);
			return 0;
		}
	}
	printf("ok\n");
	close(fd);
	return 0;
}

/* Connect to a unix stream socket; "@name" is an abstract address. */
static int cmd_connect_unix(const char *path)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	size_t n = strlen(path);
	socklen_t len;
	int fd;

	if (n >= sizeof(a.sun_path))
		return usage();
	memcpy(a.sun_path, path, n);
	if (path[0] == '@')
		a.sun_path[0] = '\0';
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (path[0] == '@' ? 0 : 1));
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		report("socket", -1, errno);
		return 0;
	}
	if (connect(fd, (struct sockaddr *)&a, len) < 0)
		report(NULL, -1, errno);
	else
		printf("ok\n");
	close(fd);
	return 0;
}

/* A listener on the sandbox's own loopback, connected to from inside. */
static int cmd_listen_self(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t alen = sizeof(a);
	char buf[8] = {0};
	int l, c, s;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 1) < 0 ||
	    getsockname(l, (struct sockaddr *)&a, &alen) < 0) {
		report("listen", -1, errno);
		return 0;
	}
	c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof(a)) < 0) {
		report("connect", -1, errno);
		return 0;
	}
	s = accept(l, NULL, NULL);
	if (s < 0 || write(c, "ping", 4) != 4 || read(s, buf, 4) != 4) {
		report("exchange", -1, errno);
		return 0;
	}
	printf("%s\n", strcmp(buf, "ping") == 0 ? "ok" : "mismatch");
	return 0;
}

/* ---- syscalls ----------------------------------------------------------- */

/* Wait for a child that a successful clone/clone3/fork created. */
static long reap(long pid)
{
	if (pid == 0)
		syscall(SYS_exit_group, 0); /* the child: leave at once */
	if (pid > 0)
		waitpid((pid_t)pid, NULL, 0);
	return pid > 0 ? 0 : pid;
}

static long do_clone(unsigned long flags)
{
	/* No new stack: the child runs on a copy of ours, like fork. */
	return reap(syscall(SYS_clone, flags | SIGCHLD, 0, 0, 0, 0));
}

static long do_socket(int family, int type, int proto)
{
	long fd = socket(family, type, proto);
	if (fd >= 0)
		close((int)fd);
	return fd;
}

static long do_close_fd(long fd)
{
	if (fd >= 0)
		close((int)fd);
	return fd;
}

static long do_clone3(void)
{
	uint64_t args[11] = {0}; /* struct clone_args, version 2 */
	args[4] = SIGCHLD;	 /* exit_signal */
	return reap(syscall(SYS_clone3, args, sizeof(args)));
}

static long do_process_vm(int write_side)
{
	char src[4] = "abc", dst[4] = {0};
	struct iovec local = {write_side ? src : dst, 3};
	struct iovec remote = {write_side ? dst : src, 3};

	if (write_side)
		return syscall(SYS_process_vm_writev, getpid(), &local, 1, &remote, 1, 0);
	return syscall(SYS_process_vm_readv, getpid(), &local, 1, &remote, 1, 0);
}

static long do_tiocsti(int high_bits)
{
	char c = '#';
	unsigned long req = TIOCSTI;

	if (high_bits)
		req |= 1UL << 32; /* the kernel truncates cmd to 32 bits */
	return syscall(SYS_ioctl, 0, req, &c);
}

static long do_tioclinux(int high_bits)
{
	char sub = 6; /* TIOCL_GETSHIFTSTATE: read-only */
	unsigned long req = TIOCLINUX;

	if (high_bits)
		req |= 1UL << 32;
	return syscall(SYS_ioctl, 0, req, &sub);
}

static long do_name_to_handle(void)
{
	struct {
		unsigned int bytes;
		int type;
		unsigned char h[128];
	} fh = {.bytes = 128};
	int mount_id;
	return syscall(SYS_name_to_handle_at, AT_FDCWD, "/", &fh, &mount_id, 0);
}

/* A valid, not-present data segment in slot 0 of the probe's own LDT: the
 * harmless way to use modify_ldt (returns 0 where the kernel has it). */
static long do_modify_ldt(void)
{
	struct user_desc d = {.entry_number = 0, .seg_32bit = 1, .seg_not_present = 1};

	return syscall(SYS_modify_ldt, 1, &d, sizeof(d));
}

/* Returns the syscall's result (-1 with errno on failure), or -2 for an
 * unknown name. */
static long run_syscall(const char *n)
{
	errno = 0;
	/* mounts and namespaces */
	if (!strcmp(n, "mount"))
		return syscall(SYS_mount, BAD, BAD, BAD, 0, NULL);
	if (!strcmp(n, "umount2"))
		return syscall(SYS_umount2, BAD, 0);
	if (!strcmp(n, "pivot_root"))
		return syscall(SYS_pivot_root, BAD, BAD);
	if (!strcmp(n, "chroot"))
		return syscall(SYS_chroot, BAD);
	if (!strcmp(n, "move_mount"))
		return syscall(SYS_move_mount, -1, BAD, -1, BAD, 0);
	if (!strcmp(n, "open_tree"))
		return do_close_fd(syscall(SYS_open_tree, -1, BAD, 0));
	if (!strcmp(n, "fsopen"))
		return do_close_fd(syscall(SYS_fsopen, BAD, 0));
	if (!strcmp(n, "fsconfig"))
		return syscall(SYS_fsconfig, -1, 0, NULL, NULL, 0);
	if (!strcmp(n, "fsmount"))
		return do_close_fd(syscall(SYS_fsmount, -1, 0, 0));
	if (!strcmp(n, "fspick"))
		return do_close_fd(syscall(SYS_fspick, -1, BAD, 0));
	if (!strcmp(n, "mount_setattr"))
		return syscall(SYS_mount_setattr, -1, BAD, 0, BAD, 0);
	if (!strcmp(n, "setns"))
		return syscall(SYS_setns, -1, 0);
	if (!strcmp(n, "unshare"))
		return syscall(SYS_unshare, CLONE_NEWUSER);
	if (!strcmp(n, "unshare-newns"))
		return syscall(SYS_unshare, CLONE_NEWNS);
	if (!strcmp(n, "clone-newuser"))
		return do_clone(CLONE_NEWUSER);
	if (!strcmp(n, "clone-newns"))
		return do_clone(CLONE_NEWNS);
	if (!strcmp(n, "clone-newpid"))
		return do_clone(CLONE_NEWPID);
	if (!strcmp(n, "clone-newnet"))
		return do_clone(CLONE_NEWNET);
	if (!strcmp(n, "clone-newipc"))
		return do_clone(CLONE_NEWIPC);
	if (!strcmp(n, "clone-newuts"))
		return do_clone(CLONE_NEWUTS);
	if (!strcmp(n, "clone-newcgroup"))
		return do_clone(CLONE_NEWCGROUP);
	if (!strcmp(n, "clone3"))
		return do_clone3();
	/* negative controls: these must work */
	if (!strcmp(n, "fork"))
		return do_clone(0);
	if (!strcmp(n, "getpid"))
		return syscall(SYS_getpid);
	/* kernel attack surface */
	if (!strcmp(n, "bpf"))
		return do_close_fd(syscall(SYS_bpf, 0 /* BPF_MAP_CREATE */, BAD, 72));
	if (!strcmp(n, "perf_event_open"))
		return do_close_fd(syscall(SYS_perf_event_open, BAD, 0, -1, -1, 0));
	if (!strcmp(n, "userfaultfd"))
		return do_close_fd(syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY));
	if (!strcmp(n, "io_uring_setup"))
		return do_close_fd(syscall(SYS_io_uring_setup, 1, BAD));
	if (!strcmp(n, "io_uring_enter"))
		return syscall(SYS_io_uring_enter, -1, 0, 0, 0, NULL, 0);
	if (!strcmp(n, "io_uring_register"))
		return syscall(SYS_io_uring_register, -1, 0, NULL, 0);
	if (!strcmp(n, "keyctl"))
		return syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_PROCESS_KEYRING, 0);
	if (!strcmp(n, "add_key"))
		return syscall(SYS_add_key, BAD, BAD, NULL, 0, KEY_SPEC_PROCESS_KEYRING);
	if (!strcmp(n, "request_key"))
		return syscall(SYS_request_key, BAD, BAD, NULL, 0);
	/* other processes */
	if (!strcmp(n, "ptrace"))
		return syscall(SYS_ptrace, PTRACE_PEEKUSER, 1, 0, 0);
	if (!strcmp(n, "process_vm_readv"))
		return do_process_vm(0);
	if (!strcmp(n, "process_vm_writev"))
		return do_process_vm(1);
	if (!strcmp(n, "kcmp"))
		return syscall(SYS_kcmp, getpid(), getpid(), KCMP_VM, 0, 0);
	if (!strcmp(n, "pidfd_getfd"))
		return syscall(SYS_pidfd_getfd, -1, 0, 0);
	/* the machine */
	if (!strcmp(n, "kexec_load"))
		return syscall(SYS_kexec_load, 0, 0, NULL, 0xffff0000UL);
	if (!strcmp(n, "kexec_file_load"))
		return syscall(SYS_kexec_file_load, -1, -1, 0, NULL, 0xffffffffUL);
	if (!strcmp(n, "init_module"))
		return syscall(SYS_init_module, BAD, 0, BAD);
	if (!strcmp(n, "finit_module"))
		return syscall(SYS_finit_module, -1, BAD, 0);
	if (!strcmp(n, "delete_module"))
		return syscall(SYS_delete_module, BAD, 0);
	if (!strcmp(n, "reboot"))
		return syscall(SYS_reboot, 0, 0, 0, NULL); /* bad magic: EINVAL if it ran */
	if (!strcmp(n, "swapon"))
		return syscall(SYS_swapon, BAD, 0);
	if (!strcmp(n, "swapoff"))
		return syscall(SYS_swapoff, BAD);
	if (!strcmp(n, "acct"))
		return syscall(SYS_acct, BAD);
	if (!strcmp(n, "settimeofday"))
		return syscall(SYS_settimeofday, BAD, NULL);
	if (!strcmp(n, "clock_settime"))
		return syscall(SYS_clock_settime, CLOCK_REALTIME, BAD);
	if (!strcmp(n, "clock_adjtime"))
		return syscall(SYS_clock_adjtime, CLOCK_REALTIME, BAD);
	if (!strcmp(n, "adjtimex"))
		return syscall(SYS_adjtimex, BAD);
	if (!strcmp(n, "syslog"))
		return syscall(SYS_syslog, 10 /* SYSLOG_ACTION_SIZE_BUFFER */, NULL, 0);
	if (!strcmp(n, "quotactl"))
		return syscall(SYS_quotactl, 0, BAD, 0, NULL);
	if (!strcmp(n, "lookup_dcookie"))
		return syscall(SYS_lookup_dcookie, 0, NULL, 0);
	if (!strcmp(n, "vhangup"))
		return syscall(SYS_vhangup);
	if (!strcmp(n, "iopl"))
		return syscall(SYS_iopl, 0);
	if (!strcmp(n, "ioperm"))
		return syscall(SYS_ioperm, 0x80, 1, 0);
	if (!strcmp(n, "open_by_handle_at"))
		return do_close_fd(syscall(SYS_open_by_handle_at, AT_FDCWD, BAD, O_RDONLY));
	if (!strcmp(n, "name_to_handle_at"))
		return do_name_to_handle();
	if (!strcmp(n, "modify_ldt"))
		return do_modify_ldt();
	/* terminals */
	if (!strcmp(n, "tiocsti"))
		return do_tiocsti(0);
	if (!strcmp(n, "tiocsti-high"))
		return do_tiocsti(1);
	if (!strcmp(n, "tioclinux"))
		return do_tioclinux(0);
	if (!strcmp(n, "tioclinux-high"))
		return do_tioclinux(1);
	/* sockets */
	if (!strcmp(n, "socket-packet"))
		return do_socket(AF_PACKET, SOCK_RAW, 0);
	if (!strcmp(n, "socket-packet-dgram"))
		return do_socket(AF_PACKET, SOCK_DGRAM, 0);
	if (!strcmp(n, "socket-raw"))
		return do_socket(AF_INET, SOCK_RAW, IPPROTO_ICMP);
	if (!strcmp(n, "socket-raw-cloexec"))
		return do_socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, IPPROTO_ICMP);
	if (!strcmp(n, "socket-raw6"))
		return do_socket(AF_INET6, SOCK_RAW, IPPROTO_ICMPV6);
	if (!strcmp(n, "socket-inet-packet"))
		return do_socket(AF_INET, SOCK_PACKET, 0);
	if (!strcmp(n, "socket-netlink"))
		return do_socket(AF_NETLINK, SOCK_RAW, 0 /* NETLINK_ROUTE */);
	if (!strcmp(n, "socket-netlink-dgram"))
		return do_socket(AF_NETLINK, SOCK_DGRAM, 0);
	if (!strcmp(n, "socket-alg"))
		return do_socket(AF_ALG, SOCK_SEQPACKET, 0);
	if (!strcmp(n, "socket-vsock"))
		return do_socket(AF_VSOCK, SOCK_STREAM, 0);
	/* protocols other than TCP, UDP and ICMP on INET sockets */
	if (!strcmp(n, "mptcp"))
		return do_socket(AF_INET, SOCK_STREAM, IPPROTO_MPTCP);
	if (!strcmp(n, "mptcp6"))
		return do_socket(AF_INET6, SOCK_STREAM, IPPROTO_MPTCP);
	if (!strcmp(n, "sctp"))
		return do_socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP);
	if (!strcmp(n, "socket-unix"))
		return do_socket(AF_UNIX, SOCK_STREAM, 0);
	if (!strcmp(n, "socket-inet"))
		return do_socket(AF_INET, SOCK_STREAM, 0);
	if (!strcmp(n, "socket-inet6"))
		return do_socket(AF_INET6, SOCK_DGRAM, 0);
	errno = 0;
	return -2;
}

/* probe syscall NAME...: one line per name, "NAME errno=EPERM" or "NAME ret=N".
 * "nr N" issues raw syscall N with every argument -1 (for numbers the
 * filter does not know; the kernel refuses -1 as a pointer, length or flag
 * set) and prints "nr-N errno=...". */
static int cmd_syscall(int argc, char **argv)
{
	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "nr") && i + 1 < argc) {
			char label[32], *end;
			long nr = strtol(argv[++i], &end, 10);
			if (*end || nr < 0) {
				fprintf(stderr, "probe: bad syscall number %s\n", argv[i]);
				return 2;
			}
			errno = 0;
			long r = syscall(nr, -1L, -1L, -1L, -1L, -1L, -1L);
			snprintf(label, sizeof(label), "nr-%ld", nr);
			report(label, r, errno);
			fflush(stdout);
			continue;
		}
		long r = run_syscall(argv[i]);
		int e = errno;
		if (r == -2 && e == 0) {
			fprintf(stderr, "probe: unknown syscall name %s\n", argv[i]);
			return 2;
		}
		report(argv[i], r, e);
		fflush(stdout);
	}
	return 0;
}

/* A real mount attempt: a tmpfs over TARGET. */
static int cmd_mount_tmpfs(const char *target)
{
	int r = mount("none", target, "tmpfs", 0, "size=1m");
	report(NULL, r, errno);
	return 0;
}

/* The classic chroot escape: chroot into a subdir, walk up, chroot ".". The
 * first chroot must already fail. */
static int cmd_chroot(const char *dir)
{
	if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
		report("mkdir", -1, errno);
		return 0;
	}
	if (chroot(dir) < 0) {
		report("chroot", -1, errno);
		return 0;
	}
	for (int i = 0; i < 64; i++)
		if (chdir("..") < 0)
			break;
	int r = chroot(".");
	report("chroot", r, errno);
	return 0;
}

static int cmd_sethostname(const char *name)
{
	int r = sethostname(name, strlen(name));
	report(NULL, r, errno);
	return 0;
}

static int cmd_kill(const char *pid, const char *sig)
{
	int r = kill((pid_t)atoi(pid), atoi(sig));
	report(NULL, r, errno);
	return 0;
}

static int cmd_ptrace(const char *pid)
{
	long r = ptrace(PTRACE_ATTACH, (pid_t)atoi(pid), NULL, NULL);
	int e = errno;

	report(NULL, r, e);
	if (r == 0)
		ptrace(PTRACE_DETACH, (pid_t)atoi(pid), NULL, NULL);
	return 0;
}

/* ---- processes ---------------------------------------------------------- */

static void sleep_seconds(double s)
{
	struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Double fork and setsid; the grandchild renames itself to NAME (its comm,
 * visible in host /proc), prints its pid and sleeps 30 s with stdout still
 * open. The first process exits 0 as soon as the grandchild reported. */
static int cmd_daemon(const char *name)
{
	int p[2];
	pid_t mid;
	char buf[32];
	ssize_t n;

	if (pipe2(p, O_CLOEXEC) < 0)
		return 1;
	mid = fork();
	if (mid < 0)
		return 1;
	if (mid == 0) {
		pid_t g;
		setsid();
		g = fork();
		if (g < 0)
			_exit(1);
		if (g > 0)
			_exit(0);
		signal(SIGHUP, SIG_IGN);
		prctl(PR_SET_NAME, name, 0, 0, 0);
		printf("daemon_pid=%d\n", getpid());
		fflush(stdout);
		if (write(p[1], "x", 1) != 1)
			_exit(1);
		close(p[1]);
		sleep_seconds(30);
		_exit(0);
	}
	close(p[1]);
	waitpid(mid, NULL, 0);
	n = read(p[0], buf, 1);
	printf("%s\n", n == 1 ? "ok" : "daemon did not report");
	return n == 1 ? 0 : 1;
}

static int cmd_sleep(const char *secs)
{
	printf("sleeping pid=%d\n", getpid());
	fflush(stdout);
	sleep_seconds(atof(secs));
	printf("woke\n");
	return 0;
}

/* BYTES bytes of a fixed pattern: byte i is (i * 7 + i / 251) % 256. */
static int cmd_spew(const char *bytes)
{
	static unsigned char buf[65536];
	long long total = atoll(bytes), i = 0;

	while (i < total) {
		size_t n = 0;
		while (n < sizeof(buf) && i < total) {
			buf[n++] = (unsigned char)((i * 7 + i / 251) % 256);
			i++;
		}
		for (size_t off = 0; off < n;) {
			ssize_t w = write(1, buf + off, n - off);
			if (w < 0) {
				if (errno == EINTR)
					continue;
				return 1;
			}
			off += (size_t)w;
		}
	}
	return 0;
}

/* Run argv as on a kernel without landlock: a seccomp filter answers the
 * landlock calls ENOSYS (the host side of a test; harmless: it only takes
 * a layer away from what it runs, which then must refuse or say so). */
static int cmd_no_landlock(char **argv)
{
	struct sock_filter f[] = {
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_landlock_create_ruleset, 3, 0),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_landlock_add_rule, 2, 0),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_landlock_restrict_self, 1, 0),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
	};
	struct sock_fprog prog = {sizeof(f) / sizeof(f[0]), f};

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0) {
		perror("probe: no-landlock filter");
		return 1;
	}
	execv(argv[0], argv);
	perror("probe: no-landlock exec");
	return 127;
}

int main(int argc, char **argv)
{
	const char *c = argc > 1 ? argv[1] : "";
	int n = argc - 2;
	char **a = argv + 2;

	setvbuf(stdout, NULL, _IOLBF, 0);
	/* The security suite runs setuid copies of the probe. Should the setuid
	 * bit ever work, such a copy only reports its ids: it never becomes a
	 * tool for writing files or killing processes with borrowed rights. */
	if ((getuid() != geteuid() || getgid() != getegid()) && strcmp(c, "id") != 0)
		return 3;
	if ((!strcmp(c, "syscall") || !strcmp(c, "mount-tmpfs") || !strcmp(c, "chroot") ||
	     !strcmp(c, "kill") || !strcmp(c, "ptrace") || !strcmp(c, "sethostname") ||
	     !strcmp(c, "mknod") || !strcmp(c, "fill")) &&
	    !confined()) {
		fprintf(stderr,
			"probe: refusing \"%s\" outside a sandbox (no seccomp/no_new_privs, "
			"or uid 0)\n",
			c);
		return 4;
	}
	if (!strcmp(c, "id") && n == 0)
		return cmd_id();
	if (!strcmp(c, "env") && n == 0)
		return cmd_env();
	if (!strcmp(c, "caps") && n == 0)
		return cmd_caps();
	if (!strcmp(c, "hostname") && n == 0)
		return cmd_hostname();
	if (!strcmp(c, "fds") && n == 0)
		return cmd_fds();
	if (!strcmp(c, "sid") && n == 0)
		return cmd_sid();
	if (!strcmp(c, "read") && n == 1)
		return cmd_read(a[0]);
	if (!strcmp(c, "find") && n == 2)
		return cmd_find(a[0], a[1]);
	if (!strcmp(c, "open") && n == 2)
		return cmd_open(a[0], a[1]);
	if (!strcmp(c, "write") && (n == 1 || n == 2))
		return cmd_write(a[0], n == 2 ? a[1] : "probe-data\n");
	if (!strcmp(c, "ls") && n == 1)
		return cmd_ls(a[0]);
	if (!strcmp(c, "stat") && n == 1)
		return cmd_stat(a[0]);
	if (!strcmp(c, "mkdir") && n == 1)
		return cmd_mkdir(a[0]);
	if (!strcmp(c, "mknod") && n == 1)
		return cmd_mknod(a[0]);
	if (!strcmp(c, "no-landlock") && n >= 1)
		return cmd_no_landlock(a);
	if (!strcmp(c, "fill") && n == 1)
		return cmd_fill(a[0]);
	if (!strcmp(c, "connect") && n == 2)
		return cmd_connect(a[0], a[1]);
	if (!strcmp(c, "connect-unix") && n == 1)
		return cmd_connect_unix(a[0]);
	if (!strcmp(c, "listen-self") && n == 0)
		return cmd_listen_self();
	if (!strcmp(c, "syscall") && n >= 1)
		return cmd_syscall(n, a);
	if (!strcmp(c, "mount-tmpfs") && n == 1)
		return cmd_mount_tmpfs(a[0]);
	if (!strcmp(c, "chroot") && n == 1)
		return cmd_chroot(a[0]);
	if (!strcmp(c, "sethostname") && n == 1)
		return cmd_sethostname(a[0]);
	if (!strcmp(c, "kill") && n == 2)
		return cmd_kill(a[0], a[1]);
	if (!strcmp(c, "ptrace") && n == 1)
		return cmd_ptrace(a[0]);
	if (!strcmp(c, "daemon") && n == 1)
		return cmd_daemon(a[0]);
	if (!strcmp(c, "sleep") && (n == 1 || n == 2))
		return cmd_sleep(a[0]);
	if (!strcmp(c, "spew") && n == 1)
		return cmd_spew(a[0]);
	return usage();
}
