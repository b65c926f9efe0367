/* JWT keys: what a key file holds (a PEM Ed25519 key or an HS256 secret),
 * the checks on the file, the kid, the JWK Set and new keys. */
#include "cred/jwt-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/sys.h"
#include "core/util.h"
#include "cred/base64url.h"

#define HS256_KEYGEN_BYTES 32

const char *al_jwt_alg_name(enum al_jwt_alg alg)
{
	return alg == AL_JWT_EDDSA ? "EdDSA" : "HS256";
}

int al_jwt_ossl_error(struct al_error *err, int code, const char *what)
{
	unsigned long e = ERR_peek_last_error();
	const char *why = e ? ERR_reason_error_string(e) : NULL;

	/* The queue is per thread and would otherwise keep growing with every
	 * hostile input that fails. */
	ERR_clear_error();
	return al_error_set(err, code, "%s%s%s%s", what, why ? " (OpenSSL: " : "", why ? why : "",
			    why ? ")" : "");
}

static void bio_freep(BIO **b)
{
	BIO_free(*b);
}

static void pkey_freep(EVP_PKEY **p)
{
	EVP_PKEY_free(*p);
}

static struct al_jwt_key *key_new(enum al_jwt_alg alg)
{
	struct al_jwt_key *k = xcalloc(1, sizeof(*k));

	k->alg = alg;
	return k;
}

void al_jwt_key_free(struct al_jwt_key *k)
{
	if (!k)
		return;
	/* OpenSSL wipes the private key when it frees the EVP_PKEY and the
	 * HMAC key when it frees the MAC context. */
	EVP_PKEY_free(k->pkey);
	EVP_MAC_CTX_free(k->mac);
	free(k->header);
	OPENSSL_cleanse(k, sizeof(*k));
	free(k);
}

enum al_jwt_alg al_jwt_key_alg(const struct al_jwt_key *k)
{
	return k->alg;
}

bool al_jwt_key_can_sign(const struct al_jwt_key *k)
{
	return k->can_sign;
}

const char *al_jwt_key_kid(const struct al_jwt_key *k)
{
	return k->kid;
}

/* RFC 7638: SHA-256 of the JWK's required members, in their canonical
 * JSON (sorted names, no whitespace), base64url. */
static int thumbprint(const char *jwk, size_t len, char out[JWT_THUMBPRINT_LEN + 1],
		      struct al_error *err)
{
	unsigned char md[32];

	if (EVP_Digest(jwk, len, md, NULL, EVP_sha256(), NULL) != 1)
		return al_jwt_ossl_error(err, EIO, "SHA-256 of the key's JWK failed");
	al_b64url_encode(md, sizeof(md), out);
	return 0;
}

/* The header mint writes never changes for a key: encoded once, here. */
static void set_header(struct al_jwt_key *k)
{
	char json[128];
	int n = snprintf(json, sizeof(json), "{\"alg\":\"%s\",\"typ\":\"JWT\",\"kid\":\"%s\"}",
			 al_jwt_alg_name(k->alg), k->kid);

	k->header = xmalloc(al_b64url_encoded_len((size_t)n) + 1);
	k->header_len = al_b64url_encode(json, (size_t)n, k->header);
}

static int hs256_kid(const unsigned char *secret, size_t len, struct al_jwt_key *k,
		     struct al_error *err)
{
	static const char head[] = "{\"k\":\"", tail[] = "\",\"kty\":\"oct\"}";
	size_t n = sizeof(head) - 1 + al_b64url_encoded_len(len) + sizeof(tail);
	char *jwk = OPENSSL_malloc(n), *p = jwk;
	int r;

	if (!jwk)
		return al_error_set(err, ENOMEM, "out of memory");
	memcpy(p, head, sizeof(head) - 1);
	p += sizeof(head) - 1;
	p += al_b64url_encode(secret, len, p);
	memcpy(p, tail, sizeof(tail));
	r = thumbprint(jwk, n - 1, k->kid, err);
	OPENSSL_clear_free(jwk, n); /* it spells the secret */
	return r;
}

static int load_hs256(const unsigned char *buf, size_t len, struct al_jwt_key **ret,
		      struct al_error *err)
{
	_cleanup_(al_jwt_key_freep) struct al_jwt_key *k = NULL;
	OSSL_PARAM params[] = {
	    OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0),
	    OSSL_PARAM_construct_end(),
	};
	EVP_MAC *mac;
	int r;

	if (len < AL_JWT_HS256_MIN)
		return al_error_set(err, EINVAL,
				    "%zu bytes: an HS256 secret must be at least %d bytes (or give "
				    "a PEM Ed25519 key, for EdDSA)",
				    len, AL_JWT_HS256_MIN);
	k = key_new(AL_JWT_HS256);
	k->can_sign = true;
	/* Keyed once; each token duplicates this state instead of keying
	 * HMAC again. */
	mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
	k->mac = mac ? EVP_MAC_CTX_new(mac) : NULL;
	EVP_MAC_free(mac);
	if (!k->mac || EVP_MAC_init(k->mac, buf, len, params) != 1)
		return al_jwt_ossl_error(err, EIO, "cannot set up HMAC-SHA-256");
	if ((r = hs256_kid(buf, len, k, err)) < 0)
		return r;
	set_header(k);
	*ret = TAKE_PTR(k);
	return 0;
}

/* RFC 8410: PKCS#8 with the Ed25519 OID, no parameters, and as the key an
 * OCTET STRING of the 32-byte seed. The seed goes to OpenSSL raw: its
 * PKCS#8 decoder (EVP_PKCS82PKEY) frees copies of the key it made
 * without wiping them (test_jwt's free_wipes case saw six). */
static int pkcs8_ed25519(const unsigned char *der, long len, EVP_PKEY **ret, struct al_error *err)
{
	const unsigned char *p = der, *key = NULL;
	PKCS8_PRIV_KEY_INFO *p8 = d2i_PKCS8_PRIV_KEY_INFO(NULL, &p, len);
	const ASN1_OBJECT *oid = NULL;
	const X509_ALGOR *alg = NULL;
	int key_len = 0, param_type = V_ASN1_UNDEF, r = 0;

	if (!p8 || p != der + len) {
		r = al_jwt_ossl_error(err, EINVAL, "the PRIVATE KEY block is not a PKCS#8 key");
		goto out;
	}
	PKCS8_pkey_get0(&oid, &key, &key_len, &alg, p8);
	if (alg)
		X509_ALGOR_get0(NULL, &param_type, NULL, alg);
	if (OBJ_obj2nid(oid) != NID_ED25519) {
		char name[64] = "";
		OBJ_obj2txt(name, sizeof(name), oid, 0);
		r = al_error_set(
		    err, EINVAL,
		    "a private key of type %s, not Ed25519: JWT keys are Ed25519 (EdDSA) "
		    "or an HS256 secret",
		    name[0] ? name : "unknown");
	} else if (param_type != V_ASN1_UNDEF || key_len != 2 + JWT_ED25519_LEN || key[0] != 0x04 ||
		   key[1] != JWT_ED25519_LEN) {
		r = al_error_set(err, EINVAL,
				 "not an Ed25519 private key as RFC 8410 has it (no parameters, a "
				 "32-byte seed)");
	} else if (!(*ret = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, key + 2,
							 JWT_ED25519_LEN))) {
		r = al_jwt_ossl_error(err, EINVAL, "OpenSSL refused the Ed25519 private key");
	}
out:
	PKCS8_PRIV_KEY_INFO_free(p8); /* wipes its copy of the key */
	return r;
}

/* The key in one PEM block's DER: "PRIVATE KEY" (PKCS#8) or "PUBLIC KEY"
 * (SubjectPublicKeyInfo), all of the DER, an Ed25519 key. */
static int pem_key(const char *name, const unsigned char *der, long len, EVP_PKEY **ret,
		   bool *ret_private, struct al_error *err)
{
	const unsigned char *p = der;
	EVP_PKEY *pk;
	int r;

	if (strcmp(name, "PRIVATE KEY") == 0) {
		if ((r = pkcs8_ed25519(der, len, ret, err)) < 0)
			return r;
		*ret_private = true;
		return 0;
	}
	if (strcmp(name, "ENCRYPTED PRIVATE KEY") == 0)
		return al_error_set(err, EINVAL,
				    "an encrypted private key: airlock reads unencrypted PKCS#8 "
				    "keys only (decrypt it into a file of mode 0600 with openssl "
				    "pkey)");
	if (strcmp(name, "PUBLIC KEY") != 0)
		return al_error_set(err, EINVAL,
				    "a PEM \"%.40s\" block: a JWT key file holds an Ed25519 "
				    "\"PRIVATE KEY\" (PKCS#8) or \"PUBLIC KEY\", or an HS256 "
				    "secret that is not PEM",
				    name);
	pk = d2i_PUBKEY(NULL, &p, len);
	if (!pk || p != der + len) {
		EVP_PKEY_free(pk);
		return al_jwt_ossl_error(err, EINVAL, "the PUBLIC KEY block is not a public key");
	}
	if (EVP_PKEY_get_base_id(pk) != EVP_PKEY_ED25519) {
		const char *type = EVP_PKEY_get0_type_name(pk);
		r = al_error_set(err, EINVAL,
				 "a public key of type %s, not Ed25519: JWT keys are Ed25519 "
				 "(EdDSA) or an HS256 secret",
				 type ? type : "unknown");
		EVP_PKEY_free(pk);
		return r;
	}
	*ret = pk;
	*ret_private = false;
	return 0;
}

/* Read the first PEM block; a second one makes the file ambiguous. */
static int read_pem(const char *buf, size_t len, EVP_PKEY **ret, bool *ret_private,
		    struct al_error *err)
{
	_cleanup_(bio_freep) BIO *bio = BIO_new_mem_buf(buf, (int)len);
	char *name = NULL, *header = NULL, *rest = NULL;
	unsigned char *der = NULL;
	long der_len = 0, rest_len;
	int r;

	if (!bio)
		return al_jwt_ossl_error(err, ENOMEM, "cannot read the PEM");
	/* PEM_FLAG_SECURE: OpenSSL's buffers of the DER (the private key in
	 * the clear) are wiped when they are freed. */
	if (PEM_read_bio_ex(bio, &name, &header, &der, &der_len,
			    PEM_FLAG_SECURE | PEM_FLAG_EAY_COMPATIBLE) != 1)
		return al_jwt_ossl_error(err, EINVAL, "a PEM block that cannot be read");
	rest_len = BIO_get_mem_data(bio, &rest);
	if (header && header[0])
		r = al_error_set(err, EINVAL,
				 "a PEM block with headers (a legacy encrypted key?): airlock "
				 "reads unencrypted PKCS#8 keys only");
	else if (rest_len > 0 && memmem(rest, (size_t)rest_len, "-----BEGIN", 10))
		r = al_error_set(err, EINVAL, "more than one PEM block: a key file holds one key");
	else
		r = pem_key(name, der, der_len, ret, ret_private, err);
	OPENSSL_secure_free(name);
	OPENSSL_secure_free(header);
	OPENSSL_secure_clear_free(der, (size_t)der_len);
	return r;
}

static int load_pem(const char *buf, size_t len, struct al_jwt_key **ret, struct al_error *err)
{
	_cleanup_(al_jwt_key_freep) struct al_jwt_key *k = key_new(AL_JWT_EDDSA);
	char x[JWT_THUMBPRINT_LEN + 1], jwk[96];
	size_t n = sizeof(k->pub);
	int r, jwk_len;

	if ((r = read_pem(buf, len, &k->pkey, &k->can_sign, err)) < 0)
		return r;
	if (EVP_PKEY_get_raw_public_key(k->pkey, k->pub, &n) != 1 || n != sizeof(k->pub))
		return al_jwt_ossl_error(err, EINVAL, "cannot get the Ed25519 public key");
	al_b64url_encode(k->pub, sizeof(k->pub), x);
	jwk_len =
	    snprintf(jwk, sizeof(jwk), "{\"crv\":\"Ed25519\",\"kty\":\"OKP\",\"x\":\"%s\"}", x);
	if ((r = thumbprint(jwk, (size_t)jwk_len, k->kid, err)) < 0)
		return r;
	set_header(k);
	*ret = TAKE_PTR(k);
	return 0;
}

/* A signature made and checked (with a public key: a zero one checked,
 * which must fail): the key is known to work, and OpenSSL has read its
 * configuration and fetched the algorithms now, before a process that
 * holds the key (the gateway) confines itself. */
static int self_test(const struct al_jwt_key *k, struct al_error *err)
{
	static const char msg[] = "airlock: a JWT key's self-test";
	unsigned char sig[JWT_ED25519_SIG] = {0};
	size_t len = JWT_ED25519_SIG;
	int r;

	if (k->can_sign && (r = al_jwt_sign(k, msg, sizeof(msg) - 1, sig, &len, err)) < 0)
		return r;
	r = al_jwt_check_signature(k, msg, sizeof(msg) - 1, sig, len, err);
	if (k->can_sign && r < 0)
		return al_error_set(err, EIO,
				    "the key failed its self-test: its own signature "
				    "did not verify");
	if (!k->can_sign && r == 0)
		return al_error_set(err, EIO,
				    "the key failed its self-test: a zero signature "
				    "verified");
	if (r < 0 && r != -EBADMSG)
		return r;
	al_error_clear(err); /* the public key's expected "bad signature" */
	return 0;
}

int al_jwt_key_from_mem(const void *buf, size_t len, struct al_jwt_key **ret, struct al_error *err)
{
	_cleanup_(al_jwt_key_freep) struct al_jwt_key *k = NULL;
	int r;

	if (len > AL_JWT_KEY_FILE_MAX)
		return al_error_set(err, EFBIG, "%zu bytes: a JWT key is at most %d bytes", len,
				    AL_JWT_KEY_FILE_MAX);
	/* Any PEM is a key or refused, never an HS256 secret: HMAC keyed with
	 * a published RSA or EC public key is a well-known forgery. */
	if (len > 0 && memmem(buf, len, "-----BEGIN", 10))
		r = load_pem(buf, len, &k, err);
	else
		r = load_hs256(buf, len, &k, err);
	if (r < 0 || (r = self_test(k, err)) < 0)
		return r;
	*ret = TAKE_PTR(k);
	return 0;
}

/* The mode and owner a key file must have for what it holds. */
static int check_file(const char *path, const struct stat *st, const struct al_jwt_key *k,
		      struct al_error *err)
{
	const char *what = k->alg == AL_JWT_HS256 ? "an HS256 secret" : "an Ed25519 private key";
	unsigned mode = (unsigned)st->st_mode & 07777;

	if (!k->can_sign) {
		if (mode & 022)
			return al_error_set(err, EPERM,
					    "%s: mode %04o: writable by group or others, who could "
					    "replace the public key (chmod go-w)",
					    path, mode);
		return 0;
	}
	if (st->st_uid != geteuid())
		return al_error_set(err, EPERM,
				    "%s: owned by uid %u, not by airlock's uid %u: %s must be "
				    "readable by its user only (chown)",
				    path, (unsigned)st->st_uid, (unsigned)geteuid(), what);
	if (mode & 077)
		return al_error_set(err, EPERM,
				    "%s: mode %04o: %s must not be readable or writable by group "
				    "or others, who could mint tokens (chmod 600)",
				    path, mode, what);
	return 0;
}

int al_jwt_key_load(const char *path, struct al_jwt_key **ret, struct al_error *err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	_cleanup_(al_jwt_key_freep) struct al_jwt_key *k = NULL;
	unsigned char *buf;
	size_t len = 0;
	struct stat st;
	ssize_t n = 0;
	int r;

	if (fd < 0)
		return al_error_setsys(err, errno, "%s: cannot open the key", path);
	if (fstat(fd, &st) < 0)
		return al_error_setsys(err, errno, "%s: fstat", path);
	if (!S_ISREG(st.st_mode))
		return al_error_set(err, EINVAL, "%s: not a regular file", path);
	if (st.st_size > AL_JWT_KEY_FILE_MAX)
		return al_error_set(err, EFBIG,
				    "%s: %lld bytes: a JWT key file is at most %d bytes", path,
				    (long long)st.st_size, AL_JWT_KEY_FILE_MAX);
	/* One byte more than the limit: a file that grew after fstat is
	 * refused too. */
	buf = OPENSSL_malloc(AL_JWT_KEY_FILE_MAX + 1);
	if (!buf)
		return al_error_set(err, ENOMEM, "%s: out of memory", path);
	while (len <= AL_JWT_KEY_FILE_MAX &&
	       (n = read(fd, buf + len, AL_JWT_KEY_FILE_MAX + 1 - len)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		len += (size_t)n;
	}
	if (n < 0)
		r = al_error_setsys(err, errno, "%s: read", path);
	else if ((r = al_jwt_key_from_mem(buf, len, &k, err)) < 0)
		al_error_wrap(err, "%s", path);
	OPENSSL_clear_free(buf, len);
	if (r < 0)
		return r;
	if ((r = check_file(path, &st, k, err)) < 0)
		return r;
	*ret = TAKE_PTR(k);
	return 0;
}

int al_jwt_jwks(const struct al_jwt_key *k, char **ret_json, struct al_error *err)
{
	char x[JWT_THUMBPRINT_LEN + 1];
	json_t *doc;
	char *text;

	if (k->alg != AL_JWT_EDDSA)
		return al_error_set(
		    err, EINVAL,
		    "an HS256 key is a shared secret: its JWK Set would publish the "
		    "secret itself (give the service the key file instead)");
	al_b64url_encode(k->pub, sizeof(k->pub), x);
	doc = json_pack("{s:[{s:s,s:s,s:s,s:s,s:s,s:s}]}", "keys", "kty", "OKP", "crv", "Ed25519",
			"x", x, "kid", k->kid, "alg", "EdDSA", "use", "sig");
	text = doc ? json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	json_decref(doc);
	if (!text)
		return al_error_set(err, ENOMEM, "cannot build the JWK Set");
	*ret_json = text;
	return 0;
}

/* A new key's file bytes, in memory OPENSSL_clear_free() wipes. */
static int new_key_bytes(enum al_jwt_alg alg, unsigned char **ret, size_t *ret_len,
			 struct al_error *err)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char raw[HS256_KEYGEN_BYTES], *out;

	if (alg == AL_JWT_HS256) {
		if (RAND_bytes(raw, sizeof(raw)) != 1)
			return al_jwt_ossl_error(err, EIO, "no randomness for a new HS256 secret");
		out = OPENSSL_malloc(2 * sizeof(raw));
		if (!out)
			return al_error_set(err, ENOMEM, "out of memory");
		for (size_t i = 0; i < sizeof(raw); i++) {
			out[2 * i] = (unsigned char)hex[raw[i] >> 4];
			out[2 * i + 1] = (unsigned char)hex[raw[i] & 15];
		}
		OPENSSL_cleanse(raw, sizeof(raw));
		*ret = out;
		*ret_len = 2 * sizeof(raw);
		return 0;
	}
	_cleanup_(pkey_freep) EVP_PKEY *pk = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
	/* A secure-memory BIO wipes what it held when it is freed. */
	_cleanup_(bio_freep) BIO *bio = pk ? BIO_new(BIO_s_secmem()) : NULL;
	char *pem = NULL;
	long n;

	if (!bio || PEM_write_bio_PrivateKey(bio, pk, NULL, NULL, 0, NULL, NULL) != 1 ||
	    (n = BIO_get_mem_data(bio, &pem)) <= 0)
		return al_jwt_ossl_error(err, EIO, "cannot generate an Ed25519 key");
	out = OPENSSL_malloc((size_t)n);
	if (!out)
		return al_error_set(err, ENOMEM, "out of memory");
	memcpy(out, pem, (size_t)n);
	*ret = out;
	*ret_len = (size_t)n;
	return 0;
}

int al_jwt_keygen(enum al_jwt_alg alg, const char *path, struct al_error *err)
{
	unsigned char *data = NULL;
	size_t len = 0;
	int fd, r;

	if (alg != AL_JWT_HS256 && alg != AL_JWT_EDDSA)
		return al_error_set(err, EINVAL, "unknown JWT algorithm %d", (int)alg);
	if ((r = new_key_bytes(alg, &data, &len, err)) < 0)
		return al_error_wrap(err, "%s", path);
	/* O_EXCL: never overwrite a key someone relies on, and never follow
	 * a link planted at path. */
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
	if (fd < 0 && errno == EEXIST)
		r = al_error_set(err, EEXIST, "%s: exists: a new key never replaces a file", path);
	else if (fd < 0)
		r = al_error_setsys(err, errno, "%s: cannot create the key file", path);
	else if ((r = al_write_all(fd, data, len)) < 0)
		al_error_setsys(err, -r, "%s: write", path);
	else if (fsync(fd) < 0)
		r = al_error_setsys(err, errno, "%s: fsync", path);
	if (fd >= 0 && close(fd) < 0 && r == 0)
		r = al_error_setsys(err, errno, "%s: close", path);
	if (fd >= 0 && r < 0)
		unlink(path);
	OPENSSL_clear_free(data, len);
	return r;
}
