/* A sandbox's network namespace as the gateway needs it, made from inside
 * it (with CAP_NET_ADMIN there): the native child's steps (steps.c) and the
 * gvisor backend's child, which runs runsc in such a namespace, use the
 * same calls. Each returns -errno on failure (nothing to clean up). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "net/layout.h"

/* Bring up lo. */
int al_netns_loopback_up(void);

/* A listening (TCP) or bound (UDP) socket of the gateway's on
 * 127.0.0.1:its port, nonblocking: its fd. */
int al_netns_listen(enum al_gateway_listener kind);

/* "ip route add default dev lo src 127.0.0.1": a connect() to any address
 * leaves the socket layer and meets the capture's nftables redirect. */
int al_netns_default_route(void);

/* "ip route add|del DST/PREFIX_LEN dev lo src 127.0.0.1" (dst in host
 * order; add refuses a route already there, EEXIST). */
int al_netns_route_lo(uint32_t dst, int prefix_len, bool add);

struct al_error;

/* A container's linux.sysctl (KEY, VALUE pairs; net keys alone, each
 * checked again by al_plan_sysctl_allowed) written through /proc/sys,
 * which resolves a net sysctl in the writer's network namespace: call it
 * from inside the one meant. */
int al_netns_write_sysctls(char *const *kv, struct al_error *err);

/* An engine's network namespace a container joins (plan->root->netns;
 * docs/oci.md, exception 3). The sandbox's child has no capability over
 * it (its user namespace does not own it), so the supervisor, root in the
 * init user namespace, does from inside it what the child's loopback,
 * gateway and sysctl steps do in airlock's own, then returns to its own
 * namespace (the gateway's upstream connections stay there). */
struct al_netns_join;
struct al_plan;

#include <stdbool.h>
#include <sys/types.h>

#include "core/error.h"

/* Whether the namespace at descriptor ns is one a container's rules (or
 * a pod's sandbox container's supervisor) may go in: a network namespace,
 * neither ours nor the host's, owned by our user namespace. 0, or < 0
 * with err saying why. */
int al_netns_engine_check(int ns, struct al_error *err);

/* Open p's namespace (never as a FIFO or device: al_open_ns(); it must
 * be a network namespace, not the host's nor ours, and owned by our user
 * namespace), and from inside it: bring lo up, open a NETLINK_SOCK_DIAG
 * socket (unless refused and p lets kernel memory go unbounded), install
 * airlock's rules (the capture with a gateway, else the drop-only
 * ruleset: backend/native/capture.h; refused when a table "airlock" is
 * already there), then write p's sysctls, and with a gateway make its
 * listeners on 127.0.0.1. On failure err names the config field and the
 * path, and nothing is left (no rules; sysctls written stay, as with
 * runc). *ret is freed with al_netns_join_free(). */
int al_netns_join_open(const struct al_plan *p, struct al_netns_join **ret, struct al_error *err);

/* Enter j's namespace, for the clone that makes the sandbox's child in
 * it; al_netns_join_leave() returns to ours (it cannot fail: a process
 * that cannot return exits rather than go on in the engine's namespace). */
int al_netns_join_enter(const struct al_netns_join *j, struct al_error *err);
void al_netns_join_leave(const struct al_netns_join *j);

/* The namespace's identity (for the check from outside). */
void al_netns_join_id(const struct al_netns_join *j, dev_t *dev, ino_t *ino);

/* What the supervisor takes over: the NETLINK_SOCK_DIAG socket (or -1),
 * the listener of kind (or -1 without a gateway). Each only once. */
int al_netns_join_take_diag(struct al_netns_join *j);
int al_netns_join_take_listener(struct al_netns_join *j, enum al_gateway_listener kind);

/* A sysfs of j's namespace (its net class is the namespace's), mounted
 * detached with attr (MOUNT_ATTR_*): the child, which may not mount one
 * there, attaches it. The fd (>= 100), or -errno. */
int al_netns_join_sysfs(const struct al_netns_join *j, uint64_t attr, struct al_error *err);

/* Whether the rules are in force. */
bool al_netns_join_captured(const struct al_netns_join *j);

/* Hand the keeper (the process that removes the rules) the pidfd of the
 * container's init (borrowed: the keeper gets its own copy), right after
 * the clone: if the supervisor dies, the keeper kills the container and
 * waits for its init to be gone before it removes the rules. 0, or
 * -errno with err set (the run must not go on: the rules could leave
 * while the container still sends). Only when j has a keeper (after
 * al_netns_join_open()). */
int al_netns_join_give_pidfd(struct al_netns_join *j, int pidfd, struct al_error *err);

/* Remove the rules from the namespace (it outlives the container), and
 * close everything. NULL is fine. */
void al_netns_join_free(struct al_netns_join *j);
