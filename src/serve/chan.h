/* A channel of msg.h frames over a stream socket of socketpair(): frames
 * queued for writing (each may carry one descriptor, sent with its first
 * byte), bytes read into a buffer and cut into frames, descriptors that
 * came queued in arrival order. Non-blocking: the owner's poll() says
 * when to call al_chan_read() / al_chan_flush(). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "serve/msg.h"

#define AL_CHAN_FDS 64 /* descriptors received and not yet taken */

struct al_chan_frame {
	uint8_t *buf;
	size_t len, off;
	int fd; /* sent with the first byte, then closed; -1: none */
	struct al_chan_frame *next;
};

struct al_chan {
	int fd;
	uint8_t *rbuf;
	size_t rlen, rcap;
	struct al_chan_frame *head, *tail;
	size_t queued; /* bytes waiting to be written */
	int fds[AL_CHAN_FDS];
	size_t n_fds;
	size_t delivered; /* the frame al_chan_next() handed out last */
	bool eof;
	/* Descriptors are not expected from the peer: any that come are
	 * closed on arrival (the monitor's channels to the front and the
	 * sessions, which never send one). */
	bool no_fds;
};

void al_chan_init(struct al_chan *c, int fd);
/* Close the socket, every queued frame's and received descriptor. */
void al_chan_close(struct al_chan *c);

/* Queue o's frame (sealed by al_msg_end(); o->buf is taken) with fd
 * (taken; -1: none). */
void al_chan_queue(struct al_chan *c, struct al_msg_out *o, int fd);
/* Write what is queued, as far as the socket takes it. 0, or -errno. */
int al_chan_flush(struct al_chan *c);
bool al_chan_pending(const struct al_chan *c);

/* Read what is there (c->eof set at the end). 0, or -errno. */
int al_chan_read(struct al_chan *c);
/* The next whole frame read, decoded into *m (pointing into c's buffer
 * until the next call): 1, 0 when none is whole yet, or -EBADMSG with
 * err set (the peer broke the protocol: close the channel). */
int al_chan_next(struct al_chan *c, struct al_msg *m, struct al_error *err);
/* The oldest descriptor received, or -1. */
int al_chan_take_fd(struct al_chan *c);

/* Blocking: send one frame (and fd) whole; read one frame whole (into
 * c's buffer, as al_chan_next). For the session process, which has
 * nothing else to do meanwhile. 0 / 1, or -errno (0 from the read: the
 * peer closed). */
int al_chan_send_sync(struct al_chan *c, struct al_msg_out *o);
int al_chan_recv_sync(struct al_chan *c, struct al_msg *m, struct al_error *err);
