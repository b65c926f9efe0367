/* What the sandbox's pty writes, on its way to airlock's own terminal,
 * with the two escape sequences taken out that reach past the terminal's
 * screen: OSC 52 (set or read the host's clipboard) and tmux's DCS
 * passthrough (`ESC P tmux; ... ESC \`, which sends sequences around tmux
 * to the terminal outside). Everything else passes as it is, as with
 * `ssh -t`. Pure: a state carried across chunks, no system call. Only the
 * 7-bit forms are recognized; the 8-bit C1 forms (0x9d, 0x90) are UTF-8
 * continuation bytes to a UTF-8 terminal, which does not act on them. */
#pragma once

#include <stddef.h>

/* The longest start of a sequence that is held back until it is known:
 * "ESC ] 5 2" + digits, "ESC P tmux;". */
#define AL_TTY_HELD_MAX 8

struct al_tty_filter {
	int state;
	char held[AL_TTY_HELD_MAX]; /* a start not yet decided */
	size_t n_held;
	unsigned long long dropped; /* bytes taken out so far */
};

/* Filter n bytes of in into out (room for n + AL_TTY_HELD_MAX bytes);
 * returns how many bytes out holds. */
size_t al_tty_filter(struct al_tty_filter *f, const char *in, size_t n, char *out);
