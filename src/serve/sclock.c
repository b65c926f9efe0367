/* A live sandbox's clocks and pausing (POST /v1/sandboxes/{id}/pause,
 * /resume, /timeout): the lifetime asked for (within the run's deadline,
 * max_lifetime), the idle timeout that ends the sandbox or pauses it, and
 * the session's clock they are counted on, which stops while the sandbox
 * is paused (the run layer stops the run's deadline and each exec's
 * timeout the same way: run/session.h). */
#include "serve/sess.h"

#include <errno.h>
#include <string.h>

#include "core/log.h"
#include "core/sys.h"
#include "core/util.h"

int64_t sess_now(const struct sess *s)
{
	int64_t now = (int64_t)al_now_ms();

	return now - s->paused_total_ms - (s->paused ? now - s->paused_at : 0);
}

json_t *sess_info(struct sess *s)
{
	int64_t now = sess_now(s);
	const char *state = s->ended ? "ended" : s->paused ? "paused" : "running";
	json_t *o = json_pack("{s:s, s:s, s:O, s:s, s:I, s:i}", "id", s->id, "state", state,
			      "metadata", s->meta, "created", s->created_ts, "lifetime_left_ms",
			      (json_int_t)(s->deadline_ms > now ? s->deadline_ms - now : 0),
			      "execs_running", (int)sess_exec_running(s));

	json_object_set_new(o, "profile",
			    s->rq.plan && s->rq.plan->profile ? json_string(s->rq.plan->profile)
							      : json_null());
	json_object_set_new(o, "max_lifetime_ms", json_integer((json_int_t)s->max_lifetime_ms));
	json_object_set_new(o, "idle_timeout_ms", json_integer((json_int_t)s->idle_ms));
	json_object_set_new(o, "idle_action", json_string(s->idle_pause ? "pause" : "kill"));
	json_object_set_new(o, "max_execs", json_integer(s->max_execs));
	json_object_set_new(o, "pool", json_boolean(s->pooled));
	if (s->paused && !s->ended)
		json_object_set_new(o, "paused_by",
				    json_string(s->paused_idle ? "idle" : "request"));
	return o;
}

void sess_extend(struct sess *s, uint64_t req, const uint8_t *body, size_t len)
{
	json_error_t je;
	json_t *o = json_loadb((const char *)body, len, JSON_REJECT_DUPLICATES, &je);
	json_t *v = json_object_get(o, "timeout");
	int64_t now = sess_now(s);

	uint64_t ms = 0;

	/* Seconds checked (finite, at most a year) before any arithmetic on
	 * them: a huge double cast to an integer is undefined. */
	if (!o || !sess_seconds(v, &ms))
		sess_error(s, req, 400,
			   "timeout: the body must be {\"timeout\": SECONDS}, a number above 0 "
			   "and at most %d (a year): the sandbox's lifetime from now",
			   AL_SERVE_SECONDS_MAX);
	else if (ms + (uint64_t)(now - s->created_ms) > s->max_lifetime_ms)
		sess_error(s, req, 400,
			   "timeout: %g s from now is past the sandbox's max_lifetime (%llu s "
			   "of running time after it was created, %lld s from now)",
			   json_number_value(v), (unsigned long long)(s->max_lifetime_ms / 1000),
			   (long long)((s->created_ms + (int64_t)s->max_lifetime_ms - now) / 1000));
	else {
		s->deadline_ms = now + (int64_t)ms;
		sess_answer(s, req, 200, sess_info(s));
	}
	json_decref(o);
}

/* Freeze (pause) or thaw the sandbox; 0 or the run layer's -errno. */
static int set_paused(struct sess *s, bool pause, bool idle)
{
	int r = pause ? al_run_pause(s->run) : al_run_resume(s->run);

	if (r < 0)
		return r;
	if (pause) {
		s->paused_at = (int64_t)al_now_ms();
		s->paused = true;
		s->paused_idle = idle;
	} else {
		s->paused_total_ms += (int64_t)al_now_ms() - s->paused_at;
		s->paused = s->paused_idle = false;
	}
	sess_event(s, pause ? AL_SEV_PAUSED : AL_SEV_RESUMED, NULL, 0);
	return 0;
}

void sess_pause_op(struct sess *s, uint64_t req, bool pause)
{
	int r = 0;

	if (s->ended || !s->run)
		return sess_error(s, req, 409, "sandbox %s has ended", s->id);
	if (pause && s->paused)
		s->paused_idle = false; /* now the client's: no exec resumes it */
	else if (pause != s->paused)
		r = set_paused(s, pause, false);
	if (r == -EOPNOTSUPP)
		return sess_error(s, req, 501,
				  "sandbox %s cannot be paused: its backend or cgroups have no "
				  "freezer",
				  s->id);
	if (r < 0)
		return sess_error(s, req, r == -ESRCH ? 409 : 500, "%s sandbox %s: %s",
				  pause ? "pausing" : "resuming", s->id, strerror(-r));
	sess_answer(s, req, 200, sess_info(s));
}

bool sess_act(struct sess *s, uint64_t req)
{
	if (s->paused && !s->paused_idle) {
		sess_error(s, req, 409, "sandbox %s is paused; POST /v1/sandboxes/%s/resume first",
			   s->id, s->id);
		return false;
	}
	if (s->paused) {
		int r = set_paused(s, false, false);
		if (r < 0) {
			sess_error(s, req, 500, "resuming sandbox %s (paused while idle): %s",
				   s->id, strerror(-r));
			return false;
		}
	}
	s->last_active_ms = sess_now(s);
	return true;
}

bool sess_clocks(struct sess *s, int *wake)
{
	int64_t now = sess_now(s), next = s->deadline_ms - now;
	/* Idle: no exec running (a code context's interpreter waiting for
	 * its next run is not), not paused (its clock stopped anyway). */
	bool idle = s->idle_ms && !s->paused && sess_exec_busy(s) == 0;

	if (now >= s->deadline_ms)
		return s->lifetime_over = true;
	/* A pause stops the clocks above, so nothing but this bounds it: the
	 * time paused in all (wall clock) may not pass the sandbox's
	 * max_lifetime (an hour when it has none), or one client could hold
	 * its --max-sandboxes slots for ever. Ended as its lifetime is. */
	if (s->paused) {
		int64_t bound = s->max_lifetime_ms ? (int64_t)s->max_lifetime_ms : 3600000;
		int64_t paused = s->paused_total_ms + (int64_t)al_now_ms() - s->paused_at;
		if (paused >= bound) {
			al_warn("serve: sandbox %s: paused for %lld s in all, its max_lifetime; "
				"ended",
				s->id, (long long)(paused / 1000));
			return s->lifetime_over = true;
		}
		if (bound - paused < next)
			next = bound - paused;
	}
	if (idle && now - s->last_active_ms >= (int64_t)s->idle_ms) {
		if (!s->idle_pause)
			return true;
		int r = set_paused(s, true, true);
		if (r < 0) {
			al_warn("serve: sandbox %s: pausing it while idle: %s; ended instead",
				s->id, strerror(-r));
			return true;
		}
		idle = false;
	}
	if (idle && s->last_active_ms + (int64_t)s->idle_ms - now < next)
		next = s->last_active_ms + (int64_t)s->idle_ms - now;
	*wake = next > 1000 ? 1000 : next < 0 ? 0 : (int)next;
	return false;
}
