/* What process.c and process-claim.c share (internal to src/gateway):
 * the supervisor's side of the gateway's process. */
#pragma once

#include "gateway/process.h"

struct al_gateway_proc {
	const struct al_plan *plan;
	struct al_loop *loop;
	struct al_audit *audit;
	const struct al_gateway_proc_events *ev;
	pid_t pid;
	int pidfd;
	int sock;
	struct al_watch *w_sock, *w_pidfd;
	struct al_timer *start_timer;
	bool have_stats;
	enum al_gateway_proc_state state;
	int landlock_abi, file_errno; /* as it reported them */
	bool ending;
	/* A claim sent and not answered yet; the answer (claim.c). */
	bool claiming;
	int claim_error;
	char claim_text[256];
	struct al_gateway_stats stats;
	char error[256];
};

/* It failed: the reason kept, the process killed, the supervisor told. */
void gw_proc_fail(struct al_gateway_proc *gp, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* One message from the gateway: 1 handled, 0 none waiting, -1 closed. */
int gw_proc_read_one(struct al_gateway_proc *gp);
