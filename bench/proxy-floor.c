/* The floor for bench/egress.py's sequential requests: the least an HTTP
 * forward proxy does per request on this machine. One process, one epoll
 * loop. For each connection: accept (with TCP_DEFER_ACCEPT, so that the
 * head is usually there), read the request head, take the port from its
 * absolute URI ("GET http://NAME:PORT/path HTTP/1.1"), connect to
 * 127.0.0.1:PORT (no DNS: every name is loopback here), write the head on
 * in origin form ("GET /path HTTP/1.1") with what followed it, then relay
 * both ways with recv/send until each side has closed. No policy, audit,
 * limits, DNS or confinement: what airlock's gateway pays on top of this is
 * its own.
 *
 * With --netns the listener is made in a new network namespace (a child
 * process unshares one, brings its loopback up, listens on
 * 127.0.0.1:PORT there and passes the socket over a Unix socket), while
 * this process stays in the host's and connects there, as airlock's gateway
 * does with the sandbox's listeners: a client entered into that namespace
 * (nsenter --net=/proc/PID/ns/net, PID the second number printed) reaches
 * the floor at 127.0.0.1:PORT. The child waits in pause() and dies with
 * this process (PR_SET_PDEATHSIG); the namespace goes with both.
 *
 * Usage: bench-proxy-floor [--netns] [PORT]   (PORT 0 or none: the kernel
 * picks; --netns needs root). Prints "PORT" (with --netns "PORT PID") and
 * a newline once it listens, then serves until killed. Exits 1 with a
 * message naming the step that failed. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define HEAD_MAX 8192

/* One side of a connection: its socket, the other side, and whether it
 * has sent its end (EOF read from it). */
struct side {
	int fd;
	bool eof;
	struct side *peer;
	struct conn *conn;
};

struct conn {
	struct side client, upstream;
	bool dead;
	struct conn *next_dead;
	size_t head_len;
	char head[HEAD_MAX];
};

static int ep;
static char relay_buf[65536];

static void die(const char *what)
{
	fprintf(stderr, "proxy-floor: %s: %s\n", what, strerror(errno));
	exit(1);
}

static int listen_here(unsigned short port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0)
		die("socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/* airlock's listeners defer accept until data arrives: so does the
	 * floor, or it would pay a wake-up that the gateway does not. */
	setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		die("bind 127.0.0.1");
	if (listen(fd, 128) < 0)
		die("listen");
	return fd;
}

/* The child of --netns: a new network namespace with loopback up, a
 * listener in it sent back over sock; then it waits to be killed. */
static void netns_child(int sock, unsigned short port)
{
	struct ifreq ifr = {0};
	char cbuf[CMSG_SPACE(sizeof(int))] = {0};
	char byte = 0;
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	struct msghdr m = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	int s, fd;

	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		die("prctl");
	if (unshare(CLONE_NEWNET) < 0)
		die("unshare(CLONE_NEWNET)");
	s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		die("lo");
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
		die("bringing lo up");
	close(s);
	fd = listen_here(port);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	if (sendmsg(sock, &m, 0) != 1)
		die("sending the listener");
	close(fd);
	for (;;)
		pause();
}

static int listen_netns(unsigned short port, pid_t *ret_pid)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = {0};
	char byte;
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	struct msghdr m = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
	struct cmsghdr *c = NULL;
	int sv[2], fd;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		die("socketpair");
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		close(sv[0]);
		netns_child(sv[1], port);
	}
	close(sv[1]);
	if (recvmsg(sv[0], &m, 0) != 1 || !(c = CMSG_FIRSTHDR(&m)) || c->cmsg_type != SCM_RIGHTS)
		die("the listener from the namespace");
	memcpy(&fd, CMSG_DATA(c), sizeof(int));
	close(sv[0]);
	*ret_pid = pid;
	return fd;
}

/* Edge-triggered: a read shorter than the buffer leaves the socket empty
 * (a stream socket gives what it holds), and new bytes or an EOF make a new
 * edge, so no read ends in EAGAIN and a side that has sent its EOF needs no
 * EPOLL_CTL_DEL. */
static void watch(struct side *s)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLET, .data.ptr = s};

	if (epoll_ctl(ep, EPOLL_CTL_ADD, s->fd, &ev) < 0)
		die("epoll_ctl");
}

/* The sockets closed (which takes them out of the epoll set); the caller
 * frees c. */
static void conn_close(struct conn *c)
{
	close(c->client.fd);
	if (c->upstream.fd >= 0)
		close(c->upstream.fd);
}

/* Send all of buf: at once when the socket takes it, else blocking (the
 * sockets are blocking; reads use MSG_DONTWAIT). */
static bool send_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		buf += n;
		len -= (size_t)n;
	}
	return true;
}

/* The head is whole: the port from "METHOD http://NAME[:PORT]/path ...",
 * a connect to 127.0.0.1:PORT, the head on in origin form. */
static bool forward(struct conn *c, size_t end)
{
	char *sp = memchr(c->head, ' ', c->head_len), *uri, *path, *colon;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(80)};
	int fd;

	if (!sp || c->head_len - (size_t)(sp - c->head) < 8 || memcmp(sp + 1, "http://", 7) != 0)
		return false;
	uri = sp + 8;
	path = memchr(uri, '/', end - (size_t)(uri - c->head));
	if (!path)
		return false;
	colon = memchr(uri, ':', (size_t)(path - uri));
	if (colon)
		a.sin_port = htons((unsigned short)strtoul(colon + 1, NULL, 10));
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	c->upstream.fd = fd;
	/* Loopback: a blocking connect returns as soon as the handshake is
	 * done, with no wait in the loop. */
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		return false;
	/* "METHOD " then the path onwards: the origin form. */
	size_t mlen = (size_t)(sp - c->head) + 1;
	memmove(c->head + mlen, path, c->head_len - (size_t)(path - c->head));
	c->head_len -= (size_t)(path - c->head) - mlen;
	if (!send_all(fd, c->head, c->head_len))
		return false;
	watch(&c->upstream);
	return true;
}

/* Read more of the head; true while the connection lives. */
static bool read_head(struct conn *c)
{
	ssize_t n =
	    recv(c->client.fd, c->head + c->head_len, HEAD_MAX - c->head_len - 1, MSG_DONTWAIT);
	char *end;

	if (n < 0)
		return errno == EAGAIN || errno == EINTR;
	if (n == 0)
		return false;
	c->head_len += (size_t)n;
	c->head[c->head_len] = '\0';
	end = memmem(c->head, c->head_len, "\r\n\r\n", 4);
	if (!end)
		return c->head_len < HEAD_MAX - 1;
	return forward(c, (size_t)(end - c->head) + 4);
}

/* Bytes from s to its peer until s is empty; at EOF the peer's write side
 * is shut, unless the peer has sent its own EOF, when both are closed.
 * True while the connection lives. */
static bool relay(struct side *s)
{
	for (;;) {
		ssize_t n = recv(s->fd, relay_buf, sizeof(relay_buf), MSG_DONTWAIT);
		if (n < 0)
			return errno == EAGAIN || errno == EINTR;
		if (n == 0)
			break;
		if (!send_all(s->peer->fd, relay_buf, (size_t)n))
			return false;
		if ((size_t)n < sizeof(relay_buf))
			return true;
	}
	s->eof = true;
	if (s->peer->eof)
		return false;
	shutdown(s->peer->fd, SHUT_WR);
	return true;
}

/* One connection a wake-up: the listener is level-triggered, so another
 * waiting makes the next epoll_wait return at once (no accept4 that ends
 * in EAGAIN). */
static void accept_one(int lfd)
{
	{
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			return;
		struct conn *c = calloc(1, sizeof(*c));
		if (!c)
			die("calloc");
		c->client = (struct side){.fd = fd, .peer = &c->upstream, .conn = c};
		c->upstream = (struct side){.fd = -1, .peer = &c->client, .conn = c};
		if (!read_head(c)) {
			conn_close(c);
			free(c);
			return;
		}
		watch(&c->client);
	}
}

int main(int argc, char **argv)
{
	struct epoll_event evs[64];
	bool netns = argc > 1 && strcmp(argv[1], "--netns") == 0;
	unsigned short port = 0;
	struct sockaddr_in a;
	socklen_t alen = sizeof(a);
	pid_t child = 0;
	struct conn *dead = NULL;
	int lfd;

	if (argc > 1 + netns)
		port = (unsigned short)strtoul(argv[1 + netns], NULL, 10);
	signal(SIGPIPE, SIG_IGN);
	lfd = netns ? listen_netns(port, &child) : listen_here(port);
	if (getsockname(lfd, (struct sockaddr *)&a, &alen) < 0)
		die("getsockname");
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		die("epoll_create1");
	struct epoll_event lev = {.events = EPOLLIN, .data.ptr = NULL};
	if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &lev) < 0)
		die("epoll_ctl");
	if (netns)
		printf("%u %d\n", ntohs(a.sin_port), (int)child);
	else
		printf("%u\n", ntohs(a.sin_port));
	fflush(stdout);
	for (;;) {
		int n = epoll_wait(ep, evs, 64, -1);
		if (n < 0 && errno != EINTR)
			die("epoll_wait");
		for (int i = 0; i < n; i++) {
			struct side *s = evs[i].data.ptr;
			if (!s) {
				accept_one(lfd);
				continue;
			}
			struct conn *c = s->conn;
			if (c->dead)
				continue; /* closed by an earlier event of this batch */
			bool alive =
			    s == &c->client && c->upstream.fd < 0 ? read_head(c) : relay(s);
			if (!alive) {
				conn_close(c);
				c->dead = true;
				c->next_dead = dead;
				dead = c;
			}
		}
		/* Freed once no event of the batch can point at them. */
		while (dead) {
			struct conn *next = dead->next_dead;
			free(dead);
			dead = next;
		}
	}
}
