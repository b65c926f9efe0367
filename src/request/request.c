/* One task request to its final plan (request.h). */
#include "request/request.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/util.h"

/* A terminal is of little use to full-screen programs without its type:
 * the caller's TERM (a name, nothing secret) goes in unless the task sets
 * one, or the profile does not let a task set it. */
static void add_term(struct al_policy *p, const char *term, const struct al_op_profile *pr)
{
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

/* policy held to op's profile (policy->profile, else "default"): the
 * engine's request checks, then the plan's paths. A plan with errors
 * (they go to errs) is still held to the paths that resolved, so that
 * every refusal is said at once; it is never run. */
static void hold(const struct al_request_config *cfg, const struct al_operator *op,
		 struct al_policy *policy, struct al_plan **plan, struct al_decision *dec,
		 struct al_errors *errs)
{
	al_engine_request(op, policy, cfg->task, dec);
	add_term(policy, cfg->term, dec->profile);
	al_plan_build_all(policy, cfg->plan_flags | AL_PLAN_PARTIAL, plan, errs);
	if (*plan && dec->profile)
		al_engine_plan(dec, policy, *plan);
}

void al_request_init(struct al_request *rq, const struct al_request_config *cfg,
		     struct al_policy *policy)
{
	*rq = (struct al_request){.cfg = cfg, .policy = policy};
}

void al_request_clear(struct al_request *rq)
{
	al_cred_free(rq->cred);
	al_plan_free(rq->plan);
	al_decision_clear(&rq->dec);
	al_operator_free(rq->op);
	free(rq->file);
	*rq = (struct al_request){0};
}

static bool refusing(struct al_request *rq)
{
	rq->refused = rq->dec.n_refused || rq->dec.omitted;
	return rq->refused;
}

int al_request_build(struct al_request *rq, struct al_errors *errs)
{
	const struct al_request_config *cfg = rq->cfg;
	struct al_policy *policy = rq->policy;
	struct al_error err = {0};
	size_t before = al_errors_count(errs);
	int r;

	if (al_operator_find(cfg->operator_file, cfg->operator_env, &rq->file, &rq->how, &err) < 0)
		return al_errors_add_error(errs, &err);
	if (!rq->file) {
		if (policy->profile)
			return al_errors_add(
			    errs, EINVAL, NULL, NULL,
			    "profile \"%s\" asked for, but there is no operator "
			    "policy (none given with --operator-policy or $%s, and "
			    "no %s)",
			    policy->profile, AL_OPERATOR_ENV, AL_OPERATOR_DEFAULT_FILE);
		add_term(policy, cfg->term, NULL);
		return al_plan_build_all(policy, cfg->plan_flags, &rq->plan, errs);
	}
	if ((r = al_operator_load_file(rq->file, &rq->op, errs)) < 0)
		return r;
	/* Every reason at once: the request's, then the plan's paths (a plan
	 * that cannot be built reports its own errors beside them). */
	hold(cfg, rq->op, policy, &rq->plan, &rq->dec, errs);
	if (al_errors_count(errs) > before) {
		refusing(rq);
		al_plan_free(TAKE_PTR(rq->plan));
		return al_errors_first(errs, before, NULL);
	}
	if (refusing(rq)) {
		al_plan_free(TAKE_PTR(rq->plan));
		return -EPERM;
	}
	if (cfg->run_id && rq->op->decider && rq->op->decider->run_path)
		return AL_REQUEST_ASK;
	return 0;
}

int al_request_ask_start(struct al_request *rq, struct al_decider_call **ret,
			 struct al_errors *errs)
{
	const struct al_decider_conf *dc = rq->op->decider;
	json_t *input = al_engine_decider_input(&rq->dec, rq->plan, rq->cfg->run_id);
	struct al_error err = {0};
	int r = al_decider_call_start(dc, dc->run_path, input, ret, &err);

	json_decref(input);
	if (r < 0)
		return al_request_answer(rq, r, NULL, &err, errs);
	return 0;
}

/* How refusals name the decider. */
static char *decider_name(const struct al_decider_conf *dc)
{
	if (dc->socket)
		return xasprintf("the decider at %s %s", dc->socket, dc->run_path);
	return xasprintf("the decider at http://%s%s%s:%u%s", strchr(dc->host, ':') ? "[" : "",
			 dc->host, strchr(dc->host, ':') ? "]" : "", dc->port, dc->run_path);
}

int al_request_answer(struct al_request *rq, int r, json_t *result, const struct al_error *err,
		      struct al_errors *errs)
{
	(void)errs; /* the decider's part is refusals, in rq->dec */
	if (r < 0) {
		al_engine_refuse(&rq->dec, "(decider)", "an answer", "decider",
				 "%s (failing closed)", err->msg);
	} else {
		_cleanup_free_ char *name = decider_name(rq->op->decider);
		r = al_engine_apply_decider(&rq->dec, rq->policy, result, name);
	}
	if (r == 1) { /* narrowed: the plan again */
		al_plan_free(TAKE_PTR(rq->plan));
		/* What the narrowed task cannot be (hosts with no rule left)
		 * is the decider's refusal, not the task's error. */
		struct al_errors narrowed = {0};
		if (al_plan_build_all(rq->policy, rq->cfg->plan_flags, &rq->plan, &narrowed) < 0) {
			for (size_t i = 0; i < narrowed.n; i++)
				al_engine_refuse(&rq->dec, "(decider)", "", "decider",
						 "after the decider narrowed it, the run "
						 "cannot be built: %s",
						 narrowed.v[i].text);
			al_errors_clear(&narrowed);
			rq->refused = true;
			return -EPERM;
		}
		al_engine_plan(&rq->dec, rq->policy, rq->plan);
	}
	if (refusing(rq)) {
		al_plan_free(TAKE_PTR(rq->plan));
		return -EPERM;
	}
	return 0;
}

int al_request_ask(struct al_request *rq, struct al_errors *errs)
{
	const struct al_decider_conf *dc = rq->op->decider;
	json_t *input = al_engine_decider_input(&rq->dec, rq->plan, rq->cfg->run_id),
	       *result = NULL;
	struct al_error err = {0};
	int r = al_decider_ask(dc, dc->run_path, input, &result, &err);

	json_decref(input);
	r = al_request_answer(rq, r, result, &err, errs);
	json_decref(result);
	return r;
}

int al_request_plan(struct al_request *rq, struct al_errors *errs)
{
	int r = al_request_build(rq, errs);

	if (r == AL_REQUEST_ASK)
		r = al_request_ask(rq, errs);
	return r;
}

int al_request_probe(struct al_request *rq, const struct al_backend_ops *ops, struct al_error *err)
{
	if (!ops && !(ops = al_backend_lookup(rq->plan->backend)))
		return al_error_set(err, EINVAL, "unknown backend \"%s\"", rq->plan->backend);
	int r = ops->probe(rq->plan, err);

	rq->backend = ops;
	if (r < 0)
		return r;
	rq->probed = true;
	return 0;
}

int al_request_finish(struct al_request *rq, struct al_error *err)
{
	int r;

	if (rq->plan->n_secrets || rq->plan->intercept) {
		if ((r = al_cred_open(rq->plan, rq->cfg->run_id, &rq->cred, err)) < 0)
			return r;
		return al_plan_finish(rq->plan, &rq->cred->extra, err);
	}
	return al_plan_finish(rq->plan, NULL, err);
}

void al_request_refusals(const struct al_request *rq, struct al_errors *lines)
{
	al_decision_errors(&rq->dec, lines);
}

char **al_request_profiles_allowing(
    const struct al_request_config *cfg, const struct al_operator *op,
    int (*make_task)(void *data, struct al_policy **ret, struct al_errors *errs), void *data)
{
	char **names = NULL;

	for (size_t i = 0; i < op->n_profiles; i++) {
		_cleanup_(al_policy_freep) struct al_policy *policy = NULL;
		_cleanup_(al_plan_freep) struct al_plan *plan = NULL;
		_cleanup_(al_errors_clear) struct al_errors errs = {0};
		struct al_decision dec = {0};

		/* The request afresh each time: the engine fills in what
		 * it left out from the profile it is held to. */
		if (make_task(data, &policy, &errs) < 0)
			break;
		free(policy->profile);
		policy->profile = xstrdup(op->profiles[i].name);
		hold(cfg, op, policy, &plan, &dec, &errs);
		if (!dec.n_refused && !dec.omitted && al_errors_count(&errs) == 0)
			al_strv_push(&names, op->profiles[i].name);
		al_decision_clear(&dec);
	}
	return names;
}
