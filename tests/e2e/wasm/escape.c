/* The wasm e2e suite's escape attempts, each printed as one line "NAME:
 * ok" (it worked) or "NAME: denied (ERRNO)": a host path outside every
 * preopen (argv[1], written), a symlink the module makes in the scratch to
 * a host path (argv[2]) and writes through, the socket calls of WASI
 * preview 1 on every low descriptor, and the environment printed whole. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <wasi/api.h>

extern char **environ;

static void report(const char *name, int ok, int err)
{
	if (ok)
		printf("%s: ok\n", name);
	else
		printf("%s: denied (%d)\n", name, err);
}

static void try_write(const char *name, const char *path)
{
	FILE *f = fopen(path, "w");
	int ok = f && fputs("escaped\n", f) >= 0 && fclose(f) == 0;
	report(name, ok, errno);
}

int main(int argc, char **argv)
{
	char buf[64];
	FILE *f;

	if (argc != 3)
		return 2;
	try_write("host-path", argv[1]);
	f = fopen("/etc/shadow", "r");
	report("read-shadow", f != NULL, errno);
	if (symlink(argv[2], "/work/link") == 0)
		try_write("symlink-out", "/work/link");
	else
		report("symlink-out", 0, errno);
	for (int fd = 0; fd < 8; fd++) {
		__wasi_size_t n = 0;
		__wasi_roflags_t rf = 0;
		__wasi_fd_t got = 0;
		__wasi_iovec_t iov = {(uint8_t *)buf, sizeof(buf)};
		__wasi_ciovec_t ciov = {(const uint8_t *)"x", 1};
		snprintf(buf, sizeof(buf), "sock_accept-%d", fd);
		report(buf, __wasi_sock_accept(fd, 0, &got) == 0, 0);
		snprintf(buf, sizeof(buf), "sock_recv-%d", fd);
		report(buf, __wasi_sock_recv(fd, &iov, 1, 0, &n, &rf) == 0, 0);
		snprintf(buf, sizeof(buf), "sock_send-%d", fd);
		report(buf, __wasi_sock_send(fd, &ciov, 1, 0, &n) == 0, 0);
	}
	for (char **e = environ; e && *e; e++)
		printf("env %s\n", *e);
	return 0;
}
