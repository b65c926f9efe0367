/* Shared by the config.json parser's files (spec.c: the document, root,
 * mounts, process, hooks; spec-linux.c: the linux object; spec-json.c:
 * the typed getters). Each getter adds an error naming the JSON path when
 * the value is wrong, stores only when it is right, and returns 0 or a
 * negative errno. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "oci/spec.h"

struct oci_ctx {
	struct al_errors *errs;
	struct al_oci_config *cfg;
	bool markers; /* integers past int64 were rewritten (see oci_prepass) */
	bool oom;
	char **unmod; /* present_unmodelled being built */
	size_t n_unmod;
};

/* A JSON path: long enough for any the parser builds; a map's key is cut. */
struct oci_path {
	char s[320];
};

/* "base.key", "base[i]", "base[\"key\"]" in a caller's buffer (use the
 * macros: their compound literal lives until the end of the block). */
const char *oci_key(struct oci_path *p, const char *base, const char *key);
const char *oci_idx(struct oci_path *p, const char *base, size_t i);
const char *oci_mapkey(struct oci_path *p, const char *base, const char *key);
#define KEY(base, key)	  oci_key(&(struct oci_path){{0}}, base, key)
#define IDX(base, i)	  oci_idx(&(struct oci_path){{0}}, base, i)
#define MAPKEY(base, key) oci_mapkey(&(struct oci_path){{0}}, base, key)

int oci_fail(struct oci_ctx *c, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int oci_nomem(struct oci_ctx *c);

/* obj's member key, NULL when absent or JSON null (Go's writers and
 * readers treat null as absent). */
json_t *oci_get(const json_t *obj, const char *key);
/* j is an object (an array): else an error "must be an object". */
bool oci_object(struct oci_ctx *c, const json_t *j, const char *path);
bool oci_array(struct oci_ctx *c, const json_t *j, const char *path, size_t max);

int oci_str(struct oci_ctx *c, const json_t *j, const char *path, char **out);
int oci_bool(struct oci_ctx *c, const json_t *j, const char *path, bool *out);
int oci_int(struct oci_ctx *c, const json_t *j, const char *path, int64_t min, int64_t max,
	    int64_t *out);
int oci_uint(struct oci_ctx *c, const json_t *j, const char *path, uint64_t max, uint64_t *out);
int oci_u32(struct oci_ctx *c, const json_t *j, const char *path, uint32_t *out);
/* A required member: "missing" when absent. */
json_t *oci_need(struct oci_ctx *c, const json_t *obj, const char *path, const char *key);

#define OCI_ENV	     1u /* entries are NAME=value with a non-empty NAME */
#define OCI_ABS	     2u /* entries are absolute paths */
#define OCI_NONEMPTY 4u /* at least one entry, the first one not "" */
/* An array of strings into a NULL-terminated vector (*n its length when n
 * is not NULL). */
int oci_strv(struct oci_ctx *c, const json_t *j, const char *path, unsigned flags, size_t max,
	     char ***out, size_t *n);
/* An object of string values into NULL-terminated key, value pairs. */
int oci_pairs(struct oci_ctx *c, const json_t *j, const char *path, char ***out);
/* An array of {containerID, hostID, size}. */
int oci_idmaps(struct oci_ctx *c, const json_t *j, const char *path, struct al_oci_idmap **out,
	       size_t *n);
/* s is one of the NULL-terminated names[]. */
bool oci_one_of(const char *s, const char *const *names);
/* Note a known field the model does not carry. */
void oci_unmodelled(struct oci_ctx *c, const char *path);

/* Rewrite integers past int64 (a uint64 such as 18446744073709551615,
 * which jansson cannot hold) as marked strings the getters read back.
 * Returns a new text in *out (NULL: none needed), -ENOMEM. */
int oci_prepass(const char *json, size_t len, char **out, size_t *out_len, bool *has_nul);

int oci_parse_linux(struct oci_ctx *c, const json_t *lnx);

void oci_strv_free(char **v);
void oci_mount_free(struct al_oci_mount *m);
