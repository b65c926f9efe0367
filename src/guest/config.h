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

struct al_guest_config {
	/* Loaded in this order with finit_module (dependencies first). */
	const char *const *modules; /* paths in the initramfs */
	size_t n_modules;
	/* The system image (read-only, a virtio block device): its top-level
	 * entries become the guest root's, bound read-only. */
	const char *root_device; /* "/dev/vda" */
	const char *root_fstype; /* "ext4" */
	/* The channel to the host side (a virtio serial port): "/dev/vport0p1". */
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
};

/* The file's text (malloc'd, *len bytes, no NUL inside), or NULL with
 * errno EINVAL when a value holds a tab, a newline or a NUL. */
char *al_guest_config_format(const struct al_guest_config *c, size_t *len);
