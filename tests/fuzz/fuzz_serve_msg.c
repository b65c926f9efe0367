/* libFuzzer target: the decoder of the daemon's messages (serve/msg.c).
 * The monitor reads what the front sends, and the front parses what
 * clients send, so every frame is hostile. A frame that decodes has every
 * field inside it, of the schema's kind, and re-encodes (fields in tag
 * order) to a frame that decodes to the same fields. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "serve/msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct al_msg m, again;
	struct al_msg_out o;

	if (size >= AL_MSG_HDR && al_msg_frame_len(data) != 0 &&
	    al_msg_frame_len(data) < AL_MSG_HDR)
		__builtin_trap();
	if (al_msg_decode(data, size, &m, NULL) < 0)
		return 0;
	al_msg_begin(&o, (enum al_msg_type)m.type, m.id);
	for (unsigned t = 1; t < AL_TAG_N; t++) {
		const struct al_msg_field *f = &m.f[t];
		if (!f->present)
			continue;
		if (f->data < data || f->data + f->len > data + size)
			__builtin_trap(); /* a field outside the frame */
		if ((f->kind == AL_MSG_U32 && f->len != 4) ||
		    (f->kind == AL_MSG_U64 && f->len != 8))
			__builtin_trap();
		if (f->kind == AL_MSG_STR && memchr(f->data, 0, f->len))
			__builtin_trap();
		uint16_t tk[2] = {(uint16_t)t, f->kind};
		(void)tk;
		switch (f->kind) {
		case AL_MSG_U32:
			al_msg_put_u32(&o, t, al_msg_u32(&m, t, 0));
			break;
		case AL_MSG_U64:
			al_msg_put_u64(&o, t, al_msg_u64(&m, t, 0));
			break;
		case AL_MSG_STR: {
			char *s = al_msg_strdup(&m, t);
			al_msg_put_str(&o, t, s);
			free(s);
			break;
		}
		default:
			al_msg_put_bytes(&o, t, f->data, f->len);
			break;
		}
	}
	if (al_msg_end(&o) < 0 || o.len != size || al_msg_decode(o.buf, o.len, &again, NULL) < 0 ||
	    again.type != m.type || again.id != m.id)
		__builtin_trap();
	for (unsigned t = 1; t < AL_TAG_N; t++)
		if (again.f[t].present != m.f[t].present || again.f[t].len != m.f[t].len ||
		    (m.f[t].len && memcmp(again.f[t].data, m.f[t].data, m.f[t].len) != 0))
			__builtin_trap();
	free(o.buf);
	return 0;
}
