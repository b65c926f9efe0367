/* The claim of a warm pool's sandbox (docs/pool.md): a session made ahead
 * of any request, with no credentials and its gateway refusing every
 * connection, taken by one request whose plan fits it
 * (policy/plan-fit.h). What the claim applies: the gateway's allowlist,
 * rule options and secrets (over its channel, before this returns), the
 * lifetime, and for each exec the request's environment and workdir. A
 * claimed sandbox is never claimed again. */
#include <errno.h>
#include <string.h>

#include "core/util.h"
#include "cred/store.h"
#include "policy/plan-fit.h"
#include "run/internal.h"

int al_run_claim(struct al_run *run, const struct al_plan *wanted, struct al_cred *cred,
		 struct al_errors *why, struct al_error *err)
{
	struct al_errors reasons = {0};
	int r;

	if (!run->req.pool || !run->req.session)
		return al_error_set(err, EPERM, "claim: the run is not a pool's sandbox");
	if (run->claim)
		return al_error_set(err, EALREADY, "claim: the sandbox was claimed already");
	if (!al_run_session_ready(run))
		return al_error_set(err, EAGAIN, "claim: the sandbox is not ready (or has ended)");
	if (al_plan_fits(run->req.plan, wanted, why ? why : &reasons) < 0) {
		struct al_error first = {0};
		al_errors_first(why ? why : &reasons, 0, &first);
		al_errors_clear(&reasons);
		return al_error_set(err, EINVAL, "claim: the request does not fit the sandbox (%s)",
				    first.msg);
	}
	if ((r = al_supervisor_claim(run->sup, wanted, cred, err)) < 0) {
		/* A gateway that failed or did not answer serves no one. */
		if (r != -EOPNOTSUPP && r != -E2BIG)
			al_run_kill(run);
		return r;
	}
	run->claim = wanted;
	json_t *creds = al_cred_json(cred);
	if (creds) {
		json_decref(run->creds);
		run->creds = json_incref(creds);
	}
	al_audit_emit(run->req.audit, "run.claim",
		      json_pack("{s:s?, s:I, s:I, s:o?}", "profile", wanted->profile, "timeout_ms",
				(json_int_t)wanted->timeout_ms, "allow",
				(json_int_t)al_allow_count(wanted->allow), "credentials", creds));
	return 0;
}

/* Does the list v set the variable of entry (NAME=...)? */
static bool sets(char *const *v, const char *entry)
{
	const char *eq = strchr(entry, '=');
	size_t len = eq ? (size_t)(eq - entry) + 1 : strlen(entry);

	for (size_t i = 0; v && v[i]; i++)
		if (strncmp(v[i], entry, len) == 0)
			return true;
	return false;
}

char **al_claim_exec_env(const struct al_run *run, char *const *req_env)
{
	char **env = NULL;

	if (!run->claim)
		return NULL;
	for (size_t i = 0; run->claim->envp && run->claim->envp[i]; i++)
		if (!sets(req_env, run->claim->envp[i]))
			al_strv_push(&env, run->claim->envp[i]);
	for (size_t i = 0; req_env && req_env[i]; i++)
		al_strv_push(&env, req_env[i]);
	return env;
}

const char *al_claim_exec_cwd(const struct al_run *run, const char *req_cwd)
{
	return req_cwd || !run->claim ? req_cwd : run->claim->workdir;
}
