/* The transparent capture (native backend): the nftables ruleset of the
 * sandbox's network namespace, built at build time (capture-gen.c) and
 * sent as one netlink batch on a socket the sandbox's child opened. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

/* The name of the capture's tables, ip and ip6 (the process backend's are
 * inet, named by uid: backend/process/nft.c). */
#define AL_CAPTURE_TABLE "airlock"

/* What one message of the batch makes (for errors). */
struct al_capture_msg {
	uint32_t seq;
	const char *what;
};

/* A ruleset as nft text (what the batch makes; docs and the unit test,
 * which loads it with nft and compares the listings), the batch itself and
 * what each of its messages makes. */
struct al_capture_ruleset {
	const char *text;
	const unsigned char *batch;
	size_t size;
	const struct al_capture_msg *msgs;
	size_t n_msgs;
};

/* airlock's own network namespace with a gateway: every TCP connection to
 * a non-loopback address goes to the transparent listener; other traffic
 * to non-loopback addresses is dropped. */
extern const char al_capture_nft_text[];
extern const struct al_capture_ruleset al_capture_rules;
/* An engine's network namespace a container joins (docs/oci.md, exception
 * 3): the same capture with a gateway, only the drop without one; in both
 * the replies of connections made from outside pass, and the tables are
 * made exclusively (a table "airlock" already there is refused, EEXIST). */
extern const struct al_capture_ruleset al_capture_joined_rules;
extern const struct al_capture_ruleset al_capture_joined_drop_rules;
/* Their removal, one table each (ip, ip6): each its own transaction, so
 * that one already gone (-ENOENT) does not keep the other. */
extern const struct al_capture_ruleset al_capture_remove_ip_rules;
extern const struct al_capture_ruleset al_capture_remove_ip6_rules;

/* Install rules through fd, a NETLINK_NETFILTER socket (opened in the
 * network namespace the rules are for; its opener and the caller both need
 * CAP_NET_ADMIN there): 0 once the kernel has committed the whole batch,
 * else -errno with err naming what the kernel refused. The batch is one
 * transaction: on failure nothing of it is in place. */
int al_capture_apply(int fd, const struct al_capture_ruleset *rules, struct al_error *err);
/* al_capture_apply() of al_capture_rules. */
int al_capture_install(int fd, struct al_error *err);

/* Table "airlock" of family (NFPROTO_IPV4 or NFPROTO_IPV6) in fd's
 * namespace: its handle in *handle, the kernel's own number for that one
 * table (a table of the same name made later has another). 0, or -errno
 * (-ENOENT: no such table). */
int al_capture_table_handle(int fd, uint8_t family, uint64_t *handle, struct al_error *err);
/* Remove the table of family whose handle that was, and no other: 0, or
 * -ENOENT when it is gone already (removed by hand, whatever took its
 * name since). */
int al_capture_remove_table(int fd, uint8_t family, uint64_t handle, struct al_error *err);
