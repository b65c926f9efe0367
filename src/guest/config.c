/* The guest config's text (src/guest/config.h, config-parse.h): written on
 * the host, read by the guest agent. One record per line, fields separated
 * by tabs:
 *   module PATH            (repeated, in load order)
 *   root DEVICE FSTYPE
 *   channel PATH
 *   scratch BYTES
 *   input SOURCE TARGET dir|file   (repeated)
 *   hostname NAME
 *   ids UID GID
 *   memory BYTES
 *   pids N
 *   network 0|1
 *   proxy_port N / capture_port N  (repeated)
 * and for a container's root (the OCI runtime's):
 *   container rw|ro
 *   mount bind|copy|tmpfs|special|mask|rdonly TARGET [SOURCE]  (repeated)
 *   group GID      (repeated)
 *   umask OCTAL
 *   seccomp PATH
 *   nofile SOFT HARD
 * Libc only: it builds into the static agent too. */
#include "guest/config-parse.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A growing text buffer; ok false once an allocation or a value failed. */
struct out {
	char *buf;
	size_t len, cap;
	bool ok;
};

static void add(struct out *o, const char *s)
{
	size_t n = strlen(s);
	if (!o->ok)
		return;
	if (o->len + n + 1 > o->cap) {
		size_t cap = (o->cap ? o->cap * 2 : 256) + n;
		char *b = realloc(o->buf, cap);
		if (!b) {
			o->ok = false;
			return;
		}
		o->buf = b;
		o->cap = cap;
	}
	memcpy(o->buf + o->len, s, n + 1);
	o->len += n;
}

/* One record: the key, then each field (a string with no tab, newline or
 * NUL; NULL ends the list). */
static void record(struct out *o, const char *key, ...)
{
	va_list ap;
	add(o, key);
	va_start(ap, key);
	for (const char *f; (f = va_arg(ap, const char *));) {
		if (!*f || strpbrk(f, "\t\n"))
			o->ok = false;
		add(o, "\t");
		add(o, f);
	}
	va_end(ap);
	add(o, "\n");
}

/* Each mount kind's word, and whether it takes a source. */
static const struct {
	const char *name;
	bool source;
} mount_kinds[] = {
    [AL_GM_BIND] = {"bind", true},    [AL_GM_COPY] = {"copy", true},
    [AL_GM_TMPFS] = {"tmpfs", false}, [AL_GM_SPECIAL] = {"special", true},
    [AL_GM_MASK] = {"mask", false},   [AL_GM_RDONLY] = {"rdonly", false},
};

static const char *num(char b[24], uint64_t v)
{
	snprintf(b, 24, "%" PRIu64, v);
	return b;
}

char *al_guest_config_format(const struct al_guest_config *c, size_t *len)
{
	struct out o = {.ok = true};
	char a[24], b[24];
	if (!c->root_device || !c->root_fstype || !c->channel) {
		errno = EINVAL;
		return NULL;
	}
	for (size_t i = 0; i < c->n_modules; i++)
		record(&o, "module", c->modules[i], NULL);
	record(&o, "root", c->root_device, c->root_fstype, NULL);
	record(&o, "channel", c->channel, NULL);
	record(&o, "scratch", num(a, c->scratch_bytes), NULL);
	for (size_t i = 0; i < c->n_inputs; i++)
		record(&o, "input", c->inputs[i].source, c->inputs[i].target,
		       c->inputs[i].dir ? "dir" : "file", NULL);
	if (c->hostname)
		record(&o, "hostname", c->hostname, NULL);
	record(&o, "ids", num(a, c->uid), num(b, c->gid), NULL);
	record(&o, "memory", num(a, c->memory_bytes), NULL);
	record(&o, "pids", num(a, c->pids), NULL);
	record(&o, "network", c->network ? "1" : "0", NULL);
	for (size_t i = 0; i < c->n_proxy_ports; i++)
		record(&o, "proxy_port", num(a, c->proxy_ports[i]), NULL);
	for (size_t i = 0; i < c->n_capture_ports; i++)
		record(&o, "capture_port", num(a, c->capture_ports[i]), NULL);
	if (c->container)
		record(&o, "container", c->container_ro ? "ro" : "rw", NULL);
	for (size_t i = 0; c->container && i < c->n_mounts; i++) {
		const struct al_guest_mount *m = &c->mounts[i];
		if ((unsigned)m->kind >= sizeof(mount_kinds) / sizeof(*mount_kinds) || !m->target ||
		    !m->source != !mount_kinds[m->kind].source) {
			o.ok = false;
			break;
		}
		record(&o, "mount", mount_kinds[m->kind].name, m->target, m->source, NULL);
	}
	for (size_t i = 0; c->container && i < c->n_groups; i++)
		record(&o, "group", num(a, c->groups[i]), NULL);
	if (c->container) {
		snprintf(a, sizeof(a), "%o", c->umask & 0777);
		record(&o, "umask", a, NULL);
	}
	if (c->container && c->seccomp)
		record(&o, "seccomp", c->seccomp, NULL);
	if (c->container && c->nofile)
		record(&o, "nofile", num(a, c->nofile_soft ? c->nofile_soft : c->nofile),
		       num(b, c->nofile), NULL);
	if (!o.ok) {
		free(o.buf);
		errno = EINVAL;
		return NULL;
	}
	*len = o.len;
	return o.buf;
}

/* The parser's state: the line being read, for messages. */
struct in {
	char *err;
	size_t errlen;
	unsigned line;
	unsigned seen; /* bit per once-only key */
};

__attribute__((format(printf, 2, 3))) static int fail(struct in *in, const char *fmt, ...)
{
	char m[200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(m, sizeof(m), fmt, ap);
	va_end(ap);
	snprintf(in->err, in->errlen, "config line %u: %s", in->line, m);
	return -EINVAL;
}

static int to_u64(struct in *in, const char *s, uint64_t max, uint64_t *v)
{
	char *end;
	if (*s < '0' || *s > '9')
		return fail(in, "\"%s\" is not a number", s);
	errno = 0;
	unsigned long long n = strtoull(s, &end, 10);
	if (errno || *end || n > max)
		return fail(in, "\"%s\" is out of range", s);
	*v = n;
	return 0;
}

static int abs_path(struct in *in, const char *s)
{
	return s[0] == '/' ? 0 : fail(in, "\"%s\" is not an absolute path", s);
}

/* Once-only keys, by their bit in in->seen. */
static const char *const once[] = {"root", "channel", "scratch",   "hostname", "ids",	  "memory",
				   "pids", "network", "container", "umask",    "seccomp", "nofile"};

static int one_record(struct in *in, char **f, int n, struct al_guest_config_parsed *p)
{
	struct al_guest_config *c = &p->c;
	uint64_t v, w;
	int r = 0;
	for (unsigned i = 0; i < sizeof(once) / sizeof(*once); i++)
		if (!strcmp(f[0], once[i])) {
			if (in->seen & 1u << i)
				return fail(in, "\"%s\" appears twice", f[0]);
			in->seen |= 1u << i;
		}
#define FIELDS(k)                                                                                  \
	if (n != (k) + 1)                                                                          \
		return fail(in, "\"%s\" has the wrong number of fields", f[0]);
	if (!strcmp(f[0], "module")) {
		FIELDS(1);
		if (c->n_modules == AL_GUEST_CONFIG_MAX_MODULES)
			return fail(in, "more than %s modules", "32");
		p->modules[c->n_modules++] = f[1];
		return abs_path(in, f[1]);
	} else if (!strcmp(f[0], "root")) {
		FIELDS(2);
		c->root_device = f[1];
		c->root_fstype = f[2];
		return abs_path(in, f[1]);
	} else if (!strcmp(f[0], "channel")) {
		FIELDS(1);
		c->channel = f[1];
		return abs_path(in, f[1]);
	} else if (!strcmp(f[0], "scratch") || !strcmp(f[0], "memory") || !strcmp(f[0], "pids")) {
		FIELDS(1);
		if ((r = to_u64(in, f[1], UINT64_MAX / 2, &v)))
			return r;
		*(f[0][0] == 's'   ? &c->scratch_bytes
		  : f[0][0] == 'm' ? &c->memory_bytes
				   : &c->pids) = v;
	} else if (!strcmp(f[0], "input")) {
		FIELDS(3);
		if (c->n_inputs == AL_GUEST_CONFIG_MAX_INPUTS)
			return fail(in, "more than %s inputs", "64");
		if (strcmp(f[3], "dir") && strcmp(f[3], "file"))
			return fail(in, "input kind \"%s\" is neither dir nor file", f[3]);
		if ((r = abs_path(in, f[1])) || (r = abs_path(in, f[2])))
			return r;
		p->inputs[c->n_inputs++] =
		    (struct al_guest_input){.source = f[1], .target = f[2], .dir = f[3][0] == 'd'};
	} else if (!strcmp(f[0], "hostname")) {
		FIELDS(1);
		if (strlen(f[1]) > 64)
			return fail(in, "hostname \"%s\" is longer than 64 bytes", f[1]);
		c->hostname = f[1];
	} else if (!strcmp(f[0], "ids")) {
		FIELDS(2);
		if ((r = to_u64(in, f[1], UINT32_MAX - 1, &v)) ||
		    (r = to_u64(in, f[2], UINT32_MAX - 1, &w)))
			return r;
		c->uid = (uid_t)v;
		c->gid = (gid_t)w;
	} else if (!strcmp(f[0], "network")) {
		FIELDS(1);
		if (strcmp(f[1], "0") && strcmp(f[1], "1"))
			return fail(in, "network \"%s\" is neither 0 nor 1", f[1]);
		c->network = f[1][0] == '1';
	} else if (!strcmp(f[0], "proxy_port") || !strcmp(f[0], "capture_port")) {
		FIELDS(1);
		bool proxy = f[0][0] == 'p';
		size_t *cnt = proxy ? &c->n_proxy_ports : &c->n_capture_ports;
		if (*cnt == AL_GUEST_CONFIG_MAX_PORTS)
			return fail(in, "more than %s ports of a kind", "16");
		if ((r = to_u64(in, f[1], 65535, &v)))
			return r;
		if (v == 0)
			return fail(in, "port \"%s\" is 0", f[1]);
		(proxy ? p->proxy_ports : p->capture_ports)[(*cnt)++] = (uint16_t)v;
	} else if (!strcmp(f[0], "container")) {
		FIELDS(1);
		if (strcmp(f[1], "rw") && strcmp(f[1], "ro"))
			return fail(in, "container \"%s\" is neither rw nor ro", f[1]);
		c->container = true;
		c->container_ro = f[1][1] == 'o';
	} else if (!strcmp(f[0], "mount")) {
		if (n < 3)
			return fail(in, "\"%s\" has the wrong number of fields", f[0]);
		unsigned k = 0;
		while (k < sizeof(mount_kinds) / sizeof(*mount_kinds) &&
		       strcmp(f[1], mount_kinds[k].name))
			k++;
		if (k == sizeof(mount_kinds) / sizeof(*mount_kinds))
			return fail(in, "mount kind \"%s\" is unknown", f[1]);
		FIELDS(mount_kinds[k].source ? 3 : 2);
		if (c->n_mounts == AL_GUEST_CONFIG_MAX_MOUNTS)
			return fail(in, "more than %s mounts", "96");
		if ((r = abs_path(in, f[2])) ||
		    (k != AL_GM_SPECIAL && n == 4 && (r = abs_path(in, f[3]))))
			return r;
		if (k == AL_GM_SPECIAL && strcmp(f[3], "sysfs") && strcmp(f[3], "cgroup2") &&
		    strcmp(f[3], "mqueue"))
			return fail(in, "file system \"%s\" is not one a container gets", f[3]);
		p->mounts[c->n_mounts++] =
		    (struct al_guest_mount){.kind = (enum al_guest_mount_kind)k,
					    .target = f[2],
					    .source = n == 4 ? f[3] : NULL};
	} else if (!strcmp(f[0], "group")) {
		FIELDS(1);
		if (c->n_groups == AL_GUEST_CONFIG_MAX_GROUPS)
			return fail(in, "more than %s groups", "32");
		if ((r = to_u64(in, f[1], UINT32_MAX - 1, &v)))
			return r;
		p->groups[c->n_groups++] = (gid_t)v;
	} else if (!strcmp(f[0], "umask")) {
		FIELDS(1);
		char *end;
		unsigned long m = strtoul(f[1], &end, 8);
		if (*end || m > 0777 || f[1][0] < '0' || f[1][0] > '7')
			return fail(in, "umask \"%s\" is not an octal mode", f[1]);
		c->umask = (unsigned)m;
	} else if (!strcmp(f[0], "seccomp")) {
		FIELDS(1);
		c->seccomp = f[1];
		return abs_path(in, f[1]);
	} else if (!strcmp(f[0], "nofile")) {
		FIELDS(2);
		if ((r = to_u64(in, f[1], UINT32_MAX, &v)) ||
		    (r = to_u64(in, f[2], UINT32_MAX, &w)))
			return r;
		if (v == 0 || v > w)
			return fail(in, "nofile %s %s: soft not within 1 to hard", f[1], f[2]);
		c->nofile_soft = v;
		c->nofile = w;
	} else {
		return fail(in, "unknown record \"%s\"", f[0]);
	}
#undef FIELDS
	return 0;
}

int al_guest_config_parse(char *text, size_t len, struct al_guest_config_parsed *out, char *err,
			  size_t errlen)
{
	struct in in = {.err = err, .errlen = errlen};
	memset(out, 0, sizeof(*out));
	out->c.modules = out->modules;
	out->c.inputs = out->inputs;
	out->c.proxy_ports = out->proxy_ports;
	out->c.capture_ports = out->capture_ports;
	out->c.mounts = out->mounts;
	out->c.groups = out->groups;
	out->c.umask = 022;
	if (memchr(text, 0, len))
		return fail(&in, "%s", "a NUL byte in the file");
	if (len && text[len - 1] != '\n')
		return fail(&in, "%s", "the last line has no newline");
	for (size_t pos = 0; pos < len;) {
		char *line = text + pos, *nl = memchr(line, '\n', len - pos);
		char *f[5];
		int n = 0;
		in.line++;
		*nl = 0;
		pos = (size_t)(nl - text) + 1;
		for (char *s = line;; s++) {
			char *tab = strchr(s, '\t');
			if (n == 5)
				return fail(&in, "%s", "too many fields");
			f[n++] = s;
			if (!tab)
				break;
			*tab = 0;
			s = tab;
		}
		for (int i = 0; i < n; i++)
			if (!*f[i])
				return fail(&in, "%s", "an empty field");
		int r = one_record(&in, f, n, out);
		if (r)
			return r;
	}
	in.line++;
	if (!out->c.root_device || !out->c.channel || !(in.seen & 1u << 2) || !(in.seen & 1u << 4))
		return fail(&in, "%s", "the file lacks a root, channel, scratch or ids record");
	if (!out->c.container && (out->c.n_mounts || out->c.n_groups || out->c.seccomp ||
				  out->c.nofile || (in.seen & 1u << 9)))
		return fail(&in, "%s", "mount, group, umask, seccomp or nofile without container");
	return 0;
}
