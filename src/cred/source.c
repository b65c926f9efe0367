/* Secret sources (source.h). */
#include "cred/source.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/sched.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/sys.h"
#include "core/util.h"

void al_secret_value_clear(struct al_secret_value *v)
{
	if (v->data) {
		explicit_bzero(v->data, v->len + 1);
		free(v->data);
	}
	*v = (struct al_secret_value){0};
}

/* Read fd to its end into a wiped-on-failure buffer, at most the cap;
 * deadline_ms (0: none) bounds the wait. */
static int read_all(int fd, uint64_t deadline_ms, const char *what, const char *from,
		    struct al_secret_value *ret, struct al_error *err)
{
	char *buf = xmalloc(AL_SECRET_VALUE_MAX + 1);
	size_t len = 0;
	int r = 0;

	for (;;) {
		if (deadline_ms) {
			uint64_t now = al_now_ms();
			struct pollfd p = {.fd = fd, .events = POLLIN};
			if (now >= deadline_ms) {
				r = al_error_set(err, ETIMEDOUT, "%s: %s did not finish in time",
						 what, from);
				break;
			}
			int n = poll(&p, 1, (int)(deadline_ms - now));
			if (n < 0 && errno == EINTR)
				continue;
			if (n == 0)
				continue; /* the deadline is checked above */
		}
		ssize_t n = read(fd, buf + len, AL_SECRET_VALUE_MAX + 1 - len);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0) {
			r = al_error_setsys(err, errno, "%s: cannot read %s", what, from);
			break;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len > AL_SECRET_VALUE_MAX) {
			r = al_error_set(err, EFBIG, "%s: %s gave more than %u KiB", what, from,
					 AL_SECRET_VALUE_MAX >> 10);
			break;
		}
	}
	if (r == 0 && len && buf[len - 1] == '\n')
		len--;
	if (r == 0 && len && buf[len - 1] == '\r')
		len--;
	if (r == 0 && len == 0)
		r = al_error_set(err, ENODATA, "%s: %s is empty", what, from);
	if (r == 0 && memchr(buf, '\0', len))
		r = al_error_set(err, EINVAL, "%s: %s holds a NUL byte", what, from);
	if (r < 0) {
		explicit_bzero(buf, AL_SECRET_VALUE_MAX + 1);
		free(buf);
		return r;
	}
	buf[len] = '\0';
	ret->data = buf;
	ret->len = len;
	return 0;
}

static int from_env(const struct al_secret_source *src, const char *what,
		    struct al_secret_value *ret, struct al_error *err)
{
	const char *v = getenv(src->env);

	if (!v)
		return al_error_set(err, ENOENT, "%s: airlock's environment has no %s", what,
				    src->env);
	size_t len = strlen(v);
	if (len == 0)
		return al_error_set(err, ENODATA, "%s: %s is empty", what, src->env);
	if (len > AL_SECRET_VALUE_MAX)
		return al_error_set(err, EFBIG, "%s: %s is longer than %u KiB", what, src->env,
				    AL_SECRET_VALUE_MAX >> 10);
	ret->data = xmalloc(len + 1);
	memcpy(ret->data, v, len + 1);
	ret->len = len;
	return 0;
}

static int from_file(const struct al_secret_source *src, const char *what,
		     struct al_secret_value *ret, struct al_error *err)
{
	_cleanup_close_ int fd = open(src->file, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	_cleanup_free_ char *from = xasprintf("file %s", src->file);

	if (fd < 0)
		return al_error_setsys(err, errno, "%s: cannot open %s", what, src->file);
	/* O_NONBLOCK only so that opening a FIFO cannot hang; reads block. */
	if (fcntl(fd, F_SETFL, 0) < 0)
		return al_error_setsys(err, errno, "%s: %s", what, src->file);
	return read_all(fd, 0, what, from, ret, err);
}

static int from_fd(const struct al_secret_source *src, const char *what,
		   struct al_secret_value *ret, struct al_error *err)
{
	_cleanup_free_ char *from = xasprintf("descriptor %d", src->fd);
	int r;

	if (fcntl(src->fd, F_GETFD) < 0)
		return al_error_setsys(err, errno, "%s: descriptor %d is not open", what, src->fd);
	r = read_all(src->fd, 0, what, from, ret, err);
	close(src->fd); /* read once; the sandbox never inherits it either way */
	return r;
}

/* The child: stdin from /dev/null, stdout into the pipe, stderr to
 * /dev/null (what a failing issuer says may hold what it was asked for),
 * its own process group so a timeout ends all of it.
 *
 * This process has no exit signal, so airlock waits for it whatever the
 * process's SIGCHLD is; exec would give it one back (and an ignored
 * SIGCHLD would let the kernel reap it, its status lost). So the command
 * runs in a child of its own, waited for here with SIGCHLD's default (in
 * this process only), and its end becomes this process's own: its exit
 * status, or the same signal. Raw clone3 for both, so nothing of libc's
 * thread state is trusted in a process libc did not fork. */
static void exec_source(char *const *argv, int out)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC), status;
	struct clone_args args = {.exit_signal = SIGCHLD};
	struct rlimit no_core = {0, 0};
	sigset_t none;
	pid_t pid;

	if (null < 0 || dup2(null, 0) < 0 || dup2(out, 1) < 0 || dup2(null, 2) < 0)
		_exit(126);
	/* Nothing else of airlock's: not another secret's descriptor. */
	if (al_sys_close_range(3, ~0U, 0) < 0)
		_exit(126);
	setpgid(0, 0);
	signal(SIGPIPE, SIG_DFL);
	signal(SIGCHLD, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	pid = (pid_t)al_sys_clone3(&args, sizeof(args));
	if (pid < 0)
		_exit(126);
	if (pid == 0) {
		execv(argv[0], argv);
		_exit(errno == ENOENT ? 127 : 126);
	}
	close(0);
	close(1);
	close(2);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			_exit(126);
	if (WIFEXITED(status))
		_exit(WEXITSTATUS(status));
	setrlimit(RLIMIT_CORE, &no_core);
	signal(WTERMSIG(status), SIG_DFL);
	kill(getpid(), WTERMSIG(status));
	_exit(126);
}

/* Wait for the command through its pidfd until deadline_ms: true once it
 * has exited (not reaped yet). */
static bool wait_exit(int pidfd, uint64_t deadline_ms)
{
	for (;;) {
		uint64_t now = al_now_ms(), left = deadline_ms > now ? deadline_ms - now : 0;
		struct pollfd p = {.fd = pidfd, .events = POLLIN};
		int n = poll(&p, 1, left > INT_MAX ? INT_MAX : (int)left);
		if (n < 0 && errno == EINTR)
			continue;
		return n > 0;
	}
}

static int from_command(const struct al_secret_source *src, const char *what,
			struct al_secret_value *ret, struct al_error *err)
{
	_cleanup_free_ char *from = xasprintf("command %s", src->argv[0]);
	_cleanup_close_ int pidfd = -1;
	int pipefd[2], r;
	uint64_t deadline = al_now_ms() + src->timeout_ms;
	/* No exit signal (exec_source()): the process's SIGCHLD (a handler
	 * of a daemon's loop, or ignored by whoever started airlock, which
	 * would let the kernel reap the command and hide its status) is
	 * neither used nor changed. It is watched and waited for through its
	 * pidfd alone. */
	struct clone_args args = {.flags = CLONE_PIDFD, .pidfd = (uint64_t)(uintptr_t)&pidfd};
	pid_t pid;

	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return al_error_setsys(err, errno, "%s: pipe", what);
	pid = (pid_t)al_sys_clone3(&args, sizeof(args));
	if (pid < 0) {
		r = -errno;
		close(pipefd[0]);
		close(pipefd[1]);
		return al_error_setsys(err, -r, "%s: fork", what);
	}
	if (pid == 0)
		exec_source(src->argv, pipefd[1]);
	setpgid(pid, pid); /* as the child does: whichever runs first */
	close(pipefd[1]);
	r = read_all(pipefd[0], deadline, what, from, ret, err);
	close(pipefd[0]);
	/* It had until the deadline to exit too. Then whatever it left in its
	 * process group (set up by the child) is killed, while it is not
	 * reaped yet (so that group cannot be anyone else's), and it is. */
	bool exited = wait_exit(pidfd, deadline);
	kill(-pid, SIGKILL);
	al_sys_pidfd_send_signal(pidfd, SIGKILL); /* in case it had not got to setpgid */
	siginfo_t info = {0};
	int w;
	while ((w = waitid(P_PIDFD, (id_t)pidfd, &info, WEXITED | __WALL)) < 0 && errno == EINTR)
		;
	if (!exited && r == 0) {
		al_secret_value_clear(ret);
		r = al_error_set(err, ETIMEDOUT, "%s: %s did not exit in time", what, src->argv[0]);
	}
	if (w < 0) {
		al_secret_value_clear(ret);
		return r < 0
			   ? r
			   : al_error_setsys(err, errno, "%s: waiting for %s", what, src->argv[0]);
	}
	if (r < 0 && r != -ENODATA)
		return r;
	if (info.si_code == CLD_EXITED && info.si_status == 0 && r == 0)
		return 0;
	al_secret_value_clear(ret);
	if (info.si_code != CLD_EXITED)
		return al_error_set(err, EIO, "%s: %s was killed by signal %d", what, src->argv[0],
				    info.si_status);
	if (info.si_status == 127)
		return al_error_set(err, ENOENT, "%s: %s could not be run (not found)", what,
				    src->argv[0]);
	if (info.si_status != 0)
		return al_error_set(err, EIO,
				    "%s: %s failed with exit status %d (its output is not shown: "
				    "it may hold what it was asked for)",
				    what, src->argv[0], info.si_status);
	return al_error_set(err, ENODATA, "%s: %s wrote nothing", what, src->argv[0]);
}

int al_secret_source_read(const struct al_secret_source *src, const char *what,
			  struct al_secret_value *ret, struct al_error *err)
{
	*ret = (struct al_secret_value){0};
	switch (src->kind) {
	case AL_SOURCE_ENV:
		return from_env(src, what, ret, err);
	case AL_SOURCE_FILE:
		return from_file(src, what, ret, err);
	case AL_SOURCE_FD:
		return from_fd(src, what, ret, err);
	case AL_SOURCE_COMMAND:
		return from_command(src, what, ret, err);
	case AL_SOURCE_MINT:
		break;
	}
	return al_error_set(err, EINVAL, "%s: no source to read", what);
}
