/* A code context's frame, parsed as hostile input (ctxframe.h). */
#include "serve/ctxframe.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

size_t al_ctx_marker(char *buf, const char *nonce, bool end)
{
	int n = snprintf(buf, AL_CTX_MARK_MAX,
			 "\x1e"
			 "ALCTX:%.32s:%s",
			 nonce, end ? "end\n" : "");

	return n < 0 ? 0 : (size_t)n;
}

/* v null, or a string of at most AL_CTX_TEXT_MAX bytes (or, with
 * null_too false, only the string). */
static bool text_ok(json_t *v, bool null_too)
{
	return (null_too && json_is_null(v)) ||
	       (json_is_string(v) && json_string_length(v) <= AL_CTX_TEXT_MAX);
}

/* o an object whose keys are exactly names (n of them). */
static bool exactly(json_t *o, const char *const *names, size_t n)
{
	if (!json_is_object(o) || json_object_size(o) != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!json_object_get(o, names[i]))
			return false;
	return true;
}

int al_ctx_frame_parse(const char *p, size_t n, uint64_t id, struct al_ctx_frame *f)
{
	static const char *const top[] = {"id", "value", "error"};
	static const char *const err[] = {"name", "message", "traceback"};
	json_error_t je;

	memset(f, 0, sizeof(*f));
	if (n > AL_CTX_FRAME_MAX)
		return -EINVAL;
	json_t *o = json_loadb(p, n, JSON_REJECT_DUPLICATES, &je);
	json_t *jid = json_object_get(o, "id"), *v = json_object_get(o, "value"),
	       *e = json_object_get(o, "error");
	bool good = exactly(o, top, 3) && json_is_integer(jid) && json_integer_value(jid) >= 0 &&
		    (uint64_t)json_integer_value(jid) == id && text_ok(v, true) &&
		    (json_is_null(e) || exactly(e, err, 3));
	for (size_t i = 0; good && !json_is_null(e) && i < 3; i++)
		good = text_ok(json_object_get(e, err[i]), false);
	if (good) {
		f->ok = true;
		f->value = json_is_string(v) ? xstrdup(json_string_value(v)) : NULL;
		f->error = json_is_null(e) ? NULL : json_incref(e);
	}
	json_decref(o);
	return good ? 0 : -EINVAL;
}

void al_ctx_frame_clear(struct al_ctx_frame *f)
{
	free(f->value);
	json_decref(f->error);
	memset(f, 0, sizeof(*f));
}
