/* A session's bounded logs (an audit stream, a background exec's events)
 * and the streamed answers following them (sess.h); the query flags of
 * its routes. */
#include "serve/sess.h"

#include <stdlib.h>
#include <string.h>

#include "core/util.h"

void sess_log_add(struct sess_log *l, const char *line, size_t len)
{
	if (len > l->max)
		return;
	while (l->len + len > l->max) { /* the oldest whole lines go */
		char *nl = memchr(l->buf, '\n', l->len);
		size_t cut = nl ? (size_t)(nl - l->buf) + 1 : l->len;
		memmove(l->buf, l->buf + cut, l->len - cut);
		l->len -= cut;
		l->dropped++;
	}
	l->buf = xrealloc(l->buf, l->len + len);
	memcpy(l->buf + l->len, line, len);
	l->len += len;
}

void sess_subs_add(struct sess_subs *u, uint64_t req)
{
	u->v = xrealloc(u->v, (u->n + 1) * sizeof(*u->v));
	u->v[u->n++] = req;
}

bool sess_subs_del(struct sess_subs *u, uint64_t req)
{
	for (size_t i = 0; i < u->n; i++)
		if (u->v[i] == req) {
			u->v[i] = u->v[--u->n];
			return true;
		}
	return false;
}

void sess_publish(struct sess *s, struct sess_log *l, struct sess_subs *u, json_t *o)
{
	char *t = json_dumps(o, JSON_COMPACT);
	size_t n = strlen(t);

	t = xrealloc(t, n + 2);
	t[n++] = '\n';
	t[n] = '\0';
	if (l)
		sess_log_add(l, t, n);
	for (size_t i = 0; i < u->n; i++)
		sess_chunk(s, u->v[i], t, n, false);
	free(t);
	json_decref(o);
}

bool sess_query_flag(const char *query, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = query; p && *p;) {
		size_t len = strcspn(p, "&");
		if (strncmp(p, name, n) == 0 && (len == n || p[n] == '=')) {
			const char *v = len == n ? "" : p + n + 1;
			size_t vl = len == n ? 0 : len - n - 1;
			return !((vl == 1 && v[0] == '0') || (vl == 5 && !strncmp(v, "false", 5)));
		}
		p += len;
		if (*p)
			p++;
	}
	return false;
}
