/* The run's credentials in memory: each secret's value read from its
 * source, each token minted (or its key, for tokens minted per request),
 * AWS keys split into their parts. Opened once the plan is built and
 * before the run starts (a source that fails stops the run there, exit
 * 125); the supervisor holds it, and the gateway's process inherits it
 * when it is forked. Freeing wipes every value.
 *
 * Opening decides what the plan gains that is only known then (c->extra,
 * which the request layer applies with al_plan_finish() before the run):
 * the placeholder of an AWS session token when the real key has one, an
 * exposed token's value in the environment, and with interception the
 * run's CA: made here, its certificate in /etc/airlock/ca.pem and with the
 * host's bundle in /etc/airlock/ca-bundle.pem, announced in SSL_CERT_FILE
 * and the variables other tools read (al_ca_env) unless the task sets
 * them. The plan itself is not changed. */
#define AL_CA_FILE   "/etc/airlock/ca.pem"
#define AL_CA_BUNDLE "/etc/airlock/ca-bundle.pem"
extern const char *const al_ca_env[];
#pragma once

#include <jansson.h>
#include <stdint.h>

#include "core/error.h"
#include "cred/source.h"
#include "policy/plan.h"

struct al_jwt_key;
struct al_tls_ca;

struct al_cred_secret {
	const struct al_plan_secret *ps; /* borrowed from the plan */
	/* The value; for a run's token the token; for SigV4 the real access
	 * key id, with the secret key and session token (may be empty). */
	struct al_secret_value value, aws_secret, aws_token;
	char fake_token[AL_PLACEHOLDER_MAX]; /* SigV4 with a session token */
	struct al_jwt_key *key;		     /* a per-request token's signing key */
	char jti[33];			     /* a run token's id */
};

struct al_cred {
	struct al_cred_secret *v;
	size_t n;
	int64_t deadline; /* seconds since the epoch: no token lives past it */
	char run_id[64];
	uint64_t minted; /* per-request tokens minted (the gateway's count) */
	/* With an intercepting rule: the run's CA (tls/ca.h), its key only
	 * in this memory; the sandbox trusts its certificate. */
	struct al_tls_ca *ca;
	/* What the plan gains (above); wiped with the values. */
	struct al_plan_extra extra;
	/* The process's open stores (al_cred_wipe_copies). */
	struct al_cred *live_prev, *live_next;
	bool listed;
};

int al_cred_open(const struct al_plan *plan, const char *run_id, struct al_cred **ret,
		 struct al_error *err);
void al_cred_free(struct al_cred *c);
static inline void al_cred_freep(struct al_cred **c)
{
	al_cred_free(*c);
}

/* A token for one request to host (s->ps->def->per_request): that host
 * the only audience, living the token's ttl but never past the deadline.
 * *ret_token is the caller's to free; jti gets its id. */
int al_cred_mint_request(const struct al_cred *c, const struct al_cred_secret *s, const char *host,
			 int64_t now, char **ret_token, char jti[33], struct al_error *err);

/* What every per-request token of s this run mints starts with (cred/jwt.h
 * al_jwt_prefix): the gateway looks for it in answers, so that no token it
 * minted, whichever request carried it, comes back to the sandbox. */
int al_cred_token_prefix(const struct al_cred *c, const struct al_cred_secret *s, char **ret,
			 struct al_error *err);

/* Move the deadline (seconds since the epoch) that bounds the run's
 * tokens and the leaves of its interception CA: what outlives the old one
 * is made for the new one. Per-request tokens are bounded by it from now
 * on; each run token the gateway presents is minted again (same jti, exp
 * the new deadline); the CA's leaves are minted again with the new end.
 * An exposed token is not: the sandbox holds its value, which lives to the
 * deadline it was minted for. -ERANGE (err set) past al_cred_deadline_max;
 * other errors from minting. In the gateway's process, on the
 * supervisor's word (AL_GWP_DEADLINE). */
int al_cred_set_deadline(struct al_cred *c, int64_t deadline, struct al_error *err);
/* The latest deadline c can take: its CA's end less a minute (INT64_MAX
 * without a CA, or for NULL). */
int64_t al_cred_deadline_max(const struct al_cred *c);

/* In a process forked or cloned from the one that opened them (the
 * sandbox's init): wipe every value, key and the CA's key of every store
 * open in the process (however many runs it holds) in this copy of the
 * memory, and the values of airlock's variables that sources read. Never
 * in the process that opened them. */
void al_cred_wipe_copies(void);

/* For run.start and the result record: [{"name", "kind": "secret" |
 * "token", "hosts", "jti" (a run token's)}]; never a value. NULL when the
 * run has none. */
json_t *al_cred_json(const struct al_cred *c);
