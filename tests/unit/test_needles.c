/* gateway/needles.h: finding a run's placeholders in a buffer and in a
 * stream fed in pieces, against the plain answer. */
#include "unit.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gateway/needles.h"

static void test_needles(void **state)
{
	static const char *const set3[] = {"0123456789AB", "456789AB", "3456789A"};
	static const char text[] = "xx0123456789ABxx";
	struct al_needles *set = NULL;
	struct al_needle_scan scan;
	struct al_error err = {0};
	size_t off = 99;

	/* No set finds nothing. */
	assert_int_equal(al_needles_find(NULL, 0, text, strlen(text), &off), -1);
	al_needle_scan_init(&scan, NULL, 0);
	assert_int_equal(al_needle_scan_feed(&scan, text, strlen(text)), -1);
	const char *many[AL_NEEDLES_MAX + 1];

	assert_int_equal(al_needles_new(set3, 3, &set, &err), 0);
	assert_int_equal(al_needles_count(set), 3);
	assert_int_equal(al_needles_max_len(set), 12);
	/* The first to end wins; of two ending together, the lower index. */
	assert_int_equal(al_needles_find(set, 0, text, strlen(text), &off), 2);
	assert_int_equal(off, 5);
	assert_int_equal(al_needles_find(set, 0, "x0123456789ABx", 14, &off), 2);
	assert_int_equal(al_needles_find(set, 0, "0123456789AB", 12, &off), 2);
	assert_int_equal(al_needles_find(set, 0, "456789AB", 8, &off), 1);
	assert_int_equal(al_needles_find(set, 0, "x56789ABx", 9, NULL), -1);
	/* Masked needles are not looked for. */
	assert_int_equal(al_needles_find(set, 1u << 2, text, strlen(text), &off), 0);
	assert_int_equal(al_needles_find(set, 1u << 2 | 1u, text, strlen(text), &off), 1);
	assert_int_equal(al_needles_find(set, 7, text, strlen(text), &off), -1);
	al_needle_scan_init(&scan, set, 1u << 2);
	assert_int_equal(al_needle_scan_feed(&scan, "x0123456789A", 12), -1);
	assert_int_equal(al_needle_scan_feed(&scan, "B", 1), 0);
	assert_string_equal(al_needles_get(set, 1), "456789AB");
	assert_int_equal(al_needles_len(set, 1), 8);
	assert_null(al_needles_get(set, 3));
	assert_int_equal(al_needles_len(set, -1), 0);
	al_needles_free(set);
	/* The lower index wins a tie also when it starts later. */
	assert_int_equal(
	    al_needles_new((const char *const[]){"456789AB", "0123456789AB"}, 2, &set, &err), 0);
	assert_int_equal(al_needles_find(set, 0, "x0123456789ABx", 14, &off), 0);
	assert_int_equal(off, 5);
	al_needles_free(set);
	assert_int_equal(al_needles_new(set3, 3, &set, &err), 0);

	/* The scan gives the same answer however the stream is split. */
	for (size_t cut = 0; cut <= strlen(text); cut++) {
		int a, b;

		al_needle_scan_init(&scan, set, 0);
		a = al_needle_scan_feed(&scan, text, cut);
		b = al_needle_scan_feed(&scan, text + cut, strlen(text) - cut);
		assert_int_equal(a >= 0 ? a : b, 2);
		/* Needles 0 and 1 end at 'B' (offset 14): reported after 2 is,
		 * once, in the feed where they end. */
		if (a >= 0)
			assert_int_equal(b, cut >= 14 ? -1 : 0);
	}
	al_needle_scan_init(&scan, set, 0);
	for (size_t i = 0; i < 5; i++)
		assert_int_equal(al_needle_scan_feed(&scan, "456789", 6), -1);
	assert_int_equal(al_needle_scan_feed(&scan, "3", 1), -1);
	assert_int_equal(al_needle_scan_feed(&scan, "45", 2), -1);
	assert_int_equal(al_needle_scan_feed(&scan, "6789", 4), -1);
	assert_int_equal(al_needle_scan_feed(&scan, "A", 1), 2);
	assert_int_equal(al_needle_scan_feed(&scan, "B", 1), 1);
	assert_int_equal(al_needle_scan_feed(&scan, "xx", 2), -1);
	al_needle_scan_reset(&scan);
	assert_int_equal(al_needle_scan_feed(&scan, "789A", 4), -1);
	al_needles_free(set);

	/* Empty sets find nothing; bad needles are named by index only. */
	assert_int_equal(al_needles_new(NULL, 0, &set, &err), 0);
	al_needle_scan_init(&scan, set, 0);
	assert_int_equal(al_needle_scan_feed(&scan, "anything", 8), -1);
	assert_int_equal(al_needles_find(set, 0, "anything", 8, NULL), -1);
	al_needles_free(set);
	set = NULL;
	assert_int_equal(al_needles_new((const char *const[]){"1234567"}, 1, &set, &err), -EINVAL);
	assert_contains(err.msg, "needle 0");
	assert_int_equal(
	    al_needles_new((const char *const[]){"12345678", "1234 5678"}, 2, &set, &err), -EINVAL);
	assert_string_equal(err.msg, "needle 1 has a character other than printable ASCII");
	for (size_t i = 0; i <= AL_NEEDLES_MAX; i++)
		many[i] = "12345678";
	assert_int_equal(al_needles_new(many, AL_NEEDLES_MAX + 1, &set, &err), -EINVAL);
	assert_null(set);
}

/* The plain answer: every needle at every offset. */
static int naive_find(const char *const *v, size_t n, const char *buf, size_t len, size_t *off)
{
	size_t best_end = SIZE_MAX;
	int best = -1;

	for (size_t s = 0; s < len; s++)
		for (size_t k = 0; k < n; k++) {
			size_t nl = strlen(v[k]);

			if (s + nl <= len &&
			    (s + nl < best_end || (s + nl == best_end && (int)k < best)) &&
			    memcmp(buf + s, v[k], nl) == 0) {
				best_end = s + nl;
				best = (int)k;
				*off = s;
			}
		}
	return best;
}

/* Random needles over a 3-letter alphabet (so they overlap, share
 * prefixes and suffixes, and are found often) against the plain answer,
 * whole and fed in random pieces. */
static void test_needles_random(void **state)
{
	unsigned x = 1;
	char store[8][40], text[600];
	const char *v[8];
	struct al_needle_scan scan;

	for (int round = 0; round < 3000; round++) {
		size_t n = 1 + round % 8, len = (size_t)(round * 7) % sizeof(text), off = 0,
		       off2 = 0;
		struct al_needles *set = NULL;
		struct al_error err = {0};
		int want, got, fed = -1;

		for (size_t k = 0; k < n; k++) {
			size_t nl = 8 + (x = x * 1103515245u + 12345u) % 12, pl;

			/* Now and then a needle ends or starts another. */
			pl = k > 0 ? strlen(store[k - 1]) : 0;
			if (pl > 8 && (x >> 16) % 3 == 0) {
				snprintf(store[k], sizeof(store[k]), "%s",
					 store[k - 1] + (x >> 20) % (pl - 7));
				v[k] = store[k];
				continue;
			}
			if (pl > 8 && (x >> 16) % 3 == 1) {
				snprintf(store[k], sizeof(store[k]), "%.*s",
					 (int)(8 + (x >> 20) % (pl - 7)), store[k - 1]);
				v[k] = store[k];
				continue;
			}
			for (size_t j = 0; j < nl; j++)
				store[k][j] = "abc"[(x = x * 1103515245u + 12345u) >> 16 & 1
							? 0
							: 1 + (x >> 20) % 2];
			store[k][nl] = '\0';
			v[k] = store[k];
		}
		for (size_t j = 0; j < len; j++)
			text[j] = "abcx"[((x = x * 1103515245u + 12345u) >> 16) % 4];
		assert_int_equal(al_needles_new(v, n, &set, &err), 0);
		want = naive_find(v, n, text, len, &off);
		got = al_needles_find(set, 0, text, len, &off2);
		if (got != want || (want >= 0 && off != off2))
			fail_msg("round %d: found %d at %zu, expected %d at %zu", round, got, off2,
				 want, off);
		al_needle_scan_init(&scan, set, 0);
		for (size_t p = 0; p < len && fed < 0;) {
			size_t piece = 1 + ((x = x * 1103515245u + 12345u) >> 16) % 30;

			piece = piece < len - p ? piece : len - p;
			fed = al_needle_scan_feed(&scan, text + p, piece);
			p += piece;
		}
		assert_int_equal(fed, want);
		al_needles_free(set);
	}
}

int main(void)
{
	/* clang-format off */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_needles),
		cmocka_unit_test(test_needles_random),
	};
	/* clang-format on */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
