#!/usr/bin/python3
"""The per-open and per-stat cost under each layer, for issue 27's pandas item.

Takes the opens and stats a command makes (strace, default: Debian's python3
importing pandas), then runs bench/opens.c over that list bare, under
bench/floor.c (the namespaces and a read-only root), under the floor with
airlock's landlock rules, with airlock's seccomp program, with both, and
under airlock itself; in interleaved rounds, each a fresh process. Prints
the median ns per call of each case over the rounds, with p10-p90.
Usage: bench/opens.py [--rounds N] [--iterations N] [--airlock PATH]
                      [--build DIR] [-- COMMAND...]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LINE = re.compile(r'^\d+\s+(openat|newfstatat)\(AT_FDCWD, "(/[^"]*)"')


def call_list(command):
    """The absolute paths the command opens and stats, in its order."""
    with tempfile.NamedTemporaryFile("r", prefix="airlock-opens-") as trace:
        subprocess.run(["strace", "-f", "-qq", "-e", "trace=openat,newfstatat", "-o",
                        trace.name] + command, check=True, stdout=subprocess.DEVNULL)
        calls = []
        for line in trace:
            m = LINE.match(line)
            if m:
                calls.append(("open" if m.group(1) == "openat" else "stat") + " " + m.group(2))
    return calls


def run_case(argv, listing, iterations):
    r = subprocess.run(argv + [str(iterations)], input=listing, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"opens: {' '.join(argv)} exited {r.returncode}: {r.stderr.strip()}")
    out = {}
    for line in r.stdout.splitlines():
        f = line.split()
        # "open N ns (p10 .., p90 ..; CALLS calls, FAILED failed)"
        out[f[0]] = (float(f[1]), int(f[-2]))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--airlock", help="default: BUILD/airlock")
    ap.add_argument("command", nargs="*",
                    default=["/usr/bin/python3", "-c", "import pandas"])
    args = ap.parse_args()
    airlock = args.airlock or os.path.join(args.build, "airlock")
    opens = os.path.join(args.build, "bench", "bench-opens")
    floor = os.path.join(args.build, "bench", "bench-floor")
    for p in (airlock, opens, floor):
        if not os.access(p, os.X_OK):
            sys.exit(f"opens: no program at {p} (ninja -C BUILD bench/bench-opens "
                     "bench/bench-floor airlock)")
    calls = call_list(args.command)
    listing = "".join(c + "\n" for c in calls)
    n_open = sum(1 for c in calls if c.startswith("open "))
    print(f"{n_open} opens, {len(calls) - n_open} stats from: {' '.join(args.command)}")
    # The program is bound read-only at the same path in every sandbox.
    bdir = os.path.dirname(opens)
    cases = [
        ("bare", [opens]),
        ("floor", [floor, "--ro", bdir, opens]),
        ("floor --landlock", [floor, "--ro", bdir, "--landlock", opens]),
        ("floor --seccomp", [floor, "--ro", bdir, "--seccomp", opens]),
        ("floor --landlock --seccomp", [floor, "--ro", bdir, "--landlock", "--seccomp", opens]),
        ("airlock", [airlock, "run", "--ro", f"{bdir}:{bdir}", "--", opens]),
    ]
    res = {name: {} for name, _ in cases}
    failed = {}
    for i in range(args.rounds):
        for name, argv in (cases if i % 2 == 0 else cases[::-1]):
            for kind, (ns, nfail) in run_case(argv, listing, args.iterations).items():
                res[name].setdefault(kind, []).append(ns)
                failed.setdefault(name, {})[kind] = nfail
    print(f"{'case':28s} " + " ".join(f"{k + ' ns':>22s}" for k in ("open", "stat", "ioctl", "getppid")))
    for name, _ in cases:
        cells = []
        for kind in ("open", "stat", "ioctl", "getppid"):
            v = sorted(res[name][kind])
            cells.append(f"{statistics.median(v):7.0f} ({v[len(v) // 10]:.0f}-"
                         f"{v[len(v) * 9 // 10]:.0f})")
        print(f"{name:28s} " + " ".join(f"{c:>22s}" for c in cells))
    # The same files must be there in every case, or the cases differ in
    # more than their layers.
    print("failed opens / stats: " + ", ".join(
        f"{name} {failed[name]['open']}/{failed[name]['stat']}" for name, _ in cases))


if __name__ == "__main__":
    main()
