/* What the files of src/cgroup share (internal to the folder). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "cgroup/cgroup.h"
#include "core/error.h"

#define CG_ROOT	 "/sys/fs/cgroup"
#define MAX_HIER 5

struct hier {
	char ctrls[64]; /* "memory", "pids", "cpu,cpuacct", or "" for v2 */
	char *base;	/* <mount><own path>/airlock */
	char *own;	/* <mount><own path>: where the supervisor itself is */
	char *dir;	/* <base>/<id>: the run's cgroup */
	/* With a path (al_cgroup_limits.path): the hierarchy's mount, dir
	 * being <mount><path> and base its parent; NULL otherwise */
	char *mount;
	bool made; /* dir was made by this run (and is removed at the end) */
};

/* cgroup v1 with a path: a hierarchy that holds no limit of airlock's
 * (blkio, perf_event, net_cls, hugetlb), where the process that makes the
 * run's cgroup (a container's supervisor) moves itself to the path, so
 * that the sandbox it clones is there too. Why: podman finds a
 * container's cgroup from /proc/PID/cgroup of the state's pid, the
 * supervisor, taking its longest path: it is then the container's. */
#define MAX_TAGS 4
struct tag {
	char *mount, *dir, *base; /* base: dir's parent */
	int back_fd;		  /* <own>/cgroup.procs, open for the way back out */
	bool made, in;
};

/* The counter files al_cgroup_stats reads on every tick (cgroup.c). */
enum al_cg_counter {
	AL_CG_CPU_STAT,	   /* v2 cpu.stat, v1 cpuacct.stat */
	AL_CG_CPU_USAGE,   /* v1 cpuacct.usage */
	AL_CG_MEM_PEAK,	   /* v2 memory.peak, v1 memory.max_usage_in_bytes */
	AL_CG_MEM_CURRENT, /* v2 memory.current, v1 memory.usage_in_bytes */
	AL_CG_MEM_EVENTS,  /* v2 memory.events, v1 memory.oom_control */
	AL_CG_PIDS_EVENTS, /* pids.events */
	AL_CG_SOCK,	   /* v2 memory.stat, v1 memory.kmem.tcp.usage_in_bytes */
	AL_CG_SOCK_PEAK,   /* v1 memory.kmem.tcp.max_usage_in_bytes */
	AL_CG_N_COUNTERS
};

struct al_cgroup {
	bool v2;
	struct hier h[MAX_HIER];
	size_t n;
	/* v2, for CLONE_INTO_CGROUP: the run's dir, or with exec_children its
	 * init leaf */
	int dirfd;
	/* v2 with exec_children: <run>/init, where the sandbox's init lives so
	 * that the run's own cgroup holds no process and can enable
	 * controllers for its children (the init leaf and each exec-N) */
	char *leaf;
	struct tag tag[MAX_TAGS];
	size_t n_tags;
	enum al_sockmem sockmem;
	int sockfd; /* v1 limited: memory.kmem.tcp.usage_in_bytes, for pread */
	/* Each counter's file, open from its first read on (-1 before) */
	int ctrfd[AL_CG_N_COUNTERS];
	char desc[512];
};

/* "memory", "pids", "cpu", "cpuacct", "freezer", NULL */
extern const char *const al_cg_v1_controllers[];

/* teardown.c: SIGKILL every process listed in dir's cgroup.procs through
 * pidfds, only those still listed once their pidfd is open (never a pid
 * that was reaped and reused meanwhile). */
void al_cg_kill_listed(const char *dir);

/* A cgroup airlock made at a caller's path is marked with this xattr
 * (trusted.*: only CAP_SYS_ADMIN sets one): "container" on a container's
 * cgroup, from its mkdir on (so that a path below it is refused even
 * before its processes joined), "parent" on each parent a create made
 * (removed once empty, and only those). */
#define AL_CG_XATTR	     "trusted.airlock"
#define AL_CG_MARK_CONTAINER "container"
#define AL_CG_MARK_PARENT    "parent"
#define AL_CG_AT_LOCK	     "/run/airlock/cgroups-at.lock"

/* at.c: dir marked as what; 0 or -errno with err naming dir (a
 * cgroupfs without xattrs: refused, the marks are what keeps containers
 * apart). */
int al_cg_mark(const char *dir, const char *what, struct al_error *err);
/* at.c: dir carries the mark what. */
bool al_cg_marked(const char *dir, const char *what);

/* at.c: AL_CG_AT_LOCK opened (made 0600 if missing) and locked
 * exclusively, host-wide: held around the checks and mkdirs of a
 * create at a path and around the removal of parents, so that a check
 * never sees another create half-done. The fd (close it to unlock), or
 * -errno with err naming the file. */
int al_cg_at_lock(struct al_error *err);

/* at.c: the parents of <mount><path> marked AL_CG_MARK_PARENT removed,
 * deepest first, while they are empty; the walk stops at the first that
 * is not marked or not empty. The caller holds al_cg_at_lock. */
void al_cg_remove_parents(const char *mount, const char *path);

/* teardown.c: in every hierarchy where <path> is gone, its parents a
 * create made removed (al_cg_remove_parents). The caller holds
 * al_cg_at_lock. */
void al_cg_remove_parents_all(const char *path);

/* at.c: the parents of <mount><path> that are missing, made (path
 * checked by al_cgroup_path_check; dir itself not made), each marked
 * AL_CG_MARK_PARENT. v2: the memory, pids and cpu controllers enabled
 * for the children of each parent from the mount on. 0 or -errno with
 * err naming the directory or file (what was made is left for
 * al_cg_remove_parents). */
int al_cg_mkdir_parents(const char *mount, const char *path, bool v2, struct al_error *err);

/* at.c: refuse (EBUSY, naming linux.cgroupsPath) a path below a cgroup
 * of the hierarchy at mount marked AL_CG_MARK_CONTAINER, or that holds
 * processes of its own (v2: or in its child "init", a session's leaf):
 * another container's, whose
 * limits, ps, kill and removal would then take this one's processes in.
 * The hierarchy's root does not count. */
int al_cg_check_ancestors(const char *mount, const char *path, bool v2, struct al_error *err);

/* at.c: the v1 hierarchies of no limit where cg's path goes too (see
 * struct tag), found; made, the caller moved in; the caller moved back
 * out and they removed (at the run's end, once its processes are gone;
 * a directory that cannot be removed is left for `delete`). */
void al_cg_tags_find(struct al_cgroup *cg, const char *path);
int al_cg_tags_enter(struct al_cgroup *cg, const char *path, struct al_error *err);
void al_cg_tags_leave(struct al_cgroup *cg);
/* Their names, NULL-terminated. */
extern const char *const al_cg_tag_names[];

/* teardown.c: rmdir, retried for about a second while it is EBUSY (the
 * last tasks leaving); nothing killed. 0 (also when missing) or -errno. */
int al_cg_rmdir_wait(const char *dir);

/* Our own cgroup path for a v1 controller, or v2 (NULL). */
char *al_cg_own_path(const char *controller);
char *al_cg_join(const char *mount, const char *path);
bool al_cg_v2_usable(const char **ret_mount, char **ret_own);
int al_cg_write_str(const char *dir, const char *file, const char *value, struct al_error *err);

/* freeze.c: the directory whose freezer file freezes the run (v2: its
 * cgroup; v1: its freezer cgroup), or NULL; thaw any cgroup directory
 * (before killing what is in it). */
const char *al_cg_freezer_dir(const struct al_cgroup *cg);
void al_cg_thaw_dir(const char *dir);

/* cgroup v2's side of a session's cgroups, as steps (child.c): made as a
 * list first so that the paths and values can be checked without a
 * cgroup v2 mount (tests/unit/test_cgroup.c), then applied in order. */
enum al_cg_op {
	AL_CG_MKDIR,
	AL_CG_WRITE,
	AL_CG_WRITE_OPT, /* a file the kernel may not have (ENOENT ignored) */
};
#define AL_CG_STEPS_MAX 8
struct al_cg_steps {
	struct {
		enum al_cg_op op;
		char *path;
		char value[48];
	} v[AL_CG_STEPS_MAX];
	size_t n;
};
/* The name of a session's init leaf below the run's cgroup. */
#define AL_CG_INIT_LEAF "init"
/* A session's run cgroup on v2 (run_dir, no process in it yet): its init
 * leaf, and the memory, pids and cpu controllers enabled for its
 * children. Kernel rules: a cgroup with processes of its own cannot
 * enable domain controllers for its children ("no internal processes"),
 * so this comes before init is cloned into the leaf. */
void al_cg_v2_session_steps(const char *run_dir, struct al_cg_steps *s);
/* An exec's cgroup <run_dir>/<name> on v2: its memory.max (page-aligned),
 * memory.swap.max 0 (when the kernel has it) and pids.max (0: not
 * written, the run's cap the total). */
void al_cg_v2_exec_steps(const char *run_dir, const char *name, uint64_t memory_bytes,
			 uint64_t pids, struct al_cg_steps *s);
/* Apply them in order; -errno with err naming the file at the first that
 * fails (the caller removes what was made). */
int al_cg_steps_apply(const struct al_cg_steps *s, struct al_error *err);
void al_cg_steps_clear(struct al_cg_steps *s);
