/* The run's credentials (store.h). */
#include "cred/store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "cred/jwt.h"
#include "tls/ca.h"
#include "tls/tls.h"

/* The host's trust store, which the sandbox's bundle starts with. */
#define HOST_BUNDLE	"/etc/ssl/certs/ca-certificates.crt"
#define HOST_BUNDLE_MAX (4u << 20)

/* A leaf of the run's CA is valid this long past the run's deadline. */
#define CA_GRACE 60

const char *const al_ca_env[] = {"SSL_CERT_FILE",
				 "REQUESTS_CA_BUNDLE",
				 "CURL_CA_BUNDLE",
				 "NODE_EXTRA_CA_CERTS",
				 "GIT_SSL_CAINFO",
				 "PIP_CERT",
				 NULL};

/* The names a token's audience is made of: its hosts without ports. */
static char **audience(const struct al_secret_def *d)
{
	char **aud = NULL;

	for (size_t i = 0; d->hosts && d->hosts[i]; i++) {
		const char *h = d->hosts[i], *colon = strrchr(h, ':');
		_cleanup_free_ char *name = colon ? strndup(h, (size_t)(colon - h)) : xstrdup(h);
		bool seen = false;
		for (size_t j = 0; aud && aud[j]; j++)
			seen |= strcmp(aud[j], name) == 0;
		if (!seen)
			al_strv_push(&aud, name);
	}
	return aud;
}

static int mint(const struct al_jwt_key *key, const struct al_secret_def *d, const char *run_id,
		char *const *aud, int64_t now, int64_t exp, char jti[33], char **ret,
		struct al_error *err)
{
	struct al_jwt_claims claims = {.iss = d->iss,
				       .sub = run_id,
				       .scope = d->scope,
				       .jti = jti,
				       .aud = (const char *const *)aud,
				       .n_aud = al_strv_len(aud),
				       .iat = now,
				       .nbf = now,
				       .exp = exp};

	if (al_jwt_new_jti(jti, err) < 0)
		return -EIO;
	return al_jwt_mint(key, &claims, ret, err);
}

/* Put value in place of the placeholder in the sandbox's environment. */
static void expose(struct al_cred *c, const struct al_plan_secret *ps, const char *value)
{
	al_strv_push_take(&c->extra.env_replace, xasprintf("%s=%s", ps->def->env, value));
}

static int open_token(struct al_cred *c, struct al_cred_secret *s, const char *what,
		      struct al_error *err)
{
	const struct al_secret_def *d = s->ps->def;
	_cleanup_(al_strv_freep) char **aud = audience(d);
	char *tok = NULL;
	int r;

	if ((r = al_jwt_key_load(d->key_file, &s->key, err)) < 0)
		return al_error_wrap(err, "%s", what);
	if (!al_jwt_key_can_sign(s->key))
		return al_error_set(err, EINVAL, "%s: %s holds a public key: it cannot sign", what,
				    d->key_file);
	if (d->per_request)
		return 0; /* minted on the way out, per request */
	if ((r = mint(s->key, d, c->run_id, aud, time(NULL), c->deadline, s->jti, &tok, err)) < 0)
		return al_error_wrap(err, "%s", what);
	s->value.data = tok;
	s->value.len = strlen(tok);
	/* An exposed token is in the sandbox's environment: it is minted
	 * once and lives to the first deadline. One the gateway presents
	 * keeps its key, to be minted again when the deadline moves
	 * (al_cred_set_deadline). */
	if (d->expose) {
		al_jwt_key_free(s->key);
		s->key = NULL;
		expose(c, s->ps, tok);
	}
	return 0;
}

/* A run's token (not per request) minted again, to the new deadline,
 * with the same id (the record names it). */
static int remint(struct al_cred *c, struct al_cred_secret *s, struct al_error *err)
{
	const struct al_secret_def *d = s->ps->def;
	_cleanup_(al_strv_freep) char **aud = audience(d);
	struct al_jwt_claims claims = {.iss = d->iss,
				       .sub = c->run_id,
				       .scope = d->scope,
				       .jti = s->jti,
				       .aud = (const char *const *)aud,
				       .n_aud = al_strv_len(aud),
				       .iat = (int64_t)time(NULL),
				       .nbf = (int64_t)time(NULL),
				       .exp = c->deadline};
	char *tok = NULL;
	int r;

	if ((r = al_jwt_mint(s->key, &claims, &tok, err)) < 0)
		return al_error_wrap(err, "token %s", d->name);
	al_secret_value_clear(&s->value);
	s->value.data = tok;
	s->value.len = strlen(tok);
	return 0;
}

int64_t al_cred_deadline_max(const struct al_cred *c)
{
	return c && c->ca ? al_tls_ca_not_after(c->ca) - CA_GRACE : INT64_MAX;
}

int al_cred_set_deadline(struct al_cred *c, int64_t deadline, struct al_error *err)
{
	int r;

	if (deadline > al_cred_deadline_max(c))
		return al_error_set(err, ERANGE,
				    "the deadline %lld is past what the run's interception CA is "
				    "valid for (%lld): the sandbox trusts that CA, and cannot be "
				    "given another",
				    (long long)deadline, (long long)al_cred_deadline_max(c));
	c->deadline = deadline;
	if (c->ca)
		al_tls_ca_set_leaf_end(c->ca, deadline + CA_GRACE);
	for (size_t i = 0; i < c->n; i++) {
		struct al_cred_secret *s = &c->v[i];
		if (s->ps->def->token && !s->ps->def->per_request && s->key &&
		    (r = remint(c, s, err)) < 0)
			return r;
	}
	return 0;
}

/* A JSON string member of an AWS credential_process document. */
static int aws_part(json_t *doc, const char *key, bool required, const char *what,
		    struct al_secret_value *out, struct al_error *err)
{
	json_t *v = json_object_get(doc, key);

	if (!v && !required)
		return 0;
	if (!json_is_string(v) || json_string_length(v) == 0 ||
	    strlen(json_string_value(v)) != json_string_length(v))
		return al_error_set(err, EINVAL, "%s: the AWS credentials have no %s string", what,
				    key);
	out->len = json_string_length(v);
	out->data = xmalloc(out->len + 1);
	memcpy(out->data, json_string_value(v), out->len + 1);
	return 0;
}

/* SigV4: the source gives AWS's credential_process document
 * ({"AccessKeyId", "SecretAccessKey", "SessionToken"}), e.g. from `aws
 * configure export-credentials`. */
static int open_aws(struct al_cred *c, struct al_cred_secret *s, const char *what,
		    struct al_error *err)
{
	struct al_secret_value raw = s->value;
	json_error_t jerr;
	json_t *doc = json_loadb(raw.data, raw.len, 0, &jerr);
	int r;

	s->value = (struct al_secret_value){0};
	al_secret_value_clear(&raw);
	if (!doc || !json_is_object(doc)) {
		json_decref(doc);
		/* jansson's message may quote the text: not shown. */
		return al_error_set(err, EINVAL,
				    "%s: an AWS key's source must give AWS's credential_process "
				    "JSON ({\"AccessKeyId\": ..., \"SecretAccessKey\": ...})",
				    what);
	}
	r = aws_part(doc, "AccessKeyId", true, what, &s->value, err);
	if (r == 0)
		r = aws_part(doc, "SecretAccessKey", true, what, &s->aws_secret, err);
	if (r == 0)
		r = aws_part(doc, "SessionToken", false, what, &s->aws_token, err);
	/* jansson's copies of the strings: overwritten before they go. */
	const char *k;
	json_t *v;
	json_object_foreach(doc, k, v) if (json_is_string(v))
	    explicit_bzero((char *)json_string_value(v), json_string_length(v));
	json_decref(doc);
	if (r < 0)
		return r;
	if (s->aws_token.len) {
		unsigned char rb[16];
		if (getrandom(rb, sizeof(rb), 0) != sizeof(rb))
			return al_error_set(err, EIO, "%s: no random bytes", what);
		snprintf(s->fake_token, sizeof(s->fake_token), "airlock-ph-");
		for (size_t i = 0; i < sizeof(rb); i++)
			snprintf(s->fake_token + 11 + 2 * i, 3, "%02x", rb[i]);
		al_strv_push_take(&c->extra.env_add,
				  xasprintf("AWS_SESSION_TOKEN=%s", s->fake_token));
	}
	return 0;
}

/* The host's bundle and the run's CA, one PEM file. */
static char *bundle(const char *ca_pem)
{
	_cleanup_fclose_ FILE *f = fopen(HOST_BUNDLE, "re");
	char *buf = xmalloc(HOST_BUNDLE_MAX + strlen(ca_pem) + 2);
	size_t n = f ? fread(buf, 1, HOST_BUNDLE_MAX, f) : 0;

	if (n && buf[n - 1] != '\n')
		buf[n++] = '\n';
	strcpy(buf + n, ca_pem);
	return buf;
}

/* The names intercepted rules name: what the CA may issue for. */
static char **intercepted(const struct al_plan *p)
{
	char **v = xcalloc(1, sizeof(char *));

	for (size_t i = 0; i < p->n_rule_opts; i++) {
		const char *r = p->rule_opts[i]->rule;
		if (!p->rule_opts[i]->intercept)
			continue;
		const char *end = r[0] == '[' ? strchr(r, ']') : strrchr(r, ':');
		size_t len = end ? (size_t)(end - r) : strlen(r);
		_cleanup_free_ char *host = r[0] == '[' ? strndup(r + 1, len - 1) : strndup(r, len);
		al_strv_push(&v, host);
	}
	return v;
}

static void add_file(struct al_plan_extra *x, const char *path, char *content)
{
	x->files = xrealloc(x->files, (x->n_files + 1) * sizeof(*x->files));
	x->files[x->n_files++] =
	    (struct al_plan_extra_file){.path = xstrdup(path), .content = content, .mode = 0444};
}

static int open_ca(const struct al_plan *plan, struct al_cred *c, struct al_error *err)
{
	_cleanup_(al_strv_freep) char **names = intercepted(plan);
	int r;

	/* The CA the sandbox trusts lives as long as a CA may
	 * (AL_TLS_CA_MAX_LIFETIME): its certificate is in the sandbox's files
	 * and cannot be changed once it runs, while its key is only in the
	 * gateway, which ends with the run. What bounds a leaf is the run's
	 * deadline (a minute after it), moved with it (al_cred_set_deadline):
	 * a session's lifetime may be extended up to the CA's end. */
	if ((r = al_tls_init(err)) < 0 ||
	    (r = al_tls_ca_new(c->run_id, (int64_t)time(NULL) + AL_TLS_CA_MAX_LIFETIME,
			       (const char *const *)names, al_strv_len(names), &c->ca, err)) < 0)
		return al_error_wrap(err, "the run's CA for interception");
	if (plan->timeout_ms)
		al_tls_ca_set_leaf_end(c->ca, c->deadline + CA_GRACE);
	add_file(&c->extra, AL_CA_FILE, xstrdup(al_tls_ca_pem(c->ca)));
	add_file(&c->extra, AL_CA_BUNDLE, bundle(al_tls_ca_pem(c->ca)));
	for (size_t i = 0; al_ca_env[i]; i++)
		al_strv_push_take(&c->extra.env_default,
				  xasprintf("%s=%s", al_ca_env[i],
					    strcmp(al_ca_env[i], "NODE_EXTRA_CA_CERTS") == 0
						? AL_CA_FILE
						: AL_CA_BUNDLE));
	return 0;
}

/* The credentials open in this process (a run's each), as a list through
 * the stores themselves: what a copy of the process wipes
 * (al_cred_wipe_copies). It has no bound, so no store is ever left out of
 * the wipe however many runs a process holds. Stores are opened and freed
 * on the thread that clones the sandboxes (airlock's processes have one),
 * so a clone never sees the list half-changed. */
static struct al_cred *live;

static void wipe_values(struct al_cred *c)
{
	for (size_t i = 0; i < c->n; i++) {
		struct al_cred_secret *s = &c->v[i];
		const struct al_secret_def *d = s->ps->def;
		if (s->value.data)
			explicit_bzero(s->value.data, s->value.len);
		if (s->aws_secret.data)
			explicit_bzero(s->aws_secret.data, s->aws_secret.len);
		if (s->aws_token.data)
			explicit_bzero(s->aws_token.data, s->aws_token.len);
		al_jwt_key_free(s->key);
		s->key = NULL;
		const char *v = d->src.kind == AL_SOURCE_ENV ? getenv(d->src.env) : NULL;
		if (v)
			explicit_bzero((char *)v, strlen(v));
	}
	for (size_t i = 0; c->extra.env_replace && c->extra.env_replace[i]; i++)
		explicit_bzero(c->extra.env_replace[i], strlen(c->extra.env_replace[i]));
	if (c->ca)
		al_tls_ca_drop_key(c->ca);
}

void al_cred_wipe_copies(void)
{
	for (struct al_cred *c = live; c; c = c->live_next)
		wipe_values(c);
}

int al_cred_open(const struct al_plan *plan, const char *run_id, struct al_cred **ret,
		 struct al_error *err)
{
	_cleanup_(al_cred_freep) struct al_cred *c = xcalloc(1, sizeof(*c));
	int r;

	snprintf(c->run_id, sizeof(c->run_id), "%s", run_id);
	/* OpenSSL starts here, without the host's openssl.cnf: a key's first
	 * use would read it otherwise (and the static binary would take the
	 * host's settings). */
	if ((plan->n_secrets || plan->intercept) && (r = al_tls_init(err)) < 0)
		return r;
	c->deadline = (int64_t)time(NULL) + (int64_t)(plan->timeout_ms / 1000);
	c->v = xcalloc(plan->n_secrets + 1, sizeof(*c->v));
	for (size_t i = 0; i < plan->n_secrets; i++) {
		struct al_cred_secret *s = &c->v[c->n++];
		const struct al_secret_def *d = plan->secrets[i].def;
		_cleanup_free_ char *what =
		    xasprintf("%s %s (%s)", d->token ? "token" : "secret", d->name, d->where);
		s->ps = &plan->secrets[i];
		if (d->token)
			r = open_token(c, s, what, err);
		else if ((r = al_secret_source_read(&d->src, what, &s->value, err)) == 0 &&
			 d->how == AL_HOW_SIGV4)
			r = open_aws(c, s, what, err);
		if (r < 0)
			return r;
	}
	if (plan->intercept && (r = open_ca(plan, c, err)) < 0)
		return r;
	c->live_next = live;
	if (live)
		live->live_prev = c;
	live = c;
	c->listed = true;
	*ret = TAKE_PTR(c);
	return 0;
}

int al_cred_mint_request(const struct al_cred *c, const struct al_cred_secret *s, const char *host,
			 int64_t now, char **ret_token, char jti[33], struct al_error *err)
{
	char *aud[2] = {(char *)host, NULL};
	int64_t exp = now + (int64_t)(s->ps->def->ttl_ms / 1000);

	if (!s->key)
		return al_error_set(err, EINVAL, "token %s: no key to mint with", s->ps->def->name);
	if (exp > c->deadline)
		exp = c->deadline;
	if (exp <= now)
		return al_error_set(err, ETIMEDOUT, "token %s: the run's deadline has passed",
				    s->ps->def->name);
	return mint(s->key, s->ps->def, c->run_id, aud, now, exp, jti, ret_token, err);
}

int al_cred_token_prefix(const struct al_cred *c, const struct al_cred_secret *s, char **ret,
			 struct al_error *err)
{
	if (!s->key)
		return al_error_set(err, EINVAL, "token %s: no key", s->ps->def->name);
	return al_jwt_prefix(s->key, s->ps->def->iss, c->run_id, ret, err);
}

json_t *al_cred_json(const struct al_cred *c)
{
	json_t *a;

	if (!c || c->n == 0)
		return NULL;
	a = json_array();
	for (size_t i = 0; i < c->n; i++) {
		const struct al_cred_secret *s = &c->v[i];
		const struct al_secret_def *d = s->ps->def;
		json_t *hosts = json_array(), *o;
		for (size_t j = 0; d->hosts && d->hosts[j]; j++)
			json_array_append_new(hosts, json_string(d->hosts[j]));
		o = json_pack("{s:s, s:s, s:o}", "name", d->name, "kind",
			      d->token ? "token" : "secret", "hosts", hosts);
		if (s->jti[0])
			json_object_set_new(o, "jti", json_string(s->jti));
		if (d->token && d->per_request)
			json_object_set_new(o, "per_request", json_true());
		json_array_append_new(a, o);
	}
	return a;
}

void al_cred_free(struct al_cred *c)
{
	if (!c)
		return;
	if (c->listed) {
		if (c->live_prev)
			c->live_prev->live_next = c->live_next;
		else
			live = c->live_next;
		if (c->live_next)
			c->live_next->live_prev = c->live_prev;
	}
	for (size_t i = 0; i < c->n; i++) {
		struct al_cred_secret *s = &c->v[i];
		al_secret_value_clear(&s->value);
		al_secret_value_clear(&s->aws_secret);
		al_secret_value_clear(&s->aws_token);
		al_jwt_key_free(s->key);
	}
	free(c->v);
	al_plan_extra_clear(&c->extra);
	al_tls_ca_free(c->ca);
	explicit_bzero(c, sizeof(*c));
	free(c);
}
