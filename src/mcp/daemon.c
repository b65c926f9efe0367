/* The MCP server's private daemon, when no --socket is given: `airlock
 * serve --socket DIR/serve.sock` from the same binary (/proc/self/exe), in
 * a new 0700 directory, its stdout and stderr on the MCP server's stderr
 * (stdout is the protocol), ended by PR_SET_PDEATHSIG should the MCP
 * server die, and by SIGTERM and a wait at its end; then the directory
 * goes. One found ended (killed, crashed) before a call is started anew. */
#include "mcp/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "core/util.h"

#define START_TIMEOUT_MS 20000
#define STOP_TIMEOUT_MS	 20000

static void sleep_ms(int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
}

/* Wait up to ms for pid to end; true when it did (reaped). */
static bool wait_end(pid_t pid, int ms)
{
	for (int waited = 0;; waited += 20) {
		pid_t r = waitpid(pid, NULL, WNOHANG);
		if (r == pid || (r < 0 && errno == ECHILD))
			return true;
		if (waited >= ms)
			return false;
		sleep_ms(20);
	}
}

int mcp_daemon_start(struct mcp *m, struct al_error *err)
{
	const char *base = getenv("TMPDIR");
	char *dir = xasprintf("%s/airlock-mcp-XXXXXX", base && *base == '/' ? base : "/tmp");
	pid_t parent = getpid(), pid;

	/* mkdtemp makes it 0700. */
	if (!mkdtemp(dir)) {
		int e = errno;
		int r = al_error_setsys(err, e,
					"mcp: cannot make %s for the private daemon (in %s, the "
					"$TMPDIR; give a writable one, or --socket)",
					dir, base && *base == '/' ? base : "/tmp");
		free(dir);
		return r;
	}
	m->daemon_dir = dir;
	m->socket = xasprintf("%s/serve.sock", dir);
	pid = fork();
	if (pid < 0)
		return al_error_setsys(err, errno, "mcp: fork");
	if (pid == 0) {
		/* The daemon ends its sandboxes on SIGTERM: the MCP server's
		 * death sends it that. A parent already gone: end now. */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent)
			_exit(125);
		/* A session of its own: a ^C at the host's terminal reaches the
		 * MCP server, which deletes its sandbox before it stops this. */
		setsid();
		int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (null < 0 || dup2(null, 0) < 0 || dup2(2, 1) < 0)
			_exit(125);
		signal(SIGPIPE, SIG_DFL);
		execl("/proc/self/exe", "airlock", "serve", "--socket", m->socket, (char *)NULL);
		fprintf(stderr, "airlock mcp: exec /proc/self/exe serve: %s\n", strerror(errno));
		_exit(125);
	}
	m->daemon_pid = pid;
	/* Ready once it answers its health check. */
	for (int waited = 0; waited < START_TIMEOUT_MS; waited += 20) {
		struct al_mcp_http_answer a = {0};
		struct al_error e = {0};
		if (access(m->socket, F_OK) == 0 &&
		    al_mcp_http_request(m->socket, "GET", "/v1/health", NULL, 0, NULL, 2000,
					m->stop, &a, &e) == 0) {
			int status = a.status;
			al_mcp_http_answer_clear(&a);
			if (status == 200)
				return 0;
		}
		if (waitpid(pid, NULL, WNOHANG) == pid) {
			m->daemon_pid = 0;
			return al_error_set(
			    err, ECHILD,
			    "mcp: the private daemon (airlock serve) ended at once; "
			    "its messages are above");
		}
		if (m->stop && *m->stop)
			return al_error_set(err, EINTR, "mcp: interrupted by a signal");
		sleep_ms(20);
	}
	return al_error_set(err, ETIMEDOUT, "mcp: the private daemon did not answer in %d s",
			    START_TIMEOUT_MS / 1000);
}

void mcp_daemon_stop(struct mcp *m)
{
	if (m->daemon_pid > 0) {
		kill(m->daemon_pid, SIGTERM);
		if (!wait_end(m->daemon_pid, STOP_TIMEOUT_MS)) {
			al_warn("mcp: the private daemon did not end in %d s of SIGTERM: killed",
				STOP_TIMEOUT_MS / 1000);
			kill(m->daemon_pid, SIGKILL);
			waitpid(m->daemon_pid, NULL, 0);
		}
		m->daemon_pid = 0;
	}
	if (m->daemon_dir) {
		/* The daemon removes its socket; one left by a killed daemon goes here. */
		char *sock = xasprintf("%s/serve.sock", m->daemon_dir);
		unlink(sock);
		free(sock);
		if (rmdir(m->daemon_dir) < 0)
			al_warn("mcp: rmdir %s: %s", m->daemon_dir, strerror(errno));
		free(m->daemon_dir);
		m->daemon_dir = NULL;
	}
}

const char *mcp_daemon_ended(struct mcp *m)
{
	int st;

	if (!m->daemon_how && m->daemon_pid > 0 &&
	    waitpid(m->daemon_pid, &st, WNOHANG) == m->daemon_pid) {
		m->daemon_pid = 0;
		m->daemon_how = WIFSIGNALED(st) ? xasprintf("killed by signal %d, %s", WTERMSIG(st),
							    strsignal(WTERMSIG(st)))
						: xasprintf("exit status %d", WEXITSTATUS(st));
	}
	return m->daemon_how;
}

int mcp_daemon_restart(struct mcp *m, char **note, struct al_error *err)
{
	*note = NULL;
	if (!mcp_daemon_ended(m))
		return 0;
	*note = xasprintf("the private daemon (airlock serve) had ended (%s), and the session's "
			  "sandbox with it: a new daemon and sandbox were started, and what the "
			  "old sandbox held is gone",
			  m->daemon_how);
	free(m->daemon_how);
	m->daemon_how = NULL;
	mcp_daemon_stop(m);
	free(m->socket);
	m->socket = NULL;
	mcp_sandbox_lost(m);
	return mcp_daemon_start(m, err);
}
