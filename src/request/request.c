/* One task request to its final plan (request.h). */
#include "request/request.h"

#include <errno.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

/* --- the daemon's clients, and the paths no run may show ---------------- */

static bool listed(char *const *v, const char *s)
{
	for (size_t i = 0; v && v[i]; i++)
		if (strcmp(v[i], s) == 0)
			return true;
	return false;
}

/* Under an operator policy: the profile asked (none: the identity's
 * default) must be one the policy's "serve" section grants the daemon's
 * client. Refusals go to rq->dec, then -EPERM. */
static int grant_profile(struct al_request *rq)
{
	const struct al_identity *who = rq->cfg->identity;
	struct al_policy *policy = rq->policy;
	char idtext[96], *def = NULL;
	char **grants = al_op_serve_grants(rq->op, who, &def);
	_cleanup_free_ char *list = al_strv_join(grants, ", ");

	al_identity_text(who, idtext, sizeof(idtext));
	if (!policy->profile && def)
		policy->profile = xstrdup(def);
	free(def);
	bool ok = policy->profile && listed(grants, policy->profile);
	al_strv_free(grants);
	if (ok)
		return 0;
	rq->dec = (struct al_decision){.op = rq->op};
	if (!list[0])
		al_engine_refuse(&rq->dec, idtext, "an entry in serve.identities",
				 "serve.identities",
				 "%s: the operator policy's \"serve\" section grants this "
				 "identity no profile (no entry for its uid, its groups or its "
				 "token)",
				 idtext);
	else
		al_engine_refuse(&rq->dec, idtext, list, "serve.identities",
				 "%s: profile \"%s\" is not granted to this identity (it may use: "
				 "%s)",
				 idtext, policy->profile, list);
	rq->refused = true;
	return -EPERM;
}

static const char *source_name(enum al_secret_source_kind k)
{
	return k == AL_SOURCE_FD	? "a descriptor"
	       : k == AL_SOURCE_COMMAND ? "a command"
					: "the environment";
}

/* What a daemon's task may not have: secrets read from a descriptor
 * (always), and with no operator policy (uid 0 only) secrets read from a
 * command or the daemon's environment and "copy" mounts, which would act
 * on the host as the daemon. Refusals to rq->dec. */
static void daemon_task_checks(struct al_request *rq)
{
	const struct al_policy *p = rq->policy;
	bool bounded = rq->op != NULL;

	for (size_t i = 0; i < p->n_secret_defs; i++) {
		const struct al_secret_def *d = p->secret_defs[i];
		enum al_secret_source_kind k = d->src.kind;
		if (k == AL_SOURCE_FD)
			al_engine_refuse(&rq->dec, d->where, "another source", NULL,
					 "%s: a secret read from a descriptor cannot be had in the "
					 "daemon (its descriptors are the daemon's own)",
					 d->where);
		else if (!bounded && (k == AL_SOURCE_COMMAND || k == AL_SOURCE_ENV))
			al_engine_refuse(
			    &rq->dec, d->where, "an operator policy", NULL,
			    "%s: the daemon has no operator policy, and a task's secret "
			    "may not be read from %s there (the operator grants secrets "
			    "in a profile)",
			    d->where, source_name(k));
	}
	for (size_t i = 0; !bounded && i < p->n_mounts; i++)
		if (p->mounts[i].copy)
			al_engine_refuse(&rq->dec, p->mounts[i].origin, "an operator policy", NULL,
					 "%s: the daemon has no operator policy, and a task may "
					 "not copy host files in there (\"copy\": true; the "
					 "operator's profile bounds what may be read)",
					 p->mounts[i].origin);
}

/* A host path the plan shows or copies against one never path (resolved,
 * with its identity when it exists). */
static void never_one(struct al_decision *d, const char *what, const char *real, bool have_id,
		      dev_t dev, ino_t ino, const char *never, const char *never_real,
		      const struct stat *nst)
{
	if (!real)
		return;
	if (al_path_is_under(real, never_real) ||
	    (have_id && nst && nst->st_dev == dev && nst->st_ino == ino))
		al_engine_refuse(d, what, never, NULL,
				 "%s: %s is, or lies inside, %s, which belongs to the daemon "
				 "serving this request: no run may show it",
				 what, real, never);
	else if (al_path_is_under(never_real, real))
		al_engine_refuse(d, what, never, NULL,
				 "%s: %s would show %s, which belongs to the daemon serving this "
				 "request: no run may show it",
				 what, real, never);
}

/* Every host path of plan against cfg->never_paths: refusals to d. */
static void check_never(const struct al_request_config *cfg, const struct al_plan *plan,
			struct al_decision *d)
{
	for (size_t k = 0; cfg->never_paths && cfg->never_paths[k]; k++) {
		const char *n = cfg->never_paths[k];
		char real[PATH_MAX];
		struct stat st;
		bool have = stat(n, &st) == 0;
		if (!realpath(n, real))
			snprintf(real, sizeof(real), "%s", n);
		for (size_t i = 0; i < plan->n_fs; i++) {
			const struct al_fs_entry *e = &plan->fs[i];
			if (e->kind != AL_FS_HOST && e->kind != AL_FS_DEVICE)
				continue;
			never_one(d, e->what, e->source, true, e->dev, e->ino, n, real,
				  have ? &st : NULL);
		}
		for (size_t i = 0; i < plan->n_copy_in; i++) {
			const struct al_copy_in *c = &plan->copy_in[i];
			_cleanup_free_ char *what = xasprintf("copy-in %s", c->path);
			never_one(d, what, c->host, true, c->dev, c->ino, n, real,
				  have ? &st : NULL);
		}
		for (size_t i = 0; i < plan->n_copy_out; i++) {
			const struct al_copy_out *c = &plan->copy_out[i];
			_cleanup_free_ char *what = xasprintf("copy-out %s", c->path);
			never_one(d, what, c->hostreal ? c->hostreal : c->hostdir, false, 0, 0, n,
				  real, NULL);
		}
	}
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
		const struct al_identity *who = cfg->identity;
		if (who && (who->token || who->uid != 0)) {
			char idtext[96];
			al_identity_text(who, idtext, sizeof(idtext));
			al_engine_refuse(
			    &rq->dec, idtext, "uid 0", NULL,
			    "%s: this daemon has no operator policy, and without one "
			    "it serves only uid 0 (root); the operator maps identities "
			    "to profiles in the operator policy's \"serve\" section",
			    idtext);
			rq->refused = true;
			return -EPERM;
		}
		if (policy->profile)
			return al_errors_add(
			    errs, EINVAL, NULL, NULL,
			    "profile \"%s\" asked for, but there is no operator "
			    "policy (none given with --operator-policy or $%s, and "
			    "no %s)",
			    policy->profile, AL_OPERATOR_ENV, AL_OPERATOR_DEFAULT_FILE);
		add_term(policy, cfg->term, NULL);
		if ((r = al_plan_build_all(policy, cfg->plan_flags, &rq->plan, errs)) < 0)
			return r;
		if (who)
			daemon_task_checks(rq);
		check_never(cfg, rq->plan, &rq->dec);
		if (refusing(rq)) {
			al_plan_free(TAKE_PTR(rq->plan));
			return -EPERM;
		}
		return 0;
	}
	if ((r = al_operator_load_file(rq->file, &rq->op, errs)) < 0)
		return r;
	if (cfg->identity && grant_profile(rq) < 0)
		return -EPERM;
	/* Every reason at once: the request's, then the plan's paths (a plan
	 * that cannot be built reports its own errors beside them). */
	hold(cfg, rq->op, policy, &rq->plan, &rq->dec, errs);
	if (rq->plan) {
		if (cfg->identity)
			daemon_task_checks(rq);
		check_never(cfg, rq->plan, &rq->dec);
	}
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
	int r = al_backend_admit(ops, rq->plan, false, err);

	if (r == 0)
		r = ops->probe(rq->plan, err);

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
