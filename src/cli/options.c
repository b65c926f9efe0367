/* The option table: every flag once, with the commands it belongs to, its
 * help text and the function that stores it in the model. */
#include "cli.h"

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"

struct option_def {
	const char *name; /* long name without "--" */
	char short_name;  /* 0 if none */
	const char *arg;  /* argument name for help; NULL = takes none */
	unsigned cmds;	  /* AL_CMD_* bits */
	const char *help;
	int (*apply)(struct al_cli *cli, const struct option_def *o, const char *arg,
		     struct al_error *err);
};

static int opt_policy(struct al_cli *cli, const struct option_def *o, const char *arg,
		      struct al_error *err)
{
	free(cli->policy_file);
	cli->policy_file = xstrdup(arg);
	return 0;
}

/* A host path from a flag, made absolute against the current directory. */
static int absolute(const struct option_def *o, const char *arg, const char *host, char **ret,
		    struct al_error *err)
{
	char cwd[PATH_MAX];

	if (host[0] == '/') {
		*ret = xstrdup(host);
		return 0;
	}
	if (!getcwd(cwd, sizeof(cwd)))
		return al_error_setsys(err, errno, "--%s %s: getcwd", o->name, arg);
	*ret = xasprintf("%s/%s", cwd, host);
	return 0;
}

/* HOST[:PATH]: split at the last ':' followed by '/', so host paths that
 * contain ':' still work when PATH is given. */
static int opt_mount(struct al_cli *cli, const struct option_def *o, const char *arg,
		     struct al_error *err)
{
	_cleanup_free_ char *host = NULL, *path = NULL, *abs = NULL;
	const char *colon = strrchr(arg, ':');

	/* docker's HOST:PATH:ro; here the flag is the mode. */
	if (colon && colon != arg &&
	    (strcmp(colon, ":ro") == 0 || strcmp(colon, ":rw") == 0 ||
	     strcmp(colon, ":exec") == 0 || strcmp(colon, ":noexec") == 0) &&
	    (strchr(arg, ':') != colon || access(arg, F_OK) < 0))
		return al_error_set(
		    err, EINVAL,
		    "--%s %s: there is no mode suffix; give HOST[:PATH] and say the "
		    "mode with the flag (--ro or --rw)",
		    o->name, arg);
	if (colon && colon[1] == '/') {
		host = strndup(arg, (size_t)(colon - arg));
		path = xstrdup(colon + 1);
	} else {
		host = xstrdup(arg);
	}
	if (!host || !host[0])
		return al_error_set(err, EINVAL, "--%s %s: empty host path", o->name, arg);
	int r = absolute(o, arg, host, &abs, err);
	if (r < 0)
		return r;
	/* Default sandbox path: the host path, cleaned of "." and ".." by
	 * realpath when it exists (a missing path fails later, by name). */
	if (!path) {
		char real[PATH_MAX];
		path = xstrdup(realpath(abs, real) ? real : abs);
	}
	if (!al_path_is_clean_absolute(path))
		return al_error_set(err, EINVAL,
				    "--%s %s: sandbox path \"%s\" must be a clean absolute path",
				    o->name, arg, path);
	_cleanup_free_ char *origin = xasprintf("--%s %s", o->name, arg);
	al_policy_add_mount(cli->flags, abs, path,
			    strcmp(o->name, "rw") == 0 ? AL_MOUNT_RW : AL_MOUNT_RO, AL_UNSET,
			    origin);
	return 0;
}

/* --copy-in HOST:PATH and --copy-out PATH:HOSTDIR: the sandbox path must
 * be given (there is no default), absolute and clean. */
static int opt_copy(struct al_cli *cli, const struct option_def *o, const char *arg,
		    struct al_error *err)
{
	bool in = strcmp(o->name, "copy-in") == 0;
	const char *colon = in ? strrchr(arg, ':') : strchr(arg, ':');
	_cleanup_free_ char *host = NULL, *path = NULL, *abs = NULL, *origin = NULL;

	if (!colon || colon == arg || !colon[1])
		return al_error_set(err, EINVAL, "--%s %s: expected %s", o->name, arg,
				    in ? "HOST:PATH (a host file or directory, and where in the "
					 "scratch to copy it)"
				       : "PATH:HOSTDIR (what in the scratch to copy, and the host "
					 "directory to copy it to)");
	host = in ? strndup(arg, (size_t)(colon - arg)) : xstrdup(colon + 1);
	path = in ? xstrdup(colon + 1) : strndup(arg, (size_t)(colon - arg));
	if (!host || !path)
		return al_error_set(err, ENOMEM, "--%s: out of memory", o->name);
	if (!al_path_is_clean_absolute(path))
		return al_error_set(err, EINVAL,
				    "--%s %s: sandbox path \"%s\" must be a clean absolute path",
				    o->name, arg, path);
	int r = absolute(o, arg, host, &abs, err);
	if (r < 0)
		return r;
	origin = xasprintf("--%s %s", o->name, arg);
	al_policy_add_copy(cli->flags, in, abs, path, origin);
	return 0;
}

/* --env NAME=VALUE sets a value; --env NAME passes airlock's own (which
 * dumps then hide), and refuses when airlock has none. */
static int opt_env(struct al_cli *cli, const struct option_def *o, const char *arg,
		   struct al_error *err)
{
	const char *eq = strchr(arg, '=');
	_cleanup_free_ char *name = strndup(arg, eq ? (size_t)(eq - arg) : strlen(arg));

	if (!al_env_name_is_valid(name))
		return al_error_set(
		    err, EINVAL,
		    "--env %s: \"%s\" is not a valid variable name (expected NAME=VALUE, "
		    "or NAME to pass airlock's own)",
		    arg, name);
	if (eq) {
		al_policy_set_env_hidden(cli->flags, name, eq + 1, false);
		return 0;
	}
	const char *value = getenv(name);
	if (!value)
		return al_error_set(err, ENOENT,
				    "--env %s: %s is not set in airlock's environment (give "
				    "NAME=VALUE to set it)",
				    arg, name);
	al_policy_set_env_passed(cli->flags, name, value);
	return 0;
}

#define ENV_FILE_MAX (1u << 20)

static void add_flag_error(struct al_errors *errs, const struct option_def *o, const char *value,
			   const struct al_error *e);

/* --env-file FILE: KEY=VALUE lines, taken as they are (no quotes, no
 * expansion); blank lines and lines starting with '#' are skipped. The
 * values are hidden in dumps. */
static int opt_env_file(struct al_cli *cli, const struct option_def *o, const char *arg,
			struct al_error *err)
{
	_cleanup_free_ char *text = xmalloc(ENV_FILE_MAX + 1);
	/* Non-blocking: a FIFO nobody writes is refused, not waited on. */
	_cleanup_close_ int fd = open(arg, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	size_t len = 0, lineno = 0;
	bool bad = false;
	struct stat st;
	ssize_t n;

	if (fd < 0 || fstat(fd, &st) < 0)
		return al_error_setsys(err, errno, "--env-file %s", arg);
	if (!S_ISREG(st.st_mode))
		return al_error_set(err, EINVAL, "--env-file %s: not a regular file", arg);
	while (len <= ENV_FILE_MAX && (n = read(fd, text + len, ENV_FILE_MAX + 1 - len)) > 0)
		len += (size_t)n;
	if (n < 0)
		return al_error_setsys(err, errno, "--env-file %s", arg);
	if (len > ENV_FILE_MAX)
		return al_error_set(err, EFBIG, "--env-file %s: larger than %u bytes", arg,
				    ENV_FILE_MAX);
	if (memchr(text, '\0', len))
		return al_error_set(err, EINVAL, "--env-file %s: contains a NUL byte", arg);
	text[len] = '\0';
	for (char *line = text, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		lineno++;
		size_t l = strlen(line);
		if (l && line[l - 1] == '\r')
			line[--l] = '\0';
		const char *s = line + strspn(line, " \t");
		if (!*s || *s == '#')
			continue;
		const char *eq = strchr(line, '=');
		_cleanup_free_ char *name = strndup(line, eq ? (size_t)(eq - line) : strlen(line));
		if (eq && al_env_name_is_valid(name)) {
			al_policy_set_env_hidden(cli->flags, name, eq + 1, true);
			continue;
		}
		/* Every bad line is reported: the one before goes to the list
		 * now, the last is this option's own error. */
		if (bad)
			add_flag_error(cli->errs, o, arg, err);
		al_error_clear(err);
		al_error_set(err, EINVAL,
			     "--env-file %s:%zu: expected NAME=VALUE (a name of letters, digits "
			     "and _, no spaces around '=')",
			     arg, lineno);
		bad = true;
	}
	return bad ? -EINVAL : 0;
}

static int opt_workdir(struct al_cli *cli, const struct option_def *o, const char *arg,
		       struct al_error *err)
{
	if (!al_path_is_clean_absolute(arg))
		return al_error_set(err, EINVAL, "--workdir %s: expected a clean absolute path",
				    arg);
	free(cli->flags->workdir);
	cli->flags->workdir = xstrdup(arg);
	return 0;
}

static int opt_timeout(struct al_cli *cli, const struct option_def *o, const char *arg,
		       struct al_error *err)
{
	if (al_parse_duration_ms(arg, &cli->flags->timeout_ms) < 0)
		return al_error_set(err, EINVAL,
				    "--timeout %s: expected seconds (e.g. 30, 1.5) or a duration "
				    "(250ms, 90s, 2m, 1m30s)",
				    arg);
	return 0;
}

static int opt_scratch(struct al_cli *cli, const struct option_def *o, const char *arg,
		       struct al_error *err)
{
	if (al_parse_size(arg, &cli->flags->scratch_bytes) < 0 || cli->flags->scratch_bytes == 0)
		return al_error_set(err, EINVAL,
				    "--scratch %s: bad size (expected e.g. 64M, 1G, 524288)", arg);
	return 0;
}

static int opt_size(struct al_cli *cli, const struct option_def *o, const char *arg,
		    struct al_error *err)
{
	uint64_t v;
	if (al_parse_size(arg, &v) < 0 || v == 0)
		return al_error_set(
		    err, EINVAL, "--%s %s: bad size (expected e.g. 64M, 1G, 524288)", o->name, arg);
	if (strcmp(o->name, "memory") == 0)
		cli->flags->memory_bytes = v;
	else if (strcmp(o->name, "output-limit") == 0)
		cli->flags->output_bytes = v;
	else if (strcmp(o->name, "copy-out-size") == 0)
		cli->flags->copy_out_bytes = v;
	else
		cli->flags->file_size = v;
	return 0;
}

static int opt_count(struct al_cli *cli, const struct option_def *o, const char *arg,
		     struct al_error *err)
{
	char *end = NULL;
	unsigned long long v;

	errno = 0;
	v = strtoull(arg, &end, 10);
	unsigned long long max = strcmp(o->name, "pids") == 0 ? 4194304 : 1048576;

	if (errno || !end || *end || arg[0] == '-' || v == 0 || v > max)
		return al_error_set(err, EINVAL, "--%s %s: expected a whole number from 1 to %llu",
				    o->name, arg, max);
	if (strcmp(o->name, "pids") == 0)
		cli->flags->pids = v;
	else if (strcmp(o->name, "copy-out-files") == 0)
		cli->flags->copy_out_files = v;
	else
		cli->flags->open_files = v;
	return 0;
}

static int opt_cpus(struct al_cli *cli, const struct option_def *o, const char *arg,
		    struct al_error *err)
{
	char *end = NULL;
	double v = strtod(arg, &end);

	if (!end || *end || !(v >= 0.01 && v <= 1024))
		return al_error_set(err, EINVAL,
				    "--cpus %s: expected a number of CPUs from 0.01 to 1024", arg);
	cli->flags->cpus_milli = (uint64_t)(v * 1000 + 0.5);
	return 0;
}

static int opt_cpu_time(struct al_cli *cli, const struct option_def *o, const char *arg,
			struct al_error *err)
{
	if (al_parse_duration_ms(arg, &cli->flags->cpu_time_ms) < 0)
		return al_error_set(err, EINVAL,
				    "--cpu-time %s: expected CPU seconds (e.g. 10, 1.5, 2m)", arg);
	return 0;
}

/* --result takes a file, or "-" for stdout; --audit a file; --result-fd
 * and --audit-fd an inherited descriptor. One of each kind. */
static int opt_file(struct al_cli *cli, const struct option_def *o, const char *arg,
		    struct al_error *err)
{
	bool result = strncmp(o->name, "result", 6) == 0;
	char **file = result ? &cli->result_file : &cli->audit_file;
	int *fd = result ? &cli->result_fd : &cli->audit_fd;
	const char *kind = result ? "result" : "audit";

	if (*file || *fd >= 0)
		return al_error_set(
		    err, EINVAL,
		    "--%s: the %s goes to one place; give one of --%s FILE, --%s-fd N%s", o->name,
		    kind, kind, kind, result ? " or --result -" : "");
	if (strcmp(o->name, "result-fd") == 0 || strcmp(o->name, "audit-fd") == 0) {
		char *end;
		errno = 0;
		long n = strtol(arg, &end, 10);
		if (errno || end == arg || *end || n < 0 || n > 1 << 20)
			return al_error_set(err, EINVAL, "--%s %s: expected a descriptor number",
					    o->name, arg);
		if (n <= 2 && n != 1)
			return al_error_set(
			    err, EINVAL,
			    "--%s %s: descriptor %ld is the command's %s; give %san "
			    "inherited one from 3 on",
			    o->name, arg, n, n == 0 ? "stdin" : "stderr",
			    result ? "1 (stdout) or " : "");
		*fd = (int)n;
	} else if (strcmp(arg, "-") == 0) {
		*fd = 1;
	} else {
		*file = xstrdup(arg);
	}
	/* The command's output goes to stdout too: there it could write lines
	 * that read as audit events. The record comes after all of it. */
	if (!result && *fd == 1)
		return al_error_set(err, EINVAL,
				    "--%s %s: the audit stream does not share stdout with the "
				    "command's output (which could forge its lines); give a file "
				    "or another descriptor",
				    o->name, arg);
	return 0;
}

static int opt_allow(struct al_cli *cli, const struct option_def *o, const char *arg,
		     struct al_error *err)
{
	if (al_policy_check_allow_rule(arg, err) < 0)
		return al_error_wrap(err, "--allow %s", arg);
	al_strv_push(&cli->flags->net_allow, arg);
	return 0;
}

static int opt_map_host(struct al_cli *cli, const struct option_def *o, const char *arg,
			struct al_error *err)
{
	const char *eq = strchr(arg, '=');
	_cleanup_free_ char *name = NULL;

	if (!eq)
		return al_error_set(err, EINVAL, "--map-host %s: expected NAME=ADDRESS", arg);
	name = strndup(arg, (size_t)(eq - arg));
	if (al_policy_check_host_map(name, eq + 1, err) < 0)
		return al_error_wrap(err, "--map-host %s", arg);
	al_policy_set_host(cli->flags, name, eq + 1);
	return 0;
}

static int opt_resolver(struct al_cli *cli, const struct option_def *o, const char *arg,
			struct al_error *err)
{
	if (al_policy_check_resolver(arg, err) < 0)
		return al_error_wrap(err, "--resolver");
	free(cli->flags->net_resolver);
	cli->flags->net_resolver = xstrdup(arg);
	return 0;
}

static int opt_backend(struct al_cli *cli, const struct option_def *o, const char *arg,
		       struct al_error *err)
{
	free(cli->flags->backend);
	cli->flags->backend = xstrdup(arg);
	return 0;
}

static int opt_operator(struct al_cli *cli, const struct option_def *o, const char *arg,
			struct al_error *err)
{
	if (!arg[0])
		return al_error_set(err, EINVAL, "--operator-policy: empty file name");
	free(cli->operator_file);
	cli->operator_file = xstrdup(arg);
	return 0;
}

static int opt_profile(struct al_cli *cli, const struct option_def *o, const char *arg,
		       struct al_error *err)
{
	if (!arg[0])
		return al_error_set(err, EINVAL, "--profile: empty profile name");
	free(cli->flags->profile);
	cli->flags->profile = xstrdup(arg);
	return 0;
}

/* --secret NAME names a secret (the operator's, granted by the profile, or
 * one the task defines); --secret id=NAME,KEY=VALUE,... defines one, as a
 * policy file's "secrets" would (policy/cred-flag.c). Each error of a
 * definition is added to the list with the key it is about. */
static int opt_secret(struct al_cli *cli, const struct option_def *o, const char *arg,
		      struct al_error *err)
{
	struct al_secret_def *d = NULL;

	if (!strchr(arg, '=')) {
		if (!al_env_name_is_valid(arg))
			return al_error_set(
			    err, EINVAL,
			    "--secret %s: \"%s\" is not a secret's name (give NAME, "
			    "or id=NAME,env=VAR,host=HOST,header=... to define one)",
			    arg, arg);
		_cleanup_free_ char *where = xasprintf("--secret %s", arg);
		al_policy_add_secret_name(cli->flags, arg, where);
		return 0;
	}
	if (al_secret_flag_parse(arg, &d, cli->errs) < 0)
		return -EINVAL; /* the errors are in the list already */
	for (size_t i = 0; i < cli->flags->n_secret_defs; i++)
		if (strcmp(cli->flags->secret_defs[i]->name, d->name) == 0) {
			al_errors_add(cli->errs, EINVAL, d->where, "id",
				      "%s is defined twice (also by %s)", d->name,
				      cli->flags->secret_defs[i]->where);
			al_secret_def_free(d);
			return -EINVAL;
		}
	al_policy_add_secret_def(cli->flags, d);
	return 0;
}

static int opt_explain(struct al_cli *cli, const struct option_def *o, const char *arg,
		       struct al_error *err)
{
	cli->explain = true;
	return 0;
}

static int opt_hostname(struct al_cli *cli, const struct option_def *o, const char *arg,
			struct al_error *err)
{
	if (!al_hostname_is_valid(arg))
		return al_error_set(err, EINVAL, "--hostname %s: not a valid host name", arg);
	free(cli->flags->hostname);
	cli->flags->hostname = xstrdup(arg);
	return 0;
}

static int opt_copy_out_replace(struct al_cli *cli, const struct option_def *o, const char *arg,
				struct al_error *err)
{
	cli->flags->copy_out_replace = true;
	return 0;
}

static int opt_tty(struct al_cli *cli, const struct option_def *o, const char *arg,
		   struct al_error *err)
{
	cli->flags->tty = 1;
	return 0;
}

static int opt_json(struct al_cli *cli, const struct option_def *o, const char *arg,
		    struct al_error *err)
{
	cli->json = true;
	return 0;
}

static int opt_quiet(struct al_cli *cli, const struct option_def *o, const char *arg,
		     struct al_error *err)
{
	al_log_set_level(AL_LOG_ERROR);
	return 0;
}

static int opt_verbose(struct al_cli *cli, const struct option_def *o, const char *arg,
		       struct al_error *err)
{
	al_log_set_level(AL_LOG_DEBUG);
	return 0;
}

static int opt_help(struct al_cli *cli, const struct option_def *o, const char *arg,
		    struct al_error *err)
{
	cli->help = true;
	return 0;
}

static int opt_version(struct al_cli *cli, const struct option_def *o, const char *arg,
		       struct al_error *err)
{
	cli->version = true;
	return 0;
}

/* check takes every flag of run (it is run without running) and says
 * what run would do with it; verify runs its own probe, so it takes no
 * command and no --result or --audit. */
#define RUN  (AL_CMD_RUN | AL_CMD_CHECK)
#define BOTH (AL_CMD_RUN | AL_CMD_CHECK | AL_CMD_VERIFY)

/* clang-format off */
static const struct option_def options[] = {
	{"policy",   0,  "FILE",            BOTH, "read the policy file FILE (flags override it)", opt_policy},
	{"ro",       0,  "HOST[:PATH]",     BOTH, "show host file or dir HOST read-only at PATH (default: same path)", opt_mount},
	{"rw",       0,  "HOST[:PATH]",     BOTH, "show host dir or file HOST writable at PATH", opt_mount},
	{"copy-in",  0,  "HOST:PATH",       BOTH, "copy host file or dir HOST into the scratch at PATH before the command (links copied as links)", opt_copy},
	{"copy-out", 0,  "PATH:HOSTDIR",    BOTH, "after the run, whatever ended it, copy PATH's files and dirs out to HOSTDIR (links never followed)", opt_copy},
	{"copy-out-size", 0, "SIZE",        BOTH, "cap on what --copy-out brings back (default: the scratch size)", opt_size},
	{"copy-out-files", 0, "N",          BOTH, "cap on the files and dirs --copy-out brings back (default 10000)", opt_count},
	{"copy-out-replace", 0, NULL,       BOTH, "let --copy-out replace your own regular files and merge into your own dirs on the host (else they are skipped and the run exits 122)", opt_copy_out_replace},
	{"env",      0,  "NAME[=VALUE]",    BOTH, "set a variable inside, or pass airlock's own NAME (nothing else of the host's leaks in)", opt_env},
	{"env-file", 0,  "FILE",            BOTH, "set the variables of FILE's NAME=VALUE lines (# comments; no quoting or expansion)", opt_env_file},
	{"workdir",  0,  "PATH",            BOTH, "working directory inside, on the scratch (default /work)", opt_workdir},
	{"timeout",  0,  "SECONDS",         BOTH, "wall-clock limit; kills the whole sandbox (default 60)", opt_timeout},
	{"scratch",  0,  "SIZE",            BOTH, "size of the scratch tmpfs behind /tmp and the workdir (default 64M)", opt_scratch},
	{"memory",   0,  "SIZE",            BOTH, "memory limit, no swap (default 512M)", opt_size},
	{"pids",     0,  "N",               BOTH, "process and thread limit (default 128)", opt_count},
	{"cpus",     0,  "N",               BOTH, "CPU share, e.g. 0.5 (default: no cap)", opt_cpus},
	{"cpu-time", 0,  "SECONDS",         BOTH, "CPU seconds across all processes (default: none)", opt_cpu_time},
	{"output-limit", 0, "SIZE",         BOTH, "stdout+stderr cap; the run stops there (default 16M)", opt_size},
	{"open-files", 0, "N",              BOTH, "open file descriptors per process (default 1024)", opt_count},
	{"file-size", 0, "SIZE",            BOTH, "largest file a process may write (default: none)", opt_size},
	{"result",   0,  "FILE",            RUN,  "write the result record (JSON) to FILE, a regular file or none yet (no symlink in the path; - for stdout)", opt_file},
	{"result-fd", 0, "N",               RUN,  "write the result record to inherited descriptor N", opt_file},
	{"audit",    0,  "FILE",            RUN,  "append the audit stream (JSON lines) to FILE (no symlink in the path)", opt_file},
	{"audit-fd", 0,  "N",               RUN,  "write the audit stream to inherited descriptor N (3 or more)", opt_file},
	{"allow", 0, "HOST[:PORT]", BOTH, "allow egress to HOST (name, *.wildcard, IP, CIDR; ports 80,443 unless :PORT, :A-B or :*); not loopback: for the host's, --map-host NAME=127.0.0.1 --allow NAME:PORT", opt_allow},
	{"map-host", 0, "NAME=ADDR", BOTH, "resolve NAME to ADDR in the gateway (like /etc/hosts)", opt_map_host},
	{"resolver", 0, "IP[:PORT]", BOTH, "resolver the gateway asks for allowed names (default: the host's)", opt_resolver},
	{"backend",  0,  "NAME",            BOTH, "isolation backend: native (default) or gvisor (airlock backends lists them)", opt_backend},
	{"hostname", 0,  "NAME",            BOTH, "host name inside (default airlock)", opt_hostname},
	{"tty",      't', NULL,             BOTH, "give the command a terminal of the sandbox's own (a pty relayed to ours; raw mode when stdin is a terminal)", opt_tty},
	{"operator-policy", 0, "FILE",      BOTH, "hold the run to the operator policy FILE (default: /etc/airlock/operator.json, else $AIRLOCK_OPERATOR_POLICY; once either is set, only that same file)", opt_operator},
	{"profile",  0,  "NAME",            BOTH, "the operator policy's profile to run under (default: default)", opt_profile},
	{"secret",   0,  "NAME|id=NAME,...", BOTH, "the secret or token NAME (the operator's, granted by the profile), presented by the gateway on its hosts (the sandbox sees a placeholder); without an operator policy, define one: id=NAME,env=VAR|file=PATH,host=HOST[:PORT] (repeatable),header='Field: ...{}'|basic=USER|query=PARAM (quote a value with a comma in \"...\")", opt_secret},
	{"explain",  0,  NULL,     AL_CMD_CHECK, "say where each value came from (the task, the profile's default value, airlock's built-in value, the operator); refused, which profiles would allow it", opt_explain},
	{"json",     0,  NULL,     AL_CMD_CHECK, "print the plan, or every error, as JSON", opt_json},
	{"quiet",    'q', NULL,             BOTH, "print only errors", opt_quiet},
	{"verbose",  'v', NULL,             BOTH, "print the plan summary and setup details", opt_verbose},
	{"help",     'h', NULL,             BOTH, "show this help", opt_help},
	{"version",  'V', NULL,             BOTH, "show the version", opt_version},
};
/* clang-format on */

static const struct option_def *find_long(const char *name, size_t len)
{
	for (size_t i = 0; i < AL_ARRAY_SIZE(options); i++)
		if (strlen(options[i].name) == len && strncmp(options[i].name, name, len) == 0)
			return &options[i];
	return NULL;
}

static const struct option_def *find_short(char c)
{
	for (size_t i = 0; i < AL_ARRAY_SIZE(options); i++)
		if (options[i].short_name == c)
			return &options[i];
	return NULL;
}

static const char *cmd_name(enum al_cli_cmd cmd)
{
	return cmd == AL_CMD_RUN ? "run" : cmd == AL_CMD_CHECK ? "check" : "verify";
}

/* A flag's error as a list entry: its where is the flag as the message
 * names it ("--timeout soon", "--env-file F:4", "--resolver"), so a program
 * can point at it; the text stays the message as it is. */
static void add_flag_error(struct al_errors *errs, const struct option_def *o, const char *value,
			   const struct al_error *e)
{
	_cleanup_free_ char *name = xasprintf("--%s", o->name);
	size_t len = strlen(name), vlen = value ? strlen(value) : 0;
	const char *msg = e->msg, *colon;

	if (strncmp(msg, name, len) != 0) {
		al_errors_add_error(errs, e);
		return;
	}
	if (value && msg[len] == ' ' && strncmp(msg + len + 1, value, vlen) == 0)
		len += 1 + vlen; /* the value as given, whatever it holds */
	colon = strstr(msg + len, ": ");
	if (!colon) {
		al_errors_add_error(errs, e);
		return;
	}
	_cleanup_free_ char *where = strndup(msg, (size_t)(colon - msg));
	al_errors_add(errs, e->code, where, NULL, "%s", colon + 2);
}

/* An option that says how airlock reports or where it reads its files,
 * not what the task asks for. */
static bool is_cli_only(const struct option_def *o)
{
	return o->apply == opt_policy || o->apply == opt_operator || o->apply == opt_file ||
	       o->apply == opt_json || o->apply == opt_explain || o->apply == opt_quiet ||
	       o->apply == opt_verbose || o->apply == opt_help || o->apply == opt_version;
}

int al_cli_parse(struct al_cli *cli, enum al_cli_cmd cmd, int argc, char **argv,
		 struct al_errors *errs)
{
	size_t before = al_errors_count(errs);
	bool skip_value = false;
	int i;

	memset(cli, 0, sizeof(*cli));
	cli->cmd = cmd;
	cli->result_fd = cli->audit_fd = -1;
	cli->flags = al_policy_new("command line");
	cli->errs = errs;
	for (i = 0; i < argc; i++) {
		const char *a = argv[i], *value = NULL;
		const struct option_def *o;
		struct al_error e = {0};

		if (strcmp(a, "--") == 0) {
			i++;
			break;
		}
		/* After an unknown option, a next word that is not an option may
		 * be its value: passed over, not taken for the command. */
		if (skip_value && (a[0] != '-' || a[1] == '\0')) {
			skip_value = false;
			continue;
		}
		skip_value = false;
		if (a[0] != '-' || a[1] == '\0')
			break; /* the command starts here */
		if (a[1] == '-') {
			const char *eq = strchr(a + 2, '=');
			o = find_long(a + 2, eq ? (size_t)(eq - a - 2) : strlen(a + 2));
			if (eq)
				value = eq + 1;
		} else {
			o = a[2] == '\0' ? find_short(a[1]) : NULL;
		}
		if (!o || !(o->cmds & cmd)) {
			al_errors_add(errs, EINVAL, NULL, NULL,
				      "%s: unknown option %s (see airlock %s --help)",
				      cmd_name(cmd), a, cmd_name(cmd));
			skip_value = !strchr(a, '=');
			continue;
		}
		if (o->arg && !value) {
			if (i + 1 >= argc) {
				al_errors_add(errs, EINVAL, NULL, NULL,
					      "%s: option %s needs an argument (%s)", cmd_name(cmd),
					      a, o->arg);
				i = argc; /* nothing left for a command */
				break;
			}
			value = argv[++i];
		} else if (!o->arg && value) {
			al_errors_add(errs, EINVAL, NULL, NULL, "%s: option --%s takes no argument",
				      cmd_name(cmd), o->name);
			continue;
		}
		if (o->apply(cli, o, value, &e) < 0) {
			if (e.msg[0]) /* else the option added its own errors */
				add_flag_error(errs, o, value, &e);
		} else if (!is_cli_only(o))
			cli->task_flags++;
	}
	if (i < argc) {
		if (cmd == AL_CMD_VERIFY)
			al_errors_add(errs, EINVAL, NULL, NULL, "%s: unexpected argument \"%s\"",
				      cmd_name(cmd), argv[i]);
		else
			for (; i < argc; i++)
				al_strv_push(&cli->flags->command, argv[i]);
	}
	cli->errs = NULL;
	return al_errors_count(errs) > before ? al_errors_first(errs, before, NULL) : 0;
}

void al_cli_clear(struct al_cli *cli)
{
	free(cli->policy_file);
	free(cli->operator_file);
	free(cli->result_file);
	free(cli->audit_file);
	al_policy_free(cli->flags);
	memset(cli, 0, sizeof(*cli));
	cli->result_fd = cli->audit_fd = -1;
}

void al_cli_print_options(FILE *f, enum al_cli_cmd cmd)
{
	for (size_t i = 0; i < AL_ARRAY_SIZE(options); i++) {
		const struct option_def *o = &options[i];
		char left[64];
		if (!(o->cmds & cmd))
			continue;
		snprintf(left, sizeof(left), "%c%c%s--%s%s%s", o->short_name ? '-' : ' ',
			 o->short_name ? o->short_name : ' ', o->short_name ? ", " : "  ", o->name,
			 o->arg ? " " : "", o->arg ? o->arg : "");
		fprintf(f, "  %-28s %s\n", left, o->help);
	}
}

int al_cli_policy(const struct al_cli *cli, struct al_policy **ret, struct al_errors *errs)
{
	_cleanup_(al_policy_freep) struct al_policy *p = NULL;

	if (cli->policy_file)
		al_policy_load_file_all(cli->policy_file, &p, errs);
	else
		p = al_policy_new("command line");
	if (al_errors_count(errs) > 0)
		return al_errors_first(errs, 0, NULL);
	al_policy_merge(p, cli->flags);
	*ret = TAKE_PTR(p);
	return 0;
}

void al_cli_print_errors(const struct al_errors *errs)
{
	for (size_t i = 0; i < errs->n; i++)
		al_err("%s", errs->v[i].text);
	if (errs->omitted)
		al_err("and %zu more error%s (only the first %d are shown)", errs->omitted,
		       errs->omitted == 1 ? "" : "s", AL_ERRORS_MAX);
}

bool al_cli_start(struct al_cli *cli, enum al_cli_cmd cmd, int argc, char **argv,
		  void (*usage)(FILE *f), struct al_errors *errs, int *ret_code)
{
	if (al_cli_parse(cli, cmd, argc, argv, errs) < 0)
		return false; /* the caller reports, with what else it finds */
	if (cli->help)
		usage(stdout);
	else if (cli->version)
		printf("airlock %s\n", AL_VERSION);
	if (cli->help || cli->version) {
		*ret_code = 0;
		return true;
	}
	return false;
}
