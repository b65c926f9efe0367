/* Backends: one small ops table per way of running a plan.
 * Every backend takes the same plan and keeps the same promises, or refuses
 * the plan in probe() with a reason. The native backend is the default;
 * fake runs the command without isolation (but in a pid namespace) through
 * the same init, for tests only — it cannot be chosen by name.
 *
 * A backend watches its own sandbox in the run's loop and reports what
 * happens through struct al_sandbox_events (supervisor.h), in neutral terms; it feeds what
 * it measures (cgroup counters, socket memory) to the run's meter. The
 * supervisor (src/supervisor) handles the events and knows no backend. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <sys/types.h>

#include "audit/audit.h"
#include "cgroup/cgroup.h"
#include "core/error.h"
#include "core/loop.h"
#include "net/layout.h"
#include "policy/plan.h"
#include "supervisor/meter.h"
#include "supervisor/result.h"
#include "supervisor/supervisor.h"

/* Each backend's own state of one sandbox, defined by that backend alone
 * (the native one's, which the fake backend shares, is in
 * backend/native/state.h). The generic code never looks inside it. */
struct al_backend_state;

/* An exec in a session, as the run layer hands it to the backend. */
struct al_sandbox_exec {
	uint32_t id;			    /* the run's number for it, never 0 */
	char *const *argv, *const *env;	    /* env: NAME=VALUE added to the plan's */
	const char *cwd;		    /* NULL: the plan's workdir */
	int stdin_rd, stdout_wr, stderr_wr; /* its stdio (borrowed: sent, not kept) */
	bool tty; /* a terminal instead (stdio -1): its master comes to terminal() */
	unsigned short rows, cols;
	uint64_t memory_bytes, pids; /* its own limits (0: none below the sandbox's) */
	/* The request set memory_bytes (not the sandbox's): refused where
	 * the exec cannot have a cgroup of its own to hold it. */
	bool memory_asked;
	/* A file operation of the daemon's file API, not a program: argv is
	 * [OP, PATH] (guest/proto.h AL_GUEST_EXEC_FILE_OP says what each OP
	 * does and writes), env and cwd unused; done in the sandbox by the
	 * backend's own agent as the sandbox's user. Only a backend with
	 * AL_BACKEND_EXEC_FILES is asked (run/session.c refuses it for the
	 * others). */
	bool file_op;
};

/* What happens to a session's execs, as the backend reports it. */
struct al_exec_events {
	void *data;
	/* id runs as host process pid (in its own cgroup where there is one). */
	void (*started)(void *data, uint32_t id, pid_t pid);
	/* id's terminal (a tty exec; before started): the master of its pty,
	 * the callee's to close. */
	void (*terminal)(void *data, uint32_t id, int master);
	/* id ended with wait status (exec_err: the errno of an exec that
	 * never ran, else 0); its CPU, memory peak, and whether its own
	 * memory limit killed a process of it. Everything of it is gone. */
	void (*ended)(void *data, uint32_t id, int status, int exec_err, uint64_t user_us,
		      uint64_t system_us, uint64_t memory_peak, bool oom);
};

struct al_sandbox {
	const struct al_backend_ops *ops;
	const struct al_plan *plan; /* borrowed */
	struct al_audit *audit;	    /* borrowed; may be NULL */
	const char *run_id;	    /* borrowed; may be NULL */
	bool verify_all;	    /* the checks before exec read what costs time too */
	struct al_loop *loop;	    /* borrowed: the run's */
	const struct al_sandbox_events *events;
	struct al_cgroup *cg; /* owned; NULL when the run has no cgroup */
	/* Filled by start(): the supervisor's ends of the command's stdio
	 * (it takes them over and closes them). */
	int stdin_wr, stdout_rd, stderr_rd;
	/* Who the sandbox's ids are on the host (set by prepare; for the
	 * record). */
	struct al_host_ids ids;
	bool have_ids;
	/* Set by prepare: a directory the backend removes a file of its own
	 * from at the end, which a confined supervisor must keep; -1: none. */
	int remove_dirfd;
	/* Whether that removal is of a whole tree (gvisor's run directory:
	 * directories too, and listing them); false: files only (a host id
	 * slot's lock file). */
	bool remove_tree;
	/* A second directory it removes a file of its own from, or -1: the
	 * host id slot's, when remove_dirfd is a tree of the backend's own
	 * (gvisor). */
	int slot_dirfd;
	/* A session (set before start): the sandbox starts no command and
	 * serves execs; exec_events hears about them. */
	bool session;
	const struct al_exec_events *exec_events;
	/* Not a session to this backend, but a session's sandbox that a
	 * layer above runs as one command here (microvm's VMM): its cgroup
	 * gets a freezer (that layer's pause freezes it) and the sandbox a
	 * devpts of its own (the ptys of that layer's tty execs). */
	bool hosts_session;
	/* The backend's own (made by prepare, freed by destroy; NULL before). */
	struct al_backend_state *state;
};

/* What a layer can do at all, whatever the plan (for `airlock backends`,
 * the daemon and the plans a backend refuses). */
enum {
	AL_BACKEND_EXEC = 1u << 0,	       /* sessions: exec in a live sandbox */
	AL_BACKEND_TTY = 1u << 1,	       /* a terminal for the command */
	AL_BACKEND_NETWORK = 1u << 2,	       /* egress rules, through the gateway */
	AL_BACKEND_HIDES_PIDS = 1u << 3,       /* the host's processes are invisible */
	AL_BACKEND_PRIVATE_TMP = 1u << 4,      /* /tmp and the usual paths are the sandbox's */
	AL_BACKEND_PRIVATE_LOOPBACK = 1u << 5, /* 127.0.0.1 is the sandbox's own */
	AL_BACKEND_PAUSE = 1u << 6,	       /* a session can be frozen and thawed */
	/* A host path shown at another path (--ro HOST:/input/x): the
	 * process layer makes no mounts, so it shows a path only where it is. */
	AL_BACKEND_MOUNTS_ELSEWHERE = 1u << 7,
	/* A session's exec may be a file operation (al_sandbox_exec.file_op):
	 * the file API's way in where the run has no scratch of its own on
	 * the host (microvm, vm: the scratch is a tmpfs in the guest). Not
	 * shown by `airlock backends`: it says how the daemon's file API
	 * reaches the files, not whether it does. */
	AL_BACKEND_EXEC_FILES = 1u << 8,
	/* A container's own root (the OCI runtime's plans, plan->root): the
	 * bundle's root filesystem as "/", its files with their own ids. */
	AL_BACKEND_OCI_ROOT = 1u << 9,
};

/* How a layer keeps each promise, one short phrase each: `airlock
 * backends` prints them, docs/backends.md says the same at length. */
struct al_backend_facts {
	const char *summary; /* what the layer is */
	const char *files;   /* the file view */
	const char *egress;  /* how nothing leaves but through the gateway */
	const char *pids;    /* process isolation */
	const char *kernel;  /* the kernel surface the code reaches */
	const char *limits;  /* how memory, pids and CPU are held */
	const char *exec;    /* exec in a live sandbox */
	unsigned features;   /* AL_BACKEND_* */
};

struct al_backend_ops {
	const char *name;
	const struct al_backend_facts *facts;
	/* Can this machine run this backend at all? 1 yes; 0 no, with the
	 * reason in why (one line); never blocks for long (a probe that
	 * starts a program does it under a timeout). NULL: always. */
	int (*usable)(char *why, size_t len);
	/* What the layer runs on here, for run.start and the record (gvisor:
	 * runsc's platform, "ptrace" or "kvm"); NULL, or NULL returned: none. */
	const char *(*platform)(void);
	/* Can this machine run the plan with this backend? */
	int (*probe)(const struct al_plan *plan, struct al_error *err);
	/* `airlock check`: how this backend makes the plan on this machine,
	 * as text to f, or (f NULL) as members added to json. Refuses, with
	 * err, where a run would. */
	int (*describe)(const struct al_plan *plan, FILE *f, json_t *json, struct al_error *err);
	/* Create the backend's state and what must exist before the sandbox
	 * (the cgroup). */
	int (*prepare)(struct al_sandbox *sb, struct al_error *err);
	/* Create the sandbox and watch it in sb->loop; report through
	 * sb->events from here on. */
	int (*start)(struct al_sandbox *sb, struct al_error *err);
	/* After ready(): let the command start. */
	void (*release)(struct al_sandbox *sb);
	/* Stop everything in the sandbox, counting what it used where the
	 * backend can (gracefully), killing it in the end. */
	void (*stop)(struct al_sandbox *sb);
	/* Send sig to the whole sandbox now (SIGKILL: everything dies). */
	int (*kill)(struct al_sandbox *sb, int sig);
	/* The command is gone (or the run is being torn down): wait for the
	 * sandbox's end and say how it ended; final counters go to the meter. */
	void (*finish)(struct al_sandbox *sb, struct al_sandbox_end *end);
	/* Kill anything left and release every resource. Safe after any failure. */
	void (*destroy)(struct al_sandbox *sb);
	/* Sessions, once running(): start x (reported through exec_events),
	 * or fail with err (nothing started); send sig to exec id (SIGKILL:
	 * to everything of it). */
	int (*exec)(struct al_sandbox *sb, const struct al_sandbox_exec *x, struct al_error *err);
	int (*exec_signal)(struct al_sandbox *sb, uint32_t id, int sig);
	/* Sessions: freeze (frozen) or thaw everything in the sandbox; NULL
	 * or EOPNOTSUPP where the backend cannot. */
	int (*pause)(struct al_sandbox *sb, bool frozen, struct al_error *err);
};

extern const struct al_backend_ops al_backend_process;
extern const struct al_backend_ops al_backend_native;
extern const struct al_backend_ops al_backend_wasm;
extern const struct al_backend_ops al_backend_gvisor;
extern const struct al_backend_ops al_backend_microvm;
extern const struct al_backend_ops al_backend_vm;
extern const struct al_backend_ops al_backend_fake;

/* Every backend this airlock has, NULL-terminated, weakest first (the
 * operator policy's order, policy/operator-parse.c). The fake one is not
 * among them. */
extern const struct al_backend_ops *const al_backends[];

/* What no plan may ask of a layer without the feature, refused here for
 * every backend alike (so that none repeats it in its probe), with one
 * line naming the plan's field: a terminal (-t) without AL_BACKEND_TTY,
 * a container's own root without AL_BACKEND_OCI_ROOT,
 * egress rules without AL_BACKEND_NETWORK and, when live (a session's
 * sandbox, a warm pool's), a layer without AL_BACKEND_EXEC. A backend
 * without facts (the fake one) is taken to have every feature. 0 or
 * -EOPNOTSUPP with err set. */
int al_backend_admit(const struct al_backend_ops *ops, const struct al_plan *plan, bool live,
		     struct al_error *err);

/* 1 if the backend is usable here; 0 with why (al_backend_ops.usable). */
int al_backend_usable(const struct al_backend_ops *ops, char *why, size_t len);

/* `airlock gc`: remove the gvisor backend's run directories whose
 * supervisor is gone (after the cgroup gc killed what ran there): how
 * many, or -errno. */
int al_gvisor_gc(struct al_error *err);

/* `airlock gc`: remove the microvm/vm initramfs files of runs whose
 * airlock is gone (AL_VM_RUN_DIR): how many, or -errno. */
int al_vm_gc(struct al_error *err);

/* The run's cgroup limits from sb's plan, the same for every backend that
 * holds its sandbox in a cgroup (a session's also get a freezer and exec
 * cgroups below the run's). */
void al_sandbox_cgroup_limits(const struct al_sandbox *sb, struct al_cgroup_limits *limits);

/* Remove the run cgroups a killed supervisor left (al_cgroup_gc_except),
 * once the sandbox's own setup is under way; a failure is only logged, the
 * run goes on. Every backend whose sandbox has a run cgroup calls it from
 * start(), so that the next run clears them and not only `airlock gc`. */
void al_sandbox_gc_cgroups(const struct al_sandbox *sb);

/* A backend that runs its sandbox through the native one (wasm, microvm,
 * vm) hears native's events first. al_sandbox_events_relay() fills ev with
 * callbacks that pass every event on unchanged to the events whose pointer
 * is the first member of the struct at data (its own state), meter and res
 * included; the caller then sets the few it handles itself. */
void al_sandbox_events_relay(struct al_sandbox_events *ev, void *data);

/* A sandbox handle with every fd closed (-1). */
void al_sandbox_init_handle(struct al_sandbox *sb, const struct al_backend_ops *ops,
			    const struct al_plan *plan, struct al_audit *audit,
			    struct al_loop *loop, const struct al_sandbox_events *events);

/* The backend called `name` (NULL = native), or NULL if there is none. */
const struct al_backend_ops *al_backend_lookup(const char *name);
