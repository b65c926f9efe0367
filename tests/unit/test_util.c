/* core/util.h and core/error.h: parsing, formatting, path and name checks,
 * string vectors, error messages and the list of every error found. Pure functions, no root needed. */
#include "unit.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/error.h"
#include "core/util.h"

#define SENTINEL 0xdeadbeefcafef00dULL

/* al_parse_size */

static void expect_size(const char *s, uint64_t want)
{
	uint64_t v = SENTINEL;
	int r = al_parse_size(s, &v);

	if (r != 0)
		fail_msg("al_parse_size(\"%s\") = %d, expected success", s, r);
	if (v != want)
		fail_msg("al_parse_size(\"%s\") gave %llu, expected %llu", s, (unsigned long long)v,
			 (unsigned long long)want);
}

static void expect_size_error(const char *s, int want)
{
	uint64_t v = SENTINEL;
	int r = al_parse_size(s, &v);

	if (r != want)
		fail_msg("al_parse_size(\"%s\") = %d, expected %d", s ? s : "(null)", r, want);
	/* Output parameters are written only on success. */
	assert_true(v == SENTINEL);
}

static void test_parse_size_valid(void **state)
{
	expect_size("64M", 64ULL << 20);
	expect_size("64m", 64ULL << 20);
	expect_size("512k", 512ULL << 10);
	expect_size("512K", 512ULL << 10);
	expect_size("1G", 1ULL << 30);
	expect_size("1GiB", 1ULL << 30);
	expect_size("1gib", 1ULL << 30);
	expect_size("1GB", 1ULL << 30);
	expect_size("2T", 2ULL << 40);
	expect_size("100", 100);
	expect_size("100B", 100);
	expect_size("0", 0);
	expect_size("007", 7);
	/* At most AL_SIZE_MAX (2^62), so every size fits a JSON integer. */
	expect_size("4611686018427387904", AL_SIZE_MAX);
	expect_size("4194304T", 4194304ULL << 40);
}

static void test_parse_size_invalid(void **state)
{
	expect_size_error("12Q", -EINVAL);
	expect_size_error("4611686018427387905", -ERANGE);
	expect_size_error("4194305T", -ERANGE);
	expect_size_error("18446744073709551615", -ERANGE);
	expect_size_error("", -EINVAL);
	expect_size_error(NULL, -EINVAL);
	expect_size_error("-1", -EINVAL);
	expect_size_error("+1", -EINVAL);
	expect_size_error(" 1", -EINVAL);
	expect_size_error("1 M", -EINVAL);
	expect_size_error("M", -EINVAL);
	expect_size_error("1MM", -EINVAL);
	expect_size_error("1iB", -EINVAL);
	expect_size_error("1.5M", -EINVAL);
	expect_size_error("1Mx", -EINVAL);
	expect_size_error("0x10", -EINVAL);
}

static void test_parse_size_overflow(void **state)
{
	expect_size_error("99999999999T", -ERANGE);
	expect_size_error("18446744073709551616", -ERANGE);
	expect_size_error("99999999999999999999999", -ERANGE);
	expect_size_error("16777216T", -ERANGE); /* exactly 2^64 */
	expect_size_error("17179869184G", -ERANGE);
}

/* al_parse_duration_ms */

static void expect_ms(const char *s, uint64_t want)
{
	uint64_t v = SENTINEL;
	int r = al_parse_duration_ms(s, &v);

	if (r != 0)
		fail_msg("al_parse_duration_ms(\"%s\") = %d, expected success", s, r);
	if (v != want)
		fail_msg("al_parse_duration_ms(\"%s\") gave %llu ms, expected %llu", s,
			 (unsigned long long)v, (unsigned long long)want);
}

static void expect_ms_error(const char *s)
{
	uint64_t v = SENTINEL;
	int r = al_parse_duration_ms(s, &v);

	if (r >= 0)
		fail_msg("al_parse_duration_ms(\"%s\") succeeded (%llu ms), expected an error",
			 s ? s : "(null)", (unsigned long long)v);
	assert_true(r == -EINVAL || r == -ERANGE);
	assert_true(v == SENTINEL);
}

static void test_parse_duration_valid(void **state)
{
	expect_ms("60", 60000);
	expect_ms("1.5", 1500);
	expect_ms(".5", 500);
	expect_ms("250ms", 250);
	expect_ms("90s", 90000);
	expect_ms("2m", 120000);
	expect_ms("1h", 3600000);
	expect_ms("0.25m", 15000);
	expect_ms("1ms", 1);
	/* units combined, larger first, each once */
	expect_ms("1m30s", 90000);
	expect_ms("1h30m", 5400000);
	expect_ms("1h2m3s4ms", 3723004);
	expect_ms("2s500ms", 2500);
}

static void test_parse_duration_invalid(void **state)
{
	expect_ms_error("0");
	expect_ms_error("0ms");
	expect_ms_error("0.0");
	expect_ms_error("abc");
	expect_ms_error("5x");
	expect_ms_error("5 s");
	expect_ms_error("5S");
	expect_ms_error("");
	expect_ms_error(NULL);
	expect_ms_error("-1");
	expect_ms_error(" 1");
	expect_ms_error("inf");
	expect_ms_error("nan");
	expect_ms_error("1e400");
	expect_ms_error("0.1ms"); /* rounds to nothing */
	expect_ms_error("999999999999h");
	expect_ms_error("30s1m"); /* smaller unit first */
	expect_ms_error("1m1m");  /* a unit twice */
	expect_ms_error("1m30");  /* a bare number only alone */
	expect_ms_error("1mm");
	expect_ms_error("m");
}

/* The documented grammar is decimal ("60", "1.5", "250ms"), but strtod()
 * also takes hexadecimal floats. */
static void test_parse_duration_rejects_hex(void **state)
{
	uint64_t v = SENTINEL;
	int r = al_parse_duration_ms("0x10", &v);

	assert_true(r < 0);
}

/* al_format_size */

static void expect_format(uint64_t bytes, const char *want)
{
	char buf[32];
	uint64_t back = SENTINEL;

	memset(buf, 'x', sizeof(buf));
	al_format_size(bytes, buf, sizeof(buf));
	assert_string_equal(buf, want);
	/* The output is always something al_parse_size() reads back exactly. */
	assert_int_equal(al_parse_size(buf, &back), 0);
	assert_true(back == bytes);
}

static void test_format_size(void **state)
{
	char small[3];

	expect_format(0, "0");
	expect_format(1, "1");
	expect_format(1000, "1000");
	expect_format(1023, "1023");
	expect_format(1024, "1K");
	expect_format(1536, "1536");
	expect_format(512ULL << 10, "512K");
	expect_format(64ULL << 20, "64M");
	expect_format(1ULL << 30, "1G");
	expect_format(3ULL << 40, "3T");
	expect_format(1ULL << 50, "1024T");
	expect_format((64ULL << 20) + 1024, "65537K");
	expect_format(AL_SIZE_MAX, "4194304T");
	expect_format(AL_SIZE_MAX - 1, "4611686018427387903");

	/* Truncates, never overflows. */
	al_format_size(123456, small, sizeof(small));
	assert_string_equal(small, "12");
}

/* al_path_is_clean_absolute */

static void test_path_clean_absolute(void **state)
{
	/* clang-format off */
	static const char *const good[] = {
		"/", "/a", "/a/b", "/a.b", "/...", "/a/.hidden", "/a/..b", "/a b",
		"/usr/lib/x86_64-linux-gnu",
	};
	static const char *const bad[] = {
		"", "a", "a/b", "./a",
		"/a/", "/a//b", "//", "//a",
		"/a/./b", "/a/../b", "/.", "/..", "/a/.", "/a/..", "/./a",
		"/a\nb", "/a\tb", "/a\x7f", "/\x01",
	};
	/* clang-format on */

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		if (!al_path_is_clean_absolute(good[i]))
			fail_msg("\"%s\" should be a clean absolute path", good[i]);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (al_path_is_clean_absolute(bad[i]))
			fail_msg("\"%s\" should not be a clean absolute path", bad[i]);
	assert_false(al_path_is_clean_absolute(NULL));
}

/* al_path_is_under */

static void test_path_is_under(void **state)
{
	assert_true(al_path_is_under("/a", "/a"));
	assert_true(al_path_is_under("/a/b", "/a"));
	assert_true(al_path_is_under("/a/b/c", "/a/b"));
	assert_true(al_path_is_under("/anything", "/"));
	assert_true(al_path_is_under("/", "/"));
	assert_false(al_path_is_under("/ab", "/a"));
	assert_false(al_path_is_under("/a/bc", "/a/b"));
	assert_false(al_path_is_under("/a", "/a/b"));
	assert_false(al_path_is_under("/", "/a"));
	assert_false(al_path_is_under("/tmpx", "/tmp"));
	assert_false(al_path_is_under("/b/a", "/a"));
}

/* al_env_name_is_valid, al_hostname_is_valid */

static void test_env_name(void **state)
{
	assert_true(al_env_name_is_valid("PATH"));
	assert_true(al_env_name_is_valid("_"));
	assert_true(al_env_name_is_valid("_x1"));
	assert_true(al_env_name_is_valid("a_B_9"));
	assert_false(al_env_name_is_valid(""));
	assert_false(al_env_name_is_valid(NULL));
	assert_false(al_env_name_is_valid("1A"));
	assert_false(al_env_name_is_valid("A-B"));
	assert_false(al_env_name_is_valid("A=B"));
	assert_false(al_env_name_is_valid("A B"));
	assert_false(al_env_name_is_valid("A.B"));
	assert_false(al_env_name_is_valid("\xc3\xa9"));
}

static void test_hostname(void **state)
{
	char name[80];

	assert_true(al_hostname_is_valid("airlock"));
	assert_true(al_hostname_is_valid("a"));
	assert_true(al_hostname_is_valid("a-b"));
	assert_true(al_hostname_is_valid("Box1"));
	assert_true(al_hostname_is_valid("1box"));
	assert_false(al_hostname_is_valid(""));
	assert_false(al_hostname_is_valid(NULL));
	assert_false(al_hostname_is_valid("-a"));
	assert_false(al_hostname_is_valid("a-"));
	assert_false(al_hostname_is_valid("a.b"));
	assert_false(al_hostname_is_valid("a_b"));
	assert_false(al_hostname_is_valid("a b"));
	assert_false(al_hostname_is_valid("a\n"));

	memset(name, 'h', sizeof(name));
	name[63] = '\0';
	assert_true(al_hostname_is_valid(name));
	name[63] = 'h';
	name[64] = '\0';
	assert_false(al_hostname_is_valid(name));
}

/* al_strv_* */

static void test_strv(void **state)
{
	char **v = NULL, **copy;
	char *owned = xstrdup("two");
	char buf[] = "one";

	assert_int_equal(al_strv_len(NULL), 0);
	al_strv_push(&v, buf);
	buf[0] = 'X'; /* push copied it */
	al_strv_push_take(&v, owned);
	al_strv_push(&v, "three");
	assert_int_equal(al_strv_len(v), 3);
	assert_string_equal(v[0], "one");
	assert_ptr_equal(v[1], owned); /* push_take kept the pointer */
	assert_string_equal(v[2], "three");
	assert_null(v[3]);

	copy = al_strv_dup(v);
	assert_int_equal(al_strv_len(copy), 3);
	for (size_t i = 0; i < 3; i++) {
		assert_string_equal(copy[i], v[i]);
		assert_ptr_not_equal(copy[i], v[i]);
	}
	assert_null(copy[3]);
	al_strv_free(v);
	assert_string_equal(copy[1], "two"); /* deep copy survives */
	al_strv_free(copy);

	/* dup of nothing is an empty vector, not NULL. */
	copy = al_strv_dup(NULL);
	assert_non_null(copy);
	assert_null(copy[0]);
	assert_int_equal(al_strv_len(copy), 0);
	al_strv_free(copy);
	al_strv_free(NULL);
}

/* core/cleanup.h: TAKE_PTR/TAKE_FD move ownership out of a cleanup variable. */
static void test_take_ptr(void **state)
{
	_cleanup_(al_strv_freep) char **v = NULL;
	_cleanup_close_ int fd = 42;
	char **taken;

	al_strv_push(&v, "x");
	taken = TAKE_PTR(v);
	assert_null(v);
	assert_string_equal(taken[0], "x");
	al_strv_free(taken);

	assert_int_equal(TAKE_FD(fd), 42);
	assert_int_equal(fd, -1); /* so the cleanup does not close 42 */
}

static void test_xasprintf(void **state)
{
	char *s = xasprintf("%s-%d", "a", 42);

	assert_string_equal(s, "a-42");
	free(s);
}

/* al_error_* */

static void test_error_set(void **state)
{
	struct al_error err = {0};

	assert_int_equal(al_error_set(&err, ENOENT, "open %s", "/x"), -ENOENT);
	assert_int_equal(err.code, ENOENT);
	assert_string_equal(err.msg, "open /x");

	/* Code 0 means "no errno applies"; the return is still negative. */
	assert_int_equal(al_error_set(&err, 0, "plain"), -EINVAL);
	assert_string_equal(err.msg, "plain");

	/* A NULL err is allowed and still gives the code. */
	assert_int_equal(al_error_set(NULL, EACCES, "x"), -EACCES);
	assert_int_equal(al_error_setsys(NULL, EACCES, "x"), -EACCES);
	assert_int_equal(al_error_wrap(NULL, "x"), -EINVAL);

	al_error_clear(&err);
	assert_int_equal(err.code, 0);
	assert_string_equal(err.msg, "");
	al_error_clear(NULL);
}

static void test_error_setsys(void **state)
{
	struct al_error err = {0};
	char want[256];

	assert_int_equal(al_error_setsys(&err, ENOENT, "cannot open %s", "/etc/x"), -ENOENT);
	snprintf(want, sizeof(want), "cannot open /etc/x: %s", strerror(ENOENT));
	assert_string_equal(err.msg, want);
	assert_int_equal(err.code, ENOENT);
}

static void test_error_wrap(void **state)
{
	struct al_error err = {0};

	al_error_set(&err, EINVAL, "limits.timeout: bad duration");
	assert_int_equal(al_error_wrap(&err, "loading %s", "p.json"), -EINVAL);
	assert_string_equal(err.msg, "loading p.json: limits.timeout: bad duration");
	al_error_setsys(&err, EPERM, "mount");
	assert_int_equal(al_error_wrap(&err, "step %d", 3), -EPERM);
	assert_int_equal(al_error_wrap(&err, "run"), -EPERM);
	assert_contains(err.msg, "run: step 3: mount: ");
	assert_contains(err.msg, strerror(EPERM));
	assert_int_equal(err.code, EPERM);
}

static void test_error_truncation(void **state)
{
	struct al_error err = {0};
	char big[3 * AL_ERROR_MAX];

	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';

	al_error_set(&err, E2BIG, "%s", big);
	assert_int_equal(strlen(err.msg), AL_ERROR_MAX - 1);

	al_error_setsys(&err, E2BIG, "%s", big);
	assert_int_equal(strlen(err.msg), AL_ERROR_MAX - 1);

	al_error_set(&err, E2BIG, "tail");
	al_error_wrap(&err, "%s", big);
	assert_int_equal(strlen(err.msg), AL_ERROR_MAX - 1);
	assert_int_equal(err.msg[0], 'a');
	assert_int_equal(err.code, E2BIG);
}

/* al_errors_*: the list `airlock check` collects */

static void test_errors_entries(void **state)
{
	struct al_errors l = {0};
	struct al_error err = {0};

	assert_int_equal(al_errors_add(&l, 0, "p.json", "limits.memory", "bad size \"%s\"", "x"),
			 -EINVAL);
	assert_int_equal(al_errors_add(&l, ENOENT, NULL, NULL, "open %s", "/y"), -ENOENT);
	assert_int_equal(al_errors_add(&l, EINVAL, "--timeout soon", NULL, "expected seconds"),
			 -EINVAL);
	assert_int_equal(al_errors_add_syntax(&l, "p.json", 3, 14, "'}' expected"), -EINVAL);
	assert_int_equal(l.n, 4);
	assert_int_equal(al_errors_count(&l), 4);
	assert_string_equal(l.v[0].text, "p.json: limits.memory: bad size \"x\"");
	assert_string_equal(l.v[0].where, "p.json");
	assert_string_equal(l.v[0].path, "limits.memory");
	assert_string_equal(l.v[0].message, "bad size \"x\"");
	assert_int_equal(l.v[0].code, EINVAL);
	assert_int_equal(l.v[0].line, 0);
	assert_string_equal(l.v[1].text, "open /y");
	assert_null(l.v[1].where);
	assert_null(l.v[1].path);
	assert_string_equal(l.v[2].text, "--timeout soon: expected seconds");
	assert_null(l.v[2].path);
	assert_string_equal(l.v[3].text, "p.json:3:14: '}' expected");
	assert_int_equal(l.v[3].line, 3);
	assert_int_equal(l.v[3].column, 14);
	assert_string_equal(l.v[3].message, "'}' expected");
	/* The one-error view: the first from a start index. */
	assert_int_equal(al_errors_first(&l, 1, &err), -ENOENT);
	assert_string_equal(err.msg, "open /y");
	assert_int_equal(al_errors_first(&l, 4, &err), -EINVAL);
	assert_contains(err.msg, "no error");
	al_errors_clear(&l);
	assert_int_equal(l.n, 0);
	assert_null(l.v);
	assert_int_equal(al_errors_count(&l), 0);
}

/* Control characters from what a user wrote cannot split a line. */
static void test_errors_one_line(void **state)
{
	struct al_errors l = {0};

	al_errors_add(&l, EINVAL, "f\nx", "a\tb", "got \"%s\"", "1\n2\r\x1b[31m");
	struct al_error e = {.code = EINVAL, .msg = "two\nlines"};
	al_errors_add_error(&l, &e);
	al_errors_add_syntax(&l, "s.json", 1, 1, "bad\x7f");
	assert_string_equal(l.v[0].text, "f?x: a?b: got \"1?2??[31m\"");
	assert_string_equal(l.v[1].text, "two?lines");
	assert_string_equal(l.v[2].message, "bad?");
	for (size_t i = 0; i < l.n; i++)
		assert_null(strpbrk(l.v[i].text, "\n\r"));
	al_errors_clear(&l);
}

/* Past the cap errors are counted, not kept, and need no message. */
static void test_errors_cap(void **state)
{
	struct al_errors l = {0};
	struct al_error err = {0};

	for (int i = 0; i < AL_ERRORS_MAX; i++) {
		assert_false(al_errors_full(&l));
		al_errors_add(&l, EINVAL, "p.json", NULL, "error %d", i);
	}
	assert_true(al_errors_full(&l));
	for (int i = 0; i < 5000; i++)
		assert_int_equal(al_errors_add(&l, E2BIG, "p.json", NULL, "more %d", i), -E2BIG);
	assert_int_equal(al_errors_add_syntax(&l, "p.json", 1, 1, "x"), -EINVAL);
	assert_int_equal(l.n, AL_ERRORS_MAX);
	assert_int_equal(l.omitted, 5001);
	assert_int_equal(al_errors_count(&l), AL_ERRORS_MAX + 5001);
	assert_string_equal(l.v[AL_ERRORS_MAX - 1].text, "p.json: error 99");
	/* The first error after the cap has no text of its own. */
	assert_int_equal(al_errors_first(&l, AL_ERRORS_MAX, &err), -EINVAL);
	assert_contains(err.msg, "5001 more errors");
	al_errors_clear(&l);
	assert_int_equal(al_errors_count(&l), 0);
}

static void test_utf8_escape(void **state)
{
	(void)state;
	char out[32];

	/* Well-formed text passes as it is. */
	assert_false(al_utf8_escape(out, sizeof(out), "caf\xc3\xa9 \xf0\x9f\x98\x80"));
	assert_string_equal(out, "caf\xc3\xa9 \xf0\x9f\x98\x80");
	/* A stray byte, a cut sequence, an overlong '/', a surrogate. */
	assert_true(al_utf8_escape(out, sizeof(out), "/nope\xff"));
	assert_string_equal(out, "/nope\\xff");
	assert_true(al_utf8_escape(out, sizeof(out), "x\xc3"));
	assert_string_equal(out, "x\\xc3");
	assert_true(al_utf8_escape(out, sizeof(out), "\xc0\xaf"));
	assert_string_equal(out, "\\xc0\\xaf");
	assert_true(al_utf8_escape(out, sizeof(out), "\xed\xa0\x80"));
	assert_string_equal(out, "\\xed\\xa0\\x80");
	/* A copy cut short ends on a character's boundary: the 4-byte
	 * character does not fit in the 3 bytes left, so none of it is kept. */
	char small[6];
	assert_false(al_utf8_escape(small, sizeof(small), "ab\xf0\x9f\x98\x80"));
	assert_string_equal(small, "ab");
	assert_true(al_utf8_escape(small, sizeof(small), "a\xff\xff"));
	assert_string_equal(small, "a\\xff");
}

int main(void)
{
	/* clang-format off */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_size_valid),
		cmocka_unit_test(test_parse_size_invalid),
		cmocka_unit_test(test_parse_size_overflow),
		cmocka_unit_test(test_parse_duration_valid),
		cmocka_unit_test(test_parse_duration_invalid),
		cmocka_unit_test(test_parse_duration_rejects_hex),
		cmocka_unit_test(test_format_size),
		cmocka_unit_test(test_path_clean_absolute),
		cmocka_unit_test(test_path_is_under),
		cmocka_unit_test(test_env_name),
		cmocka_unit_test(test_hostname),
		cmocka_unit_test(test_strv),
		cmocka_unit_test(test_take_ptr),
		cmocka_unit_test(test_xasprintf),
		cmocka_unit_test(test_error_set),
		cmocka_unit_test(test_error_setsys),
		cmocka_unit_test(test_error_wrap),
		cmocka_unit_test(test_error_truncation),
		cmocka_unit_test(test_errors_entries),
		cmocka_unit_test(test_errors_one_line),
		cmocka_unit_test(test_errors_cap),
		cmocka_unit_test(test_utf8_escape),
	};

	/* clang-format on */

	return cmocka_run_group_tests(tests, NULL, NULL);
}
