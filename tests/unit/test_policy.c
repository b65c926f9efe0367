/* policy/policy.h: the JSON policy parser (valid documents fill the model,
 * invalid ones fail with "FILE: JSON.PATH: ..." or "FILE:LINE:COL: ...")
 * and al_policy_merge(). */
#include "unit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/error.h"
#include "core/util.h"
#include "policy/policy.h"

/* Written only on success: a failed load must leave *ret alone. */
static struct al_policy *const UNTOUCHED = (struct al_policy *)&UNTOUCHED;

static struct al_policy *load_ok(const char *json)
{
	struct al_policy *p = NULL;
	struct al_error err = {0};
	int r = al_policy_load_string("p.json", json, strlen(json), &p, &err);

	if (r != 0)
		fail_msg("loading %s failed (%d): %s", json, r, err.msg);
	assert_non_null(p);
	return p;
}

/* Load json as "p.json", expect -EINVAL and a message containing every
 * string in want[] (NULL-terminated). */
static void load_bad(const char *json, const char *const *want)
{
	struct al_policy *p = UNTOUCHED;
	struct al_error err = {0};
	int r = al_policy_load_string("p.json", json, strlen(json), &p, &err);

	if (r >= 0)
		fail_msg("loading %s succeeded, expected an error containing \"%s\"", json,
			 want[0]);
	assert_int_equal(r, -EINVAL);
	assert_ptr_equal(p, UNTOUCHED);
	assert_null(strchr(err.msg, '\n'));
	for (size_t i = 0; want[i]; i++)
		assert_contains(err.msg, want[i]);
}

#define BAD(json, ...) load_bad(json, (const char *const[]){__VA_ARGS__, NULL})

/* clang-format off */
static const char full_doc[] =
	"{\n"
	"  \"version\": 1,\n"
	"  \"command\": [\"python3\", \"-c\", \"print(1)\"],\n"
	"  \"hostname\": \"box\",\n"
	"  \"filesystem\": {\n"
	"    \"system\": [\"/usr\", \"/lib\"],\n"
	"    \"mounts\": [\n"
	"      {\"host\": \"/srv/data\", \"path\": \"/input\", \"mode\": \"ro\"},\n"
	"      {\"host\": \"/srv/out\", \"path\": \"/output\", \"mode\": \"rw\", \"exec\": false},\n"
	"      {\"host\": \"/srv/tools\", \"exec\": true}\n"
	"    ],\n"
	"    \"workdir\": \"/job\",\n"
	"    \"scratch_exec\": true,\n"
	"    \"landlock\": \"best-effort\"\n"
	"  },\n"
	"  \"env\": {\"FOO\": \"bar\", \"EMPTY\": \"\", \"WITH_EQ\": \"a=b\"},\n"
	"  \"limits\": {\"timeout\": \"90s\", \"scratch\": \"128M\"},\n"
	"  \"network\": {\"mode\": \"none\"},\n"
	"  \"backend\": {\"name\": \"native\"}\n"
	"}\n";
/* clang-format on */

static void test_full_document(void **state)
{
	_cleanup_(al_policy_freep) struct al_policy *p = load_ok(full_doc);

	assert_string_equal(p->source, "p.json");
	assert_int_equal(al_strv_len(p->command), 3);
	assert_string_equal(p->command[0], "python3");
	assert_string_equal(p->command[2], "print(1)");
	assert_string_equal(p->hostname, "box");

	assert_int_equal(al_strv_len(p->system), 2);
	assert_string_equal(p->system[0], "/usr");
	assert_string_equal(p->system[1], "/lib");

	assert_int_equal(p->n_mounts, 3);
	assert_string_equal(p->mounts[0].host, "/srv/data");
	assert_string_equal(p->mounts[0].path, "/input");
	assert_int_equal(p->mounts[0].mode, AL_MOUNT_RO);
	assert_int_equal(p->mounts[0].exec, AL_UNSET);
	assert_string_equal(p->mounts[0].origin, "p.json: filesystem.mounts[0]");
	assert_string_equal(p->mounts[1].path, "/output");
	assert_int_equal(p->mounts[1].mode, AL_MOUNT_RW);
	assert_int_equal(p->mounts[1].exec, 0);
	assert_string_equal(p->mounts[1].origin, "p.json: filesystem.mounts[1]");
	/* "path" defaults to "host"; "mode" defaults to read-only. */
	assert_string_equal(p->mounts[2].path, "/srv/tools");
	assert_int_equal(p->mounts[2].mode, AL_MOUNT_RO);
	assert_int_equal(p->mounts[2].exec, 1);
	assert_string_equal(p->mounts[2].origin, "p.json: filesystem.mounts[2]");

	assert_string_equal(p->workdir, "/job");
	assert_int_equal(p->scratch_exec, 1);
	assert_int_equal(p->landlock, AL_LANDLOCK_BEST_EFFORT);

	assert_int_equal(al_strv_len(p->env), 3);
	assert_string_equal(p->env[0], "FOO=bar");
	assert_string_equal(p->env[1], "EMPTY=");
	assert_string_equal(p->env[2], "WITH_EQ=a=b");

	assert_int_equal(p->timeout_ms, 90000);
	assert_int_equal(p->scratch_bytes, 128ULL << 20);
	assert_string_equal(p->network_mode, "none");
	assert_string_equal(p->backend, "native");
}

static void test_minimal_document_is_all_unset(void **state)
{
	_cleanup_(al_policy_freep) struct al_policy *p = load_ok("{\"version\": 1}");

	assert_string_equal(p->source, "p.json");
	assert_null(p->command);
	assert_null(p->hostname);
	assert_null(p->system);
	assert_int_equal(p->n_mounts, 0);
	assert_null(p->workdir);
	assert_int_equal(p->scratch_exec, AL_UNSET);
	assert_int_equal(p->tty, AL_UNSET);
	assert_int_equal(p->landlock, AL_LANDLOCK_UNSET);
	assert_null(p->env);
	assert_int_equal(p->timeout_ms, 0);
	assert_int_equal(p->scratch_bytes, 0);
	assert_null(p->network_mode);
	assert_null(p->backend);
}

static void test_value_forms(void **state)
{
	struct al_policy *p;

	p = load_ok("{\"version\":1,\"limits\":{\"timeout\":60,\"scratch\":1048576}}");
	assert_int_equal(p->timeout_ms, 60000);
	assert_int_equal(p->scratch_bytes, 1048576);
	al_policy_free(p);

	p = load_ok("{\"version\":1,\"limits\":{\"timeout\":1.5,\"scratch\":\"1GiB\"}}");
	assert_int_equal(p->timeout_ms, 1500);
	assert_int_equal(p->scratch_bytes, 1ULL << 30);
	al_policy_free(p);

	p = load_ok("{\"version\":1,\"limits\":{\"timeout\":\"250ms\",\"scratch\":\"512k\"}}");
	assert_int_equal(p->timeout_ms, 250);
	assert_int_equal(p->scratch_bytes, 512ULL << 10);
	al_policy_free(p);

	p = load_ok("{\"version\":1,\"tty\":true}");
	assert_int_equal(p->tty, 1);
	al_policy_free(p);
	p = load_ok("{\"version\":1,\"tty\":false}");
	assert_int_equal(p->tty, 0);
	al_policy_free(p);

	p = load_ok("{\"version\":1,\"filesystem\":{\"landlock\":\"required\","
		    "\"scratch_exec\":false,\"system\":[]}}");
	assert_int_equal(p->landlock, AL_LANDLOCK_REQUIRED);
	assert_int_equal(p->scratch_exec, 0);
	/* An empty list is "show nothing", distinct from "unset" (NULL). */
	assert_non_null(p->system);
	assert_null(p->system[0]);
	al_policy_free(p);

	/* A later env entry for the same name would be a duplicate key; the
	 * parser keeps document order. */
	p = load_ok("{\"version\":1,\"env\":{\"B\":\"1\",\"A\":\"2\"}}");
	assert_string_equal(p->env[0], "B=1");
	assert_string_equal(p->env[1], "A=2");
	al_policy_free(p);
}

static void test_schema_errors(void **state)
{
	BAD("{\"version\":1,\"limits\":{\"timeout\":\"abc\"}}",
	    "p.json: limits.timeout:", "\"abc\"");
	BAD("{\"version\":1,\"limits\":{\"timeout\":\"5x\"}}", "p.json: limits.timeout:");
	BAD("{\"version\":1,\"limits\":{\"timeout\":0}}", "p.json: limits.timeout:");
	BAD("{\"version\":1,\"limits\":{\"timeout\":-3}}", "p.json: limits.timeout:");
	BAD("{\"version\":1,\"limits\":{\"timeout\":true}}",
	    "p.json: limits.timeout:", "a boolean");
	BAD("{\"version\":1,\"limits\":{\"scratch\":\"12Q\"}}",
	    "p.json: limits.scratch:", "bad size \"12Q\"");
	BAD("{\"version\":1,\"limits\":{\"scratch\":\"0\"}}", "p.json: limits.scratch:");
	BAD("{\"version\":1,\"limits\":{\"scratch\":0}}", "p.json: limits.scratch:", "positive");
	BAD("{\"version\":1,\"limits\":{\"scratch\":\"99999999999T\"}}", "p.json: limits.scratch:");
	BAD("{\"version\":1,\"limits\":{\"scratch\":[]}}", "p.json: limits.scratch:", "an array");
	BAD("{\"version\":1,\"limits\":{\"memroy\":\"1G\"}}",
	    "p.json: limits:", "unknown key \"memroy\"");
	BAD("{\"version\":1,\"limits\":{\"memory\":\"1Q\"}}", "p.json: limits.memory:", "bad size");
	BAD("{\"version\":1,\"limits\":{\"pids\":0}}", "p.json: limits.pids:");
	BAD("{\"version\":1,\"limits\":{\"cpus\":\"half\"}}", "p.json: limits.cpus:");
}

static void test_unknown_keys(void **state)
{
	BAD("{\"version\":1,\"bogus\":1}", "p.json: (top level): unknown key \"bogus\"",
	    "expected one of:", "command");
	BAD("{\"version\":1,\"filesystem\":{\"mounts\":["
	    "{\"host\":\"/a\"},{\"hots\":\"/b\"}]}}",
	    "p.json: filesystem.mounts[1]: unknown key \"hots\"", "host, path, mode, exec");
	BAD("{\"version\":1,\"filesystem\":{\"mount\":[]}}",
	    "p.json: filesystem: unknown key \"mount\"");
	BAD("{\"version\":1,\"network\":{\"mode\":\"none\",\"alow\":[]}}",
	    "p.json: network: unknown key \"alow\"");
	BAD("{\"version\":1,\"network\":{\"allow\":[\"a*.x.com\"]}}", "p.json: network.allow[0]:");
	BAD("{\"version\":1,\"network\":{\"allow\":[\"x.com:0\"]}}", "p.json: network.allow[0]:");
	BAD("{\"version\":1,\"network\":{\"hosts\":{\"api.internal\":\"not-an-ip\"}}}",
	    "p.json: network.hosts.api.internal:");
	BAD("{\"version\":1,\"backend\":{\"type\":\"native\"}}",
	    "p.json: backend: unknown key \"type\"");
}

static void test_wrong_types(void **state)
{
	BAD("[]", "p.json: (top level): expected an object, got an array");
	BAD("{\"version\":1,\"hostname\":5}",
	    "p.json: hostname: expected a string, got an integer");
	BAD("{\"version\":1,\"tty\":\"yes\"}", "p.json: tty: expected true or false, got a string");
	BAD("{\"version\":1,\"tty\":1}", "p.json: tty: expected true or false, got an integer");
	BAD("{\"version\":1,\"filesystem\":[]}", "p.json: filesystem: expected an object");
	BAD("{\"version\":1,\"filesystem\":{\"mounts\":{}}}",
	    "p.json: filesystem.mounts: expected an array");
	BAD("{\"version\":1,\"filesystem\":{\"mounts\":[\"/a\"]}}",
	    "p.json: filesystem.mounts[0]: expected an object, got a string");
	BAD("{\"version\":1,\"filesystem\":{\"scratch_exec\":\"yes\"}}",
	    "p.json: filesystem.scratch_exec: expected true or false");
	BAD("{\"version\":1,\"filesystem\":{\"mounts\":[{\"host\":\"/a\",\"exec\":1}]}}",
	    "p.json: filesystem.mounts[0].exec: expected true or false, got an integer");
	BAD("{\"version\":1,\"env\":[]}", "p.json: env: expected an object");
	BAD("{\"version\":1,\"env\":{\"FOO\":1}}", "p.json: env.FOO: expected a string");
	BAD("{\"version\":1,\"env\":{\"FOO\":null}}", "p.json: env.FOO:", "null");
	BAD("{\"version\":1,\"limits\":5}", "p.json: limits: expected an object");
	BAD("{\"version\":1,\"network\":\"none\"}", "p.json: network: expected an object");
	BAD("{\"version\":1,\"backend\":\"native\"}", "p.json: backend: expected an object");
	BAD("{\"version\":1,\"backend\":{\"name\":7}}", "p.json: backend.name: expected a string");
}

static void test_version(void **state)
{
	BAD("{}", "p.json: version: missing");
	BAD("{\"command\":[\"true\"]}", "p.json: version: missing");
	BAD("{\"version\":2}", "p.json: version: unsupported", "1");
	BAD("{\"version\":0}", "p.json: version: unsupported");
	/* not an integer: say so (issue 10) */
	BAD("{\"version\":\"1\"}", "p.json: version: the version is an integer", "not a string");
	BAD("{\"version\":1.0}", "p.json: version: the version is an integer");
	BAD("{\"version\":true}", "p.json: version: the version is an integer");
}

static void test_paths(void **state)
{
	BAD("{\"version\":1,\"filesystem\":{\"mounts\":[{\"host\":\"data\"}]}}",
	    "p.json: filesystem.mounts[0].host:", "absolute", "\"data\"");
	BAD("{\"version\":1,\"filesystem\":{\"mounts\":[{\"host\":\"/a\"},"
	    "{\"host\":\"/b\",\"path\":\"/x/../etc\"}]}}",
	    "p.json: filesystem.mounts[1].path:", "\"/x/../etc\"");
	BAD("{\"version\":1,\"filesystem\":{\"mounts\":[{\"host\":\"/a/\"}]}}",
	    "p.json: filesystem.mounts[0].host:");
	BAD("{\"version\":1,\"filesystem\":{\"mounts\":[{\"path\":\"/a\"}]}}",
	    "p.json: filesystem.mounts[0].host: missing");
	BAD("{\"version\":1,\"filesystem\":{\"mounts\":[{\"host\":\"/a\",\"mode\":\"rx\"}]}}",
	    "p.json: filesystem.mounts[0].mode:", "\"rx\"");
	BAD("{\"version\":1,\"filesystem\":{\"workdir\":\"work\"}}", "p.json: filesystem.workdir:");
	BAD("{\"version\":1,\"filesystem\":{\"system\":[\"/usr\",\"lib\"]}}",
	    "p.json: filesystem.system[1]:", "\"lib\"");
	BAD("{\"version\":1,\"filesystem\":{\"landlock\":\"maybe\"}}",
	    "p.json: filesystem.landlock:", "\"maybe\"");
}

static void test_command(void **state)
{
	BAD("{\"version\":1,\"command\":[]}", "p.json: command:", "non-empty");
	BAD("{\"version\":1,\"command\":\"ls -l\"}",
	    "p.json: command: expected an array of strings");
	BAD("{\"version\":1,\"command\":[\"ls\",1]}", "p.json: command[1]: expected a string");
	BAD("{\"version\":1,\"command\":[[\"ls\"]]}", "p.json: command[0]: expected a string");
	BAD("{\"version\":1,\"command\":null}", "p.json: command:");
}

static void test_env_hostname_network(void **state)
{
	BAD("{\"version\":1,\"env\":{\"1BAD\":\"x\"}}", "p.json: env.1BAD:", "variable name");
	BAD("{\"version\":1,\"env\":{\"A-B\":\"x\"}}", "p.json: env.A-B:");
	BAD("{\"version\":1,\"env\":{\"A=B\":\"x\"}}", "p.json: env.A=B:");
	BAD("{\"version\":1,\"env\":{\"\":\"x\"}}", "p.json: env.:");
	BAD("{\"version\":1,\"hostname\":\"bad_name\"}", "p.json: hostname:", "bad_name");
	BAD("{\"version\":1,\"hostname\":\"\"}", "p.json: hostname:");
	BAD("{\"version\":1,\"network\":{\"mode\":\"host\"}}", "p.json: network.mode:", "\"none\"",
	    "\"host\"");
	BAD("{\"version\":1,\"network\":{\"mode\":\"\"}}", "p.json: network.mode:");
}

static void test_syntax_errors(void **state)
{
	/* line:column come from jansson. */
	BAD("{\n  \"version\": 1,\n  \"command\": [\"a\",]\n}", "p.json:3:");
	BAD("{\"version\":1,", "p.json:1:");
	BAD("", "p.json:");
	BAD("{\"version\":1} trailing", "p.json:1:");
	BAD("{'version':1}", "p.json:1:");
	/* Duplicate keys are an error, not "last one wins". */
	BAD("{\"version\":1,\"version\":1}", "p.json:1:", "duplicate");
	BAD("{\"version\":1,\"env\":{\"A\":\"1\",\n\"A\":\"2\"}}", "p.json:2:", "duplicate");
	BAD("{\"version\":1,\"limits\":{\"timeout\":1,\"timeout\":2}}", "duplicate");
	/* NUL inside a string. */
	BAD("{\"version\":1,\"env\":{\"A\":\"x\\u0000y\"}}", "p.json:1:");
}

static void test_load_string_respects_len(void **state)
{
	const char doc[] = "{\"version\":1}garbage";
	struct al_policy *p = NULL;
	struct al_error err = {0};

	assert_int_equal(al_policy_load_string("p.json", doc, 13, &p, &err), 0);
	assert_non_null(p);
	al_policy_free(p);
}

static void test_load_file(void **state)
{
	char path[] = "/tmp/airlock-unit-policy-XXXXXX";
	struct al_policy *p = UNTOUCHED;
	struct al_error err = {0};
	int fd = mkstemp(path);
	FILE *f;

	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	assert_non_null(f);
	fputs("{\"version\": 1,\n \"limits\": {\"timeout\": \"abc\"}}\n", f);
	fclose(f);
	assert_int_equal(al_policy_load_file(path, &p, &err), -EINVAL);
	assert_ptr_equal(p, UNTOUCHED);
	/* Messages name the file by the path it was opened with. */
	assert_contains(err.msg, path);
	assert_contains(err.msg, ": limits.timeout:");

	f = fopen(path, "w");
	assert_non_null(f);
	fputs(full_doc, f);
	fclose(f);
	assert_int_equal(al_policy_load_file(path, &p, &err), 0);
	assert_string_equal(p->source, path);
	assert_int_equal(p->n_mounts, 3);
	al_policy_free(p);
	unlink(path);

	p = UNTOUCHED;
	assert_int_equal(al_policy_load_file(path, &p, &err), -ENOENT);
	assert_ptr_equal(p, UNTOUCHED);
	assert_contains(err.msg, path);
	assert_contains(err.msg, strerror(ENOENT));
}

/* al_policy_set_env / al_policy_add_mount */

static void test_set_env(void **state)
{
	_cleanup_(al_policy_freep) struct al_policy *p = al_policy_new(NULL);

	assert_string_equal(p->source, "command line");
	al_policy_set_env(p, "FOOBAR", "1");
	al_policy_set_env(p, "FOO", "2");
	al_policy_set_env(p, "FOO", "3");
	al_policy_set_env(p, "F", "4");
	assert_int_equal(al_strv_len(p->env), 3);
	assert_string_equal(p->env[0], "FOOBAR=1"); /* a prefix is not a match */
	assert_string_equal(p->env[1], "FOO=3");
	assert_string_equal(p->env[2], "F=4");
}

static void test_add_mount_copies(void **state)
{
	_cleanup_(al_policy_freep) struct al_policy *p = al_policy_new("x");
	char host[] = "/srv/a", path[] = "/input", origin[] = "--ro";

	al_policy_add_mount(p, host, path, AL_MOUNT_RW, 0, origin);
	host[1] = path[1] = origin[2] = 'Z';
	assert_int_equal(p->n_mounts, 1);
	assert_string_equal(p->mounts[0].host, "/srv/a");
	assert_string_equal(p->mounts[0].path, "/input");
	assert_string_equal(p->mounts[0].origin, "--ro");
	assert_int_equal(p->mounts[0].mode, AL_MOUNT_RW);
	assert_int_equal(p->mounts[0].exec, 0);
}

/* al_policy_merge */

/* clang-format off */
static const char merge_base_doc[] =
	"{\"version\":1,\"command\":[\"from-file\"],\"hostname\":\"filehost\","
	"\"filesystem\":{\"mounts\":[{\"host\":\"/srv/a\",\"path\":\"/input\"},"
	"{\"host\":\"/srv/d\",\"path\":\"/data\",\"mode\":\"rw\"}],"
	"\"workdir\":\"/job\",\"scratch_exec\":true},"
	"\"env\":{\"FOO\":\"1\",\"BAR\":\"2\"},"
	"\"limits\":{\"timeout\":10,\"scratch\":\"1M\"},"
	"\"backend\":{\"name\":\"native\"}}";
/* clang-format on */

static void test_merge_flags_override_file(void **state)
{
	_cleanup_(al_policy_freep) struct al_policy *base = load_ok(merge_base_doc);
	struct al_policy *over = al_policy_new(NULL);

	over->timeout_ms = 5000;
	over->hostname = xstrdup("flaghost");
	over->scratch_exec = 0;
	over->tty = 1;
	over->landlock = AL_LANDLOCK_BEST_EFFORT;
	al_policy_add_mount(over, "/srv/b", "/input", AL_MOUNT_RW, 0, "--rw");
	al_policy_add_mount(over, "/srv/e", "/extra", AL_MOUNT_RO, AL_UNSET, "--ro");
	al_policy_set_env(over, "FOO", "override");
	al_policy_set_env(over, "NEW", "x=y");

	al_policy_merge(base, over);
	/* base must not borrow anything from over. */
	al_policy_free(over);

	/* Set scalars in over win... */
	assert_int_equal(base->timeout_ms, 5000);
	assert_string_equal(base->hostname, "flaghost");
	assert_int_equal(base->scratch_exec, 0);
	assert_int_equal(base->tty, 1);
	assert_int_equal(base->landlock, AL_LANDLOCK_BEST_EFFORT);
	/* ...and unset ones leave the file's values alone. */
	assert_int_equal(al_strv_len(base->command), 1);
	assert_string_equal(base->command[0], "from-file");
	assert_int_equal(base->scratch_bytes, 1ULL << 20);
	assert_string_equal(base->workdir, "/job");
	assert_string_equal(base->backend, "native");
	assert_string_equal(base->source, "p.json");

	/* Same sandbox path: replaced in place; new path: appended. */
	assert_int_equal(base->n_mounts, 3);
	assert_string_equal(base->mounts[0].path, "/input");
	assert_string_equal(base->mounts[0].host, "/srv/b");
	assert_int_equal(base->mounts[0].mode, AL_MOUNT_RW);
	assert_int_equal(base->mounts[0].exec, 0);
	assert_string_equal(base->mounts[0].origin, "--rw");
	assert_string_equal(base->mounts[1].path, "/data");
	assert_string_equal(base->mounts[1].host, "/srv/d");
	assert_int_equal(base->mounts[1].mode, AL_MOUNT_RW);
	assert_string_equal(base->mounts[1].origin, "p.json: filesystem.mounts[1]");
	assert_string_equal(base->mounts[2].path, "/extra");
	assert_string_equal(base->mounts[2].host, "/srv/e");
	assert_string_equal(base->mounts[2].origin, "--ro");

	/* Env: same names replaced, new names added, others kept. */
	assert_int_equal(al_strv_len(base->env), 3);
	assert_string_equal(base->env[0], "FOO=override");
	assert_string_equal(base->env[1], "BAR=2");
	assert_string_equal(base->env[2], "NEW=x=y");
}

/* network.resolver: what the gateway's resolver library accepts, and
 * nothing it would reject (which would otherwise surface only at run). */
static void test_resolver_forms(void **state)
{
	(void)state;
	static const char *const good[] = {"127.0.0.1", "127.0.0.1:53", "10.0.0.2:5353", "[::1]:53",
					   "[2001:db8::1]:5353"};
	static const char *const bad[] = {"[::1]",	     "::1",	   "127.0.0.1:+53",
					  "127.0.0.1: 53",   "127.0.0.1:", "127.0.0.1:0",
					  "127.0.0.1:65536", "[::1]:",	   "dns.example:53",
					  "127.0.0.1:53x",   "[::1]53",	   ""};
	struct al_error err;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		err = (struct al_error){0};
		if (al_policy_check_resolver(good[i], &err) != 0)
			fail_msg("\"%s\" refused: %s", good[i], err.msg);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err = (struct al_error){0};
		if (al_policy_check_resolver(bad[i], &err) != -EINVAL)
			fail_msg("\"%s\" accepted", bad[i]);
		assert_contains(err.msg, bad[i]);
	}
}

static void test_merge_vectors_and_empty(void **state)
{
	_cleanup_(al_policy_freep) struct al_policy *base = load_ok(merge_base_doc);
	_cleanup_(al_policy_freep) struct al_policy *empty = al_policy_new(NULL);
	_cleanup_(al_policy_freep) struct al_policy *over = al_policy_new(NULL);

	/* Merging an all-unset policy changes nothing. */
	al_policy_merge(base, empty);
	assert_string_equal(base->command[0], "from-file");
	assert_string_equal(base->hostname, "filehost");
	assert_int_equal(base->timeout_ms, 10000);
	assert_int_equal(base->scratch_exec, 1);
	assert_int_equal(base->landlock, AL_LANDLOCK_UNSET);
	assert_int_equal(base->n_mounts, 2);
	assert_int_equal(al_strv_len(base->env), 2);

	/* A command or system list replaces the whole vector. */
	al_strv_push(&over->command, "flag-cmd");
	al_strv_push(&over->command, "arg");
	al_strv_push(&over->system, "/usr");
	over->scratch_bytes = 2ULL << 20;
	over->workdir = xstrdup("/w");
	over->network_mode = xstrdup("none");
	al_policy_merge(base, over);
	assert_int_equal(al_strv_len(base->command), 2);
	assert_string_equal(base->command[0], "flag-cmd");
	assert_string_equal(base->command[1], "arg");
	assert_ptr_not_equal(base->command, over->command);
	assert_int_equal(al_strv_len(base->system), 1);
	assert_int_equal(base->scratch_bytes, 2ULL << 20);
	assert_string_equal(base->workdir, "/w");
	assert_string_equal(base->network_mode, "none");
}

/* Values from airlock's environment or an env file stay hidden through a
 * merge; a literal value set later shows again. */
static void test_env_hidden(void **state)
{
	_cleanup_(al_policy_freep) struct al_policy *file = al_policy_new("file");
	_cleanup_(al_policy_freep) struct al_policy *flags = al_policy_new("flags");

	(void)state;
	al_policy_set_env(file, "A", "from-file");
	al_policy_set_env(file, "B", "from-file");
	al_policy_set_env_hidden(flags, "A", "secret", true);
	al_policy_set_env_hidden(flags, "C", "secret", true);
	al_policy_set_env_hidden(flags, "C", "shown", false);
	al_policy_merge(file, flags);
	assert_true(al_policy_env_is_hidden(file->env_hidden, "A"));
	assert_false(al_policy_env_is_hidden(file->env_hidden, "B"));
	assert_false(al_policy_env_is_hidden(file->env_hidden, "C"));
	assert_string_equal(file->env[0], "A=secret");
	/* removal of the first, a middle and the last of several */
	_cleanup_(al_policy_freep) struct al_policy *many = al_policy_new("many");
	const char *names[] = {"P", "Q", "R", "S", "T"};
	for (size_t i = 0; i < 5; i++)
		al_policy_set_env_hidden(many, names[i], "v", true);
	al_policy_set_env_hidden(many, "P", "v", false);
	al_policy_set_env_hidden(many, "R", "v", false);
	al_policy_set_env_hidden(many, "T", "v", false);
	assert_int_equal(al_strv_len(many->env_hidden), 2);
	assert_true(al_policy_env_is_hidden(many->env_hidden, "Q"));
	assert_true(al_policy_env_is_hidden(many->env_hidden, "S"));
	assert_false(al_policy_env_is_hidden(many->env_hidden, "P"));
	assert_false(al_policy_env_is_hidden(many->env_hidden, "R"));
	/* and shown again when set literally over it */
	_cleanup_(al_policy_freep) struct al_policy *later = al_policy_new("later");
	al_policy_set_env_hidden(later, "A", "plain", false);
	al_policy_merge(file, later);
	assert_false(al_policy_env_is_hidden(file->env_hidden, "A"));
}

int main(void)
{
	/* clang-format off */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_full_document),
		cmocka_unit_test(test_env_hidden),
		cmocka_unit_test(test_minimal_document_is_all_unset),
		cmocka_unit_test(test_value_forms),
		cmocka_unit_test(test_schema_errors),
		cmocka_unit_test(test_unknown_keys),
		cmocka_unit_test(test_wrong_types),
		cmocka_unit_test(test_version),
		cmocka_unit_test(test_paths),
		cmocka_unit_test(test_command),
		cmocka_unit_test(test_env_hostname_network),
		cmocka_unit_test(test_syntax_errors),
		cmocka_unit_test(test_load_string_respects_len),
		cmocka_unit_test(test_load_file),
		cmocka_unit_test(test_set_env),
		cmocka_unit_test(test_add_mount_copies),
		cmocka_unit_test(test_merge_flags_override_file),
		cmocka_unit_test(test_merge_vectors_and_empty),
		cmocka_unit_test(test_resolver_forms),
	};

	/* clang-format on */

	return cmocka_run_group_tests(tests, NULL, NULL);
}
