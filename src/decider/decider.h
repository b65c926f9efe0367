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
#include <stdint.h>

#include "core/error.h"
#include "policy/operator.h"

/* Largest answer read; more is an error. */
#define AL_DECIDER_ANSWER_MAX (1u << 20)

/* Ask conf at path with input (borrowed). On success *ret_result is a new
 * reference to the answer's "result" member (any JSON type; the caller
 * interprets it). */
int al_decider_ask(const struct al_decider_conf *conf, const char *path, json_t *input,
		   json_t **ret_result, struct al_error *err);

struct al_decider_call;

/* Start the question: connects (non-blocking) and queues the request.
 * Returns 0 with *ret set, or -errno with err set. */
int al_decider_call_start(const struct al_decider_conf *conf, const char *path, json_t *input,
			  struct al_decider_call **ret, struct al_error *err);
/* The socket to watch and the events it waits for now (EPOLLIN/EPOLLOUT). */
int al_decider_call_fd(const struct al_decider_call *call);
uint32_t al_decider_call_events(const struct al_decider_call *call);
/* The monotonic time (ms, al_now_ms()) by which it must be answered. */
uint64_t al_decider_call_deadline(const struct al_decider_call *call);
/* Go on after events on its fd (or a timer: past the deadline it fails).
 * Returns 1 when answered (*ret_result as for al_decider_ask), 0 while it
 * waits, -errno with err set when it failed. */
int al_decider_call_step(struct al_decider_call *call, json_t **ret_result, struct al_error *err);
void al_decider_call_free(struct al_decider_call *call);

/* Recent answers by key (the caller builds it from what it asked). */
struct al_decider_cache;
struct al_decider_cache *al_decider_cache_new(unsigned size, uint64_t ttl_ms);
void al_decider_cache_free(struct al_decider_cache *c);
/* true with *ret_allow (and *ret_reason, borrowed, may be NULL) when key
 * was answered less than ttl ago. */
bool al_decider_cache_get(struct al_decider_cache *c, const char *key, uint64_t now_ms,
			  bool *ret_allow, const char **ret_reason);
void al_decider_cache_put(struct al_decider_cache *c, const char *key, uint64_t now_ms, bool allow,
			  const char *reason);
