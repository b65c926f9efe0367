/* Logging for the parent side. Messages go to stderr prefixed "airlock: ".
 * The child after clone never logs; it reports through the sync socket. */
#pragma once

enum al_log_level {
	AL_LOG_ERROR = 0,
	AL_LOG_WARN = 1,
	AL_LOG_INFO = 2,
	AL_LOG_DEBUG = 3,
};

/* Messages above this level are dropped. -q sets ERROR, -v sets DEBUG. */
void al_log_set_level(enum al_log_level level);
enum al_log_level al_log_get_level(void);

void al_log(enum al_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Send every message to fn instead of stderr (the OCI runtime's --log,
 * whose container supervisor must write nothing on the container's
 * stderr); NULL: stderr again. Process-wide, set before threads start. */
void al_log_set_sink(void (*fn)(enum al_log_level level, const char *line));

/* -v timing: "+1.234 ms: what", measured from the first call; with
 * al_log_phases_on() (the CLI's $AIRLOCK_PHASES) instead "phase T ms:
 * what" at any level, T the CLOCK_MONOTONIC time. */
void al_log_phase(const char *what);
void al_log_phases_on(void);

#define al_err(...)   al_log(AL_LOG_ERROR, __VA_ARGS__)
#define al_warn(...)  al_log(AL_LOG_WARN, __VA_ARGS__)
#define al_info(...)  al_log(AL_LOG_INFO, __VA_ARGS__)
#define al_debug(...) al_log(AL_LOG_DEBUG, __VA_ARGS__)
