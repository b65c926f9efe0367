/* JSON helpers shared by the task policy's parser (parse.c) and the
 * operator policy's (operator-parse.c): strict types, every error added to
 * the context's list with the file and the JSON path, values stored only
 * when they are right. */
#include "policy/json.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "ids/slots.h"
#include "policy/plan.h"
#include "policy/policy.h"

int al_json_fail(struct al_json_ctx *c, const char *path, const char *fmt, ...)
{
	char what[512];
	va_list ap;

	if (al_errors_full(c->errs)) /* only counted: hostile input may have millions */
		return al_errors_add(c->errs, EINVAL, NULL, NULL, "omitted");
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return al_errors_add(c->errs, EINVAL, c->file, path, "%s", what);
}

const char *al_json_type_name(const json_t *j)
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
		return "a number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "a boolean";
	case JSON_NULL:
		return "null";
	}
	return "something else";
}

/* Every key of obj must be in allowed[] (NULL-terminated). */
int al_json_check_keys(struct al_json_ctx *c, const json_t *obj, const char *path,
		       const char *const *allowed)
{
	const char *key;
	json_t *v;
	int r = 0;

	json_object_foreach((json_t *)obj, key, v)
	{
		bool ok = false;
		for (size_t i = 0; allowed[i]; i++)
			if (strcmp(key, allowed[i]) == 0)
				ok = true;
		if (!ok) {
			char list[256] = "";
			for (size_t i = 0; allowed[i]; i++) {
				strncat(list, i ? ", " : "", sizeof(list) - strlen(list) - 1);
				strncat(list, allowed[i], sizeof(list) - strlen(list) - 1);
			}
			r = al_json_fail(c, path[0] ? path : "(top level)",
					 "unknown key \"%s\" (expected one of: %s)", key, list);
		}
	}
	return r;
}

int al_json_want(struct al_json_ctx *c, const json_t *j, json_type type, const char *path,
		 const char *expected)
{
	if (json_typeof(j) == type || (type == JSON_TRUE && json_is_boolean(j)))
		return 0;
	return al_json_fail(c, path, "expected %s, got %s", expected, al_json_type_name(j));
}

int al_json_string(struct al_json_ctx *c, const json_t *j, const char *path, char **out)
{
	int r = al_json_want(c, j, JSON_STRING, path, "a string");
	if (r < 0)
		return r;
	if (strlen(json_string_value(j)) != json_string_length(j))
		return al_json_fail(c, path, "string contains a NUL byte");
	free(*out);
	*out = xstrdup(json_string_value(j));
	return 0;
}

int al_json_abs_path(struct al_json_ctx *c, const json_t *j, const char *path, char **out)
{
	int r = al_json_string(c, j, path, out);
	if (r < 0)
		return r;
	if (!al_path_is_clean_absolute(*out))
		return al_json_fail(
		    c, path, "expected a clean absolute path (no '.', '..' or '//'), got \"%s\"",
		    *out);
	return 0;
}

int al_json_bool(struct al_json_ctx *c, const json_t *j, const char *path, int *out)
{
	int r = al_json_want(c, j, JSON_TRUE, path, "true or false");
	if (r < 0)
		return r;
	*out = json_is_true(j);
	return 0;
}

int al_json_size(struct al_json_ctx *c, const json_t *j, const char *path, uint64_t *out)
{
	if (json_is_integer(j)) {
		if (json_integer_value(j) <= 0)
			return al_json_fail(c, path, "expected a positive size, got %lld",
					    (long long)json_integer_value(j));
		*out = (uint64_t)json_integer_value(j);
		return 0;
	}
	if (!json_is_string(j))
		return al_json_fail(c, path,
				    "expected a size such as \"64M\" or a byte count, got %s",
				    al_json_type_name(j));
	if (al_parse_size(json_string_value(j), out) < 0 || *out == 0)
		return al_json_fail(
		    c, path,
		    "bad size \"%s\" (expected a number with an optional K, M, G or T suffix)",
		    json_string_value(j));
	return 0;
}

int al_json_duration(struct al_json_ctx *c, const json_t *j, const char *path, uint64_t *out)
{
	char buf[64];

	if (json_is_number(j)) {
		double v = json_number_value(j);
		if (!(v > 0) || v > 1e9)
			return al_json_fail(c, path,
					    "expected a positive number of seconds, got %g", v);
		snprintf(buf, sizeof(buf), "%.3f", v);
	} else if (json_is_string(j)) {
		snprintf(buf, sizeof(buf), "%s", json_string_value(j));
	} else {
		return al_json_fail(
		    c, path, "expected seconds (number) or a duration such as \"90s\", got %s",
		    al_json_type_name(j));
	}
	if (al_parse_duration_ms(buf, out) < 0)
		return al_json_fail(
		    c, path,
		    "bad duration \"%s\" (expected e.g. 30, 1.5, \"250ms\", \"2m\", \"1m30s\")",
		    buf);
	return 0;
}

int al_json_strings(struct al_json_ctx *c, const json_t *j, const char *path, bool abs_paths,
		    bool nonempty, char ***out)
{
	_cleanup_(al_strv_freep) char **v = NULL;
	size_t i;
	json_t *e;
	int r = al_json_want(c, j, JSON_ARRAY, path, "an array of strings"), bad = 0;

	if (r < 0)
		return r;
	if (nonempty && json_array_size(j) == 0)
		return al_json_fail(c, path, "expected a non-empty array");
	json_array_foreach(j, i, e)
	{
		char sub[256];
		char *s = NULL;
		snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
		r = abs_paths ? al_json_abs_path(c, e, sub, &s) : al_json_string(c, e, sub, &s);
		if (r < 0) {
			free(s);
			bad = r;
			continue;
		}
		al_strv_push_take(&v, s);
	}
	if (bad < 0)
		return bad;
	if (!v)
		v = xcalloc(1, sizeof(char *));
	al_strv_free(*out);
	*out = TAKE_PTR(v);
	return 0;
}

/* Remember that a key failed and go on with the next one. */
int al_json_note(int *bad, int r)
{
	if (r < 0)
		*bad = r;
	return r;
}

int al_json_count(struct al_json_ctx *c, const json_t *j, const char *path, uint64_t max,
		  uint64_t *out)
{
	if (!json_is_integer(j) || json_integer_value(j) <= 0 ||
	    (uint64_t)json_integer_value(j) > max)
		return al_json_fail(c, path, "expected a whole number from 1 to %llu, got %s",
				    (unsigned long long)max,
				    json_is_integer(j) ? "a value out of range"
						       : al_json_type_name(j));
	*out = (uint64_t)json_integer_value(j);
	return 0;
}

int al_json_cpus(struct al_json_ctx *c, const json_t *j, const char *path, uint64_t *out)
{
	double v = json_is_number(j) ? json_number_value(j) : -1;
	if (!(v >= 0.01 && v <= 1024))
		return al_json_fail(c, path,
				    "expected a number of CPUs from 0.01 to 1024 (e.g. 0.5)");
	*out = (uint64_t)(v * 1000 + 0.5);
	return 0;
}

int al_json_identity(struct al_json_ctx *c, const json_t *j, const char *path, int *mode,
		     uint32_t *base)
{
	static const char *const keys[] = {"host_ids", NULL};
	char sub[160];
	const json_t *v;
	int r;

	if ((r = al_json_want(c, j, JSON_OBJECT, path, "an object")) < 0)
		return r;
	if ((r = al_json_check_keys(c, j, path, keys)) < 0)
		return r;
	snprintf(sub, sizeof(sub), "%s.host_ids", path);
	if (!(v = json_object_get(j, "host_ids")))
		return 0;
	if (json_is_string(v) && strcmp(json_string_value(v), "per-run") == 0) {
		*mode = AL_HOST_IDS_PER_RUN;
		return 0;
	}
	if (!json_is_integer(v))
		return al_json_fail(c, sub,
				    "expected \"per-run\" or the first host id of a fixed range, "
				    "got %s",
				    al_json_type_name(v));
	json_int_t b = json_integer_value(v);
	if (b < 65536 || b > 4294967294ll - (AL_IDS_SLOT_SIZE - 1))
		return al_json_fail(c, sub,
				    "a fixed range is %u host ids from its first, which must be "
				    "from 65536 to %llu (never root or the ids below 65536)",
				    AL_IDS_SLOT_SIZE, 4294967294ull - (AL_IDS_SLOT_SIZE - 1));
	if (b <= (json_int_t)AL_HOST_DISK_ID && (json_int_t)AL_HOST_DISK_ID - b < AL_IDS_SLOT_SIZE)
		return al_json_fail(c, sub,
				    "%lld..%lld holds host id %u, which files the sandbox creates "
				    "in a root-owned --rw directory belong to in every run",
				    (long long)b, (long long)b + AL_IDS_SLOT_SIZE - 1,
				    AL_HOST_DISK_ID);
	if (al_ids_in_pool((unsigned long long)b))
		return al_json_fail(
		    c, sub, "%lld..%lld overlaps the pool of per-run ranges (%u..%llu)",
		    (long long)b, (long long)b + AL_IDS_SLOT_SIZE - 1, AL_IDS_POOL_BASE,
		    (unsigned long long)AL_IDS_POOL_BASE +
			(unsigned long long)AL_IDS_POOL_SLOTS * AL_IDS_SLOT_SIZE - 1);
	*mode = AL_HOST_IDS_FIXED;
	*base = (uint32_t)b;
	return 0;
}
