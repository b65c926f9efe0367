/* Recoverable errors for parent, daemon and library code (the child after
 * clone3 cannot recover: it reports its step's errno and exits instead).
 *
 * A function that can fail takes `struct al_error *err` last and returns 0 on
 * success or a negative errno on failure, after filling err. Each layer may
 * prefix context with al_error_wrap(), so the user reads
 * "policy.json: filesystem.mounts[2].host: expected an absolute path". */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

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

/* Every error a check finds, not only the first (`airlock check` reports
 * them all). Each entry is one line of text, with the parts a program may
 * want on their own: the policy file or flag it is in, the JSON path, the
 * line and column of a syntax error. Control characters in what is added
 * become '?', so an entry is always one line. Past AL_ERRORS_MAX entries
 * errors are only counted (omitted), so hostile input cannot make the list
 * grow without bound. Zero-initialise; free with al_errors_clear(). */
#define AL_ERRORS_MAX 100

struct al_error_entry {
	int code;	  /* positive errno */
	char *text;	  /* the whole line: "WHERE: PATH: MESSAGE", "WHERE:LINE:COL: MESSAGE" */
	char *where;	  /* the policy file or the flag as typed; NULL when not known */
	char *path;	  /* the JSON path in the file; NULL when none */
	int line, column; /* a syntax error's place (1-based); 0 otherwise */
	char *message;	  /* what is wrong: text without where, path, line and column */
};

struct al_errors {
	struct al_error_entry *v;
	size_t n;	/* entries kept, at most AL_ERRORS_MAX */
	size_t omitted; /* errors found past the cap: counted, not kept */
};

/* Add an error in where (may be NULL) at path (may be NULL): its text is
 * the parts that are given, joined by ": ". code as for al_error_set().
 * Returns -code, or -EINVAL when code is 0. */
int al_errors_add(struct al_errors *l, int code, const char *where, const char *path,
		  const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Add a syntax error at line:column of where: "WHERE:LINE:COL: MESSAGE".
 * Returns -EINVAL. */
int al_errors_add_syntax(struct al_errors *l, const char *where, int line, int column,
			 const char *message);

/* Add err's message as one entry (where and path not known). Returns
 * -err->code, or -EINVAL. */
int al_errors_add_error(struct al_errors *l, const struct al_error *err);

/* Errors found: those kept plus those omitted. */
size_t al_errors_count(const struct al_errors *l);

/* True when a new error would only be counted: callers may skip building
 * its message. */
bool al_errors_full(const struct al_errors *l);

/* Copy entry i (from start, the first found after it) into err, for callers
 * that report one error. Returns its -code; -EINVAL when there is none. */
int al_errors_first(const struct al_errors *l, size_t start, struct al_error *err);

/* Free every entry and reset l to empty. */
void al_errors_clear(struct al_errors *l);
