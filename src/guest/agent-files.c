/* The guest agent's files: the host's FILE_* into /work before an exec
 * (--copy-in: directories first, no path the check refuses, nothing
 * followed through a link, nothing replaced), and /work's tree back on
 * FILES_GET (--copy-out: links sent as links, never followed; at most the
 * host's caps, then FILES_DONE). Both as the command's uid and gid. */
#include "guest/agent.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_DEPTH 64

struct agent_files {
	/* In: the file being written. */
	uint32_t in_id;
	uint8_t in_kind;
	int in_fd, in_parent;
	char in_base[256], link[4096];
	size_t link_len;
	int in_err; /* the first failure, for FILES_DONE */
	/* Out: the walk. */
	bool out;
	DIR *stack[MAX_DEPTH];
	size_t plen[MAX_DEPTH], depth;
	char path[4096];
	int out_fd;
	uint32_t out_id;
	uint64_t bytes_left, files_left, size_left;
};

static struct agent_files *files(struct agent *a)
{
	if (!a->files) {
		if (!(a->files = calloc(1, sizeof(*a->files))))
			agent_die(a, "guest agent: out of memory");
		a->files->in_fd = a->files->in_parent = a->files->out_fd = -1;
	}
	return a->files;
}

/* The directory that holds path's last component, opened without following
 * a link anywhere on the way; its base name in base. */
static int open_parent(struct agent *a, const char *path, char *base, size_t blen)
{
	char p[4096];
	snprintf(p, sizeof(p), "%s", path);
	int fd = dup(a->work);
	char *s = p, *slash;
	while (fd >= 0 && (slash = strchr(s, '/'))) {
		*slash = 0;
		int next = openat(fd, s, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		fd = next;
		s = slash + 1;
	}
	if (fd < 0 || strlen(s) >= blen) {
		if (fd >= 0)
			close(fd);
		return fd < 0 ? -errno : -ENAMETOOLONG;
	}
	strcpy(base, s);
	return fd;
}

static void fail_in(struct agent_files *f, int err)
{
	if (!f->in_err)
		f->in_err = err;
	if (f->in_fd >= 0)
		close(f->in_fd);
	if (f->in_parent >= 0)
		close(f->in_parent);
	f->in_fd = f->in_parent = -1;
	f->in_id = 0;
}

static void begin(struct agent *a, struct agent_files *f, uint32_t id, const uint8_t *p,
		  uint32_t len)
{
	const struct al_guest_config *c = &a->cfg.c;
	if (len < 7 || p[len - 1] || al_guest_path_ok((const char *)p + 5, len - 6) < 0 ||
	    p[4] < AL_GUEST_FILE_DIR || p[4] > AL_GUEST_FILE_LINK || !id)
		agent_die(a, "guest agent: a malformed FILE_BEGIN from the host");
	if (f->in_id)
		fail_in(f, EPROTO);
	mode_t mode = al_guest_get32(p) & 0777;
	int parent = open_parent(a, (const char *)p + 5, f->in_base, sizeof(f->in_base));
	if (parent < 0)
		return fail_in(f, -parent);
	f->in_parent = parent;
	f->in_id = id;
	f->in_kind = p[4];
	f->link_len = 0;
	if (p[4] == AL_GUEST_FILE_DIR) {
		if ((mkdirat(parent, f->in_base, mode | 0700) < 0 && errno != EEXIST) ||
		    fchownat(parent, f->in_base, c->uid, c->gid, AT_SYMLINK_NOFOLLOW) < 0)
			fail_in(f, errno);
	} else if (p[4] == AL_GUEST_FILE_REG) {
		f->in_fd = openat(parent, f->in_base,
				  O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
		if (f->in_fd < 0 || fchown(f->in_fd, c->uid, c->gid) < 0 ||
		    fchmod(f->in_fd, mode) < 0)
			fail_in(f, errno);
	}
}

static void data(struct agent_files *f, uint32_t id, const uint8_t *p, uint32_t len)
{
	if (!f->in_id || id != f->in_id)
		return; /* a file that failed: its error is already kept */
	if (f->in_kind == AL_GUEST_FILE_LINK) {
		if (f->link_len + len >= sizeof(f->link))
			return fail_in(f, ENAMETOOLONG);
		memcpy(f->link + f->link_len, p, len);
		f->link_len += len;
		return;
	}
	for (uint32_t off = 0; f->in_kind == AL_GUEST_FILE_REG && off < len;) {
		ssize_t w = write(f->in_fd, p + off, len - off);
		if (w <= 0)
			return fail_in(f, w < 0 ? errno : ENOSPC);
		off += (uint32_t)w;
	}
}

static void end(struct agent *a, struct agent_files *f, uint32_t id)
{
	if (!f->in_id || id != f->in_id)
		return;
	if (f->in_kind == AL_GUEST_FILE_LINK) {
		f->link[f->link_len] = 0;
		if (!f->link_len || memchr(f->link, 0, f->link_len) ||
		    symlinkat(f->link, f->in_parent, f->in_base) < 0 ||
		    fchownat(f->in_parent, f->in_base, a->cfg.c.uid, a->cfg.c.gid,
			     AT_SYMLINK_NOFOLLOW) < 0)
			return fail_in(f, f->link_len ? errno : EINVAL);
	}
	int err = f->in_err;
	fail_in(f, 0);
	f->in_err = err;
}

static void out_done(struct agent *a, struct agent_files *f, int err)
{
	uint8_t b[4];
	while (f->depth)
		closedir(f->stack[--f->depth]);
	if (f->out_fd >= 0)
		close(f->out_fd);
	f->out_fd = -1;
	f->out = false;
	al_guest_put32(b, (uint32_t)err);
	agent_send(a, AL_G_FILES_DONE, 0, 0, b, 4);
}

static void get(struct agent *a, struct agent_files *f, const uint8_t *p, uint32_t len)
{
	if (len != 16)
		agent_die(a, "guest agent: a malformed FILES_GET from the host");
	if (f->out)
		return out_done(a, f, EBUSY);
	/* Its own open file description: a dup would share the last walk's
	 * directory offset. */
	int fd = openat(a->work, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return out_done(a, f, errno);
	}
	f->out = true;
	f->bytes_left = al_guest_get64(p);
	f->files_left = al_guest_get64(p + 8);
	f->stack[0] = d;
	f->plen[0] = 0;
	f->depth = 1;
	f->path[0] = 0;
}

void agent_files_msg(struct agent *a, const struct al_guest_hdr *h, const uint8_t *p)
{
	struct agent_files *f = files(a);
	uint8_t b[4];
	switch (h->type) {
	case AL_G_FILE_BEGIN:
		return begin(a, f, h->id, p, h->len);
	case AL_G_FILE_DATA:
		return data(f, h->id, p, h->len);
	case AL_G_FILE_END:
		return end(a, f, h->id);
	case AL_G_FILES_DONE:
		/* The host's files are all here: say whether all were written. */
		if (f->in_id)
			fail_in(f, EPROTO);
		al_guest_put32(b, (uint32_t)f->in_err);
		f->in_err = 0;
		return agent_send(a, AL_G_FILES_DONE, 0, 0, b, 4);
	case AL_G_FILES_GET:
		return get(a, f, p, h->len);
	}
}

/* FILE_BEGIN of path (kind, mode) with a new id. */
static void announce(struct agent *a, struct agent_files *f, uint8_t kind, mode_t mode)
{
	static uint8_t b[5 + 4096];
	size_t l = strlen(f->path);
	al_guest_put32(b, mode & 07777);
	b[4] = kind;
	memcpy(b + 5, f->path, l + 1);
	agent_send(a, AL_G_FILE_BEGIN, 0, ++f->out_id, b, (uint32_t)(6 + l));
}

/* One step of the walk: an entry of the current directory. */
static void walk_step(struct agent *a, struct agent_files *f)
{
	DIR *d = f->stack[f->depth - 1];
	struct dirent *e = readdir(d);
	struct stat st;
	if (!e) {
		/* Each entry writes its name at its directory's offset: nothing
		 * of the path needs undoing here. */
		closedir(d);
		if (!--f->depth)
			out_done(a, f, 0);
		return;
	}
	if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
		return;
	size_t base = f->plen[f->depth - 1];
	if (base + strlen(e->d_name) + 2 > sizeof(f->path))
		return out_done(a, f, ENAMETOOLONG);
	snprintf(f->path + base, sizeof(f->path) - base, "%s", e->d_name);
	if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return;
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
		return;
	if (!f->files_left)
		return out_done(a, f, EFBIG);
	f->files_left--;
	if (S_ISLNK(st.st_mode)) {
		char t[4096];
		ssize_t n = readlinkat(dirfd(d), e->d_name, t, sizeof(t));
		if (n <= 0 || n >= (ssize_t)sizeof(t))
			return;
		announce(a, f, AL_GUEST_FILE_LINK, st.st_mode);
		agent_send(a, AL_G_FILE_DATA, 0, f->out_id, t, (uint32_t)n);
		agent_send(a, AL_G_FILE_END, 0, f->out_id, NULL, 0);
	} else if (S_ISREG(st.st_mode)) {
		if ((uint64_t)st.st_size > f->bytes_left)
			return out_done(a, f, EFBIG);
		f->out_fd =
		    openat(dirfd(d), e->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (f->out_fd < 0)
			return;
		f->size_left = (uint64_t)st.st_size;
		f->bytes_left -= f->size_left;
		announce(a, f, AL_GUEST_FILE_REG, st.st_mode);
	} else {
		int fd =
		    openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		DIR *sub = fd >= 0 && f->depth < MAX_DEPTH ? fdopendir(fd) : NULL;
		if (!sub) {
			if (fd >= 0)
				close(fd);
			return;
		}
		announce(a, f, AL_GUEST_FILE_DIR, st.st_mode);
		agent_send(a, AL_G_FILE_END, 0, f->out_id, NULL, 0);
		size_t l = strlen(f->path);
		f->path[l] = '/';
		f->path[l + 1] = 0;
		f->stack[f->depth] = sub;
		f->plen[f->depth++] = l + 1;
	}
}

/* The open file's next bytes (at most the size it had when announced). */
static void read_step(struct agent *a, struct agent_files *f)
{
	static uint8_t buf[AL_GUEST_MAX_PAYLOAD];
	size_t want = f->size_left < sizeof(buf) ? (size_t)f->size_left : sizeof(buf);
	ssize_t n = want ? read(f->out_fd, buf, want) : 0;
	if (n > 0) {
		agent_send(a, AL_G_FILE_DATA, 0, f->out_id, buf, (uint32_t)n);
		f->size_left -= (uint64_t)n;
		return;
	}
	agent_send(a, AL_G_FILE_END, 0, f->out_id, NULL, 0);
	close(f->out_fd);
	f->out_fd = -1;
}

void agent_files_pump(struct agent *a)
{
	struct agent_files *f = a->files;
	for (int i = 0; f && f->out && agent_q_room(a) && i < 64; i++) {
		if (f->out_fd >= 0)
			read_step(a, f);
		else
			walk_step(a, f);
	}
}
