/* libFuzzer target: the policy parser (policy/parse.c) and the lowering of
 * whatever it accepts (policy/plan.c), both collecting every error they
 * find. Both see untrusted text when a platform passes a user's policy
 * through. Beyond what the sanitizers catch, it checks the list of errors:
 * one exists exactly when the load fails, it never holds more than the
 * cap, and each entry is one line whose text is made of its parts. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy/plan.h"
#include "policy/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_list(const struct al_errors *errs, int r)
{
	if ((r < 0) != (al_errors_count(errs) > 0) || errs->n > AL_ERRORS_MAX ||
	    (errs->omitted && errs->n != AL_ERRORS_MAX))
		abort();
	for (size_t i = 0; i < errs->n; i++) {
		const struct al_error_entry *e = &errs->v[i];
		if (!e->text || !e->message || strpbrk(e->text, "\n\r") || e->code <= 0)
			abort();
		if (!strstr(e->text, e->message) || (e->path && !strstr(e->text, e->path)))
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct al_policy *p = NULL;
	struct al_plan *plan = NULL;
	struct al_errors errs = {0};
	int r = al_policy_load_string_all("fuzz.json", (const char *)data, size, &p, &errs);

	check_list(&errs, r);
	al_errors_clear(&errs);
	if (r < 0)
		return 0;
	/* Lowering touches the host read-only (stat, realpath); it creates
	 * nothing, so it is safe to run on fuzzed input. */
	r = al_plan_build_all(p, AL_PLAN_COMMAND_OPTIONAL, &plan, &errs);
	check_list(&errs, r);
	al_errors_clear(&errs);
	if (r == 0)
		al_plan_free(plan);
	al_policy_free(p);
	return 0;
}
