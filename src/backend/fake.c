/* The fake backend: no isolation at all. The command runs through the same
 * sandbox init and supervisor as native, so tests can check exit codes,
 * signal forwarding, timeouts and output relay without privileges. It is
 * not reachable by name from the CLI or a policy. */
#include "backend/backend.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/sys.h"
#include "sandbox/sandbox.h"

static int fake_probe(const struct al_plan *plan, struct al_error *err)
{
	(void)plan;
	(void)err;
	return 0;
}

static int fake_prepare(struct al_sandbox *sb, struct al_error *err)
{
	(void)sb;
	(void)err;
	return 0;
}

static int fake_start(struct al_sandbox *sb, struct al_error *err)
{
	int sync[2] = {-1, -1}, in[2] = {-1, -1}, out[2] = {-1, -1}, er[2] = {-1, -1};
	pid_t pid;
	int r = 0;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sync) < 0 ||
	    pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(er, O_CLOEXEC) < 0) {
		r = al_error_setsys(err, errno, "fake: creating pipes");
		goto out;
	}
	pid = fork();
	if (pid < 0) {
		r = al_error_setsys(err, errno, "fake: fork");
		goto out;
	}
	if (pid == 0) {
		if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0 || dup2(er[1], 2) < 0)
			_exit(125);
		al_sandbox_init(sb->plan, sync[1], NULL, 0);
	}
	sb->started = true;
	sb->proc.pid = pid;
	sb->proc.pidfd = al_sys_pidfd_open(pid, 0);
	if (sb->proc.pidfd < 0) {
		r = al_error_setsys(err, errno, "fake: pidfd_open");
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		goto out;
	}
	sb->proc.sync = TAKE_FD(sync[0]);
	sb->proc.stdin_wr = TAKE_FD(in[1]);
	sb->proc.stdout_rd = TAKE_FD(out[0]);
	sb->proc.stderr_rd = TAKE_FD(er[0]);
out:
	al_closep(&sync[0]);
	al_closep(&sync[1]);
	al_closep(&in[0]);
	al_closep(&in[1]);
	al_closep(&out[0]);
	al_closep(&out[1]);
	al_closep(&er[0]);
	al_closep(&er[1]);
	return r;
}

static int fake_wait(struct al_sandbox *sb, struct al_run_result *res, struct al_error *err)
{
	return al_supervise(sb->plan, &sb->proc, NULL, sb->audit, res, err);
}

static int fake_kill(struct al_sandbox *sb, int sig)
{
	return al_sys_pidfd_send_signal(sb->proc.pidfd, sig) < 0 ? -errno : 0;
}

static void fake_destroy(struct al_sandbox *sb)
{
	al_sandbox_release(sb);
}

const struct al_backend_ops al_backend_fake = {
    .name = "fake",
    .probe = fake_probe,
    .prepare = fake_prepare,
    .start = fake_start,
    .wait = fake_wait,
    .kill = fake_kill,
    .destroy = fake_destroy,
};
