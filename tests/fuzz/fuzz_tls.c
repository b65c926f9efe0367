/* libFuzzer target: SNI extraction from a TLS ClientHello (gateway/tls.c),
 * which transparent capture runs on the first bytes of a connection. A name
 * it returns must be a valid, normalised host name. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gateway/tls.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct al_host h, again;
	size_t n;

	if (al_tls_parse_sni(data, size, &h, NULL) != 0)
		return 0;
	n = strlen(h.text);
	if (h.kind != AL_HOST_NAME || n == 0 || n > AL_HOST_MAX)
		__builtin_trap();
	if (al_host_parse(h.text, n, &again, NULL) != 0 || strcmp(again.text, h.text) != 0)
		__builtin_trap();
	return 0;
}
