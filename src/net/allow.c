#include "net/allow.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/util.h"

/* ASCII-only character classes: the C library's depend on the locale. */
static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool is_hex(char c)
{
	return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static bool is_alpha(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static char lower(char c)
{
	return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

/* Underscores are not valid in host names (RFC 1123) but occur in real DNS
 * names (_dmarc, legacy S3 buckets); they carry no meaning to a resolver or
 * to our matching, so they are let through. */
static bool is_label_char(char c)
{
	return is_alpha(c) || is_digit(c) || c == '-' || c == '_';
}

/* Strict dotted quad: four decimal parts 0-255, no leading zeros, no
 * shorthand ("127.1"), no octal or hex. */
static int parse_ipv4(const char *s, size_t len, uint8_t out[4])
{
	size_t i = 0;

	for (int part = 0; part < 4; part++) {
		unsigned v = 0;
		size_t start;

		if (part > 0) {
			if (i >= len || s[i] != '.')
				return -EINVAL;
			i++;
		}
		start = i;
		while (i < len && is_digit(s[i]) && i - start < 3)
			v = v * 10 + (unsigned)(s[i++] - '0');
		if (i == start || v > 255 || (s[start] == '0' && i - start > 1))
			return -EINVAL;
		out[part] = (uint8_t)v;
	}
	return i == len ? 0 : -EINVAL;
}

static int parse_ipv6(const char *s, size_t len, struct in6_addr *ret, struct al_error *err)
{
	char buf[INET6_ADDRSTRLEN];

	if (memchr(s, '%', len))
		return al_error_set(err, EINVAL, "IPv6 zone ids are not allowed");
	if (len >= sizeof(buf))
		return al_error_set(err, EINVAL, "invalid IPv6 address");
	for (size_t i = 0; i < len; i++)
		if (!is_hex(s[i]) && s[i] != ':' && s[i] != '.')
			return al_error_set(err, EINVAL, "invalid IPv6 address");
	memcpy(buf, s, len);
	buf[len] = '\0';
	if (inet_pton(AF_INET6, buf, ret) != 1)
		return al_error_set(err, EINVAL, "invalid IPv6 address");
	return 0;
}

/* A last label that a resolver would take for a number: "127.1",
 * "0x7f000001" and "1.2.3.0x4" all reach getaddrinfo() as addresses. */
static bool label_is_numeric(const char *l)
{
	size_t i = 0;

	if (l[0] == '0' && l[1] == 'x') {
		for (i = 2; l[i]; i++)
			if (!is_hex(l[i]))
				return false;
		return true;
	}
	for (i = 0; l[i]; i++)
		if (!is_digit(l[i]))
			return false;
	return true;
}

static int check_name(const char *s, size_t len, char *out, struct al_error *err)
{
	size_t label = 0, last = 0;

	if (len > 0 && s[len - 1] == '.')
		len--;
	if (len == 0)
		return al_error_set(err, EINVAL, "empty host name");
	if (len > AL_HOST_MAX)
		return al_error_set(err, EINVAL, "host name longer than %d characters",
				    AL_HOST_MAX);
	for (size_t i = 0; i <= len; i++) {
		if (i < len && s[i] != '.') {
			if (!is_label_char(s[i]))
				return al_error_set(err, EINVAL, "invalid character in host name");
			out[i] = lower(s[i]);
			continue;
		}
		if (i == label)
			return al_error_set(err, EINVAL, "empty label in host name");
		if (i - label > 63)
			return al_error_set(err, EINVAL,
					    "host name label longer than 63 characters");
		if (s[label] == '-' || s[i - 1] == '-')
			return al_error_set(err, EINVAL, "host name label starts or ends with '-'");
		if (i < len)
			out[i] = '.';
		last = label;
		label = i + 1;
	}
	out[len] = '\0';
	if (label_is_numeric(out + last))
		return al_error_set(err, EINVAL, "host name ends in a numeric label");
	return 0;
}

static bool digits_and_dots(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (!is_digit(s[i]) && s[i] != '.')
			return false;
	return true;
}

int al_host_parse(const char *s, size_t len, struct al_host *ret, struct al_error *err)
{
	struct al_host h = {0};
	uint8_t v4[4];
	int r;

	if (!s || len == 0)
		return al_error_set(err, EINVAL, "empty host");
	if (memchr(s, '\0', len))
		return al_error_set(err, EINVAL, "NUL in host");
	if (memchr(s, ':', len)) {
		r = parse_ipv6(s, len, &h.addr, err);
		if (r < 0)
			return r;
		h.kind = AL_HOST_IPV6;
		inet_ntop(AF_INET6, &h.addr, h.text, sizeof(h.text));
	} else if (digits_and_dots(s, len)) {
		if (parse_ipv4(s, len, v4) < 0)
			return al_error_set(err, EINVAL, "invalid IPv4 address");
		h.kind = AL_HOST_IPV4;
		al_addr_from_ipv4(v4, &h.addr);
		snprintf(h.text, sizeof(h.text), "%u.%u.%u.%u", v4[0], v4[1], v4[2], v4[3]);
	} else {
		r = check_name(s, len, h.text, err);
		if (r < 0)
			return r;
		h.kind = AL_HOST_NAME;
	}
	*ret = h;
	return 0;
}

int al_host_format(const struct al_host *h, char *out, size_t size)
{
	int n;

	if (h->kind == AL_HOST_IPV6)
		n = snprintf(out, size, "[%s]", h->text);
	else
		n = snprintf(out, size, "%s", h->text);
	if (n < 0 || (size_t)n >= size)
		return -ENOSPC;
	return n;
}

/* The allowlist */

enum rule_kind {
	RULE_NAME,
	RULE_WILDCARD, /* name holds the suffix after "*." */
	RULE_ADDR,
};

struct al_allow_rule {
	enum rule_kind kind;
	char name[AL_HOST_MAX + 1];
	struct in6_addr addr;
	unsigned prefix; /* of the 128-bit form: IPv4 /16 is 112 */
	bool v4;
	bool default_ports; /* 80 and 443 */
	uint16_t port_lo, port_hi;
	char text[AL_ALLOW_RULE_MAX + 1];
};

struct al_allowlist {
	struct al_allow_rule **rules; /* pointers stay valid as the list grows */
	size_t n;
};

struct al_allowlist *al_allow_new(void)
{
	return xcalloc(1, sizeof(struct al_allowlist));
}

void al_allow_free(struct al_allowlist *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->n; i++)
		free(l->rules[i]);
	free(l->rules);
	free(l);
}

size_t al_allow_count(const struct al_allowlist *l)
{
	return l ? l->n : 0;
}

const char *al_allow_rule_text(const struct al_allow_rule *r)
{
	return r->text;
}

/* Decimal 0..max without sign or leading zeros; -1 on error. */
static long parse_number(const char *s, size_t len, long max)
{
	long v = 0;

	if (len == 0 || len > 6 || (s[0] == '0' && len > 1))
		return -1;
	for (size_t i = 0; i < len; i++) {
		if (!is_digit(s[i]))
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v <= max ? v : -1;
}

static int parse_ports(const char *s, size_t len, struct al_allow_rule *r, struct al_error *err)
{
	const char *dash;
	long lo, hi;

	if (len == 1 && s[0] == '*') {
		r->port_lo = 1;
		r->port_hi = 65535;
		return 0;
	}
	dash = memchr(s, '-', len);
	lo = parse_number(s, dash ? (size_t)(dash - s) : len, 65535);
	hi = dash ? parse_number(dash + 1, len - (size_t)(dash - s) - 1, 65535) : lo;
	if (lo < 1 || hi < 1)
		return al_error_set(err, EINVAL, "port must be 1-65535, a range LOW-HIGH or '*'");
	if (hi < lo)
		return al_error_set(err, EINVAL, "port range %ld-%ld is inverted", lo, hi);
	r->port_lo = (uint16_t)lo;
	r->port_hi = (uint16_t)hi;
	return 0;
}

static bool host_bits_clear(const struct in6_addr *a, unsigned prefix)
{
	for (unsigned bit = prefix; bit < 128; bit++)
		if (a->s6_addr[bit / 8] & (0x80 >> (bit % 8)))
			return false;
	return true;
}

static int parse_cidr(const char *s, size_t len, struct al_allow_rule *r, struct al_error *err)
{
	const char *slash = memchr(s, '/', len);
	size_t alen = (size_t)(slash - s);
	struct al_host h;
	long bits;
	unsigned max;

	if (al_host_parse(s, alen, &h, err) < 0)
		return -EINVAL;
	if (h.kind == AL_HOST_NAME)
		return al_error_set(err, EINVAL, "a CIDR needs an IPv4 or IPv6 address");
	max = h.kind == AL_HOST_IPV4 ? 32 : 128;
	bits = parse_number(slash + 1, len - alen - 1, max);
	if (bits < 0)
		return al_error_set(err, EINVAL, "CIDR prefix must be 0-%u", max);
	r->addr = h.addr;
	r->prefix = (unsigned)bits + (h.kind == AL_HOST_IPV4 ? 96 : 0);
	if (!host_bits_clear(&r->addr, r->prefix))
		return al_error_set(err, EINVAL, "CIDR has bits set after the /%ld prefix", bits);
	r->v4 = al_addr_is_ipv4(&r->addr) && r->prefix >= 96;
	r->kind = RULE_ADDR;
	return 0;
}

static int parse_rule_host(const char *s, size_t len, struct al_allow_rule *r, struct al_error *err)
{
	struct al_host h;

	if (len == 1 && s[0] == '*')
		return al_error_set(err, EINVAL, "'*' alone would allow every host");
	if (len > 2 && s[0] == '*' && s[1] == '.' && !memchr(s + 2, '*', len - 2)) {
		if (al_host_parse(s + 2, len - 2, &h, err) < 0)
			return -EINVAL;
		if (h.kind != AL_HOST_NAME)
			return al_error_set(err, EINVAL,
					    "a wildcard needs a domain name after '*.'");
		r->kind = RULE_WILDCARD;
		memcpy(r->name, h.text, sizeof(r->name));
		return 0;
	}
	if (memchr(s, '*', len))
		return al_error_set(
		    err, EINVAL,
		    "'*' is allowed only as the whole first label (\"*.example.com\")");
	if (memchr(s, '/', len))
		return parse_cidr(s, len, r, err);
	if (al_host_parse(s, len, &h, err) < 0)
		return -EINVAL;
	if (h.kind == AL_HOST_NAME) {
		r->kind = RULE_NAME;
		memcpy(r->name, h.text, sizeof(r->name));
		return 0;
	}
	r->kind = RULE_ADDR;
	r->addr = h.addr;
	r->prefix = 128;
	r->v4 = al_addr_is_ipv4(&r->addr);
	return 0;
}

/* Split "host", "host:ports", "[v6]", "[v6]:ports" or bare "v6" (two or more
 * colons and no brackets: never a port). */
static int split_rule(const char *s, size_t len, const char **host, size_t *hlen,
		      const char **ports, size_t *plen, struct al_error *err)
{
	const char *colon;

	*ports = NULL;
	*plen = 0;
	if (s[0] == '[') {
		const char *close = memchr(s, ']', len);

		if (!close)
			return al_error_set(err, EINVAL, "missing ']'");
		*host = s + 1;
		*hlen = (size_t)(close - s) - 1;
		if (!memchr(*host, ':', *hlen))
			return al_error_set(err, EINVAL, "brackets are only for IPv6 addresses");
		if ((size_t)(close - s) + 1 == len)
			return 0;
		if (close[1] != ':')
			return al_error_set(err, EINVAL, "expected ':PORT' after ']'");
		*ports = close + 2;
		*plen = len - (size_t)(close - s) - 2;
		return 0;
	}
	colon = memchr(s, ':', len);
	*host = s;
	*hlen = len;
	if (colon && !memchr(colon + 1, ':', len - (size_t)(colon - s) - 1)) {
		*hlen = (size_t)(colon - s);
		*ports = colon + 1;
		*plen = len - *hlen - 1;
	}
	return 0;
}

static int parse_rule(const char *s, struct al_allow_rule *r, struct al_error *err)
{
	size_t len = strlen(s), hlen = 0, plen = 0;
	const char *host = NULL, *ports = NULL;
	int ret;

	if (len == 0)
		return al_error_set(err, EINVAL, "empty rule");
	if (strstr(s, "://"))
		return al_error_set(err, EINVAL,
				    "give a host and port, not a URL (e.g. api.example.com:443)");
	if (len > AL_ALLOW_RULE_MAX)
		return al_error_set(err, EINVAL, "rule longer than %d characters",
				    AL_ALLOW_RULE_MAX);
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] <= ' ' || (unsigned char)s[i] >= 0x7f)
			return al_error_set(err, EINVAL, "space or control character in rule");
	ret = split_rule(s, len, &host, &hlen, &ports, &plen, err);
	if (ret < 0)
		return ret;
	if (hlen == 0)
		return al_error_set(err, EINVAL, "empty host");
	ret = parse_rule_host(host, hlen, r, err);
	if (ret < 0)
		return ret;
	if (!ports) {
		r->default_ports = true;
		r->port_lo = 80;
		r->port_hi = 443;
		return 0;
	}
	return parse_ports(ports, plen, r, err);
}

/* Rule text for a message: printable ASCII only, bounded. */
static void printable(const char *s, char *out, size_t size)
{
	size_t i;

	for (i = 0; s[i] && i + 1 < size; i++)
		out[i] = (s[i] >= ' ' && s[i] < 0x7f) ? s[i] : '?';
	out[i] = '\0';
}

int al_allow_add(struct al_allowlist *l, const char *rule, struct al_error *err)
{
	struct al_allow_rule r = {0};
	char shown[64];

	if (!rule)
		return al_error_set(err, EINVAL, "allow rule missing");
	if (parse_rule(rule, &r, err) < 0) {
		printable(rule, shown, sizeof(shown));
		return al_error_wrap(err, "allow rule \"%s%s\"", shown,
				     strlen(rule) >= sizeof(shown) ? "..." : "");
	}
	memcpy(r.text, rule, strlen(rule) + 1);
	if (!l)
		return 0;
	l->rules = xrealloc(l->rules, (l->n + 1) * sizeof(*l->rules));
	l->rules[l->n] = xmalloc(sizeof(r));
	memcpy(l->rules[l->n], &r, sizeof(r));
	l->n++;
	return 0;
}

static bool port_ok(const struct al_allow_rule *r, uint16_t port)
{
	if (r->default_ports)
		return port == 80 || port == 443;
	return port >= r->port_lo && port <= r->port_hi;
}

bool al_allow_match_addr(const struct al_allowlist *l, const struct in6_addr *addr, uint16_t port,
			 const struct al_allow_rule **ret_rule)
{
	bool v4;

	if (!l || !addr || port == 0)
		return false;
	v4 = al_addr_is_ipv4(addr);
	for (size_t i = 0; i < l->n; i++) {
		const struct al_allow_rule *r = l->rules[i];

		if (r->kind != RULE_ADDR || r->v4 != v4 || !port_ok(r, port))
			continue;
		if (!al_addr_prefix_match(addr->s6_addr, r->addr.s6_addr, r->prefix))
			continue;
		if (ret_rule)
			*ret_rule = r;
		return true;
	}
	return false;
}

static bool name_matches(const struct al_allow_rule *r, const char *name, size_t len)
{
	size_t sl;

	if (r->kind == RULE_NAME)
		return strcmp(r->name, name) == 0;
	if (r->kind != RULE_WILDCARD)
		return false;
	sl = strlen(r->name);
	return len > sl + 1 && name[len - sl - 1] == '.' && strcmp(name + len - sl, r->name) == 0;
}

bool al_allow_match_name(const struct al_allowlist *l, const char *name, uint16_t port,
			 const struct al_allow_rule **ret_rule)
{
	struct al_host h;
	size_t len;
	int r;

	if (!l || !name || port == 0)
		return false;
	len = strlen(name);
	if (len > 2 && name[0] == '[' && name[len - 1] == ']') {
		r = al_host_parse(name + 1, len - 2, &h, NULL);
		if (r < 0 || h.kind != AL_HOST_IPV6)
			return false;
	} else if (al_host_parse(name, len, &h, NULL) < 0) {
		return false;
	}
	if (h.kind != AL_HOST_NAME)
		return al_allow_match_addr(l, &h.addr, port, ret_rule);
	len = strlen(h.text);
	for (size_t i = 0; i < l->n; i++) {
		if (!port_ok(l->rules[i], port) || !name_matches(l->rules[i], h.text, len))
			continue;
		if (ret_rule)
			*ret_rule = l->rules[i];
		return true;
	}
	return false;
}

bool al_allow_match_name_any_port(const struct al_allowlist *l, const char *name,
				  const struct al_allow_rule **ret_rule)
{
	struct al_host h;
	size_t len;

	if (!l || !name || al_host_parse(name, strlen(name), &h, NULL) < 0 ||
	    h.kind != AL_HOST_NAME)
		return false;
	len = strlen(h.text);
	for (size_t i = 0; i < l->n; i++) {
		if (!name_matches(l->rules[i], h.text, len))
			continue;
		if (ret_rule)
			*ret_rule = l->rules[i];
		return true;
	}
	return false;
}

enum al_addr_class al_allow_rule_class(const struct al_allow_rule *r)
{
	if (r->kind != RULE_ADDR) {
		/* RFC 6761: localhost and every name below it are loopback; the
		 * host's /etc/hosts says so for localhost, and resolvers may
		 * answer the others so without asking anyone. */
		static const char suffix[] = ".localhost";
		size_t n = strlen(r->name), l = sizeof(suffix) - 1;
		bool local = strcmp(r->name, suffix + 1) == 0 ||
			     (n > l && strcmp(r->name + n - l, suffix) == 0);
		return local ? AL_ADDR_LOOPBACK : AL_ADDR_PUBLIC;
	}
	/* The whole network, not only its first address: 0.0.0.0/0 starts
	 * with the unspecified address but names no one kind of space. */
	struct in6_addr last = r->addr;
	for (unsigned bit = r->prefix; bit < 128; bit++)
		last.s6_addr[bit / 8] |= (uint8_t)(0x80 >> (bit % 8));
	enum al_addr_class first = al_addr_class(&r->addr);
	return first == al_addr_class(&last) ? first : AL_ADDR_PUBLIC;
}

bool al_allow_rule_covers_class(const struct al_allow_rule *r, const struct in6_addr *addr)
{
	/* The rule's own network must be of the address's kind: 10.0.0.0/8
	 * or 169.254.169.254 name private or link-local space on purpose;
	 * 0.0.0.0/0 merely contains it. */
	return r && r->kind == RULE_ADDR && al_allow_rule_class(r) == al_addr_class(addr);
}

const struct al_allow_rule *al_allow_rule_at(const struct al_allowlist *l, size_t i)
{
	return l && i < l->n ? l->rules[i] : NULL;
}

bool al_allow_rule_network(const struct al_allow_rule *r, struct in6_addr *ret_addr,
			   unsigned *ret_prefix)
{
	if (r->kind != RULE_ADDR)
		return false;
	*ret_addr = r->addr;
	*ret_prefix = r->prefix;
	return true;
}

void al_allow_rule_ports(const struct al_allow_rule *r, char *buf, size_t size)
{
	if (r->default_ports)
		snprintf(buf, size, "%s", "");
	else if (r->port_lo == 1 && r->port_hi == 65535)
		snprintf(buf, size, ":*");
	else if (r->port_lo == r->port_hi)
		snprintf(buf, size, ":%u", r->port_lo);
	else
		snprintf(buf, size, ":%u-%u", r->port_lo, r->port_hi);
}

/* The ports of inner are all ports of outer. */
static bool ports_within(const struct al_allow_rule *inner, const struct al_allow_rule *outer)
{
	if (outer->default_ports) {
		if (inner->default_ports)
			return true;
		return inner->port_lo == inner->port_hi &&
		       (inner->port_lo == 80 || inner->port_lo == 443);
	}
	if (inner->default_ports)
		return outer->port_lo <= 80 && outer->port_hi >= 443;
	return outer->port_lo <= inner->port_lo && inner->port_hi <= outer->port_hi;
}

bool al_allow_rule_within(const struct al_allow_rule *inner, const struct al_allow_rule *outer)
{
	size_t il, ol;

	if (!ports_within(inner, outer))
		return false;
	switch (inner->kind) {
	case RULE_ADDR:
		return outer->kind == RULE_ADDR && outer->v4 == inner->v4 &&
		       outer->prefix <= inner->prefix &&
		       al_addr_prefix_match(inner->addr.s6_addr, outer->addr.s6_addr,
					    outer->prefix);
	case RULE_NAME:
		return name_matches(outer, inner->name, strlen(inner->name));
	case RULE_WILDCARD:
		if (outer->kind != RULE_WILDCARD)
			return false;
		/* *.a.example.com lies within *.example.com and itself. */
		il = strlen(inner->name);
		ol = strlen(outer->name);
		return strcmp(inner->name, outer->name) == 0 ||
		       (il > ol + 1 && inner->name[il - ol - 1] == '.' &&
			strcmp(inner->name + il - ol, outer->name) == 0);
	}
	return false;
}

const struct al_allow_rule *al_allow_find_within(const struct al_allowlist *l,
						 const struct al_allow_rule *inner)
{
	for (size_t i = 0; l && i < l->n; i++)
		if (al_allow_rule_within(inner, l->rules[i]))
			return l->rules[i];
	return NULL;
}

bool al_allow_match_addr_any_port(const struct al_allowlist *l, const struct in6_addr *addr,
				  const struct al_allow_rule **ret_rule)
{
	bool v4;

	if (!l || !addr)
		return false;
	v4 = al_addr_is_ipv4(addr);
	for (size_t i = 0; i < l->n; i++) {
		const struct al_allow_rule *r = l->rules[i];
		if (r->kind != RULE_ADDR || r->v4 != v4 ||
		    !al_addr_prefix_match(addr->s6_addr, r->addr.s6_addr, r->prefix))
			continue;
		if (ret_rule)
			*ret_rule = r;
		return true;
	}
	return false;
}

/* The IPv4 address a NAT64 address (64:ff9b::/96, RFC 6052) reaches, as
 * IPv4-mapped; false for any other. */
static bool nat64_target(const struct in6_addr *addr, struct in6_addr *ret)
{
	static const uint8_t nat64[12] = {0x00, 0x64, 0xff, 0x9b};

	if (memcmp(addr->s6_addr, nat64, sizeof(nat64)) != 0)
		return false;
	memset(ret, 0, sizeof(*ret));
	ret->s6_addr[10] = ret->s6_addr[11] = 0xff;
	memcpy(ret->s6_addr + 12, addr->s6_addr + 12, 4);
	return true;
}

bool al_allow_match_never(const struct al_allowlist *l, const struct in6_addr *addr, uint16_t port,
			  const struct al_allow_rule **ret_rule)
{
	struct in6_addr v4;
	bool any = port == 0;

	if (any ? al_allow_match_addr_any_port(l, addr, ret_rule)
		: al_allow_match_addr(l, addr, port, ret_rule))
		return true;
	if (!nat64_target(addr, &v4))
		return false;
	return any ? al_allow_match_addr_any_port(l, &v4, ret_rule)
		   : al_allow_match_addr(l, &v4, port, ret_rule);
}

const struct al_allow_rule *al_allow_find_never(const struct al_allowlist *l,
						const struct al_allow_rule *inner)
{
	const struct al_allow_rule *r = al_allow_find_within(l, inner);
	struct al_allow_rule v4;

	if (r || inner->kind != RULE_ADDR || inner->v4 || inner->prefix < 96 ||
	    !nat64_target(&inner->addr, &v4.addr))
		return r;
	v4 = *inner;
	nat64_target(&inner->addr, &v4.addr);
	v4.v4 = true;
	return al_allow_find_within(l, &v4);
}
