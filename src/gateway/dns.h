/* DNS queries and answers for the gateway's stub resolver (RFC 1035 wire
 * format; pure: no syscalls).
 *
 * The sandbox's resolver sends a query; the stub parses it strictly
 * (exactly one question, no answer or authority records, at most one
 * additional record and that one an EDNS OPT) and answers from the
 * allowlist with one of the builders below. Messages are taken without the
 * two-byte TCP length prefix; al_dns_tcp_frame() splits a TCP stream.
 * Nothing is allocated: results go into a caller-provided struct with
 * public fields. */
#pragma once

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "net/allow.h"

#define AL_DNS_HEADER_LEN 12
#define AL_DNS_UDP_MAX	  512  /* without EDNS (RFC 1035) */
#define AL_DNS_EDNS_MAX	  1232 /* the largest UDP answer we send, and advertise */
#define AL_DNS_NAME_WIRE  255  /* longest name in wire form */

#define AL_DNS_TYPE_A	 1
#define AL_DNS_TYPE_AAAA 28
#define AL_DNS_TYPE_OPT	 41
#define AL_DNS_CLASS_IN	 1

#define AL_DNS_RCODE_NOERROR  0
#define AL_DNS_RCODE_FORMERR  1
#define AL_DNS_RCODE_SERVFAIL 2
#define AL_DNS_RCODE_NXDOMAIN 3
#define AL_DNS_RCODE_NOTIMP   4
#define AL_DNS_RCODE_REFUSED  5

struct al_dns_query {
	uint16_t id;
	bool rd; /* recursion desired: echoed */
	bool cd; /* checking disabled: echoed */
	/* Lower-case dotted name without the trailing dot; "." for the root.
	 * Labels hold only [A-Za-z0-9_-]. */
	char name[AL_HOST_MAX + 1];
	/* The question name in wire form, uncompressed, in the case it was
	 * sent (resolvers that randomise case check the echo). */
	uint8_t qname[AL_DNS_NAME_WIRE];
	uint8_t qname_len;
	uint16_t qtype;
	uint16_t qclass;
	bool edns;		/* the query carried an OPT record */
	uint16_t edns_udp_size; /* its UDP payload size (at least 512) */
	uint8_t edns_version;
	bool edns_do; /* DNSSEC OK */
};

/* Parse the query message msg (len bytes). Returns 0 and fills *ret, or,
 * with the reason in err and *ret untouched:
 *   -EPROTO     malformed, or not a plain query (QR set, TC set, a
 *               non-zero RCODE, QDCOUNT not 1, answers or authority
 *               records, an additional record that is not a root-owned
 *               OPT, trailing bytes, bad labels or compression pointers):
 *               answer FORMERR with al_dns_format_bare_error();
 *   -EOPNOTSUPP an opcode other than QUERY: answer NOTIMP the same way.
 * Compression pointers may only point backwards, past the header and below
 * every offset the name has visited, so they cannot loop. */
int al_dns_parse_query(const uint8_t *msg, size_t len, struct al_dns_query *ret,
		       struct al_error *err);

/* Flags for the builders */
#define AL_DNS_TCP 0x1 /* the answer goes over TCP: up to 65535 bytes, no TC */

/* Write a NOERROR answer to q with one A record per IPv4-mapped address
 * (QTYPE A) or one AAAA record per other address (QTYPE AAAA) in addrs;
 * addresses of the other family are skipped, and an answer with none left
 * is NODATA (NOERROR, no records). Each record has the given TTL and a
 * compressed owner name. Over UDP the answer is bounded by 512 bytes, or by
 * the query's EDNS size up to AL_DNS_EDNS_MAX; when the records do not fit
 * they are all left out and TC is set. Returns the length, -EINVAL when
 * QTYPE is neither A nor AAAA, or -ENOSPC when out is too small. */
int al_dns_format_answer(const struct al_dns_query *q, const struct in6_addr *addrs, size_t n_addrs,
			 uint32_t ttl, unsigned flags, uint8_t *out, size_t size);

/* Write an answer with rcode (AL_DNS_RCODE_*: NXDOMAIN, REFUSED, NOTIMP,
 * SERVFAIL, FORMERR or NOERROR for NODATA) and no records, echoing the
 * question. An OPT record is added when the query had one. Returns the
 * length (at most 12 + 255 + 4 + 11 bytes), -EINVAL for an rcode above 15,
 * or -ENOSPC. */
int al_dns_format_error(const struct al_dns_query *q, uint8_t rcode, uint8_t *out, size_t size);

/* Write a header-only answer (no question) with rcode to a message that
 * al_dns_parse_query() refused, echoing its ID, opcode and RD. Returns the
 * length (12), -EINVAL when msg is shorter than a header or is itself a
 * response (never answer those: it could start a loop), or -ENOSPC. */
int al_dns_format_bare_error(const uint8_t *msg, size_t len, uint8_t rcode, uint8_t *out,
			     size_t size);

/* Split one message off a DNS-over-TCP stream: when buf holds the two-byte
 * length and that many bytes, set *ret_off and *ret_len to the message and
 * return the bytes consumed; -EAGAIN when more bytes are needed; -EPROTO for
 * a zero length. */
int al_dns_tcp_frame(const uint8_t *buf, size_t len, size_t *ret_off, size_t *ret_len);
