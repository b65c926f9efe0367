/* The meter: every limit a run is measured against, fed by samples from
 * wherever they are measured (the backend's cgroup counters and socket
 * memory, the supervisor's output count, the gateway's use of each host),
 * and the one place that ends a run for a limit: it records the reason,
 * audits limit.hit and asks the supervisor to stop the sandbox. The spend
 * budget (a later issue) is one more meter input, priced from the
 * per-host use kept here. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "audit/audit.h"
#include "cgroup/cgroup.h"
#include "gateway/gateway.h"
#include "policy/plan.h"
#include "supervisor/result.h"

/* Network use as the gateway reports it, per closed connection. */
struct al_meter_net {
	uint64_t requests, bytes_up, bytes_down;
};

/* Hosts whose use is kept apart; the use of more goes to the run's total
 * only (their per-host limits are still the gateway's to hold). */
#define AL_METER_MAX_HOSTS 4096

struct al_meter_host {
	char name[AL_HOST_MAX + 1];
	struct al_meter_net use;
};

struct al_meter {
	const struct al_plan *plan;
	struct al_audit *audit;	   /* may be NULL */
	struct al_run_result *res; /* reason and the limit's details go here */
	void (*stop)(void *data);  /* stop the sandbox (once) */
	void *data;
	bool hit;		 /* a limit (or the timeout) ended the run */
	uint64_t lifetime_ms;	 /* a claim's lifetime; 0: the plan's timeout */
	struct al_meter_net net; /* the run's, over every host */
	struct al_meter_host *hosts;
	size_t n_hosts, cap_hosts;
	uint64_t budget_ms; /* when memory was last sampled for the budget (0: never) */
	/* The budget: what CPU and memory cost so far, for the gateway (it
	 * refuses a request that would pass the budget); may be NULL. */
	void (*spent)(void *data, uint64_t nano);
	/* What a layer counted inside its sandbox, where the run's cgroup
	 * does not see it (a guest's own cgroup): added to the cgroup's. */
	uint64_t inner_oom_kills, inner_pids_hits;
	/* The command's own memory peak where the run's cgroup holds more
	 * than the command (a guest's: the VMM and the guest's RAM); 0: the
	 * cgroup's peak is the command's. */
	uint64_t inner_memory_peak;
};

/* Free what the meter allocated (its host table). */
void al_meter_clear(struct al_meter *m);

/* End the run for a limit: the first one wins; later ones are ignored. */
void al_meter_stop(struct al_meter *m, enum al_end_reason why, const char *limit,
		   uint64_t limit_value, uint64_t observed);

/* The wall-clock limit passed. */
void al_meter_timeout(struct al_meter *m);

/* The run's cgroup counters (also kept as the result's): an OOM kill, a
 * refused fork, CPU time, and (cgroup v1, where the kernel holds them
 * apart) socket buffers. */
void al_meter_cgroup(struct al_meter *m, const struct al_cgroup_stats *st);

/* Socket buffers the sandbox holds outside what the memory limit counts,
 * as measured: v1's counter, read between cgroup samples, or that plus the
 * connections waiting in its listeners' queues. */
void al_meter_socket_memory(struct al_meter *m, uint64_t bytes);

/* The view of the sandbox's socket memory was lost: the bound no longer
 * holds, so the run ends as if past it. */
void al_meter_socket_memory_lost(struct al_meter *m);

/* Keep the final cgroup counters without ending the run (it already
 * ended, for another reason). */
void al_meter_record(struct al_meter *m, const struct al_cgroup_stats *st);

/* Listening sockets the backend must read every tick. */
void al_meter_listeners(struct al_meter *m, uint64_t listeners);

/* The use of one host by connections that closed, added to the run's and
 * the host's. The gateway holds the network limits itself (it refuses the
 * connection or cuts the stream at them), so use past one means the
 * gateway failed to: returns the name of that limit
 * ("network.limits.bytes_out", ...), or NULL. */
const char *al_meter_net(struct al_meter *m, const struct al_gateway_usage *use);

/* What the gateway reported for host so far (zeros if nothing, or if it
 * came past AL_METER_MAX_HOSTS hosts). */
struct al_meter_net al_meter_host_use(const struct al_meter *m, const char *host);

/* The budget (plan->budget): what the gateway charged for requests to
 * host and bytes sent there, priced and added to the run's cost (res->cost);
 * the run ends with reason budget once the cost reaches the max. Also
 * fed from al_meter_cgroup() with CPU time and memory held. */
void al_meter_charge(struct al_meter *m, const char *host, uint64_t requests, uint64_t bytes_up);
