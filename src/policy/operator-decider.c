/* The operator policy's "decider" (operator.h's struct al_decider_conf):
 * where the external decider listens and what it is asked. Strict like
 * the rest of the parser (operator-parse.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "policy/operator-cred.h"

#define DECIDER_TIMEOUT_DEFAULT_MS 1000u
#define DECIDER_TIMEOUT_MAX_MS	   60000u
#define DECIDER_CACHE_DEFAULT	   256u
#define DECIDER_TTL_DEFAULT_MS	   60000u

#define fail al_json_fail

/* The decider's address: "socket" (a Unix socket's path) or "url"
 * ("http://127.0.0.1:PORT", "http://[::1]:PORT"); nothing else. */
static int parse_decider_url(struct al_json_ctx *c, const char *url, struct al_decider_conf *d)
{
	const char *rest, *port;
	char *end;

	if (strncmp(url, "http://", 7) != 0)
		return fail(c, "decider.url",
			    "expected http://127.0.0.1:PORT or http://[::1]:PORT");
	rest = url + 7;
	if (strncmp(rest, "127.0.0.1:", 10) == 0) {
		d->host = xstrdup("127.0.0.1");
		port = rest + 10;
	} else if (strncmp(rest, "[::1]:", 6) == 0) {
		d->host = xstrdup("::1");
		port = rest + 6;
	} else {
		return fail(c, "decider.url",
			    "\"%s\": the decider must be on this machine's loopback "
			    "(http://127.0.0.1:PORT or http://[::1]:PORT) or a Unix socket",
			    url);
	}
	errno = 0;
	unsigned long p = strtoul(port, &end, 10);
	if (errno || end == port || (*end && strcmp(end, "/") != 0) || p == 0 || p > 65535 ||
	    port[0] == '+' || port[0] == '-')
		return fail(c, "decider.url", "\"%s\": bad port", url);
	d->port = (uint16_t)p;
	return 0;
}

static int parse_decider_path(struct al_json_ctx *c, const json_t *v, const char *key, char **out)
{
	char sub[64];
	int r;

	snprintf(sub, sizeof(sub), "decider.%s", key);
	if ((r = al_json_string(c, v, sub, out)) < 0)
		return r;
	bool ok = (*out)[0] == '/' && strlen(*out) <= 256;
	for (const char *p = *out; ok && *p; p++)
		ok = *p > 0x20 && *p < 0x7f && *p != '?' && *p != '#' && *p != '%';
	if (!ok || strstr(*out, "//") || strstr(*out, "/../") || strstr(*out, "/./")) {
		r = fail(c, sub, "expected a path such as \"/v1/data/airlock/%s\", got \"%s\"", key,
			 *out);
		free(*out);
		*out = NULL;
	}
	return r;
}

int al_op_parse_decider(struct al_json_ctx *c, const json_t *j)
{
	static const char *const keys[] = {"socket",  "url",   "run",	    "egress",
					   "timeout", "cache", "cache_ttl", NULL};
	_cleanup_(al_decider_conf_freep) struct al_decider_conf *d = xcalloc(1, sizeof(*d));
	_cleanup_free_ char *url = NULL;
	json_t *v;
	int r, bad = 0;
	uint64_t n;

	if ((r = al_json_want(c, j, JSON_OBJECT, "decider", "an object")) < 0)
		return r;
	al_json_note(&bad, al_json_check_keys(c, j, "decider", keys));
	d->where = xstrdup("decider");
	d->timeout_ms = DECIDER_TIMEOUT_DEFAULT_MS;
	d->cache_size = DECIDER_CACHE_DEFAULT;
	d->cache_ttl_ms = DECIDER_TTL_DEFAULT_MS;
	if ((v = json_object_get(j, "socket")) &&
	    al_json_note(&bad, al_json_abs_path(c, v, "decider.socket", &d->socket)) == 0 &&
	    strlen(d->socket) >= 108)
		al_json_note(&bad, fail(c, "decider.socket",
					"longer than a Unix socket's path may be (107 bytes)"));
	if ((v = json_object_get(j, "url")) &&
	    al_json_note(&bad, al_json_string(c, v, "decider.url", &url)) == 0)
		al_json_note(&bad, parse_decider_url(c, url, d));
	if (!json_object_get(j, "socket") == !json_object_get(j, "url"))
		al_json_note(&bad, fail(c, "decider",
					"give one of \"socket\" (a Unix socket's path) and \"url\" "
					"(http://127.0.0.1:PORT)"));
	if ((v = json_object_get(j, "run")))
		al_json_note(&bad, parse_decider_path(c, v, "run", &d->run_path));
	if ((v = json_object_get(j, "egress")))
		al_json_note(&bad, parse_decider_path(c, v, "egress", &d->egress_path));
	if (!json_object_get(j, "run") && !json_object_get(j, "egress"))
		al_json_note(&bad, fail(c, "decider",
					"nothing to ask: give \"run\" (asked once per run) and/or "
					"\"egress\" (asked per egress request)"));
	if ((v = json_object_get(j, "timeout")) &&
	    al_json_note(&bad, al_json_duration(c, v, "decider.timeout", &d->timeout_ms)) == 0 &&
	    d->timeout_ms > DECIDER_TIMEOUT_MAX_MS)
		al_json_note(&bad, fail(c, "decider.timeout", "at most 60 seconds"));
	if ((v = json_object_get(j, "cache"))) {
		if (json_is_integer(v) && json_integer_value(v) == 0)
			d->cache_size = 0;
		else if (al_json_note(&bad, al_json_count(c, v, "decider.cache", 65536, &n)) == 0)
			d->cache_size = (unsigned)n;
	}
	if ((v = json_object_get(j, "cache_ttl")))
		al_json_note(&bad, al_json_duration(c, v, "decider.cache_ttl", &d->cache_ttl_ms));
	if (bad < 0)
		return bad;
	c->op->decider = TAKE_PTR(d);
	return 0;
}
