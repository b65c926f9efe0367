/* The policy engine's request checks (engine.h): the profile, limits,
 * backend, protections, environment and egress. The host paths are
 * engine-paths.c's, the decider's answer and the output engine-out.c's. */
#include "policy/engine.h"

#include <errno.h>
#include <fnmatch.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "policy/engine-internal.h"

/* "--memory" when the flags set it, else "FILE: limits.memory". */
static char *limit_ref(const struct al_policy *task, const struct al_policy *flags,
		       const struct al_limit_def *d)
{
	if (flags && d->flag && *al_limit_field((struct al_policy *)flags, d))
		return xstrdup(d->flag);
	return xasprintf("%s: %s.%s", task->source, d->section, d->key);
}

static void check_limits(struct al_decision *d, struct al_policy *task,
			 const struct al_policy *flags)
{
	const struct al_op_profile *pr = d->profile;

	for (size_t i = 0; i < AL_OPL_COUNT; i++) {
		const struct al_limit_def *ld = &al_limit_defs[i];
		const struct al_op_bound *b = &pr->limits[i];
		uint64_t *v = al_limit_field(task, ld), builtin = ld->builtin;
		char what[64], val[48], mx[48], bpath[192];
		bool net = strncmp(ld->section, "network", 7) == 0;

		snprintf(what, sizeof(what), "%s.%s", ld->section, ld->key);
		if (i == AL_OPL_COPY_OUT_SIZE)
			builtin =
			    task->scratch_bytes ? task->scratch_bytes : AL_DEFAULT_SCRATCH_BYTES;
		if (b->max)
			al_limit_format(ld, b->max, mx, sizeof(mx));
		if (*v) {
			_cleanup_free_ char *ref = limit_ref(task, flags, ld);
			al_limit_format(ld, *v, val, sizeof(val));
			if (b->max && *v > b->max) {
				snprintf(bpath, sizeof(bpath), "%s.%s.max", pr->where, what);
				engine_refuse(d, ref, val, mx, xstrdup(bpath),
					      "%s %s is over the ceiling %s", ref, val, mx);
				continue;
			}
			if (!net || d->gateway)
				engine_explain(
				    d, what, val, AL_FROM_TASK, ref,
				    b->max ? engine_bound(d, "%s.%s.max", pr->where, what) : NULL);
			continue;
		}
		if (b->def) {
			*v = b->def;
			al_limit_format(ld, *v, val, sizeof(val));
			if (!net || d->gateway)
				engine_explain(d, what, val, AL_FROM_DEFAULT, NULL,
					       engine_bound(d, "%s.%s.default", pr->where, what));
		} else if (b->max && (!builtin || builtin > b->max)) {
			*v = b->max;
			if (!net || d->gateway)
				engine_explain(d, what, mx, AL_FROM_CEILING, NULL,
					       engine_bound(d, "%s.%s.max", pr->where, what));
		} else {
			/* Within the ceiling: airlock's own default, made explicit
			 * so that a bounded limit is enforced or the run refused
			 * (a cgroup is then required), and the decider lowers it
			 * from what is in force. */
			if (b->max)
				*v = builtin;
			if (net && !d->gateway)
				continue;
			if (builtin)
				al_limit_format(ld, builtin, val, sizeof(val));
			engine_explain(d, what, builtin ? val : "none", AL_FROM_BUILTIN, NULL,
				       b->max ? engine_bound(d, "%s.%s.max", pr->where, what)
					      : NULL);
		}
	}
}

static void check_backend(struct al_decision *d, struct al_policy *task,
			  const struct al_policy *flags)
{
	const struct al_op_profile *pr = d->profile;
	const char *name = task->backend;
	_cleanup_free_ char *ref = NULL;
	bool listed = !pr->backends;

	if (flags && flags->backend)
		ref = xstrdup("--backend");
	else if (name)
		ref = xasprintf("%s: backend.name", task->source);
	if (!name) {
		name = pr->backend_default ? pr->backend_default : "native";
		free(task->backend);
		task->backend = xstrdup(name);
	}
	for (size_t i = 0; pr->backends && pr->backends[i]; i++)
		listed |= strcmp(pr->backends[i], name) == 0;
	if (!listed) {
		_cleanup_free_ char *list = al_strv_join(pr->backends, ", ");
		engine_refuse(d, ref ? ref : "backend (default)", name, list,
			      engine_path(pr, "backend.allowed"),
			      "%s%s: backend \"%s\" is not one the operator allows (%s)",
			      ref ? ref : "the default backend", "", name, list);
		return;
	}
	/* Python under wasm reaches node's whole API through Pyodide's bridge:
	 * only the native layer around it holds, so it ranks as native. */
	bool as_native = strcmp(name, "wasm") == 0 && task->language;
	int strength = al_backend_strength(as_native ? "native" : name);

	if (pr->backend_min && strength < al_backend_strength(pr->backend_min)) {
		engine_refuse(d, ref ? ref : "backend (default)", name, pr->backend_min,
			      engine_path(pr, "backend.minimum"),
			      "%s: backend \"%s\"%s is weaker than the operator's minimum \"%s\"",
			      ref ? ref : "the default backend", name,
			      as_native ? " with --language (node's whole API: native's isolation)"
					: "",
			      pr->backend_min);
		return;
	}
	/* Left out: the profile's own default when it has one, else
	 * airlock's (the profile is not named as the origin of a value it
	 * does not set). */
	engine_explain(
	    d, "backend", name,
	    ref			  ? AL_FROM_TASK
	    : pr->backend_default ? AL_FROM_DEFAULT
				  : AL_FROM_BUILTIN,
	    ref,
	    pr->backend_default && !ref ? engine_bound(d, "%s.backend.default", pr->where) : NULL);
}

/* identity.host_ids: the profile's, and a task may pin only that range
 * (a range of its own choosing would choose which host user its
 * processes are). */
static void check_identity(struct al_decision *d, struct al_policy *task)
{
	const struct al_op_profile *pr = d->profile;
	char asked[32], bound[32];

	if (task->host_ids == AL_HOST_IDS_FIXED &&
	    (pr->host_ids != AL_HOST_IDS_FIXED || pr->host_ids_base != task->host_ids_base)) {
		snprintf(asked, sizeof(asked), "%u", task->host_ids_base);
		if (pr->host_ids == AL_HOST_IDS_FIXED)
			snprintf(bound, sizeof(bound), "%u", pr->host_ids_base);
		else
			snprintf(bound, sizeof(bound), "per-run");
		_cleanup_free_ char *ref = xasprintf("%s: identity.host_ids", task->source);
		engine_refuse(d, ref, asked, bound, engine_path(pr, "identity.host_ids"),
			      "%s: a fixed range of host ids (%u) is the operator's to pin; this "
			      "profile's is %s",
			      ref, task->host_ids_base, bound);
		return;
	}
	if (pr->host_ids != AL_HOST_IDS_UNSET) {
		task->host_ids = (enum al_host_ids_mode)pr->host_ids;
		task->host_ids_base = pr->host_ids_base;
	}
}

static void check_best_effort(struct al_decision *d, const struct al_policy *task)
{
	const struct al_op_profile *pr = d->profile;

	if (task->landlock == AL_LANDLOCK_BEST_EFFORT &&
	    !(pr->best_effort & AL_OP_WEAKEN_LANDLOCK)) {
		_cleanup_free_ char *ref = xasprintf("%s: filesystem.landlock", task->source);
		engine_refuse(d, ref, "best-effort", "required", engine_path(pr, "best_effort"),
			      "%s: \"best-effort\" weakens the file-access layer, which the "
			      "operator does not allow (add \"landlock\" to best_effort)",
			      ref);
	}
	if (task->kernel_memory == AL_KMEM_BEST_EFFORT &&
	    !(pr->best_effort & AL_OP_WEAKEN_KERNEL_MEMORY)) {
		_cleanup_free_ char *ref = xasprintf("%s: limits.kernel_memory", task->source);
		engine_refuse(d, ref, "best-effort", "enforced", engine_path(pr, "best_effort"),
			      "%s: \"best-effort\" lets socket buffers escape the memory limit, "
			      "which the operator does not allow (add \"kernel_memory\" to "
			      "best_effort)",
			      ref);
	}
}

/* The first pattern of v that name matches, or -1. */
static ssize_t env_match(char *const *v, const char *name)
{
	for (size_t i = 0; v && v[i]; i++)
		if (fnmatch(v[i], name, 0) == 0)
			return (ssize_t)i;
	return -1;
}

static void check_env(struct al_decision *d, const struct al_policy *task,
		      const struct al_policy *flags)
{
	const struct al_op_profile *pr = d->profile;

	for (size_t i = 0; task->env && task->env[i]; i++) {
		const char *eq = strchr(task->env[i], '=');
		_cleanup_free_ char *name = strndup(task->env[i], (size_t)(eq - task->env[i]));
		_cleanup_free_ char *ref = NULL, *what = xasprintf("env.%s", name);
		bool passed = al_policy_env_is_hidden(task->env_passed, name);
		bool by_flag = false;
		ssize_t k;

		for (size_t j = 0; flags && flags->env && flags->env[j]; j++)
			by_flag |= strncmp(flags->env[j], name, strlen(name)) == 0 &&
				   flags->env[j][strlen(name)] == '=';
		ref = by_flag ? xasprintf("--env %s", name)
			      : xasprintf("%s: env.%s", task->source, name);
		if ((k = env_match(pr->env_never, name)) >= 0) {
			_cleanup_free_ char *p =
			    (size_t)k < pr->n_env_never_default
				? xasprintf("env.never (airlock's default list: %s)",
					    pr->env_never[k])
				: xasprintf("env.never[%zu]", (size_t)k - pr->n_env_never_default);
			engine_refuse(d, ref, name, pr->env_never[k], engine_path(pr, p),
				      "%s: the operator never lets a task set %s (pattern \"%s\")",
				      ref, name, pr->env_never[k]);
			continue;
		}
		if ((k = env_match(pr->env_allow, name)) < 0) {
			_cleanup_free_ char *list = al_strv_join(pr->env_allow, " ");
			engine_refuse(d, ref, name, list, engine_path(pr, "env.allow"),
				      "%s: %s matches none of the names the operator allows "
				      "(%s)",
				      ref, name, list[0] ? list : "none");
			continue;
		}
		if (passed && (k = env_match(pr->env_pass, name)) < 0) {
			engine_refuse(d, ref, name, "env.pass", engine_path(pr, "env.pass"),
				      "%s: passes airlock's own value of %s, which the operator "
				      "does not allow (env.pass)",
				      ref, name);
			continue;
		}
		engine_explain(
		    d, what, passed ? "(airlock's own value)" : "(set)", AL_FROM_TASK, ref,
		    engine_bound(d, "%s.env.%s[%zd] \"%s\"", pr->where, passed ? "pass" : "allow",
				 k, passed ? pr->env_pass[k] : pr->env_allow[k]));
	}
}

int al_engine_exec_env(const struct al_decision *d, char *const *env, struct al_errors *reasons)
{
	const struct al_op_profile *pr = d->profile;
	int r = 0;

	for (size_t i = 0; pr && env && env[i]; i++) {
		const char *eq = strchr(env[i], '=');
		_cleanup_free_ char *name =
		    eq ? strndup(env[i], (size_t)(eq - env[i])) : xstrdup(env[i]);
		ssize_t k;

		if ((k = env_match(pr->env_never, name)) >= 0) {
			r = al_errors_add(reasons, EPERM, NULL, NULL,
					  "exec: env.%s: the operator never lets a task set %s "
					  "(pattern \"%s\" of %s.env.never)",
					  name, name, pr->env_never[k], pr->where);
		} else if (env_match(pr->env_allow, name) < 0) {
			_cleanup_free_ char *list = al_strv_join(pr->env_allow, " ");
			r = al_errors_add(reasons, EPERM, NULL, NULL,
					  "exec: env.%s: %s matches none of the names the operator "
					  "allows (%s.env.allow: %s)",
					  name, name, pr->where, list[0] ? list : "none");
		}
	}
	return r < 0 ? -EPERM : 0;
}

/* network.allow[i] of the task: "--allow R" when the flags added it, else
 * its place in the file (the file's rules come first). */
static char *rule_ref(const struct al_policy *task, const struct al_policy *flags, size_t i)
{
	size_t n_all = al_strv_len(task->net_allow),
	       n_flags = flags ? al_strv_len(flags->net_allow) : 0;

	if (i >= n_all - n_flags)
		return xasprintf("--allow %s", task->net_allow[i]);
	return xasprintf("%s: network.allow[%zu]", task->source, i);
}

static void check_rules(struct al_decision *d, struct al_policy *task,
			const struct al_policy *flags)
{
	const struct al_op_profile *pr = d->profile;

	for (size_t i = 0; task->net_allow && task->net_allow[i]; i++) {
		_cleanup_(al_allow_freep) struct al_allowlist *one = al_allow_new();
		_cleanup_free_ char *ref = rule_ref(task, flags, i);
		const struct al_allow_rule *r, *by, *never;

		if (al_allow_add(one, task->net_allow[i], NULL) < 0)
			continue; /* the plan says what is wrong with it */
		r = al_allow_rule_at(one, 0);
		if ((never = al_allow_find_never(pr->never_net, r))) {
			engine_refuse(d, ref, task->net_allow[i], al_allow_rule_text(never),
				      engine_path(pr, "network.never"),
				      "%s: %s lies within %s, which the operator never allows", ref,
				      task->net_allow[i], al_allow_rule_text(never));
			continue;
		}
		if (!(by = al_allow_find_within(pr->allow, r))) {
			_cleanup_free_ char *list = engine_rules_text(pr->allow);
			engine_refuse(d, ref, task->net_allow[i], list,
				      engine_path(pr, "network.allow"),
				      "%s: %s is not within a rule the operator allows (%s)", ref,
				      task->net_allow[i], list[0] ? list : "none");
			continue;
		}
		_cleanup_free_ char *what = xasprintf("network.allow %s", task->net_allow[i]);
		engine_explain(
		    d, what, task->net_allow[i], AL_FROM_TASK, ref,
		    engine_bound(d, "%s.network.allow (%s)", pr->where, al_allow_rule_text(by)));
	}
}

static void check_hosts(struct al_decision *d, const struct al_policy *task,
			const struct al_policy *flags)
{
	const struct al_op_profile *pr = d->profile;

	for (size_t i = 0; task->net_hosts && task->net_hosts[i]; i++) {
		const char *entry = task->net_hosts[i], *eq = strchr(entry, '=');
		_cleanup_free_ char *name = strndup(entry, (size_t)(eq - entry)), *ref = NULL;
		const struct al_allow_rule *by = NULL, *never = NULL;
		struct al_host addr;
		bool by_flag = false;

		for (size_t j = 0; flags && flags->net_hosts && flags->net_hosts[j]; j++)
			by_flag |= strcmp(flags->net_hosts[j], entry) == 0;
		ref = by_flag ? xasprintf("--map-host %s", entry)
			      : xasprintf("%s: network.hosts.%s", task->source, name);
		if (al_host_parse(eq + 1, strlen(eq + 1), &addr, NULL) < 0 ||
		    addr.kind == AL_HOST_NAME)
			continue; /* the plan says what is wrong with it */
		if (al_allow_match_never(pr->never_net, &addr.addr, 0, &never)) {
			engine_refuse(d, ref, eq + 1, al_allow_rule_text(never),
				      engine_path(pr, "network.never"),
				      "%s: %s lies within %s, which the operator never allows", ref,
				      eq + 1, al_allow_rule_text(never));
			continue;
		}
		if (!al_allow_match_addr_any_port(pr->hosts_to, &addr.addr, &by)) {
			_cleanup_free_ char *list = engine_rules_text(pr->hosts_to);
			engine_refuse(d, ref, eq + 1, list, engine_path(pr, "network.hosts"),
				      "%s: the operator does not let a task map a name to %s "
				      "(network.hosts allows: %s)",
				      ref, eq + 1, list[0] ? list : "none");
			continue;
		}
		_cleanup_free_ char *what = xasprintf("network.hosts.%s", name);
		engine_explain(
		    d, what, eq + 1, AL_FROM_TASK, ref,
		    engine_bound(d, "%s.network.hosts (%s)", pr->where, al_allow_rule_text(by)));
	}
	if (task->net_resolver) {
		_cleanup_free_ char *ref = flags && flags->net_resolver
					       ? xstrdup("--resolver")
					       : xasprintf("%s: network.resolver", task->source);
		bool ok = false;
		for (size_t i = 0; pr->resolvers && pr->resolvers[i]; i++)
			ok |= strcmp(pr->resolvers[i], task->net_resolver) == 0;
		if (!ok) {
			_cleanup_free_ char *list = al_strv_join(pr->resolvers, ", ");
			engine_refuse(d, ref, task->net_resolver, list,
				      engine_path(pr, "network.resolvers"),
				      "%s %s: not a resolver the operator allows (%s)", ref,
				      task->net_resolver, list[0] ? list : "none");
		} else {
			engine_explain(d, "network.resolver", task->net_resolver, AL_FROM_TASK, ref,
				       engine_bound(d, "%s.network.resolvers", pr->where));
		}
	}
}

/* The rules every run gets, unless the task said it wants no network. */
static void add_always(struct al_decision *d, struct al_policy *task)
{
	const struct al_op_profile *pr = d->profile;
	bool none = task->network_mode && strcmp(task->network_mode, "none") == 0;

	for (size_t i = 0; pr->always_text && pr->always_text[i]; i++) {
		_cleanup_free_ char *what = xasprintf("network.allow %s", pr->always_text[i]);
		if (none) {
			engine_explain(d, what, "(not added: the task asked for network \"none\")",
				       AL_FROM_FORCED, NULL,
				       engine_bound(d, "%s.network.always[%zu]", pr->where, i));
			continue;
		}
		bool have = false;
		for (size_t j = 0; task->net_allow && task->net_allow[j]; j++)
			have |= strcmp(task->net_allow[j], pr->always_text[i]) == 0;
		if (!have)
			al_strv_push(&task->net_allow, pr->always_text[i]);
		engine_explain(d, what, pr->always_text[i], AL_FROM_FORCED, NULL,
			       engine_bound(d, "%s.network.always[%zu]", pr->where, i));
	}
}

/* What the plan carries of the operator policy (plan.c build_operator). */
static void set_operator(struct al_decision *d, struct al_policy *task)
{
	const struct al_op_profile *pr = d->profile;
	struct al_policy_operator *o = xcalloc(1, sizeof(*o));

	o->profile = xstrdup(pr->name);
	o->file = xstrdup(d->op->file);
	o->sha256 = xstrdup(d->op->sha256);
	o->never = al_strv_dup(pr->never_text);
	o->decider = al_decider_conf_dup(d->op->decider);
	for (size_t i = 0; i < d->op->n_secrets; i++) {
		const struct al_secret_def *s = d->op->secrets[i];
		if (s->src.kind == AL_SOURCE_FILE)
			al_strv_push(&o->secret_files, s->src.file);
		if (s->key_file)
			al_strv_push(&o->secret_files, s->key_file);
		if (s->src.kind == AL_SOURCE_ENV)
			al_strv_push(&o->secret_envs, s->src.env);
	}
	for (size_t i = 0; d->gateway && pr->never_text && pr->never_text[i]; i++) {
		_cleanup_free_ char *what = xasprintf("network.never %s", pr->never_text[i]);
		/* The first n_never_net_default are airlock's own list, in
		 * force under every profile: not the profile's to be named. */
		bool builtin = i < pr->n_never_net_default;
		engine_explain(d, what, pr->never_text[i],
			       builtin ? AL_FROM_BUILTIN : AL_FROM_OPERATOR, NULL,
			       builtin ? NULL
				       : engine_bound(d, "%s.network.never[%zu]", pr->where,
						      i - pr->n_never_net_default));
	}
	al_policy_operator_free(task->op);
	task->op = o;
}

int al_engine_request(const struct al_operator *op, struct al_policy *task,
		      const struct al_policy *flags, struct al_decision *d)
{
	const char *name = task->profile ? task->profile : AL_OPERATOR_PROFILE;

	*d = (struct al_decision){.op = op};
	d->profile_name = xstrdup(name);
	d->profile = al_operator_profile(op, name);
	if (!d->profile) {
		_cleanup_free_ char *list = NULL;
		char **names = NULL;
		_cleanup_free_ char *ref = flags && flags->profile
					       ? xstrdup("--profile")
					       : xasprintf("%s: profile", task->source);
		for (size_t i = 0; i < op->n_profiles; i++)
			al_strv_push(&names, op->profiles[i].name);
		list = al_strv_join(names, ", ");
		al_strv_free(names);
		engine_refuse(
		    d, task->profile ? ref : "(no profile named)", name, list, xstrdup("profiles"),
		    task->profile ? "%s %s: the operator policy has no such profile "
				    "(it has: %s)"
				  : "%s%s: the operator policy has no \"default\" profile, "
				    "so a task must name one (--profile: %s)",
		    task->profile ? ref : "", task->profile ? name : "", list);
		return -EPERM;
	}
	engine_explain(d, "profile", name, task->profile ? AL_FROM_TASK : AL_FROM_UNNAMED,
		       task->profile ? (flags && flags->profile ? "--profile" : "profile") : NULL,
		       engine_bound(d, "%s", d->profile->where));
	bool none = task->network_mode && strcmp(task->network_mode, "none") == 0;
	d->gateway = task->net_allow ||
		     (task->network_mode && strcmp(task->network_mode, "gateway") == 0) ||
		     (!none && d->profile->always_text && d->profile->always_text[0]);
	check_backend(d, task, flags);
	check_identity(d, task);
	check_best_effort(d, task);
	check_env(d, task, flags);
	check_rules(d, task, flags);
	check_hosts(d, task, flags);
	add_always(d, task);
	check_limits(d, task, flags);
	engine_check_cred(d, task, flags);
	set_operator(d, task);
	return d->n_refused || d->omitted ? -EPERM : 0;
}
