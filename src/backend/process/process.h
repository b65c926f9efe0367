/* The process backend: no namespaces. The command runs on the host as the
 * run's own host uid (a slot of the pool), under landlock (the plan's host
 * paths and a private scratch; no TCP at all), seccomp (the native table,
 * plus a filter that leaves only TCP sockets and stream socketpairs),
 * rlimits and the run's cgroup. It goes through the native backend's init
 * and monitor (backend/native/child.c, monitor.c) with steps of its own
 * (child.c here) and its own checks from outside. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "backend/backend.h"
#include "backend/native/lower.h"

/* What the process backend keeps of one sandbox, besides the native
 * state it shares with the init and monitor. */
struct al_process {
	char *scratch;		   /* the scratch's host directory, or NULL */
	bool scratch_mounted;	   /* a tmpfs of scratch_bytes is mounted there */
	pid_t remover;		   /* the process that removes the scratch at the end */
	int remover_fd;		   /* closed: it does */
	struct al_native_plan *np; /* landlock rules and seccomp, in host paths */
	struct al_plan view;	   /* the plan with workdir and env moved to the scratch */
	char **envp;		   /* view.envp (owned strings) */
	char *workdir;		   /* view.workdir (owned) */
	/* Egress (a plan with a gateway): the gateway's listeners on the
	 * host's 127.0.0.1, at ports the kernel chose; the run's nftables
	 * table (nft.c) is in place while nft_added. */
	uint16_t ports[2]; /* the HTTP proxy's and the SOCKS listener's; 0 before */
	bool nft_added;
};

/* The run's nftables table: "airlock-process-UID" (family inet). */
#define AL_PROCESS_NFT_PREFIX "airlock-process-"
void al_process_nft_name(uid_t uid, char *out, size_t len);
/* Add it: uid's packets are dropped but TCP to 127.0.0.1 at the n ports
 * (a table of the same name is replaced, in one transaction). */
int al_process_nft_add(uid_t uid, const uint16_t *ports, size_t n, struct al_error *err);
int al_process_nft_del(uid_t uid, struct al_error *err);
/* airlock gc: remove the tables whose run is dead (its slot of host ids
 * not held). Returns how many, or -errno. */
int al_process_nft_gc(struct al_error *err);

extern const struct al_backend_facts al_process_facts;
int al_process_usable(char *why, size_t len);
int al_process_probe(const struct al_plan *plan, struct al_error *err);
int al_process_describe(const struct al_plan *plan, FILE *f, json_t *json, struct al_error *err);

/* The plan in this backend's terms, with the scratch at scratch (NULL: a
 * placeholder, for describe): landlock rules on host paths, the seccomp
 * program, and (pr) the view's workdir and env. Refuses what probe does. */
int al_process_lower(const struct al_plan *plan, const char *scratch, struct al_process *pr,
		     struct al_error *err);
void al_process_free(struct al_process *pr);

/* The child after clone3 (child.c): the steps, then the native init.
 * Never returns. */
struct al_child_fds;
_Noreturn void al_process_child(const struct al_process *pr, const struct al_child_fds *fds,
				uid_t uid, gid_t gid);
/* The checks from outside once init reports ready (child.c). */
int al_process_check_ready(struct al_sandbox *sb, int landlock_abi, char *msg, size_t len);
