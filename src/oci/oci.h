/* airlock as an OCI runtime: runc's verbs over airlock's sandboxes
 * (docs/oci.md). `airlock oci VERB` and `airlock-runc VERB` (src/cli/
 * cmd_oci.c) parse runc's command line and call these. A container is a
 * state directory under the runtime's root (state.h) and the supervisor
 * process `create` leaves behind (super.h); the other verbs talk to it
 * over its socket (proto.h). */
#pragma once

#include <stdbool.h>
#include <stdio.h>

#include "core/error.h"

struct al_oci_ctx {
	const char *root;	   /* --root (default AL_OCI_DEFAULT_ROOT) */
	int log_fd;		   /* --log, or -1: a supervisor's messages are dropped */
	const char *operator_file; /* --operator-policy, or NULL */
	const char *operator_env;  /* $AIRLOCK_OPERATOR_POLICY's value, or NULL */
	const char *term;	   /* $TERM */
	/* --audit-dir: where the containers' audit streams go (the runtime's
	 * configuration, the operator's: io.airlock.audit only names a file
	 * there, NAME.jsonl; without the annotation, ID.jsonl). NULL: none,
	 * and the annotation is refused. */
	const char *audit_dir;
};

struct al_oci_create_opts {
	const char *bundle;	    /* NULL: the current directory */
	const char *pid_file;	    /* NULL: none */
	const char *console_socket; /* NULL: none (the config may not ask for a terminal) */
};

/* Each returns 0, or < 0 with err set (the verb's message); they never
 * exit the process. */
int al_oci_create(const struct al_oci_ctx *g, const char *id, const struct al_oci_create_opts *o,
		  struct al_error *err);
int al_oci_start(const struct al_oci_ctx *g, const char *id, struct al_error *err);
/* The state JSON (the runtime spec's, with "created") on out. */
int al_oci_state(const struct al_oci_ctx *g, const char *id, FILE *out, struct al_error *err);
int al_oci_kill(const struct al_oci_ctx *g, const char *id, int sig, bool all,
		struct al_error *err);
int al_oci_delete(const struct al_oci_ctx *g, const char *id, bool force, struct al_error *err);
int al_oci_pause(const struct al_oci_ctx *g, const char *id, bool pause, struct al_error *err);
/* The container's host pids: JSON array (json) or a table with commands. */
int al_oci_ps(const struct al_oci_ctx *g, const char *id, bool json, FILE *out,
	      struct al_error *err);
/* Stats as runc's `events --stats` prints them (one JSON object), or,
 * without stats, one every interval_s until the container stops. */
int al_oci_events(const struct al_oci_ctx *g, const char *id, bool stats, unsigned interval_s,
		  FILE *out, struct al_error *err);
int al_oci_list(const struct al_oci_ctx *g, bool json, bool quiet, FILE *out, struct al_error *err);

struct al_oci_exec_opts {
	const char *process_file; /* --process: the process JSON; NULL: args */
	char *const *args;	  /* the command line's, when no --process */
	const char *cwd;
	char *const *env; /* --env NAME=VALUE */
	bool tty, detach;
	const char *pid_file, *console_socket;
};
/* *status: the exit status to leave with (the exec's code, or 128 + its
 * signal); with detach, 0 once it started. */
int al_oci_exec(const struct al_oci_ctx *g, const char *id, const struct al_oci_exec_opts *o,
		int *status, struct al_error *err);

/* create + start; without detach, wait for its end and delete it: *status
 * as for exec. */
int al_oci_run(const struct al_oci_ctx *g, const char *id, const struct al_oci_create_opts *o,
	       bool detach, int *status, struct al_error *err);

/* Where airlock's messages go (log.c): to fd (-1: nowhere) as runc's
 * --log-format writes them, text or JSON lines; every al_log() of the
 * process goes there from now on. al_oci_log_to() changes the fd (a
 * container's supervisor without --log: its state directory's "log"). */
#include "core/log.h"
void al_oci_log_open(int fd, bool json);
void al_oci_log_to(int fd);
void al_oci_log_line(enum al_log_level level, const char *msg);

/* `features`: what this runtime takes (the runtime spec's features.json). */
void al_oci_features(FILE *out);
/* `spec`: a config.json for a bundle (busybox-like root "rootfs") in dir. */
int al_oci_spec(const char *dir, struct al_error *err);
