/* An engine's network namespace, joined by a container (netns.h): the
 * supervisor sets it up from inside, as root of the init user namespace,
 * which owns it. */
#include "backend/native/netns.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <linux/netlink.h>
#include <linux/nsfs.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/native/capture.h"
#include "core/cleanup.h"
#include "core/log.h"
#include "core/sys.h"
#include "core/util.h"
#include "cred/store.h"
#include "policy/plan.h"

struct al_netns_join {
	int ns;	  /* the engine's namespace */
	int own;  /* ours, to return to */
	int diag; /* NETLINK_SOCK_DIAG in it, or -1 */
	int listeners[AL_GATEWAY_N_LISTENERS];
	bool installed;
	uint64_t handle[2]; /* of our tables ip and ip6 (al_capture_table_handle) */
	bool routed;	    /* the fake addresses' route over lo is ours */
	pid_t keeper;	    /* removes what we installed (keeper()), or -1 */
	int keeper_wr;	    /* its socket: the container's pidfd goes over it;
			     * a byte, or our death, tells it to remove */
	dev_t dev;
	ino_t ino;
};

static void join_close(struct al_netns_join *j)
{
	al_closep(&j->keeper_wr);
	al_closep(&j->ns);
	al_closep(&j->own);
	al_closep(&j->diag);
	for (int k = 0; k < AL_GATEWAY_N_LISTENERS; k++)
		al_closep(&j->listeners[k]);
	free(j);
}

/* nf_tables' families ip and ip6 (NFPROTO_IPV4 and _IPV6 are these). */
static const uint8_t families[2] = {AF_INET, AF_INET6};

/* What we installed, removed from inside the namespace (we are in it):
 * our tables by their handles, where known, so that a table of another
 * container's, made after ours was removed by hand, stays. */
static int remove_ours(bool installed, const uint64_t handle[2], bool routed, struct al_error *err)
{
	int r = 0;

	if (installed) {
		/* Each table on its own: one removed by hand already (ENOENT)
		 * must not keep the other, which would refuse every later
		 * container in the namespace. */
		const struct al_capture_ruleset *const by_name[] = {&al_capture_remove_ip_rules,
								    &al_capture_remove_ip6_rules};
		int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
		if (fd < 0)
			r = al_error_setsys(err, errno, "NETLINK_NETFILTER socket");
		for (size_t k = 0; fd >= 0 && k < AL_ARRAY_SIZE(families); k++) {
			int q = handle[k] ? al_capture_remove_table(fd, families[k], handle[k], err)
					  : al_capture_apply(fd, by_name[k], err);
			if (q < 0 && q != -ENOENT && r == 0)
				r = q;
		}
		if (fd >= 0)
			close(fd);
	}
	if (routed && al_netns_route_lo(AL_GATEWAY_FAKE_NET, 15, false) < 0 && r == 0)
		r = al_error_set(err, EIO, "removing the route of 198.18.0.0/15 over lo");
	return r;
}

/* The keeper's message: the container's init's pidfd attached to it. */
#define PIDFD_BYTE 'p'

/* One byte from the supervisor, with the pidfd it may carry in *pidfd.
 * 1, or 0 at EOF (the supervisor died, or closed without the end byte). */
static int keeper_recv(int fd, char *c, int *pidfd)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	struct iovec iov = {.iov_base = c, .iov_len = 1};
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = u.buf,
			   .msg_controllen = sizeof(u.buf)};
	ssize_t n;

	while ((n = recvmsg(fd, &m, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
		;
	if (n <= 0)
		return 0;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm))
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
		    cm->cmsg_len == CMSG_LEN(sizeof(int)) && *pidfd < 0)
			memcpy(pidfd, CMSG_DATA(cm), sizeof(int));
	return 1;
}

/* The supervisor died with the container running: kill the container's
 * init and wait for it to be gone (its exit waits for every other process
 * of its pid namespace), so that the rules leave only once nothing of the
 * container can send. */
static void keeper_kill_container(int pidfd)
{
	struct pollfd pf = {.fd = pidfd, .events = POLLIN};

	if (al_sys_pidfd_send_signal(pidfd, SIGKILL) < 0 && errno != ESRCH)
		_exit(3); /* the rules stay: fail closed */
	while (poll(&pf, 1, -1) < 0 && errno == EINTR)
		;
}

/* The keeper: a process of ours in the engine's namespace that keeps the
 * capabilities the supervisor gives up when it confines itself, and
 * removes airlock's rules at the container's end (a byte on its socket),
 * or when the supervisor is killed (EOF): then, once it holds the
 * container's init's pidfd, only after killing the container and seeing
 * its init gone (before the clone, nothing of the container ever ran).
 * It holds nothing else of the supervisor's (no other descriptor, no
 * secret, no blocked signal, its own session: a signal to the container's
 * process group is not for it). */
static _Noreturn void keeper(int sock, bool installed, const uint64_t handle[2], bool routed)
{
	struct al_error err = {0};
	sigset_t none;
	char c = 0;
	int pidfd = -1;
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);

	al_cred_wipe_copies();
	sigemptyset(&none);
	if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0 ||
	    dup2(sock, 3) < 0 || al_sys_close_range(4, ~0U, 0) < 0 ||
	    sigprocmask(SIG_SETMASK, &none, NULL) < 0)
		_exit(1);
	setsid();
	bool ended = false;
	while (keeper_recv(3, &c, &pidfd) == 1)
		if (c != PIDFD_BYTE) {
			ended = true;
			break;
		}
	if (!ended && pidfd >= 0)
		keeper_kill_container(pidfd);
	_exit(remove_ours(installed, handle, routed, &err) < 0 ? 2 : 0);
}

static int start_keeper(struct al_netns_join *j, struct al_error *err)
{
	int p[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p) < 0)
		return al_error_setsys(err, errno, "socketpair");
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		close(p[0]);
		close(p[1]);
		return al_error_setsys(err, e, "fork of the process that removes the rules");
	}
	if (pid == 0)
		keeper(p[0], j->installed, j->handle, j->routed);
	close(p[0]);
	j->keeper = pid;
	j->keeper_wr = p[1];
	return 0;
}

int al_netns_join_give_pidfd(struct al_netns_join *j, int pidfd, struct al_error *err)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	char c = PIDFD_BYTE;
	struct iovec iov = {.iov_base = &c, .iov_len = 1};
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = u.buf,
			   .msg_controllen = sizeof(u.buf)};
	ssize_t n;

	memset(u.buf, 0, sizeof(u.buf));
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &pidfd, sizeof(int));
	while ((n = sendmsg(j->keeper_wr, &m, MSG_NOSIGNAL)) < 0 && errno == EINTR)
		;
	if (n != 1)
		return al_error_setsys(err, n < 0 ? errno : EIO,
				       "handing the container's pidfd to the process that removes "
				       "airlock's rules");
	return 0;
}

void al_netns_join_free(struct al_netns_join *j)
{
	struct al_error err = {0};
	int st = 0;

	if (!j)
		return;
	if (j->keeper > 0) {
		/* The container has ended: the keeper removes the rules (told
		 * by a byte: a copy of the socket's end elsewhere would hide
		 * our close); wait, so that they are gone when the
		 * supervisor's end is seen. */
		(void)!write(j->keeper_wr, "", 1);
		al_closep(&j->keeper_wr);
		while (waitpid(j->keeper, &st, 0) < 0 && errno == EINTR)
			;
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			al_warn("removing airlock's rules from the engine's network namespace "
				"failed (status %d): nft delete table ip airlock; nft delete "
				"table ip6 airlock",
				st);
	} else if ((j->installed || j->routed) && al_netns_join_enter(j, &err) == 0) {
		/* Still setting up (no keeper yet): we hold the capabilities. */
		if (remove_ours(j->installed, j->handle, j->routed, &err) < 0)
			al_warn("removing airlock's rules from the engine's network namespace: %s",
				err.msg);
		al_netns_join_leave(j);
	}
	join_close(j);
}

int al_netns_join_enter(const struct al_netns_join *j, struct al_error *err)
{
	if (setns(j->ns, CLONE_NEWNET) < 0)
		return al_error_setsys(err, errno, "entering the engine's network namespace");
	return 0;
}

void al_netns_join_leave(const struct al_netns_join *j)
{
	if (setns(j->own, CLONE_NEWNET) < 0) {
		/* Never go on with the gateway's upstream in the engine's
		 * namespace. */
		al_err("returning to the supervisor's own network namespace: %s", strerror(errno));
		_exit(125);
	}
}

void al_netns_join_id(const struct al_netns_join *j, dev_t *dev, ino_t *ino)
{
	*dev = j->dev;
	*ino = j->ino;
}

int al_netns_join_take_diag(struct al_netns_join *j)
{
	return TAKE_FD(j->diag);
}

int al_netns_join_take_listener(struct al_netns_join *j, enum al_gateway_listener kind)
{
	return TAKE_FD(j->listeners[kind]);
}

int al_netns_join_sysfs(const struct al_netns_join *j, uint64_t attr, struct al_error *err)
{
	int fs, m = -1, r;

	if ((r = al_netns_join_enter(j, err)) < 0)
		return r;
	fs = (int)syscall(SYS_fsopen, "sysfs", FSOPEN_CLOEXEC);
	if (fs < 0 || syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "source", "sysfs", 0) < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0 ||
	    (m = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, (unsigned)attr)) < 0)
		r = al_error_setsys(err, errno, "a sysfs of the engine's network namespace");
	if (fs >= 0)
		close(fs);
	al_netns_join_leave(j);
	if (m < 0)
		return r;
	/* Above the numbers the child parks its own descriptors at. */
	int high = fcntl(m, F_DUPFD_CLOEXEC, 100);
	close(m);
	return high < 0 ? al_error_setsys(err, errno, "fcntl(F_DUPFD_CLOEXEC)") : high;
}

bool al_netns_join_captured(const struct al_netns_join *j)
{
	return j->installed;
}

/* Whether fd's namespace and the one at path are the same. */
static bool same_ns(const struct stat *st, const char *path)
{
	struct stat o;

	return stat(path, &o) == 0 && st->st_dev == o.st_dev && st->st_ino == o.st_ino;
}

/* The namespace must be a network namespace, neither ours nor the
 * host's (rules there would be the host's), and owned by our own user
 * namespace: the root of another one (an unprivileged user's, after
 * unshare -Urn) would hold CAP_NET_ADMIN over it and could remove our
 * rules while the container runs. */
int al_netns_engine_check(int ns, struct al_error *err)
{
	struct stat own, st, owner;

	int type = ioctl(ns, NS_GET_NSTYPE);
	if (type < 0)
		return al_error_setsys(err, errno, "not a namespace");
	if (type != CLONE_NEWNET)
		return al_error_set(err, EINVAL, "not a network namespace");
	if (fstat(ns, &st) < 0 || stat("/proc/self/ns/net", &own) < 0)
		return al_error_setsys(err, errno, "fstat");
	if ((st.st_dev == own.st_dev && st.st_ino == own.st_ino) || same_ns(&st, "/proc/1/ns/net"))
		return al_error_set(err, EPERM,
				    "the host's own network namespace: a container never shares "
				    "it");
	_cleanup_close_ int user = ioctl(ns, NS_GET_USERNS);
	if (user < 0)
		return al_error_setsys(err, errno, "ioctl(NS_GET_USERNS)");
	if (fstat(user, &owner) < 0)
		return al_error_setsys(err, errno, "fstat of its user namespace");
	if (!same_ns(&owner, "/proc/self/ns/user"))
		return al_error_set(err, EPERM,
				    "owned by another user namespace: its root could remove "
				    "airlock's rules");
	return 0;
}

static int check_ns(struct al_netns_join *j, struct al_error *err)
{
	struct stat st;
	int r = al_netns_engine_check(j->ns, err);

	if (r < 0)
		return r;
	if (fstat(j->ns, &st) < 0)
		return al_error_setsys(err, errno, "fstat");
	j->dev = st.st_dev;
	j->ino = st.st_ino;
	return 0;
}

static int install(struct al_netns_join *j, const struct al_plan *p, struct al_error *err)
{
	const struct al_capture_ruleset *rules =
	    p->gateway ? &al_capture_joined_rules : &al_capture_joined_drop_rules;
	_cleanup_close_ int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
	int r;

	if (fd < 0)
		return al_error_setsys(err, errno,
				       "NETLINK_NETFILTER socket for airlock's rules (a kernel "
				       "without nf_tables?)");
	if ((r = al_capture_apply(fd, rules, err)) == -EEXIST)
		return al_error_set(err, EEXIST,
				    "a table \"airlock\" is already in it: another airlock "
				    "container runs in this namespace (or one whose supervisor "
				    "was killed left its rules: nft delete table ip airlock; nft "
				    "delete table ip6 airlock)");
	if (r < 0)
		return r;
	j->installed = true;
	/* Made exclusively just now, in a namespace whose only other root is
	 * the engine's: these are ours. Until both are known, the removal is
	 * by name. */
	uint64_t h[2];
	for (size_t k = 0; k < AL_ARRAY_SIZE(families); k++)
		if ((r = al_capture_table_handle(fd, families[k], &h[k], err)) < 0)
			return r;
	memcpy(j->handle, h, sizeof(h));
	return 0;
}

/* Everything that is done inside the namespace. */
static int set_up(struct al_netns_join *j, const struct al_plan *p, struct al_error *err)
{
	int r;

	if ((r = al_netns_loopback_up()) < 0)
		return al_error_setsys(err, -r, "bringing up lo");
	/* The meter adds up this namespace's socket memory through it
	 * (sockdiag.h); the monitor refuses to start the command without. */
	j->diag = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (j->diag < 0 && !p->kernel_memory_best_effort)
		return al_error_setsys(err, errno,
				       "NETLINK_SOCK_DIAG socket, to account for socket memory");
	if ((r = install(j, p, err)) < 0)
		return r;
	/* After the rules: a create refused (the namespace holds another
	 * container's table) changes nothing in it. */
	if ((r = al_netns_write_sysctls(p->root->sysctl, err)) < 0)
		return r;
	for (int k = 0; p->gateway && k < AL_GATEWAY_N_LISTENERS; k++) {
		j->listeners[k] = al_netns_listen((enum al_gateway_listener)k);
		if (j->listeners[k] < 0)
			return al_error_setsys(err, -j->listeners[k],
					       "gateway listener on 127.0.0.1:%u",
					       al_gateway_listeners[k].port);
	}
	/* The gateway's made-up addresses (its DNS stub's answers) go over
	 * lo, whatever routes the engine gave: to the redirect, never out
	 * (an engine's namespace may have no default route at all). */
	if (p->gateway) {
		r = al_netns_route_lo(AL_GATEWAY_FAKE_NET, 15, true);
		if (r < 0 && r != -EEXIST)
			return al_error_setsys(err, -r, "adding a route of 198.18.0.0/15 over lo");
		j->routed = r == 0;
	}
	return start_keeper(j, err);
}

int al_netns_join_open(const struct al_plan *p, struct al_netns_join **ret, struct al_error *err)
{
	struct al_netns_join *j = xcalloc(1, sizeof(*j));
	const char *path = p->root->netns, *field = p->root->netns_field;
	int r;

	j->diag = j->keeper_wr = -1;
	j->keeper = -1;
	for (int k = 0; k < AL_GATEWAY_N_LISTENERS; k++)
		j->listeners[k] = -1;
	/* Never opened as whatever it is (a FIFO, a device): al_open_ns(). */
	j->ns = al_open_ns(path);
	j->own = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (j->ns == -EINVAL)
		r = al_error_set(err, EINVAL, "not a namespace (not a file of nsfs)");
	else if (j->ns < 0)
		r = al_error_setsys(err, -j->ns, "open");
	else if (j->own < 0)
		r = al_error_setsys(err, errno, "open our own network namespace");
	else if ((r = check_ns(j, err)) == 0 && (r = al_netns_join_enter(j, err)) == 0) {
		r = set_up(j, p, err);
		al_netns_join_leave(j);
	}
	if (r < 0) {
		al_error_wrap(err, "%s %s: airlock's rules cannot be installed in it", field, path);
		al_netns_join_free(j);
		return r;
	}
	*ret = j;
	return 0;
}
