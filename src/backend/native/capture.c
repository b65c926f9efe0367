/* The transparent capture: one nfnetlink batch, sent by the supervisor on
 * a socket of the sandbox's network namespace while its child sets up. */
#include "backend/native/capture.h"

#include <errno.h>
#include <linux/netlink.h>
#include <stdalign.h>
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
