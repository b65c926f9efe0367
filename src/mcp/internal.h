/* What the MCP server's files share (src/mcp). */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

#include "core/error.h"
#include "mcp/http.h"

/* JSON-RPC 2.0 error codes. */
#define MCP_PARSE_ERROR	     -32700
#define MCP_INVALID_REQUEST  -32600
#define MCP_METHOD_NOT_FOUND -32601
#define MCP_INVALID_PARAMS   -32602
#define MCP_INTERNAL_ERROR   -32603

enum mcp_lang {
	MCP_LANG_PYTHON,
	MCP_LANG_NODE,
	MCP_LANG_N
};

struct mcp {
	char *socket;	       /* the daemon's socket */
	json_t *create;	       /* POST /v1/sandboxes's body: the policy, the profile */
	char *sandbox;	       /* the session's sandbox, once made */
	char *ctx[MCP_LANG_N]; /* run_code's context per language, once made */
	pid_t daemon_pid;      /* the private daemon, or 0 */
	char *daemon_how;      /* how it ended, once found ended; else NULL */
	char *daemon_dir;      /* its 0700 directory, or NULL */
	volatile int *stop;    /* set by SIGTERM, SIGINT, SIGHUP */
};

/* A request to the daemon with a JSON body (or none) and a JSON answer:
 * *status and *ret (NULL when the answer is not JSON) are set on 0; a
 * negative errno when the daemon could not be asked (err says why). */
int mcp_daemon_json(struct mcp *m, const char *method, const char *target, json_t *body,
		    int timeout_ms, int *status, json_t **ret, struct al_error *err);

/* The same with raw bytes. */
int mcp_daemon_raw(struct mcp *m, const char *method, const char *target, const char *body,
		   size_t len, const char *ctype, int timeout_ms, struct al_mcp_http_answer *a,
		   struct al_error *err);

/* The daemon's error answer as one line ("error; reasons: ...; errors:
 * ..."), malloc'd. */
char *mcp_daemon_error_text(int status, json_t *answer);

/* tools.c: the tools/list answer, and one tools/call. On invalid
 * arguments mcp_tools_call returns MCP_INVALID_PARAMS with *msg (malloc'd)
 * naming the argument; otherwise 0 with *result, the CallToolResult. */
json_t *mcp_tools_list(void);
int mcp_tools_call(struct mcp *m, const char *name, json_t *args, json_t **result, char **msg);

/* tool-run.c: the tools that run something. */
json_t *mcp_run_code(struct mcp *m, json_t *args);
json_t *mcp_run_command(struct mcp *m, json_t *args);
/* tool-files.c; and strict base64 (padded, no other byte, the bits a
 * padded group leaves unused 0), NULL when s is not that. */
char *mcp_base64_decode(const char *s, size_t len, size_t *out_len);
json_t *mcp_write_file(struct mcp *m, json_t *args);
json_t *mcp_read_file(struct mcp *m, json_t *args);
json_t *mcp_list_files(struct mcp *m, json_t *args);

/* The text content shows at most this much of an output or a file; the
 * structured content has all of it. */
#define MCP_TEXT_SECTION_MAX (64 * 1024)
/* At most this many denial lines, or directory entries, in the text. */
#define MCP_TEXT_LINES_MAX 100

/* s (n bytes) for one line of the text content, malloc'd: each control
 * character (below 0x20, and 0x7f) as \n, \r, \t or \xNN, and a
 * backslash doubled, so that a file name or a denial line that sandboxed
 * code chose cannot start lines of its own (a fake entry, a fake
 * "ended:" line). */
char *mcp_text_escape(const char *s, size_t n);
/* "--- NAME\nV\n" appended to *text (nothing when n is 0), V's control
 * characters but newline and tab shown as \xNN (C1 ones as \u00NN): past
 * MCP_TEXT_SECTION_MAX bytes of that V is cut (on a character's start) and
 * the text says so, naming structuredContent.FIELD. */
void mcp_text_section(char **text, const char *name, const char *field, const char *v, size_t n,
		      bool base64);
/* *text with fmt appended. */
void mcp_text_append(char **text, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A CallToolResult: structured content, its summary as the text content,
 * and isError. Takes structured and text. */
json_t *mcp_result(json_t *structured, char *text, bool is_error);
/* A failure before anything ran (the daemon refused, could not be
 * reached): isError with the message as text and as "error". */
json_t *mcp_result_failed(const char *what, char *msg);

/* The session's sandbox, made at the first call (from the policy and the
 * profile); NULL with *msg (malloc'd) when it could not be. */
const char *mcp_sandbox(struct mcp *m, char **msg);
/* Forget the sandbox (it answered 404: its lifetime ended). */
void mcp_sandbox_lost(struct mcp *m);

/* daemon.c: start the private daemon on a socket in a new 0700 directory,
 * and wait until it answers; stop it and remove the directory. */
int mcp_daemon_start(struct mcp *m, struct al_error *err);
void mcp_daemon_stop(struct mcp *m);
/* How the private daemon ended ("killed by signal 9"), when it has (it
 * is reaped then); NULL while it runs, or with no private daemon. */
const char *mcp_daemon_ended(struct mcp *m);
/* When the private daemon has ended: a new one started, the session's
 * sandbox and contexts forgotten (they died with it), and *note
 * (malloc'd) saying so; else *note NULL. Negative when the new one could
 * not be started (err says why). */
int mcp_daemon_restart(struct mcp *m, char **note, struct al_error *err);

/* The same with raw bytes: body (len bytes of ctype, or NULL) and the
 * answer as it came. */
json_t *mcp_sandbox_raw(struct mcp *m, const char *what, const char *method, const char *suffix,
			const char *body, size_t len, const char *ctype, int timeout_ms,
			struct al_mcp_http_answer *a, char **note);

/* A request about the session's sandbox: target is "/v1/sandboxes/ID" +
 * suffix, the sandbox made first when there is none. When it answers 404
 * and the sandbox itself is gone (its lifetime ran out), a new one is made
 * and the request sent once more, and *note (malloc'd, else NULL) says so.
 * Returns NULL with *status and *ans set, or a failed CallToolResult
 * (what = the tool's name) when the daemon could not be asked. */
json_t *mcp_sandbox_call(struct mcp *m, const char *what, const char *method, const char *suffix,
			 json_t *body, int timeout_ms, int *status, json_t **ans, char **note);
