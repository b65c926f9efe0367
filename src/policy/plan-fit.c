/* Whether a request fits a warm pool's sandbox (plan-fit.h). The fields
 * fall in two classes (docs/pool.md):
 *
 * - fixed when the sandbox was made, so they must be equal: the backend,
 *   the operator policy and profile, the identity (host ids and how they
 *   are had), every limit, the file tree (each entry, the copies in and
 *   out), the terminal, the hostname, landlock, the network mode and what
 *   the gateway read before it confined itself (network.hosts, the
 *   resolver, the never rules, the decider), and the budget;
 * - applied at the claim: the environment (laid over the pool's for each
 *   exec, so every variable the pool's plan sets must be set by the
 *   request too), the workdir, the lifetime (timeout_ms), the allowlist,
 *   the request options of its rules and the secrets the gateway presents.
 *
 * What a claim cannot carry yet (tokens, SigV4 keys, TLS interception's
 * CA) makes the request cold too, each with its reason. */
#include "policy/plan-fit.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "policy/cred.h"

struct fit {
	struct al_errors *why;
	int r;
};

static void differs(struct fit *f, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void differs(struct fit *f, const char *field, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	f->r = -EINVAL;
	if (!f->why)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	al_errors_add(f->why, EINVAL, "pool", field, "%s", msg);
}

static bool str_eq(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

static const char *show(const char *s)
{
	return s ? s : "(none)";
}

static void str(struct fit *f, const char *field, const char *a, const char *b)
{
	if (!str_eq(a, b))
		differs(f, field, "the pool's sandbox has %s, the request %s", show(a), show(b));
}

static void u64(struct fit *f, const char *field, uint64_t a, uint64_t b)
{
	if (a != b)
		differs(f, field, "the pool's sandbox has %" PRIu64 ", the request %" PRIu64, a, b);
}

static void flag(struct fit *f, const char *field, bool a, bool b)
{
	if (a != b)
		differs(f, field, "the pool's sandbox has %s, the request %s", a ? "true" : "false",
			b ? "true" : "false");
}

static bool strv_eq(char *const *a, char *const *b)
{
	size_t i = 0;

	for (; a && b && a[i] && b[i]; i++)
		if (strcmp(a[i], b[i]) != 0)
			return false;
	return (!a || !a[i]) && (!b || !b[i]);
}

static void strv(struct fit *f, const char *field, char *const *a, char *const *b)
{
	if (!strv_eq(a, b))
		differs(f, field, "differs from the pool's sandbox");
}

static void identity(struct fit *f, const struct al_plan *a, const struct al_plan *b)
{
	flag(f, "identity.rootless", a->rootless, b->rootless);
	flag(f, "identity.ids_per_run", a->ids_per_run, b->ids_per_run);
	u64(f, "identity.host_base", a->host_base, b->host_base);
	u64(f, "identity.host_uid", a->host_uid, b->host_uid);
	u64(f, "identity.host_gid", a->host_gid, b->host_gid);
}

static void limits(struct fit *f, const struct al_plan *a, const struct al_plan *b)
{
	const struct {
		const char *field;
		uint64_t a, b;
	} v[] = {
	    {"limits.scratch", a->scratch_bytes, b->scratch_bytes},
	    {"limits.memory", a->memory_bytes, b->memory_bytes},
	    {"limits.pids", a->pids, b->pids},
	    {"limits.cpus", a->cpus_milli, b->cpus_milli},
	    {"limits.cpu_time", a->cpu_time_ms, b->cpu_time_ms},
	    {"limits.output", a->output_bytes, b->output_bytes},
	    {"limits.open_files", a->open_files, b->open_files},
	    {"limits.open_files_soft", a->open_files_soft, b->open_files_soft},
	    {"limits.file_size", a->file_size, b->file_size},
	    {"limits.socket_stop", a->socket_stop, b->socket_stop},
	    {"limits.msgqueue", a->msgqueue_bytes, b->msgqueue_bytes},
	    {"limits.sigpending", a->sigpending, b->sigpending},
	    {"limits.memlock", a->memlock_bytes, b->memlock_bytes},
	    {"limits.inotify_instances", a->inotify_instances, b->inotify_instances},
	    {"limits.inotify_watches", a->inotify_watches, b->inotify_watches},
	    {"limits.cgroup_asked", a->cgroup_asked, b->cgroup_asked},
	    {"network.limits.connections", a->net_run.connections, b->net_run.connections},
	    {"network.limits.requests", a->net_run.requests, b->net_run.requests},
	    {"network.limits.bytes_out", a->net_run.bytes_out, b->net_run.bytes_out},
	    {"network.host_limits.connections", a->net_host.connections, b->net_host.connections},
	    {"network.host_limits.requests", a->net_host.requests, b->net_host.requests},
	    {"network.host_limits.bytes_out", a->net_host.bytes_out, b->net_host.bytes_out},
	};

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		u64(f, v[i].field, v[i].a, v[i].b);
	flag(f, "limits.kernel_memory_best_effort", a->kernel_memory_best_effort,
	     b->kernel_memory_best_effort);
	flag(f, "limits.cgroup_required", a->cgroup_required, b->cgroup_required);
}

static bool budget_eq(const struct al_budget *a, const struct al_budget *b)
{
	if (a->set != b->set || a->max != b->max || a->cpu_second != b->cpu_second ||
	    a->memory_gb_second != b->memory_gb_second || a->egress_mb != b->egress_mb ||
	    a->has_prices != b->has_prices || a->n_requests != b->n_requests)
		return false;
	for (size_t i = 0; i < a->n_requests; i++)
		if (!str_eq(a->requests[i].host, b->requests[i].host) ||
		    a->requests[i].nano != b->requests[i].nano)
			return false;
	return true;
}

static bool entry_eq(const struct al_fs_entry *a, const struct al_fs_entry *b)
{
	if (a->kind != b->kind || !str_eq(a->path, b->path) || a->access != b->access ||
	    a->dir != b->dir || a->mode != b->mode || a->sandbox_owned != b->sandbox_owned ||
	    a->dev != b->dev || a->ino != b->ino || a->as_owner != b->as_owner ||
	    a->owner_uid != b->owner_uid || a->owner_gid != b->owner_gid || a->copy != b->copy)
		return false;
	if (a->kind == AL_FS_FILE)
		return a->len == b->len && (!a->len || memcmp(a->source, b->source, a->len) == 0);
	return str_eq(a->source, b->source);
}

static const struct al_fs_entry *find_entry(const struct al_plan *p, const char *path)
{
	for (size_t i = 0; i < p->n_fs; i++)
		if (str_eq(p->fs[i].path, path))
			return &p->fs[i];
	return NULL;
}

/* The file tree: each entry of either that the other lacks or has
 * otherwise is named by its sandbox path (entries are few: dozens). */
static void tree(struct fit *f, const struct al_plan *a, const struct al_plan *b)
{
	char field[300];
	bool same = a->n_fs == b->n_fs;

	for (size_t i = 0; i < a->n_fs; i++) {
		const struct al_fs_entry *eb = find_entry(b, a->fs[i].path);
		snprintf(field, sizeof(field), "fs.%s", a->fs[i].path);
		if (!eb)
			differs(f, field, "the pool's sandbox has it, the request does not");
		else if (!entry_eq(&a->fs[i], eb))
			differs(f, field, "differs from the pool's sandbox (%s)",
				eb->what ? eb->what : "its source or mode");
		same &= eb != NULL && eb == &b->fs[i];
	}
	for (size_t i = 0; i < b->n_fs; i++) {
		snprintf(field, sizeof(field), "fs.%s", b->fs[i].path);
		if (!find_entry(a, b->fs[i].path))
			differs(f, field, "the request has it, the pool's sandbox does not");
	}
	/* The same entries in another order make another tree. */
	if (!same && f->r == 0)
		differs(f, "fs", "the request's tree is built in another order");
	u64(f, "copy_in", a->n_copy_in, b->n_copy_in);
	for (size_t i = 0; i < a->n_copy_in && i < b->n_copy_in; i++) {
		str(f, "copy_in.host", a->copy_in[i].host, b->copy_in[i].host);
		str(f, "copy_in.path", a->copy_in[i].path, b->copy_in[i].path);
		if (a->copy_in[i].dev != b->copy_in[i].dev ||
		    a->copy_in[i].ino != b->copy_in[i].ino)
			differs(f, "copy_in.host", "%s is another file than the pool's",
				b->copy_in[i].host);
	}
	u64(f, "copy_out", a->n_copy_out, b->n_copy_out);
	for (size_t i = 0; i < a->n_copy_out && i < b->n_copy_out; i++) {
		str(f, "copy_out.path", a->copy_out[i].path, b->copy_out[i].path);
		str(f, "copy_out.hostdir", a->copy_out[i].hostreal, b->copy_out[i].hostreal);
	}
	u64(f, "copy_out_bytes", a->copy_out_bytes, b->copy_out_bytes);
	u64(f, "copy_out_files", a->copy_out_files, b->copy_out_files);
	flag(f, "copy_out_replace", a->copy_out_replace, b->copy_out_replace);
	flag(f, "scratch_exec", a->scratch_exec, b->scratch_exec);
	flag(f, "landlock_required", a->landlock_required, b->landlock_required);
}

/* What the gateway read before it confined itself, and the network
 * mode. */
static void network(struct fit *f, const struct al_plan *a, const struct al_plan *b)
{
	flag(f, "network.mode", a->gateway, b->gateway);
	str(f, "network.resolver", a->resolver, b->resolver);
	bool hosts = a->n_hosts == b->n_hosts;
	for (size_t i = 0; hosts && i < a->n_hosts; i++)
		hosts = str_eq(a->hosts[i].name, b->hosts[i].name) &&
			memcmp(&a->hosts[i].addr, &b->hosts[i].addr, sizeof(a->hosts[i].addr)) == 0;
	if (!hosts)
		differs(f, "network.hosts", "differs from the pool's sandbox");
	strv(f, "network.never", a->never_text, b->never_text);
	const struct al_decider_conf *da = a->decider, *db = b->decider;
	if ((da == NULL) != (db == NULL) ||
	    (da && (!str_eq(da->socket, db->socket) || !str_eq(da->host, db->host) ||
		    da->port != db->port || !str_eq(da->egress_path, db->egress_path) ||
		    da->timeout_ms != db->timeout_ms || da->cache_size != db->cache_size ||
		    da->cache_ttl_ms != db->cache_ttl_ms)))
		differs(f, "decider", "differs from the pool's sandbox");
	if (!budget_eq(&a->budget, &b->budget))
		differs(f, "limits.budget", "differs from the pool's sandbox");
}

/* What the claim applies, as far as it can carry it. */
static void claimable(struct fit *f, const struct al_plan *a, const struct al_plan *b)
{
	char field[300];

	if (a->n_secrets)
		differs(f, "credentials", "the pool's sandbox holds credentials of its own");
	if (b->intercept)
		differs(
		    f, "network.allow",
		    "TLS interception needs a CA made with the sandbox: not claimed from a pool");
	for (size_t i = 0; i < b->n_secrets; i++) {
		const struct al_secret_def *d = b->secrets[i].def;
		snprintf(field, sizeof(field), "credentials.%s", d->name);
		if (d->token)
			differs(f, field, "a token is not carried by a claim yet");
		else if (d->how == AL_HOW_SIGV4)
			differs(f, field, "SigV4 keys are not carried by a claim yet");
	}
	/* The environment is laid over the pool's: a variable the pool's
	 * sandbox sets and the request does not would stay. */
	for (size_t i = 0; a->envp && a->envp[i]; i++) {
		const char *eq = strchr(a->envp[i], '=');
		size_t len = eq ? (size_t)(eq - a->envp[i]) + 1 : strlen(a->envp[i]);
		bool set = false;
		for (size_t j = 0; b->envp && b->envp[j] && !set; j++)
			set = strncmp(b->envp[j], a->envp[i], len) == 0;
		if (!set) {
			snprintf(field, sizeof(field), "env.%.*s", (int)(eq ? len - 1 : len),
				 a->envp[i]);
			differs(f, field, "the pool's sandbox sets it, the request does not");
		}
	}
}

int al_plan_fits(const struct al_plan *pooled, const struct al_plan *wanted, struct al_errors *why)
{
	struct fit f = {.why = why};

	str(&f, "backend", pooled->backend, wanted->backend);
	str(&f, "profile", pooled->profile, wanted->profile);
	str(&f, "operator_policy", pooled->operator_sha256, wanted->operator_sha256);
	identity(&f, pooled, wanted);
	limits(&f, pooled, wanted);
	tree(&f, pooled, wanted);
	flag(&f, "tty", pooled->tty, wanted->tty);
	str(&f, "hostname", pooled->hostname, wanted->hostname);
	network(&f, pooled, wanted);
	claimable(&f, pooled, wanted);
	return f.r;
}
