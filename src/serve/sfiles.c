/* A live sandbox's file API (GET, PUT, DELETE /v1/sandboxes/{id}/files/
 * {path}, the sandbox path without its leading slash): only inside the
 * sandbox's scratch, through the scratch root's descriptor
 * (al_run_scratch_fd), every path resolved with openat2 in that root and
 * no link followed (RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS |
 * RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV); regular files and directories
 * only, sizes capped (AL_SERVE_FILE_MAX); everything done with the file
 * system ids of the scratch face's owner (the sandbox's user) and its
 * group as the only supplementary one, so what is
 * written is the sandbox's own and nothing the sandbox could not do
 * itself is done for it. A run with no scratch on the host whose backend
 * does file operations in its sandbox (microvm, vm: AL_BACKEND_EXEC_FILES)
 * is served by sfiles-vm.c instead, after the same path checks here. */
#include "serve/sfiles.h"

#include <dirent.h>
#include <grp.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/sys.h"
#include "core/util.h"
#include "policy/plan.h"
#include "serve/serve.h"

/* Supplementary groups saved around a file operation (root has few). */
#define AL_FILES_GROUPS_MAX 256

#define RESOLVE_FLAGS                                                                              \
	(RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)

/* The sandbox path rel (no leading slash) inside the scratch: 0, or an
 * HTTP status with the answer sent. With no scratch on the host but file
 * operations in the sandbox (w->by_exec), the same checks and no owner. */
static unsigned locate(struct sess *s, uint64_t req, const char *rel, struct sfile_where *w)
{
	const struct al_plan *p = s->rq.plan;
	const struct al_fs_entry *face = NULL;
	int root = al_run_scratch_fd(s->run);

	w->by_exec = root < 0 && al_run_exec_files(s->run);

	if (!*rel) {
		sess_error(s, req, 400,
			   "give a path: /v1/sandboxes/%s/files/PATH (the sandbox "
			   "path without its leading slash)",
			   s->id);
		return 400;
	}
	if (strlen(rel) >= sizeof(w->spath) - 1) {
		sess_error(s, req, 414, "the path is over %zu bytes", sizeof(w->spath) - 2);
		return 414;
	}
	char shown[4100];
	if (al_utf8_escape(shown, sizeof(shown), rel)) {
		/* JSON (every answer, the audit stream) carries UTF-8 only. */
		sess_error(s, req, 400,
			   "path \"/%s\" is not UTF-8 (its other bytes shown as \\xNN); the "
			   "file API takes UTF-8 paths only",
			   shown);
		return 400;
	}
	for (const char *c = rel; *c;) {
		size_t n = strcspn(c, "/");
		if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.')) {
			sess_error(
			    s, req, 400,
			    "path \"/%s\": an empty, \".\" or \"..\" component; the file API "
			    "takes plain paths inside the sandbox's scratch",
			    rel);
			return 400;
		}
		c += n;
		if (*c)
			c++;
	}
	snprintf(w->spath, sizeof(w->spath), "/%s", rel);
	for (size_t i = 0; i < p->n_fs; i++) {
		const struct al_fs_entry *e = &p->fs[i];
		if (e->kind == AL_FS_SCRATCH && al_path_is_under(w->spath, e->path) &&
		    (!face || strlen(e->path) > strlen(face->path)))
			face = e;
	}
	if (!face || (root < 0 && !w->by_exec)) {
		_cleanup_free_ char *faces = xstrdup("");
		for (size_t i = 0; i < p->n_fs; i++)
			if (p->fs[i].kind == AL_FS_SCRATCH) {
				char *t =
				    xasprintf("%s%s%s", faces, *faces ? ", " : "", p->fs[i].path);
				free(faces);
				faces = t;
			}
		sess_error(s, req, 403,
			   "%s is not in the sandbox's scratch: the file API reaches only %s",
			   w->spath, *faces ? faces : "(no scratch)");
		return 403;
	}
	w->is_face = strcmp(w->spath, face->path) == 0;
	w->part = xasprintf("%s%s", face->source, w->is_face ? "" : w->spath + strlen(face->path));
	char *slash = strrchr(w->part, '/');
	w->parent = slash ? xasprintf("%.*s", (int)(slash - w->part), w->part) : xstrdup(".");
	w->name = slash ? slash + 1 : w->part;
	/* Whose the sandbox's files are: the owner of its own scratch face
	 * (the workdir), else of this one. */
	if (w->by_exec)
		return 0; /* the sandbox's own agent acts as its user */
	const struct al_fs_entry *own = face;
	for (size_t i = 0; i < p->n_fs; i++)
		if (p->fs[i].kind == AL_FS_SCRATCH && p->fs[i].sandbox_owned) {
			own = &p->fs[i];
			break;
		}
	struct stat st;
	if (fstatat(root, own->source, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		sess_error(s, req, 500, "the scratch face %s: %s", own->path, strerror(errno));
		return 500;
	}
	w->uid = st.st_uid; /* the face's owner: its sandbox user */
	w->gid = st.st_gid;
	return 0;
}

static void where_clear(struct sfile_where *w)
{
	free(w->part);
	free(w->parent);
}

void sfile_fail(struct sess *s, uint64_t req, const struct sfile_where *w, const char *what, int e)
{
	switch (e) {
	case ELOOP:
		return sess_error(
		    s, req, 400, "%s %s: a symbolic link is on the way (the file API follows none)",
		    what, w->spath);
	case EXDEV:
		return sess_error(s, req, 400, "%s %s: the path leaves the scratch", what,
				  w->spath);
	case ENOENT:
		return sess_error(s, req, 404, "%s %s: no such file or directory", what, w->spath);
	case ENOTDIR:
		return sess_error(s, req, 400, "%s %s: a component on the way is not a directory",
				  what, w->spath);
	case EEXIST:
		return sess_error(s, req, 409, "%s %s: it exists already", what, w->spath);
	case ENOTEMPTY:
		return sess_error(s, req, 409, "%s %s: the directory is not empty", what, w->spath);
	case EISDIR:
		return sess_error(s, req, 409, "%s %s: it is a directory", what, w->spath);
	case EACCES:
	case EPERM:
	case EROFS:
		return sess_error(s, req, 403, "%s %s: the sandbox's user may not (%s)", what,
				  w->spath, strerror(e));
	case ENOSPC:
	case EDQUOT:
		return sess_error(s, req, 507, "%s %s: the scratch is full", what, w->spath);
	case ENXIO:
		return sess_error(s, req, 400, "%s %s: not a regular file or directory", what,
				  w->spath);
	default:
		return sess_error(s, req, 500, "%s %s: %s", what, w->spath, strerror(e));
	}
}

static int open_in(int root, const char *part, uint64_t flags)
{
	struct open_how how = {.flags = flags | O_CLOEXEC, .resolve = RESOLVE_FLAGS};

	return al_sys_openat2(root, part, &how, sizeof(how));
}

static const char *type_name(mode_t m)
{
	return S_ISREG(m) ? "file" : S_ISDIR(m) ? "dir" : S_ISLNK(m) ? "symlink" : "other";
}

json_t *sfile_entry(const char *raw, const char *type, long long size, unsigned mode)
{
	/* A name that is not UTF-8 is listed with those bytes as \xNN and
	 * "escaped": true (the file API cannot name it; the sandbox's own
	 * code can rename it). */
	char name[1024];
	bool escaped = al_utf8_escape(name, sizeof(name), raw);
	json_t *e = json_pack("{s:s, s:s, s:I, s:i}", "name", name, "type", type, "size",
			      (json_int_t)size, "mode", (int)(mode & 07777));
	if (e && escaped)
		json_object_set_new(e, "escaped", json_true());
	return e;
}

static void list_dir(struct sess *s, uint64_t req, const struct sfile_where *w, int fd)
{
	DIR *d = fdopendir(fd);
	struct dirent *de;
	json_t *a = json_array();

	if (!d) {
		close(fd);
		json_decref(a);
		return sfile_fail(s, req, w, "list", errno);
	}
	while ((de = readdir(d)) && json_array_size(a) < SFILE_LIST_MAX) {
		struct stat st;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		json_t *e = sfile_entry(de->d_name, type_name(st.st_mode), (long long)st.st_size,
					(unsigned)st.st_mode);
		if (e)
			json_array_append_new(a, e);
	}
	closedir(d);
	sess_answer(s, req, 200, json_pack("{s:s, s:o}", "path", w->spath, "entries", a));
}

static void get(struct sess *s, uint64_t req, const struct sfile_where *w, const char *query)
{
	int root = al_run_scratch_fd(s->run);
	int fd = open_in(root, w->part, O_RDONLY | O_NONBLOCK);
	struct stat st;

	if (fd < 0)
		return sfile_fail(s, req, w, "read", errno);
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		return sfile_fail(s, req, w, "read", e);
	}
	if (S_ISDIR(st.st_mode))
		return list_dir(s, req, w, fd);
	if (sess_query_flag(query, "list") || !S_ISREG(st.st_mode)) {
		close(fd);
		return sess_error(s, req, 400, "read %s: %s", w->spath,
				  S_ISREG(st.st_mode) ? "?list is for directories"
						      : "not a regular file or directory");
	}
	if ((uint64_t)st.st_size > AL_SERVE_FILE_MAX) {
		close(fd);
		return sess_error(s, req, 413, "read %s: %lld bytes; the file API gives at most %u",
				  w->spath, (long long)st.st_size, AL_SERVE_FILE_MAX);
	}
	char *buf = xmalloc((size_t)st.st_size + 1);
	ssize_t n = 0, k;
	while ((size_t)n < (size_t)st.st_size &&
	       (k = read(fd, buf + n, (size_t)st.st_size - (size_t)n)) > 0)
		n += k;
	close(fd);
	sess_answer_raw(s, req, 200, "application/octet-stream", buf, (size_t)n);
	free(buf);
}

static void put(struct sess *s, uint64_t req, const struct sfile_where *w, const char *query,
		const uint8_t *body, size_t len)
{
	int root = al_run_scratch_fd(s->run);
	bool mkdir_ = sess_query_flag(query, "mkdir");
	int pfd, fd, e = 0;
	struct stat st;

	if (w->is_face)
		return sess_error(s, req, mkdir_ ? 409 : 400, "%s is a scratch face (a directory)",
				  w->spath);
	if (len > AL_SERVE_FILE_MAX)
		return sess_error(s, req, 413, "the file is %zu bytes; at most %u", len,
				  AL_SERVE_FILE_MAX);
	if ((pfd = open_in(root, w->parent, O_PATH | O_DIRECTORY)) < 0)
		return sfile_fail(s, req, w, mkdir_ ? "mkdir" : "write", errno);
	if (mkdir_) {
		e = mkdirat(pfd, w->name, 0755) < 0 ? errno : 0;
		close(pfd);
		if (e)
			return sfile_fail(s, req, w, "mkdir", e);
		return sess_answer(s, req, 201,
				   json_pack("{s:s, s:s}", "path", w->spath, "type", "dir"));
	}
	fd = openat(pfd, w->name, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
	e = errno;
	close(pfd);
	if (fd < 0)
		return sfile_fail(s, req, w, "write", e);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return sfile_fail(s, req, w, "write", S_ISDIR(st.st_mode) ? EISDIR : ENXIO);
	}
	if (ftruncate(fd, 0) < 0 || al_write_all(fd, body, len) < 0)
		e = errno;
	close(fd);
	if (e && e != EAGAIN)
		return sfile_fail(s, req, w, "write", e);
	sess_answer(s, req, 201,
		    json_pack("{s:s, s:s, s:I}", "path", w->spath, "type", "file", "size",
			      (json_int_t)len));
}

static void del(struct sess *s, uint64_t req, const struct sfile_where *w)
{
	int root = al_run_scratch_fd(s->run);
	int pfd, e = 0;

	if (w->is_face)
		return sess_error(s, req, 400, "%s is a scratch face; it cannot be removed",
				  w->spath);
	if ((pfd = open_in(root, w->parent, O_PATH | O_DIRECTORY)) < 0)
		return sfile_fail(s, req, w, "remove", errno);
	if (unlinkat(pfd, w->name, 0) < 0) {
		e = errno;
		if (e == EISDIR || e == EPERM)
			e = unlinkat(pfd, w->name, AT_REMOVEDIR) < 0 ? errno : 0;
	}
	close(pfd);
	if (e)
		return sfile_fail(s, req, w, "remove", e);
	sess_answer(s, req, 200, json_pack("{s:s, s:b}", "path", w->spath, "removed", 1));
}

void sess_files(struct sess *s, uint64_t req, const char *method, const char *rest,
		const char *query, const uint8_t *body, size_t len)
{
	struct sfile_where w = {0};

	if (locate(s, req, rest, &w) != 0)
		return where_clear(&w);
	if (w.by_exec) {
		sfile_by_exec(s, req, method, &w, query, body, len);
		return where_clear(&w);
	}
	/* As the face's owner: the kernel checks what the sandbox's user
	 * may do, and what is made is its own. The process is single
	 * threaded; the ids go back right after. */
	/* Root's supplementary groups would still grant their access (the
	 * kernel checks them beside the fs gid): none but the sandbox's own
	 * group while the operation runs, root's back after. */
	gid_t groups[AL_FILES_GROUPS_MAX];
	int n_groups = getgroups(AL_FILES_GROUPS_MAX, groups);
	if (n_groups < 0 || setgroups(1, &w.gid) < 0) {
		sess_error(s, req, 500, "the file API: dropping the daemon's groups: %s",
			   strerror(errno));
		return where_clear(&w);
	}
	uid_t ouid = (uid_t)setfsuid(w.uid);
	gid_t ogid = (gid_t)setfsgid(w.gid);
	if (!strcmp(method, "GET"))
		get(s, req, &w, query);
	else if (!strcmp(method, "PUT"))
		put(s, req, &w, query, body, len);
	else if (!strcmp(method, "DELETE"))
		del(s, req, &w);
	else
		sess_error(s, req, 405, "files/ takes GET, PUT and DELETE, not %s", method);
	setfsgid(ogid);
	setfsuid(ouid);
	if (setgroups((size_t)n_groups, groups) < 0)
		al_warn("serve: sandbox %s: restoring the daemon's groups: %s", s->id,
			strerror(errno));
	where_clear(&w);
}
