/* The VMM's side of a microvm/vm run, inside the native sandbox.
 *
 * The microvm backend (microvm.c) lowers the run's plan to a native plan
 * whose command is airlock itself, bound read-only at AL_VMM_SELF:
 *   AL_VMM_SELF __vmm CONFIG_JSON
 * al_vmm_main() (vmm.c) then starts QEMU as its child with the channel on
 * QEMU's stdin/stdout (-chardev stdio), speaks the channel protocol
 * (src/guest/proto.h) with the guest agent, and is the run's command for
 * the native layer: its stdin, stdout and stderr are the command's; the
 * guest's connections are made from the sandbox's network namespace, where
 * the gateway's listeners and capture rules are (exactly as under native).
 *
 * CONFIG_JSON:
 *   {"qemu": [ARGV...],          QEMU's whole command line
 *    "boot_timeout_ms": N,       no HELLO from the agent by then: end
 *    "silence_ms": N,            no answer to a ping for this long: end
 *    "exec": {"argv": [...], "env": ["K=V", ...], "cwd": "/work"},
 *                                or, instead of "exec":
 *    "session": true,            serve execs on AL_VMM_SOCK (below)
 *    "tty": BOOL,                (optional, not with "session") -t: our
 *                                stdin, stdout and stderr are a pty's slave
 *                                (the native layer's terminal): made raw,
 *                                the EXEC asks for a terminal of its size
 *                                (AL_GUEST_EXEC_TTY), and each resize (our
 *                                SIGWINCH) goes to the guest as WINSIZE
 *    "network": BOOL,            carry the guest's connections
 *    "copy_in": BOOL,            send the VMM's /work tree to the guest first
 *    "copy_out": {"bytes": N, "files": N} or null
 *                                bring the guest's /work back into the
 *                                VMM's /work at the end, within the caps}
 *
 * How it ends (the backend's exited() maps these):
 * - the guest command exited with code c: exit(c);
 * - it died by signal s: the VMM dies by s (SIGUSR1, SIGUSR2, and the
 *   signals that stop rather than end, SIGSTOP SIGTSTP SIGTTIN SIGTTOU,
 *   which a hostile guest may name: exit(128+s));
 * - the guest's memory limit killed it: dies by AL_VMM_SIG_MEMORY;
 * - its pids limit refused a fork (the agent ended it): AL_VMM_SIG_PIDS;
 * - the guest or its agent failed (no boot, garbage or silence on the
 *   channel, QEMU died): one line "airlock: microvm: REASON" on stderr,
 *   then dies by AL_VMM_SIG_GUEST.
 *
 * A session ("session": true) runs no command of its own: once the guest
 * is up (and the copy-in tree sent) the VMM serves execs on a Unix socket
 * at AL_VMM_SOCK, one connection per exec, until it is stopped by a
 * signal (it then dies by that signal) or the guest fails (as above). The
 * socket's path exists only once it takes connections; a request that
 * comes during the boot waits for the guest. Messages both ways are an
 * 8-byte header, u8 type, u8 flags (0 but for EXEC), u16 reserved (0), u32
 * len (little-endian, at most AL_GUEST_MAX_PAYLOAD), then len bytes.
 * client → VMM:
 *   AL_VMM_REQ_EXEC, first and once: a channel EXEC payload (proto.h: u32
 *     argc >= 1, u32 envc, cwd, argv[], env[]), with exactly three fds
 *     (SCM_RIGHTS, on the message's first bytes): the exec's stdin,
 *     stdout and stderr; flags 0, AL_GUEST_EXEC_FILE_OP (proto.h: a
 *     file operation of the daemon's file API, argv [OP, PATH]), or
 *     AL_GUEST_EXEC_LIMITS and AL_GUEST_EXEC_TTY, either or both, with
 *     their trailers (proto.h: the exec's own memory limit, nonzero; the
 *     terminal's rows and cols, 1 to 1000), checked here and passed on
 *     unchanged as the guest EXEC's (the agent checks the rest). With
 *     AL_GUEST_EXEC_TTY the request brings no fd: the VMM opens a pty of
 *     its own sandbox's devpts (/dev/pts/ptmx) of the trailer's size,
 *     makes its slave raw (cfmakeraw: the guest's pty does the line
 *     discipline), relays the slave as the exec's stdin and stdout, sends
 *     the master with STARTED, and at each wake-up of its loop (at least
 *     once a second) reads the slave's size (TIOCGWINSZ) and sends the
 *     guest WINSIZE when it changed; the master reads its end once the
 *     exec ended (the VMM keeps no slave);
 *   AL_VMM_REQ_SIGNAL, once STARTED came: u32 signal (1 to 64).
 * VMM → client:
 *   AL_VMM_ANS_STARTED: u32 the exec's pid in the guest; a tty exec's
 *     comes with the pty's master (SCM_RIGHTS, on its first byte), the
 *     only answer that brings a descriptor;
 *   AL_VMM_ANS_FAILED: u32 errno, then the connection closes: the guest
 *     could not run it (ENOENT, EACCES, ...), EAGAIN when
 *     AL_GUEST_MAX_EXECS execs are alive, EINVAL for a bad request or
 *     signal;
 *   AL_VMM_ANS_ENDED: struct al_guest_exit (proto.h, AL_GUEST_EXIT_LEN
 *     bytes), once all of its stdout and stderr is written to its fds;
 *     then the connection closes.
 * The client closing the connection before ENDED kills the exec (SIGNAL
 * 9) and drops the rest of its output. */
#pragma once

#include <signal.h>

#define AL_VMM_DIR	    "/.airlock"
#define AL_VMM_SELF	    AL_VMM_DIR "/airlock"
#define AL_VMM_SIG_MEMORY   SIGUSR2
#define AL_VMM_SIG_GUEST    SIGUSR1
#define AL_VMM_SIG_PIDS	    SIGSTKFLT
#define AL_VMM_SOCK	    "/tmp/.airlock-vmm.sock"
#define AL_VMM_SOCK_SCRATCH "tmp/.airlock-vmm.sock"
enum {
	AL_VMM_REQ_EXEC = 1,
	AL_VMM_REQ_SIGNAL = 2,
	AL_VMM_ANS_STARTED = 1,
	AL_VMM_ANS_FAILED = 2,
	AL_VMM_ANS_ENDED = 3,
};

/* The VMM's last words for the record, in its /tmp (the scratch's "tmp"
 * face): "STATUS OOM PIDS USER_US SYSTEM_US MEMORY_PEAK\n" of the guest's
 * command. */
#define AL_VMM_REPORT	      "/tmp/.airlock-vmm"
#define AL_VMM_REPORT_SCRATCH "tmp/.airlock-vmm"

/* In the VMM's child, before it execs QEMU: answer ENOSYS to the calls
 * QEMU only tries (io_uring, memfd_create), which the native layer would
 * otherwise count as denials (quiet.c). 0 or -errno. */
int al_vmm_quiet_filter(void);

/* `airlock __vmm CONFIG_JSON` (argv[0] is AL_VMM_SELF): never returns. */
int al_vmm_main(int argc, char **argv);
