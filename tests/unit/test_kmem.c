/* policy/kmem.h: the kernel-memory bound, the decision whether a run may
 * start where socket buffers escape the memory cgroup, and the policy key
 * limits.kernel_memory that changes it. Pure functions over plans built
 * from policy text; nothing is created. */
#include "unit.h"

#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "core/error.h"
#include "policy/kmem.h"
#include "policy/plan.h"
#include "policy/policy.h"

static struct al_plan *plan_from(const char *json)
{
	struct al_policy *pol = NULL;
	struct al_plan *plan = NULL;
	struct al_error err = {0};

	if (al_policy_load_string("p.json", json, strlen(json), &pol, &err) < 0)
		fail_msg("policy: %s", err.msg);
	pol->landlock = AL_LANDLOCK_BEST_EFFORT; /* not what this test is about */
	if (al_plan_build(pol, AL_PLAN_COMMAND_OPTIONAL, &plan, &err) < 0)
		fail_msg("plan: %s", err.msg);
	al_policy_free(pol);
	return plan;
}

static void test_socket_budget_scales_with_memory(void **state)
{
	struct al_plan *p = plan_from("{\"version\": 1, \"limits\": {\"memory\": \"256M\"}}");

	assert_int_equal(p->memory_bytes, 256ull << 20);
	assert_int_equal(al_kmem_socket_limit(p), 16ull << 20);
	assert_int_equal(p->socket_stop, 32ull << 20);
	assert_false(p->kernel_memory_best_effort);
	al_plan_free(p);

	/* The default memory limit (512M). */
	p = plan_from("{\"version\": 1}");
	assert_int_equal(al_kmem_socket_limit(p), (512ull << 20) / AL_SOCKET_SHARE);
	assert_int_equal(p->socket_stop, 2 * al_kmem_socket_limit(p));
	al_plan_free(p);

	/* The smallest memory limit still leaves a usable socket budget. */
	p = plan_from("{\"version\": 1, \"limits\": {\"memory\": \"4M\"}}");
	assert_int_equal(al_kmem_socket_limit(p), AL_SOCKET_MIN_BYTES);
	assert_int_equal(p->socket_stop, 2 * AL_SOCKET_MIN_BYTES);
	al_plan_free(p);

	/* Page-aligned, since the kernel keeps page-aligned values. */
	p = plan_from("{\"version\": 1, \"limits\": {\"memory\": 100000000}}");
	assert_int_equal(al_kmem_socket_limit(p) % 4096, 0);
	assert_true(al_kmem_socket_limit(p) >= 100000000 / AL_SOCKET_SHARE);
	al_plan_free(p);
}

static void test_rlimits_for_kernel_objects(void **state)
{
	struct al_plan *p = plan_from("{\"version\": 1, \"limits\": {\"memory\": \"16M\"}}");

	assert_int_equal(p->msgqueue_bytes, AL_MSGQUEUE_BYTES);
	assert_int_equal(p->sigpending, AL_SIGPENDING);
	assert_int_equal(p->memlock_bytes, (16ull << 20) / 8); /* memory/8 below 8M */
	al_plan_free(p);
	p = plan_from("{\"version\": 1}");
	assert_int_equal(p->memlock_bytes, AL_MEMLOCK_BYTES);
	al_plan_free(p);
}

static void test_bound_per_mode(void **state)
{
	struct al_plan *p = plan_from("{\"version\": 1, \"limits\": {\"memory\": \"256M\"}}");
	char buf[256];

	assert_int_equal(al_kmem_bound(p, AL_SOCKMEM_LIMITED), 32ull << 20);
	assert_int_equal(al_kmem_bound(p, AL_SOCKMEM_CHARGED), 32ull << 20);
	assert_true(al_kmem_bound(p, AL_SOCKMEM_NONE) == AL_KMEM_UNBOUNDED);

	al_kmem_describe(p, AL_SOCKMEM_LIMITED, buf, sizeof(buf));
	assert_contains(buf, "at most 32M outside the cgroup");
	assert_contains(buf, "kernel limit 16M");
	al_kmem_describe(p, AL_SOCKMEM_CHARGED, buf, sizeof(buf));
	assert_contains(buf, "at most 32M outside the cgroup");
	assert_contains(buf, "not yet accepted");
	al_kmem_describe(p, AL_SOCKMEM_NONE, buf, sizeof(buf));
	assert_contains(buf, "UNBOUNDED");
	assert_contains(buf, "runs refuse");
	al_plan_free(p);
}

static void test_admit(void **state)
{
	struct al_plan *p = plan_from("{\"version\": 1}");
	struct al_error err = {0};
	bool unbounded = true;

	assert_int_equal(al_kmem_admit(p, AL_SOCKMEM_LIMITED, &unbounded, &err), 0);
	assert_false(unbounded);
	assert_int_equal(al_kmem_admit(p, AL_SOCKMEM_CHARGED, &unbounded, &err), 0);
	assert_false(unbounded);
	/* Fail closed: nothing bounds them and the policy did not say so. */
	assert_int_equal(al_kmem_admit(p, AL_SOCKMEM_NONE, &unbounded, &err), -EOPNOTSUPP);
	assert_contains(err.msg, "refusing to run");
	assert_contains(err.msg, "limits.kernel_memory");
	assert_contains(err.msg, "best-effort");
	al_plan_free(p);

	p = plan_from("{\"version\": 1, \"limits\": {\"kernel_memory\": \"best-effort\"}}");
	assert_true(p->kernel_memory_best_effort);
	al_error_clear(&err);
	unbounded = false;
	assert_int_equal(al_kmem_admit(p, AL_SOCKMEM_NONE, &unbounded, &err), 0);
	assert_true(unbounded);
	/* best-effort changes nothing where they are bounded */
	assert_int_equal(al_kmem_admit(p, AL_SOCKMEM_LIMITED, &unbounded, &err), 0);
	assert_false(unbounded);
	al_plan_free(p);
}

static void test_json(void **state)
{
	struct al_plan *p = plan_from("{\"version\": 1, \"limits\": {\"memory\": \"256M\"}}");
	struct al_cgroup_stats st = {.socket_peak = 12345};
	json_t *o = al_kmem_json(p, AL_SOCKMEM_LIMITED, &st);

	assert_string_equal(json_string_value(json_object_get(o, "mode")), "enforced");
	assert_string_equal(json_string_value(json_object_get(o, "sockets")), "limited");
	assert_int_equal(json_integer_value(json_object_get(o, "bound_bytes")), 32 << 20);
	assert_int_equal(json_integer_value(json_object_get(o, "socket_limit_bytes")), 16 << 20);
	assert_int_equal(json_integer_value(json_object_get(o, "stop_bytes")), 32 << 20);
	assert_int_equal(json_integer_value(json_object_get(o, "socket_peak_bytes")), 12345);
	json_decref(o);

	o = al_kmem_json(p, AL_SOCKMEM_NONE, NULL);
	assert_true(json_is_null(json_object_get(o, "bound_bytes")));
	assert_true(json_is_null(json_object_get(o, "stop_bytes")));
	assert_null(json_object_get(o, "socket_peak_bytes"));
	assert_string_equal(json_string_value(json_object_get(o, "sockets")), "none");
	json_decref(o);
	al_plan_free(p);
}

static void test_policy_key(void **state)
{
	struct al_policy *pol = NULL, *over = NULL;
	struct al_error err = {0};
	static const char *bad[] = {
	    "{\"version\": 1, \"limits\": {\"kernel_memory\": \"maybe\"}}",
	    "{\"version\": 1, \"limits\": {\"kernel_memory\": true}}",
	    "{\"version\": 1, \"limits\": {\"kernel_memory\": \"\"}}",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		al_error_clear(&err);
		assert_int_equal(
		    al_policy_load_string("p.json", bad[i], strlen(bad[i]), &pol, &err), -EINVAL);
		assert_contains(err.msg, "limits.kernel_memory");
	}
	const char *e = "{\"version\": 1, \"limits\": {\"kernel_memory\": \"enforced\"}}";
	const char *b = "{\"version\": 1, \"limits\": {\"kernel_memory\": \"best-effort\"}}";
	assert_int_equal(al_policy_load_string("e.json", e, strlen(e), &pol, &err), 0);
	assert_int_equal(pol->kernel_memory, AL_KMEM_ENFORCED);
	assert_int_equal(al_policy_load_string("b.json", b, strlen(b), &over, &err), 0);
	assert_int_equal(over->kernel_memory, AL_KMEM_BEST_EFFORT);
	/* A later layer that says it wins; one that is silent changes nothing. */
	al_policy_merge(pol, over);
	assert_int_equal(pol->kernel_memory, AL_KMEM_BEST_EFFORT);
	al_policy_free(over);
	over = al_policy_new("flags");
	al_policy_merge(pol, over);
	assert_int_equal(pol->kernel_memory, AL_KMEM_BEST_EFFORT);
	al_policy_free(over);
	al_policy_free(pol);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_socket_budget_scales_with_memory),
	    cmocka_unit_test(test_rlimits_for_kernel_objects),
	    cmocka_unit_test(test_bound_per_mode),
	    cmocka_unit_test(test_admit),
	    cmocka_unit_test(test_json),
	    cmocka_unit_test(test_policy_key),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
