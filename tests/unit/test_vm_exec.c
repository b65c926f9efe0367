/* The host's side of a microvm/vm session's execs (vm-exec.c) against a
 * stand-in VMM: a Unix socket at tmp/.airlock-vmm.sock in a temporary
 * scratch, played by the test in its own process (a connection waits in
 * the listener's backlog until the test accepts it, and the request fits
 * the socket's buffer, so al_vm_exec returns before the test answers).
 * The VMM is sandboxed code that a guest may have taken over: whatever it
 * does, an exec request must come back (no blocking without end), and
 * whatever it answers, each exec ends once, as killed unless the answer
 * was one the VMM could have sent, with no descriptor left behind. */
#include "unit.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend/microvm/microvm.h"
#include "backend/microvm/vmm.h"
#include "backend/native/state.h"
#include "core/error.h"
#include "core/loop.h"
#include "core/util.h"
#include "guest/proto.h"

static char tmp[] = "/tmp/airlock-unit-vm-exec-XXXXXX";
static char sock_path[256];

/* What the backend reported, per exec id (ids are small here). */
#define MAX_ID 1024
static int n_started[MAX_ID], n_ended[MAX_ID], end_status[MAX_ID], end_err[MAX_ID];

static void ev_started(void *data, uint32_t id, pid_t pid)
{
	(void)data, (void)pid;
	assert_true(id < MAX_ID);
	n_started[id]++;
}

static void ev_ended(void *data, uint32_t id, int status, int exec_err, uint64_t user_us,
		     uint64_t system_us, uint64_t memory_peak, bool oom)
{
	(void)data, (void)user_us, (void)system_us, (void)memory_peak, (void)oom;
	assert_true(id < MAX_ID);
	n_ended[id]++;
	end_status[id] = status;
	end_err[id] = exec_err;
}

static int n_terminal[MAX_ID];

static void ev_terminal(void *data, uint32_t id, int master)
{
	(void)data;
	assert_true(id < MAX_ID);
	/* Before started, a pty's master (the callee's to close). */
	assert_int_equal(n_started[id], 0);
	assert_true(isatty(master));
	n_terminal[id]++;
	close(master);
}

static const struct al_exec_events events = {
    .started = ev_started, .ended = ev_ended, .terminal = ev_terminal};

/* One session's host side, as microvm.c sets it up, over the scratch. */
struct host {
	struct al_loop *loop;
	struct al_plan plan;
	struct vm_run w;
	struct al_sandbox sb;
	int null;
	uint32_t next_id;
};

static void host_init(struct host *h)
{
	struct al_error err = {0};
	memset(h, 0, sizeof(*h));
	assert_int_equal(al_loop_new(&h->loop, &err), 0);
	h->plan.workdir = "/work";
	h->w.orig = &h->plan;
	h->w.kind = al_vm_kind("microvm");
	h->w.session = true;
	h->w.loop = h->loop;
	h->w.exec_events = &events;
	h->w.scratch = open(tmp, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(h->w.scratch >= 0);
	al_native_state_new(&h->sb);
	h->sb.state->outer = &h->w;
	h->null = open("/dev/null", O_RDWR | O_CLOEXEC);
	assert_true(h->null >= 0);
	h->next_id = 1;
	memset(n_started, 0, sizeof(n_started));
	memset(n_ended, 0, sizeof(n_ended));
	memset(n_terminal, 0, sizeof(n_terminal));
}

static void host_free(struct host *h)
{
	al_vm_execs_end(&h->w);
	close(h->w.scratch);
	close(h->null);
	al_native_state_free(&h->sb);
	al_loop_free(h->loop);
}

/* Ask for an exec of /bin/true: 0, or -errno with err set. */
static int exec_one(struct host *h, uint32_t *id, struct al_error *err)
{
	char *argv[] = {"/bin/true", NULL};
	struct al_sandbox_exec x = {.id = h->next_id++,
				    .argv = argv,
				    .stdin_rd = h->null,
				    .stdout_wr = h->null,
				    .stderr_wr = h->null};
	*id = x.id;
	return al_vm_exec(&h->sb, &x, err);
}

/* The stand-in VMM's socket, listening with backlog (not accepting). */
static int vmm_listen(int backlog)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	assert_true(fd >= 0);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", sock_path);
	unlink(sock_path);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(fd, backlog), 0);
	return fd;
}

/* Accept the host's connection and read its request whole (closing the
 * three fds it came with). */
static int vmm_accept(int lfd)
{
	int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	assert_true(c >= 0);
	uint8_t b[8 + AL_GUEST_MAX_PAYLOAD];
	size_t got = 0, want = 8;
	while (got < want) {
		union {
			struct cmsghdr h;
			char b[CMSG_SPACE(3 * sizeof(int))];
		} cm;
		struct iovec io = {.iov_base = b + got, .iov_len = want - got};
		struct msghdr m = {.msg_iov = &io,
				   .msg_iovlen = 1,
				   .msg_control = cm.b,
				   .msg_controllen = sizeof(cm.b)};
		ssize_t n = recvmsg(c, &m, MSG_CMSG_CLOEXEC);
		assert_true(n > 0);
		for (struct cmsghdr *ch = CMSG_FIRSTHDR(&m); ch; ch = CMSG_NXTHDR(&m, ch))
			for (size_t j = 0; j < (ch->cmsg_len - CMSG_LEN(0)) / sizeof(int); j++) {
				int fd;
				memcpy(&fd, CMSG_DATA(ch) + j * sizeof(int), sizeof(int));
				close(fd);
			}
		got += (size_t)n;
		if (got >= 8)
			want = 8 + al_guest_get32(b + 4);
	}
	assert_int_equal(b[0], AL_VMM_REQ_EXEC);
	return c;
}

static size_t answer(uint8_t *b, uint8_t type, const void *p, uint32_t len)
{
	memset(b, 0, 8);
	b[0] = type;
	al_guest_put32(b + 4, len);
	memcpy(b + 8, p, len);
	return 8 + len;
}

/* Run the host's loop until id ended (or about 5 s of nothing). */
static void until_ended(struct host *h, uint32_t id)
{
	for (int i = 0; i < 50 && !n_ended[id]; i++)
		al_loop_dispatch(h->loop, 100);
}

static int count_fds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	assert_non_null(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* A VMM that listens but never accepts, its backlog full: the host's
 * connect waited for room without end (the session's supervisor stuck,
 * its run's time limit never enforced). It must come back with an
 * error. Run in a child with an alarm: a hang kills the child. */
static void test_backlog_full(void **state)
{
	(void)state;
	int lfd = vmm_listen(0);
	int fill[4], n_fill = 0;
	for (; n_fill < 4; n_fill++) {
		fill[n_fill] = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		struct sockaddr_un a = {.sun_family = AF_UNIX};
		snprintf(a.sun_path, sizeof(a.sun_path), "%s", sock_path);
		if (connect(fill[n_fill], (struct sockaddr *)&a, sizeof(a)) < 0) {
			assert_int_equal(errno, EAGAIN); /* full now */
			break;
		}
	}
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		alarm(20);
		struct host h;
		struct al_error err = {0};
		uint32_t id;
		host_init(&h);
		int r = exec_one(&h, &id, &err);
		fprintf(stderr, "al_vm_exec: %d %s\n", r, err.msg);
		_exit(r < 0 && strstr(err.msg, "VMM") ? 0 : 1);
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	if (WIFSIGNALED(st))
		fail_msg("al_vm_exec did not come back (killed by signal %d)", WTERMSIG(st));
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	for (int i = 0; i <= n_fill && i < 4; i++)
		close(fill[i]);
	close(lfd);
	unlink(sock_path);
}

/* Answers the VMM could not have sent, each on a connection of its own,
 * then the VMM's hang-up: the exec ends once, as killed; the fds a VMM
 * sends with its bytes are not kept. */
static void test_hostile_answers(void **state)
{
	(void)state;
	struct host h;
	host_init(&h);
	int lfd = vmm_listen(16);
	uint8_t pid[4], exitb[AL_GUEST_EXIT_LEN] = {0};
	al_guest_put32(pid, 42);
	struct {
		const char *what;
		uint8_t b[256];
		size_t len;
		bool with_fd;
	} cases[24];
	size_t n = 0, k;
#define CASE(w)	     (cases[n].what = (w), cases[n].with_fd = false, k = 0)
#define ADD(t, p, l) (k += answer(cases[n].b + k, (t), (p), (l)), cases[n].len = k)
	CASE("nothing"), cases[n++].len = 0;
	CASE("a length past any answer"), ADD(AL_VMM_ANS_STARTED, pid, 4);
	al_guest_put32(cases[n].b + 4, 0xffffffffu), n++;
	CASE("flags set"), ADD(AL_VMM_ANS_STARTED, pid, 4), cases[n].b[1] = 1, n++;
	CASE("an unknown type"), ADD(9, pid, 4), n++;
	CASE("STARTED twice"), ADD(AL_VMM_ANS_STARTED, pid, 4), ADD(AL_VMM_ANS_STARTED, pid, 4),
	    n++;
	CASE("ENDED before STARTED"), ADD(AL_VMM_ANS_ENDED, exitb, AL_GUEST_EXIT_LEN), n++;
	CASE("FAILED after STARTED"), ADD(AL_VMM_ANS_STARTED, pid, 4),
	    ADD(AL_VMM_ANS_FAILED, pid, 4), n++;
	CASE("STARTED short"), ADD(AL_VMM_ANS_STARTED, pid, 3), n++;
	CASE("half a header"), ADD(AL_VMM_ANS_STARTED, pid, 4), cases[n].len = 4, n++;
	CASE("STARTED with an fd"), ADD(AL_VMM_ANS_STARTED, pid, 4), cases[n].with_fd = true, n++;
	/* Wait statuses no process ends with: a signal past 64 (126), a
	 * stopped process, bits past the exit code. */
	int32_t bogus[] = {0x7e, 0x137f, 0x10000};
	for (size_t b = 0; b < 3; b++) {
		uint8_t ex[AL_GUEST_EXIT_LEN] = {0};
		al_guest_put32(ex, (uint32_t)bogus[b]);
		CASE("ENDED with a wait status no process has"), ADD(AL_VMM_ANS_STARTED, pid, 4),
		    ADD(AL_VMM_ANS_ENDED, ex, AL_GUEST_EXIT_LEN), n++;
	}
#undef CASE
#undef ADD
	int fds0 = count_fds();
	for (size_t i = 0; i < n; i++) {
		struct al_error err = {0};
		uint32_t id;
		assert_int_equal(exec_one(&h, &id, &err), 0);
		int c = vmm_accept(lfd);
		struct iovec io = {.iov_base = cases[i].b, .iov_len = cases[i].len};
		union {
			struct cmsghdr h;
			char b[CMSG_SPACE(sizeof(int))];
		} cm = {0};
		struct msghdr m = {.msg_iov = &io, .msg_iovlen = 1};
		if (cases[i].with_fd) {
			m.msg_control = cm.b;
			m.msg_controllen = sizeof(cm.b);
			struct cmsghdr *ch = CMSG_FIRSTHDR(&m);
			ch->cmsg_level = SOL_SOCKET;
			ch->cmsg_type = SCM_RIGHTS;
			ch->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(ch), &h.null, sizeof(int));
		}
		if (cases[i].len)
			assert_int_equal(sendmsg(c, &m, 0), (ssize_t)cases[i].len);
		close(c);
		until_ended(&h, id);
		if (n_ended[id] != 1 || end_status[id] != SIGKILL)
			fail_msg("%s: ended %d times, status %#x", cases[i].what, n_ended[id],
				 end_status[id]);
		al_loop_dispatch(h.loop, 0);
		assert_int_equal(n_ended[id], 1);
	}
	assert_int_equal(count_fds(), fds0);
	close(lfd);
	unlink(sock_path);
	host_free(&h);
}

/* The answers the VMM sends: STARTED then ENDED with the exit code,
 * FAILED with the errno (127 for ENOENT), each reported once. */
static void test_valid_answers(void **state)
{
	(void)state;
	struct host h;
	struct al_error err = {0};
	uint32_t id;
	uint8_t b[64], p[4], ex[AL_GUEST_EXIT_LEN] = {0};
	host_init(&h);
	int lfd = vmm_listen(16);

	assert_int_equal(exec_one(&h, &id, &err), 0);
	int c = vmm_accept(lfd);
	al_guest_put32(p, 42);
	size_t len = answer(b, AL_VMM_ANS_STARTED, p, 4);
	al_guest_put32(ex, 3 << 8);
	len += answer(b + len, AL_VMM_ANS_ENDED, ex, AL_GUEST_EXIT_LEN);
	assert_int_equal(send(c, b, len, 0), (ssize_t)len);
	until_ended(&h, id);
	assert_int_equal(n_started[id], 1);
	assert_int_equal(n_ended[id], 1);
	assert_int_equal(end_status[id], 3 << 8);
	close(c);

	assert_int_equal(exec_one(&h, &id, &err), 0);
	c = vmm_accept(lfd);
	al_guest_put32(p, ENOENT);
	len = answer(b, AL_VMM_ANS_FAILED, p, 4);
	assert_int_equal(send(c, b, len, 0), (ssize_t)len);
	until_ended(&h, id);
	assert_int_equal(n_started[id], 0);
	assert_int_equal(n_ended[id], 1);
	assert_int_equal(end_status[id], 127 << 8);
	assert_int_equal(end_err[id], ENOENT);
	close(c);
	close(lfd);
	unlink(sock_path);
	host_free(&h);
}

/* A VMM that takes a SIGKILL for a started exec and never answers ENDED
 * (or whose guest never sends the EXIT): the exec is ended here as killed
 * once the kill's wait is over, its connection closed, so its caller (a
 * timeout, a file operation's 504) and its slot do not wait for the
 * session's end. */
static void test_kill_unanswered(void **state)
{
	(void)state;
	struct host h;
	struct al_error err = {0};
	uint32_t id;
	uint8_t b[64], p[4];
	host_init(&h);
	h.w.kill_wait_ms = 300;
	int lfd = vmm_listen(16);

	assert_int_equal(exec_one(&h, &id, &err), 0);
	int c = vmm_accept(lfd);
	al_guest_put32(p, 42);
	size_t len = answer(b, AL_VMM_ANS_STARTED, p, 4);
	assert_int_equal(send(c, b, len, 0), (ssize_t)len);
	for (int i = 0; i < 50 && !n_started[id]; i++)
		al_loop_dispatch(h.loop, 100);
	assert_int_equal(n_started[id], 1);
	assert_int_equal(al_vm_exec_signal(&h.sb, id, SIGKILL), 0);
	/* The SIGNAL request came, and nothing is answered. */
	uint8_t sig[12];
	assert_int_equal(recv(c, sig, sizeof(sig), MSG_WAITALL), (ssize_t)sizeof(sig));
	assert_int_equal(sig[0], AL_VMM_REQ_SIGNAL);
	assert_int_equal(al_guest_get32(sig + 8), SIGKILL);
	until_ended(&h, id);
	assert_int_equal(n_ended[id], 1);
	assert_int_equal(end_status[id], SIGKILL);
	/* Its connection is closed: the VMM sees the hang-up. */
	assert_int_equal(recv(c, b, sizeof(b), 0), 0);
	close(c);
	close(lfd);
	unlink(sock_path);
	host_free(&h);
}

/* STARTED sent by the stand-in VMM with fd attached (SCM_RIGHTS). */
static void started_with_fd(int c, int fd)
{
	uint8_t b[12] = {AL_VMM_ANS_STARTED};
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} cm = {0};
	struct iovec io = {.iov_base = b, .iov_len = sizeof(b)};
	struct msghdr m = {
	    .msg_iov = &io, .msg_iovlen = 1, .msg_control = cm.b, .msg_controllen = sizeof(cm.b)};
	struct cmsghdr *h = CMSG_FIRSTHDR(&m);
	al_guest_put32(b + 4, 4);
	al_guest_put32(b + 8, 42);
	h->cmsg_level = SOL_SOCKET;
	h->cmsg_type = SCM_RIGHTS;
	h->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(h), &fd, sizeof(int));
	assert_int_equal(sendmsg(c, &m, 0), (ssize_t)sizeof(b));
}

/* A tty exec's master comes from the VMM with STARTED: taken only there,
 * only for a tty exec and only when it is a pty's master (handed to the
 * run layer before started); a descriptor that is not one (here
 * /dev/null), or one for an exec without a terminal, ends the exec as
 * killed and is closed. No descriptor is left either way. */
static void test_tty_master(void **state)
{
	(void)state;
	struct host h;
	struct al_error err = {0};
	char *argv[] = {"/bin/sh", NULL};
	host_init(&h);
	int lfd = vmm_listen(16);
	int before = count_fds();

	for (int round = 0; round < 3; round++) {
		bool tty = round < 2;
		struct al_sandbox_exec x = {.id = h.next_id++,
					    .argv = argv,
					    .tty = tty,
					    .rows = 24,
					    .cols = 80,
					    .stdin_rd = tty ? -1 : h.null,
					    .stdout_wr = tty ? -1 : h.null,
					    .stderr_wr = tty ? -1 : h.null};
		assert_int_equal(al_vm_exec(&h.sb, &x, &err), 0);
		int c = vmm_accept(lfd);
		int fd = round == 0 ? open("/dev/null", O_RDWR | O_CLOEXEC)
				    : posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
		assert_true(fd >= 0);
		started_with_fd(c, fd);
		close(fd);
		for (int i = 0; i < 50 && !n_started[x.id] && !n_ended[x.id]; i++)
			al_loop_dispatch(h.loop, 100);
		if (round == 1) { /* a tty exec and a pty master: its terminal */
			assert_int_equal(n_terminal[x.id], 1);
			assert_int_equal(n_started[x.id], 1);
			assert_int_equal(n_ended[x.id], 0);
		} else { /* /dev/null, or a master for an exec without a tty */
			assert_int_equal(n_terminal[x.id], 0);
			assert_int_equal(n_started[x.id], 0);
			assert_int_equal(n_ended[x.id], 1);
			assert_int_equal(end_status[x.id], SIGKILL);
		}
		al_vm_execs_end(&h.w);
		close(c);
	}
	assert_int_equal(count_fds(), before);
	close(lfd);
	unlink(sock_path);
	host_free(&h);
}

/* Random bytes from the VMM (a fixed seed): the host never crashes, each
 * exec ends once, no fd is left. */
static void test_random_answers(void **state)
{
	(void)state;
	struct host h;
	host_init(&h);
	int lfd = vmm_listen(16);
	int fds0 = count_fds();
	srand(29);
	for (int i = 0; i < 200; i++) {
		struct al_error err = {0};
		uint32_t id;
		uint8_t b[80];
		size_t len = (size_t)rand() % sizeof(b);
		for (size_t j = 0; j < len; j++)
			b[j] = (uint8_t)rand();
		/* Mostly plausible headers, so that the decoder goes past them. */
		if (len >= 8 && rand() % 2) {
			b[0] = (uint8_t)(1 + rand() % 3);
			b[1] = b[2] = b[3] = 0;
			al_guest_put32(b + 4, (uint32_t)(rand() % 40));
		}
		assert_int_equal(exec_one(&h, &id, &err), 0);
		int c = vmm_accept(lfd);
		if (len)
			assert_int_equal(send(c, b, len, 0), (ssize_t)len);
		close(c);
		until_ended(&h, id);
		assert_int_equal(n_ended[id], 1);
	}
	assert_int_equal(count_fds(), fds0);
	close(lfd);
	unlink(sock_path);
	host_free(&h);
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Once the VMM took a connection, its socket is there until it dies: a
 * refused or missing socket then fails the exec at once. It waited 3 s
 * each time (the run's loop with it), for as many execs as were asked. */
static void test_vmm_gone(void **state)
{
	(void)state;
	struct host h;
	struct al_error err = {0};
	uint32_t id;
	host_init(&h);
	int lfd = vmm_listen(16);
	assert_int_equal(exec_one(&h, &id, &err), 0);
	close(vmm_accept(lfd));
	until_ended(&h, id);
	assert_int_equal(n_ended[id], 1);
	close(lfd); /* the VMM died: its socket refuses */
	for (int i = 0; i < 2; i++) {
		double t = now_s();
		assert_true(exec_one(&h, &id, &err) < 0);
		assert_contains(err.msg, "the VMM's socket");
		/* No wait: well under the 3 s it waited at the start. */
		if (now_s() - t > 2)
			fail_msg("exec %u failed after %.1f s: %s", id, now_s() - t, err.msg);
		unlink(sock_path); /* then it is missing */
	}
	assert_int_equal(n_ended[id], 0);
	host_free(&h);
}

static int setup(void **state)
{
	(void)state;
	char dir[300];
	if (!mkdtemp(tmp))
		return -1;
	snprintf(dir, sizeof(dir), "%s/tmp", tmp);
	if (mkdir(dir, 0700) < 0)
		return -1;
	snprintf(sock_path, sizeof(sock_path), "%s/%s", tmp, AL_VMM_SOCK_SCRATCH);
	signal(SIGPIPE, SIG_IGN);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	char dir[300];
	unlink(sock_path);
	snprintf(dir, sizeof(dir), "%s/tmp", tmp);
	rmdir(dir);
	rmdir(tmp);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_valid_answers),  cmocka_unit_test(test_hostile_answers),
	    cmocka_unit_test(test_random_answers), cmocka_unit_test(test_backlog_full),
	    cmocka_unit_test(test_vmm_gone),	   cmocka_unit_test(test_kill_unanswered),
	    cmocka_unit_test(test_tty_master),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
