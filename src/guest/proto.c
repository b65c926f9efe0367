/* The channel's codec (src/guest/proto.h): header bounds, EXEC and EXIT
 * payloads, FILE_BEGIN paths. Pure: libc only, so that the static guest
 * agent and the host's library both build it. */
#include "guest/proto.h"

#include <errno.h>
#include <string.h>

/* The longest kernel release uname() gives (struct utsname's field is 65
 * bytes with its NUL). */
#define HELLO_RELEASE_MAX 64
/* EXEC_FAILED's and LOG's text. */
#define TEXT_MAX 1024
/* A FILE_BEGIN path (PATH_MAX with its NUL). */
#define PATH_BYTES 4096
#define DGRAM_MAX  4096

long al_guest_max_len(uint8_t type)
{
	switch ((enum al_guest_type)type) {
	case AL_G_HELLO:
		return 4 + HELLO_RELEASE_MAX;
	case AL_G_EXEC:
	case AL_G_STDIN:
	case AL_G_STDOUT:
	case AL_G_STDERR:
	case AL_G_DATA:
	case AL_G_FILE_DATA:
		return AL_GUEST_MAX_PAYLOAD;
	case AL_G_EXEC_STARTED:
	case AL_G_SIGNAL:
	case AL_G_OPEN_FAILED:
	case AL_G_WINDOW:
	case AL_G_FILES_DONE:
	case AL_G_WINSIZE:
		return 4;
	case AL_G_EXEC_FAILED:
		return 4 + TEXT_MAX;
	case AL_G_EXIT:
		return AL_GUEST_EXIT_LEN;
	case AL_G_OPEN:
	case AL_G_PING:
	case AL_G_PONG:
		return 8;
	case AL_G_OPEN_OK:
	case AL_G_SHUT:
	case AL_G_CLOSE:
	case AL_G_FILE_END:
	case AL_G_POWEROFF:
		return 0;
	case AL_G_DGRAM:
		return DGRAM_MAX;
	case AL_G_FILE_BEGIN:
		return 5 + PATH_BYTES;
	case AL_G_FILES_GET:
		return 16;
	case AL_G_LOG:
		return TEXT_MAX;
	}
	return -1;
}

/* EXEC's flags: a file operation alone, or a program's trailers. */
static bool exec_flags_ok(uint8_t flags)
{
	return flags == AL_GUEST_EXEC_FILE_OP ||
	       (flags && !(flags & ~(AL_GUEST_EXEC_LIMITS | AL_GUEST_EXEC_TTY)));
}

void al_guest_hdr_put(uint8_t out[AL_GUEST_HEADER], uint8_t type, uint8_t flags, uint32_t id,
		      uint32_t len)
{
	out[0] = type;
	out[1] = flags;
	out[2] = out[3] = 0;
	al_guest_put32(out + 4, id);
	al_guest_put32(out + 8, len);
}

int al_guest_hdr_get(const uint8_t in[AL_GUEST_HEADER], struct al_guest_hdr *h)
{
	h->type = in[0];
	h->flags = in[1];
	h->reserved = (uint16_t)(in[2] | in[3] << 8);
	h->id = al_guest_get32(in + 4);
	h->len = al_guest_get32(in + 8);
	long max = al_guest_max_len(h->type);
	if (max < 0 || h->reserved != 0 || h->len > (uint32_t)max)
		return -EPROTO;
	/* Only WINDOW has flags, which stream of an exec (0..3), and EXEC,
	 * a file operation or a program's trailers. */
	if (h->flags != 0 && !(h->type == AL_G_WINDOW && h->flags <= 3) &&
	    !(h->type == AL_G_EXEC && exec_flags_ok(h->flags)))
		return -EPROTO;
	return 0;
}

static bool size_ok(uint16_t rows, uint16_t cols)
{
	return rows >= 1 && rows <= AL_GUEST_TTY_MAX && cols >= 1 && cols <= AL_GUEST_TTY_MAX;
}

int al_guest_exec_trailers(const uint8_t *p, uint32_t *len, uint8_t flags,
			   struct al_guest_exec_opts *o)
{
	memset(o, 0, sizeof(*o));
	if (flags != 0 && !exec_flags_ok(flags))
		return -EPROTO;
	/* From the end: TTY's trailer is the last one. */
	if (flags & AL_GUEST_EXEC_TTY) {
		if (*len < AL_GUEST_EXEC_TTY_LEN)
			return -EPROTO;
		*len -= AL_GUEST_EXEC_TTY_LEN;
		o->tty = true;
		o->rows = al_guest_get16(p + *len);
		o->cols = al_guest_get16(p + *len + 2);
		if (!size_ok(o->rows, o->cols) || al_guest_get32(p + *len + 4) != 0)
			return -EPROTO;
	}
	if (flags & AL_GUEST_EXEC_LIMITS) {
		if (*len < AL_GUEST_EXEC_LIMITS_LEN)
			return -EPROTO;
		*len -= AL_GUEST_EXEC_LIMITS_LEN;
		o->memory = al_guest_get64(p + *len);
		if (!o->memory)
			return -EPROTO;
	}
	return 0;
}

int al_guest_winsize_get(const uint8_t *p, uint32_t len, uint16_t *rows, uint16_t *cols)
{
	if (len != 4)
		return -EPROTO;
	*rows = al_guest_get16(p);
	*cols = al_guest_get16(p + 2);
	return size_ok(*rows, *cols) ? 0 : -EPROTO;
}

/* The NUL-terminated string at p[*off..len): its start, *off past it; NULL
 * when no NUL ends it inside the payload. */
static const char *take(const uint8_t *p, uint32_t len, uint32_t *off)
{
	if (*off >= len)
		return NULL;
	const uint8_t *nul = memchr(p + *off, 0, len - *off);
	if (!nul)
		return NULL;
	const char *s = (const char *)p + *off;
	*off = (uint32_t)(nul - p) + 1;
	return s;
}

int al_guest_exec_parse(const uint8_t *p, uint32_t len, const char **cwd, const char **argv,
			uint32_t *argc, const char **env, uint32_t *envc)
{
	if (len < 8)
		return -EPROTO;
	uint32_t na = al_guest_get32(p), ne = al_guest_get32(p + 4);
	/* At least a program name; argv and env together within the bound. */
	if (na == 0 || na > AL_GUEST_MAX_ARGS || ne > AL_GUEST_MAX_ARGS ||
	    na + ne > AL_GUEST_MAX_ARGS)
		return -EPROTO;
	uint32_t off = 8;
	if (!(*cwd = take(p, len, &off)))
		return -EPROTO;
	for (uint32_t i = 0; i < na; i++)
		if (!(argv[i] = take(p, len, &off)))
			return -EPROTO;
	for (uint32_t i = 0; i < ne; i++)
		if (!(env[i] = take(p, len, &off)))
			return -EPROTO;
	if (off != len)
		return -EPROTO;
	argv[na] = NULL;
	env[ne] = NULL;
	*argc = na;
	*envc = ne;
	return 0;
}

void al_guest_exit_put(uint8_t out[AL_GUEST_EXIT_LEN], const struct al_guest_exit *e)
{
	al_guest_put32(out, (uint32_t)e->status);
	out[4] = e->oom;
	out[5] = e->pids;
	out[6] = out[7] = 0;
	al_guest_put64(out + 8, e->user_us);
	al_guest_put64(out + 16, e->system_us);
	al_guest_put64(out + 24, e->memory_peak);
}

int al_guest_exit_get(const uint8_t *p, uint32_t len, struct al_guest_exit *e)
{
	if (len != AL_GUEST_EXIT_LEN || p[4] > 1 || p[5] > 1 || p[6] || p[7])
		return -EPROTO;
	memset(e, 0, sizeof(*e));
	e->status = (int32_t)al_guest_get32(p);
	e->oom = p[4];
	e->pids = p[5];
	e->user_us = al_guest_get64(p + 8);
	e->system_us = al_guest_get64(p + 16);
	e->memory_peak = al_guest_get64(p + 24);
	return 0;
}

int al_guest_path_ok(const char *path, size_t len)
{
	if (len == 0 || len >= PATH_BYTES || path[0] == '/' || memchr(path, 0, len))
		return -EPROTO;
	size_t start = 0;
	for (size_t i = 0; i <= len; i++) {
		if (i < len && path[i] != '/')
			continue;
		size_t n = i - start;
		/* An empty component (a "//" or a trailing '/'), "." or "..". */
		if (n == 0 || (n == 1 && path[start] == '.') ||
		    (n == 2 && path[start] == '.' && path[start + 1] == '.'))
			return -EPROTO;
		start = i + 1;
	}
	return 0;
}
