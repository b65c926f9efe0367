/* The kernel-memory bound (kmem.h). Pure: everything comes from the plan
 * and the socket-buffer mode the caller found. */
#include "policy/kmem.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "core/util.h"

uint64_t al_kmem_socket_limit(const struct al_plan *p)
{
	/* socket_stop is twice a page-aligned value (plan.c) */
	return p->socket_stop / 2;
}

uint64_t al_kmem_bound(const struct al_plan *p, enum al_sockmem mode)
{
	switch (mode) {
	case AL_SOCKMEM_LIMITED:
		return p->socket_stop;
	case AL_SOCKMEM_CHARGED:
		/* connections waiting in an accept queue are charged to no
		 * cgroup on v2 either: the supervisor counts and stops them */
		return p->socket_stop;
	case AL_SOCKMEM_NONE:
		break;
	}
	return AL_KMEM_UNBOUNDED;
}

const char al_kmem_unbounded_why[] =
    "this host's memory cgroup does not count socket buffers (cgroup v1 without "
    "memory.kmem.tcp.limit_in_bytes, or a kernel booted with cgroup.memory=nosocket "
    "or nokmem)";

int al_kmem_admit(const struct al_plan *p, enum al_sockmem mode, bool *ret_unbounded,
		  struct al_error *err)
{
	*ret_unbounded = mode == AL_SOCKMEM_NONE;
	if (mode != AL_SOCKMEM_NONE || p->kernel_memory_best_effort)
		return 0;
	return al_error_set(err, EOPNOTSUPP,
			    "refusing to run: %s, so a sandbox could pin host memory past its "
			    "memory limit; set limits.kernel_memory to \"best-effort\" to run "
			    "anyway",
			    al_kmem_unbounded_why);
}

static void mb(char *buf, size_t len, uint64_t v)
{
	if (v % (1u << 20) == 0)
		snprintf(buf, len, "%" PRIu64 "M", v >> 20);
	else
		snprintf(buf, len, "%" PRIu64 "K", (v + 1023) >> 10);
}

void al_kmem_describe(const struct al_plan *p, enum al_sockmem mode, char *buf, size_t len)
{
	char lim[32], stop[32];

	mb(lim, sizeof(lim), al_kmem_socket_limit(p));
	mb(stop, sizeof(stop), p->socket_stop);
	switch (mode) {
	case AL_SOCKMEM_LIMITED:
		snprintf(buf, len,
			 "at most %s outside the cgroup (socket buffers: kernel limit %s in "
			 "memory.kmem.tcp, which each socket may pass by one buffer, read every "
			 "2 ms; connections not yet accepted, charged to no cgroup, counted every "
			 "20 ms; the run is stopped at %s)",
			 stop, lim, stop);
		return;
	case AL_SOCKMEM_CHARGED:
		snprintf(buf, len,
			 "at most %s outside the cgroup (socket buffers are charged to "
			 "memory.max, connections not yet accepted to no cgroup: those are "
			 "counted every 20 ms and the run is stopped at %s)",
			 stop, stop);
		return;
	case AL_SOCKMEM_NONE:
		break;
	}
	snprintf(buf, len, "UNBOUNDED outside the cgroup (socket buffers are not counted here); %s",
		 p->kernel_memory_best_effort
		     ? "runs anyway: limits.kernel_memory is \"best-effort\""
		     : "runs refuse unless limits.kernel_memory is \"best-effort\"");
}

static json_t *bytes_or_null(bool have, uint64_t v)
{
	return have ? json_integer((json_int_t)v) : json_null();
}

json_t *al_kmem_json(const struct al_plan *p, enum al_sockmem mode,
		     const struct al_cgroup_stats *st)
{
	uint64_t bound = al_kmem_bound(p, mode);
	bool v1 = mode == AL_SOCKMEM_LIMITED;
	json_t *o = json_object();

	json_object_set_new(o, "mode",
			    json_string(p->kernel_memory_best_effort ? "best-effort" : "enforced"));
	json_object_set_new(o, "sockets", json_string(al_sockmem_name(mode)));
	json_object_set_new(o, "bound_bytes", bytes_or_null(bound != AL_KMEM_UNBOUNDED, bound));
	json_object_set_new(o, "socket_limit_bytes", bytes_or_null(v1, al_kmem_socket_limit(p)));
	json_object_set_new(o, "stop_bytes",
			    bytes_or_null(mode != AL_SOCKMEM_NONE, p->socket_stop));
	if (st)
		json_object_set_new(o, "socket_peak_bytes",
				    bytes_or_null(mode != AL_SOCKMEM_NONE, st->socket_peak));
	json_object_set_new(o, "rlimits",
			    json_pack("{s:I, s:I, s:I}", "msgqueue_bytes",
				      (json_int_t)p->msgqueue_bytes, "sigpending",
				      (json_int_t)p->sigpending, "memlock_bytes",
				      (json_int_t)p->memlock_bytes));
	return o;
}
