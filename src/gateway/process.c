#include "gateway/process.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/sys.h"
#include "core/util.h"
#include "gateway/conn.h"
#include "gateway/process-internal.h"
#include "gateway/proto.h"
#include "policy/seccomp.h"

/* How long the end may take, in all, before the gateway is killed. */
#define END_TIMEOUT_MS 3000
/* How long it may take to report its start: past it the run stops. */
#define START_TIMEOUT_MS 10000

extern char **environ;

/* ---- the gateway process ---------------------------------------------- */

/* Use reports are gathered per host and sent at most every
 * USAGE_FLUSH_MS (and at the end): one wake-up of the supervisor per
 * connection would cost short requests about 10-30 us each. */
#define USAGE_FLUSH_MS	  100
#define USAGE_MAX_PENDING 64

struct child {
	int sock;
	struct al_gateway *gw;
	bool audit; /* the run has an audit stream: send every event */
	struct al_timer *flush;
	bool flush_armed;
	struct al_gateway_usage pending[USAGE_MAX_PENDING];
	size_t n_pending;
};

static void child_send(int sock, const uint8_t *buf, int n)
{
	if (n > 0 && send(sock, buf, (size_t)n, MSG_NOSIGNAL) < 0)
		_exit(3); /* the supervisor is gone */
}

static void flush_usage(struct child *c)
{
	uint8_t buf[64 + AL_HOST_MAX];

	for (size_t i = 0; i < c->n_pending; i++)
		child_send(c->sock, buf, al_gwp_encode_usage(&c->pending[i], buf, sizeof(buf)));
	c->n_pending = 0;
}

static void on_flush(struct al_timer *t, uint64_t expirations, void *data)
{
	struct child *c = data;

	(void)t;
	(void)expirations;
	c->flush_armed = false;
	flush_usage(c);
}

/* A closed connection's use of its host, added to what waits for the next
 * flush. */
static void child_usage(void *data, const struct al_gateway_usage *use)
{
	struct child *c = data;
	struct al_gateway_usage *p = NULL;

	for (size_t i = 0; i < c->n_pending && !p; i++)
		if (strcmp(c->pending[i].host, use->host) == 0 &&
		    c->pending[i].requests < AL_GWP_MAX_USE_REQUESTS)
			p = &c->pending[i];
	if (!p) {
		if (c->n_pending == USAGE_MAX_PENDING)
			flush_usage(c);
		p = &c->pending[c->n_pending++];
		*p = (struct al_gateway_usage){0};
		snprintf(p->host, sizeof(p->host), "%s", use->host);
	}
	p->requests += use->requests;
	p->bytes_up = al_add_sat(p->bytes_up, use->bytes_up);
	p->bytes_down = al_add_sat(p->bytes_down, use->bytes_down);
	if (!c->flush_armed && al_timer_arm(c->flush, USAGE_FLUSH_MS, false) == 0)
		c->flush_armed = true;
	else if (!c->flush_armed)
		flush_usage(c); /* no timer: report at once rather than late */
}

/* The budget's charges go at once: the supervisor ends the run on them. */
static void child_charge(void *data, const struct al_gwp_charge *ch)
{
	struct child *c = data;
	uint8_t buf[512];

	child_send(c->sock, buf, al_gwp_encode_charge(ch, buf, sizeof(buf)));
}

/* A refusal for the run's summary and record: at once, as the gateway
 * sends each distinct one only once. */
static void child_refusal(void *data, const struct al_gateway_refusal *r)
{
	struct child *c = data;
	uint8_t buf[1024];

	child_send(c->sock, buf, al_gwp_encode_refusal(r, buf, sizeof(buf)));
}

/* The audit stream's sink: each event becomes a message. */
static void child_audit(void *data, const char *event, json_t *fields)
{
	struct child *c = data;
	uint8_t buf[AL_GWP_MAX];
	json_t *o = fields ? fields : json_object();

	/* Without an audit stream only refused connections go (for the run's
	 * summary of what was denied): nothing per allowed one, nor those the
	 * end of the run cut while undecided. */
	const char *decision = json_string_value(json_object_get(o, "decision"));
	const char *why = json_string_value(json_object_get(o, "reason"));
	if (!c->audit && strcmp(event, "token.minted") != 0 &&
	    !(strcmp(event, "net.connect") == 0 && decision && strcmp(decision, "deny") == 0 &&
	      !(why && strcmp(why, AL_GATEWAY_RUN_ENDED) == 0))) {
		json_decref(o);
		return;
	}
	int n = al_gwp_encode_audit(event, o, buf, sizeof(buf));

	json_decref(o);
	if (n == -E2BIG) {
		json_t *short_o = json_pack("{s:s}", "reason", "event too large to relay");
		n = al_gwp_encode_audit(event, short_o, buf, sizeof(buf));
		json_decref(short_o);
	}
	child_send(c->sock, buf, n);
}

static void child_message(struct al_watch *w, uint32_t events, void *data)
{
	struct child *c = data;
	uint8_t buf[AL_GWP_MAX];
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {buf, sizeof(buf)};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
	struct al_gwp_msg m;
	struct al_error err = {0};
	int fd = -1;

	(void)w;
	(void)events;
	ssize_t n = recvmsg(c->sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0)
		_exit(0); /* the supervisor is gone: so is the run */
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
			memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	if (al_gwp_decode(buf, (size_t)n, &m, &err) < 0) {
		al_closep(&fd);
		return;
	}
	if (m.type == AL_GWP_LISTENER && fd >= 0) {
		if (al_gateway_listen(c->gw, (enum al_gateway_listener)m.kind, TAKE_FD(fd), &err) <
		    0)
			al_warn("%s", err.msg);
	} else if (m.type == AL_GWP_PEERS && fd >= 0) {
		al_gateway_peers(c->gw, (uid_t)m.uid, TAKE_FD(fd));
	} else if (m.type == AL_GWP_SPENT) {
		al_gateway_set_spent(c->gw, m.spent);
	} else if (m.type == AL_GWP_DEADLINE) {
		if (al_gateway_set_deadline(c->gw, m.deadline, &err) < 0)
			al_warn("warning: gateway: the run's new deadline: %s", err.msg);
	} else if (m.type == AL_GWP_CLAIM) {
		uint8_t out[512];
		int e =
		    al_gateway_claim(c->gw, &m, buf, &err) < 0 ? (err.code ? err.code : EINVAL) : 0;
		/* The values are in the gateway's own store now: not here too. */
		explicit_bzero(buf, (size_t)n);
		child_send(c->sock, out,
			   al_gwp_encode_claimed(e, e ? err.msg : "", out, sizeof(out)));
	} else if (m.type == AL_GWP_END) {
		uint8_t out[128];
		struct al_gateway_stats st;
		al_gateway_close_all(c->gw);
		flush_usage(c);
		al_gateway_stats(c->gw, &st);
		child_send(c->sock, out, al_gwp_encode_stats(&st, out, sizeof(out)));
		_exit(0);
	}
	json_decref(m.fields);
	json_decref(m.claim);
	al_closep(&fd);
}

/* No file access but reading /etc/hosts; no TCP bind; no abstract unix
 * sockets or signals out of the domain. Returns the ABI in force. */
static int landlock_self(int abi, char *msg, size_t len)
{
	struct al_landlock_attr attr = {.handled_access_fs = al_landlock_fs_all(abi)};
	struct landlock_path_beneath_attr hosts = {.allowed_access = LANDLOCK_ACCESS_FS_READ_FILE};

	if (abi <= 0)
		return 0;
	if (abi >= 4)
		attr.handled_access_net = LANDLOCK_ACCESS_NET_BIND_TCP;
	if (abi >= 6)
		attr.scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL;
	_cleanup_close_ int rs =
	    al_sys_landlock_create_ruleset(&attr, al_landlock_attr_size(abi), 0);
	if (rs < 0) {
		snprintf(msg, len, "landlock ruleset: %s", strerror(errno));
		return -1;
	}
	_cleanup_close_ int fd = open("/etc/hosts", O_PATH | O_CLOEXEC);
	if (fd >= 0) {
		hosts.parent_fd = fd;
		if (al_sys_landlock_add_rule(rs, LANDLOCK_RULE_PATH_BENEATH, &hosts, 0) < 0) {
			snprintf(msg, len, "landlock rule for /etc/hosts: %s", strerror(errno));
			return -1;
		}
	}
	if (al_sys_landlock_restrict_self(rs, 0) < 0) {
		snprintf(msg, len, "landlock_restrict_self: %s", strerror(errno));
		return -1;
	}
	return abi;
}

static int confine(int *ret_abi, char *msg, size_t len)
{
	struct sock_fprog prog = {.len = al_gateway_seccomp_program_len,
				  .filter = (struct sock_filter *)al_gateway_seccomp_program};
	int r;

	if ((r = gw_drop_caps()) < 0) {
		snprintf(msg, len, "dropping capabilities: %s", strerror(-r));
		return -r;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		snprintf(msg, len, "no_new_privs: %s", strerror(errno));
		return errno;
	}
	if ((*ret_abi = landlock_self(al_landlock_abi(), msg, len)) < 0)
		return EPERM;
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0) {
		snprintf(msg, len, "installing its seccomp filter: %s", strerror(errno));
		return errno;
	}
	return 0;
}

/* For a decider on a Unix socket, the connector that makes the gateway's
 * connections to it (connector.c), started before the gateway confines
 * itself. 0, or an errno with msg. */
static int start_connector(const struct al_plan *plan, struct al_gateway *gw, char *msg, size_t len)
{
	const struct al_decider_conf *d = plan->decider;
	int fd = -1, r;

	if (!d || !d->socket || !d->egress_path)
		return 0;
	/* The kernel reaps it when it ends: the gateway's allowlist has no
	 * wait, and nothing here forks another child. */
	signal(SIGCHLD, SIG_IGN);
	if ((r = gw_connector_start(d->socket, d->egress_path, &fd, msg, len)) < 0)
		return -r;
	al_gateway_use_connector(gw, fd);
	return 0;
}

static _Noreturn void child_main(const struct al_plan *plan, const struct al_cred *cred,
				 const char *run_id, int sock, bool audit, bool held)
{
	struct child c = {.sock = 3, .audit = audit};
	struct al_loop *loop = NULL;
	struct al_audit *sink = NULL;
	struct al_error err = {0};
	char msg[256] = "";
	uint8_t buf[512];
	int e = 0, abi = 0, probe = 0;
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);

	/* Nothing of the supervisor's but the socket: not the sandbox's
	 * pidfd, pipes or notification fd, not the audit file, not the
	 * cgroup. stdin and stdout become /dev/null (the CLI's output must
	 * end when the CLI does); stderr stays for warnings. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || null < 0 || dup2(null, 0) < 0 ||
	    dup2(null, 1) < 0 || dup2(sock, 3) < 0 || al_sys_close_range(4, ~0U, 0) < 0)
		_exit(2);
	/* The host's environment (tokens, keys) is the supervisor's, not
	 * ours: wipe the strings themselves (they are also what
	 * /proc/PID/environ shows), then the list. No core dump, no ptrace
	 * attach by another process of the user, and SIGPIPE ignored here
	 * (its caller may not; sigaction is not in our allowlist later). */
	for (char **v = environ; v && *v; v++)
		explicit_bzero(*v, strlen(*v));
	clearenv();
	struct rlimit no_core = {0, 0};
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 || setrlimit(RLIMIT_CORE, &no_core) < 0)
		_exit(2);
	signal(SIGPIPE, SIG_IGN);
	if (getppid() == 1)
		_exit(2);
	if (al_loop_new(&loop, &err) < 0)
		_exit(2);
	sink = al_audit_sink(child_audit, &c);
	c.gw = al_gateway_new(plan, sink, loop);
	al_gateway_set_run(c.gw, run_id);
	al_gateway_set_cred(c.gw, cred);
	if (held)
		al_gateway_hold(c.gw);
	if (!(c.flush = al_loop_timer(loop, on_flush, &c)))
		_exit(2);
	al_gateway_on_usage(c.gw, child_usage, &c);
	al_gateway_on_charge(c.gw, child_charge, &c);
	al_gateway_on_refusal(c.gw, child_refusal, &c);
	/* The resolver reads the host's configuration before the walls go up. */
	if (al_gateway_prepare(c.gw, &err) < 0) {
		e = EINVAL;
		snprintf(msg, sizeof(msg), "%s", err.msg);
	}
	if (!e)
		e = start_connector(plan, c.gw, msg, sizeof(msg));
	if (!e)
		e = confine(&abi, msg, sizeof(msg));
	/* Its own check that it reads no files: the root directory always
	 * exists, and landlock refuses reading it. */
	if (!e) {
		int fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		probe = fd < 0 ? errno : 0;
		if (fd >= 0)
			close(fd);
	}
	child_send(c.sock, buf, al_gwp_encode_started(e, abi, probe, msg, buf, sizeof(buf)));
	if (e)
		_exit(1);
	/* Off the run's way to exec: the supervisor has its answer. */
	al_gateway_warm(c.gw);
	if (!al_loop_add(loop, c.sock, EPOLLIN, child_message, &c))
		_exit(2);
	for (;;)
		if (al_loop_dispatch(loop, -1) < 0)
			_exit(2);
}

/* ---- the supervisor's side -------------------------------------------- */

void gw_proc_fail(struct al_gateway_proc *gp, const char *fmt, ...)
{
	va_list ap;

	if (gp->state == AL_GATEWAY_FAILED)
		return;
	va_start(ap, fmt);
	vsnprintf(gp->error, sizeof(gp->error), fmt, ap);
	va_end(ap);
	gp->state = AL_GATEWAY_FAILED;
	if (gp->pidfd >= 0)
		al_sys_pidfd_send_signal(gp->pidfd, SIGKILL);
	gp->ev->changed(gp->ev->data);
}

int gw_proc_read_one(struct al_gateway_proc *gp)
{
	uint8_t buf[AL_GWP_MAX];
	struct al_gwp_msg m;
	struct al_error err = {0};
	ssize_t n = recv(gp->sock, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC);

	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -1;
	if (n == 0)
		return -1;
	if ((size_t)n > sizeof(buf) || al_gwp_decode(buf, (size_t)n, &m, &err) < 0) {
		gw_proc_fail(gp, "the gateway process sent a malformed message (%s)",
			     (size_t)n > sizeof(buf) ? "too long" : err.msg);
		return -1;
	}
	switch (m.type) {
	case AL_GWP_STARTED:
		if (gp->state != AL_GATEWAY_STARTING) {
			gw_proc_fail(gp, "the gateway process started twice");
			return -1;
		}
		if (m.error) {
			gw_proc_fail(gp, "%s", m.text[0] ? m.text : strerror(m.error));
			return -1;
		}
		/* With landlock, its domain must be the plan's and refuse the
		 * test open; without (the policy chose best-effort), there is
		 * nothing to check. */
		if (al_landlock_abi() > 0 &&
		    (m.landlock_abi < al_landlock_abi() || m.file_errno != EACCES)) {
			gw_proc_fail(
			    gp,
			    "the gateway process is not confined (landlock ABI %d of %d, its "
			    "test open got %s)",
			    m.landlock_abi, al_landlock_abi(),
			    m.file_errno ? strerrorname_np(m.file_errno) : "success");
			return -1;
		}
		al_timer_freep(&gp->start_timer);
		al_debug("gateway process %d confined: landlock ABI %d, a test open got %s",
			 (int)gp->pid, m.landlock_abi, strerrorname_np(m.file_errno));
		gp->landlock_abi = m.landlock_abi;
		gp->file_errno = m.file_errno;
		gp->state = AL_GATEWAY_RUNNING;
		gp->ev->changed(gp->ev->data);
		break;
	case AL_GWP_AUDIT:
		if (strcmp(m.event, "net.connect") == 0) {
			const char *d = json_string_value(json_object_get(m.fields, "decision"));
			const char *why = json_string_value(json_object_get(m.fields, "reason"));
			json_int_t port = json_integer_value(json_object_get(m.fields, "port"));
			/* Refused; not the undecided ones the run's end cut (they
			 * are not counted as denials). */
			if (d && strcmp(d, "deny") == 0 &&
			    !(why && strcmp(why, AL_GATEWAY_RUN_ENDED) == 0))
				gp->ev->denied(gp->ev->data,
					       json_string_value(json_object_get(m.fields, "name")),
					       port > 0 && port <= 65535 ? (int)port : 0, why);
		}
		if (strcmp(m.event, "token.minted") == 0 && gp->ev->minted)
			gp->ev->minted(gp->ev->data, m.fields);
		al_audit_emit(gp->audit, m.event, m.fields);
		break;
	case AL_GWP_REFUSAL:
		if (gp->ev->refused)
			gp->ev->refused(gp->ev->data, &m.refusal);
		break;
	case AL_GWP_STATS:
		gp->stats = m.stats;
		gp->have_stats = true;
		break;
	case AL_GWP_USAGE: {
		const char *past;
		if (gp->state != AL_GATEWAY_RUNNING) {
			gw_proc_fail(gp, "the gateway process reported use before its start");
			return -1;
		}
		if ((past = gp->ev->usage(gp->ev->data, &m.usage))) {
			gw_proc_fail(gp,
				     "the gateway process let more through than the policy allows: "
				     "past %s after a connection to %s",
				     past, m.usage.host);
			return -1;
		}
		break;
	}
	case AL_GWP_CHARGE:
		if (gp->state != AL_GATEWAY_RUNNING || !gp->plan->budget.set) {
			gw_proc_fail(gp, "the gateway process charged a budget %s",
				     gp->plan->budget.set ? "before its start"
							  : "the run does not have");
			return -1;
		}
		if (gp->ev->charge)
			gp->ev->charge(gp->ev->data, &m.charge);
		break;
	case AL_GWP_CLAIMED:
		if (!gp->claiming) {
			gw_proc_fail(gp, "the gateway process answered a claim not made");
			return -1;
		}
		gp->claiming = false;
		gp->claim_error = m.error;
		snprintf(gp->claim_text, sizeof(gp->claim_text), "%s", m.text);
		break;
	default:
		json_decref(m.claim);
		gw_proc_fail(gp, "the gateway process sent a message only the supervisor sends");
		return -1;
	}
	return 1;
}

static void on_pidfd(struct al_watch *w, uint32_t events, void *data);

/* Up to max of the messages waiting on its socket, each handled; its
 * hang-up or a malformed message ends the reading for good. */
static void read_pending(struct al_gateway_proc *gp, int max)
{
	for (int i = 0; i < max; i++) {
		int r = gw_proc_read_one(gp);
		if (r == 0)
			return;
		if (r < 0) {
			al_watch_removep(&gp->w_sock);
			/* It hung up: it serves no more, so the run cannot go on.
			 * Most often it died: say how (its exit follows at once). */
			struct pollfd p = {.fd = gp->pidfd, .events = POLLIN};
			if (gp->pidfd >= 0 && gp->w_pidfd && poll(&p, 1, 100) == 1) {
				on_pidfd(gp->w_pidfd, POLLIN, gp);
				return;
			}
			if (!gp->ending)
				gw_proc_fail(gp, "the gateway process closed its socket");
			return;
		}
	}
}

static void on_sock(struct al_watch *w, uint32_t events, void *data)
{
	(void)w;
	(void)events;
	/* A bounded batch: the loop's other events get their turn. */
	read_pending(data, 64);
}

void al_gateway_proc_drain(struct al_gateway_proc *gp)
{
	/* What it sent so far is in the socket's buffer: a few thousand
	 * messages at most; the bound holds even if it keeps sending. */
	if (gp && gp->w_sock)
		read_pending(gp, 16384);
}

static const char *death(int code, int status, char *buf, size_t len)
{
	if (code == CLD_EXITED)
		snprintf(buf, len, "exit status %d", status);
	else if (status == SIGSYS)
		snprintf(buf, len, "killed by SIGSYS: a system call outside its allowlist");
	else
		snprintf(buf, len, "killed by SIG%s",
			 sigabbrev_np(status) ? sigabbrev_np(status) : "?");
	return buf;
}

static void on_pidfd(struct al_watch *w, uint32_t events, void *data)
{
	struct al_gateway_proc *gp = data;
	siginfo_t si = {0};
	char why[96];

	(void)w;
	(void)events;
	al_watch_removep(&gp->w_pidfd);
	while (gw_proc_read_one(gp) > 0) /* what it said before it died */
		;
	if (waitid(P_PIDFD, (id_t)gp->pidfd, &si, WEXITED | WNOHANG) < 0)
		si.si_code = CLD_KILLED;
	if (!gp->ending)
		gw_proc_fail(gp, "the gateway process died (%s)",
			     death(si.si_code, si.si_status, why, sizeof(why)));
	al_closep(&gp->pidfd);
}

static void on_start_timeout(struct al_timer *t, uint64_t expirations, void *data)
{
	struct al_gateway_proc *gp = data;

	(void)t;
	(void)expirations;
	if (gp->state == AL_GATEWAY_STARTING)
		gw_proc_fail(gp, "the gateway process did not report its start within %d s",
			     START_TIMEOUT_MS / 1000);
}

static int start(const struct al_plan *plan, const struct al_cred *cred, const char *run_id,
		 bool held, struct al_loop *loop, struct al_audit *audit,
		 const struct al_gateway_proc_events *ev, struct al_gateway_proc **ret,
		 struct al_error *err)
{
	int sv[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return al_error_setsys(err, errno, "gateway: socketpair");
	pid = fork();
	if (pid < 0) {
		int e = errno;
		close(sv[0]);
		close(sv[1]);
		return al_error_setsys(err, e, "gateway: fork");
	}
	if (pid == 0) {
		close(sv[0]);
		child_main(plan, cred, run_id, sv[1], audit != NULL, held);
	}
	close(sv[1]);
	return al_gateway_proc_adopt(plan, loop, audit, ev, pid, sv[0], ret, err);
}

int al_gateway_proc_start(const struct al_plan *plan, const struct al_cred *cred,
			  const char *run_id, struct al_loop *loop, struct al_audit *audit,
			  const struct al_gateway_proc_events *ev, struct al_gateway_proc **ret,
			  struct al_error *err)
{
	return start(plan, cred, run_id, false, loop, audit, ev, ret, err);
}

int al_gateway_proc_start_held(const struct al_plan *plan, const char *run_id, struct al_loop *loop,
			       struct al_audit *audit, const struct al_gateway_proc_events *ev,
			       struct al_gateway_proc **ret, struct al_error *err)
{
	return start(plan, NULL, run_id, true, loop, audit, ev, ret, err);
}

int al_gateway_proc_adopt(const struct al_plan *plan, struct al_loop *loop, struct al_audit *audit,
			  const struct al_gateway_proc_events *ev, pid_t pid, int sock,
			  struct al_gateway_proc **ret, struct al_error *err)
{
	struct al_gateway_proc *gp = xcalloc(1, sizeof(*gp));

	*gp = (struct al_gateway_proc){.plan = plan,
				       .loop = loop,
				       .audit = audit,
				       .ev = ev,
				       .pid = pid,
				       .pidfd = al_sys_pidfd_open(pid, 0),
				       .sock = sock};
	if (gp->pidfd < 0 || !(gp->w_sock = al_loop_add(loop, gp->sock, EPOLLIN, on_sock, gp)) ||
	    !(gp->w_pidfd = al_loop_add(loop, gp->pidfd, EPOLLIN, on_pidfd, gp)) ||
	    !(gp->start_timer = al_loop_timer(loop, on_start_timeout, gp)) ||
	    al_timer_arm(gp->start_timer, START_TIMEOUT_MS, false) < 0) {
		int e = errno;
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		al_closep(&gp->pidfd);
		al_gateway_proc_free(gp);
		return al_error_setsys(err, e, "gateway: watching its process");
	}
	*ret = gp;
	return 0;
}

enum al_gateway_proc_state al_gateway_proc_state(const struct al_gateway_proc *gp)
{
	return gp->state;
}

const char *al_gateway_proc_error(const struct al_gateway_proc *gp)
{
	return gp->error;
}

json_t *al_gateway_proc_json(const struct al_gateway_proc *gp)
{
	return json_pack("{s:I, s:i, s:s, s:s}", "pid", (json_int_t)gp->pid, "landlock_abi",
			 gp->landlock_abi, "file_open", strerrorname_np(gp->file_errno), "seccomp",
			 "allowlist");
}

void al_gateway_proc_spent(struct al_gateway_proc *gp, uint64_t nano)
{
	uint8_t buf[32];
	int n = al_gwp_encode_spent(nano, buf, sizeof(buf));

	if (gp->state == AL_GATEWAY_RUNNING && n > 0)
		(void)send(gp->sock, buf, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

int al_gateway_proc_deadline(struct al_gateway_proc *gp, int64_t deadline)
{
	uint8_t buf[32];
	int n = al_gwp_encode_deadline(deadline, buf, sizeof(buf));

	if (gp->state != AL_GATEWAY_RUNNING)
		return -ESRCH;
	if (n < 0)
		return n;
	/* Never waits on the gateway: a channel so full that this does not
	 * fit is a gateway that does not read. */
	return send(gp->sock, buf, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) == n ? 0 : -errno;
}

int al_gateway_proc_end(struct al_gateway_proc *gp, struct al_gateway_stats *st)
{
	uint8_t buf[16];
	siginfo_t si = {0};
	char why[96];
	bool exited = false;

	uint64_t deadline = al_now_ms() + END_TIMEOUT_MS;

	gp->ending = true;
	al_timer_freep(&gp->start_timer);
	if (gp->sock >= 0 && gp->state == AL_GATEWAY_RUNNING &&
	    send(gp->sock, buf, (size_t)al_gwp_encode_end(buf, sizeof(buf)), MSG_NOSIGNAL) > 0) {
		/* It audits what is still open, reports and exits: read until
		 * the socket closes, then wait for its exit, END_TIMEOUT_MS in
		 * all. */
		for (uint64_t t = al_now_ms(); t < deadline; t = al_now_ms()) {
			struct pollfd p = {.fd = gp->sock, .events = POLLIN};
			if (poll(&p, 1, (int)(deadline - t)) <= 0)
				break;
			if (gw_proc_read_one(gp) < 0)
				break;
		}
		uint64_t t = al_now_ms();
		struct pollfd p = {.fd = gp->pidfd, .events = POLLIN};
		if (gp->pidfd >= 0 && t < deadline)
			poll(&p, 1, (int)(deadline - t));
	}
	if (gp->pidfd >= 0) {
		if (waitid(P_PIDFD, (id_t)gp->pidfd, &si, WEXITED | WNOHANG) < 0 ||
		    si.si_pid == 0) {
			al_sys_pidfd_send_signal(gp->pidfd, SIGKILL);
			while (waitid(P_PIDFD, (id_t)gp->pidfd, &si, WEXITED) < 0 && errno == EINTR)
				;
			snprintf(why, sizeof(why), "still running after %d ms", END_TIMEOUT_MS);
		} else {
			exited = si.si_code == CLD_EXITED && si.si_status == 0;
			death(si.si_code, si.si_status, why, sizeof(why));
		}
		al_closep(&gp->pidfd);
	} else {
		snprintf(why, sizeof(why), "already gone");
	}
	*st = gp->stats;
	if (gp->state == AL_GATEWAY_FAILED)
		return -1;
	if (!gp->have_stats || !exited) {
		/* Its counters (and the audit of what was still open) are
		 * missing: the record cannot say what went out. */
		snprintf(gp->error, sizeof(gp->error),
			 "the gateway process did not end cleanly (%s%s), so the run's network "
			 "counters are not known",
			 why, gp->have_stats ? "" : ", no counters");
		gp->state = AL_GATEWAY_FAILED;
		return -1;
	}
	return 0;
}

void al_gateway_proc_free(struct al_gateway_proc *gp)
{
	siginfo_t si;

	if (!gp)
		return;
	al_watch_removep(&gp->w_sock);
	al_watch_removep(&gp->w_pidfd);
	al_timer_freep(&gp->start_timer);
	if (gp->pidfd >= 0) {
		/* Not ended (the run failed to start): do not leave it behind. */
		if (al_sys_pidfd_send_signal(gp->pidfd, SIGKILL) == 0)
			while (waitid(P_PIDFD, (id_t)gp->pidfd, &si, WEXITED) < 0 && errno == EINTR)
				;
		al_closep(&gp->pidfd);
	}
	al_closep(&gp->sock);
	free(gp);
}
