/* Denylist seccomp policy. The default action is ALLOW: the namespaces,
 * dropped capabilities and landlock are the primary walls; this table takes
 * away the kernel attack surface an unprivileged process has no business
 * touching. Each row is {syscall, argument condition, errno}.
 *
 * Argument compares that stand for C `int` parameters use a 32-bit mask:
 * the kernel ignores the upper half of the register, so an unmasked compare
 * could be dodged by setting high bits (the ioctl(TIOCSTI) hole bubblewrap
 * once had). */
#include "policy/seccomp.h"

#include <errno.h>
#include <linux/sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "core/cleanup.h"

#define DENY(n, why)                                                                               \
	{                                                                                          \
		n, AL_SECCOMP_ALWAYS, 0, 0, 0, EPERM, why, true                                    \
	}
#define DENY_IF(n, a, m, v, why)                                                                   \
	{                                                                                          \
		n, AL_SECCOMP_ARG_MASKED_EQ, a, m, v, EPERM, why, true                             \
	}
#define NS_FLAG(flag) DENY_IF("clone", 0, flag, flag, "clone(" #flag ")")

/* clang-format off */
static const struct al_seccomp_rule_info table[] = {
	/* Mount table and root changes. */
	DENY("mount", NULL), DENY("umount2", NULL), DENY("pivot_root", NULL), DENY("chroot", NULL),
	DENY("move_mount", NULL), DENY("open_tree", NULL), DENY("fsopen", NULL),
	DENY("fsconfig", NULL), DENY("fsmount", NULL), DENY("fspick", NULL),
	DENY("mount_setattr", NULL),
	/* New namespaces. clone3 passes its flags in memory that seccomp cannot
	 * read, so it answers ENOSYS and libc falls back to clone(), whose
	 * flags are checked below. */
	DENY("setns", NULL),
	DENY("unshare", NULL),
	{"clone3", AL_SECCOMP_ALWAYS, 0, 0, 0, ENOSYS, "flags unreadable; libc falls back to clone", false},
	NS_FLAG(CLONE_NEWNS), NS_FLAG(CLONE_NEWUTS), NS_FLAG(CLONE_NEWIPC), NS_FLAG(CLONE_NEWUSER),
	NS_FLAG(CLONE_NEWPID), NS_FLAG(CLONE_NEWNET), NS_FLAG(CLONE_NEWCGROUP),
	/* Kernel attack surface. */
	DENY("bpf", NULL), DENY("perf_event_open", NULL), DENY("userfaultfd", NULL),
	DENY("io_uring_setup", NULL), DENY("io_uring_enter", NULL), DENY("io_uring_register", NULL),
	DENY("keyctl", NULL), DENY("add_key", NULL), DENY("request_key", NULL),
	/* Other processes' memory. */
	DENY("ptrace", NULL), DENY("process_vm_readv", NULL), DENY("process_vm_writev", NULL),
	DENY("kcmp", NULL), DENY("pidfd_getfd", NULL),
	/* Whole-machine operations. */
	DENY("kexec_load", NULL), DENY("kexec_file_load", NULL), DENY("init_module", NULL),
	DENY("finit_module", NULL), DENY("delete_module", NULL), DENY("reboot", NULL),
	DENY("swapon", NULL), DENY("swapoff", NULL), DENY("acct", NULL),
	DENY("settimeofday", NULL), DENY("clock_settime", NULL), DENY("clock_adjtime", NULL),
	DENY("adjtimex", NULL), DENY("syslog", NULL), DENY("quotactl", NULL),
	DENY("quotactl_fd", NULL), DENY("lookup_dcookie", NULL), DENY("vhangup", NULL),
	DENY("iopl", NULL), DENY("ioperm", NULL), DENY("uselib", NULL), DENY("nfsservctl", NULL),
	DENY("fanotify_init", NULL),
	/* File handles bypass path-based checks. */
	DENY("open_by_handle_at", NULL), DENY("name_to_handle_at", NULL),
	/* Terminal injection. */
	DENY_IF("ioctl", 1, 0xffffffffu, TIOCSTI, "ioctl(TIOCSTI)"),
	DENY_IF("ioctl", 1, 0xffffffffu, TIOCLINUX, "ioctl(TIOCLINUX)"),
	/* Sockets: only UNIX, INET and INET6; no raw or packet sockets. */
	DENY_IF("socket", 0, 0xffffffffu, AF_UNSPEC, "socket(AF_UNSPEC)"),
	DENY_IF("socket", 0, 0xffffffffu, 3, "socket(AF_AX25)"),
	DENY_IF("socket", 0, 0xffffffffu, 4, "socket(AF_IPX)"),
	DENY_IF("socket", 0, 0xffffffffu, 5, "socket(AF_APPLETALK)"),
	DENY_IF("socket", 0, 0xffffffffu, 6, "socket(AF_NETROM)"),
	DENY_IF("socket", 0, 0xffffffffu, 7, "socket(AF_BRIDGE)"),
	DENY_IF("socket", 0, 0xffffffffu, 8, "socket(AF_ATMPVC)"),
	DENY_IF("socket", 0, 0xffffffffu, 9, "socket(AF_X25)"),
	DENY_IF("socket", 0, 0xffffffffu, 11, "socket(AF_DECnet)"),
	DENY_IF("socket", 0, 0xffffffffu, 12, "socket(AF_NETBEUI)"),
	DENY_IF("socket", 0, 0xffffffffu, 13, "socket(AF_SECURITY)"),
	DENY_IF("socket", 0, 0xffffffffu, 14, "socket(AF_KEY)"),
	DENY_IF("socket", 0, 0xffffffffu, 15, "socket(15)"),
	{"socket", AL_SECCOMP_ARG_GT, 0, 0, 15, EPERM, "socket(family >= AF_NETLINK)", true},
	DENY_IF("socket", 1, 0xf, SOCK_RAW, "socket(SOCK_RAW)"),
	DENY_IF("socket", 1, 0xf, SOCK_PACKET, "socket(SOCK_PACKET)"),
};
/* clang-format on */

const struct al_seccomp_rule_info *al_seccomp_table(size_t *ret_n)
{
	*ret_n = AL_ARRAY_SIZE(table);
	return table;
}
