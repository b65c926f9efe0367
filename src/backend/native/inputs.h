/* A task's inputs as root: opened by the supervisor, idmapped to their
 * owners, handed to the child as detached mounts (inputs.c). */
#pragma once

#include <jansson.h>

#include "core/error.h"
#include "backend/native/lower.h"

/* The lowest fd number an input gets: above everything the child's stdio
 * step places (0-2, the sync socket, the cgroup fds). */
#define AL_INPUT_FD_MIN 64

/* Open every op with input >= 0 as a detached mount, checked against the
 * plan's identity, or, where the sandbox user could not read it and the
 * policy allows, turn it into a copy (np->copies; its fd stays -1).
 * *ret: np->n_inputs fds indexed by op->input (NULL when there are none). Refuses, with err naming the input, a --rw input whose
 * filesystem cannot be idmapped and an input the sandbox user could not
 * read. Returns 0 or a negative errno; nothing is left open on failure. */
int al_native_open_inputs(struct al_native_plan *np, const struct al_plan *plan, int **ret,
			  struct al_error *err);

/* Once the tree is built and before the command starts: the read-only
 * copies of inputs, then the plan's --copy-in, through scratch (an fd of
 * the scratch's root from the child). */
int al_native_fill_scratch(const struct al_native_plan *np, const struct al_plan *plan, int scratch,
			   struct al_error *err);

/* The user namespaces of idmappings made so far, shared by the inputs of
 * one run (one per distinct owner). */
struct al_idmap;
struct al_idmaps {
	struct al_idmap *v;
	size_t n;
};

/* One input (op->input >= 0, with its attrs, identity and owner; host its
 * host path) as a detached tree, as al_native_open_inputs() opens each,
 * for a backend that lowers its own plan (gvisor). *copy: the sandbox
 * user could not read it and op->copy allows a copy (no fd, no error). */
int al_native_open_input(const struct al_mount_op *op, const char *host,
			 const struct al_host_ids *ids, struct al_idmaps *maps, bool *copy,
			 struct al_error *err);
void al_idmaps_free(struct al_idmaps *maps);

/* Close and free what al_native_open_inputs() returned; NULL is fine. */
void al_native_close_inputs(int *fds, size_t n);
