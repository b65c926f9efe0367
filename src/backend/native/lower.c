/* Plan → the native backend's terms (lower.h): each file-tree entry becomes
 * the staging ops that make it and the landlock rule that bounds it; the
 * identity becomes the id maps. Pure: no system call but the landlock ABI
 * probe. */
#include "backend/native/lower.h"

#include <errno.h>
#include <linux/mount.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/sys.h"
#include "core/util.h"
#include "ids/slots.h"

#define OLD	"/oldroot"
#define NEW	"/newroot"
#define SCRATCH "/scratch"

#define LL_READ (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)
#define LL_WRITE                                                                                   \
	(LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR |                           \
	 LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_DIR |                            \
	 LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_SOCK |                              \
	 LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_SYM | LANDLOCK_ACCESS_FS_REFER |   \
	 LANDLOCK_ACCESS_FS_TRUNCATE)
#define LL_DEVICE (LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_IOCTL_DEV)
/* What a rule on a regular file may not carry (landlock refuses them). */
#define LL_DIR_ONLY                                                                                \
	(LANDLOCK_ACCESS_FS_READ_DIR | LANDLOCK_ACCESS_FS_REMOVE_DIR |                             \
	 LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_DIR |                            \
	 LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_SOCK |                              \
	 LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_SYM | LANDLOCK_ACCESS_FS_REFER)

struct lowering {
	const struct al_plan *plan;
	struct al_native_plan *np;
	char **dirs; /* staging paths already created, for mkdir -p */
	/* The read-only directories airlock makes (/etc): host entries inside
	 * them that may do no more get their rights from the directory's rule,
	 * not one of their own. */
	const struct al_fs_entry **made;
	size_t n_made;
	bool session; /* the session's own devpts is added under /dev */
};

/* Whether a directory the plan makes holds device nodes (a host device,
 * or the sandbox's own terminals, below it): /dev. The plan says only
 * that it is a read-only directory of its own with those entries; here
 * it becomes a small tmpfs of its own, sealed read-only at the end, so
 * the nodes' bind mounts have a mount of their own to live on. */
static bool holds_devices(const struct lowering *l, const struct al_fs_entry *dir)
{
	const struct al_plan *p = l->plan;

	if (l->session && al_path_is_under("/dev/pts", dir->path))
		return true;
	/* On a container's root nothing is made in its files but the
	 * mountpoints: every directory airlock makes is a tmpfs of its own. */
	if (al_plan_rooted(p))
		return true;
	for (size_t i = 0; i < p->n_fs; i++)
		if ((p->fs[i].kind == AL_FS_DEVICE || p->fs[i].kind == AL_FS_PTYS) &&
		    strcmp(p->fs[i].path, dir->path) != 0 &&
		    al_path_is_under(p->fs[i].path, dir->path))
			return true;
	return false;
}

static bool inside_made_dir(const struct lowering *l, const struct al_fs_entry *e)
{
	for (size_t i = 0; i < l->n_made; i++)
		if (al_path_is_under(e->path, l->made[i]->path) &&
		    (e->access & ~l->made[i]->access) == 0)
			return true;
	return false;
}

static struct al_mount_op *add_op(struct lowering *l, enum al_op_kind kind, char *target,
				  char *source, const char *what)
{
	struct al_native_plan *np = l->np;
	struct al_mount_op *op;

	np->ops = xrealloc(np->ops, (np->n_ops + 1) * sizeof(*np->ops));
	op = &np->ops[np->n_ops++];
	*op = (struct al_mount_op){.kind = kind, .target = target, .source = source, .input = -1};
	op->what = xstrdup(what);
	return op;
}

static bool dir_known(struct lowering *l, const char *staging)
{
	for (size_t i = 0; l->dirs && l->dirs[i]; i++)
		if (strcmp(l->dirs[i], staging) == 0)
			return true;
	return false;
}

/* mkdir -p of a staging path: one MKDIR op per component not made yet. */
static void mkdir_p(struct lowering *l, const char *staging, mode_t mode, bool sandbox_owned,
		    const char *what)
{
	_cleanup_free_ char *path = xstrdup(staging);

	for (char *c = path + 1;; c++) {
		if (*c != '/' && *c != '\0')
			continue;
		char saved = *c;
		*c = '\0';
		/* The three staging roots exist before any op runs. */
		if (strcmp(path, NEW) != 0 && strcmp(path, OLD) != 0 &&
		    strcmp(path, SCRATCH) != 0 && !dir_known(l, path)) {
			struct al_mount_op *op = add_op(l, AL_OP_MKDIR, xstrdup(path), NULL, what);
			op->mode = mode;
			op->sandbox_owned = sandbox_owned;
			al_strv_push(&l->dirs, path);
		}
		*c = saved;
		if (saved == '\0')
			break;
	}
}

/* The directories on the way to path; inside the workdir's scratch (a
 * mount under it) they are the sandbox user's, like the workdir. */
static void mkdir_parent(struct lowering *l, const char *path, const char *what)
{
	_cleanup_free_ char *parent = xasprintf(NEW "%s", path);
	bool in_workdir = false;

	*strrchr(parent, '/') = '\0';
	for (size_t i = 0; i < l->plan->n_fs; i++) {
		const struct al_fs_entry *e = &l->plan->fs[i];
		if (e->kind == AL_FS_SCRATCH && e->sandbox_owned &&
		    al_path_is_under(path, e->path) && strcmp(path, e->path) != 0)
			in_workdir = true;
	}
	mkdir_p(l, parent, 0755, in_workdir, what);
}

static void add_ll(struct lowering *l, const char *path, uint64_t access)
{
	struct al_native_plan *np = l->np;

	access &= al_landlock_fs_all(np->landlock_abi);
	for (size_t i = 0; i < np->n_ll_rules; i++) {
		struct al_landlock_rule *r = &np->ll_rules[i];
		if (strcmp(r->path, path) == 0) {
			r->access |= access;
			return;
		}
	}
	np->ll_rules = xrealloc(np->ll_rules, (np->n_ll_rules + 1) * sizeof(*np->ll_rules));
	np->ll_rules[np->n_ll_rules++] = (struct al_landlock_rule){xstrdup(path), access};
}

/* The mount flags and landlock rights an entry's access asks for. */
static uint64_t mount_attr(unsigned access)
{
	return MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
	       (access & AL_FS_WRITE ? 0 : MOUNT_ATTR_RDONLY) |
	       (access & AL_FS_EXEC ? 0 : MOUNT_ATTR_NOEXEC);
}

static uint64_t ll_access(unsigned access)
{
	return (access & AL_FS_READ ? LL_READ : 0) | (access & AL_FS_WRITE ? LL_WRITE : 0) |
	       (access & AL_FS_EXEC ? LANDLOCK_ACCESS_FS_EXECUTE : 0);
}

static struct al_mount_op *add_bind(struct lowering *l, const struct al_fs_entry *e, uint64_t attr)
{
	struct al_mount_op *op;

	mkdir_parent(l, e->path, e->what);
	op = add_op(l, AL_OP_BIND, xasprintf(NEW "%s", e->path), xasprintf(OLD "%s", e->source),
		    e->what);
	op->dir = e->dir;
	op->attr = attr;
	op->dev = e->dev;
	op->ino = e->ino;
	if (e->as_owner || e->root_ids) {
		op->input = (int)l->np->n_inputs++;
		op->owner_uid = e->owner_uid;
		op->owner_gid = e->owner_gid;
		op->copy = e->copy;
		op->root_ids = e->root_ids;
		op->lenient = e->lenient;
	}
	if (op->dir)
		al_strv_push(&l->dirs, op->target);
	return op;
}

/* The scratch tmpfs and the subdirectories behind its faces. */
static void lower_scratch(struct lowering *l, const struct al_plan *p)
{
	struct al_mount_op *op;

	op = add_op(l, AL_OP_TMPFS, xstrdup(SCRATCH),
		    xasprintf("size=%llu,mode=0755", (unsigned long long)p->scratch_bytes),
		    "scratch");
	op->attr = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (p->scratch_exec ? 0 : MOUNT_ATTR_NOEXEC);
	for (size_t i = 0; i < p->n_fs; i++) {
		const struct al_fs_entry *e = &p->fs[i];
		if (e->kind != AL_FS_SCRATCH)
			continue;
		_cleanup_free_ char *sub = xasprintf(SCRATCH "/%s", e->source);
		mkdir_p(l, sub, e->mode, e->sandbox_owned, "scratch");
	}
}

/* The container's root: bound at /newroot itself, writable while the tree
 * is built (its mountpoints), read-only at the end when the plan says. */
static void lower_root(struct lowering *l, const struct al_fs_entry *e)
{
	struct al_mount_op *op =
	    add_op(l, AL_OP_BIND, xstrdup(NEW), xasprintf(OLD "%s", e->source), e->what);
	op->dir = true;
	op->attr = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
	op->seal = !(e->access & AL_FS_WRITE);
	op->dev = e->dev;
	op->ino = e->ino;
	op->input = (int)l->np->n_inputs++;
	op->root_ids = true;
	l->np->root_op = l->np->n_ops - 1;
	add_ll(l, "/", ll_access(e->access));
}

/* A file airlock writes on a container's root: made in the staging view's
 * own /files and bound read-only over its path, so nothing is written into
 * the container's files. */
static void lower_root_file(struct lowering *l, const struct al_fs_entry *e)
{
	struct al_mount_op *op;
	char *staged = xasprintf("/files/%zu", l->np->n_ops);

	if (!dir_known(l, "/files")) {
		add_op(l, AL_OP_MKDIR, xstrdup("/files"), NULL, "airlock's files")->mode = 0755;
		al_strv_push(&l->dirs, "/files");
		op = add_op(l, AL_OP_TMPFS, xstrdup("/files"),
			    xstrdup("size=4m,nr_inodes=256,mode=0755"), "airlock's files");
		op->attr = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;
	}
	op = add_op(l, AL_OP_FILE, xstrdup(staged), xstrdup(e->source), e->what);
	op->len = e->len;
	op->mode = e->mode;
	mkdir_parent(l, e->path, e->what);
	op = add_op(l, AL_OP_BIND, xasprintf(NEW "%s", e->path), staged, e->what);
	op->attr = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;
	add_ll(l, e->path, LL_READ & ~(uint64_t)LL_DIR_ONLY);
}

static void lower_entry(struct lowering *l, const struct al_fs_entry *e)
{
	struct al_mount_op *op;

	if (al_plan_rooted(l->plan) && e->kind == AL_FS_HOST && strcmp(e->path, "/") == 0) {
		lower_root(l, e);
		return;
	}
	if (al_plan_rooted(l->plan) && e->kind == AL_FS_FILE) {
		lower_root_file(l, e);
		return;
	}
	switch (e->kind) {
	case AL_FS_HOST: {
		uint64_t ll = ll_access(e->access);
		add_bind(l, e, mount_attr(e->access));
		if (!inside_made_dir(l, e))
			add_ll(l, e->path, e->dir ? ll : ll & ~(uint64_t)LL_DIR_ONLY);
		break;
	}
	case AL_FS_DEVICE:
		/* Device binds keep nodev off: the node is the point. */
		add_bind(l, e,
			 MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC |
			     (e->access & AL_FS_WRITE ? 0 : MOUNT_ATTR_RDONLY));
		add_ll(l, e->path, LL_READ | (e->access & AL_FS_WRITE ? LL_DEVICE : 0));
		break;
	case AL_FS_LINK:
		mkdir_parent(l, e->path, e->what);
		add_op(l, AL_OP_SYMLINK, xasprintf(NEW "%s", e->path), xstrdup(e->source), e->what);
		break;
	case AL_FS_FILE:
		mkdir_parent(l, e->path, e->what);
		op = add_op(l, AL_OP_FILE, xasprintf(NEW "%s", e->path), xstrdup(e->source),
			    e->what);
		op->len = e->len;
		op->mode = e->mode;
		break;
	case AL_FS_DIR: {
		_cleanup_free_ char *t = xasprintf(NEW "%s", e->path);
		mkdir_p(l, t, e->mode, false, e->what);
		if (!holds_devices(l, e)) {
			add_ll(l, e->path, ll_access(e->access));
			l->made = xrealloc(l->made, (l->n_made + 1) * sizeof(*l->made));
			l->made[l->n_made++] = e;
			break;
		}
		op = add_op(l, AL_OP_TMPFS, xstrdup(t),
			    xasprintf("size=64k,nr_inodes=64,mode=%04o", (unsigned)e->mode),
			    e->what);
		/* nodev is left off only to keep the flags honest: the nodes are
		 * bind mounts with their own flags, and the tmpfs is sealed
		 * read-only. */
		op->attr = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC;
		op->seal = true;
		add_ll(l, e->path, ll_access(e->access));
		break;
	}
	case AL_FS_PROC: {
		_cleanup_free_ char *t = xasprintf(NEW "%s", e->path);
		mkdir_p(l, t, e->mode, false, e->what);
		op = add_op(l, AL_OP_PROC, xstrdup(t), NULL, e->what);
		op->attr = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;
		add_ll(l, e->path, ll_access(e->access));
		break;
	}
	case AL_FS_PTYS: {
		/* A new instance, so the sandbox sees only its own terminals;
		 * ptmx (the one way to make more) is open to all, the slaves
		 * belong to the sandbox's user, and max bounds how many. nodev
		 * stays off: the nodes are the point. */
		_cleanup_free_ char *t = xasprintf(NEW "%s", e->path);
		mkdir_p(l, t, e->mode, false, e->what);
		op = add_op(l, AL_OP_DEVPTS, xstrdup(t),
			    xasprintf("newinstance,ptmxmode=0666,mode=0600,uid=%u,gid=%u,max=%u",
				      l->plan->root ? (unsigned)l->plan->uid : AL_SANDBOX_UID,
				      l->plan->root ? (unsigned)l->plan->gid : AL_SANDBOX_GID,
				      AL_TTY_MAX_PTYS),
			    e->what);
		op->attr = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC;
		add_ll(l, e->path, LL_READ | LL_DEVICE);
		break;
	}
	case AL_FS_SCRATCH: {
		_cleanup_free_ char *t = xasprintf(NEW "%s", e->path);
		mkdir_p(l, t, e->mode, false, e->what);
		op = add_op(l, AL_OP_BIND, TAKE_PTR(t), xasprintf(SCRATCH "/%s", e->source),
			    e->what);
		op->dir = true;
		op->attr = mount_attr(e->access);
		add_ll(l, e->path, ll_access(e->access));
		break;
	}
	case AL_FS_SPECIAL: {
		_cleanup_free_ char *t = xasprintf(NEW "%s", e->path);
		mkdir_p(l, t, 0755, false, e->what);
		op = add_op(l, AL_OP_SPECIAL, xstrdup(t), xstrdup(e->source), e->what);
		op->attr = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC |
			   (e->access & AL_FS_WRITE ? 0 : MOUNT_ATTR_RDONLY);
		add_ll(l, e->path, ll_access(e->access));
		break;
	}
	case AL_FS_MASK:
	case AL_FS_RDONLY:
		op = add_op(l, e->kind == AL_FS_MASK ? AL_OP_MASK : AL_OP_RDONLY,
			    xasprintf(NEW "%s", e->path), NULL, e->what);
		/* A masked file is /dev/null's bind: nodev left off. */
		op->attr = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC |
			   (e->kind == AL_FS_RDONLY ? MOUNT_ATTR_NODEV : 0);
		break;
	}
}

void al_native_set_ids(struct al_native_plan *np, const struct al_host_ids *ids)
{
	np->ids = *ids;
	if (np->rooted) {
		/* The whole slot: the container's files keep their ids. */
		snprintf(np->uid_map, sizeof(np->uid_map), "0 %u %u\n", ids->root_uid,
			 AL_IDS_SLOT_SIZE);
		snprintf(np->gid_map, sizeof(np->gid_map), "0 %u %u\n", ids->root_gid,
			 AL_IDS_SLOT_SIZE);
	} else if (!ids->rootless) {
		snprintf(np->uid_map, sizeof(np->uid_map), "0 %u 1\n%u %u 1\n", ids->root_uid,
			 AL_SANDBOX_UID, ids->uid);
		snprintf(np->gid_map, sizeof(np->gid_map), "0 %u 1\n%u %u 1\n", ids->root_gid,
			 AL_SANDBOX_GID, ids->gid);
	} else {
		snprintf(np->uid_map, sizeof(np->uid_map), "%u %u 1\n", AL_SANDBOX_UID, ids->uid);
		snprintf(np->gid_map, sizeof(np->gid_map), "%u %u 1\n", AL_SANDBOX_GID, ids->gid);
	}
}

int al_native_check(const struct al_plan *p, struct al_error *err)
{
	if (p->landlock_required && al_landlock_abi() == 0)
		return al_error_set(err, EOPNOTSUPP,
				    "landlock is not available on this kernel; refusing to run "
				    "(set \"filesystem\": {\"landlock\": \"best-effort\"} to run "
				    "with mount isolation only)");
	return 0;
}

int al_native_lower(const struct al_plan *p, struct al_native_plan **ret, struct al_error *err)
{
	return al_native_lower_session(p, false, ret, err);
}

int al_native_lower_session(const struct al_plan *p, bool session, struct al_native_plan **ret,
			    struct al_error *err)
{
	_cleanup_(al_native_plan_freep) struct al_native_plan *np = xcalloc(1, sizeof(*np));
	struct lowering l = {.plan = p, .np = np, .session = session};
	int r;

	np->landlock_abi = al_landlock_abi();
	np->rooted = al_plan_rooted(p);
	np->netns_sysfs = -1;
	if ((r = al_native_check(p, err)) < 0)
		return r;
	if (np->landlock_abi > 0) {
		np->landlock_fs = al_landlock_fs_all(np->landlock_abi);
		if (np->landlock_abi >= 6)
			np->landlock_scoped =
			    LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL;
	}
	if (!p->ids_per_run) {
		struct al_host_ids ids;
		al_plan_host_ids(p, -1, &ids);
		al_native_set_ids(np, &ids);
	}
	np->want_scratch = p->n_copy_in > 0 || p->n_copy_out > 0 || p->scratch_read_after;
	add_ll(&l, "/", LANDLOCK_ACCESS_FS_READ_DIR);
	lower_scratch(&l, p);
	for (size_t i = 0; i < p->n_fs; i++)
		lower_entry(&l, &p->fs[i]);
	if (session && !p->tty && !al_plan_rooted(p)) {
		/* A session's execs may each ask for a terminal: the sandbox's
		 * own devpts and /dev/ptmx, as a -t plan has them (mounted
		 * after the rest of /dev, which is sealed only at the end). */
		struct al_fs_entry pts = {.kind = AL_FS_PTYS,
					  .path = "/dev/pts",
					  .access = AL_FS_READ | AL_FS_WRITE,
					  .mode = 0755,
					  .what =
					      "/dev/pts (the sandbox's, for its execs' terminals)"};
		struct al_fs_entry ptmx = {.kind = AL_FS_LINK,
					   .path = "/dev/ptmx",
					   .source = "pts/ptmx",
					   .access = AL_FS_READ,
					   .what = "/dev/ptmx"};
		lower_entry(&l, &pts);
		lower_entry(&l, &ptmx);
	}
	al_strv_free(l.dirs);
	free(l.made);

	/* Compiled at build time; installing it needs no libseccomp. */
	np->seccomp.len = al_seccomp_program_len;
	np->seccomp.filter = (struct sock_filter *)al_seccomp_program;
	np->seccomp_rules = al_seccomp_table(&np->n_seccomp_rules);
	al_seccomp_summarize(np->seccomp_rules, np->n_seccomp_rules, &np->seccomp_summary);
	*ret = TAKE_PTR(np);
	return 0;
}

void al_native_plan_free(struct al_native_plan *np)
{
	if (!np)
		return;
	al_closep(&np->netns_sysfs);
	for (size_t i = 0; i < np->n_ops; i++) {
		free(np->ops[i].target);
		free(np->ops[i].source);
		free(np->ops[i].what);
	}
	free(np->ops);
	for (size_t i = 0; i < np->n_copies; i++) {
		free(np->copies[i].host);
		free(np->copies[i].part);
	}
	free(np->copies);
	for (size_t i = 0; i < np->n_ll_rules; i++)
		free(np->ll_rules[i].path);
	free(np->ll_rules);
	free(np);
}
