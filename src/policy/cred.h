/* Credentials, request rules and the spend budget as the policies write
 * them (docs/credentials.md). Both parsers read them with the functions
 * here: a task policy defines its own secrets and tokens when no operator
 * policy is in force; otherwise the operator's file defines them and a
 * task only names the ones its profile grants.
 *
 * Nothing here holds a secret's value: a definition says where the value
 * comes from on the host (cred/source.c reads it when the run starts) and
 * how it is presented on the way out. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "net/allow.h"

struct al_json_ctx;
struct al_errors;

/* Where a secret's value comes from, on the host. */
enum al_secret_source_kind {
	AL_SOURCE_ENV = 1, /* an environment variable of airlock's own */
	AL_SOURCE_FILE,	   /* a file's contents (one trailing newline dropped) */
	AL_SOURCE_FD,	   /* read from an inherited descriptor to its end */
	AL_SOURCE_COMMAND, /* a command's standard output, run at start */
	AL_SOURCE_MINT,	   /* a token: minted by airlock (tokens) */
};

struct al_secret_source {
	enum al_secret_source_kind kind;
	char *env;	     /* ENV */
	char *file;	     /* FILE (absolute) */
	int fd;		     /* FD */
	char **argv;	     /* COMMAND */
	uint64_t timeout_ms; /* COMMAND: how long it may take */
};

/* How the value goes out on a request to a scoped host. */
enum al_present {
	AL_HOW_NONE,   /* only in the body ("body": true and nothing else) */
	AL_HOW_HEADER, /* a header set from a template */
	AL_HOW_BASIC,  /* Authorization: Basic, the value as the password */
	AL_HOW_QUERY,  /* a query parameter */
	AL_HOW_SIGV4,  /* AWS SigV4: the request re-signed with the real key */
};

struct al_secret_def {
	char *name;
	bool token; /* defined under "tokens": minted per run */
	struct al_secret_source src;
	char **hosts; /* its scope, as allow rules ("api.example.com:443") */
	enum al_present how;
	char *header; /* HEADER: the field's name */
	char *tmpl;   /* HEADER: its value, with "{}" where the value goes */
	char *user;   /* BASIC */
	char *param;  /* QUERY */
	bool body;    /* the placeholder is replaced in request bodies too */
	/* Where the sandbox finds the placeholder: an environment variable
	 * (default: the name; SigV4 uses AWS_ACCESS_KEY_ID,
	 * AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN), and with "file" also
	 * /etc/airlock/secrets/NAME. */
	char *env;
	bool file;
	/* tokens */
	char *key_file;	  /* the signing key (cred/jwt.h formats) */
	char *iss;	  /* default "airlock" */
	char *scope;	  /* the "scope" claim, or NULL */
	bool per_request; /* minted afresh per request, for that host only */
	uint64_t ttl_ms;  /* per_request: each one's life (default 60 s) */
	bool expose;	  /* the sandbox gets the token itself, not a placeholder */
	char *where;	  /* "FILE: secrets.NAME" for messages */
};

void al_secret_def_free(struct al_secret_def *d);
/* A deep copy. */
struct al_secret_def *al_secret_def_dup(const struct al_secret_def *d);

/* An allow rule written as an object: its options. */
struct al_rule_opts {
	char *rule;	   /* the rule's text, as in net_allow */
	bool intercept;	   /* "tls": "intercept" */
	char *ca_file;	   /* the upstream's CA file (intercept), or NULL: the host's store */
	char **methods;	   /* NULL: any */
	char **paths;	   /* NULL: any (net/reqrule.h patterns) */
	char **paths_also; /* the operator's rule's paths: a path must match both lists */
	uint64_t max_body; /* 0: no limit */
};

void al_rule_opts_free(struct al_rule_opts *o);
struct al_rule_opts *al_rule_opts_dup(const struct al_rule_opts *o);
/* True if o says anything about requests (methods, paths, max_body). */
bool al_rule_opts_has_requests(const struct al_rule_opts *o);

/* Prices and the most a run may spend, in billionths of the budget's unit
 * (integers, so a price times a count is exact). */
#define AL_BUDGET_UNIT 1000000000ull

struct al_budget_price {
	char *host; /* a name or "*.name" (allow-rule syntax, no port) */
	uint64_t nano;
};

struct al_budget {
	bool set;
	uint64_t max;		   /* nano */
	uint64_t cpu_second;	   /* nano per CPU second */
	uint64_t memory_gb_second; /* nano per GB (2^30 bytes) of memory held for a second */
	uint64_t egress_mb;	   /* nano per MB (10^6 bytes) sent out */
	bool has_prices;
	struct al_budget_price *requests; /* per request, by host */
	size_t n_requests;
};

void al_budget_clear(struct al_budget *b);
void al_budget_copy(struct al_budget *dst, const struct al_budget *src);
/* The price of one request to name, or 0. */
uint64_t al_budget_request_price(const struct al_budget *b, const char *name);
/* v as "1.25" (up to nine decimals, trailing zeros cut). */
void al_budget_format(uint64_t nano, char *buf, size_t len);

/* Parsers (errors through c, as json.h). */
/* "secrets" / "tokens" as an object of definitions; token selects which.
 * Appends to *defs / *n. */
int al_json_secret_defs(struct al_json_ctx *c, const json_t *j, const char *path, bool token,
			struct al_secret_def ***defs, size_t *n);
/* One definition, name: j at path (a member of "secrets" or "tokens"). */
int al_json_secret_def(struct al_json_ctx *c, const char *name, const json_t *j, const char *path,
		       bool token, struct al_secret_def **ret);
/* --secret's KEY=VALUE form (docs/credentials.md, "On the command line"):
 * the definition it stands for, built as the JSON object it is equivalent
 * to and read by al_json_secret_def(), so that both forms have one set of
 * checks. Errors go to errs, each with "--secret ARG" as its where and the
 * flag's key as its path. *ret's where is "--secret ARG". */
int al_secret_flag_parse(const char *arg, struct al_secret_def **ret, struct al_errors *errs);
/* One network.allow element that is an object: {"host": RULE, "tls", "ca",
 * "methods", "paths", "max_body"}; *ret gets the options (its rule is the
 * text to put in the allow list). */
int al_json_rule_opts(struct al_json_ctx *c, const json_t *j, const char *path,
		      struct al_rule_opts **ret);
/* limits.budget */
int al_json_budget(struct al_json_ctx *c, const json_t *j, const char *path, bool prices_allowed,
		   struct al_budget *ret);

/* The options of the rule whose text is rule, or NULL. */
const struct al_rule_opts *al_rule_opts_find(struct al_rule_opts *const *opts, size_t n,
					     const char *rule);
