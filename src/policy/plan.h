/* The plan: an immutable, fully resolved description of one run, lowered
 * from a policy (DESIGN.md "The shape"). The child after clone reads it and
 * never parses or allocates; every string it needs is built here.
 *
 * Staging view used by the mount ops (inside the child's private mount
 * namespace, after the first pivot_root onto a throw-away tmpfs):
 *   /oldroot   the host's root, detached before exec
 *   /newroot   the sandbox's root (a small tmpfs, read-only at the end)
 *   /scratch   the one size-limited scratch tmpfs; /tmp, the workdir and
 *              /dev/shm are bind mounts of its subdirectories, so a single
 *              size limit covers all writable space. */
#pragma once

#include <linux/filter.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/error.h"
#include "net/allow.h"
#include "net/layout.h"
#include "policy/policy.h"

#define AL_SANDBOX_UID 1000
#define AL_SANDBOX_GID 1000
/* As root on the host, sandbox ids 0 and 1000 map to these host ids: never
 * host root, and far above any ordinary account or subuid range. */
#define AL_HOST_ID_BASE 1000000000u

#define AL_DEFAULT_TIMEOUT_MS	 (60u * 1000u)
#define AL_DEFAULT_SCRATCH_BYTES (64ull << 20)
#define AL_DEFAULT_MEMORY_BYTES	 (512ull << 20)
#define AL_DEFAULT_PIDS		 128u
#define AL_DEFAULT_OUTPUT_BYTES	 (16ull << 20)
#define AL_DEFAULT_OPEN_FILES	 1024u
/* Socket buffers a run may hold outside what memory.limit_in_bytes counts
 * (cgroup v1): 1/AL_SOCKET_SHARE of the memory limit, at least
 * AL_SOCKET_MIN_BYTES. The kernel may force one buffer per socket past that
 * limit, so the supervisor stops the run at twice it. */
#define AL_SOCKET_SHARE	    16u
#define AL_SOCKET_MIN_BYTES (1ull << 20)
/* Listening TCP sockets a run may have: the supervisor reads them every
 * tick to bound the connections waiting in their queues. */
#define AL_MAX_LISTENERS 4096u
/* Other kernel objects a process can pin, bounded by rlimits. */
#define AL_MSGQUEUE_BYTES   (256ull << 10) /* POSIX message queues, per user */
#define AL_SIGPENDING	    4096u	   /* queued signals, per user */
#define AL_MEMLOCK_BYTES    (8ull << 20)   /* locked memory, at most memory/8 */
#define AL_CPU_PERIOD_US    100000u
#define AL_DEFAULT_WORKDIR  "/work"
#define AL_DEFAULT_HOSTNAME "airlock"
#define AL_DEFAULT_PATH	    "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"

enum al_op_kind {
	AL_OP_MKDIR,   /* mkdir target (mode, uid) */
	AL_OP_FILE,    /* create target with content source[0..len) (mode, uid) */
	AL_OP_SYMLINK, /* symlink target -> source */
	AL_OP_TMPFS,   /* mount tmpfs on target, options in source, then attr */
	AL_OP_BIND,    /* bind source on target (a placeholder is made first), then attr */
	AL_OP_PROC,    /* mount a fresh proc on target, then attr */
};

struct al_mount_op {
	enum al_op_kind kind;
	char *target;  /* full path in the staging view, e.g. "/newroot/usr" */
	char *source;  /* see enum above */
	size_t len;    /* FILE: content length */
	bool dir;      /* BIND: the source is a directory */
	uint64_t attr; /* MOUNT_ATTR_* applied recursively after the mount */
	bool seal;     /* TMPFS: mounted writable, made read-only once the tree is built */
	mode_t mode;
	bool sandbox_owned; /* MKDIR/FILE: chown to the sandbox user */
	dev_t dev;	    /* BIND of a host path: identity re-checked in the child */
	ino_t ino;
	char *what; /* for messages and dumps: "system /usr", "input /input/data.csv" */
};

struct al_landlock_rule {
	char *path;	 /* path in the final view */
	uint64_t access; /* LANDLOCK_ACCESS_FS_* already masked to the ABI */
};

/* A network.hosts entry: name (lower-case) → address. */
struct al_host_map {
	char *name;
	struct in6_addr addr; /* IPv4 as IPv4-mapped */
};

/* The seccomp policy is a default-deny allowlist (policy/seccomp.c). Each
 * system call the table names has rows of exactly one kind: */
enum al_seccomp_action {
	/* Allowed when every condition of the row holds (or always, with
	 * none). Arguments no allow row of the call matches are refused with
	 * the row's errno (EPERM) by the supervisor, and audited. */
	AL_SECCOMP_ALLOW,
	/* Refused in the kernel with the row's errno, silently: for frequent,
	 * harmless probes (clone3). */
	AL_SECCOMP_ERRNO,
	/* Refused with the row's errno by the supervisor, and audited. Needs
	 * no BPF (it is what the filter does with every call no row allows)
	 * but names the call, so it answers EPERM rather than ENOSYS. */
	AL_SECCOMP_DENY,
};

#define AL_SECCOMP_MAX_CONDS 3

/* (args[arg] & mask) == value. Every filtered parameter is a C int, or one
 * the kernel reads as its low 32 bits, so masks stay within 32 bits: high
 * bits can neither dodge a row nor be needed to match one. */
struct al_seccomp_cond {
	unsigned arg;
	uint64_t mask, value;
};

/* One row of the seccomp table. The compiled program allows a call when an
 * allow row matches, answers ERRNO rows in the kernel, and hands every
 * other call to the supervisor (SECCOMP_RET_USER_NOTIF), which answers
 * al_seccomp_answer(): the row's errno if the table names the call, else
 * ENOSYS. Unit tests evaluate the program against these rows. */
struct al_seccomp_rule_info {
	const char *syscall;
	enum al_seccomp_action action;
	unsigned n_conds; /* AL_SECCOMP_ALLOW only; 0 = always */
	struct al_seccomp_cond conds[AL_SECCOMP_MAX_CONDS];
	int errno_value; /* the answer when the call is refused */
	/* The condition (allow rows) or the reason (the others), for dumps;
	 * NULL for a plain allow. */
	const char *why;
};

/* Counts over the seccomp table, for dumps and `airlock verify`. */
struct al_seccomp_summary {
	size_t allowed;	 /* calls with allow rows */
	size_t filtered; /* of those, calls allowed only for some arguments */
	size_t denied;	 /* calls with a deny row */
	size_t silent;	 /* calls with an errno row */
};

struct al_plan {
	char **argv;
	char **envp;
	char *hostname;
	char *workdir;
	char *backend;
	bool scratch_exec;

	/* limits; 0 means none */
	uint64_t timeout_ms;
	uint64_t scratch_bytes;
	uint64_t memory_bytes;
	uint64_t pids;
	uint64_t cpus_milli;
	uint64_t cpu_time_ms;
	uint64_t output_bytes;
	uint64_t open_files;
	uint64_t file_size;
	/* Kernel memory the memory cgroup does not count (docs/security.md):
	 * socket_bytes is the v1 kernel limit on socket buffers, socket_stop
	 * the total at which the supervisor stops the run. */
	uint64_t socket_bytes;
	uint64_t socket_stop;
	bool kernel_memory_best_effort; /* run even where they cannot be bounded */
	uint64_t msgqueue_bytes;	/* RLIMIT_MSGQUEUE */
	uint64_t sigpending;		/* RLIMIT_SIGPENDING */
	uint64_t memlock_bytes;		/* RLIMIT_MEMLOCK */
	/* A cgroup limit was asked for explicitly (flag or policy): the run
	 * refuses when no cgroup can be had. When only defaults apply, a run
	 * without a usable cgroup goes ahead with a warning instead. */
	bool cgroup_required;

	/* identities */
	bool rootless;	/* airlock itself is not root: map only our own ids */
	uid_t host_uid; /* what sandbox uid 1000 is on the host */
	gid_t host_gid;
	char uid_map[96];
	char gid_map[96];

	/* network: the egress gateway (src/gateway), when enabled */
	bool gateway;
	struct al_allowlist *allow; /* owned */
	char **allow_text;	    /* the rules as written, for dumps */
	struct al_host_map *hosts;  /* network.hosts */
	size_t n_hosts;
	char *resolver;		      /* "IP[:PORT]" or NULL: the host's resolv.conf */
	struct al_net_limits net_run; /* 0 = no limit */
	struct al_net_limits net_host;

	/* filesystem */
	struct al_mount_op *ops;
	size_t n_ops;

	/* landlock */
	int landlock_abi; /* 0 when the kernel has none */
	bool landlock_required;
	uint64_t landlock_fs;	  /* handled_access_fs */
	uint64_t landlock_scoped; /* LANDLOCK_SCOPE_* */
	struct al_landlock_rule *ll_rules;
	size_t n_ll_rules;

	/* seccomp (the filter is static storage, not owned) */
	struct sock_fprog seccomp;
	const struct al_seccomp_rule_info *seccomp_rules;
	size_t n_seccomp_rules;
	struct al_seccomp_summary seccomp_summary;
};

/* al_plan_build() flags */
#define AL_PLAN_COMMAND_OPTIONAL (1u << 0) /* for `airlock check`: argv may be empty */

/* Lower a merged policy into a plan: apply defaults, resolve and check host
 * paths, synthesize /etc, order the mount ops, compute landlock rules and
 * compile the seccomp program. Errors name the offending policy item.
 * Returns 0 or a negative errno; *ret only on success. */
int al_plan_build(const struct al_policy *policy, unsigned flags, struct al_plan **ret,
		  struct al_error *err);

void al_plan_free(struct al_plan *plan);
static inline void al_plan_freep(struct al_plan **p)
{
	al_plan_free(*p);
}

/* Human-readable dump of the plan to f (used by `airlock check`). */
void al_plan_dump_text(const struct al_plan *plan, FILE *f);

/* JSON dump; returns a new string (free()). */
char *al_plan_dump_json(const struct al_plan *plan);
