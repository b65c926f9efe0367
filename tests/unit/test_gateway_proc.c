/* gateway/process.h, the supervisor's side: a stand-in gateway process (a
 * forked child of this test that sends prepared messages) is watched with
 * al_gateway_proc_adopt(). What it reports of its use reaches the meter;
 * use past a network limit, or use before its start, fails it; a claim is
 * in force only once it answered. */
#include "unit.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/loop.h"
#include "core/sys.h"
#include "gateway/process.h"
#include "gateway/proto.h"
#include "supervisor/meter.h"

struct fixture {
	struct al_plan plan;
	struct al_run_result res;
	struct al_meter m;
	struct al_loop *loop;
	struct al_gateway_proc *gp;
	struct al_gateway_proc_events ev;
	int changes;
	char denied[128]; /* the first denial heard */
	int n_denied;
};

static void on_changed(void *data)
{
	((struct fixture *)data)->changes++;
}

static const char *on_usage(void *data, const struct al_gateway_usage *use)
{
	return al_meter_net(&((struct fixture *)data)->m, use);
}

static void on_denied(void *data, const char *host, int port, const char *reason)
{
	struct fixture *f = data;
	if (f->n_denied++ == 0)
		snprintf(f->denied, sizeof(f->denied), "%s:%d %s", host ? host : "-", port,
			 reason ? reason : "-");
}

static void on_stop(void *data)
{
	(void)data;
}

struct msg {
	uint8_t b[AL_GWP_MAX];
	int n;
};

static struct msg started(void)
{
	struct msg m;
	m.n = al_gwp_encode_started(0, al_landlock_abi(), EACCES, "", m.b, sizeof(m.b));
	return m;
}

static struct msg usage(const char *host, uint64_t up)
{
	struct msg m;
	struct al_gateway_usage u = {.requests = 1, .bytes_up = up, .bytes_down = 7};
	snprintf(u.host, sizeof(u.host), "%s", host);
	m.n = al_gwp_encode_usage(&u, m.b, sizeof(m.b));
	return m;
}

static struct msg deny_event_for(const char *host, const char *reason)
{
	struct msg m;
	json_t *o = json_pack("{s:s, s:i, s:s, s:s, s:s}", "name", host, "port", 8099, "path",
			      "http", "decision", "deny", "reason", reason);
	m.n = al_gwp_encode_audit("net.connect", o, m.b, sizeof(m.b));
	json_decref(o);
	return m;
}

static struct msg deny_event(void)
{
	return deny_event_for("collector.test", "no rule allows collector.test:8099");
}

#define NO_CLAIM (-1000)
#define HANG_UP	 (-1001)

/* Fork a stand-in that sends msgs[0..n), then waits for the socket to
 * close (al_gateway_proc_free kills it anyway). With claim other than
 * NO_CLAIM it first waits for a message (the claim), then answers it
 * AL_GWP_CLAIMED with claim as the error, or with HANG_UP exits without
 * an answer. */
static void start_claim(struct fixture *f, const struct msg *msgs, size_t n, int claim)
{
	struct al_error err = {0};
	int sv[2];

	memset(f, 0, sizeof(*f));
	f->plan.net_run.bytes_out = 1000;
	f->res.reason = AL_END_EXITED;
	f->m = (struct al_meter){.plan = &f->plan, .res = &f->res, .stop = on_stop, .data = f};
	f->ev = (struct al_gateway_proc_events){
	    .changed = on_changed, .usage = on_usage, .denied = on_denied, .data = f};
	assert_int_equal(al_loop_new(&f->loop, &err), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char c;
		close(sv[0]);
		for (size_t i = 0; i < n; i++)
			if (send(sv[1], msgs[i].b, (size_t)msgs[i].n, MSG_NOSIGNAL) != msgs[i].n)
				_exit(1);
		if (claim != NO_CLAIM) {
			struct msg a;
			if (read(sv[1], a.b, sizeof(a.b)) <= 0 || claim == HANG_UP)
				_exit(0);
			a.n = al_gwp_encode_claimed(claim, claim ? "refused here" : "", a.b,
						    sizeof(a.b));
			if (send(sv[1], a.b, (size_t)a.n, MSG_NOSIGNAL) != a.n)
				_exit(1);
		}
		while (read(sv[1], &c, 1) > 0)
			;
		_exit(0);
	}
	close(sv[1]);
	if (al_gateway_proc_adopt(&f->plan, f->loop, NULL, &f->ev, pid, sv[0], &f->gp, &err) < 0)
		fail_msg("adopt: %s", err.msg);
}

static void start(struct fixture *f, const struct msg *msgs, size_t n)
{
	start_claim(f, msgs, n, NO_CLAIM);
}

/* Dispatch until done(f) or 5 s pass. */
static void run_until(struct fixture *f, bool (*done)(const struct fixture *f))
{
	for (int i = 0; i < 500 && !done(f); i++)
		assert_true(al_loop_dispatch(f->loop, 10) >= 0);
	assert_true(done(f));
}

static void finish(struct fixture *f)
{
	al_gateway_proc_free(f->gp);
	al_loop_free(f->loop);
	al_meter_clear(&f->m);
}

static bool counted_two(const struct fixture *f)
{
	return f->m.net.requests == 2;
}

static bool failed(const struct fixture *f)
{
	return al_gateway_proc_state(f->gp) == AL_GATEWAY_FAILED;
}

static void test_use_reaches_meter(void **state)
{
	struct fixture f;
	const struct msg msgs[] = {started(), usage("api.example.test", 600),
				   usage("other.example.test", 400)}; /* 1000: at the limit */

	(void)state;
	start(&f, msgs, 3);
	run_until(&f, counted_two);
	assert_int_equal(al_gateway_proc_state(f.gp), AL_GATEWAY_RUNNING);
	assert_int_equal(f.changes, 1); /* started */
	assert_int_equal(f.m.net.bytes_up, 1000);
	assert_int_equal(f.m.net.bytes_down, 14);
	assert_int_equal(al_meter_host_use(&f.m, "api.example.test").bytes_up, 600);
	finish(&f);
}

static bool heard_denial(const struct fixture *f)
{
	return f->denied[0] != '\0';
}

/* A refused connection the gateway reports reaches the supervisor (for
 * the run's summary), also with no audit stream. */
static void test_denial_reported(void **state)
{
	struct fixture f;
	/* The run's end cutting an undecided connection is not a refusal:
	 * only the second event is heard. */
	const struct msg msgs[] = {started(), deny_event_for("cut.test", AL_GATEWAY_RUN_ENDED),
				   deny_event()};

	(void)state;
	start(&f, msgs, 3);
	run_until(&f, heard_denial);
	assert_string_equal(f.denied, "collector.test:8099 no rule allows collector.test:8099");
	assert_int_equal(f.n_denied, 1);
	assert_int_equal(al_gateway_proc_state(f.gp), AL_GATEWAY_RUNNING);
	finish(&f);
}

static void test_use_past_limit_fails(void **state)
{
	struct fixture f;
	const struct msg msgs[] = {started(), usage("api.example.test", 600),
				   usage("api.example.test", 401)};

	(void)state;
	start(&f, msgs, 3);
	run_until(&f, failed);
	assert_contains(al_gateway_proc_error(f.gp), "past network.limits.bytes_out");
	assert_contains(al_gateway_proc_error(f.gp), "api.example.test");
	assert_int_equal(f.changes, 2); /* started, failed */
	finish(&f);
}

static void test_use_before_start_fails(void **state)
{
	struct fixture f;
	const struct msg msgs[] = {usage("api.example.test", 1), started()};

	(void)state;
	start(&f, msgs, 2);
	run_until(&f, failed);
	assert_contains(al_gateway_proc_error(f.gp), "before its start");
	assert_int_equal(f.m.net.requests, 0);
	finish(&f);
}

static bool running(const struct fixture *f)
{
	return al_gateway_proc_state(f->gp) == AL_GATEWAY_RUNNING;
}

/* A warm pool's claim (al_gateway_proc_claim) in force only once the
 * gateway answered it: answered, refused, or its channel closed with no
 * answer (then it failed, never taken for applied). */
static void test_claim_answers(void **state)
{
	struct fixture f;
	struct al_error err = {0};
	const struct msg msgs[] = {started()};

	(void)state;
	start_claim(&f, msgs, 1, 0);
	run_until(&f, running);
	assert_int_equal(al_gateway_proc_claim(f.gp, &f.plan, NULL, &err), 0);
	assert_int_equal(al_gateway_proc_state(f.gp), AL_GATEWAY_RUNNING);
	finish(&f);

	start_claim(&f, msgs, 1, EINVAL);
	run_until(&f, running);
	assert_int_equal(al_gateway_proc_claim(f.gp, &f.plan, NULL, &err), -EINVAL);
	assert_contains(err.msg, "refused here");
	finish(&f);

	start_claim(&f, msgs, 1, HANG_UP);
	run_until(&f, running);
	assert_int_equal(al_gateway_proc_claim(f.gp, &f.plan, NULL, &err), -EIO);
	assert_contains(err.msg, "closed its channel before answering the claim");
	assert_int_equal(al_gateway_proc_state(f.gp), AL_GATEWAY_FAILED);
	/* No second claim is sent to what failed. */
	assert_int_equal(al_gateway_proc_claim(f.gp, &f.plan, NULL, &err), -EAGAIN);
	finish(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_use_reaches_meter), cmocka_unit_test(test_use_past_limit_fails),
	    cmocka_unit_test(test_denial_reported),   cmocka_unit_test(test_use_before_start_fails),
	    cmocka_unit_test(test_claim_answers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
