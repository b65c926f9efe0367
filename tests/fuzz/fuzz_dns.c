/* libFuzzer target: the DNS query parser and the answer builders
 * (gateway/dns.c). Queries come from the sandbox's resolver. Invariants:
 * answers stay within the UDP bound, echo the ID and the question, and a
 * message is answered bare only when it is a query. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gateway/dns.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void answer(const struct al_dns_query *q)
{
	static uint8_t out[70000];
	struct in6_addr addrs[48];
	size_t limit;
	int r;

	for (size_t i = 0; i < 48; i++) {
		if (i % 2)
			al_addr_from_ipv4((const uint8_t[]){198, 18, 0, (uint8_t)i}, &addrs[i]);
		else
			memset(&addrs[i], (int)i + 0x20, sizeof(addrs[i]));
	}
	limit = q->edns ? (q->edns_udp_size < AL_DNS_EDNS_MAX ? q->edns_udp_size : AL_DNS_EDNS_MAX)
			: AL_DNS_UDP_MAX;
	r = al_dns_format_answer(q, addrs, 48, 300, 0, out, sizeof(out));
	if (r == -EINVAL)
		return;
	if (r < 0 || (size_t)r > limit || out[0] != q->id >> 8 || out[1] != (q->id & 0xff) ||
	    memcmp(out + 12, q->qname, q->qname_len) != 0)
		__builtin_trap();
	r = al_dns_format_answer(q, addrs, 48, 300, AL_DNS_TCP, out, sizeof(out));
	if (r < 0)
		__builtin_trap();
}

static void query(const uint8_t *data, size_t size)
{
	struct al_dns_query q;
	uint8_t out[600];
	int r = al_dns_parse_query(data, size, &q, NULL);

	if (r < 0) {
		r = al_dns_format_bare_error(data, size, AL_DNS_RCODE_FORMERR, out, sizeof(out));
		if (r >= 0 && (size < 12 || (data[2] & 0x80)))
			__builtin_trap();
		return;
	}
	if (q.qname_len < 1 || q.qname_len > AL_DNS_NAME_WIRE || strlen(q.name) > AL_HOST_MAX)
		__builtin_trap();
	r = al_dns_format_error(&q, AL_DNS_RCODE_REFUSED, out, sizeof(out));
	if (r < 12)
		__builtin_trap();
	answer(&q);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t off, len;

	query(data, size);
	if (al_dns_tcp_frame(data, size, &off, &len) > 0)
		query(data + off, len);
	return 0;
}
