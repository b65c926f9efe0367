/* The gateway's connections (internal to src/gateway).
 *
 * A connection goes through stages, each a function that returns a step to
 * the connection's dispatcher (conn.c), which alone moves it on:
 *
 *   head     read the first bytes and learn where the client is going
 *            (HTTP request, SOCKS request, transparent capture, DNS over TCP)
 *   decide   the operator's never rules, the allowlist, the
 *            private-address guard and the limits (decide.c)
 *   ask      the operator's external decider, when it has one, with a
 *            cache of its answers (ask.c)
 *   resolve  the gateway's own lookup of an allowed name (resolve.c)
 *   connect  from the host side, and the client's "connected" answer
 *            (relay.c)
 *   inspect  the stream's first bytes must name the host decided on
 *            (decide.c)
 *   choose   which stream: relayed as it is, or read request by request
 *            (plain HTTP, or TLS the gateway terminates) (choose.c)
 *   stream   bytes both ways, through c->stream (relay.c)
 *
 * No stage calls the next. What the audit and the counters read is
 * c->verdict, set once by the stage that decides it. */
#pragma once

#include <ares.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/loop.h"
#include "decider/decider.h"
#include "gateway/gateway.h"
#include "gateway/http.h"
#include "gateway/needles.h"
#include "gateway/valscan.h"

#define AL_GW_BUF_SIZE	  65536
#define AL_GW_MAX_CONNS	  256
#define AL_GW_MAX_NEEDLES 64 /* placeholders and fake keys the gateway looks for */

enum gw_step {
	GW_WAIT,  /* waiting for an event; the stage set what it waits for */
	GW_NEXT,  /* the stage is done: on to the next */
	GW_CLOSE, /* close the connection, as c->verdict says */
};

enum gw_stage {
	GW_HEAD,
	GW_DECIDE,
	GW_ASK,
	GW_RESOLVE,
	GW_CONNECT,
	GW_INSPECT,
	GW_CHOOSE,
	GW_STREAM,
};

enum gw_path {
	GW_PATH_HTTP,
	GW_PATH_SOCKS,
	GW_PATH_TRANSPARENT,
	GW_PATH_DNS_TCP,
};

enum gw_verdict {
	GW_UNDECIDED, /* nothing decided (yet): not audited unless closed at the run's end */
	GW_ALLOWED,   /* allowed, and connecting or connected */
	GW_DENIED,    /* refused by policy */
	GW_FAILED,    /* allowed, but the upstream could not be reached */
};

/* How a refusal is answered. */
enum gw_answer {
	GW_ANSWER_NONE,	   /* just close */
	GW_ANSWER_DEFAULT, /* the path's own: HTTP status, SOCKS reply, or a reset (transparent) */
};

struct conn;

struct side {
	struct conn *c;
	int fd;
	struct al_watch *w;
	bool eof;  /* read side done */
	bool shut; /* write side shut down */
};

struct buf {
	size_t off, len;
	char data[AL_GW_BUF_SIZE];
};

/* One direction of a connection (relay.c). */
struct flow {
	struct buf b;
	int pipe[2]; /* -1 until bulk */
	size_t in_pipe, pipe_cap;
	bool pipe_full; /* out of pipe buffers (each splice takes one) before pipe_cap bytes */
	uint64_t bytes; /* delivered to the other side */
};

/* The stream stage's interface: the splice and copy streams (relay.c),
 * and the filtered stream that reads requests, injects secrets and ends
 * intercepted TLS (gw_stream_filter, filter.h). */
struct gw_stream_ops {
	const char *name;
	bool splice; /* a direction may move through a pipe once it is bulk */
	/* Move what can be moved; the side and events that woke it (s may be
	 * NULL right after connect). */
	enum gw_step (*pump)(struct conn *c, struct side *s, uint32_t events);
};

extern const struct gw_stream_ops gw_stream_splice; /* splice(2) once a direction is bulk */
extern const struct gw_stream_ops gw_stream_copy;   /* through user space only */

/* Per-host counters. Each is its own allocation: connections keep a
 * pointer to theirs while others are added. */
struct host_use {
	struct host_use *next;
	char name[AL_HOST_MAX + 1];
	uint64_t active, requests, bytes_out;
};

struct conn {
	struct al_gateway *gw;
	struct conn *prev, *next;
	bool abandoned; /* closed while resolving: the resolver's callback frees it */
	enum gw_path path;
	enum gw_stage stage;
	enum gw_verdict verdict;
	/* GW_ALLOWED, then cut part-way for misuse (gw_cut): reason says
	 * what was refused, and the close audits it as "cut". */
	bool cut;
	enum gw_answer answer; /* for GW_DENIED, GW_FAILED and a cut */
	int http_status;       /* the answer on the HTTP path */
	uint8_t socks_code;    /* and on the SOCKS path */
	char reason[2 * AL_HOST_MAX + 96];
	const char *answer_text; /* the HTTP answer's detail when not reason */
	const struct gw_stream_ops *stream;
	struct side client, upstream;
	char head[AL_HTTP_HEAD_MAX];
	size_t head_len;
	bool socks_greeted;    /* SOCKS: the greeting is answered */
	bool orig_read;	       /* transparent: the original destination is known */
	struct flow up, down;  /* client → upstream, upstream → client */
	struct al_host target; /* where the client asked to go */
	char name[AL_HOST_MAX + 1];
	char addr[INET6_ADDRSTRLEN];
	uint16_t port;
	const char *rule;
	const struct al_rule_opts *opts; /* the rule's options, or NULL */
	struct in6_addr dest;		 /* where to connect, once known */
	bool have_dest;
	bool resolving, resolved, resolve_ok; /* resolve.c */
	bool connecting;
	bool connect_ok;      /* connect's poll saw it done, without error */
	bool in_dispatch;     /* a stage is running (the resolver may answer inside it) */
	bool is_connect;      /* HTTP CONNECT: answer 200 once connected */
	bool check_first;     /* the first client bytes must name c->name (SNI or Host) */
	struct host_use *use; /* set once counted against the limits */
	bool up_limited;      /* absolute-URI request: only its body may follow the head */
	uint64_t up_left;     /* body bytes still allowed upstream */
	struct in6_addr orig; /* transparent: where the client was going */
	/* An HTTP proxy request other than CONNECT: its method and path, in
	 * head (what the decider is told). */
	bool have_request;
	struct al_http_slice method, req_path;
	struct gw_ask *ask;	  /* ask.c: the decider's question while it is asked */
	struct gw_filter *filter; /* filter.c: the filtered stream's state, or NULL */
	/* A plaintext stream relayed as it is in a run with secrets: its
	 * client bytes are searched for placeholders (relay.c). */
	bool scanning;
	struct al_needle_scan scan;
	int scan_hit; /* the needle found, or -1 */
	/* resolve.c: the first resolved address a never rule refused. */
	const struct al_allow_rule *never_rule;
	struct in6_addr never_addr;
};

/* A socket of the resolver's, in the loop. */
struct ares_sock {
	struct al_gateway *gw;
	int fd;
	struct al_watch *w;
	struct ares_sock *next;
};

struct al_gateway {
	const struct al_plan *plan;
	/* A warm pool's sandbox not claimed yet: every connection and lookup
	 * is refused (claim.c); claimed: the plan and credentials the claim
	 * brought, which plan and cred then point into. */
	bool held;
	struct gw_claimed *claimed;
	struct al_loop *loop;
	struct al_audit *audit;
	void (*usage)(void *data, const struct al_gateway_usage *use);
	void *usage_data;
	/* present.c: refusals reported (gw_refused), each distinct one once:
	 * a hash of each sent, at most AL_GW_REFUSALS_SENT. */
	void (*refusal)(void *data, const struct al_gateway_refusal *r);
	void *refusal_data;
	uint64_t refusal_sent[AL_GW_REFUSALS_SENT];
	size_t n_refusal_sent;
	ares_channel ares; /* created by al_gateway_prepare */
	struct ares_sock *ares_socks;
	bool ares_failed; /* the resolver could not start: lookups fail */
	struct al_timer *ares_timer;
	struct host_use *hosts;
	uint64_t active;   /* allowed connections open now */
	uint64_t requests; /* connections counted against network.limits.requests */
	int listen_fd[AL_GATEWAY_N_LISTENERS];
	/* peer.c: listeners on the host's loopback (the process backend)
	 * accept only connections whose client socket belongs to peer_uid,
	 * looked up on peer_diag (NETLINK_SOCK_DIAG); -1: no check. */
	int peer_diag;
	uid_t peer_uid;
	struct al_watch *listen_w[AL_GATEWAY_N_LISTENERS];
	struct al_timer *accept_resume; /* accepting again after running out of fds */
	/* fakeip.c: index i answers as 198.18.0.0 + i + 1 */
	char **fake_names;
	size_t n_fake, cap_fake;
	uint32_t *fake_slots; /* open addressing by name: index + 1, 0 = empty */
	size_t n_slots;	      /* a power of two, at least twice n_fake */
	struct conn *conns;
	size_t n_conns;
	struct al_gateway_stats st;
	/* ask.c: the run's id (what the decider is told), the answers kept,
	 * and the connector (connector.c) that makes Unix-socket connections
	 * to the decider for a confined gateway. */
	char run_id[64];
	struct al_decider_cache *cache;
	bool use_connector;
	int connector_fd; /* -1 when there is none, or it is gone */
	struct al_watch *connector_w;
	uint64_t next_token;
	const struct al_cred *cred; /* the run's secrets and tokens, or NULL */
	/* budget.c: what was charged here and what the supervisor said CPU
	 * and memory cost (billionths). */
	void (*charge)(void *data, const struct al_gwp_charge *ch);
	void *charge_data;
	uint64_t spent_here, spent_there;
	uint64_t egress_bytes; /* charged so far */
	/* present.c: every placeholder and fake key of the run, and whose
	 * (an index into cred->v). */
	const char *needles[AL_GW_MAX_NEEDLES];
	size_t needle_owner[AL_GW_MAX_NEEDLES];
	size_t n_needles;
	struct al_needles *needle_set; /* the same, compiled */
	bool needles_failed;	       /* they could not be: the gateway does not start */
	/* present.c: every value that goes out in a request (and the start
	 * of every per-request token), in the forms answers are searched for
	 * (gateway/answer.h); NULL with none. */
	struct al_valscan_set *answer_set;
	struct al_valscan_set *answer_plain; /* the same as the unescaped view writes them */
	struct al_valscan_set *answer_whole; /* whole forms only, for bodies not text */
	char answer_failed[200];	     /* why they could not be compiled: no start */
	struct gw_tls *tls;		     /* choose.c: interception's TLS contexts, or NULL */
};

/* gateway.c: out of fds: stop accepting for a while (a listener left
 * readable would spin the loop). */
void gw_accept_pause(struct al_gateway *gw);

/* conn.c */
void gw_accept(struct al_gateway *gw, enum al_gateway_listener kind, int fd);
/* The owner uid of connection fd's client socket, looked up on diag (a
 * NETLINK_SOCK_DIAG socket); 0, or -errno (the client already gone:
 * -ENOENT). */
int gw_peer_uid(int diag, int fd, uid_t *uid);
/* Run the connection's stages from where it is, for an event on s. */
void gw_conn_run(struct conn *c, struct side *s, uint32_t events);
/* Close c now, auditing it as its verdict says; end_reason (or NULL)
 * audits an undecided connection as refused, e.g. "the run ended". */
void gw_conn_close(struct conn *c, const char *end_reason);
/* Refuse: set the verdict and the answer; returns GW_CLOSE. */
enum gw_step gw_deny(struct conn *c, enum gw_answer answer, int http_status, uint8_t socks_code,
		     const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* Cut an allowed connection for misuse: it stays counted as allowed, the
 * close audits it as "cut" with the reason (and counts it in st.cut);
 * the answer as for gw_deny. Returns GW_CLOSE. */
enum gw_step gw_cut(struct conn *c, enum gw_answer answer, int http_status, uint8_t socks_code,
		    const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* Send a short answer of ours to the client, best effort. */
void gw_reply(struct conn *c, const void *buf, size_t len);
int gw_side_set(struct side *s, uint32_t events);
/* Put fd in s and watch it (connect's upstream side). */
int gw_side_open(struct conn *c, struct side *s, int fd, uint32_t events);
void gw_buf_put(struct buf *b, const void *data, size_t n);

/* decide.c */
enum gw_step gw_stage_decide(struct conn *c);
/* The never rule (plan->never) that matches addr on port, or NULL. */
const struct al_allow_rule *gw_never_addr(const struct al_gateway *gw, const struct in6_addr *addr,
					  uint16_t port);
/* Refuse: "the operator policy never allows WHAT (rule RULE)". */
enum gw_step gw_deny_never(struct conn *c, const char *what, const struct al_allow_rule *rule);
enum gw_step gw_stage_inspect(struct conn *c, struct side *s, uint32_t events);
/* The name the first bytes of a stream give (TLS SNI, HTTP Host): 0;
 * -EAGAIN: too few bytes yet; -ENOENT: no name to check; -EPROTO: TLS or
 * HTTP that cannot be checked. */
int gw_name_in_stream(const char *buf, size_t len, struct al_host *ret);
void gw_audit_limit(struct conn *c, const char *limit);

/* ask.c */
enum gw_step gw_stage_ask(struct conn *c);
/* Forget c's question (c is closing). */
void gw_ask_free(struct conn *c);
void gw_asker_free(struct al_gateway *gw);
/* The decider's answer to an egress question (its "result"): 1 allows, 0
 * denies (its reason, cleaned and cut to fit, in reason; "" when it gave
 * none), -1 is neither (reason says what it was). */
int gw_egress_verdict(const json_t *result, char *reason, size_t len);

/* connector.c: fork the connector (before the gateway confines itself):
 * a process that makes each connection to the decider's Unix socket
 * (path) the gateway asks for, and nothing else, and passes it back over
 * *ret_fd (SOCK_SEQPACKET; nonblocking; one struct gw_connector_reply per
 * struct gw_connector_ask, with the socket when it connected). It
 * confines itself first; 0 once it reported that, or -errno with msg. */
/* The question's body follows the token in the same message, at most
 * GW_CONNECTOR_BODY_MAX bytes: the connector writes the request line and
 * headers itself (POST to the one egress path it was given), then the
 * body, and shuts its write side, so a gateway taken over can neither
 * send the decider another request nor write more on the socket. */
#define GW_CONNECTOR_BODY_MAX (32u << 10)
struct gw_connector_ask {
	uint64_t token;
};
struct gw_connector_reply {
	uint64_t token;
	int32_t error; /* 0: connected (the fd comes with it), else an errno */
};
int gw_connector_start(const char *path, const char *egress_path, int *ret_fd, char *msg,
		       size_t len);
/* Drop every capability, the bounding and ambient sets too (the gateway
 * and its connector). 0 or -errno. */
int gw_drop_caps(void);

/* resolve.c */
int gw_resolver_start(struct al_gateway *gw, struct al_error *err);
enum gw_step gw_stage_resolve(struct conn *c);
void gw_resolver_free(struct al_gateway *gw);

/* choose.c */
enum gw_step gw_stage_choose(struct conn *c, struct side *s, uint32_t events);
/* Before confinement: the TLS contexts interception needs. */
int gw_tls_prepare(struct al_gateway *gw, struct al_error *err);
void gw_tls_warm(struct al_gateway *gw);
void gw_tls_free(struct al_gateway *gw);
struct al_tls_end;
int gw_tls_ends(struct conn *c, struct al_tls_end **srv, struct al_tls_end **cli,
		struct al_error *err);

/* conn.c: an HTTP proxy request relayed as it is: its cleaned head and
 * exactly its body upstream, one request per connection. */
enum gw_step gw_http_forward(struct conn *c);

/* relay.c */
enum gw_step gw_stage_connect(struct conn *c, struct side *s, uint32_t events);
void gw_flows_close(struct conn *c);
/* One direction, as the stream stages move it (inspect uses it for the
 * server's bytes while it holds the client's). False when broken. */
/* Move bytes both ways for the events ce (client) and ue (upstream) that
 * woke the connection; with hold, nothing goes upstream or is read from
 * the client (inspect holds the client's first bytes, but the server may
 * speak first). */
enum gw_step gw_relay_move(struct conn *c, uint32_t ce, uint32_t ue, bool hold);
bool gw_flow_waiting(const struct flow *f);
bool gw_flow_has_room(const struct flow *f);

/* budget.c: charge the budget for requests to host and bytes sent
 * there. False (nothing charged, the supervisor told) when that would
 * pass the budget: the request must be refused (402). True without a
 * budget. */
bool gw_budget_charge(struct al_gateway *gw, const char *host, uint64_t requests,
		      uint64_t bytes_up);
/* How many more bytes priced egress may send (UINT64_MAX: not priced). */
uint64_t gw_budget_egress_allowance(const struct al_gateway *gw);

/* present.c */
struct al_cred_secret;
void gw_needles_build(struct al_gateway *gw);
/* The placeholders to look for and the values to search answers for,
 * made again for cred (a claim's, or the run's with new values). */
void gw_cred_rebuild(struct al_gateway *gw, const struct al_cred *cred);
void gw_answer_set_build(struct al_gateway *gw);
const struct al_rule_opts *gw_rule_opts(const struct al_gateway *gw, const char *rule);
/* s is scoped to where c goes (its name, or its address, and port). */
bool gw_secret_scoped(const struct al_cred_secret *s, const struct conn *c);
/* The needle in name (any case), or -1. */
ssize_t gw_needle_in_name(const struct al_gateway *gw, const char *name);
/* A placeholder found where it does not go: counted in st.misuse,
 * audited as secret.misuse and reported (gw_refused). */
void gw_audit_misuse(struct al_gateway *gw, size_t needle, const char *where, const char *host,
		     int port);
/* The same for a secret's value (cred->v[secret]) found in an answer,
 * or (secret < 0) an answer that could not be searched for them: counted
 * and reported, with no audit event of its own for the latter. */
void gw_answer_misuse(struct al_gateway *gw, ssize_t secret, const char *where, const char *host,
		      int port);
/* Refuse c for a placeholder found in where ("host name", "body", ...);
 * an allowed connection is cut (gw_cut). */
enum gw_step gw_deny_misuse(struct conn *c, size_t needle, const char *where);
/* Tell the supervisor of a refusal (gateway.h), each distinct one once,
 * the first AL_GW_REFUSALS_SENT of them. */
void gw_refused(struct al_gateway *gw, enum al_gateway_refusal_kind kind, const char *host,
		int port, const char *secret, const char *why);

/* dnsstub.c */
void gw_dns_udp(struct al_gateway *gw, int fd);
enum gw_step gw_head_dns_tcp(struct conn *c);

/* fakeip.c */
bool gw_fake_addr(struct al_gateway *gw, const char *name, struct in6_addr *ret);
/* The name a fake address (host order) answers for, or NULL. */
const char *gw_fake_name(const struct al_gateway *gw, uint32_t addr);
void gw_fake_free(struct al_gateway *gw);
/* claim.c: what a claim brought (may be NULL). */
void gw_claimed_free(struct gw_claimed *k);
