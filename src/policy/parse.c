/* Policy file → model. Strict: unknown keys, wrong types, bad sizes and
 * relative paths are errors naming the file and the JSON path. Syntax errors
 * name line:column (from jansson). Nothing is created here.
 *
 * Every error is collected, not only the first: a parser goes on with the
 * next key or element after one fails, and a value with an error is not
 * stored. It stops early only where going on would mean nothing: not JSON,
 * not an object at the top, a version this build does not read, or a value
 * of the wrong type (its insides are not looked at). */
#include "policy/policy.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "policy/json.h"
#include "policy/limits.h"

static int parse_mount(struct al_json_ctx *c, const json_t *j, const char *path)
{
	static const char *const keys[] = {"host", "path", "mode", "exec", "copy", NULL};
	_cleanup_free_ char *host = NULL, *mpath = NULL, *mode = NULL;
	int exec = AL_UNSET, copy = 0, bad = 0;
	char sub[256];
	json_t *v;
	int r;

	if ((r = al_json_want(c, j, JSON_OBJECT, path, "an object")) < 0)
		return r;
	al_json_note(&bad, al_json_check_keys(c, j, path, keys));
	snprintf(sub, sizeof(sub), "%s.host", path);
	if (!(v = json_object_get(j, "host")))
		al_json_note(&bad,
			     al_json_fail(c, sub, "missing (the host file or directory to show)"));
	else
		al_json_note(&bad, al_json_abs_path(c, v, sub, &host));
	snprintf(sub, sizeof(sub), "%s.path", path);
	if ((v = json_object_get(j, "path")))
		al_json_note(&bad, al_json_abs_path(c, v, sub, &mpath));
	snprintf(sub, sizeof(sub), "%s.mode", path);
	if ((v = json_object_get(j, "mode")) &&
	    al_json_note(&bad, al_json_string(c, v, sub, &mode)) == 0 && strcmp(mode, "ro") != 0 &&
	    strcmp(mode, "rw") != 0)
		al_json_note(&bad,
			     al_json_fail(c, sub, "expected \"ro\" or \"rw\", got \"%s\"", mode));
	snprintf(sub, sizeof(sub), "%s.exec", path);
	if ((v = json_object_get(j, "exec")))
		al_json_note(&bad, al_json_bool(c, v, sub, &exec));
	snprintf(sub, sizeof(sub), "%s.copy", path);
	if ((v = json_object_get(j, "copy")) &&
	    al_json_note(&bad, al_json_bool(c, v, sub, &copy)) == 0 && copy && mode &&
	    strcmp(mode, "rw") == 0)
		al_json_note(
		    &bad, al_json_fail(c, sub,
				       "a copy is read-only: it cannot go with \"mode\": \"rw\""));
	if (bad < 0)
		return bad;
	/* Plan-time errors about this mount name the file too. */
	_cleanup_free_ char *origin = xasprintf("%s: %s", c->file, path);
	al_policy_add_mount(c->p, host, mpath ? mpath : host,
			    mode && strcmp(mode, "rw") == 0 ? AL_MOUNT_RW : AL_MOUNT_RO, exec,
			    origin);
	c->p->mounts[c->p->n_mounts - 1].copy = copy == 1;
	return 0;
}

static int parse_landlock(struct al_json_ctx *c, const json_t *v)
{
	_cleanup_free_ char *landlock = NULL;
	int r;

	if ((r = al_json_string(c, v, "filesystem.landlock", &landlock)) < 0)
		return r;
	if (strcmp(landlock, "required") == 0)
		c->p->landlock = AL_LANDLOCK_REQUIRED;
	else if (strcmp(landlock, "best-effort") == 0)
		c->p->landlock = AL_LANDLOCK_BEST_EFFORT;
	else
		return al_json_fail(c, "filesystem.landlock",
				    "expected \"required\" or \"best-effort\", got \"%s\"",
				    landlock);
	return 0;
}

/* filesystem.copy_in[i] / copy_out[i]: {"host": ..., "path": ...}. */
static int parse_copy(struct al_json_ctx *c, const json_t *j, bool in, const char *path)
{
	static const char *const keys[] = {"host", "path", NULL};
	_cleanup_free_ char *host = NULL, *spath = NULL, *origin = NULL;
	char sub[96];
	json_t *v;
	int r, bad = 0;

	if ((r = al_json_want(c, j, JSON_OBJECT, path, "an object")) < 0)
		return r;
	al_json_note(&bad, al_json_check_keys(c, j, path, keys));
	snprintf(sub, sizeof(sub), "%s.host", path);
	if (!(v = json_object_get(j, "host")))
		al_json_note(&bad,
			     al_json_fail(c, sub,
					  in ? "missing (the host file or directory to copy in)"
					     : "missing (the host directory to copy out to)"));
	else
		al_json_note(&bad, al_json_abs_path(c, v, sub, &host));
	snprintf(sub, sizeof(sub), "%s.path", path);
	if (!(v = json_object_get(j, "path")))
		al_json_note(&bad, al_json_fail(c, sub,
						in ? "missing (where in the sandbox to copy it)"
						   : "missing (what in the sandbox to copy out)"));
	else
		al_json_note(&bad, al_json_abs_path(c, v, sub, &spath));
	if (bad < 0)
		return bad;
	origin = xasprintf("%s: %s", c->file, path);
	al_policy_add_copy(c->p, in, host, spath, origin);
	return 0;
}

static int parse_copies(struct al_json_ctx *c, const json_t *j, bool in)
{
	const char *name = in ? "filesystem.copy_in" : "filesystem.copy_out";
	size_t i;
	json_t *e;
	int r, bad = 0;

	if ((r = al_json_want(c, j, JSON_ARRAY, name, "an array")) < 0)
		return r;
	json_array_foreach(j, i, e)
	{
		char sub[64];
		snprintf(sub, sizeof(sub), "%s[%zu]", name, i);
		al_json_note(&bad, parse_copy(c, e, in, sub));
	}
	return bad;
}

static int parse_filesystem(struct al_json_ctx *c, const json_t *j)
{
	static const char *const keys[] = {"system",   "mounts",  "workdir",  "scratch_exec",
					   "landlock", "copy_in", "copy_out", NULL};
	json_t *v;
	int r, bad = 0;

	if ((r = al_json_want(c, j, JSON_OBJECT, "filesystem", "an object")) < 0)
		return r;
	al_json_note(&bad, al_json_check_keys(c, j, "filesystem", keys));
	if ((v = json_object_get(j, "system")))
		al_json_note(
		    &bad, al_json_strings(c, v, "filesystem.system", true, false, &c->p->system));
	if ((v = json_object_get(j, "mounts")) &&
	    al_json_note(&bad, al_json_want(c, v, JSON_ARRAY, "filesystem.mounts", "an array")) ==
		0) {
		size_t i;
		json_t *e;
		json_array_foreach(v, i, e)
		{
			char sub[64];
			snprintf(sub, sizeof(sub), "filesystem.mounts[%zu]", i);
			al_json_note(&bad, parse_mount(c, e, sub));
		}
	}
	if ((v = json_object_get(j, "copy_in")))
		al_json_note(&bad, parse_copies(c, v, true));
	if ((v = json_object_get(j, "copy_out")))
		al_json_note(&bad, parse_copies(c, v, false));
	if ((v = json_object_get(j, "workdir")))
		al_json_note(&bad, al_json_abs_path(c, v, "filesystem.workdir", &c->p->workdir));
	if ((v = json_object_get(j, "scratch_exec")))
		al_json_note(&bad,
			     al_json_bool(c, v, "filesystem.scratch_exec", &c->p->scratch_exec));
	if ((v = json_object_get(j, "landlock")))
		al_json_note(&bad, parse_landlock(c, v));
	return bad;
}

static int parse_env(struct al_json_ctx *c, const json_t *j)
{
	const char *key;
	json_t *v;
	int r, bad = 0;

	if ((r = al_json_want(c, j, JSON_OBJECT, "env", "an object of NAME: \"value\"")) < 0)
		return r;
	json_object_foreach((json_t *)j, key, v)
	{
		char sub[320];
		snprintf(sub, sizeof(sub), "env.%s", key);
		if (!al_env_name_is_valid(key)) {
			al_json_note(
			    &bad, al_json_fail(c, sub,
					       "not a valid variable name (letters, digits, '_')"));
			continue;
		}
		if (al_json_note(&bad, al_json_want(c, v, JSON_STRING, sub, "a string")) < 0)
			continue;
		if (strlen(json_string_value(v)) != json_string_length(v))
			al_json_note(&bad, al_json_fail(c, sub, "value contains a NUL byte"));
		else
			al_policy_set_env(c->p, key, json_string_value(v));
	}
	return bad;
}

static int parse_kmem(struct al_json_ctx *c, const json_t *v)
{
	_cleanup_free_ char *kmem = NULL;
	int r;

	if ((r = al_json_string(c, v, "limits.kernel_memory", &kmem)) < 0)
		return r;
	if (strcmp(kmem, "enforced") == 0)
		c->p->kernel_memory = AL_KMEM_ENFORCED;
	else if (strcmp(kmem, "best-effort") == 0)
		c->p->kernel_memory = AL_KMEM_BEST_EFFORT;
	else
		return al_json_fail(c, "limits.kernel_memory",
				    "expected \"enforced\" or \"best-effort\", got \"%s\"", kmem);
	return 0;
}

/* The limits of one section ("limits", "network.limits",
 * "network.per_host") at path, from the table (limits.h); extra is one
 * more keys the section takes (limits.kernel_memory and limits.budget),
 * parsed by the caller. */
static int parse_limit_section(struct al_json_ctx *c, const json_t *j, const char *path,
			       const char *section, const char *const *extra)
{
	const char *keys[AL_OPL_COUNT + 4];
	int r, bad = 0;

	if ((r = al_json_want(c, j, JSON_OBJECT, path, "an object")) < 0)
		return r;
	size_t nk = al_limit_keys(section, keys);
	for (size_t i = 0; extra && extra[i] && nk < AL_OPL_COUNT + 3; i++) {
		keys[nk++] = extra[i];
		keys[nk] = NULL;
	}
	al_json_note(&bad, al_json_check_keys(c, j, path, keys));
	for (size_t i = 0; i < AL_OPL_COUNT; i++) {
		const struct al_limit_def *d = &al_limit_defs[i];
		json_t *v;
		char sub[96];
		if (strcmp(d->section, section) != 0 || !(v = json_object_get(j, d->key)))
			continue;
		snprintf(sub, sizeof(sub), "%s.%s", path, d->key);
		al_json_note(&bad, al_json_limit(c, v, sub, d, al_limit_field(c->p, d)));
	}
	return bad;
}

static int parse_limits(struct al_json_ctx *c, const json_t *j)
{
	static const char *const extra[] = {"kernel_memory", "budget", NULL};
	json_t *v;
	int bad = parse_limit_section(c, j, "limits", "limits", extra);

	if (json_is_object(j) && (v = json_object_get(j, "kernel_memory")))
		al_json_note(&bad, parse_kmem(c, v));
	if (json_is_object(j) && (v = json_object_get(j, "budget")))
		al_json_note(&bad, al_json_budget(c, v, "limits.budget", true, &c->p->budget));
	return bad;
}

/* network.allow: each rule checked as --allow checks it; a rule written
 * as an object carries options (cred.h). */
static int parse_allow(struct al_json_ctx *c, const json_t *v)
{
	struct al_error why = {0};
	size_t i;
	json_t *e;
	int r, bad = 0;

	if ((r = al_json_want(c, v, JSON_ARRAY, "network.allow",
			      "an array of rules (strings or objects)")) < 0)
		return r;
	json_array_foreach(v, i, e)
	{
		char sub[64];
		snprintf(sub, sizeof(sub), "network.allow[%zu]", i);
		if (json_is_object(e)) {
			struct al_rule_opts *o = NULL;
			if (al_json_note(&bad, al_json_rule_opts(c, e, sub, &o)) < 0)
				continue;
			al_strv_push(&c->p->net_allow, o->rule);
			al_policy_add_rule_opts(c->p, o);
			continue;
		}
		_cleanup_free_ char *rule = NULL;
		if (al_json_note(&bad, al_json_string(c, e, sub, &rule)) < 0)
			continue;
		if (al_policy_check_allow_rule(rule, &why) < 0)
			al_json_note(&bad, al_json_fail(c, sub, "%s", why.msg));
		else
			al_strv_push(&c->p->net_allow, rule);
	}
	if (!c->p->net_allow && bad == 0)
		c->p->net_allow = xcalloc(1, sizeof(char *));
	return bad;
}

static int parse_hosts(struct al_json_ctx *c, const json_t *v)
{
	struct al_error why = {0};
	const char *key;
	json_t *e;
	int r, bad = 0;

	if ((r = al_json_want(c, v, JSON_OBJECT, "network.hosts",
			      "an object of name: \"address\"")) < 0)
		return r;
	json_object_foreach((json_t *)v, key, e)
	{
		char sub[320];
		snprintf(sub, sizeof(sub), "network.hosts.%s", key);
		if (al_json_note(&bad,
				 al_json_want(c, e, JSON_STRING, sub, "an IP address string")) < 0)
			continue;
		if (al_policy_check_host_map(key, json_string_value(e), &why) < 0)
			al_json_note(&bad, al_json_fail(c, sub, "%s", why.msg));
		else
			al_policy_set_host(c->p, key, json_string_value(e));
	}
	return bad;
}

static int parse_network(struct al_json_ctx *c, const json_t *j)
{
	static const char *const keys[] = {"mode",     "allow",	   "hosts", "limits",
					   "per_host", "resolver", NULL};
	struct al_error why = {0};
	json_t *v;
	int r, bad = 0;

	if ((r = al_json_want(c, j, JSON_OBJECT, "network", "an object")) < 0)
		return r;
	al_json_note(&bad, al_json_check_keys(c, j, "network", keys));
	if ((v = json_object_get(j, "mode")) &&
	    al_json_note(&bad, al_json_string(c, v, "network.mode", &c->p->network_mode)) == 0 &&
	    strcmp(c->p->network_mode, "none") != 0 && strcmp(c->p->network_mode, "gateway") != 0)
		al_json_note(
		    &bad,
		    al_json_fail(c, "network.mode",
				 "expected \"none\" (loopback only) or \"gateway\", got \"%s\"",
				 c->p->network_mode));
	if ((v = json_object_get(j, "allow")))
		al_json_note(&bad, parse_allow(c, v));
	if ((v = json_object_get(j, "resolver")) &&
	    al_json_note(&bad, al_json_string(c, v, "network.resolver", &c->p->net_resolver)) ==
		0 &&
	    al_policy_check_resolver(c->p->net_resolver, &why) < 0)
		al_json_note(&bad, al_json_fail(c, "network.resolver", "%s", why.msg));
	if ((v = json_object_get(j, "limits")))
		al_json_note(&bad,
			     parse_limit_section(c, v, "network.limits", "network.limits", NULL));
	if ((v = json_object_get(j, "per_host")))
		al_json_note(
		    &bad, parse_limit_section(c, v, "network.per_host", "network.per_host", NULL));
	if ((v = json_object_get(j, "hosts")))
		al_json_note(&bad, parse_hosts(c, v));
	return bad;
}

static int parse_backend(struct al_json_ctx *c, const json_t *j)
{
	static const char *const keys[] = {"name", "language", NULL};
	json_t *v;
	int r, bad = 0;

	if ((r = al_json_want(c, j, JSON_OBJECT, "backend", "an object")) < 0)
		return r;
	al_json_note(&bad, al_json_check_keys(c, j, "backend", keys));
	if ((v = json_object_get(j, "name")))
		al_json_note(&bad, al_json_string(c, v, "backend.name", &c->p->backend));
	if ((v = json_object_get(j, "language")))
		al_json_note(&bad, al_json_string(c, v, "backend.language", &c->p->language));
	return bad;
}

/* "secrets" / "tokens": definitions (an object), or the names of an
 * operator policy's ones (an array); the engine says which is allowed. */
static int parse_secrets(struct al_json_ctx *c, const json_t *v, const char *path, bool token)
{
	_cleanup_(al_strv_freep) char **names = NULL;
	struct al_secret_def **defs = NULL;
	size_t n = 0;
	int r;

	if (json_is_array(v)) {
		if ((r = al_json_strings(c, v, path, false, false, &names)) < 0)
			return r;
		for (size_t i = 0; names[i]; i++) {
			_cleanup_free_ char *where = xasprintf("%s: %s[%zu]", c->file, path, i);
			al_policy_add_secret_name(c->p, names[i], where);
		}
		return 0;
	}
	if (!json_is_object(v))
		return al_json_fail(c, path,
				    "expected an object of definitions, or an array of the "
				    "names an operator policy defines, got %s",
				    al_json_type_name(v));
	r = al_json_secret_defs(c, v, path, token, &defs, &n);
	for (size_t i = 0; i < n; i++)
		al_policy_add_secret_def(c->p, defs[i]);
	free(defs);
	return r;
}

/* A version this build does not read stops the parse (its keys may mean
 * something else); a missing or mistyped one is reported and the rest is
 * read as version 1. */
static int parse_version(struct al_json_ctx *c, const json_t *v, bool *ret_stop)
{
	*ret_stop = false;
	if (!v)
		return al_json_fail(c, "version", "missing (this build reads \"version\": %d)",
				    AL_POLICY_VERSION);
	if (json_is_string(v))
		return al_json_fail(c, "version",
				    "the version is an integer: \"version\": %d, not a string",
				    AL_POLICY_VERSION);
	if (!json_is_integer(v))
		return al_json_fail(c, "version",
				    "the version is an integer (this build reads \"version\": %d)",
				    AL_POLICY_VERSION);
	if (json_integer_value(v) != AL_POLICY_VERSION) {
		*ret_stop = true;
		return al_json_fail(c, "version", "unsupported version (this build reads %d)",
				    AL_POLICY_VERSION);
	}
	return 0;
}

static int parse_root(struct al_json_ctx *c, const json_t *root)
{
	static const char *const keys[] = {
	    "version", "command", "hostname", "tty",	 "profile", "filesystem", "env",
	    "limits",  "network", "backend",  "secrets", "tokens",  "identity",	  NULL};
	json_t *v;
	bool stop;
	int bad = 0;

	if (!json_is_object(root))
		return al_json_fail(c, "(top level)", "expected an object, got %s",
				    al_json_type_name(root));
	al_json_note(&bad, al_json_check_keys(c, root, "", keys));
	if (al_json_note(&bad, parse_version(c, json_object_get(root, "version"), &stop)) < 0 &&
	    stop)
		return bad;
	if ((v = json_object_get(root, "command")))
		al_json_note(&bad, al_json_strings(c, v, "command", false, true, &c->p->command));
	if ((v = json_object_get(root, "hostname")) &&
	    al_json_note(&bad, al_json_string(c, v, "hostname", &c->p->hostname)) == 0 &&
	    !al_hostname_is_valid(c->p->hostname))
		al_json_note(&bad, al_json_fail(c, "hostname", "not a valid hostname: \"%s\"",
						c->p->hostname));
	if ((v = json_object_get(root, "profile")) &&
	    al_json_note(&bad, al_json_string(c, v, "profile", &c->p->profile)) == 0 &&
	    !c->p->profile[0])
		al_json_note(&bad, al_json_fail(c, "profile", "empty profile name"));
	if ((v = json_object_get(root, "tty")))
		al_json_note(&bad, al_json_bool(c, v, "tty", &c->p->tty));
	if ((v = json_object_get(root, "filesystem")))
		al_json_note(&bad, parse_filesystem(c, v));
	if ((v = json_object_get(root, "env")))
		al_json_note(&bad, parse_env(c, v));
	if ((v = json_object_get(root, "limits")))
		al_json_note(&bad, parse_limits(c, v));
	if ((v = json_object_get(root, "network")))
		al_json_note(&bad, parse_network(c, v));
	if ((v = json_object_get(root, "backend")))
		al_json_note(&bad, parse_backend(c, v));
	if ((v = json_object_get(root, "identity"))) {
		int mode = AL_HOST_IDS_UNSET;
		al_json_note(&bad, al_json_identity(c, v, "identity", &mode, &c->p->host_ids_base));
		c->p->host_ids = (enum al_host_ids_mode)mode;
	}
	if ((v = json_object_get(root, "secrets")))
		al_json_note(&bad, parse_secrets(c, v, "secrets", false));
	if ((v = json_object_get(root, "tokens")))
		al_json_note(&bad, parse_secrets(c, v, "tokens", true));
	return bad;
}

int al_policy_load_string_all(const char *name, const char *text, size_t len,
			      struct al_policy **ret, struct al_errors *errs)
{
	_cleanup_(al_policy_freep) struct al_policy *p = al_policy_new(name);
	struct al_json_ctx c = {.file = name, .p = p, .errs = errs};
	json_error_t jerr;
	json_t *root;
	int r;

	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return al_errors_add_syntax(errs, name, jerr.line, jerr.column, jerr.text);
	r = parse_root(&c, root);
	json_decref(root);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(p);
	return 0;
}

int al_policy_load_string(const char *name, const char *text, size_t len, struct al_policy **ret,
			  struct al_error *err)
{
	struct al_errors errs = {0};
	int r = al_policy_load_string_all(name, text, len, ret, &errs);

	if (r < 0)
		r = al_errors_first(&errs, 0, err);
	al_errors_clear(&errs);
	return r;
}

int al_policy_load_file_all(const char *path, struct al_policy **ret, struct al_errors *errs)
{
	_cleanup_fclose_ FILE *f = fopen(path, "re");
	_cleanup_free_ char *buf = NULL;
	size_t len = 0, cap = 0;
	struct al_error err = {0};

	if (!f) {
		al_error_setsys(&err, errno, "cannot open policy file %s", path);
		return al_errors_add_error(errs, &err);
	}
	for (;;) {
		if (cap - len < 4096) {
			cap = cap ? cap * 2 : 8192;
			if (cap > (16u << 20))
				return al_errors_add(errs, EFBIG, path, NULL,
						     "policy file larger than 16 MiB");
			buf = xrealloc(buf, cap);
		}
		size_t n = fread(buf + len, 1, cap - len, f);
		len += n;
		if (n == 0)
			break;
	}
	if (ferror(f)) {
		al_error_setsys(&err, EIO, "cannot read policy file %s", path);
		return al_errors_add_error(errs, &err);
	}
	return al_policy_load_string_all(path, buf, len, ret, errs);
}

int al_policy_load_file(const char *path, struct al_policy **ret, struct al_error *err)
{
	struct al_errors errs = {0};
	int r = al_policy_load_file_all(path, ret, &errs);

	if (r < 0)
		r = al_errors_first(&errs, 0, err);
	al_errors_clear(&errs);
	return r;
}
