/* The server name (SNI) of a TLS ClientHello, for transparent capture of
 * HTTPS connections that did not go through the proxy (pure: no syscalls).
 *
 * The gateway peeks at the first bytes of a captured connection, learns the
 * name the client wants and applies the allowlist. This parser only reads;
 * a rule that intercepts TLS has the gateway end it through src/tls. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "net/allow.h"

/* The longest ClientHello (handshake header included) we reassemble, and
 * the most TLS records it may span. */
#define AL_TLS_HELLO_MAX   16384
#define AL_TLS_RECORDS_MAX 4

/* Find the host_name in the ClientHello at the start of buf (len bytes of
 * the raw stream: record headers and fragments of up to 4 handshake
 * records; bytes after the ClientHello are not looked at). Every field is
 * walked and checked, not only the extension we want. Returns 0 and fills
 * *ret (always AL_HOST_NAME, lower-cased) or, with the reason in err:
 *   -EAGAIN  the ClientHello is not complete yet;
 *   -ENOENT  a well-formed ClientHello without server_name;
 *   -EPROTO  anything else: not a handshake record, not a ClientHello,
 *            lengths that disagree, a duplicate server_name, a name type
 *            other than host_name, an invalid host name or an IP literal
 *            (RFC 6066 forbids them), more than 4 records or 16 KiB. */
int al_tls_parse_sni(const uint8_t *buf, size_t len, struct al_host *ret, struct al_error *err);
