/* A sandbox's network namespace as the gateway needs it, made from inside
 * it (with CAP_NET_ADMIN there): the native child's steps (steps.c) and the
 * gvisor backend's child, which runs runsc in such a namespace, use the
 * same calls. Each returns -errno on failure (nothing to clean up). */
#pragma once

#include "net/layout.h"

/* Bring up lo. */
int al_netns_loopback_up(void);

/* A listening (TCP) or bound (UDP) socket of the gateway's on
 * 127.0.0.1:its port, nonblocking: its fd. */
int al_netns_listen(enum al_gateway_listener kind);

/* "ip route add default dev lo src 127.0.0.1": a connect() to any address
 * leaves the socket layer and meets the capture's nftables redirect. */
int al_netns_default_route(void);
