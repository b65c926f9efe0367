/* supervisor/ttyfilter.h: the pty's output to airlock's terminal, re-encoded
 * with only what acts on the screen. Each case is fed whole and in every
 * split, so that no chunk boundary changes the result; random input checks
 * that the output is a fixed point and never holds what must not pass. */
#include "unit.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/ttyfilter.h"

/* With answer set (as under -t), the replies collected go to reply (when
 * not NULL), *n_reply bytes of them; keep is keep_reporting. */
static size_t filter_keep(const char *in, size_t n, size_t step, char *out, bool answer, bool keep,
			  char *reply, size_t *n_reply)
{
	static struct al_tty_filter f;
	size_t len = 0;

	memset(&f, 0, sizeof(f));
	f.answer = answer;
	f.keep_reporting = keep;
	if (n_reply)
		*n_reply = 0;
	for (size_t i = 0; i < n; i += step) {
		size_t k = n - i < step ? n - i : step;
		size_t got = al_tty_filter(&f, in + i, k, out + len);
		/* the bound stdio.c's buffer relies on */
		if (got > k + AL_TTY_HELD_MAX)
			fail_msg("one call of %zu bytes wrote %zu", k, got);
		len += got;
		if (!answer && f.n_reply)
			fail_msg("%zu bytes of replies without answer set", f.n_reply);
		if (reply)
			memcpy(reply + *n_reply, f.reply, f.n_reply);
		if (n_reply)
			*n_reply += f.n_reply;
		f.n_reply = 0; /* as stdio.c empties it after each call */
	}
	return len;
}

static size_t filter_ans(const char *in, size_t n, size_t step, char *out, bool answer, char *reply,
			 size_t *n_reply)
{
	return filter_keep(in, n, step, out, answer, false, reply, n_reply);
}

static size_t filter_n(const char *in, size_t n, size_t step, char *out)
{
	return filter_ans(in, n, step, out, false, NULL, NULL);
}

/* A review's overflow: "0;" ESC "]" over and over wrote 5 bytes for 4. */
static void test_output_bound(void **state)
{
	static const char *const units[] = {"0;\033]", "\033]0;\0337", "\033]0;\033[m"};
	size_t n = 65536;
	char *in = malloc(n), *out = malloc(n + AL_TTY_HELD_MAX);

	(void)state;
	assert_non_null(in);
	assert_non_null(out);
	for (size_t u = 0; u < sizeof(units) / sizeof(units[0]); u++) {
		size_t ul = strlen(units[u]);
		in[0] = 0x1b;
		in[1] = ']';
		for (size_t i = 2; i < n; i++)
			in[i] = units[u][(i - 2) % ul];
		size_t got = filter_n(in, n, n, out);
		if (got > n)
			fail_msg("unit %zu: %zu bytes out of %zu", u, got, n);
	}
	free(in);
	free(out);
}

/* Whole and in every chunk size, want. */
static void expect_filtered(const char *in, const char *want)
{
	size_t n = strlen(in);
	char *out = malloc(n + (n + 1) * AL_TTY_HELD_MAX + 1);

	assert_non_null(out);
	for (size_t step = 1; step <= n + 1; step++) {
		size_t len = filter_n(in, n, step, out);
		out[len] = '\0';
		if (len != strlen(want) || memcmp(out, want, len) != 0)
			fail_msg("filtering %zu-byte chunks of \"%s\": got \"%s\", expected \"%s\"",
				 step, in, out, want);
	}
	free(out);
}

static void test_screen_passes(void **state)
{
	(void)state;
	expect_filtered("plain text\r\n\ttab\b", "plain text\r\n\ttab\b");
	expect_filtered("\033[31mred\033[0m \033[?1049h\033[2J\033[H",
			"\033[31mred\033[0m \033[?1049h\033[2J\033[H");
	expect_filtered("\0337\0338\033M\033(B\033=", "\0337\0338\033M\033(B\033=");
	/* titles and colours, in the canonical spelling */
	expect_filtered("\033]0;title\007x", "\033]0;title\007x");
	expect_filtered("\033]2;t\033\\x", "\033]2;t\007x");
	/* an OSC whose ESC is not an ST comes to nothing; the ESC starts anew */
	expect_filtered("\033]0;a\033[1mb", "\033[1mb");
	expect_filtered("\033]8;;http://x.test/\007link\033]8;;\007",
			"\033]8;;http://x.test/\007link\033]8;;\007");
	expect_filtered("\033]133;A\007", "\033]133;A\007");
	/* UTF-8, C1-valued continuation bytes included (U+015D is C5 9D) */
	expect_filtered("\xc5\x9d \xe2\x82\xac \xf0\x9f\x98\x80",
			"\xc5\x9d \xe2\x82\xac \xf0\x9f\x98\x80");
}

static void test_past_the_screen_is_dropped(void **state)
{
	(void)state;
	/* the clipboard, set and read, either terminator */
	expect_filtered("a\033]52;c;Y3VybCB4fHNo\007b", "ab");
	expect_filtered("a\033]52;c;Y3VybCB4fHNo\033\\b", "ab");
	expect_filtered("\033]52;c;?\007", "");
	/* other OSCs that are not on the list: files, kitty's clipboard */
	expect_filtered("\033]1337;File=name=eA==:eA==\007ok", "ok");
	expect_filtered("\033]5522;type=write\007ok", "ok");
	/* every DCS (tmux's passthrough in any spelling, kitty's remote
	 * control, sixel), APC (kitty graphics), PM, SOS */
	expect_filtered("a\033Ptmux;\033\033]52;c;eA==\007\033\\b", "ab");
	expect_filtered("a\033P0tmux;\033\033]52;c;x\007\033\\b", "ab");
	expect_filtered("\033P@kitty-cmd{\"cmd\":\"launch\"}\033\\ok", "ok");
	expect_filtered("\033Pq#0;2;0;0;0#0~-\033\\ok", "ok");
	expect_filtered("\033_Gt=f;L2V0Yy9zaGFkb3c=\033\\ok", "ok");
	expect_filtered("\033^pm\033\\\033Xsos\033\\ok", "ok");
	/* C1 controls, raw or as UTF-8 (U+009D is OSC to some terminals) */
	expect_filtered("\x9d"
			"52;c;x\x9c",
			"?52;c;x?");
	expect_filtered("\xc2\x9d"
			"52;c;x\xc2\x9c",
			"?52;c;x?");
	/* malformed UTF-8 */
	expect_filtered("\xc0\xaf\xed\xa0\x80\xff", "?????"); /* ED A0 is one */
}

/* The ways around a blacklist that a review found: none gets an OSC 52
 * (or any ESC ] 5...) through. */
static void test_no_splice(void **state)
{
	(void)state;
	/* a held prefix released next to a dropped decoy */
	expect_filtered("\033\033]52;\007]52;c;x\007", "]52;c;x\007");
	expect_filtered("\033]5\033]52;\0072;c;x\007", "2;c;x\007");
	/* controls the terminals skip inside a sequence */
	expect_filtered("\033\001]52;c;x\007", "]52;c;x\007");
	expect_filtered("\033\177]52;c;x\007", "]52;c;x\007");
	expect_filtered("\033]5\0012;c;x\007ok", "ok");
	/* the number as a number: leading zeros, overflow, no ';' */
	expect_filtered("\033]052;c;x\007ok", "ok");
	expect_filtered("\033]00052;c;x\007ok", "ok");
	expect_filtered("\033]4294967348;c;x\007ok", "ok");
	expect_filtered("\033]52c;x\007ok", "ok");
	/* an OSC that is kept does not carry a control inside */
	expect_filtered("\033]0;a\033]52;c;x\007b", "b");
	expect_filtered("\033]0;a\001b\007c", "c");
	/* a CSI interrupted by a control, or too long */
	expect_filtered("\033[3\n1m", "\n1m");
	/* ESC sequences that change how later bytes are read: leaving UTF-8
	 * (its continuation bytes would then be C1: C5 9D would hold an OSC),
	 * 8-bit controls, other charsets */
	expect_filtered("\033%@\xc5\x9d"
			"52;c;x\xc5\x9c",
			"\xc5\x9d"
			"52;c;x\xc5\x9c");
	expect_filtered("\033 Gok", "ok");
	expect_filtered("\033(Kok\033(0q\033(B", "ok\033(0q\033(B");
	expect_filtered("\033#8ok", "ok");
	/* screen's and tmux's title and message strings */
	expect_filtered("\033kname\033\\ok", "nameok");
	expect_filtered("\033\"x\033!yok", "ok");
	/* VT52 mode, after which the end's resets would not work */
	expect_filtered("\033[?2l\033[?25;2lok\033[?25l", "ok\033[?25l");
	/* hyperlinks: to the web or mail only */
	expect_filtered("\033]8;;file:///tmp/x.sh\007click\033]8;;\007", "click\033]8;;\007");
	expect_filtered("\033]8;id=1;https://x.test/\007a", "\033]8;id=1;https://x.test/\007a");
}

/* Whole and in every chunk size, with answer set (-t): the output is
 * want and the replies collected are want_reply; without answer the
 * output is the same and there is no reply. */
static void expect_answered(const char *in, const char *want, const char *want_reply)
{
	size_t n = strlen(in);
	char *out = malloc(n + (n + 1) * AL_TTY_HELD_MAX + 1);
	char reply[4096];
	size_t n_reply;

	assert_non_null(out);
	for (size_t step = 1; step <= n + 1; step++) {
		size_t len = filter_ans(in, n, step, out, true, reply, &n_reply);
		out[len] = '\0';
		reply[n_reply] = '\0';
		if (len != strlen(want) || memcmp(out, want, len) != 0)
			fail_msg("filtering %zu-byte chunks of \"%s\": got \"%s\", expected \"%s\"",
				 step, in, out, want);
		if (n_reply != strlen(want_reply) || memcmp(reply, want_reply, n_reply) != 0)
			fail_msg("answering %zu-byte chunks of \"%s\": replied \"%s\", expected "
				 "\"%s\"",
				 step, in, reply, want_reply);
	}
	free(out);
	expect_filtered(in, want);
}

/* Queries a terminal answers into its input (which is the sandbox's
 * stdin): none reaches the terminal, and without -t none is answered. */
static void test_queries_are_dropped(void **state)
{
	static const char *const queries[] = {
	    /* DSR in its forms: status, cursor position, DECXCPR, printer,
	     * keys, keyboard, locator, colour theme */
	    "\033[5n",
	    "\033[6n",
	    "\033[?6n",
	    "\033[?15n",
	    "\033[?25n",
	    "\033[?26n",
	    "\033[?53n",
	    "\033[?996n",
	    "\033[06n",
	    "\033[6;1n",
	    "\033[>6n",
	    /* device attributes: DA1 (and its odd spellings), DA2, DA3 */
	    "\033[c",
	    "\033[0c",
	    "\033[00c",
	    "\033[>c",
	    "\033[>0c",
	    "\033[=c",
	    "\033[=0c",
	    "\033[1c",
	    "\033[;c",
	    "\033[?c",
	    /* window and title reports, and the host window's moves */
	    "\033[11t",
	    "\033[13t",
	    "\033[13;2t",
	    "\033[14t",
	    "\033[14;2t",
	    "\033[15t",
	    "\033[16t",
	    "\033[18t",
	    "\033[19t",
	    "\033[20t",
	    "\033[21t",
	    "\033[t",
	    "\033[3;0;0t",
	    "\033[8;1;1t",
	    "\033[2t",
	    "\033[9;1t",
	    "\033[>0t",
	    "\033[?21t",
	    "\033[22?t",
	    "\033[48t",
	    /* DECRQM, ANSI and DEC; DECREQTPARM; XTVERSION; kitty keyboard;
	     * XTQMODKEYS; XTSMGRAPHICS */
	    "\033[?2026$p",
	    "\033[4$p",
	    "\033[x",
	    "\033[1x",
	    "\033[>q",
	    "\033[>0q",
	    "\033[?u",
	    "\033[?4m",
	    "\033[?1;1S",
	    "\033[0>q",
	    "\033[1?u",
	    /* other reports: DECSR, DECRQPSR, DECRQKT, DECRQTSR, DECRQUPSS,
	     * DECRQDE, DECRQLP, XTREPORTSGR, XTREPORTCOLORS, DECRQCRA; media
	     * copy */
	    "\033[1+p",
	    "\033[1$w",
	    "\033[1,w",
	    "\033[1$u",
	    "\033[&u",
	    "\033[\"v",
	    "\033[1'|",
	    "\033[1;1;1;1#|",
	    "\033[#R",
	    "\033[1;1;1;1;1;1*y",
	    "\033[5i",
	    "\033[?15n",
	    /* colour queries (OSC 4, 10-19), either terminator, and mixed with
	     * a setting */
	    "\033]10;?\007",
	    "\033]11;?\033\\",
	    "\033]12;?\007",
	    "\033]17;?\007",
	    "\033]19;?\007",
	    "\033]4;1;?\007",
	    "\033]4;1;#ff0000;2;?\007",
	    "\033]10;red;?\007",
	    "\033]104;?\007",
	    "\033]110;?\007",
	    /* the clipboard, queried and set; DECRQSS, XTGETTCAP; DECID; ENQ */
	    "\033]52;c;?\007",
	    "\033]52;c;eA==\007",
	    "\033P$qm\033\\",
	    "\033P$q\"p\033\\",
	    "\033P+q544e\033\\",
	    "\033Z",
	    "\005",
	};
	char in[128];

	(void)state;
	/* answered under -t: test_queries_answered */
	static const char *const answered[] = {"\033[5n",  "\033[6n", "\033[06n", "\033[c",
					       "\033[00c", "\033[0c", "\033[>c",  "\033[>0c"};

	for (size_t i = 0; i < sizeof(queries) / sizeof(queries[0]); i++) {
		bool replied = false;
		for (size_t j = 0; j < sizeof(answered) / sizeof(answered[0]); j++)
			replied |= strcmp(queries[i], answered[j]) == 0;
		snprintf(in, sizeof(in), "a%sb", queries[i]);
		if (replied)
			expect_filtered(in, "ab");
		else
			expect_answered(in, "ab", "");
	}
}

/* Under -t the ones programs wait for get airlock's fixed replies, in
 * order, however the query is split across writes; the rest none. */
static void test_queries_answered(void **state)
{
	(void)state;
	expect_answered("a\033[6nb", "ab", "\033[1;1R");
	expect_answered("\033[5n", "", "\033[0n");
	expect_answered("\033[c", "", "\033[?62;22c");
	expect_answered("\033[0c", "", "\033[?62;22c");
	expect_answered("\033[>c", "", "\033[>1;10;0c");
	expect_answered("\033[>0c", "", "\033[>1;10;0c");
	/* several, in the order asked, with screen output around them */
	expect_answered("\033[1mx\033[6n\033[c\033]11;?\007\033[>c\033[5n\033[21t\033[0m",
			"\033[1mx\033[0m", "\033[1;1R\033[?62;22c\033[>1;10;0c\033[0n");
	/* what only looks like one: another final, a prefix, a parameter */
	expect_answered("\033[?6n\033[6;1n\033[=c\033[1c\033[6 n", "", "");
	/* a query interrupted by a control, or cancelled, is none */
	expect_answered("\033[6\030n", "n", "");
	/* more replies than fit in one call: the rest are left unanswered */
	char in[4096] = "";
	for (int i = 0; i < 100; i++)
		strcat(in, "\033[6n");
	char out[sizeof(in) + AL_TTY_HELD_MAX], reply[sizeof(in) * 2];
	size_t n_reply;
	filter_ans(in, strlen(in), strlen(in), out, true, reply, &n_reply);
	assert_int_equal(n_reply, AL_TTY_REPLY_MAX / 6 * 6);
}

/* What looks like a query but acts on the screen still passes. */
static void test_near_queries_pass(void **state)
{
	(void)state;
	expect_answered("\033[22;0t\033[23;0t", "\033[22;0t\033[23;0t", "");
	expect_answered("\033[2 q\033[>4;1m\033[>1u\033[<u\033[u\033[1$x",
			"\033[2 q\033[>4;1m\033[>1u\033[<u\033[u\033[1$x", "");
	expect_answered("\033]11;#000000\007\033]4;1;rgb:ff/00/00\007\033]104\007",
			"\033]11;#000000\007\033]4;1;rgb:ff/00/00\007", "");
	/* a '?' means nothing special outside the colours: a link's query */
	expect_answered("\033]8;;https://x.test/?a=1\007l\033]8;;\007",
			"\033]8;;https://x.test/?a=1\007l\033]8;;\007", "");
	expect_answered("\033]0;what?\007", "\033]0;what?\007", "");
}

/* Whole and in every chunk size, with keep_reporting as keep: want. */
static void expect_kept(const char *in, bool keep, const char *want)
{
	size_t n = strlen(in);
	char *out = malloc(n + (n + 1) * AL_TTY_HELD_MAX + 1);

	assert_non_null(out);
	for (size_t step = 1; step <= n + 1; step++) {
		size_t len = filter_keep(in, n, step, out, keep, keep, NULL, NULL);
		out[len] = '\0';
		if (len != strlen(want) || memcmp(out, want, len) != 0)
			fail_msg(
			    "filtering %zu-byte chunks of \"%s\" (keep_reporting %d): got \"%s\", "
			    "expected \"%s\"",
			    step, in, keep, out, want);
	}
	free(out);
}

/* What turns on a report the terminal sends later: without
 * keep_reporting (no -t) it never reaches the terminal, and its reset
 * does; with it (-t) both pass as they are. */
static void expect_reporting(const char *in, const char *without)
{
	expect_kept(in, false, without);
	expect_kept(in, true, in);
}

static const unsigned reporting[] = {9,	   1000, 1001, 1002, 1003, 1004, 1005,
				     1006, 1015, 1016, 2031, 2048, 5522};

static void test_reporting_modes(void **state)
{
	char in[64], off[32];

	(void)state;
	for (size_t i = 0; i < sizeof(reporting) / sizeof(reporting[0]); i++) {
		assert_true(al_tty_mode_reports(reporting[i]));
		snprintf(in, sizeof(in), "a\033[?%uhb", reporting[i]);
		expect_reporting(in, "ab");
		snprintf(off, sizeof(off), "a\033[?%ulb", reporting[i]);
		expect_reporting(off, off);
		/* XTRESTORE of the mode: as good as setting it */
		snprintf(in, sizeof(in), "a\033[?%urb", reporting[i]);
		expect_reporting(in, "ab");
	}
	/* in a list the others stay, in their order */
	expect_reporting("\033[?25;1000;1049h", "\033[?25;1049h");
	expect_reporting("\033[?1000;1049;1006;;2004h", "\033[?1049;2004h");
	expect_reporting("\033[?1000;1002;1006h\033[?1004h", "");
	expect_reporting("\033[?25;1004r", "\033[?25r");
	/* other spellings a terminal may read as the mode: leading zeros, a
	 * number that wraps, a sub-parameter, no prefix or another, an
	 * intermediate, a stray '?' */
	expect_reporting("\033[?01004h\033[?0009h", "");
	expect_reporting("\033[?66540h\033[?25;4295000h", "\033[?25h");
	expect_reporting("\033[?25;1000:1h", "");
	expect_reporting("\033[1004h\033[>1004h\033[=25;1000h", "");
	expect_reporting("\033[?1000$h\033[?1000 h", "");
	expect_reporting("\033[?25;?1000h\033[25;1000?h\033[1;1004?r", "");
	/* what only looks like one: other modes, a scroll region */
	expect_reporting("\033[?1049h\033[?2004h\033[?1007h\033[?100h",
			 "\033[?1049h\033[?2004h\033[?1007h\033[?100h");
	expect_reporting("\033[1;1000r\033[4h\033[?25r", "\033[1;1000r\033[4h\033[?25r");
	/* the locator: DECELR on (its off passes), DECSLE, DECEFR */
	expect_reporting("a\033[1;1'zb\033[2'z\033[01'z", "ab");
	expect_reporting("\033['z\033[0'z\033[0;1'z", "\033['z\033[0'z\033[0;1'z");
	expect_reporting("\033[1;3'{\033['{\033[1;1;10;10'w", "");
	expect_reporting("\033[?0'z\033[0?'z", "");
	/* kitty's keyboard protocol is key encoding, not a report: passes */
	expect_reporting("\033[>1u\033[=1;1u\033[<u", "\033[>1u\033[=1;1u\033[<u");
	/* the pieces around it unchanged, a query still answered */
	expect_answered("x\033[?1000h\033[6ny", "xy", "\033[1;1R");
}

/* AL_TTY_REPORTS_OFF, which the CLI writes at the end of a -t run, turns
 * off every mode the filter keeps only under -t, and the locator; it
 * passes the filter as it is. */
static void test_reports_off_is_whole(void **state)
{
	char off[32];

	(void)state;
	for (unsigned m = 0; m < 70000; m++) {
		if (!al_tty_mode_reports(m))
			continue;
		snprintf(off, sizeof(off), "\033[?%ul", m);
		if (!strstr(AL_TTY_REPORTS_OFF, off))
			fail_msg("AL_TTY_REPORTS_OFF does not turn off mode %u", m);
	}
	assert_non_null(strstr(AL_TTY_REPORTS_OFF, "\033['z"));
	expect_reporting(AL_TTY_REPORTS_OFF, AL_TTY_REPORTS_OFF);
}

static unsigned long long rng_state = 0x9e3779b97f4a7c15ull;
static unsigned rnd(unsigned n)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (unsigned)(rng_state % n);
}

static void test_random_input(void **state)
{
	static const char alphabet[] = "\033\033\033]]PP_^X[[\\\\\007\007\030\001\177"
				       "5522;;;0188c?x m";
	static const unsigned char high[] = {0x9d, 0x90, 0x9c, 0xc2, 0x9b, 0xe2, 0x80, 0xff};
	char in[96], a[96 + AL_TTY_HELD_MAX * 97], b[sizeof(a) + AL_TTY_HELD_MAX * 97];

	(void)state;
	for (int round = 0; round < 20000; round++) {
		size_t n = 1 + rnd(sizeof(in));
		for (size_t i = 0; i < n; i++)
			in[i] = rnd(8) == 0 ? (char)high[rnd(sizeof(high))]
					    : alphabet[rnd(sizeof(alphabet) - 1)];
		size_t la = filter_n(in, n, 1 + rnd(8), a);
		size_t lb = filter_n(a, la, 1 + rnd(8), b);
		if (la != lb || memcmp(a, b, la) != 0)
			fail_msg("round %d: the output is not a fixed point", round);
		for (size_t i = 0; i + 1 < la; i++) {
			unsigned char c = (unsigned char)a[i], d = (unsigned char)a[i + 1];
			if (c == 0x1b && (d == 'P' || d == '_' || d == '^' || d == 'X'))
				fail_msg("round %d: a string sequence got out", round);
			if (c == 0x1b && d == ']' && !(i + 2 < la && strchr("0124789", a[i + 2])))
				fail_msg("round %d: an OSC not on the list got out", round);
			if (c == 0xc2 && d >= 0x80 && d <= 0x9f)
				fail_msg("round %d: a C1 control got out", round);
		}
		for (size_t i = 0; i < la; i++) {
			unsigned char c = (unsigned char)a[i];
			if ((c >= 0x80 && c < 0xc2) && (i == 0 || (unsigned char)a[i - 1] < 0x80))
				fail_msg("round %d: a lone high byte got out", round);
			if (c < 0x20 && c != 0x1b && c != 0x07 && !(c >= 0x08 && c <= 0x0d))
				fail_msg("round %d: control 0x%02x got out", round, c);
		}
		if (memmem(a, la, "\033]52", 4) || memmem(a, la, "\033]5;", 4))
			fail_msg("round %d: OSC 5x got out", round);
	}
}

/* Random mode sets without keep_reporting: none that gets out names a
 * reporting mode (any number in it, as a terminal may read it), and the
 * output is a fixed point. */
static void test_random_modes(void **state)
{
	static const char alphabet[] = "\033\033[[[??;;;::1100006924hhhrrlz'$> 5";
	char in[48], a[48 + AL_TTY_HELD_MAX * 49], b[sizeof(a) + AL_TTY_HELD_MAX * 49];

	(void)state;
	for (int round = 0; round < 20000; round++) {
		size_t n = 1 + rnd(sizeof(in));
		for (size_t i = 0; i < n; i++)
			in[i] = alphabet[rnd(sizeof(alphabet) - 1)];
		size_t la = filter_n(in, n, 1 + rnd(8), a);
		size_t lb = filter_n(a, la, 1 + rnd(8), b);
		if (la != lb || memcmp(a, b, la) != 0)
			fail_msg("round %d: the output is not a fixed point", round);
		for (size_t i = 0; i + 1 < la; i++) {
			if (a[i] != 0x1b || a[i + 1] != '[')
				continue;
			size_t j = i + 2;
			while (j < la && a[j] >= 0x20 && a[j] <= 0x3f)
				j++;
			/* h in any form; r (XTRESTORE) with a '?' (without, a
			 * scroll region) */
			if (j >= la || (a[j] != 'h' && !(a[j] == 'r' && memchr(a + i, '?', j - i))))
				continue;
			for (size_t k = i + 2; k < j; k++) {
				unsigned v = 0;
				if (a[k] < '0' || a[k] > '9' ||
				    (k > i + 2 && a[k - 1] >= '0' && a[k - 1] <= '9'))
					continue;
				for (size_t d = k;
				     d < j && a[d] >= '0' && a[d] <= '9' && v < 100000; d++)
					v = v * 10 + (unsigned)(a[d] - '0');
				if (al_tty_mode_reports(v) || v > 65535)
					fail_msg("round %d: mode %u got out: %.*s", round, v,
						 (int)(j - i + 1), a + i + 1);
			}
		}
	}
}

int main(void)
{
	/* clang-format off */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_screen_passes),
		cmocka_unit_test(test_past_the_screen_is_dropped),
		cmocka_unit_test(test_no_splice),
		cmocka_unit_test(test_queries_are_dropped),
		cmocka_unit_test(test_queries_answered),
		cmocka_unit_test(test_near_queries_pass),
		cmocka_unit_test(test_reporting_modes),
		cmocka_unit_test(test_reports_off_is_whole),
		cmocka_unit_test(test_random_input),
		cmocka_unit_test(test_random_modes),
		cmocka_unit_test(test_output_bound),
	};
	/* clang-format on */

	return cmocka_run_group_tests(tests, NULL, NULL);
}
