/* The result of a run: how it ended, what it used, what was in force
 * (the record's schema: docs/result.md). */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cgroup/cgroup.h"
#include "core/error.h"
#include "gateway/gateway.h"
#include "policy/plan.h"

enum al_end_reason {
	AL_END_EXITED,	    /* the command exited */
	AL_END_SIGNALED,    /* the command died by a signal of its own */
	AL_END_TIMEOUT,	    /* wall clock */
	AL_END_MEMORY,	    /* memory limit (the kernel's OOM killer fired) */
	AL_END_PIDS,	    /* pids limit (a fork was refused) */
	AL_END_CPU_TIME,    /* CPU seconds across the sandbox */
	AL_END_OUTPUT,	    /* stdout + stderr cap */
	AL_END_KILLED,	    /* airlock was told to stop and killed the sandbox */
	AL_END_SETUP_ERROR, /* a setup step or a pre-exec check failed; nothing ran */
	AL_END_EXEC_FAILED, /* the command could not be executed */
	AL_END_BUDGET,	    /* the spend budget (limits.budget) */
};

/* What the run spent against limits.budget (meter.c), in billionths. */
struct al_cost_host {
	char name[AL_HOST_MAX + 1];
	uint64_t requests, nano;
};
#define AL_COST_HOSTS 64
struct al_cost {
	uint64_t cpu, memory, egress, requests;	  /* nano, by item */
	uint64_t memory_byte_ms;		  /* memory held, integrated */
	uint64_t egress_bytes;			  /* egress charged */
	struct al_cost_host hosts[AL_COST_HOSTS]; /* requests by host (the first ones) */
	size_t n_hosts;
};

/* One pre-exec check of a layer (see verify.c). */
struct al_layer_check {
	const char *layer;
	bool in_force;
	char detail[320];
};

#define AL_MAX_CHECKS 16

/* What was refused, for the one-line summary after a run (the counts are
 * the record's: network.denied, network.dns_refused, denials.syscalls). */
#define AL_DENIED_HOSTS 4
#define AL_DENIED_CALLS 8
#define AL_DENIED_NAMES 4
/* The record's network.misuse_hosts keeps this many (the summary names
 * the first AL_DENIED_HOSTS). */
#define AL_MISUSE_KEPT 16
struct al_denied {
	struct {
		char what[300];	  /* "host:port" */
		char why[40];	  /* "no rule", "non-public address", ... */
	} hosts[AL_DENIED_HOSTS]; /* the first distinct ones */
	size_t n_hosts;
	bool more_hosts; /* a distinct one past the cap */
	/* DNS lookups refused: the name and why, the first distinct ones */
	struct al_gateway_refusal names[AL_DENIED_NAMES];
	size_t n_names;
	bool more_names;
	/* a secret kept from where it does not go (gateway.h), first
	 * distinct ones */
	struct al_gateway_refusal misuse[AL_MISUSE_KEPT];
	size_t n_misuse;
	bool more_misuse;
	char calls[AL_DENIED_CALLS][32]; /* system call names, first seen first */
	size_t n_calls;
	bool more_calls;
};

struct al_run_result {
	char started[40];     /* when the run started, RFC 3339 (set by the run layer) */
	const char *platform; /* what the backend ran on (ops->platform), or NULL */
	enum al_end_reason reason;
	int exit_code; /* what airlock exits with (docs/result.md, "Reasons and exit codes") */
	int signal;    /* SIGNALED / KILLED: the signal */
	uint64_t wall_ms;
	uint64_t stdout_bytes;
	uint64_t stderr_bytes;
	bool output_truncated;
	bool have_cgroup;	    /* memory and pids counters are from the run's cgroup */
	enum al_sockmem sockmem;    /* how the cgroup holds socket buffers */
	bool socket_memory;	    /* MEMORY: stopped for socket buffers past socket_stop */
	bool listeners_hit;	    /* MEMORY: stopped for more than AL_MAX_LISTENERS listeners */
	uint64_t linear_memory_cap; /* MEMORY: a wasm module's linear memory reached this cap */
	uint64_t socket_stop;
	bool have_cpu; /* cgroup.cpu_* are filled (cgroup or rusage) */
	struct al_cgroup_stats cgroup;
	uint64_t syscalls_denied; /* notified denials; silent ones are not counted */
	struct al_denied denied;  /* names for the summary */
	bool have_network;	  /* the egress gateway ran */
	struct al_gateway_stats network;
	struct al_layer_check checks[AL_MAX_CHECKS];
	size_t n_checks;
	bool have_ids; /* the sandbox got as far as having host ids */
	struct al_host_ids ids;
	json_t *copy_out;    /* --copy-out reports (supervisor/copy.h), owned; NULL: none */
	struct al_cost cost; /* with plan->budget.set */
	json_t *credentials; /* the run's secrets and tokens (cred/store.h), owned; NULL: none */
	json_t *minted;	     /* per-request tokens the gateway minted: [{name, jti, aud, exp}] */
	uint64_t n_minted;   /* all of them (minted keeps the first AL_MINTED_KEPT) */
	/* SETUP_ERROR and EXEC_FAILED */
	char step[32];
	int err;
	char msg[256];
};

#define AL_MINTED_KEPT 10000

/* What c adds up to. */
uint64_t al_cost_total(const struct al_cost *c);

/* The reason as the result record spells it ("exited", "cpu-time", ...). */
const char *al_reason_name(enum al_end_reason r);

/* One line describing how the run ended, or NULL when the command simply
 * exited or died by a signal of its own. A limit's line names the value
 * reached and the flag that sets it ("--memory 64M was reached"), taken
 * from plan (NULL: the value alone). */
const char *al_result_describe(const struct al_plan *plan, const struct al_run_result *res,
			       char *buf, size_t len);

/* One line of what the run's sandbox and gateway refused ("denied 3
 * connections: a.test:8099 (no rule), ...; 1 secret misuse: b.test:80
 * (secret TOK in the header X-Leak); 1 DNS lookup: c.test (no rule); 2
 * system calls: mount, bpf"), at most len - 1 characters; NULL when
 * nothing was. */
const char *al_result_denied_summary(const struct al_run_result *res, char *buf, size_t len);

/* Note a refused connection (host, port, the gateway's reason) or system
 * call for the summary; the first few distinct ones are kept. */
void al_result_note_denied_host(struct al_run_result *res, const char *host, int port,
				const char *reason);
void al_result_note_denied_call(struct al_run_result *res, const char *name);
/* Note a refusal the gateway reported (a DNS lookup, a secret's misuse). */
void al_result_note_refusal(struct al_run_result *res, const struct al_gateway_refusal *r);

/* The result record (docs/result.md) as a new JSON object. */
json_t *al_result_json(const struct al_plan *plan, const struct al_run_result *res,
		       const char *run_id);

/* Write the result record as name in directory dirfd (from
 * al_open_output_dir()), replaced atomically through a temporary file
 * that is created exclusively and never through a link; path is for
 * messages. */
/* The same for any record (a refused request's, al_cli): o written as
 * the two above write theirs. */
int al_result_write_json(int dirfd, const char *name, const char *path, const json_t *o,
			 struct al_error *err);
int al_result_write_json_fd(int fd, const char *what, const json_t *o, struct al_error *err);

int al_result_write(int dirfd, const char *name, const char *path, const struct al_plan *plan,
		    const struct al_run_result *res, const char *run_id, struct al_error *err);

/* Before the run: the record replaces a regular file or makes a new one,
 * so anything else at name in dirfd (a symbolic link such as /dev/stdout,
 * a device, a directory, a FIFO) is refused, with err naming path. 0 or
 * -errno. */
int al_result_check_target(int dirfd, const char *name, const char *path, struct al_error *err);

/* Write the result record to fd (an inherited descriptor; what names it
 * in messages). */
int al_result_write_fd(int fd, const char *what, const struct al_plan *plan,
		       const struct al_run_result *res, const char *run_id, struct al_error *err);
