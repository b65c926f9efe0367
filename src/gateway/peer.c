/* Whose is a connection's client: for a gateway on the host's loopback
 * (the process backend), which any local user can connect to, the peer's
 * socket is looked up by the connection's four-tuple through
 * NETLINK_SOCK_DIAG (inet_diag's exact lookup, no dump) and its owner's uid
 * compared with the run's. The netlink socket was opened by the backend on
 * the host and handed over (AL_GWP_PEERS): the confined gateway makes no
 * sockets, and sendto/recvfrom on one it has are in its allowlist. */
#include "gateway/conn.h"

#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <stdalign.h>
#include <string.h>
#include <sys/socket.h>

int gw_peer_uid(int diag, int fd, uid_t *uid)
{
	struct sockaddr_storage me, peer;
	socklen_t ml = sizeof(me), pl = sizeof(peer);
	struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
	struct {
		struct nlmsghdr nh;
		struct inet_diag_req_v2 r;
	} req = {.nh = {.nlmsg_len = sizeof(req),
			.nlmsg_type = SOCK_DIAG_BY_FAMILY,
			.nlmsg_flags = NLM_F_REQUEST,
			.nlmsg_seq = 1},
		 .r = {.sdiag_protocol = IPPROTO_TCP,
		       .idiag_states = ~0u,
		       .id.idiag_cookie = {INET_DIAG_NOCOOKIE, INET_DIAG_NOCOOKIE}}};
	alignas(struct nlmsghdr) char ans[1024];

	if (getsockname(fd, (struct sockaddr *)&me, &ml) < 0 ||
	    getpeername(fd, (struct sockaddr *)&peer, &pl) < 0)
		return -errno;
	if (me.ss_family != peer.ss_family)
		return -EAFNOSUPPORT;
	req.r.sdiag_family = (uint8_t)peer.ss_family;
	/* The peer's socket: its source is the peer, its destination us. */
	if (peer.ss_family == AF_INET) {
		const struct sockaddr_in *p = (const void *)&peer, *m = (const void *)&me;
		req.r.id.idiag_sport = p->sin_port;
		req.r.id.idiag_dport = m->sin_port;
		memcpy(req.r.id.idiag_src, &p->sin_addr, 4);
		memcpy(req.r.id.idiag_dst, &m->sin_addr, 4);
	} else if (peer.ss_family == AF_INET6) {
		const struct sockaddr_in6 *p = (const void *)&peer, *m = (const void *)&me;
		req.r.id.idiag_sport = p->sin6_port;
		req.r.id.idiag_dport = m->sin6_port;
		memcpy(req.r.id.idiag_src, &p->sin6_addr, 16);
		memcpy(req.r.id.idiag_dst, &m->sin6_addr, 16);
	} else {
		return -EAFNOSUPPORT;
	}
	if (sendto(diag, &req, sizeof(req), 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0)
		return -errno;
	/* The kernel answers inside sendto(): nothing to wait for. */
	ssize_t got = recv(diag, ans, sizeof(ans), MSG_DONTWAIT);
	if (got < 0)
		return -errno;
	const struct nlmsghdr *nh = (const void *)ans;
	if (!NLMSG_OK(nh, (size_t)got))
		return -EBADMSG;
	if (nh->nlmsg_type == NLMSG_ERROR) {
		const struct nlmsgerr *e = NLMSG_DATA(nh);
		return nh->nlmsg_len >= NLMSG_LENGTH(sizeof(*e)) && e->error < 0 ? e->error
										 : -EBADMSG;
	}
	if (nh->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
	    nh->nlmsg_len < NLMSG_LENGTH(sizeof(struct inet_diag_msg)))
		return -EBADMSG;
	*uid = ((const struct inet_diag_msg *)NLMSG_DATA(nh))->idiag_uid;
	return 0;
}
