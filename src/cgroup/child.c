/* An exec's own cgroup under the run's (see child.h): on v1 one in each
 * of the run's memory, pids and cpuacct hierarchies; on v2 one below the
 * run's, beside the session's init leaf (internal.h's steps). */
#include "cgroup/child.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cgroup/internal.h"
#include "core/cleanup.h"
#include "core/sys.h"
#include "core/util.h"

static const char *const controllers[] = {"memory", "pids", "cpuacct"};
#define N_CTRL (sizeof(controllers) / sizeof(controllers[0]))

struct al_cgroup_child {
	/* v1: one per hierarchy, NULL where the run has none; v2: dir[0]
	 * only, the one cgroup with every controller */
	char *dir[N_CTRL];
	bool v2;
};

/* ---- cgroup v2: the steps (internal.h) ---------------------------------- */

static void step(struct al_cg_steps *s, enum al_cg_op op, char *path, const char *value)
{
	if (s->n >= AL_CG_STEPS_MAX)
		abort(); /* a list of fixed length: a bug, not an input */
	s->v[s->n].op = op;
	s->v[s->n].path = path;
	snprintf(s->v[s->n].value, sizeof(s->v[s->n].value), "%s", value ? value : "");
	s->n++;
}

void al_cg_v2_session_steps(const char *run_dir, struct al_cg_steps *s)
{
	*s = (struct al_cg_steps){0};
	step(s, AL_CG_MKDIR, xasprintf("%s/" AL_CG_INIT_LEAF, run_dir), NULL);
	step(s, AL_CG_WRITE, xasprintf("%s/cgroup.subtree_control", run_dir), "+memory +pids +cpu");
}

void al_cg_v2_exec_steps(const char *run_dir, const char *name, uint64_t memory_bytes,
			 uint64_t pids, struct al_cg_steps *s)
{
	char v[32];

	*s = (struct al_cg_steps){0};
	step(s, AL_CG_MKDIR, xasprintf("%s/%s", run_dir, name), NULL);
	if (memory_bytes) {
		/* The kernel keeps page-aligned values. */
		snprintf(v, sizeof(v), "%" PRIu64, (memory_bytes + 4095) & ~(uint64_t)4095);
		step(s, AL_CG_WRITE, xasprintf("%s/%s/memory.max", run_dir, name), v);
		/* Without it, swap would let the exec past its limit (the
		 * run's memory.swap.max 0 holds the total all the same). */
		step(s, AL_CG_WRITE_OPT, xasprintf("%s/%s/memory.swap.max", run_dir, name), "0");
	}
	if (pids) {
		snprintf(v, sizeof(v), "%" PRIu64, pids);
		step(s, AL_CG_WRITE, xasprintf("%s/%s/pids.max", run_dir, name), v);
	}
}

int al_cg_steps_apply(const struct al_cg_steps *s, struct al_error *err)
{
	for (size_t i = 0; i < s->n; i++) {
		const char *path = s->v[i].path, *v = s->v[i].value;
		if (s->v[i].op == AL_CG_MKDIR) {
			if (mkdir(path, 0755) < 0)
				return al_error_setsys(err, errno, "cgroup: mkdir %s", path);
			continue;
		}
		int r = al_write_file_at(AT_FDCWD, path, v, strlen(v));
		if (r == -ENOENT && s->v[i].op == AL_CG_WRITE_OPT)
			continue;
		if (r < 0)
			return al_error_setsys(err, -r, "cgroup: writing \"%s\" to %s", v, path);
	}
	return 0;
}

void al_cg_steps_clear(struct al_cg_steps *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i].path);
	s->n = 0;
}

/* ---- an exec's cgroup ---------------------------------------------------- */

static char *path_of(const struct al_cgroup_child *c, size_t i, const char *file)
{
	return xasprintf("%s/%s", c->dir[i], file);
}

static int write_at(const struct al_cgroup_child *c, size_t i, const char *file, const char *v,
		    struct al_error *err)
{
	char *p = path_of(c, i, file);
	int r = al_write_file_at(AT_FDCWD, p, v, strlen(v));
	if (r < 0)
		r = al_error_setsys(err, -r, "cgroup: writing \"%s\" to %s", v, p);
	free(p);
	return r;
}

int al_cgroup_child_create(const struct al_cgroup *cg, const char *name, uint64_t memory_bytes,
			   uint64_t pids, struct al_cgroup_child **ret, struct al_error *err)
{
	struct al_cgroup_child *c;
	char v[32];
	int r = 0;

	*ret = NULL;
	if (!cg || (cg->v2 && !cg->leaf))
		return 0; /* v2 without an init leaf: the run's cgroup holds init */
	c = xcalloc(1, sizeof(*c));
	if (cg->v2) {
		struct al_cg_steps st;
		al_cg_v2_exec_steps(cg->h[0].dir, name, memory_bytes, pids, &st);
		c->v2 = true;
		c->dir[0] = xstrdup(st.v[0].path);
		r = al_cg_steps_apply(&st, err);
		al_cg_steps_clear(&st);
		if (r < 0) {
			/* (a directory not made: its removal finds nothing) */
			al_cgroup_child_destroy(c);
			return r;
		}
		*ret = c;
		return 0;
	}
	for (size_t i = 0; i < N_CTRL && r == 0; i++) {
		const char *run = al_cgroup_path(cg, controllers[i]);
		if (!run)
			continue;
		c->dir[i] = xasprintf("%s/%s", run, name);
		if (mkdir(c->dir[i], 0755) < 0) {
			r = al_error_setsys(err, errno, "cgroup: mkdir %s", c->dir[i]);
			free(c->dir[i]);
			c->dir[i] = NULL;
		}
	}
	if (r == 0 && memory_bytes && c->dir[0]) {
		snprintf(v, sizeof(v), "%" PRIu64, memory_bytes);
		r = write_at(c, 0, "memory.limit_in_bytes", v, err);
	}
	if (r == 0 && pids && c->dir[1]) {
		snprintf(v, sizeof(v), "%" PRIu64, pids);
		r = write_at(c, 1, "pids.max", v, err);
	}
	if (r < 0) {
		al_cgroup_child_destroy(c);
		return r;
	}
	*ret = c;
	return 0;
}

int al_cgroup_child_attach(const struct al_cgroup_child *c, pid_t pid, struct al_error *err)
{
	char v[24];
	int r;

	snprintf(v, sizeof(v), "%d", (int)pid);
	for (size_t i = 0; c && i < N_CTRL; i++)
		if (c->dir[i] && (r = write_at(c, i, "cgroup.procs", v, err)) < 0)
			return r;
	return 0;
}

static uint64_t read_num(const struct al_cgroup_child *c, size_t i, const char *file,
			 const char *key)
{
	char buf[4096], *p;
	uint64_t v = 0;

	if (!c->dir[i])
		return 0;
	p = path_of(c, i, file);
	if (al_read_file(p, buf, sizeof(buf)) > 0) {
		if (!key) {
			v = strtoull(buf, NULL, 10);
		} else {
			size_t k = strlen(key);
			for (char *l = buf; l && *l;
			     l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
				if (strncmp(l, key, k) == 0 && l[k] == ' ') {
					v = strtoull(l + k + 1, NULL, 10);
					break;
				}
		}
	}
	free(p);
	return v;
}

void al_cgroup_child_stats(const struct al_cgroup_child *c, struct al_cgroup_child_stats *st)
{
	long hz = sysconf(_SC_CLK_TCK);

	memset(st, 0, sizeof(*st));
	if (!c)
		return;
	if (c->v2) {
		st->oom_kills = read_num(c, 0, "memory.events", "oom_kill");
		st->memory_peak = read_num(c, 0, "memory.peak", NULL);
		st->cpu_user_us = read_num(c, 0, "cpu.stat", "user_usec");
		st->cpu_system_us = read_num(c, 0, "cpu.stat", "system_usec");
		return;
	}
	st->oom_kills = read_num(c, 0, "memory.oom_control", "oom_kill");
	st->memory_peak = read_num(c, 0, "memory.max_usage_in_bytes", NULL);
	st->cpu_user_us = read_num(c, 2, "cpuacct.stat", "user") * 1000000ULL / (uint64_t)hz;
	st->cpu_system_us = read_num(c, 2, "cpuacct.stat", "system") * 1000000ULL / (uint64_t)hz;
}

/* One round: SIGKILL what is listed, by pidfd (al_cg_kill_listed: a pid
 * reaped and reused by a host process since it was read is not hit); true
 * if nothing was listed. */
static bool kill_round(const struct al_cgroup_child *c, size_t i)
{
	char buf[32], *p = path_of(c, i, "cgroup.procs");
	bool empty = al_read_file(p, buf, sizeof(buf)) <= 0;

	free(p);
	if (!empty)
		al_cg_kill_listed(c->dir[i]);
	return empty;
}

void al_cgroup_child_kill(const struct al_cgroup_child *c)
{
	/* v2: cgroup.kill (Linux 5.14) takes it whole; its list after. */
	if (c && c->v2 && c->dir[0]) {
		_cleanup_free_ char *p = path_of(c, 0, "cgroup.kill");
		(void)al_write_file_at(AT_FDCWD, p, "1", 1);
	}
	/* Every process is in the pids hierarchy's copy too; the memory one
	 * always exists where there is a cgroup at all. */
	for (size_t i = 0; c && i < N_CTRL; i++) {
		if (!c->dir[i])
			continue;
		for (int round = 0; round < 100 && !kill_round(c, i); round++) {
			struct timespec ts = {0, 1000000};
			nanosleep(&ts, NULL);
		}
		return;
	}
}

void al_cgroup_child_destroy(struct al_cgroup_child *c)
{
	if (!c)
		return;
	al_cgroup_child_kill(c);
	for (size_t i = 0; i < N_CTRL; i++) {
		/* A killed task leaves its cgroups a moment after it is gone. */
		for (int k = 0; c->dir[i] && k < 200 && rmdir(c->dir[i]) < 0 && errno == EBUSY;
		     k++) {
			struct timespec ts = {0, 1000000};
			nanosleep(&ts, NULL);
		}
		free(c->dir[i]);
	}
	free(c);
}
