/* Finding a run's placeholders in bytes on their way out (pure: no
 * syscalls; allocation only in al_needles_new()).
 *
 * A run with secrets hands the sandbox placeholders (and fake key ids)
 * instead of the values. Wherever the gateway sees plaintext going out, it
 * looks for them: one found where it may not go is a misuse of a secret.
 * The needles are compiled once per run (struct al_needles); each stream
 * has its own struct al_needle_scan, which keeps the last bytes it was fed
 * so that a needle split across reads, chunks or feeds is still found.
 *
 * Which needle is reported does not depend on how the bytes were split: it
 * is the one whose last byte comes first in the stream (of two ending at
 * the same byte, the lower index). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#define AL_NEEDLE_MIN  8   /* shortest needle: shorter ones would be found by chance */
#define AL_NEEDLE_MAX  256 /* longest needle */
#define AL_NEEDLES_MAX 64  /* most needles in a set */

struct al_needles;

/* Compile n needles (copied: the strings need not outlive the set). Each is
 * AL_NEEDLE_MIN to AL_NEEDLE_MAX bytes of printable ASCII (no space or
 * control characters, so no needle spans two header lines); n may be 0 (a
 * set that finds nothing). Returns 0 and *ret, or -EINVAL naming the bad
 * needle by index (never its text). Free with al_needles_free(). */
int al_needles_new(const char *const *needles, size_t n, struct al_needles **ret,
		   struct al_error *err);
void al_needles_free(struct al_needles *set);
static inline void al_needles_freep(struct al_needles **set)
{
	al_needles_free(*set);
}

size_t al_needles_count(const struct al_needles *set);
/* The longest needle's length (0 for an empty set). */
size_t al_needles_max_len(const struct al_needles *set);
/* Needle i and its length (NULL and 0 when there is no needle i). */
const char *al_needles_get(const struct al_needles *set, int i);
size_t al_needles_len(const struct al_needles *set, int i);

/* A mask of needles not to look for: bit i for needle i (e.g. those of the
 * secrets scoped to a connection's host). 0 looks for all. */
typedef uint64_t al_needle_mask;

/* The needle not in skip that ends first in the len bytes at buf: its
 * index, with its offset in buf in *ret_off (may be NULL); -1 when there is
 * none (or set is NULL). */
int al_needles_find(const struct al_needles *set, al_needle_mask skip, const char *buf, size_t len,
		    size_t *ret_off);

/* One stream's scan. Public so that callers can embed it; use it only
 * through the functions below. */
struct al_needle_scan {
	const struct al_needles *set; /* borrowed; NULL finds nothing */
	al_needle_mask skip;
	size_t carry_len;
	char carry[AL_NEEDLE_MAX - 1]; /* the stream's last bytes, at most max_len - 1 */
};

/* Start a stream over set (borrowed: it must outlive s), not looking for
 * the needles in skip. */
void al_needle_scan_init(struct al_needle_scan *s, const struct al_needles *set,
			 al_needle_mask skip);

/* Forget the bytes fed so far (a new stream, e.g. the next request's
 * body). */
void al_needle_scan_reset(struct al_needle_scan *s);

/* Scan the next len bytes of the stream. Returns the index of a needle
 * that ends in them (the first to end, as above), or -1. Needles that
 * start in earlier feeds are found; ones reported before are not reported
 * again. */
int al_needle_scan_feed(struct al_needle_scan *s, const char *buf, size_t len);
