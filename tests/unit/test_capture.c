/* backend/native/capture.h: the transparent capture's prebuilt netlink
 * batch, installed in network namespaces this test makes (unshare, one per
 * case) and read back with Debian's nft. Skipped, with the reason, without
 * a network namespace or without /usr/sbin/nft. */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <linux/netlink.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/native/capture.h"
#include "core/sys.h"

#define NFT "/usr/sbin/nft"

/* Run nft with args, input on its stdin; its stdout and stderr in out.
 * Returns its exit status. */
static int nft(const char *args, const char *input, char *out, size_t outlen)
{
	int in[2], res[2], st = 0;
	size_t got = 0;
	ssize_t n;

	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	assert_int_equal(pipe2(res, O_CLOEXEC), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(res[1], 1);
		dup2(res[1], 2);
		execl("/bin/sh", "sh", "-c", args, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(res[1]);
	if (input)
		assert_int_equal(al_write_all(in[1], input, strlen(input)), 0);
	close(in[1]);
	while (got + 1 < outlen && (n = read(res[0], out + got, outlen - 1 - got)) > 0)
		got += (size_t)n;
	out[got] = '\0';
	close(res[0]);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* As the supervisor does, on a socket of the namespace. */
static int install(struct al_error *err)
{
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
	assert_true(fd >= 0);
	int r = al_capture_install(fd, err);
	close(fd);
	return r;
}

static void list(char *out, size_t outlen)
{
	assert_int_equal(nft(NFT " list ruleset", NULL, out, outlen), 0);
}

/* Each case starts in a network namespace of its own (the old one goes
 * with its last reference). */
static int fresh_netns(void **state)
{
	(void)state;
	return unshare(CLONE_NEWNET) == 0 ? 0 : -1;
}

static void test_listing_matches_nft_text(void **state)
{
	static char ours[16384], theirs[16384];
	struct al_error err = {0};

	(void)state;
	list(ours, sizeof(ours));
	assert_string_equal(ours, "");
	assert_int_equal(install(&err), 0);
	list(ours, sizeof(ours));
	assert_contains(ours, "redirect to :15001");
	assert_contains(ours, "policy = { syn_sent : 5, syn_recv : 5, last_ack : 2, "
			      "time_wait : 1, close : 1 }");
	assert_contains(ours, "ip6 daddr != ::1 drop");
	/* The same text, loaded by nft itself, lists the same. */
	assert_int_equal(nft(NFT " flush ruleset", NULL, theirs, sizeof(theirs)), 0);
	int rc = nft(NFT " -f -", al_capture_nft_text, theirs, sizeof(theirs));
	if (rc != 0)
		fail_msg("nft refused al_capture_nft_text: %s", theirs);
	list(theirs, sizeof(theirs));
	assert_string_equal(ours, theirs);
}

/* The rulesets for an engine's namespace: each lists as its text does,
 * a second install is refused (EEXIST) without touching the first, and
 * the removal leaves nothing. */
static void check_joined(const struct al_capture_ruleset *rules, const char *want)
{
	static char ours[16384], theirs[16384];
	struct al_error err = {0};
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);

	assert_true(fd >= 0);
	if (al_capture_apply(fd, rules, &err) < 0)
		fail_msg("%s", err.msg);
	list(ours, sizeof(ours));
	assert_contains(ours, "ct direction reply accept");
	assert_contains(ours, want);
	assert_contains(ours, "ip6 daddr != ::1 drop");
	/* Either ruleset after either: refused as a whole. */
	assert_int_equal(al_capture_apply(fd, &al_capture_joined_rules, &err), -EEXIST);
	assert_int_equal(al_capture_apply(fd, &al_capture_joined_drop_rules, &err), -EEXIST);
	list(theirs, sizeof(theirs));
	assert_string_equal(ours, theirs);
	/* Each table removed on its own: one gone does not keep the other. */
	assert_int_equal(al_capture_apply(fd, &al_capture_remove_ip6_rules, &err), 0);
	list(theirs, sizeof(theirs));
	assert_contains(theirs, "table ip airlock");
	assert_true(strstr(theirs, "table ip6 airlock") == NULL);
	assert_int_equal(al_capture_apply(fd, &al_capture_remove_ip6_rules, &err), -ENOENT);
	assert_int_equal(al_capture_apply(fd, &al_capture_remove_ip_rules, &err), 0);
	list(theirs, sizeof(theirs));
	assert_string_equal(theirs, "");
	close(fd);
	/* The same text, loaded by nft itself, lists the same. */
	int rc = nft(NFT " -f -", rules->text, theirs, sizeof(theirs));
	if (rc != 0)
		fail_msg("nft refused the ruleset's text: %s", theirs);
	list(theirs, sizeof(theirs));
	assert_string_equal(ours, theirs);
}

static void test_joined_capture(void **state)
{
	(void)state;
	check_joined(&al_capture_joined_rules, "redirect to :15001");
}

static void test_joined_drop(void **state)
{
	static char out[16384];

	(void)state;
	check_joined(&al_capture_joined_drop_rules, "ip daddr != 127.0.0.0/8 drop");
	list(out, sizeof(out));
	assert_not_contains(out, "redirect");
}

/* Removal by handle removes the table that handle named and no other: a
 * table of the same name made after it (another container's, in an
 * engine's namespace, once ours was removed by hand) stays. */
static void test_remove_by_handle(void **state)
{
	static char out[16384];
	struct al_error err = {0};
	uint64_t old4 = 0, old6 = 0, new4 = 0, new6 = 0;
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(al_capture_table_handle(fd, AF_INET, &old4, &err), -ENOENT);
	assert_contains(err.msg, "table ip airlock");
	if (al_capture_apply(fd, &al_capture_joined_drop_rules, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(al_capture_table_handle(fd, AF_INET, &old4, &err), 0);
	assert_int_equal(al_capture_table_handle(fd, AF_INET6, &old6, &err), 0);
	assert_true(old4 != 0 && old6 != 0);
	/* Removed by hand, and made again: new tables, new handles. */
	assert_int_equal(al_capture_apply(fd, &al_capture_remove_ip_rules, &err), 0);
	assert_int_equal(al_capture_apply(fd, &al_capture_remove_ip6_rules, &err), 0);
	if (al_capture_apply(fd, &al_capture_joined_drop_rules, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(al_capture_table_handle(fd, AF_INET, &new4, &err), 0);
	assert_int_equal(al_capture_table_handle(fd, AF_INET6, &new6, &err), 0);
	assert_true(new4 != old4 && new6 != old6);
	assert_int_equal(al_capture_remove_table(fd, AF_INET, old4, &err), -ENOENT);
	assert_int_equal(al_capture_remove_table(fd, AF_INET6, old6, &err), -ENOENT);
	list(out, sizeof(out));
	assert_contains(out, "table ip airlock");
	assert_contains(out, "table ip6 airlock");
	/* Each family's own: the ip6 handle does not reach the ip table. */
	assert_int_equal(al_capture_remove_table(fd, AF_INET6, new6, &err), 0);
	list(out, sizeof(out));
	assert_contains(out, "table ip airlock");
	assert_not_contains(out, "table ip6 airlock");
	assert_int_equal(al_capture_remove_table(fd, AF_INET, new4, &err), 0);
	list(out, sizeof(out));
	assert_string_equal(out, "");
	close(fd);
}

/* A namespace whose raw_out chain is already another type: the kernel
 * refuses that message, the error names it, and the batch is one
 * transaction: nothing else of it stays. */
static void test_refusal_names_part_and_keeps_nothing(void **state)
{
	static char before[4096], after[4096];
	struct al_error err = {0};

	(void)state;
	int rc = nft(
	    NFT " -f -",
	    "table ip airlock {\n  chain raw_out {\n    type nat hook output priority 5;\n  }\n}\n",
	    before, sizeof(before));
	if (rc != 0)
		fail_msg("nft: %s", before);
	list(before, sizeof(before));
	int r = install(&err);
	assert_true(r < 0);
	assert_contains(err.msg, "the kernel refused the transparent capture's chain ip raw_out");
	list(after, sizeof(after));
	assert_string_equal(before, after);
	assert_not_contains(after, "closing");
}

/* Without CAP_NET_ADMIN the kernel refuses the batch as a whole. */
static void test_without_net_admin(void **state)
{
	char msg[512] = "";
	int p[2], st = 0;

	(void)state;
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
		struct __user_cap_data_struct data[2] = {{0}};
		struct al_error err = {0};
		if (syscall(SYS_capset, &hdr, data) < 0)
			_exit(100);
		int r = install(&err);
		(void)!write(p[1], err.msg, strlen(err.msg));
		_exit(r == -EPERM ? 0 : 1);
	}
	close(p[1]);
	ssize_t n = read(p[0], msg, sizeof(msg) - 1);
	msg[n > 0 ? n : 0] = '\0';
	close(p[0]);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	if (WEXITSTATUS(st) != 0)
		fail_msg("expected EPERM, got status %d: %s", WEXITSTATUS(st), msg);
	assert_contains(msg, "the kernel refused the transparent capture's batch");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_listing_matches_nft_text, fresh_netns),
	    cmocka_unit_test_setup(test_refusal_names_part_and_keeps_nothing, fresh_netns),
	    cmocka_unit_test_setup(test_without_net_admin, fresh_netns),
	    cmocka_unit_test_setup(test_joined_capture, fresh_netns),
	    cmocka_unit_test_setup(test_joined_drop, fresh_netns),
	    cmocka_unit_test_setup(test_remove_by_handle, fresh_netns),
	};
	if (access(NFT, X_OK) != 0) {
		printf("SKIP: %s is not installed (Debian package nftables; the test reads the "
		       "rules back with it)\n",
		       NFT);
		return 77;
	}
	/* Not root: a user namespace of our own, with our uid as its root (so
	 * nft keeps its capabilities across exec). */
	if (geteuid() != 0) {
		uid_t uid = geteuid();
		gid_t gid = getegid();
		char map[64];
		int fd;
		if (unshare(CLONE_NEWUSER) < 0) {
			printf("SKIP: not root and no user namespaces: %s\n", strerror(errno));
			return 77;
		}
		snprintf(map, sizeof(map), "0 %u 1", (unsigned)uid);
		if ((fd = open("/proc/self/uid_map", O_WRONLY)) >= 0) {
			(void)!write(fd, map, strlen(map));
			close(fd);
		}
		if ((fd = open("/proc/self/setgroups", O_WRONLY)) >= 0) {
			(void)!write(fd, "deny", 4);
			close(fd);
		}
		snprintf(map, sizeof(map), "0 %u 1", (unsigned)gid);
		if ((fd = open("/proc/self/gid_map", O_WRONLY)) >= 0) {
			(void)!write(fd, map, strlen(map));
			close(fd);
		}
	}
	if (unshare(CLONE_NEWNET) < 0) {
		printf("SKIP: no network namespace for the test: %s\n", strerror(errno));
		return 77;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
