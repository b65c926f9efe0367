#!/usr/bin/python3
"""Start-up benchmark: airlock vs bubblewrap vs the bare command, interleaved.

Each round runs every command once, in turn, so that machine noise hits all of
them alike; the report gives medians and the ratios the issues set targets on.
With --baseline PATH, another airlock binary (an earlier build) runs in the
same rounds, and the report adds new / baseline.
The floor is bench/floor.c (build/bench/bench-floor): the namespaces and a
read-only root, nothing else.
The pandas import (Debian's python3-pandas) runs in rounds of its own,
--pandas-rounds of them (the baseline beside it too).
Usage: bench/startup.py [--rounds N] [--pandas-rounds N] [--airlock PATH] [--baseline PATH]
                        [--floor PATH] [--json FILE]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

# A name no run here connects to: /bin/true opens no connection.
ALLOW = "api.example.test:443"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def run_once(argv):
    t = time.perf_counter()
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    dt = (time.perf_counter() - t) * 1000.0
    if r.returncode != 0:
        sys.exit(f"startup: {' '.join(argv)} exited {r.returncode}")
    return dt


def measure(cases, rounds, warmup):
    times = {name: [] for name, _ in cases}
    for i in range(warmup + rounds):
        # Every other round in reverse: a case's place in the round (what
        # ran just before it) biases it by a few percent otherwise.
        for name, argv in (cases if i % 2 == 0 else cases[::-1]):
            dt = run_once(argv)
            if i >= warmup:
                times[name].append(dt)
    return {name: {"median_ms": statistics.median(v),
                   "p10_ms": sorted(v)[len(v) // 10],
                   "p90_ms": sorted(v)[len(v) * 9 // 10]} for name, v in times.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--airlock", default=os.path.join(ROOT, "build", "airlock"))
    ap.add_argument("--baseline", help="an earlier airlock binary to run in the same rounds")
    ap.add_argument("--floor", default=os.path.join(ROOT, "build", "bench", "bench-floor"),
                    help="bench/floor.c's program (the namespaces and a root, nothing else)")
    ap.add_argument("--pandas-rounds", type=int,
                    help="rounds of the pandas import (default: rounds / 10, at least 20)")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    if not (os.path.isfile(args.floor) and os.access(args.floor, os.X_OK)):
        sys.exit(f"startup: no floor program at {args.floor} (build it: ninja -C build "
                 "bench/bench-floor, with -Dtests=true; or give --floor PATH)")

    bwrap = shutil.which("bwrap")
    if not bwrap:
        sys.exit("startup: bwrap (Debian package bubblewrap) is required as the peer")
    true = "/bin/true"
    # An input directory (0755, so an older build can show it too): as root
    # it is opened by the supervisor and idmapped to its owner.
    inputs = tempfile.mkdtemp(prefix="airlock-bench-")
    os.chmod(inputs, 0o755)
    ro = ["--ro", f"{inputs}:/input"]
    # An operator policy like a platform's (docs/operator-policy.md): the
    # file is read, checked, hashed and its paths resolved on every run.
    opdir = tempfile.mkdtemp(prefix="airlock-bench-op-")
    opfile = os.path.join(opdir, "operator.json")
    with open(opfile, "w") as f:
        json.dump({"version": 1, "profiles": {"default": {
            "filesystem": {"ro": [inputs, "/srv/jobs"], "rw": ["/srv/out"],
                           "never": ["/srv/jobs/keys", "/root", "/home"]},
            "network": {"allow": ["*.example.test:443", "10.20.0.0/16:*"]},
            "limits": {"memory": {"max": "1G", "default": "512M"},
                       "timeout": {"max": "120s", "default": "60s"}, "pids": {"max": 256}},
            "env": {"allow": ["*"]}}}}, f)
    os.chmod(opfile, 0o644)
    op = ["--operator-policy", opfile]
    cases = [
        ("bare /bin/true", [true]),
        ("floor", [args.floor, true]),
        ("bwrap", [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                   "--tmpfs", "/tmp", "--unshare-all", "--die-with-parent", true]),
        ("airlock", [args.airlock, "run", "--", true]),
        # The gateway on: its process, its listeners and the capture rules.
        ("airlock --allow", [args.airlock, "run", "--allow", ALLOW, "--", true]),
        ("airlock --ro DIR", [args.airlock, "run"] + ro + ["--", true]),
        ("airlock --operator-policy", [args.airlock, "run"] + op + ["--", true]),
        ("airlock --operator-policy --ro DIR --allow",
         [args.airlock, "run"] + op + ro + ["--allow", ALLOW, "--", true]),
    ]
    if args.baseline:
        cases.append(("airlock baseline", [args.baseline, "run", "--", true]))
        cases.append(("airlock baseline --allow",
                      [args.baseline, "run", "--allow", ALLOW, "--", true]))
        cases.append(("airlock baseline --ro DIR", [args.baseline, "run"] + ro + ["--", true]))
    try:
        res = measure(cases, args.rounds, args.warmup)
    finally:
        os.rmdir(inputs)
        os.unlink(opfile)
        os.rmdir(opdir)
    py = "/usr/bin/python3"
    pcases = [("bare python3 -c 'import pandas'", [py, "-c", "import pandas"]),
              ("airlock python3 -c 'import pandas'",
               [args.airlock, "run", "--", py, "-c", "import pandas"])]
    if args.baseline:
        pcases.append(("airlock baseline python3 -c 'import pandas'",
                       [args.baseline, "run", "--", py, "-c", "import pandas"]))
    have_pandas = subprocess.run([py, "-c", "import pandas"], capture_output=True).returncode == 0
    if have_pandas:
        res.update(measure(pcases, args.pandas_rounds or max(20, args.rounds // 10), 3))

    for name, r in res.items():
        print(f"{name:38s} median {r['median_ms']:7.2f} ms  (p10 {r['p10_ms']:.2f}, p90 {r['p90_ms']:.2f})")
    ratio = res["airlock"]["median_ms"] / res["bwrap"]["median_ms"]
    print(f"airlock / bwrap = {ratio:.2f}   (target <= 0.85, issue 27; > 1.0 is a bug)")
    fr = res["airlock"]["median_ms"] / res["floor"]["median_ms"]
    print(f"airlock / floor = {fr:.2f}   (bench/phases.py shows what airlock adds)")
    gratio = res["airlock --allow"]["median_ms"] / res["bwrap"]["median_ms"]
    print(f"airlock --allow / bwrap = {gratio:.2f}   (target <= 1.0, issue 27)")
    orr = res["airlock --operator-policy"]["median_ms"] / res["airlock"]["median_ms"]
    print(f"airlock --operator-policy / airlock = {orr:.3f}")
    if args.baseline:
        br = res["airlock"]["median_ms"] / res["airlock baseline"]["median_ms"]
        print(f"airlock / baseline = {br:.3f}")
        gb = res["airlock --allow"]["median_ms"] / res["airlock baseline --allow"]["median_ms"]
        print(f"airlock --allow / baseline --allow = {gb:.3f}")
        rb = res["airlock --ro DIR"]["median_ms"] / res["airlock baseline --ro DIR"]["median_ms"]
        print(f"airlock --ro DIR / baseline --ro DIR = {rb:.3f}")
    if have_pandas:
        pr = (res["airlock python3 -c 'import pandas'"]["median_ms"] /
              res["bare python3 -c 'import pandas'"]["median_ms"])
        print(f"pandas import, airlock / bare = {pr:.3f}   (target <= 1.03, issue 27)")
        if args.baseline:
            pb = (res["airlock python3 -c 'import pandas'"]["median_ms"] /
                  res["airlock baseline python3 -c 'import pandas'"]["median_ms"])
            print(f"pandas import, airlock / baseline = {pb:.3f}")
    else:
        print("pandas import: skipped (Debian python3-pandas not installed)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": res, "airlock_over_bwrap": ratio,
                       "airlock_allow_over_bwrap": gratio}, f, indent=2)


if __name__ == "__main__":
    main()
