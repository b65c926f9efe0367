#!/usr/bin/python3
"""What the operator policy costs a run, interleaved in the same rounds.

Start-up: `airlock run -- /bin/true` bare, held to an operator policy, and
held to one whose external decider (tests/e2e/decider_standin.py on a Unix
socket) is asked once per run. Egress: one sandbox making N HTTP requests
through the gateway to a loopback server, without a decider, with the
decider asked per request (cache off), and with its cache on (one question
per host). The report gives medians and ratios against the bare case.
Usage: bench/operator_bounds.py [--rounds N] [--requests N] [--airlock PATH]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
STANDIN = os.path.join(ROOT, "tests", "e2e", "decider_standin.py")


class Quiet(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")


def timed(argv):
    t = time.perf_counter()
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE)
    dt = (time.perf_counter() - t) * 1000.0
    if r.returncode != 0:
        sys.exit("operator: %s exited %d: %s" % (" ".join(argv), r.returncode,
                                                  r.stderr.decode(errors="replace")))
    return dt


def measure(cases, rounds, warmup):
    times = {name: [] for name, _ in cases}
    for i in range(warmup + rounds):
        for name, argv in (cases if i % 2 == 0 else cases[::-1]):
            dt = timed(argv)
            if i >= warmup:
                times[name].append(dt)
    return {name: statistics.median(v) for name, v in times.items()}


def write_op(d, name, profile, decider=None):
    doc = {"version": 1, "profiles": {"default": profile}}
    if decider:
        doc["decider"] = decider
    path = os.path.join(d, name)
    with open(path, "w") as f:
        json.dump(doc, f)
    os.chmod(path, 0o644)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--requests", type=int, default=50)
    ap.add_argument("--airlock", default=os.path.join(ROOT, "build", "airlock"))
    args = ap.parse_args()
    a = args.airlock

    d = tempfile.mkdtemp(prefix="airlock-bench-op-")
    sock = os.path.join(d, "decider.sock")
    dec = subprocess.Popen([sys.executable, STANDIN, "allow", "--socket", sock],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    port = srv.server_address[1]
    try:
        for _ in range(100):
            if os.path.exists(sock):
                break
            time.sleep(0.05)
        profile = {"network": {"allow": ["*.test:1024-65535"], "hosts": ["127.0.0.1"]},
                   "limits": {"memory": {"max": "1G"}, "timeout": {"max": "120s"}}}
        op = write_op(d, "op.json", profile)
        op_run = write_op(d, "op-run.json", profile,
                          {"socket": sock, "run": "/v1/data/airlock/run"})
        op_egress = write_op(d, "op-egress.json", profile,
                             {"socket": sock, "egress": "/v1/data/airlock/egress", "cache": 0})
        op_cached = write_op(d, "op-cached.json", profile,
                             {"socket": sock, "egress": "/v1/data/airlock/egress"})
        true = ["--", "/bin/true"]
        start = [("plain", [a, "run"] + true),
                 ("operator policy", [a, "run", "--operator-policy", op] + true),
                 ("operator policy + run decider",
                  [a, "run", "--operator-policy", op_run] + true)]
        res = measure(start, args.rounds, args.warmup)
        net = ["--allow", "api.test:%d" % port, "--map-host", "api.test=127.0.0.1"]
        script = ("for i in $(seq %d); do /usr/bin/curl -s -o /dev/null http://api.test:%d/ "
                  "|| exit 1; done" % (args.requests, port))
        cmd = ["--", "/bin/sh", "-c", script]
        egress = [("egress: no decider", [a, "run", "--operator-policy", op] + net + cmd),
                  ("egress: decider per request",
                   [a, "run", "--operator-policy", op_egress] + net + cmd),
                  ("egress: decider, cached",
                   [a, "run", "--operator-policy", op_cached] + net + cmd)]
        res.update(measure(egress, max(5, args.rounds // 10), 2))
    finally:
        dec.terminate()
        dec.wait()
        srv.shutdown()
        for f in os.listdir(d):
            os.unlink(os.path.join(d, f))
        os.rmdir(d)
    for name, ms in res.items():
        print("%-34s median %8.2f ms" % (name, ms))
    print("operator policy / plain = %.3f" % (res["operator policy"] / res["plain"]))
    print("operator policy + run decider / plain = %.3f"
          % (res["operator policy + run decider"] / res["plain"]))
    per = (res["egress: decider per request"] - res["egress: no decider"]) / args.requests
    cached = (res["egress: decider, cached"] - res["egress: no decider"]) / args.requests
    print("egress decider: %+.2f ms per request uncached, %+.2f ms cached (%d requests)"
          % (per, cached, args.requests))


if __name__ == "__main__":
    main()
