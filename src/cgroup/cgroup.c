#include "cgroup/cgroup.h"
#include "cgroup/internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/sys.h"
#include "core/util.h"

const char *const al_cg_v1_controllers[] = {"memory", "pids", "cpu", "cpuacct", "freezer", NULL};

static bool is_fs(const char *path, long magic)
{
	struct statfs sf;
	return statfs(path, &sf) == 0 && (long)sf.f_type == magic;
}

/* The v2 mount, or NULL. */
static const char *v2_mount(void)
{
	if (is_fs(CG_ROOT, CGROUP2_SUPER_MAGIC))
		return CG_ROOT;
	if (is_fs(CG_ROOT "/unified", CGROUP2_SUPER_MAGIC))
		return CG_ROOT "/unified";
	return NULL;
}

/* Our own cgroup path for a v1 controller ("memory") or v2 (NULL), from
 * /proc/self/cgroup. */
char *al_cg_own_path(const char *controller)
{
	/* Read on every call, into this call's buffer: a daemon's runs (or
	 * threads) may ask at once, and a process a daemon moved to another
	 * cgroup must not be told where it was. */
	char copy[8192], *save = NULL;

	if (al_read_file("/proc/self/cgroup", copy, sizeof(copy)) < 0)
		return NULL;
	for (char *line = strtok_r(copy, "\n", &save), *next = NULL; line; line = next) {
		next = strtok_r(NULL, "\n", &save);
		char *ctrls = strchr(line, ':'), *path;
		if (!ctrls)
			continue;
		ctrls++;
		path = strchr(ctrls, ':');
		if (!path)
			continue;
		*path++ = '\0';
		if (!controller) {
			if (ctrls[0] == '\0')
				return xstrdup(path);
			continue;
		}
		for (char *tok = ctrls, *end; tok; tok = end ? end + 1 : NULL) {
			end = strchr(tok, ',');
			size_t n = end ? (size_t)(end - tok) : strlen(tok);
			if (strlen(controller) == n && strncmp(tok, controller, n) == 0)
				return xstrdup(path);
		}
	}
	return NULL;
}

static bool file_has_word(const char *path, const char *word)
{
	char buf[1024], *save = NULL;
	if (al_read_file(path, buf, sizeof(buf)) < 0)
		return false;
	for (char *tok = strtok_r(buf, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save))
		if (strcmp(tok, word) == 0)
			return true;
	return false;
}

char *al_cg_join(const char *mount, const char *path)
{
	return xasprintf("%s%s", mount, strcmp(path, "/") == 0 ? "" : path);
}

/* v2 is used when its mount offers memory and pids to us. */
bool al_cg_v2_usable(const char **ret_mount, char **ret_own)
{
	const char *m = v2_mount();
	_cleanup_free_ char *own = NULL, *dir = NULL, *ctl = NULL;

	if (!m || !(own = al_cg_own_path(NULL)))
		return false;
	dir = al_cg_join(m, own);
	ctl = xasprintf("%s/cgroup.controllers", dir);
	if (!file_has_word(ctl, "memory") || !file_has_word(ctl, "pids"))
		return false;
	*ret_mount = m;
	*ret_own = TAKE_PTR(dir);
	return true;
}

const char *al_sockmem_name(enum al_sockmem m)
{
	switch (m) {
	case AL_SOCKMEM_CHARGED:
		return "charged";
	case AL_SOCKMEM_LIMITED:
		return "limited";
	case AL_SOCKMEM_NONE:
		break;
	}
	return "none";
}

/* Booted with cgroup.memory=nosocket (socket buffers charged nowhere) or
 * nokmem (no kernel memory charged at all: not unix socket buffers, pipes,
 * page tables, ...): then a memory limit does not bound what the sandbox
 * makes the kernel hold, on v1 as on v2. */
static bool accounting_disabled(void)
{
	char cmdline[4096], *save = NULL;

	if (al_read_file("/proc/cmdline", cmdline, sizeof(cmdline)) <= 0)
		return false;
	for (char *w = strtok_r(cmdline, " \n", &save); w; w = strtok_r(NULL, " \n", &save))
		if (strncmp(w, "cgroup.memory=", 14) == 0 &&
		    (strstr(w + 14, "nosocket") || strstr(w + 14, "nokmem")))
			return true;
	return false;
}

/* v2 charges socket buffers to the memory controller; memory.stat then
 * has a "sock" row. */
static enum al_sockmem v2_socket_mode(const char *dir)
{
	_cleanup_free_ char *stat = xasprintf("%s/memory.stat", dir);

	if (accounting_disabled())
		return AL_SOCKMEM_NONE;
	return file_has_word(stat, "sock") ? AL_SOCKMEM_CHARGED : AL_SOCKMEM_NONE;
}

enum al_sockmem al_cgroup_host_socket_mode(void)
{
	const char *m;
	_cleanup_free_ char *v2own = NULL, *own = NULL, *tcp = NULL;

	if (al_cg_v2_usable(&m, &v2own))
		return v2_socket_mode(v2own);
	if (!(own = al_cg_own_path("memory")))
		return AL_SOCKMEM_NONE;
	tcp = xasprintf(CG_ROOT "/memory%s/memory.kmem.tcp.limit_in_bytes",
			strcmp(own, "/") == 0 ? "" : own);
	return access(tcp, W_OK) == 0 && !accounting_disabled() ? AL_SOCKMEM_LIMITED
								: AL_SOCKMEM_NONE;
}

int al_cgroup_socket_usage(const struct al_cgroup *cg, uint64_t *ret)
{
	char buf[32];
	ssize_t n;

	if (!cg || cg->sockfd < 0)
		return -ENOENT;
	n = pread(cg->sockfd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return n < 0 ? -errno : -EIO;
	buf[n] = '\0';
	*ret = strtoull(buf, NULL, 10);
	return 0;
}

enum al_sockmem al_cgroup_socket_mode(const struct al_cgroup *cg)
{
	return cg ? cg->sockmem : AL_SOCKMEM_NONE;
}

const char *al_cgroup_layout(void)
{
	const char *m;
	_cleanup_free_ char *own = NULL;
	char path[64];

	if (al_cg_v2_usable(&m, &own))
		return "v2";
	snprintf(path, sizeof(path), CG_ROOT "/memory");
	if (is_fs(path, CGROUP_SUPER_MAGIC))
		return "v1";
	return "none";
}

int al_cg_write_str(const char *dir, const char *file, const char *value, struct al_error *err)
{
	_cleanup_free_ char *path = xasprintf("%s/%s", dir, file);
	int r = al_write_file_at(AT_FDCWD, path, value, strlen(value));
	if (r < 0)
		return al_error_setsys(err, -r, "cgroup: writing \"%s\" to %s", value, path);
	return 0;
}

static int read_u64(const char *dir, const char *file, uint64_t *ret)
{
	_cleanup_free_ char *path = xasprintf("%s/%s", dir, file);
	char buf[64];
	if (al_read_file(path, buf, sizeof(buf)) <= 0)
		return -ENOENT;
	if (strncmp(buf, "max", 3) == 0) {
		*ret = UINT64_MAX;
		return 0;
	}
	*ret = strtoull(buf, NULL, 10);
	return 0;
}

static int write_u64_checked(const char *dir, const char *file, uint64_t v, struct al_error *err)
{
	char buf[32];
	uint64_t back = 0;
	int r;

	snprintf(buf, sizeof(buf), "%" PRIu64, v);
	if ((r = al_cg_write_str(dir, file, buf, err)) < 0)
		return r;
	if (read_u64(dir, file, &back) < 0 || back != v)
		return al_error_set(err, EIO, "cgroup: %s/%s reads back %" PRIu64 ", not %" PRIu64,
				    dir, file, back, v);
	return 0;
}

static const char *dir_for(const struct al_cgroup *cg, const char *controller)
{
	for (size_t i = 0; i < cg->n; i++) {
		if (cg->v2)
			return cg->h[i].dir;
		char copy[64], *save = NULL;
		snprintf(copy, sizeof(copy), "%s", cg->h[i].ctrls);
		for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
			if (strcmp(tok, controller) == 0)
				return cg->h[i].dir;
	}
	return NULL;
}

const char *al_cgroup_path(const struct al_cgroup *cg, const char *controller)
{
	return cg ? dir_for(cg, controller) : NULL;
}

/* "<pid>-<starttime>-<n>": the supervisor's identity, stable for its
 * life, and the number of the process's cgroup, which tells its runs
 * apart. The counter is the process's only state here; atomic, so that
 * two threads never take the same number. */
static void make_id(char *buf, size_t len)
{
	static atomic_uint counter;
	unsigned long long st = 0;
	al_proc_starttime(getpid(), &st);
	snprintf(buf, len, "%d-%llu-%u", (int)getpid(), st,
		 atomic_fetch_add_explicit(&counter, 1, memory_order_relaxed));
}

static int mkdir_base(const char *base, struct al_error *err)
{
	if (mkdir(base, 0755) < 0 && errno != EEXIST) {
		if (errno == EACCES || errno == EPERM || errno == EROFS)
			return al_error_setsys(
			    err, errno,
			    "cgroup: cannot create %s; cgroup limits need a writable cgroup: run "
			    "as root, or on cgroup v2 delegate one (e.g. systemd-run --user "
			    "--scope -p Delegate=yes airlock run ...)",
			    base);
		return al_error_setsys(err, errno, "cgroup: mkdir %s", base);
	}
	return 0;
}

/* h's base and dir: "<own>/airlock/<id>", or <mount><path> and its
 * parent. */
static void at_path(struct hier *h, const char *mount, const char *path, const char *id)
{
	if (!path) {
		h->base = xasprintf("%s/airlock", h->own);
		h->dir = xasprintf("%s/%s", h->base, id);
		return;
	}
	h->mount = xstrdup(mount);
	h->dir = xasprintf("%s%s", mount, path);
	h->base = xstrdup(h->dir);
	*strrchr(h->base, '/') = '\0';
}

static int setup_v1(struct al_cgroup *cg, const struct al_cgroup_limits *l, const char *id,
		    struct al_error *err)
{
	char seen[MAX_HIER][4096];
	size_t n_seen = 0;

	for (size_t i = 0; al_cg_v1_controllers[i]; i++) {
		const char *c = al_cg_v1_controllers[i];
		/* Each v1 hierarchy costs a mkdir and an rmdir per run: join
		 * cpu and cpuacct only when a limit needs them, freezer only
		 * for a session (its pause). At a path an engine chose, all of
		 * them: it reads each one's files there. */
		if (!l->path && ((strcmp(c, "cpu") == 0 && !l->cpu_quota_us) ||
				 (strcmp(c, "cpuacct") == 0 && !l->want_cpu_time) ||
				 (strcmp(c, "freezer") == 0 && !l->want_freezer)))
			continue;
		_cleanup_free_ char *mount = xasprintf(CG_ROOT "/%s", c);
		_cleanup_free_ char *own = NULL;
		char real[4096];
		bool dup = false;

		if (strcmp(c, "freezer") == 0 && !is_fs(mount, CGROUP_SUPER_MAGIC))
			continue; /* no pause here: al_cgroup_freeze says so */
		if (!is_fs(mount, CGROUP_SUPER_MAGIC) || !realpath(mount, real))
			return al_error_set(
			    err, EOPNOTSUPP,
			    "cgroup: no cgroup v1 \"%s\" hierarchy at %s and no cgroup v2 "
			    "with the memory and pids controllers",
			    c, mount);
		for (size_t j = 0; j < n_seen; j++)
			if (strcmp(seen[j], real) == 0)
				dup = true; /* cpu,cpuacct co-mounted */
		if (dup) {
			for (size_t j = 0; j < cg->n; j++)
				if (strncmp(cg->h[j].own, real, strlen(real)) == 0) {
					strncat(cg->h[j].ctrls, ",",
						sizeof(cg->h[j].ctrls) - strlen(cg->h[j].ctrls) -
						    1);
					strncat(cg->h[j].ctrls, c,
						sizeof(cg->h[j].ctrls) - strlen(cg->h[j].ctrls) -
						    1);
				}
			continue;
		}
		snprintf(seen[n_seen++], sizeof(seen[0]), "%s", real);
		own = al_cg_own_path(c);
		if (!own)
			return al_error_set(err, ENOENT, "cgroup: not in any \"%s\" cgroup", c);
		struct hier *h = &cg->h[cg->n++];
		snprintf(h->ctrls, sizeof(h->ctrls), "%s", c);
		h->own = al_cg_join(real, own);
		at_path(h, real, l->path, id);
	}
	return 0;
}

static int setup_v2(struct al_cgroup *cg, const char *mount, const char *own, const char *path,
		    const char *id, struct al_error *err)
{
	struct hier *h = &cg->h[cg->n++];
	_cleanup_free_ char *sub = xasprintf("%s/cgroup.subtree_control", own);
	int r;

	cg->v2 = true;
	h->own = xstrdup(own);
	at_path(h, mount, path, id);
	if (path)
		return 0; /* its parents are made and enabled on the way down */
	/* Controllers must be enabled on the way down. */
	if (!file_has_word(sub, "memory") || !file_has_word(sub, "pids") ||
	    !file_has_word(sub, "cpu")) {
		if ((r = al_cg_write_str(own, "cgroup.subtree_control", "+memory +pids +cpu",
					 err)) < 0)
			return al_error_wrap(err,
					     "enabling controllers (is %s delegated to us, "
					     "and does it hold no processes of its own?)",
					     own);
	}
	if ((r = mkdir_base(h->base, err)) < 0)
		return r;
	_cleanup_free_ char *bsub = xasprintf("%s/cgroup.subtree_control", h->base);
	if (!file_has_word(bsub, "memory") &&
	    (r = al_cg_write_str(h->base, "cgroup.subtree_control", "+memory +pids +cpu", err)) < 0)
		return r;
	return 0;
}

static int write_limits_v1(struct al_cgroup *cg, const struct al_cgroup_limits *l,
			   struct al_error *err)
{
	const char *mem = dir_for(cg, "memory"), *pids = dir_for(cg, "pids"),
		   *cpu = dir_for(cg, "cpu");
	int r;

	if (l->memory_bytes) {
		/* The kernel keeps page-aligned values; ask for one so that the
		 * read-back check compares like with like. */
		uint64_t v = (l->memory_bytes + 4095) & ~4095ULL;
		if ((r = write_u64_checked(mem, "memory.limit_in_bytes", v, err)) < 0)
			return r;
		_cleanup_free_ char *memsw = xasprintf("%s/memory.memsw.limit_in_bytes", mem);
		if (access(memsw, F_OK) == 0) {
			if ((r = write_u64_checked(mem, "memory.memsw.limit_in_bytes", v, err)) < 0)
				return r;
		} else {
			char swaps[256];
			/* No swap accounting: fine only when there is no swap. */
			if (al_read_file("/proc/swaps", swaps, sizeof(swaps)) > 0 &&
			    strchr(swaps, '\n') && strchr(swaps, '\n')[1] != '\0')
				return al_error_set(
				    err, EOPNOTSUPP,
				    "cgroup: swap is active but the kernel has no swap "
				    "accounting (memory.memsw), so a memory limit "
				    "could be dodged by swapping; refusing");
		}
		/* v1 keeps socket buffers out of memory.limit_in_bytes, and
		 * charges them at all (TCP and UDP alike) only once this limit
		 * has been written. A kernel without the file cannot bound
		 * them: the caller decides whether that may run. */
		_cleanup_free_ char *tcp = xasprintf("%s/memory.kmem.tcp.limit_in_bytes", mem);
		if (l->socket_bytes && access(tcp, F_OK) == 0 && !accounting_disabled()) {
			v = (l->socket_bytes + 4095) & ~4095ULL;
			if ((r = write_u64_checked(mem, "memory.kmem.tcp.limit_in_bytes", v, err)) <
			    0)
				return r;
			_cleanup_free_ char *u =
			    xasprintf("%s/memory.kmem.tcp.usage_in_bytes", mem);
			cg->sockfd = open(u, O_RDONLY | O_CLOEXEC);
			if (cg->sockfd < 0)
				return al_error_setsys(err, errno, "cgroup: open %s", u);
			cg->sockmem = AL_SOCKMEM_LIMITED;
		}
	}
	if (l->pids && (r = write_u64_checked(pids, "pids.max", l->pids, err)) < 0)
		return r;
	if (l->cpu_quota_us) {
		if ((r = write_u64_checked(cpu, "cpu.cfs_period_us", l->cpu_period_us, err)) < 0 ||
		    (r = write_u64_checked(cpu, "cpu.cfs_quota_us", l->cpu_quota_us, err)) < 0)
			return r;
	}
	return 0;
}

static int write_limits_v2(struct al_cgroup *cg, const struct al_cgroup_limits *l,
			   struct al_error *err)
{
	const char *d = cg->h[0].dir;
	char buf[64], back[64];
	int r;

	if (l->memory_bytes) {
		uint64_t v = (l->memory_bytes + 4095) & ~4095ULL;
		if ((r = write_u64_checked(d, "memory.max", v, err)) < 0)
			return r;
		if ((r = write_u64_checked(d, "memory.swap.max", 0, err)) < 0) {
			_cleanup_free_ char *sw = xasprintf("%s/memory.swap.max", d);
			if (access(sw, F_OK) == 0)
				return r;    /* present but not honoured: fail closed */
			al_error_clear(err); /* no swap support in this kernel */
		}
		cg->sockmem = v2_socket_mode(d);
	}
	if (l->pids && (r = write_u64_checked(d, "pids.max", l->pids, err)) < 0)
		return r;
	if (l->cpu_quota_us) {
		snprintf(buf, sizeof(buf), "%" PRIu64 " %" PRIu64, l->cpu_quota_us,
			 l->cpu_period_us);
		if ((r = al_cg_write_str(d, "cpu.max", buf, err)) < 0)
			return r;
		_cleanup_free_ char *p = xasprintf("%s/cpu.max", d);
		if (al_read_file(p, back, sizeof(back)) <= 0 ||
		    strncmp(back, buf, strlen(buf)) != 0)
			return al_error_set(err, EIO, "cgroup: %s reads back \"%s\", not \"%s\"", p,
					    back, buf);
	}
	return 0;
}

/* A path an engine chose must be new in every hierarchy: an existing
 * cgroup may hold processes that are not the container's, or be another
 * container's. Checked in all before any is made, so that a refusal
 * leaves nothing; a mkdir's EEXIST (a race) refuses all the same. */
static int path_is_new(const struct al_cgroup *cg, const char *path, struct al_error *err)
{
	struct stat st;

	for (size_t i = 0; i < cg->n + cg->n_tags; i++) {
		const char *d = i < cg->n ? cg->h[i].dir : cg->tag[i - cg->n].dir;
		if (lstat(d, &st) == 0 || errno != ENOENT)
			return al_error_set(err, EEXIST,
					    "linux.cgroupsPath: \"%s\": %s exists already (a "
					    "container's cgroup is made by create)",
					    path, d);
	}
	return 0;
}

static int make_dirs(struct al_cgroup *cg, const char *path, struct al_error *err)
{
	int r;

	if (path && (r = path_is_new(cg, path, err)) < 0)
		return r;
	for (size_t i = 0; path && i < cg->n; i++)
		if ((r = al_cg_check_ancestors(cg->h[i].mount, path, cg->v2, err)) < 0)
			return r;
	for (size_t i = 0; i < cg->n; i++) {
		struct hier *h = &cg->h[i];
		r = path ? al_cg_mkdir_parents(h->mount, path, cg->v2, err)
			 : mkdir_base(h->base, err);
		if (r < 0)
			return path ? al_error_wrap(err, "linux.cgroupsPath \"%s\"", path) : r;
		if (mkdir(h->dir, 0755) < 0) {
			if (path && errno == EEXIST)
				return al_error_set(err, EEXIST,
						    "linux.cgroupsPath: \"%s\": %s exists already",
						    path, h->dir);
			return al_error_setsys(err, errno, "cgroup: mkdir %s", h->dir);
		}
		h->made = true;
		/* Recognisable as a container's from here on, before any
		 * process joins it (al_cg_check_ancestors). */
		if (path && (r = al_cg_mark(h->dir, AL_CG_MARK_CONTAINER, err)) < 0)
			return r;
	}
	return 0;
}

int al_cgroup_create(const struct al_cgroup_limits *limits, struct al_cgroup **ret,
		     struct al_error *err)
{
	struct al_cgroup *cg = xcalloc(1, sizeof(*cg));
	_cleanup_free_ char *v2own = NULL;
	const char *v2m = NULL;
	char id[96];
	int r = 0;
	/* At a caller's path: held until the cgroups are made and marked
	 * (and, on failure, the parents made removed again). */
	_cleanup_(al_closep) int lock = -1;

	cg->dirfd = -1;
	cg->sockfd = -1;
	for (size_t i = 0; i < AL_CG_N_COUNTERS; i++)
		cg->ctrfd[i] = -1;
	make_id(id, sizeof(id));
	if (al_cg_v2_usable(&v2m, &v2own))
		r = setup_v2(cg, v2m, v2own, limits->path, id, err);
	else
		r = setup_v1(cg, limits, id, err);
	if (r == 0 && !cg->v2 && limits->path)
		al_cg_tags_find(cg, limits->path);
	if (r == 0 && limits->path && (lock = al_cg_at_lock(err)) < 0)
		r = lock;
	if (r < 0 || (r = make_dirs(cg, limits->path, err)) < 0)
		goto fail;
	r = cg->v2 ? write_limits_v2(cg, limits, err) : write_limits_v1(cg, limits, err);
	if (r < 0)
		goto fail;
	if (cg->v2 && limits->exec_children) {
		/* Before any process is in it (al_cg_v2_session_steps). */
		struct al_cg_steps st;
		al_cg_v2_session_steps(cg->h[0].dir, &st);
		cg->leaf = xstrdup(st.v[0].path);
		r = al_cg_steps_apply(&st, err);
		al_cg_steps_clear(&st);
		if (r < 0) {
			al_error_wrap(err, "a session's cgroups");
			goto fail;
		}
	}
	if (cg->v2) {
		const char *into = cg->leaf ? cg->leaf : cg->h[0].dir;
		cg->dirfd = open(into, O_DIRECTORY | O_CLOEXEC);
		if (cg->dirfd < 0) {
			r = al_error_setsys(err, errno, "cgroup: open %s", into);
			goto fail;
		}
	}
	/* Last: from here on this process is in them, and so is all it
	 * clones (the sandbox). */
	if ((r = al_cg_tags_enter(cg, limits->path, err)) < 0)
		goto fail;
	snprintf(cg->desc, sizeof(cg->desc), "%s %s%s", cg->v2 ? "v2" : "v1", cg->h[0].dir,
		 cg->leaf ? " (init in " AL_CG_INIT_LEAF "/)" : "");
	*ret = cg;
	return 0;
fail:
	al_cgroup_destroy(cg, NULL);
	if (lock >= 0)
		al_cg_remove_parents_all(limits->path);
	return r;
}

int al_cgroup_clone_fd(const struct al_cgroup *cg)
{
	return cg && cg->v2 ? cg->dirfd : -1;
}

int al_cgroup_task_fds(const struct al_cgroup *cg, bool outer, int *fds, size_t max,
		       struct al_error *err)
{
	size_t n = 0;

	if (!cg || cg->v2)
		return 0;
	for (size_t i = 0; i < cg->n && n < max; i++) {
		_cleanup_free_ char *path =
		    xasprintf("%s/tasks", outer ? cg->h[i].own : cg->h[i].dir);
		int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
		if (fd < 0) {
			int e = errno;
			while (n > 0)
				close(fds[--n]);
			return al_error_setsys(err, e, "cgroup: open %s", path);
		}
		fds[n++] = fd;
	}
	return (int)n;
}

/* A counter's text into buf (NUL-terminated), or a negative errno. The
 * file stays open after its first read, and is read again from offset 0:
 * a cgroup file makes its text anew for a read at the start, and hands
 * all of it to one read that has room (these are under 2 KB; buf holds
 * 4 KB, as the whole-file reads before did), so each tick costs one
 * pread a counter instead of an open, two reads and a close (the
 * monitor's tick reads them every 20 ms while the command runs). */
static ssize_t read_counter(struct al_cgroup *cg, enum al_cg_counter c, const char *dir,
			    const char *file, char *buf, size_t len)
{
	int *fd = &cg->ctrfd[c];
	ssize_t n;

	if (*fd < 0) {
		_cleanup_free_ char *path = xasprintf("%s/%s", dir, file);
		*fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
		if (*fd < 0)
			return -errno;
	}
	do
		n = pread(*fd, buf, len - 1, 0);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return n;
}

/* A counter holding one number ("max" is UINT64_MAX); *ret kept when the
 * file cannot be read. */
static void counter_u64(struct al_cgroup *cg, enum al_cg_counter c, const char *dir,
			const char *file, uint64_t *ret)
{
	char buf[64];

	if (read_counter(cg, c, dir, file, buf, sizeof(buf)) <= 0)
		return;
	*ret = strncmp(buf, "max", 3) == 0 ? UINT64_MAX : strtoull(buf, NULL, 10);
}

/* The value of a "key value" line of text; *ret kept when there is none. */
static void key_value(const char *text, const char *key, uint64_t *ret)
{
	size_t klen = strlen(key);

	for (const char *line = text; line && *line; line = strchr(line, '\n')) {
		if (*line == '\n')
			line++;
		if (strncmp(line, key, klen) == 0 && line[klen] == ' ') {
			*ret = strtoull(line + klen + 1, NULL, 10);
			return;
		}
	}
}

void al_cgroup_stats(struct al_cgroup *cg, struct al_cgroup_stats *st)
{
	char buf[4096];

	memset(st, 0, sizeof(*st));
	if (!cg)
		return;
	if (cg->v2) {
		const char *d = cg->h[0].dir;
		if (read_counter(cg, AL_CG_CPU_STAT, d, "cpu.stat", buf, sizeof(buf)) > 0) {
			key_value(buf, "usage_usec", &st->cpu_usage_us);
			key_value(buf, "user_usec", &st->cpu_user_us);
			key_value(buf, "system_usec", &st->cpu_system_us);
		}
		counter_u64(cg, AL_CG_MEM_PEAK, d, "memory.peak", &st->memory_peak);
		counter_u64(cg, AL_CG_MEM_CURRENT, d, "memory.current", &st->memory_current);
		if (read_counter(cg, AL_CG_MEM_EVENTS, d, "memory.events", buf, sizeof(buf)) > 0)
			key_value(buf, "oom_kill", &st->oom_kills);
		if (read_counter(cg, AL_CG_PIDS_EVENTS, d, "pids.events", buf, sizeof(buf)) > 0)
			key_value(buf, "max", &st->pids_max_hits);
		if (read_counter(cg, AL_CG_SOCK, d, "memory.stat", buf, sizeof(buf)) > 0)
			key_value(buf, "sock", &st->socket_bytes);
		st->socket_peak = st->socket_bytes;
		return;
	}
	const char *acct = dir_for(cg, "cpuacct"), *mem = dir_for(cg, "memory"),
		   *pids = dir_for(cg, "pids");
	uint64_t ns = 0, ticks = 0;
	long hz = sysconf(_SC_CLK_TCK);
	if (acct) {
		counter_u64(cg, AL_CG_CPU_USAGE, acct, "cpuacct.usage", &ns);
		st->cpu_usage_us = ns / 1000;
		if (read_counter(cg, AL_CG_CPU_STAT, acct, "cpuacct.stat", buf, sizeof(buf)) > 0) {
			key_value(buf, "user", &ticks);
			st->cpu_user_us = ticks * 1000000ULL / (uint64_t)hz;
			ticks = 0;
			key_value(buf, "system", &ticks);
			st->cpu_system_us = ticks * 1000000ULL / (uint64_t)hz;
		}
	}
	if (mem) {
		counter_u64(cg, AL_CG_MEM_PEAK, mem, "memory.max_usage_in_bytes", &st->memory_peak);
		counter_u64(cg, AL_CG_MEM_CURRENT, mem, "memory.usage_in_bytes",
			    &st->memory_current);
		if (read_counter(cg, AL_CG_MEM_EVENTS, mem, "memory.oom_control", buf,
				 sizeof(buf)) > 0)
			key_value(buf, "oom_kill", &st->oom_kills);
		if (cg->sockmem == AL_SOCKMEM_LIMITED) {
			counter_u64(cg, AL_CG_SOCK, mem, "memory.kmem.tcp.usage_in_bytes",
				    &st->socket_bytes);
			counter_u64(cg, AL_CG_SOCK_PEAK, mem, "memory.kmem.tcp.max_usage_in_bytes",
				    &st->socket_peak);
		}
	}
	if (pids && read_counter(cg, AL_CG_PIDS_EVENTS, pids, "pids.events", buf, sizeof(buf)) > 0)
		key_value(buf, "max", &st->pids_max_hits);
}

size_t al_cgroup_dirs(const struct al_cgroup *cg, const char **dirs, const char **parents,
		      size_t max)
{
	size_t n = 0;

	for (size_t i = 0; cg && i < cg->n && n < max; i++) {
		if (!cg->h[i].dir)
			continue;
		dirs[n] = cg->h[i].dir;
		parents[n] = cg->h[i].base;
		n++;
	}
	for (size_t i = 0; cg && i < cg->n_tags && n < max; i++) {
		dirs[n] = cg->tag[i].dir;
		parents[n] = cg->tag[i].base;
		n++;
	}
	return n;
}
