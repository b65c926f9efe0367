/* The policy engine: a task's request (struct al_policy: flags and its
 * policy file) held to the operator policy's profile (operator.h). Pure
 * functions over the parsed policies and the plan: no system calls (the
 * host was looked at when the plan was built and the operator file
 * loaded).
 *
 * The result is the intersection — a request within bounds runs exactly as
 * asked, a limit it leaves out takes the profile's default, rules the
 * operator always adds are added — or a refusal with every reason at once,
 * each naming the task's flag or JSON path, the value asked, and the bound
 * it breaks with the operator file and JSON path. A task can never widen
 * what the profile allows. Every decision is explained (where its value
 * came from) for `airlock check --explain`. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/error.h"
#include "policy/limits.h"
#include "policy/operator.h"
#include "policy/plan.h"
#include "policy/policy.h"

/* Where a decision's value came from. */
enum al_origin {
	AL_FROM_TASK,	  /* asked for, and within bounds */
	AL_FROM_DEFAULT,  /* the profile's own default value (the task asked for none) */
	AL_FROM_UNNAMED,  /* the profile: the task named none, so the one named "default" */
	AL_FROM_CEILING,  /* the task asked for none and airlock's own default is over
			   * the ceiling (or is no limit): the ceiling */
	AL_FROM_BUILTIN,  /* airlock's built-in value, within bounds (the profile sets none) */
	AL_FROM_FORCED,	  /* the operator adds it to every run */
	AL_FROM_DECIDER,  /* the external decider narrowed it */
	AL_FROM_OPERATOR, /* an operator bound in force (never rules) */
};

const char *al_origin_name(enum al_origin o);

struct al_explain {
	char *what;  /* the decision, in task-policy terms: "limits.memory", "mount /data" */
	char *value; /* what is in force: "256M", "ro /srv/jobs/a" */
	enum al_origin from;
	char *task;  /* the flag or file: JSON path it came from; NULL */
	char *bound; /* the operator bound behind it: "FILE: JSON path (text)"; NULL */
};

struct al_refusal {
	char *task;	     /* the flag as typed or "FILE: JSON path" */
	char *asked;	     /* the value asked */
	char *bound;	     /* the bound, as text: "at most 1G", "under /srv/jobs" */
	char *operator_path; /* "profiles.default.limits.memory.max" */
	char *message;	     /* the whole line */
};

#define AL_REFUSALS_MAX 100

struct al_decision {
	const struct al_operator *op; /* borrowed */
	const struct al_op_profile *profile;
	char *profile_name;
	struct al_explain *explain;
	size_t n_explain;
	struct al_refusal *refused;
	size_t n_refused;
	size_t omitted; /* refusals past AL_REFUSALS_MAX: counted, not kept */
	bool gateway;	/* the run has egress */
	bool planned;	/* al_engine_plan() was called: its decisions are [plan_mark, plan_end) */
	size_t plan_mark, plan_end;
};

/* Hold task to op: select the profile (task->profile, else "default"),
 * check every limit, the backend, the protections asked best-effort, the
 * environment and the egress rules, hosts and resolver; fill the limits
 * the task left out from the profile; add the rules the operator always
 * adds; and give the task (task->op) what its plan carries of the
 * operator policy: the profile, the file and its sha256, the never rules
 * and the decider. flags (may be NULL) is what the command line asked, to name flags
 * in messages. Returns 0, or -EPERM when anything was refused (d says
 * what). Call al_engine_plan() on the plan built from task afterwards. */
int al_engine_request(const struct al_operator *op, struct al_policy *task,
		      const struct al_policy *flags, struct al_decision *d);

/* The environment of one exec in a live sandbox (NAME=VALUE strings)
 * held to the profile d decided on, as the task's env is: a name the
 * profile's env.never matches, or env.allow does not, is refused. One
 * reason per name refused is added to reasons; 0, or -EPERM. With no
 * profile (no operator policy) nothing is refused. */
int al_engine_exec_env(const struct al_decision *d, char *const *env, struct al_errors *reasons);

/* Hold the plan built from the task to the profile: every host path it
 * shows (mounts, system directories and airlock's own binds, by their
 * resolved paths and identities), copies in and out of. Returns 0 or
 * -EPERM. */
int al_engine_plan(struct al_decision *d, const struct al_policy *task, const struct al_plan *plan);

/* What the external decider is asked once per run: the request as the
 * plan holds it (env names, never values). A new reference. */
json_t *al_engine_decider_input(const struct al_decision *d, const struct al_plan *plan,
				const char *run_id);

/* Narrow task with the decider's answer (result: true; false; or
 * {"allow": BOOL, "reasons": [TEXT...] or "reason": TEXT, "network":
 * {"allow": [RULE...]},
 * "limits": {KEY: VALUE...}}): a false or a malformed answer is a refusal
 * with its reason; kept rules are the task's rules the answer lists
 * (others are dropped; a rule it adds is ignored); a limit is lowered,
 * never raised. Returns 0, 1 when task changed (build the plan again), or
 * -EPERM. */
int al_engine_apply_decider(struct al_decision *d, struct al_policy *task, const json_t *result,
			    const char *decider);

/* Refuse with a reason that is not about one task value (the decider
 * could not be asked). */
void al_engine_refuse(struct al_decision *d, const char *task, const char *bound,
		      const char *operator_path, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* One refusal as data: {"task", "asked", "bound", "operator_path",
 * "message"}, as the record's "refused" lists it. A new reference. */
json_t *al_refusal_json(const struct al_refusal *r);

/* The refusals as error lines (for the CLI's printer). */
void al_decision_errors(const struct al_decision *d, struct al_errors *errs);

/* Every decision, one per line: "limits.memory = 256M  (profile default:
 * FILE: profiles.default.limits.memory.default)". */
void al_decision_print(const struct al_decision *d, FILE *f);

/* {"operator_policy": {"file", "sha256"}, "profile", "decisions": [...],
 * "refused": [...]}: check --explain --json, and the result record. */
json_t *al_decision_json(const struct al_decision *d);

void al_decision_clear(struct al_decision *d);
