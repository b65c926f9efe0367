/* libFuzzer target: the SOCKS5 greeting and request parsers
 * (gateway/socks.c), fed as one stream the way a client sends them, and on
 * their own. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gateway/socks.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void request(const uint8_t *data, size_t size)
{
	struct al_socks_request req;
	uint8_t out[AL_SOCKS_REPLY_MAX];
	int r = al_socks_parse_request(data, size, &req, NULL);

	if (r == -EAGAIN || r == -EPROTO || r == -EOPNOTSUPP || r == -EAFNOSUPPORT) {
		if (r != -EAGAIN && al_socks_reply_code_for_error(r) < 1)
			__builtin_trap();
		return;
	}
	if (r <= 0 || (size_t)r > size || (size_t)r > AL_SOCKS_REQUEST_MAX || req.port == 0 ||
	    req.host.kind == AL_HOST_NONE || strlen(req.host.text) > AL_HOST_MAX)
		__builtin_trap();
	if (al_socks_format_reply(AL_SOCKS_REP_SUCCEEDED, &req.host.addr, req.port, out,
				  sizeof(out)) <= 0)
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct al_socks_greeting g;
	uint8_t out[2];
	int r;

	request(data, size);
	r = al_socks_parse_greeting(data, size, &g, NULL);
	if (r > 0) {
		if ((size_t)r > size || (size_t)r > AL_SOCKS_GREETING_MAX)
			__builtin_trap();
		if (al_socks_format_method_reply(&g, out, sizeof(out)) != 2)
			__builtin_trap();
		request(data + r, size - (size_t)r);
	}
	return 0;
}
