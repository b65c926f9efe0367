/* oci/spec.h: config.json → struct al_oci_config. The samples in
 * data/oci/ were written by the tools on this machine (podman 4.3's bundle
 * for `podman create --memory 64m --pids-limit 100 ...` after `podman
 * init`, with its storage path renamed; `runc spec`; `ctr oci spec`); the
 * error cases each check the JSON path the message names. The first
 * argument is the data/oci directory. */
#include "unit.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "core/cleanup.h"
#include "core/error.h"
#include "oci/spec.h"

static const char *data_dir;

static char *read_sample(const char *name, size_t *len)
{
	char path[512];
	FILE *f;
	char *buf;
	long n;

	snprintf(path, sizeof(path), "%s/%s", data_dir, name);
	f = fopen(path, "r");
	if (!f)
		fail_msg("cannot open %s", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static struct al_oci_config *parse_ok_len(const char *json, size_t len)
{
	struct al_oci_config *c = NULL;
	struct al_errors errs = {0};
	int r = al_oci_config_parse(json, len, &c, &errs);

	if (r != 0)
		fail_msg("parse failed (%d): %s%s", r, errs.n ? errs.v[0].text : "(no error)",
			 errs.n > 1 ? " ..." : "");
	assert_int_equal(al_errors_count(&errs), 0);
	assert_non_null(c);
	return c;
}

static struct al_oci_config *parse_ok(const char *json)
{
	return parse_ok_len(json, strlen(json));
}

/* Written only on success. */
static struct al_oci_config *const UNTOUCHED = (struct al_oci_config *)&UNTOUCHED;

/* Parse json, expect -EINVAL, nothing stored, and among the errors one
 * whose text contains each string of want[] (NULL-terminated, each an
 * entry's whole "PATH: MESSAGE" or a part of it). Returns the count. */
static size_t parse_bad_len(const char *json, size_t len, const char *const *want)
{
	struct al_oci_config *c = UNTOUCHED;
	struct al_errors errs = {0};
	int r = al_oci_config_parse(json, len, &c, &errs);
	size_t n;

	if (r == 0)
		fail_msg("parse of %.200s succeeded, expected \"%s\"", json, want[0]);
	assert_int_equal(r, -EINVAL);
	assert_ptr_equal(c, UNTOUCHED);
	for (size_t w = 0; want[w]; w++) {
		size_t i;

		for (i = 0; i < errs.n; i++)
			if (strstr(errs.v[i].text, want[w]))
				break;
		if (i == errs.n)
			fail_msg("no error contains \"%s\"; first: %s", want[w],
				 errs.n ? errs.v[0].text : "(none)");
	}
	n = al_errors_count(&errs);
	al_errors_clear(&errs);
	return n;
}

#define BAD(json, ...)	parse_bad_len(json, strlen(json), (const char *const[]){__VA_ARGS__, NULL})
#define ERRS(json, ...) BAD(json, __VA_ARGS__)

/* A minimal valid document with the process fields spliced in. */
#define DOC(process, rest)                                                                         \
	"{\"ociVersion\": \"1.1.0\", \"root\": {\"path\": \"rootfs\"},"                            \
	"\"process\": {\"user\": {\"uid\": 0, \"gid\": 0}, \"args\": [\"sh\"], \"cwd\": "          \
	"\"/\"" process "}" rest "}"

static bool strv_has(char **v, const char *s)
{
	for (size_t i = 0; v && v[i]; i++)
		if (strcmp(v[i], s) == 0)
			return true;
	return false;
}

static const char *pair(char **kv, const char *key)
{
	for (size_t i = 0; kv && kv[i]; i += 2)
		if (strcmp(kv[i], key) == 0)
			return kv[i + 1];
	return NULL;
}

static void test_podman(void **state)
{
	size_t len;
	_cleanup_free_ char *json = read_sample("podman-create.json", &len);
	_cleanup_(al_oci_config_freep) struct al_oci_config *c = parse_ok_len(json, len);

	assert_string_equal(c->oci_version, "1.0.2-dev");
	assert_true(c->has_process);
	assert_string_equal(c->args[0], "/bin/sh");
	assert_string_equal(c->args[2], "echo hi");
	assert_null(c->args[3]);
	assert_true(strv_has(c->env, "FOO=bar"));
	assert_string_equal(c->cwd, "/");
	assert_string_equal(c->hostname, "box");
	assert_int_equal(c->uid, 0);
	assert_true(c->has_memory_limit);
	assert_int_equal(c->memory_limit, 64 << 20);
	assert_true(c->has_memory_swap);
	assert_true(c->has_pids_limit);
	assert_int_equal(c->pids_limit, 100);
	assert_int_equal(c->n_rlimits, 2);
	assert_int_equal(c->rlimits[0].resource, RLIMIT_NOFILE);
	assert_int_equal(c->rlimits[1].resource, RLIMIT_NPROC);
	assert_int_equal(c->rlimits[1].soft, 1024);
	assert_string_equal(pair(c->annotations, "io.airlock.network.allow"), "api.example");
	assert_true(c->has_seccomp);
	assert_string_equal(c->seccomp_default_action, "SCMP_ACT_ERRNO");
	assert_true(c->n_seccomp_syscalls > 0);
	assert_int_equal(c->n_namespaces, 5);
	assert_true(c->cgroups_path && strncmp(c->cgroups_path, "/libpod_parent/", 15) == 0);
	assert_int_equal(c->n_mounts, 10);
	assert_string_equal(c->mounts[0].destination, "/proc");
	assert_true(c->n_device_rules > 0);
	assert_false(c->device_rules[0].allow);
	assert_string_equal(c->device_rules[0].access, "rwm");
	assert_true(strv_has(c->masked_paths, "/proc/kcore"));
	assert_true(strv_has(c->caps_bounding, "CAP_CHOWN"));
	assert_null(c->present_unmodelled);
}

static void test_runc_spec(void **state)
{
	size_t len;
	_cleanup_free_ char *json = read_sample("runc-spec.json", &len);
	_cleanup_(al_oci_config_freep) struct al_oci_config *c = parse_ok_len(json, len);

	assert_true(c->terminal);
	assert_string_equal(c->args[0], "sh");
	assert_string_equal(c->root_path, "rootfs");
	assert_true(c->root_readonly);
	assert_string_equal(c->hostname, "runc");
	assert_int_equal(c->n_namespaces, 5);
	assert_int_equal(c->namespaces[0].type, CLONE_NEWPID);
	assert_null(c->namespaces[0].path);
	assert_int_equal(c->n_mounts, 7);
	assert_true(c->no_new_privileges);
	assert_int_equal(c->n_rlimits, 1);
	assert_int_equal(c->rlimits[0].hard, 1024);
	assert_false(c->has_seccomp);
	assert_true(strv_has(c->readonly_paths, "/proc/sys"));
}

/* ctr's default spec is a template without args: refused as runc refuses
 * it; with args it parses. */
static void test_ctr_spec(void **state)
{
	size_t len;
	_cleanup_free_ char *json = read_sample("ctr-spec.json", &len);
	char *with_args, *at;

	parse_bad_len(json, len, (const char *const[]){"process.args: missing (required)", NULL});
	at = strstr(json, "\"cwd\"");
	assert_non_null(at);
	assert_true(
	    asprintf(&with_args, "%.*s\"args\": [\"/pause\"], %s", (int)(at - json), json, at) > 0);
	struct al_oci_config *c = parse_ok(with_args);
	assert_string_equal(c->args[0], "/pause");
	assert_string_equal(c->cgroups_path, "/default");
	assert_int_equal(c->namespaces[4].type, CLONE_NEWNET);
	al_oci_config_free(c);
	free(with_args);
}

/* Fields of 1.1 and later, uint64 values past int64, and the ones only
 * recorded as present. */
static const char full_doc[] =
    "{\"ociVersion\": \"1.1.0\", \"root\": {\"path\": \"/srv/root\", \"readonly\": false},"
    "\"domainname\": \"example\","
    "\"mounts\": [{\"destination\": \"data\", \"type\": \"bind\", \"source\": \"/d\","
    "  \"options\": [\"rbind\", \"idmap\"],"
    "  \"uidMappings\": [{\"containerID\": 0, \"hostID\": 100000, \"size\": 65536}],"
    "  \"gidMappings\": [{\"containerID\": 0, \"hostID\": 100000, \"size\": 65536}]}],"
    "\"process\": {\"terminal\": true, \"consoleSize\": {\"height\": 25, \"width\": 80},"
    "  \"user\": {\"uid\": 4294967295, \"gid\": 5, \"umask\": 18, \"additionalGids\": [1, 2]},"
    "  \"args\": [\"/bin/true\"], \"env\": [\"A=\", \"B=c=d\"], \"cwd\": \"/w\","
    "  \"rlimits\": [{\"type\": \"RLIMIT_MEMLOCK\", \"soft\": 18446744073709551615,"
    "                 \"hard\": 18446744073709551615}],"
    "  \"oomScoreAdj\": -1000, \"ioPriority\": {\"class\": \"IOPRIO_CLASS_IDLE\", \"priority\": 7},"
    "  \"scheduler\": {\"policy\": \"SCHED_OTHER\"}, \"unknownField\": {\"x\": 1}},"
    "\"hooks\": {\"createRuntime\": [{\"path\": \"/h\", \"args\": [\"h\", \"1\"], \"timeout\": 5}],"
    "  \"poststop\": [{\"path\": \"/p\"}]},"
    "\"annotations\": {\"b\": \"2\", \"a\": \"1\"},"
    "\"linux\": {\"namespaces\": [{\"type\": \"time\"}, {\"type\": \"network\", \"path\": "
    "\"/run/netns/x\"}],"
    "  \"uidMappings\": [{\"containerID\": 0, \"hostID\": 1000, \"size\": 1},"
    "                   {\"containerID\": 1, \"hostID\": 200000, \"size\": 65535}],"
    "  \"sysctl\": {\"net.ipv4.ip_forward\": \"1\"},"
    "  \"resources\": {\"memory\": {\"limit\": -1, \"swappiness\": 18446744073709551615,"
    "      \"checkBeforeUpdate\": true},"
    "    \"cpu\": {\"shares\": 18446744073709551615, \"quota\": -1, \"burst\": 10, \"idle\": 1,"
    "      \"cpus\": \"0-1\"},"
    "    \"unified\": {\"memory.high\": \"max\"}, \"blockIO\": {\"weight\": 10},"
    "    \"devices\": [{\"allow\": true, \"type\": \"c\", \"major\": 1, \"minor\": 3, \"access\": "
    "\"rw\"}]},"
    "  \"devices\": [{\"path\": \"/dev/fuse\", \"type\": \"c\", \"major\": 10, \"minor\": 229,"
    "      \"fileMode\": 438}, {\"path\": \"/dev/fifo\", \"type\": \"p\"}],"
    "  \"seccomp\": {\"defaultAction\": \"SCMP_ACT_ERRNO\", \"defaultErrnoRet\": 1,"
    "    \"architectures\": [\"SCMP_ARCH_X86_64\"], \"flags\": [\"SECCOMP_FILTER_FLAG_LOG\"],"
    "    \"listenerPath\": \"/run/l.sock\","
    "    \"syscalls\": [{\"names\": [\"read\", \"write\"], \"action\": \"SCMP_ACT_ALLOW\"},"
    "      {\"names\": [\"ioctl\"], \"action\": \"SCMP_ACT_NOTIFY\", \"args\": [{\"index\": 1,"
    "       \"value\": 18446744073709551615, \"valueTwo\": 0, \"op\": \"SCMP_CMP_MASKED_EQ\"}]}]},"
    "  \"rootfsPropagation\": \"rslave\", \"mountLabel\": \"\","
    "  \"personality\": {\"domain\": \"LINUX32\"}, \"intelRdt\": {\"closID\": \"x\"},"
    "  \"timeOffsets\": {\"monotonic\": {\"secs\": 1}}},"
    "\"windows\": {\"layerFolders\": []}, \"vm\": null}";

static void test_full(void **state)
{
	_cleanup_(al_oci_config_freep) struct al_oci_config *c = parse_ok(full_doc);

	assert_string_equal(c->mounts[0].destination, "/data"); /* relative read from "/" */
	assert_int_equal(c->mounts[0].n_uid_maps, 1);
	assert_int_equal(c->mounts[0].uid_maps[0].host_id, 100000);
	assert_true(c->has_console_size);
	assert_int_equal(c->console_rows, 25);
	assert_int_equal(c->uid, UINT32_MAX);
	assert_true(c->has_umask);
	assert_int_equal(c->umask, 022);
	assert_int_equal(c->n_additional_gids, 2);
	assert_int_equal(c->rlimits[0].soft, UINT64_MAX);
	assert_int_equal(c->rlimits[0].resource, RLIMIT_MEMLOCK);
	assert_int_equal(c->oom_score_adj, -1000);
	assert_string_equal(c->io_priority_class, "IOPRIO_CLASS_IDLE");
	assert_int_equal(c->io_priority, 7);
	assert_int_equal(c->n_hooks[AL_OCI_HOOK_CREATE_RUNTIME], 1);
	assert_int_equal(c->hooks[AL_OCI_HOOK_CREATE_RUNTIME][0].timeout, 5);
	assert_int_equal(c->hooks[AL_OCI_HOOK_POSTSTOP][0].timeout, -1);
	assert_int_equal(c->n_hooks[AL_OCI_HOOK_PRESTART], 0);
	assert_string_equal(c->annotations[0], "b"); /* the document's order */
	assert_string_equal(c->annotations[3], "1");
	assert_null(c->annotations[4]);
	assert_int_equal(c->namespaces[0].type, 0x80); /* CLONE_NEWTIME */
	assert_string_equal(c->namespaces[1].path, "/run/netns/x");
	assert_int_equal(c->n_uid_maps, 2);
	assert_string_equal(pair(c->sysctl, "net.ipv4.ip_forward"), "1");
	assert_int_equal(c->memory_limit, -1);
	assert_false(c->has_memory_swappiness); /* 2^64 - 1: Docker's unset */
	assert_true(c->memory_check_before_update);
	assert_int_equal(c->cpu_shares, UINT64_MAX);
	assert_int_equal(c->cpu_quota, -1);
	assert_int_equal(c->cpu_idle, 1);
	assert_string_equal(c->cpu_cpus, "0-1");
	assert_string_equal(pair(c->unified, "memory.high"), "max");
	assert_int_equal(c->device_rules[0].major, 1);
	assert_int_equal(c->devices[0].mode, 0666);
	assert_int_equal(c->devices[1].major, 0);
	assert_int_equal(c->seccomp_default_errno, 1);
	assert_int_equal(c->seccomp_syscalls[1].args[0].value, UINT64_MAX);
	assert_int_equal(c->seccomp_syscalls[1].args[0].index, 1);
	assert_string_equal(c->rootfs_propagation, "rslave");
	assert_true(c->has_mount_label);
	assert_true(c->has_block_io && c->has_personality && c->has_intel_rdt &&
		    c->has_time_offsets);
	for (const char *const *p =
		 (const char *const[]){"process.scheduler", "linux.resources.blockIO",
				       "linux.personality", "linux.intelRdt", "linux.timeOffsets",
				       "windows", NULL};
	     *p; p++)
		if (!al_oci_config_has_unmodelled(c, *p))
			fail_msg("%s not in present_unmodelled", *p);
	assert_false(al_oci_config_has_unmodelled(c, "vm")); /* null is absent */
	assert_false(al_oci_config_has_unmodelled(c, "process.unknownField"));
}

/* No process: allowed (create needs none; start does). */
static void test_no_process(void **state)
{
	_cleanup_(al_oci_config_freep) struct al_oci_config *c =
	    parse_ok("{\"ociVersion\": \"1.0.0\", \"root\": {\"path\": \"r\"}}");

	assert_false(c->has_process);
	assert_null(c->args);
	assert_false(c->has_linux);
}

static void test_not_a_config(void **state)
{
	static const char big_head[] = "{\"ociVersion\": \"1.0.0\", \"x\": \"";
	size_t big = AL_OCI_MAX_CONFIG + 1;
	char *json = malloc(big);

	assert_int_equal(BAD("{\"ociVersion\": ", "config.json:1:"), 1);
	assert_int_equal(BAD("[1, 2]", "config.json: must be a JSON object, not an array"), 1);
	assert_int_equal(BAD("\"x\"", "config.json:1:3: '[' or '{' expected"), 1);
	/* duplicate keys are refused (Go would keep the last one silently) */
	assert_int_equal(
	    BAD("{\"ociVersion\": \"1.0.0\", \"ociVersion\": \"1.1.0\"}", "duplicate object key"),
	    1);
	memset(json, ' ', big);
	memcpy(json, big_head, sizeof(big_head) - 1);
	assert_int_equal(
	    parse_bad_len(json, big,
			  (const char *const[]){"config.json: 4194305 bytes, more than "
						"the 4194304 allowed",
						NULL}),
	    1);
	free(json);
}

static void test_required(void **state)
{
	BAD("{\"root\": {\"path\": \"r\"}}", "ociVersion: missing (required)");
	BAD("{\"ociVersion\": \"2.0.0\", \"root\": {\"path\": \"r\"}}",
	    "ociVersion: \"2.0.0\" is not a 1.x version");
	BAD("{\"ociVersion\": 1, \"root\": {\"path\": \"r\"}}",
	    "ociVersion: must be a string, not an integer");
	BAD("{\"ociVersion\": \"1.0.0\"}", "root: missing (required)");
	BAD("{\"ociVersion\": \"1.0.0\", \"root\": {\"path\": \"\"}}",
	    "root.path: must not be empty");
	BAD("{\"ociVersion\": \"1.0.0\", \"root\": {\"path\": \"r\", \"readonly\": 1}}",
	    "root.readonly: must be true or false, not an integer");
	BAD("{\"ociVersion\": \"1.0.0\", \"root\": {\"path\": \"r\"}, \"process\": {\"cwd\": "
	    "\"/\"}}",
	    "process.user: missing (required)", "process.args: missing (required)");
	BAD("{\"ociVersion\": \"1.0.0\", \"root\": {\"path\": \"r\"}, \"hostname\": "
	    "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}",
	    "hostname: is longer than 64 bytes");
}

static void test_process_errors(void **state)
{
	BAD("{\"ociVersion\": \"1.1.0\", \"root\": {\"path\": \"r\"}, \"process\": {\"user\": "
	    "{\"uid\": 0, \"gid\": 0}, \"args\": [], \"cwd\": \"/\"}}",
	    "process.args: must not be empty");
	BAD(DOC(", \"cwd\": \"tmp\"", ""), "duplicate object key");
	BAD("{\"ociVersion\": \"1.1.0\", \"root\": {\"path\": \"r\"}, \"process\": {\"user\": "
	    "{\"uid\": 0, \"gid\": 0}, \"args\": [\"sh\"], \"cwd\": \"tmp\"}}",
	    "process.cwd: must be an absolute path");
	BAD("{\"ociVersion\": \"1.1.0\", \"root\": {\"path\": \"r\"}, \"process\": {\"user\": "
	    "{\"uid\": 4294967296, \"gid\": -1}, \"args\": [\"sh\"], \"cwd\": \"/\"}}",
	    "process.user.uid: 4294967296 is out of range (0 to 4294967295)",
	    "process.user.gid: -1 is out of range (0 to 4294967295)");
	BAD("{\"ociVersion\": \"1.1.0\", \"root\": {\"path\": \"r\"}, \"process\": {\"user\": "
	    "{\"uid\": \"0\", \"gid\": 0.5}, \"args\": [\"sh\"], \"cwd\": \"/\"}}",
	    "process.user.uid: must be an integer, not a string",
	    "process.user.gid: must be an integer, not a fraction");
	BAD(DOC(", \"env\": [\"A=1\", \"NOEQUALS\", \"=x\"]", ""),
	    "process.env[1]: must be NAME=value, has no '='",
	    "process.env[2]: has an empty name before '='");
	BAD(DOC(", \"env\": [\"A=1\", 7]", ""), "process.env[1]: must be a string, not an integer");
	BAD(DOC(", \"rlimits\": [{\"type\": \"RLIMIT_NOFILE\", \"soft\": 1, \"hard\": 1},"
		"{\"type\": \"RLIMIT_FOO\", \"soft\": 1, \"hard\": 1},"
		"{\"type\": \"RLIMIT_NOFILE\", \"soft\": 1, \"hard\": 1},"
		"{\"type\": \"RLIMIT_CORE\", \"soft\": 2, \"hard\": 1},"
		"{\"type\": \"RLIMIT_AS\", \"soft\": 2}]",
		""),
	    "process.rlimits[1].type: unknown rlimit \"RLIMIT_FOO\"",
	    "process.rlimits[2].type: RLIMIT_NOFILE is also process.rlimits[0]",
	    "process.rlimits[3].soft: 2 is above hard (1)",
	    "process.rlimits[4].hard: missing (required)");
	BAD(DOC(", \"rlimits\": [{\"type\": \"RLIMIT_AS\", \"soft\": 18446744073709551616, "
		"\"hard\": "
		"-9223372036854775809}]",
		""),
	    "process.rlimits[0].soft: 18446744073709551616 is out of range",
	    "process.rlimits[0].hard: -9223372036854775809 is out of range");
	BAD(DOC(", \"oomScoreAdj\": 1001, \"consoleSize\": {\"height\": 70000}", ""),
	    "process.oomScoreAdj: 1001 is out of range (-1000 to 1000)",
	    "process.consoleSize.width: missing (required)");
	BAD(DOC(", \"ioPriority\": {\"class\": \"IOPRIO_CLASS_X\", \"priority\": 0}", ""),
	    "process.ioPriority.class: unknown class \"IOPRIO_CLASS_X\"");
	BAD(DOC(", \"capabilities\": [\"CAP_CHOWN\"]", ""),
	    "process.capabilities: must be an object, not an array");
}

static void test_mount_errors(void **state)
{
	BAD(DOC("", ", \"mounts\": [{\"destination\": \"/a\"}, {\"type\": \"tmpfs\"},"
		    "{\"destination\": \"\"}, {\"destination\": \"/b\", \"options\": \"ro\"}]"),
	    "mounts[1].destination: missing (required)", "mounts[2].destination: must not be empty",
	    "mounts[3].options: must be an array, not a string");
	BAD(DOC("", ", \"mounts\": [{\"destination\": \"/a\", \"uidMappings\": "
		    "[{\"containerID\": 0, \"hostID\": 1, \"size\": 1}]}]"),
	    "mounts[0].gidMappings: missing: uidMappings and gidMappings go together");
}

static void test_linux_errors(void **state)
{
	BAD(DOC("",
		", \"linux\": {\"namespaces\": [{\"type\": \"pid\"}, {\"type\": \"pidd\"},"
		"{\"type\": \"pid\"}, {\"type\": \"net\"}, {\"type\": \"uts\", \"path\": \"x\"}]}"),
	    "linux.namespaces[1].type: unknown namespace type \"pidd\"",
	    "linux.namespaces[2].type: \"pid\" is also linux.namespaces[0]",
	    "linux.namespaces[3].type: unknown namespace type \"net\"",
	    "linux.namespaces[4].path: must be an absolute path");
	BAD(DOC("",
		", \"linux\": {\"uidMappings\": [{\"containerID\": 0, \"hostID\": 0, \"size\": 0},"
		"{\"containerID\": 4294967295, \"hostID\": 0, \"size\": 2},"
		"{\"containerID\": 0, \"hostID\": 10, \"size\": 10},"
		"{\"containerID\": 5, \"hostID\": 100, \"size\": 10},"
		"{\"containerID\": 50, \"hostID\": 100}]}"),
	    "linux.uidMappings[0].size: must be at least 1",
	    "linux.uidMappings[1]: the range passes the last id",
	    "linux.uidMappings[3]: overlaps linux.uidMappings[2]",
	    "linux.uidMappings[4].size: missing (required)");
	BAD(DOC("", ", \"linux\": {\"sysctl\": {\"net.core.somaxconn\": 256}}"),
	    "linux.sysctl[\"net.core.somaxconn\"]: must be a string, not an integer");
	BAD(DOC("", ", \"annotations\": {\"io.airlock.profile\": true, \"\": \"x\"}"),
	    "annotations[\"io.airlock.profile\"]: must be a string, not a boolean",
	    "annotations: has an empty key");
	BAD(DOC("", ", \"linux\": {\"resources\": {\"memory\": {\"limit\": -2, \"swap\": \"1G\","
		    "\"swappiness\": 101}, \"cpu\": {\"quota\": -5, \"idle\": 2},"
		    "\"devices\": [{\"allow\": true, \"type\": \"x\", \"access\": \"rwx\"}, {}]}}"),
	    "linux.resources.memory.limit: -2 is out of range (-1 to 9223372036854775807)",
	    "linux.resources.memory.swap: must be an integer, not a string",
	    "linux.resources.memory.swappiness: 101 is out of range (0 to 100)",
	    "linux.resources.cpu.quota: -5 is out of range",
	    "linux.resources.cpu.idle: 2 is out of range (0 to 1)",
	    "linux.resources.devices[0].type: must be \"a\", \"b\" or \"c\"",
	    "linux.resources.devices[0].access: must be letters of \"rwm\"",
	    "linux.resources.devices[1].allow: missing (required)");
	BAD(DOC("",
		", \"linux\": {\"devices\": [{\"path\": \"dev/x\", \"type\": \"c\", \"major\": 1},"
		"{\"path\": \"/dev/y\", \"type\": \"q\"}], \"maskedPaths\": [\"proc/kcore\"]}"),
	    "linux.devices[0].path: must be an absolute path",
	    "linux.devices[0].minor: missing (required for type \"c\")",
	    "linux.devices[1].type: must be \"c\", \"b\", \"u\" or \"p\"",
	    "linux.maskedPaths[0]: must be an absolute path");
	BAD(DOC("", ", \"linux\": {\"rootfsPropagation\": \"sideways\", \"personality\": {}}"),
	    "linux.rootfsPropagation: unknown propagation \"sideways\"",
	    "linux.personality.domain: missing (required)");
}

static void test_seccomp_errors(void **state)
{
	BAD(DOC("",
		", \"linux\": {\"seccomp\": {\"defaultAction\": \"SCMP_ACT_DENY\","
		"\"architectures\": [\"SCMP_ARCH_Z80\"], \"flags\": [\"SECCOMP_FILTER_FLAG_X\"],"
		"\"syscalls\": [{\"names\": [], \"action\": \"SCMP_ACT_ALLOW\"},"
		"{\"names\": [\"read\"], \"action\": \"ALLOW\"},"
		"{\"names\": [\"ioctl\"], \"action\": \"SCMP_ACT_NOTIFY\", \"args\": [{\"index\": "
		"6,"
		"\"value\": 1, \"op\": \"SCMP_CMP_EQ\"}, {\"index\": 0, \"value\": 1, \"op\": "
		"\"EQ\"}]}]}}"),
	    "linux.seccomp.defaultAction: unknown action \"SCMP_ACT_DENY\"",
	    "linux.seccomp.architectures[0]: unknown architecture \"SCMP_ARCH_Z80\"",
	    "linux.seccomp.flags[0]: unknown flag \"SECCOMP_FILTER_FLAG_X\"",
	    "linux.seccomp.syscalls[0].names: must not be empty",
	    "linux.seccomp.syscalls[1].action: unknown action \"ALLOW\"",
	    "linux.seccomp.syscalls[2].args[0].index: 6 is out of range (0 to 5)",
	    "linux.seccomp.syscalls[2].args[1].op: unknown operator \"EQ\"",
	    "linux.seccomp.listenerPath: missing (required when a rule's action is "
	    "SCMP_ACT_NOTIFY)");
	BAD(DOC("", ", \"linux\": {\"seccomp\": {}}"), "linux.seccomp.defaultAction: missing");
}

static void test_hook_errors(void **state)
{
	BAD(DOC("",
		", \"hooks\": {\"prestart\": [{\"path\": \"hook\", \"timeout\": 0}],"
		"\"poststop\": [{\"args\": [\"x\"], \"env\": [\"X\"]}], \"startContainer\": {}}"),
	    "hooks.prestart[0].path: must be an absolute path",
	    "hooks.prestart[0].timeout: 0 is out of range (1 to 2147483647)",
	    "hooks.poststop[0].path: missing (required)",
	    "hooks.poststop[0].env[0]: must be NAME=value",
	    "hooks.startContainer: must be an array, not an object");
}

/* Strings with NUL refused (also a key); caps on strings and arrays. */
static void test_bounds(void **state)
{
	/* static: gcc cannot see that a failed malloc's fail_msg returns no more */
	static char big[AL_OCI_MAX_STRING + 200], many[(AL_OCI_MAX_MOUNTS + 1) * 24 + 200];
	size_t n = AL_OCI_MAX_STRING + 1, mounts = AL_OCI_MAX_MOUNTS + 1;
	char *o;

	BAD(DOC(", \"selinuxLabel\": \"a\\u0000b\"", ""),
	    "process.selinuxLabel: contains a NUL byte");
	BAD(DOC("", ", \"annotations\": {\"a\\u0000b\": \"x\"}"),
	    "NUL byte in object key not supported");
	/* A NUL anywhere turns off the big-integer markers: a string cannot
	 * pass for a number. */
	BAD(DOC(", \"rlimits\": [{\"type\": \"RLIMIT_AS\", \"soft\": \"\\u0000N1\", \"hard\": 1}]",
		""),
	    "process.rlimits[0].soft: must be an integer, not a string");

	o = big + sprintf(big, "{\"ociVersion\": \"1.0.0\", \"root\": {\"path\": \"r\"}, "
			       "\"hostname\": \"");
	memset(o, 'h', n);
	strcpy(o + n, "\"}");
	parse_bad_len(big, strlen(big),
		      (const char *const[]){"hostname: is 1048577 bytes long, more than the "
					    "1048576 allowed",
					    NULL});

	o = many + sprintf(many, "{\"ociVersion\": \"1.0.0\", \"root\": {\"path\": \"r\"}, "
				 "\"mounts\": [");
	for (size_t i = 0; i < mounts; i++)
		o += sprintf(o, "%s{\"destination\": \"/m\"}", i ? "," : "");
	strcpy(o, "]}");
	parse_bad_len(
	    many, strlen(many),
	    (const char *const[]){"mounts: has 4097 entries, more than the 4096 allowed", NULL});
}

/* Every error is reported, not only the first. */
static void test_all_errors(void **state)
{
	size_t n = BAD("{\"ociVersion\": \"0.9\", \"root\": {\"path\": 5}, \"process\": {\"user\": "
		       "{\"uid\": 0, \"gid\": 0}, \"args\": [\"sh\"], \"cwd\": \"rel\"},"
		       "\"linux\": {\"resources\": {\"pids\": {\"limit\": \"x\"}}}}",
		       "ociVersion: \"0.9\" is not a 1.x version",
		       "root.path: must be a string, not an integer",
		       "process.cwd: must be an absolute path",
		       "linux.resources.pids.limit: must be an integer, not a string");

	assert_int_equal(n, 4);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_podman),	   cmocka_unit_test(test_runc_spec),
	    cmocka_unit_test(test_ctr_spec),	   cmocka_unit_test(test_full),
	    cmocka_unit_test(test_no_process),	   cmocka_unit_test(test_not_a_config),
	    cmocka_unit_test(test_required),	   cmocka_unit_test(test_process_errors),
	    cmocka_unit_test(test_mount_errors),   cmocka_unit_test(test_linux_errors),
	    cmocka_unit_test(test_seccomp_errors), cmocka_unit_test(test_hook_errors),
	    cmocka_unit_test(test_bounds),	   cmocka_unit_test(test_all_errors),
	};

	if (argc < 2) {
		fprintf(stderr, "usage: %s DATA_DIR (tests/unit/data/oci)\n", argv[0]);
		return 2;
	}
	data_dir = argv[1];
	return cmocka_run_group_tests(tests, NULL, NULL);
}
