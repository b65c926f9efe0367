/* A test driver for sessions on the native backend (there is no daemon
 * yet): builds a plan (the sandbox's memory limit from --memory), starts a
 * session, runs each SCRIPT as `/bin/sh -c SCRIPT` one after another (with
 * --exec-memory as its own limit), prints one JSON line per exec (its
 * record with its stdout and stderr), then kills the session and prints
 * {"run_end": REASON}. Exit 0 if every step could be taken, 1 if not.
 *
 * usage: session_driver [--memory BYTES] [--exec-memory BYTES]
 *                       [--exec-timeout MS] SCRIPT... */
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/util.h"
#include "policy/plan.h"
#include "policy/policy.h"
#include "run/run.h"
#include "run/session.h"

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

int main(int argc, char **argv)
{
	uint64_t memory = 0, exec_memory = 0;
	int64_t exec_timeout = 0;
	int i = 1;

	signal(SIGPIPE, SIG_IGN);
	for (; i + 1 < argc && strncmp(argv[i], "--", 2) == 0; i += 2) {
		if (strcmp(argv[i], "--memory") == 0)
			memory = strtoull(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--exec-memory") == 0)
			exec_memory = strtoull(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--exec-timeout") == 0)
			exec_timeout = strtoll(argv[i + 1], NULL, 10);
		else {
			fprintf(stderr, "session_driver: unknown option %s\n", argv[i]);
			return 2;
		}
	}
	struct al_policy *p = al_policy_new("session_driver");
	struct al_plan *plan = NULL;
	struct al_error err = {0};
	al_strv_push(&p->command, "/bin/true");
	if (memory)
		p->memory_bytes = memory;
	if (al_plan_build(p, 0, &plan, &err) < 0) {
		fprintf(stderr, "session_driver: plan: %s\n", err.msg);
		return 1;
	}
	static const struct al_supervisor_io io = {
	    .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1};
	struct al_run_request req = {.plan = plan, .result_dirfd = -1, .session = true};
	struct al_run *run = NULL;
	if (al_run_start(&req, &io, &run, &err) < 0) {
		fprintf(stderr, "session_driver: start: %s\n", err.msg);
		return 1;
	}
	for (int k = 0; k < 3000 && !al_run_session_ready(run); k++)
		if (al_run_step(run, 10))
			break;
	if (!al_run_session_ready(run)) {
		fprintf(stderr, "session_driver: the session did not get ready\n");
		return 1;
	}
	printf("{\"scratch\": %s}\n", al_run_scratch_fd(run) >= 0 ? "true" : "false");
	fflush(stdout);
	for (; i < argc; i++) {
		static struct done d;
		char *xargv[] = {"/bin/sh", "-c", argv[i], NULL};
		struct al_exec_request xr = {
		    .argv = xargv, .memory_bytes = exec_memory, .timeout_ms = exec_timeout};
		struct al_exec_io xio = {.data = &d, .output = on_output, .ended = on_ended};
		struct al_exec *x;
		memset(&d, 0, sizeof(d));
		if (al_run_exec(run, &xr, &xio, &x, &err) < 0) {
			fprintf(stderr, "session_driver: exec: %s\n", err.msg);
			return 1;
		}
		while (!d.ended)
			if (al_run_step(run, -1))
				break;
		if (!d.ended) {
			fprintf(stderr, "session_driver: the run ended during an exec\n");
			return 1;
		}
		json_t *o = al_exec_result_json(&d.res);
		json_object_set_new(o, "stdout", json_stringn(d.out, d.n_out));
		json_object_set_new(o, "stderr", json_stringn(d.err, d.n_err));
		char *s = json_dumps(o, JSON_COMPACT);
		printf("%s\n", s);
		fflush(stdout);
		free(s);
		json_decref(o);
	}
	al_run_kill(run);
	const struct al_run_result *res = al_run_wait(run, NULL);
	printf("{\"run_end\": \"%s\"}\n", al_reason_name(res->reason));
	al_run_free(run);
	al_plan_free(plan);
	al_policy_free(p);
	return 0;
}
