#include "gateway/dns.h"

#include <errno.h>
#include <string.h>

/* Header flag bits, first and second flags byte */
#define F1_QR	  0x80
#define F1_OPCODE 0x78
#define F1_TC	  0x02
#define F1_RD	  0x01
#define F2_RA	  0x80
#define F2_CD	  0x10
#define F2_RCODE  0x0f

/* A name may follow at most this many pointers (each must also go lower). */
#define MAX_JUMPS 64

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static bool is_label_char(uint8_t c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '_';
}

/* Append one label (wire form to qname, lower-case text to name). */
static int add_label(struct al_dns_query *q, size_t *wire, size_t *text, const uint8_t *l,
		     uint8_t n, struct al_error *err)
{
	if (*wire + 1 + n + 1 > AL_DNS_NAME_WIRE)
		return al_error_set(err, EPROTO, "DNS name longer than 255 bytes");
	q->qname[(*wire)++] = n;
	if (*text > 0)
		q->name[(*text)++] = '.';
	for (uint8_t i = 0; i < n; i++) {
		uint8_t c = l[i];

		if (!is_label_char(c))
			return al_error_set(err, EPROTO, "invalid character in DNS name");
		q->qname[(*wire)++] = c;
		q->name[(*text)++] = (char)((c >= 'A' && c <= 'Z') ? c - 'A' + 'a' : c);
	}
	return 0;
}

/* Read the name at off into q->name and q->qname; *ret_next is the offset
 * after it in the message (after the first pointer, if any). Each pointer
 * must go below every offset visited so far (and not into the header), so
 * a chain ends after fewer jumps than the message has bytes. A query's only
 * question starts right after the header, so in a query every pointer
 * fails that test: no valid query compresses its question. */
static int read_name(const uint8_t *m, size_t len, size_t off, struct al_dns_query *q,
		     size_t *ret_next, struct al_error *err)
{
	size_t pos = off, low = off, next = 0, wire = 0, text = 0;
	unsigned jumps = 0;
	int r;

	for (;;) {
		uint8_t c;

		if (pos >= len)
			return al_error_set(err, EPROTO, "DNS name runs past the message");
		c = m[pos];
		if ((c & 0xc0) == 0xc0) {
			size_t target;

			if (pos + 1 >= len)
				return al_error_set(err, EPROTO, "DNS name runs past the message");
			target = (size_t)(c & 0x3f) << 8 | m[pos + 1];
			if (target < AL_DNS_HEADER_LEN || target >= low || ++jumps > MAX_JUMPS)
				return al_error_set(err, EPROTO, "bad DNS compression pointer");
			if (next == 0)
				next = pos + 2;
			low = pos = target;
			continue;
		}
		if (c & 0xc0)
			return al_error_set(err, EPROTO, "unsupported DNS label type");
		if (c == 0)
			break;
		if (c > len - pos - 1)
			return al_error_set(err, EPROTO, "DNS label runs past the message");
		r = add_label(q, &wire, &text, m + pos + 1, c, err);
		if (r < 0)
			return r;
		pos += 1 + (size_t)c;
	}
	q->qname[wire++] = 0;
	q->qname_len = (uint8_t)wire;
	if (text == 0)
		q->name[text++] = '.';
	q->name[text] = '\0';
	*ret_next = next ? next : pos + 1;
	return 0;
}

/* The OPT pseudo-record: root owner, TYPE 41, options that tile RDATA. */
static int read_opt(const uint8_t *m, size_t len, size_t *pos, struct al_dns_query *q,
		    struct al_error *err)
{
	const uint8_t *r = m + *pos;
	size_t rdlen, o;

	if (len - *pos < 11)
		return al_error_set(err, EPROTO, "DNS additional record runs past the message");
	if (r[0] != 0 || get16(r + 1) != AL_DNS_TYPE_OPT)
		return al_error_set(err, EPROTO, "DNS additional record is not an EDNS OPT");
	rdlen = get16(r + 9);
	if (rdlen > len - *pos - 11)
		return al_error_set(err, EPROTO, "EDNS OPT runs past the message");
	for (o = 0; o < rdlen;) {
		if (rdlen - o < 4 || get16(r + 11 + o + 2) > rdlen - o - 4)
			return al_error_set(err, EPROTO, "malformed EDNS option");
		o += 4 + get16(r + 11 + o + 2);
	}
	q->edns = true;
	q->edns_udp_size = get16(r + 3) < AL_DNS_UDP_MAX ? AL_DNS_UDP_MAX : get16(r + 3);
	q->edns_version = r[6];
	q->edns_do = (r[7] & 0x80) != 0;
	*pos += 11 + rdlen;
	return 0;
}

static int check_header(const uint8_t *m, struct al_error *err)
{
	if (m[2] & F1_QR)
		return al_error_set(err, EPROTO, "DNS message is a response");
	if (m[2] & F1_OPCODE)
		return al_error_set(err, EOPNOTSUPP, "DNS opcode %u not supported",
				    (m[2] & F1_OPCODE) >> 3);
	if (m[2] & F1_TC)
		return al_error_set(err, EPROTO, "DNS query has TC set");
	if (m[3] & F2_RCODE)
		return al_error_set(err, EPROTO, "DNS query has a non-zero RCODE");
	if (get16(m + 4) != 1)
		return al_error_set(err, EPROTO, "DNS query must have exactly one question");
	if (get16(m + 6) != 0 || get16(m + 8) != 0)
		return al_error_set(err, EPROTO, "DNS query has answer or authority records");
	if (get16(m + 10) > 1)
		return al_error_set(err, EPROTO, "DNS query has more than one additional record");
	return 0;
}

int al_dns_parse_query(const uint8_t *msg, size_t len, struct al_dns_query *ret,
		       struct al_error *err)
{
	struct al_dns_query q = {0};
	size_t pos = 0;
	int r;

	if (!msg || len < AL_DNS_HEADER_LEN)
		return al_error_set(err, EPROTO, "DNS message shorter than a header");
	if (len > 65535)
		return al_error_set(err, EPROTO, "DNS message longer than 65535 bytes");
	r = check_header(msg, err);
	if (r < 0)
		return r;
	q.id = get16(msg);
	q.rd = (msg[2] & F1_RD) != 0;
	q.cd = (msg[3] & F2_CD) != 0;
	r = read_name(msg, len, AL_DNS_HEADER_LEN, &q, &pos, err);
	if (r < 0)
		return r;
	if (len - pos < 4)
		return al_error_set(err, EPROTO, "DNS question runs past the message");
	q.qtype = get16(msg + pos);
	q.qclass = get16(msg + pos + 2);
	pos += 4;
	if (get16(msg + 10) == 1) {
		r = read_opt(msg, len, &pos, &q, err);
		if (r < 0)
			return r;
	}
	if (pos != len)
		return al_error_set(err, EPROTO, "trailing bytes after the DNS query");
	*ret = q;
	return 0;
}

/* Every answer starts with the header and the echoed question; the name
 * starts at offset 12, where answer records point. */
static size_t write_head(const struct al_dns_query *q, uint8_t rcode, uint16_t ancount, bool tc,
			 uint8_t *out)
{
	size_t n = AL_DNS_HEADER_LEN;

	put16(out, q->id);
	out[2] = (uint8_t)(F1_QR | (tc ? F1_TC : 0) | (q->rd ? F1_RD : 0));
	out[3] = (uint8_t)(F2_RA | (q->cd ? F2_CD : 0) | (rcode & F2_RCODE));
	put16(out + 4, 1);
	put16(out + 6, ancount);
	put16(out + 8, 0);
	put16(out + 10, q->edns ? 1 : 0);
	memcpy(out + n, q->qname, q->qname_len);
	n += q->qname_len;
	put16(out + n, q->qtype);
	put16(out + n + 2, q->qclass);
	return n + 4;
}

static size_t write_opt(const struct al_dns_query *q, uint8_t *out)
{
	if (!q->edns)
		return 0;
	out[0] = 0;
	put16(out + 1, AL_DNS_TYPE_OPT);
	put16(out + 3, AL_DNS_EDNS_MAX);
	out[5] = 0; /* extended RCODE */
	out[6] = 0; /* version */
	out[7] = q->edns_do ? 0x80 : 0;
	out[8] = 0;
	put16(out + 9, 0);
	return 11;
}

static size_t base_len(const struct al_dns_query *q)
{
	return AL_DNS_HEADER_LEN + q->qname_len + 4 + (q->edns ? 11 : 0);
}

int al_dns_format_error(const struct al_dns_query *q, uint8_t rcode, uint8_t *out, size_t size)
{
	size_t n;

	if (!q || rcode > F2_RCODE)
		return -EINVAL;
	if (size < base_len(q))
		return -ENOSPC;
	n = write_head(q, rcode, 0, false, out);
	n += write_opt(q, out + n);
	return (int)n;
}

static size_t count_family(const struct in6_addr *addrs, size_t n, bool v4)
{
	size_t c = 0;

	for (size_t i = 0; i < n; i++)
		if (al_addr_is_ipv4(&addrs[i]) == v4)
			c++;
	return c;
}

static size_t write_records(const struct in6_addr *addrs, size_t n, bool v4, uint32_t ttl,
			    uint8_t *out)
{
	size_t rdlen = v4 ? 4 : 16, w = 0;

	for (size_t i = 0; i < n; i++) {
		if (al_addr_is_ipv4(&addrs[i]) != v4)
			continue;
		put16(out + w, 0xc000 | AL_DNS_HEADER_LEN); /* the question's name */
		put16(out + w + 2, v4 ? AL_DNS_TYPE_A : AL_DNS_TYPE_AAAA);
		put16(out + w + 4, AL_DNS_CLASS_IN);
		put16(out + w + 6, (uint16_t)(ttl >> 16));
		put16(out + w + 8, (uint16_t)ttl);
		put16(out + w + 10, (uint16_t)rdlen);
		memcpy(out + w + 12, addrs[i].s6_addr + (v4 ? 12 : 0), rdlen);
		w += 12 + rdlen;
	}
	return w;
}

int al_dns_format_answer(const struct al_dns_query *q, const struct in6_addr *addrs, size_t n_addrs,
			 uint32_t ttl, unsigned flags, uint8_t *out, size_t size)
{
	size_t limit, count, full, n;
	bool v4;

	if (!q || (n_addrs > 0 && !addrs) || q->qclass != AL_DNS_CLASS_IN)
		return -EINVAL;
	if (q->qtype != AL_DNS_TYPE_A && q->qtype != AL_DNS_TYPE_AAAA)
		return -EINVAL;
	v4 = q->qtype == AL_DNS_TYPE_A;
	if (flags & AL_DNS_TCP)
		limit = 65535;
	else if (q->edns)
		limit = q->edns_udp_size < AL_DNS_EDNS_MAX ? q->edns_udp_size : AL_DNS_EDNS_MAX;
	else
		limit = AL_DNS_UDP_MAX;
	count = count_family(addrs, n_addrs, v4);
	full = base_len(q) + count * (12 + (v4 ? 4 : 16));
	if (count > 65535 || full > limit)
		count = 0;
	n = base_len(q) + count * (12 + (v4 ? 4 : 16));
	if (n > size)
		return -ENOSPC;
	n = write_head(q, AL_DNS_RCODE_NOERROR, (uint16_t)count, count == 0 && full > limit, out);
	if (count > 0)
		n += write_records(addrs, n_addrs, v4, ttl, out + n);
	n += write_opt(q, out + n);
	return (int)n;
}

int al_dns_format_bare_error(const uint8_t *msg, size_t len, uint8_t rcode, uint8_t *out,
			     size_t size)
{
	if (!msg || len < AL_DNS_HEADER_LEN || (msg[2] & F1_QR) || rcode > F2_RCODE)
		return -EINVAL;
	if (size < AL_DNS_HEADER_LEN)
		return -ENOSPC;
	memset(out, 0, AL_DNS_HEADER_LEN);
	out[0] = msg[0];
	out[1] = msg[1];
	out[2] = (uint8_t)(F1_QR | (msg[2] & (F1_OPCODE | F1_RD)));
	out[3] = (uint8_t)(F2_RA | rcode);
	return AL_DNS_HEADER_LEN;
}

int al_dns_tcp_frame(const uint8_t *buf, size_t len, size_t *ret_off, size_t *ret_len)
{
	size_t n;

	if (!buf || len < 2)
		return -EAGAIN;
	n = get16(buf);
	if (n == 0)
		return -EPROTO;
	if (len - 2 < n)
		return -EAGAIN;
	*ret_off = 2;
	*ret_len = n;
	return (int)(2 + n);
}
