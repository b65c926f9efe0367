/* The credential model's own helpers (cred.h); the parsers are in
 * cred-parse.c. */
#include "policy/cred.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

static char *dup_or_null(const char *s)
{
	return s ? xstrdup(s) : NULL;
}

void al_secret_def_free(struct al_secret_def *d)
{
	if (!d)
		return;
	free(d->name);
	free(d->src.env);
	free(d->src.file);
	al_strv_free(d->src.argv);
	al_strv_free(d->hosts);
	free(d->header);
	free(d->tmpl);
	free(d->user);
	free(d->param);
	free(d->env);
	free(d->key_file);
	free(d->iss);
	free(d->scope);
	free(d->where);
	free(d);
}

struct al_secret_def *al_secret_def_dup(const struct al_secret_def *d)
{
	struct al_secret_def *n = xmalloc(sizeof(*n));

	*n = *d;
	n->name = dup_or_null(d->name);
	n->src.env = dup_or_null(d->src.env);
	n->src.file = dup_or_null(d->src.file);
	n->src.argv = d->src.argv ? al_strv_dup(d->src.argv) : NULL;
	n->hosts = d->hosts ? al_strv_dup(d->hosts) : NULL;
	n->header = dup_or_null(d->header);
	n->tmpl = dup_or_null(d->tmpl);
	n->user = dup_or_null(d->user);
	n->param = dup_or_null(d->param);
	n->env = dup_or_null(d->env);
	n->key_file = dup_or_null(d->key_file);
	n->iss = dup_or_null(d->iss);
	n->scope = dup_or_null(d->scope);
	n->where = dup_or_null(d->where);
	return n;
}

void al_rule_opts_free(struct al_rule_opts *o)
{
	if (!o)
		return;
	free(o->rule);
	free(o->ca_file);
	al_strv_free(o->methods);
	al_strv_free(o->paths);
	al_strv_free(o->paths_also);
	free(o);
}

struct al_rule_opts *al_rule_opts_dup(const struct al_rule_opts *o)
{
	struct al_rule_opts *n = xmalloc(sizeof(*n));

	*n = *o;
	n->rule = dup_or_null(o->rule);
	n->ca_file = dup_or_null(o->ca_file);
	n->methods = o->methods ? al_strv_dup(o->methods) : NULL;
	n->paths = o->paths ? al_strv_dup(o->paths) : NULL;
	n->paths_also = o->paths_also ? al_strv_dup(o->paths_also) : NULL;
	return n;
}

bool al_rule_opts_has_requests(const struct al_rule_opts *o)
{
	return o && (o->methods || o->paths || o->paths_also || o->max_body);
}

const struct al_rule_opts *al_rule_opts_find(struct al_rule_opts *const *opts, size_t n,
					     const char *rule)
{
	for (size_t i = n; i-- > 0;) /* the last one written wins */
		if (strcmp(opts[i]->rule, rule) == 0)
			return opts[i];
	return NULL;
}

void al_budget_clear(struct al_budget *b)
{
	for (size_t i = 0; i < b->n_requests; i++)
		free(b->requests[i].host);
	free(b->requests);
	*b = (struct al_budget){0};
}

void al_budget_copy(struct al_budget *dst, const struct al_budget *src)
{
	al_budget_clear(dst);
	*dst = *src;
	dst->requests = src->n_requests ? xcalloc(src->n_requests, sizeof(*dst->requests)) : NULL;
	for (size_t i = 0; i < src->n_requests; i++)
		dst->requests[i] =
		    (struct al_budget_price){xstrdup(src->requests[i].host), src->requests[i].nano};
}

/* "*.example.com" matches names below example.com, as allow rules do. */
static bool price_matches(const char *pattern, const char *name)
{
	if (strncmp(pattern, "*.", 2) != 0)
		return strcasecmp(pattern, name) == 0;
	size_t pl = strlen(pattern + 1), nl = strlen(name); /* ".example.com" */
	return nl > pl && strcasecmp(name + nl - pl, pattern + 1) == 0;
}

uint64_t al_budget_request_price(const struct al_budget *b, const char *name)
{
	/* An exact name before a wildcard, then the longest wildcard. */
	const struct al_budget_price *best = NULL;

	for (size_t i = 0; i < b->n_requests; i++) {
		const struct al_budget_price *p = &b->requests[i];
		if (!price_matches(p->host, name))
			continue;
		if (p->host[0] != '*')
			return p->nano;
		if (!best || strlen(p->host) > strlen(best->host))
			best = p;
	}
	return best ? best->nano : 0;
}

void al_budget_format(uint64_t nano, char *buf, size_t len)
{
	char frac[16];
	int n = snprintf(frac, sizeof(frac), "%09llu", (unsigned long long)(nano % AL_BUDGET_UNIT));

	while (n > 0 && frac[n - 1] == '0')
		frac[--n] = '\0';
	if (n)
		snprintf(buf, len, "%llu.%s", (unsigned long long)(nano / AL_BUDGET_UNIT), frac);
	else
		snprintf(buf, len, "%llu", (unsigned long long)(nano / AL_BUDGET_UNIT));
}
