/* The guest agent's parts (agent.c: setup and the loop's start;
 * agent-chan.c: the channel and the execs; agent-files.c: FILE_* both
 * ways; agent-fop.c: the file API's operations; agent-net.c: the guest's
 * listeners and streams). Internal to the
 * static airlock-guest-agent binary. */
#pragma once

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "guest/config-parse.h"
#include "guest/proto.h"

/* The channel's output queue: data sources (stdout, streams, files) are
 * read only while it holds less than AGENT_Q_SOURCES, and the channel's
 * input only while it has room for any answer (AGENT_Q_MAX - AGENT_Q_SOURCES).
 * A host that stops reading stops the agent reading: never more memory. */
#define AGENT_Q_MAX	(1024u * 1024u)
#define AGENT_Q_SOURCES (512u * 1024u)
#define AGENT_MAX_FDS	(3 * AL_GUEST_MAX_EXECS + 2 * AL_GUEST_MAX_STREAMS + 32)

struct agent_exec {
	uint32_t id; /* 0: the slot is free */
	pid_t pid;
	int in, out, err; /* our ends of its pipes; -1 once closed */
	int cg;		  /* its cgroup's directory */
	uint8_t *inbuf;	  /* stdin from the host not yet written (≤ window) */
	size_t inlen;
	bool in_eof;			   /* the host ended stdin */
	uint32_t out_unacked, err_unacked; /* sent, no WINDOW back yet */
	bool reaped;
	bool pids_hit; /* its pids limit refused a fork: the agent ended it */
	bool tty;      /* in and out are its pty's master (a dup, and itself); no err */
	int status;
	long maxrss_kb;
};

/* Where the setup works, inside the initramfs (hidden by the switch). */
#define SYSIMG	"/airlock/sysimg"
#define NEWROOT "/airlock/root"
#define SCRATCH "/airlock/scratch"

struct agent {
	struct al_guest_config_parsed cfg;
	/* config.seccomp's program, read before the switch; NULL: none */
	void *seccomp;
	unsigned short seccomp_len; /* its instructions */
	int chan;		    /* the virtio serial port, nonblocking */
	int cgroot;		    /* /sys/fs/cgroup */
	int work;		    /* the scratch's /work */
	bool cg_mem;		    /* the memory controller is on for the execs' cgroups */
	uint8_t *q;		    /* frames waiting to go out */
	size_t qlen, qoff;
	uint8_t *in; /* one frame coming in */
	size_t inlen;
	bool poweroff; /* the host asked; power off once q is out */
	struct agent_exec execs[AL_GUEST_MAX_EXECS];
	struct agent_files *files;
	struct agent_net *net;
};

/* Queue one frame (never fails: the queue's bounds are kept by who reads
 * what, above; a frame past AGENT_Q_MAX is a bug and powers off). */
void agent_send(struct agent *a, uint8_t type, uint8_t flags, uint32_t id, const void *p,
		uint32_t len);
/* Room for a data source's frame (header + AL_GUEST_MAX_PAYLOAD). */
bool agent_q_room(const struct agent *a);
/* A LOG line to the host (when the channel is open), then power off. */
__attribute__((noreturn, format(printf, 2, 3))) void agent_die(struct agent *a, const char *fmt,
							       ...);
__attribute__((format(printf, 2, 3))) void agent_log(struct agent *a, const char *fmt, ...);

/* Write out what is queued (a second at most), sync, power off. */
__attribute__((noreturn)) void agent_poweroff(struct agent *a);

/* agent.c's setup helpers: mount (its mount point made), a bind made
 * read-only, wait for a device node, read a whole file (at most max), a
 * command's /dev (a tmpfs of the harmless nodes, its own devpts, shm bound
 * at /dev/shm, or only its mount point where shm is NULL) under root. Each failure powers the guest off. */
void agent_mount(struct agent *a, const char *src, const char *dst, const char *type,
		 unsigned long flags, const char *data);
void agent_bind_ro(struct agent *a, const char *src, const char *dst);
int agent_wait_device(const char *path);
char *agent_read_file(const char *path, size_t max, size_t *len);
void agent_make_dev(struct agent *a, const char *root, const char *shm);

/* agent-root.c: a container's root (config.container) built and switched
 * into, in place of the system image's. */
void agent_container_root(struct agent *a);
/* The container's seccomp program read (before the switch). */
void agent_read_seccomp(struct agent *a);

/* The loop over the channel, the execs, the files and the network. */
__attribute__((noreturn)) void agent_serve(struct agent *a);

/* agent-files.c: FILE_BEGIN/DATA/END/FILES_DONE from the host into /work,
 * FILES_GET's walk of /work back. */
void agent_files_msg(struct agent *a, const struct al_guest_hdr *h, const uint8_t *p);
/* Send more of a FILES_GET walk while the queue has room. */
void agent_files_pump(struct agent *a);

/* agent-fop.c: the file operation op on path (proto.h
 * AL_GUEST_EXEC_FILE_OP), in an exec's child already in its cgroup, ids
 * and stdio: exits 0 or with the errno that stopped it. */
__attribute__((noreturn)) void agent_fop(const char *op, const char *path);

/* agent-net.c: lo up, the route for the fake addresses, the listeners
 * (before the switch of root); 0 or -errno with a LOG sent. */
int agent_net_setup(struct agent *a);
/* Add the network's fds to pfd (from *n) / handle their events. */
void agent_net_poll(struct agent *a, struct pollfd *pfd, size_t *n);
void agent_net_events(struct agent *a, struct pollfd *pfd, size_t n);
/* OPEN_OK, OPEN_FAILED, DATA, SHUT, CLOSE, WINDOW (flags 0), DGRAM. */
void agent_net_msg(struct agent *a, const struct al_guest_hdr *h, const uint8_t *p);
