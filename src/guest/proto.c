/* The channel's codec (proto.h): headers checked against each type's
 * bound, EXEC and EXIT payloads, FILE_BEGIN paths. Pure: no syscalls, so
 * the guest agent (static, in the initramfs) and the host share it. */
#include "guest/proto.h"

#include <errno.h>
#include <string.h>

/* A FILE_BEGIN path's longest (the guest's and the host's PATH_MAX less
 * "/work/" and the NUL). */
#define PATH_BOUND 4000u

long al_guest_max_len(uint8_t type)
{
	switch (type) {
	case AL_G_HELLO:
		return 4 + 256; /* version, the kernel's release */
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
		return 4;
	case AL_G_EXEC_FAILED:
		return 4 + 1024; /* errno, then text */
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
		return 4096;
	case AL_G_FILE_BEGIN:
		return 4 + 1 + PATH_BOUND + 1; /* mode, kind, path and its NUL */
	case AL_G_FILES_GET:
		return 16;
	case AL_G_LOG:
		return 1024;
	default:
		return -1;
	}
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
	/* Only WINDOW has flags: which byte stream the credit is for. */
	if (h->type == AL_G_WINDOW ? h->flags > 3 : h->flags != 0)
		return -EPROTO;
	return 0;
}

/* The NUL-terminated string at *off in p[0..len): its start, *off moved
 * past its NUL; NULL when it is not terminated inside. */
static const char *take_string(const uint8_t *p, uint32_t len, uint32_t *off)
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
	/* Each count alone first: their sum must not wrap. */
	if (na == 0 || na > AL_GUEST_MAX_ARGS || ne > AL_GUEST_MAX_ARGS ||
	    na + ne > AL_GUEST_MAX_ARGS)
		return -EPROTO;
	uint32_t off = 8;
	if (!(*cwd = take_string(p, len, &off)))
		return -EPROTO;
	for (uint32_t i = 0; i < na; i++)
		if (!(argv[i] = take_string(p, len, &off)))
			return -EPROTO;
	for (uint32_t i = 0; i < ne; i++)
		if (!(env[i] = take_string(p, len, &off)))
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
	out[5] = out[6] = out[7] = 0;
	al_guest_put64(out + 8, e->user_us);
	al_guest_put64(out + 16, e->system_us);
	al_guest_put64(out + 24, e->memory_peak);
}

int al_guest_exit_get(const uint8_t *p, uint32_t len, struct al_guest_exit *e)
{
	if (len != AL_GUEST_EXIT_LEN || p[4] > 1 || p[5] || p[6] || p[7])
		return -EPROTO;
	memset(e, 0, sizeof(*e));
	e->status = (int32_t)al_guest_get32(p);
	e->oom = p[4];
	e->user_us = al_guest_get64(p + 8);
	e->system_us = al_guest_get64(p + 16);
	e->memory_peak = al_guest_get64(p + 24);
	return 0;
}

int al_guest_path_ok(const char *path, size_t len)
{
	if (len == 0 || len > PATH_BOUND || memchr(path, 0, len) || path[0] == '/')
		return -EPROTO;
	size_t start = 0;
	for (size_t i = 0; i <= len; i++) {
		if (i < len && path[i] != '/')
			continue;
		size_t n = i - start;
		if (n == 0 || (n == 1 && path[start] == '.') ||
		    (n == 2 && path[start] == '.' && path[start + 1] == '.'))
			return -EPROTO;
		start = i + 1;
	}
	return 0;
}
