#!/usr/bin/python3
"""End-to-end tests of the gvisor backend (TAP), judged from the host.

usage: run_backend_gvisor.py AIRLOCK PROBE [CASE-SUBSTRING...]

Every run is `airlock run --backend gvisor`. Each case proves one promise
from outside: the host's environment absent, host files invisible, an input
unchanged, the scratch gone, the limits ending the run with the right
reason in the result record, the refusals as one line, and nothing left
behind (no runsc process, no run directory under /run/airlock/gvisor, no
mount, no run cgroup), also after airlock itself was SIGKILLed and `airlock
gc` ran. Where `airlock backends` says gvisor is unusable here, every case
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
        return [d for d in os.listdir(RUN_DIRS) if not d.startswith("probe-")]
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
def scratch_gone(env):
    """What the command wrote to /work and /tmp is nowhere on the host after
    the run; --copy-out still gets /work's files."""
    need_gvisor(env)
    with TempDir() as d:
        out = os.path.join(d, "out")
        res = gv(env, ["/bin/sh", "-c", "echo gv-scratch-mark > /work/r.txt; "
                       "echo gv-scratch-mark > /tmp/t.txt; cat /work/r.txt"],
                 ["--copy-out", "/work/r.txt:%s" % out])
        expect_rc(res, 0)
        expect(b"gv-scratch-mark" in res.out, "the scratch was not writable", res)
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
            got = json.load(f)["reason"]
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


@case
def refusals(env):
    """-t and network rules are refused with one line naming them."""
    need_gvisor(env)
    for opts, word in ((["-t"], b"tty"), (["--allow", "api.example.test:443"], b"network")):
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
