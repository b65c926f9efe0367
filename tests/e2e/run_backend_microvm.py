#!/usr/bin/python3
"""End-to-end tests of the microvm and vm backends (TAP), judged from the host.

usage: run_backend_microvm.py AIRLOCK PROBE [CASE-SUBSTRING...]

Every run is `airlock run --backend microvm` (the vm_* cases: --backend vm).
Each case proves one promise from outside: the host's environment absent,
host files invisible, an input unchanged, the scratch gone (and --copy-in,
--copy-out through the agent), egress only through the run's gateway (the
audit shows the denials), the guest's memory limit and the timeout ending
the run with the right reason in the record, the refusals as one line, the
record and run.start naming the backend and its platform (tcg, or kvm where
a guest boots on /dev/kvm), and nothing left behind: no QEMU process, no
initramfs file under /run/airlock/vm, no run cgroup, also after airlock
itself was SIGKILLed and `airlock gc` ran. The seed scenario (scripts/demo,
python3 and pandas from the system image) runs under both. Under TCG every
guest instruction is emulated: the cases are few runs each. Where `airlock
backends` says a kind is unusable here, its cases skip with the reason; the
KVM case skips where /dev/kvm is missing. Bombs are bounded (the memory hog
stops at 1 GB).
"""

import json
import os
import time

from harness import (Skip, Suite, TempDir, expect, expect_rc, kill_pid, main, run_host,
                     sha256_file, start, wait_for, write_file)

suite = Suite()
case = suite.case
RUN_DIR = "/run/airlock/vm"
_usable = {}


def need(env, kind="microvm"):
    """Skip unless `airlock backends` says kind is usable here."""
    if kind not in _usable:
        res = run_host([env.airlock, "backends", "--json"])
        expect_rc(res, 0)
        for b in json.loads(res.text)["backends"]:
            if b["name"] in ("microvm", "vm"):
                _usable[b["name"]] = "" if b["usable"] else b.get("why", "unusable")
        expect(kind in _usable, "airlock backends does not list %s" % kind, res)
    if _usable[kind]:
        raise Skip("%s is not usable here: %s" % (kind, _usable[kind]))


def qemu_procs():
    """Pids of QEMU processes started by a run (their command line names the
    guest kernel's place in the VMM's sandbox)."""
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if cmd.startswith(b"/usr/bin/qemu-system") and b"/.airlock/vmlinuz" in cmd:
            out.append(int(p))
    return out


def initrds():
    try:
        return [d for d in os.listdir(RUN_DIR) if d.startswith("initrd-")]
    except FileNotFoundError:
        return []


def vm(al, cmd, opts=(), kind="microvm", timeout=120, **kw):
    return al.run(cmd, ["--backend", kind] + list(opts), bind_probe=False, timeout=timeout, **kw)


def record_of(al, cmd, opts, kind="microvm", **kw):
    with TempDir() as d:
        rec = os.path.join(d, "result.json")
        res = vm(al, cmd, list(opts) + ["--result", rec], kind=kind, **kw)
        with open(rec) as f:
            return res, json.load(f)


@case
def host_environment_absent(env):
    """A variable of airlock's own environment is in neither the guest
    command's environment nor any guest process's."""
    need(env)
    e = dict(os.environ, AL_VM_SECRET="vm-secret-4711")
    res = vm(env, ["/bin/sh", "-c", "env; cat /proc/[0-9]*/environ 2>/dev/null"], env=e)
    expect_rc(res, 0)
    expect(b"vm-secret-4711" not in res.out, "the host's variable reached the guest", res)
    expect(b"PATH=" in res.out, "the plan's environment is missing", res)


@case
def host_files_invisible(env):
    """A host file is not in the guest (not even by its host path); the
    guest's /proc shows only the guest's few processes; its kernel is not
    the host's; the initramfs, the channel and the system image's device
    are out of the command's reach."""
    need(env)
    with TempDir() as d:
        secret = os.path.join(d, "secret.txt")
        write_file(secret, "vm-host-file\n")
        res, record = record_of(env, ["/bin/sh", "-c",
                                      "cat %s; echo /*; echo /proc/[0-9]*; uname -r; "
                                      "echo /dev/*; echo $(ls -A /root /home /boot /mnt 2>&1); "
                                      "cat /airlock/config /init 2>&1 | head -c 300; "
                                      "id -u" % secret], [])
    expect_rc(res, 0)
    lines = res.text.splitlines()
    expect(b"vm-host-file" not in res.out, "a host file was readable", res)
    top = lines[0].split()
    expect(os.path.dirname(os.path.dirname(secret)) not in top or "/tmp" in top,
           "the host's root is visible: %s" % top, res)
    expect(len(lines[1].split()) <= 6, "more than the guest's own processes: %s" % lines[1], res)
    expect(lines[2] != os.uname().release, "the guest runs the host's kernel", res)
    devs = [os.path.basename(x) for x in lines[3].split()]
    expect(not any(x.startswith(("vd", "hvc", "vport", "mem", "kmsg", "port", "sd")) for x in devs),
           "a device beyond the minimal set is in the guest's /dev: %s" % devs, res)
    # The system image's own top-level directories, if there, hold nothing
    # of the host's (ls -A lists only their names: "/root:" and so on).
    expect(all(w.endswith(":") or "No such file" in lines[4] for w in lines[4].split()
               if not w.startswith(("ls:", "cannot", "access", "'", "No", "such", "file",
                                    "or", "directory"))),
           "a host directory has content in the guest: %r" % lines[4], res)
    expect(b"No such file" in res.out[res.out.find(b"/airlock/config"):] or
           b"/airlock/config" not in res.out, "the agent's config is readable", res)
    expect(lines[-1] == "1000", "the command does not run as uid 1000: %r" % lines[-1], res)
    expect(record["backend"] == "microvm" and record["platform"] in ("tcg", "kvm"),
           "the record does not name the backend and platform: %s %s"
           % (record.get("backend"), record.get("platform")), res)


@case
def input_unchanged(env):
    """An input (--ro) reads as it is and cannot be changed or removed; the
    host's file is unchanged."""
    need(env)
    with TempDir() as d:
        f = os.path.join(d, "data.csv")
        write_file(f, "a,b\n1,2\n")
        before = sha256_file(f)
        res = vm(env, ["/bin/sh", "-c",
                       "cat /input/data.csv; echo x >> /input/data.csv && echo WROTE; "
                       "rm -f /input/data.csv && echo REMOVED; echo y > /input/new && echo NEW"],
                 ["--ro", "%s:/input" % d])
        expect(b"1,2" in res.out, "the input was not readable", res)
        expect(b"WROTE" not in res.out and b"REMOVED" not in res.out and b"NEW" not in res.out,
               "the guest changed its input", res)
        expect(sha256_file(f) == before, "the input changed", res)
        expect(os.listdir(d) == ["data.csv"], "a file appeared in the input: %s" % os.listdir(d))


@case
def rw_input_refused(env):
    """--rw, -t and a session are refused with one line naming the field."""
    need(env)
    with TempDir() as d:
        for opts, word in ((["--rw", "%s:/out" % d], b"--rw"), (["-t"], b"-t")):
            res = vm(env, ["/bin/true"], opts)
            expect_rc(res, 125)
            lines = [l for l in res.err.splitlines() if l.strip()]
            expect(len(lines) == 1 and word in lines[0] and b"microvm" in lines[0],
                   "not one line naming %r" % word, res)


@case
def scratch_gone_copy_in_out(env):
    """What the guest wrote to /work and /tmp is nowhere on the host after
    the run; --copy-in puts a file in the guest's /work (the host's copy
    unchanged by the guest's change) and --copy-out brings /work's file
    back."""
    need(env)
    with TempDir() as d:
        out = os.path.join(d, "out")
        cin = os.path.join(d, "in.txt")
        write_file(cin, "vm-copied-in\n")
        res = vm(env, ["/bin/sh", "-c", "echo vm-scratch-mark > /work/r.txt; "
                       "echo vm-scratch-mark > /tmp/t.txt; cat /work/r.txt /work/in.txt; "
                       "echo changed >> /work/in.txt"],
                 ["--copy-out", "/work/r.txt:%s" % out, "--copy-in", "%s:/work/in.txt" % cin])
        expect_rc(res, 0)
        expect(b"vm-scratch-mark" in res.out, "the scratch was not writable", res)
        expect(b"vm-copied-in" in res.out, "--copy-in did not put the file in /work", res)
        with open(cin) as f:
            expect(f.read() == "vm-copied-in\n", "the host's copy-in source changed")
        with open(os.path.join(out, "r.txt")) as f:
            expect(f.read() == "vm-scratch-mark\n", "--copy-out did not bring /work/r.txt")
    expect(not initrds(), "initramfs files left: %s" % initrds())


@case
def memory_limit(env):
    """A memory hog (stops by itself at 1 GB) ends the run as 'memory':
    the guest's cgroup holds --memory, and the record says so."""
    need(env)
    res, record = record_of(env, ["python3", "-c",
                                  "b=[bytearray(1<<20) for i in range(1024)]"],
                            ["--memory", "96M"])
    expect(res.rc != 0, "the run was not stopped", res)
    expect(record["reason"] == "memory", "reason %r, wanted memory" % record["reason"], res)


@case
def timeout_limit(env):
    """A sleeper ends the run as 'timeout' (the timeout counts the boot),
    and QEMU is gone with it."""
    need(env)
    res, record = record_of(env, ["/bin/sleep", "60"], ["--timeout", "8s"])
    expect(record["reason"] == "timeout", "reason %r, wanted timeout" % record["reason"], res)
    expect(wait_for(lambda: not qemu_procs(), 10), "QEMU left: %s" % qemu_procs())


@case
def exit_code_and_signal(env):
    """The guest command's exit code is the run's; a command that kills
    itself by a signal ends the run as signaled by it."""
    need(env)
    res = vm(env, ["/bin/sh", "-c", "echo out; echo err >&2; exit 7"])
    expect_rc(res, 7)
    expect(res.out == b"out\n", "stdout: %r" % res.out, res)
    expect(b"err\n" in res.err, "stderr: %r" % res.err, res)
    res, record = record_of(env, ["/bin/sh", "-c", "kill -TERM $$"], [])
    expect(record["reason"] == "signaled" and record.get("signal") in (15, "SIGTERM"),
           "reason %r signal %r" % (record["reason"], record.get("signal")), res)


EGRESS_TOOL = r"""
import socket, subprocess, sys
port = int(sys.argv[1])
r = subprocess.run(["curl", "-sS", "--max-time", "20", "http://api.test:%d/" % port],
                   capture_output=True)
print("allowed:", r.stdout.decode().strip())
r = subprocess.run(["curl", "-sS", "--max-time", "20", "http://sink.test:%d/" % port],
                   capture_output=True)
print("named-denied:", r.stdout.decode().strip()[:40])
try:
    s = socket.create_connection(("192.0.2.1", port), timeout=3)
    s.sendall(b"GET / HTTP/1.0\r\n\r\n")
    print("direct:", s.recv(100))
except OSError as e:
    print("direct-refused:", e.errno)
try:
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.sendto(b"x", ("192.0.2.1", 53))
    print("udp: sent")
except OSError as e:
    print("udp-refused:", e.errno)
"""


class LoopbackServer:
    """An HTTP server on 127.0.0.1 (a free port) answering every GET with
    body, counting the requests."""

    def __init__(self, body):
        import http.server
        import threading
        outer = self
        self.hits = 0

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                outer.hits += 1
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.srv.server_address[1]
        self.t = threading.Thread(target=self.srv.serve_forever, daemon=True)

    def __enter__(self):
        self.t.start()
        return self

    def __exit__(self, *a):
        self.srv.shutdown()
        self.srv.server_close()


@case
def egress_only_through_gateway(env):
    """Only the allowed name reaches the (loopback) server, through the
    gateway (curl with the proxy variables, carried by the agent); another
    name mapped to the same server is refused, a direct connection to an
    address and a UDP datagram have no route out of the guest, and the
    gateway's audit shows the denial; run.start names the backend."""
    need(env)
    with LoopbackServer(b"vm-api-ok") as srv, TempDir() as d:
        audit = os.path.join(d, "audit.jsonl")
        res = vm(env, ["python3", "-c", EGRESS_TOOL, str(srv.port)],
                 ["--map-host", "api.test=127.0.0.1", "--map-host", "sink.test=127.0.0.1",
                  "--allow", "api.test:%d" % srv.port, "--audit", audit])
        expect_rc(res, 0)
        expect(b"allowed: vm-api-ok" in res.out, "the allowed name did not get through", res)
        expect(b"named-denied: vm-api-ok" not in res.out, "the denied name got through", res)
        expect(b"direct: " not in res.out, "a direct connection got an answer", res)
        expect(b"udp: sent" not in res.out, "a UDP datagram left", res)
        expect(srv.hits == 1, "the server got %d requests, wanted 1" % srv.hits, res)
        with open(audit) as f:
            ev = [json.loads(l) for l in f if l.strip()]
        net = [e for e in ev if e.get("event") == "net.connect"]
        denied = {e.get("name") for e in net if e.get("decision") == "deny"}
        expect("sink.test" in denied, "the audit does not show the denial: %s" % net, res)
        start_ev = [e for e in ev if e.get("event") == "run.start"]
        expect(start_ev and start_ev[0].get("backend") == "microvm" and
               start_ev[0].get("platform") in ("tcg", "kvm"),
               "run.start does not name the backend and platform: %s" % start_ev, res)


def seed(env, kind):
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with TempDir() as d:
        wrap = os.path.join(d, "airlock")
        write_file(wrap, "#!/bin/sh\nif [ \"$1\" = run ]; then shift; exec %s run --backend "
                   "%s \"$@\"; fi\nexec %s \"$@\"\n" % (env.airlock, kind, env.airlock),
                   mode=0o755)
        res = run_host([os.path.join(repo, "scripts", "demo")], timeout=400,
                       env=dict(os.environ, AIRLOCK_BIN=wrap))
        expect_rc(res, 0)
        expect(b"demo: OK" in res.out, "the demo did not say OK", res)


@case
def seed_scenario(env):
    """The README demo (scripts/demo: python3 and pandas from the system
    image) under --backend microvm: the injected exfiltration denied and
    audited, the analysis done, the token put in by the gateway."""
    need(env)
    seed(env, "microvm")


@case
def vm_seed_scenario(env):
    """The same demo under --backend vm (q35, the generic kernel)."""
    need(env, "vm")
    seed(env, "vm")


@case
def vm_basics(env):
    """Under vm: the exit code passes, the host's variable is absent, the
    record names vm and its platform."""
    need(env, "vm")
    e = dict(os.environ, AL_VM_SECRET="vm-secret-4712")
    res, record = record_of(env, ["/bin/sh", "-c", "env; exit 3"], [], kind="vm", env=e)
    expect_rc(res, 3)
    expect(b"vm-secret-4712" not in res.out, "the host's variable reached the guest", res)
    expect(record["backend"] == "vm" and record["platform"] in ("tcg", "kvm"),
           "the record: %s %s" % (record.get("backend"), record.get("platform")), res)


@case
def kvm_boot(env):
    """Where /dev/kvm works, the guest boots on it (the record says kvm)."""
    need(env)
    if not os.path.exists("/dev/kvm"):
        raise Skip("no /dev/kvm on this machine: the KVM path is not exercised here")
    res, record = record_of(env, ["/bin/true"], [])
    expect_rc(res, 0)
    expect(record["platform"] == "kvm",
           "/dev/kvm exists but the guest ran on %s" % record["platform"], res)


@case
def killed_airlock_leaves_nothing_after_gc(env):
    """airlock SIGKILLed mid-run: QEMU goes with its sandbox, and `airlock
    gc` removes the run's initramfs file and cgroup."""
    need(env)
    argv = [env.airlock, "run", "--backend", "microvm", "--timeout", "60s", "--",
            "/bin/sleep", "50"]
    p = start(argv)
    expect(wait_for(lambda: qemu_procs(), 30), "QEMU never started")
    time.sleep(0.5)
    kill_pid(p.pid)
    p.communicate()
    res = run_host([env.airlock, "gc"])
    expect_rc(res, 0)
    expect(wait_for(lambda: not qemu_procs(), 15), "QEMU left: %s" % qemu_procs())
    expect(not initrds(), "initramfs files left after gc: %s" % initrds())


@case
def nothing_left(env):
    """After every case: no QEMU process and no initramfs file."""
    need(env)
    expect(not qemu_procs(), "QEMU processes left: %s" % qemu_procs())
    expect(not initrds(), "initramfs files left: %s" % initrds())


if __name__ == "__main__":
    main(suite)
