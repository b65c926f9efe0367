/* The result record: one JSON object per run (schema: docs/result.md). */
#include "supervisor/result.h"

#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/sys.h"
#include "core/util.h"
#include "policy/kmem.h"
#include "policy/limits.h"

static json_t *limits_json(const struct al_plan *p, const struct al_run_result *res)
{
	json_t *o = json_pack("{s:I, s:I, s:I, s:I, s:I}", "timeout_ms", (json_int_t)p->timeout_ms,
			      "memory_bytes", (json_int_t)p->memory_bytes, "pids",
			      (json_int_t)p->pids, "output_bytes", (json_int_t)p->output_bytes,
			      "scratch_bytes", (json_int_t)p->scratch_bytes);
	json_object_set_new(
	    o, "cpus", p->cpus_milli ? json_real((double)p->cpus_milli / 1000.0) : json_null());
	json_object_set_new(o, "cpu_time_ms",
			    p->cpu_time_ms ? json_integer((json_int_t)p->cpu_time_ms)
					   : json_null());
	json_object_set_new(o, "open_files", json_integer((json_int_t)p->open_files));
	json_object_set_new(o, "file_size_bytes",
			    p->file_size ? json_integer((json_int_t)p->file_size) : json_null());
	json_object_set_new(o, "cgroup", json_boolean(res->have_cgroup));
	json_object_set_new(o, "kernel_memory", al_kmem_json(p, res->sockmem, &res->cgroup));
	return o;
}

/* The run's secrets and tokens; a per-request token with the ones
 * minted for it. */
static json_t *credentials_json(const struct al_run_result *res)
{
	json_t *a = res->credentials ? json_deep_copy(res->credentials) : json_array();
	size_t i, k;
	json_t *e, *m;

	json_array_foreach(a, i, e)
	{
		if (!json_is_true(json_object_get(e, "per_request")))
			continue;
		const char *name = json_string_value(json_object_get(e, "name"));
		json_t *mine = json_array();
		uint64_t n = 0;
		json_array_foreach(res->minted, k, m)
		{
			const char *mn = json_string_value(json_object_get(m, "name"));
			if (name && mn && strcmp(name, mn) == 0) {
				json_array_append_new(mine,
						      json_pack("{s:O, s:O, s:O}", "jti",
								json_object_get(m, "jti"), "aud",
								json_object_get(m, "aud"), "exp",
								json_object_get(m, "exp")));
				n++;
			}
		}
		json_object_set_new(e, "minted", mine);
		json_object_set_new(e, "minted_truncated",
				    json_boolean(res->n_minted > json_array_size(res->minted)));
	}
	return a;
}

uint64_t al_cost_total(const struct al_cost *c)
{
	return al_add_sat(al_add_sat(c->cpu, c->memory), al_add_sat(c->egress, c->requests));
}

static json_t *amount(uint64_t nano)
{
	return json_real((double)nano / (double)AL_BUDGET_UNIT);
}

/* {"max", "total", "items": {...}, "hosts": {NAME: {"requests", "cost"}}} */
static json_t *cost_json(const struct al_plan *p, const struct al_cost *c)
{
	json_t *hosts = json_object();

	for (size_t i = 0; i < c->n_hosts; i++)
		json_object_set_new(hosts, c->hosts[i].name,
				    json_pack("{s:I, s:o}", "requests",
					      (json_int_t)c->hosts[i].requests, "cost",
					      amount(c->hosts[i].nano)));
	return json_pack("{s:o, s:o, s:{s:o, s:o, s:o, s:o}, s:o}", "max", amount(p->budget.max),
			 "total", amount(al_cost_total(c)), "items", "cpu", amount(c->cpu),
			 "memory", amount(c->memory), "egress", amount(c->egress), "requests",
			 amount(c->requests), "hosts", hosts);
}

/* The gateway's counters, and where a secret was kept from (the first
 * AL_MISUSE_KEPT distinct places). */
static json_t *network_json(const struct al_run_result *res)
{
	const struct al_gateway_stats *n = &res->network;
	json_t *hosts = json_array();

	for (size_t i = 0; i < res->denied.n_misuse; i++) {
		const struct al_gateway_refusal *r = &res->denied.misuse[i];
		json_array_append_new(
		    hosts, json_pack("{s:s, s:i, s:o, s:s}", "host", r->host, "port", (int)r->port,
				     "secret", r->secret[0] ? json_string(r->secret) : json_null(),
				     "where", r->why));
	}
	return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o}", "allowed",
			 (json_int_t)n->allowed, "denied", (json_int_t)n->denied, "failed",
			 (json_int_t)n->failed, "bytes_up", (json_int_t)n->bytes_up, "bytes_down",
			 (json_int_t)n->bytes_down, "dns_answered", (json_int_t)n->dns_answered,
			 "dns_refused", (json_int_t)n->dns_refused, "cut", (json_int_t)n->cut,
			 "misuse", (json_int_t)n->misuse, "misuse_hosts", hosts);
}

json_t *al_result_json(const struct al_plan *plan, const struct al_run_result *res,
		       const char *run_id)
{
	json_t *o = json_object();
	const struct al_cgroup_stats *cg = &res->cgroup;

	json_object_set_new(o, "version", json_integer(1));
	json_object_set_new(o, "run", json_string(run_id));
	json_object_set_new(o, "started",
			    res->started[0] ? json_string(res->started) : json_null());
	json_object_set_new(o, "backend", json_string(plan->backend ? plan->backend : "native"));
	json_object_set_new(o, "platform",
			    res->platform ? json_string(res->platform) : json_null());
	json_object_set_new(o, "reason", json_string(al_reason_name(res->reason)));
	json_object_set_new(o, "exit_code", json_integer(res->exit_code));
	json_object_set_new(o, "signal",
			    res->reason == AL_END_SIGNALED || res->reason == AL_END_KILLED
				? json_integer(res->signal)
				: json_null());
	json_object_set_new(o, "wall_ms", json_integer((json_int_t)res->wall_ms));
#define MS_OR_NULL(have, us) ((have) ? json_integer((json_int_t)((us) / 1000)) : json_null())
	json_object_set_new(o, "cpu_user_ms", MS_OR_NULL(res->have_cpu, cg->cpu_user_us));
	json_object_set_new(o, "cpu_system_ms", MS_OR_NULL(res->have_cpu, cg->cpu_system_us));
	json_object_set_new(o, "cpu_total_ms", MS_OR_NULL(res->have_cpu, cg->cpu_usage_us));
	json_object_set_new(o, "peak_memory_bytes",
			    res->have_cgroup ? json_integer((json_int_t)cg->memory_peak)
					     : json_null());
	json_object_set_new(o, "output",
			    json_pack("{s:I, s:I, s:b, s:b}", "stdout_bytes",
				      (json_int_t)res->stdout_bytes, "stderr_bytes",
				      (json_int_t)res->stderr_bytes, "truncated",
				      res->output_truncated, "tty", plan->tty));
	json_object_set_new(
	    o, "denials",
	    json_pack("{s:I, s:I, s:I}", "syscalls", (json_int_t)res->syscalls_denied, "oom_kills",
		      (json_int_t)cg->oom_kills, "forks_refused", (json_int_t)cg->pids_max_hits));
	if (res->have_network)
		json_object_set_new(o, "network", network_json(res));
	else
		json_object_set_new(o, "network", json_null());
	json_object_set_new(o, "limits", limits_json(plan, res));
	json_object_set_new(
	    o, "identity",
	    res->have_ids
		? json_pack("{s:I, s:I, s:o}", "host_uid", (json_int_t)res->ids.uid, "host_gid",
			    (json_int_t)res->ids.gid, "slot",
			    res->ids.slot >= 0 ? json_integer(res->ids.slot) : json_null())
		: json_null());
	json_object_set_new(
	    o, "operator_policy",
	    plan->profile ? json_pack("{s:o, s:s, s:s}", "file", al_json_text(plan->operator_file),
				      "sha256", plan->operator_sha256, "profile", plan->profile)
			  : json_null());
	json_object_set_new(o, "copy_out",
			    res->copy_out ? json_incref(res->copy_out) : json_array());
	json_object_set_new(o, "cost",
			    plan->budget.set ? cost_json(plan, &res->cost) : json_null());
	json_object_set_new(o, "credentials", credentials_json(res));
	if (res->reason == AL_END_SETUP_ERROR || res->reason == AL_END_EXEC_FAILED) {
		json_object_set_new(o, "error",
				    json_pack("{s:o, s:s?, s:o}", "step", al_json_text(res->step),
					      "errno", res->err ? strerrorname_np(res->err) : NULL,
					      "message", al_json_text(res->msg)));
	}
	return o;
}

static const char *kind_of(mode_t m)
{
	return S_ISLNK(m)    ? "a symbolic link"
	       : S_ISDIR(m)  ? "a directory"
	       : S_ISCHR(m)  ? "a character device"
	       : S_ISBLK(m)  ? "a block device"
	       : S_ISFIFO(m) ? "a FIFO"
	       : S_ISSOCK(m) ? "a socket"
			     : "not a regular file";
}

int al_result_check_target(int dirfd, const char *name, const char *path, struct al_error *err)
{
	struct stat st;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : al_error_setsys(err, errno, "--result %s", path);
	if (S_ISREG(st.st_mode))
		return 0;
	return al_error_set(err, EEXIST,
			    "--result %s is %s: the record replaces a regular file or makes a new "
			    "one, never anything else; for a descriptor give --result-fd N (or "
			    "--result - for stdout)",
			    path, kind_of(st.st_mode));
}

int al_result_write_json_fd(int fd, const char *what, const json_t *o, struct al_error *err)
{
	char *s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	int r = 0;

	if (!s || al_write_all(fd, s, strlen(s)) < 0 || al_write_all(fd, "\n", 1) < 0)
		r = al_error_setsys(err, s ? errno : ENOMEM, "writing the result record to %s",
				    what);
	free(s);
	return r;
}

int al_result_write_fd(int fd, const char *what, const struct al_plan *plan,
		       const struct al_run_result *res, const char *run_id, struct al_error *err)
{
	json_t *o = al_result_json(plan, res, run_id);
	int r = al_result_write_json_fd(fd, what, o, err);

	json_decref(o);
	return r;
}

int al_result_write(int dirfd, const char *name, const char *path, const struct al_plan *plan,
		    const struct al_run_result *res, const char *run_id, struct al_error *err)
{
	json_t *o = al_result_json(plan, res, run_id);
	int r = al_result_write_json(dirfd, name, path, o, err);

	json_decref(o);
	return r;
}

int al_result_write_json(int dirfd, const char *name, const char *path, const json_t *o,
			 struct al_error *err)
{
	char rnd[24];
	al_random_id(rnd, sizeof(rnd));
	/* A name nobody can guess, created here and now (O_EXCL) and never
	 * through a link: the directory may be one the sandbox could write. */
	_cleanup_free_ char *tmp = xasprintf(".%s.%s.tmp", name, rnd);
	char *s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	struct stat st;
	int fd, r = 0;

	if (!s)
		return al_error_set(err, ENOMEM, "writing the result record %s: out of memory",
				    path);
	fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY,
		    0644);
	if (fd < 0) {
		r = al_error_setsys(err, errno, "cannot write the result record %s", path);
		goto out;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || al_write_all(fd, s, strlen(s)) < 0 ||
	    al_write_all(fd, "\n", 1) < 0 || fsync(fd) < 0) {
		r = al_error_setsys(err, errno ? errno : EIO, "writing the result record %s", path);
		close(fd);
		unlinkat(dirfd, tmp, 0);
		goto out;
	}
	close(fd);
	/* What the invoker named was checked at the start (a regular file or
	 * nothing); whatever is there now (a link the sandbox planted in a
	 * directory it can write) is replaced without being followed, so the
	 * sandbox cannot redirect the record (a directory there makes the
	 * rename fail, which is reported). */
	if (renameat(dirfd, tmp, dirfd, name) < 0) {
		r = al_error_setsys(err, errno, "renaming the result record to %s", path);
		unlinkat(dirfd, tmp, 0);
	}
out:
	free(s);
	return r;
}

const char *al_reason_name(enum al_end_reason r)
{
	switch (r) {
	case AL_END_EXITED:
		return "exited";
	case AL_END_SIGNALED:
		return "signaled";
	case AL_END_TIMEOUT:
		return "timeout";
	case AL_END_MEMORY:
		return "memory";
	case AL_END_PIDS:
		return "pids";
	case AL_END_CPU_TIME:
		return "cpu-time";
	case AL_END_OUTPUT:
		return "output";
	case AL_END_KILLED:
		return "killed";
	case AL_END_SETUP_ERROR:
		return "setup-error";
	case AL_END_EXEC_FAILED:
		return "exec-failed";
	case AL_END_BUDGET:
		return "budget";
	}
	return "?";
}

/* "--memory 64M": the flag that sets limit k, with the value v it had. */
static const char *limit_flag(enum al_op_limit k, uint64_t v, char *buf, size_t len)
{
	const struct al_limit_def *d = &al_limit_defs[k];
	char val[32];

	al_limit_format(d, v, val, sizeof(val));
	snprintf(buf, len, "%s %s", d->flag, val);
	return buf;
}

const char *al_result_describe(const struct al_plan *plan, const struct al_run_result *res,
			       char *buf, size_t len)
{
	unsigned long long s = res->wall_ms / 1000, ms = res->wall_ms % 1000;
	char flag[64];

	/* Each limit says the value that was reached and the flag that sets
	 * it (plan is NULL only for callers that have none: no flag then). */
	switch (res->reason) {
	case AL_END_SETUP_ERROR:
		snprintf(buf, len, "sandbox setup failed at step \"%s\": %s%s%s", res->step,
			 res->msg, res->err ? ": " : "", res->err ? strerror(res->err) : "");
		return buf;
	case AL_END_EXEC_FAILED:
		snprintf(buf, len, "cannot execute \"%s\": %s%s", res->msg, strerror(res->err),
			 res->err == ENOENT ? " (command not found in the sandbox)" : "");
		return buf;
	case AL_END_TIMEOUT:
		snprintf(
		    buf, len, "limit: timeout; the sandbox was killed after %llu.%03llu s%s%s%s", s,
		    ms, plan ? ": " : "",
		    plan ? limit_flag(AL_OPL_TIMEOUT, plan->timeout_ms, flag, sizeof(flag)) : "",
		    plan ? " was reached" : "");
		return buf;
	case AL_END_MEMORY:
		if (res->listeners_hit)
			snprintf(buf, len,
				 "limit: memory; the sandbox was killed (more than %u listening "
				 "sockets, whose queues the supervisor must count; a fixed cap)",
				 AL_MAX_LISTENERS);
		else if (res->linear_memory_cap)
			snprintf(
			    buf, len,
			    "limit: memory; the sandbox was killed (the WebAssembly module's "
			    "linear memory came within an eighth of its cap of %llu M)%s%s%s",
			    (unsigned long long)(res->linear_memory_cap >> 20),
			    plan ? ": the cap is what " : "",
			    plan ? limit_flag(AL_OPL_MEMORY, plan->memory_bytes, flag, sizeof(flag))
				 : "",
			    plan ? " leaves after node's own reserve" : "");
		else if (res->socket_memory)
			snprintf(
			    buf, len,
			    "limit: memory; the sandbox was killed (its socket buffers held "
			    "%llu K, past the %llu K they may)%s%s%s",
			    (unsigned long long)(res->cgroup.socket_peak >> 10),
			    (unsigned long long)(res->socket_stop >> 10),
			    plan ? ": an eighth of " : "",
			    plan ? limit_flag(AL_OPL_MEMORY, plan->memory_bytes, flag, sizeof(flag))
				 : "",
			    plan ? " was reached" : "");
		else
			snprintf(
			    buf, len, "limit: memory; the sandbox was killed (out of memory)%s%s%s",
			    plan ? ": " : "",
			    plan ? limit_flag(AL_OPL_MEMORY, plan->memory_bytes, flag, sizeof(flag))
				 : "",
			    plan ? " was reached" : "");
		return buf;
	case AL_END_PIDS:
		snprintf(buf, len,
			 "limit: pids; the sandbox was killed (a fork hit the limit)%s%s%s",
			 plan ? ": " : "",
			 plan ? limit_flag(AL_OPL_PIDS, plan->pids, flag, sizeof(flag)) : "",
			 plan ? " was reached" : "");
		return buf;
	case AL_END_CPU_TIME:
		snprintf(
		    buf, len, "limit: cpu-time; the sandbox was killed after %llu ms of CPU%s%s%s",
		    (unsigned long long)(res->cgroup.cpu_usage_us / 1000), plan ? ": " : "",
		    plan ? limit_flag(AL_OPL_CPU_TIME, plan->cpu_time_ms, flag, sizeof(flag)) : "",
		    plan ? " was reached" : "");
		return buf;
	case AL_END_OUTPUT:
		snprintf(
		    buf, len,
		    "limit: output; the sandbox was killed after %llu bytes of output%s%s%s",
		    (unsigned long long)(res->stdout_bytes + res->stderr_bytes), plan ? ": " : "",
		    plan ? limit_flag(AL_OPL_OUTPUT, plan->output_bytes, flag, sizeof(flag)) : "",
		    plan ? " was reached" : "");
		return buf;
	case AL_END_KILLED:
		snprintf(buf, len, "stopped by %s: the sandbox was killed", strsignal(res->signal));
		return buf;
	case AL_END_BUDGET: {
		char spent[32], max[32];
		al_budget_format(al_cost_total(&res->cost), spent, sizeof(spent));
		al_budget_format(plan ? plan->budget.max : 0, max, sizeof(max));
		snprintf(buf, len, "limit: budget; the sandbox was stopped after spending %s%s%s%s",
			 spent, plan ? ": the policy's limits.budget.max " : "", plan ? max : "",
			 plan ? " was reached" : "");
		return buf;
	}
	default:
		return NULL;
	}
}

/* The gateway's reason, in a few words. */
static const char *short_reason(const char *r)
{
	if (!r)
		return "refused";
	if (strncmp(r, "no rule", 7) == 0)
		return "no rule";
	if (strstr(r, "placeholder of secret"))
		return "a secret's placeholder";
	if (strstr(r, "holds the value of secret"))
		return "a secret's value in the answer";
	if (strncmp(r, "limit", 5) == 0)
		return "a network limit";
	if (strstr(r, "space, which the rule") || strstr(r, "non-public"))
		return "non-public address";
	if (strstr(r, "does not resolve"))
		return "no such name";
	if (strstr(r, "the stream names"))
		return "names another host";
	if (strstr(r, "connections"))
		return "too many connections";
	if (strstr(r, "resolver could not start"))
		return "resolver failure";
	if (strstr(r, "no original destination"))
		return "no destination";
	if (strstr(r, "chunked") || strstr(r, "only SOCKS") || strstr(r, "no method") ||
	    strstr(r, "cannot forward"))
		return "unsupported request";
	return "malformed request";
}

void al_result_note_denied_host(struct al_run_result *res, const char *host, int port,
				const char *reason)
{
	struct al_denied *d = &res->denied;
	char what[sizeof(d->hosts[0].what)];

	if (!host || !*host)
		host = "?";
	if (strchr(host, ':')) /* an IPv6 literal */
		snprintf(what, sizeof(what), port > 0 ? "[%s]:%d" : "[%s]", host, port);
	else
		snprintf(what, sizeof(what), port > 0 ? "%s:%d" : "%s", host, port);
	/* It came from the gateway and goes to a terminal: printable ASCII
	 * only (no escape sequences). */
	for (char *p = what; *p; p++)
		if (*p < 0x21 || *p > 0x7e)
			*p = '?';
	for (size_t i = 0; i < d->n_hosts; i++)
		if (strcmp(d->hosts[i].what, what) == 0)
			return;
	if (d->n_hosts == AL_DENIED_HOSTS) {
		d->more_hosts = true;
		return;
	}
	snprintf(d->hosts[d->n_hosts].what, sizeof(d->hosts[0].what), "%s", what);
	snprintf(d->hosts[d->n_hosts].why, sizeof(d->hosts[0].why), "%s", short_reason(reason));
	d->n_hosts++;
}

void al_result_note_denied_call(struct al_run_result *res, const char *name)
{
	struct al_denied *d = &res->denied;

	if (!name)
		name = "unknown";
	for (size_t i = 0; i < d->n_calls; i++)
		if (strcmp(d->calls[i], name) == 0)
			return;
	if (d->n_calls < AL_DENIED_CALLS)
		snprintf(d->calls[d->n_calls++], sizeof(d->calls[0]), "%s", name);
	else
		d->more_calls = true;
}

void al_result_note_refusal(struct al_run_result *res, const struct al_gateway_refusal *r)
{
	struct al_denied *d = &res->denied;
	bool dns = r->kind == AL_GW_REFUSED_DNS;
	struct al_gateway_refusal *v = dns ? d->names : d->misuse;
	size_t *n = dns ? &d->n_names : &d->n_misuse;
	size_t cap = dns ? AL_DENIED_NAMES : AL_MISUSE_KEPT;

	for (size_t i = 0; i < *n; i++)
		if (v[i].port == r->port && strcmp(v[i].host, r->host) == 0 &&
		    strcmp(v[i].secret, r->secret) == 0 && strcmp(v[i].why, r->why) == 0)
			return;
	if (*n == cap) {
		*(dns ? &d->more_names : &d->more_misuse) = true;
		return;
	}
	v[(*n)++] = *r;
}

const char *al_result_denied_summary(const struct al_run_result *res, char *buf, size_t len)
{
	const struct al_denied *d = &res->denied;
	uint64_t conns = res->have_network ? res->network.denied : 0;
	uint64_t dns = res->have_network ? res->network.dns_refused : 0;
	uint64_t misuse = res->have_network ? res->network.misuse : 0;
	size_t n = 0;

	if (!conns && !dns && !misuse && !res->syscalls_denied)
		return NULL;
#define PUT(...)                                                                                   \
	do {                                                                                       \
		if (n < len)                                                                       \
			n += (size_t)snprintf(buf + n, len - n, __VA_ARGS__);                      \
	} while (0)
	PUT("denied");
	if (conns) {
		PUT(" %" PRIu64 " connection%s", conns, conns == 1 ? "" : "s");
		for (size_t i = 0; i < d->n_hosts; i++)
			PUT("%s %s (%s)", i ? "," : ":", d->hosts[i].what, d->hosts[i].why);
		if (d->more_hosts)
			PUT(", ...");
	}
	/* Each shown once, with where it was kept from (host:port) and what
	 * was there. */
	if (misuse) {
		PUT("%s %" PRIu64 " secret misuse%s", conns ? ";" : "", misuse,
		    misuse == 1 ? "" : "s");
		for (size_t i = 0; i < d->n_misuse && i < AL_DENIED_HOSTS; i++) {
			const struct al_gateway_refusal *r = &d->misuse[i];
			PUT("%s %s:%u (", i ? "," : ":", r->host, r->port);
			if (r->secret[0])
				PUT("secret %s in the %s)", r->secret, r->why);
			else
				PUT("the %s)", r->why);
		}
		if (d->n_misuse > AL_DENIED_HOSTS || d->more_misuse)
			PUT(", ...");
	}
	if (dns) {
		PUT("%s %" PRIu64 " DNS lookup%s", conns || misuse ? ";" : "", dns,
		    dns == 1 ? "" : "s");
		for (size_t i = 0; i < d->n_names; i++)
			PUT("%s %s (%s)", i ? "," : ":",
			    d->names[i].host[0] ? d->names[i].host : "?", d->names[i].why);
		if (d->more_names)
			PUT(", ...");
	}
	if (res->syscalls_denied) {
		PUT("%s %" PRIu64 " system call%s", conns || misuse || dns ? ";" : "",
		    res->syscalls_denied, res->syscalls_denied == 1 ? "" : "s");
		for (size_t i = 0; i < d->n_calls; i++)
			PUT("%s %s", i ? "," : ":", d->calls[i]);
		if (d->more_calls)
			PUT(", ...");
	}
#undef PUT
	if (n >= len && len > 4)
		memcpy(buf + len - 4, "...", 4);
	return buf;
}
