/* The transparent capture: the nftables ruleset of the sandbox's network
 * namespace, installed by a short-lived helper while the child sets up. */
#include "backend/native/capture.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/log.h"
#include "net/layout.h"
#include "core/sys.h"

/* The nat table makes the kernel track every connection in the sandbox's
 * network namespace, in memory no cgroup is charged for: raw_out takes
 * loopback traffic out of tracking (all but the transparent listener's
 * replies, which the redirect needs to translate back), ct_out gives the
 * redirected connections short timeouts once they are closing or never
 * answered (half-closed ones keep the kernel's: a server may still be
 * answering), and nat_out takes at most 5,000 new redirected connections a
 * second: at most about 25,000 entries (6 MB) linger (docs/security.md,
 * "Kernel memory"). */
const char al_gateway_nft_rules[] =
    "table ip airlock {\n"
    "  ct timeout closing {\n"
    "    protocol tcp;\n"
    "    l3proto ip;\n"
    "    policy = { syn_sent : 5, syn_recv : 5, last_ack : 2, time_wait : 1, close : 1 }\n"
    "  }\n"
    "  chain raw_out {\n"
    "    type filter hook output priority -300; policy accept;\n"
    "    ip daddr 127.0.0.0/8 meta l4proto != tcp notrack\n"
    "    ip daddr 127.0.0.0/8 ip saddr != 127.0.0.1 notrack\n"
    "    ip daddr 127.0.0.0/8 tcp sport != " AL_PORT_STR(
	AL_GATEWAY_TRANSPARENT_PORT) " notrack\n"
				     "  }\n"
				     "  chain ct_out {\n"
				     "    type filter hook output priority -150; policy accept;\n"
				     "    meta l4proto tcp ct timeout set \"closing\"\n"
				     "  }\n"
				     "  chain nat_out {\n"
				     "    type nat hook output priority -100; policy accept;\n"
				     "    ip daddr != 127.0.0.0/8 meta l4proto tcp limit rate over "
				     "5000/second burst 1000 "
				     "packets drop\n"
				     "    ip daddr != 127.0.0.0/8 meta l4proto tcp redirect to "
				     ":" AL_PORT_STR(
					 AL_GATEWAY_TRANSPARENT_PORT) "\n"
								      "  }\n"
								      "  chain filter_out {\n"
								      "    type filter hook output "
								      "priority 0; policy accept;\n"
								      "    ip daddr != 127.0.0.0/8 "
								      "drop\n"
								      "  }\n"
								      "}\n"
								      "table ip6 airlock {\n"
								      "  chain filter_out {\n"
								      "    type filter hook output "
								      "priority 0; policy accept;\n"
								      "    ip6 daddr != ::1 drop\n"
								      "  }\n"
								      "}\n";

static _Noreturn void rules_helper(pid_t pid, bool rootless, int in, int errfd)
{
	char path[64];
	int fd;

	/* Rootless, the user namespace first: it gives the capabilities the
	 * network namespace asks for. */
	if (rootless) {
		snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0 || setns(fd, CLONE_NEWUSER) < 0)
			_exit(90);
	}
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0 || setns(fd, CLONE_NEWNET) < 0)
		_exit(91);
	if (dup2(in, 0) < 0 || dup2(errfd, 2) < 0)
		_exit(92);
	if (rootless) {
		/* Our uid in that namespace is not 0, so execve would drop the
		 * capabilities setns gave us: carry CAP_NET_ADMIN across as an
		 * ambient capability (inheritable first). */
		struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
		struct __user_cap_data_struct data[2];
		if (syscall(SYS_capget, &hdr, data) < 0)
			_exit(95);
		data[CAP_TO_INDEX(CAP_NET_ADMIN)].inheritable |= CAP_TO_MASK(CAP_NET_ADMIN);
		if (syscall(SYS_capset, &hdr, data) < 0 ||
		    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_NET_ADMIN, 0, 0) < 0)
			_exit(95);
	}
	char *const argv[] = {(char *)"nft", (char *)"-f", (char *)"-", NULL};
	char *const envp[] = {(char *)"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
	execve("/usr/sbin/nft", argv, envp);
	_exit(errno == ENOENT ? 93 : 94);
}

pid_t al_gateway_rules_start(pid_t pid, bool rootless, int *ret_errfd, struct al_error *err)
{
	int p[2], e[2];
	pid_t helper;

	if (pipe2(p, O_CLOEXEC) < 0)
		return al_error_setsys(err, errno, "gateway: pipe");
	if (pipe2(e, O_CLOEXEC) < 0) {
		close(p[0]);
		close(p[1]);
		return al_error_setsys(err, errno, "gateway: pipe");
	}
	/* vfork: the helper only enters namespaces, moves fds, sets its own
	 * capabilities and execs; sharing our memory until then is safe. */
	helper = vfork();
	if (helper < 0) {
		int x = errno;
		close(p[0]);
		close(p[1]);
		close(e[0]);
		close(e[1]);
		return al_error_setsys(err, x, "gateway: fork of the rules helper");
	}
	if (helper == 0)
		rules_helper(pid, rootless, p[0], e[1]);
	close(p[0]);
	close(e[1]);
	/* The ruleset is far below a pipe's capacity: this does not block. */
	if (al_write_all(p[1], al_gateway_nft_rules, strlen(al_gateway_nft_rules)) < 0)
		al_debug("gateway: writing the rules: %s", strerror(errno));
	close(p[1]);
	*ret_errfd = e[0];
	return helper;
}

int al_gateway_rules_wait(pid_t helper, int errfd, struct al_error *err)
{
	char said[256] = "";
	int status = 0;

	/* nft's complaint, if any, goes into our one-line error. */
	ssize_t got = read(errfd, said, sizeof(said) - 1);
	said[got > 0 ? got : 0] = '\0';
	said[strcspn(said, "\n")] = '\0';
	close(errfd);
	while (waitpid(helper, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 93)
		return al_error_set(
		    err, ENOENT,
		    "gateway: /usr/sbin/nft not found (Debian package nftables); the "
		    "transparent capture cannot be installed");
	if (WIFEXITED(status) && (WEXITSTATUS(status) == 90 || WEXITSTATUS(status) == 91))
		return al_error_set(
		    err, EPERM,
		    "gateway: cannot enter the sandbox's network namespace to install "
		    "the transparent capture");
	return al_error_set(err, EIO,
			    "gateway: nft failed to install the transparent-capture rules (status "
			    "%d%s%s)",
			    WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status),
			    said[0] ? ": " : "", said);
}
