/* What run.c and session.c share (internal to src/run). */
#pragma once

#include "run/run.h"
#include "run/session.h"

struct al_exec;

struct al_run {
	struct al_run_request req;
	char run_id[64];
	json_t *creds;	  /* the run's credentials (al_cred_json), for the record */
	char started[40]; /* RFC 3339, UTC */
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
};

/* session.c: bind the sandbox's exec events to the run (before start);
 * kill and end every exec still running (the run is ending). */
void al_session_attach(struct al_run *run);
void al_session_end(struct al_run *run);
