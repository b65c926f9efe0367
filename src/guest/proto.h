/* The channel between a microvm/vm guest's agent (src/guest/agent.c) and
 * the VMM process on the host side (src/backend/microvm/vmm.c): one byte
 * stream (a virtio serial port) carrying framed messages.
 *
 * A frame is a 12-byte header, then len bytes of payload:
 *   u8 type, u8 flags (0 but for EXEC and WINDOW), u16 reserved (0), u32 id,
 *   u32 len
 * little-endian, len <= AL_GUEST_MAX_PAYLOAD. id names the exec (EXEC_*,
 * STDIN, STDOUT, STDERR, EXIT), the stream (OPEN, DATA, ...), the datagram
 * exchange (DGRAM) or the file (FILE_*); 0 where a type has none. A
 * receiver checks every header before it reads the payload: an unknown
 * type, nonzero flags or reserved bits, a len over the maximum or over the
 * type's own bound is a protocol error and ends the channel (the host side
 * ends the run). The guest is hostile: the host side trusts no field, and
 * no message makes it hold more than the bounds below.
 *
 * Flow control: each direction of each byte stream (a connection's DATA,
 * an exec's STDIN, STDOUT and STDERR) may have at most AL_GUEST_WINDOW bytes
 * sent and not yet acknowledged; the receiver sends WINDOW (payload: u32
 * bytes consumed, for that id; flags say which stdio stream for execs:
 * see below) as it writes them out. A sender past its window is a protocol
 * error. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AL_GUEST_PROTO_VERSION 1
#define AL_GUEST_HEADER	       12
#define AL_GUEST_MAX_PAYLOAD   65536u
#define AL_GUEST_WINDOW	       (256u * 1024u)
#define AL_GUEST_MAX_STREAMS   64u   /* connections open at once */
#define AL_GUEST_MAX_DGRAMS    64u   /* DNS exchanges in flight */
#define AL_GUEST_MAX_EXECS     16u   /* execs alive at once (sessions) */
#define AL_GUEST_MAX_ARGS      4096u /* argv + env entries of one EXEC */

enum al_guest_type {
	/* agent → host: the agent is up. payload: u32 version, then the
	 * guest kernel's release (text). Exactly once, first. */
	AL_G_HELLO = 1,
	/* host → agent: run a command. id: the exec (nonzero, unused).
	 * payload: u32 argc, u32 envc, then cwd, argv[], env[] as
	 * NUL-terminated strings, then the trailers its flags ask for
	 * (below), nothing after. flags: 0; AL_GUEST_EXEC_FILE_OP alone: a
	 * file operation of the daemon's file API (below) instead of a
	 * program; or AL_GUEST_EXEC_LIMITS and AL_GUEST_EXEC_TTY, either or
	 * both. */
	AL_G_EXEC = 2,
	/* agent → host: the exec started (payload: u32 guest pid) or could not
	 * (AL_G_EXEC_FAILED, payload: u32 errno, then text). */
	AL_G_EXEC_STARTED = 3,
	AL_G_EXEC_FAILED = 4,
	/* host → agent: stdin bytes for id; len 0: end of stdin. */
	AL_G_STDIN = 5,
	/* agent → host: the command's output for id. */
	AL_G_STDOUT = 6,
	AL_G_STDERR = 7,
	/* agent → host: exec id ended, everything of it gone; payload: struct
	 * al_guest_exit (packed little-endian as listed). Its stdout and
	 * stderr came before. */
	AL_G_EXIT = 8,
	/* host → agent: signal exec id (payload: u32 signal number). */
	AL_G_SIGNAL = 9,
	/* agent → host: a guest connection to carry. id: the stream (chosen
	 * by the agent, nonzero, unused). payload: u8 proto (6 TCP), u8 0,
	 * u16 port (big-endian), u32 IPv4 address (network order): where the
	 * guest connected to. */
	AL_G_OPEN = 10,
	/* host → agent: the stream is connected (len 0) or not
	 * (AL_G_OPEN_FAILED, payload: u32 errno). */
	AL_G_OPEN_OK = 11,
	AL_G_OPEN_FAILED = 12,
	/* both ways: bytes of stream id (len > 0). */
	AL_G_DATA = 13,
	/* both ways: the sender will send no more on stream id (a FIN). */
	AL_G_SHUT = 14,
	/* both ways: stream id is gone (reset or both sides shut); no more
	 * messages of it either way. */
	AL_G_CLOSE = 15,
	/* both ways: credit back for id (payload: u32 bytes); flags: 0 a
	 * stream's DATA, 1 STDIN, 2 STDOUT, 3 STDERR. */
	AL_G_WINDOW = 16,
	/* agent → host: a UDP datagram to 127.0.0.1:53 (DNS), id the
	 * exchange; host → agent: the answer with the same id. payload: the
	 * datagram (at most 4096 bytes). */
	AL_G_DGRAM = 17,
	/* host → agent: are you there (payload: u64 token); agent → host:
	 * AL_G_PONG with the same token. */
	AL_G_PING = 18,
	AL_G_PONG = 19,
	/* Files of the scratch, either way (host → agent before the first
	 * exec for --copy-in; agent → host after AL_G_FILES_GET for
	 * --copy-out). FILE_BEGIN: id the file, payload: u32 mode, u8 kind
	 * (AL_GUEST_FILE_*), then the path relative to /work (NUL-terminated,
	 * no "..", no leading '/', no empty component). FILE_DATA: bytes of
	 * the regular file id (in order). FILE_END: the file id is complete.
	 * FILES_DONE: no more files (payload: u32 errno of a failure, 0). */
	AL_G_FILE_BEGIN = 20,
	AL_G_FILE_DATA = 21,
	AL_G_FILE_END = 22,
	AL_G_FILES_DONE = 23,
	/* host → agent: send /work back (payload: u64 max bytes, u64 max
	 * files): the agent sends at most that, then FILES_DONE. */
	AL_G_FILES_GET = 24,
	/* host → agent: power the guest off once everything is sent. */
	AL_G_POWEROFF = 25,
	/* agent → host: a line for the host's log (setup failures), at most
	 * 1024 bytes of text. */
	AL_G_LOG = 26,
	/* host → agent: the terminal of tty exec id (AL_GUEST_EXEC_TTY) has
	 * a new size: payload u16 rows, u16 cols (1 to AL_GUEST_TTY_MAX
	 * each). The agent sets it on the exec's pty (the kernel sends the
	 * exec's foreground SIGWINCH); for an exec that is gone or has no
	 * terminal it is dropped (a resize may cross the exec's end), a bad
	 * size is a protocol error. */
	AL_G_WINSIZE = 27,
	AL_G_TYPE_MAX = 27,
};

enum {
	AL_GUEST_FILE_DIR = 1,
	AL_GUEST_FILE_REG = 2,
	AL_GUEST_FILE_LINK = 3
};

/* EXEC's flag for a file operation (the daemon's file API on a session,
 * docs/api.md): argv is exactly [OP, PATH], envc 0, cwd ignored. PATH is
 * a sandbox path in one of the scratch's faces in the guest (/work, /tmp,
 * /dev/shm), absolute, with no empty, "." or ".." component. The agent
 * runs it as an exec (its own cgroup, the command's uid and gid,
 * no_new_privs, the exec's stdio; STARTED, output, EXIT as for any exec),
 * but the child does the operation itself: every path resolved with
 * openat2 beneath its face's directory, no link followed, no other mount
 * crossed; regular files and directories only. It exits 0 or with the
 * errno that stopped it as its exit code. OP:
 *   get:    stdout is 'f' then a regular file's bytes (EFBIG, with its size
 *           in decimal on stderr, when it is over AL_GUEST_FILE_OP_MAX;
 *           never more than AL_GUEST_FILE_OP_MAX + 1 bytes after the 'f'),
 *           or 'd' then a directory's listing: at most
 *           AL_GUEST_FILE_OP_LIST entries, "." and ".." left out, each
 *           "T SIZE MODE NAME\0": T one of f d l o (regular file, directory,
 *           symbolic link, other), SIZE decimal, MODE octal (permission
 *           bits), NAME the entry's bytes (a name may hold any byte but '/'
 *           and NUL, a newline too: hence NUL-terminated). ENXIO: neither.
 *   put:    stdin becomes the regular file PATH (created 0644 or truncated;
 *           O_NOFOLLOW, nonblocking open: a FIFO is ENXIO, a directory
 *           EISDIR, a mount point such as an input bound in a face
 *           EXDEV); at most AL_GUEST_FILE_OP_MAX bytes (EFBIG past it).
 *   mkdir:  the directory PATH (0755).
 *   delete: the file, or the empty directory, PATH (a mount point:
 *           EXDEV).
 * The host side trusts none of it: every exit code and listing is checked
 * again (src/serve/sfiles-vm.c). */
#define AL_GUEST_EXEC_FILE_OP 1
/* EXEC's flags with a program (never with a file operation), each adding
 * a trailer at the payload's end, in this order:
 * AL_GUEST_EXEC_LIMITS: AL_GUEST_EXEC_LIMITS_LEN bytes, u64 memory.max of
 *   the exec's cgroup in bytes (nonzero; at most the session's, which the
 *   agent also holds it to);
 * AL_GUEST_EXEC_TTY: AL_GUEST_EXEC_TTY_LEN bytes, u16 rows, u16 cols (1
 *   to AL_GUEST_TTY_MAX each), u32 0: the exec gets a pty of the guest's
 *   devpts of that size as its controlling terminal and its stdin,
 *   stdout and stderr. The guest's pty does the line discipline (echo,
 *   ^C, ^D); its master's output is the exec's STDOUT (no STDERR comes),
 *   STDIN is written to the master, and the end of STDIN (len 0) changes
 *   nothing (the host types the end of a terminal's input, ^D, as a
 *   byte, as the native layer does; the master stays open for the
 *   output). */
#define AL_GUEST_EXEC_LIMITS	 2
#define AL_GUEST_EXEC_LIMITS_LEN 8
#define AL_GUEST_EXEC_TTY	 4
#define AL_GUEST_EXEC_TTY_LEN	 8
#define AL_GUEST_TTY_MAX	 1000
#define AL_GUEST_FILE_OP_MAX	 (32u << 20)
#define AL_GUEST_FILE_OP_LIST	 10000u

/* AL_G_EXIT's payload. */
struct al_guest_exit {
	int32_t status;	  /* the wait status */
	uint8_t oom;	  /* the exec's memory limit killed a process of it */
	uint8_t pids;	  /* its pids limit refused a fork (the agent then ended it) */
	uint8_t pad[2];	  /* 0 */
	uint64_t user_us; /* CPU of the exec and its children, guest time */
	uint64_t system_us;
	uint64_t memory_peak; /* bytes (its cgroup's peak, else max RSS) */
};
#define AL_GUEST_EXIT_LEN 32

struct al_guest_hdr {
	uint8_t type, flags;
	uint16_t reserved;
	uint32_t id, len;
};

/* The most payload a type may carry (0 for types with none, -1 unknown). */
long al_guest_max_len(uint8_t type);

/* Encode a header into out[AL_GUEST_HEADER]. */
void al_guest_hdr_put(uint8_t out[AL_GUEST_HEADER], uint8_t type, uint8_t flags, uint32_t id,
		      uint32_t len);
/* Decode and check one header: 0, or -EPROTO (unknown type, flags other
 * than a WINDOW's stream (0 to 3) or an EXEC's (AL_GUEST_EXEC_FILE_OP
 * alone, or AL_GUEST_EXEC_LIMITS and AL_GUEST_EXEC_TTY in any
 * combination), nonzero reserved, len over the type's bound). */
int al_guest_hdr_get(const uint8_t in[AL_GUEST_HEADER], struct al_guest_hdr *h);

/* What an EXEC's trailers say (zero where its flags ask for none). */
struct al_guest_exec_opts {
	uint64_t memory;     /* AL_GUEST_EXEC_LIMITS: nonzero */
	bool tty;	     /* AL_GUEST_EXEC_TTY */
	uint16_t rows, cols; /* with tty: 1 to AL_GUEST_TTY_MAX */
};
/* An EXEC payload of flags: its trailers taken off (*len shortened to the
 * strings' end, *o filled). -EPROTO: flags EXEC may not have (unknown
 * bits, FILE_OP with another), a trailer missing or short, a memory of 0,
 * rows or cols 0 or over AL_GUEST_TTY_MAX, or TTY's last u32 not 0. */
int al_guest_exec_trailers(const uint8_t *p, uint32_t *len, uint8_t flags,
			   struct al_guest_exec_opts *o);
/* WINSIZE's payload: 0 with *rows and *cols set, or -EPROTO (not 4 bytes,
 * a size 0 or over AL_GUEST_TTY_MAX). */
int al_guest_winsize_get(const uint8_t *p, uint32_t len, uint16_t *rows, uint16_t *cols);
static inline void al_guest_put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8);
}
static inline uint16_t al_guest_get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

/* Little-endian helpers for payloads. */
static inline void al_guest_put32(uint8_t *p, uint32_t v)
{
	p[0] = v, p[1] = v >> 8, p[2] = v >> 16, p[3] = v >> 24;
}
static inline uint32_t al_guest_get32(const uint8_t *p)
{
	return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline void al_guest_put64(uint8_t *p, uint64_t v)
{
	al_guest_put32(p, (uint32_t)v), al_guest_put32(p + 4, (uint32_t)(v >> 32));
}
static inline uint64_t al_guest_get64(const uint8_t *p)
{
	return al_guest_get32(p) | (uint64_t)al_guest_get32(p + 4) << 32;
}

/* EXEC's payload parsed in place (pointers into the payload); -EPROTO if
 * the counts do not match the strings, a string is not terminated, or
 * bytes are left over. argv and env are caller arrays of at most
 * AL_GUEST_MAX_ARGS + 1 entries (NULL-terminated on return). */
int al_guest_exec_parse(const uint8_t *p, uint32_t len, const char **cwd, const char **argv,
			uint32_t *argc, const char **env, uint32_t *envc);
void al_guest_exit_put(uint8_t out[AL_GUEST_EXIT_LEN], const struct al_guest_exit *e);
int al_guest_exit_get(const uint8_t *p, uint32_t len, struct al_guest_exit *e);
/* A FILE_BEGIN path: relative, no "." or ".." or empty component, no NUL
 * before its end: 0 or -EPROTO. */
int al_guest_path_ok(const char *path, size_t len);
