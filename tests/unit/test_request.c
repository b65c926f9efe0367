/* The request layer (src/request): a task request in, a final plan or the
 * refusal list out; several requests alive in one process; no environment
 * variable read inside; the external decider asked without waiting, its
 * stand-in answered from the test's own thread. */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "request/request.h"

static char dir[] = "/tmp/test-request-XXXXXX";
static char op_file[PATH_MAX], sock_path[PATH_MAX];

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "we");

	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
	chmod(path, 0644);
}

/* An operator policy: "default" allows memory up to 1G and egress to
 * *.example.com:443; "wide" memory up to 2G. With decider, the decider at
 * sock_path is asked once per run. */
static void write_operator(bool decider)
{
	_cleanup_free_ char *dec =
	    decider ? xasprintf("\"decider\": {\"socket\": \"%s\", \"run\": \"/v1/run\", "
				"\"timeout\": \"5s\"}, ",
				sock_path)
		    : xstrdup("");
	_cleanup_free_ char *doc =
	    xasprintf("{\"version\": 1, %s\"profiles\": {"
		      "\"default\": {\"network\": {\"allow\": [\"*.example.com:443\"]}, "
		      "\"limits\": {\"memory\": {\"max\": \"1G\", \"default\": \"256M\"}}},"
		      "\"wide\": {\"limits\": {\"memory\": {\"max\": \"2G\"}}}}}",
		      dec);
	write_file(op_file, doc);
}

static struct al_policy *task(const char *json)
{
	struct al_policy *p = NULL;
	struct al_error err = {0};

	if (al_policy_load_string("task.json", json, strlen(json), &p, &err) < 0)
		fail_msg("%s: %s", json, err.msg);
	return p;
}

static const char *env_of(const struct al_plan *p, const char *name)
{
	size_t n = strlen(name);
	for (size_t i = 0; p->envp && p->envp[i]; i++)
		if (strncmp(p->envp[i], name, n) == 0 && p->envp[i][n] == '=')
			return p->envp[i] + n + 1;
	return NULL;
}

/* No operator policy: the plan as the task asks, TERM the caller's (not
 * the process's), final once finished. */
static void test_unbounded(void **state)
{
	(void)state;
	_cleanup_(al_policy_freep) struct al_policy *p =
	    task("{\"version\": 1, \"command\": [\"/bin/true\"], \"tty\": true}");
	struct al_request_config cfg = {.term = "xterm-given", .run_id = "r1"};
	_cleanup_(al_errors_clear) struct al_errors errs = {0};
	_cleanup_(al_request_clear) struct al_request rq = {0};
	struct al_error err = {0};

	setenv("TERM", "from-the-environment", 1);
	setenv(AL_OPERATOR_ENV, op_file, 1); /* not read: cfg names none */
	al_request_init(&rq, &cfg, p);
	assert_int_equal(al_request_plan(&rq, &errs), 0);
	assert_int_equal(errs.n, 0);
	assert_null(rq.file);
	assert_non_null(rq.plan);
	assert_string_equal(env_of(rq.plan, "TERM"), "xterm-given");
	assert_false(rq.plan->final);
	assert_int_equal(al_request_finish(&rq, &err), 0);
	assert_true(rq.plan->final);
	assert_null(rq.cred);
	unsetenv(AL_OPERATOR_ENV);
}

/* Two requests alive at once under one operator policy (found through
 * the caller's operator_env): one within its profile gets a plan with the
 * profile's default filled in, one beyond it gets every reason. */
static void test_two_requests(void **state)
{
	(void)state;
	_cleanup_(al_policy_freep) struct al_policy *ok =
	    task("{\"version\": 1, \"command\": [\"/bin/true\"]}");
	_cleanup_(al_policy_freep) struct al_policy *bad =
	    task("{\"version\": 1, \"command\": [\"/bin/true\"], \"limits\": {\"memory\": "
		 "\"2G\"}, \"network\": {\"allow\": [\"evil.test:443\"]}}");
	struct al_request_config cfg = {.operator_env = op_file, .run_id = "r2"};
	_cleanup_(al_errors_clear) struct al_errors errs1 = {0}, errs2 = {0}, lines = {0};
	_cleanup_(al_request_clear) struct al_request a = {0};
	_cleanup_(al_request_clear) struct al_request b = {0};

	write_operator(false);
	al_request_init(&a, &cfg, ok);
	al_request_init(&b, &cfg, bad);
	assert_int_equal(al_request_build(&b, &errs2), -EPERM);
	assert_int_equal(al_request_build(&a, &errs1), 0);
	assert_int_equal(errs1.n, 0);
	assert_string_equal(a.how, AL_OPERATOR_ENV);
	assert_string_equal(a.dec.profile_name, "default");
	assert_non_null(a.plan);
	assert_int_equal(a.plan->memory_bytes, 256ull << 20);
	assert_false(a.refused);

	assert_true(b.refused);
	assert_null(b.plan);
	assert_int_equal(b.dec.n_refused, 2);
	al_request_refusals(&b, &lines);
	assert_int_equal(lines.n, 2);
	_cleanup_free_ char *all = xasprintf("%s\n%s", lines.v[0].text, lines.v[1].text);
	assert_contains(all, "refused: ");
	assert_contains(all, "2G");
	assert_contains(all, "evil.test:443");
}

static int make_wide_task(void *data, struct al_policy **ret, struct al_errors *errs)
{
	(void)data;
	(void)errs;
	*ret = task("{\"version\": 1, \"command\": [\"/bin/true\"], \"limits\": {\"memory\": "
		    "\"2G\"}}");
	return 0;
}

static void test_profiles_allowing(void **state)
{
	(void)state;
	struct al_request_config cfg = {.operator_env = op_file};
	_cleanup_(al_operator_freep) struct al_operator *op = NULL;
	_cleanup_(al_errors_clear) struct al_errors errs = {0};

	write_operator(false);
	assert_int_equal(al_operator_load_file(op_file, &op, &errs), 0);
	_cleanup_(al_strv_freep) char **names =
	    al_request_profiles_allowing(&cfg, op, make_wide_task, NULL);
	assert_non_null(names);
	assert_string_equal(names[0], "wide");
	assert_null(names[1]);
}

/* The stand-in decider: accept the one question on lfd, read it whole
 * (the call has written it all), answer with body. */
static void answer(int lfd, const char *body)
{
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	char buf[65536];

	assert_true(fd >= 0);
	assert_true(read(fd, buf, sizeof(buf)) > 0);
	_cleanup_free_ char *resp = xasprintf(
	    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
	    strlen(body), body);
	assert_int_equal(write(fd, resp, strlen(resp)), (ssize_t)strlen(resp));
	close(fd);
}

/* Drive the call as a loop would, answering from this thread once it
 * waits for the answer: nothing blocks on the decider. */
static int drive(struct al_decider_call *call, int lfd, const char *body, json_t **result,
		 struct al_error *err)
{
	bool answered = false;
	int r;

	for (int i = 0; i < 1000; i++) {
		if ((r = al_decider_call_step(call, result, err)) != 0)
			return r;
		if (!answered && al_decider_call_events(call) == POLLIN) {
			answer(lfd, body);
			answered = true;
		}
		struct pollfd p = {.fd = al_decider_call_fd(call),
				   .events = (short)al_decider_call_events(call)};
		poll(&p, 1, 1000);
	}
	return -ETIMEDOUT;
}

static void test_decider_without_waiting(void **state)
{
	(void)state;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	_cleanup_close_ int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct al_request_config cfg = {.operator_file = op_file, .run_id = "r3"};
	const char *bodies[] = {"{\"result\": {\"allow\": false, \"reason\": \"not on fridays\"}}",
				"{\"result\": {\"allow\": true, \"network\": {\"allow\": []}}}"};

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
	assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(lfd, 4), 0);
	write_operator(true);
	for (size_t k = 0; k < 2; k++) {
		_cleanup_(al_policy_freep) struct al_policy *p =
		    task("{\"version\": 1, \"command\": [\"/bin/true\"], \"network\": {\"allow\": "
			 "[\"a.example.com:443\"]}}");
		_cleanup_(al_errors_clear) struct al_errors errs = {0};
		_cleanup_(al_request_clear) struct al_request rq = {0};
		struct al_decider_call *call = NULL;
		struct al_error err = {0};
		json_t *result = NULL;

		al_request_init(&rq, &cfg, p);
		int b = al_request_build(&rq, &errs);
		if (b != AL_REQUEST_ASK)
			fail_msg("build %d: %s", b,
				 errs.n	      ? errs.v[0].text
				 : rq.refused ? rq.dec.refused[0].message
					      : "");
		assert_int_equal(al_request_ask_start(&rq, &call, &errs), 0);
		int r = drive(call, lfd, bodies[k], &result, &err);
		al_decider_call_free(call);
		if (r < 0)
			fail_msg("%s", err.msg);
		r = al_request_answer(&rq, r, result, &err, &errs);
		json_decref(result);
		if (k == 0) {
			assert_int_equal(r, -EPERM);
			assert_true(rq.refused);
			assert_contains(rq.dec.refused[0].message, "not on fridays");
		} else {
			/* Narrowed to no egress: built again without it. */
			assert_int_equal(r, 0);
			assert_non_null(rq.plan);
			assert_false(rq.plan->gateway);
		}
	}
	unlink(sock_path);
}

static int setup(void **state)
{
	(void)state;
	if (!mkdtemp(dir))
		return -1;
	chmod(dir, 0755);
	snprintf(op_file, sizeof(op_file), "%s/operator.json", dir);
	snprintf(sock_path, sizeof(sock_path), "%s/decider.sock", dir);
	return 0;
}

/* The request's refusal lines joined, for assertions. */
static char *refusal_text(const struct al_request *rq)
{
	_cleanup_(al_errors_clear) struct al_errors lines = {0};
	char **v = NULL, *s;

	al_request_refusals(rq, &lines);
	for (size_t i = 0; i < lines.n; i++)
		al_strv_push(&v, lines.v[i].text);
	s = v ? al_strv_join(v, "\n") : xstrdup("");
	al_strv_free(v);
	return s;
}

/* One daemon request: build it for who under operator (NULL: none) with
 * never paths; returns build's result, *why the refusal lines. */
static int daemon_build(const char *json, const char *operator, const struct al_identity * who,
			const char *const *never, char **profile, char **why)
{
	_cleanup_(al_policy_freep) struct al_policy *p = task(json);
	struct al_request_config cfg = {
	    .operator_file = operator, .identity = who, .never_paths = never};
	_cleanup_(al_errors_clear) struct al_errors errs = {0};
	_cleanup_(al_request_clear) struct al_request rq = {0};

	al_request_init(&rq, &cfg, p);
	int r = al_request_build(&rq, &errs);
	for (size_t i = 0; i < errs.n; i++)
		print_message("  error: %s\n", errs.v[i].text);
	*why = refusal_text(&rq);
	if (profile)
		*profile = rq.dec.profile_name ? xstrdup(rq.dec.profile_name) : NULL;
	assert_true(r == 0 || rq.refused);
	return r;
}

/* The daemon's identities: the profiles the operator's "serve" section
 * grants each, its default when the request names none, and a 403's
 * reason naming the identity and what it may use. */
static void test_daemon_identities(void **state)
{
	(void)state;
	_cleanup_free_ char *opf = xasprintf("%s/serve.json", dir);
	write_file(opf, "{\"version\": 1, \"profiles\": {\"default\": {}, \"wide\": {}}, "
			"\"serve\": {\"identities\": {"
			"\"uid:1000\": {\"profiles\": [\"wide\"]}, "
			"\"token:alice\": {\"profiles\": [\"default\", \"wide\"]}}}}");
	const char *plain = "{\"version\": 1, \"command\": [\"/bin/true\"]}";
	const char *asks_default =
	    "{\"version\": 1, \"command\": [\"/bin/true\"], \"profile\": \"default\"}";
	struct al_identity u1000 = {.uid = 1000}, u2000 = {.uid = 2000}, root = {.uid = 0},
			   alice = {.token = "alice"}, bob = {.token = "bob"};
	char *why, *prof;

	assert_int_equal(daemon_build(plain, opf, &u1000, NULL, &prof, &why), 0);
	assert_string_equal(prof, "wide"); /* its default: its only profile */
	free(why), free(prof);
	assert_int_equal(daemon_build(asks_default, opf, &u1000, NULL, NULL, &why), -EPERM);
	assert_contains(why, "uid:1000: profile \"default\" is not granted to this identity (it "
			     "may use: wide)");
	assert_contains(why, "serve.identities");
	free(why);
	assert_int_equal(daemon_build(plain, opf, &u2000, NULL, NULL, &why), -EPERM);
	assert_contains(why, "uid:2000: the operator policy's \"serve\" section grants this "
			     "identity no profile");
	free(why);
	assert_int_equal(daemon_build(asks_default, opf, &alice, NULL, &prof, &why), 0);
	assert_string_equal(prof, "default");
	free(why), free(prof);
	assert_int_equal(daemon_build(plain, opf, &bob, NULL, NULL, &why), -EPERM);
	assert_contains(why, "token:bob");
	free(why);
	/* uid 0 without an entry: every profile. */
	assert_int_equal(daemon_build(asks_default, opf, &root, NULL, &prof, &why), 0);
	assert_string_equal(prof, "default");
	free(why), free(prof);
	/* The CLI (no identity) is not held to "serve". */
	assert_int_equal(daemon_build(asks_default, opf, NULL, NULL, &prof, &why), 0);
	free(why), free(prof);
	unlink(opf);
}

#define SECRET(src)                                                                                \
	"{\"version\": 1, \"command\": [\"/bin/true\"], \"network\": {\"allow\": "                 \
	"[\"a.test:80\"], \"hosts\": {\"a.test\": \"127.0.0.1\"}}, \"secrets\": {\"S\": "          \
	"{\"source\": " src ", \"hosts\": [\"a.test:80\"], \"header\": \"X: {}\"}}}"

/* With no operator policy a daemon serves uid 0 only, and even then no
 * secret read from a descriptor, a command or its environment, and no
 * "copy" mount; a file source and plain mounts stay root's. */
static void test_daemon_unbounded(void **state)
{
	(void)state;
	struct al_identity u1000 = {.uid = 1000}, root = {.uid = 0}, alice = {.token = "alice"};
	char *why;

	assert_int_equal(daemon_build("{\"version\": 1, \"command\": [\"/bin/true\"]}", NULL,
				      &u1000, NULL, NULL, &why),
			 -EPERM);
	assert_contains(why, "uid:1000: this daemon has no operator policy, and without one it "
			     "serves only uid 0");
	free(why);
	assert_int_equal(daemon_build("{\"version\": 1, \"command\": [\"/bin/true\"]}", NULL,
				      &alice, NULL, NULL, &why),
			 -EPERM);
	assert_contains(why, "token:alice: this daemon has no operator policy");
	free(why);
	assert_int_equal(
	    daemon_build(SECRET("{\"command\": [\"/bin/id\"]}"), NULL, &root, NULL, NULL, &why),
	    -EPERM);
	assert_contains(why, "may not be read from a command");
	free(why);
	assert_int_equal(daemon_build(SECRET("{\"env\": \"HOME\"}"), NULL, &root, NULL, NULL, &why),
			 -EPERM);
	assert_contains(why, "may not be read from the environment");
	free(why);
	assert_int_equal(daemon_build(SECRET("{\"fd\": 3}"), NULL, &root, NULL, NULL, &why),
			 -EPERM);
	assert_contains(why, "a secret read from a descriptor cannot be had in the daemon");
	free(why);
	_cleanup_free_ char *copy =
	    xasprintf("{\"version\": 1, \"command\": [\"/bin/true\"], \"filesystem\": {\"mounts\": "
		      "[{\"host\": \"%s\", \"path\": \"/x\", \"mode\": \"ro\", \"copy\": true}]}}",
		      op_file);
	write_operator(false);
	assert_int_equal(daemon_build(copy, NULL, &root, NULL, NULL, &why), -EPERM);
	assert_contains(why, "may not copy host files in there");
	free(why);
	_cleanup_free_ char *file = xasprintf("{\"file\": \"%s\"}", op_file);
	_cleanup_free_ char *fsecret = xasprintf(
	    "{\"version\": 1, \"command\": [\"/bin/true\"], \"network\": {\"allow\": "
	    "[\"a.test:80\"], \"hosts\": {\"a.test\": \"127.0.0.1\"}}, \"secrets\": {\"S\": "
	    "{\"source\": %s, \"hosts\": [\"a.test:80\"], \"header\": \"X: {}\"}}}",
	    file);
	assert_int_equal(daemon_build(fsecret, NULL, &root, NULL, NULL, &why), 0);
	free(why);
	/* The CLI keeps every source. */
	assert_int_equal(daemon_build(SECRET("{\"fd\": 3}"), NULL, NULL, NULL, NULL, &why), 0);
	free(why);
}

/* The daemon's own files (its socket, token file, operator policy) in
 * never_paths: no plan shows them, nor a directory above them, whether
 * or not an operator policy is in force. */
static void test_never_paths(void **state)
{
	(void)state;
	_cleanup_free_ char *sub = xasprintf("%s/d", dir), *tok = xasprintf("%s/d/tokens", dir);
	assert_int_equal(mkdir(sub, 0755), 0);
	write_file(tok, "x");
	const char *never[] = {tok, NULL};
	struct al_identity root = {.uid = 0};
	_cleanup_free_ char *dir_mount =
	    xasprintf("{\"version\": 1, \"command\": [\"/bin/true\"], \"filesystem\": {\"mounts\": "
		      "[{\"host\": \"%s\", \"path\": \"/d\", \"mode\": \"ro\"}]}}",
		      sub);
	_cleanup_free_ char *file_mount =
	    xasprintf("{\"version\": 1, \"command\": [\"/bin/true\"], \"filesystem\": {\"mounts\": "
		      "[{\"host\": \"%s\", \"path\": \"/t\", \"mode\": \"ro\"}]}}",
		      tok);
	char *why;

	assert_int_equal(daemon_build(dir_mount, NULL, &root, never, NULL, &why), -EPERM);
	assert_contains(why, "would show");
	assert_contains(why, "which belongs to the daemon serving this request");
	free(why);
	assert_int_equal(daemon_build(file_mount, NULL, NULL, never, NULL, &why), -EPERM);
	assert_contains(why, "is, or lies inside");
	free(why);
	/* Under an operator policy that would allow the path. */
	_cleanup_free_ char *opf = xasprintf("%s/wide.json", dir);
	_cleanup_free_ char *doc = xasprintf(
	    "{\"version\": 1, \"profiles\": {\"default\": {\"filesystem\": {\"ro\": [\"%s\"]}}}}",
	    dir);
	write_file(opf, doc);
	assert_int_equal(daemon_build(dir_mount, opf, &root, NULL, NULL, &why), 0);
	free(why);
	assert_int_equal(daemon_build(dir_mount, opf, &root, never, NULL, &why), -EPERM);
	assert_contains(why, "which belongs to the daemon serving this request");
	free(why);
	unlink(opf);
	unlink(tok);
	rmdir(sub);
}

static int teardown(void **state)
{
	(void)state;
	unlink(op_file);
	unlink(sock_path);
	rmdir(dir);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_unbounded),
	    cmocka_unit_test(test_two_requests),
	    cmocka_unit_test(test_profiles_allowing),
	    cmocka_unit_test(test_decider_without_waiting),
	    cmocka_unit_test(test_daemon_identities),
	    cmocka_unit_test(test_daemon_unbounded),
	    cmocka_unit_test(test_never_paths),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
