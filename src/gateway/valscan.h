/* Finding the run's secret values in what comes back from an upstream
 * (pure: no syscalls; allocation only when a set or a scan is made).
 *
 * A value the gateway put into a request must not reach the sandbox in
 * the answer: a server that echoes its request (a debug endpoint, an error
 * page, a redirect carrying the query) would hand it over. Servers echo in
 * their own encodings, so each value is searched in the forms it is likely
 * to come back in (al_valscan_forms): itself; percent-encoded (RFC 3986's
 * unreserved characters kept, or also '/', or also !'()*; upper- or
 * lower-case hex; '+' for a space or not); base64 and base64url at each of
 * the three alignments (the characters that depend on the value only);
 * JSON string escapes (with "\/" or "/", non-ASCII as \u escapes or as
 * it is, upper- or lower-case hex, < > & as Go and "&'+<>` as .NET write
 * them); HTML's entities for & < > " ' (named and numeric; also ` and =
 * as Handlebars writes them). Forms shorter than AL_VALSCAN_MIN bytes are
 * not searched (they would be found by chance); a value's raw form always
 * is.
 *
 * A set is compiled once per run; each stream has its own struct
 * al_valscan, which keeps the stream's last bytes so that a form split
 * across feeds is still found, and says how many of the last bytes fed
 * could be the start of a form (al_valscan_pending): those are what the
 * gateway must hold back until the next bytes settle them. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#define AL_VALSCAN_MIN	       8	   /* shortest form searched */
#define AL_VALSCAN_MAX	       (32u << 10) /* longest form */
#define AL_VALSCAN_NEEDLES_MAX 16384	   /* most forms in a set */

struct al_valscan_set;

/* A value to search for: id names it in what a scan returns (the caller's
 * index of the secret). Each form is searched whole and, unless whole is
 * set, also by its first and its last half (at least AL_VALSCAN_MIN bytes
 * each): an echo cut short (an error message that quotes the first
 * characters), or one character escaped in a way no form foresaw, still
 * holds one half. whole is for what other strings share a half with (the
 * start of a run's tokens: the first half is the key's header). With
 * exact, only the bytes as given are searched; with bare, they and their
 * halves; with plain, they and their base64 and base64url at each
 * alignment, and the halves of each (for a view that undoes the other
 * encodings itself). */
struct al_valscan_value {
	const char *data;
	size_t len;
	int id;
	bool exact, whole, plain, bare;
};

/* Compile the forms of n values (copied: the values need not outlive the
 * set). n may be 0 (a set that finds nothing). -EINVAL (naming the value
 * by index, never its text) for a value shorter than AL_VALSCAN_MIN, one
 * whose forms are longer than AL_VALSCAN_MAX, or too many forms in all.
 * Free with al_valscan_free(), which wipes the forms. */
int al_valscan_new(const struct al_valscan_value *v, size_t n, struct al_valscan_set **ret,
		   struct al_error *err);
void al_valscan_free(struct al_valscan_set *set);
static inline void al_valscan_freep(struct al_valscan_set **set)
{
	al_valscan_free(*set);
}

size_t al_valscan_count(const struct al_valscan_set *set);
size_t al_valscan_max_len(const struct al_valscan_set *set);

/* Each form of a value (the raw one first, duplicates left out, short
 * ones too), handed to fn with data; for tests and for al_valscan_new.
 * Returns the number of forms, or -EINVAL when one is longer than
 * AL_VALSCAN_MAX. */
int al_valscan_forms(const char *value, size_t len,
		     void (*fn)(const char *form, size_t len, void *data), void *data);

/* The id of a value found whole in the len bytes at buf, or -1. */
int al_valscan_find(const struct al_valscan_set *set, const char *buf, size_t len);

/* One stream's scan. */
struct al_valscan {
	const struct al_valscan_set *set; /* borrowed; NULL finds nothing */
	size_t carry_len;
	char *carry; /* the stream's last bytes, at most max_len - 1 */
	char *joint; /* room for the carry and as many new bytes */
};

/* Start a stream over set (borrowed: it must outlive s). */
void al_valscan_init(struct al_valscan *s, const struct al_valscan_set *set);
void al_valscan_fini(struct al_valscan *s);
/* Forget the bytes fed so far. */
void al_valscan_reset(struct al_valscan *s);
/* Scan the next len bytes of the stream: the id of a value whose form
 * ends in them (a form that started in earlier feeds included), or -1. */
int al_valscan_feed(struct al_valscan *s, const char *buf, size_t len);
/* How many of the last bytes fed are the start of a form (the longest
 * such start; 0 when none): the bytes a caller must not let go yet. */
size_t al_valscan_pending(const struct al_valscan *s);
