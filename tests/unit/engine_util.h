/* Helpers of the policy engine's unit tests (test_engine.c,
 * test_engine_out.c, test_operator.c): an operator policy and a task from
 * JSON, and the refusals and decisions of the engine's answer. Include
 * after unit.h. */
#pragma once

#include <errno.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/error.h"
#include "policy/engine.h"
#include "policy/operator.h"
#include "policy/policy.h"

/* {"version": 1, "profiles": {"default": {BODY}}} */
#define PROFILE(body) "{\"version\": 1, \"profiles\": {\"default\": {" body "}}}"

static inline struct al_operator *op_parse(const char *json)
{
	_cleanup_(al_errors_clear) struct al_errors errs = {0};
	struct al_operator *op = NULL;
	int r = al_operator_parse("op.json", json, strlen(json), &op, &errs);

	if (r != 0)
		fail_msg("operator %s: %s", json, errs.n ? errs.v[0].text : "(no error)");
	al_operator_resolve(op);
	return op;
}

static inline struct al_policy *task_parse(const char *json)
{
	struct al_policy *p = NULL;
	struct al_error err = {0};

	if (al_policy_load_string("task.json", json, strlen(json), &p, &err) != 0)
		fail_msg("task %s: %s", json, err.msg);
	return p;
}

/* The refusal whose operator JSON path is operator_path, or NULL. */
static inline const struct al_refusal *refusal(const struct al_decision *d,
					       const char *operator_path)
{
	for (size_t i = 0; i < d->n_refused; i++)
		if (d->refused[i].operator_path &&
		    strcmp(d->refused[i].operator_path, operator_path) == 0)
			return &d->refused[i];
	return NULL;
}

/* d refused exactly once at operator_path, naming task and asked. */
static inline void assert_refused(const struct al_decision *d, const char *task, const char *asked,
				  const char *operator_path)
{
	const struct al_refusal *r = refusal(d, operator_path);
	size_t n = 0;

	if (!r) {
		for (size_t i = 0; i < d->n_refused; i++)
			print_message("  refused: %s\n", d->refused[i].message);
		fail_msg("no refusal at %s", operator_path);
	}
	for (size_t i = 0; i < d->n_refused; i++)
		n += d->refused[i].operator_path &&
		     strcmp(d->refused[i].operator_path, operator_path) == 0;
	assert_int_equal(n, 1);
	assert_string_equal(r->task, task);
	assert_string_equal(r->asked, asked);
	assert_contains(r->message, "op.json");
	assert_contains(r->message, operator_path);
}

/* The last decision named what (a later one overrides), or a failure. */
static inline const struct al_explain *decision(const struct al_decision *d, const char *what)
{
	for (size_t i = d->n_explain; i-- > 0;)
		if (strcmp(d->explain[i].what, what) == 0)
			return &d->explain[i];
	fail_msg("no decision \"%s\"", what);
	return NULL;
}

/* Hold the task (JSON) to the operator (JSON): the engine's return value;
 * *ret_task is the task as the engine left it. */
static inline int request(const char *op_json, const char *task_json, struct al_operator **ret_op,
			  struct al_policy **ret_task, struct al_decision *d)
{
	*ret_op = op_parse(op_json);
	*ret_task = task_parse(task_json);
	return al_engine_request(*ret_op, *ret_task, NULL, d);
}

/* The common case: one check, everything freed here. expect: 0 or -EPERM;
 * check (may be NULL) looks at the decision and the task. */
typedef void (*check_fn)(const struct al_decision *d, const struct al_policy *task);

static inline void run_case(const char *op_json, const char *task_json, int expect, check_fn check)
{
	_cleanup_(al_operator_freep) struct al_operator *op = NULL;
	_cleanup_(al_policy_freep) struct al_policy *task = NULL;
	struct al_decision d = {0};
	int r = request(op_json, task_json, &op, &task, &d);

	if (r != expect) {
		for (size_t i = 0; i < d.n_refused; i++)
			print_message("  refused: %s\n", d.refused[i].message);
		fail_msg("engine returned %d, expected %d for %s", r, expect, task_json);
	}
	if (check)
		check(&d, task);
	al_decision_clear(&d);
}
