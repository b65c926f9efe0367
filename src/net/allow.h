/* Egress allowlist and host names (pure: no syscalls).
 *
 * Two related jobs that every gateway parser shares (addresses and their
 * classes are net/addr.h):
 *
 * - al_host_parse() checks one host as hostile code sends it (HTTP target,
 *   Host header, SOCKS domain, TLS SNI, DNS name) and normalises it: a host
 *   name is lower-cased with one trailing dot dropped, an IPv4 literal must be
 *   a strict dotted quad, an IPv6 literal is given without brackets and
 *   without a zone id. Names that a resolver would read as a number
 *   ("127.1", "0x7f000001", "1.2.3.0x4") are refused, so a name can never
 *   smuggle an address past the allowlist.
 * - struct al_allowlist holds the rules of `--allow HOST[:PORT]` and the
 *   policy's network.allow, and answers "is this name or address, on this
 *   port, allowed, and by which rule?".
 *
 * struct al_host is a plain result struct with public fields, so parsers can
 * fill one inside their own caller-provided result structs without
 * allocating. */
#pragma once

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "net/addr.h"

/* Longest host name in text form, without the trailing dot (RFC 1035). */
#define AL_HOST_MAX 253

enum al_host_kind {
	AL_HOST_NONE = 0,
	AL_HOST_NAME, /* a DNS name */
	AL_HOST_IPV4, /* a strict dotted quad */
	AL_HOST_IPV6, /* an IPv6 literal (may itself be IPv4-mapped) */
};

struct al_host {
	enum al_host_kind kind;
	/* NUL-terminated normal form: lower-case name without the trailing
	 * dot, dotted quad, or IPv6 text as inet_ntop() writes it (no
	 * brackets). */
	char text[AL_HOST_MAX + 1];
	/* The address for AL_HOST_IPV4 (IPv4-mapped) and AL_HOST_IPV6; all
	 * zero for names. */
	struct in6_addr addr;
};

/* Parse and normalise the len bytes at s (not NUL-terminated; embedded NULs
 * are refused) as a host name, a dotted-quad IPv4 literal or a bare IPv6
 * literal. Returns 0 and fills *ret, or -EINVAL with the reason in err.
 * Refused: empty names, names over 253 characters, empty labels, labels over
 * 63 characters, characters other than [A-Za-z0-9_-], labels that start or
 * end with '-', a last label that is all digits or 0x-hex unless the whole
 * host is a valid dotted quad, IPv6 zone ids ("fe80::1%eth0"). */
int al_host_parse(const char *s, size_t len, struct al_host *ret, struct al_error *err);

/* Write the host as it appears in an authority: names and IPv4 as text,
 * IPv6 in brackets. Returns the length written (NUL not counted) or -ENOSPC
 * when it does not fit in size bytes including the NUL. */
int al_host_format(const struct al_host *h, char *out, size_t size);

/* Longest rule text kept for audit messages. */
#define AL_ALLOW_RULE_MAX 300

struct al_allowlist;
struct al_allow_rule;

/* A new, empty allowlist (allows nothing). Free with al_allow_free(). */
struct al_allowlist *al_allow_new(void);
void al_allow_free(struct al_allowlist *l);
static inline void al_allow_freep(struct al_allowlist **l)
{
	al_allow_free(*l);
}

/* Parse one rule and append it. Rule syntax: HOST[:PORTS] where HOST is a
 * name ("api.example.com"), a wildcard ("*.example.com": any subdomain at
 * any depth, not example.com itself), an IPv4 literal or CIDR
 * ("10.1.0.0/16"), or an IPv6 literal or CIDR, bracketed when a port follows
 * ("[2001:db8::1]:443", "[fd00::/8]:*") and bare otherwise ("fd00::/8").
 * PORTS is one port, a range "8000-8100" or "*"; without it the rule allows
 * ports 80 and 443. Returns 0, or -EINVAL with a reason naming the rule in
 * err; the list is unchanged on failure. l may be NULL to only check the
 * rule. */
int al_allow_add(struct al_allowlist *l, const char *rule, struct al_error *err);

size_t al_allow_count(const struct al_allowlist *l);

/* True if a rule allows name on port; *ret_rule (may be NULL) is then the
 * first such rule, in the order added. name is matched case-insensitively
 * and with one trailing dot ignored; a name that is an IPv4 or IPv6 literal
 * (bracketed or not) is matched as an address, and an invalid name never
 * matches. Port 0 never matches. */
bool al_allow_match_name(const struct al_allowlist *l, const char *name, uint16_t port,
			 const struct al_allow_rule **ret_rule);

/* True if a name rule allows name on some port (for the DNS stub, which
 * answers names, not connections). */
bool al_allow_match_name_any_port(const struct al_allowlist *l, const char *name,
				  const struct al_allow_rule **ret_rule);

/* True if an address or CIDR rule allows addr on port. IPv4 rules match
 * only IPv4-mapped addresses and IPv6 rules only the others (a rule written
 * as an IPv4-mapped IPv6 literal counts as IPv4). Name rules never match an
 * address. */
bool al_allow_match_addr(const struct al_allowlist *l, const struct in6_addr *addr, uint16_t port,
			 const struct al_allow_rule **ret_rule);

/* The kind of space r names on purpose. For an address or CIDR rule, the
 * class of its whole network when its first and last addresses are of one
 * class (127.0.0.0/8 and ::1 are loopback, 10.0.0.0/8 private); a network
 * that spans classes (0.0.0.0/0, ::/0) names none, and that is
 * AL_ADDR_PUBLIC. For a name rule, AL_ADDR_LOOPBACK for localhost, a name
 * below it and *.localhost (RFC 6761), AL_ADDR_PUBLIC for any other name. */
enum al_addr_class al_allow_rule_class(const struct al_allow_rule *r);

/* True if r is an address or CIDR rule that names addr's class of space on
 * purpose (al_allow_rule_class() is addr's class: loopback, private,
 * link-local, ...): the private-address guard lets such an address through
 * only for a rule like that, not for one that merely contains it
 * (0.0.0.0/0, which also does not name the unspecified address 0.0.0.0). */
bool al_allow_rule_covers_class(const struct al_allow_rule *r, const struct in6_addr *addr);

/* The i-th rule of l in the order added, or NULL past the end. Borrowed. */
const struct al_allow_rule *al_allow_rule_at(const struct al_allowlist *l, size_t i);

/* For an address or CIDR rule: true, with its network address and prefix
 * (of the 128-bit form: an IPv4 /8 is 104, a single address 128). False
 * for a name or wildcard rule, and nothing is written. */
bool al_allow_rule_network(const struct al_allow_rule *r, struct in6_addr *ret_addr,
			   unsigned *ret_prefix);

/* The rule's ports as a rule writes them after the host: ":8080",
 * ":8000-8100", ":*", or "" for the default (80 and 443). */
void al_allow_rule_ports(const struct al_allow_rule *r, char *buf, size_t size);

/* The rule exactly as given, for audit messages. Borrowed from the list. */
const char *al_allow_rule_text(const struct al_allow_rule *r);

/* True if everything inner allows, outer allows too: its ports are
 * outer's, and its host is a name outer's name or wildcard matches, a
 * wildcard at or below outer's wildcard, or a network inside outer's (same
 * family). A name is never within an address rule (its address is not
 * known until it is resolved). */
bool al_allow_rule_within(const struct al_allow_rule *inner, const struct al_allow_rule *outer);

/* The first rule of l that inner lies within, or NULL. */
const struct al_allow_rule *al_allow_find_within(const struct al_allowlist *l,
						 const struct al_allow_rule *inner);

/* True if an address or CIDR rule of l holds addr, whatever its ports. */
bool al_allow_match_addr_any_port(const struct al_allowlist *l, const struct in6_addr *addr,
				  const struct al_allow_rule **ret_rule);

/* For the operator's never rules: true if an address or CIDR rule of l
 * holds addr on port (0: on any port), or holds the IPv4 address a NAT64
 * address (64:ff9b::/96) reaches. */
bool al_allow_match_never(const struct al_allowlist *l, const struct in6_addr *addr, uint16_t port,
			  const struct al_allow_rule **ret_rule);

/* al_allow_find_within() for never rules: a NAT64 rule (64:ff9b::/96 or
 * inside it) is also judged as the IPv4 network it reaches. */
const struct al_allow_rule *al_allow_find_never(const struct al_allowlist *l,
						const struct al_allow_rule *inner);
