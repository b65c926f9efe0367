/* Freezing a run's cgroup (al_cgroup_freeze): v2's cgroup.freeze, or on v1
 * the run's own cgroup in the freezer hierarchy (made for sessions only,
 * see want_freezer). A frozen task uses no CPU and keeps its memory. */
#include "cgroup/cgroup.h"
#include "cgroup/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/cleanup.h"
#include "core/sys.h"
#include "core/util.h"

/* How long a freeze may take to settle (a task in a syscall that does not
 * stop at once) before it is given up and undone. */
#define SETTLE_MS 2000

static bool file_says(const char *dir, const char *file, const char *want)
{
	_cleanup_free_ char *path = xasprintf("%s/%s", dir, file);
	char buf[512];

	if (al_read_file(path, buf, sizeof(buf)) <= 0)
		return false;
	if (strcmp(file, "cgroup.events") != 0)
		return strncmp(buf, want, strlen(want)) == 0;
	/* "frozen 1" as one of its lines */
	for (char *save = NULL, *l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
		if (strcmp(l, want) == 0)
			return true;
	return false;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
}

const char *al_cg_freezer_dir(const struct al_cgroup *cg)
{
	if (!cg)
		return NULL;
	if (cg->v2)
		return cg->h[0].dir;
	return al_cgroup_path(cg, "freezer");
}

bool al_cgroup_can_freeze(const struct al_cgroup *cg)
{
	return al_cg_freezer_dir(cg) != NULL;
}

int al_cgroup_freeze(const struct al_cgroup *cg, bool frozen, struct al_error *err)
{
	const char *dir = al_cg_freezer_dir(cg);
	const char *file = cg && cg->v2 ? "cgroup.freeze" : "freezer.state";
	const char *value = cg && cg->v2 ? (frozen ? "1" : "0") : (frozen ? "FROZEN" : "THAWED");
	const char *done_file = cg && cg->v2 ? "cgroup.events" : "freezer.state";
	const char *done = cg && cg->v2 ? (frozen ? "frozen 1" : "frozen 0") : value;
	int r;

	if (!dir)
		return al_error_set(
		    err, EOPNOTSUPP,
		    "pause: the run has no cgroup that can be frozen (no cgroup, or "
		    "no freezer hierarchy on this cgroup v1 host)");
	for (int ms = 0;; ms++) {
		/* v1 may stay FREEZING while a task is busy in the kernel:
		 * writing FROZEN again retries the tasks not yet stopped. */
		if ((ms == 0 || (!cg->v2 && ms % 10 == 0)) &&
		    (r = al_cg_write_str(dir, file, value, err)) < 0)
			return r;
		if (file_says(dir, done_file, done))
			return 0;
		if (ms >= SETTLE_MS)
			break;
		sleep_ms(1);
	}
	if (frozen) /* never leave it half frozen */
		al_cg_write_str(dir, file, cg->v2 ? "0" : "THAWED", NULL);
	return al_error_set(err, ETIMEDOUT, "%s: %s did not reach \"%s\" within %d ms", dir,
			    done_file, done, SETTLE_MS);
}

void al_cg_thaw_dir(const char *dir)
{
	/* Whichever the directory has: a frozen task dies of SIGKILL only
	 * once thawed (v1), and a v2 cgroup is thawed before its rmdir. */
	_cleanup_free_ char *v1 = xasprintf("%s/freezer.state", dir);
	_cleanup_free_ char *v2 = xasprintf("%s/cgroup.freeze", dir);

	if (al_write_file_at(AT_FDCWD, v1, "THAWED", 6) < 0)
		al_write_file_at(AT_FDCWD, v2, "0", 1);
}
