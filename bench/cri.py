#!/usr/bin/python3
"""A Kubernetes pod's start with each OCI runtime, through containerd's CRI
plugin (the calls a kubelet makes), the runtimes interleaved in one run.

usage: bench/cri.py [--rounds N] [--warmup N] [--airlock PATH] [--runc PATH]
                    [--json FILE]

One containerd with the CRI plugin and a runtime handler per runtime (the
runc v2 shim with the runtime as its BinaryName), the same setup as the
oci-cri suite (tests/e2e/run_oci_cri.py: its images from this host's
files, its CNI plugin, its own root under one directory removed at the
end). Each round, per runtime in turn (every other round in reverse):
RunPodSandbox with the runtime's handler (the pod's sandbox container
started), then CreateContainer and StartContainer of `/bin/true` until
ContainerStatus says it exited: the time from RunPodSandbox to that, which
is what a kubelet waits for a one-shot pod; then the pod is stopped and
removed (not timed, reported apart). The report gives each runtime's
median, p10 and p90 in milliseconds and airlock / runc.

Needs root, containerd and python3-grpcio.
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# bench/ holds a copy.py that would hide the standard library's copy: off
# the path; the suite's directories on it.
sys.path = [os.path.join(ROOT, "tests", "e2e"), os.path.join(ROOT, "tests", "oci")] + [
    p for p in sys.path if os.path.abspath(p or ".") != HERE]

import run_oci_cri as T  # noqa: E402
from harness import own_mount_ns, wait_for  # noqa: E402


def once(env, handler, seq):
    """One pod with handler whose container runs /bin/true: (start ms,
    teardown ms)."""
    t = time.perf_counter()
    pod, config, _ = env.run_pod(handler=handler)
    cid = env.cri.create(pod, config, "job%d" % seq, T.IMAGE, ["/bin/true"], "job.log")
    env.cri.start(cid)
    done = wait_for(lambda: env.cri.status(cid)["state"] == env.cri_mod.CONTAINER_EXITED, 60,
                    step=0.002)
    started = (time.perf_counter() - t) * 1000.0
    st = env.cri.status(cid)
    if not done or st["exit_code"] != 0:
        sys.exit("cri: %s: the container did not exit 0: %s" % (handler, st))
    t = time.perf_counter()
    env.cri.remove(cid)
    env.remove_pod(pod)
    return started, (time.perf_counter() - t) * 1000.0


def stats(v):
    s = sorted(v)
    return {"median_ms": statistics.median(s), "p10_ms": s[len(s) // 10],
            "p90_ms": s[len(s) * 9 // 10], "n": len(s)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--airlock", default=os.path.join(ROOT, "build", "airlock-runc"),
                    help="airlock's runc-compatible binary (default build/airlock-runc)")
    ap.add_argument("--runc", default=shutil.which("runc") or "/usr/sbin/runc")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("cri: needs root (containerd)")
    for prog in ("containerd", "containerd-shim-runc-v2"):
        if not shutil.which(prog):
            sys.exit("cri: %s is not installed" % prog)
    runtimes = {"airlock": os.path.abspath(args.airlock), "runc": args.runc}
    for name, path in runtimes.items():
        if not os.access(path, os.X_OK):
            sys.exit("cri: %s: %s not found" % (name, path))
    own_mount_ns()  # the daemon's mounts and pinned namespaces in one of ours
    env = T.Env(args.airlock, "airlock", handlers=runtimes, prefix="airlock-bench-cri-")
    start = {n: [] for n in runtimes}
    teardown = {n: [] for n in runtimes}
    try:
        env.setup()
        order = list(runtimes)
        for i in range(args.warmup + args.rounds):
            for name in (order if i % 2 == 0 else order[::-1]):
                s, d = once(env, name, i)
                if i >= args.warmup:
                    start[name].append(s)
                    teardown[name].append(d)
    finally:
        left = env.close()
        if left:
            print("cri: mounts left below %s: %s" % (env.base, left), file=sys.stderr)
    res = {n: {"start": stats(start[n]), "teardown": stats(teardown[n])} for n in runtimes}
    print("a pod through containerd's CRI: RunPodSandbox to /bin/true exited, %d rounds "
          "interleaved (+%d warm-up):" % (args.rounds, args.warmup))
    for n, r in res.items():
        print("%-8s median %7.1f ms  (p10 %.1f, p90 %.1f); stop+remove median %.1f ms"
              % (n, r["start"]["median_ms"], r["start"]["p10_ms"], r["start"]["p90_ms"],
                 r["teardown"]["median_ms"]))
    ratio = res["airlock"]["start"]["median_ms"] / res["runc"]["start"]["median_ms"]
    print("airlock / runc = %.2f" % ratio)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": res, "ratio": ratio, "rounds": args.rounds}, f, indent=2)


if __name__ == "__main__":
    main()
