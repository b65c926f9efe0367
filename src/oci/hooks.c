/* The config's hooks (oci.h), where the operator policy allows them
 * ("oci": {"hooks": true}): run on the host as root, in the runtime's own
 * namespaces, each with the container's state on its stdin, within its
 * timeout (at most AL_OCI_HOOK_MAX_S). prestart and createRuntime run in
 * create once the sandbox is built and before the engine is told it is
 * created; poststart once start has started the process; poststop in
 * delete. createContainer and startContainer would run inside the
 * container: airlock runs nothing of the engine's in a sandbox, and
 * refuses them (config.c). They are kept in the state directory's
 * hooks.json for the later verbs. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/sys.h"
#include "core/util.h"
#include "oci/internal.h"

#define AL_OCI_HOOK_MAX_S 120

static const char *const kind_names[AL_OCI_HOOK_KINDS] = {
    "prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop"};

json_t *al_oci_hooks_json(const struct al_oci_config *c)
{
	json_t *o = json_object();

	for (int k = 0; k < AL_OCI_HOOK_KINDS; k++) {
		if (!c->n_hooks[k])
			continue;
		json_t *a = json_array();
		for (size_t i = 0; i < c->n_hooks[k]; i++) {
			const struct al_oci_hook *h = &c->hooks[k][i];
			json_t *args = json_array(), *env = json_array();
			for (size_t j = 0; h->args && h->args[j]; j++)
				json_array_append_new(args, json_string(h->args[j]));
			for (size_t j = 0; h->env && h->env[j]; j++)
				json_array_append_new(env, json_string(h->env[j]));
			json_array_append_new(a, json_pack("{s:s, s:o, s:o, s:i}", "path", h->path,
							   "args", args, "env", env, "timeout",
							   h->timeout));
		}
		json_object_set_new(o, kind_names[k], a);
	}
	return o;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One hook: 0, or -errno with err saying how it failed. */
static int run_one(json_t *h, const char *state, const char *bundle, struct al_error *err)
{
	const char *path = json_string_value(json_object_get(h, "path"));
	json_t *args = json_object_get(h, "args"), *env = json_object_get(h, "env"), *v;
	json_int_t timeout = json_integer_value(json_object_get(h, "timeout"));
	_cleanup_(al_strv_freep) char **argv = NULL;
	_cleanup_(al_strv_freep) char **envp = NULL;
	size_t i;
	int in[2];

	if (!path || path[0] != '/')
		return al_error_set(err, EINVAL, "a hook without an absolute path");
	json_array_foreach(args, i, v)
	    al_strv_push(&argv, json_string_value(v) ? json_string_value(v) : "");
	if (!argv)
		al_strv_push(&argv, path);
	json_array_foreach(env, i, v) if (json_string_value(v))
	    al_strv_push(&envp, json_string_value(v));
	if (!envp)
		envp = xcalloc(1, sizeof(*envp));
	if (timeout <= 0 || timeout > AL_OCI_HOOK_MAX_S)
		timeout = AL_OCI_HOOK_MAX_S;
	if (pipe2(in, O_CLOEXEC) < 0)
		return al_error_setsys(err, errno, "hook %s: pipe", path);
	pid_t pid = fork();
	if (pid < 0) {
		close(in[0]);
		close(in[1]);
		return al_error_setsys(err, errno, "hook %s: fork", path);
	}
	if (pid == 0) {
		dup2(in[0], 0);
		int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
		if (null >= 0) {
			dup2(null, 1);
			dup2(null, 2);
		}
		if (bundle && chdir(bundle) < 0)
			_exit(126);
		execve(path, argv, envp);
		_exit(127);
	}
	close(in[0]);
	(void)al_write_all(in[1], state, strlen(state)); /* a hook may not read it */
	close(in[1]);
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0), status = 0;
	struct pollfd pf = {.fd = pidfd, .events = POLLIN};
	int64_t end = now_ms() + timeout * 1000;
	while (pidfd >= 0 && poll(&pf, 1, (int)(end - now_ms() > 0 ? end - now_ms() : 0)) == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		close(pidfd);
		return al_error_set(err, ETIMEDOUT, "hook %s: not done within %llds", path,
				    (long long)timeout);
	}
	if (pidfd >= 0)
		close(pidfd);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFSIGNALED(status))
		return al_error_set(err, EIO, "hook %s: killed by signal %d", path,
				    WTERMSIG(status));
	return al_error_set(err, EIO, "hook %s: exit status %d", path, WEXITSTATUS(status));
}

int al_oci_hooks_run(json_t *hooks, const char *kind, json_t *state, const char *bundle,
		     struct al_error *err)
{
	json_t *list = json_object_get(hooks, kind), *h;
	_cleanup_free_ char *text = json_dumps(state, JSON_COMPACT);
	size_t i;
	int r;

	json_array_foreach(list, i, h)
	{
		struct al_error e = {0};
		if ((r = run_one(h, text ? text : "{}", bundle, &e)) < 0)
			return al_error_set(err, -r, "%s hook %zu: %s", kind, i, e.msg);
	}
	return 0;
}
