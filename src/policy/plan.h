/* The plan: an immutable, fully resolved description of one run, built
 * from a policy, and the one input of every backend. It says what the sandbox is — the
 * command, its environment and identity, the file tree as host path →
 * sandbox path with what may be done there, the limits, the network rules —
 * and nothing about how a backend makes it: each backend lowers it to its
 * own terms (the native one in backend/native/lower.c). Nothing in it is set
 * after al_plan_finish() (which adds only what the run's credentials decide,
 * cred/store.h) and it owns no fds. */
#pragma once

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/error.h"
#include "net/allow.h"
#include "net/layout.h"
#include "policy/operator.h"
#include "policy/policy.h"

#define AL_SANDBOX_UID 1000
#define AL_SANDBOX_GID 1000
/* The host id that files the sandbox creates in a root-owned "rw"
 * directory belong to, in every run as root (the directory is idmapped
 * from it to the run's own ids, so a per-run id never reaches a disk). */
#define AL_HOST_DISK_ID 1000001000u
/* Per-run limits of the sandbox's user namespace (/proc/sys/user). */
#define AL_DEFAULT_INOTIFY_INSTANCES 64u
#define AL_DEFAULT_INOTIFY_WATCHES   16384u

#define AL_DEFAULT_TIMEOUT_MS	  (60u * 1000u)
#define AL_DEFAULT_SCRATCH_BYTES  (64ull << 20)
#define AL_DEFAULT_MEMORY_BYTES	  (512ull << 20)
#define AL_DEFAULT_PIDS		  128u
#define AL_DEFAULT_OUTPUT_BYTES	  (16ull << 20)
#define AL_DEFAULT_OPEN_FILES	  1024u
#define AL_DEFAULT_COPY_OUT_FILES 10000u
/* Socket buffers (and connections not yet accepted) the kernel may hold
 * for a run outside its memory limit: 2/AL_SOCKET_SHARE of the memory
 * limit, page-aligned, at least 2 * AL_SOCKET_MIN_BYTES (plan->socket_stop).
 * How a backend keeps it is its own (the native one on cgroup v1 sets the
 * kernel's limit at half of it, al_kmem_socket_limit()). */
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
/* The limits that make a cgroup required (plan->cgroup_asked). */
#define AL_CGROUP_ASKED_MEMORY	 (1u << 0)
#define AL_CGROUP_ASKED_PIDS	 (1u << 1)
#define AL_CGROUP_ASKED_CPUS	 (1u << 2)
#define AL_CGROUP_ASKED_CPU_TIME (1u << 3)
#define AL_CGROUP_ASKED_BUDGET	 (1u << 4)

/* Terminals the sandbox may hold at once with tty (the command's and what
 * it opens itself, tmux or script), and the size of the one it starts
 * with when airlock's stdin is not a terminal. */
#define AL_TTY_MAX_PTYS 16u
#define AL_TTY_ROWS	24u
#define AL_TTY_COLS	80u

/* The sandbox's file tree, as entries in the order it is built: every
 * entry's parent directory exists (or is an earlier entry) when it comes.
 * What each path is and what the sandbox may do there; how a backend makes
 * it (staging mounts, landlock rules: backend/native/lower.c) is its own. */
enum al_fs_kind {
	AL_FS_HOST,    /* a host file or directory (resolved, no links) at path */
	AL_FS_DEVICE,  /* a host character device at path */
	AL_FS_LINK,    /* a symbolic link at path to source */
	AL_FS_FILE,    /* a file airlock writes, content source[0..len) */
	AL_FS_DIR,     /* a directory airlock makes, read-only, holding only the entries
			* below it in the plan (/etc; /dev, with its devices and links) */
	AL_FS_PROC,    /* the sandbox's own /proc */
	AL_FS_PTYS,    /* the sandbox's own terminals (a devpts of its own: /dev/pts) */
	AL_FS_SCRATCH, /* a face of the run's one scratch (scratch_bytes in all): the
			* part named source ("tmp", "work", "shm"), each its own */
	/* A container's own root only (plan->root), last in the tree: */
	AL_FS_MASK,    /* path, where it exists, hidden under an empty read-only file or
		       * directory (linux.maskedPaths) */
	AL_FS_RDONLY,  /* path, where it exists, made read-only (linux.readonlyPaths) */
	AL_FS_SPECIAL, /* a new mount of the kernel file system named source ("sysfs",
			* "cgroup2", "mqueue"), the sandbox's own view */
};

/* What the sandbox may do at an entry (and, for directories, beneath it). */
#define AL_FS_READ  (1u << 0)
#define AL_FS_WRITE (1u << 1) /* create, change and remove */
#define AL_FS_EXEC  (1u << 2)

struct al_fs_entry {
	enum al_fs_kind kind;
	char *path;	    /* in the sandbox */
	char *source;	    /* see the kinds; NULL for DIR, PROC and PTYS */
	size_t len;	    /* FILE: content length */
	unsigned access;    /* AL_FS_* */
	bool dir;	    /* HOST: the source is a directory */
	mode_t mode;	    /* FILE, DIR, PROC, SCRATCH: the mode the sandbox sees */
	bool sandbox_owned; /* SCRATCH: owned by the sandbox user (the workdir) */
	dev_t dev;	    /* HOST, DEVICE: identity, checked again where it is mounted */
	ino_t ino;
	nlink_t nlink; /* HOST, DEVICE: its hard links when the plan was built */
	/* HOST, as root: a task's input. The privileged supervisor opens it
	 * (so no directory on the way needs to be searchable by others) and
	 * the sandbox user acts on it as its host owner (owner_uid/gid), so
	 * files it writes there belong to that owner. */
	bool as_owner;
	uid_t owner_uid;
	gid_t owner_gid;
	/* HOST, read-only: where the sandbox user could not read it (no
	 * idmapping on its filesystem), copy it into the scratch instead of
	 * refusing ("copy": true). */
	bool copy;
	/* HOST, as_owner, a container's bind: mounted as the config asks and
	 * left to the file's modes, not refused ahead where they would keep
	 * the container out (podman's rw /etc/hosts, root's 0644). */
	bool lenient;
	/* HOST in a plan with a container's root: shown with the root's ids
	 * (plan->root's maps: disk ids as the engine gave them), not as its
	 * owner. */
	bool root_ids;
	char *what; /* for messages and dumps: "system /usr", "ro /input/data.csv" */
};

/* A secret or token of the run. */
#define AL_PLACEHOLDER_MAX  48
#define AL_PLAN_SECRETS_MAX 16 /* secrets and tokens of one run */
struct al_plan_secret {
	struct al_secret_def *def;  /* owned copy */
	struct al_allowlist *scope; /* def->hosts */
	/* What the sandbox holds instead of the value: "airlock-ph-" and 32
	 * random hex digits. SigV4: the fake key id and secret the sandbox
	 * signs with (AKIA and 16 characters; 40 characters). */
	char placeholder[AL_PLACEHOLDER_MAX];
	char fake_key_id[24];
	char fake_secret[AL_PLACEHOLDER_MAX];
};

/* Where in the scratch a sandbox path is: the face's part ("work") and
 * the rest ("work/out/a.txt"), relative to the scratch's root. */
struct al_copy_in {
	char *host; /* resolved, no links */
	char *path; /* in the sandbox, inside a scratch face */
	char *part; /* the same, relative to the scratch's root */
	bool dir;
	dev_t dev; /* identity, checked again when it is copied */
	ino_t ino;
	nlink_t nlink; /* its hard links when the plan was built */
	char *origin;
};

struct al_copy_out {
	char *path;	/* in the sandbox, inside a scratch face (or one) */
	char *part;	/* relative to the scratch's root */
	char *hostdir;	/* absolute; made at the end when missing (its parent exists) */
	char *hostreal; /* the same with no link in it (resolved when the plan was built) */
	char *origin;
};

/* A network.hosts entry: name (lower-case) → address. */
struct al_host_map {
	char *name;
	struct in6_addr addr; /* IPv4 as IPv4-mapped */
};

/* A container's own root (policy.h struct al_policy_root): fs[0] is a
 * HOST entry at "/" for it. */
struct al_plan_root {
	bool readonly;
	/* disk ids → the sandbox's (inner the sandbox's, outer the disk's);
	 * never empty: the same ids 0 to 65535 when the engine gave none */
	struct al_id_range *uid_map, *gid_map;
	size_t n_uid_map, n_gid_map;
	uint32_t umask;	   /* each process's at exec */
	int oom_score_adj; /* 0 to 1000, the OCI supervisor's own (the sandbox inherits it) */
	/* linux.sysctl: NULL-terminated (key, value) pairs set in the sandbox's own network
	 * namespace before anything runs (al_plan_sysctl_allowed()). */
	char **sysctl;
	/* An engine's network namespace (its path) the sandbox joins instead
	 * of a namespace of its own, and the config field that named it (for
	 * messages); NULL: its own. The native backend installs airlock's
	 * rules in it (backend/native/netns.h, docs/oci.md exception 3). */
	char *netns, *netns_field;
	/* The container's own seccomp program (BPF instructions, seccomp_len
	 * of them), installed in each of its processes right before it execs,
	 * on top of airlock's; NULL: none. */
	void *seccomp;
	size_t seccomp_len;
	/* linux.cgroupsPath, absolute (al_cgroup_path_check), or NULL: the
	 * run's cgroup made there in each hierarchy (cgroup.h) */
	char *cgroup_path;
	/* The root is a guest's (microvm, vm): this plan is the native
	 * sandbox that holds the VMM, with the host's usual tree; of the
	 * above only netns, sysctl, oom_score_adj and cgroup_path apply to
	 * it (al_plan_rooted() is false). */
	bool in_guest;
};

struct al_plan {
	char **argv;
	char **envp;
	char **env_hidden; /* names in envp whose values dumps do not show */
	char *hostname;
	char *workdir;
	char *backend;
	char *language; /* NULL, or "python" (wasm: the arguments run under Pyodide) */
	bool scratch_exec;
	/* The command's stdio is a terminal of the sandbox's own (a pty from
	 * its own /dev/pts), its controlling terminal; the supervisor relays
	 * the other side. Never a host terminal. */
	bool tty;

	/* limits; 0 means none */
	uint64_t timeout_ms;
	uint64_t scratch_bytes;
	uint64_t memory_bytes;
	uint64_t pids;
	uint64_t cpus_milli;
	uint64_t cpu_time_ms;
	uint64_t output_bytes;
	uint64_t open_files;	  /* RLIMIT_NOFILE: hard, and soft unless: */
	uint64_t open_files_soft; /* its soft value, below open_files; 0: open_files */
	uint64_t file_size;
	/* Kernel memory outside the memory limit (docs/security.md): the
	 * sandbox's socket buffers and the connections waiting to be accepted
	 * are bounded at socket_stop bytes; past it the run ends (reason
	 * memory). A backend that cannot bound them refuses the plan unless
	 * kernel_memory_best_effort (limits.kernel_memory "best-effort"). */
	uint64_t socket_stop;
	bool kernel_memory_best_effort; /* run even where they cannot be bounded */
	uint64_t msgqueue_bytes;	/* RLIMIT_MSGQUEUE */
	uint64_t sigpending;		/* RLIMIT_SIGPENDING */
	uint64_t memlock_bytes;		/* RLIMIT_MEMLOCK */
	/* A cgroup limit was asked for explicitly (flag or policy): the run
	 * refuses when no cgroup can be had. When only defaults apply, a run
	 * without a usable cgroup goes ahead with a warning instead. */
	bool cgroup_required;
	unsigned cgroup_asked; /* which: AL_CGROUP_ASKED_*, for the refusal */

	/* A container's own root (the OCI front end), or NULL: airlock's own
	 * tree. With one, the sandbox's user namespace maps the whole slot
	 * (sandbox ids 0 to 65535) and the command runs as uid:gid with
	 * groups; without, it runs as AL_SANDBOX_UID:GID. */
	struct al_plan_root *root;
	uid_t uid;
	gid_t gid;
	gid_t *groups;
	size_t n_groups;

	/* identities: who the sandbox's ids are on the host (al_plan_host_ids) */
	bool rootless;	  /* airlock itself is not root: map only our own ids */
	bool ids_per_run; /* as root: a slot of the pool (ids/slots.h), taken at the start */
	uid_t host_base;  /* as root with a fixed range (identity.host_ids): sandbox id 0 */
	uid_t host_uid;	  /* rootless: the caller; fixed: host_base + 1000; per run: 0 */
	gid_t host_gid;
	/* the sandbox user namespace's own limits (/proc/sys/user) */
	uint64_t inotify_instances;
	uint64_t inotify_watches;

	/* network: the egress gateway (src/gateway), when enabled */
	bool gateway;
	struct al_allowlist *allow; /* owned */
	char **allow_text;	    /* the rules as written, for dumps */
	struct al_host_map *hosts;  /* network.hosts */
	size_t n_hosts;
	char *resolver;		      /* "IP[:PORT]" or NULL: the host's resolv.conf */
	struct al_net_limits net_run; /* 0 = no limit */
	struct al_net_limits net_host;
	/* The operator policy's "never" rules for this run's profile: the
	 * gateway refuses a name they match and every resolved or mapped
	 * address they match, whatever the allow rules say. NULL: none. */
	struct al_allowlist *never; /* owned */
	char **never_text;

	/* Credentials (plan-cred.c, docs/credentials.md): the secrets and
	 * tokens the gateway presents for the sandbox, each with the
	 * placeholder the sandbox holds instead; the options of allow rules
	 * written as objects (interception, request rules); the budget. No
	 * value is here: cred/source.c reads them when the run starts. */
	struct al_plan_secret *secrets;
	size_t n_secrets;
	struct al_rule_opts **rule_opts;
	size_t n_rule_opts;
	bool intercept; /* some rule says "tls": "intercept" */
	struct al_budget budget;

	/* The operator policy this run is held to (engine.h): its profile,
	 * file and sha256, all NULL when there is none. decider: asked per egress request when
	 * its egress_path is set (owned copy). */
	char *profile;
	char *operator_file;
	char *operator_sha256;
	struct al_decider_conf *decider;

	/* filesystem */
	struct al_fs_entry *fs;
	size_t n_fs;
	/* Copied into the scratch before the command starts (in order), and
	 * out of it after the run, whatever ended it, within the caps. */
	struct al_copy_in *copy_in;
	size_t n_copy_in;
	struct al_copy_out *copy_out;
	size_t n_copy_out;
	uint64_t copy_out_bytes;
	uint64_t copy_out_files;
	/* --copy-out-replace: a regular file of the caller's on the host is
	 * replaced, a directory of theirs merged into; otherwise both are
	 * skipped and the run exits AL_COPY_OUT_EXISTS_EXIT. */
	bool copy_out_replace;
	/* A layer's own (never from a policy): the backend reads the scratch
	 * after the run (microvm's VMM report), so it is handed over as for
	 * --copy-out. */
	bool scratch_read_after;
	/* The second, in-kernel layer of file access control (landlock on
	 * native) is required; false only when the policy asked for
	 * best-effort. */
	bool landlock_required;
	/* al_plan_finish() was called: nothing changes it any more. */
	bool final;
};

/* The host system directories shown when the policy names none. */
extern const char *const al_plan_default_system[];

/* al_plan_build() flags */
#define AL_PLAN_COMMAND_OPTIONAL (1u << 0) /* for `airlock check`: argv may be empty */
/* On errors, still return what could be built in *ret (never to be run:
 * for the operator policy's checks of the paths that did resolve). */
#define AL_PLAN_PARTIAL (1u << 1)

/* Who the sandbox's ids are on the host in one run. */
struct al_host_ids {
	bool rootless;	/* only sandbox 1000 is mapped, to the caller */
	uid_t root_uid; /* sandbox uid/gid 0 (not mapped rootless) */
	gid_t root_gid;
	uid_t uid; /* sandbox uid/gid 1000: the command's */
	gid_t gid;
	uid_t owner; /* who creates the sandbox's user namespace */
	int slot;    /* the pool's slot (ids/slots.h); -1: fixed or rootless */
};

/* The ids of a run of p: slot is the one the run holds when
 * p->ids_per_run (ignored otherwise). */
void al_plan_host_ids(const struct al_plan *p, int slot, struct al_host_ids *ids);

/* The sandbox user namespace's own limits, as /proc/sys/user names them:
 * set inside before the command starts, checked from outside. */
#define AL_NS_LIMITS_MAX 4
struct al_ns_limit {
	const char *name; /* under /proc/sys/user */
	uint64_t value;
	bool optional; /* kernels before 5.13 lack it (fanotify) */
};

/* p's limits into out[AL_NS_LIMITS_MAX]; returns how many. */
size_t al_plan_ns_limits(const struct al_plan *p, struct al_ns_limit *out);

/* Build a plan from a merged policy: apply defaults, resolve and check host
 * paths, synthesize /etc and order the file tree. Errors name the offending
 * policy item.
 * Returns 0 or a negative errno; *ret only on success. */
int al_plan_build(const struct al_policy *policy, unsigned flags, struct al_plan **ret,
		  struct al_error *err);

/* The same, adding every error it finds to errs (al_plan_build() reports
 * the first): each mount, system directory, allow rule and host mapping is
 * checked alone, and the request's own checks (command, backend, hostname,
 * workdir, limits) each once. Returns 0, or the negative errno of the first
 * error it added. */
int al_plan_build_all(const struct al_policy *policy, unsigned flags, struct al_plan **ret,
		      struct al_errors *errs);

/* What a run's credentials add to its plan once their values are read
 * (cred/store.c decides it, the request layer applies it with
 * al_plan_finish() before anything runs): variables and the files of the
 * run's CA. Values may be secret (an exposed token): al_plan_extra_clear()
 * wipes them. */
struct al_plan_extra_file {
	char *path; /* in the sandbox; its directory is made when the plan has none */
	char *content;
	mode_t mode;
};
struct al_plan_extra {
	char **env_replace; /* NAME=VALUE in place of NAME's entries (an exposed token) */
	char **env_add;	    /* NAME=VALUE appended (AWS_SESSION_TOKEN's placeholder) */
	char **env_default; /* NAME=VALUE appended unless NAME is set (the CA's variables) */
	struct al_plan_extra_file *files;
	size_t n_files;
};
void al_plan_extra_clear(struct al_plan_extra *x);

/* The plan made final: x (may be NULL) applied, read-only files
 * after the rest of the tree. Once final, nothing changes the plan: a
 * second call fails with -EALREADY. 0 or -errno with err set. */
int al_plan_finish(struct al_plan *p, const struct al_plan_extra *x, struct al_error *err);

/* The host's usual tree for a sandbox of p's own (p->workdir and
 * p->hostname set, p->fs empty): /tmp and the workdir on the scratch, the
 * default system directories, /etc, /proc and /dev. The microvm and vm
 * backends' VMM gets it where the plan's own tree is a container's root,
 * which the guest shows. 0 or the first error's -errno, each in errs. */
int al_plan_build_host_tree(struct al_plan *p, struct al_errors *errs);

/* The plan has a container's own root that the native layer builds (not
 * one a guest shows: al_plan_root.in_guest). */
static inline bool al_plan_rooted(const struct al_plan *p)
{
	return p->root && !p->root->in_guest;
}

void al_plan_free(struct al_plan *plan);
static inline void al_plan_freep(struct al_plan **p)
{
	al_plan_free(*p);
}

/* The sysctls a container may set: net keys of its own network
 * namespace only. */
bool al_plan_sysctl_allowed(const char *key);

/* Human-readable dump of the plan to f (used by `airlock check`, which
 * adds the backend's description of how it makes it). */
void al_plan_dump_text(const struct al_plan *plan, FILE *f);

/* JSON dump; returns a new string (free()). */
char *al_plan_dump_json(const struct al_plan *plan);
