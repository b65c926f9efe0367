/* backend/wasm: the plans it refuses (a network rule, a terminal, a file
 * that is no module, a language without it) and what `airlock check`
 * says it makes of one it takes: node with the driver, the module
 * read-only in /.airlock, the scratch preopened, the memory cap. Needs
 * node (the derived plan names it); skips without. */
#include "unit.h"

#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/backend.h"
#include "core/cleanup.h"
#include "core/error.h"
#include "core/sys.h"
#include "core/util.h"
#include "policy/plan.h"
#include "policy/policy.h"

static char tmp[] = "/tmp/airlock-unit-wasm-XXXXXX";
static char module[PATH_MAX], not_module[PATH_MAX];

static int write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	int ok = fd >= 0 && fchmod(fd, 0644) == 0 && write(fd, data, len) == (ssize_t)len;

	if (fd >= 0)
		close(fd);
	return ok ? 0 : -1;
}

static int setup(void **state)
{
	/* The smallest module: the magic and version 1, no sections. */
	static const unsigned char empty[8] = {0, 'a', 's', 'm', 1, 0, 0, 0};

	if (!mkdtemp(tmp) || chmod(tmp, 0755) < 0)
		return -1;
	snprintf(module, sizeof(module), "%s/m.wasm", tmp);
	snprintf(not_module, sizeof(not_module), "%s/m.sh", tmp);
	return write_file(module, empty, sizeof(empty)) < 0 ||
		       write_file(not_module, "#!/bin/sh\n", 10) < 0
		   ? -1
		   : 0;
}

static int teardown(void **state)
{
	unlink(module);
	unlink(not_module);
	rmdir(tmp);
	return 0;
}

static struct al_policy *policy(const char *backend, const char *cmd)
{
	struct al_policy *p = al_policy_new("test");

	al_strv_push(&p->command, cmd);
	p->backend = backend ? xstrdup(backend) : NULL;
	if (al_landlock_abi() == 0)
		p->landlock = AL_LANDLOCK_BEST_EFFORT;
	return p;
}

static struct al_plan *build(struct al_policy *p)
{
	struct al_plan *plan = NULL;
	struct al_error err = {0};

	if (al_plan_build(p, 0, &plan, &err) != 0)
		fail_msg("al_plan_build: %s", err.msg);
	return plan;
}

/* The wasm backend refuses the plan with a message holding want. */
static void refused(struct al_policy *p, const char *want)
{
	_cleanup_(al_plan_freep) struct al_plan *plan = build(p);
	struct al_error err = {0};

	assert_true(al_backend_wasm.probe(plan, &err) < 0);
	if (!strstr(err.msg, want))
		fail_msg("refusal \"%s\" does not say \"%s\"", err.msg, want);
	assert_null(strchr(err.msg, '\n'));
}

static void need_node(void)
{
	char why[256];

	if (!al_backend_usable(&al_backend_wasm, why, sizeof(why)))
		skip();
}

static void test_refusals(void **state)
{
	need_node();
	_cleanup_(al_policy_freep) struct al_policy *net = policy("wasm", module);
	al_strv_push(&net->net_allow, "example.com");
	refused(net, "no network");

	_cleanup_(al_policy_freep) struct al_policy *tty = policy("wasm", module);
	tty->tty = 1;
	refused(tty, "no terminal");

	_cleanup_(al_policy_freep) struct al_policy *sh = policy("wasm", not_module);
	refused(sh, "not a WebAssembly module");
}

/* A language is only the wasm backend's, and only python. */
static void test_language(void **state)
{
	const char *const cases[][2] = {{"native", "python"}, {"wasm", "ruby"}};

	for (size_t i = 0; i < 2; i++) {
		_cleanup_(al_policy_freep) struct al_policy *p = policy(cases[i][0], module);
		struct al_plan *plan = NULL;
		struct al_error err = {0};
		p->language = xstrdup(cases[i][1]);
		assert_true(al_plan_build(p, 0, &plan, &err) < 0);
		assert_null(plan);
		assert_non_null(strstr(err.msg, "only python, with --backend wasm"));
	}
}

static void test_describe(void **state)
{
	need_node();
	_cleanup_(al_policy_freep) struct al_policy *p = policy("wasm", module);
	_cleanup_(al_plan_freep) struct al_plan *plan = build(p);
	json_t *o = json_object();
	struct al_error err = {0};
	bool has_module = false;
	size_t i;
	json_t *v;

	if (al_backend_wasm.describe(plan, NULL, o, &err) < 0)
		fail_msg("describe: %s", err.msg);
	json_t *w = json_object_get(o, "wasm");
	assert_non_null(w);
	assert_int_equal(json_integer_value(json_object_get(w, "memory_cap")),
			 plan->memory_bytes - (128ull << 20));
	assert_non_null(json_object_get(json_object_get(w, "preopens"), "/work"));
	assert_non_null(json_object_get(json_object_get(w, "preopens"), "/tmp"));
	json_array_foreach(json_object_get(o, "filesystem"), i, v)
	{
		const char *t = json_string_value(json_object_get(v, "target"));
		has_module |= t && strcmp(t, "/.airlock/module.wasm") == 0;
	}
	assert_true(has_module);
	/* The run's plan itself is untouched: its command is still the module. */
	assert_string_equal(plan->argv[0], module);
	json_decref(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_refusals),
	    cmocka_unit_test(test_language),
	    cmocka_unit_test(test_describe),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
