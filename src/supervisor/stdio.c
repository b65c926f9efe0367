/* The command's stdio: its output relayed to ours (or a callback) without
 * blocking and counted against the output cap, and our stdin copied into
 * its pipe. With a terminal (plan->tty) both go through the pty's master
 * instead: what the command writes there (stdout and stderr alike) is
 * counted as stdout, and our stdin is typed into it. What is per command
 * (reading its output, the cap, the filter, the queue its stdin is
 * written from) is relay.c's, shared with a session's execs; what is here
 * is where the output goes (our fds, without blocking) and how our stdin
 * reaches it (with a terminal, the ^D at its end). */
#include "supervisor/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/sys.h"
#include "core/util.h"

static void src_close(struct al_supervisor *l, int which)
{
	al_relay_out_close(&l->relay, which);
}

static void peer_close(struct al_supervisor *l);
static void stdin_done(struct al_supervisor *l);

/* Nobody reads our side of the command's output any more. A pipe is
 * closed, and its writer gets EPIPE. The pty's master has other holders
 * (our stdin side, a slave of our own): they go too, so the kernel hangs
 * the pty up and the command gets SIGHUP and EIO, as a terminal's
 * command does when its terminal goes. */
static void out_gone(struct al_supervisor *l, int which)
{
	src_close(l, which);
	if (l->tty_fd < 0 || which != 0)
		return;
	peer_close(l);
	stdin_done(l);
	al_closep(&l->tty_fd);
}

/* A write handle for our output fd that never blocks, sharing nothing
 * with the caller's file description (setting O_NONBLOCK on fd 1 itself
 * would change it for every process that shares it). */
static void out_open(struct al_supervisor *l, struct out *o, int which, int fd)
{
	struct stat st;
	char path[32];

	*o = (struct out){.l = l, .which = which, .fd = fd};
	if (l->io.output || fd < 0) {
		o->discard = !l->io.output;
		o->fd = -1;
		return;
	}
	if (fstat(fd, &st) < 0 || S_ISREG(st.st_mode) || S_ISBLK(st.st_mode))
		return; /* files do not block; nothing to poll */
	if (S_ISSOCK(st.st_mode)) {
		o->socket = o->can_poll = true;
		return;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	int nfd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (nfd < 0) {
		/* Said once. A terminal (su and script give one we may not
		 * reopen) keeps reading unless flow control (Ctrl-S) holds it,
		 * so only -v says so; a pipe or FIFO that stops is worth a
		 * warning. */
		int e = errno;
		bool tty = isatty(fd);
		if (!l->warned_blocking) {
			l->warned_blocking = true;
			al_log(
			    tty ? AL_LOG_DEBUG : AL_LOG_WARN,
			    "output fd %d cannot be reopened non-blocking (%s): while its reader "
			    "does not read%s, the timeout and the limits wait too",
			    fd, strerror(e), tty ? " (a terminal held by Ctrl-S)" : "");
		}
		return;
	}
	o->fd = nfd;
	o->own_fd = o->can_poll = true;
}

/* Write what we can; -EAGAIN when the rest must wait, -errno on error. */
static ssize_t out_write(struct out *o, const char *buf, size_t len)
{
	if (!o->can_poll)
		return al_write_all(o->fd, buf, len) < 0 ? -errno : (ssize_t)len;
	ssize_t n =
	    o->socket ? send(o->fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL) : write(o->fd, buf, len);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	return n;
}

static void out_ready(struct al_supervisor *l, int which);

static void on_out_ready(struct al_watch *w, uint32_t events, void *data)
{
	struct out *o = data;

	(void)w;
	(void)events;
	out_ready(o->l, o->which);
}

/* Keep what did not fit; stop reading the sandbox's pipe until it is out. */
static void out_hold(struct al_supervisor *l, int which, bool stop_src, const char *buf, size_t len)
{
	struct out *o = &l->out[which];
	char *p = xmalloc(o->pend_len + len);

	if (o->pend_len)
		memcpy(p, o->pending + o->pend_off, o->pend_len);
	memcpy(p + o->pend_len, buf, len);
	free(o->pending);
	o->pending = p;
	o->pend_off = 0;
	o->pend_len += len;
	if (stop_src)
		al_relay_out_pause(&l->relay, which, true);
	if (!o->w)
		o->w = al_loop_add(l->ev, o->fd, EPOLLOUT, on_out_ready, o);
	if (!o->w || al_watch_set(o->w, EPOLLOUT) < 0)
		al_debug("cannot poll output fd %d: %s", o->fd, strerror(errno));
}

static void send_out(struct al_supervisor *l, int which, const char *buf, size_t len)
{
	struct out *o = &l->out[which];

	if (l->io.output) {
		l->io.output(l->io.data, which, buf, len);
		return;
	}
	if (o->discard)
		return;
	ssize_t n = o->pend_len ? 0 : out_write(o, buf, len);

	if (n < 0) {
		/* Nobody reads our side any more (`airlock run ... | head -1`):
		 * close the sandbox's pipe too, so its writer gets EPIPE (or
		 * SIGPIPE) as it would outside the sandbox. */
		al_debug("closing the relay for fd %d: %s", which + 1, strerror((int)-n));
		out_gone(l, which);
		return;
	}
	if ((size_t)n < len)
		out_hold(l, which, !o->pend_len && al_relay_out_open(&l->relay, which), buf + n,
			 len - (size_t)n);
}

/* Our output is writable again: flush, then read the sandbox's pipe again. */
static void out_ready(struct al_supervisor *l, int which)
{
	struct out *o = &l->out[which];
	ssize_t n = out_write(o, o->pending + o->pend_off, o->pend_len);

	if (n < 0) {
		o->pend_len = 0;
		al_watch_set(o->w, 0);
		out_gone(l, which);
		return;
	}
	o->pend_off += (size_t)n;
	o->pend_len -= (size_t)n;
	if (o->pend_len)
		return;
	free(o->pending);
	o->pending = NULL;
	o->pend_off = 0;
	al_watch_set(o->w, 0);
	al_relay_out_pause(&l->relay, which, false);
}

/* At the end: what is still held goes out, blocking now. */
static void out_close(struct out *o)
{
	if (o->pend_len) {
		if (o->own_fd)
			fcntl(o->fd, F_SETFL, 0);
		if (al_write_all(o->fd, o->pending + o->pend_off, o->pend_len) < 0)
			al_debug("output lost at the end: %s", strerror(errno));
	}
	free(o->pending);
	o->pending = NULL;
	o->pend_len = 0;
	al_watch_removep(&o->w);
	if (o->own_fd)
		al_closep(&o->fd);
}

/* The relay's callbacks (relay.h). */
static void on_output(void *data, int which, const char *buf, size_t len)
{
	send_out(data, which, buf, len);
}

/* Past the cap: what fitted went, then the marker, and the run stops. */
static void on_over(void *data, int which)
{
	static const char marker[] = "\n[airlock: output cut at the limit]\n";
	struct al_supervisor *l = data;

	/* Our side of it is gone (its pipe closed, the command gets EPIPE):
	 * nothing is cut yet, and the next chunk is weighed again. */
	if (!al_relay_out_open(&l->relay, which)) {
		l->relay.over = false;
		return;
	}
	l->result.output_truncated = true;
	send_out(l, which, marker, sizeof(marker) - 1);
	al_meter_stop(&l->meter, AL_END_OUTPUT, "output", l->plan->output_bytes,
		      l->result.stdout_bytes + l->result.stderr_bytes);
}

/* Our stdin a pipe: a command seen out of line mode while it writes is a
 * line editor (a REPL at its prompt), which on_eof_check() types no ^D
 * for in line mode. */
static void on_chunk(void *data, int which)
{
	struct al_supervisor *l = data;
	struct termios tio;

	if (which == 0 && l->tty_peer >= 0 && !l->eof_raw_seen && tcgetattr(l->tty_fd, &tio) == 0 &&
	    !(tio.c_lflag & ICANON))
		l->eof_raw_seen = true;
}

/* tty: the filter's replies to the command's queries (ttyfilter.h),
 * typed into the pty as a terminal would type them. Not while a chunk of
 * our stdin waits for room (a reply would land inside it), and never in
 * part: a reply that does not fit now is left out, as a terminal's answer
 * to a program that does not read its input would be lost. */
static void on_replies(void *data, struct al_tty_filter *f)
{
	struct al_supervisor *l = data;
	size_t n = f->n_reply;

	f->n_reply = 0;
	if (!n || l->tty_fd < 0)
		return;
	if (al_relay_in_pending(&l->relay)) {
		al_debug("left out %zu bytes of replies to the command's terminal queries: "
			 "its input is full",
			 n);
		return;
	}
	/* non-blocking: the relay set O_NONBLOCK on the master's one
	 * description */
	ssize_t w = write(l->tty_fd, f->reply, n);
	if (w != (ssize_t)n)
		al_debug("replies to the command's terminal queries: %zd of %zu bytes written%s%s",
			 w < 0 ? 0 : w, n, w < 0 ? ": " : "", w < 0 ? strerror(errno) : "");
}

static void stdin_done(struct al_supervisor *l)
{
	al_watch_removep(&l->w_stdin);
	l->stdin_poll = false;
	al_relay_in_drop(&l->relay);
}

static bool stdin_flush(struct al_supervisor *l);

/* How often, once our stdin has ended, the pty's unread input is looked
 * at before its ^D is typed (and after, in case it must be typed again):
 * every EOF_CHECK_MS for EOF_FAST_LOOKS looks, then every EOF_SLOW_MS. */
#define EOF_CHECK_MS   40
#define EOF_FAST_LOOKS 50
#define EOF_SLOW_MS    250
/* At most this many ^Ds in all. */
#define EOF_TYPES 4
/* Once the command has been seen reading out of line mode: how long the
 * pty must hold still in line mode before a ^D is typed there anyway (a
 * shell's line editor ran `cat`, which reads in line mode). */
#define EOF_CANON_WAIT_MS 2000
/* Before that, how long it must hold still in line mode: a REPL starting
 * up is in line mode until its editor first goes raw. */
#define EOF_FIRST_WAIT_MS 300
/* A ^D typed in line mode and not read by the next look is taken back;
 * the next is typed after this, doubled at each, up to EOF_BACK_MAX_MS. */
#define EOF_BACK_MS	250
#define EOF_BACK_MAX_MS 2000

static void peer_close(struct al_supervisor *l)
{
	al_timer_freep(&l->eof_timer);
	al_closep(&l->tty_peer);
}

/* Type the pty's end-of-file character (^D). */
static void type_eof_char(struct al_supervisor *l)
{
	struct termios t;

	l->eof_typed++;
	if (l->relay.in < 0 || tcgetattr(l->tty_fd, &t) < 0) {
		peer_close(l);
		stdin_done(l);
		return;
	}
	l->eof_typed_lflag = t.c_lflag;
	l->eof_pending = (t.c_lflag & ICANON) && l->tty_peer >= 0;
	char eof = (char)t.c_cc[VEOF];
	/* (what cannot be written now, the relay writes when there is room) */
	if (al_relay_in_push(&l->relay, &eof, 1) == 0 && stdin_flush(l) && l->tty_peer < 0)
		stdin_done(l); /* no more looks: the ^D was the last */
}

/* Type it and stop looking: what could not look (no slave of our own). */
static void type_eof(struct al_supervisor *l)
{
	peer_close(l);
	type_eof_char(l);
}

/* The ^D typed in line mode (eof_pending) is still unread: in line mode
 * the pty holds it as an end-of-file mark (POLLIN with nothing counted by
 * FIONREAD); out of line mode it has become a NUL byte (FIONREAD counts
 * it). Either way nobody read it, and it is taken back (the pty's unread
 * input flushed: everything before it had been read) before a reader
 * that switches modes gets the NUL. */
static bool take_back_eof(struct al_supervisor *l, int unread, bool canon)
{
	struct pollfd pfd = {.fd = l->tty_peer, .events = POLLIN};

	l->eof_pending = false;
	if (canon ? unread != 0 || poll(&pfd, 1, 0) != 1 : unread != 1)
		return false; /* read (as EOF in line mode; or as a NUL, too late) */
	if (tcflush(l->tty_peer, TCIFLUSH) < 0)
		return false;
	l->eof_typed--;
	l->eof_typed_lflag = ~0u; /* to be typed again, whatever the mode then */
	l->eof_backs++;
	uint64_t wait = (uint64_t)EOF_BACK_MS << (l->eof_backs < 4 ? l->eof_backs - 1 : 3);
	l->eof_next_ms = al_now_ms() + (wait < EOF_BACK_MAX_MS ? wait : EOF_BACK_MAX_MS);
	return true;
}

/* A ^D means end-of-file only to a reader at the start of a line and in
 * the mode it was typed in. Typed in line mode it waits in the pty as an
 * end-of-file mark; if the command leaves line mode before reading it (a
 * REPL's line editor goes raw to read each line and back to run it, one
 * starting up goes raw once, Python's reads ahead and runs the lines it
 * has in line mode), it reads a NUL instead, which such an editor may put
 * into its line and show (`^@`), and the end never comes. So:
 * - the first waits until the command runs, has read everything typed
 *   before it and the pty's mode has held still for two looks;
 * - out of line mode it is a key a line editor waits for at its prompt,
 *   and is typed then;
 * - in line mode it is typed once the mode has held still there for
 *   EOF_FIRST_WAIT_MS before the command was ever seen out of line mode
 *   (a plain reader: a shell reading a script, `cat`; or a REPL still
 *   starting up), and for EOF_CANON_WAIT_MS after (a line editor's shell
 *   running `cat`); and one that is still unread at the
 *   next look is taken back (nobody was reading), to be typed again
 *   later, so that it never waits long enough to become a NUL;
 * - when, after a ^D, the command has read everything and the mode has
 *   changed, it may have been read as a NUL all the same: another is
 *   typed (stdin has ended, so every later read seeing EOF is what a pipe
 *   would give), up to EOF_TYPES in all.
 * The command's end stops the looking. */
static void on_eof_check(struct al_timer *t, uint64_t expirations, void *data)
{
	struct al_supervisor *l = data;
	struct termios tio;
	int unread = 0;

	(void)expirations;
	if (ioctl(l->tty_peer, FIONREAD, &unread) < 0 || tcgetattr(l->tty_fd, &tio) < 0) {
		type_eof(l);
		return;
	}
	if (++l->eof_looks == EOF_FAST_LOOKS)
		al_timer_arm(t, EOF_SLOW_MS, true);
	bool canon = tio.c_lflag & ICANON;
	uint64_t now = al_now_ms();
	if (l->eof_pending && take_back_eof(l, unread, canon))
		unread = 0;
	if (!canon)
		l->eof_raw_seen = true;
	if (!canon || !l->eof_canon_ms || tio.c_lflag != l->eof_lflag)
		l->eof_canon_ms = canon ? now : 0;
	bool settled = unread == 0 && l->eof_quiet && tio.c_lflag == l->eof_lflag;
	l->eof_quiet = unread == 0;
	l->eof_lflag = tio.c_lflag;
	if (!l->running || !settled)
		return;
	if (l->eof_typed >= EOF_TYPES) {
		peer_close(l);
		if (!al_relay_in_pending(&l->relay))
			stdin_done(l);
		return;
	}
	if (canon &&
	    (now < l->eof_next_ms ||
	     now - l->eof_canon_ms < (l->eof_raw_seen ? EOF_CANON_WAIT_MS : EOF_FIRST_WAIT_MS)))
		return;
	if (l->eof_typed == 0 || tio.c_lflag != l->eof_typed_lflag)
		type_eof_char(l);
}

/* Our stdin ended (or cannot be read). A pipe is closed, and the sandbox
 * reads EOF. The pty's master stays open (the output comes from it), so
 * the pty's end-of-file character is typed instead, as someone at a
 * terminal would: a shell or a REPL reading a new line sees EOF. */
static void stdin_end(struct al_supervisor *l)
{
	if (!l->plan->tty || l->in_eof) {
		stdin_done(l);
		return;
	}
	l->in_eof = true;
	al_watch_removep(&l->w_stdin);
	l->stdin_poll = false;
	al_relay_in_want_room(&l->relay, false);
	if (l->tty_peer < 0 || !(l->eof_timer = al_loop_timer(l->ev, on_eof_check, l)) ||
	    al_timer_arm(l->eof_timer, EOF_CHECK_MS, true) < 0)
		type_eof(l);
}

void al_sup_stdio_exited(struct al_supervisor *l)
{
	/* Nothing in the sandbox reads any more; our slave must go so the
	 * master reports the end once its output is drained. */
	if (l->in_eof && l->tty_peer >= 0)
		stdin_done(l);
	peer_close(l);
}

/* Stop reading our stdin while what was read waits for room in the
 * sandbox's pipe (or pty), and read it again once it went (the relay
 * waits for the room). */
static void stdin_wait_for_room(struct al_supervisor *l, bool room)
{
	if (!l->stdin_poll || room == l->in_waiting)
		return;
	l->in_waiting = room;
	al_watch_set(l->w_stdin, room ? 0 : EPOLLIN);
}

/* Write what is pending; true when all of it went. */
static bool stdin_flush(struct al_supervisor *l)
{
	if (al_relay_in_flush(&l->relay))
		return true;
	if (al_relay_in_open(&l->relay))
		stdin_wait_for_room(l, true);
	return false;
}

static void relay_in(struct al_supervisor *l)
{
	char buf[AL_SUP_STDIN_CHUNK];

	if (!stdin_flush(l))
		return;
	if (l->in_eof) {
		if (l->tty_peer < 0)
			stdin_done(l); /* the ^D went, and it was the last */
		return;		       /* more may follow (on_eof_check) */
	}
	if (l->stdin_poll && l->in_waiting) {
		stdin_wait_for_room(l, false);
		return;
	}
	ssize_t n = read(l->io.stdin_fd, buf, sizeof(buf));
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		stdin_end(l); /* EOF (or an unreadable stdin): the sandbox sees EOF */
		return;
	}
	if (al_relay_in_push(&l->relay, buf, (size_t)n) == 0)
		stdin_flush(l);
}

/* The relay's stdin callbacks: what waited went (or, for a stdin that
 * cannot be polled, there is room for more); the command closed its end. */
static void on_in_room(void *data)
{
	relay_in(data);
}

static void on_in_gone(void *data)
{
	stdin_done(data);
}

static void on_stdin(struct al_watch *w, uint32_t events, void *data)
{
	(void)w;
	(void)events;
	relay_in(data);
}

/* stdin: poll it when the kernel can (pipes, ttys, sockets); a regular
 * file or /dev/null cannot be polled, so copy from it whenever the
 * sandbox's pipe (or pty) has room. A closed stdin gives the sandbox EOF. */
static int stdin_start(struct al_supervisor *l, struct al_error *err)
{
	struct stat st;
	int r = al_relay_in(&l->relay, l->stdin_wr, err);

	l->stdin_wr = -1; /* the relay's (closed by it on failure) */
	if (r < 0)
		return r;
	if (l->io.stdin_fd < 0 || fstat(l->io.stdin_fd, &st) < 0)
		stdin_end(l);
	else if ((l->w_stdin = al_loop_add(l->ev, l->io.stdin_fd, EPOLLIN, on_stdin, l)))
		l->stdin_poll = true;
	else
		al_relay_in_want_room(&l->relay, true);
	return 0;
}

/* A pipe of the command's output, handed over at attach, to the relay. */
static int out_start(struct al_supervisor *l, int which, int *fd, struct al_error *err)
{
	int r = *fd >= 0 ? al_relay_out(&l->relay, which, *fd, err) : 0;

	*fd = -1; /* the relay's (closed by it on failure) */
	return r;
}

static const struct al_relay_ops relay_ops = {.output = on_output,
					      .chunk = on_chunk,
					      .replies = on_replies,
					      .over = on_over,
					      .in_room = on_in_room,
					      .in_gone = on_in_gone};

void al_sup_stdio_init(struct al_supervisor *l)
{
	al_relay_init(&l->relay, l->ev, &relay_ops, l, l->plan->output_bytes,
		      &l->result.stdout_bytes, &l->result.stderr_bytes, AL_SUP_STDIN_CHUNK);
}

bool al_sup_stdio_drained(const struct al_supervisor *l)
{
	return !al_relay_out_open(&l->relay, 0) && !al_relay_out_open(&l->relay, 1) &&
	       l->stdout_rd < 0 && l->stderr_rd < 0;
}

int al_sup_stdio_start(struct al_supervisor *l, struct al_error *err)
{
	int r;

	out_open(l, &l->out[0], 0, l->io.stdout_fd);
	out_open(l, &l->out[1], 1, l->io.stderr_fd);
	/* To a terminal (emulator), with a pty or pipes: only what acts on its
	 * screen (ttyfilter.h). To a pipe or a file: the bytes as they are. */
	for (int i = 0; i < 2; i++) {
		int fd = i ? l->io.stderr_fd : l->io.stdout_fd;
		l->relay.src[i].filtered = !l->io.output && fd >= 0 && isatty(fd);
	}
	/* With a terminal there are no pipes: al_sup_stdio_terminal() starts
	 * the relay once the sandbox hands over the pty. */
	if ((r = out_start(l, 0, &l->stdout_rd, err)) < 0 ||
	    (r = out_start(l, 1, &l->stderr_rd, err)) < 0)
		return r;
	return l->stdin_wr >= 0 ? stdin_start(l, err) : 0;
}

void al_sup_stdio_resize(struct al_supervisor *l)
{
	struct winsize ws = {.ws_row = l->rows, .ws_col = l->cols};

	/* On the master: the kernel sets the pty's size and sends SIGWINCH to
	 * its foreground process group. */
	if (l->tty_fd >= 0 && ioctl(l->tty_fd, TIOCSWINSZ, &ws) < 0)
		al_debug("ignoring: TIOCSWINSZ on the pty: %s", strerror(errno));
}

/* a and b are one terminal: both terminals, the same device. */
static bool same_terminal(int a, int b)
{
	struct stat sa, sb;

	return a >= 0 && b >= 0 && isatty(a) && isatty(b) && fstat(a, &sa) == 0 &&
	       fstat(b, &sb) == 0 && S_ISCHR(sa.st_mode) && S_ISCHR(sb.st_mode) &&
	       sa.st_rdev == sb.st_rdev;
}

int al_sup_stdio_terminal(struct al_supervisor *l, int fd, struct al_error *err)
{
	struct al_tty_filter *f = &l->relay.src[0].ttyf;
	int out;

	l->tty_fd = fd;
	/* The queries the command waits for are answered by us, whatever our
	 * stdout is (ttyfilter.h). */
	f->answer = true;
	/* The modes after which the terminal reports later (the mouse, focus)
	 * only when our stdin and stdout are that one terminal: its reports
	 * are then typed into the pty, and the CLI turns them off at the end
	 * (AL_TTY_REPORTS_OFF, written only there). With stdin a pipe, or
	 * stdout another terminal, nobody would read them but a shell after
	 * the run. */
	f->keep_reporting = same_terminal(l->io.stdin_fd, l->io.stdout_fd);
	/* One description, read and written through two descriptors so the
	 * output and the input each have their own watch. */
	if ((out = fcntl(fd, F_DUPFD_CLOEXEC, 3)) < 0 ||
	    (l->stdin_wr = fcntl(fd, F_DUPFD_CLOEXEC, 3)) < 0) {
		int e = errno;
		al_closep(&out);
		return al_error_setsys(err, e, "dup of the pty's master");
	}
	/* Our stdin not a terminal (a pipe driving a REPL): a slave of our
	 * own, to see what the command has not read yet when our stdin ends
	 * (FIONREAD). Opened now, before we confine ourselves, and closed
	 * once the ^D is typed or the command is gone (while we hold it, the
	 * master cannot report that the sandbox closed its end). */
	if (l->io.stdin_fd >= 0 && !isatty(l->io.stdin_fd) &&
	    (l->tty_peer = ioctl(fd, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0)
		al_debug("ignoring: TIOCGPTPEER: %s (the ^D at the end of stdin is typed at once)",
			 strerror(errno));
	al_sup_stdio_resize(l);
	int r = out_start(l, 0, &out, err);
	return r < 0 ? r : stdin_start(l, err);
}

void al_sup_stdio_close(struct al_supervisor *l)
{
	/* (under -t to a pipe the filter only looks: nothing was left out) */
	const struct al_relay_src *src = l->relay.src;
	unsigned long long dropped = (src[0].filtered ? src[0].ttyf.dropped : 0) +
				     (src[1].filtered ? src[1].ttyf.dropped : 0);

	if (dropped)
		al_debug("left %llu bytes of the sandbox's output out on the way to the terminal",
			 dropped);
	if (src[0].ttyf.unanswered)
		al_debug("left %llu of the command's terminal queries unanswered: too many at once",
			 src[0].ttyf.unanswered);
	out_close(&l->out[0]);
	out_close(&l->out[1]);
	al_watch_removep(&l->w_stdin);
	al_relay_close(&l->relay);
	al_closep(&l->stdin_wr);
	al_closep(&l->stdout_rd);
	al_closep(&l->stderr_rd);
	peer_close(l);
	al_closep(&l->tty_fd);
}
