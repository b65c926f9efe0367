#include "supervisor/supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/loop.h"
#include "core/sys.h"
#include "core/util.h"
#include "policy/seccomp.h"
#include "supervisor/sockdiag.h"
#include "sandbox/sandbox.h"
#include "supervisor/confine.h"

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

/* Where the sandbox's stdout or stderr goes: ours. Written without
 * blocking, so a reader that stops reading (a paused terminal, a full
 * pipe) cannot stall the loop and with it the timeout and the limits:
 * what does not fit waits in pending, and the sandbox's pipe is not read
 * until it is out (its writer then blocks, as it would outside). */
struct al_supervisor;

struct out {
	struct al_supervisor *l;
	int which;	    /* 0: stdout, 1: stderr */
	struct al_watch *w; /* fd, while what is pending waits for room */
	int fd;		    /* ours: 1 or 2, or a non-blocking reopening of it */
	bool own_fd;	    /* fd is that reopening (closed at the end) */
	bool socket;	    /* send(MSG_DONTWAIT) instead */
	bool can_poll;
	bool discard; /* no fd and no callback: counted, then dropped */
	char *pending;
	size_t pend_off, pend_len;
};

struct al_supervisor {
	struct al_loop *ev; /* borrowed */
	struct al_supervisor_io io;
	bool confine_self;
	int confine_dirfd;
	uint64_t start_ms;
	struct al_run_result result;
	struct al_timer *timer; /* the wall clock */
	struct al_timer *tick;	/* the limit checks */
	struct al_watch *w_pidfd, *w_sync, *w_notify;
	struct al_watch *w_src[2];	       /* the sandbox's stdout and stderr pipes */
	struct al_watch *w_stdin, *w_stdin_wr; /* our stdin, the sandbox's stdin pipe */
	unsigned ticks;			       /* fast ticks since the last full check */
	bool tick_fast; /* the tick is at TICK_FAST_MS (v1, once the command runs) */
	int notifyfd;
	int diagfd;		   /* NETLINK_SOCK_DIAG in the sandbox's netns, or -1 */
	struct al_timer *resume;   /* one-shot: watch notifyfd again */
	uint64_t pending_bytes;	   /* al_sockdiag_pending_bytes() */
	uint64_t notify_window_us; /* start of the current notification window */
	unsigned notify_count;	   /* notifications answered in it */
	uint64_t diag_next_us;	   /* no dump before this (monotonic) */
	struct al_timer *kill;	   /* grace after asking init to stop everything */
	int confine_ruleset;	   /* the supervisor's own landlock ruleset, until applied */
	struct al_gateway *gw;	   /* the egress gateway, once the child sent its listeners */
	const struct al_plan *plan;
	struct al_supervised *sv;
	struct al_cgroup *cg;
	struct al_audit *audit;
	struct al_run_result *res;
	uint32_t denied[DENIED_SLOTS]; /* syscall.denied events written, by number */
	struct out out[2];	       /* our stdout, our stderr */
	bool init_gone;
	bool running;	  /* the command was exec'd */
	bool have_status; /* AL_SYNC_EXIT arrived */
	bool limit_hit;	  /* a limit stopped the run; res->reason says which */
	int status;
	bool stdin_poll;    /* stdin is pollable; else copied when the pipe is writable */
	int stop_signals;   /* how many SIGINT/SIGTERM we were sent */
	char in_buf[65536]; /* stdin read but not yet taken by the sandbox */
	size_t in_len, in_off;
	bool in_waiting;      /* waiting for room in the sandbox's stdin pipe */
	uint64_t cpu_user_us; /* from init's report, or our rusage of it */
	uint64_t cpu_system_us;
};

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Stop watching *fd and close it. */
static void unwatch_close(struct al_watch **w, int *fd)
{
	al_watch_removep(w);
	al_closep(fd);
}

static int *src_fd(struct al_supervisor *l, int which)
{
	return which == 0 ? &l->sv->stdout_rd : &l->sv->stderr_rd;
}

static void src_close(struct al_supervisor *l, int which)
{
	unwatch_close(&l->w_src[which], src_fd(l, which));
}

static void on_kill_timer(struct al_timer *t, uint64_t expirations, void *data);

/* Stop everything in the sandbox at once, the hard way: killing the pid
 * namespace's init takes every process in it along (v2's cgroup.kill too). */
static void kill_hard(struct al_supervisor *l)
{
	if (l->init_gone || l->sv->exiting)
		return;
	al_cgroup_kill(l->cg);
	al_sys_pidfd_send_signal(l->sv->pidfd, SIGKILL);
}

/* Stop everything in the sandbox. Once the command runs, ask init to do it:
 * it SIGKILLs every other process and reaps them, so their CPU time is
 * counted (processes the kernel reaps for a dying init are not), and it
 * reports as usual. If it has not within KILL_GRACE_MS, kill it hard. */
#define KILL_GRACE_MS 200
static void kill_sandbox(struct al_supervisor *l)
{
	if (l->init_gone || l->sv->exiting)
		return;
	if (!l->running || l->kill ||
	    al_sys_pidfd_send_signal(l->sv->pidfd, AL_SIGNAL_STOP_ALL) < 0) {
		kill_hard(l);
		return;
	}
	l->kill = al_loop_timer(l->ev, on_kill_timer, l);
	if (!l->kill || al_timer_arm(l->kill, KILL_GRACE_MS, false) < 0)
		kill_hard(l);
}

static void stop_for_limit(struct al_supervisor *l, enum al_end_reason why, const char *limit,
			   uint64_t limit_value, uint64_t observed)
{
	if (l->limit_hit)
		return;
	/* A limit that tripped as the command was ending still ends the run
	 * with that reason; there is just nothing left to kill. */
	l->limit_hit = true;
	l->res->reason = why;
	al_audit_emit(l->audit, "limit.hit",
		      json_pack("{s:s, s:I, s:I}", "limit", limit, "limit_value",
				(json_int_t)limit_value, "observed", (json_int_t)observed));
	kill_sandbox(l);
}

/* v2 has no peak for socket buffers: keep the largest value read. */
static void keep_socket_peak(struct al_supervisor *l, struct al_cgroup_stats *st)
{
	if (l->res->cgroup.socket_peak > st->socket_peak)
		st->socket_peak = l->res->cgroup.socket_peak;
}

static void final_stats(struct al_supervisor *l)
{
	struct al_cgroup_stats st;

	al_cgroup_stats(l->cg, &st);
	keep_socket_peak(l, &st);
	l->res->cgroup = st;
}

/* v1: the kernel holds socket buffers to memory.kmem.tcp but may force one
 * buffer per socket past it; many sockets add up, so the run stops at
 * plan->socket_stop (docs/security.md). */
static void stop_for_socket_memory(struct al_supervisor *l, uint64_t observed)
{
	if (!l->limit_hit) {
		l->res->socket_memory = true;
		l->res->socket_stop = l->plan->socket_stop;
	}
	stop_for_limit(l, AL_END_MEMORY, "socket-memory", l->plan->socket_stop, observed);
}

static uint64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
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
 * than AL_MAX_LISTENERS listeners stop the run: the supervisor's CPU
 * spent on it stays under a tenth. charged: v1's kmem.tcp usage, or 0. */
static void check_netns_sockets(struct al_supervisor *l, uint64_t charged)
{
	struct al_sockdiag_sum lis, sum = {0};
	uint64_t stop = l->plan->socket_stop, t0 = now_us(), bound;
	int r;

	if (l->diagfd < 0 || l->limit_hit || t0 < l->diag_next_us)
		return;
	r = al_sockdiag_tcp(l->diagfd, true, 0, AL_MAX_LISTENERS, &lis);
	if (r == 1) {
		al_closep(&l->diagfd); /* the rest of the dump is still queued */
		l->res->listeners_hit = true;
		stop_for_limit(l, AL_END_MEMORY, "listeners", AL_MAX_LISTENERS, lis.listeners);
		return;
	}
	/* A waiting connection keeps the receive buffer its listener had
	 * when it was made, which may have been lowered since: assume the
	 * largest. */
	bound = lis.pending * l->pending_bytes;
	if (r == 0 && charged + bound >= stop)
		r = al_sockdiag_tcp(l->diagfd, false, charged < stop ? stop - charged : 1, 0, &sum);
	l->diag_next_us = t0 + 10 * (now_us() - t0);
	if (r < 0) {
		/* The socket may still hold part of a dump: it cannot be
		 * trusted again, and without it the bound does not hold. */
		al_warn("warning: cannot read the sandbox's socket memory (%s); stopping it",
			strerror(-r));
		al_closep(&l->diagfd);
		stop_for_socket_memory(l, 0);
		return;
	}
	if (r == 1)
		al_closep(&l->diagfd);
	if (charged + sum.bytes > l->res->cgroup.socket_peak)
		l->res->cgroup.socket_peak = charged + sum.bytes;
	if (charged + sum.bytes >= stop)
		stop_for_socket_memory(l, charged + sum.bytes);
}

static void check_limits(struct al_supervisor *l)
{
	const struct al_plan *p = l->plan;
	struct al_cgroup_stats st;

	if (!l->cg)
		return;
	al_cgroup_stats(l->cg, &st);
	l->res->have_cgroup = true;
	keep_socket_peak(l, &st);
	l->res->cgroup = st;
	if (st.oom_kills > 0)
		stop_for_limit(l, AL_END_MEMORY, "memory", p->memory_bytes, st.memory_peak);
	else if (st.pids_max_hits > 0)
		stop_for_limit(l, AL_END_PIDS, "pids", p->pids, st.pids_max_hits);
	else if (p->cpu_time_ms && st.cpu_usage_us >= p->cpu_time_ms * 1000)
		stop_for_limit(l, AL_END_CPU_TIME, "cpu-time", p->cpu_time_ms,
			       st.cpu_usage_us / 1000);
	else if (l->res->sockmem == AL_SOCKMEM_LIMITED && st.socket_bytes >= p->socket_stop)
		stop_for_socket_memory(l, st.socket_bytes);
	else
		check_netns_sockets(l, l->res->sockmem == AL_SOCKMEM_LIMITED ? st.socket_bytes : 0);
}

/* A write handle for our output fd that never blocks, sharing nothing
 * with the caller's file description (setting O_NONBLOCK on fd 1 itself
 * would change it for every process that shares it). */
static void out_open(struct al_supervisor *l, struct out *o, int which, int fd)
{
	struct stat st;
	char path[32];

	*o = (struct out){.l = l, .which = which, .fd = fd};
	if (l->io.output || fd < 0) {
		o->discard = !l->io.output;
		o->fd = -1;
		return;
	}
	if (fstat(fd, &st) < 0 || S_ISREG(st.st_mode) || S_ISBLK(st.st_mode))
		return; /* files do not block; nothing to poll */
	if (S_ISSOCK(st.st_mode)) {
		o->socket = o->can_poll = true;
		return;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	int nfd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (nfd < 0) {
		al_warn("output fd %d cannot be reopened non-blocking (%s): a reader that stops "
			"reading would also stall the timeout and the limits",
			fd, strerror(errno));
		return;
	}
	o->fd = nfd;
	o->own_fd = o->can_poll = true;
}

/* Write what we can; -EAGAIN when the rest must wait, -errno on error. */
static ssize_t out_write(struct out *o, const char *buf, size_t len)
{
	if (!o->can_poll)
		return al_write_all(o->fd, buf, len) < 0 ? -errno : (ssize_t)len;
	ssize_t n =
	    o->socket ? send(o->fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL) : write(o->fd, buf, len);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	return n;
}

static void out_ready(struct al_supervisor *l, int which);

static void on_out_ready(struct al_watch *w, uint32_t events, void *data)
{
	struct out *o = data;

	(void)w;
	(void)events;
	out_ready(o->l, o->which);
}

/* Keep what did not fit; stop reading the sandbox's pipe until it is out. */
static void out_hold(struct al_supervisor *l, int which, bool stop_src, const char *buf, size_t len)
{
	struct out *o = &l->out[which];
	char *p = xmalloc(o->pend_len + len);

	if (o->pend_len)
		memcpy(p, o->pending + o->pend_off, o->pend_len);
	memcpy(p + o->pend_len, buf, len);
	free(o->pending);
	o->pending = p;
	o->pend_off = 0;
	o->pend_len += len;
	if (stop_src)
		al_watch_set(l->w_src[which], 0);
	if (!o->w)
		o->w = al_loop_add(l->ev, o->fd, EPOLLOUT, on_out_ready, o);
	if (!o->w || al_watch_set(o->w, EPOLLOUT) < 0)
		al_debug("cannot poll output fd %d: %s", o->fd, strerror(errno));
}

static void send_out(struct al_supervisor *l, int which, const char *buf, size_t len)
{
	struct out *o = &l->out[which];

	if (l->io.output) {
		l->io.output(l->io.data, which, buf, len);
		return;
	}
	if (o->discard)
		return;
	ssize_t n = o->pend_len ? 0 : out_write(o, buf, len);

	if (n < 0) {
		/* Nobody reads our side any more (`airlock run ... | head -1`):
		 * close the sandbox's pipe too, so its writer gets EPIPE (or
		 * SIGPIPE) as it would outside the sandbox. */
		al_debug("closing the relay for fd %d: %s", which + 1, strerror((int)-n));
		src_close(l, which);
		return;
	}
	if ((size_t)n < len)
		out_hold(l, which, !o->pend_len && *src_fd(l, which) >= 0, buf + n,
			 len - (size_t)n);
}

/* Our output is writable again: flush, then read the sandbox's pipe again. */
static void out_ready(struct al_supervisor *l, int which)
{
	struct out *o = &l->out[which];
	ssize_t n = out_write(o, o->pending + o->pend_off, o->pend_len);

	if (n < 0) {
		o->pend_len = 0;
		al_watch_set(o->w, 0);
		src_close(l, which);
		return;
	}
	o->pend_off += (size_t)n;
	o->pend_len -= (size_t)n;
	if (o->pend_len)
		return;
	free(o->pending);
	o->pending = NULL;
	o->pend_off = 0;
	al_watch_set(o->w, 0);
	if (*src_fd(l, which) >= 0 && al_watch_set(l->w_src[which], EPOLLIN) < 0)
		src_close(l, which);
}

/* At the end: what is still held goes out, blocking now. */
static void out_close(struct out *o)
{
	if (o->pend_len) {
		if (o->own_fd)
			fcntl(o->fd, F_SETFL, 0);
		if (al_write_all(o->fd, o->pending + o->pend_off, o->pend_len) < 0)
			al_debug("output lost at the end: %s", strerror(errno));
	}
	free(o->pending);
	o->pending = NULL;
	o->pend_len = 0;
	al_watch_removep(&o->w);
	if (o->own_fd)
		al_closep(&o->fd);
}

static void cut_output(struct al_supervisor *l, int which)
{
	static const char marker[] = "\n[airlock: output cut at the limit]\n";

	l->res->output_truncated = true;
	send_out(l, which, marker, sizeof(marker) - 1);
	stop_for_limit(l, AL_END_OUTPUT, "output", l->plan->output_bytes,
		       l->res->stdout_bytes + l->res->stderr_bytes);
}

/* Relay one chunk from a sandbox pipe to our stdout (which 0) or stderr
 * (1), counting against the output cap. At EOF, or when our side can no
 * longer be written, the pipe is closed. */
static void relay_out(struct al_supervisor *l, int which)
{
	char buf[65536];
	uint64_t used = l->res->stdout_bytes + l->res->stderr_bytes;
	uint64_t *count = which == 0 ? &l->res->stdout_bytes : &l->res->stderr_bytes;
	ssize_t n = read(*src_fd(l, which), buf, sizeof(buf));

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		src_close(l, which);
		return;
	}
	if (l->res->output_truncated)
		return; /* past the cap: drain until the kill lands */
	size_t keep = (size_t)n;
	bool over = used + (uint64_t)n > l->plan->output_bytes;
	if (over)
		keep = (size_t)(l->plan->output_bytes - used);
	*count += keep;
	if (keep)
		send_out(l, which, buf, keep);
	if (over && *src_fd(l, which) >= 0)
		cut_output(l, which);
}

static void on_src(struct al_watch *w, uint32_t events, void *data)
{
	struct al_supervisor *l = data;

	(void)events;
	relay_out(l, w == l->w_src[0] ? 0 : 1);
}

static void stdin_done(struct al_supervisor *l)
{
	al_watch_removep(&l->w_stdin);
	l->stdin_poll = false;
	unwatch_close(&l->w_stdin_wr, &l->sv->stdin_wr);
}

/* Switch between waiting for stdin to be readable and waiting for the
 * sandbox's pipe to have room (when a chunk is left over). A stdin that
 * cannot be polled (a regular file, /dev/null) always waits for room. */
static void stdin_wait_for_room(struct al_supervisor *l, bool room)
{
	if (!l->stdin_poll || room == l->in_waiting)
		return;
	l->in_waiting = room;
	al_watch_set(l->w_stdin, room ? 0 : EPOLLIN);
	al_watch_set(l->w_stdin_wr, room ? EPOLLOUT : 0);
}

/* Write what is pending; true when all of it went. */
static bool stdin_flush(struct al_supervisor *l)
{
	while (l->in_off < l->in_len) {
		ssize_t w = write(l->sv->stdin_wr, l->in_buf + l->in_off, l->in_len - l->in_off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) {
			stdin_wait_for_room(l, true);
			return false;
		}
		if (w < 0) {
			/* The sandbox closed its end: the rest of stdin is unwanted. */
			stdin_done(l);
			return false;
		}
		l->in_off += (size_t)w;
	}
	l->in_off = l->in_len = 0;
	return true;
}

static void relay_in(struct al_supervisor *l)
{
	if (!stdin_flush(l))
		return;
	if (l->stdin_poll && l->in_waiting) {
		stdin_wait_for_room(l, false);
		return;
	}
	ssize_t n = read(l->io.stdin_fd, l->in_buf, sizeof(l->in_buf));
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		stdin_done(l); /* EOF (or an unreadable stdin): the sandbox sees EOF */
		return;
	}
	l->in_len = (size_t)n;
	stdin_flush(l);
}

/* Refused calls cost the supervisor's CPU, which no limit of the sandbox
 * covers (a loop of them took 12% of a CPU under --cpus 0.1): it answers
 * at most NOTIFY_BURST per NOTIFY_WINDOW_MS, then stops reading the
 * listener until the window is over. The callers wait in the kernel
 * meanwhile, so the sandbox is slowed, not failed. */
#define NOTIFY_WINDOW_MS 20
#define NOTIFY_BURST	 40 /* 2,000 a second */

static void on_notify_resume(struct al_timer *t, uint64_t expirations, void *data)
{
	struct al_supervisor *l = data;
	int r;

	(void)t;
	(void)expirations;
	l->notify_count = 0;
	l->notify_window_us = now_us();
	if (l->w_notify && (r = al_watch_set(l->w_notify, EPOLLIN)) < 0)
		al_warn("warning: cannot watch the seccomp listener again: %s", strerror(-r));
}

static void notify_pause(struct al_supervisor *l)
{
	if (!l->resume) {
		l->resume = al_loop_timer(l->ev, on_notify_resume, l);
		if (!l->resume)
			return; /* cannot pace: keep answering */
	}
	if (al_timer_arm(l->resume, NOTIFY_WINDOW_MS, false) < 0)
		return;
	al_watch_set(l->w_notify, 0);
}

/* A denied call waits in the kernel until we answer: log it, then fail it
 * with EPERM if the table names the call, ENOSYS if it does not (libc then
 * falls back as on an older kernel). */
static void on_notify(struct al_supervisor *l)
{
	struct seccomp_notif req;
	struct seccomp_notif_resp resp;
	const char *name;
	int e;

	/* Every wake-up counts, answered or not (a caller interrupted before
	 * we read it still cost us one). */
	uint64_t t = now_us();
	if (t - l->notify_window_us >= NOTIFY_WINDOW_MS * 1000) {
		l->notify_window_us = t;
		l->notify_count = 0;
	}
	if (++l->notify_count >= NOTIFY_BURST)
		notify_pause(l);
	memset(&req, 0, sizeof(req));
	if (ioctl(l->notifyfd, SECCOMP_IOCTL_NOTIF_RECV, &req) < 0) {
		if (errno == EINTR || errno == ENOENT)
			return;
		/* The listener is broken: refused calls would now get ENOSYS
		 * unaudited (and the sandbox could install a listener of its
		 * own). Stop the run rather than go on without it. */
		al_warn("warning: the seccomp listener failed (%s); stopping the sandbox",
			strerror(errno));
		unwatch_close(&l->w_notify, &l->notifyfd);
		kill_sandbox(l);
		return;
	}
	e = al_seccomp_answer(req.data.nr, &name);
	memset(&resp, 0, sizeof(resp));
	resp.id = req.id;
	resp.error = -e;
	if (ioctl(l->notifyfd, SECCOMP_IOCTL_NOTIF_SEND, &resp) < 0 && errno != ENOENT)
		al_debug("ignoring a failed seccomp answer: %s", strerror(errno));
	l->res->syscalls_denied++;
	uint32_t *n = &l->denied[(uint32_t)req.data.nr < DENIED_SLOTS ? (uint32_t)req.data.nr
								      : DENIED_SLOTS - 1];
	if (*n >= DENIED_EVENTS_PER_CALL)
		return;
	json_t *o = json_pack("{s:s?, s:i, s:I, s:s}", "syscall", name, "nr", req.data.nr, "pid",
			      (json_int_t)req.pid, "errno", strerrorname_np(e));
	if (++*n == DENIED_EVENTS_PER_CALL)
		json_object_set_new(o, "more",
				    json_string("later denials of this call are counted "
						"in denials.syscalls, not written"));
	al_audit_emit(l->audit, "syscall.denied", o);
}

static void on_notify_event(struct al_watch *w, uint32_t events, void *data)
{
	(void)w;
	(void)events;
	on_notify(data);
}

static int recv_msg(struct al_supervisor *l, struct al_sync_msg *m, int *ret_fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {m, sizeof(*m)};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
	ssize_t n = recvmsg(l->sv->sync, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);

	*ret_fd = -1;
	if (n < 0)
		return -errno;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
			memcpy(ret_fd, CMSG_DATA(c), sizeof(int));
	return (int)n;
}

static void send_go(struct al_supervisor *l)
{
	struct al_sync_msg go = {.type = AL_SYNC_GO};
	if (send(l->sv->sync, &go, sizeof(go), MSG_NOSIGNAL) != sizeof(go))
		kill_sandbox(l);
}

static void setup_failed(struct al_supervisor *l, const char *step, int e, const char *msg)
{
	l->res->reason = AL_END_SETUP_ERROR;
	l->res->err = e;
	snprintf(l->res->step, sizeof(l->res->step), "%s", step);
	snprintf(l->res->msg, sizeof(l->res->msg), "%s", msg);
}

/* The checks passed: from here on the supervisor needs only its open fds,
 * the run's cgroup directories, the result's directory and the right to
 * signal the sandbox. Give up the rest before the command (and its
 * traffic through the gateway's parsers) starts. The ruleset was built
 * in setup(), while the child set itself up. */
static int confine(struct al_supervisor *l)
{
	struct al_error err = {0};
	int r = al_confine_self(l->confine_ruleset, &err);

	al_closep(&l->confine_ruleset);
	if (r < 0) {
		setup_failed(l, "confine", 0, err.msg);
		return -1;
	}
	al_log_phase("supervisor confined");
	return 0;
}

/* What the supervisor keeps once it confines itself: see confine(). */
static int prepare_confinement(struct al_supervisor *l, struct al_error *err)
{
	struct al_confine c = {.out_dirfd = l->confine_dirfd,
			       .landlock_abi = l->plan->landlock_abi};

	c.n_run_dirs = c.n_parent_dirs =
	    al_cgroup_dirs(l->cg, c.run_dirs, c.parent_dirs, AL_CONFINE_MAX_DIRS);
	/* The gateway's resolver reads /etc/hosts on every lookup (it read
	 * resolv.conf when it started, with the first listener). */
	if (l->plan->gateway)
		c.read_files[c.n_read_files++] = "/etc/hosts";
	return al_confine_prepare(&c, &l->confine_ruleset, err);
}

/* Every layer is applied and the child waits: check them from outside and
 * let it go on only if all are in force (fail closed). */
static void on_ready(struct al_supervisor *l, int landlock_abi)
{
	if (l->res->reason == AL_END_SETUP_ERROR)
		return; /* already refused (and the sandbox killed): never release it */
	if (l->cg && l->res->sockmem != AL_SOCKMEM_NONE && l->diagfd < 0) {
		setup_failed(l, "verify", 0,
			     "no view of the sandbox's socket memory (NETLINK_SOCK_DIAG), so "
			     "connections waiting to be accepted would escape the memory limit");
		kill_sandbox(l);
		return;
	}
	if (l->notifyfd < 0) {
		setup_failed(l, "seccomp", 0,
			     "the supervisor has no seccomp notification listener, so refused "
			     "calls could not be answered and audited");
		kill_sandbox(l);
		return;
	}
	/* The gateway's rules were installed while the child set up; the
	 * command may not start without them. */
	if (l->sv->rules_helper > 0) {
		struct al_error err = {0};
		int r = al_gateway_rules_wait(l->sv->rules_helper, l->sv->rules_errfd, &err);
		l->sv->rules_helper = 0;
		l->sv->rules_errfd = -1;
		if (r < 0) {
			setup_failed(l, "gateway", 0, err.msg);
			kill_sandbox(l);
			return;
		}
		al_log_phase("gateway rules installed");
	}
	if (al_verify_child(l->plan, l->sv->pid, landlock_abi, l->cg, l->res) > 0) {
		for (size_t i = 0; i < l->res->n_checks; i++) {
			const struct al_layer_check *c = &l->res->checks[i];
			if (c->in_force)
				continue;
			char msg[256];
			snprintf(msg, sizeof(msg), "%s not in force: %s", c->layer, c->detail);
			setup_failed(l, "verify", 0, msg);
			break;
		}
		kill_sandbox(l);
		return;
	}
	if (l->confine_self && confine(l) < 0) {
		kill_sandbox(l);
		return;
	}
	send_go(l);
}

/* The command ended, init emptied the namespace and (cgroup v1) left the
 * run's cgroup: read the final counters. Init's own exit, with the kernel's
 * namespace teardown, need not hold up the result — except on cgroup v2,
 * where init leaves the cgroup only by exiting, so release() waits for it
 * before the cgroup is removed. */
static void on_exit_status(struct al_supervisor *l, const struct al_sync_msg *m)
{
	l->have_status = true;
	l->status = m->status;
	l->cpu_user_us = (uint64_t)m->utime_us;
	l->cpu_system_us = (uint64_t)m->stime_us;
	check_limits(l); /* also keeps the final counters in res->cgroup */
	l->sv->exiting = !l->cg || al_cgroup_clone_fd(l->cg) < 0;
}

static void on_sync(struct al_supervisor *l)
{
	struct al_sync_msg m;
	int fd = -1;
	int n = recv_msg(l, &m, &fd);

	if (n == -EINTR || n == -EAGAIN)
		return;
	if (n != (int)sizeof(m)) {
		if (fd >= 0)
			close(fd);
		unwatch_close(&l->w_sync, &l->sv->sync);
		return;
	}
	m.step[sizeof(m.step) - 1] = '\0';
	m.msg[sizeof(m.msg) - 1] = '\0';
	switch (m.type) {
	case AL_SYNC_ERROR:
		setup_failed(l, m.step, m.err, m.msg);
		break;
	case AL_SYNC_SOCKDIAG:
		if (fd >= 0 && l->diagfd < 0)
			l->diagfd = TAKE_FD(fd);
		break;
	case AL_SYNC_LISTENER:
		/* Without the listener every refused call would get ENOSYS from
		 * the kernel unaudited, and the sandbox could install a listener
		 * of its own: on_ready refuses to release the command then. */
		if (fd >= 0 && l->notifyfd < 0 &&
		    (l->w_notify = al_loop_add(l->ev, fd, EPOLLIN, on_notify_event, l)))
			l->notifyfd = TAKE_FD(fd);
		break;
	case AL_SYNC_GATEWAY:
		if (fd >= 0 && l->plan->gateway) {
			struct al_error gerr = {0};
			if (!l->gw) {
				l->gw = al_gateway_new(l->plan, l->audit, l->ev);
				/* While the child sets up, not on the way to exec. */
				if (al_gateway_prepare(l->gw, &gerr) < 0) {
					setup_failed(l, "gateway", 0, gerr.msg);
					kill_sandbox(l);
					break;
				}
			}
			if (al_gateway_listen(l->gw, (enum al_gateway_listener)m.status,
					      TAKE_FD(fd), &gerr) < 0)
				al_warn("%s", gerr.msg);
		}
		break;
	case AL_SYNC_READY:
		al_log_phase("child ready, verifying");
		on_ready(l, m.status);
		al_log_phase("verified");
		break;
	case AL_SYNC_EXEC_FAILED:
		l->res->reason = AL_END_EXEC_FAILED;
		l->res->err = m.err;
		memcpy(l->res->step, m.step, sizeof(m.step));
		memcpy(l->res->msg, m.msg, sizeof(m.msg));
		break;
	case AL_SYNC_RUNNING:
		al_log_phase("command started");
		l->running = true;
		/* Only the command can fill sockets: read the v1 socket counter
		 * every TICK_FAST_MS from now on, not during the setup. */
		if (l->res->sockmem == AL_SOCKMEM_LIMITED && l->tick &&
		    al_timer_arm(l->tick, TICK_FAST_MS, true) == 0)
			l->tick_fast = true;
		break;
	case AL_SYNC_EXIT:
		al_log_phase("command ended");
		on_exit_status(l, &m);
		break;
	default:
		al_debug("ignoring unknown sync message %u", m.type);
	}
	if (fd >= 0)
		close(fd);
}

void al_supervisor_signal(struct al_supervisor *l, int sig)
{
	if (sig == SIGINT || sig == SIGTERM)
		l->stop_signals++;
	if (!l->running || l->stop_signals > 1) {
		/* Nothing to forward to yet, or asked twice: stop it all. */
		if (!l->limit_hit && l->res->reason != AL_END_TIMEOUT) {
			l->res->reason = AL_END_KILLED;
			l->res->signal = sig;
		}
		kill_sandbox(l);
		return;
	}
	al_debug("forwarding signal %d to the sandbox", sig);
	al_sys_pidfd_send_signal(l->sv->pidfd, sig);
}

static void on_timer(struct al_timer *t, uint64_t expirations, void *data)
{
	struct al_supervisor *l = data;

	(void)t;
	(void)expirations;
	if (l->limit_hit || l->have_status)
		return;
	l->limit_hit = true;
	l->res->reason = AL_END_TIMEOUT;
	al_audit_emit(l->audit, "limit.hit",
		      json_pack("{s:s, s:I}", "limit", "timeout", "limit_value",
				(json_int_t)l->plan->timeout_ms));
	kill_sandbox(l);
}

static void on_tick(struct al_timer *t, uint64_t ticks, void *data)
{
	struct al_supervisor *l = data;
	uint64_t sock;

	(void)t;
	if (!l->tick_fast) {
		check_limits(l);
		return;
	}
	if (al_cgroup_socket_usage(l->cg, &sock) == 0 && sock >= l->plan->socket_stop) {
		stop_for_socket_memory(l, sock);
		return;
	}
	l->ticks += (unsigned)ticks;
	if (l->ticks >= TICK_MS / TICK_FAST_MS) {
		l->ticks = 0;
		check_limits(l);
	}
}

static void on_kill_timer(struct al_timer *t, uint64_t expirations, void *data)
{
	struct al_supervisor *l = data;

	(void)expirations;
	al_debug("init did not stop the sandbox in time; killing it");
	al_timer_disarm(t);
	kill_hard(l);
}

/* init is gone: keep reading sync and output until they hit EOF (the
 * kernel has killed the namespace, so they will). */
static void on_pidfd(struct al_watch *w, uint32_t events, void *data)
{
	struct al_supervisor *l = data;

	(void)w;
	(void)events;
	l->init_gone = true;
	al_watch_removep(&l->w_pidfd);
	for (int k = 0; k < 16 && l->sv->sync >= 0; k++)
		on_sync(l);
	unwatch_close(&l->w_sync, &l->sv->sync);
}

static void on_sync_event(struct al_watch *w, uint32_t events, void *data)
{
	(void)w;
	(void)events;
	on_sync(data);
}

static void on_stdin(struct al_watch *w, uint32_t events, void *data)
{
	(void)w;
	(void)events;
	relay_in(data);
}

static int setup(struct al_supervisor *l, struct al_error *err)
{
	struct stat st;
	int r;

	out_open(l, &l->out[0], 0, l->io.stdout_fd);
	out_open(l, &l->out[1], 1, l->io.stderr_fd);
	l->timer = al_loop_timer(l->ev, on_timer, l);
	if (!l->timer)
		return al_error_setsys(err, errno, "timerfd_create");
	if ((r = al_timer_arm(l->timer, l->plan->timeout_ms, false)) < 0)
		return al_error_setsys(err, -r, "timerfd_settime");
	if (!(l->w_pidfd = al_loop_add(l->ev, l->sv->pidfd, EPOLLIN, on_pidfd, l)) ||
	    !(l->w_sync = al_loop_add(l->ev, l->sv->sync, EPOLLIN, on_sync_event, l)) ||
	    !(l->w_src[0] = al_loop_add(l->ev, l->sv->stdout_rd, EPOLLIN, on_src, l)) ||
	    !(l->w_src[1] = al_loop_add(l->ev, l->sv->stderr_rd, EPOLLIN, on_src, l)) ||
	    !(l->w_stdin_wr = al_loop_add(l->ev, l->sv->stdin_wr, 0, on_stdin, l)))
		return al_error_setsys(err, errno, "epoll_ctl");
	l->pending_bytes = al_sockdiag_pending_bytes();
	if (l->confine_self && (r = prepare_confinement(l, err)) < 0)
		return r;
	if (l->cg) {
		l->tick = al_loop_timer(l->ev, on_tick, l);
		if (!l->tick || al_timer_arm(l->tick, TICK_MS, true) < 0)
			return al_error_setsys(err, errno, "timerfd for the limit checks");
	}

	/* stdin: poll it when the kernel can (pipes, ttys, sockets); a regular
	 * file or /dev/null cannot be polled, so copy from it whenever the
	 * sandbox's pipe has room. A closed stdin gives the sandbox EOF. */
	if (l->io.stdin_fd < 0 || fstat(l->io.stdin_fd, &st) < 0) {
		unwatch_close(&l->w_stdin_wr, &l->sv->stdin_wr);
	} else if ((l->w_stdin = al_loop_add(l->ev, l->io.stdin_fd, EPOLLIN, on_stdin, l))) {
		l->stdin_poll = true;
	} else if ((r = al_watch_set(l->w_stdin_wr, EPOLLOUT)) < 0) {
		return al_error_setsys(err, -r, "epoll_ctl(stdin pipe)");
	}
	if (l->sv->stdin_wr >= 0)
		fcntl(l->sv->stdin_wr, F_SETFL, O_NONBLOCK);
	return 0;
}

static int limit_exit_code(void)
{
	return 128 + SIGKILL; /* 137: the sandbox was killed by a limit */
}

static void finish(struct al_supervisor *l, uint64_t start)
{
	struct al_run_result *res = l->res;
	struct rusage ru;
	siginfo_t si;
	long w = -1;

	memset(&si, 0, sizeof(si));
	if (!l->have_status) {
		/* Killed (limit, timeout, signal) or failed during setup: wait
		 * for init, which waits for the whole pid namespace. The raw
		 * waitid gives init's own rusage (with everything it reaped),
		 * not the whole process's children's, which other runs share. */
		do
			w = syscall(SYS_waitid, P_PIDFD, l->sv->pidfd, &si, WEXITED, &ru);
		while (w < 0 && errno == EINTR);
	}
	res->wall_ms = now_ms() - start;
	if (!l->have_status) {
		/* Init and everything it reaped are ours to account now. */
		if (w == 0) {
			l->cpu_user_us =
			    (uint64_t)ru.ru_utime.tv_sec * 1000000 + (uint64_t)ru.ru_utime.tv_usec;
			l->cpu_system_us =
			    (uint64_t)ru.ru_stime.tv_sec * 1000000 + (uint64_t)ru.ru_stime.tv_usec;
		}
	}
	if (l->cg && !l->have_status) {
		/* Killed or failed: read the final counters (on a normal end
		 * on_exit_status already did, before init left the cgroup). */
		if (!l->limit_hit && res->reason != AL_END_SETUP_ERROR &&
		    res->reason != AL_END_KILLED)
			check_limits(l);
		else
			final_stats(l);
		res->have_cgroup = true;
	}
	/* Without a cpuacct hierarchy (no cpu-time limit) the CPU times come
	 * from rusage, which counts every process init reaped. */
	if (!res->cgroup.cpu_usage_us) {
		res->cgroup.cpu_user_us = l->cpu_user_us;
		res->cgroup.cpu_system_us = l->cpu_system_us;
		res->cgroup.cpu_usage_us = l->cpu_user_us + l->cpu_system_us;
	}
	res->have_cpu = true;
	switch (res->reason) {
	case AL_END_SETUP_ERROR:
		res->exit_code = 125;
		return;
	case AL_END_TIMEOUT:
		res->exit_code = 124;
		return;
	case AL_END_MEMORY:
	case AL_END_PIDS:
	case AL_END_CPU_TIME:
	case AL_END_OUTPUT:
		res->exit_code = limit_exit_code();
		return;
	case AL_END_KILLED:
		res->exit_code = 128 + res->signal;
		return;
	case AL_END_EXEC_FAILED:
		res->exit_code = res->err == ENOENT ? 127 : 126;
		return;
	default:
		break;
	}
	if (!l->have_status) {
		/* init died without a report: something killed it from outside. */
		setup_failed(l, l->running ? "supervise" : "setup", 0, "");
		snprintf(res->msg, sizeof(res->msg), "the sandbox's init died unexpectedly (%s %d)",
			 si.si_code == CLD_EXITED ? "exit" : "signal", si.si_status);
		res->exit_code = 125;
	} else if (WIFEXITED(l->status)) {
		res->reason = AL_END_EXITED;
		res->exit_code = WEXITSTATUS(l->status);
	} else {
		res->reason = AL_END_SIGNALED;
		res->signal = WTERMSIG(l->status);
		res->exit_code = 128 + res->signal;
	}
}

int al_supervisor_start(const struct al_supervisor_config *cfg, struct al_supervisor **ret,
			struct al_error *err)
{
	struct al_supervisor *l = xcalloc(1, sizeof(*l));
	int r;

	*l = (struct al_supervisor){.ev = cfg->loop,
				    .io = *cfg->io,
				    .confine_self = cfg->confine_self,
				    .confine_dirfd = cfg->confine_dirfd,
				    .start_ms = now_ms(),
				    .notifyfd = -1,
				    .diagfd = -1,
				    .confine_ruleset = -1,
				    .out = {{.fd = -1}, {.fd = -1}},
				    .plan = cfg->plan,
				    .sv = cfg->sv,
				    .cg = cfg->cg,
				    .audit = cfg->audit};
	l->res = &l->result;
	l->res->reason = AL_END_EXITED;
	l->res->sockmem = al_cgroup_socket_mode(l->cg);
	r = setup(l, err);
	if (r < 0) {
		kill_hard(l);
		al_supervisor_free(l);
		return r;
	}
	*ret = l;
	return 0;
}

bool al_supervisor_done(const struct al_supervisor *l)
{
	/* The command is gone (init reported, or init itself is gone) and its
	 * output is drained. */
	return (l->init_gone || l->have_status) && l->sv->stdout_rd < 0 && l->sv->stderr_rd < 0;
}

void al_supervisor_killed(struct al_supervisor *l, int sig)
{
	if (l->limit_hit || l->have_status || l->res->reason == AL_END_TIMEOUT ||
	    l->res->reason == AL_END_SETUP_ERROR)
		return;
	l->res->reason = AL_END_KILLED;
	l->res->signal = sig;
}

void al_supervisor_abort(struct al_supervisor *l)
{
	kill_hard(l);
}

void al_supervisor_finish(struct al_supervisor *l, struct al_run_result *res)
{
	finish(l, l->start_ms);
	if (l->gw) {
		al_gateway_close_all(l->gw); /* audits and counts connections still open */
		l->res->have_network = true;
		al_gateway_stats(l->gw, &l->res->network);
	}
	*res = l->result;
}

void al_supervisor_free(struct al_supervisor *l)
{
	struct al_supervised *sv;

	if (!l)
		return;
	sv = l->sv;
	al_gateway_free(TAKE_PTR(l->gw));
	out_close(&l->out[0]);
	out_close(&l->out[1]);
	al_watch_removep(&l->w_stdin);
	unwatch_close(&l->w_stdin_wr, &sv->stdin_wr);
	src_close(l, 0);
	src_close(l, 1);
	unwatch_close(&l->w_sync, &sv->sync);
	al_watch_removep(&l->w_pidfd);
	unwatch_close(&l->w_notify, &l->notifyfd);
	al_closep(&l->diagfd);
	al_timer_freep(&l->resume);
	al_timer_freep(&l->timer);
	al_timer_freep(&l->tick);
	al_timer_freep(&l->kill);
	al_closep(&l->confine_ruleset);
	free(l);
}
