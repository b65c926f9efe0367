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

#include "net/nfmsg.h"

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

static const char *family_name(uint8_t family)
{
	return family == NFPROTO_IPV6 ? "ip6" : "ip";
}

int al_capture_table_handle(int fd, uint8_t family, uint64_t *handle, struct al_error *err)
{
	struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
	struct al_nfmsg req;
	alignas(struct nlmsghdr) char buf[8192];
	bool found = false;

	while (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0)
		;
	al_nfmsg_init(&req, 1);
	al_nfmsg_begin(&req, al_nft_type(NFT_MSG_GETTABLE), NLM_F_ACK, family);
	al_nfmsg_attr_str(&req, NFTA_TABLE_NAME, AL_CAPTURE_TABLE);
	al_nfmsg_end(&req);
	if (sendto(fd, req.buf, req.len, 0, (struct sockaddr *)&kernel, sizeof(kernel)) !=
	    (ssize_t)req.len)
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
			const void *data;
			size_t len;
			uint64_t be;
			if (nh->nlmsg_type == al_nft_type(NFT_MSG_NEWTABLE) &&
			    al_nfmsg_attr_get(nh, NFTA_TABLE_HANDLE, &data, &len) &&
			    len == sizeof(be)) {
				memcpy(&be, data, sizeof(be));
				*handle = be64toh(be);
				found = true;
			}
		}
	}
}

int al_capture_remove_table(int fd, uint8_t family, uint64_t handle, struct al_error *err)
{
	struct al_nfmsg b;
	char what[96];

	al_nfmsg_init(&b, 1);
	al_nfmsg_begin(&b, NFNL_MSG_BATCH_BEGIN, 0, AF_UNSPEC);
	al_nfmsg_begin(&b, al_nft_type(NFT_MSG_DELTABLE), NLM_F_ACK, family); /* seq 2 */
	al_nfmsg_attr_be64(&b, NFTA_TABLE_HANDLE, handle);
	al_nfmsg_begin(&b, NFNL_MSG_BATCH_END, 0, AF_UNSPEC);
	al_nfmsg_end(&b);
	snprintf(what, sizeof(what), "removal of table %s %s (handle %llu)", family_name(family),
		 AL_CAPTURE_TABLE, (unsigned long long)handle);
	const struct al_capture_msg msgs[] = {{2, what}};
	const struct al_capture_ruleset rules = {
	    .batch = (const unsigned char *)b.buf, .size = b.len, .msgs = msgs, .n_msgs = 1};
	return al_capture_apply(fd, &rules, err);
}
