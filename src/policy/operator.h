/* The operator policy: what any run on this machine may ever ask for
 * (docs/operator-policy.md). The operator writes it once; a task (flags, a
 * policy file, later an API request) asks, and the engine (engine.h)
 * intersects the two. Its profiles are named bound sets; a task picks one
 * with --profile / "profile", and an unnamed task gets "default".
 *
 * The parser is strict like the task policy's and reports every error it
 * finds. The loader (al_operator_load_file) is the one place that touches
 * the host: it reads the file, checks who may write it, and resolves the
 * paths the profiles name (realpath, stat), so the engine can stay pure. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/error.h"
#include "net/allow.h"
#include "policy/cred.h"
#include "policy/limits.h"

#define AL_OPERATOR_VERSION	 1
#define AL_OPERATOR_DEFAULT_FILE "/etc/airlock/operator.json"
#define AL_OPERATOR_ENV		 "AIRLOCK_OPERATOR_POLICY"
#define AL_OPERATOR_PROFILE	 "default"

/* A ceiling and a default for one limit, in the task policy's units
 * (bytes, milliseconds, thousandths of a CPU, counts); 0 = not given. */
struct al_op_bound {
	uint64_t max;
	uint64_t def;
};

/* A host path a profile names: as written, and as the loader resolved it. */
struct al_op_path {
	char *path; /* as written, trailing '/' dropped */
	char *real; /* realpath() of it; path itself when it does not exist */
	bool exists;
	dev_t dev; /* when it exists: what the engine compares a mount's identity to */
	ino_t ino;
	char *where; /* its JSON path: "profiles.default.filesystem.ro[0]" */
};

/* Protections a task may weaken to best-effort ("best_effort"). */
#define AL_OP_WEAKEN_LANDLOCK	   (1u << 0)
#define AL_OP_WEAKEN_KERNEL_MEMORY (1u << 1)

struct al_op_profile {
	char *name;
	char *where; /* "profiles.NAME" */

	/* filesystem: host paths a task may show read-only (ro, and rw) or
	 * writable (rw), and paths never shown, which win over both. The
	 * same bound copy-in (read) and copy-out (written) host paths. */
	struct al_op_path *ro, *rw, *never;
	size_t n_ro, n_rw, n_never;
	/* System directories (sandbox path = host path) a task may name in
	 * filesystem.system; NULL: airlock's default list. */
	char **system;
	/* A single file a task shows or copies in may have other hard links
	 * (filesystem.linked_files): where the profile has never paths, such a
	 * file is refused unless this is set, since its other names (one may
	 * lie inside a never path) cannot be checked. */
	bool linked_files;

	/* network: rules a task may ask for, rules added to every run, rules
	 * no run gets (also checked by the gateway against each resolved
	 * address), and resolvers a task may name. */
	struct al_allowlist *allow, *always, *never_net;
	char **always_text, **never_text;
	size_t n_never_net_default; /* never_text[0..n) are airlock's defaults */
	/* Addresses a task may map a name to (network.hosts, --map-host):
	 * addresses and CIDRs, every port. NULL: none. */
	struct al_allowlist *hosts_to;
	char **hosts_text;
	char **resolvers; /* "IP[:PORT]" as written; empty: none */

	struct al_op_bound limits[AL_OPL_COUNT];

	/* backends a task may choose (NULL: any this build knows), the
	 * weakest allowed, and the one an unnamed task gets. */
	char **backends;
	char *backend_min;
	char *backend_default;

	/* env: patterns (fnmatch) of names a task may set, names it may
	 * never set (win over allow), names it may pass from airlock's own
	 * environment (--env NAME). */
	char **env_allow, **env_never, **env_pass;
	size_t n_env_never_default; /* env_never[0..n) are airlock's defaults */

	unsigned best_effort; /* AL_OP_WEAKEN_* a task may ask for */

	/* identity.host_ids: what every run of the profile gets (an enum
	 * al_host_ids_mode; UNSET: per run, and no task may pin a range) */
	int host_ids;
	uint32_t host_ids_base;

	/* credentials (operator-cred.c): the secrets and tokens of the
	 * operator's a task may name; the options of allow and always rules
	 * written as objects (interception, request rules), which hold for
	 * every task rule within them; the budget's ceiling, default and
	 * prices (budget.set: the profile has one). */
	char **grants;
	struct al_rule_opts **rule_opts;
	size_t n_rule_opts;
	struct al_budget budget; /* its max is the ceiling (0: none) */
	uint64_t budget_default;
};

/* The optional external decider: a local service speaking Open Policy
 * Agent's data API (POST PATH with {"input": ...}, answer {"result": ...})
 * over a Unix socket or loopback HTTP. */
struct al_decider_conf {
	char *socket; /* a Unix socket's path, or NULL */
	char *host;   /* loopback HTTP: "127.0.0.1" or "::1", or NULL */
	uint16_t port;
	char *run_path;	     /* "/v1/data/airlock/run": asked once per run; NULL: not */
	char *egress_path;   /* "/v1/data/airlock/egress": asked per egress request */
	uint64_t timeout_ms; /* each question; no answer in time = no */
	unsigned cache_size; /* egress answers kept (0: none) */
	uint64_t cache_ttl_ms;
	char *where; /* "decider" */
};

struct al_decider_conf *al_decider_conf_dup(const struct al_decider_conf *c);
void al_decider_conf_free(struct al_decider_conf *c);
static inline void al_decider_conf_freep(struct al_decider_conf **c)
{
	al_decider_conf_free(*c);
}

/* airlock serve's clients (operator-serve.c): an identity of the
 * operator's "serve.identities" and the profiles it may use. */
enum al_op_who {
	AL_OP_WHO_UID = 1, /* "uid:N": a Unix-socket peer's uid */
	AL_OP_WHO_GROUP,   /* "group:NAME": a peer whose gid or supplementary gids hold it */
	AL_OP_WHO_TOKEN,   /* "token:NAME": a bearer token of --token-file named NAME */
};

struct al_op_identity {
	char *key; /* as written: "uid:1000", "group:staff", "token:alice" */
	enum al_op_who kind;
	uid_t uid;	/* UID */
	char *name;	/* GROUP, TOKEN */
	gid_t gid;	/* GROUP: resolved by the loader (getgrnam) */
	bool gid_known; /* GROUP: the group exists */
	char **profiles;
	char *def;   /* the profile a request that names none gets */
	char *where; /* "serve.identities.uid:1000" */
};

/* How many ready sandboxes the warm pool keeps for a profile. */
struct al_op_pool {
	char *profile;
	unsigned count;
	/* The task request each of its sandboxes is made from (JSON text,
	 * checked as a task policy when parsed), or NULL: {}. */
	char *request;
};
#define AL_OP_POOL_MAX 1024u

struct al_op_serve {
	bool set;	    /* the file has a "serve" section */
	char *socket_group; /* the Unix socket's group (mode 0660), or NULL: 0600 */
	struct al_op_identity *ids;
	size_t n_ids;
	struct al_op_pool *pool;
	size_t n_pool;
};

/* Who asks the daemon: a Unix-socket peer (uid, its gid and supplementary
 * gids from the kernel) or a bearer token's identity. Borrowed strings. */
struct al_identity {
	const char *token; /* NULL: a Unix peer */
	uid_t uid;
	const gid_t *gids;
	size_t n_gids;
};

/* The OCI runtime's section ("oci"): what containers may ask of it. */
struct al_op_oci {
	bool hooks; /* the config's prestart, createRuntime, poststart and poststop hooks run */
	char **profiles; /* the profiles io.airlock.profile may name (NULL: default alone) */
};

struct al_operator {
	char *file;	 /* the file it came from */
	char sha256[65]; /* of the file's bytes, hex */
	struct al_op_profile *profiles;
	size_t n_profiles;
	struct al_decider_conf *decider; /* NULL: none */
	/* Secrets and tokens (cred.h) the profiles grant by name. */
	struct al_secret_def **secrets;
	size_t n_secrets;
	struct al_op_serve serve; /* airlock serve's section (zeroed: none) */
	struct al_op_oci oci;	  /* airlock oci's section (zeroed: none) */
};

/* Parse an operator policy (JSON, strict, version 1) held in memory; name
 * is used in messages. Every error found goes to errs, each naming name
 * and the JSON path. Paths are not resolved (real = path, exists =
 * false): al_operator_resolve() does that. Returns 0 or the negative errno
 * of the first error; *ret only on success. */
int al_operator_parse(const char *name, const char *text, size_t len, struct al_operator **ret,
		      struct al_errors *errs);

/* Resolve every path the profiles name against the host (realpath, stat):
 * a path that does not exist is kept as written and can still match. */
void al_operator_resolve(struct al_operator *op);

/* Which file to read: flag (--operator-policy), else env (the value of
 * $AIRLOCK_OPERATOR_POLICY as the caller read it; NULL: not set), else
 * /etc/airlock/operator.json when it exists. Nothing is read from the
 * process's environment here. Returns 0 with *ret a
 * new string, or NULL when none is named and the default does not exist
 * (the run is then unbounded); *ret_how says which ("--operator-policy",
 * "AIRLOCK_OPERATOR_POLICY", "default"). A named file that does not exist
 * is an error, not "none". The operator's own source (the machine's file
 * when it exists, else the environment) cannot be replaced: a flag, or the
 * environment beside the machine's file, naming another file (compared by
 * device and inode) fails with -EPERM, the message naming both. */
int al_operator_find(const char *flag, const char *env, char **ret, const char **ret_how,
		     struct al_error *err);

/* Read, check and parse path: when airlock runs as root the file (and
 * every directory above it) must be owned by root and not writable by
 * group or others, and it must be a regular file reached without a
 * symbolic link; the message names the file and its mode. Computes
 * sha256 and resolves the paths. Errors to errs as al_operator_parse(). */
int al_operator_load_file(const char *path, struct al_operator **ret, struct al_errors *errs);

void al_operator_free(struct al_operator *op);
static inline void al_operator_freep(struct al_operator **op)
{
	al_operator_free(*op);
}

/* The profiles op lets who use through the daemon (operator-serve.c),
 * a NULL-terminated list (al_strv_free; NULL: none), and in *def the one a
 * request naming none gets (a new string, or NULL). Every entry who
 * matches counts: its uid's, each group's it is in, its token's. uid 0
 * with no entry of its own may use every profile, "default" its default.
 * A uid or group entry never matches a token, nor a token entry a peer. */
char **al_op_serve_grants(const struct al_operator *op, const struct al_identity *who, char **def);
/* who as the API names it: "uid:N" or "token:NAME", into buf. */
const char *al_identity_text(const struct al_identity *who, char *buf, size_t len);
/* Resolve the groups of op->serve (getgrnam), as al_operator_resolve(). */
void al_op_serve_resolve(struct al_operator *op);
void al_op_serve_clear(struct al_op_serve *s);
/* The count of profile's warm pool (0: none). */
unsigned al_op_serve_pool(const struct al_operator *op, const char *profile);

/* The profile named name, or NULL. */
const struct al_op_profile *al_operator_profile(const struct al_operator *op, const char *name);

/* The default list of environment names no task may set. */
extern const char *const al_operator_env_never_default[];

/* pr (zeroed) as airlock's defaults before its profile's keys are read:
 * its name and where ("profiles.NAME"), the default never rules (link-
 * local space) and environment lists. */
void al_op_profile_defaults(struct al_op_profile *pr, const char *name, const char *where);

/* Backends in order of strength; -1 for a name this airlock does not
 * have (an operator policy naming one is refused, with the valid names). */
int al_backend_strength(const char *name);
/* The backends this airlock has, a NULL-terminated list that must outlive
 * its use (NULL: the default, native only). The engine's tests set the
 * layers the design has, to test choosing among them. */
void al_backends_built(const char *const *names);
/* The names, NULL-terminated and weakest first: those this airlock has
 * (only_built) or every one the design has. */
const char *const *al_backend_names(bool only_built);
/* Those this airlock has, as "a, b" (a thread's own buffer, valid until
 * its next call). */
const char *al_backend_names_text(void);
