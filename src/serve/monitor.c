/* The daemon's monitor: the privileged process. It accepts every client
 * itself (the identity comes from SO_PEERCRED or a bearer token, never
 * from the front), hands each connection to the confined front, holds the
 * state table (sandbox id -> owner, state, session process), checks every
 * request the front passes on against it, spawns a session process per
 * sandbox and keeps the metrics. */
#include "serve/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "core/cleanup.h"
#include "core/log.h"
#include "core/sys.h"
#include "core/util.h"

struct conn {
	uint64_t id;
	char identity[80]; /* "uid:N"; empty on TCP: per request, from its token */
	bool tcp;
};

/* A request of the front's that a session owes an answer (or the rest
 * of a streamed one). */
struct owed {
	uint64_t req;
	bool stream;
};

/* One sandbox the monitor holds: a one-shot run's until it answers, or a
 * live sandbox's from its create until its session process ends. */
struct sandbox {
	char id[24];
	char owner[80];
	bool oneshot;
	bool ready;	 /* a live sandbox: its create answered 201 */
	bool deleting;	 /* DELETE passed on: the id answers 404 from now */
	uint64_t req_id; /* the front's request waiting for the first answer */
	uint64_t started_ms;
	json_t *meta; /* its metadata, from its session's 201 */
	struct owed *owed;
	size_t n_owed;
	pid_t pid;
	int pidfd;
	struct al_chan ch;
	bool done;
};

struct monitor {
	const struct al_serve_config *cfg;
	int unix_fd, tcp_fd, sig_fd;
	pid_t front_pid;
	struct al_chan front;
	struct conn *conns;
	size_t n_conns;
	uint64_t next_conn;
	struct sandbox **sb;
	size_t n_sb;
	struct al_token *tokens;
	size_t n_tokens;
	struct al_metrics metrics;
	bool stop;
};

static struct conn *conn_find(struct monitor *m, uint64_t id)
{
	for (size_t i = 0; i < m->n_conns; i++)
		if (m->conns[i].id == id)
			return &m->conns[i];
	return NULL;
}

/* An answer to the front's request id: status, a JSON body (taken). */
static void respond(struct monitor *m, uint64_t req, unsigned status, const char *ctype,
		    const char *body, size_t len)
{
	struct al_msg_out o;

	al_msg_begin(&o, AL_MSG_RESPONSE, req);
	al_msg_put_u32(&o, AL_TAG_STATUS, status);
	al_msg_put_str(&o, AL_TAG_CTYPE, ctype);
	al_msg_put_bytes(&o, AL_TAG_BODY, body, len);
	if (al_msg_end(&o) < 0) {
		free(o.buf);
		static const char big[] = "{\"error\":\"the answer is too large to send\"}";
		al_msg_begin(&o, AL_MSG_RESPONSE, req);
		al_msg_put_u32(&o, AL_TAG_STATUS, 500);
		al_msg_put_str(&o, AL_TAG_CTYPE, "application/json");
		al_msg_put_bytes(&o, AL_TAG_BODY, big, sizeof(big) - 1);
		al_msg_end(&o);
	}
	al_chan_queue(&m->front, &o, -1);
}

static void respond_json(struct monitor *m, uint64_t req, unsigned status, json_t *o)
{
	char *s = json_dumps(o, JSON_COMPACT);

	respond(m, req, status, "application/json", s ? s : "{}", s ? strlen(s) : 2);
	free(s);
	json_decref(o);
}

static void respond_error(struct monitor *m, uint64_t req, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void respond_error(struct monitor *m, uint64_t req, unsigned status, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	respond_json(m, req, status, json_pack("{s:s}", "error", msg));
}

/* --- accepting clients ---------------------------------------------- */

/* Past --max-clients the monitor answers itself, with fixed bytes and
 * without reading what the client sent, then closes. */
static void refuse_client(struct monitor *m, int fd)
{
	static const char body[] =
	    "{\"error\":\"too many clients: the daemon's --max-clients is reached; retry later\"}";
	char head[256];
	int n = snprintf(head, sizeof(head),
			 "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
			 "Content-Length: %zu\r\nRetry-After: 1\r\nConnection: close\r\n\r\n",
			 sizeof(body) - 1);
	if (send(fd, head, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) == n)
		send(fd, body, sizeof(body) - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
	m->metrics.refused_clients++;
	al_metrics_status(&m->metrics, 503);
	close(fd);
}

static void on_accept(struct monitor *m, int lfd, bool tcp)
{
	for (int i = 0; i < 16; i++) {
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		struct ucred cr;
		socklen_t len = sizeof(cr);

		if (fd < 0) {
			if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
				al_warn("serve: accept: %s", strerror(errno));
			return;
		}
		if (m->n_conns >= m->cfg->max_clients) {
			refuse_client(m, fd);
			continue;
		}
		struct conn c = {.id = ++m->next_conn, .tcp = tcp};
		if (!tcp) {
			if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0) {
				close(fd);
				continue;
			}
			snprintf(c.identity, sizeof(c.identity), "uid:%u", (unsigned)cr.uid);
		}
		m->conns = xrealloc(m->conns, (m->n_conns + 1) * sizeof(*m->conns));
		m->conns[m->n_conns++] = c;
		struct al_msg_out o;
		al_msg_begin(&o, AL_MSG_CONN, c.id);
		al_msg_put_u32(&o, AL_TAG_TCP, tcp);
		al_msg_end(&o);
		al_chan_queue(&m->front, &o, fd);
	}
}

/* --- sessions --------------------------------------------------------- */

static void sandbox_free(struct monitor *m, size_t i)
{
	struct sandbox *s = m->sb[i];

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

/* fork + exec this binary as `__session`, its end of a socketpair at fd
 * 3; it dies with the monitor (PR_SET_PDEATHSIG), and its sandbox with
 * it. */
static int spawn_session(struct monitor *m, struct sandbox *s, struct al_error *err)
{
	int sv[2];
	pid_t parent = getpid();

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return al_error_setsys(err, errno, "socketpair");
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		close(sv[0]);
		close(sv[1]);
		return al_error_setsys(err, e, "fork");
	}
	if (pid == 0) {
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
			_exit(125);
		if (dup2(sv[1], 3) < 0)
			_exit(125);
		al_sys_close_range(4, ~0U, 0);
		char *argv[] = {(char *)"airlock", (char *)"__session", NULL};
		execv(m->cfg->exe, argv);
		_exit(127);
	}
	close(sv[1]);
	s->pid = pid;
	s->pidfd = al_sys_pidfd_open(pid, 0);
	al_chan_init(&s->ch, sv[0]);
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	return 0;
}

static void owe(struct sandbox *s, uint64_t req)
{
	s->owed = xrealloc(s->owed, (s->n_owed + 1) * sizeof(*s->owed));
	s->owed[s->n_owed++] = (struct owed){.req = req};
}

static struct owed *owed_find(struct sandbox *s, uint64_t req)
{
	for (size_t i = 0; i < s->n_owed; i++)
		if (s->owed[i].req == req)
			return &s->owed[i];
	return NULL;
}

static void owed_del(struct sandbox *s, uint64_t req)
{
	struct owed *o = owed_find(s, req);

	if (o)
		*o = s->owed[--s->n_owed];
}

/* A one-shot run (op AL_OP_RUN) or a live sandbox (AL_OP_SANDBOX_CREATE):
 * a session process of its own, given the request. */
static void op_run(struct monitor *m, uint64_t req, const char *identity, const struct al_msg *in,
		   unsigned op)
{
	struct al_error err = {0};
	size_t len;
	const uint8_t *body = al_msg_bytes(in, AL_TAG_BODY, &len);

	if (m->n_sb >= m->cfg->max_sandboxes)
		return respond_error(m, req, 429,
				     "too many sandboxes: the daemon's --max-sandboxes (%u) are "
				     "all in use; retry later",
				     m->cfg->max_sandboxes);
	struct sandbox *s = xcalloc(1, sizeof(*s));
	al_random_id(s->id, sizeof(s->id));
	snprintf(s->owner, sizeof(s->owner), "%s", identity);
	s->oneshot = op == AL_OP_RUN;
	s->req_id = req;
	owe(s, req);
	s->pidfd = -1;
	s->started_ms = al_now_ms();
	if (spawn_session(m, s, &err) < 0) {
		free(s);
		return respond_error(m, req, 500, "cannot start the session process: %s", err.msg);
	}
	m->sb = xrealloc(m->sb, (m->n_sb + 1) * sizeof(*m->sb));
	m->sb[m->n_sb++] = s;
	struct al_msg_out o;
	al_msg_begin(&o, AL_MSG_SESSION_RUN, req);
	al_msg_put_str(&o, AL_TAG_IDENTITY, identity);
	al_msg_put_str(&o, AL_TAG_SESSION_ID, s->id);
	al_msg_put_u32(&o, AL_TAG_OP, op);
	if (m->cfg->operator_file)
		al_msg_put_str(&o, AL_TAG_OPERATOR, m->cfg->operator_file);
	al_msg_put_bytes(&o, AL_TAG_BODY, body ? body : (const uint8_t *)"", len);
	al_msg_end(&o);
	al_chan_queue(&s->ch, &o, -1);
	al_chan_flush(&s->ch);
}

/* A sandbox the caller may name: it exists and is the caller's own.
 * Another identity's sandbox is answered exactly as one that does not
 * exist (404), so ids cannot be probed. */
static struct sandbox *sandbox_owned(struct monitor *m, const char *id, const char *identity)
{
	for (size_t i = 0; id && i < m->n_sb; i++)
		if (!m->sb[i]->oneshot && !m->sb[i]->deleting && strcmp(m->sb[i]->id, id) == 0 &&
		    strcmp(m->sb[i]->owner, identity) == 0)
			return m->sb[i];
	return NULL;
}

/* Does the sandbox's metadata hold every key = value of filter? */
static bool meta_matches(const json_t *meta, const json_t *filter)
{
	const char *k;
	json_t *v;

	json_object_foreach((json_t *)filter, k, v)
	{
		const char *have = json_string_value(json_object_get(meta, k));
		if (!have || !json_is_string(v) || strcmp(have, json_string_value(v)) != 0)
			return false;
	}
	return true;
}

static void op_list(struct monitor *m, uint64_t req, const char *identity, const struct al_msg *in)
{
	size_t len = 0;
	const uint8_t *body = al_msg_bytes(in, AL_TAG_BODY, &len);
	json_error_t je;
	json_t *filter = body ? json_loadb((const char *)body, len, 0, &je) : json_object();
	json_t *a = json_array();

	if (!json_is_object(filter)) {
		json_decref(filter);
		json_decref(a);
		return respond_error(m, req, 400, "bad metadata filter");
	}
	for (size_t i = 0; i < m->n_sb; i++) {
		struct sandbox *s = m->sb[i];
		if (s->oneshot || !s->ready || s->deleting || strcmp(s->owner, identity) != 0 ||
		    !meta_matches(s->meta, filter))
			continue;
		json_array_append_new(a, json_pack("{s:s, s:O}", "id", s->id, "metadata", s->meta));
	}
	json_decref(filter);
	respond_json(m, req, 200, json_pack("{s:o}", "sandboxes", a));
}

/* A request for a live sandbox, passed on to its session process as
 * "METHOD rest-of-path". */
static void op_forward(struct monitor *m, uint64_t req, struct sandbox *s, unsigned op,
		       const struct al_msg *in)
{
	size_t len = 0;
	const uint8_t *body = al_msg_bytes(in, AL_TAG_BODY, &len);
	_cleanup_free_ char *path = al_msg_strdup(in, AL_TAG_PATH);
	struct al_msg_out o;

	if (!s->ready)
		return respond_error(m, req, 409, "sandbox %s is still starting", s->id);
	al_msg_begin(&o, AL_MSG_SESSION_REQ, req);
	al_msg_put_str(&o, AL_TAG_PATH,
		       op == AL_OP_SANDBOX_GET	    ? "GET "
		       : op == AL_OP_SANDBOX_DELETE ? "DELETE "
		       : path			    ? path
						    : "GET ");
	if (body)
		al_msg_put_bytes(&o, AL_TAG_BODY, body, len);
	if (al_msg_end(&o) < 0) {
		free(o.buf);
		return respond_error(m, req, 413, "the request is too large");
	}
	if (op == AL_OP_SANDBOX_DELETE)
		s->deleting = true;
	owe(s, req);
	al_chan_queue(&s->ch, &o, -1);
}

/* A streamed answer's client left: its session stops sending it. */
static void on_cancel(struct monitor *m, uint64_t req)
{
	for (size_t i = 0; i < m->n_sb; i++) {
		struct sandbox *s = m->sb[i];
		struct owed *ow = owed_find(s, req);
		if (!ow)
			continue;
		/* A stream ends here; a single answer still comes, and is
		 * dropped by the front. */
		if (ow->stream)
			owed_del(s, req);
		struct al_msg_out o;
		al_msg_begin(&o, AL_MSG_CANCEL, req);
		al_msg_end(&o);
		al_chan_queue(&s->ch, &o, -1);
		return;
	}
}

static void on_request(struct monitor *m, const struct al_msg *in)
{
	uint64_t req = in->id;
	struct conn *c = conn_find(m, al_msg_u64(in, AL_TAG_CONN, 0));
	_cleanup_free_ char *token = al_msg_strdup(in, AL_TAG_TOKEN);
	_cleanup_free_ char *sbid = al_msg_strdup(in, AL_TAG_SANDBOX);
	char identity[80];

	if (!c)
		return respond_error(m, req, 400, "the connection is gone");
	/* Who asks: the monitor's own record of the connection, or on TCP
	 * the identity the token maps to. The front only passes the token
	 * on. */
	if (c->tcp) {
		const char *who =
		    token ? al_serve_token_identity(m->tokens, m->n_tokens, token) : NULL;
		if (!who)
			return respond_error(m, req, 401,
					     token ? "the bearer token is not known"
						   : "this listener needs \"Authorization: Bearer "
						     "TOKEN\"");
		snprintf(identity, sizeof(identity), "token:%s", who);
	} else {
		snprintf(identity, sizeof(identity), "%s", c->identity);
	}
	switch (al_msg_u32(in, AL_TAG_OP, 0)) {
	case AL_OP_HEALTH:
		return respond_json(m, req, 200,
				    json_pack("{s:s, s:s, s:s, s:i}", "status", "ok", "version",
					      AL_VERSION, "identity", identity, "sandboxes",
					      (int)m->n_sb));
	case AL_OP_METRICS: {
		char *t = al_metrics_text(&m->metrics, (unsigned)m->n_sb, (unsigned)m->n_conns);
		respond(m, req, 200, "text/plain; version=0.0.4", t ? t : "", t ? strlen(t) : 0);
		free(t);
		return;
	}
	case AL_OP_RUN:
	case AL_OP_SANDBOX_CREATE:
		return op_run(m, req, identity, in, al_msg_u32(in, AL_TAG_OP, 0));
	case AL_OP_SANDBOX_LIST:
		return op_list(m, req, identity, in);
	case AL_OP_SANDBOX_GET:
	case AL_OP_SANDBOX_DELETE:
	case AL_OP_SANDBOX_OTHER: {
		struct sandbox *s = sandbox_owned(m, sbid, identity);
		if (!s)
			return respond_error(m, req, 404, "no sandbox \"%s\"", sbid ? sbid : "");
		return op_forward(m, req, s, al_msg_u32(in, AL_TAG_OP, 0), in);
	}
	default:
		return respond_error(m, req, 400, "unknown operation");
	}
}

static int on_front_msg(struct monitor *m, const struct al_msg *in)
{
	switch (in->type) {
	case AL_MSG_REQUEST:
		on_request(m, in);
		return 0;
	case AL_MSG_CLOSED:
		for (size_t i = 0; i < m->n_conns; i++)
			if (m->conns[i].id == in->id) {
				m->conns[i] = m->conns[--m->n_conns];
				break;
			}
		return 0;
	case AL_MSG_STATUS:
		al_metrics_status(&m->metrics, al_msg_u32(in, AL_TAG_STATUS, 0));
		return 0;
	case AL_MSG_CANCEL:
		on_cancel(m, in->id);
		return 0;
	default:
		return -EBADMSG; /* not a message the front sends */
	}
}

static void chunk_to_front(struct monitor *m, uint64_t req, const void *p, size_t len, bool end)
{
	struct al_msg_out o;

	al_msg_begin(&o, AL_MSG_CHUNK, req);
	al_msg_put_bytes(&o, AL_TAG_BODY, p, len);
	if (end)
		al_msg_put_u32(&o, AL_TAG_END, 1);
	if (al_msg_end(&o) < 0) {
		free(o.buf);
		return;
	}
	al_chan_queue(&m->front, &o, -1);
}

/* A session's answer goes to the front as the request's, checked first:
 * only to a request that session is owed, only one head per request,
 * chunks only on a streamed one. A one-shot run's numbers go to the
 * metrics. Returns -EBADMSG when the session broke the protocol. */
static int on_session_msg(struct monitor *m, struct sandbox *s, const struct al_msg *in)
{
	size_t len;
	const uint8_t *body = al_msg_bytes(in, AL_TAG_BODY, &len);
	struct owed *ow = owed_find(s, in->id);

	if (in->type == AL_MSG_CHUNK) {
		/* One whose client left (cancelled) is dropped; none goes to
		 * a request this session is not streaming. */
		if (!ow || !ow->stream)
			return 0;
		bool end = al_msg_u32(in, AL_TAG_END, 0) == 1;
		chunk_to_front(m, in->id, body, len, end);
		if (end)
			owed_del(s, in->id);
		return 0;
	}
	if (in->type != AL_MSG_SESSION_DONE || !ow || ow->stream)
		return -EBADMSG;
	_cleanup_free_ char *reason = al_msg_strdup(in, AL_TAG_REASON);
	_cleanup_free_ char *ctype = al_msg_strdup(in, AL_TAG_CTYPE);
	unsigned status = al_msg_u32(in, AL_TAG_STATUS, 500);
	bool stream = al_msg_u32(in, AL_TAG_STREAM, 0) == 1;
	if (status < 200 || status > 599)
		status = 500;
	if (in->id == s->req_id && !s->oneshot && !s->ready && status == 201) {
		size_t ml = 0;
		const uint8_t *meta = al_msg_bytes(in, AL_TAG_META, &ml);
		json_error_t je;
		s->ready = true;
		s->meta = meta ? json_loadb((const char *)meta, ml, 0, &je) : NULL;
		if (!json_is_object(s->meta)) {
			json_decref(s->meta);
			s->meta = json_object();
		}
		al_hist_add(&m->metrics.create_s, (double)(al_now_ms() - s->started_ms) / 1000.0);
	}
	if (in->id == s->req_id)
		s->done = true;
	struct al_msg_out o;
	al_msg_begin(&o, AL_MSG_RESPONSE, in->id);
	al_msg_put_u32(&o, AL_TAG_STATUS, status);
	al_msg_put_str(&o, AL_TAG_CTYPE, ctype ? ctype : "application/json");
	al_msg_put_bytes(&o, AL_TAG_BODY, body, len);
	if (stream)
		al_msg_put_u32(&o, AL_TAG_STREAM, 1);
	if (al_msg_end(&o) < 0) {
		free(o.buf);
		respond_error(m, in->id, 500, "the answer is too large to send");
	} else {
		al_chan_queue(&m->front, &o, -1);
	}
	if (stream)
		ow->stream = true;
	else
		owed_del(s, in->id);
	if (reason && s->oneshot) {
		m->metrics.runs++;
		m->metrics.denials += al_msg_u64(in, AL_TAG_DENIALS, 0);
		int li = al_metrics_limit_index(reason);
		if (li >= 0 && (size_t)li < AL_ARRAY_SIZE(m->metrics.limit_hits))
			m->metrics.limit_hits[li]++;
		al_hist_add(&m->metrics.run_s, (double)(al_now_ms() - s->started_ms) / 1000.0);
	}
	return 0;
}

/* --- the loop --------------------------------------------------------- */

static int start_front(struct monitor *m, struct al_error *err)
{
	int sv[2];
	pid_t parent = getpid();

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return al_error_setsys(err, errno, "socketpair");
	pid_t pid = fork();
	if (pid < 0)
		return al_error_setsys(err, errno, "fork (the front)");
	if (pid == 0) {
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
			_exit(125);
		/* Nothing of the monitor's: no listening socket, no signalfd. */
		close(sv[0]);
		if (m->unix_fd >= 0)
			close(m->unix_fd);
		if (m->tcp_fd >= 0)
			close(m->tcp_fd);
		if (m->sig_fd >= 0)
			close(m->sig_fd);
		al_front_main(sv[1], m->cfg);
	}
	close(sv[1]);
	m->front_pid = pid;
	al_chan_init(&m->front, sv[0]);
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	return 0;
}

static void reap(struct monitor *m)
{
	int status;
	pid_t pid;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		if (pid == m->front_pid) {
			al_err("serve: the front process ended (%s %d); stopping",
			       WIFEXITED(status) ? "exit" : "signal",
			       WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
			m->front_pid = 0;
			m->stop = true;
		}
	}
}

static void on_signal(struct monitor *m)
{
	struct signalfd_siginfo si;

	while (read(m->sig_fd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGCHLD)
			reap(m);
		else
			m->stop = true;
	}
}

/* A session's channel is readable: its answers, or its end. When it
 * ends, whatever it still owed is answered here (500, or the end of a
 * stream), and the sandbox is gone from the table. */
static void session_io(struct monitor *m, size_t i, short revents)
{
	struct sandbox *s = m->sb[i];
	struct al_error err = {0};
	struct al_msg in;
	int r;

	if (revents & POLLOUT)
		al_chan_flush(&s->ch);
	if (revents & (POLLIN | POLLHUP | POLLERR)) {
		al_chan_read(&s->ch);
		while ((r = al_chan_next(&s->ch, &in, &err)) > 0)
			if (on_session_msg(m, s, &in) < 0) {
				al_warn("serve: session %s broke its protocol (message type %u)",
					s->id, in.type);
				s->ch.eof = true;
				break;
			}
		if (r < 0) {
			al_warn("serve: session %s: %s", s->id, err.msg);
			s->ch.eof = true;
		}
	}
	if (s->ch.eof || (s->done && s->oneshot)) {
		for (size_t k = 0; k < s->n_owed; k++) {
			if (s->owed[k].stream)
				chunk_to_front(m, s->owed[k].req, "", 0, true);
			else
				respond_error(
				    m, s->owed[k].req, 500,
				    "the sandbox's session process ended without an answer");
		}
		s->n_owed = 0;
		sandbox_free(m, i);
	}
}

static int loop(struct monitor *m, struct al_error *err)
{
	struct pollfd *pf = NULL;

	while (!m->stop) {
		size_t n = 0, base;
		pf = xrealloc(pf, (4 + m->n_sb) * sizeof(*pf));
		pf[n++] = (struct pollfd){.fd = m->sig_fd, .events = POLLIN};
		pf[n++] =
		    (struct pollfd){.fd = m->front.fd,
				    .events = POLLIN | (al_chan_pending(&m->front) ? POLLOUT : 0)};
		pf[n++] = (struct pollfd){.fd = m->unix_fd, .events = POLLIN};
		pf[n++] = (struct pollfd){.fd = m->tcp_fd, .events = POLLIN};
		base = n;
		for (size_t i = 0; i < m->n_sb; i++)
			pf[n++] = (struct pollfd){
			    .fd = m->sb[i]->ch.fd,
			    .events = POLLIN | (al_chan_pending(&m->sb[i]->ch) ? POLLOUT : 0)};
		if (poll(pf, n, -1) < 0) {
			if (errno == EINTR)
				continue;
			free(pf);
			return al_error_setsys(err, errno, "poll");
		}
		if (pf[0].revents)
			on_signal(m);
		/* Sessions from the last down: one may go (swapped with the
		 * last, already seen). */
		for (size_t i = m->n_sb; i-- > 0;)
			if (pf[base + i].revents)
				session_io(m, i, pf[base + i].revents);
		if (pf[1].revents & (POLLIN | POLLHUP | POLLERR)) {
			struct al_msg in;
			int r;
			if (al_chan_read(&m->front) < 0 || m->front.eof) {
				free(pf);
				return al_error_set(err, EPIPE, "the front process ended");
			}
			while ((r = al_chan_next(&m->front, &in, err)) > 0)
				if (on_front_msg(m, &in) < 0)
					break;
			if (r < 0) {
				free(pf);
				return al_error_wrap(err, "the front broke the protocol");
			}
		}
		if (pf[2].revents)
			on_accept(m, m->unix_fd, false);
		if (pf[3].revents)
			on_accept(m, m->tcp_fd, true);
		if (al_chan_flush(&m->front) < 0)
			m->stop = true;
	}
	free(pf);
	al_error_clear(err);
	return 0;
}

int al_serve_run(const struct al_serve_config *cfg, struct al_error *err)
{
	struct monitor m = {.cfg = cfg, .unix_fd = -1, .tcp_fd = -1, .sig_fd = -1};
	sigset_t set;
	int r;

	if (cfg->listen && !cfg->token_file)
		return al_error_set(err, EINVAL, "--listen needs --token-file (bearer tokens)");
	if (cfg->token_file && !cfg->listen)
		return al_error_set(err, EINVAL, "--token-file is only for --listen");
	if (cfg->token_file &&
	    al_serve_tokens_load(cfg->token_file, &m.tokens, &m.n_tokens, err) < 0)
		return -EINVAL;
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, NULL);
	if ((m.sig_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK)) < 0) {
		r = al_error_setsys(err, errno, "signalfd");
		goto out;
	}
	al_serve_cleanup_stale();
	/* A socket systemd passed is used as it is (its unit made it). */
	if ((m.unix_fd = cfg->socket_fd > 0 ? cfg->socket_fd
					    : al_serve_listen_unix(cfg->socket_path,
								   cfg->socket_group, err)) < 0 ||
	    (cfg->listen && (m.tcp_fd = al_serve_listen_tcp(cfg->listen, err)) < 0)) {
		r = -EINVAL;
		goto out;
	}
	/* The front is forked before anything else is read. */
	if ((r = start_front(&m, err)) < 0)
		goto out;
	al_info("serve: listening on %s%s%s", cfg->socket_path, cfg->listen ? " and " : "",
		cfg->listen ? cfg->listen : "");
	r = loop(&m, err);
out:
	while (m.n_sb)
		sandbox_free(&m, m.n_sb - 1);
	free(m.sb);
	if (m.front_pid > 0) {
		kill(m.front_pid, SIGKILL);
		waitpid(m.front_pid, NULL, 0);
	}
	al_chan_close(&m.front);
	if (m.unix_fd >= 0) {
		close(m.unix_fd);
		if (cfg->socket_fd <= 0) /* systemd's stays for the next start */
			unlink(cfg->socket_path);
	}
	if (m.tcp_fd >= 0)
		close(m.tcp_fd);
	if (m.sig_fd >= 0)
		close(m.sig_fd);
	free(m.conns);
	free(m.tokens);
	return r;
}
