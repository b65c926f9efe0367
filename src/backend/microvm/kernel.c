/* The guest's kernel and its modules: a Debian linux-image package's own
 * vmlinuz (found through dpkg's file list, never any other file of /boot),
 * and the modules the guest agent loads, resolved through modules.dep. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/microvm/image-internal.h"
#include "core/cleanup.h"
#include "core/util.h"

#define BOOT_DIR    "/boot"
#define MODULES_DIR "/lib/modules"
#define DPKG_INFO   "/var/lib/dpkg/info"

/* dpkg's order of one character of a non-digit run: '~' before anything,
 * even the end; letters before other characters. */
static int order(int c)
{
	if (isdigit(c))
		return 0;
	if (isalpha(c))
		return c;
	if (c == '~')
		return -1;
	if (c)
		return c + 256;
	return 0;
}

/* Alternating non-digit and digit runs, compared as dpkg does. */
static int runs_cmp(const char *a, const char *b)
{
	while (*a || *b) {
		int first_diff = 0;
		while ((*a && !isdigit((unsigned char)*a)) || (*b && !isdigit((unsigned char)*b))) {
			int ac = order((unsigned char)*a), bc = order((unsigned char)*b);
			if (ac != bc)
				return ac - bc;
			a++;
			b++;
		}
		while (*a == '0')
			a++;
		while (*b == '0')
			b++;
		while (isdigit((unsigned char)*a) && isdigit((unsigned char)*b)) {
			if (!first_diff)
				first_diff = *a - *b;
			a++;
			b++;
		}
		if (isdigit((unsigned char)*a))
			return 1;
		if (isdigit((unsigned char)*b))
			return -1;
		if (first_diff)
			return first_diff;
	}
	return 0;
}

/* A version split into epoch, upstream and revision (after the last '-'). */
struct dversion {
	unsigned long epoch;
	char upstream[256];
	char revision[256];
};

static void split_version(const char *v, struct dversion *d)
{
	const char *colon = strchr(v, ':');
	d->epoch = 0;
	if (colon) {
		d->epoch = strtoul(v, NULL, 10);
		v = colon + 1;
	}
	snprintf(d->upstream, sizeof(d->upstream), "%s", v);
	char *dash = strrchr(d->upstream, '-');
	d->revision[0] = '\0';
	if (dash) {
		snprintf(d->revision, sizeof(d->revision), "%s", dash + 1);
		*dash = '\0';
	}
}

int al_vm_version_cmp(const char *a, const char *b)
{
	struct dversion x, y;
	split_version(a, &x);
	split_version(b, &y);
	if (x.epoch != y.epoch)
		return x.epoch < y.epoch ? -1 : 1;
	int r = runs_cmp(x.upstream, y.upstream);
	return r ? r : runs_cmp(x.revision, y.revision);
}

/* A Debian kernel ABI name ("6.1.0-57", "6.1.0-0.deb11.13"): every
 * '-'-separated part starts with a digit, so that "6.1.0-57-cloud" (the
 * cloud flavour's file seen from the "amd64" flavour) is not one. */
static bool abi_name(const char *v)
{
	if (!*v)
		return false;
	for (const char *p = v; p; p = strchr(p, '-') ? strchr(p, '-') + 1 : NULL) {
		if (!isdigit((unsigned char)*p))
			return false;
	}
	for (const char *p = v; *p; p++) {
		if (!isalnum((unsigned char)*p) && !strchr(".-+~", *p))
			return false;
	}
	return true;
}

/* Whether dpkg's file list for pkg lists path (a line of its own). */
static bool listed(const char *pkg, const char *path)
{
	static const char *const suffixes[] = {"", ":amd64"};
	for (size_t i = 0; i < AL_ARRAY_SIZE(suffixes); i++) {
		_cleanup_free_ char *list = xasprintf(DPKG_INFO "/%s%s.list", pkg, suffixes[i]);
		_cleanup_fclose_ FILE *f = fopen(list, "re");
		if (!f)
			continue;
		char *line = NULL;
		size_t cap = 0;
		ssize_t n;
		bool found = false;
		while (!found && (n = getline(&line, &cap, f)) > 0) {
			if (line[n - 1] == '\n')
				line[n - 1] = '\0';
			found = strcmp(line, path) == 0;
		}
		free(line);
		if (found)
			return true;
	}
	return false;
}

/* Which package (the signed one, else -unsigned) lists vmlinuz; NULL when
 * none does. */
static char *owner(const char *version, const char *flavour, const char *vmlinuz)
{
	char *pkg = xasprintf("linux-image-%s-%s", version, flavour);
	if (listed(pkg, vmlinuz))
		return pkg;
	free(pkg);
	pkg = xasprintf("linux-image-%s-%s-unsigned", version, flavour);
	if (listed(pkg, vmlinuz))
		return pkg;
	free(pkg);
	return NULL;
}

int al_vm_kernel_find(const char *flavour, struct al_vm_kernel *k, char *why, size_t len)
{
	memset(k, 0, sizeof(*k));
	_cleanup_free_ char *suffix = xasprintf("-%s", flavour);
	_cleanup_free_ char *best = NULL; /* the ABI name */
	DIR *d = opendir(BOOT_DIR);
	if (!d) {
		snprintf(why, len, "no Debian kernel of flavour %s: %s: %s", flavour, BOOT_DIR,
			 strerror(errno));
		return 0;
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		const char *name = de->d_name;
		size_t n = strlen(name), sl = strlen(suffix);
		if (strncmp(name, "vmlinuz-", 8) != 0 || n <= 8 + sl ||
		    strcmp(name + n - sl, suffix) != 0)
			continue;
		_cleanup_free_ char *version = strndup(name + 8, n - 8 - sl);
		if (!version || !abi_name(version))
			continue;
		if (best && al_vm_version_cmp(version, best) <= 0)
			continue;
		_cleanup_free_ char *vmlinuz = xasprintf(BOOT_DIR "/%s", name);
		_cleanup_free_ char *modules = xasprintf(MODULES_DIR "/%s%s", version, suffix);
		struct stat st;
		if (lstat(vmlinuz, &st) < 0 || !S_ISREG(st.st_mode))
			continue;
		if (stat(modules, &st) < 0 || !S_ISDIR(st.st_mode))
			continue;
		_cleanup_free_ char *pkg = owner(version, flavour, vmlinuz);
		if (!pkg)
			continue;
		free(best);
		best = TAKE_PTR(version);
		al_vm_kernel_free(k);
		k->version = xasprintf("%s%s", best, suffix);
		k->vmlinuz = TAKE_PTR(vmlinuz);
		k->modules = TAKE_PTR(modules);
		k->package = TAKE_PTR(pkg);
	}
	closedir(d);
	if (!best) {
		snprintf(why, len, "no Debian kernel of flavour %s: install linux-image-%s",
			 flavour, flavour);
		return 0;
	}
	return 1;
}

void al_vm_kernel_free(struct al_vm_kernel *k)
{
	free(k->version);
	free(k->vmlinuz);
	free(k->modules);
	free(k->package);
	memset(k, 0, sizeof(*k));
}

/* modules.dep: one line per module, "PATH: DEP DEP ...", every path
 * relative to the modules directory; a module's line names all it needs,
 * direct or not. */
struct dep_line {
	char *path;
	char **deps;
};

struct depmap {
	struct dep_line *v;
	size_t n;
};

static void depmap_free(struct depmap *m)
{
	for (size_t i = 0; i < m->n; i++) {
		free(m->v[i].path);
		al_strv_free(m->v[i].deps);
	}
	free(m->v);
}

static int depmap_load(const char *dir, struct depmap *m, struct al_error *err)
{
	_cleanup_free_ char *file = xasprintf("%s/modules.dep", dir);
	_cleanup_fclose_ FILE *f = fopen(file, "re");
	if (!f)
		return al_error_setsys(err, errno, "%s", file);
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	while ((n = getline(&line, &cap, f)) > 0) {
		if (line[n - 1] == '\n')
			line[--n] = '\0';
		char *colon = strchr(line, ':');
		if (!colon)
			continue;
		*colon = '\0';
		struct dep_line e = {xstrdup(line), xcalloc(1, sizeof(char *))};
		char *save = NULL;
		for (char *t = strtok_r(colon + 1, " \t", &save); t;
		     t = strtok_r(NULL, " \t", &save))
			al_strv_push(&e.deps, t);
		m->v = xrealloc(m->v, (m->n + 1) * sizeof(*m->v));
		m->v[m->n++] = e;
	}
	free(line);
	return 0;
}

/* A module's name from its path: the file name up to ".ko", with '-' read
 * as '_' (the kernel treats them alike). */
static void module_name(const char *path, char *out, size_t len)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	snprintf(out, len, "%s", base);
	char *ko = strstr(out, ".ko");
	if (ko)
		*ko = '\0';
	for (char *p = out; *p; p++)
		if (*p == '-')
			*p = '_';
}

static const struct dep_line *by_path(const struct depmap *m, const char *path)
{
	for (size_t i = 0; i < m->n; i++)
		if (strcmp(m->v[i].path, path) == 0)
			return &m->v[i];
	return NULL;
}

static const struct dep_line *by_name(const struct depmap *m, const char *name)
{
	char want[256], have[256];
	module_name(name, want, sizeof(want));
	for (size_t i = 0; i < m->n; i++) {
		module_name(m->v[i].path, have, sizeof(have));
		if (strcmp(have, want) == 0)
			return &m->v[i];
	}
	return NULL;
}

/* Whether dir/modules.builtin names the module: built into the kernel,
 * nothing to load. */
static bool builtin(const char *dir, const char *name)
{
	_cleanup_free_ char *file = xasprintf("%s/modules.builtin", dir);
	_cleanup_fclose_ FILE *f = fopen(file, "re");
	if (!f)
		return false;
	char want[256], have[256];
	module_name(name, want, sizeof(want));
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	bool found = false;
	while (!found && (n = getline(&line, &cap, f)) > 0) {
		if (line[n - 1] == '\n')
			line[n - 1] = '\0';
		module_name(line, have, sizeof(have));
		found = strcmp(have, want) == 0;
	}
	free(line);
	return found;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* e, after what it needs (its deps in reverse order of the line, as
 * modprobe loads them, each after its own), unless already in out. */
static int visit(const char *dir, const struct depmap *m, const struct dep_line *e, char ***out,
		 size_t depth, struct al_error *err)
{
	for (size_t i = 0; (*out)[i]; i++)
		if (strcmp((*out)[i], e->path) == 0)
			return 0;
	if (depth > m->n)
		return al_error_set(err, ELOOP, "%s/modules.dep: %s: a dependency loop", dir,
				    e->path);
	if (!ends_with(e->path, ".ko"))
		return al_error_set(err, ENOTSUP,
				    "%s/modules.dep: %s: a compressed module (the guest agent "
				    "loads plain .ko files)",
				    dir, e->path);
	for (size_t i = al_strv_len(e->deps); i-- > 0;) {
		const struct dep_line *d = by_path(m, e->deps[i]);
		if (!d)
			return al_error_set(err, ENOENT,
					    "%s/modules.dep: %s needs %s, which has no line", dir,
					    e->path, e->deps[i]);
		int r = visit(dir, m, d, out, depth + 1, err);
		if (r < 0)
			return r;
	}
	al_strv_push(out, e->path);
	return 0;
}

int al_vm_module_closure(const char *dir, const char *const *names, char ***paths_out,
			 struct al_error *err)
{
	struct depmap m = {0};
	int r = depmap_load(dir, &m, err);
	if (r < 0)
		return r;
	char **out = xcalloc(1, sizeof(*out));
	for (size_t i = 0; names && names[i] && r == 0; i++) {
		const struct dep_line *e = by_name(&m, names[i]);
		if (e)
			r = visit(dir, &m, e, &out, 0, err);
		else if (!builtin(dir, names[i]))
			r = al_error_set(err, ENOENT, "%s/modules.dep: no module %s", dir,
					 names[i]);
	}
	depmap_free(&m);
	if (r < 0) {
		al_strv_free(out);
		return r;
	}
	*paths_out = out;
	return 0;
}
