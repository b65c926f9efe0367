/* The filtered stream: a connection the gateway reads request by request
 * (gateway/reqstream.h), in plain HTTP or through TLS it terminates
 * (tls/end.h). The sandbox's bytes go through the filter, which checks the
 * rule's requests, puts in the secrets scoped to the host and refuses a
 * placeholder headed anywhere else; the server's answers come back as
 * they are, searched for the values that went out (answer.h). Each
 * request is audited and charged to the budget before any of it goes
 * out.
 *
 * A refusal stops what goes upstream at the request's start: the upstream
 * gets a half-close (a close when part of the request went out), the
 * answers to earlier requests drain to the client, then the gateway's own
 * answer follows and the connection closes.
 *
 * With TLS the connection has two ends: the server end, facing the
 * sandbox, presents a leaf of the run's CA for the decided host only (the
 * SNI gate); the client end verifies the real upstream. Nothing of the
 * client's request goes anywhere before both handshakes are done. */
#include "gateway/filter.h"
#include "gateway/filter-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "cred/jwt.h"
#include "cred/sigv4.h"
#include "cred/store.h"
#include "gateway/reqstream.h"
#include "tls/end.h"

static enum al_secret_how how_of(enum al_present p)
{
	switch (p) {
	case AL_HOW_HEADER:
		return AL_SECRET_HEADER;
	case AL_HOW_BASIC:
		return AL_SECRET_BASIC;
	case AL_HOW_QUERY:
		return AL_SECRET_QUERY;
	case AL_HOW_SIGV4:
		return AL_SECRET_SIGV4;
	case AL_HOW_NONE:
		break;
	}
	return AL_SECRET_BODY;
}

static int sigv4_sign(void *data, const struct al_secret_use *s, const char *method,
		      size_t method_len, const char *target, size_t target_len,
		      const struct al_http_header_view *headers, size_t n, const char *body_sha256,
		      char *out, size_t size)
{
	struct al_sigv4_header h[AL_SIGV4_HEADERS_MAX + 1];
	const struct al_cred_secret *cs = NULL;
	struct gw_filter *f = data;
	struct al_error err = {0};
	char auth[AL_REQSTREAM_SIGV4_MAX];
	size_t k = 0;

	for (size_t i = 0; i < f->n_inject; i++)
		if (&f->inject[i] == s)
			cs = f->inject_src[i];
	if (!cs || n > AL_SIGV4_HEADERS_MAX)
		return -EINVAL;
	/* Signed with the real key, a request dated far from now would
	 * outlive the run: within 15 minutes, as AWS itself allows. */
	for (size_t i = 0; i < n; i++) {
		struct tm tm = {0};
		char date[17];
		if (headers[i].name_len != 10 ||
		    strncasecmp(headers[i].name, "X-Amz-Date", 10) != 0)
			continue;
		if (headers[i].value_len != 16)
			return -EINVAL;
		memcpy(date, headers[i].value, 16);
		date[16] = '\0';
		if (!strptime(date, "%Y%m%dT%H%M%SZ", &tm))
			return -EINVAL;
		time_t t = timegm(&tm), now = time(NULL);
		if (t < now - 900 || t > now + 900)
			return -EINVAL;
	}
	/* The fields as they go, and last the Authorization the sandbox
	 * signed (what the signer checks before it signs anew). */
	for (size_t i = 0; i < n; i++)
		h[k++] = (struct al_sigv4_header){headers[i].name, headers[i].name_len,
						  headers[i].value, headers[i].value_len};
	struct al_sigv4_request r = {method, method_len, target, target_len, h, k, body_sha256};
	struct al_sigv4_creds fake = {cs->ps->fake_key_id, cs->ps->fake_secret,
				      cs->fake_token[0] ? cs->fake_token : NULL};
	struct al_sigv4_creds real = {cs->value.data, cs->aws_secret.data,
				      cs->aws_token.len ? cs->aws_token.data : NULL};
	int len = al_sigv4_resign(&r, &fake, &real, auth, sizeof(auth), &err);
	if (len < 0) {
		al_debug("gateway: SigV4: %s", err.msg);
		return len == -ENOMEM ? len : -EINVAL;
	}
	if ((size_t)len >= size)
		return -ENOSPC;
	memcpy(out, auth, (size_t)len + 1);
	return len;
}

/* A per-request token for the filter's next request (minted when the one
 * before was taken, or when it is near its end). */
static int fresh_token(struct conn *c, struct gw_filter *f, size_t i)
{
	const struct al_cred_secret *s = f->inject_src[i];
	int64_t now = time(NULL);
	struct al_error err = {0};
	char *tok = NULL;

	/* A token goes with one request only, and lives its ttl from about
	 * when that request starts (one minted a while before is minted
	 * anew). */
	if (f->token[i] && !f->token_used[i] && f->token_iat[i] >= now - 1)
		return 0;
	char jti[33];
	if (al_cred_mint_request(c->gw->cred, s, c->name, now, &tok, jti, &err) < 0) {
		al_debug("gateway: %s", err.msg);
		return -EIO;
	}
	/* The heads to come carry it (the first one is given at new()). */
	if (f->rs && al_reqstream_set_value(f->rs, i, tok, strlen(tok)) < 0) {
		explicit_bzero(tok, strlen(tok));
		free(tok);
		return -EIO;
	}
	memcpy(f->jti[i], jti, sizeof(jti));
	if (f->token[i]) {
		explicit_bzero(f->token[i], strlen(f->token[i]));
		free(f->token[i]);
	}
	f->token[i] = tok;
	f->token_used[i] = false;
	f->token_iat[i] = now;
	int64_t exp = now + (int64_t)(s->ps->def->ttl_ms / 1000);
	f->token_exp[i] = exp < c->gw->cred->deadline ? exp : c->gw->cred->deadline;
	f->inject[i].value = tok;
	f->inject[i].value_len = strlen(tok);
	return 0;
}

static bool per_request(const struct gw_filter *f, size_t i)
{
	const struct al_secret_def *d = f->inject_src[i]->ps->def;
	return d->token && d->per_request;
}

static void add_inject(struct conn *c, struct gw_filter *f, const struct al_cred_secret *s)
{
	const struct al_secret_def *d = s->ps->def;
	struct al_secret_use *u = &f->inject[f->n_inject];

	if (f->n_inject == INJECT_MAX || (d->token && d->expose))
		return; /* an exposed token is the sandbox's own: nothing to put in */
	*u = (struct al_secret_use){.name = d->name,
				    .placeholder = s->ps->placeholder,
				    .value = s->value.data,
				    .value_len = s->value.len,
				    .how = how_of(d->how),
				    .header = d->header,
				    .tmpl = d->tmpl,
				    .user = d->user,
				    .param = d->param,
				    .body = d->body};
	if (d->how == AL_HOW_SIGV4) {
		u->placeholder = s->ps->fake_secret;
		u->value = s->aws_secret.data;
		u->value_len = s->aws_secret.len;
		u->fake_key_id = s->ps->fake_key_id;
		u->key_id = s->value.data;
		u->token_placeholder = s->fake_token[0] ? s->fake_token : NULL;
		u->token = s->aws_token.len ? s->aws_token.data : NULL;
		u->token_len = s->aws_token.len;
	}
	f->inject_src[f->n_inject++] = s;
	if (d->token && d->per_request)
		fresh_token(c, f, f->n_inject - 1);
}

static void rule_from_opts(struct gw_filter *f, const struct conn *c)
{
	const struct al_rule_opts *o = c->opts;

	if (!al_rule_opts_has_requests(o))
		return;
	/* A list that ended up empty allows no method (not any). */
	/* Read-only (the rule only reads its lists; a write would fault), so
	 * sharing it between connections and runs is safe. */
	static char *const none[] = {"(none)"};
	f->rule.methods = o->methods && !o->methods[0] ? (char **)none : o->methods;
	f->rule.n_methods = o->methods && !o->methods[0] ? 1 : al_strv_len(o->methods);
	f->rule.paths = o->paths;
	f->rule.n_paths = al_strv_len(o->paths);
	f->rule.max_body = o->max_body;
	f->rule.text = al_reqrule_text(&f->rule, o->rule);
	f->paths_also = o->paths_also;
	f->conf.rules = &f->rule;
}

static void on_stall(struct al_timer *t, uint64_t expirations, void *data)
{
	struct gw_filter *f = data;

	(void)t;
	(void)expirations;
	f->stall_armed = false;
	f->stalled = true;
	gw_conn_run(f->c, NULL, 0);
}

int gw_filter_new(struct conn *c, bool tls, bool proxy_form, struct al_error *err)
{
	struct gw_filter *f = xcalloc(1, sizeof(*f));
	const struct al_cred *cr = c->gw->cred;
	int r;

	f->conf.host = c->name;
	f->conf.port = c->port;
	f->conf.proxy_form = proxy_form;
	f->conf.needles = c->gw->needle_set;
	f->conf.body_max = BODY_MAX;
	f->conf.sigv4 = sigv4_sign;
	f->conf.sigv4_data = f;
	rule_from_opts(f, c);
	for (size_t i = 0; cr && i < cr->n; i++)
		if (gw_secret_scoped(&cr->v[i], c))
			add_inject(c, f, &cr->v[i]);
	f->conf.inject = f->inject;
	f->conf.n_inject = f->n_inject;
	f->c = c;
	/* Where a value can go, its answers are searched for every value. */
	if (f->n_inject && c->gw->answer_set) {
		if (!(f->stall_timer = al_loop_timer(c->gw->loop, on_stall, f))) {
			free(f);
			return al_error_setsys(err, errno, "a timer for the filtered stream");
		}
		f->ans = al_answer_new(c->gw->answer_set);
		al_answer_unescaped(f->ans, c->gw->answer_plain);
		al_answer_whole(f->ans, c->gw->answer_whole);
	}
	c->filter = f;
	if ((r = al_reqstream_new(&f->conf, &f->rs, err)) < 0)
		return r;
	if (tls && (r = gw_tls_ends(c, &f->srv, &f->cli, err)) < 0)
		return r;
	return 0;
}

int gw_filter_take(struct conn *c, const char *buf, size_t len)
{
	struct gw_filter *f = c->filter;
	size_t n = len;

	if (f->srv) {
		size_t r = al_tls_end_cipher_room(f->srv);
		n = n < r ? n : r;
		if (n && al_tls_end_put_cipher(f->srv, buf, n) < 0)
			return -ENOBUFS;
	} else {
		fb_compact(&f->in);
		n = n < fb_room(&f->in) ? n : fb_room(&f->in);
		fb_put(&f->in, buf, n);
	}
	return (int)n;
}

/* What the stages before read of the client (c->up.b or the head),
 * handed over as it fits. */
void gw_filter_early(struct conn *c)
{
	struct buf *b = &c->up.b;

	if (!b->len)
		return;
	int n = gw_filter_take(c, b->data + b->off, b->len);
	if (n > 0) {
		b->off += (size_t)n;
		b->len -= (size_t)n;
		if (!b->len)
			b->off = 0;
	}
}

void gw_filter_free(struct conn *c)
{
	struct gw_filter *f = c->filter;

	if (!f)
		return;
	al_reqstream_free(f->rs);
	al_timer_free(f->stall_timer);
	al_answer_free(f->ans);
	al_tls_end_free(f->srv);
	al_tls_end_free(f->cli);
	free(f->rule.text);
	for (size_t i = 0; i < INJECT_MAX; i++)
		if (f->token[i]) {
			explicit_bzero(f->token[i], strlen(f->token[i]));
			free(f->token[i]);
		}
	explicit_bzero(f, sizeof(*f));
	free(f);
	c->filter = NULL;
}

/* The gateway's answer to a refused request. */
static void set_answer(struct gw_filter *f, int status, const char *rule, const char *detail)
{
	/* Every 403 names what refused it in X-Airlock-Denied: the rule, or
	 * the reason. */
	int n = status == 403
		    ? al_http_format_denied(rule ? rule : detail, f->answer, sizeof(f->answer))
		    : al_http_format_response(status, detail, f->answer, sizeof(f->answer));
	if (n < 0)
		n = al_http_format_response(403, detail, f->answer, sizeof(f->answer));
	f->answer_len = n > 0 ? (size_t)n : 0;
}

static void audit_request(struct conn *c, const struct al_reqstream_request *q, const char *what,
			  int status, const char *rule, const char *reason)
{
	json_t *o = json_pack("{s:s, s:s, s:i, s:s%, s:s%}", "decision", what, "host", c->name,
			      "port", c->port, "method", q ? q->method : "", q ? q->method_len : 0,
			      "path", q ? q->path : "", q ? q->path_len : 0);
	if (status)
		json_object_set_new(o, "status", json_integer(status));
	if (rule)
		json_object_set_new(o, "rule", json_string(rule));
	if (reason)
		json_object_set_new(o, "reason", json_string(reason));
	al_audit_emit(c->gw->audit, "net.request", o);
}

static void refuse(struct conn *c, struct gw_filter *f, const struct al_reqstream_event *ev)
{
	f->refused = true;
	if (ev->kind == AL_REQSTREAM_MISUSE && ev->needle >= 0) {
		const struct al_cred_secret *s =
		    &c->gw->cred->v[c->gw->needle_owner[(size_t)ev->needle]];
		gw_audit_misuse(c->gw, (size_t)ev->needle, ev->where, c->name, c->port);
		/* The connection was allowed; it carries no more requests. The
		 * 403 names what was refused, as every refusal's does. */
		gw_cut(c, GW_ANSWER_NONE, 0, 0,
		       "the placeholder of secret %s is in the %s, which is not where it goes",
		       s->ps->def->name, ev->where);
		set_answer(f, 403, c->reason, c->reason);
	} else {
		audit_request(c, ev->req.method ? &ev->req : NULL, "deny", ev->status, ev->rule,
			      ev->reason);
		set_answer(f, ev->status, ev->rule, ev->reason);
	}
	/* Nothing more goes up. A request cut half-way: the upstream is
	 * closed, no answer waited for. With no request before it, the same.
	 * Otherwise the requests before it go out in full, then the upstream
	 * gets a half-close (filter-pump.c), and their answers come back
	 * before ours. */
	if (ev->cut || f->forwarded == 0) {
		f->up.len = 0;
		f->u_out.len = 0;
		if (!c->upstream.shut && c->upstream.fd >= 0)
			shutdown(c->upstream.fd, SHUT_RDWR);
		c->upstream.shut = true;
		c->upstream.eof = true;
	}
}

/* A request about to go out: the operator's paths, the budget, the
 * audit. */
static void on_request(struct conn *c, struct gw_filter *f, const struct al_reqstream_event *ev)
{
	const struct al_reqstream_request *q = &ev->req;
	bool ok = true, group = false, any = false;

	/* Every operator list (one after the other, "" between) must match. */
	for (size_t i = 0; f->paths_also; i++) {
		const char *pat = f->paths_also[i];
		if (!pat || !pat[0]) {
			if (any)
				ok &= group;
			group = any = false;
			if (!pat)
				break;
			continue;
		}
		any = true;
		group |= al_reqrule_path_match(pat, q->path, q->path_len);
	}
	if (!ok) {
		al_reqstream_refuse(f->rs, 403, "the operator's rule does not allow this path");
		return;
	}
	if (!gw_budget_charge(c->gw, c->name, 1, 0)) {
		al_reqstream_refuse(f->rs, 402, "the run's spend budget is spent");
		return;
	}
	for (size_t i = 0; i < q->n_injected; i++)
		for (size_t k = 0; k < f->n_inject; k++) {
			if (strcmp(q->injected[i], f->inject[k].name) != 0 || !per_request(f, k))
				continue;
			f->token_used[k] = true;
			al_audit_emit(c->gw->audit, "token.minted",
				      json_pack("{s:s, s:s, s:s, s:I}", "name", f->inject[k].name,
						"jti", f->jti[k], "aud", c->name, "exp",
						(json_int_t)f->token_exp[k]));
			/* The next request's, before its head is built. */
			if (fresh_token(c, f, k) < 0)
				al_reqstream_refuse(f->rs, 500, "a token could not be minted");
		}
	if (q->n_injected) {
		json_t *names = json_array();
		for (size_t i = 0; i < q->n_injected; i++)
			json_array_append_new(names, json_string(q->injected[i]));
		al_audit_emit(c->gw->audit, "secret.use",
			      json_pack("{s:o, s:s, s:i, s:s%, s:s%}", "secrets", names, "host",
					c->name, "port", c->port, "method", q->method,
					q->method_len, "path", q->path, q->path_len));
	}
	if (f->ans && al_answer_expect(f->ans, q->method_len == 4 &&
						   strncasecmp(q->method, "HEAD", 4) == 0) < 0) {
		al_reqstream_refuse(f->rs, 503, "too many requests wait for their answers");
		return;
	}
	f->forwarded++;
}

/* Pull the filter's events: its output into f->up. */
static void pull(struct conn *c, struct gw_filter *f)
{
	struct al_reqstream_event ev;

	while (!f->refused) {
		size_t r = fb_room(&f->up);
		if (r < FBUF / 4) {
			fb_compact(&f->up);
			r = fb_room(&f->up);
		}
		switch (al_reqstream_next(f->rs, r, &ev)) {
		case AL_REQSTREAM_MORE:
			return;
		case AL_REQSTREAM_DATA:
			if (!gw_budget_charge(c->gw, c->name, 0, ev.len)) {
				al_reqstream_refuse(f->rs, 402, "the run's spend budget is spent");
				break;
			}
			fb_put(&f->up, ev.data, ev.len);
			break;
		case AL_REQSTREAM_REQUEST:
			on_request(c, f, &ev);
			break;
		case AL_REQSTREAM_REFUSED:
		case AL_REQSTREAM_MISUSE:
			refuse(c, f, &ev);
			return;
		case AL_REQSTREAM_END:
			f->client_done = true;
			return;
		}
	}
}

/* The client's plaintext into the filter (per-request tokens fresh). */
void gw_filter_feed(struct conn *c, struct gw_filter *f)
{
	while (f->in.len && !f->refused) {
		for (size_t i = 0; i < f->n_inject; i++)
			if (per_request(f, i) && fresh_token(c, f, i) < 0) {
				al_reqstream_refuse(f->rs, 500, "a token could not be minted");
				break;
			}
		size_t n = al_reqstream_feed(f->rs, f->in.d + f->in.off, f->in.len);
		fb_take(&f->in, n);
		pull(c, f);
		if (!n)
			break;
	}
	if (c->client.eof && !f->in.len && !f->client_done && !f->refused) {
		al_reqstream_eof(f->rs);
		pull(c, f);
	}
}
