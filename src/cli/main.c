/* airlock: dispatch to a subcommand. exit() lives here and in the child
 * runner only: everywhere else an error is returned with its message
 * (core/error.h), so that the caller can clean up and say it once. */
#include <fcntl.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "backend/microvm/vmm.h"
#include "cli.h"
#include "config.h"
#include "core/log.h"

void al_cli_usage(FILE *f)
{
	fprintf(f,
		"Usage: airlock COMMAND [OPTIONS]\n\n"
		"A sandbox for code that AI agents write and run.\n\n"
		"Commands:\n"
		"  run [OPTIONS] [--] CMD [ARG...]   run CMD in a sandbox\n"
		"  check [OPTIONS] [--] [CMD...]     run without running: run's options and\n"
		"        [--json] [--explain]        command, checked; the plan (held to the\n"
		"                                    operator policy), or every error; where\n"
		"                                    each value came from\n"
		"  verify [--policy FILE] [OPTIONS]  build the sandbox and show, from outside and\n"
		"                                    inside, which layers are in force\n"
		"  gc                                remove cgroups, host id slots, nftables\n"
		"                                    tables and guest files left by a killed\n"
		"                                    airlock, and guest images unused for 7 days\n"
		"  backends [--json]                 the isolation layers: usable here or why\n"
		"                                    not, and how each keeps the promises\n"
		"  vm-image [--packages P,P,...]     build the microvm/vm guests' system image\n"
		"                                    from the host's packages; its path, size\n"
		"  serve --socket PATH [OPTIONS]     serve the HTTP API (docs/api.md) on a Unix\n"
		"                                    socket: one-shot runs, health, metrics\n"
		"  mcp [--policy FILE] [--profile NAME] [--socket PATH]\n"
		"                                    serve the Model Context Protocol on stdio:\n"
		"                                    tools that run code in one sandbox\n"
		"  oci [GLOBAL OPTIONS] VERB ...     an OCI runtime with runc's command line\n"
		"                                    (also as airlock-runc): podman,\n"
		"                                    containerd and CRI-O run airlock sandboxes\n"
		"  token verify|jwks|keygen|mint     the per-run JWTs: verify one, print the\n"
		"                                    JWKS, make a key, mint one by hand\n"
		"  help [COMMAND]                    show this help, or COMMAND's\n"
		"  version                           show the version\n\n"
		"Run \"airlock help COMMAND\" (or \"airlock COMMAND --help\") for the options\n"
		"of a command; see airlock(1).\n");
}

/* airlock help [COMMAND [SUBCOMMAND]]: the general help, or the command's
 * own --help (token's subcommands too). */
static int help(int argc, char **argv)
{
	char opt[] = "--help";
	char *args[] = {argc > 1 ? argv[1] : opt, opt, NULL};
	const char *cmd = argc > 0 ? argv[0] : "help";

	if (argc > (strcmp(cmd, "token") == 0 ? 2 : 1)) {
		al_err("help: unexpected argument \"%s\" (see airlock help)", argv[argc - 1]);
		return 125;
	}
	if (strcmp(cmd, "run") == 0)
		return al_cmd_run(1, args + 1);
	if (strcmp(cmd, "check") == 0)
		return al_cmd_check(1, args + 1);
	if (strcmp(cmd, "verify") == 0)
		return al_cmd_verify(1, args + 1);
	if (strcmp(cmd, "gc") == 0)
		return al_cmd_gc(1, args + 1);
	if (strcmp(cmd, "backends") == 0)
		return al_cmd_backends(1, args + 1);
	if (strcmp(cmd, "serve") == 0)
		return al_cmd_serve(1, args + 1);
	if (strcmp(cmd, "vm-image") == 0)
		return al_cmd_vm_image(1, args + 1);
	if (strcmp(cmd, "mcp") == 0)
		return al_cmd_mcp(1, args + 1);
	if (strcmp(cmd, "oci") == 0)
		return al_cmd_oci(1, args + 1, "airlock oci");
	if (strcmp(cmd, "token") == 0)
		return argc > 1 ? al_cmd_token(2, args) : al_cmd_token(1, args + 1);
	if (strcmp(cmd, "version") == 0) {
		printf("Usage: airlock version\n\nShow airlock's version.\n");
		return 0;
	}
	if (strcmp(cmd, "help") == 0) {
		al_cli_usage(stdout);
		return 0;
	}
	al_err("help: unknown command \"%s\" (see airlock help)", cmd);
	return 125;
}

/* A closed fd 0, 1 or 2 would be handed out again by the next open or
 * pipe, and the sandbox's stdio wiring would then step on itself: fill
 * any gap with /dev/null first. */
static void ensure_stdio(void)
{
	for (int fd = 0; fd < 3; fd++) {
		if (fcntl(fd, F_GETFD) >= 0)
			continue;
		int n = open("/dev/null", O_RDWR | O_NOCTTY);
		if (n != fd) {
			fputs("airlock: cannot open /dev/null for a closed standard fd\n", stderr);
			exit(125);
		}
	}
}

int main(int argc, char **argv)
{
	const char *cmd = argc > 1 ? argv[1] : NULL;

	ensure_stdio();
	/* Under the name airlock-runc (a link in the package), runc's command
	 * line and nothing else: engines given that path never meet airlock's
	 * own commands. */
	const char *base = argc > 0 ? strrchr(argv[0], '/') : NULL;
	base = base ? base + 1 : argc > 0 ? argv[0] : "";
	if (strcmp(base, "airlock-runc") == 0)
		return al_cmd_oci(argc - 1, argv + 1, "airlock-runc");
	/* jansson's hash seed, from getrandom(): its own opens and reads
	 * /dev/urandom (three system calls on every command). Without one,
	 * jansson seeds itself as before. */
	uint32_t seed;
	if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) == (ssize_t)sizeof(seed) && seed)
		json_object_seed(seed);
	/* bench/phases.py's timestamps (docs/benchmarks.md). */
	if (getenv("AIRLOCK_PHASES")) {
		al_log_phases_on();
		al_log_phase("main");
	}

	if (!cmd) {
		al_cli_usage(stderr);
		return 125;
	}
	if (strcmp(cmd, "run") == 0)
		return al_cmd_run(argc - 2, argv + 2);
	if (strcmp(cmd, "check") == 0)
		return al_cmd_check(argc - 2, argv + 2);
	if (strcmp(cmd, "verify") == 0)
		return al_cmd_verify(argc - 2, argv + 2);
	if (strcmp(cmd, "gc") == 0)
		return al_cmd_gc(argc - 2, argv + 2);
	if (strcmp(cmd, "backends") == 0)
		return al_cmd_backends(argc - 2, argv + 2);
	if (strcmp(cmd, "token") == 0)
		return al_cmd_token(argc - 2, argv + 2);
	if (strcmp(cmd, "serve") == 0)
		return al_cmd_serve(argc - 2, argv + 2);
	if (strcmp(cmd, "vm-image") == 0)
		return al_cmd_vm_image(argc - 2, argv + 2);
	if (strcmp(cmd, "mcp") == 0)
		return al_cmd_mcp(argc - 2, argv + 2);
	if (strcmp(cmd, "oci") == 0)
		return al_cmd_oci(argc - 2, argv + 2, "airlock oci");
	if (strcmp(cmd, "__session") == 0)
		return al_cmd_session(argc - 2, argv + 2);
#ifdef AL_SERVE_BINARY
	if (strcmp(cmd, "__front") == 0)
		return al_cmd_front(argc - 2, argv + 2);
#endif
	/* The microvm and vm backends' VMM, the command of their native
	 * sandbox (src/backend/microvm/vmm.h). */
	if (strcmp(cmd, "__vmm") == 0)
		return al_vmm_main(argc, argv);
	if (strcmp(cmd, "__probe") == 0)
		return al_cmd_probe(argc - 2, argv + 2);
	if (strcmp(cmd, "help") == 0)
		return help(argc - 2, argv + 2);
	if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
		al_cli_usage(stdout);
		return 0;
	}
	if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0 ||
	    strcmp(cmd, "-V") == 0) {
		printf("airlock %s\n", AL_VERSION);
		return 0;
	}
	al_err("unknown command \"%s\" (see airlock --help)", cmd);
	return 125;
}
