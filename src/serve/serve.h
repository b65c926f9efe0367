/* airlock serve: the daemon (serve-design). The monitor (monitor.c) owns
 * the listening sockets, the state table and the metrics; the front
 * (api/front.c), forked before anything else is read and confined, speaks
 * HTTP; one session process per sandbox (session.c, exec'd as
 * `__session`) turns a request into a plan and runs it. */
#pragma once

#include <stdbool.h>

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

struct al_serve_config {
	const char *socket_path;
	const char *socket_group;  /* NULL: the socket is 0600 */
	const char *listen;	   /* "127.0.0.1:PORT" / "[::1]:PORT", or NULL */
	const char *token_file;	   /* bearer tokens for listen */
	const char *operator_file; /* --operator-policy, or NULL: found as the CLI finds it */
	unsigned max_sandboxes;
	unsigned max_clients;
	unsigned client_timeout_s; /* an idle or stalled client is dropped after this */
	const char *exe;	   /* this binary, exec'd for each session */
};

/* Serve until SIGTERM or SIGINT: 0, or -errno with err set when the
 * daemon could not start or its front failed. */
int al_serve_run(const struct al_serve_config *cfg, struct al_error *err);

/* The front's side (api/front.c): serve HTTP on the connections that come
 * over monitor_fd; never returns. */
void al_front_main(int monitor_fd, const struct al_serve_config *cfg) __attribute__((noreturn));

/* What a session needs of the front end that built it: the task request
 * (its policy, with the command set) held to the operator policy and made
 * a plan. 0 with *ret set; or < 0 with errs filled (the request's errors,
 * 400) or, when the operator policy refused it, *refused an array of its
 * reasons (403). */
struct al_session_ops {
	int (*plan)(const char *operator_file, struct al_policy *policy, const char *run_id,
		    struct al_plan **ret, struct al_errors *errs, char ***refused);
};

/* The session process: one request from the monitor on fd, run, answered;
 * returns the process's exit status. */
int al_session_main(int fd, const struct al_session_ops *ops);
