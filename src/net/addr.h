/* Addresses (pure: no syscalls). Addresses are always carried as struct
 * in6_addr; IPv4 is stored IPv4-mapped (::ffff:a.b.c.d). al_addr_class()
 * sorts an address into public and the special ranges that the
 * private-address guard refuses. */
#pragma once

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Address classes for the private-address guard. */
enum al_addr_class {
	AL_ADDR_PUBLIC = 0,
	AL_ADDR_LOOPBACK,     /* 127/8, ::1 */
	AL_ADDR_PRIVATE,      /* RFC 1918, fec0::/10 (deprecated site-local) */
	AL_ADDR_LINK_LOCAL,   /* 169.254/16 (incl. 169.254.169.254), fe80::/10 */
	AL_ADDR_CGNAT,	      /* 100.64/10 */
	AL_ADDR_UNIQUE_LOCAL, /* fc00::/7 */
	AL_ADDR_MULTICAST,    /* 224/4, ff00::/8 */
	AL_ADDR_UNSPECIFIED,  /* 0.0.0.0, :: */
	AL_ADDR_RESERVED,     /* everything else that is not global unicast:
			       * 0/8, 192.0.0/24, documentation ranges,
			       * 198.18/15, 240/4, 255.255.255.255, 6to4,
			       * Teredo, NAT64 local use, discard, outside
			       * 2000::/3 ... */
};

/* Classify addr. IPv4-mapped addresses (::ffff:0:0/96) and NAT64
 * well-known-prefix addresses (64:ff9b::/96) are classified as the IPv4
 * address they carry. */
enum al_addr_class al_addr_class(const struct in6_addr *addr);

/* Stable lower-case name of a class for audit records ("link-local"). */
const char *al_addr_class_name(enum al_addr_class c);

/* Store the IPv4 address given in network byte order as IPv4-mapped. */
void al_addr_from_ipv4(const uint8_t v4[4], struct in6_addr *ret);

/* True for IPv4-mapped addresses. */
bool al_addr_is_ipv4(const struct in6_addr *addr);

/* True if the first bits of a and p agree. */
bool al_addr_prefix_match(const uint8_t *a, const uint8_t *p, unsigned bits);

/* An address as text: dotted quad for IPv4 (and IPv4-mapped), else IPv6. */
void al_addr_format(const struct in6_addr *addr, char *buf, size_t len);
