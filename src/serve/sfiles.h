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

/* What a GET's output from the sandbox's agent is (sfiles-vm.c; guest/
 * proto.h AL_GUEST_EXEC_FILE_OP), judged from its bytes alone, none of
 * them trusted: a file ('f', then at most AL_SERVE_FILE_MAX bytes), a
 * directory's listing ('d', then at most SFILE_LIST_MAX well-formed
 * records; *list: its entries as sfile_entry makes them, a new
 * reference), or neither (anything else, e.g. a record whose name holds
 * a '/', or is "." or "..", or whose size or mode is out of range). */
enum sfile_output {
	SFILE_OUT_BAD,
	SFILE_OUT_FILE,
	SFILE_OUT_LIST
};
enum sfile_output sfile_vm_output(const char *out, size_t len, json_t **list);
/* The size a get over the cap gave on its stderr (1 to 19 decimal digits,
 * nothing else), or -1. */
long long sfile_vm_size(const char *err, size_t len);
