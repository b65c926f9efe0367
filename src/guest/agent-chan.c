/* The guest agent's loop: the channel (a bounded output queue written
 * without blocking, frames read and checked header first), the execs (each
 * in a cgroup of its own, as the config's uid and gid, stdio over pipes
 * with the channel's windows), and dispatch to files and network. */
#include "guest/agent.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <linux/securebits.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* The queue's buffer: its bound plus one frame (a frame that starts below
 * the bound always fits). */
#define Q_CAP  (AGENT_Q_MAX + AL_GUEST_HEADER + AL_GUEST_MAX_PAYLOAD)
#define IN_CAP (2 * (AL_GUEST_HEADER + AL_GUEST_MAX_PAYLOAD))

static size_t pending(const struct agent *a)
{
	return a->qlen - a->qoff;
}

bool agent_q_room(const struct agent *a)
{
	return pending(a) < AGENT_Q_SOURCES;
}

void agent_send(struct agent *a, uint8_t type, uint8_t flags, uint32_t id, const void *p,
		uint32_t len)
{
	if (!a->q && !(a->q = malloc(Q_CAP)))
		return;
	if (a->qoff && a->qlen + AL_GUEST_HEADER + len > Q_CAP) {
		memmove(a->q, a->q + a->qoff, pending(a));
		a->qlen -= a->qoff;
		a->qoff = 0;
	}
	if (a->qlen + AL_GUEST_HEADER + len > Q_CAP) {
		/* Every caller checks its room first: this is a bug. Say so
		 * without queueing more. */
		a->qlen = a->qoff = 0;
		agent_die(a, "guest agent: output queue overflow (type %u)", type);
	}
	al_guest_hdr_put(a->q + a->qlen, type, flags, id, len);
	if (len)
		memcpy(a->q + a->qlen + AL_GUEST_HEADER, p, len);
	a->qlen += AL_GUEST_HEADER + len;
}

static void flush(struct agent *a)
{
	while (pending(a)) {
		ssize_t w = write(a->chan, a->q + a->qoff, pending(a));
		if (w <= 0)
			break;
		a->qoff += (size_t)w;
	}
	if (!pending(a))
		a->qoff = a->qlen = 0;
}

static struct agent_exec *find_exec(struct agent *a, uint32_t id)
{
	for (size_t i = 0; id && i < AL_GUEST_MAX_EXECS; i++)
		if (a->execs[i].id == id)
			return &a->execs[i];
	return NULL;
}

static void exec_failed(struct agent *a, uint32_t id, int err, const char *what)
{
	uint8_t b[4 + 256];
	int n = snprintf((char *)b + 4, sizeof(b) - 4, "%s: %s", what, strerror(err));
	al_guest_put32(b, (uint32_t)err);
	agent_send(a, AL_G_EXEC_FAILED, 0, id, b, 4 + (uint32_t)(n < 252 ? n : 252));
}

static int cg_write(int dir, const char *file, const char *val)
{
	int fd = openat(dir, file, O_WRONLY | O_CLOEXEC);
	int r = fd >= 0 && write(fd, val, strlen(val)) == (ssize_t)strlen(val) ? 0 : -errno;
	if (fd >= 0)
		close(fd);
	return r;
}

/* A cgroup key's value ("oom_kill 3" in memory.events), or the file's only
 * number when key is NULL; 0 when absent. */
static uint64_t cg_read(int dir, const char *file, const char *key)
{
	char b[1024], *s = b;
	int fd = openat(dir, file, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, b, sizeof(b) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return 0;
	b[n] = 0;
	if (key) {
		size_t kl = strlen(key);
		for (s = b; s && (strncmp(s, key, kl) || s[kl] != ' ');)
			if ((s = strchr(s, '\n')))
				s++;
		if (!s)
			return 0;
		s += kl + 1;
	}
	return strtoull(s, NULL, 10);
}

/* How long an exec's child may take to exec (or fail) before the agent
 * kills it: it is stopped (a process of its uid may SIGSTOP it). */
#define EXEC_START_MS 30000

/* Locked: uid 0 gains nothing at exec, setuid cannot bring capabilities
 * back, and none may be raised into the ambient set. */
#define SECURE_NOROOT_BITS                                                                         \
	(SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP_LOCKED |                    \
	 SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |                                   \
	 SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED)

/* The child, between fork and exec: never returns. Its failure goes to the
 * parent as {errno, step} over errfd. A file operation (fop) does the
 * operation itself once its cgroup, stdio and ids are set, instead of the
 * exec. With a terminal (tty: fds are its pty's slave) the slave becomes
 * the controlling terminal of the child's new session. */
static __attribute__((noreturn)) void child(struct agent *a, int cg, int fds[3], int errfd,
					    const char *cwd, const char **argv, const char **env,
					    bool fop, bool tty)
{
	extern char **environ;
	const char *step = "cgroup";
	sigset_t all;
	/* Until it execs, the child holds what the agent holds (the channel,
	 * the scratch): not dumpable, so that a process of the command's uid
	 * (0, a container's) can neither trace it nor open its descriptors in
	 * /proc, and every descriptor but its stdio and errfd closed before
	 * its ids change. */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	signal(SIGPIPE, SIG_DFL);
	if (cg_write(cg, "cgroup.procs", "0") < 0)
		goto fail;
	step = "stdio";
	for (int i = 0; i < 3; i++)
		if (dup2(fds[i], i) < 0)
			goto fail;
	if (errfd != 3) {
		if (dup3(errfd, 3, O_CLOEXEC) < 0)
			goto fail;
		errfd = 3;
	}
	if (syscall(SYS_close_range, 4, ~0u, 0) < 0)
		for (int fd = 4; fd < 4096; fd++) /* PID 1's hard RLIMIT_NOFILE */
			close(fd);
	step = "ids";
	const struct al_guest_config *c = &a->cfg.c;
	if (setsid() < 0 || (tty && ioctl(0, TIOCSCTTY, 0) < 0))
		goto fail;
	step = "rlimit"; /* while it may still raise one */
	if (c->nofile && setrlimit(RLIMIT_NOFILE, &(struct rlimit){c->nofile_soft, c->nofile}) < 0)
		goto fail;
	step = "ids";
	/* No capability, whatever the ids (a container's may be 0): none in
	 * the bounding set, none regained at exec as root, none kept. */
	for (int cap = 0; cap < 64; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0) {
			if (errno == EINVAL)
				break; /* past the last one this kernel knows */
			goto fail;
		}
	struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct caps[2] = {{0}};
	if (prctl(PR_SET_SECUREBITS, SECURE_NOROOT_BITS, 0, 0, 0) < 0 ||
	    setgroups(c->n_groups, c->groups) < 0 || setresgid(c->gid, c->gid, c->gid) < 0 ||
	    setresuid(c->uid, c->uid, c->uid) < 0 || syscall(SYS_capset, &hdr, caps) < 0 ||
	    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 ||
	    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		goto fail;
	umask(c->umask);
	if (fop) {
		/* No exec closes the agent's descriptors (the channel, other
		 * execs' pipes, whose ends would stay open): closed here, errfd
		 * with them (the parent reads its EOF as "started"). */
		if (syscall(SYS_close_range, 3, ~0u, 0) < 0)
			for (int fd = 3; fd < 4096; fd++) /* PID 1's hard RLIMIT_NOFILE */
				close(fd);
		agent_fop(argv[0], argv[1]);
	}
	step = "cwd";
	if (chdir(cwd) < 0)
		goto fail;
	step = "seccomp";
	if (a->seccomp) {
		struct sock_fprog prog = {.len = a->seccomp_len, .filter = a->seccomp};
		if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
			goto fail;
	}
	step = "exec";
	/* execvp looks PATH up in environ: the command's own. */
	environ = (char **)env;
	execvp(argv[0], (char *const *)argv);
fail:;
	int e = errno;
	char m[64];
	memcpy(m, &e, sizeof(e));
	size_t sl = strlen(step);
	memcpy(m + sizeof(e), step, sl);
	if (write(errfd, m, sizeof(e) + sl) < 0)
		_exit(126);
	_exit(127);
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* The exec's cgroup: the session's memory and pids limits, or its own
 * memory limit where the EXEC carried one (never above the session's).
 * A limit that cannot be set fails the exec (-errno, the cgroup gone):
 * it never runs without it. */
static int exec_cgroup(struct agent *a, uint32_t id, uint64_t memory)
{
	char name[32], v[32];
	uint64_t mem = a->cfg.c.memory_bytes;
	if (memory && (!mem || memory < mem))
		mem = memory;
	snprintf(name, sizeof(name), "exec-%" PRIu32, id);
	if (mkdirat(a->cgroot, name, 0755) < 0 && errno != EEXIST)
		return -errno;
	int cg = openat(a->cgroot, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cg < 0)
		return -errno;
	int r = 0;
	const char *what = NULL;
	if (mem) {
		snprintf(v, sizeof(v), "%" PRIu64, mem);
		if ((r = cg_write(cg, "memory.max", v)) < 0 ||
		    (r = cg_write(cg, "memory.oom.group", "1")) < 0)
			what = "memory";
	}
	if (r == 0 && a->cfg.c.pids) {
		snprintf(v, sizeof(v), "%" PRIu64, a->cfg.c.pids);
		if ((r = cg_write(cg, "pids.max", v)) < 0)
			what = "pids";
	}
	if (r < 0) {
		agent_log(a, "guest agent: exec %" PRIu32 ": its %s limit: %s", id, what,
			  strerror(-r));
		close(cg);
		unlinkat(a->cgroot, name, AT_REMOVEDIR);
		return r;
	}
	return cg;
}

/* A pty of the guest's devpts (the command's /dev/pts) of the asked size,
 * its slave owned by the command's user as a login's is: the slave, with
 * the master in *master, or -errno. */
static int open_pty(struct agent *a, const struct al_guest_exec_opts *o, int *master)
{
	struct winsize ws = {.ws_row = o->rows, .ws_col = o->cols};
	int unlock = 0, slave = -1;
	*master = open("/dev/pts/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (*master < 0)
		return -errno;
	if (ioctl(*master, TIOCSPTLCK, &unlock) < 0 || ioctl(*master, TIOCSWINSZ, &ws) < 0 ||
	    (slave = ioctl(*master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0 ||
	    fchown(slave, a->cfg.c.uid, a->cfg.c.gid) < 0) {
		int e = errno;
		close_fd(master);
		if (slave >= 0)
			close(slave);
		return -e;
	}
	return slave;
}

/* The exec's stdio: three pipes, or a pty (tty). ours: stdin's write
 * end, stdout's and stderr's read ends (a tty's: a dup of its master, the
 * master, -1: one stream); theirs: the child's 0, 1 and 2 (a tty's: its
 * slave, three times). 0, or -errno with nothing left open. */
static int exec_stdio(struct agent *a, const struct al_guest_exec_opts *o, int ours[3],
		      int theirs[3])
{
	int p[3][2];
	if (o->tty) {
		int master, slave = open_pty(a, o, &master);
		if (slave < 0)
			return slave;
		if ((ours[0] = fcntl(master, F_DUPFD_CLOEXEC, 3)) < 0) {
			int e = errno;
			close(master), close(slave);
			return -e;
		}
		ours[1] = master, ours[2] = -1;
		theirs[0] = theirs[1] = theirs[2] = slave;
		return 0;
	}
	for (int i = 0; i < 3; i++)
		if (pipe2(p[i], O_CLOEXEC) < 0) {
			int e = errno;
			for (int k = 0; k < i; k++)
				close(p[k][0]), close(p[k][1]);
			return -e;
		}
	ours[0] = p[0][1], theirs[0] = p[0][0];
	ours[1] = p[1][0], theirs[1] = p[1][1];
	ours[2] = p[2][0], theirs[2] = p[2][1];
	return 0;
}

static void close_ends(int fds[3])
{
	for (int i = 0; i < 3; i++)
		if (fds[i] >= 0 && (i == 0 || fds[i] != fds[i - 1]))
			close(fds[i]);
}

static void exec_start(struct agent *a, uint32_t id, uint8_t flags, const uint8_t *p, uint32_t len)
{
	static const char *argv[AL_GUEST_MAX_ARGS + 1], *env[AL_GUEST_MAX_ARGS + 1];
	const char *cwd;
	uint32_t argc, envc;
	struct agent_exec *e = NULL;
	char name[32];
	struct al_guest_exec_opts o;
	if (al_guest_exec_trailers(p, &len, flags, &o) < 0 ||
	    al_guest_exec_parse(p, len, &cwd, argv, &argc, env, &envc) < 0)
		agent_die(a, "guest agent: a malformed EXEC from the host");
	/* A free slot (id 0) for a nonzero id not in use. */
	for (size_t i = 0; !e && id && !find_exec(a, id) && i < AL_GUEST_MAX_EXECS; i++)
		if (!a->execs[i].id)
			e = &a->execs[i];
	if (!e)
		return exec_failed(a, id, EBUSY, "no exec slot (or its id is in use)");
	/* A file operation is [OP, PATH] and nothing else (agent-fop.c
	 * checks both). */
	bool fop = flags == AL_GUEST_EXEC_FILE_OP;
	if (fop && (argc != 2 || envc != 0))
		return exec_failed(a, id, EINVAL, "a file operation is [OP, PATH], no env");
	int ours[3], theirs[3], ef[2] = {-1, -1};
	int cg = exec_cgroup(a, id, o.memory);
	if (cg < 0)
		return exec_failed(a, id, -cg, "the exec's cgroup");
	snprintf(name, sizeof(name), "exec-%" PRIu32, id);
	int r = exec_stdio(a, &o, ours, theirs);
	if (r == 0 && pipe2(ef, O_CLOEXEC) < 0) {
		r = -errno;
		close_ends(ours), close_ends(theirs);
	}
	if (r < 0) {
		close(cg);
		unlinkat(a->cgroot, name, AT_REMOVEDIR);
		return exec_failed(a, id, -r, o.tty ? "its pty" : "pipes");
	}
	pid_t pid = fork();
	if (pid == 0)
		child(a, cg, theirs, ef[1], cwd, argv, env, fop, o.tty);
	close_ends(theirs), close(ef[1]);
	char m[64] = {0};
	/* Its exec (errfd closes) or its failure, within a deadline: a
	 * process of the command's uid may stop the child before it execs. */
	struct pollfd pe = {.fd = ef[0], .events = POLLIN};
	int pr = pid < 0 ? -1 : poll(&pe, 1, EXEC_START_MS);
	while (pr < 0 && pid >= 0 && errno == EINTR)
		pr = poll(&pe, 1, EXEC_START_MS);
	ssize_t n = pr > 0 ? read(ef[0], m, sizeof(m) - 1) : -1;
	close(ef[0]);
	if (pid < 0 || n != 0) {
		int x = pid < 0 ? errno : n > 0 ? *(int *)m : ETIMEDOUT;
		if (pid > 0) {
			if (n < 0)
				kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
		}
		close_ends(ours), close(cg);
		unlinkat(a->cgroot, name, AT_REMOVEDIR);
		return exec_failed(a, id, x,
				   pid < 0 ? "fork"
				   : n < 0 ? "the exec did not start in time"
					   : m + sizeof(int));
	}
	*e = (struct agent_exec){.id = id,
				 .pid = pid,
				 .in = ours[0],
				 .out = ours[1],
				 .err = ours[2],
				 .cg = cg,
				 .tty = o.tty};
	for (int i = 0; i < 3; i++)
		if (ours[i] >= 0)
			fcntl(ours[i], F_SETFL, O_NONBLOCK);
	uint8_t b[4];
	al_guest_put32(b, (uint32_t)pid);
	agent_send(a, AL_G_EXEC_STARTED, 0, id, b, 4);
}

/* WINSIZE: the new size on a tty exec's pty (the kernel signals its
 * foreground SIGWINCH). One for an exec that is gone, not yet started or
 * has no terminal is dropped: it may have crossed the exec's end. */
static void winsize_msg(struct agent *a, const struct al_guest_hdr *h, const uint8_t *p)
{
	uint16_t rows, cols;
	if (al_guest_winsize_get(p, h->len, &rows, &cols) < 0)
		agent_die(a, "guest agent: WINSIZE with no valid size");
	struct agent_exec *e = find_exec(a, h->id);
	int fd = !e || !e->tty ? -1 : e->out >= 0 ? e->out : e->in;
	if (fd >= 0)
		ioctl(fd, TIOCSWINSZ, &(struct winsize){.ws_row = rows, .ws_col = cols});
}

/* An exec whose process was reaped and whose output is all sent: EXIT. */
static void exec_end(struct agent *a, struct agent_exec *e)
{
	char name[32];
	uint8_t b[AL_GUEST_EXIT_LEN];
	struct al_guest_exit x = {.status = e->status};
	x.user_us = cg_read(e->cg, "cpu.stat", "user_usec");
	x.system_us = cg_read(e->cg, "cpu.stat", "system_usec");
	x.memory_peak = a->cg_mem ? cg_read(e->cg, "memory.peak", NULL) : 0;
	if (!x.memory_peak)
		x.memory_peak = (uint64_t)e->maxrss_kb * 1024;
	x.oom = a->cg_mem && cg_read(e->cg, "memory.events", "oom_kill") > 0;
	x.pids = e->pids_hit;
	al_guest_exit_put(b, &x);
	agent_send(a, AL_G_EXIT, 0, e->id, b, sizeof(b));
	close_fd(&e->in);
	close_fd(&e->cg);
	snprintf(name, sizeof(name), "exec-%" PRIu32, e->id);
	unlinkat(a->cgroot, name, AT_REMOVEDIR);
	free(e->inbuf);
	*e = (struct agent_exec){.in = -1, .out = -1, .err = -1, .cg = -1};
}

static void reap(struct agent *a, int sfd)
{
	struct signalfd_siginfo si;
	while (read(sfd, &si, sizeof(si)) > 0)
		;
	int st;
	struct rusage ru;
	pid_t pid;
	while ((pid = wait4(-1, &st, WNOHANG, &ru)) > 0)
		for (size_t i = 0; i < AL_GUEST_MAX_EXECS; i++) {
			struct agent_exec *e = &a->execs[i];
			if (!e->id || e->pid != pid || e->reaped)
				continue;
			e->reaped = true;
			e->status = st;
			e->maxrss_kb = ru.ru_maxrss;
			/* Everything of the exec ends with its first process: its
			 * pipes then reach their end. */
			cg_write(e->cg, "cgroup.kill", "1");
		}
}

static void stdin_msg(struct agent *a, struct agent_exec *e, const uint8_t *p, uint32_t len)
{
	if (!e || e->in_eof)
		return; /* it ended while the host sent: drop */
	if (!len) {
		e->in_eof = true;
		return;
	}
	if (e->inlen + len > AL_GUEST_WINDOW)
		agent_die(a, "guest agent: the host sent stdin past its window");
	if (!e->inbuf && !(e->inbuf = malloc(AL_GUEST_WINDOW)))
		agent_die(a, "guest agent: out of memory");
	memcpy(e->inbuf + e->inlen, p, len);
	e->inlen += len;
}

static void window_msg(struct agent *a, const struct al_guest_hdr *h, const uint8_t *p)
{
	struct agent_exec *e = find_exec(a, h->id);
	if (h->flags == 0)
		return agent_net_msg(a, h, p);
	if (h->len != 4 || h->flags == 1)
		agent_die(a, "guest agent: a malformed WINDOW from the host");
	if (!e)
		return;
	uint32_t n = al_guest_get32(p), *u = h->flags == 2 ? &e->out_unacked : &e->err_unacked;
	if (n > *u)
		agent_die(a, "guest agent: WINDOW for more than was sent");
	*u -= n;
}

static void dispatch(struct agent *a, const struct al_guest_hdr *h, const uint8_t *p)
{
	switch (h->type) {
	case AL_G_EXEC:
		return exec_start(a, h->id, h->flags, p, h->len);
	case AL_G_STDIN:
		return stdin_msg(a, find_exec(a, h->id), p, h->len);
	case AL_G_SIGNAL: {
		struct agent_exec *e = find_exec(a, h->id);
		uint32_t sig = h->len == 4 ? al_guest_get32(p) : 0;
		if (sig < 1 || sig > 64)
			agent_die(a, "guest agent: SIGNAL with no valid signal");
		if (e && !e->reaped)
			kill(e->pid, (int)sig);
		return;
	}
	case AL_G_WINDOW:
		return window_msg(a, h, p);
	case AL_G_WINSIZE:
		return winsize_msg(a, h, p);
	case AL_G_PING:
		if (h->len != 8)
			agent_die(a, "guest agent: PING without its token");
		return agent_send(a, AL_G_PONG, 0, h->id, p, 8);
	case AL_G_POWEROFF:
		a->poweroff = true;
		return;
	case AL_G_FILE_BEGIN:
	case AL_G_FILE_DATA:
	case AL_G_FILE_END:
	case AL_G_FILES_DONE:
	case AL_G_FILES_GET:
		return agent_files_msg(a, h, p);
	case AL_G_OPEN_OK:
	case AL_G_OPEN_FAILED:
	case AL_G_DATA:
	case AL_G_SHUT:
	case AL_G_CLOSE:
	case AL_G_DGRAM:
		return agent_net_msg(a, h, p);
	}
	agent_die(a, "guest agent: message type %u is not the host's to send", h->type);
}

/* Handle the whole frames read so far, while the queue has room for any
 * answer; what is left waits. */
static void parse(struct agent *a)
{
	size_t off = 0;
	struct al_guest_hdr h;
	while (a->inlen - off >= AL_GUEST_HEADER && pending(a) < AGENT_Q_MAX - AGENT_Q_SOURCES) {
		if (al_guest_hdr_get(a->in + off, &h) < 0)
			agent_die(a, "guest agent: a malformed frame header from the host");
		if (a->inlen - off < AL_GUEST_HEADER + h.len)
			break;
		dispatch(a, &h, a->in + off + AL_GUEST_HEADER);
		off += AL_GUEST_HEADER + h.len;
	}
	memmove(a->in, a->in + off, a->inlen - off);
	a->inlen -= off;
}

/* Output of an exec: read while its window and the queue allow. */
static void pump_out(struct agent *a, struct agent_exec *e, bool err)
{
	static uint8_t buf[AL_GUEST_MAX_PAYLOAD];
	int *fd = err ? &e->err : &e->out;
	uint32_t *u = err ? &e->err_unacked : &e->out_unacked;
	size_t room = AL_GUEST_WINDOW - *u;
	ssize_t n = read(*fd, buf, room < sizeof(buf) ? room : sizeof(buf));
	if (n > 0) {
		agent_send(a, err ? AL_G_STDERR : AL_G_STDOUT, 0, e->id, buf, (uint32_t)n);
		*u += (uint32_t)n;
	} else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
		close_fd(fd);
	}
}

static void pump_in(struct agent *a, struct agent_exec *e)
{
	ssize_t n = write(e->in, e->inbuf, e->inlen);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	/* A closed pipe consumes the rest: the host's window must reopen. */
	size_t done = n < 0 ? e->inlen : (size_t)n;
	memmove(e->inbuf, e->inbuf + done, e->inlen - done);
	e->inlen -= done;
	uint8_t b[4];
	al_guest_put32(b, (uint32_t)done);
	agent_send(a, AL_G_WINDOW, 1, e->id, b, 4);
	if (n < 0)
		e->in_eof = true, close_fd(&e->in);
}

void agent_serve(struct agent *a)
{
	static struct pollfd pfd[AGENT_MAX_FDS];
	struct pollfd *ex[AL_GUEST_MAX_EXECS][3];
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	int sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (!(a->in = malloc(IN_CAP)))
		agent_die(a, "guest agent: out of memory");
	for (;;) {
		size_t n = 2;
		parse(a);
		for (size_t i = 0; i < AL_GUEST_MAX_EXECS; i++) {
			struct agent_exec *e = &a->execs[i];
			if (e->id && e->reaped && e->out < 0 && e->err < 0 && agent_q_room(a))
				exec_end(a, e);
			if (e->id && e->in >= 0 && e->in_eof && !e->inlen)
				close_fd(&e->in);
			ex[i][0] = ex[i][1] = ex[i][2] = NULL;
			if (!e->id)
				continue;
			if (e->in >= 0 && e->inlen)
				ex[i][0] = &pfd[n], pfd[n++] = (struct pollfd){e->in, POLLOUT, 0};
			if (e->out >= 0 && agent_q_room(a) && e->out_unacked < AL_GUEST_WINDOW)
				ex[i][1] = &pfd[n], pfd[n++] = (struct pollfd){e->out, POLLIN, 0};
			if (e->err >= 0 && agent_q_room(a) && e->err_unacked < AL_GUEST_WINDOW)
				ex[i][2] = &pfd[n], pfd[n++] = (struct pollfd){e->err, POLLIN, 0};
		}
		/* A fork the exec's pids limit refused ends the exec at once,
		 * as the host's meter ends a run (checked every 100 ms). */
		int wait_ms = 1000;
		for (size_t i = 0; a->cfg.c.pids && i < AL_GUEST_MAX_EXECS; i++) {
			struct agent_exec *e = &a->execs[i];
			if (!e->id || e->reaped || e->pids_hit)
				continue;
			wait_ms = 100;
			if (cg_read(e->cg, "pids.events", "max") > 0) {
				e->pids_hit = true;
				cg_write(e->cg, "cgroup.kill", "1");
			}
		}
		size_t net0 = n;
		agent_net_poll(a, pfd, &n);
		agent_files_pump(a);
		if (a->poweroff && !pending(a))
			agent_poweroff(a);
		pfd[0] = (struct pollfd){a->chan, pending(a) ? POLLOUT : 0, 0};
		if (a->inlen < IN_CAP && pending(a) < AGENT_Q_MAX - AGENT_Q_SOURCES)
			pfd[0].events |= POLLIN;
		pfd[1] = (struct pollfd){sfd, POLLIN, 0};
		if (poll(pfd, n, wait_ms) < 0 && errno != EINTR)
			agent_die(a, "guest agent: poll: %s", strerror(errno));
		if (pfd[0].revents & POLLOUT)
			flush(a);
		if (pfd[0].revents & POLLIN) {
			ssize_t r = read(a->chan, a->in + a->inlen, IN_CAP - a->inlen);
			if (r > 0)
				a->inlen += (size_t)r;
		}
		if (pfd[1].revents)
			reap(a, sfd);
		for (size_t i = 0; i < AL_GUEST_MAX_EXECS; i++) {
			struct agent_exec *e = &a->execs[i];
			if (ex[i][0] && ex[i][0]->revents)
				pump_in(a, e);
			if (ex[i][1] && ex[i][1]->revents)
				pump_out(a, e, false);
			if (ex[i][2] && ex[i][2]->revents)
				pump_out(a, e, true);
		}
		agent_net_events(a, pfd + net0, n - net0);
	}
}
