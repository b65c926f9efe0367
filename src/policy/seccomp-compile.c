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

static int add_row(scmp_filter_ctx ctx, const struct al_seccomp_rule_info *r, struct al_error *err)
{
	int nr = seccomp_syscall_resolve_name(r->syscall);
	uint32_t act = r->notify ? SCMP_ACT_NOTIFY : SCMP_ACT_ERRNO(r->errno_value);
	int rc;

	if (nr == __NR_SCMP_ERROR)
		return 0; /* not on this architecture (e.g. uselib on newer ABIs) */
	switch (r->cond) {
	case AL_SECCOMP_ALWAYS:
		rc = seccomp_rule_add(ctx, act, nr, 0);
		break;
	case AL_SECCOMP_ARG_MASKED_EQ:
		rc = seccomp_rule_add(ctx, act, nr, 1,
				      SCMP_CMP(r->arg, SCMP_CMP_MASKED_EQ, r->mask, r->value));
		break;
	case AL_SECCOMP_ARG_GT:
		rc = seccomp_rule_add(ctx, act, nr, 1, SCMP_CMP(r->arg, SCMP_CMP_GT, r->value));
		break;
	default:
		rc = -EINVAL;
	}
	if (rc < 0)
		return al_error_setsys(err, -rc, "seccomp: adding rule for %s", r->syscall);
	return 0;
}

int al_seccomp_compile(struct sock_fprog *ret, const struct al_seccomp_rule_info **ret_rules,
		       size_t *ret_n, struct al_error *err)
{
	size_t n;
	const struct al_seccomp_rule_info *table = al_seccomp_table(&n);
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	_cleanup_close_ int fd = -1;
	_cleanup_free_ void *buf = NULL;
	off_t size;
	int r = 0;

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
	*ret_rules = table;
	*ret_n = n;
out:
	seccomp_release(ctx);
	return r;
}
