/* The run layer: a request to a result. The CLI (`airlock run`, `airlock
 * verify`), and later the daemon and the OCI verbs, are thin front ends
 * over it. A run owns its backend sandbox, its supervisor, its run.start
 * and run.end audit events and its result record. Nothing in it is
 * process-wide: a process may hold many runs at once, each watched in its
 * own loop (al_run_loop), which a daemon can nest in its own through
 * al_loop_fd(). The caller ignores SIGPIPE. */
#pragma once

#include <stdbool.h>

#include "audit/audit.h"
#include "backend/backend.h"
#include "core/error.h"
#include "core/loop.h"
#include "policy/plan.h"
#include "supervisor/result.h"
#include "supervisor/supervisor.h"

struct al_run_request {
	const struct al_plan *plan; /* borrowed; must outlive the run */
	/* NULL: the backend the plan names. Tests pass &al_backend_fake. */
	const struct al_backend_ops *backend;
	struct al_audit *audit; /* borrowed; may be NULL */
	const char *run_id;	/* NULL: a new random one */
	/* The run's credentials (cred/store.h, borrowed; NULL: none): their
	 * list goes into run.start and the record, the gateway presents
	 * them. */
	struct al_cred *cred;
	const char *policy_file; /* for run.start; may be NULL */
	/* The result record: written as result_name in result_dirfd (from
	 * al_open_output_dir(); borrowed) when the run ends; result_path is
	 * for messages. result_dirfd -1: no record there. */
	int result_dirfd;
	const char *result_name;
	const char *result_path;
	/* Or, with result_to_fd, written to result_fd (an inherited
	 * descriptor, borrowed). */
	bool result_to_fd;
	int result_fd;
	/* The process holds only this run (the CLI): the supervisor confines
	 * the process before the command starts. */
	bool confine_self;
	/* `airlock verify`'s run: the checks before exec also read the user
	 * namespace's limits back from inside it (every run sets them and
	 * fails if the kernel refuses one; the read-back costs a process). */
	bool verify_all;
	/* A session (run/session.h): the sandbox is built and checked as
	 * for a command, then serves execs (al_run_exec) until it is killed
	 * or its timeout (its lifetime) ends it; the plan's argv is not run
	 * (it may be empty). max_execs: how many run at once (0: 16). */
	bool session;
	unsigned max_execs;
	/* A warm pool's sandbox (docs/pool.md; with session): made with no
	 * credentials, its gateway refusing every connection, its lifetime
	 * counted from al_run_claim(), which a request must call before its
	 * first exec. */
	bool pool;
	/* More members for run.start (borrowed, may be NULL): the OCI
	 * runtime's container, and the exceptions its config got. */
	json_t *start_extra;
	/* The caller probed the backend for this plan (request/request.h
	 * al_request_probe()): the run does not probe it again. */
	bool probed;
};

struct al_run;

/* Probe (unless req->probed), prepare and start the sandbox and its supervisor, and audit
 * run.start. Returns 0, or -errno with err set when airlock could not
 * start it; then nothing is left behind, run.end and the result record
 * (reason setup-error) are written as for any run, and *ret is still set,
 * so al_run_wait() gives that result. */
int al_run_start(const struct al_run_request *req, const struct al_supervisor_io *io,
		 struct al_run **ret, struct al_error *err);

/* The loop the run's fds are watched in. */
struct al_loop *al_run_loop(struct al_run *run);

/* Dispatch the run's loop once (at most timeout_ms; -1 no limit); true
 * once the run has ended (and its record is written). */
bool al_run_step(struct al_run *run, int timeout_ms);

/* Run the loop until the run ends; returns its result (owned by run).
 * record_err (may be NULL) gets the reason the result record could not be
 * written, if it could not (its msg stays empty otherwise). */
const struct al_run_result *al_run_wait(struct al_run *run, struct al_error *record_err);

/* The caller's terminal changed size (see al_supervisor_resize). */
void al_run_resize(struct al_run *run, unsigned short rows, unsigned short cols);

/* Pass a signal of the caller's to the run (see al_supervisor_signal). */
void al_run_signal(struct al_run *run, int sig);

/* Stop the run now: everything in the sandbox is killed through the
 * backend, and the run ends with reason killed (SIGKILL). */
int al_run_kill(struct al_run *run);

/* Ends the run first if it has not ended (as al_run_kill). */
void al_run_free(struct al_run *run);
