/* The DNS stub's UDP side (gateway/dnsstub.c): the queries waiting on its
 * socket are read in one recvmmsg and answered in one sendmmsg. A gateway
 * is served in this test's loop with its DNS listener on a Unix datagram
 * socket in a temporary directory (so that a client can vanish and make
 * one answer of a batch fail, which no loopback UDP client can), and
 * clients on sockets bound beside it. No network is used. */
#include "unit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "audit/audit.h"
#include "core/loop.h"
#include "gateway/gateway.h"
#include "policy/plan.h"

struct fx {
	char dir[64];
	struct al_plan plan;
	struct al_loop *loop;
	struct al_audit *audit;
	struct al_gateway *gw;
	int n_events;
};

static void on_event(void *data, const char *event, json_t *fields)
{
	struct fx *f = data;

	if (strcmp(event, "net.dns") == 0)
		f->n_events++;
	json_decref(fields);
}

static struct sockaddr_un addr_in(const struct fx *f, const char *name)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};

	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s/%s", f->dir, name);
	return sun;
}

static int bound_dgram(const struct fx *f, const char *name)
{
	struct sockaddr_un sun = addr_in(f, name);
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	return fd;
}

static void fx_start(struct fx *f)
{
	struct al_error err = {0};

	memset(f, 0, sizeof(*f));
	snprintf(f->dir, sizeof(f->dir), "/tmp/airlock-dnsstub-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	f->plan.gateway = true;
	f->plan.profile = "default";
	f->plan.allow = al_allow_new();
	assert_int_equal(al_allow_add(f->plan.allow, "api.test:80", &err), 0);
	assert_int_equal(al_loop_new(&f->loop, &err), 0);
	f->audit = al_audit_sink(on_event, f);
	f->gw = al_gateway_new(&f->plan, f->audit, f->loop);
	al_gateway_set_run(f->gw, "run-1");
	assert_int_equal(al_gateway_listen(f->gw, AL_GATEWAY_DNS_UDP, bound_dgram(f, "stub"), &err),
			 0);
}

static void fx_stop(struct fx *f)
{
	static const char *const names[] = {"stub", "a", "b", "c", "d"};
	char path[128];

	al_gateway_free(f->gw);
	al_audit_close(f->audit);
	al_loop_free(f->loop);
	al_allow_free(f->plan.allow);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", f->dir, names[i]);
		unlink(path);
	}
	rmdir(f->dir);
}

/* An A query for name with this id. */
static size_t query(uint8_t *m, uint16_t id, const char *name)
{
	size_t n = 12;

	memset(m, 0, 12);
	m[0] = (uint8_t)(id >> 8);
	m[1] = (uint8_t)id;
	m[2] = 0x01; /* RD */
	m[5] = 1;    /* one question */
	while (*name) {
		const char *dot = strchr(name, '.');
		size_t l = dot ? (size_t)(dot - name) : strlen(name);
		m[n++] = (uint8_t)l;
		memcpy(m + n, name, l);
		n += l;
		name += l + (dot ? 1 : 0);
	}
	m[n++] = 0;
	memcpy(m + n, "\0\1\0\1", 4); /* A, IN */
	return n + 4;
}

static void send_query(const struct fx *f, int fd, uint16_t id, const char *name)
{
	struct sockaddr_un stub = addr_in(f, "stub");
	uint8_t m[512];
	size_t n = query(m, id, name);

	assert_int_equal(sendto(fd, m, n, 0, (struct sockaddr *)&stub, sizeof(stub)), (ssize_t)n);
}

/* The id and rcode of the answer waiting on fd; -1 without one. */
static int answer(int fd, int *rcode)
{
	uint8_t a[4096];
	ssize_t n = recv(fd, a, sizeof(a), MSG_DONTWAIT);

	if (n < 12 || !(a[2] & 0x80))
		return -1;
	*rcode = a[3] & 0xf;
	return a[0] << 8 | a[1];
}

/* Queries from three clients wait together: one wake-up answers each
 * client its own (an allowed name, a name no rule allows, a malformed
 * message), each audited. */
static void test_batch_answered(void **state)
{
	struct fx f;
	int rcode = -1;

	(void)state;
	fx_start(&f);
	int a = bound_dgram(&f, "a"), b = bound_dgram(&f, "b"), c = bound_dgram(&f, "c");
	struct sockaddr_un stub = addr_in(&f, "stub");
	send_query(&f, a, 0x1111, "api.test");
	send_query(&f, b, 0x2222, "nowhere.example");
	assert_int_equal(
	    sendto(c, "\x33\x33\x01\x00\x00\x01", 6, 0, (struct sockaddr *)&stub, sizeof(stub)), 6);
	assert_true(al_loop_dispatch(f.loop, 2000) > 0);
	assert_int_equal(answer(a, &rcode), 0x1111);
	assert_int_equal(rcode, 0);
	assert_int_equal(answer(b, &rcode), 0x2222);
	assert_int_equal(rcode, 3);		 /* NXDOMAIN */
	assert_int_equal(answer(c, &rcode), -1); /* shorter than a header: nothing to echo */
	assert_int_equal(f.n_events, 3);
	close(a);
	close(b);
	close(c);
	fx_stop(&f);
}

/* One answer of a batch cannot be sent (its client is gone): the answers
 * after it in the batch still reach their clients. */
static void test_failed_answer_mid_batch(void **state)
{
	struct fx f;
	int rcode = -1;

	(void)state;
	fx_start(&f);
	int a = bound_dgram(&f, "a"), b = bound_dgram(&f, "b"), c = bound_dgram(&f, "c"),
	    d = bound_dgram(&f, "d");
	send_query(&f, a, 0x0a0a, "api.test");
	send_query(&f, b, 0x0b0b, "api.test");
	send_query(&f, c, 0x0c0c, "api.test");
	send_query(&f, d, 0x0d0d, "nowhere.example");
	close(b); /* its address stays bound: a send to it is refused */
	assert_true(al_loop_dispatch(f.loop, 2000) > 0);
	assert_int_equal(f.n_events, 4); /* all four read in one wake-up */
	assert_int_equal(answer(a, &rcode), 0x0a0a);
	assert_int_equal(answer(c, &rcode), 0x0c0c);
	assert_int_equal(rcode, 0);
	assert_int_equal(answer(d, &rcode), 0x0d0d);
	assert_int_equal(rcode, 3);
	close(a);
	close(c);
	close(d);
	fx_stop(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_batch_answered),
	    cmocka_unit_test(test_failed_answer_mid_batch),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
