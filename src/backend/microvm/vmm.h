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
 *   then dies by AL_VMM_SIG_GUEST. */
#pragma once

#include <signal.h>

#define AL_VMM_DIR	  "/.airlock"
#define AL_VMM_SELF	  AL_VMM_DIR "/airlock"
#define AL_VMM_SIG_MEMORY SIGUSR2
#define AL_VMM_SIG_GUEST  SIGUSR1
#define AL_VMM_SIG_PIDS	  SIGSTKFLT
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
