/* airlock backends [--json]: every layer this airlock has, weakest first:
 * whether this machine can run it (or why not) and how it keeps each
 * promise. A plan a layer cannot honour is refused by `airlock check` and
 * `airlock run` with the same facts (each backend's probe). */
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "cli.h"
#include "core/log.h"

static const struct {
	unsigned bit;
	const char *key, *text;
} features[] = {
    {AL_BACKEND_EXEC, "exec", "exec in a live sandbox (airlock serve's sessions)"},
    {AL_BACKEND_TTY, "tty", "a terminal for the command (-t)"},
    {AL_BACKEND_NETWORK, "network", "egress rules, through the gateway"},
    {AL_BACKEND_HIDES_PIDS, "hides_processes", "the host's processes are invisible"},
    {AL_BACKEND_PRIVATE_TMP, "private_tmp", "/tmp and the usual paths are the sandbox's own"},
    {AL_BACKEND_PRIVATE_LOOPBACK, "private_loopback", "127.0.0.1 is the sandbox's own"},
    {AL_BACKEND_PAUSE, "pause", "a session can be frozen and thawed"},
    {AL_BACKEND_MOUNTS_ELSEWHERE, "mounts_elsewhere", "a host path shown at another path"},
    {AL_BACKEND_OCI_ROOT, "oci_root", "a container's own root filesystem (airlock oci)"},
};

static const struct {
	const char *key, *label;
	size_t off;
} rows[] = {
    {"files", "file view", offsetof(struct al_backend_facts, files)},
    {"egress", "egress", offsetof(struct al_backend_facts, egress)},
    {"processes", "processes", offsetof(struct al_backend_facts, pids)},
    {"kernel", "kernel surface", offsetof(struct al_backend_facts, kernel)},
    {"limits", "limits", offsetof(struct al_backend_facts, limits)},
    {"exec", "exec", offsetof(struct al_backend_facts, exec)},
};

static const char *row(const struct al_backend_facts *f, size_t i)
{
	return *(const char *const *)((const char *)f + rows[i].off);
}

static void usage(FILE *f)
{
	fprintf(f, "Usage: airlock backends [--json]\n\n"
		   "List the isolation layers this airlock has, weakest first: whether\n"
		   "this machine can run each (or why not), and how each keeps the\n"
		   "promises (file view, egress, processes, kernel surface, limits,\n"
		   "exec in a live sandbox). Choose one with run's --backend NAME or a\n"
		   "policy's \"backend\"; see docs/backends.md.\n\n"
		   "  --json   one JSON document: {\"backends\": [...]}\n");
}

static void print_text(const struct al_backend_ops *ops, int usable, const char *why)
{
	const struct al_backend_facts *f = ops->facts;

	printf("%s: %s%s%s\n", ops->name,
	       usable ? "usable here" : "not usable here: ", usable ? "" : why, "");
	printf("  %s\n", f->summary);
	/* What the layer runs on here (gvisor: ptrace or kvm; microvm and
	 * vm: tcg or kvm), where it says. */
	const char *platform = usable && ops->platform ? ops->platform() : NULL;
	if (platform)
		printf("  %-15s %s\n", "platform", platform);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		printf("  %-15s %s\n", rows[i].label, row(f, i));
	printf("  %-15s", "cannot");
	int none = 1;
	for (size_t i = 0; i < sizeof(features) / sizeof(features[0]); i++)
		if (!(f->features & features[i].bit)) {
			printf("%s%s", none ? " " : "; ", features[i].text);
			none = 0;
		}
	printf("%s\n", none ? " (every feature above)" : "");
}

static json_t *as_json(const struct al_backend_ops *ops, int usable, const char *why)
{
	const struct al_backend_facts *f = ops->facts;
	json_t *o = json_pack("{s:s, s:b, s:s}", "name", ops->name, "usable", usable, "summary",
			      f->summary);
	json_t *feat = json_object();

	if (!usable)
		json_object_set_new(o, "why", json_string(why));
	const char *platform = usable && ops->platform ? ops->platform() : NULL;
	if (platform)
		json_object_set_new(o, "platform", json_string(platform));
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		json_object_set_new(o, rows[i].key, json_string(row(f, i)));
	for (size_t i = 0; i < sizeof(features) / sizeof(features[0]); i++)
		json_object_set_new(feat, features[i].key,
				    json_boolean(f->features & features[i].bit));
	json_object_set_new(o, "features", feat);
	return o;
}

int al_cmd_backends(int argc, char **argv)
{
	bool json = false;

	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			json = true;
		else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			usage(stdout);
			return 0;
		} else {
			al_err("backends: unknown argument \"%s\" (see airlock backends --help)",
			       argv[i]);
			return 125;
		}
	}
	json_t *list = json_array();
	for (size_t i = 0; al_backends[i]; i++) {
		char why[512];
		int usable = al_backend_usable(al_backends[i], why, sizeof(why));

		if (json)
			json_array_append_new(list, as_json(al_backends[i], usable, why));
		else
			print_text(al_backends[i], usable, why);
	}
	if (json) {
		json_t *doc = json_pack("{s:o}", "backends", list);
		json_dumpf(doc, stdout, JSON_INDENT(2));
		putchar('\n');
		json_decref(doc);
	} else {
		json_decref(list);
	}
	return fflush(stdout) == 0 ? 0 : 1;
}
