/* Addresses: classes for the private-address guard, and text. */
#include "net/addr.h"

#include <arpa/inet.h>
#include <string.h>

#include "core/cleanup.h"

void al_addr_from_ipv4(const uint8_t v4[4], struct in6_addr *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->s6_addr[10] = 0xff;
	ret->s6_addr[11] = 0xff;
	memcpy(&ret->s6_addr[12], v4, 4);
}

bool al_addr_prefix_match(const uint8_t *a, const uint8_t *p, unsigned bits)
{
	unsigned whole = bits / 8, rest = bits % 8;

	if (memcmp(a, p, whole) != 0)
		return false;
	if (rest == 0)
		return true;
	return ((a[whole] ^ p[whole]) & (uint8_t)(0xff << (8 - rest))) == 0;
}

bool al_addr_is_ipv4(const struct in6_addr *addr)
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

	return memcmp(addr->s6_addr, mapped, sizeof(mapped)) == 0;
}

struct class_range {
	uint8_t prefix[8];
	uint8_t bits;
	enum al_addr_class cls;
};

/* Most specific first: the first match wins. */
static const struct class_range v4_ranges[] = {
    {{0, 0, 0, 0}, 32, AL_ADDR_UNSPECIFIED},
    {{0}, 8, AL_ADDR_RESERVED},
    {{10}, 8, AL_ADDR_PRIVATE},
    {{100, 64}, 10, AL_ADDR_CGNAT},
    {{127}, 8, AL_ADDR_LOOPBACK},
    {{169, 254}, 16, AL_ADDR_LINK_LOCAL},
    {{172, 16}, 12, AL_ADDR_PRIVATE},
    {{192, 0, 0}, 24, AL_ADDR_RESERVED},
    {{192, 0, 2}, 24, AL_ADDR_RESERVED},
    {{192, 88, 99}, 24, AL_ADDR_RESERVED},
    {{192, 168}, 16, AL_ADDR_PRIVATE},
    {{198, 18}, 15, AL_ADDR_RESERVED},
    {{198, 51, 100}, 24, AL_ADDR_RESERVED},
    {{203, 0, 113}, 24, AL_ADDR_RESERVED},
    {{224}, 4, AL_ADDR_MULTICAST},
    {{240}, 4, AL_ADDR_RESERVED},
};

static const struct class_range v6_ranges[] = {
    {{0x00, 0x64, 0xff, 0x9b, 0x00, 0x01}, 48, AL_ADDR_RESERVED},
    {{0x00}, 8, AL_ADDR_RESERVED},
    {{0x01, 0x00, 0, 0, 0, 0, 0, 0}, 64, AL_ADDR_RESERVED},
    {{0x20, 0x01, 0x0d, 0xb8}, 32, AL_ADDR_RESERVED},
    {{0x20, 0x01}, 23, AL_ADDR_RESERVED},
    {{0x20, 0x02}, 16, AL_ADDR_RESERVED},
    {{0x3f, 0xff}, 20, AL_ADDR_RESERVED},
    {{0x5f, 0x00}, 16, AL_ADDR_RESERVED},
    {{0x20}, 3, AL_ADDR_PUBLIC},
    {{0xfc}, 7, AL_ADDR_UNIQUE_LOCAL},
    {{0xfe, 0x80}, 10, AL_ADDR_LINK_LOCAL},
    {{0xfe, 0xc0}, 10, AL_ADDR_PRIVATE},
    {{0xff}, 8, AL_ADDR_MULTICAST},
};

static enum al_addr_class lookup(const struct class_range *t, size_t n, const uint8_t *a,
				 enum al_addr_class otherwise)
{
	for (size_t i = 0; i < n; i++)
		if (al_addr_prefix_match(a, t[i].prefix, t[i].bits))
			return t[i].cls;
	return otherwise;
}

enum al_addr_class al_addr_class(const struct in6_addr *addr)
{
	static const uint8_t nat64[12] = {0x00, 0x64, 0xff, 0x9b};
	const uint8_t *a = addr->s6_addr;

	if (al_addr_is_ipv4(addr) || memcmp(a, nat64, sizeof(nat64)) == 0)
		return lookup(v4_ranges, AL_ARRAY_SIZE(v4_ranges), a + 12, AL_ADDR_PUBLIC);
	if (IN6_IS_ADDR_UNSPECIFIED(addr))
		return AL_ADDR_UNSPECIFIED;
	if (IN6_IS_ADDR_LOOPBACK(addr))
		return AL_ADDR_LOOPBACK;
	/* Outside 2000::/3 nothing is global unicast. */
	return lookup(v6_ranges, AL_ARRAY_SIZE(v6_ranges), a, AL_ADDR_RESERVED);
}

const char *al_addr_class_name(enum al_addr_class c)
{
	switch (c) {
	case AL_ADDR_PUBLIC:
		return "public";
	case AL_ADDR_LOOPBACK:
		return "loopback";
	case AL_ADDR_PRIVATE:
		return "private";
	case AL_ADDR_LINK_LOCAL:
		return "link-local";
	case AL_ADDR_CGNAT:
		return "cgnat";
	case AL_ADDR_UNIQUE_LOCAL:
		return "unique-local";
	case AL_ADDR_MULTICAST:
		return "multicast";
	case AL_ADDR_UNSPECIFIED:
		return "unspecified";
	case AL_ADDR_RESERVED:
		return "reserved";
	}
	return "unknown";
}

void al_addr_format(const struct in6_addr *a, char *buf, size_t len)
{
	if (IN6_IS_ADDR_V4MAPPED(a))
		inet_ntop(AF_INET, &a->s6_addr[12], buf, (socklen_t)len);
	else
		inet_ntop(AF_INET6, a, buf, (socklen_t)len);
}
