/* A warm pool's sandbox in the gateway (docs/pool.md): held, it refuses
 * every connection and lookup; claimed, the allowlist, rule options and
 * secrets of the request that claimed it replace those it was made with.
 * Everything the claim brings is built aside first and swapped in at once
 * (one turn of the loop: no connection sees half of it), so a failure
 * leaves the gateway held. */
#include "gateway/conn.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "cred/store.h"
#include "gateway/proto.h"
#include "policy/cred.h"

/* The plan the gateway serves once claimed: the one it was made with for
 * everything fixed, the claim's allowlist, rule options and secrets. */
struct gw_claimed {
	struct al_plan plan; /* a shallow copy; only the fields below are owned */
	struct al_allowlist *allow;
	char **allow_text;
	struct al_rule_opts **rule_opts;
	size_t n_rule_opts;
	struct al_plan_secret *secrets;
	size_t n_secrets;
	struct al_cred *cred;
};

static void claimed_free(struct gw_claimed *k)
{
	if (!k)
		return;
	al_allow_free(k->allow);
	al_strv_free(k->allow_text);
	for (size_t i = 0; i < k->n_rule_opts; i++)
		al_rule_opts_free(k->rule_opts[i]);
	free(k->rule_opts);
	al_cred_free(k->cred); /* wipes the values */
	for (size_t i = 0; i < k->n_secrets; i++) {
		al_secret_def_free(k->secrets[i].def);
		al_allow_free(k->secrets[i].scope);
	}
	free(k->secrets);
	free(k);
}

void gw_claimed_free(struct gw_claimed *k)
{
	claimed_free(k);
}

void al_gateway_hold(struct al_gateway *gw)
{
	gw->held = true;
}

static char **strv_of(const json_t *a)
{
	char **v = NULL;
	size_t i;
	json_t *s;

	if (!a)
		return NULL;
	json_array_foreach(a, i, s) al_strv_push(&v, json_string_value(s));
	if (!v) /* an empty list is still a list (nothing matches) */
		v = xcalloc(1, sizeof(*v));
	return v;
}

static const char *str(const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s ? s : NULL;
}

static char *dup_or_null(const char *s)
{
	return s ? xstrdup(s) : NULL;
}

static int build_secret(struct gw_claimed *k, size_t i, const json_t *s, const struct al_gwp_msg *m,
			const uint8_t *msg, struct al_error *err)
{
	struct al_plan_secret *ps = &k->secrets[i];
	struct al_secret_def *d = xcalloc(1, sizeof(*d));
	const char *how = str(s, "how");
	size_t j;
	json_t *h;

	ps->def = d;
	d->name = xstrdup(str(s, "name"));
	d->hosts = strv_of(json_object_get(s, "hosts"));
	d->how = strcmp(how, "header") == 0  ? AL_HOW_HEADER
		 : strcmp(how, "basic") == 0 ? AL_HOW_BASIC
		 : strcmp(how, "query") == 0 ? AL_HOW_QUERY
					     : AL_HOW_NONE;
	d->header = dup_or_null(str(s, "header"));
	d->tmpl = dup_or_null(str(s, "template"));
	d->user = dup_or_null(str(s, "user"));
	d->param = dup_or_null(str(s, "param"));
	d->body = json_is_true(json_object_get(s, "body"));
	d->where = xasprintf("claim: secrets.%s", d->name);
	snprintf(ps->placeholder, sizeof(ps->placeholder), "%s", str(s, "placeholder"));
	ps->scope = al_allow_new();
	json_array_foreach(json_object_get(s, "hosts"), j,
			   h) if (al_allow_add(ps->scope, json_string_value(h), err) <
				  0) return -EINVAL;

	struct al_cred_secret *cs = &k->cred->v[i];
	size_t len = m->claim_value[i].len;
	cs->ps = ps;
	cs->value.data = xmalloc(len + 1);
	memcpy(cs->value.data, msg + sizeof(struct al_gwp_hdr) + m->claim_value[i].off, len);
	cs->value.data[len] = '\0';
	cs->value.len = len;
	k->cred->n = i + 1;
	return 0;
}

static struct al_rule_opts *build_rule(const json_t *r)
{
	struct al_rule_opts *o = xcalloc(1, sizeof(*o));

	o->rule = xstrdup(str(r, "rule"));
	o->methods = strv_of(json_object_get(r, "methods"));
	o->paths = strv_of(json_object_get(r, "paths"));
	o->paths_also = strv_of(json_object_get(r, "paths_also"));
	o->max_body = (uint64_t)json_integer_value(json_object_get(r, "max_body"));
	return o;
}

static int build(struct al_gateway *gw, const struct al_gwp_msg *m, const uint8_t *msg,
		 struct gw_claimed *k, struct al_error *err)
{
	const json_t *allow = json_object_get(m->claim, "allow");
	const json_t *rules = json_object_get(m->claim, "rules");
	const json_t *secrets = json_object_get(m->claim, "secrets");
	size_t i;
	json_t *v;

	k->plan = *gw->plan;
	k->allow = al_allow_new();
	json_array_foreach(allow, i, v)
	{
		if (al_allow_add(k->allow, json_string_value(v), err) < 0)
			return -EINVAL;
		al_strv_push(&k->allow_text, json_string_value(v));
	}
	k->rule_opts = xcalloc(json_array_size(rules) + 1, sizeof(*k->rule_opts));
	json_array_foreach(rules, i, v) k->rule_opts[k->n_rule_opts++] = build_rule(v);
	k->secrets = xcalloc(json_array_size(secrets) + 1, sizeof(*k->secrets));
	k->cred = xcalloc(1, sizeof(*k->cred));
	k->cred->v = xcalloc(json_array_size(secrets) + 1, sizeof(*k->cred->v));
	if (gw->cred)
		memcpy(k->cred->run_id, gw->cred->run_id, sizeof(k->cred->run_id));
	json_array_foreach(secrets, i, v)
	{
		k->n_secrets = i + 1;
		if (build_secret(k, i, v, m, msg, err) < 0)
			return -EINVAL;
	}
	k->plan.allow = k->allow;
	k->plan.allow_text = k->allow_text;
	k->plan.rule_opts = k->rule_opts;
	k->plan.n_rule_opts = k->n_rule_opts;
	k->plan.secrets = k->secrets;
	k->plan.n_secrets = k->n_secrets;
	k->plan.intercept = false;
	return 0;
}

int al_gateway_claim(struct al_gateway *gw, const struct al_gwp_msg *m, const uint8_t *msg,
		     struct al_error *err)
{
	struct gw_claimed *k;

	if (!gw->held || gw->claimed)
		return al_error_set(err, EALREADY, "the sandbox was claimed already");
	if (!m->claim)
		return al_error_set(err, EINVAL, "a claim without its description");
	k = xcalloc(1, sizeof(*k));
	if (build(gw, m, msg, k, err) < 0) {
		claimed_free(k);
		return -EINVAL;
	}
	/* Whatever was accepted while held was refused; none of it goes on
	 * under the claim's rules. */
	al_gateway_close_all(gw);
	const struct al_plan *old_plan = gw->plan;
	const struct al_cred *old_cred = gw->cred;
	gw->plan = &k->plan;
	gw_cred_rebuild(gw, k->cred);
	if (gw->needles_failed || gw->answer_failed[0]) {
		int r =
		    al_error_set(err, EINVAL, "%s",
				 gw->answer_failed[0] ? gw->answer_failed
						      : "the placeholders could not be compiled");
		gw->plan = old_plan;
		gw_cred_rebuild(gw, old_cred);
		claimed_free(k);
		return r;
	}
	gw->claimed = k;
	gw->held = false;
	return 0;
}
