/* The native backend: Linux namespaces, landlock and seccomp. The parent
 * side sets up in this order: cgroup → clone3 into new namespaces (into
 * the cgroup on v2) → uid/gid maps → release the child
 * (which hands over a socket for the gateway's capture rules early in its
 * setup). monitor.c watches it from there, and installs those rules. */
#include "backend/backend.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/sys.h"
#include "core/util.h"
#include "policy/kmem.h"
#include "backend/native/child.h"
#include "backend/native/inputs.h"
#include "backend/native/lower.h"
#include "backend/native/netns.h"
#include "backend/native/steps.h"
#include "backend/native/monitor.h"
#include "backend/native/state.h"

#define NS_FLAGS                                                                                   \
	(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | \
	 CLONE_NEWCGROUP)

/* Whether user namespaces are allowed shows at clone3 time, where the
 * error can say exactly that; probing here would cost a clone. */
static int native_probe(const struct al_plan *plan, struct al_error *err)
{
	return al_native_check(plan, err);
}

void al_native_state_new(struct al_sandbox *sb)
{
	struct al_backend_state *st = xcalloc(1, sizeof(*st));

	*st = (struct al_backend_state){
	    .pid = -1, .pidfd = -1, .sync = -1, .userns = -1, .slot = AL_ID_SLOT_NONE};
	sb->state = st;
}

void al_native_state_free(struct al_sandbox *sb)
{
	free(sb->state);
	sb->state = NULL;
}

static int native_describe(const struct al_plan *plan, FILE *f, json_t *json, struct al_error *err)
{
	_cleanup_(al_native_plan_freep) struct al_native_plan *np = NULL;
	int r = al_native_lower(plan, &np, err);

	if (r < 0)
		return r;
	if (f)
		al_native_dump_text(np, f);
	else
		al_native_dump_json(np, plan, json);
	return 0;
}

/* Socket buffers are kernel memory the sandbox can fill at will (a peer
 * that never reads): where the cgroup can neither charge nor limit them,
 * the memory limit would not hold (policy/kmem.h decides). */
static int check_socket_memory(struct al_sandbox *sb, struct al_error *err)
{
	bool unbounded;

	if (al_kmem_admit(sb->plan, al_cgroup_socket_mode(sb->cg), &unbounded, err) < 0) {
		al_cgroup_destroy(TAKE_PTR(sb->cg), NULL);
		return -EOPNOTSUPP;
	}
	if (unbounded) {
		al_warn("warning: socket buffers are NOT bounded by the memory limit: %s",
			al_kmem_unbounded_why);
		al_audit_emit(sb->audit, "limit.unenforced",
			      json_pack("{s:s, s:s}", "limits", "kernel_memory", "reason",
					al_kmem_unbounded_why));
	}
	return 0;
}

/* As root, host ids of the run's own: a slot of the pool (released in
 * destroy), unless the plan pins a fixed range. */
static int take_ids(struct al_sandbox *sb, struct al_error *err)
{
	const struct al_plan *p = sb->plan;
	struct al_backend_state *st = sb->state;
	struct al_host_ids ids;
	int r;

	if (p->ids_per_run) {
		if ((r = al_ids_take(NULL, sb->run_id, &st->slot, err)) < 0)
			return al_error_wrap(err, "refusing to run");
		al_plan_host_ids(p, st->slot.slot, &ids);
		al_native_set_ids(st->lowered, &ids);
		sb->remove_dirfd = st->slot.dirfd;
		al_log_phase("host id slot taken");
	}
	sb->ids = st->lowered->ids;
	sb->have_ids = true;
	return 0;
}

/* No cgroup, and a limit that needs one was asked for: name each such
 * limit with its value and flag (or policy key), and the ways to get a
 * cgroup (as an ordinary user: systemd's delegation on cgroup v2, root,
 * or running without the limit). */
static int cgroup_refused(const struct al_plan *p, struct al_error *err)
{
	static const struct {
		unsigned bit;
		const char *flag;
	} names[] = {{AL_CGROUP_ASKED_MEMORY, "--memory"},
		     {AL_CGROUP_ASKED_PIDS, "--pids"},
		     {AL_CGROUP_ASKED_CPUS, "--cpus"},
		     {AL_CGROUP_ASKED_CPU_TIME, "--cpu-time"},
		     {AL_CGROUP_ASKED_BUDGET, "limits.budget's cpu_second/memory_gb_second"}};
	char why[sizeof(err->msg)], asked[256] = "", drop[160] = "", size[32];
	size_t n = 0, d = 0, count = 0;

	snprintf(why, sizeof(why), "%s", err->msg);
	for (size_t i = 0; i < AL_ARRAY_SIZE(names); i++) {
		if (!(p->cgroup_asked & names[i].bit) || n >= sizeof(asked) || d >= sizeof(drop))
			continue;
		const char *sep = count++ ? ", " : "";
		d += (size_t)snprintf(drop + d, sizeof(drop) - d, "%s%s", sep, names[i].flag);
		if (names[i].bit == AL_CGROUP_ASKED_MEMORY) {
			al_format_size(p->memory_bytes, size, sizeof(size));
			n += (size_t)snprintf(asked + n, sizeof(asked) - n, "%s--memory %s", sep,
					      size);
		} else if (names[i].bit == AL_CGROUP_ASKED_PIDS) {
			n += (size_t)snprintf(asked + n, sizeof(asked) - n, "%s--pids %llu", sep,
					      (unsigned long long)p->pids);
		} else if (names[i].bit == AL_CGROUP_ASKED_CPUS) {
			n += (size_t)snprintf(asked + n, sizeof(asked) - n, "%s--cpus %g", sep,
					      (double)p->cpus_milli / 1000);
		} else if (names[i].bit == AL_CGROUP_ASKED_CPU_TIME) {
			n += (size_t)snprintf(asked + n, sizeof(asked) - n, "%s--cpu-time %g", sep,
					      (double)p->cpu_time_ms / 1000);
		} else {
			n += (size_t)snprintf(asked + n, sizeof(asked) - n, "%s%s", sep,
					      names[i].flag);
		}
	}
	const char *limit = count > 1 ? "limits" : "limit", *verb = count > 1 ? "need" : "needs",
		   *them = count > 1 ? "them" : "it", *their = count > 1 ? "their" : "its";
	if (!p->rootless)
		return al_error_set(
		    err, err->code ? err->code : EPERM,
		    "refusing to run: the %s %s %s a cgroup, and none could be made "
		    "(%s); drop %s (or %s policy key) to run without",
		    limit, asked, verb, why, drop, their);
	return al_error_set(err, err->code ? err->code : EPERM,
			    "refusing to run: the %s %s %s a cgroup, and as an ordinary user "
			    "airlock could make none (%s). To keep %s, run airlock in a cgroup v2 "
			    "scope systemd delegates to you (systemd-run --user --scope -p "
			    "Delegate=yes airlock run ...) or as root (on cgroup v1, the only "
			    "way); or drop %s (or %s policy key) to run without",
			    limit, asked, verb, why, them, drop, their);
}

static int native_prepare(struct al_sandbox *sb, struct al_error *err)
{
	const struct al_plan *p = sb->plan;
	struct al_cgroup_limits limits;
	int r;

	al_sandbox_cgroup_limits(sb, &limits);

	al_native_state_new(sb);
	if ((r = al_native_lower_session(p, sb->session || sb->hosts_session, &sb->state->lowered,
					 err)) < 0)
		return r;
	al_log_phase("plan lowered");
	/* A session keeps the scratch's root for the file operations. */
	sb->state->lowered->want_scratch |= sb->session;
	if ((r = take_ids(sb, err)) < 0)
		return r;
	if ((r = al_native_open_inputs(sb->state->lowered, p, &sb->state->inputs, err)) < 0)
		return r;
	if (al_plan_rooted(p) && (r = al_rooted_prepare(sb->state->lowered, p, err)) < 0)
		return r;
	if (p->root && p->root->netns) {
		struct al_native_plan *np = sb->state->lowered;
		if ((r = al_netns_join_open(p, &sb->state->join, err)) < 0)
			return r;
		np->netns_joined = true;
		al_netns_join_id(sb->state->join, &np->netns_dev, &np->netns_ino);
		/* A sysfs needs the namespace's owner to mount it: ours. */
		for (size_t i = 0; i < np->n_ops && np->netns_sysfs < 0; i++) {
			const struct al_mount_op *op = &np->ops[i];
			if (op->kind != AL_OP_SPECIAL || strcmp(op->source, "sysfs") != 0)
				continue;
			if ((r = al_netns_join_sysfs(sb->state->join, op->attr, err)) < 0)
				return r;
			np->netns_sysfs = r;
		}
		al_log_phase("engine's network namespace set up");
	}
	r = al_cgroup_create(&limits, &sb->cg, err);
	al_log_phase("cgroup created");
	if (r == 0)
		return check_socket_memory(sb, err);
	/* A container's cgroupsPath is where its engine reads it: never
	 * run elsewhere, or without. */
	if (limits.path)
		return r;
	if (p->cgroup_required)
		return cgroup_refused(p, err);
	/* Only defaults were in play: run, but say out loud that the memory,
	 * pids and CPU limits are not enforced (and record it). */
	al_warn("warning: running without a cgroup, so the default memory (512M) and pids (128) "
		"limits are NOT enforced: %s",
		err->msg);
	al_audit_emit(sb->audit, "limit.unenforced",
		      json_pack("{s:s, s:s}", "limits", "memory,pids", "reason", err->msg));
	al_error_clear(err);
	return 0;
}

static int write_maps(const struct al_native_plan *np, bool rootless, pid_t pid,
		      struct al_error *err)
{
	char path[64];
	_cleanup_close_ int dir = -1;
	int r;

	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	dir = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0)
		return al_error_setsys(err, errno, "open %s", path);
	if ((r = al_write_file_at(dir, "uid_map", np->uid_map, strlen(np->uid_map))) < 0)
		return al_error_setsys(err, -r, "writing uid_map \"%.*s\"",
				       (int)strcspn(np->uid_map, "\n"), np->uid_map);
	if (rootless && (r = al_write_file_at(dir, "setgroups", "deny", 4)) < 0)
		return al_error_setsys(err, -r, "writing setgroups");
	if ((r = al_write_file_at(dir, "gid_map", np->gid_map, strlen(np->gid_map))) < 0)
		return al_error_setsys(err, -r, "writing gid_map \"%.*s\"",
				       (int)strcspn(np->gid_map, "\n"), np->gid_map);
	return 0;
}

/* What the credential change resets in this process, put back after. */
struct owner_saved {
	int dumpable;
	int pdeath; /* a parent-death signal our caller set, or 0 */
	pid_t ppid;
};

/* As root, the sandbox's user namespace is created by the run's own host
 * id (its owner), not by root: the kernel charges what the sandbox holds
 * of the per-creator counters (inotify instances and watches, namespaces,
 * message queue bytes, queued signals) to the owner in the parent
 * namespace, so no run can use up root's or another run's. Only this
 * thread's effective uid changes, for the clone (the raw system call:
 * glibc's would change every thread's); the filesystem uid stays root's,
 * which CLONE_INTO_CGROUP's permission check uses. The child starts with
 * these credentials and becomes the namespace's root. */

static int become_owner(const struct al_native_plan *np, bool on, struct owner_saved *sv,
			struct al_error *err)
{
	if (np->ids.rootless)
		return 0;
	if (on) {
		/* Any euid change makes us not dumpable and clears our
		 * parent-death signal: both are put back. */
		sv->dumpable = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
		if (prctl(PR_GET_PDEATHSIG, &sv->pdeath, 0, 0, 0) < 0)
			sv->pdeath = 0;
		sv->ppid = getppid();
		if (syscall(SYS_setresuid, -1, np->ids.owner, -1) < 0)
			return al_error_setsys(err, errno,
					       "taking host uid %u to create the sandbox's user "
					       "namespace",
					       (unsigned)np->ids.owner);
		/* Returns the previous id; with a real uid of 0 it never fails. */
		(void)syscall(SYS_setfsuid, 0);
		return 0;
	}
	if (syscall(SYS_setresuid, -1, 0, -1) < 0) {
		/* The real and saved uids are 0: this cannot fail. Never go on
		 * as another user. */
		al_err("returning to uid 0 after creating the sandbox: %s", strerror(errno));
		_exit(125);
	}
	if (sv->dumpable == 1)
		prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
	if (sv->pdeath > 0) {
		prctl(PR_SET_PDEATHSIG, sv->pdeath, 0, 0, 0);
		/* The parent died while the signal was off: as it would have. */
		if (getppid() != sv->ppid)
			raise(sv->pdeath);
	}
	return 0;
}

static int clone_error(int e, struct al_error *err)
{
	if (e == EPERM || e == ENOSPC || e == EUSERS)
		return al_error_setsys(err, e,
				       "clone3 into new user, mount, pid, net, ipc, uts and cgroup "
				       "namespaces (are unprivileged user namespaces disabled? see "
				       "user.max_user_namespaces and kernel.apparmor_restrict_"
				       "unprivileged_userns)");
	return al_error_setsys(err, e, "clone3 into new namespaces");
}

struct fdset {
	int sync[2], in[2], out[2], errp[2];
};

static void fdset_close(struct fdset *f)
{
	int *all = &f->sync[0];
	for (size_t i = 0; i < 8; i++)
		al_closep(&all[i]);
}

/* With a terminal there are no stdio pipes: the pty comes from inside. */
static int fdset_open(struct fdset *f, bool pipes, struct al_error *err)
{
	memset(f, 0xff, sizeof(*f));
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, f->sync) < 0)
		return al_error_setsys(err, errno, "socketpair");
	if (!pipes)
		return 0;
	if (pipe2(f->in, O_CLOEXEC) < 0 || pipe2(f->out, O_CLOEXEC) < 0 ||
	    pipe2(f->errp, O_CLOEXEC) < 0)
		return al_error_setsys(err, errno, "pipe2");
	return 0;
}

/* Keep our ends, close the child's. */
static void fdset_hand_over(struct fdset *f, struct al_sandbox *sv)
{
	sv->state->sync = TAKE_FD(f->sync[0]);
	sv->stdin_wr = TAKE_FD(f->in[1]);
	sv->stdout_rd = TAKE_FD(f->out[0]);
	sv->stderr_rd = TAKE_FD(f->errp[0]);
	fdset_close(f);
}

static int native_start(struct al_sandbox *sb, struct al_error *err)
{
	struct al_backend_state *st = sb->state;
	struct fdset f;
	int pidfd = -1, r;
	struct clone_args args = {
	    .flags = NS_FLAGS | CLONE_PIDFD,
	    .pidfd = (uint64_t)(uintptr_t)&pidfd,
	    .exit_signal = SIGCHLD,
	};
	int cgfd = al_cgroup_clone_fd(sb->cg);
	int enter[AL_CGROUP_MAX_FDS], leave[AL_CGROUP_MAX_FDS];
	int n_cg = 0;
	struct al_sync_msg go = {.type = AL_SYNC_GO};
	struct owner_saved saved = {.dumpable = -1};
	long pid;

	if ((r = fdset_open(&f, !sb->plan->tty, err)) < 0) {
		fdset_close(&f);
		return r;
	}
	if (sb->cg && cgfd < 0) {
		n_cg = al_cgroup_task_fds(sb->cg, false, enter, AL_CGROUP_MAX_FDS, err);
		if (n_cg >= 0 &&
		    al_cgroup_task_fds(sb->cg, true, leave, AL_CGROUP_MAX_FDS, err) != n_cg) {
			for (int i = 0; i < n_cg; i++)
				close(enter[i]);
			n_cg = -1;
		}
		if (n_cg < 0) {
			fdset_close(&f);
			return -EIO;
		}
	}
	if (cgfd >= 0) {
		/* v2: born inside the run's cgroup, its namespace rooted there. */
		args.flags |= CLONE_INTO_CGROUP;
		args.cgroup = (uint64_t)cgfd;
	} else if (n_cg > 0) {
		/* v1: the child moves itself in, then enters a new cgroup
		 * namespace (step "cgroup"). */
		args.flags &= ~(uint64_t)CLONE_NEWCGROUP;
	}
	/* The engine's network namespace: the child is born in it (the
	 * setns needs our capabilities, before the id change), and we go
	 * back to ours right after. */
	if (st->join) {
		args.flags &= ~(uint64_t)CLONE_NEWNET;
		if ((r = al_netns_join_enter(st->join, err)) < 0) {
			fdset_close(&f);
			return r;
		}
	}
	if ((r = become_owner(st->lowered, true, &saved, err)) < 0) {
		if (st->join)
			al_netns_join_leave(st->join);
		fdset_close(&f);
		return r;
	}
	pid = al_sys_clone3(&args, sizeof(args));
	if (pid != 0)
		become_owner(st->lowered, false, &saved, NULL);
	if (pid != 0 && st->join)
		al_netns_join_leave(st->join);
	if (pid > 0)
		al_log_phase("cloned into new namespaces");
	if (pid != 0) {
		for (int i = 0; i < n_cg; i++) {
			close(enter[i]);
			close(leave[i]);
		}
		/* The child has its own copies of the inputs now. */
		al_native_close_inputs(TAKE_PTR(st->inputs), st->lowered->n_inputs);
	}
	if (pid < 0) {
		r = clone_error(errno, err);
		fdset_close(&f);
		return r;
	}
	if (pid == 0) {
		/* Drop the supervisor's ends at once: holding them would hide
		 * the supervisor's death (no EOF) from a child blocked waiting
		 * for it. */
		close(f.sync[0]);
		al_closep(&f.in[1]);
		al_closep(&f.out[0]);
		al_closep(&f.errp[0]);
		struct al_child_fds fds = {.sync = f.sync[1],
					   .stdin_rd = f.in[0],
					   .stdout_wr = f.out[1],
					   .stderr_wr = f.errp[1],
					   .n_cg = (size_t)n_cg,
					   .inputs = st->inputs,
					   .session = sb->session};
		memcpy(fds.cg_enter, enter, sizeof(int) * (size_t)n_cg);
		memcpy(fds.cg_leave, leave, sizeof(int) * (size_t)n_cg);
		al_sandbox_child(sb->plan, st->lowered, &fds);
	}
	st->pid = (pid_t)pid;
	st->pidfd = pidfd;
	fdset_hand_over(&f, sb);
	if (st->join && (r = al_netns_join_give_pidfd(st->join, pidfd, err)) < 0)
		return r;

	if ((r = write_maps(st->lowered, sb->plan->rootless, (pid_t)pid, err)) < 0)
		return r;
	/* For the checks before exec (verify.c): rootless, /proc/PID/ns of
	 * an init that made itself not dumpable is closed to us. */
	char ns[64];
	snprintf(ns, sizeof(ns), "/proc/%ld/ns/user", pid);
	st->userns = open(ns, O_RDONLY | O_CLOEXEC);
	if (st->userns < 0)
		return al_error_setsys(err, errno, "open %s", ns);
	if (send(st->sync, &go, sizeof(go), MSG_NOSIGNAL) != sizeof(go)) {
		/* A step before wait-for-parent failed: say which. */
		struct al_sync_msg m;
		int e = errno;
		if (recv(st->sync, &m, sizeof(m), MSG_DONTWAIT) == (ssize_t)sizeof(m) &&
		    m.type == AL_SYNC_ERROR) {
			m.step[sizeof(m.step) - 1] = m.msg[sizeof(m.msg) - 1] = '\0';
			return al_error_set(err, m.err ? m.err : EIO,
					    "sandbox setup failed at step \"%s\": %s%s%s", m.step,
					    m.msg, m.err ? ": " : "", m.err ? strerror(m.err) : "");
		}
		return al_error_setsys(err, e, "releasing the sandbox child");
	}
	al_log_phase("id maps written, child released");
	/* Clear what a killed supervisor left behind (one readdir per
	 * hierarchy), now that the child sets up on its own: the work
	 * overlaps its setup instead of delaying its clone. Ours is never
	 * taken (its pid is alive), and where it is the only one no directory
	 * is read. */
	al_sandbox_gc_cgroups(sb);
	return al_monitor_start(sb, err);
}

static void native_destroy(struct al_sandbox *sb)
{
	struct al_backend_state *st = sb->state;
	struct al_error err = {0};

	if (!st) {
		/* prepare never got as far as its state: nothing else exists */
		al_cgroup_destroy(TAKE_PTR(sb->cg), NULL);
		return;
	}
	al_monitor_release_all(sb);
	/* Nothing of the sandbox runs any more: its rules leave the engine's
	 * namespace, which outlives it. */
	al_netns_join_free(TAKE_PTR(st->join));
	if (st->lowered)
		al_native_close_inputs(TAKE_PTR(st->inputs), st->lowered->n_inputs);
	if (al_cgroup_destroy(TAKE_PTR(sb->cg), &err) < 0)
		al_warn("%s", err.msg);
	al_native_plan_free(TAKE_PTR(st->lowered));
	/* The slot goes back once nothing of the run can hold what its ids
	 * count: init was reaped (its pid namespace with it), or it reported
	 * the end, having killed and reaped every other process, and is in
	 * _exit, where it holds no pipe, inotify instance or descriptor in
	 * flight (not waiting for that exit keeps it off every run's end).
	 * Otherwise the file stays for gc, which first looks for processes
	 * with the slot's ids. */
	al_ids_release(&st->slot, st->pid < 0 || st->reaped || st->emptied);
	sb->remove_dirfd = -1;
	al_native_state_free(sb);
}

const struct al_backend_ops al_backend_native = {
    .name = "native",
    .facts = &al_native_facts,
    .usable = al_native_usable,
    .probe = native_probe,
    .describe = native_describe,
    .prepare = native_prepare,
    .start = native_start,
    .release = al_monitor_release,
    .stop = al_monitor_stop,
    .kill = al_monitor_kill,
    .finish = al_monitor_finish,
    .destroy = native_destroy,
    .exec = al_monitor_exec,
    .exec_signal = al_monitor_exec_signal,
    .pause = al_monitor_pause,
};
