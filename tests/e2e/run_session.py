#!/usr/bin/python3
"""Sessions on the native backend, judged from the host (TAP).

session_driver runs each script as one exec in one live sandbox. Checks:
files kept between three execs; every try on init from inside (kill(1, sig)
for every signal incl. SIGRTMIN+2, ptrace, /proc/1/fd, /proc/1/environ,
/proc/1/mem) fails or has no effect and the next exec runs; a memory bomb
(a 64 MiB limit, allocating at most 256 MiB) ends its exec with reason
memory and the next exec succeeds; nothing of the run is left afterwards
(processes, cgroups, mounts)."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import own_mount_ns  # noqa: E402

DRIVER = sys.argv[1]
MARK = "777.25"  # sleep's argument: finds a leftover process by its cmdline
n = 0
failed = 0
drivers = []  # the pids of the session drivers this script started


def ok(cond, what):
    global n, failed
    n += 1
    print(("ok" if cond else "not ok") + " %d - %s" % (n, what), flush=True)
    if not cond:
        failed += 1


def drive(*scripts, opts=()):
    with subprocess.Popen([DRIVER, *opts, *scripts], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as q:
        drivers.append(q.pid)
        try:
            out, err = q.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            q.kill()
            out, err = q.communicate()
    p = subprocess.CompletedProcess(q.args, q.returncode, out, err)
    lines = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    return p, [l for l in lines if "exec_id" in l], lines[-1] if lines else {}


def cgroup_dirs():
    """The cgroups of this script's runs: a run's cgroup is named
    PID-STARTTIME-N after the airlock (here the driver) that made it, and
    its execs' are exec-N below it. Other suites' runs on this host are not
    ours to judge."""
    found = set()
    mine = tuple("/%d-" % pid for pid in drivers)
    for root, dirs, _ in os.walk("/sys/fs/cgroup"):
        for d in dirs:
            if any(m in os.path.join(root, d) for m in mine):
                found.add(os.path.join(root, d))
        if root.count("/") > 8:
            dirs[:] = []
    return found


def leftovers():
    left = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    if MARK.encode() in f.read():
                        left.append(pid)
            except OSError:
                pass
    return left


own_mount_ns()  # mounts made elsewhere on the host meanwhile are not seen
with open("/proc/self/mountinfo") as f:
    mounts_before = len(f.readlines())
cg_before = cgroup_dirs()

# Three execs keep files in the scratch (the workdir).
p, ex, end = drive("echo one > f", "cat f; echo two >> f", "cat f; (sleep %s &) ; true" % MARK)
ok(p.returncode == 0 and len(ex) == 3, "three execs ran (%s)" % p.stderr.strip())
ok(len(ex) == 3 and ex[2]["stdout"] == "one\ntwo\n", "files kept between execs")
ok(all(e["reason"] == "exited" and e["exit_code"] == 0 for e in ex), "each exited 0")
ok(end.get("run_end") == "killed", "the session ended when killed")

# Tries on init from inside, each followed by an exec that must run.
ATTACKS = {
    "signals": "python3 -c 'import os, signal\n"
    "for s in list(range(1, 32)) + [signal.SIGRTMIN + 2, signal.SIGRTMIN, signal.SIGRTMAX]:\n"
    "    try: os.kill(1, s)\n"
    "    except OSError as e: pass\n"
    "print(\"sent\")'",
    "ptrace": "python3 -c 'import ctypes\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "r = libc.ptrace(16, 1, 0, 0)\n"
    "print(\"ptrace\", r)'",
    "fds": "ls /proc/1/fd/ 2>&1; cat /proc/1/fd/3 2>&1; echo done",
    "environ": "echo X > /proc/1/environ 2>&1; cat /proc/1/environ 2>&1; echo done",
    "mem": "python3 -c 'open(\"/proc/1/mem\", \"r+b\")' 2>&1; echo done",
}
for name, script in ATTACKS.items():
    p, ex, end = drive(script, "echo alive")
    ok(len(ex) == 2 and ex[1]["stdout"] == "alive\n" and ex[1]["reason"] == "exited",
       "after %s at init the next exec runs: %s" % (name, [e.get("stdout") for e in ex]))
    if name == "ptrace":
        ok(ex and "ptrace -1" in ex[0]["stdout"], "ptrace of init fails")
    if name in ("fds", "environ", "mem"):
        out = ex[0]["stdout"].lower() if ex else ""
        ok("denied" in out or "not permitted" in out,
           "%s of init refused: %r" % (name, ex[0]["stdout"][:200] if ex else None))
    ok(end.get("run_end") == "killed", "%s: the session ended only when killed" % name)

# A bounded memory bomb in one exec: reason memory there, the next runs.
bomb = ("python3 -c 'b = []\n"
        "for i in range(256): b.append(bytearray(1 << 20))\n"
        "print(len(b))'")
p, ex, end = drive(bomb, "echo next", opts=("--exec-memory", str(64 << 20)))
ok(len(ex) == 2 and ex[0]["reason"] == "memory", "the bomb's exec ends with reason memory: %s"
   % (ex[0] if ex else p.stderr))
ok(len(ex) == 2 and ex[1]["stdout"] == "next\n" and ex[1]["reason"] == "exited",
   "the next exec succeeds")
ok(end.get("run_end") == "killed", "the memory hit did not end the session")

# Nothing left.
with open("/proc/self/mountinfo") as f:
    ok(len(f.readlines()) == mounts_before, "no mount left")
ok(cgroup_dirs() == cg_before, "no cgroup left: %s" % (cgroup_dirs() - cg_before))
ok(leftovers() == [], "no process left")
print("1..%d" % n)
sys.exit(1 if failed else 0)
