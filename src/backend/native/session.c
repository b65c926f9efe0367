/* The sandbox init serving a session: instead of one command, it forks an
 * exec for each AL_SYNC_EXEC request from the supervisor, lets it go on
 * AL_SYNC_EXEC_GO (after the supervisor moved it into the exec's own
 * cgroup), reports its start and its end, and reaps every orphan. It runs
 * past every setup step (the sandbox uid, no capabilities, no_new_privs,
 * landlock, seccomp), so each exec is confined exactly as a first command
 * would be; it stays out of the execs' reach: not dumpable (no ptrace, no
 * /proc/1/fd, environ or mem), no signal taken but SIGCHLD (its stop is a
 * message on the sync socket, which no exec inherits), and it never
 * blocks on an exec (a stopped one included). Also the exec request's
 * wire format, pure (both sides use it). */
#include "backend/native/child.h"

#include <errno.h>
#include <linux/seccomp.h>
#include <linux/filter.h>
#include <linux/close_range.h>
#include <stddef.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "backend/native/steps.h"
#include "core/sys.h"

/* How many execs init holds at once (the supervisor's own maximum per
 * sandbox is at most this). */
#define INIT_MAX_EXECS 64

ssize_t al_exec_pack(void *buf, uint32_t exec_id, char *const *argv, char *const *env,
		     const char *cwd)
{
	struct al_sync_exec h = {.type = AL_SYNC_EXEC, .exec_id = exec_id};
	char *p = (char *)buf + sizeof(h), *end = (char *)buf + AL_EXEC_MSG_MAX;
	char *const *lists[2] = {argv, env};
	uint32_t *counts[2] = {&h.argc, &h.envc};

	if (!argv || !argv[0] || !argv[0][0])
		return -EINVAL;
	for (int l = 0; l < 2; l++) {
		for (size_t i = 0; lists[l] && lists[l][i]; i++) {
			size_t n = strlen(lists[l][i]) + 1;
			if (l == 1 && (!strchr(lists[l][i], '=') || lists[l][i][0] == '='))
				return -EINVAL;
			if (h.argc + h.envc >= AL_EXEC_MAX_ARGS || n > (size_t)(end - p))
				return -E2BIG;
			memcpy(p, lists[l][i], n);
			p += n;
			(*counts[l])++;
		}
	}
	size_t n = strlen(cwd ? cwd : "") + 1;
	if (n > (size_t)(end - p))
		return -E2BIG;
	memcpy(p, cwd ? cwd : "", n);
	p += n;
	h.len = (uint32_t)(p - ((char *)buf + sizeof(h)));
	memcpy(buf, &h, sizeof(h));
	return p - (char *)buf;
}

int al_exec_unpack(void *buf, size_t n, uint32_t *exec_id, char **argv, char **env,
		   const char **cwd)
{
	struct al_sync_exec h;
	char *p = (char *)buf + sizeof(h), *end;

	if (n < sizeof(h) || n > AL_EXEC_MSG_MAX)
		return -EINVAL;
	memcpy(&h, buf, sizeof(h));
	if (h.type != AL_SYNC_EXEC || h.len != n - sizeof(h) || h.argc == 0 ||
	    h.argc > AL_EXEC_MAX_ARGS || h.envc > AL_EXEC_MAX_ARGS - h.argc)
		return -EINVAL;
	end = p + h.len;
	for (uint32_t i = 0; i < h.argc + h.envc + 1; i++) {
		char *z = memchr(p, '\0', (size_t)(end - p));
		if (!z)
			return -EINVAL;
		if (i < h.argc)
			argv[i] = p;
		else if (i < h.argc + h.envc)
			env[i - h.argc] = p;
		else
			*cwd = *p ? p : NULL;
		if (i >= h.argc && i < h.argc + h.envc && (p[0] == '=' || !strchr(p, '=')))
			return -EINVAL;
		p = z + 1;
	}
	if (p != end || !argv[0][0])
		return -EINVAL;
	argv[h.argc] = NULL;
	env[h.envc] = NULL;
	*exec_id = h.exec_id;
	return 0;
}

/* One exec init holds: forked, waiting for its go, running. */
struct exec_slot {
	bool used;
	uint32_t id;
	pid_t pid;
	int gate;    /* write end: one byte lets it exec; -1 once sent */
	int errpipe; /* read end (non-blocking): errno of a failed exec */
};

/* Init's own memory (one init per process, single-threaded). */
static struct exec_slot execs[INIT_MAX_EXECS];
static char msgbuf[AL_EXEC_MSG_MAX];
static char *req_argv[AL_EXEC_MAX_ARGS + 1], *req_env[AL_EXEC_MAX_ARGS + 1];
static char **merged_env; /* the plan's environment with the request's over it */
static volatile sig_atomic_t got_child;
static bool got_stop;

/* SIGCHLD only; every other signal is dropped. No signal stops init: when
 * the sender's pending-signal queue is full (RLIMIT_SIGPENDING, which an
 * exec can fill, since it is the sandbox uid's) the kernel delivers a
 * signal without its details, as SI_USER with si_pid 0, which is what a
 * kill from outside the pid namespace looks like. */
static void on_signal(int sig)
{
	if (sig == SIGCHLD)
		got_child = 1;
}

static void send_exec_msg(int sync, uint32_t type, uint32_t id, int err, int status, pid_t pid,
			  const struct rusage *ru, int fd)
{
	struct al_sync_msg m = {
	    .type = type, .err = err, .status = status, .exec_id = id, .pid = pid};

	if (ru) {
		m.utime_us = (int64_t)ru->ru_utime.tv_sec * 1000000 + ru->ru_utime.tv_usec;
		m.stime_us = (int64_t)ru->ru_stime.tv_sec * 1000000 + ru->ru_stime.tv_usec;
	}
	al_child_send_msg(sync, &m, fd);
}

/* The plan's environment, each name the request sets replaced by its. */
static void merge_env(const struct al_plan *p)
{
	size_t n = 0;

	for (size_t i = 0; p->envp[i]; i++) {
		const char *eq = strchr(p->envp[i], '=');
		size_t len = eq ? (size_t)(eq - p->envp[i]) + 1 : strlen(p->envp[i]);
		bool over = false;
		for (size_t j = 0; req_env[j] && !over; j++)
			over = strncmp(req_env[j], p->envp[i], len) == 0;
		if (!over)
			merged_env[n++] = p->envp[i];
	}
	for (size_t j = 0; req_env[j]; j++)
		merged_env[n++] = req_env[j];
	merged_env[n] = NULL;
}

/* The forked exec: the request's fds on 0-2 and nothing else, a session
 * of its own, then wait for the supervisor's go and exec. */
static _Noreturn void exec_child(const struct al_plan *p, int sync, const int *fds, int gate,
				 int errpipe, const char *cwd, bool tty)
{
	sigset_t none;
	char go = 1;
	int e;

	sigemptyset(&none);
	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);
	sigprocmask(SIG_SETMASK, &none, NULL);
	close(sync);
	if (dup2(fds[0], 0) < 0 || dup2(fds[1], 1) < 0 || dup2(fds[2], 2) < 0)
		_exit(126);
	/* Every other fd init holds goes at exec (they are close-on-exec;
	 * this makes sure of it for any that is not). */
	al_sys_close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
	while (read(gate, &go, 1) < 0 && errno == EINTR)
		;
	if (go != 0)
		_exit(137);
	umask(p->root ? (mode_t)p->root->umask : 022);
	/* A terminal exec's pty becomes its controlling terminal once it
	 * leads a session of its own. */
	if (setsid() < 0 || (tty && ioctl(0, TIOCSCTTY, 0) < 0) ||
	    chdir(cwd ? cwd : p->workdir) < 0 || al_own_seccomp(p) < 0)
		e = errno;
	else
		e = al_exec_path(req_argv, merged_env);
	(void)!write(errpipe, &e, sizeof(e));
	_exit(e == ENOENT ? 127 : 126);
}

static struct exec_slot *find(uint32_t id)
{
	for (size_t i = 0; i < INIT_MAX_EXECS; i++)
		if (execs[i].used && execs[i].id == id)
			return &execs[i];
	return NULL;
}

/* A pty from the sandbox's own devpts, of rows x cols: its master in
 * *master, its slave returned (or -errno). */
static int open_pty(unsigned short rows, unsigned short cols, int *master)
{
	struct winsize ws = {.ws_row = rows ? rows : 24, .ws_col = cols ? cols : 80};
	int unlock = 0, slave;

	*master = open("/dev/pts/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (*master < 0)
		return -errno;
	if (ioctl(*master, TIOCSPTLCK, &unlock) < 0 || ioctl(*master, TIOCSWINSZ, &ws) < 0 ||
	    (slave = ioctl(*master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0) {
		int e = errno;
		close(*master);
		*master = -1;
		return -e;
	}
	return slave;
}

static void start_exec(const struct al_plan *p, int sync, size_t n, const int *fds, size_t n_fds)
{
	struct al_sync_exec h = {0};
	uint32_t id = 0;
	const char *cwd = NULL;
	int gate[2], errp[2], e = 0, master = -1, slave = -1, tty_fds[3];
	struct exec_slot *s = NULL;
	pid_t pid;

	if (n >= sizeof(h))
		memcpy(&h, msgbuf, sizeof(h));
	id = h.exec_id;
	bool tty = h.flags & AL_EXEC_FLAG_TTY;
	if (n_fds != (tty ? 0u : 3u) || (h.flags & ~AL_EXEC_FLAG_TTY) ||
	    al_exec_unpack(msgbuf, n, &id, req_argv, req_env, &cwd) < 0)
		e = EINVAL;
	if (!e && tty) {
		if ((slave = open_pty(h.rows, h.cols, &master)) < 0)
			e = -slave;
		tty_fds[0] = tty_fds[1] = tty_fds[2] = slave;
		fds = tty_fds;
	}
	for (size_t i = 0; !e && i < INIT_MAX_EXECS && !s; i++)
		if (!execs[i].used)
			s = &execs[i];
	if (!e && (!s || find(id)))
		e = s ? EEXIST : EAGAIN;
	if (!e && pipe2(gate, O_CLOEXEC) < 0)
		e = errno;
	/* Non-blocking: it is read once the exec is reaped (its write end
	 * then closed everywhere), never waited on. */
	if (!e && pipe2(errp, O_CLOEXEC | O_NONBLOCK) < 0) {
		e = errno;
		close(gate[0]);
		close(gate[1]);
	}
	if (e) {
		if (master >= 0)
			close(master);
		if (slave >= 0)
			close(slave);
		send_exec_msg(sync, AL_SYNC_EXEC_END, id, e, 126 << 8, 0, NULL, -1);
		return;
	}
	merge_env(p);
	pid = fork();
	if (pid == 0) {
		close(gate[1]);
		close(errp[0]);
		exec_child(p, sync, fds, gate[0], errp[1], cwd, tty);
	}
	close(gate[0]);
	close(errp[1]);
	/* Init keeps neither end: the slave is the exec's, the master goes to
	 * the supervisor (before STARTED, so it is there when output comes). */
	if (slave >= 0)
		close(slave);
	if (master >= 0 && pid > 0)
		send_exec_msg(sync, AL_SYNC_EXEC_TTY, id, 0, 0, 0, NULL, master);
	if (master >= 0)
		close(master);
	if (pid < 0) {
		e = errno;
		close(gate[1]);
		close(errp[0]);
		send_exec_msg(sync, AL_SYNC_EXEC_END, id, e, 126 << 8, 0, NULL, -1);
		return;
	}
	*s = (struct exec_slot){
	    .used = true, .id = id, .pid = pid, .gate = gate[1], .errpipe = errp[0]};
	int pidfd = al_sys_pidfd_open(pid, 0);
	send_exec_msg(sync, AL_SYNC_EXEC_STARTED, id, 0, 0, pid, NULL, pidfd);
	if (pidfd >= 0)
		close(pidfd);
}

/* The supervisor moved the exec into its cgroup (status 0: let it exec)
 * or could not (kill it). One byte into an empty pipe: never blocks. Init
 * does not wait for the exec itself (a process of another exec may have
 * stopped it before its execve): a failed exec's errno is read when it is
 * reaped. */
static void go_exec(const struct al_sync_msg *m)
{
	struct exec_slot *s = find(m->exec_id);
	char go = m->status == 0 ? 0 : 1;

	if (!s || s->gate < 0)
		return;
	if (go != 0)
		kill(s->pid, SIGKILL);
	(void)!write(s->gate, &go, 1);
	close(s->gate);
	s->gate = -1;
}

static void reap(int sync)
{
	for (;;) {
		struct rusage ru;
		int status;
		pid_t pid = wait4(-1, &status, WNOHANG, &ru);
		if (pid <= 0)
			return;
		for (size_t i = 0; i < INIT_MAX_EXECS; i++) {
			struct exec_slot *s = &execs[i];
			if (!s->used || s->pid != pid)
				continue;
			/* Reaped: the error pipe's write end is closed (at its
			 * execve, or its exit), so what it wrote is there. */
			int e = 0;
			if (read(s->errpipe, &e, sizeof(e)) != (ssize_t)sizeof(e))
				e = 0;
			send_exec_msg(sync, AL_SYNC_EXEC_END, s->id, e, status, pid, &ru, -1);
			if (s->gate >= 0)
				close(s->gate);
			if (s->errpipe >= 0)
				close(s->errpipe);
			s->used = false;
		}
	}
}

static void on_message(const struct al_plan *p, int sync)
{
	char cbuf[CMSG_SPACE(4 * sizeof(int))];
	struct iovec iov = {msgbuf, sizeof(msgbuf)};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
	int fds[4];
	size_t n_fds = 0;
	ssize_t n = recvmsg(sync, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);

	if (n < 0)
		return;
	if (n == 0) /* the supervisor is gone (die-with-parent kills us too) */
		al_init_finish(sync, 0, NULL, 0);
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (n_fds < 4)
				fds[n_fds++] = fd;
			else
				close(fd);
		}
	}
	uint32_t type = 0;
	if ((size_t)n >= sizeof(type))
		memcpy(&type, msgbuf, sizeof(type));
	if (type == AL_SYNC_EXEC || (mh.msg_flags & MSG_TRUNC)) {
		start_exec(p, sync, (mh.msg_flags & MSG_TRUNC) ? 0 : (size_t)n, fds, n_fds);
	} else if (type == AL_SYNC_EXEC_GO && n == (ssize_t)sizeof(struct al_sync_msg)) {
		struct al_sync_msg m;
		memcpy(&m, msgbuf, sizeof(m));
		go_exec(&m);
	} else if (type == AL_SYNC_STOP) {
		got_stop = true;
	}
	for (size_t i = 0; i < n_fds; i++)
		close(fds[i]);
}

_Noreturn void al_session_init(const struct al_plan *p, int sync, const int *cg_leave, size_t n_cg)
{
	struct sigaction sa = {.sa_handler = on_signal};
	sigset_t blocked, during;
	size_t n_env = 0;

	while (p->envp[n_env])
		n_env++;
	merged_env = calloc(n_env + AL_EXEC_MAX_ARGS + 1, sizeof(*merged_env));
	if (!merged_env) {
		al_child_send(sync, AL_SYNC_ERROR, ENOMEM, 0, "session", "init's tables", -1);
		_exit(125);
	}
	/* Every catchable signal gets the handler: a namespace init ignores
	 * what stays at SIG_DFL (but SIGCHLD's default is to discard it), and
	 * the handler drops all but SIGCHLD. Blocked except while waiting. */
	sigfillset(&blocked);
	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			sigaction(sig, &sa, NULL);
	sigprocmask(SIG_BLOCK, &blocked, &during);
	sigemptyset(&during);
	/* Init needs no stdio; holding the first command's pipes would keep
	 * the supervisor from seeing their EOF. */
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	for (int fd = 0; fd < 3; fd++)
		null >= 0 ? dup2(null, fd) : close(fd);
	if (null > 2)
		close(null);
	al_child_send(sync, AL_SYNC_RUNNING, 0, 0, NULL, NULL, -1);
	for (;;) {
		struct pollfd pfd = {.fd = sync, .events = POLLIN};
		if (got_stop)
			al_init_finish(sync, 0, cg_leave, n_cg);
		if (got_child) {
			got_child = 0;
			reap(sync);
		}
		if (ppoll(&pfd, 1, NULL, &during) > 0 && (pfd.revents & (POLLIN | POLLHUP)))
			on_message(p, sync);
	}
}
