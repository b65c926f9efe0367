/* net/nfmsg.h: nf_tables messages built into a fixed buffer (the bytes a
 * batch is made of: headers, sequence numbers, attributes, nests) and an
 * answer's attributes read back, malformed ones included. The kernel's
 * side is test_capture's (the removal by handle) and the process
 * backend's suites (its table). */
#include "unit.h"

#include <arpa/inet.h>
#include <endian.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <string.h>
#include <sys/socket.h>

#include "net/nfmsg.h"

static const struct nlmsghdr *msg_at(const struct al_nfmsg *b, size_t off)
{
	return (const struct nlmsghdr *)(b->buf + off);
}

static void test_batch_bytes(void **state)
{
	struct al_nfmsg b;
	const void *data;
	size_t len;
	(void)state;

	al_nfmsg_init(&b, 7);
	al_nfmsg_begin(&b, NFNL_MSG_BATCH_BEGIN, 0, NFPROTO_INET);
	al_nfmsg_begin(&b, al_nft_type(NFT_MSG_NEWTABLE), NLM_F_CREATE, NFPROTO_IPV6);
	al_nfmsg_attr_str(&b, NFTA_TABLE_NAME, "t");
	al_nfmsg_attr_be64(&b, NFTA_TABLE_HANDLE, 0x0102030405060708ull);
	size_t nest = al_nfmsg_nest(&b, NFTA_TABLE_USERDATA);
	al_nfmsg_attr_be32(&b, 1, 42);
	al_nfmsg_nest_end(&b, nest);
	al_nfmsg_begin(&b, NFNL_MSG_BATCH_END, 0, NFPROTO_INET);
	al_nfmsg_end(&b);
	assert_false(b.overflow);

	/* The batch's begin: AF_UNSPEC whatever the family asked, for the
	 * nf_tables subsystem, the first sequence number. */
	const struct nlmsghdr *nh = msg_at(&b, 0);
	const struct nfgenmsg *g = NLMSG_DATA(nh);
	assert_int_equal(nh->nlmsg_type, NFNL_MSG_BATCH_BEGIN);
	assert_int_equal(nh->nlmsg_seq, 7);
	assert_int_equal(nh->nlmsg_flags, NLM_F_REQUEST);
	assert_int_equal(g->nfgen_family, AF_UNSPEC);
	assert_int_equal(ntohs(g->res_id), NFNL_SUBSYS_NFTABLES);
	assert_int_equal(nh->nlmsg_len, NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(*g)));

	/* The table: its family, flags, the next sequence number, and its
	 * attributes readable back (the string with its NUL, the 64-bit
	 * value big-endian, the nest's length covering its member). */
	size_t off = nh->nlmsg_len;
	nh = msg_at(&b, off);
	g = NLMSG_DATA(nh);
	assert_int_equal(nh->nlmsg_type, (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWTABLE);
	assert_int_equal(nh->nlmsg_seq, 8);
	assert_int_equal(nh->nlmsg_flags, NLM_F_REQUEST | NLM_F_CREATE);
	assert_int_equal(g->nfgen_family, NFPROTO_IPV6);
	assert_true(al_nfmsg_attr_get(nh, NFTA_TABLE_NAME, &data, &len));
	assert_int_equal(len, 2);
	assert_memory_equal(data, "t", 2);
	assert_true(al_nfmsg_attr_get(nh, NFTA_TABLE_HANDLE, &data, &len));
	assert_int_equal(len, 8);
	uint64_t be;
	memcpy(&be, data, 8);
	assert_true(be64toh(be) == 0x0102030405060708ull);
	assert_true(al_nfmsg_attr_get(nh, NFTA_TABLE_USERDATA, &data, &len));
	assert_int_equal(len, NLA_HDRLEN + 4);
	assert_false(al_nfmsg_attr_get(nh, NFTA_TABLE_FLAGS, &data, &len));

	/* The end, and nothing after it. */
	off += nh->nlmsg_len;
	nh = msg_at(&b, off);
	assert_int_equal(nh->nlmsg_type, NFNL_MSG_BATCH_END);
	assert_int_equal(nh->nlmsg_seq, 9);
	assert_int_equal(off + nh->nlmsg_len, b.len);
}

/* An attribute whose length runs past its message, or is below a header,
 * ends the search: nothing at or after it is returned. */
static void test_malformed_attributes(void **state)
{
	struct al_nfmsg b;
	const void *data;
	size_t len;
	(void)state;

	al_nfmsg_init(&b, 1);
	al_nfmsg_begin(&b, al_nft_type(NFT_MSG_NEWTABLE), 0, NFPROTO_IPV4);
	al_nfmsg_attr_str(&b, NFTA_TABLE_NAME, "airlock");
	al_nfmsg_attr_be32(&b, NFTA_TABLE_FLAGS, 1);
	al_nfmsg_end(&b);
	struct nlmsghdr *nh = (struct nlmsghdr *)b.buf;
	struct nlattr *first =
	    (struct nlattr *)(b.buf + NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(struct nfgenmsg)));
	assert_true(al_nfmsg_attr_get(nh, NFTA_TABLE_FLAGS, &data, &len));

	first->nla_len = 2; /* below a header */
	assert_false(al_nfmsg_attr_get(nh, NFTA_TABLE_NAME, &data, &len));
	assert_false(al_nfmsg_attr_get(nh, NFTA_TABLE_FLAGS, &data, &len));
	first->nla_len = 0xfff0; /* past the message */
	assert_false(al_nfmsg_attr_get(nh, NFTA_TABLE_NAME, &data, &len));
	first->nla_len = NLA_HDRLEN + 8;
	nh->nlmsg_len = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(struct nfgenmsg)) + 4; /* cut */
	assert_false(al_nfmsg_attr_get(nh, NFTA_TABLE_NAME, &data, &len));
}

/* Past the buffer: overflow is set, and nothing is written beyond it, not
 * even a later, smaller attribute that would fit. */
static void test_overflow(void **state)
{
	struct al_nfmsg b;
	static char big[5000];
	(void)state;

	al_nfmsg_init(&b, 1);
	al_nfmsg_begin(&b, al_nft_type(NFT_MSG_NEWTABLE), 0, NFPROTO_IPV4);
	size_t before = b.len;
	al_nfmsg_attr(&b, NFTA_TABLE_USERDATA, big, sizeof(b.buf));
	assert_true(b.overflow);
	assert_int_equal(b.len, before);
	al_nfmsg_attr_be32(&b, NFTA_TABLE_FLAGS, 1);
	assert_int_equal(b.len, before);
	al_nfmsg_end(&b);
	assert_true(b.overflow);
}

int main(void)
{
	/* clang-format off */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_batch_bytes),
		cmocka_unit_test(test_malformed_attributes),
		cmocka_unit_test(test_overflow),
	};
	/* clang-format on */

	return cmocka_run_group_tests(tests, NULL, NULL);
}
