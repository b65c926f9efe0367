/* Which of the host's installed Debian packages a system image holds: the
 * named ones and everything they depend on, read from dpkg's status file
 * (Depends and Pre-Depends; of the alternatives "a | b" the first that is
 * installed; a virtual package through an installed package's Provides;
 * what is not installed is skipped). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/microvm/image-internal.h"
#include "core/cleanup.h"
#include "core/util.h"

#define DPKG_STATUS "/var/lib/dpkg/status"

/* dash: the image's /bin/sh (what system(3) and subprocess's shell run). */
const char *const al_vm_default_packages[] = {"python3", "python3-pandas", "coreutils", "bash",
					      "curl",	 "dash",	   "libc-bin",	NULL};

struct pkg {
	char *name, *version, *depends, *provides;
	bool taken;
};

struct status {
	struct pkg *v;
	size_t n;
};

static void status_free(struct status *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->v[i].name);
		free(s->v[i].version);
		free(s->v[i].depends);
		free(s->v[i].provides);
	}
	free(s->v);
}

/* A stanza's fields that matter here; a continuation line (one that starts
 * with a space) belongs to the field before it. */
struct stanza {
	char *name, *version, *depends, *predepends, *provides;
	bool installed;
};

static void stanza_clear(struct stanza *t)
{
	free(t->name);
	free(t->version);
	free(t->depends);
	free(t->predepends);
	free(t->provides);
	memset(t, 0, sizeof(*t));
}

static void stanza_end(struct status *s, struct stanza *t)
{
	if (t->installed && t->name && t->version) {
		s->v = xrealloc(s->v, (s->n + 1) * sizeof(*s->v));
		s->v[s->n++] = (struct pkg){
		    .name = TAKE_PTR(t->name),
		    .version = TAKE_PTR(t->version),
		    .depends = xasprintf("%s, %s", t->depends ? t->depends : "",
					 t->predepends ? t->predepends : ""),
		    .provides = t->provides ? TAKE_PTR(t->provides) : xstrdup(""),
		};
	}
	stanza_clear(t);
}

static void append(char **field, const char *more)
{
	char *s = xasprintf("%s %s", *field, more);
	free(*field);
	*field = s;
}

static int status_load(struct status *s, struct al_error *err)
{
	_cleanup_fclose_ FILE *f = fopen(DPKG_STATUS, "re");
	if (!f)
		return al_error_setsys(err, errno, "%s", DPKG_STATUS);
	struct stanza t = {0};
	char **last = NULL;
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	while ((n = getline(&line, &cap, f)) >= 0) {
		if (n > 0 && line[n - 1] == '\n')
			line[--n] = '\0';
		if (n == 0) {
			stanza_end(s, &t);
			last = NULL;
			continue;
		}
		if (line[0] == ' ' || line[0] == '\t') {
			if (last && *last)
				append(last, line);
			continue;
		}
		char *colon = strchr(line, ':');
		if (!colon)
			continue;
		*colon = '\0';
		const char *val = colon + 1 + strspn(colon + 1, " \t");
		last = NULL;
		if (strcmp(line, "Package") == 0)
			last = &t.name;
		else if (strcmp(line, "Version") == 0)
			last = &t.version;
		else if (strcmp(line, "Depends") == 0)
			last = &t.depends;
		else if (strcmp(line, "Pre-Depends") == 0)
			last = &t.predepends;
		else if (strcmp(line, "Provides") == 0)
			last = &t.provides;
		else if (strcmp(line, "Status") == 0)
			t.installed = strcmp(val, "install ok installed") == 0;
		if (last) {
			free(*last);
			*last = xstrdup(val);
		}
	}
	free(line);
	stanza_end(s, &t);
	return 0;
}

static struct pkg *find(struct status *s, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->v[i].name, name) == 0)
			return &s->v[i];
	return NULL;
}

/* The name of one relation item: "libc6:any (>= 2.34) <!nocheck>" is
 * "libc6". */
static void item_name(const char *item, char *out, size_t len)
{
	item += strspn(item, " \t");
	size_t n = strcspn(item, " \t:(<[");
	snprintf(out, len, "%.*s", (int)n, item);
}

/* An installed package that provides name (a virtual package). */
static struct pkg *provider(struct status *s, const char *name)
{
	for (size_t i = 0; i < s->n; i++) {
		_cleanup_free_ char *list = xstrdup(s->v[i].provides);
		char *save = NULL;
		for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
			char have[256];
			item_name(t, have, sizeof(have));
			if (strcmp(have, name) == 0)
				return &s->v[i];
		}
	}
	return NULL;
}

static struct pkg *resolve(struct status *s, const char *name)
{
	struct pkg *p = find(s, name);
	return p ? p : provider(s, name);
}

/* One relation ("a | b"): the first alternative installed, else the first
 * one provided; NULL when none is. */
static struct pkg *choose(struct status *s, char *rel)
{
	char *save = NULL;
	char name[256];
	_cleanup_free_ char *copy = xstrdup(rel);
	for (char *t = strtok_r(copy, "|", &save); t; t = strtok_r(NULL, "|", &save)) {
		item_name(t, name, sizeof(name));
		struct pkg *p = find(s, name);
		if (p)
			return p;
	}
	save = NULL;
	for (char *t = strtok_r(rel, "|", &save); t; t = strtok_r(NULL, "|", &save)) {
		item_name(t, name, sizeof(name));
		struct pkg *p = provider(s, name);
		if (p)
			return p;
	}
	return NULL;
}

static int cmp_pkg(const void *a, const void *b)
{
	return strcmp((*(struct pkg *const *)a)->name, (*(struct pkg *const *)b)->name);
}

int al_vm_package_closure(const char *const *packages, char ***names_out, char ***versions_out,
			  struct al_error *err)
{
	if (!packages)
		packages = al_vm_default_packages;
	struct status s = {0};
	int r = status_load(&s, err);
	if (r < 0)
		return r;
	/* A work list of packages taken whose dependencies are not yet read. */
	struct pkg **queue = xcalloc(s.n + 1, sizeof(*queue));
	size_t n = 0;
	for (size_t i = 0; packages[i]; i++) {
		struct pkg *p = resolve(&s, packages[i]);
		if (!p) {
			r = al_error_set(err, ENOENT, "package %s is not installed (%s)",
					 packages[i], DPKG_STATUS);
			break;
		}
		if (!p->taken) {
			p->taken = true;
			queue[n++] = p;
		}
	}
	for (size_t i = 0; i < n && r == 0; i++) {
		_cleanup_free_ char *deps = xstrdup(queue[i]->depends);
		char *save = NULL;
		for (char *rel = strtok_r(deps, ",", &save); rel;
		     rel = strtok_r(NULL, ",", &save)) {
			if (!*(rel + strspn(rel, " \t")))
				continue;
			struct pkg *p = choose(&s, rel);
			if (p && !p->taken) {
				p->taken = true;
				queue[n++] = p;
			}
		}
	}
	if (r == 0) {
		/* Sorted by name: the image's hash must not depend on the order
		 * the packages were named or found in. */
		qsort(queue, n, sizeof(*queue), cmp_pkg);
		char **names = xcalloc(n + 1, sizeof(*names));
		char **versions = xcalloc(n + 1, sizeof(*versions));
		for (size_t i = 0; i < n; i++) {
			names[i] = xstrdup(queue[i]->name);
			versions[i] = xstrdup(queue[i]->version);
		}
		*names_out = names;
		*versions_out = versions;
	}
	free(queue);
	status_free(&s);
	return r;
}
