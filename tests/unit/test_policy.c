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

static void test_copies(void **state)
{
	_cleanup_(al_policy_freep) struct al_policy *p =
	    load_ok("{\"version\":1,\"filesystem\":{"
		    "\"mounts\":[{\"host\":\"/srv/x\",\"path\":\"/input/x\",\"copy\":true}],"
		    "\"copy_in\":[{\"host\":\"/srv/p\",\"path\":\"/work/p\"}],"
		    "\"copy_out\":[{\"path\":\"/work/out\",\"host\":\"/srv/res\"}]},"
		    "\"limits\":{\"copy_out_size\":\"1M\",\"copy_out_files\":7}}");
	_cleanup_(al_policy_freep) struct al_policy *flags = al_policy_new(NULL);

	(void)state;
	assert_true(p->mounts[0].copy);
	assert_int_equal(p->n_copy_in, 1);
	assert_string_equal(p->copy_in[0].host, "/srv/p");
	assert_string_equal(p->copy_in[0].path, "/work/p");
	assert_contains(p->copy_in[0].origin, "filesystem.copy_in[0]");
	assert_int_equal(p->n_copy_out, 1);
	assert_string_equal(p->copy_out[0].host, "/srv/res");
	assert_string_equal(p->copy_out[0].path, "/work/out");
	assert_int_equal(p->copy_out_bytes, 1 << 20);
	assert_int_equal(p->copy_out_files, 7);
	/* Flags add copies to the file's and override its caps. */
	al_policy_add_copy(flags, true, "/srv/q", "/tmp/q", "--copy-in /srv/q:/tmp/q");
	flags->copy_out_files = 9;
	al_policy_merge(p, flags);
	assert_int_equal(p->n_copy_in, 2);
	assert_string_equal(p->copy_in[1].path, "/tmp/q");
	assert_int_equal(p->copy_out_files, 9);

	BAD("{\"version\":1,\"filesystem\":{\"mounts\":[{\"host\":\"/a\",\"mode\":\"rw\","
	    "\"copy\":true}]}}",
	    "filesystem.mounts[0].copy", "read-only");
	BAD("{\"version\":1,\"filesystem\":{\"copy_in\":[{\"host\":\"/a\"}]}}",
	    "filesystem.copy_in[0].path", "missing");
	BAD("{\"version\":1,\"filesystem\":{\"copy_out\":[{\"path\":\"/work\"}]}}",
	    "filesystem.copy_out[0].host", "missing");
	BAD("{\"version\":1,\"filesystem\":{\"copy_out\":{}}}", "filesystem.copy_out", "array");
	BAD("{\"version\":1,\"filesystem\":{\"copy_in\":[{\"host\":\"/a\",\"path\":\"/b\","
	    "\"mode\":\"ro\"}]}}",
	    "filesystem.copy_in[0]", "mode");
	BAD("{\"version\":1,\"limits\":{\"copy_out_files\":0}}", "limits.copy_out_files");
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

/* identity.host_ids: "per-run" or the first id of a fixed range that is
 * never root or the low ids, fits below 2^32 - 1, holds no id of the pool
 * and not the id of the sandbox's files in root-owned --rw dirs. */
static void test_identity(void **state)
{
	_cleanup_(al_policy_freep) struct al_policy *p =
	    load_ok("{\"version\":1,\"identity\":{\"host_ids\":\"per-run\"}}");
	assert_int_equal(p->host_ids, AL_HOST_IDS_PER_RUN);
	_cleanup_(al_policy_freep) struct al_policy *q =
	    load_ok("{\"version\":1,\"identity\":{\"host_ids\":1610612736}}");
	assert_int_equal(q->host_ids, AL_HOST_IDS_FIXED);
	assert_int_equal(q->host_ids_base, 1610612736u);
	BAD("{\"version\":1,\"identity\":{\"host_ids\":0}}", "identity.host_ids", "65536");
	BAD("{\"version\":1,\"identity\":{\"host_ids\":65535}}", "identity.host_ids");
	BAD("{\"version\":1,\"identity\":{\"host_ids\":4294901760}}", "identity.host_ids");
	BAD("{\"version\":1,\"identity\":{\"host_ids\":1879048192}}", "overlaps the pool");
	BAD("{\"version\":1,\"identity\":{\"host_ids\":1879000000}}", "overlaps the pool");
	BAD("{\"version\":1,\"identity\":{\"host_ids\":1000000000}}", "holds host id 1000001000");
	BAD("{\"version\":1,\"identity\":{\"host_ids\":\"auto\"}}", "expected \"per-run\"");
	BAD("{\"version\":1,\"identity\":{\"host_uid\":5}}", "unknown key");
	BAD("{\"version\":1,\"identity\":5}", "identity", "an object");
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
	/* The sandbox's loopback is its own: a rule for loopback, localhost
	 * or the unspecified address is refused, pointing to a host map. */
	BAD("{\"version\":1,\"network\":{\"allow\":[\"a.test\",\"127.0.0.1:8080\"]}}",
	    "p.json: network.allow[1]: allow rule \"127.0.0.1:8080\" is for loopback space",
	    "--map-host NAME=127.0.0.1 --allow NAME:8080", "network.hosts");
}

/* al_policy_check_allow_rule: what --allow and network.allow accept */
static void test_allow_rule_loopback(void **state)
{
	static const struct {
		const char *rule, *what, *hint;
	} refused[] = {
	    {"127.0.0.1:8080", "is for loopback space",
	     "--map-host NAME=127.0.0.1 --allow NAME:8080"},
	    {"127.0.0.5", "is for loopback space", "--map-host NAME=127.0.0.5 --allow NAME "},
	    {"127.0.0.0/8:*", "is for loopback space", "NAME=127.0.0.1 --allow NAME:*"},
	    {"[::1]:443", "is for loopback space", "--map-host NAME=::1 --allow NAME:443"},
	    {"::ffff:127.0.0.1", "is for loopback space", "NAME=127.0.0.1"},
	    {"localhost:3000", "is for localhost,", "NAME=127.0.0.1 --allow NAME:3000"},
	    {"LocalHost.", "is for localhost,", "NAME=127.0.0.1"},
	    {"api.localhost:80", "is for a name under localhost", "--allow NAME:80"},
	    {"*.localhost", "is for a name under localhost", "NAME=127.0.0.1"},
	    {"0.0.0.0:80", "is for the unspecified address", "NAME=127.0.0.1 --allow NAME:80"},
	    {"::", "is for the unspecified address", "NAME=::1"},
	};
	static const char *const accepted[] = {"0.0.0.0/0:*",	  "::/0",	    "126.0.0.0/7",
					       "notlocalhost:80", "localhost.test", "10.0.0.0/8",
					       "api.example.com"};
	struct al_error err = {0};

	for (size_t i = 0; i < AL_ARRAY_SIZE(refused); i++) {
		al_error_clear(&err);
		if (al_policy_check_allow_rule(refused[i].rule, &err) != -EINVAL)
			fail_msg("rule %s accepted", refused[i].rule);
		assert_contains(err.msg, refused[i].what);
		assert_contains(err.msg, refused[i].hint);
		assert_contains(err.msg, "the sandbox's own loopback, not the host's");
		assert_null(strchr(err.msg, '\n'));
	}
	for (size_t i = 0; i < AL_ARRAY_SIZE(accepted); i++)
		if (al_policy_check_allow_rule(accepted[i], &err) != 0)
			fail_msg("rule %s refused: %s", accepted[i], err.msg);
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

/* al_policy_load_string_all: every error, not only the first */

/* Load json as "p.json" into errs; the load must fail and leave *ret. */
static void load_all_bad(const char *json, struct al_errors *errs)
{
	struct al_policy *p = UNTOUCHED;
	int r = al_policy_load_string_all("p.json", json, strlen(json), &p, errs);

	if (r != -EINVAL)
		fail_msg("loading %s: %d, expected -EINVAL", json, r);
	assert_ptr_equal(p, UNTOUCHED);
}

static void expect_entry(const struct al_errors *errs, size_t i, const char *path,
			 const char *message_part)
{
	if (i >= errs->n)
		fail_msg("expected an error %zu at %s, got %zu errors", i, path, errs->n);
	const struct al_error_entry *e = &errs->v[i];
	assert_string_equal(e->where, "p.json");
	assert_string_equal(e->path, path);
	assert_contains(e->message, message_part);
	char *text = xasprintf("p.json: %s: %s", path, e->message);
	assert_string_equal(e->text, text);
	free(text);
	assert_int_equal(e->code, EINVAL);
}

/* clang-format off */
static const char many_errors_doc[] =
	"{\"version\": 1, \"bogus\": true,\n"
	" \"command\": [\"ok\", 7],\n"
	" \"filesystem\": {\"mounts\": [{\"host\": \"/srv/a\"}, {\"host\": \"/srv/b\", \"mode\": \"rx\"},\n"
	"                              {\"host\": \"rel/c\", \"exec\": 1}],\n"
	"                \"landlock\": \"maybe\"},\n"
	" \"env\": {\"GOOD\": \"1\", \"1BAD\": \"x\", \"N\": 2},\n"
	" \"limits\": {\"memory\": \"lots\", \"pids\": 0, \"timeout\": 30, \"tiemout\": 1},\n"
	" \"network\": {\"allow\": [\"api.example.com\", \"*\", 5, \"a.*.com\"],\n"
	"             \"hosts\": {\"x.test\": \"nope\", \"y.test\": \"10.0.0.1\"}}}\n";
/* clang-format on */

/* One document with errors in every section: each is reported, in the
 * order of the document's sections, naming its JSON path; the good values
 * around them do not stop the parse. */
static void test_all_errors_in_one_file(void **state)
{
	struct al_errors errs = {0};

	load_all_bad(many_errors_doc, &errs);
	expect_entry(&errs, 0, "(top level)", "unknown key \"bogus\"");
	expect_entry(&errs, 1, "command[1]", "expected a string, got an integer");
	expect_entry(&errs, 2, "filesystem.mounts[1].mode", "expected \"ro\" or \"rw\"");
	expect_entry(&errs, 3, "filesystem.mounts[2].host", "clean absolute path");
	expect_entry(&errs, 4, "filesystem.mounts[2].exec", "expected true or false");
	expect_entry(&errs, 5, "filesystem.landlock", "\"maybe\"");
	expect_entry(&errs, 6, "env.1BAD", "not a valid variable name");
	expect_entry(&errs, 7, "env.N", "expected a string");
	expect_entry(&errs, 8, "limits", "unknown key \"tiemout\"");
	expect_entry(&errs, 9, "limits.memory", "bad size \"lots\"");
	expect_entry(&errs, 10, "limits.pids", "expected a whole number");
	expect_entry(&errs, 11, "network.allow[1]", "'*' alone would allow every host");
	expect_entry(&errs, 12, "network.allow[2]", "expected a string");
	expect_entry(&errs, 13, "network.allow[3]", "whole first label");
	expect_entry(&errs, 14, "network.hosts.x.test", "\"nope\" is not an IPv4 or IPv6 address");
	assert_int_equal(errs.n, 15);
	assert_int_equal(errs.omitted, 0);
	al_errors_clear(&errs);

	/* The one-error form reports the first of them. */
	BAD(many_errors_doc, "p.json: (top level): unknown key \"bogus\"");
}

/* Where going on would mean nothing, the parse stops at that one error. */
static void test_errors_that_stop(void **state)
{
	static const char *const stop[] = {
	    "{\"version\": 1, \"limits\": {\"memory\": \"x\",}}",  /* not JSON */
	    "[{\"version\": 1}, {\"limits\": 3}]",		   /* not an object */
	    "{\"version\": 2, \"limits\": {\"memory\": \"x\"}}",   /* another version */
	    "{\"version\": 1, \"limits\": [{\"memory\": \"x\"}]}", /* a section of the wrong type */
	};
	struct al_errors errs = {0};

	for (size_t i = 0; i < AL_ARRAY_SIZE(stop); i++) {
		load_all_bad(stop[i], &errs);
		if (errs.n != 1)
			fail_msg("%s: expected 1 error, got %zu (first: %s)", stop[i], errs.n,
				 errs.v[0].text);
		al_errors_clear(&errs);
	}
	load_all_bad(stop[0], &errs);
	assert_int_equal(errs.v[0].line, 1);
	assert_true(errs.v[0].column > 0);
	assert_null(errs.v[0].path);
	assert_contains(errs.v[0].text, "p.json:1:");
	al_errors_clear(&errs);

	/* A missing or mistyped version is reported, and the rest is read as
	 * version 1. */
	load_all_bad("{\"limits\": {\"memory\": \"x\"}}", &errs);
	assert_int_equal(errs.n, 2);
	expect_entry(&errs, 0, "version", "missing");
	expect_entry(&errs, 1, "limits.memory", "bad size");
	al_errors_clear(&errs);
	load_all_bad("{\"version\": \"1\", \"hostname\": \"a b\"}", &errs);
	assert_int_equal(errs.n, 2);
	expect_entry(&errs, 0, "version", "not a string");
	expect_entry(&errs, 1, "hostname", "not a valid hostname");
	al_errors_clear(&errs);
}

/* A hostile document with thousands of errors: 100 are kept, the rest
 * counted, and every kept one is a line of its own. */
static void test_errors_are_capped(void **state)
{
	struct al_errors errs = {0};
	size_t n = 5000, len = 0;
	char *doc = xmalloc(n * 32 + 64);

	len += (size_t)sprintf(doc, "{\"version\": 1, \"env\": {");
	for (size_t i = 0; i < n; i++)
		len += (size_t)sprintf(doc + len, "%s\"%zu\\nX\": \"v\"", i ? ", " : "", i);
	sprintf(doc + len, "}}");
	load_all_bad(doc, &errs);
	assert_int_equal(errs.n, AL_ERRORS_MAX);
	assert_int_equal(errs.omitted, n - AL_ERRORS_MAX);
	for (size_t i = 0; i < errs.n; i++) {
		assert_null(strchr(errs.v[i].text, '\n'));
		assert_contains(errs.v[i].text, "not a valid variable name");
	}
	assert_contains(errs.v[0].path, "env.0?X");
	al_errors_clear(&errs);
	free(doc);
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
		cmocka_unit_test(test_copies),
		cmocka_unit_test(test_command),
		cmocka_unit_test(test_identity),
		cmocka_unit_test(test_env_hostname_network),
		cmocka_unit_test(test_allow_rule_loopback),
		cmocka_unit_test(test_syntax_errors),
		cmocka_unit_test(test_load_string_respects_len),
		cmocka_unit_test(test_load_file),
		cmocka_unit_test(test_all_errors_in_one_file),
		cmocka_unit_test(test_errors_that_stop),
		cmocka_unit_test(test_errors_are_capped),
		cmocka_unit_test(test_set_env),
		cmocka_unit_test(test_add_mount_copies),
		cmocka_unit_test(test_merge_flags_override_file),
		cmocka_unit_test(test_merge_vectors_and_empty),
		cmocka_unit_test(test_resolver_forms),
	};

	/* clang-format on */

	return cmocka_run_group_tests(tests, NULL, NULL);
}
