/* airlock check: validate a policy (plus flags) and print the resolved plan,
 * like `httpd -n`. Nothing is created. */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "audit/audit.h"
#include "backend/backend.h"
#include "config.h"
#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "policy/engine.h"
#include "policy/kmem.h"
#include "policy/operator.h"
#include "policy/plan.h"

static void usage(FILE *f)
{
	fprintf(f, "Usage: airlock check [OPTIONS] [[--] COMMAND [ARG...]]\n\n"
		   "Run without running: take what airlock run would take (the same flags,\n"
		   "the command after them) and print the resolved plan: mounts in setup\n"
		   "order, environment, limits, landlock rules and the seccomp table.\n"
		   "Nothing is created or written (--result and --audit are only checked).\n"
		   "Exits 0 if run would start, 125 if not, after printing every error\n"
		   "found (one line each; with --json, as JSON). Under an operator policy\n"
		   "it says which profile holds the request and every reason it is\n"
		   "refused; --explain says where each value came from and, on a refusal,\n"
		   "which profiles would allow the request. --operator-policy FILE alone\n"
		   "validates that file and lists its profiles.\n\n"
		   "Options:\n");
	al_cli_print_options(f, AL_CMD_CHECK);
}

/* A string of what the user gave, which may not be UTF-8 (a flag's bytes,
 * or a message cut short): then bytes past ASCII become '?'. */
static json_t *text_json(const char *s)
{
	json_t *j = json_string(s);

	if (j)
		return j;
	_cleanup_free_ char *ascii = xstrdup(s);
	for (char *c = ascii; *c; c++)
		if ((unsigned char)*c >= 0x80)
			*c = '?';
	return json_string(ascii);
}

static json_t *opt_json(const char *s)
{
	return s ? text_json(s) : json_null();
}

/* One entry of "errors": what every entry has (the refusal's keys null
 * when it is not a refusal). */
static json_t *error_json(const char *text, const char *where, const char *path,
			  const char *message, const struct al_refusal *r)
{
	json_t *o = json_object();

	json_object_set_new(o, "text", text_json(text));
	json_object_set_new(o, "where", opt_json(where));
	json_object_set_new(o, "path", opt_json(path));
	json_object_set_new(o, "message", text_json(message));
	json_object_set_new(o, "refused", json_boolean(r != NULL));
	json_t *rj = r ? al_refusal_json(r) : NULL;
	for (const char *const *k =
		 (const char *const[]){"task", "asked", "bound", "operator_path", NULL};
	     *k; k++)
		json_object_set(o, *k, rj ? json_object_get(rj, *k) : json_null());
	json_decref(rj);
	return o;
}

/* {"ok": false, "errors": [...], "omitted": N} on stdout, then with an
 * operator policy its decision and, with --explain, "allowed_by":
 * docs/policy.md ("Errors") describes it. The operator policy's refusals
 * (b->refused) are entries of their own, with the keys of the record's
 * "refused" (engine.h). */
static void print_errors_json(const struct al_cli *cli, const struct al_errors *errs,
			      const struct al_request *b, char **allowed_by)
{
	json_t *doc = json_object(), *list = json_array();
	size_t omitted = errs->omitted;

	for (size_t i = 0; i < errs->n; i++) {
		const struct al_error_entry *e = &errs->v[i];
		json_t *o = error_json(e->text, e->where, e->path, e->message, NULL);
		if (e->line > 0) {
			json_object_set_new(o, "line", json_integer(e->line));
			json_object_set_new(o, "column", json_integer(e->column));
		}
		json_array_append_new(list, o);
	}
	for (size_t i = 0; b && b->refused && i < b->dec.n_refused; i++) {
		const struct al_refusal *r = &b->dec.refused[i];
		_cleanup_free_ char *text = xasprintf("refused: %s", r->message);
		json_array_append_new(list, error_json(text, NULL, NULL, r->message, r));
	}
	if (b && b->refused)
		omitted += b->dec.omitted;
	json_object_set_new(doc, "ok", json_false());
	json_object_set_new(doc, "errors", list);
	json_object_set_new(doc, "omitted", json_integer((json_int_t)omitted));
	if (b && b->refused)
		json_object_set_new(doc, "operator_policy", al_decision_json(&b->dec));
	if (b && b->refused && cli->explain) {
		json_t *names = json_array();
		for (size_t i = 0; allowed_by && allowed_by[i]; i++)
			json_array_append_new(names, al_json_text(allowed_by[i]));
		json_object_set_new(doc, "allowed_by", names);
	}
	_cleanup_free_ char *t = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(doc);
	printf("%s\n", t);
}

/* errs, then the operator policy's refusals (b may be NULL). Refused,
 * --explain also prints the decision table on stdout and which of the
 * operator policy's profiles would allow the request. */
static void report(const struct al_cli *cli, struct al_errors *errs, const struct al_request *b)
{
	_cleanup_(al_strv_freep) char **allowed_by = NULL;
	bool refused = b && b->refused && b->op;

	if (refused && cli->explain)
		allowed_by = al_cli_profiles_allowing(cli, b->op, AL_PLAN_COMMAND_OPTIONAL);
	if (cli->json) {
		print_errors_json(cli, errs, refused ? b : NULL, allowed_by);
		return;
	}
	if (refused)
		al_request_refusals(b, errs);
	al_cli_print_errors(errs);
	if (!refused || !cli->explain)
		return;
	al_decision_print(&b->dec, stdout);
	_cleanup_free_ char *names = allowed_by ? al_strv_join(allowed_by, ", ") : NULL;
	if (names)
		printf("profiles of %s that would allow this request: %s\n", b->file, names);
	else
		printf("no profile of %s allows this request as it is\n", b->file);
	if (b->op->decider && b->op->decider->run_path)
		printf("(check does not ask the decider, which airlock run asks once per run)\n");
}

/* The operator policy in force, in one line. */
static void print_operator(const struct al_request *b)
{
	if (!b->file)
		printf("operator policy: none (the run is unbounded: no --operator-policy, $%s "
		       "or %s)\n",
		       AL_OPERATOR_ENV, AL_OPERATOR_DEFAULT_FILE);
	else
		printf("operator policy %s (%s, sha256 %s): the profile named \"%s\"\n", b->file,
		       b->how, b->op->sha256, b->dec.profile_name);
}

static void print_bounds(const struct al_op_profile *pr)
{
	char mx[48], df[48];

	printf("profile %s\n", pr->name);
	for (size_t i = 0; i < pr->n_ro; i++)
		printf("  read      %s\n", pr->ro[i].path);
	for (size_t i = 0; i < pr->n_rw; i++)
		printf("  write     %s\n", pr->rw[i].path);
	for (size_t i = 0; i < pr->n_never; i++)
		printf("  never     %s\n", pr->never[i].path);
	for (size_t i = 0; i < al_allow_count(pr->allow); i++)
		printf("  egress    %s\n", al_allow_rule_text(al_allow_rule_at(pr->allow, i)));
	for (size_t i = 0; pr->always_text && pr->always_text[i]; i++)
		printf("  always    %s\n", pr->always_text[i]);
	for (size_t i = 0; pr->never_text && pr->never_text[i]; i++)
		printf("  no egress %s\n", pr->never_text[i]);
	for (size_t i = 0; pr->hosts_text && pr->hosts_text[i]; i++)
		printf("  map to    %s\n", pr->hosts_text[i]);
	for (size_t i = 0; pr->resolvers && pr->resolvers[i]; i++)
		printf("  resolver  %s\n", pr->resolvers[i]);
	_cleanup_free_ char *sys =
	    pr->system ? al_strv_join(pr->system, " ") : xstrdup("(airlock's default list)");
	_cleanup_free_ char *ea = al_strv_join(pr->env_allow, " ");
	_cleanup_free_ char *ep = al_strv_join(pr->env_pass, " ");
	printf("  system    %s\n", sys);
	printf("  env       allow %s; never %zu names%s; pass %s\n", ea[0] ? ea : "none",
	       al_strv_len(pr->env_never),
	       pr->n_env_never_default ? " (airlock's default list and the profile's)" : "",
	       ep[0] ? ep : "none");
	printf("  weaken    %s%s%s\n", pr->best_effort & AL_OP_WEAKEN_LANDLOCK ? "landlock " : "",
	       pr->best_effort & AL_OP_WEAKEN_KERNEL_MEMORY ? "kernel_memory" : "",
	       pr->best_effort ? "" : "nothing (no protection may be best-effort)");
	for (size_t i = 0; i < AL_OPL_COUNT; i++) {
		const struct al_limit_def *d = &al_limit_defs[i];
		const struct al_op_bound *b = &pr->limits[i];
		if (!b->max && !b->def)
			continue;
		al_limit_format(d, b->max, mx, sizeof(mx));
		al_limit_format(d, b->def, df, sizeof(df));
		printf("  limit     %s.%s: max %s, default %s\n", d->section, d->key,
		       b->max ? mx : "none", b->def ? df : "(airlock's)");
	}
	_cleanup_free_ char *backends =
	    pr->backends ? al_strv_join(pr->backends, ", ") : xstrdup("any");
	printf("  backend   %s (minimum %s)\n", backends,
	       pr->backend_min ? pr->backend_min : "native");
	for (size_t i = 0; pr->grants && pr->grants[i]; i++)
		printf("  grants    %s\n", pr->grants[i]);
	for (size_t i = 0; i < pr->n_rule_opts; i++) {
		const struct al_rule_opts *o = pr->rule_opts[i];
		_cleanup_free_ char *m = o->methods ? al_strv_join(o->methods, ",") : NULL;
		_cleanup_free_ char *ps = o->paths ? al_strv_join(o->paths, ",") : NULL;
		printf("  requests  %s%s%s%s%s%s%s%s\n", o->rule,
		       o->intercept ? " tls=intercept" : "", o->ca_file ? " ca=" : "",
		       o->ca_file ? o->ca_file : "", m ? " methods=" : "", m ? m : "",
		       ps ? " paths=" : "", ps ? ps : "");
	}
	if (pr->budget.set) {
		char mx2[32], df2[32];
		al_budget_format(pr->budget.max, mx2, sizeof(mx2));
		al_budget_format(pr->budget_default, df2, sizeof(df2));
		printf("  budget    max %s, default %s (priced by the operator)\n", mx2,
		       pr->budget_default ? df2 : "the max");
	}
}

/* The secrets and tokens the operator defines (never a value). */
static void print_secrets(const struct al_operator *op)
{
	for (size_t i = 0; i < op->n_secrets; i++) {
		const struct al_secret_def *d = op->secrets[i];
		_cleanup_free_ char *hosts = al_strv_join(d->hosts, ", ");
		printf("%s %s: to %s\n", d->token ? "token " : "secret", d->name, hosts);
	}
}

/* check --operator-policy FILE alone: the file, checked, and its profiles. */
static int check_operator(const struct al_cli *cli)
{
	_cleanup_(al_errors_clear) struct al_errors errs = {0};
	_cleanup_(al_operator_freep) struct al_operator *op = NULL;
	_cleanup_free_ char *file = NULL;
	struct al_error err = {0};
	const char *how;

	if (al_operator_find(cli->operator_file, getenv(AL_OPERATOR_ENV), &file, &how, &err) < 0) {
		al_errors_add_error(&errs, &err);
		report(cli, &errs, NULL);
		return 125;
	}
	if (al_operator_load_file(file, &op, &errs) < 0) {
		report(cli, &errs, NULL);
		return 125;
	}
	if (cli->json) {
		json_t *names = json_array();
		for (size_t i = 0; i < op->n_profiles; i++)
			json_array_append_new(names, json_string(op->profiles[i].name));
		json_t *doc = json_pack("{s:b, s:o, s:s, s:o, s:b}", "ok", 1, "operator_policy",
					al_json_text(op->file), "sha256", op->sha256, "profiles",
					names, "decider", op->decider != NULL);
		_cleanup_free_ char *t = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		json_decref(doc);
		if (!t) {
			al_err("internal error: the JSON document could not be written");
			return 125;
		}
		printf("%s\n", t);
		return 0;
	}
	printf("operator policy %s: OK (sha256 %s)\n", op->file, op->sha256);
	if (op->decider && op->decider->run_path)
		printf("decider: asked once per run by airlock run (check does not ask it)\n");
	if (!al_operator_profile(op, AL_OPERATOR_PROFILE))
		printf("no \"default\" profile: a task must name one (--profile)\n");
	print_secrets(op);
	for (size_t i = 0; i < op->n_profiles; i++)
		print_bounds(&op->profiles[i]);
	if (op->decider)
		printf("decider %s%s%s: run %s, egress %s, timeout %llu ms\n",
		       op->decider->socket ? op->decider->socket : "http://",
		       op->decider->host ? op->decider->host : "", op->decider->host ? ":port" : "",
		       op->decider->run_path ? op->decider->run_path : "(not asked)",
		       op->decider->egress_path ? op->decider->egress_path : "(not asked)",
		       (unsigned long long)op->decider->timeout_ms);
	return 0;
}

/* Where run would write the record and the audit stream (check writes
 * neither): {"result": FILE, "-" or "fd N", "audit": FILE or "fd N"},
 * each null when not asked for. */
static json_t *outputs_json(const struct al_cli *cli)
{
	_cleanup_free_ char *rfd = xasprintf("fd %d", cli->result_fd);
	_cleanup_free_ char *afd = xasprintf("fd %d", cli->audit_fd);

	return json_pack("{s:o, s:o}", "result",
			 cli->result_file      ? al_json_text(cli->result_file)
			 : cli->result_fd == 1 ? json_string("-")
			 : cli->result_fd >= 0 ? json_string(rfd)
					       : json_null(),
			 "audit",
			 cli->audit_file      ? al_json_text(cli->audit_file)
			 : cli->audit_fd >= 0 ? json_string(afd)
					      : json_null());
}

static void print_outputs(const struct al_cli *cli)
{
	json_t *o = outputs_json(cli);
	const char *r = json_string_value(json_object_get(o, "result"));
	const char *a = json_string_value(json_object_get(o, "audit"));

	printf("record:     %s%s\n", r ? r : "none (no --result)",
	       r ? " (run writes it there; check writes nothing)" : "");
	printf("audit:      %s%s\n", a ? a : "none (no --audit)",
	       a ? " (run appends to it; check writes nothing)" : "");
	json_decref(o);
}

/* The plan as JSON, "ok": true first, with the backend's description and
 * the kernel-memory bound; NULL with err set when the backend refuses. */
static json_t *plan_json(const struct al_plan *plan, const struct al_backend_ops *backend,
			 enum al_sockmem sockmem, struct al_error *err)
{
	_cleanup_free_ char *s = al_plan_dump_json(plan);
	json_t *o = json_loads(s, 0, NULL), *doc;

	if (!o) {
		al_error_set(err, EINVAL, "internal error: the plan's JSON dump does not parse");
		return NULL;
	}
	if (backend->describe(plan, NULL, o, err) < 0) {
		json_decref(o);
		return NULL;
	}
	json_object_set_new(o, "kernel_memory", al_kmem_json(plan, sockmem, NULL));
	doc = json_pack("{s:b}", "ok", 1);
	json_object_update(doc, o);
	json_decref(o);
	return doc;
}

int al_cmd_check(int argc, char **argv)
{
	struct al_cli cli;
	_cleanup_(al_policy_freep) struct al_policy *policy = NULL;
	_cleanup_(al_errors_clear) struct al_errors errs = {0};
	_cleanup_(al_request_clear) struct al_request bounds = {0};
	struct al_request_config cfg;
	const struct al_plan *plan;
	struct al_cli_outputs outputs = {.result_dirfd = -1};
	struct al_error err = {0};
	int code = 125;

	if (al_cli_start(&cli, AL_CMD_CHECK, argc, argv, usage, &errs, &code))
		goto out;
	/* The operator policy alone: nothing of a task (no flag of one, no
	 * command) and no error in the flags. */
	if (cli.operator_file && !cli.policy_file && cli.task_flags == 0 && !cli.flags->command &&
	    al_errors_count(&errs) == 0) {
		code = check_operator(&cli);
		goto out;
	}
	if (al_cli_policy(&cli, &policy, &errs) < 0) {
		report(&cli, &errs, NULL);
		goto out;
	}
	/* The decider is not asked (no run id): check says so. */
	al_cli_request_config(&cli, AL_PLAN_COMMAND_OPTIONAL, NULL, &cfg);
	al_request_init(&bounds, &cfg, policy);
	if (al_request_plan(&bounds, &errs) < 0) {
		report(&cli, &errs, &bounds);
		goto out;
	}
	plan = bounds.plan;
	/* Where run would write the record and the audit: checked as run
	 * checks them, nothing written. */
	if (al_cli_outputs_open(&cli, NULL, true, &outputs, &err) < 0) {
		al_errors_add_error(&errs, &err);
		report(&cli, &errs, NULL);
		goto out;
	}
	const struct al_backend_ops *backend = al_backend_lookup(plan->backend);
	if (!backend) {
		al_errors_add(&errs, EINVAL, NULL, NULL, "unknown backend \"%s\"", plan->backend);
		report(&cli, &errs, NULL);
		goto out;
	}
	/* The kernel-memory bound depends on this host's cgroup, which the
	 * plan (pure) does not look at. */
	enum al_sockmem sockmem = al_cgroup_host_socket_mode();
	if (cli.json) {
		json_t *doc = plan_json(plan, backend, sockmem, &err);
		if (!doc) {
			al_errors_add_error(&errs, &err);
			report(&cli, &errs, NULL);
			goto out;
		}
		json_object_set_new(doc, "operator_policy",
				    bounds.file ? al_decision_json(&bounds.dec) : json_null());
		json_object_set_new(doc, "outputs", outputs_json(&cli));
		_cleanup_free_ char *t = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		json_decref(doc);
		if (!t) {
			al_err("internal error: the plan's JSON document could not be written");
			goto out;
		}
		printf("%s\n", t);
	} else {
		char kmem[512];
		_cleanup_free_ char *how = NULL;
		size_t how_len = 0;
		_cleanup_fclose_ FILE *f = open_memstream(&how, &how_len);
		/* Described before anything is printed: a refusal prints no
		 * "OK". */
		if (!f || backend->describe(plan, f, NULL, &err) < 0 || fflush(f) != 0) {
			al_err("%s", err.msg[0] ? err.msg : "describing the plan: out of memory");
			goto out;
		}
		printf("policy %s: OK\n", cli.policy_file ? cli.policy_file : "(flags only)");
		print_operator(&bounds);
		if (cli.explain && bounds.file)
			al_decision_print(&bounds.dec, stdout);
		else if (cli.explain)
			printf("every value is the task's or airlock's own default\n");
		al_plan_dump_text(plan, stdout);
		print_outputs(&cli);
		fputs(how, stdout);
		al_kmem_describe(plan, sockmem, kmem, sizeof(kmem));
		printf("kernel memory: %s\n", kmem);
	}
	code = 0;
out:
	al_cli_outputs_close(&outputs);
	al_cli_clear(&cli);
	return code;
}
