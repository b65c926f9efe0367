/* What the gateway presents on a connection (docs/credentials.md): the
 * options of the rule that allowed it, the run's secrets scoped to its
 * host, and the placeholders that must not leave by any other way. A
 * placeholder seen where it does not belong — in a name, in a request to
 * another host, in a stream the gateway cannot inject into — is refused
 * and audited as secret.misuse. */
#include "gateway/conn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "cred/store.h"
#include "gateway/socks.h"

void gw_needles_build(struct al_gateway *gw)
{
	const struct al_cred *cr = gw->cred;

	for (size_t i = 0; cr && i < cr->n; i++) {
		const struct al_cred_secret *s = &cr->v[i];
		const struct al_plan_secret *ps = s->ps;
		const char *mine[] = {ps->def->expose ? NULL : ps->placeholder, ps->fake_key_id,
				      ps->fake_secret, s->fake_token};
		for (size_t k = 0; k < AL_ARRAY_SIZE(mine); k++) {
			if (!mine[k] || !mine[k][0] || gw->n_needles >= AL_GW_MAX_NEEDLES)
				continue;
			gw->needles[gw->n_needles] = mine[k];
			gw->needle_owner[gw->n_needles] = i;
			gw->n_needles++;
		}
	}
	struct al_error err = {0};
	if (gw->n_needles && al_needles_new(gw->needles, gw->n_needles, &gw->needle_set, &err) < 0)
		gw->needles_failed = true; /* al_gateway_prepare refuses to start */
}

const struct al_rule_opts *gw_rule_opts(const struct al_gateway *gw, const char *rule)
{
	const struct al_plan *p = gw->plan;

	return rule ? al_rule_opts_find(p->rule_opts, p->n_rule_opts, rule) : NULL;
}

bool gw_secret_scoped(const struct al_cred_secret *s, const struct conn *c)
{
	if (c->target.kind == AL_HOST_NAME)
		return al_allow_match_name(s->ps->scope, c->name, c->port, NULL);
	return al_allow_match_addr(s->ps->scope, &c->target.addr, c->port, NULL);
}

/* Case-insensitive: a name is the same name in any case. */
ssize_t gw_needle_in_name(const struct al_gateway *gw, const char *name)
{
	for (size_t i = 0; i < gw->n_needles; i++)
		if (strcasestr(name, gw->needles[i]))
			return (ssize_t)i;
	return -1;
}

void gw_audit_misuse(struct al_gateway *gw, size_t needle, const char *where, const char *host,
		     int port)
{
	const struct al_cred_secret *s = &gw->cred->v[gw->needle_owner[needle]];

	al_audit_emit(gw->audit, "secret.misuse",
		      json_pack("{s:s, s:s, s:s?, s:i}", "secret", s->ps->def->name, "where", where,
				"host", host, "port", port));
}

enum gw_step gw_deny_misuse(struct conn *c, size_t needle, const char *where)
{
	const struct al_cred_secret *s = &c->gw->cred->v[c->gw->needle_owner[needle]];

	gw_audit_misuse(c->gw, needle, where, c->name[0] ? c->name : NULL, c->port);
	return gw_deny(c, GW_ANSWER_DEFAULT, 403, AL_SOCKS_REP_NOT_ALLOWED,
		       "the placeholder of secret %s is in the %s, which is not where it goes",
		       s->ps->def->name, where);
}
