/* The config.json parser's typed getters and its pre-pass over the text
 * (see spec-internal.h). */
#include "oci/spec-internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"

/* The kernel takes at most this many lines in a uid_map or gid_map. */
#define MAX_IDMAP_LINES 340

const char *oci_key(struct oci_path *p, const char *base, const char *key)
{
	snprintf(p->s, sizeof(p->s), "%s%s%s", base, *base ? "." : "", key);
	return p->s;
}

const char *oci_idx(struct oci_path *p, const char *base, size_t i)
{
	snprintf(p->s, sizeof(p->s), "%s[%zu]", base, i);
	return p->s;
}

/* A map's key (a sysctl name, an annotation) as base["key"], cut at 64
 * bytes so that a hostile key cannot crowd out the rest of the path. */
const char *oci_mapkey(struct oci_path *p, const char *base, const char *key)
{
	size_t n = strlen(key);

	snprintf(p->s, sizeof(p->s), "%s[\"%.64s%s\"]", base, key, n > 64 ? "..." : "");
	return p->s;
}

int oci_fail(struct oci_ctx *c, const char *path, const char *fmt, ...)
{
	char what[512];
	va_list ap;

	if (al_errors_full(c->errs)) /* only counted: no message to build */
		return al_errors_add(c->errs, EINVAL, NULL, NULL, "omitted");
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return al_errors_add(c->errs, EINVAL, NULL, path, "%s", what);
}

int oci_nomem(struct oci_ctx *c)
{
	if (!c->oom)
		al_errors_add(c->errs, ENOMEM, NULL, NULL, "out of memory parsing config.json");
	c->oom = true;
	return -ENOMEM;
}

json_t *oci_get(const json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);

	return v && !json_is_null(v) ? v : NULL;
}

json_t *oci_need(struct oci_ctx *c, const json_t *obj, const char *path, const char *key)
{
	json_t *v = oci_get(obj, key);

	if (!v)
		oci_fail(c, KEY(path, key), "missing (required)");
	return v;
}

static const char *type_name(const json_t *j)
{
	switch (json_typeof(j)) {
	case JSON_OBJECT:
		return "an object";
	case JSON_ARRAY:
		return "an array";
	case JSON_STRING:
		return "a string";
	case JSON_INTEGER:
		return "an integer";
	case JSON_REAL:
		return "a fraction";
	case JSON_TRUE:
	case JSON_FALSE:
		return "a boolean";
	case JSON_NULL:
		return "null";
	}
	return "something else";
}

/* A marked integer from oci_prepass: "\0N" then the digits as written. */
static const char *marker_digits(const struct oci_ctx *c, const json_t *j)
{
	const char *s;

	if (!c->markers || !json_is_string(j) || json_string_length(j) < 3)
		return NULL;
	s = json_string_value(j);
	return s[0] == '\0' && s[1] == 'N' ? s + 2 : NULL;
}

static const char *found(const struct oci_ctx *c, const json_t *j)
{
	return marker_digits(c, j) ? "an integer" : type_name(j);
}

bool oci_object(struct oci_ctx *c, const json_t *j, const char *path)
{
	if (json_is_object(j))
		return true;
	oci_fail(c, path, "must be an object, not %s", found(c, j));
	return false;
}

bool oci_array(struct oci_ctx *c, const json_t *j, const char *path, size_t max)
{
	if (!json_is_array(j)) {
		oci_fail(c, path, "must be an array, not %s", found(c, j));
		return false;
	}
	if (json_array_size(j) > max) {
		oci_fail(c, path, "has %zu entries, more than the %zu allowed", json_array_size(j),
			 max);
		return false;
	}
	return true;
}

int oci_str(struct oci_ctx *c, const json_t *j, const char *path, char **out)
{
	size_t len;
	char *s;

	if (!json_is_string(j) || marker_digits(c, j))
		return oci_fail(c, path, "must be a string, not %s", found(c, j));
	len = json_string_length(j);
	if (len > AL_OCI_MAX_STRING)
		return oci_fail(c, path, "is %zu bytes long, more than the %u allowed", len,
				AL_OCI_MAX_STRING);
	if (memchr(json_string_value(j), '\0', len))
		return oci_fail(c, path, "contains a NUL byte");
	if (!(s = strdup(json_string_value(j))))
		return oci_nomem(c);
	free(*out);
	*out = s;
	return 0;
}

int oci_bool(struct oci_ctx *c, const json_t *j, const char *path, bool *out)
{
	if (!json_is_boolean(j))
		return oci_fail(c, path, "must be true or false, not %s", found(c, j));
	*out = json_is_true(j);
	return 0;
}

int oci_int(struct oci_ctx *c, const json_t *j, const char *path, int64_t min, int64_t max,
	    int64_t *out)
{
	const char *big = marker_digits(c, j);
	int64_t v;

	if (big)
		return oci_fail(c, path, "%.40s is out of range (%" PRId64 " to %" PRId64 ")", big,
				min, max);
	if (!json_is_integer(j))
		return oci_fail(c, path, "must be an integer, not %s", type_name(j));
	v = json_integer_value(j);
	if (v < min || v > max)
		return oci_fail(c, path, "%" PRId64 " is out of range (%" PRId64 " to %" PRId64 ")",
				v, min, max);
	*out = v;
	return 0;
}

int oci_uint(struct oci_ctx *c, const json_t *j, const char *path, uint64_t max, uint64_t *out)
{
	const char *big = marker_digits(c, j);
	uint64_t v;

	if (big) {
		char *end;

		errno = 0;
		v = *big == '-' ? 0 : strtoull(big, &end, 10);
		if (*big == '-' || errno || *end || v > max)
			return oci_fail(c, path, "%.40s is out of range (0 to %" PRIu64 ")", big,
					max);
	} else if (!json_is_integer(j)) {
		return oci_fail(c, path, "must be an integer, not %s", type_name(j));
	} else {
		json_int_t i = json_integer_value(j);

		if (i < 0 || (uint64_t)i > max)
			return oci_fail(
			    c, path, "%" JSON_INTEGER_FORMAT " is out of range (0 to %" PRIu64 ")",
			    i, max);
		v = (uint64_t)i;
	}
	*out = v;
	return 0;
}

int oci_u32(struct oci_ctx *c, const json_t *j, const char *path, uint32_t *out)
{
	uint64_t v;
	int r = oci_uint(c, j, path, UINT32_MAX, &v);

	if (r == 0)
		*out = (uint32_t)v;
	return r;
}

void oci_strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

static int check_entry(struct oci_ctx *c, const char *s, const char *path, unsigned flags)
{
	const char *eq = strchr(s, '=');

	if ((flags & OCI_ENV) && !eq)
		return oci_fail(c, path, "must be NAME=value, has no '='");
	if ((flags & OCI_ENV) && eq == s)
		return oci_fail(c, path, "has an empty name before '='");
	if ((flags & OCI_ABS) && s[0] != '/')
		return oci_fail(c, path, "must be an absolute path");
	return 0;
}

int oci_strv(struct oci_ctx *c, const json_t *j, const char *path, unsigned flags, size_t max,
	     char ***out, size_t *n)
{
	size_t len, bad = 0;
	char **v;

	if (!oci_array(c, j, path, max))
		return -EINVAL;
	len = json_array_size(j);
	if ((flags & OCI_NONEMPTY) && len == 0)
		return oci_fail(c, path, "must not be empty");
	if (!(v = calloc(len + 1, sizeof(*v))))
		return oci_nomem(c);
	for (size_t i = 0; i < len; i++) {
		const char *p = IDX(path, i);
		int r = oci_str(c, json_array_get(j, i), p, &v[i]);

		if (r == -ENOMEM) {
			oci_strv_free(v);
			return r;
		}
		if (r < 0 || check_entry(c, v[i], p, flags) < 0) {
			bad++;
		} else if (i == 0 && (flags & OCI_NONEMPTY) && !*v[0]) {
			oci_fail(c, p, "must not be empty");
			bad++;
		}
		if (!v[i]) /* keep the vector NULL-terminated at its end only */
			v[i] = strdup("");
		if (!v[i]) {
			oci_strv_free(v);
			return oci_nomem(c);
		}
	}
	if (bad) {
		oci_strv_free(v);
		return -EINVAL;
	}
	oci_strv_free(*out);
	*out = v;
	if (n)
		*n = len;
	return 0;
}

int oci_pairs(struct oci_ctx *c, const json_t *j, const char *path, char ***out)
{
	const char *key;
	size_t key_len, i = 0, bad = 0;
	json_t *val;
	char **v;

	if (!oci_object(c, j, path))
		return -EINVAL;
	if (json_object_size(j) > AL_OCI_MAX_ITEMS)
		return oci_fail(c, path, "has %zu entries, more than the %d allowed",
				json_object_size(j), AL_OCI_MAX_ITEMS);
	if (!(v = calloc(2 * json_object_size(j) + 1, sizeof(*v))))
		return oci_nomem(c);
	json_object_keylen_foreach((json_t *)j, key, key_len, val)
	{
		const char *p = MAPKEY(path, key);
		int r = 0;

		/* jansson refuses a key with a NUL byte as a syntax error */
		if (key_len == 0)
			r = oci_fail(c, path, "has an empty key");
		else if (key_len > AL_OCI_MAX_STRING)
			r = oci_fail(c, p, "key is longer than %u bytes", AL_OCI_MAX_STRING);
		else if (!(v[i] = strdup(key)))
			r = oci_nomem(c);
		if (r == 0)
			r = oci_str(c, val, p, &v[i + 1]);
		if (r == -ENOMEM || !v[i] || !v[i + 1]) {
			free(v[i]);
			free(v[i + 1]);
			v[i] = v[i + 1] = NULL;
			if (r == -ENOMEM) {
				oci_strv_free(v);
				return r;
			}
			bad++;
			continue;
		}
		i += 2;
	}
	if (bad) {
		oci_strv_free(v);
		return -EINVAL;
	}
	oci_strv_free(*out);
	*out = v;
	return 0;
}

/* A required uint32 member key of obj (at path p). */
static int need_u32(struct oci_ctx *c, const json_t *obj, const char *p, const char *key,
		    uint32_t *out)
{
	json_t *v = oci_need(c, obj, p, key);

	return v ? oci_u32(c, v, KEY(p, key), out) : -EINVAL;
}

/* Two ranges [a, a + n) and [b, b + m) share an id. */
static bool overlap(uint64_t a, uint64_t n, uint64_t b, uint64_t m)
{
	return a < b + m && b < a + n;
}

int oci_idmaps(struct oci_ctx *c, const json_t *j, const char *path, struct al_oci_idmap **out,
	       size_t *n)
{
	size_t len, bad = 0;
	struct al_oci_idmap *v;

	if (!oci_array(c, j, path, MAX_IDMAP_LINES))
		return -EINVAL;
	len = json_array_size(j);
	if (!(v = calloc(len ? len : 1, sizeof(*v))))
		return oci_nomem(c);
	for (size_t i = 0; i < len; i++) {
		const json_t *e = json_array_get(j, i);
		const char *p = IDX(path, i);
		struct al_oci_idmap *m = &v[i];

		if (!oci_object(c, e, p)) {
			bad++;
			continue;
		}
		/* all three checked, so that each one's error is reported */
		if ((need_u32(c, e, p, "containerID", &m->container_id) |
		     need_u32(c, e, p, "hostID", &m->host_id) |
		     need_u32(c, e, p, "size", &m->size)) < 0) {
			m->size = 0; /* not compared with the next ones */
			bad++;
			continue;
		}
		if (m->size == 0) {
			bad++, oci_fail(c, KEY(p, "size"), "must be at least 1");
			continue;
		}
		if ((uint64_t)m->container_id + m->size > (1ull << 32) ||
		    (uint64_t)m->host_id + m->size > (1ull << 32)) {
			bad++, oci_fail(c, p, "the range passes the last id (4294967295)");
			continue;
		}
		for (size_t k = 0; k < i; k++) {
			if (v[k].size == 0)
				continue;
			if (overlap(m->container_id, m->size, v[k].container_id, v[k].size) ||
			    overlap(m->host_id, m->size, v[k].host_id, v[k].size)) {
				bad++, oci_fail(c, p, "overlaps %s[%zu]", path, k);
				break;
			}
		}
	}
	if (bad) {
		free(v);
		return -EINVAL;
	}
	free(*out);
	*out = v;
	*n = len;
	return 0;
}

bool oci_one_of(const char *s, const char *const *names)
{
	for (size_t i = 0; names[i]; i++)
		if (strcmp(s, names[i]) == 0)
			return true;
	return false;
}

void oci_unmodelled(struct oci_ctx *c, const char *path)
{
	char **v = realloc(c->unmod, (c->n_unmod + 2) * sizeof(*v));

	if (!v) {
		oci_nomem(c);
		return;
	}
	c->unmod = v;
	if (!(v[c->n_unmod] = strdup(path))) {
		oci_nomem(c);
		return;
	}
	v[++c->n_unmod] = NULL;
}

/* tok (n bytes) is a JSON integer (-?(0|[1-9][0-9]*)) that int64 cannot
 * hold. Anything else, even a malformed number, is left to jansson. */
static bool big_integer(const char *tok, size_t n)
{
	bool neg = tok[0] == '-';
	const char *d = tok + neg;
	size_t nd = n - neg;

	if (nd == 0 || (nd > 1 && d[0] == '0'))
		return false;
	for (size_t i = 0; i < nd; i++)
		if (d[i] < '0' || d[i] > '9')
			return false;
	if (nd != 19)
		return nd > 19;
	return memcmp(d, neg ? "9223372036854775808" : "9223372036854775807", 19) > 0;
}

static bool number_byte(char ch)
{
	return (ch >= '0' && ch <= '9') || ch == '-' || ch == '+' || ch == '.' || ch == 'e' ||
	       ch == 'E';
}

/* One walk over the text outside strings: calls out for every big
 * integer's span, notes whether any string holds an escaped NUL. Returns
 * the number of big integers. */
static size_t walk(const char *s, size_t len, bool *has_nul, char *dst, size_t *dst_len)
{
	size_t count = 0, o = 0;
	bool in_str = false;

	for (size_t i = 0; i < len;) {
		char ch = s[i];
		size_t j = i + 1;

		if (in_str && ch == '\\') {
			if (j + 5 <= len && s[j] == 'u' && memcmp(s + j + 1, "0000", 4) == 0)
				*has_nul = true;
			j = j < len ? j + 1 : j;
		} else if (ch == '"') {
			in_str = !in_str;
		} else if (!in_str && (ch == '-' || (ch >= '0' && ch <= '9'))) {
			while (j < len && number_byte(s[j]))
				j++;
			if (big_integer(s + i, j - i)) {
				count++;
				if (dst) {
					memcpy(dst + o, "\"\\u0000N", 8);
					memcpy(dst + o + 8, s + i, j - i);
					dst[o + 8 + j - i] = '"';
					o += 9 + j - i;
				}
				i = j;
				continue;
			}
		}
		if (dst)
			memcpy(dst + o, s + i, j - i);
		o += j - i;
		i = j;
	}
	if (dst_len)
		*dst_len = o;
	return count;
}

int oci_prepass(const char *json, size_t len, char **out, size_t *out_len, bool *has_nul)
{
	size_t count;
	char *dst;

	*out = NULL;
	*has_nul = false;
	count = walk(json, len, has_nul, NULL, NULL);
	if (count == 0)
		return 0;
	if (!(dst = malloc(len + 9 * count + 1)))
		return -ENOMEM;
	walk(json, len, has_nul, dst, out_len);
	dst[*out_len] = '\0';
	*out = dst;
	return 0;
}
