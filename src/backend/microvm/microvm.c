/* The microvm and vm backends: the command runs in a guest with a kernel of
 * its own, under QEMU, and QEMU runs inside the native layer.
 *
 * Each op lowers the run's plan to a derived native plan (struct vm_run),
 * the way the wasm backend does with node: the native sandbox's command is
 * airlock itself (`/.airlock/airlock __vmm CONFIG`, vmm.h), which starts
 * QEMU and speaks with the guest agent (src/guest) over a virtio serial port.
 * The file tree gains /.airlock with airlock, the guest kernel, the
 * initramfs of this run and the system image, all read-only. So the VMM is
 * held by everything the native layer holds a command to: its namespaces
 * (its network: loopback, the gateway's listeners and the capture rules),
 * the run's cgroup, seccomp, landlock; and the guest's promises are the
 * agent's (guest.c makes its config and initramfs).
 *
 * microvm: QEMU's microvm machine (virtio-mmio, no PCI, no firmware to
 * speak of) with Debian's cloud kernel; vm: the q35 machine (PCI, ACPI,
 * the usual devices) with Debian's generic kernel. Both share the agent,
 * the channel and the system image. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/microvm/microvm.h"
#include "backend/microvm/vmm.h"
#include "backend/native/monitor.h"
#include "backend/native/state.h"
#include "core/cleanup.h"
#include "core/util.h"
#include "net/layout.h"

/* The VMM's own share beside the guest's RAM: QEMU's TCG translation
 * cache (capped with tb-size), its heap, threads and the VMM. */
#define VMM_OVERHEAD (256ull << 20)
/* The guest kernel's share beside what the command may use. */
#define GUEST_KERNEL (96ull << 20)
/* QEMU's threads (TCG's vCPU, the I/O thread, RCU, a worker pool). */
#define VMM_PIDS 128u

static const struct al_vm_kind kinds[] = {
    {.name = "microvm",
     .flavour = "cloud-amd64",
     .machine = "microvm,x-option-roms=off,rtc=on",
     .bus = "device",
     .modules =
	 (const char *const[]){"virtio_mmio", "virtio_console", "virtio_blk", "overlay", NULL}},
    {.name = "vm",
     .flavour = "amd64",
     .machine = "q35",
     .bus = "pci",
     /* The generic kernel has ext4 and crc32c (its metadata checksums)
      * as modules; the cloud kernel has both built in. */
     .modules = (const char *const[]){"virtio_pci", "virtio_console", "virtio_blk", "virtio_rng",
				      "crc32c_generic", "ext4", "overlay", NULL}},
};

const struct al_vm_kind *al_vm_kind(const char *name)
{
	for (size_t i = 0; i < sizeof(kinds) / sizeof(*kinds); i++)
		if (strcmp(kinds[i].name, name) == 0)
			return &kinds[i];
	return NULL;
}

uint64_t al_vm_guest_ram(const struct al_plan *p)
{
	uint64_t ram = (p->memory_bytes ? p->memory_bytes : AL_DEFAULT_MEMORY_BYTES) + GUEST_KERNEL;
	return ram < (256ull << 20) ? 256ull << 20 : (ram + (1ull << 20) - 1) & ~((1ull << 20) - 1);
}

void al_vm_run_free(struct vm_run *w)
{
	if (!w)
		return;
	for (size_t i = w->n_orig_fs; i < w->plan.n_fs; i++) {
		free(w->plan.fs[i].path);
		free(w->plan.fs[i].source);
		free(w->plan.fs[i].what);
	}
	free(w->plan.fs);
	al_strv_free(w->plan.argv);
	al_strv_free(w->envp);
	al_vm_guest_unlink(w);
	if (w->scratch >= 0)
		close(w->scratch);
	free(w);
}

/* A read-only host file at path in /.airlock. */
static int add_file(struct vm_run *w, const char *host, const char *path, const char *what,
		    struct al_error *err)
{
	struct al_fs_entry *e = &w->plan.fs[w->plan.n_fs];
	struct stat st;

	if (stat(host, &st) < 0)
		return al_error_setsys(err, errno, "backend %s: %s %s", w->kind->name, what, host);
	if (!S_ISREG(st.st_mode))
		return al_error_set(err, EINVAL, "backend %s: %s %s is not a regular file",
				    w->kind->name, what, host);
	*e = (struct al_fs_entry){.kind = AL_FS_HOST,
				  .path = xstrdup(path),
				  .source = xstrdup(host),
				  .access = AL_FS_READ | AL_FS_EXEC,
				  .dev = st.st_dev,
				  .ino = st.st_ino,
				  .nlink = st.st_nlink,
				  .what = xasprintf("%s %s", w->kind->name, what)};
	if (!w->orig->rootless) {
		e->as_owner = true;
		e->owner_uid = st.st_uid;
		e->owner_gid = st.st_gid;
	}
	w->plan.n_fs++;
	return 0;
}

/* What the layer cannot do, refused before anything else, naming the
 * plan's field. */
static int refuse(const struct vm_run *w, const struct al_plan *p, struct al_error *err)
{
	const char *n = w->kind->name;

	if (p->language)
		return al_error_set(err, EINVAL, "--language is for --backend wasm, not %s", n);
	/* A container's root: its tree as the guest's (guest-root.c). */
	if (p->root)
		return al_vm_container_check(w, err);
	/* The guest's scratch faces are the agent's: /work, /tmp and
	 * /dev/shm on its one tmpfs. */
	if (p->workdir && strcmp(p->workdir, "/work") != 0)
		return al_error_set(
		    err, EOPNOTSUPP,
		    "backend %s runs the command in the guest's /work, not --workdir "
		    "%s; leave --workdir out, or use --backend native",
		    n, p->workdir);
	for (size_t i = 0; i < p->n_fs; i++) {
		const struct al_fs_entry *e = &p->fs[i];
		if (e->kind == AL_FS_HOST && (e->access & AL_FS_WRITE))
			return al_error_set(
			    err, EOPNOTSUPP,
			    "backend %s cannot give the guest a writable host path "
			    "(--rw %s): inputs reach the guest as a read-only copy; "
			    "use --ro and --copy-out, or --backend native",
			    n, e->path);
	}
	return 0;
}

/* A container's plan: the VMM's sandbox gets the host's usual tree
 * instead of the container's, which the guest shows; of the plan's root
 * the engine's network namespace, cgroup, sysctls and oom score stay. */
static int vmm_tree(struct vm_run *w, struct al_error *err)
{
	struct al_errors errs = {0};
	int r;

	w->vmm_root = *w->orig->root;
	w->vmm_root.in_guest = true;
	w->vmm_root.seccomp = NULL;
	w->vmm_root.seccomp_len = 0;
	w->plan.root = &w->vmm_root;
	w->plan.uid = AL_SANDBOX_UID;
	w->plan.gid = AL_SANDBOX_GID;
	w->plan.groups = NULL;
	w->plan.n_groups = 0;
	w->plan.workdir = (char *)"/work";
	w->plan.hostname = w->orig->hostname ? w->orig->hostname : (char *)"airlock";
	w->plan.fs = NULL;
	w->plan.n_fs = 0;
	w->n_orig_fs = 0;
	r = al_plan_build_host_tree(&w->plan, &errs);
	if (r < 0)
		r = al_errors_first(&errs, 0, err);
	al_errors_clear(&errs);
	/* room for what derive() adds */
	w->plan.fs = xrealloc(w->plan.fs, (w->plan.n_fs + 8) * sizeof(*w->plan.fs));
	return r;
}

static int derive(const struct al_vm_kind *kind, const struct al_plan *p, bool for_run,
		  bool session, struct vm_run **out, struct al_error *err)
{
	struct vm_run *w = xcalloc(1, sizeof(*w));
	char self[PATH_MAX];
	_cleanup_free_ char *cfg = NULL;
	int r;

	w->kind = kind;
	w->scratch = -1;
	w->session = session;
	w->orig = p;
	w->plan = *p;
	w->plan.argv = NULL;
	if (p->root) {
		if ((r = vmm_tree(w, err)) < 0)
			goto fail;
	} else {
		w->n_orig_fs = p->n_fs;
		w->plan.fs = xcalloc(p->n_fs + 8, sizeof(*w->plan.fs));
		memcpy(w->plan.fs, p->fs, p->n_fs * sizeof(*p->fs));
	}
	if ((r = refuse(w, p, err)) < 0)
		goto fail;
	/* A session's plan has no command; a probe does not know whether
	 * the plan is a session's, so only a run's is checked here. */
	if (for_run && !session && (!p->argv || !p->argv[0])) {
		r = al_error_set(err, EINVAL, "backend %s: no command given", kind->name);
		goto fail;
	}
	if ((r = al_vm_host(kind, &w->host, err)) < 0)
		goto fail;
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0) {
		r = al_error_setsys(err, errno, "backend %s: /proc/self/exe", kind->name);
		goto fail;
	}
	self[n] = '\0';
	w->plan.fs[w->plan.n_fs++] =
	    (struct al_fs_entry){.kind = AL_FS_DIR,
				 .path = xstrdup(AL_VMM_DIR),
				 .access = AL_FS_READ | AL_FS_EXEC,
				 .mode = 0555,
				 .what = xasprintf("%s " AL_VMM_DIR, kind->name)};
	/* A container's root is the guest's root device, in place of the
	 * system image (made for a run only; a check shows the image). */
	if (for_run && p->root && (r = al_vm_container_image(w, err)) < 0)
		goto fail;
	if ((r = add_file(w, self, AL_VMM_SELF, "airlock", err)) < 0 ||
	    (r = add_file(w, w->host->kernel.vmlinuz, AL_VMM_KERNEL, "kernel", err)) < 0 ||
	    (r = add_file(w, w->rootimg ? w->rootimg : w->host->system_image, AL_VMM_SYSTEM,
			  w->rootimg ? "container root image" : "system image", err)) < 0)
		goto fail;
	/* The initramfs of this run (the agent, its modules, its config and
	 * the inputs) is written only for a run; a check shows the base. */
	if (for_run) {
		if ((r = al_vm_guest_initrd(w, err)) < 0)
			goto fail;
	}
	r = add_file(w, for_run ? w->initrd : w->host->initramfs, AL_VMM_INITRD, "initramfs", err);
	if (r < 0)
		goto fail;
	if (w->host->kvm) {
		struct stat st;
		if (stat("/dev/kvm", &st) < 0) {
			r = al_error_setsys(err, errno, "backend %s: /dev/kvm", kind->name);
			goto fail;
		}
		w->plan.fs[w->plan.n_fs++] =
		    (struct al_fs_entry){.kind = AL_FS_DEVICE,
					 .path = xstrdup("/dev/kvm"),
					 .source = xstrdup("/dev/kvm"),
					 .access = AL_FS_READ | AL_FS_WRITE,
					 .dev = st.st_dev,
					 .ino = st.st_ino,
					 .nlink = st.st_nlink,
					 .what = xasprintf("%s /dev/kvm", kind->name)};
	}

	/* The VMM's limits: the guest's RAM and QEMU's own beside it. The
	 * command's memory and pids limits hold inside the guest (the
	 * agent's cgroup); CPU time and the timeout count the VMM's. */
	w->plan.memory_bytes = al_vm_guest_ram(p) + VMM_OVERHEAD;
	w->plan.pids = VMM_PIDS;
	w->plan.scratch_read_after = true;
	w->plan.envp = w->envp = NULL;
	al_strv_push(&w->envp, "PATH=/usr/bin:/bin");
	w->plan.envp = w->envp;
	cfg = al_vm_vmm_config(w);
	al_strv_push(&w->plan.argv, AL_VMM_SELF);
	al_strv_push(&w->plan.argv, "__vmm");
	al_strv_push(&w->plan.argv, cfg);
	*out = w;
	return 0;
fail:
	al_vm_run_free(w);
	return r;
}

static int vm_probe_kind(const struct al_vm_kind *kind, const struct al_plan *p,
			 struct al_error *err)
{
	struct vm_run *w = NULL;
	int r;

	if ((r = derive(kind, p, false, false, &w, err)) < 0)
		return r;
	r = al_backend_native.probe(&w->plan, err);
	al_vm_run_free(w);
	return r;
}

static int vm_describe_kind(const struct al_vm_kind *kind, const struct al_plan *p, FILE *f,
			    json_t *json, struct al_error *err)
{
	struct vm_run *w = NULL;
	int r;

	if ((r = derive(kind, p, false, false, &w, err)) < 0)
		return r;
	const struct al_vm_host *h = w->host;
	if (f) {
		fprintf(f, "%s:    QEMU %s (%s), accel %s, guest RAM %llu MiB\n", kind->name,
			h->qemu, h->qemu_version, h->kvm ? "kvm" : "tcg",
			(unsigned long long)(al_vm_guest_ram(p) >> 20));
		fprintf(f, "  kernel    %s (%s)\n", h->kernel.vmlinuz, h->kernel.package);
		fprintf(f, "  system    %s (read-only ext4 of the host's packages)\n",
			h->system_image);
		fprintf(f, "  network   %s\n",
			p->gateway ? "no NIC: the agent carries connections over the channel "
				     "to the gateway"
				   : "none (no NIC)");
	} else {
		json_object_set_new(
		    json, "vm",
		    json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:I}", "machine", kind->name, "qemu",
			      h->qemu, "accel", h->kvm ? "kvm" : "tcg", "kernel", h->kernel.vmlinuz,
			      "kernel_package", h->kernel.package, "system_image", h->system_image,
			      "guest_ram", (json_int_t)al_vm_guest_ram(p)));
	}
	r = al_backend_native.describe(&w->plan, f, json, err);
	al_vm_run_free(w);
	return r;
}

/* The native backend's events, relayed (al_sandbox_events_relay); the
 * VMM's signals (vmm.h) end the run for the guest's memory or pids limit or
 * a failed guest, and its report gives the command's memory peak. */
static void ev_scratch(void *d, int fd)
{
	struct vm_run *w = d;
	if (w->scratch < 0)
		w->scratch = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	/* A session's files are the guest's, which the VMM's scratch does
	 * not hold: the run gets no scratch, so its file API refuses (403)
	 * rather than act on the VMM's /work and /tmp (its socket there). */
	if (w->session)
		return;
	if (w->orig_events->scratch)
		w->orig_events->scratch(w->orig_events->data, fd);
}

/* The VMM's report (vmm.h), read from the scratch without following a
 * link or blocking; written by sandboxed code, so only numbers it could
 * claim anyway come from it: the command's memory peak. */
static void read_report(struct vm_run *w)
{
	char buf[160] = {0};
	struct stat st;
	int fd = w->scratch < 0 ? -1
				: openat(w->scratch, AL_VMM_REPORT_SCRATCH,
					 O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size < (off_t)sizeof(buf) &&
	    read(fd, buf, sizeof(buf) - 1) > 0) {
		int status;
		unsigned oom, pids;
		unsigned long long user, sys, peak;
		if (sscanf(buf, "%d %u %u %llu %llu %llu", &status, &oom, &pids, &user, &sys,
			   &peak) == 6)
			w->orig_events->meter->inner_memory_peak = peak;
	}
	close(fd);
}
static void ev_ready(void *d)
{
	/* The sandbox holds its initramfs by a mount now: the file goes. */
	struct vm_run *w = d;
	al_vm_guest_unlink(w);
	w->orig_events->ready(w->orig_events->data);
}
static void ev_exited(void *d, int status)
{
	struct vm_run *w = d;
	struct al_meter *m = w->orig_events->meter;

	read_report(w);
	if (m->inner_memory_peak)
		m->res->cgroup.memory_peak = m->inner_memory_peak;
	if (WIFSIGNALED(status) && !m->hit) {
		/* The guest's cgroup counted them: the record's denials. */
		if (WTERMSIG(status) == AL_VMM_SIG_MEMORY) {
			m->inner_oom_kills = 1;
			m->res->cgroup.oom_kills += 1;
			al_meter_stop(m, AL_END_MEMORY, "memory", w->orig->memory_bytes,
				      m->inner_memory_peak ? m->inner_memory_peak
							   : w->orig->memory_bytes);
		} else if (WTERMSIG(status) == AL_VMM_SIG_PIDS) {
			m->inner_pids_hits = 1;
			m->res->cgroup.pids_max_hits += 1;
			al_meter_stop(m, AL_END_PIDS, "pids", w->orig->pids, 1);
		} else if (WTERMSIG(status) == AL_VMM_SIG_GUEST) {
			/* The VMM said why on stderr and killed the guest. */
			m->res->signal = SIGKILL;
			al_meter_stop(m, AL_END_KILLED, "guest", 0, 0);
		}
	}
	w->orig_events->exited(w->orig_events->data, status);
}

static int vm_prepare_kind(const struct al_vm_kind *kind, struct al_sandbox *sb,
			   struct al_error *err)
{
	struct vm_run *w = NULL;
	int r;

	/* A session is a native run of one command, the VMM, which serves
	 * the session's execs (vm-exec.c): the native layer is told of no
	 * session. */
	bool session = sb->session;
	if ((r = derive(kind, sb->plan, true, session, &w, err)) < 0)
		return r;
	w->loop = sb->loop;
	w->exec_events = sb->exec_events;
	sb->session = false;
	/* Its pause freezes the VMM with its guest; its tty execs' ptys are
	 * the VMM's sandbox's (vmm-sess.c). */
	sb->hosts_session = session;
	w->orig_events = sb->events;
	al_sandbox_events_relay(&w->events, w);
	w->events.scratch = ev_scratch;
	w->events.ready = ev_ready;
	w->events.exited = ev_exited;
	sb->plan = &w->plan;
	sb->events = &w->events;
	r = al_backend_native.prepare(sb, err);
	if (sb->state) {
		sb->state->outer = w;
	} else {
		sb->plan = w->orig;
		sb->events = w->orig_events;
		sb->session = session;
		al_vm_run_free(w);
	}
	return r;
}

static int vm_start(struct al_sandbox *sb, struct al_error *err)
{
	return al_backend_native.start(sb, err);
}

static void vm_destroy(struct al_sandbox *sb)
{
	struct vm_run *w = sb->state ? sb->state->outer : NULL;

	if (w)
		al_vm_execs_end(w);
	al_backend_native.destroy(sb);
	if (w) {
		sb->plan = w->orig;
		sb->events = w->orig_events;
		al_vm_run_free(w);
	}
}

static int vm_usable_kind(const struct al_vm_kind *kind, char *why, size_t len)
{
	if (!al_backend_usable(&al_backend_native, why, len))
		return 0;
	return al_vm_host_check(kind, why, len);
}

static const char *vm_platform_kind(const struct al_vm_kind *kind)
{
	return al_vm_platform(kind);
}

#define KIND_OPS(id, idx)                                                                          \
	static int id##_probe(const struct al_plan *p, struct al_error *err)                       \
	{                                                                                          \
		return vm_probe_kind(&kinds[idx], p, err);                                         \
	}                                                                                          \
	static int id##_describe(const struct al_plan *p, FILE *f, json_t *json,                   \
				 struct al_error *err)                                             \
	{                                                                                          \
		return vm_describe_kind(&kinds[idx], p, f, json, err);                             \
	}                                                                                          \
	static int id##_prepare(struct al_sandbox *sb, struct al_error *err)                       \
	{                                                                                          \
		return vm_prepare_kind(&kinds[idx], sb, err);                                      \
	}                                                                                          \
	static int id##_usable(char *why, size_t len)                                              \
	{                                                                                          \
		return vm_usable_kind(&kinds[idx], why, len);                                      \
	}                                                                                          \
	static const char *id##_platform(void)                                                     \
	{                                                                                          \
		return vm_platform_kind(&kinds[idx]);                                              \
	}

KIND_OPS(microvm, 0)
KIND_OPS(vm, 1)

#define FACTS_COMMON                                                                               \
	.files = "a read-only ext4 system image of the host's own packages (airlock vm-image), "   \
		 "the inputs as a read-only copy in the initramfs, a guest tmpfs for /work and "   \
		 "/tmp; no host path reaches the guest (a container's own root: an ext4 copy "     \
		 "under an overlay on the guest's scratch)",                                       \
	.egress = "no NIC: the guest agent carries the proxy, DNS and captured connections "       \
		  "over a virtio serial port to the VMM, which makes them in the native layer's "  \
		  "network namespace, through the run's gateway",                                  \
	.pids = "the guest's own kernel and processes; QEMU in the native layer's pid "            \
		"namespace",                                                                       \
	.limits = "memory and pids: a cgroup in the guest (the guest's RAM above it); the VMM "    \
		  "in the run's cgroup; CPU time and budget: the VMM's (the emulator's under "     \
		  "TCG)",                                                                          \
	.exec = "yes: the VMM serves each exec over its socket to the guest agent, at most 16 at " \
		"once, each with its own memory limit where asked, and a terminal (a pty of the "  \
		"guest's) where asked; the file API done by the agent; pause freezes QEMU with "   \
		"its guest",                                                                       \
	.features = AL_BACKEND_EXEC | AL_BACKEND_PAUSE | AL_BACKEND_NETWORK | AL_BACKEND_TTY |     \
		    AL_BACKEND_HIDES_PIDS | AL_BACKEND_PRIVATE_TMP | AL_BACKEND_PRIVATE_LOOPBACK | \
		    AL_BACKEND_MOUNTS_ELSEWHERE | AL_BACKEND_EXEC_FILES | AL_BACKEND_OCI_ROOT

static const struct al_backend_facts microvm_facts = {
    .summary = "a guest kernel of its own (Debian's cloud kernel) on QEMU's microvm machine "
	       "(virtio-mmio), with airlock's own agent as init; QEMU confined by the native "
	       "layer and its own -sandbox",
    .kernel = "the guest's kernel; the VMM's virtio devices (console, block) and, past QEMU, "
	      "the native layer's seccomp allowlist",
    FACTS_COMMON,
};

static const struct al_backend_facts vm_facts = {
    .summary = "a full ephemeral VM: QEMU's q35 machine (PCI, ACPI, the usual devices) with "
	       "Debian's generic kernel and airlock's agent as init; QEMU confined by the "
	       "native layer and its own -sandbox",
    .kernel = "the guest's kernel; the VMM's PCI virtio devices (console, block, rng) and "
	      "chipset, past QEMU the native layer's seccomp allowlist",
    FACTS_COMMON,
};

#define OPS(id)                                                                                    \
	{                                                                                          \
		.name = #id, .facts = &id##_facts, .usable = id##_usable,                          \
		.platform = id##_platform, .probe = id##_probe, .describe = id##_describe,         \
		.prepare = id##_prepare, .start = vm_start, .release = al_monitor_release,         \
		.stop = al_monitor_stop, .kill = al_monitor_kill, .finish = al_monitor_finish,     \
		.destroy = vm_destroy, .exec = al_vm_exec, .exec_signal = al_vm_exec_signal,       \
		.pause = al_monitor_pause,                                                         \
	}

const struct al_backend_ops al_backend_microvm = OPS(microvm);
const struct al_backend_ops al_backend_vm = OPS(vm);
