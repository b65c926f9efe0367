/* libFuzzer target: a code context's frame (serve/ctxframe.c), written by
 * an interpreter that runs the user's code, so every byte is hostile. A
 * frame that parses is of the run asked for (id 1) and each field of its
 * type, its text at most AL_CTX_TEXT_MAX; one that does not leaves nothing behind (LeakSanitizer). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "serve/ctxframe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct al_ctx_frame f;
	char mark[AL_CTX_MARK_MAX];

	if (al_ctx_frame_parse((const char *)data, size, 1, &f) < 0) {
		if (f.ok || f.value || f.error)
			__builtin_trap(); /* a refused frame must leave f clear */
		return 0;
	}
	if (!f.ok || (f.value && strlen(f.value) > AL_CTX_TEXT_MAX))
		__builtin_trap();
	if (f.error) {
		const char *const names[] = {"name", "message", "traceback"};
		if (!json_is_object(f.error) || json_object_size(f.error) != 3)
			__builtin_trap();
		for (int i = 0; i < 3; i++)
			if (!json_is_string(json_object_get(f.error, names[i])) ||
			    json_string_length(json_object_get(f.error, names[i])) >
				AL_CTX_TEXT_MAX)
				__builtin_trap();
	}
	/* The marker of any nonce fits its buffer and starts with the
	 * record separator. */
	size_t n = al_ctx_marker(mark, f.value ? f.value : "", true);
	if (n == 0 || n >= sizeof(mark) || mark[0] != '\x1e')
		__builtin_trap();
	al_ctx_frame_clear(&f);
	return 0;
}
