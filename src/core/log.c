#include "core/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

/* The process's one setting (the CLI's -q and -v; a daemon's own flag):
 * process-wide by design, atomic so that threads may read it while it is
 * set. */
static atomic_int current_level = AL_LOG_WARN;

void al_log_set_level(enum al_log_level level)
{
	atomic_store_explicit(&current_level, (int)level, memory_order_relaxed);
}

enum al_log_level al_log_get_level(void)
{
	return (enum al_log_level)atomic_load_explicit(&current_level, memory_order_relaxed);
}

static void (*_Atomic sink)(enum al_log_level level, const char *line);

void al_log_set_sink(void (*fn)(enum al_log_level level, const char *line))
{
	atomic_store(&sink, fn);
}

void al_log(enum al_log_level level, const char *fmt, ...)
{
	void (*fn)(enum al_log_level, const char *);
	char line[2048];
	va_list ap;

	if (level > al_log_get_level())
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if ((fn = atomic_load(&sink))) {
		fn(level, line);
		return;
	}
	/* One write per line so lines from concurrent runs never interleave. */
	fprintf(stderr, "airlock: %s\n", line);
}

static double ms_now(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

/* Set by the CLI when $AIRLOCK_PHASES is set: every phase is printed,
 * whatever the level, with its CLOCK_MONOTONIC time, for bench/phases.py
 * to put against the time it started the process. Off, a phase costs one
 * atomic load and nothing else. */
static atomic_bool phases_on;

void al_log_phases_on(void)
{
	atomic_store_explicit(&phases_on, true, memory_order_relaxed);
}

/* The origin is the process's first phase (a debugging aid, for the CLI's
 * one run), in nanoseconds: set once, by whichever thread comes first. */
void al_log_phase(const char *what)
{
	static _Atomic uint64_t start;
	uint64_t now, origin = 0;
	bool phases = atomic_load_explicit(&phases_on, memory_order_relaxed);

	if (!phases && al_log_get_level() < AL_LOG_DEBUG)
		return;
	now = (uint64_t)(ms_now(CLOCK_MONOTONIC) * 1e6);
	if (phases) {
		/* One write per line, as al_log's. */
		fprintf(stderr, "airlock: phase %llu.%06llu ms: %s\n",
			(unsigned long long)(now / 1000000), (unsigned long long)(now % 1000000),
			what);
		return;
	}
	if (atomic_compare_exchange_strong(&start, &origin, now))
		origin = now; /* the first phase */
	al_log(AL_LOG_DEBUG, "+%.3f ms: %s", (double)(now - origin) / 1e6, what);
}
