/* libFuzzer target: the answer parser of airlock mcp's HTTP client
 * (src/mcp/http.c), fed anything a socket could answer. Beyond the
 * sanitizers: a parsed answer has a status of three digits, a body within
 * the cap and NUL-terminated, a content type within its buffer; and its
 * body, sent again with a Content-Length, parses to the same bytes. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define BODY_MAX 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct al_mcp_http_answer a, b;
	struct al_error err = {0};

	if (al_mcp_http_parse((const char *)data, size, BODY_MAX, &a, &err) < 0) {
		if (a.body || err.msg[0] == '\0')
			__builtin_trap();
		return 0;
	}
	if (a.status < 200 || a.status > 999 || !a.body || a.body_len > BODY_MAX ||
	    a.body[a.body_len] != '\0' || strlen(a.content_type) >= sizeof(a.content_type))
		__builtin_trap();
	char head[64];
	int n = snprintf(head, sizeof(head), "HTTP/1.1 %d x\r\nContent-Length: %zu\r\n\r\n",
			 a.status, a.body_len);
	char *again = malloc((size_t)n + a.body_len);
	memcpy(again, head, (size_t)n);
	memcpy(again + n, a.body, a.body_len);
	if (al_mcp_http_parse(again, (size_t)n + a.body_len, BODY_MAX, &b, &err) < 0 ||
	    b.status != a.status || b.body_len != a.body_len ||
	    memcmp(b.body, a.body, a.body_len) != 0)
		__builtin_trap();
	al_mcp_http_answer_clear(&b);
	free(again);
	al_mcp_http_answer_clear(&a);
	return 0;
}
