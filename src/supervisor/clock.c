/* A session's wall clock: the run's deadline, stopped while the sandbox is
 * paused and moved when its lifetime is extended (supervisor.h). */
#include "supervisor/internal.h"

#include <errno.h>

#include "core/sys.h"

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
