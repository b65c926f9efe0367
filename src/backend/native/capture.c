/* The transparent capture: one nfnetlink batch, sent by the supervisor on
 * a socket of the sandbox's network namespace while its child sets up. */
#include "backend/native/capture.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

static const char *what_of(const struct al_capture_ruleset *rules, uint32_t seq)
{
	for (size_t i = 0; i < rules->n_msgs; i++)
		if (rules->msgs[i].seq == seq)
			return rules->msgs[i].what;
	return "batch";
}

/* The message after nh, or NULL: unlike NLMSG_NEXT, never steps past
 * what is left (an unaligned last length would wrap it). */
static struct nlmsghdr *next_msg(struct nlmsghdr *nh, size_t *left)
{
	size_t step = NLMSG_ALIGN(nh->nlmsg_len);

	if (step >= *left)
		return NULL;
	*left -= step;
	return (struct nlmsghdr *)((char *)nh + step);
}

/* Read the kernel's answers, queued after it committed or aborted the
 * batch, in batch order: an error for each message it refused (a failed
 * commit is reported against the batch's start, seq 1, before anything
 * else), and the acknowledgement the last message asked for, which so
 * means the whole batch was committed. */
static int read_answers(int fd, const struct al_capture_ruleset *rules, struct al_error *err)
{
	const uint32_t last = rules->msgs[rules->n_msgs - 1].seq;
	alignas(struct nlmsghdr) char buf[8192];

	for (;;) {
		/* nfnetlink handles the batch inside sendto(): every answer is
		 * queued by now, and waiting could only hang. */
		ssize_t got = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (got < 0)
			return al_error_setsys(err, errno == EAGAIN ? EPROTO : errno,
					       "gateway: the kernel did not confirm the "
					       "transparent-capture rules");
		size_t left = (size_t)got;
		for (struct nlmsghdr *nh = (struct nlmsghdr *)buf; nh && NLMSG_OK(nh, left);
		     nh = next_msg(nh, &left)) {
			if (nh->nlmsg_type != NLMSG_ERROR)
				continue;
			if (nh->nlmsg_len < NLMSG_LENGTH(sizeof(struct nlmsgerr)))
				return al_error_set(err, EPROTO,
						    "gateway: a truncated answer from nf_tables");
			const struct nlmsgerr *e = NLMSG_DATA(nh);
			if (e->error < 0)
				return al_error_setsys(
				    err, -e->error,
				    "gateway: the kernel refused the transparent capture's %s",
				    what_of(rules, nh->nlmsg_seq));
			if (nh->nlmsg_seq == last)
				return 0;
		}
	}
}

int al_capture_install(int fd, struct al_error *err)
{
	return al_capture_apply(fd, &al_capture_rules, err);
}

int al_capture_apply(int fd, const struct al_capture_ruleset *rules, struct al_error *err)
{
	struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
	int one = 1;

	/* A batch the kernel refused may have left answers to later messages
	 * of it (each failing one is answered): not this batch's. */
	alignas(struct nlmsghdr) char old[4096];
	while (recv(fd, old, sizeof(old), MSG_DONTWAIT) > 0)
		;
	/* Errors without a copy of the request: smaller answers. */
	(void)setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof(one));
	ssize_t sent =
	    sendto(fd, rules->batch, rules->size, 0, (struct sockaddr *)&kernel, sizeof(kernel));
	if (sent != (ssize_t)rules->size)
		return al_error_setsys(err, sent < 0 ? errno : EMSGSIZE,
				       "gateway: sending the transparent-capture rules");
	return read_answers(fd, rules, err);
}

/* A message's header and its nfgenmsg, family's, at buf + off. */
static size_t put_msg(unsigned char *buf, size_t off, uint16_t type, uint16_t flags, uint32_t seq,
		      uint8_t family)
{
	struct nlmsghdr nh = {
	    .nlmsg_type = type, .nlmsg_flags = NLM_F_REQUEST | flags, .nlmsg_seq = seq};
	struct nfgenmsg g = {.nfgen_family = family, .version = NFNETLINK_V0};

	if (type == NFNL_MSG_BATCH_BEGIN || type == NFNL_MSG_BATCH_END)
		g.res_id = htons(NFNL_SUBSYS_NFTABLES);
	memcpy(buf + off, &nh, sizeof(nh));
	memcpy(buf + off + NLMSG_HDRLEN, &g, sizeof(g));
	return off + NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(g));
}

/* An attribute at buf + off: where the next one goes. */
static size_t put_attr(unsigned char *buf, size_t off, uint16_t type, const void *data, size_t len)
{
	struct nlattr a = {.nla_type = type, .nla_len = (uint16_t)(NLA_HDRLEN + len)};

	memcpy(buf + off, &a, sizeof(a));
	memcpy(buf + off + NLA_HDRLEN, data, len);
	return off + NLA_ALIGN(NLA_HDRLEN + len);
}

/* The length of the message that starts at buf + start and ends at end. */
static void set_len(unsigned char *buf, size_t start, size_t end)
{
	uint32_t len = (uint32_t)(end - start);
	memcpy(buf + start + offsetof(struct nlmsghdr, nlmsg_len), &len, sizeof(len));
}

static const char *family_name(uint8_t family)
{
	return family == NFPROTO_IPV6 ? "ip6" : "ip";
}

int al_capture_table_handle(int fd, uint8_t family, uint64_t *handle, struct al_error *err)
{
	struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
	alignas(struct nlmsghdr) unsigned char req[64] = {0};
	alignas(struct nlmsghdr) char buf[8192];
	bool found = false;

	while (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0)
		;
	size_t n =
	    put_msg(req, 0, (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETTABLE, NLM_F_ACK, 1, family);
	n = put_attr(req, n, NFTA_TABLE_NAME, AL_CAPTURE_TABLE, sizeof(AL_CAPTURE_TABLE));
	set_len(req, 0, n);
	if (sendto(fd, req, n, 0, (struct sockaddr *)&kernel, sizeof(kernel)) != (ssize_t)n)
		return al_error_setsys(err, errno, "asking nf_tables for table %s %s",
				       family_name(family), AL_CAPTURE_TABLE);
	for (;;) {
		/* A get is answered inside sendto(), as a batch is. */
		ssize_t got = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (got < 0)
			return al_error_setsys(err, errno == EAGAIN ? EPROTO : errno,
					       "nf_tables did not answer for table %s %s",
					       family_name(family), AL_CAPTURE_TABLE);
		size_t left = (size_t)got;
		for (struct nlmsghdr *nh = (struct nlmsghdr *)buf; nh && NLMSG_OK(nh, left);
		     nh = next_msg(nh, &left)) {
			if (nh->nlmsg_type == NLMSG_ERROR) {
				if (nh->nlmsg_len < NLMSG_LENGTH(sizeof(struct nlmsgerr)))
					return al_error_set(err, EPROTO,
							    "a truncated answer from nf_tables");
				const struct nlmsgerr *e = NLMSG_DATA(nh);
				if (e->error < 0)
					return al_error_setsys(err, -e->error, "table %s %s",
							       family_name(family),
							       AL_CAPTURE_TABLE);
				if (!found)
					return al_error_set(err, EPROTO,
							    "nf_tables answered for table %s %s "
							    "without its handle",
							    family_name(family), AL_CAPTURE_TABLE);
				return 0;
			}
			if (nh->nlmsg_type != ((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWTABLE))
				continue;
			size_t off = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(struct nfgenmsg));
			while (off + NLA_HDRLEN <= nh->nlmsg_len) {
				struct nlattr a;
				memcpy(&a, (char *)nh + off, sizeof(a));
				if (a.nla_len < NLA_HDRLEN || off + a.nla_len > nh->nlmsg_len)
					break;
				if ((a.nla_type & NLA_TYPE_MASK) == NFTA_TABLE_HANDLE &&
				    a.nla_len == NLA_HDRLEN + sizeof(uint64_t)) {
					uint64_t be;
					memcpy(&be, (char *)nh + off + NLA_HDRLEN, sizeof(be));
					*handle = be64toh(be);
					found = true;
				}
				off += NLA_ALIGN(a.nla_len);
			}
		}
	}
}

int al_capture_remove_table(int fd, uint8_t family, uint64_t handle, struct al_error *err)
{
	alignas(struct nlmsghdr) unsigned char batch[128] = {0};
	char what[96];
	uint64_t be = htobe64(handle);

	size_t n = put_msg(batch, 0, NFNL_MSG_BATCH_BEGIN, 0, 1, AF_UNSPEC);
	set_len(batch, 0, n);
	size_t del = n;
	n = put_msg(batch, n, (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_DELTABLE, NLM_F_ACK, 2, family);
	n = put_attr(batch, n, NFTA_TABLE_HANDLE, &be, sizeof(be));
	set_len(batch, del, n);
	size_t end = n;
	n = put_msg(batch, n, NFNL_MSG_BATCH_END, 0, 3, AF_UNSPEC);
	set_len(batch, end, n);
	snprintf(what, sizeof(what), "removal of table %s %s (handle %llu)", family_name(family),
		 AL_CAPTURE_TABLE, (unsigned long long)handle);
	const struct al_capture_msg msgs[] = {{2, what}};
	const struct al_capture_ruleset rules = {
	    .batch = batch, .size = n, .msgs = msgs, .n_msgs = 1};
	return al_capture_apply(fd, &rules, err);
}
