/* The policy model: the one struct that every front end fills (CLI flags,
 * the policy file, later the API). Unlike most modules its fields are public:
 * the CLI option table and the JSON parser both write them directly, and a
 * second set of accessors would only mirror the fields one for one.
 *
 * "Unset" is NULL for pointers, 0 for sizes and durations, AL_UNSET (-1) for
 * tri-state ints; al_policy_merge() lets a set value override, and
 * al_plan_build() (plan.h) applies the defaults. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "policy/cred.h"

#define AL_POLICY_VERSION 1
#define AL_UNSET	  (-1)

enum al_mount_mode {
	AL_MOUNT_RO = 0,
	AL_MOUNT_RW = 1,
};

struct al_policy_mount {
	char *host; /* host path as given (made absolute against the cwd) */
	char *path; /* path inside the sandbox; clean absolute */
	enum al_mount_mode mode;
	int exec;  /* tri-state: AL_UNSET means "exec allowed" */
	bool copy; /* ro: copy into the scratch where it cannot be shown as is */
	bool own; /* airlock's own (verify's probe), not the task's: no operator prefix bounds it */
	char *origin; /* where it came from, for messages: "--ro" or "filesystem.mounts[1]" */
};

/* A copy into the scratch before the command (host → path) or out of it
 * after the run (path → host, a directory). */
struct al_policy_copy {
	char *host;   /* host path as given (made absolute against the cwd) */
	char *path;   /* path inside the sandbox; clean absolute */
	char *origin; /* for messages: "--copy-in a:/work/a" or "filesystem.copy_in[0]" */
};

enum al_landlock_mode {
	AL_LANDLOCK_UNSET = 0,
	AL_LANDLOCK_REQUIRED,	 /* refuse to run without landlock (default) */
	AL_LANDLOCK_BEST_EFFORT, /* the policy said "best-effort" in words */
};

enum al_kmem_mode {
	AL_KMEM_UNSET = 0,
	AL_KMEM_ENFORCED,    /* refuse to run where socket buffers escape the limit (default) */
	AL_KMEM_BEST_EFFORT, /* the policy said "best-effort" in words */
};

/* An id range: [inner, inner + count) is [outer, outer + count). */
struct al_id_range {
	uint32_t inner, outer, count;
};

/* A container's own root (the OCI front end's, src/oci/: no policy file
 * or flag sets it). The sandbox's "/" is the bundle's root filesystem
 * instead of airlock's own tree of host system directories and a made
 * /etc; its files, and the host binds the container asks for, are shown
 * with the ids the engine gave them, and the sandbox's user namespace
 * holds a whole slot of ids (0 to 65535) so that they all exist inside. */
struct al_policy_root {
	char *host;    /* the root filesystem, absolute */
	bool readonly; /* root.readonly */
	/* How an id on its disk becomes the sandbox's: inner the sandbox's,
	 * outer the disk's (the engine's uidMappings, container → host).
	 * None: the same ids, 0 to 65535. */
	struct al_id_range *uid_map, *gid_map;
	size_t n_uid_map, n_gid_map;
	/* The command's identity in the sandbox, its umask, its OOM score
	 * adjustment (0 to 1000: never made less likely to be killed). */
	uint32_t uid, gid;
	uint32_t umask;
	int oom_score_adj;
	uint32_t *groups;
	size_t n_groups;
	/* Sandbox paths that are each a face of the scratch (its tmpfs
	 * mounts), in any order. */
	char **tmpfs;
	/* linux.sysctl: NULL-terminated (key, value) pairs, of the few net
	 * keys a sandbox's own network namespace may set (plan-root.c). */
	char **sysctl;
	/* An engine's network namespace to join (linux.namespaces[i].path,
	 * named by netns_field in messages), or NULL: airlock's own. */
	char *netns, *netns_field;
	/* The container's own seccomp program (linux.seccomp, compiled: BPF
	 * instructions, owned), stacked on airlock's in each of its
	 * processes; NULL: none. */
	void *seccomp;
	size_t seccomp_len;
	/* Kernel file systems of the sandbox's own, NULL-terminated (path,
	 * type) pairs: "sysfs" and "cgroup2" read-only, "mqueue" writable. */
	char **special;
	/* linux.maskedPaths (an empty read-only file or directory over each
	 * that exists) and linux.readonlyPaths (made read-only where they
	 * exist). */
	char **masked, **readonly_paths;
	/* linux.cgroupsPath in its absolute form (al_cgroup_path_check), or
	 * NULL: where the run's cgroup is made instead of airlock's own place */
	char *cgroup_path;
};

struct al_policy {
	char *source;  /* file it came from, or "command line" */
	char *profile; /* the operator policy's profile asked for ("profile", --profile) */

	char **command; /* argv; NULL when not given */
	char *hostname;
	int tty; /* tri-state: a terminal of the sandbox's own (-t, "tty") */

	/* filesystem */
	char **system; /* host system dirs to show read-only; NULL = default */
	struct al_policy_mount *mounts;
	size_t n_mounts;
	char *workdir;
	int scratch_exec; /* tri-state */
	enum al_landlock_mode landlock;
	struct al_policy_copy *copy_in, *copy_out; /* flags add to the file's */
	size_t n_copy_in, n_copy_out;

	/* env: "NAME=VALUE" strings; later entries win */
	char **env;
	/* Names whose values came from airlock's environment (--env NAME) or
	 * an --env-file: dumps show them hidden. */
	char **env_hidden;
	/* Names whose values came from airlock's own environment (--env
	 * NAME): an operator policy bounds them apart (engine.h). */
	char **env_passed;

	/* limits (0 = not set here; al_plan_build applies the defaults) */
	uint64_t timeout_ms;
	uint64_t scratch_bytes;
	uint64_t memory_bytes;
	uint64_t pids;
	uint64_t cpus_milli;   /* CPU share in thousandths of a CPU */
	uint64_t cpu_time_ms;  /* CPU seconds across all processes */
	uint64_t output_bytes; /* stdout + stderr */
	uint64_t open_files;
	uint64_t open_files_soft; /* RLIMIT_NOFILE's soft value below it (a container's
				     process.rlimits), or 0: the same */
	uint64_t file_size;
	uint64_t copy_out_bytes; /* caps of what copy-out brings back */
	uint64_t copy_out_files;
	bool copy_out_replace;	    /* --copy-out-replace: over the caller's own files */
	uint64_t inotify_instances; /* the sandbox user namespace's limits */
	uint64_t inotify_watches;
	enum al_kmem_mode kernel_memory;

	/* identity.host_ids: as root, a slot of the pool per run (the
	 * default), or a fixed range whose first id is host_ids_base */
	enum al_host_ids_mode {
		AL_HOST_IDS_UNSET,
		AL_HOST_IDS_PER_RUN,
		AL_HOST_IDS_FIXED
	} host_ids;
	uint32_t host_ids_base;

	/* network: "none" (loopback only) or "gateway"; allow non-empty implies
	 * the gateway */
	char *network_mode;
	char **net_allow;   /* allowlist rules as written ("*.example.com:443") */
	char **net_hosts;   /* "name=address" pairs for the gateway's resolver */
	char *net_resolver; /* "IP[:PORT]" the gateway asks; NULL = the host's resolv.conf */
	struct al_net_limits {
		uint64_t connections; /* concurrent; 0 = unset */
		uint64_t requests;    /* connections allowed over the run */
		uint64_t bytes_out;   /* sandbox → upstream */
	} net_run, net_host;	      /* per run, per host name */

	/* backend */
	char *backend;
	char *language; /* wasm: "python" runs the command's arguments under Pyodide */

	/* credentials (cred.h): secrets and tokens this task defines (only
	 * without an operator policy), the ones it asks for by name (from an
	 * operator policy's profile: --secret, "secrets": [NAMES]), the
	 * options of allow rules written as objects, and the budget. */
	struct al_secret_def **secret_defs;
	size_t n_secret_defs;
	char **secret_names;
	char **
	    secret_name_where; /* where each name was asked for: "--secret TOK", "FILE: secrets[0]" */
	struct al_rule_opts **rule_opts;
	size_t n_rule_opts;
	struct al_budget budget;

	/* A container's own root (the OCI front end), or NULL. */
	struct al_policy_root *root;

	/* The operator policy the request is held to: set by the engine
	 * (al_engine_request, engine.h), never by a file or a flag, and
	 * carried into the plan. NULL: none. */
	struct al_policy_operator *op;
};

struct al_decider_conf;

struct al_policy_operator {
	char *profile;
	char *file;
	char *sha256;
	char **never; /* the profile's never rules, as text: the gateway applies them */
	struct al_decider_conf *decider;
	/* Where every secret and token of the operator's comes from (granted
	 * or not): files and keys no mount may show, variables no --env may
	 * pass. */
	char **secret_files;
	char **secret_envs;
};

void al_policy_operator_free(struct al_policy_operator *o);
void al_policy_root_free(struct al_policy_root *r);

/* A new empty (all unset) policy. Free with al_policy_free(). */
struct al_policy *al_policy_new(const char *source);
void al_policy_free(struct al_policy *p);
static inline void al_policy_freep(struct al_policy **p)
{
	al_policy_free(*p);
}

/* Append a mount; copies the strings. */
void al_policy_add_mount(struct al_policy *p, const char *host, const char *path,
			 enum al_mount_mode mode, int exec, const char *origin);

/* Append a copy-in (in) or copy-out; copies the strings. */
void al_policy_add_copy(struct al_policy *p, bool in, const char *host, const char *path,
			const char *origin);

/* Validate one allowlist rule / a name=address mapping (same checks the
 * gateway applies); err says what is wrong. A rule for loopback space
 * (127.0.0.0/8, ::1), the unspecified address (0.0.0.0, ::) or localhost
 * (and names below it) is refused too: inside the sandbox those are its own
 * loopback, never the gateway's, and the message says to map a name to the
 * host's loopback (--map-host NAME=127.0.0.1) and allow that name. */
int al_policy_check_allow_rule(const char *rule, struct al_error *err);
int al_policy_check_host_map(const char *name, const char *addr, struct al_error *err);

/* Check "IP[:PORT]" ("[v6]:PORT" for IPv6) for network.resolver. */
int al_policy_check_resolver(const char *s, struct al_error *err);

/* Set name=address in net_hosts, replacing an earlier one for name. */
void al_policy_set_host(struct al_policy *p, const char *name, const char *addr);

/* Set NAME=VALUE, replacing an earlier value of NAME. Copies. */
void al_policy_set_env(struct al_policy *p, const char *name, const char *value);
/* The same, for a value dumps must not show (hide) or may show again. */
void al_policy_set_env_hidden(struct al_policy *p, const char *name, const char *value, bool hide);
/* The same for a value from airlock's own environment (--env NAME):
 * hidden, and listed in env_passed. */
void al_policy_set_env_passed(struct al_policy *p, const char *name, const char *value);
/* name is one of hidden (p->env_hidden, p->env_passed). */
bool al_policy_env_is_hidden(char *const *hidden, const char *name);

/* Append allow-rule options (taken). */
void al_policy_add_rule_opts(struct al_policy *p, struct al_rule_opts *o);
/* Add a secret or token definition (taken), replacing one of that name. */
void al_policy_add_secret_def(struct al_policy *p, struct al_secret_def *d);
/* Ask for a secret or token by name (once), where: "--secret NAME" or
 * "FILE: secrets[I]", for messages. */
void al_policy_add_secret_name(struct al_policy *p, const char *name, const char *where);
/* Where name was asked for, or NULL. */
const char *al_policy_secret_name_where(const struct al_policy *p, const char *name);

/* Overlay `over` onto `base`: every set field of `over` replaces base's;
 * over's mounts replace base mounts at the same sandbox path and are added
 * otherwise; over's env entries replace same-named ones. Borrows over. */
void al_policy_merge(struct al_policy *base, const struct al_policy *over);

/* Parse a policy file (JSON, strict, version 1) into a new policy.
 * Errors name the file and either line:column (syntax) or the JSON path
 * (schema), e.g. "p.json: limits.timeout: expected ...". Returns 0 or a
 * negative errno; *ret is written only on success. */
int al_policy_load_file(const char *path, struct al_policy **ret, struct al_error *err);

/* Same for an in-memory document; `name` is used in messages. */
int al_policy_load_string(const char *name, const char *text, size_t len, struct al_policy **ret,
			  struct al_error *err);

/* The same two, adding every error they find to errs (al_policy_load_file()
 * and al_policy_load_string() report the first of them): each key and
 * element is checked even after another failed. They stop early only where
 * going on would mean nothing: a file that cannot be read or is not JSON,
 * a top level that is not an object, a version this build does not read, a
 * value of the wrong type (its insides are not looked at). Returns 0, or
 * the negative errno of the first error added; *ret only on success. */
int al_policy_load_file_all(const char *path, struct al_policy **ret, struct al_errors *errs);
int al_policy_load_string_all(const char *name, const char *text, size_t len,
			      struct al_policy **ret, struct al_errors *errs);
