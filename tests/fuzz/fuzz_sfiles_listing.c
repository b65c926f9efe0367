/* libFuzzer target: what a microvm/vm guest agent returns for a file API
 * GET, judged by the daemon's session process (serve/sfiles-vm.c:
 * sfile_vm_output, sfile_vm_size). The agent runs in the sandbox, so every
 * byte is hostile. A listing that is accepted has at most SFILE_LIST_MAX
 * entries, each with a name that is a non-empty string with no '/' and is
 * not "." or "..", one of the four types, a size from 0 to INT64_MAX and
 * a mode of permission bits only, and the whole writes as JSON (what the
 * API answers). A file is at most AL_SERVE_FILE_MAX bytes. A size is -1
 * or what the digits say. No leak (LeakSanitizer). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "serve/serve.h"
#include "serve/sfiles.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_entry(const json_t *e)
{
	const char *name = json_string_value(json_object_get(e, "name"));
	const char *type = json_string_value(json_object_get(e, "type"));
	json_t *sz = json_object_get(e, "size"), *mode = json_object_get(e, "mode");
	if (!name || !*name || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, ".."))
		__builtin_trap();
	if (!type || (strcmp(type, "file") && strcmp(type, "dir") && strcmp(type, "symlink") &&
		      strcmp(type, "other")))
		__builtin_trap();
	if (!json_is_integer(sz) || json_integer_value(sz) < 0)
		__builtin_trap();
	if (!json_is_integer(mode) || json_integer_value(mode) < 0 ||
	    json_integer_value(mode) > 07777)
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *out = (const char *)data;
	json_t *list = (json_t *)1;
	switch (sfile_vm_output(out, size, &list)) {
	case SFILE_OUT_FILE:
		if (list || !size || out[0] != 'f' || size - 1 > AL_SERVE_FILE_MAX)
			__builtin_trap();
		break;
	case SFILE_OUT_LIST: {
		if (!json_is_array(list) || json_array_size(list) > SFILE_LIST_MAX)
			__builtin_trap();
		for (size_t i = 0; i < json_array_size(list); i++)
			check_entry(json_array_get(list, i));
		char *text = json_dumps(list, 0);
		if (!text)
			__builtin_trap();
		free(text);
		json_decref(list);
		break;
	}
	case SFILE_OUT_BAD:
		if (list)
			__builtin_trap();
		break;
	}
	long long n = sfile_vm_size(out, size);
	if (n < -1 || (n >= 0 && (size == 0 || size > 19 || out[0] < '0' || out[0] > '9')))
		__builtin_trap();
	return 0;
}
