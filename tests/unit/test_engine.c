/* policy/engine.h, al_engine_request(): a task held to an operator
 * policy's profile. Each bound in and out of its range (limits, backend,
 * best-effort protections, env, egress rules, hosts, resolvers), the
 * profile's choice, and every reason at once. The host paths are
 * test_engine_paths.c's, the decision as data and the decider's answer
 * test_engine_out.c's, the operator file's parser test_operator.c's.
 * Pure: no root, no network. */
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

/* limits */

static const char op_memory[] =
    PROFILE("\"limits\": {\"memory\": {\"max\": \"1G\", \"default\": \"256M\"}}");

static void memory_over(const struct al_decision *d, const struct al_policy *task)
{
	assert_int_equal(d->n_refused, 1);
	assert_refused(d, "task.json: limits.memory", "2G", "profiles.default.limits.memory.max");
	assert_string_equal(d->refused[0].bound, "1G");
}

static void memory_at_ceiling(const struct al_decision *d, const struct al_policy *task)
{
	assert_int_equal(task->memory_bytes, 1ull << 30);
	assert_int_equal(decision(d, "limits.memory")->from, AL_FROM_TASK);
}

static void memory_default(const struct al_decision *d, const struct al_policy *task)
{
	assert_int_equal(task->memory_bytes, 256ull << 20);
	assert_int_equal(decision(d, "limits.memory")->from, AL_FROM_DEFAULT);
	assert_contains(decision(d, "limits.memory")->bound,
			"op.json: profiles.default.limits.memory.default");
}

static void test_limit_memory(void **state)
{
	run_case(op_memory, "{\"version\": 1, \"limits\": {\"memory\": \"2G\"}}", -EPERM,
		 memory_over);
	run_case(op_memory, "{\"version\": 1, \"limits\": {\"memory\": \"1G\"}}", 0,
		 memory_at_ceiling);
	run_case(op_memory, "{\"version\": 1}", 0, memory_default);
}

/* A flag is named as the flag, not as the file's JSON path. */
static void test_limit_flag_named(void **state)
{
	_cleanup_(al_operator_freep) struct al_operator *op = op_parse(op_memory);
	_cleanup_(al_policy_freep) struct al_policy *task = al_policy_new("command line");
	_cleanup_(al_policy_freep) struct al_policy *flags = al_policy_new("command line");
	struct al_decision d = {0};

	task->memory_bytes = flags->memory_bytes = 4ull << 30;
	assert_int_equal(al_engine_request(op, task, flags, &d), -EPERM);
	assert_refused(&d, "--memory", "4G", "profiles.default.limits.memory.max");
	al_decision_clear(&d);
}

static void ceiling_taken(const struct al_decision *d, const struct al_policy *task)
{
	assert_int_equal(task->memory_bytes, 128ull << 20);
	assert_int_equal(decision(d, "limits.memory")->from, AL_FROM_CEILING);
	assert_int_equal(task->pids, 16);
	assert_int_equal(task->timeout_ms, 10000);
}

static void builtin_kept(const struct al_decision *d, const struct al_policy *task)
{
	/* airlock's own 512M is within the ceiling: made explicit, so that
	 * the bound is enforced (a cgroup is required) and a decider lowers
	 * it from what is in force. */
	assert_int_equal(task->memory_bytes, 512ull << 20);
	assert_int_equal(decision(d, "limits.memory")->from, AL_FROM_BUILTIN);
	assert_string_equal(decision(d, "limits.memory")->value, "512M");
}

/* No default and a ceiling below airlock's own default: the ceiling. */
static void test_limit_ceiling_below_builtin(void **state)
{
	run_case(PROFILE("\"limits\": {\"memory\": {\"max\": \"128M\"}, \"pids\": {\"max\": 16}, "
			 "\"timeout\": {\"max\": \"10s\"}}"),
		 "{\"version\": 1}", 0, ceiling_taken);
	run_case(PROFILE("\"limits\": {\"memory\": {\"max\": \"4G\"}}"), "{\"version\": 1}", 0,
		 builtin_kept);
}

static void unlimited_capped(const struct al_decision *d, const struct al_policy *task)
{
	assert_int_equal(task->cpus_milli, 2000);
	assert_int_equal(task->cpu_time_ms, 600000);
	assert_int_equal(task->file_size, 1ull << 30);
	assert_int_equal(task->net_run.bytes_out, 100ull << 20);
	assert_int_equal(task->net_host.requests, 50);
	assert_int_equal(decision(d, "limits.cpus")->from, AL_FROM_CEILING);
}

static void unlimited_over(const struct al_decision *d, const struct al_policy *task)
{
	assert_refused(d, "task.json: limits.cpus", "4", "profiles.default.limits.cpus.max");
	assert_refused(d, "task.json: network.per_host.requests", "51",
		       "profiles.default.network.per_host.requests.max");
	assert_int_equal(d->n_refused, 2);
}

/* Limits that are "none" by default (cpus, cpu_time, file_size, the
 * gateway's bytes and requests) get the ceiling when one is set. */
static void test_limit_unlimited_gets_ceiling(void **state)
{
	static const char op[] = PROFILE(
	    "\"limits\": {\"cpus\": {\"max\": 2}, \"cpu_time\": {\"max\": \"10m\"}, "
	    "\"file_size\": {\"max\": \"1G\"}}, \"network\": {\"allow\": [\"*.example.com\"], "
	    "\"limits\": {\"bytes_out\": {\"max\": \"100M\"}}, \"per_host\": {\"requests\": "
	    "{\"max\": 50}}}");

	run_case(op, "{\"version\": 1}", 0, unlimited_capped);
	run_case(op,
		 "{\"version\": 1, \"limits\": {\"cpus\": 4}, \"network\": {\"allow\": "
		 "[\"api.example.com\"], \"per_host\": {\"requests\": 51}}}",
		 -EPERM, unlimited_over);
}

static void copy_out_within_scratch(const struct al_decision *d, const struct al_policy *task)
{
	/* copy_out_size's own default is the scratch (32M), within 64M:
	 * made explicit, as every bounded limit is. */
	assert_int_equal(task->copy_out_bytes, 32ull << 20);
	assert_string_equal(decision(d, "limits.copy_out_size")->value, "32M");
}

static void copy_out_capped(const struct al_decision *d, const struct al_policy *task)
{
	assert_int_equal(task->copy_out_bytes, 16ull << 20);
}

static void test_limit_copy_out_size(void **state)
{
	run_case(PROFILE("\"limits\": {\"copy_out_size\": {\"max\": \"64M\"}}"),
		 "{\"version\": 1, \"limits\": {\"scratch\": \"32M\"}}", 0,
		 copy_out_within_scratch);
	run_case(PROFILE("\"limits\": {\"copy_out_size\": {\"max\": \"16M\"}}"),
		 "{\"version\": 1, \"limits\": {\"scratch\": \"32M\"}}", 0, copy_out_capped);
}

/* backend */

static const char op_backends[] =
    PROFILE("\"backend\": {\"allowed\": [\"gvisor\", \"microvm\"], \"default\": \"gvisor\"}");

static void backend_not_allowed(const struct al_decision *d, const struct al_policy *task)
{
	assert_int_equal(d->n_refused, 1);
	assert_refused(d, "task.json: backend.name", "native", "profiles.default.backend.allowed");
}

static void backend_default(const struct al_decision *d, const struct al_policy *task)
{
	assert_string_equal(task->backend, "gvisor");
	assert_int_equal(decision(d, "backend")->from, AL_FROM_DEFAULT);
}

static void backend_asked(const struct al_decision *d, const struct al_policy *task)
{
	assert_string_equal(task->backend, "microvm");
	assert_int_equal(decision(d, "backend")->from, AL_FROM_TASK);
}

static void backend_weak(const struct al_decision *d, const struct al_policy *task)
{
	assert_int_equal(d->n_refused, 1);
	assert_refused(d, "task.json: backend.name", "native", "profiles.default.backend.minimum");
}

static void wasm_ok(const struct al_decision *d, const struct al_policy *task)
{
	assert_int_equal(d->n_refused, 0);
	assert_string_equal(task->backend, "wasm");
}

/* Python under wasm has node's whole API: a minimum of wasm refuses it,
 * a minimum of native does not. */
static void wasm_python_weak(const struct al_decision *d, const struct al_policy *task)
{
	(void)task;
	assert_int_equal(d->n_refused, 1);
	assert_refused(d, "task.json: backend.name", "wasm", "profiles.default.backend.minimum");
}

static void test_backend(void **state)
{
	run_case(op_backends, "{\"version\": 1, \"backend\": {\"name\": \"native\"}}", -EPERM,
		 backend_not_allowed);
	run_case(op_backends, "{\"version\": 1}", 0, backend_default);
	run_case(op_backends, "{\"version\": 1, \"backend\": {\"name\": \"microvm\"}}", 0,
		 backend_asked);
	run_case(PROFILE("\"backend\": {\"minimum\": \"gvisor\", \"default\": \"gvisor\"}"),
		 "{\"version\": 1, \"backend\": {\"name\": \"native\"}}", -EPERM, backend_weak);
	run_case(PROFILE("\"backend\": {\"minimum\": \"gvisor\", \"default\": \"gvisor\"}"),
		 "{\"version\": 1, \"backend\": {\"name\": \"microvm\"}}", 0, backend_asked);
	run_case(PROFILE("\"backend\": {\"minimum\": \"wasm\", \"default\": \"wasm\"}"),
		 "{\"version\": 1, \"backend\": {\"name\": \"wasm\"}}", 0, wasm_ok);
	run_case(PROFILE("\"backend\": {\"minimum\": \"wasm\", \"default\": \"wasm\"}"),
		 "{\"version\": 1, \"backend\": {\"name\": \"wasm\", \"language\": \"python\"}}",
		 -EPERM, wasm_python_weak);
	run_case(PROFILE("\"backend\": {\"minimum\": \"native\"}"),
		 "{\"version\": 1, \"backend\": {\"name\": \"wasm\", \"language\": \"python\"}}", 0,
		 wasm_ok);
}

/* identity.host_ids: only the operator pins a range */

static void pin_refused(const struct al_decision *d, const struct al_policy *task)
{
	assert_int_equal(d->n_refused, 1);
	assert_refused(d, "task.json: identity.host_ids", "1610612736",
		       "profiles.default.identity.host_ids");
}

static void pin_other_refused(const struct al_decision *d, const struct al_policy *task)
{
	pin_refused(d, task);
	assert_string_equal(d->refused[0].bound, "1342177280");
}

static void pin_from_profile(const struct al_decision *d, const struct al_policy *task)
{
	assert_int_equal(task->host_ids, AL_HOST_IDS_FIXED);
	assert_int_equal(task->host_ids_base, 1342177280u);
}

static void per_run(const struct al_decision *d, const struct al_policy *task)
{
	assert_int_not_equal(task->host_ids, AL_HOST_IDS_FIXED);
}

static void test_identity(void **state)
{
	static const char pinned[] = PROFILE("\"identity\": {\"host_ids\": 1342177280}");
	static const char task_pin[] = "{\"version\": 1, \"identity\": {\"host_ids\": 1610612736}}";

	run_case(PROFILE("\"description\": \"x\""), task_pin, -EPERM, pin_refused);
	run_case(pinned, task_pin, -EPERM, pin_other_refused);
	run_case(pinned, "{\"version\": 1}", 0, pin_from_profile);
	run_case(pinned, "{\"version\": 1, \"identity\": {\"host_ids\": 1342177280}}", 0,
		 pin_from_profile);
	run_case(PROFILE("\"description\": \"x\""),
		 "{\"version\": 1, \"identity\": {\"host_ids\": \"per-run\"}}", 0, per_run);
}

/* best-effort protections */

static const char task_weak[] = "{\"version\": 1, \"filesystem\": {\"landlock\": \"best-effort\"}, "
				"\"limits\": {\"kernel_memory\": \"best-effort\"}}";

static void both_weakenings_refused(const struct al_decision *d, const struct al_policy *task)
{
	assert_int_equal(d->n_refused, 2);
	assert_string_equal(d->refused[0].task, "task.json: filesystem.landlock");
	assert_string_equal(d->refused[1].task, "task.json: limits.kernel_memory");
	assert_string_equal(d->refused[0].operator_path, "profiles.default.best_effort");
	assert_string_equal(d->refused[1].operator_path, "profiles.default.best_effort");
}

static void landlock_only_refused(const struct al_decision *d, const struct al_policy *task)
{
	assert_int_equal(d->n_refused, 1);
	assert_string_equal(d->refused[0].task, "task.json: limits.kernel_memory");
}

static void test_best_effort(void **state)
{
	run_case(PROFILE(""), task_weak, -EPERM, both_weakenings_refused);
	run_case(PROFILE("\"best_effort\": [\"landlock\"]"), task_weak, -EPERM,
		 landlock_only_refused);
	run_case(PROFILE("\"best_effort\": [\"landlock\", \"kernel_memory\"]"), task_weak, 0, NULL);
}

/* env */

static void env_deny_list(const struct al_decision *d, const struct al_policy *task)
{
	assert_int_equal(d->n_refused, 3);
	/* The default deny list is named as such: it is not in the file. */
	assert_refused(d, "task.json: env.LD_PRELOAD", "LD_PRELOAD",
		       "profiles.default.env.never (airlock's default list: LD_*)");
	assert_refused(d, "task.json: env.PYTHONPATH", "PYTHONPATH",
		       "profiles.default.env.never (airlock's default list: PYTHONPATH)");
	assert_refused(d, "task.json: env.GLIBC_TUNABLES", "GLIBC_TUNABLES",
		       "profiles.default.env.never (airlock's default list: GLIBC_TUNABLES)");
	assert_int_equal(decision(d, "env.FOO")->from, AL_FROM_TASK);
}

static void env_patterns(const struct al_decision *d, const struct al_policy *task)
{
	assert_int_equal(d->n_refused, 2);
	assert_refused(d, "task.json: env.OTHER", "OTHER", "profiles.default.env.allow");
	assert_refused(d, "task.json: env.APP_SECRET", "APP_SECRET",
		       "profiles.default.env.never[0]");
	assert_contains(decision(d, "env.APP_MODE")->bound, "env.allow[0] \"APP_*\"");
}

static void test_env(void **state)
{
	run_case(PROFILE(""),
		 "{\"version\": 1, \"env\": {\"FOO\": \"1\", \"LD_PRELOAD\": \"/x.so\", "
		 "\"PYTHONPATH\": \"/x\", \"GLIBC_TUNABLES\": \"a\"}}",
		 -EPERM, env_deny_list);
	run_case(PROFILE("\"env\": {\"allow\": [\"APP_*\"], \"never\": [\"APP_SECRET\"]}"),
		 "{\"version\": 1, \"env\": {\"APP_MODE\": \"1\", \"OTHER\": \"1\", "
		 "\"APP_SECRET\": \"x\"}}",
		 -EPERM, env_patterns);
}

/* One exec's env in a live sandbox, held to the profile the sandbox was
 * decided under: the same never and allow rules as the task's env. */
static void exec_env_checked(const struct al_decision *d, const struct al_policy *task)
{
	struct al_errors why = {0};
	char *ok[] = {"APP_MODE=2", NULL};
	char *bad[] = {"APP_MODE=2", "LD_PRELOAD=/x.so", "OTHER=1", "APP_SECRET=s", NULL};

	(void)task;
	assert_int_equal(al_engine_exec_env(d, ok, &why), 0);
	assert_int_equal(why.n, 0);
	assert_int_equal(al_engine_exec_env(d, bad, &why), -EPERM);
	assert_int_equal(why.n, 3);
	assert_contains(why.v[0].text, "env.LD_PRELOAD: the operator never lets");
	assert_contains(why.v[0].text, "profiles.default.env.never");
	assert_contains(why.v[1].text, "env.OTHER: OTHER matches none");
	assert_contains(why.v[1].text, "APP_*");
	assert_contains(why.v[2].text, "\"APP_SECRET\"");
	al_errors_clear(&why);
}

static void test_exec_env(void **state)
{
	struct al_decision none = {0};
	struct al_errors why = {0};
	char *any[] = {"LD_PRELOAD=/x.so", NULL};

	(void)state;
	run_case(PROFILE("\"env\": {\"allow\": [\"APP_*\"], \"never\": [\"APP_SECRET\"]}"),
		 "{\"version\": 1}", 0, exec_env_checked);
	/* No operator policy, no profile: unbounded, as the run was. */
	assert_int_equal(al_engine_exec_env(&none, any, &why), 0);
}

/* A value from airlock's own environment (--env NAME) needs env.pass; the
 * same name with a value the task wrote does not. */
static void test_env_passed(void **state)
{
	static const char *const ops[] = {PROFILE(""), PROFILE("\"env\": {\"pass\": [\"TOK*\"]}")};

	for (size_t i = 0; i < 2; i++) {
		_cleanup_(al_operator_freep) struct al_operator *op = op_parse(ops[i]);
		_cleanup_(al_policy_freep) struct al_policy *task = al_policy_new("command line");
		_cleanup_(al_policy_freep) struct al_policy *flags = al_policy_new("command line");
		struct al_decision d = {0};

		al_policy_set_env_passed(task, "TOKEN", "s3cret");
		al_policy_set_env_passed(flags, "TOKEN", "s3cret");
		al_policy_set_env(task, "MODE", "fast");
		al_policy_set_env(flags, "MODE", "fast");
		int r = al_engine_request(op, task, flags, &d);
		if (i == 0) {
			assert_int_equal(r, -EPERM);
			assert_int_equal(d.n_refused, 1);
			assert_refused(&d, "--env TOKEN", "TOKEN", "profiles.default.env.pass");
		} else {
			assert_int_equal(r, 0);
			assert_string_equal(decision(&d, "env.TOKEN")->value,
					    "(airlock's own value)");
			assert_contains(decision(&d, "env.TOKEN")->bound, "env.pass[0] \"TOK*\"");
		}
		al_decision_clear(&d);
	}
}

/* egress rules */

static const char op_net[] =
    PROFILE("\"network\": {\"allow\": [\"203.0.113.0/24:443\", \"api.example.com:8000-8100\", "
	    "\"*.pkg.example.org:443\", \"*.example.net\"], \"never\": [\"secret.example.net\", "
	    "\"203.0.113.128/25\"]}");

/* One rule: allowed (NULL) or refused at operator_path. */
static void rule_case(const char *rule, const char *operator_path)
{
	_cleanup_(al_operator_freep) struct al_operator *op = op_parse(op_net);
	_cleanup_(al_policy_freep) struct al_policy *task = al_policy_new("task.json");
	_cleanup_free_ char *what = xasprintf("network.allow %s", rule);
	struct al_decision d = {0};

	al_strv_push(&task->net_allow, rule);
	int r = al_engine_request(op, task, NULL, &d);
	if (!operator_path) {
		if (r != 0)
			fail_msg("%s refused: %s", rule, d.refused[0].message);
		assert_int_equal(decision(&d, what)->from, AL_FROM_TASK);
	} else {
		if (r != -EPERM)
			fail_msg("%s allowed, expected a refusal at %s", rule, operator_path);
		assert_int_equal(d.n_refused, 1);
		assert_refused(&d, "task.json: network.allow[0]", rule, operator_path);
	}
	al_decision_clear(&d);
}

static void test_rules_cidr(void **state)
{
	rule_case("203.0.113.7:443", NULL);
	rule_case("203.0.113.0/26:443", NULL);
	rule_case("203.0.112.0/23:443", "profiles.default.network.allow"); /* wider */
	rule_case("198.51.100.7:443", "profiles.default.network.allow");
	rule_case("203.0.113.7:80", "profiles.default.network.allow");
	rule_case("[2001:db8::1]:443", "profiles.default.network.allow"); /* other family */
}

static void test_rules_names(void **state)
{
	/* A wildcard is not within a narrower name. */
	rule_case("*.example.com:8080", "profiles.default.network.allow");
	rule_case("api.example.com:8080", NULL);
	rule_case("www.example.com:8080", "profiles.default.network.allow");
	/* Names and wildcards within an operator wildcard; not its apex. */
	rule_case("a.pkg.example.org:443", NULL);
	rule_case("*.b.pkg.example.org:443", NULL);
	rule_case("*.pkg.example.org:443", NULL);
	rule_case("pkg.example.org:443", "profiles.default.network.allow");
	rule_case("*.example.org:443", "profiles.default.network.allow");
	/* A name is never within an address rule (unknown until resolved). */
	rule_case("api.example.com:443", "profiles.default.network.allow");
}

static void test_rules_ports(void **state)
{
	rule_case("api.example.com:8000", NULL);
	rule_case("api.example.com:8000-8100", NULL);
	rule_case("api.example.com:7999-8100", "profiles.default.network.allow");
	rule_case("api.example.com:8050-8101", "profiles.default.network.allow");
	rule_case("api.example.com:*", "profiles.default.network.allow");
	rule_case("api.example.com", "profiles.default.network.allow"); /* 80 and 443 */
	/* The operator's default ports (80 and 443): those, and each alone. */
	rule_case("www.example.net", NULL);
	rule_case("www.example.net:443", NULL);
	rule_case("www.example.net:80", NULL);
	rule_case("www.example.net:80-443", "profiles.default.network.allow");
	rule_case("www.example.net:8443", "profiles.default.network.allow");
}

static void link_local_refused(const struct al_decision *d, const struct al_policy *task)
{
	assert_int_equal(d->n_refused, 2);
	assert_string_equal(d->refused[0].operator_path, "profiles.default.network.never");
	assert_string_equal(d->refused[0].bound, "169.254.0.0/16:*");
	assert_string_equal(d->refused[1].bound, "[fe80::/10]:*");
}

static void test_rules_never(void **state)
{
	rule_case("secret.example.net:443", "profiles.default.network.never");
	rule_case("203.0.113.200:443", "profiles.default.network.never");
	rule_case("203.0.113.128/26:443", "profiles.default.network.never");
	/* The default never rules (link-local: metadata services) stay when
	 * the operator gives none, whatever network.allow says. */
	run_case(PROFILE("\"network\": {\"allow\": [\"169.254.0.0/16:*\", \"[fe80::/10]:*\"]}"),
		 "{\"version\": 1, \"network\": {\"allow\": [\"169.254.169.254:80\", "
		 "\"[fe80::1]:80\"]}}",
		 -EPERM, link_local_refused);
}

/* A wildcard holding a never name is let through here: the never rules
 * go with the plan, for the gateway to apply to each name and address. */
static void test_rules_never_in_plan(void **state)
{
	_cleanup_(al_operator_freep) struct al_operator *op = op_parse(op_net);
	_cleanup_(al_policy_freep) struct al_policy *task = al_policy_new("task.json");
	_cleanup_(al_plan_freep) struct al_plan *plan = NULL;
	struct al_decision d = {0};
	struct al_error err = {0};

	al_strv_push(&task->command, "/bin/true");
	al_strv_push(&task->net_allow, "*.example.net");
	if (al_engine_request(op, task, NULL, &d) != 0)
		fail_msg("refused: %s", d.refused[0].message);
	if (al_plan_build(task, 0, &plan, &err) < 0)
		fail_msg("plan: %s", err.msg);
	if (al_engine_plan(&d, task, plan) != 0)
		fail_msg("refused: %s", d.refused[0].message);
	assert_non_null(plan->never);
	assert_true(al_allow_match_name(plan->never, "secret.example.net", 443, NULL));
	assert_false(al_allow_match_name(plan->never, "www.example.net", 443, NULL));
	assert_string_equal(plan->profile, "default");
	assert_string_equal(plan->operator_file, "op.json");
	al_decision_clear(&d);
}

static void always_added(const struct al_decision *d, const struct al_policy *task)
{
	assert_int_equal(al_strv_len(task->net_allow), 2);
	assert_string_equal(task->net_allow[0], "pypi.org:443");
	assert_string_equal(task->net_allow[1], "files.pythonhosted.org:443");
	assert_true(d->gateway);
	assert_int_equal(decision(d, "network.allow pypi.org:443")->from, AL_FROM_FORCED);
}

static void always_once(const struct al_decision *d, const struct al_policy *task)
{
	/* Asked by the task too: there once. */
	assert_int_equal(al_strv_len(task->net_allow), 2);
	assert_string_equal(task->net_allow[0], "pypi.org:443");
}

static void always_not_without_network(const struct al_decision *d, const struct al_policy *task)
{
	assert_null(task->net_allow);
	assert_false(d->gateway);
}

static void test_rules_always(void **state)
{
	static const char op[] =
	    PROFILE("\"network\": {\"allow\": [\"*.org:443\"], \"always\": [\"pypi.org:443\", "
		    "\"files.pythonhosted.org:443\"]}");

	run_case(op, "{\"version\": 1}", 0, always_added);
	run_case(op, "{\"version\": 1, \"network\": {\"allow\": [\"pypi.org:443\"]}}", 0,
		 always_once);
	run_case(op, "{\"version\": 1, \"network\": {\"mode\": \"none\"}}", 0,
		 always_not_without_network);
}

/* network.hosts and the resolver */

static const char op_hosts[] =
    PROFILE("\"network\": {\"allow\": [\"*.internal:*\"], \"hosts\": [\"10.1.0.0/16\", "
	    "\"fd00:1::/64\"], \"never\": [\"10.1.2.0/24\"], \"resolvers\": [\"10.1.0.53\", "
	    "\"[fd00:1::53]:53\"]}");

static void hosts_case(const char *addr, const char *operator_path)
{
	_cleanup_(al_operator_freep) struct al_operator *op = op_parse(op_hosts);
	_cleanup_(al_policy_freep) struct al_policy *task = al_policy_new("task.json");
	_cleanup_free_ char *ref = xasprintf("--map-host db.internal=%s", addr);
	_cleanup_(al_policy_freep) struct al_policy *flags = al_policy_new("command line");
	struct al_decision d = {0};

	al_strv_push(&task->net_allow, "db.internal:5432");
	al_policy_set_host(task, "db.internal", addr);
	al_policy_set_host(flags, "db.internal", addr);
	int r = al_engine_request(op, task, flags, &d);
	if (!operator_path) {
		if (r != 0)
			fail_msg("%s refused: %s", addr, d.refused[0].message);
		assert_string_equal(decision(&d, "network.hosts.db.internal")->value, addr);
	} else {
		assert_int_equal(r, -EPERM);
		assert_int_equal(d.n_refused, 1);
		assert_refused(&d, ref, addr, operator_path);
	}
	al_decision_clear(&d);
}

static void test_hosts(void **state)
{
	hosts_case("10.1.5.5", NULL);
	hosts_case("fd00:1::5", NULL);
	hosts_case("10.2.0.1", "profiles.default.network.hosts");
	hosts_case("fd00:2::5", "profiles.default.network.hosts");
	hosts_case("10.1.2.3", "profiles.default.network.never");
	/* The same address written as IPv4-mapped IPv6. */
	hosts_case("::ffff:10.1.2.3", "profiles.default.network.never");
	hosts_case("::ffff:10.2.0.1", "profiles.default.network.hosts");
}

static void resolver_case(const char *resolver, bool ok)
{
	_cleanup_(al_operator_freep) struct al_operator *op = op_parse(op_hosts);
	_cleanup_(al_policy_freep) struct al_policy *task = al_policy_new("task.json");
	struct al_decision d = {0};

	al_strv_push(&task->net_allow, "db.internal:5432");
	task->net_resolver = xstrdup(resolver);
	int r = al_engine_request(op, task, NULL, &d);
	if (ok) {
		assert_int_equal(r, 0);
		assert_string_equal(decision(&d, "network.resolver")->value, resolver);
	} else {
		assert_int_equal(r, -EPERM);
		assert_refused(&d, "task.json: network.resolver", resolver,
			       "profiles.default.network.resolvers");
	}
	al_decision_clear(&d);
}

static void test_resolver(void **state)
{
	resolver_case("10.1.0.53", true);
	resolver_case("[fd00:1::53]:53", true);
	resolver_case("10.1.0.54", false);
	resolver_case("[fd00:1::53]:5353", false);
	/* None listed: none may be named. */
	run_case(PROFILE("\"network\": {\"allow\": [\"*.internal:*\"]}"),
		 "{\"version\": 1, \"network\": {\"allow\": [\"db.internal:5432\"], "
		 "\"resolver\": \"10.1.0.53\"}}",
		 -EPERM, NULL);
}

/* profiles */

static void unknown_profile(const struct al_decision *d, const struct al_policy *task)
{
	assert_int_equal(d->n_refused, 1);
	assert_refused(d, "task.json: profile", "gpu", "profiles");
	assert_string_equal(d->refused[0].bound, "default, ci");
	assert_null(d->profile);
}

static void no_default_profile(const struct al_decision *d, const struct al_policy *task)
{
	assert_int_equal(d->n_refused, 1);
	assert_refused(d, "(no profile named)", "default", "profiles");
	assert_contains(d->refused[0].message, "no \"default\" profile");
}

static void named_profile(const struct al_decision *d, const struct al_policy *task)
{
	assert_string_equal(d->profile_name, "ci");
	assert_int_equal(task->pids, 8);
}

static void test_profiles(void **state)
{
	static const char two[] = "{\"version\": 1, \"profiles\": {\"default\": {}, \"ci\": "
				  "{\"limits\": {\"pids\": {\"default\": 8}}}}}";
	static const char ci_only[] = "{\"version\": 1, \"profiles\": {\"ci\": {}}}";

	run_case(two, "{\"version\": 1, \"profile\": \"gpu\"}", -EPERM, unknown_profile);
	run_case(ci_only, "{\"version\": 1}", -EPERM, no_default_profile);
	run_case(two, "{\"version\": 1, \"profile\": \"ci\"}", 0, named_profile);
}

/* Every reason at once: a task breaking four bounds gets exactly four
 * refusals, each naming its flag or JSON path, the value and the bound. */
static void four_refusals(const struct al_decision *d, const struct al_policy *task)
{
	assert_int_equal(d->n_refused, 4);
	assert_refused(d, "task.json: limits.timeout", "600s",
		       "profiles.default.limits.timeout.max");
	assert_refused(d, "task.json: backend.name", "native", "profiles.default.backend.minimum");
	assert_refused(d, "task.json: env.NODE_OPTIONS", "NODE_OPTIONS",
		       "profiles.default.env.never (airlock's default list: NODE_OPTIONS)");
	assert_refused(d, "task.json: network.allow[1]", "evil.example.com:443",
		       "profiles.default.network.allow");
	for (size_t i = 0; i < d->n_refused; i++)
		assert_non_null(d->refused[i].bound);
}

static void test_all_reasons(void **state)
{
	run_case(PROFILE("\"limits\": {\"timeout\": {\"max\": \"5m\"}}, \"backend\": {\"minimum\": "
			 "\"gvisor\", \"default\": \"gvisor\"}, \"network\": {\"allow\": "
			 "[\"api.example.com:443\"]}"),
		 "{\"version\": 1, \"limits\": {\"timeout\": \"10m\", \"memory\": \"64M\"}, "
		 "\"backend\": {\"name\": \"native\"}, \"env\": {\"OK\": \"1\", \"NODE_OPTIONS\": "
		 "\"--require x\"}, \"network\": {\"allow\": [\"api.example.com:443\", "
		 "\"evil.example.com:443\"]}}",
		 -EPERM, four_refusals);
}

int main(void)
{
	/* The layers the design has, as a build with them would: choosing among
	 * them is the engine's, whatever this build holds. */
	static const char *const layers[] = {"native", "wasm", "gvisor", "microvm", NULL};
	al_backends_built(layers);
	/* clang-format off */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_limit_memory),
		cmocka_unit_test(test_limit_flag_named),
		cmocka_unit_test(test_limit_ceiling_below_builtin),
		cmocka_unit_test(test_limit_unlimited_gets_ceiling),
		cmocka_unit_test(test_limit_copy_out_size),
		cmocka_unit_test(test_backend),
		cmocka_unit_test(test_identity),
		cmocka_unit_test(test_best_effort),
		cmocka_unit_test(test_env),
		cmocka_unit_test(test_exec_env),
		cmocka_unit_test(test_env_passed),
		cmocka_unit_test(test_rules_cidr),
		cmocka_unit_test(test_rules_names),
		cmocka_unit_test(test_rules_ports),
		cmocka_unit_test(test_rules_never),
		cmocka_unit_test(test_rules_never_in_plan),
		cmocka_unit_test(test_rules_always),
		cmocka_unit_test(test_hosts),
		cmocka_unit_test(test_resolver),
		cmocka_unit_test(test_profiles),
		cmocka_unit_test(test_all_reasons),
	};
	/* clang-format on */

	return cmocka_run_group_tests(tests, NULL, NULL);
}
