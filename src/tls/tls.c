/* OpenSSL's process-wide setup and its error queue as our messages. */
#include "tls/tls.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <string.h>
#include <time.h>

int al_tls_init(struct al_error *err)
{
	/* The configuration file could change what the gateway accepts
	 * (protocols, providers, engines loaded from disk) and would be read
	 * lazily on first use, possibly after confinement. Every setting that
	 * matters is made in code instead. */
	uint64_t opts = OPENSSL_INIT_NO_LOAD_CONFIG | OPENSSL_INIT_LOAD_SSL_STRINGS |
			OPENSSL_INIT_LOAD_CRYPTO_STRINGS;
	time_t now = time(NULL);
	struct tm tm;

	if (OPENSSL_init_ssl(opts, NULL) != 1)
		return al_tls_error(err, EIO, "initialising OpenSSL");
	/* glibc reads the time zone file (/etc/localtime) on the first
	 * gmtime_r() in a process, and OpenSSL calls it for every
	 * certificate's dates: have it read now. */
	gmtime_r(&now, &tm);
	return 0;
}

const char *al_tls_reason(const char *fallback)
{
	unsigned long e = ERR_peek_error();
	const char *s;

	if (!e)
		return fallback;
	/* OpenSSL gives no text of its own for an errno it passes on. */
	if (ERR_SYSTEM_ERROR(e))
		s = strerrordesc_np(ERR_GET_REASON(e));
	else
		s = ERR_reason_error_string(e);
	return s ? s : fallback;
}

int al_tls_error(struct al_error *err, int code, const char *what)
{
	int r = al_error_set(err, code, "%s: %s", what, al_tls_reason("unknown OpenSSL error"));

	ERR_clear_error();
	return r;
}

void al_tls_printable(const void *s, size_t len, char *buf, size_t size)
{
	const unsigned char *p = s;
	size_t n = 0;

	if (size == 0)
		return;
	for (size_t i = 0; i < len && n + 1 < size; i++)
		buf[n++] = (p[i] >= ' ' && p[i] <= '~') ? (char)p[i] : '?';
	if (n < len && size >= 4) {
		memcpy(buf + size - 4, "...", 3);
		n = size - 1;
	}
	buf[n] = '\0';
}
