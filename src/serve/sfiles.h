/* The file API's two ways, shared by sfiles.c (the path checks, and the
 * operations in the run's scratch on the host) and sfiles-vm.c (the same
 * operations done by the sandbox's own agent: microvm, vm). */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "serve/sess.h"

/* A directory's listing gives at most this many entries. */
#define SFILE_LIST_MAX 10000

/* A request's path, located in the sandbox's scratch. */
struct sfile_where {
	char spath[4100]; /* in the sandbox */
	char *part;	  /* relative to the scratch's root */
	char *parent;	  /* part's directory ("." for none) */
	const char *name; /* part's last component */
	bool is_face;	  /* the face itself (/tmp) */
	/* No scratch on the host: the operation is an exec of the sandbox's
	 * (sfiles-vm.c), and uid, gid are unset. */
	bool by_exec;
	uid_t uid; /* the sandbox user's (its workdir's owner) */
	gid_t gid;
};

/* errno e from resolving or acting on w (what: "read", "write", "list",
 * "mkdir", "remove"), answered: 400 a link on the way (ELOOP), leaving
 * the scratch (EXDEV), not a directory on the way, not a regular file or
 * directory (ENXIO); 403 EACCES, EPERM, EROFS; 404 ENOENT; 409 EEXIST,
 * ENOTEMPTY, EISDIR; 507 ENOSPC, EDQUOT; 500 anything else. */
void sfile_fail(struct sess *s, uint64_t req, const struct sfile_where *w, const char *what, int e);
/* One entry of a directory's listing (raw: its name's bytes). */
json_t *sfile_entry(const char *raw, const char *type, long long size, unsigned mode);

/* sfiles-vm.c: GET, PUT, DELETE on w (located, w->by_exec) answered once
 * the sandbox's file operation ends. */
void sfile_by_exec(struct sess *s, uint64_t req, const char *method, const struct sfile_where *w,
		   const char *query, const uint8_t *body, size_t len);
