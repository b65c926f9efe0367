/* libFuzzer target: al_jwt_verify() (cred/jwt.c), which the gateway runs on
 * tokens the sandbox sends. Every input is verified twice as it is, with a
 * fixed HS256 secret and a fixed Ed25519 key (RFC 8037's). An input
 * holding a NUL is also read as HEADER NUL PAYLOAD and verified as a token
 * correctly signed with the secret, so the header and claim checks see
 * arbitrary JSON past the signature. A token accepted must have given an
 * object whose exp is after the fixed time; a refusal must be one of the
 * four documented errors, with a one-line printable message. */
#include <errno.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cred/base64url.h"
#include "cred/jwt.h"

#define NOW 1796155800
#define AUD "api.example.com"

static const char secret[] = "fuzz_jwt: a fixed HS256 secret of more than 32 bytes";
static const char ed_pem[] = "-----BEGIN PRIVATE KEY-----\n"
			     "MC4CAQAwBQYDK2VwBCIEIJ1hsZ3v/VpguoRK9JLsLMREScVpezJpGXA7rAMcrn9g\n"
			     "-----END PRIVATE KEY-----\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct al_jwt_key *load(const char *text)
{
	struct al_jwt_key *k = NULL;

	if (al_jwt_key_from_mem(text, strlen(text), &k, NULL) < 0)
		__builtin_trap();
	return k;
}

static void check(const struct al_jwt_key *k, const char *tok, size_t len)
{
	struct al_error err = {0};
	json_t *claims = NULL;
	int r = al_jwt_verify(k, tok, len, AUD, NOW, &claims, &err);

	if (r == 0) {
		json_t *exp = json_object_get(claims, "exp");
		if (!json_is_object(claims) || !json_is_number(exp) ||
		    !(json_number_value(exp) > NOW))
			__builtin_trap();
		json_decref(claims);
		return;
	}
	if (claims || (r != -EINVAL && r != -EBADMSG && r != -EKEYEXPIRED && r != -EACCES) ||
	    !err.msg[0])
		__builtin_trap();
	for (const char *c = err.msg; *c; c++)
		if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
			__builtin_trap();
}

/* header NUL payload, as a token signed with the secret. */
static void check_forged(const struct al_jwt_key *k, const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, 0, size);
	size_t hl, pl, n;
	unsigned char mac[32];
	unsigned int mac_len = 0;
	char *tok;

	if (!nul)
		return;
	hl = (size_t)(nul - data);
	pl = size - hl - 1;
	tok = malloc(al_b64url_encoded_len(hl) + al_b64url_encoded_len(pl) +
		     al_b64url_encoded_len(sizeof(mac)) + 3);
	n = al_b64url_encode(data, hl, tok);
	tok[n++] = '.';
	n += al_b64url_encode(nul + 1, pl, tok + n);
	HMAC(EVP_sha256(), secret, (int)strlen(secret), (unsigned char *)tok, n, mac, &mac_len);
	tok[n++] = '.';
	n += al_b64url_encode(mac, mac_len, tok + n);
	check(k, tok, n);
	free(tok);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct al_jwt_key *hs, *ed;

	if (!hs) {
		hs = load(secret);
		ed = load(ed_pem);
	}
	check(hs, (const char *)data, size);
	check(ed, (const char *)data, size);
	check_forged(hs, data, size);
	return 0;
}
