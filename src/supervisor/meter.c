#include "supervisor/meter.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/sys.h"
#include "core/util.h"

static void budget_cost(struct al_meter *m, const struct al_cgroup_stats *st);

void al_meter_stop(struct al_meter *m, enum al_end_reason why, const char *limit,
		   uint64_t limit_value, uint64_t observed)
{
	if (m->hit)
		return;
	/* A limit that tripped as the command was ending still ends the run
	 * with that reason; there is just nothing left to kill. */
	m->hit = true;
	m->res->reason = why;
	al_audit_emit(m->audit, "limit.hit",
		      json_pack("{s:s, s:I, s:I}", "limit", limit, "limit_value",
				(json_int_t)limit_value, "observed", (json_int_t)observed));
	m->stop(m->data);
}

void al_meter_timeout(struct al_meter *m)
{
	if (m->hit)
		return;
	m->hit = true;
	m->res->reason = AL_END_TIMEOUT;
	al_audit_emit(
	    m->audit, "limit.hit",
	    json_pack("{s:s, s:I}", "limit", "timeout", "limit_value",
		      (json_int_t)(m->lifetime_ms ? m->lifetime_ms : m->plan->timeout_ms)));
	m->stop(m->data);
}

void al_meter_socket_memory(struct al_meter *m, uint64_t bytes)
{
	const struct al_plan *p = m->plan;

	if (bytes > m->res->cgroup.socket_peak)
		m->res->cgroup.socket_peak = bytes;
	if (bytes < p->socket_stop || m->hit)
		return;
	/* v1: the kernel holds socket buffers to memory.kmem.tcp but may
	 * force one buffer per socket past it; many sockets add up, so the run
	 * stops at plan->socket_stop (docs/security.md). */
	m->res->socket_memory = true;
	m->res->socket_stop = p->socket_stop;
	al_meter_stop(m, AL_END_MEMORY, "socket-memory", p->socket_stop, bytes);
}

void al_meter_listeners(struct al_meter *m, uint64_t listeners)
{
	if (listeners <= AL_MAX_LISTENERS || m->hit)
		return;
	m->res->listeners_hit = true;
	al_meter_stop(m, AL_END_MEMORY, "listeners", AL_MAX_LISTENERS, listeners);
}

void al_meter_socket_memory_lost(struct al_meter *m)
{
	if (m->hit)
		return;
	m->res->socket_memory = true;
	m->res->socket_stop = m->plan->socket_stop;
	al_meter_stop(m, AL_END_MEMORY, "socket-memory", m->plan->socket_stop, 0);
}

void al_meter_record(struct al_meter *m, const struct al_cgroup_stats *st)
{
	uint64_t peak = m->res->cgroup.socket_peak;

	m->res->have_cgroup = true;
	m->res->cgroup = *st;
	m->res->cgroup.oom_kills += m->inner_oom_kills;
	m->res->cgroup.pids_max_hits += m->inner_pids_hits;
	if (m->inner_memory_peak)
		m->res->cgroup.memory_peak = m->inner_memory_peak;
	budget_cost(m, st);
	/* v2 has no peak for socket buffers: keep the largest value read. */
	if (peak > m->res->cgroup.socket_peak)
		m->res->cgroup.socket_peak = peak;
}

/* a * b / div without overflow, saturating. */
static uint64_t mul_div(uint64_t a, uint64_t b, uint64_t div)
{
	unsigned __int128 v = (unsigned __int128)a * b / div;
	return v > UINT64_MAX ? UINT64_MAX : (uint64_t)v;
}

/* The run ends once its cost reaches the budget (CPU and memory keep
 * costing), or passes it. What the gateway charges never passes it: it
 * refuses the request that would (and says so), so at exactly the budget
 * the run goes on to that request's 402. */
static void budget_check(struct al_meter *m, bool gateway)
{
	uint64_t total = al_cost_total(&m->res->cost);

	const struct al_budget *b = &m->plan->budget;
	bool costing = b->cpu_second || b->memory_gb_second;
	if (total > b->max || (!gateway && costing && total >= b->max))
		al_meter_stop(m, AL_END_BUDGET, "budget", m->plan->budget.max, total);
}

/* CPU seconds and memory held, priced. Memory is integrated between
 * samples at what the cgroup holds now. */
static void budget_cost(struct al_meter *m, const struct al_cgroup_stats *st)
{
	const struct al_budget *b = &m->plan->budget;
	struct al_cost *c = &m->res->cost;
	uint64_t now = al_now_ms();

	if (!b->set)
		return;
	if (m->budget_ms && now > m->budget_ms)
		c->memory_byte_ms = al_add_sat(c->memory_byte_ms,
					       mul_div(st->memory_current, now - m->budget_ms, 1));
	m->budget_ms = now;
	c->cpu = mul_div(st->cpu_usage_us, b->cpu_second, 1000000);
	c->memory = mul_div(c->memory_byte_ms, b->memory_gb_second, (1000ull << 30));
	if (m->spent)
		m->spent(m->data, al_add_sat(c->cpu, c->memory));
}

void al_meter_charge(struct al_meter *m, const char *host, uint64_t requests, uint64_t bytes_up)
{
	const struct al_budget *b = &m->plan->budget;
	struct al_cost *c = &m->res->cost;
	uint64_t price = al_budget_request_price(b, host);
	uint64_t req = mul_div(requests, price, 1);
	size_t i;

	if (!b->set)
		return;
	/* Egress priced on the run's total, as the gateway prices it. */
	uint64_t before = c->egress;
	c->egress_bytes = al_add_sat(c->egress_bytes, bytes_up);
	c->egress = mul_div(c->egress_bytes, b->egress_mb, 1000000);
	uint64_t out = c->egress - before;
	c->requests = al_add_sat(c->requests, req);
	for (i = 0; i < c->n_hosts; i++)
		if (strcmp(c->hosts[i].name, host) == 0)
			break;
	if (i == c->n_hosts && i < AL_COST_HOSTS) {
		snprintf(c->hosts[i].name, sizeof(c->hosts[i].name), "%s", host);
		c->n_hosts++;
	}
	if (i < c->n_hosts) {
		c->hosts[i].requests = al_add_sat(c->hosts[i].requests, requests);
		c->hosts[i].nano = al_add_sat(c->hosts[i].nano, al_add_sat(req, out));
	}
	budget_check(m, true);
}

void al_meter_cgroup(struct al_meter *m, const struct al_cgroup_stats *st)
{
	const struct al_plan *p = m->plan;

	al_meter_record(m, st);
	if (p->budget.set)
		budget_check(m, false);
	if (st->oom_kills > 0)
		al_meter_stop(m, AL_END_MEMORY, "memory", p->memory_bytes, st->memory_peak);
	else if (st->pids_max_hits > 0)
		al_meter_stop(m, AL_END_PIDS, "pids", p->pids, st->pids_max_hits);
	else if (p->cpu_time_ms && st->cpu_usage_us >= p->cpu_time_ms * 1000)
		al_meter_stop(m, AL_END_CPU_TIME, "cpu-time", p->cpu_time_ms,
			      st->cpu_usage_us / 1000);
	else if (m->res->sockmem == AL_SOCKMEM_LIMITED && st->socket_bytes >= p->socket_stop)
		al_meter_socket_memory(m, st->socket_bytes);
}

static void add_use(struct al_meter_net *n, const struct al_gateway_usage *use)
{
	n->requests = al_add_sat(n->requests, use->requests);
	n->bytes_up = al_add_sat(n->bytes_up, use->bytes_up);
	n->bytes_down = al_add_sat(n->bytes_down, use->bytes_down);
}

static struct al_meter_host *find_host(const struct al_meter *m, const char *name)
{
	for (size_t i = 0; i < m->n_hosts; i++)
		if (strcmp(m->hosts[i].name, name) == 0)
			return &m->hosts[i];
	return NULL;
}

const char *al_meter_net(struct al_meter *m, const struct al_gateway_usage *use)
{
	const struct al_net_limits *run = &m->plan->net_run, *per = &m->plan->net_host;
	struct al_meter_host *h = find_host(m, use->host);

	add_use(&m->net, use);
	if (!h && m->n_hosts < AL_METER_MAX_HOSTS) {
		if (m->n_hosts == m->cap_hosts) {
			m->cap_hosts = m->cap_hosts ? 2 * m->cap_hosts : 16;
			m->hosts = xrealloc(m->hosts, m->cap_hosts * sizeof(*m->hosts));
		}
		h = &m->hosts[m->n_hosts++];
		memset(h, 0, sizeof(*h));
		snprintf(h->name, sizeof(h->name), "%s", use->host);
	}
	if (h)
		add_use(&h->use, use);
	if (run->requests && m->net.requests > run->requests)
		return "network.limits.requests";
	if (run->bytes_out && m->net.bytes_up > run->bytes_out)
		return "network.limits.bytes_out";
	if (h && per->requests && h->use.requests > per->requests)
		return "network.per_host.requests";
	if (h && per->bytes_out && h->use.bytes_up > per->bytes_out)
		return "network.per_host.bytes_out";
	return NULL;
}

struct al_meter_net al_meter_host_use(const struct al_meter *m, const char *host)
{
	const struct al_meter_host *h = find_host(m, host);
	return h ? h->use : (struct al_meter_net){0};
}

void al_meter_clear(struct al_meter *m)
{
	free(m->hosts);
	m->hosts = NULL;
	m->n_hosts = m->cap_hosts = 0;
}
