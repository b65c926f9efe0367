/* `create`: the bundle's config through the request layer to a final
 * plan, everything checked before anything is made; then the state
 * directory, the terminal for the engine's console socket, the
 * supervisor's socket, and the supervisor forked (super.h), which builds
 * the sandbox and says when it is ready. Only then are state.json and the
 * pid file written and the supervisor told to go on; if create dies
 * before that, the supervisor removes the container again. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <linux/nsfs.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "audit/audit.h"
#include "backend/native/netns.h"
#include "cgroup/cgroup.h"
#include "core/cleanup.h"
#include "core/log.h"
#include "core/sys.h"
#include "core/util.h"
#include "oci/config.h"
#include "oci/internal.h"
#include "oci/oci.h"
#include "oci/proto.h"
#include "oci/spec.h"
#include "oci/state.h"
#include "oci/super.h"
#include "policy/operator.h"
#include "request/request.h"

#define READY_WAIT_MS 120000

int al_oci_read_config(const char *bundle, char **real, struct al_oci_config **ret,
		       struct al_errors *errs)
{
	char path[PATH_MAX], *buf;
	struct stat st;

	if (!realpath(bundle ? bundle : ".", path))
		return al_errors_add(errs, errno, NULL, "--bundle", "%s: %s", bundle ? bundle : ".",
				     strerror(errno));
	*real = xstrdup(path);
	_cleanup_free_ char *file = xasprintf("%s/config.json", path);
	_cleanup_close_ int fd = open(file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 || fstat(fd, &st) < 0)
		return al_errors_add(errs, errno, NULL, NULL, "%s: %s", file, strerror(errno));
	if (!S_ISREG(st.st_mode) || st.st_size > AL_OCI_MAX_CONFIG)
		return al_errors_add(errs, EINVAL, NULL, NULL,
				     "%s: not a regular file of at most %u bytes", file,
				     AL_OCI_MAX_CONFIG);
	buf = xmalloc((size_t)st.st_size + 1);
	ssize_t n = 0, k;
	while (n < st.st_size && (k = read(fd, buf + n, (size_t)(st.st_size - n))) != 0) {
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			free(buf);
			return al_errors_add(errs, errno, NULL, NULL, "%s: %s", file,
					     strerror(errno));
		}
		n += k;
	}
	int r = al_oci_config_parse(buf, (size_t)n, ret, errs);
	free(buf);
	return r;
}

/* A host pty for the container's terminal: the master to the engine's
 * console socket, the slave (raw: the line discipline is the sandbox's
 * own pty's) is ours. */
int al_oci_console(const char *sock_path, unsigned short rows, unsigned short cols, int *slave,
		   struct al_error *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct termios t;
	char name[64];
	int master = -1, s = -1, sock = -1, r;

	if (strlen(sock_path) >= sizeof(sa.sun_path))
		return al_error_set(err, ENAMETOOLONG, "--console-socket %s: too long", sock_path);
	strcpy(sa.sun_path, sock_path);
	master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (master < 0 || grantpt(master) < 0 || unlockpt(master) < 0 ||
	    ptsname_r(master, name, sizeof(name)) != 0 ||
	    (s = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0) {
		r = al_error_setsys(err, errno, "making a terminal for the container");
		goto fail;
	}
	if (tcgetattr(s, &t) == 0) {
		cfmakeraw(&t);
		tcsetattr(s, TCSANOW, &t);
	}
	if (rows && cols) {
		struct winsize ws = {.ws_row = rows, .ws_col = cols};
		ioctl(master, TIOCSWINSZ, &ws);
	}
	sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (sock < 0 || connect(sock, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		r = al_error_setsys(err, errno, "--console-socket %s", sock_path);
		goto fail;
	}
	char ctl[CMSG_SPACE(sizeof(int))] = {0};
	struct iovec iov = {.iov_base = name, .iov_len = strlen(name)};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &master, sizeof(int));
	if (sendmsg(sock, &mh, MSG_NOSIGNAL) < 0) {
		r = al_error_setsys(err, errno, "sending the terminal to --console-socket %s",
				    sock_path);
		goto fail;
	}
	close(sock);
	close(master);
	*slave = s;
	return 0;
fail:
	if (sock >= 0)
		close(sock);
	if (s >= 0)
		close(s);
	if (master >= 0)
		close(master);
	return r;
}

static void timestamp(char *buf, size_t len)
{
	struct timespec ts;
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	size_t n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + n, len - n, ".%09ldZ", ts.tv_nsec);
}

int al_oci_write_pid_file(const char *path, pid_t pid, struct al_error *err)
{
	_cleanup_free_ char *tmp = xasprintf("%s.airlock-tmp", path);
	char text[32];
	/* A new file: never one planted there (a link, a hard link). */
	unlink(tmp);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);

	snprintf(text, sizeof(text), "%d", (int)pid);
	if (fd < 0)
		return al_error_setsys(err, errno, "--pid-file %s", path);
	int r = al_write_all(fd, text, strlen(text));
	close(fd);
	if (r < 0 || rename(tmp, path) < 0) {
		int e = r < 0 ? -r : errno;
		unlink(tmp);
		return al_error_setsys(err, e, "--pid-file %s", path);
	}
	return 0;
}

/* A namespace path the config names must be what it says: a namespace
 * of that type (config.c says which are joined: a network namespace's,
 * but for a pod's sandbox container; the others never are). Opened
 * without following it into a FIFO or a device (al_open_ns()): create
 * never hangs nor opens one as root. */
static int check_ns_paths(const struct al_oci_config *c, struct al_errors *errs)
{
	size_t before = al_errors_count(errs);

	for (size_t i = 0; i < c->n_namespaces; i++) {
		const struct al_oci_ns *ns = &c->namespaces[i];
		char where[64];
		if (!ns->path)
			continue;
		snprintf(where, sizeof(where), "linux.namespaces[%zu].path", i);
		int fd = al_open_ns(ns->path);
		int type = fd >= 0 ? ioctl(fd, NS_GET_NSTYPE) : -1;
		if (fd >= 0)
			close(fd);
		if (fd == -EINVAL)
			al_errors_add(errs, EINVAL, "config.json", where,
				      "%s is not a namespace (not a file of nsfs)", ns->path);
		else if (fd < 0)
			al_errors_add(errs, -fd, "config.json", where, "%s: %s", ns->path,
				      strerror(-fd));
		else if (type != ns->type)
			al_errors_add(errs, EINVAL, "config.json", where,
				      "%s is not a namespace of the type the entry names",
				      ns->path);
	}
	return al_errors_count(errs) > before ? -EINVAL : 0;
}

/* A pod's sandbox container: the pod's network namespace at path, which
 * its supervisor will enter (super.h), opened into *fd and held to what
 * an app container's join is (the pod's app containers join it next):
 * never the host's, nor one another user namespace owns. */
static int pod_netns_open(const char *path, int *fd, struct al_error *err)
{
	struct al_error e = {0};

	*fd = al_open_ns(path);
	if (*fd < 0)
		return al_error_setsys(err, -*fd,
				       "linux.namespaces: the pod's network namespace %s", path);
	if (al_netns_engine_check(*fd, &e) < 0)
		return al_error_set(err, e.code ? e.code : EPERM,
				    "linux.namespaces: the pod's network namespace %s (the pod's "
				    "sandbox container's supervisor enters it): %s",
				    path, e.msg);
	return 0;
}

/* A pod's sandbox container lives as long as its pod: the engine ends it
 * with the pod. Without the pod's io.airlock.timeout it gets the longest
 * lifetime its operator profile allows (without a ceiling, the most an
 * annotation may ask), not the default, which would end the pod under its
 * app containers; each app container keeps its own. */
static void pod_sandbox_lifetime(struct al_request *rq, const struct al_policy *pol,
				 struct al_oci_extra *x)
{
	const struct al_op_profile *pr =
	    rq->op ? al_operator_profile(rq->op, pol->profile ? pol->profile : AL_OPERATOR_PROFILE)
		   : NULL;
	bool ceiling = pr && pr->limits[AL_OPL_TIMEOUT].max;
	uint64_t max = ceiling ? pr->limits[AL_OPL_TIMEOUT].max : AL_OCI_TIMEOUT_MAX_S * 1000;
	char applied[200];

	if (x->timeout)
		return; /* the pod's own */
	rq->plan->timeout_ms = max;
	snprintf(applied, sizeof(applied),
		 "the pod's sandbox container, no timeout given: %llu s, the longest %s, so "
		 "that it does not end its pod",
		 (unsigned long long)(max / 1000),
		 ceiling ? "its operator profile allows" : "an annotation may ask");
	al_oci_note(x, "io.airlock.timeout", applied);
}

/* The supervisor's answer on the sync socket, within READY_WAIT_MS. */
static int wait_ready(int sync, pid_t child, struct al_error *err)
{
	struct pollfd pf = {.fd = sync, .events = POLLIN};
	char buf[700];

	int n = poll(&pf, 1, READY_WAIT_MS);
	ssize_t k = n > 0 ? recv(sync, buf, sizeof(buf) - 1, 0) : -1;
	if (k <= 0) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
		return al_error_set(
		    err, n == 0 ? ETIMEDOUT : EPIPE, "the container's supervisor %s",
		    n == 0 ? "did not say it was ready in time" : "died while starting");
	}
	buf[k] = '\0';
	if (strcmp(buf, "ready") == 0)
		return 0;
	waitpid(child, NULL, 0);
	return al_error_set(err, EIO, "%s", strncmp(buf, "error: ", 7) == 0 ? buf + 7 : buf);
}

int al_oci_create(const struct al_oci_ctx *g, const char *id, const struct al_oci_create_opts *o,
		  struct al_error *err)
{
	_cleanup_(al_errors_clear) struct al_errors errs = {0};
	_cleanup_(al_oci_config_freep) struct al_oci_config *cfg = NULL;
	_cleanup_(al_policy_freep) struct al_policy *pol = NULL;
	_cleanup_(al_request_clear) struct al_request rq = {0};
	_cleanup_(al_oci_extra_clear) struct al_oci_extra x = {0};
	_cleanup_free_ char *bundle = NULL;
	_cleanup_close_ int rootfd = -1, dirfd = -1, lsock = -1, slave = -1, lockfd = -1,
			    podns = -1;
	int sync[2] = {-1, -1};
	char run_id[24], sock_path[64];
	const char *cgroup_path = NULL;
	int r;

	if ((r = al_oci_id_check(id, err)) < 0)
		return r;
	if (al_oci_read_config(o->bundle, &bundle, &cfg, &errs) < 0 ||
	    al_oci_policy(cfg, bundle, &pol, &x, &errs) < 0 || check_ns_paths(cfg, &errs) < 0)
		return al_oci_errors(&errs, err);
	/* The audit stream: in the operator's --audit-dir, the sink the
	 * annotation names (NAME.jsonl) or the container's own
	 * (container-ID.jsonl). */
	_cleanup_free_ char *audit = NULL, *record = NULL;
	if (x.audit && !g->audit_dir)
		return al_error_set(err, EPERM,
				    "io.airlock.audit: this runtime has no --audit-dir for "
				    "audit streams");
	if (x.audit && (al_oci_id_check(x.audit, NULL) < 0 || x.audit[0] == '.' ||
			strncmp(x.audit, "container-", 10) == 0))
		return al_error_set(err, EINVAL,
				    "io.airlock.audit: \"%.64s\" is not a sink's name (letters, "
				    "digits, _ + - .; not container-*, each container's own)",
				    x.audit);
	if (g->audit_dir) {
		/* A container's own stream is container-ID.jsonl, which no
		 * annotation can name. */
		_cleanup_free_ char *own = xasprintf("container-%s", id);
		const char *name = x.audit ? x.audit : own;
		audit = xasprintf("%s/%s.jsonl", g->audit_dir, name);
		record = x.audit ? xasprintf("%s/%s.%s.result.json", g->audit_dir, name, id)
				 : xasprintf("%s/%s.result.json", g->audit_dir, name);
	}
	if (x.tty && !o->console_socket)
		return al_error_set(err, EINVAL,
				    "process.terminal is set: a --console-socket is needed to "
				    "receive the terminal");
	al_random_id(run_id, sizeof(run_id));
	/* No container shows the runtime's own places: the containers' state
	 * (their supervisors' sockets), the id pool, the audit streams, the
	 * engines' sockets. */
	const char *const never[] = {g->root,
				     "/run/airlock",
				     g->audit_dir ? g->audit_dir : "/run/airlock",
				     "/run/containerd",
				     "/run/podman",
				     "/run/crio",
				     "/run/docker.sock",
				     "/var/run/docker.sock",
				     NULL};
	struct al_request_config rc = {.operator_file = g->operator_file,
				       .operator_env = g->operator_env,
				       .term = g->term,
				       .run_id = run_id,
				       .never_paths = never};
	al_request_init(&rq, &rc, pol);
	if (al_request_plan(&rq, &errs) < 0) {
		if (rq.refused)
			al_request_refusals(&rq, &errs);
		return al_oci_errors(&errs, err);
	}
	/* Which profile a container is held to is the operator's: the
	 * default one, or one its oci.profiles lets containers choose. */
	bool granted = false;
	for (size_t i = 0; rq.op && rq.op->oci.profiles && rq.op->oci.profiles[i]; i++)
		granted |= pol->profile && strcmp(rq.op->oci.profiles[i], pol->profile) == 0;
	if (rq.file && pol->profile && strcmp(pol->profile, "default") != 0 && !granted)
		return al_error_set(err, EPERM,
				    "io.airlock.profile: \"%s\" is not among the profiles the "
				    "operator policy %s lets containers choose (oci.profiles)",
				    pol->profile, rq.file);
	if (x.hooks && (!rq.op || !rq.op->oci.hooks))
		return al_error_set(err, EPERM,
				    "hooks: they would run on the host as root; the operator "
				    "policy does not allow them (\"oci\": {\"hooks\": true})");
	if (x.pod_sandbox)
		pod_sandbox_lifetime(&rq, pol, &x);
	if ((r = al_request_probe(&rq, NULL, err)) < 0)
		return r;
	if (rq.plan->n_secrets || rq.plan->intercept) {
		struct rlimit no_core = {0, 0};
		if (setrlimit(RLIMIT_CORE, &no_core) < 0 || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
			return al_error_setsys(err, errno, "turning off core dumps before secrets");
	}
	if ((r = al_request_finish(&rq, err)) < 0)
		return r;
	if (x.pod_sandbox && rq.plan->gateway) /* config.c gives it none */
		return al_error_set(err, EPERM, "a pod's sandbox container has no egress");
	if (x.pod_netns && (r = pod_netns_open(x.pod_netns, &podns, err)) < 0)
		return r;
	if ((r = al_oci_root_open(g->root, &rootfd, err)) < 0 ||
	    (r = al_oci_dir_make(rootfd, id, &dirfd, err)) < 0)
		return r;
	/* Held until create ends: a directory without state.json whose lock
	 * is free is a create that died (state.h). */
	lockfd = openat(rootfd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (lockfd < 0 || flock(lockfd, LOCK_EX) < 0) {
		r = al_error_setsys(err, errno, "locking the state directory of %s", id);
		goto fail;
	}
	/* From here on a failure removes the directory again. */
	if (x.tty && (r = al_oci_console(o->console_socket, x.rows, x.cols, &slave, err)) < 0)
		goto fail;
	al_oci_dir_path(dirfd, "sock", sock_path, sizeof(sock_path));
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
	lsock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (lsock < 0 || bind(lsock, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(lsock, 16) < 0) {
		r = al_error_setsys(err, errno, "the container's socket");
		goto fail;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sync) < 0) {
		r = al_error_setsys(err, errno, "socketpair");
		goto fail;
	}
	json_t *start_extra =
	    json_pack("{s:{s:s, s:s, s:o}}", "oci", "id", id, "bundle", bundle, "exceptions",
		      x.notes ? json_incref(x.notes) : json_array());
	pid_t child = fork();
	if (child < 0) {
		r = al_error_setsys(err, errno, "fork");
		goto fail;
	}
	if (child == 0) {
		close(sync[0]);
		setsid();
		/* Without --log (podman passes none), the supervisor's messages
		 * go to the container's own log, state directory's "log". */
		int keep = g->log_fd;
		if (keep < 0 &&
		    (keep = openat(dirfd, "log",
				   O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600)) >=
			0)
			al_oci_log_to(keep);
		if (slave >= 0) {
			/* The terminal is the supervisor's own, as the
			 * container's: SIGWINCH tells it the engine's size. */
			if (ioctl(slave, TIOCSCTTY, 0) < 0 || dup2(slave, 0) < 0 ||
			    dup2(slave, 1) < 0 || dup2(slave, 2) < 0)
				_exit(125);
		}
		struct al_oci_super s = {.plan = rq.plan,
					 .cred = rq.cred,
					 .run_id = run_id,
					 .id = id,
					 .dirfd = dirfd,
					 .rootfd = rootfd,
					 .listen_fd = lsock,
					 .sync_fd = sync[1],
					 .tty = x.tty,
					 .audit_path = audit,
					 .start_extra = start_extra,
					 .keep_fd = keep,
					 .pod_netns_fd = podns};
		al_oci_super_main(&s);
	}
	json_decref(start_extra);
	close(sync[1]);
	sync[1] = -1;
	if ((r = wait_ready(sync[0], child, err)) < 0)
		goto fail;
	/* From here on a failure ends the supervisor (waited for) before it
	 * removes what it made: a cgroup at linux.cgroupsPath goes with it
	 * (airlock gc finds none of those). */
	cgroup_path = rq.plan->root->cgroup_path;
	if (x.hooks) {
		json_t *hooks = al_oci_hooks_json(cfg);
		json_t *hs =
		    json_pack("{s:s, s:s, s:s, s:i, s:s}", "ociVersion", cfg->oci_version, "id", id,
			      "status", "creating", "pid", (int)child, "bundle", bundle);
		r = al_oci_json_write(dirfd, "hooks.json", hooks, err);
		if (r == 0)
			r = al_oci_hooks_run(hooks, "prestart", hs, bundle, err);
		if (r == 0)
			r = al_oci_hooks_run(hooks, "createRuntime", hs, bundle, err);
		json_decref(hooks);
		json_decref(hs);
		if (r < 0) {
			kill(child, SIGKILL);
			waitpid(child, NULL, 0);
			goto fail;
		}
	}
	char created[64];
	timestamp(created, sizeof(created));
	json_t *ann = json_object();
	for (size_t i = 0; cfg->annotations && cfg->annotations[i]; i += 2)
		json_object_set_new(ann, cfg->annotations[i], json_string(cfg->annotations[i + 1]));
	struct al_oci_state st = {.id = (char *)id,
				  .bundle = bundle,
				  .created = created,
				  .oci_version = cfg->oci_version,
				  .pid = child,
				  .start_time = al_oci_start_time(child),
				  .annotations = ann,
				  .record = record,
				  .cgroup_path = rq.plan->root->cgroup_path};
	r = al_oci_state_write(dirfd, &st, err);
	json_decref(ann);
	if (r == 0 && o->pid_file)
		r = al_oci_write_pid_file(o->pid_file, child, err);
	if (r < 0) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
		goto fail;
	}
	if (send(sync[0], "go", 2, MSG_NOSIGNAL) != 2) {
		r = al_error_setsys(err, errno, "telling the supervisor to go on");
		waitpid(child, NULL, 0);
		goto fail;
	}
	close(sync[0]);
	return 0;
fail:
	if (sync[0] >= 0)
		close(sync[0]);
	if (sync[1] >= 0)
		close(sync[1]);
	if (cgroup_path)
		al_cgroup_remove_at(cgroup_path, true, NULL);
	al_oci_dir_remove(rootfd, id, NULL);
	return r;
}
