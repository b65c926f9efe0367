/* The front's confinement: it parses what clients send, so it holds
 * nothing and may do little (serve-design, item 6). */
#include "serve/api/front.h"

#include <errno.h>
#include <seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/sys.h"
#include "core/util.h"

#define NOBODY 65534 /* as monitor.c gives it */

/* What libmicrohttpd's external epoll loop, jansson and malloc call, and
 * the channel to the monitor (recvmsg with descriptors, sendmsg). Nothing
 * that opens a file, makes a socket, forks, executes or signals. */
static const char *const allowed[] = {
    "read",
    "write",
    "readv",
    "writev",
    "recvfrom",
    "sendto",
    "recvmsg",
    "sendmsg",
    "close",
    "shutdown",
    "epoll_wait",
    "epoll_pwait",
    "epoll_ctl",
    "poll",
    "ppoll",
    "fcntl",
    "setsockopt",
    "getsockopt",
    "getsockname",
    "getpeername",
    "brk",
    "mmap",
    "munmap",
    "mremap",
    "madvise",
    "clock_gettime",
    "gettimeofday",
    "clock_nanosleep",
    "nanosleep",
    "getrandom",
    "futex",
    "exit",
    "exit_group",
    "rt_sigreturn",
    "rt_sigprocmask",
    "getpid",
    "gettid",
    "sched_yield",
    "fstat",
    "newfstatat",
    "lseek",
    "restart_syscall",
    "eventfd2",
    "pipe2",
    "dup",
};

int al_front_confine(bool no_landlock, struct al_error *err)
{
	int abi = al_landlock_abi();

	if (geteuid() == 0 || getegid() == 0)
		return al_error_set(err, EPERM, "front: still root (the monitor gives it uid %d)",
				    NOBODY);
	/* No other process of its uid may read its memory or trace it. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return al_error_setsys(err, errno, "front: prctl");
	if (abi <= 0 && !no_landlock)
		return al_error_set(err, ENOSYS,
				    "front: this kernel has no landlock; airlock serve "
				    "--no-landlock accepts a front without it");
	if (abi > 0) {
		/* Every file access right handled, none granted: no path may
		 * be opened, made or executed. */
		struct al_landlock_attr attr = {.handled_access_fs = al_landlock_fs_all(abi)};
		int rs = al_sys_landlock_create_ruleset(&attr, al_landlock_attr_size(abi), 0);
		if (rs < 0)
			return al_error_setsys(err, errno, "front: landlock ruleset");
		int r = al_sys_landlock_restrict_self(rs, 0);
		close(rs);
		if (r < 0)
			return al_error_setsys(err, errno, "front: landlock");
	}
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_KILL_PROCESS);
	if (!ctx)
		return al_error_set(err, ENOMEM, "front: seccomp_init");
	for (size_t i = 0; i < AL_ARRAY_SIZE(allowed); i++) {
		int nr = seccomp_syscall_resolve_name(allowed[i]);
		if (nr != __NR_SCMP_ERROR && seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0) < 0) {
			seccomp_release(ctx);
			return al_error_set(err, EINVAL, "front: seccomp rule for %s", allowed[i]);
		}
	}
	/* The C library opens files now and then (the time zone for a Date
	 * header): refused as landlock would, not fatal. */
	if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(openat), 0) < 0 ||
	    seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(open), 0) < 0) {
		seccomp_release(ctx);
		return al_error_set(err, EINVAL, "front: seccomp rule for open");
	}
	int r = seccomp_load(ctx);
	seccomp_release(ctx);
	if (r < 0)
		return al_error_setsys(err, -r, "front: seccomp_load");
	return 0;
}
