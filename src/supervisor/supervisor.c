#include "supervisor/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/sys.h"
#include "core/util.h"
#include "cred/store.h"
#include "supervisor/confine.h"
#include "supervisor/copy.h"
#include "tls/ca.h"

/* Stop everything in the sandbox (once asked; the backend kills it hard if
 * asking is not enough). */
void al_sup_stop(struct al_supervisor *l)
{
	if (!l->attached || l->gone)
		return;
	l->ctl.stop(l->ctl.data); /* asked again: the backend stops it hard */
}

static void on_meter_stop(void *data)
{
	al_sup_stop(data);
}

static void setup_failed(struct al_supervisor *l, const char *step, int e, const char *msg)
{
	l->result.reason = AL_END_SETUP_ERROR;
	l->result.err = e;
	snprintf(l->result.step, sizeof(l->result.step), "%s", step);
	snprintf(l->result.msg, sizeof(l->result.msg), "%s", msg);
}

/* The checks passed: from here on this process needs only its open fds,
 * the run's cgroup directories, the result's directory and the right to
 * signal the sandbox. Give up the rest before the command (and its
 * traffic through the gateway's parsers) starts. The ruleset was built in
 * attach, while the child set itself up. */
static int confine(struct al_supervisor *l)
{
	struct al_error err = {0};
	int r = al_confine_self(l->confine_ruleset, &err);

	al_closep(&l->confine_ruleset);
	if (r < 0) {
		setup_failed(l, "confine", 0, err.msg);
		return -1;
	}
	al_log_phase("supervisor confined");
	return 0;
}

/* Each --copy-out's HOSTDIR, made when missing and opened once, now: the
 * copy-out and the landlock rule use these fds, never the path again. */
static int open_copy_out(struct al_supervisor *l, struct al_error *err)
{
	const struct al_plan *p = l->plan;

	if (!p->n_copy_out)
		return 0;
	l->out_fds = xcalloc(p->n_copy_out, sizeof(*l->out_fds));
	for (size_t i = 0; i < p->n_copy_out; i++)
		l->out_fds[i] = -1;
	for (size_t i = 0; i < p->n_copy_out; i++) {
		l->out_fds[i] = al_copy_open_hostdir(p->copy_out[i].hostdir, err);
		if (l->out_fds[i] < 0)
			return al_error_wrap(err, "%s", p->copy_out[i].origin);
	}
	return 0;
}

/* --copy-out, once the backend has said the sandbox is empty (finish):
 * whatever ended the run, if the command started. */
static void copy_out(struct al_supervisor *l, struct al_run_result *res, bool empty)
{
	const struct al_plan *p = l->plan;
	struct al_copy_caps caps = {p->copy_out_bytes, p->copy_out_files};

	if (!p->n_copy_out || !l->running || !l->out_fds || res->copy_out)
		return;
	if (!empty) {
		al_warn("warning: --copy-out skipped: the sandbox could not be waited for");
		return;
	}
	res->copy_out = json_array();
	for (size_t i = 0; i < p->n_copy_out; i++)
		json_array_append_new(res->copy_out, al_copy_out(l->scratch_fd, p, &p->copy_out[i],
								 l->out_fds[i], &caps));
	al_log_phase("copied out");
}

/* What the supervisor keeps once it confines itself: see confine(). */
static int prepare_confinement(struct al_supervisor *l, const struct al_cgroup *cg,
			       struct al_error *err)
{
	struct al_confine c = {.out_dirfd = l->confine_dirfd,
			       .landlock_abi = al_landlock_abi(),
			       .write_fds = l->out_fds,
			       .n_write_fds = l->plan->n_copy_out,
			       .remove_dirfd = l->ctl.remove_dirfd,
			       .remove_tree = l->ctl.remove_tree,
			       .slot_dirfd = l->ctl.slot_dirfd,
			       .make_run_dirs = l->session};

	c.n_run_dirs = c.n_parent_dirs =
	    al_cgroup_dirs(cg, c.run_dirs, c.parent_dirs, AL_CONFINE_MAX_DIRS);
	return al_confine_prepare(&c, &l->confine_ruleset, err);
}

/* The backend's events */

static void release(struct al_supervisor *l)
{
	if (l->confine_self && confine(l) < 0) {
		al_sup_stop(l);
		return;
	}
	l->released = true;
	l->ctl.release(l->ctl.data);
}

/* The gateway process started (confined, its resolver ready), or failed:
 * a failure stops the run whenever it comes, before the command or during
 * it. Nothing fails open. */
static void on_gateway(void *data)
{
	struct al_supervisor *l = data;

	if (l->finishing)
		return; /* the end reports it */
	switch (al_gateway_proc_state(l->gw)) {
	case AL_GATEWAY_STARTING:
		break;
	case AL_GATEWAY_RUNNING:
		al_log_phase("gateway process started");
		al_audit_emit(l->audit, "gateway.start", al_gateway_proc_json(l->gw));
		if (l->release_waits) {
			l->release_waits = false;
			release(l);
		}
		break;
	case AL_GATEWAY_FAILED:
		if (l->result.reason != AL_END_SETUP_ERROR)
			setup_failed(l, "gateway", 0, al_gateway_proc_error(l->gw));
		l->release_waits = false;
		al_sup_stop(l);
		break;
	}
}

static const char *on_gateway_usage(void *data, const struct al_gateway_usage *use)
{
	struct al_supervisor *l = data;
	return al_meter_net(&l->meter, use);
}

/* The gateway charged the budget for requests to a host (or refused one
 * that would have passed it: then the run ends for its budget). */
static void on_gateway_charge(void *data, const struct al_gwp_charge *ch)
{
	struct al_supervisor *l = data;

	al_meter_charge(&l->meter, ch->host, ch->requests, ch->bytes_up);
	if (ch->flags & AL_GWP_CHARGE_EXHAUSTED)
		al_meter_stop(&l->meter, AL_END_BUDGET, "budget", l->plan->budget.max,
			      al_cost_total(&l->result.cost));
}

static void on_gateway_minted(void *data, const json_t *fields)
{
	struct al_supervisor *l = data;
	const char *name = json_string_value(json_object_get(fields, "name"));
	const char *jti = json_string_value(json_object_get(fields, "jti"));
	const char *aud = json_string_value(json_object_get(fields, "aud"));
	json_t *exp = json_object_get(fields, "exp");

	if (!name || !jti || !aud || !json_is_integer(exp))
		return;
	l->result.n_minted++;
	if (!l->result.minted)
		l->result.minted = json_array();
	if (json_array_size(l->result.minted) < AL_MINTED_KEPT)
		json_array_append_new(l->result.minted,
				      json_pack("{s:s, s:s, s:s, s:O}", "name", name, "jti", jti,
						"aud", aud, "exp", exp));
}

static void on_meter_spent(void *data, uint64_t nano)
{
	struct al_supervisor *l = data;

	if (l->gw && nano != l->spent_told) {
		l->spent_told = nano;
		al_gateway_proc_spent(l->gw, nano);
	}
}

static void on_gateway_denied(void *data, const char *host, int port, const char *reason)
{
	struct al_supervisor *l = data;
	al_result_note_denied_host(&l->result, host, port, reason);
}

static void on_gateway_refused(void *data, const struct al_gateway_refusal *r)
{
	struct al_supervisor *l = data;
	al_result_note_refusal(&l->result, r);
}

/* Fork the gateway's process (once). The run's CA signs in that process
 * only: our copy of its key goes once it has its own. */
static int start_gateway(struct al_supervisor *l, struct al_error *err)
{
	int r;

	if (l->gw)
		return 0;
	r = l->held ? al_gateway_proc_start_held(l->plan, l->run_id, l->ev, l->audit,
						 &l->gateway_events, &l->gw, err)
		    : al_gateway_proc_start(l->plan, l->cred, l->run_id, l->ev, l->audit,
					    &l->gateway_events, &l->gw, err);
	if (r < 0)
		return r;
	if (l->cred && l->cred->ca)
		al_tls_ca_drop_key(l->cred->ca);
	return 0;
}

int al_supervisor_start_gateway(struct al_supervisor *l, struct al_error *err)
{
	return l->plan->gateway ? start_gateway(l, err) : 0;
}

static void ev_listener(void *data, enum al_gateway_listener kind, int fd)
{
	struct al_supervisor *l = data;
	struct al_error gerr = {0};

	if (!l->plan->gateway || l->result.reason == AL_END_SETUP_ERROR) {
		close(fd);
		return;
	}
	/* Started before the sandbox (al_supervisor_start_gateway), or now
	 * by a caller that did not. */
	if (start_gateway(l, &gerr) < 0) {
		close(fd);
		setup_failed(l, "gateway", 0, gerr.msg);
		al_sup_stop(l);
		return;
	}
	l->gw_listening = true;
	if (al_gateway_proc_listen(l->gw, kind, fd, &gerr) < 0) {
		setup_failed(l, "gateway", 0, gerr.msg);
		al_sup_stop(l);
	}
}

static void ev_peers(void *data, uid_t uid, int diag)
{
	struct al_supervisor *l = data;
	struct al_error gerr = {0};

	if (!l->plan->gateway || l->result.reason == AL_END_SETUP_ERROR) {
		close(diag);
		return;
	}
	int r = start_gateway(l, &gerr);
	if (r < 0)
		close(diag);
	else
		r = al_gateway_proc_peers(l->gw, uid, diag, &gerr);
	if (r < 0) {
		setup_failed(l, "gateway", 0, gerr.msg);
		al_sup_stop(l);
	}
}

static void ev_scratch(void *data, int fd)
{
	struct al_supervisor *l = data;
	struct al_error err = {0};

	/* The backend hands the scratch only where something reads it after
	 * the run: --copy-out, a session's files, a layer's own report (the
	 * microvm VMM's, read by the backend through its own copy). */
	if (l->scratch_fd >= 0)
		return;
	l->scratch_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (l->scratch_fd < 0) {
		setup_failed(l, "confine", errno, "keeping the scratch for --copy-out");
		al_sup_stop(l);
	} else if (l->confine_ruleset >= 0 &&
		   al_confine_allow_read(l->confine_ruleset, fd, &err) < 0) {
		setup_failed(l, "confine", 0, err.msg);
		al_sup_stop(l);
	}
}

/* The pty's master, from inside the sandbox: once, and only with tty. */
static void ev_terminal(void *data, int fd)
{
	struct al_supervisor *l = data;
	struct al_error err = {0};

	if (!l->plan->tty || l->tty_fd >= 0 || l->result.reason == AL_END_SETUP_ERROR) {
		close(fd);
		return;
	}
	if (al_sup_stdio_terminal(l, fd, &err) < 0) {
		setup_failed(l, "terminal", 0, err.msg);
		al_sup_stop(l);
	}
}

static void ev_ready(void *data)
{
	struct al_supervisor *l = data;

	if (l->result.reason == AL_END_SETUP_ERROR)
		return;
	if (l->plan->tty && l->tty_fd < 0) {
		setup_failed(l, "terminal", 0, "the sandbox handed over no terminal");
		al_sup_stop(l);
		return;
	}
	if (l->plan->gateway &&
	    (!l->gw_listening || al_gateway_proc_state(l->gw) != AL_GATEWAY_RUNNING)) {
		if (!l->gw_listening) {
			setup_failed(l, "gateway", 0,
				     "the sandbox handed over no listening socket for the gateway");
			al_sup_stop(l);
			return;
		}
		l->release_waits = true; /* on_gateway releases it */
		return;
	}
	release(l);
}

static void ev_running(void *data)
{
	((struct al_supervisor *)data)->running = true;
}

static void ev_exited(void *data, int status)
{
	struct al_supervisor *l = data;

	l->have_status = true;
	l->status = status;
	al_sup_stdio_exited(l);
}

static void ev_exec_failed(void *data, int err, const char *what)
{
	struct al_supervisor *l = data;

	l->result.reason = AL_END_EXEC_FAILED;
	l->result.err = err;
	snprintf(l->result.step, sizeof(l->result.step), "exec");
	snprintf(l->result.msg, sizeof(l->result.msg), "%s", what);
}

static void ev_failed(void *data, const char *step, int err, const char *msg)
{
	setup_failed(data, step, err, msg);
}

static void ev_gone(void *data)
{
	struct al_supervisor *l = data;

	l->gone = true;
	al_sup_stdio_exited(l);
}

static void on_timer(struct al_timer *t, uint64_t expirations, void *data)
{
	struct al_supervisor *l = data;

	(void)t;
	(void)expirations;
	if (l->have_status)
		return;
	al_meter_timeout(&l->meter);
}

struct al_supervisor *al_supervisor_new(const struct al_supervisor_config *cfg)
{
	struct al_supervisor *l = xcalloc(1, sizeof(*l));

	l->ev = cfg->loop;
	l->plan = cfg->plan;
	l->audit = cfg->audit;
	l->cred = cfg->cred;
	snprintf(l->run_id, sizeof(l->run_id), "%s", cfg->run_id ? cfg->run_id : "");
	l->io = *cfg->io;
	l->confine_self = cfg->confine_self;
	l->session = cfg->session;
	l->held = cfg->held;
	l->confine_dirfd = cfg->confine_dirfd;
	l->confine_ruleset = -1;
	l->scratch_fd = -1;
	l->stdin_wr = l->stdout_rd = l->stderr_rd = l->tty_fd = l->tty_peer = -1;
	l->rows = cfg->io->rows ? cfg->io->rows : AL_TTY_ROWS;
	l->cols = cfg->io->cols ? cfg->io->cols : AL_TTY_COLS;
	l->out[0].fd = l->out[1].fd = -1;
	al_sup_stdio_init(l);
	l->result.reason = AL_END_EXITED;
	l->meter = (struct al_meter){.plan = l->plan,
				     .audit = l->audit,
				     .res = &l->result,
				     .stop = on_meter_stop,
				     .spent = on_meter_spent,
				     .data = l};
	l->gateway_events = (struct al_gateway_proc_events){.changed = on_gateway,
							    .usage = on_gateway_usage,
							    .charge = on_gateway_charge,
							    .minted = on_gateway_minted,
							    .denied = on_gateway_denied,
							    .refused = on_gateway_refused,
							    .data = l};
	l->events = (struct al_sandbox_events){.data = l,
					       .meter = &l->meter,
					       .res = &l->result,
					       .listener = ev_listener,
					       .peers = ev_peers,
					       .scratch = ev_scratch,
					       .terminal = ev_terminal,
					       .ready = ev_ready,
					       .running = ev_running,
					       .exited = ev_exited,
					       .exec_failed = ev_exec_failed,
					       .failed = ev_failed,
					       .gone = ev_gone};
	return l;
}

const struct al_sandbox_events *al_supervisor_events(struct al_supervisor *l)
{
	return &l->events;
}

int al_supervisor_attach(struct al_supervisor *l, const struct al_sandbox_ctl *ctl, int stdin_wr,
			 int stdout_rd, int stderr_rd, const struct al_cgroup *cg,
			 struct al_error *err)
{
	int r;

	l->ctl = *ctl;
	l->attached = true;
	l->stdin_wr = stdin_wr;
	l->stdout_rd = stdout_rd;
	l->stderr_rd = stderr_rd;
	l->start_ms = al_now_ms();
	l->deadline_ms = l->plan->timeout_ms ? l->start_ms + l->plan->timeout_ms : 0;
	l->timer = al_loop_timer(l->ev, on_timer, l);
	if (!l->timer)
		r = al_error_setsys(err, errno, "timerfd_create");
	/* A held sandbox (a warm pool's) has no lifetime yet: its claim's
	 * counts from the claim (al_supervisor_claim). */
	else if (!l->held && (r = al_timer_arm(l->timer, l->plan->timeout_ms, false)) < 0)
		r = al_error_setsys(err, -r, "timerfd_settime");
	else if ((r = al_sup_stdio_start(l, err)) == 0 && (r = open_copy_out(l, err)) == 0 &&
		 l->confine_self)
		r = prepare_confinement(l, cg, err);
	if (r < 0)
		al_sup_stop(l);
	return r;
}

bool al_supervisor_done(const struct al_supervisor *l)
{
	/* The command is gone (it ended, or the sandbox itself is gone) and
	 * its output is drained. */
	return (l->gone || l->have_status) && al_sup_stdio_drained(l);
}

void al_supervisor_signal(struct al_supervisor *l, int sig)
{
	if (sig == SIGINT || sig == SIGTERM)
		l->stop_signals++;
	if (!l->running || l->stop_signals > 1) {
		/* Nothing to forward to yet, or asked twice: stop it all. */
		if (!l->meter.hit && l->result.reason != AL_END_TIMEOUT) {
			l->result.reason = AL_END_KILLED;
			l->result.signal = sig;
		}
		al_sup_stop(l);
		return;
	}
	al_debug("forwarding signal %d to the sandbox", sig);
	l->ctl.signal(l->ctl.data, sig);
}

void al_supervisor_resize(struct al_supervisor *l, unsigned short rows, unsigned short cols)
{
	if (!rows || !cols)
		return;
	l->rows = rows;
	l->cols = cols;
	al_sup_stdio_resize(l);
}

void al_supervisor_killed(struct al_supervisor *l, int sig)
{
	if (l->meter.hit || l->have_status || l->result.reason == AL_END_TIMEOUT ||
	    l->result.reason == AL_END_SETUP_ERROR)
		return;
	l->result.reason = AL_END_KILLED;
	l->result.signal = sig;
}

static int limit_exit_code(void)
{
	return 128 + SIGKILL; /* 137: the sandbox was killed by a limit */
}

void al_supervisor_finish(struct al_supervisor *l, struct al_run_result *out)
{
	struct al_run_result *res = &l->result;
	struct al_sandbox_end end = {0};

	if (l->attached)
		l->ctl.finish(l->ctl.data, &end);
	copy_out(l, res, end.empty);
	res->wall_ms = al_now_ms() - l->start_ms;
	if (end.reported) {
		l->have_status = true;
		l->status = end.status;
	}
	/* Without a cpuacct hierarchy (no cpu-time limit) the CPU times come
	 * from rusage, which counts every process init reaped. */
	if (!res->cgroup.cpu_usage_us) {
		res->cgroup.cpu_user_us = end.user_us;
		res->cgroup.cpu_system_us = end.system_us;
		res->cgroup.cpu_usage_us = end.user_us + end.system_us;
	}
	res->have_cpu = true;
	if (l->gw) {
		/* It audits and counts the connections still open, then reports.
		 * A gateway that failed or did not end cleanly fails the run:
		 * what went out is not known. */
		l->finishing = true;
		if (al_gateway_proc_end(l->gw, &res->network) < 0 &&
		    res->reason != AL_END_SETUP_ERROR) {
			setup_failed(l, "gateway", 0, al_gateway_proc_error(l->gw));
			al_warn("%s", al_gateway_proc_error(l->gw));
		}
		res->have_network = true;
		al_debug("network use the gateway reported: %zu host%s, %" PRIu64
			 " connection%s, %" PRIu64 " bytes up, %" PRIu64 " bytes down",
			 l->meter.n_hosts, l->meter.n_hosts == 1 ? "" : "s", l->meter.net.requests,
			 l->meter.net.requests == 1 ? "" : "s", l->meter.net.bytes_up,
			 l->meter.net.bytes_down);
	}
	switch (res->reason) {
	case AL_END_SETUP_ERROR:
		res->exit_code = 125;
		break;
	case AL_END_TIMEOUT:
		res->exit_code = 124;
		break;
	case AL_END_MEMORY:
	case AL_END_PIDS:
	case AL_END_CPU_TIME:
	case AL_END_OUTPUT:
	case AL_END_BUDGET:
		res->exit_code = limit_exit_code();
		break;
	case AL_END_KILLED:
		res->exit_code = 128 + res->signal;
		break;
	case AL_END_EXEC_FAILED:
		res->exit_code = res->err == ENOENT ? 127 : 126;
		break;
	default:
		if (!l->have_status && (l->running || l->released) && end.init_killable &&
		    end.code == CLD_KILLED) {
			/* The sandbox's own code killed its init (kill(-1) as
			 * the run's uid reaches it there): the run ends as
			 * killed by that signal, and the cgroup's end takes
			 * the rest. Released is enough: the command, exec'd,
			 * can kill init before init has said RUNNING (it says
			 * so once the exec closed its pipe). */
			res->reason = AL_END_SIGNALED;
			res->signal = end.status;
			res->exit_code = 128 + res->signal;
		} else if (!l->have_status) {
			/* The sandbox died without a report: something killed it
			 * from outside. */
			setup_failed(l, l->running ? "supervise" : "setup", 0, "");
			snprintf(res->msg, sizeof(res->msg),
				 "the sandbox's init died unexpectedly (%s %d)",
				 end.code == CLD_EXITED ? "exit" : "signal", end.status);
			res->exit_code = 125;
		} else if (WIFEXITED(l->status)) {
			res->reason = AL_END_EXITED;
			res->exit_code = WEXITSTATUS(l->status);
			/* A copy-out that left names behind is not a success. */
			for (size_t i = 0;
			     res->exit_code == 0 && i < json_array_size(res->copy_out); i++)
				if (al_copy_out_existing(json_array_get(res->copy_out, i)))
					res->exit_code = AL_COPY_OUT_EXISTS_EXIT;
		} else {
			res->reason = AL_END_SIGNALED;
			res->signal = WTERMSIG(l->status);
			res->exit_code = 128 + res->signal;
		}
	}
	*out = *res;
}

int al_supervisor_claim(struct al_supervisor *l, const struct al_plan *wanted,
			const struct al_cred *cred, struct al_error *err)
{
	int r;

	if (!l->held || !l->timer)
		return al_error_set(err, EINVAL, "claim: not a pool's sandbox, or not started");
	if (l->gw && (r = al_gateway_proc_claim(l->gw, wanted, cred, err)) < 0)
		return r;
	/* The lifetime counts from the claim, through the session's clock
	 * (clock.c), so that a pause later moves this deadline too. */
	if (wanted->timeout_ms > 0 && (r = al_supervisor_set_remaining(l, wanted->timeout_ms)) < 0)
		return al_error_setsys(err, -r, "claim: the lifetime's timer");
	l->meter.lifetime_ms = wanted->timeout_ms; /* what a timeout hit names */
	l->held = false;
	return 0;
}

void al_supervisor_free(struct al_supervisor *l)
{
	if (!l)
		return;
	al_gateway_proc_free(TAKE_PTR(l->gw));
	al_meter_clear(&l->meter);
	al_sup_stdio_close(l);
	al_timer_freep(&l->timer);
	al_closep(&l->confine_ruleset);
	al_closep(&l->scratch_fd);
	for (size_t i = 0; l->out_fds && i < l->plan->n_copy_out; i++)
		al_closep(&l->out_fds[i]);
	free(l->out_fds);
	free(l);
}

int al_supervisor_scratch_fd(const struct al_supervisor *s)
{
	return s ? s->scratch_fd : -1;
}

bool al_supervisor_running(const struct al_supervisor *s)
{
	return s && s->running && !al_supervisor_done(s);
}
