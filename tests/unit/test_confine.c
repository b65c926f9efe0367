/* supervisor/confine.h: what the supervisor can still do once it has
 * confined itself. Each case confines a forked child (the confinement is
 * irreversible) and reports what the child could and could not do. Needs
 * landlock (skipped without); the capability checks run only as root. */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/sys.h"
#include "core/util.h"
#include "supervisor/confine.h"

struct tree {
	char root[64];
	char parent[128], run[160], run2[160], out[128], other[128], readable[160];
};

static void path(char *buf, size_t len, const char *a, const char *b)
{
	snprintf(buf, len, "%s/%s", a, b);
}

static void put(const char *p, const char *text)
{
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(al_write_all(fd, text, strlen(text)), 0);
	close(fd);
}

static void make_tree(struct tree *t)
{
	char f[256];

	snprintf(t->root, sizeof(t->root), "/tmp/airlock-confine-XXXXXX");
	assert_non_null(mkdtemp(t->root));
	path(t->parent, sizeof(t->parent), t->root, "cgroup");
	path(t->run, sizeof(t->run), t->parent, "run");
	path(t->run2, sizeof(t->run2), t->parent, "run2");
	path(t->out, sizeof(t->out), t->root, "out");
	path(t->other, sizeof(t->other), t->root, "other");
	path(t->readable, sizeof(t->readable), t->other, "hosts");
	assert_int_equal(mkdir(t->parent, 0755), 0);
	assert_int_equal(mkdir(t->run, 0755), 0);
	assert_int_equal(mkdir(t->run2, 0755), 0);
	assert_int_equal(mkdir(t->out, 0755), 0);
	assert_int_equal(mkdir(t->other, 0755), 0);
	path(f, sizeof(f), t->run, "counter");
	put(f, "42\n");
	path(f, sizeof(f), t->other, "secret");
	put(f, "secret\n");
	put(t->readable, "127.0.0.1 localhost\n");
}

static void remove_tree(const struct tree *t)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", t->root);
	assert_int_equal(system(cmd), 0);
}

static bool can_open(const char *p, int flags)
{
	int fd = open(p, flags | O_CLOEXEC, 0644);
	if (fd < 0)
		return false;
	close(fd);
	return true;
}

/* One character per check, '1' where the child saw what it should. */
static void child(const struct tree *t, int out)
{
	struct al_confine c = {.n_run_dirs = 1,
			       .n_parent_dirs = 1,
			       .n_read_files = 1,
			       .out_dirfd = open(t->out, O_PATH | O_DIRECTORY | O_CLOEXEC),
			       .remove_dirfd = -1,
			       .slot_dirfd = -1,
			       .landlock_abi = al_landlock_abi()};
	struct al_error err = {0};
	char res[16] = "", f[256], g[256];
	size_t n = 0;

	c.run_dirs[0] = t->run;
	c.parent_dirs[0] = t->parent;
	c.read_files[0] = t->readable;
	int ruleset;
	if (al_confine_prepare(&c, &ruleset, &err) < 0 || al_confine_self(ruleset, &err) < 0) {
		dprintf(out, "confine failed: %s", err.msg);
		_exit(1);
	}
	/* 0: the run's files can be read and written */
	path(f, sizeof(f), t->run, "counter");
	res[n++] = can_open(f, O_RDONLY) && can_open(f, O_WRONLY) ? '1' : '0';
	/* 1: a file outside cannot be read, with EACCES */
	path(f, sizeof(f), t->other, "secret");
	res[n++] = !can_open(f, O_RDONLY) && errno == EACCES ? '1' : '0';
	/* 2: the one readable file can be read, not written */
	res[n++] = can_open(t->readable, O_RDONLY) && !can_open(t->readable, O_WRONLY) ? '1' : '0';
	/* 3: the result's directory: write a temporary file, rename it over */
	path(f, sizeof(f), t->out, "r.json.tmp");
	path(g, sizeof(g), t->out, "r.json");
	res[n++] = can_open(f, O_WRONLY | O_CREAT | O_TRUNC) && rename(f, g) == 0 ? '1' : '0';
	/* 4: no file can be made anywhere else */
	path(f, sizeof(f), t->other, "planted");
	res[n++] = !can_open(f, O_WRONLY | O_CREAT) && errno == EACCES ? '1' : '0';
	/* 5: the run's directory can be removed from its parent */
	res[n++] = rmdir(t->run2) == 0 ? '1' : '0';
	/* 6: no TCP port can be bound (landlock ABI 4 and later) */
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	bool bound = bind(s, (struct sockaddr *)&sin, sizeof(sin)) == 0;
	res[n++] = c.landlock_abi < 4 || (!bound && errno == EACCES) ? '1' : '0';
	close(s);
	/* 7: no_new_privs; as root only CAP_KILL and CAP_DAC_OVERRIDE remain */
	struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2] = {{0}};
	bool caps_ok = syscall(SYS_capget, &hdr, d) == 0 &&
		       (geteuid() != 0 ||
			(d[0].effective == (uint32_t)AL_CONFINE_KEPT_CAPS &&
			 d[0].permitted == (uint32_t)AL_CONFINE_KEPT_CAPS && !d[1].effective &&
			 !d[1].permitted && prctl(PR_CAPBSET_READ, CAP_SYS_ADMIN, 0, 0, 0) == 0 &&
			 prctl(PR_CAPBSET_READ, CAP_KILL, 0, 0, 0) == 1));
	res[n++] = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1 && caps_ok ? '1' : '0';
	assert_true(write(out, res, n) == (ssize_t)n);
	/* 8: nothing can be executed (last: if it can, the report ends here) */
	char *argv[] = {"/bin/true", NULL};
	execv("/bin/true", argv);
	assert_true(write(out, errno == EACCES ? "1" : "0", 1) == 1);
	_exit(0);
}

/* Everything the child writes until it exits (it writes in parts), as a
 * string. */
static size_t read_all(int fd, char *buf, size_t size)
{
	size_t n = 0;
	ssize_t r;

	while (n < size - 1 && (r = read(fd, buf + n, size - 1 - n)) > 0)
		n += (size_t)r;
	buf[n] = '\0';
	return n;
}

static void test_confined_child(void **state)
{
	(void)state;
	struct tree t;
	char got[512] = "";
	int p[2], status;

	if (al_landlock_abi() == 0)
		skip();
	make_tree(&t);
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(p[0]);
		child(&t, p[1]);
	}
	close(p[1]);
	read_all(p[0], got, sizeof(got));
	close(p[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	remove_tree(&t);
	/* run rw, outside unreadable, hosts ro, result rename, no planting,
	 * rmdir, no bind, nnp+caps, no exec */
	assert_string_equal(got, "111111111");
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void test_missing_dir_is_an_error(void **state)
{
	(void)state;
	int p[2], status;
	char got[512] = "";

	if (al_landlock_abi() == 0)
		skip();
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct al_confine c = {.n_run_dirs = 1,
				       .out_dirfd = -1,
				       .remove_dirfd = -1,
				       .slot_dirfd = -1,
				       .landlock_abi = al_landlock_abi()};
		c.run_dirs[0] = "/nonexistent/airlock-out";
		struct al_error err = {0};
		int ruleset;
		int r = al_confine_prepare(&c, &ruleset, &err);
		dprintf(p[1], "%d %s", r, err.msg);
		_exit(0);
	}
	close(p[1]);
	read_all(p[0], got, sizeof(got));
	close(p[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_contains(got, "-2 ");
	assert_contains(got, "/nonexistent/airlock-out");
}

/* The backend's removal directory: a native run's (its host id slot's
 * lock file) allows removing files only; gvisor's (remove_tree) also
 * listing and removing directories. Reports "file list rmdir" as 0/1. */
static void remove_dir_case(bool tree, const char *want)
{
	char root[64] = "/tmp/airlock-confine-XXXXXX", f[128], d[128], got[64] = "";
	int p[2], status;

	assert_non_null(mkdtemp(root));
	path(f, sizeof(f), root, "lock");
	path(d, sizeof(d), root, "dir");
	put(f, "slot\n");
	assert_int_equal(mkdir(d, 0755), 0);
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct al_confine c = {.out_dirfd = -1,
				       .remove_dirfd = open(root, O_RDONLY | O_DIRECTORY),
				       .slot_dirfd = -1,
				       .remove_tree = tree,
				       .landlock_abi = al_landlock_abi()};
		struct al_error err = {0};
		int ruleset, fd;
		if (al_confine_prepare(&c, &ruleset, &err) < 0 ||
		    al_confine_self(ruleset, &err) < 0)
			_exit(1);
		char res[4] = {unlink(f) == 0 ? '1' : '0', 0, 0, 0};
		fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		res[1] = fd >= 0 ? '1' : '0';
		res[2] = rmdir(d) == 0 ? '1' : '0';
		assert_true(write(p[1], res, 3) == 3);
		_exit(0);
	}
	close(p[1]);
	read_all(p[0], got, sizeof(got));
	close(p[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	unlink(f);
	rmdir(d);
	assert_int_equal(rmdir(root), 0);
	assert_string_equal(got, want);
}

static void test_remove_dir_files_only(void **state)
{
	(void)state;
	if (al_landlock_abi() == 0)
		skip();
	remove_dir_case(false, "100");
}

static void test_remove_dir_tree(void **state)
{
	(void)state;
	if (al_landlock_abi() == 0)
		skip();
	remove_dir_case(true, "111");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_confined_child),
	    cmocka_unit_test(test_missing_dir_is_an_error),
	    cmocka_unit_test(test_remove_dir_files_only),
	    cmocka_unit_test(test_remove_dir_tree),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
