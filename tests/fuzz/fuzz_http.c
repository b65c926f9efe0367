/* libFuzzer target: the HTTP request-head parser (gateway/http.c), the
 * upstream head it writes and the response builders. The head comes from
 * code inside the sandbox. Beyond the sanitizers, a few invariants trap:
 * slices stay inside the head, and the upstream head the proxy writes is
 * itself a valid request for the same host and port. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gateway/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_slice(struct al_http_slice s, size_t head_len)
{
	if (s.off > head_len || s.len > head_len - s.off)
		__builtin_trap();
}

static void check_upstream(const char *buf, const struct al_http_request *req)
{
	static char out[AL_HTTP_HEAD_MAX + 1024];
	static struct al_http_request again;
	int n, r;

	n = al_http_format_upstream(buf, req, AL_HTTP_UPSTREAM_CLOSE, out, sizeof(out));
	if (req->is_connect || req->host.kind == AL_HOST_NONE) {
		if (n != -EINVAL)
			__builtin_trap();
		return;
	}
	if (n < 0 || (size_t)n >= sizeof(out) || out[n] != '\0')
		__builtin_trap();
	r = al_http_parse_request(out, (size_t)n, &again, NULL);
	/* Adding Host and Connection can push a head over the limits. */
	if (r == -E2BIG)
		return;
	if (r != n || again.form != AL_HTTP_FORM_ORIGIN || again.port != req->port ||
	    strcmp(again.host.text, req->host.text) != 0 || again.chunked != req->chunked ||
	    again.content_length != req->content_length)
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct al_http_request req;
	struct al_error err = {0};
	const char *buf = (const char *)data;
	char resp[1024], text[300];
	int r;

	r = al_http_parse_request(buf, size, &req, &err);
	(void)al_http_status_for_error(r);
	if (r > 0) {
		if ((size_t)r > size || (size_t)r > AL_HTTP_HEAD_MAX || req.head_len != (size_t)r ||
		    req.n_headers > AL_HTTP_HEADERS_MAX)
			__builtin_trap();
		check_slice(req.method, req.head_len);
		check_slice(req.target, req.head_len);
		check_slice(req.path, req.head_len);
		for (size_t i = 0; i < req.n_headers; i++) {
			check_slice(req.headers[i].name, req.head_len);
			check_slice(req.headers[i].value, req.head_len);
		}
		check_upstream(buf, &req);
		(void)al_http_host_matches(&req.host, req.port, buf, size < 300 ? size : 300);
	}
	memcpy(text, data, size < sizeof(text) - 1 ? size : sizeof(text) - 1);
	text[size < sizeof(text) - 1 ? size : sizeof(text) - 1] = '\0';
	if (al_http_format_denied(text, resp, sizeof(resp)) <= 0)
		__builtin_trap();
	if (al_http_format_response(502, text, resp, sizeof(resp)) <= 0)
		__builtin_trap();
	return 0;
}
