#!/usr/bin/python3
"""End-to-end tests of the gvisor backend (TAP), judged from the host.

usage: run_backend_gvisor.py AIRLOCK PROBE [CASE-SUBSTRING...]

Every run is `airlock run --backend gvisor`. Each case proves one promise
from outside: the host's environment absent, host files invisible, an input
unchanged, the scratch gone, the limits ending the run with the right
reason in the result record, the refusals as one line, and nothing left
behind (no runsc process, no run directory under /run/airlock/gvisor, no
mount, no run cgroup), also after airlock itself was SIGKILLed and `airlock
gc` ran. runsc runs in a user namespace of the run's own host ids: from
/proc, no process of a run (runsc, its gofer, its sentry and the sentry's
stubs) is host root or holds a capability in the host's user namespace, two
concurrent runs' sentries have different host uids, and an input only its
owner may read (0600 under a 0700 directory) still reads inside. Where `airlock backends` says gvisor is unusable here, every case
skips with its reason. Bombs are bounded (the memory hog stops at 1 GB, the
fork bomb at 200 children that sleep 5 s).
"""

import json
import os
import signal
import subprocess
import time

from harness import (Skip, Suite, TempDir, expect, expect_rc, kill_pid, main, run_host,
                     sha256_file, start, wait_for, write_file)

suite = Suite()
case = suite.case
GV = ["--backend", "gvisor"]
RUN_DIRS = "/run/airlock/gvisor"
_usable = None


def need_gvisor(env):
    """Skip unless `airlock backends` says gvisor is usable here."""
    global _usable
    if _usable is None:
        res = run_host([env.airlock, "backends", "--json"])
        expect_rc(res, 0)
        for b in json.loads(res.text)["backends"]:
            if b["name"] == "gvisor":
                _usable = "" if b["usable"] else b.get("why", "unusable")
        expect(_usable is not None, "airlock backends does not list gvisor", res)
    if _usable:
        raise Skip("gvisor is not usable here: %s" % _usable)


def runsc_procs():
    """Pids of runsc processes (runsc, runsc-gofer, runsc-sandbox) whose
    command line names a run directory of this airlock's."""
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if cmd.startswith(b"runsc") and RUN_DIRS.encode() in cmd:
            out.append(int(p))
    return out


def run_dirs():
    try:
        # Not the probe's remembered answer (.probe) nor a probe's own directory.
        return [d for d in os.listdir(RUN_DIRS) if not d.startswith(("probe-", "."))]
    except FileNotFoundError:
        return []


def gv(al, cmd, opts=(), **kw):
    return al.run(cmd, list(GV) + list(opts), bind_probe=False, **kw)


@case
def host_environment_absent(env):
    """A variable of airlock's own environment is not in the sandbox's."""
    need_gvisor(env)
    e = dict(os.environ, AL_GV_SECRET="gv-secret-4711")
    res = gv(env, ["/bin/sh", "-c", "env; cat /proc/1/environ"], env=e)
    expect_rc(res, 0)
    expect(b"gv-secret-4711" not in res.out, "the host's variable reached the sandbox", res)
    expect(b"PATH=" in res.out, "the plan's environment is missing", res)


@case
def host_files_invisible(env):
    """A host file outside the plan is not there; the root holds the plan's
    entries only; the host's processes are not visible."""
    need_gvisor(env)
    with TempDir() as d:
        secret = os.path.join(d, "secret.txt")
        write_file(secret, "gv-host-file\n")
        res = gv(env, ["/bin/sh", "-c", "cat %s; echo /*; echo /proc/[0-9]*" % secret])
        expect(b"gv-host-file" not in res.out, "a host file was readable", res)
        top = res.text.splitlines()[0].split()
        expect("/root" not in top and "/home" not in top, "the host's root is visible", res)
        pids = res.text.splitlines()[1].split()
        expect(len(pids) <= 3, "more processes than the sandbox's own: %s" % pids, res)


@case
def input_unchanged(env):
    """An input (--ro) reads as it is and cannot be changed or removed."""
    need_gvisor(env)
    with TempDir() as d:
        f = os.path.join(d, "data.csv")
        write_file(f, "a,b\n1,2\n")
        before = sha256_file(f)
        res = gv(env, ["/bin/sh", "-c",
                       "cat /input/data.csv; echo x >> /input/data.csv; rm -f /input/data.csv; "
                       "echo y > /input/new"], ["--ro", "%s:/input" % d])
        expect(b"1,2" in res.out, "the input was not readable", res)
        expect(sha256_file(f) == before, "the input changed", res)
        expect(os.listdir(d) == ["data.csv"], "a file appeared in the input: %s" % os.listdir(d))


@case
def private_input_readable(env):
    """An input only its owner (another user) may read, in a directory only
    that owner may enter, reads inside: the supervisor opens it and runsc,
    which is not host root, is handed the tree."""
    need_gvisor(env)
    with TempDir(mode=0o700) as d:
        f = os.path.join(d, "private.csv")
        write_file(f, "gv-private-4242\n")
        os.chmod(f, 0o600)
        os.chown(f, 4321, 4321)
        os.chown(d, 4321, 4321)
        res = gv(env, ["/bin/cat", "/input/private.csv"], ["--ro", "%s:/input" % d])
        expect_rc(res, 0)
        expect(b"gv-private-4242" in res.out, "the owner-only input did not read", res)


def run_procs(runsc_pid):
    """The processes in runsc_pid's cgroups (the run's: runsc, the gofer,
    the sentry and its stubs): pid -> (uids, gids, CapEff, user ns)."""
    with open("/proc/%d/cgroup" % runsc_pid) as f:
        key = f.read()
    expect("airlock" in key, "runsc is not in a cgroup of airlock's: %s" % key)
    out = {}
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/cgroup" % p) as f:
                if f.read() != key:
                    continue
            with open("/proc/%s/status" % p) as f:
                st = dict(l.split(":", 1) for l in f.read().splitlines() if ":" in l)
            ns = os.readlink("/proc/%s/ns/user" % p)
            with open("/proc/%s/cmdline" % p, "rb") as f:
                cmd = f.read().split(b"\0")[0]
        except OSError:
            continue  # gone meanwhile
        out[int(p)] = ([int(x) for x in st["Uid"].split()], [int(x) for x in st["Gid"].split()],
                       int(st["CapEff"], 16), ns, cmd)
    return out


@case
def no_host_root_no_host_capability(env):
    """Two concurrent runs: every process of each (found by its cgroup) has
    no host uid or gid 0 and no capability in the host's user namespace;
    the sentries (runsc-sandbox) of the two runs have different host uids,
    neither of them the host's nobody."""
    need_gvisor(env)
    host_ns = os.readlink("/proc/self/ns/user")
    # Long enough that both still run when the second has started on a
    # loaded machine; the test waits for both at the end.
    runs = [start([env.airlock, "run"] + GV + ["--timeout", "30s", "--", "/bin/sleep", "12"])
            for _ in range(2)]
    try:
        def sentries():
            out = []
            for p in runsc_procs():
                try:
                    with open("/proc/%d/cmdline" % p, "rb") as f:
                        if f.read().startswith(b"runsc-sandbox"):
                            out.append(p)
                except OSError:
                    pass
            return out
        both = wait_for(lambda: (lambda s: s if len(s) == 2 else None)(sentries()), 20)
        expect(both, "two sentries never ran: %s" % runsc_procs())
        sentry_uids = []
        for sp in both:
            procs = run_procs(sp)
            expect(len(procs) >= 3, "fewer than runsc, gofer and sentry: %s" % procs)
            for pid, (uids, gids, cap, ns, cmd) in procs.items():
                expect(0 not in uids and 0 not in gids,
                       "%d (%s) has host id 0: uids %s gids %s" % (pid, cmd, uids, gids))
                expect(cap == 0 or ns != host_ns,
                       "%d (%s) holds host capabilities %x" % (pid, cmd, cap))
            sentry_uids.append(procs[sp][0][0])
        expect(sentry_uids[0] != sentry_uids[1],
               "two runs' sentries share host uid %d" % sentry_uids[0])
        expect(65534 not in sentry_uids, "a sentry is the host's nobody")
    finally:
        for p in runs:
            try:
                p.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                kill_pid(p.pid)
                p.communicate()
                run_host([env.airlock, "gc"])
    for p in runs:
        expect(p.returncode == 0, "a run failed: %s" % p.returncode)


@case
def scratch_gone(env):
    """What the command wrote to /work and /tmp is nowhere on the host after
    the run; --copy-in puts a file there (the host's copy unchanged by the
    sandbox's changes) and --copy-out brings /work's files back."""
    need_gvisor(env)
    with TempDir() as d:
        out = os.path.join(d, "out")
        cin = os.path.join(d, "in.txt")
        write_file(cin, "gv-copied-in\n")
        res = gv(env, ["/bin/sh", "-c", "echo gv-scratch-mark > /work/r.txt; "
                       "echo gv-scratch-mark > /tmp/t.txt; cat /work/r.txt /work/in.txt; "
                       "echo changed >> /work/in.txt"],
                 ["--copy-out", "/work/r.txt:%s" % out, "--copy-in", "%s:/work/in.txt" % cin])
        expect_rc(res, 0)
        expect(b"gv-scratch-mark" in res.out, "the scratch was not writable", res)
        expect(b"gv-copied-in" in res.out, "--copy-in did not put the file in /work", res)
        with open(cin) as f:
            expect(f.read() == "gv-copied-in\n", "the host's copy-in source changed")
        with open(os.path.join(out, "r.txt")) as f:
            expect(f.read() == "gv-scratch-mark\n", "--copy-out did not bring /work/r.txt")
    expect(not run_dirs(), "run directories left: %s" % run_dirs())
    with open("/proc/self/mountinfo") as f:
        expect("airlock-scratch" not in f.read(), "a scratch mount is visible on the host")


def limit_case(env, cmd, opts, reason):
    with TempDir() as d:
        rec = os.path.join(d, "result.json")
        res = gv(env, cmd, list(opts) + ["--result", rec], timeout=60)
        expect(res.rc != 0, "the run was not stopped", res)
        with open(rec) as f:
            record = json.load(f)
        got = record["reason"]
        expect(record["backend"] == "gvisor" and record["platform"] in ("ptrace", "kvm"),
               "the record does not name the backend and platform: %s %s"
               % (record.get("backend"), record.get("platform")), res)
        expect(got == reason, "reason %r, wanted %r" % (got, reason), res)
        expect(b"goroutine" not in res.err and b"panic" not in res.err,
               "runsc printed a crash report", res)


@case
def memory_limit(env):
    """A memory hog (stops by itself at 1 GB) ends the run as 'memory'."""
    need_gvisor(env)
    limit_case(env, ["python3", "-c", "b=[bytearray(1<<20) for i in range(1024)]"],
               ["--memory", "96M"], "memory")


@case
def pids_limit(env):
    """A bounded fork bomb (200 sleepers of 5 s) ends the run as 'pids':
    --pids counts the sentry's and gofer's threads too."""
    need_gvisor(env)
    limit_case(env, ["/bin/sh", "-c", "for i in $(seq 200); do sleep 5 & done; wait"],
               ["--pids", "80"], "pids")


@case
def timeout_limit(env):
    """A sleeper ends the run as 'timeout' at --timeout."""
    need_gvisor(env)
    limit_case(env, ["/bin/sleep", "30"], ["--timeout", "1500ms"], "timeout")


class LoopbackServer:
    """An HTTP server on 127.0.0.1 (a free port) answering every GET with
    body, counting the requests; stopped on exit."""

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


EGRESS_TOOL = r"""
import socket, subprocess, sys
port = int(sys.argv[1])
r = subprocess.run(["curl", "-sS", "--max-time", "5", "http://api.test:%d/" % port],
                   capture_output=True)
print("allowed:", r.stdout.decode().strip())
r = subprocess.run(["curl", "-sS", "--max-time", "5", "http://sink.test:%d/" % port],
                   capture_output=True)
print("named-denied:", r.returncode)
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


@case
def egress_only_through_gateway(env):
    """Only the allowed name reaches the (loopback) server, through the
    gateway; another name mapped to the same server, a direct connection to
    an address (192.0.2.1, TEST-NET, captured, never routed) and UDP get
    nowhere, and the gateway's audit shows the denials."""
    need_gvisor(env)
    with LoopbackServer(b"gv-api-ok") as srv, TempDir() as d:
        audit = os.path.join(d, "audit.jsonl")
        res = gv(env, ["python3", "-c", EGRESS_TOOL, str(srv.port)],
                 ["--map-host", "api.test=127.0.0.1", "--map-host", "sink.test=127.0.0.1",
                  "--allow", "api.test:%d" % srv.port, "--audit", audit], timeout=60)
        expect_rc(res, 0)
        expect(b"allowed: gv-api-ok" in res.out, "the allowed name did not get through", res)
        expect(b"direct: " not in res.out, "a direct connection got an answer", res)
        expect(b"udp: sent" not in res.out, "a UDP datagram left", res)
        expect(srv.hits == 1, "the server got %d requests, wanted 1" % srv.hits, res)
        with open(audit) as f:
            ev = [json.loads(l) for l in f if l.strip()]
        net = [e for e in ev if e.get("event") == "net.connect"]
        denied = {e.get("name") for e in net if e.get("decision") == "deny"}
        expect("sink.test" in denied and "192.0.2.1" in denied,
               "the audit does not show both denials: %s" % net, res)
        start_ev = [e for e in ev if e.get("event") == "run.start"]
        expect(start_ev and start_ev[0].get("backend") == "gvisor" and
               start_ev[0].get("platform") in ("ptrace", "kvm"),
               "run.start does not name the backend and platform: %s" % start_ev, res)


@case
def seed_scenario(env):
    """The README demo's agent (scripts/demo) under --backend gvisor: the
    injected exfiltration denied and audited, the analysis done, the token
    put in by the gateway (scripts/demo's own verdict, exit 0)."""
    need_gvisor(env)
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with TempDir() as d:
        wrap = os.path.join(d, "airlock")
        write_file(wrap, "#!/bin/sh\nif [ \"$1\" = run ]; then shift; exec %s run --backend "
                   "gvisor \"$@\"; fi\nexec %s \"$@\"\n" % (env.airlock, env.airlock),
                   mode=0o755)
        res = run_host([os.path.join(repo, "scripts", "demo")], timeout=240,
                       env=dict(os.environ, AIRLOCK_BIN=wrap))
        expect_rc(res, 0)
        expect(b"demo: OK" in res.out, "the demo did not say OK", res)


@case
def refusals(env):
    """-t is refused with one line naming it."""
    need_gvisor(env)
    for opts, word in ((["-t"], b"tty"),):
        res = gv(env, ["/bin/true"], opts)
        expect_rc(res, 125)
        lines = [l for l in res.err.splitlines() if l.strip()]
        expect(len(lines) == 1 and word in lines[0] and b"gvisor" in lines[0],
               "not one line naming %r" % word, res)


@case
def killed_airlock_leaves_nothing_after_gc(env):
    """airlock SIGKILLed mid-run: runsc's processes go with it, and
    `airlock gc` removes its run directory and cgroup."""
    need_gvisor(env)
    argv = [env.airlock, "run"] + GV + ["--timeout", "30s", "--", "/bin/sleep", "20"]
    p = start(argv)
    expect(wait_for(lambda: runsc_procs(), 15), "runsc never started")
    time.sleep(0.5)
    kill_pid(p.pid)
    p.communicate()
    res = run_host([env.airlock, "gc"])
    expect_rc(res, 0)
    expect(wait_for(lambda: not runsc_procs(), 10), "runsc processes left: %s" % runsc_procs())
    expect(not run_dirs(), "run directories left after gc: %s" % run_dirs())


@case
def no_runsc_left(env):
    """After every case: no runsc process and no run directory."""
    need_gvisor(env)
    expect(not runsc_procs(), "runsc processes left: %s" % runsc_procs())
    expect(not run_dirs(), "run directories left: %s" % run_dirs())


if __name__ == "__main__":
    main(suite)
