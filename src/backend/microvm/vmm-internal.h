/* The VMM's state (vmm.c: QEMU and the poll loop; vmm-chan.c: the
 * channel's decoder and each message's handling; vmm-files.c: the
 * --copy-in walker and the --copy-out writer; vmm-sess.c: a session's
 * socket and its clients' execs), shared by those files and
 * the fuzz target (tests/fuzz/fuzz_guest_channel.c), which drives the
 * handling with no QEMU, no sockets and no files (`dry`).
 *
 * Memory is bounded whatever the guest sends. The buffers and their
 * bounds, all fixed:
 * - the decoder's input: one header and one payload, 64 KiB + 12;
 * - the queue to the guest: 1 MiB + 80 KiB (VMM_OUT_CAP): data is added
 *   (stdin, a connection's bytes, copy-in, a DNS answer) only while it
 *   holds less than VMM_OUT_SOFT, and the channel is read only while it
 *   holds less than VMM_OUT_HARD, each frame adding at most one small
 *   reply;
 * - each exec's stdout and stderr on their way to its fds (1 and 2, or a
 *   session client's): one window each (256 KiB), since the guest may not
 *   send more than we acknowledged, for at most AL_GUEST_MAX_EXECS (16)
 *   execs: 8 MiB;
 * - a session client's request being read: at most VMM_REQ_MAX (64 KiB +
 *   8) each, for at most AL_GUEST_MAX_EXECS clients (one per exec slot;
 *   a connection past them is answered FAILED EAGAIN, its request read
 *   and dropped through a 4 KiB buffer for at most 2 s): 1 MiB;
 * - each connection's bytes on their way to its socket: one window
 *   (256 KiB), for at most AL_GUEST_MAX_STREAMS (64) connections: 16 MiB;
 * - a DNS exchange: a socket, no buffer (the answer goes to the queue);
 * - QEMU's stderr: its last 4 KiB.
 * In all under 19 MiB for one exec, under 28 MiB for a session, whatever
 * the guest and the session's clients do. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "guest/proto.h"

#define VMM_IN_CAP    (AL_GUEST_HEADER + AL_GUEST_MAX_PAYLOAD)
#define VMM_OUT_SOFT  (256u * 1024u)
#define VMM_OUT_HARD  (1024u * 1024u)
#define VMM_OUT_CAP   (VMM_OUT_HARD + 80u * 1024u)
#define VMM_TAIL      4096u
#define VMM_RECENT    256u /* ids of streams closed lately (see vmm-chan.c) */
#define VMM_DEPTH     64u  /* --copy-in's deepest directory */
#define VMM_EXEC_ID   1u
#define VMM_LOG_LINES 100u /* the guest's LOG lines passed to stderr in a run */
/* A session client's request: the header, then a channel EXEC payload. */
#define VMM_REQ_HEADER 8u
#define VMM_REQ_MAX    (VMM_REQ_HEADER + AL_GUEST_MAX_PAYLOAD)

/* A byte queue of fixed capacity: bytes at b[off .. off+len). */
struct vmm_queue {
	uint8_t *b;
	size_t cap, off, len;
};

struct vmm_stream {
	uint32_t id;
	int fd;		     /* -1 in dry mode: bytes are taken and dropped */
	bool connecting;     /* connect() in progress: no OPEN_OK yet */
	bool guest_shut;     /* the guest sent SHUT: no more DATA from it */
	bool host_shut;	     /* the socket ended: we sent SHUT */
	bool wr_shut;	     /* shutdown(SHUT_WR) done */
	uint32_t credit;     /* DATA bytes we may still send to the guest */
	struct vmm_queue to; /* the guest's bytes for the socket */
};

struct vmm_dgram {
	uint32_t id;
	int fd; /* -1: the slot is free */
	uint64_t deadline;
};

/* One exec in the guest: the configured command (id VMM_EXEC_ID, our own
 * stdio), or a session client's (vmm-sess.c). */
struct vmm_exec {
	uint32_t id;
	int fd_in;     /* its stdin (-1: none, or ended) */
	int fd_out[2]; /* where its stdout and stderr go (-1: dropped) */
	int conn;      /* a session client's connection (-1: none, or gone) */
	bool sent;     /* EXEC sent to the guest */
	bool started, exited, stdin_open;
	bool gone;	/* the client went before the end: SIGNAL 9 sent (or due) */
	bool owns;	/* its fds are ours to close (a session client's) */
	bool requested; /* the client's EXEC request is whole */
	uint8_t flags;	/* its EXEC's flags (proto.h AL_GUEST_EXEC_*) */
	/* A terminal (AL_GUEST_EXEC_TTY): fd_in is a pty's slave (raw), and
	 * rows x cols the size the guest was last told. */
	bool tty;
	uint16_t rows, cols;
	uint32_t pending_sig; /* a SIGNAL asked for before STARTED */
	uint32_t stdin_credit;
	struct vmm_queue stdio[2];
	struct al_guest_exit exit;
	/* The client's messages as they come (VMM_REQ_MAX bytes). */
	uint8_t *req;
	size_t req_len;
	int req_fds[3];
	/* A tty exec's pty master (of our sandbox's devpts), sent to the
	 * client with STARTED; -1: none. */
	int master;
	int n_fds;
};

enum vmm_phase {
	VMM_BOOT,      /* waiting for HELLO */
	VMM_FILES_IN,  /* sending the copy-in tree */
	VMM_FILES_ACK, /* the tree sent: waiting for the agent's FILES_DONE */
	VMM_RUN,       /* EXEC sent, waiting for EXIT */
	VMM_SERVE,     /* a session: serving its clients' execs until stopped */
	VMM_FILES_OUT, /* FILES_GET sent, receiving the guest's /work */
	VMM_POWEROFF,  /* POWEROFF sent, waiting for QEMU to end */
};

struct vmm_config {
	char **qemu;
	uint64_t boot_timeout_ms, silence_ms;
	char **argv, **env;
	char *cwd;
	bool session; /* no exec: serve execs on AL_VMM_SOCK (vmm-sess.c) */
	bool tty;     /* the exec's stdio is our stdin's terminal (one-shot -t) */
	bool network, copy_in, copy_out;
	bool phases; /* print the boot's and the exec's times at the end */
	uint64_t out_bytes, out_files;
};

struct vmm {
	const struct vmm_config *cfg;
	bool dry;      /* fuzz: no connection, no file, no DNS socket */
	int chan;      /* our end of the channel (QEMU's stdin and stdout) */
	int fd_out[2]; /* where the configured exec's stdout and stderr go */
	int fd_in;     /* its stdin (-1: none) */
	int work_fd;   /* the VMM's /work (-1 in dry mode) */

	enum vmm_phase phase;
	/* When QEMU started, HELLO came, EXEC_STARTED came and EXIT came (µs,
	 * CLOCK_MONOTONIC; 0: not yet), for "phases". */
	uint64_t t_qemu, t_hello, t_started, t_exit;
	bool failed;
	char why[512]; /* the one line after "airlock: microvm: " */

	uint8_t in[VMM_IN_CAP];
	size_t in_len;
	struct vmm_queue out;
	uint64_t now_ms, last_rx_ms, next_ping_ms;
	uint64_t pings; /* the last PING's token */
	uint32_t logs;	/* LOG lines so far */

	/* The execs: the configured one, or a session's. */
	struct vmm_exec *execs[AL_GUEST_MAX_EXECS];
	uint32_t next_id; /* a session's last exec id */
	int listen_fd;	  /* a session's socket (-1: none) */
	/* Connections answered FAILED whose request is still read and
	 * dropped (closing one with bytes unread would reset it, and the
	 * client would lose the answer), each until the client's close or
	 * its deadline (-1: a free place). */
	int draining[AL_GUEST_MAX_EXECS];
	uint64_t drain_end[AL_GUEST_MAX_EXECS];
	struct al_guest_exit exit; /* the configured exec's end */

	/* Connections and DNS exchanges. */
	struct vmm_stream *streams[AL_GUEST_MAX_STREAMS];
	uint32_t recent[VMM_RECENT];
	size_t recent_next;
	struct vmm_dgram dgrams[AL_GUEST_MAX_DGRAMS];

	/* --copy-in: the walk of /work. */
	struct {
		void *dirs[VMM_DEPTH];	/* DIR *, one per level */
		size_t plen[VMM_DEPTH]; /* the path's length at each level */
		size_t depth;
		char path[4096];
		int reg; /* the regular file being sent, or -1 */
		uint32_t id;
		bool started, done;
	} walk;

	/* --copy-out: the file being received. */
	struct {
		uint32_t id; /* 0: none open */
		uint8_t kind;
		int fd, dir; /* the file, and its parent directory */
		char name[256];
		char target[4096]; /* a link's target, as it comes */
		size_t target_len;
		uint64_t bytes, files;
	} get;
};

/* vmm-chan.c */
void vmm_init(struct vmm *v, const struct vmm_config *cfg, int chan, bool dry);
void vmm_free(struct vmm *v);
/* Fail the run with a reason (the first one stays): returns -1. */
int vmm_fail(struct vmm *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int vmm_proto(struct vmm *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Queue a frame to the guest; -1 (failed) when the queue cannot hold it. */
int vmm_send(struct vmm *v, uint8_t type, uint8_t flags, uint32_t id, const void *p, uint32_t len);
/* Decode and handle the frames in v->in; stops while the queue to the
 * guest is over VMM_OUT_HARD. -1 once the run failed. */
int vmm_handle_input(struct vmm *v);
/* Append bytes from the guest (the fuzz target's and tests' entry):
 * returns how many were taken (at most the decoder's room). */
size_t vmm_feed(struct vmm *v, const uint8_t *p, size_t n);
/* Move queued bytes to their fds (the channel, fds 1 and 2, sockets)
 * without blocking, with the WINDOW credits that frees. */
int vmm_flush(struct vmm *v);
/* Relay what is readable now: stdin, sockets, DNS answers; and a tty
 * exec's new terminal size (vmm_tty_size). */
int vmm_pump(struct vmm *v);
/* A terminal's size for the guest (TIOCGWINSZ of fd): 0 with *rows and
 * *cols set (each clamped to AL_GUEST_TTY_MAX), or -1 when fd has none
 * (not a terminal, or a size of 0). */
int vmm_tty_size(int fd, uint16_t *rows, uint16_t *cols);
/* Make terminal fd raw (cfmakeraw: the bytes pass as they are; the
 * guest's pty does the line discipline): 0 or -errno. */
int vmm_tty_raw(int fd);
void vmm_stream_free(struct vmm *v, size_t i, bool send_close);
/* Queue the EXEC of the configured command. */
int vmm_send_exec(struct vmm *v);
/* The guest is up and has the copy-in tree: the exec, or serve. */
int vmm_ready(struct vmm *v);
/* CLOCK_MONOTONIC in µs. */
uint64_t vmm_now_us(void);

/* The exec of id, and its slot. */
struct vmm_exec *vmm_exec_find(struct vmm *v, uint32_t id, size_t *slot);
/* A new exec in a free slot (NULL: none free), its fds not owned. */
struct vmm_exec *vmm_exec_add(struct vmm *v, uint32_t id, int fd_in, int out, int err);
void vmm_exec_free(struct vmm *v, size_t slot);

/* vmm-sess.c */
/* Bind and listen at AL_VMM_SOCK (at a temporary name renamed into
 * place, so that the path exists only once it takes connections): the
 * fd, or -errno. */
int vmm_sess_listen(void);
/* Accept clients, read their requests and signals, send the EXECs whose
 * request is whole once the guest is up, and answer ENDED once an exec's
 * output is out. */
void vmm_sess_pump(struct vmm *v);
/* The guest's answers for a client's exec. */
void vmm_sess_started(struct vmm *v, struct vmm_exec *x, uint32_t pid);
void vmm_sess_failed(struct vmm *v, size_t slot, uint32_t err);

/* vmm-files.c */
/* Send more of the copy-in tree while the queue has room: 1 once
 * FILES_DONE is queued, 0 for more later, -1 failed. */
int vmm_walk_step(struct vmm *v);
void vmm_walk_free(struct vmm *v);
/* Empty the VMM's /work before the guest's tree comes back. */
int vmm_work_clear(struct vmm *v);
int vmm_file_begin(struct vmm *v, uint32_t id, const uint8_t *p, uint32_t len);
int vmm_file_data(struct vmm *v, uint32_t id, const uint8_t *p, uint32_t len);
int vmm_file_end(struct vmm *v, uint32_t id);
void vmm_file_abort(struct vmm *v);

/* Queue helpers. */
void vmm_queue_init(struct vmm_queue *q, size_t cap);
void vmm_queue_free(struct vmm_queue *q);
/* Room for n more bytes at the end (compacting): the place, or NULL. */
uint8_t *vmm_queue_room(struct vmm_queue *q, size_t n);
