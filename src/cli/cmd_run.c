/* airlock run: flags (+ policy file) → plan → run layer → exit code. */
#include "cli.h"

#include <errno.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "config.h"
#include "core/cleanup.h"
#include "core/log.h"
#include "core/sys.h"
#include "core/util.h"
#include "policy/plan.h"
#include "run/run.h"
#include "supervisor/copy.h"

#define EXIT_SETUP 125

static void usage(FILE *f)
{
	fprintf(f, "Usage: airlock run [OPTIONS] [--] COMMAND [ARG...]\n\n"
		   "Run COMMAND in a sandbox: no host credentials, a read-only view of only the\n"
		   "named files, a scratch that disappears, no network, and runtime limits.\n\n"
		   "Options:\n");
	al_cli_print_options(f, AL_CMD_RUN);
	fprintf(f, "\nExit status: the command's own; 128+N if it died by signal N, or if\n"
		   "airlock was stopped by signal N and killed the sandbox; 124 on timeout;\n"
		   "137 if the memory, pids, CPU-time or output limit stopped it; 125 if\n"
		   "airlock failed or refused the request or the policy; 126 if the command\n"
		   "is not executable; 127 if it was not found; 122 if the command exited 0\n"
		   "but --copy-out skipped a name the host directory already had.\n");
}

/* The CLI is the one process that holds this run: SIGINT, SIGTERM, SIGHUP
 * and SIGQUIT go to it (blocked, so none is lost between clone and the
 * loop, and read from a signalfd in the run's loop), SIGPIPE is ignored.
 * With a terminal, SIGWINCH gives the sandbox's pty our new size. */
static void on_signal(struct al_signals *s, int sig, void *data)
{
	unsigned short rows, cols;

	(void)s;
	if (sig != SIGWINCH)
		al_run_signal(data, sig);
	else if (al_cli_term_size(STDIN_FILENO, &rows, &cols))
		al_run_resize(data, rows, cols);
}

/* -t with our stdin a terminal: raw mode (every key goes to the sandbox's
 * pty, whose line discipline turns ^C into its own SIGINT) and our size.
 * With stdin not a terminal (a pipe driving a REPL) nothing changes here
 * and the pty keeps its default size. */
static bool term_start(const struct al_run_request *req, struct al_supervisor_io *io,
		       struct al_error *err)
{
	if (!req->plan->tty || !isatty(STDIN_FILENO))
		return false;
	al_cli_term_size(STDIN_FILENO, &io->rows, &io->cols);
	if (al_cli_term_raw(STDIN_FILENO, err) < 0)
		return false;
	return true;
}

const struct al_run_result *al_cli_run(const struct al_run_request *req, struct al_run **ret,
				       struct al_error *start_err, struct al_error *record_err)
{
	static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
	struct al_supervisor_io io = {
	    .stdin_fd = STDIN_FILENO, .stdout_fd = STDOUT_FILENO, .stderr_fd = STDERR_FILENO};
	struct al_signals *sigs = NULL;
	struct al_error term_err = {0};
	sigset_t set;

	sigemptyset(&set);
	for (size_t i = 0; i < AL_ARRAY_SIZE(forwarded); i++)
		sigaddset(&set, forwarded[i]);
	if (term_start(req, &io, &term_err))
		sigaddset(&set, SIGWINCH);
	else if (term_err.msg[0])
		al_warn("warning: the terminal stays as it is (keys are not passed raw): %s",
			term_err.msg);
	sigprocmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* The gateway holds up to six fds per connection: use the whole hard
	 * limit (the sandbox gets its own, from the plan). */
	struct rlimit nofile;
	if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
		nofile.rlim_cur = nofile.rlim_max;
		setrlimit(RLIMIT_NOFILE, &nofile);
	}
	if (al_run_start(req, &io, ret, start_err) == 0) {
		sigs = al_loop_signals(al_run_loop(*ret), &set, on_signal, *ret);
		if (!sigs)
			al_warn("warning: signals will not reach the sandbox: %s", strerror(errno));
	}
	const struct al_run_result *res = al_run_wait(*ret, record_err);
	al_signals_free(sigs);
	al_cli_term_restore(); /* before anything more is said */
	return res;
}

/* Where the record and the audit go, opened before anything runs: the
 * record's directory must exist now (the supervisor confines itself to
 * it before the command starts); it is opened once, without following
 * links, and the record is written relative to it, replacing a regular
 * file or making one. A descriptor must be open for writing now. With
 * check_only (airlock check), the same checks and nothing created: the
 * audit file's directory is looked at, the file not opened. */
int al_cli_outputs_open(const struct al_cli *cli, const char *run_id, bool check_only,
			struct al_cli_outputs *o, struct al_error *err)
{
	if (cli->result_file &&
	    ((o->result_dirfd =
		  al_open_output_dir(cli->result_file, "--result", &o->result_name, err)) < 0 ||
	     al_result_check_target(o->result_dirfd, o->result_name, cli->result_file, err) < 0))
		return -EINVAL;
	if (cli->result_fd >= 0) {
		snprintf(o->result_what, sizeof(o->result_what),
			 cli->result_fd == 1 ? "--result - (stdout)" : "--result-fd %d",
			 cli->result_fd);
		if (al_fd_check_writable(cli->result_fd, o->result_what, err) < 0)
			return -EINVAL;
	}
	if (cli->audit_fd >= 0) /* never 0-2: the options refuse those */
		snprintf(o->audit_what, sizeof(o->audit_what), "--audit-fd %d", cli->audit_fd);
	if (check_only) {
		_cleanup_free_ char *name = NULL;
		_cleanup_close_ int dirfd =
		    cli->audit_file ? al_open_output_dir(cli->audit_file, "--audit", &name, err)
				    : -1;
		if ((cli->audit_file && dirfd < 0) ||
		    (cli->audit_fd >= 0 &&
		     al_fd_check_writable(cli->audit_fd, o->audit_what, err) < 0))
			return -EINVAL;
		return 0;
	}
	if ((cli->audit_file && al_audit_open(cli->audit_file, run_id, &o->audit, err) < 0) ||
	    (cli->audit_fd >= 0 &&
	     al_audit_open_fd(cli->audit_fd, o->audit_what, run_id, &o->audit, err) < 0))
		return -EINVAL;
	return 0;
}

void al_cli_outputs_close(struct al_cli_outputs *o)
{
	al_audit_close(o->audit);
	if (o->result_dirfd >= 0)
		close(o->result_dirfd);
	free(o->result_name);
	*o = (struct al_cli_outputs){.result_dirfd = -1};
}

/* The operator policy refused the request: every reason on stderr, one
 * policy.refused audit event, and a record saying so (exit 125). */
static void refused(const struct al_cli *cli, const struct al_request *b, const char *run_id)
{
	_cleanup_(al_errors_clear) struct al_errors lines = {0};
	struct al_cli_outputs o = {.result_dirfd = -1};
	struct al_error err = {0};
	char started[40];

	al_request_refusals(b, &lines);
	al_cli_print_errors(&lines);
	if (al_cli_outputs_open(cli, run_id, false, &o, &err) < 0) {
		al_err("%s", err.msg);
		al_cli_outputs_close(&o);
		return;
	}
	json_t *dec = al_decision_json(&b->dec), *reasons = json_array();
	for (size_t i = 0; i < b->dec.n_refused; i++)
		json_array_append_new(reasons, al_json_text(b->dec.refused[i].message));
	al_audit_emit(o.audit, "policy.refused",
		      json_pack("{s:O, s:O, s:o, s:O}", "profile", json_object_get(dec, "profile"),
				"operator_policy", json_object_get(dec, "operator_policy"),
				"reasons", reasons, "refused", json_object_get(dec, "refused")));
	al_audit_timestamp(started, sizeof(started));
	json_t *rec =
	    json_pack("{s:i, s:s, s:s, s:s, s:i, s:o}", "version", 1, "run", run_id, "started",
		      started, "reason", "refused", "exit_code", EXIT_SETUP, "policy", dec);
	if (cli->result_fd >= 0)
		al_result_write_json_fd(cli->result_fd, o.result_what, rec, &err);
	else if (o.result_dirfd >= 0)
		al_result_write_json(o.result_dirfd, o.result_name, cli->result_file, rec, &err);
	if (err.msg[0])
		al_err("%s", err.msg);
	json_decref(rec);
	al_cli_outputs_close(&o);
}

int al_cmd_run(int argc, char **argv)
{
	struct al_cli cli;
	_cleanup_(al_policy_freep) struct al_policy *policy = NULL;
	_cleanup_(al_request_clear) struct al_request rq = {0};
	struct al_request_config cfg;
	const struct al_backend_ops *backend;
	const struct al_plan *plan;
	struct al_cli_outputs out = {.result_dirfd = -1};
	struct al_run *run = NULL;
	struct al_error err = {0}, record_err = {0};
	_cleanup_(al_errors_clear) struct al_errors errs = {0};
	char line[2048], run_id[24];
	int code = EXIT_SETUP;

	al_random_id(run_id, sizeof(run_id));
	if (al_cli_start(&cli, AL_CMD_RUN, argc, argv, usage, &errs, &code))
		goto out;
	al_log_phase("options parsed");
	/* Every error in the flags, the file and the plan, one line each;
	 * every reason the operator policy refuses it. */
	al_cli_request_config(&cli, 0, run_id, &cfg);
	if (al_cli_policy(&cli, &policy, &errs) < 0) {
		al_cli_print_errors(&errs);
		goto out;
	}
	al_log_phase("policy read");
	al_request_init(&rq, &cfg, policy);
	if (al_request_plan(&rq, &errs) < 0) {
		al_cli_print_errors(&errs);
		if (rq.refused)
			refused(&cli, &rq, run_id);
		goto out;
	}
	al_log_phase("plan made");
	/* What this machine cannot enforce is refused before anything is
	 * written (once: the run layer is told). */
	if (al_request_probe(&rq, NULL, &err) < 0) {
		al_err("%s", err.msg);
		goto out;
	}
	al_log_phase("backend probed");
	backend = rq.backend;
	/* The secrets' values and the run's tokens, read and minted on the
	 * host now: a source that fails stops the run here. Before they are
	 * in this process's memory: no core dump of it (as root, not
	 * dumpable either, so no pipe handler gets one). */
	if (rq.plan->n_secrets || rq.plan->intercept) {
		struct rlimit no_core = {0, 0};
		if (setrlimit(RLIMIT_CORE, &no_core) < 0 ||
		    (geteuid() == 0 && prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)) {
			al_err("cannot turn off core dumps before reading secrets: %s",
			       strerror(errno));
			goto out;
		}
	}
	/* The credentials, and the plan final with what they add. */
	if (al_request_finish(&rq, &err) < 0) {
		al_err("%s", err.msg);
		goto out;
	}
	plan = rq.plan;
	if (al_cli_outputs_open(&cli, run_id, false, &out, &err) < 0) {
		al_err("%s", err.msg);
		goto out;
	}
	al_log_phase("plan built");
	if (al_log_get_level() >= AL_LOG_DEBUG) {
		/* -v's dump, gathered in memory and written at once: line by
		 * line on unbuffered stderr it took hundreds of writes (5-40 ms
		 * on a loaded machine), which -v's own phase times then
		 * showed before "host id slot taken". */
		char *dump = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&dump, &len);
		al_plan_dump_text(plan, f ? f : stderr);
		if (backend->describe(plan, f ? f : stderr, NULL, &err) < 0)
			al_error_clear(&err); /* the run says it again */
		if (f && fclose(f) == 0)
			fwrite(dump, 1, len, stderr);
		free(dump);
	}
	struct al_run_request req = {.plan = plan,
				     .audit = out.audit,
				     .run_id = run_id,
				     .cred = rq.cred,
				     .probed = rq.probed,
				     .policy_file = cli.policy_file,
				     .result_dirfd = out.result_dirfd,
				     .result_name = out.result_name,
				     .result_path =
					 cli.result_file ? cli.result_file : out.result_what,
				     .result_to_fd = cli.result_fd >= 0,
				     .result_fd = cli.result_fd,
				     .confine_self = true};
	const struct al_run_result *res = al_cli_run(&req, &run, &err, &record_err);
	if (err.msg[0])
		al_err("%s", err.msg);
	else if (al_result_describe(plan, res, line, sizeof(line)))
		al_err("%s", line);
	/* What was refused, for an agent reading stderr (not with -q). */
	if (al_result_denied_summary(res, line, sizeof(line)))
		al_warn("%s", line);
	/* A command that failed with no network at all may have failed for
	 * want of it: say so once, after the run (not with -q), where the
	 * backend can give it one. */
	const struct al_backend_ops *ops = al_backend_lookup(plan->backend);
	if (!plan->gateway && res->exit_code != 0 && ops &&
	    (ops->facts->features & AL_BACKEND_NETWORK) &&
	    (res->reason == AL_END_EXITED || res->reason == AL_END_SIGNALED))
		al_warn("the sandbox had no network (the policy allows no host); --allow HOST:PORT "
			"opens one");
	for (size_t i = 0; i < json_array_size(res->copy_out); i++) {
		const json_t *report = json_array_get(res->copy_out, i);
		if (al_copy_out_summary(report, al_log_get_level() >= AL_LOG_DEBUG, line,
					sizeof(line)))
			al_warn("%s", line);
		/* Each name the host had already, on a line of its own. */
		for (size_t k = 0; al_copy_out_existing_line(report, k, line, sizeof(line)); k++)
			al_warn("%s", line);
	}
	al_debug("exit %d after %llu ms; stdout %llu bytes, stderr %llu bytes", res->exit_code,
		 (unsigned long long)res->wall_ms, (unsigned long long)res->stdout_bytes,
		 (unsigned long long)res->stderr_bytes);
	code = res->exit_code;
	if (record_err.msg[0]) {
		al_err("%s", record_err.msg);
		code = EXIT_SETUP;
	}
	al_run_free(run);
out:
	al_cli_outputs_close(&out);
	al_cli_clear(&cli);
	return code;
}
