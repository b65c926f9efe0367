/* The VMM's relays, without blocking (vmm-internal.h): queued bytes moved
 * to their descriptors with the WINDOW credit that frees in the guest, and
 * what is readable now (the exec's stdin, the connections, DNS answers,
 * the copy-in tree) taken only while the queue to the guest has room and
 * the guest has granted a window for it. */
#include <errno.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <termios.h>
#include <unistd.h>

#include "backend/microvm/vmm-internal.h"

/* Write what fd takes now from q: bytes written, or -errno (never
 * -EAGAIN: that is 0). */
static long drain(int fd, struct vmm_queue *q)
{
	size_t total = 0;
	while (q->len > 0) {
		ssize_t n = write(fd, q->b + q->off, q->len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				break;
			return -errno;
		}
		q->off += (size_t)n;
		q->len -= (size_t)n;
		total += (size_t)n;
	}
	if (q->len == 0)
		q->off = 0;
	return (long)total;
}

static void credit(struct vmm *v, uint8_t flags, uint32_t id, uint32_t n)
{
	uint8_t p[4];
	al_guest_put32(p, n);
	vmm_send(v, AL_G_WINDOW, flags, id, p, 4);
}

int vmm_flush(struct vmm *v)
{
	for (size_t k = 0; k < AL_GUEST_MAX_EXECS; k++) {
		struct vmm_exec *x = v->execs[k];
		for (int i = 0; x && i < 2; i++) {
			struct vmm_queue *q = &x->stdio[i];
			if (q->len == 0)
				continue;
			size_t had = q->len;
			long n = drain(x->fd_out[i], q);
			if (n < 0) {
				/* Nobody reads its stdout (or stderr) any more:
				 * the bytes are dropped, as a pipe's writer
				 * would die, and still acknowledged so that the
				 * guest is not stuck. */
				q->len = q->off = 0;
				n = (long)had;
			}
			if (n > 0)
				credit(v, (uint8_t)(2 + i), x->id, (uint32_t)n);
		}
	}
	for (size_t i = 0; i < AL_GUEST_MAX_STREAMS; i++) {
		struct vmm_stream *s = v->streams[i];
		if (!s || s->connecting || s->fd < 0)
			continue;
		long n = drain(s->fd, &s->to);
		if (n < 0) {
			vmm_stream_free(v, i, true);
			continue;
		}
		if (n > 0)
			credit(v, 0, s->id, (uint32_t)n);
		if (s->to.len == 0 && s->guest_shut && !s->wr_shut) {
			shutdown(s->fd, SHUT_WR);
			s->wr_shut = true;
		}
		if (s->wr_shut && s->host_shut)
			vmm_stream_free(v, i, true);
	}
	long n = drain(v->chan, &v->out);
	return n < 0 ? (int)n : 0;
}

/* Read up to max bytes from fd as one frame of type/flags/id into the
 * queue to the guest: bytes read, 0 at the end, -errno (-EAGAIN too). */
static long take(struct vmm *v, int fd, bool sock, uint8_t type, uint32_t id, size_t max)
{
	uint8_t *at = vmm_queue_room(&v->out, AL_GUEST_HEADER + max);
	if (!at)
		return -EAGAIN;
	ssize_t n = sock ? recv(fd, at + AL_GUEST_HEADER, max, MSG_DONTWAIT)
			 : read(fd, at + AL_GUEST_HEADER, max);
	if (n < 0)
		return errno == EINTR || errno == EWOULDBLOCK ? -EAGAIN : -errno;
	if (n > 0) {
		al_guest_hdr_put(at, type, 0, id, (uint32_t)n);
		v->out.len += AL_GUEST_HEADER + (size_t)n;
	}
	return n;
}

static bool room(const struct vmm *v)
{
	return v->out.len < VMM_OUT_SOFT && !v->failed;
}

static void pump_stream(struct vmm *v, size_t i)
{
	struct vmm_stream *s = v->streams[i];
	if (s->connecting) {
		struct pollfd p = {.fd = s->fd, .events = POLLOUT};
		if (poll(&p, 1, 0) <= 0)
			return;
		int err = 0;
		socklen_t len = sizeof(err);
		if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
			err = errno;
		if (err) {
			uint8_t e[4];
			al_guest_put32(e, (uint32_t)err);
			vmm_send(v, AL_G_OPEN_FAILED, 0, s->id, e, 4);
			v->recent[v->recent_next++ % VMM_RECENT] = s->id;
			vmm_stream_free(v, i, false);
			return;
		}
		s->connecting = false;
		vmm_send(v, AL_G_OPEN_OK, 0, s->id, NULL, 0);
	}
	if (s->fd < 0 || s->host_shut || s->credit == 0 || !room(v))
		return;
	size_t max = s->credit < AL_GUEST_MAX_PAYLOAD ? s->credit : AL_GUEST_MAX_PAYLOAD;
	long n = take(v, s->fd, true, AL_G_DATA, s->id, max);
	if (n == -EAGAIN)
		return;
	if (n < 0) {
		vmm_stream_free(v, i, true); /* reset: the guest's end is reset too */
		return;
	}
	if (n > 0) {
		s->credit -= (uint32_t)n;
		return;
	}
	s->host_shut = true;
	vmm_send(v, AL_G_SHUT, 0, s->id, NULL, 0);
	if (s->wr_shut)
		vmm_stream_free(v, i, true);
}

int vmm_tty_size(int fd, uint16_t *rows, uint16_t *cols)
{
	struct winsize ws;
	if (fd < 0 || ioctl(fd, TIOCGWINSZ, &ws) < 0 || !ws.ws_row || !ws.ws_col)
		return -1;
	*rows = ws.ws_row < AL_GUEST_TTY_MAX ? ws.ws_row : AL_GUEST_TTY_MAX;
	*cols = ws.ws_col < AL_GUEST_TTY_MAX ? ws.ws_col : AL_GUEST_TTY_MAX;
	return 0;
}

int vmm_tty_raw(int fd)
{
	struct termios t;
	if (tcgetattr(fd, &t) < 0)
		return -errno;
	cfmakeraw(&t);
	return tcsetattr(fd, TCSANOW, &t) < 0 ? -errno : 0;
}

/* A tty exec's terminal resized since the guest was last told (looked at
 * each time the loop wakes, at least once a second, and at once on our
 * own SIGWINCH): WINSIZE with the new size. */
static void pump_winsize(struct vmm *v, struct vmm_exec *x)
{
	uint16_t rows, cols;
	if (!x->tty || !x->started || x->exited || !room(v) ||
	    vmm_tty_size(x->fd_in, &rows, &cols) < 0 || (rows == x->rows && cols == x->cols))
		return;
	uint8_t p[4];
	al_guest_put16(p, rows);
	al_guest_put16(p + 2, cols);
	x->rows = rows, x->cols = cols;
	vmm_send(v, AL_G_WINSIZE, 0, x->id, p, 4);
}

int vmm_pump(struct vmm *v)
{
	if (v->phase == VMM_FILES_IN && room(v)) {
		int r = vmm_walk_step(v);
		if (r < 0)
			return -1;
		/* The agent answers with FILES_DONE (its first error, or 0)
		 * before the command starts. */
		if (r == 1)
			v->phase = VMM_FILES_ACK;
	}
	for (size_t k = 0; k < AL_GUEST_MAX_EXECS; k++) {
		struct vmm_exec *x = v->execs[k];
		if (x)
			pump_winsize(v, x);
		if (!x || !x->started || !x->stdin_open || x->stdin_credit == 0 || !room(v))
			continue;
		size_t max =
		    x->stdin_credit < AL_GUEST_MAX_PAYLOAD ? x->stdin_credit : AL_GUEST_MAX_PAYLOAD;
		long n = take(v, x->fd_in, false, AL_G_STDIN, x->id, max);
		if (n > 0) {
			x->stdin_credit -= (uint32_t)n;
		} else if (n != -EAGAIN) {
			/* The end of stdin (or an error reading it): len 0. */
			x->stdin_open = false;
			vmm_send(v, AL_G_STDIN, 0, x->id, NULL, 0);
		}
	}
	for (size_t i = 0; i < AL_GUEST_MAX_STREAMS; i++)
		if (v->streams[i])
			pump_stream(v, i);
	for (size_t i = 0; i < AL_GUEST_MAX_DGRAMS; i++) {
		struct vmm_dgram *d = &v->dgrams[i];
		if (d->fd < 0)
			continue;
		long n = room(v) ? take(v, d->fd, true, AL_G_DGRAM, d->id, 4096) : -EAGAIN;
		if (n == -EAGAIN && v->now_ms < d->deadline)
			continue;
		close(d->fd); /* answered, failed or timed out: the exchange is over */
		d->fd = -1;
	}
	return v->failed ? -1 : 0;
}
