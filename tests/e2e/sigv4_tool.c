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
 *   {"ok": true, "value": true|false} for uses_key, or
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
