/* Operator policy file → model (operator.h). Strict like the task policy's
 * parser (parse.c, with the same helpers: json.c): unknown keys, wrong
 * types, bad sizes, rules and paths are errors naming the file and the
 * JSON path, every one of them. Nothing on the host is looked at here. */
#include "policy/operator.h"

#include <errno.h>
#include <fnmatch.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "policy/engine.h"
#include "policy/json.h"
#include "policy/operator-cred.h"
#include "policy/policy.h"

#define PROFILE_NAME_MAX 64

/* Every backend the design has, weakest first (docs/backends.md says why
 * this order): process (no namespaces: landlock, seccomp, rlimits) below
 * native; wasm is native with a WebAssembly runtime inside (a capability
 * set of preopens, no sockets), so above it, but still the host's kernel
 * under both, so below gvisor's kernel of its own; a microVM's guest
 * kernel behind a VMM, then a full VM. Those this airlock has are
 * built[], which src/backend/backend.c's al_backends[] lists too. */
static const char *const backends[] = {"process", "native", "wasm", "gvisor",
				       "microvm", "vm",	    NULL};
static const char *const built_default[] = {"process", "native", "wasm", "gvisor",
					    "microvm", "vm",	 NULL};
static const char *const *built = built_default;

void al_backends_built(const char *const *names)
{
	built = names ? names : built_default;
}

const char *const *al_backend_names(bool only_built)
{
	return only_built ? built : backends;
}

const char *al_backend_names_text(void)
{
	static __thread char text[128];

	text[0] = '\0';
	for (size_t i = 0; built[i]; i++)
		snprintf(text + strlen(text), sizeof(text) - strlen(text), "%s%s", i ? ", " : "",
			 built[i]);
	return text;
}

static bool is_built(const char *name)
{
	for (size_t i = 0; built[i]; i++)
		if (strcmp(built[i], name) == 0)
			return true;
	return false;
}

int al_backend_strength(const char *name)
{
	for (int i = 0; backends[i]; i++)
		if (strcmp(backends[i], name) == 0)
			return is_built(name) ? i : -1;
	return -1;
}

/* The strongest backend this airlock has. */
static int strongest(void)
{
	int top = -1;

	for (size_t i = 0; built[i]; i++)
		if (al_backend_strength(built[i]) > top)
			top = al_backend_strength(built[i]);
	return top;
}

static int fail(struct al_json_ctx *c, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(struct al_json_ctx *c, const char *path, const char *fmt, ...)
{
	char what[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return al_json_fail(c, path, "%s", what);
}

/* A backend this airlock does not have, named at path: the message lists
 * those it has (in this call's buffer, which no other parser shares). */
static int not_built(struct al_json_ctx *c, const char *path, const char *name)
{
	char text[64] = "";
	size_t o = 0;

	for (size_t i = 0; built[i] && o < sizeof(text); i++)
		o += (size_t)snprintf(text + o, sizeof(text) - o, "%s%s", i ? ", " : "", built[i]);
	return fail(c, path, "backend \"%s\" is not one this airlock has (valid: %s)", name, text);
}

static struct al_op_path *add_path(struct al_op_path **v, size_t *n, const char *path,
				   const char *where)
{
	struct al_op_path *p;
	size_t l = strlen(path);

	*v = xrealloc(*v, (*n + 1) * sizeof(**v));
	p = &(*v)[(*n)++];
	*p = (struct al_op_path){0};
	p->path = xstrdup(path);
	if (l > 1 && p->path[l - 1] == '/')
		p->path[l - 1] = '\0';
	p->real = xstrdup(p->path);
	p->where = xstrdup(where);
	return p;
}

/* An array of host paths: absolute, clean but for one trailing '/'. */
static int parse_paths(struct al_json_ctx *c, const json_t *j, const char *path,
		       struct al_op_path **v, size_t *n)
{
	size_t i;
	json_t *e;
	int r, bad = 0;

	if ((r = al_json_want(c, j, JSON_ARRAY, path, "an array of absolute paths")) < 0)
		return r;
	json_array_foreach(j, i, e)
	{
		char sub[256];
		_cleanup_free_ char *s = NULL;
		snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
		if (al_json_note(&bad, al_json_string(c, e, sub, &s)) < 0)
			continue;
		size_t l = strlen(s);
		if (l > 1 && s[l - 1] == '/')
			s[l - 1] = '\0';
		if (!al_path_is_clean_absolute(s)) {
			al_json_note(&bad, fail(c, sub,
						"expected a clean absolute path (no '.', '..' or "
						"'//'), got \"%s\"",
						json_string_value(e)));
			continue;
		}
		add_path(v, n, s, sub);
	}
	return bad;
}

static int parse_filesystem(struct al_json_ctx *c, const json_t *j, const char *path,
			    struct al_op_profile *pr)
{
	static const char *const keys[] = {"ro", "rw", "never", "system", "linked_files", NULL};
	char sub[160];
	json_t *v;
	int r, bad = 0, linked = 0;

	if ((r = al_json_want(c, j, JSON_OBJECT, path, "an object")) < 0)
		return r;
	al_json_note(&bad, al_json_check_keys(c, j, path, keys));
	snprintf(sub, sizeof(sub), "%s.ro", path);
	if ((v = json_object_get(j, "ro")))
		al_json_note(&bad, parse_paths(c, v, sub, &pr->ro, &pr->n_ro));
	snprintf(sub, sizeof(sub), "%s.rw", path);
	if ((v = json_object_get(j, "rw")))
		al_json_note(&bad, parse_paths(c, v, sub, &pr->rw, &pr->n_rw));
	snprintf(sub, sizeof(sub), "%s.never", path);
	if ((v = json_object_get(j, "never")))
		al_json_note(&bad, parse_paths(c, v, sub, &pr->never, &pr->n_never));
	snprintf(sub, sizeof(sub), "%s.system", path);
	if ((v = json_object_get(j, "system")))
		al_json_note(&bad, al_json_strings(c, v, sub, true, false, &pr->system));
	snprintf(sub, sizeof(sub), "%s.linked_files", path);
	if ((v = json_object_get(j, "linked_files")) &&
	    al_json_note(&bad, al_json_bool(c, v, sub, &linked)) == 0)
		pr->linked_files = linked;
	return bad;
}

/* A never rule without ports means every port: "10.0.0.0/8" is
 * "10.0.0.0/8:*", a bare IPv6 CIDR gets brackets. */
static char *never_rule_text(const char *rule)
{
	size_t n = strlen(rule);
	bool bracketed = rule[0] == '[';
	const char *colon = strrchr(rule, ':');

	if (bracketed) {
		if (rule[n - 1] == ']')
			return xasprintf("%s:*", rule);
		return xstrdup(rule);
	}
	if (strchr(rule, ':') != colon) /* a bare IPv6 literal or CIDR */
		return xasprintf("[%s]:*", rule);
	return colon ? xstrdup(rule) : xasprintf("%s:*", rule);
}

enum rules_kind {
	RULES_TASK,  /* allow, always: rules a task could write */
	RULES_NEVER, /* any rule, every port by default; added to the list */
	RULES_ADDR,  /* hosts: addresses and CIDRs only, every port */
};

/* network.allow / always / never / hosts. */
static int parse_rules(struct al_json_ctx *c, const json_t *j, const char *path,
		       enum rules_kind kind, struct al_allowlist **list, char ***text,
		       struct al_op_profile *pr)
{
	bool never = kind != RULES_TASK;
	size_t i;
	json_t *e;
	int r, bad = 0;

	if ((r = al_json_want(c, j, JSON_ARRAY, path, "an array of rules")) < 0)
		return r;
	if (kind != RULES_NEVER || !*list) {
		al_allow_free(*list);
		*list = al_allow_new();
		al_strv_free(*text);
		*text = xcalloc(1, sizeof(char *));
	}
	json_array_foreach(j, i, e)
	{
		char sub[256];
		_cleanup_free_ char *s = NULL, *rule = NULL;
		struct al_error why = {0};
		snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
		if (kind == RULES_TASK && json_is_object(e)) {
			/* A rule with options (cred.h): they hold for every task
			 * rule within it. */
			struct al_rule_opts *o = NULL;
			if (al_json_note(&bad, al_json_rule_opts(c, e, sub, &o)) < 0)
				continue;
			s = xstrdup(o->rule);
			al_op_add_rule_opts(pr, o);
		} else if (al_json_note(&bad, al_json_string(c, e, sub, &s)) < 0) {
			continue;
		}
		rule = never ? never_rule_text(s) : xstrdup(s);
		bool dup = false;
		for (size_t k = 0; kind == RULES_NEVER && (*text)[k]; k++)
			dup |= strcmp((*text)[k], rule) == 0;
		if (dup) /* a default named again */
			continue;
		struct in6_addr net;
		unsigned prefix;
		if (kind == RULES_ADDR && (strchr(s, '*') || strstr(s, "]:") ||
					   (strchr(s, ':') == strrchr(s, ':') && strchr(s, ':')))) {
			al_json_note(&bad, fail(c, sub,
						"\"%s\": an address or CIDR without a port (a task "
						"maps names to it; the ports are the allow rules')",
						s));
			continue;
		}
		if ((!never && al_policy_check_allow_rule(rule, &why) < 0) ||
		    al_allow_add(*list, rule, &why) < 0) {
			al_json_note(&bad, fail(c, sub, "%s", why.msg));
			continue;
		}
		if (kind == RULES_ADDR &&
		    !al_allow_rule_network(al_allow_rule_at(*list, al_allow_count(*list) - 1), &net,
					   &prefix)) {
			al_json_note(&bad, fail(c, sub,
						"\"%s\" is a name: network.hosts lists addresses "
						"and CIDRs a task may map a name to",
						s));
			continue;
		}
		al_strv_push(text, rule);
	}
	return bad;
}

static int parse_network(struct al_json_ctx *c, const json_t *j, const char *path,
			 struct al_op_profile *pr)
{
	static const char *const keys[] = {"allow",	     "always",	 "never",
					   "never_defaults", "hosts",	 "resolvers",
					   "limits",	     "per_host", NULL};
	_cleanup_(al_strv_freep) char **allow_text = NULL;
	char sub[160];
	json_t *v;
	int r, bad = 0;

	if ((r = al_json_want(c, j, JSON_OBJECT, path, "an object")) < 0)
		return r;
	al_json_note(&bad, al_json_check_keys(c, j, path, keys));
	snprintf(sub, sizeof(sub), "%s.allow", path);
	if ((v = json_object_get(j, "allow")))
		al_json_note(&bad, parse_rules(c, v, sub, RULES_TASK, &pr->allow, &allow_text, pr));
	snprintf(sub, sizeof(sub), "%s.always", path);
	if ((v = json_object_get(j, "always")))
		al_json_note(&bad,
			     parse_rules(c, v, sub, RULES_TASK, &pr->always, &pr->always_text, pr));
	/* never adds to airlock's defaults unless never_defaults is false. */
	snprintf(sub, sizeof(sub), "%s.never_defaults", path);
	int keep = 1;
	if ((v = json_object_get(j, "never_defaults")) &&
	    al_json_note(&bad, al_json_bool(c, v, sub, &keep)) == 0 && !keep) {
		al_allow_free(TAKE_PTR(pr->never_net));
		al_strv_free(TAKE_PTR(pr->never_text));
		pr->n_never_net_default = 0;
	}
	snprintf(sub, sizeof(sub), "%s.never", path);
	if ((v = json_object_get(j, "never")))
		al_json_note(
		    &bad, parse_rules(c, v, sub, RULES_NEVER, &pr->never_net, &pr->never_text, pr));
	if (!pr->never_net) {
		pr->never_net = al_allow_new();
		pr->never_text = xcalloc(1, sizeof(char *));
	}
	snprintf(sub, sizeof(sub), "%s.hosts", path);
	if ((v = json_object_get(j, "hosts")))
		al_json_note(
		    &bad, parse_rules(c, v, sub, RULES_ADDR, &pr->hosts_to, &pr->hosts_text, pr));
	snprintf(sub, sizeof(sub), "%s.resolvers", path);
	if ((v = json_object_get(j, "resolvers")) &&
	    al_json_note(&bad, al_json_strings(c, v, sub, false, false, &pr->resolvers)) == 0)
		for (size_t i = 0; pr->resolvers[i]; i++) {
			struct al_error why = {0};
			if (al_policy_check_resolver(pr->resolvers[i], &why) < 0) {
				char el[192];
				snprintf(el, sizeof(el), "%s[%zu]", sub, i);
				al_json_note(&bad, fail(c, el, "%s", why.msg));
			}
		}
	return bad;
}

/* One limit's {"max": ..., "default": ...}. */
static int parse_bound(struct al_json_ctx *c, const json_t *j, const char *path,
		       const struct al_limit_def *d, struct al_op_bound *b)
{
	static const char *const keys[] = {"max", "default", NULL};
	const char *names[2] = {"max", "default"};
	uint64_t *out[2] = {&b->max, &b->def};
	int r, bad = 0;

	if ((r = al_json_want(c, j, JSON_OBJECT, path,
			      "an object with \"max\" (the ceiling) and/or \"default\"")) < 0)
		return r;
	al_json_note(&bad, al_json_check_keys(c, j, path, keys));
	for (size_t i = 0; i < 2; i++) {
		json_t *v = json_object_get(j, names[i]);
		char sub[192];
		if (!v)
			continue;
		snprintf(sub, sizeof(sub), "%s.%s", path, names[i]);
		r = al_json_limit(c, v, sub, d, out[i]);
		al_json_note(&bad, r);
	}
	if (bad == 0 && b->max && b->def > b->max) {
		char mx[48], df[48];
		al_limit_format(d, b->max, mx, sizeof(mx));
		al_limit_format(d, b->def, df, sizeof(df));
		al_json_note(&bad, fail(c, path, "default %s is over the ceiling %s", df, mx));
	}
	if (bad == 0 && d->min && ((b->max && b->max < d->min) || (b->def && b->def < d->min))) {
		char mn[48];
		al_limit_format(d, d->min, mn, sizeof(mn));
		al_json_note(&bad, fail(c, path, "below the least a run can have (%s)", mn));
	}
	return bad;
}

/* The limits of one section ("limits", "network.limits",
 * "network.per_host") under path. */
static int parse_limits(struct al_json_ctx *c, const json_t *j, const char *path,
			const char *section, struct al_op_profile *pr)
{
	const char *keys[AL_OPL_COUNT + 2];
	int r, bad = 0;

	if ((r = al_json_want(c, j, JSON_OBJECT, path, "an object")) < 0)
		return r;
	size_t nk = al_limit_keys(section, keys);
	if (strcmp(section, "limits") == 0) {
		keys[nk++] = "budget";
		keys[nk] = NULL;
		json_t *b = json_object_get(j, "budget");
		char sub[192];
		snprintf(sub, sizeof(sub), "%s.budget", path);
		if (b)
			al_json_note(&bad, al_op_parse_budget(c, b, sub, pr));
	}
	al_json_note(&bad, al_json_check_keys(c, j, path, keys));
	for (size_t i = 0; i < AL_OPL_COUNT; i++) {
		const struct al_limit_def *d = &al_limit_defs[i];
		json_t *v;
		char sub[192];
		if (strcmp(d->section, section) != 0 || !(v = json_object_get(j, d->key)))
			continue;
		snprintf(sub, sizeof(sub), "%s.%s", path, d->key);
		al_json_note(&bad, parse_bound(c, v, sub, d, &pr->limits[i]));
	}
	return bad;
}

static int parse_backend(struct al_json_ctx *c, const json_t *j, const char *path,
			 struct al_op_profile *pr)
{
	static const char *const keys[] = {"allowed", "minimum", "default", NULL};
	char sub[160];
	json_t *v;
	int r, bad = 0;

	if ((r = al_json_want(c, j, JSON_OBJECT, path, "an object")) < 0)
		return r;
	al_json_note(&bad, al_json_check_keys(c, j, path, keys));
	snprintf(sub, sizeof(sub), "%s.allowed", path);
	if ((v = json_object_get(j, "allowed")) &&
	    al_json_note(&bad, al_json_strings(c, v, sub, false, true, &pr->backends)) == 0)
		for (size_t i = 0; pr->backends[i]; i++)
			if (al_backend_strength(pr->backends[i]) < 0) {
				char el[192];
				snprintf(el, sizeof(el), "%s[%zu]", sub, i);
				al_json_note(&bad, not_built(c, el, pr->backends[i]));
			}
	const char *names[2] = {"minimum", "default"};
	char **out[2] = {&pr->backend_min, &pr->backend_default};
	for (size_t i = 0; i < 2; i++) {
		snprintf(sub, sizeof(sub), "%s.%s", path, names[i]);
		if ((v = json_object_get(j, names[i])) &&
		    al_json_note(&bad, al_json_string(c, v, sub, out[i])) == 0 &&
		    al_backend_strength(*out[i]) < 0)
			al_json_note(&bad, not_built(c, sub, *out[i]));
	}
	/* Every name in allowed is known now: the bounds must leave some
	 * backend, and one for a task that names none. */
	if (bad == 0) {
		int top = -1;
		bool native_ok = !pr->backends;
		for (size_t i = 0; pr->backends && pr->backends[i]; i++) {
			int st = al_backend_strength(pr->backends[i]);
			top = st > top ? st : top;
			native_ok |= strcmp(pr->backends[i], "native") == 0;
		}
		if (!pr->backends)
			top = strongest();
		if (pr->backend_min && al_backend_strength(pr->backend_min) > top)
			al_json_note(&bad,
				     fail(c, path, "minimum \"%s\" is above every allowed backend",
					  pr->backend_min));
		else if (!pr->backend_default &&
			 (!native_ok || (pr->backend_min && al_backend_strength(pr->backend_min) >
								al_backend_strength("native"))))
			al_json_note(&bad,
				     fail(c, path,
					  "a task that names no backend gets \"native\", which "
					  "these bounds refuse: give \"default\""));
	}
	if (bad == 0 && pr->backend_default) {
		snprintf(sub, sizeof(sub), "%s.default", path);
		bool listed = !pr->backends;
		for (size_t i = 0; pr->backends && pr->backends[i]; i++)
			listed |= strcmp(pr->backends[i], pr->backend_default) == 0;
		if (!listed)
			al_json_note(&bad, fail(c, sub, "\"%s\" is not in %s.allowed",
						pr->backend_default, path));
		else if (pr->backend_min && al_backend_strength(pr->backend_default) <
						al_backend_strength(pr->backend_min))
			al_json_note(&bad, fail(c, sub, "\"%s\" is below the minimum \"%s\"",
						pr->backend_default, pr->backend_min));
	}
	return bad;
}

/* An environment name pattern: a name, with * ? and [...] of fnmatch(3). */
static bool env_pattern_ok(const char *s)
{
	int depth = 0;

	if (!s[0] || strlen(s) > 256)
		return false;
	for (const char *p = s; *p; p++) {
		depth += *p == '[' ? 1 : *p == ']' ? -1 : 0;
		if (depth < 0 || depth > 1)
			return false;
	}
	if (depth)
		return false;
	for (const char *p = s; *p; p++)
		if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		      (*p >= '0' && *p <= '9') || strchr("_*?[]!-", *p)))
			return false;
	return true;
}

static int parse_env(struct al_json_ctx *c, const json_t *j, const char *path,
		     struct al_op_profile *pr)
{
	static const char *const keys[] = {"allow", "never", "pass", "never_defaults", NULL};
	_cleanup_(al_strv_freep) char **never = NULL;
	char ***out[3] = {&pr->env_allow, &never, &pr->env_pass};
	char sub[160];
	int r, bad = 0, keep = 1;
	json_t *v;

	if ((r = al_json_want(c, j, JSON_OBJECT, path, "an object")) < 0)
		return r;
	al_json_note(&bad, al_json_check_keys(c, j, path, keys));
	/* never adds to airlock's default list unless never_defaults is false. */
	snprintf(sub, sizeof(sub), "%s.never_defaults", path);
	if ((v = json_object_get(j, "never_defaults")) &&
	    al_json_note(&bad, al_json_bool(c, v, sub, &keep)) == 0 && !keep) {
		al_strv_free(pr->env_never);
		pr->env_never = xcalloc(1, sizeof(char *));
		pr->n_env_never_default = 0;
	}
	for (size_t k = 0; k < 3; k++) {
		v = json_object_get(j, keys[k]);
		snprintf(sub, sizeof(sub), "%s.%s", path, keys[k]);
		if (!v || al_json_note(&bad, al_json_strings(c, v, sub, false, false, out[k])) < 0)
			continue;
		if (k == 1)
			for (size_t i = 0; never[i]; i++)
				al_strv_push(&pr->env_never, never[i]);
		for (size_t i = 0; (*out[k])[i]; i++)
			if (!env_pattern_ok((*out[k])[i])) {
				char el[192];
				snprintf(el, sizeof(el), "%s[%zu]", sub, i);
				al_json_note(&bad, fail(c, el,
							"\"%s\" is not a name pattern (letters, "
							"digits, _, and * ? [...])",
							(*out[k])[i]));
			}
	}
	return bad;
}

static int parse_best_effort(struct al_json_ctx *c, const json_t *j, const char *path,
			     struct al_op_profile *pr)
{
	_cleanup_(al_strv_freep) char **v = NULL;
	int r;

	if ((r = al_json_strings(c, j, path, false, false, &v)) < 0)
		return r;
	for (size_t i = 0; v[i]; i++) {
		char el[192];
		snprintf(el, sizeof(el), "%s[%zu]", path, i);
		if (strcmp(v[i], "landlock") == 0)
			pr->best_effort |= AL_OP_WEAKEN_LANDLOCK;
		else if (strcmp(v[i], "kernel_memory") == 0)
			pr->best_effort |= AL_OP_WEAKEN_KERNEL_MEMORY;
		else
			r = fail(c, el, "expected \"landlock\" or \"kernel_memory\", got \"%s\"",
				 v[i]);
	}
	return r;
}

static bool profile_name_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > PROFILE_NAME_MAX)
		return false;
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || strchr("-_.", *p)))
			return false;
	return true;
}

static int parse_profile(struct al_json_ctx *c, const char *name, const json_t *j,
			 struct al_op_profile *pr)
{
	static const char *const keys[] = {"filesystem", "network",	"limits",      "backend",
					   "env",	 "best_effort", "description", "secrets",
					   "tokens",	 "identity",	NULL};
	char path[128], sub[192];
	json_t *v, *nl;
	int r, bad = 0;

	snprintf(path, sizeof(path), "profiles.%s", name);
	al_op_profile_defaults(pr, name, path);
	if ((r = al_json_want(c, j, JSON_OBJECT, path, "an object (a profile)")) < 0)
		return r;
	al_json_note(&bad, al_json_check_keys(c, j, path, keys));
	snprintf(sub, sizeof(sub), "%s.description", path);
	_cleanup_free_ char *desc = NULL;
	if ((v = json_object_get(j, "description")))
		al_json_note(&bad, al_json_string(c, v, sub, &desc));
	snprintf(sub, sizeof(sub), "%s.filesystem", path);
	if ((v = json_object_get(j, "filesystem")))
		al_json_note(&bad, parse_filesystem(c, v, sub, pr));
	snprintf(sub, sizeof(sub), "%s.network", path);
	if ((v = json_object_get(j, "network")) &&
	    (al_json_note(&bad, parse_network(c, v, sub, pr)) == 0 || json_is_object(v))) {
		snprintf(sub, sizeof(sub), "%s.network.limits", path);
		if ((nl = json_object_get(v, "limits")))
			al_json_note(&bad, parse_limits(c, nl, sub, "network.limits", pr));
		snprintf(sub, sizeof(sub), "%s.network.per_host", path);
		if ((nl = json_object_get(v, "per_host")))
			al_json_note(&bad, parse_limits(c, nl, sub, "network.per_host", pr));
	}
	snprintf(sub, sizeof(sub), "%s.limits", path);
	if ((v = json_object_get(j, "limits")))
		al_json_note(&bad, parse_limits(c, v, sub, "limits", pr));
	snprintf(sub, sizeof(sub), "%s.backend", path);
	if ((v = json_object_get(j, "backend")))
		al_json_note(&bad, parse_backend(c, v, sub, pr));
	snprintf(sub, sizeof(sub), "%s.env", path);
	if ((v = json_object_get(j, "env")))
		al_json_note(&bad, parse_env(c, v, sub, pr));
	snprintf(sub, sizeof(sub), "%s.best_effort", path);
	if ((v = json_object_get(j, "best_effort")))
		al_json_note(&bad, parse_best_effort(c, v, sub, pr));
	snprintf(sub, sizeof(sub), "%s.identity", path);
	if ((v = json_object_get(j, "identity")))
		al_json_note(&bad, al_json_identity(c, v, sub, &pr->host_ids, &pr->host_ids_base));
	al_json_note(&bad, al_op_parse_grants(c, j, path, pr));
	return bad;
}

static int parse_root(struct al_json_ctx *c, const json_t *root)
{
	static const char *const keys[] = {"version",	  "profiles", "decider",
					   "description", "secrets",  "tokens",
					   "serve",	  "oci",      NULL};
	const json_t *v, *profiles;
	const char *name;
	json_t *e;
	int bad = 0;

	if (!json_is_object(root))
		return fail(c, "(top level)", "expected an object, got %s",
			    al_json_type_name(root));
	al_json_note(&bad, al_json_check_keys(c, root, "", keys));
	v = json_object_get(root, "version");
	if (!v)
		al_json_note(&bad, fail(c, "version", "missing (this build reads \"version\": %d)",
					AL_OPERATOR_VERSION));
	else if (!json_is_integer(v))
		al_json_note(&bad, fail(c, "version",
					"the version is an integer (this build reads "
					"\"version\": %d)",
					AL_OPERATOR_VERSION));
	else if (json_integer_value(v) != AL_OPERATOR_VERSION)
		return fail(c, "version", "unsupported version (this build reads %d)",
			    AL_OPERATOR_VERSION);
	if ((v = json_object_get(root, "description")) && !json_is_string(v))
		al_json_note(&bad, fail(c, "description", "expected a string"));
	if ((v = json_object_get(root, "decider")))
		al_json_note(&bad, al_op_parse_decider(c, v));
	al_json_note(&bad, al_op_parse_secrets(c, root));
	profiles = json_object_get(root, "profiles");
	if (!profiles)
		return fail(c, "profiles",
			    "missing (at least \"default\", the profile a task that names none "
			    "gets, or the profiles tasks may name)");
	if (al_json_note(&bad, al_json_want(c, profiles, JSON_OBJECT, "profiles",
					    "an object of name: profile")) < 0)
		return bad;
	if (json_object_size(profiles) == 0)
		al_json_note(&bad, fail(c, "profiles", "no profile: every run would be refused"));
	c->op->profiles = xcalloc(json_object_size(profiles) + 1, sizeof(*c->op->profiles));
	json_object_foreach((json_t *)profiles, name, e)
	{
		if (!profile_name_ok(name)) {
			char sub[96];
			snprintf(sub, sizeof(sub), "profiles.%.64s", name);
			al_json_note(&bad, fail(c, sub,
						"a profile's name is 1 to 64 letters, digits, '-', "
						"'_' or '.'"));
			continue;
		}
		al_json_note(&bad,
			     parse_profile(c, name, e, &c->op->profiles[c->op->n_profiles++]));
	}
	if ((v = json_object_get(root, "serve")))
		al_json_note(&bad, al_op_parse_serve(c, v));
	if ((v = json_object_get(root, "oci")))
		al_json_note(&bad, al_op_parse_oci(c, v));
	return bad;
}

int al_operator_parse(const char *name, const char *text, size_t len, struct al_operator **ret,
		      struct al_errors *errs)
{
	_cleanup_(al_operator_freep) struct al_operator *op = xcalloc(1, sizeof(*op));
	struct al_json_ctx c = {.file = name, .errs = errs, .op = op};
	json_error_t jerr;
	json_t *root;
	int r;

	op->file = xstrdup(name);
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		/* Not jansson's "near 'TOKEN'": a file named by a flag is read
		 * as root, and its bytes are not the caller's to see. */
		char *near = strstr(jerr.text, " near ");
		if (near)
			*near = '\0';
		return al_errors_add_syntax(errs, name, jerr.line, jerr.column, jerr.text);
	}
	r = parse_root(&c, root);
	json_decref(root);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(op);
	return 0;
}
