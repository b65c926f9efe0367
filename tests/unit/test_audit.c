/* audit/audit.h: text that goes into the audit stream and the result
 * record. Pure functions, no root needed. */
#include "unit.h"

#include <stdlib.h>
#include <string.h>

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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_json_text),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
