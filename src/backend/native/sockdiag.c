/* Socket memory of the sandbox's network namespace (sockdiag.h). */
#include "backend/native/sockdiag.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

uint64_t al_sockdiag_pending_bytes(void)
{
	char buf[32];
	int fd = open("/proc/sys/net/core/rmem_max", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	uint64_t max = 0;

	if (fd >= 0)
		close(fd);
	if (n > 0) {
		buf[n] = '\0';
		max = strtoull(buf, NULL, 10);
	}
	/* Unreadable: assume a large one, so waiting connections are added
	 * up early rather than never. */
	if (max == 0 || max > (1ull << 31))
		max = 1ull << 31;
	return 2 * max + AL_SOCKDIAG_FORCED_BYTES;
}

/* A connection not yet accepted: the kernel made it from a listener and no
 * file (so no inode) refers to it yet; ESTABLISHED, CLOSE_WAIT once the
 * peer closed, or SYN_RECV with TCP Fast Open. Every other socket of the
 * sandbox has a file and is charged to its cgroup; so are the sockets the
 * gateway accepted, to the supervisor's. */
static bool waiting(const struct inet_diag_msg *m)
{
	return m->idiag_inode == 0 &&
	       (m->idiag_state == TCP_ESTABLISHED || m->idiag_state == TCP_CLOSE_WAIT ||
		m->idiag_state == TCP_SYN_RECV);
}

static void add_socket(const struct nlmsghdr *nh, struct al_sockdiag_sum *sum)
{
	const struct inet_diag_msg *m = NLMSG_DATA(nh);
	unsigned len;
	const struct rtattr *a;

	if (nh->nlmsg_len < NLMSG_LENGTH(sizeof(*m))) {
		sum->error = EBADMSG;
		return;
	}
	if (m->idiag_state == TCP_LISTEN) {
		/* For a listener the kernel reports its accept queue's length
		 * in idiag_rqueue. */
		sum->listeners++;
		sum->pending += m->idiag_rqueue;
		return;
	}
	if (!waiting(m))
		return;
	len = nh->nlmsg_len - NLMSG_LENGTH(sizeof(*m));
	for (a = (const struct rtattr *)(m + 1); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
		if (a->rta_type != INET_DIAG_SKMEMINFO ||
		    (size_t)RTA_PAYLOAD(a) < (SK_MEMINFO_WMEM_QUEUED + 1) * sizeof(uint32_t))
			continue;
		const uint32_t *v = RTA_DATA(a);
		sum->bytes += (uint64_t)v[SK_MEMINFO_RMEM_ALLOC] + v[SK_MEMINFO_WMEM_QUEUED] +
			      v[SK_MEMINFO_FWD_ALLOC];
		sum->sockets++;
		return;
	}
}

void al_sockdiag_parse(const void *buf, size_t len, struct al_sockdiag_sum *sum)
{
	const struct nlmsghdr *nh = buf;

	for (; NLMSG_OK(nh, len); nh = NLMSG_NEXT(nh, len)) {
		if (nh->nlmsg_type == NLMSG_DONE) {
			sum->done = true;
			return;
		}
		if (nh->nlmsg_type == NLMSG_ERROR) {
			const struct nlmsgerr *e = NLMSG_DATA(nh);
			sum->error = nh->nlmsg_len >= NLMSG_LENGTH(sizeof(*e)) && e->error < 0
					 ? -e->error
					 : EBADMSG;
			return;
		}
		if (nh->nlmsg_type != SOCK_DIAG_BY_FAMILY)
			continue;
		add_socket(nh, sum);
		if (sum->error)
			return;
	}
	if (len != 0)
		sum->error = EBADMSG; /* a truncated message */
}

static void add(struct al_sockdiag_sum *sum, const struct al_sockdiag_sum *part)
{
	sum->bytes += part->bytes;
	sum->sockets += part->sockets;
	sum->listeners += part->listeners;
	sum->pending += part->pending;
}

/* 1 when the total reached stop before the dump ended: the socket then
 * still holds the rest of it. */
static int dump_family(int fd, uint8_t family, bool listeners_only, uint64_t stop,
		       size_t max_listeners, struct al_sockdiag_sum *sum)
{
	struct {
		struct nlmsghdr nh;
		struct inet_diag_req_v2 req;
	} msg = {
	    .nh = {.nlmsg_len = sizeof(msg),
		   .nlmsg_type = SOCK_DIAG_BY_FAMILY,
		   .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP},
	    .req = {.sdiag_family = family,
		    .sdiag_protocol = IPPROTO_TCP,
		    .idiag_ext = 1 << (INET_DIAG_SKMEMINFO - 1),
		    .idiag_states = listeners_only ? 1u << TCP_LISTEN : ~0u},
	};
	struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
	/* On the stack, per call: each run's monitor dumps its own sandbox's
	 * sockets, maybe in another thread of the same process. */
	uint64_t buf[16384 / sizeof(uint64_t)]; /* aligned for nlmsghdr */
	struct al_sockdiag_sum part = {0};

	if (sendto(fd, &msg, sizeof(msg), 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0)
		return -errno;
	while (!part.done && !part.error) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EPIPE;
		al_sockdiag_parse(buf, (size_t)n, &part);
		if ((stop && sum->bytes + part.bytes >= stop) ||
		    (max_listeners && sum->listeners + part.listeners > max_listeners)) {
			add(sum, &part);
			return 1;
		}
	}
	add(sum, &part);
	return part.error ? -part.error : 0;
}

int al_sockdiag_tcp(int fd, bool listeners_only, uint64_t stop, size_t max_listeners,
		    struct al_sockdiag_sum *ret)
{
	struct al_sockdiag_sum sum = {0};
	int r;

	if ((r = dump_family(fd, AF_INET, listeners_only, stop, max_listeners, &sum)) == 0)
		r = dump_family(fd, AF_INET6, listeners_only, stop, max_listeners, &sum);
	if (r < 0)
		return r;
	sum.done = r == 0;
	*ret = sum;
	return r;
}
