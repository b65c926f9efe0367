/* The order of the child's setup, as one table, and the sandbox init.
 *
 * Why this order:
 * - The supervisor writes our id maps while we wait; nothing that creates
 *   files may run before that (wait-for-parent, become-ns-root).
 * - All mounts happen while we still hold CAP_SYS_ADMIN in our namespace,
 *   and pivot_root comes after the tree is complete, because landlock path
 *   rules refer to the final view.
 * - Privileges are dropped before no_new_privs, landlock and seccomp; with
 *   no_new_privs set, seccomp can come last and need not allow setuid or
 *   capset. Landlock requires no_new_privs (or CAP_SYS_ADMIN).
 * - seccomp is the last step: after it, mount and friends are gone. Then
 *   the supervisor checks every layer from outside (verify) before the
 *   command starts.
 *
 * - loopback and gateway come right after become-ns-root: they only touch
 *   our network namespace, and the supervisor starts the gateway's process
 *   and installs the capture rules on the socket we hand it while we go on
 *   with the mounts (on another core).
 * - terminal comes right after pivot-root: the pty must come from the
 *   sandbox's own /dev/pts in the final view, and it replaces the /dev/null
 *   that stdio left on 0-2 (with tty there are no pipes).
 * - ns-limits comes before wait-for-parent: the user namespace's own limits
 *   (/proc/sys/user) need only the capabilities a new user namespace
 *   starts with, not the id maps, so they are written while the
 *   supervisor writes the maps. They forbid no namespace we make later
 *   (only user namespaces and fanotify groups).
 * - cgroup is the first step once the parent has released us: from there
 *   on everything the child allocates is charged to the run (v2 clones us
 *   into it; on v1 the child moves itself in, see al_cgroup_task_fds).
 *
 * Namespaces at each stage: clone3 put us in new user, mount, pid, net,
 * ipc, uts and cgroup namespaces at once; we are pid 1 of the pid namespace
 * from the first step to the end. */
#include "backend/native/child.h"

#include <errno.h>
#include <sys/syscall.h>
#include <linux/seccomp.h>
#include <linux/filter.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/sys.h"
#include "backend/native/steps.h"

struct step {
	const char *name;
	int (*run)(struct al_child *c);
};

/* clang-format off */
static const struct step steps[] = {
	{"die-with-parent",  step_die_with_parent},
	{"ns-limits",        step_ns_limits},
	{"wait-for-parent",  step_wait_parent},
	{"cgroup",           step_cgroup_namespace},
	{"become-ns-root",   step_become_ns_root},
	{"loopback",         step_loopback},
	{"gateway",          step_gateway_listeners},
	{"sysctl",           step_sysctl},
	{"stdio",            step_stdio},
	{"private-mounts",   step_private_mounts},
	{"staging-root",     step_staging_root},
	{"build-root",       step_build_root},
	{"pivot-root",       step_pivot_root},
	{"terminal",         step_terminal},
	{"hostname",         step_hostname},
	{"rlimits",          step_rlimits},
	{"close-fds",        step_close_fds},
	{"new-session",      step_new_session},
	{"drop-privileges",  step_drop_privileges},
	{"no-new-privs",     step_no_new_privs},
	{"landlock",         step_landlock},
	{"seccomp",          step_seccomp},
	{"verify",           step_report_ready},
};
/* clang-format on */

const char *al_sandbox_step_name(size_t i)
{
	return i < sizeof(steps) / sizeof(steps[0]) ? steps[i].name : NULL;
}

/* Signals the init passes on to the command's process group. */
static const int forwarded[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

static void send_msg(int fd, uint32_t type, int err, int status, const char *step, const char *msg)
{
	al_child_send(fd, type, err, status, step, msg, -1);
}

static void noop_handler(int sig)
{
	(void)sig;
}

int al_own_seccomp(const struct al_plan *p)
{
	if (!p->root || !p->root->seccomp_len)
		return 0;
	struct sock_fprog prog = {.len = (unsigned short)p->root->seccomp_len,
				  .filter = p->root->seccomp};
	return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
}

int al_exec_path(char *const *argv, char *const *envp)
{
	const char *path = AL_DEFAULT_PATH;
	const char *file = argv[0];
	char buf[4096];
	int best = ENOENT;

	if (strchr(file, '/')) {
		execve(file, argv, envp);
		return errno;
	}
	for (size_t i = 0; envp[i]; i++)
		if (strncmp(envp[i], "PATH=", 5) == 0)
			path = envp[i] + 5;
	for (const char *s = path;; s++) {
		const char *end = strchrnul(s, ':');
		int n = snprintf(buf, sizeof(buf), "%.*s%s%s", (int)(end - s), s,
				 end == s ? "" : "/", file);
		if (n > 0 && (size_t)n < sizeof(buf)) {
			execve(buf, argv, envp);
			if (errno != ENOENT && errno != ENOTDIR)
				best = errno;
		}
		if (*end == '\0')
			break;
		s = end;
	}
	return best;
}

/* What the command's process reports on init's errpipe when it does not
 * get to run the command. */
struct start_error {
	int err;
	bool terminal; /* making the pty its controlling terminal failed */
};

static _Noreturn void run_command(const struct al_plan *p, int sync, int errpipe)
{
	struct start_error se = {0};
	sigset_t none;

	/* Every disposition back to its default (the supervisor ignores
	 * SIGPIPE, and clone kept that), and nothing blocked. */
	sigemptyset(&none);
	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);
	sigprocmask(SIG_SETMASK, &none, NULL);
	/* setup ran with 0 for exact modes; the command gets the usual, or
	 * a container's own */
	umask(p->root ? (mode_t)p->root->umask : 022);
	close(sync); /* the sync socket is init's alone; the cgroup fds are
		      * close-on-exec */
	/* A session of its own; with tty, the pty on 0-2 becomes its
	 * controlling terminal (0: never steal one), so job control works and
	 * ^C reaches its foreground group through the pty's line discipline. */
	if (setsid() < 0) {
		se.err = errno;
	} else if (p->tty && ioctl(0, TIOCSCTTY, 0) < 0) {
		se.err = errno;
		se.terminal = true;
	} else if (chdir(p->workdir) < 0 || al_own_seccomp(p) < 0) {
		se.err = errno;
	} else {
		se.err = al_exec_path(p->argv, p->envp);
	}
	(void)!write(errpipe, &se, sizeof(se));
	_exit(se.err == ENOENT ? 127 : 126);
}

/* The command is gone: kill and reap everything else in the namespace
 * before reporting, so that once the supervisor has the status the sandbox
 * holds no process but this exiting init. Orphans are reparented to us, so
 * ECHILD means the namespace is empty; looping on kill(-1) closes the race
 * with a process that was forking. */
_Noreturn void al_init_finish(int sync, int status, const int *cg_leave, size_t n_cg)
{
	for (;;) {
		kill(-1, SIGKILL);
		if (waitpid(-1, NULL, 0) < 0 && errno == ECHILD)
			break;
	}
	/* Leave the run's cgroups (v1), so the supervisor can remove them
	 * while our own exit winds down. */
	for (size_t i = 0; i < n_cg; i++)
		(void)!write(cg_leave[i], "0", 1);
	struct rusage ru;
	struct al_sync_msg m = {.type = AL_SYNC_EXIT, .status = status};
	if (getrusage(RUSAGE_CHILDREN, &ru) == 0) {
		m.utime_us = (int64_t)ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec;
		m.stime_us = (int64_t)ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec;
	}
	while (send(sync, &m, sizeof(m), MSG_NOSIGNAL) < 0 && errno == EINTR)
		;
	_exit(0);
}

/* Init: start the command, pass signals on, reap everything, report the
 * command's status and exit — which kills whatever is left. */
_Noreturn void al_sandbox_init(const struct al_plan *p, int sync, const int *cg_leave, size_t n_cg)
{
	struct start_error se = {0};
	int errpipe[2];
	sigset_t set;
	pid_t cmd;
	ssize_t n;

	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++) {
		/* A namespace init ignores signals left at SIG_DFL, even blocked
		 * ones; a real handler makes them deliverable to sigwaitinfo. */
		signal(forwarded[i], noop_handler);
		sigaddset(&set, forwarded[i]);
	}
	signal(AL_SIGNAL_STOP_ALL, noop_handler);
	sigaddset(&set, AL_SIGNAL_STOP_ALL);
	sigprocmask(SIG_BLOCK, &set, NULL);

	if (pipe2(errpipe, O_CLOEXEC) < 0) {
		send_msg(sync, AL_SYNC_ERROR, errno, 0, "exec", "pipe2");
		_exit(125);
	}
	/* vfork: the child only resets signals, calls setsid/chdir and execs,
	 * so sharing our memory until then is safe and saves copying it. */
	cmd = vfork();
	if (cmd < 0) {
		send_msg(sync, AL_SYNC_ERROR, errno, 0, "exec", "fork of the command");
		_exit(125);
	}
	if (cmd == 0) {
		close(errpipe[0]);
		run_command(p, sync, errpipe[1]);
	}
	close(errpipe[1]);
	/* Init needs no stdio; holding the pipes would delay their EOF. */
	close(0);
	close(1);
	close(2);
	do
		n = read(errpipe[0], &se, sizeof(se));
	while (n < 0 && errno == EINTR);
	close(errpipe[0]);
	if (n == (ssize_t)sizeof(se) && se.terminal)
		send_msg(sync, AL_SYNC_ERROR, se.err, 0, "terminal",
			 "making the pty the command's controlling terminal (TIOCSCTTY)");
	else if (n == (ssize_t)sizeof(se))
		send_msg(sync, AL_SYNC_EXEC_FAILED, se.err, 0, "exec", p->argv[0]);
	else
		send_msg(sync, AL_SYNC_RUNNING, 0, cmd, NULL, NULL);

	for (;;) {
		siginfo_t si;
		int sig = sigwaitinfo(&set, &si);
		if (sig < 0)
			continue;
		if (sig == AL_SIGNAL_STOP_ALL) {
			kill(-1, SIGKILL); /* the SIGCHLD that follows ends the run */
			continue;
		}
		if (sig != SIGCHLD) {
			if (kill(-cmd, sig) < 0)
				kill(cmd, sig);
			continue;
		}
		for (;;) {
			int status;
			pid_t pid = waitpid(-1, &status, WNOHANG);
			if (pid <= 0)
				break;
			if (pid == cmd)
				al_init_finish(sync, status, cg_leave, n_cg);
		}
	}
}

_Noreturn void al_sandbox_child(const struct al_plan *plan, const struct al_native_plan *np,
				const struct al_child_fds *fds)
{
	struct al_child c = {.plan = plan,
			     .np = np,
			     .fds = fds,
			     .sync = fds->sync,
			     /* A container's user; otherwise always the sandbox's */
			     .uid = plan->root ? plan->uid : AL_SANDBOX_UID,
			     .gid = plan->root ? plan->gid : AL_SANDBOX_GID};

	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		int r = steps[i].run(&c);
		if (r < 0) {
			send_msg(c.sync, AL_SYNC_ERROR, -r, 0, steps[i].name, c.msg);
			_exit(125);
		}
	}
	if (fds->session)
		al_session_init(plan, c.sync, c.cg_leave, c.n_cg);
	al_sandbox_init(plan, c.sync, c.cg_leave, c.n_cg);
}
