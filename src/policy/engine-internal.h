/* Shared by engine.c, engine-paths.c and engine-out.c. */
#pragma once

#include "policy/engine.h"

/* Add a refusal: task (the flag or "FILE: path"), the value asked, the
 * bound as text, and the operator JSON path (taken: freed here). */
void engine_refuse(struct al_decision *d, const char *task, const char *asked, const char *bound,
		   char *operator_path, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* Add a decision; bound (taken, may be NULL) from engine_bound(). */
void engine_explain(struct al_decision *d, const char *what, const char *value, enum al_origin from,
		    const char *task, char *bound);

/* "FILE: " followed by the formatted operator JSON path: a new string. */
char *engine_bound(const struct al_decision *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* "profiles.NAME.SUFFIX": a new string. */
char *engine_path(const struct al_op_profile *pr, const char *suffix);

/* The rules of l as written, ", " between: a new string ("" for none). */
char *engine_rules_text(const struct al_allowlist *l);

void engine_explain_clear(struct al_explain *e);

/* engine-cred.c: secrets and tokens by grant, the operator's rule
 * options on the task's rules, the budget. After the always rules. */
void engine_check_cred(struct al_decision *d, struct al_policy *task,
		       const struct al_policy *flags);
