#include "cred/base64url.h"

#include <errno.h>
#include <stdint.h>

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

size_t al_b64url_encode(const void *in, size_t n, char *out)
{
	const unsigned char *p = in;
	size_t o = 0, i = 0;

	for (; i + 3 <= n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
		out[o++] = alphabet[v >> 18];
		out[o++] = alphabet[(v >> 12) & 63];
		out[o++] = alphabet[(v >> 6) & 63];
		out[o++] = alphabet[v & 63];
	}
	if (n - i == 1) {
		out[o++] = alphabet[p[i] >> 2];
		out[o++] = alphabet[(p[i] & 3) << 4];
	} else if (n - i == 2) {
		uint32_t v = (uint32_t)p[i] << 8 | p[i + 1];
		out[o++] = alphabet[v >> 10];
		out[o++] = alphabet[(v >> 4) & 63];
		out[o++] = alphabet[(v & 15) << 2];
	}
	out[o] = '\0';
	return o;
}

/* The 6-bit value of c, or -1. */
static int sextet(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '-')
		return 62;
	if (c == '_')
		return 63;
	return -1;
}

static int bad_char(const char *in, size_t i, const char *what, struct al_error *err)
{
	unsigned char c = (unsigned char)in[i];

	if (c == '=')
		return al_error_set(err, EINVAL,
				    "%s: '=' at offset %zu: base64url in a JWT has no padding",
				    what, i);
	if (c == '+' || c == '/')
		return al_error_set(err, EINVAL,
				    "%s: '%c' at offset %zu: standard base64, not base64url", what,
				    c, i);
	if (c > 0x20 && c < 0x7f)
		return al_error_set(err, EINVAL, "%s: '%c' at offset %zu is not base64url", what, c,
				    i);
	return al_error_set(err, EINVAL, "%s: byte 0x%02x at offset %zu is not base64url", what, c,
			    i);
}

long al_b64url_decode(const char *in, size_t len, unsigned char *out, const char *what,
		      struct al_error *err)
{
	uint32_t acc = 0;
	size_t o = 0;
	int bits = 0;

	if (len % 4 == 1)
		return al_error_set(err, EINVAL,
				    "%s: %zu characters: base64url never leaves one character over",
				    what, len);
	for (size_t i = 0; i < len; i++) {
		int v = sextet((unsigned char)in[i]);
		if (v < 0)
			return bad_char(in, i, what, err);
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (unsigned char)(acc >> bits);
			acc &= (1u << bits) - 1;
		}
	}
	/* What is left (2 or 4 bits) must be zero: otherwise a second spelling
	 * of the same bytes would verify too. */
	if (acc != 0)
		return al_error_set(err, EINVAL,
				    "%s: the last character has bits set past the data: not the "
				    "canonical base64url",
				    what);
	return (long)o;
}
