/* Lowering of the seccomp table (seccomp.c) to BPF with libseccomp. Used
 * by the build-time generator and by tests; a run needs none of it. */
#include "policy/seccomp.h"

#include <errno.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/util.h"

static int bad_row(struct al_error *err, size_t i, const struct al_seccomp_rule_info *r,
		   const char *what)
{
	return al_error_set(err, EINVAL, "seccomp table row %zu (%s): %s", i, r->syscall, what);
}

static int check_row(size_t i, const struct al_seccomp_rule_info *r, struct al_error *err)
{
	unsigned args = 0;

	if (r->errno_value <= 0 || r->errno_value > 4095)
		return bad_row(err, i, r, "errno out of range");
	if (r->action != AL_SECCOMP_ALLOW && r->action != AL_SECCOMP_ERRNO &&
	    r->action != AL_SECCOMP_DENY)
		return bad_row(err, i, r, "unknown action");
	if (r->action != AL_SECCOMP_ALLOW && (r->n_conds != 0 || !r->why))
		return bad_row(err, i, r, "errno and deny rows take a reason and no condition");
	if (r->n_conds > AL_SECCOMP_MAX_CONDS)
		return bad_row(err, i, r, "more than three conditions");
	if (r->n_conds > 0 && !r->why)
		return bad_row(err, i, r, "a condition needs a readable why");
	for (unsigned k = 0; k < r->n_conds; k++) {
		const struct al_seccomp_cond *c = &r->conds[k];
		if (c->arg >= 6 || (args & (1u << c->arg)))
			return bad_row(err, i, r, "conditions must be on distinct arguments 0-5");
		args |= 1u << c->arg;
		if (c->mask == 0 || c->mask >> 32 != 0)
			return bad_row(err, i, r, "a mask must be non-zero and within 32 bits");
		if (c->value & ~c->mask)
			return bad_row(err, i, r,
				       "a value has bits outside its mask (never matches)");
	}
	return 0;
}

/* The rules at the top of seccomp.c: rows of one call adjacent, of one
 * action and errno; one row for an errno, deny or unconditional allow. */
static int check_table(const struct al_seccomp_rule_info *t, size_t n, struct al_error *err)
{
	int r;

	for (size_t i = 0; i < n; i++) {
		if ((r = check_row(i, &t[i], err)) < 0)
			return r;
		if (i > 0 && strcmp(t[i - 1].syscall, t[i].syscall) == 0) {
			if (t[i].action != t[i - 1].action ||
			    t[i].errno_value != t[i - 1].errno_value)
				return bad_row(err, i, &t[i],
					       "rows of one call mix actions or errnos");
			if (t[i].action != AL_SECCOMP_ALLOW || t[i].n_conds == 0 ||
			    t[i - 1].n_conds == 0)
				return bad_row(err, i, &t[i],
					       "only conditional allow rows may repeat a call");
			continue;
		}
		for (size_t j = 0; j + 1 < i; j++)
			if (strcmp(t[j].syscall, t[i].syscall) == 0)
				return bad_row(err, i, &t[i],
					       "the rows of one call must be adjacent");
	}
	return 0;
}

/* Deny rows need no BPF: refusing through the supervisor is the default. */
static int add_row(scmp_filter_ctx ctx, const struct al_seccomp_rule_info *r, struct al_error *err)
{
	struct scmp_arg_cmp cmp[AL_SECCOMP_MAX_CONDS] = {{0}};
	int nr = seccomp_syscall_resolve_name(r->syscall);
	int rc = 0;

	/* Unknown to this libseccomp, or not on this architecture (vm86):
	 * the call answers ENOSYS. */
	if (nr < 0)
		return 0;
	switch (r->action) {
	case AL_SECCOMP_ALLOW:
		for (unsigned k = 0; k < r->n_conds; k++)
			cmp[k] = SCMP_CMP(r->conds[k].arg, SCMP_CMP_MASKED_EQ, r->conds[k].mask,
					  r->conds[k].value);
		rc = seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, nr, r->n_conds, cmp);
		break;
	case AL_SECCOMP_ERRNO:
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO((uint32_t)r->errno_value), nr, 0);
		break;
	case AL_SECCOMP_DENY:
		break;
	}
	if (rc < 0)
		return al_error_setsys(err, -rc, "seccomp: adding rule for %s (%s)", r->syscall,
				       r->why ? r->why : "always");
	return 0;
}

int al_seccomp_compile_table(const struct al_seccomp_rule_info *table, size_t n,
			     enum al_seccomp_default dflt, struct sock_fprog *ret,
			     struct al_error *err)
{
	scmp_filter_ctx ctx = NULL;
	_cleanup_close_ int fd = -1;
	_cleanup_free_ void *buf = NULL;
	off_t size;
	int r;

	if ((r = check_table(table, n, err)) < 0)
		return r;
	/* Default deny: whatever no row allows goes to the supervisor, which
	 * answers EPERM or ENOSYS (al_seccomp_answer) and audits it; or, for
	 * the gateway process, kills it. */
	ctx = seccomp_init(dflt == AL_SECCOMP_DEFAULT_NOTIFY ? SCMP_ACT_NOTIFY
							     : SCMP_ACT_KILL_PROCESS);
	if (!ctx)
		return al_error_set(err, ENOMEM, "seccomp: seccomp_init failed");
	/* A call through another ABI (int 0x80, x32) could dodge every rule:
	 * kill the process instead. */
	r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	if (r < 0) {
		al_error_setsys(err, -r, "seccomp: setting the bad-architecture action");
		goto out;
	}
	/* A binary tree over syscall numbers instead of a linear chain: fewer
	 * instructions per call, and a much cheaper attach (the kernel
	 * pre-evaluates the filter for every syscall to build its cache). */
	r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
	if (r < 0) {
		al_error_setsys(err, -r, "seccomp: enabling the binary-tree layout");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		if ((r = add_row(ctx, &table[i], err)) < 0)
			goto out;
	}
	fd = memfd_create("airlock-seccomp", MFD_CLOEXEC);
	if (fd < 0) {
		r = al_error_setsys(err, errno, "seccomp: memfd_create");
		goto out;
	}
	r = seccomp_export_bpf(ctx, fd);
	if (r < 0) {
		al_error_setsys(err, -r, "seccomp: exporting the BPF program");
		goto out;
	}
	size = lseek(fd, 0, SEEK_END);
	if (size <= 0 || size % sizeof(struct sock_filter) != 0 ||
	    size / sizeof(struct sock_filter) > BPF_MAXINSNS) {
		r = al_error_set(err, EINVAL, "seccomp: exported program has a bad size (%lld)",
				 (long long)size);
		goto out;
	}
	buf = xmalloc((size_t)size);
	if (pread(fd, buf, (size_t)size, 0) != size) {
		r = al_error_setsys(err, errno ? errno : EIO, "seccomp: reading the program back");
		goto out;
	}
	ret->len = (unsigned short)(size / sizeof(struct sock_filter));
	ret->filter = TAKE_PTR(buf);
out:
	seccomp_release(ctx);
	return r;
}

int al_seccomp_compile(struct sock_fprog *ret, const struct al_seccomp_rule_info **ret_rules,
		       size_t *ret_n, struct al_error *err)
{
	size_t n;
	const struct al_seccomp_rule_info *table = al_seccomp_table(&n);
	int r = al_seccomp_compile_table(table, n, AL_SECCOMP_DEFAULT_NOTIFY, ret, err);

	if (r == 0) {
		*ret_rules = table;
		*ret_n = n;
	}
	return r;
}
