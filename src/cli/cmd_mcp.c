/* airlock mcp: the Model Context Protocol server over stdio (src/mcp).
 * Only the flags are read here. */
#include "cli.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "mcp/mcp.h"

static void usage(FILE *f)
{
	fprintf(f, "Usage: airlock mcp [--policy FILE] [--profile NAME] [--socket PATH]\n\n"
		   "Serve the Model Context Protocol (JSON-RPC 2.0, one message a line,\n"
		   "protocol version 2025-06-18) on stdin and stdout, for an MCP host to start.\n"
		   "Its tools run_code, run_command, write_file, read_file and list_files work\n"
		   "in one sandbox for the session, made at the first tool call and deleted\n"
		   "when stdin ends (docs/clients.md, \"MCP\"). Messages go to stderr.\n\n"
		   "Options:\n"
		   "  --policy FILE   the task policy of the sandbox (JSON, as `airlock run\n"
		   "                  --policy` reads it); default: airlock's defaults\n"
		   "  --profile NAME  the operator policy's profile to be held to\n"
		   "  --socket PATH   use the daemon (`airlock serve`) on this socket; without\n"
		   "                  it a private daemon is started for the session, in a\n"
		   "                  0700 temporary directory, and stopped at its end (started\n"
		   "                  anew, with a new sandbox, should it have ended)\n"
		   "  -h, --help      show this help\n");
}

int al_cmd_mcp(int argc, char **argv)
{
	static const struct option opts[] = {{"policy", required_argument, NULL, 'p'},
					     {"profile", required_argument, NULL, 'P'},
					     {"socket", required_argument, NULL, 's'},
					     {"help", no_argument, NULL, 'h'},
					     {0}};
	struct al_mcp_opts o = {.in_fd = STDIN_FILENO, .out_fd = STDOUT_FILENO};
	struct al_error err = {0};
	int c;

	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc + 1, argv - 1, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			o.policy_file = optarg;
			break;
		case 'P':
			o.profile = optarg;
			break;
		case 's':
			o.socket = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case ':':
			al_err("mcp: %s needs a value (see airlock mcp --help)", argv[optind - 2]);
			return 125;
		default:
			al_err("mcp: unknown option \"%s\" (see airlock mcp --help)",
			       argv[optind - 2]);
			return 125;
		}
	}
	if (optind - 1 < argc) {
		al_err("mcp: unexpected argument \"%s\" (see airlock mcp --help)",
		       argv[optind - 1]);
		return 125;
	}
	if (o.profile && !*o.profile) {
		al_err("mcp: --profile: expected a profile's name, got \"\"");
		return 125;
	}
	if (al_mcp_serve(&o, &err) < 0) {
		al_err("%s", err.msg);
		return 125;
	}
	return 0;
}
