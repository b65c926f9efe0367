/* A code context's frame (sctx.c): the line the driver writes after a run,
 * "\x1eALCTX:NONCE:" JSON "\n" on stdout, and its end marker
 * "\x1eALCTX:NONCE:end\n" on stderr. The user's code runs in the same
 * interpreter and can write anything, so the frame is parsed as hostile:
 * bounded, strict JSON, each field of its type. Pure; fuzzed
 * (tests/fuzz/fuzz_ctx_frame.c). */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A frame's JSON, at most (past it the interpreter is ended): room for
 * its four text fields at their cap, escaped. */
#define AL_CTX_FRAME_MAX (8u << 20)
/* Each text field of a frame (value, name, message, traceback), at most,
 * as UTF-8 bytes: the drivers cut theirs to it, so more is a forgery. */
#define AL_CTX_TEXT_MAX (1u << 20)
/* Room for a marker (a nonce of at most 32 characters). */
#define AL_CTX_MARK_MAX 64

struct al_ctx_frame {
	bool ok;       /* parsed */
	char *value;   /* the last expression's value as text, or NULL */
	json_t *error; /* {"name", "message", "traceback"} (strings), or NULL */
};

/* The marker for nonce (at most 32 characters) into buf
 * (AL_CTX_MARK_MAX bytes): stdout's frame tag, or with end stderr's whole
 * end line. Its length (no NUL counted). */
size_t al_ctx_marker(char *buf, const char *nonce, bool end);

/* The frame's JSON p[0..n) for the run numbered id: 0 with f filled (ok),
 * or -EINVAL (f left clear) when it is over AL_CTX_FRAME_MAX, not a JSON
 * object of exactly "id" (id), "value" (a string or null) and "error"
 * (null, or an object of exactly the strings "name", "message" and
 * "traceback"), or a string is over AL_CTX_TEXT_MAX bytes. */
int al_ctx_frame_parse(const char *p, size_t n, uint64_t id, struct al_ctx_frame *f);
void al_ctx_frame_clear(struct al_ctx_frame *f);
