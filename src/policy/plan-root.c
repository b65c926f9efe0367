/* Plan building for a container's own root (policy.h struct
 * al_policy_root, the OCI front end's). "/" is the bundle's root
 * filesystem, shown with the ids the engine gave its files; on it airlock
 * puts its own /proc and /dev (its devices, its own terminals, /dev/shm a
 * face of the scratch), the container's tmpfs mounts as faces of the one
 * scratch, its host binds (shown with the same ids), the files airlock
 * writes (resolv.conf for the gateway's DNS stub), and last the masked and
 * read-only paths. Like plan.c, it only looks at the host. */
#include <errno.h>
#include <linux/filter.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "ids/slots.h"
#include "policy/plan-internal.h"

static const char *const dev_nodes[] = {"null", "zero", "full", "random", "urandom", "tty", NULL};
static const char *const dev_links[][2] = {{"/dev/fd", "/proc/self/fd"},
					   {"/dev/stdin", "/proc/self/fd/0"},
					   {"/dev/stdout", "/proc/self/fd/1"},
					   {"/dev/stderr", "/proc/self/fd/2"},
					   {"/dev/ptmx", "pts/ptmx"}};
/* Where airlock's own tree is: nothing of the container's goes there. */
static const char *const own[] = {"/proc", "/dev", NULL};
/* The most lines of one id map airlock takes from an engine. */
#define MAP_MAX 16

static void *dup_mem(const void *src, size_t n)
{
	return memcpy(xmalloc(n), src, n);
}

/* One of the engine's id maps, checked: every sandbox id inside the slot,
 * no two ranges over one id. The same ids 0 to 65535 when it gave none. */
static void take_map(const char *what, const struct al_id_range *in, size_t n,
		     struct al_id_range **out, size_t *n_out, struct al_errors *errs)
{
	if (n == 0) {
		*out = xcalloc(1, sizeof(**out));
		**out = (struct al_id_range){0, 0, AL_IDS_SLOT_SIZE};
		*n_out = 1;
		return;
	}
	if (n > MAP_MAX) {
		al_errors_add(errs, EINVAL, NULL, what, "%zu ranges; airlock takes at most %d", n,
			      MAP_MAX);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t in_end = (uint64_t)in[i].inner + in[i].count;
		uint64_t out_end = (uint64_t)in[i].outer + in[i].count;
		if (in[i].count == 0 || in_end > AL_IDS_SLOT_SIZE || out_end > UINT32_MAX) {
			al_errors_add(errs, EINVAL, NULL, what,
				      "range %zu (container %u, host %u, size %u): the container's "
				      "ids must lie in 0 to %u, the sandbox's whole range",
				      i, in[i].inner, in[i].outer, in[i].count,
				      AL_IDS_SLOT_SIZE - 1);
			return;
		}
		/* Never the pool's ids: they are other runs'. */
		if ((uint64_t)in[i].outer <
			AL_IDS_POOL_BASE + (uint64_t)AL_IDS_POOL_SLOTS * AL_IDS_SLOT_SIZE &&
		    out_end > AL_IDS_POOL_BASE) {
			al_errors_add(errs, EPERM, NULL, what,
				      "range %zu (host %u, size %u) reaches airlock's pool of host "
				      "ids, which are other runs'",
				      i, in[i].outer, in[i].count);
			return;
		}
		for (size_t j = 0; j < i; j++)
			if (in[i].inner < in[j].inner + in[j].count && in[j].inner < in_end) {
				al_errors_add(errs, EINVAL, NULL, what,
					      "ranges %zu and %zu overlap in the container", j, i);
				return;
			}
	}
	*out = dup_mem(in, n * sizeof(*in));
	*n_out = n;
}

static bool is_own(const char *path)
{
	for (size_t i = 0; own[i]; i++)
		if (al_path_is_under(path, own[i]))
			return true;
	return false;
}

/* What goes on the root besides airlock's /proc and /dev, to be put in
 * path order (parents first): a tmpfs face, a host bind, a file. */
struct item {
	const char *path;
	const struct al_policy_mount *mount; /* or NULL */
	bool file;			     /* resolv.conf */
	const char *special;		     /* a kernel file system's type */
	size_t face;			     /* the tmpfs's index */
};

static int cmp_item(const void *a, const void *b)
{
	const struct item *x = a, *y = b;
	int c = strcmp(x->path, y->path);
	/* At one path, the gateway's resolv.conf first: the engine's bind
	 * there gives way to it; two others are refused below. */
	if (c == 0 && x->file != y->file)
		return x->file ? -1 : 1;
	return c ? c : (x > y) - (x < y);
}

static void add_bind(struct al_plan *p, const struct al_policy_mount *m, struct al_errors *errs)
{
	char real[PATH_MAX], what[PATH_MAX + 32];
	struct stat st;

	if (!realpath(m->host, real)) {
		al_errors_add(errs, errno, NULL, NULL, "%s: %s: %s", m->origin, m->host,
			      strerror(errno));
		return;
	}
	if (stat(real, &st) < 0) {
		al_errors_add(errs, errno, NULL, NULL, "%s: %s: %s", m->origin, real,
			      strerror(errno));
		return;
	}
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
		al_errors_add(errs, EINVAL, NULL, NULL,
			      "%s: %s is neither a regular file nor a directory", m->origin, real);
		return;
	}
	unsigned access = AL_FS_READ | (m->mode == AL_MOUNT_RW ? AL_FS_WRITE : 0) |
			  (m->exec != 0 ? AL_FS_EXEC : 0);
	snprintf(what, sizeof(what), "%s %s", m->mode == AL_MOUNT_RW ? "rw" : "ro", m->path);
	/* As airlock run's inputs: the container's user acts as the file's
	 * owner (never as host root: a root-owned one is shown with its own
	 * ids, written through the others' bits), mounted as asked and left
	 * to its modes. */
	struct al_fs_entry *e = al_plan_add_host(p, AL_FS_HOST, real, m->path, &st, access, what);
	e->as_owner = true;
	e->owner_uid = st.st_uid;
	e->owner_gid = st.st_gid;
	e->lenient = true;
}

/* Host directories no container's root may be, nor hold. */
static const char *const host_dirs[] = {"/etc",	  "/usr",  "/bin",  "/sbin", "/lib",
					"/lib64", "/boot", "/root", "/home", "/var",
					"/run",	  "/proc", "/sys",  "/dev",  NULL};

static void build_items(struct al_plan *p, const struct al_policy *pol, struct al_errors *errs)
{
	const struct al_policy_root *r = pol->root;
	size_t n_tmpfs = al_strv_len(r->tmpfs), n_special = al_strv_len(r->special) / 2, n = 0;
	_cleanup_free_ struct item *items =
	    xcalloc(n_tmpfs + n_special + pol->n_mounts + 1, sizeof(*items));
	unsigned scratch = AL_FS_READ | AL_FS_WRITE | (p->scratch_exec ? AL_FS_EXEC : 0);

	for (size_t i = 0; i < n_tmpfs; i++)
		items[n++] = (struct item){.path = r->tmpfs[i], .face = i};
	for (size_t i = 0; i < pol->n_mounts; i++)
		items[n++] = (struct item){.path = pol->mounts[i].path, .mount = &pol->mounts[i]};
	for (size_t i = 0; i < n_special; i++)
		items[n++] =
		    (struct item){.path = r->special[2 * i], .special = r->special[2 * i + 1]};
	if (p->gateway)
		items[n++] = (struct item){.path = "/etc/resolv.conf", .file = true};
	qsort(items, n, sizeof(*items), cmp_item);
	for (size_t i = 0; i < n; i++) {
		const struct item *it = &items[i];
		const char *origin = it->mount	? it->mount->origin
				     : it->file ? "resolv.conf"
						: "tmpfs";
		if (!al_path_is_clean_absolute(it->path) || strcmp(it->path, "/") == 0) {
			al_errors_add(errs, EINVAL, NULL, NULL,
				      "%s: \"%s\" is not a clean absolute path below /", origin,
				      it->path);
			continue;
		}
		/* /dev/shm is the scratch's own face already. */
		if (!it->mount && !it->file && !it->special && strcmp(it->path, "/dev/shm") == 0)
			continue;
		/* A kernel file system or a tmpfs may go in airlock's /dev
		 * (/dev/mqueue); nothing of the host's may. */
		bool in_dev = al_path_is_under(it->path, "/dev") && strcmp(it->path, "/dev") != 0 &&
			      !al_path_is_under(it->path, "/dev/pts") && !it->mount && !it->file;
		if (is_own(it->path) && !in_dev) {
			al_errors_add(errs, EINVAL, NULL, NULL,
				      "%s: %s would cover or sit inside airlock's own %s", origin,
				      it->path,
				      al_path_is_under(it->path, "/proc") ? "/proc" : "/dev");
			continue;
		}
		if (i > 0 && strcmp(items[i - 1].path, it->path) == 0) {
			if (!items[i - 1].file)
				al_errors_add(errs, EINVAL, NULL, NULL, "%s: a second mount at %s",
					      origin, it->path);
			continue;
		}
		if (it->file) {
			al_plan_add_file(p, it->path,
					 xstrdup("nameserver 127.0.0.1\n"
						 "options timeout:1 attempts:1\n"),
					 0644);
		} else if (it->mount) {
			add_bind(p, it->mount, errs);
		} else if (it->special) {
			char what[PATH_MAX + 32];
			bool rw = strcmp(it->special, "mqueue") == 0;
			if (!rw && strcmp(it->special, "sysfs") && strcmp(it->special, "cgroup2")) {
				al_errors_add(errs, EINVAL, NULL, NULL, "%s: no file system \"%s\"",
					      it->path, it->special);
				continue;
			}
			snprintf(what, sizeof(what), "%s %s (the sandbox's own)", it->special,
				 it->path);
			al_plan_add_fs(p, AL_FS_SPECIAL, it->path, xstrdup(it->special),
				       AL_FS_READ | (rw ? AL_FS_WRITE : 0), what);
		} else {
			char part[32], what[PATH_MAX + 32];
			snprintf(part, sizeof(part), "t%zu", it->face);
			snprintf(what, sizeof(what), "tmpfs %s (scratch)", it->path);
			struct al_fs_entry *e = al_plan_add_fs(p, AL_FS_SCRATCH, it->path,
							       xstrdup(part), scratch, what);
			e->mode = 01777;
		}
	}
}

static void build_dev(struct al_plan *p)
{
	al_plan_add_fs(p, AL_FS_PROC, "/proc", NULL, AL_FS_READ, "/proc")->mode = 0555;
	al_plan_add_fs(p, AL_FS_DIR, "/dev", NULL, AL_FS_READ, "/dev")->mode = 0755;
	al_plan_add_dev_nodes(p, dev_nodes);
	al_plan_add_fs(p, AL_FS_PTYS, "/dev/pts", NULL, AL_FS_READ | AL_FS_WRITE,
		       "/dev/pts (the sandbox's)")
	    ->mode = 0755;
	for (size_t i = 0; i < AL_ARRAY_SIZE(dev_links); i++)
		al_plan_add_fs(p, AL_FS_LINK, dev_links[i][0], xstrdup(dev_links[i][1]), AL_FS_READ,
			       dev_links[i][0]);
	al_plan_add_fs(p, AL_FS_SCRATCH, "/dev/shm", xstrdup("shm"), AL_FS_READ | AL_FS_WRITE,
		       "/dev/shm (scratch)")
	    ->mode = 01777;
}

static void build_hidden(struct al_plan *p, char *const *paths, enum al_fs_kind kind,
			 const char *what, struct al_errors *errs)
{
	for (size_t i = 0; paths && paths[i]; i++) {
		if (!al_path_is_clean_absolute(paths[i]) || strcmp(paths[i], "/") == 0) {
			al_errors_add(errs, EINVAL, NULL, NULL,
				      "%s[%zu]: \"%s\" is not a clean absolute path below /", what,
				      i, paths[i]);
			continue;
		}
		char w[PATH_MAX + 32];
		snprintf(w, sizeof(w), "%s %s", kind == AL_FS_MASK ? "masked" : "read-only",
			 paths[i]);
		al_plan_add_fs(p, kind, paths[i], NULL, AL_FS_READ, w);
	}
}

static const char *const sysctl_allowed[] = {"net.ipv4.ping_group_range",
					     "net.ipv4.ip_unprivileged_port_start",
					     "net.ipv4.ip_local_port_range", NULL};

bool al_plan_sysctl_allowed(const char *key)
{
	for (size_t i = 0; sysctl_allowed[i]; i++)
		if (strcmp(key, sysctl_allowed[i]) == 0)
			return true;
	return false;
}

void al_plan_build_root(struct al_plan *p, const struct al_policy *pol, struct al_errors *errs)
{
	const struct al_policy_root *r = pol->root;
	struct al_plan_root *pr = xcalloc(1, sizeof(*pr));
	char real[PATH_MAX];
	struct stat st;

	p->root = pr;
	pr->readonly = r->readonly;
	pr->umask = r->umask & 0777;
	pr->oom_score_adj = r->oom_score_adj;
	if (r->oom_score_adj < 0 || r->oom_score_adj > 1000)
		al_errors_add(errs, EPERM, NULL, "process.oomScoreAdj",
			      "%d: 0 to 1000 (a sandbox is never made less likely to be killed)",
			      r->oom_score_adj);
	for (size_t i = 0; r->sysctl && r->sysctl[i] && r->sysctl[i + 1]; i += 2) {
		const char *v = r->sysctl[i + 1];
		if (!al_plan_sysctl_allowed(r->sysctl[i]) || strlen(v) > 64 ||
		    strspn(v, "0123456789 \t") != strlen(v))
			al_errors_add(errs, EPERM, NULL, "linux.sysctl",
				      "%s = \"%.64s\": not a sysctl a sandbox may set",
				      r->sysctl[i], v);
	}
	pr->sysctl = al_strv_dup(r->sysctl);
	pr->cgroup_path = r->cgroup_path ? xstrdup(r->cgroup_path) : NULL;
	if (r->netns) {
		pr->netns = xstrdup(r->netns);
		pr->netns_field =
		    xstrdup(r->netns_field ? r->netns_field : "the network namespace's path");
	}
	if (r->seccomp_len) {
		pr->seccomp = dup_mem(r->seccomp, r->seccomp_len * sizeof(struct sock_filter));
		pr->seccomp_len = r->seccomp_len;
	}
	take_map("linux.uidMappings", r->uid_map, r->n_uid_map, &pr->uid_map, &pr->n_uid_map, errs);
	take_map("linux.gidMappings", r->gid_map, r->n_gid_map, &pr->gid_map, &pr->n_gid_map, errs);
	p->uid = r->uid;
	p->gid = r->gid;
	if (r->uid >= AL_IDS_SLOT_SIZE || r->gid >= AL_IDS_SLOT_SIZE)
		al_errors_add(errs, EINVAL, NULL, "process.user",
			      "uid %u, gid %u: the sandbox's ids are 0 to %u", r->uid, r->gid,
			      AL_IDS_SLOT_SIZE - 1);
	for (size_t i = 0; i < r->n_groups; i++)
		if (r->groups[i] >= AL_IDS_SLOT_SIZE)
			al_errors_add(errs, EINVAL, NULL, "process.user.additionalGids",
				      "gid %u: the sandbox's ids are 0 to %u", r->groups[i],
				      AL_IDS_SLOT_SIZE - 1);
	if (r->n_groups) {
		p->groups = dup_mem(r->groups, r->n_groups * sizeof(*r->groups));
		p->n_groups = r->n_groups;
	}
	if (p->rootless)
		al_errors_add(errs, EPERM, NULL, "root",
			      "a container's own root needs airlock to run as root (its files "
			      "keep the ids the engine gave them, in a whole slot of host ids)");
	else if (!p->ids_per_run)
		al_errors_add(errs, EINVAL, NULL, "identity.host_ids",
			      "a container's own root needs a slot of the pool per run (its "
			      "65536 ids), not a fixed range");
	if (!r->host || !realpath(r->host, real)) {
		al_errors_add(errs, r->host ? errno : EINVAL, NULL, "root.path", "%s: %s",
			      r->host ? r->host : "(none)", strerror(r->host ? errno : EINVAL));
		return;
	}
	if (stat(real, &st) < 0 || !S_ISDIR(st.st_mode)) {
		al_errors_add(errs, ENOTDIR, NULL, "root.path", "%s is not a directory", real);
		return;
	}
	for (size_t i = 0; host_dirs[i]; i++)
		if (al_path_is_under(host_dirs[i], real)) {
			al_errors_add(errs, EPERM, NULL, "root.path",
				      "%s holds the host's %s: a container's root is a directory "
				      "of its own",
				      real, host_dirs[i]);
			return;
		}
	unsigned access = AL_FS_READ | AL_FS_EXEC | (r->readonly ? 0 : AL_FS_WRITE);
	al_plan_add_host(p, AL_FS_HOST, real, "/", &st, access,
			 r->readonly ? "root (the container's, read-only)"
				     : "root (the container's)")
	    ->root_ids = true;
	build_dev(p);
	build_items(p, pol, errs);
	al_plan_build_cred_files(p);
	build_hidden(p, r->masked, AL_FS_MASK, "linux.maskedPaths", errs);
	build_hidden(p, r->readonly_paths, AL_FS_RDONLY, "linux.readonlyPaths", errs);
}

void al_plan_free_root(struct al_plan *p)
{
	if (p->root) {
		free(p->root->uid_map);
		free(p->root->gid_map);
		free(p->root->seccomp);
		al_strv_free(p->root->sysctl);
		free(p->root->cgroup_path);
		free(p->root->netns);
		free(p->root->netns_field);
		free(p->root);
	}
	free(p->groups);
}
