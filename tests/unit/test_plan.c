/* policy/plan.h: lowering a policy (built in code) to a plan. Checks the
 * defaults, the refusals, the order of the mount ops, the environment and
 * the landlock rules. al_plan_build() only looks at the host (stat,
 * realpath), so this runs without root; as root it expects host ids of a
 * slot of the pool (or a pinned range) instead of the rootless mapping. */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <linux/mount.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/error.h"
#include "core/sys.h"
#include "core/util.h"
#include "backend/native/lower.h"
#include "ids/slots.h"
#include "policy/plan.h"
#include "policy/policy.h"

/* Host paths the mount tests bind: <tmp>/dir (0755) holding data.csv
 * (0644), a symlink to dir, a 0700 directory and a 0777 one (as root the
 * sandbox user is an unprivileged host id and needs the "other" bits). */
static char tmp[] = "/tmp/airlock-unit-plan-XXXXXX";
static char dir[PATH_MAX], file[PATH_MAX], link_to_dir[PATH_MAX];
static char private_dir[PATH_MAX], out_dir[PATH_MAX];

static int setup(void **state)
{
	int fd;

	if (!mkdtemp(tmp) || chmod(tmp, 0755) < 0)
		return -1;
	snprintf(dir, sizeof(dir), "%s/dir", tmp);
	snprintf(file, sizeof(file), "%s/dir/data.csv", tmp);
	snprintf(link_to_dir, sizeof(link_to_dir), "%s/link", tmp);
	snprintf(private_dir, sizeof(private_dir), "%s/private", tmp);
	snprintf(out_dir, sizeof(out_dir), "%s/out", tmp);
	if (mkdir(dir, 0755) < 0 || chmod(dir, 0755) < 0 || symlink("dir", link_to_dir) < 0 ||
	    mkdir(private_dir, 0700) < 0 || mkdir(out_dir, 0777) < 0 || chmod(out_dir, 0777) < 0)
		return -1;
	fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0 || fchmod(fd, 0644) < 0 || write(fd, "a,b\n", 4) != 4)
		return -1;
	close(fd);
	/* landlock is required by default; without it every build would fail. */
	if (al_landlock_abi() == 0)
		print_message("landlock is unavailable: plans are built best-effort\n");
	return 0;
}

static int teardown(void **state)
{
	unlink(file);
	unlink(link_to_dir);
	rmdir(dir);
	rmdir(private_dir);
	rmdir(out_dir);
	rmdir(tmp);
	return 0;
}

/* helpers */

/* The native backend's lowering of each plan a test built (the staging
 * ops, landlock rules, id maps), made on first use and freed with it. */
static struct {
	const struct al_plan *plan;
	struct al_native_plan *np;
} lowered[8];

static const struct al_native_plan *L(const struct al_plan *plan)
{
	struct al_error err = {0};
	size_t free_slot = AL_ARRAY_SIZE(lowered);

	for (size_t i = 0; i < AL_ARRAY_SIZE(lowered); i++) {
		if (lowered[i].plan == plan)
			return lowered[i].np;
		if (!lowered[i].plan && free_slot == AL_ARRAY_SIZE(lowered))
			free_slot = i;
	}
	if (free_slot == AL_ARRAY_SIZE(lowered))
		fail_msg("more than %zu plans alive at once", AL_ARRAY_SIZE(lowered));
	if (al_native_lower(plan, &lowered[free_slot].np, &err) < 0)
		fail_msg("al_native_lower: %s", err.msg);
	lowered[free_slot].plan = plan;
	return lowered[free_slot].np;
}

static void free_plan(struct al_plan *plan)
{
	for (size_t i = 0; plan && i < AL_ARRAY_SIZE(lowered); i++) {
		if (lowered[i].plan == plan) {
			al_native_plan_free(lowered[i].np);
			lowered[i].plan = NULL;
			lowered[i].np = NULL;
		}
	}
	al_plan_free(plan);
}

static void free_planp(struct al_plan **plan)
{
	free_plan(*plan);
}

static struct al_policy *new_policy(void)
{
	struct al_policy *p = al_policy_new("test");

	al_strv_push(&p->command, "/bin/true");
	if (al_landlock_abi() == 0)
		p->landlock = AL_LANDLOCK_BEST_EFFORT;
	return p;
}

static struct al_plan *build_ok(const struct al_policy *pol)
{
	struct al_plan *plan = NULL;
	struct al_error err = {0};
	int r = al_plan_build(pol, 0, &plan, &err);

	if (r != 0)
		fail_msg("al_plan_build failed (%d): %s", r, err.msg);
	assert_non_null(plan);
	return plan;
}

/* Written only on success: a refusal must leave *ret alone. */
static struct al_plan *const UNTOUCHED = (struct al_plan *)&UNTOUCHED;

/* Expect a refusal whose message contains every string in want[]. */
static void build_bad(const struct al_policy *pol, const char *const *want)
{
	struct al_plan *plan = UNTOUCHED;
	struct al_error err = {0};
	int r = al_plan_build(pol, 0, &plan, &err);

	if (r >= 0) {
		free_plan(plan);
		fail_msg("al_plan_build succeeded, expected an error containing \"%s\"", want[0]);
	}
	assert_ptr_equal(plan, UNTOUCHED);
	for (size_t i = 0; want[i]; i++)
		assert_contains(err.msg, want[i]);
}

#define BUILD_BAD(pol, ...) build_bad(pol, (const char *const[]){__VA_ARGS__, NULL})

static const struct al_mount_op *find_op(const struct al_plan *plan, enum al_op_kind kind,
					 const char *target, size_t *ret_index)
{
	for (size_t i = 0; i < L(plan)->n_ops; i++) {
		if (L(plan)->ops[i].kind == kind && strcmp(L(plan)->ops[i].target, target) == 0) {
			if (ret_index)
				*ret_index = i;
			return &L(plan)->ops[i];
		}
	}
	return NULL;
}

static const struct al_mount_op *need_op(const struct al_plan *plan, enum al_op_kind kind,
					 const char *target, size_t *ret_index)
{
	const struct al_mount_op *op = find_op(plan, kind, target, ret_index);

	if (!op)
		fail_msg("no op of kind %d for %s", (int)kind, target);
	return op;
}

static bool has_target(const struct al_plan *plan, const char *target)
{
	for (size_t i = 0; i < L(plan)->n_ops; i++)
		if (strcmp(L(plan)->ops[i].target, target) == 0)
			return true;
	return false;
}

static const struct al_landlock_rule *find_rule(const struct al_plan *plan, const char *path)
{
	for (size_t i = 0; i < L(plan)->n_ll_rules; i++)
		if (strcmp(L(plan)->ll_rules[i].path, path) == 0)
			return &L(plan)->ll_rules[i];
	return NULL;
}

static const char *find_env(const struct al_plan *plan, const char *name, size_t *ret_count)
{
	size_t n = strlen(name), count = 0;
	const char *found = NULL;

	for (size_t i = 0; plan->envp[i]; i++) {
		if (strncmp(plan->envp[i], name, n) == 0 && plan->envp[i][n] == '=') {
			found = plan->envp[i] + n + 1;
			count++;
		}
	}
	if (ret_count)
		*ret_count = count;
	return found;
}

static bool strictly_under(const char *path, const char *prefix)
{
	return strcmp(path, prefix) != 0 && al_path_is_under(path, prefix);
}

static bool is_mount_kind(enum al_op_kind k)
{
	return k == AL_OP_BIND || k == AL_OP_TMPFS || k == AL_OP_PROC;
}

/* The child runs the ops in order, so (1) nothing may be created beneath a
 * target that a later op mounts over (it would be hidden), (2) every op's
 * parent directory is a staging root or made by an earlier op, and (3) no
 * op creates a node (a directory, file, symlink or bind placeholder) inside
 * an earlier bind of a host path: that would write to the host, or fail on
 * a read-only bind. Returns NULL or a description of the first violation. */
static const char *order_violation(const struct al_plan *plan, char *buf, size_t len)
{
	for (size_t j = 0; j < L(plan)->n_ops; j++) {
		const struct al_mount_op *later = &L(plan)->ops[j];
		if (!is_mount_kind(later->kind))
			continue;
		for (size_t i = 0; i < j; i++) {
			if (strictly_under(L(plan)->ops[i].target, later->target)) {
				snprintf(buf, len,
					 "op %zu (%s) is hidden by the later mount %zu (%s)", i,
					 L(plan)->ops[i].target, j, later->target);
				return buf;
			}
		}
	}
	for (size_t i = 0; i < L(plan)->n_ops; i++) {
		char parent[PATH_MAX];
		bool ok = false;

		snprintf(parent, sizeof(parent), "%s", L(plan)->ops[i].target);
		*strrchr(parent, '/') = '\0';
		/* "/scratch" itself (parent "") and the children of the roots. */
		if (!parent[0] || strcmp(parent, "/newroot") == 0 ||
		    strcmp(parent, "/scratch") == 0)
			continue;
		for (size_t k = 0; k < i && !ok; k++) {
			const struct al_mount_op *op = &L(plan)->ops[k];
			ok = strcmp(op->target, parent) == 0 &&
			     (op->kind == AL_OP_MKDIR || op->kind == AL_OP_TMPFS ||
			      op->kind == AL_OP_PROC || (op->kind == AL_OP_BIND && op->dir));
		}
		if (!ok) {
			snprintf(buf, len, "op %zu (%s): parent %s is not made by an earlier op", i,
				 L(plan)->ops[i].target, parent);
			return buf;
		}
	}
	for (size_t i = 0; i < L(plan)->n_ops; i++) {
		const struct al_mount_op *op = &L(plan)->ops[i];
		if (op->kind == AL_OP_TMPFS || op->kind == AL_OP_PROC)
			continue; /* these mount on an existing directory */
		for (size_t k = 0; k < i; k++) {
			const struct al_mount_op *host = &L(plan)->ops[k];
			if (host->kind == AL_OP_BIND &&
			    strncmp(host->source, "/oldroot/", 9) == 0 &&
			    strictly_under(op->target, host->target)) {
				snprintf(buf, len,
					 "op %zu (%s) creates a node inside host bind %zu (%s)", i,
					 op->target, k, host->target);
				return buf;
			}
		}
	}
	return NULL;
}

static void assert_order(const struct al_plan *plan)
{
	char buf[PATH_MAX * 2 + 128];
	const char *v = order_violation(plan, buf, sizeof(buf));

	if (v)
		fail_msg("bad op order: %s", v);
}

#define LL_MODIFY_TREE                                                                             \
	(LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |                          \
	 LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |                               \
	 LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO |                             \
	 LANDLOCK_ACCESS_FS_MAKE_SYM | LANDLOCK_ACCESS_FS_REFER | LANDLOCK_ACCESS_FS_TRUNCATE)
#define LL_ANY_WRITE (LL_MODIFY_TREE | LANDLOCK_ACCESS_FS_WRITE_FILE)

/* tests: refusals of the whole policy */

static void test_no_command(void **state)
{
	_cleanup_(al_policy_freep) struct al_policy *p = new_policy();

	al_strv_free(p->command);
	p->command = NULL;
	BUILD_BAD(p, "no command");
	p->command = xcalloc(1, sizeof(char *)); /* empty argv */
	BUILD_BAD(p, "no command");
}

/* `airlock check` builds a plan without a command. */
static void test_command_optional(void **state)
{
	_cleanup_(al_policy_freep) struct al_policy *p = new_policy();
	struct al_plan *plan = NULL;
	struct al_error err = {0};

	al_strv_free(p->command);
	p->command = NULL;
	assert_int_equal(al_plan_build(p, AL_PLAN_COMMAND_OPTIONAL, &plan, &err), 0);
	assert_non_null(plan->argv);
	assert_null(plan->argv[0]);
	assert_non_null(find_op(plan, AL_OP_BIND, "/newroot/usr", NULL));
	free_plan(plan);
}

static void test_unknown_backend(void **state)
{
	_cleanup_(al_policy_freep) struct al_policy *p = new_policy();
	struct al_plan *plan;

	p->backend = xstrdup("firecracker");
	BUILD_BAD(p, "unknown backend", "\"firecracker\"");
	free(p->backend);
	p->backend = xstrdup("native");
	plan = build_ok(p);
	assert_string_equal(plan->backend, "native");
	free_plan(plan);
}

static void test_bad_scalars(void **state)
{
	_cleanup_(al_policy_freep) struct al_policy *p = new_policy();

	p->hostname = xstrdup("bad_host");
	BUILD_BAD(p, "hostname", "bad_host");
	free(p->hostname);
	p->hostname = NULL;

	p->network_mode = xstrdup("host");
	BUILD_BAD(p, "network mode", "\"host\"");
	free(p->network_mode);
	p->network_mode = NULL;

	static const char *const bad_workdirs[] = {"work", "/work/",  "/a/../b",  "/tmp", "/usr/w",
						   "/etc", "/proc/1", "/dev/shm", "/"};
	for (size_t i = 0; i < AL_ARRAY_SIZE(bad_workdirs); i++) {
		free(p->workdir);
		p->workdir = xstrdup(bad_workdirs[i]);
		BUILD_BAD(p, "workdir", bad_workdirs[i]);
	}
}

/* tests: the default plan */

static void test_default_plan(void **state)
{
	_cleanup_(al_policy_freep) struct al_policy *p = new_policy();
	_cleanup_(free_planp) struct al_plan *plan = build_ok(p);
	const struct al_mount_op *op;
	char want[64];

	assert_string_equal(plan->argv[0], "/bin/true");
	assert_null(plan->argv[1]);
	assert_ptr_not_equal(plan->argv, p->command);
	assert_string_equal(plan->hostname, AL_DEFAULT_HOSTNAME);
	assert_string_equal(plan->workdir, AL_DEFAULT_WORKDIR);
	assert_string_equal(plan->backend, "native");
	assert_int_equal(plan->timeout_ms, AL_DEFAULT_TIMEOUT_MS);
	assert_int_equal(plan->scratch_bytes, AL_DEFAULT_SCRATCH_BYTES);

	/* /usr: a read-only, nosuid, nodev bind of the host's /usr. */
	op = need_op(plan, AL_OP_BIND, "/newroot/usr", NULL);
	assert_string_equal(op->source, "/oldroot/usr");
	assert_true(op->dir);
	assert_true(op->attr & MOUNT_ATTR_RDONLY);
	assert_true(op->attr & MOUNT_ATTR_NOSUID);
	assert_true(op->attr & MOUNT_ATTR_NODEV);

	/* The scratch: one size-limited tmpfs behind /tmp and the workdir. */
	op = need_op(plan, AL_OP_TMPFS, "/scratch", NULL);
	snprintf(want, sizeof(want), "size=%llu", (unsigned long long)AL_DEFAULT_SCRATCH_BYTES);
	assert_contains(op->source, want);
	op = need_op(plan, AL_OP_BIND, "/newroot/tmp", NULL);
	assert_string_equal(op->source, "/scratch/tmp");
	assert_false(op->attr & MOUNT_ATTR_RDONLY);
	assert_true(op->attr & MOUNT_ATTR_NOSUID);
	assert_true(op->attr & MOUNT_ATTR_NODEV);
	op = need_op(plan, AL_OP_BIND, "/newroot/work", NULL);
	assert_string_equal(op->source, "/scratch/work");
	op = need_op(plan, AL_OP_MKDIR, "/scratch/work", NULL);
	assert_true(op->sandbox_owned);

	need_op(plan, AL_OP_PROC, "/newroot/proc", NULL);
	op = need_op(plan, AL_OP_BIND, "/newroot/dev/null", NULL);
	assert_string_equal(op->source, "/oldroot/dev/null");
	assert_false(op->attr & MOUNT_ATTR_NODEV); /* the node is the point */
	op = need_op(plan, AL_OP_BIND, "/newroot/dev/shm", NULL);
	assert_string_equal(op->source, "/scratch/shm");
	op = need_op(plan, AL_OP_SYMLINK, "/newroot/dev/fd", NULL);
	assert_string_equal(op->source, "/proc/self/fd");

	/* Nothing from the host's /etc except the few read-only binds. */
	assert_false(has_target(plan, "/newroot/etc/shadow"));
	op = find_op(plan, AL_OP_BIND, "/newroot/etc/ld.so.cache", NULL);
	if (op)
		assert_true(op->attr & MOUNT_ATTR_RDONLY);

	/* And never the host root itself. */
	for (size_t i = 0; i < L(plan)->n_ops; i++) {
		if (L(plan)->ops[i].kind == AL_OP_BIND)
			assert_string_not_equal(L(plan)->ops[i].source, "/oldroot");
		assert_contains(L(plan)->ops[i].target, "/");
		assert_non_null(L(plan)->ops[i].what);
	}

	assert_true(L(plan)->seccomp.len > 0);
	assert_non_null(L(plan)->seccomp.filter);
	assert_non_null(L(plan)->seccomp_rules);
	assert_true(L(plan)->n_seccomp_rules > 0);
}

static void test_system_symlinks(void **state)
{
	_cleanup_(al_policy_freep) struct al_policy *p = new_policy();
	_cleanup_(free_planp) struct al_plan *plan = build_ok(p);
	static const char *const dirs[] = {"/bin", "/sbin", "/lib", "/lib64"};
	char target[64], link[PATH_MAX];
	struct stat st;

	for (size_t i = 0; i < AL_ARRAY_SIZE(dirs); i++) {
		snprintf(target, sizeof(target), "/newroot%s", dirs[i]);
		if (lstat(dirs[i], &st) < 0) {
			assert_false(has_target(plan, target));
		} else if (S_ISLNK(st.st_mode)) {
			/* Merged /usr (Debian 12): the same symlink, not a bind. */
			const struct al_mount_op *op = need_op(plan, AL_OP_SYMLINK, target, NULL);
			ssize_t n = readlink(dirs[i], link, sizeof(link) - 1);
			assert_true(n > 0);
			link[n] = '\0';
			assert_string_equal(op->source, link);
			assert_null(find_op(plan, AL_OP_BIND, target, NULL));
		} else {
			const struct al_mount_op *op = need_op(plan, AL_OP_BIND, target, NULL);
			assert_true(op->attr & MOUNT_ATTR_RDONLY);
		}
	}
}

static void test_etc_synthesized(void **state)
{
	_cleanup_(al_policy_freep) struct al_policy *p = new_policy();
	_cleanup_(free_planp) struct al_plan *plan = NULL;
	const struct al_mount_op *op;

	p->hostname = xstrdup("box");
	p->workdir = xstrdup("/job");
	plan = build_ok(p);

	op = need_op(plan, AL_OP_FILE, "/newroot/etc/passwd", NULL);
	assert_int_equal(op->len, strlen(op->source));
	assert_contains(op->source, "sandbox:x:1000:1000:");
	assert_contains(op->source, ":/job:"); /* home is the workdir */
	assert_contains(op->source, "root:x:0:0:");
	op = need_op(plan, AL_OP_FILE, "/newroot/etc/group", NULL);
	assert_contains(op->source, "sandbox:x:1000:");
	op = need_op(plan, AL_OP_FILE, "/newroot/etc/hostname", NULL);
	assert_string_equal(op->source, "box\n");
	assert_int_equal(op->len, 4);
	op = need_op(plan, AL_OP_FILE, "/newroot/etc/hosts", NULL);
	assert_contains(op->source, "127.0.0.1\tlocalhost\n");
	assert_contains(op->source, "\tbox\n");
	op = need_op(plan, AL_OP_FILE, "/newroot/etc/resolv.conf", NULL);
	assert_contains(op->source, "nameserver 127.0.0.1");
	need_op(plan, AL_OP_BIND, "/newroot/job", NULL);
	assert_false(has_target(plan, "/newroot/work"));
	assert_string_equal(plan->hostname, "box");
}

static void test_env(void **state)
{
	_cleanup_(al_policy_freep) struct al_policy *p = new_policy();
	_cleanup_(free_planp) struct al_plan *plan = NULL;
	struct al_plan *plan2;
	size_t count;

	assert_int_equal(setenv("AIRLOCK_UNIT_SECRET", "x", 1), 0);
	plan = build_ok(p);
	assert_int_equal(al_strv_len(plan->envp), 4);
	assert_string_equal(find_env(plan, "PATH", NULL), AL_DEFAULT_PATH);
	assert_string_equal(find_env(plan, "HOME", NULL), AL_DEFAULT_WORKDIR);
	assert_string_equal(find_env(plan, "LANG", NULL), "C.UTF-8");
	assert_string_equal(find_env(plan, "TMPDIR", NULL), "/tmp");
	/* Nothing leaks in from the host environment. */
	for (size_t i = 0; plan->envp[i]; i++)
		assert_not_contains(plan->envp[i], "AIRLOCK_UNIT_SECRET");
	assert_null(find_env(plan, "USER", NULL));
	unsetenv("AIRLOCK_UNIT_SECRET");

	/* The policy's env overrides the defaults and adds to them. */
	al_policy_set_env(p, "PATH", "/opt/bin");
	al_policy_set_env(p, "FOO", "bar=baz");
	plan2 = build_ok(p);
	assert_string_equal(find_env(plan2, "PATH", &count), "/opt/bin");
	assert_int_equal(count, 1);
	assert_string_equal(find_env(plan2, "FOO", NULL), "bar=baz");
	assert_string_equal(find_env(plan2, "HOME", NULL), AL_DEFAULT_WORKDIR);
	assert_int_equal(al_strv_len(plan2->envp), 5);
	free_plan(plan2);
}

static void test_ids(void **state)
{
	_cleanup_(al_policy_freep) struct al_policy *p = new_policy();
	_cleanup_(free_planp) struct al_plan *plan = build_ok(p);
	struct al_host_ids ids;
	char want[96];

	if (geteuid() == 0) {
		/* Per run by default: the maps wait for the run's slot. */
		assert_false(plan->rootless);
		assert_true(plan->ids_per_run);
		assert_string_equal(L(plan)->uid_map, "");
		al_plan_host_ids(plan, 5, &ids);
		assert_int_equal(ids.root_uid, AL_IDS_POOL_BASE + 5 * AL_IDS_SLOT_SIZE);
		assert_int_equal(ids.root_gid, ids.root_uid);
		assert_int_equal(ids.uid, ids.root_uid + AL_SANDBOX_UID);
		assert_int_equal(ids.gid, ids.root_uid + AL_SANDBOX_GID);
		assert_int_equal(ids.owner, ids.root_uid);
		assert_int_equal(ids.slot, 5);
		/* The last slot ends below systemd's foreign range and 2^31. */
		al_plan_host_ids(plan, AL_IDS_POOL_SLOTS - 1, &ids);
		assert_true(ids.root_uid + AL_IDS_SLOT_SIZE - 1 < 0x7FFE0000u);
		/* A pinned range: the maps are known at once. */
		p->host_ids = AL_HOST_IDS_FIXED;
		p->host_ids_base = 3u << 28;
		free_plan(TAKE_PTR(plan));
		plan = build_ok(p);
		assert_false(plan->ids_per_run);
		assert_int_equal(plan->host_uid, (3u << 28) + AL_SANDBOX_UID);
		snprintf(want, sizeof(want), "0 %u 1\n%u %u 1\n", 3u << 28, AL_SANDBOX_UID,
			 (3u << 28) + AL_SANDBOX_UID);
		assert_string_equal(L(plan)->uid_map, want);
		al_plan_host_ids(plan, 7, &ids);
		assert_int_equal(ids.slot, -1);
		assert_int_equal(ids.owner, 3u << 28);
	} else {
		assert_true(plan->rootless);
		assert_int_equal(plan->host_uid, geteuid());
		assert_int_equal(plan->host_gid, getegid());
		snprintf(want, sizeof(want), "%u %u 1\n", AL_SANDBOX_UID, (unsigned)geteuid());
		assert_string_equal(L(plan)->uid_map, want);
		snprintf(want, sizeof(want), "%u %u 1\n", AL_SANDBOX_GID, (unsigned)getegid());
		assert_string_equal(L(plan)->gid_map, want);
		al_plan_host_ids(plan, 3, &ids);
		assert_int_equal(ids.owner, geteuid());
		assert_int_equal(ids.slot, -1);
		/* A pinned range cannot be had rootless: refused. */
		p->host_ids = AL_HOST_IDS_FIXED;
		p->host_ids_base = 3u << 28;
		struct al_plan *bad = NULL;
		struct al_error err = {0};
		assert_int_equal(al_plan_build(p, 0, &bad, &err), -EPERM);
		assert_non_null(strstr(err.msg, "identity.host_ids"));
	}
}

/* The user namespace's own limits: inotify as planned (defaults or the
 * policy's), user namespaces and fanotify groups at 0. */
static void test_ns_limits(void **state)
{
	_cleanup_(al_policy_freep) struct al_policy *p = new_policy();
	_cleanup_(free_planp) struct al_plan *plan = build_ok(p);
	struct al_ns_limit lim[AL_NS_LIMITS_MAX];
	size_t n = al_plan_ns_limits(plan, lim);
	bool user = false;

	assert_int_equal(n, 4);
	assert_string_equal(lim[0].name, "max_inotify_instances");
	assert_int_equal(lim[0].value, AL_DEFAULT_INOTIFY_INSTANCES);
	assert_string_equal(lim[1].name, "max_inotify_watches");
	assert_int_equal(lim[1].value, AL_DEFAULT_INOTIFY_WATCHES);
	for (size_t i = 2; i < n; i++) {
		assert_int_equal(lim[i].value, 0);
		user |= strcmp(lim[i].name, "max_user_namespaces") == 0 && !lim[i].optional;
	}
	assert_true(user);
	p->inotify_instances = 3;
	p->inotify_watches = 99;
	free_plan(TAKE_PTR(plan));
	plan = build_ok(p);
	n = al_plan_ns_limits(plan, lim);
	assert_int_equal(lim[0].value, 3);
	assert_int_equal(lim[1].value, 99);
}

static void test_limits_carried(void **state)
{
	_cleanup_(al_policy_freep) struct al_policy *p = new_policy();
	_cleanup_(free_planp) struct al_plan *plan = NULL;
	const struct al_mount_op *op;

	p->timeout_ms = 1500;
	p->scratch_bytes = 128ULL << 20;
	plan = build_ok(p);
	assert_int_equal(plan->timeout_ms, 1500);
	assert_int_equal(plan->scratch_bytes, 128ULL << 20);
	op = need_op(plan, AL_OP_TMPFS, "/scratch", NULL);
	assert_contains(op->source, "size=134217728");
}

/* tests: the order of the ops */

static void test_op_order(void **state)
{
	_cleanup_(al_policy_freep) struct al_policy *p = new_policy();
	_cleanup_(free_planp) struct al_plan *plan = NULL;
	size_t dev, dev_null, dev_shm, scratch, tmp_bind, shm_dir, etc_dir, passwd;

	al_policy_add_mount(p, dir, "/input", AL_MOUNT_RO, AL_UNSET, "--ro");
	al_policy_add_mount(p, file, "/in/deep/data.csv", AL_MOUNT_RO, AL_UNSET, "--ro");
	plan = build_ok(p);

	need_op(plan, AL_OP_TMPFS, "/newroot/dev", &dev);
	need_op(plan, AL_OP_BIND, "/newroot/dev/null", &dev_null);
	need_op(plan, AL_OP_BIND, "/newroot/dev/shm", &dev_shm);
	assert_true(dev < dev_null);
	assert_true(dev < dev_shm);
	need_op(plan, AL_OP_TMPFS, "/scratch", &scratch);
	need_op(plan, AL_OP_MKDIR, "/scratch/shm", &shm_dir);
	need_op(plan, AL_OP_BIND, "/newroot/tmp", &tmp_bind);
	assert_true(scratch < shm_dir);
	assert_true(shm_dir < dev_shm);
	assert_true(scratch < tmp_bind);
	need_op(plan, AL_OP_MKDIR, "/newroot/etc", &etc_dir);
	need_op(plan, AL_OP_FILE, "/newroot/etc/passwd", &passwd);
	assert_true(etc_dir < passwd);

	assert_order(plan);
}

/* A workdir beneath a mount: the mount must not hide the workdir's bind. */
static void test_workdir_inside_mount(void **state)
{
	struct al_policy *p = new_policy();
	struct al_plan *plan = NULL;
	struct al_error err = {0};
	char buf[PATH_MAX * 2 + 128];
	const char *v;
	int r;

	p->workdir = xstrdup("/data/w");
	al_policy_add_mount(p, dir, "/data", AL_MOUNT_RO, AL_UNSET, "--ro");
	r = al_plan_build(p, 0, &plan, &err);
	al_policy_free(p);
	if (r < 0) {
		assert_contains(err.msg, "/data");
		return; /* refusing is fine */
	}
	v = order_violation(plan, buf, sizeof(buf));
	free_plan(plan); /* before a skip: cmocka longjmps past cleanups */
	assert_null(v);
}

/* tests: mounts */

static void test_reserved_mount_paths(void **state)
{
	/* clang-format off */
	static const char *const bad[] = {
		"/",
		"/proc", "/proc/x", "/etc", "/etc/x", "/dev", "/dev/x", "/dev/shm",
		"/usr", "/usr/x", "/usr/lib", "/bin/x", "/lib",
		"/tmp", "/tmp/x",
	};
	/* clang-format on */

	for (size_t i = 0; i < AL_ARRAY_SIZE(bad); i++) {
		_cleanup_(al_policy_freep) struct al_policy *p = new_policy();
		al_policy_add_mount(p, dir, bad[i], AL_MOUNT_RO, AL_UNSET, "origin-x");
		BUILD_BAD(p, "origin-x", bad[i]);
	}
}

static void test_mount_in_scratch(void **state)
{
	_cleanup_(al_policy_freep) struct al_policy *p = new_policy();
	_cleanup_(al_policy_freep) struct al_policy *q = new_policy();

	al_policy_add_mount(p, dir, "/tmp/in", AL_MOUNT_RO, AL_UNSET, "--ro");
	BUILD_BAD(p, "--ro", "/tmp/in", "scratch", "/tmp");
	al_policy_free(p);

	/* Under the workdir a mount is its own subdirectory; the scratch
	 * still backs the rest, and its face comes first. */
	p = new_policy();
	al_policy_add_mount(p, dir, "/work/in", AL_MOUNT_RO, AL_UNSET, "--ro");
	_cleanup_(free_planp) struct al_plan *plan = build_ok(p);
	size_t face, in;
	need_op(plan, AL_OP_BIND, "/newroot/work", &face);
	need_op(plan, AL_OP_BIND, "/newroot/work/in", &in);
	assert_true(face < in);

	q->workdir = xstrdup("/job");
	al_policy_add_mount(q, out_dir, "/job/in", AL_MOUNT_RW, AL_UNSET, "--rw");
	_cleanup_(free_planp) struct al_plan *qplan = build_ok(q);
	need_op(qplan, AL_OP_BIND, "/newroot/job/in", NULL);
}

static void test_mount_host_missing(void **state)
{
	_cleanup_(al_policy_freep) struct al_policy *p = new_policy();
	char missing[PATH_MAX + 16];

	snprintf(missing, sizeof(missing), "%s/does-not-exist", tmp);
	al_policy_add_mount(p, missing, "/input", AL_MOUNT_RO, AL_UNSET, "filesystem.mounts[0]");
	BUILD_BAD(p, "filesystem.mounts[0]", missing, strerror(ENOENT));
}

static void test_mount_bad_kinds(void **state)
{
	_cleanup_(al_policy_freep) struct al_policy *p = new_policy();
	_cleanup_(al_policy_freep) struct al_policy *q = new_policy();
	_cleanup_(al_policy_freep) struct al_policy *r = new_policy();

	al_policy_add_mount(p, "/dev/null", "/input/null", AL_MOUNT_RO, AL_UNSET, "--ro");
	BUILD_BAD(p, "/dev/null", "neither a regular file nor a directory");

	al_policy_add_mount(q, dir, "input", AL_MOUNT_RO, AL_UNSET, "--ro");
	BUILD_BAD(q, "\"input\"", "clean absolute");

	/* The same sandbox path twice, and one mount inside another. */
	al_policy_add_mount(r, dir, "/data", AL_MOUNT_RO, AL_UNSET, "--ro");
	al_policy_add_mount(r, file, "/data/x.csv", AL_MOUNT_RO, AL_UNSET, "--ro");
	BUILD_BAD(r, "/data/x.csv", "inside another mount", "/data");
	free(r->mounts[1].path);
	r->mounts[1].path = xstrdup("/data");
	BUILD_BAD(r, "duplicate mount point /data");
}

/* "/data-x" sorts between "/data" and "/data/x" (strcmp: '-' < '/'). */
static void test_nested_mount_not_adjacent(void **state)
{
	struct al_policy *p = new_policy();
	struct al_plan *plan = NULL;
	struct al_error err = {0};
	int r;

	al_policy_add_mount(p, dir, "/data", AL_MOUNT_RO, AL_UNSET, "a");
	al_policy_add_mount(p, dir, "/data-x", AL_MOUNT_RO, AL_UNSET, "b");
	al_policy_add_mount(p, file, "/data/x", AL_MOUNT_RO, AL_UNSET, "c");
	r = al_plan_build(p, 0, &plan, &err);
	free_plan(r == 0 ? plan : NULL);
	al_policy_free(p);
	assert_true(r < 0);
	assert_contains(err.msg, "inside another mount");
}

static void test_mount_ro_dir(void **state)
{
	_cleanup_(al_policy_freep) struct al_policy *p = new_policy();
	_cleanup_(free_planp) struct al_plan *plan = NULL;
	const struct al_mount_op *op;
	const struct al_landlock_rule *rule;
	char want[PATH_MAX + 16];
	struct stat st;

	/* Given through a symlink: the plan stores the resolved path. */
	al_policy_add_mount(p, link_to_dir, "/input", AL_MOUNT_RO, AL_UNSET, "--ro");
	plan = build_ok(p);
	op = need_op(plan, AL_OP_BIND, "/newroot/input", NULL);
	snprintf(want, sizeof(want), "/oldroot%s", dir);
	assert_string_equal(op->source, want);
	assert_true(op->dir);
	assert_true(op->attr & MOUNT_ATTR_RDONLY);
	assert_true(op->attr & MOUNT_ATTR_NOSUID);
	assert_true(op->attr & MOUNT_ATTR_NODEV);
	assert_false(op->attr & MOUNT_ATTR_NOEXEC); /* exec unset = allowed */
	assert_int_equal(stat(dir, &st), 0);
	assert_int_equal(op->dev, st.st_dev);
	assert_int_equal(op->ino, st.st_ino);
	assert_order(plan);

	if (L(plan)->landlock_abi > 0) {
		rule = find_rule(plan, "/input");
		assert_non_null(rule);
		assert_true(rule->access & LANDLOCK_ACCESS_FS_READ_FILE);
		assert_true(rule->access & LANDLOCK_ACCESS_FS_READ_DIR);
		assert_true(rule->access & LANDLOCK_ACCESS_FS_EXECUTE);
		assert_false(rule->access & LL_ANY_WRITE);
	}
}

static void test_mount_rw_noexec_file(void **state)
{
	_cleanup_(al_policy_freep) struct al_policy *p = new_policy();
	_cleanup_(free_planp) struct al_plan *plan = NULL;
	const struct al_mount_op *op;
	const struct al_landlock_rule *rule;

	al_policy_add_mount(p, out_dir, "/output", AL_MOUNT_RW, 0, "--rw");
	al_policy_add_mount(p, file, "/in/data.csv", AL_MOUNT_RO, 0, "--ro");
	plan = build_ok(p);

	op = need_op(plan, AL_OP_BIND, "/newroot/output", NULL);
	assert_false(op->attr & MOUNT_ATTR_RDONLY);
	assert_true(op->attr & MOUNT_ATTR_NOEXEC);
	assert_true(op->attr & MOUNT_ATTR_NOSUID);

	op = need_op(plan, AL_OP_BIND, "/newroot/in/data.csv", NULL);
	assert_false(op->dir);
	assert_true(op->attr & MOUNT_ATTR_RDONLY);
	assert_true(op->attr & MOUNT_ATTR_NOEXEC);
	need_op(plan, AL_OP_MKDIR, "/newroot/in", NULL);
	assert_order(plan);

	if (L(plan)->landlock_abi > 0) {
		rule = find_rule(plan, "/output");
		assert_non_null(rule);
		assert_true(rule->access & LANDLOCK_ACCESS_FS_WRITE_FILE);
		assert_true(rule->access & LANDLOCK_ACCESS_FS_MAKE_REG);
		assert_true(rule->access & LANDLOCK_ACCESS_FS_REMOVE_FILE);
		assert_false(rule->access & LANDLOCK_ACCESS_FS_EXECUTE);
		rule = find_rule(plan, "/in/data.csv");
		assert_non_null(rule);
		assert_true(rule->access & LANDLOCK_ACCESS_FS_READ_FILE);
		/* Directory rights make no sense on a file (landlock refuses them). */
		assert_false(rule->access & LANDLOCK_ACCESS_FS_READ_DIR);
		assert_false(rule->access & LL_ANY_WRITE);
		assert_false(rule->access & LANDLOCK_ACCESS_FS_EXECUTE);
	}
}

static void test_mount_at_workdir(void **state)
{
	_cleanup_(al_policy_freep) struct al_policy *p = new_policy();
	_cleanup_(free_planp) struct al_plan *plan = NULL;
	const struct al_mount_op *op;

	al_policy_add_mount(p, out_dir, AL_DEFAULT_WORKDIR, AL_MOUNT_RW, AL_UNSET, "--rw");
	plan = build_ok(p);
	op = need_op(plan, AL_OP_BIND, "/newroot" AL_DEFAULT_WORKDIR, NULL);
	assert_string_not_equal(op->source, "/scratch/work");
	assert_false(has_target(plan, "/scratch/work"));
	for (size_t i = 0; i < L(plan)->n_ops; i++)
		if (L(plan)->ops[i].kind == AL_OP_BIND)
			assert_string_not_equal(L(plan)->ops[i].source, "/scratch/work");
	assert_order(plan);
}

/* As root, a task's inputs are the supervisor's to open, shown to the
 * sandbox user as their owner: no mode is refused at plan time any more
 * (the backend refuses what it cannot show). System paths are not. */
static void test_mount_as_owner(void **state)
{
	_cleanup_(al_policy_freep) struct al_policy *p = new_policy();
	const bool root = geteuid() == 0;
	struct stat st;

	assert_int_equal(stat(private_dir, &st), 0);
	al_policy_add_mount(p, private_dir, "/input", AL_MOUNT_RO, AL_UNSET, "--ro");
	al_policy_add_mount(p, dir, "/output", AL_MOUNT_RW, AL_UNSET, "--rw");
	p->mounts[0].copy = true;
	p->mounts[1].copy = true; /* a copy is read-only: ignored for rw */
	_cleanup_(free_planp) struct al_plan *plan = build_ok(p);
	const struct al_mount_op *in = need_op(plan, AL_OP_BIND, "/newroot/input", NULL);
	const struct al_mount_op *out = need_op(plan, AL_OP_BIND, "/newroot/output", NULL);
	const struct al_mount_op *usr = need_op(plan, AL_OP_BIND, "/newroot/usr", NULL);
	assert_int_equal(in->input >= 0, root);
	assert_int_equal(out->input >= 0, root);
	assert_int_equal(usr->input, -1);
	assert_true(in->copy == root);
	assert_false(out->copy);
	assert_int_equal(L(plan)->n_inputs, root ? 2 : 0);
	if (root) {
		assert_int_equal(in->owner_uid, st.st_uid);
		assert_int_equal(in->owner_gid, st.st_gid);
		assert_int_not_equal(in->input, out->input);
	}
}

/* --copy-in and --copy-out: only into and out of the scratch's faces,
 * never through a mount, each path once. */
static void test_copies(void **state)
{
	_cleanup_(al_policy_freep) struct al_policy *p = new_policy();
	char missing[PATH_MAX + 32];

	al_policy_add_copy(p, true, dir, "/work/data", "--copy-in a");
	al_policy_add_copy(p, true, file, "/tmp/x/data.csv", "--copy-in b");
	al_policy_add_copy(p, true, dir, "/work", "--copy-in c");
	al_policy_add_copy(p, false, out_dir, "/work/out", "--copy-out d");
	al_policy_add_copy(p, false, out_dir, "/dev/shm", "--copy-out e");
	_cleanup_(free_planp) struct al_plan *plan = build_ok(p);
	assert_int_equal(plan->n_copy_in, 3);
	assert_string_equal(plan->copy_in[0].part, "work/data");
	assert_true(plan->copy_in[0].dir);
	assert_string_equal(plan->copy_in[1].part, "tmp/x/data.csv");
	assert_false(plan->copy_in[1].dir);
	assert_string_equal(plan->copy_in[2].part, "work");
	assert_int_equal(plan->n_copy_out, 2);
	assert_string_equal(plan->copy_out[0].part, "work/out");
	assert_string_equal(plan->copy_out[1].part, "shm");
	assert_int_equal(plan->copy_out_bytes, plan->scratch_bytes);
	assert_int_equal(plan->copy_out_files, AL_DEFAULT_COPY_OUT_FILES);
	assert_true(L(plan)->want_scratch);

	_cleanup_(al_policy_freep) struct al_policy *q = new_policy();
	al_policy_add_copy(q, true, file, "/input/data.csv", "--copy-in f");
	BUILD_BAD(q, "--copy-in f", "/input/data.csv", "not in the scratch");
	al_policy_free(q);
	q = new_policy();
	al_policy_add_copy(q, true, file, "/work", "--copy-in g");
	BUILD_BAD(q, "--copy-in g", "directory of the scratch");
	al_policy_free(q);
	q = new_policy();
	al_policy_add_mount(q, dir, "/work/in", AL_MOUNT_RO, AL_UNSET, "--ro");
	al_policy_add_copy(q, false, out_dir, "/work/in/x", "--copy-out h");
	BUILD_BAD(q, "--copy-out h", "host mount /work/in");
	al_policy_free(q);
	q = new_policy();
	al_policy_add_copy(q, true, file, "/tmp/a", "--copy-in i");
	al_policy_add_copy(q, true, dir, "/tmp/a", "--copy-in j");
	BUILD_BAD(q, "--copy-in j", "twice", "--copy-in i");
	al_policy_free(q);
	q = new_policy();
	snprintf(missing, sizeof(missing), "%s/no/such", tmp);
	al_policy_add_copy(q, false, missing, "/work/out", "--copy-out k");
	BUILD_BAD(q, "--copy-out k", missing, "parent");
	al_policy_free(q);
	q = new_policy();
	al_policy_add_copy(q, false, file, "/work/out", "--copy-out l");
	BUILD_BAD(q, "--copy-out l", "not a directory");
	al_policy_free(q);
	q = new_policy();
	al_policy_add_copy(q, true, "/dev/null", "/work/null", "--copy-in m");
	BUILD_BAD(q, "--copy-in m", "neither a regular file nor a directory");
}

static void test_system_list(void **state)
{
	_cleanup_(al_policy_freep) struct al_policy *p = new_policy();
	_cleanup_(free_planp) struct al_plan *plan = NULL;

	al_strv_push(&p->system, "/usr");
	plan = build_ok(p);
	need_op(plan, AL_OP_BIND, "/newroot/usr", NULL);
	assert_false(has_target(plan, "/newroot/bin"));
	assert_false(has_target(plan, "/newroot/sbin"));

	/* An explicit list is strict. */
	al_strv_push(&p->system, "/nonexistent-airlock-unit");
	BUILD_BAD(p, "/nonexistent-airlock-unit", strerror(ENOENT));
	al_strv_free(p->system);
	p->system = NULL;
	al_strv_push(&p->system, "/usr/bin/env");
	BUILD_BAD(p, "/usr/bin/env", "not a directory");
}

/* filesystem.system entries get the same checks as mounts: /etc is
 * synthesized into the new root, so showing the host's /etc there would put
 * the synthesized files inside a read-only host bind. */
static void test_system_reserved_paths(void **state)
{
	struct al_policy *p = new_policy();
	struct al_plan *plan = NULL;
	struct al_error err = {0};
	char buf[PATH_MAX * 2 + 128];
	const char *v = NULL;
	int r;

	al_strv_push(&p->system, "/usr");
	al_strv_push(&p->system, "/etc");
	r = al_plan_build(p, 0, &plan, &err);
	al_policy_free(p);
	if (r == 0) {
		v = order_violation(plan, buf, sizeof(buf));
		free_plan(plan);
	}
	assert_true(r < 0 || !v);
}

/* A symlinked system entry below the top level needs its parent too. */
static void test_system_nested_symlink(void **state)
{
	struct al_policy *p = new_policy();
	struct al_plan *plan = NULL;
	struct al_error err = {0};
	char buf[PATH_MAX * 2 + 128];
	const char *v = NULL;
	int r;

	al_strv_push(&p->system, "/usr");
	al_strv_push(&p->system, link_to_dir); /* <tmp>/link -> dir */
	r = al_plan_build(p, 0, &plan, &err);
	al_policy_free(p);
	if (r == 0) {
		v = order_violation(plan, buf, sizeof(buf));
		free_plan(plan);
	}
	assert_true(r < 0 || !v);
}

/* tests: landlock */

static void test_landlock_rules(void **state)
{
	_cleanup_(al_policy_freep) struct al_policy *p = new_policy();
	_cleanup_(free_planp) struct al_plan *plan = build_ok(p);
	static const char *const writable[] = {"/tmp", AL_DEFAULT_WORKDIR, "/dev/shm"};
	const struct al_landlock_rule *rule;

	if (L(plan)->landlock_abi == 0) {
		assert_false(plan->landlock_required);
		free_plan(TAKE_PTR(plan)); /* skip() longjmps past cleanups */
		al_policy_free(TAKE_PTR(p));
		skip();
	}
	assert_int_equal(L(plan)->landlock_abi, al_landlock_abi());
	assert_true(plan->landlock_required);
	assert_true(L(plan)->landlock_fs & LANDLOCK_ACCESS_FS_EXECUTE);
	assert_true(L(plan)->landlock_fs & LANDLOCK_ACCESS_FS_WRITE_FILE);
	if (L(plan)->landlock_abi >= 6)
		assert_true(L(plan)->landlock_scoped & LANDLOCK_SCOPE_SIGNAL);

	rule = find_rule(plan, "/usr");
	assert_non_null(rule);
	assert_true(rule->access & LANDLOCK_ACCESS_FS_READ_FILE);
	assert_true(rule->access & LANDLOCK_ACCESS_FS_EXECUTE);
	assert_false(rule->access & LL_ANY_WRITE);

	for (size_t i = 0; i < AL_ARRAY_SIZE(writable); i++) {
		rule = find_rule(plan, writable[i]);
		if (!rule)
			fail_msg("no landlock rule for %s", writable[i]);
		assert_true(rule->access & LANDLOCK_ACCESS_FS_WRITE_FILE);
		assert_true(rule->access & LANDLOCK_ACCESS_FS_MAKE_REG);
		assert_true(rule->access & LANDLOCK_ACCESS_FS_MAKE_DIR);
		assert_true(rule->access & LANDLOCK_ACCESS_FS_REMOVE_FILE);
	}

	rule = find_rule(plan, "/");
	assert_non_null(rule);
	assert_int_equal(rule->access, LANDLOCK_ACCESS_FS_READ_DIR);
	rule = find_rule(plan, "/etc");
	assert_non_null(rule);
	assert_false(rule->access & (LL_ANY_WRITE | LANDLOCK_ACCESS_FS_EXECUTE));

	for (size_t i = 0; i < L(plan)->n_ll_rules; i++) {
		const struct al_landlock_rule *r = &L(plan)->ll_rules[i];
		bool is_writable = false;

		for (size_t k = 0; k < AL_ARRAY_SIZE(writable); k++)
			is_writable |= strcmp(r->path, writable[k]) == 0;
		/* Only the scratch faces may change the tree... */
		if ((r->access & LL_MODIFY_TREE) && !is_writable)
			fail_msg("landlock rule %s may modify the tree (0x%llx)", r->path,
				 (unsigned long long)r->access);
		/* ...and only they and the /dev nodes may be written. */
		if ((r->access & LANDLOCK_ACCESS_FS_WRITE_FILE) && !is_writable &&
		    strncmp(r->path, "/dev/", 5) != 0)
			fail_msg("landlock rule %s allows writes", r->path);
		/* Nobody makes device nodes. */
		assert_false(r->access &
			     (LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_BLOCK));
		/* Everything granted is handled (and so known to this ABI). */
		assert_int_equal(r->access & ~L(plan)->landlock_fs, 0);
		assert_true(al_path_is_clean_absolute(r->path));
	}
}

static void test_scratch_exec(void **state)
{
	_cleanup_(al_policy_freep) struct al_policy *p = new_policy();
	struct al_plan *plan;
	const struct al_mount_op *op;
	const struct al_landlock_rule *rule;

	/* Unset: the scratch allows exec, as unset mount exec does. */
	plan = build_ok(p);
	assert_true(plan->scratch_exec);
	op = need_op(plan, AL_OP_BIND, "/newroot/tmp", NULL);
	assert_false(op->attr & MOUNT_ATTR_NOEXEC);
	free_plan(plan);

	p->scratch_exec = 0;
	plan = build_ok(p);
	assert_false(plan->scratch_exec);
	op = need_op(plan, AL_OP_BIND, "/newroot/tmp", NULL);
	assert_true(op->attr & MOUNT_ATTR_NOEXEC);
	op = need_op(plan, AL_OP_BIND, "/newroot/work", NULL);
	assert_true(op->attr & MOUNT_ATTR_NOEXEC);
	op = need_op(plan, AL_OP_TMPFS, "/scratch", NULL);
	assert_true(op->attr & MOUNT_ATTR_NOEXEC);
	rule = find_rule(plan, "/tmp");
	if (L(plan)->landlock_abi > 0) {
		assert_non_null(rule);
		assert_false(rule->access & LANDLOCK_ACCESS_FS_EXECUTE);
		rule = find_rule(plan, AL_DEFAULT_WORKDIR);
		assert_non_null(rule);
		assert_false(rule->access & LANDLOCK_ACCESS_FS_EXECUTE);
	}
	free_plan(plan);

	p->scratch_exec = 1;
	plan = build_ok(p);
	rule = find_rule(plan, "/tmp");
	if (L(plan)->landlock_abi > 0)
		assert_true(rule->access & LANDLOCK_ACCESS_FS_EXECUTE);
	free_plan(plan);
}

static void test_landlock_best_effort(void **state)
{
	_cleanup_(al_policy_freep) struct al_policy *p = new_policy();
	_cleanup_(free_planp) struct al_plan *plan = NULL;

	p->landlock = AL_LANDLOCK_BEST_EFFORT;
	plan = build_ok(p);
	assert_false(plan->landlock_required);
}

/* tests: the plan's own file tree (what, not how) */

static const struct al_fs_entry *find_fs(const struct al_plan *plan, const char *path)
{
	for (size_t i = 0; i < plan->n_fs; i++)
		if (strcmp(plan->fs[i].path, path) == 0)
			return &plan->fs[i];
	return NULL;
}

/* Sandbox paths with what may be done there; no staging path, mount flag
 * or landlock right appears in the plan. */
static void test_fs_entries(void **state)
{
	_cleanup_(al_policy_freep) struct al_policy *p = new_policy();
	_cleanup_(free_planp) struct al_plan *plan = NULL;
	const struct al_fs_entry *e;

	al_policy_add_mount(p, dir, "/input", AL_MOUNT_RO, 0, "--ro");
	al_policy_add_mount(p, out_dir, "/out", AL_MOUNT_RW, AL_UNSET, "--rw");
	plan = build_ok(p);
	for (size_t i = 0; i < plan->n_fs; i++) {
		assert_true(plan->fs[i].path[0] == '/');
		if (strncmp(plan->fs[i].path, "/newroot", 8) == 0 ||
		    strncmp(plan->fs[i].path, "/scratch", 8) == 0)
			fail_msg("staging path %s in the plan", plan->fs[i].path);
	}
	assert_non_null(e = find_fs(plan, "/usr"));
	assert_int_equal(e->kind, AL_FS_HOST);
	assert_int_equal(e->access, AL_FS_READ | AL_FS_EXEC);
	assert_non_null(e = find_fs(plan, "/input"));
	assert_int_equal(e->kind, AL_FS_HOST);
	assert_string_equal(e->source, dir);
	assert_true(e->dir);
	assert_int_equal(e->access, AL_FS_READ); /* exec: 0 */
	assert_non_null(e = find_fs(plan, "/out"));
	assert_int_equal(e->access, AL_FS_READ | AL_FS_WRITE | AL_FS_EXEC);
	assert_non_null(e = find_fs(plan, "/tmp"));
	assert_int_equal(e->kind, AL_FS_SCRATCH);
	assert_true(e->access & AL_FS_WRITE);
	assert_non_null(e = find_fs(plan, "/work"));
	assert_int_equal(e->kind, AL_FS_SCRATCH);
	assert_true(e->sandbox_owned);
	assert_non_null(e = find_fs(plan, "/etc/passwd"));
	assert_int_equal(e->kind, AL_FS_FILE);
	assert_int_equal(e->len, strlen(e->source));
	assert_non_null(e = find_fs(plan, "/dev/null"));
	assert_int_equal(e->kind, AL_FS_DEVICE);
	/* /dev and /etc are both directories the plan makes (it says nothing
	 * of mounts); the native lowering gives the one that holds devices a
	 * sealed tmpfs of its own, and the other none. */
	assert_non_null(e = find_fs(plan, "/dev"));
	assert_int_equal(e->kind, AL_FS_DIR);
	assert_non_null(e = find_fs(plan, "/etc"));
	assert_int_equal(e->kind, AL_FS_DIR);
	const struct al_mount_op *dev = NULL, *etc = NULL;
	for (size_t i = 0; i < L(plan)->n_ops; i++) {
		if (L(plan)->ops[i].kind != AL_OP_TMPFS)
			continue;
		if (strcmp(L(plan)->ops[i].target, "/newroot/dev") == 0)
			dev = &L(plan)->ops[i];
		if (strcmp(L(plan)->ops[i].target, "/newroot/etc") == 0)
			etc = &L(plan)->ops[i];
	}
	assert_non_null(dev);
	assert_true(dev->seal);
	assert_true(dev->attr & MOUNT_ATTR_RDONLY);
	assert_null(etc);
	/* The lowering keeps every entry: each HOST entry is one bind of its
	 * source, in the plan's order. */
	size_t k = 0;
	for (size_t i = 0; i < plan->n_fs; i++) {
		if (plan->fs[i].kind != AL_FS_HOST && plan->fs[i].kind != AL_FS_DEVICE)
			continue;
		while (k < L(plan)->n_ops &&
		       !(L(plan)->ops[k].kind == AL_OP_BIND && L(plan)->ops[k].ino))
			k++;
		assert_true(k < L(plan)->n_ops);
		assert_string_equal(L(plan)->ops[k].source + strlen("/oldroot"),
				    plan->fs[i].source);
		assert_string_equal(L(plan)->ops[k].target + strlen("/newroot"), plan->fs[i].path);
		k++;
	}
}

/* -t: the sandbox's own devpts at /dev/pts (a new instance, owned by the
 * sandbox's user, bounded), /dev/ptmx into it and /dev/tty; none of them
 * without. */
static void test_tty(void **state)
{
	_cleanup_(al_policy_freep) struct al_policy *p = new_policy();
	_cleanup_(free_planp) struct al_plan *plan = build_ok(p);
	const struct al_mount_op *op;
	const struct al_landlock_rule *rule;
	char want[64];

	assert_false(plan->tty);
	assert_null(find_fs(plan, "/dev/pts"));
	assert_null(find_fs(plan, "/dev/ptmx"));
	assert_null(find_fs(plan, "/dev/tty"));
	for (size_t i = 0; i < L(plan)->n_ops; i++)
		assert_int_not_equal(L(plan)->ops[i].kind, AL_OP_DEVPTS);

	p->tty = 1;
	free_planp(&plan);
	plan = build_ok(p);
	assert_true(plan->tty);
	assert_int_equal(find_fs(plan, "/dev/pts")->kind, AL_FS_PTYS);
	assert_int_equal(find_fs(plan, "/dev/ptmx")->kind, AL_FS_LINK);
	op = need_op(plan, AL_OP_DEVPTS, "/newroot/dev/pts", NULL);
	assert_contains(op->source, "newinstance");
	assert_contains(op->source, "ptmxmode=0666");
	assert_contains(op->source, "mode=0600");
	snprintf(want, sizeof(want), "uid=%d,gid=%d", AL_SANDBOX_UID, AL_SANDBOX_GID);
	assert_contains(op->source, want);
	snprintf(want, sizeof(want), "max=%u", AL_TTY_MAX_PTYS);
	assert_contains(op->source, want);
	assert_true(op->attr & MOUNT_ATTR_NOSUID);
	assert_true(op->attr & MOUNT_ATTR_NOEXEC);
	assert_false(op->attr & MOUNT_ATTR_RDONLY);
	op = need_op(plan, AL_OP_SYMLINK, "/newroot/dev/ptmx", NULL);
	assert_string_equal(op->source, "pts/ptmx");
	op = need_op(plan, AL_OP_BIND, "/newroot/dev/tty", NULL);
	assert_string_equal(op->source, "/oldroot/dev/tty");
	assert_non_null(rule = find_rule(plan, "/dev/pts"));
	if (L(plan)->landlock_abi >= 5)
		assert_true(rule->access & LANDLOCK_ACCESS_FS_IOCTL_DEV);
	assert_true(rule->access & LANDLOCK_ACCESS_FS_WRITE_FILE);
}

/* The host files shown read-only inside /etc get their rights from /etc's
 * own rule, not one each; every other entry keeps its own rule, even where
 * an ancestor's rule covers it (a workdir inside /tmp). */
static void test_landlock_covered_rules(void **state)
{
	_cleanup_(al_policy_freep) struct al_policy *p = new_policy();
	_cleanup_(free_planp) struct al_plan *plan = NULL;
	size_t n_etc_hosts = 0;

	if (al_landlock_abi() == 0)
		skip();
	p->workdir = xstrdup("/tmp/w");
	plan = build_ok(p);
	assert_non_null(find_rule(plan, "/etc"));
	for (size_t i = 0; i < plan->n_fs; i++) {
		const struct al_fs_entry *e = &plan->fs[i];
		if (e->kind != AL_FS_HOST || !al_path_is_under(e->path, "/etc"))
			continue;
		n_etc_hosts++;
		if (find_rule(plan, e->path))
			fail_msg("%s has a rule of its own", e->path);
	}
	assert_null(find_rule(plan, "/etc/passwd"));
	if (n_etc_hosts == 0)
		print_message("no /etc file of the host's is shown here\n");
	assert_non_null(find_rule(plan, "/tmp"));
	assert_non_null(find_rule(plan, "/tmp/w"));
	/* Not covered: /dev/null may be written, /dev only read. */
	assert_non_null(find_rule(plan, "/dev/null"));
}

/* tests: dumps */

static void test_dumps(void **state)
{
	_cleanup_(al_policy_freep) struct al_policy *p = new_policy();
	_cleanup_(free_planp) struct al_plan *plan = build_ok(p);
	_cleanup_free_ char *text = NULL, *js = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	json_t *root, *fs;
	json_error_t jerr;

	assert_non_null(f);
	al_plan_dump_text(plan, f);
	al_native_dump_text(L(plan), f);
	fclose(f);
	assert_contains(text, "/usr");
	assert_contains(text, "/bin/true");
	assert_contains(text, "seccomp:");

	js = al_plan_dump_json(plan);
	assert_non_null(js);
	root = json_loads(js, 0, &jerr);
	if (!root)
		fail_msg("plan JSON does not parse: %s", jerr.text);
	assert_null(json_object_get(root, "filesystem")); /* the backend's to say */
	al_native_dump_json(L(plan), plan, root);
	fs = json_object_get(root, "filesystem");
	assert_true(json_is_array(fs));
	assert_int_equal(json_array_size(fs), L(plan)->n_ops);
	assert_string_equal(json_string_value(json_object_get(root, "backend")), "native");
	json_decref(root);
}

/* al_plan_build_all: each mount, system directory, rule and mapping alone,
 * and the request's own checks each once, all reported. */
static void test_all_plan_errors(void **state)
{
	_cleanup_(al_policy_freep) struct al_policy *p = new_policy();
	struct al_plan *plan = UNTOUCHED;
	struct al_errors errs = {0};

	p->command[0][0] = '\0';
	p->hostname = xstrdup("-bad-");
	p->memory_bytes = 1 << 20;
	p->pids = 1;
	al_strv_push(&p->system, "/usr");
	al_strv_push(&p->system, "/nonexistent-airlock-system");
	al_policy_add_mount(p, "/nonexistent-airlock-a", "/input/a", AL_MOUNT_RO, AL_UNSET,
			    "--ro /nonexistent-airlock-a:/input/a");
	al_policy_add_mount(p, "/usr", "/etc/x", AL_MOUNT_RO, AL_UNSET,
			    "p.json: filesystem.mounts[1]");
	al_policy_add_mount(p, "/usr", "/tmp/x", AL_MOUNT_RO, AL_UNSET, "--ro /usr:/tmp/x");
	al_strv_push(&p->net_allow, "api.example.com");
	al_strv_push(&p->net_allow, "*");
	al_policy_set_host(p, "x.test", "nope");
	assert_int_equal(al_plan_build_all(p, 0, &plan, &errs), -EINVAL);
	assert_ptr_equal(plan, UNTOUCHED);
	static const char *const want[] = {
	    "the command's name is empty",
	    "hostname \"-bad-\" is not a valid host name",
	    "memory limit 1048576 bytes is below the 4M minimum",
	    "pids limit must be at least 2",
	    "--ro /usr:/tmp/x: sandbox path /tmp/x lies inside the scratch's /tmp",
	    "network.allow \"*\": allow rule \"*\": '*' alone would allow every host",
	    "network.hosts \"x.test=nope\"",
	    "filesystem.system: /nonexistent-airlock-system: No such file or directory",
	    "p.json: filesystem.mounts[1]: sandbox path /etc/x would cover or sit inside /etc",
	    "--ro /nonexistent-airlock-a:/input/a: /nonexistent-airlock-a: No such file",
	};
	for (size_t i = 0; i < AL_ARRAY_SIZE(want); i++) {
		if (i >= errs.n)
			fail_msg("expected an error containing \"%s\", got only %zu", want[i],
				 errs.n);
		assert_contains(errs.v[i].text, want[i]);
		assert_null(errs.v[i].where);
		assert_string_equal(errs.v[i].message, errs.v[i].text);
	}
	assert_int_equal(errs.n, AL_ARRAY_SIZE(want));
	al_errors_clear(&errs);

	/* The first error's errno is the return value; the one-error form
	 * reports that first error. */
	_cleanup_(al_policy_freep) struct al_policy *q = new_policy();
	al_policy_add_mount(q, "/nonexistent-airlock-b", "/input/b", AL_MOUNT_RO, AL_UNSET,
			    "--ro b");
	q->pids = 1;
	assert_int_equal(al_plan_build_all(q, 0, &plan, &errs), -EINVAL);
	assert_int_equal(errs.n, 2);
	assert_int_equal(errs.v[1].code, ENOENT);
	al_errors_clear(&errs);
	q->pids = 0;
	assert_int_equal(al_plan_build_all(q, 0, &plan, &errs), -ENOENT);
	al_errors_clear(&errs);
	q->pids = 1;
	BUILD_BAD(q, "pids limit must be at least 2");

	/* A mount whose sandbox path is refused is refused once, and others
	 * are not said to lie inside it. */
	_cleanup_(al_policy_freep) struct al_policy *r = new_policy();
	al_policy_add_mount(r, "/usr", "/", AL_MOUNT_RO, AL_UNSET, "--ro /usr:/");
	al_policy_add_mount(r, "/usr", "/etc", AL_MOUNT_RO, AL_UNSET, "--ro /usr:/etc");
	al_policy_add_mount(r, "/usr", "/etc/y", AL_MOUNT_RO, AL_UNSET, "--ro /usr:/etc/y");
	al_policy_add_mount(r, "/usr", "/opt/x", AL_MOUNT_RO, AL_UNSET, "--ro /usr:/opt/x");
	assert_int_equal(al_plan_build_all(r, 0, &plan, &errs), -EINVAL);
	assert_int_equal(errs.n, 3);
	assert_contains(errs.v[0].text, "--ro /usr:/: sandbox path / would hide the workdir");
	assert_contains(errs.v[1].text, "--ro /usr:/etc: sandbox path /etc would cover");
	assert_contains(errs.v[2].text, "--ro /usr:/etc/y: sandbox path /etc/y would cover");
	al_errors_clear(&errs);
}

int main(void)
{
	/* clang-format off */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_command),
		cmocka_unit_test(test_command_optional),
		cmocka_unit_test(test_unknown_backend),
		cmocka_unit_test(test_bad_scalars),
		cmocka_unit_test(test_default_plan),
		cmocka_unit_test(test_system_symlinks),
		cmocka_unit_test(test_etc_synthesized),
		cmocka_unit_test(test_env),
		cmocka_unit_test(test_ids),
		cmocka_unit_test(test_ns_limits),
		cmocka_unit_test(test_limits_carried),
		cmocka_unit_test(test_op_order),
		cmocka_unit_test(test_workdir_inside_mount),
		cmocka_unit_test(test_reserved_mount_paths),
		cmocka_unit_test(test_mount_in_scratch),
		cmocka_unit_test(test_mount_host_missing),
		cmocka_unit_test(test_mount_bad_kinds),
		cmocka_unit_test(test_nested_mount_not_adjacent),
		cmocka_unit_test(test_mount_ro_dir),
		cmocka_unit_test(test_mount_rw_noexec_file),
		cmocka_unit_test(test_mount_at_workdir),
		cmocka_unit_test(test_mount_as_owner),
		cmocka_unit_test(test_copies),
		cmocka_unit_test(test_system_list),
		cmocka_unit_test(test_system_reserved_paths),
		cmocka_unit_test(test_system_nested_symlink),
		cmocka_unit_test(test_landlock_rules),
		cmocka_unit_test(test_scratch_exec),
		cmocka_unit_test(test_tty),
		cmocka_unit_test(test_landlock_best_effort),
		cmocka_unit_test(test_fs_entries),
		cmocka_unit_test(test_landlock_covered_rules),
		cmocka_unit_test(test_dumps),
		cmocka_unit_test(test_all_plan_errors),
	};

	/* clang-format on */

	return cmocka_run_group_tests(tests, setup, teardown);
}
