/* The engine's part for credentials: secrets and tokens a task names are
 * the ones its profile grants, copied from the operator's definitions; a
 * task's allow rules take the options of the operator's rules they lie
 * within; the budget is bounded like a limit and priced by the operator. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "policy/engine-internal.h"

static const struct al_secret_def *op_def(const struct al_operator *op, const char *name)
{
	for (size_t i = 0; i < op->n_secrets; i++)
		if (strcmp(op->secrets[i]->name, name) == 0)
			return op->secrets[i];
	return NULL;
}

static bool granted(const struct al_op_profile *pr, const char *name)
{
	for (size_t i = 0; pr->grants && pr->grants[i]; i++)
		if (strcmp(pr->grants[i], name) == 0)
			return true;
	return false;
}

static void check_secrets(struct al_decision *d, struct al_policy *task)
{
	const struct al_op_profile *pr = d->profile;
	_cleanup_free_ char *list = al_strv_join(pr->grants, ", ");

	for (size_t i = 0; i < task->n_secret_defs; i++) {
		const struct al_secret_def *def = task->secret_defs[i];
		engine_refuse(
		    d, def->where, def->name, list, engine_path(pr, "secrets"),
		    "%s: under an operator policy, secrets and tokens are the operator's "
		    "to define; name one the profile %s grants with --secret NAME (it grants: "
		    "%s)",
		    def->where, pr->name, list[0] ? list : "none");
	}
	for (size_t i = 0; i < task->n_secret_defs; i++)
		al_secret_def_free(task->secret_defs[i]);
	free(TAKE_PTR(task->secret_defs));
	task->n_secret_defs = 0;
	for (size_t i = 0; task->secret_names && task->secret_names[i]; i++) {
		const char *name = task->secret_names[i];
		const char *asked = task->secret_name_where[i];
		_cleanup_free_ char *ref = asked ? xstrdup(asked) : xasprintf("secret %s", name);
		const struct al_secret_def *def = op_def(d->op, name);
		if (!def) {
			/* Not even defined: say so, rather than that it is not granted. */
			engine_refuse(d, ref, name, list, engine_path(pr, "secrets"),
				      "%s: the operator policy %s defines no secret or token named "
				      "%s (the profile %s grants: %s)",
				      ref, d->op->file, name, pr->name, list[0] ? list : "none");
			continue;
		}
		if (!granted(pr, name)) {
			engine_refuse(d, ref, name, list, engine_path(pr, "secrets"),
				      "%s: the profile %s does not grant %s, defined at %s (it "
				      "grants: %s)",
				      ref, pr->name, name, def->where, list[0] ? list : "none");
			continue;
		}
		al_policy_add_secret_def(task, al_secret_def_dup(def));
		_cleanup_free_ char *what = xasprintf("secret %s", name);
		engine_explain(d, what, name, AL_FROM_TASK, ref,
			       engine_bound(d, "%s.secrets", pr->where));
	}
	al_strv_free(TAKE_PTR(task->secret_names));
	al_strv_free(TAKE_PTR(task->secret_name_where));
}

static struct al_rule_opts *task_opts(struct al_policy *task, const char *rule)
{
	for (size_t i = task->n_rule_opts; i-- > 0;)
		if (strcmp(task->rule_opts[i]->rule, rule) == 0)
			return task->rule_opts[i];
	struct al_rule_opts *o = xcalloc(1, sizeof(*o));
	o->rule = xstrdup(rule);
	al_policy_add_rule_opts(task, o);
	return o;
}

/* Methods both lists allow. */
static char **intersect(char *const *a, char *const *b)
{
	char **v = xcalloc(1, sizeof(char *));
	for (size_t i = 0; a[i]; i++)
		for (size_t j = 0; b[j]; j++)
			if (strcmp(a[i], b[j]) == 0)
				al_strv_push(&v, a[i]);
	return v;
}

/* o's options onto t: false when nothing would be left (no method both
 * allow). */
static bool merge(struct al_rule_opts *t, const struct al_rule_opts *o)
{
	t->intercept |= o->intercept;
	if (o->ca_file) {
		free(t->ca_file);
		t->ca_file = xstrdup(o->ca_file);
	}
	if (o->methods) {
		char **m = t->methods ? intersect(t->methods, o->methods) : al_strv_dup(o->methods);
		al_strv_free(t->methods);
		t->methods = m;
		if (!m[0])
			return false;
	}
	/* Each operator rule's paths must hold: the lists one after the
	 * other, "" between them (filter.c reads them so). */
	if (o->paths && t->paths_also)
		al_strv_push(&t->paths_also, "");
	for (size_t i = 0; o->paths && o->paths[i]; i++)
		al_strv_push(&t->paths_also, o->paths[i]);
	if (o->max_body && (!t->max_body || o->max_body < t->max_body))
		t->max_body = o->max_body;
	return true;
}

static void check_rule_opts(struct al_decision *d, struct al_policy *task)
{
	const struct al_op_profile *pr = d->profile;

	for (size_t i = 0; i < task->n_rule_opts; i++) {
		struct al_rule_opts *o = task->rule_opts[i];
		if (!o->ca_file)
			continue;
		_cleanup_free_ char *ref = xasprintf("%s: network.allow %s", task->source, o->rule);
		engine_refuse(
		    d, ref, o->ca_file, NULL, engine_path(pr, "network.allow"),
		    "%s: the CA an upstream is checked against is the operator's to name "
		    "(the gateway reads it on the host): put \"ca\" in the profile's rule",
		    ref);
	}
	for (size_t i = 0; task->net_allow && task->net_allow[i]; i++) {
		_cleanup_(al_allow_freep) struct al_allowlist *one = al_allow_new();
		if (al_allow_add(one, task->net_allow[i], NULL) < 0)
			continue;
		for (size_t k = 0; k < pr->n_rule_opts; k++) {
			_cleanup_(al_allow_freep) struct al_allowlist *op = al_allow_new();
			const struct al_rule_opts *oo = pr->rule_opts[k];
			if (al_allow_add(op, oo->rule, NULL) < 0 ||
			    !al_allow_rule_within(al_allow_rule_at(one, 0),
						  al_allow_rule_at(op, 0)))
				continue;
			if (!merge(task_opts(task, task->net_allow[i]), oo)) {
				_cleanup_free_ char *ref = xasprintf(
				    "%s: network.allow %s", task->source, task->net_allow[i]);
				engine_refuse(
				    d, ref, task->net_allow[i], oo->rule,
				    engine_path(pr, "network.allow"),
				    "%s: no method is allowed both by the task and by the "
				    "operator's rule %s",
				    ref, oo->rule);
				continue;
			}
			_cleanup_free_ char *what =
			    xasprintf("rule options %s", task->net_allow[i]);
			engine_explain(d, what, oo->rule, AL_FROM_OPERATOR, NULL,
				       engine_bound(d, "%s.network (%s)", pr->where, oo->rule));
		}
	}
}

/* An operator rule with options that lies within a task's wider rule
 * (a task allowing *.internal, the operator checking api.internal's
 * requests) is added to the task's rules, so that connections to it take
 * its options; then rules with options go first, since the gateway takes
 * the first rule that matches. */
static void narrower_first(struct al_decision *d, struct al_policy *task)
{
	const struct al_op_profile *pr = d->profile;
	char **ordered = NULL, **rest = NULL;

	for (size_t k = 0; k < pr->n_rule_opts; k++) {
		const struct al_rule_opts *oo = pr->rule_opts[k];
		_cleanup_(al_allow_freep) struct al_allowlist *op = al_allow_new();
		bool have = false, within = false;
		if (al_allow_add(op, oo->rule, NULL) < 0)
			continue;
		for (size_t i = 0; task->net_allow && task->net_allow[i]; i++) {
			_cleanup_(al_allow_freep) struct al_allowlist *one = al_allow_new();
			have |= strcmp(task->net_allow[i], oo->rule) == 0;
			if (al_allow_add(one, task->net_allow[i], NULL) == 0 &&
			    al_allow_rule_within(al_allow_rule_at(op, 0), al_allow_rule_at(one, 0)))
				within = true;
		}
		if (have || !within)
			continue;
		al_strv_push(&task->net_allow, oo->rule);
		struct al_rule_opts *t = task_opts(task, oo->rule);
		if (!merge(t, oo))
			engine_refuse(
			    d, oo->rule, oo->rule, oo->rule, engine_path(pr, "network.allow"),
			    "network.allow %s: no method is allowed by the operator's rule",
			    oo->rule);
	}
	for (size_t i = 0; task->net_allow && task->net_allow[i]; i++) {
		const char *r = task->net_allow[i];
		if (al_rule_opts_find(task->rule_opts, task->n_rule_opts, r))
			al_strv_push(&ordered, r);
		else
			al_strv_push(&rest, r);
	}
	for (size_t i = 0; rest && rest[i]; i++)
		al_strv_push(&ordered, rest[i]);
	al_strv_free(rest);
	if (ordered) {
		al_strv_free(task->net_allow);
		task->net_allow = ordered;
	}
}

static void check_budget(struct al_decision *d, struct al_policy *task,
			 const struct al_policy *flags)
{
	const struct al_op_profile *pr = d->profile;
	struct al_budget *b = &task->budget;
	char asked[32], ceil[32];

	if (!pr->budget.set)
		return;
	_cleanup_free_ char *ref = xasprintf("%s: limits.budget", task->source);
	if (b->set && b->has_prices) {
		engine_refuse(d, ref, "prices", NULL, engine_path(pr, "limits.budget.prices"),
			      "%s.prices: the operator policy sets the prices; a task only sets "
			      "its max",
			      ref);
		return;
	}
	bool from_task = b->set;
	uint64_t max = b->set ? b->max : pr->budget_default ? pr->budget_default : pr->budget.max;
	al_budget_format(max, asked, sizeof(asked));
	al_budget_format(pr->budget.max, ceil, sizeof(ceil));
	if (max > pr->budget.max) {
		engine_refuse(d, ref, asked, ceil, engine_path(pr, "limits.budget.max"),
			      "%s.max %s is over the operator's ceiling %s", ref, asked, ceil);
		return;
	}
	al_budget_copy(b, &pr->budget);
	b->max = max;
	engine_explain(d, "limits.budget", asked, from_task ? AL_FROM_TASK : AL_FROM_DEFAULT,
		       from_task ? ref : NULL,
		       engine_bound(d, "%s.limits.budget (max %s)", pr->where, ceil));
	(void)flags;
}

void engine_check_cred(struct al_decision *d, struct al_policy *task, const struct al_policy *flags)
{
	check_secrets(d, task);
	check_rule_opts(d, task);
	narrower_first(d, task);
	check_budget(d, task, flags);
}
