/* The monitor's front (monitor.h): started as its own confined program
 * (spawn.c) before the monitor reads any secret, lost when it ends or
 * breaks the protocol, and started again after a back-off while the
 * sandboxes live on. */
#include "serve/monitor.h"

#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>

#include "core/log.h"
#include "core/sys.h"
#include "core/util.h"

int mon_front_start(struct monitor *m, struct al_error *err)
{
	int fd;
	pid_t pid = al_serve_front_spawn(m->cfg, m->req_floor, &fd, err);

	if (pid < 0)
		return (int)pid;
	m->front_pid = pid;
	m->front_started_ms = al_now_ms();
	al_chan_init(&m->front, fd);
	m->front.no_fds = true;
	return 0;
}

/* The front is gone (it ended, or broke the protocol). Its clients'
 * connections went with it: the monitor's own descriptors of them are
 * closed too (or the clients would wait on), and what they waited for
 * is cancelled as when a client hangs up; an answer still owed to them
 * is dropped (stale). The sandboxes live on. A new front starts after
 * the back-off: 100 ms, doubled for each front that died within a
 * minute of its start, at most 10 s. */
void mon_front_lost(struct monitor *m, const char *why)
{
	uint64_t now = al_now_ms();

	if (m->front_pid > 0) {
		kill(m->front_pid, SIGKILL);
		waitpid(m->front_pid, NULL, 0);
	}
	m->front_pid = 0;
	al_chan_close(&m->front);
	m->front.fd = -1;
	for (size_t i = 0; i < m->n_sb; i++)
		for (size_t k = 0; k < m->sb[i]->n_owed; k++)
			m->sb[i]->owed[k].stale = true;
	while (m->n_conns)
		mon_conn_gone(m, m->n_conns - 1);
	m->backoff_ms = now - m->front_started_ms < 60000 && m->backoff_ms
			    ? (m->backoff_ms * 2 > 10000 ? 10000 : m->backoff_ms * 2)
			    : 100;
	m->restart_ms = now + m->backoff_ms;
	al_err("serve: the front process %s; a new one starts in %llu ms", why,
	       (unsigned long long)m->backoff_ms);
}

int mon_front_restart(struct monitor *m)
{
	struct al_error err = {0};
	uint64_t now = al_now_ms();

	if (m->front.fd >= 0)
		return -1;
	if (now >= m->restart_ms && mon_front_start(m, &err) < 0)
		al_warn("serve: %s", err.msg);
	if (m->front.fd >= 0)
		return -1;
	/* Clients wait in the listening socket's backlog meanwhile. */
	if (now >= m->restart_ms)
		m->restart_ms = now + 1000;
	return (int)(m->restart_ms - now);
}
