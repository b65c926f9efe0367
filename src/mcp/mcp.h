/* airlock mcp: a Model Context Protocol server over stdio (JSON-RPC 2.0,
 * one message a line, protocol version 2025-06-18) whose tools run code in
 * one live sandbox of the daemon (docs/clients.md, "MCP"). */
#pragma once

#include "core/error.h"

struct al_mcp_opts {
	const char *policy_file; /* a task policy (JSON), or NULL for the defaults */
	const char *profile;	 /* the operator policy's profile, or NULL */
	const char *socket;	 /* a daemon's socket; NULL: start a private daemon */
	int in_fd, out_fd;	 /* the protocol's stdin and stdout */
};

/* Serve MCP until in_fd's end (or SIGTERM/SIGINT/SIGHUP), then delete the
 * session's sandbox and stop the private daemon. Returns 0, or a negative
 * errno with err set when the server could not start (the policy file,
 * the private daemon). */
int al_mcp_serve(const struct al_mcp_opts *opts, struct al_error *err);
