/* net/reqrule.h: path patterns, path normalisation, matching, and one
 * host's request rule. */
#include "unit.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "net/reqrule.h"

static void expect_pattern_ok(const char *p)
{
	struct al_error err = {0};

	if (al_reqrule_pattern_check(p, &err) != 0)
		fail_msg("pattern \"%s\" refused: %s", p, err.msg);
}

static void expect_pattern_bad(const char *p, const char *why)
{
	struct al_error err = {0};

	if (al_reqrule_pattern_check(p, &err) != -EINVAL)
		fail_msg("pattern \"%s\" accepted", p);
	assert_int_equal(err.code, EINVAL);
	assert_contains(err.msg, "path pattern");
	assert_contains(err.msg, why);
}

static void test_patterns(void **state)
{
	char longer[AL_REQRULE_PATTERN_MAX + 2];

	expect_pattern_ok("/");
	expect_pattern_ok("/health");
	expect_pattern_ok("/v1/analysis/*");
	expect_pattern_ok("/v1/*/items/*.json");
	expect_pattern_ok("/v1/**");
	expect_pattern_ok("/**");
	expect_pattern_ok("/a/");
	expect_pattern_ok("/a/b*c*d");
	expect_pattern_ok("/caf%C3%A9/x");
	expect_pattern_ok("/a:b@c!$&'()+,;=/~x-y_z.w");
	expect_pattern_ok("/...");	   /* three dots is a name, not a dot segment */
	expect_pattern_ok("/.well-known"); /* nor is a leading dot */

	expect_pattern_bad("", "does not start with '/'");
	expect_pattern_bad("v1/x", "does not start with '/'");
	expect_pattern_bad("/a?b=1", "the query is not matched");
	expect_pattern_bad("/a#frag", "fragment");
	expect_pattern_bad("/a\\b", "backslash");
	expect_pattern_bad("/a b", "space, control or non-ASCII");
	expect_pattern_bad("/caf\xc3\xa9", "non-ASCII");
	expect_pattern_bad("/a//b", "empty segment");
	expect_pattern_bad("//", "empty segment");
	expect_pattern_bad("/a/./b", "dot segment");
	expect_pattern_bad("/a/..", "dot segment");
	expect_pattern_bad("/a/..;x/b", "dot segment");
	expect_pattern_bad("/a/**/b", "\"**\"");
	expect_pattern_bad("/a**", "\"**\"");
	expect_pattern_bad("/a/x**", "\"**\"");
	expect_pattern_bad("/a/***", "\"**\"");
	expect_pattern_bad("/a%2", "two hex digits");
	expect_pattern_bad("/a%zz", "two hex digits");
	expect_pattern_bad("/a%41", "write it unencoded");
	expect_pattern_bad("/a%2e%2e", "write it unencoded");
	expect_pattern_bad("/a%2Fb", "can never match");
	expect_pattern_bad("/a%5Cb", "can never match");
	expect_pattern_bad("/a%00", "can never match");
	expect_pattern_bad("/a%3a", "upper case");
	memset(longer, 'a', sizeof(longer) - 1);
	longer[0] = '/';
	longer[sizeof(longer) - 1] = '\0';
	expect_pattern_bad(longer, "longer than");

	/* The pattern is quoted when it is printable, and the place named. */
	{
		struct al_error err = {0};

		assert_int_equal(al_reqrule_pattern_check("/a//b", &err), -EINVAL);
		assert_string_equal(err.msg, "path pattern \"/a//b\": an empty segment (\"//\") at "
					     "character 3");
		assert_int_equal(al_reqrule_pattern_check("/a\x01", &err), -EINVAL);
		assert_not_contains(err.msg, "\x01");
		assert_int_equal(al_reqrule_pattern_check(NULL, &err), -EINVAL);
	}
}

static void test_methods(void **state)
{
	struct al_error err = {0};

	assert_int_equal(al_reqrule_method_check("GET", &err), 0);
	assert_int_equal(al_reqrule_method_check("M-SEARCH", &err), 0);
	assert_int_equal(al_reqrule_method_check("", &err), -EINVAL);
	assert_int_equal(al_reqrule_method_check(NULL, &err), -EINVAL);
	assert_int_equal(al_reqrule_method_check("GE T", &err), -EINVAL);
	assert_contains(err.msg, "token");
	assert_int_equal(al_reqrule_method_check("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", &err),
			 -EINVAL);
	assert_contains(err.msg, "longer than 32");
}

/* Normalise s; the result, or NULL with the reason in why. */
static const char *norm(const char *s, const char **why)
{
	static char out[256];
	static struct al_error err;
	int r;

	memset(&err, 0, sizeof(err));
	r = al_reqrule_path_normalize(s, strlen(s), out, sizeof(out), &err);
	*why = err.msg;
	if (r < 0) {
		assert_int_equal(r, -EINVAL);
		return NULL;
	}
	assert_int_equal(r, strlen(out));
	return out;
}

static void expect_norm(const char *in, const char *want)
{
	const char *why, *got = norm(in, &why);

	if (!got)
		fail_msg("\"%s\" refused: %s", in, why);
	assert_string_equal(got, want);
}

static void expect_refused(const char *in, const char *reason)
{
	const char *why, *got = norm(in, &why);

	if (got)
		fail_msg("\"%s\" normalised to \"%s\", expected a refusal", in, got);
	assert_contains(why, reason);
	/* The reason never quotes the sandbox's path. */
	if (strlen(in) > 3)
		assert_not_contains(why, in);
}

static void test_normalize(void **state)
{
	char small[4];

	expect_norm("/", "/");
	expect_norm("", "/");
	expect_norm("?a=1", "/");
	expect_norm("/v1/x?q=/../..", "/v1/x");
	expect_norm("/a/b/", "/a/b/");
	expect_norm("/%61%62%43%2d%2E%5f%7E%30", "/abC-._~0");
	expect_norm("/a%2e%2eb", "/a..b"); /* not a dot segment: more than the dots */
	expect_norm("/caf%c3%a9", "/caf%C3%A9");
	expect_norm("/a%20b%3a", "/a%20b%3A");
	expect_norm("/a%25b", "/a%25b");
	expect_norm("/...", "/...");
	expect_norm("/.x/x.", "/.x/x.");
	expect_norm("/a;b=c/d", "/a;b=c/d");

	expect_refused("a/b", "does not start with '/'");
	expect_refused("/.", "dot segment");
	expect_refused("/..", "dot segment");
	expect_refused("/a/./b", "dot segment");
	expect_refused("/a/../b", "dot segment");
	expect_refused("/a/%2e/b", "dot segment");
	expect_refused("/a/%2E%2e/b", "dot segment");
	expect_refused("/a/.%2e", "dot segment");
	expect_refused("/a/..;jsessionid=1/b", "dot segment");
	expect_refused("/a/..%3Bx/b", "dot segment");
	expect_refused("/a/..%3bx/b", "dot segment");
	expect_refused("/a%2Fb", "encoded '/'");
	expect_refused("/a%2fb", "encoded '/'");
	expect_refused("/a%5Cb", "encoded '\\'");
	expect_refused("/a%5cb", "encoded '\\'");
	expect_refused("/a\\b", "backslash");
	expect_refused("/a//b", "empty segment");
	expect_refused("//a", "empty segment");
	expect_refused("/a%00b", "encoded control");
	expect_refused("/a%0Ab", "encoded control");
	expect_refused("/a%7f", "encoded control");
	expect_refused("/a\tb", "control");
	expect_refused("/a b", "space");
	expect_refused("/a\x7f", "control");
	expect_refused("/caf\xc3\xa9", "non-ASCII");
	expect_refused("/a#b", "fragment");
	expect_refused("/a%", "malformed percent");
	expect_refused("/a%4", "malformed percent");
	expect_refused("/a%4?x", "malformed percent");
	expect_refused("/a%g0", "malformed percent");
	expect_refused("/a%0g", "malformed percent");

	/* Percent-encoded bytes past ASCII: well-formed UTF-8 only (RFC 3629,
	 * Unicode table 3-7), each sequence's bounds at both ends. */
	expect_norm("/%c2%80%df%bf", "/%C2%80%DF%BF");
	expect_norm("/%e0%a0%80%ed%9f%bf%ee%80%80", "/%E0%A0%80%ED%9F%BF%EE%80%80");
	expect_norm("/%f0%90%80%80%f4%8f%bf%bf", "/%F0%90%80%80%F4%8F%BF%BF");
	expect_norm("/%e2%82%ac/x", "/%E2%82%AC/x");
	expect_refused("/%C0%AE%C0%AE/etc", "overlong");
	expect_refused("/%c1%bf", "overlong");
	expect_refused("/%e0%80%ae", "overlong");
	expect_refused("/%e0%9f%bf", "overlong");
	expect_refused("/%f0%80%80%ae", "overlong");
	expect_refused("/%f0%8f%bf%bf", "overlong");
	expect_refused("/%ed%a0%80", "surrogate");
	expect_refused("/%ed%bf%bf", "surrogate");
	expect_refused("/%f4%90%80%80", "past U+10FFFF");
	expect_refused("/%f5%80%80%80", "past U+10FFFF");
	expect_refused("/%ff", "past U+10FFFF");
	expect_refused("/%80", "continuation byte");
	expect_refused("/a%bf", "continuation byte");
	expect_refused("/%c3", "truncated");
	expect_refused("/%c3/", "truncated");
	expect_refused("/%c3a", "truncated");
	expect_refused("/%e2%82", "truncated");
	expect_refused("/%e2%82?%ac", "truncated");
	expect_refused("/%f0%90%80x", "truncated");
	expect_refused("/%c3%c3%a9", "truncated");
	expect_refused("/%c3%", "truncated");

	/* An embedded NUL is a control character, not an end. */
	{
		struct al_error err = {0};
		char out[32];

		assert_int_equal(al_reqrule_path_normalize("/a\0b", 4, out, sizeof(out), &err),
				 -EINVAL);
		assert_contains(err.msg, "control");
		assert_int_equal(
		    al_reqrule_path_normalize("/abcdef", 7, small, sizeof(small), &err), -ENOSPC);
		assert_int_equal(al_reqrule_path_normalize("/ab", 3, small, sizeof(small), &err),
				 3);
		assert_string_equal(small, "/ab");
		/* Only len bytes are read. */
		assert_int_equal(al_reqrule_path_normalize("/ab/../x", 3, out, sizeof(out), &err),
				 3);
	}
}

static void expect_match(const char *pattern, const char *path, bool want)
{
	struct al_error err = {0};

	assert_int_equal(al_reqrule_pattern_check(pattern, &err), 0);
	if (al_reqrule_path_match(pattern, path, strlen(path)) != want)
		fail_msg("\"%s\" against \"%s\": expected %s", pattern, path,
			 want ? "a match" : "no match");
}

static void test_match(void **state)
{
	expect_match("/health", "/health", true);
	expect_match("/health", "/health/", false);
	expect_match("/health", "/healthz", false);
	expect_match("/health", "/Health", false); /* case-sensitive */
	expect_match("/", "/", true);
	expect_match("/", "/a", false);

	expect_match("/v1/analysis/*", "/v1/analysis/run", true);
	expect_match("/v1/analysis/*", "/v1/analysis/", false); /* '*' is one or more */
	expect_match("/v1/analysis/*", "/v1/analysis", false);
	expect_match("/v1/analysis/*", "/v1/analysis/a/b", false); /* within one segment */
	expect_match("/v1/*/items", "/v1/x/items", true);
	expect_match("/v1/*/items", "/v1//items", false);
	expect_match("/v1/*.json", "/v1/a.json", true);
	expect_match("/v1/*.json", "/v1/.json", false);
	expect_match("/v1/*.json", "/v1/a.json.txt", false);
	expect_match("/v1/a*b*c", "/v1/aXbYc", true);
	expect_match("/v1/a*b*c", "/v1/abbc", false); /* each '*' needs a character */
	expect_match("/v1/a*b*c", "/v1/aXbbYbc", true);
	expect_match("/v1/a*b*c", "/v1/aXbYcZ", false);
	expect_match("/*", "/x", true);
	expect_match("/*", "/", false);
	expect_match("/*/", "/x/", true);

	expect_match("/v1/**", "/v1", true);
	expect_match("/v1/**", "/v1/", true);
	expect_match("/v1/**", "/v1/a/b/c", true);
	expect_match("/v1/**", "/v1x", false);
	expect_match("/v1/**", "/v2/a", false);
	expect_match("/**", "/", true);
	expect_match("/**", "/anything/at/all", true);
	expect_match("/v1/*/**", "/v1/x", true);
	expect_match("/v1/*/**", "/v1/x/y/z", true);
	expect_match("/v1/*/**", "/v1", false);

	expect_match("/caf%C3%A9", "/caf%C3%A9", true);

	/* Robust against what was never checked. */
	assert_false(al_reqrule_path_match(NULL, "/", 1));
	assert_false(al_reqrule_path_match("/", NULL, 0));
	assert_false(al_reqrule_path_match("x", "/", 1));
	assert_false(al_reqrule_path_match("/a", "a", 1));
}

static struct al_reqrule rule(const char *const *methods, const char *const *paths,
			      uint64_t max_body)
{
	struct al_reqrule r = {.max_body = max_body};

	for (; methods && *methods; methods++)
		r.n_methods++;
	for (; paths && *paths; paths++)
		r.n_paths++;
	return r;
}

static void fill(struct al_reqrule *r, const char *const *methods, const char *const *paths)
{
	r->methods = xcalloc(r->n_methods + 1, sizeof(char *));
	r->paths = xcalloc(r->n_paths + 1, sizeof(char *));
	for (size_t i = 0; i < r->n_methods; i++)
		r->methods[i] = xstrdup(methods[i]);
	for (size_t i = 0; i < r->n_paths; i++)
		r->paths[i] = xstrdup(paths[i]);
}

static void test_check(void **state)
{
	static const char *const methods[] = {"GET", "POST", NULL};
	static const char *const paths[] = {"/v1/analysis/*", "/health", NULL};
	struct al_reqrule r = rule(methods, paths, 100);
	const char *why = "unset";
	char *text;

	fill(&r, methods, paths);
	assert_int_equal(al_reqrule_check(&r, "GET", 3, "/health", 7, -1, &why), 0);
	assert_null(why);
	assert_int_equal(al_reqrule_check(&r, "POST", 4, "/v1/analysis/x", 14, 100, &why), 0);
	assert_int_equal(al_reqrule_check(&r, "get", 3, "/health", 7, -1, &why), 403);
	assert_string_equal(why, "method not allowed");
	assert_int_equal(al_reqrule_check(&r, "GETX", 3, "/health", 7, -1, &why), 0);
	assert_int_equal(al_reqrule_check(&r, "DELETE", 6, "/health", 7, -1, &why), 403);
	assert_int_equal(al_reqrule_check(&r, "GET", 3, "/v1/other", 9, -1, &why), 403);
	assert_string_equal(why, "path not allowed");
	assert_int_equal(al_reqrule_check(&r, "POST", 4, "/health", 7, 101, &why), 413);
	assert_string_equal(why, "body larger than max_body");
	assert_int_equal(al_reqrule_check(&r, "POST", 4, "/health", 7, 101, NULL), 413);

	text = al_reqrule_text(&r, "analysis.internal:443");
	assert_string_equal(text, "analysis.internal:443 methods=GET,POST "
				  "paths=/v1/analysis/*,/health max_body=100");
	free(text);
	al_reqrule_clear(&r);
	assert_null(r.methods);
	assert_int_equal(r.n_paths, 0);

	/* Empty lists allow everything. */
	r = rule(NULL, NULL, 0);
	assert_int_equal(al_reqrule_check(&r, "PATCH", 5, "/x/y", 4, INT64_MAX, &why), 0);
	text = al_reqrule_text(&r, NULL);
	assert_string_equal(text, "");
	free(text);
	r = rule(methods, NULL, 0);
	fill(&r, methods, NULL);
	text = al_reqrule_text(&r, NULL);
	assert_string_equal(text, "methods=GET,POST");
	free(text);
	al_reqrule_clear(&r);
}

int main(void)
{
	/* clang-format off */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_patterns),
		cmocka_unit_test(test_methods),
		cmocka_unit_test(test_normalize),
		cmocka_unit_test(test_match),
		cmocka_unit_test(test_check),
	};
	/* clang-format on */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
