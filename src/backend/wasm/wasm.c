/* The wasm backend: a WebAssembly module under WASI preview 1 (or Python
 * under Pyodide, --language python) run by Node's V8 *inside* the native
 * sandbox. Node's WASI follows symlinks out of a preopen and says it is no
 * sandbox, so the native layer around it keeps every promise (file view,
 * no network, pid namespace, seccomp, cgroup limits); this layer adds the
 * module's own capabilities: preopens for the plan's inputs and scratch
 * only, no socket calls, no signals, and a cap on its linear memory.
 *
 * Each op lowers the run's plan to a derived one (struct wasm_run): the
 * command becomes node with the driver (driver.mjs, built into the binary
 * as al_wasm_driver by src/serve/ctx/embed.py) and a JSON config, and the
 * file tree gains /.airlock with the module (or Pyodide) read-only; the
 * native backend then runs that plan. Nothing in the derived plan but the
 * new argv and the added entries is owned by it. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/native/monitor.h"
#include "backend/native/state.h"
#include "core/cleanup.h"
#include "core/util.h"

extern const char al_wasm_driver[];

#define WASM_DIR     "/.airlock"
#define WASM_MODULE  WASM_DIR "/module.wasm"
#define WASM_PYODIDE WASM_DIR "/pyodide"
/* What node itself needs beside the module's linear memory (V8's heap,
 * Node's own), kept out of the memory limit for the cap. */
#define NODE_RESERVE (128ull << 20)
#define WASM_PAGE    65536ull
#define WASM_MAX_CAP (65536ull * WASM_PAGE) /* wasm32's 4 GiB */
/* The plan's environment reaches node under this prefix, which node reads
 * nothing of: NODE_OPTIONS, OPENSSL_CONF and their kind are the engine's
 * configuration (NODE_OPTIONS=--require runs JavaScript with node's whole
 * API), never the module's. The driver strips the prefix again. */
#define WASM_ENV_PREFIX "AIRLOCK_WASM_ENV_"

static const char *const node_paths[] = {"/usr/bin/node", "/usr/local/bin/node", NULL};

struct wasm_run {
	/* First: the events it relays to (al_sandbox_events_relay). */
	const struct al_sandbox_events *orig_events;
	struct al_plan plan;		 /* the run's plan with our argv and fs */
	const struct al_plan *orig;	 /* the run's (borrowed) */
	size_t n_orig_fs;		 /* plan.fs[n_orig_fs..] are ours */
	uint64_t memory_cap;		 /* the module's linear memory, bytes */
	json_t *preopens;		 /* sandbox directory → itself */
	char **envp;			 /* the plan's, prefixed (plan.envp when set) */
	struct al_sandbox_events events; /* forwards to orig_events */
};

static const char *find_node(void)
{
	for (size_t i = 0; node_paths[i]; i++)
		if (access(node_paths[i], X_OK) == 0)
			return node_paths[i];
	return NULL;
}

/* Pyodide, installed with npm beside the binary (the build directory's
 * pyodide/, from src/backend/wasm/pyodide/package-lock.json) or in
 * /usr/lib/airlock/pyodide. */
static int find_pyodide(char *buf, size_t len)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	const char *dirs[2] = {NULL, "/usr/lib/airlock/pyodide"};

	if (n > 0) {
		exe[n] = '\0';
		dirs[0] = dirname(exe);
	}
	for (size_t i = 0; i < 2; i++) {
		char probe[PATH_MAX];
		if (!dirs[i])
			continue;
		if (i == 0)
			snprintf(buf, len, "%s/pyodide/node_modules/pyodide", dirs[i]);
		else
			snprintf(buf, len, "%s/node_modules/pyodide", dirs[i]);
		snprintf(probe, sizeof(probe), "%s/pyodide.mjs", buf);
		if (access(probe, R_OK) == 0)
			return 0;
	}
	snprintf(buf, len, "%s/pyodide/node_modules/pyodide", dirs[0] ? dirs[0] : "?");
	return -ENOENT;
}

static uint64_t memory_cap(const struct al_plan *p)
{
	uint64_t cap = p->memory_bytes > 2 * NODE_RESERVE ? p->memory_bytes - NODE_RESERVE
							  : p->memory_bytes / 2;

	if (!p->memory_bytes || cap > WASM_MAX_CAP)
		cap = WASM_MAX_CAP;
	cap -= cap % WASM_PAGE;
	return cap < WASM_PAGE ? WASM_PAGE : cap;
}

/* The parent directory of a sandbox path, as a new string. */
static char *parent_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash == path ? xstrdup("/") : xasprintf("%.*s", (int)(slash - path), path);
}

/* The directories the code may reach: the scratch's workdir and /tmp, and
 * each input (a file's directory: WASI opens directories). */
static int add_preopens(struct wasm_run *w, const struct al_plan *p, struct al_error *err)
{
	w->preopens = json_object();
	for (size_t i = 0; i < p->n_fs; i++) {
		const struct al_fs_entry *e = &p->fs[i];
		if (e->kind == AL_FS_SCRATCH && e->source && strcmp(e->source, "shm") != 0) {
			json_object_set_new(w->preopens, e->path, json_string(e->path));
			continue;
		}
		if (e->kind != AL_FS_HOST || !e->what ||
		    (strncmp(e->what, "ro ", 3) != 0 && strncmp(e->what, "rw ", 3) != 0))
			continue;
		_cleanup_free_ char *dir = e->dir ? xstrdup(e->path) : parent_of(e->path);
		if (strcmp(dir, "/") == 0)
			return al_error_set(err, EINVAL,
					    "backend wasm: input %s sits in / and WASI preopens "
					    "directories: mount it in a directory of its own "
					    "(e.g. /input%s)",
					    e->path, e->path);
		json_object_set_new(w->preopens, dir, json_string(dir));
	}
	return 0;
}

/* A read-only host file or directory at path in /.airlock. */
static int add_host(struct wasm_run *w, const char *host, const char *path, const char *what,
		    bool dir, struct al_error *err)
{
	struct al_fs_entry *e = &w->plan.fs[w->plan.n_fs];
	struct stat st;

	if (stat(host, &st) < 0)
		return al_error_setsys(err, errno, "backend wasm: %s %s", what, host);
	if (dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))
		return al_error_set(err, EINVAL, "backend wasm: %s %s is not a %s", what, host,
				    dir ? "directory" : "regular file");
	*e = (struct al_fs_entry){.kind = AL_FS_HOST,
				  .path = xstrdup(path),
				  .source = xstrdup(host),
				  .access = AL_FS_READ,
				  .dir = dir,
				  .dev = st.st_dev,
				  .ino = st.st_ino,
				  .nlink = st.st_nlink,
				  .what = xasprintf("wasm %s", what)};
	if (!w->orig->rootless) {
		e->as_owner = true;
		e->owner_uid = st.st_uid;
		e->owner_gid = st.st_gid;
	}
	w->plan.n_fs++;
	return 0;
}

/* The module named by argv[0] (a host path): a regular file that starts
 * with WebAssembly's magic, resolved with no link left in it. Opened
 * without blocking and checked before the read, so that a FIFO or a device
 * is refused rather than waited on; V8 compiles no module over 1 GiB. */
#define WASM_MAX_MODULE (1ull << 30)
static int module_path(const char *arg, char *real, struct al_error *err)
{
	unsigned char magic[4] = {0};
	struct stat st;

	if (!realpath(arg, real))
		return al_error_setsys(err, errno, "backend wasm: module %s", arg);
	_cleanup_close_ int fd = open(real, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return al_error_setsys(err, errno, "backend wasm: module %s", real);
	if (fstat(fd, &st) < 0)
		return al_error_setsys(err, errno, "backend wasm: module %s", real);
	if (!S_ISREG(st.st_mode))
		return al_error_set(err, EINVAL,
				    "backend wasm: module %s is not a regular file; give the "
				    "module's path as the command",
				    real);
	if ((uint64_t)st.st_size > WASM_MAX_MODULE)
		return al_error_set(err, EFBIG,
				    "backend wasm: module %s is %lld bytes; the engine compiles "
				    "at most %llu",
				    real, (long long)st.st_size,
				    (unsigned long long)WASM_MAX_MODULE);
	if (read(fd, magic, sizeof(magic)) != sizeof(magic) || memcmp(magic, "\0asm", 4) != 0)
		return al_error_set(err, EINVAL,
				    "backend wasm: %s is not a WebAssembly module (no \\0asm "
				    "header); give the module's path as the command",
				    real);
	return 0;
}

static void wasm_run_free(struct wasm_run *w)
{
	if (!w)
		return;
	for (size_t i = w->n_orig_fs; i < w->plan.n_fs; i++) {
		free(w->plan.fs[i].path);
		free(w->plan.fs[i].source);
		free(w->plan.fs[i].what);
	}
	free(w->plan.fs);
	al_strv_free(w->plan.argv);
	al_strv_free(w->envp);
	json_decref(w->preopens);
	free(w);
}

static int derive(const struct al_plan *p, struct wasm_run **out, struct al_error *err)
{
	struct wasm_run *w = xcalloc(1, sizeof(*w));
	bool python = p->language && strcmp(p->language, "python") == 0;
	char host[PATH_MAX];
	const char *node = find_node();
	_cleanup_free_ char *text = NULL;
	int r;

	w->orig = p;
	w->plan = *p;
	w->plan.argv = NULL;
	w->n_orig_fs = p->n_fs;
	w->plan.fs = xcalloc(p->n_fs + 2, sizeof(*w->plan.fs));
	memcpy(w->plan.fs, p->fs, p->n_fs * sizeof(*p->fs));
	w->memory_cap = memory_cap(p);
	if (!node) {
		r = al_error_set(err, ENOENT,
				 "backend wasm: no node (looked for /usr/bin/node and "
				 "/usr/local/bin/node; apt-get install nodejs)");
		goto fail;
	}
	if (!python && (!p->argv || !p->argv[0])) {
		r = al_error_set(err, EINVAL,
				 "backend wasm: no module given (the command is the "
				 "module's path and its arguments)");
		goto fail;
	}
	if ((r = add_preopens(w, p, err)) < 0)
		goto fail;
	w->plan.fs[w->plan.n_fs++] = (struct al_fs_entry){.kind = AL_FS_DIR,
							  .path = xstrdup(WASM_DIR),
							  .access = AL_FS_READ,
							  .mode = 0555,
							  .what = xstrdup("wasm " WASM_DIR)};
	if (python) {
		if (find_pyodide(host, sizeof(host)) < 0) {
			r = al_error_set(err, ENOENT,
					 "backend wasm: --language python needs Pyodide, not found "
					 "at %s (npm ci there from src/backend/wasm/pyodide)",
					 host);
			goto fail;
		}
		r = add_host(w, host, WASM_PYODIDE, "pyodide", true, err);
	} else if ((r = module_path(p->argv[0], host, err)) == 0) {
		r = add_host(w, host, WASM_MODULE, "module", false, err);
	}
	if (r < 0)
		goto fail;

	json_t *cfg = json_pack("{s:s, s:O, s:I}", "mode", python ? "python" : "wasi", "preopens",
				w->preopens, "memory", (json_int_t)w->memory_cap);
	if (python) {
		json_object_set_new(cfg, "pyodide", json_string(WASM_PYODIDE));
	} else {
		json_object_set_new(cfg, "module", json_string(WASM_MODULE));
		json_object_set_new(cfg, "name", json_string(p->argv[0]));
	}
	text = json_dumps(cfg, JSON_COMPACT);
	json_decref(cfg);
	al_strv_push(&w->plan.argv, node);
	al_strv_push(&w->plan.argv, "--no-warnings");
	al_strv_push_take(&w->plan.argv,
			  xasprintf("--wasm-max-mem-pages=%llu",
				    (unsigned long long)(w->memory_cap / WASM_PAGE)));
	al_strv_push(&w->plan.argv, "--input-type=module");
	al_strv_push(&w->plan.argv, "-e");
	al_strv_push(&w->plan.argv, al_wasm_driver);
	al_strv_push(&w->plan.argv, "--");
	al_strv_push(&w->plan.argv, text);
	for (size_t i = python ? 0 : 1; p->argv && p->argv[i]; i++)
		al_strv_push(&w->plan.argv, p->argv[i]);
	*out = w;
	return 0;
fail:
	wasm_run_free(w);
	return r;
}

/* What the layer cannot do, refused before anything else. */
static int refuse(const struct al_plan *p, struct al_error *err)
{
	if (p->gateway)
		return al_error_set(err, EOPNOTSUPP,
				    "backend wasm gives the module no network: the plan's "
				    "network rules (--allow, network.allow, secrets) cannot be "
				    "kept (WASI preview 1 has no sockets); use --backend native");
	if (p->tty)
		return al_error_set(err, EOPNOTSUPP,
				    "backend wasm has no terminal to give the module (-t, "
				    "\"tty\"); run it without one");
	return 0;
}

static int wasm_probe(const struct al_plan *p, struct al_error *err)
{
	struct wasm_run *w = NULL;
	int r;

	if ((r = refuse(p, err)) < 0 || (r = derive(p, &w, err)) < 0)
		return r;
	r = al_backend_native.probe(&w->plan, err);
	wasm_run_free(w);
	return r;
}

static int wasm_describe(const struct al_plan *p, FILE *f, json_t *json, struct al_error *err)
{
	struct wasm_run *w = NULL;
	int r;

	if ((r = refuse(p, err)) < 0 || (r = derive(p, &w, err)) < 0)
		return r;
	if (f) {
		const char *dir;
		json_t *v;
		fprintf(f,
			"wasm:       %s under %s (WASI preview 1), linear memory at most %llu "
			"bytes, %s\n",
			p->language ? "Python (Pyodide)" : p->argv[0], w->plan.argv[0],
			(unsigned long long)w->memory_cap,
			p->language ? "node's whole API through Pyodide's JavaScript bridge "
				      "(held by the native layer only)"
				    : "no sockets");
		json_object_foreach(w->preopens, dir, v) fprintf(f, "  preopen   %s\n", dir);
	} else {
		json_object_set_new(json, "wasm",
				    json_pack("{s:s, s:s, s:I, s:O}", "runs",
					      p->language ? "python" : "module", "engine",
					      w->plan.argv[0], "memory_cap",
					      (json_int_t)w->memory_cap, "preopens", w->preopens));
	}
	r = al_backend_native.describe(&w->plan, f, json, err);
	wasm_run_free(w);
	return r;
}

/* The native backend's events, relayed; the driver's memory verdict (it
 * dies by SIGUSR2, which the module cannot raise) ends the run for memory. */
static void ev_exited(void *d, int status)
{
	struct wasm_run *w = d;

	if (WIFSIGNALED(status) && WTERMSIG(status) == SIGUSR2 && !w->orig_events->meter->hit) {
		w->orig_events->meter->res->linear_memory_cap = w->memory_cap;
		al_meter_stop(w->orig_events->meter, AL_END_MEMORY, "wasm-memory", w->memory_cap,
			      w->memory_cap);
	}
	w->orig_events->exited(w->orig_events->data, status);
}

static int wasm_prepare(struct al_sandbox *sb, struct al_error *err)
{
	struct wasm_run *w = NULL;
	int r;

	if (sb->session)
		return al_error_set(err, EOPNOTSUPP,
				    "backend wasm runs one module per run: it has no sessions");
	if ((r = derive(sb->plan, &w, err)) < 0)
		return r;
	/* node starts with no variable of the plan's under its own name. */
	w->envp = xcalloc(1, sizeof(char *));
	for (size_t i = 0; sb->plan->envp && sb->plan->envp[i]; i++)
		al_strv_push_take(&w->envp, xasprintf(WASM_ENV_PREFIX "%s", sb->plan->envp[i]));
	w->plan.envp = w->envp;
	w->orig_events = sb->events;
	al_sandbox_events_relay(&w->events, w);
	w->events.exited = ev_exited;
	sb->plan = &w->plan;
	sb->events = &w->events;
	r = al_backend_native.prepare(sb, err);
	if (sb->state) {
		sb->state->outer = w;
	} else {
		sb->plan = w->orig;
		sb->events = w->orig_events;
		wasm_run_free(w);
	}
	return r;
}

static int wasm_start(struct al_sandbox *sb, struct al_error *err)
{
	return al_backend_native.start(sb, err);
}

static void wasm_destroy(struct al_sandbox *sb)
{
	struct wasm_run *w = sb->state ? sb->state->outer : NULL;

	al_backend_native.destroy(sb);
	if (w) {
		sb->plan = w->orig;
		sb->events = w->orig_events;
		wasm_run_free(w);
	}
}

/* The native layer's own checks, and node to run the modules. */
static int wasm_usable(char *why, size_t len)
{
	if (!al_backend_usable(&al_backend_native, why, len))
		return 0;
	if (!find_node()) {
		snprintf(why, len, "no node (the engine: /usr/bin/node or /usr/local/bin/node)");
		return 0;
	}
	return 1;
}

static const struct al_backend_facts wasm_facts = {
    .summary = "WebAssembly modules (WASI preview 1; Python under Pyodide) in Node's V8, "
	       "inside the native layer; Python reaches node's whole API (files, programs, "
	       "sockets) through Pyodide's JavaScript bridge, held by the native layer only",
    .files = "WASI preopens of the plan's inputs and scratch only, within the native "
	     "layer's read-only tree and landlock",
    .egress = "none: WASI preview 1 opens no socket (the driver answers every socket call "
	      "ENOSYS), and network rules are refused",
    .pids = "one node process in the native layer's pid namespace",
    .kernel = "V8 and Node's WASI, then the host's kernel through native's seccomp allowlist",
    .limits = "linear memory capped (V8's --wasm-max-mem-pages) under the run's cgroup; "
	      "time: the run's timeout (no fuel)",
    .exec = "no: one module per run",
    .features = AL_BACKEND_HIDES_PIDS | AL_BACKEND_PRIVATE_TMP | AL_BACKEND_PRIVATE_LOOPBACK |
		AL_BACKEND_MOUNTS_ELSEWHERE,
};

const struct al_backend_ops al_backend_wasm = {
    .name = "wasm",
    .facts = &wasm_facts,
    .usable = wasm_usable,
    .probe = wasm_probe,
    .describe = wasm_describe,
    .prepare = wasm_prepare,
    .start = wasm_start,
    .release = al_monitor_release,
    .stop = al_monitor_stop,
    .kill = al_monitor_kill,
    .finish = al_monitor_finish,
    .destroy = wasm_destroy,
};
