/* The fake backend: no isolation but a pid namespace (so that init's
 * kill(-1) stays inside it). The command runs through the same sandbox
 * init and supervisor as native, so tests can check exit codes, signal
 * forwarding, timeouts and output relay through the run layer. It is not
 * reachable by name from the CLI or a policy. */
#include "backend/backend.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/sys.h"
#include "backend/native/child.h"
#include "backend/native/monitor.h"
#include "backend/native/state.h"

static int fake_probe(const struct al_plan *plan, struct al_error *err)
{
	if (plan->tty)
		return al_error_set(err, EOPNOTSUPP, "the fake backend has no terminal (tty)");
	return 0;
}

static int fake_describe(const struct al_plan *plan, FILE *f, json_t *json, struct al_error *err)
{
	static const char what[] = "the host's, unconfined (fake backend: tests only)";
	(void)plan;
	(void)err;
	if (f)
		fprintf(f, "filesystem: %s\n", what);
	else
		json_object_set_new(json, "filesystem", json_string(what));
	return 0;
}

static int fake_prepare(struct al_sandbox *sb, struct al_error *err)
{
	(void)err;
	al_native_state_new(sb);
	return 0;
}

static int fake_start(struct al_sandbox *sb, struct al_error *err)
{
	int sync[2] = {-1, -1}, in[2] = {-1, -1}, out[2] = {-1, -1}, er[2] = {-1, -1};
	int pidfd = -1, r = 0;
	/* A pid namespace (in a user namespace, so no privilege is needed):
	 * init's kill(-1) at the end must reach the command's processes and
	 * nothing else. No id maps: the command runs as the overflow user. */
	struct clone_args args = {
	    .flags = CLONE_NEWUSER | CLONE_NEWPID | CLONE_PIDFD,
	    .pidfd = (uint64_t)(uintptr_t)&pidfd,
	    .exit_signal = SIGCHLD,
	};
	long pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sync) < 0 ||
	    pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(er, O_CLOEXEC) < 0) {
		r = al_error_setsys(err, errno, "fake: creating pipes");
		goto out;
	}
	pid = al_sys_clone3(&args, sizeof(args));
	if (pid < 0) {
		r = al_error_setsys(err, errno, "fake: clone3 into new user and pid namespaces");
		goto out;
	}
	if (pid == 0) {
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || dup2(in[0], 0) < 0 ||
		    dup2(out[1], 1) < 0 || dup2(er[1], 2) < 0)
			_exit(125);
		/* Keep only 0, 1, 2 and our end of sync: init holding a pipe
		 * end would hide the command's EOF. */
		int *all[] = {&sync[0], &in[0], &in[1], &out[0], &out[1], &er[0], &er[1]};
		for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
			if (*all[i] > 2)
				al_closep(all[i]);
		if (sb->session)
			al_session_init(sb->plan, sync[1], NULL, 0);
		al_sandbox_init(sb->plan, sync[1], NULL, 0);
	}
	sb->state->pid = (pid_t)pid;
	sb->state->pidfd = pidfd;
	sb->state->sync = TAKE_FD(sync[0]);
	sb->stdin_wr = TAKE_FD(in[1]);
	sb->stdout_rd = TAKE_FD(out[0]);
	sb->stderr_rd = TAKE_FD(er[0]);
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

static int fake_start_all(struct al_sandbox *sb, struct al_error *err)
{
	int r = fake_start(sb, err);
	return r < 0 ? r : al_monitor_start(sb, err);
}

static void fake_destroy(struct al_sandbox *sb)
{
	if (!sb->state)
		return;
	al_monitor_release_all(sb);
	al_native_state_free(sb);
}

const struct al_backend_ops al_backend_fake = {
    .name = "fake",
    .probe = fake_probe,
    .describe = fake_describe,
    .prepare = fake_prepare,
    .start = fake_start_all,
    .release = al_monitor_release,
    .stop = al_monitor_stop,
    .kill = al_monitor_kill,
    .finish = al_monitor_finish,
    .destroy = fake_destroy,
    .exec = al_monitor_exec,
    .exec_signal = al_monitor_exec_signal,
};
