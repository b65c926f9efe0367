/* The run's CA and the leaves it mints (ca.h). Extensions whose content
 * comes from outside (names) are built as ASN.1 structures, never as
 * OpenSSL configuration strings, so no name can add a field. */
#include "tls/ca.h"

#include <errno.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "net/allow.h"
#include "tls/tls.h"

/* A certificate's validity starts this long before it is made, so a client
 * whose clock is a little behind the host's accepts it. */
#define BACKDATE 60

struct leaf {
	char *name; /* normalised; NULL for an empty slot */
	X509 *cert;
	EVP_PKEY *key;
};

struct al_tls_ca {
	EVP_PKEY *key; /* NULL once dropped */
	X509 *cert;
	char *pem;
	int64_t not_after;
	/* When the leaves it mints expire: the run's deadline (a minute
	 * after), which may move (al_tls_ca_set_leaf_end); never past
	 * not_after. */
	int64_t leaf_not_after;
	struct leaf leaves[AL_TLS_LEAF_CACHE];
	size_t next; /* the slot the next leaf takes: once all are used, the oldest */
};

static int new_key(EVP_PKEY **ret, struct al_error *err)
{
	EVP_PKEY *k = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");

	if (!k)
		return al_tls_error(err, EIO, "making a P-256 key");
	*ret = k;
	return 0;
}

/* 16 random bytes, the top bit clear (a positive INTEGER) and the next one
 * set (always 16 bytes long): 126 random bits, well over the 64 that CAs
 * are held to. */
static bool set_serial(X509 *x)
{
	unsigned char b[16];
	BIGNUM *bn;
	bool ok;

	if (RAND_bytes(b, sizeof(b)) != 1)
		return false;
	b[0] = (unsigned char)((b[0] & 0x3f) | 0x40);
	bn = BN_bin2bn(b, sizeof(b), NULL);
	ok = bn && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x));
	BN_free(bn);
	return ok;
}

/* An unsigned certificate for key named subject, issued by issuer_name,
 * valid from BACKDATE ago until not_after. */
static int new_cert(EVP_PKEY *key, const X509_NAME *subject, const X509_NAME *issuer_name,
		    int64_t not_after, X509 **ret, struct al_error *err)
{
	_cleanup_(al_x509_freep) X509 *x = X509_new();
	time_t now = time(NULL);

	if (!x || !X509_set_version(x, X509_VERSION_3) || !set_serial(x) ||
	    !X509_set_subject_name(x, subject) || !X509_set_issuer_name(x, issuer_name) ||
	    !ASN1_TIME_set(X509_getm_notBefore(x), now - BACKDATE) ||
	    !ASN1_TIME_set(X509_getm_notAfter(x), (time_t)not_after) || !X509_set_pubkey(x, key))
		return al_tls_error(err, EIO, "making a certificate");
	*ret = TAKE_PTR(x);
	return 0;
}

/* A fixed extension, from OpenSSL's own syntax for it (value is a
 * constant here). issuer is the certificate that signs x (x itself for the
 * CA). */
static int add_ext(X509 *x, X509 *issuer, int nid, const char *value, struct al_error *err)
{
	X509V3_CTX v3;
	X509_EXTENSION *ext;
	bool ok;

	X509V3_set_ctx(&v3, issuer, x, NULL, NULL, 0);
	ext = X509V3_EXT_nconf_nid(NULL, &v3, nid, value);
	ok = ext && X509_add_ext(x, ext, -1);
	X509_EXTENSION_free(ext);
	if (!ok) {
		char what[64];
		snprintf(what, sizeof(what), "adding %s", OBJ_nid2sn(nid));
		return al_tls_error(err, EIO, what);
	}
	return 0;
}

static GENERAL_NAME *dns_name(const char *prefix, const char *name)
{
	GENERAL_NAME *g = GENERAL_NAME_new();
	ASN1_IA5STRING *s = ASN1_IA5STRING_new();
	char buf[AL_HOST_MAX + 2];
	int n = snprintf(buf, sizeof(buf), "%s%s", prefix, name);

	if (!g || !s || n < 0 || (size_t)n >= sizeof(buf) || !ASN1_STRING_set(s, buf, n)) {
		GENERAL_NAME_free(g);
		ASN1_IA5STRING_free(s);
		return NULL;
	}
	GENERAL_NAME_set0_value(g, GEN_DNS, s);
	return g;
}

static GENERAL_NAME *ip_name(const unsigned char *b, int len)
{
	GENERAL_NAME *g = GENERAL_NAME_new();
	ASN1_OCTET_STRING *o = ASN1_OCTET_STRING_new();

	if (!g || !o || !ASN1_OCTET_STRING_set(o, b, len)) {
		GENERAL_NAME_free(g);
		ASN1_OCTET_STRING_free(o);
		return NULL;
	}
	GENERAL_NAME_set0_value(g, GEN_IPADD, o);
	return g;
}

/* h's address as an iPAddress: 4 or 16 bytes, followed, for a name
 * constraint, by an all-ones mask of the same length (that one address). */
static GENERAL_NAME *addr_name(const struct al_host *h, bool constraint)
{
	unsigned char b[32];
	int n = h->kind == AL_HOST_IPV4 ? 4 : 16;

	memcpy(b, h->addr.s6_addr + (16 - n), (size_t)n);
	if (constraint) {
		memset(b + n, 0xff, (size_t)n);
		n *= 2;
	}
	return ip_name(b, n);
}

static bool push_subtree(STACK_OF(GENERAL_SUBTREE) * *st, GENERAL_NAME *g)
{
	GENERAL_SUBTREE *t;

	if (!g)
		return false;
	if (!*st && !(*st = sk_GENERAL_SUBTREE_new_null())) {
		GENERAL_NAME_free(g);
		return false;
	}
	t = GENERAL_SUBTREE_new();
	if (!t) {
		GENERAL_NAME_free(g);
		return false;
	}
	GENERAL_NAME_free(t->base);
	t->base = g;
	if (!sk_GENERAL_SUBTREE_push(*st, t)) {
		GENERAL_SUBTREE_free(t);
		return false;
	}
	return true;
}

/* One permitted entry as a subtree: "*.example.com" is ".example.com" (the
 * names below it, not itself), a name is itself and the names below it, an
 * address is that one address. */
static int permit(NAME_CONSTRAINTS *nc, const char *entry, bool *ret_name, bool *ret_addr,
		  struct al_error *err)
{
	bool wild = entry && strncmp(entry, "*.", 2) == 0;
	const char *host = wild ? entry + 2 : entry;
	struct al_host h;
	int r;

	if (!entry)
		return al_error_set(err, EINVAL, "NULL entry");
	r = al_host_parse(host, strlen(host), &h, err);
	if (r < 0)
		return r;
	if (wild && h.kind != AL_HOST_NAME)
		return al_error_set(err, EINVAL, "a wildcard needs a host name after \"*.\"");
	if (h.kind == AL_HOST_NAME)
		*ret_name = true;
	else
		*ret_addr = true;
	if (!push_subtree(&nc->permittedSubtrees, h.kind == AL_HOST_NAME
						      ? dns_name(wild ? "." : "", h.text)
						      : addr_name(&h, true)))
		return al_tls_error(err, EIO, "building nameConstraints");
	return 0;
}

/* Exclude the kinds that no entry permits: without a permitted subtree of
 * its kind, a name or an address would be unconstrained (RFC 5280). An
 * empty dNSName is every name; 0.0.0.0/0 and ::/0 are every address. */
static bool exclude_rest(NAME_CONSTRAINTS *nc, bool any_name, bool any_addr)
{
	static const unsigned char zero[32];

	if (!any_name && !push_subtree(&nc->excludedSubtrees, dns_name("", "")))
		return false;
	if (!any_addr && (!push_subtree(&nc->excludedSubtrees, ip_name(zero, 8)) ||
			  !push_subtree(&nc->excludedSubtrees, ip_name(zero, 32))))
		return false;
	return true;
}

static int add_name_constraints(X509 *x, const char *const *permitted, size_t n,
				struct al_error *err)
{
	NAME_CONSTRAINTS *nc;
	bool any_name = false, any_addr = false;
	int r = 0;

	if (n > AL_TLS_CA_PERMITTED_MAX)
		return al_error_set(err, EINVAL, "%zu permitted hosts, more than %d", n,
				    AL_TLS_CA_PERMITTED_MAX);
	nc = NAME_CONSTRAINTS_new();
	if (!nc)
		return al_tls_error(err, EIO, "building nameConstraints");
	for (size_t i = 0; i < n && r == 0; i++) {
		r = permit(nc, permitted[i], &any_name, &any_addr, err);
		if (r < 0) {
			char text[AL_HOST_MAX + 4];
			al_tls_printable(permitted[i], permitted[i] ? strlen(permitted[i]) : 0,
					 text, sizeof(text));
			al_error_wrap(err, "permitted host %zu \"%s\"", i, text);
		}
	}
	if (r == 0 && (!exclude_rest(nc, any_name, any_addr) ||
		       !X509_add1_ext_i2d(x, NID_name_constraints, nc, 1, X509V3_ADD_DEFAULT)))
		r = al_tls_error(err, EIO, "adding nameConstraints");
	NAME_CONSTRAINTS_free(nc);
	return r;
}

static bool run_id_is_valid(const char *id)
{
	size_t n = id ? strlen(id) : 0;

	if (n == 0 || n > AL_TLS_RUN_ID_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = id[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

static int ca_pem(struct al_tls_ca *ca, struct al_error *err)
{
	_cleanup_(al_bio_freep) BIO *b = BIO_new(BIO_s_mem());
	char *data;
	long n;

	if (!b || !PEM_write_bio_X509(b, ca->cert))
		return al_tls_error(err, EIO, "writing the CA certificate");
	n = BIO_get_mem_data(b, &data);
	ca->pem = xmalloc((size_t)n + 1);
	memcpy(ca->pem, data, (size_t)n);
	ca->pem[n] = '\0';
	return 0;
}

/* The CA's certificate, self-signed: basicConstraints CA with no
 * intermediates below it, keyUsage for signing certificates only. */
static int ca_cert(struct al_tls_ca *ca, const char *run_id, const char *const *permitted,
		   size_t n_permitted, struct al_error *err)
{
	_cleanup_(al_x509_name_freep) X509_NAME *name = X509_NAME_new();
	char cn[64];
	int r;

	snprintf(cn, sizeof(cn), "airlock run %s", run_id);
	if (!name ||
	    !X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8, (const unsigned char *)"airlock",
					-1, -1, 0) ||
	    !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)cn, -1,
					-1, 0))
		return al_tls_error(err, EIO, "naming the CA");
	if ((r = new_cert(ca->key, name, name, ca->not_after, &ca->cert, err)) < 0 ||
	    (r = add_ext(ca->cert, ca->cert, NID_basic_constraints, "critical,CA:TRUE,pathlen:0",
			 err)) < 0 ||
	    (r = add_ext(ca->cert, ca->cert, NID_key_usage, "critical,keyCertSign,cRLSign", err)) <
		0 ||
	    (r = add_ext(ca->cert, ca->cert, NID_subject_key_identifier, "hash", err)) < 0 ||
	    (r = add_ext(ca->cert, ca->cert, NID_authority_key_identifier, "keyid:always", err)) <
		0)
		return r;
	if (n_permitted && (r = add_name_constraints(ca->cert, permitted, n_permitted, err)) < 0)
		return r;
	if (!X509_sign(ca->cert, ca->key, EVP_sha256()))
		return al_tls_error(err, EIO, "signing the CA certificate");
	return ca_pem(ca, err);
}

int al_tls_ca_new(const char *run_id, int64_t not_after, const char *const *permitted,
		  size_t n_permitted, struct al_tls_ca **ret, struct al_error *err)
{
	_cleanup_(al_tls_ca_freep) struct al_tls_ca *ca = NULL;
	int64_t now = (int64_t)time(NULL);
	int r;

	if (!run_id_is_valid(run_id))
		return al_error_set(err, EINVAL,
				    "run CA: run id must be 1 to %d characters of [A-Za-z0-9._-]",
				    AL_TLS_RUN_ID_MAX);
	if (not_after <= now)
		return al_error_set(err, EINVAL, "run CA: its end (%lld) has passed (now %lld)",
				    (long long)not_after, (long long)now);
	ca = xcalloc(1, sizeof(*ca));
	ca->not_after =
	    not_after - now > AL_TLS_CA_MAX_LIFETIME ? now + AL_TLS_CA_MAX_LIFETIME : not_after;
	ca->leaf_not_after = ca->not_after;
	if ((r = new_key(&ca->key, err)) < 0 ||
	    (r = ca_cert(ca, run_id, permitted, n_permitted, err)) < 0)
		return al_error_wrap(err, "run CA");
	*ret = TAKE_PTR(ca);
	return 0;
}

const char *al_tls_ca_pem(const struct al_tls_ca *ca)
{
	return ca->pem;
}

X509 *al_tls_ca_cert(const struct al_tls_ca *ca)
{
	return ca->cert;
}

int64_t al_tls_ca_not_after(const struct al_tls_ca *ca)
{
	return ca->not_after;
}

static void leaf_clear(struct leaf *l)
{
	free(l->name);
	X509_free(l->cert);
	EVP_PKEY_free(l->key);
	*l = (struct leaf){0};
}

static void leaves_clear(struct al_tls_ca *ca)
{
	for (size_t i = 0; i < AL_TLS_LEAF_CACHE; i++)
		leaf_clear(&ca->leaves[i]);
	ca->next = 0;
}

int64_t al_tls_ca_set_leaf_end(struct al_tls_ca *ca, int64_t leaf_not_after)
{
	if (leaf_not_after > ca->not_after)
		leaf_not_after = ca->not_after;
	/* A cached leaf ends when it was made to: the next one for its name
	 * is minted anew with the new end. */
	if (leaf_not_after != ca->leaf_not_after)
		leaves_clear(ca);
	ca->leaf_not_after = leaf_not_after;
	return leaf_not_after;
}

int64_t al_tls_ca_leaf_end(const struct al_tls_ca *ca)
{
	return ca->leaf_not_after;
}

bool al_tls_ca_has_leaf(const struct al_tls_ca *ca, const char *name)
{
	for (size_t i = 0; i < AL_TLS_LEAF_CACHE && ca->leaves[i].name; i++)
		if (strcmp(ca->leaves[i].name, name) == 0)
			return true;
	return false;
}

/* A leaf's subject: the CN is the name when it is a host name that fits
 * (64 characters, X.520's bound); an address has none, since OpenSSL would
 * check a CN that looks like a name against the CA's DNS constraints. */
static X509_NAME *leaf_subject(const struct al_host *h)
{
	X509_NAME *name = X509_NAME_new();

	if (!name ||
	    !X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8, (const unsigned char *)"airlock",
					-1, -1, 0) ||
	    (h->kind == AL_HOST_NAME && strlen(h->text) <= 64 &&
	     !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)h->text,
					 -1, -1, 0))) {
		X509_NAME_free(name);
		return NULL;
	}
	return name;
}

static int add_san(X509 *x, const struct al_host *h, struct al_error *err)
{
	GENERAL_NAMES *gens = sk_GENERAL_NAME_new_null();
	GENERAL_NAME *g = h->kind == AL_HOST_NAME ? dns_name("", h->text) : addr_name(h, false);
	bool ok = gens && g && sk_GENERAL_NAME_push(gens, g);

	if (!ok)
		GENERAL_NAME_free(g);
	ok = ok && X509_add1_ext_i2d(x, NID_subject_alt_name, gens, 0, X509V3_ADD_DEFAULT);
	GENERAL_NAMES_free(gens);
	if (!ok)
		return al_tls_error(err, EIO, "adding subjectAltName");
	return 0;
}

static int mint(struct al_tls_ca *ca, const struct al_host *h, struct leaf *ret,
		struct al_error *err)
{
	_cleanup_(al_x509_name_freep) X509_NAME *subject = leaf_subject(h);
	_cleanup_(al_pkey_freep) EVP_PKEY *key = NULL;
	_cleanup_(al_x509_freep) X509 *x = NULL;
	int r;

	if (!subject)
		return al_tls_error(err, EIO, "naming the leaf");
	if ((r = new_key(&key, err)) < 0 ||
	    (r = new_cert(key, subject, X509_get_subject_name(ca->cert), ca->leaf_not_after, &x,
			  err)) < 0 ||
	    (r = add_ext(x, ca->cert, NID_basic_constraints, "CA:FALSE", err)) < 0 ||
	    (r = add_ext(x, ca->cert, NID_key_usage, "critical,digitalSignature", err)) < 0 ||
	    (r = add_ext(x, ca->cert, NID_ext_key_usage, "serverAuth", err)) < 0 ||
	    (r = add_ext(x, ca->cert, NID_subject_key_identifier, "hash", err)) < 0 ||
	    (r = add_ext(x, ca->cert, NID_authority_key_identifier, "keyid:always", err)) < 0 ||
	    (r = add_san(x, h, err)) < 0)
		return r;
	if (!X509_sign(x, ca->key, EVP_sha256()))
		return al_tls_error(err, EIO, "signing the leaf");
	*ret = (struct leaf){.name = xstrdup(h->text), .cert = TAKE_PTR(x), .key = TAKE_PTR(key)};
	return 0;
}

int al_tls_ca_leaf(struct al_tls_ca *ca, const char *name, X509 **ret_cert, EVP_PKEY **ret_key,
		   struct al_error *err)
{
	struct leaf fresh, *slot;
	struct al_host h;
	int r;

	if (!name)
		return al_error_set(err, EINVAL, "leaf: no name");
	if ((r = al_host_parse(name, strlen(name), &h, err)) < 0) {
		char text[AL_HOST_MAX + 4];
		al_tls_printable(name, strlen(name), text, sizeof(text));
		return al_error_wrap(err, "leaf for \"%s\"", text);
	}
	for (size_t i = 0; i < AL_TLS_LEAF_CACHE && ca->leaves[i].name; i++) {
		if (strcmp(ca->leaves[i].name, h.text) == 0) {
			*ret_cert = ca->leaves[i].cert;
			*ret_key = ca->leaves[i].key;
			return 0;
		}
	}
	if (!ca->key)
		return al_error_set(err, ENOKEY, "leaf for %s: the run CA's key was dropped",
				    h.text);
	if ((r = mint(ca, &h, &fresh, err)) < 0)
		return al_error_wrap(err, "leaf for %s", h.text);
	slot = &ca->leaves[ca->next];
	leaf_clear(slot);
	*slot = fresh;
	ca->next = (ca->next + 1) % AL_TLS_LEAF_CACHE;
	*ret_cert = slot->cert;
	*ret_key = slot->key;
	return 0;
}

void al_tls_ca_drop_key(struct al_tls_ca *ca)
{
	leaves_clear(ca);
	EVP_PKEY_free(ca->key);
	ca->key = NULL;
}

void al_tls_ca_free(struct al_tls_ca *ca)
{
	if (!ca)
		return;
	al_tls_ca_drop_key(ca);
	X509_free(ca->cert);
	free(ca->pem);
	free(ca);
}
