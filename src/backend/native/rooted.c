/* The tree on a container's own root (lower.h np->rooted, the OCI
 * runtime's). Its own op (np->root_op) attaches the root, opened and idmapped by the
 * supervisor, at /newroot. Every later op whose target lies below
 * /newroot reaches it from the root's descriptor with RESOLVE_IN_ROOT: a
 * link in the image, or one that a writer of a shared volume swaps in
 * meanwhile, resolves inside the container's root and never into the
 * staging view, whose /oldroot is the host's root. Mounts go onto that
 * descriptor with the new mount API (open_tree or fsmount, then
 * move_mount), never by a path the kernel would resolve again. A missing
 * mountpoint is made in the root, as other runtimes do; nothing else is
 * written there. Ops elsewhere (the scratch, airlock's /files) run as
 * steps.c runs them. Like every step, nothing here allocates. */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backend/native/steps.h"
#include "core/sys.h"
#include "core/util.h"

#define NEW "/newroot"

struct rooted {
	struct al_child *c;
	int root; /* O_PATH of the container's root, attached at /newroot */
};

/* target below /newroot: its path relative to the root ("dev/pts"), or
 * NULL for a target in the staging view. */
static const char *in_root(const struct al_mount_op *op)
{
	size_t n = strlen(NEW);

	if (strncmp(op->target, NEW, n) != 0 || op->target[n] != '/')
		return NULL;
	return op->target + n + 1;
}

static int open_in(int dirfd, const char *rel, uint64_t flags)
{
	struct open_how how = {.flags = O_PATH | O_CLOEXEC | flags,
			       .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
	return al_sys_openat2(dirfd, rel, &how, sizeof(how));
}

/* The directory rel lies in (opened inside the root) and its last name. */
static int open_parent(struct rooted *R, const char *rel, char *base, size_t len)
{
	char dir[4096];
	const char *slash = strrchr(rel, '/');

	if (strlen(rel) >= sizeof(dir) || strlen(slash ? slash + 1 : rel) >= len)
		return -ENAMETOOLONG;
	snprintf(base, len, "%s", slash ? slash + 1 : rel);
	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - rel) : 1, slash ? rel : ".");
	int fd = open_in(R->root, dir, O_DIRECTORY);
	return fd < 0 ? -errno : fd;
}

static int op_mkdir(struct rooted *R, const struct al_mount_op *op, const char *rel)
{
	char base[256];
	int pfd = open_parent(R, rel, base, sizeof(base));

	if (pfd < 0)
		return al_step_fail(R->c, -pfd, "the container's root: opening the directory of %s",
				    rel);
	int r = mkdirat(pfd, base, op->mode);
	int e = errno;
	close(pfd);
	if (r < 0 && e != EEXIST)
		return al_step_fail(R->c, e, "the container's root: mkdir %s for %s", rel,
				    op->what);
	return 0;
}

static int op_symlink(struct rooted *R, const struct al_mount_op *op, const char *rel)
{
	char base[256];
	int pfd = open_parent(R, rel, base, sizeof(base));

	if (pfd < 0)
		return al_step_fail(R->c, -pfd, "the container's root: opening the directory of %s",
				    rel);
	int r = symlinkat(op->source, pfd, base);
	int e = errno;
	close(pfd);
	return r < 0 ? al_step_fail(R->c, e, "symlink %s", op->what) : 0;
}

/* The mountpoint of op inside the root (made when missing: a directory,
 * or an empty file for a file's bind). */
static int mountpoint(struct rooted *R, const struct al_mount_op *op, const char *rel, bool dir)
{
	int fd = open_in(R->root, rel, 0);
	if (fd >= 0 || errno != ENOENT)
		return fd >= 0 ? fd
			       : al_step_fail(R->c, errno, "the container's root: %s for %s", rel,
					      op->what);
	char base[256];
	int pfd = open_parent(R, rel, base, sizeof(base));
	if (pfd < 0)
		return al_step_fail(R->c, -pfd, "the container's root: the directory of %s for %s",
				    rel, op->what);
	int r = dir ? mkdirat(pfd, base, 0755)
		    : openat(pfd, base, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0444);
	int e = errno;
	if (!dir && r >= 0)
		close(r);
	close(pfd);
	if (r < 0 && e != EEXIST)
		return al_step_fail(R->c, e,
				    "the container's root: making the mountpoint %s for %s", rel,
				    op->what);
	if ((fd = open_in(R->root, rel, 0)) < 0)
		return al_step_fail(R->c, errno,
				    "the container's root: %s for %s (a dangling symbolic link?)",
				    rel, op->what);
	return fd;
}

static int attach(struct rooted *R, const struct al_mount_op *op, int tree, int target)
{
	int r = (int)syscall(SYS_move_mount, tree, "", target, "",
			     MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH);
	int e = errno;
	close(tree);
	close(target);
	return r < 0 ? al_step_fail(R->c, e, "attaching %s", op->what) : 0;
}

/* A new mount of type with options ("a=b,c", as mount(2) takes them) and
 * attr, detached. */
static int fs_mount(struct rooted *R, const struct al_mount_op *op, const char *type,
		    const char *options, uint64_t attr)
{
	char buf[256];
	int fs = (int)syscall(SYS_fsopen, type, FSOPEN_CLOEXEC), m;

	if (fs < 0)
		return al_step_fail(R->c, errno, "fsopen %s for %s", type, op->what);
	if (options && strlen(options) >= sizeof(buf)) {
		close(fs);
		return al_step_fail(R->c, E2BIG, "options of %s", op->what);
	}
	/* The source shown in mountinfo: the type, as mount(8) and runc
	 * name kernel file systems ("none" otherwise). */
	if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "source", type, 0) < 0) {
		int e = errno;
		close(fs);
		return al_step_fail(R->c, e, "%s source for %s", type, op->what);
	}
	snprintf(buf, sizeof(buf), "%s", options ? options : "");
	for (char *save = NULL, *kv = strtok_r(buf, ",", &save); kv;
	     kv = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(kv, '=');
		int r;
		if (eq) {
			*eq = '\0';
			r = (int)syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, kv, eq + 1, 0);
		} else {
			r = (int)syscall(SYS_fsconfig, fs, FSCONFIG_SET_FLAG, kv, NULL, 0);
		}
		if (r < 0) {
			int e = errno;
			close(fs);
			return al_step_fail(R->c, e, "%s option %s for %s", type, kv, op->what);
		}
	}
	if (syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0) {
		int e = errno;
		close(fs);
		return al_step_fail(R->c, e, "creating %s for %s", type, op->what);
	}
	m = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, (unsigned)attr);
	int e = errno;
	close(fs);
	return m < 0 ? al_step_fail(R->c, e, "fsmount %s for %s", type, op->what) : m;
}

static int op_mount(struct rooted *R, const struct al_mount_op *op, const char *rel)
{
	int tree, target, r;

	switch (op->kind) {
	case AL_OP_BIND:
		if ((r = al_step_bind_tree(R->c, op, &tree)) < 0)
			return r;
		break;
	case AL_OP_TMPFS:
		tree = fs_mount(R, op, "tmpfs", op->source,
				op->seal ? op->attr & ~(uint64_t)MOUNT_ATTR_RDONLY : op->attr);
		break;
	case AL_OP_PROC:
		tree = fs_mount(R, op, "proc", NULL, op->attr);
		break;
	case AL_OP_SPECIAL:
		/* In an engine's network namespace, the supervisor's. */
		if (R->c->np->netns_sysfs >= 0 && strcmp(op->source, "sysfs") == 0) {
			tree = fcntl(R->c->np->netns_sysfs, F_DUPFD_CLOEXEC, 0);
			if (tree < 0)
				return al_step_fail(R->c, errno, "%s", op->what);
			break;
		}
		tree = fs_mount(R, op, op->source, NULL, op->attr);
		break;
	default: /* AL_OP_DEVPTS */
		tree = fs_mount(R, op, "devpts", op->source, op->attr);
		break;
	}
	if (tree < 0)
		return tree;
	if ((target = mountpoint(R, op, rel, op->kind != AL_OP_BIND || op->dir)) < 0) {
		close(tree);
		return target;
	}
	return attach(R, op, tree, target);
}

/* A masked path: an empty read-only directory (a tmpfs of no room) or
 * /dev/null over it, where it exists. */
static int op_mask(struct rooted *R, const struct al_mount_op *op, const char *rel)
{
	struct stat st;
	int target = open_in(R->root, rel, 0), tree;

	if (target < 0)
		return errno == ENOENT ? 0 : al_step_fail(R->c, errno, "%s", op->what);
	if (fstat(target, &st) < 0) {
		close(target);
		return al_step_fail(R->c, errno, "stat %s", op->what);
	}
	if (S_ISDIR(st.st_mode)) {
		tree = fs_mount(R, op, "tmpfs", "size=4k,nr_inodes=1,mode=0500",
				op->attr | MOUNT_ATTR_NODEV);
	} else {
		struct open_how how = {.flags = O_PATH | O_CLOEXEC,
				       .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
		struct mount_attr attr = {.attr_set = op->attr};
		int null = al_sys_openat2(AT_FDCWD, "/oldroot/dev/null", &how, sizeof(how));
		tree = null < 0 ? -1
				: (int)syscall(SYS_open_tree, null, "",
					       OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
		int e = errno;
		if (null >= 0)
			close(null);
		if (tree >= 0 &&
		    al_sys_mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0) {
			e = errno;
			close(tree);
			tree = -1;
		}
		if (tree < 0)
			tree = al_step_fail(R->c, e, "/dev/null for %s", op->what);
	}
	if (tree < 0) {
		close(target);
		return tree;
	}
	return attach(R, op, tree, target);
}

/* A read-only path: a read-only bind of itself over it, where it exists. */
static int op_rdonly(struct rooted *R, const struct al_mount_op *op, const char *rel)
{
	struct mount_attr attr = {.attr_set = op->attr};
	int target = open_in(R->root, rel, 0);

	if (target < 0)
		return errno == ENOENT ? 0 : al_step_fail(R->c, errno, "%s", op->what);
	int tree = (int)syscall(SYS_open_tree, target, "",
				OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
	if (tree < 0 ||
	    al_sys_mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof(attr)) < 0) {
		int e = errno;
		if (tree >= 0)
			close(tree);
		close(target);
		return al_step_fail(R->c, e, "making %s read-only", op->what);
	}
	return attach(R, op, tree, target);
}

int al_rooted_build(struct al_child *c)
{
	const struct al_native_plan *np = c->np;
	const struct al_mount_op *root = &np->ops[np->root_op];
	struct rooted R = {.c = c, .root = -1};
	int tree, r = 0;

	if (np->root_op >= np->n_ops || root->kind != AL_OP_BIND || strcmp(root->target, NEW) != 0)
		return al_step_fail(c, EINVAL, "a container's root has no op of its own");
	for (size_t i = 0; i < np->n_ops && r == 0; i++) {
		const struct al_mount_op *op = &np->ops[i];
		const char *rel = in_root(op);
		if (i == np->root_op) {
			/* The root itself, by path: /newroot is the staging
			 * view's own. */
			if ((r = al_step_bind_tree(c, op, &tree)) < 0)
				break;
			if (syscall(SYS_move_mount, tree, "", AT_FDCWD, NEW,
				    MOVE_MOUNT_F_EMPTY_PATH) < 0)
				r = al_step_fail(c, errno, "attaching %s", op->what);
			close(tree);
			if (r == 0 && (R.root = open(NEW, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
				r = al_step_fail(c, errno, "opening the container's root");
			continue;
		}
		if (!rel) {
			r = al_step_op(c, op);
			continue;
		}
		if (R.root < 0) {
			r = al_step_fail(c, EINVAL, "%s before the container's root", op->what);
			break;
		}
		switch (op->kind) {
		case AL_OP_MKDIR:
			r = op_mkdir(&R, op, rel);
			break;
		case AL_OP_SYMLINK:
			r = op_symlink(&R, op, rel);
			break;
		case AL_OP_FILE: /* lower.c stages them in /files */
			r = al_step_fail(c, EINVAL, "%s: a file in the container's root", op->what);
			break;
		case AL_OP_MASK:
			r = op_mask(&R, op, rel);
			break;
		case AL_OP_RDONLY:
			r = op_rdonly(&R, op, rel);
			break;
		default:
			r = op_mount(&R, op, rel);
			break;
		}
	}
	if (R.root >= 0)
		close(R.root);
	return r;
}

/* --- on the host, before clone --------------------------------------------- */

/* Whether target lies below a mount of an earlier op (other than the
 * root's): its mountpoint is then the child's to make, in that mount. */
static bool below_mount(const struct al_native_plan *np, size_t i)
{
	for (size_t k = 0; k < i; k++) {
		const struct al_mount_op *op = &np->ops[k];
		if (k == np->root_op || !al_op_mounts(op->kind) || !in_root(op))
			continue;
		size_t n = strlen(op->target);
		if (strncmp(np->ops[i].target, op->target, n) == 0 && np->ops[i].target[n] == '/')
			return true;
	}
	return false;
}

/* Each component of rel, made inside the root where missing (directories;
 * the last an empty file for a file's bind). */
static int make_in_root(int root, const char *rel, bool last_dir, const char *what,
			struct al_error *err)
{
	char path[4096];

	if (strlen(rel) >= sizeof(path))
		return al_error_set(err, ENAMETOOLONG, "%s: mountpoint too long", what);
	snprintf(path, sizeof(path), "%s", rel);
	for (char *c = path;; c++) {
		if (*c != '/' && *c != '\0')
			continue;
		char saved = *c;
		bool last = saved == '\0';
		*c = '\0';
		int fd = open_in(root, path, 0);
		if (fd >= 0) {
			close(fd);
		} else if (errno == ENOENT) {
			char *slash = strrchr(path, '/');
			const char *base = slash ? slash + 1 : path;
			int pfd = slash ? (*slash = '\0', open_in(root, path, O_DIRECTORY))
					: open_in(root, ".", O_DIRECTORY);
			if (slash)
				*slash = '/';
			if (pfd < 0)
				return al_error_setsys(err, errno, "%s: the container's root: %s",
						       what, path);
			int r = (!last || last_dir)
				    ? mkdirat(pfd, base, 0755)
				    : openat(pfd, base,
					     O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC,
					     0644);
			int e = errno;
			if (r >= 0 && last && !last_dir)
				close(r);
			close(pfd);
			if (r < 0 && e != EEXIST)
				return al_error_setsys(err, e,
						       "%s: making the mountpoint %s in the "
						       "container's root",
						       what, path);
		} else {
			return al_error_setsys(err, errno, "%s: the container's root: %s", what,
					       path);
		}
		*c = saved;
		if (last)
			return 0;
	}
}

int al_rooted_prepare(const struct al_native_plan *np, const struct al_plan *plan,
		      struct al_error *err)
{
	const struct al_fs_entry *root = NULL;
	int r = 0;

	for (size_t i = 0; i < plan->n_fs && !root; i++)
		if (plan->fs[i].kind == AL_FS_HOST && strcmp(plan->fs[i].path, "/") == 0)
			root = &plan->fs[i];
	if (!root)
		return al_error_set(err, EINVAL, "a container's plan without its root");
	struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
			       .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
	int rootfd = al_sys_openat2(AT_FDCWD, root->source, &how, sizeof(how));
	if (rootfd < 0)
		return al_error_setsys(err, errno, "the container's root %s", root->source);
	for (size_t i = 0; i < np->n_ops && r == 0; i++) {
		const struct al_mount_op *op = &np->ops[i];
		const char *rel = in_root(op);
		bool mounts =
		    al_op_mounts(op->kind) && op->kind != AL_OP_MASK && op->kind != AL_OP_RDONLY;
		if (!rel || i == np->root_op || (!mounts && op->kind != AL_OP_MKDIR) ||
		    below_mount(np, i))
			continue;
		r = make_in_root(rootfd, rel, op->kind != AL_OP_BIND || op->dir, op->what, err);
	}
	close(rootfd);
	return r;
}
