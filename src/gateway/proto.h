/* The messages between the supervisor and the gateway process, over a
 * SOCK_SEQPACKET socketpair (pure: no I/O). Each is a header {type, length}
 * and its payload, at most AL_GWP_MAX bytes in all. The gateway parses
 * what the sandbox sends, so the supervisor treats what the gateway says as
 * hostile too: al_gwp_decode() checks every length, type and field, and is
 * fuzzed (tests/fuzz/fuzz_gateway_proto.c). */
#pragma once

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "gateway/gateway.h"
#include "policy/plan.h"

#define AL_GWP_MAX 16384
/* The connections one use report may add up (it covers what closed since
 * the last one). */
#define AL_GWP_MAX_USE_REQUESTS (1u << 20)

enum al_gwp_type {
	/* supervisor → gateway */
	AL_GWP_LISTENER = 1, /* u32 enum al_gateway_listener; the socket attached (SCM_RIGHTS) */
	AL_GWP_END,	     /* close every connection, report, exit */
	AL_GWP_SPENT,	     /* u64: what the run's CPU and memory cost so far (billionths) */
	/* gateway → supervisor */
	AL_GWP_STARTED, /* i32 error (0, or a positive errno), i32 landlock ABI in force,
			 * i32 errno of its own test open of /etc/passwd; text */
	AL_GWP_AUDIT,	/* event name, NUL, a JSON object */
	AL_GWP_STATS,	/* struct al_gateway_stats as 9 u64 */
	AL_GWP_USAGE,	/* struct al_gateway_usage: 3 u64 (requests: 1 to
			 * AL_GWP_MAX_USE_REQUESTS, bytes up, down), the host (1 to
			 * AL_HOST_MAX printable characters, no NUL) */
	AL_GWP_CHARGE,	/* the budget: u64 requests (0 to AL_GWP_MAX_USE_REQUESTS), u64
			 * bytes up, u32 flags (AL_GWP_CHARGE_*), the host as in USAGE */
	AL_GWP_REFUSAL, /* struct al_gateway_refusal: u32 kind, u32 port (0 to 65535; 0 for
			 * DNS), then secret, NUL, why, NUL, host: printable ASCII, each
			 * shorter than its field (the host may be empty only for DNS) */
	/* A warm pool's sandbox claimed (proto-claim.c, docs/pool.md) */
	AL_GWP_CLAIM,	/* supervisor → gateway: the allowlist, rule options and secrets,
			 * as a JSON object, NUL, then each secret's value (u32 length,
			 * bytes) in its order */
	AL_GWP_CLAIMED, /* gateway → supervisor: i32 error (0, or a positive errno); text */
	/* supervisor → gateway: i64, the run's new deadline (seconds since
	 * the epoch, 1 to AL_GWP_DEADLINE_MAX): its lifetime was extended, or
	 * it was resumed from a pause (al_cred_set_deadline) */
	AL_GWP_DEADLINE,
	/* supervisor → gateway, before the listeners: u32, the uid whose
	 * clients alone are accepted; a NETLINK_SOCK_DIAG socket attached
	 * (listeners on the host's loopback: the process backend) */
	AL_GWP_PEERS,
};

/* A deadline past this (year 9999) is refused. */
#define AL_GWP_DEADLINE_MAX 253402300799LL

#define AL_GWP_CHARGE_EXHAUSTED 0x1 /* the next request would pass the budget: refused */

struct al_gwp_charge {
	uint64_t requests, bytes_up;
	uint32_t flags;
	char host[AL_HOST_MAX + 1];
};

struct al_gwp_hdr {
	uint32_t type;
	uint32_t len; /* of the payload */
};

struct al_gwp_msg {
	enum al_gwp_type type;
	uint32_t kind; /* LISTENER */
	uint32_t uid;  /* PEERS */
	int32_t error, landlock_abi, file_errno;
	char text[256];			   /* STARTED: what failed, or "" */
	char event[32];			   /* AUDIT */
	json_t *fields;			   /* AUDIT: a new reference the caller owns */
	struct al_gateway_stats stats;	   /* STATS */
	struct al_gateway_usage usage;	   /* USAGE */
	struct al_gwp_charge charge;	   /* CHARGE */
	struct al_gateway_refusal refusal; /* REFUSAL */
	uint64_t spent;			   /* SPENT */
	int64_t deadline;		   /* DEADLINE */
	/* CLAIM: its description, checked (a new reference the caller owns),
	 * and where each secret's value is in the message's bytes. CLAIMED:
	 * error and text. */
	json_t *claim;
	struct {
		uint32_t off, len;
	} claim_value[AL_PLAN_SECRETS_MAX];
};

/* Encode one message into out; returns its length, or -ENOSPC. */
int al_gwp_encode_listener(enum al_gateway_listener kind, uint8_t *out, size_t size);
int al_gwp_encode_peers(uint32_t uid, uint8_t *out, size_t size);
int al_gwp_encode_end(uint8_t *out, size_t size);
int al_gwp_encode_started(int error, int landlock_abi, int file_errno, const char *text,
			  uint8_t *out, size_t size);
/* fields is not consumed; -E2BIG when the event does not fit. */
int al_gwp_encode_audit(const char *event, const json_t *fields, uint8_t *out, size_t size);
int al_gwp_encode_stats(const struct al_gateway_stats *st, uint8_t *out, size_t size);
int al_gwp_encode_usage(const struct al_gateway_usage *use, uint8_t *out, size_t size);
int al_gwp_encode_charge(const struct al_gwp_charge *ch, uint8_t *out, size_t size);
int al_gwp_encode_spent(uint64_t spent, uint8_t *out, size_t size);
int al_gwp_encode_deadline(int64_t deadline, uint8_t *out, size_t size);
int al_gwp_encode_refusal(const struct al_gateway_refusal *r, uint8_t *out, size_t size);

/* The claim of a warm pool's sandbox: p's allowlist and rule options and
 * c's secrets (may be NULL) with their values. -EOPNOTSUPP for what a
 * claim does not carry (interception, tokens, SigV4), -E2BIG when it does
 * not fit in one message. The caller wipes out after sending it. */
struct al_cred;
int al_gwp_encode_claim(const struct al_plan *p, const struct al_cred *c, uint8_t *out,
			size_t size);
int al_gwp_encode_claimed(int error, const char *text, uint8_t *out, size_t size);
/* proto-claim.c's halves of al_gwp_decode() (the payload after the
 * header). */
int al_gwp_decode_claim(const uint8_t *p, size_t len, struct al_gwp_msg *ret, struct al_error *err);
int al_gwp_decode_claimed(const uint8_t *p, size_t len, struct al_gwp_msg *ret,
			  struct al_error *err);

/* Decode the n bytes of one message. 0 and *ret filled; -EINVAL with err
 * saying what is wrong. AUDIT is accepted only for the gateway's own
 * events (net.connect, net.dns, net.request, limit.hit, secret.use,
 * secret.misuse, token.minted) and a JSON object that does not
 * set ts, run or event. */
int al_gwp_decode(const uint8_t *buf, size_t n, struct al_gwp_msg *ret, struct al_error *err);
