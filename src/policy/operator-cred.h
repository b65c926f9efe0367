/* The parts of the operator policy's parser kept in files of their own
 * (internal to src/policy): credentials, rule options and budget
 * (operator-cred.c), the decider (operator-decider.c), the daemon's
 * identities and pool (operator-serve.c). */
#pragma once

#include <jansson.h>

#include "policy/json.h"
#include "policy/operator.h"

/* The top level's "secrets" and "tokens": the definitions profiles grant. */
int al_op_parse_secrets(struct al_json_ctx *c, const json_t *root);
/* A profile's "secrets" and "tokens": the names it grants (each defined). */
int al_op_parse_grants(struct al_json_ctx *c, const json_t *profile, const char *path,
		       struct al_op_profile *pr);
/* A profile's limits.budget: {"max", "default", "prices"}. */
int al_op_parse_budget(struct al_json_ctx *c, const json_t *j, const char *path,
		       struct al_op_profile *pr);
/* Keep an allow or always rule's options (taken). */
void al_op_add_rule_opts(struct al_op_profile *pr, struct al_rule_opts *o);

/* The top level's "decider". */
int al_op_parse_decider(struct al_json_ctx *c, const json_t *j);
/* The top level's "serve", after the profiles (it names them). */
int al_op_parse_serve(struct al_json_ctx *c, const json_t *j);
/* The top level's "oci" (operator-serve.c), after the profiles. */
int al_op_parse_oci(struct al_json_ctx *c, const json_t *j);
