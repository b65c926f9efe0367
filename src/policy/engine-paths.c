/* The policy engine's host-path checks (engine.h): every host path the
 * plan shows or copies, by the path it resolved to (no link left in it)
 * and its device and inode, against the profile's filesystem bounds. */
#include "policy/engine.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "policy/engine-internal.h"

/* The never path that real (with identity dev/ino when have_id) shows or
 * lies inside, or NULL. */
static const struct al_op_path *never_hit(const struct al_op_profile *pr, const char *real,
					  bool have_id, dev_t dev, ino_t ino, bool *inside)
{
	for (size_t i = 0; i < pr->n_never; i++) {
		const struct al_op_path *n = &pr->never[i];
		if (al_path_is_under(real, n->real) ||
		    (have_id && n->exists && n->dev == dev && n->ino == ino)) {
			*inside = true;
			return n;
		}
		if (al_path_is_under(n->real, real)) {
			*inside = false;
			return n;
		}
	}
	return NULL;
}

/* The first prefix of v[0..n) that real lies under, or NULL. */
static const struct al_op_path *prefix_hit(const struct al_op_path *v, size_t n, const char *real)
{
	for (size_t i = 0; i < n; i++)
		if (al_path_is_under(real, v[i].real))
			return &v[i];
	return NULL;
}

static char *prefixes_text(const struct al_op_path *v, size_t n, const struct al_op_path *w,
			   size_t m)
{
	char **list = NULL, *s;

	for (size_t i = 0; i < n; i++)
		al_strv_push(&list, v[i].path);
	for (size_t i = 0; i < m; i++)
		al_strv_push(&list, w[i].path);
	s = al_strv_join(list, ", ");
	al_strv_free(list);
	return s;
}

/* One host path: read (ro prefixes or rw) or write (rw only), not a never
 * path. what is the decision's name ("mount /data"), ref the task's (NULL:
 * airlock's own default system directories). Returns whether it refused. */
static bool check_path(struct al_decision *d, const char *ref, const char *what, const char *real,
		       bool have_id, dev_t dev, ino_t ino, bool write, bool system_ok)
{
	const struct al_op_profile *pr = d->profile;
	const struct al_op_path *n, *by;
	bool inside = false;

	bool builtin = !ref;

	if (builtin)
		ref = "filesystem.system (airlock's default)";
	if ((n = never_hit(pr, real, have_id, dev, ino, &inside))) {
		engine_refuse(d, ref, real, n->path, xstrdup(n->where),
			      inside ? "%s: %s is, or lies inside, %s, which the operator never "
				       "allows"
				     : "%s: %s would show %s, which the operator never allows",
			      ref, real, n->path);
		return true;
	}
	if (system_ok) {
		/* The bound is the profile's filesystem.system only when it
		 * has one; else airlock's own list (no path of the file). */
		engine_explain(
		    d, what, real, builtin ? AL_FROM_BUILTIN : AL_FROM_TASK, builtin ? NULL : ref,
		    pr->system ? engine_bound(d, "%s.filesystem.system", pr->where) : NULL);
		return false;
	}
	by = prefix_hit(pr->rw, pr->n_rw, real);
	if (!by && !write)
		by = prefix_hit(pr->ro, pr->n_ro, real);
	if (!by) {
		_cleanup_free_ char *list = write
						? prefixes_text(pr->rw, pr->n_rw, NULL, 0)
						: prefixes_text(pr->ro, pr->n_ro, pr->rw, pr->n_rw);
		engine_refuse(d, ref, real, list,
			      engine_path(pr, write ? "filesystem.rw" : "filesystem.ro"),
			      "%s: %s is not under a path the operator lets a task %s (%s)", ref,
			      real, write ? "write" : "read", list[0] ? list : "none");
		return true;
	}
	engine_explain(d, what, real, AL_FROM_TASK, ref,
		       engine_bound(d, "%s (%s)", by->where, by->path));
	return false;
}

/* A single file with other hard links: its other names cannot be checked
 * (the kernel gives no way from an inode to its names), and one may lie
 * inside a never path (a link to a file below a never directory has an
 * identity no never path has). Refused where the profile has never paths,
 * unless the operator allows linked files. Directories are not judged
 * here: a link to a never file inside a shown directory is the documented
 * caveat. */
static void check_links(struct al_decision *d, const char *ref, const char *real, bool dir,
			nlink_t nlink)
{
	const struct al_op_profile *pr = d->profile;

	if (dir || nlink <= 1 || pr->n_never == 0 || pr->linked_files)
		return;
	engine_refuse(d, ref, real, "one link", engine_path(pr, "filesystem.linked_files"),
		      "%s: %s has %lu hard links, and their other names cannot be checked "
		      "against the paths the operator never allows (copy the file instead, "
		      "or the operator may set \"linked_files\": true in the profile's "
		      "filesystem)",
		      ref, real, (unsigned long)nlink);
}

static const struct al_policy_mount *task_mount(const struct al_policy *task, const char *path)
{
	for (size_t i = 0; i < task->n_mounts; i++)
		if (strcmp(task->mounts[i].path, path) == 0)
			return &task->mounts[i];
	return NULL;
}

/* A system directory the task named (or airlock's default list): in the
 * profile's system list, else a read-only path like any other. */
static bool system_listed(const struct al_op_profile *pr, const char *path, char *const *defaults)
{
	char *const *list = pr->system ? pr->system : defaults;
	for (size_t i = 0; list && list[i]; i++)
		if (strcmp(list[i], path) == 0)
			return true;
	return false;
}

int al_engine_plan(struct al_decision *d, const struct al_policy *task, const struct al_plan *plan)
{
	const struct al_op_profile *pr = d->profile;
	size_t before = d->n_refused + d->omitted;

	if (!pr)
		return -EPERM;
	/* Asked again for a plan built again (after the decider narrowed
	 * the task): the earlier plan's decisions go, the decider's (made
	 * after them) stay. */
	if (d->planned) {
		for (size_t i = d->plan_mark; i < d->plan_end; i++)
			engine_explain_clear(&d->explain[i]);
		memmove(&d->explain[d->plan_mark], &d->explain[d->plan_end],
			(d->n_explain - d->plan_end) * sizeof(*d->explain));
		d->n_explain -= d->plan_end - d->plan_mark;
	}
	d->planned = true;
	d->plan_mark = d->n_explain;
	for (size_t i = 0; i < plan->n_fs; i++) {
		const struct al_fs_entry *e = &plan->fs[i];
		const struct al_policy_mount *m;
		const struct al_op_path *n;
		bool inside;
		m = e->kind == AL_FS_HOST ? task_mount(task, e->path) : NULL;
		if (plan->root && e->kind == AL_FS_HOST && strcmp(e->path, "/") == 0) {
			/* A container's root is the task's as a mount is: the
			 * profile's paths bound it (rw unless read-only). */
			check_path(d, "config.json: root.path", "root /", e->source, true, e->dev,
				   e->ino, (e->access & AL_FS_WRITE) != 0, false);
			continue;
		}
		if (e->kind == AL_FS_DEVICE ||
		    (e->kind == AL_FS_HOST && strncmp(e->what, "system ", 7) != 0 &&
		     (!m || m->own))) {
			/* airlock's own (/etc/ld.so.cache, /dev/null): no prefix
			 * bounds them, but a never path still does. */
			if ((n = never_hit(pr, e->source, true, e->dev, e->ino, &inside)))
				engine_refuse(d, e->what, e->source, n->path, xstrdup(n->where),
					      "airlock shows %s at %s in every run, but the "
					      "operator never allows %s",
					      e->source, e->path, n->path);
			continue;
		}
		if (e->kind != AL_FS_HOST)
			continue;
		if (strncmp(e->what, "system ", 7) == 0) {
			_cleanup_free_ char *ref = NULL, *what = xasprintf("system %s", e->path);
			size_t k = 0;
			while (task->system && task->system[k] && strcmp(task->system[k], e->path))
				k++;
			/* NULL: airlock's own list (check_path names it so). */
			if (task->system)
				ref = xasprintf("%s: filesystem.system[%zu]", task->source, k);
			check_path(
			    d, ref, what, e->source, true, e->dev, e->ino, false,
			    system_listed(pr, e->path, (char *const *)al_plan_default_system));
			continue;
		}
		_cleanup_free_ char *what = xasprintf("mount %s", e->path);
		/* A link the never paths already refused is not judged twice. */
		if (!check_path(d, m->origin, what, e->source, true, e->dev, e->ino,
				(e->access & AL_FS_WRITE) != 0, false))
			check_links(d, m->origin, e->source, e->dir, e->nlink);
	}
	for (size_t i = 0; i < plan->n_copy_in; i++) {
		const struct al_copy_in *c = &plan->copy_in[i];
		_cleanup_free_ char *what = xasprintf("copy-in %s", c->path);
		if (!check_path(d, c->origin, what, c->host, true, c->dev, c->ino, false, false))
			check_links(d, c->origin, c->host, c->dir, c->nlink);
	}
	for (size_t i = 0; i < plan->n_copy_out; i++) {
		const struct al_copy_out *c = &plan->copy_out[i];
		_cleanup_free_ char *what = xasprintf("copy-out %s", c->path);
		check_path(d, c->origin, what, c->hostreal ? c->hostreal : c->hostdir, false, 0, 0,
			   true, false);
	}
	d->plan_end = d->n_explain;
	if (d->n_refused + d->omitted > before)
		return -EPERM;
	return 0;
}
