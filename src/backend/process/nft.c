/* The process backend's nftables table: its sandbox shares the host's
 * network, so a table of its own (family inet, "airlock-process-UID") drops
 * every packet the run's uid sends (meta skuid) but TCP to the gateway's
 * address and ports. The batch is built here at run time (the uid and
 * ports are the run's) with net/nfmsg.h: no libnftnl in the binary. */
#include "backend/process/process.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "ids/slots.h"
#include "net/nfmsg.h"

/* One expression of a rule: its element, its name, and the data nest
 * its attributes go in; expr_end closes both. */
struct ex {
	size_t elem, data;
};

static struct ex expr(struct al_nfmsg *b, const char *name)
{
	struct ex e = {.elem = al_nfmsg_nest(b, NFTA_LIST_ELEM)};
	al_nfmsg_attr_str(b, NFTA_EXPR_NAME, name);
	e.data = al_nfmsg_nest(b, NFTA_EXPR_DATA);
	return e;
}

static void expr_end(struct al_nfmsg *b, struct ex e)
{
	al_nfmsg_nest_end(b, e.data);
	al_nfmsg_nest_end(b, e.elem);
}

static void meta(struct al_nfmsg *b, uint32_t key)
{
	struct ex e = expr(b, "meta");
	al_nfmsg_attr_be32(b, NFTA_META_DREG, NFT_REG_1);
	al_nfmsg_attr_be32(b, NFTA_META_KEY, key);
	expr_end(b, e);
}

static void payload(struct al_nfmsg *b, uint32_t base, uint32_t offset, uint32_t len)
{
	struct ex e = expr(b, "payload");
	al_nfmsg_attr_be32(b, NFTA_PAYLOAD_DREG, NFT_REG_1);
	al_nfmsg_attr_be32(b, NFTA_PAYLOAD_BASE, base);
	al_nfmsg_attr_be32(b, NFTA_PAYLOAD_OFFSET, offset);
	al_nfmsg_attr_be32(b, NFTA_PAYLOAD_LEN, len);
	expr_end(b, e);
}

static void cmp_eq(struct al_nfmsg *b, const void *v, size_t len)
{
	struct ex e = expr(b, "cmp");
	al_nfmsg_attr_be32(b, NFTA_CMP_SREG, NFT_REG_1);
	al_nfmsg_attr_be32(b, NFTA_CMP_OP, NFT_CMP_EQ);
	size_t d = al_nfmsg_nest(b, NFTA_CMP_DATA);
	al_nfmsg_attr(b, NFTA_DATA_VALUE, v, len);
	al_nfmsg_nest_end(b, d);
	expr_end(b, e);
}

static void verdict(struct al_nfmsg *b, int code)
{
	struct ex e = expr(b, "immediate");
	al_nfmsg_attr_be32(b, NFTA_IMMEDIATE_DREG, NFT_REG_VERDICT);
	size_t d = al_nfmsg_nest(b, NFTA_IMMEDIATE_DATA);
	size_t v = al_nfmsg_nest(b, NFTA_DATA_VERDICT);
	al_nfmsg_attr_be32(b, NFTA_VERDICT_CODE, (uint32_t)code);
	al_nfmsg_nest_end(b, v);
	al_nfmsg_nest_end(b, d);
	expr_end(b, e);
}

void al_process_nft_name(uid_t uid, char *out, size_t len)
{
	snprintf(out, len, "%s%u", AL_PROCESS_NFT_PREFIX, (unsigned)uid);
}

static void table_msgs(struct al_nfmsg *b, const char *name, bool create)
{
	/* Made if missing, then deleted: a table a killed run of the same
	 * uid left goes, in the same transaction. */
	al_nfmsg_begin(b, al_nft_type(NFT_MSG_NEWTABLE), NLM_F_CREATE, NFPROTO_INET);
	al_nfmsg_attr_str(b, NFTA_TABLE_NAME, name);
	al_nfmsg_begin(b, al_nft_type(NFT_MSG_DELTABLE), 0, NFPROTO_INET);
	al_nfmsg_attr_str(b, NFTA_TABLE_NAME, name);
	if (!create)
		return;
	al_nfmsg_begin(b, al_nft_type(NFT_MSG_NEWTABLE), NLM_F_CREATE, NFPROTO_INET);
	al_nfmsg_attr_str(b, NFTA_TABLE_NAME, name);
	al_nfmsg_attr_be32(b, NFTA_TABLE_FLAGS, 0);
}

/* The rules (what `nft list table inet airlock-process-UID` shows):
 *   chain out { type filter hook output priority 0; policy accept;
 *     meta skuid UID meta nfproto ipv4 ip daddr 127.0.0.1 meta l4proto tcp
 *       tcp dport PORT accept            (one per gateway port)
 *     meta skuid UID drop } */
static void build(struct al_nfmsg *b, const char *name, uid_t uid, const uint16_t *ports, size_t n)
{
	const uint32_t u = uid, lo = htonl(INADDR_LOOPBACK);
	const uint8_t v4 = NFPROTO_IPV4, tcp = IPPROTO_TCP;

	al_nfmsg_begin(b, NFNL_MSG_BATCH_BEGIN, 0, AF_UNSPEC);
	table_msgs(b, name, true);
	al_nfmsg_begin(b, al_nft_type(NFT_MSG_NEWCHAIN), NLM_F_CREATE, NFPROTO_INET);
	al_nfmsg_attr_str(b, NFTA_CHAIN_TABLE, name);
	al_nfmsg_attr_str(b, NFTA_CHAIN_NAME, "out");
	size_t hook = al_nfmsg_nest(b, NFTA_CHAIN_HOOK);
	al_nfmsg_attr_be32(b, NFTA_HOOK_HOOKNUM, NF_INET_LOCAL_OUT);
	al_nfmsg_attr_be32(b, NFTA_HOOK_PRIORITY, 0);
	al_nfmsg_nest_end(b, hook);
	al_nfmsg_attr_be32(b, NFTA_CHAIN_POLICY, NF_ACCEPT);
	al_nfmsg_attr_str(b, NFTA_CHAIN_TYPE, "filter");
	for (size_t i = 0; i <= n; i++) {
		al_nfmsg_begin(b, al_nft_type(NFT_MSG_NEWRULE), NLM_F_CREATE | NLM_F_APPEND,
			       NFPROTO_INET);
		al_nfmsg_attr_str(b, NFTA_RULE_TABLE, name);
		al_nfmsg_attr_str(b, NFTA_RULE_CHAIN, "out");
		size_t list = al_nfmsg_nest(b, NFTA_RULE_EXPRESSIONS);
		meta(b, NFT_META_SKUID);
		cmp_eq(b, &u, sizeof(u));
		if (i < n) {
			uint16_t port = htons(ports[i]);
			meta(b, NFT_META_NFPROTO);
			cmp_eq(b, &v4, 1);
			payload(b, NFT_PAYLOAD_NETWORK_HEADER, 16, 4);
			cmp_eq(b, &lo, 4);
			meta(b, NFT_META_L4PROTO);
			cmp_eq(b, &tcp, 1);
			payload(b, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2);
			cmp_eq(b, &port, 2);
		}
		verdict(b, i < n ? NF_ACCEPT : NF_DROP);
		al_nfmsg_nest_end(b, list);
	}
}

/* Send the batch (the last message before its end asks for an ack) and
 * read the kernel's answers: an error for any message it refused, then
 * the ack, which means the whole batch was committed. */
static int send_batch(struct al_nfmsg *b, const char *what, struct al_error *err)
{
	struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
	alignas(struct nlmsghdr) char ans[8192];
	int one = 1;

	b->msg->nlmsg_flags |= NLM_F_ACK;
	uint32_t last = b->msg->nlmsg_seq;
	al_nfmsg_begin(b, NFNL_MSG_BATCH_END, 0, AF_UNSPEC);
	al_nfmsg_end(b);
	if (b->overflow)
		return al_error_set(err, EMSGSIZE, "%s: the nftables batch is too large", what);
	_cleanup_close_ int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
	if (fd < 0)
		return al_error_setsys(err, errno, "%s: a NETLINK_NETFILTER socket", what);
	(void)setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof(one));
	if (sendto(fd, b->buf, b->len, 0, (struct sockaddr *)&kernel, sizeof(kernel)) !=
	    (ssize_t)b->len)
		return al_error_setsys(err, errno, "%s: sending the nftables batch", what);
	for (;;) {
		ssize_t got = recv(fd, ans, sizeof(ans), MSG_DONTWAIT);
		if (got < 0)
			return al_error_setsys(err, errno == EAGAIN ? EPROTO : errno,
					       "%s: nf_tables did not confirm the batch", what);
		size_t left = (size_t)got;
		for (struct nlmsghdr *nh = (struct nlmsghdr *)ans; NLMSG_OK(nh, left);
		     nh = NLMSG_NEXT(nh, left)) {
			if (nh->nlmsg_type != NLMSG_ERROR ||
			    nh->nlmsg_len < NLMSG_LENGTH(sizeof(struct nlmsgerr)))
				continue;
			const struct nlmsgerr *e = NLMSG_DATA(nh);
			if (e->error < 0)
				return al_error_setsys(err, -e->error,
						       "%s: nf_tables refused message %u of the "
						       "batch",
						       what, nh->nlmsg_seq);
			if (nh->nlmsg_seq == last)
				return 0;
		}
	}
}

int al_process_nft_add(uid_t uid, const uint16_t *ports, size_t n, struct al_error *err)
{
	_cleanup_free_ struct al_nfmsg *b = xcalloc(1, sizeof(*b));
	char name[64];

	al_process_nft_name(uid, name, sizeof(name));
	al_nfmsg_init(b, 1);
	build(b, name, uid, ports, n);
	return send_batch(b, "backend process: the run's nftables table", err);
}

int al_process_nft_del(uid_t uid, struct al_error *err)
{
	_cleanup_free_ struct al_nfmsg *b = xcalloc(1, sizeof(*b));
	char name[64];

	al_process_nft_name(uid, name, sizeof(name));
	al_nfmsg_init(b, 1);
	al_nfmsg_begin(b, NFNL_MSG_BATCH_BEGIN, 0, AF_UNSPEC);
	table_msgs(b, name, false);
	return send_batch(b, "backend process: removing the run's nftables table", err);
}

/* The uid in each of our tables' names, from a dump of the inet tables. */
static int list_tables(uid_t *uids, size_t max, size_t *n, struct al_error *err)
{
	struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
	alignas(struct nlmsghdr) char ans[16384];
	struct al_nfmsg req;
	size_t plen = strlen(AL_PROCESS_NFT_PREFIX);

	al_nfmsg_init(&req, 1);
	al_nfmsg_begin(&req, al_nft_type(NFT_MSG_GETTABLE), NLM_F_DUMP, NFPROTO_INET);
	al_nfmsg_end(&req);

	*n = 0;
	_cleanup_close_ int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
	if (fd < 0)
		return al_error_setsys(err, errno, "gc: a NETLINK_NETFILTER socket");
	if (sendto(fd, req.buf, req.len, 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0)
		return al_error_setsys(err, errno, "gc: listing nftables tables");
	for (;;) {
		ssize_t got = recv(fd, ans, sizeof(ans), 0);
		if (got < 0)
			return al_error_setsys(err, errno, "gc: reading nftables tables");
		size_t left = (size_t)got;
		for (struct nlmsghdr *nh = (struct nlmsghdr *)ans; NLMSG_OK(nh, left);
		     nh = NLMSG_NEXT(nh, left)) {
			if (nh->nlmsg_type == NLMSG_DONE)
				return 0;
			if (nh->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e = NLMSG_DATA(nh);
				return e->error ? al_error_setsys(err, -e->error,
								  "gc: listing nftables tables")
						: 0;
			}
			const void *name;
			size_t sl;
			char *end;
			if (al_nfmsg_attr_get(nh, NFTA_TABLE_NAME, &name, &sl) && sl > plen &&
			    memchr(name, '\0', sl) &&
			    strncmp(name, AL_PROCESS_NFT_PREFIX, plen) == 0) {
				unsigned long v = strtoul((const char *)name + plen, &end, 10);
				if (*end == '\0' && *n < max)
					uids[(*n)++] = (uid_t)v;
			}
		}
	}
}

int al_process_nft_gc(struct al_error *err)
{
	uid_t uids[256];
	size_t n;
	int removed = 0, r;

	if ((r = list_tables(uids, AL_ARRAY_SIZE(uids), &n, err)) < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		/* A live run holds its slot's lock for as long as its table
		 * lives; a dead run's slot is held here while the table goes,
		 * so that no new run can take it meanwhile. */
		if (uids[i] < AL_IDS_POOL_BASE)
			continue;
		unsigned slot = (uids[i] - AL_IDS_POOL_BASE) / AL_IDS_SLOT_SIZE;
		struct al_id_slot held;
		struct al_error e = {0};
		bool made;
		if (slot >= AL_IDS_POOL_SLOTS || al_ids_hold(NULL, slot, &held, &made, &e) <= 0) {
			if (e.msg[0])
				al_warn("gc: %s", e.msg);
			continue;
		}
		if (al_process_nft_del(uids[i], &e) < 0)
			al_warn("gc: %s", e.msg);
		else
			removed++;
		al_ids_release(&held, made);
	}
	return removed;
}
