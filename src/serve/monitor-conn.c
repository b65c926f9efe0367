/* The monitor's side of client connections: accepting them, who a Unix
 * peer is (SO_PEERCRED, SO_PEERGROUPS), which peers are never served (a
 * sandbox's processes: a uid of airlock's host id slots, or another user
 * namespace), and the record it keeps of each (a random id, a descriptor
 * of its own watched for the hang-up). */
#include "serve/monitor.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"
#include "core/util.h"
#include "ids/slots.h"

/* Past --max-clients. */
static void refuse_client(struct monitor *m, int fd)
{
	al_serve_refuse(fd, 503, "Service Unavailable",
			"too many clients: the daemon's --max-clients is reached; retry later");
	m->metrics.refused_clients++;
	al_metrics_status(&m->metrics, 503);
}

unsigned mon_per_identity(const struct monitor *m)
{
	unsigned n = m->cfg->max_clients_per_identity;
	return n && n < m->cfg->max_clients ? n : m->cfg->max_clients;
}

unsigned mon_conns_of(const struct monitor *m, const char *identity)
{
	unsigned n = 0;
	for (size_t i = 0; i < m->n_conns; i++)
		n += strcmp(m->conns[i].identity, identity) == 0;
	return n;
}

/* Past its identity's cap a Unix client gets 429 from the monitor, as
 * refuse_client() answers (a TCP client's identity is known only from
 * its first request: the monitor answers that one 429). */
static void refuse_identity(struct monitor *m, int fd, const char *identity)
{
	char msg[200];
	snprintf(msg, sizeof(msg),
		 "too many connections from %s: the daemon's --max-clients-per-identity (%u) is "
		 "reached; retry later",
		 identity, mon_per_identity(m));
	al_serve_refuse(fd, 429, "Too Many Requests", msg);
	m->metrics.refused_clients++;
	al_metrics_status(&m->metrics, 429);
}

/* Why a Unix peer is never served, or NULL: a process of a sandbox (its
 * uid one of airlock's host id slots, or its user namespace not the
 * monitor's) may not drive the daemon that made it, whatever path to the
 * socket it found. The peer's pid is its pid at connect(). */
static const char *peer_refusal(const struct ucred *cr)
{
	struct stat own, peer;
	char path[64];

	if (cr->uid >= AL_IDS_POOL_BASE &&
	    (uint64_t)cr->uid < (uint64_t)AL_IDS_POOL_BASE + AL_IDS_POOL_SLOTS * AL_IDS_SLOT_SIZE)
		return "the peer's uid is one of airlock's host id slots: a sandbox's process";
	snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)cr->pid);
	if (cr->pid <= 0 || stat("/proc/self/ns/user", &own) < 0 || stat(path, &peer) < 0)
		return "the peer's user namespace cannot be checked";
	if (own.st_dev != peer.st_dev || own.st_ino != peer.st_ino)
		return "the peer is in another user namespace (a sandbox's or a container's)";
	return NULL;
}

static void refuse_peer(struct monitor *m, int fd, const struct ucred *cr, const char *why)
{
	char msg[320];

	snprintf(msg, sizeof(msg), "this daemon does not serve uid %u: %s", (unsigned)cr->uid, why);
	al_warn("serve: refused a client (uid %u, pid %d): %s", (unsigned)cr->uid, (int)cr->pid,
		why);
	al_serve_refuse(fd, 403, "Forbidden", msg);
	al_metrics_status(&m->metrics, 403);
}

/* The peer's gid, then its supplementary gids (SO_PEERGROUPS). */
static void peer_groups(int fd, const struct ucred *cr, struct conn *c)
{
	gid_t g[AL_SERVE_GIDS_MAX];
	socklen_t len = sizeof(g);

	c->gids[c->n_gids++] = cr->gid;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, g, &len) < 0)
		return; /* more than AL_SERVE_GIDS_MAX, or an old kernel: its gid only */
	for (size_t i = 0; i < len / sizeof(gid_t) && c->n_gids < AL_SERVE_GIDS_MAX; i++)
		if (g[i] != cr->gid)
			c->gids[c->n_gids++] = g[i];
}

static uint64_t random_id(struct monitor *m)
{
	uint64_t id;

	do {
		/* getrandom of 8 bytes does not fail once the pool is ready
		 * (it blocks until then); a failure leaves 0, tried again. */
		if (getrandom(&id, sizeof(id), 0) != sizeof(id))
			id = 0;
		for (size_t i = 0; i < m->n_conns; i++)
			if (m->conns[i].id == id)
				id = 0;
	} while (id == 0);
	return id;
}

void mon_accept(struct monitor *m, int lfd, bool tcp)
{
	for (int i = 0; i < 16; i++) {
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		struct ucred cr;
		socklen_t len = sizeof(cr);
		const char *why;

		if (fd < 0) {
			if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
				al_warn("serve: accept: %s", strerror(errno));
			return;
		}
		if (m->n_conns >= m->cfg->max_clients) {
			refuse_client(m, fd);
			continue;
		}
		struct conn *c = xcalloc(1, sizeof(*c));
		c->tcp = tcp;
		if (!tcp) {
			if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0) {
				free(c);
				close(fd);
				continue;
			}
			if ((why = peer_refusal(&cr))) {
				free(c);
				refuse_peer(m, fd, &cr, why);
				continue;
			}
			c->uid = cr.uid;
			peer_groups(fd, &cr, c);
			snprintf(c->identity, sizeof(c->identity), "uid:%u", (unsigned)cr.uid);
			if (mon_conns_of(m, c->identity) >= mon_per_identity(m)) {
				refuse_identity(m, fd, c->identity);
				free(c);
				continue;
			}
		}
		if ((c->dup = fcntl(fd, F_DUPFD_CLOEXEC, 3)) < 0) {
			free(c);
			close(fd);
			continue;
		}
		c->id = random_id(m);
		m->conns = xrealloc(m->conns, (m->n_conns + 1) * sizeof(*m->conns));
		m->conns[m->n_conns++] = *c;
		struct al_msg_out o;
		al_msg_begin(&o, AL_MSG_CONN, c->id);
		al_msg_put_u32(&o, AL_TAG_TCP, tcp);
		al_msg_end(&o);
		al_chan_queue(&m->front, &o, fd);
		free(c);
	}
}

void mon_conn_gone(struct monitor *m, size_t i)
{
	uint64_t id = m->conns[i].id;

	close(m->conns[i].dup);
	m->conns[i] = m->conns[--m->n_conns];
	/* What its requests wait for is cancelled: a one-shot run is killed
	 * (its session cleans up), a streamed exec too; a waited answer that
	 * still comes is dropped by the front. */
	for (size_t k = 0; k < m->n_sb; k++) {
		struct sandbox *s = m->sb[k];
		for (size_t j = s->n_owed; j-- > 0;)
			if (j < s->n_owed && s->owed[j].conn == id)
				mon_cancel(m, s->owed[j].req);
	}
}
