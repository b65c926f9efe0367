/* The HTTP request stream filter: the client -> upstream bytes of one
 * plain-HTTP connection (or one whose TLS the gateway terminates), request
 * by request (pure: no syscalls, no sockets; everything it needs is
 * allocated by al_reqstream_new(), so its memory is bounded by the conf).
 *
 * Every request of the connection, keep-alive and pipelined ones too, is
 * parsed with al_http_parse_request(), checked, rewritten and framed (by
 * Content-Length or chunked, so the filter knows where the next head
 * starts):
 * - its Host (and absolute-form target) must name the connection's host
 *   (421), its path must normalise (net/reqrule.h; 400), and it must pass
 *   the host's request rule (403, 413); CONNECT and Upgrade are refused
 *   (501: after an upgrade the bytes are no longer requests that can be
 *   checked);
 * - the secrets scoped to the host are injected (header, basic auth, query
 *   parameter, body, SigV4 re-signing); Proxy-* and hop-by-hop fields never
 *   go upstream;
 * - a placeholder of a secret that is not scoped to this host, anywhere in
 *   the request (request line, header, body, across any split of the
 *   bytes), refuses it as misuse (403). A scoped secret's own placeholder
 *   outside the place it is presented in passes unchanged: only the
 *   placeholder goes out, never the value. A scoped SigV4 secret's fake
 *   key id in the request target (a presigned URL, which is not re-signed)
 *   is misuse too.
 *
 * The caller feeds the client's bytes with al_reqstream_feed() and pulls
 * events with al_reqstream_next() until it answers AL_REQSTREAM_MORE:
 * bytes to send upstream, a request about to be sent (announced before any
 * of its bytes, so the caller can audit it, charge a budget, or refuse it
 * with al_reqstream_refuse()), and at most one final event: a refusal, a
 * misuse or the end of the client's stream. After it nothing more is
 * output.
 *
 * No text the filter produces (event texts, errors) ever holds a secret's
 * value or a needle. docs/requests.md describes the semantics for users. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "gateway/http.h"
#include "gateway/needles.h"
#include "net/reqrule.h"

enum al_secret_how {
	AL_SECRET_HEADER = 1, /* header: tmpl with "{}" replaced by the value */
	AL_SECRET_BASIC,      /* Authorization: Basic base64(user ":" value) */
	AL_SECRET_QUERY,      /* the query parameter param = the value, percent-encoded */
	AL_SECRET_SIGV4,      /* AWS Signature Version 4: the request re-signed (conf->sigv4) */
	AL_SECRET_BODY,	      /* only in bodies (body must be set) */
};

/* One secret scoped to this connection's host: the caller checked its gates
 * (plain HTTP or TLS the gateway terminated, scoped host, pinned upstream).
 * Every pointer is borrowed and must outlive the filter. */
struct al_secret_use {
	const char *name;	 /* for events and errors */
	const char *placeholder; /* what the sandbox holds (a needle); SIGV4: the fake secret key */
	const char *value;	 /* the real value: never in any text; SIGV4: the real secret key */
	size_t value_len;
	enum al_secret_how how;
	const char *header, *tmpl; /* HEADER: field name, and its value with one "{}" */
	const char *user;	   /* BASIC: the user name (no ':'); the secret is the password */
	const char *param;	   /* QUERY: the parameter's name (as it is decoded) */
	bool body; /* also replace the placeholder in request bodies (not for SIGV4) */
	/* SIGV4: the fake key id the sandbox signs with (a needle, allowed
	 * here: it is only in the Authorization that is re-signed), the real
	 * one (for the callback), and the session token: the fake one (NULL
	 * when there is none) that X-Amz-Security-Token carries and the real
	 * one it becomes. */
	const char *fake_key_id, *key_id;
	const char *token_placeholder;
	const char *token;
	size_t token_len;
};

/* Write the Authorization value of a SigV4 request into out (size bytes)
 * and return its length (> 0); or 0 to leave the request as the sandbox
 * signed it; or a negative errno: -EINVAL when the request cannot be
 * re-signed (e.g. its Authorization has no credential scope: answered 400),
 * anything else is the signer's failure (500). method and target (the
 * origin-form target as it will be sent) are not NUL-terminated; headers
 * are the fields as they will be sent, and last the sandbox's own
 * Authorization (which the signer checks before it signs anew);
 * body_sha256 is the lower-case hex SHA-256 of the body as it will be sent,
 * or NULL when the request carries x-amz-content-sha256 (the signer uses
 * that). */
typedef int (*al_reqstream_sigv4_fn)(void *data, const struct al_secret_use *s, const char *method,
				     size_t method_len, const char *target, size_t target_len,
				     const struct al_http_header_view *headers, size_t n,
				     const char *body_sha256, char *out, size_t size);

#define AL_REQSTREAM_SIGV4_MAX 4096 /* the longest Authorization value the signer may write */

struct al_reqstream_conf {
	/* The host the gateway decided on for this connection, as
	 * al_host_parse() takes it, and its port: every request's Host (and
	 * absolute-form target) must name it, or the answer is 421. */
	const char *host;
	uint16_t port;
	/* Requests come in absolute-form (the HTTP proxy) and go out in
	 * origin-form; otherwise (transparent capture, terminated TLS) only
	 * origin-form is accepted. Either way the other form is refused
	 * (400). */
	bool proxy_form;
	const struct al_reqrule *rules; /* NULL: any method, path and size */
	const struct al_secret_use *inject;
	size_t n_inject;
	/* Every placeholder and fake key id of the run, compiled once for the
	 * run (gateway/needles.h; NULL: none): those not scoped here (not some
	 * inject[i]'s placeholder, fake_key_id or token_placeholder) are
	 * misuse. */
	const struct al_needles *needles;
	/* The most body bytes buffered when a body must be rewritten (a secret
	 * with body) or hashed (SigV4 without x-amz-content-sha256); larger
	 * bodies are answered 413. Must be > 0 when some secret needs it; at
	 * most 64 MiB. */
	size_t body_max;
	al_reqstream_sigv4_fn sigv4; /* required with a SIGV4 secret */
	void *sigv4_data;
};

enum al_reqstream_kind {
	AL_REQSTREAM_MORE = 0, /* nothing until more is fed (or room is given) */
	AL_REQSTREAM_DATA,     /* send data, len bytes upstream */
	AL_REQSTREAM_REQUEST,  /* a request is about to go: req says which */
	/* Final events: once one is returned, al_reqstream_next() returns it
	 * again, al_reqstream_feed() drops what it is given, and nothing more
	 * is output. */
	AL_REQSTREAM_REFUSED, /* answer the client status (the caller half-closes upstream) */
	AL_REQSTREAM_MISUSE,  /* a refusal (403) because a needle was found */
	AL_REQSTREAM_END,     /* the client's stream ended (after al_reqstream_eof()) */
};

/* A request about to be sent. Pointers are valid until the next call on
 * the filter. */
struct al_reqstream_request {
	uint64_t index; /* 0 for the connection's first request */
	/* The method, and the path normalised, without the query; a
	 * placeholder in either (one scoped here: others are misuse) is shown
	 * as "{secret}". */
	const char *method;
	size_t method_len;
	const char *path;
	size_t path_len;
	const char *host; /* the connection's host (normal form) */
	uint16_t port;
	/* The names of the secrets injected into it (a body secret only when
	 * its placeholder was in the body; SIGV4 when re-signed). */
	const char *const *injected;
	size_t n_injected;
	int64_t body_len; /* the body's length as sent; -1 for a chunked body streamed through */
};

struct al_reqstream_event {
	enum al_reqstream_kind kind;
	/* DATA: bytes to send, valid until the next call on the filter. */
	const char *data;
	size_t len;
	/* REQUEST */
	struct al_reqstream_request req;
	/* REFUSED, MISUSE: the status to answer (400, 403, 413, 421, 431, 500,
	 * 501, 505, or the caller's own), the rule's text for a 403's
	 * X-Airlock-Denied (NULL when no rule refused), a reason for the audit
	 * and the answer's detail. cut: bytes of this request have already
	 * gone upstream (its head, part of a streamed body), so the upstream
	 * connection must be closed, not only half-closed. */
	int status;
	const char *rule;
	const char *reason;
	bool cut;
	/* MISUSE: the needle's index in conf->needles, and where it was:
	 * "request line", "header NAME", "header name", "body" or
	 * "trailer NAME". */
	int needle;
	const char *where;
	/* END: the client stopped in the middle of a request (whose bytes so
	 * far may have gone upstream). */
	bool incomplete;
};

struct al_reqstream;

/* A filter for one connection. conf and everything it points to are
 * borrowed and must outlive it. Fails with -EINVAL and err naming what is
 * wrong in conf (a secret by name, never a value):
 * an invalid host, a secret without what its kind needs, a header or
 * template that could not go in a head, a value that could not go in a
 * header (control characters), two secrets presenting in one place,
 * body_max missing or too large. Free with al_reqstream_free(). */
int al_reqstream_new(const struct al_reqstream_conf *conf, struct al_reqstream **ret,
		     struct al_error *err);
void al_reqstream_free(struct al_reqstream *rs);
static inline void al_reqstream_freep(struct al_reqstream **rs)
{
	al_reqstream_free(*rs);
}

/* Give the filter the client's next bytes. Returns how many it took (up to
 * len; fewer when its input buffer is full: pull events and feed the rest
 * again). After a final event everything is taken and dropped. */
size_t al_reqstream_feed(struct al_reqstream *rs, const char *buf, size_t len);

/* The client shut its side: once what was fed is processed, the stream
 * ends (AL_REQSTREAM_END). */
void al_reqstream_eof(struct al_reqstream *rs);

/* The next event; DATA events carry at most room bytes (room 0: only the
 * other events). Returns ev->kind. */
enum al_reqstream_kind al_reqstream_next(struct al_reqstream *rs, size_t room,
					 struct al_reqstream_event *ev);

/* The caller refuses the stream from here on, e.g. with 402 after a
 * REQUEST event when the spend budget is spent: the next event is REFUSED
 * with status and reason (copied; at most 255 bytes are kept),
 * and nothing more is output. A REQUEST's own bytes have not gone out
 * when it is announced, so refusing right after it is not a cut. */
void al_reqstream_refuse(struct al_reqstream *rs, int status, const char *reason);

/* A new value for inject[i] (a token minted per request: header, basic
 * or query, not a body or SigV4 secret), for the requests whose heads
 * come next. 0; -ENOSPC when it is longer than the first value (the
 * head's room was sized for that); -EINVAL otherwise. */
int al_reqstream_set_value(struct al_reqstream *rs, size_t i, const char *value, size_t len);
