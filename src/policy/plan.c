/* Policy → plan. Applies defaults, checks every path against the host and
 * against the sandbox layout, synthesizes /etc, and orders the file tree,
 * parents before children. The only syscalls here are read-only looks at
 * the host (stat, realpath, readlink); nothing is created. */
#include "policy/plan.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/sys.h"
#include "core/util.h"
#include "policy/operator.h"
#include "policy/plan-internal.h"

const char *const al_plan_default_system[] = {"/usr", "/bin", "/lib", "/lib64", "/sbin", NULL};
/* Host /etc entries shown read-only when present; everything else in /etc
 * is synthesized. */
static const char *const etc_binds[] = {"/etc/ld.so.cache", "/etc/ssl/certs", "/etc/alternatives",
					NULL};
static const char *const dev_nodes[] = {"null", "zero", "full", "random", "urandom", NULL};
static const char *const dev_links[][2] = {{"/dev/fd", "/proc/self/fd"},
					   {"/dev/stdin", "/proc/self/fd/0"},
					   {"/dev/stdout", "/proc/self/fd/1"},
					   {"/dev/stderr", "/proc/self/fd/2"}};
/* Sandbox paths a mount may not cover or live under. */
static const char *const reserved[] = {"/proc", "/dev", "/etc", NULL};

struct builder {
	struct al_plan *plan;
	struct al_errors *errs; /* every error found; each item is checked alone */
};

static struct al_fs_entry *add_fs(struct builder *b, enum al_fs_kind kind, const char *path,
				  char *source, unsigned access, const char *what)
{
	struct al_plan *p = b->plan;
	struct al_fs_entry *e;

	p->fs = xrealloc(p->fs, (p->n_fs + 1) * sizeof(*p->fs));
	e = &p->fs[p->n_fs++];
	*e = (struct al_fs_entry){.kind = kind,
				  .path = xstrdup(path),
				  .source = source,
				  .access = access,
				  .what = xstrdup(what)};
	return e;
}

static void add_file(struct builder *b, const char *path, char *content)
{
	struct al_fs_entry *e = add_fs(b, AL_FS_FILE, path, content, AL_FS_READ, path);
	e->len = strlen(content);
	e->mode = 0644;
}

void al_plan_add_file(struct al_plan *p, const char *path, char *content, mode_t mode)
{
	struct builder b = {.plan = p};
	add_file(&b, path, content);
	p->fs[p->n_fs - 1].mode = mode;
}

void al_plan_add_dir(struct al_plan *p, const char *path, mode_t mode)
{
	struct builder b = {.plan = p};
	add_fs(&b, AL_FS_DIR, path, NULL, AL_FS_READ, path)->mode = mode;
}

struct al_fs_entry *al_plan_add_fs(struct al_plan *p, enum al_fs_kind kind, const char *path,
				   char *source, unsigned access, const char *what)
{
	struct builder b = {.plan = p};
	return add_fs(&b, kind, path, source, access, what);
}

/* A host path (already resolved, no symlinks) at a sandbox path. */
static struct al_fs_entry *add_host(struct builder *b, enum al_fs_kind kind, const char *host,
				    const char *path, const struct stat *st, unsigned access,
				    const char *what)
{
	struct al_fs_entry *e = add_fs(b, kind, path, xstrdup(host), access, what);
	e->dir = S_ISDIR(st->st_mode);
	e->dev = st->st_dev;
	e->ino = st->st_ino;
	e->nlink = st->st_nlink;
	return e;
}

struct al_fs_entry *al_plan_add_host(struct al_plan *p, enum al_fs_kind kind, const char *host,
				     const char *path, const struct stat *st, unsigned access,
				     const char *what)
{
	struct builder b = {.plan = p};
	return add_host(&b, kind, host, path, st, access, what);
}

void al_plan_add_dev_nodes(struct al_plan *p, const char *const *names)
{
	for (size_t i = 0; names[i]; i++) {
		struct stat st;
		char host[32];
		snprintf(host, sizeof(host), "/dev/%s", names[i]);
		if (stat(host, &st) < 0 || !S_ISCHR(st.st_mode))
			continue;
		al_plan_add_host(p, AL_FS_DEVICE, host, host, &st, AL_FS_READ | AL_FS_WRITE, host);
	}
}

/* A face of the scratch; part names which (each face is its own part). */
static void add_scratch(struct builder *b, const char *path, const char *part, mode_t mode,
			bool sandbox_owned, unsigned access, const char *what)
{
	struct al_fs_entry *e = add_fs(b, AL_FS_SCRATCH, path, xstrdup(part), access, what);
	e->mode = mode;
	e->sandbox_owned = sandbox_owned;
}

static bool is_reserved(const struct al_plan *plan, char *const *system, const char *path,
			const char **why)
{
	if (strcmp(path, "/") == 0) {
		*why = "the root";
		return true;
	}
	for (size_t i = 0; reserved[i]; i++)
		if (al_path_is_under(path, reserved[i])) {
			*why = reserved[i];
			return true;
		}
	for (size_t i = 0; system && system[i]; i++)
		if (al_path_is_under(path, system[i]) || al_path_is_under(system[i], path)) {
			*why = system[i];
			return true;
		}
	if (strcmp(path, "/tmp") == 0) {
		*why = "/tmp (scratch)";
		return true;
	}
	(void)plan;
	return false;
}

static int build_system_dir(struct builder *b, const char *path, bool explicit_list,
			    struct al_error *err)
{
	struct stat st;
	char what[PATH_MAX + 16];

	snprintf(what, sizeof(what), "system %s", path);
	if (strcmp(path, "/") == 0 || al_path_is_under(path, "/proc") ||
	    al_path_is_under(path, "/dev") || al_path_is_under(path, "/etc") ||
	    al_path_is_under(path, "/tmp") || al_path_is_under(path, b->plan->workdir) ||
	    al_path_is_under(b->plan->workdir, path))
		return al_error_set(
		    err, EINVAL,
		    "filesystem.system: %s would cover or sit inside a path "
		    "airlock builds itself (/, /proc, /dev, /etc, /tmp, the workdir)",
		    path);
	if (lstat(path, &st) < 0) {
		if (errno == ENOENT && !explicit_list)
			return 0; /* e.g. no /lib64 on this host */
		return al_error_setsys(err, errno, "filesystem.system: %s", path);
	}
	if (S_ISLNK(st.st_mode)) {
		char link[PATH_MAX];
		ssize_t n = readlink(path, link, sizeof(link) - 1);
		if (n < 0)
			return al_error_setsys(err, errno, "filesystem.system: readlink %s", path);
		link[n] = '\0';
		add_fs(b, AL_FS_LINK, path, xstrdup(link), AL_FS_READ, what);
		return 0;
	}
	if (!S_ISDIR(st.st_mode))
		return al_error_set(err, ENOTDIR, "filesystem.system: %s is not a directory", path);
	char real[PATH_MAX];
	if (!realpath(path, real) || stat(real, &st) < 0)
		return al_error_setsys(err, errno, "filesystem.system: %s", path);
	add_host(b, AL_FS_HOST, real, path, &st, AL_FS_READ | AL_FS_EXEC, what);
	return 0;
}

static void build_system(struct builder *b, char *const *system, bool explicit_list)
{
	for (size_t i = 0; system[i]; i++) {
		struct al_error err = {0};
		if (build_system_dir(b, system[i], explicit_list, &err) < 0)
			al_errors_add_error(b->errs, &err);
	}
}

static void build_etc(struct builder *b)
{
	const struct al_plan *p = b->plan;

	add_fs(b, AL_FS_DIR, "/etc", NULL, AL_FS_READ, "/etc")->mode = 0755;
	add_file(b, "/etc/passwd",
		 xasprintf("root:x:0:0:root:/root:/usr/sbin/nologin\n"
			   "sandbox:x:%d:%d:airlock sandbox:%s:/bin/sh\n"
			   "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
			   AL_SANDBOX_UID, AL_SANDBOX_GID, p->workdir));
	add_file(b, "/etc/group",
		 xasprintf("root:x:0:\nsandbox:x:%d:\nnogroup:x:65534:\n", AL_SANDBOX_GID));
	add_file(b, "/etc/hosts",
		 xasprintf("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
			   "127.0.1.1\t%s\n",
			   p->hostname));
	add_file(b, "/etc/hostname", xasprintf("%s\n", p->hostname));
	add_file(b, "/etc/resolv.conf",
		 xstrdup("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n"));
	/* Without the gateway nothing answers DNS: leaving "dns" out makes
	 * every name outside /etc/hosts "not found" (EAI_NONAME) at once, as
	 * the gateway's stub says NXDOMAIN for names outside the rules,
	 * rather than a "temporary failure" that invites a retry. */
	add_file(b, "/etc/nsswitch.conf",
		 xasprintf("passwd: files\ngroup: files\nshadow: files\nhosts: files%s\n"
			   "networks: files\nprotocols: files\nservices: files\n",
			   p->gateway ? " dns" : ""));
	for (size_t i = 0; etc_binds[i]; i++) {
		struct stat st;
		if (stat(etc_binds[i], &st) < 0)
			continue;
		char real[PATH_MAX];
		if (!realpath(etc_binds[i], real) || stat(real, &st) < 0)
			continue;
		add_host(b, AL_FS_HOST, real, etc_binds[i], &st, AL_FS_READ, etc_binds[i]);
	}
}

static void build_proc_dev(struct builder *b)
{
	add_fs(b, AL_FS_PROC, "/proc", NULL, AL_FS_READ, "/proc")->mode = 0555;
	add_fs(b, AL_FS_DIR, "/dev", NULL, AL_FS_READ, "/dev")->mode = 0755;
	al_plan_add_dev_nodes(b->plan, dev_nodes);
	for (size_t i = 0; i < AL_ARRAY_SIZE(dev_links); i++)
		add_fs(b, AL_FS_LINK, dev_links[i][0], xstrdup(dev_links[i][1]), AL_FS_READ,
		       dev_links[i][0]);
	add_scratch(b, "/dev/shm", "shm", 01777, false, AL_FS_READ | AL_FS_WRITE,
		    "/dev/shm (scratch)");
	if (!b->plan->tty)
		return;
	/* A terminal: the sandbox's own devpts (where its pty comes from),
	 * /dev/ptmx into it, and /dev/tty, which opens the caller's own
	 * controlling terminal — inside, the sandbox's pty. */
	add_fs(b, AL_FS_PTYS, "/dev/pts", NULL, AL_FS_READ | AL_FS_WRITE,
	       "/dev/pts (the sandbox's)")
	    ->mode = 0755;
	add_fs(b, AL_FS_LINK, "/dev/ptmx", xstrdup("pts/ptmx"), AL_FS_READ, "/dev/ptmx");
	struct stat st;
	if (stat("/dev/tty", &st) == 0 && S_ISCHR(st.st_mode))
		add_host(b, AL_FS_DEVICE, "/dev/tty", "/dev/tty", &st, AL_FS_READ | AL_FS_WRITE,
			 "/dev/tty");
}

/* The scratch's faces: /tmp and the workdir (/dev/shm comes with /dev). */
static void build_scratch(struct builder *b, bool workdir_is_mount)
{
	struct al_plan *p = b->plan;
	unsigned access = AL_FS_READ | AL_FS_WRITE | (p->scratch_exec ? AL_FS_EXEC : 0);

	add_scratch(b, "/tmp", "tmp", 01777, false, access, "/tmp (scratch)");
	if (!workdir_is_mount) /* the sandbox user's home */
		add_scratch(b, p->workdir, "work", 0755, true, access, "workdir (scratch)");
}

static int cmp_mount_path(const void *a, const void *b)
{
	const struct al_policy_mount *const *x = a, *const *y = b;
	return strcmp((*x)->path, (*y)->path);
}

/* sorted[i], checked against the host and the layout; sorted[0..i) are
 * the mounts at shorter or equal paths. bad_path[] (by index in the
 * policy's mounts) marks those whose sandbox path was refused: said once,
 * and not used as the mount another lies inside. */
static int build_mount(struct builder *b, const struct al_policy *pol,
		       const struct al_policy_mount *const *sorted, size_t i, char *const *system,
		       bool *bad_path, struct al_error *err)
{
	const struct al_policy_mount *m = sorted[i];
	struct al_plan *p = b->plan;
	const char *why = NULL;
	char real[PATH_MAX];
	struct stat st;

	if (bad_path[m - pol->mounts])
		return 0; /* refused against the workdir or the scratch */
	bad_path[m - pol->mounts] = true;
	if (!al_path_is_clean_absolute(m->path))
		return al_error_set(err, EINVAL,
				    "%s: sandbox path \"%s\" is not a clean absolute path",
				    m->origin, m->path);
	if (is_reserved(p, system, m->path, &why))
		return al_error_set(err, EINVAL, "%s: sandbox path %s would cover or sit inside %s",
				    m->origin, m->path, why);
	bad_path[m - pol->mounts] = false;
	/* Two mounts at one path: refused, never one silently over the other. */
	for (size_t j = 0; j < i; j++)
		if (strcmp(sorted[j]->path, m->path) == 0) {
			bool first = sorted[j] < m; /* named in the order they were given */
			bad_path[m - pol->mounts] = true;
			return al_error_set(err, EINVAL, "duplicate mount point %s: %s and %s",
					    m->path, first ? sorted[j]->origin : m->origin,
					    first ? m->origin : sorted[j]->origin);
		}
	for (size_t j = 0; j < i; j++)
		if (!bad_path[sorted[j] - pol->mounts] &&
		    al_path_is_under(m->path, sorted[j]->path))
			return al_error_set(err, EINVAL,
					    "%s: sandbox path %s lies inside another mount (%s)",
					    m->origin, m->path, sorted[j]->path);
	if (!realpath(m->host, real))
		return al_error_setsys(err, errno, "%s: %s", m->origin, m->host);
	if (stat(real, &st) < 0)
		return al_error_setsys(err, errno, "%s: %s", m->origin, real);
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
		return al_error_set(err, EINVAL, "%s: %s is neither a regular file nor a directory",
				    m->origin, real);
	if (p->rootless && m->mode == AL_MOUNT_RW && S_ISDIR(st.st_mode) &&
	    al_plan_check_rw_owner(m->origin, real, err) < 0)
		return -EPERM;
	unsigned access = AL_FS_READ | (m->mode == AL_MOUNT_RW ? AL_FS_WRITE : 0) |
			  (m->exec != 0 ? AL_FS_EXEC : 0); /* unset exec means allowed */
	char what[PATH_MAX + 32];
	snprintf(what, sizeof(what), "%s %s", m->mode == AL_MOUNT_RW ? "rw" : "ro", m->path);
	struct al_fs_entry *e = add_host(b, AL_FS_HOST, real, m->path, &st, access, what);
	e->copy = m->copy && m->mode == AL_MOUNT_RO;
	if (!p->rootless) {
		e->as_owner = true;
		e->owner_uid = st.st_uid;
		e->owner_gid = st.st_gid;
	}
	return 0;
}

static void build_mounts(struct builder *b, const struct al_policy *pol, char *const *system,
			 bool *bad_path)
{
	_cleanup_free_ const struct al_policy_mount **sorted =
	    xcalloc(pol->n_mounts + 1, sizeof(*sorted));

	for (size_t i = 0; i < pol->n_mounts; i++)
		sorted[i] = &pol->mounts[i];
	qsort(sorted, pol->n_mounts, sizeof(*sorted), cmp_mount_path);
	for (size_t i = 0; i < pol->n_mounts; i++) {
		struct al_error err = {0};
		if (build_mount(b, pol, sorted, i, system, bad_path, &err) < 0)
			al_errors_add_error(b->errs, &err);
	}
}

/* network.allow and network.hosts → the gateway's allowlist and map. A
 * mode that contradicts the rest is one error; then each rule and each
 * mapping is checked alone. */
static void build_network(struct al_plan *p, const struct al_policy *pol, struct al_errors *errs)
{
	bool explicit_none = pol->network_mode && strcmp(pol->network_mode, "none") == 0;
	size_t n = al_strv_len(pol->net_allow);
	struct al_error e = {0}, *err = &e;

	if (pol->network_mode && !explicit_none && strcmp(pol->network_mode, "gateway") != 0) {
		al_errors_add(errs, EINVAL, NULL, NULL,
			      "network mode \"%s\" is not known (expected none or gateway)",
			      pol->network_mode);
		return;
	}
	if (explicit_none && n > 0) {
		al_errors_add(errs, EINVAL, NULL, NULL,
			      "network: mode \"none\" with %zu allow rule%s; drop the mode or the "
			      "rules",
			      n, n == 1 ? "" : "s");
		return;
	}
	p->gateway = n > 0 || (pol->network_mode && strcmp(pol->network_mode, "gateway") == 0);
	if (!p->gateway && (pol->net_hosts || pol->net_resolver)) {
		al_errors_add(errs, EINVAL, NULL, NULL,
			      "network: %s given, but nothing is allowed, so there is no gateway "
			      "to use it; add network.allow rules (--allow)",
			      pol->net_hosts ? "hosts (--map-host)" : "resolver (--resolver)");
		return;
	}
	if (!p->gateway)
		return;
	p->net_run = pol->net_run;
	p->net_host = pol->net_host;
	p->resolver = pol->net_resolver ? xstrdup(pol->net_resolver) : NULL;
	if (!p->net_run.connections)
		p->net_run.connections = AL_DEFAULT_NET_CONNECTIONS;
	p->allow = al_allow_new();
	p->allow_text = al_strv_dup(pol->net_allow);
	for (size_t i = 0; i < n; i++) {
		/* Checked as --allow checks it: a policy built elsewhere (the
		 * API) has not been. */
		if (al_policy_check_allow_rule(pol->net_allow[i], err) < 0 ||
		    al_allow_add(p->allow, pol->net_allow[i], err) < 0) {
			al_error_wrap(err, "network.allow \"%s\"", pol->net_allow[i]);
			al_errors_add_error(errs, err);
		}
	}
	p->n_hosts = al_strv_len(pol->net_hosts);
	p->hosts = xcalloc(p->n_hosts + 1, sizeof(*p->hosts));
	for (size_t i = 0; i < p->n_hosts; i++) {
		const char *entry = pol->net_hosts[i], *eq = strchr(entry, '=');
		_cleanup_free_ char *key = strndup(entry, (size_t)(eq - entry));
		struct al_host name, addr;
		/* Checked as --map-host checks it: a policy built elsewhere
		 * (the API) has not been. */
		if (!key || al_policy_check_host_map(key, eq + 1, err) < 0 ||
		    al_host_parse(entry, (size_t)(eq - entry), &name, err) < 0 ||
		    al_host_parse(eq + 1, strlen(eq + 1), &addr, err) < 0) {
			al_error_wrap(err, "network.hosts \"%s\"", entry);
			al_errors_add_error(errs, err);
			continue;
		}
		p->hosts[i].name = xstrdup(name.text);
		p->hosts[i].addr = addr.addr;
	}
}

/* The operator policy the engine held the request to: what run.start and
 * the record name, the never rules and the decider for the gateway. */
static void build_operator(struct al_plan *p, const struct al_policy *pol)
{
	if (!pol->op)
		return;
	p->profile = xstrdup(pol->op->profile);
	p->operator_file = xstrdup(pol->op->file);
	p->operator_sha256 = xstrdup(pol->op->sha256);
	p->decider = al_decider_conf_dup(pol->op->decider);
	p->never = al_allow_new();
	p->never_text = al_strv_dup(pol->op->never);
	for (size_t i = 0; p->never_text[i]; i++)
		al_allow_add(p->never, p->never_text[i], NULL); /* parsed when loaded */
}

/* The command, identity, workdir and limits; each check alone. Returns
 * false when the workdir is wrong (what is checked against it would mean
 * nothing). */
static bool build_request(struct al_plan *p, const struct al_policy *pol, unsigned flags,
			  char *const *system, struct al_errors *errs)
{
	bool workdir_ok = true;
	const char *why;

	if ((!pol->command || !pol->command[0]) && !(flags & AL_PLAN_COMMAND_OPTIONAL))
		al_errors_add(
		    errs, EINVAL, NULL, NULL,
		    "no command given (put it after \"--\" or in the policy's \"command\")");
	else if (pol->command && pol->command[0] && pol->command[0][0] == '\0')
		al_errors_add(errs, EINVAL, NULL, NULL, "the command's name is empty");
	if (pol->backend && al_backend_strength(pol->backend) < 0)
		al_errors_add(errs, EINVAL, NULL, NULL,
			      "unknown backend \"%s\" (this build has: %s)", pol->backend,
			      al_backend_names_text());
	p->backend = xstrdup(pol->backend && al_backend_strength(pol->backend) >= 0 ? pol->backend
										    : "native");
	if (pol->language && (strcmp(pol->language, "python") || strcmp(p->backend, "wasm")))
		al_errors_add(errs, EINVAL, NULL, NULL,
			      "language \"%s\": only python, with --backend wasm", pol->language);
	p->language = pol->language ? xstrdup(pol->language) : NULL;
	p->argv = al_strv_dup(pol->command); /* empty vector when optional and absent */
	p->hostname = xstrdup(pol->hostname ? pol->hostname : AL_DEFAULT_HOSTNAME);
	if (!al_hostname_is_valid(p->hostname))
		al_errors_add(errs, EINVAL, NULL, NULL, "hostname \"%s\" is not a valid host name",
			      p->hostname);
	p->workdir = xstrdup(pol->workdir ? pol->workdir : pol->root ? "/" : AL_DEFAULT_WORKDIR);
	p->uid = AL_SANDBOX_UID;
	p->gid = AL_SANDBOX_GID;
	if (!al_path_is_clean_absolute(p->workdir)) {
		al_errors_add(errs, EINVAL, NULL, NULL,
			      "workdir \"%s\" is not a clean absolute path", p->workdir);
		workdir_ok = false;
	} else if (!pol->root && is_reserved(p, system, p->workdir, &why)) {
		al_errors_add(errs, EINVAL, NULL, NULL, "workdir %s would cover or sit inside %s",
			      p->workdir, why);
		workdir_ok = false;
	}
	p->timeout_ms = pol->timeout_ms ? pol->timeout_ms : AL_DEFAULT_TIMEOUT_MS;
	p->scratch_bytes = pol->scratch_bytes ? pol->scratch_bytes : AL_DEFAULT_SCRATCH_BYTES;
	p->memory_bytes = pol->memory_bytes ? pol->memory_bytes : AL_DEFAULT_MEMORY_BYTES;
	p->pids = pol->pids ? pol->pids : AL_DEFAULT_PIDS;
	p->cpus_milli = pol->cpus_milli;
	p->cpu_time_ms = pol->cpu_time_ms;
	p->output_bytes = pol->output_bytes ? pol->output_bytes : AL_DEFAULT_OUTPUT_BYTES;
	p->open_files = pol->open_files ? pol->open_files : AL_DEFAULT_OPEN_FILES;
	/* Never above the hard value, whatever lowered it. */
	p->open_files_soft = pol->open_files_soft < p->open_files ? pol->open_files_soft : 0;
	p->file_size = pol->file_size;
	p->cgroup_asked = (pol->memory_bytes ? AL_CGROUP_ASKED_MEMORY : 0) |
			  (pol->pids ? AL_CGROUP_ASKED_PIDS : 0) |
			  (pol->cpus_milli ? AL_CGROUP_ASKED_CPUS : 0) |
			  (pol->cpu_time_ms ? AL_CGROUP_ASKED_CPU_TIME : 0);
	p->cgroup_required = p->cgroup_asked != 0;
	if (p->memory_bytes < (4ull << 20))
		al_errors_add(errs, EINVAL, NULL, NULL,
			      "memory limit %llu bytes is below the 4M minimum",
			      (unsigned long long)p->memory_bytes);
	if (p->pids < 2)
		al_errors_add(errs, EINVAL, NULL, NULL,
			      "pids limit must be at least 2 (init and the command)");
	uint64_t half = (p->memory_bytes / AL_SOCKET_SHARE + 4095) & ~4095ULL;
	p->socket_stop = 2 * (half < AL_SOCKET_MIN_BYTES ? AL_SOCKET_MIN_BYTES : half);
	p->kernel_memory_best_effort = pol->kernel_memory == AL_KMEM_BEST_EFFORT;
	p->msgqueue_bytes = AL_MSGQUEUE_BYTES;
	p->sigpending = AL_SIGPENDING;
	p->memlock_bytes =
	    p->memory_bytes / 8 < AL_MEMLOCK_BYTES ? p->memory_bytes / 8 : AL_MEMLOCK_BYTES;
	p->scratch_exec = pol->scratch_exec != 0;
	p->tty = pol->tty > 0;
	return workdir_ok;
}

/* Mounts against the workdir and /tmp (the scratch), marking in
 * bad_path[] those refused; true when one of them is the workdir. */
static bool check_mounts_vs_scratch(const struct al_plan *p, const struct al_policy *pol,
				    bool *bad_path, struct al_errors *errs)
{
	bool workdir_is_mount = false;

	for (size_t i = 0; i < pol->n_mounts; i++) {
		const struct al_policy_mount *m = &pol->mounts[i];
		bool in_tmp = al_path_is_under(m->path, "/tmp");

		if (strcmp(m->path, p->workdir) == 0) {
			workdir_is_mount = true;
		} else if (al_path_is_under(p->workdir, m->path)) {
			al_errors_add(errs, EINVAL, NULL, NULL,
				      "%s: sandbox path %s would hide the workdir %s", m->origin,
				      m->path, p->workdir);
			bad_path[i] = true;
		} else if (in_tmp) {
			al_errors_add(
			    errs, EINVAL, NULL, NULL,
			    "%s: sandbox path %s lies inside the scratch's /tmp; mount it "
			    "elsewhere, e.g. /input, or under the workdir (%s/input)",
			    m->origin, m->path, p->workdir);
			bad_path[i] = true;
		}
	}
	return workdir_is_mount;
}

int al_plan_build_all(const struct al_policy *pol, unsigned flags, struct al_plan **ret,
		      struct al_errors *errs)
{
	_cleanup_(al_plan_freep) struct al_plan *p = xcalloc(1, sizeof(*p));
	struct builder b = {.plan = p, .errs = errs};
	char *const *system = pol->system ? pol->system : (char *const *)al_plan_default_system;
	size_t before = al_errors_count(errs);
	_cleanup_free_ bool *bad_path = xcalloc(pol->n_mounts + 1, sizeof(bool));
	bool workdir_is_mount = false;

	if (build_request(p, pol, flags, system, errs) && !pol->root)
		workdir_is_mount = check_mounts_vs_scratch(p, pol, bad_path, errs);
	al_plan_build_ids(p, pol, errs);
	build_network(p, pol, errs);
	al_plan_build_env(p, pol);
	build_operator(p, pol);
	al_plan_build_cred(p, pol, errs);
	p->landlock_required = pol->landlock != AL_LANDLOCK_BEST_EFFORT;

	if (pol->root) {
		if (pol->system || pol->n_copy_in || pol->n_copy_out)
			al_errors_add(errs, EINVAL, NULL, NULL,
				      "a container's own root takes no system directories and "
				      "no copies in or out");
		al_plan_build_root(p, pol, errs);
		al_plan_check_cred_sources(p, pol, errs);
		goto built;
	}
	/* Order matters: parents before children. */
	build_scratch(&b, workdir_is_mount);
	build_system(&b, system, pol->system != NULL);
	build_etc(&b);
	al_plan_build_cred_files(p);
	build_proc_dev(&b);
	build_mounts(&b, pol, system, bad_path);
	al_plan_build_copies(b.plan, pol, b.errs);
	al_plan_check_cred_sources(p, pol, errs);
built:
	if (al_errors_count(errs) > before) {
		if (flags & AL_PLAN_PARTIAL)
			*ret = TAKE_PTR(p);
		return al_errors_first(errs, before, NULL);
	}
	*ret = TAKE_PTR(p);
	return 0;
}

int al_plan_build_host_tree(struct al_plan *p, struct al_errors *errs)
{
	struct builder b = {.plan = p, .errs = errs};
	size_t before = al_errors_count(errs);

	build_scratch(&b, false);
	build_system(&b, (char *const *)al_plan_default_system, false);
	build_etc(&b);
	build_proc_dev(&b);
	return al_errors_count(errs) > before ? al_errors_first(errs, before, NULL) : 0;
}

int al_plan_build(const struct al_policy *pol, unsigned flags, struct al_plan **ret,
		  struct al_error *err)
{
	struct al_errors errs = {0};
	int r = al_plan_build_all(pol, flags, ret, &errs);

	if (r < 0)
		r = al_errors_first(&errs, 0, err);
	al_errors_clear(&errs);
	return r;
}

void al_plan_free(struct al_plan *p)
{
	if (!p)
		return;
	al_strv_free(p->argv);
	al_strv_free(p->envp);
	al_strv_free(p->env_hidden);
	free(p->hostname);
	free(p->workdir);
	free(p->backend);
	free(p->language);
	al_allow_free(p->allow);
	al_allow_free(p->never);
	al_strv_free(p->never_text);
	free(p->profile);
	free(p->operator_sha256);
	free(p->operator_file);
	al_decider_conf_free(p->decider);
	al_strv_free(p->allow_text);
	al_plan_free_cred(p);
	free(p->resolver);
	for (size_t i = 0; i < p->n_hosts; i++)
		free(p->hosts[i].name);
	free(p->hosts);
	for (size_t i = 0; i < p->n_fs; i++) {
		free(p->fs[i].path);
		free(p->fs[i].source);
		free(p->fs[i].what);
	}
	free(p->fs);
	al_plan_free_root(p);
	for (size_t i = 0; i < p->n_copy_in; i++) {
		free(p->copy_in[i].host);
		free(p->copy_in[i].path);
		free(p->copy_in[i].part);
		free(p->copy_in[i].origin);
	}
	free(p->copy_in);
	for (size_t i = 0; i < p->n_copy_out; i++) {
		free(p->copy_out[i].path);
		free(p->copy_out[i].part);
		free(p->copy_out[i].hostdir);
		free(p->copy_out[i].hostreal);
		free(p->copy_out[i].origin);
	}
	free(p->copy_out);
	free(p);
}
