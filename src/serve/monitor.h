/* The monitor's state, shared by monitor.c (requests, the front, the
 * loop), monitor-conn.c (accepting clients, who they are) and
 * monitor-sess.c (session processes). */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <sys/types.h>

#include "policy/operator.h"
#include "serve/internal.h"

/* A client connection the monitor accepted, handed to the front. The
 * monitor keeps a descriptor of its own (dup) and drops the record when
 * the client hangs up, whatever the front says: the front can act only
 * for a connection that is open, by an id it cannot guess ahead. */
struct conn {
	uint64_t id; /* random */
	int dup;
	bool tcp;
	char identity[80]; /* "uid:N"; empty on TCP: per request, from its token */
	uid_t uid;
	gid_t gids[AL_SERVE_GIDS_MAX]; /* its gid first */
	size_t n_gids;
};

/* A request of the front's that a session owes an answer (or the rest
 * of a streamed one), and the connection it came on. */
struct owed {
	uint64_t req;
	uint64_t conn;
	bool stream;
	bool stale; /* its client went with a front that died: dropped */
};

/* The warm pool of one profile (monitor-pool.c). */
struct mon_pool;
enum pool_state {
	POOL_STARTING, /* its session making the sandbox */
	POOL_HELD,     /* ready for a claim */
	POOL_CLAIMING, /* a create sent to it, not answered yet */
};

/* A create on its way: kept while a pool's sandbox tries it, so that one
 * that does not fit can be made cold. */
struct mon_create {
	uint64_t req, conn;
	char identity[80];
	uint8_t *body;
	size_t len;
};

/* One sandbox the monitor holds: a one-shot run's until it answers, or a
 * live sandbox's from its create until its session process ends; or a
 * warm pool's, owned by no one until a create claims it. */
struct sandbox {
	char id[24];
	char owner[80];
	bool oneshot;
	bool ready;	 /* a live sandbox: its create answered 201 */
	bool deleting;	 /* DELETE passed on: the id answers 404 from now */
	bool paused;	 /* its session said so (AL_SEV_PAUSED), for the metrics */
	uint64_t req_id; /* the front's request waiting for the first answer */
	uint64_t started_ms;
	/* Until its run started (or it answered): past this it is killed. */
	uint64_t setup_deadline_ms; /* 0: started */
	json_t *meta;		    /* its metadata, from its session's 201 */
	struct owed *owed;
	size_t n_owed;
	pid_t pid;
	int pidfd;
	struct al_chan ch;
	bool done;
	struct mon_pool *pool; /* a pool's, not claimed yet; NULL: not */
	enum pool_state pool_state;
	struct mon_create claim; /* POOL_CLAIMING: the create tried */
	bool warm;		 /* claimed from the pool */
};

struct monitor {
	const struct al_serve_config *cfg;
	int unix_fd, tcp_fd, sig_fd;
	pid_t front_pid;
	struct al_chan front; /* fd -1 while no front runs */
	/* A dead front is started again at restart_ms; the back-off doubles
	 * with each death soon after a start. */
	uint64_t front_started_ms, restart_ms, backoff_ms;
	uint64_t req_floor; /* the highest request id a front used */
	struct conn *conns;
	size_t n_conns;
	struct sandbox **sb;
	size_t n_sb;
	struct al_token *tokens;
	size_t n_tokens;
	struct al_metrics metrics;
	char *operator_file; /* found at start, passed to every session; NULL: none */
	/* The daemon's own files, no run may show them: NUL-separated. */
	char *never;
	size_t never_len;
	bool stop;
	const struct al_operator *op; /* NULL: none */
	struct mon_pool *pools;	      /* per profile with serve.pool */
	size_t n_pools;
	struct mon_create *cold; /* creates a pool's sandbox did not fit */
	size_t n_cold;
};

/* monitor-conn.c */
void mon_accept(struct monitor *m, int lfd, bool tcp);
/* Connections at once per identity (--max-clients-per-identity), and
 * how many identity holds now. */
unsigned mon_per_identity(const struct monitor *m);
unsigned mon_conns_of(const struct monitor *m, const char *identity);
/* Drop the record of m->conns[i] (its client is gone): what it waits for
 * is cancelled. */
void mon_conn_gone(struct monitor *m, size_t i);

/* monitor-front.c */
/* Start the front (fork, exec `__front`); 0, or < 0 with err set. */
int mon_front_start(struct monitor *m, struct al_error *err);
/* The front is gone (why, for the log): its clients' records dropped as
 * hung up, what is still owed to them marked stale, a restart due after
 * the back-off. */
void mon_front_lost(struct monitor *m, const char *why);
/* With no front: start one when its back-off is over. ms until the next
 * try, or -1 (a front runs). */
int mon_front_restart(struct monitor *m);

/* monitor-sess.c */
/* fork + exec `__session` (spawn.c: the static airlock's exe_fd, else
 * this binary), its end of a socketpair at fd 3. */
int mon_spawn_session(struct monitor *m, struct sandbox *s, struct al_error *err);
/* Kill m->sb[i]'s session and drop it from the table. */
void mon_sandbox_free(struct monitor *m, size_t i);
/* Kill the sessions past their setup deadline; ms to the next, or -1. */
int mon_setup_deadlines(struct monitor *m);
void mon_stop_sessions(struct monitor *m);

/* monitor-pool.c: the warm pool (docs/pool.md). */
void mon_pool_init(struct monitor *m, const struct al_operator *op);
void mon_pool_free(struct monitor *m);
/* Creates that went cold started, the pools refilled; ms until a pool's
 * back-off ends, or -1. */
int mon_pool_tick(struct monitor *m);
/* A create sent to a ready pool sandbox of its profile: true; false: make
 * it cold (no pool for the profile, or none ready). */
bool mon_pool_create(struct monitor *m, uint64_t req, const struct conn *c, const char *identity,
		     const uint8_t *body, size_t len);
/* A pool sandbox's session message: 1 taken, 0 for on_session_msg,
 * -EBADMSG. */
int mon_pool_session_msg(struct monitor *m, struct sandbox *s, const struct al_msg *in);
/* s leaves the table (mon_sandbox_free). */
void mon_pool_gone(struct monitor *m, struct sandbox *s);
/* A held pool sandbox ended to make room (--max-sandboxes): true. */
bool mon_pool_evict(struct monitor *m);
/* Pool sandboxes in the table: held ones in *held (may be NULL). */
unsigned mon_pool_count(const struct monitor *m, unsigned *held);
/* The pool's metrics, appended to f. */
void mon_pool_metrics(const struct monitor *m, FILE *f);

/* monitor.c */
/* A create or one-shot run in a new session process of its own. */
void mon_start_session(struct monitor *m, uint64_t req, const struct conn *c, const char *identity,
		       const uint8_t *body, size_t len, unsigned op);
/* The first message to s's session: the request and who asked. */
void mon_session_run(struct monitor *m, struct sandbox *s, uint64_t req, const struct conn *c,
		     const char *identity, const uint8_t *body, size_t len, unsigned op);
void mon_owe(struct sandbox *s, uint64_t req, uint64_t conn);
void mon_owed_del(struct sandbox *s, uint64_t req);
void mon_cancel(struct monitor *m, uint64_t req);
void mon_respond_error(struct monitor *m, uint64_t req, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
