/* The gateway in its own process (docs/network.md, "The gateway's
 * process"; OpenSSH's privilege separation as the model): forked by the
 * supervisor before the backend makes the sandbox (or, for a caller that
 * does not ask for that, at the sandbox's first listening socket), and
 * confined before the command starts. It keeps
 * only the listeners, the rules and its resolver; it runs with no
 * capabilities, no_new_privs, a landlock domain that reads one file (the
 * host's /etc/hosts, which its resolver reads per lookup) and binds no TCP
 * port, and its own seccomp allowlist (gateway/seccomp.c), which kills it
 * for any other call. When the operator's decider listens on a Unix
 * socket, it forks a connector first (gateway/connector.c), confined
 * further still, that makes its connections to that one socket. It talks to the supervisor over a socketpair in the
 * messages of gateway/proto.h: its start, its audit events, what the
 * connections that closed used of each host (the meter's input) and its
 * counters. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "audit/audit.h"
#include "core/error.h"
#include "core/loop.h"
#include "gateway/gateway.h"
#include "gateway/proto.h"
#include "cred/store.h"
#include "policy/plan.h"

struct al_gateway_proc;

enum al_gateway_proc_state {
	AL_GATEWAY_STARTING, /* forked; its resolver and confinement not yet reported */
	AL_GATEWAY_RUNNING,  /* started and confined: serving */
	AL_GATEWAY_FAILED,   /* it could not start, misbehaved, or died: the run must stop */
};

/* What the supervisor hears from its gateway process. */
struct al_gateway_proc_events {
	/* The state moved on: started, or failed (al_gateway_proc_error()). */
	void (*changed)(void *data);
	/* The use of one host by connections that closed. Returns NULL, or the limit
	 * that use is past: the gateway let through more than the plan
	 * allows, and counts as failed. */
	const char *(*usage)(void *data, const struct al_gateway_usage *use);
	/* The budget: requests and bytes charged, or a request refused for
	 * it (ch->flags). May be NULL. */
	void (*charge)(void *data, const struct al_gwp_charge *ch);
	/* A per-request token minted: the token.minted event's fields
	 * (borrowed). May be NULL. */
	void (*minted)(void *data, const json_t *fields);
	/* A refused connection (its name or address, port and reason; any
	 * may be NULL or 0: they come from the gateway). */
	void (*denied)(void *data, const char *host, int port, const char *reason);
	/* A refused DNS lookup or a secret's misuse (checked by
	 * al_gwp_decode). May be NULL. */
	void (*refused)(void *data, const struct al_gateway_refusal *r);
	void *data;
};

/* Fork the gateway for plan (borrowed, with plan->gateway) and the run's
 * credentials (cred, borrowed, may be NULL: the forked gateway has its own
 * copy of the memory; the supervisor's stays the supervisor's) and watch it in
 * loop, reporting to ev (borrowed). Audit events it sends go to audit (may
 * be NULL). run_id (may be NULL) is what the operator's decider is told
 * the run is. */
int al_gateway_proc_start(const struct al_plan *plan, const struct al_cred *cred,
			  const char *run_id, struct al_loop *loop, struct al_audit *audit,
			  const struct al_gateway_proc_events *ev, struct al_gateway_proc **ret,
			  struct al_error *err);

/* The same for a warm pool's sandbox (docs/pool.md): no credentials, and
 * every connection and lookup refused until al_gateway_proc_claim(). */
int al_gateway_proc_start_held(const struct al_plan *plan, const char *run_id, struct al_loop *loop,
			       struct al_audit *audit, const struct al_gateway_proc_events *ev,
			       struct al_gateway_proc **ret, struct al_error *err);

/* Claim it: plan's allowlist and rule options and cred's secrets (may be
 * NULL) replace what it serves, at once, and it serves again. Waits for
 * its answer (at most 3 s), so every connection it accepts after this
 * returns 0 is under the claim. -errno with err set: not carried
 * (-EOPNOTSUPP, -E2BIG), refused by the gateway, or it failed (then the
 * run must stop, as for any failure of it). plan (borrowed) becomes the
 * one the supervisor checks its reports against. */
int al_gateway_proc_claim(struct al_gateway_proc *gp, const struct al_plan *plan,
			  const struct al_cred *cred, struct al_error *err);

/* Watch a gateway process already forked (pid, our child) that talks on
 * sock (a SOCK_SEQPACKET end; consumed): the second half of
 * al_gateway_proc_start(), and how tests watch a stand-in. */
int al_gateway_proc_adopt(const struct al_plan *plan, struct al_loop *loop, struct al_audit *audit,
			  const struct al_gateway_proc_events *ev, pid_t pid, int sock,
			  struct al_gateway_proc **ret, struct al_error *err);

enum al_gateway_proc_state al_gateway_proc_state(const struct al_gateway_proc *gp);
/* Why it failed: one line. */
const char *al_gateway_proc_error(const struct al_gateway_proc *gp);
/* Once running: {"pid", "landlock_abi", "file_open": the errno its own
 * test open of / got, "seccomp"} for the gateway.start event. */
json_t *al_gateway_proc_json(const struct al_gateway_proc *gp);

/* Every message it has sent so far handled now (bounded), not when the
 * loop next gets to its socket. It sends a refusal's audit line before it
 * answers the refused client, so after this every refusal that a process
 * of the sandbox has seen is in the audit stream: the run layer drains it
 * before it reports an exec's end, so that the exec's denials are whole. */
void al_gateway_proc_drain(struct al_gateway_proc *gp);
/* Tell it what the run's CPU and memory cost so far (the budget). */
void al_gateway_proc_spent(struct al_gateway_proc *gp, uint64_t nano);
/* Tell it the run's new deadline (seconds since the epoch): its tokens
 * and the CA's leaves follow it (al_gateway_set_deadline). 0; -ESRCH
 * when it does not run; -EAGAIN when its channel is full. */
int al_gateway_proc_deadline(struct al_gateway_proc *gp, int64_t deadline);

/* Hand it a listening socket from the sandbox (fd is consumed). */
/* Accept only clients whose socket belongs to uid, looked up on diag (a
 * NETLINK_SOCK_DIAG socket, consumed): before the listeners. */
int al_gateway_proc_peers(struct al_gateway_proc *gp, uid_t uid, int diag, struct al_error *err);
int al_gateway_proc_listen(struct al_gateway_proc *gp, enum al_gateway_listener kind, int fd,
			   struct al_error *err);

/* The run is over: it closes every connection (auditing those still
 * open), reports its counters and exits; waits for that (three seconds in
 * all, then kills it). *st is what it reported (zeros if nothing).
 * Returns -1 (with al_gateway_proc_error()) when it failed at any point or
 * did not end cleanly with its counters. */
int al_gateway_proc_end(struct al_gateway_proc *gp, struct al_gateway_stats *st);

void al_gateway_proc_free(struct al_gateway_proc *gp);
