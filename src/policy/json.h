/* JSON helpers shared by the policy parsers (parse.c, operator-parse.c).
 * Each takes the context (the file's name for messages, the error list)
 * and the JSON path of the value, adds an error naming both when the
 * value is wrong, and returns 0 or a negative errno. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"

struct al_policy;
struct al_operator;

struct al_json_ctx {
	const char *file;
	struct al_errors *errs;
	struct al_policy *p;	/* parse.c's result */
	struct al_operator *op; /* operator-parse.c's */
};

int al_json_fail(struct al_json_ctx *c, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* "an object", "a string", ... for messages. */
const char *al_json_type_name(const json_t *j);
/* Every key of obj must be in allowed[] (NULL-terminated). */
int al_json_check_keys(struct al_json_ctx *c, const json_t *obj, const char *path,
		       const char *const *allowed);
/* j is of type (JSON_TRUE: any boolean); expected names it in the error. */
int al_json_want(struct al_json_ctx *c, const json_t *j, json_type type, const char *path,
		 const char *expected);
/* The getters replace *out only on success. */
int al_json_string(struct al_json_ctx *c, const json_t *j, const char *path, char **out);
int al_json_abs_path(struct al_json_ctx *c, const json_t *j, const char *path, char **out);
int al_json_bool(struct al_json_ctx *c, const json_t *j, const char *path, int *out);
int al_json_size(struct al_json_ctx *c, const json_t *j, const char *path, uint64_t *out);
int al_json_duration(struct al_json_ctx *c, const json_t *j, const char *path, uint64_t *out);
int al_json_strings(struct al_json_ctx *c, const json_t *j, const char *path, bool abs_paths,
		    bool nonempty, char ***out);
int al_json_count(struct al_json_ctx *c, const json_t *j, const char *path, uint64_t max,
		  uint64_t *out);
/* CPUs as a number (0.01 to 1024) → thousandths. */
int al_json_cpus(struct al_json_ctx *c, const json_t *j, const char *path, uint64_t *out);
/* Remember that a key failed (*bad = r) and go on; returns r. */
int al_json_note(int *bad, int r);

/* "identity": {"host_ids": "per-run" | FIRST_HOST_ID}. A fixed range is
 * AL_IDS_SLOT_SIZE ids from FIRST_HOST_ID, above 65535, below 2^32 - 1
 * and outside the per-run pool (ids/slots.h). *mode is an enum
 * al_host_ids_mode (policy.h). */
int al_json_identity(struct al_json_ctx *c, const json_t *j, const char *path, int *mode,
		     uint32_t *base);
