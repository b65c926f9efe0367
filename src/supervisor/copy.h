/* Files into and out of the scratch without bind mounts (--copy-in,
 * --copy-out): the supervisor copies them through a directory fd of the
 * scratch's root, which the backend hands it. No symbolic link is followed
 * on either side: links in a host tree are copied as links; links, devices
 * and sockets the sandbox made are never copied out, only listed. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/error.h"
#include "policy/plan.h"

/* Whose ids what is copied in is made with, and whether the sandbox may
 * change it. */
struct al_copy_owner {
	uid_t uid; /* host ids to make it as (setfsuid); (uid_t)-1: our own */
	gid_t gid;
	/* host ids to read the host tree as, below its top (which we open with
	 * our own access); (uid_t)-1: our own */
	uid_t read_uid;
	gid_t read_gid;
	bool read_only; /* files 0444 (0555 when executable), directories 0555 */
	bool fill;	/* part exists already (an empty file, or a directory): fill it */
};

/* Copy the host file or tree host (resolved, no links; identity dev/ino
 * checked on opening) to part, a path relative to root (an fd of the
 * scratch's root): the missing parents of part are made (owned as own);
 * part may be an existing directory only when host is one (its entries
 * are added). Refuses special files, and a tree deeper than
 * AL_COPY_DEPTH_MAX. ENOSPC reads "the scratch is full". */
#define AL_COPY_DEPTH_MAX 64
int al_copy_in(const char *host, dev_t dev, ino_t ino, int root, const char *part,
	       const struct al_copy_owner *own, struct al_error *err);

/* What copy-out may still bring back, over all of a run's copy-outs. */
struct al_copy_caps {
	uint64_t bytes;
	uint64_t files; /* regular files and directories */
};

/* Make c->hostdir when missing (its parent exists) and open it, with no
 * symbolic link anywhere on the way; it must belong to the caller or root
 * and not be writable by others. The fd, or -errno with err set. */
int al_copy_open_hostdir(const char *path, struct al_error *err);

/* Copy what is at part (relative to root) out into hdir (c->hostdir, from
 * al_copy_open_hostdir()): a file lands there by its name, a directory's
 * entries under it. Only regular files and directories are copied, none
 * of plan's mount points, never over or into an existing host entry, and
 * without exec bits; each file is written under a temporary name and
 * renamed to its own. Past a cap, the walk stops. Never fails: the report
 * (docs/result.md, copy_out) says what was copied (path, size, sha256),
 * what was skipped and why, and any error. Call it only once nothing in
 * the sandbox runs. root -1: nothing to copy from (reported). */
json_t *al_copy_out(int root, const struct al_plan *plan, const struct al_copy_out *c, int hdir,
		    struct al_copy_caps *caps);

/* What airlock run exits with when the command exited 0 but a copy-out
 * left a file or directory behind because the host had one of that name
 * already (without --copy-out-replace, or one that is not the caller's). */
#define AL_COPY_OUT_EXISTS_EXIT 122

/* The entries of a copy-out report skipped because the host had them. */
size_t al_copy_out_existing(const json_t *report);

/* The i-th line naming one of those ("copy-out: /work/out/a.csv not
 * copied: /srv/res/a.csv exists on the host (never replaced) ..."), in
 * printable ASCII; after the listed ones, one line counting the rest; NULL
 * past the end. */
const char *al_copy_out_existing_line(const json_t *report, size_t i, char *buf, size_t len);

/* One line about a copy-out report when anything was skipped or failed
 * ("copy-out /work/out: 3 files, 12 bytes to /srv/res; skipped 2: ..."),
 * or always when verbose; NULL when there is nothing to say. */
const char *al_copy_out_summary(const json_t *report, bool verbose, char *buf, size_t len);
