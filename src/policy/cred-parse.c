/* Parsers for secrets, tokens, allow-rule options and the budget
 * (cred.h), shared by the task policy's parser and the operator's. Strict
 * like the rest: every key known, every value checked, every error said. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "net/reqrule.h"
#include "policy/cred.h"
#include "policy/json.h"
#include "policy/policy.h"

#define SECRET_NAME_MAX	       64
#define COMMAND_TIMEOUT_MS     10000 /* a source command's default */
#define COMMAND_TIMEOUT_MAX_MS 300000
#define TOKEN_TTL_MS	       15000

static bool is_token(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!al_is_tchar(*s))
			return false;
	return true;
}

static bool is_secret_name(const char *s)
{
	size_t n = strlen(s);
	return n > 0 && n <= SECRET_NAME_MAX && al_env_name_is_valid(s);
}

/* "Name: template" with one "{}" in the template. */
static int parse_header_tmpl(struct al_json_ctx *c, const json_t *v, const char *path,
			     struct al_secret_def *d)
{
	_cleanup_free_ char *s = NULL;
	int r;

	if ((r = al_json_string(c, v, path, &s)) < 0)
		return r;
	char *colon = strchr(s, ':');
	if (!colon || colon == s)
		return al_json_fail(c, path,
				    "expected \"Field-Name: template with {}\", e.g. "
				    "\"Authorization: Bearer {}\"");
	*colon = '\0';
	if (!is_token(s))
		return al_json_fail(c, path, "\"%s\" is not a header field name", s);
	const char *t = colon + 1;
	while (*t == ' ' || *t == '\t')
		t++;
	for (const char *q = t; *q; q++)
		if ((unsigned char)*q < 0x20 || *q == 0x7f)
			return al_json_fail(c, path, "the template has a control character");
	const char *brace = strstr(t, "{}");
	if (!brace || strstr(brace + 2, "{}"))
		return al_json_fail(c, path,
				    "the template needs exactly one \"{}\" where the value goes");
	if (strcasecmp(s, "Host") == 0 || strcasecmp(s, "Content-Length") == 0 ||
	    strcasecmp(s, "Transfer-Encoding") == 0 || strcasecmp(s, "Connection") == 0)
		return al_json_fail(c, path, "the %s field cannot carry a secret", s);
	d->header = xstrdup(s);
	d->tmpl = xstrdup(t);
	return 0;
}

static int parse_source(struct al_json_ctx *c, const json_t *j, const char *path,
			struct al_secret_source *src)
{
	static const char *const keys[] = {"env", "file", "fd", "command", "timeout", NULL};
	int r, bad = 0, kinds = 0;
	char sub[384];
	json_t *v;

	if ((r = al_json_want(c, j, JSON_OBJECT, path,
			      "an object: {\"env\": NAME}, {\"file\": PATH}, {\"fd\": N} or "
			      "{\"command\": [ARGV]}")) < 0)
		return r;
	al_json_note(&bad, al_json_check_keys(c, j, path, keys));
	if ((v = json_object_get(j, "env"))) {
		kinds++;
		snprintf(sub, sizeof(sub), "%s.env", path);
		src->kind = AL_SOURCE_ENV;
		if (al_json_note(&bad, al_json_string(c, v, sub, &src->env)) == 0 &&
		    !al_env_name_is_valid(src->env))
			al_json_note(&bad,
				     al_json_fail(c, sub, "not a variable name: \"%s\"", src->env));
	}
	if ((v = json_object_get(j, "file"))) {
		kinds++;
		snprintf(sub, sizeof(sub), "%s.file", path);
		src->kind = AL_SOURCE_FILE;
		al_json_note(&bad, al_json_abs_path(c, v, sub, &src->file));
	}
	if ((v = json_object_get(j, "fd"))) {
		kinds++;
		snprintf(sub, sizeof(sub), "%s.fd", path);
		src->kind = AL_SOURCE_FD;
		if (!json_is_integer(v) || json_integer_value(v) < 3 ||
		    json_integer_value(v) > 65535)
			al_json_note(&bad,
				     al_json_fail(c, sub,
						  "expected a descriptor number from 3 to "
						  "65535 (0, 1 and 2 are the command's stdio)"));
		else
			src->fd = (int)json_integer_value(v);
	}
	if ((v = json_object_get(j, "command"))) {
		kinds++;
		snprintf(sub, sizeof(sub), "%s.command", path);
		src->kind = AL_SOURCE_COMMAND;
		if (al_json_note(&bad, al_json_strings(c, v, sub, false, true, &src->argv)) == 0 &&
		    src->argv[0][0] != '/')
			al_json_note(&bad,
				     al_json_fail(c, sub,
						  "the command is run without a search path: name "
						  "it by its absolute path, not \"%s\"",
						  src->argv[0]));
	}
	snprintf(sub, sizeof(sub), "%s.timeout", path);
	src->timeout_ms = COMMAND_TIMEOUT_MS;
	if ((v = json_object_get(j, "timeout"))) {
		if (src->kind != AL_SOURCE_COMMAND)
			al_json_note(&bad, al_json_fail(c, sub, "only a command has a timeout"));
		else if (al_json_note(&bad, al_json_duration(c, v, sub, &src->timeout_ms)) == 0 &&
			 src->timeout_ms > COMMAND_TIMEOUT_MAX_MS)
			al_json_note(&bad, al_json_fail(c, sub, "at most 300s"));
	}
	if (kinds != 1 && bad == 0)
		return al_json_fail(c, path,
				    kinds ? "give one source, not %d"
					  : "missing: one of env, file, fd or command%.0d",
				    kinds);
	return bad;
}

static int parse_hosts(struct al_json_ctx *c, const json_t *v, const char *path, bool token,
		       char ***out)
{
	struct al_error why = {0};
	int r, bad = 0;

	if ((r = al_json_strings(c, v, path, false, true, out)) < 0)
		return r;
	for (size_t i = 0; (*out)[i]; i++) {
		char sub[384];
		snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
		if (al_policy_check_allow_rule((*out)[i], &why) < 0) {
			al_json_note(&bad, al_json_fail(c, sub, "%s", why.msg));
			continue;
		}
		/* A token's audience is its hosts' names: each must be one. */
		struct al_host h;
		const char *colon = strrchr((*out)[i], ':');
		size_t len = colon && !strchr((*out)[i], ']') && strchr((*out)[i], ':') == colon
				 ? (size_t)(colon - (*out)[i])
				 : strlen((*out)[i]);
		if (token &&
		    (al_host_parse((*out)[i], len, &h, NULL) < 0 || h.kind != AL_HOST_NAME))
			al_json_note(
			    &bad, al_json_fail(c, sub,
					       "a token's hosts are its audience: each must be "
					       "one host name (no wildcard, address or network)"));
	}
	return bad;
}

/* The presentation: header, basic, query, sigv4 (at most one), body. */
static int parse_how(struct al_json_ctx *c, const json_t *j, const char *path,
		     struct al_secret_def *d)
{
	static const char *const hows[] = {"header", "basic", "query", "sigv4", NULL};
	char sub[384];
	int bad = 0, n = 0, b = 0;
	json_t *v;

	for (size_t i = 0; hows[i]; i++)
		n += json_object_get(j, hows[i]) != NULL;
	if (n > 1)
		return al_json_fail(c, path, "give one of header, basic, query and sigv4, not %d",
				    n);
	snprintf(sub, sizeof(sub), "%s.header", path);
	if ((v = json_object_get(j, "header")) &&
	    al_json_note(&bad, parse_header_tmpl(c, v, sub, d)) == 0)
		d->how = AL_HOW_HEADER;
	snprintf(sub, sizeof(sub), "%s.basic", path);
	if ((v = json_object_get(j, "basic"))) {
		static const char *const keys[] = {"user", NULL};
		json_t *u;
		if (al_json_note(&bad, al_json_want(c, v, JSON_OBJECT, sub,
						    "an object: {\"user\": NAME}")) == 0 &&
		    al_json_note(&bad, al_json_check_keys(c, v, sub, keys)) == 0) {
			snprintf(sub, sizeof(sub), "%s.basic.user", path);
			if (!(u = json_object_get(v, "user")))
				al_json_note(&bad, al_json_fail(c, sub, "missing"));
			else if (al_json_note(&bad, al_json_string(c, u, sub, &d->user)) == 0 &&
				 (strchr(d->user, ':') || !d->user[0]))
				al_json_note(&bad, al_json_fail(c, sub, "a user name without ':'"));
			else
				d->how = AL_HOW_BASIC;
		}
	}
	snprintf(sub, sizeof(sub), "%s.query", path);
	if ((v = json_object_get(j, "query")) &&
	    al_json_note(&bad, al_json_string(c, v, sub, &d->param)) == 0) {
		bool ok = d->param[0] != '\0';
		for (const char *q = d->param; *q; q++)
			ok &= isalnum((unsigned char)*q) || strchr("-._~", *q);
		if (!ok)
			al_json_note(&bad, al_json_fail(c, sub,
							"a parameter name of letters, digits and "
							"- . _ ~"));
		else
			d->how = AL_HOW_QUERY;
	}
	snprintf(sub, sizeof(sub), "%s.sigv4", path);
	if ((v = json_object_get(j, "sigv4")) &&
	    al_json_note(&bad, al_json_bool(c, v, sub, &b)) == 0 && b) {
		if (d->token)
			al_json_note(&bad, al_json_fail(c, sub, "a token is not an AWS key"));
		else
			d->how = AL_HOW_SIGV4;
	}
	snprintf(sub, sizeof(sub), "%s.body", path);
	if ((v = json_object_get(j, "body")) &&
	    al_json_note(&bad, al_json_bool(c, v, sub, &b)) == 0)
		d->body = b;
	if (d->how == AL_HOW_SIGV4 && d->body)
		al_json_note(&bad, al_json_fail(c, sub, "a signed request's body cannot change"));
	return bad;
}

static int parse_token_keys(struct al_json_ctx *c, const json_t *j, const char *path,
			    struct al_secret_def *d)
{
	char sub[384];
	int bad = 0, b = 0;
	json_t *v;

	snprintf(sub, sizeof(sub), "%s.key", path);
	if (!(v = json_object_get(j, "key")))
		al_json_note(&bad, al_json_fail(c, sub, "missing (the signing key's file)"));
	else
		al_json_note(&bad, al_json_abs_path(c, v, sub, &d->key_file));
	snprintf(sub, sizeof(sub), "%s.iss", path);
	if ((v = json_object_get(j, "iss")))
		al_json_note(&bad, al_json_string(c, v, sub, &d->iss));
	if (!d->iss)
		d->iss = xstrdup("airlock");
	snprintf(sub, sizeof(sub), "%s.scope", path);
	if ((v = json_object_get(j, "scope")))
		al_json_note(&bad, al_json_string(c, v, sub, &d->scope));
	snprintf(sub, sizeof(sub), "%s.per_request", path);
	if ((v = json_object_get(j, "per_request")) &&
	    al_json_note(&bad, al_json_bool(c, v, sub, &b)) == 0)
		d->per_request = b;
	snprintf(sub, sizeof(sub), "%s.ttl", path);
	d->ttl_ms = TOKEN_TTL_MS;
	if ((v = json_object_get(j, "ttl")) &&
	    al_json_note(&bad, al_json_duration(c, v, sub, &d->ttl_ms)) == 0) {
		if (!d->per_request)
			al_json_note(
			    &bad, al_json_fail(c, sub,
					       "only a per_request token has its own ttl (a run's "
					       "token lives until the run's deadline)"));
		else if (d->ttl_ms < 1000 || d->ttl_ms % 1000)
			al_json_note(&bad, al_json_fail(c, sub,
							"a token's life is whole seconds, at "
							"least 1s"));
	}
	snprintf(sub, sizeof(sub), "%s.expose", path);
	if ((v = json_object_get(j, "expose")) &&
	    al_json_note(&bad, al_json_bool(c, v, sub, &b)) == 0)
		d->expose = b;
	if (d->expose && d->per_request)
		al_json_note(&bad, al_json_fail(c, sub,
						"a per_request token is minted on the way out: it "
						"cannot be exposed to the sandbox"));
	if (!d->header && d->how == AL_HOW_NONE && !d->body) {
		d->how = AL_HOW_HEADER;
		d->header = xstrdup("Authorization");
		d->tmpl = xstrdup("Bearer {}");
	}
	return bad;
}

int al_json_secret_def(struct al_json_ctx *c, const char *name, const json_t *j, const char *path,
		       bool token, struct al_secret_def **ret)
{
	static const char *const skeys[] = {"source", "hosts", "header", "basic", "query",
					    "sigv4",  "body",  "env",	 "file",  NULL};
	static const char *const tkeys[] = {"key",  "iss",    "scope",	"hosts", "per_request",
					    "ttl",  "expose", "header", "basic", "query",
					    "body", "env",    "file",	NULL};
	struct al_secret_def *d = xcalloc(1, sizeof(*d));
	char sub[384];
	int r, bad = 0, b = 0;
	json_t *v;

	d->name = xstrdup(name);
	d->token = token;
	d->where = xasprintf("%s: %s", c->file, path);
	if (!is_secret_name(name))
		al_json_note(&bad, al_json_fail(c, path,
						"a name of letters, digits and '_' (not starting "
						"with a digit), at most %d characters",
						SECRET_NAME_MAX));
	if ((r = al_json_want(c, j, JSON_OBJECT, path, "an object")) < 0) {
		al_secret_def_free(d);
		return r;
	}
	al_json_note(&bad, al_json_check_keys(c, j, path, token ? tkeys : skeys));
	if (token) {
		d->src.kind = AL_SOURCE_MINT;
	} else {
		snprintf(sub, sizeof(sub), "%s.source", path);
		if (!(v = json_object_get(j, "source")))
			al_json_note(&bad, al_json_fail(c, sub,
							"missing (where the value is "
							"read from on the host)"));
		else
			al_json_note(&bad, parse_source(c, v, sub, &d->src));
	}
	snprintf(sub, sizeof(sub), "%s.hosts", path);
	if (!(v = json_object_get(j, "hosts")))
		al_json_note(&bad, al_json_fail(c, sub, "missing (the hosts it may be sent to)"));
	else
		al_json_note(&bad, parse_hosts(c, v, sub, token, &d->hosts));
	al_json_note(&bad, parse_how(c, j, path, d));
	/* No presentation: say which keys could give one. A presentation
	 * given but wrong has its own error, at its key. */
	bool how_given = false;
	for (const char *const *k =
		 (const char *const[]){"header", "basic", "query", "sigv4", "body", NULL};
	     *k; k++)
		how_given |= json_object_get(j, *k) != NULL;
	if (token)
		al_json_note(&bad, parse_token_keys(c, j, path, d));
	else if (!how_given)
		al_json_note(
		    &bad, al_json_fail(c, path,
				       "say how it is sent: header, basic, query, sigv4 or body"));
	snprintf(sub, sizeof(sub), "%s.env", path);
	if ((v = json_object_get(j, "env")) &&
	    al_json_note(&bad, al_json_string(c, v, sub, &d->env)) == 0) {
		if (d->how == AL_HOW_SIGV4)
			al_json_note(&bad,
				     al_json_fail(c, sub,
						  "an AWS key is always in AWS_ACCESS_KEY_ID, "
						  "AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN)"));
		else if (!al_env_name_is_valid(d->env))
			al_json_note(&bad,
				     al_json_fail(c, sub, "not a variable name: \"%s\"", d->env));
	}
	if (!d->env && d->how != AL_HOW_SIGV4)
		d->env = xstrdup(name);
	snprintf(sub, sizeof(sub), "%s.file", path);
	if ((v = json_object_get(j, "file")) &&
	    al_json_note(&bad, al_json_bool(c, v, sub, &b)) == 0)
		d->file = b;
	if (bad < 0) {
		al_secret_def_free(d);
		return bad;
	}
	*ret = d;
	return 0;
}

int al_json_secret_defs(struct al_json_ctx *c, const json_t *j, const char *path, bool token,
			struct al_secret_def ***defs, size_t *n)
{
	const char *key;
	json_t *v;
	int r, bad = 0;

	if ((r = al_json_want(c, j, JSON_OBJECT, path, "an object of name: definition")) < 0)
		return r;
	json_object_foreach((json_t *)j, key, v)
	{
		char sub[384];
		struct al_secret_def *d = NULL;
		snprintf(sub, sizeof(sub), "%s.%s", path, key);
		if (al_json_note(&bad, al_json_secret_def(c, key, v, sub, token, &d)) < 0)
			continue;
		*defs = xrealloc(*defs, (*n + 1) * sizeof(**defs));
		(*defs)[(*n)++] = d;
	}
	return bad;
}

static int parse_methods(struct al_json_ctx *c, const json_t *v, const char *path, char ***out)
{
	int r, bad = 0;

	if ((r = al_json_strings(c, v, path, false, true, out)) < 0)
		return r;
	for (size_t i = 0; (*out)[i]; i++)
		if (al_reqrule_method_check((*out)[i], NULL) < 0 ||
		    strcmp((*out)[i], "CONNECT") == 0) {
			char sub[384];
			snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
			al_json_note(
			    &bad, al_json_fail(c, sub, "not a request method: \"%s\"", (*out)[i]));
		}
	return bad;
}

static int parse_paths(struct al_json_ctx *c, const json_t *v, const char *path, char ***out)
{
	struct al_error why = {0};
	int r, bad = 0;

	if ((r = al_json_strings(c, v, path, false, true, out)) < 0)
		return r;
	for (size_t i = 0; (*out)[i]; i++)
		if (al_reqrule_pattern_check((*out)[i], &why) < 0) {
			char sub[384];
			snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
			al_json_note(&bad, al_json_fail(c, sub, "%s", why.msg));
		}
	return bad;
}

int al_json_rule_opts(struct al_json_ctx *c, const json_t *j, const char *path,
		      struct al_rule_opts **ret)
{
	static const char *const keys[] = {"host",  "tls",	"ca", "methods",
					   "paths", "max_body", NULL};
	_cleanup_free_ char *tls = NULL;
	struct al_rule_opts *o = xcalloc(1, sizeof(*o));
	struct al_error why = {0};
	char sub[384];
	int bad = 0;
	json_t *v;

	al_json_note(&bad, al_json_check_keys(c, j, path, keys));
	snprintf(sub, sizeof(sub), "%s.host", path);
	if (!(v = json_object_get(j, "host")))
		al_json_note(&bad, al_json_fail(c, sub, "missing (the rule: HOST[:PORTS])"));
	else if (al_json_note(&bad, al_json_string(c, v, sub, &o->rule)) == 0 &&
		 al_policy_check_allow_rule(o->rule, &why) < 0)
		al_json_note(&bad, al_json_fail(c, sub, "%s", why.msg));
	snprintf(sub, sizeof(sub), "%s.tls", path);
	if ((v = json_object_get(j, "tls")) &&
	    al_json_note(&bad, al_json_string(c, v, sub, &tls)) == 0) {
		if (strcmp(tls, "intercept") == 0)
			o->intercept = true;
		else if (strcmp(tls, "pass") != 0)
			al_json_note(&bad, al_json_fail(c, sub,
							"expected \"intercept\" or \"pass\", got "
							"\"%s\"",
							tls));
	}
	snprintf(sub, sizeof(sub), "%s.ca", path);
	if ((v = json_object_get(j, "ca")) &&
	    al_json_note(&bad, al_json_abs_path(c, v, sub, &o->ca_file)) == 0 && !o->intercept)
		al_json_note(&bad, al_json_fail(c, sub,
						"the upstream's CA is only used when the gateway "
						"intercepts: add \"tls\": \"intercept\""));
	snprintf(sub, sizeof(sub), "%s.methods", path);
	if ((v = json_object_get(j, "methods")))
		al_json_note(&bad, parse_methods(c, v, sub, &o->methods));
	snprintf(sub, sizeof(sub), "%s.paths", path);
	if ((v = json_object_get(j, "paths")))
		al_json_note(&bad, parse_paths(c, v, sub, &o->paths));
	snprintf(sub, sizeof(sub), "%s.max_body", path);
	if ((v = json_object_get(j, "max_body")))
		al_json_note(&bad, al_json_size(c, v, sub, &o->max_body));
	if (bad < 0) {
		al_rule_opts_free(o);
		return bad;
	}
	*ret = o;
	return 0;
}

/* A price or an amount: a number from 0 to 4e9, to nine decimals. */
static int parse_amount(struct al_json_ctx *c, const json_t *v, const char *path, bool positive,
			uint64_t *out)
{
	double x = json_is_number(v) ? json_number_value(v) : -1;

	uint64_t nano = x >= 0 && x <= 4e9 ? (uint64_t)(x * (double)AL_BUDGET_UNIT + 0.5) : 0;
	if (!(x >= 0) || x > 4e9 || (positive && nano == 0))
		return al_json_fail(c, path,
				    "expected a %s number up to 4000000000 (to nine decimals)",
				    positive ? "positive" : "non-negative");
	*out = nano;
	return 0;
}

static int parse_request_prices(struct al_json_ctx *c, const json_t *j, const char *path,
				struct al_budget *b)
{
	const char *key;
	json_t *v;
	int r, bad = 0;

	if ((r = al_json_want(c, j, JSON_OBJECT, path, "an object of host: price")) < 0)
		return r;
	json_object_foreach((json_t *)j, key, v)
	{
		char sub[384];
		uint64_t nano = 0;
		struct al_host h;
		snprintf(sub, sizeof(sub), "%s.%s", path, key);
		const char *name = strncmp(key, "*.", 2) == 0 ? key + 2 : key;
		if (al_host_parse(name, strlen(name), &h, NULL) < 0 || h.kind != AL_HOST_NAME) {
			al_json_note(
			    &bad, al_json_fail(c, sub, "expected a host name or *.name (no port)"));
			continue;
		}
		if (al_json_note(&bad, parse_amount(c, v, sub, false, &nano)) < 0)
			continue;
		b->requests = xrealloc(b->requests, (b->n_requests + 1) * sizeof(*b->requests));
		b->requests[b->n_requests++] = (struct al_budget_price){xstrdup(key), nano};
	}
	return bad;
}

static int parse_prices(struct al_json_ctx *c, const json_t *j, const char *path,
			struct al_budget *b)
{
	static const char *const keys[] = {"cpu_second", "memory_gb_second", "egress_mb",
					   "requests", NULL};
	char sub[384];
	int r, bad = 0;
	json_t *v;

	if ((r = al_json_want(c, j, JSON_OBJECT, path, "an object")) < 0)
		return r;
	al_json_note(&bad, al_json_check_keys(c, j, path, keys));
	b->has_prices = true;
	snprintf(sub, sizeof(sub), "%s.cpu_second", path);
	if ((v = json_object_get(j, "cpu_second")))
		al_json_note(&bad, parse_amount(c, v, sub, false, &b->cpu_second));
	snprintf(sub, sizeof(sub), "%s.memory_gb_second", path);
	if ((v = json_object_get(j, "memory_gb_second")))
		al_json_note(&bad, parse_amount(c, v, sub, false, &b->memory_gb_second));
	snprintf(sub, sizeof(sub), "%s.egress_mb", path);
	if ((v = json_object_get(j, "egress_mb")))
		al_json_note(&bad, parse_amount(c, v, sub, false, &b->egress_mb));
	snprintf(sub, sizeof(sub), "%s.requests", path);
	if ((v = json_object_get(j, "requests")))
		al_json_note(&bad, parse_request_prices(c, v, sub, b));
	return bad;
}

int al_json_budget(struct al_json_ctx *c, const json_t *j, const char *path, bool prices_allowed,
		   struct al_budget *ret)
{
	static const char *const keys[] = {"max", "prices", NULL};
	struct al_budget b = {.set = true};
	char sub[384];
	int r, bad = 0;
	json_t *v;

	if ((r = al_json_want(c, j, JSON_OBJECT, path,
			      "an object: {\"max\": AMOUNT, \"prices\": {...}}")) < 0)
		return r;
	al_json_note(&bad, al_json_check_keys(c, j, path, keys));
	snprintf(sub, sizeof(sub), "%s.max", path);
	if (!(v = json_object_get(j, "max")))
		al_json_note(&bad, al_json_fail(c, sub, "missing (the most the run may spend)"));
	else
		al_json_note(&bad, parse_amount(c, v, sub, true, &b.max));
	snprintf(sub, sizeof(sub), "%s.prices", path);
	if ((v = json_object_get(j, "prices"))) {
		if (!prices_allowed)
			al_json_note(&bad,
				     al_json_fail(c, sub,
						  "the operator policy sets the prices; a task "
						  "only sets its max"));
		else
			al_json_note(&bad, parse_prices(c, v, sub, &b));
	}
	if (bad < 0) {
		al_budget_clear(&b);
		return bad;
	}
	al_budget_clear(ret);
	*ret = b;
	return 0;
}
