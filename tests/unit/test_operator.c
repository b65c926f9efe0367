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

/* The daemon's section: identities mapped to profiles, the socket's group,
 * the pool's counts. */
#define SERVE(body)                                                                                \
	"{\"version\": 1, \"profiles\": {\"default\": {}, \"web\": {}, \"data\": {}}, "            \
	"\"serve\": {" body "}}"

static void test_serve_errors(void **state)
{
	(void)state;
	OP_BAD(SERVE("\"identities\": {\"user:1000\": {\"profiles\": [\"web\"]}}"), 1,
	       "serve.identities.user:1000", "\"uid:N\"");
	OP_BAD(SERVE("\"identities\": {\"uid:12x\": {\"profiles\": [\"web\"]}}"), 1,
	       "serve.identities.uid:12x", "an identity is");
	OP_BAD(SERVE("\"identities\": {\"uid:4294967295\": {\"profiles\": [\"web\"]}}"), 1,
	       "serve.identities.uid:4294967295", "an identity is");
	OP_BAD(SERVE("\"identities\": {\"group:a b\": {\"profiles\": [\"web\"]}}"), 1,
	       "serve.identities.group:a b", "an identity is");
	OP_BAD(SERVE("\"identities\": {\"uid:1\": {\"profiles\": [\"nope\"]}}"), 1,
	       "serve.identities.uid:1.profiles", "\"nope\": no such profile");
	OP_BAD(SERVE("\"identities\": {\"uid:1\": {\"profiles\": [\"web\"], \"default\": "
		     "\"data\"}}"),
	       1, "serve.identities.uid:1.default", "not one of this identity's profiles");
	OP_BAD(SERVE("\"identities\": {\"uid:1\": {}}"), 1, "serve.identities.uid:1.profiles",
	       "missing");
	OP_BAD(SERVE("\"identities\": {\"token:a\": {\"profiles\": [\"web\"], \"pool\": 1}}"), 1,
	       "serve.identities.token:a", "unknown key \"pool\"");
	OP_BAD(SERVE("\"pool\": {\"nope\": 1, \"web\": 5000, \"data\": -1}"), 3, "serve.pool.nope",
	       "no such profile", "serve.pool.web", "1 to 1024", "serve.pool.data", "1 to 1024");
	/* A pool's own task request: an object, no profile, secrets or
	 * command of its own, checked as a task policy; its count required. */
	OP_BAD(SERVE("\"pool\": {\"web\": {\"count\": 2, \"request\": {\"profile\": \"x\"}}, "
		     "\"data\": {\"request\": {}}, \"default\": {\"count\": 1, \"size\": 2}}"),
	       3, "serve.pool.web.request", "the profile is the pool's name",
	       "serve.pool.data.count", "is required", "serve.pool.default",
	       "unknown key \"size\"");
	OP_BAD(SERVE("\"pool\": {\"web\": {\"count\": 1, \"request\": {\"limits\": "
		     "{\"memory\": \"lots\"}}}, \"data\": {\"count\": 1, \"request\": [1]}}"),
	       2, "serve.pool.web.request", "not a task request", "serve.pool.data.request",
	       "a task request");
	OP_BAD(SERVE("\"socket_group\": \"-x\", \"sockets\": 1"), 2, "serve.socket_group",
	       "not a group's name", "serve", "unknown key \"sockets\"");
}

/* A pool with its own task request: kept as JSON text, version added. */
static void test_serve_pool_request(void **state)
{
	(void)state;
	_cleanup_(al_operator_freep) struct al_operator *op =
	    op_parse(SERVE("\"pool\": {\"web\": {\"count\": 2, \"request\": {\"limits\": "
			   "{\"memory\": \"128M\"}}}, \"data\": {\"count\": 1}}"));
	assert_non_null(op);
	assert_int_equal(al_op_serve_pool(op, "web"), 2);
	assert_int_equal(al_op_serve_pool(op, "data"), 1);
	assert_string_equal(op->serve.pool[0].request,
			    "{\"limits\":{\"memory\":\"128M\"},\"version\":1}");
	assert_null(op->serve.pool[1].request);
}

static char *joined(char **v)
{
	char *s = al_strv_join(v, ",");
	al_strv_free(v);
	return s;
}

static void test_serve_grants(void **state)
{
	(void)state;
	_cleanup_(al_operator_freep) struct al_operator *op = op_parse(
	    SERVE("\"socket_group\": \"airlock\", \"pool\": {\"web\": 3, \"data\": 0}, "
		  "\"identities\": {"
		  "\"uid:1000\": {\"profiles\": [\"web\"]}, "
		  "\"group:g7\": {\"profiles\": [\"data\", \"default\"]}, "
		  "\"group:g8\": {\"profiles\": [\"web\", \"data\"], \"default\": \"data\"}, "
		  "\"token:alice\": {\"profiles\": [\"data\", \"web\"]}}"));
	assert_non_null(op);
	assert_string_equal(op->serve.socket_group, "airlock");
	assert_int_equal(al_op_serve_pool(op, "web"), 3);
	assert_int_equal(al_op_serve_pool(op, "data"), 0);
	assert_int_equal(al_op_serve_pool(op, "default"), 0);
	assert_null(op->serve.pool[0].request);
	/* The loader resolves groups; here, by hand. */
	op->serve.ids[1].gid = 7;
	op->serve.ids[1].gid_known = true;
	op->serve.ids[2].gid = 8;
	op->serve.ids[2].gid_known = true;

	char *def = NULL, *s;
	gid_t g7[] = {100, 7}, g78[] = {8, 7}, none[] = {5};
	/* Its uid's entry: only "web", and its default. */
	struct al_identity u1000 = {.uid = 1000, .gids = none, .n_gids = 1};
	s = joined(al_op_serve_grants(op, &u1000, &def));
	assert_string_equal(s, "web");
	assert_string_equal(def, "web");
	free(s), free(def);
	/* Its uid's and a group's, merged; the default is its uid's own. */
	u1000.gids = g7;
	u1000.n_gids = 2;
	s = joined(al_op_serve_grants(op, &u1000, &def));
	assert_string_equal(s, "web,data,default");
	assert_string_equal(def, "web");
	free(s), free(def);
	/* Groups only: the first group's default ("default" when listed). */
	struct al_identity u5 = {.uid = 5, .gids = g78, .n_gids = 2};
	s = joined(al_op_serve_grants(op, &u5, &def));
	assert_string_equal(s, "data,default,web");
	assert_string_equal(def, "default");
	free(s), free(def);
	/* Nothing matches: none. A token name never matches a uid or group. */
	struct al_identity u6 = {.uid = 6, .gids = none, .n_gids = 1};
	assert_null(al_op_serve_grants(op, &u6, &def));
	assert_null(def);
	struct al_identity bob = {.token = "bob", .gids = g78, .n_gids = 2};
	assert_null(al_op_serve_grants(op, &bob, &def));
	/* A token's entry: its first listed profile when "default" is not. */
	struct al_identity alice = {.token = "alice"};
	s = joined(al_op_serve_grants(op, &alice, &def));
	assert_string_equal(s, "data,web");
	assert_string_equal(def, "data");
	free(s), free(def);
	/* uid 0 with no entry: every profile, "default" its default; a token
	 * is never uid 0. */
	struct al_identity root = {.uid = 0};
	s = joined(al_op_serve_grants(op, &root, &def));
	assert_string_equal(s, "default,web,data");
	assert_string_equal(def, "default");
	free(s), free(def);
	struct al_identity tok0 = {.token = "root", .uid = 0};
	assert_null(al_op_serve_grants(op, &tok0, &def));
	char buf[80];
	assert_string_equal(al_identity_text(&alice, buf, sizeof(buf)), "token:alice");
	assert_string_equal(al_identity_text(&u1000, buf, sizeof(buf)), "uid:1000");
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
		cmocka_unit_test(test_serve_errors),
		cmocka_unit_test(test_serve_grants),
	    cmocka_unit_test(test_serve_pool_request),
	};
	/* clang-format on */

	return cmocka_run_group_tests(tests, NULL, NULL);
}
