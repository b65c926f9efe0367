#!/usr/bin/python3
"""The wasm backend's start-up: a C module under `airlock run --backend wasm`
against the same module run by bare node with the same driver
(src/backend/wasm/driver.mjs) and the same flags, interleaved round by round
so that machine noise hits them alike; the engine's own start (`node -e 0`)
is the floor. Prints medians and the ratio airlock / bare (target <= 1.2).

Usage: bench/wasm.py MODULE.wasm [--rounds N] [--airlock PATH] [--json FILE]
(MODULE: one that exits at once, e.g. `int main(void) { return 0; }` built
with `clang --target=wasm32-wasi -O2`; not the e2e suite's loop.wasm.)
"""
import argparse
import json
import os
import statistics
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# What airlock gives the module by default (512M memory less node's 128M).
MEMORY = 384 << 20


def run_once(argv):
    t = time.perf_counter()
    subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=120)
    return (time.perf_counter() - t) * 1000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("module")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--airlock", default=os.path.join(ROOT, "build", "airlock"))
    ap.add_argument("--json")
    a = ap.parse_args()
    driver = open(os.path.join(ROOT, "src", "backend", "wasm", "driver.mjs")).read()
    module = os.path.abspath(a.module)
    cfg = json.dumps({"mode": "wasi", "module": module, "name": module, "preopens": {},
                      "memory": MEMORY})
    cmds = {
        "airlock": [a.airlock, "run", "--backend", "wasm", "--", module],
        "bare": ["node", "--no-warnings", "--wasm-max-mem-pages=%d" % (MEMORY >> 16),
                 "--input-type=module", "-e", driver, "--", cfg],
        "floor": ["node", "-e", "0"],
    }
    times = {k: [] for k in cmds}
    for k, argv in cmds.items():  # one warm-up each
        run_once(argv)
    for _ in range(a.rounds):
        for k, argv in cmds.items():
            times[k].append(run_once(argv))
    med = {k: statistics.median(v) for k, v in times.items()}
    for k in cmds:
        print("%-8s median %7.1f ms  (p10 %.1f, p90 %.1f)" %
              (k, med[k], sorted(times[k])[len(times[k]) // 10],
               sorted(times[k])[len(times[k]) * 9 // 10]))
    print("airlock / bare: %.2f (target <= 1.2); bare / floor: %.2f" %
          (med["airlock"] / med["bare"], med["bare"] / med["floor"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rounds": a.rounds, "median_ms": med, "times_ms": times}, f)


if __name__ == "__main__":
    main()
