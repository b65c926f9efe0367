#!/usr/bin/python3
"""Start-up per backend, side by side: `/bin/true` and `python3 -c 'import
pandas'` under each backend given (default: native and process) and bare,
interleaved round by round so that machine noise hits all alike; the
report gives medians, p10-p90, and each backend's ratio to native.
A backend `airlock backends` says is unusable here is left out with its
reason. Run as root (process needs it).
Usage: bench/backends.py [--rounds N] [--airlock PATH] [--backends a,b] [--json FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = "/usr/bin/python3"
COMMANDS = {"true": ["/bin/true"], "pandas": [PY, "-c", "import pandas"]}


def run_once(argv):
    t = time.perf_counter()
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE)
    dt = (time.perf_counter() - t) * 1000.0
    if r.returncode != 0:
        sys.exit("backends: %s exited %d: %s" % (" ".join(argv), r.returncode,
                                                  r.stderr.decode(errors="replace").strip()))
    return dt


def usable(airlock, names):
    r = subprocess.run([airlock, "backends", "--json"], capture_output=True, text=True,
                       check=True)
    by = {b["name"]: b for b in json.loads(r.stdout)["backends"]}
    out = []
    for n in names:
        b = by.get(n)
        if not b or not b.get("usable"):
            print("# %s left out: %s" % (n, b.get("why") if b else "not in this airlock"))
        else:
            out.append(n)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--airlock", default=os.path.join(ROOT, "build", "airlock"))
    ap.add_argument("--backends", default="native,process")
    ap.add_argument("--json")
    a = ap.parse_args()
    backends = usable(a.airlock, a.backends.split(","))
    cases = []
    for cmd, argv in COMMANDS.items():
        cases.append(("bare", cmd, argv))
        for b in backends:
            cases.append((b, cmd, [a.airlock, "run", "--backend", b, "--"] + argv))
    times = {(b, c): [] for b, c, _ in cases}
    for i in range(a.warmup + a.rounds):
        for b, c, argv in cases:
            dt = run_once(argv)
            if i >= a.warmup:
                times[(b, c)].append(dt)
    report = {}
    for cmd in COMMANDS:
        print("\n%s (%d rounds): median ms [p10-p90], ratio to native" % (cmd, a.rounds))
        native = statistics.median(times[("native", cmd)]) if "native" in backends else None
        for b in ["bare"] + backends:
            v = sorted(times[(b, cmd)])
            med = statistics.median(v)
            p10, p90 = v[len(v) // 10], v[(len(v) * 9) // 10 - 1 if len(v) >= 10 else -1]
            ratio = med / native if native else None
            report["%s/%s" % (b, cmd)] = {"median_ms": med, "p10_ms": p10, "p90_ms": p90,
                                          "ratio_to_native": ratio}
            print("  %-8s %8.1f [%6.1f-%6.1f]%s" % (b, med, p10, p90,
                                                   "  %.2fx" % ratio if ratio else ""))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
