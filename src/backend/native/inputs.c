/* A task's inputs as root (the plan's as_owner entries), opened by the
 * supervisor with root's own access, so that a 0600 upload under a 0700
 * home can be shown, and handed to the child as detached mounts it only
 * attaches (open_tree(OPEN_TREE_CLONE) here, move_mount in steps.c).
 *
 * Each tree is idmapped (MOUNT_ATTR_IDMAP) so that the sandbox user is the
 * input's host owner: it reads what the owner may read, and what it writes
 * to a --rw directory belongs to that directory's owner, never to the
 * sandbox's own host id. Where the filesystem cannot be idmapped, a --rw
 * input is refused; a --ro one is shown as it is when the sandbox user can
 * read it through the "other" bits, and otherwise refused — or, with
 * "copy": true, copied into the scratch by the supervisor once the sandbox
 * is built (copy.c). */
#include "backend/native/inputs.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/sys.h"
#include "core/util.h"
#include "ids/slots.h"
#include "supervisor/copy.h"

/* One user namespace per distinct owner, only to describe the mapping
 * owner → the sandbox user's host id; its process exits at once. */
struct al_idmap {
	uid_t uid;
	gid_t gid;
	bool disk_id;
	int fd;
};

/* The process that holds the namespace while its maps are written. It
 * shares our memory (CLONE_VM: no page tables copied, none of ours left
 * copy-on-write) and does nothing but wait on the pipe.
 *
 * Its fd table is a copy (no CLONE_FILES) of everything the process had
 * open, so in a daemon also other threads' descriptors, among them the
 * write ends of other holders' pipes: two holders that kept each other's
 * would each wait for an end of file only the other can give. It keeps
 * its own read end alone, so that the parent's close of the write end
 * ends it. */
static int hold_namespace(void *arg)
{
	const int *hold = arg;
	char c;

	if (hold[0] > 0)
		al_sys_close_range(0, (unsigned)hold[0] - 1, 0);
	al_sys_close_range((unsigned)hold[0] + 1, ~0U, 0);
	(void)!read(hold[0], &c, 1);
	return 0;
}

/* The holder runs on a stack mapped for this call alone (not a static
 * one): runs of one daemon, or its threads, may make idmaps at the same
 * time, and each holder must have its own. It is unmapped only after
 * waitpid() says the holder has exited. */
static int make_idmap(const char *uid_map, const char *gid_map, struct al_error *err)
{
	struct al_clone_stack stack = {0};
	char path[64], *top;
	int hold[2], r = 0, fd = -1;
	long pid;

	if (!(top = al_clone_stack_new(&stack, 16384)))
		return al_error_setsys(err, errno, "mapping the stack of an idmap's process");
	if (pipe2(hold, O_CLOEXEC) < 0) {
		r = al_error_setsys(err, errno, "pipe2");
		al_clone_stack_free(&stack);
		return r;
	}
	pid = clone(hold_namespace, top, CLONE_VM | CLONE_NEWUSER | SIGCHLD, hold);
	if (pid < 0) {
		r = al_error_setsys(err, errno, "creating the user namespace of an idmapped mount");
		close(hold[0]);
		close(hold[1]);
		al_clone_stack_free(&stack);
		return r;
	}
	snprintf(path, sizeof(path), "/proc/%ld/uid_map", pid);
	if ((r = al_write_file_at(AT_FDCWD, path, uid_map, strlen(uid_map))) < 0) {
		r = al_error_setsys(err, -r, "writing %s", path);
		goto out;
	}
	snprintf(path, sizeof(path), "/proc/%ld/gid_map", pid);
	if ((r = al_write_file_at(AT_FDCWD, path, gid_map, strlen(gid_map))) < 0) {
		r = al_error_setsys(err, -r, "writing %s", path);
		goto out;
	}
	snprintf(path, sizeof(path), "/proc/%ld/ns/user", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		r = al_error_setsys(err, errno, "open %s", path);
out:
	close(hold[1]);
	while (waitpid((pid_t)pid, NULL, 0) < 0 && errno == EINTR)
		;
	al_clone_stack_free(&stack);
	close(hold[0]);
	return r < 0 ? r : fd;
}

/* The map of a root-owned "rw" input for a run holding a slot: every host
 * id as it is, except AL_HOST_DISK_ID, which is the run's user (what it
 * creates belongs to AL_HOST_DISK_ID on disk, as in every run), root,
 * shown as the slot's unused last-but-one id (never the sandbox's: it
 * acts there through the others' bits), and the run's and that id
 * themselves, unmapped. The sandbox thus has the rights it had as
 * AL_HOST_DISK_ID, and a per-run id never reaches the disk. */
static void disk_map(char *buf, size_t len, unsigned run, unsigned nobody)
{
	snprintf(buf, len, "0 %u 1\n1 1 %u\n%u %u 1\n%u %u %u\n%u %u %u\n%u %u %u\n", nobody,
		 AL_HOST_DISK_ID - 1, AL_HOST_DISK_ID, run, AL_HOST_DISK_ID + 1,
		 AL_HOST_DISK_ID + 1, run - (AL_HOST_DISK_ID + 1), run + 1, run + 1,
		 nobody - (run + 1), nobody + 1, nobody + 1, 4294967295u - (nobody + 1));
}

/* The user namespace of an input's idmapping: its owner (disk_id false)
 * or the root-owned "rw" map (true) as the sandbox user's host ids. */
static int idmap_fd(struct al_idmap **maps, size_t *n, uid_t uid, gid_t gid, bool disk_id,
		    const struct al_host_ids *ids, struct al_error *err)
{
	char um[256], gm[256];
	int fd;

	for (size_t i = 0; i < *n; i++)
		if ((*maps)[i].uid == uid && (*maps)[i].gid == gid && (*maps)[i].disk_id == disk_id)
			return (*maps)[i].fd;
	if (disk_id) {
		unsigned nobody = ids->root_uid + AL_IDS_SLOT_SIZE - 2;
		disk_map(um, sizeof(um), ids->uid, nobody);
		disk_map(gm, sizeof(gm), ids->gid, nobody);
	} else {
		snprintf(um, sizeof(um), "%u %u 1\n", (unsigned)uid, (unsigned)ids->uid);
		snprintf(gm, sizeof(gm), "%u %u 1\n", (unsigned)gid, (unsigned)ids->gid);
	}
	if ((fd = make_idmap(um, gm, err)) < 0)
		return fd;
	*maps = xrealloc(*maps, (*n + 1) * sizeof(**maps));
	(*maps)[(*n)++] = (struct al_idmap){uid, gid, disk_id, fd};
	return fd;
}

/* The mode bits the sandbox user goes through: the owner's when it acts as
 * the owner, the others' when not. */
static bool may(const struct stat *st, bool as_owner, bool write)
{
	mode_t r = as_owner ? S_IRUSR : S_IROTH, w = as_owner ? S_IWUSR : S_IWOTH,
	       x = as_owner ? S_IXUSR : S_IXOTH;
	mode_t need = r | (write ? w : 0) | (S_ISDIR(st->st_mode) ? x : 0);
	return (st->st_mode & need) == need;
}

static const char *host_path(const struct al_mount_op *op)
{
	return op->source + strlen("/oldroot");
}

/* host opened without following a link, checked to be the inode the plan
 * resolved (*st its stat), and cloned as a detached tree (with what is
 * mounted below it, or not): the tree's fd, or -errno with err set. */
static int clone_checked(const struct al_mount_op *op, const char *host, bool recursive,
			 struct stat *st, struct al_error *err)
{
	struct open_how how = {.flags = O_PATH | O_CLOEXEC,
			       .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
	_cleanup_close_ int src = al_sys_openat2(AT_FDCWD, host, &how, sizeof(how));

	if (src < 0)
		return al_error_setsys(err, errno, "%s: opening %s", op->what, host);
	if (fstat(src, st) < 0)
		return al_error_setsys(err, errno, "%s: stat %s", op->what, host);
	if (st->st_dev != op->dev || st->st_ino != op->ino)
		return al_error_set(err, ESTALE, "%s: %s changed between planning and opening",
				    op->what, host);
	int tree = (int)syscall(SYS_open_tree, src, "",
				OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH |
				    (recursive ? AT_RECURSIVE : 0));
	if (tree < 0)
		return al_error_setsys(err, errno, "%s: open_tree %s", op->what, host);
	return tree;
}

static int open_input(const struct al_mount_op *op, const char *host, const struct al_host_ids *ids,
		      struct al_idmap **maps, size_t *n_maps, bool *copy, struct al_error *err);

int al_native_open_input(const struct al_mount_op *op, const char *host,
			 const struct al_host_ids *ids, struct al_idmaps *maps, bool *copy,
			 struct al_error *err)
{
	return open_input(op, host, ids, &maps->v, &maps->n, copy, err);
}

void al_idmaps_free(struct al_idmaps *maps)
{
	for (size_t i = 0; i < maps->n; i++)
		close(maps->v[i].fd);
	free(maps->v);
	*maps = (struct al_idmaps){0};
}

/* Open one input as a detached tree with its flags and, where the
 * filesystem allows, the owner's idmapping. *copy is set when it must be
 * copied instead (the tree is then not needed: returns -1 with no error). */
static int open_input(const struct al_mount_op *op, const char *host, const struct al_host_ids *ids,
		      struct al_idmap **maps, size_t *n_maps, bool *copy, struct al_error *err)
{
	struct mount_attr attr = {.attr_set = op->attr};
	bool write = !(op->attr & MOUNT_ATTR_RDONLY), idmapped = false, as_owner = false;
	bool unmappable = false;
	_cleanup_close_ int tree = -1;
	struct stat st;

	*copy = false;
	if ((tree = clone_checked(op, host, true, &st, err)) < 0)
		return tree;
	/* A read-only file that others may read needs no idmapping (and its
	 * user namespace, the costly part): the sandbox user reads it through
	 * the other bits. A directory may hold files only its owner reads.
	 * The sandbox never writes as host root: a root-owned tree may hold
	 * set-id or capable files, which a shared mapping rewrites without
	 * the kernel dropping their bits. A writable input of uid or gid 0 is
	 * written through the other bits: with ids of a slot, through
	 * disk_map() (what it creates belongs to AL_HOST_DISK_ID, as in every
	 * run), with a fixed range as it is. */
	bool root_owned = op->owner_uid == 0 || op->owner_gid == 0;
	bool disk_id = write && root_owned && ids->slot >= 0;
	as_owner =
	    (write && !root_owned) || (!write && (S_ISDIR(st.st_mode) || !(st.st_mode & S_IROTH)));
	/* A container's bind (its config may be anyone's): never read as
	 * host root either, only through the others' bits. */
	if (op->lenient && root_owned)
		as_owner = false;
	if (as_owner || disk_id) {
		int userns =
		    idmap_fd(maps, n_maps, op->owner_uid, op->owner_gid, disk_id, ids, err);
		if (userns < 0)
			return userns;
		attr.attr_set |= MOUNT_ATTR_IDMAP;
		attr.userns_fd = (uint64_t)userns;
		idmapped = true;
	}
	if (al_sys_mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof(attr)) < 0) {
		int e = errno;
		if (!idmapped)
			return al_error_setsys(err, e, "%s: setting flags on %s", op->what, host);
		if (e != EINVAL && e != EPERM && e != EOPNOTSUPP)
			return al_error_setsys(err, e, "%s: idmapping %s", op->what, host);
		if (write)
			return al_error_set(
			    err, EOPNOTSUPP,
			    "%s: %s is on a filesystem that cannot be idmapped (%s), so the "
			    "sandbox could write there only as its run's own host id %u, not as "
			    "%u; --rw refused (use --copy-out, or a directory on another "
			    "filesystem)",
			    op->what, host, strerror(e), (unsigned)ids->uid,
			    disk_id ? AL_HOST_DISK_ID : (unsigned)op->owner_uid);
		al_debug("%s: no idmapping (%s); shown with its own ids", op->what, strerror(e));
		attr.attr_set = op->attr;
		attr.userns_fd = 0;
		idmapped = as_owner = false;
		unmappable = true;
		if (al_sys_mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr,
					 sizeof(attr)) < 0)
			return al_error_setsys(err, errno, "%s: setting flags on %s", op->what,
					       host);
	}
	if (!may(&st, as_owner, write) && !op->lenient) {
		if (op->copy && !write) {
			*copy = true;
			return -1;
		}
		if (write && root_owned)
			return al_error_set(
			    err, EACCES,
			    "%s: %s (owner %u:%u, mode %04o) belongs to root, and the sandbox "
			    "never "
			    "writes as host root: it writes there as host id %u, through the "
			    "others' bits, which do not let it; chown the directory to an "
			    "unprivileged user (what the sandbox writes then belongs to that "
			    "user) or add o+%s",
			    op->what, host, (unsigned)op->owner_uid, (unsigned)op->owner_gid,
			    st.st_mode & 07777, disk_id ? AL_HOST_DISK_ID : (unsigned)ids->uid,
			    S_ISDIR(st.st_mode) ? "rwx" : "rw");
		return al_error_set(
		    err, EACCES, "%s: %s (mode %04o) is not %s by %s%s; %s", op->what, host,
		    st.st_mode & 07777, write ? "readable and writable" : "readable",
		    as_owner ? "its owner, whom the sandbox user acts as" : "others",
		    unmappable ? " (its filesystem cannot be idmapped)" : "",
		    write ? "change its mode"
			  : "change its mode, or set \"copy\": true on the mount to copy it "
			    "into the scratch");
	}
	/* Above the numbers the child's stdio step moves its own fds to, so
	 * none of them lands on an input (steps.c, step_stdio). */
	int high = fcntl(tree, F_DUPFD_CLOEXEC, AL_INPUT_FD_MIN);
	if (high < 0)
		return al_error_setsys(err, errno, "%s: fcntl F_DUPFD_CLOEXEC", op->what);
	return high;
}

/* An id map of a container's root ("disk id, the slot's host id, count"
 * a line): what the engine gave its files is the sandbox's id. */
static void root_map(char *buf, size_t len, const struct al_id_range *m, size_t n, unsigned base)
{
	size_t off = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%u %u %u\n", m[i].outer,
					base + m[i].inner, m[i].count);
}

/* A container's root (op->root_ids) as a
 * detached tree idmapped with the root's maps (their user namespace made
 * once, in *userns): under an operator policy, where its file system can
 * be idmapped; otherwise its files keep their host ids. */
static int open_root_input(const struct al_mount_op *op, const char *host,
			   const struct al_plan *plan, const struct al_host_ids *ids, int *userns,
			   struct al_error *err)
{
	_cleanup_close_ int tree = -1;
	struct stat st;

	/* Not recursive: what is mounted below it on the host stays out. */
	if ((tree = clone_checked(op, host, false, &st, err)) < 0)
		return tree;
	/* Without an operator policy nothing bounds where a config's root is:
	 * its files keep their host ids, so that no host root's file becomes
	 * the container's own. With one, the root lies where the operator
	 * allows, and is shown with the ids the engine gave it. */
	if (!plan->operator_file) {
		struct mount_attr plain = {.attr_set = op->attr};
		if (al_sys_mount_setattr(tree, "", AT_EMPTY_PATH, &plain, sizeof(plain)) < 0)
			return al_error_setsys(err, errno, "%s: setting flags on %s", op->what,
					       host);
		goto done;
	}
	if (*userns < 0) {
		char um[1024], gm[1024];
		root_map(um, sizeof(um), plan->root->uid_map, plan->root->n_uid_map, ids->root_uid);
		root_map(gm, sizeof(gm), plan->root->gid_map, plan->root->n_gid_map, ids->root_gid);
		if ((*userns = make_idmap(um, gm, err)) < 0)
			return *userns;
	}
	struct mount_attr attr = {.attr_set = op->attr | MOUNT_ATTR_IDMAP,
				  .userns_fd = (uint64_t)*userns};
	if (al_sys_mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0) {
		int e = errno;
		if (e != EINVAL && e != EOPNOTSUPP && e != EPERM)
			return al_error_setsys(err, e, "%s: idmapping %s", op->what, host);
		/* A file system that cannot be idmapped (overlayfs: podman's
		 * and containerd's roots): its files keep their host ids,
		 * which the sandbox's user namespace does not hold, so they
		 * show as nobody's; the sandbox never acts as their owner. */
		al_debug("%s: %s cannot be idmapped (%s): shown with its host ids", op->what, host,
			 strerror(e));
		attr = (struct mount_attr){.attr_set = op->attr};
		if (al_sys_mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
			return al_error_setsys(err, errno, "%s: setting flags on %s", op->what,
					       host);
	}
done:;
	int high = fcntl(tree, F_DUPFD_CLOEXEC, AL_INPUT_FD_MIN);
	if (high < 0)
		return al_error_setsys(err, errno, "%s: fcntl F_DUPFD_CLOEXEC", op->what);
	return high;
}

/* "copy": true: bind the scratch's part ro/N instead, which the supervisor
 * fills once the sandbox is built (monitor.c). */
static void make_copy(struct al_native_plan *np, struct al_mount_op *op)
{
	_cleanup_free_ char *host = xstrdup(host_path(op));
	char *part = xasprintf("ro/%d", op->input);

	np->copies = xrealloc(np->copies, (np->n_copies + 1) * sizeof(*np->copies));
	np->copies[np->n_copies++] = (struct al_native_copy){TAKE_PTR(host), op->dev,	    op->ino,
							     op->owner_uid,  op->owner_gid, part};
	free(op->source);
	op->source = xasprintf("/scratch/%s", part);
	op->copied = true;
	op->ino = 0; /* the identity is the host file's, checked when it is copied */
	np->want_scratch = true;
	al_debug("%s: the sandbox user could not read it; copying it into the scratch", op->what);
}

int al_native_open_inputs(struct al_native_plan *np, const struct al_plan *plan, int **ret,
			  struct al_error *err)
{
	_cleanup_free_ struct al_idmap *maps = NULL;
	_cleanup_close_ int root_userns = -1;
	size_t n_maps = 0;
	int *fds;
	int r = 0;

	*ret = NULL;
	if (np->n_inputs == 0)
		return 0;
	fds = xcalloc(np->n_inputs, sizeof(*fds));
	for (size_t i = 0; i < np->n_inputs; i++)
		fds[i] = -1;
	for (size_t i = 0; i < np->n_ops && r >= 0; i++) {
		struct al_mount_op *op = &np->ops[i];
		bool copy;
		if (op->input < 0)
			continue;
		if (op->root_ids) {
			int fd =
			    open_root_input(op, host_path(op), plan, &np->ids, &root_userns, err);
			if (fd < 0) {
				r = fd;
				break;
			}
			fds[op->input] = fd;
			continue;
		}
		int fd = open_input(op, host_path(op), &np->ids, &maps, &n_maps, &copy, err);
		if (fd < 0 && !copy) {
			r = fd;
			break;
		}
		if (copy)
			make_copy(np, op);
		else
			fds[op->input] = fd;
	}
	for (size_t i = 0; i < n_maps; i++)
		close(maps[i].fd);
	if (r < 0) {
		al_native_close_inputs(fds, np->n_inputs);
		return r;
	}
	al_log_phase("inputs opened");
	*ret = fds;
	return 0;
}

void al_native_close_inputs(int *fds, size_t n)
{
	if (!fds)
		return;
	for (size_t i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	free(fds);
}

/* As root, the owner's groups too: setfsgid leaves ours (root's
 * supplementary groups) in place, which would read what the owner may
 * not. The supervisor is single-threaded here. */
static int copy_as_owner(const struct al_native_copy *c, const struct al_plan *plan, int scratch,
			 const struct al_copy_owner *own, struct al_error *err)
{
	_cleanup_free_ gid_t *saved = NULL;
	int n = 0, r;

	if (!plan->rootless) {
		n = getgroups(0, NULL);
		saved = xcalloc((size_t)(n > 0 ? n : 1), sizeof(*saved));
		if (n < 0 || (n = getgroups(n, saved)) < 0 || setgroups(1, &c->owner_gid) < 0)
			return al_error_setsys(err, errno, "taking the groups of %s's owner",
					       c->host);
	}
	r = al_copy_in(c->host, c->dev, c->ino, scratch, c->part, own, err);
	if (!plan->rootless && setgroups((size_t)n, saved) < 0) {
		/* Never go on with the owner's groups. */
		al_err("restoring the supervisor's groups: %s", strerror(errno));
		_exit(125);
	}
	return r;
}

int al_native_fill_scratch(const struct al_native_plan *np, const struct al_plan *plan, int scratch,
			   struct al_error *err)
{
	/* The read-only copies of inputs, made as the namespace's root (its
	 * placeholders' owner; the sandbox user reads them through the other
	 * bits), then the task's copies, made as the sandbox user: they are
	 * its own to change. */
	uid_t self = (uid_t)-1;
	const struct al_copy_owner rw = {plan->rootless ? self : np->ids.uid,
					 plan->rootless ? self : np->ids.gid,
					 self,
					 self,
					 false,
					 false};
	int r;

	if (np->n_copies == 0 && plan->n_copy_in == 0)
		return 0;
	if (scratch < 0)
		return al_error_set(err, EIO, "the sandbox did not hand over its scratch");
	for (size_t i = 0; i < np->n_copies; i++) {
		const struct al_native_copy *c = &np->copies[i];
		/* Read as the tree's owner, whom the sandbox user would have
		 * acted as through an idmapped mount: what the owner may not
		 * read stays out. */
		const struct al_copy_owner ro = {plan->rootless ? self : np->ids.root_uid,
						 plan->rootless ? self : np->ids.root_gid,
						 plan->rootless ? self : c->owner_uid,
						 plan->rootless ? self : c->owner_gid,
						 true,
						 true};
		if ((r = copy_as_owner(c, plan, scratch, &ro, err)) < 0)
			return r;
	}
	for (size_t i = 0; i < plan->n_copy_in; i++) {
		const struct al_copy_in *c = &plan->copy_in[i];
		if ((r = al_copy_in(c->host, c->dev, c->ino, scratch, c->part, &rw, err)) < 0)
			return al_error_wrap(err, "%s", c->origin);
	}
	al_log_phase("copied in");
	return 0;
}
