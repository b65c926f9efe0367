/* The request layer: one task request to the plan a run is given, the
 * same for every front end (`airlock run`, `check`, `verify`, and the
 * daemon's sessions). It finds and loads the operator policy, lets the
 * engine (policy/engine.h) hold the task to its profile, builds the plan,
 * checks its paths, asks the external decider and builds the plan again
 * when the decider narrowed the task; then it probes the backend once and
 * opens the run's credentials, whose additions make the plan final
 * (al_plan_finish()): nothing changes the plan after that.
 *
 * Nothing in it is process-wide: it reads no environment variable (the
 * caller passes TERM and $AIRLOCK_OPERATOR_POLICY's value), keeps no
 * file-scope state, and a process may hold many requests at once. Errors
 * go to a struct al_errors, one entry each; a refusal's reasons are
 * rq->dec's, in the text `airlock check --explain` prints
 * (al_request_refusals()). Only the decider's question may wait on
 * another process: al_request_ask_start() gives it as a call for the
 * caller's loop, al_request_ask() waits for it (the CLI). A `command`
 * secret source runs during al_request_finish(), bounded by its timeout. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "backend/backend.h"
#include "core/error.h"
#include "cred/store.h"
#include "decider/decider.h"
#include "policy/engine.h"
#include "policy/operator.h"
#include "policy/plan.h"
#include "policy/policy.h"

/* What the front end says about the request; strings are borrowed and
 * must outlive the request. */
struct al_request_config {
	/* The operator policy the front end names (--operator-policy, a
	 * daemon's configuration), or NULL. */
	const char *operator_file;
	/* $AIRLOCK_OPERATOR_POLICY's value as the caller read it, or NULL. */
	const char *operator_env;
	/* The caller's TERM: a task with a terminal gets it unless it sets
	 * one, or its profile does not let a task set it. NULL: none. */
	const char *term;
	/* What the task set itself (the CLI's flags; borrowed, may be NULL):
	 * the engine's explanation names it as the task's. */
	const struct al_policy *task;
	unsigned plan_flags; /* al_plan_build()'s (AL_PLAN_COMMAND_OPTIONAL) */
	/* The run's id, for the decider's question and the credentials;
	 * NULL (check): the decider is not asked, nothing is opened. */
	const char *run_id;
	/* The daemon's client (airlock serve), or NULL (the CLI). With one,
	 * the operator policy's "serve" section must grant it the profile
	 * asked (none asked: its default profile); with no operator policy
	 * only uid 0 is served. A secret read from a descriptor is refused
	 * (a session's descriptors are the daemon's), and so, with no
	 * operator policy, are a task's secrets read from a command or the
	 * environment and its "copy" mounts: a task may only have what the
	 * operator granted. */
	const struct al_identity *identity;
	/* Host paths no run may show, copy in or copy out, whatever its
	 * profile (a daemon's socket, token file and operator policy, so that
	 * no sandbox reaches them); NULL-terminated, or NULL. */
	const char *const *never_paths;
};

/* One request. Fields are read-only for callers. */
struct al_request {
	const struct al_request_config *cfg;
	struct al_policy *policy; /* borrowed; the engine and the decider change it */
	char *file;		  /* the operator policy, or NULL: the run is unbounded */
	const char *how;	  /* how it was found ("--operator-policy", ...) */
	struct al_operator *op;
	struct al_decision dec;
	bool refused; /* dec says why */
	/* The plan: built by al_request_build(), final (plan->final) after
	 * al_request_finish(). */
	struct al_plan *plan;
	const struct al_backend_ops *backend; /* after al_request_probe() */
	bool probed;
	struct al_cred *cred; /* after al_request_finish(); NULL: none needed */
};

/* Set up rq for policy (borrowed; it must outlive rq) under cfg. */
void al_request_init(struct al_request *rq, const struct al_request_config *cfg,
		     struct al_policy *policy);
void al_request_clear(struct al_request *rq);

#define AL_REQUEST_ASK 1

/* Find and load the operator policy, hold the task to it and build the
 * plan (every reason at once: the request's, then the plan's paths).
 * Returns 0 with rq->plan built, AL_REQUEST_ASK with rq->plan built when
 * the external decider must be asked before it may run (only with a
 * run_id), or < 0: errors in the task, the files or the plan are in errs,
 * a refusal sets rq->refused with every reason in rq->dec. */
int al_request_build(struct al_request *rq, struct al_errors *errs);

/* The decider's question, without waiting: *ret is a call for the caller's
 * loop (al_decider_call_fd(), _events(), _deadline(), _step()); its
 * outcome goes to al_request_answer(). < 0 when it could not be asked:
 * then the request is refused (failing closed), as al_request_answer()
 * does. */
int al_request_ask_start(struct al_request *rq, struct al_decider_call **ret,
			 struct al_errors *errs);
/* The call's outcome: r and result as al_decider_call_step() gave them
 * (r < 0: err says why; result borrowed). Applies the answer: a narrowed
 * task is built again. 0, or < 0 with rq->refused and its reasons. */
int al_request_answer(struct al_request *rq, int r, json_t *result, const struct al_error *err,
		      struct al_errors *errs);
/* The same question, waited for (the CLI). */
int al_request_ask(struct al_request *rq, struct al_errors *errs);

/* al_request_build(), then al_request_ask() when the decider must be
 * asked: 0 with rq->plan, or < 0 as they say. */
int al_request_plan(struct al_request *rq, struct al_errors *errs);

/* What this machine cannot enforce, refused before anything is written:
 * the plan's backend (ops: NULL for the one it names) probed, once for
 * the run (the run layer is told, struct al_run_request's probed). 0, or
 * < 0 with err set. */
int al_request_probe(struct al_request *rq, const struct al_backend_ops *ops, struct al_error *err);

/* Open the run's credentials (cred/store.h: values read, tokens minted,
 * the CA made) when the plan has any, and make the plan final with what
 * they add. The caller has turned off core dumps of the process first
 * when the plan has secrets (process-wide state is the front end's). 0,
 * or < 0 with err set (a source that failed). */
int al_request_finish(struct al_request *rq, struct al_error *err);

/* The refusal's reasons, one line each ("refused: ..."), added to lines:
 * the list a front end reports (the CLI's stderr, a daemon's 403). */
void al_request_refusals(const struct al_request *rq, struct al_errors *lines);

/* The names of op's profiles under which the task passes the operator
 * policy and builds a plan, the decider not asked. The task is made afresh
 * for each (the engine fills in what it left out from the profile it is
 * held to) by make_task, which returns 0 with *ret, or < 0. A
 * NULL-terminated list (al_strv_free), NULL when there is none. */
char **al_request_profiles_allowing(
    const struct al_request_config *cfg, const struct al_operator *op,
    int (*make_task)(void *data, struct al_policy **ret, struct al_errors *errs), void *data);
