#!/usr/bin/python3
"""Copy benchmark: --copy-in and --copy-out against their peers, interleaved.

A host tree of FILES files of SIZE bytes (in 10 directories) is
- copied in (`airlock run --copy-in TREE:/work/t -- true`) against a bind
  mount of it (`airlock run --ro TREE:/input -- true`) and against the bare
  `cp -r` of the same tree on the host;
- made inside and copied out (`--copy-out /work/t:HOSTDIR`, sha256 included)
  against making it inside without copying it out, and against `cp -r`.
Each round runs every case once; the report gives medians and ratios.
Usage: bench/copy.py [--rounds N] [--files N] [--size BYTES] [--airlock PATH]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def timed(argv, cleanup=None):
    if cleanup:
        cleanup()
    t = time.perf_counter()
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE)
    dt = (time.perf_counter() - t) * 1000.0
    if r.returncode != 0:
        sys.exit(f"copy: {' '.join(argv)} exited {r.returncode}: {r.stderr.decode()}")
    return dt


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--airlock", default=os.path.join(ROOT, "build", "airlock"))
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="airlock-bench-copy-")
    try:
        os.chmod(work, 0o755)
        tree = os.path.join(work, "tree")
        for i in range(args.files):
            d = os.path.join(tree, "d%d" % (i % 10))
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "f%d" % i), "wb") as f:
                f.write(os.urandom(args.size))
        os.system("chmod -R a+rX " + tree)
        out = os.path.join(work, "out")
        dst = os.path.join(work, "cp")

        def clear():
            for p in (out, dst):
                shutil.rmtree(p, ignore_errors=True)

        make = "for d in 0 1 2 3 4 5 6 7 8 9; do mkdir -p /work/t/d$d; done; " \
               "i=0; while [ $i -lt %d ]; do head -c %d /dev/urandom > /work/t/d$((i %% 10))/f$i; " \
               "i=$((i + 1)); done" % (args.files, args.size)
        scratch = ["--scratch", "%dM" % max(64, 4 * args.files * args.size >> 20)]
        a = args.airlock
        cases = [
            ("cp -r (host)", ["cp", "-r", tree, dst], clear),
            ("airlock --ro TREE (bind)", [a, "run", "--ro", tree + ":/input", "--", "true"], None),
            ("airlock --copy-in TREE", [a, "run"] + scratch +
             ["--copy-in", tree + ":/work/t", "--", "true"], None),
            ("airlock make inside", [a, "run"] + scratch + ["--", "sh", "-c", make], None),
            ("airlock make inside + --copy-out", [a, "run"] + scratch +
             ["--copy-out", "/work/t:" + out, "--", "sh", "-c", make], clear),
        ]
        times = {name: [] for name, _, _ in cases}
        for i in range(args.rounds + 2):
            for name, argv, cleanup in (cases if i % 2 == 0 else cases[::-1]):
                dt = timed(argv, cleanup)
                if i >= 2:
                    times[name].append(dt)
        clear()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{args.files} files of {args.size} bytes, {args.rounds} rounds")
    for k, v in med.items():
        print(f"{k:36s} median {v:8.2f} ms")
    cin = med["airlock --copy-in TREE"] - med["airlock --ro TREE (bind)"]
    cout = med["airlock make inside + --copy-out"] - med["airlock make inside"]
    print(f"copy-in cost over a bind: {cin:.2f} ms = {cin / med['cp -r (host)']:.2f} x cp -r")
    print(f"copy-out cost (sha256 included): {cout:.2f} ms = "
          f"{cout / med['cp -r (host)']:.2f} x cp -r")


if __name__ == "__main__":
    main()
