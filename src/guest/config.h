/* What the guest agent (src/guest/agent.c, PID 1 of a microvm/vm guest)
 * is told before the channel opens: a small text file, /airlock/config in
 * the run's initramfs, written on the host by al_guest_config_format() and
 * read by the agent. Only the host writes it (the guest cannot change the
 * initramfs it boots from before the agent runs), so the agent trusts it;
 * it still refuses a file it cannot parse and powers the guest off.
 *
 * Format: one record per line, "KEY\tARG\tARG...\n"; no field holds a tab,
 * a newline or a NUL (al_guest_config_format refuses such values). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define AL_GUEST_CONFIG_PATH "/airlock/config"
/* The agent's place in the initramfs (the kernel runs /init). */
#define AL_GUEST_AGENT_PATH "/init"
/* Kernel modules are stored flat under this directory of the initramfs. */
#define AL_GUEST_MODULES_DIR "/airlock/modules"
/* Input trees are unpacked by the kernel under /airlock/in/N. */
#define AL_GUEST_INPUTS_DIR "/airlock/in"

/* A read-only input: a tree of the initramfs shown at target. */
struct al_guest_input {
	const char *source; /* in the initramfs: AL_GUEST_INPUTS_DIR "/N" */
	const char *target; /* in the guest's file view: "/input/data.csv" */
	bool dir;	    /* a directory (else a single regular file) */
};

/* A container's root (the OCI runtime's, config.container): what goes on
 * it after its own /dev and /proc, in this order, each target resolved
 * inside the container's root (its links followed there, never out). */
enum al_guest_mount_kind {
	AL_GM_BIND,    /* source (a tree or file of the initramfs) read-only */
	AL_GM_COPY,    /* source (a file of the initramfs) copied, writable */
	AL_GM_TMPFS,   /* a directory of its own on the scratch, 1777 */
	AL_GM_SPECIAL, /* a new mount of the kernel file system source
			* ("sysfs" and "cgroup2" read-only, "mqueue") */
	AL_GM_MASK,    /* where it exists: hidden (/dev/null, or an empty
			* read-only tmpfs for a directory) */
	AL_GM_RDONLY,  /* where it exists: made read-only */
};
struct al_guest_mount {
	enum al_guest_mount_kind kind;
	const char *target;
	const char *source; /* BIND, COPY, SPECIAL; else NULL */
};

struct al_guest_config {
	/* Loaded in this order with finit_module (dependencies first). */
	const char *const *modules; /* paths in the initramfs */
	size_t n_modules;
	/* The system image (read-only, a virtio block device): its top-level
	 * entries become the guest root's, bound read-only. */
	const char *root_device; /* "/dev/vda" */
	const char *root_fstype; /* "ext4" */
	/* The channel to the host side (a virtio serial port, not a console
	 * port: QEMU drops what a console port's host end cannot take at
	 * once): "/dev/vport0p1". */
	const char *channel;
	/* One tmpfs of this size holds /work (the workdir, HOME) and /tmp. */
	uint64_t scratch_bytes;
	const struct al_guest_input *inputs;
	size_t n_inputs;
	const char *hostname;
	uid_t uid; /* the command's user and group in the guest */
	gid_t gid;
	/* The command's memory limit inside the guest (a cgroup of the
	 * agent's; 0: the guest's RAM only). */
	uint64_t memory_bytes;
	uint64_t pids; /* the same for processes (0: none) */
	/* Egress through the host's gateway (the plan has --allow): the agent
	 * listens on 127.0.0.1 at each of these TCP ports and on UDP/TCP 53,
	 * routes 198.18.0.0/15 to its own loopback and listens on 0.0.0.0 at
	 * each capture port, and carries every connection over the channel. */
	bool network;
	const uint16_t *proxy_ports; /* 3128, 1080 */
	size_t n_proxy_ports;
	const uint16_t *capture_ports; /* 80, 443 */
	size_t n_capture_ports;

	/* A container's root instead of the system image's (the OCI
	 * runtime's, io.airlock.backend): root_device holds the container's
	 * files with their own ids, shown through an overlay whose upper
	 * half is on the scratch (so writes go to the scratch and vanish
	 * with the guest), read-only at the end when container_ro. Then its
	 * mounts. The command's ids are the container's (uid 0 among them:
	 * every capability is dropped from every exec all the same). */
	bool container, container_ro;
	const struct al_guest_mount *mounts;
	size_t n_mounts;
	const gid_t *groups; /* supplementary groups (none when 0) */
	size_t n_groups;
	unsigned umask; /* each exec's (022 when not given) */
	/* A seccomp program (struct sock_filter[], raw) in the initramfs,
	 * installed in each exec's program right before it runs; NULL: none. */
	const char *seccomp;
	uint64_t nofile, nofile_soft; /* RLIMIT_NOFILE of each exec; 0: the agent's */
};

/* The file's text (malloc'd, *len bytes, no NUL inside), or NULL with
 * errno EINVAL when a value holds a tab, a newline or a NUL. */
char *al_guest_config_format(const struct al_guest_config *c, size_t *len);
