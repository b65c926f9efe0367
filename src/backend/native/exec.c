/* The supervisor's side of a session's execs (native and fake backends):
 * the request to init with the exec's stdio attached, its own cgroup, the
 * go once it is in there, its end; signals through its pidfd. */
#include "backend/native/monitor.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "backend/native/state.h"
#include "cgroup/child.h"
#include "core/cleanup.h"
#include "core/log.h"
#include "core/sys.h"
#include "core/util.h"

struct al_native_exec {
	uint32_t id;
	pid_t pid; /* host pid, once started */
	int pidfd;
	struct al_cgroup_child *cg; /* NULL: none of its own */
};

static struct al_native_exec *find(struct al_backend_state *st, uint32_t id)
{
	for (size_t i = 0; i < st->n_execs; i++)
		if (st->execs[i].id == id)
			return &st->execs[i];
	return NULL;
}

static void forget(struct al_backend_state *st, struct al_native_exec *x)
{
	al_closep(&x->pidfd);
	al_cgroup_child_destroy(TAKE_PTR(x->cg));
	*x = st->execs[--st->n_execs];
}

/* The request, with the exec's three stdio fds attached (fds NULL: none,
 * a terminal exec). */
static int send_exec(int sync, const void *buf, size_t len, const int fds[3])
{
	char cbuf[CMSG_SPACE(3 * sizeof(int))];
	struct iovec iov = {(void *)buf, len};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	ssize_t n;

	memset(cbuf, 0, sizeof(cbuf));
	if (fds) {
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(3 * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, 3 * sizeof(int));
	} else {
		mh.msg_control = NULL;
		mh.msg_controllen = 0;
	}
	do
		n = sendmsg(sync, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	return n == (ssize_t)len ? 0 : n < 0 ? -errno : -EIO;
}

int al_monitor_exec(struct al_sandbox *sb, const struct al_sandbox_exec *x, struct al_error *err)
{
	struct al_backend_state *st = sb->state;
	_cleanup_free_ char *buf = NULL;
	struct al_cgroup_child *cg = NULL;
	char name[32];
	ssize_t len;
	int r;

	if (!st || st->sync < 0)
		return al_error_set(err, ESRCH, "the sandbox is gone");
	if (x->id == 0 || find(st, x->id))
		return al_error_set(err, EEXIST, "exec id %u is taken", (unsigned)x->id);
	buf = xmalloc(AL_EXEC_MSG_MAX);
	len = al_exec_pack(buf, x->id, x->argv, x->env, x->cwd);
	if (len == -EINVAL)
		return al_error_set(err, EINVAL,
				    "exec: argv needs a non-empty first word, and each env entry "
				    "NAME=VALUE");
	if (len < 0)
		return al_error_set(err, E2BIG,
				    "exec: argv, env and cwd take more than %d bytes or %d strings",
				    AL_EXEC_MSG_MAX, AL_EXEC_MAX_ARGS);
	if (x->tty) {
		struct al_sync_exec h;
		memcpy(&h, buf, sizeof(h));
		h.flags |= AL_EXEC_FLAG_TTY;
		h.rows = x->rows;
		h.cols = x->cols;
		memcpy(buf, &h, sizeof(h));
	}
	snprintf(name, sizeof(name), "exec-%u", (unsigned)x->id);
	if ((r = al_cgroup_child_create(sb->cg, name, x->memory_bytes, x->pids, &cg, err)) < 0)
		return al_error_wrap(err, "exec %u", (unsigned)x->id);
	/* Without a cgroup of its own nothing would hold its limit: refused,
	 * not ignored. */
	if (!cg && x->memory_asked)
		return al_error_set(
		    err, EOPNOTSUPP,
		    "exec %u: memory_bytes: an exec's own memory limit needs a cgroup "
		    "of its own, which this sandbox cannot give it (%s); leave it "
		    "out to share the sandbox's",
		    (unsigned)x->id,
		    !sb->cg ? "it has no cgroup"
			    : "cgroup v2, the sandbox's cgroup made without exec cgroups");
	const int fds[3] = {x->stdin_rd, x->stdout_wr, x->stderr_wr};
	/* Never waits on init: with its socket full (requests it has not
	 * read yet) this exec is refused, nothing started, and may be asked
	 * for again. */
	if ((r = send_exec(st->sync, buf, (size_t)len, x->tty ? NULL : fds)) < 0) {
		al_cgroup_child_destroy(cg);
		if (r == -EAGAIN)
			return al_error_set(err, EAGAIN,
					    "exec %u: the sandbox's init has not yet read the "
					    "requests before it; try again",
					    (unsigned)x->id);
		return al_error_setsys(
		    err, -r, "exec %u: sending the request to the sandbox's init", (unsigned)x->id);
	}
	struct al_native_exec *grown = realloc(st->execs, (st->n_execs + 1) * sizeof(*grown));
	if (!grown)
		abort();
	st->execs = grown;
	st->execs[st->n_execs++] = (struct al_native_exec){.id = x->id, .pidfd = -1, .cg = cg};
	if (!cg)
		st->exec_uncontained = true;
	al_monitor_execs_changed(sb);
	return 0;
}

/* The pid a pidfd stands for, in our pid namespace (its fdinfo). */
static pid_t pidfd_pid(int pidfd)
{
	char path[64], buf[1024];
	const char *p;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
	if (al_read_file(path, buf, sizeof(buf)) <= 0 || !(p = strstr(buf, "\nPid:")))
		return -1;
	long v = strtol(p + 5, NULL, 10);
	return v > 0 ? (pid_t)v : -1;
}

/* Never waits on init: a go that does not fit in its socket means init
 * does not read it (an exec would wait at its gate forever, and the next
 * send would block us): the sandbox is stopped, saying so. */
static void go(struct al_sandbox *sb, uint32_t id, bool ok)
{
	struct al_sync_msg m = {.type = AL_SYNC_EXEC_GO, .exec_id = id, .status = ok ? 0 : 1};
	ssize_t n = send(sb->state->sync, &m, sizeof(m), MSG_NOSIGNAL | MSG_DONTWAIT);
	int e = n < 0 ? errno : EIO;
	char msg[160];

	if (n == (ssize_t)sizeof(m))
		return;
	snprintf(msg, sizeof(msg), "exec %u: the sandbox's init did not take its go (%s); stopped",
		 (unsigned)id, strerror(e));
	al_monitor_fail(sb, "session", e, msg);
}

static void on_started(struct al_sandbox *sb, const struct al_sync_msg *msg, int *fd)
{
	struct al_backend_state *st = sb->state;
	struct al_native_exec *x = find(st, msg->exec_id);
	struct al_error err = {0};

	if (!x || x->pidfd >= 0 || *fd < 0) {
		go(sb, msg->exec_id, false);
		return;
	}
	x->pidfd = TAKE_FD(*fd);
	x->pid = pidfd_pid(x->pidfd);
	/* It waits for the go: moved into its cgroup first, everything it
	 * starts is counted there. */
	if (x->pid <= 0 || al_cgroup_child_attach(x->cg, x->pid, &err) < 0) {
		al_warn("warning: exec %u: %s", (unsigned)x->id,
			err.msg[0] ? err.msg : "no host pid for it");
		go(sb, x->id, false);
		return;
	}
	go(sb, x->id, true);
	if (sb->exec_events)
		sb->exec_events->started(sb->exec_events->data, x->id, x->pid);
}

static void on_end(struct al_sandbox *sb, const struct al_sync_msg *msg)
{
	struct al_backend_state *st = sb->state;
	struct al_native_exec *x = find(st, msg->exec_id);
	struct al_cgroup_child_stats cs;
	uint64_t user = (uint64_t)msg->utime_us, sys = (uint64_t)msg->stime_us;

	if (!x)
		return;
	/* What it left running goes with it (orphans init would reap). */
	al_cgroup_child_kill(x->cg);
	al_cgroup_child_stats(x->cg, &cs);
	st->exec_ooms += cs.oom_kills;
	if (x->cg) { /* its cgroup also counts what its children left to init */
		user = cs.cpu_user_us > user ? cs.cpu_user_us : user;
		sys = cs.cpu_system_us > sys ? cs.cpu_system_us : sys;
	}
	uint32_t id = x->id;
	forget(st, x);
	al_monitor_execs_changed(sb);
	if (sb->exec_events)
		sb->exec_events->ended(sb->exec_events->data, id, msg->status, msg->err, user, sys,
				       cs.memory_peak, cs.oom_kills > 0);
}

bool al_monitor_exec_msg(struct al_sandbox *sb, const struct al_sync_msg *msg, int *fd)
{
	if (msg->type == AL_SYNC_EXEC_STARTED) {
		on_started(sb, msg, fd);
	} else if (msg->type == AL_SYNC_EXEC_TTY) {
		/* Only for an exec we asked for and have not seen start. */
		struct al_native_exec *x = find(sb->state, msg->exec_id);
		if (x && x->pidfd < 0 && *fd >= 0 && sb->exec_events && sb->exec_events->terminal)
			sb->exec_events->terminal(sb->exec_events->data, x->id, TAKE_FD(*fd));
	} else if (msg->type == AL_SYNC_EXEC_END)
		on_end(sb, msg);
	else
		return false;
	return true;
}

int al_monitor_exec_signal(struct al_sandbox *sb, uint32_t id, int sig)
{
	struct al_native_exec *x = sb->state ? find(sb->state, id) : NULL;

	if (!x || x->pidfd < 0)
		return -ESRCH;
	if (sig == SIGKILL)
		al_cgroup_child_kill(x->cg);
	/* Its process group (it is a session leader), through its pidfd:
	 * once init reaped it, its number may be another host process's, and
	 * kill(-pid) as root would hit that one's group. */
	if (al_sys_pidfd_signal_group(x->pidfd, sig) == 0)
		return 0;
	/* No such group yet: between its go and its setsid() the exec is
	 * one process, not yet a group's leader; it alone is signalled. */
	if (errno == ESRCH)
		return al_sys_pidfd_send_signal(x->pidfd, sig) < 0 ? -errno : 0;
	if (errno != EINVAL)
		return -errno;
	/* Before Linux 6.9: the group by number only while its leader has
	 * not exited (its pidfd not readable), which holds the number (but
	 * for the window between the two calls). */
	struct pollfd pfd = {.fd = x->pidfd, .events = POLLIN};
	if (poll(&pfd, 1, 0) == 0 && kill(-x->pid, sig) == 0)
		return 0;
	return al_sys_pidfd_send_signal(x->pidfd, sig) < 0 ? -errno : 0;
}

uint64_t al_monitor_exec_ooms(struct al_sandbox *sb)
{
	struct al_backend_state *st = sb->state;
	uint64_t n = st->exec_ooms;

	for (size_t i = 0; i < st->n_execs; i++) {
		struct al_cgroup_child_stats cs;
		al_cgroup_child_stats(st->execs[i].cg, &cs);
		n += cs.oom_kills;
	}
	return n;
}

void al_monitor_exec_release_all(struct al_sandbox *sb)
{
	struct al_backend_state *st = sb->state;

	while (st && st->n_execs)
		forget(st, &st->execs[st->n_execs - 1]);
	if (st) {
		free(st->execs);
		st->execs = NULL;
	}
}

int al_monitor_pause(struct al_sandbox *sb, bool frozen, struct al_error *err)
{
	if (!sb->state || sb->state->sync < 0)
		return al_error_set(err, ESRCH, "pause: the sandbox is gone");
	return al_cgroup_freeze(sb->cg, frozen, err);
}

int al_monitor_exec_stop_all(struct al_sandbox *sb, bool stopped)
{
	struct al_backend_state *st = sb->state;

	/* Each exec's process group through its pidfd, as every signal to an
	 * exec (al_monitor_exec_signal): never by a number that may have been
	 * reused. */
	for (size_t i = 0; st && i < st->n_execs; i++)
		if (st->execs[i].pidfd >= 0)
			al_monitor_exec_signal(sb, st->execs[i].id, stopped ? SIGSTOP : SIGCONT);
	return 0;
}
