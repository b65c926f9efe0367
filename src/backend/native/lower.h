/* The native backend's terms for a plan: the plan says what the sandbox is,
 * this says how the child makes it with mounts, id maps, landlock and
 * seccomp. Built once per run in the parent (al_native_lower), read by the
 * child after clone without allocating, and by the checks from outside.
 *
 * Staging view used by the mount ops (inside the child's private mount
 * namespace, after the first pivot_root onto a throw-away tmpfs):
 *   /oldroot   the host's root, detached before exec
 *   /newroot   the sandbox's root (a small tmpfs, read-only at the end)
 *   /scratch   the one size-limited scratch tmpfs; /tmp, the workdir and
 *              /dev/shm are bind mounts of its subdirectories, so a single
 *              size limit covers all writable space. */
#pragma once

#include <jansson.h>
#include <linux/filter.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "core/error.h"
#include "policy/plan.h"
#include "policy/seccomp.h"

struct al_backend_facts;

enum al_op_kind {
	AL_OP_MKDIR,   /* mkdir target (mode, uid) */
	AL_OP_FILE,    /* create target with content source[0..len) (mode, uid) */
	AL_OP_SYMLINK, /* symlink target -> source */
	AL_OP_TMPFS,   /* mount tmpfs on target, options in source, then attr */
	AL_OP_BIND,    /* bind source on target (a placeholder is made first), then attr */
	AL_OP_PROC,    /* mount a fresh proc on target, then attr */
	AL_OP_DEVPTS,  /* mount a new devpts instance on target, options in source, then attr */
	/* A container's own root only (rooted.c): */
	AL_OP_MASK,    /* where target exists: an empty read-only file or directory over it */
	AL_OP_RDONLY,  /* where target exists: made read-only */
	AL_OP_SPECIAL, /* a new mount of the file system named source, then attr */
};

/* The ops that mount something (and have mount flags). */
static inline bool al_op_mounts(enum al_op_kind k)
{
	return k == AL_OP_BIND || k == AL_OP_TMPFS || k == AL_OP_PROC || k == AL_OP_DEVPTS ||
	       k == AL_OP_MASK || k == AL_OP_RDONLY || k == AL_OP_SPECIAL;
}

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
	/* BIND of a task's input as root (the plan's as_owner): the supervisor
	 * opens it before clone, shown to the sandbox user as its owner
	 * (inputs.c), and the child attaches the tree it inherits as
	 * al_child_fds.inputs[input]. -1: the child opens source itself. */
	int input;
	uid_t owner_uid;
	gid_t owner_gid;
	bool copy; /* may become a copy in the scratch ("copy": true) */
	/* BIND of a host path in a plan with a container's root (the plan's
	 * root_ids): opened by the supervisor like an input, shown with the
	 * root's ids (inputs.c). */
	bool root_ids;
	bool lenient; /* a container's bind: mounted as asked, its modes decide (plan.h) */
	bool copied;  /* it did: source is the scratch's empty part to bind */
	char *what;   /* for messages and dumps: "system /usr", "input /input/data.csv" */
};

struct al_landlock_rule {
	char *path;	 /* path in the final view */
	uint64_t access; /* LANDLOCK_ACCESS_FS_* already masked to the ABI */
};

struct al_native_plan {
	/* Who the sandbox's ids are on the host, and the id maps written for
	 * the child's user namespace: set by al_native_set_ids() once the
	 * run holds its ids (empty maps before, as for check). */
	struct al_host_ids ids;
	/* A container's own root (plan->root): ops[0] binds it at /newroot,
	 * every later target below /newroot is reached inside it (rooted.c),
	 * and the user namespace maps the whole slot. */
	bool rooted;
	size_t root_op; /* rooted: the op that binds the root (sealed: read-only) */
	char uid_map[96];
	char gid_map[96];
	/* The sandbox joins an engine's network namespace (plan->root->netns),
	 * which the supervisor set up: the child leaves lo, the gateway's
	 * listeners, the routes and the sysctls alone; verify checks it is in
	 * that namespace (its identity). */
	bool netns_joined;
	dev_t netns_dev;
	ino_t netns_ino;
	/* Joined: the sysfs the supervisor mounted in that namespace for the
	 * AL_OP_SPECIAL "sysfs" op (its own fd, inherited by the child), or
	 * -1. */
	int netns_sysfs;

	/* filesystem, in the order the child runs it */
	struct al_mount_op *ops;
	size_t n_ops;
	size_t n_inputs; /* ops with input >= 0 */
	/* Inputs the supervisor copies into the scratch instead ("copy":
	 * true, set by al_native_open_inputs): each is bound read-only from
	 * part, which the child makes empty (a file or a directory). */
	struct al_native_copy {
		char *host;
		dev_t dev;
		ino_t ino;
		uid_t owner_uid; /* read as them */
		gid_t owner_gid;
		char *part; /* "ro/N", relative to the scratch's root */
	} * copies;
	size_t n_copies;
	/* The child hands the supervisor an fd of the scratch's root
	 * (AL_SYNC_SCRATCH), for the copies, --copy-in and --copy-out. */
	bool want_scratch;

	/* landlock */
	int landlock_abi;	  /* 0 when the kernel has none (the plan allowed best-effort) */
	uint64_t landlock_fs;	  /* handled_access_fs */
	uint64_t landlock_scoped; /* LANDLOCK_SCOPE_* */
	struct al_landlock_rule *ll_rules;
	size_t n_ll_rules;
	/* handled_access_net (ABI 4+) and the TCP ports allowed for all of
	 * it: the process backend's (native has a network namespace). */
	uint64_t landlock_net;
	uint16_t ll_ports[4];
	size_t n_ll_ports;

	/* seccomp (the filter is static storage, not owned) */
	struct sock_fprog seccomp;
	const struct al_seccomp_rule_info *seccomp_rules;
	size_t n_seccomp_rules;
	struct al_seccomp_summary seccomp_summary;
};

/* Can this machine enforce the plan? Refuses, with err, when it needs
 * landlock and the kernel has none. */
int al_native_check(const struct al_plan *plan, struct al_error *err);

/* Lower plan for this machine: the staging ops, the id maps (unless the
 * plan's ids are per run), the landlock rules at the kernel's ABI and the
 * seccomp program (compiled at build time). Refuses, with err, when the
 * plan needs landlock and the kernel has none. Returns 0 or a negative
 * errno; *ret only on success. */
int al_native_lower(const struct al_plan *plan, struct al_native_plan **ret, struct al_error *err);
/* The same for a session (session true): also the sandbox's own devpts and
 * /dev/ptmx whether or not the plan has a terminal, for its execs' ptys. */
int al_native_lower_session(const struct al_plan *plan, bool session, struct al_native_plan **ret,
			    struct al_error *err);

/* The run's host ids, and the id maps from them. */
void al_native_set_ids(struct al_native_plan *np, const struct al_host_ids *ids);

void al_native_plan_free(struct al_native_plan *np);
static inline void al_native_plan_freep(struct al_native_plan **np)
{
	al_native_plan_free(*np);
}

/* `airlock check`: how the native backend makes the plan (the mount ops in
 * setup order, landlock, the seccomp table), as text to f or as members
 * "filesystem", "landlock" and "seccomp" of o. */
void al_native_dump_text(const struct al_native_plan *np, FILE *f);

/* `airlock backends` (describe.c). */
extern const struct al_backend_facts al_native_facts;
int al_native_usable(char *why, size_t len);
void al_native_dump_json(const struct al_native_plan *np, const struct al_plan *plan, json_t *o);
