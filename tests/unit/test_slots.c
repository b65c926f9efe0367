/* ids/slots.h: the host id pool, in a temporary directory of the test's
 * own. A slot is never handed to two holders, is removed when released
 * with its run gone, is kept (for gc) otherwise, and gc takes back only
 * files whose lock is free; a directory others may write is refused.
 *
 * gc keeps a dead run's slot while any process on the host still has ids
 * of its range, which it learns from /proc. Other airlocks on the same
 * machine (another clone's suite, a user's own runs) hold slots of the
 * real pool, and their processes' ids fall in ranges of this test's pool
 * too, so against the host's /proc gc's counts here would depend on them
 * (test_pool_full once got 4092 for 4093). main() runs the tests in a pid
 * namespace of their own with a /proc of its own: the only processes gc
 * sees are the test's. */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "ids/slots.h"

static char dir[64];

/* Whether /proc shows only this test's processes (see the top). */
static bool own_proc;

static int setup(void **state)
{
	snprintf(dir, sizeof(dir), "/tmp/airlock-slots-XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static bool slot_file(int slot)
{
	char p[128];
	snprintf(p, sizeof(p), "%s/%d", dir, slot);
	return access(p, F_OK) == 0;
}

static size_t n_entries(void)
{
	char cmd[160];
	snprintf(cmd, sizeof(cmd), "ls -A %s | wc -l", dir);
	FILE *f = popen(cmd, "r");
	unsigned n = 0;
	assert_non_null(f);
	assert_int_equal(fscanf(f, "%u", &n), 1);
	pclose(f);
	return n;
}

static void test_bounds(void **state)
{
	assert_int_equal(al_ids_slot_base(0), 0x70000000u);
	assert_int_equal(al_ids_slot_base(1), 0x70010000u);
	assert_true(al_ids_in_pool(0x70000000u));
	assert_true(al_ids_in_pool(0x70000000u - 1)); /* overlaps its first id */
	assert_false(al_ids_in_pool(0x70000000u - AL_IDS_SLOT_SIZE));
	assert_true(al_ids_in_pool(al_ids_slot_base(AL_IDS_POOL_SLOTS - 1)));
	assert_false(al_ids_in_pool(al_ids_slot_base(AL_IDS_POOL_SLOTS)));
	assert_false(al_ids_in_pool(1000000000u));
}

static void test_take_release(void **state)
{
	struct al_id_slot a, b;
	struct al_error err = {0};
	char buf[128] = "";

	if (!own_proc)
		skip(); /* gc's count would depend on the host's processes */
	assert_int_equal(al_ids_take(dir, "run-a", &a, &err), 0);
	assert_int_equal(al_ids_take(dir, "run-b", &b, &err), 0);
	assert_true(a.slot >= 0 && a.slot < (int)AL_IDS_POOL_SLOTS);
	assert_int_not_equal(a.slot, b.slot);
	assert_true(slot_file(a.slot) && slot_file(b.slot));
	/* Only the two slot files: no temporary file left. */
	assert_int_equal(n_entries(), 2);
	/* Its owner is recorded. */
	assert_true(pread(a.fd, buf, sizeof(buf) - 1, 0) > 0);
	assert_contains(buf, " run-a\n");
	/* Live (locked): gc leaves both. */
	assert_int_equal(al_ids_gc(dir, &err), 0);
	assert_true(slot_file(a.slot) && slot_file(b.slot));
	int sa = a.slot, sb = b.slot;
	al_ids_release(&a, true);
	assert_false(slot_file(sa));
	assert_int_equal(a.fd, -1);
	/* Released with its run not known to be gone: left for gc, which
	 * takes it (no process here has ids of the pool). */
	al_ids_release(&b, false);
	assert_true(slot_file(sb));
	assert_int_equal(al_ids_gc(dir, &err), 1);
	assert_false(slot_file(sb));
	assert_int_equal(n_entries(), 0);
	al_ids_release(&a, true); /* safe on an empty one */
}

static void test_stale_temp_removed(void **state)
{
	char p[128];
	struct al_error err = {0};

	char live[128];

	/* A taker that is gone (no such pid) left it: removed. */
	snprintf(p, sizeof(p), "%s/.new-999999999-dead", dir);
	int fd = open(p, O_CREAT | O_WRONLY, 0600);
	assert_true(fd >= 0);
	close(fd);
	/* A live taker's may be between its create and its lock: kept. */
	snprintf(live, sizeof(live), "%s/.new-%d-live", dir, (int)getpid());
	fd = open(live, O_CREAT | O_WRONLY, 0600);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(al_ids_gc(dir, &err), 0); /* not slots: not counted */
	assert_int_equal(access(p, F_OK), -1);
	assert_int_equal(access(live, F_OK), 0);
	unlink(live);
}

static void test_dir_checked(void **state)
{
	struct al_id_slot s;
	struct al_error err = {0};
	char link[128];

	assert_int_equal(chmod(dir, 0777), 0);
	assert_int_equal(al_ids_take(dir, "x", &s, &err), -EPERM);
	assert_contains(err.msg, "writable by no one else");
	assert_int_equal(s.fd, -1);
	assert_int_equal(chmod(dir, 0700), 0);
	snprintf(link, sizeof(link), "%s-link", dir);
	assert_int_equal(symlink(dir, link), 0);
	assert_true(al_ids_take(link, "x", &s, &err) < 0);
	assert_contains(err.msg, "opening");
	unlink(link);
	assert_int_equal(n_entries(), 0);
}

/* Every slot held: the next run is refused (and dead holders' slots are
 * taken back first). */
static void test_pool_full(void **state)
{
	struct rlimit rl = {AL_IDS_POOL_SLOTS + 64, AL_IDS_POOL_SLOTS + 64};
	struct al_error err = {0};
	struct al_id_slot *s = calloc(AL_IDS_POOL_SLOTS, sizeof(*s));
	struct al_id_slot extra;
	bool seen[AL_IDS_POOL_SLOTS] = {false};

	if (!own_proc)
		skip(); /* gc's count would depend on the host's processes */
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		skip(); /* needs 4094 descriptors at once */
	for (unsigned i = 0; i < AL_IDS_POOL_SLOTS; i++) {
		assert_int_equal(al_ids_take(dir, "fill", &s[i], &err), 0);
		assert_false(seen[s[i].slot]);
		seen[s[i].slot] = true;
		/* One directory fd is enough for the test's descriptors. */
		al_closep(&s[i].dirfd);
	}
	assert_int_equal(al_ids_take(dir, "one-more", &extra, &err), -EUSERS);
	assert_contains(err.msg, "none of the pool's 4094 slots is free: 4094 are held");
	/* A holder dies without removing its file: the next take reclaims it. */
	int dead = s[17].slot;
	al_closep(&s[17].fd);
	assert_int_equal(al_ids_take(dir, "after", &extra, &err), 0);
	assert_int_equal(extra.slot, dead);
	al_ids_release(&extra, true);
	for (unsigned i = 0; i < AL_IDS_POOL_SLOTS; i++)
		al_closep(&s[i].fd);
	free(s);
	assert_int_equal(al_ids_gc(dir, &err), (int)AL_IDS_POOL_SLOTS - 1);
	assert_int_equal(n_entries(), 0);
}

static bool write_str(const char *path, const char *s)
{
	FILE *f = fopen(path, "w");
	bool ok = f && fputs(s, f) >= 0;

	return f ? fclose(f) == 0 && ok : false;
}

/* New pid and mount namespaces (and, not as root, a user namespace that
 * maps only our own ids, so that the pool directory is still ours). */
static bool new_namespaces(void)
{
	char map[64];
	unsigned uid = (unsigned)geteuid(), gid = (unsigned)getegid();

	if (unshare(CLONE_NEWPID | CLONE_NEWNS) == 0)
		return true;
	if (unshare(CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS) < 0)
		return false;
	snprintf(map, sizeof(map), "%u %u 1\n", uid, uid);
	if (!write_str("/proc/self/setgroups", "deny") || !write_str("/proc/self/uid_map", map))
		return false;
	snprintf(map, sizeof(map), "%u %u 1\n", gid, gid);
	return write_str("/proc/self/gid_map", map);
}

/* Returns in the namespaces' first process with own_proc set, or in this
 * one unchanged when they cannot be made (the tests that count gc's work
 * then skip); the parent waits and exits with the tests' status. */
static void enter_own_proc(void)
{
	int st;

	if (!new_namespaces()) {
		fprintf(stderr,
			"test_slots: no pid namespace of our own (%s): "
			"the tests that count gc's work skip\n",
			strerror(errno));
		return;
	}
	/* Twice: the tests run in the namespace's second process, not in
	 * its init, which SIGSTOP does not stop (LeakSanitizer stops the
	 * process it checks with ptrace at exit). */
	for (int i = 0; i < 2; i++) {
		pid_t pid = fork();
		if (pid < 0) {
			perror("test_slots: fork");
			exit(1);
		}
		/* The waiting ones leave with _exit: LeakSanitizer's check at
		 * exit would start its tracer in the new pid namespace, where
		 * this process cannot be seen. */
		if (pid > 0) {
			if (waitpid(pid, &st, 0) < 0)
				_exit(1);
			_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 1);
		}
	}
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
		fprintf(stderr,
			"test_slots: cannot mount a /proc of our own (%s): "
			"the tests that count gc's work skip\n",
			strerror(errno));
		return;
	}
	own_proc = true;
}

int main(void)
{
	enter_own_proc();
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bounds),
	    cmocka_unit_test_setup_teardown(test_take_release, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_stale_temp_removed, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_dir_checked, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_pool_full, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
