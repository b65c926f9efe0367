/* The request stream filter (reqstream.h): its life, the events, and the
 * checks each request head gets. reqstream-internal.h says which file does
 * what. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "gateway/reqstream-internal.h"

static char lower(char c)
{
	return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

bool rs_same_ci(const char *a, size_t alen, const char *b)
{
	size_t n = strlen(b);

	if (alen != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (lower(a[i]) != lower(b[i]))
			return false;
	return true;
}

static size_t redact(const struct al_needles *set, const char *s, size_t len, char *out);

/* The request of a final event, when its head was parsed. */
static void fin_request(struct al_reqstream *rs)
{
	const struct al_http_request *q = &rs->req;
	size_t n = q->path.len;

	if (!rs->req_known)
		return;
	/* redact() writes at most as many bytes as it reads. */
	if (n > sizeof(rs->fin_path) - 1)
		n = sizeof(rs->fin_path) - 1;
	n = redact(rs->needles, rs->head + q->path.off, n, rs->fin_path);
	rs->fin_path[n] = '\0';
	rs->fin.req.method = rs->head + q->method.off;
	rs->fin.req.method_len = q->method.len;
	rs->fin.req.path = rs->fin_path;
	rs->fin.req.path_len = n;
	rs->fin.req.host = rs->host.text;
	rs->fin.req.port = rs->conf->port;
}

void rs_refuse(struct al_reqstream *rs, int status, const char *rule, const char *fmt, ...)
{
	va_list ap;

	if (rs->st == RS_FINAL)
		return;
	va_start(ap, fmt);
	vsnprintf(rs->reason, sizeof(rs->reason), fmt, ap);
	va_end(ap);
	rs->fin = (struct al_reqstream_event){
	    .kind = AL_REQSTREAM_REFUSED,
	    .status = status,
	    .rule = rule,
	    .reason = rs->reason,
	    .cut = rs->sent_any,
	    .needle = -1,
	};
	fin_request(rs);
	rs->st = RS_FINAL;
}

void rs_misuse(struct al_reqstream *rs, int index, const char *where)
{
	if (rs->st == RS_FINAL)
		return;
	snprintf(rs->where, sizeof(rs->where), "%s", where);
	snprintf(
	    rs->reason, sizeof(rs->reason),
	    "the placeholder of a secret that is not scoped to this host (needle %d) in the %s",
	    index, rs->where);
	rs->fin = (struct al_reqstream_event){
	    .kind = AL_REQSTREAM_MISUSE,
	    .status = 403,
	    .reason = rs->reason,
	    .cut = rs->sent_any,
	    .needle = index,
	    .where = rs->where,
	};
	fin_request(rs);
	rs->st = RS_FINAL;
}

static void end(struct al_reqstream *rs, bool incomplete)
{
	rs->fin = (struct al_reqstream_event){
	    .kind = AL_REQSTREAM_END,
	    .needle = -1,
	    .incomplete = incomplete,
	    .cut = incomplete && rs->sent_any,
	};
	rs->st = RS_FINAL;
}

/* The needles of the secrets scoped here are not looked for. */
static void needles_prepare(struct al_reqstream *rs)
{
	const struct al_reqstream_conf *conf = rs->conf;

	rs->needles = conf->needles;
	for (size_t i = 0; i < al_needles_count(conf->needles); i++) {
		const char *needle = al_needles_get(conf->needles, (int)i);

		for (size_t j = 0; j < conf->n_inject; j++) {
			const struct al_secret_use *s = &conf->inject[j];
			const char *own[] = {s->placeholder, s->fake_key_id, s->token_placeholder};

			for (size_t k = 0; k < AL_ARRAY_SIZE(own); k++)
				if (own[k] && strcmp(own[k], needle) == 0)
					rs->scoped |= (al_needle_mask)1 << i;
		}
	}
}

int al_reqstream_new(const struct al_reqstream_conf *conf, struct al_reqstream **ret,
		     struct al_error *err)
{
	_cleanup_(al_reqstream_freep) struct al_reqstream *rs = NULL;
	int r;

	if (!conf || !conf->host)
		return al_error_set(err, EINVAL, "no host");
	rs = xcalloc(1, sizeof(*rs));
	rs->conf = conf;
	rs->sigv4 = -1;
	rs->walk_sec = -1;
	if (al_host_parse(conf->host, strlen(conf->host), &rs->host, err) < 0)
		return al_error_wrap(err, "host");
	if (conf->port == 0)
		return al_error_set(err, EINVAL, "port 0");
	r = al_host_format(&rs->host, rs->host_field, sizeof(rs->host_field));
	if (r > 0 && conf->port != 80 && conf->port != 443)
		snprintf(rs->host_field + r, sizeof(rs->host_field) - (size_t)r, ":%u", conf->port);
	needles_prepare(rs);
	r = rs_secrets_prepare(rs, err);
	if (r < 0)
		return r;
	al_needle_scan_init(&rs->scan, rs->needles, rs->scoped);
	al_needle_scan_init(&rs->oscan, rs->needles, rs->scoped);
	*ret = TAKE_PTR(rs);
	return 0;
}

void al_reqstream_free(struct al_reqstream *rs)
{
	if (!rs)
		return;
	rs_secrets_free(rs);
	free(rs->body);
	free(rs);
}

size_t al_reqstream_feed(struct al_reqstream *rs, const char *buf, size_t len)
{
	size_t n;

	if (rs->st == RS_FINAL)
		return len;
	if (len > RS_IN_SIZE - rs->in_len && rs->in_off > 0) {
		/* Pointers handed out by the last event die here, as the
		 * header says. */
		memmove(rs->in, rs->in + rs->in_off, rs->in_len - rs->in_off);
		rs->in_pos -= rs->in_off;
		rs->in_len -= rs->in_off;
		rs->in_off = 0;
	}
	n = len < RS_IN_SIZE - rs->in_len ? len : RS_IN_SIZE - rs->in_len;
	memcpy(rs->in + rs->in_len, buf, n);
	rs->in_len += n;
	return n;
}

void al_reqstream_eof(struct al_reqstream *rs)
{
	rs->eof = true;
}

void al_reqstream_refuse(struct al_reqstream *rs, int status, const char *reason)
{
	rs_refuse(rs, status, NULL, "%s", reason ? reason : "refused");
}

static void request_reset(struct al_reqstream *rs)
{
	rs->sent_any = false;
	rs->query = NULL;
	rs->query_len = 0;
	rs->resign = rs->hashed = rs->rewritten = false;
	rs->amz_sha = -1;
	rs->left = 0;
	rs->ck = RS_CK_SIZE;
	rs->trailer_bytes = rs->trailer_fields = 0;
	rs->body_seen = 0;
	rs->body_used = 0;
	rs->n_injected = 0;
	memset(rs->hits, 0, rs->conf->n_inject * sizeof(size_t));
	al_needle_scan_reset(&rs->scan);
}

int rs_find_field(const struct al_reqstream *rs, const char *name)
{
	for (size_t i = 0; i < rs->req.n_headers; i++) {
		const struct al_http_header *h = &rs->req.headers[i];

		if (rs_same_ci(rs->head + h->name.off, h->name.len, name))
			return (int)i;
	}
	return -1;
}

/* Where in the head the needle at off starts: the text names a header
 * only when its name holds no needle at all. */
static void where_in_head(struct al_reqstream *rs, size_t off, char *out, size_t size)
{
	const struct al_http_request *q = &rs->req;
	const struct al_http_header *h = NULL;

	for (size_t i = 0; i < q->n_headers && q->headers[i].name.off <= off; i++)
		h = &q->headers[i];
	if (!h) {
		snprintf(out, size, "request line");
		return;
	}
	if (off < h->name.off + h->name.len || h->name.len > 64 ||
	    al_needles_find(rs->needles, 0, rs->head + h->name.off, h->name.len, NULL) >= 0) {
		snprintf(out, size, off < h->name.off + h->name.len ? "header name" : "header");
		return;
	}
	snprintf(out, size, "header %.*s", (int)h->name.len, rs->head + h->name.off);
}

static int check_needles(struct al_reqstream *rs)
{
	char where[96];
	size_t off = 0;
	int i;

	i = al_needles_find(rs->needles, rs->scoped, rs->head, rs->req.head_len, &off);
	if (i >= 0) {
		where_in_head(rs, off, where, sizeof(where));
		rs_misuse(rs, i, where);
		return -1;
	}
	return 0;
}

static bool host_ok(const struct al_reqstream *rs)
{
	const struct al_http_request *q = &rs->req;
	const struct al_http_header *h;

	if (q->form == AL_HTTP_FORM_ABSOLUTE)
		return q->host.kind == rs->host.kind && strcmp(q->host.text, rs->host.text) == 0 &&
		       q->port == rs->conf->port;
	if (q->host_header < 0)
		return q->version_minor == 0;
	h = &q->headers[q->host_header];
	return al_http_host_matches(&rs->host, rs->conf->port, rs->head + h->value.off,
				    h->value.len);
}

static int check_form(struct al_reqstream *rs)
{
	const struct al_http_request *q = &rs->req;

	if (q->is_connect) {
		rs_refuse(rs, 501, NULL, "CONNECT inside a connection whose requests are checked");
		return -1;
	}
	if (rs_find_field(rs, "Upgrade") >= 0) {
		rs_refuse(rs, 501, NULL,
			  "protocol upgrade (Upgrade): the bytes after it could not be checked");
		return -1;
	}
	/* Answers on a connection that carries a secret are searched whole
	 * for its value (gateway/answer.h): a part of one cannot be. */
	if (rs->conf->n_inject &&
	    (rs_find_field(rs, "Range") >= 0 || rs_find_field(rs, "If-Range") >= 0)) {
		rs_refuse(rs, 403, NULL,
			  "a Range request to a host a secret goes to: its answer must be "
			  "searched whole for the secret's value");
		return -1;
	}
	/* TRACE echoes the request, secrets put into it included. */
	if (rs_same_ci(rs->head + q->method.off, q->method.len, "TRACE") ||
	    rs_same_ci(rs->head + q->method.off, q->method.len, "TRACK")) {
		rs_refuse(rs, 501, NULL, "TRACE would echo what the gateway puts into requests");
		return -1;
	}
	/* A method override would turn an allowed method into another, and
	 * where answers are searched, a GET into a HEAD whose answer has no
	 * body (the search would read the next answer as one). */
	if (((rs->conf->rules && rs->conf->rules->n_methods) || rs->conf->n_inject) &&
	    (rs_find_field(rs, "X-HTTP-Method-Override") >= 0 ||
	     rs_find_field(rs, "X-HTTP-Method") >= 0 ||
	     rs_find_field(rs, "X-Method-Override") >= 0)) {
		rs_refuse(rs, 403,
			  rs->conf->rules && rs->conf->rules->n_methods ? rs->conf->rules->text
									: NULL,
			  rs->conf->rules && rs->conf->rules->n_methods
			      ? "a method override header where methods are restricted"
			      : "a method override header to a host a secret goes to");
		return -1;
	}
	if (rs->conf->proxy_form && q->form != AL_HTTP_FORM_ABSOLUTE) {
		rs_refuse(rs, 400, NULL, "a proxy request must have an absolute-form target");
		return -1;
	}
	if (!rs->conf->proxy_form && q->form != AL_HTTP_FORM_ORIGIN) {
		rs_refuse(rs, 400, NULL, "only origin-form request targets are accepted here");
		return -1;
	}
	if (!host_ok(rs)) {
		rs_refuse(rs, 421, NULL, "the request names another host than its connection's");
		return -1;
	}
	return 0;
}

/* Does t (len bytes) hold text, in its raw bytes or once its %XX are
 * decoded (a server reads "%41KIA" as "AKIA")? */
static bool decoded_has(const char *t, size_t len, const char *text)
{
	size_t m = strlen(text);

	for (size_t i = 0; m && i < len; i++) {
		size_t j = i, k = 0;
		while (k < m && j < len) {
			int c = (unsigned char)t[j], hi, lo;
			if (c == '%' && j + 2 < len && (hi = al_hex_digit(t[j + 1])) >= 0 &&
			    (lo = al_hex_digit(t[j + 2])) >= 0) {
				c = hi * 16 + lo;
				j += 3;
			} else {
				j++;
			}
			if (c != (unsigned char)text[k])
				break;
			k++;
		}
		if (k == m)
			return true;
	}
	return false;
}

/* A scoped SigV4 secret's fake key id is allowed only in the Authorization
 * that is re-signed. In the request target it is a presigned URL
 * (X-Amz-Credential) the sandbox made with the fake key: presigned URLs
 * are not re-signed, so it is misuse, as docs/credentials.md says. */
static int check_presigned(struct al_reqstream *rs, const char *target, size_t len)
{
	for (size_t j = 0; j < rs->conf->n_inject; j++) {
		const struct al_secret_use *s = &rs->conf->inject[j];
		int i = -1;

		if (s->how != AL_SECRET_SIGV4 || !s->fake_key_id ||
		    !decoded_has(target, len, s->fake_key_id))
			continue;
		for (size_t k = 0; k < al_needles_count(rs->needles); k++)
			if (strcmp(al_needles_get(rs->needles, (int)k), s->fake_key_id) == 0)
				i = (int)k;
		if (i < 0) { /* no needle to audit it by: a plain refusal */
			rs_refuse(rs, 403, NULL,
				  "the fake key id of secret %s in the request line (a presigned "
				  "URL is not re-signed)",
				  s->name);
			return -1;
		}
		rs_misuse(rs, i, "request line");
		snprintf(rs->reason, sizeof(rs->reason),
			 "the fake key id of a SigV4 secret in the request line (needle %d): a "
			 "presigned URL is not re-signed",
			 i);
		return -1;
	}
	return 0;
}

static int check_path(struct al_reqstream *rs)
{
	const struct al_http_request *q = &rs->req;
	const char *src = rs->head + q->path.off;
	const struct al_reqrule *rules = rs->conf->rules;
	struct al_error err = {0};
	const char *why = NULL;
	int r, i;

	r = al_reqrule_path_normalize(src, q->path.len, rs->path, sizeof(rs->path), &err);
	if (r < 0) {
		rs_refuse(rs, 400, NULL, "%s", r == -ENOSPC ? "path too long" : err.msg);
		return -1;
	}
	rs->path_len = (size_t)r;
	rs->query = memchr(src, '?', q->path.len);
	rs->query_len = rs->query ? q->path.len - (size_t)(rs->query - src) : 0;
	/* Decoding can join a placeholder the raw bytes hid ("%61irlock"). */
	i = al_needles_find(rs->needles, rs->scoped, rs->path, rs->path_len, NULL);
	if (i >= 0) {
		rs_misuse(rs, i, "request line");
		return -1;
	}
	if (check_presigned(rs, src, q->path.len) < 0)
		return -1;
	if (!rules)
		return 0;
	r = al_reqrule_check(rules, rs->head + q->method.off, q->method.len, rs->path, rs->path_len,
			     q->content_length, &why);
	if (r != 0) {
		rs_refuse(rs, r, rules->text, "%s", why);
		return -1;
	}
	return 0;
}

/* HTTP/1.0 closes after each request unless kept alive; HTTP/1.1 when
 * Connection says close. The upstream is told so it closes too. */
static bool wants_close(const struct al_reqstream *rs)
{
	bool keep = false, close = false;

	for (size_t i = 0; i < rs->req.n_headers; i++) {
		const struct al_http_header *h = &rs->req.headers[i];
		const char *v = rs->head + h->value.off;
		size_t n = h->value.len;

		if (!rs_same_ci(rs->head + h->name.off, h->name.len, "Connection"))
			continue;
		for (size_t s = 0, e; s < n; s = e + 1) {
			const char *comma = memchr(v + s, ',', n - s);
			size_t a = s, b;

			e = comma ? (size_t)(comma - v) : n;
			b = e;
			while (a < b && (v[a] == ' ' || v[a] == '\t'))
				a++;
			while (b > a && (v[b - 1] == ' ' || v[b - 1] == '\t'))
				b--;
			close |= rs_same_ci(v + a, b - a, "close");
			keep |= rs_same_ci(v + a, b - a, "keep-alive");
		}
	}
	return close || (rs->req.version_minor == 0 && !keep);
}

static int plan_body(struct al_reqstream *rs)
{
	const struct al_http_request *q = &rs->req;

	rs->chunked = q->chunked;
	rs->has_body = q->chunked || q->content_length > 0;
	rs->left = q->chunked ? 0 : (uint64_t)(q->content_length > 0 ? q->content_length : 0);
	rs->close = wants_close(rs);
	if (rs_sigv4_plan(rs) < 0)
		return -1;
	rs->buffer = rs->has_body && (rs->any_body || (rs->resign && rs->amz_sha < 0));
	rs->body_len = rs->has_body ? (q->chunked ? -1 : q->content_length) : 0;
	if (!rs->buffer)
		return 0;
	if (q->content_length > 0 && (uint64_t)q->content_length > rs->conf->body_max) {
		rs_refuse(rs, 413, NULL,
			  "a body the gateway must rewrite or hash may be at most %zu bytes",
			  rs->conf->body_max);
		return -1;
	}
	if (!rs->body)
		rs->body = xmalloc(rs->conf->body_max);
	rs->ctype = rs_body_type(rs);
	return 0;
}

/* A complete head is at in_off: check it and decide what to do with it. */
static void take_head(struct al_reqstream *rs, size_t head_len)
{
	request_reset(rs);
	memcpy(rs->head, rs->in + rs->in_off, head_len);
	rs->req_known = true;
	rs->in_off += head_len;
	rs->in_pos = rs->in_off;
	rs->head_tried = 0;
	if (check_needles(rs) < 0 || check_form(rs) < 0 || check_path(rs) < 0 || plan_body(rs) < 0)
		return;
	if (rs->buffer) {
		rs->st = RS_BODY_BUFFER;
		return;
	}
	if (rs->resign && rs->amz_sha < 0 && rs_sha256_hex("", 0, rs->sha_hex) == 0)
		rs->hashed = true;
	if (rs_head_build(rs) < 0 || !rs_out_ok(rs, rs->out, rs->out_len, "request line"))
		return;
	rs->st = RS_ANNOUNCE;
}

/* Parse when a line may have ended (or at the end): a head fed byte by
 * byte is then parsed once a line, not once a byte. */
static void step_head(struct al_reqstream *rs)
{
	size_t avail = rs->in_len - rs->in_off;
	struct al_error err = {0};
	int r;

	if (avail == 0) {
		if (rs->eof)
			end(rs, false);
		return;
	}
	if (rs->head_tried > 0 && avail < RS_IN_SIZE && !rs->eof &&
	    !memchr(rs->in + rs->in_off + rs->head_tried, '\n', avail - rs->head_tried))
		return;
	rs->req_known = false; /* a new head: not the last one's */
	r = al_http_parse_request(rs->in + rs->in_off, avail, &rs->req, &err);
	if (r == -EAGAIN) {
		rs->head_tried = avail;
		if (rs->eof)
			end(rs, true);
		return;
	}
	if (r < 0) {
		rs_refuse(rs, al_http_status_for_error(r), NULL, "%s", err.msg);
		return;
	}
	take_head(rs, (size_t)r);
}

/* Copy len bytes at s to out with every needle of the run in them shown
 * as "{secret}" (no longer than a needle, so out needs len bytes): what
 * the audit is told holds no placeholder, not even a scoped one. */
static size_t redact(const struct al_needles *set, const char *s, size_t len, char *out)
{
	size_t o = 0, off = 0;
	int i;

	while ((i = al_needles_find(set, 0, s, len, &off)) >= 0) {
		size_t skip = off + al_needles_len(set, i);

		memcpy(out + o, s, off);
		memcpy(out + o + off, "{secret}", 8);
		o += off + 8;
		s += skip;
		len -= skip;
	}
	memcpy(out + o, s, len);
	return o + len;
}

static void announce(struct al_reqstream *rs, struct al_reqstream_event *ev)
{
	const struct al_http_request *q = &rs->req;
	size_t mlen =
	    redact(rs->needles, rs->head + q->method.off, q->method.len, rs->shown_method);
	size_t plen = redact(rs->needles, rs->path, rs->path_len, rs->target);

	ev->kind = AL_REQSTREAM_REQUEST;
	ev->req = (struct al_reqstream_request){
	    .index = rs->n_requests++,
	    .method = rs->shown_method,
	    .method_len = mlen,
	    .path = rs->target,
	    .path_len = plen,
	    .host = rs->host.text,
	    .port = rs->conf->port,
	    .injected = rs->injected,
	    .n_injected = rs->n_injected,
	    .body_len = rs->body_len,
	};
	rs->st = RS_SEND_HEAD;
}

/* A request that asked for the connection to close is the last: what the
 * client sends after it is not a request a server would read (RFC 9112
 * 9.6), so the stream ends there. */
static void request_done(struct al_reqstream *rs)
{
	rs->sent_any = false;
	rs->st = RS_HEAD;
	if (rs->close)
		end(rs, false);
}

bool rs_out_ok(struct al_reqstream *rs, const char *data, size_t n, const char *where)
{
	int i = al_needle_scan_feed(&rs->oscan, data, n);

	if (i < 0)
		return true;
	rs_misuse(rs, i, where);
	return false;
}

/* DATA from out: the rewritten head. */
static bool send_head(struct al_reqstream *rs, size_t room, struct al_reqstream_event *ev)
{
	size_t n = rs->out_len - rs->out_off;

	if (room == 0)
		return false;
	if (n > room)
		n = room;
	ev->kind = AL_REQSTREAM_DATA;
	ev->data = rs->out + rs->out_off;
	ev->len = n;
	rs->out_off += n;
	rs->sent_any = true;
	if (rs->out_off < rs->out_len)
		return true;
	if (!rs->has_body)
		request_done(rs);
	else
		rs->st = rs->buffer ? RS_SEND_BODY : RS_BODY_STREAM;
	return true;
}

/* DATA from in: what the body stream checked. */
static bool send_checked(struct al_reqstream *rs, size_t room, struct al_reqstream_event *ev)
{
	size_t n = rs->in_pos - rs->in_off;

	if (n == 0 || room == 0)
		return false;
	if (n > room)
		n = room;
	if (!rs_out_ok(rs, rs->in + rs->in_off, n, "body"))
		return false;
	ev->kind = AL_REQSTREAM_DATA;
	ev->data = rs->in + rs->in_off;
	ev->len = n;
	rs->in_off += n;
	return true;
}

static bool send_body(struct al_reqstream *rs, size_t room, struct al_reqstream_event *ev)
{
	const char *data = NULL;
	size_t n;

	if (room == 0)
		return false;
	n = rs_body_emit(rs, room, &data);
	if (n == 0) {
		request_done(rs);
		return false;
	}
	ev->kind = AL_REQSTREAM_DATA;
	ev->data = data;
	ev->len = n;
	return true;
}

/* One step of the state machine: true when ev is filled, false to look
 * again (the state moved) or, with *more, to wait for input or room. */
static bool step(struct al_reqstream *rs, size_t room, struct al_reqstream_event *ev, bool *more)
{
	enum rs_state st = rs->st;

	switch (st) {
	case RS_FINAL:
		*ev = rs->fin;
		return true;
	case RS_HEAD:
		step_head(rs);
		break;
	case RS_ANNOUNCE:
		announce(rs, ev);
		return true;
	case RS_SEND_HEAD:
		if (send_head(rs, room, ev))
			return true;
		break;
	case RS_BODY_STREAM:
		rs_body_stream(rs);
		if (rs->st == RS_FINAL)
			break;
		if (send_checked(rs, room, ev))
			return true;
		if (rs->in_pos == rs->in_off && rs_body_done(rs))
			request_done(rs);
		else if (rs->in_pos == rs->in_off && rs->eof)
			end(rs, true); /* what is left cannot be completed */
		break;
	case RS_BODY_BUFFER:
		rs_body_collect(rs);
		if (rs->st != RS_BODY_BUFFER)
			break;
		if (rs_body_done(rs))
			rs_body_finish(rs);
		else if (rs->eof)
			end(rs, true);
		break;
	case RS_SEND_BODY:
		if (send_body(rs, room, ev))
			return true;
		break;
	}
	*more = rs->st == st;
	return false;
}

enum al_reqstream_kind al_reqstream_next(struct al_reqstream *rs, size_t room,
					 struct al_reqstream_event *ev)
{
	bool more = false;

	*ev = (struct al_reqstream_event){.kind = AL_REQSTREAM_MORE, .needle = -1};
	while (!step(rs, room, ev, &more))
		if (more)
			return AL_REQSTREAM_MORE;
	return ev->kind;
}
