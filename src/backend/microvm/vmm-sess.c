/* A session's execs on the VMM's side (vmm.h, vmm-internal.h): clients
 * of the socket at AL_VMM_SOCK, one connection and one exec slot each.
 * A client's EXEC request (with its three fds) is checked as the guest's
 * EXEC would be, then sent to the agent under a fresh id once the guest
 * is up; its stdio is relayed with the windows of every exec
 * (vmm-relay.c); STARTED, FAILED and ENDED are answered on the
 * connection, ENDED only once the exec's output is written to its fds.
 * The client is not trusted further than the guest: a bad message ends
 * its exec (FAILED EINVAL), never the run, and its hang-up kills the
 * exec in the guest. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "backend/microvm/vmm-internal.h"
#include "backend/microvm/vmm.h"
#include "core/cleanup.h"
#include "core/util.h"

struct vmm_exec *vmm_exec_find(struct vmm *v, uint32_t id, size_t *slot)
{
	for (size_t i = 0; i < AL_GUEST_MAX_EXECS; i++)
		if (v->execs[i] && v->execs[i]->id == id) {
			if (slot)
				*slot = i;
			return v->execs[i];
		}
	return NULL;
}

struct vmm_exec *vmm_exec_add(struct vmm *v, uint32_t id, int fd_in, int out, int err)
{
	for (size_t i = 0; i < AL_GUEST_MAX_EXECS; i++) {
		if (v->execs[i])
			continue;
		struct vmm_exec *x = xcalloc(1, sizeof(*x));
		x->id = id;
		x->fd_in = fd_in;
		x->fd_out[0] = out;
		x->fd_out[1] = err;
		x->conn = -1;
		x->stdin_credit = AL_GUEST_WINDOW;
		for (int k = 0; k < 2; k++)
			vmm_queue_init(&x->stdio[k], AL_GUEST_WINDOW);
		for (int k = 0; k < 3; k++)
			x->req_fds[k] = -1;
		x->master = -1;
		v->execs[i] = x;
		return x;
	}
	return NULL;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* Close what the exec holds of its client: the connection, its fds. The
 * output still queued is dropped and acknowledged (the guest is not kept
 * waiting for a window nobody will open). */
static void let_go(struct vmm *v, struct vmm_exec *x)
{
	close_fd(&x->conn);
	if (!x->owns)
		return;
	for (int k = 0; k < 3; k++)
		close_fd(&x->req_fds[k]);
	close_fd(&x->master);
	close_fd(&x->fd_in);
	x->stdin_open = false;
	for (int i = 0; i < 2; i++) {
		close_fd(&x->fd_out[i]);
		if (x->stdio[i].len && x->started && !x->exited && !v->dry) {
			uint8_t n[4];
			al_guest_put32(n, (uint32_t)x->stdio[i].len);
			vmm_send(v, AL_G_WINDOW, (uint8_t)(2 + i), x->id, n, 4);
		}
		x->stdio[i].len = x->stdio[i].off = 0;
	}
}

void vmm_exec_free(struct vmm *v, size_t slot)
{
	struct vmm_exec *x = v->execs[slot];
	let_go(v, x);
	for (int k = 0; k < 2; k++)
		vmm_queue_free(&x->stdio[k]);
	free(x->req);
	free(x);
	v->execs[slot] = NULL;
}

/* One answer on a client's connection: small, so it fits the socket's
 * buffer unless the client stopped reading long ago; then it is lost and
 * the client's hang-up (or its next read) tells. */
static void answer(int conn, uint8_t type, const void *p, uint32_t len)
{
	uint8_t b[VMM_REQ_HEADER + AL_GUEST_EXIT_LEN] = {type};
	al_guest_put32(b + 4, len);
	memcpy(b + VMM_REQ_HEADER, p, len);
	if (conn >= 0)
		(void)!send(conn, b, VMM_REQ_HEADER + len, MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* STARTED with a tty exec's pty master (SCM_RIGHTS, on its first byte). */
static void answer_started_tty(int conn, uint32_t pid, int master)
{
	uint8_t b[VMM_REQ_HEADER + 4] = {AL_VMM_ANS_STARTED};
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} cm = {0};
	struct iovec io = {.iov_base = b, .iov_len = sizeof(b)};
	struct msghdr m = {
	    .msg_iov = &io, .msg_iovlen = 1, .msg_control = cm.b, .msg_controllen = sizeof(cm.b)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	al_guest_put32(b + 4, 4);
	al_guest_put32(b + 8, pid);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &master, sizeof(int));
	if (conn >= 0)
		(void)!sendmsg(conn, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
}

static void answer_u32(int conn, uint8_t type, uint32_t x)
{
	uint8_t p[4];
	al_guest_put32(p, x);
	answer(conn, type, p, 4);
}

static void send_signal(struct vmm *v, struct vmm_exec *x, uint32_t sig)
{
	uint8_t p[4];
	al_guest_put32(p, sig);
	vmm_send(v, AL_G_SIGNAL, 0, x->id, p, 4);
}

/* Answer FAILED err and let the client go: its connection is shut for
 * writing and kept, what it still sends dropped (drain), so that the
 * answer is not lost to a reset; closed at once when all places are
 * taken. */
static void refuse(struct vmm *v, int conn, uint32_t err)
{
	answer_u32(conn, AL_VMM_ANS_FAILED, err);
	shutdown(conn, SHUT_WR);
	for (size_t i = 0; i < AL_GUEST_MAX_EXECS; i++)
		if (v->draining[i] < 0) {
			v->draining[i] = conn;
			v->drain_end[i] = v->now_ms + 2000;
			return;
		}
	close(conn);
}

/* Read and drop what a refused client sends (fds closed) until its close
 * or its deadline. */
static void drain(struct vmm *v)
{
	for (size_t i = 0; i < AL_GUEST_MAX_EXECS; i++) {
		int fd = v->draining[i];
		if (fd < 0)
			continue;
		ssize_t n;
		do {
			char b[4096];
			union {
				struct cmsghdr h;
				char b[CMSG_SPACE(16 * sizeof(int))];
			} c;
			struct iovec io = {.iov_base = b, .iov_len = sizeof(b)};
			struct msghdr m = {.msg_iov = &io,
					   .msg_iovlen = 1,
					   .msg_control = c.b,
					   .msg_controllen = sizeof(c.b)};
			n = recvmsg(fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
			for (struct cmsghdr *h = n > 0 ? CMSG_FIRSTHDR(&m) : NULL; h;
			     h = CMSG_NXTHDR(&m, h)) {
				if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS)
					continue;
				for (size_t j = 0; j < (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
				     j++) {
					int x;
					memcpy(&x, CMSG_DATA(h) + j * sizeof(int), sizeof(int));
					close(x);
				}
			}
		} while (n > 0);
		if ((n < 0 && errno == EAGAIN && v->now_ms < v->drain_end[i]) ||
		    (n < 0 && errno == EINTR))
			continue;
		close(fd);
		v->draining[i] = -1;
	}
}

int vmm_sess_listen(void)
{
	const char *tmp = AL_VMM_SOCK ".new";
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", tmp);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	unlink(tmp);
	/* 0600: only our uid (and the host's root) may connect. */
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || chmod(tmp, 0600) < 0 ||
	    listen(fd, (int)AL_GUEST_MAX_EXECS) < 0 || rename(tmp, AL_VMM_SOCK) < 0) {
		int e = errno;
		close(fd);
		unlink(tmp);
		return -e;
	}
	return fd;
}

/* Take the new connections: each gets a slot and a fresh id, or FAILED
 * EAGAIN when AL_GUEST_MAX_EXECS slots are taken. */
static void accept_clients(struct vmm *v)
{
	for (;;) {
		int fd = accept4(v->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		uint32_t id = v->next_id + 1;
		struct vmm_exec *x = id > VMM_EXEC_ID ? vmm_exec_add(v, id, -1, -1, -1) : NULL;
		if (!x) {
			refuse(v, fd, EAGAIN);
			continue;
		}
		v->next_id = id;
		x->conn = fd;
		x->owns = true;
		x->req = xmalloc(VMM_REQ_MAX);
	}
}

/* Read one whole message of the client into x->req: 1 whole, 0 not yet,
 * -EINVAL a bad one, -EPIPE the client is gone. Fds come with the
 * request only, three at most. */
static int read_msg(struct vmm_exec *x)
{
	for (;;) {
		size_t want = VMM_REQ_HEADER - x->req_len;
		if (x->req_len >= VMM_REQ_HEADER) {
			uint32_t len = al_guest_get32(x->req + 4);
			uint8_t type = x->req[0];
			/* Flags: an EXEC's only (vmm.h), no unknown bit;
			 * checked with its trailers once it is whole. */
			if ((x->req[1] && type != AL_VMM_REQ_EXEC) ||
			    (x->req[1] &
			     ~(AL_GUEST_EXEC_FILE_OP | AL_GUEST_EXEC_LIMITS | AL_GUEST_EXEC_TTY)) ||
			    x->req[2] || x->req[3] || len > AL_GUEST_MAX_PAYLOAD ||
			    (type == AL_VMM_REQ_EXEC) == x->requested ||
			    (type != AL_VMM_REQ_EXEC && type != AL_VMM_REQ_SIGNAL) ||
			    (type == AL_VMM_REQ_SIGNAL && len != 4))
				return -EINVAL;
			want = VMM_REQ_HEADER + len - x->req_len;
		}
		if (want == 0)
			return 1;
		union {
			struct cmsghdr h;
			char b[CMSG_SPACE(3 * sizeof(int))];
		} c;
		struct iovec io = {.iov_base = x->req + x->req_len, .iov_len = want};
		struct msghdr m = {.msg_iov = &io,
				   .msg_iovlen = 1,
				   .msg_control = c.b,
				   .msg_controllen = sizeof(c.b)};
		ssize_t n = recvmsg(x->conn, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return 0;
		bool bad = (m.msg_flags & MSG_CTRUNC) != 0;
		for (struct cmsghdr *h = n > 0 ? CMSG_FIRSTHDR(&m) : NULL; h;
		     h = CMSG_NXTHDR(&m, h)) {
			if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS)
				continue;
			size_t k = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (size_t j = 0; j < k; j++) {
				int fd;
				memcpy(&fd, CMSG_DATA(h) + j * sizeof(int), sizeof(int));
				if (x->requested || x->n_fds == 3) {
					close(fd);
					bad = true;
				} else {
					x->req_fds[x->n_fds++] = fd;
				}
			}
		}
		if (n <= 0)
			return -EPIPE;
		x->req_len += (size_t)n;
		if (bad)
			return -EINVAL;
	}
}

/* A pty of our sandbox's own devpts (native gives the VMM of a session
 * one) for a tty exec, of rows x cols: the slave (made raw: the guest's
 * pty alone does the line discipline, ours passes bytes), the master in
 * *master; or -errno. The master goes to the client with STARTED: the
 * host never opens a pty for it (its supervisor's landlock allows none). */
static int open_pty(uint16_t rows, uint16_t cols, int *master)
{
	struct winsize ws = {.ws_row = rows, .ws_col = cols};
	int unlock = 0, slave = -1;
	*master = open("/dev/pts/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (*master < 0)
		return -errno;
	if (ioctl(*master, TIOCSPTLCK, &unlock) < 0 || ioctl(*master, TIOCSWINSZ, &ws) < 0 ||
	    (slave = ioctl(*master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0 ||
	    vmm_tty_raw(slave) < 0) {
		int e = errno;
		if (slave >= 0)
			close(slave);
		close(*master);
		*master = -1;
		return -e;
	}
	return slave;
}

/* The whole EXEC request: three fds (none for a tty exec, whose pty we
 * make) and a payload the agent would take. */
static int take_request(struct vmm_exec *x)
{
	/* The parser's arrays (64 KiB together): for this call only. */
	_cleanup_free_ const char **argv = xcalloc(2 * (AL_GUEST_MAX_ARGS + 1), sizeof(char *));
	const char **env = argv + AL_GUEST_MAX_ARGS + 1;
	const char *cwd;
	uint32_t argc, envc, len = (uint32_t)(x->req_len - VMM_REQ_HEADER);
	struct al_guest_exec_opts o;
	if (al_guest_exec_trailers(x->req + VMM_REQ_HEADER, &len, x->req[1], &o) < 0 ||
	    x->n_fds != (o.tty ? 0 : 3) ||
	    al_guest_exec_parse(x->req + VMM_REQ_HEADER, len, &cwd, argv, &argc, env, &envc) < 0 ||
	    argc == 0 || cwd[0] != '/')
		return -EINVAL;
	if (o.tty) {
		int slave = open_pty(o.rows, o.cols, &x->master);
		if (slave < 0)
			return slave;
		x->req_fds[0] = slave;
		x->req_fds[1] = dup(slave);
		x->req_fds[2] = dup(slave);
		if (x->req_fds[1] < 0 || x->req_fds[2] < 0)
			return -errno;
	}
	x->tty = o.tty;
	x->rows = o.rows, x->cols = o.cols;
	x->fd_in = x->req_fds[0];
	x->fd_out[0] = x->req_fds[1];
	x->fd_out[1] = x->req_fds[2];
	for (int k = 0; k < 3; k++) {
		fcntl(x->req_fds[k], F_SETFL, fcntl(x->req_fds[k], F_GETFL) | O_NONBLOCK);
		x->req_fds[k] = -1;
	}
	x->flags = x->req[1]; /* passed on to the guest's EXEC */
	x->requested = true;
	return 0;
}

/* The client went (or broke its protocol, err EINVAL): an exec not yet
 * given to the guest is forgotten, one running is killed; its slot is
 * freed once the guest says it ended. */
static void client_gone(struct vmm *v, size_t slot, int err)
{
	struct vmm_exec *x = v->execs[slot];
	if (err == -EINVAL) {
		refuse(v, x->conn, EINVAL);
		x->conn = -1;
	}
	if (!x->sent || x->exited) {
		vmm_exec_free(v, slot);
		return;
	}
	x->gone = true;
	let_go(v, x);
	if (x->started)
		send_signal(v, x, 9);
}

void vmm_sess_started(struct vmm *v, struct vmm_exec *x, uint32_t pid)
{
	if (x->gone) {
		send_signal(v, x, 9);
		return;
	}
	if (x->master >= 0) {
		answer_started_tty(x->conn, pid, x->master);
		close_fd(&x->master);
	} else {
		answer_u32(x->conn, AL_VMM_ANS_STARTED, pid);
	}
	if (x->pending_sig)
		send_signal(v, x, x->pending_sig);
}

void vmm_sess_failed(struct vmm *v, size_t slot, uint32_t err)
{
	struct vmm_exec *x = v->execs[slot];
	if (!x->gone)
		answer_u32(x->conn, AL_VMM_ANS_FAILED, err ? err : EIO);
	vmm_exec_free(v, slot);
}

/* One client's turn: its messages read and acted on, its EXEC sent once
 * the guest serves, its ENDED once its output is out. */
static void client_step(struct vmm *v, size_t slot)
{
	struct vmm_exec *x = v->execs[slot];
	if (x->requested && !x->sent) {
		/* The request waits in x->req for the guest (and for room in
		 * the queue: under VMM_OUT_SOFT a whole frame always fits). */
		if (v->phase != VMM_SERVE || v->out.len >= VMM_OUT_SOFT)
			return;
		vmm_send(v, AL_G_EXEC, x->flags, x->id, x->req + VMM_REQ_HEADER,
			 (uint32_t)(x->req_len - VMM_REQ_HEADER));
		x->sent = true;
		x->req_len = 0;
	}
	/* Each SIGNAL read adds a frame to the queue to the guest: read while
	 * it has room, as every other source. */
	while (x->conn >= 0 && v->out.len < VMM_OUT_SOFT) {
		int r = read_msg(x);
		if (r == 0)
			break;
		if (r < 0)
			return client_gone(v, slot, r);
		if (!x->requested) {
			int e = take_request(x);
			if (e < 0 && e != -EINVAL) { /* a pty we could not make */
				refuse(v, x->conn, (uint32_t)-e);
				x->conn = -1;
				return client_gone(v, slot, 0);
			}
			if (e < 0)
				return client_gone(v, slot, -EINVAL);
			return client_step(v, slot); /* sent now if the guest is up */
		}
		uint32_t sig = al_guest_get32(x->req + VMM_REQ_HEADER);
		x->req_len = 0;
		if (sig < 1 || sig > 64)
			return client_gone(v, slot, -EINVAL);
		if (x->exited)
			continue; /* too late: it ended */
		if (x->started)
			send_signal(v, x, sig);
		else
			x->pending_sig = sig;
	}
	if (x->exited && !x->gone && x->stdio[0].len == 0 && x->stdio[1].len == 0) {
		uint8_t e[AL_GUEST_EXIT_LEN];
		al_guest_exit_put(e, &x->exit);
		answer(x->conn, AL_VMM_ANS_ENDED, e, AL_GUEST_EXIT_LEN);
		vmm_exec_free(v, slot);
	}
}

void vmm_sess_pump(struct vmm *v)
{
	if (v->listen_fd < 0)
		return;
	accept_clients(v);
	drain(v);
	for (size_t i = 0; i < AL_GUEST_MAX_EXECS && !v->failed; i++)
		if (v->execs[i] && v->execs[i]->owns)
			client_step(v, i);
}
