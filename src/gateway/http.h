/* HTTP/1.x request heads as the egress proxy sees them (pure: no syscalls).
 *
 * The sandbox sends the head; the gateway parses it strictly, decides on the
 * target, and either opens a tunnel (CONNECT) or writes a cleaned head for
 * the upstream. Nothing is allocated: the result lives in a caller-provided
 * struct al_http_request whose slices point into the caller's buffer, which
 * must outlive the result. Its fields are public for that reason.
 *
 * Strictness, all of it deliberate because the bytes are hostile:
 * - the head (request line, headers, blank line) is at most 16 KiB and at
 *   most 64 header fields;
 * - lines end in CRLF; a bare LF or bare CR, NUL, DEL and other control
 *   characters (except HTAB inside field values) are refused, and so are
 *   obs-fold continuation lines, whitespace before the colon, empty lines
 *   before the request line and a second Host header;
 * - the request target is authority-form for CONNECT (port required, no
 *   userinfo), "http://" absolute-form or origin-form for everything else;
 *   "https://" absolute-URIs, asterisk-form and userinfo are refused;
 * - the Host header, when present, must name the same host (and port, when
 *   it gives one) as an absolute-form or authority-form target;
 * - Content-Length must be one plain decimal number in one field,
 *   Transfer-Encoding may only be "chunked", and both together are refused
 *   (request smuggling);
 * - Connection may not name Host, Content-Length or Transfer-Encoding as
 *   hop-by-hop. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "net/allow.h"

#define AL_HTTP_HEAD_MAX    16384
#define AL_HTTP_METHOD_MAX  32 /* the longest method a request line may have */
#define AL_HTTP_HEADERS_MAX 64

enum al_http_form {
	AL_HTTP_FORM_ORIGIN = 1, /* GET /path (Host header, or transparent capture) */
	AL_HTTP_FORM_ABSOLUTE,	 /* GET http://host[:port]/path */
	AL_HTTP_FORM_AUTHORITY,	 /* CONNECT host:port */
};

/* Header flags */
#define AL_HTTP_HDR_HOP	  0x1 /* hop-by-hop: not forwarded upstream */
#define AL_HTTP_HDR_PROXY 0x2 /* a Proxy-* field, e.g. Proxy-Authorization (also HOP) */
#define AL_HTTP_HDR_HOST  0x4 /* the Host field (rewritten upstream) */

/* Bytes [off, off + len) of the parsed buffer. */
struct al_http_slice {
	size_t off;
	size_t len;
};

struct al_http_header {
	struct al_http_slice name;
	struct al_http_slice value; /* without leading and trailing whitespace */
	unsigned flags;		    /* AL_HTTP_HDR_* */
};

struct al_http_request {
	size_t head_len; /* bytes up to and including the blank line */
	struct al_http_slice method;
	struct al_http_slice target; /* the request target as sent */
	/* Path and query for the upstream request line; empty means "/".
	 * Starts with '/' or '?' (then a '/' goes before it). Empty for
	 * CONNECT. */
	struct al_http_slice path;
	int version_minor; /* HTTP/1.0 or HTTP/1.1 */
	enum al_http_form form;
	bool is_connect;
	/* Target host: from the target, or from the Host header in origin
	 * form. kind is AL_HOST_NONE for an origin-form HTTP/1.0 request
	 * without Host (transparent capture must use the original
	 * destination). */
	struct al_host host;
	uint16_t port;		/* explicit, or 80 when not given */
	bool port_explicit;	/* the target (or Host) gave a port */
	int host_header;	/* index into headers, or -1 */
	int64_t content_length; /* -1 when absent */
	bool chunked;
	size_t n_headers;
	struct al_http_header headers[AL_HTTP_HEADERS_MAX];
};

/* Parse the request head at the start of buf (len bytes; bytes after the
 * head, such as a body, are not looked at). Returns head_len (> 0) and fills
 * *ret when the head is complete and valid. Otherwise, with the reason in
 * err and *ret untouched:
 *   -EAGAIN           the head is not complete yet and nothing so far is
 *                     wrong: read more;
 *   -E2BIG            the head exceeds 16 KiB or 64 fields (answer 431);
 *   -ENOTSUP          valid but unsupported: asterisk-form, https://
 *                     absolute-URI, a transfer coding other than chunked
 *                     (answer 501);
 *   -EPROTONOSUPPORT  an HTTP version other than 1.0 and 1.1 (answer 505);
 *   -EPROTO           anything malformed (answer 400).
 * Malformed bytes are reported as soon as they arrive, before the head is
 * complete. */
int al_http_parse_request(const char *buf, size_t len, struct al_http_request *ret,
			  struct al_error *err);

/* The status code to answer a failed al_http_parse_request() with (400,
 * 431, 501, 505), or 0 for -EAGAIN. */
int al_http_status_for_error(int r);

/* True if a Host field value (len bytes at value) names host, and port when
 * the value carries a port. An invalid value, or one with userinfo, never
 * matches. */
bool al_http_host_matches(const struct al_host *host, uint16_t port, const char *value, size_t len);

/* Flags for al_http_format_upstream() */
#define AL_HTTP_UPSTREAM_CLOSE 0x1 /* add "Connection: close" */

/* Write the head to send upstream for a non-CONNECT request parsed from buf:
 * "METHOD /path HTTP/1.1", a Host field from req->host (with the port
 * unless it is 80), then every field except Host, hop-by-hop and Proxy-*
 * ones, in order, then the blank line. The body, if any, follows unchanged
 * (Content-Length and Transfer-Encoding are kept). Writes a NUL after the
 * head when it fits. Returns the length (NUL not counted), -ENOSPC when out
 * is too small, or -EINVAL for CONNECT or a request without a host. */
int al_http_format_upstream(const char *buf, const struct al_http_request *req, unsigned flags,
			    char *out, size_t size);

/* One header field to write: name and value (name_len and value_len bytes,
 * not NUL-terminated), borrowed. */
struct al_http_header_view {
	const char *name;
	size_t name_len;
	const char *value;
	size_t value_len;
};

/* Write a request head: "METHOD TARGET HTTP/1.1", each of the n fields as
 * "name: value" in order, then the blank line. Nothing is checked or
 * added: the caller built a valid head (al_http_format_upstream() is the
 * usual way for a parsed request). Writes a NUL after the head when it
 * fits. Returns the length (NUL not counted) or -ENOSPC. */
int al_http_format_head(const char *method, size_t method_len, const char *target,
			size_t target_len, const struct al_http_header_view *headers, size_t n,
			char *out, size_t size);

/* Write a complete response with a short text/plain body and "Connection:
 * close": status is one of 400, 402, 403, 404, 405, 407, 408, 413, 414, 421,
 * 431, 500, 501, 502, 503, 504, 505. detail (may be NULL) goes into the body
 * after the reason phrase; control and non-ASCII characters are replaced
 * and it is cut at 256 characters. Returns the length written (a NUL
 * follows), -ENOSPC when out is too small, -EINVAL for another status. */
int al_http_format_response(int status, const char *detail, char *out, size_t size);

/* Write a 403 response with "X-Airlock-Denied: <rule_text>" and a body
 * naming it; rule_text is cleaned as detail is above. Returns as
 * al_http_format_response(). */
int al_http_format_denied(const char *rule_text, char *out, size_t size);

/* Write "HTTP/1.1 200 Connection established" and the blank line, the
 * answer to an allowed CONNECT. Returns the length or -ENOSPC. */
int al_http_format_connect_ok(char *out, size_t size);
