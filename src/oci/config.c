/* A bundle's config → airlock's task policy (config.h). Each field is
 * honoured, refused naming it, or (for the few listed in docs/oci.md)
 * taken as airlock's own stricter version; the three documented
 * exceptions go into the notes for run.start. */
#include "oci/config.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/filter.h>
#include <sys/resource.h>

#include "cgroup/cgroup.h"
#include "core/cleanup.h"
#include "core/util.h"
#include "policy/plan.h"

void al_oci_extra_clear(struct al_oci_extra *x)
{
	free(x->audit);
	free(x->pod_netns);
	json_decref(x->notes);
	*x = (struct al_oci_extra){0};
}

void al_oci_note(struct al_oci_extra *x, const char *field, const char *applied)
{
	if (!x->notes)
		x->notes = json_array();
	json_array_append_new(x->notes,
			      json_pack("{s:s, s:s}", "field", field, "applied", applied));
}

static bool has_opt(char *const *opts, const char *o)
{
	for (size_t i = 0; opts && opts[i]; i++)
		if (strcmp(opts[i], o) == 0)
			return true;
	return false;
}

/* A mount option airlock applies its own way, or that changes nothing it
 * shows: accepted. */
static bool harmless_opt(const char *o)
{
	static const char *const ok[] = {
	    "nosuid",	"nodev",      "noexec",	     "exec",	 "rbind",      "bind",
	    "ro",	"rw",	      "private",     "rprivate", "slave",      "rslave",
	    "relatime", "norelatime", "strictatime", "noatime",	 "nodiratime", "newinstance",
	    "sync",	"async",      "dev",	     "suid",	 "tmpcopyup",  "notmpcopyup",
	    "Z",	"z",	      NULL};
	for (size_t i = 0; ok[i]; i++)
		if (strcmp(o, ok[i]) == 0)
			return true;
	/* tmpfs and devpts sizes and modes: the scratch's one size applies,
	 * and airlock's own /dev/pts takes its own. */
	return strncmp(o, "size=", 5) == 0 || strncmp(o, "mode=", 5) == 0 ||
	       strncmp(o, "nr_inodes=", 10) == 0 || strncmp(o, "ptmxmode=", 9) == 0 ||
	       strncmp(o, "gid=", 4) == 0 || strncmp(o, "uid=", 4) == 0;
}

static void mount_one(const struct al_oci_config *c, size_t i, struct al_policy *p,
		      struct al_errors *errs)
{
	const struct al_oci_mount *m = &c->mounts[i];
	const char *type = m->type ? m->type : "";
	const char *dst = m->destination;
	char where[64];
	bool bind = strcmp(type, "bind") == 0 || has_opt(m->options, "bind") ||
		    has_opt(m->options, "rbind");

	snprintf(where, sizeof(where), "mounts[%zu]", i);
	for (size_t k = 0; m->options && m->options[k]; k++)
		if (!harmless_opt(m->options[k]) &&
		    !(strcmp(type, "tmpfs") == 0 && strncmp(m->options[k], "uid=", 4) == 0)) {
			al_errors_add(errs, EINVAL, "config.json", where,
				      "option \"%s\" is not one airlock can honour", m->options[k]);
			return;
		}
	if (m->n_uid_maps || m->n_gid_maps) {
		al_errors_add(errs, EINVAL, "config.json", where,
			      "an idmapped mount of its own: binds are shown with the "
			      "container's ids");
		return;
	}
	/* airlock's own, whatever the engine's options say. */
	if ((strcmp(dst, "/proc") == 0 && strcmp(type, "proc") == 0) ||
	    (strcmp(dst, "/dev") == 0 && strcmp(type, "tmpfs") == 0) ||
	    (strcmp(dst, "/dev/pts") == 0 && strcmp(type, "devpts") == 0) ||
	    strcmp(dst, "/dev/shm") == 0)
		return;
	if (strcmp(type, "sysfs") == 0 || strcmp(type, "cgroup") == 0 ||
	    strcmp(type, "cgroup2") == 0 || strcmp(type, "mqueue") == 0) {
		bool mq = strcmp(type, "mqueue") == 0;
		if (!mq && !has_opt(m->options, "ro")) {
			al_errors_add(errs, EPERM, "config.json", where,
				      "%s at %s must be read-only (\"ro\")", type, dst);
			return;
		}
		al_strv_push(&p->root->special, dst);
		al_strv_push(&p->root->special, mq			     ? "mqueue"
						: strcmp(type, "sysfs") == 0 ? "sysfs"
									     : "cgroup2");
		return;
	}
	if (strcmp(type, "tmpfs") == 0 && !bind) {
		al_strv_push(&p->root->tmpfs, dst);
		return;
	}
	if (!bind) {
		al_errors_add(errs, EINVAL, "config.json", where,
			      "type \"%s\": airlock shows host paths (bind), tmpfs, proc, "
			      "sysfs, cgroup and mqueue only",
			      type);
		return;
	}
	if (!m->source || m->source[0] != '/') {
		al_errors_add(errs, EINVAL, "config.json", where,
			      "a bind's source must be an absolute host path");
		return;
	}
	al_policy_add_mount(p, m->source, dst,
			    has_opt(m->options, "ro") ? AL_MOUNT_RO : AL_MOUNT_RW,
			    has_opt(m->options, "noexec") ? 0 : AL_UNSET, where);
}

static void rlimits(const struct al_oci_config *c, struct al_policy *p, struct al_errors *errs)
{
	for (size_t i = 0; i < c->n_rlimits; i++) {
		const struct al_oci_rlimit *r = &c->rlimits[i];
		char where[64];
		snprintf(where, sizeof(where), "process.rlimits[%zu]", i);
		if (r->soft != r->hard && r->resource != RLIMIT_NOFILE) {
			al_errors_add(errs, EINVAL, "config.json", where,
				      "%s: airlock sets one value for soft and hard (but for "
				      "RLIMIT_NOFILE)",
				      r->name);
			continue;
		}
		switch (r->resource) {
		case RLIMIT_NOFILE:
			/* spec.c refused a soft value above the hard one. */
			if (r->soft == 0) {
				al_errors_add(errs, EINVAL, "config.json", where,
					      "RLIMIT_NOFILE: a soft value of 0 leaves the "
					      "process no descriptor");
				break;
			}
			p->open_files = r->hard;
			p->open_files_soft = r->soft < r->hard ? r->soft : 0;
			break;
		case RLIMIT_NPROC:
			/* Processes are bounded by the pids cgroup of the
			 * sandbox (linux.resources.pids), whose ids are its own:
			 * the per-user count is taken as a pids limit. */
			if (!p->pids || r->hard < p->pids)
				p->pids = r->hard;
			break;
		case RLIMIT_CORE:
			if (r->hard != 0)
				al_errors_add(
				    errs, EPERM, "config.json", where,
				    "RLIMIT_CORE: airlock's sandboxes make no core dumps");
			break;
		case RLIMIT_FSIZE:
			p->file_size = r->hard;
			break;
		default:
			al_errors_add(errs, EPERM, "config.json", where,
				      "%s: airlock sets its own bound on it", r->name);
		}
	}
}

static const char *ns_name(int type)
{
	switch (type) {
	case CLONE_NEWPID:
		return "pid";
	case CLONE_NEWNET:
		return "network";
	case CLONE_NEWIPC:
		return "ipc";
	case CLONE_NEWUTS:
		return "uts";
	case CLONE_NEWNS:
		return "mount";
	case CLONE_NEWUSER:
		return "user";
	case CLONE_NEWCGROUP:
		return "cgroup";
	default:
		return "a";
	}
}

/* The annotation that says the container is a pod's sandbox (its pause
 * process, made by containerd's CRI or CRI-O with the pod's runtime
 * handler), or NULL. */
static const char *pod_sandbox(const struct al_oci_config *c)
{
	static const char *const keys[] = {"io.kubernetes.cri.container-type",
					   "io.kubernetes.cri-o.ContainerType"};

	for (size_t i = 0; c->annotations && c->annotations[i]; i += 2)
		for (size_t k = 0; k < AL_ARRAY_SIZE(keys); k++)
			if (strcmp(c->annotations[i], keys[k]) == 0 &&
			    strcmp(c->annotations[i + 1], "sandbox") == 0)
				return keys[k];
	return NULL;
}

static void namespaces(const struct al_oci_config *c, struct al_policy *p, struct al_oci_extra *x,
		       struct al_errors *errs)
{
	static const struct {
		int type;
		const char *name;
	} want[] = {{CLONE_NEWPID, "pid"},
		    {CLONE_NEWNS, "mount"},
		    {CLONE_NEWIPC, "ipc"},
		    {CLONE_NEWUTS, "uts"},
		    {CLONE_NEWNET, "network"}};
	bool user = false, cgroup = false;
	const char *sandbox = pod_sandbox(c);

	for (size_t i = 0; i < c->n_namespaces; i++) {
		const struct al_oci_ns *ns = &c->namespaces[i];
		char where[64];
		snprintf(where, sizeof(where), "linux.namespaces[%zu]", i);
		if (ns->type == CLONE_NEWTIME) {
			al_errors_add(errs, EINVAL, "config.json", where,
				      "a time namespace: airlock makes none");
			continue;
		}
		if (ns->type == CLONE_NEWUSER)
			user = true;
		if (ns->type == CLONE_NEWCGROUP)
			cgroup = true;
		if (ns->path && ns->type == CLONE_NEWNET && sandbox && !x->pod_netns) {
			/* A pod's sandbox (pause) container: joining would put
			 * its rules in the pod's namespace first, and every app
			 * container of the pod would then be refused. The
			 * pause process gets airlock's own, loopback only
			 * (stricter, whoever set the annotation). Its
			 * supervisor, the state's pid, enters the pod's:
			 * containerd's CRI gives the pod's app containers
			 * /proc/PID/ns/net of that pid to join. */
			char applied[700];
			snprintf(applied, sizeof(applied),
				 "network namespace %s not joined by the container (%s: the "
				 "pod's sandbox container): airlock's own, loopback only, made "
				 "for it; its supervisor (the state's pid) enters %s, where the "
				 "pod's app containers find it",
				 ns->path, sandbox, ns->path);
			al_oci_note(x, where, applied);
			x->pod_netns = xstrdup(ns->path);
		} else if (ns->path && ns->type == CLONE_NEWNET && !p->root->netns) {
			/* Joined: the engine's addresses, routes and published
			 * ports stay; airlock's rules go in, so that nothing
			 * leaves but through the gateway (exception 3). */
			char applied[700];
			snprintf(applied, sizeof(applied),
				 "network namespace %s joined: airlock's rules installed in it "
				 "(out only through the gateway; with no gateway, nothing out), "
				 "removed when the container ends",
				 ns->path);
			al_oci_note(x, where, applied);
			p->root->netns = xstrdup(ns->path);
			p->root->netns_field = xasprintf("%s.path", where);
		} else if (ns->path) {
			/* Never joined: another container's namespace would share
			 * its processes, memory or files. The container gets a
			 * namespace of its own, stricter (exception 3). */
			char applied[600];
			snprintf(applied, sizeof(applied),
				 "%s namespace %s not joined: airlock's own made instead",
				 ns_name(ns->type), ns->path);
			al_oci_note(x, where, applied);
		}
	}
	for (size_t k = 0; k < AL_ARRAY_SIZE(want); k++) {
		bool found = false;
		for (size_t i = 0; i < c->n_namespaces; i++)
			found |= c->namespaces[i].type == want[k].type;
		if (!found)
			al_errors_add(errs, EPERM, "config.json", "linux.namespaces",
				      "no %s namespace asked for: sharing the host's is refused "
				      "(airlock makes one for every container)",
				      want[k].name);
	}
	if (!user)
		al_oci_note(x, "linux.namespaces",
			    "no user namespace asked for: airlock's own added, mapped to a slot of "
			    "its pool of host ids (never host root)");
	if (!cgroup)
		al_oci_note(x, "linux.namespaces",
			    "no cgroup namespace asked for: airlock's own added");
}

static void resources(const struct al_oci_config *c, struct al_policy *p, struct al_errors *errs)
{
	if (c->has_memory_limit && c->memory_limit > 0)
		p->memory_bytes = (uint64_t)c->memory_limit;
	if (c->has_memory_kernel || c->has_memory_kernel_tcp)
		al_errors_add(errs, EINVAL, "config.json", "linux.resources.memory.kernel",
			      "airlock bounds kernel memory itself (socket buffers)");
	if (c->has_memory_disable_oom_killer && c->memory_disable_oom_killer)
		al_errors_add(errs, EPERM, "config.json", "linux.resources.memory.disableOOMKiller",
			      "a sandbox past its memory limit is always stopped");
	if (c->has_cpu_quota && c->cpu_quota > 0) {
		uint64_t period = c->has_cpu_period && c->cpu_period ? c->cpu_period : 100000;
		uint64_t milli = (uint64_t)c->cpu_quota * 1000 / period;
		p->cpus_milli = milli ? milli : 1;
	}
	if ((c->cpu_cpus && c->cpu_cpus[0]) || (c->cpu_mems && c->cpu_mems[0]))
		al_errors_add(errs, EOPNOTSUPP, "config.json", "linux.resources.cpu.cpus",
			      "cpusets are not airlock's");
	if ((c->has_cpu_realtime_runtime && c->cpu_realtime_runtime > 0) ||
	    (c->has_cpu_realtime_period && c->cpu_realtime_period > 0))
		al_errors_add(errs, EPERM, "config.json", "linux.resources.cpu.realtimeRuntime",
			      "no real-time scheduling in a sandbox");
	if (c->has_pids_limit && c->pids_limit > 0 &&
	    (!p->pids || (uint64_t)c->pids_limit < p->pids))
		p->pids = (uint64_t)c->pids_limit;
	if (c->has_block_io || c->has_hugepage_limits || c->has_network || c->has_rdma)
		al_errors_add(errs, EOPNOTSUPP, "config.json", "linux.resources",
			      "blockIO, hugepageLimits, network and rdma limits are not "
			      "airlock's");
	if (c->unified && c->unified[0])
		al_errors_add(errs, EOPNOTSUPP, "config.json", "linux.resources.unified",
			      "cgroup v2 files of the engine's are not airlock's to write");
	struct al_error err = {0};
	if (c->cgroups_path &&
	    al_cgroup_path_check(c->cgroups_path, &p->root->cgroup_path, &err) < 0)
		al_errors_add(errs, err.code, "config.json", "linux.cgroupsPath", "%s", err.msg);
}

/* "a,b,c" → the vector's entries (empty ones refused). */
static int split_list(const char *s, const char *what, char ***out, struct al_errors *errs)
{
	_cleanup_free_ char *copy = xstrdup(s);
	char *save = NULL;

	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		while (*t == ' ')
			t++;
		size_t n = strlen(t);
		while (n && t[n - 1] == ' ')
			t[--n] = '\0';
		if (!n)
			return al_errors_add(errs, EINVAL, "annotations", what, "an empty entry");
		al_strv_push(out, t);
	}
	return 0;
}

static void annotations(const struct al_oci_config *c, struct al_policy *p, struct al_oci_extra *x,
			struct al_errors *errs)
{
	const char *sandbox = pod_sandbox(c);

	x->pod_sandbox = sandbox != NULL;
	for (size_t i = 0; c->annotations && c->annotations[i]; i += 2) {
		const char *k = c->annotations[i], *v = c->annotations[i + 1];
		struct al_error err = {0};
		if (strncmp(k, "io.airlock.", 11) != 0)
			continue;
		if (sandbox && (strcmp(k, "io.airlock.network.allow") == 0 ||
				strcmp(k, "io.airlock.network.hosts") == 0 ||
				strcmp(k, "io.airlock.secrets") == 0)) {
			/* The engine passes the pod's annotations to its
			 * sandbox container too: its pause process has no
			 * egress (its supervisor sits in the pod's namespace,
			 * where no gateway of the pause's may make upstream
			 * connections); they are the app containers'. */
			char applied[200];
			snprintf(applied, sizeof(applied),
				 "not applied to the pod's sandbox container (%s): it has no "
				 "egress; the pod's app containers get it",
				 sandbox);
			al_oci_note(x, k, applied);
			continue;
		}
		if (strcmp(k, "io.airlock.network.allow") == 0) {
			_cleanup_(al_strv_freep) char **rules = NULL;
			if (split_list(v, k, &rules, errs) < 0)
				continue;
			for (size_t j = 0; rules && rules[j]; j++) {
				if (al_policy_check_allow_rule(rules[j], &err) < 0)
					al_errors_add(errs, EINVAL, "annotations", k, "%s",
						      err.msg);
				else
					al_strv_push(&p->net_allow, rules[j]);
			}
			free(p->network_mode);
			p->network_mode = xstrdup("gateway");
		} else if (strcmp(k, "io.airlock.network.hosts") == 0) {
			_cleanup_(al_strv_freep) char **pairs = NULL;
			if (split_list(v, k, &pairs, errs) < 0)
				continue;
			for (size_t j = 0; pairs && pairs[j]; j++) {
				char *eq = strchr(pairs[j], '=');
				if (!eq) {
					al_errors_add(errs, EINVAL, "annotations", k,
						      "\"%s\" is not NAME=ADDRESS", pairs[j]);
					continue;
				}
				*eq = '\0';
				if (al_policy_check_host_map(pairs[j], eq + 1, &err) < 0)
					al_errors_add(errs, EINVAL, "annotations", k, "%s",
						      err.msg);
				else
					al_policy_set_host(p, pairs[j], eq + 1);
			}
		} else if (strcmp(k, "io.airlock.profile") == 0) {
			free(p->profile);
			p->profile = xstrdup(v);
		} else if (strcmp(k, "io.airlock.secrets") == 0) {
			_cleanup_(al_strv_freep) char **names = NULL;
			if (split_list(v, k, &names, errs) < 0)
				continue;
			for (size_t j = 0; names && names[j]; j++) {
				al_strv_push(&p->secret_names, names[j]);
				al_strv_push(&p->secret_name_where, k);
			}
		} else if (strcmp(k, "io.airlock.audit") == 0) {
			free(x->audit);
			x->audit = xstrdup(v);
		} else if (strcmp(k, "io.airlock.backend") == 0) {
			free(p->backend);
			p->backend = xstrdup(v);
		} else if (strcmp(k, "io.airlock.timeout") == 0) {
			char *end;
			unsigned long long s = strtoull(v, &end, 10);
			if (!*v || *end || s == 0 || s > AL_OCI_TIMEOUT_MAX_S)
				al_errors_add(errs, EINVAL, "annotations", k,
					      "seconds, 1 to a year: \"%s\"", v);
			else
				p->timeout_ms = s * 1000;
			x->timeout = true;
		} else {
			al_errors_add(errs, EINVAL, "annotations", k,
				      "not an annotation airlock knows (io.airlock.network.allow, "
				      ".network.hosts, .profile, .secrets, .audit, .backend, "
				      ".timeout)");
		}
	}
}

static void process(const struct al_oci_config *c, struct al_policy *p, struct al_oci_extra *x,
		    struct al_errors *errs)
{
	if (!c->has_process) {
		al_errors_add(errs, EINVAL, "config.json", "process",
			      "missing: airlock's containers run the config's process");
		return;
	}
	p->command = al_strv_dup(c->args);
	for (size_t i = 0; c->env && c->env[i]; i++) {
		char *eq = strchr(c->env[i], '=');
		_cleanup_free_ char *name = xasprintf("%.*s", (int)(eq - c->env[i]), c->env[i]);
		al_policy_set_env(p, name, eq + 1);
	}
	p->workdir = xstrdup(c->cwd);
	p->root->uid = c->uid;
	p->root->gid = c->gid;
	if (c->n_additional_gids) {
		p->root->groups = xcalloc(c->n_additional_gids, sizeof(uint32_t));
		memcpy(p->root->groups, c->additional_gids,
		       c->n_additional_gids * sizeof(uint32_t));
		p->root->n_groups = c->n_additional_gids;
	}
	p->root->umask = c->has_umask ? c->umask : 022;
	if (c->command_line || c->username)
		al_errors_add(errs, EINVAL, "config.json", "process",
			      "commandLine and username are Windows-only");
	x->tty = c->terminal;
	if (c->has_console_size && c->console_rows < 65536 && c->console_cols < 65536) {
		x->rows = (unsigned short)c->console_rows;
		x->cols = (unsigned short)c->console_cols;
	}
	if (c->has_capabilities)
		al_oci_note(
		    x, "process.capabilities",
		    "dropped: the container's processes hold no capability, as under airlock "
		    "run");
	if (c->apparmor_profile && c->apparmor_profile[0])
		al_errors_add(errs, EOPNOTSUPP, "config.json", "process.apparmorProfile",
			      "airlock confines with landlock and seccomp, not AppArmor");
	if (c->selinux_label && c->selinux_label[0])
		al_errors_add(errs, EOPNOTSUPP, "config.json", "process.selinuxLabel",
			      "airlock confines with landlock and seccomp, not SELinux");
	if (c->has_oom_score_adj && c->oom_score_adj < 0)
		al_errors_add(errs, EPERM, "config.json", "process.oomScoreAdj",
			      "%d: a sandbox is never made less likely to be killed",
			      c->oom_score_adj);
	else if (c->has_oom_score_adj)
		p->root->oom_score_adj = c->oom_score_adj;
	if (c->io_priority_class)
		al_errors_add(errs, EOPNOTSUPP, "config.json", "process.ioPriority",
			      "not airlock's to set");
	rlimits(c, p, errs);
}

int al_oci_policy(const struct al_oci_config *c, const char *bundle, struct al_policy **ret,
		  struct al_oci_extra *x, struct al_errors *errs)
{
	_cleanup_(al_policy_freep) struct al_policy *p = al_policy_new("config.json");
	size_t before = al_errors_count(errs);

	*x = (struct al_oci_extra){0};
	p->root = xcalloc(1, sizeof(*p->root));
	p->root->host = c->root_path[0] == '/' ? xstrdup(c->root_path)
					       : xasprintf("%s/%s", bundle, c->root_path);
	p->root->readonly = c->root_readonly;
	p->network_mode = xstrdup("none");
	if (c->hostname && c->hostname[0])
		p->hostname = xstrdup(c->hostname);
	if (c->domainname && c->domainname[0])
		al_errors_add(errs, EOPNOTSUPP, "config.json", "domainname",
			      "airlock sets no NIS domain name");
	process(c, p, x, errs);
	for (size_t i = 0; i < c->n_mounts; i++)
		mount_one(c, i, p, errs);
	/* Hooks run on the host as root: create runs them only where the
	 * operator policy allows (oci.hooks); those that would run inside the
	 * container are never airlock's to run. */
	if (c->n_hooks[AL_OCI_HOOK_CREATE_CONTAINER] || c->n_hooks[AL_OCI_HOOK_START_CONTAINER])
		al_errors_add(errs, EPERM, "config.json", "hooks",
			      "createContainer and startContainer hooks would run inside the "
			      "container: airlock runs nothing of the engine's in a sandbox");
	for (size_t t = 0; t < AL_OCI_HOOK_KINDS; t++)
		x->hooks |= c->n_hooks[t] > 0;
	namespaces(c, p, x, errs);
	if (c->n_uid_maps) {
		p->root->uid_map = xcalloc(c->n_uid_maps, sizeof(*p->root->uid_map));
		for (size_t i = 0; i < c->n_uid_maps; i++)
			p->root->uid_map[i] =
			    (struct al_id_range){c->uid_maps[i].container_id,
						 c->uid_maps[i].host_id, c->uid_maps[i].size};
		p->root->n_uid_map = c->n_uid_maps;
	}
	if (c->n_gid_maps) {
		p->root->gid_map = xcalloc(c->n_gid_maps, sizeof(*p->root->gid_map));
		for (size_t i = 0; i < c->n_gid_maps; i++)
			p->root->gid_map[i] =
			    (struct al_id_range){c->gid_maps[i].container_id,
						 c->gid_maps[i].host_id, c->gid_maps[i].size};
		p->root->n_gid_map = c->n_gid_maps;
	}
	for (size_t i = 0; c->sysctl && c->sysctl[i]; i += 2) {
		if (!al_plan_sysctl_allowed(c->sysctl[i]))
			al_errors_add(errs, EPERM, "config.json", "linux.sysctl",
				      "\"%s\" is not among those a sandbox may set (its own "
				      "network namespace's ping_group_range, "
				      "ip_unprivileged_port_start, ip_local_port_range)",
				      c->sysctl[i]);
		al_strv_push(&p->root->sysctl, c->sysctl[i]);
		al_strv_push(&p->root->sysctl, c->sysctl[i + 1]);
	}
	resources(c, p, errs);
	struct sock_filter *prog = NULL;
	size_t prog_len = 0;
	if (al_oci_seccomp(c, &prog, &prog_len, errs) == 0 && prog) {
		p->root->seccomp = prog;
		p->root->seccomp_len = prog_len;
	}
	for (size_t i = 0; i < c->n_devices; i++)
		al_errors_add(errs, EPERM, "config.json", "linux.devices",
			      "%s: a sandbox's devices are airlock's own (null, zero, full, "
			      "random, urandom, tty, its terminals)",
			      c->devices[i].path);
	p->root->masked = al_strv_dup(c->masked_paths);
	p->root->readonly_paths = al_strv_dup(c->readonly_paths);
	if (c->rootfs_propagation && strcmp(c->rootfs_propagation, "private") &&
	    strcmp(c->rootfs_propagation, "rprivate") && strcmp(c->rootfs_propagation, "slave") &&
	    strcmp(c->rootfs_propagation, "rslave"))
		al_errors_add(errs, EPERM, "config.json", "linux.rootfsPropagation",
			      "\"%s\": a sandbox's mounts are private to it",
			      c->rootfs_propagation);
	if (c->has_mount_label && c->mount_label && c->mount_label[0])
		al_errors_add(errs, EOPNOTSUPP, "config.json", "linux.mountLabel",
			      "airlock confines with landlock and seccomp, not SELinux");
	if (c->has_personality || c->has_intel_rdt || c->has_time_offsets)
		al_errors_add(errs, EOPNOTSUPP, "config.json", "linux",
			      "personality, intelRdt and timeOffsets are not airlock's");
	for (size_t i = 0; c->present_unmodelled && c->present_unmodelled[i]; i++)
		al_errors_add(errs, EOPNOTSUPP, "config.json", c->present_unmodelled[i],
			      "not something airlock can honour");
	annotations(c, p, x, errs);
	if (al_errors_count(errs) > before)
		return -EINVAL;
	*ret = TAKE_PTR(p);
	return 0;
}
