/* policy/engine.h, al_engine_plan(): the host paths of a real plan (built
 * with al_plan_build() over a temporary tree) against a profile's
 * filesystem bounds, by resolved path and by device and inode: mounts,
 * copies in and out, system directories, and the tricks that would show
 * more than a prefix (symbolic links, "..", hard links). No root. */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/error.h"
#include "core/util.h"
#include "policy/engine.h"
#include "policy/operator.h"
#include "policy/plan.h"
#include "policy/policy.h"

/* The tree, under a mkdtemp directory T:
 *   T/srv/ro/            profile: filesystem.ro
 *   T/srv/ro/a/f.txt
 *   T/srv/ro/secret/k    profile: filesystem.never (T/srv/ro/secret)
 *   T/srv/ro/to_outside -> ../../outside
 *   T/srv/ro/to_secret  -> secret
 *   T/srv/ro/innocent    a hard link to T/keys/id (never)
 *   T/srv/rw/out/        profile: filesystem.rw
 *   T/keys/id            profile: filesystem.never
 *   T/outside/f          in no bound */
static char tmp[] = "/tmp/airlock-unit-engine-XXXXXX";

static const char *const dirs[] = {
    "srv", "srv/ro", "srv/ro/a", "srv/ro/secret", "srv/rw", "srv/rw/out", "keys", "outside", NULL};
static const char *const files[] = {"srv/ro/a/f.txt", "srv/ro/secret/k", "keys/id", "outside/f",
				    NULL};

static char *T(const char *rel)
{
	return xasprintf("%s/%s", tmp, rel);
}

static int setup(void **state)
{
	if (!mkdtemp(tmp))
		return -1;
	for (size_t i = 0; dirs[i]; i++) {
		_cleanup_free_ char *p = T(dirs[i]);
		if (mkdir(p, 0755) < 0)
			return -1;
	}
	for (size_t i = 0; files[i]; i++) {
		_cleanup_free_ char *p = T(files[i]);
		int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd < 0)
			return -1;
		close(fd);
	}
	_cleanup_free_ char *out = T("srv/ro/to_outside"), *sec = T("srv/ro/to_secret"),
			    *key = T("keys/id"), *hard = T("srv/ro/innocent"),
			    *below = T("srv/ro/secret/k"), *linked = T("srv/ro/a/linked");
	if (symlink("../../outside", out) < 0 || symlink("secret", sec) < 0 ||
	    link(key, hard) < 0 || link(below, linked) < 0)
		return -1;
	return 0;
}

static int teardown(void **state)
{
	static const char *const links[] = {"srv/ro/to_outside", "srv/ro/to_secret",
					    "srv/ro/innocent",	 "srv/ro/a/linked",
					    "ro_link",		 NULL};
	_cleanup_free_ char *rofoo = T("srv/rofoo");

	rmdir(rofoo); /* left by a failed test_mount_prefix_is_a_path */

	for (size_t i = 0; links[i]; i++) {
		_cleanup_free_ char *p = T(links[i]);
		unlink(p);
	}
	for (size_t i = 0; files[i]; i++) {
		_cleanup_free_ char *p = T(files[i]);
		unlink(p);
	}
	for (size_t i = AL_ARRAY_SIZE(dirs) - 1; i-- > 0;) {
		_cleanup_free_ char *p = T(dirs[i]);
		rmdir(p);
	}
	rmdir(tmp);
	return 0;
}

/* An operator policy from a format: parsed and its paths resolved. */
static struct al_operator *op_fmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static struct al_operator *op_fmt(const char *fmt, ...)
{
	_cleanup_(al_errors_clear) struct al_errors errs = {0};
	_cleanup_free_ char *json = NULL;
	struct al_operator *op = NULL;
	va_list ap;

	va_start(ap, fmt);
	assert_true(vasprintf(&json, fmt, ap) >= 0);
	va_end(ap);
	if (al_operator_parse("op.json", json, strlen(json), &op, &errs) < 0)
		fail_msg("operator %s: %s", json, errs.v[0].text);
	al_operator_resolve(op);
	return op;
}

/* The profile: ro T/srv/ro, rw T/srv/rw, never T/srv/ro/secret and
 * T/keys/id, then extra (members of "filesystem", may be ""). */
static struct al_operator *op_tree(const char *extra)
{
	return op_fmt(
	    "{\"version\": 1, \"profiles\": {\"default\": {\"filesystem\": {\"ro\": "
	    "[\"%s/srv/ro\"], \"rw\": [\"%s/srv/rw/\"], \"never\": [\"%s/srv/ro/secret\", "
	    "\"%s/keys/id\"]%s}}}}",
	    tmp, tmp, tmp, tmp, extra);
}

static struct al_policy *task_new(void)
{
	struct al_policy *p = al_policy_new("task.json");

	al_strv_push(&p->command, "/bin/true");
	return p;
}

/* A mount of T/host (or host when absolute) at path. */
static void mount_(struct al_policy *p, const char *host, const char *path, enum al_mount_mode mode)
{
	_cleanup_free_ char *h = host[0] == '/' ? xstrdup(host) : T(host);
	_cleanup_free_ char *origin = xasprintf("--%s %s", mode == AL_MOUNT_RW ? "rw" : "ro", h);

	al_policy_add_mount(p, h, path, mode, AL_UNSET, origin);
}

static void copy_(struct al_policy *p, bool in, const char *host, const char *path)
{
	_cleanup_free_ char *h = T(host);
	_cleanup_free_ char *origin = xasprintf("--copy-%s %s", in ? "in" : "out", h);

	al_policy_add_copy(p, in, h, path, origin);
}

/* Engine, plan, paths: the return of al_engine_plan(); d is left for the
 * caller to look at and clear. */
static int plan_paths(const struct al_operator *op, struct al_policy *task, struct al_decision *d)
{
	_cleanup_(al_errors_clear) struct al_errors errs = {0};
	_cleanup_(al_plan_freep) struct al_plan *plan = NULL;
	int r = al_engine_request(op, task, NULL, d);

	if (r < 0)
		fail_msg("request refused: %s", d->refused[0].message);
	if (al_plan_build_all(task, 0, &plan, &errs) < 0)
		fail_msg("plan: %s", errs.v[0].text);
	return al_engine_plan(d, task, plan);
}

/* One mount (or copy) expected allowed (operator_path NULL) or refused
 * once at operator_path, naming origin and asked (a resolved host path:
 * relative to T, or absolute). */
static void expect(struct al_policy *task, const char *extra, const char *origin, const char *asked,
		   const char *operator_path)
{
	_cleanup_(al_operator_freep) struct al_operator *op = op_tree(extra);
	_cleanup_free_ char *want = asked && asked[0] != '/' ? T(asked) : NULL;
	struct al_decision d = {0};
	int r = plan_paths(op, task, &d);

	if (!operator_path) {
		if (r != 0)
			fail_msg("refused: %s", d.refused[0].message);
	} else {
		_cleanup_free_ char *path =
		    operator_path[0] == '.'
			? xasprintf("profiles.default.filesystem%s", operator_path)
			: xstrdup(operator_path);
		if (r != -EPERM)
			fail_msg("%s allowed, expected a refusal at %s", origin, path);
		if (d.n_refused != 1) {
			for (size_t i = 0; i < d.n_refused; i++)
				print_message("  refused: %s\n", d.refused[i].message);
			fail_msg("%zu refusals, expected 1", d.n_refused);
		}
		assert_string_equal(d.refused[0].operator_path, path);
		assert_string_equal(d.refused[0].task, origin);
		assert_string_equal(d.refused[0].asked, want ? want : asked);
		assert_contains(d.refused[0].message, "op.json");
	}
	al_decision_clear(&d);
	al_policy_free(task);
}

static char *origin(const char *flag, const char *rel)
{
	return xasprintf("--%s %s/%s", flag, tmp, rel);
}

/* mounts against ro and rw */

static void test_mount_prefixes(void **state)
{
	_cleanup_free_ char *o1 = origin("ro", "outside"), *o2 = origin("rw", "srv/ro/a");
	struct al_policy *t;

	t = task_new();
	mount_(t, "srv/ro/a", "/input", AL_MOUNT_RO);
	mount_(t, "srv/rw/out", "/output", AL_MOUNT_RW);
	mount_(t, "srv/rw", "/rwro", AL_MOUNT_RO); /* rw lets a task read too */
	expect(t, "", NULL, NULL, NULL);

	t = task_new();
	mount_(t, "outside", "/input", AL_MOUNT_RO);
	expect(t, "", o1, "outside", ".ro");

	/* Writable where the operator lets a task only read. */
	t = task_new();
	mount_(t, "srv/ro/a", "/input", AL_MOUNT_RW);
	expect(t, "", o2, "srv/ro/a", ".rw");
}

/* The prefix is a path, not a string: T/srv/rofoo is not under T/srv/ro. */
static void test_mount_prefix_is_a_path(void **state)
{
	_cleanup_free_ char *dir = T("srv/rofoo"), *o = origin("ro", "srv/rofoo");
	struct al_policy *t = task_new();

	assert_int_equal(mkdir(dir, 0755), 0);
	mount_(t, "srv/rofoo", "/input", AL_MOUNT_RO);
	expect(t, "", o, "srv/rofoo", ".ro");
	rmdir(dir);
}

static void test_mount_never(void **state)
{
	_cleanup_free_ char *o1 = origin("ro", "srv/ro"), *o2 = origin("ro", "srv/ro/secret/k"),
			    *o3 = origin("ro", "srv/ro/secret");
	struct al_policy *t;

	/* The directory holding a never path would show it. */
	t = task_new();
	mount_(t, "srv/ro", "/input", AL_MOUNT_RO);
	expect(t, "", o1, "srv/ro", ".never[0]");

	t = task_new();
	mount_(t, "srv/ro/secret/k", "/input", AL_MOUNT_RO);
	expect(t, "", o2, "srv/ro/secret/k", ".never[0]");

	t = task_new();
	mount_(t, "srv/ro/secret", "/input", AL_MOUNT_RO);
	expect(t, "", o3, "srv/ro/secret", ".never[0]");
}

/* Links and "..": what counts is the path the mount resolves to. */
static void test_mount_tricks(void **state)
{
	_cleanup_free_ char *o1 = origin("ro", "srv/ro/to_outside"),
			    *o2 = origin("ro", "srv/ro/a/../../../outside"),
			    *o3 = origin("ro", "srv/ro/to_secret"),
			    *o4 = origin("ro", "srv/ro/innocent"),
			    *o5 = origin("ro", "srv/ro/a/../secret");
	struct al_policy *t;

	/* A link inside the prefix to a directory outside it. */
	t = task_new();
	mount_(t, "srv/ro/to_outside", "/input", AL_MOUNT_RO);
	expect(t, "", o1, "outside", ".ro");

	/* ".." out of the prefix. */
	t = task_new();
	mount_(t, "srv/ro/a/../../../outside", "/input", AL_MOUNT_RO);
	expect(t, "", o2, "outside", ".ro");

	/* ".." that stays inside, into the never path. */
	t = task_new();
	mount_(t, "srv/ro/a/../secret", "/input", AL_MOUNT_RO);
	expect(t, "", o5, "srv/ro/secret", ".never[0]");

	/* A link to the never path. */
	t = task_new();
	mount_(t, "srv/ro/to_secret", "/input", AL_MOUNT_RO);
	expect(t, "", o3, "srv/ro/secret", ".never[0]");

	/* A hard link to a never file: another name, the same inode. */
	t = task_new();
	mount_(t, "srv/ro/innocent", "/input", AL_MOUNT_RO);
	expect(t, "", o4, "srv/ro/innocent", ".never[1]");
}

/* Profile paths that are links bound by what they resolve to. */
static void test_profile_path_is_a_link(void **state)
{
	_cleanup_free_ char *lnk = T("ro_link"), *o = origin("ro", "srv/ro/a/f.txt");
	struct al_decision d = {0};

	assert_int_equal(symlink("srv/ro", lnk), 0);
	_cleanup_(al_operator_freep) struct al_operator *op =
	    op_fmt("{\"version\": 1, \"profiles\": {\"default\": {\"filesystem\": {\"ro\": "
		   "[\"%s\"], \"never\": [\"%s/a/f.txt\"]}}}}",
		   lnk, lnk);
	struct al_policy *t = task_new();

	mount_(t, "srv/ro/a/f.txt", "/input", AL_MOUNT_RO);
	assert_int_equal(plan_paths(op, t, &d), -EPERM);
	assert_int_equal(d.n_refused, 1);
	assert_string_equal(d.refused[0].operator_path, "profiles.default.filesystem.never[0]");
	assert_string_equal(d.refused[0].task, o);
	al_decision_clear(&d);
	al_policy_free(t);

	/* Under the link's target: within the ro prefix named by the link. */
	t = task_new();
	mount_(t, "srv/ro/to_secret", "/input", AL_MOUNT_RO);
	assert_int_equal(plan_paths(op, t, &d), 0);
	al_decision_clear(&d);
	al_policy_free(t);
	unlink(lnk);
}

/* copy-in is a read (ro or rw), copy-out a write (rw only). */
/* A hard link in an allowed directory to a file below a never directory:
 * its identity is no never path's, so only its link count gives it away. */
static void test_linked_files(void **state)
{
	_cleanup_free_ char *o1 = origin("ro", "srv/ro/a/linked"),
			    *o3 = origin("copy-in", "srv/ro/a/linked");
	struct al_policy *t;

	t = task_new();
	mount_(t, "srv/ro/a/linked", "/input/n", AL_MOUNT_RO);
	expect(t, "", o1, "srv/ro/a/linked", ".linked_files");
	t = task_new();
	copy_(t, true, "srv/ro/a/linked", "/work/n");
	expect(t, ", \"linked_files\": false", o3, "srv/ro/a/linked", ".linked_files");
	/* The operator allows it. */
	t = task_new();
	mount_(t, "srv/ro/a/linked", "/input/n", AL_MOUNT_RO);
	copy_(t, true, "srv/ro/a/linked", "/work/n");
	expect(t, ", \"linked_files\": true", NULL, NULL, NULL);
	/* One link, and directories (the documented caveat), run. */
	t = task_new();
	mount_(t, "srv/ro/a/f.txt", "/input/f", AL_MOUNT_RO);
	mount_(t, "srv/ro/a", "/input/a", AL_MOUNT_RO);
	copy_(t, true, "srv/ro/a", "/work/a");
	expect(t, "", NULL, NULL, NULL);
}

static void test_copies(void **state)
{
	_cleanup_free_ char *o1 = origin("copy-in", "outside/f"),
			    *o2 = origin("copy-out", "srv/ro/a"),
			    *o3 = origin("copy-in", "srv/ro/to_outside"),
			    *o4 = origin("copy-in", "srv/ro/innocent"),
			    *o5 = origin("copy-out", "srv/ro/to_outside"),
			    *o6 = origin("copy-out", "srv/ro/to_outside/new"),
			    *o7 = origin("copy-in", "srv/ro");
	struct al_policy *t;

	t = task_new();
	copy_(t, true, "srv/ro/a/f.txt", "/work/f.txt");
	copy_(t, true, "srv/rw/out", "/work/in");
	copy_(t, false, "srv/rw/out", "/work/out");
	copy_(t, false, "srv/rw/new", "/work/new"); /* made at the end */
	expect(t, "", NULL, NULL, NULL);

	t = task_new();
	copy_(t, true, "outside/f", "/work/f");
	expect(t, "", o1, "outside/f", ".ro");

	t = task_new();
	copy_(t, false, "srv/ro/a", "/work/out");
	expect(t, "", o2, "srv/ro/a", ".rw");

	t = task_new();
	copy_(t, true, "srv/ro/to_outside", "/work/in");
	expect(t, "", o3, "outside", ".ro");

	t = task_new();
	copy_(t, true, "srv/ro/innocent", "/work/id");
	expect(t, "", o4, "srv/ro/innocent", ".never[1]");

	t = task_new();
	copy_(t, false, "srv/ro/to_outside", "/work/out");
	expect(t, "", o5, "outside", ".rw");

	/* A directory holding a never path. */
	t = task_new();
	copy_(t, true, "srv/ro", "/work/in");
	expect(t, "", o7, "srv/ro", ".never[0]");

	/* Not there yet: its parent, resolved, and its name. */
	t = task_new();
	copy_(t, false, "srv/ro/to_outside/new", "/work/out");
	expect(t, "", o6, "outside/new", ".rw");
}

/* System directories the task names: in the profile's list, or else held
 * like any read-only path; a never path wins over the list. */
static void test_system(void **state)
{
	static const char *const want[] = {"/usr", "/var", NULL};
	_cleanup_free_ char *real = realpath("/var", NULL);
	struct al_decision d = {0};
	struct al_policy *t;
	struct stat st;

	if (!real || lstat("/var", &st) < 0 || !S_ISDIR(st.st_mode) || lstat("/usr", &st) < 0 ||
	    !S_ISDIR(st.st_mode)) {
		print_message("no /usr or /var directory here: skipped\n");
		return;
	}
	t = task_new();
	t->system = al_strv_dup((char *const *)want);
	expect(t, ", \"system\": [\"/usr\", \"/var\"]", NULL, NULL, NULL);

	t = task_new();
	t->system = al_strv_dup((char *const *)want);
	expect(t, ", \"system\": [\"/usr\"]", "task.json: filesystem.system[1]", real, ".ro");

	/* Not listed but under a read-only prefix: shown. */
	_cleanup_(al_operator_freep) struct al_operator *ro = op_fmt(
	    "{\"version\": 1, \"profiles\": {\"default\": {\"filesystem\": {\"ro\": [\"%s\"], "
	    "\"system\": [\"/usr\"]}}}}",
	    real);
	t = task_new();
	t->system = al_strv_dup((char *const *)want);
	assert_int_equal(plan_paths(ro, t, &d), 0);
	al_decision_clear(&d);
	al_policy_free(t);

	/* Listed, and never: never wins. */
	_cleanup_(al_operator_freep) struct al_operator *never =
	    op_fmt("{\"version\": 1, \"profiles\": {\"default\": {\"filesystem\": {\"never\": "
		   "[\"%s\"], \"system\": [\"/usr\", \"/var\"]}}}}",
		   real);
	t = task_new();
	t->system = al_strv_dup((char *const *)want);
	assert_int_equal(plan_paths(never, t, &d), -EPERM);
	assert_int_equal(d.n_refused, 1);
	assert_string_equal(d.refused[0].operator_path, "profiles.default.filesystem.never[0]");
	assert_string_equal(d.refused[0].task, "task.json: filesystem.system[1]");
	al_decision_clear(&d);
	al_policy_free(t);
}

/* airlock's own system directories (the task names none) are explained
 * as airlock's, not as the task's. */
static void test_system_default(void **state)
{
	_cleanup_(al_operator_freep) struct al_operator *op = op_tree("");
	struct al_policy *t = task_new();
	struct al_decision d = {0};
	bool seen = false;

	assert_int_equal(plan_paths(op, t, &d), 0);
	for (size_t i = 0; i < d.n_explain; i++) {
		if (strncmp(d.explain[i].what, "system ", 7) != 0)
			continue;
		seen = true;
		assert_int_equal(d.explain[i].from, AL_FROM_BUILTIN);
	}
	assert_true(seen);
	al_decision_clear(&d);
	al_policy_free(t);
}

int main(void)
{
	/* clang-format off */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mount_prefixes),
		cmocka_unit_test(test_mount_prefix_is_a_path),
		cmocka_unit_test(test_mount_never),
		cmocka_unit_test(test_mount_tricks),
		cmocka_unit_test(test_profile_path_is_a_link),
		cmocka_unit_test(test_linked_files),
		cmocka_unit_test(test_copies),
		cmocka_unit_test(test_system),
		cmocka_unit_test(test_system_default),
	};
	/* clang-format on */

	return cmocka_run_group_tests(tests, setup, teardown);
}
