#include "policy/policy.h"

#include <stdlib.h>
#include <string.h>

#include "core/util.h"

struct al_policy *al_policy_new(const char *source)
{
	struct al_policy *p = xcalloc(1, sizeof(*p));
	p->source = xstrdup(source ? source : "command line");
	p->scratch_exec = AL_UNSET;
	return p;
}

static void mount_clear(struct al_policy_mount *m)
{
	free(m->host);
	free(m->path);
	free(m->origin);
}

void al_policy_free(struct al_policy *p)
{
	if (!p)
		return;
	free(p->source);
	al_strv_free(p->command);
	free(p->hostname);
	al_strv_free(p->system);
	for (size_t i = 0; i < p->n_mounts; i++)
		mount_clear(&p->mounts[i]);
	free(p->mounts);
	free(p->workdir);
	al_strv_free(p->env);
	free(p->network_mode);
	free(p->backend);
	free(p);
}

void al_policy_add_mount(struct al_policy *p, const char *host, const char *path,
			 enum al_mount_mode mode, int exec, const char *origin)
{
	struct al_policy_mount *m;

	p->mounts = xrealloc(p->mounts, (p->n_mounts + 1) * sizeof(*p->mounts));
	m = &p->mounts[p->n_mounts++];
	m->host = xstrdup(host);
	m->path = xstrdup(path);
	m->mode = mode;
	m->exec = exec;
	m->origin = xstrdup(origin);
}

void al_policy_set_env(struct al_policy *p, const char *name, const char *value)
{
	size_t n = strlen(name);
	char *entry = xasprintf("%s=%s", name, value);

	for (size_t i = 0; p->env && p->env[i]; i++) {
		if (strncmp(p->env[i], name, n) == 0 && p->env[i][n] == '=') {
			free(p->env[i]);
			p->env[i] = entry;
			return;
		}
	}
	al_strv_push_take(&p->env, entry);
}

static void replace_str(char **dst, const char *src)
{
	if (!src)
		return;
	free(*dst);
	*dst = xstrdup(src);
}

static void replace_strv(char ***dst, char *const *src)
{
	if (!src)
		return;
	al_strv_free(*dst);
	*dst = al_strv_dup(src);
}

void al_policy_merge(struct al_policy *base, const struct al_policy *over)
{
	replace_strv(&base->command, over->command);
	replace_str(&base->hostname, over->hostname);
	replace_strv(&base->system, over->system);
	replace_str(&base->workdir, over->workdir);
	if (over->scratch_exec != AL_UNSET)
		base->scratch_exec = over->scratch_exec;
	if (over->landlock != AL_LANDLOCK_UNSET)
		base->landlock = over->landlock;
	if (over->timeout_ms)
		base->timeout_ms = over->timeout_ms;
	if (over->scratch_bytes)
		base->scratch_bytes = over->scratch_bytes;
	if (over->memory_bytes)
		base->memory_bytes = over->memory_bytes;
	if (over->pids)
		base->pids = over->pids;
	if (over->cpus_milli)
		base->cpus_milli = over->cpus_milli;
	if (over->cpu_time_ms)
		base->cpu_time_ms = over->cpu_time_ms;
	if (over->output_bytes)
		base->output_bytes = over->output_bytes;
	if (over->open_files)
		base->open_files = over->open_files;
	if (over->file_size)
		base->file_size = over->file_size;
	replace_str(&base->network_mode, over->network_mode);
	replace_str(&base->backend, over->backend);

	for (size_t i = 0; i < over->n_mounts; i++) {
		const struct al_policy_mount *om = &over->mounts[i];
		size_t j;
		for (j = 0; j < base->n_mounts; j++)
			if (strcmp(base->mounts[j].path, om->path) == 0)
				break;
		if (j < base->n_mounts) {
			mount_clear(&base->mounts[j]);
			base->mounts[j].host = xstrdup(om->host);
			base->mounts[j].path = xstrdup(om->path);
			base->mounts[j].mode = om->mode;
			base->mounts[j].exec = om->exec;
			base->mounts[j].origin = xstrdup(om->origin);
		} else {
			al_policy_add_mount(base, om->host, om->path, om->mode, om->exec,
					    om->origin);
		}
	}
	for (size_t i = 0; over->env && over->env[i]; i++) {
		const char *eq = strchr(over->env[i], '=');
		char *name = strndup(over->env[i], (size_t)(eq - over->env[i]));
		al_policy_set_env(base, name, eq + 1);
		free(name);
	}
}
