/* What the sandbox writes, on its way to airlock's own terminal: parsed as
 * a terminal would and written out again with only the text, controls and
 * escape sequences that act on the screen, each in one canonical spelling.
 * What reaches past the screen (the clipboard, files, tmux's passthrough,
 * remote control, graphics from host paths) never gets there; ttyfilter.c
 * has the list. Pure: a state carried across chunks, no system call. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* The longest sequence (CSI, or a kept OSC's text) written out; longer
 * ones are dropped. */
#define AL_TTY_SEQ_MAX 512
/* What one call may write beyond its input's length: a sequence held from
 * earlier chunks and its framing. */
#define AL_TTY_HELD_MAX (AL_TTY_SEQ_MAX + 16)

struct al_tty_filter {
	int state;
	char seq[AL_TTY_SEQ_MAX]; /* the sequence being read */
	size_t n_seq;
	char utf8[4];
	unsigned n_utf8, utf8_need;
	unsigned osc, osc_digits;
	bool string_is_osc;	    /* a dropped string that BEL also ends */
	unsigned long long dropped; /* bytes left out so far */
};

/* Filter n bytes of in into out (room for n + AL_TTY_HELD_MAX bytes);
 * returns how many bytes out holds. */
size_t al_tty_filter(struct al_tty_filter *f, const char *in, size_t n, char *out);
