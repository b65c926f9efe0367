/* nf_tables netlink messages built at run time into a fixed buffer, and
 * read back: the few lines of netlink that airlock's run-time nftables
 * work needs (the process backend's table, the engine namespace's table
 * removal by handle), with no libnftnl in the binary (the capture's own
 * ruleset is built by libnftnl at build time: capture-gen.c). Nothing
 * here allocates or makes a system call. */
#pragma once

#include <linux/netlink.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A batch (or a single request) being built. Overflow is a programming
 * error the size checks catch: every message after it is dropped and
 * overflow says so (the largest airlock builds is a few hundred bytes). */
struct al_nfmsg {
	alignas(struct nlmsghdr) char buf[4096];
	size_t len;
	uint32_t seq; /* the next message's */
	struct nlmsghdr *msg;
	bool overflow;
};

/* An empty buffer whose first message has sequence number seq. */
void al_nfmsg_init(struct al_nfmsg *b, uint32_t seq);

/* nf_tables' message type msg (NFT_MSG_*) as netlink's. */
uint16_t al_nft_type(int msg);

/* Close the message being built and open one of type with flags
 * (NLM_F_REQUEST added) for family; the batch's begin and end
 * (NFNL_MSG_BATCH_*) are always AF_UNSPEC, for the nf_tables subsystem. */
void al_nfmsg_begin(struct al_nfmsg *b, uint16_t type, uint16_t flags, uint8_t family);

/* Close the message being built (its length set). */
void al_nfmsg_end(struct al_nfmsg *b);

void al_nfmsg_attr(struct al_nfmsg *b, uint16_t type, const void *data, size_t len);
void al_nfmsg_attr_str(struct al_nfmsg *b, uint16_t type, const char *s); /* with its NUL */
void al_nfmsg_attr_be32(struct al_nfmsg *b, uint16_t type, uint32_t v);
void al_nfmsg_attr_be64(struct al_nfmsg *b, uint16_t type, uint64_t v);

/* A nested attribute: its offset, closed by al_nfmsg_nest_end(). */
size_t al_nfmsg_nest(struct al_nfmsg *b, uint16_t type);
void al_nfmsg_nest_end(struct al_nfmsg *b, size_t at);

/* In an nf_tables message from the kernel (nh, nh->nlmsg_len bytes, which
 * the caller has checked lie in its buffer): the top-level attribute of
 * type (NLA_TYPE_MASK applied), its payload in *data and *len. A
 * malformed attribute ends the search. */
bool al_nfmsg_attr_get(const struct nlmsghdr *nh, uint16_t type, const void **data, size_t *len);
