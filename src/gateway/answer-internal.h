/* What answer.c and answer-head.c share. Internal to src/gateway. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum coding {
	CODE_NONE,
	CODE_GZIP,
	CODE_DEFLATE,
	CODE_BR
};

struct framing {
	int te;		  /* Transfer-Encoding fields seen */
	bool chunked_ok;  /* they say exactly "chunked" */
	int cl;		  /* Content-Length fields seen */
	uint64_t length;  /* their value (all the same) */
	bool cl_mismatch; /* not all the same, or not a number */
	enum coding coding;
	bool binary; /* a Content-Type that is not text */
	char bad_coding[48];
	int n_codings;
};

/* The lines of a head or trailer section of n bytes (ending in an empty
 * line): each a field but the first with status (its code in *code); CR
 * only before LF, no folded lines. What the fields say of the framing
 * goes into fr. */
bool gw_answer_lines(const char *h, size_t n, bool status, struct framing *fr, int *code);
