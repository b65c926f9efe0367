/* The file API where the sandbox's files are its own agent's (microvm and
 * vm: the scratch is a tmpfs in the guest, with no descriptor on the
 * host): each operation is an exec of a special kind (al_exec_request's
 * file_op, argv [OP, PATH]; guest/proto.h AL_GUEST_EXEC_FILE_OP says what
 * the agent does), started from here and answered when it ends, so the
 * session's loop never waits for the guest. The path was checked and
 * located by sfiles.c exactly as on the host; the agent resolves it again
 * beneath its face, no link followed, as the sandbox's user. The guest is
 * not trusted: what it returns is capped (AL_SERVE_FILE_MAX + 1 bytes of
 * a file, a listing parsed strictly) and its exit code is only an errno
 * to answer with (sfile_fail). At most AL_SESS_FILE_OPS_MAX at once, each
 * also one of the sandbox's max_execs while it runs. */
#include "serve/sfiles.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/sys.h"
#include "core/util.h"
#include "guest/proto.h"
#include "serve/serve.h"

_Static_assert(AL_SERVE_FILE_MAX == AL_GUEST_FILE_OP_MAX, "the guest's cap is the API's");
_Static_assert(SFILE_LIST_MAX == AL_GUEST_FILE_OP_LIST, "the guest's listing is the API's");

/* The guest has this long to do one operation (32 MiB through the
 * channel under TCG takes seconds, not minutes). */
#define FOP_TIMEOUT_MS 120000
/* What of its stderr is kept (get's size of a file over the cap). */
#define FOP_ERR_MAX 32

enum fop_kind {
	FOP_GET,
	FOP_PUT,
	FOP_MKDIR,
	FOP_DELETE
};
static const char *const op_names[] = {"get", "put", "mkdir", "delete"};
/* The verb sfile_fail names for each (as sfiles.c's). */
static const char *const op_what[] = {"read", "write", "mkdir", "remove"};

struct sfop {
	struct sfop *next;
	struct sess *s; /* NULL: its sandbox ended (freed when its exec ends) */
	uint64_t req;
	struct sfile_where w; /* spath and is_face only */
	enum fop_kind kind;
	bool list_asked; /* GET ?list */
	size_t put_len;
	struct al_exec *x;
	char *out; /* stdout: at most 1 + AL_SERVE_FILE_MAX bytes */
	size_t len;
	bool over; /* more came */
	char err[FOP_ERR_MAX];
	size_t elen;
};

static void fop_output(void *data, int which, const void *p, size_t n)
{
	struct sfop *f = data;
	if (which == 1) {
		size_t k = FOP_ERR_MAX - f->elen < n ? FOP_ERR_MAX - f->elen : n;
		memcpy(f->err + f->elen, p, k);
		f->elen += k;
		return;
	}
	if (f->over)
		return;
	if (f->len + n > 1 + (size_t)AL_SERVE_FILE_MAX) {
		/* Past the cap (a file that grew, or a guest that lies): 413,
		 * and the rest is not waited for. */
		f->over = true;
		if (f->x)
			al_exec_signal(f->x, SIGKILL);
		return;
	}
	f->out = xrealloc(f->out, f->len + n);
	memcpy(f->out + f->len, p, n);
	f->len += n;
}

/* A listing (proto.h: "T SIZE MODE NAME\0" records) as sfiles.c's JSON
 * entries, or NULL when it is not one. */
static json_t *parse_list(const char *p, size_t n)
{
	json_t *a = json_array();
	while (n) {
		const char *nul = memchr(p, 0, n);
		char type = p[0], *end;
		if (!nul || nul - p < 7 || !strchr("fdlo", type) || p[1] != ' ' || p[2] < '0' ||
		    p[2] > '9' || json_array_size(a) >= SFILE_LIST_MAX)
			goto bad;
		errno = 0;
		unsigned long long size = strtoull(p + 2, &end, 10);
		if (errno || *end != ' ' || end[1] < '0' || end[1] > '7' || size > INT64_MAX)
			goto bad;
		unsigned long mode = strtoul(end + 1, &end, 8);
		const char *name = end + 1;
		if (*end != ' ' || mode > 07777 || !*name || strchr(name, '/') ||
		    nul - name > 255 || !strcmp(name, ".") || !strcmp(name, ".."))
			goto bad;
		static const char *const types[] = {
		    ['f'] = "file", ['d'] = "dir", ['l'] = "symlink", ['o'] = "other"};
		json_t *e =
		    sfile_entry(name, types[(unsigned char)type], (long long)size, (unsigned)mode);
		if (e)
			json_array_append_new(a, e);
		n -= (size_t)(nul - p) + 1;
		p = nul + 1;
	}
	return a;
bad:
	json_decref(a);
	return NULL;
}

enum sfile_output sfile_vm_output(const char *out, size_t len, json_t **list)
{
	*list = NULL;
	if (len && out[0] == 'f' && len - 1 <= AL_SERVE_FILE_MAX)
		return SFILE_OUT_FILE;
	if (len && out[0] == 'd' && (*list = parse_list(out + 1, len - 1)))
		return SFILE_OUT_LIST;
	return SFILE_OUT_BAD;
}

long long sfile_vm_size(const char *err, size_t len)
{
	/* 1 to 19 digits and nothing else (strtoull would take a sign or
	 * spaces, and wrap "-1" to the largest size); 19 digits cannot wrap
	 * an unsigned long long. */
	unsigned long long size = 0;
	if (!len || len > 19)
		return -1;
	for (size_t i = 0; i < len; i++) {
		if (err[i] < '0' || err[i] > '9')
			return -1;
		size = size * 10 + (unsigned)(err[i] - '0');
	}
	return size > INT64_MAX ? -1 : (long long)size;
}

/* GET's answer once the agent exited 0. */
static void got(struct sess *s, struct sfop *f)
{
	const struct sfile_where *w = &f->w;
	json_t *a;
	switch (sfile_vm_output(f->out, f->len, &a)) {
	case SFILE_OUT_FILE:
		if (f->list_asked)
			return sess_error(s, f->req, 400, "read %s: ?list is for directories",
					  w->spath);
		return sess_answer_raw(s, f->req, 200, "application/octet-stream", f->out + 1,
				       f->len - 1);
	case SFILE_OUT_LIST:
		return sess_answer(s, f->req, 200,
				   json_pack("{s:s, s:o}", "path", w->spath, "entries", a));
	case SFILE_OUT_BAD:
		break;
	}
	sess_error(s, f->req, 500,
		   "read %s: the sandbox's agent answered with something that is "
		   "neither a file nor a listing",
		   w->spath);
}

static void answer(struct sess *s, struct sfop *f, const struct al_exec_result *res)
{
	const struct sfile_where *w = &f->w;
	const char *what = op_what[f->kind];
	if (f->over)
		return sess_error(s, f->req, 413,
				  "%s %s: over %u bytes; the file API gives at most %u", what,
				  w->spath, AL_SERVE_FILE_MAX, AL_SERVE_FILE_MAX);
	switch (res->reason) {
	case AL_EXEC_EXITED:
		break;
	case AL_EXEC_FAILED:
		return sess_error(s, f->req, 500,
				  "%s %s: the sandbox's agent could not start it: %s", what,
				  w->spath, strerror(res->exec_errno));
	case AL_EXEC_TIMEOUT:
		return sess_error(s, f->req, 504,
				  "%s %s: the sandbox's agent did not finish it in %d s", what,
				  w->spath, FOP_TIMEOUT_MS / 1000);
	case AL_EXEC_KILLED:
		return sess_error(s, f->req, 500, "%s %s: the sandbox ended during the operation",
				  what, w->spath);
	default:
		return sess_error(s, f->req, 500, "%s %s: the sandbox's agent ended it (%s%s%s)",
				  what, w->spath, al_exec_reason_name(res->reason),
				  res->signal ? ", " : "",
				  res->signal ? strsignal(res->signal) : "");
	}
	int e = res->exit_code;
	if (e == EFBIG) {
		/* get: its size on stderr, as digits (else said without it). */
		long long size = sfile_vm_size(f->err, f->elen);
		if (f->kind == FOP_GET && size > AL_SERVE_FILE_MAX)
			return sess_error(s, f->req, 413,
					  "read %s: %lld bytes; the file API gives at most %u",
					  w->spath, size, AL_SERVE_FILE_MAX);
		return sess_error(s, f->req, 413,
				  "%s %s: over %u bytes; the file API gives at most %u", what,
				  w->spath, AL_SERVE_FILE_MAX, AL_SERVE_FILE_MAX);
	}
	if (e)
		return sfile_fail(s, f->req, w, what, e);
	switch (f->kind) {
	case FOP_GET:
		return got(s, f);
	case FOP_PUT:
		return sess_answer(s, f->req, 201,
				   json_pack("{s:s, s:s, s:I}", "path", w->spath, "type", "file",
					     "size", (json_int_t)f->put_len));
	case FOP_MKDIR:
		return sess_answer(s, f->req, 201,
				   json_pack("{s:s, s:s}", "path", w->spath, "type", "dir"));
	case FOP_DELETE:
		return sess_answer(s, f->req, 200,
				   json_pack("{s:s, s:b}", "path", w->spath, "removed", 1));
	}
}

static void fop_free(struct sfop *f)
{
	free(f->out);
	free(f);
}

static void fop_ended(void *data, const struct al_exec_result *res)
{
	struct sfop *f = data;
	struct sess *s = f->s;
	f->x = NULL;
	if (!s)
		return fop_free(f); /* its sandbox ended first: answered then */
	for (struct sfop **p = &s->fops; *p; p = &(*p)->next)
		if (*p == f) {
			*p = f->next;
			s->n_fops--;
			break;
		}
	answer(s, f, res);
	s->last_active_ms = sess_now(s); /* its end is activity, as an exec's */
	fop_free(f);
}

/* The body of a PUT as a sealed memfd (the exec's stdin, read by the
 * backend to its end), or -1 with errno. */
static int body_fd(const uint8_t *body, size_t len)
{
	int fd = memfd_create("airlock-put", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -1;
	if (al_write_all(fd, body, len) < 0 || lseek(fd, 0, SEEK_SET) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

void sfile_by_exec(struct sess *s, uint64_t req, const char *method, const struct sfile_where *w,
		   const char *query, const uint8_t *body, size_t len)
{
	enum fop_kind kind;
	if (!strcmp(method, "GET")) {
		kind = FOP_GET;
	} else if (!strcmp(method, "PUT")) {
		bool mkdir_ = sess_query_flag(query, "mkdir");
		/* As sfiles.c's put(). */
		if (w->is_face)
			return sess_error(s, req, mkdir_ ? 409 : 400,
					  "%s is a scratch face (a directory)", w->spath);
		if (len > AL_SERVE_FILE_MAX)
			return sess_error(s, req, 413, "the file is %zu bytes; at most %u", len,
					  AL_SERVE_FILE_MAX);
		kind = mkdir_ ? FOP_MKDIR : FOP_PUT;
	} else if (!strcmp(method, "DELETE")) {
		if (w->is_face)
			return sess_error(s, req, 400, "%s is a scratch face; it cannot be removed",
					  w->spath);
		kind = FOP_DELETE;
	} else {
		return sess_error(s, req, 405, "files/ takes GET, PUT and DELETE, not %s", method);
	}
	if (s->n_fops >= AL_SESS_FILE_OPS_MAX)
		return sess_error(s, req, 429,
				  "sandbox %s has %d file operations in flight already; retry when "
				  "one ended",
				  s->id, AL_SESS_FILE_OPS_MAX);
	int in = -1;
	if (kind == FOP_PUT && (in = body_fd(body, len)) < 0)
		return sess_error(s, req, 500, "write %s: the body's memfd: %s", w->spath,
				  strerror(errno));
	struct sfop *f = xcalloc(1, sizeof(*f));
	f->s = s;
	f->req = req;
	memcpy(f->w.spath, w->spath, sizeof(f->w.spath));
	f->w.is_face = w->is_face;
	f->kind = kind;
	f->list_asked = kind == FOP_GET && sess_query_flag(query, "list");
	f->put_len = len;
	char *argv[] = {(char *)op_names[kind], f->w.spath, NULL};
	/* Its output: 'f' and the file (one byte over the cap tells), its
	 * size on stderr; a little room, so that fop_output sees the cap
	 * passed before the exec's own output limit ends it. */
	struct al_exec_request xr = {.argv = argv,
				     .file_op = true,
				     .timeout_ms = FOP_TIMEOUT_MS,
				     .output_bytes = 2 + (uint64_t)AL_SERVE_FILE_MAX + 4096,
				     .stdin_fd = in};
	static const struct al_exec_io io_ops = {.output = fop_output, .ended = fop_ended};
	struct al_exec_io io = io_ops;
	struct al_error err = {0};
	io.data = f;
	int r = al_run_exec(s->run, &xr, &io, &f->x, &err);
	if (in >= 0)
		close(in); /* the exec has its own */
	if (r < 0) {
		fop_free(f);
		if (r == -EAGAIN)
			return sess_error(s, req, 429,
					  "%s %s: %s (a file operation is one of the "
					  "sandbox's max_execs while it runs)",
					  op_what[kind], w->spath, err.msg);
		return sess_error(s, req, 500, "%s %s: %s", op_what[kind], w->spath, err.msg);
	}
	if (kind != FOP_PUT)
		al_exec_close_stdin(f->x); /* it reads none */
	f->next = s->fops;
	s->fops = f;
	s->n_fops++;
}

void sess_files_free(struct sess *s)
{
	while (s->fops) {
		struct sfop *f = s->fops;
		s->fops = f->next;
		sess_error(s, f->req, 500, "%s %s: the sandbox ended during the operation",
			   op_what[f->kind], f->w.spath);
		/* Its exec's end (with the run's) frees it. */
		f->s = NULL;
		if (!f->x)
			fop_free(f);
	}
	s->n_fops = 0;
}
