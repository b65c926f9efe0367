/* The monitor's session processes (monitor.h): one spawned per sandbox,
 * killed when its run has not started in time, and on SIGTERM each told
 * to end its run and clean up before the daemon exits. */
#include "serve/monitor.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/log.h"
#include "core/sys.h"
#include "core/util.h"

void mon_sandbox_free(struct monitor *m, size_t i)
{
	struct sandbox *s = m->sb[i];

	mon_pool_gone(m, s);
	if (s->pidfd >= 0) {
		al_sys_pidfd_send_signal(s->pidfd, SIGKILL);
		close(s->pidfd);
	}
	al_chan_close(&s->ch);
	json_decref(s->meta);
	free(s->owed);
	free(s);
	m->sb[i] = m->sb[--m->n_sb];
}

/* The session process (spawn.c): `__session` (the static airlock's
 * descriptor, exe_fd, when the daemon has one), its channel at fd 3; it
 * dies with the monitor (PR_SET_PDEATHSIG), and its sandbox with it. */
int mon_spawn_session(struct monitor *m, struct sandbox *s, struct al_error *err)
{
	int fd;
	pid_t pid = al_serve_spawn_session(m->cfg, &fd, err);

	if (pid < 0)
		return (int)pid;
	s->pid = pid;
	s->pidfd = al_sys_pidfd_open(pid, 0);
	al_chan_init(&s->ch, fd);
	s->ch.no_fds = true;
	return 0;
}

/* Sessions past their setup deadline (their run not started, no answer)
 * are killed; the milliseconds until the next deadline, or -1. */
int mon_setup_deadlines(struct monitor *m)
{
	uint64_t now = al_now_ms(), next = 0;

	for (size_t i = m->n_sb; i-- > 0;) {
		struct sandbox *s = m->sb[i];
		if (!s->setup_deadline_ms)
			continue;
		if (s->setup_deadline_ms <= now) {
			al_warn("serve: session %s did not start its run within %d s; killed",
				s->id, AL_SERVE_SETUP_MAX_MS / 1000);
			for (size_t k = 0; k < s->n_owed; k++)
				if (!s->owed[k].stale)
					mon_respond_error(
					    m, s->owed[k].req, 504,
					    "the sandbox's session did not start its run within "
					    "%d s, and was killed",
					    AL_SERVE_SETUP_MAX_MS / 1000);
			s->n_owed = 0;
			mon_sandbox_free(m, i);
			continue;
		}
		if (!next || s->setup_deadline_ms < next)
			next = s->setup_deadline_ms;
	}
	return next ? (int)(next - now) : -1;
}

/* SIGTERM: every session is told to end (its channel closed: it kills its
 * run, which removes its cgroups and gives its id slot back) and given
 * AL_SERVE_STOP_MS to exit; what is left then is killed. */
void mon_stop_sessions(struct monitor *m)
{
	uint64_t end = al_now_ms() + AL_SERVE_STOP_MS;

	for (size_t i = 0; i < m->n_sb; i++)
		shutdown(m->sb[i]->ch.fd, SHUT_RDWR);
	while (m->n_sb) {
		struct sandbox *s = m->sb[m->n_sb - 1];
		uint64_t now = al_now_ms();
		struct pollfd p = {.fd = s->pidfd, .events = POLLIN};
		if (s->pidfd >= 0 && now < end && poll(&p, 1, (int)(end - now)) == 0)
			continue; /* not yet: the deadline ends the wait */
		if (s->pidfd >= 0 && !(p.revents & POLLIN))
			al_warn("serve: session %s did not end in %d s; killed", s->id,
				AL_SERVE_STOP_MS / 1000);
		pid_t pid = s->pid;
		mon_sandbox_free(m, m->n_sb - 1); /* SIGKILL: a no-op when it has ended */
		waitpid(pid, NULL, 0);
	}
}
