/* The microvm and vm backends' own parts (microvm.c: the ops and the
 * derived plan; guest.c: the host's QEMU, kernel, images and KVM, the
 * guest's config and initramfs of a run, the VMM's config). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "backend/microvm/image.h"

/* Where the VMM finds what it runs, in its sandbox (read-only). */
#define AL_VMM_KERNEL "/.airlock/vmlinuz"
#define AL_VMM_INITRD "/.airlock/initrd"
#define AL_VMM_SYSTEM "/.airlock/system.ext4"
/* A run's initramfs until its sandbox holds it (root; else $TMPDIR). */
#define AL_VM_RUN_DIR "/run/airlock/vm"

/* A machine: microvm or vm. */
struct al_vm_kind {
	const char *name;
	const char *flavour; /* the Debian kernel's: "cloud-amd64", "amd64" */
	const char *machine; /* QEMU's -M */
	const char *bus;     /* virtio devices: "device" (mmio) or "pci" */
	const char *const *modules;
};

/* What this host runs a kind with, found once per process. */
struct al_vm_host {
	const char *qemu; /* /usr/bin/qemu-system-x86_64 */
	char qemu_version[64];
	bool kvm; /* /dev/kvm works: a guest booted on it (probed once) */
	struct al_vm_kernel kernel;
	char agent[4096];	 /* the guest agent binary */
	char initramfs[4096];	 /* the base initramfs (cached) */
	char system_image[4096]; /* the system image (cached) */
	char tsc_arg[48];	 /* " tsc_early_khz=N tsc=reliable" under TCG, or "" */
	char **modules;		 /* in the initramfs, load order */
	size_t n_modules;
};

struct vm_run {
	/* First: the events it relays to (al_sandbox_events_relay). */
	const struct al_sandbox_events *orig_events;
	struct al_plan plan;	    /* the run's plan with our argv and fs */
	const struct al_plan *orig; /* the run's (borrowed) */
	size_t n_orig_fs;	    /* plan.fs[n_orig_fs..] are ours */
	const struct al_vm_kind *kind;
	const struct al_vm_host *host;
	char *initrd;  /* this run's initramfs on the host, until unlinked */
	char *rootimg; /* a container's root as an image, the same */
	/* A container's root: the VMM's sandbox has the host's tree, and
	 * of the plan's root only its engine's namespace, cgroup, sysctls
	 * and oom score (al_plan_root.in_guest). */
	struct al_plan_root vmm_root;
	int scratch; /* the scratch's root (a dup), for the VMM's report; -1 */
	char **envp;
	struct al_sandbox_events events; /* forwards to orig_events */
	/* A session: the VMM serves execs on its socket (vm-exec.c). */
	bool session;
	struct al_loop *loop;			  /* the run's */
	const struct al_exec_events *exec_events; /* the run's */
	struct vm_exec *execs;			  /* those not ended yet */
	bool vmm_reached;			  /* a connection to the VMM's socket was made */
	/* How long a killed exec's ENDED may take before it is ended here
	 * (vm-exec.c; 0: KILL_WAIT_MS, the tests' shorter). */
	unsigned kill_wait_ms;
};

const struct al_vm_kind *al_vm_kind(const char *name);
/* The guest's RAM for a plan: its memory limit and the guest kernel's
 * share, at least 256 MiB. */
uint64_t al_vm_guest_ram(const struct al_plan *p);
void al_vm_run_free(struct vm_run *w);

/* The host's means for kind: QEMU, the kernel, the agent, the base
 * initramfs and the system image (built on first use). 0 or -errno with
 * err naming what is missing and how to get it. */
int al_vm_host(const struct al_vm_kind *kind, const struct al_vm_host **out, struct al_error *err);
/* Only whether QEMU, a kernel of kind's flavour and the agent are here
 * (for usable: it builds nothing): 1, or 0 with why. */
int al_vm_host_check(const struct al_vm_kind *kind, char *why, size_t len);
/* "kvm" or "tcg" once the host is known; "tcg" where /dev/kvm cannot be
 * opened; NULL before a run has probed it. */
const char *al_vm_platform(const struct al_vm_kind *kind);
/* Write w's initramfs (the base, then this run's config and inputs) to a
 * new file, w->initrd. */
int al_vm_guest_initrd(struct vm_run *w, struct al_error *err);
/* Remove w->initrd and w->rootimg (once the sandbox holds them, or at
 * the end). */
void al_vm_guest_unlink(struct vm_run *w);
/* guest.c's parts for guest-root.c: a new file for w->initrd holding the
 * base initramfs (its descriptor, or -errno); the modules a run's guest
 * loads (overlay only with a container's root) into out, how many. */
#define AL_VM_MAX_MODULES 32
int al_vm_initrd_create(struct vm_run *w, struct al_error *err);
/* The config's fields every guest of w shares (its modules into mods, at
 * least AL_VM_MAX_MODULES), the rest zero but umask 022. */
struct al_guest_config;
void al_vm_guest_config_init(const struct vm_run *w, struct al_guest_config *c, const char **mods);
/* w->initrd made (al_vm_initrd_create) with the directory airlock/ and c
 * as its config: its descriptor in *fd and the cpio writer to go on with
 * in *cp (the caller's to finish). 0, or -errno with err set. */
struct al_cpio;
int al_vm_initrd_begin(struct vm_run *w, const struct al_guest_config *c, int *fd,
		       struct al_cpio **cp, struct al_error *err);
size_t al_vm_guest_modules(const struct vm_run *w, const char **out);

/* guest-root.c: a container's own root (the OCI runtime's plan->root).
 * Its directory as an ext4 image, w->rootimg (mkfs.ext4 -d, the files
 * with their own ids), the guest's root device in place of the system
 * image; and the initramfs whose config tells the agent to show it
 * through an overlay on the scratch, with the plan's mounts, ids,
 * umask, seccomp program and RLIMIT_NOFILE (guest/config.h). The check
 * (a probe's, and each of the others' first) refuses, naming the field,
 * what a guest cannot give: a writable host directory. */
#define AL_VM_ROOT_DIR "/var/lib/airlock/vm-run"
int al_vm_container_check(const struct vm_run *w, struct al_error *err);
int al_vm_container_image(struct vm_run *w, struct al_error *err);
int al_vm_container_initrd(struct vm_run *w, struct al_error *err);
/* The VMM's CONFIG_JSON (vmm.h) for w, malloc'd. */
char *al_vm_vmm_config(const struct vm_run *w);

/* vm-exec.c: a session's execs, each a connection to the VMM's socket
 * (vmm.h) reached through the scratch's root; the answers read from the
 * run's loop and reported through exec_events. */
int al_vm_exec(struct al_sandbox *sb, const struct al_sandbox_exec *x, struct al_error *err);
int al_vm_exec_signal(struct al_sandbox *sb, uint32_t id, int sig);
/* Every exec still open ends as killed (the VMM is gone or going). */
void al_vm_execs_end(struct vm_run *w);
