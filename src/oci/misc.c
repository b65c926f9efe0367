/* `features` and `spec` (oci.h). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/sys.h"
#include "core/util.h"
#include "oci/oci.h"

static json_t *strings(const char *const *v)
{
	json_t *a = json_array();
	for (size_t i = 0; v[i]; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

void al_oci_features(FILE *out)
{
	static const char *const opts[] = {"bind",	  "rbind",   "ro",     "rw",
					   "nosuid",	  "nodev",   "noexec", "private",
					   "rprivate",	  "slave",   "rslave", "relatime",
					   "strictatime", "noatime", NULL};
	static const char *const ns[] = {"pid",	  "network", "ipc",    "uts",
					 "mount", "user",    "cgroup", NULL};
	static const char *const actions[] = {
	    "SCMP_ACT_ALLOW",	    "SCMP_ACT_ERRNO", "SCMP_ACT_KILL", "SCMP_ACT_KILL_PROCESS",
	    "SCMP_ACT_KILL_THREAD", "SCMP_ACT_LOG",   "SCMP_ACT_TRAP", NULL};
	static const char *const ops[] = {"SCMP_CMP_NE",	"SCMP_CMP_LT", "SCMP_CMP_LE",
					  "SCMP_CMP_EQ",	"SCMP_CMP_GE", "SCMP_CMP_GT",
					  "SCMP_CMP_MASKED_EQ", NULL};
	static const char *const archs[] = {"SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32",
					    NULL};
	static const char *const none[] = {NULL};
	json_t *o = json_pack(
	    "{s:s, s:s, s:o, s:o, s:{s:o, s:o, s:{s:b, s:b, s:b, s:b}, s:{s:b, s:o, s:o, s:o}, "
	    "s:{s:b}, s:{s:b}}, s:{s:s}}",
	    "ociVersionMin", "1.0.0", "ociVersionMax", "1.1.0", "hooks", strings(none),
	    "mountOptions", strings(opts), "linux", "namespaces", strings(ns), "capabilities",
	    strings(none), "cgroup", "v1", 1, "v2", 1, "systemd", 0, "systemdUser", 0, "seccomp",
	    "enabled", 1, "actions", strings(actions), "operators", strings(ops), "archs",
	    strings(archs), "apparmor", "enabled", 0, "selinux", "enabled", 0, "annotations",
	    "io.airlock.runtime", "airlock");
	char *text = json_dumps(o, JSON_INDENT(2));
	fprintf(out, "%s\n", text);
	free(text);
	json_decref(o);
}

static const char default_spec[] =
    "{\n"
    "  \"ociVersion\": \"1.0.2\",\n"
    "  \"process\": {\n"
    "    \"terminal\": true,\n"
    "    \"user\": {\"uid\": 0, \"gid\": 0},\n"
    "    \"args\": [\"sh\"],\n"
    "    \"env\": [\"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\", "
    "\"TERM=xterm\"],\n"
    "    \"cwd\": \"/\",\n"
    "    \"noNewPrivileges\": true\n"
    "  },\n"
    "  \"root\": {\"path\": \"rootfs\", \"readonly\": true},\n"
    "  \"hostname\": \"airlock\",\n"
    "  \"mounts\": [\n"
    "    {\"destination\": \"/proc\", \"type\": \"proc\", \"source\": \"proc\"},\n"
    "    {\"destination\": \"/dev\", \"type\": \"tmpfs\", \"source\": \"tmpfs\", "
    "\"options\": [\"nosuid\", \"strictatime\", \"mode=755\", \"size=65536k\"]},\n"
    "    {\"destination\": \"/dev/pts\", \"type\": \"devpts\", \"source\": \"devpts\", "
    "\"options\": [\"nosuid\", \"noexec\", \"newinstance\", \"ptmxmode=0666\", "
    "\"mode=0620\"]},\n"
    "    {\"destination\": \"/dev/shm\", \"type\": \"tmpfs\", \"source\": \"shm\", "
    "\"options\": [\"nosuid\", \"noexec\", \"nodev\", \"mode=1777\", \"size=65536k\"]},\n"
    "    {\"destination\": \"/dev/mqueue\", \"type\": \"mqueue\", \"source\": \"mqueue\", "
    "\"options\": [\"nosuid\", \"noexec\", \"nodev\"]},\n"
    "    {\"destination\": \"/sys\", \"type\": \"sysfs\", \"source\": \"sysfs\", "
    "\"options\": [\"nosuid\", \"noexec\", \"nodev\", \"ro\"]},\n"
    "    {\"destination\": \"/tmp\", \"type\": \"tmpfs\", \"source\": \"tmpfs\", "
    "\"options\": [\"nosuid\", \"nodev\"]}\n"
    "  ],\n"
    "  \"annotations\": {\"io.airlock.timeout\": \"3600\"},\n"
    "  \"linux\": {\n"
    "    \"namespaces\": [{\"type\": \"pid\"}, {\"type\": \"network\"}, {\"type\": \"ipc\"}, "
    "{\"type\": \"uts\"}, {\"type\": \"mount\"}, {\"type\": \"cgroup\"}],\n"
    "    \"maskedPaths\": [\"/proc/acpi\", \"/proc/kcore\", \"/proc/keys\", "
    "\"/proc/latency_stats\", \"/proc/timer_list\", \"/proc/timer_stats\", "
    "\"/proc/sched_debug\", \"/proc/scsi\", \"/sys/firmware\"],\n"
    "    \"readonlyPaths\": [\"/proc/asound\", \"/proc/bus\", \"/proc/fs\", \"/proc/irq\", "
    "\"/proc/sys\", \"/proc/sysrq-trigger\"]\n"
    "  }\n"
    "}\n";

int al_oci_spec(const char *dir, struct al_error *err)
{
	_cleanup_free_ char *path = xasprintf("%s/config.json", dir ? dir : ".");
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);

	if (fd < 0)
		return al_error_setsys(err, errno, "%s", path);
	int r = al_write_all(fd, default_spec, strlen(default_spec));
	close(fd);
	if (r < 0)
		return al_error_setsys(err, -r, "writing %s", path);
	return 0;
}
