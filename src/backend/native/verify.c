/* Fail closed, verified: after the child has applied every layer and
 * before it may exec, look at it from outside (through /proc/PID, as the
 * supervisor sees it) and compare with the plan. Any layer not in force
 * stops the run. The same checks print as a table in `airlock verify`. */
#include "backend/native/verify.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/sys.h"
#include "core/util.h"
#include "ids/slots.h"
#include "policy/kmem.h"

static struct al_layer_check *add(struct al_run_result *res, const char *layer, bool ok,
				  const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static struct al_layer_check *add(struct al_run_result *res, const char *layer, bool ok,
				  const char *fmt, ...)
{
	struct al_layer_check *c;
	va_list ap;

	if (res->n_checks >= AL_MAX_CHECKS)
		return NULL;
	c = &res->checks[res->n_checks++];
	c->layer = layer;
	c->in_force = ok;
	va_start(ap, fmt);
	vsnprintf(c->detail, sizeof(c->detail), fmt, ap);
	va_end(ap);
	return c;
}

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void unescape(char *s)
{
	char *w = s;
	for (char *r = s; *r; r++) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] && r[3]) {
			*w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
			r += 3;
		} else {
			*w++ = *r;
		}
	}
	*w = '\0';
}

static bool has_opt(const char *opts, const char *want)
{
	size_t n = strlen(want);
	for (const char *p = opts; p && *p;) {
		if (strncmp(p, want, n) == 0 && (p[n] == ',' || p[n] == '\0'))
			return true;
		p = strchr(p, ',');
		if (p)
			p++;
	}
	return false;
}

struct want_mount {
	const char *path; /* in the sandbox's view */
	uint64_t attr;
	bool recursive; /* host binds: their host submounts come along */
	bool seen;
};

static const char *visible(const char *target)
{
	return strncmp(target, "/newroot", 8) == 0 ? (target[8] ? target + 8 : "/") : NULL;
}

static const struct al_mount_op *find_op(const struct al_native_plan *p, const char *path)
{
	const struct al_mount_op *found = NULL;
	for (size_t i = 0; i < p->n_ops; i++) {
		const struct al_mount_op *op = &p->ops[i];
		const char *v = visible(op->target);
		if (v && strcmp(v, path) == 0 && al_op_mounts(op->kind))
			found = op;
	}
	return found;
}

static void check_mounts(const struct al_native_plan *p, pid_t pid, struct al_run_result *res)
{
	char path[64];
	_cleanup_fclose_ FILE *f = NULL;
	char line[8192];
	size_t n_expected = 1, n_seen = 0;

	for (size_t i = 0; i < p->n_ops; i++)
		if (visible(p->ops[i].target) && al_op_mounts(p->ops[i].kind))
			n_expected++;
	snprintf(path, sizeof(path), "/proc/%d/mountinfo", (int)pid);
	f = fopen(path, "re");
	if (!f) {
		add(res, "mounts", false, "cannot read %s: %s", path, strerror(errno));
		return;
	}
	while (fgets(line, sizeof(line), f)) {
		char *fields[7] = {0}, *save = NULL;
		size_t k = 0;
		for (char *t = strtok_r(line, " ", &save); t && k < 7;
		     t = strtok_r(NULL, " ", &save))
			fields[k++] = t;
		if (k < 6)
			continue;
		char *mp = fields[4], *opts = fields[5];
		unescape(mp);
		n_seen++;
		if (strcmp(mp, "/") == 0) {
			/* A container's root is writable unless its plan says. */
			if (p->rooted && !p->ops[p->root_op].seal)
				continue;
			if (!has_opt(opts, "ro")) {
				add(res, "mounts", false, "/ is mounted %s, not read-only", opts);
				return;
			}
			continue;
		}
		const struct al_mount_op *op = find_op(p, mp);
		if (!op) {
			/* A host submount under a recursive host bind is expected. */
			bool under = false;
			for (size_t i = 0; i < p->n_ops && !under; i++) {
				const char *v = visible(p->ops[i].target);
				under = v && p->ops[i].kind == AL_OP_BIND && p->ops[i].ino &&
					al_path_is_under(mp, v) && strcmp(mp, v) != 0;
			}
			/* On a container's root a mountpoint may be a link in
			 * its image, resolved inside it (rooted.c): the mount
			 * is then elsewhere, but airlock's all the same. */
			if (!under && p->rooted && has_opt(opts, "nosuid"))
				under = true;
			if (!under) {
				add(res, "mounts", false, "unexpected mount at %s", mp);
				return;
			}
			n_expected++;
			continue;
		}
		struct {
			uint64_t bit;
			const char *on, *off;
		} flags[] = {{MOUNT_ATTR_RDONLY, "ro", "rw"},
			     {MOUNT_ATTR_NOSUID, "nosuid", NULL},
			     {MOUNT_ATTR_NODEV, "nodev", NULL},
			     {MOUNT_ATTR_NOEXEC, "noexec", NULL}};
		for (size_t i = 0; i < AL_ARRAY_SIZE(flags); i++) {
			bool want = op->attr & flags[i].bit;
			if (want && !has_opt(opts, flags[i].on)) {
				add(res, "mounts", false, "%s is %s, lacking %s", mp, opts,
				    flags[i].on);
				return;
			}
			if (!want && flags[i].off && !has_opt(opts, flags[i].off)) {
				add(res, "mounts", false, "%s is %s, expected %s", mp, opts,
				    flags[i].off);
				return;
			}
		}
	}
	/* A container's masked and read-only paths are mounts only where
	 * they exist. */
	if (n_seen != n_expected && !p->rooted) {
		add(res, "mounts", false, "%zu mounts inside, the plan has %zu", n_seen,
		    n_expected);
		return;
	}
	add(res, "mounts", true, "%zu mounts, each with its planned flags; / %s", n_seen,
	    p->rooted && !p->ops[p->root_op].seal ? "the container's, writable" : "read-only");
}

/* "Key:\tvalue" from /proc/PID/status. */
static bool status_field(const char *status, const char *key, char *out, size_t len)
{
	size_t n = strlen(key);
	for (const char *l = status; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		if (strncmp(l, key, n) == 0 && l[n] == ':') {
			const char *v = l + n + 1;
			while (*v == '\t' || *v == ' ')
				v++;
			size_t m = strcspn(v, "\n");
			snprintf(out, len, "%.*s", (int)m, v);
			return true;
		}
	}
	return false;
}

static void check_status(const struct al_native_plan *np, pid_t pid, int userns,
			 struct al_run_result *res)
{
	char path[64], status[8192], v[128], want[128];
	static const char *const caps[] = {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"};
	bool caps_ok = true;
	const char *bad_cap = "";

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (al_read_file(path, status, sizeof(status)) <= 0) {
		add(res, "identity", false, "cannot read %s", path);
		return;
	}
	const struct al_host_ids *ids = &np->ids;
	snprintf(want, sizeof(want), "%u\t%u\t%u\t%u", ids->uid, ids->uid, ids->uid, ids->uid);
	bool uid_ok = status_field(status, "Uid", v, sizeof(v)) && strcmp(v, want) == 0;
	snprintf(want, sizeof(want), "%u\t%u\t%u\t%u", ids->gid, ids->gid, ids->gid, ids->gid);
	bool gid_ok = status_field(status, "Gid", v, sizeof(v)) && strcmp(v, want) == 0;
	uid_t owner = (uid_t)-1;
	bool owner_ok =
	    userns >= 0 && ioctl(userns, NS_GET_OWNER_UID, &owner) == 0 && owner == ids->owner;
	char slot[96] = "";
	if (ids->slot >= 0)
		snprintf(slot, sizeof(slot), " (slot %d of the pool: host ids %u-%u)", ids->slot,
			 ids->root_uid, ids->root_uid + AL_IDS_SLOT_SIZE - 1);
	else if (!ids->rootless)
		snprintf(slot, sizeof(slot), " (the fixed range %u-%u)", ids->root_uid,
			 ids->root_uid + AL_IDS_SLOT_SIZE - 1);
	if (!uid_ok || !gid_ok)
		add(res, "identity", false, "the sandbox's host uid/gid are not %u/%u", ids->uid,
		    ids->gid);
	else if (!owner_ok)
		add(res, "identity", false,
		    "its user namespace is owned by host uid %d, not the run's %u", (int)owner,
		    ids->owner);
	else
		add(res, "identity", true,
		    "uid/gid %u/%u inside = host %u/%u%s; user namespace owned by %u%s",
		    ids->rootless ? AL_SANDBOX_UID : ids->uid - ids->root_uid,
		    ids->rootless ? AL_SANDBOX_GID : ids->gid - ids->root_gid, ids->uid, ids->gid,
		    slot, ids->owner, ids->rootless ? " (rootless: you)" : ", never host root");

	for (size_t i = 0; i < AL_ARRAY_SIZE(caps); i++) {
		if (!status_field(status, caps[i], v, sizeof(v)) || strtoull(v, NULL, 16) != 0) {
			caps_ok = false;
			bad_cap = caps[i];
		}
	}
	if (caps_ok)
		add(res, "capabilities", true, "none in any set");
	else
		add(res, "capabilities", false, "%s is not empty", bad_cap);
	bool nnp = status_field(status, "NoNewPrivs", v, sizeof(v)) && strcmp(v, "1") == 0;
	add(res, "no_new_privs", nnp, "%s", nnp ? "set" : "not set");
	bool sc = status_field(status, "Seccomp", v, sizeof(v)) && strcmp(v, "2") == 0;
	if (sc)
		add(res, "seccomp", true, "filter mode, %u instructions, allowlist of %zu calls",
		    np->seccomp.len, np->seccomp_summary.allowed);
	else
		add(res, "seccomp", false, "Seccomp: %s (expected 2, filter mode)", v);
}

/* A process that enters the sandbox's user namespace reads its limits
 * there (a /proc/sys/user value is the reader's namespace's). It shares
 * our memory (CLONE_VM, suspended until it exits) and only makes system
 * calls. */
struct ns_read {
	int userns;
	size_t n;
	const char *name[AL_NS_LIMITS_MAX];
	char text[AL_NS_LIMITS_MAX][24]; /* "" when the file is missing */
	int err;
};

static int read_ns_limits(void *arg)
{
	struct ns_read *r = arg;

	if (setns(r->userns, CLONE_NEWUSER) < 0) {
		r->err = errno;
		return 1;
	}
	int dir = open("/proc/sys/user", O_PATH | O_DIRECTORY | O_CLOEXEC);
	for (size_t i = 0; i < r->n && dir >= 0; i++) {
		int fd = openat(dir, r->name[i], O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t k = read(fd, r->text[i], sizeof(r->text[i]) - 1);
		r->text[i][k > 0 ? k : 0] = '\0';
		close(fd);
	}
	if (dir >= 0)
		close(dir);
	return 0;
}

static void check_ns_limits(const struct al_plan *p, int userns, struct al_run_result *res)
{
	struct al_clone_stack stack = {0};
	struct al_ns_limit lim[AL_NS_LIMITS_MAX];
	struct ns_read r = {.userns = userns};
	const char *bad = NULL;
	char *top = NULL;
	long pid = -1;
	int e = EBADF;

	r.n = al_plan_ns_limits(p, lim);
	for (size_t i = 0; i < r.n; i++)
		r.name[i] = lim[i].name;
	/* CLONE_VFORK stops only this thread: another run's thread could be
	 * here at the same time, so the reader gets a stack of its own,
	 * unmapped once it has exited. */
	if (userns >= 0 && (top = al_clone_stack_new(&stack, 16384)))
		pid = clone(read_ns_limits, top, CLONE_VM | CLONE_VFORK | SIGCHLD, &r);
	if (pid < 0) {
		if (userns >= 0)
			e = errno;
		al_clone_stack_free(&stack);
		add(res, "userns limits", false, "cannot read them: %s", strerror(e));
		return;
	}
	while (waitpid((pid_t)pid, NULL, 0) < 0 && errno == EINTR)
		;
	al_clone_stack_free(&stack);
	if (r.err) {
		add(res, "userns limits", false, "cannot enter the sandbox's user namespace: %s",
		    strerror(r.err));
		return;
	}
	for (size_t i = 0; i < r.n && !bad; i++) {
		char *end;
		if (!r.text[i][0] && lim[i].optional)
			continue;
		unsigned long long v = strtoull(r.text[i], &end, 10);
		if (!r.text[i][0] || (*end && *end != '\n') || v != lim[i].value)
			bad = lim[i].name;
	}
	if (bad)
		add(res, "userns limits", false, "%s is not as planned", bad);
	else
		add(res, "userns limits", true,
		    "inotify %llu instances, %llu watches; no user namespace or fanotify group "
		    "can be made",
		    (unsigned long long)p->inotify_instances,
		    (unsigned long long)p->inotify_watches);
}

/* In the engine's namespace it was given, where the supervisor
 * installed airlock's rules (the monitor refuses to start without them). */
static void check_joined_network(const struct al_native_plan *np, pid_t pid,
				 struct al_run_result *res)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid);
	if (stat(path, &st) < 0) {
		add(res, "network", false, "cannot stat %s", path);
		return;
	}
	add(res, "network", st.st_dev == np->netns_dev && st.st_ino == np->netns_ino, "%s",
	    st.st_ino == np->netns_ino ? "the engine's namespace, airlock's rules installed in it"
				       : "not in the engine's namespace it was given");
}

static void check_network(const struct al_native_plan *np, pid_t pid, struct al_run_result *res)
{
	char path[64], buf[4096];
	int n_if = 0;
	bool only_lo = true;

	if (np->netns_joined) {
		check_joined_network(np, pid, res);
		return;
	}

	snprintf(path, sizeof(path), "/proc/%d/net/dev", (int)pid);
	if (al_read_file(path, buf, sizeof(buf)) <= 0) {
		add(res, "network", false, "cannot read %s", path);
		return;
	}
	/* Two header lines, then "  name: counters". */
	char *line = strchr(buf, '\n');
	line = line ? strchr(line + 1, '\n') : NULL;
	for (; line && line[1]; line = strchr(line + 1, '\n')) {
		char *name = line + 1;
		while (*name == ' ')
			name++;
		size_t len = strcspn(name, ":");
		n_if++;
		if (len != 2 || strncmp(name, "lo", 2) != 0)
			only_lo = false;
	}
	add(res, "network", only_lo && n_if == 1, "%s",
	    only_lo ? "own namespace, loopback only" : "interfaces besides lo are present");
}

static void check_cgroup(const struct al_cgroup *cg, pid_t pid, struct al_run_result *res)
{
	char path[64], buf[4096];
	const char *mem = al_cgroup_path(cg, "memory");

	if (!cg) {
		add(res, "cgroup", false, "%s",
		    "no cgroup (limits memory, pids, cpu not enforced)");
		return;
	}
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	if (al_read_file(path, buf, sizeof(buf)) <= 0 || !mem) {
		add(res, "cgroup", false, "cannot read %s", path);
		return;
	}
	/* Our view of its cgroup path ends with the run's directory name. */
	const char *id = strrchr(mem, '/');
	bool in = id && strstr(buf, id);
	if (in)
		add(res, "cgroup", true, "in %s, limits read back as written",
		    al_cgroup_describe(cg));
	else
		add(res, "cgroup", false, "not in %s", al_cgroup_describe(cg));
}

/* A row of /proc/PID/limits ("Max open files  1024  2048  files"): its
 * soft and hard values. */
static bool limits_are(const char *text, const char *row, uint64_t soft, uint64_t hard)
{
	const char *l = strstr(text, row);
	char *end;

	if (!l || strlen(l) < 26 || !isdigit((unsigned char)l[26]))
		return false;
	if (strtoull(l + 26, &end, 10) != soft)
		return false;
	while (*end == ' ')
		end++;
	return isdigit((unsigned char)*end) && strtoull(end, NULL, 10) == hard;
}

static bool limit_is(const char *text, const char *row, uint64_t want)
{
	return limits_are(text, row, want, want);
}

static void check_rlimits(const struct al_plan *p, pid_t pid, struct al_run_result *res)
{
	char path[64], buf[4096];

	snprintf(path, sizeof(path), "/proc/%d/limits", (int)pid);
	if (al_read_file(path, buf, sizeof(buf)) <= 0) {
		add(res, "rlimits", false, "cannot read %s", path);
		return;
	}
	bool ok =
	    limit_is(buf, "Max core file size", 0) &&
	    limits_are(buf, "Max open files",
		       p->open_files_soft ? p->open_files_soft : p->open_files, p->open_files) &&
	    limit_is(buf, "Max msgqueue size", p->msgqueue_bytes) &&
	    limit_is(buf, "Max pending signals", p->sigpending) &&
	    limit_is(buf, "Max locked memory", p->memlock_bytes);
	add(res, "rlimits", ok,
	    "no core dumps, %" PRIu64 " open files, %" PRIu64 "K message queues, %" PRIu64
	    " pending signals, %" PRIu64 "K locked",
	    p->open_files, p->msgqueue_bytes >> 10, p->sigpending, p->memlock_bytes >> 10);
}

/* Socket buffers: what the cgroup does with them, read back from the
 * run's own cgroup (kmem.h has the bound). */
static void check_kernel_memory(const struct al_plan *p, const struct al_cgroup *cg,
				struct al_run_result *res)
{
	enum al_sockmem mode = al_cgroup_socket_mode(cg);
	const char *mem = al_cgroup_path(cg, "memory");
	char detail[320];
	bool ok = false;
	uint64_t v = 0;

	al_kmem_describe(p, mode, detail, sizeof(detail));
	if (mode == AL_SOCKMEM_LIMITED && mem) {
		_cleanup_free_ char *f = xasprintf("%s/memory.kmem.tcp.limit_in_bytes", mem);
		char buf[32];
		if (al_read_file(f, buf, sizeof(buf)) > 0)
			v = strtoull(buf, NULL, 10);
		ok = v == ((al_kmem_socket_limit(p) + 4095) & ~4095ULL);
		if (!ok)
			snprintf(detail, sizeof(detail), "%s reads %" PRIu64 ", not %" PRIu64, f, v,
				 al_kmem_socket_limit(p));
	} else if (mode == AL_SOCKMEM_CHARGED) {
		ok = true;
	} else {
		ok = p->kernel_memory_best_effort;
	}
	add(res, "kernel memory", ok, "%s", detail);
}

int al_verify_child(const struct al_plan *plan, const struct al_native_plan *np, pid_t pid,
		    int limits_userns, int userns, int landlock_abi, const struct al_cgroup *cg,
		    struct al_run_result *res)
{
	int bad = 0;

	res->n_checks = 0;
	check_mounts(np, pid, res);
	check_status(np, pid, userns, res);
	if (limits_userns >= 0)
		check_ns_limits(plan, limits_userns, res);
	if (np->landlock_abi == 0 && !plan->landlock_required)
		add(res, "landlock", true, "%s",
		    "not available; best-effort was asked for in words");
	else
		add(res, "landlock", landlock_abi == np->landlock_abi,
		    "ABI %d ruleset, %zu path rules%s", landlock_abi, np->n_ll_rules,
		    np->landlock_scoped ? ", scoped signals and abstract sockets" : "");
	check_network(np, pid, res);
	check_rlimits(plan, pid, res);
	if (cg || plan->cgroup_required) {
		check_cgroup(cg, pid, res);
		check_kernel_memory(plan, cg, res);
	}
	for (size_t i = 0; i < res->n_checks; i++)
		bad += !res->checks[i].in_force;
	return bad;
}
