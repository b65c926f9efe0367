/* backend/native/sockdiag.h: adding up socket memory from NETLINK_SOCK_DIAG
 * dumps. The parser is fed hand-made messages; one test dumps this
 * process's own loopback listener, with connections it never accepts, from
 * the real kernel (no root needed: a dump of the caller's own namespace). */
#include "unit.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "policy/plan.h"
#include "backend/native/sockdiag.h"

static uint64_t buf[4096];
static size_t used;

/* Append one SOCK_DIAG_BY_FAMILY message with a SKMEMINFO attribute. */
static void add_msg(uint8_t state, uint32_t inode, uint16_t sport, uint32_t rqueue,
		    const uint32_t mem[SK_MEMINFO_VARS])
{
	struct nlmsghdr *nh = (struct nlmsghdr *)((char *)buf + used);
	struct inet_diag_msg *m = NLMSG_DATA(nh);
	struct rtattr *a = (struct rtattr *)(m + 1);
	size_t len = NLMSG_LENGTH(sizeof(*m) + RTA_LENGTH(SK_MEMINFO_VARS * sizeof(uint32_t)));

	memset(nh, 0, NLMSG_ALIGN(len));
	nh->nlmsg_len = (uint32_t)len;
	nh->nlmsg_type = SOCK_DIAG_BY_FAMILY;
	m->idiag_family = AF_INET;
	m->idiag_state = state;
	m->idiag_inode = inode;
	m->id.idiag_src[0] = htonl(INADDR_LOOPBACK);
	m->id.idiag_sport = htons(sport);
	m->idiag_rqueue = rqueue;
	a->rta_type = INET_DIAG_SKMEMINFO;
	a->rta_len = RTA_LENGTH(SK_MEMINFO_VARS * sizeof(uint32_t));
	memcpy(RTA_DATA(a), mem, SK_MEMINFO_VARS * sizeof(uint32_t));
	used += NLMSG_ALIGN(len);
}

static void add_done(int error)
{
	struct nlmsghdr *nh = (struct nlmsghdr *)((char *)buf + used);
	size_t len = NLMSG_LENGTH(error ? sizeof(struct nlmsgerr) : sizeof(int));

	memset(nh, 0, NLMSG_ALIGN(len));
	nh->nlmsg_len = (uint32_t)len;
	nh->nlmsg_type = error ? NLMSG_ERROR : NLMSG_DONE;
	if (error)
		((struct nlmsgerr *)NLMSG_DATA(nh))->error = -error;
	used += NLMSG_ALIGN(len);
}

/* Only connections without an inode (not accepted yet) count; listeners
 * count with their queues; sockets with a file (the sandbox's own, or the
 * gateway's accepted ones) are charged to a cgroup and left out. */
static void test_counts_only_waiting_connections(void **state)
{
	uint32_t mem[SK_MEMINFO_VARS] = {0}, lis[SK_MEMINFO_VARS] = {0};
	struct al_sockdiag_sum sum = {0};

	mem[SK_MEMINFO_RMEM_ALLOC] = 1000;
	mem[SK_MEMINFO_WMEM_QUEUED] = 200;
	mem[SK_MEMINFO_FWD_ALLOC] = 30;
	mem[SK_MEMINFO_RCVBUF] = 999999; /* a limit, not memory */
	used = 0;
	add_msg(TCP_ESTABLISHED, 0, 40000, 0, mem);		      /* waiting */
	add_msg(TCP_CLOSE_WAIT, 0, 40001, 0, mem);		      /* waiting, peer closed */
	add_msg(TCP_SYN_RECV, 0, 40002, 0, mem);		      /* waiting (Fast Open) */
	add_msg(TCP_ESTABLISHED, 4711, 40003, 0, mem);		      /* accepted: has a file */
	add_msg(TCP_ESTABLISHED, 4712, AL_GATEWAY_HTTP_PORT, 0, mem); /* the gateway's */
	add_msg(TCP_FIN_WAIT1, 0, 40004, 0, mem);		      /* an orphan: was charged */
	add_msg(TCP_LISTEN, 4713, 8080, 7, lis);
	add_msg(TCP_LISTEN, 4714, AL_GATEWAY_HTTP_PORT, 2, lis); /* the gateway's queue counts */
	add_done(0);
	al_sockdiag_parse(buf, used, &sum);
	assert_true(sum.done);
	assert_int_equal(sum.error, 0);
	assert_int_equal(sum.sockets, 3);
	assert_int_equal(sum.bytes, 3 * 1230);
	assert_int_equal(sum.listeners, 2);
	assert_int_equal(sum.pending, 9);
}

static void test_error_and_truncation(void **state)
{
	uint32_t est[SK_MEMINFO_VARS] = {0};
	struct al_sockdiag_sum sum = {0};

	used = 0;
	add_done(EPERM);
	al_sockdiag_parse(buf, used, &sum);
	assert_int_equal(sum.error, EPERM);
	assert_false(sum.done);

	/* A message cut short: counted as malformed, never read past. */
	memset(&sum, 0, sizeof(sum));
	used = 0;
	est[SK_MEMINFO_RMEM_ALLOC] = 5;
	add_msg(TCP_ESTABLISHED, 0, 1, 0, est);
	al_sockdiag_parse(buf, used - 8, &sum);
	assert_int_equal(sum.error, EBADMSG);
	assert_int_equal(sum.bytes, 0);

	/* A header that claims less than an inet_diag_msg. */
	memset(&sum, 0, sizeof(sum));
	used = 0;
	add_msg(TCP_ESTABLISHED, 0, 1, 0, est);
	((struct nlmsghdr *)buf)->nlmsg_len = NLMSG_LENGTH(4);
	al_sockdiag_parse(buf, NLMSG_LENGTH(4), &sum);
	assert_int_equal(sum.error, EBADMSG);
}

/* The real kernel: a listener with 5 connections it never accepts, each
 * sent 100 KB. */
static void test_real_dump_sees_the_accept_queue(void **state)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof(a);
	static char data[100000];
	int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), c[5];
	int nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	struct al_sockdiag_sum lis, all;

	assert_true(ls >= 0 && nl >= 0);
	assert_int_equal(bind(ls, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(ls, 16), 0);
	assert_int_equal(getsockname(ls, (struct sockaddr *)&a, &alen), 0);
	for (int i = 0; i < 5; i++) {
		c[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		assert_int_equal(connect(c[i], (struct sockaddr *)&a, sizeof(a)), 0);
		assert_true(send(c[i], data, sizeof(data), MSG_DONTWAIT) > 0);
	}
	usleep(20000);
	assert_int_equal(al_sockdiag_tcp(nl, true, 0, 0, &lis), 0);
	assert_true(lis.pending >= 5);
	assert_true(lis.listeners >= 1);
	assert_int_equal(lis.sockets, 0); /* listeners only */
	assert_int_equal(al_sockdiag_tcp(nl, false, 0, 0, &all), 0);
	/* The queued connections hold what was sent; the senders (with a
	 * file) are left out. */
	assert_true(all.sockets >= 5);
	assert_true(all.bytes >= 5 * 50000);
	/* A stop point ends the dump early; the socket is then spent. */
	struct al_sockdiag_sum part;
	assert_int_equal(al_sockdiag_tcp(nl, false, 1, 0, &part), 1);
	assert_true(part.bytes >= 1);
	close(nl);
	/* So does a listener cap. */
	nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	assert_true(nl >= 0);
	assert_int_equal(al_sockdiag_tcp(nl, true, 0, 1, &part) >= 0, 1);
	int ls2 = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in b = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	assert_int_equal(bind(ls2, (struct sockaddr *)&b, sizeof(b)), 0);
	assert_int_equal(listen(ls2, 1), 0);
	close(nl);
	nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	assert_int_equal(al_sockdiag_tcp(nl, true, 0, 1, &part), 1);
	assert_true(part.listeners >= 2);
	close(ls2);
	for (int i = 0; i < 5; i++)
		close(c[i]);
	close(ls);
	close(nl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_counts_only_waiting_connections),
	    cmocka_unit_test(test_error_and_truncation),
	    cmocka_unit_test(test_real_dump_sees_the_accept_queue),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
