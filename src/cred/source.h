/* A secret's value from its host-side source (policy/cred.h): airlock's
 * own environment, a file, an inherited descriptor, or a command run on
 * the host at start (`vault read`, `gh auth token`, an STS call), so an
 * existing issuer mints the value per run.
 *
 * The value lives in memory allocated here and is wiped when freed. No
 * error message contains it, nor a command's output: a failing command is
 * named by its path and how it failed (exit status, signal, timeout,
 * nothing written). A command has its source's timeout_ms to write and
 * exit, then it and its process group are killed; it is waited for
 * through a pidfd, with no exit signal, so the process's own signal state
 * (SIGCHLD's disposition, a daemon's handlers) is neither used nor
 * changed. */
#pragma once

#include <stddef.h>

#include "core/error.h"
#include "policy/cred.h"

#define AL_SECRET_VALUE_MAX (64u << 10)

struct al_secret_value {
	char *data; /* NUL-terminated (len bytes before it) */
	size_t len;
};

/* Read src's value into *ret (one trailing newline dropped; an empty value
 * is an error). what ("secret ANALYSIS_TOKEN") starts each message. */
int al_secret_source_read(const struct al_secret_source *src, const char *what,
			  struct al_secret_value *ret, struct al_error *err);

/* Wipe and free. */
void al_secret_value_clear(struct al_secret_value *v);
