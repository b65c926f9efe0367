/* --copy-in and --copy-out in the plan: each sandbox path in a scratch
 * face and in no mount, each host path resolved and checked (a copy-out
 * never into a --rw input the sandbox could change), every error kept. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "policy/plan-internal.h"

/* The scratch face path is in, as a path relative to the scratch's root
 * ("work/out"), or NULL; *face: path is the face itself. */
static char *scratch_part(const struct al_plan *p, const char *path, bool *face)
{
	for (size_t i = 0; i < p->n_fs; i++) {
		const struct al_fs_entry *e = &p->fs[i];
		if (e->kind != AL_FS_SCRATCH || !al_path_is_under(path, e->path))
			continue;
		*face = strcmp(path, e->path) == 0;
		return xasprintf("%s%s", e->source, path + strlen(e->path));
	}
	return NULL;
}

/* A copy's sandbox path: in a scratch face, not in a mount. */
static int copy_part(const struct al_plan *p, const char *origin, const char *path, bool *face,
		     char **part, struct al_error *err)
{
	if (!al_path_is_clean_absolute(path))
		return al_error_set(err, EINVAL,
				    "%s: sandbox path \"%s\" is not a clean absolute path", origin,
				    path);
	for (size_t i = 0; i < p->n_fs; i++)
		if (p->fs[i].kind == AL_FS_HOST && al_path_is_under(path, p->fs[i].path))
			return al_error_set(err, EINVAL,
					    "%s: %s lies in the host mount %s, not in the scratch",
					    origin, path, p->fs[i].path);
	*part = scratch_part(p, path, face);
	if (!*part)
		return al_error_set(
		    err, EINVAL, "%s: %s is not in the scratch (the workdir %s, /tmp or /dev/shm)",
		    origin, path, p->workdir);
	return 0;
}

static int copy_in(struct al_plan *p, const struct al_policy_copy *c, struct al_error *err)
{
	_cleanup_free_ char *part = NULL;
	char real[PATH_MAX];
	struct stat st;
	bool face;
	int r;

	if ((r = copy_part(p, c->origin, c->path, &face, &part, err)) < 0)
		return r;
	if (!realpath(c->host, real))
		return al_error_setsys(err, errno, "%s: %s", c->origin, c->host);
	if (stat(real, &st) < 0)
		return al_error_setsys(err, errno, "%s: %s", c->origin, real);
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
		return al_error_set(err, EINVAL, "%s: %s is neither a regular file nor a directory",
				    c->origin, real);
	if (face && !S_ISDIR(st.st_mode))
		return al_error_set(err, EINVAL,
				    "%s: %s is a directory of the scratch; copy a file to a path "
				    "inside it",
				    c->origin, c->path);
	for (size_t j = 0; j < p->n_copy_in; j++)
		if (strcmp(p->copy_in[j].path, c->path) == 0)
			return al_error_set(err, EINVAL, "%s: %s is copied in twice (also by %s)",
					    c->origin, c->path, p->copy_in[j].origin);
	p->copy_in = xrealloc(p->copy_in, (p->n_copy_in + 1) * sizeof(*p->copy_in));
	p->copy_in[p->n_copy_in++] = (struct al_copy_in){
	    .host = xstrdup(real),
	    .path = xstrdup(c->path),
	    .part = TAKE_PTR(part),
	    .dir = S_ISDIR(st.st_mode),
	    .dev = st.st_dev,
	    .ino = st.st_ino,
	    .nlink = st.st_nlink,
	    .origin = xstrdup(c->origin),
	};
	return 0;
}

static int copy_out(struct al_plan *p, const struct al_policy_copy *c, struct al_error *err)
{
	_cleanup_free_ char *part = NULL, *parent = xstrdup(c->host);
	char real[PATH_MAX];
	struct stat st;
	bool face;
	int r;

	if ((r = copy_part(p, c->origin, c->path, &face, &part, err)) < 0)
		return r;
	bool exists = stat(c->host, &st) == 0;
	if (exists) {
		if (!S_ISDIR(st.st_mode))
			return al_error_set(err, ENOTDIR, "%s: %s exists and is not a directory",
					    c->origin, c->host);
		if (!realpath(c->host, real))
			return al_error_setsys(err, errno, "%s: %s", c->origin, c->host);
	} else if (errno != ENOENT) {
		return al_error_setsys(err, errno, "%s: %s", c->origin, c->host);
	} else {
		char *slash = strrchr(parent, '/');
		if (slash == parent)
			slash[1] = '\0';
		else
			*slash = '\0';
		if (!realpath(parent, real) || stat(real, &st) < 0 || !S_ISDIR(st.st_mode))
			return al_error_set(err, ENOENT,
					    "%s: %s does not exist and neither does its parent "
					    "directory %s",
					    c->origin, c->host, parent);
	}
	/* Where the sandbox can write during the run, it could swap the
	 * directory (or one above it) for a link before copy-out. */
	for (size_t i = 0; i < p->n_fs; i++)
		if (p->fs[i].kind == AL_FS_HOST && (p->fs[i].access & AL_FS_WRITE) &&
		    al_path_is_under(real, p->fs[i].source))
			return al_error_set(
			    err, EINVAL,
			    "%s: %s lies in the --rw input %s, which the sandbox can "
			    "change during the run; copy out elsewhere",
			    c->origin, c->host, p->fs[i].source);
	p->copy_out = xrealloc(p->copy_out, (p->n_copy_out + 1) * sizeof(*p->copy_out));
	const char *base = strrchr(c->host, '/') + 1;
	p->copy_out[p->n_copy_out++] = (struct al_copy_out){
	    .path = xstrdup(c->path),
	    .part = TAKE_PTR(part),
	    .hostdir = xstrdup(c->host),
	    .hostreal = exists ? xstrdup(real)
			       : xasprintf("%s%s%s", real, strcmp(real, "/") ? "/" : "", base),
	    .origin = xstrdup(c->origin),
	};
	return 0;
}

void al_plan_build_copies(struct al_plan *p, const struct al_policy *pol, struct al_errors *errs)
{
	p->copy_out_bytes = pol->copy_out_bytes ? pol->copy_out_bytes : p->scratch_bytes;
	p->copy_out_files = pol->copy_out_files ? pol->copy_out_files : AL_DEFAULT_COPY_OUT_FILES;
	p->copy_out_replace = pol->copy_out_replace;
	for (size_t i = 0; i < pol->n_copy_in + pol->n_copy_out; i++) {
		struct al_error err = {0};
		bool in = i < pol->n_copy_in;
		const struct al_policy_copy *c =
		    in ? &pol->copy_in[i] : &pol->copy_out[i - pol->n_copy_in];
		if ((in ? copy_in(p, c, &err) : copy_out(p, c, &err)) < 0)
			al_errors_add_error(errs, &err);
	}
}
