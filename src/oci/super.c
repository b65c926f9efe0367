/* A container's supervisor (super.h): the session run, the verbs'
 * connections, the container's process and its end. */
#include "oci/super.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <termios.h>
#include <unistd.h>

#include "cgroup/cgroup.h"
#include "core/cleanup.h"
#include "core/log.h"
#include "core/sys.h"
#include "core/util.h"
#include "oci/attach.h"
#include "oci/cmdlog.h"
#include "oci/proto.h"
#include "oci/state.h"
#include "run/run.h"
#include "run/session.h"

#define MAX_CONNS     64
#define DRAIN_END_MS  5000 /* the container's output written at its end, at most */
#define DRAIN_EXEC_MS 1000
#define START_WAIT_MS 30000

enum status {
	CREATED,
	RUNNING,
	STOPPED
};
static const char *const status_names[] = {"created", "running", "stopped"};

struct conn;

struct sup {
	const struct al_oci_super *s;
	struct al_run *run;
	struct al_loop *loop;
	enum status status;
	/* The container's process: its exec and stdio. */
	struct al_exec *main;
	struct al_oci_attach main_io;
	bool main_io_set;
	/* How it ended (exit.json): reason, code, signal. */
	bool ended;
	int code, sig;
	const char *reason;
	struct conn *conns[MAX_CONNS];
	/* The start verb's connection, answered once the process has
	 * started (as runc's start returns once its process runs), so that a
	 * kill right after start finds it. */
	struct conn *start_conn;
	struct al_watch *w_listen;
	struct al_signals *sigs;
	/* The session's own command's stderr, to the log (cmdlog.h). */
	struct al_oci_cmdlog cmdlog;
};

/* A verb's connection; an exec's stays until its exec has ended. */
struct conn {
	struct sup *sup;
	int fd;
	struct al_watch *w;
	struct al_exec *x;
	struct al_oci_attach io;
	bool io_set;
	bool gone; /* its verb hung up while its exec ran: freed at the exec's end */
};

static json_t *error_json(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static json_t *error_json(int code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return json_pack("{s:s, s:i}", "error", msg, "errno", code);
}

static void answer(struct conn *c, json_t *o)
{
	if (o && al_oci_send(c->fd, o, NULL, 0) < 0)
		al_debug("answering a verb: %s", strerror(errno));
	json_decref(o);
}

static void conn_free(struct conn *c)
{
	struct sup *S = c->sup;

	for (size_t i = 0; i < MAX_CONNS; i++)
		if (S->conns[i] == c)
			S->conns[i] = NULL;
	if (S->start_conn == c)
		S->start_conn = NULL;
	al_watch_removep(&c->w);
	al_closep(&c->fd);
	if (c->x) {
		/* Its verb is gone: so is its exec. Its end (exec_ended, which
		 * the kill brings) frees the rest: its output still comes. */
		c->gone = true;
		al_exec_signal(c->x, SIGKILL);
		return;
	}
	if (c->io_set)
		al_oci_attach_free(&c->io);
	free(c);
}

/* --- the container's end ------------------------------------------------- */

_Noreturn void al_oci_exit_as(int code, int sig)
{
	if (sig > 0 && sig < NSIG && sig != SIGSTOP && sig != SIGTSTP && sig != SIGTTIN &&
	    sig != SIGTTOU) {
		/* Die of it as the process did, without a core. */
		struct rlimit none = {0, 0};
		sigset_t set;
		setrlimit(RLIMIT_CORE, &none);
		prctl(PR_SET_DUMPABLE, 0);
		signal(sig, SIG_DFL);
		sigemptyset(&set);
		sigaddset(&set, sig);
		sigprocmask(SIG_UNBLOCK, &set, NULL);
		kill(getpid(), sig);
		kill(getpid(), SIGKILL);
	}
	_exit(code & 0xff);
}

static void record_end(struct sup *S, const char *reason, int code, int sig)
{
	struct al_error err = {0};

	if (S->ended)
		return;
	al_info("container %s: ended: %s (code %d, signal %d)", S->s->id, reason, code, sig);
	S->ended = true;
	S->reason = reason;
	S->code = code;
	S->sig = sig;
	S->status = STOPPED;
	json_t *o =
	    json_pack("{s:s, s:i, s:i}", "reason", reason, "exit_code", code, "signal", sig);
	if (!o || al_oci_json_write(S->s->dirfd, "exit.json", o, &err) < 0)
		al_err("container %s: %s", S->s->id, err.msg);
	json_decref(o);
}

static void main_output(void *data, int which, const void *buf, size_t len)
{
	struct sup *S = data;
	al_oci_attach_output(&S->main_io, which, buf, len);
}

/* start's answer, once: ok, or why the process did not run. */
static void answer_start(struct sup *S, json_t *ans)
{
	struct conn *c = S->start_conn;

	S->start_conn = NULL;
	if (c)
		answer(c, ans);
	else
		json_decref(ans);
}

static void main_started(void *data, pid_t pid)
{
	(void)pid;
	answer_start(data, json_pack("{s:b}", "ok", true));
}

static void main_ended(void *data, const struct al_exec_result *res)
{
	struct sup *S = data;

	S->main = NULL;
	/* Ended before it was reported started (its process could not be
	 * made): start says so. */
	answer_start(S, res->reason == AL_EXEC_FAILED
			    ? error_json(res->exec_errno ? res->exec_errno : EIO,
					 "the container's process could not be run: %s",
					 strerror(res->exec_errno ? res->exec_errno : EIO))
			    : json_pack("{s:b}", "ok", true));
	if (S->main_io_set)
		al_oci_attach_stop(&S->main_io);
	record_end(S, al_exec_reason_name(res->reason), res->exit_code,
		   res->reason == AL_EXEC_SIGNALED || res->reason == AL_EXEC_KILLED ? res->signal
										    : 0);
	if (res->reason == AL_EXEC_FAILED)
		al_err("container %s: its process could not be run: %s", S->s->id,
		       strerror(res->exec_errno));
	/* The container is its process: everything else in it ends too. */
	al_run_kill(S->run);
}

/* --- the verbs ------------------------------------------------------------- */

static json_t *state_json(struct sup *S)
{
	return json_pack("{s:s, s:b}", "status", status_names[S->status], "paused",
			 al_run_paused(S->run));
}

/* NULL: the answer comes when the process has started (start_conn). */
static json_t *do_start(struct conn *c)
{
	struct sup *S = c->sup;
	struct al_error err = {0};
	const struct al_plan *p = S->s->plan;

	if (S->status != CREATED)
		return error_json(EINVAL, "cannot start a container that is %s",
				  status_names[S->status]);
	if (al_run_paused(S->run))
		return error_json(EINVAL, "cannot start a paused container");
	struct al_exec_request req = {
	    .argv = p->argv, .cwd = p->workdir, .tty = S->s->tty, .ttyfilter = true};
	if (S->s->tty) {
		struct winsize ws = {0};
		if (ioctl(0, TIOCGWINSZ, &ws) == 0) {
			req.rows = ws.ws_row;
			req.cols = ws.ws_col;
		}
	}
	int in = fcntl(0, F_DUPFD_CLOEXEC, 3), out = fcntl(1, F_DUPFD_CLOEXEC, 3),
	    err_fd = S->s->tty ? out : fcntl(2, F_DUPFD_CLOEXEC, 3);
	al_oci_attach_init(&S->main_io, S->loop, in, out, err_fd);
	S->main_io_set = true;
	struct al_exec_io io = {
	    .data = S, .output = main_output, .started = main_started, .ended = main_ended};
	S->start_conn = c; /* before: a backend may report it at once */
	int r = al_run_exec(S->run, &req, &io, &S->main, &err);
	if (r < 0) {
		S->start_conn = NULL;
		al_oci_attach_free(&S->main_io);
		S->main_io_set = false;
		return error_json(-r, "starting the container's process: %s", err.msg);
	}
	al_oci_attach_start(&S->main_io, S->main);
	S->status = RUNNING;
	return NULL;
}

static bool terminates(int sig)
{
	switch (sig) {
	case SIGCHLD:
	case SIGCONT:
	case SIGSTOP:
	case SIGTSTP:
	case SIGTTIN:
	case SIGTTOU:
	case SIGURG:
	case SIGWINCH:
		return false;
	default:
		return true;
	}
}

static json_t *do_kill(struct sup *S, json_t *req)
{
	json_t *js = json_object_get(req, "signal");
	bool all = json_is_true(json_object_get(req, "all"));

	if (!json_is_integer(js) || json_integer_value(js) <= 0 || json_integer_value(js) >= NSIG)
		return error_json(EINVAL, "kill: not a signal number");
	int sig = (int)json_integer_value(js);
	if (S->status == STOPPED)
		return error_json(ESRCH, "kill %s: container not running", S->s->id);
	if (S->status == CREATED) {
		/* Its process has not started: a signal that would end it ends
		 * the container; others do nothing, as to a process that
		 * ignores them. */
		if (terminates(sig)) {
			record_end(S, "killed", 128 + sig, sig);
			al_run_kill(S->run);
		}
		return json_pack("{s:b}", "ok", true);
	}
	if (sig == SIGKILL && all) {
		record_end(S, "killed", 128 + sig, sig);
		al_run_kill(S->run);
		return json_pack("{s:b}", "ok", true);
	}
	if (S->main)
		al_exec_signal(S->main, sig);
	if (all)
		for (size_t i = 0; i < MAX_CONNS; i++)
			if (S->conns[i] && S->conns[i]->x)
				al_exec_signal(S->conns[i]->x, sig);
	return json_pack("{s:b}", "ok", true);
}

static json_t *do_pause(struct sup *S, bool pause)
{
	if (S->status != RUNNING && S->status != CREATED)
		return error_json(EINVAL, "container %s is %s", S->s->id, status_names[S->status]);
	int r = pause ? al_run_pause(S->run) : al_run_resume(S->run);
	if (r < 0)
		return error_json(-r, "%s: %s", pause ? "pause" : "resume",
				  r == -EOPNOTSUPP ? "this sandbox's cgroup cannot be frozen"
						   : strerror(-r));
	return json_pack("{s:b}", "ok", true);
}

static json_t *do_ps(struct sup *S)
{
	_cleanup_free_ pid_t *pids = NULL;
	size_t n = 0;
	json_t *a = json_array();

	if (al_run_pids(S->run, &pids, &n) < 0) {
		json_decref(a);
		return error_json(ENOENT, "container %s has no cgroup to list", S->s->id);
	}
	for (size_t i = 0; i < n; i++)
		json_array_append_new(a, json_integer(pids[i]));
	return json_pack("{s:o}", "pids", a);
}

static json_t *do_stats(struct sup *S)
{
	struct al_cgroup_stats st;
	_cleanup_free_ pid_t *pids = NULL;
	size_t n = 0;

	if (al_run_cgroup_stats(S->run, &st) < 0)
		return error_json(ENOENT, "container %s has no cgroup", S->s->id);
	al_run_pids(S->run, &pids, &n);
	const struct al_plan *p = S->s->plan;
	return json_pack("{s:{s:I, s:I, s:I}, s:{s:I, s:I, s:I, s:I}, s:{s:I, s:I}}", "cpu",
			 "usage_us", (json_int_t)st.cpu_usage_us, "user_us",
			 (json_int_t)st.cpu_user_us, "system_us", (json_int_t)st.cpu_system_us,
			 "memory", "usage", (json_int_t)st.memory_current, "max",
			 (json_int_t)st.memory_peak, "limit", (json_int_t)p->memory_bytes,
			 "oom_kills", (json_int_t)st.oom_kills, "pids", "current", (json_int_t)n,
			 "limit", (json_int_t)p->pids);
}

/* An exec's process: its argv, env, cwd and terminal. Its user must be
 * the container's: every process of a container runs as its user. */
static int exec_request(struct sup *S, json_t *proc, struct al_exec_request *req, char ***argv,
			char ***env, struct al_error *err)
{
	json_t *args = json_object_get(proc, "args"), *e = json_object_get(proc, "env"), *v;
	json_t *cwd = json_object_get(proc, "cwd"), *user = json_object_get(proc, "user");
	size_t i;

	if (!json_is_object(proc))
		return al_error_set(err, EINVAL, "exec: process: not an object");
	if (!json_is_array(args) || json_array_size(args) == 0 || json_array_size(args) > 65536)
		return al_error_set(err, EINVAL,
				    "exec: process.args: a non-empty array of strings");
	json_array_foreach(args, i, v)
	{
		if (!json_is_string(v))
			return al_error_set(err, EINVAL, "exec: process.args[%zu]: not a string",
					    i);
		al_strv_push(argv, json_string_value(v));
	}
	if (e && (!json_is_array(e) || json_array_size(e) > 65536))
		return al_error_set(err, EINVAL, "exec: process.env: an array of strings");
	json_array_foreach(e, i, v)
	{
		if (!json_is_string(v) || !strchr(json_string_value(v), '='))
			return al_error_set(err, EINVAL, "exec: process.env[%zu]: not NAME=VALUE",
					    i);
		al_strv_push(env, json_string_value(v));
	}
	if (cwd && (!json_is_string(cwd) || json_string_value(cwd)[0] != '/'))
		return al_error_set(err, EINVAL, "exec: process.cwd: not an absolute path");
	if (user) {
		json_t *uid = json_object_get(user, "uid"), *gid = json_object_get(user, "gid");
		if ((uid && (!json_is_integer(uid) ||
			     json_integer_value(uid) != (json_int_t)S->s->plan->uid)) ||
		    (gid && (!json_is_integer(gid) ||
			     json_integer_value(gid) != (json_int_t)S->s->plan->gid)))
			return al_error_set(err, EPERM,
					    "exec: process.user: every process of an airlock "
					    "container runs as its own user (%u:%u)",
					    (unsigned)S->s->plan->uid, (unsigned)S->s->plan->gid);
	}
	req->argv = *argv;
	req->env = *env;
	req->cwd = cwd ? json_string_value(cwd) : S->s->plan->workdir;
	req->tty = json_is_true(json_object_get(proc, "terminal"));
	req->ttyfilter = true;
	json_t *size = json_object_get(proc, "consoleSize");
	if (json_is_object(size)) {
		json_int_t h = json_integer_value(json_object_get(size, "height"));
		json_int_t w = json_integer_value(json_object_get(size, "width"));
		if (h > 0 && h < 65536 && w > 0 && w < 65536) {
			req->rows = (unsigned short)h;
			req->cols = (unsigned short)w;
		}
	}
	return 0;
}

static void exec_ended(void *data, const struct al_exec_result *res)
{
	struct conn *c = data;

	c->x = NULL;
	al_oci_attach_stop(&c->io);
	if (!c->gone) {
		al_oci_attach_drain(&c->io, DRAIN_EXEC_MS);
		answer(c, json_pack("{s:o}", "ended", al_exec_result_json(res)));
	}
	conn_free(c);
}

static void exec_output(void *data, int which, const void *buf, size_t len)
{
	struct conn *c = data;
	al_oci_attach_output(&c->io, which, buf, len);
}

static json_t *do_exec(struct conn *c, json_t *req, int *fds, size_t n_fds)
{
	struct sup *S = c->sup;
	struct al_error err = {0};
	struct al_exec_request xr = {0};
	_cleanup_(al_strv_freep) char **argv = NULL;
	_cleanup_(al_strv_freep) char **env = NULL;

	if (S->status != RUNNING)
		return error_json(EINVAL, "cannot exec in a container that is %s",
				  status_names[S->status]);
	if (c->x)
		return error_json(EALREADY, "one exec a connection");
	if (exec_request(S, json_object_get(req, "process"), &xr, &argv, &env, &err) < 0)
		return error_json(err.code, "%s", err.msg);
	if (n_fds != (xr.tty ? 1u : 3u))
		return error_json(EINVAL, "exec: %s descriptors expected, %zu came",
				  xr.tty ? "one (a terminal's)" : "three (stdin, stdout, stderr)",
				  n_fds);
	if (xr.tty)
		al_oci_attach_init(&c->io, S->loop, fds[0], dup(fds[0]), -1);
	else
		al_oci_attach_init(&c->io, S->loop, fds[0], fds[1], fds[2]);
	if (xr.tty)
		c->io.err_to_out = true;
	c->io_set = true;
	for (size_t i = 0; i < n_fds; i++)
		fds[i] = -1; /* the attach's now */
	struct al_exec_io io = {.data = c, .output = exec_output, .ended = exec_ended};
	int r = al_run_exec(S->run, &xr, &io, &c->x, &err);
	if (r < 0) {
		al_oci_attach_free(&c->io);
		c->io_set = false;
		c->x = NULL;
		return error_json(-r, "%s", err.msg);
	}
	al_oci_attach_start(&c->io, c->x);
	return json_pack("{s:b, s:s}", "started", true, "id", al_exec_id(c->x));
}

static void on_conn(struct al_watch *w, uint32_t events, void *data)
{
	struct conn *c = data;
	struct sup *S = c->sup;
	struct al_error err = {0};
	int fds[AL_OCI_MSG_FDS];
	size_t n_fds = 0;
	json_t *req = NULL;

	(void)w;
	(void)events;
	int r = al_oci_recv(c->fd, &req, fds, &n_fds, &err);
	if (r == -EAGAIN)
		return;
	if (r < 0) {
		if (r != -EPIPE)
			al_debug("container %s: a verb's message: %s", S->s->id, err.msg);
		conn_free(c);
		return;
	}
	const char *op = json_string_value(json_object_get(req, "op"));
	json_t *ans;
	if (!op)
		ans = error_json(EINVAL, "a message with no \"op\"");
	else if (strcmp(op, "exec") == 0)
		ans = do_exec(c, req, fds, n_fds);
	else if (n_fds)
		ans = error_json(EINVAL, "%s takes no descriptors", op);
	else if (strcmp(op, "state") == 0)
		ans = state_json(S);
	else if (strcmp(op, "start") == 0)
		ans = do_start(c);
	else if (strcmp(op, "kill") == 0)
		ans = do_kill(S, req);
	else if (strcmp(op, "pause") == 0)
		ans = do_pause(S, true);
	else if (strcmp(op, "resume") == 0)
		ans = do_pause(S, false);
	else if (strcmp(op, "ps") == 0)
		ans = do_ps(S);
	else if (strcmp(op, "stats") == 0)
		ans = do_stats(S);
	else if (strcmp(op, "signal") == 0 && c->x) {
		json_int_t sig = json_integer_value(json_object_get(req, "signal"));
		ans = sig > 0 && sig < NSIG ? (al_exec_signal(c->x, (int)sig), NULL)
					    : error_json(EINVAL, "signal: not a signal number");
	} else if (strcmp(op, "resize") == 0 && c->x) {
		json_int_t rows = json_integer_value(json_object_get(req, "rows"));
		json_int_t cols = json_integer_value(json_object_get(req, "cols"));
		if (rows > 0 && rows < 65536 && cols > 0 && cols < 65536)
			al_exec_resize(c->x, (unsigned short)rows, (unsigned short)cols);
		ans = NULL;
	} else
		ans = error_json(EINVAL, "unknown op \"%.32s\"", op);
	for (size_t i = 0; i < n_fds; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	json_decref(req);
	answer(c, ans);
}

static void on_listen(struct al_watch *w, uint32_t events, void *data)
{
	struct sup *S = data;
	size_t slot = MAX_CONNS;

	(void)w;
	(void)events;
	int fd = accept4(S->s->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd < 0)
		return;
	for (size_t i = 0; i < MAX_CONNS && slot == MAX_CONNS; i++)
		if (!S->conns[i])
			slot = i;
	if (slot == MAX_CONNS) {
		close(fd); /* too many at once: the verb says so */
		return;
	}
	struct conn *c = xcalloc(1, sizeof(*c));
	c->sup = S;
	c->fd = fd;
	c->w = al_loop_add(S->loop, fd, EPOLLIN, on_conn, c);
	if (!c->w) {
		close(fd);
		free(c);
		return;
	}
	S->conns[slot] = c;
}

static void on_signal(struct al_signals *sigs, int sig, void *data)
{
	struct sup *S = data;

	(void)sigs;
	if (sig != SIGWINCH)
		al_info("container %s: signal %d", S->s->id, sig);
	if (sig == SIGWINCH) {
		struct winsize ws;
		if (S->main && ioctl(0, TIOCGWINSZ, &ws) == 0)
			al_exec_resize(S->main, ws.ws_row, ws.ws_col);
		return;
	}
	/* A signal to the container's pid is the container's process's. */
	if (S->main)
		al_exec_signal(S->main, sig);
	else if (S->status == CREATED && terminates(sig)) {
		record_end(S, "killed", 128 + sig, sig);
		al_run_kill(S->run);
	}
}

/* --- setting up ---------------------------------------------------------- */

static void close_others(const struct al_oci_super *s)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d))) {
		int fd = atoi(de->d_name);
		if (de->d_name[0] == '.' || fd <= 2 || fd == dirfd(d) || fd == s->dirfd ||
		    fd == s->rootfd || fd == s->listen_fd || fd == s->sync_fd || fd == s->keep_fd)
			continue;
		close(fd);
	}
	closedir(d);
}

static void sync_say(int fd, const char *msg)
{
	if (send(fd, msg, strlen(msg), MSG_NOSIGNAL) < 0)
		al_debug("telling create: %s", strerror(errno));
}

/* Before "go": the parent's error or death removes the container again. */
static _Noreturn void abandon(struct sup *S, const char *why)
{
	struct al_error err = {0};

	al_err("container %s: %s", S->s->id, why);
	if (S->run) {
		al_run_kill(S->run);
		al_run_wait(S->run, NULL);
		al_oci_cmdlog_end(&S->cmdlog);
		al_run_free(S->run);
	}
	if (al_oci_dir_remove(S->s->rootfd, S->s->id, &err) < 0)
		al_err("container %s: %s", S->s->id, err.msg);
	_exit(1);
}

_Noreturn void al_oci_super_main(const struct al_oci_super *s)
{
	static const int handled[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH};
	struct sup S = {.s = s, .status = CREATED};
	struct al_error err = {0};
	sigset_t set;
	char buf[64];

	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	for (size_t i = 0; i < AL_ARRAY_SIZE(handled); i++)
		sigaddset(&set, handled[i]);
	sigprocmask(SIG_BLOCK, &set, NULL);
	/* Before anything is made: the sandbox, its cgroups and (without a
	 * gateway: a pod's sandbox container has none) nothing of the
	 * run's opens a socket of this namespace. */
	if (s->pod_netns_fd >= 0) {
		if (setns(s->pod_netns_fd, CLONE_NEWNET) < 0) {
			char msg[128];
			snprintf(msg, sizeof(msg),
				 "error: entering the pod's network namespace (the sandbox "
				 "container's supervisor): %s",
				 strerror(errno));
			sync_say(s->sync_fd, msg);
			_exit(1);
		}
		close(s->pod_netns_fd);
	}
	close_others(s);
	/* process.oomScoreAdj (0 to 1000: raising it needs no privilege):
	 * ours, so that the sandbox's init and every process of the
	 * container inherit it. */
	if (s->plan->root && s->plan->root->oom_score_adj > 0) {
		char v[16];
		snprintf(v, sizeof(v), "%d", s->plan->root->oom_score_adj);
		int r = al_write_file_at(AT_FDCWD, "/proc/self/oom_score_adj", v, strlen(v));
		if (r < 0) {
			char msg[128];
			snprintf(msg, sizeof(msg), "error: process.oomScoreAdj %d: %s",
				 s->plan->root->oom_score_adj, strerror(-r));
			sync_say(s->sync_fd, msg);
			_exit(1);
		}
	}
	struct al_audit *audit = NULL;
	if (s->audit_path && al_audit_open(s->audit_path, s->run_id, &audit, &err) < 0) {
		char msg[600];
		snprintf(msg, sizeof(msg), "error: io.airlock.audit: %s", err.msg);
		sync_say(s->sync_fd, msg);
		_exit(1);
	}
	struct al_supervisor_io io = {.stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1};
	al_oci_cmdlog_init(&S.cmdlog, s->id);
	io.stderr_fd = S.cmdlog.wr;
	struct al_run_request req = {.plan = s->plan,
				     .audit = audit,
				     .start_extra = s->start_extra,
				     .run_id = s->run_id,
				     .cred = s->cred,
				     .result_dirfd = s->dirfd,
				     .result_name = "result.json",
				     .result_path = "result.json",
				     .confine_self = true,
				     .session = true,
				     .probed = true};
	if (al_run_start(&req, &io, &S.run, &err) < 0) {
		char msg[600];
		snprintf(msg, sizeof(msg), "error: %s", err.msg);
		sync_say(s->sync_fd, msg);
		al_run_wait(S.run, NULL);
		al_run_free(S.run);
		_exit(1);
	}
	S.loop = al_run_loop(S.run);
	al_oci_cmdlog_watch(&S.cmdlog, S.loop);
	while (!al_run_session_ready(S.run)) {
		if (al_run_step(S.run, 100)) {
			char msg[600];
			const struct al_run_result *res = al_run_wait(S.run, NULL);
			char line[512] = "";
			al_result_describe(s->plan, res, line, sizeof(line));
			snprintf(msg, sizeof(msg), "error: the sandbox could not be made: %s",
				 line[0] ? line : "it ended");
			sync_say(s->sync_fd, msg);
			al_oci_cmdlog_end(&S.cmdlog);
			al_run_free(S.run);
			_exit(1);
		}
	}
	sync_say(s->sync_fd, "ready");
	ssize_t n;
	do
		n = recv(s->sync_fd, buf, sizeof(buf) - 1, 0);
	while (n < 0 && errno == EINTR);
	if (n != 2 || memcmp(buf, "go", 2) != 0)
		abandon(&S, "create did not finish; the container is removed again");
	close(s->sync_fd);

	S.w_listen = al_loop_add(S.loop, s->listen_fd, EPOLLIN, on_listen, &S);
	S.sigs = al_loop_signals(S.loop, &set, on_signal, &S);
	if (!S.w_listen || !S.sigs) {
		record_end(&S, "setup-error", 125, 0);
		al_run_kill(S.run);
	}
	while (!al_run_step(S.run, -1))
		;
	const struct al_run_result *res = al_run_wait(S.run, NULL);
	if (!S.ended) /* the sandbox ended on its own: its lifetime, a limit */
		record_end(&S, al_reason_name(res->reason), res->exit_code,
			   res->signal > 0 ? res->signal : 0);
	if (S.main_io_set) {
		al_oci_attach_drain(&S.main_io, DRAIN_END_MS);
		al_oci_attach_free(&S.main_io);
	}
	for (size_t i = 0; i < MAX_CONNS; i++)
		if (S.conns[i])
			conn_free(S.conns[i]);
	al_oci_cmdlog_end(&S.cmdlog);
	al_watch_remove(S.w_listen);
	al_signals_free(S.sigs);
	al_run_free(S.run);
	al_oci_cmdlog_free(&S.cmdlog); /* its write end, the relay's until here */
	al_oci_exit_as(S.code, S.sig);
}
