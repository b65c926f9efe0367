/* A bundle's linux.seccomp compiled to a BPF program with libseccomp
 * (config.h al_oci_seccomp): stacked on airlock's own allowlist in each of
 * the container's processes, so that a call passes only where both let it
 * (the kernel takes the stricter answer). What the profile cannot ask of a
 * sandbox is refused, naming it: a notification listener (the supervisor
 * holds the sandbox's one). Syscall names this libseccomp does not know are
 * left out, as other runtimes do. */
#include <errno.h>
#include <linux/filter.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "oci/config.h"

static int action_of(const char *name, bool has_errno, uint32_t errno_ret, uint32_t *ret)
{
	uint32_t e = has_errno ? errno_ret : EPERM;

	if (strcmp(name, "SCMP_ACT_ALLOW") == 0)
		*ret = SCMP_ACT_ALLOW;
	else if (strcmp(name, "SCMP_ACT_ERRNO") == 0)
		*ret = SCMP_ACT_ERRNO(e);
	else if (strcmp(name, "SCMP_ACT_KILL") == 0 || strcmp(name, "SCMP_ACT_KILL_THREAD") == 0)
		*ret = SCMP_ACT_KILL_THREAD;
	else if (strcmp(name, "SCMP_ACT_KILL_PROCESS") == 0)
		*ret = SCMP_ACT_KILL_PROCESS;
	else if (strcmp(name, "SCMP_ACT_TRAP") == 0)
		*ret = SCMP_ACT_TRAP;
	else if (strcmp(name, "SCMP_ACT_TRACE") == 0)
		*ret = SCMP_ACT_TRACE(e);
	else if (strcmp(name, "SCMP_ACT_LOG") == 0)
		*ret = SCMP_ACT_LOG;
	else
		return -1;
	return 0;
}

static int op_of(const char *name, enum scmp_compare *ret)
{
	static const struct {
		const char *name;
		enum scmp_compare op;
	} ops[] = {{"SCMP_CMP_NE", SCMP_CMP_NE},
		   {"SCMP_CMP_LT", SCMP_CMP_LT},
		   {"SCMP_CMP_LE", SCMP_CMP_LE},
		   {"SCMP_CMP_EQ", SCMP_CMP_EQ},
		   {"SCMP_CMP_GE", SCMP_CMP_GE},
		   {"SCMP_CMP_GT", SCMP_CMP_GT},
		   {"SCMP_CMP_MASKED_EQ", SCMP_CMP_MASKED_EQ}};

	for (size_t i = 0; i < AL_ARRAY_SIZE(ops); i++)
		if (strcmp(name, ops[i].name) == 0) {
			*ret = ops[i].op;
			return 0;
		}
	return -1;
}

/* "SCMP_ARCH_X86_64" → libseccomp's token, or 0 when unknown here. */
static uint32_t arch_of(const char *name)
{
	char low[64];
	size_t i = 0;

	if (strncmp(name, "SCMP_ARCH_", 10) != 0)
		return 0;
	for (const char *c = name + 10; *c && i + 1 < sizeof(low); c++)
		low[i++] = (char)(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c);
	low[i] = '\0';
	return seccomp_arch_resolve_name(low);
}

/* One rule: all its argument conditions together, or (libseccomp takes
 * one condition per argument) each alone as runc does. */
static int add_rule(scmp_filter_ctx ctx, uint32_t action, int nr,
		    const struct al_oci_syscall_rule *r)
{
	struct scmp_arg_cmp cmp[6];
	size_t n = r->n_args < 6 ? r->n_args : 6;

	for (size_t i = 0; i < n; i++) {
		enum scmp_compare op;
		if (op_of(r->args[i].op, &op) < 0)
			return -EINVAL;
		cmp[i] = (struct scmp_arg_cmp){r->args[i].index, op, r->args[i].value,
					       r->args[i].value_two};
	}
	int e = seccomp_rule_add_array(ctx, action, nr, (unsigned)n, n ? cmp : NULL);
	if (e == -EINVAL && n > 1) {
		for (size_t i = 0;
		     i < n && (e = seccomp_rule_add_array(ctx, action, nr, 1, &cmp[i])) == 0; i++)
			;
	}
	return e;
}

int al_oci_seccomp(const struct al_oci_config *c, struct sock_filter **ret, size_t *len,
		   struct al_errors *errs)
{
	uint32_t dflt;
	int fd = -1, e;
	size_t before = al_errors_count(errs);

	*ret = NULL;
	*len = 0;
	if (!c->has_seccomp)
		return 0;
	if (action_of(c->seccomp_default_action, c->has_seccomp_default_errno,
		      c->seccomp_default_errno, &dflt) < 0)
		return al_errors_add(errs, EINVAL, "config.json", "linux.seccomp.defaultAction",
				     "\"%s\": not an action airlock can apply (a notification "
				     "listener is the supervisor's)",
				     c->seccomp_default_action);
	if (c->seccomp_listener_path)
		return al_errors_add(errs, EPERM, "config.json", "linux.seccomp.listenerPath",
				     "the sandbox's seccomp listener is airlock's own");
	scmp_filter_ctx ctx = seccomp_init(dflt);
	if (!ctx)
		return al_errors_add(errs, ENOMEM, "config.json", "linux.seccomp",
				     "seccomp_init failed");
	for (size_t i = 0; c->seccomp_architectures && c->seccomp_architectures[i]; i++) {
		uint32_t arch = arch_of(c->seccomp_architectures[i]);
		if (arch && (e = seccomp_arch_add(ctx, arch)) < 0 && e != -EEXIST)
			al_errors_add(errs, -e, "config.json", "linux.seccomp.architectures",
				      "%s: %s", c->seccomp_architectures[i], strerror(-e));
	}
	for (size_t i = 0; i < c->n_seccomp_syscalls; i++) {
		const struct al_oci_syscall_rule *r = &c->seccomp_syscalls[i];
		char where[64];
		uint32_t action;
		snprintf(where, sizeof(where), "linux.seccomp.syscalls[%zu]", i);
		if (action_of(r->action, r->has_errno, r->errno_ret, &action) < 0) {
			al_errors_add(errs, EINVAL, "config.json", where,
				      "action \"%s\": not one airlock can apply", r->action);
			continue;
		}
		if (action == dflt)
			continue; /* libseccomp takes no rule that is the default */
		for (size_t k = 0; r->names && r->names[k]; k++) {
			int nr = seccomp_syscall_resolve_name(r->names[k]);
			if (nr == __NR_SCMP_ERROR)
				continue; /* unknown to this libseccomp: as runc does */
			if ((e = add_rule(ctx, action, nr, r)) < 0)
				al_errors_add(errs, -e, "config.json", where, "%s: %s", r->names[k],
					      strerror(-e));
		}
	}
	if (al_errors_count(errs) > before)
		goto out;
	fd = memfd_create("airlock-oci-seccomp", MFD_CLOEXEC);
	if (fd < 0 || (e = seccomp_export_bpf(ctx, fd)) < 0) {
		al_errors_add(errs, fd < 0 ? errno : -e, "config.json", "linux.seccomp",
			      "exporting the program failed");
		goto out;
	}
	off_t size = lseek(fd, 0, SEEK_END);
	if (size <= 0 || size % sizeof(struct sock_filter) ||
	    size / sizeof(struct sock_filter) > BPF_MAXINSNS) {
		al_errors_add(errs, E2BIG, "config.json", "linux.seccomp",
			      "the program is over %d instructions", BPF_MAXINSNS);
		goto out;
	}
	*ret = xmalloc((size_t)size);
	if (pread(fd, *ret, (size_t)size, 0) != size) {
		free(*ret);
		*ret = NULL;
		al_errors_add(errs, EIO, "config.json", "linux.seccomp",
			      "reading the program back");
		goto out;
	}
	*len = (size_t)size / sizeof(struct sock_filter);
out:
	if (fd >= 0)
		close(fd);
	seccomp_release(ctx);
	return al_errors_count(errs) > before ? -EINVAL : 0;
}
