/* config.json's linux object (runtime-spec config-linux.md): namespaces,
 * id mappings, sysctl, resources, devices, seccomp, masked and read-only
 * paths, and the fields recorded only as present. */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "oci/spec-internal.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

static const struct {
	const char *name;
	int flag;
} ns_types[] = {
    {"pid", CLONE_NEWPID},	 {"network", CLONE_NEWNET}, {"mount", CLONE_NEWNS},
    {"ipc", CLONE_NEWIPC},	 {"uts", CLONE_NEWUTS},	    {"user", CLONE_NEWUSER},
    {"cgroup", CLONE_NEWCGROUP}, {"time", CLONE_NEWTIME},
};

static int parse_ns(struct oci_ctx *c, const json_t *j, const char *p, size_t i)
{
	struct al_oci_ns *ns = &c->cfg->namespaces[i];
	_cleanup_free_ char *type = NULL;
	json_t *t, *v;
	size_t k;

	if (!oci_object(c, j, p))
		return -EINVAL;
	if (!(t = oci_need(c, j, p, "type")) || oci_str(c, t, KEY(p, "type"), &type))
		return -EINVAL;
	for (k = 0; k < sizeof(ns_types) / sizeof(ns_types[0]); k++)
		if (strcmp(type, ns_types[k].name) == 0)
			break;
	if (k == sizeof(ns_types) / sizeof(ns_types[0]))
		return oci_fail(c, KEY(p, "type"), "unknown namespace type \"%.64s\"", type);
	for (size_t e = 0; e < i; e++)
		if (c->cfg->namespaces[e].type == ns_types[k].flag)
			return oci_fail(c, KEY(p, "type"), "\"%s\" is also linux.namespaces[%zu]",
					type, e);
	ns->type = ns_types[k].flag;
	if ((v = oci_get(j, "path"))) {
		if (oci_str(c, v, KEY(p, "path"), &ns->path))
			return -EINVAL;
		if (ns->path[0] != '/')
			return oci_fail(c, KEY(p, "path"), "must be an absolute path");
	}
	return 0;
}

static int parse_namespaces(struct oci_ctx *c, const json_t *j)
{
	const char *p = "linux.namespaces";
	size_t n;
	int bad = 0;

	if (!oci_array(c, j, p, 64))
		return -EINVAL;
	n = json_array_size(j);
	if (!(c->cfg->namespaces = calloc(n ? n : 1, sizeof(*c->cfg->namespaces))))
		return oci_nomem(c);
	c->cfg->n_namespaces = n;
	for (size_t i = 0; i < n; i++)
		bad |= parse_ns(c, json_array_get(j, i), IDX(p, i), i);
	return bad;
}

/* An optional int64 member: has set when given; min is -1 where the spec
 * reads -1 as "unlimited". */
static int opt_int(struct oci_ctx *c, const json_t *obj, const char *base, const char *key,
		   int64_t min, int64_t max, bool *has, int64_t *out)
{
	json_t *v = oci_get(obj, key);

	if (!v)
		return 0;
	if (oci_int(c, v, KEY(base, key), min, max, out))
		return -EINVAL;
	*has = true;
	return 0;
}

static int opt_uint(struct oci_ctx *c, const json_t *obj, const char *base, const char *key,
		    uint64_t max, bool *has, uint64_t *out)
{
	json_t *v = oci_get(obj, key);

	if (!v)
		return 0;
	if (oci_uint(c, v, KEY(base, key), max, out))
		return -EINVAL;
	*has = true;
	return 0;
}

static int opt_bool(struct oci_ctx *c, const json_t *obj, const char *base, const char *key,
		    bool *has, bool *out)
{
	json_t *v = oci_get(obj, key);

	if (!v)
		return 0;
	if (oci_bool(c, v, KEY(base, key), out))
		return -EINVAL;
	*has = true;
	return 0;
}

static int parse_memory(struct oci_ctx *c, const json_t *j)
{
	const char *p = "linux.resources.memory";
	struct al_oci_config *f = c->cfg;
	bool has_swappiness = false;
	int bad = 0;

	if (!oci_object(c, j, p))
		return -EINVAL;
	bad |= opt_int(c, j, p, "limit", -1, INT64_MAX, &f->has_memory_limit, &f->memory_limit);
	bad |= opt_int(c, j, p, "reservation", -1, INT64_MAX, &f->has_memory_reservation,
		       &f->memory_reservation);
	bad |= opt_int(c, j, p, "swap", -1, INT64_MAX, &f->has_memory_swap, &f->memory_swap);
	bad |= opt_int(c, j, p, "kernel", -1, INT64_MAX, &f->has_memory_kernel, &f->memory_kernel);
	bad |= opt_int(c, j, p, "kernelTCP", -1, INT64_MAX, &f->has_memory_kernel_tcp,
		       &f->memory_kernel_tcp);
	bad |= opt_uint(c, j, p, "swappiness", UINT64_MAX, &has_swappiness, &f->memory_swappiness);
	/* 0 to 100, as vm.swappiness; 2^64 - 1 is Docker's -1 ("unset"). */
	if (has_swappiness && f->memory_swappiness == UINT64_MAX)
		f->memory_swappiness = 0;
	else if (has_swappiness && f->memory_swappiness > 100)
		bad = oci_fail(c, KEY(p, "swappiness"), "%llu is out of range (0 to 100)",
			       (unsigned long long)f->memory_swappiness);
	else
		f->has_memory_swappiness = has_swappiness;
	bad |= opt_bool(c, j, p, "disableOOMKiller", &f->has_memory_disable_oom_killer,
			&f->memory_disable_oom_killer);
	bad |= opt_bool(c, j, p, "useHierarchy", &f->has_memory_use_hierarchy,
			&f->memory_use_hierarchy);
	bad |= opt_bool(c, j, p, "checkBeforeUpdate", &f->has_memory_check_before_update,
			&f->memory_check_before_update);
	return bad;
}

static int parse_cpu(struct oci_ctx *c, const json_t *j)
{
	const char *p = "linux.resources.cpu";
	struct al_oci_config *f = c->cfg;
	json_t *v;
	int bad = 0;

	if (!oci_object(c, j, p))
		return -EINVAL;
	bad |= opt_uint(c, j, p, "shares", UINT64_MAX, &f->has_cpu_shares, &f->cpu_shares);
	bad |= opt_int(c, j, p, "quota", -1, INT64_MAX, &f->has_cpu_quota, &f->cpu_quota);
	bad |= opt_uint(c, j, p, "burst", UINT64_MAX, &f->has_cpu_burst, &f->cpu_burst);
	bad |= opt_uint(c, j, p, "period", UINT64_MAX, &f->has_cpu_period, &f->cpu_period);
	bad |= opt_int(c, j, p, "realtimeRuntime", -1, INT64_MAX, &f->has_cpu_realtime_runtime,
		       &f->cpu_realtime_runtime);
	bad |= opt_uint(c, j, p, "realtimePeriod", UINT64_MAX, &f->has_cpu_realtime_period,
			&f->cpu_realtime_period);
	bad |= opt_int(c, j, p, "idle", 0, 1, &f->has_cpu_idle, &f->cpu_idle);
	if ((v = oci_get(j, "cpus")))
		bad |= oci_str(c, v, KEY(p, "cpus"), &f->cpu_cpus);
	if ((v = oci_get(j, "mems")))
		bad |= oci_str(c, v, KEY(p, "mems"), &f->cpu_mems);
	return bad;
}

static int parse_device_rule(struct oci_ctx *c, const json_t *j, const char *p,
			     struct al_oci_device_rule *d)
{
	static const char *const types[] = {"a", "b", "c", NULL};
	json_t *v;
	bool has;
	int bad = 0;

	d->major = d->minor = -1;
	if (!oci_object(c, j, p))
		return -EINVAL;
	if ((v = oci_need(c, j, p, "allow")))
		bad |= oci_bool(c, v, KEY(p, "allow"), &d->allow);
	else
		bad = -EINVAL;
	if ((v = oci_get(j, "type")) && oci_str(c, v, KEY(p, "type"), &d->type) == 0 &&
	    !oci_one_of(d->type, types))
		bad = oci_fail(c, KEY(p, "type"), "must be \"a\", \"b\" or \"c\", not \"%.16s\"",
			       d->type);
	bad |= opt_int(c, j, p, "major", -1, INT64_MAX, &has, &d->major);
	bad |= opt_int(c, j, p, "minor", -1, INT64_MAX, &has, &d->minor);
	if ((v = oci_get(j, "access")) && oci_str(c, v, KEY(p, "access"), &d->access) == 0 &&
	    (!*d->access || strspn(d->access, "rwm") != strlen(d->access)))
		bad = oci_fail(c, KEY(p, "access"), "must be letters of \"rwm\", not \"%.16s\"",
			       d->access);
	if ((!d->type && !(d->type = strdup("a"))) || (!d->access && !(d->access = strdup("rwm"))))
		return oci_nomem(c);
	return bad;
}

static int parse_resources(struct oci_ctx *c, const json_t *j)
{
	const char *p = "linux.resources";
	struct al_oci_config *f = c->cfg;
	json_t *v;
	int bad = 0;

	if (!oci_object(c, j, p))
		return -EINVAL;
	f->has_resources = true;
	if ((v = oci_get(j, "memory")))
		bad |= parse_memory(c, v);
	if ((v = oci_get(j, "cpu")))
		bad |= parse_cpu(c, v);
	if ((v = oci_get(j, "pids"))) {
		if (oci_object(c, v, KEY(p, "pids")))
			bad |= opt_int(c, v, KEY(p, "pids"), "limit", INT64_MIN, INT64_MAX,
				       &f->has_pids_limit, &f->pids_limit);
		else
			bad = -EINVAL;
	}
	if ((v = oci_get(j, "devices"))) {
		const char *dp = KEY(p, "devices");
		size_t n;

		if (!oci_array(c, v, dp, AL_OCI_MAX_ITEMS))
			return -EINVAL;
		n = json_array_size(v);
		if (!(f->device_rules = calloc(n ? n : 1, sizeof(*f->device_rules))))
			return oci_nomem(c);
		f->n_device_rules = n;
		for (size_t i = 0; i < n; i++)
			bad |= parse_device_rule(c, json_array_get(v, i), IDX(dp, i),
						 &f->device_rules[i]);
	}
	if ((v = oci_get(j, "unified"))) {
		bad |= oci_pairs(c, v, KEY(p, "unified"), &f->unified);
		f->has_unified = true;
	}
	/* Carried only as present: the caller refuses or ignores them. */
	if ((v = oci_get(j, "blockIO")) && oci_object(c, v, KEY(p, "blockIO")))
		f->has_block_io = true, oci_unmodelled(c, "linux.resources.blockIO");
	if ((v = oci_get(j, "hugepageLimits")) &&
	    oci_array(c, v, KEY(p, "hugepageLimits"), AL_OCI_MAX_ITEMS))
		f->has_hugepage_limits = true, oci_unmodelled(c, "linux.resources.hugepageLimits");
	if ((v = oci_get(j, "network")) && oci_object(c, v, KEY(p, "network")))
		f->has_network = true, oci_unmodelled(c, "linux.resources.network");
	if ((v = oci_get(j, "rdma")) && oci_object(c, v, KEY(p, "rdma")))
		f->has_rdma = true, oci_unmodelled(c, "linux.resources.rdma");
	return bad;
}

static int parse_device(struct oci_ctx *c, const json_t *j, const char *p, struct al_oci_device *d)
{
	static const char *const types[] = {"c", "b", "u", "p", NULL};
	json_t *v;
	bool has_major = false, has_minor = false;
	uint64_t u;
	int bad = 0;

	if (!oci_object(c, j, p))
		return -EINVAL;
	if ((v = oci_need(c, j, p, "path")) && oci_str(c, v, KEY(p, "path"), &d->path) == 0 &&
	    d->path[0] != '/')
		bad = oci_fail(c, KEY(p, "path"), "must be an absolute path");
	if ((v = oci_need(c, j, p, "type")) && oci_str(c, v, KEY(p, "type"), &d->type) == 0 &&
	    !oci_one_of(d->type, types))
		bad = oci_fail(c, KEY(p, "type"),
			       "must be \"c\", \"b\", \"u\" or \"p\", not \"%.16s\"", d->type);
	if (!d->path || !d->type)
		return -EINVAL;
	bad |= opt_int(c, j, p, "major", 0, INT64_MAX, &has_major, &d->major);
	bad |= opt_int(c, j, p, "minor", 0, INT64_MAX, &has_minor, &d->minor);
	/* a FIFO has no numbers; the others must say which device */
	if (strcmp(d->type, "p") != 0 && (!has_major || !has_minor))
		bad = oci_fail(c, KEY(p, has_major ? "minor" : "major"),
			       "missing (required for type \"%s\")", d->type);
	if ((v = oci_get(j, "fileMode"))) {
		if (oci_uint(c, v, KEY(p, "fileMode"), UINT32_MAX, &u) == 0)
			d->has_mode = true, d->mode = (uint32_t)u;
		else
			bad = -EINVAL;
	}
	if ((v = oci_get(j, "uid")))
		bad |= oci_u32(c, v, KEY(p, "uid"), &d->uid), d->has_uid = true;
	if ((v = oci_get(j, "gid")))
		bad |= oci_u32(c, v, KEY(p, "gid"), &d->gid), d->has_gid = true;
	return bad;
}

static int parse_devices(struct oci_ctx *c, const json_t *j)
{
	struct al_oci_config *f = c->cfg;
	size_t n;
	int bad = 0;

	if (!oci_array(c, j, "linux.devices", AL_OCI_MAX_ITEMS))
		return -EINVAL;
	n = json_array_size(j);
	if (!(f->devices = calloc(n ? n : 1, sizeof(*f->devices))))
		return oci_nomem(c);
	f->n_devices = n;
	for (size_t i = 0; i < n; i++)
		bad |=
		    parse_device(c, json_array_get(j, i), IDX("linux.devices", i), &f->devices[i]);
	return bad;
}

static const char *const seccomp_actions[] = {
    "SCMP_ACT_KILL",	    "SCMP_ACT_KILL_PROCESS",
    "SCMP_ACT_KILL_THREAD", "SCMP_ACT_TRAP",
    "SCMP_ACT_ERRNO",	    "SCMP_ACT_TRACE",
    "SCMP_ACT_ALLOW",	    "SCMP_ACT_LOG",
    "SCMP_ACT_NOTIFY",	    NULL,
};

static int parse_action(struct oci_ctx *c, const json_t *j, const char *p, char **out)
{
	if (oci_str(c, j, p, out))
		return -EINVAL;
	if (!oci_one_of(*out, seccomp_actions))
		return oci_fail(c, p, "unknown action \"%.64s\"", *out);
	return 0;
}

static int parse_syscall_arg(struct oci_ctx *c, const json_t *j, const char *p,
			     struct al_oci_syscall_arg *a)
{
	static const char *const ops[] = {"SCMP_CMP_NE",	"SCMP_CMP_LT", "SCMP_CMP_LE",
					  "SCMP_CMP_EQ",	"SCMP_CMP_GE", "SCMP_CMP_GT",
					  "SCMP_CMP_MASKED_EQ", NULL};
	json_t *idx, *val, *op, *v;
	uint64_t u;

	if (!oci_object(c, j, p))
		return -EINVAL;
	idx = oci_need(c, j, p, "index");
	val = oci_need(c, j, p, "value");
	op = oci_need(c, j, p, "op");
	/* a system call has six arguments */
	if (!idx || !val || !op || oci_uint(c, idx, KEY(p, "index"), 5, &u) ||
	    oci_uint(c, val, KEY(p, "value"), UINT64_MAX, &a->value) ||
	    oci_str(c, op, KEY(p, "op"), &a->op))
		return -EINVAL;
	a->index = (unsigned)u;
	if (!oci_one_of(a->op, ops))
		return oci_fail(c, KEY(p, "op"), "unknown operator \"%.64s\"", a->op);
	if ((v = oci_get(j, "valueTwo")))
		return oci_uint(c, v, KEY(p, "valueTwo"), UINT64_MAX, &a->value_two);
	return 0;
}

static int parse_syscall(struct oci_ctx *c, const json_t *j, const char *p,
			 struct al_oci_syscall_rule *s)
{
	json_t *v;
	int bad = 0;

	if (!oci_object(c, j, p))
		return -EINVAL;
	if ((v = oci_need(c, j, p, "names")))
		bad |= oci_strv(c, v, KEY(p, "names"), OCI_NONEMPTY, AL_OCI_MAX_ITEMS, &s->names,
				NULL);
	else
		bad = -EINVAL;
	if ((v = oci_need(c, j, p, "action")))
		bad |= parse_action(c, v, KEY(p, "action"), &s->action);
	else
		bad = -EINVAL;
	if ((v = oci_get(j, "errnoRet")))
		bad |= oci_u32(c, v, KEY(p, "errnoRet"), &s->errno_ret), s->has_errno = true;
	if ((v = oci_get(j, "args"))) {
		const char *ap = KEY(p, "args");
		size_t n;

		if (!oci_array(c, v, ap, 6 * 8))
			return -EINVAL;
		n = json_array_size(v);
		if (!(s->args = calloc(n ? n : 1, sizeof(*s->args))))
			return oci_nomem(c);
		s->n_args = n;
		for (size_t i = 0; i < n; i++)
			bad |= parse_syscall_arg(c, json_array_get(v, i), IDX(ap, i), &s->args[i]);
	}
	return bad;
}

static const char *const seccomp_arches[] = {
    "SCMP_ARCH_X86",	 "SCMP_ARCH_X86_64",   "SCMP_ARCH_X32",		"SCMP_ARCH_ARM",
    "SCMP_ARCH_AARCH64", "SCMP_ARCH_MIPS",     "SCMP_ARCH_MIPS64",	"SCMP_ARCH_MIPS64N32",
    "SCMP_ARCH_MIPSEL",	 "SCMP_ARCH_MIPSEL64", "SCMP_ARCH_MIPSEL64N32", "SCMP_ARCH_PPC",
    "SCMP_ARCH_PPC64",	 "SCMP_ARCH_PPC64LE",  "SCMP_ARCH_S390",	"SCMP_ARCH_S390X",
    "SCMP_ARCH_PARISC",	 "SCMP_ARCH_PARISC64", "SCMP_ARCH_RISCV64",	"SCMP_ARCH_LOONGARCH64",
    "SCMP_ARCH_M68K",	 "SCMP_ARCH_SH",       "SCMP_ARCH_SHEB",	NULL,
};

static const char *const seccomp_flags[] = {
    "SECCOMP_FILTER_FLAG_TSYNC",
    "SECCOMP_FILTER_FLAG_LOG",
    "SECCOMP_FILTER_FLAG_SPEC_ALLOW",
    "SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV",
    NULL,
};

/* Every entry of v (NULL-terminated) is one of names[]. */
static int check_names(struct oci_ctx *c, char **v, const char *p, const char *const *names,
		       const char *what)
{
	int bad = 0;

	for (size_t i = 0; v && v[i]; i++)
		if (!oci_one_of(v[i], names))
			bad = oci_fail(c, IDX(p, i), "unknown %s \"%.64s\"", what, v[i]);
	return bad;
}

static int parse_seccomp(struct oci_ctx *c, const json_t *j)
{
	const char *p = "linux.seccomp";
	struct al_oci_config *f = c->cfg;
	bool notify = false;
	json_t *v;
	int bad = 0;

	if (!oci_object(c, j, p))
		return -EINVAL;
	f->has_seccomp = true;
	if ((v = oci_need(c, j, p, "defaultAction")))
		bad |= parse_action(c, v, KEY(p, "defaultAction"), &f->seccomp_default_action);
	else
		bad = -EINVAL;
	if ((v = oci_get(j, "defaultErrnoRet")))
		bad |= oci_u32(c, v, KEY(p, "defaultErrnoRet"), &f->seccomp_default_errno),
		    f->has_seccomp_default_errno = true;
	if ((v = oci_get(j, "architectures")) &&
	    oci_strv(c, v, KEY(p, "architectures"), 0, 64, &f->seccomp_architectures, NULL) == 0)
		bad |= check_names(c, f->seccomp_architectures, KEY(p, "architectures"),
				   seccomp_arches, "architecture");
	if ((v = oci_get(j, "flags")) &&
	    oci_strv(c, v, KEY(p, "flags"), 0, 64, &f->seccomp_flags, NULL) == 0)
		bad |= check_names(c, f->seccomp_flags, KEY(p, "flags"), seccomp_flags, "flag");
	if ((v = oci_get(j, "listenerPath")))
		bad |= oci_str(c, v, KEY(p, "listenerPath"), &f->seccomp_listener_path);
	if ((v = oci_get(j, "listenerMetadata")))
		bad |= oci_str(c, v, KEY(p, "listenerMetadata"), &f->seccomp_listener_metadata);
	if ((v = oci_get(j, "syscalls"))) {
		const char *sp = KEY(p, "syscalls");
		size_t n;

		if (!oci_array(c, v, sp, AL_OCI_MAX_ITEMS))
			return -EINVAL;
		n = json_array_size(v);
		if (!(f->seccomp_syscalls = calloc(n ? n : 1, sizeof(*f->seccomp_syscalls))))
			return oci_nomem(c);
		f->n_seccomp_syscalls = n;
		for (size_t i = 0; i < n; i++) {
			struct al_oci_syscall_rule *s = &f->seccomp_syscalls[i];

			bad |= parse_syscall(c, json_array_get(v, i), IDX(sp, i), s);
			notify |= s->action && strcmp(s->action, "SCMP_ACT_NOTIFY") == 0;
		}
	}
	/* a notification goes to the listener: without one it has nowhere to go */
	if (notify && !f->seccomp_listener_path)
		bad = oci_fail(c, KEY(p, "listenerPath"),
			       "missing (required when a rule's action is SCMP_ACT_NOTIFY)");
	return bad;
}

static int parse_personality(struct oci_ctx *c, const json_t *j)
{
	static const char *const domains[] = {"LINUX", "LINUX32", NULL};
	const char *p = "linux.personality";
	_cleanup_free_ char *domain = NULL;
	json_t *v;

	if (!oci_object(c, j, p))
		return -EINVAL;
	c->cfg->has_personality = true;
	oci_unmodelled(c, p);
	if (!(v = oci_need(c, j, p, "domain")) || oci_str(c, v, KEY(p, "domain"), &domain))
		return -EINVAL;
	if (!oci_one_of(domain, domains))
		return oci_fail(c, KEY(p, "domain"),
				"must be \"LINUX\" or \"LINUX32\", not \"%.64s\"", domain);
	return 0;
}

/* Fields of linux of a simple type, and those only recorded as present. */
static int parse_linux_rest(struct oci_ctx *c, const json_t *j)
{
	static const char *const propagations[] = {"private",	 "shared",	"slave",
						   "unbindable", "rprivate",	"rshared",
						   "rslave",	 "runbindable", NULL};
	struct al_oci_config *f = c->cfg;
	json_t *v;
	int bad = 0;

	if ((v = oci_get(j, "cgroupsPath")))
		bad |= oci_str(c, v, "linux.cgroupsPath", &f->cgroups_path);
	if ((v = oci_get(j, "maskedPaths")))
		bad |= oci_strv(c, v, "linux.maskedPaths", OCI_ABS, AL_OCI_MAX_ITEMS,
				&f->masked_paths, NULL);
	if ((v = oci_get(j, "readonlyPaths")))
		bad |= oci_strv(c, v, "linux.readonlyPaths", OCI_ABS, AL_OCI_MAX_ITEMS,
				&f->readonly_paths, NULL);
	if ((v = oci_get(j, "rootfsPropagation")) &&
	    oci_str(c, v, "linux.rootfsPropagation", &f->rootfs_propagation) == 0 &&
	    !oci_one_of(f->rootfs_propagation, propagations))
		bad = oci_fail(c, "linux.rootfsPropagation", "unknown propagation \"%.64s\"",
			       f->rootfs_propagation);
	if ((v = oci_get(j, "mountLabel")))
		bad |= oci_str(c, v, "linux.mountLabel", &f->mount_label),
		    f->has_mount_label = true;
	if ((v = oci_get(j, "personality")))
		bad |= parse_personality(c, v);
	if ((v = oci_get(j, "intelRdt")) && oci_object(c, v, "linux.intelRdt"))
		f->has_intel_rdt = true, oci_unmodelled(c, "linux.intelRdt");
	if ((v = oci_get(j, "timeOffsets")) && oci_object(c, v, "linux.timeOffsets"))
		f->has_time_offsets = true, oci_unmodelled(c, "linux.timeOffsets");
	if ((v = oci_get(j, "memoryPolicy")))
		oci_unmodelled(c, "linux.memoryPolicy");
	if ((v = oci_get(j, "netDevices")))
		oci_unmodelled(c, "linux.netDevices");
	return bad;
}

int oci_parse_linux(struct oci_ctx *c, const json_t *j)
{
	struct al_oci_config *f = c->cfg;
	json_t *v;
	int bad = 0;

	if (!oci_object(c, j, "linux"))
		return -EINVAL;
	f->has_linux = true;
	if ((v = oci_get(j, "namespaces")))
		bad |= parse_namespaces(c, v);
	if ((v = oci_get(j, "uidMappings")))
		bad |= oci_idmaps(c, v, "linux.uidMappings", &f->uid_maps, &f->n_uid_maps);
	if ((v = oci_get(j, "gidMappings")))
		bad |= oci_idmaps(c, v, "linux.gidMappings", &f->gid_maps, &f->n_gid_maps);
	if ((v = oci_get(j, "sysctl")))
		bad |= oci_pairs(c, v, "linux.sysctl", &f->sysctl);
	if ((v = oci_get(j, "resources")))
		bad |= parse_resources(c, v);
	if ((v = oci_get(j, "devices")))
		bad |= parse_devices(c, v);
	if ((v = oci_get(j, "seccomp")))
		bad |= parse_seccomp(c, v);
	bad |= parse_linux_rest(c, j);
	return bad;
}
