/* Credentials outside the gateway: the policies' secrets, tokens, rule
 * options and budgets (policy/cred-parse.c), the plan's placeholders
 * (policy/plan-cred.c), the engine's grants and bounds (engine-cred.c),
 * the sources of values (cred/source.c) and the meter's budget
 * (supervisor/meter.c). */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/sys.h"
#include "core/util.h"
#include "cred/source.h"
#include "cred/jwt.h"
#include "cred/store.h"
#include "tls/ca.h"
#include "gateway/conn.h"
#include "gateway/gateway.h"
#include <sys/socket.h>
#include "core/loop.h"
#include "engine_util.h"
#include "policy/plan.h"
#include "supervisor/meter.h"

#define NET                                                                                        \
	"\"network\": {\"allow\": [\"api.test:8080\"], \"hosts\": {\"api.test\": \"127.0.0.1\"}}"

/* Every error of json as one string, for assert_contains. */
static char *errors_of(const char *json)
{
	_cleanup_(al_errors_clear) struct al_errors errs = {0};
	struct al_policy *p = NULL;
	char *all = xstrdup("");

	if (al_policy_load_string_all("p.json", json, strlen(json), &p, &errs) == 0) {
		al_policy_free(p);
		fail_msg("%s: loaded, expected errors", json);
	}
	for (size_t i = 0; i < errs.n; i++) {
		char *n = xasprintf("%s%s\n", all, errs.v[i].text);
		free(all);
		all = n;
	}
	return all;
}

static void test_parse_secret(void **state)
{
	(void)state;
	_cleanup_(al_policy_freep) struct al_policy *p = task_parse(
	    "{\"version\": 1, " NET ", \"secrets\": {\"TOK\": {\"source\": {\"command\": "
	    "[\"/bin/echo\", \"x\"], \"timeout\": \"2s\"}, \"hosts\": [\"api.test:8080\"], "
	    "\"header\": \"X-Api-Key: k={}\", \"body\": true, \"env\": \"API_KEY\", \"file\": "
	    "true}}}");
	assert_int_equal(p->n_secret_defs, 1);
	const struct al_secret_def *d = p->secret_defs[0];
	assert_string_equal(d->name, "TOK");
	assert_int_equal(d->src.kind, AL_SOURCE_COMMAND);
	assert_string_equal(d->src.argv[0], "/bin/echo");
	assert_int_equal(d->src.timeout_ms, 2000);
	assert_int_equal(d->how, AL_HOW_HEADER);
	assert_string_equal(d->header, "X-Api-Key");
	assert_string_equal(d->tmpl, "k={}");
	assert_true(d->body);
	assert_true(d->file);
	assert_string_equal(d->env, "API_KEY");
	assert_string_equal(d->where, "task.json: secrets.TOK");
}

static void test_parse_secret_errors(void **state)
{
	(void)state;
	_cleanup_free_ char *e = errors_of(
	    "{\"version\": 1, \"secrets\": {"
	    "\"1BAD\": {\"source\": {\"env\": \"A\", \"file\": \"/x\"}, \"hosts\": [\"a.test\"], "
	    "\"header\": \"Host: {}\"},"
	    "\"REL\": {\"source\": {\"command\": [\"gh\", \"auth\"]}, \"hosts\": [\"a.test\"], "
	    "\"query\": \"k\"},"
	    "\"TPL\": {\"source\": {\"env\": \"A\"}, \"hosts\": [\"a.test\"], \"header\": "
	    "\"Authorization: Bearer\"},"
	    "\"AWS\": {\"source\": {\"env\": \"A\"}, \"hosts\": [\"s3.test\"], \"sigv4\": true, "
	    "\"body\": true},"
	    "\"BEARER\": {\"source\": {\"env\": \"A\"}, \"hosts\": [\"a.test\"], \"header\": "
	    "\"Bearer {}\"},"
	    "\"NONE\": {\"source\": {\"fd\": 1}, \"hosts\": [\"a.test\"]}},"
	    "\"tokens\": {\"T\": {\"hosts\": [\"*.a.test\"], \"per_request\": true, \"expose\": "
	    "true}, \"U\": {\"key\": \"/k\", \"hosts\": [\"a.test\"], \"ttl\": \"5s\"}}}");
	assert_contains(e, "secrets.1BAD: a name of letters");
	assert_contains(e, "secrets.1BAD.source: give one source, not 2");
	assert_contains(e, "secrets.1BAD.header: the Host field cannot carry a secret");
	assert_contains(e, "secrets.REL.source.command: the command is run without a search path");
	assert_contains(e, "secrets.TPL.header: the template needs exactly one \"{}\"");
	assert_contains(e, "secrets.AWS.body: a signed request's body cannot change");
	assert_contains(e, "secrets.NONE.source.fd: expected a descriptor number from 3");
	assert_contains(e, "secrets.NONE: say how it is sent");
	/* A presentation given but malformed: its field is named, not the list. */
	assert_contains(e, "secrets.BEARER.header: expected \"Field-Name: template with {}\"");
	assert_null(strstr(e, "secrets.BEARER: say how"));
	assert_contains(e, "tokens.T.hosts[0]: a token's hosts are its audience");
	assert_contains(e, "tokens.T.key: missing");
	assert_contains(e, "tokens.T.expose: a per_request token is minted on the way out");
	assert_contains(e, "tokens.U.ttl: only a per_request token has its own ttl");
}

/* --secret's KEY=VALUE form: the definition, or the errors (where, path). */
static struct al_secret_def *flag_def(const char *arg)
{
	_cleanup_(al_errors_clear) struct al_errors errs = {0};
	struct al_secret_def *d = NULL;

	if (al_secret_flag_parse(arg, &d, &errs) < 0)
		fail_msg("--secret %s: %s", arg, errs.n ? errs.v[0].text : "(no error)");
	return d;
}

/* The first error of arg, which must be at key (NULL: at none) and hold
 * text. */
static void flag_fails(const char *arg, const char *key, const char *text)
{
	_cleanup_(al_errors_clear) struct al_errors errs = {0};
	_cleanup_free_ char *where = xasprintf("--secret %s", arg);
	struct al_secret_def *d = NULL;

	if (al_secret_flag_parse(arg, &d, &errs) == 0)
		fail_msg("--secret %s: parsed, expected \"%s\"", arg, text);
	assert_null(d);
	assert_true(errs.n >= 1);
	for (size_t i = 0; i < errs.n; i++) {
		const struct al_error_entry *e = &errs.v[i];
		if (!strstr(e->message, text))
			continue;
		assert_string_equal(e->where, where);
		if (key)
			assert_string_equal(e->path, key);
		else
			assert_null(e->path);
		return;
	}
	fail_msg("--secret %s: no error \"%s\" (first: %s)", arg, text, errs.v[0].text);
}

static void test_secret_flag(void **state)
{
	(void)state;
	/* The flag and the JSON form give the same definition. */
	_cleanup_(al_policy_freep) struct al_policy *p = task_parse(
	    "{\"version\": 1, " NET ", \"secrets\": {\"TOK\": {\"source\": {\"env\": \"API\"}, "
	    "\"hosts\": [\"api.test:8080\", \"b.test\"], \"header\": \"Authorization: Bearer "
	    "{}\"}}}");
	const struct al_secret_def *j = p->secret_defs[0];
	struct al_secret_def *d = flag_def(
	    "id=TOK,env=API,host=api.test:8080,host=b.test,header=Authorization: Bearer {}");
	assert_string_equal(d->name, j->name);
	assert_int_equal(d->src.kind, j->src.kind);
	assert_string_equal(d->src.env, j->src.env);
	assert_int_equal(al_strv_len(d->hosts), 2);
	assert_string_equal(d->hosts[0], j->hosts[0]);
	assert_string_equal(d->hosts[1], j->hosts[1]);
	assert_int_equal(d->how, j->how);
	assert_string_equal(d->header, j->header);
	assert_string_equal(d->tmpl, j->tmpl);
	assert_string_equal(d->env, j->env);
	assert_int_equal(d->body, j->body);
	assert_int_equal(d->file, j->file);
	assert_string_equal(d->where, "--secret id=TOK,env=API,host=api.test:8080,host=b.test,"
				      "header=Authorization: Bearer {}");
	al_secret_def_free(d);

	/* Commas inside double quotes: the value's, or the whole field's; ""
	 * is one quote; a quote inside an unquoted value is a quote. */
	d = flag_def("id=K,env=K,host=a.test,header=\"X-Key: a,b={}\"");
	assert_string_equal(d->tmpl, "a,b={}");
	al_secret_def_free(d);
	d = flag_def("\"header=X-Key: \"\"q\"\",{}\",id=K,env=K,host=a.test");
	assert_string_equal(d->header, "X-Key");
	assert_string_equal(d->tmpl, "\"q\",{}");
	al_secret_def_free(d);
	d = flag_def("id=K,env=K,host=a.test,header=Authorization: Token t=\"{}\"");
	assert_string_equal(d->tmpl, "Token t=\"{}\"");
	al_secret_def_free(d);

	/* file=, basic=, query=; a relative file is the current directory's. */
	char cwd[PATH_MAX];
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	_cleanup_free_ char *abs = xasprintf("%s/tok.txt", cwd);
	d = flag_def("id=K,file=tok.txt,host=a.test,basic=svc");
	assert_int_equal(d->src.kind, AL_SOURCE_FILE);
	assert_string_equal(d->src.file, abs);
	assert_int_equal(d->how, AL_HOW_BASIC);
	assert_string_equal(d->user, "svc");
	al_secret_def_free(d);
	d = flag_def("id=K,file=/run/k,host=a.test,query=api_key");
	assert_string_equal(d->src.file, "/run/k");
	assert_int_equal(d->how, AL_HOW_QUERY);
	assert_string_equal(d->param, "api_key");
	al_secret_def_free(d);

	/* The flag's own checks. */
	flag_fails("id=K,env=K,host=a.test,header=X: {},colour=red", "colour", "unknown key");
	flag_fails("id=K,env=K,env=L,host=a.test,query=k", "env", "given twice");
	/* Not UTF-8: refused at its key, never dropped from the definition. */
	flag_fails("id=K,env=K,host=a.test,host=b\xff.test,query=k", "host", "not valid UTF-8");
	flag_fails("id=K,env=K\xff,host=a.test,query=k", "env", "not valid UTF-8");
	flag_fails("env=K,host=a.test,query=k", "id", "missing: id=NAME");
	flag_fails("id=K,host=a.test,query=k", NULL, "missing the value's source");
	flag_fails("id=K,env=K,file=/k,host=a.test,query=k", "file", "not both");
	flag_fails("id=K,env=K,query=k", "host", "missing: host=HOST");
	flag_fails("id=K,env=K,host=a.test", NULL, "say how it is sent");
	flag_fails("id=K,env=K,host=a.test,query=k,basic=u", NULL, "give one of header=");
	flag_fails("id=K,,env=K", NULL, "field 2 is empty");
	flag_fails("id=K,env=K,", NULL, "a comma at the end");
	flag_fails("id=K,env", NULL, "field 2 (\"env\") is not KEY=VALUE");
	flag_fails("id=K,header=\"X: {}", "header", "never closed");
	flag_fails("\"id=K,env=K", NULL, "never closed");
	flag_fails("id=K,header=\"X: {}\"x,env=K", "header", "text after the closing");
	/* The policy file parser's checks, said at the flag's keys. */
	flag_fails("id=1K,env=K,host=a.test,query=k", "id", "a name of letters");
	flag_fails("id=K,env=A B,host=a.test,query=k", "env", "not a variable name");
	flag_fails("id=K,file=/a/../b,host=a.test,query=k", "file", "clean absolute path");
	flag_fails("id=K,env=K,host=a.test,host=b c,query=k", "host", "allow rule \"b c\"");
	flag_fails("id=K,env=K,host=a.test,header=Bearer {}", "header", "Field-Name: template");
	flag_fails("id=K,env=K,host=a.test,header=X: no brace", "header", "exactly one \"{}\"");
	flag_fails("id=K,env=K,host=a.test,basic=a:b", "basic", "a user name without ':'");
	flag_fails("id=K,env=K,host=a.test,query=a b", "query", "a parameter name");
}

static void test_parse_rule_opts(void **state)
{
	(void)state;
	_cleanup_(al_policy_freep) struct al_policy *p = task_parse(
	    "{\"version\": 1, \"network\": {\"allow\": [\"b.test\", {\"host\": \"a.test:443\", "
	    "\"tls\": \"intercept\", \"ca\": \"/etc/a.pem\", \"methods\": [\"GET\", \"POST\"], "
	    "\"paths\": [\"/v1/*\", \"/x/**\"], \"max_body\": \"1K\"}]}}");
	assert_int_equal(al_strv_len(p->net_allow), 2);
	assert_string_equal(p->net_allow[1], "a.test:443");
	const struct al_rule_opts *o =
	    al_rule_opts_find(p->rule_opts, p->n_rule_opts, "a.test:443");
	assert_non_null(o);
	assert_true(o->intercept);
	assert_string_equal(o->ca_file, "/etc/a.pem");
	assert_string_equal(o->methods[1], "POST");
	assert_string_equal(o->paths[1], "/x/**");
	assert_int_equal(o->max_body, 1024);
	assert_null(al_rule_opts_find(p->rule_opts, p->n_rule_opts, "b.test"));

	_cleanup_free_ char *e = errors_of(
	    "{\"version\": 1, \"network\": {\"allow\": [{\"host\": \"x.test:80\", \"ca\": "
	    "\"/c.pem\", \"tls\": \"maybe\", \"paths\": [\"nope\"], \"methods\": "
	    "[\"GE T\", \"CONNECT\"], \"extra\": 1}, {\"tls\": \"pass\"}]}}");
	assert_contains(e, "network.allow[0]: unknown key \"extra\"");
	assert_contains(e, "network.allow[0].tls: expected \"intercept\" or \"pass\"");
	assert_contains(e, "network.allow[0].ca: the upstream's CA is only used when the gateway");
	assert_contains(e, "network.allow[0].paths[0]: path pattern \"nope\"");
	assert_contains(e, "network.allow[0].methods[0]: not a request method");
	assert_contains(e, "network.allow[0].methods[1]: not a request method: \"CONNECT\"");
	assert_contains(e, "network.allow[1].host: missing");
}

static void test_parse_budget(void **state)
{
	(void)state;
	_cleanup_(al_policy_freep) struct al_policy *p =
	    task_parse("{\"version\": 1, \"limits\": {\"budget\": {\"max\": 1.25, \"prices\": "
		       "{\"cpu_second\": 0.000000001, \"egress_mb\": 2, \"requests\": "
		       "{\"llm.test\": 0.01, \"*.x.test\": 0.5}}}}}");
	const struct al_budget *b = &p->budget;
	assert_true(b->set);
	assert_int_equal(b->max, 1250000000);
	assert_int_equal(b->cpu_second, 1);
	assert_int_equal(b->egress_mb, 2000000000);
	assert_int_equal(al_budget_request_price(b, "llm.test"), 10000000);
	assert_int_equal(al_budget_request_price(b, "LLM.TEST"), 10000000);
	assert_int_equal(al_budget_request_price(b, "a.b.x.test"), 500000000);
	assert_int_equal(al_budget_request_price(b, "x.test"), 0);
	char buf[32];
	al_budget_format(1250000000, buf, sizeof(buf));
	assert_string_equal(buf, "1.25");
	al_budget_format(3000000000, buf, sizeof(buf));
	assert_string_equal(buf, "3");

	_cleanup_free_ char *e =
	    errors_of("{\"version\": 1, \"limits\": {\"budget\": {\"max\": -1, \"prices\": "
		      "{\"bogus\": 1, \"requests\": {\"a.test:80\": 1, \"b.test\": -2}}}}}");
	assert_contains(e, "limits.budget.max: expected a positive number");
	assert_contains(e, "limits.budget.prices: unknown key \"bogus\"");
	assert_contains(e, "limits.budget.prices.requests.a.test:80: expected a host name");
	assert_contains(e, "limits.budget.prices.requests.b.test: expected a non-negative number");
}

static struct al_plan *plan_of(const char *json, struct al_errors *errs)
{
	_cleanup_(al_policy_freep) struct al_policy *p = task_parse(json);
	struct al_plan *plan = NULL;

	al_plan_build_all(p, AL_PLAN_PARTIAL, &plan, errs);
	return plan;
}

static const char *env_of(const struct al_plan *p, const char *name)
{
	size_t n = strlen(name);
	for (size_t i = 0; p->envp[i]; i++)
		if (strncmp(p->envp[i], name, n) == 0 && p->envp[i][n] == '=')
			return p->envp[i] + n + 1;
	return NULL;
}

static void test_plan_placeholders(void **state)
{
	(void)state;
	_cleanup_(al_errors_clear) struct al_errors errs = {0};
	_cleanup_(al_plan_freep) struct al_plan *p =
	    plan_of("{\"version\": 1, \"command\": [\"/bin/true\"], " NET ", \"secrets\": {"
		    "\"TOK\": {\"source\": {\"env\": \"HOME\"}, \"hosts\": [\"api.test:8080\"], "
		    "\"header\": \"Authorization: Bearer {}\", \"file\": true},"
		    "\"AWS\": {\"source\": {\"env\": \"HOME\"}, \"hosts\": [\"api.test:8080\"], "
		    "\"sigv4\": true}}}",
		    &errs);
	assert_int_equal(errs.n, 0);
	assert_int_equal(p->n_secrets, 2);
	const char *ph = env_of(p, "TOK");
	assert_non_null(ph);
	assert_int_equal(strlen(ph), 43);
	assert_int_equal(strncmp(ph, "airlock-ph-", 11), 0);
	assert_int_equal(strspn(ph + 11, "0123456789abcdef"), 32);
	assert_true(al_policy_env_is_hidden(p->env_hidden, "TOK"));
	assert_string_equal(env_of(p, "AWS_ACCESS_KEY_ID"), p->secrets[1].fake_key_id);
	assert_int_equal(strncmp(p->secrets[1].fake_key_id, "AKIA", 4), 0);
	assert_int_equal(strlen(p->secrets[1].fake_key_id), 20);
	assert_int_equal(strlen(env_of(p, "AWS_SECRET_ACCESS_KEY")), 40);
	bool file = false;
	for (size_t i = 0; i < p->n_fs; i++)
		if (strcmp(p->fs[i].path, "/etc/airlock/secrets/TOK") == 0) {
			file = true;
			assert_string_equal(p->fs[i].source, ph);
		}
	assert_true(file);

	/* Another plan: other placeholders. */
	_cleanup_(al_errors_clear) struct al_errors errs2 = {0};
	_cleanup_(al_plan_freep) struct al_plan *q = plan_of(
	    "{\"version\": 1, \"command\": [\"/bin/true\"], " NET ", \"secrets\": {\"TOK\": "
	    "{\"source\": {\"env\": \"HOME\"}, \"hosts\": [\"api.test:8080\"], \"query\": \"k\"}}}",
	    &errs2);
	assert_string_not_equal(env_of(q, "TOK"), ph);
}

static void test_plan_refusals(void **state)
{
	(void)state;
	_cleanup_(al_errors_clear) struct al_errors errs = {0};
	_cleanup_(al_plan_freep) struct al_plan *p = plan_of(
	    "{\"version\": 1, \"command\": [\"/bin/true\"], " NET ", \"env\": {\"TOK\": \"x\"}, "
	    "\"limits\": {\"budget\": {\"max\": 1}}, \"secrets\": {"
	    "\"TOK\": {\"source\": {\"env\": \"HOME\"}, \"hosts\": [\"other.test:443\"], "
	    "\"header\": \"X-K: {}\"}}, \"tokens\": {\"JWT\": {\"key\": \"/k\", \"hosts\": "
	    "[\"api.test:8080\"]}}}",
	    &errs);
	char all[4096] = "";
	for (size_t i = 0; i < errs.n; i++)
		strncat(all, errs.v[i].text, sizeof(all) - strlen(all) - 2), strcat(all, "\n");
	assert_contains(all, "hosts[0]: other.test:443 is not allowed by the run's network rules");
	assert_contains(all, "the sandbox's variable TOK would hold its placeholder, but the task");
	assert_contains(all, "limits.budget: no prices");
	(void)p;

	_cleanup_(al_errors_clear) struct al_errors e2 = {0};
	_cleanup_(al_plan_freep) struct al_plan *q =
	    plan_of("{\"version\": 1, \"command\": [\"/bin/true\"], \"secrets\": [\"X\"]}", &e2);
	assert_true(e2.n >= 1);
	assert_contains(e2.v[0].text,
			"task.json: secrets[0]: no secret or token named X is defined");
	(void)q;
}

#define OPERATOR                                                                                   \
	"{\"version\": 1, \"secrets\": {\"TOK\": {\"source\": {\"env\": \"HOME\"}, \"hosts\": "    \
	"[\"api.test:8080\"], \"header\": \"X-K: {}\"}, \"OTHER\": {\"source\": {\"env\": "        \
	"\"HOME\"}, \"hosts\": [\"api.test:8080\"], \"header\": \"X-O: {}\"}}, \"profiles\": "     \
	"{\"default\": {\"network\": {\"allow\": [{\"host\": \"api.test:8080\", \"methods\": "     \
	"[\"GET\", \"POST\"], \"paths\": [\"/v1/**\"], \"max_body\": 100}], \"hosts\": "           \
	"[\"127.0.0.1\"]}, \"limits\": {\"budget\": {\"max\": 2, \"default\": 1, \"prices\": "     \
	"{\"cpu_second\": 0.5}}}, \"secrets\": [\"TOK\"]}}}"

static void test_engine_grants(void **state)
{
	(void)state;
	_cleanup_(al_operator_freep) struct al_operator *op = op_parse(OPERATOR);
	_cleanup_(al_policy_freep) struct al_policy *t =
	    task_parse("{\"version\": 1, \"secrets\": [\"TOK\"], \"network\": {\"allow\": "
		       "[{\"host\": \"api.test:8080\", \"methods\": [\"POST\", \"PUT\"], "
		       "\"max_body\": 1000}], "
		       "\"hosts\": {\"api.test\": \"127.0.0.1\"}}}");
	struct al_decision d;
	assert_int_equal(al_engine_request(op, t, NULL, &d), 0);
	assert_int_equal(t->n_secret_defs, 1);
	assert_string_equal(t->secret_defs[0]->name, "TOK");
	assert_null(t->secret_names);
	const struct al_rule_opts *o =
	    al_rule_opts_find(t->rule_opts, t->n_rule_opts, "api.test:8080");
	assert_non_null(o);
	assert_int_equal(al_strv_len(o->methods), 1); /* POST: in both lists */
	assert_string_equal(o->methods[0], "POST");
	assert_string_equal(o->paths_also[0], "/v1/**");
	assert_int_equal(o->max_body, 100);
	assert_true(t->budget.set);
	assert_int_equal(t->budget.max, AL_BUDGET_UNIT); /* the profile's default */
	assert_int_equal(t->budget.cpu_second, AL_BUDGET_UNIT / 2);
	al_decision_clear(&d);
}

static void test_engine_refusals(void **state)
{
	(void)state;
	_cleanup_(al_operator_freep) struct al_operator *op = op_parse(OPERATOR);
	_cleanup_(al_policy_freep) struct al_policy *t = task_parse(
	    "{\"version\": 1, " NET ", \"secrets\": [\"OTHER\"], \"tokens\": {\"MINE\": {\"key\": "
	    "\"/k\", \"hosts\": [\"api.test:8080\"]}}, \"limits\": {\"budget\": {\"max\": 3}}}");
	struct al_decision d;
	assert_int_equal(al_engine_request(op, t, NULL, &d), -EPERM);
	bool granted = false, own = false, ceiling = false;
	for (size_t i = 0; i < d.n_refused; i++) {
		const char *m = d.refused[i].message;
		granted |=
		    strstr(m, "task.json: secrets[0]: the profile default does not grant OTHER, "
			      "defined at op.json: secrets.OTHER (it grants: TOK)") != NULL;
		own |=
		    strstr(m, "tokens.MINE: under an operator policy, secrets and tokens are the "
			      "operator's to define") != NULL;
		ceiling |=
		    strstr(m, "limits.budget.max 3 is over the operator's ceiling 2") != NULL;
	}
	assert_true(granted);
	assert_true(own);
	assert_true(ceiling);
	assert_int_equal(t->n_secret_defs, 0); /* nothing of the task's own kept */
	al_decision_clear(&d);

	_cleanup_(al_policy_freep) struct al_policy *t2 = task_parse(
	    "{\"version\": 1, " NET ", \"limits\": {\"budget\": {\"max\": 1, \"prices\": "
	    "{\"cpu_second\": 0}}}}");
	assert_int_equal(al_engine_request(op, t2, NULL, &d), -EPERM);
	assert_contains(d.refused[0].message, "the operator policy sets the prices");
	al_decision_clear(&d);
}

static void read_ok(const struct al_secret_source *src, const char *want)
{
	struct al_secret_value v;
	struct al_error err = {0};

	if (al_secret_source_read(src, "secret T", &v, &err) < 0)
		fail_msg("%s", err.msg);
	assert_string_equal(v.data, want);
	assert_int_equal(v.len, strlen(want));
	al_secret_value_clear(&v);
	assert_null(v.data);
}

static int read_bad(const struct al_secret_source *src, struct al_error *err)
{
	struct al_secret_value v;
	int r = al_secret_source_read(src, "secret T", &v, err);

	assert_true(r < 0);
	assert_null(v.data);
	return r;
}

static void test_sources(void **state)
{
	(void)state;
	struct al_error err = {0};
	char path[] = "/tmp/test-cred-XXXXXX";
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, "file-value\n", 11), 11);
	close(fd);
	setenv("TEST_CRED_VALUE", "env-value", 1);
	read_ok(&(struct al_secret_source){.kind = AL_SOURCE_ENV, .env = "TEST_CRED_VALUE"},
		"env-value");
	read_ok(&(struct al_secret_source){.kind = AL_SOURCE_FILE, .file = path}, "file-value");
	int p[2];
	assert_int_equal(pipe(p), 0);
	assert_int_equal(write(p[1], "fd-value\r\n", 10), 10);
	close(p[1]);
	read_ok(&(struct al_secret_source){.kind = AL_SOURCE_FD, .fd = p[0]}, "fd-value");
	assert_int_equal(fcntl(p[0], F_GETFD), -1); /* read once, then closed */
	char *echo[] = {"/bin/echo", "cmd-value", NULL};
	read_ok(
	    &(struct al_secret_source){.kind = AL_SOURCE_COMMAND, .argv = echo, .timeout_ms = 5000},
	    "cmd-value");

	read_bad(&(struct al_secret_source){.kind = AL_SOURCE_ENV, .env = "TEST_CRED_NOT_SET"},
		 &err);
	assert_contains(err.msg, "secret T: airlock's environment has no TEST_CRED_NOT_SET");
	truncate(path, 0);
	read_bad(&(struct al_secret_source){.kind = AL_SOURCE_FILE, .file = path}, &err);
	assert_contains(err.msg, "is empty");
	unlink(path);

	/* A failing command: its status, never its output. */
	char *fails[] = {"/bin/sh", "-c", "echo leaked-output; echo leaked-err >&2; exit 3", NULL};
	read_bad(&(struct al_secret_source){.kind = AL_SOURCE_COMMAND,
					    .argv = fails,
					    .timeout_ms = 5000},
		 &err);
	assert_contains(err.msg, "/bin/sh failed with exit status 3");
	assert_not_contains(err.msg, "leaked");
	char *missing[] = {"/nonexistent/issuer", NULL};
	read_bad(&(struct al_secret_source){.kind = AL_SOURCE_COMMAND,
					    .argv = missing,
					    .timeout_ms = 5000},
		 &err);
	assert_contains(err.msg, "could not be run");

	/* One that hangs: killed at its timeout, with what it forked. */
	char pidfile[] = "/tmp/test-cred-pid-XXXXXX";
	close(mkstemp(pidfile));
	_cleanup_free_ char *script = xasprintf("sleep 30 & echo $! > %s; wait", pidfile);
	char *hangs[] = {"/bin/sh", "-c", script, NULL};
	uint64_t t0 = al_now_ms();
	assert_int_equal(read_bad(&(struct al_secret_source){.kind = AL_SOURCE_COMMAND,
							     .argv = hangs,
							     .timeout_ms = 300},
				  &err),
			 -ETIMEDOUT);
	assert_true(al_now_ms() - t0 < 20000); /* a hang guard: the sleep is 30 s */
	assert_contains(err.msg, "did not finish in time");
	FILE *f = fopen(pidfile, "r");
	int child = 0;
	assert_non_null(f);
	assert_int_equal(fscanf(f, "%d", &child), 1);
	fclose(f);
	unlink(pidfile);
	/* Its process group was killed: gone, or a zombie its new parent has
	 * not reaped yet. */
	bool alive = true;
	for (int i = 0; i < 250 && alive; i++) {
		_cleanup_free_ char *stat = xasprintf("/proc/%d/stat", child);
		char buf[256] = "";
		ssize_t n = al_read_file(stat, buf, sizeof(buf) - 1);
		const char *paren = n > 0 ? strrchr(buf, ')') : NULL;
		alive = paren && paren[1] == ' ' && paren[2] != 'Z';
		if (alive)
			usleep(20000);
	}
	assert_false(alive);
}

static volatile sig_atomic_t sigchld_seen;
static void note_sigchld(int sig)
{
	(void)sig;
	sigchld_seen = 1;
}

/* A command source while the process ignores SIGCHLD (as whoever started
 * airlock may have it): the command's status is still read, and the
 * disposition is left as it was. */
static void test_source_sigchld_ignored(void **state)
{
	(void)state;
	struct sigaction ign = {.sa_handler = SIG_IGN}, old, now;
	struct al_error err = {0};
	char *echo[] = {"/bin/echo", "cmd-value", NULL};
	char *fails[] = {"/bin/sh", "-c", "exit 3", NULL};

	assert_int_equal(sigaction(SIGCHLD, &ign, &old), 0);
	read_ok(
	    &(struct al_secret_source){.kind = AL_SOURCE_COMMAND, .argv = echo, .timeout_ms = 5000},
	    "cmd-value");
	read_bad(&(struct al_secret_source){.kind = AL_SOURCE_COMMAND,
					    .argv = fails,
					    .timeout_ms = 5000},
		 &err);
	assert_contains(err.msg, "/bin/sh failed with exit status 3");
	assert_int_equal(sigaction(SIGCHLD, NULL, &now), 0);
	assert_true(now.sa_handler == SIG_IGN);
	assert_int_equal(sigaction(SIGCHLD, &old, NULL), 0);
	/* A handler of the process's is not called for the command. */
	struct sigaction count = {.sa_handler = note_sigchld};
	assert_int_equal(sigaction(SIGCHLD, &count, &old), 0);
	sigchld_seen = 0;
	read_ok(
	    &(struct al_secret_source){.kind = AL_SOURCE_COMMAND, .argv = echo, .timeout_ms = 5000},
	    "cmd-value");
	assert_int_equal(sigchld_seen, 0);
	assert_int_equal(sigaction(SIGCHLD, &old, NULL), 0);
}

/* 1 when every byte of v is zero. */
static int wiped(const struct al_secret_value *v)
{
	for (size_t i = 0; i < v->len; i++)
		if (v->data[i])
			return 0;
	return 1;
}

/* In a child, al_cred_wipe_copies(); exit 0 when every store of c[]
 * that is not NULL has its value wiped there, else 1 + its index. */
static int wipe_in_child(struct al_cred **c, size_t n)
{
	pid_t pid = fork();
	int status = 0;

	assert_true(pid >= 0);
	if (pid == 0) {
		al_cred_wipe_copies();
		for (size_t i = 0; i < n; i++)
			if (c[i] && !wiped(&c[i]->v[0].value))
				_exit(1 + (int)(i % 200));
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

/* More stores open at once than any fixed table held (64): a copy of the
 * process wipes every one, also once some in the middle are freed; the
 * process that opened them keeps its values. */
#define MANY_STORES 150
static void test_store_wipe_many(void **state)
{
	(void)state;
	_cleanup_(al_errors_clear) struct al_errors errs = {0};
	struct al_cred *c[MANY_STORES] = {0};
	struct al_error err = {0};
	char path[] = "/tmp/test-cred-wipe-XXXXXX";
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, "wipe-me-value\n", 14), 14);
	close(fd);
	_cleanup_free_ char *json =
	    xasprintf("{\"version\": 1, \"command\": [\"/bin/true\"], " NET ", \"secrets\": {"
		      "\"TOK\": {\"source\": {\"file\": \"%s\"}, \"hosts\": [\"api.test:8080\"], "
		      "\"header\": \"Authorization: Bearer {}\"}}}",
		      path);
	_cleanup_(al_plan_freep) struct al_plan *p = plan_of(json, &errs);
	assert_int_equal(errs.n, 0);
	for (size_t i = 0; i < MANY_STORES; i++) {
		char id[16];
		snprintf(id, sizeof(id), "run%zu", i);
		if (al_cred_open(p, id, &c[i], &err) < 0)
			fail_msg("store %zu: %s", i, err.msg);
		assert_int_equal(c[i]->n, 1);
		assert_string_equal(c[i]->v[0].value.data, "wipe-me-value");
	}
	unlink(path);
	assert_int_equal(wipe_in_child(c, MANY_STORES), 0);
	/* Freed here and there (the first, the last, some between): the rest
	 * still all wiped in a copy. */
	for (size_t i = 0; i < MANY_STORES; i += 7) {
		al_cred_free(c[i]);
		c[i] = NULL;
	}
	al_cred_free(c[MANY_STORES - 1]);
	c[MANY_STORES - 1] = NULL;
	assert_int_equal(wipe_in_child(c, MANY_STORES), 0);
	/* This process keeps its values. */
	for (size_t i = 0; i < MANY_STORES; i++)
		if (c[i])
			assert_string_equal(c[i]->v[0].value.data, "wipe-me-value");
	for (size_t i = 0; i < MANY_STORES; i++)
		al_cred_free(c[i]);
}

/* The run's CA: opening the store leaves the plan as it was; what it adds
 * goes in with al_plan_finish(), after which the plan is final. */
static void test_store_adds_at_finish(void **state)
{
	(void)state;
	_cleanup_(al_errors_clear) struct al_errors errs = {0};
	_cleanup_(al_cred_freep) struct al_cred *c = NULL;
	struct al_error err = {0};
	_cleanup_(al_plan_freep) struct al_plan *p = plan_of(
	    "{\"version\": 1, \"command\": [\"/bin/true\"], \"env\": {\"PIP_CERT\": "
	    "\"/mine.pem\"}, \"network\": {\"allow\": [{\"host\": \"api.test:443\", \"tls\": "
	    "\"intercept\"}], \"hosts\": {\"api.test\": \"127.0.0.1\"}}}",
	    &errs);
	assert_int_equal(errs.n, 0);
	assert_true(p->intercept);
	size_t n_fs = p->n_fs, n_env = al_strv_len(p->envp);

	if (al_cred_open(p, "run1", &c, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(p->n_fs, n_fs);
	assert_int_equal(al_strv_len(p->envp), n_env);
	assert_null(env_of(p, "SSL_CERT_FILE"));
	assert_int_equal(c->extra.n_files, 2);
	assert_int_equal(al_plan_finish(p, &c->extra, &err), 0);
	assert_true(p->final);
	assert_string_equal(env_of(p, "SSL_CERT_FILE"), AL_CA_BUNDLE);
	assert_string_equal(env_of(p, "NODE_EXTRA_CA_CERTS"), AL_CA_FILE);
	assert_string_equal(env_of(p, "PIP_CERT"), "/mine.pem"); /* the task's stays */
	bool dir = false, ca = false;
	for (size_t i = n_fs; i < p->n_fs; i++) {
		dir |= p->fs[i].kind == AL_FS_DIR && strcmp(p->fs[i].path, "/etc/airlock") == 0;
		ca |= p->fs[i].kind == AL_FS_FILE && strcmp(p->fs[i].path, AL_CA_FILE) == 0 &&
		      strstr(p->fs[i].source, "BEGIN CERTIFICATE");
	}
	assert_true(dir && ca);
	/* Final: nothing more goes in. */
	n_fs = p->n_fs;
	assert_int_equal(al_plan_finish(p, &c->extra, &err), -EALREADY);
	assert_int_equal(p->n_fs, n_fs);
}

/* The gateway's start mints the leaf of each intercepting rule that names
 * one host, before any connection; a wildcard's names are minted when
 * asked for. */
static void test_gateway_premint(void **state)
{
	(void)state;
	_cleanup_(al_errors_clear) struct al_errors errs = {0};
	_cleanup_(al_cred_freep) struct al_cred *c = NULL;
	struct al_error err = {0};
	struct al_loop *loop = NULL;
	_cleanup_(al_plan_freep) struct al_plan *p = plan_of(
	    "{\"version\": 1, \"command\": [\"/bin/true\"], \"network\": {\"allow\": [{\"host\": "
	    "\"API.test:443\", \"tls\": \"intercept\"}, {\"host\": \"*.wild.test\", \"tls\": "
	    "\"intercept\"}, \"plain.test\"], \"hosts\": {\"api.test\": \"127.0.0.1\"}}}",
	    &errs);
	assert_int_equal(errs.n, 0);
	if (al_cred_open(p, "run1", &c, &err) < 0)
		fail_msg("%s", err.msg);
	assert_false(al_tls_ca_has_leaf(c->ca, "api.test"));
	assert_int_equal(al_loop_new(&loop, &err), 0);
	struct al_gateway *gw = al_gateway_new(p, NULL, loop);
	al_gateway_set_cred(gw, c);
	if (al_gateway_prepare(gw, &err) < 0)
		fail_msg("%s", err.msg);
	assert_true(al_tls_ca_has_leaf(c->ca, "api.test"));
	assert_false(al_tls_ca_has_leaf(c->ca, "x.wild.test"));
	assert_false(al_tls_ca_has_leaf(c->ca, "plain.test"));
	al_gateway_free(gw);
	al_loop_free(loop);
}

/* The DNS stub takes every query waiting on its socket in one wake-up
 * (a resolver's A and AAAA come together) and answers each. */
static size_t dns_query(uint8_t *q, uint16_t id, uint16_t type)
{
	static const uint8_t name[] = {3, 'a', 'p', 'i', 4, 't', 'e', 's', 't', 0};
	uint8_t head[12] = {(uint8_t)(id >> 8), (uint8_t)id, 1, 0, 0, 1};

	memcpy(q, head, sizeof(head));
	memcpy(q + 12, name, sizeof(name));
	q[12 + sizeof(name)] = (uint8_t)(type >> 8);
	q[13 + sizeof(name)] = (uint8_t)type;
	q[14 + sizeof(name)] = 0;
	q[15 + sizeof(name)] = 1; /* IN */
	return 16 + sizeof(name);
}

static void test_gateway_dns_batch(void **state)
{
	(void)state;
	_cleanup_(al_errors_clear) struct al_errors errs = {0};
	struct al_error err = {0};
	struct al_loop *loop = NULL;
	_cleanup_(al_plan_freep) struct al_plan *p =
	    plan_of("{\"version\": 1, \"command\": [\"/bin/true\"], \"network\": {\"allow\": "
		    "[\"api.test:443\"]}}",
		    &errs);
	assert_int_equal(errs.n, 0);
	assert_int_equal(al_loop_new(&loop, &err), 0);
	struct al_gateway *gw = al_gateway_new(p, NULL, loop);
	if (al_gateway_prepare(gw, &err) < 0)
		fail_msg("%s", err.msg);
	int sv[2];
	uint8_t q[64], a[512];
	assert_int_equal(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
	size_t n = dns_query(q, 0x1234, 1);
	assert_int_equal(send(sv[1], q, n, 0), (ssize_t)n);
	n = dns_query(q, 0x5678, 28);
	assert_int_equal(send(sv[1], q, n, 0), (ssize_t)n);
	gw_dns_udp(gw, sv[0]); /* once */
	ssize_t m = recv(sv[1], a, sizeof(a), MSG_DONTWAIT);
	assert_true(m >= 12);
	assert_int_equal(a[0] << 8 | a[1], 0x1234);
	assert_int_equal(a[6] << 8 | a[7], 1); /* one A: the fake address */
	m = recv(sv[1], a, sizeof(a), MSG_DONTWAIT);
	assert_true(m >= 12);
	assert_int_equal(a[0] << 8 | a[1], 0x5678);
	assert_int_equal(a[6] << 8 | a[7], 0); /* AAAA: no data */
	assert_int_equal(recv(sv[1], a, sizeof(a), MSG_DONTWAIT), -1);
	close(sv[0]);
	close(sv[1]);
	al_gateway_free(gw);
	al_loop_free(loop);
}

/* The deadline moved (al_run_extend, a resume): a run token the gateway
 * presents is minted again with the new exp and the same jti, an exposed
 * one is left as it was, a per-request token is bounded by the new
 * deadline, the CA's leaves end a minute after it; past the CA's end the
 * move is refused and nothing changes. */
static void test_store_deadline(void **state)
{
	(void)state;
	static const char ed_pem[] =
	    "-----BEGIN PRIVATE KEY-----\n"
	    "MC4CAQAwBQYDK2VwBCIEIJ1hsZ3v/VpguoRK9JLsLMREScVpezJpGXA7rAMcrn9g\n"
	    "-----END PRIVATE KEY-----\n";
	_cleanup_(al_errors_clear) struct al_errors errs = {0};
	_cleanup_(al_cred_freep) struct al_cred *c = NULL;
	struct al_error err = {0};
	char path[] = "/tmp/test-cred-deadline-XXXXXX";
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, ed_pem, strlen(ed_pem)), (ssize_t)strlen(ed_pem));
	close(fd);
	_cleanup_free_ char *json = xasprintf(
	    "{\"version\": 1, \"command\": [\"/bin/true\"], \"limits\": {\"timeout\": \"10s\"}, "
	    "\"network\": {\"allow\": [\"api.test:8080\", {\"host\": \"tls.test:443\", \"tls\": "
	    "\"intercept\"}], \"hosts\": {\"api.test\": \"127.0.0.1\", \"tls.test\": "
	    "\"127.0.0.1\"}}, \"tokens\": {"
	    "\"RUN\": {\"key\": \"%s\", \"hosts\": [\"api.test:8080\"]}, "
	    "\"SHOWN\": {\"key\": \"%s\", \"hosts\": [\"api.test:8080\"], \"expose\": true}, "
	    "\"REQ\": {\"key\": \"%s\", \"hosts\": [\"api.test:8080\"], \"per_request\": "
	    "true, \"ttl\": \"1h\"}}}",
	    path, path, path);
	_cleanup_(al_plan_freep) struct al_plan *p = plan_of(json, &errs);
	for (size_t i = 0; i < errs.n; i++)
		print_message("%s\n", errs.v[i].text);
	assert_int_equal(errs.n, 0);
	if (al_cred_open(p, "run1", &c, &err) < 0)
		fail_msg("%s", err.msg);
	unlink(path);
	assert_int_equal(c->n, 3);
	int64_t now = (int64_t)time(NULL), old = c->deadline;
	assert_true(old >= now + 9 && old <= now + 10);
	struct al_cred_secret *run = NULL, *shown = NULL, *req = NULL;
	for (size_t i = 0; i < c->n; i++) {
		const char *name = c->v[i].ps->def->name;
		struct al_cred_secret **slot = strcmp(name, "RUN") == 0	    ? &run
					       : strcmp(name, "SHOWN") == 0 ? &shown
									    : &req;
		*slot = &c->v[i];
	}
	assert_non_null(run);
	assert_non_null(shown);
	assert_non_null(req);
	_cleanup_free_ char *run_old = xstrdup(run->value.data);
	_cleanup_free_ char *shown_old = xstrdup(shown->value.data);
	char jti[33];
	memcpy(jti, run->jti, sizeof(jti));
	/* The CA: valid for its longest life; its leaves to the deadline. */
	assert_true(al_tls_ca_not_after(c->ca) >= now + AL_TLS_CA_MAX_LIFETIME - 1);
	assert_int_equal(al_tls_ca_leaf_end(c->ca), old + 60);
	assert_int_equal(al_cred_deadline_max(c), al_tls_ca_not_after(c->ca) - 60);
	X509 *leaf;
	EVP_PKEY *key;
	assert_int_equal(al_tls_ca_leaf(c->ca, "tls.test", &leaf, &key, &err), 0);
	assert_int_equal(ASN1_TIME_cmp_time_t(X509_get0_notAfter(leaf), (time_t)(old + 60)), 0);
	/* A per-request token would not live past the old deadline. */
	_cleanup_free_ char *tok1 = NULL;
	char jti1[33];
	assert_int_equal(al_cred_mint_request(c, req, "api.test", now, &tok1, jti1, &err), 0);

	/* Moved by 100 s. */
	int64_t moved = old + 100;
	assert_int_equal(al_cred_set_deadline(c, moved, &err), 0);
	assert_int_equal(c->deadline, moved);
	assert_string_not_equal(run->value.data, run_old);
	assert_string_equal(run->jti, jti);
	assert_string_equal(shown->value.data, shown_old);
	_cleanup_(al_jwt_key_freep) struct al_jwt_key *pub = NULL;
	assert_int_equal(al_jwt_key_from_mem(ed_pem, strlen(ed_pem), &pub, &err), 0);
	json_t *claims = NULL;
	/* The new run token is valid after the old deadline, until the new. */
	if (al_jwt_verify(pub, run->value.data, run->value.len, "api.test", old + 50, &claims,
			  &err) < 0)
		fail_msg("the run token minted again: %s", err.msg);
	assert_int_equal(json_integer_value(json_object_get(claims, "exp")), moved);
	assert_string_equal(json_string_value(json_object_get(claims, "jti")), jti);
	json_decref(claims);
	assert_true(al_jwt_verify(pub, run_old, strlen(run_old), "api.test", old + 50, NULL,
				  &err) == -EKEYEXPIRED);
	/* A per-request token minted after the old deadline: accepted, to the
	 * new one at the latest. */
	_cleanup_free_ char *tok2 = NULL;
	char jti2[33];
	assert_int_equal(al_cred_mint_request(c, req, "api.test", old + 50, &tok2, jti2, &err), 0);
	claims = NULL;
	assert_int_equal(
	    al_jwt_verify(pub, tok2, strlen(tok2), "api.test", old + 50, &claims, &err), 0);
	assert_int_equal(json_integer_value(json_object_get(claims, "exp")), moved);
	json_decref(claims);
	/* Leaves now end a minute after the new deadline (minted anew). */
	assert_int_equal(al_tls_ca_leaf_end(c->ca), moved + 60);
	assert_int_equal(al_tls_ca_leaf(c->ca, "tls.test", &leaf, &key, &err), 0);
	assert_int_equal(ASN1_TIME_cmp_time_t(X509_get0_notAfter(leaf), (time_t)(moved + 60)), 0);

	/* Past the CA's end: refused, nothing moved. */
	_cleanup_free_ char *run_now = xstrdup(run->value.data);
	assert_int_equal(al_cred_set_deadline(c, al_cred_deadline_max(c) + 1, &err), -ERANGE);
	assert_non_null(strstr(err.msg, "interception CA"));
	assert_int_equal(c->deadline, moved);
	assert_string_equal(run->value.data, run_now);
	assert_int_equal(al_tls_ca_leaf_end(c->ca), moved + 60);
	/* Without a CA there is no such bound. */
	assert_int_equal(al_cred_deadline_max(NULL), INT64_MAX);
}

static void stop_noted(void *data)
{
	(*(int *)data)++;
}

static void test_meter_budget(void **state)
{
	(void)state;
	struct al_plan plan = {0};
	struct al_run_result res = {0};
	int stopped = 0;
	struct al_meter m = {.plan = &plan, .res = &res, .stop = stop_noted, .data = &stopped};

	plan.budget = (struct al_budget){.set = true,
					 .max = AL_BUDGET_UNIT / 20, /* 0.05 */
					 .egress_mb = 1000,	     /* a nano a KB */
					 .n_requests = 1};
	struct al_budget_price price = {"api.test", AL_BUDGET_UNIT / 100};
	plan.budget.requests = &price;
	for (int i = 0; i < 4; i++)
		al_meter_charge(&m, "api.test", 1, 0);
	assert_int_equal(stopped, 0);
	/* 999 one-byte sends cost nothing each, yet are counted. */
	for (int i = 0; i < 999; i++)
		al_meter_charge(&m, "api.test", 0, 1);
	assert_int_equal(res.cost.egress, 0);
	al_meter_charge(&m, "api.test", 0, 1);
	assert_int_equal(res.cost.egress, 1);
	al_meter_charge(&m, "api.test", 1, 0);
	assert_int_equal(stopped, 1);
	assert_int_equal(res.reason, AL_END_BUDGET);
	assert_int_equal(res.cost.n_hosts, 1);
	assert_int_equal(res.cost.hosts[0].requests, 5);
	assert_int_equal(al_cost_total(&res.cost), AL_BUDGET_UNIT / 20 + 1);
	al_meter_clear(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse_secret),    cmocka_unit_test(test_parse_secret_errors),
	    cmocka_unit_test(test_secret_flag),	    cmocka_unit_test(test_parse_rule_opts),
	    cmocka_unit_test(test_parse_budget),    cmocka_unit_test(test_plan_placeholders),
	    cmocka_unit_test(test_plan_refusals),   cmocka_unit_test(test_engine_grants),
	    cmocka_unit_test(test_engine_refusals), cmocka_unit_test(test_sources),
	    cmocka_unit_test(test_meter_budget),    cmocka_unit_test(test_source_sigchld_ignored),
	    cmocka_unit_test(test_store_wipe_many), cmocka_unit_test(test_store_adds_at_finish),
	    cmocka_unit_test(test_gateway_premint), cmocka_unit_test(test_gateway_dns_batch),
	    cmocka_unit_test(test_store_deadline),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
