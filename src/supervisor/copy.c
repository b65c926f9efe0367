/* --copy-in and --copy-out (copy.h). Every name is opened relative to an
 * fd of its directory, with O_NOFOLLOW, after an lstat-style look that
 * decides what it is; the fd's own fstat must agree before anything is
 * read. Copy-out runs when every sandbox process is gone, so nothing in the
 * scratch changes under it. */
#include "supervisor/copy.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
/* The low-level SHA-256 (deprecated in OpenSSL 3 in favour of EVP, but
 * kept): EVP would link libcrypto's whole provider machinery into the
 * static binary, whose relocation costs every start about 0.1 ms. */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/sys.h"
#include "audit/audit.h"
#include "core/util.h"

#define COPY_BUF	  (128u << 10)
#define SKIPPED_LISTED	  100u
#define OUT_DIR_MODE_KEEP 0777

static int nospace(struct al_error *err, int e, const char *what, const char *name)
{
	if (e == ENOSPC || e == EDQUOT)
		return al_error_set(err, e,
				    "copying %s into the scratch: the scratch is full at %s (raise "
				    "--scratch)",
				    what, name);
	return al_error_set(err, e, "copying %s into the scratch: %s", what, name);
}

/* Copy in → out; with md, hash what passes. max: refuse (EFBIG) past it. */
static int pump(int in, int out, char *buf, SHA256_CTX *md, uint64_t max, uint64_t *done)
{
	*done = 0;
	for (;;) {
		ssize_t n = read(in, buf, COPY_BUF);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return 0;
		if (*done + (uint64_t)n > max)
			return -EFBIG;
		if (md && SHA256_Update(md, buf, (size_t)n) != 1)
			return -EIO;
		if (al_write_all(out, buf, (size_t)n) < 0)
			return -errno;
		*done += (uint64_t)n;
	}
}

/* ---- in ------------------------------------------------------------------ */

struct in_walk {
	const struct al_copy_owner *own;
	const char *what; /* the copy's host path, for messages */
	char *buf;
	struct al_error *err;
};

static mode_t in_mode(const struct in_walk *w, mode_t mode)
{
	if (w->own->read_only)
		return S_ISDIR(mode) || (mode & 0111) ? 0555 : 0444;
	return mode & 0777;
}

/* What is made in the scratch is made as own's ids (setfsuid): the
 * scratch belongs to the sandbox's user namespace, where the supervisor's
 * own ids (root) may have no mapping and could create nothing. Host files
 * are opened back as ourselves, with our own access. */
static void as_dest(const struct in_walk *w)
{
	if (w->own->uid == (uid_t)-1)
		return;
	setfsgid(w->own->gid);
	setfsuid(w->own->uid);
}

static void as_self(const struct in_walk *w)
{
	if (w->own->uid == (uid_t)-1)
		return;
	setfsuid(w->own->read_uid != (uid_t)-1 ? w->own->read_uid : geteuid());
	setfsgid(w->own->read_gid != (gid_t)-1 ? w->own->read_gid : getegid());
}

static void as_we_were(void)
{
	setfsuid(geteuid());
	setfsgid(getegid());
}

static int in_node(struct in_walk *w, int sfd, const struct stat *st, int ddir, const char *name,
		   bool merge, int depth);

static int in_dir_entries(struct in_walk *w, int sfd, int dfd, int depth)
{
	_cleanup_close_ int list = dup(sfd);
	DIR *d;
	struct dirent *de;
	int r = 0;

	if (list < 0)
		return al_error_set(w->err, errno, "copying %s: dup", w->what);
	if (!(d = fdopendir(list)))
		return al_error_set(w->err, errno, "copying %s: reading a directory", w->what);
	list = -1;
	while (r == 0) {
		errno = 0;
		if (!(de = readdir(d))) {
			if (errno)
				r = al_error_set(w->err, errno, "copying %s: readdir", w->what);
			break;
		}
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		struct stat st;
		int fd = -1, e = 0;
		/* Looked up and opened with our own access; made as own. */
		as_self(w);
		if (fstatat(sfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			e = errno;
		else if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))
			fd = openat(sfd, de->d_name,
				    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC |
					(S_ISDIR(st.st_mode) ? O_DIRECTORY : 0));
		if (fd < 0 && !e && (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)))
			e = errno;
		as_dest(w);
		if (e) {
			r = al_error_set(w->err, e, "copying %s: %s", w->what, de->d_name);
			break;
		}
		if (fd >= 0) {
			struct stat again;
			if (fstat(fd, &again) < 0 || again.st_ino != st.st_ino ||
			    again.st_dev != st.st_dev) {
				close(fd);
				r = al_error_set(w->err, ESTALE,
						 "copying %s: %s changed while copying", w->what,
						 de->d_name);
				break;
			}
		}
		r = in_node(w, fd >= 0 ? fd : sfd, &st, dfd, de->d_name, false, depth + 1);
		if (fd >= 0)
			close(fd);
	}
	closedir(d);
	return r;
}

/* sfd: the open node (a regular file or directory), or for a link its
 * directory (the link is read by name). */
static int in_node(struct in_walk *w, int sfd, const struct stat *st, int ddir, const char *name,
		   bool merge, int depth)
{
	int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
	uint64_t done;
	int r;

	if (depth > AL_COPY_DEPTH_MAX)
		return al_error_set(w->err, ELOOP,
				    "copying %s: the tree is deeper than %d directories", w->what,
				    AL_COPY_DEPTH_MAX);
	if (S_ISLNK(st->st_mode)) {
		as_self(w);
		ssize_t n = readlinkat(sfd, name, w->buf, PATH_MAX);
		int e = errno;
		as_dest(w);
		errno = e;
		if (n < 0 || n >= PATH_MAX)
			return al_error_set(w->err, n < 0 ? errno : ENAMETOOLONG,
					    "copying %s: reading the link %s", w->what, name);
		w->buf[n] = '\0';
		if (symlinkat(w->buf, ddir, name) < 0)
			return nospace(w->err, errno, w->what, name);
		return 0;
	}
	if (S_ISREG(st->st_mode)) {
		if (merge) /* the empty file the backend made for it */
			flags = O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC;
		_cleanup_close_ int out = openat(ddir, name, flags, 0600);
		if (out < 0)
			return nospace(w->err, errno, w->what, name);
		if ((r = pump(sfd, out, w->buf, NULL, UINT64_MAX, &done)) < 0)
			return nospace(w->err, -r, w->what, name);
		if (fchmod(out, in_mode(w, st->st_mode)) < 0)
			return nospace(w->err, errno, w->what, name);
		return 0;
	}
	if (!S_ISDIR(st->st_mode))
		return al_error_set(
		    w->err, EINVAL,
		    "copying %s: %s is not a regular file, directory or symbolic link", w->what,
		    name);
	if (!merge && mkdirat(ddir, name, 0700) < 0) {
		if (errno == EEXIST)
			return al_error_set(
			    w->err, EEXIST,
			    "copying %s: %s is in the scratch already (a mount point, "
			    "or an earlier copy's)",
			    w->what, name);
		return nospace(w->err, errno, w->what, name);
	}
	_cleanup_close_ int dfd =
	    openat(ddir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return nospace(w->err, errno, w->what, name);
	if ((r = in_dir_entries(w, sfd, dfd, depth)) < 0)
		return r;
	if (merge && !w->own->fill)
		return 0; /* a directory of the scratch keeps its own mode */
	if (fchmod(dfd, in_mode(w, st->st_mode) | (w->own->read_only ? 0 : S_IRWXU)) < 0)
		return nospace(w->err, errno, w->what, name);
	return 0;
}

/* Open the directory that will hold part's last component, making the
 * missing ones (0755, owned as own). *last: that component. */
static int in_parent(struct in_walk *w, int root, char *part, const char **last)
{
	int dir = fcntl(root, F_DUPFD_CLOEXEC, 0);
	char *slash = strrchr(part, '/');

	if (dir < 0)
		return al_error_set(w->err, errno, "dup");
	*last = part;
	if (!slash)
		return dir;
	*slash = '\0';
	*last = slash + 1;
	for (char *c = part, *next; c; c = next) {
		next = strchr(c, '/');
		if (next)
			*next++ = '\0';
		if (mkdirat(dir, c, 0755) < 0 && errno != EEXIST) {
			int r = nospace(w->err, errno, w->what, c);
			close(dir);
			return r;
		}
		int sub = openat(dir, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(dir);
		if (sub < 0)
			return al_error_set(w->err, errno, "copying %s: %s", w->what, c);
		dir = sub;
	}
	return dir;
}

int al_copy_in(const char *host, dev_t dev, ino_t ino, int root, const char *part,
	       const struct al_copy_owner *own, struct al_error *err)
{
	struct open_how how = {.flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC,
			       .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
	_cleanup_free_ char *buf = xmalloc(COPY_BUF > PATH_MAX ? COPY_BUF : PATH_MAX + 1);
	_cleanup_free_ char *rel = xstrdup(part);
	struct in_walk w = {.own = own, .what = host, .buf = buf, .err = err};
	_cleanup_close_ int src = -1, parent = -1;
	const char *last = NULL;
	struct stat st;

	src = al_sys_openat2(AT_FDCWD, host, &how, sizeof(how));
	if (src < 0)
		return al_error_set(err, errno, "copying %s: opening it", host);
	if (fstat(src, &st) < 0)
		return al_error_set(err, errno, "copying %s: stat", host);
	if (st.st_dev != dev || st.st_ino != ino)
		return al_error_set(err, ESTALE,
				    "copying %s: it changed between planning and copying", host);
	as_dest(&w);
	parent = in_parent(&w, root, rel, &last);
	if (parent < 0) {
		as_we_were();
		return parent;
	}
	/* A directory may land on an existing one (a face of the scratch, or
	 * an earlier copy's): its entries are added. */
	struct stat there;
	bool merge = fstatat(parent, last, &there, AT_SYMLINK_NOFOLLOW) == 0 &&
		     ((S_ISDIR(st.st_mode) && S_ISDIR(there.st_mode)) ||
		      (own->fill && S_ISREG(st.st_mode) && S_ISREG(there.st_mode)));
	int r = in_node(&w, src, &st, parent, last, merge, 0);
	as_we_were();
	return r;
}

/* ---- out ----------------------------------------------------------------- */

/* What the record lists: every file while the listed paths stay within
 * LISTED_PATH_BYTES (each file is still copied and counted past it); the
 * walk looks at no more than VISIT_FACTOR times the file cap of entries,
 * skipped ones included. */
#define LISTED_PATH_BYTES (4u << 20)
#define VISIT_FACTOR	  10u

struct out_walk {
	const struct al_plan *plan;
	const struct al_copy_out *c;
	struct al_copy_caps *caps;
	json_t *files, *skipped;
	size_t n_files, n_skipped, n_unlisted, listed_bytes;
	size_t n_existing, n_replaced; /* names the host had already */
	uint64_t bytes, visits_left;
	mode_t umask;	  /* ours, applied to what lands on the host */
	const char *stop; /* why the walk stopped early */
	char *error;	  /* a host-side failure: the copy-out ends there */
	char *buf;
	char path[PATH_MAX]; /* the current node's sandbox path */
};

/* Where the current node lands on the host: HOSTDIR/NAME for a file
 * copied out alone, HOSTDIR plus its path below the copy's otherwise. */
static char *host_path(const struct out_walk *w)
{
	size_t len = strlen(w->c->path);
	const char *rest = strcmp(w->path, w->c->path) == 0 ? strrchr(w->path, '/') : w->path + len;
	return xasprintf("%s%s", w->c->hostdir, rest);
}

static void skip(struct out_walk *w, const char *why)
{
	if (w->n_skipped++ >= SKIPPED_LISTED)
		return;
	_cleanup_free_ char *host = host_path(w);
	json_array_append_new(w->skipped,
			      json_pack("{s:o, s:o, s:s}", "path", al_json_text(w->path), "host",
					al_json_text(host), "why", why));
}

/* A name the host has already, not replaced: counted, for the exit status. */
static void skip_existing(struct out_walk *w, const char *why)
{
	w->n_existing++;
	skip(w, why);
}

/* With --copy-out-replace, whether name in hdir may be replaced (a regular
 * file of ours) or merged into (a directory of ours, dir): never a link,
 * never someone else's. Sets *none when nothing is there. */
static bool ours(int hdir, const char *name, bool dir, bool *none)
{
	struct stat st;

	if (fstatat(hdir, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		*none = errno == ENOENT;
		return false; /* any other error: not known to be ours */
	}
	*none = false;
	return st.st_uid == geteuid() && (dir ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode));
}

static void host_error(struct out_walk *w, int e, const char *what)
{
	if (!w->error)
		w->error = xasprintf("%s: %s: %s", w->path, what, strerror(e));
}

static bool is_mount_point(const struct out_walk *w)
{
	for (size_t i = 0; i < w->plan->n_fs; i++)
		if (w->plan->fs[i].kind == AL_FS_HOST && strcmp(w->plan->fs[i].path, w->path) == 0)
			return true;
	return false;
}

static bool counted(struct out_walk *w)
{
	if (w->caps->files == 0) {
		w->stop = "the file-count cap";
		return false;
	}
	w->caps->files--;
	return true;
}

static void hex(const unsigned char *md, unsigned n, char *out)
{
	for (unsigned i = 0; i < n; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
}

static void listed(struct out_walk *w, uint64_t size, const char *sum)
{
	size_t len = strlen(w->path);

	w->n_files++;
	if (w->listed_bytes + len > LISTED_PATH_BYTES) {
		w->n_unlisted++;
		return;
	}
	w->listed_bytes += len;
	json_array_append_new(w->files, json_pack("{s:o, s:I, s:s}", "path", al_json_text(w->path),
						  "size", (json_int_t)size, "sha256", sum));
}

/* A regular file of the scratch (open as in) to a new name in hdir: never
 * over an existing entry, without exec bits, mode set once it is whole. */
static void out_file(struct out_walk *w, int in, const struct stat *st, int hdir, const char *name)
{
	char tmp[32], sum[2 * SHA256_DIGEST_LENGTH + 1];
	unsigned char md[SHA256_DIGEST_LENGTH];
	SHA256_CTX ctx;
	uint64_t done = 0;
	int out, r;

	if ((uint64_t)st->st_size > w->caps->bytes) {
		skip(w, "over the size cap");
		return;
	}
	if (!counted(w))
		return;
	al_random_id(tmp + 9, sizeof(tmp) - 9);
	memcpy(tmp, ".airlock-", 9);
	out = openat(hdir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0) {
		host_error(w, errno, "creating it on the host");
		return;
	}
	if (SHA256_Init(&ctx) != 1)
		r = -EIO;
	else
		r = pump(in, out, w->buf, &ctx, w->caps->bytes, &done);
	if (r == 0 && SHA256_Final(md, &ctx) != 1)
		r = -EIO;
	/* The sandbox's mode without exec bits (and readable and writable by
	 * us): nothing it made runs on the host by being copied out. */
	if (r == 0 &&
	    fchmod(out, (st->st_mode & 0666 & ~(w->umask | S_IWOTH)) | S_IRUSR | S_IWUSR) < 0)
		r = -errno;
	if (close(out) < 0 && r == 0)
		r = -errno;
	bool none = true,
	     replace = r == 0 && w->plan->copy_out_replace && ours(hdir, name, false, &none);
	/* A regular file of ours, with --copy-out-replace: renamed over (the
	 * name's entry is replaced, never followed). */
	if (replace && renameat(hdir, tmp, hdir, name) < 0)
		r = -errno;
	else if (replace)
		w->n_replaced++;
	if (r == 0 && !replace && renameat2(hdir, tmp, hdir, name, RENAME_NOREPLACE) < 0) {
		r = -errno;
		/* Filesystems without rename flags (NFS, 9p, some FUSE): a
		 * hard link is as atomic and as unwilling to replace. */
		if ((r == -EINVAL || r == -ENOSYS) && linkat(hdir, tmp, hdir, name, 0) == 0)
			r = 0;
		else if (r == -EINVAL || r == -ENOSYS)
			r = errno == EEXIST ? -EEXIST : -errno;
		unlinkat(hdir, tmp, 0);
	}
	if (r < 0) {
		unlinkat(hdir, tmp, 0);
		w->caps->files++;
		if (r == -EFBIG)
			skip(w, "over the size cap");
		else if (r == -EEXIST && w->plan->copy_out_replace)
			skip_existing(w, "exists on the host and is not a regular file of yours "
					 "(never replaced)");
		else if (r == -EEXIST)
			skip_existing(w, "exists on the host (never replaced)");
		else
			host_error(w, -r, "copying it to the host");
		return;
	}
	w->caps->bytes -= done;
	w->bytes += done;
	hex(md, SHA256_DIGEST_LENGTH, sum);
	listed(w, done, sum);
}

static void out_dir(struct out_walk *w, int sfd, int hdir, int depth);

/* A directory of the scratch (open as sub) to a new directory name in
 * hdir; an existing one only with --copy-out-replace and when it is ours
 * (its mode then stays as it is). */
static void out_subdir(struct out_walk *w, int sub, const struct stat *st, int hdir,
		       const char *name, int depth)
{
	bool made = mkdirat(hdir, name, 0700) == 0, none;

	if (!made && errno != EEXIST) {
		host_error(w, errno, "making it on the host");
		return;
	}
	if (!made && !w->plan->copy_out_replace) {
		skip_existing(w, "exists on the host (never merged into)");
		return;
	}
	if (!made && !ours(hdir, name, true, &none)) {
		skip_existing(w, "exists on the host and is not a directory of yours (never "
				 "merged into)");
		return;
	}
	int hsub = openat(hdir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (hsub < 0) {
		host_error(w, errno, "opening it on the host");
		return;
	}
	/* Merged into, judged by what was opened: yours, not writable by
	 * others (as the directory named to --copy-out must be), on the
	 * same file system (no mount below it is crossed). */
	struct stat hs, ps;
	if (!made && (fstat(hsub, &hs) < 0 || fstat(hdir, &ps) < 0 || hs.st_uid != geteuid() ||
		      (hs.st_mode & (S_IWGRP | S_IWOTH)) || hs.st_dev != ps.st_dev)) {
		close(hsub);
		skip_existing(w, "exists on the host and is not a directory only you may write, "
				 "on the same file system (never merged into)");
		return;
	}
	out_dir(w, sub, hsub, depth + 1);
	if (made)
		fchmod(hsub, (st->st_mode & 0777 & ~(w->umask | S_IWOTH)) | S_IRWXU);
	close(hsub);
}

static void out_entry(struct out_walk *w, int sdir, const char *name, int hdir, int depth)
{
	size_t len = strlen(w->path);
	struct stat st;

	if (w->visits_left == 0) {
		w->stop = "the entry cap";
		return;
	}
	w->visits_left--;
	if (snprintf(w->path + len, sizeof(w->path) - len, "%s%s",
		     len && w->path[len - 1] == '/' ? "" : "/",
		     name) >= (int)(sizeof(w->path) - len)) {
		w->path[len] = '\0';
		skip(w, "its path is too long");
		return;
	}
	if (is_mount_point(w)) {
		skip(w, "a mount point");
	} else if (strcasecmp(name, ".git") == 0) {
		/* Its config (core.fsmonitor, aliases, hooks) runs commands on
		 * the host the first time someone runs git there. */
		skip(w, "a git directory (its config can run commands)");
	} else if (fstatat(sdir, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		skip(w, "cannot be read");
	} else if (S_ISLNK(st.st_mode)) {
		skip(w, "a symbolic link (never followed)");
	} else if (S_ISDIR(st.st_mode)) {
		if (depth >= AL_COPY_DEPTH_MAX) {
			skip(w, "deeper than the depth cap");
		} else if (counted(w)) {
			int sub =
			    openat(sdir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub < 0) {
				skip(w, "cannot be read");
			} else {
				out_subdir(w, sub, &st, hdir, name, depth);
			}
			if (sub >= 0)
				close(sub);
		}
	} else if (S_ISREG(st.st_mode)) {
		int in =
		    openat(sdir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
		struct stat again;
		if (in < 0 || fstat(in, &again) < 0 || again.st_ino != st.st_ino)
			skip(w, "cannot be read");
		else
			out_file(w, in, &again, hdir, name);
		if (in >= 0)
			close(in);
	} else {
		skip(w, "not a regular file or directory");
	}
	w->path[len] = '\0';
}

static void out_dir(struct out_walk *w, int sfd, int hdir, int depth)
{
	int list = dup(sfd);
	DIR *d = list >= 0 ? fdopendir(list) : NULL;
	struct dirent *de;

	if (!d) {
		if (list >= 0)
			close(list);
		skip(w, "cannot be read");
		return;
	}
	while (!w->stop && !w->error && (de = readdir(d)))
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
			out_entry(w, sfd, de->d_name, hdir, depth);
	closedir(d);
}

int al_copy_open_hostdir(const char *path, struct al_error *err)
{
	struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
			       .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
	_cleanup_free_ char *parent = xstrdup(path);
	char *slash = strrchr(parent, '/');
	const char *base = slash + 1;
	_cleanup_close_ int pfd = -1;
	struct stat st;
	int fd;

	if (slash == parent)
		slash[1] = '\0';
	else
		*slash = '\0';
	pfd = al_sys_openat2(AT_FDCWD, parent, &how, sizeof(how));
	if (pfd < 0)
		return al_error_setsys(
		    err, errno, "opening %s without following a symbolic link on the way", parent);
	if (*base && mkdirat(pfd, base, 0755) < 0 && errno != EEXIST)
		return al_error_setsys(err, errno, "making %s", path);
	fd = *base ? openat(pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
		   : openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return al_error_setsys(err, errno, "opening %s (no symbolic link)", path);
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		return al_error_setsys(err, e, "stat %s", path);
	}
	/* Someone else's, or open to others: what lands there could be
	 * swapped or read by them. */
	if ((st.st_uid != geteuid() && st.st_uid != 0) || (st.st_mode & S_IWOTH)) {
		close(fd);
		return al_error_set(err, EPERM,
				    "%s (owner %u, mode %04o) must belong to you or root and not "
				    "be writable by others",
				    path, (unsigned)st.st_uid, st.st_mode & 07777);
	}
	return fd;
}

json_t *al_copy_out(int root, const struct al_plan *plan, const struct al_copy_out *c, int hdir,
		    struct al_copy_caps *caps)
{
	struct open_how how = {.flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC,
			       .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
					  RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV};
	_cleanup_free_ char *buf = xmalloc(COPY_BUF);
	struct out_walk w = {.plan = plan, .c = c, .caps = caps, .buf = buf};
	_cleanup_close_ int src = -1;
	bool missing = false;
	struct stat st;

	w.visits_left = caps->files * VISIT_FACTOR;
	w.umask = al_umask_get();
	w.files = json_array();
	w.skipped = json_array();
	snprintf(w.path, sizeof(w.path), "%s", c->path);
	src = root >= 0 ? al_sys_openat2(root, c->part, &how, sizeof(how)) : (errno = EBADF, -1);
	if (src < 0 && errno == ENOENT) {
		missing = true;
	} else if (src < 0 || fstat(src, &st) < 0) {
		int e = errno;
		al_debug("copy-out %s: %s", c->path, strerror(e));
		skip(&w, e == ELOOP ? "a symbolic link (never followed)" : "cannot be read");
	} else if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
		skip(&w, "not a regular file or directory");
	} else if (S_ISDIR(st.st_mode)) {
		out_dir(&w, src, hdir, 0); /* HOSTDIR stands for it: not counted */
	} else {
		out_file(&w, src, &st, hdir, strrchr(c->path, '/') + 1);
	}
	json_t *o =
	    json_pack("{s:o, s:o, s:b, s:o, s:I, s:I, s:I, s:o, s:I, s:I, s:I, s:o, s:o}", "path",
		      al_json_text(c->path), "host", al_json_text(c->hostdir), "missing", missing,
		      "files", w.files, "files_count", (json_int_t)w.n_files, "files_unlisted",
		      (json_int_t)w.n_unlisted, "bytes", (json_int_t)w.bytes, "skipped", w.skipped,
		      "skipped_count", (json_int_t)w.n_skipped, "existing_count",
		      (json_int_t)w.n_existing, "replaced_count", (json_int_t)w.n_replaced,
		      "stopped", w.stop ? json_string(w.stop) : json_null(), "error",
		      w.error ? al_json_text(w.error) : json_null());
	free(w.error);
	return o;
}

/* Names the sandbox chose, for a terminal: printable ASCII only. */
static const char *printable(char *buf)
{
	for (char *c = buf; *c; c++)
		if ((unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e)
			*c = '?';
	return buf;
}

size_t al_copy_out_existing(const json_t *report)
{
	return (size_t)json_integer_value(json_object_get(report, "existing_count"));
}

static bool is_existing(const json_t *entry)
{
	const char *why = json_string_value(json_object_get(entry, "why"));
	return why && strncmp(why, "exists on the host", 18) == 0;
}

const char *al_copy_out_existing_line(const json_t *report, size_t i, char *buf, size_t len)
{
	const json_t *skipped = json_object_get(report, "skipped"), *e;
	size_t listed = 0, n = al_copy_out_existing(report), k;

	json_array_foreach(skipped, k, e)
	{
		if (!is_existing(e))
			continue;
		if (listed++ == i) {
			snprintf(buf, len, "copy-out: %s not copied: %s %s%s",
				 json_string_value(json_object_get(e, "path")),
				 json_string_value(json_object_get(e, "host")),
				 json_string_value(json_object_get(e, "why")),
				 strstr(json_string_value(json_object_get(e, "why")), "of yours")
				     ? ""
				     : "; --copy-out-replace replaces your own files and merges "
				       "into your own directories");
			return printable(buf);
		}
	}
	if (i != listed || n <= listed)
		return NULL;
	snprintf(buf, len,
		 "copy-out %s: %zu more not copied because the host has them (not listed)",
		 json_string_value(json_object_get(report, "path")), n - listed);
	return printable(buf);
}

const char *al_copy_out_summary(const json_t *report, bool verbose, char *buf, size_t len)
{
	const json_t *skipped = json_object_get(report, "skipped");
	json_int_t n_skipped = json_integer_value(json_object_get(report, "skipped_count"));
	const char *stopped = json_string_value(json_object_get(report, "stopped"));
	const char *error = json_string_value(json_object_get(report, "error"));
	const char *path = json_string_value(json_object_get(report, "path"));
	json_int_t n = json_integer_value(json_object_get(report, "files_count"));
	int used;

	if (!verbose && !n_skipped && !stopped && !error)
		return NULL;
	if (json_is_true(json_object_get(report, "missing"))) {
		used = snprintf(buf, len, "copy-out %s: nothing there at the end", path);
	} else {
		used =
		    snprintf(buf, len, "copy-out %s: %" PRId64 " file%s, %" PRId64 " bytes to %s",
			     path, (int64_t)n, n == 1 ? "" : "s",
			     (int64_t)json_integer_value(json_object_get(report, "bytes")),
			     json_string_value(json_object_get(report, "host")));
		if (used > 0 && (size_t)used < len && n_skipped) {
			const json_t *first = json_array_get(skipped, 0);
			used += snprintf(
			    buf + used, len - (size_t)used, "; skipped %" PRId64 " (first: %s, %s)",
			    (int64_t)n_skipped, json_string_value(json_object_get(first, "path")),
			    json_string_value(json_object_get(first, "why")));
		}
		if (used > 0 && (size_t)used < len && stopped)
			used +=
			    snprintf(buf + used, len - (size_t)used, "; stopped at %s", stopped);
		if (used > 0 && (size_t)used < len && error)
			snprintf(buf + used, len - (size_t)used, "; failed: %s", error);
	}
	return printable(buf);
}
