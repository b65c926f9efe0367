/* A static helper run inside the microvm guest by run_guest_agent.py: one
 * small action per call, its result on stdout, so that the test judges
 * the guest's view (ids, files, devices, sockets) from the host.
 *   guest_tool id                 uid=U gid=G groups=N
 *   guest_tool exists PATH...     "PATH yes" or "PATH no" per path
 *   guest_tool cat PATH           the file's bytes
 *   guest_tool write PATH TEXT    exit 0 when written, 1 (and why) if not
 *   guest_tool stdin              stdin copied to stdout
 *   guest_tool exit N             exits with N
 *   guest_tool tcp ADDR PORT MSG  connect, send MSG, shut, print the answer
 *   guest_tool udp ADDR PORT MSG  one datagram, print the answer
 *   guest_tool alloc MB           touch MB MiB, one at a time (a bounded bomb)
 *   guest_tool fork N             N children that wait; prints how many started
 *   guest_tool out N              N bytes of 'y' on stdout
 *   guest_tool wait               waits for a signal
 *   guest_tool mkfifo PATH        makes a FIFO (mode 0666)
 *   guest_tool owner PATH         "UID:GID MODE" of PATH, not followed
 *   guest_tool mkfiles DIR N      DIR (made) with the empty files 0 .. N-1 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int copy(int from)
{
	char b[4096];
	ssize_t n;
	while ((n = read(from, b, sizeof(b))) > 0)
		if (write(1, b, (size_t)n) != n)
			return 1;
	return n < 0;
}

static int net(int type, const char *addr, const char *port, const char *msg)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(port))};
	int fd = socket(AF_INET, type, 0);
	if (fd < 0 || inet_pton(AF_INET, addr, &sa.sin_addr) != 1 ||
	    connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return printf("connect: %s\n", strerror(errno)), 1;
	if (write(fd, msg, strlen(msg)) != (ssize_t)strlen(msg))
		return printf("send: %s\n", strerror(errno)), 1;
	if (type == SOCK_STREAM) {
		shutdown(fd, SHUT_WR);
		return copy(fd);
	}
	char b[4096];
	ssize_t n = recv(fd, b, sizeof(b), 0);
	return n < 0 || write(1, b, (size_t)n) != n;
}

int main(int argc, char **argv)
{
	const char *op = argc > 1 ? argv[1] : "";
	if (!strcmp(op, "id")) {
		printf("uid=%d gid=%d groups=%d\n", (int)getuid(), (int)getgid(),
		       getgroups(0, NULL));
		return 0;
	}
	if (!strcmp(op, "exists")) {
		for (int i = 2; i < argc; i++)
			printf("%s %s\n", argv[i], access(argv[i], F_OK) == 0 ? "yes" : "no");
		return 0;
	}
	if (!strcmp(op, "cat") && argc == 3) {
		int fd = open(argv[2], O_RDONLY);
		return fd < 0 ? (printf("open: %s\n", strerror(errno)), 1) : copy(fd);
	}
	if (!strcmp(op, "write") && argc == 4) {
		int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 || write(fd, argv[3], strlen(argv[3])) < 0)
			return printf("write: %s\n", strerror(errno)), 1;
		return close(fd) != 0;
	}
	if (!strcmp(op, "stdin"))
		return copy(0);
	if (!strcmp(op, "exit") && argc == 3)
		return atoi(argv[2]);
	if (!strcmp(op, "tcp") && argc == 5)
		return net(SOCK_STREAM, argv[2], argv[3], argv[4]);
	if (!strcmp(op, "udp") && argc == 5)
		return net(SOCK_DGRAM, argv[2], argv[3], argv[4]);
	if (!strcmp(op, "alloc") && argc == 3) {
		for (int i = 0; i < atoi(argv[2]); i++) {
			char *p = malloc(1 << 20);
			if (!p)
				return 3;
			memset(p, i + 1, 1 << 20);
		}
		return 0;
	}
	if (!strcmp(op, "fork") && argc == 3) {
		int n = 0;
		for (int i = 0; i < atoi(argv[2]) && i < 200; i++) {
			pid_t pid = fork();
			if (pid == 0) {
				pause();
				_exit(0);
			}
			n += pid > 0;
		}
		printf("%d\n", n);
		return 0;
	}
	if (!strcmp(op, "out") && argc == 3) {
		static char b[65536];
		memset(b, 'y', sizeof(b));
		for (long left = atol(argv[2]); left > 0;) {
			ssize_t w = write(1, b, left < (long)sizeof(b) ? (size_t)left : sizeof(b));
			if (w <= 0)
				return 1;
			left -= w;
		}
		return 0;
	}
	if (!strcmp(op, "wait"))
		return pause();
	if (!strcmp(op, "mkfifo") && argc == 3)
		return mkfifo(argv[2], 0666) < 0 ? (printf("mkfifo: %s\n", strerror(errno)), 1) : 0;
	if (!strcmp(op, "owner") && argc == 3) {
		struct stat st;
		if (lstat(argv[2], &st) < 0)
			return printf("lstat: %s\n", strerror(errno)), 1;
		printf("%u:%u %o\n", (unsigned)st.st_uid, (unsigned)st.st_gid,
		       (unsigned)(st.st_mode & 07777));
		return 0;
	}
	if (!strcmp(op, "mkfiles") && argc == 4) {
		char p[4200];
		if (mkdir(argv[2], 0755) < 0)
			return printf("mkdir: %s\n", strerror(errno)), 1;
		for (long i = 0; i < atol(argv[3]) && i < 20000; i++) {
			snprintf(p, sizeof(p), "%s/%ld", argv[2], i);
			int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0644);
			if (fd < 0)
				return printf("open %s: %s\n", p, strerror(errno)), 1;
			close(fd);
		}
		return 0;
	}
	fprintf(stderr, "guest_tool: unknown use\n");
	return 2;
}
