/* SOCKS5 (RFC 1928), server side, as the egress proxy speaks it (pure: no
 * syscalls). Only "no authentication" is offered and only CONNECT is served;
 * BIND and UDP ASSOCIATE are recognised so the caller can refuse them with
 * AL_SOCKS_REP_CMD_NOT_SUPPORTED.
 *
 * The parsers are incremental: given the bytes received so far they return
 * -EAGAIN until the message is complete, then the number of bytes it took
 * (a client may send the greeting and the request back to back). Nothing is
 * allocated; results go into caller-provided structs with public fields. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "net/allow.h"

#define AL_SOCKS_VERSION 5

/* Authentication methods */
#define AL_SOCKS_METHOD_NONE	      0x00
#define AL_SOCKS_METHOD_NO_ACCEPTABLE 0xff

/* Commands */
#define AL_SOCKS_CMD_CONNECT	   1
#define AL_SOCKS_CMD_BIND	   2
#define AL_SOCKS_CMD_UDP_ASSOCIATE 3

/* Address types */
#define AL_SOCKS_ATYP_IPV4   1
#define AL_SOCKS_ATYP_DOMAIN 3
#define AL_SOCKS_ATYP_IPV6   4

/* Reply codes */
#define AL_SOCKS_REP_SUCCEEDED		 0x00
#define AL_SOCKS_REP_GENERAL_FAILURE	 0x01
#define AL_SOCKS_REP_NOT_ALLOWED	 0x02 /* connection not allowed by ruleset */
#define AL_SOCKS_REP_NETWORK_UNREACHABLE 0x03
#define AL_SOCKS_REP_HOST_UNREACHABLE	 0x04
#define AL_SOCKS_REP_REFUSED		 0x05
#define AL_SOCKS_REP_TTL_EXPIRED	 0x06
#define AL_SOCKS_REP_CMD_NOT_SUPPORTED	 0x07
#define AL_SOCKS_REP_ATYP_NOT_SUPPORTED	 0x08

/* Longest messages: a greeting with 255 methods, a request with a 255-byte
 * domain, a reply with an IPv6 address. */
#define AL_SOCKS_GREETING_MAX (2 + 255)
#define AL_SOCKS_REQUEST_MAX  (4 + 1 + 255 + 2)
#define AL_SOCKS_REPLY_MAX    (4 + 16 + 2)

struct al_socks_greeting {
	uint8_t n_methods;
	bool no_auth; /* the client offers method 0x00 */
};

struct al_socks_request {
	uint8_t cmd;  /* AL_SOCKS_CMD_* (only these three are accepted) */
	uint8_t atyp; /* AL_SOCKS_ATYP_* */
	/* The destination: AL_HOST_IPV4 or AL_HOST_IPV6 for ATYP 1 and 4; for
	 * ATYP 3 the checked, lower-cased name (or the address, if the name
	 * was an IP literal). */
	struct al_host host;
	uint16_t port; /* 0 is refused */
};

/* Parse the method-selection message VER NMETHODS METHODS. Returns the
 * number of bytes consumed and fills *ret, or -EAGAIN (incomplete), or
 * -EPROTO (version not 5, no methods) with the reason in err. */
int al_socks_parse_greeting(const uint8_t *buf, size_t len, struct al_socks_greeting *ret,
			    struct al_error *err);

/* Write the method-selection reply: 0x00 when the client offered it, 0xff
 * (no acceptable method: the caller then closes) otherwise. Returns 2 or
 * -ENOSPC. */
int al_socks_format_method_reply(const struct al_socks_greeting *g, uint8_t *out, size_t size);

/* Parse the request VER CMD RSV ATYP DST.ADDR DST.PORT. Returns the number of
 * bytes consumed and fills *ret, or, with the reason in err:
 *   -EAGAIN       incomplete;
 *   -EOPNOTSUPP   a command other than 1, 2 or 3 (reply 0x07);
 *   -EAFNOSUPPORT an address type other than 1, 3 or 4 (reply 0x08);
 *   -EPROTO       malformed: version not 5, RSV not 0, empty or invalid
 *                 domain name, port 0 (reply 0x01).
 * Errors are reported as soon as the offending byte arrives. */
int al_socks_parse_request(const uint8_t *buf, size_t len, struct al_socks_request *ret,
			   struct al_error *err);

/* The reply code for a failed al_socks_parse_request(); -1 for -EAGAIN. */
int al_socks_reply_code_for_error(int r);

/* Write the reply VER REP RSV ATYP BND.ADDR BND.PORT. bound (may be NULL for
 * 0.0.0.0) is written as IPv4 when IPv4-mapped and as IPv6 otherwise.
 * Returns the length (10 or 22), -ENOSPC, or -EINVAL for a code above 0x08. */
int al_socks_format_reply(uint8_t code, const struct in6_addr *bound, uint16_t port, uint8_t *out,
			  size_t size);
