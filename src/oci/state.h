/* A container's state directory, ROOT/ID (0700, root's), under the
 * runtime's --root:
 *   state.json   what create wrote: the id, the bundle, the supervisor's
 *                pid and its start time, when, the annotations
 *   sock         the supervisor's socket (proto.h)
 *   result.json  the run's record, written by the run layer at its end
 *   exit.json    how the container's process ended, written by the
 *                supervisor just before it exits
 * A directory without state.json is a create that did not finish. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

#include "core/error.h"

#define AL_OCI_DEFAULT_ROOT "/run/airlock-runc"
#define AL_OCI_ID_MAX	    1024

struct al_oci_state {
	char *id;
	char *bundle;
	char *created; /* RFC 3339 */
	char *oci_version;
	pid_t pid;		       /* the supervisor's: the container's pid for the engine */
	unsigned long long start_time; /* its start in clock ticks since boot (/proc/PID/stat) */
	json_t *annotations;	       /* an object, owned */
	/* Where the run's record is kept once the container is deleted
	 * (--audit-dir's NAME.result.json, beside its audit stream), or NULL. */
	char *record;
	/* linux.cgroupsPath in its absolute form, or NULL: where the run's
	 * cgroup is, for a delete after its supervisor died. */
	char *cgroup_path;
};

void al_oci_state_clear(struct al_oci_state *st);

/* A container id as runc takes them: letters, digits, _ + - . only, not
 * "." or "..", at most AL_OCI_ID_MAX bytes. */
int al_oci_id_check(const char *id, struct al_error *err);

/* The runtime's root directory (made 0700 when missing, its parents too):
 * an O_PATH descriptor. It must be a directory of root's, no link,
 * writable by no one else. */
int al_oci_root_open(const char *root, int *ret, struct al_error *err);

/* Make ROOT/ID (EEXIST: "container ID already exists") or open it
 * (ENOENT: "container ID does not exist"); *ret an O_PATH descriptor. */
int al_oci_dir_make(int rootfd, const char *id, int *ret, struct al_error *err);
int al_oci_dir_open(int rootfd, const char *id, int *ret, struct al_error *err);

/* state.json: written whole (a temporary file renamed), read back. Read:
 * -ENOENT when there is none (a create that did not finish). */
int al_oci_state_write(int dirfd, const struct al_oci_state *st, struct al_error *err);
int al_oci_state_read(int dirfd, struct al_oci_state *st, struct al_error *err);

/* A small JSON file of the directory, written whole / read (NULL when
 * missing or not JSON). */
int al_oci_json_write(int dirfd, const char *name, json_t *o, struct al_error *err);
json_t *al_oci_json_read(int dirfd, const char *name);

/* Remove ROOT/ID and the files in it. */
int al_oci_dir_remove(int rootfd, const char *id, struct al_error *err);

/* The ids under root, sorted (NULL-terminated; al_strv_free). */
char **al_oci_ids(int rootfd);

/* pid's start time (clock ticks since boot), 0 when it is gone. */
unsigned long long al_oci_start_time(pid_t pid);
/* The supervisor of st still runs (its pid with its start time). */
bool al_oci_alive(const struct al_oci_state *st);

/* "/proc/self/fd/N/NAME" for a path in the directory that is no longer
 * than a socket address may be. */
void al_oci_dir_path(int dirfd, const char *name, char *buf, size_t len);
