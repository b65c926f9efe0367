/* base64url without padding (RFC 4648 section 5, as JOSE uses it; pure: no
 * syscalls, no allocation).
 *
 * Decoding is strict, because its input is hostile: only the 64 letters of
 * the URL-safe alphabet, no padding, no whitespace, no length that leaves a
 * lone character, and no bits set past the data in the last character, so
 * that every byte string has exactly one encoding. */
#pragma once

#include <stddef.h>

#include "core/error.h"

/* Characters that n bytes encode to (without the NUL). */
static inline size_t al_b64url_encoded_len(size_t n)
{
	return n / 3 * 4 + (n % 3 ? n % 3 + 1 : 0);
}

/* Bytes that len characters decode to at most (exactly, when valid). */
static inline size_t al_b64url_decoded_max(size_t len)
{
	return len / 4 * 3 + (len % 4 ? len % 4 - 1 : 0);
}

/* Encode n bytes of in to out, which has room for al_b64url_encoded_len(n)
 * characters and a NUL; returns the characters written (without the NUL). */
size_t al_b64url_encode(const void *in, size_t n, char *out);

/* Decode len characters of in to out, which has room for
 * al_b64url_decoded_max(len) bytes. Returns the bytes written, or -EINVAL
 * with err saying what is wrong and at which offset (what names the input
 * in that message, e.g. "payload"). */
long al_b64url_decode(const char *in, size_t len, unsigned char *out, const char *what,
		      struct al_error *err);
