/* libFuzzer target: the policy parser (policy/parse.c) and the lowering of
 * whatever it accepts (policy/plan.c). Both see untrusted text when a
 * platform passes a user's policy through. */
#include <stddef.h>
#include <stdint.h>

#include "policy/plan.h"
#include "policy/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct al_policy *p = NULL;
	struct al_plan *plan = NULL;
	struct al_error err = {0};

	if (al_policy_load_string("fuzz.json", (const char *)data, size, &p, &err) < 0)
		return 0;
	/* Lowering touches the host read-only (stat, realpath); it creates
	 * nothing, so it is safe to run on fuzzed input. */
	if (al_plan_build(p, AL_PLAN_COMMAND_OPTIONAL, &plan, &err) == 0)
		al_plan_free(plan);
	al_policy_free(p);
	return 0;
}
