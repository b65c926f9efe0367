/* The gateway process's seccomp allowlist. The gateway parses what the
 * sandbox sends (HTTP, SOCKS, TLS, DNS), so once it serves it may only
 * move bytes between sockets it has or makes: no exec, no new files but the
 * one its resolver reads (landlock allows only that), no ptrace, no
 * signals, no namespaces. Anything else kills it (SIGSYS), and the run
 * stops: a gateway that cannot work fails closed. Built into a program at
 * build time (seccomp-gen); the same rules as policy/seccomp.c. */
#include "policy/seccomp.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "core/cleanup.h"
#include "policy/seccomp-table.h"

/* O_TMPFILE is this bit with O_DIRECTORY, which a read may set. */
#define TMPFILE_BIT (O_TMPFILE & ~O_DIRECTORY)

/* clang-format off */
static const struct al_seccomp_rule_info table[] = {
	/* Bytes in and out of its sockets, pipes and its one file. */
	ALLOW("read"), ALLOW("write"), ALLOW("readv"), ALLOW("writev"), ALLOW("close"),
	ALLOW("recvfrom"), ALLOW("sendto"), ALLOW("recvmsg"), ALLOW("sendmsg"),
	ALLOW("recvmmsg"), ALLOW("sendmmsg"), /* the DNS stub's queries, in batches */
	ALLOW("splice"), ALLOW("pipe2"), ALLOW("shutdown"),
	/* c-ares reads /etc/hosts on every lookup; landlock allows nothing else.
	 * Never creating, truncating or making a temporary file. */
	ALLOW_IF("openat", "read-only",
		 ARG(2, O_ACCMODE | O_CREAT | O_TRUNC | TMPFILE_BIT, O_RDONLY)),
	ALLOW("fstat"), ALLOW("newfstatat"), ALLOW("lseek"),
	/* Connections: only TCP and UDP over IPv4 and IPv6 (upstreams, DNS). */
	SOCKET(AF_INET, SOCK_STREAM, 0), SOCKET(AF_INET, SOCK_STREAM, IPPROTO_TCP),
	SOCKET(AF_INET, SOCK_DGRAM, 0), SOCKET(AF_INET, SOCK_DGRAM, IPPROTO_UDP),
	SOCKET(AF_INET6, SOCK_STREAM, 0), SOCKET(AF_INET6, SOCK_STREAM, IPPROTO_TCP),
	SOCKET(AF_INET6, SOCK_DGRAM, 0), SOCKET(AF_INET6, SOCK_DGRAM, IPPROTO_UDP),
	ALLOW("connect"), ALLOW("accept4"), ALLOW("getsockopt"),
	/* The options it and c-ares set: not TCP_ULP (kernel TLS), not socket
	 * filters. */
	ALLOW_IF("setsockopt", "SOL_SOCKET, SO_LINGER", ARG(1, M32, SOL_SOCKET), ARG(2, M32, SO_LINGER)),
	ALLOW_IF("setsockopt", "SOL_SOCKET, SO_SNDBUF", ARG(1, M32, SOL_SOCKET), ARG(2, M32, SO_SNDBUF)),
	ALLOW_IF("setsockopt", "SOL_SOCKET, SO_RCVBUF", ARG(1, M32, SOL_SOCKET), ARG(2, M32, SO_RCVBUF)),
	ALLOW_IF("setsockopt", "SOL_SOCKET, SO_KEEPALIVE", ARG(1, M32, SOL_SOCKET), ARG(2, M32, SO_KEEPALIVE)),
	ALLOW_IF("setsockopt", "IPPROTO_TCP, TCP_NODELAY", ARG(1, M32, IPPROTO_TCP), ARG(2, M32, TCP_NODELAY)),
	ALLOW_IF("setsockopt", "IPPROTO_IPV6, IPV6_V6ONLY", ARG(1, M32, IPPROTO_IPV6), ARG(2, M32, IPV6_V6ONLY)),
	ALLOW("getsockname"), ALLOW("getpeername"),
	ALLOW_IF("fcntl", "F_GETFL", ARG(1, M32, F_GETFL)),
	ALLOW_IF("fcntl", "F_SETFL", ARG(1, M32, F_SETFL)),
	ALLOW_IF("fcntl", "F_GETFD", ARG(1, M32, F_GETFD)),
	ALLOW_IF("fcntl", "F_SETFD", ARG(1, M32, F_SETFD)),
	ALLOW_IF("fcntl", "F_SETPIPE_SZ", ARG(1, M32, F_SETPIPE_SZ)),
	ALLOW_IF("fcntl", "F_GETPIPE_SZ", ARG(1, M32, F_GETPIPE_SZ)),
	ALLOW_IF("ioctl", "FIONREAD", ARG(1, M32, FIONREAD)),
	ALLOW_IF("ioctl", "FIONBIO", ARG(1, M32, FIONBIO)),
	/* Its event loop. */
	ALLOW("epoll_wait"), ALLOW("epoll_pwait"), ALLOW("epoll_ctl"), ALLOW("poll"),
	ALLOW("ppoll"), ALLOW("timerfd_create"), ALLOW("timerfd_settime"),
	ALLOW("timerfd_gettime"), ALLOW("clock_gettime"), ALLOW("clock_getres"),
	ALLOW("gettimeofday"), ALLOW("getrandom"),
	/* Memory, never executable. */
	ALLOW("brk"), ALLOW("munmap"), ALLOW("mremap"), ALLOW("madvise"),
	ALLOW_IF("mmap", "not PROT_EXEC", ARG(2, PROT_EXEC, 0)),
	ALLOW_IF("mprotect", "not PROT_EXEC", ARG(2, PROT_EXEC, 0)),
	/* The process itself. */
	ALLOW("exit"), ALLOW("exit_group"), ALLOW("rt_sigreturn"), ALLOW("rt_sigprocmask"),
	ALLOW("restart_syscall"), ALLOW("getpid"), ALLOW("gettid"), ALLOW("futex"),
	ALLOW("sched_yield"), ALLOW("sigaltstack"), /* sanitizer builds tear theirs down */
};
/* clang-format on */

const struct al_seccomp_rule_info *al_gateway_seccomp_table(size_t *ret_n)
{
	*ret_n = AL_ARRAY_SIZE(table);
	return table;
}

/* The decider's connector (gateway/connector.c): it reads a token and a
 * body, makes one Unix stream socket, connects it to the one path it was
 * given before it confined itself, writes the question (sendmsg), shuts
 * its write side and passes it back. Nothing else: no files (landlock
 * allows none), no other sockets, not even a read of anything but its own
 * socketpair (connect() cannot be filtered by address here, which is why
 * the connector exists apart from the gateway). */
/* clang-format off */
static const struct al_seccomp_rule_info connector_table[] = {
	ALLOW("recvfrom"), ALLOW("sendmsg"), ALLOW("close"),
	SOCKET(AF_UNIX, SOCK_STREAM, 0),
	ALLOW("connect"), ALLOW("shutdown"),
	ALLOW("exit"), ALLOW("exit_group"), ALLOW("rt_sigreturn"), ALLOW("restart_syscall"),
	/* what libc or a sanitizer build may need on the way out */
	ALLOW("munmap"), ALLOW("futex"), ALLOW("sigaltstack"),
};
/* clang-format on */

const struct al_seccomp_rule_info *al_connector_seccomp_table(size_t *ret_n)
{
	*ret_n = AL_ARRAY_SIZE(connector_table);
	return connector_table;
}
