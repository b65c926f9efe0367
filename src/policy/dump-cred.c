/* The plan's credentials, rule options and budget in `airlock check`'s
 * dumps (dump.c): what is sent where and how, never a value. */
#include <stdio.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "policy/plan-internal.h"

static const char *source_name(enum al_secret_source_kind k)
{
	switch (k) {
	case AL_SOURCE_ENV:
		return "env";
	case AL_SOURCE_FILE:
		return "file";
	case AL_SOURCE_FD:
		return "fd";
	case AL_SOURCE_COMMAND:
		return "command";
	case AL_SOURCE_MINT:
		return "minted";
	}
	return "?";
}

static const char *source_arg(const struct al_secret_source *s, char *buf, size_t len)
{
	switch (s->kind) {
	case AL_SOURCE_ENV:
		return s->env;
	case AL_SOURCE_FILE:
		return s->file;
	case AL_SOURCE_FD:
		snprintf(buf, len, "%d", s->fd);
		return buf;
	case AL_SOURCE_COMMAND:
		return s->argv[0];
	case AL_SOURCE_MINT:
		break;
	}
	return NULL;
}

/* "header Authorization: Bearer {}", "basic (user svc)", ... */
static char *how_text(const struct al_secret_def *d)
{
	const char *body = d->body ? " and the body" : "";

	switch (d->how) {
	case AL_HOW_HEADER:
		return xasprintf("header %s: %s%s", d->header, d->tmpl, body);
	case AL_HOW_BASIC:
		return xasprintf("basic auth (user %s)%s", d->user, body);
	case AL_HOW_QUERY:
		return xasprintf("query parameter %s%s", d->param, body);
	case AL_HOW_SIGV4:
		return xstrdup("AWS SigV4 re-signing");
	case AL_HOW_NONE:
		break;
	}
	return xstrdup("the body");
}

void al_plan_dump_cred_text(const struct al_plan *p, FILE *f)
{
	char buf[32];

	for (size_t i = 0; i < p->n_secrets; i++) {
		const struct al_secret_def *d = p->secrets[i].def;
		_cleanup_free_ char *hosts = al_strv_join(d->hosts, ", ");
		_cleanup_free_ char *how = how_text(d);
		const char *arg = source_arg(&d->src, buf, sizeof(buf));
		fprintf(f, "%s %s: from %s%s%s, to %s as %s; the sandbox has a placeholder in %s\n",
			d->token ? "token: " : "secret:", d->name, source_name(d->src.kind),
			arg ? " " : "", arg ? arg : "", hosts, how,
			d->how == AL_HOW_SIGV4 ? "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
					       : d->env);
		if (d->file)
			fprintf(f, "  (file /etc/airlock/secrets/%s)\n", d->name);
		if (d->token)
			fprintf(f, "  %s, key %s, iss %s%s%s\n",
				d->per_request ? "minted per request" : "minted for the run",
				d->key_file, d->iss, d->scope ? ", scope " : "",
				d->scope ? d->scope : "");
	}
	for (size_t i = 0; i < p->n_rule_opts; i++) {
		const struct al_rule_opts *o = p->rule_opts[i];
		_cleanup_free_ char *m = o->methods ? al_strv_join(o->methods, ",") : NULL;
		_cleanup_free_ char *ps = o->paths ? al_strv_join(o->paths, ",") : NULL;
		_cleanup_free_ char *pa = o->paths_also ? al_strv_join(o->paths_also, ",") : NULL;
		fprintf(f, "rule:       %s%s%s%s%s%s%s%s%s", o->rule,
			o->intercept ? " tls=intercept" : "", o->ca_file ? " ca=" : "",
			o->ca_file ? o->ca_file : "", m ? " methods=" : "", m ? m : "",
			ps ? " paths=" : "", ps ? ps : "", pa ? " operator-paths=" : "");
		fprintf(f, "%s", pa ? pa : "");
		if (o->max_body) {
			al_format_size(o->max_body, buf, sizeof(buf));
			fprintf(f, " max_body=%s", buf);
		}
		fprintf(f, "\n");
	}
	if (p->budget.set) {
		char max[32], a[32], b[32], c[32];
		al_budget_format(p->budget.max, max, sizeof(max));
		al_budget_format(p->budget.cpu_second, a, sizeof(a));
		al_budget_format(p->budget.memory_gb_second, b, sizeof(b));
		al_budget_format(p->budget.egress_mb, c, sizeof(c));
		fprintf(f, "budget:     max %s; cpu second %s, memory GB-second %s, egress MB %s",
			max, a, b, c);
		for (size_t i = 0; i < p->budget.n_requests; i++) {
			al_budget_format(p->budget.requests[i].nano, a, sizeof(a));
			fprintf(f, ", a request to %s %s", p->budget.requests[i].host, a);
		}
		fprintf(f, "\n");
	}
}

static json_t *strv_json(char *const *v)
{
	json_t *a = json_array();
	for (size_t i = 0; v && v[i]; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

json_t *al_plan_dump_cred_json(const struct al_plan *p)
{
	json_t *o = json_object(), *a = json_array();
	char buf[32];

	for (size_t i = 0; i < p->n_secrets; i++) {
		const struct al_secret_def *d = p->secrets[i].def;
		json_t *hosts = json_array();
		_cleanup_free_ char *how = how_text(d);
		const char *arg = source_arg(&d->src, buf, sizeof(buf));
		for (size_t k = 0; d->hosts && d->hosts[k]; k++)
			json_array_append_new(hosts, json_string(d->hosts[k]));
		json_array_append_new(
		    a, json_pack("{s:s, s:s, s:s, s:s?, s:o, s:s, s:s?, s:b}", "name", d->name,
				 "kind", d->token ? "token" : "secret", "source",
				 source_name(d->src.kind), "from", arg, "hosts", hosts, "as", how,
				 "env", d->how == AL_HOW_SIGV4 ? NULL : d->env, "file", d->file));
	}
	json_object_set_new(o, "secrets", a);
	a = json_array();
	for (size_t i = 0; i < p->n_rule_opts; i++) {
		const struct al_rule_opts *r = p->rule_opts[i];
		json_t *e = json_pack("{s:s, s:b, s:s?}", "rule", r->rule, "intercept",
				      r->intercept, "ca", r->ca_file);
		if (r->methods)
			json_object_set_new(e, "methods", strv_json(r->methods));
		if (r->paths)
			json_object_set_new(e, "paths", strv_json(r->paths));
		if (r->paths_also)
			json_object_set_new(e, "operator_paths", strv_json(r->paths_also));
		if (r->max_body)
			json_object_set_new(e, "max_body", json_integer((json_int_t)r->max_body));
		json_array_append_new(a, e);
	}
	json_object_set_new(o, "rules", a);
	if (p->budget.set) {
		json_t *req = json_object();
		for (size_t i = 0; i < p->budget.n_requests; i++)
			json_object_set_new(
			    req, p->budget.requests[i].host,
			    json_real((double)p->budget.requests[i].nano / AL_BUDGET_UNIT));
		json_object_set_new(
		    o, "budget",
		    json_pack("{s:f, s:{s:f, s:f, s:f, s:o}}", "max",
			      (double)p->budget.max / AL_BUDGET_UNIT, "prices", "cpu_second",
			      (double)p->budget.cpu_second / AL_BUDGET_UNIT, "memory_gb_second",
			      (double)p->budget.memory_gb_second / AL_BUDGET_UNIT, "egress_mb",
			      (double)p->budget.egress_mb / AL_BUDGET_UNIT, "requests", req));
	} else {
		json_object_set_new(o, "budget", json_null());
	}
	return o;
}
