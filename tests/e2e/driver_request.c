/* The test drivers' task requests (driver_request.h). */
#include "driver_request.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static void print_errors(const char *what, const struct al_errors *errs)
{
	for (size_t i = 0; i < errs->n; i++)
		fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, what,
			errs->v[i].text);
}

int driver_request(const char *file, const char *run_id, struct driver_req *r)
{
	struct al_errors errs = {0};
	struct al_error err = {0};

	memset(r, 0, sizeof(*r));
	r->cfg.plan_flags = AL_PLAN_COMMAND_OPTIONAL;
	r->cfg.run_id = run_id;
	if (al_policy_load_file(file, &r->policy, &err) < 0) {
		fprintf(stderr, "%s: %s\n", program_invocation_short_name, err.msg);
		return -1;
	}
	al_request_init(&r->rq, &r->cfg, r->policy);
	if (al_request_plan(&r->rq, &errs) < 0) {
		print_errors(file, &errs);
		al_errors_clear(&errs);
		return -1;
	}
	if (al_request_probe(&r->rq, NULL, &err) < 0 || al_request_finish(&r->rq, &err) < 0) {
		fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, file, err.msg);
		return -1;
	}
	return 0;
}

void driver_request_clear(struct driver_req *r)
{
	al_request_clear(&r->rq);
	al_policy_free(r->policy);
}
