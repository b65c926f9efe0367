/* The guest agent: PID 1 of a microvm/vm guest (a static binary, /init of
 * the run's initramfs). It reads the host's config (src/guest/config.h),
 * loads the virtio modules, builds the command's file view (the system
 * image's top-level entries read-only on a small tmpfs root, /proc, a
 * minimal /dev, one scratch tmpfs for /work and /tmp, the inputs
 * read-only), switches into it so that nothing of the initramfs, the
 * modules, the image device or the channel device can be reached from
 * there, says HELLO on the channel and serves it (agent-chan.c). Any
 * failure in setup powers the guest off (after a LOG line when the channel
 * is open): never a kernel panic loop. */
#include "guest/agent.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

/* How long the devices may take to appear after their modules load: longer
 * than any boot deadline of the host's (BOOT_*_MS in
 * src/backend/microvm/guest.c), so that a slow boot (TCG on
 * a loaded host) is ended by the host, saying so, never by a guest that
 * gave up first with nobody to tell. */
#define DEVICE_WAIT_MS 120000

__attribute__((format(printf, 2, 0))) static void vlog(struct agent *a, const char *fmt, va_list ap)
{
	char m[1024];
	int n = vsnprintf(m, sizeof(m), fmt, ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(m))
		n = sizeof(m) - 1;
	if (a && a->chan >= 0)
		agent_send(a, AL_G_LOG, 0, 0, m, (uint32_t)n);
}

void agent_log(struct agent *a, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog(a, fmt, ap);
	va_end(ap);
}

/* Write out what is queued (bounded: a second at most), then power off. */
void agent_poweroff(struct agent *a)
{
	if (a && a->chan >= 0) {
		for (int i = 0; i < 100 && a->qoff < a->qlen; i++) {
			ssize_t w = write(a->chan, a->q + a->qoff, a->qlen - a->qoff);
			if (w > 0)
				a->qoff += (size_t)w;
			else
				poll(&(struct pollfd){.fd = a->chan, .events = POLLOUT}, 1, 10);
		}
		tcdrain(a->chan);
	}
	sync();
	reboot(RB_POWER_OFF);
	_exit(1); /* PID 1 exiting panics the kernel: panic=-1 reboots, and
		     -no-reboot ends QEMU */
}

void agent_die(struct agent *a, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog(a, fmt, ap);
	va_end(ap);
	agent_poweroff(a);
}

void agent_mount(struct agent *a, const char *src, const char *dst, const char *type,
		 unsigned long flags, const char *data)
{
	mkdir(dst, 0755);
	if (mount(src, dst, type, flags, data) < 0)
		agent_die(a, "guest agent: mount %s on %s (%s): %s", src ? src : "none", dst,
			  type ? type : "bind", strerror(errno));
}

/* A bind mount made read-only (the remount is what makes a bind ro). */
void agent_bind_ro(struct agent *a, const char *src, const char *dst)
{
	agent_mount(a, src, dst, NULL, MS_BIND | MS_REC, NULL);
	agent_mount(a, NULL, dst, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV,
		    NULL);
}

static long now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Wait for a device node that a module's probe creates (devtmpfs). */
int agent_wait_device(const char *path)
{
	for (long end = now_ms() + DEVICE_WAIT_MS; access(path, F_OK) < 0;) {
		if (now_ms() > end)
			return -ENOENT;
		nanosleep(&(struct timespec){.tv_nsec = 5000000}, NULL);
	}
	return 0;
}

char *agent_read_file(const char *path, size_t max, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	char *b = malloc(max + 1);
	size_t n = 0;
	ssize_t r;
	while (b && n < max && (r = read(fd, b + n, max - n)) > 0)
		n += (size_t)r;
	close(fd);
	if (b)
		b[n] = 0;
	*len = n;
	return b;
}

static void load_modules(struct agent *a)
{
	for (size_t i = 0; i < a->cfg.c.n_modules; i++) {
		const char *m = a->cfg.c.modules[i];
		int fd = open(m, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || (syscall(SYS_finit_module, fd, "", 0) < 0 && errno != EEXIST))
			agent_die(a, "guest agent: loading module %s: %s", m, strerror(errno));
		close(fd);
		/* Its bytes are not needed again: give the initramfs's memory back. */
		unlink(m);
	}
}

/* Once the modules are in: no module loads again, the kernel starts no
 * helper program (modprobe, request-key, core_pattern's pipe) with a
 * capability, and the agent's root is its own, not the kernel threads'
 * (they share PID 1's until it unshares): so the helpers the kernel does
 * start look for their programs in the initramfs, never in the command's
 * root, whose files a container's image chooses. */
static void lock_kernel(struct agent *a)
{
	static const char *const writes[][2] = {
	    {"/proc/sys/kernel/modprobe", "\n"},
	    {"/proc/sys/kernel/usermodehelper/bset", "0 0\n"},
	    {"/proc/sys/kernel/usermodehelper/inheritable", "0 0\n"},
	    {"/proc/sys/kernel/modules_disabled", "1\n"}};
	for (size_t i = 0; i < sizeof(writes) / sizeof(*writes); i++) {
		int fd = open(writes[i][0], O_WRONLY | O_CLOEXEC);
		size_t n = strlen(writes[i][1]);
		if (fd < 0 || write(fd, writes[i][1], n) != (ssize_t)n)
			agent_die(a, "guest agent: writing %s: %s", writes[i][0], strerror(errno));
		close(fd);
	}
	if (unshare(CLONE_FS) < 0)
		agent_die(a, "guest agent: unshare(CLONE_FS): %s", strerror(errno));
}

static void open_channel(struct agent *a)
{
	const char *ch = a->cfg.c.channel;
	struct termios t;
	/* The port's node appears (device_create) before virtio_console has
	 * put the port on its list, and an open in between fails ENXIO: a
	 * window that a loaded host's slow vCPU made wide enough to hit. */
	for (long end = now_ms() + DEVICE_WAIT_MS;;) {
		if (agent_wait_device(ch) < 0)
			agent_die(a, "no channel device %s", ch);
		a->chan = open(ch, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
		if (a->chan >= 0 || (errno != ENXIO && errno != ENODEV && errno != ENOENT) ||
		    now_ms() > end)
			break;
		nanosleep(&(struct timespec){.tv_nsec = 5000000}, NULL);
	}
	if (a->chan < 0)
		agent_die(NULL, "open %s", ch);
	/* Raw: no line discipline may touch the frames' bytes. */
	if (tcgetattr(a->chan, &t) == 0) {
		cfmakeraw(&t);
		tcsetattr(a->chan, TCSANOW, &t);
	}
}

void agent_make_dev(struct agent *a, const char *root, const char *shm)
{
	static const struct {
		const char *name;
		unsigned maj, min;
	} nodes[] = {{"null", 1, 3},   {"zero", 1, 5},	  {"full", 1, 7},
		     {"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0}};
	char p[4160];
	snprintf(p, sizeof(p), "%s/dev", root);
	agent_mount(a, "tmpfs", p, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k");
	for (size_t i = 0; i < sizeof(nodes) / sizeof(*nodes); i++) {
		snprintf(p, sizeof(p), "%s/dev/%s", root, nodes[i].name);
		if (mknod(p, S_IFCHR | 0666, makedev(nodes[i].maj, nodes[i].min)) < 0 ||
		    chmod(p, 0666) < 0)
			agent_die(a, "guest agent: mknod %s: %s", p, strerror(errno));
	}
	snprintf(p, sizeof(p), "%s/dev/pts", root);
	agent_mount(a, "devpts", p, "devpts", MS_NOSUID | MS_NOEXEC,
		    "newinstance,ptmxmode=0666,mode=0620");
	static const char *const links[][2] = {{"pts/ptmx", "ptmx"},
					       {"/proc/self/fd", "fd"},
					       {"/proc/self/fd/0", "stdin"},
					       {"/proc/self/fd/1", "stdout"},
					       {"/proc/self/fd/2", "stderr"}};
	for (size_t i = 0; i < sizeof(links) / sizeof(*links); i++) {
		snprintf(p, sizeof(p), "%s/dev/%s", root, links[i][1]);
		if (symlink(links[i][0], p) < 0)
			agent_die(a, "guest agent: the link %s: %s", p, strerror(errno));
	}
	snprintf(p, sizeof(p), "%s/dev/shm", root);
	if (shm)
		agent_mount(a, shm, p, NULL, MS_BIND, NULL);
	else if (mkdir(p, 0755) < 0)
		agent_die(a, "guest agent: mkdir %s: %s", p, strerror(errno));
}

/* The scratch: one tmpfs of scratch_bytes for /work (the command's) and
 * /tmp (1777), and /dev/shm. */
static void make_scratch(struct agent *a)
{
	char opt[64];
	snprintf(opt, sizeof(opt), "mode=0755,size=%" PRIu64, a->cfg.c.scratch_bytes);
	agent_mount(a, "tmpfs", SCRATCH, "tmpfs", MS_NOSUID | MS_NODEV, opt);
	if (mkdir(SCRATCH "/work", 0755) < 0 ||
	    chown(SCRATCH "/work", a->cfg.c.uid, a->cfg.c.gid) ||
	    mkdir(SCRATCH "/tmp", 01777) < 0 || chmod(SCRATCH "/tmp", 01777) < 0 ||
	    mkdir(SCRATCH "/shm", 01777) < 0 || chmod(SCRATCH "/shm", 01777) < 0)
		agent_die(a, "guest agent: making the scratch: %s", strerror(errno));
	agent_mount(a, SCRATCH "/work", NEWROOT "/work", NULL, MS_BIND, NULL);
	agent_mount(a, SCRATCH "/tmp", NEWROOT "/tmp", NULL, MS_BIND, NULL);
}

/* The image's top-level entries on the new root: directories bound
 * read-only, symbolic links recreated. Entries the agent makes itself are
 * left out. */
static void bind_image(struct agent *a)
{
	static const char *const own[] = {".",	 "..",	 "proc", "dev",
					  "sys", "work", "tmp",	 "lost+found"};
	DIR *d = opendir(SYSIMG);
	struct dirent *e;
	char src[512], dst[512], link[4096];
	if (!d)
		agent_die(a, "guest agent: reading the system image: %s", strerror(errno));
	while ((e = readdir(d))) {
		bool skip = false;
		for (size_t i = 0; i < sizeof(own) / sizeof(*own); i++)
			skip |= !strcmp(e->d_name, own[i]);
		if (skip)
			continue;
		snprintf(src, sizeof(src), SYSIMG "/%s", e->d_name);
		snprintf(dst, sizeof(dst), NEWROOT "/%s", e->d_name);
		struct stat st;
		if (lstat(src, &st) < 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			agent_bind_ro(a, src, dst);
		} else if (S_ISLNK(st.st_mode)) {
			ssize_t n = readlink(src, link, sizeof(link) - 1);
			if (n > 0) {
				link[n] = 0;
				symlink(link, dst);
			}
		}
	}
	closedir(d);
}

/* mkdir -p of path's parents (and of path itself when dir) in the new
 * root's tmpfs; a regular file's mount point is an empty file. */
static int make_point(const char *path, bool dir)
{
	char p[4096];
	snprintf(p, sizeof(p), "%s", path);
	for (char *s = p + sizeof(NEWROOT); (s = strchr(s, '/')); s++) {
		*s = 0;
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	if (dir)
		return mkdir(p, 0755) < 0 && errno != EEXIST ? -errno : 0;
	int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return -errno;
	close(fd);
	return 0;
}

static void bind_inputs(struct agent *a)
{
	char dst[4096], first[256];
	for (size_t i = 0; i < a->cfg.c.n_inputs; i++) {
		const struct al_guest_input *in = &a->cfg.c.inputs[i];
		const char *t = in->target;
		/* A target under the image's directories would need a mount point
		 * in the read-only image; one with ".." could leave the root. */
		size_t n = strcspn(t + 1, "/");
		snprintf(first, sizeof(first), SYSIMG "/%.*s", (int)n, t + 1);
		if (n == 0 || strstr(t, "/..") || strstr(t, "/./") || access(first, F_OK) == 0)
			agent_die(
			    a, "guest agent: input target %s is not a path the guest can show", t);
		snprintf(dst, sizeof(dst), NEWROOT "%s", t);
		int r = make_point(dst, in->dir);
		if (r < 0)
			agent_die(a, "guest agent: input mount point %s: %s", t, strerror(-r));
		agent_bind_ro(a, in->source, dst);
	}
}

/* The guest's DNS is the agent's stub on 127.0.0.1 (agent-net.c). */
static void bind_resolv(struct agent *a)
{
	int fd = open("/airlock/resolv.conf", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	static const char text[] = "nameserver 127.0.0.1\n";
	if (fd < 0 || write(fd, text, sizeof(text) - 1) != sizeof(text) - 1)
		agent_die(a, "guest agent: writing resolv.conf: %s", strerror(errno));
	close(fd);
	if (access(NEWROOT "/etc/resolv.conf", F_OK) == 0)
		agent_bind_ro(a, "/airlock/resolv.conf", NEWROOT "/etc/resolv.conf");
	else
		agent_log(a, "guest agent: the system image has no /etc/resolv.conf to bind over");
}

static void build_root(struct agent *a)
{
	const struct al_guest_config *c = &a->cfg.c;
	if (agent_wait_device(c->root_device) < 0)
		agent_die(a, "guest agent: no root device %s", c->root_device);
	agent_mount(a, c->root_device, SYSIMG, c->root_fstype, MS_RDONLY | MS_NOSUID | MS_NODEV,
		    NULL);
	agent_mount(a, "tmpfs", NEWROOT, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m");
	bind_image(a);
	make_scratch(a);
	agent_make_dev(a, NEWROOT, SCRATCH "/shm");
	agent_mount(a, "proc", NEWROOT "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		    "hidepid=invisible");
	bind_inputs(a);
	if (c->network)
		bind_resolv(a);
	if (c->hostname && sethostname(c->hostname, strlen(c->hostname)) < 0)
		agent_die(a, "guest agent: sethostname: %s", strerror(errno));
	a->work = open(SCRATCH "/work", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	/* The root itself read-only: the command may not add to it. */
	agent_mount(a, NULL, NEWROOT, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL);
	/* switch_root's way (the initramfs cannot be pivoted away): the new
	 * root moves over / and becomes the root; the initramfs stays under it,
	 * unreachable without CAP_SYS_CHROOT, which the command never has. */
	if (chdir(NEWROOT) < 0 || mount(NEWROOT, "/", NULL, MS_MOVE, NULL) < 0 || chroot(".") < 0 ||
	    chdir("/") < 0)
		agent_die(a, "guest agent: switching root: %s", strerror(errno));
}

/* The execs' cgroups: memory and pids on for the root's children. */
static void setup_cgroups(struct agent *a)
{
	a->cgroot = open("/sys/fs/cgroup", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int fd = openat(a->cgroot, "cgroup.subtree_control", O_WRONLY | O_CLOEXEC);
	a->cg_mem = fd >= 0 && write(fd, "+memory", 7) == 7;
	if (fd >= 0 && write(fd, "+pids", 5) != 5)
		agent_log(a, "guest agent: no pids controller: %s", strerror(errno));
	if (fd >= 0)
		close(fd);
	if (a->cgroot < 0 || !a->cg_mem)
		agent_log(a, "guest agent: no memory controller for the execs");
}

int main(void)
{
	static struct agent agent = {.chan = -1, .cgroot = -1, .work = -1};
	struct agent *a = &agent;
	char err[256];
	size_t len;

	if (getpid() != 1)
		return fprintf(stderr, "airlock-guest-agent: runs as a guest's init only\n"), 2;
	umask(022);
	agent_mount(a, "devtmpfs", "/dev", "devtmpfs", MS_NOSUID | MS_NOEXEC, NULL);
	/* fds 0-2 on /dev/null: the kernel's /dev/console may be nothing, or
	 * the channel itself. */
	int null = open("/dev/null", O_RDWR);
	for (int fd = 0; null >= 0 && fd < 3; fd++)
		dup2(null, fd);
	if (null > 2)
		close(null);
	agent_mount(a, "proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	agent_mount(a, "sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	agent_mount(a, "cgroup2", "/sys/fs/cgroup", "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		    NULL);
	char *text = agent_read_file(AL_GUEST_CONFIG_PATH, 1 << 20, &len);
	if (!text || al_guest_config_parse(text, len, &a->cfg, err, sizeof(err)) < 0)
		agent_die(NULL, "config");
	load_modules(a);
	open_channel(a);
	setup_cgroups(a);
	if (a->cfg.c.network && agent_net_setup(a) < 0)
		agent_poweroff(a);
	lock_kernel(a);
	if (a->cfg.c.container) {
		agent_read_seccomp(a);
		agent_container_root(a);
	} else {
		build_root(a);
	}

	struct utsname u;
	uint8_t hello[4 + 64];
	uname(&u);
	size_t rl = strnlen(u.release, 64);
	al_guest_put32(hello, AL_GUEST_PROTO_VERSION);
	memcpy(hello + 4, u.release, rl);
	agent_send(a, AL_G_HELLO, 0, 0, hello, (uint32_t)(4 + rl));
	agent_serve(a);
}
