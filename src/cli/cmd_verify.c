/* airlock verify: build the sandbox a policy describes, check every layer
 * from outside before exec (the same checks every run makes), then run a
 * probe inside — airlock's own binary, bound read-only — that attacks each
 * layer and reports. Prints one table; exit 0 when all is in force. */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/microvm/image.h"
#include "backend/process/process.h"
#include "cgroup/cgroup.h"
#include "config.h"
#include "core/cleanup.h"
#include "core/log.h"
#include "core/sys.h"
#include "core/util.h"
#include "ids/slots.h"
#include "policy/plan.h"
#include "run/run.h"

#define PROBE_PATH	  "/.airlock/airlock"
#define EXIT_NOT_IN_FORCE 2

static void usage(FILE *f)
{
	fprintf(f, "Usage: airlock verify [--policy FILE] [OPTIONS]\n\n"
		   "Build the sandbox the policy (and flags) describe, check from outside that\n"
		   "every layer is in force, then attack each layer from inside with a probe.\n"
		   "Exit status: 0 all in force, 2 something is not, 125 airlock failed.\n\n"
		   "Options:\n");
	al_cli_print_options(f, AL_CMD_VERIFY);
}

int al_cmd_verify(int argc, char **argv)
{
	struct al_cli cli;
	_cleanup_(al_policy_freep) struct al_policy *policy = NULL;
	const struct al_plan *plan;
	struct al_request_config cfg;
	struct al_run_result res;
	struct al_run *run = NULL;
	struct al_error err = {0};
	_cleanup_(al_errors_clear) struct al_errors errs = {0};
	_cleanup_(al_request_clear) struct al_request bounds = {0};
	char exe[PATH_MAX], run_id[24];
	int code = 125, bad = 0;

	if (al_cli_start(&cli, AL_CMD_VERIFY, argc, argv, usage, &errs, &code))
		goto out;
	if (al_cli_policy(&cli, &policy, &errs) < 0) {
		al_cli_print_errors(&errs);
		goto out;
	}
	/* The probe attacks the native layer's namespaces from inside; on the
	 * process backend, which has none, every such row would be "NOT IN
	 * FORCE" for a reason the layer states itself. */
	if (policy->backend && strcmp(policy->backend, "process") == 0) {
		al_err("verify: backend process is not served: its probe attacks the native "
		       "layer's namespaces (pid, mount, net, user) from inside, and this layer "
		       "has none by design; `airlock check --backend process` shows the "
		       "layers it puts in force (landlock, seccomp, the run's uid, cgroup, "
		       "nftables), `airlock backends` what it does not keep");
		goto out;
	}
	if (!realpath("/proc/self/exe", exe)) {
		al_err("cannot find airlock's own binary: %s", strerror(errno));
		goto out;
	}
	/* The probe replaces the policy's command. */
	al_strv_free(policy->command);
	policy->command = NULL;
	al_strv_push(&policy->command, PROBE_PATH);
	al_strv_push(&policy->command, "__probe");
	al_policy_add_mount(policy, exe, PROBE_PATH, AL_MOUNT_RO, 1, "verify probe");
	policy->mounts[policy->n_mounts - 1].own = true; /* airlock's, not the task's */
#ifdef __SANITIZE_ADDRESS__
	/* A sanitizer build of the probe: LeakSanitizer needs ptrace, which
	 * the sandbox denies (as it should). */
	al_policy_set_env(policy, "ASAN_OPTIONS", "detect_leaks=0");
#endif
	/* Held to the operator policy like a run: the probe is airlock's
	 * own, but the mounts, copies and limits are the request's. */
	al_random_id(run_id, sizeof(run_id));
	al_cli_request_config(&cli, 0, run_id, &cfg);
	al_request_init(&bounds, &cfg, policy);
	if (al_request_plan(&bounds, &errs) < 0) {
		if (bounds.refused)
			al_request_refusals(&bounds, &errs);
		al_cli_print_errors(&errs);
		goto out;
	}
	/* The probe replaces the command, and no secret is read: the plan
	 * is final as built. */
	if (al_request_probe(&bounds, NULL, &err) < 0 ||
	    al_plan_finish(bounds.plan, NULL, &err) < 0)
		goto fail;
	plan = bounds.plan;
	printf("%-16s %-15s %s\n", "LAYER", "STATUS", "DETAIL");
	printf("-- inside, attacked by the probe --\n");
	fflush(stdout);
	struct al_run_request req = {.plan = plan,
				     .run_id = run_id,
				     .result_dirfd = -1,
				     .confine_self = true,
				     .verify_all = true,
				     .probed = bounds.probed};
	struct al_error record_err = {0};
	const struct al_run_result *r = al_cli_run(&req, &run, &err, &record_err);
	if (err.msg[0])
		goto fail;
	res = *r;
	printf("-- outside, checked before exec --\n");
	bool cgroup_row = false;
	for (size_t i = 0; i < res.n_checks; i++) {
		const struct al_layer_check *c = &res.checks[i];
		printf("%-16s %-15s %s\n", c->layer, c->in_force ? "in force" : "NOT IN FORCE",
		       c->detail);
		bad += !c->in_force;
		cgroup_row |= strcmp(c->layer, "cgroup") == 0;
	}
	if (!cgroup_row && res.n_checks > 0) {
		/* A run may go ahead without a cgroup when only default limits
		 * were in play (with a warning); verify says so plainly. */
		printf("%-16s %-15s %s\n", "cgroup", "NOT IN FORCE",
		       "no cgroup: the memory, pids and CPU limits are not enforced");
		bad++;
	}
	if (res.reason == AL_END_SETUP_ERROR && bad == 0) {
		al_err("sandbox setup failed at step \"%s\": %s%s%s", res.step, res.msg,
		       res.err ? ": " : "", res.err ? strerror(res.err) : "");
		goto out;
	}
	if (res.reason != AL_END_EXITED && bad == 0) {
		char line[512];
		al_err("the probe did not finish: %s",
		       al_result_describe(plan, &res, line, sizeof(line)) ?: "killed");
		goto out;
	}
	if (res.exit_code != 0)
		bad++;
	printf("%s\n",
	       bad ? "RESULT: some layers are NOT in force" : "RESULT: every layer is in force");
	code = bad ? EXIT_NOT_IN_FORCE : 0;
	goto out;
fail:
	al_err("%s", err.msg);
out:
	al_run_free(run);
	al_cli_clear(&cli);
	return code;
}

int al_cmd_gc(int argc, char **argv)
{
	struct al_error err = {0};
	int n;

	if (argc > 0 && (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0)) {
		printf("Usage: airlock gc\n\nRemove the cgroups of runs whose airlock was killed "
		       "(every run also does this first),\nand give their host id slots back to "
		       "the pool once no process has ids of them\n(a run that finds every slot "
		       "taken does this too), and remove the gvisor backend's run\ndirectories "
		       "(bundle, runsc state) of runs whose airlock is gone. As root, also\nremove "
		       "the nftables tables (inet airlock-process-UID) of process-backend\nruns "
		       "whose airlock was killed, once nothing of theirs runs.\n");
		return 0;
	}
	if (argc > 0) {
		al_err("gc: unexpected argument \"%s\"", argv[0]);
		return 125;
	}
	n = al_cgroup_gc(&err);
	if (n < 0) {
		al_err("%s", err.msg);
		return 125;
	}
	printf("removed %d stale cgroup%s\n", n, n == 1 ? "" : "s");
	if (geteuid() != 0)
		return 0; /* only runs as root take host id slots or run gvisor */
	n = al_gvisor_gc(&err);
	if (n < 0) {
		al_err("%s", err.msg);
		return 125;
	}
	printf("removed %d gvisor run director%s\n", n, n == 1 ? "y" : "ies");
	n = al_vm_gc(&err);
	if (n < 0) {
		al_err("%s", err.msg);
		return 125;
	}
	printf("removed %d microvm initramfs file%s\n", n, n == 1 ? "" : "s");
	n = al_vm_cache_gc(&err);
	if (n < 0) {
		al_err("%s", err.msg);
		return 125;
	}
	printf("removed %d cached guest image%s unused for %d days\n", n, n == 1 ? "" : "s",
	       AL_VM_CACHE_UNUSED_DAYS);
	/* Before the slots: a dead run's table is found by its slot. */
	n = al_process_nft_gc(&err);
	if (n < 0)
		al_warn("gc: the process backend's nftables tables: %s", err.msg);
	else
		printf("removed %d stale nftables table%s\n", n, n == 1 ? "" : "s");
	err = (struct al_error){0};
	n = al_ids_gc(NULL, &err);
	if (n < 0) {
		al_err("%s", err.msg);
		return 125;
	}
	printf("reclaimed %d host id slot%s\n", n, n == 1 ? "" : "s");
	return 0;
}
