/* The operator policy between the task and its plan: find and load it,
 * let the engine (policy/engine.h) hold the task to its profile, build the
 * plan, check its paths, and ask the external decider. */
#include "cli.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "decider/decider.h"
#include "policy/operator.h"
#include "policy/plan.h"

/* A terminal is of little use to full-screen programs without its type:
 * airlock's own TERM (a name, nothing secret) goes in unless the policy
 * or a flag sets one, or the profile does not let a task set it. */
static void add_term(struct al_policy *p, const struct al_op_profile *pr)
{
	const char *term = getenv("TERM");
	bool ok = pr == NULL;

	for (size_t i = 0; p->env && p->env[i]; i++)
		if (strncmp(p->env[i], "TERM=", 5) == 0)
			return;
	if (p->tty <= 0 || !term || !term[0])
		return;
	for (size_t i = 0; pr && pr->env_allow && pr->env_allow[i]; i++)
		ok |= fnmatch(pr->env_allow[i], "TERM", 0) == 0;
	for (size_t i = 0; pr && pr->env_never && pr->env_never[i]; i++)
		ok &= fnmatch(pr->env_never[i], "TERM", 0) != 0;
	if (ok)
		al_policy_set_env(p, "TERM", term);
}

static int ask_decider(struct al_cli_bounds *b, struct al_policy *policy, struct al_plan *plan,
		       const char *run_id)
{
	const struct al_decider_conf *dc = b->op->decider;
	_cleanup_free_ char *name =
	    dc->socket
		? xasprintf("the decider at %s %s", dc->socket, dc->run_path)
		: xasprintf("the decider at http://%s%s%s:%u%s", strchr(dc->host, ':') ? "[" : "",
			    dc->host, strchr(dc->host, ':') ? "]" : "", dc->port, dc->run_path);
	json_t *input = al_engine_decider_input(&b->dec, plan, run_id), *result = NULL;
	struct al_error err = {0};
	int r;

	r = al_decider_ask(dc, dc->run_path, input, &result, &err);
	json_decref(input);
	if (r < 0) {
		al_engine_refuse(&b->dec, "(decider)", "an answer", "decider",
				 "%s (failing closed)", err.msg);
		return -EPERM;
	}
	r = al_engine_apply_decider(&b->dec, policy, result, name);
	json_decref(result);
	return r;
}

/* policy held to op's profile (policy->profile, else "default"): the
 * engine's request checks, then the plan's paths. A plan with errors
 * (they go to errs) is still held to the paths that resolved, so that
 * every refusal is said at once; it is never run. */
static void hold(const struct al_cli *cli, const struct al_operator *op, struct al_policy *policy,
		 unsigned flags, struct al_plan **plan, struct al_decision *dec,
		 struct al_errors *errs)
{
	al_engine_request(op, policy, cli->flags, dec);
	add_term(policy, dec->profile);
	al_plan_build_all(policy, flags | AL_PLAN_PARTIAL, plan, errs);
	if (*plan && dec->profile)
		al_engine_plan(dec, policy, *plan);
}

char **al_cli_profiles_allowing(const struct al_cli *cli, const struct al_operator *op,
				unsigned flags)
{
	char **names = NULL;

	for (size_t i = 0; i < op->n_profiles; i++) {
		_cleanup_(al_policy_freep) struct al_policy *policy = NULL;
		_cleanup_(al_plan_freep) struct al_plan *plan = NULL;
		_cleanup_(al_errors_clear) struct al_errors errs = {0};
		struct al_decision dec = {0};

		/* The request afresh each time: the engine fills in what
		 * it left out from the profile it is held to. */
		if (al_cli_policy(cli, &policy, &errs) < 0)
			break;
		free(policy->profile);
		policy->profile = xstrdup(op->profiles[i].name);
		hold(cli, op, policy, flags, &plan, &dec, &errs);
		if (!dec.n_refused && !dec.omitted && al_errors_count(&errs) == 0)
			al_strv_push(&names, op->profiles[i].name);
		al_decision_clear(&dec);
	}
	return names;
}

int al_cli_bound_plan(const struct al_cli *cli, struct al_policy *policy, unsigned flags,
		      const char *run_id, struct al_plan **ret, struct al_cli_bounds *b,
		      struct al_errors *errs)
{
	_cleanup_(al_plan_freep) struct al_plan *plan = NULL;
	struct al_error err = {0};
	size_t before = al_errors_count(errs);
	int r;

	*b = (struct al_cli_bounds){0};
	if (al_operator_find(cli->operator_file, &b->file, &b->how, &err) < 0)
		return al_errors_add_error(errs, &err);
	if (!b->file) {
		if (policy->profile)
			return al_errors_add(
			    errs, EINVAL, NULL, NULL,
			    "profile \"%s\" asked for, but there is no operator "
			    "policy (none given with --operator-policy or $%s, and "
			    "no %s)",
			    policy->profile, AL_OPERATOR_ENV, AL_OPERATOR_DEFAULT_FILE);
		add_term(policy, NULL);
		return al_plan_build_all(policy, flags, ret, errs);
	}
	if ((r = al_operator_load_file(b->file, &b->op, errs)) < 0)
		return r;
	/* Every reason at once: the request's, then the plan's paths (a plan
	 * that cannot be built reports its own errors beside them). */
	hold(cli, b->op, policy, flags, &plan, &b->dec, errs);
	if (al_errors_count(errs) > before) {
		b->refused = b->dec.n_refused || b->dec.omitted;
		return al_errors_first(errs, before, NULL);
	}
	if (run_id && !b->dec.n_refused && !b->dec.omitted && b->op->decider &&
	    b->op->decider->run_path) {
		r = ask_decider(b, policy, plan, run_id);
		if (r == 1) { /* narrowed: the plan again */
			al_plan_free(TAKE_PTR(plan));
			/* What the narrowed task cannot be (hosts with no rule
			 * left) is the decider's refusal, not the task's error. */
			struct al_errors narrowed = {0};
			if (al_plan_build_all(policy, flags, &plan, &narrowed) < 0) {
				for (size_t i = 0; i < narrowed.n; i++)
					al_engine_refuse(&b->dec, "(decider)", "", "decider",
							 "after the decider narrowed it, the run "
							 "cannot be built: %s",
							 narrowed.v[i].text);
				al_errors_clear(&narrowed);
				b->refused = true;
				return -EPERM;
			}
			al_engine_plan(&b->dec, policy, plan);
		}
	}
	if (b->dec.n_refused || b->dec.omitted) {
		b->refused = true;
		return -EPERM;
	}
	*ret = TAKE_PTR(plan);
	return 0;
}

void al_cli_bounds_clear(struct al_cli_bounds *b)
{
	al_decision_clear(&b->dec);
	al_operator_free(b->op);
	free(b->file);
	*b = (struct al_cli_bounds){0};
}
