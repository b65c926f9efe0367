/* `airlock oci VERB ...` and the binary run as `airlock-runc`: runc's
 * command line (its global flags --root, --log, --log-format; its verbs
 * and their flags, as podman, containerd's runc shim and CRI-O call
 * them) over src/oci/. Errors go to stderr and, with --log, to the log as
 * runc writes them (text or JSON lines); a container's supervisor writes
 * only to the log. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "config.h"
#include "core/cleanup.h"
#include "core/log.h"
#include "core/sys.h"
#include "core/util.h"
#include "oci/oci.h"
#include "oci/state.h"

static const char *prog = "airlock-runc";

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
	char msg[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s: %s\n", prog, msg);
	al_oci_log_line(AL_LOG_ERROR, msg);
	return 1;
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: %s [GLOBAL OPTIONS] VERB [OPTIONS] ID ...\n\n"
		"airlock as an OCI runtime, with runc's command line (docs/oci.md): podman,\n"
		"containerd and CRI-O run airlock sandboxes through it.\n\n"
		"Global options:\n"
		"  --root DIR                 the containers' state (default %s)\n"
		"  --log FILE                 where errors and the supervisors' messages go\n"
		"  --log-format text|json     how they are written there (default text)\n"
		"  --systemd-cgroup           refused where systemd is not PID 1\n"
		"  --operator-policy FILE     airlock's operator policy (or\n"
		"                             $AIRLOCK_OPERATOR_POLICY)\n"
		"  --audit-dir DIR            each container's audit stream, DIR/ID.jsonl\n"
		"                             (io.airlock.audit=NAME: DIR/NAME.jsonl)\n\n"
		"Verbs:\n"
		"  create [--bundle DIR] [--pid-file F] [--console-socket S] ID\n"
		"  start ID                   run the config's process\n"
		"  run [create's options] [--detach] ID\n"
		"  state ID                   the state as JSON\n"
		"  kill [--all] ID [SIGNAL]   (default SIGTERM)\n"
		"  delete [--force] ID\n"
		"  exec [--process F | ARGS...] [--tty] [--detach] [--pid-file F]\n"
		"       [--console-socket S] [--cwd DIR] [--env N=V] ID\n"
		"  ps [--format table|json] ID\n"
		"  pause ID, resume ID\n"
		"  events [--stats] [--interval SECONDS] ID\n"
		"  list [--format table|json] [--quiet]\n"
		"  features                   what this runtime takes, as JSON\n"
		"  spec [--bundle DIR]        write a config.json to start from\n"
		"  --version\n",
		prog, AL_OCI_DEFAULT_ROOT);
}

/* One option: "--name VALUE", "--name=VALUE" or "-name VALUE" (runc's
 * parser takes all three) at argv[*i]; *value set, *i moved past it. */
static bool opt_value(char **argv, int argc, int *i, const char *name, const char *alias,
		      const char **value, int *bad)
{
	const char *a = argv[*i];
	while (*a == '-')
		a++;
	size_t n = strlen(name);
	bool is = (strncmp(a, name, n) == 0 && (a[n] == '\0' || a[n] == '=')) ||
		  (alias && strcmp(a, alias) == 0 && argv[*i][1] != '-');
	if (!is || argv[*i][0] != '-')
		return false;
	if (a[n] == '=' && strncmp(a, name, n) == 0) {
		*value = a + n + 1;
	} else if (*i + 1 < argc) {
		*value = argv[++*i];
	} else {
		*bad = fail("%s needs a value", argv[*i]);
		return true;
	}
	return true;
}

static bool opt_flag(const char *arg, const char *name, const char *alias, bool *value)
{
	const char *a = arg;
	if (*a != '-')
		return false;
	while (*a == '-')
		a++;
	bool neg = false;
	if (strcmp(a, name) == 0 || (alias && strcmp(a, alias) == 0 && arg[1] != '-'))
		*value = true;
	else if (strncmp(a, name, strlen(name)) == 0 && a[strlen(name)] == '=')
		*value = strcmp(a + strlen(name) + 1, "false") != 0, neg = true;
	else
		return false;
	(void)neg;
	return true;
}

static int parse_signal(const char *s)
{
	static const struct {
		const char *name;
		int sig;
	} names[] = {
	    {"HUP", SIGHUP},	   {"INT", SIGINT},   {"QUIT", SIGQUIT},   {"ILL", SIGILL},
	    {"TRAP", SIGTRAP},	   {"ABRT", SIGABRT}, {"BUS", SIGBUS},	   {"FPE", SIGFPE},
	    {"KILL", SIGKILL},	   {"USR1", SIGUSR1}, {"SEGV", SIGSEGV},   {"USR2", SIGUSR2},
	    {"PIPE", SIGPIPE},	   {"ALRM", SIGALRM}, {"TERM", SIGTERM},   {"CHLD", SIGCHLD},
	    {"CONT", SIGCONT},	   {"STOP", SIGSTOP}, {"TSTP", SIGTSTP},   {"TTIN", SIGTTIN},
	    {"TTOU", SIGTTOU},	   {"URG", SIGURG},   {"XCPU", SIGXCPU},   {"XFSZ", SIGXFSZ},
	    {"VTALRM", SIGVTALRM}, {"PROF", SIGPROF}, {"WINCH", SIGWINCH}, {"IO", SIGIO},
	    {"PWR", SIGPWR},	   {"SYS", SIGSYS}};
	char *end;
	long n = strtol(s, &end, 10);

	if (*s && !*end)
		return n >= 0 && n < NSIG ? (int)n : -1;
	if (strncasecmp(s, "SIG", 3) == 0)
		s += 3;
	for (size_t i = 0; i < AL_ARRAY_SIZE(names); i++)
		if (strcasecmp(s, names[i].name) == 0)
			return names[i].sig;
	return -1;
}

/* The verb's arguments after its options: exactly want of them (-1: at
 * least one). */
static int positional(int argc, char **argv, int i, const char *verb, int want)
{
	int n = argc - i;
	if ((want < 0 && n < 1) || (want >= 0 && n != want))
		return fail("%s: expected %s, got %d argument%s (see --help)", verb,
			    want == 1 || want < 0 ? "a container id" : "a container id and more", n,
			    n == 1 ? "" : "s");
	return 0;
}

static int verb_create(struct al_oci_ctx *g, int argc, char **argv, bool run)
{
	struct al_oci_create_opts o = {0};
	struct al_error err = {0};
	bool detach = false, flag = false;
	const char *v = NULL;
	int i = 1, bad = 0;

	for (; i < argc && argv[i][0] == '-' && !bad; i++) {
		if (opt_value(argv, argc, &i, "bundle", "b", &o.bundle, &bad) ||
		    opt_value(argv, argc, &i, "pid-file", NULL, &o.pid_file, &bad) ||
		    opt_value(argv, argc, &i, "console-socket", NULL, &o.console_socket, &bad))
			continue;
		if (opt_value(argv, argc, &i, "preserve-fds", NULL, &v, &bad)) {
			if (!bad && strcmp(v, "0") != 0)
				bad =
				    fail("%s: --preserve-fds %s: airlock passes no descriptors of "
					 "the engine's into a sandbox",
					 argv[0], v);
			continue;
		}
		if (opt_flag(argv[i], "no-pivot", NULL, &flag)) {
			if (flag)
				bad = fail("%s: --no-pivot: airlock always pivots into the "
					   "container's root",
					   argv[0]);
			continue;
		}
		if (opt_flag(argv[i], "no-new-keyring", NULL, &flag))
			continue; /* a sandbox never joins the session keyring of its host */
		if (run && opt_flag(argv[i], "detach", "d", &detach))
			continue;
		if (run && opt_flag(argv[i], "keep", NULL, &flag))
			continue;
		bad = fail("%s: unknown option %s (see --help)", argv[0], argv[i]);
	}
	if (bad || positional(argc, argv, i, argv[0], 1))
		return 1;
	if (run) {
		int status = 0;
		if (al_oci_run(g, argv[i], &o, detach, &status, &err) < 0)
			return fail("%s", err.msg);
		return status;
	}
	if (al_oci_create(g, argv[i], &o, &err) < 0)
		return fail("%s", err.msg);
	return 0;
}

static int verb_exec(struct al_oci_ctx *g, int argc, char **argv)
{
	struct al_oci_exec_opts o = {0};
	struct al_error err = {0};
	char **env = NULL;
	const char *v = NULL;
	bool flag = false;
	int i = 1, bad = 0, status = 0;

	for (; i < argc && argv[i][0] == '-' && !bad; i++) {
		if (opt_value(argv, argc, &i, "process", "p", &o.process_file, &bad) ||
		    opt_value(argv, argc, &i, "pid-file", NULL, &o.pid_file, &bad) ||
		    opt_value(argv, argc, &i, "console-socket", NULL, &o.console_socket, &bad) ||
		    opt_value(argv, argc, &i, "cwd", NULL, &o.cwd, &bad))
			continue;
		if (opt_value(argv, argc, &i, "env", "e", &v, &bad)) {
			if (!bad)
				al_strv_push(&env, v);
			continue;
		}
		if (opt_flag(argv[i], "tty", "t", &o.tty) ||
		    opt_flag(argv[i], "detach", "d", &o.detach))
			continue;
		if (opt_flag(argv[i], "ignore-paused", NULL, &flag) ||
		    opt_flag(argv[i], "no-new-privs", NULL, &flag))
			continue; /* every process of a sandbox has no_new_privs */
		if (opt_value(argv, argc, &i, "preserve-fds", NULL, &v, &bad)) {
			if (!bad && strcmp(v, "0") != 0)
				bad = fail("exec: --preserve-fds %s: airlock passes no descriptors "
					   "of the engine's into a sandbox",
					   v);
			continue;
		}
		if (opt_value(argv, argc, &i, "user", "u", &v, &bad) ||
		    opt_value(argv, argc, &i, "additional-gids", "g", &v, &bad) ||
		    opt_value(argv, argc, &i, "cap", "c", &v, &bad) ||
		    opt_value(argv, argc, &i, "apparmor", NULL, &v, &bad) ||
		    opt_value(argv, argc, &i, "process-label", NULL, &v, &bad) ||
		    opt_value(argv, argc, &i, "cgroup", NULL, &v, &bad)) {
			if (!bad)
				bad =
				    fail("exec: %s: every process of an airlock container runs as "
					 "its user, with no capability, in its cgroup",
					 argv[i - 1]);
			continue;
		}
		bad = fail("exec: unknown option %s (see --help)", argv[i]);
	}
	if (!bad && i >= argc)
		bad = fail("exec: expected a container id");
	if (bad) {
		al_strv_free(env);
		return 1;
	}
	const char *id = argv[i++];
	o.args = argv + i;
	o.env = env;
	int r = al_oci_exec(g, id, &o, &status, &err);
	al_strv_free(env);
	if (r < 0)
		return fail("%s", err.msg);
	return status;
}

static int verb_simple(struct al_oci_ctx *g, int argc, char **argv)
{
	const char *verb = argv[0];
	struct al_error err = {0};
	bool all = false, force = false, stats = false, quiet = false;
	const char *format = "table", *interval = "5", *dir = NULL;
	int i = 1, bad = 0, r;

	for (; i < argc && argv[i][0] == '-' && !bad; i++) {
		if ((strcmp(verb, "kill") == 0 && opt_flag(argv[i], "all", "a", &all)) ||
		    (strcmp(verb, "delete") == 0 && opt_flag(argv[i], "force", "f", &force)) ||
		    (strcmp(verb, "events") == 0 && opt_flag(argv[i], "stats", NULL, &stats)) ||
		    (strcmp(verb, "list") == 0 && opt_flag(argv[i], "quiet", "q", &quiet)))
			continue;
		if (((strcmp(verb, "ps") == 0 || strcmp(verb, "list") == 0) &&
		     opt_value(argv, argc, &i, "format", "f", &format, &bad)) ||
		    (strcmp(verb, "events") == 0 &&
		     opt_value(argv, argc, &i, "interval", NULL, &interval, &bad)) ||
		    (strcmp(verb, "spec") == 0 &&
		     opt_value(argv, argc, &i, "bundle", "b", &dir, &bad)))
			continue;
		if (strcmp(verb, "spec") == 0 && opt_flag(argv[i], "rootless", NULL, &quiet))
			continue;
		bad = fail("%s: unknown option %s (see --help)", verb, argv[i]);
	}
	if (bad)
		return 1;
	if (strcmp(verb, "list") == 0 || strcmp(verb, "features") == 0 ||
	    strcmp(verb, "spec") == 0) {
		if (i != argc)
			return fail("%s takes no arguments", verb);
		if (strcmp(verb, "features") == 0) {
			al_oci_features(stdout);
			return 0;
		}
		r = strcmp(verb, "spec") == 0
			? al_oci_spec(dir, &err)
			: al_oci_list(g, strcmp(format, "json") == 0, quiet, stdout, &err);
		return r < 0 ? fail("%s", err.msg) : 0;
	}
	if (strcmp(verb, "kill") == 0) {
		if (argc - i < 1 || argc - i > 2)
			return fail("kill: expected a container id and an optional signal");
		int sig = argc - i == 2 ? parse_signal(argv[i + 1]) : SIGTERM;
		if (sig < 0)
			return fail("kill: unknown signal \"%s\"", argv[i + 1]);
		r = al_oci_kill(g, argv[i], sig, all, &err);
	} else if (strcmp(verb, "ps") == 0) {
		if (argc - i < 1)
			return fail("ps: expected a container id");
		if (strcmp(format, "json") && strcmp(format, "table"))
			return fail("ps: --format %s: table or json", format);
		if (argc - i > 1)
			return fail("ps: arguments to ps(1) are not taken: the pids are the "
				    "container's cgroup's");
		r = al_oci_ps(g, argv[i], strcmp(format, "json") == 0, stdout, &err);
	} else {
		if (positional(argc, argv, i, verb, 1))
			return 1;
		const char *id = argv[i];
		if (strcmp(verb, "start") == 0)
			r = al_oci_start(g, id, &err);
		else if (strcmp(verb, "state") == 0)
			r = al_oci_state(g, id, stdout, &err);
		else if (strcmp(verb, "delete") == 0)
			r = al_oci_delete(g, id, force, &err);
		else if (strcmp(verb, "pause") == 0 || strcmp(verb, "resume") == 0)
			r = al_oci_pause(g, id, strcmp(verb, "pause") == 0, &err);
		else {
			char *end;
			unsigned long s = strtoul(interval, &end, 10);
			if (*end == 's' && end[1] == '\0')
				end++;
			if (*end || s == 0 || s > 86400)
				return fail("events: --interval %s: seconds, 1 to 86400", interval);
			r = al_oci_events(g, id, stats, (unsigned)s, stdout, &err);
		}
	}
	return r < 0 ? fail("%s", err.msg) : 0;
}

int al_cmd_oci(int argc, char **argv, const char *name)
{
	struct al_oci_ctx g = {.root = AL_OCI_DEFAULT_ROOT,
			       .log_fd = -1,
			       .operator_env = getenv("AIRLOCK_OPERATOR_POLICY"),
			       .term = getenv("TERM")};
	const char *log = NULL, *format = "text";
	bool systemd = false, flag = false;
	int i = 0, bad = 0;

	prog = name;
	for (; i < argc && argv[i][0] == '-' && !bad; i++) {
		if (opt_value(argv, argc, &i, "root", NULL, &g.root, &bad) ||
		    opt_value(argv, argc, &i, "log", NULL, &log, &bad) ||
		    opt_value(argv, argc, &i, "log-format", NULL, &format, &bad) ||
		    opt_value(argv, argc, &i, "operator-policy", NULL, &g.operator_file, &bad) ||
		    opt_value(argv, argc, &i, "audit-dir", NULL, &g.audit_dir, &bad))
			continue;
		if (opt_flag(argv[i], "systemd-cgroup", NULL, &systemd) ||
		    opt_flag(argv[i], "debug", NULL, &flag) ||
		    opt_flag(argv[i], "rootless", NULL, &flag))
			continue;
		if (strcmp(argv[i], "--version") == 0 || strcmp(argv[i], "-v") == 0) {
			printf("%s version %s (airlock)\nspec: 1.1.0\n", prog, AL_VERSION);
			return 0;
		}
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			usage(stdout);
			return 0;
		}
		bad = fail("unknown global option %s (see --help)", argv[i]);
	}
	if (bad)
		return 1;
	if (strcmp(format, "json") && strcmp(format, "text"))
		return fail("--log-format %s: text or json", format);
	if (g.audit_dir && g.audit_dir[0] != '/')
		return fail("--audit-dir %s: not an absolute path", g.audit_dir);
	if (log) {
		g.log_fd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (g.log_fd < 0)
			return fail("--log %s: %s", log, strerror(errno));
	}
	/* Everything airlock says goes to the log (never to a container's
	 * stdio, which its supervisor holds). */
	al_oci_log_open(g.log_fd, strcmp(format, "json") == 0);
	if (systemd && getppid() && access("/run/systemd/system", F_OK) < 0)
		return fail("--systemd-cgroup: systemd is not PID 1 on this machine; airlock "
			    "places each container in a cgroup of its own (cgroupfs)");
	if (systemd)
		return fail("--systemd-cgroup: airlock places each container in a cgroup of its "
			    "own, not in a systemd unit");
	if (i >= argc) {
		usage(stderr);
		return 1;
	}
	const char *verb = argv[i];
	argc -= i;
	argv += i;
	if (strcmp(verb, "create") == 0 || strcmp(verb, "run") == 0)
		return verb_create(&g, argc, argv, strcmp(verb, "run") == 0);
	if (strcmp(verb, "exec") == 0)
		return verb_exec(&g, argc, argv);
	static const char *const simple[] = {"start", "state",	  "kill",   "delete",
					     "ps",    "pause",	  "resume", "events",
					     "list",  "features", "spec",   NULL};
	for (size_t k = 0; simple[k]; k++)
		if (strcmp(verb, simple[k]) == 0)
			return verb_simple(&g, argc, argv);
	if (strcmp(verb, "help") == 0) {
		usage(stdout);
		return 0;
	}
	return fail("unknown verb \"%s\" (see --help)", verb);
}
