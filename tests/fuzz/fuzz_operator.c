/* libFuzzer target: the operator policy's parser (policy/operator-parse.c)
 * and the engine over whatever it accepts (policy/engine*.c). The input is
 * up to three parts split by NUL bytes (JSON holds none): the operator
 * policy, a task policy, and the external decider's answer. Each accepted
 * operator policy is held against a fixed task built in code (every kind
 * of request, some out of any bound) and against the input's task, when
 * it parses; the decision goes to JSON; the answer (without one, an
 * answer that tries to raise every limit and add rules) narrows the task.
 *
 * Beyond what the sanitizers catch, it checks what a task can never do:
 * a request the engine lets through is within every ceiling the profile
 * sets (and so is what the decider's answer leaves), each of its rules is
 * within an operator rule and within no never rule, and the engine
 * refuses exactly when it says why. al_plan_build() and
 * al_operator_resolve() only look at the host (stat, realpath). */
#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "policy/engine.h"
#include "policy/operator.h"
#include "policy/plan.h"
#include "policy/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A modest task, which many profiles let through (so the plan, the
 * paths and the decider's answer are reached), or one that asks for a
 * bit of everything, some of it out of any bound. */
static struct al_policy *fixed_task(const char *profile, bool greedy)
{
	struct al_policy *p = al_policy_new("task.json");

	if (profile)
		p->profile = xstrdup(profile);
	al_strv_push(&p->command, "/bin/true");
	p->memory_bytes = 96ull << 20;
	al_policy_set_env(p, "APP_MODE", "1");
	al_strv_push(&p->net_allow, "api.example.org:443");
	if (!greedy)
		return p;
	p->memory_bytes = 768ull << 20;
	p->timeout_ms = 120000;
	p->cpus_milli = 1500;
	p->net_host.requests = 10;
	al_policy_set_env(p, "LD_PRELOAD", "/x.so");
	al_policy_set_env(p, "LD_\xff", "not UTF-8");
	al_policy_set_env_passed(p, "TOKEN", "s3cret");
	al_strv_push(&p->net_allow, "*.example.org");
	al_strv_push(&p->net_allow, "203.0.113.0/28:8000-8100");
	al_strv_push(&p->net_allow, "[2001:db8::/64]:*");
	al_strv_push(&p->net_allow, "169.254.169.254:80");
	al_policy_set_host(p, "db.internal", "10.1.2.3");
	al_policy_set_host(p, "v6.internal", "::ffff:192.0.2.1");
	p->net_resolver = xstrdup("192.0.2.53");
	p->backend = xstrdup(profile ? "gvisor" : "native");
	p->landlock = AL_LANDLOCK_BEST_EFFORT;
	al_policy_add_mount(p, "/usr/share", "/input", AL_MOUNT_RO, AL_UNSET, "--ro /usr/share");
	al_policy_add_copy(p, false, "/tmp", "/work/out", "--copy-out /work/out:/tmp");
	return p;
}

static uint64_t *field(struct al_policy *p, const struct al_limit_def *d)
{
	return (uint64_t *)((char *)p + d->offset);
}

/* Every limit of task is within the profile's ceiling, what is unset
 * included (airlock's own default applies to it). */
static void check_within(const struct al_op_profile *pr, struct al_policy *task)
{
	for (size_t i = 0; i < AL_OPL_COUNT; i++) {
		const struct al_limit_def *d = &al_limit_defs[i];
		uint64_t v = *field(task, d), builtin = d->builtin;
		if (i == AL_OPL_COPY_OUT_SIZE)
			builtin =
			    task->scratch_bytes ? task->scratch_bytes : AL_DEFAULT_SCRATCH_BYTES;
		if (!pr->limits[i].max)
			continue;
		if (!v)
			v = builtin;
		if (!v || v > pr->limits[i].max)
			abort();
	}
}

/* Every rule of task is within an operator rule (allow or always) and
 * within no never rule. */
static void check_rules(const struct al_op_profile *pr, const struct al_policy *task)
{
	for (size_t i = 0; task->net_allow && task->net_allow[i]; i++) {
		struct al_allowlist *one = al_allow_new();
		bool always = false;
		for (size_t k = 0; pr->always_text && pr->always_text[k]; k++)
			always |= strcmp(pr->always_text[k], task->net_allow[i]) == 0;
		if (al_allow_add(one, task->net_allow[i], NULL) == 0 && !always) {
			const struct al_allow_rule *r = al_allow_rule_at(one, 0);
			if (!al_allow_find_within(pr->allow, r) ||
			    al_allow_find_within(pr->never_net, r))
				abort();
		}
		al_allow_free(one);
	}
}

static void check_decision(const struct al_decision *d, int r)
{
	if ((r < 0) != (d->n_refused + d->omitted > 0) || (r < 0 && r != -EPERM))
		abort();
	for (size_t i = 0; i < d->n_refused; i++) {
		const struct al_refusal *f = &d->refused[i];
		if (!f->task || !f->asked || !f->bound || !f->message ||
		    strpbrk(f->message, "\n\r") ||
		    (f->operator_path && !strstr(f->message, f->operator_path)))
			abort();
	}
	json_t *j = al_decision_json(d);
	/* Nothing left out: a value that is not UTF-8 included. */
	if (!j || json_array_size(json_object_get(j, "refused")) != d->n_refused ||
	    json_array_size(json_object_get(j, "decisions")) != d->n_explain)
		abort();
	char *s = json_dumps(j, 0);
	if (!s)
		abort();
	free(s);
	json_decref(j);
}

/* The rest of a run's path: the plan, its paths, the decider's question
 * and answer (when there is one), each checked as above. */
static void plan_and_decide(const struct al_operator *op, struct al_policy *task,
			    struct al_decision *d, const json_t *answer)
{
	struct al_errors errs = {0};
	struct al_plan *plan = NULL;

	if (al_plan_build_all(task, AL_PLAN_COMMAND_OPTIONAL, &plan, &errs) == 0) {
		int r = al_engine_plan(d, task, plan);
		check_decision(d, r);
		json_t *in = al_engine_decider_input(d, plan, "run-1");
		if (!in)
			abort();
		json_decref(in);
		al_plan_free(plan);
	}
	al_errors_clear(&errs);
	if (!answer || d->n_refused || d->omitted)
		return;
	int r = al_engine_apply_decider(d, task, answer, "the decider");
	check_decision(d, r);
	if (r < 0)
		return;
	check_within(d->profile, task);
	check_rules(d->profile, task);
	if (r == 1 && al_plan_build_all(task, AL_PLAN_COMMAND_OPTIONAL, &plan, &errs) == 0) {
		check_decision(d, al_engine_plan(d, task, plan));
		al_plan_free(plan);
	}
	al_errors_clear(&errs);
	(void)op;
}

static void hold(const struct al_operator *op, struct al_policy *task, const json_t *answer)
{
	struct al_decision d = {0};
	int r = al_engine_request(op, task, NULL, &d);

	check_decision(&d, r);
	if (r == 0) {
		check_within(d.profile, task);
		check_rules(d.profile, task);
		plan_and_decide(op, task, &d, answer);
	}
	al_decision_clear(&d);
	al_policy_free(task);
}

/* When the input has no answer: a decider that tries to widen the task
 * (every limit raised, rules added). What it leaves must be within the
 * profile all the same. */
static json_t *greedy_answer(void)
{
	json_t *limits = json_object();

	for (size_t i = 0; i < AL_OPL_COUNT; i++)
		if (strcmp(al_limit_defs[i].section, "limits") == 0)
			json_object_set_new(limits, al_limit_defs[i].key,
					    json_integer((json_int_t)1 << 62));
	return json_pack("{s:b, s:{s:[s, s, s]}, s:o}", "allow", 1, "network", "allow",
			 "api.example.org:443", "evil.example.net:443", "0.0.0.0/0:*", "limits",
			 limits);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data, *task_text = NULL, *answer_text = NULL;
	size_t op_len = size, task_len = 0, answer_len = 0;
	const char *nul = memchr(text, '\0', size);
	struct al_errors errs = {0};
	struct al_operator *op = NULL;
	json_t *answer = NULL;

	if (nul) {
		op_len = (size_t)(nul - text);
		task_text = nul + 1;
		task_len = size - op_len - 1;
		if ((nul = memchr(task_text, '\0', task_len))) {
			answer_text = nul + 1;
			answer_len = task_len - (size_t)(nul - task_text) - 1;
			task_len = (size_t)(nul - task_text);
		}
	}
	int r = al_operator_parse("op.json", text, op_len, &op, &errs);
	if ((r < 0) != (al_errors_count(&errs) > 0) || (r < 0) != (op == NULL))
		abort();
	al_errors_clear(&errs);
	if (r < 0)
		return 0;
	al_operator_resolve(op);
	if (answer_text)
		answer = json_loadb(answer_text, answer_len, JSON_DECODE_ANY, NULL);
	else
		answer = greedy_answer();

	hold(op, fixed_task(NULL, false), answer);
	hold(op, fixed_task(NULL, true), answer);
	if (op->n_profiles)
		hold(op, fixed_task(op->profiles[op->n_profiles - 1].name, true), answer);
	if (task_text) {
		struct al_policy *task = NULL;
		if (al_policy_load_string_all("task.json", task_text, task_len, &task, &errs) == 0)
			hold(op, task, answer);
		al_errors_clear(&errs);
	}
	json_decref(answer);
	al_operator_free(op);
	return 0;
}
