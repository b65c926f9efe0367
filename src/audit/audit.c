#include "audit/audit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/sys.h"
#include "core/util.h"

struct al_audit {
	/* A sink instead of a file: fn gets each event (and owns fields). */
	void (*fn)(void *data, const char *event, json_t *fields);
	void *data;
	int fd;
	char *run_id;
	char *path;
	bool failed;
};

int al_audit_open(const char *path, const char *run_id, struct al_audit **ret, struct al_error *err)
{
	_cleanup_free_ char *name = NULL;
	_cleanup_close_ int dirfd = al_open_output_dir(path, "--audit", &name, err);
	struct al_audit *a;
	struct stat st;
	int fd;

	if (dirfd < 0)
		return dirfd;
	/* Not through a link (a sandbox may have planted one where the file
	 * is), and not blocking on a FIFO nobody reads. */
	fd = openat(dirfd, name,
		    O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY,
		    0600);
	if (fd < 0 && errno == ELOOP)
		return al_error_set(
		    err, ELOOP,
		    "audit file %s is a symbolic link; give the real path (a sandbox "
		    "could have planted the link)",
		    path);
	if (fd < 0)
		return al_error_setsys(err, errno, "cannot open audit file %s", path);
	if (fstat(fd, &st) < 0 ||
	    !(S_ISREG(st.st_mode) || S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode))) {
		close(fd);
		return al_error_set(err, EINVAL, "audit file %s: not a file, FIFO or device", path);
	}
	/* Appends to a FIFO block like any write of ours (as before). */
	fcntl(fd, F_SETFL, O_APPEND);
	a = xcalloc(1, sizeof(*a));
	a->fd = fd;
	a->run_id = xstrdup(run_id);
	a->path = xstrdup(path);
	*ret = a;
	return 0;
}

int al_audit_open_fd(int fd, const char *what, const char *run_id, struct al_audit **ret,
		     struct al_error *err)
{
	struct al_audit *a;
	int copy;

	if (al_fd_check_writable(fd, what, err) < 0)
		return -EBADF;
	copy = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (copy < 0)
		return al_error_setsys(err, errno, "%s", what);
	a = xcalloc(1, sizeof(*a));
	a->fd = copy;
	a->run_id = xstrdup(run_id);
	a->path = xstrdup(what);
	*ret = a;
	return 0;
}

/* Length of the valid UTF-8 sequence at p (RFC 3629), or 0. */
static size_t utf8_len(const unsigned char *p)
{
	unsigned char lo = 0x80, hi = 0xbf;
	size_t n;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		n = 2;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		n = 3, lo = p[0] == 0xe0 ? 0xa0 : 0x80, hi = p[0] == 0xed ? 0x9f : 0xbf;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		n = 4, lo = p[0] == 0xf0 ? 0x90 : 0x80, hi = p[0] == 0xf4 ? 0x8f : 0xbf;
	else
		return 0;
	if (p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return n;
}

json_t *al_json_text(const char *s)
{
	json_t *j;

	if (!s)
		return json_null();
	if ((j = json_string(s)))
		return j;
	const unsigned char *p = (const unsigned char *)s;
	char *out = xmalloc(3 * strlen(s) + 1), *q = out;
	while (*p) {
		size_t n = utf8_len(p);
		if (n) {
			memcpy(q, p, n);
			q += n;
			p += n;
		} else {
			memcpy(q, "\xef\xbf\xbd", 3);
			q += 3;
			p++;
		}
	}
	*q = '\0';
	j = json_string(out);
	free(out);
	return j ? j : json_string("");
}

void al_audit_timestamp(char *buf, size_t len)
{
	struct timespec ts;
	struct tm tm;
	char base[32];

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf, len, "%s.%03ldZ", base, ts.tv_nsec / 1000000);
}

void al_audit_emit(struct al_audit *a, const char *event, json_t *fields)
{
	char ts[40];
	json_t *o;
	char *line;
	size_t n;

	if (!a) {
		json_decref(fields);
		return;
	}
	if (a->fn) {
		a->fn(a->data, event, fields);
		return;
	}
	al_audit_timestamp(ts, sizeof(ts));
	o = json_pack("{s:s, s:s, s:s}", "ts", ts, "run", a->run_id, "event", event);
	if (fields) {
		json_object_update(o, fields);
		json_decref(fields);
	}
	line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
	json_decref(o);
	if (!line)
		return;
	n = strlen(line);
	line = xrealloc(line, n + 2);
	line[n] = '\n';
	line[n + 1] = '\0';
	if (al_write_all(a->fd, line, n + 1) < 0 && !a->failed) {
		a->failed = true;
		al_err("audit: writing %s: %s", a->path, strerror(errno));
	}
	free(line);
}

struct al_audit *al_audit_sink(void (*fn)(void *data, const char *event, json_t *fields),
			       void *data)
{
	struct al_audit *a = xcalloc(1, sizeof(*a));

	a->fn = fn;
	a->data = data;
	a->fd = -1;
	return a;
}

void al_audit_close(struct al_audit *a)
{
	if (!a)
		return;
	if (a->fd >= 0)
		close(a->fd);
	free(a->run_id);
	free(a->path);
	free(a);
}
