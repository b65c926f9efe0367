/* The sandbox's network as the gateway lays it out (pure data): the
 * listeners inside the sandbox's network namespace, on 127.0.0.1, and the
 * range the DNS stub hands fake addresses out of. Each port is named here
 * once; the child creates the sockets from this table (sandbox/steps.c),
 * the plan points the proxy variables at them, and the capture rules
 * redirect to the transparent one. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#define AL_GATEWAY_HTTP_PORT	    3128
#define AL_GATEWAY_SOCKS_PORT	    1080
#define AL_GATEWAY_DNS_PORT	    53
#define AL_GATEWAY_TRANSPARENT_PORT 15001
#define AL_DEFAULT_NET_CONNECTIONS  64 /* concurrent, per run */

/* A port as a string literal, for text built at compile time. */
#define AL_PORT_STR_(p) #p
#define AL_PORT_STR(p)	AL_PORT_STR_(p)

enum al_gateway_listener {
	AL_GATEWAY_HTTP,
	AL_GATEWAY_SOCKS,
	AL_GATEWAY_DNS_UDP, /* a bound UDP socket, not a listener */
	AL_GATEWAY_DNS_TCP,
	AL_GATEWAY_TRANSPARENT, /* where nftables redirects other TCP connections */
	AL_GATEWAY_N_LISTENERS,
};

struct al_listener_info {
	const char *name; /* for messages: "http proxy" */
	uint16_t port;
	bool stream; /* TCP; else a bound UDP socket */
	/* The client speaks first (the listener may defer the accept until it
	 * has); a transparent connection may be to a server that speaks
	 * first. */
	bool client_first;
};

/* Indexed by enum al_gateway_listener. */
extern const struct al_listener_info al_gateway_listeners[AL_GATEWAY_N_LISTENERS];

/* The DNS stub answers allowed names with addresses from this range (the
 * benchmarking range, 198.18.0.0/15, never routed on the internet) and
 * maps them back to names: the sandbox never learns a real address. */
#define AL_GATEWAY_FAKE_NET 0xc6120000u /* 198.18.0.0 */
#define AL_GATEWAY_FAKE_MAX 0x1fffe	/* usable addresses in the /15 */
