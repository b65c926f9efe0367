/* supervisor/meter.h: every limit ends the run through the meter, the first
 * one wins, and what ended it is recorded for the result. */
#include "unit.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "supervisor/meter.h"

struct fixture {
	struct al_plan plan;
	struct al_run_result res;
	struct al_meter m;
	int stops;
};

static void on_stop(void *data)
{
	((struct fixture *)data)->stops++;
}

static void init(struct fixture *f)
{
	memset(f, 0, sizeof(*f));
	f->plan.timeout_ms = 1000;
	f->plan.memory_bytes = 64 << 20;
	f->plan.pids = 16;
	f->plan.cpu_time_ms = 500;
	f->plan.output_bytes = 100;
	f->plan.socket_stop = 8 << 20;
	f->res.reason = AL_END_EXITED;
	f->m = (struct al_meter){.plan = &f->plan, .res = &f->res, .stop = on_stop, .data = f};
}

static void test_under_limits(void **state)
{
	struct fixture f;
	struct al_cgroup_stats st = {.memory_peak = 1 << 20, .cpu_usage_us = 499999};

	(void)state;
	init(&f);
	al_meter_cgroup(&f.m, &st);
	al_meter_socket_memory(&f.m, (8 << 20) - 1);
	al_meter_listeners(&f.m, AL_MAX_LISTENERS);
	assert_int_equal(f.stops, 0);
	assert_false(f.m.hit);
	assert_int_equal(f.res.reason, AL_END_EXITED);
	assert_true(f.res.have_cgroup);
	assert_int_equal(f.res.cgroup.socket_peak, (8 << 20) - 1);
}

static void test_each_limit(void **state)
{
	struct {
		struct al_cgroup_stats st;
		enum al_end_reason want;
	} cases[] = {
	    {{.oom_kills = 1}, AL_END_MEMORY},
	    {{.pids_max_hits = 3}, AL_END_PIDS},
	    {{.cpu_usage_us = 500000}, AL_END_CPU_TIME},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct fixture f;
		init(&f);
		al_meter_cgroup(&f.m, &cases[i].st);
		assert_int_equal(f.stops, 1);
		assert_int_equal(f.res.reason, cases[i].want);
	}
}

static void test_first_wins(void **state)
{
	struct fixture f;
	struct al_cgroup_stats oom = {.oom_kills = 1};

	(void)state;
	init(&f);
	al_meter_timeout(&f.m);
	al_meter_cgroup(&f.m, &oom);
	al_meter_socket_memory(&f.m, 100 << 20);
	al_meter_stop(&f.m, AL_END_OUTPUT, "output", 100, 200);
	assert_int_equal(f.stops, 1);
	assert_int_equal(f.res.reason, AL_END_TIMEOUT);
	assert_false(f.res.socket_memory);
	/* The counters are still kept. */
	assert_int_equal(f.res.cgroup.oom_kills, 1);
}

static void test_socket_memory(void **state)
{
	struct fixture f;
	struct al_cgroup_stats st = {.socket_bytes = 9 << 20, .socket_peak = 9 << 20};

	(void)state;
	init(&f);
	al_meter_socket_memory(&f.m, 8 << 20);
	assert_int_equal(f.res.reason, AL_END_MEMORY);
	assert_true(f.res.socket_memory);
	assert_int_equal(f.res.socket_stop, 8 << 20);
	assert_int_equal(f.stops, 1);

	/* v1's counter in a cgroup sample counts only where it is limited. */
	init(&f);
	f.res.sockmem = AL_SOCKMEM_CHARGED;
	al_meter_cgroup(&f.m, &st);
	assert_int_equal(f.stops, 0);
	init(&f);
	f.res.sockmem = AL_SOCKMEM_LIMITED;
	al_meter_cgroup(&f.m, &st);
	assert_int_equal(f.stops, 1);
	assert_true(f.res.socket_memory);

	/* Losing the view ends the run too (fail closed). */
	init(&f);
	al_meter_socket_memory_lost(&f.m);
	assert_int_equal(f.stops, 1);
	assert_int_equal(f.res.reason, AL_END_MEMORY);
}

static void test_listeners(void **state)
{
	struct fixture f;

	(void)state;
	init(&f);
	al_meter_listeners(&f.m, AL_MAX_LISTENERS + 1);
	assert_int_equal(f.stops, 1);
	assert_true(f.res.listeners_hit);
	assert_int_equal(f.res.reason, AL_END_MEMORY);
}

static void test_peak_kept(void **state)
{
	struct fixture f;
	struct al_cgroup_stats later = {.socket_peak = 10};

	(void)state;
	init(&f);
	al_meter_socket_memory(&f.m, 4096);
	al_meter_record(&f.m, &later); /* v2 reports no peak: the largest read stays */
	assert_int_equal(f.res.cgroup.socket_peak, 4096);
}

static struct al_gateway_usage use(const char *host, uint64_t up, uint64_t down)
{
	struct al_gateway_usage u = {.requests = 1, .bytes_up = up, .bytes_down = down};
	snprintf(u.host, sizeof(u.host), "%s", host);
	return u;
}

/* The gateway's use of each host adds up per run and per host; it never
 * stops the run itself (the gateway holds the network limits), but use
 * past one is named, for the supervisor to fail the gateway. */
static void test_network_use(void **state)
{
	struct fixture f;
	struct al_gateway_usage a = use("api.example.test", 100, 1000),
				b = use("other.example.test", 5, 7);
	struct al_meter_net n;

	(void)state;
	init(&f);
	assert_null(al_meter_net(&f.m, &a));
	assert_null(al_meter_net(&f.m, &a));
	assert_null(al_meter_net(&f.m, &b));
	assert_int_equal(f.m.n_hosts, 2);
	assert_int_equal(f.m.net.requests, 3);
	assert_int_equal(f.m.net.bytes_up, 205);
	assert_int_equal(f.m.net.bytes_down, 2007);
	n = al_meter_host_use(&f.m, "api.example.test");
	assert_int_equal(n.requests, 2);
	assert_int_equal(n.bytes_up, 200);
	assert_int_equal(n.bytes_down, 2000);
	n = al_meter_host_use(&f.m, "unseen.example.test");
	assert_int_equal(n.requests, 0);
	assert_int_equal(f.stops, 0);
	assert_int_equal(f.res.reason, AL_END_EXITED);
	al_meter_clear(&f.m);

	/* At each limit is allowed; one past it is named. */
	struct {
		struct al_net_limits run, host;
		const char *want;
	} cases[] = {
	    {{.requests = 3}, {0}, "network.limits.requests"},
	    {{.bytes_out = 204}, {0}, "network.limits.bytes_out"},
	    {{0}, {.requests = 2}, "network.per_host.requests"},
	    {{0}, {.bytes_out = 150}, "network.per_host.bytes_out"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		init(&f);
		f.plan.net_run = cases[i].run;
		f.plan.net_host = cases[i].host;
		const char *r1 = al_meter_net(&f.m, &a), *r2 = al_meter_net(&f.m, &b),
			   *r3 = al_meter_net(&f.m, &a);
		if (i == 0 || i == 2) /* requests: 3 in all, 2 to api */
			assert_null(r3);
		else
			assert_string_equal(r3, cases[i].want);
		assert_null(r1);
		assert_null(r2);
		if (i == 0 || i == 2) {
			const char *r4 = al_meter_net(&f.m, &a);
			assert_non_null(r4);
			assert_string_equal(r4, cases[i].want);
		}
		assert_int_equal(f.stops, 0);
		al_meter_clear(&f.m);
	}

	/* Exactly at the byte limits is allowed. */
	init(&f);
	f.plan.net_run.bytes_out = 205;
	f.plan.net_host.bytes_out = 200;
	assert_null(al_meter_net(&f.m, &a));
	assert_null(al_meter_net(&f.m, &b));
	assert_null(al_meter_net(&f.m, &a));
	al_meter_clear(&f.m);

	/* Counters saturate rather than wrap. */
	init(&f);
	a.bytes_up = UINT64_MAX - 1;
	assert_null(al_meter_net(&f.m, &a));
	assert_null(al_meter_net(&f.m, &a));
	assert_true(f.m.net.bytes_up == UINT64_MAX);
	al_meter_clear(&f.m);
}

/* Past AL_METER_MAX_HOSTS hosts, use still counts for the run. */
static void test_network_many_hosts(void **state)
{
	struct fixture f;
	char name[32];

	(void)state;
	init(&f);
	for (unsigned i = 0; i < AL_METER_MAX_HOSTS + 10; i++) {
		snprintf(name, sizeof(name), "h%u.example.test", i);
		struct al_gateway_usage u = use(name, 1, 1);
		assert_null(al_meter_net(&f.m, &u));
	}
	assert_int_equal(f.m.n_hosts, AL_METER_MAX_HOSTS);
	assert_int_equal(f.m.net.requests, AL_METER_MAX_HOSTS + 10);
	assert_int_equal(al_meter_host_use(&f.m, "h0.example.test").requests, 1);
	assert_int_equal(al_meter_host_use(&f.m, "h4100.example.test").requests, 0);
	al_meter_clear(&f.m);
}

/* The stderr summary of what was refused: distinct hosts (the first
 * four), printable only, the gateway's reason in a few words, the calls. */
static void test_denied_summary(void **state)
{
	struct al_run_result res = {0};
	char buf[512];

	(void)state;
	assert_null(al_result_denied_summary(&res, buf, sizeof(buf)));
	res.have_network = true;
	res.network.denied = 6;
	res.network.dns_refused = 1;
	res.syscalls_denied = 3;
	al_result_note_denied_host(&res, "a.test", 80, "no rule allows a.test:80");
	al_result_note_denied_host(&res, "a.test", 80, "no rule allows a.test:80");
	al_result_note_denied_host(&res, "b\x1b[31m.test", 443, "limit: network.limits.requests");
	al_result_note_denied_host(&res, "c.test", 443, "the name does not resolve");
	al_result_note_denied_host(&res, "10.0.0.1", 80,
				   "10.0.0.1 is private space, which the rule");
	al_result_note_denied_host(&res, "e.test", 80, "no rule allows e.test:80");
	al_result_note_denied_call(&res, "mount");
	al_result_note_denied_call(&res, "mount");
	al_result_note_denied_call(&res, "bpf");
	assert_int_equal(res.denied.n_hosts, AL_DENIED_HOSTS);
	assert_string_equal(al_result_denied_summary(&res, buf, sizeof(buf)),
			    "denied 6 connections: a.test:80 (no rule), b?[31m.test:443 (a network "
			    "limit), c.test:443 (no such name), 10.0.0.1:80 (non-public address), "
			    "...; 1 DNS lookup; 3 system calls: mount, bpf");
	/* a repeated host adds no "...", an IPv6 literal gets brackets, more
	 * distinct calls than kept are marked */
	struct al_run_result one = {0};
	one.have_network = true;
	one.network.denied = 3;
	for (int i = 0; i < 3; i++)
		al_result_note_denied_host(&one, "a.test", 81, "no rule allows a.test:81");
	assert_string_equal(al_result_denied_summary(&one, buf, sizeof(buf)),
			    "denied 3 connections: a.test:81 (no rule)");
	memset(&one, 0, sizeof(one));
	one.have_network = true;
	one.network.denied = 2;
	one.syscalls_denied = 9;
	al_result_note_denied_host(&one, "2001:db8::1", 443, "the stream names x.test, not y");
	al_result_note_denied_host(&one, NULL, 0, NULL);
	const char *calls[] = {"a", "b", "c", "d", "e", "f", "g", "h", "i"};
	for (size_t i = 0; i < 9; i++)
		al_result_note_denied_call(&one, calls[i]);
	assert_string_equal(al_result_denied_summary(&one, buf, sizeof(buf)),
			    "denied 2 connections: [2001:db8::1]:443 (names another host), ? "
			    "(refused); 9 system calls: a, b, c, d, e, f, g, h, ...");
	/* secrets kept from where they do not go, the DNS names refused */
	memset(&one, 0, sizeof(one));
	one.have_network = true;
	one.network.misuse = 3;
	one.network.dns_refused = 2;
	struct al_gateway_refusal m1 = {AL_GW_REFUSED_MISUSE, 8080, "TOK", "header X-Leak",
					"o.test"};
	struct al_gateway_refusal m2 = {AL_GW_REFUSED_MISUSE, 443, "",
					"answer that could not be searched", "api.test"};
	struct al_gateway_refusal d1 = {AL_GW_REFUSED_DNS, 0, "", "no rule", "evil.test"};
	al_result_note_refusal(&one, &m1);
	al_result_note_refusal(&one, &m1);
	al_result_note_refusal(&one, &m2);
	al_result_note_refusal(&one, &d1);
	al_result_note_refusal(&one, &d1);
	assert_int_equal(one.denied.n_misuse, 2);
	assert_int_equal(one.denied.n_names, 1);
	assert_string_equal(
	    al_result_denied_summary(&one, buf, sizeof(buf)),
	    "denied 3 secret misuses: o.test:8080 (secret TOK in the header X-Leak), "
	    "api.test:443 (the answer that could not be searched); 2 DNS lookups: "
	    "evil.test (no rule)");
	/* cut to the buffer, marked */
	assert_non_null(al_result_denied_summary(&res, buf, 32));
	assert_int_equal(strlen(buf), 31);
	assert_string_equal(buf + 28, "...");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_under_limits),   cmocka_unit_test(test_each_limit),
	    cmocka_unit_test(test_first_wins),	   cmocka_unit_test(test_socket_memory),
	    cmocka_unit_test(test_listeners),	   cmocka_unit_test(test_peak_kept),
	    cmocka_unit_test(test_network_use),	   cmocka_unit_test(test_network_many_hosts),
	    cmocka_unit_test(test_denied_summary),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
