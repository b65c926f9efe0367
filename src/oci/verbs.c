/* The verbs on an existing container (oci.h): each opens its state
 * directory and asks its supervisor; a supervisor that is gone means the
 * container has stopped (exit.json says how; none: it died, and the
 * state says so). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cgroup/cgroup.h"
#include "core/cleanup.h"
#include "core/log.h"
#include "core/sys.h"
#include "core/util.h"
#include "oci/internal.h"
#include "ids/slots.h"
#include "oci/proto.h"

int al_oci_errors(const struct al_errors *errs, struct al_error *err)
{
	char *text = NULL;
	size_t len = 0;
	int code = EINVAL;
	FILE *f = open_memstream(&text, &len);

	for (size_t i = 0; f && i < al_errors_count(errs); i++) {
		struct al_error e = {0};
		if (al_errors_first(errs, i, &e) == 0 && !e.msg[0])
			break;
		if (i == 0)
			code = e.code ? e.code : EINVAL;
		fprintf(f, "%s%s", i ? "; " : "", e.msg);
	}
	if (f)
		fclose(f);
	int r = al_error_set(err, code, "%s", text ? text : "invalid");
	free(text);
	return r;
}

int al_oci_box_open(const struct al_oci_ctx *g, const char *id, struct al_oci_box *b,
		    struct al_error *err)
{
	struct al_error e = {0};
	int r;

	*b = (struct al_oci_box){.rootfd = -1, .dirfd = -1};
	if ((r = al_oci_id_check(id, err)) < 0)
		return r;
	if ((r = al_oci_root_open(g->root, &b->rootfd, err)) < 0 ||
	    (r = al_oci_dir_open(b->rootfd, id, &b->dirfd, err)) < 0) {
		al_oci_box_close(b);
		return r;
	}
	r = al_oci_state_read(b->dirfd, &b->st, &e);
	if (r == -ENOENT) {
		/* A create that did not finish: still under way while its lock
		 * is held, abandoned once it is free. */
		int fd = openat(b->rootfd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		b->abandoned = fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0;
		if (fd >= 0)
			close(fd);
		b->st.id = xstrdup(id);
		return 0;
	}
	if (r < 0) {
		al_oci_box_close(b);
		return al_error_set(err, -r, "container %s: %s", id, e.msg);
	}
	b->complete = true;
	b->alive = al_oci_alive(&b->st);
	return 0;
}

void al_oci_box_close(struct al_oci_box *b)
{
	al_closep(&b->dirfd);
	al_closep(&b->rootfd);
	al_oci_state_clear(&b->st);
}

int al_oci_box_connect(const struct al_oci_box *b, struct al_error *err)
{
	char path[64];

	al_oci_dir_path(b->dirfd, "sock", path, sizeof(path));
	int fd = al_oci_connect(path, AL_OCI_ANSWER_MS);
	if (fd < 0)
		return al_error_setsys(err, -fd, "container %s: its supervisor (pid %d)",
				       b->st.id ? b->st.id : "?", (int)b->st.pid);
	return fd;
}

int al_oci_box_call(const struct al_oci_box *b, const char *op, json_t *extra, json_t **ret,
		    struct al_error *err)
{
	json_t *o = extra ? extra : json_object();
	int fd = al_oci_box_connect(b, err);

	*ret = NULL;
	if (fd < 0) {
		json_decref(o);
		return fd;
	}
	json_object_set_new(o, "op", json_string(op));
	int r = al_oci_call(fd, o, ret, err);
	json_decref(o);
	close(fd);
	return r;
}

bool al_oci_box_wait_gone(const struct al_oci_box *b, int ms)
{
	int pidfd = (int)syscall(SYS_pidfd_open, b->st.pid, 0);

	if (pidfd < 0)
		return !al_oci_alive(&b->st);
	/* The pid may have been reused before the pidfd was opened. */
	if (!al_oci_alive(&b->st)) {
		close(pidfd);
		return true;
	}
	struct pollfd pf = {.fd = pidfd, .events = POLLIN};
	int n = poll(&pf, 1, ms);
	close(pidfd);
	return n > 0;
}

int al_oci_box_exit(const struct al_oci_box *b, int *sig)
{
	json_t *o = al_oci_json_read(b->dirfd, "exit.json");
	int code = -1;

	*sig = 0;
	if (o) {
		json_int_t c = json_integer_value(json_object_get(o, "exit_code"));
		json_int_t s = json_integer_value(json_object_get(o, "signal"));
		if (s > 0 && s < NSIG) {
			*sig = (int)s;
			code = 128 + (int)s;
		} else if (c >= 0 && c < 256) {
			code = (int)c;
		}
		json_decref(o);
	}
	return code;
}

/* created, running, paused or stopped, as the supervisor says or its
 * absence means. */
static const char *status_of(const struct al_oci_box *b, char *why, size_t len)
{
	json_t *ans = NULL;
	struct al_error err = {0};

	why[0] = '\0';
	if (!b->complete && b->abandoned) {
		snprintf(why, len, "its create did not finish");
		return "stopped";
	}
	if (!b->complete)
		return "creating";
	if (!b->alive || al_oci_box_call(b, "state", NULL, &ans, &err) < 0) {
		int sig;
		if (!b->alive && al_oci_box_exit(b, &sig) < 0)
			snprintf(why, len,
				 "its supervisor (pid %d) is gone without saying how the "
				 "container ended",
				 (int)b->st.pid);
		else if (b->alive && err.msg[0])
			snprintf(why, len, "%s", err.msg);
		return "stopped";
	}
	bool paused = json_is_true(json_object_get(ans, "paused"));
	const char *st = json_string_value(json_object_get(ans, "status"));
	static const char *const known[] = {"created", "running", "stopped"};
	const char *s = "stopped";
	for (size_t i = 0; st && i < AL_ARRAY_SIZE(known); i++)
		if (strcmp(st, known[i]) == 0)
			s = known[i];
	json_decref(ans);
	return paused ? "paused" : s;
}

/* The hooks of kind create kept (hooks.json), run with the state as it is
 * now; a failure is a warning (poststart, poststop). */
static void after_hooks(const struct al_oci_box *b, const char *kind, const char *status)
{
	json_t *hooks = al_oci_json_read(b->dirfd, "hooks.json");
	struct al_error err = {0};

	if (!hooks)
		return;
	json_t *st =
	    json_pack("{s:s, s:s, s:s, s:i, s:s, s:o}", "ociVersion",
		      b->st.oci_version ? b->st.oci_version : "1.0.2", "id", b->st.id, "status",
		      status, "pid", strcmp(status, "stopped") ? (int)b->st.pid : 0, "bundle",
		      b->st.bundle ? b->st.bundle : "", "annotations",
		      b->st.annotations ? json_incref(b->st.annotations) : json_object());
	if (al_oci_hooks_run(hooks, kind, st, b->st.bundle, &err) < 0)
		al_warn("container %s: %s", b->st.id, err.msg);
	json_decref(st);
	json_decref(hooks);
}

int al_oci_start(const struct al_oci_ctx *g, const char *id, struct al_error *err)
{
	struct al_oci_box b;
	json_t *ans = NULL;
	int r;

	if ((r = al_oci_box_open(g, id, &b, err)) < 0)
		return r;
	if (!b.complete || !b.alive)
		r = al_error_set(err, EINVAL, "cannot start container %s: it is %s", id,
				 b.complete ? "stopped" : "not created yet");
	else
		r = al_oci_box_call(&b, "start", NULL, &ans, err);
	if (r == 0)
		after_hooks(&b, "poststart", "running");
	json_decref(ans);
	al_oci_box_close(&b);
	return r;
}

int al_oci_state(const struct al_oci_ctx *g, const char *id, FILE *out, struct al_error *err)
{
	struct al_oci_box b;
	char why[300];
	int r;

	if ((r = al_oci_box_open(g, id, &b, err)) < 0)
		return r;
	const char *status = status_of(&b, why, sizeof(why));
	json_t *o = json_pack("{s:s, s:s, s:s, s:i, s:s, s:s, s:o}", "ociVersion",
			      b.st.oci_version ? b.st.oci_version : "1.0.2", "id", id, "status",
			      status, "pid", strcmp(status, "stopped") ? (int)b.st.pid : 0,
			      "bundle", b.st.bundle ? b.st.bundle : "", "created",
			      b.st.created ? b.st.created : "", "annotations",
			      b.st.annotations ? json_incref(b.st.annotations) : json_object());
	if (why[0])
		json_object_set_new(o, "io.airlock.end", json_string(why));
	char *text = json_dumps(o, JSON_INDENT(2));
	fprintf(out, "%s\n", text);
	free(text);
	json_decref(o);
	al_oci_box_close(&b);
	return 0;
}

/* op asked of a container's supervisor, when it runs (-code with err
 * naming it otherwise): 0 with *ans, or -errno. */
static int call_running(const struct al_oci_ctx *g, const char *id, const char *op, json_t *extra,
			int code, json_t **ans, struct al_error *err)
{
	struct al_oci_box b;
	int r;

	*ans = NULL;
	if ((r = al_oci_box_open(g, id, &b, err)) < 0) {
		json_decref(extra);
		return r;
	}
	if (!b.complete || !b.alive) {
		json_decref(extra);
		/* runc's words, which engines match (containerd's shim takes a
		 * kill's "container not running" as the process being gone). */
		r = al_error_set(err, code, "%s %s: container not running", op, id);
	} else {
		r = al_oci_box_call(&b, op, extra, ans, err);
	}
	al_oci_box_close(&b);
	return r;
}

static bool sig_ok(int sig)
{
	return sig > 0 && sig < NSIG;
}

int al_oci_kill(const struct al_oci_ctx *g, const char *id, int sig, bool all, struct al_error *err)
{
	json_t *ans = NULL;
	int r;

	if (!sig_ok(sig) && sig != 0)
		return al_error_set(err, EINVAL, "%d is not a signal", sig);
	/* 0, as kill(2)'s: whether it runs, nothing sent. */
	r = sig == 0
		? call_running(g, id, "state", NULL, ESRCH, &ans, err)
		: call_running(g, id, "kill", json_pack("{s:i, s:b}", "signal", sig, "all", all),
			       ESRCH, &ans, err);
	json_decref(ans);
	return r;
}

/* The run's record (its state directory's result.json) kept where the
 * audit stream is, when the runtime had an --audit-dir at create: the
 * state directory goes with delete. */
static void keep_record(const struct al_oci_box *b)
{
	json_t *o;
	struct al_error err = {0};

	if (!b->st.record || !(o = al_oci_json_read(b->dirfd, "result.json")))
		return;
	char *slash = strrchr(b->st.record, '/');
	_cleanup_free_ char *dir = xasprintf("%.*s", (int)(slash - b->st.record), b->st.record);
	_cleanup_close_ int dfd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0 || al_oci_json_write(dfd, slash + 1, o, &err) < 0)
		al_warn("container %s: keeping its record in %s: %s", b->st.id, b->st.record,
			err.msg[0] ? err.msg : strerror(errno));
	json_decref(o);
}

int al_oci_delete(const struct al_oci_ctx *g, const char *id, bool force, struct al_error *err)
{
	struct al_oci_box b;
	char why[300];
	json_t *ans = NULL;
	int r;

	if ((r = al_oci_box_open(g, id, &b, err)) < 0)
		return r;
	if (b.complete && b.alive) {
		const char *status = status_of(&b, why, sizeof(why));
		if (strcmp(status, "stopped") != 0) {
			if (!force && strcmp(status, "created") != 0) {
				r = al_error_set(err, EBUSY,
						 "cannot delete container %s that is %s (use "
						 "--force)",
						 id, status);
				goto out;
			}
			al_oci_box_call(&b, "kill",
					json_pack("{s:i, s:b}", "signal", SIGKILL, "all", true),
					&ans, NULL);
			json_decref(ans);
		}
		if (!al_oci_box_wait_gone(&b, 15000)) {
			r = al_error_set(err, ETIMEDOUT,
					 "container %s: its supervisor (pid %d) did not end", id,
					 (int)b.st.pid);
			goto out;
		}
	}
	keep_record(&b);
	if (b.complete)
		after_hooks(&b, "poststop", "stopped");
	int sig;
	bool dead = b.complete && al_oci_box_exit(&b, &sig) < 0;
	struct al_error e = {0};
	/* Its supervisor is gone: at a cgroupsPath, what it could not
	 * remove; if it died without its end, also what it would have
	 * removed (the run's cgroups, its id slot), as `airlock gc` removes
	 * a killed airlock's. */
	if (b.complete && b.st.cgroup_path && al_cgroup_remove_at(b.st.cgroup_path, dead, &e) < 0)
		al_warn("container %s: cleaning up its cgroup: %s", id, e.msg);
	if (dead && (al_cgroup_gc(&e) < 0 || al_ids_gc(NULL, &e) < 0))
		al_warn("container %s: cleaning up after its supervisor: %s", id, e.msg);
	r = al_oci_dir_remove(b.rootfd, id, err);
out:
	al_oci_box_close(&b);
	return r;
}

int al_oci_pause(const struct al_oci_ctx *g, const char *id, bool pause, struct al_error *err)
{
	json_t *ans = NULL;
	int r = call_running(g, id, pause ? "pause" : "resume", NULL, EINVAL, &ans, err);

	json_decref(ans);
	return r;
}

int al_oci_ps(const struct al_oci_ctx *g, const char *id, bool json, FILE *out,
	      struct al_error *err)
{
	struct al_oci_box b;
	json_t *ans = NULL;
	int r;

	if ((r = al_oci_box_open(g, id, &b, err)) < 0)
		return r;
	if (!b.complete || !b.alive) {
		if (json)
			fprintf(out, "[]\n");
		goto out;
	}
	if ((r = al_oci_box_call(&b, "ps", NULL, &ans, err)) < 0)
		goto out;
	json_t *pids = json_object_get(ans, "pids"), *v;
	size_t i;
	if (json) {
		char *text = json_dumps(pids, JSON_COMPACT);
		fprintf(out, "%s\n", text);
		free(text);
		goto out;
	}
	fprintf(out, "PID    CMD\n");
	json_array_foreach(pids, i, v)
	{
		char path[64], cmd[256] = "";
		snprintf(path, sizeof(path), "/proc/%lld/comm", (long long)json_integer_value(v));
		if (al_read_file(path, cmd, sizeof(cmd)) > 0)
			cmd[strcspn(cmd, "\n")] = '\0';
		fprintf(out, "%-6lld %s\n", (long long)json_integer_value(v), cmd);
	}
out:
	json_decref(ans);
	al_oci_box_close(&b);
	return r;
}

int al_oci_events(const struct al_oci_ctx *g, const char *id, bool stats, unsigned interval_s,
		  FILE *out, struct al_error *err)
{
	for (;;) {
		json_t *ans = NULL;
		int r = call_running(g, id, "stats", NULL, ESRCH, &ans, err);
		if (r < 0)
			return stats ? r : 0;
		json_t *o = json_pack("{s:s, s:s, s:o}", "type", "stats", "id", id, "data", ans);
		char *text = json_dumps(o, JSON_COMPACT);
		fprintf(out, "%s\n", text);
		fflush(out);
		free(text);
		json_decref(o);
		if (stats)
			return 0;
		sleep(interval_s ? interval_s : 5);
	}
}

int al_oci_list(const struct al_oci_ctx *g, bool json, bool quiet, FILE *out, struct al_error *err)
{
	_cleanup_close_ int rootfd = -1;
	int r;

	if ((r = al_oci_root_open(g->root, &rootfd, err)) < 0)
		return r;
	_cleanup_(al_strv_freep) char **ids = al_oci_ids(rootfd);
	json_t *a = json_array();
	if (!json && !quiet)
		fprintf(out, "ID\tPID\tSTATUS\tBUNDLE\tCREATED\n");
	for (size_t i = 0; ids && ids[i]; i++) {
		struct al_oci_box b;
		char why[300];
		if (al_oci_box_open(g, ids[i], &b, NULL) < 0)
			continue;
		const char *status = status_of(&b, why, sizeof(why));
		int pid = strcmp(status, "stopped") ? (int)b.st.pid : 0;
		if (quiet)
			fprintf(out, "%s\n", ids[i]);
		else if (json)
			json_array_append_new(
			    a, json_pack("{s:s, s:i, s:s, s:s, s:s}", "id", ids[i], "pid", pid,
					 "status", status, "bundle", b.st.bundle ? b.st.bundle : "",
					 "created", b.st.created ? b.st.created : ""));
		else
			fprintf(out, "%s\t%d\t%s\t%s\t%s\n", ids[i], pid, status,
				b.st.bundle ? b.st.bundle : "", b.st.created ? b.st.created : "");
		al_oci_box_close(&b);
	}
	if (json && !quiet) {
		char *text = json_dumps(a, JSON_COMPACT);
		fprintf(out, "%s\n", text);
		free(text);
	}
	json_decref(a);
	return 0;
}

int al_oci_run(const struct al_oci_ctx *g, const char *id, const struct al_oci_create_opts *o,
	       bool detach, int *status, struct al_error *err)
{
	struct al_oci_box b;
	int r, sig;

	*status = 0;
	if ((r = al_oci_create(g, id, o, err)) < 0)
		return r;
	if ((r = al_oci_start(g, id, err)) < 0) {
		al_oci_delete(g, id, true, NULL);
		return r;
	}
	if (detach)
		return 0;
	if ((r = al_oci_box_open(g, id, &b, err)) < 0)
		return r;
	while (!al_oci_box_wait_gone(&b, 1000))
		;
	r = al_oci_box_exit(&b, &sig);
	*status = r < 0 ? 255 : r;
	al_oci_box_close(&b);
	return al_oci_delete(g, id, true, err);
}
