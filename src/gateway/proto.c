#include "gateway/proto.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

static const char *const audit_events[] = {"net.connect", "net.dns",	"net.request",
					   "limit.hit",	  "secret.use", "secret.misuse",
					   "token.minted"};

static int encode(enum al_gwp_type type, const void *a, size_t alen, const void *b, size_t blen,
		  uint8_t *out, size_t size)
{
	struct al_gwp_hdr h = {.type = type, .len = (uint32_t)(alen + blen)};
	size_t total = sizeof(h) + alen + blen;

	if (total > size || total > AL_GWP_MAX)
		return -ENOSPC;
	memcpy(out, &h, sizeof(h));
	if (alen)
		memcpy(out + sizeof(h), a, alen);
	if (blen)
		memcpy(out + sizeof(h) + alen, b, blen);
	return (int)total;
}

int al_gwp_encode_listener(enum al_gateway_listener kind, uint8_t *out, size_t size)
{
	uint32_t k = (uint32_t)kind;
	return encode(AL_GWP_LISTENER, &k, sizeof(k), NULL, 0, out, size);
}

int al_gwp_encode_peers(uint32_t uid, uint8_t *out, size_t size)
{
	return encode(AL_GWP_PEERS, &uid, sizeof(uid), NULL, 0, out, size);
}

int al_gwp_encode_end(uint8_t *out, size_t size)
{
	return encode(AL_GWP_END, NULL, 0, NULL, 0, out, size);
}

int al_gwp_encode_started(int error, int landlock_abi, int file_errno, const char *text,
			  uint8_t *out, size_t size)
{
	int32_t v[3] = {error, landlock_abi, file_errno};
	size_t tl = text ? strnlen(text, 255) : 0;
	return encode(AL_GWP_STARTED, v, sizeof(v), text, tl, out, size);
}

int al_gwp_encode_audit(const char *event, const json_t *fields, uint8_t *out, size_t size)
{
	size_t el = strlen(event) + 1;
	char *json = json_dumps(fields, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
	int r;

	if (!json)
		return -ENOMEM;
	r = encode(AL_GWP_AUDIT, event, el, json, strlen(json), out, size);
	free(json);
	return r == -ENOSPC ? -E2BIG : r;
}

int al_gwp_encode_stats(const struct al_gateway_stats *st, uint8_t *out, size_t size)
{
	uint64_t v[9] = {st->allowed,	  st->denied,	  st->failed,
			 st->bytes_up,	  st->bytes_down, st->dns_answered,
			 st->dns_refused, st->misuse,	  st->cut};
	return encode(AL_GWP_STATS, v, sizeof(v), NULL, 0, out, size);
}

int al_gwp_encode_usage(const struct al_gateway_usage *use, uint8_t *out, size_t size)
{
	uint64_t v[3] = {use->requests, use->bytes_up, use->bytes_down};
	return encode(AL_GWP_USAGE, v, sizeof(v), use->host, strnlen(use->host, AL_HOST_MAX), out,
		      size);
}

int al_gwp_encode_charge(const struct al_gwp_charge *ch, uint8_t *out, size_t size)
{
	uint8_t v[20];
	memcpy(v, &ch->requests, 8);
	memcpy(v + 8, &ch->bytes_up, 8);
	memcpy(v + 16, &ch->flags, 4);
	return encode(AL_GWP_CHARGE, v, sizeof(v), ch->host, strnlen(ch->host, AL_HOST_MAX), out,
		      size);
}

int al_gwp_encode_spent(uint64_t spent, uint8_t *out, size_t size)
{
	return encode(AL_GWP_SPENT, &spent, sizeof(spent), NULL, 0, out, size);
}

int al_gwp_encode_deadline(int64_t deadline, uint8_t *out, size_t size)
{
	return encode(AL_GWP_DEADLINE, &deadline, sizeof(deadline), NULL, 0, out, size);
}

int al_gwp_encode_refusal(const struct al_gateway_refusal *r, uint8_t *out, size_t size)
{
	uint8_t v[8 + sizeof(r->secret) + sizeof(r->why) + sizeof(r->host)];
	size_t n = 8;
	const char *parts[] = {r->secret, r->why, r->host};
	const size_t caps[] = {sizeof(r->secret), sizeof(r->why), sizeof(r->host)};

	memcpy(v, &r->kind, 4);
	memcpy(v + 4, &r->port, 4);
	for (size_t k = 0; k < 3; k++) {
		size_t l = strnlen(parts[k], caps[k] - 1);
		memcpy(v + n, parts[k], l);
		n += l;
		if (k < 2)
			v[n++] = '\0';
	}
	return encode(AL_GWP_REFUSAL, v, n, NULL, 0, out, size);
}

static int bad(struct al_error *err, const char *what)
{
	return al_error_set(err, EINVAL, "gateway message: %s", what);
}

/* One printable field of a refusal, up to a NUL or the end: its length,
 * or -1 when it is too long for cap (with its NUL) or not printable. */
static ssize_t refusal_text(const uint8_t *p, size_t len, char *out, size_t cap)
{
	size_t l = 0;

	while (l < len && p[l])
		l++;
	if (l >= cap)
		return -1;
	for (size_t i = 0; i < l; i++)
		if (p[i] < 0x20 || p[i] > 0x7e)
			return -1;
	memcpy(out, p, l);
	out[l] = '\0';
	return (ssize_t)l;
}

static int decode_refusal(const uint8_t *p, size_t len, struct al_gateway_refusal *r,
			  struct al_error *err)
{
	char *fields[] = {r->secret, r->why, r->host};
	const size_t caps[] = {sizeof(r->secret), sizeof(r->why), sizeof(r->host)};
	size_t off = 8;

	if (len < 8 + 2)
		return bad(err, "refusal of the wrong size");
	memcpy(&r->kind, p, 4);
	memcpy(&r->port, p + 4, 4);
	if ((r->kind != AL_GW_REFUSED_DNS && r->kind != AL_GW_REFUSED_MISUSE) || r->port > 65535 ||
	    (r->kind == AL_GW_REFUSED_DNS && r->port))
		return bad(err, "refusal with values out of range");
	for (size_t k = 0; k < 3; k++) {
		ssize_t l = refusal_text(p + off, len - off, fields[k], caps[k]);
		if (l < 0)
			return bad(err, "refusal with a field too long or not printable");
		off += (size_t)l;
		if (k < 2) {
			if (off >= len)
				return bad(err, "refusal with fields missing");
			off++; /* its NUL */
		}
	}
	if (off != len)
		return bad(err, "refusal with bytes after its fields");
	if (!r->why[0] || (r->kind == AL_GW_REFUSED_MISUSE && !r->host[0]))
		return bad(err, "refusal without what it needs");
	return 0;
}

static int decode_audit(const uint8_t *p, size_t len, struct al_gwp_msg *ret, struct al_error *err)
{
	const uint8_t *nul = memchr(p, '\0', len < sizeof(ret->event) ? len : sizeof(ret->event));
	json_error_t jerr;
	bool known = false;

	if (!nul)
		return bad(err, "audit event without a name");
	memcpy(ret->event, p, (size_t)(nul - p) + 1);
	for (size_t i = 0; i < sizeof(audit_events) / sizeof(audit_events[0]); i++)
		known |= strcmp(ret->event, audit_events[i]) == 0;
	if (!known)
		return bad(err, "audit event of an unknown kind");
	size_t off = (size_t)(nul - p) + 1;
	json_t *o = json_loadb((const char *)p + off, len - off, JSON_REJECT_DUPLICATES, &jerr);
	if (!o || !json_is_object(o) || json_object_get(o, "ts") || json_object_get(o, "run") ||
	    json_object_get(o, "event")) {
		json_decref(o);
		return bad(err, "audit fields are not a plain JSON object");
	}
	ret->fields = o;
	return 0;
}

int al_gwp_decode(const uint8_t *buf, size_t n, struct al_gwp_msg *ret, struct al_error *err)
{
	struct al_gwp_hdr h;
	const uint8_t *p = buf + sizeof(h);

	memset(ret, 0, sizeof(*ret));
	if (n < sizeof(h) || n > AL_GWP_MAX)
		return bad(err, "bad size");
	memcpy(&h, buf, sizeof(h));
	if (h.len != n - sizeof(h))
		return bad(err, "length does not match");
	ret->type = (enum al_gwp_type)h.type;
	switch (h.type) {
	case AL_GWP_LISTENER:
		if (h.len != sizeof(uint32_t))
			return bad(err, "listener of the wrong size");
		memcpy(&ret->kind, p, sizeof(ret->kind));
		if (ret->kind >= AL_GATEWAY_N_LISTENERS)
			return bad(err, "unknown listener kind");
		return 0;
	case AL_GWP_PEERS:
		if (h.len != sizeof(uint32_t))
			return bad(err, "peers of the wrong size");
		memcpy(&ret->uid, p, sizeof(ret->uid));
		return 0;
	case AL_GWP_END:
		return h.len == 0 ? 0 : bad(err, "end with a payload");
	case AL_GWP_STARTED: {
		int32_t v[3];
		if (h.len < sizeof(v) || h.len - sizeof(v) >= sizeof(ret->text))
			return bad(err, "started of the wrong size");
		memcpy(v, p, sizeof(v));
		ret->error = v[0];
		ret->landlock_abi = v[1];
		ret->file_errno = v[2];
		if (v[0] < 0 || v[0] > 4095 || v[1] < 0 || v[1] > 64 || v[2] < 0 || v[2] > 4095)
			return bad(err, "started with values out of range");
		size_t tl = h.len - sizeof(v);
		memcpy(ret->text, p + sizeof(v), tl);
		ret->text[tl] = '\0';
		for (size_t i = 0; i < tl; i++)
			if ((unsigned char)ret->text[i] < 0x20 ||
			    (unsigned char)ret->text[i] > 0x7e)
				ret->text[i] = '?';
		return 0;
	}
	case AL_GWP_AUDIT:
		return decode_audit(p, h.len, ret, err);
	case AL_GWP_STATS: {
		uint64_t v[9];
		if (h.len != sizeof(v))
			return bad(err, "stats of the wrong size");
		memcpy(v, p, sizeof(v));
		ret->stats =
		    (struct al_gateway_stats){v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8]};
		return 0;
	}
	case AL_GWP_REFUSAL:
		return decode_refusal(p, h.len, &ret->refusal, err);
	case AL_GWP_USAGE: {
		uint64_t v[3];
		if (h.len <= sizeof(v) || h.len - sizeof(v) > AL_HOST_MAX)
			return bad(err, "usage of the wrong size");
		memcpy(v, p, sizeof(v));
		size_t hl = h.len - sizeof(v);
		for (size_t i = 0; i < hl; i++)
			if (p[sizeof(v) + i] <= 0x20 || p[sizeof(v) + i] > 0x7e)
				return bad(err, "usage with a host that is not printable");
		if (v[0] == 0 || v[0] > AL_GWP_MAX_USE_REQUESTS)
			return bad(err, "usage of no connection or of too many");
		ret->usage.requests = v[0];
		ret->usage.bytes_up = v[1];
		ret->usage.bytes_down = v[2];
		memcpy(ret->usage.host, p + sizeof(v), hl);
		ret->usage.host[hl] = '\0';
		return 0;
	}
	case AL_GWP_SPENT:
		if (h.len != sizeof(uint64_t))
			return bad(err, "spent of the wrong size");
		memcpy(&ret->spent, p, sizeof(ret->spent));
		return 0;
	case AL_GWP_DEADLINE:
		if (h.len != sizeof(int64_t))
			return bad(err, "deadline of the wrong size");
		memcpy(&ret->deadline, p, sizeof(ret->deadline));
		if (ret->deadline <= 0 || ret->deadline > AL_GWP_DEADLINE_MAX)
			return bad(err, "deadline out of range");
		return 0;
	case AL_GWP_CHARGE: {
		const size_t fixed = 20;
		if (h.len <= fixed || h.len - fixed > AL_HOST_MAX)
			return bad(err, "charge of the wrong size");
		memcpy(&ret->charge.requests, p, 8);
		memcpy(&ret->charge.bytes_up, p + 8, 8);
		memcpy(&ret->charge.flags, p + 16, 4);
		size_t hl = h.len - fixed;
		for (size_t i = 0; i < hl; i++)
			if (p[fixed + i] <= 0x20 || p[fixed + i] > 0x7e)
				return bad(err, "charge with a host that is not printable");
		if (ret->charge.requests > AL_GWP_MAX_USE_REQUESTS ||
		    (ret->charge.flags & ~(uint32_t)AL_GWP_CHARGE_EXHAUSTED))
			return bad(err, "charge with values out of range");
		memcpy(ret->charge.host, p + fixed, hl);
		ret->charge.host[hl] = '\0';
		return 0;
	}
	case AL_GWP_CLAIM:
		return al_gwp_decode_claim(p, h.len, ret, err);
	case AL_GWP_CLAIMED:
		return al_gwp_decode_claimed(p, h.len, ret, err);
	default:
		return bad(err, "unknown type");
	}
}
