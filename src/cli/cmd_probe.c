/* The probe that `airlock verify` runs inside the sandbox: it attacks each
 * layer the way hostile code would and reports what happened. Its only
 * output is table rows; it changes nothing it is allowed to keep. */
#include "cli.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#include "core/sys.h"
#include "policy/plan.h"

static int failures;

static void row(const char *layer, bool ok, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void row(const char *layer, bool ok, const char *fmt, ...)
{
	char detail[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	printf("%-16s %-15s %s\n", layer, ok ? "in force" : "NOT IN FORCE", detail);
	failures += !ok;
}

/* errno of a call that must fail, or 0 if it succeeded. */
#define ERRNO_OF(call) ((call) < 0 ? errno : 0)

static const char *ename(int e)
{
	return e ? strerrorname_np(e) : "succeeded";
}

static void probe_filesystem(void)
{
	int e1 = ERRNO_OF(mkdir("/airlock-probe", 0700));
	int e2 = ERRNO_OF(open("/usr/airlock-probe", O_WRONLY | O_CREAT | O_EXCL, 0600));
	row("read-only root", e1 == EROFS && e2 == EROFS, "mkdir / -> %s, create in /usr -> %s",
	    ename(e1), ename(e2));
	int e3 = ERRNO_OF(access("/etc/shadow", F_OK));
	int e4 = ERRNO_OF(access("/root", F_OK));
	int e5 = ERRNO_OF(access("/home", F_OK));
	row("host files", e3 == ENOENT && e4 == ENOENT && e5 == ENOENT,
	    "/etc/shadow -> %s, /root -> %s, /home -> %s", ename(e3), ename(e4), ename(e5));
	/* Writable by its owner (us) as far as file modes go; only landlock
	 * (read-only rights on /proc) refuses it. */
	int fd = open("/proc/self/oom_score_adj", O_WRONLY);
	int e6 = fd < 0 ? errno : 0;
	if (fd >= 0)
		close(fd);
	row("landlock", e6 == EACCES, "open /proc/self/oom_score_adj for writing -> %s", ename(e6));
	char path[] = "/tmp/airlock-probe-XXXXXX";
	int t = mkstemp(path);
	row("scratch", t >= 0, "create in /tmp -> %s", ename(t < 0 ? errno : 0));
	if (t >= 0) {
		close(t);
		unlink(path);
	}
}

static void probe_kernel(void)
{
	int m = ERRNO_OF(mount("none", "/tmp", "tmpfs", 0, NULL));
	int u = ERRNO_OF(unshare(CLONE_NEWUSER));
	int s = ERRNO_OF(socket(AF_PACKET, SOCK_RAW, 0));
	int k = ERRNO_OF((int)syscall(SYS_keyctl, 0, 0, 0, 0, 0));
	row("seccomp", m == EPERM && u == EPERM && s == EPERM && k == EPERM,
	    "mount -> %s, unshare(NEWUSER) -> %s, socket(AF_PACKET) -> %s, keyctl -> %s", ename(m),
	    ename(u), ename(s), ename(k));

	/* The allowlist: a protocol no row allows, a named denial, and a call
	 * every x86_64 kernel has but the table does not name (with a bad
	 * pointer, so the kernel itself would answer EFAULT). */
	int mp = ERRNO_OF(socket(AF_INET, SOCK_STREAM, IPPROTO_MPTCP));
	int ldt = ERRNO_OF((int)syscall(SYS_modify_ldt, 0, (void *)1, 16));
	int tls = ERRNO_OF((int)syscall(SYS_set_thread_area, (void *)1));
	row("allowlist", mp == EPERM && ldt == EPERM && tls == ENOSYS,
	    "socket(MPTCP) -> %s, modify_ldt -> %s, set_thread_area (not listed) -> %s", ename(mp),
	    ename(ldt), ename(tls));
}

static void probe_privileges(void)
{
	struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2] = {{0}};
	bool caps = syscall(SYS_capget, &hdr, d) == 0 && !d[0].effective && !d[0].permitted &&
		    !d[0].inheritable && !d[1].effective && !d[1].permitted && !d[1].inheritable;
	row("capabilities", caps, "%s",
	    caps ? "none effective, permitted or inheritable" : "some capability is held");
	int nnp = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0);
	row("no_new_privs", nnp == 1, "PR_GET_NO_NEW_PRIVS = %d", nnp);
	row("identity",
	    getuid() == AL_SANDBOX_UID && geteuid() == AL_SANDBOX_UID && getgid() == AL_SANDBOX_GID,
	    "uid %u, gid %u", getuid(), getgid());
	struct rlimit core;
	getrlimit(RLIMIT_CORE, &core);
	row("rlimits", core.rlim_cur == 0 && core.rlim_max == 0, "core dumps %s",
	    core.rlim_max == 0 ? "off" : "possible");
}

/* The user namespace's own limits, from inside: readable, not raisable,
 * and in force (an inotify instance past the limit is refused). */
static void probe_userns(void)
{
	char v[32] = "";
	long max_ns = -1, max_in = -1;
	int w, we = 0, n = 0, past = 0;
	int fds[1024];

	if (al_read_file("/proc/sys/user/max_user_namespaces", v, sizeof(v)) > 0)
		max_ns = strtol(v, NULL, 10);
	if (al_read_file("/proc/sys/user/max_inotify_instances", v, sizeof(v)) > 0)
		max_in = strtol(v, NULL, 10);
	w = open("/proc/sys/user/max_user_namespaces", O_WRONLY | O_CLOEXEC);
	we = w < 0 ? errno : 0;
	if (w >= 0)
		close(w);
	/* Only a limit below the open-files limit can be reached here. */
	while (max_in >= 0 && max_in < 1000 && n < (int)max_in + 1 && n < 1024) {
		int fd = inotify_init1(IN_CLOEXEC);
		if (fd < 0) {
			past = errno;
			break;
		}
		fds[n++] = fd;
	}
	for (int i = 0; i < n; i++)
		close(fds[i]);
	bool ok = max_ns == 0 && we != 0 && max_in > 0 && (max_in >= 1000 || past == EMFILE);
	row("userns limits", ok,
	    "max_user_namespaces %ld (opening it to write -> %s), inotify instance %d of %ld -> %s",
	    max_ns, ename(we), n + 1, max_in, ename(past));
}

static void probe_network(void)
{
	/* /proc/net/dev rather than if_nameindex(): that asks netlink, which
	 * seccomp refuses. */
	FILE *f = fopen("/proc/self/net/dev", "re");
	char line[512];
	int n = 0, lineno = 0;
	bool only_lo = f != NULL;

	while (f && fgets(line, sizeof(line), f)) {
		if (++lineno <= 2)
			continue; /* headers */
		char *name = line + strspn(line, " ");
		n++;
		if (strncmp(name, "lo:", 3) != 0)
			only_lo = false;
	}
	if (f)
		fclose(f);
	row("network", only_lo && n == 1, "%d interface%s%s", n, n == 1 ? "" : "s",
	    only_lo ? ", loopback only" : " besides lo, or none readable");
}

/* With --allow rules: a TCP connection to an address outside (TEST-NET-1,
 * which is routed nowhere; with or without the rule, no packet leaves the
 * sandbox's own namespace, which has only lo) must be taken by the
 * gateway's transparent capture, and a request naming a host no rule
 * allows must then be cut. Without the capture rule the connect fails or
 * times out. */
static void probe_gateway(void)
{
	static const char req[] = "GET / HTTP/1.1\r\nHost: airlock-verify.invalid\r\n\r\n";
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(80)};
	struct timeval tv = {.tv_sec = 3};
	char buf[256];
	int s, ec, er = 0;
	ssize_t n = -1;

	if (!getenv("HTTP_PROXY"))
		return; /* no gateway: the network row says loopback only */
	inet_pton(AF_INET, "192.0.2.1", &a.sin_addr);
	s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	ec = ERRNO_OF(connect(s, (struct sockaddr *)&a, sizeof(a)));
	if (ec == 0 && send(s, req, sizeof(req) - 1, MSG_NOSIGNAL) == (ssize_t)sizeof(req) - 1) {
		n = recv(s, buf, sizeof(buf), 0);
		er = n < 0 ? errno : 0;
	}
	close(s);
	bool cut = n == 0 || er == ECONNRESET;
	row("egress capture", ec == 0 && cut,
	    "TCP to 192.0.2.1:80 -> %s; then a Host no rule allows -> %s", ename(ec),
	    ec	     ? "not tried"
	    : n > 0  ? "answered"
	    : n == 0 ? "closed"
		     : ename(er));
}

int al_cmd_probe(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	probe_filesystem();
	probe_kernel();
	probe_privileges();
	probe_userns();
	probe_network();
	probe_gateway();
	fflush(stdout);
	return failures ? 2 : 0;
}
