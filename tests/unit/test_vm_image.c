/* backend/microvm's images: Debian's version order, the kernel found
 * through its package's file list, modules.dep's closure (dependencies
 * first, each once, compressed modules refused), the newc cpio writer
 * (extracted again by the cpio tool and compared; links kept, devices and
 * caps refused), the dpkg dependency closure, and the cache: a second call
 * reuses the file, a file not root's is rebuilt. The cache cases need root
 * (the cache is root's) and skip without; those on the host's kernel skip
 * when no Debian cloud kernel is installed. */
#include "unit.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/microvm/image-internal.h"
#include "backend/microvm/microvm.h"
#include "core/cleanup.h"
#include "core/error.h"
#include "core/util.h"
#include "guest/config.h"

static char tmp[] = "/tmp/airlock-unit-vm-image-XXXXXX";

static void write_file(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
}

static char *read_text(const char *path)
{
	static char buf[4096];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n < 0 ? 0 : n] = '\0';
	return buf;
}

static int run(const char *cmd)
{
	int r = system(cmd);
	return WIFEXITED(r) ? WEXITSTATUS(r) : -1;
}

static int setup(void **state)
{
	return mkdtemp(tmp) ? 0 : -1;
}

static int teardown(void **state)
{
	_cleanup_free_ char *cmd = xasprintf("rm -rf '%s'", tmp);
	return run(cmd) == 0 ? 0 : -1;
}

static void test_version_order(void **state)
{
	assert_true(al_vm_version_cmp("6.1.0-57", "6.1.0-58") < 0);
	assert_true(al_vm_version_cmp("6.1.0-9", "6.1.0-10") < 0);
	assert_true(al_vm_version_cmp("6.10.0-1", "6.9.0-30") > 0);
	assert_true(al_vm_version_cmp("1.0~rc1", "1.0") < 0);
	assert_true(al_vm_version_cmp("1:0.9", "2.0") > 0);
	assert_true(al_vm_version_cmp("6.1.0-0.deb11.13", "6.1.0-0.deb11.7") > 0);
	assert_int_equal(al_vm_version_cmp("6.1.0-57", "6.1.0-57"), 0);
}

static void test_kernel_find(void **state)
{
	struct al_vm_kernel k;
	char why[256];
	assert_int_equal(al_vm_kernel_find("nosuch-flavour", &k, why, sizeof(why)), 0);
	assert_string_equal(why, "no Debian kernel of flavour nosuch-flavour: install "
				 "linux-image-nosuch-flavour");
	if (al_vm_kernel_find("cloud-amd64", &k, why, sizeof(why)) != 1) {
		print_message("skipped: %s\n", why);
		skip();
	}
	assert_contains(k.version, "-cloud-amd64");
	_cleanup_free_ char *vmlinuz = xasprintf("/boot/vmlinuz-%s", k.version);
	_cleanup_free_ char *modules = xasprintf("/lib/modules/%s", k.version);
	_cleanup_free_ char *pkg = xasprintf("linux-image-%s", k.version);
	assert_string_equal(k.vmlinuz, vmlinuz);
	assert_string_equal(k.modules, modules);
	assert_contains(k.package, pkg);
	al_vm_kernel_free(&k);
	/* The generic flavour never takes the cloud kernel's file, whose name
	 * also ends in -amd64. */
	if (al_vm_kernel_find("amd64", &k, why, sizeof(why)) == 1) {
		assert_not_contains(k.version, "cloud");
		al_vm_kernel_free(&k);
	}
}

/* A modules directory of the test's own: the order does not depend on
 * what the host has. */
static void test_module_closure_fake(void **state)
{
	_cleanup_free_ char *dir = xasprintf("%s/mods", tmp);
	_cleanup_free_ char *dep = xasprintf("%s/modules.dep", dir);
	_cleanup_free_ char *builtin = xasprintf("%s/modules.builtin", dir);
	assert_int_equal(mkdir(dir, 0755), 0);
	write_file(dep,
		   "kernel/v/virtio_console.ko: kernel/v/virtio.ko kernel/v/virtio_ring.ko\n"
		   "kernel/v/virtio.ko: kernel/v/virtio_ring.ko\n"
		   "kernel/v/virtio_ring.ko:\n"
		   "kernel/v/virtio-rng.ko: kernel/v/virtio.ko kernel/v/virtio_ring.ko\n"
		   "kernel/z/squeezed.ko.xz:\n"
		   "kernel/z/needs_xz.ko: kernel/z/squeezed.ko.xz\n",
		   0644);
	write_file(builtin, "kernel/fs/ext4/ext4.ko\n", 0644);
	const char *names[] = {"virtio_console", "virtio_rng", "virtio", "ext4", NULL};
	char **paths = NULL;
	struct al_error err = {0};
	if (al_vm_module_closure(dir, names, &paths, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(al_strv_len(paths), 4);
	assert_string_equal(paths[0], "kernel/v/virtio_ring.ko");
	assert_string_equal(paths[1], "kernel/v/virtio.ko");
	assert_string_equal(paths[2], "kernel/v/virtio_console.ko");
	assert_string_equal(paths[3], "kernel/v/virtio-rng.ko");
	al_strv_free(paths);

	const char *xz[] = {"needs_xz", NULL};
	assert_int_equal(al_vm_module_closure(dir, xz, &paths, &err), -ENOTSUP);
	assert_contains(err.msg, "kernel/z/squeezed.ko.xz: a compressed module");
	const char *none[] = {"nosuch", NULL};
	assert_int_equal(al_vm_module_closure(dir, none, &paths, &err), -ENOENT);
	assert_contains(err.msg, "modules.dep: no module nosuch");
}

static void test_module_closure_host(void **state)
{
	struct al_vm_kernel k;
	char why[256];
	if (al_vm_kernel_find("cloud-amd64", &k, why, sizeof(why)) != 1) {
		print_message("skipped: %s\n", why);
		skip();
	}
	const char *names[] = {"virtio_console", NULL};
	char **paths = NULL;
	struct al_error err = {0};
	if (al_vm_module_closure(k.modules, names, &paths, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(al_strv_len(paths), 3);
	assert_contains(paths[0], "/virtio_ring.ko");
	assert_contains(paths[1], "/virtio.ko");
	assert_contains(paths[2], "/virtio_console.ko");
	al_strv_free(paths);
	al_vm_kernel_free(&k);
}

/* The archive as cpio extracts it. */
static void extract(const char *archive, const char *dir)
{
	assert_int_equal(mkdir(dir, 0755), 0);
	_cleanup_free_ char *cmd =
	    xasprintf("cd '%s' && cpio -idm --quiet --no-absolute-filenames < '%s'", dir, archive);
	assert_int_equal(run(cmd), 0);
}

static void test_cpio_round_trip(void **state)
{
	if (access("/usr/bin/cpio", X_OK) != 0) {
		print_message("skipped: no /usr/bin/cpio (package cpio)\n");
		skip();
	}
	_cleanup_free_ char *src = xasprintf("%s/src", tmp);
	_cleanup_free_ char *sub = xasprintf("%s/src/sub", tmp);
	_cleanup_free_ char *f1 = xasprintf("%s/src/a.txt", tmp);
	_cleanup_free_ char *f2 = xasprintf("%s/src/sub/run.sh", tmp);
	_cleanup_free_ char *f3 = xasprintf("%s/src/sub/empty", tmp);
	_cleanup_free_ char *ln = xasprintf("%s/src/link", tmp);
	assert_int_equal(mkdir(src, 0755), 0);
	assert_int_equal(mkdir(sub, 0750), 0);
	write_file(f1, "one\n", 0644);
	write_file(f2, "#!/bin/sh\necho two three\n", 0755);
	write_file(f3, "", 0600);
	assert_int_equal(symlink("sub/run.sh", ln), 0);

	_cleanup_free_ char *archive = xasprintf("%s/a.cpio", tmp);
	for (int pass = 0; pass < 2; pass++) {
		_cleanup_free_ char *name = xasprintf("%s.%d", archive, pass);
		int fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		int dfd = open(src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		assert_true(fd >= 0 && dfd >= 0);
		struct al_cpio *c = al_cpio_new(fd);
		struct al_error err = {0};
		assert_int_equal(al_cpio_dir(c, "/airlock", 0755), 0);
		assert_int_equal(al_cpio_file(c, "/airlock/config", 0600, "KEY\tv\n", 6), 0);
		if (al_cpio_host_tree(c, "/airlock/in/0", dfd, 1 << 20, 100, &err) < 0)
			fail_msg("%s", err.msg);
		assert_int_equal(al_cpio_finish(c), 0);
		close(fd);
		close(dfd);
	}
	/* Deterministic: the same inputs, the same bytes. */
	_cleanup_free_ char *cmp = xasprintf("cmp -s '%s.0' '%s.1'", archive, archive);
	assert_int_equal(run(cmp), 0);

	_cleanup_free_ char *out = xasprintf("%s/out", tmp);
	_cleanup_free_ char *a0 = xasprintf("%s.0", archive);
	extract(a0, out);
	char *p = xasprintf("%s/airlock/config", out);
	assert_string_equal(read_text(p), "KEY\tv\n");
	free(p);
	p = xasprintf("%s/airlock/in/0/a.txt", out);
	assert_string_equal(read_text(p), "one\n");
	free(p);
	p = xasprintf("%s/airlock/in/0/sub/run.sh", out);
	assert_string_equal(read_text(p), "#!/bin/sh\necho two three\n");
	struct stat st;
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0755);
	free(p);
	p = xasprintf("%s/airlock/in/0/sub/empty", out);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_size, 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	free(p);
	p = xasprintf("%s/airlock/in/0/sub", out);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0750);
	free(p);
	p = xasprintf("%s/airlock/in/0/link", out);
	char target[64] = "";
	assert_int_equal(lstat(p, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	assert_int_equal(readlink(p, target, sizeof(target) - 1), 10);
	assert_string_equal(target, "sub/run.sh");
	free(p);
	/* cpio lists the trailer's predecessors only: 8 entries, in order. */
	_cleanup_free_ char *list = xasprintf("cpio -it --quiet < '%s' > '%s/list'", a0, tmp);
	assert_int_equal(run(list), 0);
	_cleanup_free_ char *lp = xasprintf("%s/list", tmp);
	assert_string_equal(read_text(lp), "airlock\nairlock/config\nairlock/in/0\n"
					   "airlock/in/0/a.txt\nairlock/in/0/link\n"
					   "airlock/in/0/sub\nairlock/in/0/sub/empty\n"
					   "airlock/in/0/sub/run.sh\n");
}

static void tree_fails(const char *dir, uint64_t max_bytes, uint64_t max_files, int code,
		       const char *msg)
{
	_cleanup_free_ char *archive = xasprintf("%s/refused.cpio", tmp);
	int fd = open(archive, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(fd >= 0 && dfd >= 0);
	struct al_cpio *c = al_cpio_new(fd);
	struct al_error err = {0};
	assert_int_equal(al_cpio_host_tree(c, "/in", dfd, max_bytes, max_files, &err), -code);
	assert_contains(err.msg, msg);
	al_cpio_finish(c);
	close(fd);
	close(dfd);
}

static void test_cpio_refusals(void **state)
{
	_cleanup_free_ char *dir = xasprintf("%s/refuse", tmp);
	_cleanup_free_ char *f = xasprintf("%s/refuse/data", tmp);
	_cleanup_free_ char *g = xasprintf("%s/refuse/more", tmp);
	assert_int_equal(mkdir(dir, 0755), 0);
	write_file(f, "0123456789", 0644);
	write_file(g, "0123456789", 0644);
	/* Caps: 3 entries (the root and two files) and 20 bytes fit. */
	tree_fails(dir, 19, 100, EFBIG, "/in/more: the tree holds more than 19 bytes");
	tree_fails(dir, 100, 2, EFBIG, "/in/more: more than 2 entries");
	_cleanup_free_ char *fifo = xasprintf("%s/refuse/pipe", tmp);
	assert_int_equal(mkfifo(fifo, 0644), 0);
	tree_fails(dir, 100, 100, EINVAL,
		   "/in/pipe: not a regular file, directory or symbolic link");
	/* A file over the bytes its caller counted (it grew since) is
	 * refused before a byte of it is written. */
	_cleanup_free_ char *out = xasprintf("%s/refuse.cpio", tmp);
	int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	int in = open(f, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0 && in >= 0);
	struct al_cpio *c = al_cpio_new(fd);
	assert_int_equal(al_cpio_host_file(c, "in/data", 0644, in, 9), -EFBIG);
	assert_int_equal(al_cpio_host_file(c, "in/data", 0644, in, 10), 0);
	assert_int_equal(al_cpio_finish(c), 0);
	close(in);
	close(fd);
}

/* The inputs reach the guest in its RAM: all of them together, trees
 * included, within half of it (128 MiB for the smallest guest). The same
 * tree of one sparse 80 MiB file named twice must be refused at the
 * second, not written twice into the run's initramfs. */
static void test_initrd_inputs_budget(void **state)
{
	_cleanup_free_ char *dir = xasprintf("%s/big", tmp);
	_cleanup_free_ char *f = xasprintf("%s/big/sparse", tmp);
	_cleanup_free_ char *base = xasprintf("%s/base.cpio", tmp);
	assert_int_equal(mkdir(dir, 0755), 0);
	write_file(f, "", 0644);
	assert_int_equal(truncate(f, 80ll << 20), 0);
	write_file(base, "", 0644);
	_cleanup_free_ char *tmpdir = xstrdup(tmp);
	setenv("TMPDIR", tmpdir, 1); /* where an unprivileged run writes it */
	struct stat st;
	assert_int_equal(stat(dir, &st), 0);
	struct al_fs_entry fs[2];
	char *paths[2] = {"/in1", "/in2"}, *whats[2] = {"ro /in1", "ro /in2"};
	for (int i = 0; i < 2; i++)
		fs[i] = (struct al_fs_entry){.kind = AL_FS_HOST,
					     .path = paths[i],
					     .source = dir,
					     .dir = true,
					     .dev = st.st_dev,
					     .ino = st.st_ino,
					     .what = whats[i]};
	struct al_plan plan = {.memory_bytes = 64ull << 20, .fs = fs, .n_fs = 2};
	struct al_vm_kind kind = {.name = "microvm"};
	struct al_vm_host host = {0};
	snprintf(host.initramfs, sizeof(host.initramfs), "%s", base);
	struct vm_run w = {.orig = &plan, .kind = &kind, .host = &host};
	struct al_error err = {0};
	int r = al_vm_guest_initrd(&w, &err);
	al_vm_guest_unlink(&w);
	assert_int_equal(r, -EFBIG);
	/* The input named, with what is left of the budget (128 - 80 MiB). */
	_cleanup_free_ char *want = xasprintf("input %s: the inputs reach the guest in its RAM, "
					      "at most 48 MiB in all here: airlock/in/1/sparse: "
					      "the tree holds more than",
					      dir);
	assert_contains(err.msg, want);
	assert_null(w.initrd);
	/* Named once, it fits. */
	plan.n_fs = 1;
	if (al_vm_guest_initrd(&w, &err) < 0)
		fail_msg("%s", err.msg);
	al_vm_guest_unlink(&w);
}

/* Whether the file at path holds needle (bytes). */
static bool file_has(const char *path, const char *needle)
{
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	static char buf[1 << 20];
	size_t n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	return memmem(buf, n, needle, strlen(needle)) != NULL;
}

/* A container's root in a guest (guest-root.c): the plan's entries as the
 * agent's mounts, in order, with their payloads and the seccomp program in
 * the initramfs; airlock's own /proc and /dev left to the agent; a
 * writable host directory refused by name. */
static void test_container_initrd(void **state)
{
	_cleanup_free_ char *rootdir = xasprintf("%s/croot", tmp);
	_cleanup_free_ char *hosts = xasprintf("%s/hosts", tmp);
	_cleanup_free_ char *base = xasprintf("%s/base.cpio", tmp);
	assert_int_equal(mkdir(rootdir, 0755), 0);
	write_file(hosts, "127.0.0.1 hosts-marker\n", 0644);
	write_file(base, "", 0644);
	_cleanup_free_ char *tmpdir = xstrdup(tmp);
	setenv("TMPDIR", tmpdir, 1);
	struct stat rs, hs;
	assert_int_equal(stat(rootdir, &rs), 0);
	assert_int_equal(stat(hosts, &hs), 0);
	char resolv[] = "nameserver 127.0.0.1\n";
	struct al_fs_entry fs[] = {
	    {.kind = AL_FS_HOST,
	     .path = "/",
	     .source = rootdir,
	     .dir = true,
	     .dev = rs.st_dev,
	     .ino = rs.st_ino,
	     .access = AL_FS_READ | AL_FS_WRITE,
	     .what = "root"},
	    {.kind = AL_FS_PROC, .path = "/proc", .what = "/proc"},
	    {.kind = AL_FS_DIR, .path = "/dev", .what = "/dev"},
	    {.kind = AL_FS_SCRATCH, .path = "/dev/shm", .source = "shm", .what = "/dev/shm"},
	    {.kind = AL_FS_FILE,
	     .path = "/etc/resolv.conf",
	     .source = resolv,
	     .len = sizeof(resolv) - 1,
	     .mode = 0644,
	     .what = "resolv.conf"},
	    {.kind = AL_FS_HOST,
	     .path = "/etc/hosts",
	     .source = hosts,
	     .dev = hs.st_dev,
	     .ino = hs.st_ino,
	     .access = AL_FS_READ | AL_FS_WRITE,
	     .what = "rw /etc/hosts"},
	    {.kind = AL_FS_HOST,
	     .path = "/data",
	     .source = rootdir,
	     .dir = true,
	     .dev = rs.st_dev,
	     .ino = rs.st_ino,
	     .access = AL_FS_READ,
	     .what = "ro /data"},
	    {.kind = AL_FS_SCRATCH, .path = "/tmp", .source = "t0", .what = "tmpfs /tmp"},
	    {.kind = AL_FS_SPECIAL, .path = "/sys", .source = "sysfs", .what = "sysfs /sys"},
	    {.kind = AL_FS_MASK, .path = "/proc/kcore", .what = "masked /proc/kcore"},
	    {.kind = AL_FS_RDONLY, .path = "/proc/sys", .what = "read-only /proc/sys"},
	};
	uint64_t prog[2] = {0x0000000000000020ull, 0x7fff000000000006ull};
	struct al_plan_root root = {
	    .readonly = true, .umask = 022, .seccomp = prog, .seccomp_len = 2};
	struct al_plan plan = {.memory_bytes = 64ull << 20,
			       .fs = fs,
			       .n_fs = sizeof(fs) / sizeof(*fs),
			       .root = &root,
			       .uid = 0,
			       .gid = 0,
			       .open_files = 1024};
	struct al_vm_kind kind = {.name = "microvm"};
	struct al_vm_host host = {0};
	snprintf(host.initramfs, sizeof(host.initramfs), "%s", base);
	struct vm_run w = {.orig = &plan, .kind = &kind, .host = &host};
	struct al_error err = {0};
	if (al_vm_guest_initrd(&w, &err) < 0)
		fail_msg("%s", err.msg);
	assert_non_null(w.initrd);
	assert_true(file_has(w.initrd, "container\tro\n"));
	assert_true(file_has(w.initrd, "mount\tbind\t/etc/resolv.conf\t/airlock/in/0\n"
				       "mount\tcopy\t/etc/hosts\t/airlock/in/1\n"
				       "mount\tbind\t/data\t/airlock/in/2\n"
				       "mount\ttmpfs\t/tmp\n"
				       "mount\tspecial\t/sys\tsysfs\n"
				       "mount\tmask\t/proc/kcore\n"
				       "mount\trdonly\t/proc/sys\n"));
	assert_false(file_has(w.initrd, "\t/proc\n"));
	assert_false(file_has(w.initrd, "/dev/shm"));
	assert_true(file_has(w.initrd, "ids\t0\t0\n"));
	assert_true(file_has(w.initrd, "seccomp\t/airlock/seccomp\n"));
	assert_true(file_has(w.initrd, "hosts-marker"));
	assert_true(file_has(w.initrd, "airlock/seccomp"));
	al_vm_guest_unlink(&w);
	assert_null(w.initrd);
	/* A writable host directory: a guest cannot write it back. */
	fs[6].access |= AL_FS_WRITE;
	assert_int_equal(al_vm_guest_initrd(&w, &err), -EOPNOTSUPP);
	assert_contains(err.msg, "mounts: /data: backend microvm cannot write a host directory");
	assert_null(w.initrd);
	/* A directory airlock makes outside /dev is not one a guest makes. */
	fs[6].access &= ~AL_FS_WRITE;
	fs[2].path = "/etc";
	assert_int_equal(al_vm_guest_initrd(&w, &err), -EINVAL);
	assert_null(w.initrd);
}

static void test_package_closure(void **state)
{
	const char *pkgs[] = {"bash", NULL};
	char **names = NULL, **versions = NULL;
	struct al_error err = {0};
	if (al_vm_package_closure(pkgs, &names, &versions, &err) < 0)
		fail_msg("%s", err.msg);
	bool libc = false, tinfo = false, bash = false;
	for (size_t i = 0; names[i]; i++) {
		libc |= strcmp(names[i], "libc6") == 0;
		tinfo |= strcmp(names[i], "libtinfo6") == 0;
		bash |= strcmp(names[i], "bash") == 0;
		assert_true(versions[i] && *versions[i]);
		if (i > 0)
			assert_true(strcmp(names[i - 1], names[i]) < 0);
	}
	assert_true(libc && tinfo && bash);
	al_strv_free(names);
	al_strv_free(versions);
	const char *missing[] = {"bash", "no-such-package-here", NULL};
	assert_int_equal(al_vm_package_closure(missing, &names, &versions, &err), -ENOENT);
	assert_contains(err.msg, "package no-such-package-here is not installed");
}

static void test_initramfs_cache(void **state)
{
	struct al_vm_kernel k;
	char why[256];
	if (geteuid() != 0) {
		print_message("skipped: the cache is root's\n");
		skip();
	}
	if (al_vm_kernel_find("cloud-amd64", &k, why, sizeof(why)) != 1) {
		print_message("skipped: %s\n", why);
		skip();
	}
	_cleanup_free_ char *cache = xasprintf("%s/cache/vm", tmp);
	_cleanup_free_ char *agent = xasprintf("%s/agent", tmp);
	write_file(agent, "\177ELF not really an agent\n", 0755);
	const char *mods[] = {"virtio_mmio", "virtio_console", "virtio_blk", NULL};
	char path[PATH_MAX], again[PATH_MAX];
	char **loads = NULL;
	size_t n = 0;
	struct al_error err = {0};
	if (al_vm_initramfs_in(cache, &k, agent, mods, path, sizeof(path), &loads, &n, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(n, 5); /* virtio_ring, virtio, virtio_mmio, virtio_console, virtio_blk */
	assert_string_equal(loads[0], AL_GUEST_MODULES_DIR "/virtio_ring.ko");
	assert_string_equal(loads[4], AL_GUEST_MODULES_DIR "/virtio_blk.ko");
	al_strv_free(loads);
	struct stat st, st2;
	assert_int_equal(stat(cache, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0755);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_uid, 0);
	assert_int_equal(st.st_mode & 07777, 0644);
	_cleanup_free_ char *prefix = xasprintf("%s/initramfs-%s-", cache, k.version);
	assert_int_equal(strncmp(path, prefix, strlen(prefix)), 0);

	/* The agent at /init (0755), its directories, the modules flat. */
	_cleanup_free_ char *out = xasprintf("%s/initramfs", tmp);
	extract(path, out);
	_cleanup_free_ char *init = xasprintf("%s/init", out);
	assert_string_equal(read_text(init), "\177ELF not really an agent\n");
	struct stat ist;
	assert_int_equal(stat(init, &ist), 0);
	assert_int_equal(ist.st_mode & 0777, 0755);
	static const char *const dirs[] = {"dev", "proc", "sys", "mnt", "airlock/modules"};
	for (size_t i = 0; i < AL_ARRAY_SIZE(dirs); i++) {
		_cleanup_free_ char *d = xasprintf("%s/%s", out, dirs[i]);
		assert_int_equal(stat(d, &ist), 0);
		assert_true(S_ISDIR(ist.st_mode));
	}
	_cleanup_free_ char *ko = xasprintf("%s/airlock/modules/virtio_console.ko", out);
	assert_int_equal(stat(ko, &ist), 0);
	assert_true(ist.st_size > 1000);

	/* Reused: the same file, not written again. */
	if (al_vm_initramfs_in(cache, &k, agent, mods, again, sizeof(again), &loads, &n, &err) < 0)
		fail_msg("%s", err.msg);
	al_strv_free(loads);
	assert_string_equal(again, path);
	assert_int_equal(stat(again, &st2), 0);
	assert_int_equal(st2.st_ino, st.st_ino);
	assert_true(st2.st_mtim.tv_sec == st.st_mtim.tv_sec &&
		    st2.st_mtim.tv_nsec == st.st_mtim.tv_nsec);

	/* Not root's: not trusted, made again (a new file, root's). */
	assert_int_equal(chown(path, 65534, 65534), 0);
	if (al_vm_initramfs_in(cache, &k, agent, mods, again, sizeof(again), &loads, &n, &err) < 0)
		fail_msg("%s", err.msg);
	al_strv_free(loads);
	assert_string_equal(again, path);
	assert_int_equal(stat(again, &st2), 0);
	assert_int_equal(st2.st_uid, 0);
	assert_true(st2.st_ino != st.st_ino);
	/* Writable by others: the same. */
	assert_int_equal(chmod(path, 0666), 0);
	if (al_vm_initramfs_in(cache, &k, agent, mods, again, sizeof(again), &loads, &n, &err) < 0)
		fail_msg("%s", err.msg);
	al_strv_free(loads);
	assert_int_equal(stat(again, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0644);

	/* Another agent is another file. */
	write_file(agent, "\177ELF another agent\n", 0755);
	if (al_vm_initramfs_in(cache, &k, agent, mods, again, sizeof(again), &loads, &n, &err) < 0)
		fail_msg("%s", err.msg);
	al_strv_free(loads);
	assert_string_not_equal(again, path);

	/* A cache directory others may write to is refused. */
	assert_int_equal(chmod(cache, 0777), 0);
	assert_int_equal(
	    al_vm_initramfs_in(cache, &k, agent, mods, again, sizeof(again), &loads, &n, &err),
	    -EPERM);
	assert_contains(err.msg, "the cache directory must be root's");
	assert_int_equal(chmod(cache, 0755), 0);
	al_vm_kernel_free(&k);
}

/* A small image (bash and what it needs): made once, then reused. */
static void test_system_image_cache(void **state)
{
	if (geteuid() != 0) {
		print_message("skipped: the cache is root's\n");
		skip();
	}
	if (access("/usr/sbin/mkfs.ext4", X_OK) != 0 || access("/usr/sbin/debugfs", X_OK) != 0) {
		print_message("skipped: no mkfs.ext4 or debugfs (package e2fsprogs)\n");
		skip();
	}
	_cleanup_free_ char *cache = xasprintf("%s/syscache", tmp);
	const char *pkgs[] = {"bash", NULL};
	char path[PATH_MAX], again[PATH_MAX];
	struct al_error err = {0};
	if (al_vm_system_image_in(cache, pkgs, path, sizeof(path), &err) < 0)
		fail_msg("%s", err.msg);
	struct stat st, st2;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_uid, 0);
	assert_int_equal(st.st_mode & 07777, 0644);
	/* bash and libc in it, through the merged-/usr link; no manual. */
	_cleanup_free_ char *ls = xasprintf(
	    "debugfs -R 'stat /usr/bin/bash' '%s' 2>/dev/null | grep -q 'Type: regular' && "
	    "debugfs -R 'stat /bin' '%s' 2>/dev/null | grep -q 'Fast link dest: \"usr/bin\"' && "
	    "debugfs -R 'ls /usr/lib/x86_64-linux-gnu' '%s' 2>/dev/null | grep -q 'libc.so.6' && "
	    "! debugfs -R 'stat /usr/share/man/man1/bash.1.gz' '%s' 2>&1 | grep -q 'Type:' && "
	    "debugfs -R 'cat /etc/passwd' '%s' 2>/dev/null | grep -q '^root:x:0:0:'",
	    path, path, path, path, path);
	assert_int_equal(run(ls), 0);
	_cleanup_free_ char *fsck = xasprintf("e2fsck -fn '%s' >/dev/null 2>&1", path);
	assert_int_equal(run(fsck), 0);
	/* No staging tree or temporary file left. */
	_cleanup_free_ char *left =
	    xasprintf("test -z \"$(ls -A '%s' | grep -v -e '^.lock$' -e '^system-')\"", cache);
	assert_int_equal(run(left), 0);

	if (al_vm_system_image_in(cache, pkgs, again, sizeof(again), &err) < 0)
		fail_msg("%s", err.msg);
	assert_string_equal(again, path);
	assert_int_equal(stat(again, &st2), 0);
	assert_int_equal(st2.st_ino, st.st_ino);
	assert_true(st2.st_mtim.tv_sec == st.st_mtim.tv_sec &&
		    st2.st_mtim.tv_nsec == st.st_mtim.tv_nsec);
	assert_int_equal(chown(path, 65534, 0), 0);
	if (al_vm_system_image_in(cache, pkgs, again, sizeof(again), &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(stat(again, &st2), 0);
	assert_int_equal(st2.st_uid, 0);
	assert_true(st2.st_ino != st.st_ino);
}

/* airlock gc's cache sweep: cached files unread and unchanged for
 * AL_VM_CACHE_UNUSED_DAYS go, younger ones and other names stay; a
 * builder's temporary file goes after a day; a missing cache is 0. */
static void test_cache_gc(void **state)
{
	(void)state;
	_cleanup_free_ char *cache = xasprintf("%s/gccache", tmp);
	struct al_error err = {0};
	time_t now = time(NULL), day = 86400;
	struct {
		const char *name;
		time_t age;
		bool gone;
	} files[] = {
	    {"initramfs-6.1-aaaa.cpio", 8 * day, true},
	    {"initramfs-6.1-bbbb.cpio", 6 * day, false},
	    {"system-cccc.ext4", 30 * day, true},
	    {"system-dddd.ext4", 0, false},
	    {".initramfs-eeee.tmp", 2 * day, true},
	    {".system-ffff.tmp", day / 2, false},
	    {"notes.txt", 60 * day, false},
	    {"system-gggg.ext4.bak", 60 * day, false},
	};

	assert_int_equal(al_vm_cache_gc_in(cache, now, &err), 0);
	assert_int_equal(al_vm_cache_mkdir(cache, &err), 0);
	for (size_t i = 0; i < AL_ARRAY_SIZE(files); i++) {
		_cleanup_free_ char *p = xasprintf("%s/%s", cache, files[i].name);
		write_file(p, "x", 0644);
		struct timespec ts[2] = {{.tv_sec = now - files[i].age},
					 {.tv_sec = now - files[i].age}};
		assert_int_equal(utimensat(AT_FDCWD, p, ts, 0), 0);
	}
	/* Read a day ago, made long before: still in use. */
	_cleanup_free_ char *used = xasprintf("%s/system-hhhh.ext4", cache);
	write_file(used, "x", 0644);
	struct timespec ts[2] = {{.tv_sec = now - day}, {.tv_sec = now - 90 * day}};
	assert_int_equal(utimensat(AT_FDCWD, used, ts, 0), 0);

	assert_int_equal(al_vm_cache_gc_in(cache, now, &err), 3);
	for (size_t i = 0; i < AL_ARRAY_SIZE(files); i++) {
		_cleanup_free_ char *p = xasprintf("%s/%s", cache, files[i].name);
		assert_int_equal(access(p, F_OK) != 0, files[i].gone);
	}
	assert_int_equal(access(used, F_OK), 0);
	assert_int_equal(al_vm_cache_gc_in(cache, now, &err), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_version_order),	cmocka_unit_test(test_kernel_find),
	    cmocka_unit_test(test_module_closure_fake), cmocka_unit_test(test_module_closure_host),
	    cmocka_unit_test(test_cpio_round_trip),	cmocka_unit_test(test_cpio_refusals),
	    cmocka_unit_test(test_package_closure),	cmocka_unit_test(test_initramfs_cache),
	    cmocka_unit_test(test_system_image_cache),	cmocka_unit_test(test_initrd_inputs_budget),
	    cmocka_unit_test(test_container_initrd),	cmocka_unit_test(test_cache_gc),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
