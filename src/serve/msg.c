/* The daemon's message codec (msg.h): frames of typed fields, each length
 * checked against the frame and each field against its type's schema. */
#include "serve/msg.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "serve/serve.h"

#define MAX_STR 4096u /* identities, tokens, ids, paths, reasons */

/* A field of a type's schema: its kind, its bound, whether it must be
 * there. */
struct rule {
	uint16_t kind;
	bool required;
	uint32_t max;
};

#define REQ(k, m)                                                                                  \
	{                                                                                          \
		.kind = (k), .required = true, .max = (m)                                          \
	}
#define OPT(k, m)                                                                                  \
	{                                                                                          \
		.kind = (k), .required = false, .max = (m)                                         \
	}

static const struct rule schema[AL_MSG_N_TYPES][AL_TAG_N] = {
    [AL_MSG_CONN] = {[AL_TAG_TCP] = REQ(AL_MSG_U32, 4)},
    [AL_MSG_CLOSED] = {[0] = {0}},
    [AL_MSG_REQUEST] = {[AL_TAG_CONN] = REQ(AL_MSG_U64, 8),
			[AL_TAG_OP] = REQ(AL_MSG_U32, 4),
			[AL_TAG_TOKEN] = OPT(AL_MSG_STR, MAX_STR),
			[AL_TAG_SANDBOX] = OPT(AL_MSG_STR, MAX_STR),
			[AL_TAG_PATH] = OPT(AL_MSG_STR, MAX_STR),
			[AL_TAG_BODY] = OPT(AL_MSG_BYTES, AL_MSG_MAX)},
    [AL_MSG_RESPONSE] = {[AL_TAG_STATUS] = REQ(AL_MSG_U32, 4),
			 [AL_TAG_CTYPE] = REQ(AL_MSG_STR, MAX_STR),
			 [AL_TAG_BODY] = REQ(AL_MSG_BYTES, AL_MSG_MAX),
			 [AL_TAG_STREAM] = OPT(AL_MSG_U32, 4)},
    [AL_MSG_STATUS] = {[AL_TAG_STATUS] = REQ(AL_MSG_U32, 4)},
    [AL_MSG_SESSION_RUN] = {[AL_TAG_IDENTITY] = REQ(AL_MSG_STR, MAX_STR),
			    [AL_TAG_SESSION_ID] = REQ(AL_MSG_STR, MAX_STR),
			    [AL_TAG_OPERATOR] = OPT(AL_MSG_STR, MAX_STR),
			    [AL_TAG_OP] = OPT(AL_MSG_U32, 4),
			    [AL_TAG_BODY] = REQ(AL_MSG_BYTES, AL_MSG_MAX),
			    [AL_TAG_GIDS] = OPT(AL_MSG_BYTES, AL_SERVE_GIDS_MAX * 4),
			    [AL_TAG_NEVER] = OPT(AL_MSG_BYTES, 4 * 4096)},
    [AL_MSG_SESSION_DONE] = {[AL_TAG_STATUS] = REQ(AL_MSG_U32, 4),
			     [AL_TAG_BODY] = REQ(AL_MSG_BYTES, AL_MSG_MAX),
			     [AL_TAG_REASON] = OPT(AL_MSG_STR, MAX_STR),
			     [AL_TAG_DENIALS] = OPT(AL_MSG_U64, 8),
			     [AL_TAG_CTYPE] = OPT(AL_MSG_STR, MAX_STR),
			     [AL_TAG_STREAM] = OPT(AL_MSG_U32, 4),
			     [AL_TAG_META] = OPT(AL_MSG_BYTES, AL_SERVE_META_MAX)},
    [AL_MSG_SESSION_REQ] =
	{[AL_TAG_PATH] = REQ(AL_MSG_STR, MAX_STR), [AL_TAG_BODY] = OPT(AL_MSG_BYTES, AL_MSG_MAX)},
    [AL_MSG_CHUNK] =
	{[AL_TAG_BODY] = REQ(AL_MSG_BYTES, AL_MSG_MAX), [AL_TAG_END] = OPT(AL_MSG_U32, 4)},
    [AL_MSG_CANCEL] = {[0] = {0}},
    [AL_MSG_SESSION_STARTED] = {[0] = {0}},
    [AL_MSG_SESSION_EVENT] = {[AL_TAG_EVENT] = REQ(AL_MSG_U32, 4),
			      [AL_TAG_REASON] = OPT(AL_MSG_STR, 64),
			      [AL_TAG_US] = OPT(AL_MSG_U64, 8),
			      [AL_TAG_DENIALS] = OPT(AL_MSG_U64, 8)},
    [AL_MSG_POOL_READY] = {[0] = {0}},
    [AL_MSG_POOL_COLD] = {[AL_TAG_REASON] = REQ(AL_MSG_STR, MAX_STR)},
};

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

size_t al_msg_frame_len(const uint8_t *hdr)
{
	uint32_t type = get32(hdr), len = get32(hdr + 4);

	if (type == 0 || type >= AL_MSG_N_TYPES || len > AL_MSG_MAX)
		return 0;
	return AL_MSG_HDR + (size_t)len;
}

int al_msg_decode(const uint8_t *buf, size_t len, struct al_msg *m, struct al_error *err)
{
	size_t off = AL_MSG_HDR;

	memset(m, 0, sizeof(*m));
	if (len < AL_MSG_HDR)
		return al_error_set(err, EBADMSG, "message: %zu bytes, shorter than its header",
				    len);
	if (al_msg_frame_len(buf) == 0)
		return al_error_set(err, EBADMSG,
				    "message: type %u unknown or payload of %u bytes over %u",
				    get32(buf), get32(buf + 4), AL_MSG_MAX);
	if (al_msg_frame_len(buf) != len)
		return al_error_set(err, EBADMSG,
				    "message: header says %zu bytes, the frame has %zu",
				    al_msg_frame_len(buf), len);
	m->type = get32(buf);
	memcpy(&m->id, buf + 8, 8);
	const struct rule *rules = schema[m->type];
	while (off < len) {
		uint16_t tag, kind;
		uint32_t flen;

		if (len - off < 8)
			return al_error_set(err, EBADMSG,
					    "message: a field's header cut at offset %zu", off);
		memcpy(&tag, buf + off, 2);
		memcpy(&kind, buf + off + 2, 2);
		flen = get32(buf + off + 4);
		off += 8;
		if (flen > len - off)
			return al_error_set(
			    err, EBADMSG,
			    "message: field %u at offset %zu: %u bytes, past the frame", tag,
			    off - 8, flen);
		if (tag == 0 || tag >= AL_TAG_N || rules[tag].kind == 0)
			return al_error_set(
			    err, EBADMSG,
			    "message type %u: field %u at offset %zu not in its schema", m->type,
			    tag, off - 8);
		if (kind != rules[tag].kind)
			return al_error_set(err, EBADMSG,
					    "message type %u: field %u is of kind %u, not %u",
					    m->type, tag, kind, rules[tag].kind);
		if (m->f[tag].present)
			return al_error_set(err, EBADMSG, "message type %u: field %u twice",
					    m->type, tag);
		if ((kind == AL_MSG_U32 && flen != 4) || (kind == AL_MSG_U64 && flen != 8) ||
		    flen > rules[tag].max)
			return al_error_set(err, EBADMSG,
					    "message type %u: field %u has %u bytes (at most %u)",
					    m->type, tag, flen, rules[tag].max);
		if (kind == AL_MSG_STR && memchr(buf + off, 0, flen))
			return al_error_set(err, EBADMSG,
					    "message type %u: string field %u holds NUL", m->type,
					    tag);
		m->f[tag] = (struct al_msg_field){
		    .data = buf + off, .len = flen, .kind = kind, .present = true};
		off += flen;
	}
	for (unsigned t = 1; t < AL_TAG_N; t++)
		if (rules[t].required && !m->f[t].present) {
			uint32_t type = m->type;
			memset(m, 0, sizeof(*m));
			return al_error_set(err, EBADMSG, "message type %u: field %u missing", type,
					    t);
		}
	return 0;
}

uint32_t al_msg_u32(const struct al_msg *m, enum al_msg_tag t, uint32_t def)
{
	if (!m->f[t].present || m->f[t].kind != AL_MSG_U32)
		return def;
	return get32(m->f[t].data);
}

uint64_t al_msg_u64(const struct al_msg *m, enum al_msg_tag t, uint64_t def)
{
	uint64_t v;

	if (!m->f[t].present || m->f[t].kind != AL_MSG_U64)
		return def;
	memcpy(&v, m->f[t].data, 8);
	return v;
}

char *al_msg_strdup(const struct al_msg *m, enum al_msg_tag t)
{
	if (!m->f[t].present || m->f[t].kind != AL_MSG_STR)
		return NULL;
	char *s = xmalloc((size_t)m->f[t].len + 1);
	memcpy(s, m->f[t].data, m->f[t].len);
	s[m->f[t].len] = '\0';
	return s;
}

const uint8_t *al_msg_bytes(const struct al_msg *m, enum al_msg_tag t, size_t *len)
{
	*len = 0;
	if (!m->f[t].present)
		return NULL;
	*len = m->f[t].len;
	return m->f[t].data ? m->f[t].data : (const uint8_t *)"";
}

static void put(struct al_msg_out *o, const void *p, size_t n)
{
	if (o->too_big || n > AL_MSG_HDR + (size_t)AL_MSG_MAX - o->len) {
		o->too_big = true;
		return;
	}
	if (o->len + n > o->cap) {
		o->cap = (o->len + n) * 2;
		o->buf = xrealloc(o->buf, o->cap);
	}
	memcpy(o->buf + o->len, p, n);
	o->len += n;
}

void al_msg_begin(struct al_msg_out *o, enum al_msg_type type, uint64_t id)
{
	uint32_t hdr[2] = {type, 0};

	*o = (struct al_msg_out){0};
	put(o, hdr, 8);
	put(o, &id, 8);
}

static void field(struct al_msg_out *o, enum al_msg_tag t, enum al_msg_kind kind, const void *p,
		  size_t n)
{
	uint16_t tk[2] = {(uint16_t)t, (uint16_t)kind};
	uint32_t len = (uint32_t)n;

	if (n > AL_MSG_MAX) {
		o->too_big = true;
		return;
	}
	put(o, tk, 4);
	put(o, &len, 4);
	put(o, p, n);
}

void al_msg_put_u32(struct al_msg_out *o, enum al_msg_tag t, uint32_t v)
{
	field(o, t, AL_MSG_U32, &v, 4);
}

void al_msg_put_u64(struct al_msg_out *o, enum al_msg_tag t, uint64_t v)
{
	field(o, t, AL_MSG_U64, &v, 8);
}

void al_msg_put_str(struct al_msg_out *o, enum al_msg_tag t, const char *s)
{
	field(o, t, AL_MSG_STR, s, strlen(s));
}

void al_msg_put_bytes(struct al_msg_out *o, enum al_msg_tag t, const void *p, size_t len)
{
	field(o, t, AL_MSG_BYTES, p, len);
}

int al_msg_end(struct al_msg_out *o)
{
	uint32_t len;

	if (o->too_big || !o->buf)
		return -E2BIG;
	len = (uint32_t)(o->len - AL_MSG_HDR);
	memcpy(o->buf + 4, &len, 4);
	return 0;
}

json_t *al_serve_error_json(const char *fmt, va_list ap)
{
	char raw[768], msg[768];

	vsnprintf(raw, sizeof(raw), fmt, ap);
	al_utf8_escape(msg, sizeof(msg), raw);
	return json_pack("{s:s}", "error", msg);
}
