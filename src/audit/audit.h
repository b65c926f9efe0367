/* The audit stream: one JSON object per line, appended to a file, one
 * stream across layers (run start and end, limit hits, denied syscalls,
 * egress decisions and DNS queries). Schema: docs/audit.md.
 *
 * A NULL stream is valid everywhere and records nothing, so callers need
 * no checks. Each line goes out in a single write() on an O_APPEND fd, so
 * concurrent runs appending to one file never interleave within a line. */
#pragma once

#include <jansson.h>

#include "core/error.h"

struct al_audit;

/* Open (create, mode 0600) path for appending. run_id is put on every line.
 * Returns 0 or -errno with err naming the path. */
int al_audit_open(const char *path, const char *run_id, struct al_audit **ret,
		  struct al_error *err);

/* Write to fd, an inherited descriptor open for writing (what names it in
 * messages): a copy of it is taken (close-on-exec), fd is left open.
 * Returns 0 or -errno with err naming what. */
int al_audit_open_fd(int fd, const char *what, const char *run_id, struct al_audit **ret,
		     struct al_error *err);

/* Write {"ts": ..., "run": ..., "event": event, ...fields}. Takes ownership
 * of fields (may be NULL). Write errors are reported once on stderr. */
void al_audit_emit(struct al_audit *a, const char *event, json_t *fields);

/* A stream that hands each event to fn instead (the gateway process sends
 * its events to the supervisor this way); fn owns fields. */
struct al_audit *al_audit_sink(void (*fn)(void *data, const char *event, json_t *fields),
			       void *data);

void al_audit_close(struct al_audit *a);

/* UTC time as RFC 3339 with milliseconds: "2026-11-29T18:03:04.123Z". */
void al_audit_timestamp(char *buf, size_t len);
/* The same for a given CLOCK_REALTIME time (sec may be before 1970). */
void al_audit_format_time(long long sec, long nsec, char *buf, size_t len);

/* s as a JSON string, with every byte that is not part of valid UTF-8
 * replaced by U+FFFD (jansson refuses invalid UTF-8, and a field that
 * silently went missing would hide what ran); NULL gives JSON null. */
json_t *al_json_text(const char *s);
