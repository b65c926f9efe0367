#!/usr/bin/env python3
"""No mutable process-wide state in libairlock but what is listed here.

A daemon holds many runs in one process, maybe in several threads: a
writable static or global (a buffer, a cache, a table of runs) would be
shared by all of them. This reads the symbol table of every object in
the library (objdump -t) and fails on each data object in a writable
section (.data, .bss, thread-local, common) that is not in ALLOWED with
the reason it is safe. Read-only data (.rodata, .data.rel.ro) is fine.

Usage: static_state.py OBJDUMP LIBAIRLOCK.a
"""
import os
import re
import subprocess
import sys

# (object file, symbol without the compiler's ".N" suffix): why it is safe.
ALLOWED = {
    ("src_cred_store.c.o", "live"):
        "cred/store.c's list of the live credential stores (unbounded), whose values a "
        "sandbox's child wipes: opened and freed only on the thread that starts runs",
    ("src_gateway_connector.c.o", "buf"):
        "the decider connector's receive buffer: only in its own process, one per gateway",
    ("src_gateway_resolve.c.o", "library_ready"):
        "c-ares's initialisation: only in the gateway's process, one per run",
    ("src_cgroup_cgroup.c.o", "counter"):
        "numbers the process's cgroups: atomic, only ever increases",
    ("src_core_sys.c.o", "abi"):
        "the kernel's landlock ABI, cached: atomic, never changes",
    ("src_core_log.c.o", "current_level"):
        "the process's log level (-q, -v): atomic, process-wide by design",
    ("src_core_log.c.o", "start"):
        "the origin of -v's phase times: atomic, set once",
    ("src_core_log.c.o", "phases_on"):
        "$AIRLOCK_PHASES, set by the CLI's main: atomic, process-wide by design",
    ("src_core_log.c.o", "sink"):
        "where the process's messages go (the OCI runtime's --log): atomic, process-wide by design",
    ("src_oci_log.c.o", "log_fd"):
        "the OCI runtime's --log (one verb, or one container's supervisor, a process): process-wide by design",
    ("src_oci_log.c.o", "log_json"):
        "the OCI runtime's --log-format, set with log_fd: process-wide by design",
    ("src_serve_api_front.c.o", "F"):
        "the daemon's HTTP front: its own confined process, one per daemon, never a run's",
    ("src_policy_operator-parse.c.o", "built"):
        "the backends this binary has: changed by tests only",
    ("src_policy_operator-parse.c.o", "text"):
        "al_backend_names_text()'s answer: thread-local, each thread's own",
    ("src_backend_gvisor_gvisor.c.o", "counter"):
        "numbers the process's gvisor run directories: atomic, only ever increases",
    ("src_backend_gvisor_probe.c.o", "once"):
        "pthread_once's flag for the runsc probe",
    ("src_backend_gvisor_probe.c.o", "host"):
        "the runsc probe's answer for the process: written once under pthread_once, then read",
    ("src_backend_gvisor_probe.c.o", "state"):
        "the runsc probe's answer for the process: written once under pthread_once, then read",
    ("src_backend_gvisor_probe.c.o", "reason"):
        "the runsc probe's answer for the process: written once under pthread_once, then read",
    ("src_backend_microvm_guest.c.o", "lock"):
        "guards the microvm/vm hosts found for the process",
    ("src_backend_microvm_guest.c.o", "hosts"):
        "what each VM kind runs with here: written once under lock, then read",
    ("src_backend_microvm_guest.c.o", "found"):
        "whether hosts[] is filled: read and written under lock",
    ("src_mcp_server.c.o", "stop_flag"):
        "airlock mcp's SIGTERM/SIGINT/SIGHUP flag, set by its handler: al_mcp_serve runs "
        "once, in the process of the mcp command, never beside a run",
}
# The sandbox init's session loop (backend/native/session.c): it runs only
# in init's own process, one per sandbox, with one thread; got_child and
# got_stop are its signal handlers' flags.
for name in ("execs", "msgbuf", "req_argv", "req_env", "merged_env", "got_child",
             "got_stop"):
    ALLOWED[("src_backend_native_session.c.o", name)] = "the sandbox init's own process"

WRITABLE = re.compile(r"^(\.data|\.bss|\.tdata|\.tbss|\*COM\*)(\.|$)")
READ_ONLY = re.compile(r"^\.data\.rel\.ro(\.|$)")
LINE = re.compile(r"^[0-9a-f]+ (.{7}) (\S+)\s+[0-9a-f]+\s+(\S+)$")


def main():
    objdump, lib = sys.argv[1], sys.argv[2]
    out = subprocess.run([objdump, "-t", lib], check=True, capture_output=True,
                         text=True).stdout
    member, found, bad = None, 0, []
    for line in out.splitlines():
        m = re.match(r"^(\S+\.o):\s+file format", line)
        if m:
            member = os.path.basename(m.group(1))
            continue
        m = LINE.match(line)
        if not m or "O" not in m.group(1):
            continue
        # What a sanitizer adds is its own, not the program's state: ASan's
        # one-definition-rule indicators (__odr_asan.NAME, one byte each that
        # it only reads) and the sanitizers' own tables (__asan_*, __ubsan_*,
        # __sancov_*).
        if m.group(3).startswith(("__odr_asan", "__asan_", "__ubsan_", "__sancov_",
                                  "___asan_")):
            continue
        # gcc names a function's static "counter.0", clang "make_id.counter".
        section = m.group(2)
        name = re.sub(r"\.\d+$", "", m.group(3)).rsplit(".", 1)[-1]
        if not WRITABLE.match(section) or READ_ONLY.match(section):
            continue
        found += 1
        if (member, name) not in ALLOWED:
            bad.append("%s: %s in %s" % (member, m.group(3), section))
    if member is None:
        print("no object files found in %s" % lib)
        return 1
    for b in bad:
        print("mutable static state: %s (make it per run, per call or read-only, "
              "or list it in tests/unit/static_state.py with why it is safe)" % b)
    print("%d writable data objects, %d not allowed" % (found, len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
