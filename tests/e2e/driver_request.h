/* The test drivers' task requests (pool_driver.c, session_driver.c): one
 * task request file's final plan and credentials, built through the
 * request layer as the daemon builds one (no operator policy). */
#pragma once

#include "policy/policy.h"
#include "request/request.h"

struct driver_req {
	struct al_request_config cfg;
	struct al_policy *policy;
	struct al_request rq;
};

/* Build r from file for the run run_id (borrowed; it must outlive r).
 * 0, or -1 with what went wrong on stderr. */
int driver_request(const char *file, const char *run_id, struct driver_req *r);
void driver_request_clear(struct driver_req *r);
