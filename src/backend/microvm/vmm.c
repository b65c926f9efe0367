/* `airlock __vmm CONFIG_JSON` (vmm.h): QEMU started as our child with the
 * channel on its stdin and stdout (one end of a socketpair) and its stderr
 * on a pipe whose last 4 KiB we keep, then one poll loop over the channel,
 * our stdio, the guest's connections and DNS exchanges, QEMU's stderr and
 * our signals, until the guest's command has ended and QEMU is gone. The
 * channel's handling is vmm-chan.c, the relays vmm-relay.c, the files
 * vmm-files.c. */
#include "backend/microvm/vmm.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend/microvm/vmm-internal.h"
#include "core/util.h"

/* --- CONFIG_JSON ------------------------------------------------------ */

static __attribute__((noreturn, format(printf, 1, 2))) void config_error(const char *fmt, ...)
{
	va_list ap;
	fputs("airlock __vmm: CONFIG_JSON: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(125);
}

/* A JSON array of strings as a NULL-terminated vector; empty allowed
 * unless need. */
static char **strings(json_t *o, const char *where, bool need)
{
	if (!json_is_array(o))
		config_error("%s: expected an array of strings", where);
	if (need && json_array_size(o) == 0)
		config_error("%s: must not be empty", where);
	char **v = xcalloc(json_array_size(o) + 1, sizeof(char *));
	size_t i;
	json_t *s;
	json_array_foreach(o, i, s)
	{
		if (!json_is_string(s) || strlen(json_string_value(s)) != json_string_length(s))
			config_error("%s[%zu]: expected a string without NUL", where, i);
		v[i] = xstrdup(json_string_value(s));
	}
	return v;
}

static uint64_t number(json_t *o, const char *key, const char *where, uint64_t min, uint64_t max)
{
	json_t *n = json_object_get(o, key);
	if (!json_is_integer(n) || json_integer_value(n) < 0 ||
	    (uint64_t)json_integer_value(n) < min || (uint64_t)json_integer_value(n) > max)
		config_error("%s%s: expected an integer from %llu to %llu", where, key,
			     (unsigned long long)min, (unsigned long long)max);
	return (uint64_t)json_integer_value(n);
}

static bool boolean(json_t *o, const char *key)
{
	json_t *b = json_object_get(o, key);
	if (!json_is_boolean(b))
		config_error("%s: expected true or false", key);
	return json_is_true(b);
}

/* "exec": the configured command, checked to fit one EXEC frame. */
static void parse_exec(json_t *exec, struct vmm_config *c)
{
	const char *key;
	json_t *val;
	if (!json_is_object(exec))
		config_error("exec: expected an object (or \"session\": true)");
	json_object_foreach(exec, key, val) if (strcmp(key, "argv") && strcmp(key, "env") &&
						strcmp(key, "cwd"))
	    config_error("exec.%s: unknown field", key);
	c->argv = strings(json_object_get(exec, "argv"), "exec.argv", true);
	c->env = strings(json_object_get(exec, "env"), "exec.env", false);
	json_t *cwd = json_object_get(exec, "cwd");
	if (!json_is_string(cwd) || json_string_value(cwd)[0] != '/' ||
	    strlen(json_string_value(cwd)) != json_string_length(cwd))
		config_error("exec.cwd: expected an absolute path");
	c->cwd = xstrdup(json_string_value(cwd));
	/* The whole EXEC must fit one frame. */
	size_t size = 8 + strlen(c->cwd) + 1, count = 0;
	for (char **s = c->argv; *s; s++, count++)
		size += strlen(*s) + 1;
	for (char **s = c->env; *s; s++, count++) {
		if (!strchr(*s, '='))
			config_error("exec.env: \"%s\": expected KEY=VALUE", *s);
		size += strlen(*s) + 1;
	}
	/* With "tty" the payload ends with its trailer. */
	if (size + (c->tty ? AL_GUEST_EXEC_TTY_LEN : 0) > AL_GUEST_MAX_PAYLOAD ||
	    count > AL_GUEST_MAX_ARGS)
		config_error(
		    "exec: %zu bytes in %zu strings, over the channel's %u bytes or %u strings",
		    size, count, AL_GUEST_MAX_PAYLOAD, AL_GUEST_MAX_ARGS);
}

static void parse_config(const char *text, struct vmm_config *c)
{
	json_error_t jerr;
	json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		config_error("line %d column %d: %s", jerr.line, jerr.column, jerr.text);
	if (!json_is_object(root))
		config_error("expected an object");
	static const char *const keys[] = {
	    "qemu",    "boot_timeout_ms", "silence_ms", "exec",	  "session",
	    "network", "copy_in",	  "copy_out",	"phases", "tty"};
	const char *key;
	json_t *val;
	json_object_foreach(root, key, val)
	{
		size_t k = 0;
		while (k < sizeof(keys) / sizeof(keys[0]) && strcmp(keys[k], key) != 0)
			k++;
		if (k == sizeof(keys) / sizeof(keys[0]))
			config_error("%s: unknown field", key);
	}
	c->qemu = strings(json_object_get(root, "qemu"), "qemu", true);
	c->boot_timeout_ms = number(root, "boot_timeout_ms", "", 1, 3600000);
	c->silence_ms = number(root, "silence_ms", "", 1000, 3600000);
	c->session = json_object_get(root, "session") && boolean(root, "session");
	json_t *exec = json_object_get(root, "exec");
	if (c->session && exec)
		config_error("exec: not with \"session\": true (a session's execs come on %s)",
			     AL_VMM_SOCK);
	c->tty = json_object_get(root, "tty") && boolean(root, "tty");
	if (c->session && c->tty)
		config_error("tty: not with \"session\": true (a session's execs ask for "
			     "their own terminals)");
	if (!c->session)
		parse_exec(exec, c);
	c->network = boolean(root, "network");
	c->copy_in = boolean(root, "copy_in");
	c->phases = json_object_get(root, "phases") && boolean(root, "phases");
	json_t *out = json_object_get(root, "copy_out");
	if (!out)
		config_error("copy_out: missing (null or {\"bytes\": N, \"files\": N})");
	if (json_is_object(out)) {
		json_object_foreach(out, key, val) if (strcmp(key, "bytes") && strcmp(key, "files"))
		    config_error("copy_out.%s: unknown field", key);
		c->copy_out = true;
		c->out_bytes = number(out, "bytes", "copy_out.", 0, UINT64_MAX >> 2);
		c->out_files = number(out, "files", "copy_out.", 0, UINT64_MAX >> 2);
	} else if (!json_is_null(out)) {
		config_error("copy_out: expected null or {\"bytes\": N, \"files\": N}");
	}
	if (c->session && c->copy_out)
		config_error("copy_out: must be null with \"session\": true (a session's files "
			     "come back through its file requests)");
	json_decref(root);
}

/* --- QEMU ------------------------------------------------------------- */

struct qemu {
	pid_t pid;
	int err;    /* its stderr's pipe, -1 at its end */
	bool gone;  /* reaped */
	int status; /* its wait status then */
	char tail[VMM_TAIL];
	size_t tail_len;
};

uint64_t vmm_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void start_qemu(struct qemu *q, char **argv, int chan, const sigset_t *old)
{
	int errp[2];
	if (pipe2(errp, O_CLOEXEC) < 0) {
		fprintf(stderr, "airlock: microvm: pipe: %s\n", strerror(errno));
		exit(125);
	}
	q->pid = fork();
	if (q->pid < 0) {
		fprintf(stderr, "airlock: microvm: fork: %s\n", strerror(errno));
		exit(125);
	}
	if (q->pid == 0) {
		/* The channel is QEMU's stdin and stdout (-chardev stdio). */
		if (dup2(chan, 0) < 0 || dup2(chan, 1) < 0 || dup2(errp[1], 2) < 0)
			_exit(127);
		sigprocmask(SIG_SETMASK, old, NULL);
		/* Only quiets QEMU's probes (quiet.c): a failure costs a line
		 * in the run's denials, nothing else. */
		(void)al_vmm_quiet_filter();
		execvp(argv[0], argv);
		dprintf(2, "%s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(errp[1]);
	q->err = errp[0];
	fcntl(q->err, F_SETFL, O_NONBLOCK);
}

/* Keep the last VMM_TAIL bytes QEMU wrote on its stderr. */
static void read_tail(struct qemu *q)
{
	char buf[4096];
	ssize_t n = read(q->err, buf, sizeof(buf));
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		close(q->err);
		q->err = -1;
		return;
	}
	if (n <= 0)
		return;
	if ((size_t)n >= VMM_TAIL) {
		memcpy(q->tail, buf + n - VMM_TAIL, VMM_TAIL);
		q->tail_len = VMM_TAIL;
		return;
	}
	if (q->tail_len + (size_t)n > VMM_TAIL) {
		size_t drop = q->tail_len + (size_t)n - VMM_TAIL;
		memmove(q->tail, q->tail + drop, q->tail_len - drop);
		q->tail_len -= drop;
	}
	memcpy(q->tail + q->tail_len, buf, (size_t)n);
	q->tail_len += (size_t)n;
}

static void reap(struct qemu *q, bool block)
{
	if (q->gone)
		return;
	int st;
	pid_t r = waitpid(q->pid, &st, block ? 0 : WNOHANG);
	if (r == q->pid) {
		q->gone = true;
		q->status = st;
	}
}

/* A signal whose default action stops the process: raised on ourselves it
 * would leave us stopped and the run hanging until its timeout. */
static bool stops(int sig)
{
	return sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
}

/* Die by sig if its default action ends us, else exit(128 + sig). The
 * guest reports any wait status it likes: a signal that only stops (or is
 * ignored) ends us by the exit. */
static __attribute__((noreturn)) void die_by(int sig)
{
	struct rlimit none = {0, 0};
	setrlimit(RLIMIT_CORE, &none); /* the guest's SIGSEGV leaves no core here */
	fflush(NULL);
	if (sig != SIGKILL && !stops(sig) && sig != AL_VMM_SIG_GUEST && sig != AL_VMM_SIG_MEMORY &&
	    sig != AL_VMM_SIG_PIDS && sig > 0 && sig < 65) {
		signal(sig, SIG_DFL);
		sigset_t s;
		sigemptyset(&s);
		sigaddset(&s, sig);
		sigprocmask(SIG_UNBLOCK, &s, NULL);
		raise(sig);
	}
	if (sig == SIGKILL)
		raise(SIGKILL);
	_exit(128 + (sig & 0x7f));
}

/* Our own verdicts (SIG_GUEST, SIG_MEMORY): by the signal itself. */
/* What the guest measured of the command (its cgroup in the guest), for
 * the run's record: one line in AL_VMM_REPORT, which the backend reads
 * from the scratch after the VMM ended. Best effort. */
static void report(const struct al_guest_exit *x)
{
	/* 0644: the supervisor reads it without the sandbox user's rights. */
	int fd = open(AL_VMM_REPORT, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	fchmod(fd, 0644); /* whatever the umask */
	dprintf(fd, "%d %u %u %llu %llu %llu\n", x->status, x->oom, x->pids,
		(unsigned long long)x->user_us, (unsigned long long)x->system_us,
		(unsigned long long)x->memory_peak);
	close(fd);
}

static __attribute__((noreturn)) void die_verdict(int sig)
{
	signal(sig, SIG_DFL);
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, sig);
	sigprocmask(SIG_UNBLOCK, &s, NULL);
	fflush(NULL);
	raise(sig);
	_exit(128 + sig);
}

/* Write what is left of the guest's output: blocking at the command's
 * end (the run's own timeout bounds this if nobody reads), one try
 * without blocking when the run failed (a reader that does not read must
 * not keep the failure from ending it). */
static void drain_stdio(struct vmm *v, bool block)
{
	struct vmm_exec *x = vmm_exec_find(v, VMM_EXEC_ID, NULL);
	for (int i = 0; x && i < 2; i++) {
		struct vmm_queue *q = &x->stdio[i];
		while (q->len > 0) {
			struct pollfd p = {.fd = x->fd_out[i], .events = POLLOUT};
			if (poll(&p, 1, block ? 1000 : 0) == 0 && !block)
				break;
			ssize_t n = write(x->fd_out[i], q->b + q->off, q->len);
			if (n < 0 && errno != EAGAIN && errno != EINTR)
				break;
			if (n > 0)
				q->off += (size_t)n, q->len -= (size_t)n;
		}
	}
}

static __attribute__((noreturn)) void fail_end(struct vmm *v, struct qemu *q, bool tail)
{
	if (!q->gone) {
		kill(q->pid, SIGKILL);
		reap(q, true);
	}
	while (q->err >= 0)
		read_tail(q);
	drain_stdio(v, false);
	dprintf(2, "airlock: microvm: %s\n", v->why);
	if (tail && q->tail_len)
		dprintf(2, "airlock: microvm: QEMU's last words:\n%.*s%s", (int)q->tail_len,
			q->tail, q->tail[q->tail_len - 1] == '\n' ? "" : "\n");
	die_verdict(AL_VMM_SIG_GUEST);
}

static void describe_exit(struct vmm *v, const struct qemu *q)
{
	/* A guest powers off on its own only when its agent could not set
	 * up; before HELLO it had no channel to say why on. */
	bool off = v->phase == VMM_BOOT && WIFEXITED(q->status) && WEXITSTATUS(q->status) == 0;
	if (off && v->logs)
		vmm_fail(v, "the guest powered off during its boot, before its agent answered: "
			    "its setup failed (the guest's lines above say how)");
	else if (off)
		vmm_fail(v,
			 "the guest powered off during its boot, before its agent answered (its "
			 "setup failed before the agent had a channel to say why on; the guest's "
			 "console is not kept)");
	else if (WIFEXITED(q->status))
		vmm_fail(v, "QEMU exited with status %d", WEXITSTATUS(q->status));
	else
		vmm_fail(v, "QEMU was killed by signal %d (%s)", WTERMSIG(q->status),
			 strsignal(WTERMSIG(q->status)));
}

/* --- The loop ---------------------------------------------------------- */

struct loop {
	struct pollfd p[8 + AL_GUEST_MAX_STREAMS + AL_GUEST_MAX_DGRAMS + 5 * AL_GUEST_MAX_EXECS];
	size_t n;
};

static size_t add(struct loop *l, int fd, short events)
{
	l->p[l->n] = (struct pollfd){.fd = events ? fd : -1, .events = events};
	return l->n++;
}

static void watch(struct loop *l, struct vmm *v, bool chan_eof)
{
	bool room = v->out.len < VMM_OUT_SOFT;
	/* Once the channel ended it is not watched (it would poll ready at
	 * once): QEMU's exit, or the 2 s after, ends the run. */
	short cev = v->out.len ? POLLOUT : 0;
	if (v->out.len < VMM_OUT_HARD && v->in_len < VMM_IN_CAP)
		cev |= POLLIN;
	add(l, v->chan, chan_eof ? 0 : cev);
	/* Each exec's stdio, and a session client's connection (its
	 * requests, signals and hang-up), read by vmm_sess_pump. */
	add(l, v->listen_fd, v->listen_fd >= 0 ? POLLIN : 0);
	for (size_t k = 0; k < AL_GUEST_MAX_EXECS; k++)
		if (v->draining[k] >= 0)
			add(l, v->draining[k], POLLIN);
	for (size_t k = 0; k < AL_GUEST_MAX_EXECS; k++) {
		struct vmm_exec *x = v->execs[k];
		if (!x)
			continue;
		for (int i = 0; i < 2; i++)
			add(l, x->fd_out[i], x->stdio[i].len ? POLLOUT : 0);
		add(l, x->fd_in,
		    x->started && x->stdin_open && x->stdin_credit && room ? POLLIN : 0);
		add(l, x->conn, x->conn >= 0 && (!x->requested || x->sent) && room ? POLLIN : 0);
	}
	for (size_t i = 0; i < AL_GUEST_MAX_STREAMS; i++) {
		struct vmm_stream *s = v->streams[i];
		if (!s || s->fd < 0)
			continue;
		short ev = s->connecting || s->to.len ? POLLOUT : 0;
		if (!s->connecting && !s->host_shut && s->credit && room)
			ev |= POLLIN;
		add(l, s->fd, ev);
	}
	for (size_t i = 0; i < AL_GUEST_MAX_DGRAMS; i++)
		if (v->dgrams[i].fd >= 0)
			add(l, v->dgrams[i].fd, room ? POLLIN : 0);
}

static uint64_t soonest(uint64_t a, uint64_t b)
{
	return b && b < a ? b : a;
}

/* What parse_config allocated, for the ends before the loop (the loop
 * itself never returns). */
static int config_free(struct vmm_config *c)
{
	al_strv_free(c->qemu);
	al_strv_free(c->argv);
	al_strv_free(c->env);
	free(c->cwd);
	*c = (struct vmm_config){0};
	return 125;
}

int al_vmm_main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: airlock __vmm CONFIG_JSON\n");
		return 125;
	}
	struct vmm_config cfg = {0}; /* lives as long as we do: we never return */
	parse_config(argv[2], &cfg);

	/* Our signals through a signalfd; QEMU gets the old mask back. */
	sigset_t mask, old;
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	/* -t: our terminal's resize only wakes the loop (vmm_pump reads the
	 * new size). */
	sigaddset(&mask, SIGWINCH);
	sigprocmask(SIG_BLOCK, &mask, &old);
	int sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	int sv[2];
	if (sfd < 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		fprintf(stderr, "airlock: microvm: %s: %s\n", sfd < 0 ? "signalfd" : "socketpair",
			strerror(errno));
		return config_free(&cfg);
	}
	/* A session's socket before QEMU: a request may come during the boot
	 * and waits for the guest. */
	int listen_fd = -1;
	if (cfg.session && (listen_fd = vmm_sess_listen()) < 0) {
		fprintf(stderr, "airlock: microvm: %s: %s\n", AL_VMM_SOCK, strerror(-listen_fd));
		return config_free(&cfg);
	}
	/* -t: the native layer gave us a pty as stdin, stdout and stderr;
	 * raw, so that the guest's pty alone does the line discipline. */
	int e = !cfg.tty ? 0 : !isatty(0) ? ENOTTY : -vmm_tty_raw(0);
	if (e) {
		fprintf(stderr, "airlock: microvm: \"tty\": true, but stdin: %s\n", strerror(e));
		return config_free(&cfg);
	}
	struct qemu q = {.err = -1};
	uint64_t t_qemu = vmm_now_us();
	start_qemu(&q, cfg.qemu, sv[1], &old);
	close(sv[1]);
	signal(SIGPIPE, SIG_IGN); /* a closed socket or stdout is an error, not our death */

	struct vmm *v = xmalloc(sizeof(*v));
	vmm_init(v, &cfg, sv[0], false);
	v->listen_fd = listen_fd;
	v->t_qemu = t_qemu;
	if (fcntl(0, F_GETFL) < 0)
		v->fd_in = -1;

	/* Our stdio is the run's (the native sandbox's pipes): never blocked on. */
	for (int fd = v->fd_in >= 0 ? 0 : 1; fd < 3; fd++)
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	fcntl(v->chan, F_SETFL, O_NONBLOCK);

	uint64_t start = now_ms(), boot_end = start + cfg.boot_timeout_ms;
	uint64_t eof_end = 0, off_end = 0, last_loop = start;
	bool chan_eof = false;
	for (;;) {
		uint64_t now = v->now_ms = now_ms();
		/* The loop wakes at least once a second. Time past that in
		 * which it did not run at all (the session paused: the run's
		 * cgroup frozen, QEMU and its guest with it; or this process
		 * stopped) is no silence of the guest's and no boot time:
		 * the deadlines move by it. A guest cannot make it happen. */
		if (now - last_loop > 2000) {
			uint64_t lost = now - last_loop - 1000;
			v->last_rx_ms += lost;
			boot_end += lost;
			if (v->next_ping_ms)
				v->next_ping_ms = now;
		}
		last_loop = now;
		if (v->phase == VMM_BOOT && now >= boot_end) {
			vmm_fail(v, "the guest did not boot within %llu s",
				 (unsigned long long)(cfg.boot_timeout_ms + 999) / 1000);
			fail_end(v, &q, true);
		}
		bool alive = v->phase != VMM_BOOT && v->phase != VMM_POWEROFF;
		if (alive && now - v->last_rx_ms >= cfg.silence_ms) {
			vmm_fail(v, "the guest stopped answering for %llu s",
				 (unsigned long long)(cfg.silence_ms + 999) / 1000);
			fail_end(v, &q, false);
		}
		if (alive && now >= v->next_ping_ms && v->out.len < VMM_OUT_HARD) {
			uint8_t t[8];
			al_guest_put64(t, ++v->pings);
			vmm_send(v, AL_G_PING, 0, 0, t, 8);
			v->next_ping_ms = now + 1000;
		}
		if (v->phase == VMM_POWEROFF) {
			if (!off_end)
				off_end = now + 2000;
			if (now >= off_end && !q.gone)
				kill(q.pid, SIGKILL); /* it had 2 s to power off */
			if (q.gone)
				break;
		}
		if (!chan_eof && v->out.len < VMM_OUT_HARD)
			vmm_handle_input(v);
		vmm_sess_pump(v);
		vmm_pump(v);
		if (vmm_flush(v) < 0 && !chan_eof)
			chan_eof = true, eof_end = now + 2000;
		/* An exec whose output the flush just wrote out is answered
		 * ENDED now, not at the next wake-up. */
		vmm_sess_pump(v);
		if (v->failed)
			fail_end(v, &q, false);
		if (q.gone && v->phase != VMM_POWEROFF) {
			describe_exit(v, &q);
			fail_end(v, &q, true);
		}
		if (chan_eof && v->phase != VMM_POWEROFF && now >= eof_end) {
			vmm_fail(v, "the guest closed the channel");
			fail_end(v, &q, true);
		}

		struct loop l = {.n = 0};
		size_t isig = add(&l, sfd, POLLIN), ierr = add(&l, q.err, q.err >= 0 ? POLLIN : 0);
		size_t ichan = l.n;
		watch(&l, v, chan_eof);
		uint64_t wake = now + 1000;
		if (v->phase == VMM_BOOT)
			wake = soonest(wake, boot_end);
		if (alive)
			wake =
			    soonest(soonest(wake, v->next_ping_ms), v->last_rx_ms + cfg.silence_ms);
		wake = soonest(soonest(wake, off_end), chan_eof ? eof_end : 0);
		for (size_t i = 0; i < AL_GUEST_MAX_DGRAMS; i++)
			if (v->dgrams[i].fd >= 0)
				wake = soonest(wake, v->dgrams[i].deadline);
		if (poll(l.p, l.n, wake > now ? (int)(wake - now) : 0) < 0 && errno != EINTR) {
			vmm_fail(v, "poll: %s", strerror(errno));
			fail_end(v, &q, false);
		}
		v->now_ms = now_ms();
		if (l.p[isig].revents) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof(si)) == sizeof(si)) {
				if (si.ssi_signo == SIGCHLD) {
					reap(&q, false);
					continue;
				}
				if (si.ssi_signo == SIGWINCH)
					continue;
				/* Stopped from outside: QEMU goes, and we end by
				 * the same signal. */
				kill(q.pid, SIGKILL);
				reap(&q, true);
				die_by((int)si.ssi_signo);
			}
		}
		if (l.p[ierr].revents)
			read_tail(&q);
		if (!chan_eof && l.p[ichan].revents & (POLLIN | POLLHUP | POLLERR)) {
			ssize_t n = read(v->chan, v->in + v->in_len, VMM_IN_CAP - v->in_len);
			if (n > 0) {
				v->in_len += (size_t)n;
				vmm_handle_input(v);
			} else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
				chan_eof = true;
				eof_end = v->now_ms + 2000; /* QEMU's exit says why */
			}
		}
	}

	drain_stdio(v, true);
	report(&v->exit);
	if (v->cfg->phases && v->t_exit) {
		uint64_t end = vmm_now_us();
		/* bench/backends.py reads this line. */
		dprintf(2,
			"airlock: vmm phases: boot %llu us, exec %llu us, command %llu us, "
			"poweroff %llu us\n",
			(unsigned long long)(v->t_hello - v->t_qemu),
			(unsigned long long)(v->t_started - v->t_hello),
			(unsigned long long)(v->t_exit - v->t_started),
			(unsigned long long)(end - v->t_exit));
	}
	int st = v->exit.status;
	if (v->exit.oom && WIFSIGNALED(st))
		die_verdict(AL_VMM_SIG_MEMORY);
	if (v->exit.pids)
		die_verdict(AL_VMM_SIG_PIDS);
	if (WIFSIGNALED(st))
		die_by(WTERMSIG(st));
	fflush(NULL);
	_exit(WEXITSTATUS(st));
}
