/* Build-time generator: builds the transparent capture's nftables ruleset
 * as one nfnetlink batch with libnftnl and prints it as a C array, so a
 * run installs it with one sendmsg() from the supervisor (on a socket the
 * sandbox's child opened in its network namespace) instead of executing
 * nft (which loads libnftables, parses, and reads the kernel's
 * ruleset first). Each rule is written here twice: as the nft text a
 * person reads (and that tests/unit/test_capture.c loads with the real nft
 * to compare listings) and as the expressions that text compiles to.
 * Five rulesets come out: the capture of airlock's own network namespace
 * (al_capture_*), the capture and the drop-only ruleset for a network
 * namespace an engine made and the container joins (al_capture_joined_*,
 * al_capture_joined_drop_*: the table is made exclusively, and replies
 * of connections made from outside pass), and the removal of the
 * latter, one table each (al_capture_remove_ip_*, al_capture_remove_ip6_*).
 * This is a build-time program: its file-scope state (the variant being
 * built, the batch) never lives in the library or a daemon.
 * Usage: capture-gen OUT.c */
#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/expr.h>
#include <libnftnl/object.h>
#include <libnftnl/rule.h>
#include <libnftnl/table.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_conntrack_common.h>
#include <linux/netfilter/nf_nat.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <netinet/in.h>

#include "backend/native/capture.h"
#include "net/layout.h"

#define TABLE AL_CAPTURE_TABLE
#define PORT  AL_GATEWAY_TRANSPARENT_PORT

static char buf[16384];
static struct mnl_nlmsg_batch *batch;
static uint32_t seq = 1;
static FILE *out;
static struct nlmsghdr *last_msg;

/* What each message of the batch makes, by sequence number, for the
 * error a failing install reports. */
static struct {
	uint32_t seq;
	char what[160];
} made[64];
static size_t n_made;

static void die(const char *what)
{
	fprintf(stderr, "capture-gen: %s\n", what);
	exit(1);
}

static struct nlmsghdr *begin_msg(uint16_t type, uint16_t family, uint16_t flags, const char *what)
{
	if (n_made == sizeof(made) / sizeof(made[0]))
		die("too many messages");
	made[n_made].seq = seq;
	snprintf(made[n_made].what, sizeof(made[n_made].what), "%s", what);
	n_made++;
	/* Only the last message asks for an answer: errors come whether
	 * asked for or not, so its answer means the batch was committed. */
	last_msg =
	    nftnl_nlmsg_build_hdr(mnl_nlmsg_batch_current(batch), type, family, flags, seq++);
	return last_msg;
}

static void next_msg(void)
{
	if (!mnl_nlmsg_batch_next(batch))
		die("batch buffer too small");
}

/* The variant being built (see the top). */
static bool joined;

static void table(uint16_t family, const char *what)
{
	struct nftnl_table *t = nftnl_table_alloc();
	/* In a namespace that is not airlock's own, a table of that name
	 * already there is another container's (or one a dead supervisor
	 * left): never share or change it. */
	uint16_t flags = NLM_F_CREATE | (joined ? NLM_F_EXCL : 0);
	nftnl_table_set_u32(t, NFTNL_TABLE_FAMILY, family);
	nftnl_table_set_str(t, NFTNL_TABLE_NAME, TABLE);
	nftnl_table_set_u32(t, NFTNL_TABLE_FLAGS, 0);
	nftnl_table_nlmsg_build_payload(begin_msg(NFT_MSG_NEWTABLE, family, flags, what), t);
	nftnl_table_free(t);
	next_msg();
}

static void del_table(uint16_t family, const char *what)
{
	struct nftnl_table *t = nftnl_table_alloc();
	nftnl_table_set_u32(t, NFTNL_TABLE_FAMILY, family);
	nftnl_table_set_str(t, NFTNL_TABLE_NAME, TABLE);
	nftnl_table_nlmsg_build_payload(begin_msg(NFT_MSG_DELTABLE, family, 0, what), t);
	nftnl_table_free(t);
	next_msg();
}

static void chain(uint16_t family, const char *name, const char *type, int prio)
{
	char what[160];
	struct nftnl_chain *c = nftnl_chain_alloc();

	nftnl_chain_set_u32(c, NFTNL_CHAIN_FAMILY, family);
	nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, TABLE);
	nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, name);
	nftnl_chain_set_str(c, NFTNL_CHAIN_TYPE, type);
	nftnl_chain_set_u32(c, NFTNL_CHAIN_HOOKNUM, NF_INET_LOCAL_OUT);
	nftnl_chain_set_s32(c, NFTNL_CHAIN_PRIO, prio);
	nftnl_chain_set_u32(c, NFTNL_CHAIN_POLICY, NF_ACCEPT);
	snprintf(what, sizeof(what), "chain %s %s (type %s hook output priority %d)",
		 family == NFPROTO_IPV4 ? "ip" : "ip6", name, type, prio);
	nftnl_chain_nlmsg_build_payload(begin_msg(NFT_MSG_NEWCHAIN, family, NLM_F_CREATE, what), c);
	nftnl_chain_free(c);
	next_msg();
	fprintf(
	    out,
	    "\t\"  chain %s {\\n\"\n\t\"    type %s hook output priority %d; policy accept;\\n\"\n",
	    name, type, prio);
}

/* s inside a C string literal */
static void put_escaped(const char *s)
{
	for (; *s; s++)
		fprintf(out, *s == '"' || *s == '\\' ? "\\%c" : "%c", *s);
}

/* A rule: its nft text, then its expressions, then end_rule(). */
static struct nftnl_rule *rule;
static char rule_text[160];

static void begin_rule(const char *text)
{
	rule = nftnl_rule_alloc();
	snprintf(rule_text, sizeof(rule_text), "%s", text);
}

static void end_rule(uint16_t family, const char *chain_name)
{
	char what[240];

	nftnl_rule_set_u32(rule, NFTNL_RULE_FAMILY, family);
	nftnl_rule_set_str(rule, NFTNL_RULE_TABLE, TABLE);
	nftnl_rule_set_str(rule, NFTNL_RULE_CHAIN, chain_name);
	snprintf(what, sizeof(what), "rule in chain %s: %s", chain_name, rule_text);
	nftnl_rule_nlmsg_build_payload(
	    begin_msg(NFT_MSG_NEWRULE, family, NLM_F_CREATE | NLM_F_APPEND, what), rule);
	nftnl_rule_free(rule);
	next_msg();
	fprintf(out, "\t\"    ");
	put_escaped(rule_text);
	fprintf(out, "\\n\"\n");
}

static struct nftnl_expr *expr(const char *name)
{
	struct nftnl_expr *e = nftnl_expr_alloc(name);
	if (!e)
		die("libnftnl knows no such expression");
	nftnl_rule_add_expr(rule, e);
	return e;
}

static void payload(enum nft_payload_bases base, uint32_t offset, uint32_t len)
{
	struct nftnl_expr *e = expr("payload");
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_DREG, NFT_REG_1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_BASE, base);
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_OFFSET, offset);
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_LEN, len);
}

static void cmp(enum nft_cmp_ops op, const void *data, uint32_t len)
{
	struct nftnl_expr *e = expr("cmp");
	nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_SREG, NFT_REG_1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_OP, op);
	nftnl_expr_set(e, NFTNL_EXPR_CMP_DATA, data, len);
}

/* "ip daddr 127.0.0.0/8" (nft compares the first byte only) */
static void ip_daddr_loopback(enum nft_cmp_ops op)
{
	uint8_t net = 127;
	payload(NFT_PAYLOAD_NETWORK_HEADER, 16, 1);
	cmp(op, &net, 1);
}

/* "meta l4proto tcp" */
static void l4proto_tcp(enum nft_cmp_ops op)
{
	uint8_t tcp = IPPROTO_TCP;
	struct nftnl_expr *e = expr("meta");
	nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, NFT_META_L4PROTO);
	nftnl_expr_set_u32(e, NFTNL_EXPR_META_DREG, NFT_REG_1);
	cmp(op, &tcp, 1);
}

static void verdict(uint32_t v)
{
	struct nftnl_expr *e = expr("immediate");
	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, v);
}

static void verdict_drop(void)
{
	verdict(NF_DROP);
}

/* In a joined namespace, "ct direction reply accept" first in filter_out:
 * the engine's inbound (a published port, a probe, the pod's address)
 * gets its answers; a connection made from inside never has a reply
 * direction, its first packet being dropped (or redirected). */
static void replies_pass(uint16_t family, const char *chain_name)
{
	uint8_t reply = IP_CT_DIR_REPLY;
	struct nftnl_expr *e;

	if (!joined)
		return;
	begin_rule("ct direction reply accept");
	e = expr("ct");
	nftnl_expr_set_u32(e, NFTNL_EXPR_CT_KEY, NFT_CT_DIRECTION);
	nftnl_expr_set_u32(e, NFTNL_EXPR_CT_DREG, NFT_REG_1);
	cmp(NFT_CMP_EQ, &reply, 1);
	verdict(NF_ACCEPT);
	end_rule(family, chain_name);
}

/* Whatever else is not for loopback is dropped, v4 (the ip table's
 * filter_out, opened here) and v6 (a table of its own). */
static void drop_rest(void)
{
	chain(NFPROTO_IPV4, "filter_out", "filter", 0);
	replies_pass(NFPROTO_IPV4, "filter_out");
	begin_rule("ip daddr != 127.0.0.0/8 drop");
	ip_daddr_loopback(NFT_CMP_NEQ);
	verdict_drop();
	end_rule(NFPROTO_IPV4, "filter_out");
	fprintf(out, "\t\"  }\\n\"\n\t\"}\\n\"\n");

	fprintf(out, "\t\"table ip6 " TABLE " {\\n\"\n");
	table(NFPROTO_IPV6, "table ip6 " TABLE);
	chain(NFPROTO_IPV6, "filter_out", "filter", 0);
	replies_pass(NFPROTO_IPV6, "filter_out");
	begin_rule("ip6 daddr != ::1 drop");
	payload(NFT_PAYLOAD_NETWORK_HEADER, 24, 16);
	cmp(NFT_CMP_NEQ, &in6addr_loopback, sizeof(in6addr_loopback));
	verdict_drop();
	end_rule(NFPROTO_IPV6, "filter_out");
	fprintf(out, "\t\"  }\\n\"\n\t\"}\\n\";\n\n");
}

/* The nat table makes the kernel track every connection in the sandbox's
 * network namespace, in memory no cgroup is charged for: raw_out takes
 * loopback traffic out of tracking (all but the transparent listener's
 * replies, which the redirect translates back), ct_out gives redirected
 * connections short timeouts once they are closing or never answered
 * (half-closed ones keep the kernel's: a server may still be answering),
 * and nat_out takes at most 5,000 new redirected connections a second: at
 * most about 25,000 entries (6 MB) linger (docs/security.md, "Kernel
 * memory"). */
static void build_capture(const char *prefix)
{
	const uint16_t port = htons(PORT);
	const uint32_t localhost = htonl(INADDR_LOOPBACK);
	char text[160];
	struct nftnl_expr *e;

	fprintf(out, "const char %s_nft_text[] =\n\t\"table ip " TABLE " {\\n\"\n", prefix);
	table(NFPROTO_IPV4, "table ip " TABLE);

	/* Short timeouts for redirected connections that are closing or
	 * never answered; the other states keep the kernel's defaults,
	 * which the object must carry (an absent state would be 0). */
	uint32_t timeouts[NFTNL_CTTIMEOUT_TCP_MAX] = {
	    [NFTNL_CTTIMEOUT_TCP_SYN_SENT] = 5,		[NFTNL_CTTIMEOUT_TCP_SYN_RECV] = 5,
	    [NFTNL_CTTIMEOUT_TCP_ESTABLISHED] = 432000, [NFTNL_CTTIMEOUT_TCP_FIN_WAIT] = 120,
	    [NFTNL_CTTIMEOUT_TCP_CLOSE_WAIT] = 60,	[NFTNL_CTTIMEOUT_TCP_LAST_ACK] = 2,
	    [NFTNL_CTTIMEOUT_TCP_TIME_WAIT] = 1,	[NFTNL_CTTIMEOUT_TCP_CLOSE] = 1,
	    [NFTNL_CTTIMEOUT_TCP_SYN_SENT2] = 120,	[NFTNL_CTTIMEOUT_TCP_RETRANS] = 300,
	    [NFTNL_CTTIMEOUT_TCP_UNACK] = 300,
	};
	struct nftnl_obj *o = nftnl_obj_alloc();
	nftnl_obj_set_u32(o, NFTNL_OBJ_FAMILY, NFPROTO_IPV4);
	nftnl_obj_set_str(o, NFTNL_OBJ_TABLE, TABLE);
	nftnl_obj_set_str(o, NFTNL_OBJ_NAME, "closing");
	nftnl_obj_set_u32(o, NFTNL_OBJ_TYPE, NFT_OBJECT_CT_TIMEOUT);
	nftnl_obj_set_u16(o, NFTNL_OBJ_CT_TIMEOUT_L3PROTO, NFPROTO_IPV4);
	nftnl_obj_set_u8(o, NFTNL_OBJ_CT_TIMEOUT_L4PROTO, IPPROTO_TCP);
	nftnl_obj_set_data(o, NFTNL_OBJ_CT_TIMEOUT_ARRAY, timeouts, sizeof(timeouts));
	nftnl_obj_nlmsg_build_payload(begin_msg(NFT_MSG_NEWOBJ, NFPROTO_IPV4, NLM_F_CREATE,
						"ct timeout closing (needs the kernel's "
						"nf_conntrack timeout support)"),
				      o);
	nftnl_obj_free(o);
	next_msg();
	fprintf(out, "\t\"  ct timeout closing {\\n\"\n"
		     "\t\"    protocol tcp;\\n\"\n"
		     "\t\"    l3proto ip;\\n\"\n"
		     "\t\"    policy = { syn_sent : 5, syn_recv : 5, last_ack : 2, time_wait : 1, "
		     "close : 1 }\\n\"\n"
		     "\t\"  }\\n\"\n");

	/* Loopback traffic leaves connection tracking, but for the
	 * transparent listener's replies, which the redirect translates. */
	chain(NFPROTO_IPV4, "raw_out", "filter", -300);
	begin_rule("ip daddr 127.0.0.0/8 meta l4proto != tcp notrack");
	ip_daddr_loopback(NFT_CMP_EQ);
	l4proto_tcp(NFT_CMP_NEQ);
	expr("notrack");
	end_rule(NFPROTO_IPV4, "raw_out");
	begin_rule("ip daddr 127.0.0.0/8 ip saddr != 127.0.0.1 notrack");
	ip_daddr_loopback(NFT_CMP_EQ);
	payload(NFT_PAYLOAD_NETWORK_HEADER, 12, 4);
	cmp(NFT_CMP_NEQ, &localhost, 4);
	expr("notrack");
	end_rule(NFPROTO_IPV4, "raw_out");
	snprintf(text, sizeof(text), "ip daddr 127.0.0.0/8 tcp sport != %u notrack", PORT);
	begin_rule(text);
	ip_daddr_loopback(NFT_CMP_EQ);
	l4proto_tcp(NFT_CMP_EQ);
	payload(NFT_PAYLOAD_TRANSPORT_HEADER, 0, 2);
	cmp(NFT_CMP_NEQ, &port, 2);
	expr("notrack");
	end_rule(NFPROTO_IPV4, "raw_out");
	fprintf(out, "\t\"  }\\n\"\n");

	chain(NFPROTO_IPV4, "ct_out", "filter", -150);
	begin_rule("meta l4proto tcp ct timeout set \"closing\"");
	l4proto_tcp(NFT_CMP_EQ);
	e = expr("objref");
	nftnl_expr_set_u32(e, NFTNL_EXPR_OBJREF_IMM_TYPE, NFT_OBJECT_CT_TIMEOUT);
	nftnl_expr_set_str(e, NFTNL_EXPR_OBJREF_IMM_NAME, "closing");
	end_rule(NFPROTO_IPV4, "ct_out");
	fprintf(out, "\t\"  }\\n\"\n");

	/* At most 5,000 new redirected connections a second (the conntrack
	 * entries they leave are charged to no cgroup), then the redirect. */
	chain(NFPROTO_IPV4, "nat_out", "nat", -100);
	begin_rule("ip daddr != 127.0.0.0/8 meta l4proto tcp limit rate over 5000/second burst "
		   "1000 packets drop");
	ip_daddr_loopback(NFT_CMP_NEQ);
	l4proto_tcp(NFT_CMP_EQ);
	e = expr("limit");
	nftnl_expr_set_u64(e, NFTNL_EXPR_LIMIT_RATE, 5000);
	nftnl_expr_set_u64(e, NFTNL_EXPR_LIMIT_UNIT, 1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_LIMIT_BURST, 1000);
	nftnl_expr_set_u32(e, NFTNL_EXPR_LIMIT_TYPE, NFT_LIMIT_PKTS);
	nftnl_expr_set_u32(e, NFTNL_EXPR_LIMIT_FLAGS, NFT_LIMIT_F_INV);
	verdict_drop();
	end_rule(NFPROTO_IPV4, "nat_out");
	snprintf(text, sizeof(text), "ip daddr != 127.0.0.0/8 meta l4proto tcp redirect to :%u",
		 PORT);
	begin_rule(text);
	ip_daddr_loopback(NFT_CMP_NEQ);
	l4proto_tcp(NFT_CMP_EQ);
	e = expr("immediate");
	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_1);
	nftnl_expr_set(e, NFTNL_EXPR_IMM_DATA, &port, sizeof(port));
	e = expr("redir");
	nftnl_expr_set_u32(e, NFTNL_EXPR_REDIR_REG_PROTO_MIN, NFT_REG_1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_REDIR_FLAGS, NF_NAT_RANGE_PROTO_SPECIFIED);
	end_rule(NFPROTO_IPV4, "nat_out");
	fprintf(out, "\t\"  }\\n\"\n");

	drop_rest();
}

/* A namespace that is not airlock's own: only what leaves is dropped,
 * nothing is redirected (the container has no gateway). */
static void build_drop(const char *prefix)
{
	fprintf(out, "const char %s_nft_text[] =\n\t\"table ip " TABLE " {\\n\"\n", prefix);
	table(NFPROTO_IPV4, "table ip " TABLE);
	drop_rest();
}

/* The removal of one table each: one already gone (ENOENT) does not keep
 * the other. */
static void build_remove_ip(const char *prefix)
{
	fprintf(out, "const char %s_nft_text[] =\n\t\"delete table ip " TABLE "\\n\";\n\n", prefix);
	del_table(NFPROTO_IPV4, "delete table ip " TABLE);
}

static void build_remove_ip6(const char *prefix)
{
	fprintf(out, "const char %s_nft_text[] =\n\t\"delete table ip6 " TABLE "\\n\";\n\n",
		prefix);
	del_table(NFPROTO_IPV6, "delete table ip6 " TABLE);
}

/* One ruleset as PREFIX_nft_text, PREFIX_batch, PREFIX_msgs and the
 * struct al_capture_ruleset PREFIX_rules that holds them. */
static void emit(const char *prefix, void (*build)(const char *prefix), bool in_joined)
{
	joined = in_joined;
	seq = 1;
	n_made = 0;
	batch = mnl_nlmsg_batch_start(buf, sizeof(buf));
	nftnl_batch_begin(mnl_nlmsg_batch_current(batch), seq++);
	next_msg();
	build(prefix);
	last_msg->nlmsg_flags |= NLM_F_ACK;
	nftnl_batch_end(mnl_nlmsg_batch_current(batch), seq++);
	next_msg();

	const unsigned char *bytes = mnl_nlmsg_batch_head(batch);
	size_t size = mnl_nlmsg_batch_size(batch);
	fprintf(out, "const unsigned char %s_batch[] = {", prefix);
	for (size_t i = 0; i < size; i++)
		fprintf(out, "%s0x%02x,", i % 12 ? " " : "\n\t", bytes[i]);
	fprintf(out, "\n};\n\nconst size_t %s_batch_size = %zu;\n\n", prefix, size);
	fprintf(out, "const struct al_capture_msg %s_msgs[] = {\n", prefix);
	for (size_t i = 0; i < n_made; i++) {
		fprintf(out, "\t{%u, \"", made[i].seq);
		put_escaped(made[i].what);
		fprintf(out, "\"},\n");
	}
	fprintf(out, "};\n\nconst size_t %s_n_msgs = %zu;\n\n", prefix, n_made);
	fprintf(out,
		"const struct al_capture_ruleset %s_rules = {\n\t%s_nft_text, %s_batch, %zu, "
		"%s_msgs, %zu};\n\n",
		prefix, prefix, prefix, size, prefix, n_made);
	mnl_nlmsg_batch_stop(batch);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s OUT.c\n", argv[0]);
		return 2;
	}
	out = fopen(argv[1], "w");
	if (!out) {
		perror(argv[1]);
		return 1;
	}
	fprintf(out, "/* Generated by capture-gen from src/backend/native/capture-gen.c; do not "
		     "edit. */\n"
		     "#include \"backend/native/capture.h\"\n\n");
	emit("al_capture", build_capture, false);
	emit("al_capture_joined", build_capture, true);
	emit("al_capture_joined_drop", build_drop, true);
	emit("al_capture_remove_ip", build_remove_ip, true);
	emit("al_capture_remove_ip6", build_remove_ip6, true);
	if (fclose(out) != 0) {
		perror(argv[1]);
		return 1;
	}
	return 0;
}
