/* cred/jwt.h and cred/base64url.h: keys, minting, strict verification, and
 * that freeing a key leaves no copy of its secret in freed memory.
 *
 * Known answers come from the RFCs: the Ed25519 key of RFC 8037 appendix A
 * (its x and its RFC 7638 thumbprint) and the HS256 token of RFC 7515
 * appendix A.1. Tokens with a valid signature but a refused header or
 * payload are forged here with OpenSSL's HMAC(), so each check is reached
 * on its own. */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "cred/base64url.h"
#include "cred/jwt.h"

/* RFC 8037 A.1: d as PKCS#8 DER (the fixed Ed25519 prefix, then d). */
static const char ed_pem[] = "-----BEGIN PRIVATE KEY-----\n"
			     "MC4CAQAwBQYDK2VwBCIEIJ1hsZ3v/VpguoRK9JLsLMREScVpezJpGXA7rAMcrn9g\n"
			     "-----END PRIVATE KEY-----\n";
static const char ed_pub_pem[] = "-----BEGIN PUBLIC KEY-----\n"
				 "MCowBQYDK2VwAyEA11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=\n"
				 "-----END PUBLIC KEY-----\n";
static const char ed_x[] = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo";
static const char ed_kid[] = "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"; /* RFC 8037 A.3 */
static const unsigned char ed_d[] = {
    0x9d, 0x61, 0xb1, 0x9d, 0xef, 0xfd, 0x5a, 0x60, 0xba, 0x84, 0x4a, 0xf4, 0x92, 0xec, 0x2c, 0xc4,
    0x44, 0x49, 0xc5, 0x69, 0x7b, 0x32, 0x69, 0x19, 0x70, 0x3b, 0xac, 0x03, 0x1c, 0xae, 0x7f, 0x60};

static const char hs_secret[] = "0123456789abcdef0123456789abcdef-unit-test-hs256";
#define NOW 1796155800 /* 2026-12-01T20:10:00Z */

/* ---- OpenSSL's allocations, watched for a secret left in freed memory ---- */

struct block {
	struct block *prev, *next;
	size_t n;
	size_t pad; /* keeps the payload 16-byte aligned */
};
static struct block live = {&live, &live, 0, 0};
static const unsigned char *watch;
static size_t watch_len;
static int freed_with_secret;

static void *t_malloc(size_t n, const char *file, int line)
{
	struct block *b = malloc(sizeof(*b) + n);

	if (!b)
		return NULL;
	b->n = n;
	b->next = live.next;
	b->prev = &live;
	live.next->prev = b;
	live.next = b;
	return b + 1;
}

static void t_free(void *p, const char *file, int line)
{
	struct block *b;

	if (!p)
		return;
	b = (struct block *)p - 1;
	if (watch && memmem(p, b->n, watch, watch_len))
		freed_with_secret++;
	b->prev->next = b->next;
	b->next->prev = b->prev;
	free(b);
}

/* Never in place: the old block goes through t_free, so a secret left in
 * it is seen. */
static void *t_realloc(void *p, size_t n, const char *file, int line)
{
	void *q;

	if (!p)
		return t_malloc(n, file, line);
	if (!(q = t_malloc(n, file, line)))
		return NULL;
	size_t old = ((struct block *)p - 1)->n;
	memcpy(q, p, old < n ? old : n);
	t_free(p, file, line);
	return q;
}

static bool live_holds_secret(void)
{
	for (struct block *b = live.next; b != &live; b = b->next)
		if (memmem(b + 1, b->n, watch, watch_len))
			return true;
	return false;
}

/* ---- helpers ---- */

static struct al_jwt_key *key(const char *text)
{
	struct al_jwt_key *k = NULL;
	struct al_error err = {0};

	if (al_jwt_key_from_mem(text, strlen(text), &k, &err) < 0)
		fail_msg("loading a key: %s", err.msg);
	return k;
}

static char *b64(const char *s, size_t n)
{
	char *out = malloc(al_b64url_encoded_len(n) + 1);

	al_b64url_encode(s, n, out);
	return out;
}

/* A token of two encoded parts as given, correctly signed with hs_secret:
 * what an attacker who knows nothing cannot make, so that each header and
 * claim check is tested past the signature. */
static char *forge_parts(const char *h, const char *p)
{
	unsigned char mac[32];
	unsigned int mac_len = 0;
	char *t = NULL, *out = NULL, sig[64];

	assert_int_equal(asprintf(&t, "%s.%s", h, p) > 0, 1);
	HMAC(EVP_sha256(), hs_secret, (int)strlen(hs_secret), (unsigned char *)t, strlen(t), mac,
	     &mac_len);
	assert_int_equal(mac_len, 32);
	al_b64url_encode(mac, mac_len, sig);
	assert_int_equal(asprintf(&out, "%s.%s", t, sig) > 0, 1);
	free(t);
	return out;
}

/* The same with header and payload given as JSON. */
static char *forge(const char *header, const char *payload)
{
	_cleanup_free_ char *h = b64(header, strlen(header)), *p = b64(payload, strlen(payload));

	return forge_parts(h, p);
}

static char *hs_header(void)
{
	_cleanup_(al_jwt_key_freep) struct al_jwt_key *k = key(hs_secret);
	char *h = NULL;

	assert_int_equal(asprintf(&h, "{\"alg\":\"HS256\",\"typ\":\"JWT\",\"kid\":\"%s\"}",
				  al_jwt_key_kid(k)) > 0,
			 1);
	return h;
}

static void expect_refused(const struct al_jwt_key *k, const char *tok, const char *aud,
			   int64_t now, int code, const char *why)
{
	struct al_error err = {0};
	json_t *claims = (json_t *)0x1;
	int r = al_jwt_verify(k, tok, strlen(tok), aud, now, &claims, &err);

	if (r != code)
		fail_msg("verifying %s gave %d (%s), expected %d", tok, r, err.msg, code);
	assert_contains(err.msg, why);
	assert_ptr_equal(claims, (json_t *)0x1); /* written only on success */
}

static json_t *expect_valid(const struct al_jwt_key *k, const char *tok, const char *aud,
			    int64_t now)
{
	struct al_error err = {0};
	json_t *claims = NULL;
	int r = al_jwt_verify(k, tok, strlen(tok), aud, now, &claims, &err);

	if (r != 0)
		fail_msg("verifying %s gave %d (%s), expected success", tok, r, err.msg);
	assert_true(json_is_object(claims));
	return claims;
}

/* noinline: inlined, gcc 12 at -O3 takes the returned token for a pointer
 * to the local that held it (-Wdangling-pointer). */
__attribute__((noinline)) static char *mint(const struct al_jwt_key *k,
					    const struct al_jwt_claims *c)
{
	struct al_error err = {0};
	char *tok = NULL;

	if (al_jwt_mint(k, c, &tok, &err) < 0)
		fail_msg("mint: %s", err.msg);
	return tok;
}

static const char *const one_aud[] = {"api.example.com"};
static const struct al_jwt_claims basic = {
    .iss = "airlock", .sub = "run:1", .aud = one_aud, .n_aud = 1, .iat = NOW, .exp = NOW + 600};

/* ---- base64url ---- */

static void test_b64url_round_trip(void **state)
{
	unsigned char in[64], out[64];
	char enc[100];
	struct al_error err = {0};

	for (size_t i = 0; i < sizeof(in); i++)
		in[i] = (unsigned char)(i * 37 + 11);
	for (size_t n = 0; n <= sizeof(in); n++) {
		size_t len = al_b64url_encode(in, n, enc);
		assert_int_equal(len, al_b64url_encoded_len(n));
		assert_int_equal(strcspn(enc, "=+/"), len);
		assert_int_equal(al_b64url_decoded_max(len), n);
		assert_int_equal(al_b64url_decode(enc, len, out, "x", &err), n);
		assert_memory_equal(in, out, n);
	}
	al_b64url_encode("\xfb\xff", 2, enc);
	assert_string_equal(enc, "-_8");
}

static void test_b64url_strict(void **state)
{
	unsigned char out[16];
	struct al_error err = {0};

	assert_int_equal(al_b64url_decode("QQ==", 4, out, "part", &err), -EINVAL);
	assert_contains(err.msg, "part: '=' at offset 2: base64url in a JWT has no padding");
	assert_int_equal(al_b64url_decode("a+b/", 4, out, "part", &err), -EINVAL);
	assert_contains(err.msg, "'+' at offset 1: standard base64, not base64url");
	assert_int_equal(al_b64url_decode("ab\nc", 4, out, "part", &err), -EINVAL);
	assert_contains(err.msg, "byte 0x0a at offset 2");
	assert_int_equal(al_b64url_decode("abcde", 5, out, "part", &err), -EINVAL);
	assert_contains(err.msg, "never leaves one character over");
	/* "QQ" is "A"; "QR" spells it with a stray bit. */
	assert_int_equal(al_b64url_decode("QQ", 2, out, "part", &err), 1);
	assert_int_equal(out[0], 'A');
	assert_int_equal(al_b64url_decode("QR", 2, out, "part", &err), -EINVAL);
	assert_contains(err.msg, "not the canonical base64url");
	assert_int_equal(al_b64url_decode("QUF", 3, out, "part", &err), -EINVAL);
}

/* ---- keys ---- */

static void test_ed25519_known_answers(void **state)
{
	_cleanup_(al_jwt_key_freep) struct al_jwt_key *k = key(ed_pem);
	_cleanup_(al_jwt_key_freep) struct al_jwt_key *pub = key(ed_pub_pem);
	_cleanup_free_ char *jwks = NULL;
	struct al_error err = {0};

	assert_int_equal(al_jwt_key_alg(k), AL_JWT_EDDSA);
	assert_true(al_jwt_key_can_sign(k));
	assert_string_equal(al_jwt_key_kid(k), ed_kid);
	assert_int_equal(al_jwt_key_alg(pub), AL_JWT_EDDSA);
	assert_false(al_jwt_key_can_sign(pub));
	assert_string_equal(al_jwt_key_kid(pub), ed_kid);
	assert_int_equal(al_jwt_jwks(pub, &jwks, &err), 0);
	char want[256];
	snprintf(want, sizeof(want),
		 "{\"keys\":[{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"%s\",\"kid\":\"%s\","
		 "\"alg\":\"EdDSA\",\"use\":\"sig\"}]}",
		 ed_x, ed_kid);
	assert_string_equal(jwks, want);
}

static void test_rfc7515_hs256(void **state)
{
	/* RFC 7515 A.1: its key (64 bytes), its token; exp 1300819380. */
	static const char k64[] = "AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0i"
				  "PS4hcgUuTwjAzZr1Z9CAow";
	static const char tok[] =
	    "eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9.eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzOD"
	    "AsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ.dBjftJeZ4CVP-mB92K27uhbUJU1p1r_"
	    "wW1gFWFOEjXk";
	unsigned char raw[64];
	struct al_error err = {0};
	struct al_jwt_key *k = NULL;

	assert_int_equal(al_b64url_decode(k64, strlen(k64), raw, "key", &err), 64);
	assert_int_equal(al_jwt_key_from_mem(raw, sizeof(raw), &k, &err), 0);
	json_t *c = expect_valid(k, tok, NULL, 1300819379);
	assert_string_equal(json_string_value(json_object_get(c, "iss")), "joe");
	json_decref(c);
	expect_refused(k, tok, NULL, 1300819380, -EKEYEXPIRED,
		       "expired at 2011-03-22T18:43:00Z (now 2011-03-22T18:43:00Z)");
	al_jwt_key_free(k);
}

static void test_key_refusals(void **state)
{
	struct al_jwt_key *k = (struct al_jwt_key *)0x1;
	struct al_error err = {0};
	char big[AL_JWT_KEY_FILE_MAX + 1];

	assert_int_equal(al_jwt_key_from_mem(hs_secret, 31, &k, &err), -EINVAL);
	assert_contains(err.msg, "31 bytes: an HS256 secret must be at least 32 bytes");
	assert_int_equal(al_jwt_key_from_mem("", 0, &k, &err), -EINVAL);
	assert_contains(err.msg, "0 bytes");
	memset(big, 'x', sizeof(big));
	assert_int_equal(al_jwt_key_from_mem(big, sizeof(big), &k, &err), -EFBIG);
	static const char cert[] = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
	assert_int_equal(al_jwt_key_from_mem(cert, strlen(cert), &k, &err), -EINVAL);
	assert_contains(err.msg, "a PEM \"CERTIFICATE\" block");
	static const char enc[] = "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIB\n"
				  "-----END ENCRYPTED PRIVATE KEY-----\n";
	assert_int_equal(al_jwt_key_from_mem(enc, strlen(enc), &k, &err), -EINVAL);
	assert_contains(err.msg, "an encrypted private key");
	/* Not even an HS256 secret: a broken PEM is refused, not reused. */
	static const char junk[] = "-----BEGIN PRIVATE KEY-----\n!!!!\n-----END PRIVATE KEY-----\n";
	assert_int_equal(al_jwt_key_from_mem(junk, strlen(junk), &k, &err), -EINVAL);
	char two[sizeof(ed_pem) * 2];
	snprintf(two, sizeof(two), "%s%s", ed_pem, ed_pub_pem);
	assert_int_equal(al_jwt_key_from_mem(two, strlen(two), &k, &err), -EINVAL);
	assert_contains(err.msg, "more than one PEM block");
	assert_ptr_equal(k, (struct al_jwt_key *)0x1);
}

/* The classic confusion: a published public key (EC here, RSA alike) used
 * as an HMAC secret. It is refused as a key, and not read as HS256. */
static void test_key_other_pem_types(void **state)
{
	EVP_PKEY *ec = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	BIO *priv = BIO_new(BIO_s_mem()), *pub = BIO_new(BIO_s_mem());
	struct al_jwt_key *k = NULL;
	struct al_error err = {0};
	char *p;
	long n;

	assert_non_null(ec);
	assert_int_equal(PEM_write_bio_PrivateKey(priv, ec, NULL, NULL, 0, NULL, NULL), 1);
	assert_int_equal(PEM_write_bio_PUBKEY(pub, ec), 1);
	n = BIO_get_mem_data(priv, &p);
	assert_int_equal(al_jwt_key_from_mem(p, (size_t)n, &k, &err), -EINVAL);
	assert_contains(err.msg, "a private key of type id-ecPublicKey, not Ed25519");
	n = BIO_get_mem_data(pub, &p);
	assert_int_equal(al_jwt_key_from_mem(p, (size_t)n, &k, &err), -EINVAL);
	assert_contains(err.msg, "a public key of type EC, not Ed25519");
	assert_null(k);
	BIO_free(priv);
	BIO_free(pub);
	EVP_PKEY_free(ec);
}

/* ---- mint and verify ---- */

static void check_round_trip(const struct al_jwt_key *k, const char *alg)
{
	static const char *const auds[] = {"a.example", "b.example"};
	struct al_jwt_claims c = {.iss = "airlock",
				  .sub = "run:0123abcd",
				  .aud = auds,
				  .n_aud = 2,
				  .iat = NOW,
				  .nbf = NOW,
				  .exp = NOW + 60,
				  .jti = "j1",
				  .scope = "read write"};
	_cleanup_free_ char *tok = mint(k, &c);
	_cleanup_free_ char *want_h = NULL;
	unsigned char h[256];
	struct al_error err = {0};
	size_t hl = strchr(tok, '.') - tok;

	long n = al_b64url_decode(tok, hl, h, "header", &err);
	assert_true(n > 0);
	assert_int_equal(asprintf(&want_h, "{\"alg\":\"%s\",\"typ\":\"JWT\",\"kid\":\"%s\"}", alg,
				  al_jwt_key_kid(k)) > 0,
			 1);
	assert_memory_equal(h, want_h, strlen(want_h));
	assert_int_equal(n, strlen(want_h));

	json_t *got = expect_valid(k, tok, "b.example", NOW);
	_cleanup_free_ char *text = json_dumps(got, JSON_COMPACT | JSON_PRESERVE_ORDER);
	assert_string_equal(text,
			    "{\"iss\":\"airlock\",\"sub\":\"run:0123abcd\",\"aud\":[\"a.example\","
			    "\"b.example\"],\"iat\":1796155800,\"nbf\":1796155800,\"exp\":"
			    "1796155860,\"jti\":\"j1\",\"scope\":\"read write\"}");
	json_decref(got);
	json_decref(expect_valid(k, tok, NULL, NOW + 59));
	expect_refused(k, tok, NULL, NOW + 60, -EKEYEXPIRED,
		       "expired at 2026-12-01T20:11:00Z (now 2026-12-01T20:11:00Z)");
	expect_refused(k, tok, NULL, NOW - 1, -EKEYEXPIRED,
		       "not valid before 2026-12-01T20:10:00Z (now 2026-12-01T20:09:59Z)");
	expect_refused(k, tok, "c.example", NOW, -EACCES,
		       "audience \"c.example\" not in [\"a.example\",\"b.example\"]");
}

static void test_mint_verify_eddsa(void **state)
{
	_cleanup_(al_jwt_key_freep) struct al_jwt_key *k = key(ed_pem);
	_cleanup_(al_jwt_key_freep) struct al_jwt_key *pub = key(ed_pub_pem);
	_cleanup_free_ char *tok = mint(k, &basic);

	check_round_trip(k, "EdDSA");
	json_decref(expect_valid(pub, tok, "api.example.com", NOW));
	expect_refused(pub, tok, "x", NOW, -EACCES, "audience \"x\" not in [\"api.example.com\"]");
}

static void test_mint_verify_hs256(void **state)
{
	_cleanup_(al_jwt_key_freep) struct al_jwt_key *k = key(hs_secret);
	_cleanup_(al_jwt_key_freep) struct al_jwt_key *other =
	    key("another secret of at least 32 bytes");
	_cleanup_free_ char *tok = mint(k, &basic);

	check_round_trip(k, "HS256");
	/* Both HS256, so the header passes unless the kid tells them apart. */
	expect_refused(other, tok, NULL, NOW, -EINVAL, "is not this key's");
}

/* The prefix every token with these iss and sub starts with, whatever its
 * audience, times and jti; another sub or key does not share it. */
static void test_prefix(void **state)
{
	static const char *const other_aud[] = {"b.example", "c.example"};
	_cleanup_(al_jwt_key_freep) struct al_jwt_key *k = key(ed_pem);
	_cleanup_(al_jwt_key_freep) struct al_jwt_key *h = key(hs_secret);
	struct al_jwt_claims c = basic;
	_cleanup_free_ char *p = NULL, *ph = NULL, *none = NULL;
	struct al_error err = {0};

	assert_int_equal(al_jwt_prefix(k, "airlock", "run:1", &p, &err), 0);
	assert_int_equal(al_jwt_prefix(h, "airlock", "run:1", &ph, &err), 0);
	assert_int_equal(al_jwt_prefix(k, NULL, "run:1", &none, &err), 0);
	assert_true(strlen(p) > 40);
	for (int i = 0; i < 3; i++) {
		c.aud = i == 1 ? other_aud : one_aud;
		c.n_aud = i == 1 ? 2 : 1;
		c.iat = NOW + i;
		c.exp = NOW + 15 + i;
		c.jti = i == 2 ? "j2" : NULL;
		_cleanup_free_ char *tok = mint(k, &c), *toh = mint(h, &c);
		assert_memory_equal(tok, p, strlen(p));
		assert_memory_equal(toh, ph, strlen(ph));
		assert_memory_not_equal(toh, p, strlen(p));
	}
	c = basic;
	c.sub = "run:2";
	_cleanup_free_ char *t2 = mint(k, &c);
	assert_memory_not_equal(t2, p, strlen(p));
	c.iss = NULL;
	c.sub = "run:1";
	_cleanup_free_ char *t3 = mint(k, &c);
	assert_memory_equal(t3, none, strlen(none));
}

static void test_mint_refusals(void **state)
{
	_cleanup_(al_jwt_key_freep) struct al_jwt_key *k = key(hs_secret);
	_cleanup_(al_jwt_key_freep) struct al_jwt_key *pub = key(ed_pub_pem);
	struct al_jwt_claims c = basic;
	struct al_error err = {0};
	char *tok = NULL;

	assert_int_equal(al_jwt_mint(pub, &basic, &tok, &err), -ENOKEY);
	assert_contains(err.msg, "cannot mint");
	c.exp = 0;
	assert_int_equal(al_jwt_mint(k, &c, &tok, &err), -EINVAL);
	assert_contains(err.msg, "needs an expiry");
	c.exp = NOW;
	assert_int_equal(al_jwt_mint(k, &c, &tok, &err), -EINVAL);
	assert_contains(err.msg, "not after iat");
	c = basic;
	c.sub = "\xff\xfe";
	assert_int_equal(al_jwt_mint(k, &c, &tok, &err), -EINVAL);
	assert_contains(err.msg, "claim \"sub\" is not valid UTF-8");
	c = basic;
	char *long_scope = malloc(AL_JWT_TOKEN_MAX);
	memset(long_scope, 's', AL_JWT_TOKEN_MAX - 1);
	long_scope[AL_JWT_TOKEN_MAX - 1] = '\0';
	c.scope = long_scope;
	assert_int_equal(al_jwt_mint(k, &c, &tok, &err), -EINVAL);
	assert_contains(err.msg, "more than 8192");
	free(long_scope);
	assert_null(tok);
}

static void test_jti(void **state)
{
	char a[AL_JWT_JTI_LEN + 1], b[AL_JWT_JTI_LEN + 1];
	struct al_error err = {0};

	assert_int_equal(al_jwt_new_jti(a, &err), 0);
	assert_int_equal(al_jwt_new_jti(b, &err), 0);
	assert_int_equal(strlen(a), 32);
	assert_int_equal(strspn(a, "0123456789abcdef"), 32);
	assert_string_not_equal(a, b);
}

/* ---- hostile tokens ---- */

/* tok with the character at off replaced by c (a copy to free). */
static char *poke(const char *tok, size_t off, char c)
{
	char *t = strdup(tok);

	t[off] = c;
	return t;
}

static void test_tampered(void **state)
{
	_cleanup_(al_jwt_key_freep) struct al_jwt_key *k = key(ed_pem);
	_cleanup_free_ char *tok = mint(k, &basic);
	const char *p = strchr(tok, '.') + 1, *s = strrchr(tok, '.') + 1;
	size_t poff = p - tok, soff = s - tok;

	/* A payload naming another subject, under the old signature. */
	struct al_jwt_claims c = basic;
	c.sub = "run:2";
	_cleanup_free_ char *other = mint(k, &c);
	_cleanup_free_ char *spliced = NULL;
	assert_int_equal(asprintf(&spliced, "%.*s%s", (int)(strrchr(other, '.') - other), other,
				  strrchr(tok, '.')) > 0,
			 1);
	expect_refused(k, spliced, NULL, NOW, -EBADMSG, "bad signature");

	_cleanup_free_ char *t1 = poke(tok, poff + 5, tok[poff + 5] == 'A' ? 'B' : 'A');
	expect_refused(k, t1, NULL, NOW, -EBADMSG, "bad signature");
	_cleanup_free_ char *t2 = poke(tok, soff + 10, tok[soff + 10] == 'A' ? 'B' : 'A');
	expect_refused(k, t2, NULL, NOW, -EBADMSG, "bad signature");
	/* The header: any change breaks the JSON, the alg or the signature. */
	_cleanup_free_ char *t3 = poke(tok, 3, tok[3] == 'A' ? 'B' : 'A');
	struct al_error err = {0};
	assert_true(al_jwt_verify(k, t3, strlen(t3), NULL, NOW, NULL, &err) < 0);
	/* A signature cut short, or one too long to be any. */
	_cleanup_free_ char *t4 = strndup(tok, strlen(tok) - 2);
	expect_refused(k, t4, NULL, NOW, -EBADMSG,
		       "bad signature: 63 bytes, an EdDSA signature has 64");
	_cleanup_free_ char *t5 = NULL;
	assert_int_equal(asprintf(&t5,
				  "%sAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
				  "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
				  tok) > 0,
			 1);
	expect_refused(k, t5, NULL, NOW, -EBADMSG, "longer than any signature");
}

static void test_alg_none_and_confusion(void **state)
{
	_cleanup_(al_jwt_key_freep) struct al_jwt_key *ed = key(ed_pem);
	_cleanup_(al_jwt_key_freep) struct al_jwt_key *hs = key(hs_secret);
	_cleanup_free_ char *ed_tok = mint(ed, &basic), *hs_tok = mint(hs, &basic);
	const char *payload = "{\"sub\":\"x\",\"exp\":1999999999}";
	_cleanup_free_ char *h = b64("{\"alg\":\"none\"}", 14), *hn = b64("{\"alg\":\"NONE\"}", 14);
	_cleanup_free_ char *pl = b64(payload, strlen(payload));
	_cleanup_free_ char *none = NULL, *none2 = NULL;

	assert_int_equal(asprintf(&none, "%s.%s.", h, pl) > 0, 1);
	assert_int_equal(asprintf(&none2, "%s.%s.", hn, pl) > 0, 1);
	expect_refused(ed, none, NULL, NOW, -EINVAL, "alg \"none\": unsigned tokens are refused");
	expect_refused(hs, none, NULL, NOW, -EINVAL, "unsigned tokens are refused");
	expect_refused(hs, none2, NULL, NOW, -EINVAL, "alg \"NONE\": unsigned");

	expect_refused(ed, hs_tok, NULL, NOW, -EINVAL,
		       "alg \"HS256\", but the key is an Ed25519 key (alg \"EdDSA\")");
	expect_refused(hs, ed_tok, NULL, NOW, -EINVAL,
		       "alg \"EdDSA\", but the key is an HS256 secret (alg \"HS256\")");

	/* HMAC keyed with the published public key's PEM, as an attacker
	 * would sign it, with the Ed25519 key's own kid. */
	_cleanup_free_ char *hdr = NULL, *t = NULL, *tok = NULL;
	assert_int_equal(
	    asprintf(&hdr, "{\"alg\":\"HS256\",\"typ\":\"JWT\",\"kid\":\"%s\"}", ed_kid) > 0, 1);
	_cleanup_free_ char *hb = b64(hdr, strlen(hdr));
	assert_int_equal(asprintf(&t, "%s.%s", hb, pl) > 0, 1);
	unsigned char mac[32];
	unsigned int ml;
	char sig[64];
	HMAC(EVP_sha256(), ed_pub_pem, (int)strlen(ed_pub_pem), (unsigned char *)t, strlen(t), mac,
	     &ml);
	al_b64url_encode(mac, ml, sig);
	assert_int_equal(asprintf(&tok, "%s.%s", t, sig) > 0, 1);
	_cleanup_(al_jwt_key_freep) struct al_jwt_key *pub = key(ed_pub_pem);
	expect_refused(pub, tok, NULL, NOW, -EINVAL, "but the key is an Ed25519 key");
}

static void test_structure(void **state)
{
	_cleanup_(al_jwt_key_freep) struct al_jwt_key *k = key(hs_secret);
	_cleanup_free_ char *tok = mint(k, &basic), *hdr = hs_header();
	char *long_tok = malloc(AL_JWT_TOKEN_MAX + 2);
	struct al_error err = {0};

	expect_refused(k, "", NULL, NOW, -EINVAL, "empty token");
	expect_refused(k, "abc", NULL, NOW, -EINVAL, "1 part separated by '.': a JWT has 3");
	expect_refused(k, "a.b.c.d.e", NULL, NOW, -EINVAL, "(5 is an encrypted JWE");
	expect_refused(k, ".b.c", NULL, NOW, -EINVAL, "empty header");
	memset(long_tok, 'A', AL_JWT_TOKEN_MAX + 1);
	long_tok[AL_JWT_TOKEN_MAX + 1] = '\0';
	expect_refused(k, long_tok, NULL, NOW, -EINVAL, "8193 bytes: a token is at most 8192");
	free(long_tok);

	/* The token is a length, not a C string: a NUL inside is a byte like
	 * any other, and not base64url. */
	size_t n = strlen(tok);
	assert_int_equal(al_jwt_verify(k, tok, n - 3, NULL, NOW, NULL, &err), -EBADMSG);
	assert_contains(err.msg, "bad signature: 30 bytes, an HS256 signature has 32");
	_cleanup_free_ char *nul = poke(tok, 4, '\0');
	assert_int_equal(al_jwt_verify(k, nul, n, NULL, NOW, NULL, &err), -EINVAL);
	assert_contains(err.msg, "header: byte 0x00 at offset 4 is not base64url");

	_cleanup_free_ char *pad = NULL;
	assert_int_equal(asprintf(&pad, "%s=", tok) > 0, 1);
	expect_refused(k, pad, NULL, NOW, -EINVAL, "signature: '=' at offset");
	/* A payload part that is not base64url, under a valid signature. */
	_cleanup_free_ char *hb = b64(hdr, strlen(hdr)), *pb = b64("{\"exp\":1999999999}", 18);
	pb[2] = '+';
	_cleanup_free_ char *plus = forge_parts(hb, pb);
	expect_refused(k, plus, NULL, NOW, -EINVAL, "payload: '+' at offset 2: standard base64");
	_cleanup_free_ char *star = poke(tok, 1, '*');
	expect_refused(k, star, NULL, NOW, -EINVAL, "header: '*' at offset 1 is not base64url");

	_cleanup_free_ char *notjson = forge("{\"alg\":\"HS256\"", "{}");
	expect_refused(k, notjson, NULL, NOW, -EINVAL, "header: not JSON");
	_cleanup_free_ char *arr = forge("[\"HS256\"]", "{}");
	expect_refused(k, arr, NULL, NOW, -EINVAL, "header: not a JSON object");
	_cleanup_free_ char *dup = forge("{\"alg\":\"HS256\",\"alg\":\"none\"}", "{}");
	expect_refused(k, dup, NULL, NOW, -EINVAL, "header: not JSON: duplicate object key");
	/* jansson quotes the bad text: control bytes never reach the message. */
	_cleanup_free_ char *ctl = forge("{\"alg\":\"HS256\"\x1b[31m}", "{}");
	expect_refused(k, ctl, NULL, NOW, -EINVAL, "header: not JSON");
	assert_int_equal(al_jwt_verify(k, ctl, strlen(ctl), NULL, NOW, NULL, &err), -EINVAL);
	assert_null(strchr(err.msg, '\x1b'));
}

static void test_header_checks(void **state)
{
	_cleanup_(al_jwt_key_freep) struct al_jwt_key *k = key(hs_secret);
	const char *ok = "{\"exp\":1999999999}";
	char hdr[256];

	_cleanup_free_ char *plain = forge("{\"alg\":\"HS256\"}", ok);
	json_decref(expect_valid(k, plain, NULL, NOW));
	_cleanup_free_ char *noalg = forge("{\"typ\":\"JWT\"}", ok);
	expect_refused(k, noalg, NULL, NOW, -EINVAL, "header has no \"alg\"");
	_cleanup_free_ char *numalg = forge("{\"alg\":5}", ok);
	expect_refused(k, numalg, NULL, NOW, -EINVAL, "\"alg\" is 5, not a string");
	_cleanup_free_ char *crit = forge("{\"alg\":\"HS256\",\"crit\":[\"exp\"]}", ok);
	expect_refused(k, crit, NULL, NOW, -EINVAL, "header has \"crit\"");
	_cleanup_free_ char *kid = forge("{\"alg\":\"HS256\",\"kid\":\"other\\u0007\"}", ok);
	expect_refused(k, kid, NULL, NOW, -EINVAL, "kid \"other\\u0007\" is not this key's (\"");
	_cleanup_free_ char *kidnum = forge("{\"alg\":\"HS256\",\"kid\":1}", ok);
	expect_refused(k, kidnum, NULL, NOW, -EINVAL, "kid 1 is not this key's");
	_cleanup_free_ char *typ = forge("{\"alg\":\"HS256\",\"typ\":\"JWE\"}", ok);
	expect_refused(k, typ, NULL, NOW, -EINVAL, "typ \"JWE\": not a JWT");
	snprintf(hdr, sizeof(hdr), "{\"alg\":\"HS256\",\"typ\":\"jwt\",\"kid\":\"%s\"}",
		 al_jwt_key_kid(k));
	_cleanup_free_ char *right = forge(hdr, ok);
	json_decref(expect_valid(k, right, NULL, NOW));
}

static void test_claim_checks(void **state)
{
	_cleanup_(al_jwt_key_freep) struct al_jwt_key *k = key(hs_secret);
	_cleanup_free_ char *h = hs_header();
	struct {
		const char *payload, *aud;
		int code;
		const char *why;
	} cases[] = {
	    {"{\"sub\":\"x\"}", NULL, -EINVAL, "no \"exp\": a token without an expiry is refused"},
	    {"{\"exp\":\"1999999999\"}", NULL, -EINVAL, "\"exp\" is \"1999999999\", not a number"},
	    {"{\"exp\":1999999999,\"nbf\":null}", NULL, -EINVAL, "\"nbf\" is null, not a number"},
	    {"{\"exp\":1796155800.5}", NULL, 0, ""},
	    {"{\"exp\":1796155800}", NULL, -EKEYEXPIRED, "expired at 2026-12-01T20:10:00Z"},
	    {"{\"exp\":-5}", NULL, -EKEYEXPIRED, "expired at -5"},
	    {"{\"exp\":1e300}", NULL, 0, ""},
	    /* Numbers no date fits are shown as numbers, every claim alike
	     * (fuzz_jwt found iat 179E61 converted to a time_t unchecked). */
	    {"{\"exp\":-1e300}", NULL, -EKEYEXPIRED, "expired at -1e+300 (now"},
	    {"{\"exp\":-0.5}", NULL, -EKEYEXPIRED, "expired at -0.5 (now"},
	    {"{\"exp\":1999999999,\"nbf\":1e300}", NULL, -EKEYEXPIRED,
	     "not valid before 1e+300 (now"},
	    {"{\"exp\":1999999999,\"iat\":179E61}", NULL, -EKEYEXPIRED,
	     "issued in the future, at 1.79e+63 (now"},
	    {"{\"exp\":1999999999,\"iat\":253402300799}", NULL, -EKEYEXPIRED,
	     "issued in the future, at 9999-12-31T23:59:59Z"},
	    {"{\"exp\":1999999999,\"iat\":253402300800}", NULL, -EKEYEXPIRED,
	     "issued in the future, at 253402300800 (now"},
	    {"{\"exp\":1999999999,\"iat\":1796155801}", NULL, -EKEYEXPIRED,
	     "issued in the future, at 2026-12-01T20:10:01Z"},
	    {"{\"exp\":1999999999,\"nbf\":1796155800}", NULL, 0, ""},
	    {"{\"exp\":1999999999}", "a", -EACCES, "no audience (\"aud\"), and \"a\" is wanted"},
	    {"{\"exp\":1999999999,\"aud\":\"a\"}", "a", 0, ""},
	    {"{\"exp\":1999999999,\"aud\":\"ab\"}", "a", -EACCES, "audience \"a\" not in [\"ab\"]"},
	    {"{\"exp\":1999999999,\"aud\":[]}", "a", -EACCES, "audience \"a\" not in []"},
	    {"{\"exp\":1999999999,\"aud\":[\"b\",\"a\"]}", "a", 0, ""},
	    {"{\"exp\":1999999999,\"aud\":[\"a\",1]}", "a", -EINVAL,
	     "\"aud\" holds 1: not a string"},
	    {"{\"exp\":1999999999,\"aud\":[\"a\",1]}", NULL, -EINVAL, "\"aud\" holds 1"},
	    {"{\"exp\":1999999999,\"aud\":{}}", NULL, -EINVAL, "\"aud\" is {}: not a string"},
	    {"{\"exp\":1999999999,\"exp\":1}", NULL, -EINVAL, "payload: not JSON: duplicate"},
	    {"[1999999999]", NULL, -EINVAL, "payload: not a JSON object"},
	    {"{\"exp\":1999999999,\"sub\":\"a\\u0000b\"}", NULL, -EINVAL, "payload: not JSON"},
	};

	for (size_t i = 0; i < AL_ARRAY_SIZE(cases); i++) {
		_cleanup_free_ char *tok = forge(h, cases[i].payload);
		if (cases[i].code == 0)
			json_decref(expect_valid(k, tok, cases[i].aud, NOW));
		else
			expect_refused(k, tok, cases[i].aud, NOW, cases[i].code, cases[i].why);
	}
}

/* ---- files ---- */

static char tmpdir[64];

static int make_tmpdir(void **state)
{
	strcpy(tmpdir, "/tmp/test_jwt.XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int remove_tmpdir(void **state)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf -- '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

static const char *write_key(const char *name, const void *data, size_t len, mode_t mode)
{
	static char path[128];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	unlink(path);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), len);
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
	return path;
}

static void test_load_file(void **state)
{
	struct al_jwt_key *k = NULL;
	struct al_error err = {0};
	const char *p;

	p = write_key("hs", hs_secret, strlen(hs_secret), 0600);
	assert_int_equal(al_jwt_key_load(p, &k, &err), 0);
	assert_int_equal(al_jwt_key_alg(k), AL_JWT_HS256);
	al_jwt_key_free(TAKE_PTR(k));
	p = write_key("hs", hs_secret, strlen(hs_secret), 0640);
	assert_int_equal(al_jwt_key_load(p, &k, &err), -EPERM);
	assert_contains(err.msg, "hs: mode 0640: an HS256 secret must not be readable or writable "
				 "by group or others, who could mint tokens (chmod 600)");
	p = write_key("ed", ed_pem, strlen(ed_pem), 0604);
	assert_int_equal(al_jwt_key_load(p, &k, &err), -EPERM);
	assert_contains(err.msg, "mode 0604: an Ed25519 private key must not be readable");
	p = write_key("pub", ed_pub_pem, strlen(ed_pub_pem), 0644);
	assert_int_equal(al_jwt_key_load(p, &k, &err), 0);
	assert_false(al_jwt_key_can_sign(k));
	al_jwt_key_free(TAKE_PTR(k));
	p = write_key("pub", ed_pub_pem, strlen(ed_pub_pem), 0664);
	assert_int_equal(al_jwt_key_load(p, &k, &err), -EPERM);
	assert_contains(err.msg, "mode 0664: writable by group or others, who could replace");
	p = write_key("short", hs_secret, 20, 0600);
	assert_int_equal(al_jwt_key_load(p, &k, &err), -EINVAL);
	assert_contains(err.msg, "/short: 20 bytes: an HS256 secret must be at least 32 bytes");

	char *big = calloc(1, AL_JWT_KEY_FILE_MAX + 1);
	memset(big, 'k', AL_JWT_KEY_FILE_MAX + 1);
	p = write_key("big", big, AL_JWT_KEY_FILE_MAX + 1, 0600);
	assert_int_equal(al_jwt_key_load(p, &k, &err), -EFBIG);
	assert_contains(err.msg, "65537 bytes: a JWT key file is at most 65536 bytes");
	p = write_key("max", big, AL_JWT_KEY_FILE_MAX, 0600);
	assert_int_equal(al_jwt_key_load(p, &k, &err), 0);
	al_jwt_key_free(TAKE_PTR(k));
	free(big);

	assert_int_equal(al_jwt_key_load(tmpdir, &k, &err), -EINVAL);
	assert_contains(err.msg, "not a regular file");
	assert_int_equal(al_jwt_key_load("/nonexistent/key", &k, &err), -ENOENT);
	assert_contains(err.msg, "/nonexistent/key: cannot open the key");

	/* As root, a key of another user (who can read it) is refused too. */
	if (geteuid() == 0) {
		p = write_key("theirs", hs_secret, strlen(hs_secret), 0600);
		assert_int_equal(chown(p, 65534, 65534), 0);
		assert_int_equal(al_jwt_key_load(p, &k, &err), -EPERM);
		assert_contains(err.msg, "owned by uid 65534, not by airlock's uid 0");
	}
	assert_null(k);
}

static void test_keygen(void **state)
{
	char path[128], buf[128];
	struct al_error err = {0};
	struct stat st;

	for (int alg = AL_JWT_HS256; alg <= AL_JWT_EDDSA; alg++) {
		struct al_jwt_key *k = NULL;
		snprintf(path, sizeof(path), "%s/new-%d", tmpdir, alg);
		assert_int_equal(al_jwt_keygen(alg, path, &err), 0);
		assert_int_equal(stat(path, &st), 0);
		assert_int_equal(st.st_mode & 07777, 0600);
		assert_int_equal(al_jwt_key_load(path, &k, &err), 0);
		assert_int_equal(al_jwt_key_alg(k), alg);
		assert_true(al_jwt_key_can_sign(k));
		_cleanup_free_ char *tok = mint(k, &basic);
		json_decref(expect_valid(k, tok, "api.example.com", NOW));
		al_jwt_key_free(k);
		assert_int_equal(al_jwt_keygen(alg, path, &err), -EEXIST);
		assert_contains(err.msg, "exists: a new key never replaces a file");
	}
	snprintf(path, sizeof(path), "%s/new-%d", tmpdir, AL_JWT_HS256);
	int fd = open(path, O_RDONLY);
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	assert_int_equal(n, 64);
	buf[n] = '\0';
	assert_int_equal(strspn(buf, "0123456789abcdef"), 64);

	/* A link planted at the path is not followed. */
	char link[128];
	snprintf(link, sizeof(link), "%s/link", tmpdir);
	snprintf(path, sizeof(path), "%s/target", tmpdir);
	assert_int_equal(symlink(path, link), 0);
	assert_int_equal(al_jwt_keygen(AL_JWT_EDDSA, link, &err), -EEXIST);
	assert_int_equal(access(path, F_OK), -1);
	snprintf(path, sizeof(path), "%s/no/such/dir", tmpdir);
	assert_int_equal(al_jwt_keygen(AL_JWT_HS256, path, &err), -ENOENT);
	assert_contains(err.msg, "cannot create the key file");
}

static void test_jwks_hs256_refused(void **state)
{
	_cleanup_(al_jwt_key_freep) struct al_jwt_key *k = key(hs_secret);
	struct al_error err = {0};
	char *json = NULL;

	assert_int_equal(al_jwt_jwks(k, &json, &err), -EINVAL);
	assert_contains(err.msg, "would publish the secret");
	assert_null(json);
}

/* ---- wiping ---- */

static void check_wiped(const char *key_text, const void *secret, size_t secret_len)
{
	struct al_jwt_key *k = NULL;
	struct al_error err = {0};
	char *tok;

	watch = secret;
	watch_len = secret_len;
	freed_with_secret = 0;
	assert_int_equal(al_jwt_key_from_mem(key_text, strlen(key_text), &k, &err), 0);
	tok = mint(k, &basic);
	json_decref(expect_valid(k, tok, NULL, NOW));
	free(tok);
	/* The hook sees the secret where OpenSSL keeps it... */
	assert_true(live_holds_secret());
	al_jwt_key_free(k);
	/* ...and no block that held it was freed without being wiped. */
	assert_false(live_holds_secret());
	assert_int_equal(freed_with_secret, 0);
	watch = NULL;
}

/* First of all the tests, and with a secret of its own: a failed test
 * jumps past its cleanups, and the keys it leaks would hold theirs. */
static void test_free_wipes(void **state)
{
	static const char wipe_secret[] = "a secret only the wiping test uses, 48 bytes...";

	check_wiped(wipe_secret, wipe_secret, strlen(wipe_secret));
	check_wiped(ed_pem, ed_d, sizeof(ed_d));
}

int main(void)
{
	/* Before OpenSSL allocates anything. */
	if (CRYPTO_set_mem_functions(t_malloc, t_realloc, t_free) != 1) {
		fprintf(stderr, "CRYPTO_set_mem_functions failed\n");
		return 1;
	}
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_free_wipes),
	    cmocka_unit_test(test_b64url_round_trip),
	    cmocka_unit_test(test_b64url_strict),
	    cmocka_unit_test(test_ed25519_known_answers),
	    cmocka_unit_test(test_rfc7515_hs256),
	    cmocka_unit_test(test_key_refusals),
	    cmocka_unit_test(test_key_other_pem_types),
	    cmocka_unit_test(test_mint_verify_eddsa),
	    cmocka_unit_test(test_mint_verify_hs256),
	    cmocka_unit_test(test_mint_refusals),
	    cmocka_unit_test(test_prefix),
	    cmocka_unit_test(test_jti),
	    cmocka_unit_test(test_tampered),
	    cmocka_unit_test(test_alg_none_and_confusion),
	    cmocka_unit_test(test_structure),
	    cmocka_unit_test(test_header_checks),
	    cmocka_unit_test(test_claim_checks),
	    cmocka_unit_test_setup_teardown(test_load_file, make_tmpdir, remove_tmpdir),
	    cmocka_unit_test_setup_teardown(test_keygen, make_tmpdir, remove_tmpdir),
	    cmocka_unit_test(test_jwks_hs256_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
