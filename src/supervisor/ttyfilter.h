/* What the sandbox writes, on its way to airlock's own terminal: parsed as
 * a terminal would and written out again with only the text, controls and
 * escape sequences that act on the screen, each in one canonical spelling.
 * What reaches past the screen (the clipboard, files, tmux's passthrough,
 * remote control, graphics from host paths) never gets there, nor does a
 * query the terminal would answer into airlock's stdin (cursor position,
 * device attributes, window and title reports, colours, modes, settings);
 * ttyfilter.c has the lists. Nor, unless the caller sets `keep_reporting`,
 * does a mode after which the terminal sends reports later, of its own
 * accord (mouse, focus, resize, colour theme, locator). Under -t the
 * caller sets `answer`, and the few queries programs wait for get fixed
 * replies in `reply`, which the caller types into the sandbox's pty. Pure:
 * a state carried across chunks, no system call. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* The longest sequence (CSI, or a kept OSC's text) written out; longer
 * ones are dropped. */
#define AL_TTY_SEQ_MAX 512
/* What one call may write beyond its input's length: a sequence held from
 * earlier chunks and its framing. */
#define AL_TTY_HELD_MAX (AL_TTY_SEQ_MAX + 16)
/* Room for the replies one call may collect; queries past it are dropped
 * unanswered. */
#define AL_TTY_REPLY_MAX 256

struct al_tty_filter {
	int state;
	char seq[AL_TTY_SEQ_MAX]; /* the sequence being read */
	size_t n_seq;
	char utf8[4];
	unsigned n_utf8, utf8_need;
	unsigned osc, osc_digits;
	bool string_is_osc;	       /* a dropped string that BEL also ends */
	unsigned long long dropped;    /* bytes left out so far */
	bool answer;		       /* set by the caller: collect replies (under -t) */
	bool keep_reporting;	       /* set by the caller: keep the modes that report */
	char reply[AL_TTY_REPLY_MAX];  /* the replies collected, in order */
	size_t n_reply;		       /* the caller empties it (n_reply = 0) */
	unsigned long long unanswered; /* queries with a reply left out: no room */
};

/* Filter n bytes of in into out (room for n + AL_TTY_HELD_MAX bytes);
 * returns how many bytes out holds. With f->answer, the replies to the
 * queries answered are appended to f->reply (see ttyfilter.c). */
size_t al_tty_filter(struct al_tty_filter *f, const char *in, size_t n, char *out);

/* Whether DEC private mode m (CSI ? m h) makes the terminal send reports
 * later, of its own accord: such a mode set is dropped unless
 * keep_reporting is set (ttyfilter.c has the list). */
bool al_tty_mode_reports(unsigned m);

/* Turns off every report al_tty_filter() lets a program turn on with
 * keep_reporting: each mode al_tty_mode_reports() names (tests/unit checks
 * that none is missing) and the locator (DECELR 0). Written by the CLI at
 * the end of a run that held the terminal (cli/term.c). */
#define AL_TTY_REPORTS_OFF                                                                         \
	"\033[?9l\033[?1000l\033[?1001l\033[?1002l\033[?1003l\033[?1004l\033[?1005l\033[?1006l"    \
	"\033[?1015l\033[?1016l\033[?2031l\033[?2048l\033[?5522l\033['z"
