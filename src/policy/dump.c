/* Readable and JSON dumps of a plan, for `airlock check` and golden tests.
 * How a backend makes it is the backend's to describe (native: describe.c). */
#include "policy/plan.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdbool.h>
#include <string.h>

#include "audit/audit.h"
#include "core/cleanup.h"
#include "core/util.h"
#include "ids/slots.h"
#include "policy/plan-internal.h"
#include "net/addr.h"
#include "net/layout.h"

/* One environment entry as dumps show it: a value from airlock's own
 * environment or an --env-file is not printed, only its length. */
static char *env_shown(const struct al_plan *p, const char *entry)
{
	const char *eq = strchr(entry, '=');
	_cleanup_free_ char *name = strndup(entry, (size_t)(eq - entry));

	if (!al_policy_env_is_hidden(p->env_hidden, name))
		return xstrdup(entry);
	return xasprintf("%s=<hidden: %zu bytes>", name, strlen(eq + 1));
}

void al_plan_dump_text(const struct al_plan *p, FILE *f)
{
	char size[32];

	fprintf(f, "backend:    %s\n", p->backend);
	if (p->language)
		fprintf(f, "language:   %s\n", p->language);
	fprintf(f, "command:   ");
	for (size_t i = 0; p->argv[i]; i++)
		fprintf(f, " %s", p->argv[i]);
	if (!p->argv[0])
		fprintf(f, " (none: give it after \"--\" or in the policy's \"command\")");
	fprintf(f, "\nworkdir:    %s\nhostname:   %s\n", p->workdir, p->hostname);
	fprintf(f, "terminal:   %s\n",
		p->tty ? "a pty of the sandbox's own (/dev/pts), relayed to airlock's stdio"
		       : "none (stdio are pipes relayed by airlock)");
	if (p->rootless)
		fprintf(f,
			"identity:   uid %d gid %d inside = host uid %u gid %u (rootless: you)\n",
			AL_SANDBOX_UID, AL_SANDBOX_GID, p->host_uid, p->host_gid);
	else if (p->ids_per_run)
		fprintf(
		    f,
		    "identity:   uid %d gid %d inside = host uid/gid B+%d, sandbox 0 = B, where "
		    "B = %u + slot x %u is the first id of a slot the run holds alone "
		    "(%u slots); its user namespace is created by B\n",
		    AL_SANDBOX_UID, AL_SANDBOX_GID, AL_SANDBOX_UID, AL_IDS_POOL_BASE,
		    AL_IDS_SLOT_SIZE, AL_IDS_POOL_SLOTS);
	else
		fprintf(f,
			"identity:   uid %d gid %d inside = host uid %u gid %u, sandbox 0 = %u: a "
			"fixed range (identity.host_ids), shared by every run that pins it\n",
			AL_SANDBOX_UID, AL_SANDBOX_GID, p->host_uid, p->host_gid, p->host_base);
	fprintf(f,
		"userns:     inotify %" PRIu64 " instances, %" PRIu64
		" watches; no user namespace (so no other kind either), no fanotify group "
		"(/proc/sys/user inside)\n",
		p->inotify_instances, p->inotify_watches);
	if (!p->gateway) {
		fprintf(f, "network:    none (loopback only)\n");
	} else {
		fprintf(
		    f,
		    "network:    egress gateway (HTTP proxy 127.0.0.1:%d, SOCKS5 127.0.0.1:%d), "
		    "%zu allow rule%s:\n",
		    AL_GATEWAY_HTTP_PORT, AL_GATEWAY_SOCKS_PORT, al_allow_count(p->allow),
		    al_allow_count(p->allow) == 1 ? "" : "s");
		for (size_t i = 0; p->allow_text[i]; i++)
			fprintf(f, "  allow %s\n", p->allow_text[i]);
		for (size_t i = 0; i < p->n_hosts; i++) {
			char a[INET6_ADDRSTRLEN];
			al_addr_format(&p->hosts[i].addr, a, sizeof(a));
			fprintf(f, "  host  %s = %s\n", p->hosts[i].name, a);
		}
		fprintf(f, "  resolver %s\n", p->resolver ? p->resolver : "(the host's)");
		fprintf(f,
			"  limits per run: %" PRIu64 " connections, %" PRIu64 " requests, %" PRIu64
			" bytes out; per host: %" PRIu64 ", %" PRIu64 ", %" PRIu64 " (0 = none)\n",
			p->net_run.connections, p->net_run.requests, p->net_run.bytes_out,
			p->net_host.connections, p->net_host.requests, p->net_host.bytes_out);
	}
	al_format_size(p->scratch_bytes, size, sizeof(size));
	fprintf(f, "limits:     timeout %" PRIu64 " ms, scratch %s", p->timeout_ms, size);
	al_format_size(p->memory_bytes, size, sizeof(size));
	fprintf(f, ", memory %s, pids %" PRIu64, size, p->pids);
	if (p->cpus_milli)
		fprintf(f, ", cpus %.3g", (double)p->cpus_milli / 1000.0);
	if (p->cpu_time_ms)
		fprintf(f, ", cpu-time %" PRIu64 " ms", p->cpu_time_ms);
	al_format_size(p->output_bytes, size, sizeof(size));
	fprintf(f, ", output %s, open files %" PRIu64, size, p->open_files);
	if (p->open_files_soft)
		fprintf(f, " (soft %" PRIu64 ")", p->open_files_soft);
	if (p->file_size) {
		al_format_size(p->file_size, size, sizeof(size));
		fprintf(f, ", file size %s", size);
	}
	fprintf(f, "%s\n", p->cgroup_required ? " (cgroup required)" : "");
	al_plan_dump_cred_text(p, f);
	fprintf(f, "environment:\n");
	for (size_t i = 0; p->envp[i]; i++) {
		_cleanup_free_ char *e = env_shown(p, p->envp[i]);
		fprintf(f, "  %s\n", e);
	}
}

/* A count or limit where 0 means none: null then, as in the record. */
static json_t *opt_count(uint64_t v)
{
	return v ? json_integer((json_int_t)v) : json_null();
}

char *al_plan_dump_json(const struct al_plan *p)
{
	json_t *root = json_object(), *a, *o;
	char *s;

	a = p->argv[0] ? json_array() : json_null(); /* none yet: check without one */
	for (size_t i = 0; p->argv[i]; i++)
		json_array_append_new(a, al_json_text(p->argv[i]));
	json_object_set_new(root, "command", a);
	json_object_set_new(root, "backend", json_string(p->backend));
	if (p->language)
		json_object_set_new(root, "language", json_string(p->language));
	json_object_set_new(root, "workdir", json_string(p->workdir));
	json_object_set_new(root, "hostname", json_string(p->hostname));
	json_object_set_new(root, "tty", json_boolean(p->tty));
	json_t *pool =
	    p->ids_per_run
		? json_pack("{s:I, s:I, s:I}", "first", (json_int_t)AL_IDS_POOL_BASE, "slot_size",
			    (json_int_t)AL_IDS_SLOT_SIZE, "slots", (json_int_t)AL_IDS_POOL_SLOTS)
		: json_null();
	o = json_pack(
	    "{s:i, s:i, s:s, s:o, s:o, s:o, s:o, s:b}", "uid", AL_SANDBOX_UID, "gid",
	    AL_SANDBOX_GID, "host_ids",
	    p->rootless	     ? "caller"
	    : p->ids_per_run ? "per-run"
			     : "fixed",
	    "host_uid", p->ids_per_run ? json_null() : json_integer((json_int_t)p->host_uid),
	    "host_gid", p->ids_per_run ? json_null() : json_integer((json_int_t)p->host_gid),
	    "host_base",
	    p->rootless || p->ids_per_run ? json_null() : json_integer((json_int_t)p->host_base),
	    "pool", pool, "rootless", p->rootless);
	json_object_set_new(root, "identity", o);
	struct al_ns_limit lim[AL_NS_LIMITS_MAX];
	size_t n_lim = al_plan_ns_limits(p, lim);
	o = json_object();
	for (size_t i = 0; i < n_lim; i++)
		json_object_set_new(o, lim[i].name, json_integer((json_int_t)lim[i].value));
	json_object_set_new(root, "userns_limits", o);
	o = json_pack("{s:s}", "mode", p->gateway ? "gateway" : "none");
	if (p->gateway) {
		a = json_array();
		for (size_t i = 0; p->allow_text[i]; i++)
			json_array_append_new(a, json_string(p->allow_text[i]));
		json_object_set_new(o, "allow", a);
		json_t *h = json_object();
		for (size_t i = 0; i < p->n_hosts; i++) {
			char addr[INET6_ADDRSTRLEN];
			al_addr_format(&p->hosts[i].addr, addr, sizeof(addr));
			json_object_set_new(h, p->hosts[i].name, json_string(addr));
		}
		json_object_set_new(o, "hosts", h);
		json_object_set_new(o, "resolver",
				    p->resolver ? json_string(p->resolver) : json_null());
		json_object_set_new(o, "limits",
				    json_pack("{s:o, s:o, s:o}", "connections",
					      opt_count(p->net_run.connections), "requests",
					      opt_count(p->net_run.requests), "bytes_out",
					      opt_count(p->net_run.bytes_out)));
		json_object_set_new(o, "per_host",
				    json_pack("{s:o, s:o, s:o}", "connections",
					      opt_count(p->net_host.connections), "requests",
					      opt_count(p->net_host.requests), "bytes_out",
					      opt_count(p->net_host.bytes_out)));
	}
	json_object_set_new(root, "network", o);
	json_object_set_new(
	    root, "limits",
	    json_pack("{s:I, s:I, s:I, s:I, s:o, s:o, s:I, s:I, s:o, s:o, s:b}", "timeout_ms",
		      (json_int_t)p->timeout_ms, "scratch_bytes", (json_int_t)p->scratch_bytes,
		      "memory_bytes", (json_int_t)p->memory_bytes, "pids", (json_int_t)p->pids,
		      "cpus",
		      p->cpus_milli ? json_real((double)p->cpus_milli / 1000.0) : json_null(),
		      "cpu_time_ms", opt_count(p->cpu_time_ms), "output_bytes",
		      (json_int_t)p->output_bytes, "open_files", (json_int_t)p->open_files,
		      "open_files_soft", opt_count(p->open_files_soft), "file_size",
		      opt_count(p->file_size), "cgroup_required", p->cgroup_required));
	a = json_array();
	for (size_t i = 0; p->envp[i]; i++) {
		_cleanup_free_ char *e = env_shown(p, p->envp[i]);
		json_array_append_new(a, al_json_text(e));
	}
	json_object_set_new(root, "env", a);
	json_object_set_new(root, "credentials", al_plan_dump_cred_json(p));
	s = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(root);
	return s;
}
