/* An exec's own cgroup under the run's (see child.h). */
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
#include "core/sys.h"
#include "core/util.h"

static const char *const controllers[] = {"memory", "pids", "cpuacct"};
#define N_CTRL (sizeof(controllers) / sizeof(controllers[0]))

struct al_cgroup_child {
	char *dir[N_CTRL]; /* NULL where the run has no such hierarchy */
};

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
	if (!cg || al_cgroup_clone_fd(cg) >= 0)
		return 0;
	c = xcalloc(1, sizeof(*c));
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
