/* The end of a run's cgroups: kill what is in them, remove them, and
 * remove what a killed airlock left behind. */
#include "cgroup/cgroup.h"
#include "cgroup/internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/sys.h"
#include "core/util.h"

static int cmp_pid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
	return (x > y) - (x < y);
}

/* The pids listed in dir's cgroup.procs, sorted; *n of them (0 when it
 * cannot be read). */
static pid_t *read_procs(const char *dir, size_t *n)
{
	_cleanup_free_ char *path = xasprintf("%s/cgroup.procs", dir);
	_cleanup_fclose_ FILE *f = fopen(path, "re");
	pid_t *pids = NULL;
	size_t cap = 0;
	long pid;

	*n = 0;
	while (f && fscanf(f, "%ld", &pid) == 1) {
		if (pid <= 1)
			continue;
		if (*n == cap)
			pids = xrealloc(pids, (cap = cap ? 2 * cap : 64) * sizeof(*pids));
		pids[(*n)++] = (pid_t)pid;
	}
	if (*n)
		qsort(pids, *n, sizeof(*pids), cmp_pid);
	return pids;
}

/* A child cgroup airlock makes in a run's: a session's init leaf, an
 * exec's "exec-N". At a caller's path, only those are the run's: any
 * other child was made by someone else (another runtime's container). */
static bool own_child(const char *name)
{
	const char *n = name + strlen("exec-");

	if (strcmp(name, AL_CG_INIT_LEAF) == 0)
		return true;
	return strncmp(name, "exec-", strlen("exec-")) == 0 && *n &&
	       strspn(n, "0123456789") == strlen(n);
}

/* dir's pids and those of the cgroups below it (an exec's), appended;
 * own_only: of dir's children, only airlock's own (own_child). */
static void procs_below(const char *dir, int depth, bool own_only, pid_t **pids, size_t *n)
{
	size_t k;
	_cleanup_free_ pid_t *here = read_procs(dir, &k);
	DIR *d;
	struct dirent *de;

	if (k) {
		*pids = xrealloc(*pids, (*n + k) * sizeof(**pids));
		memcpy(*pids + *n, here, k * sizeof(*here));
		*n += k;
	}
	if (depth >= 4 || !(d = opendir(dir)))
		return;
	while ((de = readdir(d)))
		if (de->d_type == DT_DIR && de->d_name[0] != '.' &&
		    (!own_only || own_child(de->d_name))) {
			_cleanup_free_ char *sub = xasprintf("%s/%s", dir, de->d_name);
			procs_below(sub, depth + 1, false, pids, n);
		}
	closedir(d);
}

int al_cgroup_pids(const struct al_cgroup *cg, pid_t **ret, size_t *n)
{
	const char *dir = cg ? al_cgroup_path(cg, "pids") : NULL;

	*ret = NULL;
	*n = 0;
	if (!dir)
		return -ENOENT;
	procs_below(dir, 0, cg->h[0].mount != NULL, ret, n);
	if (*n)
		qsort(*ret, *n, sizeof(**ret), cmp_pid);
	return 0;
}

/* SIGKILL every process in a v1 cgroup (no cgroup.kill there). By pidfd,
 * and only for pids still listed after their pidfd was opened: a pid that
 * had exited and been reused by a process outside the cgroup is not
 * listed then, so a recycled pid is never hit. In batches, so the pidfds
 * open at once stay few. */
static void kill_listed(const char *dir)
{
	enum {
		BATCH = 128
	};
	size_t n, k;
	_cleanup_free_ pid_t *pids = read_procs(dir, &n);
	int fds[BATCH];

	for (size_t off = 0; off < n; off += BATCH) {
		size_t len = n - off < BATCH ? n - off : BATCH;
		for (size_t i = 0; i < len; i++)
			fds[i] = al_sys_pidfd_open(pids[off + i], 0);
		_cleanup_free_ pid_t *now = read_procs(dir, &k);
		for (size_t i = 0; i < len; i++) {
			if (fds[i] < 0)
				continue;
			if (k && bsearch(&pids[off + i], now, k, sizeof(*now), cmp_pid))
				al_sys_pidfd_send_signal(fds[i], SIGKILL);
			close(fds[i]);
		}
	}
}

/* Calls fn for each child cgroup of dir (a session's exec-N), one level
 * down: that is all the depth airlock makes. own_only: only airlock's
 * own children (own_child). */
static void each_child(const char *dir, bool own_only, void (*fn)(const char *dir))
{
	_cleanup_(al_closep) int fd = open(dir, O_DIRECTORY | O_CLOEXEC);
	struct dirent *e;
	struct stat st;
	DIR *d;

	/* Link count 2: no subdirectory, nothing to read. */
	if (fd < 0 || fstat(fd, &st) < 0 || st.st_nlink <= 2 || !(d = fdopendir(TAKE_FD(fd))))
		return;
	while ((e = readdir(d))) {
		if (e->d_type != DT_DIR || e->d_name[0] == '.' ||
		    (own_only && !own_child(e->d_name)))
			continue;
		_cleanup_free_ char *sub = xasprintf("%s/%s", dir, e->d_name);
		fn(sub);
	}
	closedir(d);
}

/* The first child cgroup of dir that airlock did not make, into name;
 * false when there is none. */
static bool foreign_child(const char *dir, char *name, size_t len)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	bool found = false;

	while (d && !found && (e = readdir(d)))
		if (e->d_type == DT_DIR && e->d_name[0] != '.' && !own_child(e->d_name)) {
			snprintf(name, len, "%s", e->d_name);
			found = true;
		}
	if (d)
		closedir(d);
	return found;
}

/* dir, the run's at a caller's path that its supervisor removed, is
 * still there because of a cgroup someone else made in it: said. */
static void left_warn(const char *dir)
{
	char name[256];

	if (access(dir, F_OK) == 0 && foreign_child(dir, name, sizeof(name)))
		al_warn("cgroup: %s holds a cgroup airlock did not make (%s); leaving it", dir,
			name);
}

/* One of airlock's leaves: v2's cgroup.kill, v1 each listed. */
static void kill_leaf(const char *dir)
{
	_cleanup_free_ char *kill_file = xasprintf("%s/cgroup.kill", dir);
	if (al_write_file_at(AT_FDCWD, kill_file, "1", 1) < 0)
		kill_listed(dir);
}

/* Everything in dir and its exec children (own_only: only airlock's
 * own, see own_child), thawed first (a frozen v1 task does not die
 * until thawed). */
static void kill_tree(const char *dir, bool own_only)
{
	al_cg_thaw_dir(dir);
	kill_listed(dir);
	each_child(dir, own_only, kill_leaf);
}

void al_cgroup_kill(const struct al_cgroup *cg)
{
	if (!cg)
		return;
	/* v2's cgroup.kill takes the whole subtree, frozen or not: at a
	 * caller's path, where a child may be someone else's, only
	 * airlock's own leaves are killed so (kill_tree). */
	bool at = cg->h[0].mount != NULL;
	if (cg->v2 && !at && al_cg_write_str(cg->h[0].dir, "cgroup.kill", "1", NULL) == 0)
		return;
	/* Thawed before any is killed: the freezer is a hierarchy of its own
	 * on v1, and its tasks are the same as the others'. */
	if (al_cg_freezer_dir(cg))
		al_cg_thaw_dir(al_cg_freezer_dir(cg));
	for (size_t i = 0; i < cg->n; i++)
		kill_tree(cg->h[i].dir, at);
}

static int remove_one(const char *dir)
{
	/* The last tasks may still be leaving (exit is asynchronous to us):
	 * retry for up to about a second. */
	for (int i = 0; i < 200; i++) {
		if (rmdir(dir) == 0 || errno == ENOENT)
			return 0;
		if (errno != EBUSY)
			return -errno;
		if (i % 20 == 19)
			kill_listed(dir);
		struct timespec ts = {0, 5 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	return -EBUSY;
}

static void remove_child(const char *dir)
{
	kill_listed(dir);
	int r = remove_one(dir);
	if (r < 0)
		al_debug("cgroup: cannot remove %s: %s", dir, strerror(-r));
}

/* dir and the exec children a killed session left in it (the kernel
 * refuses to remove a cgroup that has children). own_only: at a caller's
 * path, only airlock's own children; with another one there, dir is
 * left (warned about), not an error. */
static int remove_dir(const char *dir, bool own_only)
{
	char name[256];

	each_child(dir, own_only, remove_child);
	if (own_only && foreign_child(dir, name, sizeof(name))) {
		al_warn("cgroup: %s holds a cgroup airlock did not make (%s); leaving it", dir,
			name);
		return 0;
	}
	return remove_one(dir);
}

int al_cgroup_destroy(struct al_cgroup *cg, struct al_error *err)
{
	int r = 0;

	if (!cg)
		return 0;
	al_closep(&cg->dirfd);
	al_closep(&cg->sockfd);
	for (size_t i = 0; i < AL_CG_N_COUNTERS; i++)
		al_closep(&cg->ctrfd[i]);
	for (size_t i = 0; i < cg->n; i++) {
		int q = cg->h[i].made ? remove_dir(cg->h[i].dir, cg->h[i].mount != NULL) : 0;
		if (q < 0 && r == 0)
			r = al_error_setsys(err, -q, "cgroup: removing %s (left for airlock gc)",
					    cg->h[i].dir);
		free(cg->h[i].dir);
		free(cg->h[i].base);
		free(cg->h[i].own);
		free(cg->h[i].mount);
	}
	/* Once the run's processes are gone from the cgroups above. */
	al_cg_tags_leave(cg);
	free(cg->leaf); /* removed with the run's children (remove_dir) */
	free(cg);
	return r;
}

const char *al_cgroup_describe(const struct al_cgroup *cg)
{
	return cg ? cg->desc : "none";
}

static bool run_is_stale(const char *name)
{
	int pid;
	unsigned long long st, now;

	if (sscanf(name, "%d-%llu-", &pid, &st) != 2)
		return false; /* not ours */
	if (al_proc_starttime(pid, &now) < 0)
		return true; /* the supervisor is gone */
	return now != st;    /* the pid was reused */
}

/* The freezer first: a frozen session's tasks die only once thawed, and
 * their other cgroups are removed only once they are gone. */
static const char *const gc_order[] = {"freezer", "memory", "pids", "cpu", "cpuacct"};

/* In the hierarchy of name, where <path> is gone: the parents a create
 * made there, removed once empty. */
static void remove_parents_in(const char *name, const char *path)
{
	_cleanup_free_ char *mount = xasprintf(CG_ROOT "/%s", name);
	_cleanup_free_ char *dir = NULL;
	char real[4096];

	if (!realpath(mount, real))
		return;
	dir = xasprintf("%s%s", real, path);
	if (access(dir, F_OK) < 0)
		al_cg_remove_parents(real, path);
}

/* Kill what is in dir (v2: cgroup.kill; v1: thawed, then each listed) and
 * remove it with its children; own_only: only airlock's own children
 * (see remove_dir). */
static int kill_remove(const char *dir, bool own_only)
{
	_cleanup_free_ char *kill_file = xasprintf("%s/cgroup.kill", dir);
	if (own_only || al_write_file_at(AT_FDCWD, kill_file, "1", 1) < 0)
		kill_tree(dir, own_only);
	return remove_dir(dir, own_only);
}

static int gc_base(const char *base, const char *ours)
{
	struct stat st, own;
	DIR *d;
	struct dirent *e;
	int removed = 0;

	/* A cgroup directory's link count is 2 plus its subdirectories: with
	 * none, or only ours, there is nothing to collect, and a stat or two
	 * save a readdir on every run. */
	if (stat(base, &st) < 0 || st.st_nlink <= 2)
		return 0;
	if (ours && st.st_nlink == 3) {
		_cleanup_free_ char *mine = xasprintf("%s/%s", base, ours);
		if (stat(mine, &own) == 0 && S_ISDIR(own.st_mode))
			return 0;
	}
	_cleanup_(al_closep) int fd = open(base, O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	d = fdopendir(TAKE_FD(fd));
	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		if (e->d_type != DT_DIR || e->d_name[0] == '.' || !run_is_stale(e->d_name))
			continue;
		_cleanup_free_ char *dir = xasprintf("%s/%s", base, e->d_name);
		int r = kill_remove(dir, false);
		if (r == 0) {
			al_debug("gc: removed stale cgroup %s", dir);
			removed++;
		} else {
			al_warn("gc: cannot remove stale cgroup %s: %s", dir, strerror(-r));
		}
	}
	closedir(d);
	return removed;
}

int al_cg_rmdir_wait(const char *dir)
{
	for (int i = 0; i < 200; i++) {
		if (rmdir(dir) == 0 || errno == ENOENT)
			return 0;
		if (errno != EBUSY)
			return -errno;
		struct timespec ts = {0, 5 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	return -EBUSY;
}

/* <hierarchy of name><path> removed: kill_remove (only airlock's own),
 * or (tag) only once empty, nothing in it killed; without kill and not
 * tag (the supervisor removed it), a directory still there because of a
 * cgroup someone else made in it is said. 0 where it is not mounted. */
static int remove_in(const char *name, const char *path, bool kill, bool tag, struct al_error *err)
{
	_cleanup_free_ char *mount = xasprintf(CG_ROOT "/%s", name);
	char real[4096];
	int q = 0;

	if (!realpath(mount, real))
		return 0;
	_cleanup_free_ char *dir = xasprintf("%s%s", real, path);
	if (kill)
		q = kill_remove(dir, true);
	else if (tag)
		q = al_cg_rmdir_wait(dir);
	else
		left_warn(dir);
	return q < 0 ? al_error_setsys(err, -q, "cgroup: removing %s", dir) : 0;
}

int al_cgroup_remove_at(const char *path, bool dead, struct al_error *err)
{
	_cleanup_free_ char *v2own = NULL;
	const char *v2m = NULL;
	int r = 0;

	if (al_cg_v2_usable(&v2m, &v2own)) {
		_cleanup_free_ char *dir = xasprintf("%s%s", v2m, path);
		int q = dead ? kill_remove(dir, true) : 0;
		if (q < 0)
			return al_error_setsys(err, -q, "cgroup: removing %s", dir);
		if (!dead)
			left_warn(dir);
	} else {
		/* The first failure is the one told. */
		for (size_t i = 0; i < AL_ARRAY_SIZE(gc_order); i++) {
			int q = remove_in(gc_order[i], path, dead, false, r < 0 ? NULL : err);
			r = r < 0 ? r : q;
		}
		for (size_t i = 0; al_cg_tag_names[i]; i++) {
			int q =
			    remove_in(al_cg_tag_names[i], path, false, true, r < 0 ? NULL : err);
			r = r < 0 ? r : q;
		}
	}
	/* The parents, under the lock a create at a path holds while it
	 * checks and makes them. */
	_cleanup_(al_closep) int lock = al_cg_at_lock(r < 0 ? NULL : err);
	if (lock < 0)
		return r < 0 ? r : lock;
	al_cg_remove_parents_all(path);
	return r;
}

void al_cg_remove_parents_all(const char *path)
{
	_cleanup_free_ char *v2own = NULL;
	const char *v2m = NULL;

	if (al_cg_v2_usable(&v2m, &v2own)) {
		_cleanup_free_ char *dir = xasprintf("%s%s", v2m, path);
		if (access(dir, F_OK) < 0)
			al_cg_remove_parents(v2m, path);
		return;
	}
	for (size_t i = 0; i < AL_ARRAY_SIZE(gc_order); i++)
		remove_parents_in(gc_order[i], path);
	for (size_t i = 0; al_cg_tag_names[i]; i++)
		remove_parents_in(al_cg_tag_names[i], path);
}

int al_cgroup_gc(struct al_error *err)
{
	return al_cgroup_gc_except(NULL, err);
}

int al_cgroup_gc_except(const struct al_cgroup *cg, struct al_error *err)
{
	/* Our run's directory name: the same in every hierarchy. */
	const char *ours = cg && cg->n && !cg->h[0].mount ? strrchr(cg->h[0].dir, '/') + 1 : NULL;
	_cleanup_free_ char *v2own = NULL;
	const char *v2m = NULL;
	int total = 0;

	if (al_cg_v2_usable(&v2m, &v2own)) {
		_cleanup_free_ char *base = xasprintf("%s/airlock", v2own);
		return gc_base(base, ours);
	}
	for (size_t i = 0; i < AL_ARRAY_SIZE(gc_order); i++) {
		_cleanup_free_ char *own = al_cg_own_path(gc_order[i]);
		_cleanup_free_ char *mount = xasprintf(CG_ROOT "/%s", gc_order[i]);
		char real[4096];
		if (!own || !realpath(mount, real))
			continue;
		_cleanup_free_ char *dir = al_cg_join(real, own);
		_cleanup_free_ char *base = xasprintf("%s/airlock", dir);
		int r = gc_base(base, ours);
		if (r > 0)
			total += r;
	}
	(void)err;
	return total;
}

void al_cg_kill_listed(const char *dir)
{
	kill_listed(dir);
}
