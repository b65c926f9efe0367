/* What the gateway presents on a connection (docs/credentials.md): the
 * options of the rule that allowed it, the run's secrets scoped to its
 * host, and the placeholders that must not leave by any other way. A
 * placeholder seen where it does not belong — in a name, in a request to
 * another host, in a stream the gateway cannot inject into — is refused
 * and audited as secret.misuse, counted and reported to the supervisor for
 * the run's summary and record (gw_refused). */
#include "gateway/conn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/evp.h>

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

/* Basic auth's base64 of "user:value", into out (NUL-terminated). */
static size_t basic_b64(const char *user, const struct al_secret_value *v, char *out, size_t size)
{
	size_t ul = strlen(user), pl = ul + 1 + v->len;
	char plain[4096];

	out[0] = '\0';
	if (pl > sizeof(plain) || 4 * ((pl + 2) / 3) + 1 > size)
		return 0;
	memcpy(plain, user, ul);
	plain[ul] = ':';
	memcpy(plain + ul + 1, v->data, v->len);
	int k = EVP_EncodeBlock((unsigned char *)out, (unsigned char *)plain, (int)pl);
	explicit_bzero(plain, pl);
	if (k <= 0)
		out[0] = '\0';
	return k > 0 ? (size_t)k : 0;
}

void gw_answer_set_build(struct al_gateway *gw)
{
	const struct al_cred *cr = gw->cred;
	struct al_valscan_value v[3 * AL_GW_MAX_NEEDLES];
	char *prefix[AL_GW_MAX_NEEDLES] = {0};
	char *b64[AL_GW_MAX_NEEDLES] = {0}, *plain[6 * AL_GW_MAX_NEEDLES] = {0};
	struct al_valscan_value pv[6 * AL_GW_MAX_NEEDLES]; /* two for each of v */
	size_t n = 0, np = 0;
	struct al_error err = {0};

	for (size_t i = 0; cr && i < cr->n && n + 3 <= AL_ARRAY_SIZE(v); i++) {
		const struct al_cred_secret *s = &cr->v[i];
		const struct al_secret_def *d = s->ps->def;
		if (d->token && d->expose)
			continue; /* the sandbox's own */
		if (d->token && d->per_request) {
			if (np == AL_ARRAY_SIZE(prefix) ||
			    al_cred_token_prefix(cr, s, &prefix[np], &err) < 0) {
				snprintf(
				    gw->answer_failed, sizeof(gw->answer_failed),
				    "token %s: its start cannot be searched for in answers: %s",
				    d->name, err.msg[0] ? err.msg : "too many");
				goto out;
			}
			/* In its forms (an echo in base64), never by halves: the
			 * first half is the key's header, which tokens of other
			 * runs share. As basic auth, "user:" goes first. */
			v[n++] = (struct al_valscan_value){.data = prefix[np],
							   .len = strlen(prefix[np]),
							   .id = (int)i,
							   .whole = true};
			np++;
			if (d->how == AL_HOW_BASIC && d->user && np < AL_ARRAY_SIZE(prefix)) {
				prefix[np] = xasprintf("%s:%s", d->user, prefix[np - 1]);
				v[n++] = (struct al_valscan_value){.data = prefix[np],
								   .len = strlen(prefix[np]),
								   .id = (int)i,
								   .whole = true};
				np++;
			}
			continue;
		}
		/* SigV4's secret key is never sent; its session token is. */
		const struct al_secret_value *val =
		    d->how == AL_HOW_SIGV4 ? &s->aws_token : &s->value;
		if (!val->len)
			continue;
		if (val->len < AL_VALSCAN_MIN) {
			snprintf(
			    gw->answer_failed, sizeof(gw->answer_failed),
			    "secret %s: its value is shorter than %d bytes, too short to search "
			    "answers for it",
			    d->name, AL_VALSCAN_MIN);
			goto out;
		}
		v[n++] =
		    (struct al_valscan_value){.data = val->data, .len = val->len, .id = (int)i};
		size_t k = 0, size = 4 * ((strlen(d->user ? d->user : "") + val->len + 3) / 3) + 1;
		if (d->how == AL_HOW_BASIC && d->user && i < AL_ARRAY_SIZE(b64)) {
			b64[i] = xmalloc(size);
			k = basic_b64(d->user, val, b64[i], size);
		}
		if (k)
			v[n++] = (struct al_valscan_value){.data = b64[i], .len = k, .id = (int)i};
	}
	if (n && al_valscan_new(v, n, &gw->answer_set, &err) < 0) {
		snprintf(gw->answer_failed, sizeof(gw->answer_failed),
			 "the secrets' values cannot be searched for in answers: %s", err.msg);
		goto out;
	}
	/* For the view with the escapes undone (gateway/unescape.h): each
	 * value and its base64 forms, and the value with '+' for its spaces,
	 * each also by halves: all of them among the forms above too (see
	 * unescape.c: a stretch the view leaves as it is is not searched
	 * twice). */
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		if (v[i].whole)
			continue; /* a token's start: no escapes in it */
		pv[m++] = (struct al_valscan_value){
		    .data = v[i].data, .len = v[i].len, .id = v[i].id, .plain = true};
		if (!memchr(v[i].data, ' ', v[i].len))
			continue;
		plain[m] = xmalloc(v[i].len);
		for (size_t k = 0; k < v[i].len; k++)
			plain[m][k] = v[i].data[k] == ' ' ? '+' : v[i].data[k];
		pv[m] = (struct al_valscan_value){
		    .data = plain[m], .len = v[i].len, .id = v[i].id, .bare = true};
		m++;
	}
	if (m && al_valscan_new(pv, m, &gw->answer_plain, &err) < 0) {
		snprintf(gw->answer_failed, sizeof(gw->answer_failed),
			 "the secrets' values cannot be searched for in answers: %s", err.msg);
		goto out;
	}
	/* For bodies that are not text: the same, whole forms only. */
	for (size_t i = 0; i < n; i++)
		v[i].whole = true;
	if (n && al_valscan_new(v, n, &gw->answer_whole, &err) < 0)
		snprintf(gw->answer_failed, sizeof(gw->answer_failed),
			 "the secrets' values cannot be searched for in answers: %s", err.msg);
out:
	for (size_t i = 0; i < np; i++)
		free(prefix[i]);
	for (size_t i = 0; i < AL_ARRAY_SIZE(plain); i++)
		if (plain[i]) {
			explicit_bzero(plain[i], pv[i].len);
			free(plain[i]);
		}
	for (size_t i = 0; i < AL_ARRAY_SIZE(b64); i++)
		if (b64[i]) {
			explicit_bzero(b64[i], strlen(b64[i]));
			free(b64[i]);
		}
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

/* Printable ASCII only: what goes to the supervisor ends on a terminal. */
static void put_clean(char *out, size_t size, const char *in)
{
	size_t i = 0;

	for (; in && in[i] && i + 1 < size; i++)
		out[i] = (in[i] < 0x20 || in[i] > 0x7e) ? '?' : in[i];
	out[i] = '\0';
}

/* FNV-1a over the refusal's fields, to send each distinct one once. */
static uint64_t refusal_hash(const struct al_gateway_refusal *r)
{
	uint64_t h = 1469598103934665603ull;
	const char *parts[] = {r->secret, r->why, r->host};

	h = (h ^ r->kind) * 1099511628211ull;
	h = (h ^ r->port) * 1099511628211ull;
	for (size_t k = 0; k < AL_ARRAY_SIZE(parts); k++)
		for (const char *p = parts[k];; p++) {
			h = (h ^ (unsigned char)*p) * 1099511628211ull;
			if (!*p)
				break;
		}
	return h;
}

void gw_refused(struct al_gateway *gw, enum al_gateway_refusal_kind kind, const char *host,
		int port, const char *secret, const char *why)
{
	struct al_gateway_refusal r = {.kind = kind,
				       .port = port > 0 && port <= 65535 ? (uint32_t)port : 0};

	if (!gw->refusal || gw->n_refusal_sent >= AL_GW_REFUSALS_SENT)
		return;
	put_clean(r.secret, sizeof(r.secret), secret);
	put_clean(r.why, sizeof(r.why), why);
	put_clean(r.host, sizeof(r.host),
		  host && *host		      ? host
		  : kind == AL_GW_REFUSED_DNS ? ""
					      : "?");
	uint64_t h = refusal_hash(&r);
	for (size_t i = 0; i < gw->n_refusal_sent; i++)
		if (gw->refusal_sent[i] == h)
			return;
	gw->refusal_sent[gw->n_refusal_sent++] = h;
	gw->refusal(gw->refusal_data, &r);
}

void gw_audit_misuse(struct al_gateway *gw, size_t needle, const char *where, const char *host,
		     int port)
{
	const struct al_cred_secret *s = &gw->cred->v[gw->needle_owner[needle]];

	gw->st.misuse++;
	al_audit_emit(gw->audit, "secret.misuse",
		      json_pack("{s:s, s:s, s:s?, s:i}", "secret", s->ps->def->name, "where", where,
				"host", host, "port", port));
	gw_refused(gw, AL_GW_REFUSED_MISUSE, host, port, s->ps->def->name, where);
}

void gw_answer_misuse(struct al_gateway *gw, ssize_t secret, const char *where, const char *host,
		      int port)
{
	const char *name = secret >= 0 ? gw->cred->v[secret].ps->def->name : NULL;

	gw->st.misuse++;
	if (name)
		al_audit_emit(gw->audit, "secret.misuse",
			      json_pack("{s:s, s:s, s:s, s:i}", "secret", name, "where", where,
					"host", host, "port", port));
	gw_refused(gw, AL_GW_REFUSED_MISUSE, host, port, name, where);
}

enum gw_step gw_deny_misuse(struct conn *c, size_t needle, const char *where)
{
	const struct al_cred_secret *s = &c->gw->cred->v[c->gw->needle_owner[needle]];

	gw_audit_misuse(c->gw, needle, where, c->name[0] ? c->name : NULL, c->port);
	/* Past the connect stage the connection was allowed: it is cut. */
	if (c->verdict == GW_ALLOWED)
		return gw_cut(
		    c, GW_ANSWER_DEFAULT, 403, AL_SOCKS_REP_NOT_ALLOWED,
		    "the placeholder of secret %s is in the %s, which is not where it goes",
		    s->ps->def->name, where);
	return gw_deny(c, GW_ANSWER_DEFAULT, 403, AL_SOCKS_REP_NOT_ALLOWED,
		       "the placeholder of secret %s is in the %s, which is not where it goes",
		       s->ps->def->name, where);
}
