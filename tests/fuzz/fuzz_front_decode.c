/* libFuzzer target: the front's request decoder (serve/api/decode.c),
 * which turns what a client sent into the typed message for the monitor.
 * An input is lines: the method, the raw path, then "?key=value" query
 * lines and "Name: value" header lines up to an empty line, then the
 * body. Checked: a refusal is a 4xx with a reason; an accepted request has
 * a known operation, a sandbox id of id characters, a path with no NUL,
 * no escaped '/', and encodes to a frame that decodes with the same
 * fields. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "serve/api/decode.h"
#include "serve/msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *line(char **p, char *end)
{
	char *s = *p, *nl = memchr(s, '\n', (size_t)(end - s));

	if (!nl)
		nl = end;
	*nl = '\0';
	*p = nl < end ? nl + 1 : end;
	return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct al_front_kv q[AL_FRONT_QUERY_MAX + 2], h[AL_FRONT_HEADERS_MAX + 2];
	size_t nq = 0, nh = 0;
	char *buf = malloc(size + 1), *p = buf, *end = buf + size;

	memcpy(buf, data, size);
	buf[size] = '\0';
	const char *method = line(&p, end), *path = line(&p, end);
	while (p < end) {
		char *l = line(&p, end);
		if (!*l)
			break;
		char *sep = strchr(l + 1, l[0] == '?' ? '=' : ':');
		if (sep)
			*sep++ = '\0';
		if (l[0] == '?' && nq < AL_FRONT_QUERY_MAX + 2)
			q[nq++] = (struct al_front_kv){l + 1, sep};
		else if (l[0] != '?' && nh < AL_FRONT_HEADERS_MAX + 2)
			h[nh++] = (struct al_front_kv){l, sep ? sep + strspn(sep, " ") : ""};
	}
	struct al_front_head head = {method, path, q, nq, h, nh};
	struct al_front_req rq;
	unsigned st = al_front_decode_head(&head, &rq);
	if (!st)
		st = al_front_decode_body(&rq, p, (size_t)(end - p));
	if (st) {
		if (st < 400 || st > 499 || !rq.err[0])
			__builtin_trap();
		al_front_req_free(&rq);
		free(buf);
		return 0;
	}
	if (rq.op < AL_OP_HEALTH || rq.op >= AL_OP_N)
		__builtin_trap();
	for (const char *c = rq.sandbox; *c; c++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_", *c))
			__builtin_trap();
	if ((rq.op == AL_OP_SANDBOX_OTHER) != (rq.path[0] != '\0'))
		__builtin_trap();
	/* "METHOD rest?flags": one space, and at most one '?' (the flags'). */
	const char *sp = strchr(rq.path, ' ');
	if (rq.path[0] &&
	    (!sp || strchr(sp + 1, ' ') || (strchr(sp, '?') && strchr(strchr(sp, '?') + 1, '?'))))
		__builtin_trap();
	struct al_msg_out o;
	if (al_front_encode(&rq, 7, 9, p, (size_t)(end - p), &o) == 0) {
		struct al_msg m;
		if (al_msg_decode(o.buf, o.len, &m, NULL) < 0 || m.type != AL_MSG_REQUEST ||
		    m.id != 7 || al_msg_u64(&m, AL_TAG_CONN, 0) != 9 ||
		    al_msg_u32(&m, AL_TAG_OP, 0) != rq.op)
			__builtin_trap();
		free(o.buf);
	}
	al_front_req_free(&rq);
	free(buf);
	return 0;
}
