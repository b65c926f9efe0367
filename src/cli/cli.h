/* Command-line front end. Options are parsed from one table (options.c)
 * into a struct al_policy — the same model the policy file fills — plus a
 * few CLI-only settings. */
#pragma once

#include <stdbool.h>
#include <stdio.h>

#include "core/error.h"
#include "policy/policy.h"

enum al_cli_cmd {
	AL_CMD_RUN = 1 << 0,
	AL_CMD_CHECK = 1 << 1,
	AL_CMD_VERIFY = 1 << 2,
};

struct al_cli {
	enum al_cli_cmd cmd;
	char *policy_file;
	char *operator_file;	 /* --operator-policy */
	char *result_file;	 /* --result */
	char *audit_file;	 /* --audit */
	int result_fd;		 /* --result-fd, --result -; -1: none */
	int audit_fd;		 /* --audit-fd, --audit -; -1: none */
	struct al_policy *flags; /* what the flags asked for; merged over the file */
	bool json;
	bool explain;	     /* check --explain */
	unsigned task_flags; /* options that set something in flags (not --policy, --json, ...) */
	bool help;
	bool version;
	struct al_errors *errs; /* al_cli_parse()'s, borrowed while it runs: an
				 * option with several errors adds all but its last */
};

/* Parse argv (after the subcommand name). For run and check, the first
 * non-option argument (or whatever follows "--") starts the command. Every bad flag
 * is added to errs, each naming the option; after an unknown option a next
 * word that is not an option is passed over (it may be that option's
 * value). Returns 0, or the negative errno of the first error added. Free
 * with al_cli_clear() either way. */
int al_cli_parse(struct al_cli *cli, enum al_cli_cmd cmd, int argc, char **argv,
		 struct al_errors *errs);
void al_cli_clear(struct al_cli *cli);

/* The start every subcommand shares: parse argv into *cli (the flags'
 * errors go to errs, for the subcommand to report with what else it finds)
 * and handle --help (print usage) and --version when no flag was wrong.
 * Returns true when the subcommand is done, with *ret_code set to 0; call
 * al_cli_clear() either way. */
bool al_cli_start(struct al_cli *cli, enum al_cli_cmd cmd, int argc, char **argv,
		  void (*usage)(FILE *f), struct al_errors *errs, int *ret_code);

/* Print the options of cmd, generated from the table. */
void al_cli_print_options(FILE *f, enum al_cli_cmd cmd);

/* Load --policy (if any), adding each of its errors to errs, and merge the
 * flags over it. Returns 0 with *ret set when errs is still empty (no flag
 * and nothing in the file was wrong), else the negative errno of errs'
 * first error. */
int al_cli_policy(const struct al_cli *cli, struct al_policy **ret, struct al_errors *errs);

#include "request/request.h"

/* The request layer's view of cli's request (request/request.h): its
 * --operator-policy, $AIRLOCK_OPERATOR_POLICY and TERM read here, the
 * flags as what the task set, plan_flags, and run_id (NULL, for check:
 * the decider is not asked). Borrows from cli. */
void al_cli_request_config(const struct al_cli *cli, unsigned plan_flags, const char *run_id,
			   struct al_request_config *cfg);

/* The names of op's profiles under which cli's request (its flags and
 * --policy, read again for each) passes the file's bounds and builds a
 * plan with flags; the external decider is not asked. A NULL-terminated
 * list (al_strv_free), NULL when there is none. */
char **al_cli_profiles_allowing(const struct al_cli *cli, const struct al_operator *op,
				unsigned flags);

/* Print each error as one line on stderr ("airlock: TEXT"), then how many
 * more there were past the cap. */
void al_cli_print_errors(const struct al_errors *errs);

/* Where run writes the record and the audit stream (cmd_run.c). */
struct al_audit;
struct al_cli_outputs {
	int result_dirfd; /* -1: none */
	char *result_name;
	char result_what[32];
	char audit_what[32];
	struct al_audit *audit;
};

/* Check and open --result, --result-fd, --audit and --audit-fd (o starts
 * with result_dirfd -1); with check_only nothing is created (check).
 * 0, or < 0 with err naming the flag. Undo with al_cli_outputs_close(). */
int al_cli_outputs_open(const struct al_cli *cli, const char *run_id, bool check_only,
			struct al_cli_outputs *o, struct al_error *err);
void al_cli_outputs_close(struct al_cli_outputs *o);

struct al_run;
struct al_run_request;
struct al_run_result;

/* Run req as the one run of this process: stdio is the CLI's own, its
 * SIGINT, SIGTERM, SIGHUP and SIGQUIT go to the run, SIGPIPE is ignored.
 * start_err gets why the run could not start (its result then says
 * setup-error), record_err why the result record could not be written;
 * each msg stays empty otherwise. Free *ret with al_run_free(). */
const struct al_run_result *al_cli_run(const struct al_run_request *req, struct al_run **ret,
				       struct al_error *start_err, struct al_error *record_err);

/* airlock's own terminal for a run with tty (term.c). Raw mode on fd
 * (a terminal), undone by al_cli_term_restore(), which also runs at exit
 * and when airlock itself crashes (SIGSEGV, SIGBUS, SIGFPE, SIGILL,
 * SIGABRT). 0, or -errno with err set (the mode is then unchanged). */
int al_cli_term_raw(int fd, struct al_error *err);
/* The terminal's mode as it was before al_cli_term_raw(); safe to call
 * again, and without it. */
void al_cli_term_restore(void);
/* fd's window size, when it is a terminal that has one. */
bool al_cli_term_size(int fd, unsigned short *ret_rows, unsigned short *ret_cols);

/* Subcommands: return the process exit code. */
int al_cmd_run(int argc, char **argv);
int al_cmd_check(int argc, char **argv);
int al_cmd_verify(int argc, char **argv);
int al_cmd_gc(int argc, char **argv);
int al_cmd_backends(int argc, char **argv);
int al_cmd_vm_image(int argc, char **argv);
/* airlock token verify|jwks|keygen|mint: the per-run JWTs (cmd_token.c). */
int al_cmd_token(int argc, char **argv);
/* airlock serve (cmd_serve.c): the daemon, in airlock-serve; the static
 * binary execs that. The hidden `__session` verb is one sandbox's process
 * of it (cmd_session.c; the static airlock's when it started the daemon). */
int al_cmd_serve(int argc, char **argv);
int al_cmd_mcp(int argc, char **argv);
/* `airlock oci` and `airlock-runc` (name: which, for messages). */
int al_cmd_oci(int argc, char **argv, const char *name);
int al_cmd_session(int argc, char **argv);
/* The hidden `__front`: the daemon's HTTP front (cmd_session.c,
 * airlock-serve only). */
int al_cmd_front(int argc, char **argv);
/* The probe `airlock verify` runs inside the sandbox (hidden "__probe"). */
int al_cmd_probe(int argc, char **argv);
void al_cli_usage(FILE *f);
