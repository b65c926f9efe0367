/* sockfill: pins kernel memory in socket buffers from inside a sandbox, for
 * the kernel-memory cases of run_security.py. Bounded by its arguments, so
 * that it is harmless where nothing stops it: at most
 * PROCS x N x (BYTES or DGRAMS x 1 KiB) of payload, then it sleeps SECONDS
 * holding it all and exits.
 *
 *   sockfill tcp PROCS PAIRS BYTES SECONDS
 *       each process opens PAIRS loopback TCP connections and writes up to
 *       BYTES into each without ever reading the other end;
 *   sockfill backlog PROCS CONNS BYTES SECONDS
 *       like tcp, but the connections are never accepted: they wait in the
 *       listener's accept queue, where the kernel charges their buffers to
 *       no memory cgroup;
 *   sockfill lowered PROCS CONNS BYTES SECONDS
 *       like backlog, but the listener's receive buffer is set as large as
 *       it may be while the connections are made (they keep it) and
 *       lowered before they are written to;
 *   sockfill listeners PROCS N 0 SECONDS
 *       each process opens N listening sockets on one loopback port
 *       (SO_REUSEPORT), which the supervisor has to read;
 *   sockfill udp PROCS SOCKETS DGRAMS SECONDS
 *       each process opens SOCKETS UDP sockets with the largest receive
 *       buffer it may set and sends DGRAMS datagrams of 1 KiB to each,
 *       never reading them.
 *
 * Prints "sockfill: PROC sent N" per process. Linked statically (no shared
 * libraries inside the sandbox needed). Never run it outside a sandbox
 * with large arguments. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static char buf[65536];

static long fill_tcp(long pairs, long bytes, int accepted)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof(a);
	int ls = socket(AF_INET, SOCK_STREAM, 0);
	long total = 0;

	if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(ls, 4096) < 0 ||
	    getsockname(ls, (struct sockaddr *)&a, &alen) < 0)
		return -1;
	for (long i = 0; i < pairs; i++) {
		int c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), s;
		long n = 0;

		if (c < 0)
			break;
		connect(c, (struct sockaddr *)&a, sizeof(a)); /* EINPROGRESS */
		if (accepted && (s = accept(ls, NULL, NULL)) < 0)
			break;
		if (!accepted && (i + 1) % 4000 == 0) {
			/* A new listener before the accept queue is full. */
			alen = sizeof(a);
			a.sin_port = 0;
			ls = socket(AF_INET, SOCK_STREAM, 0);
			if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof(a)) < 0 ||
			    listen(ls, 4096) < 0 ||
			    getsockname(ls, (struct sockaddr *)&a, &alen) < 0)
				break;
		}
		while (n < bytes) {
			size_t want =
			    bytes - n < (long)sizeof(buf) ? (size_t)(bytes - n) : sizeof(buf);
			ssize_t k = send(c, buf, want, MSG_DONTWAIT | MSG_NOSIGNAL);
			if (k <= 0)
				break;
			n += k;
		}
		total += n;
	}
	return total;
}

static long fill_lowered(long conns, long bytes)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof(a);
	int ls = socket(AF_INET, SOCK_STREAM, 0), big = 1 << 30, small = 4096;
	long total = 0;
	int *c;

	if (conns > 4000 || !(c = calloc((size_t)conns, sizeof(*c))))
		return -1;
	if (ls < 0 || setsockopt(ls, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big)) < 0 ||
	    bind(ls, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(ls, 4096) < 0 ||
	    getsockname(ls, (struct sockaddr *)&a, &alen) < 0)
		return -1;
	for (long i = 0; i < conns; i++) {
		c[i] = socket(AF_INET, SOCK_STREAM, 0);
		if (c[i] < 0 || connect(c[i], (struct sockaddr *)&a, sizeof(a)) < 0)
			return -1;
	}
	setsockopt(ls, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	usleep(100000); /* let a listener dump see the small buffer */
	for (long i = 0; i < conns; i++) {
		long n = 0;
		while (n < bytes) {
			ssize_t k = send(c[i], buf, sizeof(buf), MSG_DONTWAIT | MSG_NOSIGNAL);
			if (k <= 0)
				break;
			n += k;
		}
		total += n;
	}
	return total;
}

static long open_listeners(long n)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				.sin_port = htons(9100)};
	int one = 1;
	long made = 0;

	for (long i = 0; i < n; i++) {
		int ls = socket(AF_INET, SOCK_STREAM, 0);
		if (ls < 0 || setsockopt(ls, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0 ||
		    bind(ls, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(ls, 1) < 0)
			break;
		made++;
	}
	return made;
}

static long fill_udp(long socks, long dgrams)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int w = socket(AF_INET, SOCK_DGRAM, 0), big = 1 << 30;
	long total = 0;

	if (w < 0)
		return -1;
	for (long i = 0; i < socks; i++) {
		socklen_t alen = sizeof(a);
		int r = socket(AF_INET, SOCK_DGRAM, 0);

		a.sin_port = 0;
		if (r < 0 || bind(r, (struct sockaddr *)&a, sizeof(a)) < 0 ||
		    getsockname(r, (struct sockaddr *)&a, &alen) < 0)
			break;
		setsockopt(r, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
		for (long k = 0; k < dgrams; k++)
			if (sendto(w, buf, 1024, MSG_DONTWAIT, (struct sockaddr *)&a, sizeof(a)) ==
			    1024)
				total += 1024;
	}
	return total;
}

int main(int argc, char **argv)
{
	long procs, n, size, secs;
	int udp, backlog, lowered, listeners;

	if (argc != 6 || (strcmp(argv[1], "tcp") != 0 && strcmp(argv[1], "backlog") != 0 &&
			  strcmp(argv[1], "lowered") != 0 && strcmp(argv[1], "listeners") != 0 &&
			  strcmp(argv[1], "udp") != 0)) {
		fprintf(stderr, "usage: sockfill tcp|backlog|lowered|listeners|udp PROCS N "
				"BYTES|DGRAMS SECONDS\n");
		return 2;
	}
	lowered = strcmp(argv[1], "lowered") == 0;
	listeners = strcmp(argv[1], "listeners") == 0;
	udp = strcmp(argv[1], "udp") == 0;
	backlog = strcmp(argv[1], "backlog") == 0;
	procs = atol(argv[2]);
	n = atol(argv[3]);
	size = atol(argv[4]);
	secs = atol(argv[5]);
	for (long p = 0; p < procs; p++) {
		pid_t pid = fork();
		if (pid < 0)
			break;
		if (pid == 0) {
			long sent = udp		? fill_udp(n, size)
				    : lowered	? fill_lowered(n, size)
				    : listeners ? open_listeners(n)
						: fill_tcp(n, size, !backlog);
			printf("sockfill: %ld sent %ld\n", p, sent);
			fflush(stdout);
			sleep((unsigned)secs);
			_exit(0);
		}
	}
	while (wait(NULL) > 0)
		;
	return 0;
}
