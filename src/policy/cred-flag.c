/* --secret's KEY=VALUE form: one secret defined on the command line, with
 * its options written as docker's --secret writes them
 * (id=NAME,env=VAR,host=HOST,header=...). The fields become the JSON
 * definition they stand for, which the policy file's parser reads
 * (al_json_secret_def in cred-parse.c): both forms have one set of checks,
 * and the flag's own checks are only about its fields. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/error.h"
#include "core/util.h"
#include "policy/cred.h"
#include "policy/json.h"

/* The keys the flag knows; "host" is the only one that may repeat. */
static const char *const flag_keys[] = {"id",	  "env",   "file",  "host",
					"header", "basic", "query", NULL};
#define KEY_LIST "id, env, file, host, header, basic or query"

enum {
	K_ID,
	K_ENV,
	K_FILE,
	K_HOST,
	K_HEADER,
	K_BASIC,
	K_QUERY,
	K_N
};

/* A quoted run at *p (just past its opening '"') into out: up to the
 * closing '"', with "" standing for one '"'. Returns false when no quote
 * closes it. */
static bool read_quoted(const char **p, char **out)
{
	const char *s = *p;
	size_t n = 0;
	char *buf = xmalloc(strlen(s) + 1);

	for (;; s++) {
		if (!*s) {
			free(buf);
			return false;
		}
		if (*s == '"') {
			if (s[1] != '"')
				break;
			s++; /* "" is one quote */
		}
		buf[n++] = *s;
	}
	buf[n] = '\0';
	*p = s + 1;
	*out = buf;
	return true;
}

/* The field that starts at *p: KEY=VALUE, where the value, or the whole
 * field, may be in double quotes (a comma inside them belongs to the
 * value). On success *p is past the field and its comma. Errors name the
 * field by its number (from 1). */
static int next_field(const char **p, unsigned nth, char **key, char **value, const char *where,
		      struct al_errors *errs)
{
	const char *s = *p;
	_cleanup_free_ char *whole = NULL;

	if (*s == ',' || !*s)
		return al_errors_add(errs, EINVAL, where, NULL,
				     "field %u is empty (a comma too many?)", nth);
	if (*s == '"') {
		s++;
		if (!read_quoted(&s, &whole))
			return al_errors_add(errs, EINVAL, where, NULL,
					     "field %u: its opening '\"' is never closed", nth);
		char *eq = strchr(whole, '=');
		if (!eq || eq == whole)
			return al_errors_add(errs, EINVAL, where, NULL,
					     "field %u (\"%s\") is not KEY=VALUE", nth, whole);
		*key = strndup(whole, (size_t)(eq - whole));
		*value = xstrdup(eq + 1);
	} else {
		size_t klen = strcspn(s, "=,");
		if (s[klen] != '=' || klen == 0)
			return al_errors_add(errs, EINVAL, where, NULL,
					     "field %u (\"%.*s\") is not KEY=VALUE", nth,
					     (int)strcspn(s, ","), s);
		*key = strndup(s, klen);
		s += klen + 1;
		if (*s == '"') {
			s++;
			if (!read_quoted(&s, value))
				return al_errors_add(errs, EINVAL, where, *key,
						     "the value's opening '\"' is never closed");
		} else {
			size_t vlen = strcspn(s, ",");
			*value = strndup(s, vlen);
			s += vlen;
		}
	}
	if (!*key || !*value)
		return al_errors_add(errs, ENOMEM, where, NULL, "out of memory");
	if (*s && *s != ',')
		return al_errors_add(errs, EINVAL, where, *key,
				     "text after the closing '\"' (a comma must end the field)");
	if (*s == ',' && !s[1])
		return al_errors_add(errs, EINVAL, where, NULL,
				     "a comma at the end (an empty field after it)");
	*p = *s ? s + 1 : s;
	return 0;
}

/* The JSON path of an error from the definition's parser (relative to
 * the definition: "", ".source.env", ".hosts[1]", ".basic.user") as the
 * flag's key. */
static const char *key_of_path(const char *path)
{
	static const struct {
		const char *prefix, *key;
	} map[] = {
	    {".source.env", "env"}, {".source.file", "file"}, {".hosts", "host"},
	    {".header", "header"},  {".basic", "basic"},      {".query", "query"},
	};

	if (!path || !*path)
		return "id"; /* the definition itself: only its name is checked there */
	for (size_t i = 0; i < AL_ARRAY_SIZE(map); i++)
		if (strncmp(path, map[i].prefix, strlen(map[i].prefix)) == 0)
			return map[i].key;
	return path[0] == '.' ? path + 1 : path;
}

/* A relative file= is taken from the current directory, as --ro's host
 * path is; the policy file's parser then checks the result. */
static char *absolute_file(const char *file)
{
	char cwd[PATH_MAX];

	if (file[0] == '/' || !file[0] || !getcwd(cwd, sizeof(cwd)))
		return xstrdup(file);
	return xasprintf("%s/%s", cwd, file);
}

/* The JSON definition the fields stand for. */
static json_t *definition(char *const *one, char *const *hosts)
{
	json_t *def = json_object(), *src = json_object(), *h = json_array();

	if (one[K_ENV])
		json_object_set_new(src, "env", json_string(one[K_ENV]));
	else {
		_cleanup_free_ char *abs = absolute_file(one[K_FILE]);
		json_object_set_new(src, "file", json_string(abs));
	}
	json_object_set_new(def, "source", src);
	for (size_t i = 0; hosts && hosts[i]; i++)
		json_array_append_new(h, json_string(hosts[i]));
	json_object_set_new(def, "hosts", h);
	if (one[K_HEADER])
		json_object_set_new(def, "header", json_string(one[K_HEADER]));
	if (one[K_BASIC])
		json_object_set_new(def, "basic", json_pack("{s:s}", "user", one[K_BASIC]));
	if (one[K_QUERY])
		json_object_set_new(def, "query", json_string(one[K_QUERY]));
	return def;
}

/* The fields of arg into one[] and hosts: known keys, each once but
 * host, and those a definition needs. */
static int read_fields(const char *arg, const char *where, char **one, char ***hosts,
		       struct al_errors *errs)
{
	size_t before = al_errors_count(errs);
	const char *p = arg;
	int r;

	for (unsigned nth = 1; *p || nth == 1; nth++) {
		_cleanup_free_ char *key = NULL, *value = NULL;
		if ((r = next_field(&p, nth, &key, &value, where, errs)) < 0)
			return r;
		size_t k = 0;
		while (flag_keys[k] && strcmp(flag_keys[k], key) != 0)
			k++;
		/* The definition is JSON, whose strings are UTF-8: a value that
		 * is not would be dropped from it, not refused. */
		json_t *text = json_string(value);
		json_decref(text);
		if (!text)
			al_errors_add(errs, EINVAL, where, key, "the value is not valid UTF-8");
		else if (!flag_keys[k])
			al_errors_add(errs, EINVAL, where, key,
				      "unknown key (expected " KEY_LIST
				      "; fd and command sources, sigv4, body and the sandbox's "
				      "own variable or file are for a policy file's \"secrets\")");
		else if (k == K_HOST)
			al_strv_push(hosts, value);
		else if (one[k])
			al_errors_add(errs, EINVAL, where, key,
				      "given twice (only host= may be repeated)");
		else
			one[k] = TAKE_PTR(value);
	}
	if (!one[K_ID])
		al_errors_add(errs, EINVAL, where, "id",
			      "missing: id=NAME names the secret (and the sandbox's variable "
			      "that holds its placeholder)");
	if (!one[K_ENV] && !one[K_FILE])
		al_errors_add(errs, EINVAL, where, NULL,
			      "missing the value's source: env=VAR (airlock's own environment) or "
			      "file=PATH");
	else if (one[K_ENV] && one[K_FILE])
		al_errors_add(errs, EINVAL, where, "file",
			      "give one source, env= or file=, not both");
	if (!*hosts)
		al_errors_add(errs, EINVAL, where, "host",
			      "missing: host=HOST[:PORT] says where the value may be sent "
			      "(repeat it for more hosts)");
	int hows = !!one[K_HEADER] + !!one[K_BASIC] + !!one[K_QUERY];
	if (hows == 0)
		al_errors_add(errs, EINVAL, where, NULL,
			      "say how it is sent: header='Field-Name: template with {}', "
			      "basic=USER or query=PARAM");
	else if (hows > 1)
		al_errors_add(errs, EINVAL, where, NULL,
			      "give one of header=, basic= and query=, not %d", hows);
	return al_errors_count(errs) > before ? -EINVAL : 0;
}

int al_secret_flag_parse(const char *arg, struct al_secret_def **ret, struct al_errors *errs)
{
	_cleanup_free_ char *where = xasprintf("--secret %s", arg);
	_cleanup_(al_strv_freep) char **hosts = NULL;
	_cleanup_(al_errors_clear) struct al_errors tmp = {0};
	struct al_json_ctx c = {.file = where, .errs = &tmp};
	struct al_secret_def *d = NULL;
	char *one[K_N] = {0};
	int r;

	if ((r = read_fields(arg, where, one, &hosts, errs)) == 0) {
		/* The definition, read by the policy file's parser; its errors
		 * are said at the flag's keys. */
		json_t *def = definition(one, hosts);
		r = al_json_secret_def(&c, one[K_ID], def, "", false, &d);
		json_decref(def);
		for (size_t i = 0; i < tmp.n; i++)
			al_errors_add(errs, tmp.v[i].code, where, key_of_path(tmp.v[i].path), "%s",
				      tmp.v[i].message);
		if (r == 0 && tmp.n) /* not expected: every error fails the parse */
			r = -EINVAL;
	}
	for (size_t k = 0; k < K_N; k++)
		free(one[k]);
	if (r < 0) {
		if (d)
			al_secret_def_free(d);
		return r;
	}
	free(d->where);
	d->where = TAKE_PTR(where);
	*ret = d;
	return 0;
}
