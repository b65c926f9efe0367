/* libFuzzer target: the OCI config.json parser (oci/spec.c), which reads
 * a bundle's config.json as an engine (or whoever can write the bundle)
 * wrote it. Beyond what the sanitizers catch, it checks the error list
 * (an error exists exactly when the parse fails, the cap holds, each entry
 * one line made of its parts) and walks what a successful parse returns:
 * every vector NULL-terminated, every count matched by its array. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "oci/spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_list(const struct al_errors *errs, int r)
{
	if ((r < 0) != (al_errors_count(errs) > 0) || errs->n > AL_ERRORS_MAX ||
	    (errs->omitted && errs->n != AL_ERRORS_MAX))
		abort();
	for (size_t i = 0; i < errs->n; i++) {
		const struct al_error_entry *e = &errs->v[i];
		if (!e->text || !e->message || strpbrk(e->text, "\n\r") || e->code <= 0)
			abort();
		if (!strstr(e->text, e->message) || (e->path && !strstr(e->text, e->path)))
			abort();
	}
}

/* Touch every string of a NULL-terminated vector (ASan sees a bad one);
 * returns its length. */
static size_t walk(char **v)
{
	size_t n = 0;

	for (; v && v[n]; n++)
		if (strlen(v[n]) > AL_OCI_MAX_STRING)
			abort();
	return n;
}

static void check_model(const struct al_oci_config *c)
{
	if (!c->oci_version || !c->root_path || strncmp(c->oci_version, "1.", 2) != 0)
		abort();
	if (c->has_process && (!c->args || !c->args[0] || !c->cwd || c->cwd[0] != '/'))
		abort();
	for (size_t i = 0; i < c->n_mounts; i++)
		if (!c->mounts[i].destination || c->mounts[i].destination[0] != '/' ||
		    (walk(c->mounts[i].options), c->mounts[i].n_uid_maps != 0) !=
			(c->mounts[i].n_gid_maps != 0))
			abort();
	for (size_t i = 0; i < c->n_rlimits; i++)
		if (!c->rlimits[i].name || c->rlimits[i].soft > c->rlimits[i].hard)
			abort();
	for (size_t i = 0; i < c->n_namespaces; i++)
		for (size_t k = 0; k < i; k++)
			if (c->namespaces[i].type == c->namespaces[k].type)
				abort();
	if (walk(c->annotations) % 2 || walk(c->sysctl) % 2 || walk(c->unified) % 2)
		abort();
	walk(c->env);
	walk(c->masked_paths);
	walk(c->readonly_paths);
	walk(c->present_unmodelled);
	for (int k = 0; k < AL_OCI_HOOK_KINDS; k++)
		for (size_t i = 0; i < c->n_hooks[k]; i++)
			if (!c->hooks[k][i].path || c->hooks[k][i].path[0] != '/')
				abort();
	for (size_t i = 0; i < c->n_seccomp_syscalls; i++)
		if (walk(c->seccomp_syscalls[i].names) == 0 || !c->seccomp_syscalls[i].action)
			abort();
	for (size_t i = 0; i < c->n_device_rules; i++)
		if (!c->device_rules[i].type || !c->device_rules[i].access)
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct al_oci_config *c = NULL;
	struct al_errors errs = {0};
	int r = al_oci_config_parse((const char *)data, size, &c, &errs);

	check_list(&errs, r);
	al_errors_clear(&errs);
	if (r == 0) {
		check_model(c);
		al_oci_config_free(c);
	} else if (c) {
		abort(); /* a failed parse stores nothing */
	}
	return 0;
}
