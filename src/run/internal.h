/* What run.c and session.c share (internal to src/run). */
#pragma once

#include "run/run.h"
#include "run/session.h"

struct al_exec;

struct al_run {
	struct al_run_request req;
	char run_id[64];
	json_t *creds;	      /* the run's credentials (al_cred_json), for the record */
	char started[40];     /* RFC 3339, UTC */
	const char *platform; /* ops->platform(), for run.start and the record */
	struct al_loop *loop;
	struct al_sandbox sb;
	struct al_supervisor *sup;
	struct al_run_result res;
	struct al_error record_err;
	bool ended;
	/* A session's execs (session.c). */
	struct al_exec_events exec_ev;
	struct al_exec **execs;
	size_t n_execs;
	uint32_t next_exec;
	/* A pool's sandbox once claimed (claim.c): the request's plan
	 * (borrowed), whose environment and workdir each exec gets. */
	const struct al_plan *claim;
	bool paused; /* frozen by al_run_pause: its clocks stopped */
};

/* session.c: bind the sandbox's exec events to the run (before start);
 * kill and end every exec still running (the run is ending). */
void al_session_attach(struct al_run *run);
void al_session_end(struct al_run *run);

/* claim.c: the environment an exec gets over the sandbox's (a new list,
 * al_strv_free; NULL when the run was not claimed: req_env as it is), and
 * its directory when the request names none. */
char **al_claim_exec_env(const struct al_run *run, char *const *req_env);
const char *al_claim_exec_cwd(const struct al_run *run, const char *req_cwd);
/* Thaw a paused sandbox before it is killed or signalled (a frozen v1 task
 * takes no signal, not even SIGKILL, until thawed). */
void al_session_thaw(struct al_run *run);
