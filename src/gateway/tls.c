#include "gateway/tls.h"

#include <errno.h>
#include <string.h>

#define RECORD_HANDSHAKE       22
#define HANDSHAKE_CLIENT_HELLO 1
#define EXT_SERVER_NAME	       0
#define NAME_TYPE_HOST_NAME    0
#define RECORD_HEADER	       5
#define RECORD_MAX	       16384 /* plaintext fragment limit, 2^14 */

/* A bounded read cursor: every take checks the bytes are there. */
struct cursor {
	const uint8_t *p;
	size_t n;
};

static bool take(struct cursor *c, size_t k, const uint8_t **ret)
{
	if (c->n < k)
		return false;
	if (ret)
		*ret = c->p;
	c->p += k;
	c->n -= k;
	return true;
}

static bool take_int(struct cursor *c, size_t bytes, size_t *ret)
{
	const uint8_t *p;
	size_t v = 0;

	if (!take(c, bytes, &p))
		return false;
	for (size_t i = 0; i < bytes; i++)
		v = v << 8 | p[i];
	*ret = v;
	return true;
}

/* A vector with a 1- or 2-byte length prefix, as a sub-cursor. */
static bool take_vec(struct cursor *c, size_t len_bytes, struct cursor *ret)
{
	size_t n;

	if (!take_int(c, len_bytes, &n) || !take(c, n, &ret->p))
		return false;
	ret->n = n;
	return true;
}

/* Check the record header bytes that have arrived so far. */
static int check_record_header(const uint8_t *h, size_t avail, struct al_error *err)
{
	size_t rlen;

	if (avail >= 1 && h[0] != RECORD_HANDSHAKE)
		return al_error_set(err, EPROTO, "not a TLS handshake record");
	if (avail >= 2 && h[1] != 3)
		return al_error_set(err, EPROTO, "not a TLS record version");
	if (avail >= 3 && h[2] > 4)
		return al_error_set(err, EPROTO, "not a TLS record version");
	if (avail < RECORD_HEADER)
		return al_error_set(err, EAGAIN, "TLS record incomplete");
	rlen = (size_t)h[3] << 8 | h[4];
	if (rlen == 0 || rlen > RECORD_MAX)
		return al_error_set(err, EPROTO, "invalid TLS record length");
	return 0;
}

/* Gather the handshake message from up to AL_TLS_RECORDS_MAX records into
 * hs; *ret_len is its length, header included. */
static int reassemble(const uint8_t *buf, size_t len, uint8_t *hs, size_t *ret_len,
		      struct al_error *err)
{
	size_t pos = 0, have = 0, need = 0;

	for (int rec = 0;; rec++) {
		size_t rlen;
		int r;

		if (rec == AL_TLS_RECORDS_MAX)
			return al_error_set(err, EPROTO, "ClientHello spans more than %d records",
					    AL_TLS_RECORDS_MAX);
		r = check_record_header(buf + pos, len - pos, err);
		if (r < 0)
			return r;
		rlen = (size_t)buf[pos + 3] << 8 | buf[pos + 4];
		if (rlen > AL_TLS_HELLO_MAX - have)
			return al_error_set(err, EPROTO, "ClientHello larger than %d bytes",
					    AL_TLS_HELLO_MAX);
		if (len - pos - RECORD_HEADER < rlen) {
			if (have == 0 && len - pos > RECORD_HEADER &&
			    buf[pos + RECORD_HEADER] != HANDSHAKE_CLIENT_HELLO)
				return al_error_set(err, EPROTO, "not a ClientHello");
			return al_error_set(err, EAGAIN, "TLS record incomplete");
		}
		memcpy(hs + have, buf + pos + RECORD_HEADER, rlen);
		have += rlen;
		pos += RECORD_HEADER + rlen;
		if (have >= 1 && hs[0] != HANDSHAKE_CLIENT_HELLO)
			return al_error_set(err, EPROTO, "not a ClientHello");
		if (need == 0 && have >= 4) {
			need = 4 + ((size_t)hs[1] << 16 | (size_t)hs[2] << 8 | hs[3]);
			if (need > AL_TLS_HELLO_MAX)
				return al_error_set(err, EPROTO, "ClientHello larger than %d bytes",
						    AL_TLS_HELLO_MAX);
		}
		if (need > 0 && have > need)
			return al_error_set(err, EPROTO,
					    "data after the ClientHello in its record");
		if (need > 0 && have == need)
			break;
	}
	*ret_len = need;
	return 0;
}

static int parse_server_name(struct cursor ext, struct al_host *ret, struct al_error *err)
{
	struct cursor list, name;
	bool found = false;

	if (!take_vec(&ext, 2, &list) || ext.n != 0 || list.n == 0)
		return al_error_set(err, EPROTO, "malformed server_name extension");
	while (list.n > 0) {
		size_t type;

		if (!take_int(&list, 1, &type) || !take_vec(&list, 2, &name))
			return al_error_set(err, EPROTO, "malformed server_name extension");
		if (type != NAME_TYPE_HOST_NAME)
			return al_error_set(err, EPROTO, "server_name type %zu not supported",
					    type);
		if (found)
			return al_error_set(err, EPROTO, "more than one host_name in server_name");
		if (al_host_parse((const char *)name.p, name.n, ret, err) < 0) {
			al_error_wrap(err, "TLS server name");
			if (err)
				err->code = EPROTO;
			return -EPROTO;
		}
		if (ret->kind != AL_HOST_NAME)
			return al_error_set(err, EPROTO, "TLS server name is an IP address");
		found = true;
	}
	return 0;
}

static int parse_extensions(struct cursor c, struct al_host *ret, struct al_error *err)
{
	struct cursor exts, data;
	bool found = false;
	int r;

	if (!take_vec(&c, 2, &exts) || c.n != 0)
		return al_error_set(err, EPROTO, "malformed ClientHello extensions");
	while (exts.n > 0) {
		size_t type;

		if (!take_int(&exts, 2, &type) || !take_vec(&exts, 2, &data))
			return al_error_set(err, EPROTO, "malformed ClientHello extension");
		if (type != EXT_SERVER_NAME)
			continue;
		if (found)
			return al_error_set(err, EPROTO, "duplicate server_name extension");
		r = parse_server_name(data, ret, err);
		if (r < 0)
			return r;
		found = true;
	}
	if (!found)
		return al_error_set(err, ENOENT, "ClientHello without server_name");
	return 0;
}

static int parse_client_hello(const uint8_t *body, size_t len, struct al_host *ret,
			      struct al_error *err)
{
	struct cursor c = {body, len}, v;
	const uint8_t *version;

	if (!take(&c, 2, &version) || version[0] != 3 || version[1] < 1 || version[1] > 3)
		return al_error_set(err, EPROTO, "unsupported ClientHello version");
	if (!take(&c, 32, NULL))
		return al_error_set(err, EPROTO, "ClientHello truncated");
	if (!take_vec(&c, 1, &v) || v.n > 32)
		return al_error_set(err, EPROTO, "malformed ClientHello session id");
	if (!take_vec(&c, 2, &v) || v.n < 2 || v.n % 2 != 0)
		return al_error_set(err, EPROTO, "malformed ClientHello cipher suites");
	if (!take_vec(&c, 1, &v) || v.n < 1)
		return al_error_set(err, EPROTO, "malformed ClientHello compression methods");
	if (c.n == 0)
		return al_error_set(err, ENOENT, "ClientHello without extensions");
	return parse_extensions(c, ret, err);
}

int al_tls_parse_sni(const uint8_t *buf, size_t len, struct al_host *ret, struct al_error *err)
{
	uint8_t hs[AL_TLS_HELLO_MAX];
	struct al_host host;
	size_t hs_len = 0;
	int r;

	if (!buf)
		return al_error_set(err, EAGAIN, "TLS record incomplete");
	r = reassemble(buf, len, hs, &hs_len, err);
	if (r < 0)
		return r;
	r = parse_client_hello(hs + 4, hs_len - 4, &host, err);
	if (r < 0)
		return r;
	*ret = host;
	return 0;
}
