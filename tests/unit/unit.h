/* Shared bits of the cmocka unit tests. cmocka.h needs
 * these system headers first, in this order. */
#pragma once

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

/* Fail with both strings shown when needle is not a substring of hay. */
#define assert_contains(hay, needle)                                                               \
	do {                                                                                       \
		const char *_h = (hay), *_n = (needle);                                            \
		if (!_h || !strstr(_h, _n))                                                        \
			fail_msg("expected \"%s\" to contain \"%s\"", _h ? _h : "(null)", _n);     \
	} while (0)

#define assert_not_contains(hay, needle)                                                           \
	do {                                                                                       \
		const char *_h = (hay), *_n = (needle);                                            \
		if (_h && strstr(_h, _n))                                                          \
			fail_msg("expected \"%s\" not to contain \"%s\"", _h, _n);                 \
	} while (0)
