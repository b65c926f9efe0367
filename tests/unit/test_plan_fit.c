/* policy/plan-fit.h: which requests a warm pool's sandbox can serve. The
 * same plan fits; each field fixed when the sandbox was made breaks the fit
 * with a reason naming it; each field a claim applies still fits. Plans
 * are built from task policies (no root needed). */
#include "unit.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/sys.h"
#include "core/util.h"
#include "policy/plan-fit.h"
#include "policy/policy.h"

static char tmp[] = "/tmp/airlock-unit-fit-XXXXXX";

/* The pool's task: a gateway with one rule, the defaults otherwise. */
#define BASE "\"version\": 1, \"command\": [\"/bin/true\"]"
#define NET  "\"network\": {\"mode\": \"gateway\"}"

static struct al_plan *build(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static struct al_plan *build(const char *fmt, ...)
{
	char text[4096];
	va_list ap;
	struct al_policy *pol = NULL;
	struct al_plan *plan = NULL;
	struct al_error err = {0};

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	if (al_policy_load_string("task.json", text, strlen(text), &pol, &err) < 0)
		fail_msg("%s: %s", text, err.msg);
	if (al_landlock_abi() == 0)
		pol->landlock = AL_LANDLOCK_BEST_EFFORT;
	if (al_plan_build(pol, 0, &plan, &err) < 0)
		fail_msg("%s: %s", text, err.msg);
	al_policy_free(pol);
	return plan;
}

/* Does wanted fit pooled? Frees wanted. want_field: NULL when it must
 * fit, else the field the first reason must name. */
static void check(const struct al_plan *pooled, struct al_plan *wanted, const char *want_field)
{
	struct al_errors why = {0};
	int r = al_plan_fits(pooled, wanted, &why);

	if (!want_field) {
		if (r != 0)
			fail_msg("does not fit: %s", why.n ? why.v[0].text : "(no reason)");
		assert_int_equal(why.n, 0);
	} else {
		assert_int_equal(r, -EINVAL);
		assert_true(why.n >= 1);
		bool named = false;
		for (size_t i = 0; i < why.n; i++)
			named |= why.v[i].path && strcmp(why.v[i].path, want_field) == 0;
		if (!named)
			fail_msg("no reason names %s; the first: %s", want_field, why.v[0].text);
	}
	/* Without a list the answer is the same. */
	assert_int_equal(al_plan_fits(pooled, wanted, NULL), r);
	al_errors_clear(&why);
	al_plan_free(wanted);
}

static void test_same_fits(void **state)
{
	(void)state;
	_cleanup_(al_plan_freep) struct al_plan *pool = build("{" BASE ", " NET "}");
	check(pool, build("{" BASE ", " NET "}"), NULL);
	_cleanup_(al_plan_freep) struct al_plan *none = build("{" BASE "}");
	check(none, build("{" BASE "}"), NULL);
}

/* Every limit the sandbox was made with. */
static void test_limits_never(void **state)
{
	(void)state;
	_cleanup_(al_plan_freep) struct al_plan *pool = build("{" BASE ", " NET "}");
	const struct {
		const char *limits, *field;
	} v[] = {
	    {"\"memory\": \"100M\"", "limits.memory"},
	    {"\"pids\": 17", "limits.pids"},
	    {"\"scratch\": \"1M\"", "limits.scratch"},
	    {"\"output\": \"1M\"", "limits.output"},
	    {"\"open_files\": 99", "limits.open_files"},
	    {"\"cpus\": 0.5", "limits.cpus"},
	    {"\"cpu_time\": 7", "limits.cpu_time"},
	    {"\"file_size\": \"1M\"", "limits.file_size"},
	};
	for (size_t i = 0; i < AL_ARRAY_SIZE(v); i++)
		check(pool, build("{" BASE ", " NET ", \"limits\": {%s}}", v[i].limits),
		      v[i].field);
	check(pool,
	      build("{" BASE ", \"network\": {\"mode\": \"gateway\", \"limits\": "
		    "{\"connections\": 3}}}"),
	      "network.limits.connections");
}

/* Fields set on a built plan directly: what a task cannot choose itself
 * (the backend, the profile, the host ids) or what is quicker so. */
static void test_fixed_fields_never(void **state)
{
	(void)state;
	_cleanup_(al_plan_freep) struct al_plan *pool = build("{" BASE ", " NET "}");
	struct al_plan *w;

	w = build("{" BASE ", " NET "}");
	free(w->backend);
	w->backend = xstrdup("other");
	check(pool, w, "backend");
	w = build("{" BASE ", " NET "}");
	w->profile = xstrdup("wide");
	check(pool, w, "profile");
	w = build("{" BASE ", " NET "}");
	w->host_uid += 1;
	check(pool, w, "identity.host_uid");
	w = build("{" BASE ", " NET "}");
	w->rootless = !w->rootless;
	check(pool, w, "identity.rootless");
	w = build("{" BASE ", " NET "}");
	w->kernel_memory_best_effort = !w->kernel_memory_best_effort;
	check(pool, w, "limits.kernel_memory_best_effort");
	w = build("{" BASE ", " NET "}");
	w->budget.set = true;
	w->budget.max = 5;
	check(pool, w, "limits.budget");
	w = build("{" BASE ", " NET "}");
	w->landlock_required = !w->landlock_required;
	check(pool, w, "landlock_required");
}

static void test_tree_never(void **state)
{
	(void)state;
	_cleanup_(al_plan_freep) struct al_plan *pool = build("{" BASE ", " NET "}");

	check(pool,
	      build("{" BASE ", " NET ", \"filesystem\": {\"mounts\": [{\"host\": \"%s\", "
		    "\"path\": \"/input\"}]}}",
		    tmp),
	      "fs./input");
	check(pool, build("{" BASE ", " NET ", \"filesystem\": {\"scratch_exec\": false}}"),
	      "scratch_exec");
	check(pool, build("{" BASE ", " NET ", \"hostname\": \"other\"}"), "hostname");
	check(pool, build("{" BASE ", " NET ", \"tty\": true}"), "tty");
	/* A secret with "file" adds a file to the tree. */
	check(pool,
	      build("{" BASE ", \"network\": {\"allow\": [\"a.test:443\"]}, \"secrets\": {\"K\": "
		    "{\"source\": {\"env\": \"X\"}, \"hosts\": [\"a.test:443\"], \"header\": "
		    "\"X-Key: {}\", \"file\": true}}}"),
	      "fs./etc/airlock/secrets/K");
}

static void test_network_never(void **state)
{
	(void)state;
	_cleanup_(al_plan_freep) struct al_plan *pool = build("{" BASE ", " NET "}");
	_cleanup_(al_plan_freep) struct al_plan *none = build("{" BASE "}");

	check(pool, build("{" BASE "}"), "network.mode");
	check(none, build("{" BASE ", " NET "}"), "network.mode");
	check(pool,
	      build("{" BASE ", \"network\": {\"mode\": \"gateway\", \"hosts\": "
		    "{\"a.test\": \"127.0.0.1\"}}}"),
	      "network.hosts");
	check(pool,
	      build("{" BASE ", \"network\": {\"mode\": \"gateway\", \"resolver\": "
		    "\"127.0.0.1:53\"}}"),
	      "network.resolver");
}

/* What a claim applies: the environment over the pool's, the workdir,
 * the lifetime, the allowlist and its rules' options, plain secrets. */
static void test_may_differ(void **state)
{
	(void)state;
	_cleanup_(al_plan_freep) struct al_plan *pool = build("{" BASE ", " NET "}");
	struct al_plan *w;

	check(pool, build("{" BASE ", " NET ", \"env\": {\"A\": \"1\"}}"), NULL);
	check(pool, build("{" BASE ", " NET ", \"limits\": {\"timeout\": \"1h\"}}"), NULL);
	check(pool, build("{" BASE ", \"network\": {\"allow\": [\"a.test:443\", \"b.test\"]}}"),
	      NULL);
	check(pool,
	      build("{" BASE ", \"network\": {\"allow\": [{\"host\": \"a.test:443\", "
		    "\"methods\": [\"GET\"], \"paths\": [\"/v1/*\"]}]}}"),
	      NULL);
	check(pool,
	      build("{" BASE ", \"network\": {\"allow\": [\"a.test:443\"]}, \"secrets\": {\"K\": "
		    "{\"source\": {\"env\": \"X\"}, \"hosts\": [\"a.test:443\"], \"header\": "
		    "\"X-Key: {}\"}}}"),
	      NULL);
	w = build("{" BASE ", " NET "}");
	free(w->workdir);
	w->workdir = xstrdup("/tmp");
	check(pool, w, NULL);
	w = build("{" BASE ", " NET "}");
	w->timeout_ms = 1;
	check(pool, w, NULL);
}

/* What a claim cannot carry (yet), and the pool's variables. */
static void test_not_carried(void **state)
{
	(void)state;
	_cleanup_(al_plan_freep) struct al_plan *pool =
	    build("{" BASE ", " NET ", \"env\": {\"POOLVAR\": \"1\"}}");
	_cleanup_(al_plan_freep) struct al_plan *plain = build("{" BASE ", " NET "}");

	check(pool, build("{" BASE ", " NET "}"), "env.POOLVAR");
	check(pool, build("{" BASE ", " NET ", \"env\": {\"POOLVAR\": \"2\"}}"), NULL);
	check(plain,
	      build("{" BASE ", \"network\": {\"allow\": [{\"host\": \"a.test:443\", \"tls\": "
		    "\"intercept\"}]}}"),
	      "network.allow");
	check(plain,
	      build("{" BASE ", \"network\": {\"allow\": [\"a.test:443\"]}, \"secrets\": {\"S\": "
		    "{\"source\": {\"env\": \"X\"}, \"hosts\": [\"a.test:443\"], \"sigv4\": "
		    "true}}}"),
	      "credentials.S");
}

static int setup(void **state)
{
	(void)state;
	return mkdtemp(tmp) && chmod(tmp, 0755) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	return rmdir(tmp);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_same_fits),	       cmocka_unit_test(test_limits_never),
	    cmocka_unit_test(test_fixed_fields_never), cmocka_unit_test(test_tree_never),
	    cmocka_unit_test(test_network_never),      cmocka_unit_test(test_may_differ),
	    cmocka_unit_test(test_not_carried),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
