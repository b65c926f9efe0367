/* QEMU asks, at its start, for system calls the native layer denies
 * (io_uring for its event loop, memfd_create for a check): each would be
 * counted and reported as a denial of the run, though QEMU falls back
 * without them. The VMM's child answers them ENOSYS itself before it
 * execs QEMU: a filter's errno outranks the native layer's notification,
 * so the kernel never asks the supervisor, and nothing else changes (the
 * native filter still holds every other call). */
#include <errno.h>
#include <seccomp.h>

#include "backend/microvm/vmm.h"

int al_vmm_quiet_filter(void)
{
	static const char *const calls[] = {"io_uring_setup", "io_uring_enter", "io_uring_register",
					    "memfd_create"};
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	int r = ctx ? 0 : -ENOMEM;

	for (size_t i = 0; r == 0 && i < sizeof(calls) / sizeof(*calls); i++) {
		int nr = seccomp_syscall_resolve_name(calls[i]);
		if (nr != __NR_SCMP_ERROR)
			r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), nr, 0);
	}
	if (r == 0)
		r = seccomp_load(ctx);
	seccomp_release(ctx);
	return r;
}
