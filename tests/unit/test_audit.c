/* audit/audit.h: text that goes into the audit stream and the result
 * record. Pure functions, no root needed. */
#include "unit.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "audit/audit.h"

static void expect_text(const char *in, const char *want)
{
	json_t *j = al_json_text(in);

	assert_non_null(j);
	assert_true(json_is_string(j));
	if (strcmp(json_string_value(j), want) != 0)
		fail_msg("al_json_text gave \"%s\", expected \"%s\"", json_string_value(j), want);
	json_decref(j);
}

/* Valid UTF-8 passes unchanged; every byte that is not part of a valid
 * sequence becomes U+FFFD, so nothing is dropped and nothing else moves. */
static void test_json_text(void **state)
{
	(void)state;
	json_t *j = al_json_text(NULL);
	assert_true(json_is_null(j));
	json_decref(j);
	expect_text("", "");
	expect_text("/bin/echo", "/bin/echo");
	expect_text("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
		    "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
	expect_text("\xff", "\xef\xbf\xbd");
	expect_text("a\xffz", "a\xef\xbf\xbdz");
	/* a character cut at the end (a truncated message) */
	expect_text("ab\xc3", "ab\xef\xbf\xbd");
	expect_text("ab\xe2\x82", "ab\xef\xbf\xbd\xef\xbf\xbd");
	/* overlong forms, surrogates, beyond U+10FFFF */
	expect_text("\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd");
	expect_text("\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
	expect_text("\xf4\x90\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
}

/* al_audit_format_time's own calendar against gmtime_r's: leap days,
 * century years (1900 and 2100 are not leap years, 2000 is), the first
 * and last second of a day, before 1970, and a spread of times between. */
static void test_format_time(void **state)
{
	static const long long fixed[] = {0,	     -1,	 951782400,  951868799,
					  951868800, 4107456000, 4107542400, -2203891200,
					  68169600,  1767225599, 1798761600, 253402300799};
	char got[48], want[48], base[32];
	struct tm tm;

	(void)state;
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]) + 2000; i++) {
		long long s = i < sizeof(fixed) / sizeof(fixed[0])
				  ? fixed[i]
				  : (long long)(i * 1234567891ULL % 8000000000ULL) - 1000000000;
		time_t t = (time_t)s;
		assert_non_null(gmtime_r(&t, &tm));
		strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
		snprintf(want, sizeof(want), "%s.%03dZ", base, 7);
		al_audit_format_time(s, 7999999, got, sizeof(got));
		if (strcmp(got, want) != 0)
			fail_msg("%lld: al_audit_format_time gave %s, gmtime_r %s", s, got, want);
	}
	al_audit_format_time(951782400, 0, got, sizeof(got));
	assert_string_equal(got, "2000-02-29T00:00:00.000Z");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_json_text),
	    cmocka_unit_test(test_format_time),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
