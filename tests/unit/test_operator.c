/* policy/operator.h: the operator policy's parser. Malformed files give
 * errors naming the file and the JSON path, every one at once; what a
 * profile leaves out gets the defaults that keep a run safe. */
#include "unit.h"

#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/error.h"
#include "core/util.h"
#include "policy/engine.h"
#include "policy/operator.h"
#include "policy/plan.h"
#include "policy/policy.h"
#include "engine_util.h"

/* The operator file's parser */

/* Parse json expecting failure: every (path, text) in want[] among the
 * errors, and exactly n errors. */
static void op_bad(const char *json, size_t n, const char *const *want)
{
	_cleanup_(al_errors_clear) struct al_errors errs = {0};
	struct al_operator *op = NULL;
	int r = al_operator_parse("op.json", json, strlen(json), &op, &errs);

	assert_true(r < 0);
	assert_null(op);
	for (size_t i = 0; want[i]; i += 2) {
		bool found = false;
		for (size_t k = 0; k < errs.n && !found; k++)
			found = errs.v[k].path && strcmp(errs.v[k].path, want[i]) == 0 &&
				strstr(errs.v[k].text, want[i + 1]) &&
				strncmp(errs.v[k].text, "op.json: ", 9) == 0;
		if (!found) {
			for (size_t k = 0; k < errs.n; k++)
				print_message("  error: %s\n", errs.v[k].text);
			fail_msg("no error at %s with \"%s\"", want[i], want[i + 1]);
		}
	}
	if (errs.n != n) {
		for (size_t k = 0; k < errs.n; k++)
			print_message("  error: %s\n", errs.v[k].text);
		fail_msg("%zu errors, expected %zu", errs.n, n);
	}
}

#define OP_BAD(json, n, ...) op_bad(json, n, (const char *const[]){__VA_ARGS__, NULL})

static void test_parse_errors(void **state)
{
	OP_BAD(PROFILE("\"limits\": {\"memroy\": {\"max\": \"1G\"}}"), 1, "profiles.default.limits",
	       "unknown key \"memroy\"");
	OP_BAD(PROFILE("\"limits\": {\"memory\": {\"max\": \"12Q\"}}"), 1,
	       "profiles.default.limits.memory.max", "");
	OP_BAD(PROFILE("\"limits\": {\"memory\": {\"max\": \"1G\", \"default\": \"2G\"}}"), 1,
	       "profiles.default.limits.memory", "default 2G is over the ceiling 1G");
	OP_BAD(PROFILE("\"limits\": {\"memory\": {\"max\": \"1M\"}}"), 1,
	       "profiles.default.limits.memory", "below the least");
	OP_BAD(PROFILE("\"backend\": {\"allowed\": [\"native\", \"docker\"]}"), 1,
	       "profiles.default.backend.allowed[1]",
	       "backend \"docker\" is not one this airlock has (valid: native, gvisor, microvm)");
	/* A build with the native layer alone refuses the others by name. */
	static const char *const native_only[] = {"native", NULL};
	al_backends_built(native_only);
	OP_BAD(PROFILE("\"backend\": {\"allowed\": [\"native\", \"gvisor\"]}"), 1,
	       "profiles.default.backend.allowed[1]",
	       "backend \"gvisor\" is not one this airlock has (valid: native)");
	OP_BAD(PROFILE("\"backend\": {\"default\": \"microvm\"}"), 1,
	       "profiles.default.backend.default",
	       "backend \"microvm\" is not one this airlock has (valid: native)");
	static const char *const layers[] = {"native", "gvisor", "microvm", NULL};
	al_backends_built(layers);
	OP_BAD(PROFILE("\"backend\": {\"allowed\": [\"gvisor\"], \"default\": \"native\"}"), 1,
	       "profiles.default.backend.default", "not in");
	OP_BAD(PROFILE("\"backend\": {\"minimum\": \"gvisor\", \"default\": \"native\"}"), 1,
	       "profiles.default.backend.default", "below the minimum");
	OP_BAD(PROFILE("\"network\": {\"allow\": [\"ok.example.com\", \"http://x.example.com\"]}"),
	       1, "profiles.default.network.allow[1]", "not a URL");
	OP_BAD(PROFILE("\"network\": {\"never\": [\"10.0.0.0/33\"]}"), 1,
	       "profiles.default.network.never[0]", "");
	OP_BAD(PROFILE("\"network\": {\"resolvers\": [\"dns.example.com\"]}"), 1,
	       "profiles.default.network.resolvers[0]", "IP address");
	OP_BAD(PROFILE("\"filesystem\": {\"ro\": [\"/srv\", \"srv/data\"]}"), 1,
	       "profiles.default.filesystem.ro[1]", "clean absolute path");
	OP_BAD(PROFILE("\"filesystem\": {\"never\": [\"/srv/../etc\"]}"), 1,
	       "profiles.default.filesystem.never[0]", "clean absolute path");
	OP_BAD(PROFILE("\"env\": {\"allow\": [\"A=B\"]}"), 1, "profiles.default.env.allow[0]",
	       "not a name pattern");
	OP_BAD(PROFILE("\"best_effort\": [\"seccomp\"]"), 1, "profiles.default.best_effort[0]",
	       "\"seccomp\"");
	OP_BAD("{\"version\": 1}", 1, "profiles", "missing");
	OP_BAD("{\"version\": 1, \"profiles\": {}}", 1, "profiles", "no profile");
	OP_BAD("{\"version\": 2, \"profiles\": {\"default\": {}}}", 1, "version", "unsupported");
	OP_BAD("{\"version\": 1, \"profiles\": {\"a b\": {}}}", 1, "profiles.a b",
	       "a profile's name");
	OP_BAD("{\"version\": 1, \"profiles\": {\"default\": {}}, \"decider\": {\"url\": "
	       "\"http://10.0.0.1:8181\", \"run\": \"/v1/data/airlock/run\"}}",
	       1, "decider.url", "loopback");
}

/* Every error at once, each with its JSON path. */
static void test_parse_every_error(void **state)
{
	OP_BAD("{\"version\": 1, \"extra\": 1, \"profiles\": {\"default\": {\"limits\": "
	       "{\"memory\": {\"max\": \"1G\", \"default\": \"2G\"}, \"pids\": {\"max\": "
	       "\"many\"}}, \"backend\": {\"allowed\": [\"vm\"]}, \"network\": {\"allow\": "
	       "[\"a b\"]}, \"filesystem\": {\"rw\": [\"data\"]}}, \"ci\": {\"env\": {\"pass\": "
	       "[\"$X\"]}}}}",
	       7, "(top level)", "unknown key \"extra\"", "profiles.default.limits.memory",
	       "over the ceiling", "profiles.default.limits.pids.max", "",
	       "profiles.default.backend.allowed[0]", "backend \"vm\" is not one",
	       "profiles.default.network.allow[0]", "", "profiles.default.filesystem.rw[0]",
	       "clean absolute", "profiles.ci.env.pass[0]", "not a name pattern");
}

static void test_parse_syntax(void **state)
{
	_cleanup_(al_errors_clear) struct al_errors errs = {0};
	struct al_operator *op = NULL;
	static const char text[] = "{\"version\": 1,\n \"profiles\": {,}}";

	assert_true(al_operator_parse("op.json", text, strlen(text), &op, &errs) < 0);
	assert_int_equal(errs.n, 1);
	assert_int_equal(errs.v[0].line, 2);
	assert_contains(errs.v[0].text, "op.json:2:");
}

/* What a profile leaves out: the defaults that keep a run safe. */
static void test_parse_defaults(void **state)
{
	_cleanup_(al_operator_freep) struct al_operator *op = op_parse(PROFILE(""));
	const struct al_op_profile *pr = al_operator_profile(op, "default");
	struct in6_addr md;

	assert_non_null(pr);
	assert_null(al_operator_profile(op, "other"));
	assert_int_equal(al_allow_count(pr->allow), 0);
	assert_int_equal(inet_pton(AF_INET6, "::ffff:169.254.169.254", &md), 1);
	assert_true(al_allow_match_addr_any_port(pr->never_net, &md, NULL));
	assert_string_equal(pr->env_never[0], "LD_*");
	assert_null(pr->backends);
	assert_int_equal(pr->best_effort, 0);
}

/* A profile's own never lists add to airlock's defaults (an operator who
 * names one more must not lose LD_PRELOAD or 169.254.0.0/16); only
 * never_defaults: false drops them. */
static void test_never_adds_to_defaults(void **state)
{
	struct in6_addr md, ten, nat64;
	assert_int_equal(inet_pton(AF_INET6, "::ffff:169.254.169.254", &md), 1);
	assert_int_equal(inet_pton(AF_INET6, "::ffff:10.1.2.3", &ten), 1);
	assert_int_equal(inet_pton(AF_INET6, "64:ff9b::a9fe:a9fe", &nat64), 1);

	_cleanup_(al_operator_freep) struct al_operator *op =
	    op_parse(PROFILE("\"env\": {\"never\": [\"APP_SECRET\"]}, \"network\": {\"never\": "
			     "[\"10.0.0.0/8\"]}"));
	const struct al_op_profile *pr = al_operator_profile(op, "default");
	assert_string_equal(pr->env_never[0], "LD_*");
	assert_string_equal(pr->env_never[pr->n_env_never_default], "APP_SECRET");
	assert_true(al_allow_match_addr_any_port(pr->never_net, &md, NULL));
	assert_true(al_allow_match_addr_any_port(pr->never_net, &ten, NULL));
	/* NAT64's way to 169.254.169.254 is the same address. */
	assert_false(al_allow_match_addr_any_port(pr->never_net, &nat64, NULL));
	assert_true(al_allow_match_never(pr->never_net, &nat64, 80, NULL));

	_cleanup_(al_operator_freep) struct al_operator *bare =
	    op_parse(PROFILE("\"env\": {\"never\": [\"APP_SECRET\"], \"never_defaults\": false}, "
			     "\"network\": {\"never_defaults\": false}"));
	pr = al_operator_profile(bare, "default");
	assert_string_equal(pr->env_never[0], "APP_SECRET");
	assert_null(pr->env_never[1]);
	assert_false(al_allow_match_addr_any_port(pr->never_net, &md, NULL));
}

/* Bounds that make no sense are errors, never a bound that does
 * something else: a name or a port in network.hosts, a minimum above
 * every allowed backend, bounds that refuse the backend an unnamed task
 * gets, an unbalanced pattern. */
static void test_parse_inconsistent(void **state)
{
	OP_BAD(PROFILE("\"network\": {\"hosts\": [\"db.internal\"]}"), 1,
	       "profiles.default.network.hosts[0]", "is a name");
	OP_BAD(PROFILE("\"network\": {\"hosts\": [\"10.0.0.1:5432\"]}"), 1,
	       "profiles.default.network.hosts[0]", "without a port");
	OP_BAD(PROFILE("\"backend\": {\"allowed\": [\"native\"], \"minimum\": \"gvisor\"}"), 1,
	       "profiles.default.backend", "above every allowed backend");
	OP_BAD(PROFILE("\"backend\": {\"allowed\": [\"gvisor\"]}"), 1, "profiles.default.backend",
	       "give \"default\"");
	OP_BAD(PROFILE("\"env\": {\"allow\": [\"APP_[\"]}"), 1, "profiles.default.env.allow[0]",
	       "not a name pattern");
	/* An error in network does not hide one in its limits. */
	OP_BAD(PROFILE("\"network\": {\"allow\": [\"bad rule!\"], \"limits\": {\"connections\": "
		       "{\"max\": 0}}}"),
	       2, "profiles.default.network.allow[0]", "",
	       "profiles.default.network.limits.connections.max", "");
	_cleanup_(al_operator_freep) struct al_operator *op =
	    op_parse(PROFILE("\"network\": {\"hosts\": [\"127.0.0.1\", \"10.1.0.0/16\", \"::1\"]}, "
			     "\"backend\": {\"allowed\": [\"gvisor\"], \"default\": \"gvisor\"}"));
	assert_non_null(op);
}

int main(void)
{
	/* The layers the design has, as a build with them would: choosing among
	 * them is the engine's, whatever this build holds. */
	static const char *const layers[] = {"native", "gvisor", "microvm", NULL};
	al_backends_built(layers);
	/* clang-format off */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_errors),
		cmocka_unit_test(test_parse_every_error),
		cmocka_unit_test(test_parse_syntax),
		cmocka_unit_test(test_parse_defaults),
		cmocka_unit_test(test_never_adds_to_defaults),
		cmocka_unit_test(test_parse_inconsistent),
	};
	/* clang-format on */

	return cmocka_run_group_tests(tests, NULL, NULL);
}
