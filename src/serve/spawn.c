/* The daemon's child processes, forked and exec'd by the monitor: each
 * sandbox's session process, and the front.
 *
 * The front (serve-design; review finding 3) is a fresh program,
 * `airlock-serve __front`, forked and exec'd by the monitor before the
 * monitor reads any token, key or policy. Before the exec, as root: its
 * channel at fd 3 and /dev/null on 0-2, every other descriptor closed,
 * the capability bounding set emptied, nobody's uid and gid with no
 * supplementary groups, no_new_privs; the exec gives it an empty
 * environment and none of the monitor's memory. It confines itself
 * further (api/confine.c: landlock, seccomp) once libmicrohttpd is up. */
#include "serve/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/sys.h"

#define NOBODY 65534

/* A socketpair, and a child that gets its end at fd 3 (with only 0-2
 * besides, and keep when it is above 3: the session's binary, for its
 * fexecve), dies with the monitor, and runs child(). */
static pid_t spawn(void (*child)(int fd, pid_t parent, const void *arg), const void *arg, int keep,
		   int *chan, struct al_error *err)
{
	int sv[2];
	pid_t parent = getpid();

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return al_error_setsys(err, errno, "socketpair");
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		close(sv[0]);
		close(sv[1]);
		return al_error_setsys(err, e, "fork");
	}
	if (pid == 0) {
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent ||
		    dup2(sv[1], 3) < 0)
			_exit(125);
		if (keep > 4)
			al_sys_close_range(4, (unsigned)keep - 1, 0);
		al_sys_close_range(keep > 3 ? (unsigned)keep + 1 : 4, ~0U, 0);
		child(3, parent, arg);
		_exit(127);
	}
	close(sv[1]);
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	*chan = sv[0];
	return pid;
}

/* exec `__session`: the static airlock's descriptor when the daemon has
 * one (close-on-exec, so the session process does not keep it), else
 * this binary. */
static void session_child(int fd, pid_t parent, const void *arg)
{
	const struct al_serve_config *cfg = arg;
	char *argv[] = {(char *)"airlock", (char *)"__session", NULL};

	(void)fd;
	(void)parent;
	if (cfg->exe_fd > 3)
		fexecve(cfg->exe_fd, argv, environ);
	else
		execv(cfg->exe, argv);
}

pid_t al_serve_spawn_session(const struct al_serve_config *cfg, int *chan, struct al_error *err)
{
	return spawn(session_child, cfg, cfg->exe_fd, chan, err);
}

struct front_args {
	const struct al_serve_config *cfg;
	uint64_t first_req;
};

/* In the front's child: as nobody, with nothing, exec `__front`. */
static void front_child(int fd, pid_t parent, const void *arg)
{
	const struct front_args *fa = arg;
	const struct al_serve_config *cfg = fa->cfg;
	char a[5][24];

	(void)fd;
	(void)parent;
	for (int s = 1; s < NSIG; s++)
		signal(s, SIG_DFL);
	int null = open("/dev/null", O_RDWR);
	if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0)
		_exit(125);
	if (null > 3)
		close(null);
	/* Nothing may come back through an exec: every capability out of
	 * the bounding set (until the kernel knows no more of them). */
	for (int cap = 0; cap < 64; cap++)
		if (prctl(PR_CAPBSET_READ, cap, 0, 0, 0) < 0)
			break;
		else if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EPERM)
			_exit(125);
	if (geteuid() == 0 && (setgroups(0, NULL) < 0 || setresgid(NOBODY, NOBODY, NOBODY) < 0 ||
			       setresuid(NOBODY, NOBODY, NOBODY) < 0))
		_exit(125);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		_exit(125);
	snprintf(a[0], sizeof(a[0]), "%u", cfg->max_clients);
	snprintf(a[1], sizeof(a[1]), "%u", cfg->client_timeout_s);
	snprintf(a[2], sizeof(a[2]), "%u",
		 cfg->request_timeout_s ? cfg->request_timeout_s : cfg->client_timeout_s);
	snprintf(a[3], sizeof(a[3]), "%" PRIu64, fa->first_req);
	snprintf(a[4], sizeof(a[4]), "%d", cfg->no_landlock ? 1 : 0);
	char *argv[] = {(char *)"airlock", (char *)"__front", a[0], a[1], a[2], a[3], a[4], NULL};
	char *envp[] = {NULL};
	execve(cfg->exe, argv, envp);
}

pid_t al_serve_front_spawn(const struct al_serve_config *cfg, uint64_t first_req, int *chan,
			   struct al_error *err)
{
	struct front_args fa = {cfg, first_req};

	/* Nothing kept: the front closes the session binary's descriptor too. */
	return spawn(front_child, &fa, -1, chan, err);
}
