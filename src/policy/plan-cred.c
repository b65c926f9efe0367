/* The plan's credentials: each secret and token the run presents, with
 * the placeholder the sandbox holds instead of it, checked against the
 * run's allow rules; the options of allow rules; the budget; and the
 * command's environment they add to. The values are not read here
 * (cred/source.c does that when the run starts). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "policy/plan-internal.h"

#define SECRETS_DIR "/etc/airlock/secrets"

static int random_chars(char *out, size_t n, const char *alphabet)
{
	unsigned char r[64];
	size_t k = strlen(alphabet);

	if (n > sizeof(r) || getrandom(r, n, 0) != (ssize_t)n)
		return -EIO;
	for (size_t i = 0; i < n; i++)
		out[i] = alphabet[r[i] % k]; /* k divides 256 for every alphabet here */
	out[n] = '\0';
	return 0;
}

static int make_placeholder(char *out)
{
	memcpy(out, "airlock-ph-", 11);
	return random_chars(out + 11, 32, "0123456789abcdef");
}

/* A key id and secret that look like AWS's (some SDKs check the shape). */
static int make_fake_aws(struct al_plan_secret *s)
{
	memcpy(s->fake_key_id, "AKIA", 4);
	if (random_chars(s->fake_key_id + 4, 16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") < 0)
		return -EIO;
	return random_chars(s->fake_secret, 40,
			    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/");
}

bool al_plan_env_has(char *const *envp, const char *name)
{
	size_t n = strlen(name);
	for (size_t i = 0; envp && envp[i]; i++)
		if (strncmp(envp[i], name, n) == 0 && envp[i][n] == '=')
			return true;
	return false;
}

static void set_env(struct al_plan *p, const struct al_secret_def *d, const char *name,
		    const char *value, struct al_errors *errs)
{
	if (al_plan_env_has(p->envp, name)) {
		al_errors_add(errs, EINVAL, d->where, NULL,
			      "the sandbox's variable %s would hold its placeholder, but the task "
			      "sets %s itself",
			      name, name);
		return;
	}
	al_strv_push_take(&p->envp, xasprintf("%s=%s", name, value));
}

/* The JSON path of a secret's i-th host; a definition from --secret
 * id=NAME,... calls it by the flag's key. */
static const char *host_path(const struct al_secret_def *d, size_t i, char *buf, size_t len)
{
	if (d->where && strncmp(d->where, "--secret ", 9) == 0)
		return "host";
	snprintf(buf, len, "hosts[%zu]", i);
	return buf;
}

/* Every host a secret goes to must be one the run may reach. */
static void check_scope(struct al_plan *p, struct al_plan_secret *s, struct al_errors *errs)
{
	struct al_error err = {0};
	char path[32];

	s->scope = al_allow_new();
	for (size_t i = 0; s->def->hosts && s->def->hosts[i]; i++) {
		const char *h = s->def->hosts[i];
		_cleanup_(al_allow_freep) struct al_allowlist *one = al_allow_new();
		if (al_allow_add(s->scope, h, &err) < 0 || al_allow_add(one, h, &err) < 0) {
			al_errors_add(errs, EINVAL, s->def->where,
				      host_path(s->def, i, path, sizeof(path)), "%s", err.msg);
			continue;
		}
		/* Reachable when it lies within a rule of the run's or holds one
		 * (an operator's secret for a port range, a task allowing one
		 * port of it): the gateway injects only on connections the run
		 * allows anyway. */
		const struct al_allow_rule *r = al_allow_rule_at(one, 0);
		bool reach = p->allow && al_allow_find_within(p->allow, r);
		for (size_t k = 0; !reach && p->allow && k < al_allow_count(p->allow); k++)
			reach = al_allow_rule_within(al_allow_rule_at(p->allow, k), r);
		if (!reach)
			al_errors_add(errs, EINVAL, s->def->where,
				      host_path(s->def, i, path, sizeof(path)),
				      "%s is not allowed by the run's network rules (allow it: "
				      "--allow %s, or in network.allow)",
				      h, h);
	}
}

static void build_one(struct al_plan *p, const struct al_secret_def *def, struct al_errors *errs)
{
	struct al_plan_secret *s;

	for (size_t i = 0; i < p->n_secrets; i++)
		if (strcmp(p->secrets[i].def->name, def->name) == 0) {
			al_errors_add(errs, EINVAL, def->where, NULL,
				      "the name %s is both a secret and a token", def->name);
			return;
		}
	p->secrets = xrealloc(p->secrets, (p->n_secrets + 1) * sizeof(*p->secrets));
	s = &p->secrets[p->n_secrets++];
	*s = (struct al_plan_secret){.def = al_secret_def_dup(def)};
	if (make_placeholder(s->placeholder) < 0 ||
	    (def->how == AL_HOW_SIGV4 && make_fake_aws(s) < 0)) {
		al_errors_add(errs, EIO, def->where, NULL, "no random bytes for its placeholder");
		return;
	}
	if (!p->gateway) {
		al_errors_add(
		    errs, EINVAL, def->where, NULL,
		    "a %s is sent by the gateway, and this run has none (allow its hosts: "
		    "--allow %s, or in network.allow)",
		    def->token ? "token" : "secret", def->hosts ? def->hosts[0] : "HOST");
		return;
	}
	check_scope(p, s, errs);
	if (def->token && !p->timeout_ms)
		al_errors_add(errs, EINVAL, def->where, NULL,
			      "a token expires at the run's deadline, and this run has none: set "
			      "limits.timeout");
	if (def->how == AL_HOW_SIGV4) {
		if (def->file)
			al_errors_add(errs, EINVAL, def->where, NULL,
				      "an AWS key is given in the environment only, not as a file");
		set_env(p, def, "AWS_ACCESS_KEY_ID", s->fake_key_id, errs);
		set_env(p, def, "AWS_SECRET_ACCESS_KEY", s->fake_secret, errs);
		al_strv_push(&p->env_hidden, "AWS_ACCESS_KEY_ID");
		al_strv_push(&p->env_hidden, "AWS_SECRET_ACCESS_KEY");
		if (al_plan_env_has(p->envp, "AWS_SESSION_TOKEN"))
			al_errors_add(
			    errs, EINVAL, def->where, NULL,
			    "the sandbox's AWS_SESSION_TOKEN would hold a placeholder, but "
			    "the task sets it itself");
		return;
	}
	set_env(p, def, def->env, s->placeholder, errs);
	al_strv_push(&p->env_hidden, def->env);
}

/* path and other name the same file, or one lies inside the other. */
static bool overlaps(const char *a, const char *b)
{
	return al_path_is_under(a, b) || al_path_is_under(b, a);
}

/* No mount or copy-in may show where a secret comes from, and no --env
 * may pass the variable it is read from: the sandbox would hold the value
 * itself. Under an operator policy, every one of the operator's counts,
 * granted or not. */
void al_plan_check_cred_sources(struct al_plan *p, const struct al_policy *pol,
				struct al_errors *errs)
{
	char **files = NULL, **envs = NULL;

	if (pol->op) {
		files =
		    al_strv_dup(pol->op->secret_files ? pol->op->secret_files : (char *[]){NULL});
		envs = al_strv_dup(pol->op->secret_envs ? pol->op->secret_envs : (char *[]){NULL});
	}
	for (size_t i = 0; i < pol->n_secret_defs; i++) {
		const struct al_secret_def *d = pol->secret_defs[i];
		if (d->src.kind == AL_SOURCE_FILE)
			al_strv_push(&files, d->src.file);
		if (d->key_file)
			al_strv_push(&files, d->key_file);
		if (d->src.kind == AL_SOURCE_ENV)
			al_strv_push(&envs, d->src.env);
	}
	for (size_t i = 0; files && files[i]; i++) {
		char real[PATH_MAX];
		const char *f = realpath(files[i], real) ? real : files[i];
		for (size_t k = 0; k < p->n_fs; k++) {
			const struct al_fs_entry *e = &p->fs[k];
			if (e->kind == AL_FS_HOST && e->source && overlaps(e->source, f))
				al_errors_add(errs, EPERM, NULL, NULL,
					      "%s: it shows %s, where a secret or token is read "
					      "from",
					      e->what, files[i]);
		}
		for (size_t k = 0; k < p->n_copy_in; k++)
			if (overlaps(p->copy_in[k].host, f))
				al_errors_add(errs, EPERM, NULL, NULL,
					      "%s: it copies %s, where a secret or token is read "
					      "from",
					      p->copy_in[k].origin, files[i]);
	}
	for (size_t i = 0; envs && envs[i]; i++)
		if (al_policy_env_is_hidden(pol->env_passed, envs[i]))
			al_errors_add(errs, EPERM, NULL, NULL,
				      "--env %s: a secret is read from it, so it cannot be passed "
				      "to the sandbox",
				      envs[i]);
	al_strv_free(files);
	al_strv_free(envs);
}

void al_plan_build_cred(struct al_plan *p, const struct al_policy *pol, struct al_errors *errs)
{
	/* Without an operator policy a name is the task's own definition (in
	 * its file or a --secret id=NAME,...), or nothing. */
	for (size_t i = 0; pol->secret_names && pol->secret_names[i]; i++) {
		const char *name = pol->secret_names[i];
		bool defined = false;
		for (size_t k = 0; k < pol->n_secret_defs; k++)
			defined |= strcmp(pol->secret_defs[k]->name, name) == 0;
		if (!defined)
			al_errors_add(errs, EINVAL, pol->secret_name_where[i], NULL,
				      "no secret or token named %s is defined (no operator policy "
				      "is in force, so the task defines its own: --secret "
				      "id=%s,env=VAR,host=HOST:PORT,header='Authorization: Bearer "
				      "{}', or the policy file's \"secrets\" or \"tokens\")",
				      name, name);
	}
	/* Each has up to four strings the gateway looks for (placeholder,
	 * fake key id and secret, fake session token), and it looks for 64. */
	if (pol->n_secret_defs > AL_PLAN_SECRETS_MAX)
		al_errors_add(errs, E2BIG, NULL, NULL,
			      "%zu secrets and tokens: a run has at most %d", pol->n_secret_defs,
			      AL_PLAN_SECRETS_MAX);
	for (size_t i = 0; i < pol->n_secret_defs && i < AL_PLAN_SECRETS_MAX; i++)
		build_one(p, pol->secret_defs[i], errs);
	for (size_t i = 0; i < pol->n_rule_opts; i++) {
		const struct al_rule_opts *o = pol->rule_opts[i];
		p->rule_opts = xrealloc(p->rule_opts, (p->n_rule_opts + 1) * sizeof(*p->rule_opts));
		p->rule_opts[p->n_rule_opts++] = al_rule_opts_dup(o);
		p->intercept |= o->intercept;
	}
	al_budget_copy(&p->budget, &pol->budget);
	if (p->budget.set && !p->budget.cpu_second && !p->budget.memory_gb_second &&
	    !p->budget.egress_mb && !p->budget.n_requests)
		al_errors_add(errs, EINVAL, NULL, NULL,
			      "limits.budget: no prices, so nothing would be charged against it "
			      "(set limits.budget.prices)");
	/* CPU and memory are priced from the run's cgroup: without one the
	 * budget could not be held, so the run refuses to start. */
	if (p->budget.set && (p->budget.cpu_second || p->budget.memory_gb_second)) {
		p->cgroup_required = true;
		p->cgroup_asked |= AL_CGROUP_ASKED_BUDGET;
	}
	if (p->budget.set && (p->budget.egress_mb || p->budget.n_requests) && !p->gateway)
		al_errors_add(errs, EINVAL, NULL, NULL,
			      "limits.budget prices egress, and this run has no gateway");
}

void al_plan_build_cred_files(struct al_plan *p)
{
	bool any = false;

	for (size_t i = 0; i < p->n_secrets; i++)
		any |= p->secrets[i].def->file;
	if (!any)
		return;
	al_plan_add_dir(p, "/etc/airlock", 0755);
	al_plan_add_dir(p, SECRETS_DIR, 0755);
	for (size_t i = 0; i < p->n_secrets; i++) {
		const struct al_plan_secret *s = &p->secrets[i];
		if (!s->def->file)
			continue;
		_cleanup_free_ char *path = xasprintf(SECRETS_DIR "/%s", s->def->name);
		al_plan_add_file(p, path, xstrdup(s->placeholder), 0444);
	}
}

void al_plan_free_cred(struct al_plan *p)
{
	for (size_t i = 0; i < p->n_secrets; i++) {
		al_secret_def_free(p->secrets[i].def);
		al_allow_free(p->secrets[i].scope);
	}
	free(p->secrets);
	for (size_t i = 0; i < p->n_rule_opts; i++)
		al_rule_opts_free(p->rule_opts[i]);
	free(p->rule_opts);
	al_budget_clear(&p->budget);
}

void al_plan_extra_clear(struct al_plan_extra *x)
{
	char **lists[] = {x->env_replace, x->env_add, x->env_default};

	for (size_t l = 0; l < AL_ARRAY_SIZE(lists); l++) {
		for (size_t i = 0; lists[l] && lists[l][i]; i++)
			explicit_bzero(lists[l][i], strlen(lists[l][i]));
		al_strv_free(lists[l]);
	}
	for (size_t i = 0; i < x->n_files; i++) {
		free(x->files[i].path);
		free(x->files[i].content);
	}
	free(x->files);
	*x = (struct al_plan_extra){0};
}

static bool has_path(const struct al_plan *p, const char *path)
{
	for (size_t i = 0; i < p->n_fs; i++)
		if (strcmp(p->fs[i].path, path) == 0)
			return true;
	return false;
}

/* NAME=VALUE's name, as far as the '='. */
static size_t name_len(const char *entry)
{
	const char *eq = strchr(entry, '=');
	return eq ? (size_t)(eq - entry) : strlen(entry);
}

int al_plan_finish(struct al_plan *p, const struct al_plan_extra *x, struct al_error *err)
{
	if (p->final)
		return al_error_set(err, EALREADY, "internal error: the plan is final already");
	p->final = true;
	if (!x)
		return 0;
	for (size_t i = 0; x->env_replace && x->env_replace[i]; i++) {
		const char *e = x->env_replace[i];
		size_t n = name_len(e);
		for (size_t k = 0; p->envp && p->envp[k]; k++)
			if (strncmp(p->envp[k], e, n + 1) == 0) {
				free(p->envp[k]);
				p->envp[k] = xstrdup(e);
			}
	}
	for (size_t i = 0; x->env_add && x->env_add[i]; i++)
		al_strv_push(&p->envp, x->env_add[i]);
	for (size_t i = 0; x->env_default && x->env_default[i]; i++) {
		_cleanup_free_ char *name = strndup(x->env_default[i], name_len(x->env_default[i]));
		if (!al_plan_env_has(p->envp, name))
			al_strv_push(&p->envp, x->env_default[i]);
	}
	for (size_t i = 0; i < x->n_files; i++) {
		const struct al_plan_extra_file *f = &x->files[i];
		_cleanup_free_ char *dir =
		    strndup(f->path, (size_t)(strrchr(f->path, '/') - f->path));
		if (dir[0] && !has_path(p, dir))
			al_plan_add_dir(p, dir, 0755);
		al_plan_add_file(p, f->path, xstrdup(f->content), f->mode);
	}
	return 0;
}

/* The environment the command starts with: airlock's few, the gateway's
 * proxy variables when there is one, then the task's. */
void al_plan_build_env(struct al_plan *p, const struct al_policy *pol)
{
	struct al_policy *tmp = al_policy_new(NULL);

	al_policy_set_env(tmp, "PATH", AL_DEFAULT_PATH);
	al_policy_set_env(tmp, "HOME", p->workdir);
	al_policy_set_env(tmp, "LANG", "C.UTF-8");
	al_policy_set_env(tmp, "TMPDIR", "/tmp");
	if (p->gateway) {
		/* Announce the gateway the usual ways; loopback stays direct. */
		static const char *const http_vars[] = {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy",
							"https_proxy", NULL};
		char http[64], socks[64];
		snprintf(http, sizeof(http), "http://127.0.0.1:%d", AL_GATEWAY_HTTP_PORT);
		snprintf(socks, sizeof(socks), "socks5h://127.0.0.1:%d", AL_GATEWAY_SOCKS_PORT);
		for (size_t i = 0; http_vars[i]; i++)
			al_policy_set_env(tmp, http_vars[i], http);
		al_policy_set_env(tmp, "ALL_PROXY", socks);
		al_policy_set_env(tmp, "all_proxy", socks);
		al_policy_set_env(tmp, "NO_PROXY", "localhost,127.0.0.1,::1");
		al_policy_set_env(tmp, "no_proxy", "localhost,127.0.0.1,::1");
	}
	for (size_t i = 0; pol->env && pol->env[i]; i++) {
		const char *eq = strchr(pol->env[i], '=');
		_cleanup_free_ char *name = strndup(pol->env[i], (size_t)(eq - pol->env[i]));
		al_policy_set_env(tmp, name, eq + 1);
	}
	p->envp = TAKE_PTR(tmp->env);
	al_policy_free(tmp);
	p->env_hidden = xcalloc(1, sizeof(char *));
	for (size_t i = 0; pol->env_hidden && pol->env_hidden[i]; i++)
		al_strv_push(&p->env_hidden, pol->env_hidden[i]);
}
