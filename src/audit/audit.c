#include "audit/audit.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
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
	/* A FIFO, pipe, device or socket: written without blocking (its
	 * reader may stop reading, and the supervisor must not stop with it),
	 * waiting at most AUDIT_STALL_MS in all before lines are dropped. */
	bool nonblocking, socket;
	bool stalled;
	uint64_t dropped;
	char *run_id;
	char *path;
	bool failed;
};

#define AUDIT_STALL_MS 1000

/* Write a line to a stream that may not keep up: 0, -EAGAIN when it did
 * not take it in time (from the first stall on, no more waiting), or
 * -errno. */
static int write_nonblocking(struct al_audit *a, const char *p, size_t n)
{
	uint64_t deadline = al_now_ms() + (a->stalled ? 0 : AUDIT_STALL_MS);

	while (n > 0) {
		ssize_t w =
		    a->socket ? send(a->fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL) : write(a->fd, p, n);
		if (w > 0) {
			p += w;
			n -= (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno != EAGAIN)
			return -errno;
		uint64_t t = al_now_ms();
		struct pollfd pfd = {.fd = a->fd, .events = POLLOUT};
		if (t >= deadline || poll(&pfd, 1, (int)(deadline - t)) <= 0) {
			a->stalled = true;
			return -EAGAIN;
		}
	}
	return 0;
}

/* Our own open file description of fd, non-blocking, for a stream that is
 * not a regular file; a copy of fd for a regular file. -errno on failure. */
static int own_description(int fd, struct al_audit *a)
{
	struct stat st;
	char path[64];

	if (fstat(fd, &st) < 0)
		return -errno;
	if (S_ISREG(st.st_mode)) {
		int c = fcntl(fd, F_DUPFD_CLOEXEC, 3);
		return c < 0 ? -errno : c;
	}
	a->nonblocking = true;
	if (S_ISSOCK(st.st_mode)) {
		a->socket = true; /* MSG_DONTWAIT per send: no flag to share */
		int c = fcntl(fd, F_DUPFD_CLOEXEC, 3);
		return c < 0 ? -errno : c;
	}
	/* Setting O_NONBLOCK on fd itself would change the caller's open
	 * file description too. */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	int c = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	return c < 0 ? -errno : c;
}

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
	a = xcalloc(1, sizeof(*a));
	/* A regular file is appended to; a FIFO or device stays
	 * non-blocking (see write_nonblocking). */
	if (S_ISREG(st.st_mode))
		fcntl(fd, F_SETFL, O_APPEND);
	else
		a->nonblocking = true;
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
	a = xcalloc(1, sizeof(*a));
	copy = own_description(fd, a);
	if (copy < 0) {
		free(a);
		return al_error_setsys(err, -copy, "%s", what);
	}
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

/* The calendar date from the days since 1970-01-01, by whole 400-year
 * eras of 146,097 days from 0000-03-01 (a year counted from March puts
 * the leap day last): no gmtime_r(), whose first call in a process reads
 * the time zone file (/etc/localtime: seven system calls on every run for
 * a time that is UTC anyway). */
void al_audit_format_time(long long sec, long nsec, char *buf, size_t len)
{
	long long days = sec / 86400, rem = sec % 86400;

	if (rem < 0) {
		rem += 86400;
		days--;
	}
	long long z = days + 719468; /* days since 0000-03-01 */
	long long era = (z >= 0 ? z : z - 146096) / 146097;
	long long doe = z - era * 146097;				       /* [0, 146096] */
	long long yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365; /* [0, 399] */
	long long doy = doe - (365 * yoe + yoe / 4 - yoe / 100);	       /* from March 1 */
	long long mp = (5 * doy + 2) / 153;				       /* March is 0 */
	long long day = doy - (153 * mp + 2) / 5 + 1;
	long long month = mp < 10 ? mp + 3 : mp - 9;
	long long year = yoe + era * 400 + (month <= 2);

	snprintf(buf, len, "%04lld-%02lld-%02lldT%02lld:%02lld:%02lld.%03ldZ", year, month, day,
		 rem / 3600, rem / 60 % 60, rem % 60, nsec / 1000000);
}

void al_audit_timestamp(char *buf, size_t len)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	al_audit_format_time((long long)ts.tv_sec, ts.tv_nsec, buf, len);
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
	int r = a->nonblocking ? write_nonblocking(a, line, n + 1)
			       : (al_write_all(a->fd, line, n + 1) < 0 ? -errno : 0);
	if (r == -EAGAIN) {
		if (a->dropped++ == 0)
			al_err("audit: %s is not being read (waited %d ms): dropping audit lines "
			       "from here on rather than stopping the run's supervisor",
			       a->path, AUDIT_STALL_MS);
	} else if (r < 0 && !a->failed) {
		a->failed = true;
		al_err("audit: writing %s: %s", a->path, strerror(-r));
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
	if (a->dropped)
		al_err("audit: %llu audit line%s could not be written to %s (its reader did not "
		       "keep up)",
		       (unsigned long long)a->dropped, a->dropped == 1 ? "" : "s", a->path);
	if (a->fd >= 0)
		close(a->fd);
	free(a->run_id);
	free(a->path);
	free(a);
}
