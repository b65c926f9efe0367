/* The seccomp policy: a default-deny allowlist of the system calls ordinary
 * programs need (Python with numpy and pandas, Node, gcc and make, bash and
 * coreutils, git, curl, the JVM; tests/e2e/run_compat.py runs them). The
 * namespaces, dropped capabilities and landlock are the primary walls;
 * this table takes away the kernel attack surface they leave. One row is
 * {syscall, action, conditions, errno, why}; see plan.h for the actions.
 *
 * What a call gets:
 * - a call an ALLOW row matches runs;
 * - clone3 gets ENOSYS in the kernel, silently (ERRNO row);
 * - a call the table names but does not allow (a DENY row, or arguments no
 *   ALLOW row of the call matches) gets EPERM from the supervisor and an
 *   audit event;
 * - a call the table does not name gets ENOSYS from the supervisor and an
 *   audit event, so that libc and runtimes fall back as on an older kernel.
 *
 * Rules of the table, checked by the compiler (seccomp-compile.c) and by
 * tests/unit/test_seccomp.c:
 * - the rows of one call are adjacent and all of one action;
 * - an ALLOW row has up to three conditions, on distinct arguments, each
 *   (args[arg] & mask) == value with a mask of at most 32 bits: every
 *   filtered parameter is a C int (or read by the kernel as its low 32
 *   bits), so high bits can never dodge a row; never a 64-bit range
 *   compare (TIOCSTI | 1 << 32 would pass "> 0x54ff");
 * - a call allowed unconditionally has one row.
 *
 * How to extend it: docs/security.md, "The seccomp allowlist". */
#include "policy/seccomp.h"

#include <errno.h>
#include <linux/prctl.h>
#include <linux/sched.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <string.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/personality.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "core/cleanup.h"
#include "policy/seccomp-table.h"

/* Newer than the kernel headers of the oldest supported build host. */
#ifndef PR_SET_MDWE
#define PR_SET_MDWE 65
#define PR_GET_MDWE 66
#endif
#ifndef PR_GET_MEMORY_MERGE
#define PR_GET_MEMORY_MERGE 68
#endif
#ifndef PR_GET_AUXV
#define PR_GET_AUXV 0x41555856
#endif
/* The termios2 requests: <asm/ioctls.h> spells them with struct termios2,
 * whose header clashes with glibc's <termios.h>; it is 44 bytes. */
#undef TCGETS2
#undef TCSETS2
#undef TCSETSW2
#undef TCSETSF2
#define TCGETS2	 _IOR('T', 0x2A, char[44])
#define TCSETS2	 _IOW('T', 0x2B, char[44])
#define TCSETSW2 _IOW('T', 0x2C, char[44])
#define TCSETSF2 _IOW('T', 0x2D, char[44])

/* clang-format off */
/* ioctl: any request whose type byte (bits 8-15) is not 'T' (0x54, the
 * terminal group) differs from it in some bit b: one row per bit. */
#define NOT_TTY(b)                                                                                 \
	ALLOW_IF("ioctl", "type byte not 'T' (bit " #b ")",                                  \
		 ARG(1, 1ull << (b), ~0x5400ull & (1ull << (b))))
#define IOCTL(req)     ALLOW_IF("ioctl", #req, ARG(1, M32, req))
#define PRCTL(opt)     ALLOW_IF("prctl", #opt, ARG(0, M32, opt))
#define PERSONALITY(p) ALLOW_IF("personality", #p, ARG(0, M32, p))
/* A call on a process (its first argument): only pid 0, the caller. */
#define SELF(n)        ALLOW_IF(n, "pid 0 (the caller) only", ARG(0, M32, 0))
/* IOPRIO_WHO_PROCESS (<linux/ioprio.h> of newer kernels only). */
#define IOPRIO_WHO_PROC 1
#define SETID	 (S_ISUID | S_ISGID)
#define CREATING (O_CREAT | (O_TMPFILE & ~O_DIRECTORY))
#define NEW_NAMESPACES                                                                             \
	(CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID |                \
	 CLONE_NEWNET | CLONE_NEWCGROUP)

static const struct al_seccomp_rule_info table[] = {
	/* ---- Files: open, read, write ------------------------------------ */
	ALLOW("read"), ALLOW("write"), ALLOW("readv"), ALLOW("writev"), ALLOW("pread64"),
	ALLOW("pwrite64"), ALLOW("preadv"), ALLOW("pwritev"), ALLOW("preadv2"), ALLOW("pwritev2"),
	/* No set-user-ID or set-group-ID file is made anywhere: through a
	 * --rw input the sandbox user acts as the directory's host owner
	 * (possibly root), and such a file would run as that owner on the
	 * host. Creating calls are allowed without the mode bits; openat2
	 * carries its mode in memory seccomp cannot read, and libc does not
	 * need it. */
	ALLOW_IF("open", "without O_CREAT or O_TMPFILE", ARG(1, CREATING, 0)),
	ALLOW_IF("open", "mode without S_ISUID, S_ISGID", ARG(2, SETID, 0)),
	ALLOW_IF("openat", "without O_CREAT or O_TMPFILE", ARG(2, CREATING, 0)),
	ALLOW_IF("openat", "mode without S_ISUID, S_ISGID", ARG(3, SETID, 0)),
	SILENT("openat2", ENOSYS, "its mode is unreadable; libc falls back to openat"),
	ALLOW_IF("creat", "mode without S_ISUID, S_ISGID", ARG(1, SETID, 0)), ALLOW("close"),
	ALLOW("close_range"), ALLOW("lseek"), ALLOW("dup"), ALLOW("dup2"), ALLOW("dup3"),
	ALLOW("fcntl"), ALLOW("flock"), ALLOW("fsync"), ALLOW("fdatasync"), ALLOW("sync"),
	ALLOW("syncfs"), ALLOW("sync_file_range"), ALLOW("truncate"), ALLOW("ftruncate"),
	ALLOW("fallocate"), ALLOW("fadvise64"), ALLOW("readahead"), ALLOW("sendfile"),
	ALLOW("splice"), ALLOW("tee"), ALLOW("vmsplice"), ALLOW("copy_file_range"),
	/* Huge pages come from a host-wide pool that no memory cgroup counts
	 * (here and for mmap and shmget below). */
	ALLOW_IF("memfd_create", "without MFD_HUGETLB", ARG(1, MFD_HUGETLB, 0)),
	ALLOW("pipe"), ALLOW("pipe2"),
	/* ---- Files: names and metadata ------------------------------------ */
	ALLOW("stat"), ALLOW("fstat"), ALLOW("lstat"), ALLOW("newfstatat"), ALLOW("statx"),
	ALLOW("statfs"), ALLOW("fstatfs"), ALLOW("access"), ALLOW("faccessat"),
	ALLOW("faccessat2"), ALLOW("readlink"), ALLOW("readlinkat"), ALLOW("getdents"),
	ALLOW("getdents64"), ALLOW("getcwd"), ALLOW("chdir"), ALLOW("fchdir"), ALLOW("mkdir"),
	ALLOW("mkdirat"), ALLOW("rmdir"), ALLOW("rename"), ALLOW("renameat"), ALLOW("renameat2"),
	ALLOW("link"), ALLOW("linkat"), ALLOW("unlink"), ALLOW("unlinkat"), ALLOW("symlink"),
	ALLOW("symlinkat"),
	ALLOW_IF("chmod", "mode without S_ISUID, S_ISGID", ARG(1, SETID, 0)),
	ALLOW_IF("fchmod", "mode without S_ISUID, S_ISGID", ARG(1, SETID, 0)),
	ALLOW_IF("fchmodat", "mode without S_ISUID, S_ISGID", ARG(2, SETID, 0)),
	ALLOW_IF("fchmodat2", "mode without S_ISUID, S_ISGID", ARG(2, SETID, 0)),
	ALLOW("chown"), ALLOW("fchown"), ALLOW("lchown"), ALLOW("fchownat"),
	ALLOW("umask"), ALLOW("utime"), ALLOW("utimes"), ALLOW("utimensat"), ALLOW("futimesat"),
	/* FIFOs and sockets; device nodes need CAP_MKNOD, and every mount is nodev */
	ALLOW_IF("mknod", "mode without S_ISUID, S_ISGID", ARG(1, SETID, 0)),
	ALLOW_IF("mknodat", "mode without S_ISUID, S_ISGID", ARG(2, SETID, 0)),
	ALLOW("setxattr"), ALLOW("lsetxattr"), ALLOW("fsetxattr"), ALLOW("getxattr"),
	ALLOW("lgetxattr"), ALLOW("fgetxattr"), ALLOW("listxattr"), ALLOW("llistxattr"),
	ALLOW("flistxattr"), ALLOW("removexattr"), ALLOW("lremovexattr"), ALLOW("fremovexattr"),
	ALLOW("inotify_init"), ALLOW("inotify_init1"), ALLOW("inotify_add_watch"),
	ALLOW("inotify_rm_watch"),
	/* ---- Files: ioctl --------------------------------------------------- */
	/* Every request outside the terminal group, then the ordinary terminal
	 * and file requests of that group (tty_ioctl, tty_mode_ioctl, the pty
	 * and the generic file ones). Not: TIOCSTI (typing into a terminal),
	 * TIOCLINUX, TIOCSETD (line disciplines), TIOCCONS, TIOCVHANGUP, the
	 * modem, serial and RS-485 requests. TIOCSCTTY (the command takes its
	 * own pty, or one of its own /dev/pts, as its controlling terminal):
	 * the sandbox never holds a host terminal, and taking one another
	 * session controls (argument 1, as util-linux's script passes) needs
	 * CAP_SYS_ADMIN in the host's user namespace, which no sandbox has. */
	NOT_TTY(8), NOT_TTY(9), NOT_TTY(10), NOT_TTY(11), NOT_TTY(12), NOT_TTY(13), NOT_TTY(14),
	NOT_TTY(15),
	IOCTL(TCGETS), IOCTL(TCSETS), IOCTL(TCSETSW), IOCTL(TCSETSF), IOCTL(TCGETA),
	IOCTL(TCSETA), IOCTL(TCSETAW), IOCTL(TCSETAF), IOCTL(TCGETS2), IOCTL(TCSETS2),
	IOCTL(TCSETSW2), IOCTL(TCSETSF2), IOCTL(TCSBRK), IOCTL(TCSBRKP), IOCTL(TCXONC),
	IOCTL(TCFLSH), IOCTL(TIOCGPGRP), IOCTL(TIOCSPGRP), IOCTL(TIOCGSID), IOCTL(TIOCNOTTY),
	IOCTL(TIOCOUTQ), IOCTL(FIONREAD), IOCTL(TIOCGWINSZ), IOCTL(TIOCSWINSZ),
	IOCTL(TIOCSCTTY),
	IOCTL(TIOCEXCL), IOCTL(TIOCNXCL), IOCTL(TIOCGEXCL), IOCTL(TIOCGETD), IOCTL(TIOCMGET),
	IOCTL(TIOCGSOFTCAR), IOCTL(TIOCGSERIAL), IOCTL(TIOCGLCKTRMIOS), IOCTL(TIOCPKT),
	IOCTL(TIOCGPKT), IOCTL(TIOCGPTN), IOCTL(TIOCSPTLCK), IOCTL(TIOCGPTLCK), IOCTL(TIOCGDEV),
	IOCTL(TIOCGPTPEER), IOCTL(FIONBIO), IOCTL(FIOASYNC), IOCTL(FIOCLEX), IOCTL(FIONCLEX),
	IOCTL(FIOQSIZE),
	/* ---- Memory ----------------------------------------------------------- */
	ALLOW("brk"), ALLOW_IF("mmap", "without MAP_HUGETLB", ARG(3, MAP_HUGETLB, 0)),
	ALLOW("munmap"), ALLOW("mremap"), ALLOW("mprotect"),
	ALLOW("madvise"), ALLOW("msync"), ALLOW("mincore"), ALLOW("remap_file_pages"),
	ALLOW("mlock"), ALLOW("mlock2"), ALLOW("munlock"), ALLOW("mlockall"), ALLOW("munlockall"),
	ALLOW("membarrier"), ALLOW("pkey_alloc"), ALLOW("pkey_free"), ALLOW("pkey_mprotect"),
	ALLOW("mbind"), ALLOW("get_mempolicy"), ALLOW("set_mempolicy"),
	ALLOW("set_mempolicy_home_node"), ALLOW("map_shadow_stack"), ALLOW("cachestat"),
	/* ---- Processes and threads ------------------------------------------ */
	ALLOW("fork"), ALLOW("vfork"),
	ALLOW_IF("clone", "no CLONE_NEW* flag", ARG(0, NEW_NAMESPACES, 0)),
	/* clone3 passes its flags in memory that seccomp cannot read; glibc
	 * calls it for every thread and fork and falls back to clone, whose
	 * flags are checked above. */
	SILENT("clone3", ENOSYS, "flags unreadable; libc falls back to clone"),
	ALLOW("execve"), ALLOW("execveat"), ALLOW("exit"), ALLOW("exit_group"), ALLOW("wait4"),
	ALLOW("waitid"), ALLOW("kill"), ALLOW("tkill"), ALLOW("tgkill"), ALLOW("pidfd_open"),
	ALLOW("pidfd_send_signal"), ALLOW("getpid"), ALLOW("getppid"), ALLOW("gettid"),
	ALLOW("getpgid"), ALLOW("setpgid"), ALLOW("getpgrp"), ALLOW("getsid"), ALLOW("setsid"),
	ALLOW("set_tid_address"), ALLOW("set_robust_list"), ALLOW("get_robust_list"),
	ALLOW("futex"), ALLOW("futex_waitv"), ALLOW("futex_wake"), ALLOW("futex_wait"),
	ALLOW("futex_requeue"), ALLOW("rseq"), ALLOW("arch_prctl"), ALLOW("getrusage"),
	ALLOW("times"), ALLOW("getrlimit"), ALLOW("setrlimit"),
	/* Limits, priorities and scheduling only of the caller itself (pid
	 * 0, as libc's setrlimit, nice, taskset CMD and ionice CMD pass):
	 * another process's would change a session's init, and so every
	 * later exec (RLIMIT_NPROC 0: none starts again), or another exec.
	 * prlimit64 reading another's limit (new limit NULL) would need a
	 * 64-bit compare; /proc/PID/limits tells the same. */
	SELF("prlimit64"), SELF("sched_setaffinity"), SELF("sched_setparam"),
	SELF("sched_setscheduler"), SELF("sched_setattr"),
	ALLOW_IF("setpriority", "PRIO_PROCESS of the caller (who 0)",
		 ARG(0, M32, PRIO_PROCESS), ARG(1, M32, 0)),
	ALLOW_IF("ioprio_set", "IOPRIO_WHO_PROCESS of the caller (who 0)",
		 ARG(0, M32, IOPRIO_WHO_PROC), ARG(1, M32, 0)),
	ALLOW("getpriority"), ALLOW("ioprio_get"), ALLOW("sched_yield"),
	ALLOW("sched_getaffinity"), ALLOW("sched_getparam"), ALLOW("sched_getscheduler"),
	ALLOW("sched_get_priority_max"), ALLOW("sched_get_priority_min"),
	ALLOW("sched_rr_get_interval"), ALLOW("sched_getattr"), ALLOW("getcpu"),
	ALLOW("uname"), ALLOW("sysinfo"),
	ALLOW("restart_syscall"),
	/* Only ever restrict further. */
	ALLOW("seccomp"), ALLOW("landlock_create_ruleset"), ALLOW("landlock_add_rule"),
	ALLOW("landlock_restrict_self"), ALLOW("capget"), ALLOW("capset"),
	/* prctl: the options that read or narrow the caller's own state. Not:
	 * PR_SET_MM, PR_SET_PTRACER, PR_SET_SYSCALL_USER_DISPATCH,
	 * PR_SCHED_CORE, PR_SET_MEMORY_MERGE, PR_SET_IO_FLUSHER,
	 * PR_SET_SECUREBITS and the rest. */
	PRCTL(PR_SET_PDEATHSIG), PRCTL(PR_GET_PDEATHSIG), PRCTL(PR_GET_DUMPABLE),
	PRCTL(PR_SET_DUMPABLE), PRCTL(PR_GET_KEEPCAPS), PRCTL(PR_SET_KEEPCAPS),
	PRCTL(PR_SET_NAME), PRCTL(PR_GET_NAME), PRCTL(PR_GET_SECCOMP), PRCTL(PR_SET_SECCOMP),
	PRCTL(PR_CAPBSET_READ), PRCTL(PR_CAPBSET_DROP), PRCTL(PR_GET_SECUREBITS),
	PRCTL(PR_SET_TIMERSLACK), PRCTL(PR_GET_TIMERSLACK), PRCTL(PR_TASK_PERF_EVENTS_DISABLE),
	PRCTL(PR_TASK_PERF_EVENTS_ENABLE), PRCTL(PR_MCE_KILL), PRCTL(PR_MCE_KILL_GET),
	PRCTL(PR_SET_CHILD_SUBREAPER), PRCTL(PR_GET_CHILD_SUBREAPER), PRCTL(PR_SET_NO_NEW_PRIVS),
	PRCTL(PR_GET_NO_NEW_PRIVS), PRCTL(PR_GET_TID_ADDRESS), PRCTL(PR_SET_THP_DISABLE),
	PRCTL(PR_GET_THP_DISABLE), PRCTL(PR_CAP_AMBIENT), PRCTL(PR_GET_SPECULATION_CTRL),
	PRCTL(PR_SET_SPECULATION_CTRL), PRCTL(PR_SET_MDWE), PRCTL(PR_GET_MDWE),
	PRCTL(PR_GET_MEMORY_MERGE), PRCTL(PR_SET_VMA), PRCTL(PR_GET_AUXV),
	/* personality: Linux and its 32-bit and uname-2.6 flavours, and the
	 * query; not ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC and the like. */
	PERSONALITY(PER_LINUX), PERSONALITY(PER_LINUX32), PERSONALITY(UNAME26),
	PERSONALITY(UNAME26 | PER_LINUX32),
	ALLOW_IF("personality", "0xffffffff (query)", ARG(0, M32, 0xffffffff)),
	/* ---- Identity: without capabilities these only switch among the ids
	 * the process already has ---------------------------------------------- */
	ALLOW("getuid"), ALLOW("geteuid"), ALLOW("getgid"), ALLOW("getegid"), ALLOW("getresuid"),
	ALLOW("getresgid"), ALLOW("getgroups"), ALLOW("setuid"), ALLOW("setgid"),
	ALLOW("setreuid"), ALLOW("setregid"), ALLOW("setresuid"), ALLOW("setresgid"),
	ALLOW("setfsuid"), ALLOW("setfsgid"), ALLOW("setgroups"),
	/* ---- Signals ----------------------------------------------------------- */
	ALLOW("rt_sigaction"), ALLOW("rt_sigprocmask"), ALLOW("rt_sigreturn"),
	ALLOW("rt_sigpending"), ALLOW("rt_sigsuspend"), ALLOW("rt_sigtimedwait"),
	ALLOW("rt_sigqueueinfo"), ALLOW("rt_tgsigqueueinfo"), ALLOW("sigaltstack"),
	ALLOW("signalfd"), ALLOW("signalfd4"), ALLOW("pause"), ALLOW("alarm"),
	/* ---- Time and timers ------------------------------------------------- */
	ALLOW("nanosleep"), ALLOW("clock_nanosleep"), ALLOW("clock_gettime"),
	ALLOW("clock_getres"), ALLOW("gettimeofday"), ALLOW("time"), ALLOW("getitimer"),
	ALLOW("setitimer"), ALLOW("timer_create"), ALLOW("timer_settime"),
	ALLOW("timer_gettime"), ALLOW("timer_getoverrun"), ALLOW("timer_delete"),
	ALLOW("timerfd_create"), ALLOW("timerfd_settime"), ALLOW("timerfd_gettime"),
	/* ---- Waiting on fds -------------------------------------------------- */
	ALLOW("poll"), ALLOW("ppoll"), ALLOW("select"), ALLOW("pselect6"), ALLOW("epoll_create"),
	ALLOW("epoll_create1"), ALLOW("epoll_ctl"), ALLOW("epoll_wait"), ALLOW("epoll_pwait"),
	ALLOW("epoll_pwait2"), ALLOW("eventfd"), ALLOW("eventfd2"),
	/* ---- Sockets ------------------------------------------------------------ */
	/* UNIX of any type; INET and INET6 only as TCP, UDP or ICMP ping
	 * sockets. Not: raw and packet sockets, netlink, MPTCP, SCTP, DCCP,
	 * UDP-Lite, SEQPACKET on INET, any other family. */
	ALLOW_IF("socket", "AF_UNIX, any type", ARG(0, M32, AF_UNIX)),
	SOCKET(AF_INET, SOCK_STREAM, 0), SOCKET(AF_INET, SOCK_STREAM, IPPROTO_TCP),
	SOCKET(AF_INET, SOCK_DGRAM, 0), SOCKET(AF_INET, SOCK_DGRAM, IPPROTO_UDP),
	SOCKET(AF_INET, SOCK_DGRAM, IPPROTO_ICMP),
	SOCKET(AF_INET6, SOCK_STREAM, 0), SOCKET(AF_INET6, SOCK_STREAM, IPPROTO_TCP),
	SOCKET(AF_INET6, SOCK_DGRAM, 0), SOCKET(AF_INET6, SOCK_DGRAM, IPPROTO_UDP),
	SOCKET(AF_INET6, SOCK_DGRAM, IPPROTO_ICMPV6),
	/* socketpair creates its sockets with the family's own create
	 * (module autoload included) before asking for a pair: UNIX only. */
	ALLOW_IF("socketpair", "AF_UNIX", ARG(0, M32, AF_UNIX)),
	ALLOW("bind"), ALLOW("listen"), ALLOW("accept"), ALLOW("accept4"),
	ALLOW("connect"), ALLOW("shutdown"), ALLOW("getsockname"), ALLOW("getpeername"),
	ALLOW("getsockopt"), ALLOW("setsockopt"), ALLOW("sendto"), ALLOW("recvfrom"),
	ALLOW("sendmsg"), ALLOW("recvmsg"), ALLOW("sendmmsg"), ALLOW("recvmmsg"),
	/* ---- IPC (the sandbox's own IPC namespace) ------------------------- */
	ALLOW_IF("shmget", "without SHM_HUGETLB", ARG(2, SHM_HUGETLB, 0)), ALLOW("shmat"),
	ALLOW("shmdt"), ALLOW("shmctl"), ALLOW("semget"),
	ALLOW("semop"), ALLOW("semtimedop"), ALLOW("semctl"), ALLOW("msgget"), ALLOW("msgsnd"),
	ALLOW("msgrcv"), ALLOW("msgctl"), ALLOW("mq_open"), ALLOW("mq_unlink"),
	ALLOW("mq_timedsend"), ALLOW("mq_timedreceive"), ALLOW("mq_notify"),
	ALLOW("mq_getsetattr"),
	/* ---- Randomness ------------------------------------------------------ */
	ALLOW("getrandom"),

	/* ==== Named denials: EPERM, audited ================================= */
	/* Mount table and root changes. */
	DENY("mount", "mount table"), DENY("umount2", "mount table"),
	DENY("move_mount", "mount table"), DENY("open_tree", "mount table"),
	DENY("fsopen", "mount table"), DENY("fsconfig", "mount table"),
	DENY("fsmount", "mount table"), DENY("fspick", "mount table"),
	DENY("mount_setattr", "mount table"), DENY("pivot_root", "root change"),
	DENY("chroot", "root change"),
	/* New namespaces (clone's flags are checked above). */
	DENY("setns", "namespaces"), DENY("unshare", "namespaces"),
	/* Kernel attack surface. */
	DENY("bpf", "kernel attack surface"), DENY("perf_event_open", "kernel attack surface"),
	DENY("io_uring_setup", "kernel attack surface"),
	DENY("io_uring_enter", "kernel attack surface"),
	DENY("io_uring_register", "kernel attack surface"),
	DENY("userfaultfd", "stalls kernel page faults, an exploit aid"),
	DENY("keyctl", "kernel keyrings"), DENY("add_key", "kernel keyrings"),
	DENY("request_key", "kernel keyrings"),
	DENY("modify_ldt", "x86 LDT, an exploit aid"), DENY("vm86", "x86 vm86 mode"),
	DENY("vm86old", "x86 vm86 mode"),
	/* Asynchronous I/O: aio-max-nr is one budget for the whole host. */
	DENY("io_setup", "AIO: host-wide aio-max-nr"), DENY("io_destroy", "AIO: host-wide aio-max-nr"),
	DENY("io_submit", "AIO: host-wide aio-max-nr"), DENY("io_cancel", "AIO: host-wide aio-max-nr"),
	DENY("io_getevents", "AIO: host-wide aio-max-nr"),
	DENY("io_pgetevents", "AIO: host-wide aio-max-nr"),
	/* Other processes' memory, and memory the kernel hides. */
	DENY("ptrace", "other processes"), DENY("process_vm_readv", "other processes"),
	DENY("process_vm_writev", "other processes"), DENY("kcmp", "other processes"),
	DENY("pidfd_getfd", "other processes"), DENY("process_madvise", "other processes"),
	DENY("process_mrelease", "other processes"), DENY("migrate_pages", "other processes"),
	DENY("move_pages", "other processes"), DENY("memfd_secret", "memory hidden from the kernel"),
	/* Whole-machine operations. */
	DENY("kexec_load", "machine"), DENY("kexec_file_load", "machine"),
	DENY("reboot", "machine"), DENY("swapon", "machine"), DENY("swapoff", "machine"),
	DENY("acct", "machine"), DENY("lookup_dcookie", "machine"),
	DENY("init_module", "kernel modules"), DENY("finit_module", "kernel modules"),
	DENY("delete_module", "kernel modules"), DENY("create_module", "kernel modules"),
	DENY("query_module", "kernel modules"), DENY("get_kernel_syms", "kernel modules"),
	DENY("settimeofday", "clock"), DENY("clock_settime", "clock"),
	DENY("clock_adjtime", "clock"), DENY("adjtimex", "clock"),
	DENY("syslog", "kernel log"), DENY("quotactl", "quotas"), DENY("quotactl_fd", "quotas"),
	DENY("vhangup", "terminals"),
	DENY("iopl", "I/O ports"), DENY("ioperm", "I/O ports"), DENY("uselib", "obsolete"),
	DENY("nfsservctl", "obsolete"), DENY("_sysctl", "obsolete"), DENY("sysfs", "obsolete"),
	DENY("ustat", "obsolete"), DENY("sethostname", "host names"),
	DENY("setdomainname", "host names"),
	DENY("fanotify_init", "filesystem-wide watches"),
	DENY("fanotify_mark", "filesystem-wide watches"),
	/* File handles bypass path-based checks. */
	DENY("open_by_handle_at", "file handles"), DENY("name_to_handle_at", "file handles"),
};
/* clang-format on */

const struct al_seccomp_rule_info *al_seccomp_table(size_t *ret_n)
{
	*ret_n = AL_ARRAY_SIZE(table);
	return table;
}

void al_seccomp_summarize(const struct al_seccomp_rule_info *rules, size_t n,
			  struct al_seccomp_summary *ret)
{
	struct al_seccomp_summary s = {0};

	for (size_t i = 0; i < n; i++) {
		const struct al_seccomp_rule_info *r = &rules[i];
		bool first = i == 0 || strcmp(rules[i - 1].syscall, r->syscall) != 0;
		if (!first)
			continue;
		switch (r->action) {
		case AL_SECCOMP_ALLOW:
			s.allowed++;
			if (r->n_conds > 0)
				s.filtered++;
			break;
		case AL_SECCOMP_ERRNO:
			s.silent++;
			break;
		case AL_SECCOMP_DENY:
			s.denied++;
			break;
		}
	}
	*ret = s;
}
