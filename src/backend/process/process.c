/* The process backend's parent side: prepare (the plan lowered, the run's
 * host ids from the slot pool, the scratch, the cgroup), start (clone3
 * with no namespace, into the cgroup on v2) and destroy. The native monitor
 * watches the child from there (backend/native/monitor.c). */
#include "backend/process/process.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/native/child.h"
#include "backend/native/monitor.h"
#include "backend/native/state.h"
#include "core/cleanup.h"
#include "core/log.h"
#include "core/sys.h"
#include "core/util.h"
#include "cred/store.h"
#include "net/layout.h"

/* The scratch: a 0700 tmpfs of scratch_bytes owned by the run's uid (so
 * its size is held as on native), with the plan's faces as directories. */
static int make_scratch(struct al_sandbox *sb, struct al_process *pr, struct al_error *err)
{
	const struct al_plan *p = sb->plan;
	char tmpl[] = "/tmp/airlock-process.XXXXXX", opts[128];

	if (!mkdtemp(tmpl))
		return al_error_setsys(err, errno, "making the scratch directory %s", tmpl);
	pr->scratch = xstrdup(tmpl);
	snprintf(opts, sizeof(opts), "size=%llu,mode=0700,uid=%u,gid=%u",
		 (unsigned long long)p->scratch_bytes, (unsigned)sb->ids.uid,
		 (unsigned)sb->ids.gid);
	if (mount("airlock-scratch", pr->scratch, "tmpfs",
		  MS_NOSUID | MS_NODEV | (p->scratch_exec ? 0 : MS_NOEXEC), opts) < 0)
		return al_error_setsys(err, errno, "mounting the scratch's tmpfs on %s",
				       pr->scratch);
	pr->scratch_mounted = true;
	for (size_t i = 0; i < p->n_fs; i++) {
		const struct al_fs_entry *e = &p->fs[i];
		if (e->kind != AL_FS_SCRATCH)
			continue;
		_cleanup_free_ char *dir = xasprintf("%s/%s", pr->scratch, e->source);
		if ((mkdir(dir, 0700) < 0 && errno != EEXIST) ||
		    chown(dir, sb->ids.uid, sb->ids.gid) < 0)
			return al_error_setsys(err, errno, "making the scratch's %s", dir);
	}
	return 0;
}

/* Every process of uid gets SIGKILL, from a child that takes that uid
 * (kill(-1) then reaches exactly them), again until none is left. */
static void kill_uid(uid_t uid)
{
	pid_t pid = fork();
	int status;

	if (pid == 0) {
		if (setresuid(uid, uid, uid) < 0)
			_exit(1);
		for (int i = 0; i < 1000; i++) {
			if (kill(-1, SIGKILL) < 0 && errno == ESRCH)
				_exit(0);
			usleep(1000);
		}
		_exit(2);
	}
	if (pid > 0)
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
}

/* The scratch is removed by a helper forked once the child is released
 * (process_start: the fork then overlaps the child's steps), before the
 * supervisor confines itself (after which it can neither unmount nor
 * remove a directory of /tmp): it waits for EOF on a pipe, which comes when
 * destroy closes our end or when this process dies however it dies, then
 * unmounts and removes the scratch. It also removes the run's nftables
 * table (the supervisor has no CAP_NET_ADMIN left by then), but only when
 * destroy wrote 'd' first: everything of the run is gone. A supervisor that
 * died leaves the table in place for `airlock gc`, once the remover has
 * killed every process of the run's uid (nothing else would: no pid
 * namespace). */
static int start_remover(struct al_process *pr, uid_t uid, bool nft, struct al_error *err)
{
	int fds[2];
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return al_error_setsys(err, errno, "pipe2 for the scratch's remover");
	pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return al_error_setsys(err, errno, "forking the scratch's remover");
	}
	if (pid == 0) {
		char c;
		al_cred_wipe_copies(); /* a copy of the supervisor's memory */
		close(fds[1]);
		if (dup2(fds[0], 0) < 0)
			_exit(1);
		al_sys_close_range(1, ~0U, 0);
		ssize_t n;
		while ((n = read(0, &c, 1)) < 0 && errno == EINTR)
			;
		/* No "done": airlock died (or tears down a run it could not
		 * see end). With no pid namespace nothing else ends the
		 * command's processes (init's death reaches only its own
		 * children): kill every process of the run's uid, which is
		 * the run's alone, until none is left. */
		if (!(n == 1 && c == 'd'))
			kill_uid(uid);
		struct al_error nerr = {0};
		if (nft && n == 1 && c == 'd' && al_process_nft_del(uid, &nerr) < 0)
			al_warn("%s", nerr.msg);
		if (pr->scratch_mounted)
			(void)umount2(pr->scratch, MNT_DETACH);
		_exit(rmdir(pr->scratch) < 0 ? 1 : 0);
	}
	close(fds[0]);
	pr->remover = pid;
	pr->remover_fd = fds[1];
	return 0;
}

/* gone: nothing of the run is left (its cgroup emptied). */
static void remove_scratch(struct al_process *pr, uid_t uid, bool gone)
{
	int status;

	if (pr->remover <= 0) {
		/* No remover (the run ended before start forked it): this
		 * process is not confined yet and removes the scratch and the
		 * nftables table itself. */
		struct al_error nerr = {0};
		if (pr->nft_added && gone && al_process_nft_del(uid, &nerr) < 0)
			al_warn("%s", nerr.msg);
		if (pr->scratch_mounted && umount2(pr->scratch, MNT_DETACH) < 0)
			al_warn("unmounting the scratch %s: %s", pr->scratch, strerror(errno));
		if (pr->scratch && rmdir(pr->scratch) < 0 && errno != ENOENT)
			al_warn("the scratch %s was not removed: %s", pr->scratch, strerror(errno));
		return;
	}
	if (gone && write(pr->remover_fd, "d", 1) != 1)
		al_warn("the scratch's remover: %s", strerror(errno));
	al_closep(&pr->remover_fd);
	while (waitpid(pr->remover, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		al_warn("the scratch %s was not removed", pr->scratch);
	pr->remover = -1;
}

/* A listener of the gateway's on the host's 127.0.0.1, at a port the
 * kernel picks (fixed ports would clash between runs and with the host's
 * services). */
static int listen_host(enum al_gateway_listener kind, uint16_t *port, struct al_error *err)
{
	const struct al_listener_info *li = &al_gateway_listeners[kind];
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sin);
	int defer = li->client_first ? 10 : 0;
	_cleanup_close_ int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 || listen(fd, 128) < 0 ||
	    (defer && setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &defer, sizeof(defer)) < 0) ||
	    getsockname(fd, (struct sockaddr *)&sin, &len) < 0)
		return al_error_setsys(err, errno, "backend process: the gateway's %s on 127.0.0.1",
				       li->name);
	*port = ntohs(sin.sin_port);
	return TAKE_FD(fd);
}

/* Egress through the run's gateway: its HTTP proxy and SOCKS listeners on
 * the host's loopback, handed to it as native's are, after the socket its
 * peer check reads (any host user can connect to a loopback port: the
 * gateway serves only clients of the run's uid); then the run's nftables
 * table. No DNS listener: the sandbox resolves nothing itself (UDP is
 * refused, and landlock lets TCP reach these two ports only); names go to
 * the proxies (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY=socks5h://). */
static int start_egress(struct al_sandbox *sb, struct al_process *pr, struct al_error *err)
{
	const struct al_sandbox_events *ev = sb->events;
	static const enum al_gateway_listener kinds[2] = {AL_GATEWAY_HTTP, AL_GATEWAY_SOCKS};
	int r, diag;

	if (!ev || !ev->peers || !ev->listener)
		return al_error_set(
		    err, EOPNOTSUPP,
		    "backend process: this run has no gateway to hand listeners to");
	diag = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (diag < 0)
		return al_error_setsys(err, errno,
				       "backend process: a NETLINK_SOCK_DIAG socket for the "
				       "gateway's peer check");
	ev->peers(ev->data, sb->ids.uid, diag);
	for (size_t i = 0; i < AL_ARRAY_SIZE(kinds); i++) {
		int fd = listen_host(kinds[i], &pr->ports[i], err);
		if (fd < 0)
			return fd;
		ev->listener(ev->data, kinds[i], fd);
	}
	if ((r = al_process_nft_add(sb->ids.uid, pr->ports, AL_ARRAY_SIZE(pr->ports), err)) < 0)
		return r;
	pr->nft_added = true;
	return 0;
}

static int process_prepare(struct al_sandbox *sb, struct al_error *err)
{
	const struct al_plan *p = sb->plan;
	struct al_cgroup_limits limits = {
	    .memory_bytes = p->memory_bytes,
	    .pids = p->pids,
	    .cpu_quota_us = p->cpus_milli * AL_CPU_PERIOD_US / 1000,
	    .cpu_period_us = AL_CPU_PERIOD_US,
	    .want_cpu_time = p->cpu_time_ms != 0 || p->budget.cpu_second != 0,
	};
	struct al_backend_state *st;
	struct al_process *pr;
	int r;

	if (sb->session)
		return al_error_set(err, EOPNOTSUPP, "backend process has no sessions");
	if ((r = al_process_probe(p, err)) < 0)
		return r;
	al_native_state_new(sb);
	st = sb->state;
	st->process = pr = xcalloc(1, sizeof(*pr));
	pr->remover = -1;
	pr->remover_fd = -1;
	st->check_ready = al_process_check_ready;
	if (!p->ids_per_run)
		return al_error_set(err, EOPNOTSUPP,
				    "backend process runs as a host uid of the run's own: a fixed "
				    "range (identity.host_ids) is not supported");
	if ((r = al_ids_take(NULL, sb->run_id, &st->slot, err)) < 0)
		return al_error_wrap(err, "refusing to run");
	al_plan_host_ids(p, st->slot.slot, &sb->ids);
	sb->have_ids = true;
	sb->remove_dirfd = st->slot.dirfd;
	/* The scratch's remover is forked in start, once the child runs: the
	 * fork then overlaps the child's steps. Until then destroy removes the
	 * scratch itself (the supervisor is not confined yet). */
	if ((r = make_scratch(sb, pr, err)) < 0)
		return r;
	if (p->gateway && (r = start_egress(sb, pr, err)) < 0)
		return r;
	if ((r = al_process_lower(p, pr->scratch, pr, err)) < 0)
		return r;
	/* Every limit is held by the cgroup alone: no cgroup, no run. */
	if ((r = al_cgroup_create(&limits, &sb->cg, err)) < 0)
		return al_error_wrap(err, "backend process needs the run's cgroup");
	return 0;
}

static int process_start(struct al_sandbox *sb, struct al_error *err)
{
	struct al_backend_state *st = sb->state;
	int sync[2] = {-1, -1}, in[2] = {-1, -1}, out[2] = {-1, -1}, er[2] = {-1, -1};
	int enter[AL_CGROUP_MAX_FDS], leave[AL_CGROUP_MAX_FDS], n_cg = 0, pidfd = -1, r = 0;
	int cgfd = al_cgroup_clone_fd(sb->cg);
	struct clone_args args = {
	    .flags = CLONE_PIDFD, .pidfd = (uint64_t)(uintptr_t)&pidfd, .exit_signal = SIGCHLD};
	struct al_sync_msg go = {.type = AL_SYNC_GO};
	long pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sync) < 0 ||
	    pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(er, O_CLOEXEC) < 0) {
		r = al_error_setsys(err, errno, "process: creating pipes");
		goto out;
	}
	if (cgfd >= 0) {
		args.flags |= CLONE_INTO_CGROUP;
		args.cgroup = (uint64_t)cgfd;
	} else {
		/* v1: the child moves itself in first thing (step "cgroup"). */
		n_cg = al_cgroup_task_fds(sb->cg, false, enter, AL_CGROUP_MAX_FDS, err);
		if (n_cg >= 0 &&
		    al_cgroup_task_fds(sb->cg, true, leave, AL_CGROUP_MAX_FDS, err) != n_cg) {
			for (int i = 0; i < n_cg; i++)
				close(enter[i]);
			n_cg = -1;
		}
		if (n_cg < 0) {
			r = -EIO;
			goto out;
		}
	}
	pid = al_sys_clone3(&args, sizeof(args));
	if (pid == 0) {
		close(sync[0]);
		close(in[1]);
		close(out[0]);
		close(er[0]);
		struct al_child_fds fds = {.sync = sync[1],
					   .stdin_rd = in[0],
					   .stdout_wr = out[1],
					   .stderr_wr = er[1],
					   .n_cg = (size_t)n_cg};
		memcpy(fds.cg_enter, enter, sizeof(int) * (size_t)n_cg);
		memcpy(fds.cg_leave, leave, sizeof(int) * (size_t)n_cg);
		al_process_child(st->process, &fds, sb->ids.uid, sb->ids.gid);
	}
	for (int i = 0; i < n_cg; i++) {
		close(enter[i]);
		close(leave[i]);
	}
	if (pid < 0) {
		r = al_error_setsys(err, errno, "process: clone3");
		goto out;
	}
	st->pid = (pid_t)pid;
	st->pidfd = pidfd;
	st->sync = TAKE_FD(sync[0]);
	sb->stdin_wr = TAKE_FD(in[1]);
	sb->stdout_rd = TAKE_FD(out[0]);
	sb->stderr_rd = TAKE_FD(er[0]);
	if (send(st->sync, &go, sizeof(go), MSG_NOSIGNAL) != sizeof(go)) {
		r = al_error_setsys(err, errno, "releasing the process backend's child");
		goto out;
	}
	al_log_phase("process child released");
	/* Before the monitor starts (and the supervisor confines itself). */
	if (st->process->scratch &&
	    (r = start_remover(st->process, sb->ids.uid, sb->plan->gateway, err)) < 0)
		goto out;
out:
	al_closep(&sync[0]);
	al_closep(&sync[1]);
	al_closep(&in[0]);
	al_closep(&in[1]);
	al_closep(&out[0]);
	al_closep(&out[1]);
	al_closep(&er[0]);
	al_closep(&er[1]);
	if (r < 0)
		return r;
	/* What a killed supervisor left, while the child starts (as native). */
	al_sandbox_gc_cgroups(sb);
	return al_monitor_start(sb, err);
}

static void process_destroy(struct al_sandbox *sb)
{
	struct al_backend_state *st = sb->state;
	struct al_error err = {0};

	if (!st) {
		al_cgroup_destroy(TAKE_PTR(sb->cg), NULL);
		return;
	}
	al_monitor_release_all(sb);
	/* Kills whatever of the run is left in its cgroup (init's kill loop
	 * already did, unless init itself was killed). */
	bool gone = true;
	if (al_cgroup_destroy(TAKE_PTR(sb->cg), &err) < 0) {
		al_warn("%s", err.msg);
		gone = false;
	}
	if (st->process)
		remove_scratch(st->process, sb->ids.uid, gone);
	al_process_free(TAKE_PTR(st->process));
	al_ids_release(&st->slot, st->pid < 0 || st->reaped || st->emptied);
	sb->remove_dirfd = -1;
	al_native_state_free(sb);
}

/* Init runs as the command's uid here, so the command can kill it. */
static void process_finish(struct al_sandbox *sb, struct al_sandbox_end *end)
{
	al_monitor_finish(sb, end);
	end->init_killable = true;
}

const struct al_backend_ops al_backend_process = {
    .name = "process",
    .facts = &al_process_facts,
    .usable = al_process_usable,
    .probe = al_process_probe,
    .describe = al_process_describe,
    .prepare = process_prepare,
    .start = process_start,
    .release = al_monitor_release,
    .stop = al_monitor_stop,
    .kill = al_monitor_kill,
    .finish = process_finish,
    .destroy = process_destroy,
};
