/* A stream with its escapes undone, as one more view for the answers'
 * search (pure). Servers escape what they echo in more ways than any list
 * of forms holds (a JSON encoder that writes every character but letters
 * and digits as \u00XX, a template's &#47;): this view decodes, in one
 * pass and in any mix, JSON's backslash escapes (\uXXXX with surrogate
 * pairs, \" \\ \/ \b \f \n \r \t), percent-encoding (%XX, either case),
 * and HTML's character references (&#NNN; &#xHHH; and &amp; &lt; &gt;
 * &quot; &apos;). What is not a complete escape goes through as it is.
 * The values are searched for in this view raw and by halves, and those
 * with spaces also with '+' for them (form encoding's space). */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define AL_UNESCAPE_SEQ_MAX 16 /* the longest escape taken: "&#x10FFFF;" */

struct al_unescape {
	int st;
	char seq[AL_UNESCAPE_SEQ_MAX];
	size_t seq_len;
	uint64_t seq_at; /* where the unfinished escape started */
	long high;	 /* a high surrogate waiting for its low half, or -1 */
	uint64_t high_at;
};

void al_unescape_init(struct al_unescape *u);

/* Undo the escapes of the n bytes at in, whose first byte is at position
 * pos of the stream, into out (room for n + 2 * AL_UNESCAPE_SEQ_MAX).
 * Returns how many bytes were written. */
size_t al_unescape_feed(struct al_unescape *u, const char *in, size_t n, uint64_t pos, char *out);

/* Where an escape still unfinished started (its bytes may yet decode to
 * the start of a value), or UINT64_MAX. */
uint64_t al_unescape_open(const struct al_unescape *u);

/* The end of the stream: an unfinished escape goes as it is, written as
 * by al_unescape_feed; the state is as new. */
size_t al_unescape_end(struct al_unescape *u, char *out);

#include "gateway/valscan.h"

/* The view as the answers' search uses it: the stream unescaped and
 * searched with a set of the values as this view writes them (set
 * borrowed). */
struct al_unescape_view {
	struct al_unescape u;
	struct al_valscan scan;
	uint64_t end; /* the stream position after the last byte fed */
	char *buf;
};

void al_unescape_view_init(struct al_unescape_view *v, const struct al_valscan_set *set);
void al_unescape_view_fini(struct al_unescape_view *v);
/* The next n bytes of the stream, the first at position pos: the id of
 * a value found, or -1. */
int al_unescape_view_feed(struct al_unescape_view *v, const char *p, size_t n, uint64_t pos);
/* The stream position from which bytes must wait (the start of a value
 * this view may be showing, or of an unfinished escape; the former
 * reckoned at AL_UNESCAPE_SEQ_MAX stream bytes for each byte of the view),
 * or UINT64_MAX. */
uint64_t al_unescape_view_hold(const struct al_unescape_view *v);
/* The stream ends here (an answer is whole): an unfinished escape is
 * searched as it is, then the view starts anew. The id of a value found,
 * or -1. */
int al_unescape_view_end(struct al_unescape_view *v);
