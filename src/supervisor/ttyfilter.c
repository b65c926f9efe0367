/* ttyfilter.h: a re-encoder, not a blacklist. The sandbox's bytes are
 * parsed into what a terminal would see; only what is on the list below is
 * written out, and always in one canonical spelling (complete, 7-bit,
 * BEL-terminated, no control byte inside), so that no emulator's quirks
 * (C0 skipped inside a sequence, leading zeros, C1 bytes, a released prefix
 * joined to what follows) can make it read something else:
 * - text: printable ASCII, and UTF-8 that is well formed and not a C1
 *   control (U+0080..U+009F); anything else becomes '?';
 * - C0 controls BEL, BS, HT, LF, VT, FF, CR (not ENQ, which many terminals
 *   answer with an answerback string);
 * - CSI sequences (parameters, intermediates, a final byte), at most
 *   AL_TTY_SEQ_MAX bytes, but not the queries (csi_action() has the list)
 *   nor, unless f->keep_reporting, what makes the terminal report later:
 *   mouse, focus, resize, colour theme, locator (strip_reports());
 * - the plain ESC sequences full-screen programs use: ESC 7, ESC 8 (save
 *   and restore the cursor), ESC D, ESC E, ESC M, ESC H, ESC c, ESC =,
 *   ESC >, and ESC ( or ESC ) with 0, A or B (line drawing, ASCII). Not
 *   the ones that change how later bytes are read: ESC % (leaving UTF-8,
 *   after which UTF-8's continuation bytes would be C1 controls), ESC SP
 *   (8-bit controls), nor the ones that open a string (ESC ] P X ^ _),
 *   nor ESC Z (DECID, answered as device attributes);
 * - OSC 0, 1, 2 (titles), 4, 10-19, 104, 110-119 (colours, but no colour
 *   query: none with a '?'), 7 (working directory), 8 (hyperlinks), 9 and
 *   777 (notifications), 133 (prompt marks), written as
 *   "ESC ] N ; text BEL" with printable text only.
 * Everything else is dropped whole: other OSCs (52, the clipboard; 1337,
 * 5113, 5522: files and clipboards), every DCS (tmux's passthrough,
 * kitty's remote control, sixel, DECRQSS, XTGETTCAP), APC (kitty graphics,
 * which can read host files), PM, SOS, C1 controls.
 *
 * A query left out leaves a program that waits for its answer waiting.
 * So with f->answer (the caller's pty under -t) the few that programs
 * wait for (prompt_toolkit, IPython, vim) get fixed, neutral replies, the
 * same whatever the host's terminal is (REPLY_* below); the caller types
 * them into the sandbox's pty. The caller sets f->keep_reporting when the
 * terminal's input goes to the sandbox's own pty (-t with our stdin the
 * terminal): there a program may use the mouse, and the end of the run
 * turns it all off again (AL_TTY_REPORTS_OFF). */
#include "supervisor/ttyfilter.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define ESC 0x1b
#define BEL 0x07
#define CAN 0x18
#define SUB 0x1a

enum {
	S_TEXT,
	S_UTF8,		/* inside a UTF-8 sequence: need more continuation bytes */
	S_ESC,		/* after ESC (and maybe intermediates, in seq) */
	S_CSI,		/* ESC [ and what came of it, in seq */
	S_CSI_SKIP,	/* a CSI too long to keep: until its final byte */
	S_ESC_SKIP,	/* an ESC sequence with more intermediates: until its final */
	S_OSC_NUM,	/* ESC ] and digits */
	S_OSC_TEXT,	/* a kept OSC's text, in seq */
	S_OSC_TEXT_ESC, /* it, then ESC: ST if '\' follows */
	S_STRING,	/* a dropped OSC, DCS, APC, PM or SOS: until BEL (OSC) or ST */
	S_STRING_ESC,
};

/* The OSC codes written out. */
static bool osc_kept(unsigned n)
{
	return n <= 2 || n == 4 || n == 7 || n == 8 || n == 9 || (n >= 10 && n <= 19) || n == 104 ||
	       (n >= 110 && n <= 119) || n == 133 || n == 777;
}

static void put(struct al_tty_filter *f, char *out, size_t *o, const char *s, size_t n)
{
	(void)f;
	memcpy(out + *o, s, n);
	*o += n;
}

static void drop(struct al_tty_filter *f, size_t n)
{
	f->dropped += n;
}

/* A sequence in seq could not be kept: its bytes count as dropped. */
static void drop_seq(struct al_tty_filter *f)
{
	drop(f, f->n_seq);
	f->n_seq = 0;
}

/* Under -t, reply (if not empty) goes to the sandbox's pty: kept in
 * f->reply for the caller, or counted as unanswered when it is full. */
static void answer(struct al_tty_filter *f, const char *reply)
{
	size_t len = strlen(reply);

	if (!f->answer || !len)
		return;
	if (f->n_reply + len > sizeof(f->reply)) {
		f->unanswered++;
		return;
	}
	memcpy(f->reply + f->n_reply, reply, len);
	f->n_reply += len;
}

static bool seq_add(struct al_tty_filter *f, unsigned char c)
{
	if (f->n_seq >= AL_TTY_SEQ_MAX)
		return false;
	f->seq[f->n_seq++] = (char)c;
	return true;
}

/* The colour OSCs: 4 (the palette), 10-19 (foreground, background,
 * cursor, pointer, highlight ...), 104 and 110-119 (their resets). */
static bool osc_colour(unsigned n)
{
	return n == 4 || (n >= 10 && n <= 19) || n == 104 || (n >= 110 && n <= 119);
}

/* A kept OSC, whole, in the canonical form "ESC ] N ; text BEL". A colour
 * OSC with a '?' anywhere (a query, alone or among settings: the terminal
 * would answer with its colours) is dropped; no colour is spelled with
 * one. A hyperlink (OSC 8 ; params ; URI) only to the web or mail: a
 * file: link one click opens could run what the sandbox wrote. */
static void emit_osc(struct al_tty_filter *f, char *out, size_t *o)
{
	char head[16];
	int len;

	if (osc_colour(f->osc) && memchr(f->seq, '?', f->n_seq)) {
		drop_seq(f);
		return;
	}

	if (f->osc == 8) {
		const char *uri = memchr(f->seq, ';', f->n_seq);
		size_t rest = uri ? f->n_seq - (size_t)(uri + 1 - f->seq) : 0;
		uri = uri ? uri + 1 : NULL;
		if (!uri || (rest && !(rest >= 7 && strncmp(uri, "http://", 7) == 0) &&
			     !(rest >= 8 && strncmp(uri, "https://", 8) == 0) &&
			     !(rest >= 7 && strncmp(uri, "mailto:", 7) == 0))) {
			drop_seq(f);
			return;
		}
	}
	len = snprintf(head, sizeof(head), "\033]%u;", f->osc);
	put(f, out, o, head, (size_t)len);
	put(f, out, o, f->seq, f->n_seq);
	out[(*o)++] = BEL;
	f->n_seq = 0;
}

/* The fixed replies: a cursor at the top left, a terminal in good order
 * (status 0), a VT220 with ANSI colour (DA1), a VT220 of firmware 10
 * (DA2). Nothing in them comes from the host. */
#define REPLY_CPR "\033[1;1R"
#define REPLY_DSR "\033[0n"
#define REPLY_DA1 "\033[?62;22c"
#define REPLY_DA2 "\033[>1;10;0c"

/* A whole CSI in seq, as the decisions in csi_action() look at it. */
struct csi {
	char prefix;	  /* '<', '=', '>' or '?' right after "ESC [", or 0 */
	char inter;	  /* the last intermediate byte (0x20-0x2f), or 0 */
	char final;	  /* the final byte */
	bool odd;	  /* a parameter byte other than digits, ';', ':' */
	unsigned nparams; /* how many parameters (0: none at all) */
	unsigned p1;	  /* the first one's value (capped), 0 when empty */
};

static struct csi csi_parse(const char *seq, size_t n)
{
	struct csi c = {.final = seq[n - 1]};
	bool first = true;
	size_t i = 2;

	if (i < n - 1 && strchr("<=>?", seq[i]))
		c.prefix = seq[i++];
	for (; i < n - 1; i++) {
		char b = seq[i];
		if (b >= 0x20 && b <= 0x2f) {
			c.inter = b;
			continue;
		}
		if (c.nparams == 0)
			c.nparams = 1;
		if (b == ';') {
			c.nparams++;
			first = false;
		} else if (b == ':') {
			first = false;
		} else if (b >= '0' && b <= '9') {
			if (first && c.p1 < 100000)
				c.p1 = c.p1 * 10 + (unsigned)(b - '0');
		} else {
			c.odd = true;
		}
	}
	return c;
}

/* Leaving ANSI mode for VT52 (CSI ? 2 l, alone or in a list), after which
 * no CSI, the end's resets included, would work. */
static bool csi_vt52(const char *seq, size_t n)
{
	if (n < 4 || seq[2] != '?' || seq[n - 1] != 'l')
		return false;
	for (size_t i = 3; i + 1 < n;) {
		size_t j = i;
		while (j + 1 < n && seq[j] != ';')
			j++;
		if (j - i == 1 && seq[i] == '2')
			return true;
		i = j + 1;
	}
	return false;
}

bool al_tty_mode_reports(unsigned m)
{
	/* mouse tracking (X10 9, normal 1000, highlight 1001, button 1002,
	 * any motion 1003) and its encodings (UTF-8 1005, SGR 1006, urxvt
	 * 1015, SGR in pixels 1016); focus in and out (1004); colour-theme
	 * changes (2031); in-band resizes, with the window's size in pixels
	 * (2048); kitty's paste events (5522: at each paste, the clipboard in
	 * every type it holds) */
	return m == 9 || (m >= 1000 && m <= 1006) || m == 1015 || m == 1016 || m == 2031 ||
	       m == 2048 || m == 5522;
}

/* The numbers in seq[i..end), whatever separates them, one at a time: the
 * next one's value in *v (capped), or false when none is left. A number
 * past 65535 counts as a reporting mode, as a parser that wraps it might
 * read one. */
static bool next_number(const char *seq, size_t end, size_t *i, unsigned *v)
{
	while (*i < end && (seq[*i] < '0' || seq[*i] > '9'))
		(*i)++;
	if (*i >= end)
		return false;
	*v = 0;
	for (; *i < end && seq[*i] >= '0' && seq[*i] <= '9'; (*i)++)
		if (*v < 100000)
			*v = *v * 10 + (unsigned)(seq[*i] - '0');
	if (*v > 65535)
		*v = 1000;
	return true;
}

/* Without f->keep_reporting: a CSI in seq that turns on what the terminal
 * reports later, of its own accord (its reports would reach the sandbox's
 * stdin, or the host's shell after the run). Returns false when nothing
 * is left of it (its bytes count as dropped).
 * - a mode set (CSI ? Pm h), or XTRESTORE (CSI ? Pm r), naming a mode
 *   al_tty_mode_reports() lists: in the plain form (digits and ';' only)
 *   those leave its list and the rest is kept (none left: dropped); in any
 *   other (another prefix, or none, with h; an intermediate; ':' or a
 *   stray byte), however a terminal would read it, dropped whole;
 * - the locator: DECELR (CSI Ps ; Pu ' z) but its off (Ps 0), DECSLE
 *   (CSI Pm ' {), DECEFR (CSI Pt ; Pl ; Pb ; Pr ' w).
 * Their resets pass. */
static bool strip_reports(struct al_tty_filter *f)
{
	struct csi c = csi_parse(f->seq, f->n_seq);
	char *seq = f->seq;
	size_t n = f->n_seq, i = 2, o = 3;
	bool named = false;
	unsigned v;

	if (c.inter == '\'' && (c.final == 'z' || c.final == '{' || c.final == 'w')) {
		if (c.final == 'z' && !c.prefix && !c.odd && c.p1 == 0)
			return true;
		drop_seq(f);
		return false;
	}
	if (c.final != 'h' && !(c.final == 'r' && (c.prefix == '?' || c.odd)))
		return true;
	while (next_number(seq, n - 1, &i, &v))
		named |= al_tty_mode_reports(v);
	if (!named)
		return true;
	if (c.prefix != '?' || c.inter || c.odd || memchr(seq, ':', n)) {
		drop_seq(f);
		return false;
	}
	/* in place, each kept parameter as it was: o never passes i */
	for (i = 3; i < n - 1;) {
		size_t start = i, at = i;
		while (i < n - 1 && seq[i] != ';')
			i++;
		if (i > start && next_number(seq, i, &at, &v) && !al_tty_mode_reports(v)) {
			if (o > 3)
				seq[o++] = ';';
			memmove(seq + o, seq + start, i - start);
			o += i - start;
		}
		i++; /* past the ';' */
	}
	if (o == 3) {
		drop_seq(f);
		return false;
	}
	seq[o++] = seq[n - 1];
	drop(f, n - o);
	f->n_seq = o;
	return true;
}

/* What a whole CSI in seq gets: NULL to be written out; "" to be dropped;
 * else dropped and, under -t, answered with that reply. Dropped are the
 * queries a terminal answers into its input (and whatever else shares
 * their final byte and intermediate: more is left out than need be
 * rather than less), and a few that reach past the screen:
 * - n: DSR in every form (5 status, 6 cursor position, ? 6 extended, ?
 *   15/25/26/53/996 printer, keys, keyboard, locator, colour theme ...);
 * - c: device attributes (DA1, > DA2, = DA3), and any other c;
 * - t without intermediate: window operations (XTWINOPS): the reports
 *   (11, 13, 14, 15, 16, 18, 19, 20, 21 the title) and the moves, resizes
 *   and iconifying of the host's window; only 22 and 23 (the title stack)
 *   are kept;
 * - x: DECREQTPARM; > q: XTVERSION; ? u: the kitty keyboard query; ? m:
 *   XTQMODKEYS; ? S: XTSMGRAPHICS; i: media copy (the host's printer);
 * - $ p: DECRQM (both forms); + p: DECSR; $ w: DECRQPSR; , w: DECRQKT;
 *   $ u: DECRQTSR; & u: DECRQUPSS; " v: DECRQDE; ' |: DECRQLP; # |:
 *   XTREPORTSGR; # R: XTREPORTCOLORS; * y: DECRQCRA (a checksum of what
 *   the screen shows, the host's lines before the run included). */
static const char *csi_action(const char *seq, size_t n)
{
	struct csi c = csi_parse(seq, n);
	bool plain = !c.inter && !c.odd;
	static const struct {
		char inter, final;
	} queries[] = {{'$', 'p'}, {'+', 'p'},	{'$', 'w'}, {',', 'w'}, {'$', 'u'}, {'&', 'u'},
		       {'"', 'v'}, {'\'', '|'}, {'#', '|'}, {'#', 'R'}, {'*', 'y'}};

	if (csi_vt52(seq, n))
		return "";
	switch (c.final) {
	case 'n':
		if (plain && !c.prefix && c.nparams == 1 && c.p1 == 6)
			return REPLY_CPR;
		if (plain && !c.prefix && c.nparams == 1 && c.p1 == 5)
			return REPLY_DSR;
		return "";
	case 'c':
		if (plain && c.nparams <= 1 && c.p1 == 0 && (!c.prefix || c.prefix == '>'))
			return c.prefix ? REPLY_DA2 : REPLY_DA1;
		return "";
	case 'i':
		return "";
	case 't':
		if (c.inter)
			break;
		return !c.prefix && !c.odd && (c.p1 == 22 || c.p1 == 23) ? NULL : "";
	case 'x':
		return c.inter ? NULL : "";
	/* (a prefix byte further in, which some parsers may take too, is
	 * odd: dropped as well) */
	case 'q':
		return (c.prefix == '>' || c.odd) && !c.inter ? "" : NULL;
	case 'u':
	case 'm':
	case 'S':
		if ((c.prefix == '?' || c.odd) && !c.inter)
			return "";
		break;
	}
	for (size_t i = 0; i < sizeof(queries) / sizeof(queries[0]); i++)
		if (c.inter == queries[i].inter && c.final == queries[i].final)
			return "";
	return NULL;
}

/* A whole CSI in seq: written out (maybe without its modes that report),
 * or dropped (and maybe answered). */
static void emit_csi(struct al_tty_filter *f, char *out, size_t *o)
{
	if (!f->keep_reporting && !strip_reports(f))
		return;

	const char *reply = csi_action(f->seq, f->n_seq);

	if (!reply) {
		put(f, out, o, f->seq, f->n_seq);
	} else {
		drop(f, f->n_seq);
		answer(f, reply);
	}
	f->n_seq = 0;
}

/* A whole plain ESC sequence (ESC, at most one intermediate, a final). */
static bool esc_kept(const char *seq, size_t n)
{
	if (n == 2)
		return strchr("78DEMHc=>", seq[1]) != NULL;
	return n == 3 && (seq[1] == '(' || seq[1] == ')') && strchr("0AB", seq[2]) != NULL;
}

/* ESC seen: what a terminal does with each byte after it. */
static int after_esc(struct al_tty_filter *f, unsigned char c, char *out, size_t *o)
{
	if (c == '[') {
		f->n_seq = 0;
		seq_add(f, ESC);
		seq_add(f, '[');
		return S_CSI;
	}
	if (c == ']') {
		drop(f, 2);
		f->osc = 0;
		f->osc_digits = 0;
		return S_OSC_NUM;
	}
	if (c == 'P' || c == 'X' || c == '^' || c == '_') {
		drop(f, 2);
		f->string_is_osc = false;
		return S_STRING;
	}
	if (c == ESC) { /* the first ESC came to nothing; this one starts anew */
		drop_seq(f);
		seq_add(f, ESC);
		return S_ESC;
	}
	if (c >= 0x20 && c <= 0x2f) { /* an intermediate: more to come */
		if (f->n_seq > 1 || !seq_add(f, c)) {
			drop_seq(f);
			drop(f, 1);
			return S_ESC_SKIP;
		}
		return S_ESC;
	}
	if (c >= 0x30 && c <= 0x7e) { /* a final byte: the sequence is whole */
		seq_add(f, c);
		if (esc_kept(f->seq, f->n_seq))
			put(f, out, o, f->seq, f->n_seq);
		else
			drop(f, f->n_seq);
		f->n_seq = 0;
		return S_TEXT;
	}
	/* Anything else (a control, DEL, a high byte) ends it unkept. */
	drop_seq(f);
	drop(f, 1);
	return S_TEXT;
}

size_t al_tty_filter(struct al_tty_filter *f, const char *in, size_t n, char *out)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)in[i];

		switch (f->state) {
		case S_TEXT:
		text:
			if (c == ESC) {
				f->n_seq = 0;
				seq_add(f, ESC);
				f->state = S_ESC;
			} else if ((c >= 0x20 && c < 0x7f) || c == BEL ||
				   (c >= 0x08 && c <= 0x0d)) {
				out[o++] = (char)c;
			} else if (c >= 0xc2 && c <= 0xf4) {
				f->utf8[0] = (char)c;
				f->n_utf8 = 1;
				f->utf8_need = c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : 1;
				f->state = S_UTF8;
			} else if (c >= 0x80) {
				out[o++] = '?'; /* a stray or overlong byte, or a C1 control */
				drop(f, 1);
			} else {
				drop(f, 1); /* other C0 controls and DEL */
			}
			break;
		case S_UTF8:
			if ((c & 0xc0) != 0x80) {
				out[o++] = '?';
				drop(f, f->n_utf8);
				f->state = S_TEXT;
				goto text;
			}
			f->utf8[f->n_utf8++] = (char)c;
			if (f->n_utf8 == 2) {
				unsigned char b0 = (unsigned char)f->utf8[0];
				/* C1 (C2 80..9F), overlong 3- and 4-byte forms,
				 * surrogates, past U+10FFFF */
				if ((b0 == 0xc2 && c < 0xa0) || (b0 == 0xe0 && c < 0xa0) ||
				    (b0 == 0xed && c > 0x9f) || (b0 == 0xf0 && c < 0x90) ||
				    (b0 == 0xf4 && c > 0x8f)) {
					out[o++] = '?';
					drop(f, 2);
					f->state = S_TEXT;
					break;
				}
			}
			if (--f->utf8_need == 0) {
				put(f, out, &o, f->utf8, f->n_utf8);
				f->state = S_TEXT;
			}
			break;
		case S_ESC:
			f->state = after_esc(f, c, out, &o);
			break;
		case S_CSI:
			if (c >= 0x20 && c <= 0x3f) { /* parameters and intermediates */
				if (!seq_add(f, c)) {
					drop_seq(f);
					drop(f, 1);
					f->state = S_CSI_SKIP;
				}
			} else if (c >= 0x40 && c <= 0x7e) {
				seq_add(f, c);
				emit_csi(f, out, &o);
				f->state = S_TEXT;
			} else {
				drop_seq(f);
				f->state = S_TEXT;
				if (c == ESC || c == CAN || c == SUB)
					drop(f, 1);
				else
					goto text;
			}
			break;
		case S_ESC_SKIP:
			drop(f, 1);
			if (c >= 0x30 && c <= 0x7e)
				f->state = S_TEXT;
			else if (c < 0x20 || c > 0x7e)
				f->state = S_TEXT; /* ends it; dropped with it */
			break;
		case S_CSI_SKIP:
			drop(f, 1);
			if ((c >= 0x40 && c <= 0x7e) || c == CAN || c == SUB)
				f->state = S_TEXT;
			else if (c == ESC) {
				/* what terminals do too: ESC aborts it and starts anew */
				f->dropped--;
				f->n_seq = 0;
				seq_add(f, ESC);
				f->state = S_ESC;
			}
			break;
		case S_OSC_NUM:
			if (c >= '0' && c <= '9' && f->osc_digits < 4) {
				f->osc = f->osc * 10 + (c - '0');
				f->osc_digits++;
				drop(f, 1);
			} else if (c == ';' && f->osc_digits > 0 && osc_kept(f->osc)) {
				drop(f, 1);
				f->n_seq = 0;
				f->state = S_OSC_TEXT;
			} else {
				f->string_is_osc = true;
				f->state = S_STRING;
				i--; /* this byte belongs to the dropped string */
			}
			break;
		case S_OSC_TEXT_ESC:
			if (c == '\\') {
				emit_osc(f, out, &o);
				drop(f, 1);
				f->state = S_TEXT;
				break;
			}
			/* Not an ST: the OSC came to nothing, and this ESC starts
			 * anew (never one byte written twice). */
			drop_seq(f);
			f->n_seq = 0;
			seq_add(f, ESC);
			f->state = after_esc(f, c, out, &o);
			break;
		case S_OSC_TEXT:
			if (c == BEL) {
				emit_osc(f, out, &o);
				f->state = S_TEXT;
			} else if (c == ESC) {
				drop(f, 1);
				f->state = S_OSC_TEXT_ESC;
			} else if (c >= 0x20 && c < 0x7f && f->n_seq < AL_TTY_SEQ_MAX) {
				f->seq[f->n_seq++] = (char)c;
			} else {
				/* a control, a high byte or too long: dropped whole */
				drop_seq(f);
				drop(f, 1);
				f->string_is_osc = true;
				f->state = c == CAN || c == SUB ? S_TEXT : S_STRING;
			}
			break;
		case S_STRING:
			drop(f, 1);
			if (c == ESC)
				f->state = S_STRING_ESC;
			else if ((c == BEL && f->string_is_osc) || c == CAN || c == SUB)
				f->state = S_TEXT;
			break;
		case S_STRING_ESC:
			drop(f, 1);
			f->state = c == '\\' ? S_TEXT : c == ESC ? S_STRING_ESC : S_STRING;
			break;
		}
	}
	return o;
}
