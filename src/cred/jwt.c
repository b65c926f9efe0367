/* JWTs: minting and strict verification (what each check refuses, and why,
 * is in jwt.h). */
#include "cred/jwt-internal.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "cred/base64url.h"

#define QUOTE_MAX 64 /* characters of a token's value quoted in an error */

int al_jwt_new_jti(char out[AL_JWT_JTI_LEN + 1], struct al_error *err)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char r[AL_JWT_JTI_LEN / 2];

	if (RAND_bytes(r, sizeof(r)) != 1)
		return al_jwt_ossl_error(err, EIO, "no randomness for a jti");
	for (size_t i = 0; i < sizeof(r); i++) {
		out[2 * i] = hex[r[i] >> 4];
		out[2 * i + 1] = hex[r[i] & 15];
	}
	out[AL_JWT_JTI_LEN] = '\0';
	return 0;
}

static int hmac(const struct al_jwt_key *k, const char *in, size_t n,
		unsigned char out[JWT_HS256_SIG], struct al_error *err)
{
	EVP_MAC_CTX *c = EVP_MAC_CTX_dup(k->mac);
	size_t len = 0;
	bool ok = c && EVP_MAC_update(c, (const unsigned char *)in, n) == 1 &&
		  EVP_MAC_final(c, out, &len, JWT_HS256_SIG) == 1 && len == JWT_HS256_SIG;

	EVP_MAC_CTX_free(c);
	return ok ? 0 : al_jwt_ossl_error(err, EIO, "HMAC-SHA-256 failed");
}

int al_jwt_sign(const struct al_jwt_key *k, const char *in, size_t n, unsigned char *sig,
		size_t *ret_len, struct al_error *err)
{
	if (k->alg == AL_JWT_HS256) {
		*ret_len = JWT_HS256_SIG;
		return hmac(k, in, n, sig, err);
	}
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	size_t len = JWT_ED25519_SIG;
	/* Ed25519 hashes the message itself: no digest is named. */
	bool ok = md && EVP_DigestSignInit(md, NULL, NULL, NULL, k->pkey) == 1 &&
		  EVP_DigestSign(md, sig, &len, (const unsigned char *)in, n) == 1 &&
		  len == JWT_ED25519_SIG;

	EVP_MD_CTX_free(md);
	if (!ok)
		return al_jwt_ossl_error(err, EIO, "Ed25519 signing failed");
	*ret_len = len;
	return 0;
}

static int add_string(json_t *o, const char *name, const char *v, struct al_error *err)
{
	json_t *s;

	if (!v)
		return 0;
	if (!(s = json_string(v)))
		return al_error_set(err, EINVAL, "claim \"%s\" is not valid UTF-8", name);
	json_object_set_new(o, name, s);
	return 0;
}

static int add_aud(json_t *o, const struct al_jwt_claims *c, struct al_error *err)
{
	json_t *a;

	if (c->n_aud == 1)
		return add_string(o, "aud", c->aud[0], err);
	if (c->n_aud == 0)
		return 0;
	a = json_array();
	json_object_set_new(o, "aud", a);
	for (size_t i = 0; i < c->n_aud; i++) {
		json_t *s = c->aud[i] ? json_string(c->aud[i]) : NULL;
		if (!s)
			return al_error_set(err, EINVAL, "audience %zu is %s", i,
					    c->aud[i] ? "not valid UTF-8" : "NULL");
		json_array_append_new(a, s);
	}
	return 0;
}

static int check_times(const struct al_jwt_claims *c, struct al_error *err)
{
	if (c->exp <= 0)
		return al_error_set(err, EINVAL,
				    "exp %lld: a token needs an expiry after the epoch",
				    (long long)c->exp);
	if (c->iat < 0 || c->nbf < 0)
		return al_error_set(err, EINVAL, "%s is before the epoch",
				    c->iat < 0 ? "iat" : "nbf");
	if (c->iat && c->exp <= c->iat)
		return al_error_set(err, EINVAL, "exp %lld is not after iat %lld",
				    (long long)c->exp, (long long)c->iat);
	if (c->nbf && c->exp <= c->nbf)
		return al_error_set(err, EINVAL, "exp %lld is not after nbf %lld",
				    (long long)c->exp, (long long)c->nbf);
	return 0;
}

/* The payload in claim order: iss, sub, aud, iat, nbf, exp, jti, scope. */
static int payload_text(const struct al_jwt_claims *c, char **ret, struct al_error *err)
{
	_cleanup_(json_decrefp) json_t *o = json_object();
	int r;

	if ((r = add_string(o, "iss", c->iss, err)) < 0 ||
	    (r = add_string(o, "sub", c->sub, err)) < 0 || (r = add_aud(o, c, err)) < 0)
		return r;
	if (c->iat)
		json_object_set_new(o, "iat", json_integer(c->iat));
	if (c->nbf)
		json_object_set_new(o, "nbf", json_integer(c->nbf));
	json_object_set_new(o, "exp", json_integer(c->exp));
	if ((r = add_string(o, "jti", c->jti, err)) < 0 ||
	    (r = add_string(o, "scope", c->scope, err)) < 0)
		return r;
	if (!(*ret = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER)))
		return al_error_set(err, ENOMEM, "cannot encode the claims");
	return 0;
}

int al_jwt_mint(const struct al_jwt_key *k, const struct al_jwt_claims *c, char **ret_token,
		struct al_error *err)
{
	_cleanup_free_ char *payload = NULL, *tok = NULL;
	unsigned char sig[JWT_ED25519_SIG];
	size_t plen, n, sig_len;
	int r;

	if (!k->can_sign)
		return al_error_set(
		    err, ENOKEY,
		    "this Ed25519 key is a public key: it verifies tokens, it cannot "
		    "mint them");
	if ((r = check_times(c, err)) < 0)
		return r;
	if ((r = payload_text(c, &payload, err)) < 0)
		return r;
	plen = strlen(payload);
	n = k->header_len + 1 + al_b64url_encoded_len(plen) + 1 +
	    al_b64url_encoded_len(JWT_ED25519_SIG);
	if (n > AL_JWT_TOKEN_MAX)
		return al_error_set(err, EINVAL,
				    "the token would be about %zu bytes, more than %d: fewer or "
				    "shorter claims",
				    n, AL_JWT_TOKEN_MAX);
	tok = xmalloc(n + 1);
	memcpy(tok, k->header, k->header_len);
	n = k->header_len;
	tok[n++] = '.';
	n += al_b64url_encode(payload, plen, tok + n);
	if ((r = al_jwt_sign(k, tok, n, sig, &sig_len, err)) < 0)
		return r;
	tok[n++] = '.';
	al_b64url_encode(sig, sig_len, tok + n);
	*ret_token = TAKE_PTR(tok);
	return 0;
}

int al_jwt_prefix(const struct al_jwt_key *k, const char *iss, const char *sub, char **ret,
		  struct al_error *err)
{
	_cleanup_(json_decrefp) json_t *o = json_object();
	_cleanup_free_ char *text = NULL;
	int r;

	/* payload_text writes iss and sub first, then the audience. */
	if ((r = add_string(o, "iss", iss, err)) < 0 || (r = add_string(o, "sub", sub, err)) < 0)
		return r;
	if (!(text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER)))
		return al_error_set(err, ENOMEM, "cannot encode the claims");
	size_t plen = strlen(text) - 1; /* the closing brace is a comma there */
	plen -= plen % 3;
	char *out = xmalloc(k->header_len + 1 + al_b64url_encoded_len(plen) + 1);
	memcpy(out, k->header, k->header_len);
	out[k->header_len] = '.';
	size_t n = k->header_len + 1 + al_b64url_encode(text, plen, out + k->header_len + 1);
	out[n] = '\0';
	*ret = out;
	return 0;
}

/* ---- verification ---- */

/* The three parts of a token, as offsets into it. */
struct parts {
	const char *header, *payload, *sig;
	size_t header_len, payload_len, sig_len;
};

static int split(const char *t, size_t len, struct parts *p, struct al_error *err)
{
	const char *dot1, *dot2;
	size_t dots = 0;

	if (len == 0)
		return al_error_set(err, EINVAL, "empty token");
	if (len > AL_JWT_TOKEN_MAX)
		return al_error_set(err, EINVAL, "%zu bytes: a token is at most %d", len,
				    AL_JWT_TOKEN_MAX);
	for (size_t i = 0; i < len; i++)
		dots += t[i] == '.';
	if (dots != 2)
		return al_error_set(err, EINVAL, "%zu part%s separated by '.': a JWT has 3%s",
				    dots + 1, dots ? "s" : "",
				    dots == 4 ? " (5 is an encrypted JWE, which is not supported)"
					      : "");
	dot1 = memchr(t, '.', len);
	dot2 = memchr(dot1 + 1, '.', len - (size_t)(dot1 + 1 - t));
	*p = (struct parts){
	    .header = t,
	    .header_len = (size_t)(dot1 - t),
	    .payload = dot1 + 1,
	    .payload_len = (size_t)(dot2 - dot1 - 1),
	    .sig = dot2 + 1,
	    .sig_len = len - (size_t)(dot2 + 1 - t),
	};
	if (p->header_len == 0 || p->payload_len == 0)
		return al_error_set(err, EINVAL, "empty %s", p->header_len ? "payload" : "header");
	return 0;
}

/* One part, base64url-decoded and parsed as a JSON object. */
static int part_json(const char *in, size_t len, const char *what, json_t **ret,
		     struct al_error *err)
{
	_cleanup_free_ unsigned char *buf = xmalloc(al_b64url_decoded_max(len) + 1);
	json_error_t je;
	long n = al_b64url_decode(in, len, buf, what, err);
	json_t *j;

	if (n < 0)
		return (int)n;
	/* Duplicate names are refused: two "alg" or two "aud" would let two
	 * implementations read two different tokens. */
	j = json_loadb((const char *)buf, (size_t)n, JSON_REJECT_DUPLICATES, &je);
	if (!j)
		return al_error_set(err, EINVAL, "%s: not JSON: %s", what, je.text);
	if (!json_is_object(j)) {
		json_decref(j);
		return al_error_set(err, EINVAL, "%s: not a JSON object", what);
	}
	*ret = j;
	return 0;
}

/* v as JSON, ASCII only and cut short: how a token's value is quoted. */
static const char *quote(const json_t *v, char buf[QUOTE_MAX + 4])
{
	_cleanup_free_ char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_ENSURE_ASCII | JSON_COMPACT);

	if (!s)
		return "?";
	snprintf(buf, QUOTE_MAX + 4, "%.*s%s", QUOTE_MAX, s, strlen(s) > QUOTE_MAX ? "..." : "");
	return buf;
}

static int check_alg(const struct al_jwt_key *k, const json_t *h, struct al_error *err)
{
	const json_t *alg = json_object_get(h, "alg");
	const char *want = al_jwt_alg_name(k->alg);
	char q[QUOTE_MAX + 4];

	if (!alg)
		return al_error_set(err, EINVAL, "header has no \"alg\"");
	if (!json_is_string(alg))
		return al_error_set(err, EINVAL, "header: \"alg\" is %s, not a string",
				    quote(alg, q));
	if (strcasecmp(json_string_value(alg), "none") == 0)
		return al_error_set(err, EINVAL, "alg %s: unsigned tokens are refused",
				    quote(alg, q));
	if (strcmp(json_string_value(alg), want) != 0)
		return al_error_set(err, EINVAL,
				    "alg %s, but the key is %s (alg \"%s\"): refused, a token "
				    "names the key's own algorithm",
				    quote(alg, q),
				    k->alg == AL_JWT_EDDSA ? "an Ed25519 key" : "an HS256 secret",
				    want);
	return 0;
}

static int check_header(const struct al_jwt_key *k, const json_t *h, struct al_error *err)
{
	const json_t *kid = json_object_get(h, "kid"), *typ = json_object_get(h, "typ");
	char q[QUOTE_MAX + 4];
	int r;

	if ((r = check_alg(k, h, err)) < 0)
		return r;
	/* A critical extension changes what the token means (RFC 7515 4.1.11);
	 * none is understood here, so any is refused. */
	if (json_object_get(h, "crit"))
		return al_error_set(err, EINVAL,
				    "header has \"crit\": no critical extension is supported");
	if (kid && (!json_is_string(kid) || strcmp(json_string_value(kid), k->kid) != 0))
		return al_error_set(err, EINVAL, "kid %s is not this key's (\"%s\")", quote(kid, q),
				    k->kid);
	if (typ && (!json_is_string(typ) || strcasecmp(json_string_value(typ), "JWT") != 0))
		return al_error_set(err, EINVAL, "typ %s: not a JWT", quote(typ, q));
	return 0;
}

int al_jwt_check_signature(const struct al_jwt_key *k, const char *in, size_t n,
			   const unsigned char *sig, size_t sig_len, struct al_error *err)
{
	size_t want = k->alg == AL_JWT_HS256 ? JWT_HS256_SIG : JWT_ED25519_SIG;
	unsigned char mac[JWT_HS256_SIG];
	int r;

	if (sig_len != want)
		return al_error_set(err, EBADMSG, "bad signature: %zu bytes, %s signature has %zu",
				    sig_len, k->alg == AL_JWT_HS256 ? "an HS256" : "an EdDSA",
				    want);
	if (k->alg == AL_JWT_HS256) {
		if ((r = hmac(k, in, n, mac, err)) < 0)
			return r;
		/* Constant time: how much of a guess matched must not show. */
		r = CRYPTO_memcmp(mac, sig, sizeof(mac));
		OPENSSL_cleanse(mac, sizeof(mac));
		return r == 0 ? 0 : al_error_set(err, EBADMSG, "bad signature");
	}
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	if (!md || EVP_DigestVerifyInit(md, NULL, NULL, NULL, k->pkey) != 1) {
		EVP_MD_CTX_free(md);
		return al_jwt_ossl_error(err, EIO, "cannot set up Ed25519 verification");
	}
	r = EVP_DigestVerify(md, sig, sig_len, (const unsigned char *)in, n);
	EVP_MD_CTX_free(md);
	ERR_clear_error();
	return r == 1 ? 0 : al_error_set(err, EBADMSG, "bad signature");
}

/* "2026-12-01T20:10:00Z", or the number where no date fits (before 1970 or
 * after 9999: "-5", "1.79e+63"). A claim is any JSON number, so the range is
 * checked on the double before it becomes a time_t: converting one out of
 * time_t's range is undefined. */
static const char *date(double t, char buf[32])
{
	struct tm tm;
	time_t s;

	if (!(t >= 0 && t <= 253402300799.0)) {
		snprintf(buf, 32, "%.15g", t);
		return buf;
	}
	s = (time_t)t;
	if (!gmtime_r(&s, &tm) || !strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(buf, 32, "%.15g", t);
	return buf;
}

/* A NumericDate claim: 1 with *ret set, 0 when absent, or -EINVAL. */
static int numeric_date(const json_t *c, const char *name, double *ret, struct al_error *err)
{
	const json_t *v = json_object_get(c, name);
	char q[QUOTE_MAX + 4];

	if (!v)
		return 0;
	if (!json_is_number(v))
		return al_error_set(err, EINVAL, "\"%s\" is %s, not a number of seconds", name,
				    quote(v, q));
	*ret = json_number_value(v);
	return 1;
}

static int check_times_at(const json_t *c, int64_t now, struct al_error *err)
{
	char at[32], nowd[32];
	double exp = 0, nbf = 0, iat = 0;
	int r;

	if ((r = numeric_date(c, "exp", &exp, err)) < 0)
		return r;
	if (r == 0)
		return al_error_set(err, EINVAL,
				    "no \"exp\": a token without an expiry is refused");
	if (!((double)now < exp))
		return al_error_set(err, EKEYEXPIRED, "expired at %s (now %s)", date(exp, at),
				    date((double)now, nowd));
	if ((r = numeric_date(c, "nbf", &nbf, err)) < 0)
		return r;
	if (r > 0 && nbf > (double)now)
		return al_error_set(err, EKEYEXPIRED, "not valid before %s (now %s)", date(nbf, at),
				    date((double)now, nowd));
	if ((r = numeric_date(c, "iat", &iat, err)) < 0)
		return r;
	if (r > 0 && iat > (double)now)
		return al_error_set(err, EKEYEXPIRED, "issued in the future, at %s (now %s)",
				    date(iat, at), date((double)now, nowd));
	return 0;
}

static int check_aud(const json_t *c, const char *want, struct al_error *err)
{
	const json_t *aud = json_object_get(c, "aud"), *v;
	_cleanup_(json_decrefp) json_t *w = want ? json_string(want) : NULL;
	char q[QUOTE_MAX + 4], qw[QUOTE_MAX + 4];
	size_t i;

	if (aud && !json_is_string(aud)) {
		if (!json_is_array(aud))
			return al_error_set(err, EINVAL, "\"aud\" is %s: not a string or an array",
					    quote(aud, q));
		json_array_foreach(aud, i, v) if (!json_is_string(v)) return al_error_set(
		    err, EINVAL, "\"aud\" holds %s: not a string", quote(v, q));
	}
	if (!want)
		return 0;
	if (!w)
		return al_error_set(err, EINVAL, "the wanted audience is not valid UTF-8");
	if (!aud)
		return al_error_set(err, EACCES, "no audience (\"aud\"), and %s is wanted",
				    quote(w, qw));
	if (json_is_string(aud) && strcmp(json_string_value(aud), want) == 0)
		return 0;
	if (json_is_string(aud))
		return al_error_set(err, EACCES, "audience %s not in [%s]", quote(w, qw),
				    quote(aud, q));
	json_array_foreach(aud, i, v) if (strcmp(json_string_value(v), want) == 0) return 0;
	return al_error_set(err, EACCES, "audience %s not in %s", quote(w, qw), quote(aud, q));
}

static int verify(const struct al_jwt_key *k, const char *token, size_t len, const char *want_aud,
		  int64_t now, json_t **ret_claims, struct al_error *err)
{
	_cleanup_(json_decrefp) json_t *header = NULL, *claims = NULL;
	unsigned char sig[JWT_ED25519_SIG];
	struct parts p = {0};
	long sig_len;
	int r;

	if ((r = split(token, len, &p, err)) < 0)
		return r;
	if ((r = part_json(p.header, p.header_len, "header", &header, err)) < 0 ||
	    (r = check_header(k, header, err)) < 0)
		return r;
	if (p.sig_len == 0)
		return al_error_set(err, EBADMSG, "no signature");
	if (p.sig_len > al_b64url_encoded_len(sizeof(sig)))
		return al_error_set(err, EBADMSG,
				    "bad signature: %zu characters, longer than any signature",
				    p.sig_len);
	if ((sig_len = al_b64url_decode(p.sig, p.sig_len, sig, "signature", err)) < 0)
		return (int)sig_len;
	/* Nothing in the payload is read before the signature holds. */
	if ((r = al_jwt_check_signature(k, token, p.header_len + 1 + p.payload_len, sig,
					(size_t)sig_len, err)) < 0)
		return r;
	if ((r = part_json(p.payload, p.payload_len, "payload", &claims, err)) < 0 ||
	    (r = check_times_at(claims, now, err)) < 0 ||
	    (r = check_aud(claims, want_aud, err)) < 0)
		return r;
	if (ret_claims)
		*ret_claims = TAKE_PTR(claims);
	return 0;
}

int al_jwt_verify(const struct al_jwt_key *k, const char *token, size_t len, const char *want_aud,
		  int64_t now, json_t **ret_claims, struct al_error *err)
{
	int r = verify(k, token, len, want_aud, now, ret_claims, err);

	/* jansson's messages quote the text near a syntax error: the token's
	 * bytes, which must not reach a log or a terminal raw. */
	if (r < 0 && err)
		for (char *c = err->msg; *c; c++)
			if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
				*c = '?';
	return r;
}
