/* The operator policy's "serve" section (operator.h): who may use the
 * daemon (airlock serve) and with which profiles, the Unix socket's group,
 * and how many ready sandboxes the warm pool keeps per profile.
 *
 *   "serve": {
 *     "socket_group": "airlock",
 *     "identities": {
 *       "uid:1000":      {"profiles": ["default", "web"], "default": "web"},
 *       "group:analysts": {"profiles": ["default"]},
 *       "token:alice":   {"profiles": ["default"]}
 *     },
 *     "pool": {"default": 4,
 *              "web": {"count": 2, "request": {"network": {"hosts": {...}}}}}
 *   }
 *
 * Parsed strictly after the profiles (every name must be one of them);
 * groups are resolved by the loader (al_op_serve_resolve), never here. */
#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "policy/operator-cred.h"
#include "policy/policy.h"

#define fail	     al_json_fail
#define WHO_NAME_MAX 63
#define UID_MAX_OK   4294967294ull /* (uid_t)-1 is no uid */

void al_op_serve_clear(struct al_op_serve *s)
{
	for (size_t i = 0; i < s->n_ids; i++) {
		struct al_op_identity *e = &s->ids[i];
		free(e->key);
		free(e->name);
		al_strv_free(e->profiles);
		free(e->def);
		free(e->where);
	}
	free(s->ids);
	for (size_t i = 0; i < s->n_pool; i++) {
		free(s->pool[i].profile);
		free(s->pool[i].request);
	}
	free(s->pool);
	free(s->socket_group);
	*s = (struct al_op_serve){0};
}

/* A group's or token's name: letters, digits, '.', '_', '-' (and '@' for
 * tokens, as the token file allows), not starting with '-'. */
static bool who_name_ok(const char *s, bool token)
{
	if (!*s || *s == '-' || strlen(s) > WHO_NAME_MAX)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || strchr("._-", *s) || (token && *s == '@')))
			return false;
	return true;
}

/* "uid:N", "group:NAME" or "token:NAME" into e; false when it is none. */
static bool parse_key(const char *key, struct al_op_identity *e)
{
	if (strncmp(key, "uid:", 4) == 0) {
		const char *d = key + 4;
		char *end;
		if (*d < '0' || *d > '9' || strlen(d) > 10)
			return false;
		errno = 0;
		unsigned long long v = strtoull(d, &end, 10);
		if (errno || *end || v > UID_MAX_OK)
			return false;
		e->kind = AL_OP_WHO_UID;
		e->uid = (uid_t)v;
		return true;
	}
	if (strncmp(key, "group:", 6) == 0 && who_name_ok(key + 6, false)) {
		e->kind = AL_OP_WHO_GROUP;
		e->name = xstrdup(key + 6);
		return true;
	}
	if (strncmp(key, "token:", 6) == 0 && who_name_ok(key + 6, true)) {
		e->kind = AL_OP_WHO_TOKEN;
		e->name = xstrdup(key + 6);
		return true;
	}
	return false;
}

static bool has_profile(const struct al_operator *op, const char *name)
{
	return al_operator_profile(op, name) != NULL;
}

static bool listed(char *const *v, const char *s)
{
	for (size_t i = 0; v && v[i]; i++)
		if (strcmp(v[i], s) == 0)
			return true;
	return false;
}

static int parse_identity(struct al_json_ctx *c, const char *key, const json_t *j,
			  struct al_op_identity *e)
{
	static const char *const keys[] = {"profiles", "default", NULL};
	const json_t *v;
	int bad = 0;

	e->key = xstrdup(key);
	e->where = xasprintf("serve.identities.%s", key);
	if (!parse_key(key, e))
		return fail(c, e->where,
			    "an identity is \"uid:N\" (a Unix-socket peer's uid), \"group:NAME\" "
			    "(a peer in that Unix group) or \"token:NAME\" (a bearer token of "
			    "--token-file), the name of letters, digits, '.', '_', '-'");
	if (al_json_want(c, j, JSON_OBJECT, e->where, "an object") < 0)
		return -EINVAL;
	al_json_note(&bad, al_json_check_keys(c, j, e->where, keys));
	_cleanup_free_ char *pp = xasprintf("%s.profiles", e->where);
	if (!(v = json_object_get(j, "profiles")))
		return fail(c, pp, "missing: the profiles this identity may use");
	if (al_json_note(&bad, al_json_strings(c, v, pp, false, true, &e->profiles)) < 0)
		return bad;
	if (!e->profiles || !e->profiles[0])
		return fail(c, pp, "empty: give at least one profile (or leave the identity out)");
	for (size_t i = 0; e->profiles[i]; i++)
		if (!has_profile(c->op, e->profiles[i]))
			al_json_note(&bad, fail(c, pp, "\"%s\": no such profile in \"profiles\"",
						e->profiles[i]));
	if ((v = json_object_get(j, "default"))) {
		_cleanup_free_ char *dp = xasprintf("%s.default", e->where);
		if (al_json_note(&bad, al_json_string(c, v, dp, &e->def)) == 0 &&
		    !listed(e->profiles, e->def))
			al_json_note(
			    &bad,
			    fail(c, dp, "\"%s\" is not one of this identity's profiles", e->def));
	} else {
		/* "default" when granted, else the first listed. */
		e->def = xstrdup(listed(e->profiles, AL_OPERATOR_PROFILE) ? AL_OPERATOR_PROFILE
									  : e->profiles[0]);
	}
	return bad;
}

/* A pool's task request (serve.pool.NAME.request): what each of its
 * sandboxes is made from instead of {} (the profile is the pool's name).
 * Checked as a task policy now, so that a bad one stops the daemon's start
 * and `airlock check` names it. A pool's sandbox holds no credentials
 * (docs/pool.md): no secrets, and no command (execs come later). */
static int parse_pool_request(struct al_json_ctx *c, const json_t *j, const char *sub, char **ret)
{
	_cleanup_(al_errors_clear) struct al_errors errs = {0};
	struct al_policy *p = NULL;
	int bad = 0;

	if (al_json_want(c, j, JSON_OBJECT, sub, "an object: a task request") < 0)
		return -EINVAL;
	for (const char *const *k = (const char *const[]){"profile", "secrets", "command", NULL};
	     *k; k++)
		if (json_object_get(j, *k))
			al_json_note(&bad, fail(c, sub, "\"%s\" has no place here (%s)", *k,
						strcmp(*k, "profile") == 0
						    ? "the profile is the pool's name"
						: strcmp(*k, "secrets") == 0
						    ? "a pool's sandbox holds no credentials"
						    : "a pool's sandbox runs no command"));
	json_t *copy = json_deep_copy(j);
	if (!json_object_get(copy, "version"))
		json_object_set_new(copy, "version", json_integer(1));
	char *text = json_dumps(copy, JSON_COMPACT);
	json_decref(copy);
	if (!text)
		return fail(c, sub, "cannot be written as JSON");
	if (!bad && al_policy_load_string_all(sub, text, strlen(text), &p, &errs) < 0) {
		al_json_note(&bad, fail(c, sub, "not a task request: %s",
					errs.n ? errs.v[0].message : "bad"));
	}
	al_policy_free(p);
	if (bad) {
		free(text);
		return bad;
	}
	*ret = text;
	return 0;
}

/* serve.pool: profile -> count, or {"count": N, "request": {...}}. */
static int parse_pool(struct al_json_ctx *c, const json_t *j, struct al_op_serve *s)
{
	static const char *const keys[] = {"count", "request", NULL};
	const char *name;
	json_t *v;
	int bad = 0;

	if (al_json_want(c, j, JSON_OBJECT, "serve.pool",
			 "an object of profile: count or {\"count\", \"request\"}") < 0)
		return -EINVAL;
	s->pool = xcalloc(json_object_size(j) + 1, sizeof(*s->pool));
	json_object_foreach((json_t *)j, name, v)
	{
		_cleanup_free_ char *sub = xasprintf("serve.pool.%.64s", name);
		_cleanup_free_ char *subc = xasprintf("%s.count", sub);
		_cleanup_free_ char *subr = xasprintf("%s.request", sub);
		char *request = NULL;
		const json_t *n_json = v;
		uint64_t n = 0;
		if (!has_profile(c->op, name)) {
			al_json_note(&bad, fail(c, sub, "no such profile in \"profiles\""));
			continue;
		}
		if (json_is_object(v)) {
			if (al_json_note(&bad, al_json_check_keys(c, v, sub, keys)) < 0)
				continue;
			n_json = json_object_get(v, "count");
			if (!n_json) {
				al_json_note(&bad, fail(c, subc, "is required"));
				continue;
			}
			if (json_object_get(v, "request") &&
			    al_json_note(&bad, parse_pool_request(c, json_object_get(v, "request"),
								  subr, &request)) < 0)
				continue;
		}
		if (!(json_is_integer(n_json) && json_integer_value(n_json) == 0) &&
		    al_json_note(&bad, al_json_count(c, n_json, n_json == v ? sub : subc,
						     AL_OP_POOL_MAX, &n)) < 0) {
			free(request);
			continue;
		}
		s->pool[s->n_pool].profile = xstrdup(name);
		s->pool[s->n_pool].request = request;
		s->pool[s->n_pool++].count = (unsigned)n;
	}
	return bad;
}

int al_op_parse_serve(struct al_json_ctx *c, const json_t *j)
{
	static const char *const keys[] = {"socket_group", "identities", "pool", NULL};
	struct al_op_serve *s = &c->op->serve;
	const json_t *v;
	const char *key;
	json_t *e;
	int bad = 0;

	if (al_json_want(c, j, JSON_OBJECT, "serve", "an object") < 0)
		return -EINVAL;
	s->set = true;
	al_json_note(&bad, al_json_check_keys(c, j, "serve", keys));
	if ((v = json_object_get(j, "socket_group")) &&
	    al_json_note(&bad, al_json_string(c, v, "serve.socket_group", &s->socket_group)) == 0 &&
	    !who_name_ok(s->socket_group, false))
		al_json_note(&bad, fail(c, "serve.socket_group",
					"\"%s\" is not a group's name (letters, digits, '.', '_', "
					"'-')",
					s->socket_group));
	if ((v = json_object_get(j, "identities")) &&
	    al_json_note(&bad, al_json_want(c, v, JSON_OBJECT, "serve.identities",
					    "an object of identity: {\"profiles\": [...]}")) == 0) {
		s->ids = xcalloc(json_object_size(v) + 1, sizeof(*s->ids));
		json_object_foreach((json_t *)v, key, e)
		    al_json_note(&bad, parse_identity(c, key, e, &s->ids[s->n_ids++]));
	}
	if ((v = json_object_get(j, "pool")))
		al_json_note(&bad, parse_pool(c, v, s));
	return bad;
}

void al_op_serve_resolve(struct al_operator *op)
{
	for (size_t i = 0; i < op->serve.n_ids; i++) {
		struct al_op_identity *e = &op->serve.ids[i];
		struct group g, *res = NULL;
		char buf[16384];
		if (e->kind != AL_OP_WHO_GROUP)
			continue;
		e->gid_known = getgrnam_r(e->name, &g, buf, sizeof(buf), &res) == 0 && res;
		if (e->gid_known)
			e->gid = res->gr_gid;
	}
}

static bool matches(const struct al_op_identity *e, const struct al_identity *who)
{
	switch (e->kind) {
	case AL_OP_WHO_UID:
		return !who->token && who->uid == e->uid;
	case AL_OP_WHO_GROUP:
		if (who->token || !e->gid_known)
			return false;
		for (size_t i = 0; i < who->n_gids; i++)
			if (who->gids[i] == e->gid)
				return true;
		return false;
	case AL_OP_WHO_TOKEN:
		return who->token && strcmp(who->token, e->name) == 0;
	}
	return false;
}

char **al_op_serve_grants(const struct al_operator *op, const struct al_identity *who, char **def)
{
	const struct al_op_identity *first = NULL, *own = NULL;
	char **names = NULL;

	*def = NULL;
	for (size_t i = 0; i < op->serve.n_ids; i++) {
		const struct al_op_identity *e = &op->serve.ids[i];
		if (!matches(e, who))
			continue;
		if (!first)
			first = e;
		if (e->kind != AL_OP_WHO_GROUP && !own)
			own = e;
		for (size_t k = 0; e->profiles[k]; k++)
			if (!listed(names, e->profiles[k]))
				al_strv_push(&names, e->profiles[k]);
	}
	if (first) {
		/* Its own entry's default first (uid or token), else the
		 * first group's in the file's order. */
		*def = xstrdup((own ? own : first)->def);
		return names;
	}
	if (!who->token && who->uid == 0) {
		for (size_t i = 0; i < op->n_profiles; i++)
			al_strv_push(&names, op->profiles[i].name);
		*def = xstrdup(AL_OPERATOR_PROFILE);
	}
	return names;
}

const char *al_identity_text(const struct al_identity *who, char *buf, size_t len)
{
	if (who->token)
		snprintf(buf, len, "token:%s", who->token);
	else
		snprintf(buf, len, "uid:%u", (unsigned)who->uid);
	return buf;
}

unsigned al_op_serve_pool(const struct al_operator *op, const char *profile)
{
	for (size_t i = 0; i < op->serve.n_pool; i++)
		if (strcmp(op->serve.pool[i].profile, profile) == 0)
			return op->serve.pool[i].count;
	return 0;
}

int al_op_parse_oci(struct al_json_ctx *c, const json_t *j)
{
	static const char *const keys[] = {"hooks", "profiles", NULL};
	struct al_op_oci *o = &c->op->oci;
	const json_t *v;
	int bad = 0, hooks = 0;

	if (al_json_want(c, j, JSON_OBJECT, "oci", "an object") < 0)
		return -EINVAL;
	al_json_note(&bad, al_json_check_keys(c, j, "oci", keys));
	if ((v = json_object_get(j, "hooks")) &&
	    al_json_note(&bad, al_json_bool(c, v, "oci.hooks", &hooks)) == 0)
		o->hooks = hooks > 0;
	if ((v = json_object_get(j, "profiles")) &&
	    al_json_note(&bad, al_json_strings(c, v, "oci.profiles", false, false, &o->profiles)) ==
		0)
		for (size_t i = 0; o->profiles && o->profiles[i]; i++)
			if (!al_operator_profile(c->op, o->profiles[i]))
				al_json_note(&bad, al_json_fail(c, "oci.profiles",
								"\"%s\" is not a profile of this "
								"policy",
								o->profiles[i]));
	return bad;
}
