/* libFuzzer target: a TLS server end (tls/end.c) fed what a sandbox's
 * client might send instead of a handshake, decided for example.test (the
 * corpus holds real ClientHellos for it). The end must never take more than
 * its bound, never hold more than a record past its output bound, report a
 * failure as one printable line, and an SNI it accepted must be the
 * decided host. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tls/ca.h"
#include "tls/end.h"
#include "tls/tls.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct al_tls_server_ctx *ctx;

static void setup(void)
{
	static struct al_tls_ca *ca;
	struct al_error err = {0};

	if (al_tls_init(&err) < 0 ||
	    al_tls_ca_new("fuzz", time(NULL) + 86400, NULL, 0, &ca, &err) < 0 ||
	    al_tls_server_ctx_new(ca, &ctx, &err) < 0)
		abort();
}

static void check_line(const char *s)
{
	for (; s && *s; s++)
		if (*s < ' ' || *s > '~')
			__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct al_error err = {0};
	struct al_tls_end *e = NULL;
	unsigned char out[16384];
	char plain[4096];
	size_t off = 0;

	if (!ctx)
		setup();
	if (al_tls_end_server(ctx, "example.test", &e, &err) < 0)
		abort();
	while (off < size) {
		size_t room = al_tls_end_cipher_room(e), n = size - off;
		ssize_t r;
		if (room == 0)
			break;
		/* Records split at odd places, as TCP may deliver them. */
		if (n > room)
			n = room;
		if (n > 1 + data[off] % 64 && off + n < size)
			n = 1 + data[off] % 64;
		if (al_tls_end_put_cipher(e, data + off, n) != 0)
			__builtin_trap();
		off += n;
		while ((r = al_tls_end_read(e, plain, sizeof(plain))) > 0)
			;
		if (r != -EAGAIN && r != -EPROTO && r != 0)
			__builtin_trap();
		if (al_tls_end_pending_cipher(e) > AL_TLS_CIPHER_MAX + 16384 + 512)
			__builtin_trap();
		while (al_tls_end_get_cipher(e, out, sizeof(out)) > 0)
			;
		if (r == -EPROTO)
			break;
	}
	check_line(al_tls_end_error(e));
	if (al_tls_end_sni(e) && strcmp(al_tls_end_sni(e), "example.test") != 0 &&
	    !al_tls_end_error(e))
		__builtin_trap();
	al_tls_end_free(e);
	return 0;
}
