/* The host's side of a guest: which QEMU, kernel, agent and images a kind
 * runs with (found once per process), KVM when it really works (a guest
 * booted on it), and per run the guest's config and initramfs and the
 * VMM's config. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config.h"

#include "backend/microvm/microvm.h"
#include "backend/microvm/vmm.h"
#include "core/cleanup.h"
#include "core/sys.h"
#include "core/util.h"
#include "guest/config.h"
#include "net/layout.h"

#define QEMU "/usr/bin/qemu-system-x86_64"
/* How long a guest may take to say HELLO, and to answer a ping: under TCG
 * every instruction is emulated (a boot takes seconds, more on a loaded
 * host); under KVM it is a fraction of a second. */
#define BOOT_TCG_MS    90000
#define BOOT_KVM_MS    10000
#define SILENCE_TCG_MS 30000
#define SILENCE_KVM_MS 5000
/* The inputs travel in the initramfs, that is in the guest's RAM. */
#define INPUTS_MAX	(1ull << 30)
#define INPUT_FILES_MAX 100000u
/* The command's user in the guest. */
#define GUEST_UID 1000

static const uint16_t proxy_ports[] = {AL_GATEWAY_HTTP_PORT, AL_GATEWAY_SOCKS_PORT};
static const uint16_t capture_ports[] = {80, 443};

/* The guest agent: beside airlock (a build directory), else installed. */
static int find_agent(char *buf, size_t len)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n > 0) {
		exe[n] = '\0';
		snprintf(buf, len, "%s/airlock-guest-agent", dirname(exe));
		if (access(buf, R_OK) == 0)
			return 0;
	}
	snprintf(buf, len, "%s", AL_GUEST_AGENT_PATH_INSTALLED);
	return access(buf, R_OK) == 0 ? 0 : -ENOENT;
}

/* QEMU's first line of --version, under a timeout. */
static void qemu_version(char *buf, size_t len)
{
	int p[2];
	snprintf(buf, len, "unknown");
	if (pipe2(p, O_CLOEXEC) < 0)
		return;
	pid_t pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		int null = open("/dev/null", O_RDWR);
		if (null >= 0)
			dup2(null, 0), dup2(null, 2);
		alarm(5);
		execl(QEMU, QEMU, "--version", (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	if (pid > 0) {
		char out[256] = {0};
		ssize_t n = read(p[0], out, sizeof(out) - 1);
		waitpid(pid, NULL, 0);
		const char *v = n > 0 ? strstr(out, "version ") : NULL;
		if (v)
			snprintf(buf, len, "%.*s", (int)strcspn(v + 8, " \n("), v + 8);
	}
	close(p[0]);
}

/* Up to len - 1 bytes of a small file, NUL-terminated: how many, or -1. */
static ssize_t read_small(const char *path, char *buf, size_t len)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, len - 1);

	buf[n > 0 ? n : 0] = '\0';
	return n;
}

/* KVM works when a guest boots on it: the base initramfs's agent, finding
 * no config, powers off at once. Bounded: a nested /dev/kvm on which
 * guests hang counts as none. The answer is kept for this boot of the
 * host in AL_VM_RUN_DIR/kvm (root) so that each run does not boot twice. */
static bool kvm_works(const struct al_vm_kind *kind, const struct al_vm_host *h)
{
	char boot[64] = {0}, cached[96] = {0}, path[] = AL_VM_RUN_DIR "/kvm";
	int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);

	if (fd < 0)
		return false;
	close(fd);
	if (read_small("/proc/sys/kernel/random/boot_id", boot, sizeof(boot)) > 0 &&
	    read_small(path, cached, sizeof(cached)) > 0 &&
	    strncmp(cached + 2, boot, strcspn(boot, "\n")) == 0)
		return cached[0] == '1';
	pid_t pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);
		if (null >= 0)
			dup2(null, 0), dup2(null, 1), dup2(null, 2);
		_cleanup_free_ char *mem = xasprintf("%u", 128u);
		execl(QEMU, QEMU, "-M", kind->machine, "-accel", "kvm", "-cpu", "host", "-m", mem,
		      "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot", "-kernel",
		      h->kernel.vmlinuz, "-initrd", h->initramfs, "-append",
		      "console=ttyS0 quiet panic=-1 rdinit=/init", (char *)NULL);
		_exit(127);
	}
	bool ok = false;
	if (pid > 0) {
		int st;
		for (int i = 0; i < 100; i++) { /* 10 s */
			pid_t r = waitpid(pid, &st, WNOHANG);
			if (r == pid) {
				ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
				pid = -1;
				break;
			}
			struct timespec ts = {0, 100 * 1000 * 1000};
			nanosleep(&ts, NULL);
		}
		if (pid > 0) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
		}
	}
	if (geteuid() == 0 && (mkdir("/run/airlock", 0755) == 0 || errno == EEXIST) &&
	    (mkdir(AL_VM_RUN_DIR, 0700) == 0 || errno == EEXIST)) {
		_cleanup_free_ char *text = xasprintf("%d %s", ok, boot);
		_cleanup_free_ char *tmp = xasprintf("%s.%d", path, (int)getpid());
		_cleanup_close_ int out = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (out >= 0 && al_write_all(out, text, strlen(text)) == 0)
			rename(tmp, path);
		else
			unlink(tmp);
	}
	return ok;
}

/* What each kind runs with here, found once per process under lock (the
 * daemon's sessions start runs from several threads). A host is the
 * machine's, not a run's: once found it is never written again, so the
 * pointer al_vm_host() hands out is read without the lock. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct al_vm_host hosts[2];

/* Under TCG the guest's TSC runs at the host's rate, and a guest that must
 * measure it against the PIT (microvm has no HPET) hangs about one boot in
 * two here when QEMU is not scheduled at the right moments: tell it the
 * rate, where the host's TSC is constant. And that the TSC is reliable:
 * its clocksource watchdog measures it against jiffies, which lose the
 * ticks of a QEMU not scheduled, and found it "skewed" in every boot
 * here, leaving the guest's clock on jiffies, behind whenever the host is
 * loaded. */
static void tsc_arg(char *buf, size_t len)
{
	_cleanup_fclose_ FILE *f = fopen("/proc/cpuinfo", "re");
	char line[4096];
	double mhz = 0;
	bool constant = false;

	buf[0] = '\0';
	while (f && fgets(line, sizeof(line), f)) {
		if (!mhz && strncmp(line, "cpu MHz", 7) == 0 && strchr(line, ':'))
			mhz = strtod(strchr(line, ':') + 1, NULL);
		if (strncmp(line, "flags", 5) == 0 && strstr(line, " constant_tsc"))
			constant = true;
		if (strcmp(line, "\n") == 0)
			break; /* the first CPU's */
	}
	if (constant && mhz > 100 && mhz < 100000)
		snprintf(buf, len, " tsc_early_khz=%llu tsc=reliable",
			 (unsigned long long)(mhz * 1000));
}
static bool found[2];

int al_vm_host_check(const struct al_vm_kind *kind, char *why, size_t len)
{
	struct al_vm_kernel k = {0};
	char agent[PATH_MAX];

	if (access(QEMU, X_OK) < 0) {
		snprintf(why, len, "no %s (apt-get install qemu-system-x86)", QEMU);
		return 0;
	}
	if (!al_vm_kernel_find(kind->flavour, &k, why, len))
		return 0;
	al_vm_kernel_free(&k);
	if (find_agent(agent, sizeof(agent)) < 0) {
		snprintf(why, len, "no guest agent (airlock-guest-agent beside airlock, or %s)",
			 AL_GUEST_AGENT_PATH_INSTALLED);
		return 0;
	}
	return 1;
}

const char *al_vm_platform(const struct al_vm_kind *kind)
{
	size_t i = strcmp(kind->name, "microvm") == 0 ? 0 : 1;
	const char *r = NULL;

	pthread_mutex_lock(&lock);
	if (found[i])
		r = hosts[i].kvm ? "kvm" : "tcg";
	pthread_mutex_unlock(&lock);
	if (!r && access("/dev/kvm", R_OK | W_OK) < 0)
		r = "tcg";
	if (!r) {
		/* kvm_works()'s answer for this boot of the host, if probed. */
		char boot[64] = {0}, cached[96] = {0};
		if (read_small("/proc/sys/kernel/random/boot_id", boot, sizeof(boot)) > 0 &&
		    read_small(AL_VM_RUN_DIR "/kvm", cached, sizeof(cached)) > 2 &&
		    strncmp(cached + 2, boot, strcspn(boot, "\n")) == 0)
			r = cached[0] == '1' ? "kvm" : "tcg";
	}
	return r;
}

static int find_host(const struct al_vm_kind *kind, const struct al_vm_host **out,
		     struct al_error *err)
{
	size_t i = strcmp(kind->name, "microvm") == 0 ? 0 : 1;
	struct al_vm_host *h = &hosts[i];
	char why[512];
	int r;

	if (found[i]) {
		*out = h;
		return 0;
	}
	if (!al_vm_host_check(kind, why, sizeof(why)))
		return al_error_set(err, EOPNOTSUPP, "backend %s is not usable here: %s",
				    kind->name, why);
	al_vm_kernel_free(&h->kernel);
	al_vm_kernel_find(kind->flavour, &h->kernel, why, sizeof(why));
	h->qemu = QEMU;
	find_agent(h->agent, sizeof(h->agent));
	if ((r = al_vm_initramfs(&h->kernel, h->agent, kind->modules, h->initramfs,
				 sizeof(h->initramfs), &h->modules, &h->n_modules, err)) < 0)
		return r;
	if ((r = al_vm_system_image(NULL, h->system_image, sizeof(h->system_image), err)) < 0)
		return r;
	qemu_version(h->qemu_version, sizeof(h->qemu_version));
	h->kvm = kvm_works(kind, h);
	if (!h->kvm)
		tsc_arg(h->tsc_arg, sizeof(h->tsc_arg));
	found[i] = true;
	*out = h;
	return 0;
}

int al_vm_host(const struct al_vm_kind *kind, const struct al_vm_host **out, struct al_error *err)
{
	pthread_mutex_lock(&lock);
	int r = find_host(kind, out, err);
	pthread_mutex_unlock(&lock);
	return r;
}

/* The first component of an input's place in the guest may not be one the
 * system image or the agent owns (the guest's root there is read-only or
 * its own). */
static bool reserved_target(const char *path)
{
	static const char *const names[] = {"usr",   "bin",    "sbin", "lib",	  "lib32",
					    "lib64", "libx32", "etc",  "var",	  "proc",
					    "dev",   "sys",    "run",  "airlock", NULL};
	const char *p = path + strspn(path, "/");
	size_t n = strcspn(p, "/");

	for (size_t i = 0; names[i]; i++)
		if (strlen(names[i]) == n && strncmp(p, names[i], n) == 0)
			return true;
	return n == 0;
}

static bool is_input(const struct al_fs_entry *e)
{
	return e->kind == AL_FS_HOST && e->what &&
	       (strncmp(e->what, "ro ", 3) == 0 || strncmp(e->what, "rw ", 3) == 0);
}

/* Append the base initramfs at base to fd. */
static int copy_base(int fd, const char *base, struct al_error *err)
{
	_cleanup_close_ int in = open(base, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	char buf[65536];
	ssize_t n;

	if (in < 0)
		return al_error_setsys(err, errno, "initramfs %s", base);
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (al_write_all(fd, buf, (size_t)n) < 0)
			return al_error_setsys(err, errno, "writing the run's initramfs");
	return n < 0 ? al_error_setsys(err, errno, "reading %s", base) : 0;
}

void al_vm_guest_config_init(const struct vm_run *w, struct al_guest_config *c, const char **mods)
{
	const struct al_plan *p = w->orig;
	*c = (struct al_guest_config){.modules = mods,
				      .n_modules = al_vm_guest_modules(w, mods),
				      .root_device = "/dev/vda",
				      .root_fstype = "ext4",
				      .channel = "/dev/vport0p1",
				      .scratch_bytes = p->scratch_bytes,
				      .hostname = p->hostname ? p->hostname : "airlock",
				      .memory_bytes = p->memory_bytes,
				      .pids = p->pids,
				      .network = p->gateway,
				      .proxy_ports = proxy_ports,
				      .n_proxy_ports = 2,
				      .capture_ports = capture_ports,
				      .n_capture_ports = 2,
				      .umask = 022};
}

int al_vm_initrd_begin(struct vm_run *w, const struct al_guest_config *c, int *fd,
		       struct al_cpio **cp, struct al_error *err)
{
	size_t len;
	_cleanup_free_ char *text = al_guest_config_format(c, &len);
	int r;

	if (!text)
		return al_error_set(err, EINVAL,
				    "backend %s: a path or the hostname holds a tab or a newline, "
				    "which the guest's config cannot carry",
				    w->kind->name);
	if ((*fd = al_vm_initrd_create(w, err)) < 0)
		return *fd;
	*cp = al_cpio_new(*fd);
	r = al_cpio_dir(*cp, "airlock", 0755);
	if (r == 0)
		r = al_cpio_file(*cp, &AL_GUEST_CONFIG_PATH[1], 0644, text, len);
	if (r < 0) {
		al_cpio_finish(*cp);
		*cp = NULL;
		return al_error_setsys(err, -r, "writing %s", w->initrd);
	}
	return 0;
}

int al_vm_initrd_create(struct vm_run *w, struct al_error *err)
{
	char dir[PATH_MAX];
	int fd, r;

	if (geteuid() == 0) {
		snprintf(dir, sizeof(dir), "%s", AL_VM_RUN_DIR);
		if ((mkdir("/run/airlock", 0755) < 0 && errno != EEXIST) ||
		    (mkdir(dir, 0700) < 0 && errno != EEXIST))
			return al_error_setsys(err, errno, "creating %s", dir);
	} else {
		const char *t = getenv("TMPDIR");
		snprintf(dir, sizeof(dir), "%s", t && *t == '/' ? t : "/tmp");
	}
	w->initrd = xasprintf("%s/initrd-%d-XXXXXX", dir, (int)getpid());
	fd = mkostemp(w->initrd, O_CLOEXEC);
	if (fd < 0) {
		r = al_error_setsys(err, errno, "creating %s", w->initrd);
		free(w->initrd);
		w->initrd = NULL;
		return r;
	}
	if (fchmod(fd, 0644) < 0)
		r = al_error_setsys(err, errno, "chmod %s", w->initrd);
	else
		r = copy_base(fd, w->host->initramfs, err);
	if (r < 0) {
		close(fd);
		return r;
	}
	return fd;
}

size_t al_vm_guest_modules(const struct vm_run *w, const char **out)
{
	size_t n = 0;
	for (size_t i = 0; i < w->host->n_modules && n < AL_VM_MAX_MODULES; i++) {
		const char *m = w->host->modules[i], *base = strrchr(m, '/');
		base = base ? base + 1 : m;
		/* overlay: a container's root only */
		if (!w->orig->root && strncmp(base, "overlay.ko", 10) == 0)
			continue;
		out[n++] = m;
	}
	return n;
}

int al_vm_guest_initrd(struct vm_run *w, struct al_error *err)
{
	if (w->orig->root)
		return al_vm_container_initrd(w, err);

	const struct al_plan *p = w->orig;
	struct al_guest_input in[64];
	char *sources[64] = {0};
	size_t n_in = 0;
	_cleanup_close_ int fd = -1;
	struct al_cpio *cp = NULL;
	uint64_t left = al_vm_guest_ram(p) / 2 < INPUTS_MAX ? al_vm_guest_ram(p) / 2 : INPUTS_MAX;
	int r = 0;

	for (size_t i = 0; i < p->n_fs; i++) {
		const struct al_fs_entry *e = &p->fs[i];
		if (!is_input(e))
			continue;
		if (n_in == sizeof(in) / sizeof(*in)) {
			r = al_error_set(err, E2BIG, "backend %s takes at most %zu inputs",
					 w->kind->name, sizeof(in) / sizeof(*in));
			goto out;
		}
		if (reserved_target(e->path)) {
			r = al_error_set(err, EINVAL,
					 "backend %s: input %s: the guest's %s is its own "
					 "(the system image's or the agent's); put it elsewhere, "
					 "e.g. /input",
					 w->kind->name, e->path, e->path);
			goto out;
		}
		sources[n_in] = xasprintf(AL_GUEST_INPUTS_DIR "/%zu", n_in);
		in[n_in] = (struct al_guest_input){
		    .source = sources[n_in], .target = e->path, .dir = e->dir};
		n_in++;
	}
	const char *mods[AL_VM_MAX_MODULES];
	struct al_guest_config c;
	al_vm_guest_config_init(w, &c, mods);
	c.inputs = in;
	c.n_inputs = n_in;
	c.uid = c.gid = GUEST_UID;
	if ((r = al_vm_initrd_begin(w, &c, &fd, &cp, err)) < 0)
		goto out;
	if (n_in)
		r = al_cpio_dir(cp, &AL_GUEST_INPUTS_DIR[1], 0755);
	for (size_t i = 0, k = 0; r == 0 && i < p->n_fs; i++) {
		const struct al_fs_entry *e = &p->fs[i];
		if (!is_input(e))
			continue;
		_cleanup_close_ int hfd =
		    open(e->source, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | (e->dir ? O_DIRECTORY : 0));
		if (hfd < 0) {
			r = al_error_setsys(err, errno, "backend %s: input %s", w->kind->name,
					    e->source);
			break;
		}
		struct stat st;
		if (fstat(hfd, &st) < 0 || st.st_dev != e->dev || st.st_ino != e->ino) {
			r = al_error_set(err, ESTALE,
					 "backend %s: input %s changed since the plan was made",
					 w->kind->name, e->source);
			break;
		}
		if (e->dir) {
			r = al_cpio_host_tree(cp, sources[k] + 1, hfd, left, INPUT_FILES_MAX, err);
			if (r == -EFBIG)
				al_error_wrap(err,
					      "backend %s: input %s: the inputs reach the guest in "
					      "its RAM, at most %llu MiB in all here",
					      w->kind->name, e->source,
					      (unsigned long long)(left >> 20));
		} else if ((uint64_t)st.st_size > left) {
			r = al_error_set(err, EFBIG,
					 "backend %s: the inputs reach the guest in its RAM: at "
					 "most %llu MiB here",
					 w->kind->name, (unsigned long long)(left >> 20));
		} else {
			/* Its own permissions, less write and set-id bits. */
			r = al_cpio_host_file(cp, sources[k] + 1, st.st_mode & 0555, hfd,
					      (uint64_t)st.st_size);
			if (r < 0)
				al_error_setsys(err, -r, "backend %s: input %s", w->kind->name,
						e->source);
		}
		/* One budget for all the inputs, trees included (each tree
		 * is walked within what is left). */
		if (r == 0)
			left -= e->dir ? al_cpio_tree_bytes(cp) : (uint64_t)st.st_size;
		k++;
	}
	int f = al_cpio_finish(cp);
	if (r == 0 && f < 0)
		r = al_error_setsys(err, -f, "writing %s", w->initrd);
out:
	for (size_t i = 0; i < n_in; i++)
		free(sources[i]);
	if (r < 0)
		al_vm_guest_unlink(w);
	return r;
}

void al_vm_guest_unlink(struct vm_run *w)
{
	if (w && w->initrd) {
		unlink(w->initrd);
		free(w->initrd);
		w->initrd = NULL;
	}
	if (w && w->rootimg) {
		unlink(w->rootimg);
		free(w->rootimg);
		w->rootimg = NULL;
	}
}

char *al_vm_vmm_config(const struct vm_run *w)
{
	const struct al_plan *p = w->orig;
	const struct al_vm_kind *k = w->kind;
	bool kvm = w->host->kvm;
	json_t *q = json_array(), *argv = json_array(), *env = json_array();
	char *s;

#define ARG(x) json_array_append_new(q, json_string(x))
#define ARGF(...)                                                                                  \
	do {                                                                                       \
		s = xasprintf(__VA_ARGS__);                                                        \
		ARG(s);                                                                            \
		free(s);                                                                           \
	} while (0)
	ARG(w->host->qemu);
	ARG("-M"), ARG(k->machine);
	ARG("-accel"), ARG(kvm ? "kvm" : "tcg,tb-size=64");
	ARG("-cpu"), ARG(kvm ? "host" : "max");
	ARG("-smp"), ARG("1");
	ARG("-m");
	ARGF("%llu", (unsigned long long)(al_vm_guest_ram(p) >> 20));
	ARG("-nodefaults"), ARG("-no-user-config"), ARG("-display"), ARG("none");
	ARG("-no-reboot");
	ARG("-kernel"), ARG(AL_VMM_KERNEL);
	ARG("-initrd"), ARG(AL_VMM_INITRD);
	/* The kernel's console on ttyS0, which has no port here: never on
	 * the channel. */
	ARG("-append");
	/* airlock.guest=1 marks a guest's kernel (tests/e2e/probe.c). */
	ARGF("console=ttyS0 quiet panic=-1 rdinit=/init airlock.guest=1%s", w->host->tsc_arg);
	ARG("-device");
	ARGF("virtio-serial-%s", k->bus);
	ARG("-chardev"), ARG("stdio,id=ch,signal=off");
	/* A plain port, not a console one: QEMU drops a console port's
	 * bytes when its chardev cannot take them (EAGAIN), where it holds a
	 * plain port's back until it can. */
	ARG("-device"), ARG("virtserialport,chardev=ch,name=airlock");
	ARG("-drive");
	ARG("file=" AL_VMM_SYSTEM ",if=none,id=sys,format=raw,readonly=on,file.locking=off");
	ARG("-device");
	ARGF("virtio-blk-%s,drive=sys", k->bus);
	if (strcmp(k->bus, "pci") == 0)
		ARG("-device"), ARG("virtio-rng-pci");
	ARG("-sandbox"), ARG("on,obsolete=deny,elevateprivileges=deny,spawn=deny,"
			     "resourcecontrol=deny");
#undef ARG
#undef ARGF
	for (size_t i = 0; p->argv && p->argv[i]; i++)
		json_array_append_new(argv, json_string(p->argv[i]));
	for (size_t i = 0; p->envp && p->envp[i]; i++)
		json_array_append_new(env, json_string(p->envp[i]));
	json_t *o = json_pack("{s:o, s:I, s:I, s:b, s:b}", "qemu", q, "boot_timeout_ms",
			      (json_int_t)(kvm ? BOOT_KVM_MS : BOOT_TCG_MS), "silence_ms",
			      (json_int_t)(kvm ? SILENCE_KVM_MS : SILENCE_TCG_MS), "network",
			      p->gateway, "copy_in", p->n_copy_in > 0);
	/* A session's VMM serves execs on its socket (vm-exec.c). */
	if (w->session) {
		json_object_set_new(o, "session", json_true());
		json_decref(argv);
		json_decref(env);
	} else {
		json_object_set_new(o, "exec",
				    json_pack("{s:o, s:o, s:s}", "argv", argv, "env", env, "cwd",
					      p->workdir ? p->workdir : "/work"));
	}
	/* -t: the native layer gives the VMM the plan's pty as its stdio,
	 * and the VMM asks the guest for a terminal of its own (vmm.h). */
	if (p->tty && !w->session)
		json_object_set_new(o, "tty", json_true());
	/* $AIRLOCK_PHASES: the VMM prints the guest's boot and exec times. */
	if (getenv("AIRLOCK_PHASES"))
		json_object_set_new(o, "phases", json_true());
	if (p->n_copy_out && !w->session)
		json_object_set_new(o, "copy_out",
				    json_pack("{s:I, s:I}", "bytes", (json_int_t)p->copy_out_bytes,
					      "files", (json_int_t)p->copy_out_files));
	else
		json_object_set_new(o, "copy_out", json_null());
	s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return s;
}

/* PREFIX-PID-XXXXXX files in dir whose airlock (PID) is gone. */
static int gc_dir(const char *dir, const char *prefix, struct al_error *err)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	size_t pl = strlen(prefix);
	int n = 0;

	if (!d)
		return errno == ENOENT ? 0 : al_error_setsys(err, errno, "opening %s", dir);
	while ((de = readdir(d))) {
		int pid;
		char rest[16];
		/* PREFIX-PID-XXXXXX, or a root image's mount point beside it
		 * (PREFIX-PID-XXXXXX.d, a directory) */
		if (strncmp(de->d_name, prefix, pl) != 0 ||
		    sscanf(de->d_name + pl, "-%d-%15s", &pid, rest) != 2 || pid <= 0 ||
		    (strlen(rest) != 6 && (strlen(rest) != 8 || strcmp(rest + 6, ".d") != 0)))
			continue;
		if (kill(pid, 0) == 0 || errno != ESRCH)
			continue;
		if (unlinkat(dirfd(d), de->d_name, strlen(rest) == 8 ? AT_REMOVEDIR : 0) == 0) {
			n++;
		} else if (errno != ENOENT) {
			n = al_error_setsys(err, errno, "removing %s/%s", dir, de->d_name);
			break;
		}
	}
	closedir(d);
	return n;
}

int al_vm_gc(struct al_error *err)
{
	int a = gc_dir(AL_VM_RUN_DIR, "initrd", err);
	if (a < 0)
		return a;
	int b = gc_dir(AL_VM_ROOT_DIR, "root", err);
	return b < 0 ? b : a + b;
}
