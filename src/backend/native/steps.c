/* The child's setup steps, in the order of child.c's step table. Paths in the
 * mount steps are staging paths (see policy/plan.h). */
#include "backend/native/steps.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backend/native/netns.h"
#include "core/sys.h"
#include "cred/store.h"
#include "net/layout.h"

#define SYNC_FD 3
#define STAGING "/tmp"

#define fail al_step_fail

int al_step_fail(struct al_child *c, int e, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->msg, sizeof(c->msg), fmt, ap);
	va_end(ap);
	return -e;
}

int step_wait_parent(struct al_child *c)
{
	struct al_sync_msg m;
	ssize_t n;

	do
		n = recv(c->sync, &m, sizeof(m), 0);
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(m) || m.type != AL_SYNC_GO)
		return fail(c, n < 0 ? errno : EPIPE, "waiting for the supervisor");
	return 0;
}

int step_die_with_parent(struct al_child *c)
{
	/* Any credential change clears it: set again after become-ns-root
	 * and drop-privileges. Before it is set, a supervisor that dies shows
	 * as EOF on the sync socket, where every blocking step waits. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		return fail(c, errno, "prctl(PR_SET_PDEATHSIG)");
	/* This process is a copy of the supervisor's memory, the run's
	 * secrets included: it needs none of them. */
	al_cred_wipe_copies();
	return 0;
}

int step_cgroup_namespace(struct al_child *c)
{
	/* cgroup v1 has no CLONE_INTO_CGROUP: move ourselves in before doing
	 * anything else (so everything we allocate is charged there), then
	 * root our cgroup namespace at it. On v2 clone3 did both. */
	for (size_t i = 0; i < c->fds->n_cg; i++) {
		int fd = c->fds->cg_enter[i];
		if (write(fd, "0", 1) != 1)
			return fail(c, errno, "moving into the run's cgroup");
		close(fd);
	}
	if (c->fds->n_cg && unshare(CLONE_NEWCGROUP) < 0)
		return fail(c, errno, "unshare(CLONE_NEWCGROUP)");
	return 0;
}

int step_become_ns_root(struct al_child *c)
{
	/* As host root, sandbox ids 0 and 1000 are mapped; become 0 so the
	 * files we create belong to a mapped id. Rootless, our own id is
	 * already mapped (as 1000) and we hold every capability in the
	 * namespace, so there is nothing to do. */
	umask(0);
	if (c->plan->rootless)
		return 0;
	if (setresgid(0, 0, 0) < 0)
		return fail(c, errno, "setresgid(0)");
	if (setresuid(0, 0, 0) < 0)
		return fail(c, errno, "setresuid(0)");
	if (setgroups(0, NULL) < 0)
		return fail(c, errno, "setgroups(0)");
	/* The id change cleared the parent-death signal. */
	return step_die_with_parent(c);
}

int step_ns_limits(struct al_child *c)
{
	/* This user namespace's own limits (ours to set: we hold
	 * CAP_SYS_RESOURCE in it from its creation, the command will not),
	 * through the host's /proc, still our own: a sysctl under
	 * /proc/sys/user is the writer's namespace's. */
	struct al_ns_limit lim[AL_NS_LIMITS_MAX];
	size_t n = al_plan_ns_limits(c->plan, lim);
	int dir = open("/proc/sys/user", O_PATH | O_DIRECTORY | O_CLOEXEC);

	if (dir < 0)
		return fail(c, errno,
			    "opening /proc/sys/user to bound the sandbox's user namespace");
	for (size_t i = 0; i < n; i++) {
		char val[32];
		int len = snprintf(val, sizeof(val), "%llu", (unsigned long long)lim[i].value);
		int fd = openat(dir, lim[i].name, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0 && errno == ENOENT && lim[i].optional)
			continue;
		if (fd < 0) {
			int e = errno;
			close(dir);
			return fail(c, e,
				    "opening /proc/sys/user/%s to bound the sandbox's user "
				    "namespace",
				    lim[i].name);
		}
		ssize_t w = write(fd, val, (size_t)len);
		int e = errno;
		close(fd);
		if (w != len) {
			close(dir);
			return fail(c, w < 0 ? e : EIO, "setting /proc/sys/user/%s to %s",
				    lim[i].name, val);
		}
	}
	close(dir);
	return 0;
}

int step_stdio(struct al_child *c)
{
	const struct al_child_fds *f = c->fds;

	if (c->plan->tty) {
		/* No pipes: the terminal step puts the sandbox's pty here. Until
		 * then /dev/null, so nothing of airlock's stdio (a host terminal)
		 * stays open past this step. */
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0)
			return fail(c, errno, "/dev/null as stdio until the terminal is made");
		close(null);
	} else if (dup2(f->stdin_rd, 0) < 0 || dup2(f->stdout_wr, 1) < 0 ||
		   dup2(f->stderr_wr, 2) < 0) {
		return fail(c, errno, "dup2 of the stdio pipes");
	}
	/* Park what init keeps at fixed numbers: the sync socket at 3, the
	 * cgroup "leave" fds at 4.. (via high numbers, so no dup3 clobbers a
	 * source not yet moved). */
	int tmp[1 + AL_CGROUP_MAX_FDS];
	tmp[0] = fcntl(c->sync, F_DUPFD_CLOEXEC, 100);
	for (size_t i = 0; i < f->n_cg; i++)
		tmp[1 + i] = fcntl(f->cg_leave[i], F_DUPFD_CLOEXEC, 100);
	for (size_t i = 0; i <= f->n_cg; i++) {
		if (tmp[i] < 0 || dup3(tmp[i], SYNC_FD + (int)i, O_CLOEXEC) < 0)
			return fail(c, errno, "parking the sync socket and cgroup fds");
		close(tmp[i]);
		if (i > 0)
			c->cg_leave[i - 1] = SYNC_FD + (int)i;
	}
	c->sync = SYNC_FD;
	c->n_cg = f->n_cg;
	return 0;
}

int step_close_fds(struct al_child *c)
{
	if (al_sys_close_range(SYNC_FD + 1 + (unsigned)c->n_cg, ~0U, 0) < 0)
		return fail(c, errno, "close_range");
	return 0;
}

int step_private_mounts(struct al_child *c)
{
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return fail(c, errno, "making / private");
	return 0;
}

/* A throw-away tmpfs becomes / for the time of the build; the host root
 * stays reachable at /oldroot until step_pivot_root detaches it. */
int step_staging_root(struct al_child *c)
{
	if (mount("airlock", STAGING, "tmpfs", MS_NOSUID | MS_NODEV,
		  "size=64k,nr_inodes=32,mode=0755") < 0)
		return fail(c, errno, "mounting the staging tmpfs on " STAGING);
	if (mkdir(STAGING "/oldroot", 0755) < 0 || mkdir(STAGING "/newroot", 0755) < 0 ||
	    mkdir(STAGING "/scratch", 0755) < 0)
		return fail(c, errno, "mkdir in the staging tmpfs");
	/* A container's own root is bound there instead (rooted.c). */
	if (!c->np->rooted && mount("airlock-root", STAGING "/newroot", "tmpfs",
				    MS_NOSUID | MS_NODEV, "size=1m,nr_inodes=4096,mode=0755") < 0)
		return fail(c, errno, "mounting the root tmpfs");
	if (al_sys_pivot_root(STAGING, STAGING "/oldroot") < 0)
		return fail(c, errno, "pivot_root onto the staging tmpfs");
	if (chdir("/") < 0)
		return fail(c, errno, "chdir /");
	return 0;
}

static unsigned long ms_flags(uint64_t attr)
{
	unsigned long f = 0;
	if (attr & MOUNT_ATTR_RDONLY)
		f |= MS_RDONLY;
	if (attr & MOUNT_ATTR_NOSUID)
		f |= MS_NOSUID;
	if (attr & MOUNT_ATTR_NODEV)
		f |= MS_NODEV;
	if (attr & MOUNT_ATTR_NOEXEC)
		f |= MS_NOEXEC;
	return f;
}

static int owner(struct al_child *c, const struct al_mount_op *op)
{
	if (op->sandbox_owned && !c->plan->rootless &&
	    chown(op->target, AL_SANDBOX_UID, AL_SANDBOX_GID) < 0)
		return fail(c, errno, "chown %s", op->what);
	return 0;
}

static int make_placeholder(struct al_child *c, const struct al_mount_op *op)
{
	if (op->dir) {
		if (mkdir(op->target, 0755) < 0 && errno != EEXIST)
			return fail(c, errno, "mkdir mountpoint for %s", op->what);
		return 0;
	}
	int fd = open(op->target, O_CREAT | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0444);
	if (fd < 0)
		return fail(c, errno, "creating mountpoint for %s", op->what);
	close(fd);
	return 0;
}

/* An input the supervisor copies into the scratch once the tree is built:
 * bind its empty part (/scratch/ro/N) read-only now. */
static int make_copy_part(struct al_child *c, const struct al_mount_op *op)
{
	if (mkdir("/scratch/ro", 0755) < 0 && errno != EEXIST)
		return fail(c, errno, "mkdir /scratch/ro for %s", op->what);
	if (op->dir) {
		if (mkdir(op->source, 0755) < 0)
			return fail(c, errno, "mkdir %s for %s", op->source, op->what);
		return 0;
	}
	int fd = open(op->source, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return fail(c, errno, "creating %s for %s", op->source, op->what);
	close(fd);
	return 0;
}

/* Bind with the new mount API: the clone is detached, made read-only (or
 * whatever the plan says) and only then attached, so it is never visible
 * with weaker flags. A host source is opened without following any
 * symlink and must still be the inode the parent resolved. */
int al_step_bind_tree(struct al_child *c, const struct al_mount_op *op, int *ret)
{
	struct open_how how = {.flags = O_PATH | O_CLOEXEC,
			       .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
	struct mount_attr attr = {.attr_set = op->attr};
	struct stat st;
	int src, tree, r;

	if (op->copied && (r = make_copy_part(c, op)) < 0)
		return r;
	if (op->input >= 0 && !op->copied) {
		/* Opened and idmapped by the supervisor (inputs.c); the child
		 * owns its descriptor (closed by the caller). */
		tree = c->fds->inputs ? c->fds->inputs[op->input] : -1;
		if (tree < 0)
			return fail(c, EBADF, "%s was not opened by the supervisor", op->what);
		*ret = tree;
		return 0;
	}
	src = al_sys_openat2(AT_FDCWD, op->source, &how, sizeof(how));
	if (src < 0)
		return fail(c, errno, "opening %s (%s)", op->what, op->source + 8);
	if (op->ino) {
		if (fstat(src, &st) < 0) {
			close(src);
			return fail(c, errno, "stat %s", op->what);
		}
		if (st.st_dev != op->dev || st.st_ino != op->ino) {
			close(src);
			return fail(c, ESTALE, "%s changed between planning and mounting",
				    op->what);
		}
	}
	tree = (int)syscall(SYS_open_tree, src, "",
			    OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
	close(src);
	if (tree < 0)
		return fail(c, errno, "open_tree %s", op->what);
	if (op->attr &&
	    al_sys_mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof(attr)) < 0) {
		r = fail(c, errno, "setting flags on %s", op->what);
		close(tree);
		return r;
	}
	*ret = tree;
	return 0;
}

static int do_bind(struct al_child *c, const struct al_mount_op *op)
{
	int tree, r;

	if ((r = al_step_bind_tree(c, op, &tree)) < 0)
		return r;
	if ((r = make_placeholder(c, op)) < 0) {
		close(tree);
		return r;
	}
	if (syscall(SYS_move_mount, tree, "", AT_FDCWD, op->target, MOVE_MOUNT_F_EMPTY_PATH) < 0) {
		r = fail(c, errno, "attaching %s", op->what);
		close(tree);
		return r;
	}
	close(tree);
	return 0;
}

static int do_file(struct al_child *c, const struct al_mount_op *op)
{
	int fd = open(op->target, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, op->mode);
	if (fd < 0)
		return fail(c, errno, "creating %s", op->what);
	if (al_write_all(fd, op->source, op->len) < 0) {
		int e = errno;
		close(fd);
		return fail(c, e, "writing %s", op->what);
	}
	close(fd);
	return owner(c, op);
}

int al_step_op(struct al_child *c, const struct al_mount_op *op)
{
	int r;

	switch (op->kind) {
	case AL_OP_MKDIR:
		if (mkdir(op->target, op->mode) < 0 && errno != EEXIST)
			return fail(c, errno, "mkdir %s for %s", op->target, op->what);
		if ((r = owner(c, op)) < 0)
			return r;
		break;
	case AL_OP_FILE:
		if ((r = do_file(c, op)) < 0)
			return r;
		break;
	case AL_OP_SYMLINK:
		if (symlink(op->source, op->target) < 0)
			return fail(c, errno, "symlink %s", op->what);
		break;
	case AL_OP_TMPFS:
		if (mount("tmpfs", op->target, "tmpfs",
			  ms_flags(op->seal ? op->attr & ~(uint64_t)MOUNT_ATTR_RDONLY : op->attr),
			  op->source) < 0)
			return fail(c, errno, "mounting tmpfs for %s", op->what);
		break;
	case AL_OP_PROC:
		if (mount("proc", op->target, "proc", ms_flags(op->attr), NULL) < 0)
			return fail(c, errno, "mounting %s", op->what);
		break;
	case AL_OP_DEVPTS:
		if (mount("devpts", op->target, "devpts", ms_flags(op->attr), op->source) < 0)
			return fail(c, errno, "mounting %s", op->what);
		break;
	case AL_OP_BIND:
		if ((r = do_bind(c, op)) < 0)
			return r;
		break;
	case AL_OP_MASK:
	case AL_OP_RDONLY:
	case AL_OP_SPECIAL:
		return fail(c, EINVAL, "%s outside a container's root", op->what);
	}
	return 0;
}

int step_build_root(struct al_child *c)
{
	const struct al_native_plan *np = c->np;
	int r;

	if (np->rooted)
		r = al_rooted_build(c);
	else
		for (size_t i = r = 0; i < np->n_ops && r == 0; i++)
			r = al_step_op(c, &np->ops[i]);
	if (r < 0)
		return r;
	if (np->want_scratch) {
		/* The supervisor's way into the scratch: copies in before the
		 * command, copies out after it (supervisor/copy.c). */
		int fd = open("/scratch", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return fail(c, errno, "opening the scratch for the supervisor");
		al_child_send(c->sync, AL_SYNC_SCRATCH, 0, 0, NULL, NULL, fd);
		close(fd);
	}
	return 0;
}

int step_pivot_root(struct al_child *c)
{
	struct mount_attr ro = {.attr_set =
				    MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV};

	if (chdir("/newroot") < 0)
		return fail(c, errno, "chdir /newroot");
	/* pivot_root(".", ".") stacks the old root on top of the new one;
	 * detaching "." then drops the staging tmpfs and, with it, the last
	 * path to the host's filesystem. */
	if (al_sys_pivot_root(".", ".") < 0)
		return fail(c, errno, "pivot_root into the new root");
	if (umount2(".", MNT_DETACH) < 0)
		return fail(c, errno, "detaching the old root");
	if (chdir("/") < 0)
		return fail(c, errno, "chdir /");
	/* A container's root stays writable unless its plan says (its own
	 * op is sealed then). */
	if ((!c->np->rooted || c->np->ops[c->np->root_op].seal) &&
	    al_sys_mount_setattr(AT_FDCWD, "/", 0, &ro, sizeof(ro)) < 0)
		return fail(c, errno, "making / read-only");
	/* Seal the tmpfs we populated (like /dev); their submounts keep their
	 * own flags. */
	for (size_t i = 0; i < c->np->n_ops; i++) {
		const struct al_mount_op *op = &c->np->ops[i];
		if (c->np->rooted && i == c->np->root_op)
			continue;
		if (op->seal && al_sys_mount_setattr(AT_FDCWD, op->target + 8 /* "/newroot" */, 0,
						     &ro, sizeof(ro)) < 0)
			return fail(c, errno, "sealing %s read-only", op->what);
	}
	return 0;
}

/* The command's terminal, from the sandbox's own devpts (so it is never a
 * host terminal): the slave becomes stdio (the command makes it its
 * controlling terminal, see child.c), the master goes to the supervisor,
 * which relays it. Nothing here keeps the master. */
int step_terminal(struct al_child *c)
{
	int master, slave, unlock = 0;

	if (!c->plan->tty)
		return 0;
	master = open("/dev/pts/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (master < 0)
		return fail(c, errno, "opening /dev/pts/ptmx");
	if (ioctl(master, TIOCSPTLCK, &unlock) < 0 ||
	    (slave = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY)) < 0) {
		int e = errno;
		close(master);
		return fail(c, e, "opening the pty's slave");
	}
	if (dup2(slave, 0) < 0 || dup2(slave, 1) < 0 || dup2(slave, 2) < 0) {
		int e = errno;
		close(master);
		close(slave);
		return fail(c, e, "dup2 of the pty's slave");
	}
	close(slave);
	al_child_send(c->sync, AL_SYNC_TERMINAL, 0, 0, NULL, NULL, master);
	close(master);
	return 0;
}

int step_hostname(struct al_child *c)
{
	const char *h = c->plan->hostname;
	if (sethostname(h, strlen(h)) < 0)
		return fail(c, errno, "sethostname");
	return 0;
}

/* A container's linux.sysctl (plan-root.c allows net keys alone): written
 * through the host's /proc before the staging root, which a net sysctl
 * resolves in the writer's network namespace: the sandbox's own. */
int step_sysctl(struct al_child *c)
{
	struct al_error err = {0};

	/* An engine's namespace: the supervisor wrote them (netns.h). */
	if (c->np->netns_joined || !c->plan->root)
		return 0;
	if (al_netns_write_sysctls(c->plan->root->sysctl, &err) < 0)
		return fail(c, err.code, "%s", err.msg);
	return 0;
}

int step_loopback(struct al_child *c)
{
	int fd;

	/* An engine's namespace, which we have no capability over: the
	 * supervisor did this and the gateway's step from its side
	 * (netns.h). */
	if (c->np->netns_joined)
		return 0;
	fd = al_netns_loopback_up();
	if (fd < 0)
		return fail(c, -fd, "bringing up lo");
	/* The supervisor adds up this namespace's socket memory through it
	 * (backend/native/sockdiag.h); it refuses to start the command without. */
	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (fd < 0) {
		if (c->plan->kernel_memory_best_effort)
			return 0;
		return fail(c, errno, "NETLINK_SOCK_DIAG socket, to account for socket memory");
	}
	al_child_send(c->sync, AL_SYNC_SOCKDIAG, 0, 0, NULL, NULL, fd);
	close(fd);
	return 0;
}

static int listen_on(struct al_child *c, enum al_gateway_listener kind)
{
	int fd = al_netns_listen(kind);

	if (fd < 0)
		return fail(c, -fd, "gateway listener on 127.0.0.1:%u",
			    al_gateway_listeners[kind].port);
	al_child_send(c->sync, AL_SYNC_GATEWAY, 0, kind, NULL, NULL, fd);
	close(fd);
	return 0;
}

/* The gateway's listeners live in our network namespace and are served by
 * the gateway's process from outside: no helper process runs in here. This
 * step comes early, so that the gateway's process starts and the capture
 * rules go in (the supervisor sends them on our netfilter socket) while we
 * build the root. */
int step_gateway_listeners(struct al_child *c)
{
	int r;

	if (!c->plan->gateway || c->np->netns_joined)
		return 0;
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
	if (fd < 0)
		return fail(c, errno,
			    "NETLINK_NETFILTER socket for the transparent capture (a kernel "
			    "without nf_tables?)");
	al_child_send(c->sync, AL_SYNC_CAPTURE, 0, 0, NULL, NULL, fd);
	close(fd);
	/* Port 53 needs CAP_NET_BIND_SERVICE in our namespace: we still
	 * have it here, and the supervisor does the serving. */
	for (int k = 0; k < AL_GATEWAY_N_LISTENERS; k++)
		if ((r = listen_on(c, (enum al_gateway_listener)k)) < 0)
			return r;
	r = al_netns_default_route();
	return r < 0 ? fail(c, -r, "adding the default route over lo") : 0;
}

int step_rlimits(struct al_child *c)
{
	const struct al_plan *p = c->plan;
	struct rlimit none = {0, 0};
	struct rlimit files = {p->open_files_soft ? p->open_files_soft : p->open_files,
			       p->open_files};
	struct rlimit fsize = {p->file_size, p->file_size};

	if (setrlimit(RLIMIT_CORE, &none) < 0)
		return fail(c, errno, "setrlimit(RLIMIT_CORE, 0)");
	if (setrlimit(RLIMIT_NOFILE, &files) < 0)
		return fail(c, errno, "setrlimit(RLIMIT_NOFILE, %llu)",
			    (unsigned long long)p->open_files);
	if (p->file_size && setrlimit(RLIMIT_FSIZE, &fsize) < 0)
		return fail(c, errno, "setrlimit(RLIMIT_FSIZE, %llu)",
			    (unsigned long long)p->file_size);
	/* Kernel objects a process can pin; they are charged to the memory
	 * cgroup as well, and these keep each kind small. */
	struct rlimit mq = {p->msgqueue_bytes, p->msgqueue_bytes};
	struct rlimit sig = {p->sigpending, p->sigpending};
	struct rlimit lock = {p->memlock_bytes, p->memlock_bytes};
	if (setrlimit(RLIMIT_MSGQUEUE, &mq) < 0)
		return fail(c, errno, "setrlimit(RLIMIT_MSGQUEUE)");
	if (setrlimit(RLIMIT_SIGPENDING, &sig) < 0)
		return fail(c, errno, "setrlimit(RLIMIT_SIGPENDING)");
	if (setrlimit(RLIMIT_MEMLOCK, &lock) < 0)
		return fail(c, errno, "setrlimit(RLIMIT_MEMLOCK)");
	return 0;
}

int step_new_session(struct al_child *c)
{
	/* No controlling terminal from here on; the command gets a session
	 * of its own as well (child.c, before exec), so TIOCSTI has nothing to aim at. */
	if (setsid() < 0)
		return fail(c, errno, "setsid");
	return 0;
}

int step_drop_privileges(struct al_child *c)
{
	struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct data[2] = {{0}};
	struct pollfd pfd = {.fd = c->sync, .events = POLLIN};
	const int secbits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP_LOCKED |
			    SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
			    SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;

	for (int cap = 0; cap < 64; cap++) {
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0) {
			if (errno == EINVAL)
				break; /* past the last capability this kernel knows */
			return fail(c, errno, "dropping capability %d from the bounding set", cap);
		}
	}
	if (prctl(PR_SET_SECUREBITS, secbits, 0, 0, 0) < 0)
		return fail(c, errno, "prctl(PR_SET_SECUREBITS)");
	/* A container's supplementary groups (none otherwise: become-ns-root
	 * cleared them). */
	if (c->plan->root && c->plan->n_groups && setgroups(c->plan->n_groups, c->plan->groups) < 0)
		return fail(c, errno, "setgroups (%zu groups)", c->plan->n_groups);
	if (setresgid(c->gid, c->gid, c->gid) < 0)
		return fail(c, errno, "setresgid(%u)", (unsigned)c->gid);
	if (setresuid(c->uid, c->uid, c->uid) < 0)
		return fail(c, errno, "setresuid(%u)", (unsigned)c->uid);
	/* Rootless we were never uid 0 inside, so setresuid kept our
	 * namespace capabilities: clear them explicitly in every set. */
	if (syscall(SYS_capset, &hdr, data) < 0)
		return fail(c, errno, "capset");
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
		return fail(c, errno, "clearing ambient capabilities");
	if (syscall(SYS_capget, &hdr, data) < 0 || data[0].effective || data[0].permitted ||
	    data[0].inheritable || data[1].effective || data[1].permitted || data[1].inheritable)
		return fail(c, EPERM, "capabilities still present after dropping them");
	/* Keep the command (same uid) away from init's memory and fds. */
	if (prctl(PR_SET_DUMPABLE, 0) < 0)
		return fail(c, errno, "prctl(PR_SET_DUMPABLE)");
	/* The credential change cleared the parent-death signal. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		return fail(c, errno, "prctl(PR_SET_PDEATHSIG)");
	if (poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLHUP | POLLERR)))
		return fail(c, EPIPE, "the supervisor is gone");
	return 0;
}

int step_no_new_privs(struct al_child *c)
{
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return fail(c, errno, "prctl(PR_SET_NO_NEW_PRIVS)");
	return 0;
}

#define LL_FILE_RIGHTS                                                                             \
	(LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |                              \
	 LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE |                              \
	 LANDLOCK_ACCESS_FS_IOCTL_DEV)

int step_landlock(struct al_child *c)
{
	const struct al_native_plan *p = c->np;
	struct al_landlock_attr attr = {.handled_access_fs = p->landlock_fs,
					.handled_access_net = p->landlock_net,
					.scoped = p->landlock_scoped};
	int ruleset, r = 0;

	if (p->landlock_abi == 0)
		return c->plan->landlock_required ? fail(c, EOPNOTSUPP, "landlock unavailable") : 0;
	ruleset = al_sys_landlock_create_ruleset(&attr, al_landlock_attr_size(p->landlock_abi), 0);
	if (ruleset < 0)
		return fail(c, errno, "landlock_create_ruleset (ABI %d)", p->landlock_abi);
	for (size_t i = 0; i < p->n_ll_rules; i++) {
		struct landlock_path_beneath_attr pb = {.allowed_access = p->ll_rules[i].access};
		struct stat st;
		int fd = open(p->ll_rules[i].path, O_PATH | O_CLOEXEC);
		if (fd < 0) {
			r = fail(c, errno, "landlock rule for %s", p->ll_rules[i].path);
			break;
		}
		if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode))
			pb.allowed_access &= LL_FILE_RIGHTS;
		pb.parent_fd = fd;
		if (al_sys_landlock_add_rule(ruleset, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0)
			r = fail(c, errno, "landlock_add_rule %s", p->ll_rules[i].path);
		close(fd);
		if (r < 0)
			break;
	}
	for (size_t i = 0; r == 0 && i < p->n_ll_ports; i++) {
		struct al_landlock_net_port np = {.allowed_access = p->landlock_net,
						  .port = p->ll_ports[i]};
		if (al_sys_landlock_add_rule(ruleset, AL_LANDLOCK_RULE_NET_PORT, &np, 0) < 0)
			r = fail(c, errno, "landlock_add_rule TCP port %u", (unsigned)np.port);
	}
	if (r == 0 && al_sys_landlock_restrict_self(ruleset, 0) < 0)
		r = fail(c, errno, "landlock_restrict_self");
	close(ruleset);
	if (r == 0)
		c->landlock_abi = p->landlock_abi;
	return r;
}

void al_child_send_msg(int sync, const struct al_sync_msg *m, int fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {(void *)m, sizeof(*m)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	ssize_t n;

	if (fd >= 0) {
		memset(cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf;
		mh.msg_controllen = sizeof(cbuf);
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	}
	do
		n = sendmsg(sync, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
}

void al_child_send(int sync, uint32_t type, int err, int status, const char *step, const char *msg,
		   int fd)
{
	struct al_sync_msg m = {.type = type, .err = err, .status = status};

	if (step)
		snprintf(m.step, sizeof(m.step), "%s", step);
	if (msg)
		snprintf(m.msg, sizeof(m.msg), "%s", msg);
	al_child_send_msg(sync, &m, fd);
}

int step_seccomp(struct al_child *c)
{
	/* The listener lets the supervisor see, log and answer every denied
	 * call of the table's notify rows; the filter applies to init too. */
	int fd = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
			      SECCOMP_FILTER_FLAG_NEW_LISTENER, &c->np->seccomp);
	if (fd < 0)
		return fail(c, errno, "installing the seccomp filter with a notification listener");
	al_child_send(c->sync, AL_SYNC_LISTENER, 0, 0, NULL, NULL, fd);
	close(fd);
	return 0;
}

int step_report_ready(struct al_child *c)
{
	/* The supervisor now checks every layer from outside and lets us go
	 * on only if all are in force. */
	al_child_send(c->sync, AL_SYNC_READY, 0, c->landlock_abi, NULL, NULL, -1);
	return step_wait_parent(c);
}
