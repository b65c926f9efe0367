#include "policy/policy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "net/allow.h"
#include "policy/operator.h"

struct al_policy *al_policy_new(const char *source)
{
	struct al_policy *p = xcalloc(1, sizeof(*p));
	p->source = xstrdup(source ? source : "command line");
	p->scratch_exec = AL_UNSET;
	p->tty = AL_UNSET;
	return p;
}

static void mount_clear(struct al_policy_mount *m)
{
	free(m->host);
	free(m->path);
	free(m->origin);
}

static void copies_free(struct al_policy_copy *c, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(c[i].host);
		free(c[i].path);
		free(c[i].origin);
	}
	free(c);
}

void al_policy_add_copy(struct al_policy *p, bool in, const char *host, const char *path,
			const char *origin)
{
	struct al_policy_copy **v = in ? &p->copy_in : &p->copy_out;
	size_t *n = in ? &p->n_copy_in : &p->n_copy_out;

	*v = xrealloc(*v, (*n + 1) * sizeof(**v));
	(*v)[(*n)++] = (struct al_policy_copy){xstrdup(host), xstrdup(path), xstrdup(origin)};
}

void al_policy_free(struct al_policy *p)
{
	if (!p)
		return;
	copies_free(p->copy_in, p->n_copy_in);
	copies_free(p->copy_out, p->n_copy_out);
	free(p->source);
	free(p->profile);
	al_strv_free(p->env_passed);
	al_strv_free(p->command);
	free(p->hostname);
	al_strv_free(p->system);
	for (size_t i = 0; i < p->n_mounts; i++)
		mount_clear(&p->mounts[i]);
	free(p->mounts);
	free(p->workdir);
	al_strv_free(p->env);
	al_strv_free(p->env_hidden);
	free(p->network_mode);
	al_strv_free(p->net_allow);
	al_strv_free(p->net_hosts);
	free(p->net_resolver);
	free(p->backend);
	free(p->language);
	for (size_t i = 0; i < p->n_secret_defs; i++)
		al_secret_def_free(p->secret_defs[i]);
	free(p->secret_defs);
	al_strv_free(p->secret_names);
	al_strv_free(p->secret_name_where);
	for (size_t i = 0; i < p->n_rule_opts; i++)
		al_rule_opts_free(p->rule_opts[i]);
	free(p->rule_opts);
	al_budget_clear(&p->budget);
	al_policy_operator_free(p->op);
	al_policy_root_free(p->root);
	free(p);
}

void al_policy_root_free(struct al_policy_root *r)
{
	if (!r)
		return;
	free(r->host);
	free(r->uid_map);
	free(r->gid_map);
	free(r->groups);
	al_strv_free(r->tmpfs);
	al_strv_free(r->special);
	al_strv_free(r->sysctl);
	free(r->netns);
	free(r->netns_field);
	free(r->seccomp);
	al_strv_free(r->masked);
	free(r->cgroup_path);
	al_strv_free(r->readonly_paths);
	free(r);
}

void al_policy_operator_free(struct al_policy_operator *o)
{
	if (!o)
		return;
	free(o->profile);
	free(o->file);
	free(o->sha256);
	al_strv_free(o->never);
	al_decider_conf_free(o->decider);
	al_strv_free(o->secret_files);
	al_strv_free(o->secret_envs);
	free(o);
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
	m->copy = false;
	m->own = false;
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
	replace_str(&base->profile, over->profile);
	replace_str(&base->hostname, over->hostname);
	if (over->tty != AL_UNSET)
		base->tty = over->tty;
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
	if (over->open_files_soft)
		base->open_files_soft = over->open_files_soft;
	if (over->file_size)
		base->file_size = over->file_size;
	if (over->copy_out_bytes)
		base->copy_out_bytes = over->copy_out_bytes;
	if (over->copy_out_files)
		base->copy_out_files = over->copy_out_files;
	if (over->copy_out_replace)
		base->copy_out_replace = true;
	if (over->inotify_instances)
		base->inotify_instances = over->inotify_instances;
	if (over->inotify_watches)
		base->inotify_watches = over->inotify_watches;
	if (over->host_ids != AL_HOST_IDS_UNSET) {
		base->host_ids = over->host_ids;
		base->host_ids_base = over->host_ids_base;
	}
	for (size_t i = 0; i < over->n_copy_in; i++)
		al_policy_add_copy(base, true, over->copy_in[i].host, over->copy_in[i].path,
				   over->copy_in[i].origin);
	for (size_t i = 0; i < over->n_copy_out; i++)
		al_policy_add_copy(base, false, over->copy_out[i].host, over->copy_out[i].path,
				   over->copy_out[i].origin);
	if (over->kernel_memory != AL_KMEM_UNSET)
		base->kernel_memory = over->kernel_memory;
	replace_str(&base->network_mode, over->network_mode);
	replace_str(&base->net_resolver, over->net_resolver);
	const struct al_net_limits *ol[2] = {&over->net_run, &over->net_host};
	struct al_net_limits *bl[2] = {&base->net_run, &base->net_host};
	for (size_t i = 0; i < 2; i++) {
		if (ol[i]->connections)
			bl[i]->connections = ol[i]->connections;
		if (ol[i]->requests)
			bl[i]->requests = ol[i]->requests;
		if (ol[i]->bytes_out)
			bl[i]->bytes_out = ol[i]->bytes_out;
	}
	/* --allow adds rules to the file's; --map-host replaces a name. */
	for (size_t i = 0; over->net_allow && over->net_allow[i]; i++)
		al_strv_push(&base->net_allow, over->net_allow[i]);
	for (size_t i = 0; over->net_hosts && over->net_hosts[i]; i++) {
		const char *eq = strchr(over->net_hosts[i], '=');
		_cleanup_free_ char *name =
		    strndup(over->net_hosts[i], (size_t)(eq - over->net_hosts[i]));
		al_policy_set_host(base, name, eq + 1);
	}
	replace_str(&base->backend, over->backend);
	replace_str(&base->language, over->language);
	for (size_t i = 0; i < over->n_rule_opts; i++)
		al_policy_add_rule_opts(base, al_rule_opts_dup(over->rule_opts[i]));
	for (size_t i = 0; i < over->n_secret_defs; i++)
		al_policy_add_secret_def(base, al_secret_def_dup(over->secret_defs[i]));
	for (size_t i = 0; over->secret_names && over->secret_names[i]; i++)
		al_policy_add_secret_name(base, over->secret_names[i], over->secret_name_where[i]);
	if (over->budget.set) {
		/* A flag's max keeps the file's prices. */
		struct al_budget b = {0};
		al_budget_copy(&b, &over->budget);
		if (!b.has_prices && base->budget.has_prices) {
			uint64_t max = b.max;
			al_budget_copy(&b, &base->budget);
			b.max = max;
		}
		al_budget_clear(&base->budget);
		base->budget = b;
	}

	for (size_t i = 0; i < over->n_mounts; i++) {
		const struct al_policy_mount *om = &over->mounts[i];
		size_t j;
		/* A flag replaces the file's mount at its path; two flags at one
		 * path are both kept, for the plan to refuse as a duplicate. */
		bool twice = false;
		for (size_t k = 0; k < i; k++)
			twice = twice || strcmp(over->mounts[k].path, om->path) == 0;
		for (j = 0; j < base->n_mounts; j++)
			if (strcmp(base->mounts[j].path, om->path) == 0)
				break;
		if (j < base->n_mounts && !twice) {
			mount_clear(&base->mounts[j]);
			base->mounts[j].host = xstrdup(om->host);
			base->mounts[j].path = xstrdup(om->path);
			base->mounts[j].mode = om->mode;
			base->mounts[j].exec = om->exec;
			base->mounts[j].copy = om->copy;
			base->mounts[j].own = om->own;
			base->mounts[j].origin = xstrdup(om->origin);
		} else {
			al_policy_add_mount(base, om->host, om->path, om->mode, om->exec,
					    om->origin);
			base->mounts[base->n_mounts - 1].copy = om->copy;
			base->mounts[base->n_mounts - 1].own = om->own;
		}
	}
	for (size_t i = 0; over->env && over->env[i]; i++) {
		const char *eq = strchr(over->env[i], '=');
		char *name = strndup(over->env[i], (size_t)(eq - over->env[i]));
		if (al_policy_env_is_hidden(over->env_passed, name))
			al_policy_set_env_passed(base, name, eq + 1);
		else
			al_policy_set_env_hidden(base, name, eq + 1,
						 al_policy_env_is_hidden(over->env_hidden, name));
		free(name);
	}
}

bool al_policy_env_is_hidden(char *const *hidden, const char *name)
{
	for (size_t i = 0; hidden && hidden[i]; i++)
		if (strcmp(hidden[i], name) == 0)
			return true;
	return false;
}

/* Make name a member of *v (once) or not. */
static void strv_set_member(char ***v, const char *name, bool member)
{
	if (member && !al_policy_env_is_hidden(*v, name)) {
		al_strv_push(v, name);
	} else if (!member) {
		for (size_t i = 0; *v && (*v)[i]; i++) {
			if (strcmp((*v)[i], name) == 0) {
				free((*v)[i]);
				do
					(*v)[i] = (*v)[i + 1];
				while ((*v)[++i]);
				break;
			}
		}
	}
}

void al_policy_set_env_hidden(struct al_policy *p, const char *name, const char *value, bool hide)
{
	al_policy_set_env(p, name, value);
	strv_set_member(&p->env_hidden, name, hide);
	strv_set_member(&p->env_passed, name, false);
}

void al_policy_set_env_passed(struct al_policy *p, const char *name, const char *value)
{
	al_policy_set_env_hidden(p, name, value, true);
	strv_set_member(&p->env_passed, name, true);
}

void al_policy_set_host(struct al_policy *p, const char *name, const char *addr)
{
	size_t n = strlen(name);
	char *entry = xasprintf("%s=%s", name, addr);

	for (size_t i = 0; p->net_hosts && p->net_hosts[i]; i++) {
		if (strncmp(p->net_hosts[i], name, n) == 0 && p->net_hosts[i][n] == '=') {
			free(p->net_hosts[i]);
			p->net_hosts[i] = entry;
			return;
		}
	}
	al_strv_push_take(&p->net_hosts, entry);
}

/* The sandbox's loopback is its own: a connection there never reaches the
 * gateway (nothing captures it, and NO_PROXY keeps clients off the proxy),
 * so a rule for loopback space, for localhost or for the unspecified
 * address (which is this host when connected to) can never be what the
 * sandbox uses. What does work is a name mapped to the host's loopback. */
static int check_not_loopback(const char *rule, const struct al_allow_rule *r, struct al_error *err)
{
	enum al_addr_class cls = al_allow_rule_class(r);
	char ports[32], addr[64] = "127.0.0.1";
	struct in6_addr net;
	unsigned prefix;
	const char *what;

	if (cls != AL_ADDR_LOOPBACK && cls != AL_ADDR_UNSPECIFIED)
		return 0;
	if (al_allow_rule_network(r, &net, &prefix)) {
		what = cls == AL_ADDR_LOOPBACK ? "loopback space" : "the unspecified address";
		/* The address to map a name to: the rule's own loopback
		 * address, ::1 for IPv6, else 127.0.0.1 (also for NAT64). */
		if (IN6_IS_ADDR_LOOPBACK(&net) || IN6_IS_ADDR_UNSPECIFIED(&net))
			snprintf(addr, sizeof(addr), "::1");
		else if (cls == AL_ADDR_LOOPBACK && prefix == 128 && al_addr_is_ipv4(&net))
			al_addr_format(&net, addr, sizeof(addr));
	} else {
		bool exact = strncasecmp(rule, "localhost", 9) == 0 && strchr(":.", rule[9]);
		what = exact ? "localhost" : "a name under localhost";
	}
	al_allow_rule_ports(r, ports, sizeof(ports));
	return al_error_set(
	    err, EINVAL,
	    "allow rule \"%s\" is for %s, which inside the sandbox is the sandbox's own "
	    "loopback, not the host's: no connection there reaches the gateway; to reach a "
	    "service on the host's loopback, map a name to it and allow that name: "
	    "--map-host NAME=%s --allow NAME%s (in a policy file: network.hosts and "
	    "network.allow)",
	    rule, what, addr, ports);
}

int al_policy_check_allow_rule(const char *rule, struct al_error *err)
{
	_cleanup_(al_allow_freep) struct al_allowlist *l = al_allow_new();
	int r = al_allow_add(l, rule, err);

	if (r < 0)
		return r;
	return check_not_loopback(rule, al_allow_rule_at(l, 0), err);
}

int al_policy_check_host_map(const char *name, const char *addr, struct al_error *err)
{
	struct al_host h;
	int r;

	if ((r = al_host_parse(name, strlen(name), &h, err)) < 0)
		return r;
	if (h.kind != AL_HOST_NAME)
		return al_error_set(err, EINVAL, "\"%s\" is not a host name", name);
	/* "127.0.0.1:8080" or "[::1]:8080": a port where none belongs. */
	const char *colon = strchr(addr, ':');
	if ((colon && !strchr(colon + 1, ':') && strchr(addr, '.')) ||
	    (addr[0] == '[' && strstr(addr, "]:")))
		return al_error_set(err, EINVAL,
				    "\"%s\": a host map takes an address without a port (the port "
				    "goes in the allow rule)",
				    addr);
	if ((r = al_host_parse(addr, strlen(addr), &h, err)) < 0)
		return r;
	if (h.kind != AL_HOST_IPV4 && h.kind != AL_HOST_IPV6)
		return al_error_set(err, EINVAL, "\"%s\" is not an IPv4 or IPv6 address", addr);
	return 0;
}

int al_policy_check_resolver(const char *s, struct al_error *err)
{
	const char *host = s, *colon;
	size_t len = strlen(s);
	struct al_host h;

	if (s[0] == '[') {
		const char *end = strchr(s, ']');
		if (!end || end[1] != ':' || !end[2])
			return al_error_set(err, EINVAL, "\"%s\": expected [IPv6]:PORT", s);
		host = s + 1;
		len = (size_t)(end - host);
		colon = end[1] ? end + 1 : NULL;
	} else {
		colon = strchr(s, ':');
		if (colon)
			len = (size_t)(colon - s);
	}
	if (al_host_parse(host, len, &h, err) < 0 ||
	    (h.kind != AL_HOST_IPV4 && h.kind != AL_HOST_IPV6))
		return al_error_set(err, EINVAL, "\"%s\": the resolver must be an IP address", s);
	if (colon) {
		/* Digits only: strtoul would also take a sign or spaces, which
		 * the resolver library does not. */
		unsigned long port = 0;
		const char *p = colon + 1;
		for (; *p >= '0' && *p <= '9' && port <= 65535; p++)
			port = port * 10 + (unsigned long)(*p - '0');
		if (p == colon + 1 || *p || port == 0 || port > 65535)
			return al_error_set(err, EINVAL, "\"%s\": bad port", s);
	}
	return 0;
}

void al_policy_add_rule_opts(struct al_policy *p, struct al_rule_opts *o)
{
	p->rule_opts = xrealloc(p->rule_opts, (p->n_rule_opts + 1) * sizeof(*p->rule_opts));
	p->rule_opts[p->n_rule_opts++] = o;
}

void al_policy_add_secret_def(struct al_policy *p, struct al_secret_def *d)
{
	for (size_t i = 0; i < p->n_secret_defs; i++)
		if (strcmp(p->secret_defs[i]->name, d->name) == 0) {
			al_secret_def_free(p->secret_defs[i]);
			p->secret_defs[i] = d;
			return;
		}
	p->secret_defs = xrealloc(p->secret_defs, (p->n_secret_defs + 1) * sizeof(*p->secret_defs));
	p->secret_defs[p->n_secret_defs++] = d;
}

void al_policy_add_secret_name(struct al_policy *p, const char *name, const char *where)
{
	if (!al_policy_env_is_hidden(p->secret_names, name)) { /* a list lookup */
		al_strv_push(&p->secret_names, name);
		al_strv_push(&p->secret_name_where, where);
	}
}

const char *al_policy_secret_name_where(const struct al_policy *p, const char *name)
{
	for (size_t i = 0; p->secret_names && p->secret_names[i]; i++)
		if (strcmp(p->secret_names[i], name) == 0)
			return p->secret_name_where[i];
	return NULL;
}
