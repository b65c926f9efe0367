/* Socket memory in the sandbox's network namespace, read through
 * NETLINK_SOCK_DIAG (the socket is made by the child in that namespace and
 * handed over). It is the one measure that also sees TCP connections still
 * waiting in a listener's accept queue: the kernel charges their buffers to
 * no memory cgroup until accept() (sk_clone_lock leaves sk_memcg unset), on
 * cgroup v1 and v2 alike. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What one dump adds up. */
struct al_sockdiag_sum {
	uint64_t bytes;	  /* held by connections waiting to be accepted: receive
			   * queue + write queue + forward allocation */
	size_t sockets;	  /* those connections */
	size_t listeners; /* listening sockets */
	size_t pending;	  /* their accept queues' lengths, added up */
	bool done;	  /* NLMSG_DONE seen */
	int error;	  /* NLMSG_ERROR's errno (positive), or 0 */
};

/* A forced buffer: the kernel takes one skb into an empty receive queue
 * whatever the limits (up to 64 KiB of data over loopback, and its
 * overhead). */
#define AL_SOCKDIAG_FORCED_BYTES (68u << 10)

/* Add the sockets of one batch of netlink messages (buf, len) to *sum:
 * listeners are counted with their queues, connections waiting to be
 * accepted (no inode yet) with their memory, the rest (charged to a
 * cgroup) left out. Malformed messages end the batch (sum->error =
 * EBADMSG). Pure, for tests. */
void al_sockdiag_parse(const void *buf, size_t len, struct al_sockdiag_sum *sum);

/* The most one connection waiting in an accept queue can hold: it keeps
 * the receive buffer its listener had when it was made, which may since
 * have been lowered, so the largest a socket may set (2 x
 * net.core.rmem_max, a host-wide value), plus one forced buffer. Reads
 * /proc/sys/net/core/rmem_max: call it before the supervisor confines
 * itself. */
uint64_t al_sockdiag_pending_bytes(void);

/* Dump the TCP sockets (IPv4 and IPv6) of fd's namespace into *ret: only
 * the listening ones when listeners_only (the kernel then walks only its
 * listening hash, not the whole established hash, which every namespace
 * shares and takes about 0.4 ms per family here). Returns 0; 1 when it
 * stopped early because bytes reached stop or the listeners passed
 * max_listeners (0 = no such stop), in which case fd still holds the rest
 * of the dump and must not be used again; or -errno (fd then too may hold
 * the rest). */
int al_sockdiag_tcp(int fd, bool listeners_only, uint64_t stop, size_t max_listeners,
		    struct al_sockdiag_sum *ret);
