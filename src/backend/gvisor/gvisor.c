/* The gvisor backend: the plan as an OCI bundle (bundle.c) run by `runsc
 * run` on the platform the probe found (probe.c), inside the run's cgroup (runsc's own cgroup code is
 * off: --ignore-cgroups), so the sentry, the gofer and every thread of
 * theirs count against --memory, --pids and --cpu-time.
 *
 * runsc runs as root of a user namespace of the run's own host ids
 * (userns.c), never as host root.
 *
 * Everything of a run is in its directory under AL_GVISOR_DIR: the bundle,
 * runsc's state (--root) and the scratch's mount point. runsc is started by
 * a child of airlock's own that first enters a private mount namespace and
 * mounts the scratch there (a tmpfs of scratch_bytes), so no mount of the
 * run is ever visible on the host and the scratch dies with the last
 * process that holds it; the child hands the supervisor a descriptor of the
 * scratch's root (--copy-in, --copy-out). The directory is removed at the
 * end, and by `airlock gc` once its supervisor is gone. */
#include "backend/backend.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/netlink.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/gvisor/gvisor.h"
#include "backend/native/capture.h"
#include "backend/native/netns.h"
#include "core/cleanup.h"
#include "core/log.h"
#include "core/sys.h"
#include "core/util.h"
#include "ids/slots.h"
#include "supervisor/copy.h"

/* How often the cgroup's counters are read for the limits. */
#define TICK_MS 50

struct al_backend_state {
	const struct al_gvisor_host *host;
	char *dir;  /* the run's directory */
	char *name; /* its name under AL_GVISOR_DIR, also the container's id */
	pid_t pid;  /* the child that execs runsc */
	int pidfd;
	int go;	     /* its gate: a byte lets it exec runsc */
	int scratch; /* the scratch's root, from the child */
	/* The gateway's sockets in the run's network namespace, from the
	 * child, handed to the supervisor from the loop (-1: none). */
	int listeners[AL_GATEWAY_N_LISTENERS];
	struct al_id_slot slot;		/* the run's host ids, when per run */
	struct al_host_ids ids;		/* who runsc's namespace maps to */
	struct al_gvisor_inputs inputs; /* the task's inputs, until the child has them */
	struct al_watch *w_pidfd;
	struct al_timer *ready, *tick;
	bool reaped, stopping, reported;
	siginfo_t si;
	struct rusage ru;
};

static int gvisor_usable(char *why, size_t len)
{
	const struct al_gvisor_host *h;
	return al_gvisor_host(&h, why, len);
}

static const char *gvisor_platform(void)
{
	const struct al_gvisor_host *h;
	return al_gvisor_host(&h, NULL, 0) ? h->platform : NULL;
}

static int gvisor_probe(const struct al_plan *plan, struct al_error *err)
{
	const struct al_gvisor_host *h;
	char why[512];

	if (!al_gvisor_host(&h, why, sizeof(why)))
		return al_error_set(err, EOPNOTSUPP, "backend gvisor is not usable here: %s", why);
	return al_gvisor_check_plan(plan, err);
}

static int gvisor_describe(const struct al_plan *plan, FILE *f, json_t *json, struct al_error *err)
{
	const struct al_gvisor_host *h;
	int r = gvisor_probe(plan, err);

	if (r < 0)
		return r;
	al_gvisor_host(&h, NULL, 0);
	if (f) {
		fprintf(f, "runtime: %s (%s), platform %s, --network=%s\n", h->runsc, h->version,
			h->platform, plan->gateway ? "host (the run's namespace)" : "none");
		fprintf(f, "filesystem: an OCI bundle: a read-only root of the plan's entries, "
			   "host paths bound read-only, the scratch a tmpfs of its own\n");
	} else {
		json_object_set_new(json, "runtime",
				    json_pack("{s:s, s:s, s:s, s:s}", "runsc", h->runsc, "version",
					      h->version, "platform", h->platform, "network",
					      plan->gateway ? "host" : "none"));
	}
	return 0;
}

static void state_free(struct al_sandbox *sb)
{
	struct al_backend_state *st = sb->state;

	al_watch_removep(&st->w_pidfd);
	al_timer_freep(&st->ready);
	al_timer_freep(&st->tick);
	al_closep(&st->go);
	al_closep(&st->scratch);
	al_closep(&st->pidfd);
	for (int k = 0; k < AL_GATEWAY_N_LISTENERS; k++)
		al_closep(&st->listeners[k]);
	al_gvisor_close_inputs(&st->inputs);
	free(st->dir);
	free(st->name);
	free(st);
	sb->state = NULL;
}

static int make_run_dir(struct al_backend_state *st, struct al_error *err)
{
	static _Atomic unsigned counter;
	unsigned long long start = 0;

	al_proc_starttime(getpid(), &start);
	if ((mkdir("/run/airlock", 0755) < 0 && errno != EEXIST) ||
	    (mkdir(AL_GVISOR_DIR, 0711) < 0 && errno != EEXIST))
		return al_error_setsys(err, errno, "backend gvisor: making %s", AL_GVISOR_DIR);
	/* One an older airlock made 0700: runsc, no longer host root, must
	 * pass through it. */
	_cleanup_close_ int fd =
	    open(AL_GVISOR_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat sd;
	if (fd < 0 || fstat(fd, &sd) < 0)
		return al_error_setsys(err, errno, "backend gvisor: opening %s", AL_GVISOR_DIR);
	if (sd.st_uid != 0 || (sd.st_mode & 022))
		return al_error_set(err, EPERM,
				    "backend gvisor: %s is not root's alone (owner %u, mode %04o)",
				    AL_GVISOR_DIR, (unsigned)sd.st_uid, sd.st_mode & 07777);
	if ((sd.st_mode & 07777) != 0711 && fchmod(fd, 0711) < 0)
		return al_error_setsys(err, errno, "backend gvisor: chmod 0711 %s", AL_GVISOR_DIR);
	st->name = xasprintf("%d-%llu-%u", (int)getpid(), start, counter++);
	st->dir = xasprintf("%s/%s", AL_GVISOR_DIR, st->name);
	if (mkdir(st->dir, 0700) < 0)
		return al_error_setsys(err, errno, "backend gvisor: making %s", st->dir);
	return 0;
}

static int gvisor_prepare(struct al_sandbox *sb, struct al_error *err)
{
	const struct al_plan *p = sb->plan;
	struct al_cgroup_limits limits;
	struct al_backend_state *st = xcalloc(1, sizeof(*st));
	_cleanup_close_ int dirfd = -1;
	char why[512];
	int r;

	al_sandbox_cgroup_limits(sb, &limits);
	st->pidfd = st->go = st->scratch = -1;
	st->slot = (struct al_id_slot)AL_ID_SLOT_NONE;
	for (int k = 0; k < AL_GATEWAY_N_LISTENERS; k++)
		st->listeners[k] = -1;
	sb->state = st;
	if (!al_gvisor_host(&st->host, why, sizeof(why)))
		return al_error_set(err, EOPNOTSUPP, "backend gvisor is not usable here: %s", why);
	if (p->rootless)
		return al_error_set(err, EOPNOTSUPP, "backend gvisor runs as root only");
	/* The host ids runsc's user namespace maps to: a slot of the run's
	 * own (released in destroy), unless the plan pins a fixed range. */
	if (p->ids_per_run) {
		if ((r = al_ids_take(NULL, sb->run_id, &st->slot, err)) < 0)
			return al_error_wrap(err, "refusing to run");
		sb->slot_dirfd = st->slot.dirfd;
	}
	al_plan_host_ids(p, st->slot.slot, &st->ids);
	sb->ids = st->ids;
	sb->have_ids = true;
	if ((r = make_run_dir(st, err)) < 0)
		return r;
	/* A confined supervisor keeps the right to remove the run's
	 * directory (supervisor/confine.c). */
	if ((sb->remove_dirfd = open(AL_GVISOR_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return al_error_setsys(err, errno, "backend gvisor: opening %s", AL_GVISOR_DIR);
	sb->remove_tree = true;
	if ((dirfd = open(st->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 ||
	    mkdirat(dirfd, "bundle", 0700) < 0 || mkdirat(dirfd, "state", 0700) < 0 ||
	    mkdirat(dirfd, "scratch", 0700) < 0)
		return al_error_setsys(err, errno, "backend gvisor: making %s", st->dir);
	_cleanup_close_ int bundle = openat(dirfd, "bundle", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	_cleanup_free_ char *scratch = xasprintf("%s/scratch", st->dir);
	if (bundle < 0)
		return al_error_setsys(err, errno, "backend gvisor: opening the bundle");
	if ((r = al_gvisor_open_inputs(p, &st->ids, dirfd, st->dir, &st->inputs, err)) < 0 ||
	    (r = al_gvisor_bundle(bundle, p, scratch, &st->inputs, err)) < 0)
		return r;
	/* All of it the slot's root's: runsc and its gofer read the bundle
	 * and keep their state there as that user. */
	if ((r = al_gvisor_chown_tree(sb->remove_dirfd, st->name, st->ids.root_uid,
				      st->ids.root_gid)) < 0)
		return al_error_setsys(err, -r, "backend gvisor: chown %s", st->dir);
	al_log_phase("bundle written");
	r = al_cgroup_create(&limits, &sb->cg, err);
	if (r < 0 && (p->cgroup_required || limits.path))
		return al_error_wrap(err, "backend gvisor: the plan's limits need a cgroup");
	if (r < 0) {
		al_warn("warning: running without a cgroup, so the default memory and pids limits "
			"are NOT enforced: %s",
			err->msg);
		al_error_clear(err);
	}
	return 0;
}

/* The scratch's faces, as the plan has them: each part made with its mode,
 * the sandbox's own where the plan says so. */
static int make_scratch(const struct al_plan *p, const struct al_host_ids *ids, const char *dir)
{
	char opts[64];
	int fd;

	snprintf(
	    opts, sizeof(opts), "size=%llu,mode=0755",
	    (unsigned long long)(p->scratch_bytes ? p->scratch_bytes : AL_DEFAULT_SCRATCH_BYTES));
	if (mount("airlock-scratch", dir, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
		return -1;
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -1;
	if (fchown(fd, ids->root_uid, ids->root_gid) < 0) {
		close(fd);
		return -1;
	}
	/* Owned by the namespace's root or, where the plan says, by the
	 * sandbox user, as runsc's namespace maps them. */
	for (size_t i = 0; i < p->n_fs; i++) {
		const struct al_fs_entry *e = &p->fs[i];
		if (e->kind != AL_FS_SCRATCH)
			continue;
		if ((mkdirat(fd, e->source, 0700) < 0 && errno != EEXIST) ||
		    fchownat(fd, e->source, e->sandbox_owned ? ids->uid : ids->root_uid,
			     e->sandbox_owned ? ids->gid : ids->root_gid, 0) < 0 ||
		    fchmodat(fd, e->source, e->mode, 0) < 0) {
			close(fd);
			return -1;
		}
	}
	return fd;
}

/* The child's messages: a tag ('S' the scratch, 'L' + kind a listener,
 * each with its fd; 'E' and a line: setup failed). */
static int send_fd(int sock, char tag, char kind, int fd)
{
	char c[2] = {tag, kind}, buf[CMSG_SPACE(sizeof(int))] = {0};
	struct iovec iov = {.iov_base = c, .iov_len = 2};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = buf, .msg_controllen = sizeof(buf)};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);

	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	return sendmsg(sock, &mh, MSG_NOSIGNAL) == 2 ? 0 : -1;
}

static _Noreturn void child_fail(int sock, const char *what, int e)
{
	char line[256];
	int n = snprintf(line, sizeof(line), "E%s: %s", what, strerror(e));
	if (send(sock, line, (size_t)n, MSG_NOSIGNAL) < 0)
		_exit(125);
	_exit(125);
}

/* One message of the child's: its bytes into msg (NUL-terminated), its fd
 * (or -1); the length, 0 at EOF. */
static ssize_t recv_msg(int sock, char *msg, size_t len, int *fd)
{
	char buf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {.iov_base = msg, .iov_len = len - 1};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = buf, .msg_controllen = sizeof(buf)};
	struct cmsghdr *cm;
	ssize_t n;

	while ((n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
		;
	msg[n > 0 ? n : 0] = '\0';
	*fd = -1;
	cm = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL;
	if (cm && cm->cmsg_type == SCM_RIGHTS && cm->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(fd, CMSG_DATA(cm), sizeof(int));
	return n;
}

/* With network rules: the network namespace runsc runs in (--network=host:
 * the sentry's sockets are host sockets of this namespace) is made like the
 * native sandbox's: lo, the capture's nftables rules that send every other
 * TCP connection to the transparent listener and drop the rest, the
 * gateway's listeners (handed to the supervisor, which passes them to the
 * gateway's process), the default route over lo. */
static void child_network(int sock)
{
	struct al_error err = {0};
	int r, fd;

	if ((r = al_netns_loopback_up()) < 0)
		child_fail(sock, "bringing up lo", -r);
	if ((fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER)) < 0)
		child_fail(sock, "NETLINK_NETFILTER socket for the capture", errno);
	if (al_capture_install(fd, &err) < 0)
		child_fail(sock, "installing the capture rules", err.code ? err.code : EIO);
	close(fd);
	for (int k = 0; k < AL_GATEWAY_N_LISTENERS; k++) {
		if ((fd = al_netns_listen((enum al_gateway_listener)k)) < 0)
			child_fail(sock, "a gateway listener", -fd);
		if (send_fd(sock, 'L', (char)k, fd) < 0)
			_exit(125);
		close(fd);
	}
	if ((r = al_netns_default_route()) < 0)
		child_fail(sock, "the default route over lo", -r);
}

/* Into a user namespace of the run's ids (userns.c): no supplementary
 * group of root's kept, the parent writes the maps ('U', answered 'M'),
 * then root there, in a mount namespace that namespace owns. */
static void enter_userns(int sock)
{
	char c = 0;

	if (setgroups(0, NULL) < 0)
		child_fail(sock, "dropping root's groups", errno);
	if (unshare(CLONE_NEWUSER) < 0)
		child_fail(sock, "unshare(CLONE_NEWUSER)", errno);
	if (send(sock, "U", 1, MSG_NOSIGNAL) != 1 || recv(sock, &c, 1, 0) != 1 || c != 'M')
		_exit(125);
	if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
		child_fail(sock, "becoming root of runsc's user namespace", errno);
	/* A change of ids clears the parent-death signal. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || unshare(CLONE_NEWNS) < 0)
		child_fail(sock, "runsc's mount namespace", errno);
	if (send(sock, "R", 1, MSG_NOSIGNAL) != 1)
		_exit(125);
}

/* The child: into the run's cgroup (v1: through the task files the parent
 * opened), a private mount namespace with the scratch mounted (its fd to
 * the parent) and the inputs attached, as host root; then into the user
 * namespace, wait for the go and exec runsc. Never returns. */
static _Noreturn void child(struct al_sandbox *sb, const int *tasks, size_t n_tasks, int sock,
			    int gate, const int stdio[3])
{
	const struct al_backend_state *st = sb->state;
	char root[512], platform[64], bundle[512], scratch[512], c;
	int fd;

	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		_exit(125);
	for (size_t i = 0; i < n_tasks; i++)
		if (write(tasks[i], "0", 1) != 1)
			_exit(125);
	snprintf(scratch, sizeof(scratch), "%s/scratch", st->dir);
	if (unshare(CLONE_NEWNS | (sb->plan->gateway ? CLONE_NEWNET : 0)) < 0)
		child_fail(sock, "unshare", errno);
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		child_fail(sock, "making the mount namespace private", errno);
	if (sb->plan->gateway)
		child_network(sock);
	if ((fd = make_scratch(sb->plan, &st->ids, scratch)) < 0)
		child_fail(sock, "mounting the scratch", errno);
	if (send_fd(sock, 'S', 0, fd) < 0)
		_exit(125);
	close(fd);
	if ((fd = al_gvisor_attach_inputs(&st->inputs)) < 0)
		child_fail(sock, "attaching the inputs", -fd);
	enter_userns(sock);
	close(sock);
	if (dup2(stdio[0], 0) < 0 || dup2(stdio[1], 1) < 0 || dup2(stdio[2], 2) < 0)
		_exit(125);
	while (read(gate, &c, 1) < 0 && errno == EINTR)
		;
	if (read(gate, &c, 0) < 0)
		_exit(125);
	snprintf(root, sizeof(root), "--root=%s/state", st->dir);
	snprintf(platform, sizeof(platform), "--platform=%s", st->host->platform);
	snprintf(bundle, sizeof(bundle), "%s/bundle", st->dir);
	char *argv[] = {(char *)st->host->runsc,
			root,
			platform,
			sb->plan->gateway ? "--network=host" : "--network=none",
			"--ignore-cgroups",
			"run",
			"--bundle",
			bundle,
			st->name,
			NULL};
	char *envp[] = {"PATH=/usr/bin:/bin", NULL};
	al_sys_close_range(3, ~0u, 0);
	execve(argv[0], argv, envp);
	_exit(127);
}

static void on_ready(struct al_timer *t, uint64_t expirations, void *data)
{
	struct al_sandbox *sb = data;

	(void)expirations;
	al_timer_disarm(t);
	/* From the loop, as the supervisor (made after start) expects: the
	 * scratch first, so that its confinement keeps reading it. */
	for (int k = 0; k < AL_GATEWAY_N_LISTENERS; k++)
		if (sb->state->listeners[k] >= 0)
			sb->events->listener(sb->events->data, (enum al_gateway_listener)k,
					     TAKE_FD(sb->state->listeners[k]));
	if (sb->events->scratch)
		sb->events->scratch(sb->events->data, sb->state->scratch);
	sb->events->ready(sb->events->data);
}

static void check_limits(struct al_sandbox *sb)
{
	struct al_cgroup_stats cs;

	if (!sb->cg || sb->events->meter->hit)
		return;
	al_cgroup_stats(sb->cg, &cs);
	al_meter_cgroup(sb->events->meter, &cs);
}

static void on_tick(struct al_timer *t, uint64_t expirations, void *data)
{
	(void)t;
	(void)expirations;
	check_limits(data);
}

/* runsc's exit code is the container's: 128 + N for a command killed by
 * signal N. As a wait status. */
static int wait_status(const siginfo_t *si)
{
	if (si->si_code != CLD_EXITED)
		return si->si_status & 0x7f;
	if (si->si_status > 128 && si->si_status < 128 + 65)
		return si->si_status - 128;
	return (si->si_status & 0xff) << 8;
}

static void on_pidfd(struct al_watch *w, uint32_t events, void *data)
{
	struct al_sandbox *sb = data;
	struct al_backend_state *st = sb->state;
	long r;

	(void)w;
	(void)events;
	do
		r = syscall(SYS_waitid, P_PIDFD, st->pidfd, &st->si, WEXITED, &st->ru);
	while (r < 0 && errno == EINTR);
	al_watch_removep(&st->w_pidfd);
	if (r < 0)
		return;
	st->reaped = true;
	/* Whatever the sentry left (nothing, with --attached) dies now. */
	al_cgroup_kill(sb->cg);
	check_limits(sb);
	if (!st->stopping && !sb->events->meter->hit) {
		st->reported = true;
		sb->events->exited(sb->events->data, wait_status(&st->si));
	}
	sb->events->gone(sb->events->data);
}

static int gvisor_start(struct al_sandbox *sb, struct al_error *err)
{
	struct al_backend_state *st = sb->state;
	int in[2] = {-1, -1}, out[2] = {-1, -1}, er[2] = {-1, -1}, gate[2] = {-1, -1};
	int sock[2] = {-1, -1}, tasks[AL_CGROUP_MAX_FDS], pidfd = -1, r = 0;
	size_t n_tasks = 0;
	struct clone_args args = {
	    .flags = CLONE_PIDFD, .pidfd = (uint64_t)(uintptr_t)&pidfd, .exit_signal = SIGCHLD};
	long pid;

	if (sb->cg && al_cgroup_clone_fd(sb->cg) >= 0) {
		args.flags |= CLONE_INTO_CGROUP;
		args.cgroup = (uint64_t)al_cgroup_clone_fd(sb->cg);
	} else if (sb->cg) {
		int n = al_cgroup_task_fds(sb->cg, false, tasks, AL_CGROUP_MAX_FDS, err);
		if (n < 0)
			return n;
		n_tasks = (size_t)n;
	}
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(er, O_CLOEXEC) < 0 ||
	    pipe2(gate, O_CLOEXEC) < 0 ||
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sock) < 0) {
		r = al_error_setsys(err, errno, "backend gvisor: making pipes");
		goto out;
	}
	pid = al_sys_clone3(&args, sizeof(args));
	if (pid < 0) {
		r = al_error_setsys(err, errno, "backend gvisor: starting runsc's parent");
		goto out;
	}
	if (pid == 0) {
		int stdio[3] = {in[0], out[1], er[1]};
		close(sock[0]);
		child(sb, tasks, n_tasks, sock[1], gate[0], stdio);
	}
	st->pid = (pid_t)pid;
	st->pidfd = pidfd;
	al_closep(&sock[1]);
	for (bool in_userns = false; !in_userns;) {
		char msg[300];
		int fd;
		ssize_t n = recv_msg(sock[0], msg, sizeof(msg), &fd);
		if (n == 1 && msg[0] == 'U' && fd < 0) {
			if ((r = al_gvisor_write_maps(st->pid, &st->ids, err)) < 0)
				goto out;
			if (send(sock[0], "M", 1, MSG_NOSIGNAL) != 1) {
				r = al_error_setsys(err, errno, "backend gvisor: runsc's parent");
				goto out;
			}
		} else if (n == 1 && msg[0] == 'R' && fd < 0 && st->scratch >= 0) {
			in_userns = true;
		} else if (n >= 2 && msg[0] == 'S' && fd >= 0) {
			st->scratch = fd;
		} else if (n >= 2 && msg[0] == 'L' && fd >= 0 && msg[1] >= 0 &&
			   msg[1] < AL_GATEWAY_N_LISTENERS && st->listeners[(int)msg[1]] < 0) {
			st->listeners[(int)msg[1]] = fd;
		} else {
			if (fd >= 0)
				close(fd);
			r = al_error_set(err, EIO,
					 "backend gvisor: setting up runsc's namespaces: %s",
					 n > 1 && msg[0] == 'E' ? msg + 1 : "the child ended");
			goto out;
		}
	}
	/* The child has attached the inputs: ours go. */
	al_gvisor_close_inputs(&st->inputs);
	/* --copy-in: made in the scratch as the sandbox's user's host ids,
	 * which the gofer gives the files the command makes. */
	const struct al_copy_owner own = {st->ids.uid, st->ids.gid, (uid_t)-1,
					  (gid_t)-1,   false,	    false};
	for (size_t i = 0; i < sb->plan->n_copy_in; i++) {
		const struct al_copy_in *c = &sb->plan->copy_in[i];
		if ((r = al_copy_in(c->host, c->dev, c->ino, st->scratch, c->part, &own, err)) <
		    0) {
			al_error_wrap(err, "%s", c->origin);
			goto out;
		}
	}
	st->go = TAKE_FD(gate[1]);
	sb->stdin_wr = TAKE_FD(in[1]);
	sb->stdout_rd = TAKE_FD(out[0]);
	sb->stderr_rd = TAKE_FD(er[0]);
	st->w_pidfd = al_loop_add(sb->loop, st->pidfd, EPOLLIN, on_pidfd, sb);
	st->ready = al_loop_timer(sb->loop, on_ready, sb);
	st->tick = al_loop_timer(sb->loop, on_tick, sb);
	if (!st->w_pidfd || !st->ready || !st->tick || al_timer_arm(st->ready, 1, false) < 0 ||
	    al_timer_arm(st->tick, TICK_MS, true) < 0) {
		r = al_error_setsys(err, errno ? errno : ENOMEM, "backend gvisor: watching runsc");
		goto out;
	}
	/* What a killed supervisor left, while runsc starts (as native). */
	al_sandbox_gc_cgroups(sb);
out:
	for (size_t i = 0; i < n_tasks; i++)
		close(tasks[i]);
	int *all[] = {&in[0], &in[1],	&out[0],  &out[1],  &er[0],
		      &er[1], &gate[0], &gate[1], &sock[0], &sock[1]};
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		al_closep(all[i]);
	return r;
}

static void gvisor_release(struct al_sandbox *sb)
{
	struct al_backend_state *st = sb->state;

	if (st->go >= 0 && write(st->go, "g", 1) == 1) {
		al_closep(&st->go);
		sb->events->running(sb->events->data);
		return;
	}
	sb->events->failed(sb->events->data, "release", errno, "runsc's parent is gone");
}

/* Everything of the run is in its cgroup: killing that takes runsc, the
 * gofer and the sentry with every process it runs. */
static void gvisor_stop(struct al_sandbox *sb)
{
	struct al_backend_state *st = sb->state;

	st->stopping = true;
	al_cgroup_kill(sb->cg);
	if (st->pidfd >= 0 && !st->reaped)
		al_sys_pidfd_send_signal(st->pidfd, SIGKILL);
}

/* A signal for the command goes through runsc, which forwards it to the
 * container's init (the command); SIGKILL ends everything. */
static int gvisor_kill(struct al_sandbox *sb, int sig)
{
	struct al_backend_state *st = sb->state;

	if (st->pidfd < 0 || st->reaped)
		return -ESRCH;
	if (sig == SIGKILL) {
		gvisor_stop(sb);
		return 0;
	}
	return al_sys_pidfd_send_signal(st->pidfd, sig) < 0 ? -errno : 0;
}

static void gvisor_finish(struct al_sandbox *sb, struct al_sandbox_end *end)
{
	struct al_backend_state *st = sb->state;
	long r = 0;

	memset(end, 0, sizeof(*end));
	if (!st->reaped && st->pidfd >= 0) {
		al_cgroup_kill(sb->cg);
		al_sys_pidfd_send_signal(st->pidfd, SIGKILL);
		do
			r = syscall(SYS_waitid, P_PIDFD, st->pidfd, &st->si, WEXITED, &st->ru);
		while (r < 0 && errno == EINTR);
		st->reaped = r == 0;
	}
	end->reported = st->reported;
	end->code = st->si.si_code;
	end->status = end->reported ? wait_status(&st->si) : st->si.si_status;
	end->user_us =
	    (uint64_t)st->ru.ru_utime.tv_sec * 1000000 + (uint64_t)st->ru.ru_utime.tv_usec;
	end->system_us =
	    (uint64_t)st->ru.ru_stime.tv_sec * 1000000 + (uint64_t)st->ru.ru_stime.tv_usec;
	end->empty = st->reaped;
	if (sb->cg) {
		struct al_cgroup_stats cs;
		al_cgroup_stats(sb->cg, &cs);
		if (!sb->events->meter->hit && sb->events->res->reason != AL_END_SETUP_ERROR &&
		    sb->events->res->reason != AL_END_KILLED)
			al_meter_cgroup(sb->events->meter, &cs);
		else
			al_meter_record(sb->events->meter, &cs);
	}
}

static void gvisor_destroy(struct al_sandbox *sb)
{
	struct al_backend_state *st = sb->state;
	struct al_error err = {0};

	if (!st)
		return;
	if (st->pidfd >= 0 && !st->reaped) {
		al_cgroup_kill(sb->cg);
		al_sys_pidfd_send_signal(st->pidfd, SIGKILL);
		while (waitid(P_PIDFD, (id_t)st->pidfd, &st->si, WEXITED) < 0 && errno == EINTR)
			;
		st->reaped = true;
	}
	/* The slot goes back once nothing of the run can hold its ids: runsc
	 * was reaped and its cgroup (every process of the run) is gone, or
	 * the run never started one. Otherwise `airlock gc` reclaims it. */
	bool gone = st->pidfd < 0;
	if (sb->cg) {
		al_cgroup_kill(sb->cg);
		if (al_cgroup_destroy(TAKE_PTR(sb->cg), &err) < 0)
			al_warn("warning: %s", err.msg);
		else
			gone = gone || st->reaped;
	}
	al_ids_release(&st->slot, gone);
	sb->slot_dirfd = -1;
	al_closep(&sb->stdin_wr);
	al_closep(&sb->stdout_rd);
	al_closep(&sb->stderr_rd);
	if (st->name && sb->remove_dirfd >= 0)
		al_gvisor_rmtree(sb->remove_dirfd, st->name);
	al_closep(&sb->remove_dirfd);
	state_free(sb);
}

const struct al_backend_facts al_gvisor_facts = {
    .summary = "gVisor: runsc's sentry, a second kernel in user space, between the code and "
	       "the host's",
    .files = "an OCI bundle: a read-only root of the plan's entries, host paths bound "
	     "read-only through the gofer, the scratch a tmpfs",
    .egress = "with network rules, runsc --network=host inside a network namespace made like "
	      "native's (loopback, nftables capture to the gateway's listeners); else "
	      "--network=none",
    .pids = "the sentry's own pid namespace: the host's processes are invisible",
    .kernel = "the sentry's system calls (ptrace platform), which reach the host's kernel "
	      "through a seccomp filter of gVisor's; runsc, its gofer and the sentry run as the "
	      "run's own host ids in a user namespace, never as host root",
    .limits = "the run's cgroup around runsc: the sentry's and gofer's memory and threads "
	      "count (about 45 pids for an idle shell)",
    .exec = "none in this release of airlock",
    .features = AL_BACKEND_NETWORK | AL_BACKEND_HIDES_PIDS | AL_BACKEND_PRIVATE_TMP |
		AL_BACKEND_PRIVATE_LOOPBACK | AL_BACKEND_MOUNTS_ELSEWHERE,
};

const struct al_backend_ops al_backend_gvisor = {
    .name = "gvisor",
    .facts = &al_gvisor_facts,
    .usable = gvisor_usable,
    .platform = gvisor_platform,
    .probe = gvisor_probe,
    .describe = gvisor_describe,
    .prepare = gvisor_prepare,
    .start = gvisor_start,
    .release = gvisor_release,
    .stop = gvisor_stop,
    .kill = gvisor_kill,
    .finish = gvisor_finish,
    .destroy = gvisor_destroy,
};
