/* The policy engine's decisions and refusals (engine.h): how they are
 * kept, printed and given as data; the external decider's question and
 * how its answer narrows the task. */
#include "policy/engine.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/audit.h"
#include "core/cleanup.h"
#include "core/util.h"
#include "policy/engine-internal.h"

/* What a decider may say in one reason, and how many reasons are kept. */
#define DECIDER_REASON_MAX  300
#define DECIDER_REASONS_MAX 8

const char *al_origin_name(enum al_origin o)
{
	switch (o) {
	case AL_FROM_TASK:
		return "task";
	case AL_FROM_DEFAULT:
		return "the profile's default value";
	case AL_FROM_UNNAMED:
		return "none asked: the profile named \"default\"";
	case AL_FROM_CEILING:
		return "operator ceiling";
	case AL_FROM_BUILTIN:
		return "airlock's built-in value";
	case AL_FROM_FORCED:
		return "operator forced";
	case AL_FROM_DECIDER:
		return "decider";
	case AL_FROM_OPERATOR:
		return "operator bound";
	}
	return "?";
}

/* Text from a task or a decider, made one printable line of at most max
 * bytes: control characters (C0, DEL, C1), bidirectional overrides and
 * isolates, and bytes that are not UTF-8 become '?'; a character is never
 * cut in two. */
static char *clean(const char *s, size_t max)
{
	size_t n = strlen(s), o = 0;
	char *out = xmalloc((n < max ? n : max) + 1);

	for (size_t i = 0; i < n && o < max;) {
		const unsigned char *u = (const unsigned char *)s + i;
		size_t len = u[0] < 0x80	     ? 1
			     : (u[0] & 0xe0) == 0xc0 ? 2
			     : (u[0] & 0xf0) == 0xe0 ? 3
			     : (u[0] & 0xf8) == 0xf0 ? 4
						     : 0;
		uint32_t cp = 0;
		bool ok = len > 0 && i + len <= n;
		for (size_t k = 1; ok && k < len; k++)
			ok = (u[k] & 0xc0) == 0x80;
		if (ok) {
			cp = len == 1	? u[0]
			     : len == 2 ? u[0] & 0x1fu
			     : len == 3 ? u[0] & 0x0fu
					: u[0] & 0x07u;
			for (size_t k = 1; k < len; k++)
				cp = (cp << 6) | (u[k] & 0x3fu);
			ok = !(len == 2 && cp < 0x80) && !(len == 3 && cp < 0x800) &&
			     !(len == 4 && (cp < 0x10000 || cp > 0x10ffff)) &&
			     !(cp >= 0xd800 && cp <= 0xdfff);
		}
		bool shown =
		    ok && !(cp < 0x20 || (cp >= 0x7f && cp < 0xa0) ||
			    (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069));
		if (!shown) {
			out[o++] = '?';
			i += ok ? len : 1; /* a malformed sequence: its first byte */
			continue;
		}
		if (o + len > max)
			break;
		memcpy(out + o, s + i, len);
		o += len;
		i += len;
	}
	out[o] = '\0';
	return out;
}

void engine_refuse(struct al_decision *d, const char *task, const char *asked, const char *bound,
		   char *operator_path, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	if (d->n_refused >= AL_REFUSALS_MAX) {
		d->omitted++;
		free(operator_path);
		return;
	}
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	d->refused = xrealloc(d->refused, (d->n_refused + 1) * sizeof(*d->refused));
	struct al_refusal *r = &d->refused[d->n_refused++];
	r->task = clean(task ? task : "", 512);
	r->asked = clean(asked ? asked : "", 512);
	r->bound = clean(bound ? bound : "", 512);
	r->operator_path = operator_path;
	/* The line names the operator file and the bound's JSON path. */
	_cleanup_free_ char *line = clean(msg, sizeof(msg));
	r->message = operator_path
			 ? xasprintf("%s [%s: %s]", line, d->op ? d->op->file : "?", operator_path)
			 : xstrdup(line);
}

void al_engine_refuse(struct al_decision *d, const char *task, const char *bound,
		      const char *operator_path, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	engine_refuse(d, task, "", bound, operator_path ? xstrdup(operator_path) : NULL, "%s", msg);
}

void engine_explain(struct al_decision *d, const char *what, const char *value, enum al_origin from,
		    const char *task, char *bound)
{
	d->explain = xrealloc(d->explain, (d->n_explain + 1) * sizeof(*d->explain));
	d->explain[d->n_explain++] = (struct al_explain){
	    .what = clean(what, 512),
	    .value = clean(value, 512),
	    .from = from,
	    .task = task ? clean(task, 512) : NULL,
	    .bound = bound,
	};
}

void engine_explain_clear(struct al_explain *e)
{
	free(e->what);
	free(e->value);
	free(e->task);
	free(e->bound);
}

char *engine_bound(const struct al_decision *d, const char *fmt, ...)
{
	char path[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	return xasprintf("%s: %s", d->op ? d->op->file : "?", path);
}

char *engine_path(const struct al_op_profile *pr, const char *suffix)
{
	return xasprintf("%s.%s", pr->where, suffix);
}

char *engine_rules_text(const struct al_allowlist *l)
{
	char **v = NULL, *s;

	for (size_t i = 0; i < al_allow_count(l); i++)
		al_strv_push(&v, al_allow_rule_text(al_allow_rule_at(l, i)));
	s = al_strv_join(v, ", ");
	al_strv_free(v);
	return s;
}

void al_decision_errors(const struct al_decision *d, struct al_errors *errs)
{
	for (size_t i = 0; i < d->n_refused; i++)
		al_errors_add(errs, EPERM, NULL, NULL, "refused: %s", d->refused[i].message);
	errs->omitted += d->omitted;
}

void al_decision_print(const struct al_decision *d, FILE *f)
{
	fprintf(f, "operator policy %s (sha256 %.16s...), the profile named \"%s\"\n",
		d->op ? d->op->file : "?", d->op ? d->op->sha256 : "", d->profile_name);
	for (size_t i = 0; i < d->n_explain; i++) {
		const struct al_explain *e = &d->explain[i];
		fprintf(f, "  %-34s %-24s %s", e->what, e->value, al_origin_name(e->from));
		if (e->task)
			fprintf(f, " (%s)", e->task);
		if (e->bound)
			fprintf(f, "; bound: %s", e->bound);
		fputc('\n', f);
	}
	for (size_t i = 0; i < d->n_refused; i++)
		fprintf(f, "  refused: %s\n", d->refused[i].message);
	if (d->omitted)
		fprintf(f, "  and %zu more refusals\n", d->omitted);
}

json_t *al_refusal_json(const struct al_refusal *r)
{
	return json_pack("{s:o, s:o, s:o, s:o, s:o}", "task", al_json_text(r->task), "asked",
			 al_json_text(r->asked), "bound", al_json_text(r->bound), "operator_path",
			 al_json_text(r->operator_path), "message", al_json_text(r->message));
}

/* Every string from a task, a flag or a host path through al_json_text():
 * jansson refuses what is not UTF-8, and json_pack() would then leave the
 * entry (or the whole decision) out. */
json_t *al_decision_json(const struct al_decision *d)
{
	json_t *decisions = json_array(), *refused = json_array();

	for (size_t i = 0; i < d->n_explain; i++) {
		const struct al_explain *e = &d->explain[i];
		json_array_append_new(
		    decisions,
		    json_pack("{s:o, s:o, s:s, s:o, s:o}", "what", al_json_text(e->what), "value",
			      al_json_text(e->value), "from", al_origin_name(e->from), "task",
			      al_json_text(e->task), "bound", al_json_text(e->bound)));
	}
	for (size_t i = 0; i < d->n_refused; i++)
		json_array_append_new(refused, al_refusal_json(&d->refused[i]));
	return json_pack("{s:{s:o, s:o}, s:o, s:o, s:o, s:I}", "operator_policy", "file",
			 al_json_text(d->op ? d->op->file : NULL), "sha256",
			 al_json_text(d->op ? d->op->sha256 : NULL), "profile",
			 al_json_text(d->profile_name), "decisions", decisions, "refused", refused,
			 "omitted", (json_int_t)d->omitted);
}

void al_decision_clear(struct al_decision *d)
{
	for (size_t i = 0; i < d->n_explain; i++)
		engine_explain_clear(&d->explain[i]);
	free(d->explain);
	for (size_t i = 0; i < d->n_refused; i++) {
		struct al_refusal *r = &d->refused[i];
		free(r->task);
		free(r->asked);
		free(r->bound);
		free(r->operator_path);
		free(r->message);
	}
	free(d->refused);
	free(d->profile_name);
	*d = (struct al_decision){0};
}

json_t *al_engine_decider_input(const struct al_decision *d, const struct al_plan *p,
				const char *run_id)
{
	json_t *argv = json_array(), *mounts = json_array(), *env = json_array();
	json_t *allow = json_array(), *hosts = json_object(), *limits;
	json_t *copy_in = json_array(), *copy_out = json_array();

	for (size_t i = 0; i < p->n_copy_in; i++)
		json_array_append_new(copy_in, json_pack("{s:o, s:o}", "host",
							 al_json_text(p->copy_in[i].host), "path",
							 al_json_text(p->copy_in[i].path)));
	for (size_t i = 0; i < p->n_copy_out; i++)
		json_array_append_new(
		    copy_out,
		    json_pack("{s:o, s:o}", "path", al_json_text(p->copy_out[i].path), "host",
			      al_json_text(p->copy_out[i].hostreal ? p->copy_out[i].hostreal
								   : p->copy_out[i].hostdir)));
	for (size_t i = 0; p->argv && p->argv[i]; i++)
		json_array_append_new(argv, al_json_text(p->argv[i]));
	for (size_t i = 0; i < p->n_fs; i++) {
		const struct al_fs_entry *e = &p->fs[i];
		bool sys = strncmp(e->what, "system ", 7) == 0;
		if (e->kind != AL_FS_HOST ||
		    !(sys || strncmp(e->what, "ro ", 3) == 0 || strncmp(e->what, "rw ", 3) == 0))
			continue;
		json_array_append_new(mounts,
				      json_pack("{s:o, s:o, s:s}", "host", al_json_text(e->source),
						"path", al_json_text(e->path), "mode",
						sys			  ? "system"
						: e->access & AL_FS_WRITE ? "rw"
									  : "ro"));
	}
	for (size_t i = 0; p->envp && p->envp[i]; i++) {
		_cleanup_free_ char *name = strndup(p->envp[i], strcspn(p->envp[i], "="));
		json_array_append_new(env, al_json_text(name));
	}
	for (size_t i = 0; p->gateway && p->allow_text && p->allow_text[i]; i++)
		json_array_append_new(allow, al_json_text(p->allow_text[i]));
	for (size_t i = 0; i < p->n_hosts; i++) {
		char addr[INET6_ADDRSTRLEN];
		struct al_host h = {.kind = AL_HOST_IPV6, .addr = p->hosts[i].addr};
		al_addr_format(&h.addr, addr, sizeof(addr));
		json_object_set_new(hosts, p->hosts[i].name, json_string(addr));
	}
	limits = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "timeout_ms",
			   (json_int_t)p->timeout_ms, "memory_bytes", (json_int_t)p->memory_bytes,
			   "pids", (json_int_t)p->pids, "cpus_milli", (json_int_t)p->cpus_milli,
			   "cpu_time_ms", (json_int_t)p->cpu_time_ms, "output_bytes",
			   (json_int_t)p->output_bytes, "scratch_bytes",
			   (json_int_t)p->scratch_bytes, "open_files", (json_int_t)p->open_files,
			   "file_size_bytes", (json_int_t)p->file_size);
	return json_pack("{s:s?, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:{s:o, s:o, s:b}, s:b}",
			 "run", run_id, "profile", al_json_text(d->profile_name), "command", argv,
			 "backend", al_json_text(p->backend), "mounts", mounts, "copy_in", copy_in,
			 "copy_out", copy_out, "env", env, "limits", limits, "network", "allow",
			 allow, "hosts", hosts, "gateway", p->gateway, "tty", p->tty);
}

/* The answer's "network": {"allow": [...]}: the task's rules it does not
 * list are dropped. */
static int narrow_rules(struct al_decision *d, struct al_policy *task, const json_t *net,
			const char *decider, bool *changed)
{
	const json_t *list = json_object_get(net, "allow");
	char **kept = NULL;

	if (!json_is_object(net) || !json_is_array(list)) {
		al_engine_refuse(d, "(decider)", "network.allow", NULL,
				 "%s: the answer's \"network\" is not {\"allow\": [rules]}",
				 decider);
		return -EPERM;
	}
	for (size_t i = 0; task->net_allow && task->net_allow[i]; i++) {
		bool listed = false;
		size_t j;
		json_t *e;
		json_array_foreach(list, j, e) listed |=
		    json_is_string(e) && strcmp(json_string_value(e), task->net_allow[i]) == 0;
		if (listed) {
			al_strv_push(&kept, task->net_allow[i]);
			continue;
		}
		_cleanup_free_ char *what = xasprintf("network.allow %s", task->net_allow[i]);
		engine_explain(d, what, "(dropped)", AL_FROM_DECIDER, NULL,
			       xasprintf("%s: network.allow", decider));
		*changed = true;
	}
	al_strv_free(task->net_allow);
	task->net_allow = kept;
	return 0;
}

/* The answer's "limits": {KEY: VALUE}, each as the task policy writes it
 * (a number of bytes, milliseconds, thousandths of a CPU, or a count). */
static int narrow_limits(struct al_decision *d, struct al_policy *task, const json_t *lim,
			 const char *decider, bool *changed)
{
	const char *key;
	json_t *v;

	if (!json_is_object(lim)) {
		al_engine_refuse(d, "(decider)", "limits", NULL,
				 "%s: the answer's \"limits\" is not an object", decider);
		return -EPERM;
	}
	json_object_foreach((json_t *)lim, key, v)
	{
		const struct al_limit_def *ld = NULL;
		for (size_t i = 0; i < AL_OPL_COUNT; i++)
			if (strcmp(al_limit_defs[i].section, "limits") == 0 &&
			    strcmp(al_limit_defs[i].key, key) == 0)
				ld = &al_limit_defs[i];
		if (!ld || !json_is_integer(v) || json_integer_value(v) <= 0) {
			_cleanup_free_ char *k = clean(key, 64);
			al_engine_refuse(d, "(decider)", "limits", NULL,
					 "%s: the answer's limits.%s is not a known limit with a "
					 "positive whole number (bytes, ms, thousandths of a CPU)",
					 decider, k);
			return -EPERM;
		}
		uint64_t *f = al_limit_field(task, ld), nv = json_integer_value(v);
		/* Unset is airlock's own default (the engine left it only
		 * where that is within the ceiling): never raised past it. */
		uint64_t cur = *f ? *f : ld->builtin;
		if (!*f && ld->offset == offsetof(struct al_policy, copy_out_bytes))
			cur = task->scratch_bytes ? task->scratch_bytes : AL_DEFAULT_SCRATCH_BYTES;
		if (cur && nv >= cur)
			continue; /* never raised */
		if (ld->min && nv < ld->min)
			nv = ld->min;
		*f = nv;
		*changed = true;
		char val[48], what[64];
		al_limit_format(ld, nv, val, sizeof(val));
		snprintf(what, sizeof(what), "limits.%s", ld->key);
		engine_explain(d, what, val, AL_FROM_DECIDER, NULL,
			       xasprintf("%s: limits.%s", decider, ld->key));
	}
	return 0;
}

int al_engine_apply_decider(struct al_decision *d, struct al_policy *task, const json_t *result,
			    const char *decider)
{
	bool changed = false;
	const json_t *v;

	if (json_is_true(result))
		return 0;
	if (json_is_false(result)) {
		al_engine_refuse(d, "(decider)", "allow", NULL, "%s said no (result false)",
				 decider);
		return -EPERM;
	}
	if (!json_is_object(result) || !json_is_boolean(json_object_get(result, "allow"))) {
		al_engine_refuse(d, "(decider)", "allow", NULL,
				 "%s: the answer is neither true, false nor an object with "
				 "\"allow\": true/false (got %s)",
				 decider,
				 result ? (json_is_object(result) ? "an object without a "
								    "boolean \"allow\""
								  : "another type")
					: "nothing");
		return -EPERM;
	}
	if (!json_is_true(json_object_get(result, "allow"))) {
		const json_t *reasons = json_object_get(result, "reasons");
		size_t i, n = 0;
		json_t *e;
		if (json_is_array(reasons))
			json_array_foreach(reasons, i, e)
			{
				if (!json_is_string(e) || n++ >= DECIDER_REASONS_MAX)
					continue;
				_cleanup_free_ char *s =
				    clean(json_string_value(e), DECIDER_REASON_MAX);
				al_engine_refuse(d, "(decider)", "allow", NULL, "%s said no: %s",
						 decider, s);
			}
		const json_t *one = json_object_get(result, "reason");
		if (json_is_string(one) && n++ < DECIDER_REASONS_MAX) {
			_cleanup_free_ char *t = clean(json_string_value(one), DECIDER_REASON_MAX);
			al_engine_refuse(d, "(decider)", "allow", NULL, "%s said no: %s", decider,
					 t);
		}
		if (n == 0)
			al_engine_refuse(d, "(decider)", "allow", NULL,
					 "%s said no (no reason given)", decider);
		return -EPERM;
	}
	if ((v = json_object_get(result, "network")) &&
	    narrow_rules(d, task, v, decider, &changed) < 0)
		return -EPERM;
	if ((v = json_object_get(result, "limits")) &&
	    narrow_limits(d, task, v, decider, &changed) < 0)
		return -EPERM;
	return changed ? 1 : 0;
}
