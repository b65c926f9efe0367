/* policy/seccomp.h: the compiled seccomp program, run in a classic-BPF
 * interpreter (below) against struct seccomp_data inputs, never loaded.
 * For every x86_64 syscall number and a set of argument vectors the
 * program's verdict must equal what the rule table says: SECCOMP_RET_ALLOW
 * when an allow row of the call matches, SECCOMP_RET_ERRNO|errno for a call
 * with an errno row, and SECCOMP_RET_USER_NOTIF (the supervisor answers and
 * logs) for everything else, numbers the table does not know included.
 * Other ABIs (i386, x32) must never be allowed. The supervisor's answer to
 * a notification (al_seccomp_answer) is checked against the table too. */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/prctl.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/personality.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "core/cleanup.h"
#include "core/error.h"
#include "backend/native/lower.h"
#include "policy/plan.h"
#include "policy/seccomp.h"

#ifndef __x86_64__
#error "these tests know the x86_64 syscall ABI only"
#endif

#define X32_SYSCALL_BIT	 0x40000000u
#define BPF_MEMWORDS_MAX 16
#define MAX_NR		 1024

#ifndef IPPROTO_MPTCP
#define IPPROTO_MPTCP 262
#endif
#ifndef PR_SET_SYSCALL_USER_DISPATCH
#define PR_SET_SYSCALL_USER_DISPATCH 59
#endif
#ifndef PR_SET_MEMORY_MERGE
#define PR_SET_MEMORY_MERGE 67
#endif

/* What al_seccomp_compile() produced, shared by every test. */
static struct sock_fprog prog;
static const struct al_seccomp_rule_info *rules;
static size_t n_rules;
static int *rule_nr; /* rules[i] resolved on x86_64: a number, or < 0 (not here) */
/* The rows of each number: [first, end) (rows of one call are adjacent). */
static size_t row_first[MAX_NR], row_end[MAX_NR];

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
		rule_nr[i] = nr;
		if (nr < 0 || nr >= MAX_NR)
			continue;
		if (row_end[nr] == 0)
			row_first[nr] = i;
		row_end[nr] = i + 1;
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

static bool row_matches(const struct al_seccomp_rule_info *r, const uint64_t *args)
{
	for (unsigned k = 0; k < r->n_conds; k++)
		if ((args[r->conds[k].arg] & r->conds[k].mask) != r->conds[k].value)
			return false;
	return true;
}

/* What the table's filter does with a call no row allows: the sandbox's
 * hands it to the supervisor, the gateway process's kills. */
static uint32_t default_action = SECCOMP_RET_USER_NOTIF;

static uint32_t expected_action(int nr, const uint64_t *args)
{
	if (nr < 0 || nr >= MAX_NR)
		return default_action;
	for (size_t i = row_first[nr]; i < row_end[nr]; i++) {
		const struct al_seccomp_rule_info *r = &rules[i];
		if (r->action == AL_SECCOMP_ALLOW && row_matches(r, args))
			return SECCOMP_RET_ALLOW;
		if (r->action == AL_SECCOMP_ERRNO)
			return SECCOMP_RET_ERRNO | ((uint32_t)r->errno_value & SECCOMP_RET_DATA);
	}
	return default_action;
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

static uint32_t check_call(uint32_t nr, const uint64_t *args)
{
	uint32_t want = expected_action((int)nr, args);

	assert_action(run_call(AUDIT_ARCH_X86_64, nr, args), want, nr, args);
	return want & SECCOMP_RET_ACTION_FULL;
}

static int nr_of(const char *name)
{
	int nr = seccomp_syscall_resolve_name_arch(SCMP_ARCH_X86_64, name);

	if (nr < 0)
		fail_msg("no x86_64 syscall named %s", name);
	return nr;
}

/* Direct verdicts for one call, for the explicit cases. */
static uint32_t verdict(const char *name, uint64_t a0, uint64_t a1, uint64_t a2)
{
	const uint64_t args[6] = {a0, a1, a2, 0, 0, 0};

	return run_call(AUDIT_ARCH_X86_64, (uint32_t)nr_of(name), args);
}

#define ALLOW	 SECCOMP_RET_ALLOW
#define ERRNO(e) (SECCOMP_RET_ERRNO | (e))
/* Refused through the supervisor, which answers and logs the call. */
#define NOTIFY SECCOMP_RET_USER_NOTIF

static void expect_verdict(const char *name, uint64_t a0, uint64_t a1, uint64_t a2, uint32_t want)
{
	uint32_t got = verdict(name, a0, a1, a2);

	if (got != want)
		fail_msg("%s(0x%" PRIx64 ", 0x%" PRIx64 ", 0x%" PRIx64
			 "): got 0x%08x, expected 0x%08x",
			 name, a0, a1, a2, got, want);
}

/* For calls whose filtered argument is past the third (mmap's flags). */
static void expect_verdict4(const char *name, uint64_t a3, uint32_t want)
{
	const uint64_t args[6] = {0, 4096, 3, a3, (uint64_t)-1, 0};
	uint32_t got = run_call(AUDIT_ARCH_X86_64, (uint32_t)nr_of(name), args);

	if (got != want)
		fail_msg("%s(..., arg3 0x%" PRIx64 "): got 0x%08x, expected 0x%08x", name, a3, got,
			 want);
}

static bool table_names(const char *name)
{
	for (size_t i = 0; i < n_rules; i++)
		if (strcmp(rules[i].syscall, name) == 0)
			return true;
	return false;
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
	print_message("%u BPF instructions for %zu rows\n", prog.len, n_rules);
}

/* What a run installs is the build-time copy (seccomp-gen); it must be the
 * very program the table compiles to today. */
static void test_installed_program_matches(void **state)
{
	struct al_policy *pol = al_policy_new("test");
	struct al_plan *plan = NULL;
	struct al_native_plan *np = NULL;
	struct al_error err = {0};
	struct al_seccomp_summary s;

	pol->landlock = AL_LANDLOCK_BEST_EFFORT; /* this test is about seccomp */
	assert_int_equal(al_plan_build(pol, AL_PLAN_COMMAND_OPTIONAL, &plan, &err), 0);
	assert_int_equal(al_native_lower(plan, &np, &err), 0);
	al_policy_free(pol);
	assert_int_equal(al_seccomp_program_len, prog.len);
	assert_memory_equal(al_seccomp_program, prog.filter, prog.len * sizeof(*prog.filter));
	assert_int_equal(np->seccomp.len, prog.len);
	assert_memory_equal(np->seccomp.filter, prog.filter, prog.len * sizeof(*prog.filter));
	assert_ptr_equal(np->seccomp_rules, rules);
	assert_int_equal(np->n_seccomp_rules, n_rules);
	al_seccomp_summarize(rules, n_rules, &s);
	assert_memory_equal(&np->seccomp_summary, &s, sizeof(s));
	/* ioctl, socket, socketpair, clone, prctl, personality, mmap,
	 * memfd_create, shmget, the nine calls that take a file mode (no
	 * set-id bits) and the seven that act on a process (the caller only)
	 * are filtered; clone3 and openat2 are the silent errnos. */
	assert_true(s.allowed > 250);
	assert_int_equal(s.filtered, 25);
	assert_int_equal(s.silent, 2);
	assert_true(s.denied >= 70);
	print_message("allowlist of %zu calls (%zu filtered), %zu denials, %zu silent\n", s.allowed,
		      s.filtered, s.denied, s.silent);
	al_native_plan_free(np);
	al_plan_free(plan);
}

/* A misspelt name would be left out by the compiler with only a warning
 * at build time. Names that are not x86_64 calls (vm86) may only deny. */
static void test_table_rows_resolve(void **state)
{
	for (size_t i = 0; i < n_rules; i++) {
		const struct al_seccomp_rule_info *r = &rules[i];
		if (rule_nr[i] == __NR_SCMP_ERROR)
			fail_msg("row %zu: \"%s\" is not a system call this libseccomp knows", i,
				 r->syscall);
		if (rule_nr[i] < 0 && r->action != AL_SECCOMP_DENY)
			fail_msg("row %zu: \"%s\" is not an x86_64 syscall", i, r->syscall);
		assert_true(r->errno_value > 0 && r->errno_value <= 4095);
		assert_true(r->n_conds <= AL_SECCOMP_MAX_CONDS);
		if (r->action != AL_SECCOMP_ALLOW) {
			assert_int_equal(r->n_conds, 0);
			assert_non_null(r->why);
		} else {
			assert_int_equal(r->errno_value, EPERM);
		}
		if (r->n_conds > 0)
			assert_non_null(r->why);
		unsigned seen = 0;
		for (unsigned k = 0; k < r->n_conds; k++) {
			const struct al_seccomp_cond *c = &r->conds[k];
			assert_true(c->arg < 6);
			assert_false(seen & (1u << c->arg)); /* one compare per argument */
			seen |= 1u << c->arg;
			assert_int_not_equal(c->mask, 0);
			/* int parameters: a 64-bit mask would let high bits
			 * dodge or be needed (the kernel ignores them) */
			assert_int_equal(c->mask >> 32, 0);
			assert_int_equal(c->value & ~c->mask, 0); /* else it never matches */
		}
	}
}

/* Each call has rows of one kind only: libseccomp does not define how rules
 * of different actions on one call combine. The rows of a call are
 * adjacent, and an errno, deny or unconditional allow row stands alone. */
static void test_no_call_mixes_kinds(void **state)
{
	for (size_t i = 0; i < n_rules; i++) {
		size_t same = 0;
		for (size_t j = 0; j < n_rules; j++) {
			if (strcmp(rules[i].syscall, rules[j].syscall) != 0)
				continue;
			same++;
			if (rules[j].action != rules[i].action)
				fail_msg("%s has rows of two kinds (%zu, %zu)", rules[i].syscall, i,
					 j);
			if (j + 1 < i || j > i + 1) {
				bool adjacent = true;
				for (size_t k = (i < j ? i : j) + 1; k < (i < j ? j : i); k++)
					if (strcmp(rules[k].syscall, rules[i].syscall) != 0)
						adjacent = false;
				if (!adjacent)
					fail_msg("the rows of %s are not adjacent",
						 rules[i].syscall);
			}
		}
		if (same > 1 && (rules[i].action != AL_SECCOMP_ALLOW || rules[i].n_conds == 0))
			fail_msg("%s: only conditional allow rows may repeat a call",
				 rules[i].syscall);
		/* Two names for one number (none today) would mix them too. */
		if (rule_nr[i] >= 0)
			for (size_t j = 0; j < n_rules; j++)
				if (rule_nr[j] == rule_nr[i] &&
				    strcmp(rules[j].syscall, rules[i].syscall) != 0)
					fail_msg("%s and %s are one number", rules[i].syscall,
						 rules[j].syscall);
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

#define MAX_VECTORS 32

/* One vector: the row's arguments at value (then changed by how), every
 * other argument at fill. */
enum variant {
	EXACT,
	NOISE,
	NOISE_SOME,
	HIGH_HALF,
	MISS_LOW,
	MISS_HIGH,
	MISS_LOW_HIGH_HALF
};

static void make_vector(const struct al_seccomp_rule_info *r, enum variant how, unsigned which,
			uint64_t fill, uint64_t out[6])
{
	for (unsigned a = 0; a < 6; a++)
		out[a] = fill;
	for (unsigned k = 0; k < r->n_conds; k++) {
		const struct al_seccomp_cond *c = &r->conds[k];
		uint64_t v = c->value, low = c->mask & -c->mask;
		uint64_t high = 1ULL << (63 - __builtin_clzll(c->mask));
		switch (how) {
		case EXACT:
			break;
		case NOISE:
			v |= ~c->mask;
			break;
		case NOISE_SOME:
			v |= ~c->mask & 0xdeadbeef00080800ULL;
			break;
		case HIGH_HALF:
			v |= 0xffffffff00000000ULL;
			break;
		case MISS_LOW:
			v ^= k == which ? low : 0;
			break;
		case MISS_HIGH:
			v ^= k == which ? high : 0;
			break;
		case MISS_LOW_HIGH_HALF:
			v = (v ^ (k == which ? low : 0)) | 0xffffffff00000000ULL;
			break;
		}
		out[c->arg] = v;
	}
}

/* Argument vectors built around one row's conditions: matching exactly,
 * matching with noise outside the masks (high half included), and missing
 * by the lowest or highest bit of one mask; every other argument all-zero,
 * then all-ones. */
static size_t vectors_for_row(const struct al_seccomp_rule_info *r, uint64_t out[][6])
{
	static const enum variant all[] = {EXACT,    NOISE,	NOISE_SOME,	   HIGH_HALF,
					   MISS_LOW, MISS_HIGH, MISS_LOW_HIGH_HALF};
	size_t n = 0;

	if (r->n_conds == 0)
		return 0;
	for (int f = 0; f < 2; f++)
		for (size_t v = 0; v < AL_ARRAY_SIZE(all); v++) {
			bool per_cond = all[v] >= MISS_LOW;
			for (unsigned k = 0; k < (per_cond ? r->n_conds : 1); k++)
				make_vector(r, all[v], k, f ? UINT64_MAX : 0, out[n++]);
		}
	return n;
}

static void test_every_syscall_matches_table(void **state)
{
	static const uint64_t zeros[6] = {0}, ones[6] = {UINT64_MAX, UINT64_MAX, UINT64_MAX,
							 UINT64_MAX, UINT64_MAX, UINT64_MAX};
	uint64_t vecs[MAX_VECTORS][6];
	size_t calls = 0, allowed = 0, notified = 0, errno_calls = 0;

	for (uint32_t nr = 0; nr < MAX_NR; nr++) {
		uint32_t z = check_call(nr, zeros), o = check_call(nr, ones);
		allowed += z == ALLOW && o == ALLOW;
		notified += z == NOTIFY && o == NOTIFY;
		errno_calls += z == SECCOMP_RET_ERRNO;
		/* The vectors of every conditional row (its own call's, and
		 * another call's, whose rows must not leak into this one). */
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
	print_message("%u numbers, %zu calls checked against %zu rows: %zu always allowed, "
		      "%zu always notified, %zu errno\n",
		      MAX_NR, calls, n_rules, allowed, notified, errno_calls);
	/* A realistic allowlist, and every other number refused. */
	assert_true(allowed > 250);
	assert_true(notified > MAX_NR - 400);
	assert_int_equal(errno_calls, 2);
}

static void expect_args(const char *name, const uint64_t args[6], uint32_t want)
{
	uint32_t got = run_call(AUDIT_ARCH_X86_64, (uint32_t)nr_of(name), args);

	if (got != want)
		fail_msg("%s(0x%" PRIx64 ", 0x%" PRIx64 ", 0x%" PRIx64 ", 0x%" PRIx64
			 "): got 0x%08x, expected 0x%08x",
			 name, args[0], args[1], args[2], args[3], got, want);
}

/* No set-user-ID or set-group-ID file can be made: through a --rw input
 * the sandbox user acts as the directory's host owner. */
static void test_setid_modes(void **state)
{
	const uint64_t hi = 1ull << 32;

	(void)state;
	expect_verdict("chmod", 0, 0755, 0, ALLOW);
	expect_verdict("chmod", 0, 04755, 0, NOTIFY);
	expect_verdict("chmod", 0, 02755, 0, NOTIFY);
	expect_verdict("chmod", 0, 01777, 0, ALLOW); /* sticky is harmless */
	expect_verdict("chmod", 0, hi | 0755, 0, ALLOW);
	expect_verdict("fchmod", 3, 04755, 0, NOTIFY);
	expect_verdict("fchmodat", 3, 0, 06755, NOTIFY);
	expect_verdict("fchmodat", 3, 0, 0644, ALLOW);
	expect_verdict("fchmodat2", 3, 0, 04000, NOTIFY);
	expect_verdict("creat", 0, 04755, 0, NOTIFY);
	expect_verdict("creat", 0, 0644, 0, ALLOW);
	expect_verdict("mknod", 0, S_IFREG | 04755, 0, NOTIFY);
	expect_verdict("mknodat", 3, 0, S_IFIFO | 0644, ALLOW);
	expect_verdict("open", 0, O_RDONLY, 04755, ALLOW); /* no O_CREAT: mode unused */
	expect_verdict("open", 0, O_CREAT | O_WRONLY, 04755, NOTIFY);
	expect_verdict("open", 0, O_CREAT | O_WRONLY, 0644, ALLOW);
	expect_verdict("open", 0, O_TMPFILE | O_WRONLY, 02755, NOTIFY);
	expect_args("openat", (const uint64_t[6]){3, 0, O_RDONLY, 06777, 0, 0}, ALLOW);
	expect_args("openat", (const uint64_t[6]){3, 0, O_CREAT | O_RDWR, 04700, 0, 0}, NOTIFY);
	expect_args("openat", (const uint64_t[6]){3, 0, O_CREAT | O_RDWR, 0600, 0, 0}, ALLOW);
	expect_args("openat", (const uint64_t[6]){3, 0, hi | O_CREAT | O_RDWR, hi | 0600, 0, 0},
		    ALLOW);
	expect_verdict("openat2", 3, 0, 24, ERRNO(ENOSYS));
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
	expect_verdict("statx", 0, 0, 0, ALLOW);
	expect_verdict("rseq", 0, 0, 0, ALLOW);
	expect_verdict("bpf", 0, 0, 0, NOTIFY);
	expect_verdict("ptrace", 0, 0, 0, NOTIFY);
	expect_verdict("io_uring_setup", 0, 0, 0, NOTIFY);
	expect_verdict("open_by_handle_at", 0, 0, 0, NOTIFY);
	expect_verdict("keyctl", 0, 0, 0, NOTIFY);
	expect_verdict("modify_ldt", 1, 0x1000, 16, NOTIFY);
	expect_verdict("modify_ldt", 0, 0, 0, NOTIFY);
	expect_verdict("userfaultfd", 0, 0, 0, NOTIFY);
	expect_verdict("perf_event_open", 0, 0, 0, NOTIFY);
	expect_verdict("init_module", 0, 0, 0, NOTIFY);
	expect_verdict("uselib", 0, 0, 0, NOTIFY);
	expect_verdict("io_setup", 1, 0, 0, NOTIFY);
	expect_verdict("move_pages", 0, 0, 0, NOTIFY);
	expect_verdict("memfd_secret", 0, 0, 0, NOTIFY);
	/* Huge pages: a host-wide pool no memory cgroup counts. */
	expect_verdict4("mmap", MAP_PRIVATE | MAP_ANONYMOUS, ALLOW);
	expect_verdict4("mmap", MAP_SHARED | MAP_FIXED | MAP_POPULATE, ALLOW);
	expect_verdict4("mmap", MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, NOTIFY);
	expect_verdict4("mmap", MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | (21 << 26), NOTIFY);
	expect_verdict4("mmap", (1ULL << 32) | MAP_PRIVATE, ALLOW); /* an int: high half ignored */
	expect_verdict("memfd_create", 0, MFD_CLOEXEC | MFD_ALLOW_SEALING, 0, ALLOW);
	expect_verdict("memfd_create", 0, MFD_CLOEXEC | MFD_HUGETLB, 0, NOTIFY);
	expect_verdict("shmget", 0, 1 << 20, IPC_CREAT | 0600, ALLOW);
	expect_verdict("shmget", 0, 1 << 21, IPC_CREAT | SHM_HUGETLB | 0600, NOTIFY);
}

static void test_socket_verdicts(void **state)
{
	/* MPTCP, SCTP, DCCP, UDP-Lite: INET families, other protocols. */
	expect_verdict("socket", AF_INET, SOCK_STREAM, IPPROTO_MPTCP, NOTIFY);
	expect_verdict("socket", AF_INET6, SOCK_STREAM, IPPROTO_MPTCP, NOTIFY);
	expect_verdict("socket", AF_INET, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_MPTCP, NOTIFY);
	expect_verdict("socket", AF_INET, SOCK_STREAM, IPPROTO_SCTP, NOTIFY);
	expect_verdict("socket", AF_INET, SOCK_SEQPACKET, IPPROTO_SCTP, NOTIFY);
	expect_verdict("socket", AF_INET6, SOCK_SEQPACKET, 0, NOTIFY);
	expect_verdict("socket", AF_INET, SOCK_DCCP, IPPROTO_DCCP, NOTIFY);
	expect_verdict("socket", AF_INET, SOCK_DGRAM, IPPROTO_UDPLITE, NOTIFY);
	expect_verdict("socket", AF_INET6, SOCK_DGRAM, IPPROTO_UDPLITE, NOTIFY);
	expect_verdict("socket", AF_INET, SOCK_STREAM, IPPROTO_UDP, NOTIFY);
	expect_verdict("socket", AF_INET, SOCK_DGRAM, IPPROTO_TCP, NOTIFY);
	expect_verdict("socket", AF_INET, SOCK_DGRAM, IPPROTO_ICMPV6, NOTIFY);
	expect_verdict("socket", AF_INET6, SOCK_DGRAM, IPPROTO_ICMP, NOTIFY);
	/* The kernel reads the protocol as an int. */
	expect_verdict("socket", AF_INET, SOCK_STREAM, IPPROTO_MPTCP | (1ULL << 32), NOTIFY);
	expect_verdict("socket", AF_INET, SOCK_STREAM, IPPROTO_TCP | (1ULL << 32), ALLOW);
	/* TCP, UDP and ICMP ping sockets. */
	expect_verdict("socket", AF_INET, SOCK_STREAM, 0, ALLOW);
	expect_verdict("socket", AF_INET, SOCK_STREAM, IPPROTO_TCP, ALLOW);
	expect_verdict("socket", AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, ALLOW);
	expect_verdict("socket", AF_INET6, SOCK_STREAM, IPPROTO_TCP, ALLOW);
	expect_verdict("socket", AF_INET6, SOCK_DGRAM, 0, ALLOW);
	expect_verdict("socket", AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, IPPROTO_UDP, ALLOW);
	expect_verdict("socket", AF_INET, SOCK_DGRAM, IPPROTO_UDP, ALLOW);
	expect_verdict("socket", AF_INET, SOCK_DGRAM, IPPROTO_ICMP, ALLOW);
	expect_verdict("socket", AF_INET6, SOCK_DGRAM, IPPROTO_ICMPV6, ALLOW);
	expect_verdict("socket", AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ALLOW);
	expect_verdict("socket", AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, ALLOW);
	expect_verdict("socket", AF_UNIX, SOCK_SEQPACKET, 0, ALLOW);
	/* Raw, packet, netlink and other families. */
	expect_verdict("socket", AF_PACKET, SOCK_RAW, 0, NOTIFY);
	expect_verdict("socket", AF_PACKET, SOCK_DGRAM, 0, NOTIFY);
	expect_verdict("socket", AF_INET, SOCK_RAW, 0, NOTIFY);
	expect_verdict("socket", AF_INET, SOCK_RAW, IPPROTO_ICMP, NOTIFY);
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
	/* High bits must not turn a denied family into an allowed one. */
	expect_verdict("socket", AF_PACKET | (1ULL << 32), SOCK_RAW, 0, NOTIFY);
	expect_verdict("socket", AF_UNSPEC | (1ULL << 32), SOCK_STREAM, 0, NOTIFY);
	expect_verdict("socket", AF_INET, SOCK_RAW | (1ULL << 32), 0, NOTIFY);
	/* socketpair creates sockets of its family first: UNIX only. */
	expect_verdict("socketpair", AF_UNIX, SOCK_STREAM, 0, ALLOW);
	expect_verdict("socketpair", AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ALLOW);
	expect_verdict("socketpair", AF_INET, SOCK_STREAM, IPPROTO_MPTCP, NOTIFY);
	expect_verdict("socketpair", AF_NETLINK, SOCK_RAW, 0, NOTIFY);
	expect_verdict("socketpair", 30 /* AF_TIPC */, SOCK_RDM, 0, NOTIFY);
	expect_verdict("socketpair", AF_UNIX | (1ULL << 32), SOCK_STREAM, 0, ALLOW);
}

static void test_ioctl_verdicts(void **state)
{
	expect_verdict("ioctl", 0, TIOCSTI, 0, NOTIFY);
	/* The bypass bubblewrap once had: the kernel ignores the high half. */
	expect_verdict("ioctl", 0, TIOCSTI | (1ULL << 32), 0, NOTIFY);
	expect_verdict("ioctl", 0, TIOCSTI | 0xffffffff00000000ULL, 0, NOTIFY);
	expect_verdict("ioctl", 0, TIOCLINUX, 0, NOTIFY);
	expect_verdict("ioctl", 0, TIOCLINUX | (1ULL << 40), 0, NOTIFY);
	expect_verdict("ioctl", 0, TIOCSETD, 0, NOTIFY);
	expect_verdict("ioctl", 0, TIOCCONS, 0, NOTIFY);
	/* The command's own pty as its controlling terminal (with -t); the
	 * sandbox holds no other terminal, and stealing needs CAP_SYS_ADMIN on
	 * the host. */
	expect_verdict("ioctl", 0, TIOCSCTTY, 0, ALLOW);
	expect_verdict("ioctl", 0, TIOCSCTTY | (1ULL << 32), 1, ALLOW);
	expect_verdict("ioctl", 0, TIOCVHANGUP, 0, NOTIFY);
	expect_verdict("ioctl", 0, TIOCSSERIAL, 0, NOTIFY);
	expect_verdict("ioctl", 0, 0x400454ca, 0, NOTIFY); /* TUNSETIFF, also 'T' */
	expect_verdict("ioctl", 1, TCGETS, 0, ALLOW);
	expect_verdict("ioctl", 1, TCGETS | (1ULL << 32), 0, ALLOW);
	expect_verdict("ioctl", 1, TCSETSW, 0, ALLOW);
	expect_verdict("ioctl", 0, TIOCGWINSZ, 0, ALLOW);
	expect_verdict("ioctl", 3, FIONREAD, 0, ALLOW);
	expect_verdict("ioctl", 3, FIONBIO, 0, ALLOW);
	expect_verdict("ioctl", 3, FIOCLEX, 0, ALLOW);
	expect_verdict("ioctl", 3, TIOCGPTN, 0, ALLOW);
	/* Requests outside the terminal group. */
	expect_verdict("ioctl", 3, 0x8912, 0, ALLOW);	  /* SIOCGIFCONF */
	expect_verdict("ioctl", 3, 0xc0086401, 0, ALLOW); /* a DRM request */
	expect_verdict("ioctl", 3, 0x80086601, 0, ALLOW); /* FS_IOC_GETFLAGS */
	expect_verdict("ioctl", 3, 0x5500, 0, ALLOW);
	expect_verdict("ioctl", 3, 0x5300, 0, ALLOW);
	expect_verdict("ioctl", 3, 0xd400, 0, ALLOW);
	expect_verdict("ioctl", TIOCSTI, 0, 0, ALLOW); /* the request is argument 1 */
}

static void test_namespace_verdicts(void **state)
{
	static const uint64_t ns_flags[] = {CLONE_NEWNS,    CLONE_NEWUTS, CLONE_NEWIPC,
					    CLONE_NEWUSER,  CLONE_NEWPID, CLONE_NEWNET,
					    CLONE_NEWCGROUP};

	expect_verdict("clone", CLONE_NEWUSER | SIGCHLD, 0, 0, NOTIFY);
	expect_verdict("clone", CLONE_NEWUSER | (1ULL << 32), 0, 0, NOTIFY);
	expect_verdict("clone", SIGCHLD, 0, 0, ALLOW);
	expect_verdict("clone", SIGCHLD | (1ULL << 40), 0, 0, ALLOW);
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

static void test_prctl_personality_verdicts(void **state)
{
	expect_verdict("prctl", PR_SET_NAME, 0, 0, ALLOW);
	expect_verdict("prctl", PR_SET_NAME | (1ULL << 32), 0, 0, ALLOW);
	expect_verdict("prctl", PR_SET_NO_NEW_PRIVS, 1, 0, ALLOW);
	expect_verdict("prctl", PR_SET_PDEATHSIG, SIGKILL, 0, ALLOW);
	expect_verdict("prctl", PR_SET_VMA, 0, 0, ALLOW);
	expect_verdict("prctl", PR_SET_MM, 0, 0, NOTIFY);
	expect_verdict("prctl", PR_SET_PTRACER, 0, 0, NOTIFY);
	expect_verdict("prctl", PR_SET_SYSCALL_USER_DISPATCH, 0, 0, NOTIFY);
	expect_verdict("prctl", PR_SCHED_CORE, 0, 0, NOTIFY);
	expect_verdict("prctl", PR_SET_MEMORY_MERGE, 1, 0, NOTIFY);
	expect_verdict("prctl", PR_SET_SECUREBITS, 0, 0, NOTIFY);
	expect_verdict("prctl", PR_SET_MM | (1ULL << 32), 0, 0, NOTIFY);

	expect_verdict("personality", PER_LINUX, 0, 0, ALLOW);
	expect_verdict("personality", PER_LINUX32, 0, 0, ALLOW);
	expect_verdict("personality", 0xffffffff, 0, 0, ALLOW);
	expect_verdict("personality", UINT64_MAX, 0, 0, ALLOW);
	expect_verdict("personality", ADDR_NO_RANDOMIZE, 0, 0, NOTIFY);
	expect_verdict("personality", PER_LINUX | ADDR_NO_RANDOMIZE, 0, 0, NOTIFY);
	expect_verdict("personality", READ_IMPLIES_EXEC, 0, 0, NOTIFY);
	expect_verdict("personality", ADDR_NO_RANDOMIZE | (1ULL << 32), 0, 0, NOTIFY);
}

/* Limits, priorities and scheduling of the caller only: on another
 * process (a session's init, another exec) they would change what it and
 * everything it starts later gets. */
static void test_self_only_verdicts(void **state)
{
	static const char *const by_pid[] = {"prlimit64", "sched_setaffinity", "sched_setparam",
					     "sched_setscheduler", "sched_setattr"};

	(void)state;
	for (size_t i = 0; i < AL_ARRAY_SIZE(by_pid); i++) {
		expect_verdict(by_pid[i], 0, RLIMIT_NOFILE, 0, ALLOW);
		expect_verdict(by_pid[i], 1, RLIMIT_NOFILE, 0, NOTIFY);
		expect_verdict(by_pid[i], 1234, 0, 0, NOTIFY);
		expect_verdict(by_pid[i], 1ULL << 32, 0, 0, ALLOW); /* pid_t: low half */
		expect_verdict(by_pid[i], (1ULL << 32) | 1, 0, 0, NOTIFY);
	}
	expect_verdict("setpriority", PRIO_PROCESS, 0, 19, ALLOW);
	expect_verdict("setpriority", PRIO_PROCESS, 1, 19, NOTIFY);
	expect_verdict("setpriority", PRIO_PGRP, 0, 19, NOTIFY);
	expect_verdict("setpriority", PRIO_USER, 0, 19, NOTIFY); /* every process of the uid */
	expect_verdict("ioprio_set", 1, 0, 0, ALLOW);		 /* IOPRIO_WHO_PROCESS, self */
	expect_verdict("ioprio_set", 1, 1, 0, NOTIFY);
	expect_verdict("ioprio_set", 3, 0, 0, NOTIFY); /* IOPRIO_WHO_USER */
	/* The reads stay open. */
	expect_verdict("getpriority", PRIO_USER, 1, 0, ALLOW);
	expect_verdict("sched_getaffinity", 1, 128, 0, ALLOW);
	expect_verdict("setrlimit", RLIMIT_NOFILE, 0, 0, ALLOW);
}

static void test_other_abis(void **state)
{
	static const uint64_t zeros[6] = {0};
	int read_nr = nr_of("read");
	int write_nr = nr_of("write");
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

static void test_unknown_numbers_notified(void **state)
{
	static const uint64_t zeros[6] = {0};
	static const char *unnamed[] = {"afs_syscall", "tuxcall", "security", "vserver"};

	/* Default deny: numbers the table does not know go to the supervisor,
	 * which answers ENOSYS. */
	for (uint32_t nr = 1000; nr < 1024; nr++)
		assert_int_equal(run_call(AUDIT_ARCH_X86_64, nr, zeros), NOTIFY);
	for (size_t i = 0; i < AL_ARRAY_SIZE(unnamed); i++) {
		assert_false(table_names(unnamed[i]));
		expect_verdict(unnamed[i], 0, 0, 0, NOTIFY);
	}
}

static void expect_answer(int nr, int want_errno, const char *want_name)
{
	const char *name = "unset";
	int e = al_seccomp_answer(nr, &name);

	if (e != want_errno)
		fail_msg("answer for nr %d: errno %d, expected %d", nr, e, want_errno);
	if (want_name ? !name || strcmp(name, want_name) != 0 : name != NULL)
		fail_msg("answer for nr %d: name %s, expected %s", nr, name ? name : "NULL",
			 want_name ? want_name : "NULL");
}

/* The supervisor's side: EPERM for a call the table names, ENOSYS for one
 * it does not, with the name libseccomp knows. */
static void test_supervisor_answer(void **state)
{
	expect_answer(nr_of("mount"), EPERM, "mount");
	expect_answer(nr_of("modify_ldt"), EPERM, "modify_ldt");
	expect_answer(nr_of("socket"), EPERM, "socket"); /* allowed only in part */
	expect_answer(nr_of("ioctl"), EPERM, "ioctl");
	expect_answer(nr_of("clone"), EPERM, "clone");
	expect_answer(nr_of("afs_syscall"), ENOSYS, "afs_syscall");
	expect_answer(1000, ENOSYS, NULL);
	expect_answer(-1, ENOSYS, NULL);
	expect_answer(INT32_MAX, ENOSYS, NULL);

	/* Every number agrees with the table and with libseccomp's names. */
	for (int nr = 0; nr < MAX_NR; nr++) {
		char *lib = seccomp_syscall_resolve_num_arch(SCMP_ARCH_X86_64, nr);
		int want = ENOSYS;
		if (row_end[nr] > 0)
			want = rules[row_first[nr]].errno_value;
		expect_answer(nr, want, lib);
		free(lib);
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

/* A kill-by-default allowlist (gateway/seccomp.c), through the same
 * interpreter: the generated program (built, built_len) is the table's,
 * every number and the vectors of every conditional row get what the
 * table says, anything else kills; then checks() asks about single calls.
 * Returns how many numbers it allows with zero arguments. */
static size_t check_kill_table(const struct al_seccomp_rule_info *t, size_t n,
			       const struct sock_filter *built, unsigned short built_len,
			       void (*checks)(void))
{
	struct sock_fprog saved_prog = prog, gw;
	const struct al_seccomp_rule_info *saved_rules = rules;
	size_t saved_n = n_rules;
	int *saved_nr = rule_nr;
	static size_t saved_first[MAX_NR], saved_end[MAX_NR];
	struct al_error err = {0};
	uint64_t vecs[MAX_VECTORS][6];
	static const uint64_t zeros[6] = {0};
	size_t allowed = 0;

	assert_int_equal(al_seccomp_compile_table(t, n, AL_SECCOMP_DEFAULT_KILL, &gw, &err), 0);
	assert_int_equal(built_len, gw.len);
	assert_memory_equal(built, gw.filter, gw.len * sizeof(*gw.filter));
	memcpy(saved_first, row_first, sizeof(row_first));
	memcpy(saved_end, row_end, sizeof(row_end));
	memset(row_first, 0, sizeof(row_first));
	memset(row_end, 0, sizeof(row_end));
	prog = gw;
	rules = t;
	n_rules = n;
	rule_nr = calloc(n, sizeof(*rule_nr));
	assert_non_null(rule_nr);
	for (size_t i = 0; i < n; i++) {
		int nr = seccomp_syscall_resolve_name_arch(SCMP_ARCH_X86_64, t[i].syscall);
		assert_true(nr >= 0 && nr < MAX_NR); /* every row names a real call */
		rule_nr[i] = nr;
		if (row_end[nr] == 0)
			row_first[nr] = i;
		row_end[nr] = i + 1;
	}
	default_action = SECCOMP_RET_KILL_PROCESS;
	for (uint32_t nr = 0; nr < MAX_NR; nr++) {
		allowed += check_call(nr, zeros) == ALLOW;
		for (size_t i = 0; i < n; i++) {
			size_t k = vectors_for_row(&t[i], vecs);
			while (k--)
				check_call(nr, vecs[k]);
		}
	}
	/* Another ABI never gets in. */
	assert_int_equal(run_call(AUDIT_ARCH_I386, 11, zeros) & SECCOMP_RET_ACTION_FULL,
			 SECCOMP_RET_KILL_PROCESS);
	checks();
	free(rule_nr);
	free(gw.filter);
	prog = saved_prog;
	rules = saved_rules;
	n_rules = saved_n;
	rule_nr = saved_nr;
	memcpy(row_first, saved_first, sizeof(row_first));
	memcpy(row_end, saved_end, sizeof(row_end));
	default_action = SECCOMP_RET_USER_NOTIF;
	return allowed;
}

/* The calls an attacker in the gateway would want first. */
static void gateway_checks(void)
{
	const uint32_t kill = SECCOMP_RET_KILL_PROCESS;
	expect_verdict("execve", 0, 0, 0, kill);
	expect_verdict("execveat", 0, 0, 0, kill);
	expect_verdict("ptrace", 0, 0, 0, kill);
	expect_verdict("kill", 1, SIGKILL, 0, kill);
	expect_verdict("tgkill", 1, 1, SIGKILL, kill);
	expect_verdict("process_vm_readv", 0, 0, 0, kill);
	expect_verdict("clone", 0, 0, 0, kill);
	expect_verdict("unshare", 0, 0, 0, kill);
	expect_verdict("setns", 0, 0, 0, kill);
	expect_verdict("mount", 0, 0, 0, kill);
	expect_verdict("bind", 3, 0, 0, kill);
	expect_verdict("socket", AF_UNIX, SOCK_STREAM, 0, kill);
	expect_verdict("socket", AF_NETLINK, SOCK_RAW, 0, kill);
	expect_verdict("socket", AF_PACKET, SOCK_RAW, 0, kill);
	expect_verdict("socket", AF_INET, SOCK_STREAM, 0, ALLOW);
	expect_verdict("socket", AF_INET6, SOCK_DGRAM, 0, ALLOW);
	expect_verdict("openat", (uint64_t)AT_FDCWD, 0, O_RDONLY, ALLOW);
	expect_verdict("openat", (uint64_t)AT_FDCWD, 0, O_WRONLY | O_CREAT, kill);
	expect_verdict("openat", (uint64_t)AT_FDCWD, 0, O_RDWR, kill);
	expect_verdict("mmap", 0, 4096, PROT_READ | PROT_WRITE, ALLOW);
	expect_verdict("mmap", 0, 4096, PROT_READ | PROT_EXEC, kill);
	expect_verdict("mprotect", 0, 4096, PROT_EXEC, kill);
	expect_verdict("splice", 0, 0, 0, ALLOW);
	expect_verdict("accept4", 0, 0, 0, ALLOW);
	expect_verdict("connect", 0, 0, 0, ALLOW);
	expect_verdict("fcntl", 0, F_SETFL, 0, ALLOW);
	expect_verdict("fcntl", 0, F_SETOWN, 0, kill);
	expect_verdict("ioctl", 0, TIOCSTI, 0, kill);
	expect_verdict("openat", (uint64_t)AT_FDCWD, 0, O_RDONLY | O_TRUNC, kill);
	expect_verdict("openat", (uint64_t)AT_FDCWD, 0, O_RDONLY | O_CREAT, kill);
	expect_verdict("openat", (uint64_t)AT_FDCWD, 0, O_RDWR | O_TMPFILE, kill);
	expect_verdict("openat", (uint64_t)AT_FDCWD, 0, O_RDONLY | O_DIRECTORY | O_CLOEXEC, ALLOW);
	expect_verdict("socket", AF_INET, SOCK_RAW, IPPROTO_RAW, kill);
	expect_verdict("socket", AF_INET, SOCK_STREAM, IPPROTO_SCTP, kill);
	expect_verdict("setsockopt", 3, IPPROTO_TCP, TCP_NODELAY, ALLOW);
	expect_verdict("setsockopt", 3, IPPROTO_TCP, 31 /* TCP_ULP */, kill);
	expect_verdict("setsockopt", 3, SOL_SOCKET, SO_ATTACH_FILTER, kill);
	expect_verdict("setsockopt", 3, SOL_SOCKET, SO_LINGER, ALLOW);
}

static void test_gateway_allowlist(void **state)
{
	size_t n;
	const struct al_seccomp_rule_info *t = al_gateway_seccomp_table(&n);

	(void)state;
	size_t allowed = check_kill_table(t, n, al_gateway_seccomp_program,
					  al_gateway_seccomp_program_len, gateway_checks);
	print_message("gateway: %zu calls allowed, %zu rows\n", allowed, n);
	assert_true(allowed > 30 && allowed < 80);
}

/* The decider's connector: one Unix stream socket at a time, connect,
 * pass it on; nothing else, not even a file or another kind of socket. */
static void connector_checks(void)
{
	const uint32_t kill = SECCOMP_RET_KILL_PROCESS;
	expect_verdict("socket", AF_UNIX, SOCK_STREAM, 0, ALLOW);
	expect_verdict("socket", AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, ALLOW);
	expect_verdict("socket", AF_UNIX, SOCK_DGRAM, 0, kill);
	expect_verdict("socket", AF_UNIX, SOCK_SEQPACKET, 0, kill);
	expect_verdict("socket", AF_INET, SOCK_STREAM, 0, kill);
	expect_verdict("socket", AF_INET6, SOCK_STREAM, 0, kill);
	expect_verdict("socket", AF_NETLINK, SOCK_RAW, 0, kill);
	expect_verdict("connect", 3, 0, 0, ALLOW);
	expect_verdict("sendmsg", 3, 0, 0, ALLOW);
	expect_verdict("recvfrom", 3, 0, 0, ALLOW);
	expect_verdict("close", 4, 0, 0, ALLOW);
	expect_verdict("openat", (uint64_t)AT_FDCWD, 0, O_RDONLY, kill);
	expect_verdict("read", 0, 0, 0, kill);
	expect_verdict("write", 1, 0, 0, kill);
	expect_verdict("sendto", 3, 0, 0, kill);
	expect_verdict("recvmsg", 3, 0, 0, kill);
	expect_verdict("accept4", 3, 0, 0, kill);
	expect_verdict("bind", 3, 0, 0, kill);
	expect_verdict("mmap", 0, 4096, PROT_READ | PROT_WRITE, kill);
	expect_verdict("execve", 0, 0, 0, kill);
	expect_verdict("clone", 0, 0, 0, kill);
	expect_verdict("kill", 1, SIGKILL, 0, kill);
	expect_verdict("ptrace", 0, 0, 0, kill);
	expect_verdict("prctl", 0, 0, 0, kill);
}

static void test_connector_allowlist(void **state)
{
	size_t n;
	const struct al_seccomp_rule_info *t = al_connector_seccomp_table(&n);

	(void)state;
	size_t allowed = check_kill_table(t, n, al_connector_seccomp_program,
					  al_connector_seccomp_program_len, connector_checks);
	print_message("connector: %zu calls allowed, %zu rows\n", allowed, n);
	assert_true(allowed >= 8 && allowed <= 12);
}

int main(void)
{
	/* clang-format off */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_interpreter_self_check),
		cmocka_unit_test(test_program_shape),
		cmocka_unit_test(test_installed_program_matches),
		cmocka_unit_test(test_table_rows_resolve),
		cmocka_unit_test(test_no_call_mixes_kinds),
		cmocka_unit_test(test_explicit_verdicts),
		cmocka_unit_test(test_setid_modes),
		cmocka_unit_test(test_socket_verdicts),
		cmocka_unit_test(test_ioctl_verdicts),
		cmocka_unit_test(test_namespace_verdicts),
		cmocka_unit_test(test_prctl_personality_verdicts),
		cmocka_unit_test(test_self_only_verdicts),
		cmocka_unit_test(test_other_abis),
		cmocka_unit_test(test_unknown_numbers_notified),
		cmocka_unit_test(test_supervisor_answer),
		cmocka_unit_test(test_every_syscall_matches_table),
		cmocka_unit_test(test_gateway_allowlist),
		cmocka_unit_test(test_connector_allowlist),
	};

	/* clang-format on */

	return cmocka_run_group_tests(tests, setup, teardown);
}
