/* libFuzzer target: request rules (net/reqrule.c). The input is a path
 * pattern, a newline, then a request target, as the policy and the
 * sandbox give them. Beyond the sanitizers, invariants trap: a normalised
 * path is in normal form (starts with '/', no empty or dot segment, no
 * encoded '/' or '\', every '%' followed by two upper-case hex digits,
 * never an unreserved character encoded) and normalises to itself; "/"
 * "**" matches every normalised path; a valid pattern without '*' matches
 * exactly itself. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/reqrule.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool unreserved(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '.' || c == '_' || c == '~';
}

static bool upper_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F');
}

static void check_normal(const char *p, size_t len)
{
	size_t seg = 1;

	if (len == 0 || p[0] != '/' || strlen(p) != len)
		__builtin_trap();
	for (size_t i = 1; i <= len; i++) {
		if (i == len || p[i] == '/') {
			size_t n = i - seg;

			if ((n == 0 && i < len) || (n == 1 && p[seg] == '.') ||
			    (n == 2 && p[seg] == '.' && p[seg + 1] == '.'))
				__builtin_trap();
			seg = i + 1;
			continue;
		}
		if ((unsigned char)p[i] <= ' ' || (unsigned char)p[i] >= 0x7f || p[i] == '\\' ||
		    p[i] == '?' || p[i] == '#')
			__builtin_trap();
		if (p[i] == '%') {
			char v;

			if (i + 2 >= len || !upper_hex(p[i + 1]) || !upper_hex(p[i + 2]))
				__builtin_trap();
			v = (char)(((p[i + 1] <= '9' ? p[i + 1] - '0' : p[i + 1] - 'A' + 10) << 4) |
				   (p[i + 2] <= '9' ? p[i + 2] - '0' : p[i + 2] - 'A' + 10));
			if (unreserved(v) || v == '/' || v == '\\')
				__builtin_trap();
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char pattern[AL_REQRULE_PATTERN_MAX + 64], out[4096], again[4096];
	const char *nl = memchr(data, '\n', size);
	size_t plen = nl ? (size_t)(nl - (const char *)data) : size;
	const char *target = nl ? nl + 1 : "";
	size_t tlen = nl ? size - plen - 1 : 0;
	struct al_error err = {0};
	bool valid;
	int n, m;

	if (plen >= sizeof(pattern))
		plen = sizeof(pattern) - 1;
	memcpy(pattern, data, plen);
	pattern[plen] = '\0';
	valid = al_reqrule_pattern_check(pattern, &err) == 0;
	(void)al_reqrule_method_check(pattern, &err);
	n = al_reqrule_path_normalize(target, tlen, out, sizeof(out), &err);
	if (n == -ENOSPC || n == -EINVAL)
		return 0;
	if (n <= 0)
		__builtin_trap();
	check_normal(out, (size_t)n);
	m = al_reqrule_path_normalize(out, (size_t)n, again, sizeof(again), &err);
	if (m != n || memcmp(out, again, (size_t)n) != 0)
		__builtin_trap();
	if (!al_reqrule_path_match("/**", out, (size_t)n))
		__builtin_trap();
	/* Unchecked patterns must not crash either. */
	(void)al_reqrule_path_match(pattern, out, (size_t)n);
	if (valid && !memchr(pattern, '*', plen) &&
	    al_reqrule_path_match(pattern, out, (size_t)n) != (strcmp(pattern, out) == 0))
		__builtin_trap();
	if (valid && strcmp(pattern, out) == 0 && !al_reqrule_path_match(pattern, out, (size_t)n))
		__builtin_trap();
	return 0;
}
