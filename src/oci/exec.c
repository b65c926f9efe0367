/* `exec`: a process in a running container, an exec of its session run.
 * The verb passes its own stdio (or, with a terminal, the slave of a host
 * pty whose master goes to the console socket) to the supervisor, which
 * relays them; the verb's process stays until the exec has ended and
 * exits as it did (with --detach a child of it stays, whose pid is the
 * pid file's). Signals it gets go to the exec; its hang-up kills it. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "oci/internal.h"
#include "oci/proto.h"
#include "oci/super.h"

static json_t *read_process(const char *path, struct al_error *err)
{
	json_error_t je;
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_size > AL_OCI_MSG_MAX / 2) {
		if (fd >= 0)
			close(fd);
		al_error_set(err, fd < 0 ? errno : EINVAL,
			     "--process %s: not a readable file of at most %u bytes", path,
			     AL_OCI_MSG_MAX / 2);
		return NULL;
	}
	json_t *o = json_loadfd(fd, JSON_REJECT_DUPLICATES, &je);
	close(fd);
	if (!json_is_object(o)) {
		al_error_set(err, EINVAL, "--process %s: %s", path, o ? "not an object" : je.text);
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *process_of(const struct al_oci_exec_opts *o, struct al_error *err)
{
	json_t *p;

	if (o->process_file) {
		if (!(p = read_process(o->process_file, err)))
			return NULL;
	} else {
		if (!o->args || !o->args[0]) {
			al_error_set(err, EINVAL, "exec: no command (give it, or --process)");
			return NULL;
		}
		json_t *args = json_array(), *env = json_array();
		for (size_t i = 0; o->args[i]; i++)
			json_array_append_new(args, json_string(o->args[i]));
		for (size_t i = 0; o->env && o->env[i]; i++)
			json_array_append_new(env, json_string(o->env[i]));
		p = json_pack("{s:o, s:o}", "args", args, "env", env);
		if (o->cwd)
			json_object_set_new(p, "cwd", json_string(o->cwd));
	}
	if (o->tty)
		json_object_set_new(p, "terminal", json_true());
	return p;
}

/* Wait for the exec's end on sock, passing our signals on to it (and the
 * terminal's size, with one): the status to exit with. */
static int follow(int sock, int tty, int *sig)
{
	static const int passed[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH};
	sigset_t set;

	*sig = 0;
	sigemptyset(&set);
	for (size_t i = 0; i < AL_ARRAY_SIZE(passed); i++)
		sigaddset(&set, passed[i]);
	sigprocmask(SIG_BLOCK, &set, NULL);
	int sfd = signalfd(-1, &set, SFD_CLOEXEC);
	struct timeval none = {0};
	setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof(none));
	for (;;) {
		struct pollfd pf[2] = {{.fd = sock, .events = POLLIN},
				       {.fd = sfd, .events = POLLIN}};
		if (poll(pf, sfd >= 0 ? 2 : 1, -1) < 0 && errno != EINTR)
			return 255;
		if (sfd >= 0 && (pf[1].revents & POLLIN)) {
			struct signalfd_siginfo si;
			if (read(sfd, &si, sizeof(si)) == sizeof(si)) {
				json_t *m;
				struct winsize ws;
				if (si.ssi_signo == SIGWINCH)
					m = tty >= 0 && ioctl(tty, TIOCGWINSZ, &ws) == 0
						? json_pack("{s:s, s:i, s:i}", "op", "resize",
							    "rows", ws.ws_row, "cols", ws.ws_col)
						: NULL;
				else
					m = json_pack("{s:s, s:i}", "op", "signal", "signal",
						      (int)si.ssi_signo);
				if (m)
					al_oci_send(sock, m, NULL, 0);
				json_decref(m);
			}
		}
		if (!(pf[0].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		json_t *msg = NULL;
		int fds[AL_OCI_MSG_FDS];
		size_t n = 0;
		int r = al_oci_recv(sock, &msg, fds, &n, NULL);
		for (size_t i = 0; i < n; i++)
			close(fds[i]);
		if (r == -EAGAIN)
			continue;
		if (r < 0)
			return 255; /* the supervisor went away: the container ended */
		json_t *ended = json_object_get(msg, "ended");
		if (!ended) {
			json_decref(msg);
			continue;
		}
		const char *reason = json_string_value(json_object_get(ended, "reason"));
		json_int_t code = json_integer_value(json_object_get(ended, "exit_code"));
		/* Signalled: its code is 128 + the signal. */
		json_int_t signo = code - 128;
		*sig = reason &&
			       (strcmp(reason, "signaled") == 0 || strcmp(reason, "killed") == 0) &&
			       signo > 0 && signo < NSIG
			   ? (int)signo
			   : 0;
		bool failed = reason && strcmp(reason, "exec-failed") == 0;
		json_decref(msg);
		if (failed)
			return 127;
		return code >= 0 && code < 256 ? (int)code : 255;
	}
}

int al_oci_exec(const struct al_oci_ctx *g, const char *id, const struct al_oci_exec_opts *o,
		int *status, struct al_error *err)
{
	struct al_oci_box b;
	json_t *proc, *ans = NULL;
	int sock = -1, slave = -1, r;

	*status = 255;
	if (o->tty && !o->console_socket && o->detach)
		return al_error_set(err, EINVAL, "exec --tty --detach needs a --console-socket");
	if (!(proc = process_of(o, err)))
		return err->code ? -err->code : -EINVAL;
	bool tty = json_is_true(json_object_get(proc, "terminal"));
	if ((r = al_oci_box_open(g, id, &b, err)) < 0) {
		json_decref(proc);
		return r;
	}
	if (!b.complete || !b.alive) {
		r = al_error_set(err, EINVAL, "cannot exec in container %s: it is not running", id);
		goto out;
	}
	if (tty && o->console_socket) {
		json_t *size = json_object_get(proc, "consoleSize");
		unsigned short rows =
		    (unsigned short)json_integer_value(json_object_get(size, "height"));
		unsigned short cols =
		    (unsigned short)json_integer_value(json_object_get(size, "width"));
		if ((r = al_oci_console(o->console_socket, rows, cols, &slave, err)) < 0)
			goto out;
	} else if (tty) {
		slave = fcntl(0, F_DUPFD_CLOEXEC, 3); /* our own terminal */
	}
	if ((sock = al_oci_box_connect(&b, err)) < 0) {
		r = sock;
		goto out;
	}
	json_t *m = json_pack("{s:s, s:O}", "op", "exec", "process", proc);
	int fds[3] = {0, 1, 2};
	r = tty ? al_oci_send(sock, m, &slave, 1) : al_oci_send(sock, m, fds, 3);
	json_decref(m);
	int got[AL_OCI_MSG_FDS];
	size_t n = 0;
	if (r == 0)
		r = al_oci_recv(sock, &ans, got, &n, err);
	else
		al_error_setsys(err, -r, "asking the container's supervisor");
	for (size_t i = 0; i < n; i++)
		close(got[i]);
	if (r == -EPIPE || r == -EAGAIN)
		r = al_error_set(err, EPIPE, "the container's supervisor did not answer");
	if (r < 0)
		goto out;
	json_t *e = json_object_get(ans, "error");
	if (e) {
		r = al_error_set(err, EIO, "%s", json_string_value(e));
		goto out;
	}
	if (o->detach) {
		pid_t child = fork();
		if (child < 0) {
			r = al_error_setsys(err, errno, "fork");
			goto out;
		}
		if (child == 0) {
			/* The exec's pid for the engine: it stays until the
			 * exec has ended, and exits as it did. */
			setsid();
			int null = open("/dev/null", O_RDWR | O_CLOEXEC);
			if (null >= 0) {
				dup2(null, 0);
				dup2(null, 1);
				dup2(null, 2);
			}
			int sig = 0, code = follow(sock, slave, &sig);
			al_oci_exit_as(code, sig);
		}
		if (o->pid_file && (r = al_oci_write_pid_file(o->pid_file, child, err)) < 0) {
			kill(child, SIGKILL);
			goto out;
		}
		*status = 0;
		r = 0;
		goto out;
	}
	if (o->pid_file && (r = al_oci_write_pid_file(o->pid_file, getpid(), err)) < 0)
		goto out;
	int sig = 0;
	*status = follow(sock, slave, &sig);
	r = 0;
out:
	json_decref(ans);
	json_decref(proc);
	if (sock >= 0)
		close(sock);
	if (slave >= 0)
		close(slave);
	al_oci_box_close(&b);
	return r;
}
