/* sigv4_tool: cred/sigv4.h driven by JSON, for run_sigv4.py's comparison
 * with botocore.
 *
 * stdin is a JSON array of requests:
 *   {"mode": "header" | "query" | "uses_key",
 *    "method": "GET", "target": "/path?query",
 *    "headers": [["Name", "value"], ...],   (as sent upstream)
 *    "payload_hash": "<64 hex>" or null,
 *    "fake": {"access_key_id": ..., "secret_access_key": ... or null,
 *             "session_token": ... or null},
 *    "real": {...}}
 * stdout is a JSON array with one result per request:
 *   {"ok": true, "value": "<Authorization value or target>"},
 *   {"ok": true, "value": true|false} for uses_key,
 *   {"ok": true, "value": "<Authorization value>", "body_hex": "..."} for
 *   chunked (the request's "body_hex" through al_sigv4_resign_chunked()'s
 *   filter, fed in 1000-byte pieces), or
 *   {"ok": false, "errno": N, "error": "message"}.
 * Exits 0 when every request was read (whatever the results), 2 on input
 * that is not such an array. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cred/sigv4.h"

#define OUT_MAX (AL_SIGV4_TARGET_MAX + 4 * AL_SIGV4_TOKEN_MAX)

static const char *opt_str(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_string(v) ? json_string_value(v) : NULL;
}

static void read_creds(json_t *o, struct al_sigv4_creds *c)
{
	c->access_key_id = opt_str(o, "access_key_id");
	c->secret_access_key = opt_str(o, "secret_access_key");
	c->session_token = opt_str(o, "session_token");
}

static int read_headers(json_t *list, struct al_sigv4_header *h, size_t *ret_n)
{
	size_t i;
	json_t *pair;

	if (!json_is_array(list) || json_array_size(list) > AL_SIGV4_HEADERS_MAX + 8)
		return -EINVAL;
	json_array_foreach(list, i, pair)
	{
		json_t *n = json_array_get(pair, 0), *v = json_array_get(pair, 1);

		if (!json_is_string(n) || !json_is_string(v))
			return -EINVAL;
		h[i] = (struct al_sigv4_header){json_string_value(n), json_string_length(n),
						json_string_value(v), json_string_length(v)};
	}
	*ret_n = i;
	return 0;
}

static int hexval(char c)
{
	return c >= 'a' ? c - 'a' + 10 : c - '0';
}

/* The body (hex) through the filter, into a hex string; NULL when the
 * filter refused it (err says why) or the body ended early. */
static char *filter_body(struct al_sigv4_chunked *c, const char *hex, struct al_error *err)
{
	size_t n = strlen(hex) / 2, off = 0, o = 0, taken, plen;
	char *in = malloc(n + 1), *res = malloc(2 * n + 1);
	const char *p;

	for (size_t i = 0; i < n; i++)
		in[i] = (char)(hexval(hex[2 * i]) * 16 + hexval(hex[2 * i + 1]));
	while (off < n) {
		if (al_sigv4_chunked_feed(c, in + off, n - off < 1000 ? n - off : 1000, &taken,
					  err) < 0)
			break;
		off += taken;
		while ((p = al_sigv4_chunked_pending(c, &plen))) {
			for (size_t i = 0; i < plen && o < n; i++, o++)
				sprintf(res + 2 * o, "%02x", (unsigned char)p[i]);
			al_sigv4_chunked_sent(c, plen);
		}
		if (taken == 0)
			break;
	}
	free(in);
	res[2 * o] = '\0';
	if (!al_sigv4_chunked_done(c)) {
		if (!err->msg[0])
			al_error_set(err, EINVAL, "the body ended before its last chunk");
		free(res);
		return NULL;
	}
	return res;
}

static json_t *run_chunked(const struct al_sigv4_request *r, const struct al_sigv4_creds *fake,
			   const struct al_sigv4_creds *real, const char *hex, char *out,
			   size_t size)
{
	struct al_sigv4_chunked *c = NULL;
	struct al_error err = {0};
	int ret = al_sigv4_resign_chunked(r, fake, real, out, size, &c, &err);
	char *body;
	json_t *res;

	if (ret < 0 || !c || !hex) {
		al_sigv4_chunked_free(c);
		if (ret >= 0)
			ret = al_error_set(&err, EINVAL, "not a body of signed chunks");
		return json_pack("{s:b, s:i, s:s}", "ok", 0, "errno", -ret, "error", err.msg);
	}
	body = filter_body(c, hex, &err);
	al_sigv4_chunked_free(c);
	if (!body)
		return json_pack("{s:b, s:i, s:s}", "ok", 0, "errno", err.code, "error", err.msg);
	res = json_pack("{s:b, s:s, s:s}", "ok", 1, "value", out, "body_hex", body);
	free(body);
	return res;
}

static json_t *result(int r, const char *value, const struct al_error *err)
{
	if (r < 0)
		return json_pack("{s:b, s:i, s:s}", "ok", 0, "errno", -r, "error", err->msg);
	return json_pack("{s:b, s:s}", "ok", 1, "value", value);
}

static json_t *run_one(json_t *q)
{
	static char out[OUT_MAX];
	struct al_sigv4_header headers[AL_SIGV4_HEADERS_MAX + 8];
	struct al_sigv4_request r = {0};
	struct al_sigv4_creds fake = {0}, real = {0};
	struct al_error err = {0};
	json_t *method = json_object_get(q, "method"), *target = json_object_get(q, "target");
	const char *mode = opt_str(q, "mode");
	int ret;

	if (!mode || !json_is_string(method) || !json_is_string(target) ||
	    read_headers(json_object_get(q, "headers"), headers, &r.n_headers) < 0)
		return NULL;
	r.method = json_string_value(method);
	r.method_len = json_string_length(method);
	r.target = json_string_value(target);
	r.target_len = json_string_length(target);
	r.headers = headers;
	r.payload_hash = opt_str(q, "payload_hash");
	read_creds(json_object_get(q, "fake"), &fake);
	read_creds(json_object_get(q, "real"), &real);
	if (strcmp(mode, "uses_key") == 0)
		return json_pack("{s:b, s:b}", "ok", 1, "value",
				 al_sigv4_uses_key(&r, fake.access_key_id));
	if (strcmp(mode, "chunked") == 0)
		return run_chunked(&r, &fake, &real, opt_str(q, "body_hex"), out, sizeof(out));
	if (strcmp(mode, "header") == 0)
		ret = al_sigv4_resign(&r, &fake, &real, out, sizeof(out), &err);
	else if (strcmp(mode, "query") == 0)
		ret = al_sigv4_resign_query(&r, &fake, &real, out, sizeof(out), &err);
	else
		return NULL;
	return result(ret, out, &err);
}

int main(void)
{
	json_error_t jerr;
	json_t *in = json_loadf(stdin, 0, &jerr), *results = json_array(), *q;
	size_t i;

	if (!json_is_array(in)) {
		fprintf(stderr, "sigv4_tool: stdin: %s\n", in ? "not an array" : jerr.text);
		return 2;
	}
	json_array_foreach(in, i, q)
	{
		json_t *res = run_one(q);

		if (!res) {
			fprintf(stderr, "sigv4_tool: request %zu is malformed\n", i);
			return 2;
		}
		json_array_append_new(results, res);
	}
	json_dumpf(results, stdout, JSON_COMPACT);
	putchar('\n');
	json_decref(results);
	json_decref(in);
	return 0;
}
