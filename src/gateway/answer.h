/* The answers on a connection a secret's value or a token went into,
 * searched as the client will read them (pure: no syscalls; zlib and
 * brotli for the content codings).
 *
 * The bytes go on as the server sent them; for the search, this follows
 * HTTP/1.1's framing of each answer (RFC 9112: the head, then a body by
 * Content-Length, chunked transfer coding or the end of the connection;
 * none for HEAD, 1xx, 204 and 304) and undoes it: the chunk-size lines are
 * taken out, and a body's Content-Encoding (gzip, x-gzip, deflate, br) is
 * decompressed. The heads, the trailers and each decoded body make one
 * stream searched for the values' forms (gateway/valscan.h); a coded
 * body's own bytes are searched too. Framing that is not strictly valid,
 * a coding it cannot undo, a body that decodes to more than
 * AL_ANSWER_DECODED_MAX, a partial answer (206) or a protocol switch
 * (101) is refused: an answer is never passed on unsearched.
 *
 * What may go on is counted in bytes from the start of the connection's
 * answers (al_answer_release): every byte fed, less those that produced
 * the possible start of a form at the end of the search's stream; those
 * wait for the bytes that settle them, with no timer. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway/valscan.h"

#define AL_ANSWER_DECODED_MAX (256ull << 20) /* a body's decoded bytes */
#define AL_ANSWER_HEAD_MAX    (64u << 10)    /* an answer's head, trailers */
#define AL_ANSWER_WAITING_MAX 1024	     /* requests waiting for answers */

struct al_answer;

enum al_answer_verdict {
	AL_ANSWER_OK,	 /* searched: al_answer_release() says what may go */
	AL_ANSWER_FOUND, /* a value's form: out->id names it */
	AL_ANSWER_BAD,	 /* cannot be searched: out->why says why */
};

struct al_answer_out {
	int id;
	char why[160];
};

/* A search over set (borrowed: it must outlive the answer). */
struct al_answer *al_answer_new(const struct al_valscan_set *set);
void al_answer_free(struct al_answer *a);

/* Search the bodies whose Content-Type is not text for the values in set
 * (borrowed: their whole forms, no halves) instead. */
void al_answer_whole(struct al_answer *a, const struct al_valscan_set *set);

/* Also search the answers with their escapes undone (gateway/unescape.h),
 * for the values in set as that view writes them (borrowed). */
void al_answer_unescaped(struct al_answer *a, const struct al_valscan_set *set);

/* A request went out; its answer comes after those of the requests
 * before it. head: it was a HEAD (its answer has no body). -ENOSPC when
 * AL_ANSWER_WAITING_MAX requests already wait. */
int al_answer_expect(struct al_answer *a, bool head);

/* The next len bytes from the server. After FOUND or BAD the answer
 * takes nothing more. */
enum al_answer_verdict al_answer_feed(struct al_answer *a, const char *buf, size_t len,
				      struct al_answer_out *out);
/* The server closed: an escape left open is searched as it is (FOUND,
 * out->id), a possible start at the end is no start, and every byte fed
 * may go but those of a head, trailer section or chunk-size line left
 * unfinished. After it the answer takes nothing more. */
enum al_answer_verdict al_answer_end(struct al_answer *a, struct al_answer_out *out);

/* Bytes fed so far, and how many of them may go to the client. */
uint64_t al_answer_fed(const struct al_answer *a);
uint64_t al_answer_release(const struct al_answer *a);
