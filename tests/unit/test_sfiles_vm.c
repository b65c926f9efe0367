/* serve/sfiles-vm.c's judgement of what a microvm/vm guest agent returned
 * for a file API GET (sfile_vm_output) and of the size it gave for a file
 * over the cap (sfile_vm_size). The agent is hostile here: every record
 * that is out of range must make the whole answer "neither", and a
 * well-formed listing must give the JSON the native file API gives for
 * the same entries (sfile_entry), names with a newline or bytes that are
 * not UTF-8 included. */
#include "unit.h"

#include <stdlib.h>
#include <string.h>

#include "serve/sfiles.h"

/* out (len bytes) as a listing, or NULL when it is judged not one. */
static json_t *listing(const char *out, size_t len)
{
	json_t *a = NULL;
	enum sfile_output k = sfile_vm_output(out, len, &a);
	assert_true(k == SFILE_OUT_LIST ? a != NULL : a == NULL);
	return a;
}

#define LIST(lit) listing(lit, sizeof(lit) - 1)

static void test_file(void **state)
{
	(void)state;
	json_t *a = (json_t *)1;
	assert_int_equal(sfile_vm_output("f", 1, &a), SFILE_OUT_FILE);
	assert_null(a);
	assert_int_equal(sfile_vm_output("f\0ab\ncd", 7, &a), SFILE_OUT_FILE);
	/* Nothing, or a first byte that is neither kind. */
	assert_int_equal(sfile_vm_output("", 0, &a), SFILE_OUT_BAD);
	assert_int_equal(sfile_vm_output("x123", 4, &a), SFILE_OUT_BAD);
	assert_int_equal(sfile_vm_output("F", 1, &a), SFILE_OUT_BAD);
	/* A file one byte past the cap is not one (the caller answers 413
	 * before; this holds without it). */
	size_t big = 2 + (size_t)AL_SERVE_FILE_MAX;
	char *b = calloc(1, big);
	b[0] = 'f';
	assert_int_equal(sfile_vm_output(b, big - 1, &a), SFILE_OUT_FILE);
	assert_int_equal(sfile_vm_output(b, big, &a), SFILE_OUT_BAD);
	free(b);
}

static void test_listing_as_native(void **state)
{
	(void)state;
	/* An empty directory. */
	json_t *a = LIST("d");
	assert_int_equal(json_array_size(a), 0);
	json_decref(a);
	/* The four types, a newline and bytes that are not UTF-8 in names:
	 * the same JSON as the native listing's sfile_entry makes. */
	a = LIST("df 8 644 a.txt\0d 60 755 sub\0l 5 777 link\0o 0 600 fifo\0"
		 "f 1 644 new\nline\0f 2 600 \xff\xfe"
		 "x\0f 9223372036854775807 7777 big\0");
	json_t *want = json_array();
	json_array_append_new(want, sfile_entry("a.txt", "file", 8, 0644));
	json_array_append_new(want, sfile_entry("sub", "dir", 60, 0755));
	json_array_append_new(want, sfile_entry("link", "symlink", 5, 0777));
	json_array_append_new(want, sfile_entry("fifo", "other", 0, 0600));
	json_array_append_new(want, sfile_entry("new\nline", "file", 1, 0644));
	json_array_append_new(want, sfile_entry("\xff\xfex", "file", 2, 0600));
	json_array_append_new(want, sfile_entry("big", "file", INT64_MAX, 07777));
	assert_non_null(a);
	assert_true(json_equal(a, want));
	/* The name that is not UTF-8 is shown escaped, and said so. */
	json_t *e = json_array_get(a, 5);
	assert_string_equal(json_string_value(json_object_get(e, "name")), "\\xff\\xfex");
	assert_true(json_is_true(json_object_get(e, "escaped")));
	/* The JSON of it all can be written (no byte jansson refuses). */
	char *text = json_dumps(a, 0);
	assert_non_null(text);
	free(text);
	json_decref(a);
	json_decref(want);
	/* A name of 255 bytes, each escaped: 1020 characters, all kept. */
	char rec[300] = "df 0 644 ";
	size_t n = strlen(rec);
	memset(rec + n, 0xff, 255);
	rec[n + 255] = '\0';
	a = listing(rec, n + 256);
	assert_non_null(a);
	assert_int_equal(strlen(json_string_value(json_object_get(json_array_get(a, 0), "name"))),
			 1020);
	json_decref(a);
	/* 256 bytes is one too many (NAME_MAX). */
	rec[n + 255] = 'x';
	rec[n + 256] = '\0';
	assert_null(listing(rec, n + 257));
}

static void test_listing_hostile(void **state)
{
	(void)state;
	/* Each of these alone makes the whole answer "neither". */
	assert_null(LIST("df 1 644 a"));	  /* no NUL at the end */
	assert_null(LIST("df 1 644 a\0f 1 644")); /* the last one cut */
	assert_null(LIST("df 1 644 a/b\0"));	  /* a '/' in a name */
	assert_null(LIST("df 1 644 /\0"));
	assert_null(LIST("dd 1 755 .\0")); /* "." and ".." */
	assert_null(LIST("dd 1 755 ..\0"));
	assert_null(LIST("df 1 644 \0"));   /* no name */
	assert_null(LIST("dx 1 644 a\0"));  /* an unknown type */
	assert_null(LIST("d\0 1 644 a\0")); /* a NUL for a type */
	assert_null(LIST("d\0"));
	assert_null(LIST("df -1 644 a\0")); /* a sign */
	assert_null(LIST("df +1 644 a\0"));
	assert_null(LIST("df  1 644 a\0"));		     /* a space too many */
	assert_null(LIST("df 0x10 644 a\0"));		     /* not decimal */
	assert_null(LIST("df 9223372036854775808 644 a\0")); /* past INT64_MAX */
	assert_null(LIST("df 99999999999999999999999 644 a\0"));
	assert_null(LIST("df 1 648 a\0")); /* not octal */
	assert_null(LIST("df 1 8 a\0"));
	assert_null(LIST("df 1 -644 a\0"));
	assert_null(LIST("df 1 17777 a\0")); /* past 07777 */
	assert_null(LIST("df 1 77777777777777777777777 a\0"));
	assert_null(LIST("df 1 644\0")); /* fields missing */
	assert_null(LIST("df 1\0"));
	assert_null(LIST("df1 644 abcd\0"));
	assert_null(LIST("d\n1 644 abcd\0"));
}

static void test_listing_cap(void **state)
{
	(void)state;
	/* SFILE_LIST_MAX records are a listing; one more is not. */
	size_t cap = (SFILE_LIST_MAX + 1) * 16 + 2, len = 1;
	char *b = malloc(cap);
	b[0] = 'd';
	for (unsigned i = 0; i < SFILE_LIST_MAX; i++)
		len += (size_t)snprintf(b + len, cap - len, "f 1 644 n%u", i) + 1;
	json_t *a = listing(b, len);
	assert_non_null(a);
	assert_int_equal(json_array_size(a), SFILE_LIST_MAX);
	json_decref(a);
	len += (size_t)snprintf(b + len, cap - len, "f 1 644 one-more") + 1;
	assert_null(listing(b, len));
	free(b);
}

static void test_size(void **state)
{
	(void)state;
	assert_int_equal(sfile_vm_size("33554433", 8), 33554433);
	assert_int_equal(sfile_vm_size("9223372036854775807", 19), INT64_MAX);
	assert_int_equal(sfile_vm_size("0", 1), 0);
	/* Anything but digits (strtoull would take "-1" as 2^64 - 1). */
	assert_int_equal(sfile_vm_size("", 0), -1);
	assert_int_equal(sfile_vm_size("-1", 2), -1);
	assert_int_equal(sfile_vm_size("+5", 2), -1);
	assert_int_equal(sfile_vm_size(" 5", 2), -1);
	assert_int_equal(sfile_vm_size("5\0", 2), -1);
	assert_int_equal(sfile_vm_size("5 bytes", 7), -1);
	assert_int_equal(sfile_vm_size("99999999999999999999", 20), -1);
	assert_int_equal(sfile_vm_size("9999999999999999999", 19), -1); /* > INT64_MAX */
	assert_int_equal(sfile_vm_size("9223372036854775808", 19), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_file),
	    cmocka_unit_test(test_listing_as_native),
	    cmocka_unit_test(test_listing_hostile),
	    cmocka_unit_test(test_listing_cap),
	    cmocka_unit_test(test_size),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
