#include "core/log.h"

#include <stdarg.h>
#include <stdio.h>

static enum al_log_level current_level = AL_LOG_WARN;

void al_log_set_level(enum al_log_level level)
{
	current_level = level;
}

enum al_log_level al_log_get_level(void)
{
	return current_level;
}

void al_log(enum al_log_level level, const char *fmt, ...)
{
	char line[2048];
	va_list ap;

	if (level > current_level)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* One write per line so lines from concurrent runs never interleave. */
	fprintf(stderr, "airlock: %s\n", line);
}
