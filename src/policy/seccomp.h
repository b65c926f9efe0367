/* The seccomp policy: one readable table (seccomp.c) lowered with
 * libseccomp to a BPF program in the parent. The child only installs the
 * ready program (sandbox/steps.c). */
#pragma once

#include <linux/filter.h>
#include <stddef.h>

#include "core/error.h"
#include "policy/plan.h"

/* The table compiled at build time (seccomp-gen → seccomp-program.c). */
extern const struct sock_filter al_seccomp_program[];
extern const unsigned short al_seccomp_program_len;

/* Syscall number of each table row on this architecture (-1 if absent). */
extern const int al_seccomp_row_nr[];

/* The first notify row for syscall nr, or NULL: names a notification and
 * gives its errno. */
const struct al_seccomp_rule_info *al_seccomp_row_for(int nr);

/* The table's rows (static storage). */
const struct al_seccomp_rule_info *al_seccomp_table(size_t *ret_n);

/* Compile the table for the native architecture. Other architectures
 * (x32 and i386 entry points on x86_64) kill the process. On success
 * ret->filter is malloc()ed (free it) and the table rows are returned
 * through ret_rules/ret_n (static storage). */
int al_seccomp_compile(struct sock_fprog *ret, const struct al_seccomp_rule_info **ret_rules,
		       size_t *ret_n, struct al_error *err);
