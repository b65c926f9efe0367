/* pool_driver: the test driver of a warm pool's claim on the native
 * backend (run_pool.py); session_driver.c is its sibling for sessions
 * (pauses, terminals). Without --pool it builds a plan (the sandbox's memory limit from --memory), starts a
 * session, runs each SCRIPT as `/bin/sh -c SCRIPT` one after another (with
 * --exec-memory as its own limit), prints one JSON line per exec (its
 * record with its stdout and stderr), then kills the session and prints
 * {"run_end": REASON}. Exit 0 if every step could be taken, 1 if not.
 *
 * With --pool, a warm pool's sandbox and its claim (docs/pool.md), each
 * plan built from a task request file through the request layer as the
 * daemon builds one (no operator policy):
 *   1. the session is started from POOL.json with pool set and no
 *      credentials; once ready, an exec is tried and must be refused:
 *      {"held": true, "exec": {"errno": E, "error": MSG}};
 *   2. the driver waits for a line on its stdin (the test tries the held
 *      gateway from the host meanwhile), stepping the run;
 *   3. with --misfit, a claim by MISFIT.json (which must not fit) and an
 *      exec after it: {"misfit": {"errno", "error", "reasons"}, "exec": ..};
 *   4. the claim by CLAIM.json (its secrets read here, in the process that
 *      holds only this sandbox) and a second claim by the same request:
 *      {"claim": {"errno": 0}}, {"second_claim": {"errno", "error"}};
 *   5. the SCRIPTs as execs, as above;
 *   6. with --wait-end the session is left to its lifetime, else killed:
 *      {"run_end": REASON, "ms_since_claim": N}.
 * --audit FILE writes the run's audit stream there.
 *
 * usage: pool_driver [--memory BYTES] [--exec-memory BYTES]
 *                       [--exec-timeout MS] SCRIPT...
 *        pool_driver --pool POOL.json --claim CLAIM.json
 *                       [--misfit MISFIT.json] [--audit FILE] [--wait-end 1]
 *                       SCRIPT... */
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "audit/audit.h"
#include "backend/backend.h"
#include "core/sys.h"
#include "core/util.h"
#include "policy/plan.h"
#include "policy/policy.h"
#include "request/request.h"
#include "run/run.h"
#include "run/session.h"
#include "driver_request.h"

struct done {
	char out[65536], err[65536];
	size_t n_out, n_err;
	struct al_exec_result res;
	int ended;
};

static void on_output(void *data, int which, const void *buf, size_t len)
{
	struct done *d = data;
	char *dst = which ? d->err : d->out;
	size_t *n = which ? &d->n_err : &d->n_out;
	size_t room = sizeof(d->out) - 1 - *n;

	if (len > room)
		len = room;
	memcpy(dst + *n, buf, len);
	*n += len;
}

static void on_ended(void *data, const struct al_exec_result *res)
{
	struct done *d = data;
	d->res = *res;
	d->ended = 1;
}

static void print_json(json_t *o)
{
	char *s = json_dumps(o, JSON_COMPACT);
	printf("%s\n", s);
	fflush(stdout);
	free(s);
	json_decref(o);
}

static json_t *outcome(int r, const struct al_error *err)
{
	return json_pack("{s:i, s:s}", "errno", r < 0 ? -r : 0, "error", r < 0 ? err->msg : "");
}

/* An exec tried where none may run yet. */
static json_t *try_exec(struct al_run *run)
{
	static char *xargv[] = {"/bin/true", NULL};
	static const struct al_exec_request xr = {.argv = xargv};
	static struct done d;
	const struct al_exec_io xio = {.data = &d, .output = on_output, .ended = on_ended};
	struct al_exec *x = NULL;
	struct al_error err = {0};
	int r = al_run_exec(run, &xr, &xio, &x, &err);

	if (r == 0) /* wrongly started: the test sees errno 0 */
		al_exec_signal(x, SIGKILL);
	return outcome(r, &err);
}

/* Step the run until a line comes on stdin (or it ends). */
static void hold_until_told(struct al_run *run)
{
	char line[64];

	for (;;) {
		struct pollfd p = {.fd = 0, .events = POLLIN};
		if (poll(&p, 1, 0) > 0) {
			if (!fgets(line, sizeof(line), stdin) || strchr(line, '\n'))
				return;
			continue;
		}
		if (al_run_step(run, 20))
			return;
	}
}

struct pool_opts {
	const char *pool, *claim, *misfit, *audit;
	bool wait_end;
};

static int run_scripts(struct al_run *run, char **scripts, int n, uint64_t exec_memory,
		       int64_t exec_timeout);

static int pool_main(const struct pool_opts *o, char **scripts, int n)
{
	struct driver_req pool, want, misfit = {0};
	struct al_audit *audit = NULL;
	struct al_run *run = NULL;
	struct al_error err = {0};
	char run_id[32];
	int r;

	snprintf(run_id, sizeof(run_id), "pool-%d", (int)getpid());
	/* The claim's secrets come into this process: no core dump of it. */
	struct rlimit no_core = {0, 0};
	if (setrlimit(RLIMIT_CORE, &no_core) < 0 || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0) {
		perror("pool_driver: no core dumps");
		return 1;
	}
	if (o->audit && al_audit_open(o->audit, run_id, &audit, &err) < 0) {
		fprintf(stderr, "pool_driver: %s\n", err.msg);
		return 1;
	}
	if (driver_request(o->pool, run_id, &pool) < 0)
		return 1;
	static const struct al_supervisor_io io = {
	    .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1};
	struct al_run_request rreq = {.plan = pool.rq.plan,
				      .audit = audit,
				      .run_id = run_id,
				      .probed = pool.rq.probed,
				      .result_dirfd = -1,
				      .session = true,
				      .pool = true};
	if (al_run_start(&rreq, &io, &run, &err) < 0) {
		fprintf(stderr, "pool_driver: start: %s\n", err.msg);
		return 1;
	}
	for (int k = 0; k < 3000 && !al_run_session_ready(run); k++)
		if (al_run_step(run, 10))
			break;
	if (!al_run_session_ready(run)) {
		fprintf(stderr, "pool_driver: the session did not get ready\n");
		goto fail;
	}
	print_json(json_pack("{s:b, s:o}", "held", true, "exec", try_exec(run)));
	hold_until_told(run);
	if (o->misfit) {
		struct al_errors why = {0};
		if (driver_request(o->misfit, run_id, &misfit) < 0)
			goto fail;
		r = al_run_claim(run, misfit.rq.plan, misfit.rq.cred, &why, &err);
		json_t *reasons = json_array();
		for (size_t i = 0; i < why.n; i++)
			json_array_append_new(reasons, json_string(why.v[i].text));
		al_errors_clear(&why);
		json_t *m = outcome(r, &err);
		json_object_set_new(m, "reasons", reasons);
		print_json(json_pack("{s:o, s:o}", "misfit", m, "exec", try_exec(run)));
	}
	if (driver_request(o->claim, run_id, &want) < 0)
		goto fail;
	uint64_t claimed_at = al_now_ms();
	r = al_run_claim(run, want.rq.plan, want.rq.cred, NULL, &err);
	print_json(json_pack("{s:o}", "claim", outcome(r, &err)));
	if (r < 0)
		goto fail;
	r = al_run_claim(run, want.rq.plan, want.rq.cred, NULL, &err);
	print_json(json_pack("{s:o}", "second_claim", outcome(r, &err)));
	if (run_scripts(run, scripts, n, 0, 0) < 0)
		goto fail;
	if (!o->wait_end)
		al_run_kill(run);
	const struct al_run_result *res = al_run_wait(run, NULL);
	print_json(json_pack("{s:s, s:I}", "run_end", al_reason_name(res->reason), "ms_since_claim",
			     (json_int_t)(al_now_ms() - claimed_at)));
	al_run_free(run);
	al_audit_close(audit);
	driver_request_clear(&want);
	if (o->misfit)
		driver_request_clear(&misfit);
	driver_request_clear(&pool);
	return 0;
fail: /* the sandbox ended and removed (its cgroups too); the plans may leak */
	al_run_free(run);
	return 1;
}

/* Each script as one exec, one after another, its record printed. */
static int run_scripts(struct al_run *run, char **scripts, int n, uint64_t exec_memory,
		       int64_t exec_timeout)
{
	struct al_error err = {0};

	for (int i = 0; i < n; i++) {
		static struct done d;
		char *xargv[] = {"/bin/sh", "-c", scripts[i], NULL};
		struct al_exec_request xr = {
		    .argv = xargv, .memory_bytes = exec_memory, .timeout_ms = exec_timeout};
		struct al_exec_io xio = {.data = &d, .output = on_output, .ended = on_ended};
		struct al_exec *x;
		memset(&d, 0, sizeof(d));
		if (al_run_exec(run, &xr, &xio, &x, &err) < 0) {
			fprintf(stderr, "pool_driver: exec: %s\n", err.msg);
			return -1;
		}
		while (!d.ended)
			if (al_run_step(run, -1))
				break;
		if (!d.ended) {
			fprintf(stderr, "pool_driver: the run ended during an exec\n");
			return -1;
		}
		json_t *o = al_exec_result_json(&d.res);
		json_object_set_new(o, "stdout", json_stringn(d.out, d.n_out));
		json_object_set_new(o, "stderr", json_stringn(d.err, d.n_err));
		print_json(o);
	}
	return 0;
}

int main(int argc, char **argv)
{
	uint64_t memory = 0, exec_memory = 0;
	int64_t exec_timeout = 0;
	struct pool_opts po = {0};
	int i = 1;

	signal(SIGPIPE, SIG_IGN);
	for (; i + 1 < argc && strncmp(argv[i], "--", 2) == 0; i += 2) {
		if (strcmp(argv[i], "--memory") == 0)
			memory = strtoull(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--exec-memory") == 0)
			exec_memory = strtoull(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--exec-timeout") == 0)
			exec_timeout = strtoll(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--pool") == 0)
			po.pool = argv[i + 1];
		else if (strcmp(argv[i], "--claim") == 0)
			po.claim = argv[i + 1];
		else if (strcmp(argv[i], "--misfit") == 0)
			po.misfit = argv[i + 1];
		else if (strcmp(argv[i], "--audit") == 0)
			po.audit = argv[i + 1];
		else if (strcmp(argv[i], "--wait-end") == 0)
			po.wait_end = strcmp(argv[i + 1], "0") != 0;
		else {
			fprintf(stderr, "pool_driver: unknown option %s\n", argv[i]);
			return 2;
		}
	}
	if (po.pool || po.claim) {
		if (!po.pool || !po.claim) {
			fprintf(stderr, "pool_driver: --pool and --claim go together\n");
			return 2;
		}
		return pool_main(&po, argv + i, argc - i);
	}
	struct al_policy *p = al_policy_new("session_driver");
	struct al_plan *plan = NULL;
	struct al_error err = {0};
	al_strv_push(&p->command, "/bin/true");
	if (memory)
		p->memory_bytes = memory;
	if (al_plan_build(p, 0, &plan, &err) < 0) {
		fprintf(stderr, "pool_driver: plan: %s\n", err.msg);
		return 1;
	}
	static const struct al_supervisor_io io = {
	    .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1};
	struct al_run_request req = {.plan = plan, .result_dirfd = -1, .session = true};
	struct al_run *run = NULL;
	if (al_run_start(&req, &io, &run, &err) < 0) {
		fprintf(stderr, "pool_driver: start: %s\n", err.msg);
		return 1;
	}
	for (int k = 0; k < 3000 && !al_run_session_ready(run); k++)
		if (al_run_step(run, 10))
			break;
	if (!al_run_session_ready(run)) {
		fprintf(stderr, "pool_driver: the session did not get ready\n");
		return 1;
	}
	printf("{\"scratch\": %s}\n", al_run_scratch_fd(run) >= 0 ? "true" : "false");
	fflush(stdout);
	if (run_scripts(run, argv + i, argc - i, exec_memory, exec_timeout) < 0)
		return 1;
	al_run_kill(run);
	const struct al_run_result *res = al_run_wait(run, NULL);
	printf("{\"run_end\": \"%s\"}\n", al_reason_name(res->reason));
	al_run_free(run);
	al_plan_free(plan);
	al_policy_free(p);
	return 0;
}
