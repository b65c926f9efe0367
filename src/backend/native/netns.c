/* The gateway's side of a sandbox's network namespace, made from inside it
 * (netns.h): lo up, the gateway's listeners on 127.0.0.1, the default
 * route over lo, a container's sysctls. */
#include "backend/native/netns.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/error.h"
#include "core/sys.h"
#include "policy/plan.h"

int al_netns_loopback_up(void)
{
	struct ifreq ifr = {0};
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), e = 0;

	if (fd < 0)
		return -errno;
	strcpy(ifr.ifr_name, "lo");
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0 ||
	    (ifr.ifr_flags |= IFF_UP, ioctl(fd, SIOCSIFFLAGS, &ifr) < 0))
		e = errno;
	close(fd);
	return -e;
}

int al_netns_listen(enum al_gateway_listener kind)
{
	const struct al_listener_info *li = &al_gateway_listeners[kind];
	int type = li->stream ? SOCK_STREAM : SOCK_DGRAM;
	struct sockaddr_in sin = {.sin_family = AF_INET,
				  .sin_port = htons(li->port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int one = 1, fd = socket(AF_INET, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	/* Where the client speaks first, wake the gateway only once it has
	 * (seconds; after that the connection is accepted anyway). */
	int defer = li->stream && li->client_first ? 10 : 0;

	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
	    (type == SOCK_STREAM && listen(fd, 128) < 0) ||
	    (defer && setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &defer, sizeof(defer)) < 0)) {
		int e = errno;
		close(fd);
		return -e;
	}
	return fd;
}

/* "ip route add default dev lo src 127.0.0.1" as one fixed rtnetlink
 * message: a connect() to any address then leaves the socket layer and
 * meets the supervisor's nftables redirect (no dummy link type needed, and
 * rootless works). The preferred source matters: without it the route has
 * no usable source address and nothing is sent. */
int al_netns_default_route(void)
{
	return al_netns_route_lo(0, 0, true);
}

int al_netns_route_lo(uint32_t dst, int prefix_len, bool add)
{
	struct {
		struct nlmsghdr nh;
		struct rtmsg rt;
		struct rtattr oif_attr;
		int oif;
		struct rtattr src_attr;
		struct in_addr src;
		struct rtattr dst_attr;
		struct in_addr dst;
	} req = {
	    .nh = {.nlmsg_len = sizeof(req),
		   .nlmsg_type = add ? RTM_NEWROUTE : RTM_DELROUTE,
		   .nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | (add ? NLM_F_CREATE | NLM_F_EXCL : 0),
		   .nlmsg_seq = 1},
	    .rt = {.rtm_family = AF_INET,
		   .rtm_dst_len = (unsigned char)prefix_len,
		   .rtm_table = RT_TABLE_MAIN,
		   .rtm_protocol = RTPROT_BOOT,
		   .rtm_scope = RT_SCOPE_LINK,
		   .rtm_type = RTN_UNICAST},
	    .oif_attr = {.rta_len = RTA_LENGTH(sizeof(int)), .rta_type = RTA_OIF},
	    .oif = (int)if_nametoindex("lo"),
	    .src_attr = {.rta_len = RTA_LENGTH(sizeof(struct in_addr)), .rta_type = RTA_PREFSRC},
	    .src = {htonl(INADDR_LOOPBACK)},
	    .dst_attr = {.rta_len = RTA_LENGTH(sizeof(struct in_addr)), .rta_type = RTA_DST},
	    .dst = {htonl(dst)},
	};
	struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
	struct {
		struct nlmsghdr nh;
		struct nlmsgerr err;
	} ack;
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE), e = 0;

	if (fd < 0)
		return -errno;
	if (sendto(fd, &req, sizeof(req), 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0 ||
	    recv(fd, &ack, sizeof(ack), 0) < (ssize_t)sizeof(ack))
		e = errno ? errno : EPROTO;
	else if (ack.nh.nlmsg_type == NLMSG_ERROR && ack.err.error < 0)
		e = -ack.err.error;
	close(fd);
	return -e;
}

int al_netns_write_sysctls(char *const *kv, struct al_error *err)
{
	char path[256];

	for (size_t i = 0; kv && kv[i] && kv[i + 1]; i += 2) {
		if (!al_plan_sysctl_allowed(kv[i]))
			return al_error_set(err, EPERM, "sysctl %s", kv[i]);
		int n = snprintf(path, sizeof(path), "/proc/sys/%s", kv[i]);
		for (int k = 10; k < n; k++)
			if (path[k] == '.')
				path[k] = '/';
		int r = al_write_file_at(AT_FDCWD, path, kv[i + 1], strlen(kv[i + 1]));
		if (r < 0)
			return al_error_setsys(err, -r, "sysctl %s = %s", kv[i], kv[i + 1]);
	}
	return 0;
}
