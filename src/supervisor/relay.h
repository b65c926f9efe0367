/* One command's stdio relay: what is per command, written once for the
 * run's command (supervisor/stdio.c) and for each exec of a session
 * (run/session.c). Its stdout and stderr (pipes, or a pty's master as
 * stdout) are read without blocking, counted against the output cap,
 * re-encoded through ttyfilter.c where asked, and handed to the owner's
 * output callback; its stdin is written without blocking from a bounded
 * queue. Everything runs on the owner's loop; the callbacks come from
 * there. Where the output goes, how stdin is fed and a terminal's end of
 * input are the owner's. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/loop.h"
#include "supervisor/ttyfilter.h"

struct al_relay_ops {
	/* A chunk of output (which: 0 stdout, 1 stderr), within the cap and
	 * re-encoded where its source is filtered. */
	void (*output)(void *data, int which, const char *buf, size_t len);
	/* A chunk was read, before the cap and the filter (may be NULL). */
	void (*chunk)(void *data, int which);
	/* The filter found terminal queries to answer: its replies are in
	 * f->reply (f->n_reply bytes), which the callback empties (may be
	 * NULL: they are dropped). */
	void (*replies)(void *data, struct al_tty_filter *f);
	/* This chunk passed the cap: what fitted was given, and what is read
	 * from now on is dropped. */
	void (*over)(void *data, int which);
	/* Its source ended (EOF, an error, or EIO from a pty's master once no
	 * slave is open) and was closed. */
	void (*eof)(void *data, int which);
	/* stdin: its queue emptied into the command's stdin, or it has room
	 * while al_relay_in_want_room() asked for that (may be NULL). */
	void (*in_room)(void *data);
	/* stdin: writing to it failed (the command closed its end): the
	 * queue was dropped (may be NULL; the owner then calls
	 * al_relay_in_drop() or al_relay_close()). */
	void (*in_gone)(void *data);
};

struct al_relay_src {
	int fd; /* ours, non-blocking; -1 once ended */
	struct al_watch *w;
	/* Re-encode its output through ttyf (what reaches a terminal).
	 * ttyf.answer without filtered: the filter runs only to find the
	 * queries to answer, and the bytes pass as they are. */
	bool filtered;
	struct al_tty_filter ttyf;
};

struct al_relay {
	struct al_loop *loop; /* borrowed */
	const struct al_relay_ops *ops;
	void *data;
	struct al_relay_src src[2];
	uint64_t *count[2]; /* where the bytes passed are counted (the owner's) */
	uint64_t cap;	    /* stdout + stderr together */
	bool over;	    /* past the cap: read and dropped */
	/* stdin: the command's end of it (ours to write), and what waits */
	int in;
	struct al_watch *w_in;
	char *q;
	size_t q_off, q_len, q_max;
	bool closing;	/* its fd is closed once the queue is empty */
	bool want_room; /* in_room each time it has room, queue empty or not */
};

/* Set r up with nothing to relay yet: counts into stdout_count and
 * stderr_count, at most cap bytes of them in all, a stdin queue of at
 * most q_max bytes. */
void al_relay_init(struct al_relay *r, struct al_loop *loop, const struct al_relay_ops *ops,
		   void *data, uint64_t cap, uint64_t *stdout_count, uint64_t *stderr_count,
		   size_t q_max);

/* Read fd (taken: closed at its end; made non-blocking) as which. 0, or
 * -errno with err set (fd closed). */
int al_relay_out(struct al_relay *r, int which, int fd, struct al_error *err);
/* Stop (paused) or go on reading which: the owner's output waits. */
void al_relay_out_pause(struct al_relay *r, int which, bool paused);
/* Stop reading which and close it. */
void al_relay_out_close(struct al_relay *r, int which);
/* Is which still being read? */
bool al_relay_out_open(const struct al_relay *r, int which);

/* Write the command's stdin to fd (taken; made non-blocking). 0, or
 * -errno with err set (fd closed). */
int al_relay_in(struct al_relay *r, int fd, struct al_error *err);
/* Queue bytes for it: -ENOBUFS past q_max waiting, -EPIPE once it was
 * closed or dropped; 0 (it is written as room comes). */
int al_relay_in_push(struct al_relay *r, const void *buf, size_t len);
/* Write what waits now; true when nothing waits any more. */
bool al_relay_in_flush(struct al_relay *r);
size_t al_relay_in_pending(const struct al_relay *r);
/* Close it once what waits was written. */
void al_relay_in_close(struct al_relay *r);
/* Call in_room each time it has room, also with nothing queued (a stdin
 * of the owner's that cannot be polled: a file, /dev/null). */
void al_relay_in_want_room(struct al_relay *r, bool want);
/* Close it now, dropping what waits. */
void al_relay_in_drop(struct al_relay *r);
/* Has it a stdin still (not closed or dropped)? */
bool al_relay_in_open(const struct al_relay *r);

/* Close everything and free the queue. */
void al_relay_close(struct al_relay *r);
