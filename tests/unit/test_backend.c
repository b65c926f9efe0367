/* backend/backend.h: what the run layer refuses for every backend alike
 * (al_backend_admit: a terminal, egress rules and a live sandbox on a layer
 * without the feature), through the request layer too, and the list of
 * backends kept in step with the operator policy's names. A test backend
 * with no feature at all stands for the layers that lack some. */
#include "unit.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "backend/backend.h"
#include "core/error.h"
#include "policy/operator.h"
#include "policy/plan.h"
#include "request/request.h"

static int thin_probes;

static int thin_probe(const struct al_plan *plan, struct al_error *err)
{
	(void)plan;
	(void)err;
	thin_probes++;
	return 0;
}

static const struct al_backend_facts thin_facts = {.summary = "a test layer with no feature",
						   .features = 0};
static const struct al_backend_ops thin = {
    .name = "thin", .facts = &thin_facts, .probe = thin_probe};

/* Only the bit under test is missing: the other refusals stay out of the way. */
static const struct al_backend_facts all_but_exec_facts = {.features =
							       AL_BACKEND_TTY | AL_BACKEND_NETWORK};
static const struct al_backend_ops all_but_exec = {
    .name = "noexec", .facts = &all_but_exec_facts, .probe = thin_probe};

static void test_admit_refuses_each_missing_feature(void **state)
{
	struct al_plan plan = {0};
	struct al_error err = {0};

	(void)state;
	/* A plan that asks for nothing the layer lacks is admitted. */
	assert_int_equal(al_backend_admit(&thin, &plan, false, &err), 0);

	plan.tty = true;
	assert_int_equal(al_backend_admit(&thin, &plan, false, &err), -EOPNOTSUPP);
	assert_contains(err.msg, "backend thin cannot give the command a terminal (-t");
	plan.tty = false;

	plan.gateway = true;
	err = (struct al_error){0};
	assert_int_equal(al_backend_admit(&thin, &plan, false, &err), -EOPNOTSUPP);
	assert_contains(err.msg, "backend thin has no network");
	assert_contains(err.msg, "--allow");
	plan.gateway = false;

	err = (struct al_error){0};
	assert_int_equal(al_backend_admit(&thin, &plan, true, &err), -EOPNOTSUPP);
	assert_contains(err.msg, "backend thin cannot exec in a live sandbox");
	assert_int_equal(al_backend_admit(&all_but_exec, &plan, false, &err), 0);
	assert_int_equal(al_backend_admit(&all_but_exec, &plan, true, &err), -EOPNOTSUPP);
	assert_null(strchr(err.msg, '\n')); /* one line */
}

static void test_native_and_fake_admit_everything(void **state)
{
	struct al_plan plan = {.tty = true, .gateway = true};
	struct al_error err = {0};

	(void)state;
	assert_int_equal(al_backend_admit(&al_backend_native, &plan, true, &err), 0);
	/* The fake backend has no facts: the unit tests' runs use every feature. */
	assert_int_equal(al_backend_admit(&al_backend_fake, &plan, true, &err), 0);
}

/* The request layer (every front end's path to a run) refuses before the
 * backend's own probe runs. */
static void test_request_probe_refuses_first(void **state)
{
	struct al_plan plan = {.tty = true};
	struct al_request rq = {.plan = &plan};
	struct al_error err = {0};

	(void)state;
	thin_probes = 0;
	assert_true(al_request_probe(&rq, &thin, &err) < 0);
	assert_int_equal(thin_probes, 0);
	assert_false(rq.probed);
	assert_contains(err.msg, "terminal");

	plan.tty = false;
	assert_int_equal(al_request_probe(&rq, &thin, &err), 0);
	assert_int_equal(thin_probes, 1);
	assert_true(rq.probed);
}

/* al_backends[] and the operator policy's built names are one list in one
 * order (weakest first), each with its facts and its rank. */
static void test_backends_match_operator_names(void **state)
{
	const char *const *built = al_backend_names(true);
	size_t i;

	(void)state;
	for (i = 0; al_backends[i]; i++) {
		assert_non_null(built[i]);
		assert_string_equal(al_backends[i]->name, built[i]);
		assert_non_null(al_backends[i]->facts);
		assert_non_null(al_backends[i]->facts->summary);
		assert_true(al_backend_strength(built[i]) >= 0);
		if (i > 0)
			assert_true(al_backend_strength(built[i - 1]) <
				    al_backend_strength(built[i]));
		assert_ptr_equal(al_backend_lookup(built[i]), al_backends[i]);
	}
	assert_null(built[i]);
	assert_null(al_backend_lookup("fake")); /* never chosen by name */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_admit_refuses_each_missing_feature),
	    cmocka_unit_test(test_native_and_fake_admit_everything),
	    cmocka_unit_test(test_request_probe_refuses_first),
	    cmocka_unit_test(test_backends_match_operator_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
