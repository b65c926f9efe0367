/* The task's limits as data: where each is in the policy (its JSON
 * section and key, its flag, its field), what kind of value it takes and
 * airlock's own default. One table serves the task policy's parser
 * (parse.c), the operator policy's (operator-parse.c), the engine and
 * check's listing of a profile. */
#pragma once

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct al_json_ctx;

/* The limits a task sets and a profile bounds (al_limit_defs[] says where
 * each is in the task policy). */
enum al_op_limit {
	AL_OPL_TIMEOUT,
	AL_OPL_SCRATCH,
	AL_OPL_MEMORY,
	AL_OPL_PIDS,
	AL_OPL_CPUS,
	AL_OPL_CPU_TIME,
	AL_OPL_OUTPUT,
	AL_OPL_OPEN_FILES,
	AL_OPL_FILE_SIZE,
	AL_OPL_COPY_OUT_SIZE,
	AL_OPL_COPY_OUT_FILES,
	AL_OPL_INOTIFY_INSTANCES,
	AL_OPL_INOTIFY_WATCHES,
	AL_OPL_NET_CONNECTIONS,
	AL_OPL_NET_REQUESTS,
	AL_OPL_NET_BYTES_OUT,
	AL_OPL_HOST_CONNECTIONS,
	AL_OPL_HOST_REQUESTS,
	AL_OPL_HOST_BYTES_OUT,
	AL_OPL_COUNT,
};

enum al_limit_kind {
	AL_LIMIT_SIZE,	   /* bytes: "64M" */
	AL_LIMIT_DURATION, /* milliseconds: "90s" */
	AL_LIMIT_COUNT,
	AL_LIMIT_CPUS, /* thousandths of a CPU: 0.5 */
};

/* One limit a profile bounds: where it is in the task policy. */
struct al_limit_def {
	const char *section; /* "limits", "network.limits", "network.per_host" */
	const char *key;     /* "memory" */
	const char *flag;    /* "--memory", or NULL when only the file sets it */
	enum al_limit_kind kind;
	uint64_t count_max; /* COUNT: the most a task may write */
	uint64_t min;	    /* the least a run can have (memory 4M, pids 2); 0: none */
	size_t offset;	    /* of its uint64_t in struct al_policy */
	uint64_t builtin;   /* airlock's own default when none is asked; 0: no limit */
};

extern const struct al_limit_def al_limit_defs[AL_OPL_COUNT];

/* v as a task would write it ("64M", "90s", "0.5", "128"). */
void al_limit_format(const struct al_limit_def *d, uint64_t v, char *buf, size_t len);

/* Parse v as d's kind of value (a size, a duration, a count up to
 * d->count_max, a number of CPUs) at path into *out; errors as json.h. */
int al_json_limit(struct al_json_ctx *c, const json_t *v, const char *path,
		  const struct al_limit_def *d, uint64_t *out);

struct al_policy;
/* d's field in p. */
uint64_t *al_limit_field(struct al_policy *p, const struct al_limit_def *d);

/* The keys of section's limits into keys[] (room for AL_OPL_COUNT + 1),
 * NULL-terminated; returns how many. */
size_t al_limit_keys(const char *section, const char **keys);
