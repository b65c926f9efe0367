/* A microvm or vm session's execs, on the host's side (microvm.h): the
 * native sandbox's command is the VMM in session mode, which serves execs
 * on a Unix socket in its scratch (vmm.h). Each exec is one connection,
 * made through the scratch's root that the native layer handed over
 * (tmp/.airlock-vmm.sock beneath it, no link followed): the request (the channel's
 * EXEC payload: cwd, argv, the plan's environment with the exec's over
 * it) with the exec's three pipe ends (a tty exec: none; the VMM makes the
 * pty in its own sandbox's devpts and sends its master with STARTED, for
 * the run layer: the host opens no pty), then the VMM's answers read from
 * the run's loop: STARTED, FAILED or ENDED. The VMM is sandboxed code:
 * every answer is checked, and one that is not what we asked for ends
 * the exec as killed. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "backend/microvm/microvm.h"
#include "backend/microvm/vmm.h"
#include "backend/native/state.h"
#include "core/cleanup.h"
#include "core/loop.h"
#include "core/sys.h"
#include "core/util.h"
#include "guest/proto.h"

#define ANSWER_MAX (8 + AL_GUEST_EXIT_LEN)
/* A killed exec's ENDED is this late at the most (a guest under TCG on a
 * busy host reports a kill within a second or two). */
#define KILL_WAIT_MS 10000
/* The VMM listens within moments of its start: an exec asked for before
 * that waits for its socket this long at most (the run's loop with it).
 * Once a connection was made the socket stays until the VMM dies, so a
 * later exec does not wait: refused or missing then, the VMM is gone. */
#define CONNECT_WAIT_MS 3000
/* The most a connect or the request's send waits for the VMM. */
#define SEND_WAIT_S 2

struct vm_exec {
	struct vm_exec *next;
	struct vm_run *w;
	uint32_t id;
	struct al_watch *watch; /* the connection */
	uint8_t in[ANSWER_MAX];
	size_t in_len;
	bool started;
	/* Armed by a SIGKILL: the VMM has this long to answer ENDED. */
	struct al_timer *kill_wait;
	bool tty;
	/* A tty exec's pty master, come from the VMM with STARTED's first
	 * bytes and checked to be one (pty_master_ok); -1: none. */
	int master;
};

static struct vm_run *run_of(struct al_sandbox *sb)
{
	return sb->state ? sb->state->outer : NULL;
}

/* Whether env (NAME=VALUE entries) sets the name of entry e. */
static bool overridden(char *const *env, const char *e)
{
	size_t n = strcspn(e, "=");
	for (size_t i = 0; env && env[i]; i++)
		if (strncmp(env[i], e, n) == 0 && env[i][n] == '=')
			return true;
	return false;
}

/* A tty exec's size: the request's (the API holds it to 1 to 1000),
 * 24 x 80 where it gave none, never past the channel's AL_GUEST_TTY_MAX. */
static struct winsize tty_size(const struct al_sandbox_exec *x)
{
	struct winsize ws = {.ws_row = x->rows ? x->rows : 24, .ws_col = x->cols ? x->cols : 80};
	if (ws.ws_row > AL_GUEST_TTY_MAX)
		ws.ws_row = AL_GUEST_TTY_MAX;
	if (ws.ws_col > AL_GUEST_TTY_MAX)
		ws.ws_col = AL_GUEST_TTY_MAX;
	return ws;
}

/* The request: the header, then u32 argc, u32 envc, cwd, argv, env (the
 * plan's environment, less what the exec sets, then the exec's). A file
 * operation (argv [OP, PATH]) has flags AL_GUEST_EXEC_FILE_OP, cwd "/" and
 * no environment (proto.h). */
static uint8_t *request(const struct vm_run *w, const struct al_sandbox_exec *x, size_t *len,
			struct al_error *err)
{
	const char *cwd = x->file_op	     ? "/"
			  : x->cwd	     ? x->cwd
			  : w->orig->workdir ? w->orig->workdir
					     : "/work";
	size_t size = 8 + 8 + strlen(cwd) + 1, argc = 0, envc = 0;
	char *const *penv = x->file_op ? NULL : w->orig->envp;
	char *const *xenv = x->file_op ? NULL : x->env;
	for (size_t i = 0; x->argv[i]; i++, argc++)
		size += strlen(x->argv[i]) + 1;
	for (size_t i = 0; penv && penv[i]; i++)
		if (!overridden(xenv, penv[i]))
			size += strlen(penv[i]) + 1, envc++;
	for (size_t i = 0; xenv && xenv[i]; i++, envc++)
		size += strlen(xenv[i]) + 1;
	if (argc == 0) {
		al_error_set(err, EINVAL, "exec: no command given");
		return NULL;
	}
	/* An exec's own memory limit: the EXEC's limits trailer, for the
	 * agent to set on the exec's cgroup in the guest. */
	bool limits = x->memory_asked && !x->file_op && x->memory_bytes;
	if (limits)
		size += AL_GUEST_EXEC_LIMITS_LEN;
	/* A terminal: its size in the TTY trailer, after LIMITS'. */
	bool tty = x->tty && !x->file_op;
	if (tty)
		size += AL_GUEST_EXEC_TTY_LEN;
	if (size - 8 > AL_GUEST_MAX_PAYLOAD || argc + envc > AL_GUEST_MAX_ARGS) {
		al_error_set(err, E2BIG,
			     "exec: argv, env and cwd are %zu bytes in %zu strings, over backend "
			     "%s's %u bytes or %u strings",
			     size - 8, argc + envc, w->kind->name, AL_GUEST_MAX_PAYLOAD,
			     AL_GUEST_MAX_ARGS);
		return NULL;
	}
	uint8_t *b = xcalloc(1, size), *at = b + 16;
	b[0] = AL_VMM_REQ_EXEC;
	b[1] = x->file_op ? AL_GUEST_EXEC_FILE_OP
			  : (limits ? AL_GUEST_EXEC_LIMITS : 0) | (tty ? AL_GUEST_EXEC_TTY : 0);
	al_guest_put32(b + 4, (uint32_t)(size - 8));
	al_guest_put32(b + 8, (uint32_t)argc);
	al_guest_put32(b + 12, (uint32_t)envc);
#define PUT(s) (memcpy(at, (s), strlen(s) + 1), at += strlen(s) + 1)
	PUT(cwd);
	for (size_t i = 0; x->argv[i]; i++)
		PUT(x->argv[i]);
	for (size_t i = 0; penv && penv[i]; i++)
		if (!overridden(xenv, penv[i]))
			PUT(penv[i]);
	for (size_t i = 0; xenv && xenv[i]; i++)
		PUT(xenv[i]);
#undef PUT
	if (limits)
		al_guest_put64(at, x->memory_bytes), at += AL_GUEST_EXEC_LIMITS_LEN;
	if (tty) {
		struct winsize ws = tty_size(x);
		al_guest_put16(at, ws.ws_row);
		al_guest_put16(at + 2, ws.ws_col);
		al_guest_put32(at + 4, 0);
	}
	*len = size;
	return b;
}

/* Connect to the VMM's socket, waiting for it a little after the start.
 * The scratch is the VMM's, and the VMM is sandboxed code next to a
 * guest: a link there (the socket's name, or tmp/ itself, made a link to
 * a socket of the host's) must not lead this connect, made by the host's
 * side with the host's view, anywhere else. So the socket is opened with
 * openat2 beneath the scratch's root, no link followed, checked to be a
 * socket, and connected to through that descriptor (/proc/self/fd/N of an
 * O_PATH descriptor names the inode itself, never a path again). */
static int connect_vmm(struct vm_run *w, struct al_error *err)
{
	struct open_how how = {.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
			       .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
					  RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV};
	for (int waited = 0;; waited += 10) {
		int e, fd = -1;
		_cleanup_close_ int path =
		    al_sys_openat2(w->scratch, AL_VMM_SOCK_SCRATCH, &how, sizeof(how));
		struct stat st;
		if (path < 0)
			e = errno;
		else if (fstat(path, &st) < 0)
			e = errno;
		else if (!S_ISSOCK(st.st_mode))
			return al_error_set(err, EPROTO,
					    "exec: backend %s: the VMM's socket is not a socket "
					    "(the VMM is not airlock's any more)",
					    w->kind->name);
		else if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
			return al_error_setsys(err, errno, "exec: socket");
		else {
			/* A listener that does not accept fills its backlog,
			 * and a blocking connect then waits for room without
			 * end (the run's loop with it): the send timeout bounds
			 * that wait too (EAGAIN), and the request's send. */
			struct timeval tv = {.tv_sec = SEND_WAIT_S};
			struct sockaddr_un a = {.sun_family = AF_UNIX};
			setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
			snprintf(a.sun_path, sizeof(a.sun_path), "/proc/self/fd/%d", path);
			if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0) {
				w->vmm_reached = true;
				return fd;
			}
			e = errno;
			close(fd);
		}
		if (e == EAGAIN)
			return al_error_set(err, EAGAIN,
					    "exec: backend %s: the VMM's socket took no connection "
					    "in %d s (the VMM does not accept)",
					    w->kind->name, SEND_WAIT_S);
		if ((e != ENOENT && e != ECONNREFUSED) || waited >= CONNECT_WAIT_MS ||
		    w->vmm_reached)
			return al_error_setsys(err, e, "exec: backend %s: the VMM's socket",
					       w->kind->name);
		nanosleep(&(struct timespec){.tv_nsec = 10 * 1000000}, NULL);
	}
}

static void exec_free(struct vm_exec *e)
{
	for (struct vm_exec **p = &e->w->execs; *p; p = &(*p)->next)
		if (*p == e) {
			*p = e->next;
			break;
		}
	al_watch_close(e->watch);
	al_timer_free(e->kill_wait);
	if (e->master >= 0)
		close(e->master);
	free(e);
}

/* The exec is over: reported once, then forgotten. */
static void ended(struct vm_exec *e, int status, int exec_err, const struct al_guest_exit *x)
{
	const struct al_exec_events *ev = e->w->exec_events;
	uint32_t id = e->id;
	exec_free(e);
	if (ev)
		ev->ended(ev->data, id, status, exec_err, x ? x->user_us : 0, x ? x->system_us : 0,
			  x ? x->memory_peak : 0, x && x->oom);
}

/* A wait status a process can end with: an exit code, or death by one
 * of Linux's signals (1 to 64, with or without a core). Any other (a
 * stopped process, bits past those) the VMM made up: the record would
 * show an exit or a signal that never was. */
static bool wait_status_ok(int st)
{
	if ((st & 0x7f) == 0)
		return (st & ~0xff00) == 0;
	return (st & 0x7f) <= 64 && (st & ~0xff) == 0;
}

/* One whole answer in e->in: 0 handled (e may be gone), -1 not one we
 * could have been sent. */
static int answer(struct vm_exec *e, uint8_t type, const uint8_t *p, uint32_t len)
{
	const struct al_exec_events *ev = e->w->exec_events;
	if (type == AL_VMM_ANS_STARTED && len == 4 && !e->started) {
		/* A tty exec's STARTED brings its master; no other answer
		 * brings a descriptor (on_conn). */
		if (e->tty != (e->master >= 0))
			return -1;
		e->started = true;
		/* The terminal before started (backend.h). */
		if (e->master >= 0 && ev && ev->terminal) {
			int m = e->master;
			e->master = -1;
			ev->terminal(ev->data, e->id, m);
		}
		if (ev)
			ev->started(ev->data, e->id, (pid_t)al_guest_get32(p));
		return 0;
	}
	if (type == AL_VMM_ANS_FAILED && len == 4 && !e->started) {
		uint32_t err = al_guest_get32(p);
		ended(e, (err == ENOENT ? 127 : 126) << 8, err && err < 4096 ? (int)err : EIO,
		      NULL);
		return 0;
	}
	if (type == AL_VMM_ANS_ENDED && len == AL_GUEST_EXIT_LEN && e->started) {
		struct al_guest_exit x;
		if (al_guest_exit_get(p, len, &x) < 0 || !wait_status_ok(x.status))
			return -1;
		ended(e, x.status, 0, &x);
		return 0;
	}
	return -1;
}

/* Whether fd, come from the VMM (sandboxed code), is what a tty exec's
 * STARTED may bring: the master of a pty (a character device that
 * answers TIOCGPTN). Any other descriptor is closed unused. */
static bool pty_master_ok(int fd)
{
	struct stat st;
	unsigned n;
	return fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && ioctl(fd, TIOCGPTN, &n) == 0;
}

/* Read from the VMM into e->in: bytes, and the one descriptor a tty
 * exec's STARTED may carry (kept in e->master when it is a pty master
 * and none came before; any other, or more, makes it -EPROTO). */
static ssize_t recv_answer(struct vm_exec *e, size_t want)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(4 * sizeof(int))];
	} c;
	struct iovec io = {.iov_base = e->in + e->in_len, .iov_len = want - e->in_len};
	struct msghdr m = {
	    .msg_iov = &io, .msg_iovlen = 1, .msg_control = c.b, .msg_controllen = sizeof(c.b)};
	ssize_t n = recvmsg(al_watch_fd(e->watch), &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0)
		return -errno;
	bool bad = (m.msg_flags & MSG_CTRUNC) != 0;
	for (struct cmsghdr *h = CMSG_FIRSTHDR(&m); h; h = CMSG_NXTHDR(&m, h)) {
		if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS)
			continue;
		for (size_t i = 0; i < (h->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(h) + i * sizeof(int), sizeof(int));
			/* Only on STARTED's first bytes, of a tty exec. */
			if (!bad && e->tty && e->master < 0 && !e->started && e->in_len == 0 &&
			    pty_master_ok(fd)) {
				e->master = fd;
				continue;
			}
			bad = true;
			close(fd);
		}
	}
	return bad ? -EPROTO : n;
}

static void on_conn(struct al_watch *wt, uint32_t events, void *data)
{
	struct vm_exec *e = data;
	(void)wt, (void)events;
	for (;;) {
		size_t want = 8;
		if (e->in_len >= 8) {
			uint32_t len = al_guest_get32(e->in + 4);
			if (len > AL_GUEST_EXIT_LEN || e->in[1] || e->in[2] || e->in[3])
				break; /* not an answer of the VMM's */
			want = 8 + len;
		}
		if (e->in_len == want) {
			uint32_t id = e->id;
			struct vm_run *w = e->w;
			if (answer(e, e->in[0], e->in + 8, (uint32_t)(want - 8)) < 0)
				break;
			/* Still ours? (an end freed it) */
			struct vm_exec *f = w->execs;
			while (f && f != e)
				f = f->next;
			if (!f || f->id != id)
				return;
			e->in_len = 0;
			continue;
		}
		ssize_t n = recv_answer(e, want);
		if (n == -EAGAIN || n == -EINTR)
			return;
		if (n <= 0)
			break; /* the VMM closed it before the end, or broke the protocol */
		e->in_len += (size_t)n;
	}
	ended(e, SIGKILL, 0, NULL);
}

int al_vm_exec(struct al_sandbox *sb, const struct al_sandbox_exec *x, struct al_error *err)
{
	struct vm_run *w = run_of(sb);
	if (!w || !w->session || w->scratch < 0)
		return al_error_set(err, EOPNOTSUPP, "exec: the sandbox is not a session's");
	size_t len;
	_cleanup_free_ uint8_t *req = request(w, x, &len, err);
	if (!req)
		return -err->code;
	bool tty = x->tty && !x->file_op;
	int fd = connect_vmm(w, err);
	if (fd < 0)
		return fd;
	/* The request is at most 64 KiB, which a Unix socket's buffer holds:
	 * sent whole, or the VMM is not reading (the send timeout that
	 * connect_vmm set: a timeout, not a hang). A tty exec sends no
	 * descriptor: its pty is the VMM's (vmm.h). */
	int fds[3] = {x->stdin_rd, x->stdout_wr, x->stderr_wr};
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(fds))];
	} c = {0};
	struct iovec io = {.iov_base = req, .iov_len = len};
	struct msghdr m = {.msg_iov = &io,
			   .msg_iovlen = 1,
			   .msg_control = tty ? NULL : c.b,
			   .msg_controllen = tty ? 0 : sizeof(c.b)};
	if (!tty) {
		struct cmsghdr *h = CMSG_FIRSTHDR(&m);
		h->cmsg_level = SOL_SOCKET;
		h->cmsg_type = SCM_RIGHTS;
		h->cmsg_len = CMSG_LEN(sizeof(fds));
		memcpy(CMSG_DATA(h), fds, sizeof(fds));
	}
	ssize_t n = sendmsg(fd, &m, MSG_NOSIGNAL);
	if (n != (ssize_t)len) {
		int e = n < 0 ? errno : EAGAIN;
		close(fd);
		return al_error_setsys(err, e, "exec: backend %s: sending the request to the VMM",
				       w->kind->name);
	}
	struct vm_exec *e = xcalloc(1, sizeof(*e));
	e->master = -1;
	e->w = w;
	e->id = x->id;
	e->watch = al_loop_add(w->loop, fd, EPOLLIN, on_conn, e);
	if (!e->watch) {
		int r = al_error_setsys(err, errno, "exec: watching the VMM's answer");
		close(fd);
		free(e);
		return r;
	}
	e->tty = tty;
	e->next = w->execs;
	w->execs = e;
	return 0;
}

/* A killed exec the VMM did not report ended in KILL_WAIT_MS (a VMM
 * that does not answer, or a guest that never sends its EXIT): ended
 * here as killed, and its connection closed, which makes an airlock VMM
 * kill it in the guest. Its caller (a timeout, a file operation's 504)
 * and its slot do not wait for the session's end. */
static void on_kill_wait(struct al_timer *t, uint64_t n, void *data)
{
	(void)t, (void)n;
	ended(data, SIGKILL, 0, NULL);
}

int al_vm_exec_signal(struct al_sandbox *sb, uint32_t id, int sig)
{
	struct vm_run *w = run_of(sb);
	struct vm_exec *e = w ? w->execs : NULL;
	while (e && e->id != id)
		e = e->next;
	if (!e || sig < 1 || sig > 64)
		return -ESRCH;
	if (sig == SIGKILL && !e->kill_wait &&
	    (e->kill_wait = al_loop_timer(w->loop, on_kill_wait, e)))
		al_timer_arm(e->kill_wait, w->kill_wait_ms ? w->kill_wait_ms : KILL_WAIT_MS, false);
	uint8_t b[12] = {AL_VMM_REQ_SIGNAL};
	al_guest_put32(b + 4, 4);
	al_guest_put32(b + 8, (uint32_t)sig);
	/* 12 bytes on a socket the VMM reads: a full buffer means it does
	 * not, and the exec's end comes with the session's. */
	return send(al_watch_fd(e->watch), b, sizeof(b), MSG_DONTWAIT | MSG_NOSIGNAL) ==
		       (ssize_t)sizeof(b)
		   ? 0
		   : -errno;
}

void al_vm_execs_end(struct vm_run *w)
{
	while (w->execs)
		ended(w->execs, SIGKILL, 0, NULL);
}
