/* The egress gateway (docs/network.md): an HTTP proxy, a SOCKS5
 * proxy and a DNS stub whose sockets live inside the sandbox's network namespace
 * (the child creates them during setup and hands them over) and which the
 * gateway's own process (process.h) serves from outside. Every connection
 * is decided against the allowlist; allowed ones are connected from the
 * host side to an address the gateway resolved itself (network.hosts, or
 * the host's resolver with the private-address guard) and relayed. Every
 * decision goes to the audit stream.
 *
 * The gateway's fds are watched in the loop it is given (core/loop.h). */
#pragma once

#include <netinet/in.h>
#include <stdbool.h>
#include <sys/types.h>
#include <stdint.h>

#include "audit/audit.h"
#include "core/loop.h"
#include "core/error.h"
#include "net/allow.h"
#include "policy/plan.h"

struct al_gateway;

/* The reason audited for a connection still undecided when the run ends
 * (refused, but not counted as a denial). */
#define AL_GATEWAY_RUN_ENDED "the run ended"

struct al_gateway_stats {
	uint64_t allowed;      /* connections allowed and attempted */
	uint64_t denied;       /* requests refused by policy */
	uint64_t failed;       /* allowed, but the upstream could not be reached */
	uint64_t bytes_up;     /* sandbox → upstream */
	uint64_t bytes_down;   /* upstream → sandbox */
	uint64_t dns_answered; /* A queries answered with an address, AAAA with no data */
	uint64_t dns_refused;  /* queries refused (name not allowed, other types) */
	uint64_t misuse;       /* a secret kept from where it does not go (each a
				* refusal), or an answer that carries one that could
				* not be searched */
	uint64_t cut;	       /* allowed connections cut part-way for misuse (also
				* in allowed) */
};

/* A refusal the run's stderr summary and record name, besides the audit
 * stream: a DNS lookup refused, or a secret kept from where it does not
 * go. Every text is printable ASCII (the gateway replaces other bytes by
 * '?' before it sends them). */
enum al_gateway_refusal_kind {
	AL_GW_REFUSED_DNS = 1, /* host: the name asked; why: why it was refused */
	AL_GW_REFUSED_MISUSE,  /* host:port, secret (may be ""), where it was */
};
#define AL_GW_REFUSAL_TEXT 96
struct al_gateway_refusal {
	uint32_t kind;
	uint32_t port;			 /* MISUSE: 0 to 65535; DNS: 0 */
	char secret[AL_GW_REFUSAL_TEXT]; /* the secret's name; "" when none */
	char why[AL_GW_REFUSAL_TEXT];	 /* DNS: why; MISUSE: where ("header X-Leak") */
	char host[AL_HOST_MAX + 1];	 /* the host or DNS name; "" when not known */
};

/* What allowed connections used of their host, reported when they close:
 * the meter's network input (supervisor/meter.h). */
struct al_gateway_usage {
	char host[AL_HOST_MAX + 1]; /* the name it was decided on, or the address */
	uint64_t requests;	    /* connections, each counted against the limits */
	uint64_t bytes_up;	    /* sandbox → upstream */
	uint64_t bytes_down;	    /* upstream → sandbox */
};

/* A gateway for plan (borrowed; plan->gateway must be set), writing to
 * audit (borrowed, may be NULL), watching its fds in loop. Free with
 * al_gateway_free(). */
struct al_gateway *al_gateway_new(const struct al_plan *plan, struct al_audit *audit,
				  struct al_loop *loop);

/* Start the resolver now (it reads the host's resolver configuration),
 * before the supervisor gives up reading files. -errno with err set when
 * network.resolver cannot be used (the run must not go on: the host's
 * servers are never used instead); with the host's configuration, a
 * failure is warned about and lookups are refused. */
int al_gateway_prepare(struct al_gateway *gw, struct al_error *err);

/* After al_gateway_prepare, once the gateway's start is reported (it may
 * be confined): one TLS handshake in memory, so that the first intercepted
 * connection does not pay OpenSSL's first-use set-up (choose.c). Nothing
 * when the run intercepts no single host. */
void al_gateway_warm(struct al_gateway *gw);

/* The run's id, told to the operator's decider with each egress question
 * (none: null). */
void al_gateway_set_run(struct al_gateway *gw, const char *run_id);

/* A confined gateway reaches a Unix-socket decider only through its
 * connector (gw_connector_start): its end, fd, is watched in the loop and
 * closed with the gateway. Without one, the gateway connects itself. */
void al_gateway_use_connector(struct al_gateway *gw, int fd);

/* The run's credentials (borrowed; NULL: none), which the gateway
 * presents on requests to their hosts (docs/credentials.md). */
struct al_cred;
void al_gateway_set_cred(struct al_gateway *gw, const struct al_cred *cred);
/* The run's deadline moved (AL_GWP_DEADLINE): its credentials follow it
 * (al_cred_set_deadline: per-request tokens bounded by it, run tokens
 * and the CA's leaves minted again) and the answers are searched for the
 * new values. 0, or -errno with err set. */
int al_gateway_set_deadline(struct al_gateway *gw, int64_t deadline, struct al_error *err);

/* A warm pool's sandbox (docs/pool.md): refuse every connection and
 * lookup, each audited with AL_GATEWAY_HELD as its reason, until
 * al_gateway_claim(). */
#define AL_GATEWAY_HELD "the sandbox is not claimed yet: no egress before its claim"
void al_gateway_hold(struct al_gateway *gw);

/* The claim (a checked AL_GWP_CLAIM message m, whose bytes are msg):
 * its allowlist, rule options and secrets replace the plan's and the
 * credentials', all at once, and the gateway serves again. Connections
 * still open from before are closed. 0, or -errno with err set (nothing
 * changed: the gateway stays held). Once only. */
struct al_gwp_msg;
int al_gateway_claim(struct al_gateway *gw, const struct al_gwp_msg *m, const uint8_t *msg,
		     struct al_error *err);

/* Report each allowed connection's use to fn(data, use) when it closes. */
void al_gateway_on_usage(struct al_gateway *gw,
			 void (*fn)(void *data, const struct al_gateway_usage *use), void *data);

/* Report the first distinct refusals (at most AL_GW_REFUSALS_SENT) to
 * fn(data, r) as they happen; the counts are in the stats. */
#define AL_GW_REFUSALS_SENT 64
void al_gateway_on_refusal(struct al_gateway *gw,
			   void (*fn)(void *data, const struct al_gateway_refusal *r), void *data);

/* The budget (plan->budget): fn(data, ch) for each charge the gateway
 * makes, before the request it prices goes out; set_spent tells it what
 * the run's CPU and memory cost so far. */
struct al_gwp_charge;
void al_gateway_on_charge(struct al_gateway *gw,
			  void (*fn)(void *data, const struct al_gwp_charge *ch), void *data);
void al_gateway_set_spent(struct al_gateway *gw, uint64_t nano);

/* Serve a listening socket (takes ownership of fd). */
/* Accept only clients whose socket is uid's, looked up on diag (a
 * NETLINK_SOCK_DIAG socket, consumed): for listeners any host user can
 * reach. Before the listeners. */
void al_gateway_peers(struct al_gateway *gw, uid_t uid, int diag);
int al_gateway_listen(struct al_gateway *gw, enum al_gateway_listener kind, int fd,
		      struct al_error *err);

/* Close every connection, auditing and counting those still open (the
 * run ended). */
void al_gateway_close_all(struct al_gateway *gw);

void al_gateway_stats(const struct al_gateway *gw, struct al_gateway_stats *ret);

/* Close every connection and the listeners. */
void al_gateway_free(struct al_gateway *gw);
