#include "supervisor/supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/sys.h"
#include "sandbox/sandbox.h"

enum { EV_SIGNAL, EV_TIMER, EV_PIDFD, EV_SYNC, EV_STDOUT, EV_STDERR, EV_STDIN_IN, EV_STDIN_OUT };

struct loop {
	int epfd;
	int sigfd;
	int timerfd;
	struct al_supervised *sv;
	struct al_run_result *res;
	bool init_gone;
	bool running;      /* the command was exec'd */
	bool have_status;  /* AL_SYNC_EXIT arrived */
	int status;
	bool stdin_poll;   /* stdin is pollable; else copied when the pipe is writable */
	int stop_signals;  /* how many SIGINT/SIGTERM we were sent */
};

static const int supervised_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

static void signal_set(sigset_t *set)
{
	sigemptyset(set);
	for (size_t i = 0; i < AL_ARRAY_SIZE(supervised_signals); i++)
		sigaddset(set, supervised_signals[i]);
}

void al_supervisor_block_signals(void)
{
	sigset_t set;
	signal_set(&set);
	sigprocmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int watch(struct loop *l, int fd, uint32_t events, uint64_t tag)
{
	struct epoll_event ev = {.events = events, .data.u64 = tag};
	return epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

static void unwatch_close(struct loop *l, int *fd)
{
	if (*fd < 0)
		return;
	epoll_ctl(l->epfd, EPOLL_CTL_DEL, *fd, NULL);
	close(*fd);
	*fd = -1;
}

static void kill_sandbox(struct loop *l)
{
	if (!l->init_gone)
		al_sys_pidfd_send_signal(l->sv->pidfd, SIGKILL);
}

/* Relay one chunk from a sandbox pipe to our fd. At EOF the pipe is closed.
 * If our side is gone (EPIPE), output is drained and dropped so the
 * sandbox never blocks on a full pipe. */
static void relay_out(struct loop *l, int *fd, int out, uint64_t *count)
{
	char buf[65536];
	ssize_t n = read(*fd, buf, sizeof(buf));

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		unwatch_close(l, fd);
		return;
	}
	*count += (uint64_t)n;
	if (al_write_all(out, buf, (size_t)n) < 0 && errno != EPIPE)
		al_debug("ignoring write error on fd %d: %s", out, strerror(errno));
}

static void relay_in(struct loop *l)
{
	char buf[65536];
	ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0 || al_write_all(l->sv->stdin_wr, buf, (size_t)n) < 0) {
		/* EOF, an unreadable stdin, or the sandbox closed its end. */
		if (l->stdin_poll)
			epoll_ctl(l->epfd, EPOLL_CTL_DEL, STDIN_FILENO, NULL);
		unwatch_close(l, &l->sv->stdin_wr);
	}
}

static void on_sync(struct loop *l)
{
	struct al_sync_msg m;
	ssize_t n = recv(l->sv->sync, &m, sizeof(m), MSG_DONTWAIT);

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n != (ssize_t)sizeof(m)) {
		unwatch_close(l, &l->sv->sync);
		return;
	}
	m.step[sizeof(m.step) - 1] = '\0';
	m.msg[sizeof(m.msg) - 1] = '\0';
	switch (m.type) {
	case AL_SYNC_ERROR:
		l->res->reason = AL_END_SETUP_ERROR;
		l->res->err = m.err;
		memcpy(l->res->step, m.step, sizeof(m.step));
		memcpy(l->res->msg, m.msg, sizeof(m.msg));
		break;
	case AL_SYNC_EXEC_FAILED:
		l->res->reason = AL_END_EXEC_FAILED;
		l->res->err = m.err;
		memcpy(l->res->step, m.step, sizeof(m.step));
		memcpy(l->res->msg, m.msg, sizeof(m.msg));
		break;
	case AL_SYNC_RUNNING:
		l->running = true;
		break;
	case AL_SYNC_EXIT:
		l->have_status = true;
		l->status = m.status;
		break;
	default:
		al_debug("ignoring unknown sync message %u", m.type);
	}
}

static void on_signal(struct loop *l)
{
	struct signalfd_siginfo si;

	if (read(l->sigfd, &si, sizeof(si)) != sizeof(si))
		return;
	int sig = (int)si.ssi_signo;
	if (sig == SIGINT || sig == SIGTERM)
		l->stop_signals++;
	if (!l->running || l->stop_signals > 1) {
		/* Nothing to forward to yet, or asked twice: stop it all. */
		if (l->res->reason != AL_END_TIMEOUT) {
			l->res->reason = AL_END_KILLED;
			l->res->signal = sig;
		}
		kill_sandbox(l);
		return;
	}
	al_debug("forwarding signal %d to the sandbox", sig);
	al_sys_pidfd_send_signal(l->sv->pidfd, sig);
}

static void on_timer(struct loop *l)
{
	uint64_t ticks;
	if (read(l->timerfd, &ticks, sizeof(ticks)) != sizeof(ticks))
		return;
	l->res->reason = AL_END_TIMEOUT;
	kill_sandbox(l);
}

static int setup(struct loop *l, const struct al_plan *plan, struct al_error *err)
{
	struct itimerspec its = {0};
	sigset_t set;
	struct stat st;
	int r;

	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0)
		return al_error_setsys(err, errno, "epoll_create1");
	signal_set(&set);
	l->sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (l->sigfd < 0)
		return al_error_setsys(err, errno, "signalfd");
	l->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (l->timerfd < 0)
		return al_error_setsys(err, errno, "timerfd_create");
	its.it_value.tv_sec = (time_t)(plan->timeout_ms / 1000);
	its.it_value.tv_nsec = (long)(plan->timeout_ms % 1000) * 1000000L;
	if (timerfd_settime(l->timerfd, 0, &its, NULL) < 0)
		return al_error_setsys(err, errno, "timerfd_settime");

	if ((r = watch(l, l->sigfd, EPOLLIN, EV_SIGNAL)) < 0 ||
	    (r = watch(l, l->timerfd, EPOLLIN, EV_TIMER)) < 0 ||
	    (r = watch(l, l->sv->pidfd, EPOLLIN, EV_PIDFD)) < 0 ||
	    (r = watch(l, l->sv->sync, EPOLLIN, EV_SYNC)) < 0 ||
	    (r = watch(l, l->sv->stdout_rd, EPOLLIN, EV_STDOUT)) < 0 ||
	    (r = watch(l, l->sv->stderr_rd, EPOLLIN, EV_STDERR)) < 0)
		return al_error_setsys(err, -r, "epoll_ctl");

	/* stdin: poll it when the kernel can (pipes, ttys, sockets); a regular
	 * file or /dev/null cannot be polled, so copy from it whenever the
	 * sandbox's pipe has room. A closed stdin gives the sandbox EOF. */
	if (fstat(STDIN_FILENO, &st) < 0) {
		unwatch_close(l, &l->sv->stdin_wr);
	} else if (watch(l, STDIN_FILENO, EPOLLIN, EV_STDIN_IN) == 0) {
		l->stdin_poll = true;
	} else if ((r = watch(l, l->sv->stdin_wr, EPOLLOUT, EV_STDIN_OUT)) < 0) {
		return al_error_setsys(err, -r, "epoll_ctl(stdin pipe)");
	}
	fcntl(l->sv->stdin_wr, F_SETFL, O_NONBLOCK);
	return 0;
}

static void finish(struct loop *l, uint64_t start)
{
	struct al_run_result *res = l->res;
	siginfo_t si;

	/* After AL_SYNC_EXIT the namespace is empty and init is in its final
	 * exit; the kernel's namespace teardown (about a millisecond, mostly
	 * mount-namespace RCU) need not delay the result. Reap it if it is
	 * already done; al_sandbox_release() does the rest. */
	memset(&si, 0, sizeof(si));
	if (l->have_status) {
		l->sv->exiting = true;
		waitid(P_PIDFD, (id_t)l->sv->pidfd, &si, WEXITED | WNOHANG);
	} else {
		while (waitid(P_PIDFD, (id_t)l->sv->pidfd, &si, WEXITED) < 0 && errno == EINTR)
			;
	}
	res->wall_ms = now_ms() - start;
	switch (res->reason) {
	case AL_END_SETUP_ERROR:
		res->exit_code = 125;
		return;
	case AL_END_TIMEOUT:
		res->exit_code = 124;
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
		res->reason = AL_END_SETUP_ERROR;
		snprintf(res->step, sizeof(res->step), "%s", l->running ? "supervise" : "setup");
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

int al_supervise(const struct al_plan *plan, struct al_supervised *sv, struct al_run_result *res,
		 struct al_error *err)
{
	struct loop l = {.epfd = -1, .sigfd = -1, .timerfd = -1, .sv = sv, .res = res};
	uint64_t start = now_ms();
	int r;

	memset(res, 0, sizeof(*res));
	res->reason = AL_END_EXITED;
	r = setup(&l, plan, err);
	if (r < 0) {
		kill_sandbox(&l);
		goto out;
	}
	while (!(l.init_gone || l.have_status) || sv->stdout_rd >= 0 || sv->stderr_rd >= 0 ||
	       sv->sync >= 0) {
		struct epoll_event evs[8];
		int n = epoll_wait(l.epfd, evs, AL_ARRAY_SIZE(evs), -1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			r = al_error_setsys(err, errno, "epoll_wait");
			kill_sandbox(&l);
			goto out;
		}
		for (int i = 0; i < n; i++) {
			switch (evs[i].data.u64) {
			case EV_SIGNAL:
				on_signal(&l);
				break;
			case EV_TIMER:
				on_timer(&l);
				break;
			case EV_PIDFD:
				/* Keep reading sync and output until they hit EOF: the
				 * kernel has killed the namespace, so they will. */
				l.init_gone = true;
				epoll_ctl(l.epfd, EPOLL_CTL_DEL, sv->pidfd, NULL);
				break;
			case EV_SYNC:
				on_sync(&l);
				break;
			case EV_STDOUT:
				relay_out(&l, &sv->stdout_rd, STDOUT_FILENO, &res->stdout_bytes);
				break;
			case EV_STDERR:
				relay_out(&l, &sv->stderr_rd, STDERR_FILENO, &res->stderr_bytes);
				break;
			case EV_STDIN_IN:
			case EV_STDIN_OUT:
				relay_in(&l);
				break;
			}
		}
	}
	finish(&l, start);
out:
	if (l.stdin_poll)
		epoll_ctl(l.epfd, EPOLL_CTL_DEL, STDIN_FILENO, NULL);
	al_closep(&sv->stdin_wr);
	al_closep(&sv->stdout_rd);
	al_closep(&sv->stderr_rd);
	al_closep(&sv->sync);
	al_closep(&l.sigfd);
	al_closep(&l.timerfd);
	al_closep(&l.epfd);
	return r;
}

const char *al_result_describe(const struct al_run_result *res, char *buf, size_t len)
{
	switch (res->reason) {
	case AL_END_SETUP_ERROR:
		snprintf(buf, len, "sandbox setup failed at step \"%s\": %s: %s", res->step,
			 res->msg, res->err ? strerror(res->err) : "failed");
		return buf;
	case AL_END_EXEC_FAILED:
		snprintf(buf, len, "cannot execute \"%s\": %s%s", res->msg, strerror(res->err),
			 res->err == ENOENT ? " (command not found in the sandbox)" : "");
		return buf;
	case AL_END_TIMEOUT:
		snprintf(buf, len, "timeout: the sandbox was killed after %llu.%03llu s (wall clock)",
			 (unsigned long long)(res->wall_ms / 1000),
			 (unsigned long long)(res->wall_ms % 1000));
		return buf;
	case AL_END_KILLED:
		snprintf(buf, len, "stopped by %s: the sandbox was killed", strsignal(res->signal));
		return buf;
	default:
		return NULL;
	}
}
