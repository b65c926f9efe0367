/* The supervisor's side of a claim (docs/pool.md): the claim sent to a
 * held gateway, and its answer waited for, so that every connection the
 * gateway accepts afterwards is under it. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "core/sys.h"
#include "core/util.h"
#include "gateway/process-internal.h"
#include "gateway/proto.h"

/* How long it may take to apply a claim: past it the run stops. */
#define CLAIM_TIMEOUT_MS 3000

int al_gateway_proc_claim(struct al_gateway_proc *gp, const struct al_plan *plan,
			  const struct al_cred *cred, struct al_error *err)
{
	uint8_t buf[AL_GWP_MAX];
	uint64_t deadline = al_now_ms() + CLAIM_TIMEOUT_MS;
	int n;

	if (gp->state != AL_GATEWAY_RUNNING || gp->ending || gp->claiming)
		return al_error_set(err, EAGAIN, "gateway: not serving, or a claim under way");
	if ((n = al_gwp_encode_claim(plan, cred, buf, sizeof(buf))) < 0)
		return al_error_set(err, -n, "gateway: the claim %s",
				    n == -E2BIG
					? "does not fit in one message (too many rules or "
					  "values too long)"
					: "needs what a claim does not carry (interception, "
					  "tokens, SigV4)");
	ssize_t sent = send(gp->sock, buf, (size_t)n, MSG_NOSIGNAL);
	explicit_bzero(buf, (size_t)n);
	if (sent != n)
		return al_error_setsys(err, errno, "gateway: sending the claim");
	/* Its answer, and whatever it says before it (audit events): once
	 * answered, the claim is in force for every connection it accepts. */
	gp->claiming = true;
	while (gp->claiming && gp->state != AL_GATEWAY_FAILED) {
		uint64_t t = al_now_ms();
		struct pollfd p = {.fd = gp->sock, .events = POLLIN};
		int pr = t < deadline ? poll(&p, 1, (int)(deadline - t)) : 0;
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr <= 0) {
			gw_proc_fail(gp,
				     "the gateway process did not answer the claim within %d ms",
				     CLAIM_TIMEOUT_MS);
			break;
		}
		/* Its channel closed (it died, or hung up) with no answer: the
		 * claim is not in force, and a gateway that will not say so
		 * serves no one. */
		if (gw_proc_read_one(gp) < 0) {
			gw_proc_fail(gp,
				     "the gateway process closed its channel before answering the "
				     "claim");
			break;
		}
	}
	gp->claiming = false;
	if (gp->state == AL_GATEWAY_FAILED)
		return al_error_set(err, EIO, "gateway: %s", gp->error);
	if (gp->claim_error)
		return al_error_set(err, gp->claim_error, "gateway: the claim was refused: %s",
				    gp->claim_text);
	gp->plan = plan;
	return 0;
}
