/* An OCI runtime bundle's config.json (runtime-spec 1.0 to 1.3, as podman,
 * containerd, `runc spec` and the runtime-tools validation suite write it)
 * parsed into a C model. Pure: no system call, no file; the caller reads
 * the file and passes its bytes.
 *
 * The parser checks syntax, types and ranges and records every field it
 * knows; it decides nothing about what airlock honours (src/oci maps the
 * model to the task policy and refuses what it cannot do). Unknown
 * properties are ignored, as the spec says runtimes must; properties the
 * spec defines but this model does not carry are listed by their JSON path
 * in present_unmodelled, so that nothing is dropped without the caller
 * knowing. Every string is owned by the model; arrays come with counts, or
 * are NULL-terminated where said. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

/* Bounds on hostile input: past them the config is refused with an error
 * naming the field. */
#define AL_OCI_MAX_CONFIG   (4u << 20) /* bytes of config.json */
#define AL_OCI_MAX_STRING   (1u << 20) /* bytes of one string */
#define AL_OCI_MAX_ITEMS    65536      /* entries of one array or object */
#define AL_OCI_MAX_MOUNTS   4096
#define AL_OCI_MAX_HOSTNAME 64 /* bytes, as sethostname(2) and setdomainname(2) take */

struct al_oci_idmap {
	uint32_t container_id, host_id, size; /* size > 0; neither range passes 2^32 */
};

struct al_oci_mount {
	char *destination;   /* a relative one (deprecated, allowed on Linux) is made absolute */
	char *type, *source; /* NULL when absent */
	char **options;	     /* NULL-terminated; NULL when absent */
	struct al_oci_idmap *uid_maps, *gid_maps; /* 1.1: an idmapped mount; both or neither */
	size_t n_uid_maps, n_gid_maps;
};

struct al_oci_rlimit {
	int resource;	     /* RLIMIT_* */
	const char *name;    /* "RLIMIT_NOFILE": static, not owned */
	uint64_t soft, hard; /* soft <= hard */
};

struct al_oci_ns {
	int type;   /* CLONE_NEWNS, CLONE_NEWNET, ... CLONE_NEWCGROUP, CLONE_NEWTIME */
	char *path; /* an absolute path to join; NULL: a new namespace */
};

enum al_oci_hook_kind {
	AL_OCI_HOOK_PRESTART,
	AL_OCI_HOOK_CREATE_RUNTIME,
	AL_OCI_HOOK_CREATE_CONTAINER,
	AL_OCI_HOOK_START_CONTAINER,
	AL_OCI_HOOK_POSTSTART,
	AL_OCI_HOOK_POSTSTOP,
	AL_OCI_HOOK_KINDS
};

struct al_oci_hook {
	char *path;	    /* absolute */
	char **args, **env; /* NULL-terminated; NULL when absent; env entries hold '=' */
	int timeout;	    /* seconds, > 0; -1 when absent */
};

struct al_oci_syscall_arg {
	unsigned index; /* 0 to 5 */
	uint64_t value, value_two;
	char *op; /* "SCMP_CMP_EQ", ... */
};

struct al_oci_syscall_rule {
	char **names; /* NULL-terminated, at least one */
	char *action; /* "SCMP_ACT_ERRNO", ... */
	uint32_t errno_ret;
	bool has_errno;
	struct al_oci_syscall_arg *args;
	size_t n_args;
};

/* linux.resources.devices: the device cgroup's rules, in order. */
struct al_oci_device_rule {
	bool allow;
	char *type;	      /* "a", "b" or "c"; "a" when absent */
	int64_t major, minor; /* -1: all */
	char *access;	      /* letters of "rwm"; "rwm" when absent */
};

/* linux.devices: a device node to create in the container. */
struct al_oci_device {
	char *path;	      /* absolute */
	char *type;	      /* "c", "b", "u" or "p" */
	int64_t major, minor; /* 0 for "p" when absent */
	bool has_mode, has_uid, has_gid;
	uint32_t mode, uid, gid;
};

struct al_oci_config {
	char *oci_version; /* "1.x..." */
	char *root_path;   /* as written: absolute, or relative to the bundle */
	bool root_readonly;
	char *hostname, *domainname; /* NULL when absent */
	struct al_oci_mount *mounts;
	size_t n_mounts;

	/* process: has_process false when absent (allowed by create, not by
	 * start). When present, args has at least one entry, cwd is absolute
	 * and the user's uid and gid were given. */
	bool has_process, terminal;
	bool has_console_size;
	unsigned console_rows, console_cols; /* consoleSize.height, .width */
	char **args, **env;		     /* NULL-terminated */
	char *cwd;
	char *command_line; /* Windows only: recorded for the caller to refuse */
	uint32_t uid, gid;
	uint32_t *additional_gids;
	size_t n_additional_gids;
	bool has_umask;
	uint32_t umask; /* 0 to 0777 */
	char *username; /* Windows only: recorded for the caller to refuse */
	bool has_capabilities;
	char **caps_bounding, **caps_effective, **caps_inheritable, **caps_permitted,
	    **caps_ambient; /* NULL-terminated; NULL when absent; names not checked (the spec
			       says unknown ones are warnings) */
	struct al_oci_rlimit *rlimits;
	size_t n_rlimits;
	bool no_new_privileges;
	char *apparmor_profile, *selinux_label;
	bool has_oom_score_adj;
	int oom_score_adj;	 /* -1000 to 1000 */
	char *io_priority_class; /* NULL when absent, else "IOPRIO_CLASS_RT", _BE or _IDLE */
	int io_priority;	 /* 0 to 7 */

	/* hooks, per kind in the order given */
	struct al_oci_hook *hooks[AL_OCI_HOOK_KINDS];
	size_t n_hooks[AL_OCI_HOOK_KINDS];

	/* annotations: NULL-terminated key, value pairs in the document's order */
	char **annotations;

	/* linux */
	bool has_linux;
	struct al_oci_ns *namespaces; /* no type twice */
	size_t n_namespaces;
	struct al_oci_idmap *uid_maps, *gid_maps;
	size_t n_uid_maps, n_gid_maps;
	char **sysctl; /* NULL-terminated key, value pairs */
	char *cgroups_path;

	/* linux.resources (each has_* when the field was given) */
	bool has_resources;
	bool has_memory_limit, has_memory_reservation, has_memory_swap, has_memory_kernel,
	    has_memory_kernel_tcp, has_memory_swappiness;
	int64_t memory_limit, memory_reservation, memory_swap, memory_kernel,
	    memory_kernel_tcp;	    /* -1: unlimited; nothing below */
	uint64_t memory_swappiness; /* 0 to 100 (2^64 - 1, Docker's "unset", leaves it unset) */
	bool memory_disable_oom_killer, has_memory_disable_oom_killer;
	bool memory_use_hierarchy, has_memory_use_hierarchy;
	bool memory_check_before_update, has_memory_check_before_update;
	bool has_cpu_shares, has_cpu_quota, has_cpu_period, has_cpu_realtime_runtime,
	    has_cpu_realtime_period, has_cpu_burst, has_cpu_idle;
	uint64_t cpu_shares, cpu_period, cpu_realtime_period, cpu_burst;
	int64_t cpu_quota;	      /* -1: unlimited; nothing below */
	int64_t cpu_realtime_runtime; /* -1: unlimited; nothing below */
	int64_t cpu_idle;	      /* 0 or 1 */
	char *cpu_cpus, *cpu_mems;    /* NULL when absent */
	bool has_pids_limit;
	int64_t pids_limit; /* as given: the spec reads 0 and -1 as no limit */
	bool has_block_io, has_hugepage_limits, has_network, has_rdma;
	bool has_unified;
	char **unified; /* NULL-terminated key, value pairs (cgroup v2 files) */
	struct al_oci_device_rule *device_rules;
	size_t n_device_rules;

	/* linux.devices */
	struct al_oci_device *devices;
	size_t n_devices;

	/* linux.seccomp */
	bool has_seccomp;
	char *seccomp_default_action;
	bool has_seccomp_default_errno;
	uint32_t seccomp_default_errno;
	char **seccomp_architectures, **seccomp_flags; /* NULL-terminated; NULL when absent */
	char *seccomp_listener_path, *seccomp_listener_metadata;
	struct al_oci_syscall_rule *seccomp_syscalls;
	size_t n_seccomp_syscalls;

	char **masked_paths, **readonly_paths; /* NULL-terminated, absolute */
	char *rootfs_propagation;	       /* "private", "rslave", ... */
	bool has_mount_label;
	char *mount_label;
	bool has_personality, has_intel_rdt, has_time_offsets;

	/* Fields the spec defines that this model does not carry (solaris,
	 * windows, vm, zos, freebsd, process.scheduler, linux.intelRdt,
	 * linux.resources.blockIO ...), by JSON path, NULL-terminated: for the
	 * caller's refusals. Their types are checked only as far as the
	 * has_* flags above need. */
	char **present_unmodelled;
};

/* Parse json (len bytes, need not be NUL-terminated) into a new model in
 * *ret, to free with al_oci_config_free(). Every problem found is added to
 * errs as one entry, with the JSON path as the spec writes it
 * ("process.rlimits[2].type: unknown rlimit \"RLIMIT_FOO\""); a text that
 * is not JSON, not an object or over AL_OCI_MAX_CONFIG is one error.
 * Returns 0; -EINVAL when errors were found (nothing stored in *ret);
 * -ENOMEM. */
int al_oci_config_parse(const char *json, size_t len, struct al_oci_config **ret,
			struct al_errors *errs);

/* Free c and everything it owns; NULL is fine. */
void al_oci_config_free(struct al_oci_config *c);
void al_oci_config_freep(struct al_oci_config **c);

/* True when path (e.g. "linux.intelRdt") is in c->present_unmodelled. */
bool al_oci_config_has_unmodelled(const struct al_oci_config *c, const char *path);
