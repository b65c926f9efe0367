/* Per-run cgroups on cgroup v2, and on v1 or hybrid hosts (v1 memory, pids,
 * cpu and cpuacct hierarchies beside a v2 mount without controllers).
 *
 * Each run gets its own cgroup under "<own cgroup>/airlock/<id>" in every
 * hierarchy it needs (or, for an OCI container, at the cgroupsPath its
 * engine gave: al_cgroup_limits.path), created before the child starts
 * and removed after.
 * The id carries the supervisor's pid and start time, so a directory left
 * by a killed supervisor is recognised as stale by the next run or by
 * `airlock gc`. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/error.h"

struct al_cgroup;

struct al_cgroup_limits {
	uint64_t memory_bytes; /* 0 = none */
	uint64_t pids;	       /* 0 = none */
	uint64_t cpu_quota_us; /* per period; 0 = none */
	uint64_t cpu_period_us;
	bool want_cpu_time; /* live CPU accounting is needed (a cpu-time limit); the
				  * result's CPU times come from rusage otherwise */
	/* v1 only: memory.kmem.tcp.limit_in_bytes, the kernel's limit on the
	 * socket buffers (TCP and UDP) that v1 keeps apart from
	 * memory.limit_in_bytes; 0 = none. v2 charges them to memory.max. */
	uint64_t socket_bytes;
	/* v1 only: a cgroup of the run's own in the freezer hierarchy too,
	 * for al_cgroup_freeze (a session's pause). v2 always can. */
	bool want_freezer;
	/* A session's: its execs get cgroups of their own below the run's
	 * (cgroup/child.h). v1 needs nothing more; on v2 the run's cgroup
	 * gets a leaf "init" that the sandbox's init is cloned into
	 * (al_cgroup_clone_fd) and enables its controllers for its
	 * children. */
	bool exec_children;
	/* A container's cgroupsPath (checked by al_cgroup_path_check, absolute
	 * form; borrowed), or NULL: the run's cgroup is made at that path
	 * below each hierarchy's root instead of under "<own>/airlock/<id>",
	 * in every v1 hierarchy of memory, pids, cpu, cpuacct and freezer
	 * the host has (so that an engine finds each controller's files
	 * there), or in v2. The path must not exist yet (EEXIST), nor lie
	 * below a cgroup that holds processes (EBUSY); missing parents are
	 * made and left at the end. On v1 the calling process
	 * also moves itself to the path in the hierarchies that hold no
	 * limit (blkio, perf_event, net_cls, hugetlb; internal.h's struct
	 * tag), so that an engine that finds the container's cgroup from
	 * the state's pid (the supervisor: podman) finds this one; it moves
	 * back at al_cgroup_destroy. For a process that holds one run (the
	 * OCI supervisor). */
	const char *path;
};

/* How a run's socket buffers are held to its memory limit. */
enum al_sockmem {
	AL_SOCKMEM_NONE,    /* not charged to the run at all: unbounded */
	AL_SOCKMEM_CHARGED, /* v2: charged to memory.max with everything else */
	AL_SOCKMEM_LIMITED, /* v1: charged to memory.kmem.tcp, limited there */
};

/* "none", "charged", "limited". */
const char *al_sockmem_name(enum al_sockmem m);

struct al_cgroup_stats {
	uint64_t cpu_usage_us; /* user + system, all processes */
	uint64_t cpu_user_us;
	uint64_t cpu_system_us;
	uint64_t memory_peak;	 /* bytes */
	uint64_t memory_current; /* bytes now */
	uint64_t oom_kills;
	uint64_t pids_max_hits; /* forks refused at the pids limit */
	uint64_t socket_bytes;	/* socket buffers now (v1 kmem.tcp, v2 memory.stat sock) */
	uint64_t socket_peak;	/* v1: the most they held (v2: the largest value read) */
};

/* Which layout this host has, as a word for messages: "v2", "v1", or
 * "none" when no usable cgroup hierarchy is mounted. */
const char *al_cgroup_layout(void);

/* Create the run's cgroup(s) and write the limits, then read them back:
 * a limit that does not read back as written fails the call (fail closed).
 * At a path (limits->path, a container's cgroupsPath): under the
 * host-wide lock /run/airlock/cgroups-at.lock, refused where the path
 * exists or lies below another airlock container's cgroup or below one
 * holding processes; the parents made and the cgroup marked (xattr
 * trusted.airlock), the parents removed again when the call fails.
 * Unprivileged callers without a writable (delegated) cgroup get EACCES
 * with a message saying how to delegate. */
int al_cgroup_create(const struct al_cgroup_limits *limits, struct al_cgroup **ret,
		     struct al_error *err);

#define AL_CGROUP_PATH_MAX	512
#define AL_CGROUP_COMPONENT_MAX 255
#define AL_CGROUP_DEPTH_MAX	16

/* A container's cgroupsPath (hostile: the bundle's author wrote it), as
 * the cgroupfs driver takes it: "/a/b" or "a/b", both below the root of
 * each hierarchy. Refused: empty, the hierarchy's root, the systemd form
 * ("slice:prefix:name"), more than AL_CGROUP_PATH_MAX bytes, a byte
 * other than letters, digits, "._-+@=" and "/", an empty component,
 * one that starts with "." (so no "." or ".."), one of more than
 * AL_CGROUP_COMPONENT_MAX bytes, more than AL_CGROUP_DEPTH_MAX
 * components, one named "airlock" (airlock's own run cgroups), and one
 * named as a cgroup file: "tasks", "notify_on_release", "release_agent",
 * or one that starts with "cgroup." or a controller's name and a dot
 * ("memory.", "pids.", ...). Pure. 0 with *ret (may be NULL) the absolute form
 * (malloc()ed), or -errno with err saying what is wrong (without the
 * field's name: the caller adds it). */
int al_cgroup_path_check(const char *path, char **ret, struct al_error *err);

/* What is left of a container's cgroup at path (absolute form, checked)
 * once its supervisor is gone: its directories in the v1 hierarchies of
 * no limit (blkio...) removed once empty (nothing in them killed); with
 * dead (the supervisor died before its end), also what is in the cgroup
 * killed and it removed, with airlock's own cgroups below it (as
 * al_cgroup_kill and al_cgroup_destroy: another child is left, and so is
 * the directory, with a warning), in every hierarchy al_cgroup_create
 * makes one in for a path; then, where the path is gone, the parents a
 * create made there (marked so), deepest first, once empty, holding
 * /run/airlock/cgroups-at.lock meanwhile. Missing directories are fine.
 * 0, or -errno with err naming a directory that could not be removed or
 * the lock file. */
int al_cgroup_remove_at(const char *path, bool dead, struct al_error *err);

/* What the run's cgroup does with socket buffers (see al_sockmem). */
enum al_sockmem al_cgroup_socket_mode(const struct al_cgroup *cg);

/* v1 limited: the socket buffers held now, read through an fd kept open
 * (one pread), for the supervisor's fast check. -ENOENT elsewhere. */
int al_cgroup_socket_usage(const struct al_cgroup *cg, uint64_t *ret);

/* What a run's cgroup on this host would do, without creating one (for
 * `airlock check`). */
enum al_sockmem al_cgroup_host_socket_mode(void);

/* v2: an O_DIRECTORY fd for clone3's CLONE_INTO_CGROUP, or -1 on v1. */
int al_cgroup_clone_fd(const struct al_cgroup *cg);

#define AL_CGROUP_MAX_FDS 5

/* cgroup v1: open the "tasks" file of every hierarchy's run cgroup
 * (inner) or of the cgroup the supervisor is in (outer), O_WRONLY and
 * O_CLOEXEC, into fds[]; returns how many, or -errno.
 *
 * Why: a task that writes "0" to a v1 "tasks" file moves itself without
 * the global threadgroup lock, whose write side waits for an RCU grace
 * period (about 6 ms here) — the cost of moving any other task. The
 * kernel checks the permission of whoever opened the file, so the
 * supervisor opens them and the child uses them: it moves itself in as its
 * first step, and init moves itself out before it reports the end. v2 has
 * CLONE_INTO_CGROUP for the way in and needs none of this. */
int al_cgroup_task_fds(const struct al_cgroup *cg, bool outer, int *fds, size_t max,
		       struct al_error *err);

/* Read the counters. Missing files leave their fields 0. */
void al_cgroup_stats(struct al_cgroup *cg, struct al_cgroup_stats *st);

/* Kill every process in the run cgroup (v2 cgroup.kill; v1 SIGKILL to each
 * listed pid). At a caller's path (al_cgroup_limits.path), only those in
 * it and in airlock's own children ("init", "exec-N"), never in a child
 * cgroup someone else made there. */
void al_cgroup_kill(const struct al_cgroup *cg);

/* The host pids in the run's cgroup and those below it (its execs'; at
 * a caller's path, only in airlock's own children), sorted (init's 1 and
 * below left out: pids of another namespace never appear here). 0, or
 * -ENOENT with no cgroup. */
int al_cgroup_pids(const struct al_cgroup *cg, pid_t **ret, size_t *n);

/* Remove the run's directories (retrying briefly while the last tasks
 * leave) and free cg. At a caller's path, only airlock's own children are
 * removed with it; a directory that holds another child is left, with a
 * warning, and that is not an error. Returns 0 or -errno (the directory is left for gc). */
int al_cgroup_destroy(struct al_cgroup *cg, struct al_error *err);

/* A short description for the plan dump: "v1 memory,pids,cpu,cpuacct at ...". */
const char *al_cgroup_describe(const struct al_cgroup *cg);

/* Freeze (frozen) or thaw everything in the run's cgroup, waiting until the
 * kernel says it is done (a freeze that does not settle within 2 s is
 * undone: ETIMEDOUT). EOPNOTSUPP without a cgroup that can be frozen (v1
 * without want_freezer or a freezer hierarchy). Frozen tasks use no CPU
 * and keep their memory; killing the run thaws it first. */
int al_cgroup_freeze(const struct al_cgroup *cg, bool frozen, struct al_error *err);
bool al_cgroup_can_freeze(const struct al_cgroup *cg);

/* Remove stale run cgroups whose supervisor is gone. Returns how many were
 * removed, or -errno. */
int al_cgroup_gc(struct al_error *err);
/* The same, from a run that made ours (or NULL): where ours is the only
 * run cgroup, that is seen from the link count and one stat, without
 * reading the directory. */
int al_cgroup_gc_except(const struct al_cgroup *ours, struct al_error *err);

/* The run's directory in the given controller's hierarchy, for tests and
 * the verify command; NULL if not used. */
const char *al_cgroup_path(const struct al_cgroup *cg, const char *controller);

/* The run's directories (one per hierarchy) and the directories that hold
 * them, for the supervisor's confinement. Fills up to max of each and
 * returns how many. */
size_t al_cgroup_dirs(const struct al_cgroup *cg, const char **dirs, const char **parents,
		      size_t max);
