/* airlock run: flags (+ policy file) → plan → backend → exit code. */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>

#include "backend/backend.h"
#include "config.h"
#include "core/cleanup.h"
#include "core/log.h"
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

int al_cmd_run(int argc, char **argv)
{
	struct al_cli cli;
	_cleanup_(al_policy_freep) struct al_policy *policy = NULL;
	_cleanup_(al_plan_freep) struct al_plan *plan = NULL;
	const struct al_backend_ops *backend;
	struct al_run_result res;
	struct al_error err = {0};
	char line[512];
	int code = EXIT_SETUP;

	if (al_cli_parse(&cli, AL_CMD_RUN, argc, argv, &err) < 0) {
		al_err("%s", err.msg);
		goto out;
	}
	if (cli.help || cli.version) {
		if (cli.help)
			usage(stdout);
		else
			printf("airlock %s\n", AL_VERSION);
		code = 0;
		goto out;
	}
	if (al_cli_policy(&cli, &policy, &err) < 0 || al_plan_build(policy, 0, &plan, &err) < 0) {
		al_err("%s", err.msg);
		goto out;
	}
	backend = al_backend_lookup(plan->backend);
	if (!backend) {
		al_err("unknown backend \"%s\"", plan->backend);
		goto out;
	}
	if (al_log_get_level() >= AL_LOG_DEBUG)
		al_plan_dump_text(plan, stderr);
	if (al_backend_run(backend, plan, &res, &err) < 0) {
		al_err("%s", err.msg);
		goto out;
	}
	if (al_result_describe(&res, line, sizeof(line)))
		al_err("%s", line);
	al_debug("exit %d after %llu ms; stdout %llu bytes, stderr %llu bytes", res.exit_code,
		 (unsigned long long)res.wall_ms, (unsigned long long)res.stdout_bytes,
		 (unsigned long long)res.stderr_bytes);
	code = res.exit_code;
out:
	al_cli_clear(&cli);
	return code;
}
