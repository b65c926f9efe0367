/* gateway/tls.h: SNI from a TLS ClientHello, whole, split across records,
 * truncated and malformed. */
#include "unit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "gateway/tls.h"

/* A ClientHello captured from `openssl s_client -connect 127.0.0.1:PORT
 * -servername example.test` (OpenSSL 3, TLS 1.3 with key shares), on
 * loopback. */
static const uint8_t real_hello[] = {
    0x16, 0x03, 0x01, 0x01, 0x39, 0x01, 0x00, 0x01, 0x35, 0x03, 0x03, 0x3d, 0x13, 0x4e, 0xc0, 0xfc,
    0x3f, 0x85, 0xd2, 0x99, 0xbb, 0xf2, 0xc7, 0x49, 0x48, 0x2a, 0x20, 0x56, 0xe2, 0x67, 0x98, 0x11,
    0x63, 0x2a, 0xd2, 0xa2, 0x29, 0xe6, 0x67, 0x83, 0xdc, 0x3f, 0x20, 0x20, 0x2c, 0xda, 0x8f, 0x62,
    0xec, 0x3f, 0xc7, 0x60, 0x24, 0x18, 0xbd, 0x87, 0x90, 0x65, 0x84, 0x3f, 0x7b, 0x78, 0x70, 0x93,
    0x17, 0xdb, 0x27, 0x3b, 0x65, 0x15, 0xc0, 0xe2, 0xb2, 0x5b, 0x4c, 0xa3, 0x00, 0x3e, 0x13, 0x02,
    0x13, 0x03, 0x13, 0x01, 0xc0, 0x2c, 0xc0, 0x30, 0x00, 0x9f, 0xcc, 0xa9, 0xcc, 0xa8, 0xcc, 0xaa,
    0xc0, 0x2b, 0xc0, 0x2f, 0x00, 0x9e, 0xc0, 0x24, 0xc0, 0x28, 0x00, 0x6b, 0xc0, 0x23, 0xc0, 0x27,
    0x00, 0x67, 0xc0, 0x0a, 0xc0, 0x14, 0x00, 0x39, 0xc0, 0x09, 0xc0, 0x13, 0x00, 0x33, 0x00, 0x9d,
    0x00, 0x9c, 0x00, 0x3d, 0x00, 0x3c, 0x00, 0x35, 0x00, 0x2f, 0x00, 0xff, 0x01, 0x00, 0x00, 0xae,
    0x00, 0x00, 0x00, 0x11, 0x00, 0x0f, 0x00, 0x00, 0x0c, 0x65, 0x78, 0x61, 0x6d, 0x70, 0x6c, 0x65,
    0x2e, 0x74, 0x65, 0x73, 0x74, 0x00, 0x0b, 0x00, 0x04, 0x03, 0x00, 0x01, 0x02, 0x00, 0x0a, 0x00,
    0x16, 0x00, 0x14, 0x00, 0x1d, 0x00, 0x17, 0x00, 0x1e, 0x00, 0x19, 0x00, 0x18, 0x01, 0x00, 0x01,
    0x01, 0x01, 0x02, 0x01, 0x03, 0x01, 0x04, 0x00, 0x23, 0x00, 0x00, 0x00, 0x16, 0x00, 0x00, 0x00,
    0x17, 0x00, 0x00, 0x00, 0x0d, 0x00, 0x2a, 0x00, 0x28, 0x04, 0x03, 0x05, 0x03, 0x06, 0x03, 0x08,
    0x07, 0x08, 0x08, 0x08, 0x09, 0x08, 0x0a, 0x08, 0x0b, 0x08, 0x04, 0x08, 0x05, 0x08, 0x06, 0x04,
    0x01, 0x05, 0x01, 0x06, 0x01, 0x03, 0x03, 0x03, 0x01, 0x03, 0x02, 0x04, 0x02, 0x05, 0x02, 0x06,
    0x02, 0x00, 0x2b, 0x00, 0x09, 0x08, 0x03, 0x04, 0x03, 0x03, 0x03, 0x02, 0x03, 0x01, 0x00, 0x2d,
    0x00, 0x02, 0x01, 0x01, 0x00, 0x33, 0x00, 0x26, 0x00, 0x24, 0x00, 0x1d, 0x00, 0x20, 0xc3, 0x3b,
    0x00, 0x64, 0xe1, 0xe6, 0x55, 0x83, 0xbb, 0xef, 0x82, 0x12, 0x4c, 0xdd, 0x43, 0xb1, 0x86, 0xb1,
    0xe7, 0xba, 0x06, 0x7c, 0x75, 0x40, 0x6a, 0x47, 0xf0, 0xa5, 0xcd, 0xda, 0xee, 0x0f,
};

static struct al_host host;

static int parse(const uint8_t *buf, size_t len)
{
	struct al_error err = {0};

	memset(&host, 0, sizeof(host));
	return al_tls_parse_sni(buf, len, &host, &err);
}

static void expect_sni(const uint8_t *buf, size_t len, const char *name)
{
	struct al_error err = {0};
	struct al_host h;
	int r;

	memset(&host, 0, sizeof(host));
	r = al_tls_parse_sni(buf, len, &host, &err);
	if (r != 0)
		fail_msg("al_tls_parse_sni gave %d (%s), expected \"%s\"", r, err.msg, name);
	assert_int_equal(host.kind, AL_HOST_NAME);
	assert_string_equal(host.text, name);
	for (size_t n = 0; n < len; n++) {
		r = al_tls_parse_sni(buf, n, &h, &err);
		if (r != -EAGAIN)
			fail_msg("prefix of %zu of %zu bytes gave %d (%s), expected -EAGAIN", n,
				 len, r, err.msg);
	}
}

static void expect_error(const uint8_t *buf, size_t len, int want, const char *reason)
{
	struct al_error err = {0};
	struct al_host h;
	int r;

	memset(&h, 0x5a, sizeof(h));
	r = al_tls_parse_sni(buf, len, &h, &err);
	if (r != want)
		fail_msg("al_tls_parse_sni gave %d (%s), expected %d", r, err.msg, want);
	assert_int_equal(err.code, -want);
	if (reason)
		assert_contains(err.msg, reason);
	assert_int_equal(((uint8_t *)&h)[0], 0x5a);
}

/* Re-frame a handshake message as records cut at the given offsets. */
static size_t frame(const uint8_t *hs, size_t hs_len, const size_t *cuts, size_t n_cuts,
		    uint8_t *out)
{
	size_t o = 0, from = 0;

	for (size_t i = 0; i <= n_cuts; i++) {
		size_t to = i < n_cuts ? cuts[i] : hs_len, n = to - from;

		out[o++] = 22;
		out[o++] = 3;
		out[o++] = 1;
		out[o++] = (uint8_t)(n >> 8);
		out[o++] = (uint8_t)n;
		memcpy(out + o, hs + from, n);
		o += n;
		from = to;
	}
	return o;
}

struct hello {
	uint8_t version[2];
	size_t sid_len;
	size_t n_ciphers; /* bytes */
	size_t n_comp;
	bool no_extensions;
	uint8_t ext[20000];
	size_t ext_len;
};

static void add_ext(struct hello *h, uint16_t type, const uint8_t *data, size_t len)
{
	uint8_t *p = h->ext + h->ext_len;

	p[0] = (uint8_t)(type >> 8);
	p[1] = (uint8_t)type;
	p[2] = (uint8_t)(len >> 8);
	p[3] = (uint8_t)len;
	if (len > 0)
		memcpy(p + 4, data, len);
	h->ext_len += 4 + len;
}

/* server_name with one host_name entry. */
static void add_sni(struct hello *h, const char *name, size_t len)
{
	uint8_t d[600];

	d[0] = (uint8_t)((len + 3) >> 8);
	d[1] = (uint8_t)(len + 3);
	d[2] = 0;
	d[3] = (uint8_t)(len >> 8);
	d[4] = (uint8_t)len;
	memcpy(d + 5, name, len);
	add_ext(h, 0, d, len + 5);
}

static void hello_init(struct hello *h)
{
	memset(h, 0, sizeof(*h));
	h->version[0] = 3;
	h->version[1] = 3;
	h->sid_len = 32;
	h->n_ciphers = 4;
	h->n_comp = 1;
	add_ext(h, 0x000a, (const uint8_t[]){0, 2, 0, 0x1d}, 4);
}

/* Build the handshake message; returns its length. */
static size_t build(const struct hello *h, uint8_t *hs)
{
	size_t n = 4;

	hs[n++] = h->version[0];
	hs[n++] = h->version[1];
	memset(hs + n, 0xab, 32);
	n += 32;
	hs[n++] = (uint8_t)h->sid_len;
	memset(hs + n, 0xcd, h->sid_len);
	n += h->sid_len;
	hs[n++] = (uint8_t)(h->n_ciphers >> 8);
	hs[n++] = (uint8_t)h->n_ciphers;
	for (size_t i = 0; i < h->n_ciphers; i++)
		hs[n++] = (uint8_t)(0x13 + (i % 2));
	hs[n++] = (uint8_t)h->n_comp;
	memset(hs + n, 0, h->n_comp);
	n += h->n_comp;
	if (!h->no_extensions) {
		hs[n++] = (uint8_t)(h->ext_len >> 8);
		hs[n++] = (uint8_t)h->ext_len;
		memcpy(hs + n, h->ext, h->ext_len);
		n += h->ext_len;
	}
	hs[0] = 1;
	hs[1] = (uint8_t)((n - 4) >> 16);
	hs[2] = (uint8_t)((n - 4) >> 8);
	hs[3] = (uint8_t)(n - 4);
	return n;
}

static uint8_t hs[40000], rec[40000];

/* Build h as one record; returns the record length. */
static size_t one_record(const struct hello *h)
{
	return frame(hs, build(h, hs), NULL, 0, rec);
}

static void test_real_hello(void **state)
{
	expect_sni(real_hello, sizeof(real_hello), "example.test");
	/* Bytes after the ClientHello (a second record) are not looked at. */
	memcpy(rec, real_hello, sizeof(real_hello));
	memcpy(rec + sizeof(real_hello), "\x17\x03\x03\x00\x05hello", 10);
	assert_int_equal(parse(rec, sizeof(real_hello) + 10), 0);
	assert_string_equal(host.text, "example.test");
}

static void test_real_hello_split(void **state)
{
	const uint8_t *msg = real_hello + 5;
	size_t len = sizeof(real_hello) - 5, n;
	static const size_t cut_sets[][3] = {
	    {1, 0, 0},	 {2, 0, 0}, {3, 0, 0},	 {4, 0, 0},    {5, 0, 0},	{100, 0, 0},
	    {312, 0, 0}, {1, 2, 3}, {3, 4, 200}, {40, 41, 42}, {150, 200, 250}, {10, 100, 312},
	};

	for (size_t i = 0; i < AL_ARRAY_SIZE(cut_sets); i++) {
		size_t k = cut_sets[i][1] ? 3 : 1;

		n = frame(msg, len, cut_sets[i], k, rec);
		expect_sni(rec, n, "example.test");
	}
	/* Every single cut. */
	for (size_t c = 1; c < len; c++) {
		n = frame(msg, len, &c, 1, rec);
		assert_int_equal(parse(rec, n), 0);
		assert_string_equal(host.text, "example.test");
	}
	/* Five records are too many. */
	n = frame(msg, len, (const size_t[]){1, 2, 3, 4}, 4, rec);
	expect_error(rec, n, -EPROTO, "more than 4 records");
	/* A record that carries bytes beyond the ClientHello. */
	memcpy(rec, real_hello, sizeof(real_hello));
	rec[4]++;
	rec[sizeof(real_hello)] = 0;
	expect_error(rec, sizeof(real_hello) + 1, -EPROTO, "after the ClientHello");
}

static void test_real_hello_mutations(void **state)
{
	static const uint8_t sni[] = {0, 0, 0, 0x11, 0, 0x0f, 0, 0, 0x0c, 'e', 'x', 'a', 'm', 'p'};
	uint8_t *p;
	size_t off;

	memcpy(rec, real_hello, sizeof(real_hello));
	p = memmem(rec, sizeof(real_hello), sni, sizeof(sni));
	assert_non_null(p);
	off = (size_t)(p - rec);

	/* The extension claims more bytes than the hello has. */
	rec[off + 2] = 0x40;
	expect_error(rec, sizeof(real_hello), -EPROTO, "extension");
	memcpy(rec, real_hello, sizeof(real_hello));
	rec[off + 3] = 0x12;
	expect_error(rec, sizeof(real_hello), -EPROTO, NULL);
	/* The list or name length disagrees with the extension. */
	memcpy(rec, real_hello, sizeof(real_hello));
	rec[off + 5] = 0x0e;
	expect_error(rec, sizeof(real_hello), -EPROTO, "server_name");
	memcpy(rec, real_hello, sizeof(real_hello));
	rec[off + 5] = 0x10;
	expect_error(rec, sizeof(real_hello), -EPROTO, "server_name");
	memcpy(rec, real_hello, sizeof(real_hello));
	rec[off + 8] = 0x0d;
	expect_error(rec, sizeof(real_hello), -EPROTO, "server_name");
	memcpy(rec, real_hello, sizeof(real_hello));
	rec[off + 8] = 0x0b;
	expect_error(rec, sizeof(real_hello), -EPROTO, "server_name");
	/* Another name type. */
	memcpy(rec, real_hello, sizeof(real_hello));
	rec[off + 6] = 1;
	expect_error(rec, sizeof(real_hello), -EPROTO, "type 1");
	/* A bad byte in the name. */
	memcpy(rec, real_hello, sizeof(real_hello));
	rec[off + 9] = '/';
	expect_error(rec, sizeof(real_hello), -EPROTO, "server name");
	rec[off + 9] = 0;
	expect_error(rec, sizeof(real_hello), -EPROTO, "server name");
	/* No server_name at all (another extension type): -ENOENT. */
	memcpy(rec, real_hello, sizeof(real_hello));
	rec[off + 1] = 0xfa;
	expect_error(rec, sizeof(real_hello), -ENOENT, "server_name");
	/* Record and handshake lengths that disagree. */
	memcpy(rec, real_hello, sizeof(real_hello));
	rec[8]++;
	expect_error(rec, sizeof(real_hello), -EAGAIN, NULL);
	rec[8] -= 2;
	expect_error(rec, sizeof(real_hello), -EPROTO, "after the ClientHello");
}

static void test_synthetic(void **state)
{
	struct hello h;
	size_t n;

	hello_init(&h);
	add_sni(&h, "API.Example.COM.", 16);
	n = one_record(&h);
	expect_sni(rec, n, "api.example.com");

	/* 253 characters. */
	{
		char name[300];

		memset(name, 'a', 253);
		name[63] = name[127] = name[191] = '.';
		hello_init(&h);
		add_sni(&h, name, 253);
		n = one_record(&h);
		name[253] = '\0';
		expect_sni(rec, n, name);
		hello_init(&h);
		name[253] = 'a';
		add_sni(&h, name, 254);
		n = one_record(&h);
		expect_error(rec, n, -EPROTO, "253");
	}

	/* No extensions, or none that matter. */
	hello_init(&h);
	h.no_extensions = true;
	n = one_record(&h);
	expect_error(rec, n, -ENOENT, "without extensions");
	hello_init(&h);
	n = one_record(&h);
	expect_error(rec, n, -ENOENT, "without server_name");
	hello_init(&h);
	h.ext_len = 0;
	n = one_record(&h);
	expect_error(rec, n, -ENOENT, "without server_name");
	hello_init(&h);
	h.sid_len = 0;
	add_sni(&h, "a.test", 6);
	n = one_record(&h);
	expect_sni(rec, n, "a.test");
}

static void test_synthetic_bad(void **state)
{
	struct hello h;
	size_t n;

	hello_init(&h);
	add_sni(&h, "10.0.0.1", 8);
	n = one_record(&h);
	expect_error(rec, n, -EPROTO, "IP address");
	hello_init(&h);
	add_sni(&h, "::1", 3);
	n = one_record(&h);
	expect_error(rec, n, -EPROTO, "IP address");
	hello_init(&h);
	add_sni(&h, "", 0);
	n = one_record(&h);
	expect_error(rec, n, -EPROTO, "server name");
	hello_init(&h);
	add_sni(&h, "a b.test", 8);
	n = one_record(&h);
	expect_error(rec, n, -EPROTO, "invalid character");
	hello_init(&h);
	add_sni(&h, "127.1", 5);
	n = one_record(&h);
	expect_error(rec, n, -EPROTO, "IPv4");

	/* Two server_name extensions, or two host_names in one. */
	hello_init(&h);
	add_sni(&h, "a.test", 6);
	add_sni(&h, "b.test", 6);
	n = one_record(&h);
	expect_error(rec, n, -EPROTO, "duplicate server_name");
	hello_init(&h);
	add_ext(&h, 0, (const uint8_t[]){0, 8, 0, 0, 1, 'a', 0, 0, 1, 'b'}, 10);
	n = one_record(&h);
	expect_error(rec, n, -EPROTO, "more than one host_name");
	/* Empty server_name (the server's form) or empty list. */
	hello_init(&h);
	add_ext(&h, 0, NULL, 0);
	n = one_record(&h);
	expect_error(rec, n, -EPROTO, "server_name");
	hello_init(&h);
	add_ext(&h, 0, (const uint8_t[]){0, 0}, 2);
	n = one_record(&h);
	expect_error(rec, n, -EPROTO, "server_name");

	/* The fixed fields. */
	hello_init(&h);
	add_sni(&h, "a.test", 6);
	h.sid_len = 33;
	n = one_record(&h);
	expect_error(rec, n, -EPROTO, "session id");
	h.sid_len = 32;
	h.n_ciphers = 3;
	n = one_record(&h);
	expect_error(rec, n, -EPROTO, "cipher suites");
	h.n_ciphers = 0;
	n = one_record(&h);
	expect_error(rec, n, -EPROTO, "cipher suites");
	h.n_ciphers = 2;
	h.n_comp = 0;
	n = one_record(&h);
	expect_error(rec, n, -EPROTO, "compression");
	h.n_comp = 1;
	h.version[1] = 0;
	n = one_record(&h);
	expect_error(rec, n, -EPROTO, "version");
	h.version[0] = 2;
	h.version[1] = 3;
	n = one_record(&h);
	expect_error(rec, n, -EPROTO, "version");
	h.version[0] = 3;
	h.version[1] = 4;
	n = one_record(&h);
	expect_error(rec, n, -EPROTO, "version");
}

static void test_extension_lengths(void **state)
{
	struct hello h;
	size_t n, len;

	/* The extensions block is longer or shorter than what is left. */
	hello_init(&h);
	add_sni(&h, "a.test", 6);
	len = build(&h, hs);
	hs[len - h.ext_len - 1]++;
	n = frame(hs, len, NULL, 0, rec);
	expect_error(rec, n, -EPROTO, "extensions");
	hs[len - h.ext_len - 1] -= 2;
	n = frame(hs, len, NULL, 0, rec);
	expect_error(rec, n, -EPROTO, NULL);
	/* One trailing byte after the extensions. */
	len = build(&h, hs);
	hs[len] = 0;
	hs[3]++;
	n = frame(hs, len + 1, NULL, 0, rec);
	expect_error(rec, n, -EPROTO, "extensions");
	/* A lone byte of a next extension header. */
	hello_init(&h);
	add_sni(&h, "a.test", 6);
	h.ext[h.ext_len++] = 0;
	n = one_record(&h);
	expect_error(rec, n, -EPROTO, "extension");
}

static void test_records(void **state)
{
	struct hello h;
	size_t n;

	hello_init(&h);
	add_sni(&h, "a.test", 6);
	n = one_record(&h);

	/* Bad first bytes fail at once, before the rest arrives. */
	rec[0] = 23;
	expect_error(rec, 1, -EPROTO, "handshake record");
	rec[0] = 0x80; /* SSLv2-compatible hello */
	expect_error(rec, 1, -EPROTO, "handshake record");
	rec[0] = 22;
	rec[1] = 2;
	expect_error(rec, 2, -EPROTO, "version");
	rec[1] = 3;
	rec[2] = 5;
	expect_error(rec, 3, -EPROTO, "version");
	rec[2] = 1;
	rec[5] = 2; /* ServerHello */
	expect_error(rec, 6, -EPROTO, "not a ClientHello");
	rec[5] = 1;
	rec[3] = 0;
	rec[4] = 0;
	expect_error(rec, n, -EPROTO, "record length");
	rec[3] = 0x40;
	rec[4] = 1;
	expect_error(rec, n, -EPROTO, "record length");
	/* Handshake length beyond 16 KiB. */
	n = one_record(&h);
	rec[6] = 0;
	rec[7] = 0x40;
	rec[8] = 0;
	expect_error(rec, n, -EPROTO, "larger than");
	rec[6] = 0xff;
	expect_error(rec, n, -EPROTO, "larger than");
	/* A second record of another type while the hello is incomplete. */
	n = one_record(&h);
	{
		size_t cut = 10;

		n = frame(hs, build(&h, hs), &cut, 1, rec);
		rec[5 + 10] = 21; /* alert */
		expect_error(rec, n, -EPROTO, "handshake record");
	}
	expect_error(NULL, 0, -EAGAIN, NULL);
	expect_error(rec, 0, -EAGAIN, NULL);
}

static void test_big_hello(void **state)
{
	static uint8_t pad[20000];
	struct hello h;
	size_t len, n, base;

	/* Pad to exactly 16 KiB of handshake, spread over two records. */
	hello_init(&h);
	add_sni(&h, "big.test", 8);
	base = build(&h, hs);
	add_ext(&h, 21, pad, AL_TLS_HELLO_MAX - base - 4);
	len = build(&h, hs);
	assert_int_equal(len, AL_TLS_HELLO_MAX);
	n = frame(hs, len, (const size_t[]){16000}, 1, rec);
	assert_int_equal(parse(rec, n), 0);
	assert_string_equal(host.text, "big.test");
	for (size_t k = 0; k < n; k += 97)
		assert_int_equal(al_tls_parse_sni(rec, k, &host, NULL), -EAGAIN);
	/* One byte more is refused. */
	hello_init(&h);
	add_sni(&h, "big.test", 8);
	add_ext(&h, 21, pad, AL_TLS_HELLO_MAX - base - 3);
	len = build(&h, hs);
	n = frame(hs, len, (const size_t[]){16000}, 1, rec);
	expect_error(rec, n, -EPROTO, "larger than");
	/* Four records of 4 KiB each: fine. */
	hello_init(&h);
	add_sni(&h, "big.test", 8);
	add_ext(&h, 21, pad, AL_TLS_HELLO_MAX - base - 4);
	len = build(&h, hs);
	n = frame(hs, len, (const size_t[]){4096, 8192, 12288}, 3, rec);
	assert_int_equal(parse(rec, n), 0);
}

int main(void)
{
	/* clang-format off */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_real_hello),
		cmocka_unit_test(test_real_hello_split),
		cmocka_unit_test(test_real_hello_mutations),
		cmocka_unit_test(test_synthetic),
		cmocka_unit_test(test_synthetic_bad),
		cmocka_unit_test(test_extension_lengths),
		cmocka_unit_test(test_records),
		cmocka_unit_test(test_big_hello),
	};
	/* clang-format on */

	return cmocka_run_group_tests(tests, NULL, NULL);
}
