#!/usr/bin/python3
"""Phase table: where `airlock run -- /bin/true` spends its time, against the floor.

Each round starts the floor (bench-floor: the seven namespaces and a
read-only tmpfs root, nothing else) and each airlock binary given once, in
turn (every other round in reverse). airlock runs with $AIRLOCK_PHASES set,
so it prints each phase's CLOCK_MONOTONIC time on stderr; a phase's cost is
its time less the one before it ("main" is counted from the moment this
script started the process, "exit" to the moment it was reaped). The table
gives each phase's median in µs with p10-p90, and the medians of the
totals. Usage:
  bench/phases.py [--rounds N] [--floor PATH] [--airlock LABEL=PATH ...] [-- ARGS...]
ARGS are given to `airlock run` before `-- /bin/true` (e.g. --ro DIR:/input).
A --airlock value may carry arguments of its own after the path, for that
binary alone: --airlock "process=build/airlock --backend process" and
--airlock "native=build/airlock --backend native" compare two backends in
the same rounds.
"""
import argparse
import os
import shlex
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TRUE = "/bin/true"


def run_floor(floor):
    t0 = time.monotonic_ns()
    r = subprocess.run([floor, TRUE], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE)
    t1 = time.monotonic_ns()
    if r.returncode != 0:
        sys.exit(f"phases: {floor} exited {r.returncode}: {r.stderr.decode(errors='replace')}")
    return (t1 - t0) / 1000.0


def run_airlock(path, extra):
    env = dict(os.environ, AIRLOCK_PHASES="1")
    path, *own = shlex.split(path)
    t0 = time.monotonic_ns()
    r = subprocess.run([path, "run"] + own + extra + ["--", TRUE], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    t1 = time.monotonic_ns()
    if r.returncode != 0:
        sys.exit(f"phases: {path} exited {r.returncode}: {r.stderr.decode(errors='replace')}")
    steps, prev = [], t0
    for line in r.stderr.decode(errors="replace").splitlines():
        # "airlock: phase 12345.678901 ms: what"
        if not line.startswith("airlock: phase "):
            continue
        stamp, _, what = line[len("airlock: phase "):].partition(" ms: ")
        ms, _, ns = stamp.partition(".")
        t = int(ms) * 1000000 + int(ns)
        steps.append((what, (t - prev) / 1000.0))
        prev = t
    if not steps:
        sys.exit(f"phases: {path} printed no phases (a build without $AIRLOCK_PHASES?)")
    steps.append(("exit", (t1 - prev) / 1000.0))
    return steps, (t1 - t0) / 1000.0


def summary(v):
    s = sorted(v)
    return statistics.median(s), s[len(s) // 10], s[len(s) * 9 // 10]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--floor", default=os.path.join(ROOT, "build", "bench", "bench-floor"))
    ap.add_argument("--airlock", action="append", metavar="LABEL=PATH",
                    help="an airlock binary (repeatable); default new=build/airlock")
    ap.add_argument("extra", nargs="*", help="arguments for airlock run")
    args = ap.parse_args()
    if not (os.path.isfile(args.floor) and os.access(args.floor, os.X_OK)):
        sys.exit(f"phases: no floor program at {args.floor} (build it: ninja -C build "
                 "bench/bench-floor, with -Dtests=true; or give --floor PATH)")
    bins = [a.split("=", 1) for a in (args.airlock or
                                      ["new=" + os.path.join(ROOT, "build", "airlock")])]
    floor_t = []
    phases = {label: {} for label, _ in bins}
    order = {label: [] for label, _ in bins}
    totals = {label: [] for label, _ in bins}
    cases = [("floor", None)] + bins
    for i in range(args.warmup + args.rounds):
        for label, path in (cases if i % 2 == 0 else cases[::-1]):
            if path is None:
                t = run_floor(args.floor)
                if i >= args.warmup:
                    floor_t.append(t)
                continue
            steps, total = run_airlock(path, args.extra)
            if i < args.warmup:
                continue
            totals[label].append(total)
            for what, us in steps:
                if what not in phases[label]:
                    phases[label][what] = []
                    order[label].append(what)
                phases[label][what].append(us)
    fm, fl, fh = summary(floor_t)
    print(f"{'floor (bench-floor /bin/true)':44s} {fm:8.0f} us  ({fl:.0f}-{fh:.0f})")
    for label, _ in bins:
        print(f"\n{label}: phase (time since the previous one)      median us  (p10-p90)")
        for what in order[label]:
            m, lo, hi = summary(phases[label][what])
            n = len(phases[label][what])
            note = "" if n == len(totals[label]) else f"  [{n} of {len(totals[label])} runs]"
            print(f"  {what:42s} {m:8.0f}  ({lo:.0f}-{hi:.0f}){note}")
        m, lo, hi = summary(totals[label])
        print(f"  {'total':42s} {m:8.0f}  ({lo:.0f}-{hi:.0f});  "
              f"{m - fm:+.0f} us, {m / fm:.2f}x the floor")


if __name__ == "__main__":
    main()
