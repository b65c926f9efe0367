/* `airlock check`: how the native backend makes a plan — the staging ops in
 * setup order, the landlock rules, the seccomp table. */
#include "backend/native/lower.h"

#include <linux/mount.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "core/sys.h"
#include "core/util.h"

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
	case AL_OP_DEVPTS:
		return "devpts";
	case AL_OP_MASK:
		return "mask";
	case AL_OP_RDONLY:
		return "rdonly";
	case AL_OP_SPECIAL:
		return "kernfs";
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
static void dump_seccomp_text(const struct al_native_plan *p, FILE *f)
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

static json_t *seccomp_json(const struct al_native_plan *p)
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

void al_native_dump_text(const struct al_native_plan *p, FILE *f)
{
	char attr[64];

	fprintf(f, "filesystem (in setup order):\n");
	for (size_t i = 0; i < p->n_ops; i++) {
		const struct al_mount_op *op = &p->ops[i];
		switch (op->kind) {
		case AL_OP_BIND:
			attr_string(op->attr, attr, sizeof(attr));
			fprintf(f, "  bind     %-28s <- %s (%s)\n", visible(op->target),
				visible(op->source), attr);
			if (op->input >= 0 && op->root_ids)
				fprintf(f, "           opened by the supervisor; shown with the "
					   "container's ids (idmapped)\n");
			else if (op->input >= 0)
				fprintf(
				    f,
				    "           opened by the supervisor; the sandbox user acts as "
				    "its owner %u:%u (idmapped)%s\n",
				    (unsigned)op->owner_uid, (unsigned)op->owner_gid,
				    op->copy ? ", or a read-only copy where that cannot be" : "");
			break;
		case AL_OP_TMPFS:
		case AL_OP_PROC:
		case AL_OP_DEVPTS:
		case AL_OP_SPECIAL:
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
		case AL_OP_MASK:
		case AL_OP_RDONLY:
			fprintf(f, "  %-8s %-28s (where it exists)\n", kind_name(op->kind),
				visible(op->target));
			break;
		case AL_OP_MKDIR:
			break; /* implied by the mounts; the JSON dump lists them */
		}
	}
	if (!p->rooted || p->ops[p->root_op].seal)
		fprintf(f, "  root     /                            read-only after pivot_root\n");
	if (p->landlock_abi)
		fprintf(f, "landlock:   ABI %d, %zu rules%s\n", p->landlock_abi, p->n_ll_rules,
			p->landlock_scoped ? ", scoped (abstract unix sockets, signals)" : "");
	else
		fprintf(f, "landlock:   not available (best-effort requested)\n");
	dump_seccomp_text(p, f);
}

void al_native_dump_json(const struct al_native_plan *p, const struct al_plan *plan, json_t *root)
{
	json_t *a, *o;
	char attr[64];

	a = json_array();
	for (size_t i = 0; i < p->n_ops; i++) {
		const struct al_mount_op *op = &p->ops[i];
		o = json_pack("{s:s, s:s, s:s}", "op", kind_name(op->kind), "target",
			      visible(op->target), "what", op->what);
		if (op->kind == AL_OP_BIND || op->kind == AL_OP_SYMLINK ||
		    op->kind == AL_OP_TMPFS || op->kind == AL_OP_DEVPTS)
			json_object_set_new(
			    o, "source",
			    json_string(op->kind == AL_OP_BIND ? visible(op->source) : op->source));
		if (al_op_mounts(op->kind)) {
			attr_string(op->attr, attr, sizeof(attr));
			json_object_set_new(o, "flags", json_string(attr));
		}
		if (op->input >= 0)
			json_object_set_new(o, "as_owner",
					    json_pack("{s:i, s:i, s:b}", "uid", (int)op->owner_uid,
						      "gid", (int)op->owner_gid, "copy", op->copy));
		json_array_append_new(a, o);
	}
	json_object_set_new(root, "filesystem", a);
	o = json_object();
	json_object_set_new(o, "abi", json_integer(p->landlock_abi));
	json_object_set_new(o, "required", json_boolean(plan->landlock_required));
	a = json_array();
	for (size_t i = 0; i < p->n_ll_rules; i++)
		json_array_append_new(a, json_pack("{s:s, s:I}", "path", p->ll_rules[i].path,
						   "access", (json_int_t)p->ll_rules[i].access));
	json_object_set_new(o, "rules", a);
	json_object_set_new(root, "landlock", o);
	json_object_set_new(root, "seccomp", seccomp_json(p));
}

/* `airlock backends`: what the native layer is and how it keeps each
 * promise (docs/backends.md at length). */
const struct al_backend_facts al_native_facts = {
    .summary = "Linux namespaces (user, mount, pid, net, ipc, uts, cgroup), seccomp, landlock "
	       "and a cgroup, on the host's kernel",
    .files = "a read-only tree of the plan's paths (idmapped binds) on a tmpfs root; "
	     "landlock on top; the scratch a tmpfs of its own",
    .egress = "a network namespace with only loopback: nftables capture sends every TCP "
	      "connection and DNS query to the gateway's listeners",
    .pids = "a pid namespace: the host's processes are invisible",
    .kernel = "the host's kernel through a seccomp allowlist",
    .limits = "the run's cgroup (memory with kernel memory, pids, CPU), socket memory "
	      "watched, output capped by the supervisor",
    .exec = "yes: init in the sandbox forks each exec",
    .features = AL_BACKEND_EXEC | AL_BACKEND_TTY | AL_BACKEND_NETWORK | AL_BACKEND_HIDES_PIDS |
		AL_BACKEND_PRIVATE_TMP | AL_BACKEND_PRIVATE_LOOPBACK | AL_BACKEND_PAUSE |
		AL_BACKEND_MOUNTS_ELSEWHERE | AL_BACKEND_OCI_ROOT,
};

static long read_sysctl(const char *path)
{
	char buf[32];
	ssize_t n = al_read_file(path, buf, sizeof(buf) - 1);

	if (n <= 0)
		return -1;
	buf[n] = '\0';
	return strtol(buf, NULL, 10);
}

/* User namespaces are what the layer stands on; the rest (landlock's ABI,
 * cgroups, the plan's paths) each plan's check says. */
int al_native_usable(char *why, size_t len)
{
	if (read_sysctl("/proc/sys/user/max_user_namespaces") == 0) {
		snprintf(why, len, "user namespaces are off (user.max_user_namespaces is 0)");
		return 0;
	}
	if (geteuid() != 0 && read_sysctl("/proc/sys/kernel/unprivileged_userns_clone") == 0) {
		snprintf(why, len,
			 "unprivileged user namespaces are off (kernel.unprivileged_userns_clone "
			 "is 0; run as root or turn it on)");
		return 0;
	}
	if (geteuid() != 0 &&
	    read_sysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == 1) {
		snprintf(why, len,
			 "AppArmor restricts unprivileged user namespaces "
			 "(kernel.apparmor_restrict_unprivileged_userns is 1)");
		return 0;
	}
	return 1;
}
