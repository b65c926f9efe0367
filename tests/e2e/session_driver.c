/* A test driver for sessions on the native backend (there is no daemon
 * yet): builds a plan (the sandbox's memory limit from --memory, its pids
 * limit from --pids), starts a session, starts each --bg SCRIPT as a
 * background exec (not waited for), then runs each SCRIPT as
 * `/bin/sh -c SCRIPT` one after another (with --exec-memory as its own
 * limit), prints one JSON line per exec when it ends (its record with its
 * stdout, stderr, and t_ms: milliseconds since the session was ready),
 * kills the background execs still running, then kills the session and
 * prints {"run_end": REASON}. An exec not ended within --wait-ms (0: no
 * bound) prints {"stuck": ID, "t_ms": T} and the session is killed. Exit
 * 0 if every step could be taken, 1 if not.
 *
 * With --pause 1 the first SCRIPT is paused 300 ms after it starts: the
 * driver prints {"paused": ...} (the run's time left, and what an exec
 * asked for meanwhile got), waits for a line on its stdin, resumes, prints
 * {"resumed": ...}, and its record gets "wall_ms" (from its start to its
 * end, pause included).
 *
 * With --tty 1 each exec has a terminal (24 x 80, output unfiltered unless
 * --ttyfilter 1); --input TEXT is typed into it (then ^D), right away, or
 * with --resize ROWSxCOLS once its first output came, after resizing it.
 *
 * With --policy FILE the plan is that task request's, built through the
 * request layer with its credentials (driver_request.h) instead. With
 * --extend MS the lifetime is extended by MS once the session is ready
 * (al_run_extend: what was left plus MS) and the driver prints
 * {"extended": 0 or -errno, "error": MSG, "old_deadline": S,
 * "new_deadline": S}, the deadlines in seconds since the epoch.
 *
 * usage: session_driver [--memory BYTES] [--exec-memory BYTES]
 *                       [--exec-timeout MS] [--pause 1] [--tty 1]
 *                       [--ttyfilter 1] [--input TEXT] [--resize RxC]
 *                       [--pids N] [--wait-ms MS] [--bg SCRIPT]...
 *                       [--policy FILE] [--extend MS] SCRIPT...
 * Each exec's record is printed as it ends, with t_ms (since the session
 * was ready) and wall_ms (since the exec was asked for). */
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h"
#include "core/sys.h"
#include "core/util.h"
#include "policy/plan.h"
#include "policy/policy.h"
#include "run/run.h"
#include "run/session.h"
#include "driver_request.h"

#define MAX_BG 8

struct done {
	char out[65536], err[65536];
	size_t n_out, n_err;
	struct al_exec_result res;
	int ended;
	uint64_t asked; /* al_now_ms() when it was asked for */
};

/* --tty and --ttyfilter: every exec's */
static int tty, ttyfilter;

static struct timespec t_ready;

static long long since_ready(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t_ready.tv_sec) * 1000LL + (t.tv_nsec - t_ready.tv_nsec) / 1000000;
}

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

/* Print its record at once, so that the order and time of the ends show. */
static void on_ended(void *data, const struct al_exec_result *res)
{
	struct done *d = data;
	d->res = *res;
	d->ended = 1;
	json_t *o = al_exec_result_json(&d->res);
	json_object_set_new(o, "stdout", json_stringn(d->out, d->n_out));
	json_object_set_new(o, "stderr", json_stringn(d->err, d->n_err));
	json_object_set_new(o, "t_ms", json_integer(since_ready()));
	json_object_set_new(o, "wall_ms", json_integer((json_int_t)(al_now_ms() - d->asked)));
	char *s = json_dumps(o, JSON_COMPACT);
	printf("%s\n", s);
	fflush(stdout);
	free(s);
	json_decref(o);
}

static int start(struct al_run *run, const char *script, uint64_t mem, int64_t timeout,
		 struct done *d, struct al_exec **x)
{
	char *xargv[] = {"/bin/sh", "-c", (char *)script, NULL};
	struct al_exec_request xr = {.argv = xargv,
				     .memory_bytes = mem,
				     .timeout_ms = timeout,
				     .tty = tty,
				     .ttyfilter = ttyfilter};
	struct al_exec_io xio = {.data = d, .output = on_output, .ended = on_ended};
	struct al_error err = {0};

	memset(d, 0, sizeof(*d));
	d->asked = al_now_ms();
	if (al_run_exec(run, &xr, &xio, x, &err) < 0) {
		fprintf(stderr, "session_driver: exec: %s\n", err.msg);
		return -1;
	}
	return 0;
}

/* --extend: the lifetime extended by ms, the deadlines before and after. */
static void extend(struct al_run *run, uint64_t ms)
{
	struct al_error err = {0};
	int64_t now = (int64_t)time(NULL);
	uint64_t left = al_run_remaining_ms(run);
	int r = al_run_extend(run, left + ms, &err);
	json_t *o =
	    json_pack("{s:i, s:s, s:I, s:I}", "extended", r, "error", r ? err.msg : "",
		      "old_deadline", (json_int_t)(now + (int64_t)(left / 1000)), "new_deadline",
		      (json_int_t)(now + (int64_t)(al_run_remaining_ms(run) / 1000)));
	char *text = json_dumps(o, JSON_COMPACT);
	printf("%s\n", text);
	fflush(stdout);
	free(text);
	json_decref(o);
}

/* Pause the run 300 ms into the exec, resume on a line from stdin. */
static int pause_exec(struct al_run *run, struct done *d)
{
	uint64_t t = al_now_ms();
	char *argv[] = {"/bin/true", NULL}, line[64];
	struct al_exec_request xr = {.argv = argv};
	struct al_exec_io xio = {.data = d, .ended = on_ended};
	struct al_error err = {0};
	struct al_exec *x;

	while (al_now_ms() - t < 300 && !d->ended)
		if (al_run_step(run, 10))
			return -1;
	int r = al_run_pause(run);
	int busy = al_run_exec(run, &xr, &xio, &x, &err);
	printf("{\"paused\": %d, \"remaining_ms\": %llu, \"exec_while_paused\": %d, "
	       "\"ended_before\": %s}\n",
	       r, (unsigned long long)al_run_remaining_ms(run), busy, d->ended ? "true" : "false");
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return -1;
	r = al_run_resume(run);
	printf("{\"resumed\": %d, \"remaining_ms\": %llu}\n", r,
	       (unsigned long long)al_run_remaining_ms(run));
	fflush(stdout);
	return 0;
}

int main(int argc, char **argv)
{
	uint64_t memory = 0, exec_memory = 0, pids = 0;
	int64_t exec_timeout = 0, wait_ms = 0;
	uint64_t extend_ms = 0;
	const char *policy_file = NULL;
	const char *bg[MAX_BG];
	size_t n_bg = 0;
	int i = 1, pause = 0;
	unsigned rows = 0, cols = 0;
	const char *input = NULL;

	signal(SIGPIPE, SIG_IGN);
	for (; i + 1 < argc && strncmp(argv[i], "--", 2) == 0; i += 2) {
		if (strcmp(argv[i], "--memory") == 0)
			memory = strtoull(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--exec-memory") == 0)
			exec_memory = strtoull(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--exec-timeout") == 0)
			exec_timeout = strtoll(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--pause") == 0)
			pause = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--tty") == 0)
			tty = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--ttyfilter") == 0)
			ttyfilter = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--input") == 0)
			input = argv[i + 1];
		else if (strcmp(argv[i], "--resize") == 0 &&
			 sscanf(argv[i + 1], "%ux%u", &rows, &cols) == 2)
			;
		else if (strcmp(argv[i], "--pids") == 0)
			pids = strtoull(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--wait-ms") == 0)
			wait_ms = strtoll(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--policy") == 0)
			policy_file = argv[i + 1];
		else if (strcmp(argv[i], "--extend") == 0)
			extend_ms = strtoull(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--bg") == 0 && n_bg < MAX_BG)
			bg[n_bg++] = argv[i + 1];
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
	if (pids)
		p->pids = pids;
	static struct driver_req task;
	char run_id[32];
	snprintf(run_id, sizeof(run_id), "sdrv%d", (int)getpid());
	if (policy_file && driver_request(policy_file, run_id, &task) < 0)
		return 1;
	if (!policy_file && al_plan_build(p, 0, &plan, &err) < 0) {
		fprintf(stderr, "session_driver: plan: %s\n", err.msg);
		return 1;
	}
	static const struct al_supervisor_io io = {
	    .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1};
	struct al_run_request req = {.plan = policy_file ? task.rq.plan : plan,
				     .result_dirfd = -1,
				     .session = true,
				     .run_id = policy_file ? run_id : NULL,
				     .cred = policy_file ? task.rq.cred : NULL,
				     .probed = policy_file ? task.rq.probed : false};
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
	clock_gettime(CLOCK_MONOTONIC, &t_ready);
	printf("{\"scratch\": %s}\n", al_run_scratch_fd(run) >= 0 ? "true" : "false");
	fflush(stdout);
	if (extend_ms)
		extend(run, extend_ms);
	static struct done bgd[MAX_BG];
	struct al_exec *bgx[MAX_BG];
	for (size_t b = 0; b < n_bg; b++)
		if (start(run, bg[b], exec_memory, 0, &bgd[b], &bgx[b]) < 0)
			return 1;
	int rc = 0;
	for (; i < argc && rc == 0; i++) {
		static struct done d;
		struct al_exec *x;
		if (start(run, argv[i], exec_memory, exec_timeout, &d, &x) < 0)
			return 1;
		long long t0 = since_ready();
		if (pause-- > 0 && pause_exec(run, &d) < 0)
			return 1;
		if (rows) /* typed once it has said something, resized first */
			while (!d.ended && !d.n_out)
				if (al_run_step(run, -1))
					break;
		if (rows && !d.ended)
			al_exec_resize(x, (unsigned short)rows, (unsigned short)cols);
		if (input && !d.ended) {
			al_exec_stdin(x, input, strlen(input));
			al_exec_close_stdin(x);
		}
		while (!d.ended && (!wait_ms || since_ready() - t0 < wait_ms))
			if (al_run_step(run, wait_ms ? 50 : -1))
				break;
		if (!d.ended && wait_ms && al_run_session_ready(run)) {
			printf("{\"stuck\": \"%s\", \"t_ms\": %lld}\n", al_exec_id(x),
			       since_ready());
			fflush(stdout);
			rc = 1;
		} else if (!d.ended) {
			fprintf(stderr, "session_driver: the run ended during an exec\n");
			return 1;
		}
	}
	/* Background execs still running are killed (their records say so). */
	for (size_t b = 0; b < n_bg && rc == 0; b++) {
		if (!bgd[b].ended)
			al_exec_signal(bgx[b], SIGKILL);
		while (!bgd[b].ended && !al_run_step(run, 100))
			;
	}
	al_run_kill(run);
	const struct al_run_result *res = al_run_wait(run, NULL);
	printf("{\"run_end\": \"%s\"}\n", al_reason_name(res->reason));
	al_run_free(run);
	if (policy_file)
		driver_request_clear(&task);
	al_plan_free(plan);
	al_policy_free(p);
	return rc;
}
