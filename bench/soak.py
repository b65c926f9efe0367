#!/usr/bin/python3
"""Soak test: many airlock runs in a row, watching the host for leaks.

Runs N sandboxes back to back, cycling through `airlock run -- /bin/true`
(exit 0) and a run that writes to /tmp and exits 3, with a run that hits
--timeout 0.2 every 50th. At the start, every --every runs, and at the end it
samples:

  soak fds        open fds of this process (the parent of every airlock)
  airlock fds     open fds of a supervisor mid-run (`airlock run -- sleep 1`)
  mounts          lines of /proc/self/mountinfo
  cgroups <h>     stale run cgroup dirs (their airlock is gone) under each
                  hierarchy's airlock/ base
  our cgroups <h> run cgroup dirs made by an airlock the soak started
  processes       processes on the host (zombies included, kernel threads not)
  soak processes  the soak's descendants and processes carrying its marker
                  (every airlock it starts, and their inits, carry it)
  MemAvailable    from /proc/meminfo

It prints a table and exits non-zero if any run exited with the wrong code or
anything grew: fds, mounts, cgroup dirs and processes must be exactly equal
at the end (growth fails; a drop, which airlock cannot cause, is noted
with the processes that came and went), MemAvailable may drop by at most --mem-slack-mb (64). The counts
are host-wide, so other work on the host while the soak runs can show up;
on a shared host, --attributable judges only the soak's own processes and
run cgroups (the host-wide counts are still printed).
Not part of the test suites (it takes minutes). Usage:
  bench/soak.py [--runs 1000] [--every 100] [--airlock PATH] [--json FILE]
                [--attributable]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))

from harness import (all_pids, cgroup_is_stale, cgroup_supervisor, pid_starttime,  # noqa: E402
                     proc_read, run_cgroup_bases, run_cgroup_dirs)

KINDS = {
    "true": (["/bin/true"], [], 0),
    "write-exit-3": (["/bin/sh", "-c", "echo soak > /tmp/f && cat /tmp/f >/dev/null && exit 3"],
                     [], 3),
    "timeout": (["/bin/sleep", "5"], ["--timeout", "0.2"], 124),
}


MARK = "soak-%d-%s" % (os.getpid(), os.urandom(4).hex())
STARTED = set()  # (pid, starttime) of every airlock we started


def airlock_argv(airlock, opts, cmd):
    # The marker lands in airlock's argv, hence in its sandbox init's (a clone).
    return [airlock, "run", "--env", "SOAK_MARK=" + MARK] + opts + ["--"] + cmd


def start(argv, **kw):
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, **kw)
    STARTED.add((p.pid, pid_starttime(p.pid)))
    return p


def kind_for(i):
    if (i + 1) % 50 == 0:
        return "timeout"
    return "true" if i % 2 == 0 else "write-exit-3"


def meminfo(key):
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return None


def comm(pid):
    return (proc_read(pid, "comm") or b"").strip().decode("utf-8", "replace")


PF_KTHREAD = 0x00200000


def user_pids():
    """Host pids, kernel threads left out (kworkers come and go by
    themselves; airlock cannot leak one)."""
    pids = []
    for p in all_pids():
        stat = proc_read(p, "stat")
        if not stat:
            continue
        fields = stat.rsplit(b")", 1)[-1].split()
        if len(fields) > 6 and int(fields[6]) & PF_KTHREAD:
            continue
        pids.append(p)
    return pids


def settle(timeout=5.0):
    """Wait until the host's process list is quiet: no airlock process of
    ours (child or reparented zombie init) and the same pids twice 100 ms
    apart. Returns the pid list."""
    deadline = time.monotonic() + timeout
    prev = None
    while True:
        pids = sorted(user_pids())
        busy = any(comm(p) == "airlock" for p in pids)
        if (pids == prev and not busy) or time.monotonic() > deadline:
            return pids
        prev = pids
        time.sleep(0.1)


def airlock_fds(airlock):
    """Open fds of an airlock supervisor in the middle of a run."""
    p = start(airlock_argv(airlock, [], ["/bin/sleep", "1"]), stdout=subprocess.DEVNULL,
              stderr=subprocess.DEVNULL)
    try:
        # The supervisor is in its loop once the sandbox's init exists and
        # the command runs (init has a child).
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            kids = [q for q in all_pids() if ppid(q) == p.pid]
            if kids and any(ppid(q) in kids for q in all_pids()):
                break
            time.sleep(0.01)
        time.sleep(0.1)
        fds = sorted(os.listdir("/proc/%d/fd" % p.pid), key=int)
        targets = []
        for fd in fds:
            try:
                # pipe:[123] -> pipe: the kind of fd, not the inode, is compared
                targets.append(re.sub(r":\[\d+\]$", "", os.readlink("/proc/%d/fd/%s"
                                                                      % (p.pid, fd))))
            except OSError:
                targets.append("?")
        return len(fds), targets
    finally:
        rc = p.wait(timeout=30)
        if rc != 0:
            sys.exit("soak: the fd sampler `airlock run -- sleep 1` exited %d" % rc)


def ppid(pid):
    stat = proc_read(pid, "stat")
    if not stat:
        return None
    return int(stat.rsplit(b")", 1)[-1].split()[1])


def sample(airlock, bases, label):
    # Host counts first, before the fd sampler's own run (whose start-up gc
    # would clear stale cgroup dirs the loop may have left).
    pids = settle()
    dirs = run_cgroup_dirs(bases)
    s = {"label": label,
         "soak fds": len(os.listdir("/proc/self/fd")) - 1,  # minus listdir's own fd
         "airlock fds": None,
         "mounts": sum(1 for _ in open("/proc/self/mountinfo")),
         "processes": len(pids),
         "soak processes": len(soak_processes(pids)),
         "zombies": sum(1 for p in pids
                        if (proc_read(p, "stat") or b"").rsplit(b")", 1)[-1].split()[:1]
                        == [b"Z"]),
         "MemAvailable MB": round(meminfo("MemAvailable") / 2**20, 1),
         "Slab MB": round(meminfo("Slab") / 2**20, 1),
         "_procs": {p: comm(p) for p in pids}}
    for h, base in sorted(bases.items()):
        here = [d for d in dirs if os.path.dirname(d) == base]
        # A leaked run cgroup is stale (its airlock is gone); live ones
        # belong to airlocks running right now (someone else's).
        s["cgroups " + h] = sum(1 for d in here if cgroup_is_stale(d))
        s["our cgroups " + h] = sum(1 for d in here if cgroup_supervisor(d) in STARTED)
    s["_stale_cgroups"] = sorted(d for d in dirs if cgroup_is_stale(d))
    s["airlock fds"], s["_airlock_fd_targets"] = airlock_fds(airlock)
    return s


def soak_processes(pids):
    """Processes the soak is answerable for: its descendants and anything
    carrying its marker (airlocks and their sandbox inits)."""
    me, found = os.getpid(), []
    m = MARK.encode()
    for p in pids:
        if p == me:
            continue
        q, hops = p, 0
        while q and q > 1 and q != me and hops < 64:
            q, hops = ppid(q), hops + 1
        if q == me or m in (proc_read(p, "cmdline") or b""):
            found.append(p)
    return found


STRICT = ("soak fds", "airlock fds", "mounts", "processes", "soak processes")
HOST_WIDE = ("processes",)  # --attributable judges "soak processes" only


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--every", type=int, default=100, help="sample every N runs")
    ap.add_argument("--airlock", default=os.path.join(ROOT, "build", "airlock"))
    ap.add_argument("--mem-slack-mb", type=float, default=64.0)
    ap.add_argument("--json", help="also write the samples and verdict here")
    ap.add_argument("--attributable", action="store_true",
                    help="on a shared host: judge only what the soak is answerable for "
                    "(its own processes and run cgroups), not the host-wide counts")
    args = ap.parse_args()
    airlock = os.path.abspath(args.airlock)
    if not os.access(airlock, os.X_OK):
        sys.exit("soak: no airlock binary at %s" % airlock)

    bases = run_cgroup_bases()
    samples = [sample(airlock, bases, "start")]
    wrong = []
    counts = {k: 0 for k in KINDS}
    t0 = time.monotonic()
    for i in range(args.runs):
        kind = kind_for(i)
        cmd, opts, want = KINDS[kind]
        p = start(airlock_argv(airlock, opts, cmd), stdout=subprocess.DEVNULL,
                  stderr=subprocess.PIPE)
        _, err = p.communicate()
        counts[kind] += 1
        if p.returncode != want:
            wrong.append((i, kind, p.returncode, err.decode("utf-8", "replace")[-300:]))
        if (i + 1) % args.every == 0 and i + 1 < args.runs:
            samples.append(sample(airlock, bases, str(i + 1)))
    elapsed = time.monotonic() - t0
    samples.append(sample(airlock, bases, "end"))

    keys = [k for k in samples[0] if k != "label" and not k.startswith("_")]
    width = max(len(k) for k in keys) + 2
    print("soak: %d runs (%s) in %.1f s, %.1f runs/s, %.2f ms/run" % (
        args.runs, ", ".join("%d %s" % (n, k) for k, n in counts.items()), elapsed,
        args.runs / elapsed, elapsed * 1000 / args.runs))
    print("".ljust(width) + "".join(s["label"].rjust(9) for s in samples))
    for k in keys:
        print(k.ljust(width) + "".join(str(s[k]).rjust(9) for s in samples))

    first, last = samples[0], samples[-1]
    problems = []
    notes = []
    for k in keys:
        judged = k in STRICT or k.startswith(("cgroups ", "our cgroups "))
        if args.attributable and (k in HOST_WIDE or k.startswith("cgroups ")):
            judged = False
        if judged:
            # Growth is a leak. A drop cannot be airlock's doing (something
            # else on the host ended): noted, not failed.
            if last[k] > first[k]:
                problems.append("%s grew: %s -> %s" % (k, first[k], last[k]))
            elif last[k] < first[k]:
                notes.append("%s dropped: %s -> %s" % (k, first[k], last[k]))
    gone = sorted((p, c) for p, c in first["_procs"].items() if p not in last["_procs"])
    new = sorted((p, c) for p, c in last["_procs"].items() if p not in first["_procs"])
    if gone or new:
        notes.append("processes only at the start: %s; only at the end: %s"
                     % (" ".join("%d/%s" % pc for pc in gone) or "-",
                        " ".join("%d/%s" % pc for pc in new) or "-"))
    drop = first["MemAvailable MB"] - last["MemAvailable MB"]
    if drop > args.mem_slack_mb:
        problems.append("MemAvailable dropped %.1f MB (> %.0f MB)" % (drop, args.mem_slack_mb))
    if first["_airlock_fd_targets"] != last["_airlock_fd_targets"]:
        problems.append("airlock's fds differ: %s vs %s" % (first["_airlock_fd_targets"],
                                                            last["_airlock_fd_targets"]))
    for i, kind, rc, err in wrong[:10]:
        problems.append("run %d (%s) exited %s, expected %d: %s"
                        % (i, kind, rc, KINDS[kind][2], err.strip()))
    if len(wrong) > 10:
        problems.append("... %d runs with a wrong exit code in all" % len(wrong))
    print("airlock fds mid-run: %s" % " ".join(first["_airlock_fd_targets"]))
    if last["_stale_cgroups"]:
        notes.append("stale run cgroups at the end: %s" % " ".join(
            "%s%s" % (d, " (ours)" if cgroup_supervisor(d) in STARTED else "")
            for d in last["_stale_cgroups"]))
    for n in notes:
        print("note: " + n)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": args.runs, "elapsed_s": elapsed, "counts": counts,
                       "samples": samples, "problems": problems, "notes": notes}, f,
                      indent=2)
    if problems:
        print("FAIL")
        for p in problems:
            print("  " + p)
        return 1
    print("OK: nothing grew (MemAvailable %+.1f MB)" % -drop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
