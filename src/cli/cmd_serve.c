/* airlock serve: the daemon (src/serve). The static `airlock` binary does
 * not link libmicrohttpd (its constructor, and the TLS library it pulls
 * in, would cost every `airlock run`): it execs airlock-serve, found next
 * to itself (a build tree) or in the library directory, which is this
 * file built with AL_SERVE_BINARY, and hands it a descriptor of itself
 * (--session-exe-fd, not for users): the monitor execs that for each
 * session process (`airlock __session`). A static binary's pages are shared
 * by every session, where each airlock-serve relocates its own copy of the
 * shared libraries' data (about 800 KiB a session); and a descriptor is the
 * binary the daemon started with, even once a package upgrade replaced its
 * file. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: airlock serve --socket PATH [OPTIONS]\n\n"
		"Serve the HTTP API (/v1, docs/api.md) on a Unix socket: clients are known\n"
		"by their uid (peer credentials), and each request is held to the operator\n"
		"policy as `airlock run` holds it; its \"serve\" section maps identities to\n"
		"profiles (with no operator policy only uid 0 is served). Under systemd\n"
		"(airlock.socket), the socket is the one the socket unit passes\n"
		"(LISTEN_FDS), and --socket may be left out.\n\n"
		"Options:\n"
		"  --socket PATH           the Unix socket (made mode 0600; with socket\n"
		"                          activation, the path it must be bound to)\n"
		"  --socket-group NAME     make it 0660 and give it to group NAME (or the\n"
		"                          operator policy's serve.socket_group)\n"
		"  --listen ADDR:PORT      also listen on loopback TCP (127.0.0.0/8 or [::1]),\n"
		"                          clients known by bearer tokens (needs --token-file)\n"
		"  --token-file FILE       lines \"TOKEN IDENTITY\"; owned by airlock's user,\n"
		"                          mode 0600\n"
		"  --operator-policy FILE  the operator policy (else $AIRLOCK_OPERATOR_POLICY,\n"
		"                          else /etc/airlock/operator.json, as for run)\n"
		"  --max-sandboxes N       sandboxes at once, the warm pool's included (a\n"
		"                          create ends a held pool sandbox to make room);\n"
		"                          default 16; past it: 429\n"
		"  --max-sandboxes-per-identity N\n"
		"                          sandboxes at once of one uid or token, one-shot runs\n"
		"                          included (default 8, at most --max-sandboxes); past\n"
		"                          it: 429\n"
		"  --max-clients N         client connections at once (default 256); past it:\n"
		"                          503, and the connection is closed\n"
		"  --max-clients-per-identity N\n"
		"                          connections at once of one uid or token (default 64,\n"
		"                          at most --max-clients); past it: 429, closed\n"
		"  --client-timeout SEC    drop a client idle or stalled this long (default 30)\n"
		"  --request-timeout SEC   drop a client whose request (head and body) has not\n"
		"                          arrived whole this long after it began, however\n"
		"                          slowly it trickles (default: --client-timeout)\n"
		"  --no-landlock           start even where the kernel has no landlock (the\n"
		"                          HTTP front is then confined without it)\n"
		"  -h, --help              show this help\n");
}

#ifdef AL_SERVE_BINARY
#include "serve/serve.h"

static int number(const char *opt, const char *s, unsigned *ret)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);

	if (!*s || *end || v == 0 || v > 100000) {
		al_err("serve: %s \"%s\": expected a number from 1 to 100000", opt, s);
		return -1;
	}
	*ret = (unsigned)v;
	return 0;
}

/* --session-exe-fd N: the static airlock's descriptor of itself, kept
 * (close-on-exec, moved above the descriptors the daemon uses) for the
 * monitor to exec each session process with. */
static int session_exe_fd(const char *s, int *ret)
{
	char *end;
	long v = strtol(s, &end, 10);
	struct stat st;

	if (!*s || *end || v < 3 || v > 1024 || fstat((int)v, &st) < 0 || !S_ISREG(st.st_mode) ||
	    !(st.st_mode & S_IXUSR)) {
		al_err(
		    "serve: --session-exe-fd \"%s\": not an open descriptor of an executable file",
		    s);
		return -1;
	}
	*ret = fcntl((int)v, F_DUPFD_CLOEXEC, 64);
	if (*ret < 0) {
		al_err("serve: --session-exe-fd: %s", strerror(errno));
		return -1;
	}
	close((int)v);
	return 0;
}

int al_cmd_serve(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"socket", required_argument, NULL, 's'},
	    {"socket-group", required_argument, NULL, 'g'},
	    {"listen", required_argument, NULL, 'l'},
	    {"token-file", required_argument, NULL, 't'},
	    {"operator-policy", required_argument, NULL, 'o'},
	    {"max-sandboxes", required_argument, NULL, 'S'},
	    {"max-clients", required_argument, NULL, 'C'},
	    {"client-timeout", required_argument, NULL, 'T'},
	    {"request-timeout", required_argument, NULL, 'R'},
	    {"max-clients-per-identity", required_argument, NULL, 'I'},
	    {"max-sandboxes-per-identity", required_argument, NULL, 'P'},
	    {"no-landlock", no_argument, NULL, 'L'},
	    {"session-exe-fd", required_argument, NULL, 'E'},
	    {"help", no_argument, NULL, 'h'},
	    {0}};
	struct al_serve_config cfg = {.max_sandboxes = 16,
				      .max_clients = 256,
				      .client_timeout_s = 30,
				      .max_clients_per_identity = 64,
				      .max_sandboxes_per_identity = 8,
				      .exe = "/proc/self/exe",
				      .exe_fd = -1};
	struct al_error err = {0};
	int c;

	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc + 1, argv - 1, "h", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			cfg.socket_path = optarg;
			break;
		case 'g':
			cfg.socket_group = optarg;
			break;
		case 'l':
			cfg.listen = optarg;
			break;
		case 't':
			cfg.token_file = optarg;
			break;
		case 'o':
			cfg.operator_file = optarg;
			break;
		case 'S':
			if (number("--max-sandboxes", optarg, &cfg.max_sandboxes) < 0)
				return 125;
			break;
		case 'C':
			if (number("--max-clients", optarg, &cfg.max_clients) < 0)
				return 125;
			break;
		case 'T':
			if (number("--client-timeout", optarg, &cfg.client_timeout_s) < 0)
				return 125;
			break;
		case 'R':
			if (number("--request-timeout", optarg, &cfg.request_timeout_s) < 0)
				return 125;
			break;
		case 'I':
			if (number("--max-clients-per-identity", optarg,
				   &cfg.max_clients_per_identity) < 0)
				return 125;
			break;
		case 'P':
			if (number("--max-sandboxes-per-identity", optarg,
				   &cfg.max_sandboxes_per_identity) < 0)
				return 125;
			break;
		case 'L':
			cfg.no_landlock = true;
			break;
		case 'E':
			if (cfg.exe_fd >= 0 || session_exe_fd(optarg, &cfg.exe_fd) < 0)
				return 125;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case ':':
			al_err("serve: %s needs a value (see airlock serve --help)",
			       argv[optind - 2]);
			return 125;
		default:
			al_err("serve: unknown option \"%s\" (see airlock serve --help)",
			       argv[optind - 2]);
			return 125;
		}
	}
	if (optind - 1 < argc) {
		al_err("serve: unexpected argument \"%s\"", argv[optind - 1]);
		return 125;
	}
	const char *given = cfg.socket_path;
	if (al_serve_socket_activation(&cfg, &err) < 0) {
		al_err("serve: %s", err.msg);
		return 125;
	}
	/* The path activation found (when --socket gave none) is ours. */
	_cleanup_free_ char *found = cfg.socket_path != given ? (char *)cfg.socket_path : NULL;
	(void)found; /* freed on return; clang counts a cleanup-only variable as unused */
	if (!cfg.socket_path) {
		al_err("serve: --socket PATH is needed, unless systemd passes the socket (see "
		       "airlock serve --help)");
		return 125;
	}
	if (al_serve_run(&cfg, &err) < 0) {
		al_err("serve: %s", err.msg);
		return 125;
	}
	return 0;
}
#else
int al_cmd_serve(int argc, char **argv)
{
	char self[PATH_MAX], path[PATH_MAX + 32];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (argc > 0 && (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0)) {
		usage(stdout);
		return 0;
	}
	if (n > 0) {
		self[n] = '\0';
		char *slash = strrchr(self, '/');
		if (slash) {
			slash[1] = '\0';
			snprintf(path, sizeof(path), "%sairlock-serve", self);
			if (access(path, X_OK) != 0)
				snprintf(path, sizeof(path), "%s", AL_SERVE_PATH);
		}
	} else {
		snprintf(path, sizeof(path), "%s", AL_SERVE_PATH);
	}
	/* Itself, for the session processes; inherited by airlock-serve. */
	int self_fd = open("/proc/self/exe", O_RDONLY);
	char fdarg[16];
	char **args = xcalloc((size_t)argc + 5, sizeof(char *));
	args[0] = (char *)"airlock";
	args[1] = (char *)"serve";
	memcpy(args + 2, argv, (size_t)argc * sizeof(char *));
	if (self_fd >= 0) {
		snprintf(fdarg, sizeof(fdarg), "%d", self_fd);
		args[argc + 2] = (char *)"--session-exe-fd";
		args[argc + 3] = fdarg;
	}
	execv(path, args);
	al_err("serve: cannot run %s: %s", path, strerror(errno));
	free(args);
	return 125;
}
#endif
