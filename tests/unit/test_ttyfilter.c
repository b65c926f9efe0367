/* supervisor/ttyfilter.h: the pty's output to airlock's terminal, re-encoded
 * with only what acts on the screen. Each case is fed whole and in every
 * split, so that no chunk boundary changes the result; random input checks
 * that the output is a fixed point and never holds what must not pass. */
#include "unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/ttyfilter.h"

static size_t filter_n(const char *in, size_t n, size_t step, char *out)
{
	static struct al_tty_filter f;
	size_t len = 0;

	memset(&f, 0, sizeof(f));
	for (size_t i = 0; i < n; i += step) {
		size_t k = n - i < step ? n - i : step;
		size_t got = al_tty_filter(&f, in + i, k, out + len);
		/* the bound stdio.c's buffer relies on */
		if (got > k + AL_TTY_HELD_MAX)
			fail_msg("one call of %zu bytes wrote %zu", k, got);
		len += got;
	}
	return len;
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

int main(void)
{
	/* clang-format off */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_screen_passes),
		cmocka_unit_test(test_past_the_screen_is_dropped),
		cmocka_unit_test(test_no_splice),
		cmocka_unit_test(test_random_input),
		cmocka_unit_test(test_output_bound),
	};
	/* clang-format on */

	return cmocka_run_group_tests(tests, NULL, NULL);
}
