/* The spend budget's part in the gateway: each request to a priced host,
 * and each byte sent out when egress is priced, is charged before it is
 * forwarded. The supervisor keeps the run's cost (meter.c) and tells the
 * gateway what CPU and memory cost so far; a request that would take the
 * total past the budget is refused here, and the supervisor ends the run
 * with reason budget. */
#include "gateway/conn.h"

#include <stdio.h>

#include "core/util.h"
#include "gateway/proto.h"

void al_gateway_on_charge(struct al_gateway *gw,
			  void (*fn)(void *data, const struct al_gwp_charge *ch), void *data)
{
	gw->charge = fn;
	gw->charge_data = data;
}

void al_gateway_set_spent(struct al_gateway *gw, uint64_t nano)
{
	gw->spent_there = nano;
}

/* What requests to host and bytes more of egress cost: egress priced on
 * the run's total, so that many small sends are not each rounded down. */
static uint64_t price(const struct al_gateway *gw, uint64_t requests, uint64_t bytes,
		      const char *host)
{
	const struct al_budget *b = &gw->plan->budget;
	unsigned __int128 before = (unsigned __int128)gw->egress_bytes * b->egress_mb / 1000000;
	unsigned __int128 after =
	    (unsigned __int128)(gw->egress_bytes + bytes) * b->egress_mb / 1000000;
	unsigned __int128 v =
	    (unsigned __int128)requests * al_budget_request_price(b, host) + (after - before);
	return v > UINT64_MAX ? UINT64_MAX : (uint64_t)v;
}

uint64_t gw_budget_egress_allowance(const struct al_gateway *gw)
{
	const struct al_budget *b = &gw->plan->budget;
	uint64_t spent = al_add_sat(gw->spent_here, gw->spent_there);

	if (!b->set || !b->egress_mb)
		return UINT64_MAX;
	if (spent >= b->max)
		return 0;
	unsigned __int128 bytes = (unsigned __int128)(b->max - spent) * 1000000 / b->egress_mb;
	return bytes > UINT64_MAX ? UINT64_MAX : (uint64_t)bytes;
}

bool gw_budget_charge(struct al_gateway *gw, const char *host, uint64_t requests, uint64_t bytes_up)
{
	const struct al_budget *b = &gw->plan->budget;
	struct al_gwp_charge ch = {.requests = requests, .bytes_up = bytes_up};
	uint64_t cost;

	if (!b->set)
		return true;
	cost = price(gw, requests, bytes_up, host);
	snprintf(ch.host, sizeof(ch.host), "%s", host);
	if (cost && al_add_sat(al_add_sat(gw->spent_here, gw->spent_there), cost) > b->max) {
		ch = (struct al_gwp_charge){.flags = AL_GWP_CHARGE_EXHAUSTED};
		snprintf(ch.host, sizeof(ch.host), "%s", host);
		if (gw->charge)
			gw->charge(gw->charge_data, &ch);
		return false;
	}
	gw->spent_here = al_add_sat(gw->spent_here, cost);
	gw->egress_bytes = al_add_sat(gw->egress_bytes, bytes_up);
	if (gw->charge && (requests || bytes_up))
		gw->charge(gw->charge_data, &ch);
	return true;
}
