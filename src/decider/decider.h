/* The external decider's client (operator.h: struct al_decider_conf): one
 * question, POST PATH with {"input": INPUT} over HTTP/1.1 to a Unix socket
 * or a loopback address, answered {"result": ...} (Open Policy Agent's data
 * API). Whatever does not answer within conf->timeout_ms, answers with a
 * status other than 200, or answers something that is not a JSON object
 * with "result" is an error naming the decider and what was wrong: callers
 * fail closed on any error.
 *
 * Two ways to ask: al_decider_ask() blocks (the CLI and the run layer ask
 * once per run, before anything is created); struct al_decider_call is
 * the same question on a non-blocking socket, driven by the caller's loop
 * (the gateway asks per egress request without stalling its other
 * connections). struct al_decider_cache keeps recent egress answers. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "policy/operator.h"

/* Largest answer read (its body, after any chunked framing is taken off);
 * more is an error. The head of the answer may add at most
 * AL_DECIDER_HEAD_MAX. */
#define AL_DECIDER_ANSWER_MAX (1u << 20)
#define AL_DECIDER_HEAD_MAX   16384u
/* The question's deadline when conf->timeout_ms is 0. */
#define AL_DECIDER_TIMEOUT_MS 1000u
/* Longest path asked (it goes into the request line as given: printable
 * ASCII, starting with '/'). */
#define AL_DECIDER_PATH_MAX 1024u

/* How messages name conf: its socket's path, or "http://127.0.0.1:8181"
 * ("http://[::1]:8181"). */
void al_decider_describe(const struct al_decider_conf *conf, char *buf, size_t len);

/* Ask conf at path with input (borrowed; NULL is sent as null). Connects
 * only to conf->socket, or else to conf->host:conf->port when host is
 * 127.0.0.1 or ::1 (any other host is refused without connecting, whatever
 * the configuration says). On success *ret_result is a new reference to
 * the answer's "result" member (any JSON type; the caller interprets it).
 * Errors read "decider WHO: POST PATH: WHAT" (al_decider_describe), WHAT
 * one of "no answer within 500 ms", "status 500 (...)", "the answer is not
 * JSON: ...", "the answer has no \"result\" (undefined decision at PATH)",
 * "connect: Connection refused", ... Returns 0 or -errno. */
int al_decider_ask(const struct al_decider_conf *conf, const char *path, json_t *input,
		   json_t **ret_result, struct al_error *err);

struct al_decider_call;

/* Start the question: connects (non-blocking) and queues the request; the
 * deadline (conf->timeout_ms from now) covers the connect. Returns 0 with
 * *ret set (free with al_decider_call_free()), or -errno with err set
 * (a refused connection to a Unix socket or to loopback is usually known
 * here). */
int al_decider_call_start(const struct al_decider_conf *conf, const char *path, json_t *input,
			  struct al_decider_call **ret, struct al_error *err);
/* The same over fd, a stream socket already connected to conf's decider
 * (a confined gateway gets it from a helper that may connect where it may
 * not: gateway/connector.c); takes ownership of fd, also on failure. The
 * deadline is deadline_ms (al_now_ms() time), so the wait for fd counts. */
/* With input NULL, the question was already written on fd (and its write
 * side shut): only the answer is read. */
int al_decider_call_start_fd(const struct al_decider_conf *conf, const char *path, json_t *input,
			     int fd, uint64_t deadline_ms, struct al_decider_call **ret,
			     struct al_error *err);
/* {"input": INPUT} as the question's body: a new string (free()), or
 * NULL when it cannot be written. */
char *al_decider_body(json_t *input);
/* The socket to watch and the events it waits for now (EPOLLIN/EPOLLOUT). */
int al_decider_call_fd(const struct al_decider_call *call);
uint32_t al_decider_call_events(const struct al_decider_call *call);
/* The monotonic time (ms, al_now_ms()) by which it must be answered. */
uint64_t al_decider_call_deadline(const struct al_decider_call *call);
/* Go on after events on its fd (or a timer: past the deadline it fails).
 * Returns 1 when answered (*ret_result as for al_decider_ask), 0 while it
 * waits, -errno with err set when it failed (errors as al_decider_ask();
 * -ETIMEDOUT past the deadline). Once it returned 1 or an error the call
 * is over: further steps fail with -EALREADY. The fd stays open (and
 * watched, if the caller watches it) until al_decider_call_free(). */
int al_decider_call_step(struct al_decider_call *call, json_t **ret_result, struct al_error *err);
/* Closes its socket; NULL is ignored. */
void al_decider_call_free(struct al_decider_call *call);

/* Recent answers by key (the caller builds it from what it asked): at
 * most size entries (capped at AL_DECIDER_CACHE_MAX), the least recently
 * used one making room for a new one; an entry older than ttl_ms is not
 * used. Keys over AL_DECIDER_KEY_MAX bytes are not kept (never found), a
 * reason is kept up to AL_DECIDER_REASON_MAX bytes, so the memory is
 * bounded by size. */
#define AL_DECIDER_CACHE_MAX  65536u
#define AL_DECIDER_KEY_MAX    1024u
#define AL_DECIDER_REASON_MAX 256u
struct al_decider_cache;
/* NULL when size or ttl_ms is 0 (no cache): every function below accepts
 * NULL and then keeps and finds nothing. */
struct al_decider_cache *al_decider_cache_new(unsigned size, uint64_t ttl_ms);
void al_decider_cache_free(struct al_decider_cache *c);
/* Entries kept now (expired ones included until they are looked up or
 * pushed out). */
unsigned al_decider_cache_count(const struct al_decider_cache *c);
/* true with *ret_allow (and *ret_reason, borrowed until the next call on c,
 * may be NULL) when key was answered less than ttl ago; a hit counts as a
 * use. */
bool al_decider_cache_get(struct al_decider_cache *c, const char *key, uint64_t now_ms,
			  bool *ret_allow, const char **ret_reason);
/* Keep (or replace) key's answer as of now_ms; reason may be NULL. */
void al_decider_cache_put(struct al_decider_cache *c, const char *key, uint64_t now_ms, bool allow,
			  const char *reason);
