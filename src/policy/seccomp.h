/* The seccomp policy: one readable table (seccomp.c), a default-deny
 * allowlist, lowered with libseccomp to a BPF program at build time. The
 * child only installs the ready program (backend/native/steps.c); the
 * native backend's monitor answers the calls it hands over with
 * al_seccomp_answer() (backend/native/monitor.c). */
#pragma once

#include <linux/filter.h>
#include <stddef.h>

#include <stdint.h>

#include "core/error.h"

/* The seccomp policy is a default-deny allowlist (policy/seccomp.c). Each
 * system call the table names has rows of exactly one kind: */
enum al_seccomp_action {
	/* Allowed when every condition of the row holds (or always, with
	 * none). Arguments no allow row of the call matches are refused with
	 * the row's errno (EPERM) by the supervisor, and audited. */
	AL_SECCOMP_ALLOW,
	/* Refused in the kernel with the row's errno, silently: for frequent,
	 * harmless probes (clone3). */
	AL_SECCOMP_ERRNO,
	/* Refused with the row's errno by the supervisor, and audited. Needs
	 * no BPF (it is what the filter does with every call no row allows)
	 * but names the call, so it answers EPERM rather than ENOSYS. */
	AL_SECCOMP_DENY,
};

#define AL_SECCOMP_MAX_CONDS 3

/* (args[arg] & mask) == value. Every filtered parameter is a C int, or one
 * the kernel reads as its low 32 bits, so masks stay within 32 bits: high
 * bits can neither dodge a row nor be needed to match one. */
struct al_seccomp_cond {
	unsigned arg;
	uint64_t mask, value;
};

/* One row of the seccomp table. The compiled program allows a call when an
 * allow row matches, answers ERRNO rows in the kernel, and hands every
 * other call to the supervisor (SECCOMP_RET_USER_NOTIF), which answers
 * al_seccomp_answer(): the row's errno if the table names the call, else
 * ENOSYS. Unit tests evaluate the program against these rows. */
struct al_seccomp_rule_info {
	const char *syscall;
	enum al_seccomp_action action;
	unsigned n_conds; /* AL_SECCOMP_ALLOW only; 0 = always */
	struct al_seccomp_cond conds[AL_SECCOMP_MAX_CONDS];
	int errno_value; /* the answer when the call is refused */
	/* The condition (allow rows) or the reason (the others), for dumps;
	 * NULL for a plain allow. */
	const char *why;
};

/* Counts over the seccomp table, for dumps and `airlock verify`. */
struct al_seccomp_summary {
	size_t allowed;	 /* calls with allow rows */
	size_t filtered; /* of those, calls allowed only for some arguments */
	size_t denied;	 /* calls with a deny row */
	size_t silent;	 /* calls with an errno row */
};

/* The table compiled at build time (seccomp-gen → seccomp-program.c). */
extern const struct sock_filter al_seccomp_program[];
extern const unsigned short al_seccomp_program_len;

/* Every system call number the build's libseccomp names on this
 * architecture, ascending, with the first table row naming it (-1: none). */
struct al_seccomp_call {
	int nr;
	int row;
	const char *name;
};
extern const struct al_seccomp_call al_seccomp_calls[];
extern const size_t al_seccomp_n_calls;

/* The answer to a call the filter handed to the supervisor (every call no
 * allow row matched, except the kernel-answered errno rows): the errno to
 * fail it with, positive. That is the row's errno (EPERM) when the table
 * names nr (a deny row, or a call allowed only for some arguments), and
 * ENOSYS when it does not, so libc falls back as on an older kernel.
 * *ret_name is the call's name (static storage), or NULL when the build's
 * libseccomp does not know nr. Never fails. */
int al_seccomp_answer(int nr, const char **ret_name);

/* The table's rows (static storage). */
const struct al_seccomp_rule_info *al_seccomp_table(size_t *ret_n);

/* Count the calls of rules[0..n) by kind into *ret. The rows of one call
 * must be adjacent, as the compiler requires. */
void al_seccomp_summarize(const struct al_seccomp_rule_info *rules, size_t n,
			  struct al_seccomp_summary *ret);

/* Compile the table for the native architecture: default action user
 * notification, the allow and errno rows as rules, other architectures
 * (x32 and i386 entry points on x86_64) killing the process. Fails with
 * -EINVAL, naming the row, on a table that breaks the rules listed at the
 * top of seccomp.c. Rows naming a call that this libseccomp does not know
 * are left out (the call then answers ENOSYS); seccomp-gen warns about
 * them. On success ret->filter is malloc()ed (free it) and the table rows
 * are returned through ret_rules/ret_n (static storage). */
int al_seccomp_compile(struct sock_fprog *ret, const struct al_seccomp_rule_info **ret_rules,
		       size_t *ret_n, struct al_error *err);

/* What a filter does with a call no row allows or answers. */
enum al_seccomp_default {
	AL_SECCOMP_DEFAULT_NOTIFY, /* the sandbox: the supervisor answers and audits */
	AL_SECCOMP_DEFAULT_KILL,   /* the gateway process: it dies (SIGSYS) */
};

/* Compile any table (the same rules as above). */
int al_seccomp_compile_table(const struct al_seccomp_rule_info *table, size_t n,
			     enum al_seccomp_default dflt, struct sock_fprog *ret,
			     struct al_error *err);

/* The gateway process's allowlist (gateway/seccomp.c), compiled at build
 * time with AL_SECCOMP_DEFAULT_KILL. */
const struct al_seccomp_rule_info *al_gateway_seccomp_table(size_t *ret_n);
extern const struct sock_filter al_gateway_seccomp_program[];
extern const unsigned short al_gateway_seccomp_program_len;

/* The gateway's connector to a Unix-socket decider (gateway/seccomp.c,
 * gateway/connector.c), compiled the same way. */
const struct al_seccomp_rule_info *al_connector_seccomp_table(size_t *ret_n);
extern const struct sock_filter al_connector_seccomp_program[];
extern const unsigned short al_connector_seccomp_program_len;
