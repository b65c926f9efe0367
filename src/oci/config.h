/* A bundle's config (spec.h's model) → airlock's task policy, and what
 * airlock does with each field (docs/oci.md has the table). Anything the
 * config asks that airlock cannot honour is refused, naming the field,
 * with three exceptions applied the same way every time and listed in the
 * audit's run.start (notes): the capabilities are dropped, a user
 * namespace is added when the config has none, and an engine-made network
 * namespace is replaced by airlock's own. airlock's promises come from
 * the io.airlock.* annotations. Pure but for the bundle's root path made
 * absolute. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "core/error.h"
#include "oci/spec.h"
#include "policy/policy.h"

/* What the container gets beside its policy. */
struct al_oci_extra {
	bool tty;
	unsigned short rows, cols; /* consoleSize, 0: none */
	char *audit;		   /* io.airlock.audit: a sink's name, or NULL */
	bool hooks;		   /* the config has hooks (the operator policy decides) */
	/* A pod's sandbox (pause) container (docs/oci.md, Kubernetes), and
	 * the pod's network namespace (its config's path), which its
	 * supervisor enters and the sandbox never does; NULL: none given. */
	bool pod_sandbox;
	char *pod_netns;
	bool timeout; /* io.airlock.timeout given */
	/* The documented exceptions applied, for run.start: an array of
	 * {"field": ..., "applied": ...}. */
	json_t *notes;
};

/* The most io.airlock.timeout may ask: a year. */
#define AL_OCI_TIMEOUT_MAX_S (365ull * 24 * 3600)

void al_oci_extra_clear(struct al_oci_extra *x);

/* A documented exception applied to field, for run.start's
 * oci.exceptions. */
void al_oci_note(struct al_oci_extra *x, const char *field, const char *applied);

/* seccomp.c: c's linux.seccomp compiled (*ret malloc()ed, *len
 * instructions; none without one). 0, or < 0 with errs naming the field. */
struct sock_filter;
int al_oci_seccomp(const struct al_oci_config *c, struct sock_filter **ret, size_t *len,
		   struct al_errors *errs);

/* The policy for config c of the bundle at bundle (absolute). 0, or < 0
 * with every refusal in errs. */
int al_oci_policy(const struct al_oci_config *c, const char *bundle, struct al_policy **ret,
		  struct al_oci_extra *x, struct al_errors *errs);
