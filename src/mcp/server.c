/* The MCP server's JSON-RPC 2.0 loop over stdio: one message a line (at
 * most LINE_MAX_BYTES), initialize, ping, tools/list and tools/call
 * answered, notifications never answered, batches refused as the
 * 2025-06-18 revision (which removed them) has it, and the daemon asked
 * through the HTTP client (http.c). */
#include "mcp/mcp.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "core/log.h"
#include "core/util.h"
#include "mcp/internal.h"

#define LINE_MAX_BYTES	 (64u * 1024 * 1024)
#define PROTOCOL_VERSION "2025-06-18"

static const char *const known_versions[] = {"2025-06-18", "2025-03-26", "2024-11-05", NULL};

static volatile int stop_flag;

static void on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
}

int mcp_daemon_raw(struct mcp *m, const char *method, const char *target, const char *body,
		   size_t len, const char *ctype, int timeout_ms, struct al_mcp_http_answer *a,
		   struct al_error *err)
{
	return al_mcp_http_request(m->socket, method, target, body, len, ctype, timeout_ms, m->stop,
				   a, err);
}

int mcp_daemon_json(struct mcp *m, const char *method, const char *target, json_t *body,
		    int timeout_ms, int *status, json_t **ret, struct al_error *err)
{
	struct al_mcp_http_answer a = {0};
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	int r = mcp_daemon_raw(m, method, target, text, text ? strlen(text) : 0,
			       text ? "application/json" : NULL, timeout_ms, &a, err);

	free(text);
	*ret = NULL;
	if (r < 0)
		return r;
	*status = a.status;
	*ret = json_loadb(a.body, a.body_len, 0, NULL);
	al_mcp_http_answer_clear(&a);
	return 0;
}

/* "; NAME: a; b" of a JSON array of strings, appended to *s; not when
 * the list only repeats the error (same). */
static void append_list(char **s, const char *name, json_t *list, const char *same)
{
	json_t *v;
	size_t i;

	if (!json_is_array(list) || json_array_size(list) == 0)
		return;
	if (json_array_size(list) == 1 && same &&
	    strcmp(json_string_value(json_array_get(list, 0)) ?: "", same) == 0)
		return;
	char *t = xasprintf("%s; %s:", *s, name);
	free(*s);
	*s = t;
	json_array_foreach(list, i, v)
	{
		t = xasprintf("%s%s %s", *s, i ? ";" : "",
			      json_is_string(v) ? json_string_value(v) : "?");
		free(*s);
		*s = t;
	}
}

char *mcp_daemon_error_text(int status, json_t *answer)
{
	const char *e = json_string_value(json_object_get(answer, "error"));
	char *s = xasprintf("%s (HTTP %d)", e ? e : "the daemon's answer was not JSON", status);

	append_list(&s, "reasons", json_object_get(answer, "reasons"), e);
	append_list(&s, "errors", json_object_get(answer, "errors"), e);
	return s;
}

/* One message on out_fd, a line. Returns -1 when stdout is gone. */
static int send_msg(int fd, json_t *msg)
{
	char *text = json_dumps(msg, JSON_COMPACT);
	size_t n = strlen(text), off = 0;

	json_decref(msg);
	text = xrealloc(text, n + 2);
	text[n] = '\n';
	n++;
	while (off < n) {
		ssize_t w = write(fd, text + off, n - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			free(text);
			return -1;
		}
		off += (size_t)w;
	}
	free(text);
	return 0;
}

static json_t *error_msg(json_t *id, int code, const char *message)
{
	return json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id ? id : json_null(),
			 "error", "code", code, "message", message);
}

static json_t *result_msg(json_t *id, json_t *result)
{
	return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", result);
}

static json_t *initialize(json_t *params, char **msg)
{
	const char *want = json_string_value(json_object_get(params, "protocolVersion"));
	const char *version = PROTOCOL_VERSION;

	if (!json_is_object(params) || !want) {
		*msg = xstrdup("initialize: params.protocolVersion (a string) is missing");
		return NULL;
	}
	for (const char *const *v = known_versions; *v; v++)
		if (strcmp(*v, want) == 0)
			version = *v;
	return json_pack("{s:s, s:{s:{s:b}}, s:{s:s, s:s}, s:s}", "protocolVersion", version,
			 "capabilities", "tools", "listChanged", false, "serverInfo", "name",
			 "airlock", "version", AL_VERSION, "instructions",
			 "Tools run code and commands in one airlock sandbox for this session: "
			 "its network, files and limits are the policy's. A result says what "
			 "ran, what it printed, how it ended and what the sandbox denied.");
}

/* One message from the client; the answer, or NULL for none. */
static json_t *handle(struct mcp *m, json_t *msg, bool *initialized)
{
	json_t *id = json_object_get(msg, "id");
	json_t *method = json_object_get(msg, "method");
	json_t *params = json_object_get(msg, "params");
	const char *name = json_string_value(method);
	char *emsg = NULL;
	json_t *r;

	if (!json_is_object(msg))
		return error_msg(NULL, MCP_INVALID_REQUEST, "a message must be a JSON object");
	/* An id is a string or an integer (MCP forbids null); a message
	 * without one is a notification, answered never. */
	bool valid_id = json_is_string(id) || json_is_integer(id);
	if (id && !valid_id)
		return error_msg(NULL, MCP_INVALID_REQUEST,
				 "\"id\" must be a string or an integer");
	if (!json_is_string(json_object_get(msg, "jsonrpc")) ||
	    strcmp(json_string_value(json_object_get(msg, "jsonrpc")), "2.0") != 0)
		return id ? error_msg(id, MCP_INVALID_REQUEST, "\"jsonrpc\" must be \"2.0\"")
			  : NULL;
	if (!name) {
		/* A response from the client (we send no requests) or junk. */
		if (json_object_get(msg, "result") || json_object_get(msg, "error"))
			return NULL;
		return error_msg(id, MCP_INVALID_REQUEST, "\"method\" must be a string");
	}
	if (params && !json_is_object(params) && !json_is_array(params))
		return id ? error_msg(id, MCP_INVALID_REQUEST,
				      "\"params\" must be an object or an array")
			  : NULL;
	if (!id)
		return NULL; /* notifications/initialized, cancelled, ...: nothing to do */
	if (strcmp(name, "initialize") == 0) {
		r = initialize(params, &emsg);
		if (!r) {
			json_t *e = error_msg(id, MCP_INVALID_PARAMS, emsg);
			free(emsg);
			return e;
		}
		*initialized = true;
		return result_msg(id, r);
	}
	if (strcmp(name, "ping") == 0)
		return result_msg(id, json_object());
	if (!*initialized && (strcmp(name, "tools/list") == 0 || strcmp(name, "tools/call") == 0))
		return error_msg(id, MCP_INVALID_REQUEST,
				 "not initialized: send \"initialize\" first");
	if (strcmp(name, "tools/list") == 0)
		return result_msg(id, mcp_tools_list());
	if (strcmp(name, "tools/call") == 0) {
		const char *tool = json_string_value(json_object_get(params, "name"));
		json_t *args = json_object_get(params, "arguments");
		if (!json_is_object(params) || !tool)
			return error_msg(id, MCP_INVALID_PARAMS,
					 "tools/call: params.name (a string) is missing");
		if (args && !json_is_object(args))
			return error_msg(id, MCP_INVALID_PARAMS,
					 "tools/call: params.arguments must be an object");
		json_t *empty = json_object();
		int code = mcp_tools_call(m, tool, args ? args : empty, &r, &emsg);
		json_decref(empty);
		if (code) {
			json_t *e = error_msg(id, code, emsg);
			free(emsg);
			return e;
		}
		return result_msg(id, r);
	}
	char *t = xasprintf("method not found: %s", name);
	r = error_msg(id, MCP_METHOD_NOT_FOUND, t);
	free(t);
	return r;
}

/* One line from the client, answered on out_fd. */
static int line(struct mcp *m, int out_fd, const char *p, size_t n, bool *initialized)
{
	json_error_t jerr;
	json_t *msg, *ans;

	while (n > 0 && (p[n - 1] == '\r' || p[n - 1] == ' ' || p[n - 1] == '\t'))
		n--;
	if (n == 0)
		return 0;
	msg = json_loadb(p, n, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
	if (!msg) {
		char *t = xasprintf("parse error: %s (column %d)", jerr.text, jerr.column);
		ans = error_msg(NULL, MCP_PARSE_ERROR, t);
		free(t);
	} else if (json_is_array(msg)) {
		ans = error_msg(NULL, MCP_INVALID_REQUEST,
				"batches are not supported (protocol version 2025-06-18 "
				"removed JSON-RPC batching): send one message a line");
	} else {
		ans = handle(m, msg, initialized);
	}
	json_decref(msg);
	return ans ? send_msg(out_fd, ans) : 0;
}

/* Read in_fd to its end, a line at a time. */
static void serve_loop(struct mcp *m, int in_fd, int out_fd)
{
	size_t cap = 65536, len = 0, scanned = 0;
	char *buf = xmalloc(cap);
	bool initialized = false, skipping = false;

	while (!stop_flag) {
		char *nl = memchr(buf + scanned, '\n', len - scanned);
		if (nl) {
			size_t n = (size_t)(nl - buf);
			int r = skipping ? 0 : line(m, out_fd, buf, n, &initialized);
			skipping = false;
			memmove(buf, nl + 1, len - n - 1);
			len -= n + 1;
			scanned = 0;
			if (r < 0)
				break;
			continue;
		}
		scanned = len;
		if (len >= LINE_MAX_BYTES) {
			/* Answer once, then drop the rest of the line. */
			if (!skipping &&
			    send_msg(out_fd, error_msg(NULL, MCP_INVALID_REQUEST,
						       "message over 64 MiB: dropped")) < 0)
				break;
			skipping = true;
			len = scanned = 0;
		}
		if (cap - len < 65536) {
			cap *= 2;
			buf = xrealloc(buf, cap);
		}
		ssize_t r = read(in_fd, buf + len, cap - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			/* A last line without its newline is still a message. */
			if (len > 0 && !skipping)
				line(m, out_fd, buf, len, &initialized);
			break;
		}
		len += (size_t)r;
	}
	free(buf);
}

static int load_policy(struct mcp *m, const struct al_mcp_opts *o, struct al_error *err)
{
	json_error_t jerr;

	if (o->policy_file) {
		m->create = json_load_file(o->policy_file, JSON_REJECT_DUPLICATES, &jerr);
		if (!m->create && jerr.line < 1)
			return al_error_set(err, EINVAL, "mcp: --policy %s: %s", o->policy_file,
					    jerr.text);
		if (!m->create)
			return al_error_set(err, EINVAL, "mcp: --policy %s:%d:%d: %s",
					    o->policy_file, jerr.line, jerr.column, jerr.text);
		if (!json_is_object(m->create))
			return al_error_set(err, EINVAL, "mcp: --policy %s: expected a JSON object",
					    o->policy_file);
	} else {
		m->create = json_object();
	}
	if (o->profile)
		json_object_set_new(m->create, "profile", json_string(o->profile));
	return 0;
}

int al_mcp_serve(const struct al_mcp_opts *o, struct al_error *err)
{
	struct mcp m = {.stop = &stop_flag};
	struct sigaction sa = {.sa_handler = on_signal};
	int r;

	/* No SA_RESTART: a blocked read or poll returns, and the loop ends. */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	r = load_policy(&m, o, err);
	if (r == 0 && o->socket)
		m.socket = xstrdup(o->socket);
	else if (r == 0)
		r = mcp_daemon_start(&m, err);
	if (r == 0) {
		serve_loop(&m, o->in_fd, o->out_fd);
		/* (A private daemon that ended took its sandbox with it.) */
		if (m.sandbox && !mcp_daemon_ended(&m)) {
			/* Deleted even after a signal: a fresh flag for this one request. */
			struct al_error e = {0};
			json_t *ans = NULL;
			int status;
			char *target = xasprintf("/v1/sandboxes/%s", m.sandbox);
			m.stop = NULL;
			if (mcp_daemon_json(&m, "DELETE", target, NULL, 60000, &status, &ans, &e) <
			    0)
				al_warn("mcp: sandbox %s not deleted: %s", m.sandbox, e.msg);
			free(target);
			json_decref(ans);
		}
	}
	mcp_daemon_stop(&m);
	mcp_sandbox_lost(&m);
	free(m.daemon_how);
	json_decref(m.create);
	free(m.socket);
	return r;
}
