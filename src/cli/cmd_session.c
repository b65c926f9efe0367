/* The hidden `airlock __session` verb (in airlock-serve only): one
 * sandbox's process of the daemon (serve/session.c), exec'd by the monitor
 * with its socket at fd 3. Its request becomes a plan the way `airlock
 * run`'s does (bounds.c). */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "policy/plan.h"
#include "serve/serve.h"

static int plan(const char *operator_file, struct al_policy *policy, const char *run_id,
		struct al_plan **ret, struct al_errors *errs, char ***refused)
{
	struct al_cli cli = {
	    .operator_file = (char *)operator_file, .result_fd = -1, .audit_fd = -1};
	struct al_cli_bounds b = {0};
	int r = al_cli_bound_plan(&cli, policy, 0, run_id, ret, &b, errs);

	if (r < 0 && b.refused) {
		struct al_errors lines = {0};
		al_decision_errors(&b.dec, &lines);
		for (size_t i = 0; i < lines.n; i++)
			al_strv_push(refused, lines.v[i].text);
		al_errors_clear(&lines);
	}
	al_cli_bounds_clear(&b);
	return r;
}

int al_cmd_session(int argc, char **argv)
{
	static const struct al_session_ops ops = {.plan = plan};

	(void)argc;
	(void)argv;
	return al_session_main(3, &ops);
}
