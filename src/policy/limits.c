/* The limits table (limits.h). */
#include "policy/limits.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "core/util.h"
#include "policy/json.h"
#include "policy/plan.h"

#define LIMIT(sec, key, flag, kind, cmax, min, field, builtin)                                     \
	{                                                                                          \
		sec, key, flag, kind, cmax, min, offsetof(struct al_policy, field), builtin        \
	}

const struct al_limit_def al_limit_defs[AL_OPL_COUNT] = {
    [AL_OPL_TIMEOUT] = LIMIT("limits", "timeout", "--timeout", AL_LIMIT_DURATION, 0, 0, timeout_ms,
			     AL_DEFAULT_TIMEOUT_MS),
    [AL_OPL_SCRATCH] = LIMIT("limits", "scratch", "--scratch", AL_LIMIT_SIZE, 0, 0, scratch_bytes,
			     AL_DEFAULT_SCRATCH_BYTES),
    [AL_OPL_MEMORY] = LIMIT("limits", "memory", "--memory", AL_LIMIT_SIZE, 0, 4ull << 20,
			    memory_bytes, AL_DEFAULT_MEMORY_BYTES),
    [AL_OPL_PIDS] =
	LIMIT("limits", "pids", "--pids", AL_LIMIT_COUNT, 4194304, 2, pids, AL_DEFAULT_PIDS),
    [AL_OPL_CPUS] = LIMIT("limits", "cpus", "--cpus", AL_LIMIT_CPUS, 0, 0, cpus_milli, 0),
    [AL_OPL_CPU_TIME] =
	LIMIT("limits", "cpu_time", "--cpu-time", AL_LIMIT_DURATION, 0, 0, cpu_time_ms, 0),
    [AL_OPL_OUTPUT] = LIMIT("limits", "output", "--output-limit", AL_LIMIT_SIZE, 0, 0, output_bytes,
			    AL_DEFAULT_OUTPUT_BYTES),
    [AL_OPL_OPEN_FILES] = LIMIT("limits", "open_files", "--open-files", AL_LIMIT_COUNT, 1048576, 0,
				open_files, AL_DEFAULT_OPEN_FILES),
    [AL_OPL_FILE_SIZE] =
	LIMIT("limits", "file_size", "--file-size", AL_LIMIT_SIZE, 0, 0, file_size, 0),
    /* Its own default is the scratch's size: engine.c fills that in. */
    [AL_OPL_COPY_OUT_SIZE] =
	LIMIT("limits", "copy_out_size", "--copy-out-size", AL_LIMIT_SIZE, 0, 0, copy_out_bytes, 0),
    [AL_OPL_COPY_OUT_FILES] = LIMIT("limits", "copy_out_files", "--copy-out-files", AL_LIMIT_COUNT,
				    1000000, 0, copy_out_files, AL_DEFAULT_COPY_OUT_FILES),
    /* The sandbox user namespace's own (/proc/sys/user), set before the
     * command starts: what one run may hold of its creator's. */
    [AL_OPL_INOTIFY_INSTANCES] = LIMIT("limits", "inotify_instances", NULL, AL_LIMIT_COUNT, 65536,
				       1, inotify_instances, AL_DEFAULT_INOTIFY_INSTANCES),
    [AL_OPL_INOTIFY_WATCHES] = LIMIT("limits", "inotify_watches", NULL, AL_LIMIT_COUNT, 4194304, 1,
				     inotify_watches, AL_DEFAULT_INOTIFY_WATCHES),
    [AL_OPL_NET_CONNECTIONS] = LIMIT("network.limits", "connections", NULL, AL_LIMIT_COUNT, 65536,
				     0, net_run.connections, AL_DEFAULT_NET_CONNECTIONS),
    [AL_OPL_NET_REQUESTS] = LIMIT("network.limits", "requests", NULL, AL_LIMIT_COUNT, 1ull << 40, 0,
				  net_run.requests, 0),
    [AL_OPL_NET_BYTES_OUT] =
	LIMIT("network.limits", "bytes_out", NULL, AL_LIMIT_SIZE, 0, 0, net_run.bytes_out, 0),
    [AL_OPL_HOST_CONNECTIONS] = LIMIT("network.per_host", "connections", NULL, AL_LIMIT_COUNT,
				      65536, 0, net_host.connections, 0),
    [AL_OPL_HOST_REQUESTS] = LIMIT("network.per_host", "requests", NULL, AL_LIMIT_COUNT, 1ull << 40,
				   0, net_host.requests, 0),
    [AL_OPL_HOST_BYTES_OUT] =
	LIMIT("network.per_host", "bytes_out", NULL, AL_LIMIT_SIZE, 0, 0, net_host.bytes_out, 0),
};

void al_limit_format(const struct al_limit_def *d, uint64_t v, char *buf, size_t len)
{
	switch (d->kind) {
	case AL_LIMIT_SIZE:
		al_format_size(v, buf, len);
		break;
	case AL_LIMIT_DURATION:
		if (v % 1000 == 0)
			snprintf(buf, len, "%llus", (unsigned long long)(v / 1000));
		else
			snprintf(buf, len, "%llums", (unsigned long long)v);
		break;
	case AL_LIMIT_CPUS:
		snprintf(buf, len, "%g", (double)v / 1000.0);
		break;
	case AL_LIMIT_COUNT:
		snprintf(buf, len, "%llu", (unsigned long long)v);
		break;
	}
}

int al_json_limit(struct al_json_ctx *c, const json_t *v, const char *path,
		  const struct al_limit_def *d, uint64_t *out)
{
	switch (d->kind) {
	case AL_LIMIT_SIZE:
		return al_json_size(c, v, path, out);
	case AL_LIMIT_DURATION:
		return al_json_duration(c, v, path, out);
	case AL_LIMIT_COUNT:
		return al_json_count(c, v, path, d->count_max, out);
	case AL_LIMIT_CPUS:
		return al_json_cpus(c, v, path, out);
	}
	return -EINVAL;
}

uint64_t *al_limit_field(struct al_policy *p, const struct al_limit_def *d)
{
	return (uint64_t *)((char *)p + d->offset);
}

size_t al_limit_keys(const char *section, const char **keys)
{
	size_t n = 0;

	for (size_t i = 0; i < AL_OPL_COUNT; i++)
		if (strcmp(al_limit_defs[i].section, section) == 0)
			keys[n++] = al_limit_defs[i].key;
	keys[n] = NULL;
	return n;
}
