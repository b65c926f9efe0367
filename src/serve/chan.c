/* Frames over a stream socket, with descriptors (chan.h). */
#include "serve/chan.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/util.h"

void al_chan_init(struct al_chan *c, int fd)
{
	*c = (struct al_chan){.fd = fd};
}

void al_chan_close(struct al_chan *c)
{
	struct al_chan_frame *f, *next;

	for (f = c->head; f; f = next) {
		next = f->next;
		if (f->fd >= 0)
			close(f->fd);
		free(f->buf);
		free(f);
	}
	for (size_t i = 0; i < c->n_fds; i++)
		close(c->fds[i]);
	if (c->fd >= 0)
		close(c->fd);
	free(c->rbuf);
	*c = (struct al_chan){.fd = -1};
}

void al_chan_queue(struct al_chan *c, struct al_msg_out *o, int fd)
{
	struct al_chan_frame *f = xcalloc(1, sizeof(*f));

	f->buf = o->buf;
	f->len = o->len;
	f->fd = fd;
	o->buf = NULL;
	if (c->tail)
		c->tail->next = f;
	else
		c->head = f;
	c->tail = f;
	c->queued += f->len;
}

bool al_chan_pending(const struct al_chan *c)
{
	return c->head != NULL;
}

static ssize_t send_part(int sock, struct al_chan_frame *f, int flags)
{
	struct iovec iov = {.iov_base = f->buf + f->off, .iov_len = f->len - f->off};
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};

	if (f->off == 0 && f->fd >= 0) {
		memset(&u, 0, sizeof(u));
		mh.msg_control = u.buf;
		mh.msg_controllen = sizeof(u.buf);
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &f->fd, sizeof(int));
	}
	return sendmsg(sock, &mh, MSG_NOSIGNAL | flags);
}

int al_chan_flush(struct al_chan *c)
{
	while (c->head) {
		struct al_chan_frame *f = c->head;
		ssize_t n = send_part(c->fd, f, MSG_DONTWAIT);

		if (n < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -errno;
		if (f->fd >= 0) { /* it went with the first byte */
			close(f->fd);
			f->fd = -1;
		}
		f->off += (size_t)n;
		c->queued -= (size_t)n;
		if (f->off < f->len)
			return 0;
		c->head = f->next;
		if (!c->head)
			c->tail = NULL;
		free(f->buf);
		free(f);
	}
	return 0;
}

static void keep_fds(struct al_chan *c, struct msghdr *mh)
{
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		size_t n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			if (!c->no_fds && c->n_fds < AL_CHAN_FDS)
				c->fds[c->n_fds++] = fd;
			else
				close(fd); /* not expected, or more than the protocol
					    * ever has in flight */
		}
	}
}

static int read_some(struct al_chan *c, int flags)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * 4)];
		struct cmsghdr align;
	} u;
	ssize_t n;

	if (c->rcap - c->rlen < 65536) {
		c->rcap = c->rcap ? c->rcap * 2 : 131072;
		c->rbuf = xrealloc(c->rbuf, c->rcap);
	}
	struct iovec iov = {.iov_base = c->rbuf + c->rlen, .iov_len = c->rcap - c->rlen};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = u.buf,
			    .msg_controllen = sizeof(u.buf)};
	n = recvmsg(c->fd, &mh, MSG_CMSG_CLOEXEC | flags);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	keep_fds(c, &mh);
	if (n == 0)
		c->eof = true;
	c->rlen += (size_t)n;
	return (int)(n > 0);
}

int al_chan_read(struct al_chan *c)
{
	int r;

	/* At most a few reads a turn: one busy peer does not starve the
	 * others in the owner's loop. */
	for (int i = 0; i < 4; i++)
		if ((r = read_some(c, MSG_DONTWAIT)) <= 0)
			return r;
	return 0;
}

int al_chan_next(struct al_chan *c, struct al_msg *m, struct al_error *err)
{
	size_t len;

	/* The frame handed out last time is done with now. */
	if (c->delivered) {
		memmove(c->rbuf, c->rbuf + c->delivered, c->rlen - c->delivered);
		c->rlen -= c->delivered;
		c->delivered = 0;
	}
	if (c->rlen < AL_MSG_HDR)
		return 0;
	if ((len = al_msg_frame_len(c->rbuf)) == 0) {
		al_msg_decode(c->rbuf, AL_MSG_HDR, m, err);
		return -EBADMSG;
	}
	if (c->rlen < len) {
		if (c->rcap < len) { /* room for the whole frame */
			c->rcap = len + 65536;
			c->rbuf = xrealloc(c->rbuf, c->rcap);
		}
		return 0;
	}
	if (al_msg_decode(c->rbuf, len, m, err) < 0)
		return -EBADMSG;
	c->delivered = len;
	return 1;
}

int al_chan_take_fd(struct al_chan *c)
{
	int fd;

	if (c->n_fds == 0)
		return -1;
	fd = c->fds[0];
	memmove(c->fds, c->fds + 1, (c->n_fds - 1) * sizeof(int));
	c->n_fds--;
	return fd;
}

int al_chan_send_sync(struct al_chan *c, struct al_msg_out *o)
{
	struct al_chan_frame f = {.buf = o->buf, .len = o->len, .fd = -1};

	while (f.off < f.len) {
		ssize_t n = send_part(c->fd, &f, 0);
		if (n < 0 && errno != EINTR)
			return -errno;
		if (n > 0)
			f.off += (size_t)n;
	}
	return 0;
}

int al_chan_recv_sync(struct al_chan *c, struct al_msg *m, struct al_error *err)
{
	for (;;) {
		int r = al_chan_next(c, m, err);
		if (r != 0)
			return r;
		if (c->eof)
			return 0;
		if ((r = read_some(c, 0)) < 0)
			return r;
	}
}
