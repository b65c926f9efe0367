/* The typed messages between the daemon's processes (serve-design: the
 * front, the monitor, each session). One frame is a header {u32 type,
 * u32 length of the payload, u64 id} and a payload of fields, each
 * {u16 tag, u16 kind, u32 length, bytes}. Every length is checked against
 * the frame, every field against the type's schema (its kind, its bound,
 * whether it must be there), and a tag at most once: what decodes is what
 * the schema says, or nothing. Host byte order (both ends are this
 * machine). The same codec for front <-> monitor and monitor <-> session. */
#pragma once

#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#define AL_MSG_HDR 16u
/* The largest payload: a one-shot run's answer carries its output (each
 * stream capped at AL_SERVE_OUTPUT_MAX, JSON-escaped). */
#define AL_MSG_MAX    (48u << 20)
#define AL_MSG_FIELDS 16

enum al_msg_type {
	AL_MSG_CONN = 1,	/* monitor -> front: a client's connection (its fd rides along) */
	AL_MSG_CLOSED,		/* front -> monitor: that connection is gone */
	AL_MSG_REQUEST,		/* front -> monitor: an API request (id: the front's request id) */
	AL_MSG_RESPONSE,	/* monitor -> front: its answer (id: the same) */
	AL_MSG_STATUS,		/* front -> monitor: a response went out with this status */
	AL_MSG_SESSION_RUN,	/* monitor -> session: a one-shot run's request */
	AL_MSG_SESSION_DONE,	/* session -> monitor: its answer (id: the request's) */
	AL_MSG_SESSION_REQ,	/* monitor -> session: an API request for its sandbox */
	AL_MSG_CHUNK,		/* session -> monitor -> front: more of a streamed answer */
	AL_MSG_CANCEL,		/* front -> monitor -> session: a streamed answer's client left */
	AL_MSG_SESSION_STARTED, /* session -> monitor: its plan is final and its run started */
	AL_MSG_SESSION_EVENT, /* session -> monitor: something the metrics count (EVENT says what) */
	AL_MSG_POOL_READY,    /* session -> monitor: a pool's sandbox is held, ready for a claim */
	AL_MSG_POOL_COLD,     /* session -> monitor: the create (id) does not fit: make it cold */
	AL_MSG_N_TYPES
};

enum al_msg_kind {
	AL_MSG_U32 = 1,
	AL_MSG_U64,
	AL_MSG_STR,
	AL_MSG_BYTES
};

enum al_msg_tag {
	AL_TAG_CONN = 1,   /* u64: the monitor's connection id */
	AL_TAG_TCP,	   /* u32: 1 on the TCP listener (bearer tokens) */
	AL_TAG_OP,	   /* u32: enum al_serve_op */
	AL_TAG_TOKEN,	   /* str: the bearer token the client sent (TCP) */
	AL_TAG_SANDBOX,	   /* str: a sandbox id from the URL */
	AL_TAG_PATH,	   /* str: the rest of the URL (files, exec ids) */
	AL_TAG_BODY,	   /* bytes: a request's or response's body */
	AL_TAG_STATUS,	   /* u32: an HTTP status */
	AL_TAG_CTYPE,	   /* str: the response's content type */
	AL_TAG_IDENTITY,   /* str: who asked ("uid:N", "token:NAME") */
	AL_TAG_OPERATOR,   /* str: the operator policy's path */
	AL_TAG_REASON,	   /* str: how a run ended (result.h's names) */
	AL_TAG_DENIALS,	   /* u64: how many things the run was refused */
	AL_TAG_MS,	   /* u64: milliseconds */
	AL_TAG_SESSION_ID, /* str: the sandbox id the monitor gave the session */
	AL_TAG_STREAM,	   /* u32: 1: the answer streams (AL_MSG_CHUNK frames follow) */
	AL_TAG_END,	   /* u32: 1: the last chunk of a streamed answer */
	AL_TAG_META,	   /* bytes: a created sandbox's metadata (JSON object) */
	AL_TAG_GIDS,	   /* bytes: a Unix peer's gid and supplementary gids (u32 each) */
	AL_TAG_NEVER,	   /* bytes: paths no run may show, each ended by a NUL */
	AL_TAG_EVENT,	   /* u32: enum al_sess_event */
	AL_TAG_US,	   /* u64: microseconds */
	AL_TAG_N
};

/* The API's operations, as the front names them to the monitor. */
enum al_serve_op {
	AL_OP_HEALTH = 1,
	AL_OP_METRICS,
	AL_OP_RUN,
	AL_OP_SANDBOX_CREATE,
	AL_OP_SANDBOX_LIST,
	AL_OP_SANDBOX_GET,
	AL_OP_SANDBOX_DELETE,
	AL_OP_SANDBOX_OTHER, /* exec, files, pause, resume, timeout, audit: PATH says which */
	AL_OP_POOL,	     /* monitor -> session only: make a warm pool's sandbox */
	AL_OP_N
};

/* What a session tells the monitor for the metrics (AL_MSG_SESSION_EVENT;
 * the id is 0). */
enum al_sess_event {
	AL_SEV_EXEC = 1, /* an exec ended: REASON its reason, US request to end */
	AL_SEV_DENIAL,	 /* DENIALS things refused, of kind REASON (metrics.c's names) */
	AL_SEV_PAUSED,	 /* the sandbox was paused (by a request or idleness) */
	AL_SEV_RESUMED,	 /* ... and resumed */
	AL_SEV_LIMIT,	 /* a live sandbox's run ended by the limit REASON */
	AL_SEV_N
};

/* A decoded frame: fields point into the buffer decoded (which must
 * outlive it). */
struct al_msg_field {
	const uint8_t *data;
	uint32_t len;
	uint16_t kind;
	bool present;
};
struct al_msg {
	uint32_t type;
	uint64_t id;
	struct al_msg_field f[AL_TAG_N];
};

/* The whole frame's length from its first AL_MSG_HDR bytes, or 0 when
 * the header is bad (a type not known, a payload over AL_MSG_MAX). */
size_t al_msg_frame_len(const uint8_t *hdr);

/* Decode the frame buf[0..len) into *m. 0, or -EBADMSG with err saying
 * what was wrong and where (offset in the frame). */
int al_msg_decode(const uint8_t *buf, size_t len, struct al_msg *m, struct al_error *err);

/* The fields of a decoded message (the schema checked kind and presence
 * where it requires them; an optional field absent gives def / NULL). */
uint32_t al_msg_u32(const struct al_msg *m, enum al_msg_tag t, uint32_t def);
uint64_t al_msg_u64(const struct al_msg *m, enum al_msg_tag t, uint64_t def);
/* A string field as a new NUL-terminated copy (no NUL inside: the decoder
 * refused it), or NULL when absent. */
char *al_msg_strdup(const struct al_msg *m, enum al_msg_tag t);
/* Bytes (or a string) in place: *len set, NULL when absent. */
const uint8_t *al_msg_bytes(const struct al_msg *m, enum al_msg_tag t, size_t *len);

/* A frame being built, grown as fields are added. */
struct al_msg_out {
	uint8_t *buf;
	size_t len, cap;
	bool too_big; /* past AL_MSG_MAX: al_msg_end() fails */
};
void al_msg_begin(struct al_msg_out *o, enum al_msg_type type, uint64_t id);
void al_msg_put_u32(struct al_msg_out *o, enum al_msg_tag t, uint32_t v);
void al_msg_put_u64(struct al_msg_out *o, enum al_msg_tag t, uint64_t v);
void al_msg_put_str(struct al_msg_out *o, enum al_msg_tag t, const char *s);
void al_msg_put_bytes(struct al_msg_out *o, enum al_msg_tag t, const void *p, size_t len);
/* Seal the frame: its length goes in the header. 0, or -E2BIG. The
 * buffer is o->buf (o->len bytes), the caller's to free. */
int al_msg_end(struct al_msg_out *o);

/* An API error's body, {"error": MESSAGE}, from a format whose arguments
 * may be client text (ids, paths, URLs) in any bytes: what is not UTF-8 is
 * written \xNN (al_utf8_escape), so that JSON can carry it. NULL only if
 * jansson cannot make the object. Used alike by the front, the monitor and
 * the session process. */
json_t *al_serve_error_json(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));
