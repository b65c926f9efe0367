/* airlock serve: the daemon (serve-design). The monitor (monitor.c) owns
 * the listening sockets, the state table and the metrics; the front
 * (api/front.c), exec'd as `__front` before anything else is read and confined, speaks
 * HTTP; one session process per sandbox (session.c, exec'd as
 * `__session`) turns a request into a plan and runs it. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"

struct al_plan;
struct al_policy;
struct al_errors;

/* Bodies above this are refused (413) before they are read whole. */
#define AL_SERVE_BODY_MAX (1u << 20)
/* What a one-shot run's answer keeps of each of stdout and stderr (the
 * plan's output limit caps both together first). */
#define AL_SERVE_OUTPUT_MAX (8u << 20)
#define AL_SERVE_TOKEN_MAX  64
/* A file uploaded to or downloaded from a sandbox (PUT/GET .../files/):
 * at most this many bytes (the scratch's own size caps them first). */
#define AL_SERVE_FILE_MAX (32u << 20)
/* A Unix peer's groups passed on to its session (its gid first). */
#define AL_SERVE_GIDS_MAX 256
/* A session must have its plan final and its run started (or have
 * answered) within this, or the monitor kills it: the decider (at most
 * 60 s) and a command secret source are bounded before it. */
#define AL_SERVE_SETUP_MAX_MS 120000
/* The monitor reads no more from the sessions or the front while this
 * much waits to be written to the front (a front that does not read holds
 * them back, not the monitor's memory). */
#define AL_SERVE_FRONT_QUEUE_MAX (64u << 20)
/* On SIGTERM, how long the sessions have to end their runs and clean
 * up before they are killed. */
#define AL_SERVE_STOP_MS 10000
/* A sandbox's metadata (free-form JSON object) as JSON text. */
#define AL_SERVE_META_MAX (16u << 10)

struct al_serve_config {
	const char *socket_path;
	const char *socket_group;  /* NULL: the socket is 0600 */
	int socket_fd;		   /* > 0: the listening socket systemd passed (listen.c) */
	const char *listen;	   /* "127.0.0.1:PORT" / "[::1]:PORT", or NULL */
	const char *token_file;	   /* bearer tokens for listen */
	const char *operator_file; /* --operator-policy, or NULL: found as the CLI finds it */
	unsigned max_sandboxes;
	unsigned max_clients;
	unsigned client_timeout_s; /* an idle or stalled client is dropped after this */
	/* A request's head and body must arrive whole within this of its
	 * start (slow clients); 0: client_timeout_s. */
	unsigned request_timeout_s;
	unsigned max_clients_per_identity;   /* 0: max_clients */
	unsigned max_sandboxes_per_identity; /* 0: max_sandboxes */
	bool no_landlock;		     /* accept a kernel without landlock for the front */
	const char *exe; /* this binary, exec'd for the front and each session */
	/* When >= 0 (close-on-exec, above 3): the static airlock's descriptor,
	 * exec'd for each session instead of exe (--session-exe-fd). */
	int exe_fd;
};

/* Streamed answers (exec events, audit) buffered in the front for clients
 * slower than the sandbox: at most this much for one, and this much for
 * all together; past the total the client with the most buffered (the
 * slowest reader) is dropped. */
#define AL_SERVE_STREAM_MAX   (16u << 20)
#define AL_SERVE_STREAM_TOTAL (256u << 20)
/* Answers that are not streamed (a waited exec's output, a downloaded
 * file), held in the front until their clients read them: at most this
 * much for all together. Past it the largest held answers' clients are
 * dropped, or the new answer, when it is the largest, is replaced by a
 * 503. */
#define AL_SERVE_ANSWER_TOTAL (256u << 20)

/* What the front is started with (`airlock-serve __front ARGS`, its
 * channel at fd 3): numbers only, nothing secret. */
struct al_front_config {
	unsigned max_clients;
	unsigned client_timeout_s;
	unsigned request_timeout_s;
	uint64_t first_request; /* its request ids start above this (a restarted front) */
	bool no_landlock;
};

/* Socket activation (sd_listen_fds(3), without libsystemd): when
 * LISTEN_PID is this process and LISTEN_FDS is 1, checks that fd 3 is a
 * listening Unix stream socket bound to a path (socket_path, when set),
 * sets socket_fd (and socket_path, when unset) and returns the fd; 0 when
 * systemd passed nothing; -errno with err set. Removes the LISTEN_*
 * variables from the environment in every case. */
int al_serve_socket_activation(struct al_serve_config *cfg, struct al_error *err);

/* Serve until SIGTERM or SIGINT: 0, or -errno with err set when the
 * daemon could not start or its front failed. */
int al_serve_run(const struct al_serve_config *cfg, struct al_error *err);

/* The front's side (api/front.c): serve HTTP on the connections that come
 * over monitor_fd; never returns. Exit status 0 when the monitor is gone,
 * 124 when it cannot be confined, 125 on another failure. */
void al_front_main(int monitor_fd, const struct al_front_config *cfg) __attribute__((noreturn));

/* The session process (session.c): one request from the monitor on fd, a
 * one-shot run answered, or a live sandbox served until it is deleted or
 * its lifetime ends; returns the process's exit status. operator_env:
 * $AIRLOCK_OPERATOR_POLICY as the caller read it, or NULL. */
int al_session_main(int fd, const char *operator_env);
