/* libFuzzer target: the HTTP request stream filter (gateway/reqstream.c)
 * with a fixed conf that has a secret of every kind, a request rule and
 * needles of secrets not scoped to the host. The input's first bytes
 * choose the form (proxy or origin), whether the stream ends, and the
 * sizes of the feeds and of the room for each event; the rest is the
 * client's bytes. Beyond the sanitizers, invariants trap:
 * - a needle not scoped to the host never goes upstream;
 * - nothing goes upstream after a final event, and the final event is
 *   the answer from then on;
 * - no DATA event is larger than its room or empty;
 * - no text the filter produced holds a secret's value or any needle;
 * - every refusal's status is one the gateway can answer;
 * - the SigV4 signer gets the fields as they will go, then the sandbox's
 *   own Authorization, and no other Authorization among the fields. Its
 *   stand-in signs, refuses (a 6-byte method) or leaves the request as
 *   the sandbox signed it (POST). */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "gateway/reqstream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MARK "SECRETVALUE"

#define PH_HDR	 "airlock-ph-hdr-0123456789abcdef0123456789"
#define PH_BASIC "airlock-ph-basic-0123456789abcdef01234567"
#define PH_QUERY "airlock-ph-query-0123456789abcdef01234567"
#define PH_BODY	 "airlock-ph-body-0123456789abcdef012345678"
#define PH_AWS	 "airlock-ph-awssecret-0123456789abcdef0123"
#define PH_TOKEN "airlock-ph-token-0123456789abcdef01234567"
#define FAKE_KEY "AKIAAIRLOCKFAKE00001"

static const char *const needles[] = {
    PH_HDR,
    PH_BASIC,
    PH_QUERY,
    PH_BODY,
    PH_AWS,
    PH_TOKEN,
    FAKE_KEY,
    "airlock-ph-foreign-0123456789abcdef012345",
    "AKIAAIRLOCKFAKE99999",
    "airlock-ph-other-0123456789abcdef01234567",
};
#define N_NEEDLES (sizeof(needles) / sizeof(needles[0]))
#define OUT_MAX	  (1u << 20)

static const struct al_secret_use secrets[] = {
    {.name = "basic",
     .placeholder = PH_BASIC,
     .value = MARK "-b",
     .value_len = 13,
     .how = AL_SECRET_BASIC,
     .user = "me"},
    {.name = "hdr",
     .placeholder = PH_HDR,
     .value = MARK "-h",
     .value_len = 13,
     .how = AL_SECRET_HEADER,
     .header = "X-Token",
     .tmpl = "Bearer {}"},
    {.name = "query",
     .placeholder = PH_QUERY,
     .value = MARK " q",
     .value_len = 13,
     .how = AL_SECRET_QUERY,
     .param = "key"},
    {.name = "body",
     .placeholder = PH_BODY,
     .value = MARK "\"\\",
     .value_len = 13,
     .how = AL_SECRET_HEADER,
     .header = "X-Body-Key",
     .tmpl = "{}",
     .body = true},
    {.name = "aws",
     .placeholder = PH_AWS,
     .value = MARK "-aws",
     .value_len = 15,
     .how = AL_SECRET_SIGV4,
     .fake_key_id = FAKE_KEY,
     .key_id = "AKIAREAL",
     .token_placeholder = PH_TOKEN,
     .token = MARK "-tok",
     .token_len = 15},
};

/* Basic and SigV4 both present in Authorization: one conf has basic, the
 * other SigV4 (secrets[0..3] and secrets[1..4] go together). */
#define N_SET 4

static char *methods[] = {"GET", "POST", "PUT"};
static char *paths[] = {"/v1/**", "/health", "/up/*.json"};
static const struct al_reqrule rule = {methods, 3,    paths,
				       3,	4096, "api.example.com:80 methods=GET,POST,PUT"};

static bool is_authorization(const struct al_http_header_view *h)
{
	return h->name_len == 13 && !strncasecmp(h->name, "Authorization", 13);
}

static int sign(void *data, const struct al_secret_use *s, const char *method, size_t method_len,
		const char *target, size_t target_len, const struct al_http_header_view *headers,
		size_t n, const char *body_sha256, char *out, size_t size)
{
	static const char auth[] = "AWS4-HMAC-SHA256 Credential=AKIAREAL/x, Signature=1";

	if (target_len == 0 || (body_sha256 && strlen(body_sha256) != 64) || n == 0)
		__builtin_trap();
	/* The fields as they will go, then last the sandbox's own
	 * Authorization (reqstream.h): only a SigV4 one is re-signed, and no
	 * other Authorization is among the fields, so the head sent carries
	 * exactly one, the signer's. */
	if (!is_authorization(&headers[n - 1]) || headers[n - 1].value_len < 17 ||
	    memcmp(headers[n - 1].value, "AWS4-HMAC-SHA256 ", 17) != 0)
		__builtin_trap();
	for (size_t i = 0; i + 1 < n; i++)
		if (is_authorization(&headers[i]))
			__builtin_trap();
	if (method_len == 6)
		return -EINVAL; /* exercises the refusal */
	if (method_len == 4)
		return 0; /* POST: left as the sandbox signed it */
	memcpy(out, auth, sizeof(auth) - 1);
	return size > sizeof(auth) ? (int)sizeof(auth) - 1 : -ENOSPC;
}

static bool scoped(const struct al_reqstream_conf *conf, const char *needle)
{
	for (size_t i = 0; i < conf->n_inject; i++) {
		const struct al_secret_use *s = &conf->inject[i];
		const char *own[] = {s->placeholder, s->fake_key_id, s->token_placeholder};

		for (size_t k = 0; k < 3; k++)
			if (own[k] && strcmp(own[k], needle) == 0)
				return true;
	}
	return false;
}

struct run {
	const struct al_reqstream_conf *conf;
	char out[OUT_MAX];
	size_t out_len;
	bool input_has_mark; /* the sandbox sent the marker itself (a path may quote it) */
	bool final;
	enum al_reqstream_kind kind;
};

/* A text the filter produced: no value, no needle. */
static void text(const struct run *r, const char *s, size_t len)
{
	if (!s)
		return;
	for (size_t i = 0; i < N_NEEDLES; i++)
		if (memmem(s, len, needles[i], strlen(needles[i])))
			__builtin_trap();
	if (!r->input_has_mark && memmem(s, len, MARK, strlen(MARK)))
		__builtin_trap();
}

static void on_event(struct run *r, const struct al_reqstream_event *ev, size_t room)
{
	char answer[1024];

	switch (ev->kind) {
	case AL_REQSTREAM_DATA:
		if (ev->len == 0 || ev->len > room || r->final)
			__builtin_trap();
		if (ev->len <= OUT_MAX - r->out_len) {
			memcpy(r->out + r->out_len, ev->data, ev->len);
			r->out_len += ev->len;
		}
		return;
	case AL_REQSTREAM_REQUEST:
		if (r->final || ev->req.path_len == 0 || ev->req.path[0] != '/' ||
		    ev->req.n_injected > 5)
			__builtin_trap();
		text(r, ev->req.path, ev->req.path_len);
		for (size_t i = 0; i < ev->req.n_injected; i++)
			text(r, ev->req.injected[i], strlen(ev->req.injected[i]));
		return;
	case AL_REQSTREAM_REFUSED:
	case AL_REQSTREAM_MISUSE:
		if (!ev->reason ||
		    al_http_format_response(ev->status, ev->reason, answer, sizeof(answer)) <= 0)
			__builtin_trap();
		/* Misuse is a needle not scoped here, or a scoped SigV4 secret's
		 * fake key id in the request line (a presigned URL: never
		 * re-signed, so never sent on). */
		if (ev->kind == AL_REQSTREAM_MISUSE &&
		    (ev->needle < 0 || ev->needle >= (int)N_NEEDLES || !ev->where ||
		     (scoped(r->conf, needles[ev->needle]) &&
		      !(strcmp(needles[ev->needle], FAKE_KEY) == 0 &&
			strcmp(ev->where, "request line") == 0))))
			__builtin_trap();
		text(r, ev->reason, strlen(ev->reason));
		text(r, ev->rule, ev->rule ? strlen(ev->rule) : 0);
		text(r, ev->where, ev->where ? strlen(ev->where) : 0);
		break;
	case AL_REQSTREAM_END:
		break;
	case AL_REQSTREAM_MORE:
		__builtin_trap();
	}
	if (r->final && ev->kind != r->kind)
		__builtin_trap();
	r->final = true;
	r->kind = ev->kind;
}

static void pull(struct al_reqstream *rs, size_t room, struct run *r)
{
	struct al_reqstream_event ev;

	for (int i = 0; i < 1 << 20; i++) {
		if (al_reqstream_next(rs, room, &ev) == AL_REQSTREAM_MORE)
			return;
		on_event(r, &ev, room);
		if (r->final) {
			/* Asked again, the same answer. */
			if (al_reqstream_next(rs, room, &ev) != r->kind)
				__builtin_trap();
			return;
		}
	}
	__builtin_trap(); /* an endless stream of events from bounded input */
}

/* What went upstream: no needle of a secret not scoped to the host. */
static void check(const struct run *r)
{
	for (size_t i = 0; i < N_NEEDLES; i++) {
		if (!scoped(r->conf, needles[i]) &&
		    memmem(r->out, r->out_len, needles[i], strlen(needles[i])))
			__builtin_trap();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct run r;
	struct al_reqstream_conf conf = {
	    .host = "api.example.com",
	    .port = 80,
	    .rules = &rule,
	    .inject = secrets,
	    .n_inject = N_SET,

	    .body_max = 2048,
	    .sigv4 = sign,
	};
	struct al_reqstream *rs = NULL;
	struct al_error err = {0};
	uint8_t ctl[8] = {0};
	size_t off = 0, k = 0, stuck = 0;

	if (size < sizeof(ctl))
		return 0;
	memcpy(ctl, data, sizeof(ctl));
	data += sizeof(ctl);
	size -= sizeof(ctl);
	conf.proxy_form = ctl[0] & 1;
	if (ctl[0] & 2)
		conf.rules = NULL;
	if (ctl[0] & 4)
		conf.inject = secrets + 1;
	static struct al_needles *set;

	if (!set && al_needles_new(needles, N_NEEDLES, &set, &err) != 0)
		__builtin_trap();
	conf.needles = set;
	if (al_reqstream_new(&conf, &rs, &err) != 0) {
		fprintf(stderr, "%s\n", err.msg);
		__builtin_trap();
	}
	r.out_len = 0;
	r.input_has_mark = memmem(data, size, MARK, strlen(MARK)) != NULL;
	r.final = false;
	r.conf = &conf;
	while (off < size) {
		/* Feed sizes and rooms from ctl[2..7]: 1 to 256 bytes, or all. */
		size_t step = ctl[2 + k % 3] ? ctl[2 + k % 3] : size;
		size_t room = ctl[5 + k % 3] ? ctl[5 + k % 3] : 65536;
		size_t took = al_reqstream_feed(rs, (const char *)data + off,
						size - off < step ? size - off : step);

		off += took;
		stuck = took ? 0 : stuck + 1;
		if (stuck > 2)
			__builtin_trap(); /* neither input taken nor output given */
		pull(rs, room, &r);
		k++;
	}
	if (ctl[1] & 1) {
		al_reqstream_eof(rs);
		pull(rs, 65536, &r);
		if (!r.final)
			__builtin_trap(); /* the end of the stream always ends it */
	}
	check(&r);
	al_reqstream_free(rs);
	return 0;
}
