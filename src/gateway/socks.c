#include "gateway/socks.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

int al_socks_parse_greeting(const uint8_t *buf, size_t len, struct al_socks_greeting *ret,
			    struct al_error *err)
{
	struct al_socks_greeting g = {0};
	size_t need;

	if (!buf || len < 1)
		return al_error_set(err, EAGAIN, "SOCKS greeting incomplete");
	if (buf[0] != AL_SOCKS_VERSION)
		return al_error_set(err, EPROTO, "SOCKS version %u not supported", buf[0]);
	if (len < 2)
		return al_error_set(err, EAGAIN, "SOCKS greeting incomplete");
	if (buf[1] == 0)
		return al_error_set(err, EPROTO, "SOCKS greeting offers no methods");
	need = 2 + (size_t)buf[1];
	if (len < need)
		return al_error_set(err, EAGAIN, "SOCKS greeting incomplete");
	g.n_methods = buf[1];
	g.no_auth = memchr(buf + 2, AL_SOCKS_METHOD_NONE, buf[1]) != NULL;
	*ret = g;
	return (int)need;
}

int al_socks_format_method_reply(const struct al_socks_greeting *g, uint8_t *out, size_t size)
{
	if (size < 2)
		return -ENOSPC;
	out[0] = AL_SOCKS_VERSION;
	out[1] = g && g->no_auth ? AL_SOCKS_METHOD_NONE : AL_SOCKS_METHOD_NO_ACCEPTABLE;
	return 2;
}

/* Check the fixed header bytes that have arrived; 0 when all four are
 * there and good. */
static int check_header(const uint8_t *buf, size_t len, struct al_error *err)
{
	if (len >= 1 && buf[0] != AL_SOCKS_VERSION)
		return al_error_set(err, EPROTO, "SOCKS version %u not supported", buf[0]);
	if (len >= 2 && (buf[1] < AL_SOCKS_CMD_CONNECT || buf[1] > AL_SOCKS_CMD_UDP_ASSOCIATE))
		return al_error_set(err, EOPNOTSUPP, "SOCKS command %u not supported", buf[1]);
	if (len >= 3 && buf[2] != 0)
		return al_error_set(err, EPROTO, "SOCKS reserved byte not zero");
	if (len >= 4 && buf[3] != AL_SOCKS_ATYP_IPV4 && buf[3] != AL_SOCKS_ATYP_DOMAIN &&
	    buf[3] != AL_SOCKS_ATYP_IPV6)
		return al_error_set(err, EAFNOSUPPORT, "SOCKS address type %u not supported",
				    buf[3]);
	if (len < 4)
		return al_error_set(err, EAGAIN, "SOCKS request incomplete");
	return 0;
}

static int parse_address(const uint8_t *a, uint8_t atyp, size_t alen, struct al_host *h,
			 struct al_error *err)
{
	if (atyp == AL_SOCKS_ATYP_IPV4) {
		h->kind = AL_HOST_IPV4;
		al_addr_from_ipv4(a, &h->addr);
		inet_ntop(AF_INET, a, h->text, sizeof(h->text));
		return 0;
	}
	if (atyp == AL_SOCKS_ATYP_IPV6) {
		h->kind = AL_HOST_IPV6;
		memcpy(h->addr.s6_addr, a, 16);
		inet_ntop(AF_INET6, a, h->text, sizeof(h->text));
		return 0;
	}
	if (al_host_parse((const char *)a, alen, h, err) < 0) {
		al_error_wrap(err, "SOCKS destination");
		if (err)
			err->code = EPROTO;
		return -EPROTO;
	}
	return 0;
}

int al_socks_parse_request(const uint8_t *buf, size_t len, struct al_socks_request *ret,
			   struct al_error *err)
{
	struct al_socks_request req = {0};
	size_t alen, off = 4, need;
	int r;

	if (!buf)
		return al_error_set(err, EAGAIN, "SOCKS request incomplete");
	r = check_header(buf, len, err);
	if (r < 0)
		return r;
	req.cmd = buf[1];
	req.atyp = buf[3];
	if (req.atyp == AL_SOCKS_ATYP_DOMAIN) {
		if (len < 5)
			return al_error_set(err, EAGAIN, "SOCKS request incomplete");
		if (buf[4] == 0)
			return al_error_set(err, EPROTO, "SOCKS destination name is empty");
		alen = buf[4];
		off = 5;
	} else {
		alen = req.atyp == AL_SOCKS_ATYP_IPV4 ? 4 : 16;
	}
	need = off + alen + 2;
	if (len < need)
		return al_error_set(err, EAGAIN, "SOCKS request incomplete");
	r = parse_address(buf + off, req.atyp, alen, &req.host, err);
	if (r < 0)
		return r;
	req.port = (uint16_t)(buf[off + alen] << 8 | buf[off + alen + 1]);
	if (req.port == 0)
		return al_error_set(err, EPROTO, "SOCKS destination port 0");
	*ret = req;
	return (int)need;
}

int al_socks_reply_code_for_error(int r)
{
	switch (r) {
	case -EAGAIN:
		return -1;
	case -EOPNOTSUPP:
		return AL_SOCKS_REP_CMD_NOT_SUPPORTED;
	case -EAFNOSUPPORT:
		return AL_SOCKS_REP_ATYP_NOT_SUPPORTED;
	default:
		return AL_SOCKS_REP_GENERAL_FAILURE;
	}
}

int al_socks_format_reply(uint8_t code, const struct in6_addr *bound, uint16_t port, uint8_t *out,
			  size_t size)
{
	bool v4 = !bound || al_addr_is_ipv4(bound);
	size_t alen = v4 ? 4 : 16, n = 4 + alen + 2;

	if (code > AL_SOCKS_REP_ATYP_NOT_SUPPORTED)
		return -EINVAL;
	if (size < n)
		return -ENOSPC;
	out[0] = AL_SOCKS_VERSION;
	out[1] = code;
	out[2] = 0;
	out[3] = v4 ? AL_SOCKS_ATYP_IPV4 : AL_SOCKS_ATYP_IPV6;
	if (!bound)
		memset(out + 4, 0, 4);
	else
		memcpy(out + 4, bound->s6_addr + (v4 ? 12 : 0), alen);
	out[4 + alen] = (uint8_t)(port >> 8);
	out[5 + alen] = (uint8_t)port;
	return (int)n;
}
