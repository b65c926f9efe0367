/* Readable and JSON dumps of a plan, for `airlock check` and golden tests. */
#include "policy/plan.h"

#include <inttypes.h>
#include <jansson.h>
#include <linux/mount.h>
#include <stdbool.h>
#include <string.h>

#include "core/util.h"
#include "net/addr.h"
#include "net/layout.h"

static const char *kind_name(enum al_op_kind k)
{
	switch (k) {
	case AL_OP_MKDIR:
		return "mkdir";
	case AL_OP_FILE:
		return "file";
	case AL_OP_SYMLINK:
		return "symlink";
	case AL_OP_TMPFS:
		return "tmpfs";
	case AL_OP_BIND:
		return "bind";
	case AL_OP_PROC:
		return "proc";
	}
	return "?";
}

static void attr_string(uint64_t attr, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s%s%s", attr & MOUNT_ATTR_RDONLY ? "ro" : "rw",
		 attr & MOUNT_ATTR_NOSUID ? ",nosuid" : "", attr & MOUNT_ATTR_NODEV ? ",nodev" : "",
		 attr & MOUNT_ATTR_NOEXEC ? ",noexec" : "");
}

/* Staging paths as the sandbox will see them. */
static const char *visible(const char *staging)
{
	if (strncmp(staging, "/newroot", 8) == 0)
		return staging[8] ? staging + 8 : "/";
	if (strncmp(staging, "/oldroot", 8) == 0)
		return staging[8] ? staging + 8 : "/";
	return staging;
}

#define DUMP_WIDTH 96

/* Add word to a wrapped list that starts with lead: sep goes between
 * words and ends a full line (trimmed), continuation lines are indented
 * as far as lead. */
static void put_word(FILE *f, size_t *col, const char *lead, const char *sep, const char *word)
{
	size_t k = strlen(sep);

	if (*col == 0) {
		*col = (size_t)fprintf(f, "%s", lead);
	} else if (*col + k + strlen(word) > DUMP_WIDTH) {
		while (k > 0 && sep[k - 1] == ' ')
			k--;
		fprintf(f, "%.*s\n", (int)k, sep);
		*col = (size_t)fprintf(f, "%*s", (int)strlen(lead), "");
	} else {
		*col += (size_t)fprintf(f, "%s", sep);
	}
	*col += (size_t)fprintf(f, "%s", word);
}

static bool same_call(const struct al_seccomp_rule_info *a, const struct al_seccomp_rule_info *b)
{
	return strcmp(a->syscall, b->syscall) == 0;
}

static bool same_answer(const struct al_seccomp_rule_info *a, const struct al_seccomp_rule_info *b)
{
	return a->action == b->action && a->errno_value == b->errno_value &&
	       strcmp(a->why, b->why) == 0;
}

/* The plain allows as one wrapped list; each filtered call with the
 * argument combinations it is allowed for; the refusals grouped by reason. */
static void dump_seccomp_text(const struct al_plan *p, FILE *f)
{
	const struct al_seccomp_summary *s = &p->seccomp_summary;
	const struct al_seccomp_rule_info *t = p->seccomp_rules;
	size_t n = p->n_seccomp_rules, col = 0;
	char lead[64], word[160];

	fprintf(f,
		"seccomp:    %u BPF instructions, allowlist of %zu calls (%zu with argument "
		"filters), %zu named denials, unknown calls -> ENOSYS\n",
		p->seccomp.len, s->allowed, s->filtered, s->denied);
	for (size_t i = 0; i < n; i++)
		if (t[i].action == AL_SECCOMP_ALLOW && t[i].n_conds == 0)
			put_word(f, &col, "  allow    ", " ", t[i].syscall);
	if (col > 0)
		fputc('\n', f);
	for (size_t i = 0; i < n; i++) {
		if (t[i].action != AL_SECCOMP_ALLOW || t[i].n_conds == 0)
			continue;
		if (i == 0 || !same_call(&t[i - 1], &t[i])) {
			snprintf(lead, sizeof(lead), "  allow    %-12s if ", t[i].syscall);
			col = 0;
		}
		snprintf(word, sizeof(word), "(%s)", t[i].why);
		put_word(f, &col, lead, " | ", word);
		if (i + 1 == n || !same_call(&t[i], &t[i + 1]))
			fputc('\n', f);
	}
	for (size_t i = 0; i < n; i++) {
		if (t[i].action == AL_SECCOMP_ALLOW)
			continue;
		if (i == 0 || !same_answer(&t[i - 1], &t[i]))
			col = 0;
		put_word(f, &col, t[i].action == AL_SECCOMP_DENY ? "  deny     " : "  silent   ",
			 " ", t[i].syscall);
		if (i + 1 == n || !same_answer(&t[i], &t[i + 1])) {
			snprintf(word, sizeof(word), "-> %s (%s)",
				 strerrorname_np(t[i].errno_value), t[i].why);
			put_word(f, &col, "  deny     ", " ", word);
			fputc('\n', f);
		}
	}
}

static json_t *seccomp_json(const struct al_plan *p)
{
	const struct al_seccomp_summary *s = &p->seccomp_summary;
	json_t *o = json_object(), *allow = json_array(), *silent = json_array(),
	       *deny = json_array();

	json_object_set_new(o, "instructions", json_integer(p->seccomp.len));
	json_object_set_new(o, "unknown", json_string("ENOSYS"));
	json_object_set_new(o, "counts",
			    json_pack("{s:I, s:I, s:I, s:I}", "allowed", (json_int_t)s->allowed,
				      "filtered", (json_int_t)s->filtered, "denied",
				      (json_int_t)s->denied, "silent", (json_int_t)s->silent));
	for (size_t i = 0; i < p->n_seccomp_rules; i++) {
		const struct al_seccomp_rule_info *r = &p->seccomp_rules[i];
		if (r->action != AL_SECCOMP_ALLOW) {
			json_array_append_new(r->action == AL_SECCOMP_DENY ? deny : silent,
					      json_pack("{s:s, s:s, s:s}", "syscall", r->syscall,
							"errno", strerrorname_np(r->errno_value),
							"why", r->why));
			continue;
		}
		json_t *row = json_pack("{s:s}", "syscall", r->syscall);
		if (r->n_conds > 0) {
			json_t *args = json_array();
			for (unsigned k = 0; k < r->n_conds; k++)
				json_array_append_new(
				    args,
				    json_pack("{s:I, s:I, s:I}", "arg", (json_int_t)r->conds[k].arg,
					      "mask", (json_int_t)r->conds[k].mask, "value",
					      (json_int_t)r->conds[k].value));
			json_object_set_new(row, "condition", json_string(r->why));
			json_object_set_new(row, "args", args);
		}
		json_array_append_new(allow, row);
	}
	json_object_set_new(o, "allow", allow);
	json_object_set_new(o, "errno", silent);
	json_object_set_new(o, "deny", deny);
	return o;
}

void al_plan_dump_text(const struct al_plan *p, FILE *f)
{
	char size[32], attr[64];

	fprintf(f, "backend:    %s\n", p->backend);
	fprintf(f, "command:   ");
	for (size_t i = 0; p->argv[i]; i++)
		fprintf(f, " %s", p->argv[i]);
	if (!p->argv[0])
		fprintf(f, " (none: give it after \"--\" or in the policy's \"command\")");
	fprintf(f, "\nworkdir:    %s\nhostname:   %s\n", p->workdir, p->hostname);
	fprintf(f, "identity:   uid %d gid %d inside = host uid %u gid %u%s\n", AL_SANDBOX_UID,
		AL_SANDBOX_GID, p->host_uid, p->host_gid, p->rootless ? " (rootless)" : "");
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
	if (p->file_size) {
		al_format_size(p->file_size, size, sizeof(size));
		fprintf(f, ", file size %s", size);
	}
	fprintf(f, "%s\n", p->cgroup_required ? " (cgroup required)" : "");
	fprintf(f, "environment:\n");
	for (size_t i = 0; p->envp[i]; i++)
		fprintf(f, "  %s\n", p->envp[i]);
	fprintf(f, "filesystem (in setup order):\n");
	for (size_t i = 0; i < p->n_ops; i++) {
		const struct al_mount_op *op = &p->ops[i];
		switch (op->kind) {
		case AL_OP_BIND:
			attr_string(op->attr, attr, sizeof(attr));
			fprintf(f, "  bind     %-28s <- %s (%s)\n", visible(op->target),
				visible(op->source), attr);
			break;
		case AL_OP_TMPFS:
		case AL_OP_PROC:
			attr_string(op->attr, attr, sizeof(attr));
			fprintf(f, "  %-8s %-28s %s%s(%s)\n", kind_name(op->kind),
				visible(op->target), op->source ? op->source : "",
				op->source ? " " : "", attr);
			break;
		case AL_OP_SYMLINK:
			fprintf(f, "  symlink  %-28s -> %s\n", visible(op->target), op->source);
			break;
		case AL_OP_FILE:
			fprintf(f, "  file     %-28s (%zu bytes, synthesized)\n",
				visible(op->target), op->len);
			break;
		case AL_OP_MKDIR:
			break; /* implied by the mounts; the JSON dump lists them */
		}
	}
	fprintf(f, "  root     /                            read-only after pivot_root\n");
	if (p->landlock_abi)
		fprintf(f, "landlock:   ABI %d, %zu rules%s\n", p->landlock_abi, p->n_ll_rules,
			p->landlock_scoped ? ", scoped (abstract unix sockets, signals)" : "");
	else
		fprintf(f, "landlock:   not available (best-effort requested)\n");
	dump_seccomp_text(p, f);
}

char *al_plan_dump_json(const struct al_plan *p)
{
	json_t *root = json_object(), *a, *o;
	char attr[64];
	char *s;

	a = json_array();
	for (size_t i = 0; p->argv[i]; i++)
		json_array_append_new(a, json_string(p->argv[i]));
	json_object_set_new(root, "command", a);
	json_object_set_new(root, "backend", json_string(p->backend));
	json_object_set_new(root, "workdir", json_string(p->workdir));
	json_object_set_new(root, "hostname", json_string(p->hostname));
	o = json_pack("{s:i, s:i, s:I, s:I, s:b}", "uid", AL_SANDBOX_UID, "gid", AL_SANDBOX_GID,
		      "host_uid", (json_int_t)p->host_uid, "host_gid", (json_int_t)p->host_gid,
		      "rootless", p->rootless);
	json_object_set_new(root, "identity", o);
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
				    json_pack("{s:I, s:I, s:I}", "connections",
					      (json_int_t)p->net_run.connections, "requests",
					      (json_int_t)p->net_run.requests, "bytes_out",
					      (json_int_t)p->net_run.bytes_out));
		json_object_set_new(o, "per_host",
				    json_pack("{s:I, s:I, s:I}", "connections",
					      (json_int_t)p->net_host.connections, "requests",
					      (json_int_t)p->net_host.requests, "bytes_out",
					      (json_int_t)p->net_host.bytes_out));
	}
	json_object_set_new(root, "network", o);
	json_object_set_new(
	    root, "limits",
	    json_pack("{s:I, s:I, s:I, s:I, s:f, s:I, s:I, s:I, s:I, s:b}", "timeout_ms",
		      (json_int_t)p->timeout_ms, "scratch_bytes", (json_int_t)p->scratch_bytes,
		      "memory_bytes", (json_int_t)p->memory_bytes, "pids", (json_int_t)p->pids,
		      "cpus", (double)p->cpus_milli / 1000.0, "cpu_time_ms",
		      (json_int_t)p->cpu_time_ms, "output_bytes", (json_int_t)p->output_bytes,
		      "open_files", (json_int_t)p->open_files, "file_size",
		      (json_int_t)p->file_size, "cgroup_required", p->cgroup_required));
	a = json_array();
	for (size_t i = 0; p->envp[i]; i++)
		json_array_append_new(a, json_string(p->envp[i]));
	json_object_set_new(root, "env", a);
	a = json_array();
	for (size_t i = 0; i < p->n_ops; i++) {
		const struct al_mount_op *op = &p->ops[i];
		o = json_pack("{s:s, s:s, s:s}", "op", kind_name(op->kind), "target",
			      visible(op->target), "what", op->what);
		if (op->kind == AL_OP_BIND || op->kind == AL_OP_SYMLINK || op->kind == AL_OP_TMPFS)
			json_object_set_new(
			    o, "source",
			    json_string(op->kind == AL_OP_BIND ? visible(op->source) : op->source));
		if (op->kind == AL_OP_BIND || op->kind == AL_OP_TMPFS || op->kind == AL_OP_PROC) {
			attr_string(op->attr, attr, sizeof(attr));
			json_object_set_new(o, "flags", json_string(attr));
		}
		json_array_append_new(a, o);
	}
	json_object_set_new(root, "filesystem", a);
	o = json_object();
	json_object_set_new(o, "abi", json_integer(p->landlock_abi));
	json_object_set_new(o, "required", json_boolean(p->landlock_required));
	a = json_array();
	for (size_t i = 0; i < p->n_ll_rules; i++)
		json_array_append_new(a, json_pack("{s:s, s:I}", "path", p->ll_rules[i].path,
						   "access", (json_int_t)p->ll_rules[i].access));
	json_object_set_new(o, "rules", a);
	json_object_set_new(root, "landlock", o);
	json_object_set_new(root, "seccomp", seccomp_json(p));
	s = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(root);
	return s;
}
