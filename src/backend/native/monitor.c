#include "backend/native/monitor.h"

#include <errno.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend/native/capture.h"
#include "backend/native/child.h"
#include "backend/native/inputs.h"
#include "backend/native/netns.h"
#include "backend/native/sockdiag.h"
#include "backend/native/state.h"
#include "backend/native/verify.h"
#include "core/cleanup.h"
#include "core/log.h"
#include "core/sys.h"
#include "core/util.h"
#include "policy/seccomp.h"

/* syscall.denied events written per system call; later denials of the
 * same call are counted in the record but not written, so a loop of
 * denied calls cannot fill the host's disk through the audit stream. */
#define DENIED_EVENTS_PER_CALL 20
#define DENIED_SLOTS	       1024 /* by syscall number; larger ones share the last */

/* How often the cgroup counters are read for the memory, pids and
 * cpu-time limits (cgroup v1 has no usable notification for all three). */
#define TICK_MS 20
/* On cgroup v1 the kernel lets each socket charge one buffer past the
 * socket-buffer limit; a burst of new sockets adds tens of megabytes within
 * one TICK_MS, so that one counter is read (one pread) this often. */
#define TICK_FAST_MS 2
/* A session with no exec in flight runs nothing but its init, which waits
 * on its socket, as long as every exec so far had a cgroup of its own,
 * killed when the exec ended (v1, and v2 with init in a leaf): until the
 * next exec nothing in the sandbox can use memory, CPU time, pids or
 * sockets, so the tick makes one last check TICK_MS after the last exec
 * ended (what it left in the counters) and then stops until the next exec.
 * An idle session costs no wake-ups, which is what lets a daemon hold a
 * thousand of them. Once an exec ran without a cgroup of its own, what it
 * left may still run in the run's cgroup: the tick goes on. */

/* Stop: ask init first, kill it hard after this. */
#define KILL_GRACE_MS 200

/* Refused calls cost our CPU, which no limit of the sandbox covers (a loop
 * of them took 12% of a CPU under --cpus 0.1): at most NOTIFY_BURST are
 * answered per NOTIFY_WINDOW_MS, then the listener is not read until the
 * window is over. The callers wait in the kernel meanwhile, so the sandbox
 * is slowed, not failed. */
#define NOTIFY_WINDOW_MS 20
#define NOTIFY_BURST	 40 /* 2,000 a second */

struct al_monitor {
	struct al_sandbox *sb;
	struct al_backend_state *st; /* sb's */
	const struct al_plan *plan;
	const struct al_sandbox_events *ev;
	struct al_run_result *res;
	struct al_meter *meter;
	struct al_watch *w_pidfd, *w_sync, *w_notify;
	struct al_timer *tick, *kill, *resume;
	unsigned ticks; /* fast ticks since the last full check */
	bool tick_fast; /* the tick is at TICK_FAST_MS (v1, once the command runs) */
	bool tick_idle; /* a session without execs: one last check, then none */
	int notifyfd;
	int diagfd;		       /* NETLINK_SOCK_DIAG in the sandbox's netns, or -1 */
	int scratchfd;		       /* the scratch's root (AL_SYNC_SCRATCH), or -1 */
	uint64_t pending_bytes;	       /* al_sockdiag_pending_bytes() */
	uint64_t notify_window_us;     /* start of the current notification window */
	unsigned notify_count;	       /* notifications answered in it */
	uint64_t diag_next_us;	       /* no dump before this (monotonic) */
	uint32_t denied[DENIED_SLOTS]; /* syscall.denied events written, by number */
	bool init_gone;
	bool captured;	  /* the gateway's capture rules are installed */
	bool running;	  /* the command was exec'd */
	bool have_status; /* AL_SYNC_EXIT arrived */
	int status;
	uint64_t cpu_user_us, cpu_system_us; /* from init's report */
};

static uint64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/* Stop everything in the sandbox at once, the hard way: killing the pid
 * namespace's init takes every process in it along (v2's cgroup.kill too). */
static void kill_hard(struct al_monitor *m)
{
	if (m->init_gone || m->st->exiting)
		return;
	al_cgroup_kill(m->sb->cg);
	al_sys_pidfd_send_signal(m->st->pidfd, SIGKILL);
}

static void on_kill_timer(struct al_timer *t, uint64_t expirations, void *data)
{
	(void)expirations;
	al_debug("init did not stop the sandbox in time; killing it");
	al_timer_disarm(t);
	kill_hard(data);
}

static void failed(struct al_monitor *m, const char *step, int e, const char *msg)
{
	m->ev->failed(m->ev->data, step, e, msg);
}

/* Ask init to stop: a session's init by a message on its sync socket
 * (never waiting: a full socket means init does not read it), a one-shot
 * run's by AL_SIGNAL_STOP_ALL. */
static int ask_stop(struct al_sandbox *sb)
{
	struct al_sync_msg m = {.type = AL_SYNC_STOP};

	if (!sb->session)
		return al_sys_pidfd_send_signal(sb->state->pidfd, AL_SIGNAL_STOP_ALL);
	return send(sb->state->sync, &m, sizeof(m), MSG_NOSIGNAL | MSG_DONTWAIT) == sizeof(m) ? 0
											      : -1;
}

/* Once the command runs, ask init to stop everything: it SIGKILLs every
 * other process and reaps them, so their CPU time is counted (processes
 * the kernel reaps for a dying init are not), and it reports as usual. If
 * it has not within KILL_GRACE_MS, kill it hard. */
void al_monitor_stop(struct al_sandbox *sb)
{
	struct al_backend_state *st = sb->state;
	struct al_monitor *m = st->mon;

	if (!m) {
		if (st->pidfd >= 0)
			al_sys_pidfd_send_signal(st->pidfd, SIGKILL);
		return;
	}
	if (m->init_gone || st->exiting)
		return;
	if (!m->running || m->kill || ask_stop(sb) < 0) {
		kill_hard(m);
		return;
	}
	m->kill = al_loop_timer(sb->loop, on_kill_timer, m);
	if (!m->kill || al_timer_arm(m->kill, KILL_GRACE_MS, false) < 0)
		kill_hard(m);
}

void al_monitor_fail(struct al_sandbox *sb, const char *step, int e, const char *msg)
{
	if (sb->state->mon)
		failed(sb->state->mon, step, e, msg);
	al_monitor_stop(sb);
}

int al_monitor_kill(struct al_sandbox *sb, int sig)
{
	struct al_backend_state *st = sb->state;
	/* Killing pid 1 of the namespace takes every process in it along. */
	if (st->pidfd < 0 || (st->mon && st->mon->init_gone))
		return -ESRCH;
	if (sig == SIGKILL)
		al_cgroup_kill(sb->cg);
	return al_sys_pidfd_send_signal(st->pidfd, sig) < 0 ? -errno : 0;
}

/* The cgroup does not see TCP connections waiting in a listener's accept
 * queue: their buffers are charged to no cgroup until accept (v1 and v2).
 * The listeners are read (the kernel walks only its listening hash), and
 * their queue lengths bound what those connections can hold; only when
 * that bound, with what v1's socket counter already holds outside
 * memory.limit_in_bytes, reaches the stop point are the waiting
 * connections themselves added up (the kernel then walks its whole
 * established hash). Either dump's cost grows with what the sandbox
 * made, so the next waits ten times as long as this one took, and more
 * than AL_MAX_LISTENERS listeners stop the run: the CPU spent on it stays
 * under a tenth. charged: v1's kmem.tcp usage, or 0. */
static void check_netns_sockets(struct al_monitor *m, uint64_t charged)
{
	struct al_sockdiag_sum lis, sum = {0};
	uint64_t stop = m->plan->socket_stop, t0 = now_us(), bound;
	int r;

	if (m->diagfd < 0 || m->meter->hit || t0 < m->diag_next_us)
		return;
	r = al_sockdiag_tcp(m->diagfd, true, 0, AL_MAX_LISTENERS, &lis);
	if (r == 1) {
		al_closep(&m->diagfd); /* the rest of the dump is still queued */
		al_meter_listeners(m->meter, lis.listeners);
		return;
	}
	/* A waiting connection keeps the receive buffer its listener had
	 * when it was made, which may have been lowered since: assume the
	 * largest. */
	bound = lis.pending * m->pending_bytes;
	if (r == 0 && charged + bound >= stop)
		r = al_sockdiag_tcp(m->diagfd, false, charged < stop ? stop - charged : 1, 0, &sum);
	m->diag_next_us = t0 + 10 * (now_us() - t0);
	if (r < 0) {
		/* The socket may still hold part of a dump: it cannot be
		 * trusted again, and without it the bound does not hold. */
		al_warn("warning: cannot read the sandbox's socket memory (%s); stopping it",
			strerror(-r));
		al_closep(&m->diagfd);
		al_meter_socket_memory_lost(m->meter);
		return;
	}
	if (r == 1)
		al_closep(&m->diagfd);
	al_meter_socket_memory(m->meter, charged + sum.bytes);
}

static void check_limits(struct al_monitor *m)
{
	struct al_cgroup_stats st;

	if (!m->sb->cg)
		return;
	al_cgroup_stats(m->sb->cg, &st);
	/* An exec's own memory limit ends that exec, not the run. */
	if (m->sb->session) {
		uint64_t own = al_monitor_exec_ooms(m->sb);
		st.oom_kills -= own < st.oom_kills ? own : st.oom_kills;
	}
	al_meter_cgroup(m->meter, &st);
	if (!m->meter->hit)
		check_netns_sockets(m, m->res->sockmem == AL_SOCKMEM_LIMITED ? st.socket_bytes : 0);
}

static void on_tick(struct al_timer *t, uint64_t ticks, void *data)
{
	struct al_monitor *m = data;
	uint64_t sock;

	(void)t;
	if (!m->tick_fast) {
		check_limits(m);
		return;
	}
	if (al_cgroup_socket_usage(m->sb->cg, &sock) == 0 && sock >= m->plan->socket_stop) {
		al_meter_socket_memory(m->meter, sock);
		return;
	}
	m->ticks += (unsigned)ticks;
	if (m->ticks >= TICK_MS / TICK_FAST_MS) {
		m->ticks = 0;
		check_limits(m);
	}
}

/* The tick for what the sandbox runs now, once the command or session
 * runs (see TICK_FAST_MS and the idle session above TICK_MS's users). */
static void tick_retune(struct al_monitor *m)
{
	bool idle, fast;

	if (!m->tick || !m->running)
		return;
	idle = m->sb->session && m->st->n_execs == 0 && !m->st->exec_uncontained;
	/* Only the command can fill sockets: the v1 socket counter is read
	 * every TICK_FAST_MS while it runs, not during the setup. */
	fast = !idle && m->res->sockmem == AL_SOCKMEM_LIMITED;
	if (idle == m->tick_idle && fast == m->tick_fast)
		return;
	if (al_timer_arm(m->tick, fast ? TICK_FAST_MS : TICK_MS, !idle) < 0) {
		/* Without the tick no limit would be read while an exec runs. */
		if (!idle)
			al_monitor_fail(m->sb, "cgroup tick", errno,
					"cannot re-arm the limit checks");
		return;
	}
	m->tick_idle = idle;
	m->tick_fast = fast;
	m->ticks = 0;
}

void al_monitor_execs_changed(struct al_sandbox *sb)
{
	if (sb->state && sb->state->mon)
		tick_retune(sb->state->mon);
}

static void on_notify_resume(struct al_timer *t, uint64_t expirations, void *data)
{
	struct al_monitor *m = data;
	int r;

	(void)t;
	(void)expirations;
	m->notify_count = 0;
	m->notify_window_us = now_us();
	if (m->w_notify && (r = al_watch_set(m->w_notify, EPOLLIN)) < 0)
		al_warn("warning: cannot watch the seccomp listener again: %s", strerror(-r));
}

static void notify_pause(struct al_monitor *m)
{
	if (!m->resume) {
		m->resume = al_loop_timer(m->sb->loop, on_notify_resume, m);
		if (!m->resume)
			return; /* cannot pace: keep answering */
	}
	if (al_timer_arm(m->resume, NOTIFY_WINDOW_MS, false) < 0)
		return;
	al_watch_set(m->w_notify, 0);
}

/* A denied call waits in the kernel until we answer: log it, then fail it
 * with EPERM if the table names the call, ENOSYS if it does not (libc then
 * falls back as on an older kernel). */
static void on_notify(struct al_watch *w, uint32_t events, void *data)
{
	struct al_monitor *m = data;
	struct seccomp_notif req;
	struct seccomp_notif_resp resp;
	const char *name;
	int e;

	(void)w;
	(void)events;
	/* Every wake-up counts, answered or not (a caller interrupted before
	 * we read it still cost us one). */
	uint64_t t = now_us();
	if (t - m->notify_window_us >= NOTIFY_WINDOW_MS * 1000) {
		m->notify_window_us = t;
		m->notify_count = 0;
	}
	if (++m->notify_count >= NOTIFY_BURST)
		notify_pause(m);
	memset(&req, 0, sizeof(req));
	if (ioctl(m->notifyfd, SECCOMP_IOCTL_NOTIF_RECV, &req) < 0) {
		if (errno == EINTR || errno == ENOENT)
			return;
		/* The listener is broken: refused calls would now get ENOSYS
		 * unaudited (and the sandbox could install a listener of its
		 * own). Stop the run rather than go on without it. */
		al_warn("warning: the seccomp listener failed (%s); stopping the sandbox",
			strerror(errno));
		al_watch_removep(&m->w_notify);
		al_closep(&m->notifyfd);
		al_monitor_stop(m->sb);
		return;
	}
	e = al_seccomp_answer(req.data.nr, &name);
	memset(&resp, 0, sizeof(resp));
	resp.id = req.id;
	resp.error = -e;
	if (ioctl(m->notifyfd, SECCOMP_IOCTL_NOTIF_SEND, &resp) < 0 && errno != ENOENT)
		al_debug("ignoring a failed seccomp answer: %s", strerror(errno));
	m->res->syscalls_denied++;
	al_result_note_denied_call(m->res, name);
	uint32_t *n = &m->denied[(uint32_t)req.data.nr < DENIED_SLOTS ? (uint32_t)req.data.nr
								      : DENIED_SLOTS - 1];
	if (*n >= DENIED_EVENTS_PER_CALL)
		return;
	json_t *o = json_pack("{s:s?, s:i, s:I, s:s}", "syscall", name, "nr", req.data.nr, "pid",
			      (json_int_t)req.pid, "errno", strerrorname_np(e));
	if (++*n == DENIED_EVENTS_PER_CALL)
		json_object_set_new(o, "more",
				    json_string("later denials of this call are counted "
						"in denials.syscalls, not written"));
	al_audit_emit(m->sb->audit, "syscall.denied", o);
}

static int recv_msg(struct al_monitor *m, struct al_sync_msg *msg, int *ret_fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {msg, sizeof(*msg)};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
	ssize_t n = recvmsg(m->st->sync, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);

	*ret_fd = -1;
	if (n < 0)
		return -errno;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
			memcpy(ret_fd, CMSG_DATA(c), sizeof(int));
	return (int)n;
}

void al_monitor_release(struct al_sandbox *sb)
{
	struct al_backend_state *st = sb->state;
	struct al_sync_msg go = {.type = AL_SYNC_GO};

	if (send(st->sync, &go, sizeof(go), MSG_NOSIGNAL | MSG_DONTWAIT) != sizeof(go))
		al_monitor_stop(sb);
}

/* The child opened a netfilter socket in its network namespace early in
 * its setup and goes on building its root while we send the capture
 * rules on it: the kernel checks CAP_NET_ADMIN of both (the child's from
 * when it opened the socket; ours in the namespace's owner, which root and
 * the user namespace's owner have). */
static void install_capture(struct al_monitor *m, int fd)
{
	struct al_error err = {0};
	int r = al_capture_install(fd, &err);

	close(fd);
	if (r < 0) {
		failed(m, "gateway", -r, err.msg);
		al_monitor_stop(m->sb);
		return;
	}
	m->captured = true;
	al_log_phase("gateway rules installed");
}

/* Every layer is applied and the child waits: check them from outside and
 * report ready only if all are in force (fail closed). */
static void on_ready(struct al_monitor *m, int landlock_abi)
{
	struct al_sandbox *sb = m->sb;
	struct al_backend_state *st = m->st;

	if (m->res->reason == AL_END_SETUP_ERROR)
		return; /* already refused (and the sandbox stopped): never release it */
	if (st->check_ready) {
		char msg[256] = "";
		if (m->notifyfd < 0 || st->check_ready(sb, landlock_abi, msg, sizeof(msg)) < 0) {
			failed(m, "verify", 0,
			       m->notifyfd < 0 ? "no seccomp notification listener" : msg);
			al_monitor_stop(sb);
			return;
		}
		m->ev->ready(m->ev->data);
		return;
	}
	if (sb->cg && m->res->sockmem != AL_SOCKMEM_NONE && m->diagfd < 0) {
		failed(m, "verify", 0,
		       "no view of the sandbox's socket memory (NETLINK_SOCK_DIAG), so "
		       "connections waiting to be accepted would escape the memory limit");
		al_monitor_stop(sb);
		return;
	}
	if (m->plan->gateway && !m->captured) {
		failed(m, "gateway", 0,
		       "the transparent-capture rules were not installed (the command may not "
		       "start without them)");
		al_monitor_stop(sb);
		return;
	}
	if (!st->lowered) {
		failed(m, "verify", 0, "a sandbox without the native plan reported ready");
		al_monitor_stop(sb);
		return;
	}
	if (m->notifyfd < 0) {
		failed(m, "seccomp", 0,
		       "the supervisor has no seccomp notification listener, so refused "
		       "calls could not be answered and audited");
		al_monitor_stop(sb);
		return;
	}
	if (al_verify_child(m->plan, st->lowered, st->pid, sb->verify_all ? st->userns : -1,
			    st->userns, landlock_abi, sb->cg, m->res) > 0) {
		for (size_t i = 0; i < m->res->n_checks; i++) {
			const struct al_layer_check *c = &m->res->checks[i];
			if (c->in_force)
				continue;
			char msg[256];
			snprintf(msg, sizeof(msg), "%s not in force: %s", c->layer, c->detail);
			failed(m, "verify", 0, msg);
			break;
		}
		al_monitor_stop(sb);
		return;
	}
	/* The tree is checked and init waits: nothing but our own code runs
	 * in the sandbox while the copies go in. */
	struct al_error err = {0};
	if (al_native_fill_scratch(st->lowered, m->plan, m->scratchfd, &err) < 0) {
		failed(m, "copy-in", err.code, err.msg);
		al_monitor_stop(sb);
		return;
	}
	m->ev->ready(m->ev->data);
}

static bool sb_wants_scratch(const struct al_monitor *m)
{
	return m->st->lowered && m->st->lowered->want_scratch;
}

/* The command ended, init emptied the namespace and (cgroup v1) left the
 * run's cgroup: read the final counters. Init's own exit, with the kernel's
 * namespace teardown, need not hold up the result — except on cgroup v2,
 * where init leaves the cgroup only by exiting, so release waits for it
 * before the cgroup is removed. */
static void on_exit_status(struct al_monitor *m, const struct al_sync_msg *msg)
{
	m->have_status = true;
	m->status = msg->status;
	m->cpu_user_us = (uint64_t)msg->utime_us;
	m->cpu_system_us = (uint64_t)msg->stime_us;
	check_limits(m); /* also keeps the final counters in res->cgroup */
	m->st->exiting = !m->sb->cg || al_cgroup_clone_fd(m->sb->cg) < 0;
	m->st->emptied = true;
	m->ev->exited(m->ev->data, msg->status);
}

static void on_sync(struct al_monitor *m)
{
	struct al_sync_msg msg;
	int fd = -1;
	int n = recv_msg(m, &msg, &fd);

	if (n == -EINTR || n == -EAGAIN)
		return;
	if (n != (int)sizeof(msg)) {
		if (fd >= 0)
			close(fd);
		al_watch_removep(&m->w_sync);
		al_closep(&m->st->sync);
		return;
	}
	msg.step[sizeof(msg.step) - 1] = '\0';
	msg.msg[sizeof(msg.msg) - 1] = '\0';
	switch (msg.type) {
	case AL_SYNC_ERROR:
		failed(m, msg.step, msg.err, msg.msg);
		break;
	case AL_SYNC_SOCKDIAG:
		if (fd >= 0 && m->diagfd < 0)
			m->diagfd = TAKE_FD(fd);
		break;
	case AL_SYNC_LISTENER:
		/* Without the listener every refused call would get ENOSYS from
		 * the kernel unaudited, and the sandbox could install a listener
		 * of its own: on_ready refuses to release the command then. */
		if (fd >= 0 && m->notifyfd < 0 &&
		    (m->w_notify = al_loop_add(m->sb->loop, fd, EPOLLIN, on_notify, m)))
			m->notifyfd = TAKE_FD(fd);
		break;
	case AL_SYNC_CAPTURE:
		if (fd >= 0 && m->plan->gateway && !m->captured)
			install_capture(m, TAKE_FD(fd));
		break;
	case AL_SYNC_GATEWAY:
		if (fd >= 0 && m->plan->gateway && (unsigned)msg.status < AL_GATEWAY_N_LISTENERS)
			m->ev->listener(m->ev->data, (enum al_gateway_listener)msg.status,
					TAKE_FD(fd));
		break;
	case AL_SYNC_SCRATCH:
		if (fd >= 0 && m->scratchfd < 0 && sb_wants_scratch(m)) {
			m->scratchfd = TAKE_FD(fd);
			if (m->ev->scratch)
				m->ev->scratch(m->ev->data, m->scratchfd);
		}
		break;
	case AL_SYNC_TERMINAL:
		if (fd >= 0 && m->plan->tty)
			m->ev->terminal(m->ev->data, TAKE_FD(fd));
		break;
	case AL_SYNC_READY:
		al_log_phase("child ready, verifying");
		on_ready(m, msg.status);
		al_log_phase("verified");
		break;
	case AL_SYNC_EXEC_FAILED:
		m->ev->exec_failed(m->ev->data, msg.err, msg.msg);
		break;
	case AL_SYNC_RUNNING:
		al_log_phase("command started");
		m->running = true;
		tick_retune(m);
		m->ev->running(m->ev->data);
		break;
	case AL_SYNC_EXIT:
		al_log_phase("command ended");
		on_exit_status(m, &msg);
		break;
	default:
		if (!al_monitor_exec_msg(m->sb, &msg, &fd))
			al_debug("ignoring unknown sync message %u", msg.type);
	}
	if (fd >= 0)
		close(fd);
}

static void on_sync_event(struct al_watch *w, uint32_t events, void *data)
{
	(void)w;
	(void)events;
	on_sync(data);
}

/* init is gone: read what it still said (the kernel has killed the
 * namespace, so the socket ends), then report. */
static void on_pidfd(struct al_watch *w, uint32_t events, void *data)
{
	struct al_monitor *m = data;

	(void)w;
	(void)events;
	m->init_gone = true;
	al_watch_removep(&m->w_pidfd);
	for (int k = 0; k < 16 && m->st->sync >= 0; k++)
		on_sync(m);
	al_watch_removep(&m->w_sync);
	al_closep(&m->st->sync);
	m->ev->gone(m->ev->data);
}

int al_monitor_start(struct al_sandbox *sb, struct al_error *err)
{
	struct al_backend_state *st = sb->state;
	struct al_monitor *m = xcalloc(1, sizeof(*m));

	*m = (struct al_monitor){.sb = sb,
				 .st = st,
				 .plan = sb->plan,
				 .ev = sb->events,
				 .res = sb->events->res,
				 .meter = sb->events->meter,
				 .notifyfd = -1,
				 .diagfd = -1,
				 .scratchfd = -1};
	st->mon = m;
	m->res->sockmem = al_cgroup_socket_mode(sb->cg);
	m->pending_bytes = al_sockdiag_pending_bytes();
	if (st->join) {
		/* The engine's namespace was set up by us (netns.h): its rules
		 * are in force, its socket view and listeners are ours. */
		m->diagfd = al_netns_join_take_diag(st->join);
		m->captured = al_netns_join_captured(st->join);
		for (int k = 0; sb->plan->gateway && k < AL_GATEWAY_N_LISTENERS; k++) {
			int fd = al_netns_join_take_listener(st->join, (enum al_gateway_listener)k);
			if (fd >= 0)
				m->ev->listener(m->ev->data, (enum al_gateway_listener)k, fd);
		}
	}
	if (!(m->w_pidfd = al_loop_add(sb->loop, st->pidfd, EPOLLIN, on_pidfd, m)) ||
	    !(m->w_sync = al_loop_add(sb->loop, st->sync, EPOLLIN, on_sync_event, m)))
		return al_error_setsys(err, errno, "epoll_ctl");
	if (sb->cg) {
		m->tick = al_loop_timer(sb->loop, on_tick, m);
		if (!m->tick || al_timer_arm(m->tick, TICK_MS, true) < 0)
			return al_error_setsys(err, errno, "timerfd for the limit checks");
	}
	return 0;
}

void al_monitor_finish(struct al_sandbox *sb, struct al_sandbox_end *end)
{
	struct al_backend_state *st = sb->state;
	struct al_monitor *m = st->mon;
	struct rusage ru;
	siginfo_t si;
	long w = -1;

	memset(end, 0, sizeof(*end));
	memset(&si, 0, sizeof(si));
	if (m && m->have_status) {
		end->reported = true;
		end->status = m->status;
		end->user_us = m->cpu_user_us;
		end->system_us = m->cpu_system_us;
		end->empty = true; /* init emptied the namespace before it said so */
		return;
	}
	/* Killed (limit, timeout, signal) or failed during setup: wait for
	 * init, which waits for the whole pid namespace. The raw waitid gives
	 * init's own rusage (with everything it reaped), not that of all this
	 * process's children, which other runs share. */
	if (st->pidfd >= 0) {
		do
			w = syscall(SYS_waitid, P_PIDFD, st->pidfd, &si, WEXITED, &ru);
		while (w < 0 && errno == EINTR);
	}
	if (w == 0) {
		end->code = si.si_code;
		end->status = si.si_status;
		end->user_us =
		    (uint64_t)ru.ru_utime.tv_sec * 1000000 + (uint64_t)ru.ru_utime.tv_usec;
		end->system_us =
		    (uint64_t)ru.ru_stime.tv_sec * 1000000 + (uint64_t)ru.ru_stime.tv_usec;
	}
	st->exiting = true; /* reaped */
	st->reaped = w == 0;
	end->empty = w == 0;
	if (sb->cg && m) {
		/* Read the final counters (on a normal end on_exit_status
		 * already did, before init left the cgroup); only a run nothing
		 * else ended may still end for a limit now. */
		struct al_cgroup_stats cs;
		al_cgroup_stats(sb->cg, &cs);
		if (!m->meter->hit && m->res->reason != AL_END_SETUP_ERROR &&
		    m->res->reason != AL_END_KILLED) {
			al_meter_cgroup(m->meter, &cs);
			if (!m->meter->hit)
				check_netns_sockets(
				    m, m->res->sockmem == AL_SOCKMEM_LIMITED ? cs.socket_bytes : 0);
		} else {
			al_meter_record(m->meter, &cs);
		}
	}
}

static bool wait_init(int pidfd)
{
	siginfo_t si;
	int r;

	while ((r = waitid(P_PIDFD, (id_t)pidfd, &si, WEXITED)) < 0 && errno == EINTR)
		;
	return r == 0;
}

void al_monitor_release_all(struct al_sandbox *sb)
{
	struct al_backend_state *st = sb->state;
	struct al_monitor *m = st->mon;
	siginfo_t si;

	if (m) {
		al_watch_removep(&m->w_pidfd);
		al_watch_removep(&m->w_sync);
		al_watch_removep(&m->w_notify);
		al_closep(&m->notifyfd);
		al_closep(&m->diagfd);
		al_closep(&m->scratchfd);
		al_timer_freep(&m->tick);
		al_timer_freep(&m->kill);
		al_timer_freep(&m->resume);
		free(m);
		st->mon = NULL;
	}
	/* An init that reported the end holds no other process and is already
	 * in exit(): reap it if done, else leave the zombie to our own exit
	 * (the CLI) or a later waitid on the pidfd. Anything else is killed
	 * and waited for, which waits for the whole pid namespace. */
	if (st->pidfd >= 0 && st->exiting && !st->reaped) {
		si.si_pid = 0;
		if (waitid(P_PIDFD, (id_t)st->pidfd, &si, WEXITED | WNOHANG) == 0 && si.si_pid)
			st->reaped = true;
	} else if (st->pidfd >= 0 && !st->reaped &&
		   al_sys_pidfd_send_signal(st->pidfd, SIGKILL) == 0) {
		st->reaped = wait_init(st->pidfd);
	}
	al_monitor_exec_release_all(sb);
	al_closep(&st->pidfd);
	al_closep(&st->userns);
	al_closep(&st->sync);
	al_closep(&sb->stdin_wr);
	al_closep(&sb->stdout_rd);
	al_closep(&sb->stderr_rd);
}
