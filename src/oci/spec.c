/* config.json → struct al_oci_config: the document, root, mounts, process,
 * hooks and annotations (the linux object is spec-linux.c's). Every error
 * is collected; nothing is stored in the caller's pointer unless the whole
 * document is right. */
#include "oci/spec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "core/cleanup.h"
#include "oci/spec-internal.h"

/* The Linux resources getrlimit(2) knows, which the spec's "type" names. */
static const struct {
	const char *name;
	int resource;
} rlimits[] = {
    {"RLIMIT_AS", RLIMIT_AS},
    {"RLIMIT_CORE", RLIMIT_CORE},
    {"RLIMIT_CPU", RLIMIT_CPU},
    {"RLIMIT_DATA", RLIMIT_DATA},
    {"RLIMIT_FSIZE", RLIMIT_FSIZE},
    {"RLIMIT_LOCKS", RLIMIT_LOCKS},
    {"RLIMIT_MEMLOCK", RLIMIT_MEMLOCK},
    {"RLIMIT_MSGQUEUE", RLIMIT_MSGQUEUE},
    {"RLIMIT_NICE", RLIMIT_NICE},
    {"RLIMIT_NOFILE", RLIMIT_NOFILE},
    {"RLIMIT_NPROC", RLIMIT_NPROC},
    {"RLIMIT_RSS", RLIMIT_RSS},
    {"RLIMIT_RTPRIO", RLIMIT_RTPRIO},
    {"RLIMIT_RTTIME", RLIMIT_RTTIME},
    {"RLIMIT_SIGPENDING", RLIMIT_SIGPENDING},
    {"RLIMIT_STACK", RLIMIT_STACK},
};

static const char *const hook_names[AL_OCI_HOOK_KINDS] = {
    "prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop",
};

static int parse_root(struct oci_ctx *c, const json_t *root)
{
	struct al_oci_config *cfg = c->cfg;
	json_t *v;
	int bad = 0;

	if (!oci_object(c, root, "root"))
		return -EINVAL;
	if ((v = oci_need(c, root, "root", "path")) &&
	    oci_str(c, v, "root.path", &cfg->root_path) == 0 && !*cfg->root_path)
		bad = oci_fail(c, "root.path", "must not be empty");
	if ((v = oci_get(root, "readonly")))
		bad |= oci_bool(c, v, "root.readonly", &cfg->root_readonly);
	return bad;
}

static int parse_mount(struct oci_ctx *c, const json_t *j, const char *p, struct al_oci_mount *m)
{
	json_t *v, *uids, *gids;
	int bad = 0;

	if (!oci_object(c, j, p))
		return -EINVAL;
	if ((v = oci_need(c, j, p, "destination")) &&
	    oci_str(c, v, KEY(p, "destination"), &m->destination) == 0) {
		/* Linux: relative is deprecated, read as relative to "/". */
		if (!*m->destination) {
			bad = oci_fail(c, KEY(p, "destination"), "must not be empty");
		} else if (m->destination[0] != '/') {
			size_t n = strlen(m->destination);
			char *abs = malloc(n + 2);

			if (!abs)
				return oci_nomem(c);
			abs[0] = '/';
			memcpy(abs + 1, m->destination, n + 1);
			free(m->destination);
			m->destination = abs;
		}
	}
	if ((v = oci_get(j, "type")))
		bad |= oci_str(c, v, KEY(p, "type"), &m->type);
	if ((v = oci_get(j, "source")))
		bad |= oci_str(c, v, KEY(p, "source"), &m->source);
	if ((v = oci_get(j, "options")))
		bad |= oci_strv(c, v, KEY(p, "options"), 0, AL_OCI_MAX_ITEMS, &m->options, NULL);
	uids = oci_get(j, "uidMappings");
	gids = oci_get(j, "gidMappings");
	if (uids)
		bad |= oci_idmaps(c, uids, KEY(p, "uidMappings"), &m->uid_maps, &m->n_uid_maps);
	if (gids)
		bad |= oci_idmaps(c, gids, KEY(p, "gidMappings"), &m->gid_maps, &m->n_gid_maps);
	if (!uids != !gids)
		bad = oci_fail(c, KEY(p, uids ? "gidMappings" : "uidMappings"),
			       "missing: uidMappings and gidMappings go together");
	return bad;
}

static int parse_mounts(struct oci_ctx *c, const json_t *j)
{
	struct al_oci_config *cfg = c->cfg;
	size_t n;
	int bad = 0;

	if (!oci_array(c, j, "mounts", AL_OCI_MAX_MOUNTS))
		return -EINVAL;
	n = json_array_size(j);
	if (!(cfg->mounts = calloc(n ? n : 1, sizeof(*cfg->mounts))))
		return oci_nomem(c);
	cfg->n_mounts = n;
	for (size_t i = 0; i < n; i++)
		bad |= parse_mount(c, json_array_get(j, i), IDX("mounts", i), &cfg->mounts[i]);
	return bad;
}

static int parse_rlimit(struct oci_ctx *c, const json_t *j, const char *p, size_t i)
{
	struct al_oci_rlimit *rl = &c->cfg->rlimits[i];
	_cleanup_free_ char *type = NULL;
	json_t *t, *soft, *hard;
	size_t k;

	if (!oci_object(c, j, p))
		return -EINVAL;
	t = oci_need(c, j, p, "type");
	soft = oci_need(c, j, p, "soft");
	hard = oci_need(c, j, p, "hard");
	/* each member checked, so that all their errors are reported */
	if (((t ? oci_str(c, t, KEY(p, "type"), &type) : -EINVAL) |
	     (soft ? oci_uint(c, soft, KEY(p, "soft"), UINT64_MAX, &rl->soft) : -EINVAL) |
	     (hard ? oci_uint(c, hard, KEY(p, "hard"), UINT64_MAX, &rl->hard) : -EINVAL)) < 0)
		return -EINVAL;
	for (k = 0; k < sizeof(rlimits) / sizeof(rlimits[0]); k++)
		if (strcmp(type, rlimits[k].name) == 0)
			break;
	if (k == sizeof(rlimits) / sizeof(rlimits[0]))
		return oci_fail(c, KEY(p, "type"), "unknown rlimit \"%.64s\"", type);
	rl->name = rlimits[k].name;
	rl->resource = rlimits[k].resource;
	for (size_t e = 0; e < i; e++)
		if (c->cfg->rlimits[e].name == rl->name)
			return oci_fail(c, KEY(p, "type"), "%s is also process.rlimits[%zu]",
					rl->name, e);
	if (rl->soft > rl->hard)
		return oci_fail(c, KEY(p, "soft"), "%llu is above hard (%llu)",
				(unsigned long long)rl->soft, (unsigned long long)rl->hard);
	return 0;
}

static int parse_rlimits(struct oci_ctx *c, const json_t *j)
{
	size_t n;
	int bad = 0;

	if (!oci_array(c, j, "process.rlimits", AL_OCI_MAX_ITEMS))
		return -EINVAL;
	n = json_array_size(j);
	if (!(c->cfg->rlimits = calloc(n ? n : 1, sizeof(*c->cfg->rlimits))))
		return oci_nomem(c);
	for (size_t i = 0; i < n; i++) {
		/* a failed entry leaves a hole that duplicates must not match */
		bad |= parse_rlimit(c, json_array_get(j, i), IDX("process.rlimits", i), i);
		if (!c->cfg->rlimits[i].name)
			memset(&c->cfg->rlimits[i], 0, sizeof(c->cfg->rlimits[i]));
	}
	c->cfg->n_rlimits = n;
	return bad;
}

static int parse_user(struct oci_ctx *c, const json_t *j)
{
	struct al_oci_config *cfg = c->cfg;
	json_t *v;
	int bad = 0;

	if (!oci_object(c, j, "process.user"))
		return -EINVAL;
	if ((v = oci_need(c, j, "process.user", "uid")))
		bad |= oci_u32(c, v, "process.user.uid", &cfg->uid);
	else
		bad = -EINVAL;
	if ((v = oci_need(c, j, "process.user", "gid")))
		bad |= oci_u32(c, v, "process.user.gid", &cfg->gid);
	else
		bad = -EINVAL;
	if ((v = oci_get(j, "umask"))) {
		uint64_t m;

		if (oci_uint(c, v, "process.user.umask", 0777, &m) == 0)
			cfg->has_umask = true, cfg->umask = (uint32_t)m;
		else
			bad = -EINVAL;
	}
	if ((v = oci_get(j, "additionalGids"))) {
		const char *p = "process.user.additionalGids";
		size_t n;

		if (!oci_array(c, v, p, AL_OCI_MAX_ITEMS))
			return -EINVAL;
		n = json_array_size(v);
		if (!(cfg->additional_gids = calloc(n ? n : 1, sizeof(uint32_t))))
			return oci_nomem(c);
		cfg->n_additional_gids = n;
		for (size_t i = 0; i < n; i++)
			bad |=
			    oci_u32(c, json_array_get(v, i), IDX(p, i), &cfg->additional_gids[i]);
	}
	if ((v = oci_get(j, "username")))
		bad |= oci_str(c, v, "process.user.username", &cfg->username);
	return bad;
}

static int parse_caps(struct oci_ctx *c, const json_t *j)
{
	struct al_oci_config *cfg = c->cfg;
	const char *const sets[] = {"bounding", "effective", "inheritable", "permitted", "ambient"};
	char **const *out[] = {&cfg->caps_bounding, &cfg->caps_effective, &cfg->caps_inheritable,
			       &cfg->caps_permitted, &cfg->caps_ambient};
	int bad = 0;

	if (!oci_object(c, j, "process.capabilities"))
		return -EINVAL;
	cfg->has_capabilities = true;
	for (size_t i = 0; i < 5; i++) {
		json_t *v = oci_get(j, sets[i]);

		if (v)
			bad |= oci_strv(c, v, KEY("process.capabilities", sets[i]), 0, 1024,
					(char ***)out[i], NULL);
	}
	return bad;
}

static int parse_console(struct oci_ctx *c, const json_t *j)
{
	struct al_oci_config *cfg = c->cfg;
	const char *p = "process.consoleSize";
	json_t *h, *w;
	uint64_t rows, cols;

	if (!oci_object(c, j, p))
		return -EINVAL;
	h = oci_need(c, j, p, "height");
	w = oci_need(c, j, p, "width");
	/* a terminal's size is two unsigned shorts (struct winsize) */
	if (!h || !w || oci_uint(c, h, KEY(p, "height"), UINT16_MAX, &rows) ||
	    oci_uint(c, w, KEY(p, "width"), UINT16_MAX, &cols))
		return -EINVAL;
	cfg->has_console_size = true;
	cfg->console_rows = (unsigned)rows;
	cfg->console_cols = (unsigned)cols;
	return 0;
}

static int parse_io_priority(struct oci_ctx *c, const json_t *j)
{
	static const char *const classes[] = {"IOPRIO_CLASS_RT", "IOPRIO_CLASS_BE",
					      "IOPRIO_CLASS_IDLE", NULL};
	const char *p = "process.ioPriority";
	_cleanup_free_ char *cls = NULL;
	json_t *k, *prio;
	int64_t v;

	if (!oci_object(c, j, p))
		return -EINVAL;
	k = oci_need(c, j, p, "class");
	prio = oci_need(c, j, p, "priority");
	if (!k || !prio || oci_str(c, k, KEY(p, "class"), &cls) ||
	    oci_int(c, prio, KEY(p, "priority"), 0, 7, &v))
		return -EINVAL;
	if (!oci_one_of(cls, classes))
		return oci_fail(c, KEY(p, "class"), "unknown class \"%.64s\"", cls);
	c->cfg->io_priority_class = TAKE_PTR(cls);
	c->cfg->io_priority = (int)v;
	return 0;
}

/* Fields of process of a simple type. */
static int parse_process_scalars(struct oci_ctx *c, const json_t *j)
{
	struct al_oci_config *cfg = c->cfg;
	json_t *v;
	int bad = 0;

	if ((v = oci_get(j, "terminal")))
		bad |= oci_bool(c, v, "process.terminal", &cfg->terminal);
	if ((v = oci_get(j, "commandLine")))
		bad |= oci_str(c, v, "process.commandLine", &cfg->command_line);
	if ((v = oci_get(j, "noNewPrivileges")))
		bad |= oci_bool(c, v, "process.noNewPrivileges", &cfg->no_new_privileges);
	if ((v = oci_get(j, "apparmorProfile")))
		bad |= oci_str(c, v, "process.apparmorProfile", &cfg->apparmor_profile);
	if ((v = oci_get(j, "selinuxLabel")))
		bad |= oci_str(c, v, "process.selinuxLabel", &cfg->selinux_label);
	if ((v = oci_get(j, "oomScoreAdj"))) {
		int64_t adj;

		/* the kernel's range for oom_score_adj */
		if (oci_int(c, v, "process.oomScoreAdj", -1000, 1000, &adj) == 0)
			cfg->has_oom_score_adj = true, cfg->oom_score_adj = (int)adj;
		else
			bad = -EINVAL;
	}
	return bad;
}

static int parse_process(struct oci_ctx *c, const json_t *j)
{
	struct al_oci_config *cfg = c->cfg;
	json_t *v;
	int bad = 0;

	if (!oci_object(c, j, "process"))
		return -EINVAL;
	cfg->has_process = true;
	bad |= parse_process_scalars(c, j);
	if ((v = oci_get(j, "consoleSize")))
		bad |= parse_console(c, v);
	if ((v = oci_need(c, j, "process", "user")))
		bad |= parse_user(c, v);
	else
		bad = -EINVAL;
	if ((v = oci_need(c, j, "process", "args")))
		bad |= oci_strv(c, v, "process.args", OCI_NONEMPTY, AL_OCI_MAX_ITEMS, &cfg->args,
				NULL);
	else
		bad = -EINVAL;
	if ((v = oci_get(j, "env")))
		bad |= oci_strv(c, v, "process.env", OCI_ENV, AL_OCI_MAX_ITEMS, &cfg->env, NULL);
	if ((v = oci_need(c, j, "process", "cwd"))) {
		if (oci_str(c, v, "process.cwd", &cfg->cwd) == 0 && cfg->cwd[0] != '/')
			bad = oci_fail(c, "process.cwd", "must be an absolute path");
	} else {
		bad = -EINVAL;
	}
	if ((v = oci_get(j, "capabilities")))
		bad |= parse_caps(c, v);
	if ((v = oci_get(j, "rlimits")))
		bad |= parse_rlimits(c, v);
	if ((v = oci_get(j, "ioPriority")))
		bad |= parse_io_priority(c, v);
	if (oci_get(j, "scheduler"))
		oci_unmodelled(c, "process.scheduler");
	if (oci_get(j, "execCPUAffinity"))
		oci_unmodelled(c, "process.execCPUAffinity");
	return bad;
}

static int parse_hook(struct oci_ctx *c, const json_t *j, const char *p, struct al_oci_hook *h)
{
	json_t *v;
	int bad = 0;

	h->timeout = -1;
	if (!oci_object(c, j, p))
		return -EINVAL;
	if ((v = oci_need(c, j, p, "path"))) {
		if (oci_str(c, v, KEY(p, "path"), &h->path) == 0 && h->path[0] != '/')
			bad = oci_fail(c, KEY(p, "path"), "must be an absolute path");
	} else {
		bad = -EINVAL;
	}
	if ((v = oci_get(j, "args")))
		bad |= oci_strv(c, v, KEY(p, "args"), 0, AL_OCI_MAX_ITEMS, &h->args, NULL);
	if ((v = oci_get(j, "env")))
		bad |= oci_strv(c, v, KEY(p, "env"), OCI_ENV, AL_OCI_MAX_ITEMS, &h->env, NULL);
	if ((v = oci_get(j, "timeout"))) {
		int64_t t;

		if (oci_int(c, v, KEY(p, "timeout"), 1, INT32_MAX, &t) == 0)
			h->timeout = (int)t;
		else
			bad = -EINVAL;
	}
	return bad;
}

static int parse_hooks(struct oci_ctx *c, const json_t *j)
{
	struct al_oci_config *cfg = c->cfg;
	int bad = 0;

	if (!oci_object(c, j, "hooks"))
		return -EINVAL;
	for (int k = 0; k < AL_OCI_HOOK_KINDS; k++) {
		const char *p = KEY("hooks", hook_names[k]);
		json_t *list = oci_get(j, hook_names[k]);
		size_t n;

		if (!list)
			continue;
		if (!oci_array(c, list, p, AL_OCI_MAX_ITEMS)) {
			bad = -EINVAL;
			continue;
		}
		n = json_array_size(list);
		if (!(cfg->hooks[k] = calloc(n ? n : 1, sizeof(struct al_oci_hook))))
			return oci_nomem(c);
		cfg->n_hooks[k] = n;
		for (size_t i = 0; i < n; i++)
			bad |= parse_hook(c, json_array_get(list, i), IDX(p, i), &cfg->hooks[k][i]);
	}
	return bad;
}

/* ociVersion: SemVer with major 1 (a 1.x runtime reads any 1.x config). */
static int parse_version(struct oci_ctx *c, const json_t *doc)
{
	json_t *v = oci_need(c, doc, "", "ociVersion");
	const char *s;

	if (!v || oci_str(c, v, "ociVersion", &c->cfg->oci_version))
		return -EINVAL;
	s = c->cfg->oci_version;
	if (strncmp(s, "1.", 2) != 0 || s[2] < '0' || s[2] > '9')
		return oci_fail(c, "ociVersion", "\"%.64s\" is not a 1.x version", s);
	return 0;
}

static int parse_doc(struct oci_ctx *c, const json_t *doc)
{
	static const char *const platforms[] = {"solaris", "windows", "vm", "zos", "freebsd"};
	struct al_oci_config *cfg = c->cfg;
	json_t *v;
	int bad = 0;

	bad |= parse_version(c, doc);
	if ((v = oci_need(c, doc, "", "root")))
		bad |= parse_root(c, v);
	else
		bad = -EINVAL;
	if ((v = oci_get(doc, "hostname")))
		bad |= oci_str(c, v, "hostname", &cfg->hostname);
	if (cfg->hostname && strlen(cfg->hostname) > AL_OCI_MAX_HOSTNAME)
		bad = oci_fail(c, "hostname", "is longer than %d bytes", AL_OCI_MAX_HOSTNAME);
	if ((v = oci_get(doc, "domainname")))
		bad |= oci_str(c, v, "domainname", &cfg->domainname);
	if (cfg->domainname && strlen(cfg->domainname) > AL_OCI_MAX_HOSTNAME)
		bad = oci_fail(c, "domainname", "is longer than %d bytes", AL_OCI_MAX_HOSTNAME);
	if ((v = oci_get(doc, "mounts")))
		bad |= parse_mounts(c, v);
	if ((v = oci_get(doc, "process")))
		bad |= parse_process(c, v);
	if ((v = oci_get(doc, "hooks")))
		bad |= parse_hooks(c, v);
	if ((v = oci_get(doc, "annotations")))
		bad |= oci_pairs(c, v, "annotations", &cfg->annotations);
	if ((v = oci_get(doc, "linux")))
		bad |= oci_parse_linux(c, v);
	for (size_t i = 0; i < sizeof(platforms) / sizeof(platforms[0]); i++)
		if (oci_get(doc, platforms[i]))
			oci_unmodelled(c, platforms[i]);
	return bad;
}

int al_oci_config_parse(const char *json, size_t len, struct al_oci_config **ret,
			struct al_errors *errs)
{
	_cleanup_(al_oci_config_freep) struct al_oci_config *cfg = NULL;
	struct oci_ctx c = {.errs = errs};
	_cleanup_free_ char *rewritten = NULL;
	size_t before = al_errors_count(errs), rlen = 0;
	json_error_t jerr;
	bool has_nul;
	json_t *doc;

	if (len > AL_OCI_MAX_CONFIG)
		return al_errors_add(errs, EINVAL, "config.json", NULL,
				     "%zu bytes, more than the %u allowed", len, AL_OCI_MAX_CONFIG);
	if (oci_prepass(json, len, &rewritten, &rlen, &has_nul) < 0)
		return al_errors_add(errs, ENOMEM, "config.json", NULL, "out of memory");
	/* A marked integer is trusted only where no string could forge one. */
	c.markers = rewritten && !has_nul;
	doc = json_loadb(rewritten ? rewritten : json, rewritten ? rlen : len,
			 JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
	if (!doc)
		return al_errors_add_syntax(errs, "config.json", jerr.line, jerr.column, jerr.text);
	if (!json_is_object(doc)) {
		const char *what = json_is_array(doc) ? "an array" : "a scalar";

		json_decref(doc);
		return al_errors_add(errs, EINVAL, "config.json", NULL,
				     "must be a JSON object, not %s", what);
	}
	if (!(cfg = calloc(1, sizeof(*cfg)))) {
		json_decref(doc);
		return al_errors_add(errs, ENOMEM, "config.json", NULL, "out of memory");
	}
	c.cfg = cfg;
	parse_doc(&c, doc);
	json_decref(doc);
	cfg->present_unmodelled = c.unmod;
	if (c.oom)
		return -ENOMEM;
	if (al_errors_count(errs) > before)
		return -EINVAL;
	*ret = TAKE_PTR(cfg);
	return 0;
}

bool al_oci_config_has_unmodelled(const struct al_oci_config *c, const char *path)
{
	for (size_t i = 0; c->present_unmodelled && c->present_unmodelled[i]; i++)
		if (strcmp(c->present_unmodelled[i], path) == 0)
			return true;
	return false;
}

void oci_mount_free(struct al_oci_mount *m)
{
	free(m->destination);
	free(m->type);
	free(m->source);
	oci_strv_free(m->options);
	free(m->uid_maps);
	free(m->gid_maps);
}

static void free_linux(struct al_oci_config *c)
{
	for (size_t i = 0; i < c->n_namespaces; i++)
		free(c->namespaces[i].path);
	free(c->namespaces);
	free(c->uid_maps);
	free(c->gid_maps);
	oci_strv_free(c->sysctl);
	free(c->cgroups_path);
	free(c->cpu_cpus);
	free(c->cpu_mems);
	oci_strv_free(c->unified);
	for (size_t i = 0; i < c->n_device_rules; i++) {
		free(c->device_rules[i].type);
		free(c->device_rules[i].access);
	}
	free(c->device_rules);
	for (size_t i = 0; i < c->n_devices; i++) {
		free(c->devices[i].path);
		free(c->devices[i].type);
	}
	free(c->devices);
	free(c->seccomp_default_action);
	oci_strv_free(c->seccomp_architectures);
	oci_strv_free(c->seccomp_flags);
	free(c->seccomp_listener_path);
	free(c->seccomp_listener_metadata);
	for (size_t i = 0; i < c->n_seccomp_syscalls; i++) {
		struct al_oci_syscall_rule *s = &c->seccomp_syscalls[i];

		oci_strv_free(s->names);
		free(s->action);
		for (size_t k = 0; k < s->n_args; k++)
			free(s->args[k].op);
		free(s->args);
	}
	free(c->seccomp_syscalls);
	oci_strv_free(c->masked_paths);
	oci_strv_free(c->readonly_paths);
	free(c->rootfs_propagation);
	free(c->mount_label);
}

void al_oci_config_free(struct al_oci_config *c)
{
	if (!c)
		return;
	free(c->oci_version);
	free(c->root_path);
	free(c->hostname);
	free(c->domainname);
	for (size_t i = 0; i < c->n_mounts; i++)
		oci_mount_free(&c->mounts[i]);
	free(c->mounts);
	oci_strv_free(c->args);
	oci_strv_free(c->env);
	free(c->cwd);
	free(c->command_line);
	free(c->additional_gids);
	free(c->username);
	oci_strv_free(c->caps_bounding);
	oci_strv_free(c->caps_effective);
	oci_strv_free(c->caps_inheritable);
	oci_strv_free(c->caps_permitted);
	oci_strv_free(c->caps_ambient);
	free(c->rlimits);
	free(c->apparmor_profile);
	free(c->selinux_label);
	free(c->io_priority_class);
	for (int k = 0; k < AL_OCI_HOOK_KINDS; k++) {
		for (size_t i = 0; i < c->n_hooks[k]; i++) {
			free(c->hooks[k][i].path);
			oci_strv_free(c->hooks[k][i].args);
			oci_strv_free(c->hooks[k][i].env);
		}
		free(c->hooks[k]);
	}
	oci_strv_free(c->annotations);
	free_linux(c);
	oci_strv_free(c->present_unmodelled);
	free(c);
}

void al_oci_config_freep(struct al_oci_config **c)
{
	al_oci_config_free(*c);
	*c = NULL;
}
