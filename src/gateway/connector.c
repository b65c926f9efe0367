/* The decider's connector: a process the gateway forks before it confines
 * itself, when the operator's decider listens on a Unix socket. The
 * gateway's seccomp allowlist makes no Unix sockets, and neither seccomp
 * (which cannot read connect()'s address) nor landlock (which on the
 * kernels we support does not check connect() to a named socket) could
 * hold such a socket to one path. So this process, which is given the path
 * before it confines itself and reads nothing from the gateway but a
 * token and a question's body, makes each connection, writes the request
 * itself (POST to the one egress path, the body, then its write side
 * shut) and passes the socket back for the answer: a gateway taken over
 * by what it parses can ask the decider egress questions and read the
 * answers, and nothing else, of no other socket on the host. Its own confinement: no capabilities, no_new_privs, a landlock
 * domain with no file access and no TCP, and a seccomp allowlist of a
 * dozen calls (gateway/seccomp.c) that kills it for anything else. */
#include "gateway/conn.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/sys.h"
#include "decider/decider.h"
#include "policy/seccomp.h"

/* How long its start may take before the gateway gives up on it. */
#define START_TIMEOUT_MS 5000

struct started {
	int32_t error;
	char msg[200];
};

int gw_drop_caps(void)
{
	struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct data[2] = {{0}};

	for (int cap = 0; cap < 64; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno == EINVAL)
			break; /* past the last one (EPERM: rootless, none to drop) */
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return -errno;
	return syscall(SYS_capset, &hdr, data) < 0 ? -errno : 0;
}

static int confine(char *msg, size_t len)
{
	struct sock_fprog prog = {.len = al_connector_seccomp_program_len,
				  .filter = (struct sock_filter *)al_connector_seccomp_program};
	int abi = al_landlock_abi(), r;

	if ((r = gw_drop_caps()) < 0) {
		snprintf(msg, len, "dropping capabilities: %s", strerror(-r));
		return -r;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		snprintf(msg, len, "no_new_privs: %s", strerror(errno));
		return errno;
	}
	if (abi > 0) {
		struct al_landlock_attr attr = {.handled_access_fs = al_landlock_fs_all(abi)};
		if (abi >= 4)
			attr.handled_access_net =
			    LANDLOCK_ACCESS_NET_BIND_TCP | LANDLOCK_ACCESS_NET_CONNECT_TCP;
		if (abi >= 6)
			attr.scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL;
		_cleanup_close_ int rs =
		    al_sys_landlock_create_ruleset(&attr, al_landlock_attr_size(abi), 0);
		if (rs < 0 || al_sys_landlock_restrict_self(rs, 0) < 0) {
			snprintf(msg, len, "landlock: %s", strerror(errno));
			return errno;
		}
	}
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0) {
		snprintf(msg, len, "installing its seccomp filter: %s", strerror(errno));
		return errno;
	}
	return 0;
}

/* sendmsg only (its allowlist has no sendto), with fd when it is >= 0. */
static void reply(int sock, const void *buf, size_t len, int fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = {0};
	struct iovec iov = {(void *)buf, len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};

	if (fd >= 0) {
		mh.msg_control = cbuf;
		mh.msg_controllen = sizeof(cbuf);
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	}
	if (sendmsg(sock, &mh, MSG_NOSIGNAL) < 0)
		_exit(0); /* the gateway is gone */
}

/* POST path with body on fd: the head is the connector's own, then the
 * body, then the write side shut. 0 or an errno. */
static int ask(int fd, const char *path, const char *body, size_t n)
{
	char head[AL_DECIDER_PATH_MAX + 256];
	int hl =
	    snprintf(head, sizeof(head),
		     "POST %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
		     "Accept: application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
		     path, n);
	struct iovec iov[2] = {{head, (size_t)hl}, {(void *)body, n}};
	struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2};

	if (hl < 0 || (size_t)hl >= sizeof(head))
		return ENAMETOOLONG;
	/* A fresh Unix stream socket has far more room than one question:
	 * all of it goes at once, or the question fails. */
	ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (w < 0)
		return errno;
	if ((size_t)w != (size_t)hl + n)
		return EMSGSIZE;
	return shutdown(fd, SHUT_WR) < 0 ? errno : 0;
}

static _Noreturn void connector_main(const struct sockaddr_un *sun, socklen_t sl, const char *path,
				     int sock)
{
	/* Static, and safe as such: this function
	 * never returns and runs only in the connector's own process, one
	 * per gateway, with one thread. */
	static char buf[sizeof(uint64_t) + GW_CONNECTOR_BODY_MAX + 1];
	struct started st = {0};

	/* Nothing of the gateway's but this socket, as fd 3. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || dup2(sock, 3) < 0 ||
	    al_sys_close_range(4, ~0U, 0) < 0 || getppid() == 1)
		_exit(2);
	st.error = confine(st.msg, sizeof(st.msg));
	reply(3, &st, sizeof(st), -1);
	if (st.error)
		_exit(1);
	for (;;) {
		ssize_t n = recv(3, buf, sizeof(buf), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(0);
		if ((size_t)n < sizeof(uint64_t) || (size_t)n == sizeof(buf))
			continue; /* no token, or a body over the cap (cut by recv) */
		struct gw_connector_reply m = {0};
		memcpy(&m.token, buf, sizeof(m.token));
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0 || connect(fd, (const struct sockaddr *)sun, sl) < 0)
			m.error = errno ? errno : EIO;
		else
			m.error =
			    ask(fd, path, buf + sizeof(uint64_t), (size_t)n - sizeof(uint64_t));
		reply(3, &m, sizeof(m), m.error ? -1 : fd);
		if (fd >= 0)
			close(fd);
	}
}

int gw_connector_start(const char *path, const char *egress_path, int *ret_fd, char *msg,
		       size_t len)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	size_t n = strlen(path);
	struct started st;
	int sv[2], flags;

	if (n == 0 || n >= sizeof(sun.sun_path)) {
		snprintf(msg, len, "the decider's socket path is %zu bytes; at most %zu fit", n,
			 sizeof(sun.sun_path) - 1);
		return -ENAMETOOLONG;
	}
	memcpy(sun.sun_path, path, n);
	socklen_t sl = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		snprintf(msg, len, "the decider's connector: socketpair: %s", strerror(errno));
		return -errno;
	}
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		snprintf(msg, len, "the decider's connector: fork: %s", strerror(e));
		close(sv[0]);
		close(sv[1]);
		return -e;
	}
	if (pid == 0) {
		close(sv[0]);
		connector_main(&sun, sl, egress_path, sv[1]);
	}
	close(sv[1]);
	struct pollfd p = {.fd = sv[0], .events = POLLIN};
	if (poll(&p, 1, START_TIMEOUT_MS) != 1 || recv(sv[0], &st, sizeof(st), 0) != sizeof(st)) {
		snprintf(msg, len, "the decider's connector did not report its start");
		kill(pid, SIGKILL);
		close(sv[0]);
		return -EIO;
	}
	if (st.error) {
		st.msg[sizeof(st.msg) - 1] = '\0';
		snprintf(msg, len, "the decider's connector could not confine itself: %s", st.msg);
		close(sv[0]);
		return -st.error;
	}
	if ((flags = fcntl(sv[0], F_GETFL)) < 0 || fcntl(sv[0], F_SETFL, flags | O_NONBLOCK) < 0) {
		snprintf(msg, len, "the decider's connector: fcntl: %s", strerror(errno));
		kill(pid, SIGKILL);
		close(sv[0]);
		return -EIO;
	}
	*ret_fd = sv[0];
	return 0;
}
