/* A session's wall clock: the run's deadline, stopped while the sandbox is
 * paused and moved when its lifetime is extended (supervisor.h). */
#include "supervisor/internal.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#include "core/log.h"
#include "core/sys.h"
#include "cred/store.h"

uint64_t al_supervisor_remaining_ms(const struct al_supervisor *l)
{
	uint64_t now = l->paused_at ? l->paused_at : al_now_ms();

	if (!l->attached || !l->deadline_ms)
		return 0;
	return l->deadline_ms > now ? l->deadline_ms - now : 0;
}

uint64_t al_supervisor_paused_ms(const struct al_supervisor *l)
{
	return l->paused_ms + (l->paused_at ? al_now_ms() - l->paused_at : 0);
}

/* The deadline on the wall clock (seconds since the epoch), as the
 * credentials count it: what runs before it from now. */
static int64_t wall_deadline(const struct al_supervisor *l)
{
	return (int64_t)time(NULL) + (int64_t)(al_supervisor_remaining_ms(l) / 1000);
}

/* The gateway holds the run's tokens and CA: they follow the deadline
 * (al_cred_set_deadline in its process). */
static int tell_gateway(struct al_supervisor *l)
{
	return l->gw && l->deadline_ms ? al_gateway_proc_deadline(l->gw, wall_deadline(l)) : 0;
}

void al_supervisor_pause_clock(struct al_supervisor *l, bool paused)
{
	if (!l->attached || paused == (l->paused_at != 0))
		return;
	if (paused) {
		l->paused_at = al_now_ms();
		al_timer_disarm(l->timer);
		return;
	}
	uint64_t spent = al_now_ms() - l->paused_at;
	l->paused_ms += spent;
	l->paused_at = 0;
	if (!l->deadline_ms)
		return;
	l->deadline_ms += spent;
	/* What was left when it was paused (0 fires at once: it was due). */
	al_timer_arm(l->timer, al_supervisor_remaining_ms(l), false);
	int r = tell_gateway(l);
	if (r < 0 && r != -ESRCH)
		al_warn("warning: resumed: the gateway was not told the run's new deadline (%s): "
			"its tokens and certificates end at the old one",
			strerror(-r));
}

int al_supervisor_set_remaining(struct al_supervisor *l, uint64_t ms)
{
	if (!l->attached || !l->timer)
		return -ESRCH;
	if (ms == 0)
		return -EINVAL;
	l->deadline_ms = (l->paused_at ? l->paused_at : al_now_ms()) + ms;
	return l->paused_at ? 0 : al_timer_arm(l->timer, ms, false);
}

int al_supervisor_extend(struct al_supervisor *l, uint64_t ms, struct al_error *err)
{
	uint64_t old = l->deadline_ms;
	int r;

	if (!l->attached || !l->timer)
		return al_error_set(err, ESRCH, "extend: the run has not started or has ended");
	if (ms == 0)
		return al_error_set(err, EINVAL, "extend: a lifetime of 0 ms");
	int64_t wall = (int64_t)time(NULL) + (int64_t)(ms / 1000);
	if (wall > al_cred_deadline_max(l->cred))
		return al_error_set(
		    err, ERANGE,
		    "extend: %llu ms from now is past the end of the run's "
		    "interception CA, which the sandbox trusts (%lld s from now at "
		    "the most)",
		    (unsigned long long)ms,
		    (long long)(al_cred_deadline_max(l->cred) - (int64_t)time(NULL)));
	if ((r = al_supervisor_set_remaining(l, ms)) < 0)
		return al_error_setsys(err, -r, "extend: the lifetime's timer");
	/* Paused, the gateway is told at the resume (the deadline moves by
	 * the pause again then). */
	if (!l->paused_at && (r = tell_gateway(l)) < 0 && r != -ESRCH) {
		l->deadline_ms = old;
		al_timer_arm(l->timer, al_supervisor_remaining_ms(l), false);
		return al_error_setsys(err, -r,
				       "extend: the gateway could not be told the new deadline");
	}
	/* What a timeout hit names: the lifetime, by what the deadline moved
	 * (pauses move both deadlines alike). */
	int64_t life =
	    (int64_t)(l->meter.lifetime_ms ? l->meter.lifetime_ms : l->plan->timeout_ms) +
	    ((int64_t)l->deadline_ms - (int64_t)old);
	l->meter.lifetime_ms = life > 0 ? (uint64_t)life : 1;
	return 0;
}

void al_supervisor_sync_gateway(struct al_supervisor *l)
{
	al_gateway_proc_drain(l->gw);
}
