#include "core/error.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static int ret_code(const struct al_error *err)
{
	return err && err->code ? -err->code : -EINVAL;
}

int al_error_set(struct al_error *err, int code, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return code ? -code : -EINVAL;
	err->code = code;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return ret_code(err);
}

int al_error_setsys(struct al_error *err, int code, const char *fmt, ...)
{
	va_list ap;
	size_t n;

	if (!err)
		return code ? -code : -EINVAL;
	err->code = code;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	n = strlen(err->msg);
	if (n < sizeof(err->msg))
		snprintf(err->msg + n, sizeof(err->msg) - n, ": %s", strerror(code));
	return ret_code(err);
}

int al_error_wrap(struct al_error *err, const char *fmt, ...)
{
	char prefix[AL_ERROR_MAX];
	char old[AL_ERROR_MAX];
	va_list ap;

	if (!err)
		return -EINVAL;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	memcpy(old, err->msg, sizeof(old));
	snprintf(err->msg, sizeof(err->msg), "%s: %s", prefix, old);
	return ret_code(err);
}

void al_error_clear(struct al_error *err)
{
	if (!err)
		return;
	err->code = 0;
	err->msg[0] = '\0';
}
