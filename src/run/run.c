/* One run: backend → supervisor → result record + audit (docs/architecture.md,
 * "The path of a run"), driven from the run's own loop. */
#include "run/run.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/sys.h"
#include "core/util.h"
#include "cred/store.h"
#include "run/internal.h"

#define EXIT_SETUP 125

/* run.start: enough of the plan to tell later what was in force. */
static json_t *start_fields(const struct al_plan *p, const char *policy_file)
{
	json_t *argv = json_array(), *mounts = json_array(), *allow = json_array();

	for (size_t i = 0; p->argv && p->argv[i]; i++)
		json_array_append_new(argv, al_json_text(p->argv[i]));
	for (size_t i = 0; p->gateway && p->allow_text[i]; i++)
		json_array_append_new(allow, json_string(p->allow_text[i]));
	for (size_t i = 0; i < p->n_fs; i++)
		if (p->fs[i].kind == AL_FS_HOST || p->fs[i].kind == AL_FS_DEVICE)
			json_array_append_new(mounts, al_json_text(p->fs[i].what));
	return json_pack("{s:o, s:s, s:o, s:o, s:o, s:o, s:s, s:o, s:i, s:b, s:b}", "command", argv,
			 "backend", p->backend, "policy", al_json_text(policy_file), "workdir",
			 al_json_text(p->workdir), "mounts", mounts, "limits",
			 json_pack("{s:I, s:I, s:I, s:I}", "timeout_ms", (json_int_t)p->timeout_ms,
				   "memory_bytes", (json_int_t)p->memory_bytes, "pids",
				   (json_int_t)p->pids, "output_bytes",
				   (json_int_t)p->output_bytes),
			 "network", p->gateway ? "gateway" : "none", "allow", allow, "landlock_abi",
			 al_landlock_abi(), "rootless", p->rootless, "tty", p->tty);
}

/* run.start's operator policy: the profile and the file's sha256. */
static void start_operator(json_t *o, const struct al_plan *p)
{
	json_object_set_new(o, "profile", p->profile ? json_string(p->profile) : json_null());
	json_object_set_new(o, "operator_policy",
			    p->profile
				? json_pack("{s:o, s:s}", "file", al_json_text(p->operator_file),
					    "sha256", p->operator_sha256)
				: json_null());
}

/* The run is over: release the sandbox, then audit run.end and write the
 * record. */
static void end(struct al_run *run)
{
	const struct al_run_request *req = &run->req;
	/* A claimed pool's sandbox is recorded under its claim's plan: the
	 * same as the pool's in every field a record shows but the lifetime
	 * (policy/plan-fit.h). */
	const struct al_plan *plan = run->claim ? run->claim : req->plan;

	al_session_end(run);
	al_supervisor_free(TAKE_PTR(run->sup));
	run->res.have_ids = run->sb.have_ids;
	run->res.ids = run->sb.ids;
	if (run->sb.ops) {
		run->sb.ops->destroy(&run->sb);
		run->sb.ops = NULL;
		al_log_phase("cleaned up");
	}
	snprintf(run->res.started, sizeof(run->res.started), "%s", run->started);
	run->res.platform = run->platform;
	al_audit_emit(req->audit, "run.end", al_result_json(plan, &run->res, run->run_id));
	if (req->result_to_fd)
		al_result_write_fd(req->result_fd, req->result_path, plan, &run->res, run->run_id,
				   &run->record_err);
	else if (req->result_dirfd >= 0)
		al_result_write(req->result_dirfd, req->result_name, req->result_path, plan,
				&run->res, run->run_id, &run->record_err);
	run->ended = true;
}

/* airlock could not run it: still leave a record saying so. */
static void start_failed(struct al_run *run, const struct al_error *err)
{
	memset(&run->res, 0, sizeof(run->res));
	run->res.reason = AL_END_SETUP_ERROR;
	run->res.exit_code = EXIT_SETUP;
	snprintf(run->res.step, sizeof(run->res.step), "start");
	snprintf(run->res.msg, sizeof(run->res.msg), "%s", err->msg);
	end(run);
}

/* The supervisor's requests, to the backend's ops. */
static void ctl_release(void *data)
{
	struct al_sandbox *sb = data;
	sb->ops->release(sb);
}

static void ctl_stop(void *data)
{
	struct al_sandbox *sb = data;
	sb->ops->stop(sb);
}

static int ctl_signal(void *data, int sig)
{
	struct al_sandbox *sb = data;
	return sb->ops->kill(sb, sig);
}

static void ctl_finish(void *data, struct al_sandbox_end *e)
{
	struct al_sandbox *sb = data;
	sb->ops->finish(sb, e);
}

int al_run_start(const struct al_run_request *req, const struct al_supervisor_io *io,
		 struct al_run **ret, struct al_error *err)
{
	struct al_run *run = xcalloc(1, sizeof(*run));
	const struct al_backend_ops *ops;
	int r;

	run->req = *req;
	al_audit_timestamp(run->started, sizeof(run->started));
	if (req->run_id)
		snprintf(run->run_id, sizeof(run->run_id), "%s", req->run_id);
	else
		al_random_id(run->run_id, sizeof(run->run_id));
	*ret = run;
	json_t *start = start_fields(req->plan, req->policy_file);
	start_operator(start, req->plan);
	ops = req->backend ? req->backend : al_backend_lookup(req->plan->backend);
	run->platform = ops && ops->platform ? ops->platform() : NULL;
	json_object_set_new(start, "platform",
			    run->platform ? json_string(run->platform) : json_null());
	json_t *creds = al_cred_json(req->cred);
	if (creds) {
		json_object_set(start, "credentials", creds);
		run->creds = creds;
	}
	if (req->start_extra)
		json_object_update(start, req->start_extra);
	al_audit_emit(req->audit, "run.start", start);
	if (!ops) {
		r = al_error_set(err, EINVAL, "unknown backend \"%s\"", req->plan->backend);
		goto fail;
	}
	if ((r = al_loop_new(&run->loop, err)) < 0)
		goto fail;
	/* What no backend without the feature can do, refused in the same
	 * words for every one (its message names the backend already). */
	if ((r = al_backend_admit(ops, req->plan, req->session || req->pool, err)) < 0)
		goto fail;
	if (!req->probed && (r = ops->probe(req->plan, err)) < 0) {
		r = al_error_wrap(err, "backend %s", ops->name);
		goto fail;
	}
	struct al_supervisor_config cfg = {.plan = req->plan,
					   .audit = req->audit,
					   .run_id = run->run_id,
					   .cred = req->cred,
					   .loop = run->loop,
					   .io = io,
					   .confine_self = req->confine_self,
					   .confine_dirfd = req->result_dirfd,
					   .session = req->session,
					   .held = req->pool};
	run->sup = al_supervisor_new(&cfg);
	al_sandbox_init_handle(&run->sb, ops, req->plan, req->audit, run->loop,
			       al_supervisor_events(run->sup));
	run->sb.run_id = run->run_id;
	run->sb.verify_all = req->verify_all;
	if (req->session)
		al_session_attach(run);
	if ((r = al_supervisor_start_gateway(run->sup, err)) < 0 ||
	    (r = ops->prepare(&run->sb, err)) < 0 || (r = ops->start(&run->sb, err)) < 0)
		goto fail;
	const struct al_sandbox_ctl ctl = {.data = &run->sb,
					   .release = ctl_release,
					   .stop = ctl_stop,
					   .signal = ctl_signal,
					   .finish = ctl_finish,
					   .remove_dirfd = run->sb.remove_dirfd,
					   .remove_tree = run->sb.remove_tree,
					   .slot_dirfd = run->sb.slot_dirfd};
	/* The supervisor takes our ends of the command's stdio. */
	r = al_supervisor_attach(run->sup, &ctl, TAKE_FD(run->sb.stdin_wr),
				 TAKE_FD(run->sb.stdout_rd), TAKE_FD(run->sb.stderr_rd), run->sb.cg,
				 err);
	if (r < 0)
		goto fail;
	return 0;
fail:
	start_failed(run, err);
	return r;
}

struct al_loop *al_run_loop(struct al_run *run)
{
	return run->loop;
}

bool al_run_step(struct al_run *run, int timeout_ms)
{
	int n;

	if (run->ended)
		return true;
	n = al_loop_dispatch(run->loop, timeout_ms);
	if (n < 0) {
		al_warn("warning: the run's event loop failed (%s); killing the sandbox",
			strerror(-n));
		al_session_thaw(run);
		run->sb.ops->kill(&run->sb, SIGKILL);
	}
	if (n >= 0 && !al_supervisor_done(run->sup))
		return false;
	al_supervisor_finish(run->sup, &run->res);
	run->res.credentials = json_incref(run->creds);
	end(run);
	return true;
}

const struct al_run_result *al_run_wait(struct al_run *run, struct al_error *record_err)
{
	while (!al_run_step(run, -1))
		;
	if (record_err && run->record_err.msg[0])
		*record_err = run->record_err;
	return &run->res;
}

void al_run_resize(struct al_run *run, unsigned short rows, unsigned short cols)
{
	if (run->sup)
		al_supervisor_resize(run->sup, rows, cols);
}

void al_run_signal(struct al_run *run, int sig)
{
	if (!run->sup)
		return;
	al_session_thaw(run);
	al_supervisor_signal(run->sup, sig);
}

int al_run_kill(struct al_run *run)
{
	if (run->ended)
		return -ESRCH;
	al_session_thaw(run);
	al_supervisor_killed(run->sup, SIGKILL);
	return run->sb.ops->kill(&run->sb, SIGKILL);
}

void al_run_free(struct al_run *run)
{
	if (!run)
		return;
	if (!run->ended) {
		al_run_kill(run);
		al_run_wait(run, NULL);
	}
	al_loop_free(run->loop);
	json_decref(run->res.copy_out);
	json_decref(run->res.credentials);
	json_decref(run->res.minted);
	json_decref(run->creds);
	free(run);
}
