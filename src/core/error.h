/* Recoverable errors for parent, daemon and library code (STYLE.md section 3).
 *
 * A function that can fail takes `struct al_error *err` last and returns 0 on
 * success or a negative errno on failure, after filling err. Each layer may
 * prefix context with al_error_wrap(), so the user reads
 * "policy.json: filesystem.mounts[2].host: expected an absolute path". */
#pragma once

#include <stdarg.h>

#define AL_ERROR_MAX 1024

struct al_error {
	int code;		/* positive errno, 0 when unset */
	char msg[AL_ERROR_MAX]; /* one line, no trailing newline */
};

/* Fill err with code (a positive errno, or 0 for "no errno applies") and a
 * formatted message. Returns -code, or -EINVAL when code is 0, so callers can
 * write `return al_error_set(err, EINVAL, "...")`. err may be NULL. */
int al_error_set(struct al_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Like al_error_set() but appends ": strerror(code)". */
int al_error_setsys(struct al_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefix the existing message with "<formatted>: ". Returns -err->code (or
 * -EINVAL). err may be NULL. */
int al_error_wrap(struct al_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Reset err to "no error". */
void al_error_clear(struct al_error *err);
