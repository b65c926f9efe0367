/* The claim's messages between the supervisor and its gateway (proto.h):
 * AL_GWP_CLAIM carries what a warm pool's sandbox takes on when a request
 * claims it (docs/pool.md): the allowlist, its rules' request options and
 * the secrets the gateway presents, with their values. Its payload is a
 * JSON object without any value, a NUL, then each secret's value as a u32
 * length and its bytes, in the order of "secrets" (values never pass
 * through a JSON library's memory). The gateway answers AL_GWP_CLAIMED.
 * Both are checked as strictly as every message of the channel: the
 * decoder is fuzzed with the rest. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/util.h"
#include "cred/store.h"
#include "gateway/proto.h"
#include "net/reqrule.h"
#include "policy/cred.h"

#define CLAIM_MAX_RULES 256
#define CLAIM_MAX_LIST	64 /* methods, paths, hosts of one entry */
#define CLAIM_MAX_TEXT	512

static const char *how_name(enum al_present how)
{
	switch (how) {
	case AL_HOW_HEADER:
		return "header";
	case AL_HOW_BASIC:
		return "basic";
	case AL_HOW_QUERY:
		return "query";
	case AL_HOW_NONE:
		return "none";
	default:
		return NULL;
	}
}

static json_t *strv_json(char *const *v)
{
	json_t *a = json_array();

	for (size_t i = 0; v && v[i]; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

static json_t *claim_json(const struct al_plan *p, const struct al_cred *c)
{
	json_t *allow = json_array(), *rules = json_array(), *secrets = json_array();

	for (size_t i = 0; i < al_allow_count(p->allow); i++)
		json_array_append_new(
		    allow, json_string(al_allow_rule_text(al_allow_rule_at(p->allow, i))));
	for (size_t i = 0; i < p->n_rule_opts; i++) {
		const struct al_rule_opts *o = p->rule_opts[i];
		json_t *r =
		    json_pack("{s:s, s:I}", "rule", o->rule, "max_body", (json_int_t)o->max_body);
		if (o->methods)
			json_object_set_new(r, "methods", strv_json(o->methods));
		if (o->paths)
			json_object_set_new(r, "paths", strv_json(o->paths));
		if (o->paths_also)
			json_object_set_new(r, "paths_also", strv_json(o->paths_also));
		json_array_append_new(rules, r);
	}
	for (size_t i = 0; c && i < c->n; i++) {
		const struct al_plan_secret *ps = c->v[i].ps;
		const struct al_secret_def *d = ps->def;
		json_t *s = json_pack("{s:s, s:o, s:s, s:b, s:s}", "name", d->name, "hosts",
				      strv_json(d->hosts), "how", how_name(d->how), "body", d->body,
				      "placeholder", ps->placeholder);
		if (d->header)
			json_object_set_new(s, "header", json_string(d->header));
		if (d->tmpl)
			json_object_set_new(s, "template", json_string(d->tmpl));
		if (d->user)
			json_object_set_new(s, "user", json_string(d->user));
		if (d->param)
			json_object_set_new(s, "param", json_string(d->param));
		json_array_append_new(secrets, s);
	}
	return json_pack("{s:o, s:o, s:o}", "allow", allow, "rules", rules, "secrets", secrets);
}

int al_gwp_encode_claim(const struct al_plan *p, const struct al_cred *c, uint8_t *out, size_t size)
{
	struct al_gwp_hdr h = {.type = AL_GWP_CLAIM};
	size_t cap = size < AL_GWP_MAX ? size : AL_GWP_MAX;

	/* What a claim cannot carry: the decoder would refuse it. */
	if (p->intercept || (c && c->n > AL_PLAN_SECRETS_MAX))
		return -EOPNOTSUPP;
	for (size_t i = 0; c && i < c->n; i++)
		if (c->v[i].ps->def->token || !how_name(c->v[i].ps->def->how))
			return -EOPNOTSUPP;
	json_t *j = claim_json(p, c);
	char *text = j ? json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
	json_decref(j);
	if (!text)
		return -ENOMEM;
	size_t n = sizeof(h) + strlen(text) + 1;
	if (n > cap) {
		free(text);
		return -E2BIG;
	}
	memcpy(out + sizeof(h), text, n - sizeof(h));
	free(text);
	for (size_t i = 0; c && i < c->n; i++) {
		const struct al_secret_value *v = &c->v[i].value;
		uint32_t len = (uint32_t)v->len;
		if (v->len > UINT32_MAX || 4 + v->len > cap - n) {
			explicit_bzero(out, n);
			return -E2BIG;
		}
		memcpy(out + n, &len, 4);
		memcpy(out + n + 4, v->data, v->len);
		n += 4 + v->len;
	}
	h.len = (uint32_t)(n - sizeof(h));
	memcpy(out, &h, sizeof(h));
	return (int)n;
}

int al_gwp_encode_claimed(int error, const char *text, uint8_t *out, size_t size)
{
	struct al_gwp_hdr h = {.type = AL_GWP_CLAIMED};
	int32_t e = error;
	size_t tl = text ? strnlen(text, 255) : 0;
	size_t n = sizeof(h) + sizeof(e) + tl;

	if (n > size)
		return -ENOSPC;
	h.len = (uint32_t)(n - sizeof(h));
	memcpy(out, &h, sizeof(h));
	memcpy(out + sizeof(h), &e, sizeof(e));
	memcpy(out + sizeof(h) + sizeof(e), text, tl);
	return (int)n;
}

/* ---- decoding ------------------------------------------------------------ */

static int bad(struct al_error *err, const char *what, const char *detail)
{
	return al_error_set(err, EINVAL, "gateway message: claim: %s%s%s", what, detail ? ": " : "",
			    detail ? detail : "");
}

static bool printable(const char *s, size_t max)
{
	size_t l = strnlen(s, max + 1);

	if (l == 0 || l > max)
		return false;
	for (size_t i = 0; i < l; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
			return false;
	return true;
}

static bool only_keys(const json_t *o, const char *const *keys)
{
	const char *k;
	json_t *v;

	json_object_foreach((json_t *)o, k, v)
	{
		bool known = false;
		for (size_t i = 0; keys[i] && !known; i++)
			known = strcmp(k, keys[i]) == 0;
		if (!known)
			return false;
		(void)v;
	}
	return true;
}

/* An array of at most max printable strings, each passing check (may be
 * NULL); absent is fine unless required. */
static int strings(const json_t *a, bool required, size_t max,
		   int (*check)(const char *s, struct al_error *err), const char *what,
		   struct al_error *err)
{
	size_t i;
	json_t *v;

	if (!a)
		return required ? bad(err, what, "missing") : 0;
	if (!json_is_array(a) || json_array_size(a) > max)
		return bad(err, what, "not an array of its size");
	json_array_foreach(a, i, v)
	{
		if (!json_is_string(v) || !printable(json_string_value(v), CLAIM_MAX_TEXT))
			return bad(err, what, "an entry is not printable text");
		struct al_error e = {0};
		if (check && check(json_string_value(v), &e) < 0)
			return bad(err, what, e.msg);
	}
	return 0;
}

static int check_rule(const char *s, struct al_error *err)
{
	return al_allow_add(NULL, s, err);
}

static bool in_strings(const json_t *a, const char *s)
{
	size_t i;
	json_t *v;

	json_array_foreach(a, i, v) if (strcmp(json_string_value(v), s) == 0) return true;
	return false;
}

static int decode_rules(const json_t *rules, const json_t *allow, struct al_error *err)
{
	static const char *const keys[] = {"rule",	 "methods",  "paths",
					   "paths_also", "max_body", NULL};
	size_t i;
	json_t *r;
	int e;

	if (!json_is_array(rules) || json_array_size(rules) > CLAIM_MAX_RULES)
		return bad(err, "rules", "not an array of its size");
	json_array_foreach(rules, i, r)
	{
		const json_t *rule = json_object_get(r, "rule"),
			     *mb = json_object_get(r, "max_body");
		if (!json_is_object(r) || !only_keys(r, keys))
			return bad(err, "rules", "an entry with unknown fields");
		if (!json_is_string(rule) || !in_strings(allow, json_string_value(rule)))
			return bad(err, "rules", "an entry for a rule not in the allowlist");
		if (!json_is_integer(mb) || json_integer_value(mb) < 0)
			return bad(err, "rules", "max_body is not a size");
		if ((e = strings(json_object_get(r, "methods"), false, CLAIM_MAX_LIST,
				 al_reqrule_method_check, "rules.methods", err)) < 0 ||
		    (e = strings(json_object_get(r, "paths"), false, CLAIM_MAX_LIST,
				 al_reqrule_pattern_check, "rules.paths", err)) < 0 ||
		    (e = strings(json_object_get(r, "paths_also"), false, CLAIM_MAX_LIST,
				 al_reqrule_pattern_check, "rules.paths_also", err)) < 0)
			return e;
	}
	return 0;
}

static bool is_placeholder(const char *s)
{
	static const char prefix[] = "airlock-ph-";
	size_t pl = sizeof(prefix) - 1;

	if (strlen(s) != pl + 32 || strncmp(s, prefix, pl) != 0)
		return false;
	for (size_t i = pl; s[i]; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

static bool is_name(const char *s)
{
	if (!printable(s, 64) || !((*s >= 'A' && *s <= 'Z') || *s == '_'))
		return false;
	for (; *s; s++)
		if (!((*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_'))
			return false;
	return true;
}

/* A header the gateway may set: a token, not one that frames the request. */
static bool header_ok(const char *s)
{
	if (!printable(s, 128))
		return false;
	for (const char *q = s; *q; q++)
		if (!al_is_tchar(*q))
			return false;
	return strcasecmp(s, "Host") && strcasecmp(s, "Content-Length") &&
	       strcasecmp(s, "Transfer-Encoding") && strcasecmp(s, "Connection");
}

static int decode_secret(const json_t *s, struct al_error *err)
{
	static const char *const keys[] = {"name",   "hosts", "how",   "body",	   "placeholder",
					   "header", "user",  "param", "template", NULL};
	const char *name = json_string_value(json_object_get(s, "name"));
	const char *how = json_string_value(json_object_get(s, "how"));
	const char *ph = json_string_value(json_object_get(s, "placeholder"));
	const char *hdr = json_string_value(json_object_get(s, "header"));
	const char *tmpl = json_string_value(json_object_get(s, "template"));
	const char *user = json_string_value(json_object_get(s, "user"));
	const char *param = json_string_value(json_object_get(s, "param"));
	const json_t *body = json_object_get(s, "body");
	int e;

	if (!json_is_object(s) || !only_keys(s, keys))
		return bad(err, "secrets", "an entry with unknown fields");
	if (!name || !is_name(name))
		return bad(err, "secrets", "a name that is not a variable's");
	if (!ph || !is_placeholder(ph))
		return bad(err, "secrets", "a placeholder not of airlock's form");
	if (!json_is_boolean(body))
		return bad(err, "secrets", "body is not a boolean");
	if ((e = strings(json_object_get(s, "hosts"), true, CLAIM_MAX_LIST, check_rule,
			 "secrets.hosts", err)) < 0)
		return e;
	if (json_array_size(json_object_get(s, "hosts")) == 0)
		return bad(err, "secrets.hosts", "empty");
	/* Each field present only for its way, and of its form. */
	if ((json_object_get(s, "header") && !hdr) || (json_object_get(s, "template") && !tmpl) ||
	    (json_object_get(s, "user") && !user) || (json_object_get(s, "param") && !param))
		return bad(err, "secrets", "a field that is not a string");
	if (!how)
		return bad(err, "secrets", "no way to present it");
	if (strcmp(how, "header") == 0) {
		const char *brace = tmpl ? strstr(tmpl, "{}") : NULL;
		if (!hdr || !header_ok(hdr) || !tmpl || !printable(tmpl, CLAIM_MAX_TEXT) ||
		    !brace || strstr(brace + 2, "{}") || user || param)
			return bad(err, "secrets", "a header that is not a field and a template");
	} else if (strcmp(how, "basic") == 0) {
		if (!user || !printable(user, 128) || strchr(user, ':') || hdr || tmpl || param)
			return bad(err, "secrets", "basic without a user, or with other fields");
	} else if (strcmp(how, "query") == 0) {
		if (!param || !printable(param, 128) || hdr || tmpl || user)
			return bad(err, "secrets",
				   "query without a parameter, or with other fields");
	} else if (strcmp(how, "none") == 0) {
		if (!json_is_true(body) || hdr || tmpl || user || param)
			return bad(err, "secrets", "neither a way to present it nor the body");
	} else {
		return bad(err, "secrets", "an unknown way to present it");
	}
	return 0;
}

int al_gwp_decode_claim(const uint8_t *p, size_t len, struct al_gwp_msg *ret, struct al_error *err)
{
	static const char *const keys[] = {"allow", "rules", "secrets", NULL};
	const uint8_t *nul = memchr(p, '\0', len);
	json_error_t jerr;
	size_t i;
	json_t *s;
	int e;

	if (!nul)
		return bad(err, "no end to its description", NULL);
	json_t *o = json_loadb((const char *)p, (size_t)(nul - p), JSON_REJECT_DUPLICATES, &jerr);
	if (!o || !json_is_object(o) || !only_keys(o, keys)) {
		json_decref(o);
		return bad(err, "its description is not the object it must be", NULL);
	}
	const json_t *allow = json_object_get(o, "allow"), *secrets = json_object_get(o, "secrets");
	if ((e = strings(allow, true, CLAIM_MAX_RULES, check_rule, "allow", err)) < 0 ||
	    (e = decode_rules(json_object_get(o, "rules"), allow, err)) < 0)
		goto fail;
	if (!json_is_array(secrets) || json_array_size(secrets) > AL_PLAN_SECRETS_MAX) {
		e = bad(err, "secrets", "not an array of its size");
		goto fail;
	}
	json_array_foreach(secrets, i, s) if ((e = decode_secret(s, err)) < 0) goto fail;
	/* The values: one per secret, each 1 byte or more, nothing after. */
	size_t off = (size_t)(nul - p) + 1;
	for (i = 0; i < json_array_size(secrets); i++) {
		uint32_t vl;
		if (len - off < 4) {
			e = bad(err, "a value missing", NULL);
			goto fail;
		}
		memcpy(&vl, p + off, 4);
		if (vl == 0 || vl > len - off - 4) {
			e = bad(err, "a value of the wrong size", NULL);
			goto fail;
		}
		ret->claim_value[i].off = (uint32_t)(off + 4);
		ret->claim_value[i].len = vl;
		off += 4 + vl;
	}
	if (off != len) {
		e = bad(err, "bytes after its values", NULL);
		goto fail;
	}
	ret->claim = o;
	return 0;
fail:
	json_decref(o);
	return e;
}

int al_gwp_decode_claimed(const uint8_t *p, size_t len, struct al_gwp_msg *ret,
			  struct al_error *err)
{
	int32_t e;

	if (len < sizeof(e) || len - sizeof(e) >= sizeof(ret->text))
		return al_error_set(err, EINVAL, "gateway message: claimed of the wrong size");
	memcpy(&e, p, sizeof(e));
	if (e < 0 || e > 4095)
		return al_error_set(err, EINVAL,
				    "gateway message: claimed with an error out of range");
	ret->error = e;
	size_t tl = len - sizeof(e);
	memcpy(ret->text, p + sizeof(e), tl);
	ret->text[tl] = '\0';
	for (size_t k = 0; k < tl; k++)
		if ((unsigned char)ret->text[k] < 0x20 || (unsigned char)ret->text[k] > 0x7e)
			ret->text[k] = '?';
	return 0;
}
