#!/usr/bin/python3
"""podman with each OCI runtime: `podman run --rm IMAGE /bin/true`, the
runtimes interleaved in one run.

usage: bench/oci.py [--rounds N] [--warmup N] [--airlock PATH] [--runc PATH]
                    [--crun PATH] [--microvm] [--json FILE]

--microvm adds airlock with the annotation io.airlock.backend=microvm (the
container in a guest, docs/oci.md) as one more runtime of the rounds.

Each round runs the command once per runtime, in turn (every other round
in reverse, so that what ran just before does not favour one), so that
the machine's noise hits every runtime alike; the report gives each
runtime's median, p10 and p90 in milliseconds and airlock / runc.

The image is tests/oci/images.py's busybox root imported into a private
podman store (its own storage, containers.conf and temporary directory
under one directory removed at the end; nothing touches the machine's
default store), run with --network none, as the oci-podman suite does.
A runtime that cannot run here is left out with the reason printed: crun
1.8 refuses this machine's hybrid cgroup layout, for instance; the check
is one `podman run` before the rounds. The time is podman's whole: its
own work (the store, conmon, its cleanup) is most of it for every
runtime.

Needs root (rootful podman), podman and runc.
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

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# bench/ holds a copy.py that would hide the standard library's copy
# (which tarfile imports): bench/ off the path, tests/oci on it.
sys.path = [os.path.join(ROOT, "tests", "oci")] + [
    p for p in sys.path if os.path.abspath(p or ".") != HERE]

import images  # noqa: E402

IMAGE = "localhost/al-bench-busybox"


def run_args(pod, runtime, extra=()):
    return pod.argv("--runtime", runtime, "run", "--rm", "--network", "none", *extra, IMAGE,
                    "/bin/true")


def once(pod, runtime, extra=()):
    """One `podman run --rm IMAGE /bin/true` with runtime: (ms, result)."""
    t = time.perf_counter()
    r = subprocess.run(run_args(pod, runtime, extra), stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=pod.env,
                       timeout=120)
    return (time.perf_counter() - t) * 1000.0, r


def why_not(r):
    err = r.stderr.decode(errors="replace").strip().splitlines()
    return "exit %d: %s" % (r.returncode, err[-1] if err else "(no message)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--airlock", default=os.path.join(ROOT, "build", "airlock-runc"),
                    help="airlock's runc-compatible binary (default build/airlock-runc)")
    ap.add_argument("--runc", default=shutil.which("runc") or "/usr/sbin/runc")
    ap.add_argument("--crun", default=shutil.which("crun") or "/usr/bin/crun")
    ap.add_argument("--microvm", action="store_true",
                    help="add airlock with io.airlock.backend=microvm")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("oci: needs root (rootful podman)")
    if not shutil.which("podman"):
        sys.exit("oci: podman is not installed")
    runtimes = [("airlock", os.path.abspath(args.airlock), ()), ("runc", args.runc, ()),
                ("crun", args.crun, ())]
    if args.microvm:
        runtimes.append(("microvm", os.path.abspath(args.airlock),
                         ("--annotation", "io.airlock.backend=microvm")))
    base = tempfile.mkdtemp(prefix="airlock-bench-oci-")
    pod = None
    try:
        pod = images.Podman(os.path.join(base, "podman"))
        pod.import_root(images.busybox_root(os.path.join(base, "busybox")), IMAGE)
        usable, skipped = [], {}
        for name, path, extra in runtimes:
            if not os.access(path, os.X_OK):
                skipped[name] = "%s not found" % path
                continue
            _, r = once(pod, path, extra)
            if r.returncode != 0:
                skipped[name] = why_not(r)
                continue
            usable.append((name, path, extra))
        for name, why in skipped.items():
            print("%-8s skipped: %s" % (name, why))
        if not any(u[0] == "airlock" for u in usable):
            sys.exit("oci: airlock cannot run here: %s" % skipped.get("airlock"))
        times = {u[0]: [] for u in usable}
        for i in range(args.warmup + args.rounds):
            for name, path, extra in (usable if i % 2 == 0 else usable[::-1]):
                ms, r = once(pod, path, extra)
                if r.returncode != 0:
                    sys.exit("oci: %s failed in round %d: %s" % (name, i, why_not(r)))
                if i >= args.warmup:
                    times[name].append(ms)
    finally:
        if pod:
            pod.close()
        left = images.mounts_below(base)
        shutil.rmtree(base, ignore_errors=True)
        if left:
            print("oci: mounts left below %s: %s" % (base, left), file=sys.stderr)
    res = {name: {"median_ms": statistics.median(v), "p10_ms": sorted(v)[len(v) // 10],
                  "p90_ms": sorted(v)[len(v) * 9 // 10], "n": len(v)}
           for name, v in times.items()}
    print("podman run --rm IMAGE /bin/true, %d rounds interleaved (+%d warm-up):"
          % (args.rounds, args.warmup))
    for name, r in res.items():
        print("%-8s median %7.1f ms  (p10 %.1f, p90 %.1f)" % (name, r["median_ms"], r["p10_ms"],
                                                             r["p90_ms"]))
    ratios = {}
    for other in ("runc", "crun"):
        if other in res:
            ratios["airlock/" + other] = res["airlock"]["median_ms"] / res[other]["median_ms"]
            print("airlock / %s = %.2f" % (other, ratios["airlock/" + other]))
    if "microvm" in res and "runc" in res:
        ratios["microvm/runc"] = res["microvm"]["median_ms"] / res["runc"]["median_ms"]
        print("airlock microvm / runc = %.2f" % ratios["microvm/runc"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": res, "ratios": ratios, "skipped": skipped,
                       "rounds": args.rounds}, f, indent=2)


if __name__ == "__main__":
    main()
