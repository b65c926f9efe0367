/* gateway/dns.h: query parsing and the stub's answers. */
#include "unit.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "gateway/dns.h"

struct qopts {
	uint16_t id;
	uint8_t f1, f2;
	uint16_t qtype, qclass;
	bool edns;
	uint16_t udp;
	uint8_t edns_flags;
};

static size_t put_name(uint8_t *p, const char *dotted)
{
	size_t n = 0;

	while (*dotted) {
		const char *dot = strchr(dotted, '.');
		size_t l = dot ? (size_t)(dot - dotted) : strlen(dotted);

		p[n++] = (uint8_t)l;
		memcpy(p + n, dotted, l);
		n += l;
		dotted += l + (dot ? 1 : 0);
	}
	p[n++] = 0;
	return n;
}

/* A query as a stub resolver sends it. */
static size_t make_query(uint8_t *m, const char *name, const struct qopts *o)
{
	size_t n;

	memset(m, 0, 12);
	m[0] = (uint8_t)(o->id >> 8);
	m[1] = (uint8_t)o->id;
	m[2] = o->f1;
	m[3] = o->f2;
	m[5] = 1;
	m[11] = o->edns ? 1 : 0;
	n = 12 + put_name(m + 12, name);
	m[n++] = (uint8_t)(o->qtype >> 8);
	m[n++] = (uint8_t)o->qtype;
	m[n++] = (uint8_t)(o->qclass >> 8);
	m[n++] = (uint8_t)o->qclass;
	if (o->edns) {
		/* OPT: root owner, TYPE 41, CLASS is the UDP size, TTL holds
		 * the DO flag, then one 8-byte COOKIE option. */
		static const uint8_t opt[] = {0,  0, 41, 0, 0, 0, 0, 0, 0, 0, 12, 0,
					      10, 0, 8,	 1, 2, 3, 4, 5, 6, 7, 8};

		memcpy(m + n, opt, sizeof(opt));
		m[n + 3] = (uint8_t)(o->udp >> 8);
		m[n + 4] = (uint8_t)o->udp;
		m[n + 7] = o->edns_flags;
		n += sizeof(opt);
	}
	return n;
}

static const struct qopts plain_a = {.id = 0xbeef, .f1 = 0x01, .qtype = 1, .qclass = 1};

static struct al_dns_query q;

static void expect_query(const uint8_t *m, size_t len)
{
	struct al_error err = {0};
	int r;

	memset(&q, 0, sizeof(q));
	r = al_dns_parse_query(m, len, &q, &err);
	if (r != 0)
		fail_msg("al_dns_parse_query gave %d (%s)", r, err.msg);
	/* A datagram is all or nothing: every truncation is malformed. */
	for (size_t n = 0; n < len; n++) {
		struct al_dns_query t;

		if (al_dns_parse_query(m, n, &t, NULL) != -EPROTO)
			fail_msg("query cut to %zu bytes was not -EPROTO", n);
	}
}

static void expect_bad(const uint8_t *m, size_t len, int want, const char *reason)
{
	struct al_error err = {0};
	struct al_dns_query t;
	int r;

	memset(&t, 0x5a, sizeof(t));
	r = al_dns_parse_query(m, len, &t, &err);
	if (r != want)
		fail_msg("al_dns_parse_query gave %d (%s), expected %d", r, err.msg, want);
	assert_int_equal(err.code, -want);
	if (reason)
		assert_contains(err.msg, reason);
	assert_int_equal(((uint8_t *)&t)[0], 0x5a);
}

static void test_parse_basic(void **state)
{
	uint8_t m[600];
	size_t n = make_query(m, "Api.Example.COM", &plain_a);

	expect_query(m, n);
	assert_int_equal(q.id, 0xbeef);
	assert_true(q.rd);
	assert_false(q.cd);
	assert_string_equal(q.name, "api.example.com");
	assert_int_equal(q.qname_len, 17);
	assert_memory_equal(q.qname, "\3Api\7Example\3COM\0", 17);
	assert_int_equal(q.qtype, AL_DNS_TYPE_A);
	assert_int_equal(q.qclass, AL_DNS_CLASS_IN);
	assert_false(q.edns);

	n = make_query(m, "_sip._tcp.example-1.org",
		       &(struct qopts){.id = 1, .f2 = 0x30, .qtype = 33, .qclass = 1});
	expect_query(m, n);
	assert_string_equal(q.name, "_sip._tcp.example-1.org");
	assert_false(q.rd);
	assert_true(q.cd);
	assert_int_equal(q.qtype, 33);

	/* The root. */
	n = make_query(m, "", &plain_a);
	expect_query(m, n);
	assert_string_equal(q.name, ".");
	assert_int_equal(q.qname_len, 1);
}

static void test_parse_edns(void **state)
{
	uint8_t m[600];
	struct qopts o = plain_a;
	size_t n;

	o.edns = true;
	o.udp = 4096;
	o.edns_flags = 0x80;
	n = make_query(m, "example.com", &o);
	expect_query(m, n);
	assert_true(q.edns);
	assert_int_equal(q.edns_udp_size, 4096);
	assert_true(q.edns_do);
	assert_int_equal(q.edns_version, 0);

	o.udp = 100;
	o.edns_flags = 0;
	n = make_query(m, "example.com", &o);
	expect_query(m, n);
	assert_int_equal(q.edns_udp_size, 512);
	assert_false(q.edns_do);

	/* Option lengths that lie about RDATA. */
	n = make_query(m, "example.com", &o);
	m[n - 9] = 9; /* option length 9 in an 8-byte option */
	expect_bad(m, n, -EPROTO, "EDNS option");
	n = make_query(m, "example.com", &o);
	m[n - 13] = 13; /* RDLEN past the end */
	expect_bad(m, n, -EPROTO, "OPT runs past");
	n = make_query(m, "example.com", &o);
	m[n - 13] = 3; /* RDLEN short of the option, trailing bytes */
	expect_bad(m, n, -EPROTO, "EDNS option");
	n = make_query(m, "example.com", &o);
	m[n - 23] = 1; /* owner not root */
	expect_bad(m, n, -EPROTO, "OPT");
	n = make_query(m, "example.com", &o);
	m[n - 21] = 1; /* TYPE A, not OPT */
	expect_bad(m, n, -EPROTO, "OPT");
	n = make_query(m, "example.com", &o);
	expect_bad(m, n + 1, -EPROTO, "trailing");
}

static void test_parse_header_rules(void **state)
{
	uint8_t m[600];
	size_t n = make_query(m, "example.com", &plain_a);

	m[2] |= 0x80;
	expect_bad(m, n, -EPROTO, "response");
	m[2] = 0x01 | (1 << 3);
	expect_bad(m, n, -EOPNOTSUPP, "opcode 1");
	m[2] = 0x01 | (5 << 3);
	expect_bad(m, n, -EOPNOTSUPP, "opcode 5");
	m[2] = 0x03;
	expect_bad(m, n, -EPROTO, "TC");
	m[2] = 0x01;
	m[3] = 0x03;
	expect_bad(m, n, -EPROTO, "RCODE");
	m[3] = 0;
	m[5] = 0;
	expect_bad(m, n, -EPROTO, "one question");
	m[5] = 2;
	expect_bad(m, n, -EPROTO, "one question");
	m[4] = 1;
	m[5] = 1;
	expect_bad(m, n, -EPROTO, "one question");
	m[4] = 0;
	m[7] = 1;
	expect_bad(m, n, -EPROTO, "answer");
	m[7] = 0;
	m[9] = 1;
	expect_bad(m, n, -EPROTO, "authority");
	m[9] = 0;
	m[11] = 2;
	expect_bad(m, n, -EPROTO, "more than one additional");
	m[11] = 1;
	expect_bad(m, n, -EPROTO, "past the message");
	m[11] = 0;
	expect_bad(m, n + 3, -EPROTO, "trailing");
	expect_bad(m, 11, -EPROTO, "header");
	expect_bad(NULL, 0, -EPROTO, "header");
}

static void test_parse_names(void **state)
{
	uint8_t m[1024];
	char name[600];
	size_t n;

	/* 127 one-character labels: 255 bytes in wire form, the most. */
	name[0] = '\0';
	for (int i = 0; i < 127; i++)
		strcat(name, i ? ".a" : "a");
	n = make_query(m, name, &plain_a);
	expect_query(m, n);
	assert_int_equal(q.qname_len, 255);
	assert_int_equal(strlen(q.name), 253);
	/* 128 labels: 257 bytes. */
	strcat(name, ".b");
	n = make_query(m, name, &plain_a);
	expect_bad(m, n, -EPROTO, "255");
	/* Four 63-byte labels: 257 bytes. */
	memset(name, 'x', 255);
	name[63] = name[127] = name[191] = '.';
	name[255] = '\0';
	n = make_query(m, name, &plain_a);
	expect_bad(m, n, -EPROTO, "255");
	name[254] = '\0';
	name[253] = '\0';
	n = make_query(m, name, &plain_a);
	expect_query(m, n);
	assert_int_equal(q.qname_len, 255);

	/* Label length 64 is the 0x40 label type. */
	memset(name, 'y', 64);
	name[64] = '\0';
	n = make_query(m, name, &plain_a);
	expect_bad(m, n, -EPROTO, "label type");
	m[12] = 0x80;
	expect_bad(m, n, -EPROTO, "label type");

	n = make_query(m, "a b.com", &plain_a);
	expect_bad(m, n, -EPROTO, "invalid character");
	n = make_query(m, "ab.com", &plain_a);
	m[14] = '.'; /* a dot inside a label would change the name's meaning */
	expect_bad(m, n, -EPROTO, "invalid character");
	m[14] = 0;
	expect_bad(m, n, -EPROTO, "invalid character");
	m[14] = 0xc3;
	expect_bad(m, n, -EPROTO, "invalid character");
	m[14] = '*';
	expect_bad(m, n, -EPROTO, "invalid character");

	/* A label that claims more bytes than the message has. */
	n = make_query(m, "example.com", &plain_a);
	m[12] = 60;
	expect_bad(m, n, -EPROTO, NULL);
	m[12] = 7;
	expect_bad(m, 12 + 5, -EPROTO, "past the message");
}

static void test_parse_pointers(void **state)
{
	uint8_t m[600];
	size_t n;

	/* A pointer to itself, to the header, forwards, and a loop through
	 * two pointers: none can be valid in a query's only question. */
	n = make_query(m, "", &plain_a);
	memmove(m + 14, m + 13, n - 13);
	m[12] = 0xc0;
	m[13] = 12;
	n++;
	expect_bad(m, n, -EPROTO, "compression pointer");
	m[13] = 0;
	expect_bad(m, n, -EPROTO, "compression pointer");
	m[13] = 4;
	expect_bad(m, n, -EPROTO, "compression pointer");
	m[13] = 14;
	expect_bad(m, n, -EPROTO, "compression pointer");
	m[12] = 0xff;
	m[13] = 0xff;
	expect_bad(m, n, -EPROTO, "compression pointer");
	/* Pointer cut short. */
	m[12] = 0xc0;
	expect_bad(m, 13, -EPROTO, "past the message");

	/* "a" then a pointer back to the start of the name: a loop. */
	n = make_query(m, "a", &plain_a);
	memmove(m + 15, m + 14, n - 14);
	m[14] = 0xc0;
	m[15] = 12;
	n++;
	expect_bad(m, n, -EPROTO, "compression pointer");
	/* ... or to the label itself. */
	m[15] = 13;
	expect_bad(m, n, -EPROTO, "compression pointer");
}

static uint16_t rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static void test_answer(void **state)
{
	uint8_t m[600], out[2048];
	struct in6_addr addrs[3];
	size_t n = make_query(m, "Api.Example.com", &plain_a);
	size_t qend = 12 + 17 + 4;
	int r;

	al_addr_from_ipv4((const uint8_t[]){198, 18, 0, 1}, &addrs[0]);
	inet_pton(AF_INET6, "2001:db8::7", &addrs[1]);
	al_addr_from_ipv4((const uint8_t[]){198, 18, 0, 2}, &addrs[2]);
	expect_query(m, n);
	r = al_dns_format_answer(&q, addrs, 3, 60, 0, out, sizeof(out));
	assert_int_equal(r, qend + 2 * 16);
	assert_int_equal(rd16(out), 0xbeef);
	assert_int_equal(out[2], 0x81); /* QR, RD */
	assert_int_equal(out[3], 0x80); /* RA, NOERROR */
	assert_int_equal(rd16(out + 4), 1);
	assert_int_equal(rd16(out + 6), 2);
	assert_int_equal(rd16(out + 8), 0);
	assert_int_equal(rd16(out + 10), 0);
	assert_memory_equal(out + 12, "\3Api\7Example\3com\0\0\1\0\1", 21);
	assert_memory_equal(out + qend, "\xc0\x0c\0\1\0\1\0\0\0\x3c\0\4\xc6\x12\0\1", 16);
	assert_memory_equal(out + qend + 16, "\xc0\x0c\0\1\0\1\0\0\0\x3c\0\4\xc6\x12\0\2", 16);

	n = make_query(m, "api.example.com", &(struct qopts){.id = 7, .qtype = 28, .qclass = 1});
	expect_query(m, n);
	r = al_dns_format_answer(&q, addrs, 3, 0x01020304, 0, out, sizeof(out));
	assert_int_equal(r, qend + 28);
	assert_int_equal(out[2], 0x80);
	assert_int_equal(rd16(out + 6), 1);
	assert_memory_equal(out + qend,
			    "\xc0\x0c\0\x1c\0\1\1\2\3\4\0\x10"
			    "\x20\x01\x0d\xb8\0\0\0\0\0\0\0\0\0\0\0\7",
			    28);

	/* NODATA: no address of the asked family. */
	r = al_dns_format_answer(&q, addrs, 1, 60, 0, out, sizeof(out));
	assert_int_equal(r, qend);
	assert_int_equal(rd16(out + 6), 0);
	assert_int_equal(out[3] & 0xf, 0);
	r = al_dns_format_answer(&q, NULL, 0, 60, 0, out, sizeof(out));
	assert_int_equal(r, qend);

	/* Not A or AAAA, or not class IN. */
	q.qtype = 15;
	assert_int_equal(al_dns_format_answer(&q, addrs, 3, 60, 0, out, sizeof(out)), -EINVAL);
	q.qtype = 28;
	q.qclass = 3;
	assert_int_equal(al_dns_format_answer(&q, addrs, 3, 60, 0, out, sizeof(out)), -EINVAL);
	q.qclass = 1;
	assert_int_equal(al_dns_format_answer(NULL, addrs, 3, 60, 0, out, sizeof(out)), -EINVAL);
	assert_int_equal(al_dns_format_answer(&q, NULL, 3, 60, 0, out, sizeof(out)), -EINVAL);
	/* Small buffers: -ENOSPC, never an overrun. */
	for (size_t size = 0; size < qend + 28; size++) {
		memset(out, 0xee, sizeof(out));
		assert_int_equal(al_dns_format_answer(&q, addrs, 3, 60, 0, out, size), -ENOSPC);
		assert_int_equal(out[size], 0xee);
	}
}

static void test_answer_truncation(void **state)
{
	uint8_t m[600], out[4096];
	struct in6_addr addrs[40];
	struct qopts o = plain_a;
	size_t n, base;
	int r;

	for (int i = 0; i < 40; i++)
		al_addr_from_ipv4((const uint8_t[]){198, 18, 1, (uint8_t)i}, &addrs[i]);
	n = make_query(m, "example.com", &o);
	expect_query(m, n);
	base = 12 + 13 + 4;
	/* 40 A records need 640 bytes: over 512 without EDNS, so TC. */
	r = al_dns_format_answer(&q, addrs, 40, 60, 0, out, sizeof(out));
	assert_int_equal(r, base);
	assert_int_equal(out[2], 0x83); /* QR, TC, RD */
	assert_int_equal(rd16(out + 6), 0);
	/* 30 fit (29 + 480 = 509). */
	r = al_dns_format_answer(&q, addrs, 30, 60, 0, out, sizeof(out));
	assert_int_equal(r, base + 30 * 16);
	assert_int_equal(out[2], 0x81);
	/* Over TCP all 40 fit. */
	r = al_dns_format_answer(&q, addrs, 40, 60, AL_DNS_TCP, out, sizeof(out));
	assert_int_equal(r, base + 40 * 16);
	assert_int_equal(rd16(out + 6), 40);

	/* With EDNS (4096 asked, 1232 granted) they fit, and OPT is echoed. */
	o.edns = true;
	o.udp = 4096;
	o.edns_flags = 0x80;
	n = make_query(m, "example.com", &o);
	expect_query(m, n);
	r = al_dns_format_answer(&q, addrs, 40, 60, 0, out, sizeof(out));
	assert_int_equal(r, base + 40 * 16 + 11);
	assert_int_equal(rd16(out + 10), 1);
	assert_memory_equal(out + r - 11, "\0\0\x29\x04\xd0\0\0\x80\0\0\0", 11);
	/* ... but 100 records (1600 bytes) do not. */
	{
		struct in6_addr many[100];

		for (int i = 0; i < 100; i++)
			many[i] = addrs[i % 40];
		r = al_dns_format_answer(&q, many, 100, 60, 0, out, sizeof(out));
		assert_int_equal(r, base + 11);
		assert_true(out[2] & 0x02);
		assert_int_equal(rd16(out + 10), 1);
		/* The truncated answer itself must fit the buffer. */
		assert_int_equal(al_dns_format_answer(&q, many, 100, 60, 0, out, base + 10),
				 -ENOSPC);
	}
	/* EDNS at 600 bytes: 35 records (560 + 29 + 11 = 600) fit, 36 do not. */
	o.udp = 600;
	n = make_query(m, "example.com", &o);
	expect_query(m, n);
	assert_int_equal(al_dns_format_answer(&q, addrs, 35, 60, 0, out, sizeof(out)),
			 base + 35 * 16 + 11);
	assert_int_equal(al_dns_format_answer(&q, addrs, 36, 60, 0, out, sizeof(out)), base + 11);
}

static void test_errors(void **state)
{
	uint8_t m[600], out[600];
	struct qopts o = plain_a;
	size_t n = make_query(m, "Blocked.Example", &o);
	static const uint8_t codes[] = {AL_DNS_RCODE_NXDOMAIN, AL_DNS_RCODE_REFUSED,
					AL_DNS_RCODE_NOTIMP,   AL_DNS_RCODE_SERVFAIL,
					AL_DNS_RCODE_FORMERR,  AL_DNS_RCODE_NOERROR};
	int r;

	expect_query(m, n);
	for (size_t i = 0; i < sizeof(codes); i++) {
		r = al_dns_format_error(&q, codes[i], out, sizeof(out));
		assert_int_equal(r, 12 + 17 + 4);
		assert_int_equal(rd16(out), 0xbeef);
		assert_int_equal(out[2], 0x81);
		assert_int_equal(out[3], 0x80 | codes[i]);
		assert_int_equal(rd16(out + 4), 1);
		assert_int_equal(rd16(out + 6), 0);
		assert_memory_equal(out + 12, "\7Blocked\7Example\0\0\1\0\1", 21);
	}
	assert_int_equal(al_dns_format_error(&q, 16, out, sizeof(out)), -EINVAL);
	assert_int_equal(al_dns_format_error(&q, 3, out, 32), -ENOSPC);
	assert_int_equal(al_dns_format_error(NULL, 3, out, sizeof(out)), -EINVAL);

	o.edns = true;
	o.udp = 1232;
	o.f2 = 0x10;
	n = make_query(m, "x.test", &o);
	expect_query(m, n);
	r = al_dns_format_error(&q, AL_DNS_RCODE_REFUSED, out, sizeof(out));
	assert_int_equal(r, 12 + 8 + 4 + 11);
	assert_int_equal(out[3], 0x80 | 0x10 | 5);
	assert_int_equal(rd16(out + 10), 1);
	assert_memory_equal(out + r - 11, "\0\0\x29\x04\xd0\0\0\0\0\0\0", 11);
}

static void test_bare_error(void **state)
{
	uint8_t m[600], out[64];
	size_t n = make_query(m, "example.com", &plain_a);

	m[2] = 0x01 | (2 << 3); /* STATUS */
	assert_int_equal(al_dns_parse_query(m, n, &q, NULL), -EOPNOTSUPP);
	assert_int_equal(al_dns_format_bare_error(m, n, AL_DNS_RCODE_NOTIMP, out, sizeof(out)), 12);
	assert_memory_equal(out, "\xbe\xef\x91\x84\0\0\0\0\0\0\0\0", 12);
	assert_int_equal(al_dns_format_bare_error(m, 12, AL_DNS_RCODE_FORMERR, out, 12), 12);
	assert_int_equal(out[3], 0x81);
	assert_int_equal(al_dns_format_bare_error(m, 12, AL_DNS_RCODE_FORMERR, out, 11), -ENOSPC);
	assert_int_equal(al_dns_format_bare_error(m, 11, AL_DNS_RCODE_FORMERR, out, 64), -EINVAL);
	assert_int_equal(al_dns_format_bare_error(m, 12, 16, out, 64), -EINVAL);
	/* Never answer a response. */
	m[2] |= 0x80;
	assert_int_equal(al_dns_format_bare_error(m, n, AL_DNS_RCODE_FORMERR, out, 64), -EINVAL);
	assert_int_equal(al_dns_format_bare_error(NULL, 0, AL_DNS_RCODE_FORMERR, out, 64), -EINVAL);
}

static void test_tcp_frame(void **state)
{
	uint8_t buf[64] = {0, 5, 1, 2, 3, 4, 5, 0, 3};
	size_t off = 99, len = 99;

	assert_int_equal(al_dns_tcp_frame(buf, 0, &off, &len), -EAGAIN);
	assert_int_equal(al_dns_tcp_frame(buf, 1, &off, &len), -EAGAIN);
	for (size_t n = 2; n < 7; n++)
		assert_int_equal(al_dns_tcp_frame(buf, n, &off, &len), -EAGAIN);
	assert_int_equal(off, 99);
	assert_int_equal(al_dns_tcp_frame(buf, 9, &off, &len), 7);
	assert_int_equal(off, 2);
	assert_int_equal(len, 5);
	buf[1] = 0;
	assert_int_equal(al_dns_tcp_frame(buf, 9, &off, &len), -EPROTO);
	assert_int_equal(al_dns_tcp_frame(NULL, 9, &off, &len), -EAGAIN);
}

int main(void)
{
	/* clang-format off */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_basic),
		cmocka_unit_test(test_parse_edns),
		cmocka_unit_test(test_parse_header_rules),
		cmocka_unit_test(test_parse_names),
		cmocka_unit_test(test_parse_pointers),
		cmocka_unit_test(test_answer),
		cmocka_unit_test(test_answer_truncation),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_bare_error),
		cmocka_unit_test(test_tcp_frame),
	};
	/* clang-format on */

	return cmocka_run_group_tests(tests, NULL, NULL);
}
