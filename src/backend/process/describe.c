/* The process backend's facts, its usable() and probe(), and the plan in
 * its terms: landlock rules on the host's own paths (it makes no mounts, so
 * a path is seen where it is on the host or not at all), the scratch a
 * private directory of the run's, the workdir and env moved there. */
#include "backend/process/process.h"

#include <errno.h>
#include <linux/landlock.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/sys.h"
#include "core/util.h"

const struct al_backend_facts al_process_facts = {
    .summary = "no namespaces: the command runs on the host as the run's own host uid, under "
	       "landlock, seccomp, rlimits and the run's cgroup (needs root: rootless it is "
	       "unusable)",
    .files = "landlock: only the plan's host paths, where they are on the host (no mounts, "
	     "so no input at another path, no synthesized /etc files); the scratch a private "
	     "0700 tmpfs of the run's uid, removed at the end, with HOME, TMPDIR and the workdir "
	     "moved into it; no private /tmp: a tool that hardcodes /tmp finds the host's, "
	     "closed by landlock",
    .egress = "the run's gateway on the host's 127.0.0.1 (HTTP proxy and SOCKS at ports the "
	      "kernel picks; no DNS inside: names go to the proxies): landlock ABI 4+ allows TCP "
	      "connect to those two ports only, an nftables table of the run (meta skuid) drops "
	      "every other packet of its uid, IPv4 and IPv6, seccomp refuses UDP, raw, netlink "
	      "and Unix sockets; the gateway serves only clients whose socket is the run's uid "
	      "(sock_diag). No private loopback: 127.0.0.1 is the host's, and of its services "
	      "only the gateway's two ports are reachable",
    .pids = "not hidden: the host's processes are visible in /proc; landlock (ABI 6+) keeps "
	    "the command's signals inside the run",
    .kernel = "the host's kernel through the native seccomp allowlist and a socket filter; "
	      "no listen() (no TCP server) and no System V IPC or message queues, which would "
	      "be the host's",
    .limits = "the run's cgroup (memory, pids, CPU) and rlimits; output capped by the "
	      "supervisor",
    .exec = "no",
    .features = AL_BACKEND_NETWORK,
};

/* Root: the run's own host uid (the slot pool) is what keeps its processes
 * apart from every other user's, and what init's final kill is scoped to;
 * landlock 4+: what stops TCP. */
int al_process_usable(char *why, size_t len)
{
	int abi = al_landlock_abi();

	if (geteuid() != 0) {
		snprintf(why, len,
			 "needs root: the command runs as a host uid of the run's own (the slot "
			 "pool), which an ordinary user cannot give it");
		return 0;
	}
	if (abi < 4) {
		snprintf(why, len,
			 "needs landlock ABI 4 or later (TCP rules); this kernel has %s%d",
			 abi ? "ABI " : "no landlock, ", abi);
		return 0;
	}
	return 1;
}

/* The plan's scratch face at path (its sandbox path), or NULL. */
static const struct al_fs_entry *face_of(const struct al_plan *p, const char *path)
{
	for (size_t i = 0; i < p->n_fs; i++) {
		const struct al_fs_entry *e = &p->fs[i];
		if (e->kind == AL_FS_SCRATCH && al_path_is_under(path, e->path))
			return e;
	}
	return NULL;
}

int al_process_probe(const struct al_plan *p, struct al_error *err)
{
	char why[200];

	if (!al_process_usable(why, sizeof(why)))
		return al_error_set(err, EOPNOTSUPP, "backend process is not usable here: %s", why);
	if (p->tty)
		return al_error_set(err, EOPNOTSUPP,
				    "backend process has no terminal of its own (-t/--tty): "
				    "use --backend native");
	if (p->n_copy_in || p->n_copy_out)
		return al_error_set(err, EOPNOTSUPP,
				    "backend process cannot copy files in or out of the scratch "
				    "(--copy-in/--copy-out, %s)",
				    p->n_copy_in ? p->copy_in[0].origin : p->copy_out[0].origin);
	for (size_t i = 0; i < p->n_fs; i++) {
		const struct al_fs_entry *e = &p->fs[i];
		if ((e->kind == AL_FS_HOST || e->kind == AL_FS_DEVICE) &&
		    strcmp(e->path, e->source) != 0)
			return al_error_set(
			    err, EOPNOTSUPP,
			    "backend process makes no mounts, so it cannot show host "
			    "path %s at %s (%s): give it at its own path (%s:%s)",
			    e->source, e->path, e->what ? e->what : "an entry", e->source,
			    e->source);
		if (e->kind == AL_FS_PTYS)
			return al_error_set(err, EOPNOTSUPP,
					    "backend process has no terminals of its own (%s)",
					    e->path);
	}
	if (!face_of(p, p->workdir))
		return al_error_set(err, EOPNOTSUPP,
				    "backend process needs the workdir (%s) in the scratch",
				    p->workdir);
	return 0;
}

static void add_rule(struct al_native_plan *np, const char *path, uint64_t access)
{
	access &= al_landlock_fs_all(np->landlock_abi);
	for (size_t i = 0; i < np->n_ll_rules; i++)
		if (strcmp(np->ll_rules[i].path, path) == 0) {
			np->ll_rules[i].access |= access;
			return;
		}
	np->ll_rules = xrealloc(np->ll_rules, (np->n_ll_rules + 1) * sizeof(*np->ll_rules));
	np->ll_rules[np->n_ll_rules++] =
	    (struct al_landlock_rule){.path = xstrdup(path), .access = access};
}

static uint64_t access_of(unsigned a)
{
	uint64_t r = 0;

	if (a & AL_FS_READ)
		r |= LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;
	if (a & AL_FS_EXEC)
		r |= LANDLOCK_ACCESS_FS_EXECUTE;
	if (a & AL_FS_WRITE)
		r |= al_landlock_fs_all(7) &
		     ~(LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_MAKE_CHAR |
		       LANDLOCK_ACCESS_FS_MAKE_BLOCK);
	return r;
}

/* A sandbox path inside a scratch face, moved to the scratch's host
 * directory: "/work/x" -> SCRATCH/work/x. NULL when not in one. */
static char *moved(const struct al_plan *p, const char *scratch, const char *path)
{
	const struct al_fs_entry *e = path[0] == '/' ? face_of(p, path) : NULL;

	if (!e)
		return NULL;
	return xasprintf("%s/%s%s", scratch, e->source, path + strlen(e->path));
}

/* The plan's proxy variables name the native layout's ports (net/layout.h):
 * here the listeners are at the host ports the kernel picked (0 in
 * describe, before there are any). NULL for any other value. */
static char *proxy_at(const char *value, const uint16_t *ports)
{
	static const char http[] = "http://127.0.0.1:" AL_PORT_STR(AL_GATEWAY_HTTP_PORT);
	static const char socks[] = "socks5h://127.0.0.1:" AL_PORT_STR(AL_GATEWAY_SOCKS_PORT);

	if (strcmp(value, http) == 0)
		return xasprintf("http://127.0.0.1:%u", (unsigned)ports[0]);
	if (strcmp(value, socks) == 0)
		return xasprintf("socks5h://127.0.0.1:%u", (unsigned)ports[1]);
	return NULL;
}

int al_process_lower(const struct al_plan *p, const char *scratch, struct al_process *pr,
		     struct al_error *err)
{
	struct al_native_plan *np;
	size_t n = 0;
	int r;

	if ((r = al_process_probe(p, err)) < 0)
		return r;
	if (!scratch)
		scratch = "SCRATCH";
	np = pr->np = xcalloc(1, sizeof(*np));
	np->landlock_abi = al_landlock_abi();
	np->landlock_fs = al_landlock_fs_all(np->landlock_abi);
	/* Every TCP connect and bind handled; with a gateway, its two ports
	 * allowed (a bind there fails: its listeners hold them). */
	np->landlock_net = LANDLOCK_ACCESS_NET_BIND_TCP | LANDLOCK_ACCESS_NET_CONNECT_TCP;
	if (p->gateway)
		for (size_t i = 0; i < AL_ARRAY_SIZE(pr->ports); i++)
			np->ll_ports[np->n_ll_ports++] = pr->ports[i];
	if (np->landlock_abi >= 6)
		np->landlock_scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL;
	for (size_t i = 0; i < p->n_fs; i++) {
		const struct al_fs_entry *e = &p->fs[i];
		_cleanup_free_ char *dir = NULL;

		switch (e->kind) {
		case AL_FS_HOST:
		case AL_FS_DEVICE:
			add_rule(np, e->source, access_of(e->access));
			break;
		case AL_FS_PROC:
			/* The host's /proc: the pids promise is not kept (facts). */
			add_rule(np, "/proc", access_of(AL_FS_READ));
			break;
		case AL_FS_SCRATCH:
			dir = xasprintf("%s/%s", scratch, e->source);
			add_rule(np, dir,
				 access_of(AL_FS_READ | AL_FS_WRITE |
					   (p->scratch_exec ? AL_FS_EXEC : 0)));
			break;
		default:
			/* Links, airlock's own files and directories: the host's
			 * stay hidden unless the plan names them as host paths. */
			break;
		}
	}
	np->seccomp.len = al_seccomp_program_len;
	np->seccomp.filter = (struct sock_filter *)al_seccomp_program;
	np->seccomp_rules = al_seccomp_table(&np->n_seccomp_rules);
	al_seccomp_summarize(np->seccomp_rules, np->n_seccomp_rules, &np->seccomp_summary);

	pr->view = *p;
	pr->workdir = moved(p, scratch, p->workdir);
	pr->view.workdir = pr->workdir;
	while (p->envp[n])
		n++;
	pr->envp = xcalloc(n + 1, sizeof(char *));
	for (size_t i = 0; i < n; i++) {
		const char *eq = strchr(p->envp[i], '=');
		_cleanup_free_ char *to = eq ? moved(p, scratch, eq + 1) : NULL;
		if (eq && !to && p->gateway)
			to = proxy_at(eq + 1, pr->ports);
		pr->envp[i] = to ? xasprintf("%.*s=%s", (int)(eq - p->envp[i]), p->envp[i], to)
				 : xstrdup(p->envp[i]);
	}
	pr->view.envp = pr->envp;
	return 0;
}

void al_process_free(struct al_process *pr)
{
	if (!pr)
		return;
	al_native_plan_free(pr->np);
	for (size_t i = 0; pr->envp && pr->envp[i]; i++)
		free(pr->envp[i]);
	free(pr->envp);
	free(pr->workdir);
	free(pr->scratch);
	free(pr);
}

int al_process_describe(const struct al_plan *p, FILE *f, json_t *json, struct al_error *err)
{
	struct al_process *pr = xcalloc(1, sizeof(*pr));
	int r = al_process_lower(p, NULL, pr, err);

	if (r < 0) {
		al_process_free(pr);
		return r;
	}
	if (f) {
		fprintf(f,
			"process:    uid and gid of the run's own slot, no capabilities, "
			"no_new_privs; workdir %s\n",
			pr->workdir);
		fprintf(f, "landlock:   ABI %d, %zu path rules on host paths, %s, %s\n",
			pr->np->landlock_abi, pr->np->n_ll_rules,
			p->gateway ? "TCP connect to the gateway's two ports only (picked at "
				     "the run)"
				   : "no TCP port",
			pr->np->landlock_scoped ? "scoped (abstract unix sockets, signals)"
						: "not scoped");
		for (size_t i = 0; i < pr->np->n_ll_rules; i++)
			fprintf(f, "  allow    %s (access 0x%llx)\n", pr->np->ll_rules[i].path,
				(unsigned long long)pr->np->ll_rules[i].access);
		fprintf(f,
			"sockets:    TCP (which landlock refuses%s) and stream socketpairs only; "
			"no listen(), no System V IPC or message queues\n",
			p->gateway ? " but to the gateway" : "");
		if (p->gateway)
			fprintf(f,
				"egress:     the gateway's HTTP proxy and SOCKS on the host's "
				"127.0.0.1, clients of the run's uid only; nftables table inet "
				"%sUID: the uid's other packets dropped\n",
				AL_PROCESS_NFT_PREFIX);
		fprintf(f, "seccomp:    %u BPF instructions (the native table)\n",
			(unsigned)pr->np->seccomp.len);
	} else {
		json_t *rules = json_array();
		for (size_t i = 0; i < pr->np->n_ll_rules; i++)
			json_array_append_new(
			    rules, json_pack("{s:s, s:I}", "path", pr->np->ll_rules[i].path,
					     "access", (json_int_t)pr->np->ll_rules[i].access));
		json_object_set_new(json, "workdir_host", json_string(pr->workdir));
		json_object_set_new(json, "landlock",
				    json_pack("{s:i, s:o, s:[]}", "abi", pr->np->landlock_abi,
					      "rules", rules, "tcp_ports"));
		json_object_set_new(json, "egress",
				    p->gateway
					? json_pack("{s:s, s:s}", "listeners",
						    "127.0.0.1 (ports picked at the run)",
						    "nftables_table", AL_PROCESS_NFT_PREFIX "UID")
					: json_null());
	}
	al_process_free(pr);
	return 0;
}
