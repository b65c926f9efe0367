#!/usr/bin/python3
"""End-to-end tests of `airlock serve` (TAP): the real daemon on a Unix
socket in a temp dir, driven by a client over that socket.

usage: run_serve.py AIRLOCK PROBE [CASE-SUBSTRING...]

Covers health and metrics, one-shot runs (output, exit code, stdin, a
limit hit, a refusal by the operator policy with its reasons), hostile
input (malformed JSON, an oversized body and head, unknown routes and
methods, an unknown sandbox id, a client that stalls, --max-clients and
--max-sandboxes), and a daemon killed with SIGKILL: its session and sandbox
processes die with it (found by pid from the host) and its next start
removes the cgroups it left. Every daemon is ended by its pid and its temp
dir removed, also when a case fails.
"""

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time

from harness import (Env, Suite, TempDir, expect, kill_pid, run_cgroup_dirs, wait_for,
                     children_of)

suite = Suite()
case = suite.case


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path, timeout=60):
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


class Daemon:
    """airlock serve on DIR/sock with args; stopped by pid on exit."""

    def __init__(self, env, *args):
        self.env = env
        self.args = list(args)

    def __enter__(self):
        self.tmp = TempDir(mode=0o755)
        self.dir = self.tmp.__enter__()
        self.sock = os.path.join(self.dir, "sock")
        self.log = open(os.path.join(self.dir, "log"), "w+")
        self.p = subprocess.Popen([self.env.airlock, "serve", "--socket", self.sock] +
                                  self.args, stdout=self.log, stderr=self.log)
        if not wait_for(lambda: self.ready() or self.p.poll() is not None, 10):
            raise AssertionError("the daemon did not answer in 10 s: %s" % self.logtext())
        expect(self.p.poll() is None, "the daemon ended at once: %s" % self.logtext())
        return self

    def ready(self):
        try:
            return self.request("GET", "/v1/health", timeout=2)[0] == 200
        except OSError:
            return False

    def logtext(self):
        self.log.seek(0)
        return self.log.read()

    def __exit__(self, *exc):
        if self.p.poll() is None:
            kill_pid(self.p.pid, signal.SIGTERM)
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                kill_pid(self.p.pid)
                self.p.wait()
        self.log.close()
        self.tmp.__exit__(*exc)

    def request(self, method, path, body=None, headers=None, timeout=60):
        c = UnixHTTP(self.sock, timeout)
        try:
            if isinstance(body, (dict, list)):
                body = json.dumps(body)
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            data = r.read()
            return r.status, r.getheader("Content-Type"), data
        finally:
            c.close()

    def json(self, method, path, body=None, **kw):
        st, ctype, data = self.request(method, path, body, **kw)
        expect(ctype and ctype.startswith("application/json"),
               "%s %s: content type %r, body %r" % (method, path, ctype, data[:200]))
        return st, json.loads(data)


def expect_error(st, doc, status, *words):
    expect(st == status, "status %d, not %d: %s" % (st, status, doc))
    msg = doc.get("error", "")
    for w in words:
        expect(w in msg, "%r not in the error %r" % (w, msg))


@case
def health_and_metrics(e):
    """GET /v1/health says ok with the caller's identity (uid:0 as root);
    /metrics is Prometheus text with the sandbox gauge, the request counter
    (the health request counted with status 200) and the histograms."""
    with Daemon(e) as d:
        st, doc = d.json("GET", "/v1/health")
        expect(st == 200 and doc["status"] == "ok", "health: %d %s" % (st, doc))
        expect(doc["identity"] == "uid:%d" % os.geteuid(), "identity %r" % doc["identity"])
        st, ctype, text = d.request("GET", "/metrics")
        text = text.decode()
        expect(st == 200 and ctype.startswith("text/plain"), "metrics: %d %s" % (st, ctype))
        for line in ('airlock_sandboxes{state="running"} 0',
                     'airlock_requests_total{status="200"} 2',  # the fixture's readiness check and ours
                     'airlock_run_seconds_bucket{le="+Inf"} 0',
                     "# TYPE airlock_exec_seconds histogram",
                     'airlock_limit_hits_total{reason="memory"} 0'):
            expect(line in text.splitlines(), "no line %r in the metrics:\n%s" % (line, text))
        mode = os.stat(d.sock).st_mode & 0o777
        expect(mode == 0o600, "the socket is mode %o, not 600" % mode)


@case
def oneshot_runs(e):
    """POST /v1/run: argv with its stdout, stderr and exit code in the
    answer beside the result record; code + language python with stdin;
    a memory limit hit reported as reason memory and counted in the
    metrics."""
    with Daemon(e) as d:
        st, doc = d.json("POST", "/v1/run",
                         {"argv": ["/bin/sh", "-c", "echo out; echo err >&2; exit 3"]})
        expect(st == 200, "run: %d %s" % (st, doc))
        expect(doc["stdout"] == "out\n" and doc["stderr"] == "err\n", "output: %s" % doc)
        expect(doc["exit_code"] == 3 and doc["reason"] == "exited", "end: %s" % doc)
        expect(doc["version"] == 1 and doc["run"], "no result record: %s" % doc)
        st, doc = d.json("POST", "/v1/run", {"code": "import sys; print(sys.stdin.read()[::-1])",
                                             "language": "python", "stdin": "abc"})
        expect(st == 200 and doc["stdout"] == "cba\n", "python: %d %s" % (st, doc))
        bomb = "x = bytearray(200 << 20); x[::4096] = b'y' * len(x[::4096])"
        st, doc = d.json("POST", "/v1/run", {"code": bomb, "language": "python",
                                             "limits": {"memory": "64M"}})
        expect(st == 200 and doc["reason"] == "memory", "memory: %d %s" % (st, doc))
        st, _, text = d.request("GET", "/metrics")
        expect('airlock_limit_hits_total{reason="memory"} 1' in text.decode().splitlines(),
               "the memory hit is not counted")
        expect('airlock_runs_total 3' in text.decode().splitlines(), "runs not counted")


@case
def refused_by_operator_policy(e):
    """With an operator policy capping memory at 256M, a run asking for 1G
    gets 403 and the engine's reasons naming the limit; one within it
    runs."""
    with TempDir() as t:
        op = os.path.join(t, "operator.json")
        with open(op, "w") as f:
            json.dump({"version": 1, "profiles": {"default": {
                "limits": {"memory": {"max": "256M"}}}}}, f)
        os.chmod(op, 0o644)
        with Daemon(e, "--operator-policy", op) as d:
            st, doc = d.json("POST", "/v1/run", {"argv": ["/bin/true"],
                                                 "limits": {"memory": "1G"}})
            expect_error(st, doc, 403, "refused")
            expect(any("memory" in r for r in doc["reasons"]), "reasons: %s" % doc)
            st, doc = d.json("POST", "/v1/run", {"argv": ["/bin/true"],
                                                 "limits": {"memory": "128M"}})
            expect(st == 200 and doc["exit_code"] == 0, "within: %d %s" % (st, doc))


@case
def hostile_requests(e):
    """Malformed JSON (400 naming line and column), a body that is not an
    object, a bad field (400 naming it), no command, an oversized body
    (413), an oversized head (431), an unknown route (404) and method (405),
    an unknown sandbox id (404), sandbox creation (501 in this build): each
    a clear 4xx/5xx, and the daemon still answers health after all."""
    with Daemon(e) as d:
        st, doc = d.json("POST", "/v1/run", '{"argv": [')
        expect_error(st, doc, 400, "not JSON", "line 1")
        st, doc = d.json("POST", "/v1/run", '[1]')
        expect_error(st, doc, 400, "JSON object")
        st, doc = d.json("POST", "/v1/run", {"argv": "ls"})
        expect_error(st, doc, 400, "argv")
        st, doc = d.json("POST", "/v1/run", {"code": "1", "language": "cobol"})
        expect_error(st, doc, 400, "cobol")
        st, doc = d.json("POST", "/v1/run", {})
        expect_error(st, doc, 400, "no command")
        st, doc = d.json("POST", "/v1/run", {"argv": ["/bin/true"], "limits": {"memory": "x"}})
        expect(st == 400 and "memory" in doc["error"], "bad limit: %d %s" % (st, doc))
        # A body announced over the cap is answered before it is sent.
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        s.connect(d.sock)
        s.sendall(b"POST /v1/run HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n{"
                  % (2 << 20))
        got = s.recv(4096)
        s.close()
        expect(got.startswith(b"HTTP/1.1 413") and b"at most" in got, "oversized: %r" % got)
        st, _, _ = d.request("GET", "/v1/health", headers={"X-Big": "y" * (64 << 10)})
        expect(st == 431, "an oversized head: %d" % st)
        st, doc = d.json("GET", "/v1/nothing")
        expect_error(st, doc, 404, "no route")
        st, doc = d.json("DELETE", "/v1/health")
        expect_error(st, doc, 405, "does not take DELETE")
        st, doc = d.json("GET", "/v1/sandboxes/nosuchid")
        expect_error(st, doc, 404, "no sandbox")
        st, doc = d.json("DELETE", "/v1/sandboxes/nosuchid")
        expect_error(st, doc, 404, "no sandbox")
        st, doc = d.json("POST", "/v1/sandboxes/nosuchid/exec", {"argv": ["/bin/true"]})
        expect_error(st, doc, 404, "no sandbox")
        st, doc = d.json("GET", "/v1/sandboxes")
        expect(st == 200 and doc == {"sandboxes": []}, "list: %d %s" % (st, doc))
        st, doc = d.json("POST", "/v1/sandboxes", {})
        expect(st == 501, "create: %d %s" % (st, doc))
        st, doc = d.json("GET", "/v1/health")
        expect(st == 200, "health after: %d" % st)


@case
def stalled_clients_and_capacity(e):
    """A client that sends half a head and stalls is dropped after
    --client-timeout while others are served meanwhile; past --max-clients
    a connection gets 503 at once; past --max-sandboxes a run gets 429."""
    with Daemon(e, "--client-timeout", "2", "--max-clients", "3", "--max-sandboxes", "1") as d:
        slow = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        slow.connect(d.sock)
        slow.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n")
        t0 = time.monotonic()
        st, doc = d.json("GET", "/v1/health")
        expect(st == 200, "served beside a stalled client: %d" % st)
        slow.settimeout(10)
        got = slow.recv(4096)
        expect(got == b"" and time.monotonic() - t0 < 8,
               "the stalled client was not dropped: %r" % got[:100])
        slow.close()
        # Fill the clients: three open and idle, the fourth answered 503.
        held = []
        try:
            for _ in range(4):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(d.sock)
                held.append(s)
            held[-1].settimeout(5)
            got = held[-1].recv(4096)
            expect(got.startswith(b"HTTP/1.1 503"), "past --max-clients: %r" % got[:100])
        finally:
            for s in held:
                s.close()
        wait_for(lambda: d.json("GET", "/v1/health")[0] == 200, 5)
        # One sandbox at a time: a run holding it, a second one refused.
        slow_run = subprocess.Popen(
            ["curl", "-s", "--unix-socket", d.sock, "-XPOST", "-d",
             json.dumps({"argv": ["/bin/sleep", "3"]}), "http://x/v1/run"],
            stdout=subprocess.PIPE)
        try:
            wait_for(lambda: b'state="running"} 1' in d.request("GET", "/metrics")[2], 10)
            st, doc = d.json("POST", "/v1/run", {"argv": ["/bin/true"]})
            expect_error(st, doc, 429, "--max-sandboxes")
        finally:
            out, _ = slow_run.communicate(30)
        expect(json.loads(out)["exit_code"] == 0, "the held run: %r" % out[:200])


def descendants(pid):
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for k in children_of(p):
            out.append(k)
            todo.append(k)
    return out


@case
def sigkill_leaves_nothing(e):
    """SIGKILL of the daemon during a run: every process it had (the
    front, the session, the sandbox), found by pid from the host, is gone
    within seconds; the next daemon's start removes the run's cgroup it
    left, before serving."""
    before = run_cgroup_dirs()
    with Daemon(e) as d:
        runner = subprocess.Popen(
            ["curl", "-s", "--unix-socket", d.sock, "-XPOST", "-d",
             json.dumps({"argv": ["/bin/sleep", "60"]}), "http://x/v1/run"],
            stdout=subprocess.DEVNULL)
        try:
            expect(wait_for(lambda: any("sleep" in open("/proc/%d/cmdline" % p).read()
                                        for p in descendants(d.p.pid)
                                        if os.path.exists("/proc/%d/cmdline" % p)), 10),
                   "the run did not start")
            pids = descendants(d.p.pid)
            ours = run_cgroup_dirs() - before
            expect(ours, "no run cgroup seen for the daemon's run")
            kill_pid(d.p.pid)
            d.p.wait(10)
            gone = wait_for(lambda: not any(os.path.exists("/proc/%d" % p) for p in pids), 10)
            left = [p for p in pids if os.path.exists("/proc/%d" % p)]
            expect(gone, "processes of the killed daemon remain: %s" % left)
        finally:
            runner.wait(30)
        with Daemon(e) as d2:
            st, _ = d2.json("GET", "/v1/health")
            expect(st == 200, "the restarted daemon: %d" % st)
            stale = [c for c in ours if os.path.exists(c)]
            expect(not stale, "run cgroups left after the restart: %s" % stale)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        print("usage: %s AIRLOCK PROBE [CASE-SUBSTRING...]" % sys.argv[0], file=sys.stderr)
        sys.exit(2)
    sys.exit(suite.run(Env(sys.argv[1], sys.argv[2]), only=sys.argv[3:]))
