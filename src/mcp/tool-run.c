/* The tools that run something in the session's sandbox: run_command and
 * run_code (bash as a waited exec, python and node in a code context of
 * the daemon kept for the session), each result saying what ran, what it
 * printed, how it ended and what was denied. */
#include "mcp/internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

#define DEFAULT_TIMEOUT 60.0
/* The daemon answers a run by its timeout; this much more is allowed for
 * the answer itself before the HTTP client gives up. */
#define ANSWER_SLACK_MS 60000

json_t *mcp_sandbox_raw(struct mcp *m, const char *what, const char *method, const char *suffix,
			const char *body, size_t len, const char *ctype, int timeout_ms,
			struct al_mcp_http_answer *a, char **note)
{
	struct al_error err = {0};
	char *msg = NULL;

	/* A private daemon that ended took the sandbox with it: a new one. */
	if (mcp_daemon_restart(m, note, &err) < 0) {
		msg = xasprintf("%s; but the new daemon did not start: %s", *note, err.msg);
		free(*note);
		*note = NULL;
		return mcp_result_failed(what, msg);
	}
	for (int attempt = 0;; attempt++) {
		const char *id = mcp_sandbox(m, &msg);
		if (!id)
			return mcp_result_failed(what, msg);
		char *target = xasprintf("/v1/sandboxes/%s%s", id, suffix);
		int r = mcp_daemon_raw(m, method, target, body, len, ctype, timeout_ms, a, &err);
		free(target);
		if (r < 0 && mcp_daemon_ended(m))
			return mcp_result_failed(
			    what,
			    xasprintf("the private daemon (airlock serve) ended during the "
				      "call (%s), and the session's sandbox with it; the next "
				      "call starts new ones",
				      mcp_daemon_ended(m)));
		if (r < 0)
			return mcp_result_failed(what, xasprintf("the daemon: %s", err.msg));
		if (a->status != 404 || attempt > 0)
			return NULL;
		/* A 404: is it the sandbox that is gone, or what was named in it? */
		json_t *probe = NULL;
		int pstatus = 0;
		target = xasprintf("/v1/sandboxes/%s", id);
		r = mcp_daemon_json(m, "GET", target, NULL, 30000, &pstatus, &probe, &err);
		free(target);
		json_decref(probe);
		if (r < 0 || pstatus != 404)
			return NULL;
		al_mcp_http_answer_clear(a);
		mcp_sandbox_lost(m);
		free(*note);
		*note = xstrdup("the session's sandbox had ended (its lifetime ran out); a new one "
				"was made, and what the old one held is gone");
	}
}

json_t *mcp_sandbox_call(struct mcp *m, const char *what, const char *method, const char *suffix,
			 json_t *body, int timeout_ms, int *status, json_t **ans, char **note)
{
	struct al_mcp_http_answer a = {0};
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	json_t *res = mcp_sandbox_raw(m, what, method, suffix, text, text ? strlen(text) : 0,
				      text ? "application/json" : NULL, timeout_ms, &a, note);

	free(text);
	*ans = NULL;
	if (!res) {
		*status = a.status;
		*ans = json_loadb(a.body, a.body_len, 0, NULL);
	}
	al_mcp_http_answer_clear(&a);
	return res;
}

/* One audit line of a denial as a line a model can act on. */
static char *denial_text(json_t *ev)
{
	const char *event = json_string_value(json_object_get(ev, "event"));
	const char *reason = json_string_value(json_object_get(ev, "reason"));
	const char *name = json_string_value(json_object_get(ev, "name"));
	const char *decision = json_string_value(json_object_get(ev, "decision"));
	char *s;

	if (!event)
		event = "?";
	if (strcmp(event, "net.connect") == 0)
		s = xasprintf("%s: connection to %s:%lld",
			      decision && !strcmp(decision, "cut") ? "cut" : "denied",
			      name ? name : "?",
			      (long long)json_integer_value(json_object_get(ev, "port")));
	else if (strcmp(event, "net.dns") == 0)
		s = xasprintf("denied: DNS lookup of %s", name ? name : "?");
	else if (strcmp(event, "net.request") == 0)
		s = xasprintf("denied: %s request to %s:%lld%s",
			      json_string_value(json_object_get(ev, "method")) ?: "?",
			      json_string_value(json_object_get(ev, "host")) ?: "?",
			      (long long)json_integer_value(json_object_get(ev, "port")),
			      json_string_value(json_object_get(ev, "path")) ?: "");
	else if (strcmp(event, "syscall.denied") == 0)
		s = xasprintf("denied: system call %s",
			      json_string_value(json_object_get(ev, "syscall")) ?: "(unnamed)");
	else if (strcmp(event, "secret.misuse") == 0)
		s = xasprintf("denied: secret %s in the %s to %s",
			      json_string_value(json_object_get(ev, "secret")) ?: "?",
			      json_string_value(json_object_get(ev, "where")) ?: "?",
			      json_string_value(json_object_get(ev, "host")) ?: "?");
	else if (strcmp(event, "limit.hit") == 0)
		s = xasprintf("limit: %s", json_string_value(json_object_get(ev, "limit")) ?: "?");
	else
		s = xasprintf("denied: %s", event);
	if (reason) {
		char *t = xasprintf("%s (%s)", s, reason);
		free(s);
		s = t;
	}
	return s;
}

/* The daemon's denials as lines, into structured ("denials", all of
 * them) and text (the first MCP_TEXT_LINES_MAX, control characters
 * escaped: sandboxed code chooses the names in them). */
static void add_denials(json_t *structured, json_t *events, char **text)
{
	json_t *lines = json_array(), *ev;
	size_t i, n = json_array_size(events);

	json_array_foreach(events, i, ev)
	{
		char *line = denial_text(ev);
		json_array_append_new(lines, json_string(line));
		if (i < MCP_TEXT_LINES_MAX) {
			char *shown = mcp_text_escape(line, strlen(line));
			mcp_text_append(text, "%s\n", shown);
			free(shown);
		}
		free(line);
	}
	if (n > MCP_TEXT_LINES_MAX)
		mcp_text_append(text, "[%zu more denials; structuredContent.denials has all %zu]\n",
				n - MCP_TEXT_LINES_MAX, n);
	json_object_set_new(structured, "denials", lines);
}

/* The section of a string of ans (its field of the same name). */
static void add_section(char **text, const char *name, json_t *s, bool base64)
{
	mcp_text_section(text, name, name, json_string_value(s), json_string_length(s), base64);
}

/* from's key, or dflt (taken) when from has none. */
static json_t *copy_field(json_t *from, const char *key, json_t *dflt)
{
	json_t *v = json_object_get(from, key);

	if (!v)
		return dflt;
	json_decref(dflt);
	return json_incref(v);
}

/* A waited exec's answer as the tool's result. */
static json_t *exec_result(json_t *ans, const char *language, const char *what, char *note)
{
	json_t *st = json_object();
	const char *reason = json_string_value(json_object_get(ans, "reason")) ?: "?";
	json_t *code = json_object_get(ans, "exit_code");
	bool ok = strcmp(reason, "exited") == 0 && json_integer_value(code) == 0;
	char *text;

	if (language)
		json_object_set_new(st, "language", json_string(language));
	else
		json_object_set_new(st, "command", json_string(what));
	json_object_set_new(st, "stdout", copy_field(ans, "stdout", json_string("")));
	json_object_set_new(st, "stderr", copy_field(ans, "stderr", json_string("")));
	json_object_set_new(st, "exit_code",
			    json_is_integer(code) ? json_incref(code) : json_null());
	json_object_set_new(st, "reason", json_string(reason));
	json_object_set_new(st, "duration_ms", copy_field(ans, "duration_ms", json_integer(0)));
	for (const char **k = (const char *[]){"stdout_base64", "stderr_base64", "stdout_truncated",
					       "stderr_truncated", NULL};
	     *k; k++)
		if (json_is_true(json_object_get(ans, *k)))
			json_object_set_new(st, *k, json_true());
	if (language) {
		json_object_set_new(st, "value", json_null());
		json_object_set_new(st, "error", json_null());
		json_object_set_new(st, "restarted", json_false());
	}
	if (json_is_integer(code))
		text = xasprintf("%s%s%sran: bash -c %s\nended: %s, exit code %lld\n", note ?: "",
				 note ? "\n" : "", "", what, reason,
				 (long long)json_integer_value(code));
	else
		text = xasprintf("%s%sran: bash -c %s\nended: %s\n", note ?: "", note ? "\n" : "",
				 what, reason);
	add_section(&text, "stdout", json_object_get(ans, "stdout"),
		    json_is_true(json_object_get(ans, "stdout_base64")));
	add_section(&text, "stderr", json_object_get(ans, "stderr"),
		    json_is_true(json_object_get(ans, "stderr_base64")));
	add_denials(st, json_object_get(ans, "denials"), &text);
	free(note);
	return mcp_result(st, text, !ok);
}

/* A run "killed" while its sandbox ended (its lifetime ran out) says so:
 * "killed" alone does not tell the model why, nor that the next call gets
 * a new sandbox. note (taken) with that added, or as it was. */
static char *note_sandbox_end(struct mcp *m, json_t *ans, char *note)
{
	const char *reason = json_string_value(json_object_get(ans, "reason"));
	struct al_error err = {0};
	json_t *sb = NULL;
	int status = 0;

	if (!reason || strcmp(reason, "killed") != 0 || !m->sandbox)
		return note;
	char *target = xasprintf("/v1/sandboxes/%s", m->sandbox);
	int r = mcp_daemon_json(m, "GET", target, NULL, 30000, &status, &sb, &err);
	free(target);
	const char *state = json_string_value(json_object_get(sb, "state"));
	bool ended = r == 0 && (status == 404 || (state && strcmp(state, "ended") == 0));
	json_decref(sb);
	if (!ended)
		return note;
	char *t = xasprintf("%s%sthe session's sandbox ended during the run (its lifetime ran "
			    "out) and the run was killed with it; the next call makes a new "
			    "sandbox, without what this one held",
			    note ?: "", note ? "\n" : "");
	free(note);
	return t;
}

/* How long to wait for the answer to a run of timeout seconds. */
static int answer_ms(double timeout)
{
	double ms = timeout * 1000 + ANSWER_SLACK_MS;
	return ms > INT_MAX ? INT_MAX : (int)ms;
}

static double timeout_of(json_t *args)
{
	json_t *t = json_object_get(args, "timeout");
	return t ? json_number_value(t) : DEFAULT_TIMEOUT;
}

/* A waited exec of bash -c CMD. */
static json_t *run_bash(struct mcp *m, const char *tool, const char *cmd, json_t *cwd,
			double timeout, const char *language)
{
	json_t *body = json_pack("{s:[s,s,s], s:b, s:f}", "argv", "bash", "-c", cmd, "wait", true,
				 "timeout", timeout);
	json_t *ans = NULL, *res;
	char *note;
	int status;

	if (cwd)
		json_object_set(body, "cwd", cwd);
	res = mcp_sandbox_call(m, tool, "POST", "/exec", body, answer_ms(timeout), &status, &ans,
			       &note);
	json_decref(body);
	if (res) {
		free(note);
		return res;
	}
	if (status != 200) {
		res = mcp_result_failed(tool, mcp_daemon_error_text(status, ans));
		free(note);
	} else {
		res = exec_result(ans, language, cmd, note_sandbox_end(m, ans, note));
	}
	json_decref(ans);
	return res;
}

json_t *mcp_run_command(struct mcp *m, json_t *args)
{
	return run_bash(m, "run_command", json_string_value(json_object_get(args, "command")),
			json_object_get(args, "cwd"), timeout_of(args), NULL);
}

static const char *const lang_names[MCP_LANG_N] = {"python", "node"};

/* A context run's answer as the tool's result. */
static json_t *context_result(json_t *ans, const char *language, char *note)
{
	json_t *st = json_object(), *error = json_object_get(ans, "error");
	const char *reason = json_string_value(json_object_get(ans, "reason")) ?: "?";
	bool restarted = json_is_true(json_object_get(ans, "restarted"));
	bool ok = strcmp(reason, "ok") == 0 && !json_is_object(error);
	const char *rr = json_string_value(json_object_get(ans, "restart_reason"));
	char *text;

	json_object_set_new(st, "language", json_string(language));
	json_object_set_new(st, "stdout", copy_field(ans, "stdout", json_string("")));
	json_object_set_new(st, "stderr", copy_field(ans, "stderr", json_string("")));
	json_object_set_new(st, "exit_code", json_null());
	json_object_set_new(st, "reason", json_string(reason));
	json_object_set_new(st, "duration_ms", copy_field(ans, "duration_ms", json_integer(0)));
	json_object_set_new(st, "value", copy_field(ans, "value", json_null()));
	json_object_set_new(st, "error", json_is_object(error) ? json_incref(error) : json_null());
	json_object_set_new(st, "restarted", json_boolean(restarted));
	for (const char **k = (const char *[]){"stdout_truncated", "stderr_truncated", NULL}; *k;
	     k++)
		if (json_is_true(json_object_get(ans, *k)))
			json_object_set_new(st, *k, json_true());
	text = xasprintf("%s%sran: %s code in the session's %s interpreter\nended: %s\n",
			 note ?: "", note ? "\n" : "", language, language, reason);
	if (restarted) {
		char *t = xasprintf("%srestarted: the interpreter was restarted (%s): variables "
				    "from earlier calls are gone\n",
				    text, rr ?: reason);
		free(text);
		text = t;
	}
	add_section(&text, "stdout", json_object_get(ans, "stdout"), false);
	add_section(&text, "stderr", json_object_get(ans, "stderr"), false);
	add_section(&text, "value", json_object_get(ans, "value"), false);
	if (json_is_object(error)) {
		const char *tb = json_string_value(json_object_get(error, "traceback"));
		char *t =
		    xasprintf("%s--- error\n%s: %s\n%s", text,
			      json_string_value(json_object_get(error, "name")) ?: "Error",
			      json_string_value(json_object_get(error, "message")) ?: "", tb ?: "");
		free(text);
		text = t;
	}
	add_denials(st, json_object_get(ans, "denials"), &text);
	free(note);
	return mcp_result(st, text, !ok);
}

/* Keep the first note of a call's requests. */
static void keep_note(char **note, char *n)
{
	if (*note)
		free(n);
	else
		*note = n;
}

/* The session's context for language l, made when there is none. NULL
 * with *fail set when it could not be made. */
static const char *context(struct mcp *m, enum mcp_lang l, json_t **fail, char **note)
{
	json_t *ans = NULL, *body;
	int status;

	*fail = NULL;
	if (m->ctx[l])
		return m->ctx[l];
	body = json_pack("{s:s}", "language", lang_names[l]);
	*fail =
	    mcp_sandbox_call(m, "run_code", "POST", "/contexts", body, 60000, &status, &ans, note);
	json_decref(body);
	if (*fail)
		return NULL;
	const char *id = json_string_value(json_object_get(ans, "context_id"));
	if (status != 201 || !id)
		*fail = mcp_result_failed("run_code", mcp_daemon_error_text(status, ans));
	else
		m->ctx[l] = xstrdup(id);
	json_decref(ans);
	return m->ctx[l];
}

json_t *mcp_run_code(struct mcp *m, json_t *args)
{
	const char *language = json_string_value(json_object_get(args, "language"));
	const char *code = json_string_value(json_object_get(args, "code"));
	double timeout = timeout_of(args);
	enum mcp_lang l;

	if (strcmp(language, "bash") == 0)
		return run_bash(m, "run_code", code, NULL, timeout, "bash");
	l = strcmp(language, "python") == 0 ? MCP_LANG_PYTHON : MCP_LANG_NODE;
	json_t *body = json_pack("{s:s, s:f}", "code", code, "timeout", timeout);
	json_t *res = NULL, *ans = NULL;
	char *note = NULL, *n = NULL;
	int status = 0;
	/* A context gone (a 404: its sandbox was made anew, or it was
	 * deleted) is made again, once. */
	for (int attempt = 0; attempt < 2; attempt++) {
		const char *cid = context(m, l, &res, &n);
		keep_note(&note, n);
		if (!cid)
			break;
		char *suffix = xasprintf("/contexts/%s/run", cid);
		res = mcp_sandbox_call(m, "run_code", "POST", suffix, body, answer_ms(timeout),
				       &status, &ans, &n);
		keep_note(&note, n);
		free(suffix);
		if (res || status != 404 || attempt > 0)
			break;
		json_decref(ans);
		ans = NULL;
		free(m->ctx[l]);
		m->ctx[l] = NULL;
	}
	json_decref(body);
	if (!res && status != 200)
		res = mcp_result_failed("run_code", mcp_daemon_error_text(status, ans));
	else if (!res) {
		res = context_result(ans, language, note_sandbox_end(m, ans, note));
		note = NULL;
	}
	free(note);
	json_decref(ans);
	return res;
}
