/* What the files of src/oci share (internal to it). */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "core/error.h"
#include "oci/oci.h"
#include "oci/spec.h"
#include "oci/state.h"

/* bundle/config.json read (at most AL_OCI_MAX_CONFIG bytes) and parsed;
 * *real the bundle's resolved path. */
int al_oci_read_config(const char *bundle, char **real, struct al_oci_config **ret,
		       struct al_errors *errs);
/* Every error of errs in err, one line each (the first's code). */
int al_oci_errors(const struct al_errors *errs, struct al_error *err);
/* A host pty: its master sent to the console socket, *slave (raw) ours. */
int al_oci_console(const char *sock_path, unsigned short rows, unsigned short cols, int *slave,
		   struct al_error *err);
int al_oci_write_pid_file(const char *path, pid_t pid, struct al_error *err);

/* An existing container: its directory, its state (st->pid 0 when
 * create did not finish), whether its supervisor lives. */
struct al_oci_box {
	int rootfd, dirfd;
	struct al_oci_state st;
	bool complete, alive;
	bool abandoned; /* no state.json, and its create is gone */
};
int al_oci_box_open(const struct al_oci_ctx *g, const char *id, struct al_oci_box *b,
		    struct al_error *err);
void al_oci_box_close(struct al_oci_box *b);
/* A connection to its supervisor (fd), -errno with err set. */
int al_oci_box_connect(const struct al_oci_box *b, struct al_error *err);
/* One request {"op": op} (and more members from extra, taken), its answer. */
int al_oci_box_call(const struct al_oci_box *b, const char *op, json_t *extra, json_t **ret,
		    struct al_error *err);
/* Wait for the supervisor to be gone, at most ms: true when it is. */
bool al_oci_box_wait_gone(const struct al_oci_box *b, int ms);
/* How the container's process ended (exit.json): the status to exit
 * with (code, or 128 + signal), and its signal (0: none). -1: unknown. */
int al_oci_box_exit(const struct al_oci_box *b, int *sig);

/* hooks.c: the config's hooks as JSON (kept in the state directory's
 * hooks.json), and those of one kind ("prestart", ...) run in order with
 * state on their stdin: 0, or the first failure. */
#include <jansson.h>
json_t *al_oci_hooks_json(const struct al_oci_config *c);
int al_oci_hooks_run(json_t *hooks, const char *kind, json_t *state, const char *bundle,
		     struct al_error *err);
