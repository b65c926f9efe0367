/* The guest agent's network: the guest has no NIC. Loopback comes up,
 * 198.18.0.0/15 (the host DNS stub's fake addresses) is routed to it, and
 * the agent listens where the plan's proxy variables and the capture point
 * (config.h); each connection accepted becomes a stream on the channel
 * (OPEN with the address the guest connected to, then DATA/SHUT/CLOSE with
 * windows), each DNS datagram a DGRAM whose answer goes back to the
 * client that asked. The host side makes the same connection from the
 * native sandbox's network namespace, where the gateway is. */
#include "guest/agent.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_LISTEN   (2 * AL_GUEST_CONFIG_MAX_PORTS + 2)
#define DGRAM_MAX    4096
#define DGRAM_TTL_MS 5000

struct stream {
	uint32_t id; /* 0: free */
	int fd;
	bool ok;	     /* OPEN_OK came */
	bool rd_eof, wr_eof; /* the guest's side sent its end / the host's */
	uint32_t unacked;    /* DATA sent, no WINDOW back yet */
	uint8_t *buf;	     /* the host's DATA not yet written (≤ window) */
	size_t len;
	/* The host closed (its connection was reset) while DATA it sent before
	 * was still unwritten: the guest gets those bytes and an orderly end,
	 * as a peer's data comes before its reset, then the stream goes. */
	bool host_closed;
};

struct dgram {
	uint32_t id; /* 0: free */
	struct sockaddr_in from;
	long deadline;
};

struct agent_net {
	int listen[MAX_LISTEN], udp;
	size_t n_listen;
	struct stream s[AL_GUEST_MAX_STREAMS];
	struct dgram d[AL_GUEST_MAX_DGRAMS];
	uint32_t next_id;
	/* What each pollfd of the last agent_net_poll() was: a listener (its
	 * index), the UDP socket (-1) or a stream (its index + MAX_LISTEN). */
	int what[AGENT_MAX_FDS];
};

static long now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static int lo_up(void)
{
	struct ifreq ifr = {0};
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), r = 0;
	strcpy(ifr.ifr_name, "lo");
	if (fd < 0 || ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
		r = -errno;
	ifr.ifr_flags |= IFF_UP;
	if (!r && ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
		r = -errno;
	if (fd >= 0)
		close(fd);
	return r;
}

/* `ip route add local 198.18.0.0/15 dev lo table local` over rtnetlink. */
static int route_fake(void)
{
	struct {
		struct nlmsghdr n;
		struct rtmsg r;
		char attrs[64];
	} req = {0};
	struct rtattr *ra;
	uint32_t dst = htonl(0xc6120000u), oif = if_nametoindex("lo");
	req.n.nlmsg_len = NLMSG_LENGTH(sizeof(struct rtmsg));
	req.n.nlmsg_type = RTM_NEWROUTE;
	req.n.nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK;
	req.r = (struct rtmsg){.rtm_family = AF_INET,
			       .rtm_dst_len = 15,
			       .rtm_table = RT_TABLE_LOCAL,
			       .rtm_protocol = RTPROT_BOOT,
			       .rtm_scope = RT_SCOPE_HOST,
			       .rtm_type = RTN_LOCAL};
	ra = (struct rtattr *)((char *)&req + NLMSG_ALIGN(req.n.nlmsg_len));
	ra->rta_type = RTA_DST, ra->rta_len = RTA_LENGTH(4);
	memcpy(RTA_DATA(ra), &dst, 4);
	req.n.nlmsg_len = NLMSG_ALIGN(req.n.nlmsg_len) + RTA_ALIGN(ra->rta_len);
	ra = (struct rtattr *)((char *)&req + req.n.nlmsg_len);
	ra->rta_type = RTA_OIF, ra->rta_len = RTA_LENGTH(4);
	memcpy(RTA_DATA(ra), &oif, 4);
	req.n.nlmsg_len += RTA_ALIGN(ra->rta_len);
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	char ans[256];
	if (fd < 0)
		return -errno;
	int r = send(fd, &req, req.n.nlmsg_len, 0) < 0 ? -errno : 0;
	ssize_t n = r ? -1 : recv(fd, ans, sizeof(ans), 0);
	close(fd);
	if (r || n < (ssize_t)NLMSG_LENGTH(sizeof(struct nlmsgerr)))
		return r ? r : -EIO;
	struct nlmsghdr *h = (struct nlmsghdr *)ans;
	if (h->nlmsg_type == NLMSG_ERROR)
		return ((struct nlmsgerr *)NLMSG_DATA(h))->error;
	return 0;
}

static int listen_on(uint32_t addr, uint16_t port, int type)
{
	struct sockaddr_in sa = {
	    .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(addr)};
	int one = 1, fd = socket(AF_INET, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    (type == SOCK_STREAM && listen(fd, 64) < 0)) {
		int e = -errno;
		close(fd);
		return e;
	}
	return fd;
}

int agent_net_setup(struct agent *a)
{
	const struct al_guest_config *c = &a->cfg.c;
	struct agent_net *n = calloc(1, sizeof(*n));
	int r;
	if (!n)
		return agent_log(a, "guest agent: out of memory"), -ENOMEM;
	a->net = n;
	if ((r = lo_up()) < 0 || (r = route_fake()) < 0)
		return agent_log(a, "guest agent: loopback and its route: %s", strerror(-r)), r;
	struct {
		uint32_t addr;
		uint16_t port;
	} want[MAX_LISTEN];
	size_t k = 0;
	for (size_t i = 0; i < c->n_proxy_ports; i++)
		want[k].addr = INADDR_LOOPBACK, want[k++].port = c->proxy_ports[i];
	want[k].addr = INADDR_LOOPBACK, want[k++].port = 53;
	for (size_t i = 0; i < c->n_capture_ports; i++)
		want[k].addr = INADDR_ANY, want[k++].port = c->capture_ports[i];
	for (size_t i = 0; i < k; i++) {
		if ((r = listen_on(want[i].addr, want[i].port, SOCK_STREAM)) < 0)
			return agent_log(a, "guest agent: listening on TCP port %u: %s",
					 want[i].port, strerror(-r)),
			       r;
		n->listen[n->n_listen++] = r;
	}
	if ((r = listen_on(INADDR_LOOPBACK, 53, SOCK_DGRAM)) < 0)
		return agent_log(a, "guest agent: listening on UDP port 53: %s", strerror(-r)), r;
	n->udp = r;
	return 0;
}

static struct stream *find(struct agent_net *n, uint32_t id)
{
	for (size_t i = 0; id && i < AL_GUEST_MAX_STREAMS; i++)
		if (n->s[i].id == id)
			return &n->s[i];
	return NULL;
}

static void drop(struct stream *s, bool reset)
{
	if (reset)
		setsockopt(s->fd, SOL_SOCKET, SO_LINGER, &(struct linger){1, 0},
			   sizeof(struct linger));
	close(s->fd);
	free(s->buf);
	*s = (struct stream){0};
}

static uint32_t new_id(struct agent_net *n)
{
	if (!++n->next_id)
		n->next_id = 1;
	return n->next_id;
}

static void accept_one(struct agent *a, struct agent_net *n, int lfd)
{
	struct sockaddr_in dst;
	socklen_t dl = sizeof(dst);
	int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	struct stream *s = NULL;
	if (fd < 0)
		return;
	for (size_t i = 0; !s && i < AL_GUEST_MAX_STREAMS; i++)
		if (!n->s[i].id)
			s = &n->s[i];
	/* The guest's original destination: what it connected to. */
	if (!s || getsockname(fd, (struct sockaddr *)&dst, &dl) < 0 || dst.sin_family != AF_INET) {
		close(fd);
		return;
	}
	*s = (struct stream){.id = new_id(n), .fd = fd};
	uint8_t b[8] = {6, 0};
	memcpy(b + 2, &dst.sin_port, 2);
	memcpy(b + 4, &dst.sin_addr.s_addr, 4);
	agent_send(a, AL_G_OPEN, 0, s->id, b, 8);
}

static void read_stream(struct agent *a, struct stream *s)
{
	static uint8_t buf[AL_GUEST_MAX_PAYLOAD];
	size_t room = AL_GUEST_WINDOW - s->unacked;
	ssize_t r = read(s->fd, buf, room < sizeof(buf) ? room : sizeof(buf));
	if (r > 0) {
		agent_send(a, AL_G_DATA, 0, s->id, buf, (uint32_t)r);
		s->unacked += (uint32_t)r;
	} else if (r == 0) {
		s->rd_eof = true;
		agent_send(a, AL_G_SHUT, 0, s->id, NULL, 0);
	} else if (errno != EAGAIN && errno != EINTR) {
		agent_send(a, AL_G_CLOSE, 0, s->id, NULL, 0);
		drop(s, true);
	}
}

static void write_stream(struct agent *a, struct stream *s)
{
	ssize_t w = write(s->fd, s->buf, s->len);
	if (w < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (w < 0) {
		if (!s->host_closed)
			agent_send(a, AL_G_CLOSE, 0, s->id, NULL, 0);
		return drop(s, true);
	}
	memmove(s->buf, s->buf + w, s->len - (size_t)w);
	s->len -= (size_t)w;
	if (s->host_closed)
		return; /* the host forgot the stream: no credit back */
	uint8_t b[4];
	al_guest_put32(b, (uint32_t)w);
	agent_send(a, AL_G_WINDOW, 0, s->id, b, 4);
}

static void read_dgram(struct agent *a, struct agent_net *n)
{
	uint8_t buf[DGRAM_MAX];
	struct sockaddr_in from;
	socklen_t fl = sizeof(from);
	ssize_t r = recvfrom(n->udp, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fl);
	struct dgram *d = NULL;
	for (size_t i = 0; !d && i < AL_GUEST_MAX_DGRAMS; i++)
		if (!n->d[i].id)
			d = &n->d[i];
	if (r <= 0 || !d)
		return; /* none in flight may be added: the client asks again */
	*d = (struct dgram){.id = new_id(n), .from = from, .deadline = now_ms() + DGRAM_TTL_MS};
	agent_send(a, AL_G_DGRAM, 0, d->id, buf, (uint32_t)r);
}

void agent_net_poll(struct agent *a, struct pollfd *pfd, size_t *k)
{
	struct agent_net *n = a->net;
	size_t base = *k;
	if (!n)
		return;
	long now = now_ms();
	for (size_t i = 0; i < AL_GUEST_MAX_DGRAMS; i++)
		if (n->d[i].id && n->d[i].deadline < now)
			n->d[i].id = 0;
	bool room = agent_q_room(a);
	for (size_t i = 0; room && i < n->n_listen; i++)
		n->what[*k - base] = (int)i, pfd[(*k)++] = (struct pollfd){n->listen[i], POLLIN, 0};
	if (room)
		n->what[*k - base] = -1, pfd[(*k)++] = (struct pollfd){n->udp, POLLIN, 0};
	for (size_t i = 0; i < AL_GUEST_MAX_STREAMS; i++) {
		struct stream *s = &n->s[i];
		short ev = 0;
		if (!s->id)
			continue;
		if (s->ok && !s->rd_eof && room && s->unacked < AL_GUEST_WINDOW)
			ev |= POLLIN;
		if (s->len)
			ev |= POLLOUT;
		if (ev)
			n->what[*k - base] = MAX_LISTEN + (int)i,
				     pfd[(*k)++] = (struct pollfd){s->fd, ev, 0};
	}
}

void agent_net_events(struct agent *a, struct pollfd *pfd, size_t k)
{
	struct agent_net *n = a->net;
	for (size_t i = 0; n && i < k; i++) {
		int w = n->what[i];
		if (!pfd[i].revents)
			continue;
		if (w == -1) {
			read_dgram(a, n);
		} else if (w < MAX_LISTEN) {
			accept_one(a, n, n->listen[w]);
		} else {
			struct stream *s = &n->s[w - MAX_LISTEN];
			if (s->id && (pfd[i].revents & POLLOUT))
				write_stream(a, s);
			if (s->id && (pfd[i].revents & (POLLIN | POLLHUP | POLLERR)) && s->ok &&
			    !s->rd_eof)
				read_stream(a, s);
		}
	}
	/* A stream whose both ends are done (and all written) is gone. */
	for (size_t i = 0; n && i < AL_GUEST_MAX_STREAMS; i++) {
		struct stream *s = &n->s[i];
		if (s->id && s->wr_eof && !s->len)
			shutdown(s->fd, SHUT_WR);
		if (s->id && s->wr_eof && s->rd_eof && !s->len) {
			if (!s->host_closed)
				agent_send(a, AL_G_CLOSE, 0, s->id, NULL, 0);
			drop(s, false);
		}
	}
}

void agent_net_msg(struct agent *a, const struct al_guest_hdr *h, const uint8_t *p)
{
	struct agent_net *n = a->net;
	struct stream *s = n ? find(n, h->id) : NULL;
	if (!n)
		agent_die(a, "guest agent: a network message with the network off");
	switch (h->type) {
	case AL_G_DGRAM:
		for (size_t i = 0; i < AL_GUEST_MAX_DGRAMS; i++)
			if (h->id && n->d[i].id == h->id) {
				sendto(n->udp, p, h->len, 0, (struct sockaddr *)&n->d[i].from,
				       sizeof(n->d[i].from));
				n->d[i].id = 0;
			}
		return;
	case AL_G_OPEN_OK:
		if (s)
			s->ok = true;
		return;
	case AL_G_CLOSE:
		if (s && s->len) {
			s->host_closed = s->wr_eof = s->rd_eof = true;
			return;
		}
		if (s)
			drop(s, true);
		return;
	case AL_G_OPEN_FAILED:
		if (s)
			drop(s, true);
		return;
	case AL_G_SHUT:
		if (s)
			s->wr_eof = true;
		return;
	case AL_G_WINDOW:
		if (h->len != 4 || (s && al_guest_get32(p) > s->unacked))
			agent_die(a, "guest agent: a bad WINDOW for stream %u", h->id);
		if (s)
			s->unacked -= al_guest_get32(p);
		return;
	case AL_G_DATA:
		if (!s || s->wr_eof)
			return; /* closed on our side while the host sent */
		if (!h->len || s->len + h->len > AL_GUEST_WINDOW)
			agent_die(a, "guest agent: the host sent stream %u past its window", h->id);
		if (!s->buf && !(s->buf = malloc(AL_GUEST_WINDOW)))
			agent_die(a, "guest agent: out of memory");
		memcpy(s->buf + s->len, p, h->len);
		s->len += h->len;
		return;
	}
}
