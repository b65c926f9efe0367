/* ttyfilter.h: a small state machine over the pty's output. */
#include "supervisor/ttyfilter.h"

#include <string.h>

#define ESC '\033'
#define BEL '\007'

enum {
	S_TEXT,	    /* passing through */
	S_ESC,	    /* held: ESC */
	S_OSC,	    /* held: ESC ] and the digits so far */
	S_DCS,	    /* held: ESC P and a prefix of "tmux;" */
	S_DROP,	    /* inside OSC 52: until BEL or ESC \ */
	S_DROP_ESC, /* inside OSC 52, after an ESC */
	S_TMUX,	    /* inside tmux's passthrough: until an ESC \ not doubled */
	S_TMUX_ESC, /* inside it, after an ESC */
};

static const char tmux[] = "tmux;";

static void emit_held(struct al_tty_filter *f, char *out, size_t *o)
{
	memcpy(out + *o, f->held, f->n_held);
	*o += f->n_held;
	f->n_held = 0;
}

/* The held start turned out to be something else: out it goes, and c is
 * looked at again from the text state. */
static int release(struct al_tty_filter *f, char *out, size_t *o)
{
	emit_held(f, out, o);
	return S_TEXT;
}

size_t al_tty_filter(struct al_tty_filter *f, const char *in, size_t n, char *out)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		char c = in[i];
	again:
		switch (f->state) {
		case S_TEXT:
			if (c == ESC) {
				f->held[0] = c;
				f->n_held = 1;
				f->state = S_ESC;
			} else {
				out[o++] = c;
			}
			break;
		case S_ESC:
			if (c == ']' || c == 'P') {
				f->held[f->n_held++] = c;
				f->state = c == ']' ? S_OSC : S_DCS;
			} else {
				f->state = release(f, out, &o);
				goto again;
			}
			break;
		case S_OSC:
			/* "ESC ] 52 ;": the clipboard. Anything else is let go
			 * as soon as it cannot be that. */
			if (f->n_held == 2 && c == '5') {
				f->held[f->n_held++] = c;
			} else if (f->n_held == 3 && c == '2') {
				f->held[f->n_held++] = c;
			} else if (f->n_held == 4 && c == ';') {
				f->dropped += f->n_held + 1;
				f->n_held = 0;
				f->state = S_DROP;
			} else {
				f->state = release(f, out, &o);
				goto again;
			}
			break;
		case S_DCS:
			if (c == tmux[f->n_held - 2]) {
				f->held[f->n_held++] = c;
				if (f->n_held - 2 == sizeof(tmux) - 1) {
					f->dropped += f->n_held;
					f->n_held = 0;
					f->state = S_TMUX;
				}
			} else {
				f->state = release(f, out, &o);
				goto again;
			}
			break;
		case S_DROP:
			f->dropped++;
			if (c == BEL)
				f->state = S_TEXT;
			else if (c == ESC)
				f->state = S_DROP_ESC;
			break;
		case S_DROP_ESC:
			f->dropped++;
			f->state = c == '\\' ? S_TEXT : c == ESC ? S_DROP_ESC : S_DROP;
			break;
		case S_TMUX:
			f->dropped++;
			if (c == ESC)
				f->state = S_TMUX_ESC;
			break;
		case S_TMUX_ESC:
			/* ESC ESC is an escaped ESC of the sequence inside. */
			f->dropped++;
			f->state = c == '\\' ? S_TEXT : S_TMUX;
			break;
		}
	}
	return o;
}
