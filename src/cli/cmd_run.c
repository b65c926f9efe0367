/* airlock run: flags (+ policy file) → plan → backend → exit code. */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "config.h"
#include "core/cleanup.h"
#include "core/log.h"
#include "core/sys.h"
#include "core/util.h"
#include "policy/plan.h"

#define EXIT_SETUP 125

static void usage(FILE *f)
{
	fprintf(f, "Usage: airlock run [OPTIONS] [--] COMMAND [ARG...]\n\n"
		   "Run COMMAND in a sandbox: no host credentials, a read-only view of only the\n"
		   "named files, a scratch that disappears, no network, and runtime limits.\n\n"
		   "Options:\n");
	al_cli_print_options(f, AL_CMD_RUN);
	fprintf(f, "\nExit status: the command's own; 128+N if it died by signal N; 124 on\n"
		   "timeout; 125 if airlock failed or refused the policy; 126 if the command\n"
		   "is not executable; 127 if it was not found.\n");
}

/* run.start: enough of the plan to tell later what was in force. */
static json_t *start_fields(const struct al_plan *p, const struct al_cli *cli)
{
	json_t *argv = json_array(), *mounts = json_array(), *allow = json_array();

	for (size_t i = 0; p->argv[i]; i++)
		json_array_append_new(argv, al_json_text(p->argv[i]));
	for (size_t i = 0; p->gateway && p->allow_text[i]; i++)
		json_array_append_new(allow, json_string(p->allow_text[i]));
	for (size_t i = 0; i < p->n_ops; i++)
		if (p->ops[i].kind == AL_OP_BIND && p->ops[i].ino)
			json_array_append_new(mounts, al_json_text(p->ops[i].what));
	return json_pack("{s:o, s:s, s:o, s:o, s:o, s:o, s:s, s:o, s:i, s:b}", "command", argv,
			 "backend", p->backend, "policy", al_json_text(cli->policy_file), "workdir",
			 al_json_text(p->workdir), "mounts", mounts, "limits",
			 json_pack("{s:I, s:I, s:I, s:I}", "timeout_ms", (json_int_t)p->timeout_ms,
				   "memory_bytes", (json_int_t)p->memory_bytes, "pids",
				   (json_int_t)p->pids, "output_bytes",
				   (json_int_t)p->output_bytes),
			 "network", p->gateway ? "gateway" : "none", "allow", allow, "landlock_abi",
			 p->landlock_abi, "rootless", p->rootless);
}

/* The result record's directory must exist now: the supervisor confines
 * itself to it before the command starts. It is opened once, without
 * following links, and the record is written relative to it. */
static int result_dir(const char *path, struct al_plan *plan, char **ret_name, struct al_error *err)
{
	int fd = al_open_output_dir(path, "--result", ret_name, err);

	if (fd < 0)
		return fd;
	plan->result_dirfd = fd;
	return 0;
}

int al_cmd_run(int argc, char **argv)
{
	struct al_cli cli;
	_cleanup_(al_policy_freep) struct al_policy *policy = NULL;
	_cleanup_(al_plan_freep) struct al_plan *plan = NULL;
	const struct al_backend_ops *backend;
	struct al_run_result res;
	struct al_audit *audit = NULL;
	struct al_error err = {0};
	char line[512], run_id[24];
	_cleanup_free_ char *result_name = NULL;
	int code = EXIT_SETUP;

	if (al_cli_start(&cli, AL_CMD_RUN, argc, argv, usage, &code))
		goto out;
	al_log_phase("options parsed");
	if (al_cli_policy(&cli, &policy, &err) < 0 || al_plan_build(policy, 0, &plan, &err) < 0) {
		al_err("%s", err.msg);
		goto out;
	}
	backend = al_backend_lookup(plan->backend);
	if (!backend) {
		al_err("unknown backend \"%s\"", plan->backend);
		goto out;
	}
	if (cli.result_file && result_dir(cli.result_file, plan, &result_name, &err) < 0) {
		al_err("%s", err.msg);
		goto out;
	}
	al_log_phase("plan built");
	if (al_log_get_level() >= AL_LOG_DEBUG)
		al_plan_dump_text(plan, stderr);
	al_random_id(run_id, sizeof(run_id));
	if (cli.audit_file && al_audit_open(cli.audit_file, run_id, &audit, &err) < 0) {
		al_err("%s", err.msg);
		goto out;
	}
	if (audit)
		al_audit_emit(audit, "run.start", start_fields(plan, &cli));
	if (al_backend_run(backend, plan, audit, &res, &err) < 0) {
		/* airlock could not run it: still leave a record saying so. */
		memset(&res, 0, sizeof(res));
		res.reason = AL_END_SETUP_ERROR;
		res.exit_code = EXIT_SETUP;
		snprintf(res.step, sizeof(res.step), "start");
		snprintf(res.msg, sizeof(res.msg), "%s", err.msg);
		al_err("%s", err.msg);
	} else if (al_result_describe(&res, line, sizeof(line))) {
		al_err("%s", line);
	}
	al_debug("exit %d after %llu ms; stdout %llu bytes, stderr %llu bytes", res.exit_code,
		 (unsigned long long)res.wall_ms, (unsigned long long)res.stdout_bytes,
		 (unsigned long long)res.stderr_bytes);
	if (audit)
		al_audit_emit(audit, "run.end", al_result_json(plan, &res, run_id));
	code = res.exit_code;
	if (cli.result_file && al_result_write(plan->result_dirfd, result_name, cli.result_file,
					       plan, &res, run_id, &err) < 0) {
		al_err("%s", err.msg);
		code = EXIT_SETUP;
	}
out:
	al_audit_close(audit);
	al_cli_clear(&cli);
	return code;
}
