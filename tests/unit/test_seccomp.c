/* policy/seccomp.h: the compiled seccomp program, run in a classic-BPF
 * interpreter (below) against struct seccomp_data inputs, never loaded.
 * For every x86_64 syscall and a set of argument vectors the program's
 * verdict must equal what the rule table says: for the first matching row,
 * SECCOMP_RET_USER_NOTIF (rows the supervisor answers and logs) or
 * SECCOMP_RET_ERRNO|errno (silent rows); otherwise SECCOMP_RET_ALLOW. Other ABIs (i386,
 * x32) must never be allowed. */
#include "unit.h"

#include <errno.h>
#include <inttypes.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "core/cleanup.h"
#include "core/error.h"
#include "policy/plan.h"
#include "policy/seccomp.h"

#ifndef __x86_64__
#error "these tests know the x86_64 syscall ABI only"
#endif

#define X32_SYSCALL_BIT	 0x40000000u
#define BPF_MEMWORDS_MAX 16

/* What al_seccomp_compile() produced, shared by every test. */
static struct sock_fprog prog;
static const struct al_seccomp_rule_info *rules;
static size_t n_rules;
static int *rule_nr; /* rules[i] resolved on x86_64, or -1 */

static int setup(void **state)
{
	struct al_error err = {0};

	if (al_seccomp_compile(&prog, &rules, &n_rules, &err) < 0) {
		print_error("al_seccomp_compile: %s\n", err.msg);
		return -1;
	}
	rule_nr = calloc(n_rules, sizeof(*rule_nr));
	if (!rule_nr)
		return -1;
	for (size_t i = 0; i < n_rules; i++) {
		int nr = seccomp_syscall_resolve_name_arch(SCMP_ARCH_X86_64, rules[i].syscall);
		rule_nr[i] = nr >= 0 ? nr : -1;
	}
	return 0;
}

static int teardown(void **state)
{
	free(prog.filter);
	free(rule_nr);
	return 0;
}

/* The interpreter. It accepts exactly what the kernel's seccomp checker
 * accepts (seccomp_check_filter() plus the classic-BPF checks) and fails
 * the test on anything else, so an instruction it does not model can never
 * pass silently. */

static uint32_t load_word(const struct seccomp_data *d, uint32_t k)
{
	uint32_t v;

	if (k % 4 != 0 || k > sizeof(*d) - 4)
		fail_msg("BPF load from bad seccomp_data offset %u", k);
	memcpy(&v, (const char *)d + k, sizeof(v));
	return v;
}

static uint32_t alu(uint16_t op, uint32_t a, uint32_t operand, unsigned pc)
{
	switch (op) {
	case BPF_ADD:
		return a + operand;
	case BPF_SUB:
		return a - operand;
	case BPF_MUL:
		return a * operand;
	case BPF_DIV:
		if (operand == 0)
			fail_msg("BPF division by zero at %u", pc);
		return a / operand;
	case BPF_MOD:
		if (operand == 0)
			fail_msg("BPF modulo by zero at %u", pc);
		return a % operand;
	case BPF_OR:
		return a | operand;
	case BPF_AND:
		return a & operand;
	case BPF_XOR:
		return a ^ operand;
	case BPF_LSH:
		return operand < 32 ? a << operand : 0;
	case BPF_RSH:
		return operand < 32 ? a >> operand : 0;
	case BPF_NEG:
		return -a;
	}
	fail_msg("unsupported BPF ALU op 0x%02x at %u", op, pc);
	return 0;
}

static bool jump_taken(uint16_t op, uint32_t a, uint32_t operand, unsigned pc)
{
	switch (op) {
	case BPF_JEQ:
		return a == operand;
	case BPF_JGT:
		return a > operand;
	case BPF_JGE:
		return a >= operand;
	case BPF_JSET:
		return (a & operand) != 0;
	}
	fail_msg("unsupported BPF JMP op 0x%02x at %u", op, pc);
	return false;
}

static uint32_t run_bpf(const struct sock_fprog *p, const struct seccomp_data *d)
{
	uint32_t a = 0, x = 0, mem[BPF_MEMWORDS_MAX];
	unsigned written = 0; /* bit i: mem[i] was stored */
	unsigned pc = 0;

	while (pc < p->len) {
		const struct sock_filter *f = &p->filter[pc];
		uint16_t code = f->code;
		uint32_t k = f->k;

		switch (code) {
		case BPF_LD | BPF_W | BPF_ABS:
			a = load_word(d, k);
			break;
		case BPF_LD | BPF_W | BPF_LEN:
			a = sizeof(*d);
			break;
		case BPF_LDX | BPF_W | BPF_LEN:
			x = sizeof(*d);
			break;
		case BPF_LD | BPF_IMM:
			a = k;
			break;
		case BPF_LDX | BPF_IMM:
			x = k;
			break;
		case BPF_LD | BPF_MEM:
		case BPF_LDX | BPF_MEM:
			/* (fail_msg() returns as far as the compiler knows) */
			if (k >= BPF_MEMWORDS_MAX || !(written & (1u << k))) {
				fail_msg("BPF load of unset M[%u] at %u", k, pc);
			} else if (BPF_CLASS(code) == BPF_LD) {
				a = mem[k];
			} else {
				x = mem[k];
			}
			break;
		case BPF_ST:
		case BPF_STX:
			if (k >= BPF_MEMWORDS_MAX) {
				fail_msg("BPF store to M[%u] at %u", k, pc);
			} else {
				mem[k] = code == BPF_ST ? a : x;
				written |= 1u << k;
			}
			break;
		case BPF_MISC | BPF_TAX:
			x = a;
			break;
		case BPF_MISC | BPF_TXA:
			a = x;
			break;
		case BPF_RET | BPF_K:
			return k;
		case BPF_RET | BPF_A:
			return a;
		case BPF_JMP | BPF_JA:
			if (k >= p->len - pc - 1)
				fail_msg("BPF jump out of the program at %u", pc);
			pc += 1 + k;
			continue;
		default:
			if (BPF_CLASS(code) == BPF_ALU) {
				if (BPF_OP(code) == BPF_NEG)
					a = alu(BPF_NEG, a, 0, pc);
				else
					a = alu(BPF_OP(code), a, BPF_SRC(code) == BPF_X ? x : k,
						pc);
				break;
			}
			if (BPF_CLASS(code) == BPF_JMP) {
				bool t =
				    jump_taken(BPF_OP(code), a, BPF_SRC(code) == BPF_X ? x : k, pc);
				unsigned off = t ? f->jt : f->jf;
				if (off >= p->len - pc - 1)
					fail_msg("BPF jump out of the program at %u", pc);
				pc += 1 + off;
				continue;
			}
			fail_msg("unsupported BPF instruction 0x%04x at %u", code, pc);
		}
		pc++;
	}
	fail_msg("BPF program ran off its end");
	return 0;
}

/* The model: what the table says. */

static bool row_matches(size_t i, int nr, const uint64_t *args)
{
	const struct al_seccomp_rule_info *r = &rules[i];

	if (rule_nr[i] < 0 || rule_nr[i] != nr)
		return false;
	switch (r->cond) {
	case AL_SECCOMP_ALWAYS:
		return true;
	case AL_SECCOMP_ARG_MASKED_EQ:
		return (args[r->arg] & r->mask) == r->value;
	case AL_SECCOMP_ARG_GT:
		return args[r->arg] > r->value;
	}
	fail_msg("row %zu has an unknown condition %d", i, (int)r->cond);
	return false;
}

static uint32_t expected_action(int nr, const uint64_t *args)
{
	for (size_t i = 0; i < n_rules; i++)
		if (row_matches(i, nr, args))
			return rules[i].notify
				   ? SECCOMP_RET_USER_NOTIF
				   : SECCOMP_RET_ERRNO |
					 ((uint32_t)rules[i].errno_value & SECCOMP_RET_DATA);
	return SECCOMP_RET_ALLOW;
}

static uint32_t run_call(uint32_t arch, uint32_t nr, const uint64_t *args)
{
	struct seccomp_data d = {.nr = (int)nr, .arch = arch, .instruction_pointer = 0x401000};

	memcpy(d.args, args, sizeof(d.args));
	return run_bpf(&prog, &d);
}

static void describe(char *buf, size_t len, uint32_t nr, const uint64_t *args)
{
	char *name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_X86_64, (int)nr);

	snprintf(buf, len,
		 "%s (nr %u) args {0x%" PRIx64 ", 0x%" PRIx64 ", 0x%" PRIx64 ", 0x%" PRIx64
		 ", 0x%" PRIx64 ", 0x%" PRIx64 "}",
		 name ? name : "?", nr, args[0], args[1], args[2], args[3], args[4], args[5]);
	free(name);
}

static void assert_action(uint32_t got, uint32_t want, uint32_t nr, const uint64_t *args)
{
	char what[256];

	if ((got & SECCOMP_RET_ACTION_FULL) == (want & SECCOMP_RET_ACTION_FULL) &&
	    ((want & SECCOMP_RET_ACTION_FULL) != SECCOMP_RET_ERRNO ||
	     (got & SECCOMP_RET_DATA) == (want & SECCOMP_RET_DATA)))
		return;
	describe(what, sizeof(what), nr, args);
	fail_msg("%s: program returned 0x%08x, table says 0x%08x", what, got, want);
}

static void check_call(uint32_t nr, const uint64_t *args)
{
	assert_action(run_call(AUDIT_ARCH_X86_64, nr, args), expected_action((int)nr, args), nr,
		      args);
}

/* Direct verdicts for one call, for the explicit cases. */
static uint32_t verdict(const char *name, uint64_t a0, uint64_t a1, uint64_t a2)
{
	const uint64_t args[6] = {a0, a1, a2, 0, 0, 0};
	int nr = seccomp_syscall_resolve_name_arch(SCMP_ARCH_X86_64, name);

	if (nr < 0)
		fail_msg("no x86_64 syscall named %s", name);
	return run_call(AUDIT_ARCH_X86_64, (uint32_t)nr, args);
}

#define ALLOW	 SECCOMP_RET_ALLOW
#define ERRNO(e) (SECCOMP_RET_ERRNO | (e))
/* Denied through the supervisor, which answers EPERM and logs the call. */
#define NOTIFY SECCOMP_RET_USER_NOTIF

static void expect_verdict(const char *name, uint64_t a0, uint64_t a1, uint64_t a2, uint32_t want)
{
	uint32_t got = verdict(name, a0, a1, a2);

	if (got != want)
		fail_msg("%s(0x%" PRIx64 ", 0x%" PRIx64 ", 0x%" PRIx64
			 "): got 0x%08x, expected 0x%08x",
			 name, a0, a1, a2, got, want);
}

/* tests */

static void test_program_shape(void **state)
{
	size_t n = 0;
	const struct al_seccomp_rule_info *t = al_seccomp_table(&n);

	assert_non_null(prog.filter);
	assert_true(prog.len > 0 && prog.len <= BPF_MAXINSNS);
	assert_ptr_equal(t, rules);
	assert_int_equal(n, n_rules);
	assert_true(n_rules > 0);
	/* The last instruction returns: a program never runs off its end. */
	assert_int_equal(BPF_CLASS(prog.filter[prog.len - 1].code), BPF_RET);
}

/* What a run installs is the build-time copy (seccomp-gen); it must be the
 * very program the table compiles to today. */
static void test_installed_program_matches(void **state)
{
	struct al_policy *pol = al_policy_new("test");
	struct al_plan *plan = NULL;
	struct al_error err = {0};

	pol->landlock = AL_LANDLOCK_BEST_EFFORT; /* this test is about seccomp */
	assert_int_equal(al_plan_build(pol, AL_PLAN_COMMAND_OPTIONAL, &plan, &err), 0);
	al_policy_free(pol);
	assert_int_equal(al_seccomp_program_len, prog.len);
	assert_memory_equal(al_seccomp_program, prog.filter, prog.len * sizeof(*prog.filter));
	assert_int_equal(plan->seccomp.len, prog.len);
	assert_memory_equal(plan->seccomp.filter, prog.filter, prog.len * sizeof(*prog.filter));
	assert_ptr_equal(plan->seccomp_rules, rules);
	assert_int_equal(plan->n_seccomp_rules, n_rules);
	al_plan_free(plan);
}

/* A misspelt name would be skipped by the compiler without a word. */
static void test_table_rows_resolve(void **state)
{
	for (size_t i = 0; i < n_rules; i++) {
		const struct al_seccomp_rule_info *r = &rules[i];
		if (rule_nr[i] < 0)
			fail_msg("row %zu: \"%s\" is not an x86_64 syscall", i, r->syscall);
		assert_true(r->errno_value > 0 && r->errno_value <= 4095);
		assert_true(r->arg < 6);
		if (r->cond == AL_SECCOMP_ARG_MASKED_EQ)
			assert_int_equal(r->value & ~r->mask, 0); /* else it never matches */
		if (r->cond != AL_SECCOMP_ALWAYS)
			assert_non_null(r->why);
	}
}

/* A small deterministic generator (xorshift64*) for extra argument vectors. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t rng(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dULL;
}

/* Argument vectors built around one row: matching it exactly, matching with
 * noise outside the mask, and missing it by one bit or one unit. */
static size_t vectors_for_row(const struct al_seccomp_rule_info *r, uint64_t out[][6])
{
	uint64_t v[8];
	size_t n = 0;

	if (r->cond == AL_SECCOMP_ARG_MASKED_EQ) {
		uint64_t low = r->mask & -r->mask; /* lowest bit of the mask */
		v[n++] = r->value;
		v[n++] = r->value | ~r->mask;
		v[n++] = r->value | (~r->mask & 0xdeadbeef00080800ULL);
		v[n++] = r->value ^ low;
		v[n++] = (r->value ^ low) | ~r->mask;
		v[n++] = r->value ^ (r->mask & (1ULL << 31));
	} else if (r->cond == AL_SECCOMP_ARG_GT) {
		v[n++] = r->value;
		v[n++] = r->value + 1;
		v[n++] = r->value - 1;
		v[n++] = r->value | (1ULL << 32);
		v[n++] = 0xffffffffULL;
		v[n++] = UINT64_MAX;
	}
	for (size_t i = 0; i < n; i++) {
		for (unsigned a = 0; a < 6; a++)
			out[i][a] = 0;
		out[i][r->arg] = v[i];
	}
	/* The same values with every other argument all-ones. */
	for (size_t i = 0; i < n; i++) {
		for (unsigned a = 0; a < 6; a++)
			out[n + i][a] = UINT64_MAX;
		out[n + i][r->arg] = v[i];
	}
	return 2 * n;
}

static void test_every_syscall_matches_table(void **state)
{
	static const uint64_t zeros[6] = {0}, ones[6] = {UINT64_MAX, UINT64_MAX, UINT64_MAX,
							 UINT64_MAX, UINT64_MAX, UINT64_MAX};
	uint64_t vecs[16][6];
	size_t named = 0, denied_always = 0, calls = 0;

	for (uint32_t nr = 0; nr < 1024; nr++) {
		char *name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_X86_64, (int)nr);
		if (!name)
			continue;
		free(name);
		named++;
		check_call(nr, zeros);
		check_call(nr, ones);
		if ((expected_action((int)nr, zeros) & SECCOMP_RET_ACTION_FULL) != ALLOW &&
		    (expected_action((int)nr, ones) & SECCOMP_RET_ACTION_FULL) != ALLOW)
			denied_always++;
		for (size_t i = 0; i < n_rules; i++) {
			size_t n = vectors_for_row(&rules[i], vecs);
			for (size_t k = 0; k < n; k++)
				check_call(nr, vecs[k]);
			calls += n;
		}
		for (int k = 0; k < 16; k++) {
			uint64_t args[6];
			for (int a = 0; a < 6; a++) {
				uint64_t x = rng();
				/* Mostly small values, as real arguments are. */
				args[a] = (x & 3) == 0	 ? x
					  : (x & 7) == 1 ? (x >> 8) & 0xffffffff
							 : (x >> 16) & 0x3f;
			}
			check_call(nr, args);
		}
		calls += 2 + 16;
	}
	print_message("%zu syscalls, %zu calls checked against %zu rows\n", named, calls, n_rules);
	/* The sweep saw the whole table and a realistic syscall count. */
	assert_true(named > 300);
	assert_true(denied_always >= 40);
}

static void test_explicit_verdicts(void **state)
{
	expect_verdict("mount", 0, 0, 0, NOTIFY);
	expect_verdict("umount2", 0, 0, 0, NOTIFY);
	expect_verdict("pivot_root", 0, 0, 0, NOTIFY);
	expect_verdict("read", 0, 0, 0, ALLOW);
	expect_verdict("write", 1, 0, 0, ALLOW);
	expect_verdict("openat", 0, 0, 0, ALLOW);
	expect_verdict("execve", 0, 0, 0, ALLOW);
	expect_verdict("bpf", 0, 0, 0, NOTIFY);
	expect_verdict("ptrace", 0, 0, 0, NOTIFY);
	expect_verdict("io_uring_setup", 0, 0, 0, NOTIFY);
	expect_verdict("open_by_handle_at", 0, 0, 0, NOTIFY);
	expect_verdict("keyctl", 0, 0, 0, NOTIFY);
}

static void test_socket_verdicts(void **state)
{
	expect_verdict("socket", AF_PACKET, SOCK_RAW, 0, NOTIFY);
	expect_verdict("socket", AF_PACKET, SOCK_DGRAM, 0, NOTIFY);
	expect_verdict("socket", AF_INET, SOCK_STREAM, 0, ALLOW);
	expect_verdict("socket", AF_INET6, SOCK_DGRAM, 0, ALLOW);
	expect_verdict("socket", AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ALLOW);
	expect_verdict("socket", AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, ALLOW);
	expect_verdict("socket", AF_INET, SOCK_RAW, 0, NOTIFY);
	expect_verdict("socket", AF_INET, SOCK_RAW | SOCK_CLOEXEC, 0, NOTIFY);
	expect_verdict("socket", AF_INET6, SOCK_RAW | SOCK_NONBLOCK, IPPROTO_ICMPV6, NOTIFY);
	expect_verdict("socket", AF_INET, SOCK_PACKET, 0, NOTIFY);
	expect_verdict("socket", AF_NETLINK, SOCK_RAW, 0, NOTIFY);
	expect_verdict("socket", AF_NETLINK, SOCK_DGRAM, 0, NOTIFY);
	expect_verdict("socket", AF_UNSPEC, SOCK_STREAM, 0, NOTIFY);
	expect_verdict("socket", AF_VSOCK, SOCK_STREAM, 0, NOTIFY);
	expect_verdict("socket", AF_ALG, SOCK_SEQPACKET, 0, NOTIFY);
	for (uint64_t family = 3; family <= 9; family++)
		expect_verdict("socket", family, SOCK_STREAM, 0, NOTIFY);
	/* The kernel reads an int: high bits must not turn a denied family
	 * into an allowed one, nor hide AF_UNSPEC. */
	expect_verdict("socket", AF_PACKET | (1ULL << 32), SOCK_RAW, 0, NOTIFY);
	expect_verdict("socket", AF_UNSPEC | (1ULL << 32), SOCK_STREAM, 0, NOTIFY);
	expect_verdict("socket", AF_INET, SOCK_RAW | (1ULL << 32), 0, NOTIFY);
	/* socketpair is not restricted by the socket rows. */
	expect_verdict("socketpair", AF_UNIX, SOCK_STREAM, 0, ALLOW);
}

static void test_ioctl_verdicts(void **state)
{
	expect_verdict("ioctl", 0, TIOCSTI, 0, NOTIFY);
	/* The bypass bubblewrap once had: the kernel ignores the high half. */
	expect_verdict("ioctl", 0, TIOCSTI | (1ULL << 32), 0, NOTIFY);
	expect_verdict("ioctl", 0, TIOCSTI | 0xffffffff00000000ULL, 0, NOTIFY);
	expect_verdict("ioctl", 0, TIOCLINUX, 0, NOTIFY);
	expect_verdict("ioctl", 0, TIOCLINUX | (1ULL << 40), 0, NOTIFY);
	expect_verdict("ioctl", 0, TIOCGWINSZ, 0, ALLOW);
	expect_verdict("ioctl", 3, FIONREAD, 0, ALLOW);
	expect_verdict("ioctl", TIOCSTI, 0, 0, ALLOW); /* the request is argument 1 */
}

static void test_namespace_verdicts(void **state)
{
	static const uint64_t ns_flags[] = {CLONE_NEWNS,    CLONE_NEWUTS, CLONE_NEWIPC,
					    CLONE_NEWUSER,  CLONE_NEWPID, CLONE_NEWNET,
					    CLONE_NEWCGROUP};

	expect_verdict("clone", CLONE_NEWUSER | SIGCHLD, 0, 0, NOTIFY);
	expect_verdict("clone", SIGCHLD, 0, 0, ALLOW);
	/* What glibc's pthread_create passes. */
	expect_verdict("clone",
		       CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD |
			   CLONE_SYSVSEM | CLONE_SETTLS | CLONE_PARENT_SETTID |
			   CLONE_CHILD_CLEARTID,
		       0, 0, ALLOW);
	for (size_t i = 0; i < AL_ARRAY_SIZE(ns_flags); i++) {
		expect_verdict("clone", ns_flags[i] | SIGCHLD, 0, 0, NOTIFY);
		expect_verdict("clone", ns_flags[i] | CLONE_VM | CLONE_VFORK | SIGCHLD, 0, 0,
			       NOTIFY);
	}
	expect_verdict("clone3", 0, 0, 0, ERRNO(ENOSYS));
	expect_verdict("unshare", 0, 0, 0, NOTIFY);
	expect_verdict("unshare", CLONE_NEWUSER, 0, 0, NOTIFY);
	expect_verdict("setns", 3, 0, 0, NOTIFY);
	expect_verdict("fork", 0, 0, 0, ALLOW);
	expect_verdict("vfork", 0, 0, 0, ALLOW);
}

static void test_other_abis(void **state)
{
	static const uint64_t zeros[6] = {0};
	int read_nr = seccomp_syscall_resolve_name_arch(SCMP_ARCH_X86_64, "read");
	int write_nr = seccomp_syscall_resolve_name_arch(SCMP_ARCH_X86_64, "write");
	uint32_t got;

	/* int 0x80 from a 64-bit process: i386 numbers, i386 arch. */
	for (uint32_t nr = 0; nr < 450; nr++) {
		got = run_call(AUDIT_ARCH_I386, nr, zeros);
		assert_int_equal(got & SECCOMP_RET_ACTION_FULL, SECCOMP_RET_KILL_PROCESS);
	}
	got = run_call(AUDIT_ARCH_AARCH64, 0, zeros);
	assert_int_equal(got & SECCOMP_RET_ACTION_FULL, SECCOMP_RET_KILL_PROCESS);

	/* x32 entry points arrive with the x86_64 arch and bit 30 set in nr.
	 * libseccomp routes them to the bad-arch action. */
	for (uint32_t nr = 0; nr < 1024; nr++) {
		got = run_call(AUDIT_ARCH_X86_64, nr | X32_SYSCALL_BIT, zeros);
		if ((got & SECCOMP_RET_ACTION_FULL) != SECCOMP_RET_KILL_PROCESS)
			fail_msg("x32 syscall 0x%x: got 0x%08x, expected KILL_PROCESS",
				 nr | X32_SYSCALL_BIT, got);
	}
	assert_int_equal(run_call(AUDIT_ARCH_X86_64, (uint32_t)read_nr | X32_SYSCALL_BIT, zeros) &
			     SECCOMP_RET_ACTION_FULL,
			 SECCOMP_RET_KILL_PROCESS);
	assert_int_equal(run_call(AUDIT_ARCH_X86_64, (uint32_t)write_nr, zeros), ALLOW);
}

static void test_unknown_numbers_allowed(void **state)
{
	static const uint64_t zeros[6] = {0};

	/* Default allow: numbers the kernel does not have answer ENOSYS from
	 * the kernel itself, not from the filter. */
	for (uint32_t nr = 1000; nr < 1024; nr++) {
		char *name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_X86_64, (int)nr);
		if (name) {
			free(name);
			continue;
		}
		assert_int_equal(run_call(AUDIT_ARCH_X86_64, nr, zeros), ALLOW);
	}
}

/* The interpreter itself: a hand-written program per supported opcode
 * family, so a broken interpreter cannot make the sweep vacuous. */
static void test_interpreter_self_check(void **state)
{
	/* clang-format off */
	struct sock_filter code[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_STMT(BPF_ST, 0),
		BPF_STMT(BPF_LDX | BPF_IMM, 3),
		BPF_STMT(BPF_ALU | BPF_ADD | BPF_X, 0),      /* a = nr + 3 */
		BPF_STMT(BPF_ALU | BPF_LSH | BPF_K, 4),      /* a <<= 4 */
		BPF_STMT(BPF_ALU | BPF_RSH | BPF_K, 2),      /* a >>= 2 */
		BPF_STMT(BPF_ALU | BPF_SUB | BPF_K, 1),      /* a -= 1 */
		BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0xff),   /* a &= 0xff */
		BPF_STMT(BPF_ALU | BPF_OR | BPF_K, 0x100),   /* a |= 0x100 */
		BPF_STMT(BPF_MISC | BPF_TAX, 0),             /* x = a */
		BPF_STMT(BPF_LD | BPF_MEM, 0),               /* a = nr */
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 5, 0, 2), /* nr == 5? */
		BPF_STMT(BPF_MISC | BPF_TXA, 0),
		BPF_STMT(BPF_RET | BPF_A, 0),                /* ((5+3)<<4>>2)-1 | 0x100 = 0x11f */
		BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x8, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, 0x8),
		BPF_JUMP(BPF_JMP | BPF_JGE | BPF_X, 0, 1, 0), /* nr >= x? */
		BPF_STMT(BPF_RET | BPF_K, 0x1),
		BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, 0x300, 0, 1),
		BPF_STMT(BPF_JMP | BPF_JA, 1),
		BPF_STMT(BPF_RET | BPF_K, 0x2),
		BPF_STMT(BPF_RET | BPF_K, 0x3),
	};
	/* clang-format on */
	struct sock_fprog p = {.len = AL_ARRAY_SIZE(code), .filter = code};
	struct seccomp_data d = {0};

	d.nr = 5;
	assert_int_equal(run_bpf(&p, &d), 0x11f);
	d.nr = 8; /* JSET 8 */
	assert_int_equal(run_bpf(&p, &d), 0x8);
	d.nr = 1; /* x = ((1+3)<<4>>2)-1|0x100 = 0x10f; 1 >= x is false */
	assert_int_equal(run_bpf(&p, &d), 0x1);
	d.nr = 0x200; /* x = 0x10b; 0x200 >= x, not > 0x300 */
	assert_int_equal(run_bpf(&p, &d), 0x2);
	d.nr = 0x400; /* x = 0x10b; 0x400 >= x, > 0x300: JA over "ret 2" */
	assert_int_equal(run_bpf(&p, &d), 0x3);

	/* Argument words are little-endian halves of the 64-bit args. */
	struct sock_filter hi[] = {
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1]) + 4),
	    BPF_STMT(BPF_RET | BPF_A, 0),
	};
	struct sock_fprog ph = {.len = 2, .filter = hi};
	d.args[1] = 0x1234567800000009ULL;
	assert_int_equal(run_bpf(&ph, &d), 0x12345678);
}

int main(void)
{
	/* clang-format off */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_interpreter_self_check),
		cmocka_unit_test(test_program_shape),
		cmocka_unit_test(test_installed_program_matches),
		cmocka_unit_test(test_table_rows_resolve),
		cmocka_unit_test(test_explicit_verdicts),
		cmocka_unit_test(test_socket_verdicts),
		cmocka_unit_test(test_ioctl_verdicts),
		cmocka_unit_test(test_namespace_verdicts),
		cmocka_unit_test(test_other_abis),
		cmocka_unit_test(test_unknown_numbers_allowed),
		cmocka_unit_test(test_every_syscall_matches_table),
	};

	/* clang-format on */

	return cmocka_run_group_tests(tests, setup, teardown);
}
