/* cgroup v2's side of a session's cgroups (cgroup/child.c), without a v2
 * mount (this project's CI host is v1): the steps' paths and values, and
 * the steps applied to a fake tree whose control files the test makes as
 * the kernel would at each mkdir. */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup/internal.h"
#include "core/cleanup.h"
#include "core/sys.h"
#include "core/util.h"

/* The control files a v2 kernel makes in a new cgroup (those the steps
 * write; memory.swap.max only when swap is given). */
static void make_files(const char *dir, bool swap)
{
	const char *files[] = {"cgroup.procs", "cgroup.subtree_control", "memory.max", "pids.max",
			       "cgroup.kill",  "memory.swap.max"};
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		if (!swap && strcmp(files[i], "memory.swap.max") == 0)
			continue;
		_cleanup_free_ char *p = xasprintf("%s/%s", dir, files[i]);
		int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		assert_true(fd >= 0);
		close(fd);
	}
}

static char *read_text(const char *dir, const char *file)
{
	_cleanup_free_ char *p = xasprintf("%s/%s", dir, file);
	char buf[128];
	ssize_t n = al_read_file(p, buf, sizeof(buf));
	if (n < 0)
		return NULL;
	buf[n < (ssize_t)sizeof(buf) ? n : (ssize_t)sizeof(buf) - 1] = 0;
	return xstrdup(buf);
}

/* Each mkdir applied alone, then the fake kernel's files, then the rest. */
static int apply_like_kernel(const struct al_cg_steps *s, bool swap, struct al_error *err)
{
	for (size_t i = 0; i < s->n; i++) {
		struct al_cg_steps one = {.n = 1};
		one.v[0] = s->v[i];
		int r = al_cg_steps_apply(&one, err);
		if (r < 0)
			return r;
		if (s->v[i].op == AL_CG_MKDIR)
			make_files(s->v[i].path, swap);
	}
	return 0;
}

static void test_session_steps(void **state)
{
	(void)state;
	char tmp[] = "/tmp/test-cgroup-XXXXXX";
	assert_non_null(mkdtemp(tmp));
	_cleanup_free_ char *run = xasprintf("%s/123-456-1", tmp);
	assert_int_equal(mkdir(run, 0755), 0);
	make_files(run, true);
	struct al_cg_steps s;
	struct al_error err = {0};

	/* The run's cgroup: its init leaf first, then its children's
	 * controllers (no process is in it yet). */
	al_cg_v2_session_steps(run, &s);
	assert_int_equal(s.n, 2);
	assert_int_equal(s.v[0].op, AL_CG_MKDIR);
	_cleanup_free_ char *leaf = xasprintf("%s/init", run);
	assert_string_equal(s.v[0].path, leaf);
	assert_int_equal(s.v[1].op, AL_CG_WRITE);
	_cleanup_free_ char *sub = xasprintf("%s/cgroup.subtree_control", run);
	assert_string_equal(s.v[1].path, sub);
	assert_string_equal(s.v[1].value, "+memory +pids +cpu");
	assert_int_equal(apply_like_kernel(&s, true, &err), 0);
	_cleanup_free_ char *ctl = read_text(run, "cgroup.subtree_control");
	assert_string_equal(ctl, "+memory +pids +cpu");
	struct stat st;
	assert_int_equal(stat(leaf, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	/* Again: the leaf exists, named in the error. */
	assert_int_equal(al_cg_steps_apply(&s, &err), -EEXIST);
	assert_non_null(strstr(err.msg, leaf));
	al_cg_steps_clear(&s);

	/* An exec's: its limits in its own directory beside the leaf, the
	 * memory page-aligned, swap off. */
	al_cg_v2_exec_steps(run, "exec-7", 64 * 1024 * 1024 + 1, 32, &s);
	assert_int_equal(s.n, 4);
	_cleanup_free_ char *x = xasprintf("%s/exec-7", run);
	assert_string_equal(s.v[0].path, x);
	assert_int_equal(apply_like_kernel(&s, true, &err), 0);
	_cleanup_free_ char *mem = read_text(x, "memory.max");
	_cleanup_free_ char *swap = read_text(x, "memory.swap.max");
	_cleanup_free_ char *pids = read_text(x, "pids.max");
	assert_string_equal(mem, "67112960"); /* 64 MiB + one page */
	assert_string_equal(swap, "0");
	assert_string_equal(pids, "32");
	al_cg_steps_clear(&s);

	/* No limits of its own: only the directory; a kernel without swap
	 * accounting has no memory.swap.max, which is not an error. */
	al_cg_v2_exec_steps(run, "exec-8", 0, 0, &s);
	assert_int_equal(s.n, 1);
	al_cg_steps_clear(&s);
	al_cg_v2_exec_steps(run, "exec-9", 4096, 0, &s);
	assert_int_equal(s.n, 3); /* the directory, memory.max, memory.swap.max */
	assert_int_equal(apply_like_kernel(&s, false, &err), 0);
	_cleanup_free_ char *x9 = xasprintf("%s/exec-9", run);
	_cleanup_free_ char *mem9 = read_text(x9, "memory.max");
	assert_string_equal(mem9, "4096");
	/* A required file missing is an error naming it. */
	_cleanup_free_ char *gone = xasprintf("%s/memory.max", x9);
	unlink(gone);
	struct al_cg_steps only = {.n = 1};
	only.v[0] = s.v[1];
	assert_int_equal(al_cg_steps_apply(&only, &err), -ENOENT);
	assert_non_null(strstr(err.msg, gone));
	al_cg_steps_clear(&s);

	_cleanup_free_ char *cmd = xasprintf("rm -rf %s", tmp);
	assert_int_equal(system(cmd), 0);
}

static void put(const char *dir, const char *rel, const char *procs)
{
	_cleanup_free_ char *d = xasprintf("%s%s", dir, rel);
	_cleanup_free_ char *cmd = xasprintf("mkdir -p %s", d);
	assert_int_equal(system(cmd), 0);
	_cleanup_free_ char *p = xasprintf("%s/cgroup.procs", d);
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	fputs(procs, f);
	assert_int_equal(fclose(f), 0);
}

/* A cgroupsPath below a cgroup that holds processes (another container's)
 * is refused, naming it; v2 also looks in a session's init leaf; the
 * hierarchy's own root does not count. On a fake tree. */
static void test_path_ancestors(void **state)
{
	char tmp[] = "/tmp/al-cg-anc-XXXXXX";
	struct al_error err = {0};
	(void)state;

	assert_non_null(mkdtemp(tmp));
	put(tmp, "", "1\n");
	put(tmp, "/ctr", "4242\n");
	put(tmp, "/parent", "");
	put(tmp, "/parent/child", "");
	put(tmp, "/sess", "");
	put(tmp, "/sess/init", "77\n");

	assert_int_equal(al_cg_check_ancestors(tmp, "/ctr/b", false, &err), -EBUSY);
	assert_non_null(strstr(err.msg, "linux.cgroupsPath"));
	assert_non_null(strstr(err.msg, "/ctr holds processes"));
	assert_int_equal(al_cg_check_ancestors(tmp, "/ctr/x/y/z", false, &err), -EBUSY);
	assert_int_equal(al_cg_check_ancestors(tmp, "/parent/child/new", false, &err), 0);
	assert_int_equal(al_cg_check_ancestors(tmp, "/missing/new", false, &err), 0);
	assert_int_equal(al_cg_check_ancestors(tmp, "/top", false, &err), 0);
	assert_int_equal(al_cg_check_ancestors(tmp, "/sess/b", false, &err), 0);
	assert_int_equal(al_cg_check_ancestors(tmp, "/sess/b", true, &err), -EBUSY);

	_cleanup_free_ char *cmd = xasprintf("rm -rf %s", tmp);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_session_steps),
	    cmocka_unit_test(test_path_ancestors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
