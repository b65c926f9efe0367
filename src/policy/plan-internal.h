/* Plan building's parts in other files (internal to src/policy: what the
 * run's credentials add goes in through al_plan_finish(), plan.h). */
#pragma once

#include <jansson.h>
#include <stdio.h>

#include "policy/plan.h"

/* Entries in p->fs: a file airlock writes (content taken) and a
 * directory airlock makes, both read-only. Parents first. */
void al_plan_add_file(struct al_plan *p, const char *path, char *content, mode_t mode);
void al_plan_add_dir(struct al_plan *p, const char *path, mode_t mode);
/* Any entry (source taken), and a host path (resolved, no links) with
 * its identity from st. */
struct al_fs_entry *al_plan_add_fs(struct al_plan *p, enum al_fs_kind kind, const char *path,
				   char *source, unsigned access, const char *what);
struct stat;
struct al_fs_entry *al_plan_add_host(struct al_plan *p, enum al_fs_kind kind, const char *host,
				     const char *path, const struct stat *st, unsigned access,
				     const char *what);

/* The host's character devices /dev/NAME for each of names
 * (NULL-terminated) that exists, each at its own path. */
void al_plan_add_dev_nodes(struct al_plan *p, const char *const *names);

/* plan-root.c: the tree on a container's own root (pol->root), in place
 * of airlock's own; its ids and the command's identity. */
void al_plan_build_root(struct al_plan *p, const struct al_policy *pol, struct al_errors *errs);
void al_plan_free_root(struct al_plan *p);

/* plan-copy.c: --copy-in and --copy-out (after the file tree: they go in
 * its scratch faces), with the copy-out caps. */
void al_plan_build_copies(struct al_plan *p, const struct al_policy *pol, struct al_errors *errs);

/* plan-ids.c: the host ids (identity.host_ids, rootless) and the user
 * namespace's limits. */
void al_plan_build_ids(struct al_plan *p, const struct al_policy *pol, struct al_errors *errs);
/* Rootless, a --rw directory (dir, resolved) whose subdirectories are all
 * the caller's: 0, or -EPERM with err naming the first that belongs to
 * someone else (inside it would be nobody's, unwritable). Looks at no more
 * than 100,000 entries, 64 levels deep. */
int al_plan_check_rw_owner(const char *origin, const char *dir, struct al_error *err);

/* plan-cred.c: the secrets, tokens, rule options and budget (after the
 * network and the environment are built); the files they add under /etc
 * (after /etc). */
void al_plan_build_cred(struct al_plan *p, const struct al_policy *pol, struct al_errors *errs);
void al_plan_build_cred_files(struct al_plan *p);
void al_plan_free_cred(struct al_plan *p);
/* The command's environment (plan-cred.c, after the network). */
void al_plan_build_env(struct al_plan *p, const struct al_policy *pol);
/* envp sets name. */
bool al_plan_env_has(char *const *envp, const char *name);
/* After the file tree: no mount or copy-in shows where a secret comes
 * from, no --env passes its variable. */
void al_plan_check_cred_sources(struct al_plan *p, const struct al_policy *pol,
				struct al_errors *errs);

/* dump-cred.c: for check's dumps. */
void al_plan_dump_cred_text(const struct al_plan *p, FILE *f);
json_t *al_plan_dump_cred_json(const struct al_plan *p);
