/* oci/config.h: a bundle's config → airlock's task policy. podman's own
 * config (data/oci/podman-create.json) maps with the documented exceptions
 * noted; each field airlock cannot honour is refused, naming it; the
 * annotations become the policy's egress, profile, secrets, timeout. The
 * first argument is the data/oci directory. */
#include "unit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cgroup/cgroup.h"
#include "core/cleanup.h"
#include "core/error.h"
#include "core/util.h"
#include "oci/config.h"
#include "oci/spec.h"

static const char *data_dir;

static char *read_sample(const char *name)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", data_dir, name);
	FILE *f = fopen(path, "r");
	if (!f)
		fail_msg("cannot open %s", path);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	rewind(f);
	char *buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* The policy of json, or NULL with every refusal joined in errs_text. */
static struct al_policy *map(const char *json, struct al_oci_extra *x, char *errs_text, size_t len)
{
	struct al_oci_config *c = NULL;
	struct al_policy *p = NULL;
	struct al_errors errs = {0};

	errs_text[0] = '\0';
	/* A refusal of the parser's is a refusal all the same. */
	int r = al_oci_config_parse(json, strlen(json), &c, &errs);
	if (r == 0)
		r = al_oci_policy(c, "/bundle", &p, x, &errs);
	for (size_t i = 0; i < errs.n; i++) {
		strncat(errs_text, errs.v[i].text, len - strlen(errs_text) - 2);
		strncat(errs_text, "\n", len - strlen(errs_text) - 1);
	}
	assert_true(r == 0 ? p != NULL : p == NULL);
	al_errors_clear(&errs);
	al_oci_config_free(c);
	return p;
}

static bool notes_have(const struct al_oci_extra *x, const char *needle)
{
	size_t i;
	json_t *n;
	json_array_foreach(x->notes, i, n)
	{
		const char *a = json_string_value(json_object_get(n, "applied"));
		if (a && strstr(a, needle))
			return true;
	}
	return false;
}

static void test_podman_config(void **state)
{
	_cleanup_free_ char *json = read_sample("podman-create.json");
	struct al_oci_extra x = {0};
	char errs[4096];
	(void)state;

	struct al_policy *p = map(json, &x, errs, sizeof(errs));
	if (!p)
		fail_msg("podman's config refused: %s", errs);
	assert_non_null(p->root);
	assert_true(p->root->host[0] == '/');
	assert_int_equal(p->memory_bytes, 64u << 20);
	assert_int_equal(p->pids, 100);
	assert_non_null(p->command);
	/* Its cgroupsPath taken, to be made by create. */
	assert_string_equal(
	    p->root->cgroup_path,
	    "/libpod_parent/"
	    "libpod-e10c04b3ab1d946ff83335a0603745022a1bd90f1eaffeaf30199e2d714122f3");
	/* The exceptions, each noted; podman's seccomp compiled. */
	assert_true(notes_have(&x, "no capability"));
	assert_true(notes_have(&x, "user namespace"));
	assert_non_null(p->root->seccomp);
	assert_true(p->root->seccomp_len > 10);
	/* Its masked paths and its binds (hosts, hostname, .containerenv). */
	assert_true(al_strv_len(p->root->masked) > 3);
	assert_true(p->n_mounts >= 2);
	for (size_t i = 0; i < p->n_mounts; i++)
		assert_string_not_equal(p->mounts[i].path, "/dev/shm");
	al_policy_free(p);
	al_oci_extra_clear(&x);
}

/* A minimal config with one member replaced (a JSON fragment spliced in). */
static char *config_with(const char *process_extra, const char *top_extra, const char *linux_extra)
{
	return xasprintf(
	    "{\"ociVersion\": \"1.0.2\", \"root\": {\"path\": \"rootfs\"},"
	    " \"process\": {\"args\": [\"sh\"], \"cwd\": \"/\"%s%s},"
	    " \"linux\": {\"namespaces\": [{\"type\": \"pid\"}, {\"type\": \"mount\"},"
	    " {\"type\": \"ipc\"}, {\"type\": \"uts\"}, {\"type\": \"network\"}]%s}%s}",
	    strstr(process_extra, "\"user\"") ? "" : ", \"user\": {\"uid\": 0, \"gid\": 0}",
	    process_extra, linux_extra, top_extra);
}

static void expect_refused(const char *pe, const char *te, const char *le, const char *needle)
{
	_cleanup_free_ char *json = config_with(pe, te, le);
	struct al_oci_extra x = {0};
	char errs[4096];

	struct al_policy *p = map(json, &x, errs, sizeof(errs));
	if (p)
		fail_msg("accepted, expected a refusal naming \"%s\": %s", needle, json);
	assert_contains(errs, needle);
	al_oci_extra_clear(&x);
}

/* A config whose RLIMIT_NOFILE is soft/hard maps to open_files and
 * open_files_soft. */
static void expect_nofile(unsigned soft, unsigned hard, uint64_t want_soft)
{
	struct al_oci_extra x = {0};
	char errs[4096];
	_cleanup_free_ char *rl =
	    xasprintf(", \"rlimits\": [{\"type\": \"RLIMIT_NOFILE\", \"soft\": %u, \"hard\": %u}]",
		      soft, hard);
	_cleanup_free_ char *json = config_with(rl, "", "");
	struct al_policy *p = map(json, &x, errs, sizeof(errs));
	if (!p)
		fail_msg("refused: %s", errs);
	assert_int_equal(p->open_files, hard);
	assert_int_equal(p->open_files_soft, want_soft);
	al_policy_free(p);
	al_oci_extra_clear(&x);
}

/* RLIMIT_NOFILE's soft value below its hard one: both kept (engines'
 * --ulimit nofile=S:H); equal, no soft of its own. */
static void test_nofile_soft(void **state)
{
	(void)state;
	expect_nofile(512, 1024, 512);
	expect_nofile(256, 256, 0);
}

static void test_refusals(void **state)
{
	(void)state;
	expect_refused(", \"apparmorProfile\": \"x\"", "", "", "process.apparmorProfile");
	expect_refused(", \"rlimits\": [{\"type\": \"RLIMIT_AS\", \"soft\": 1, \"hard\": 1}]", "",
		       "", "process.rlimits[0]");
	expect_refused(", \"rlimits\": [{\"type\": \"RLIMIT_NPROC\", \"soft\": 1, \"hard\": 2}]",
		       "", "", "soft and hard");
	expect_refused(", \"rlimits\": [{\"type\": \"RLIMIT_NOFILE\", \"soft\": 0, \"hard\": 2}]",
		       "", "", "no descriptor");
	expect_refused(", \"oomScoreAdj\": -997", "", "", "process.oomScoreAdj");
	expect_refused("", ", \"hooks\": {\"createContainer\": [{\"path\": \"/bin/true\"}]}", "",
		       "hooks");
	expect_refused("", ", \"domainname\": \"x\"", "", "domainname");
	expect_refused("", "", ", \"sysctl\": {\"kernel.shmmax\": \"1\"}", "linux.sysctl");
	expect_refused("", "",
		       ", \"devices\": [{\"path\": \"/dev/sda\", \"type\": \"b\", "
		       "\"major\": 8, \"minor\": 0}]",
		       "linux.devices");
	expect_refused("", "", ", \"resources\": {\"cpu\": {\"cpus\": \"0-1\"}}", "cpu.cpus");
	expect_refused("", "", ", \"resources\": {\"memory\": {\"disableOOMKiller\": true}}",
		       "disableOOMKiller");
	expect_refused("", "", ", \"seccomp\": {\"defaultAction\": \"SCMP_ACT_NOTIFY\"}",
		       "linux.seccomp.defaultAction");
	expect_refused("", "", ", \"rootfsPropagation\": \"shared\"", "rootfsPropagation");
	expect_refused("",
		       ", \"mounts\": [{\"destination\": \"/x\", \"type\": \"ext4\", "
		       "\"source\": \"/dev/sda1\"}]",
		       "", "mounts[0]");
	expect_refused("",
		       ", \"mounts\": [{\"destination\": \"/sys\", \"type\": \"sysfs\", "
		       "\"source\": \"sysfs\"}]",
		       "", "must be read-only");
	expect_refused("", ", \"annotations\": {\"io.airlock.nope\": \"1\"}", "",
		       "io.airlock.nope");
	expect_refused("", ", \"annotations\": {\"io.airlock.network.allow\": \"127.0.0.1\"}", "",
		       "io.airlock.network.allow");
	expect_refused("", ", \"annotations\": {\"io.airlock.timeout\": \"0\"}", "",
		       "io.airlock.timeout");
}

/* The cgroupsPath of config json: absolute form, or refused naming the
 * field and saying why. */
static void expect_cgroups_path(const char *value, const char *want, const char *why)
{
	_cleanup_free_ char *q = xasprintf(", \"cgroupsPath\": \"%s\"", value);
	_cleanup_free_ char *json = config_with("", "", q);
	struct al_oci_extra x = {0};
	char errs[4096];

	struct al_policy *p = map(json, &x, errs, sizeof(errs));
	if (want) {
		if (!p)
			fail_msg("cgroupsPath \"%s\" refused: %s", value, errs);
		assert_string_equal(p->root->cgroup_path, want);
	} else {
		if (p)
			fail_msg("cgroupsPath \"%s\" accepted", value);
		assert_contains(errs, "linux.cgroupsPath");
		assert_contains(errs, why);
	}
	al_policy_free(p);
	al_oci_extra_clear(&x);
}

static void test_cgroups_path(void **state)
{
	char name[AL_CGROUP_COMPONENT_MAX + 2], longp[AL_CGROUP_PATH_MAX + 2];
	_cleanup_free_ char *at_max = NULL;
	(void)state;

	/* kubelet's cgroupfs form, podman's, a relative one (below the root). */
	expect_cgroups_path("/kubepods/burstable/pod1f0e-22/abc123",
			    "/kubepods/burstable/pod1f0e-22/abc123", NULL);
	expect_cgroups_path("/libpod_parent/libpod-e10c", "/libpod_parent/libpod-e10c", NULL);
	expect_cgroups_path("ctr/c1", "/ctr/c1", NULL);
	expect_cgroups_path("/a.b_c-d+e@f=g", "/a.b_c-d+e@f=g", NULL);
	/* Refused, each saying why. */
	expect_cgroups_path("", NULL, "empty");
	expect_cgroups_path("/", NULL, "root");
	expect_cgroups_path("/a/../b", NULL, "\"..\"");
	expect_cgroups_path("..", NULL, "\"..\"");
	expect_cgroups_path("/a/./b", NULL, "\".\"");
	expect_cgroups_path("/a//b", NULL, "empty component");
	expect_cgroups_path("/a/b/", NULL, "empty component");
	expect_cgroups_path("system.slice:airlock:c1", NULL, "systemd");
	expect_cgroups_path("/a b", NULL, "offset 2");
	expect_cgroups_path("/a\\nb", NULL, "offset 2");
	expect_cgroups_path("/x/airlock/y", NULL, "airlock's own");
	expect_cgroups_path("/airlock", NULL, "airlock's own");
	/* Named as a cgroup file: refused before anything is made. */
	expect_cgroups_path("/t/cf/tasks", NULL, "\"tasks\" is the name of a cgroup file");
	expect_cgroups_path("/notify_on_release", NULL, "name of a cgroup file");
	expect_cgroups_path("/a/release_agent/b", NULL, "name of a cgroup file");
	expect_cgroups_path("/a/cgroup.procs", NULL, "may not start with \"cgroup.\"");
	expect_cgroups_path("/memory.limit_in_bytes/a", NULL, "\"memory.\"");
	expect_cgroups_path("/a/cpuset.cpus", NULL, "\"cpuset.\"");
	expect_cgroups_path("/a/pids.max", NULL, "\"pids.\"");
	expect_cgroups_path("/a/io.max", NULL, "\"io.\"");
	expect_cgroups_path("/a/memory/tasks2/cpus", "/a/memory/tasks2/cpus", NULL);
	/* At most 16 components. */
	expect_cgroups_path("/1/2/3/4/5/6/7/8/9/10/11/12/13/14/15/16",
			    "/1/2/3/4/5/6/7/8/9/10/11/12/13/14/15/16", NULL);
	expect_cgroups_path("/1/2/3/4/5/6/7/8/9/10/11/12/13/14/15/16/17", NULL,
			    "more than 16 components");
	memset(name, 'n', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	_cleanup_free_ char *longname = xasprintf("/a/%s", name);
	expect_cgroups_path(longname, NULL, "a component of 256 bytes");
	memset(longp, 'p', sizeof(longp) - 1);
	longp[0] = '/';
	longp[100] = '/';
	longp[300] = '/';
	longp[sizeof(longp) - 1] = '\0';
	expect_cgroups_path(longp, NULL, "513 bytes");
	longp[sizeof(longp) - 2] = '\0'; /* 512: the most */
	at_max = xstrdup(longp);
	expect_cgroups_path(longp, at_max, NULL);
	/* The pure check itself: the absolute form only when asked. */
	struct al_error err = {0};
	assert_int_equal(al_cgroup_path_check("/a/b", NULL, &err), 0);
	assert_int_equal(al_cgroup_path_check(NULL, NULL, &err), -EINVAL);
}

/* Sharing the host's pid namespace (none asked for) is refused; a network
 * namespace's path is joined (the plan carries it, with the field that
 * named it), another namespace's path is not (both noted, exception 3);
 * time namespaces are refused. */
static void test_namespaces(void **state)
{
	_cleanup_free_ char *no_pid = xstrdup(
	    "{\"ociVersion\": \"1.0.2\", \"root\": {\"path\": \"/r\"}, \"process\": {\"args\": "
	    "[\"sh\"], \"cwd\": \"/\", \"user\": {\"uid\": 0, \"gid\": 0}}, \"linux\": "
	    "{\"namespaces\": [{\"type\": \"mount\"}, {\"type\": \"ipc\"}, {\"type\": \"uts\"}, "
	    "{\"type\": \"network\"}]}}");
	_cleanup_free_ char *netns = xstrdup(
	    "{\"ociVersion\": \"1.0.2\", \"root\": {\"path\": \"/r\"}, \"process\": {\"args\": "
	    "[\"sh\"], \"cwd\": \"/\", \"user\": {\"uid\": 0, \"gid\": 0}}, \"linux\": "
	    "{\"namespaces\": [{\"type\": \"pid\"}, {\"type\": \"mount\"}, {\"type\": \"ipc\"}, "
	    "{\"type\": \"uts\", \"path\": \"/proc/1/ns/uts\"}, {\"type\": \"network\", "
	    "\"path\": \"/run/netns/x\"}]}}");
	struct al_oci_extra x = {0};
	char errs[4096];
	(void)state;

	assert_null(map(no_pid, &x, errs, sizeof(errs)));
	assert_contains(errs, "no pid namespace");
	al_oci_extra_clear(&x);
	struct al_policy *p = map(netns, &x, errs, sizeof(errs));
	if (!p)
		fail_msg("refused: %s", errs);
	assert_true(notes_have(&x, "/run/netns/x joined: airlock's rules installed in it"));
	assert_true(notes_have(&x, "uts namespace /proc/1/ns/uts not joined"));
	assert_false(notes_have(&x, "/run/netns/x not joined"));
	assert_string_equal(p->root->netns, "/run/netns/x");
	assert_string_equal(p->root->netns_field, "linux.namespaces[4].path");
	al_policy_free(p);
	al_oci_extra_clear(&x);
}

/* A pod's sandbox (pause) container, as containerd's CRI or CRI-O says,
 * never joins the pod's network namespace (its rules would refuse every
 * app container of the pod): the plan carries no netns, the path goes to
 * its supervisor (x.pod_netns), the pod's egress annotations are not its
 * own, and the notes say why. Any other value of the annotation joins as
 * before and takes them. */
static void test_pod_sandbox(void **state)
{
	static const char *const keys[] = {"io.kubernetes.cri.container-type",
					   "io.kubernetes.cri-o.ContainerType"};
	char errs[4096];
	(void)state;

	for (size_t k = 0; k < 2; k++)
		for (int sandbox = 0; sandbox < 2; sandbox++) {
			struct al_oci_extra x = {0};
			_cleanup_free_ char *json = xasprintf(
			    "{\"ociVersion\": \"1.0.2\", \"root\": {\"path\": \"/r\"}, "
			    "\"process\": {\"args\": [\"pause\"], \"cwd\": \"/\", \"user\": "
			    "{\"uid\": 0, \"gid\": 0}}, \"annotations\": {\"%s\": \"%s\", "
			    "\"io.airlock.network.allow\": \"api.test:443\", "
			    "\"io.airlock.network.hosts\": \"api.test=127.0.0.1\"}, "
			    "\"linux\": {\"namespaces\": [{\"type\": \"pid\"}, {\"type\": "
			    "\"mount\"}, {\"type\": \"ipc\"}, {\"type\": \"uts\"}, {\"type\": "
			    "\"network\", \"path\": \"/run/netns/cni-1\"}]}}",
			    keys[k], sandbox ? "sandbox" : "container");
			struct al_policy *p = map(json, &x, errs, sizeof(errs));
			if (!p)
				fail_msg("refused: %s", errs);
			if (sandbox) {
				assert_null(p->root->netns);
				assert_null(p->root->netns_field);
				assert_string_equal(x.pod_netns, "/run/netns/cni-1");
				assert_true(x.pod_sandbox);
				assert_true(notes_have(&x, "/run/netns/cni-1 not joined"));
				assert_true(notes_have(&x, keys[k]));
				assert_null(p->net_allow);
				assert_true(notes_have(&x, "not applied to the pod's sandbox"));
			} else {
				assert_string_equal(p->root->netns, "/run/netns/cni-1");
				assert_null(x.pod_netns);
				assert_false(x.pod_sandbox);
				assert_true(notes_have(&x, "/run/netns/cni-1 joined"));
				assert_non_null(p->net_allow);
				assert_string_equal(p->net_allow[0], "api.test:443");
			}
			al_policy_free(p);
			al_oci_extra_clear(&x);
		}
}

static void test_annotations(void **state)
{
	_cleanup_free_ char *json = config_with(
	    "",
	    ", \"annotations\": {\"io.airlock.network.allow\": \"api.test:8080, *.example.com\","
	    " \"io.airlock.network.hosts\": \"api.test=127.0.0.1\", \"io.airlock.profile\": "
	    "\"agents\", \"io.airlock.secrets\": \"A,B\", \"io.airlock.timeout\": \"90\","
	    " \"io.airlock.audit\": \"jobs\", \"other.key\": \"x\"}",
	    ", \"sysctl\": {\"net.ipv4.ping_group_range\": \"0 0\"}");
	struct al_oci_extra x = {0};
	char errs[4096];
	(void)state;

	struct al_policy *p = map(json, &x, errs, sizeof(errs));
	if (!p)
		fail_msg("refused: %s", errs);
	assert_int_equal(al_strv_len(p->net_allow), 2);
	assert_string_equal(p->net_allow[0], "api.test:8080");
	assert_string_equal(p->network_mode, "gateway");
	assert_int_equal(al_strv_len(p->net_hosts), 1);
	assert_string_equal(p->profile, "agents");
	assert_int_equal(al_strv_len(p->secret_names), 2);
	assert_int_equal(p->timeout_ms, 90000);
	assert_string_equal(x.audit, "jobs");
	assert_int_equal(al_strv_len(p->root->sysctl), 2);
	al_policy_free(p);
	al_oci_extra_clear(&x);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_podman_config), cmocka_unit_test(test_nofile_soft),
	    cmocka_unit_test(test_refusals),	  cmocka_unit_test(test_namespaces),
	    cmocka_unit_test(test_pod_sandbox),	  cmocka_unit_test(test_annotations),
	    cmocka_unit_test(test_cgroups_path),
	};
	data_dir = argc > 1 ? argv[1] : "data/oci";
	return cmocka_run_group_tests(tests, NULL, NULL);
}
