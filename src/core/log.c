#include "core/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

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

static double ms_now(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

void al_log_phase(const char *what)
{
	static double start = -1;

	if (current_level < AL_LOG_DEBUG)
		return;
	if (start < 0)
		start = ms_now(CLOCK_MONOTONIC); /* the first phase is the origin */
	al_log(AL_LOG_DEBUG, "+%.3f ms: %s", ms_now(CLOCK_MONOTONIC) - start, what);
}
