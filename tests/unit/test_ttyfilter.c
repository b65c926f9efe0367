/* supervisor/ttyfilter.h: the pty's output to airlock's terminal without
 * OSC 52 (the clipboard) or tmux's DCS passthrough, fed whole and in every
 * split, so that no chunk boundary lets a sequence through. */
#include "unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/ttyfilter.h"

/* Filter in, cut into chunks of at most step bytes; the output, as a new
 * NUL-terminated string. */
static char *filter(const char *in, size_t step, unsigned long long *dropped)
{
	struct al_tty_filter f = {0};
	size_t n = strlen(in), len = 0;
	char *out = malloc(n + AL_TTY_HELD_MAX * (n + 1) + 1);

	assert_non_null(out);
	for (size_t i = 0; i < n; i += step) {
		size_t k = n - i < step ? n - i : step;
		len += al_tty_filter(&f, in + i, k, out + len);
	}
	out[len] = '\0';
	if (dropped)
		*dropped = f.dropped;
	return out;
}

/* Whole and in every chunk size, the same result. */
static void expect_filtered(const char *in, const char *want)
{
	size_t n = strlen(in);

	for (size_t step = 1; step <= n + 1; step++) {
		char *got = filter(in, step, NULL);
		if (strcmp(got, want) != 0)
			fail_msg("filtering %zu-byte chunks of \"%s\": got \"%s\", expected \"%s\"",
				 step, in, got, want);
		free(got);
	}
}

static void test_text_passes(void **state)
{
	(void)state;
	expect_filtered("plain text\r\n", "plain text\r\n");
	/* colours, the title (OSC 0 and 2), cursor moves, a lone ESC */
	expect_filtered("\033[31mred\033[0m", "\033[31mred\033[0m");
	expect_filtered("\033]0;title\007x", "\033]0;title\007x");
	expect_filtered("\033]2;t\033\\x", "\033]2;t\033\\x");
	expect_filtered("\033]5;x\007", "\033]5;x\007");
	expect_filtered("\033]521;x\007", "\033]521;x\007");
	expect_filtered("\033[?1049h\033[H", "\033[?1049h\033[H");
	expect_filtered("a\033", "a"); /* held until it is known */
	expect_filtered("\033\033[1m", "\033\033[1m");
	expect_filtered("\033Pq#0;2;0;0;0#0~-\033\\", "\033Pq#0;2;0;0;0#0~-\033\\"); /* sixel */
	expect_filtered("\033Ptmu\033\\", "\033Ptmu\033\\");
	/* UTF-8 with C1-valued continuation bytes (U+015D is C5 9D) */
	expect_filtered("\xc5\x9d\xc2\x90", "\xc5\x9d\xc2\x90");
}

static void test_clipboard_is_taken_out(void **state)
{
	unsigned long long dropped = 0;
	char *got;

	(void)state;
	/* set (BEL- and ST-terminated), query, several targets */
	expect_filtered("a\033]52;c;Y3VybCB4fHNo\007b", "ab");
	expect_filtered("a\033]52;c;Y3VybCB4fHNo\033\\b", "ab");
	expect_filtered("\033]52;c;?\007", "");
	expect_filtered("\033]52;pcs;eA==\007after", "after");
	/* an ESC inside that is not ST does not end it */
	expect_filtered("\033]52;c;\033x\033\\y", "y");
	expect_filtered("\033]52;c;\033\033\\z", "z");
	/* two in a row, text around */
	expect_filtered("1\033]52;c;a\0072\033]52;c;b\0073", "123");
	/* never ended: everything after it is the sequence's */
	expect_filtered("x\033]52;c;aaaa", "x");
	got = filter("\033]52;c;abc\007", 3, &dropped);
	assert_string_equal(got, "");
	assert_int_equal(dropped, 11);
	free(got);
}

static void test_tmux_passthrough_is_taken_out(void **state)
{
	(void)state;
	/* an OSC 52 wrapped for tmux: inner ESCs doubled */
	expect_filtered("a\033Ptmux;\033\033]52;c;eA==\007\033\\b", "ab");
	expect_filtered("a\033Ptmux;\033\033]52;c;eA==\033\033\\\033\\b", "ab");
	expect_filtered("\033Ptmux;x\033\\\033[1mB", "\033[1mB");
}

int main(void)
{
	/* clang-format off */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_text_passes),
		cmocka_unit_test(test_clipboard_is_taken_out),
		cmocka_unit_test(test_tmux_passthrough_is_taken_out),
	};
	/* clang-format on */

	return cmocka_run_group_tests(tests, NULL, NULL);
}
