/* guest/proto.h: the channel's codec, which the host side runs on bytes a
 * hostile guest wrote. Headers past their type's bound, flags where the
 * type has none, unknown types; EXEC payloads whose counts and strings
 * disagree; EXIT payloads with junk in the padding; FILE_BEGIN paths that
 * would leave /work. Pure functions; nothing is created. */
#include "unit.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "guest/proto.h"

static int hdr(uint8_t type, uint8_t flags, uint32_t len)
{
	uint8_t b[AL_GUEST_HEADER];
	struct al_guest_hdr h;
	al_guest_hdr_put(b, type, flags, 7, len);
	int r = al_guest_hdr_get(b, &h);
	if (r == 0) {
		assert_int_equal(h.type, type);
		assert_int_equal(h.id, 7);
		assert_int_equal(h.len, len);
	}
	return r;
}

static void test_headers(void **state)
{
	(void)state;
	assert_int_equal(hdr(AL_G_STDOUT, 0, AL_GUEST_MAX_PAYLOAD), 0);
	assert_int_equal(hdr(AL_G_STDOUT, 0, AL_GUEST_MAX_PAYLOAD + 1), -EPROTO);
	assert_int_equal(hdr(AL_G_EXIT, 0, AL_GUEST_EXIT_LEN + 1), -EPROTO);
	assert_int_equal(hdr(AL_G_CLOSE, 0, 1), -EPROTO);
	assert_int_equal(hdr(AL_G_DGRAM, 0, 4097), -EPROTO);
	assert_int_equal(hdr(AL_G_WINDOW, 3, 4), 0);
	assert_int_equal(hdr(AL_G_WINDOW, 4, 4), -EPROTO);
	assert_int_equal(hdr(AL_G_DATA, 1, 4), -EPROTO);
	assert_int_equal(hdr(0, 0, 0), -EPROTO);
	assert_int_equal(hdr(AL_G_TYPE_MAX + 1, 0, 0), -EPROTO);
	assert_int_equal(al_guest_max_len(AL_G_TYPE_MAX + 1), -1);
	/* The reserved bits must be zero. */
	uint8_t b[AL_GUEST_HEADER];
	struct al_guest_hdr h;
	al_guest_hdr_put(b, AL_G_PING, 0, 0, 8);
	b[3] = 1;
	assert_int_equal(al_guest_hdr_get(b, &h), -EPROTO);
	/* A length of 2^32 - 1 never passes, whatever the type. */
	for (unsigned t = 0; t < 256; t++)
		assert_int_equal(hdr((uint8_t)t, 0, UINT32_MAX), -EPROTO);
}

static void test_exec(void **state)
{
	(void)state;
	static const char *argv[AL_GUEST_MAX_ARGS + 1], *env[AL_GUEST_MAX_ARGS + 1];
	const char *cwd;
	uint32_t argc, envc;
	uint8_t p[64] = {0};
	al_guest_put32(p, 2);
	al_guest_put32(p + 4, 1);
	memcpy(p + 8, "/work\0ls\0-l\0A=1", 16);
	assert_int_equal(al_guest_exec_parse(p, 24, &cwd, argv, &argc, env, &envc), 0);
	assert_string_equal(cwd, "/work");
	assert_int_equal(argc, 2);
	assert_string_equal(argv[1], "-l");
	assert_null(argv[2]);
	assert_int_equal(envc, 1);
	assert_string_equal(env[0], "A=1");
	/* A byte left over, a string not terminated, a count too high. */
	assert_int_equal(al_guest_exec_parse(p, 25, &cwd, argv, &argc, env, &envc), -EPROTO);
	assert_int_equal(al_guest_exec_parse(p, 23, &cwd, argv, &argc, env, &envc), -EPROTO);
	al_guest_put32(p + 4, 2);
	assert_int_equal(al_guest_exec_parse(p, 24, &cwd, argv, &argc, env, &envc), -EPROTO);
	al_guest_put32(p, UINT32_MAX);
	al_guest_put32(p + 4, 2);
	assert_int_equal(al_guest_exec_parse(p, 24, &cwd, argv, &argc, env, &envc), -EPROTO);
}

static void test_exit(void **state)
{
	(void)state;
	struct al_guest_exit e = {.status = 9, .oom = 1, .user_us = 5, .memory_peak = 1ull << 40},
			     back;
	uint8_t p[AL_GUEST_EXIT_LEN];
	al_guest_exit_put(p, &e);
	assert_int_equal(al_guest_exit_get(p, sizeof(p), &back), 0);
	assert_int_equal(back.status, 9);
	assert_int_equal(back.oom, 1);
	assert_int_equal(back.memory_peak, 1ull << 40);
	assert_int_equal(al_guest_exit_get(p, sizeof(p) - 1, &back), -EPROTO);
	p[6] = 1; /* padding */
	assert_int_equal(al_guest_exit_get(p, sizeof(p), &back), -EPROTO);
}

static void test_paths(void **state)
{
	(void)state;
	static const char *const good[] = {"a", "a/b", "..a", "a/.b", "a..", "a/b.c/d"};
	static const char *const bad[] = {"",	  "/a",	  "..", ".",	 "a/..",
					  "../a", "a//b", "a/", "a/./b", "a/../b"};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		assert_int_equal(al_guest_path_ok(good[i], strlen(good[i])), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(al_guest_path_ok(bad[i], strlen(bad[i])), -EPROTO);
	assert_int_equal(al_guest_path_ok("a\0b", 3), -EPROTO);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_headers),
	    cmocka_unit_test(test_exec),
	    cmocka_unit_test(test_exit),
	    cmocka_unit_test(test_paths),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
