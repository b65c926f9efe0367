/* The MCP server's tools: their input and output schemas (tools/list),
 * the arguments checked against the input schema itself (so what the
 * schema says and what a call accepts cannot drift apart), the dispatch
 * of tools/call, and the session's one sandbox. */
#include "mcp/internal.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "policy/json.h"

#define TIMEOUT_DESC                                                                               \
	"seconds before it is stopped (reason \"timeout\"); above 0, at most 31536000; "           \
	"default 60"

/* JSON Schema of a number of seconds the daemon takes. */
static json_t *seconds_schema(void)
{
	return json_pack("{s:s, s:i, s:i, s:s}", "type", "number", "exclusiveMinimum", 0, "maximum",
			 31536000, "description", TIMEOUT_DESC);
}

static json_t *path_schema(const char *desc)
{
	return json_pack("{s:s, s:i, s:s}", "type", "string", "minLength", 1, "description", desc);
}

static json_t *encoding_schema(const char *desc)
{
	return json_pack("{s:s, s:[s,s], s:s}", "type", "string", "enum", "utf-8", "base64",
			 "description", desc);
}

/* An object schema with no other properties; takes props and required. */
static json_t *object_schema(json_t *props, json_t *required)
{
	return json_pack("{s:s, s:o, s:o, s:b}", "type", "object", "properties", props, "required",
			 required, "additionalProperties", false);
}

/* What every run's result holds (run_code adds value, error, restarted). */
static json_t *run_output_props(void)
{
	return json_pack(
	    "{s:{s:s}, s:{s:s}, s:{s:[s,s]}, s:{s:s, s:s}, s:{s:s}, s:{s:s, s:{s:s}, s:s}}",
	    "stdout", "type", "string", "stderr", "type", "string", "exit_code", "type", "integer",
	    "null", "reason", "type", "string", "description",
	    "how it ended: exited, signaled, timeout, memory, output, killed, exec-failed (a "
	    "command); ok, error, timeout, memory, output, killed, exited, protocol (python and "
	    "node code)",
	    "duration_ms", "type", "number", "denials", "type", "array", "items", "type", "string",
	    "description", "what the sandbox refused while it ran, one line each");
}

static json_t *tool(const char *name, const char *desc, json_t *input, json_t *output)
{
	return json_pack("{s:s, s:s, s:o, s:o}", "name", name, "description", desc, "inputSchema",
			 input, "outputSchema", output);
}

json_t *mcp_tools_list(void)
{
	json_t *code_out = run_output_props(), *cmd_out = run_output_props();

	json_object_set_new(code_out, "language", json_pack("{s:s}", "type", "string"));
	json_object_set_new(code_out, "value", json_pack("{s:[s,s]}", "type", "string", "null"));
	json_object_set_new(code_out, "error", json_pack("{s:[s,s]}", "type", "object", "null"));
	json_object_set_new(code_out, "restarted", json_pack("{s:s}", "type", "boolean"));
	json_object_set_new(cmd_out, "command", json_pack("{s:s}", "type", "string"));

	json_t *tools = json_array();
	json_array_append_new(
	    tools,
	    tool("run_code",
		 "Run code in this session's sandbox. python and node keep their variables, "
		 "imports and definitions between calls (one interpreter per language for the "
		 "session); the value of the last expression is returned. bash runs each call "
		 "in a new bash -c. Files in /work persist between calls.",
		 object_schema(json_pack("{s:{s:s, s:[s,s,s]}, s:{s:s}, s:o}", "language", "type",
					 "string", "enum", "python", "node", "bash", "code", "type",
					 "string", "timeout", seconds_schema()),
			       json_pack("[s,s]", "language", "code")),
		 json_pack("{s:s, s:o, s:[s,s,s,s]}", "type", "object", "properties", code_out,
			   "required", "language", "stdout", "stderr", "reason")));
	json_array_append_new(
	    tools, tool("run_command",
			"Run a shell command (bash -c) in this session's sandbox and wait for it; "
			"its output, exit code, how it ended and what was denied.",
			object_schema(json_pack("{s:{s:s, s:i}, s:o, s:o}", "command", "type",
						"string", "minLength", 1, "cwd",
						path_schema("an absolute directory in the sandbox "
							    "(default /work)"),
						"timeout", seconds_schema()),
				      json_pack("[s]", "command")),
			json_pack("{s:s, s:o, s:[s,s,s,s]}", "type", "object", "properties",
				  cmd_out, "required", "command", "stdout", "stderr", "reason")));
	json_array_append_new(
	    tools,
	    tool("write_file",
		 "Write a file in the sandbox (under /work or /tmp), making its directories.",
		 object_schema(json_pack("{s:o, s:{s:s}, s:o}", "path",
					 path_schema("an absolute path in the sandbox"), "content",
					 "type", "string", "encoding",
					 encoding_schema("how content is given (default utf-8)")),
			       json_pack("[s,s]", "path", "content")),
		 json_pack("{s:s, s:{s:{s:s}, s:{s:s}}, s:[s,s]}", "type", "object", "properties",
			   "path", "type", "string", "size", "type", "integer", "required", "path",
			   "size")));
	json_array_append_new(
	    tools,
	    tool(
		"read_file", "Read a file of the sandbox.",
		object_schema(json_pack("{s:o, s:o}", "path",
					path_schema("an absolute path in the sandbox"), "encoding",
					encoding_schema("how to return the content (default utf-8; "
							"base64 for bytes that are not UTF-8)")),
			      json_pack("[s]", "path")),
		json_pack("{s:s, s:{s:{s:s}, s:{s:s}, s:{s:s}, s:{s:s}}, s:[s,s,s,s]}", "type",
			  "object", "properties", "path", "type", "string", "encoding", "type",
			  "string", "content", "type", "string", "size", "type", "integer",
			  "required", "path", "encoding", "content", "size")));
	json_array_append_new(
	    tools,
	    tool("list_files", "List a directory of the sandbox (links are listed, not followed).",
		 object_schema(json_pack("{s:o}", "path",
					 path_schema("an absolute directory (default /work)")),
			       json_array()),
		 json_pack("{s:s, s:{s:{s:s}, s:{s:s, s:{s:s}}}, s:[s,s]}", "type", "object",
			   "properties", "path", "type", "string", "entries", "type", "array",
			   "items", "type", "object", "required", "path", "entries")));
	return json_pack("{s:o}", "tools", tools);
}

static bool type_matches(const char *type, json_t *v)
{
	if (strcmp(type, "string") == 0)
		return json_is_string(v);
	if (strcmp(type, "number") == 0)
		return json_is_number(v);
	if (strcmp(type, "integer") == 0)
		return json_is_integer(v) ||
		       (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)));
	if (strcmp(type, "boolean") == 0)
		return json_is_boolean(v);
	if (strcmp(type, "object") == 0)
		return json_is_object(v);
	if (strcmp(type, "array") == 0)
		return json_is_array(v);
	return json_is_null(v);
}

/* One argument against its property schema (the subset our schemas use:
 * type, enum, minLength, exclusiveMinimum, maximum). NULL when it fits,
 * else what is wrong, malloc'd. */
static char *check_value(const char *name, json_t *schema, json_t *v)
{
	const char *type = json_string_value(json_object_get(schema, "type"));
	json_t *e;

	if (type && !type_matches(type, v))
		return xasprintf("argument \"%s\": expected %s%s, got %s", name,
				 strcmp(type, "integer") == 0 ? "an " : "a ", type,
				 al_json_type_name(v));
	if ((e = json_object_get(schema, "enum"))) {
		size_t i;
		json_t *x;
		json_array_foreach(e, i, x)
		{
			if (json_equal(x, v))
				return NULL;
		}
		char **names = NULL;
		json_array_foreach(e, i, x) al_strv_push(&names, json_string_value(x));
		char *list = al_strv_join(names, ", ");
		char *msg = xasprintf("argument \"%s\": \"%s\" is not one of %s", name,
				      json_string_value(v), list);
		free(list);
		al_strv_free(names);
		return msg;
	}
	if ((e = json_object_get(schema, "minLength")) && json_is_string(v) &&
	    json_string_length(v) < (size_t)json_integer_value(e))
		return xasprintf("argument \"%s\": must not be empty", name);
	if ((e = json_object_get(schema, "exclusiveMinimum")) &&
	    json_number_value(v) <= json_number_value(e))
		return xasprintf("argument \"%s\": must be above %g", name, json_number_value(e));
	if ((e = json_object_get(schema, "maximum")) && json_number_value(v) > json_number_value(e))
		return xasprintf("argument \"%s\": must be at most %g", name, json_number_value(e));
	return NULL;
}

/* The arguments against the tool's input schema: each required one
 * present, each known one of its schema, no other. */
static char *check_args(const char *tool, json_t *schema, json_t *args)
{
	json_t *props = json_object_get(schema, "properties"), *v;
	const char *key;
	size_t i;

	json_array_foreach(json_object_get(schema, "required"), i, v)
	{
		if (!json_object_get(args, json_string_value(v)))
			return xasprintf("missing argument \"%s\" (%s needs it)",
					 json_string_value(v), tool);
	}
	json_object_foreach(args, key, v)
	{
		json_t *p = json_object_get(props, key);
		if (!p) {
			char **names = NULL;
			const char *k;
			json_t *x;
			json_object_foreach(props, k, x) al_strv_push(&names, k);
			char *list = al_strv_join(names, ", ");
			char *msg =
			    xasprintf("unknown argument \"%s\" (%s takes %s)", key, tool, list);
			free(list);
			al_strv_free(names);
			return msg;
		}
		char *msg = check_value(key, p, v);
		if (msg)
			return msg;
	}
	return NULL;
}

/* The daemon's caps (src/serve/serve.h: AL_SERVE_BODY_MAX, a request's
 * JSON body; AL_SERVE_FILE_MAX, a file): an argument over them is named
 * here, not left to the daemon's 413 about "the body". A command or code
 * just under the cap whose JSON escaping takes it over still gets that
 * 413. */
#define DAEMON_BODY_MAX (1u << 20)
#define DAEMON_FILE_MAX (32u << 20)
#define ARG_TEXT_MAX	(DAEMON_BODY_MAX - 4096)

/* What the schema cannot say: paths are absolute, base64 content is
 * base64, nothing is over the daemon's caps. */
static char *check_meaning(json_t *args)
{
	for (const char **k = (const char *[]){"command", "code", NULL}; *k; k++) {
		json_t *v = json_object_get(args, *k);
		if (json_is_string(v) && json_string_length(v) > ARG_TEXT_MAX)
			return xasprintf("argument \"%s\": %zu bytes, over %u (the daemon takes a "
					 "request of at most 1 MiB): write it with write_file and "
					 "run the file",
					 *k, json_string_length(v), ARG_TEXT_MAX);
	}
	for (const char **k = (const char *[]){"path", "cwd", NULL}; *k; k++) {
		const char *v = json_string_value(json_object_get(args, *k));
		if (v && v[0] != '/')
			return xasprintf("argument \"%s\": \"%s\" is not an absolute path", *k, v);
	}
	json_t *content = json_object_get(args, "content");
	const char *enc = json_string_value(json_object_get(args, "encoding"));
	size_t n = 0;
	if (content && enc && strcmp(enc, "base64") == 0) {
		char *d =
		    mcp_base64_decode(json_string_value(content), json_string_length(content), &n);
		if (!d)
			return xstrdup("argument \"content\": not base64 (RFC 4648, padded, no "
				       "spaces)");
		free(d);
	} else if (content) {
		n = json_string_length(content);
	}
	if (content && n > DAEMON_FILE_MAX)
		return xasprintf("argument \"content\": %zu bytes, over %u (the most a file the "
				 "daemon writes may hold)",
				 n, DAEMON_FILE_MAX);
	return NULL;
}

int mcp_tools_call(struct mcp *m, const char *name, json_t *args, json_t **result, char **msg)
{
	static const struct {
		const char *name;
		json_t *(*fn)(struct mcp *, json_t *);
	} fns[] = {
	    {"run_code", mcp_run_code},	    {"run_command", mcp_run_command},
	    {"write_file", mcp_write_file}, {"read_file", mcp_read_file},
	    {"list_files", mcp_list_files},
	};
	json_t *list = mcp_tools_list(), *t, *schema = NULL;
	size_t i;

	json_array_foreach(json_object_get(list, "tools"), i, t)
	{
		if (strcmp(json_string_value(json_object_get(t, "name")), name) == 0)
			schema = json_object_get(t, "inputSchema");
	}
	if (!schema) {
		json_decref(list);
		*msg = xasprintf("unknown tool \"%s\" (run_code, run_command, write_file, "
				 "read_file, list_files)",
				 name);
		return MCP_INVALID_PARAMS;
	}
	*msg = check_args(name, schema, args);
	json_decref(list);
	if (!*msg)
		*msg = check_meaning(args);
	if (*msg)
		return MCP_INVALID_PARAMS;
	for (i = 0; i < sizeof(fns) / sizeof(fns[0]); i++)
		if (strcmp(fns[i].name, name) == 0)
			*result = fns[i].fn(m, args);
	return 0;
}

char *mcp_text_escape(const char *s, size_t n)
{
	char *out = xmalloc(4 * n + 1), *o = out;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '\\' || c == '\n' || c == '\r' || c == '\t') {
			*o++ = '\\';
			*o++ = c == '\n' ? 'n' : c == '\r' ? 'r' : c == '\t' ? 't' : '\\';
		} else if (c < 0x20 || c == 0x7f) {
			o += sprintf(o, "\\x%02x", c);
		} else {
			*o++ = (char)c;
		}
	}
	*o = '\0';
	return out;
}

void mcp_text_append(char **text, const char *fmt, ...)
{
	va_list ap, ap2;
	size_t n = strlen(*text);

	/* In place (realloc), not a new copy of all of *text each time. */
	va_start(ap, fmt);
	va_copy(ap2, ap);
	int k = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (k < 0)
		k = 0;
	*text = xrealloc(*text, n + (size_t)k + 1);
	vsnprintf(*text + n, (size_t)k + 1, fmt, ap2);
	va_end(ap2);
}

/* The start of v[0..n) as the text shows it, at most MCP_TEXT_SECTION_MAX
 * bytes: each control character but newline and tab written as \xNN, each
 * C1 control (U+0080..U+009F, two bytes in UTF-8) as \u00NN, cut on a
 * character's start. *used: how many bytes of v it shows. */
static char *show_controls(const char *v, size_t n, size_t *used)
{
	char *out = xmalloc(MCP_TEXT_SECTION_MAX + 1), *o = out;
	size_t i = 0;

	while (i < n) {
		unsigned char c = (unsigned char)v[i];
		bool control = (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f;
		bool c1 = c == 0xc2 && i + 1 < n && (unsigned char)v[i + 1] >= 0x80 &&
			  (unsigned char)v[i + 1] <= 0x9f;
		/* What this character takes shown: stop before one that does
		 * not fit whole. A lead byte counts its whole character, so a
		 * continuation byte of valid UTF-8 always fits (the check stops
		 * only a stray one). */
		size_t need = control	  ? 4
			      : c1	  ? 6
			      : c >= 0xf0 ? 4
			      : c >= 0xe0 ? 3
			      : c >= 0xc0 ? 2
					  : 1;
		if ((size_t)(o - out) + need > MCP_TEXT_SECTION_MAX)
			break;
		if (control) {
			o += sprintf(o, "\\x%02x", c);
		} else if (c1) {
			o += sprintf(o, "\\u%04x", (unsigned char)v[++i]);
		} else {
			*o++ = (char)c;
		}
		i++;
	}
	*o = '\0';
	*used = i;
	return out;
}

void mcp_text_section(char **text, const char *name, const char *field, const char *v, size_t n,
		      bool base64)
{
	size_t shown;

	if (!v || n == 0)
		return;
	/* Control characters shown, not sent: the text reaches the model and
	 * often a person's terminal (an MCP host's transcript), where
	 * sandboxed code's escape sequences would act, and a NUL would end it
	 * early. structuredContent keeps the bytes as they were. */
	char *shown_text = show_controls(v, n, &shown);
	mcp_text_append(text, "--- %s%s\n%s%s", name, base64 ? " (base64)" : "", shown_text,
			shown > 0 && v[shown - 1] == '\n' ? "" : "\n");
	free(shown_text);
	if (shown < n)
		mcp_text_append(text,
				"[cut: the first %zu of %zu bytes; structuredContent.%s has all]\n",
				shown, n, field);
}

json_t *mcp_result(json_t *structured, char *text, bool is_error)
{
	json_t *r = json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text", text,
			      "isError", is_error);
	if (structured)
		json_object_set_new(r, "structuredContent", structured);
	free(text);
	return r;
}

json_t *mcp_result_failed(const char *what, char *msg)
{
	char *text = xasprintf("%s: %s", what, msg);
	free(msg);
	/* No structuredContent: the tool's outputSchema describes what a run
	 * gives, and a client checks structured content against it. */
	return mcp_result(NULL, text, true);
}

const char *mcp_sandbox(struct mcp *m, char **msg)
{
	struct al_error err = {0};
	json_t *ans = NULL;
	int status;

	if (m->sandbox)
		return m->sandbox;
	if (mcp_daemon_json(m, "POST", "/v1/sandboxes", m->create, 180000, &status, &ans, &err) <
	    0) {
		*msg = xasprintf("the sandbox could not be made: %s", err.msg);
		return NULL;
	}
	const char *id = json_string_value(json_object_get(ans, "id"));
	if (status != 201 || !id) {
		char *e = mcp_daemon_error_text(status, ans);
		*msg = xasprintf("the sandbox could not be made: %s", e);
		free(e);
		json_decref(ans);
		return NULL;
	}
	m->sandbox = xstrdup(id);
	json_decref(ans);
	return m->sandbox;
}

void mcp_sandbox_lost(struct mcp *m)
{
	free(m->sandbox);
	m->sandbox = NULL;
	for (int i = 0; i < MCP_LANG_N; i++) {
		free(m->ctx[i]);
		m->ctx[i] = NULL;
	}
}
