/* The CLI's side of the request layer (request/request.h): what the
 * process's environment and flags say about the request. */
#include "cli.h"

#include <stdlib.h>

#include "policy/operator.h"

void al_cli_request_config(const struct al_cli *cli, unsigned plan_flags, const char *run_id,
			   struct al_request_config *cfg)
{
	*cfg = (struct al_request_config){.operator_file = cli->operator_file,
					  .operator_env = getenv(AL_OPERATOR_ENV),
					  .term = getenv("TERM"),
					  .task = cli->flags,
					  .plan_flags = plan_flags,
					  .run_id = run_id};
}

static int make_task(void *data, struct al_policy **ret, struct al_errors *errs)
{
	return al_cli_policy(data, ret, errs);
}

char **al_cli_profiles_allowing(const struct al_cli *cli, const struct al_operator *op,
				unsigned flags)
{
	struct al_request_config cfg;

	al_cli_request_config(cli, flags, NULL, &cfg);
	return al_request_profiles_allowing(&cfg, op, make_task, (void *)cli);
}
