/* A session process (`airlock __session`, exec'd by the monitor with its
 * socket at fd 3): it holds one sandbox's request, plan, credentials and
 * run, and no other's. Today it serves one one-shot run: the task request
 * (the task policy's JSON plus argv or code + language, stdin, profile)
 * made a plan through the caller's ops (the operator policy), run, and
 * answered with the result record, the output and the exit code. */
#include "serve/serve.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/sys.h"
#include "core/util.h"
#include "cred/store.h"
#include "policy/plan.h"
#include "policy/policy.h"
#include "run/run.h"
#include "serve/chan.h"

struct out {
	char *buf[2];
	size_t len[2];
	bool cut[2];
};

static void on_output(void *data, int which, const void *p, size_t n)
{
	struct out *o = data;

	if (o->len[which] + n > AL_SERVE_OUTPUT_MAX) {
		o->cut[which] = true;
		n = AL_SERVE_OUTPUT_MAX - o->len[which];
	}
	o->buf[which] = xrealloc(o->buf[which], o->len[which] + n + 1);
	memcpy(o->buf[which] + o->len[which], p, n);
	o->len[which] += n;
}

/* Output as a JSON string when it is UTF-8, else base64 (and NAME_base64
 * says so). */
static void put_output(json_t *o, const char *name, const char *p, size_t n, bool cut)
{
	json_t *s = json_stringn(p ? p : "", n);
	char key[32];

	snprintf(key, sizeof(key), "%s_base64", name);
	if (!s) {
		char *b = xmalloc(4 * ((n + 2) / 3) + 1);
		EVP_EncodeBlock((unsigned char *)b, (const unsigned char *)p, (int)n);
		s = json_string(b);
		free(b);
		json_object_set_new(o, key, json_true());
	}
	json_object_set_new(o, name, s);
	snprintf(key, sizeof(key), "%s_truncated", name);
	if (cut)
		json_object_set_new(o, key, json_true());
}

static int send_done(struct al_chan *ch, uint64_t id, unsigned status, json_t *body,
		     const char *reason, uint64_t denials)
{
	char *s = json_dumps(body, JSON_COMPACT);
	struct al_msg_out o;

	al_msg_begin(&o, AL_MSG_SESSION_DONE, id);
	al_msg_put_u32(&o, AL_TAG_STATUS, status);
	al_msg_put_bytes(&o, AL_TAG_BODY, s, strlen(s));
	if (reason)
		al_msg_put_str(&o, AL_TAG_REASON, reason);
	al_msg_put_u64(&o, AL_TAG_DENIALS, denials);
	free(s);
	json_decref(body);
	int r = al_msg_end(&o) < 0 ? -E2BIG : al_chan_send_sync(ch, &o);
	free(o.buf);
	return r;
}

static json_t *errors_json(const char *what, const struct al_errors *errs)
{
	json_t *a = json_array();

	for (size_t i = 0; i < errs->n; i++)
		json_array_append_new(a, json_string(errs->v[i].text));
	return json_pack("{s:s, s:o}", "error", errs->n ? errs->v[0].text : what, "errors", a);
}

/* The fields of a run request that are not the task policy's: taken out
 * of req (what is left is the policy), checked, the command set. */
static int take_fields(json_t *req, struct al_errors *errs, char ***argv, char **in, char **profile)
{
	json_t *a = json_object_get(req, "argv"), *code = json_object_get(req, "code"),
	       *lang = json_object_get(req, "language"), *sin = json_object_get(req, "stdin"),
	       *prof = json_object_get(req, "profile");
	size_t i;
	json_t *v;

	if (a && code)
		al_errors_add(errs, EINVAL, "request", NULL, "give \"argv\" or \"code\", not both");
	if (a) {
		if (!json_is_array(a) || json_array_size(a) == 0)
			al_errors_add(errs, EINVAL, "request", "argv",
				      "must be a non-empty array of strings");
		json_array_foreach(a, i, v)
		{
			if (!json_is_string(v)) {
				al_errors_add(errs, EINVAL, "request", "argv",
					      "element %zu is not a string", i);
				break;
			}
			al_strv_push(argv, json_string_value(v));
		}
	}
	if (code) {
		const char *l = json_string_value(lang);
		if (!json_is_string(code))
			al_errors_add(errs, EINVAL, "request", "code", "must be a string");
		else if (!l)
			al_errors_add(errs, EINVAL, "request", "language",
				      "\"code\" needs \"language\": python, bash or node");
		else if (strcmp(l, "python") == 0 || strcmp(l, "bash") == 0 ||
			 strcmp(l, "node") == 0) {
			al_strv_push(argv, strcmp(l, "python") == 0 ? "python3" : l);
			al_strv_push(argv, strcmp(l, "node") == 0 ? "-e" : "-c");
			al_strv_push(argv, json_string_value(code));
		} else
			al_errors_add(errs, EINVAL, "request", "language",
				      "\"%s\" is not python, bash or node", l);
	} else if (lang) {
		al_errors_add(errs, EINVAL, "request", "language", "only goes with \"code\"");
	}
	if (sin && !json_is_string(sin))
		al_errors_add(errs, EINVAL, "request", "stdin", "must be a string");
	else if (sin)
		*in = xstrdup(json_string_value(sin));
	if (prof && !json_is_string(prof))
		al_errors_add(errs, EINVAL, "request", "profile", "must be a string");
	else if (prof)
		*profile = xstrdup(json_string_value(prof));
	json_object_del(req, "argv");
	json_object_del(req, "code");
	json_object_del(req, "language");
	json_object_del(req, "stdin");
	json_object_del(req, "profile");
	return al_errors_count(errs) ? -EINVAL : 0;
}

static int stdin_fd(const char *s)
{
	int fd = memfd_create("airlock-stdin", MFD_CLOEXEC);

	if (fd < 0 || al_write_all(fd, s, strlen(s)) < 0 || lseek(fd, 0, SEEK_SET) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static uint64_t denials(const struct al_run_result *r)
{
	return r->denied.n_hosts + r->denied.n_names + r->denied.n_misuse + r->syscalls_denied;
}

int al_session_main(int fd, const struct al_session_ops *ops)
{
	struct al_chan ch;
	struct al_msg in;
	struct al_error err = {0};
	_cleanup_(al_errors_clear) struct al_errors errs = {0};
	_cleanup_(al_strv_freep) char **argv = NULL;
	_cleanup_free_ char *in_text = NULL, *profile = NULL, *operator_file = NULL, *sid = NULL;
	_cleanup_(al_strv_freep) char **refused = NULL;
	_cleanup_(al_policy_freep) struct al_policy *policy = NULL;
	_cleanup_(al_plan_freep) struct al_plan *plan = NULL;
	_cleanup_(al_cred_freep) struct al_cred *cred = NULL;
	struct out out = {0};
	char run_id[24];
	size_t len;

	signal(SIGPIPE, SIG_IGN);
	fcntl(fd, F_SETFD, FD_CLOEXEC);
	al_chan_init(&ch, fd);
	if (al_chan_recv_sync(&ch, &in, &err) <= 0 || in.type != AL_MSG_SESSION_RUN)
		return 125;
	uint64_t id = in.id;
	const uint8_t *body = al_msg_bytes(&in, AL_TAG_BODY, &len);
	operator_file = al_msg_strdup(&in, AL_TAG_OPERATOR);
	sid = al_msg_strdup(&in, AL_TAG_SESSION_ID);
	snprintf(run_id, sizeof(run_id), "%s", sid);

	json_error_t je;
	json_t *req = json_loadb((const char *)body, len, JSON_REJECT_DUPLICATES, &je);
	if (!req || !json_is_object(req)) {
		json_decref(req);
		return send_done(&ch, id, 400,
				 json_pack("{s:s}", "error", "the body must be a JSON object"),
				 NULL, 0);
	}
	int r = take_fields(req, &errs, &argv, &in_text, &profile);
	/* The policy file's format version may be left out: {} takes the
	 * defaults. */
	if (!json_object_get(req, "version"))
		json_object_set_new(req, "version", json_integer(1));
	char *text = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	if (r == 0)
		al_policy_load_string_all("request", text, strlen(text), &policy, &errs);
	free(text);
	if (al_errors_count(&errs))
		return send_done(&ch, id, 400, errors_json("bad request", &errs), NULL, 0);
	if (argv) {
		al_strv_free(policy->command);
		policy->command = TAKE_PTR(argv);
	}
	if (!policy->command)
		return send_done(
		    &ch, id, 400,
		    json_pack("{s:s}", "error",
			      "no command: give \"argv\", or \"code\" and \"language\""),
		    NULL, 0);
	if (profile) {
		free(policy->profile);
		policy->profile = TAKE_PTR(profile);
	}
	if (ops->plan(operator_file, policy, run_id, &plan, &errs, &refused) < 0) {
		if (refused) {
			json_t *a = json_array();
			for (size_t i = 0; refused[i]; i++)
				json_array_append_new(a, json_string(refused[i]));
			return send_done(&ch, id, 403,
					 json_pack("{s:s, s:o}", "error",
						   "the operator policy refused the request",
						   "reasons", a),
					 "refused", 0);
		}
		return send_done(&ch, id, 400, errors_json("the request cannot be run", &errs),
				 NULL, 0);
	}
	const struct al_backend_ops *backend = al_backend_lookup(plan->backend);
	struct rlimit no_core = {0, 0};
	if ((backend && backend->probe(plan, &err) < 0) || setrlimit(RLIMIT_CORE, &no_core) < 0 ||
	    (geteuid() == 0 && prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0) ||
	    al_cred_open(plan, run_id, &cred, &err) < 0)
		return send_done(
		    &ch, id, 500,
		    json_pack("{s:s}", "error", err.msg[0] ? err.msg : strerror(errno)), NULL, 0);
	int in_fd = in_text ? stdin_fd(in_text) : -1;
	struct al_supervisor_io io = {
	    .stdin_fd = in_fd, .stdout_fd = -1, .stderr_fd = -1, .output = on_output, .data = &out};
	struct al_run_request rq = {
	    .plan = plan, .run_id = run_id, .cred = cred, .result_dirfd = -1, .confine_self = true};
	struct al_run *run = NULL;
	struct al_error rec_err = {0};
	al_run_start(&rq, &io, &run, &err);
	const struct al_run_result *res = al_run_wait(run, &rec_err);
	json_t *o = al_result_json(plan, res, run_id);
	put_output(o, "stdout", out.buf[0], out.len[0], out.cut[0]);
	put_output(o, "stderr", out.buf[1], out.len[1], out.cut[1]);
	if (err.msg[0])
		json_object_set_new(o, "error", json_string(err.msg));
	const char *reason = al_reason_name(res->reason);
	uint64_t nd = denials(res);
	unsigned status = res->reason == AL_END_SETUP_ERROR ? 500 : 200;
	/* The sandbox is gone before the answer goes. */
	al_run_free(run);
	if (in_fd >= 0)
		close(in_fd);
	free(out.buf[0]);
	free(out.buf[1]);
	r = send_done(&ch, id, status, o, reason, nd);
	al_chan_close(&ch);
	return r < 0 ? 125 : 0;
}
