/* policy/engine.h, engine-out.c: the decision as data (JSON, the cap on
 * refusals) and the external decider's answer narrowing the task (yes, no,
 * rules dropped, limits lowered, garbage refused), in a run's order. */
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

static const char op_memory[] =
    PROFILE("\"limits\": {\"memory\": {\"max\": \"1G\", \"default\": \"256M\"}}");

/* Past AL_REFUSALS_MAX refusals are counted, not kept, and still refuse. */
static void test_refusals_capped(void **state)
{
	_cleanup_(al_operator_freep) struct al_operator *op = op_parse(PROFILE(""));
	_cleanup_(al_policy_freep) struct al_policy *task = al_policy_new("task.json");
	_cleanup_(al_errors_clear) struct al_errors lines = {0};
	struct al_decision d = {0};

	for (int i = 0; i < AL_REFUSALS_MAX + 50; i++) {
		char name[32];
		snprintf(name, sizeof(name), "LD_%d", i);
		al_policy_set_env(task, name, "x");
	}
	assert_int_equal(al_engine_request(op, task, NULL, &d), -EPERM);
	assert_int_equal(d.n_refused, AL_REFUSALS_MAX);
	assert_int_equal(d.omitted, 50);
	json_t *j = al_decision_json(&d);
	assert_int_equal(json_integer_value(json_object_get(j, "omitted")), 50);
	json_decref(j);
	al_decision_errors(&d, &lines);
	assert_int_equal(al_errors_count(&lines), AL_REFUSALS_MAX + 50);
	al_decision_clear(&d);
}

/* The decision as data: every decision and refusal, each field there. */
static void json_complete(const struct al_decision *d, const struct al_policy *task)
{
	json_t *j = al_decision_json(d);
	json_t *refused, *decisions;

	assert_non_null(j);
	refused = json_object_get(j, "refused");
	decisions = json_object_get(j, "decisions");
	assert_int_equal(json_array_size(refused), d->n_refused);
	assert_int_equal(json_array_size(decisions), d->n_explain);
	assert_string_equal(json_string_value(json_object_get(j, "profile")), "default");
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(j, "operator_policy"), "file")),
	    "op.json");
	for (size_t i = 0; i < d->n_refused; i++) {
		json_t *r = json_array_get(refused, i);
		assert_string_equal(json_string_value(json_object_get(r, "operator_path")),
				    d->refused[i].operator_path);
		assert_string_equal(json_string_value(json_object_get(r, "task")),
				    d->refused[i].task);
	}
	json_decref(j);
}

static void test_decision_json(void **state)
{
	run_case(op_memory,
		 "{\"version\": 1, \"limits\": {\"memory\": \"2G\"}, \"env\": {\"LD_AUDIT\": "
		 "\"x\"}}",
		 -EPERM, json_complete);
}

/* A value that is not UTF-8 (a flag, a host path) is kept in the JSON,
 * its bad bytes replaced: a refusal that went missing from the record
 * would hide why the run was refused. */
static void test_decision_json_not_utf8(void **state)
{
	_cleanup_(al_operator_freep) struct al_operator *op = op_parse(PROFILE(""));
	_cleanup_(al_policy_freep) struct al_policy *task = al_policy_new("command line");
	struct al_decision d = {0};

	al_policy_set_env(task, "LD_\xff", "x");
	assert_int_equal(al_engine_request(op, task, NULL, &d), -EPERM);
	assert_int_equal(d.n_refused, 1);
	json_t *j = al_decision_json(&d);
	assert_non_null(j);
	assert_int_equal(json_array_size(json_object_get(j, "refused")), 1);
	json_decref(j);
	al_decision_clear(&d);

	task->profile = xstrdup("gpu\xfe");
	assert_int_equal(al_engine_request(op, task, NULL, &d), -EPERM);
	j = al_decision_json(&d);
	assert_non_null(j);
	assert_int_equal(json_array_size(json_object_get(j, "refused")), 1);
	json_decref(j);
	al_decision_clear(&d);
}

/* The external decider's answer */

struct answer {
	const char *json;
	int expect; /* 0, 1 (narrowed) or -EPERM */
};

static void decider_case(const char *task_json, const struct answer *a, struct al_policy **ret)
{
	_cleanup_(al_operator_freep) struct al_operator *op =
	    op_parse(PROFILE("\"network\": {\"allow\": [\"*.example.com:443\"]}, \"limits\": "
			     "{\"memory\": {\"max\": \"1G\"}}"));
	struct al_policy *task = task_parse(task_json);
	struct al_decision d = {0};
	json_error_t jerr;
	json_t *result = json_loads(a->json, JSON_DECODE_ANY, &jerr);
	size_t before;

	assert_non_null(result);
	assert_int_equal(al_engine_request(op, task, NULL, &d), 0);
	before = d.n_refused;
	int r = al_engine_apply_decider(&d, task, result, "the decider");
	if (r != a->expect)
		fail_msg("answer %s: %d, expected %d", a->json, r, a->expect);
	if (r == -EPERM) {
		assert_true(d.n_refused > before);
		assert_contains(d.refused[d.n_refused - 1].message, "the decider");
		assert_string_equal(d.refused[d.n_refused - 1].task, "(decider)");
	} else {
		assert_int_equal(d.n_refused, 0);
	}
	json_decref(result);
	al_decision_clear(&d);
	if (ret)
		*ret = task;
	else
		al_policy_free(task);
}

static const char task_two_rules[] = "{\"version\": 1, \"network\": {\"allow\": "
				     "[\"a.example.com:443\", \"b.example.com:443\"]}, "
				     "\"limits\": {\"memory\": \"256M\"}}";

static void test_decider_yes_no(void **state)
{
	_cleanup_(al_policy_freep) struct al_policy *task = NULL;

	decider_case(task_two_rules, &(struct answer){"true", 0}, &task);
	assert_int_equal(al_strv_len(task->net_allow), 2);
	decider_case(task_two_rules, &(struct answer){"false", -EPERM}, NULL);
	decider_case(task_two_rules, &(struct answer){"{\"allow\": true}", 0}, NULL);
	decider_case(task_two_rules,
		     &(struct answer){"{\"allow\": false, \"reasons\": [\"after hours\"]}", -EPERM},
		     NULL);
}

/* A rule the answer leaves out is dropped; one it adds is not added. */
static void test_decider_narrows_rules(void **state)
{
	_cleanup_(al_policy_freep) struct al_policy *task = NULL;

	decider_case(task_two_rules,
		     &(struct answer){"{\"allow\": true, \"network\": {\"allow\": "
				      "[\"a.example.com:443\", \"c.example.com:443\"]}}",
				      1},
		     &task);
	assert_int_equal(al_strv_len(task->net_allow), 1);
	assert_string_equal(task->net_allow[0], "a.example.com:443");
}

/* A limit the answer names is lowered, never raised. */
static void test_decider_limits(void **state)
{
	_cleanup_(al_policy_freep) struct al_policy *lowered = NULL, *kept = NULL;

	decider_case(task_two_rules,
		     &(struct answer){"{\"allow\": true, \"limits\": {\"memory\": 134217728}}", 1},
		     &lowered);
	assert_int_equal(lowered->memory_bytes, 128ull << 20);
	decider_case(task_two_rules,
		     &(struct answer){"{\"allow\": true, \"limits\": {\"memory\": 1073741824}}", 0},
		     &kept);
	assert_int_equal(kept->memory_bytes, 256ull << 20);
}

/* A limit the task left to airlock's own default (memory: 512M, within
 * the 1G ceiling) is not raised by the answer either: not past the
 * default that would have applied, and never past the ceiling. */
static void test_decider_limits_unset(void **state)
{
	_cleanup_(al_policy_freep) struct al_policy *kept = NULL, *lowered = NULL;
	static const char no_memory[] =
	    "{\"version\": 1, \"network\": {\"allow\": [\"a.example.com:443\"]}}";

	decider_case(no_memory,
		     &(struct answer){"{\"allow\": true, \"limits\": {\"memory\": 4294967296}}", 0},
		     &kept);
	assert_int_equal(kept->memory_bytes, 512ull << 20);
	decider_case(no_memory,
		     &(struct answer){"{\"allow\": true, \"limits\": {\"memory\": 268435456, "
				      "\"cpus\": 500}}",
				      1},
		     &lowered);
	assert_int_equal(lowered->memory_bytes, 256ull << 20);
	assert_int_equal(lowered->cpus_milli, 500); /* from none */
}

/* The run's order (request/request.c): request, plan, decider, and the plan
 * again when the answer narrowed the task. The decider's decisions stay;
 * the first plan's are replaced by the second's. */
static void test_decider_then_plan_again(void **state)
{
	_cleanup_(al_operator_freep) struct al_operator *op =
	    op_parse(PROFILE("\"network\": {\"allow\": [\"*.example.com:443\"]}"));
	_cleanup_(al_policy_freep) struct al_policy *task = task_parse(task_two_rules);
	_cleanup_(al_plan_freep) struct al_plan *plan = NULL, *again = NULL;
	json_t *answer =
	    json_pack("{s:b, s:{s:[s]}}", "allow", 1, "network", "allow", "a.example.com:443");
	struct al_decision d = {0};
	struct al_error err = {0};
	size_t n = 0;

	al_strv_push(&task->command, "/bin/true");
	assert_int_equal(al_engine_request(op, task, NULL, &d), 0);
	assert_int_equal(al_plan_build(task, 0, &plan, &err), 0);
	assert_int_equal(al_engine_plan(&d, task, plan), 0);
	assert_int_equal(al_engine_apply_decider(&d, task, answer, "the decider"), 1);
	json_decref(answer);
	assert_string_equal(decision(&d, "network.allow b.example.com:443")->value, "(dropped)");
	assert_int_equal(al_plan_build(task, 0, &again, &err), 0);
	assert_int_equal(al_engine_plan(&d, task, again), 0);
	assert_int_equal(decision(&d, "network.allow b.example.com:443")->from, AL_FROM_DECIDER);
	for (size_t i = 0; i < d.n_explain; i++)
		n += strcmp(d.explain[i].what, "system /usr") == 0;
	assert_int_equal(n, 1);
	al_decision_clear(&d);
}

static void test_decider_garbage(void **state)
{
	static const char *const bad[] = {
	    "\"yes\"",
	    "1",
	    "null",
	    "[]",
	    "{}",
	    "{\"allow\": \"true\"}",
	    "{\"allow\": 1}",
	    "{\"allow\": true, \"network\": []}",
	    "{\"allow\": true, \"network\": {\"allow\": \"a.example.com:443\"}}",
	    "{\"allow\": true, \"limits\": []}",
	    "{\"allow\": true, \"limits\": {\"memroy\": 1}}",
	    "{\"allow\": true, \"limits\": {\"memory\": -1}}",
	    "{\"allow\": true, \"limits\": {\"memory\": 0}}",
	    "{\"allow\": true, \"limits\": {\"memory\": \"64M\"}}",
	    "{\"allow\": true, \"limits\": {\"memory\": 1.5}}",
	    "{\"allow\": false, \"reasons\": \"no\"}",
	    "{\"allow\": false, \"reasons\": [1, 2]}",
	};

	for (size_t i = 0; i < AL_ARRAY_SIZE(bad); i++)
		decider_case(task_two_rules, &(struct answer){bad[i], -EPERM}, NULL);
}

int main(void)
{
	/* clang-format off */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_refusals_capped),
		cmocka_unit_test(test_decision_json),
		cmocka_unit_test(test_decision_json_not_utf8),
		cmocka_unit_test(test_decider_yes_no),
		cmocka_unit_test(test_decider_narrows_rules),
		cmocka_unit_test(test_decider_limits),
		cmocka_unit_test(test_decider_limits_unset),
		cmocka_unit_test(test_decider_then_plan_again),
		cmocka_unit_test(test_decider_garbage),
	};
	/* clang-format on */

	return cmocka_run_group_tests(tests, NULL, NULL);
}
