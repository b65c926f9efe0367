/* airlock check: validate a policy (plus flags) and print the resolved plan,
 * like `httpd -n`. Nothing is created. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>

#include "backend/backend.h"
#include "config.h"
#include "core/cleanup.h"
#include "core/log.h"
#include "policy/kmem.h"
#include "policy/plan.h"

static void usage(FILE *f)
{
	fprintf(f, "Usage: airlock check [--policy FILE] [OPTIONS]\n\n"
		   "Validate a policy (and any flags over it) and print the resolved plan:\n"
		   "mounts in setup order, environment, limits, landlock rules and the\n"
		   "seccomp table. Exits 0 if the policy is valid, 125 if not.\n\n"
		   "Options:\n");
	al_cli_print_options(f, AL_CMD_CHECK);
}

int al_cmd_check(int argc, char **argv)
{
	struct al_cli cli;
	_cleanup_(al_policy_freep) struct al_policy *policy = NULL;
	_cleanup_(al_plan_freep) struct al_plan *plan = NULL;
	struct al_error err = {0};
	int code = 125;

	if (al_cli_start(&cli, AL_CMD_CHECK, argc, argv, usage, &code))
		goto out;
	if (al_cli_policy(&cli, &policy, &err) < 0 ||
	    al_plan_build(policy, AL_PLAN_COMMAND_OPTIONAL, &plan, &err) < 0) {
		al_err("%s", err.msg);
		goto out;
	}
	const struct al_backend_ops *backend = al_backend_lookup(plan->backend);
	if (!backend) {
		al_err("unknown backend \"%s\"", plan->backend);
		goto out;
	}
	/* The kernel-memory bound depends on this host's cgroup, which the
	 * plan (pure) does not look at. */
	enum al_sockmem sockmem = al_cgroup_host_socket_mode();
	if (cli.json) {
		_cleanup_free_ char *s = al_plan_dump_json(plan);
		json_t *o = json_loads(s, 0, NULL);
		if (!o) {
			al_err("internal error: the plan's JSON dump does not parse");
			goto out;
		}
		if (backend->describe(plan, NULL, o, &err) < 0) {
			json_decref(o);
			al_err("%s", err.msg);
			goto out;
		}
		json_object_set_new(o, "kernel_memory", al_kmem_json(plan, sockmem, NULL));
		_cleanup_free_ char *t = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		json_decref(o);
		printf("%s\n", t);
	} else {
		char kmem[512];
		_cleanup_free_ char *how = NULL;
		size_t how_len = 0;
		_cleanup_fclose_ FILE *f = open_memstream(&how, &how_len);
		/* Described before anything is printed: a refusal prints no
		 * "OK". */
		if (!f || backend->describe(plan, f, NULL, &err) < 0 || fflush(f) != 0) {
			al_err("%s", err.msg[0] ? err.msg : "describing the plan: out of memory");
			goto out;
		}
		printf("policy %s: OK\n", cli.policy_file ? cli.policy_file : "(flags only)");
		al_plan_dump_text(plan, stdout);
		fputs(how, stdout);
		al_kmem_describe(plan, sockmem, kmem, sizeof(kmem));
		printf("kernel memory: %s\n", kmem);
	}
	code = 0;
out:
	al_cli_clear(&cli);
	return code;
}
