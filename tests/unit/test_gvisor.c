/* The gvisor backend's bundle (backend/gvisor/bundle.c) and its refusals
 * (probe.c), from a plan made by hand: what config.json says and what the
 * rootfs holds. Needs neither root nor runsc. */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/gvisor/gvisor.h"
#include "core/util.h"

static char *argv_[] = {"/usr/bin/python3", "-c", "print(1)", NULL};
static char *envp_[] = {"PATH=/usr/bin:/bin", "HOME=/work", NULL};

static struct al_fs_entry entries[] = {
    {.kind = AL_FS_DIR, .path = "/", .mode = 0755},
    {.kind = AL_FS_HOST,
     .path = "/usr",
     .source = "/usr",
     .dir = true,
     .access = AL_FS_READ | AL_FS_EXEC,
     .what = "system /usr"},
    {.kind = AL_FS_LINK, .path = "/bin", .source = "usr/bin"},
    {.kind = AL_FS_DIR, .path = "/etc", .mode = 0555},
    {.kind = AL_FS_FILE,
     .path = "/etc/passwd",
     .source = "root:x:0:0::/:/bin/sh\n",
     .len = 22,
     .mode = 0444},
    {.kind = AL_FS_HOST,
     .path = "/input/data.csv",
     .source = "/etc/hostname",
     .access = AL_FS_READ,
     .what = "ro /input/data.csv"},
    {.kind = AL_FS_DIR, .path = "/dev", .mode = 0755},
    {.kind = AL_FS_DEVICE, .path = "/dev/null", .source = "/dev/null"},
    {.kind = AL_FS_PROC, .path = "/proc", .mode = 0555},
    {.kind = AL_FS_SCRATCH, .path = "/work", .source = "work", .mode = 0700, .sandbox_owned = true},
};

static void make_plan(struct al_plan *p)
{
	memset(p, 0, sizeof(*p));
	p->argv = argv_;
	p->envp = envp_;
	p->workdir = "/work";
	p->hostname = "airlock";
	p->open_files = 256;
	p->fs = entries;
	p->n_fs = sizeof(entries) / sizeof(entries[0]);
}

static json_t *find_mount(json_t *cfg, const char *dest)
{
	size_t i;
	json_t *m;

	json_array_foreach(json_object_get(cfg, "mounts"), i, m)
	{
		if (strcmp(json_string_value(json_object_get(m, "destination")), dest) == 0)
			return m;
	}
	return NULL;
}

static bool has_option(json_t *m, const char *opt)
{
	size_t i;
	json_t *o;

	json_array_foreach(json_object_get(m, "options"), i, o)
	{
		if (strcmp(json_string_value(o), opt) == 0)
			return true;
	}
	return false;
}

static bool has_namespace(json_t *cfg, const char *type)
{
	size_t i;
	json_t *n;

	json_array_foreach(json_object_get(json_object_get(cfg, "linux"), "namespaces"), i, n)
	{
		if (strcmp(json_string_value(json_object_get(n, "type")), type) == 0)
			return true;
	}
	return false;
}

static const struct al_gvisor_inputs no_inputs;
static const struct al_gvisor_inputs *inputs = &no_inputs;

/* Write the bundle for p (with inputs) in a new temporary directory; its
 * config. */
static json_t *bundle(const struct al_plan *p, char *dir, size_t len)
{
	struct al_error err = {0};
	json_error_t jerr;
	char *cfgpath;
	json_t *cfg;
	int fd;

	snprintf(dir, len, "/tmp/al-gvisor-test.XXXXXX");
	assert_non_null(mkdtemp(dir));
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(fd >= 0);
	if (al_gvisor_bundle(fd, p, "/S", inputs, &err) < 0)
		fail_msg("al_gvisor_bundle: %s", err.msg);
	close(fd);
	cfgpath = xasprintf("%s/config.json", dir);
	cfg = json_load_file(cfgpath, 0, &jerr);
	free(cfgpath);
	assert_non_null(cfg);
	return cfg;
}

static void test_config(void **state)
{
	struct al_plan p;
	char dir[64], path[128], buf[64];
	struct stat st;
	json_t *cfg, *proc, *m;

	(void)state;
	make_plan(&p);
	cfg = bundle(&p, dir, sizeof(dir));
	proc = json_object_get(cfg, "process");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(proc, "user"), "uid")),
			 AL_SANDBOX_UID);
	assert_string_equal(json_string_value(json_array_get(json_object_get(proc, "args"), 2)),
			    "print(1)");
	assert_int_equal(json_array_size(json_object_get(proc, "env")), 2);
	assert_string_equal(json_string_value(json_object_get(proc, "cwd")), "/work");
	assert_true(json_is_true(json_object_get(proc, "noNewPrivileges")));
	assert_int_equal(
	    json_array_size(json_object_get(json_object_get(proc, "capabilities"), "bounding")), 0);
	assert_true(json_is_true(json_object_get(json_object_get(cfg, "root"), "readonly")));
	/* Host paths read-only; /usr executable, the input not. */
	assert_non_null(m = find_mount(cfg, "/usr"));
	assert_true(has_option(m, "ro") && !has_option(m, "noexec"));
	assert_non_null(m = find_mount(cfg, "/input/data.csv"));
	assert_true(has_option(m, "ro") && has_option(m, "noexec"));
	/* The scratch's face, writable, from the scratch's root. */
	assert_non_null(m = find_mount(cfg, "/work"));
	assert_string_equal(json_string_value(json_object_get(m, "source")), "/S/work");
	assert_true(has_option(m, "rw") && has_option(m, "noexec"));
	assert_non_null(find_mount(cfg, "/proc"));
	/* gVisor's own /dev: no device of the host's. */
	assert_null(find_mount(cfg, "/dev/null"));
	assert_true(has_namespace(cfg, "network") && has_namespace(cfg, "pid"));
	/* The rootfs: airlock's files, links and mount points. */
	snprintf(path, sizeof(path), "%s/rootfs/etc/passwd", dir);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0444);
	snprintf(path, sizeof(path), "%s/rootfs/bin", dir);
	assert_int_equal(readlink(path, buf, sizeof(buf)), 7);
	snprintf(path, sizeof(path), "%s/rootfs/input/data.csv", dir);
	assert_int_equal(stat(path, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	snprintf(path, sizeof(path), "%s/rootfs/usr", dir);
	assert_int_equal(stat(path, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	json_decref(cfg);
	assert_int_equal(al_gvisor_rmtree(-1, dir), 0);
}

/* With network rules the sentry uses the namespace airlock made: the spec
 * asks for no network namespace of its own. */
static void test_gateway_namespace(void **state)
{
	struct al_plan p;
	char dir[64];
	json_t *cfg;

	(void)state;
	make_plan(&p);
	p.gateway = true;
	cfg = bundle(&p, dir, sizeof(dir));
	assert_false(has_namespace(cfg, "network"));
	assert_true(has_namespace(cfg, "mount"));
	json_decref(cfg);
	assert_int_equal(al_gvisor_rmtree(-1, dir), 0);
}

/* A task's input is bound from where runsc's parent attaches the tree the
 * supervisor opened (its entry's source in the run's directory), not from
 * its host path, which runsc's user may not reach; the rest as before. */
static void test_input_source(void **state)
{
	struct al_plan p;
	char dir[64], *sources[sizeof(entries) / sizeof(entries[0])] = {0};
	int fds[sizeof(entries) / sizeof(entries[0])];
	const struct al_gvisor_inputs in = {fds, sources, sizeof(entries) / sizeof(entries[0])};
	json_t *cfg, *m;

	(void)state;
	make_plan(&p);
	sources[5] = "/run/airlock/gvisor/R/inputs/5"; /* /input/data.csv */
	inputs = &in;
	cfg = bundle(&p, dir, sizeof(dir));
	inputs = &no_inputs;
	assert_non_null(m = find_mount(cfg, "/input/data.csv"));
	assert_string_equal(json_string_value(json_object_get(m, "source")),
			    "/run/airlock/gvisor/R/inputs/5");
	assert_true(has_option(m, "ro"));
	assert_non_null(m = find_mount(cfg, "/usr"));
	assert_string_equal(json_string_value(json_object_get(m, "source")), "/usr");
	json_decref(cfg);
	assert_int_equal(al_gvisor_rmtree(-1, dir), 0);
}

/* A file airlock would have to write inside a host mount is refused,
 * naming it. */
static void test_file_under_mount(void **state)
{
	struct al_fs_entry bad[] = {
	    {.kind = AL_FS_HOST,
	     .path = "/usr",
	     .source = "/usr",
	     .dir = true,
	     .access = AL_FS_READ,
	     .what = "system /usr"},
	    {.kind = AL_FS_FILE,
	     .path = "/usr/x",
	     .source = "x",
	     .len = 1,
	     .mode = 0444,
	     .what = "file /usr/x"},
	};
	struct al_error err = {0};
	struct al_plan p;
	char dir[] = "/tmp/al-gvisor-test.XXXXXX";
	int fd;

	(void)state;
	make_plan(&p);
	p.fs = bad;
	p.n_fs = 2;
	assert_non_null(mkdtemp(dir));
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_int_equal(al_gvisor_bundle(fd, &p, "/S", &no_inputs, &err), -EOPNOTSUPP);
	assert_non_null(strstr(err.msg, "/usr/x"));
	close(fd);
	assert_int_equal(al_gvisor_rmtree(-1, dir), 0);
}

/* An entry beneath a link of the plan's is refused: writing it would go
 * through the link, to the host outside the rootfs. */
static void test_entry_under_link(void **state)
{
	char target[] = "/tmp/al-gvisor-target.XXXXXX", dir[] = "/tmp/al-gvisor-test.XXXXXX";
	assert_non_null(mkdtemp(target));
	struct al_fs_entry bad[] = {
	    {.kind = AL_FS_DIR, .path = "/", .mode = 0755},
	    {.kind = AL_FS_LINK, .path = "/l", .source = target, .what = "link /l"},
	    {.kind = AL_FS_DIR, .path = "/l/sub", .mode = 0755, .what = "dir /l/sub"},
	    {.kind = AL_FS_FILE,
	     .path = "/l/sub/f",
	     .source = "x",
	     .len = 1,
	     .mode = 0444,
	     .what = "file /l/sub/f"},
	};
	struct al_error err = {0};
	struct al_plan p;
	int fd;

	(void)state;
	make_plan(&p);
	p.fs = bad;
	p.n_fs = sizeof(bad) / sizeof(bad[0]);
	assert_non_null(mkdtemp(dir));
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_int_equal(al_gvisor_bundle(fd, &p, "/S", &no_inputs, &err), -ENOTDIR);
	assert_non_null(strstr(err.msg, "/l/sub"));
	close(fd);
	/* nothing was made through the link */
	char *sub = xasprintf("%s/sub", target);
	assert_int_equal(access(sub, F_OK), -1);
	free(sub);
	assert_int_equal(al_gvisor_rmtree(-1, dir), 0);
	assert_int_equal(rmdir(target), 0);
}

static void test_refusals(void **state)
{
	struct al_fs_entry rw[] = {
	    {.kind = AL_FS_HOST,
	     .path = "/out",
	     .source = "/tmp",
	     .dir = true,
	     .access = AL_FS_READ | AL_FS_WRITE,
	     .what = "rw /out"},
	};
	struct al_error err = {0};
	struct al_plan p;

	(void)state;
	make_plan(&p);
	assert_int_equal(al_gvisor_check_plan(&p, &err), 0);
	p.tty = true;
	assert_int_equal(al_gvisor_check_plan(&p, &err), -EOPNOTSUPP);
	assert_non_null(strstr(err.msg, "-t/--tty"));
	p.tty = false;
	p.fs = rw;
	p.n_fs = 1;
	assert_int_equal(al_gvisor_check_plan(&p, &err), -EOPNOTSUPP);
	assert_non_null(strstr(err.msg, "/out"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_config),	     cmocka_unit_test(test_gateway_namespace),
	    cmocka_unit_test(test_file_under_mount), cmocka_unit_test(test_entry_under_link),
	    cmocka_unit_test(test_refusals),	     cmocka_unit_test(test_input_source),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
