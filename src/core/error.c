#include "core/error.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

static int ret_code(const struct al_error *err)
{
	return err && err->code ? -err->code : -EINVAL;
}

int al_error_set(struct al_error *err, int code, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return code ? -code : -EINVAL;
	err->code = code;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return ret_code(err);
}

int al_error_setsys(struct al_error *err, int code, const char *fmt, ...)
{
	va_list ap;
	size_t n;

	if (!err)
		return code ? -code : -EINVAL;
	err->code = code;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	n = strlen(err->msg);
	if (n < sizeof(err->msg))
		snprintf(err->msg + n, sizeof(err->msg) - n, ": %s", strerror(code));
	return ret_code(err);
}

int al_error_wrap(struct al_error *err, const char *fmt, ...)
{
	char prefix[AL_ERROR_MAX];
	char old[AL_ERROR_MAX];
	va_list ap;

	if (!err)
		return -EINVAL;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	memcpy(old, err->msg, sizeof(old));
	snprintf(err->msg, sizeof(err->msg), "%s: %s", prefix, old);
	return ret_code(err);
}

void al_error_clear(struct al_error *err)
{
	if (!err)
		return;
	err->code = 0;
	err->msg[0] = '\0';
}

/* One line of text: control characters (a newline in a policy string, an
 * escape in a flag) become '?'. */
static char *one_line(char *s)
{
	for (char *c = s; c && *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
	return s;
}

static struct al_error_entry *new_entry(struct al_errors *l, int code)
{
	if (al_errors_full(l)) {
		l->omitted++;
		return NULL;
	}
	l->v = xrealloc(l->v, (l->n + 1) * sizeof(*l->v));
	struct al_error_entry *e = &l->v[l->n++];
	*e = (struct al_error_entry){.code = code ? code : EINVAL};
	return e;
}

int al_errors_add(struct al_errors *l, int code, const char *where, const char *path,
		  const char *fmt, ...)
{
	struct al_error_entry *e = new_entry(l, code);
	va_list ap;

	if (!e)
		return code ? -code : -EINVAL;
	va_start(ap, fmt);
	if (vasprintf(&e->message, fmt, ap) < 0)
		abort();
	va_end(ap);
	one_line(e->message);
	e->where = where ? one_line(xstrdup(where)) : NULL;
	e->path = path ? one_line(xstrdup(path)) : NULL;
	e->text = xasprintf("%s%s%s%s%s", e->where ? e->where : "", e->where ? ": " : "",
			    e->path ? e->path : "", e->path ? ": " : "", e->message);
	return -e->code;
}

int al_errors_add_syntax(struct al_errors *l, const char *where, int line, int column,
			 const char *message)
{
	struct al_error_entry *e = new_entry(l, EINVAL);

	if (!e)
		return -EINVAL;
	e->where = one_line(xstrdup(where));
	e->line = line;
	e->column = column;
	e->message = one_line(xstrdup(message));
	e->text = xasprintf("%s:%d:%d: %s", e->where, line, column, e->message);
	return -EINVAL;
}

int al_errors_add_error(struct al_errors *l, const struct al_error *err)
{
	return al_errors_add(l, err->code, NULL, NULL, "%s", err->msg);
}

size_t al_errors_count(const struct al_errors *l)
{
	return l->n + l->omitted;
}

bool al_errors_full(const struct al_errors *l)
{
	return l->n >= AL_ERRORS_MAX;
}

int al_errors_first(const struct al_errors *l, size_t start, struct al_error *err)
{
	if (start >= l->n) {
		/* Past the cap, or nothing found: say how many without a text. */
		size_t more = al_errors_count(l) > start ? al_errors_count(l) - start : 0;
		return more ? al_error_set(err, EINVAL, "%zu more errors (past the first %d)", more,
					   AL_ERRORS_MAX)
			    : al_error_set(err, EINVAL, "no error recorded");
	}
	return al_error_set(err, l->v[start].code, "%s", l->v[start].text);
}

void al_errors_clear(struct al_errors *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].text);
		free(l->v[i].where);
		free(l->v[i].path);
		free(l->v[i].message);
	}
	free(l->v);
	*l = (struct al_errors){0};
}
