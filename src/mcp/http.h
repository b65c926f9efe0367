/* A small HTTP/1.1 client over a Unix socket, for `airlock mcp` talking to
 * the daemon (docs/api.md). One request per connection ("Connection:
 * close"): the request goes out with Content-Length, the answer is read
 * until it is whole by its framing or the server closes (also when the
 * server answered before reading the body and the send broke), and parsed
 * once by al_mcp_http_parse(), which takes a
 * Content-Length or chunked body (or one that runs to the close), with caps
 * on the head and the body. The parser is pure and fuzzed
 * (tests/fuzz/fuzz_mcp_http.c): the daemon is trusted, but a client that
 * reads whatever a socket path answers must not trust the bytes. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"

#define AL_MCP_HTTP_HEAD_MAX (64 * 1024)
/* A file of the daemon's file API is at most 32 MiB; a waited exec's
 * answer holds two streams of 8 MiB each, JSON-escaped (up to 6 bytes a
 * byte for control bytes). 128 MiB bounds every answer the daemon gives. */
#define AL_MCP_HTTP_BODY_MAX (128u * 1024 * 1024)

struct al_mcp_http_answer {
	int status;		/* 100..999 */
	char content_type[128]; /* "" when absent; cut at 127 bytes */
	char *body;		/* malloc'd, NUL-terminated (the NUL is not counted) */
	size_t body_len;
};

/* Parse an answer read whole (to the server's close): status line, header
 * fields, then the body framed by Content-Length, chunked
 * Transfer-Encoding, or the close. Refuses a head over
 * AL_MCP_HTTP_HEAD_MAX, a body over body_max, both framings or two
 * Content-Lengths, any transfer coding but chunked, a 1xx status, a
 * truncated body, malformed chunk sizes. Returns 0 with *a filled (free
 * with al_mcp_http_answer_clear()), or a negative errno with err naming
 * what was wrong. */
int al_mcp_http_parse(const char *buf, size_t len, size_t body_max, struct al_mcp_http_answer *a,
		      struct al_error *err);

void al_mcp_http_answer_clear(struct al_mcp_http_answer *a);

/* One request on a new connection to the Unix socket at sock_path: method,
 * target (already percent-encoded), an optional body of body_len bytes
 * with content_type. The whole exchange must end within timeout_ms;
 * *stop, when not NULL, is checked whenever a wait is interrupted by a
 * signal (the MCP server's SIGTERM), and aborts the request when set.
 * Returns 0 with *a filled, or a negative errno with err saying what
 * failed (connect, timeout, a malformed answer). */
int al_mcp_http_request(const char *sock_path, const char *method, const char *target,
			const char *body, size_t body_len, const char *content_type, int timeout_ms,
			volatile const int *stop, struct al_mcp_http_answer *a,
			struct al_error *err);
