/* The transparent capture (native backend): the nftables ruleset of the
 * sandbox's network namespace, built at build time (capture-gen.c) and
 * sent as one netlink batch on a socket the sandbox's child opened. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

/* What one message of the batch makes (for errors). */
struct al_capture_msg {
	uint32_t seq;
	const char *what;
};

/* The ruleset as nft text (what the batch makes; docs and the unit test,
 * which loads it with nft and compares the listings), the batch itself and
 * what each of its messages makes. Every TCP connection to a non-loopback
 * address goes to the transparent listener; other traffic to non-loopback
 * addresses is dropped. */
extern const char al_capture_nft_text[];
extern const unsigned char al_capture_batch[];
extern const size_t al_capture_batch_size;
extern const struct al_capture_msg al_capture_msgs[];
extern const size_t al_capture_n_msgs;

/* Install the ruleset through fd, a NETLINK_NETFILTER socket (opened in the
 * network namespace the rules are for; its opener and the caller both need
 * CAP_NET_ADMIN there): 0 once the kernel has committed the whole batch,
 * else -errno with err naming what the kernel refused. The batch is one
 * transaction: on failure nothing of it is in place. */
int al_capture_install(int fd, struct al_error *err);
