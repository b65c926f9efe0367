/* tls-serve: HTTPS on 127.0.0.1 with leaves from a run CA (src/tls), so
 * that run_tls_clients.py can check them with other TLS implementations
 * (Python's ssl, curl, Node).
 *
 * usage: tls-serve CA_FILE PERMITTED HOST...
 *
 * Makes a run CA whose nameConstraints permit PERMITTED (comma-separated
 * hosts, "-" for none), writes its certificate to CA_FILE, and listens on
 * 127.0.0.1 on a free port per HOST, where a server end decided for HOST
 * answers. It prints "HOST PORT" per host, then "ready"; then for each
 * connection, served one at a time, one line: "HOST ok sni=SNI alpn=ALPN"
 * after it answered an HTTP request ("-" for none), or "HOST error: TEXT"
 * (the end's error). The answer's body is "hello HOST". It exits when its
 * stdin closes; a connection that stalls is dropped after 10 s. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/sys.h"
#include "core/util.h"
#include "tls/ca.h"
#include "tls/end.h"
#include "tls/tls.h"

#define HOSTS_MAX 16
#define STALL_MS  10000

static int listen_loopback(uint16_t *ret_port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 8) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
		perror("tls-serve: listening on 127.0.0.1");
		exit(1);
	}
	*ret_port = ntohs(a.sin_port);
	return fd;
}

/* Send what the end has to send. */
static int flush(struct al_tls_end *e, int fd)
{
	char buf[16384];
	ssize_t n;

	while ((n = al_tls_end_get_cipher(e, buf, sizeof(buf))) > 0)
		if (al_write_all(fd, buf, (size_t)n) < 0)
			return -1;
	return 0;
}

/* Plaintext that arrived; once the request's head is there, the answer
 * and close_notify. 1 when answered, 0 to go on, -1 on an error. */
static int converse(struct al_tls_end *e, const char *host, char *req, size_t *got, size_t cap)
{
	char answer[256];
	ssize_t n;
	size_t off = 0;
	int len;

	while ((n = al_tls_end_read(e, req + *got, cap - 1 - *got)) > 0)
		*got += (size_t)n;
	if (n == -EPROTO || n == 0 || *got == cap - 1)
		return -1;
	req[*got] = '\0';
	if (!strstr(req, "\r\n\r\n"))
		return 0;
	len =
	    snprintf(answer, sizeof(answer),
		     "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: close\r\n\r\nhello %s",
		     strlen("hello ") + strlen(host), host);
	while (off < (size_t)len) {
		n = al_tls_end_write(e, answer + off, (size_t)len - off);
		if (n < 0)
			return -1;
		off += (size_t)n;
	}
	return al_tls_end_shutdown(e) < 0 ? -1 : 1;
}

static void serve(struct al_tls_server_ctx *ctx, int lfd, const char *host)
{
	_cleanup_close_ int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	_cleanup_(al_tls_end_freep) struct al_tls_end *e = NULL;
	struct al_error err = {0};
	char buf[16384], req[8192];
	uint64_t start = al_now_ms();
	size_t got = 0;
	int state = 0;

	if (fd < 0 || al_tls_end_server(ctx, host, &e, &err) < 0) {
		printf("%s error: %s\n", host, fd < 0 ? strerror(errno) : err.msg);
		return;
	}
	while (state == 0 && al_now_ms() - start < STALL_MS) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		size_t room = al_tls_end_cipher_room(e);
		ssize_t n;

		if (poll(&p, 1, 100) <= 0)
			continue;
		n = read(fd, buf, room < sizeof(buf) ? room : sizeof(buf));
		if (n <= 0 || al_tls_end_put_cipher(e, buf, (size_t)n) < 0)
			break;
		state = converse(e, host, req, &got, sizeof(req));
		if (flush(e, fd) < 0)
			break;
	}
	flush(e, fd);
	if (state == 1)
		printf("%s ok sni=%s alpn=%s\n", host, al_tls_end_sni(e) ? al_tls_end_sni(e) : "-",
		       al_tls_end_alpn(e) ? al_tls_end_alpn(e) : "-");
	else
		printf("%s error: %s\n", host,
		       al_tls_end_error(e) ? al_tls_end_error(e) : "closed before a request");
}

static size_t split(char *list, const char **out, size_t max)
{
	size_t n = 0;

	if (strcmp(list, "-") == 0)
		return 0;
	for (char *save = NULL, *t = strtok_r(list, ",", &save); t && n < max;
	     t = strtok_r(NULL, ",", &save))
		out[n++] = t;
	return n;
}

int main(int argc, char **argv)
{
	_cleanup_(al_tls_ca_freep) struct al_tls_ca *ca = NULL;
	_cleanup_(al_tls_server_ctx_freep) struct al_tls_server_ctx *ctx = NULL;
	const char *permitted[64];
	struct pollfd p[HOSTS_MAX + 1];
	struct al_error err = {0};
	size_t n_permitted, n = (size_t)argc - 3;
	FILE *f;

	if (argc < 4 || n > HOSTS_MAX) {
		fprintf(stderr, "usage: tls-serve CA_FILE PERMITTED HOST... (at most %d)\n",
			HOSTS_MAX);
		return 2;
	}
	n_permitted = split(argv[2], permitted, AL_ARRAY_SIZE(permitted));
	if (al_tls_init(&err) < 0 ||
	    al_tls_ca_new("e2e", time(NULL) + 3600, permitted, n_permitted, &ca, &err) < 0 ||
	    al_tls_server_ctx_new(ca, &ctx, &err) < 0) {
		fprintf(stderr, "tls-serve: %s\n", err.msg);
		return 1;
	}
	f = fopen(argv[1], "w");
	if (!f || fputs(al_tls_ca_pem(ca), f) < 0 || fclose(f) != 0) {
		perror(argv[1]);
		return 1;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	p[0] = (struct pollfd){.fd = 0, .events = POLLIN};
	for (size_t i = 0; i < n; i++) {
		uint16_t port;
		p[i + 1] = (struct pollfd){.fd = listen_loopback(&port), .events = POLLIN};
		printf("%s %u\n", argv[3 + i], port);
	}
	printf("ready\n");
	for (;;) {
		if (poll(p, n + 1, -1) < 0)
			return 1;
		if (p[0].revents) {
			char c;
			if (read(0, &c, 1) <= 0)
				return 0;
		}
		for (size_t i = 0; i < n; i++)
			if (p[i + 1].revents & POLLIN)
				serve(ctx, p[i + 1].fd, argv[3 + i]);
	}
}
