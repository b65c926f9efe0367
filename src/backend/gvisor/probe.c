/* What this machine's runsc can do, probed once per process under a
 * timeout (never assumed): where it is, its version, the platforms it
 * lists, and whether it starts a sandbox at all (`runsc do /bin/true`).
 * Also the backend's facts, its refusals of plans it cannot honour, and
 * `airlock gc`'s cleanup of the run directories a killed airlock left. */
#include "backend/gvisor/gvisor.h"
#include "backend/backend.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/sys.h"
#include "core/util.h"

/* A probe that takes longer than this is a runsc that cannot start here. */
#define PROBE_TIMEOUT_MS 10000

/* Run argv with its stdout and stderr into out (at most len - 1 bytes,
 * the rest discarded), in a process group of its own that is killed
 * after PROBE_TIMEOUT_MS (runsc's sandbox and gofer with it). Its wait
 * status, or -errno (-ETIMEDOUT when it was killed). */
static int run_capture(char *const argv[], char *out, size_t len)
{
	int pipefd[2], status = 0, r = 0;
	size_t got = 0;
	uint64_t deadline = al_now_ms() + PROBE_TIMEOUT_MS;
	pid_t pid;

	out[0] = '\0';
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		r = -errno;
		close(pipefd[0]);
		close(pipefd[1]);
		return r;
	}
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDONLY);
		if (setpgid(0, 0) < 0 || devnull < 0 || dup2(devnull, 0) < 0 ||
		    dup2(pipefd[1], 1) < 0 || dup2(pipefd[1], 2) < 0)
			_exit(126);
		execv(argv[0], argv);
		_exit(127);
	}
	close(pipefd[1]);
	for (;;) {
		uint64_t now = al_now_ms();
		struct pollfd p = {.fd = pipefd[0], .events = POLLIN};
		char buf[512];
		ssize_t n;

		if (now >= deadline) {
			r = -ETIMEDOUT;
			break;
		}
		int ready = poll(&p, 1, (int)(deadline - now));
		if (ready < 0 && errno != EINTR) {
			r = -errno;
			break;
		}
		if (ready <= 0)
			continue; /* the deadline is checked above: never read a pipe that is
				     not ready (a hung runsc holds it open) */
		n = read(pipefd[0], buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break; /* EOF: every holder of the pipe is gone */
		if (got + 1 < len) {
			size_t k = (size_t)n < len - 1 - got ? (size_t)n : len - 1 - got;
			memcpy(out + got, buf, k);
			got += k;
			out[got] = '\0';
		}
	}
	close(pipefd[0]);
	if (r < 0) {
		kill(-pid, SIGKILL);
		kill(pid, SIGKILL);
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return r < 0 ? r : status;
}

static bool find_runsc(char *buf, size_t len)
{
	static const char *const dirs[] = {"/usr/bin", "/usr/sbin", "/usr/local/bin",
					   "/usr/local/sbin"};
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(buf, len, "%s/runsc", dirs[i]);
		if (access(buf, X_OK) == 0)
			return true;
	}
	return false;
}

/* The first line of s, trimmed, into buf. */
static void first_line(const char *s, char *buf, size_t len)
{
	size_t n = strcspn(s, "\n");
	snprintf(buf, len, "%.*s", (int)n, s);
}

/* A successful probe is remembered until the next boot (/run is a tmpfs)
 * in a file of root's, keyed by runsc's identity (device, inode, size,
 * mtime) and whether /dev/kvm opens: a CLI run then skips the second that
 * starting a sandbox costs. Any change to runsc or the host's kvm probes
 * again. */
#define PROBE_CACHE AL_GVISOR_DIR "/.probe"

static void cache_key(const struct al_gvisor_host *h, char *key, size_t len)
{
	struct stat st;

	if (stat(h->runsc, &st) < 0) {
		key[0] = '\0';
		return;
	}
	snprintf(key, len, "%s %llu %llu %lld %lld.%09ld kvm=%d", h->runsc,
		 (unsigned long long)st.st_dev, (unsigned long long)st.st_ino,
		 (long long)st.st_size, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
		 access("/dev/kvm", R_OK | W_OK) == 0);
}

/* 1 when the cache holds key: the version and platform filled in. */
static int cache_read(struct al_gvisor_host *h, const char *key)
{
	char buf[1024], *nl, *plat;
	ssize_t n = key[0] ? al_read_file(PROBE_CACHE, buf, sizeof(buf) - 1) : -1;
	struct stat st;

	if (n <= 0 || stat(PROBE_CACHE, &st) < 0 || st.st_uid != 0 || (st.st_mode & 077))
		return 0;
	buf[n] = '\0';
	/* "KEY\nPLATFORM\nVERSION\n" */
	if (!(nl = strchr(buf, '\n')) || (size_t)(nl - buf) != strlen(key) ||
	    strncmp(buf, key, strlen(key)) != 0)
		return 0;
	plat = nl + 1;
	if (!(nl = strchr(plat, '\n')))
		return 0;
	*nl = '\0';
	if (strcmp(plat, "ptrace") == 0)
		h->platform = "ptrace";
	else if (strcmp(plat, "kvm") == 0)
		h->platform = "kvm";
	else
		return 0;
	first_line(nl + 1, h->version, sizeof(h->version));
	return 1;
}

static void cache_write(const struct al_gvisor_host *h, const char *key)
{
	char tmp[128], *text;
	int fd;

	if (!key[0])
		return;
	snprintf(tmp, sizeof(tmp), "%s.%d", PROBE_CACHE, (int)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	text = xasprintf("%s\n%s\n%s\n", key, h->platform, h->version);
	if (al_write_all(fd, text, strlen(text)) < 0 || close(fd) < 0 ||
	    rename(tmp, PROBE_CACHE) < 0)
		unlink(tmp);
	free(text);
}

static int probe_host(struct al_gvisor_host *h, char *why, size_t len)
{
	char key[512];

	char out[8192], dir[128];
	char *argv[12];
	int st;

	if (geteuid() != 0) {
		snprintf(why, len,
			 "runsc runs sandboxes as root only in this release (airlock is uid %u)",
			 (unsigned)geteuid());
		return 0;
	}
	if (!find_runsc(h->runsc, sizeof(h->runsc))) {
		snprintf(why, len, "runsc is not installed (Debian package runsc)");
		return 0;
	}
	cache_key(h, key, sizeof(key));
	if (cache_read(h, key))
		return 1;
	argv[0] = h->runsc;
	argv[1] = "--version";
	argv[2] = NULL;
	st = run_capture(argv, out, sizeof(out));
	if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		snprintf(why, len, "%s --version failed (%s)", h->runsc,
			 st == -ETIMEDOUT ? "timed out"
			 : st < 0	  ? strerror(-st)
					  : "non-zero exit");
		return 0;
	}
	first_line(out, h->version, sizeof(h->version));
	/* The platforms this runsc knows, from its own flag's help. */
	argv[1] = "flags";
	st = run_capture(argv, out, sizeof(out));
	bool ptrace = st >= 0 && strstr(out, "ptrace");
	h->platform = "ptrace";
	if (st >= 0 && strstr(out, "kvm") && access("/dev/kvm", R_OK | W_OK) == 0)
		h->platform = "kvm";
	else if (!ptrace) {
		snprintf(
		    why, len,
		    "%s lists no platform this machine can use (no ptrace; kvm needs /dev/kvm)",
		    h->runsc);
		return 0;
	}
	/* Start one sandbox: a runsc that cannot start here says so now. */
	snprintf(dir, sizeof(dir), "%s/probe-%d", AL_GVISOR_DIR, (int)getpid());
	if (mkdir("/run/airlock", 0755) < 0 && errno != EEXIST) {
		snprintf(why, len, "cannot make /run/airlock: %s", strerror(errno));
		return 0;
	}
	if ((mkdir(AL_GVISOR_DIR, 0711) < 0 && errno != EEXIST) ||
	    (mkdir(dir, 0700) < 0 && errno != EEXIST)) {
		snprintf(why, len, "cannot make %s: %s", dir, strerror(errno));
		return 0;
	}
	char root[160], platform[32];
	snprintf(root, sizeof(root), "--root=%s", dir);
	snprintf(platform, sizeof(platform), "--platform=%s", h->platform);
	char *doargv[] = {h->runsc,	      root, platform,	 "--network=none",
			  "--ignore-cgroups", "do", "/bin/true", NULL};
	st = run_capture(doargv, out, sizeof(out));
	al_gvisor_rmtree(-1, dir);
	/* A nested /dev/kvm may open and yet hang or fail every sandbox (seen
	 * on a VM: the sentry spun for minutes): then ptrace, if runsc has it. */
	if ((st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) && strcmp(h->platform, "kvm") == 0 &&
	    ptrace) {
		h->platform = "ptrace";
		snprintf(platform, sizeof(platform), "--platform=%s", h->platform);
		st = mkdir(dir, 0700) < 0 ? -errno : run_capture(doargv, out, sizeof(out));
		al_gvisor_rmtree(-1, dir);
	}
	if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		char line[200];
		first_line(out, line, sizeof(line));
		snprintf(why, len, "runsc cannot start a sandbox here (%s do /bin/true: %s%s%s)",
			 platform,
			 st == -ETIMEDOUT ? "timed out"
			 : st < 0	  ? strerror(-st)
					  : "failed",
			 line[0] ? ": " : "", line);
		return 0;
	}
	cache_write(h, key);
	return 1;
}

/* The probe's answer, for the whole process (a daemon's runs in threads
 * share it): made once, under pthread_once, and only read after. */
static struct al_gvisor_host host;
static int state;
static char reason[512];

static void probe_once(void)
{
	state = probe_host(&host, reason, sizeof(reason));
}

int al_gvisor_host(const struct al_gvisor_host **ret, char *why, size_t len)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, probe_once);
	if (len)
		snprintf(why, len, "%s", state ? "" : reason);
	*ret = state ? &host : NULL;
	return state;
}

int al_gvisor_check_plan(const struct al_plan *p, struct al_error *err)
{
	if (p->tty)
		return al_error_set(err, EOPNOTSUPP,
				    "backend gvisor has no terminal for the command in this "
				    "release (-t/--tty): run without it or use --backend native");
	for (size_t i = 0; i < p->n_fs; i++) {
		const struct al_fs_entry *e = &p->fs[i];
		if (e->kind == AL_FS_HOST && (e->access & AL_FS_WRITE))
			return al_error_set(err, EOPNOTSUPP,
					    "backend gvisor shows host files read-only only: %s "
					    "(%s) is writable in the plan; use the scratch and "
					    "--copy-out, or --backend native",
					    e->path, e->what ? e->what : "host path");
	}
	return 0;
}

/* Remove the tree at name under dirfd (AT_FDCWD when dirfd < 0),
 * following no link. */
int al_gvisor_rmtree(int at, const char *name)
{
	int base = at < 0 ? AT_FDCWD : at;
	int fd = openat(base, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d;
	struct dirent *de;

	if (fd < 0)
		return unlinkat(base, name, 0) < 0 && errno != ENOENT ? -errno : 0;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (de->d_type == DT_DIR)
			al_gvisor_rmtree(dirfd(d), de->d_name);
		else
			unlinkat(dirfd(d), de->d_name, 0);
	}
	closedir(d);
	return unlinkat(base, name, AT_REMOVEDIR) < 0 && errno != ENOENT ? -errno : 0;
}

int al_gvisor_gc(struct al_error *err)
{
	DIR *d = opendir(AL_GVISOR_DIR);
	struct dirent *de;
	int n = 0;

	if (!d)
		return errno == ENOENT ? 0
				       : al_error_setsys(err, errno, "opening %s", AL_GVISOR_DIR);
	while ((de = readdir(d))) {
		unsigned long long start = 0, now = 0;
		int pid = 0;
		if (de->d_name[0] == '.')
			continue;
		/* "PID-STARTTIME-N" (a run) or "probe-PID" (a probe). */
		if (sscanf(de->d_name, "%d-%llu-", &pid, &start) != 2 &&
		    sscanf(de->d_name, "probe-%d", &pid) != 1)
			continue;
		if (pid > 0 && al_proc_starttime(pid, &now) == 0 && (start == 0 || now == start))
			continue; /* its supervisor still runs */
		if (al_gvisor_rmtree(dirfd(d), de->d_name) == 0)
			n++;
	}
	closedir(d);
	return n;
}
