/* The operator policy's secrets, tokens, rule options and budget
 * (operator-cred.h). The definitions are parsed as a task policy's are
 * (cred-parse.c); a profile grants them by name. */
#include "policy/operator-cred.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/util.h"

int al_op_parse_secrets(struct al_json_ctx *c, const json_t *root)
{
	static const char *const sections[] = {"secrets", "tokens"};
	int bad = 0;

	for (size_t i = 0; i < 2; i++) {
		json_t *v = json_object_get(root, sections[i]);
		if (v)
			al_json_note(&bad, al_json_secret_defs(c, v, sections[i], i == 1,
							       &c->op->secrets, &c->op->n_secrets));
	}
	/* One name, one definition: a task names it without saying which. */
	for (size_t i = 0; i < c->op->n_secrets; i++)
		for (size_t j = 0; j < i; j++)
			if (strcmp(c->op->secrets[i]->name, c->op->secrets[j]->name) == 0)
				al_json_note(&bad, al_json_fail(c, "tokens",
								"%s is both a secret and a token",
								c->op->secrets[i]->name));
	return bad;
}

static const struct al_secret_def *find_def(const struct al_operator *op, const char *name,
					    bool token)
{
	for (size_t i = 0; i < op->n_secrets; i++)
		if (strcmp(op->secrets[i]->name, name) == 0 && op->secrets[i]->token == token)
			return op->secrets[i];
	return NULL;
}

int al_op_parse_grants(struct al_json_ctx *c, const json_t *profile, const char *path,
		       struct al_op_profile *pr)
{
	static const char *const sections[] = {"secrets", "tokens"};
	int bad = 0;

	if (!json_is_object(profile))
		return 0;
	pr->grants = xcalloc(1, sizeof(char *));
	for (size_t i = 0; i < 2; i++) {
		_cleanup_(al_strv_freep) char **names = NULL;
		json_t *v = json_object_get(profile, sections[i]);
		char sub[192];
		snprintf(sub, sizeof(sub), "%s.%s", path, sections[i]);
		if (!v || al_json_note(&bad, al_json_strings(c, v, sub, false, false, &names)) < 0)
			continue;
		for (size_t k = 0; names[k]; k++) {
			if (!find_def(c->op, names[k], i == 1)) {
				char el[224];
				snprintf(el, sizeof(el), "%s[%zu]", sub, k);
				al_json_note(&bad, al_json_fail(c, el,
								"no %s named %s at the top level's "
								"\"%s\"",
								i ? "token" : "secret", names[k],
								sections[i]));
				continue;
			}
			al_strv_push(&pr->grants, names[k]);
		}
	}
	return bad;
}

int al_op_parse_budget(struct al_json_ctx *c, const json_t *j, const char *path,
		       struct al_op_profile *pr)
{
	static const char *const keys[] = {"max", "default", "prices", NULL};
	_cleanup_(json_decrefp) json_t *task_form = NULL;
	int r, bad = 0;

	if ((r = al_json_want(c, j, JSON_OBJECT, path,
			      "an object: {\"max\": CEILING, \"default\": AMOUNT, \"prices\": "
			      "{...}}")) < 0)
		return r;
	al_json_note(&bad, al_json_check_keys(c, j, path, keys));
	if (!json_object_get(j, "prices"))
		al_json_note(&bad, al_json_fail(c, path,
						"missing \"prices\" (a budget the operator bounds "
						"is priced by the operator)"));
	/* max and prices read as a task's budget would be; default apart. */
	task_form = json_pack("{s:O?, s:O?}", "max", json_object_get(j, "max"), "prices",
			      json_object_get(j, "prices"));
	if (!json_object_get(j, "max"))
		json_object_set_new(task_form, "max", json_real(4e9));
	if (al_json_note(&bad, al_json_budget(c, task_form, path, true, &pr->budget)) < 0)
		return bad;
	json_t *v = json_object_get(j, "default");
	if (v) {
		double x = json_is_number(v) ? json_number_value(v) : -1;
		char sub[192];
		snprintf(sub, sizeof(sub), "%s.default", path);
		pr->budget_default =
		    x > 0 && x <= 4e9 ? (uint64_t)(x * (double)AL_BUDGET_UNIT + 0.5) : 0;
		if (!pr->budget_default)
			return al_json_fail(c, sub,
					    "expected a positive number (to nine decimals)");
		if (pr->budget_default > pr->budget.max)
			return al_json_fail(c, sub, "over the ceiling");
	}
	return bad;
}

void al_op_add_rule_opts(struct al_op_profile *pr, struct al_rule_opts *o)
{
	pr->rule_opts = xrealloc(pr->rule_opts, (pr->n_rule_opts + 1) * sizeof(*pr->rule_opts));
	pr->rule_opts[pr->n_rule_opts++] = o;
}
