#!/usr/bin/python3
"""End-to-end tests of the daemon's warm pool (TAP; docs/pool.md, "In the
daemon"): the real `airlock serve` with an operator policy whose
serve.pool keeps two sandboxes of the default profile, made from a pool
request that maps a name to a loopback HTTP server this script runs.

usage: run_serve_pool.py AIRLOCK PROBE [CASE-SUBSTRING...]

Checks, from the host and through the API:
- the pool fills: two held session processes, each with its sandbox's
  processes below it; none of them is anyone's sandbox (health, list);
- a create that fits is served from the pool ("pool": true, a hit in the
  metrics and in the warm histogram); execs run; the claim's secret
  reaches the loopback server (its real value there, a placeholder in the
  sandbox); the pool refills to two;
- a create that does not fit (another memory limit) is made cold
  ("pool": false, a miss of class "limits"), and the pool keeps its two;
- deleting the claimed sandbox leaves nothing (its session process, run
  cgroups, id slot);
- SIGTERM ends the pool's sandboxes with the rest (nothing left), and so
  does SIGKILL of another daemon with a pool (its next start removes the
  cgroups left).
Every daemon is ended by its pid, the servers stopped and temp dirs
removed, also when a case fails. No check depends on how fast anything
is: a pool hit is judged by the answer and the metrics, never by time.
"""

import json
import os
import secrets
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from harness import Env, Suite, TempDir, expect, kill_pid, run_cgroup_dirs, wait_for
from run_serve import Daemon, descendants, run, session_pids, slots_of

suite = Suite()
case = suite.case


class Server(ThreadingHTTPServer):
    """A loopback HTTP server keeping each request's path and headers."""
    daemon_threads = True

    def __init__(self):
        self.requests = []
        super().__init__(("127.0.0.1", 0), Handler)


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        self.server.requests.append((self.path, dict(self.headers.items())))
        body = b"pong"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Setup:
    """The server, the secret's file and the operator policy in a temp
    dir; stopped and removed on exit."""

    def __enter__(self):
        self.tmp = TempDir(mode=0o755)
        self.dir = self.tmp.__enter__()
        self.server = Server()
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.port = self.server.server_address[1]
        self.value = "pool-daemon-secret-" + secrets.token_hex(12)
        path = os.path.join(self.dir, "api-token")
        with open(path, "w") as f:
            f.write(self.value + "\n")
        os.chmod(path, 0o600)
        self.hosts = {"api.test": "127.0.0.1"}
        self.op = os.path.join(self.dir, "operator.json")
        with open(self.op, "w") as f:
            json.dump({"version": 1,
                       "secrets": {"API_TOKEN": {
                           "source": {"file": path}, "hosts": ["api.test:%d" % self.port],
                           "header": "X-Api-Key: {}"}},
                       "profiles": {"default": {
                           "network": {"allow": ["api.test:%d" % self.port],
                                       "hosts": ["127.0.0.1"]},
                           "secrets": ["API_TOKEN"]}},
                       "serve": {"pool": {"default": {"count": 2, "request": {
                           "network": {"mode": "gateway", "hosts": self.hosts},
                           "limits": {"memory": "256M"}}}}}}, f)
        os.chmod(self.op, 0o644)
        return self

    def create(self, memory="256M"):
        """A create like the pool's request, with the allowlist and the
        secret a claim applies."""
        return {"secrets": ["API_TOKEN"], "limits": {"memory": memory},
                "network": {"allow": ["api.test:%d" % self.port], "hosts": self.hosts}}

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
        self.tmp.__exit__(*exc)


def metrics(d):
    st, _, text = d.request("GET", "/metrics")
    expect(st == 200, "metrics: %d" % st)
    return text.decode().splitlines()


def metric(d, name):
    """The value of one metric line (name with its labels), or None."""
    for line in metrics(d):
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return None


def held(d):
    return metric(d, 'airlock_pool_sandboxes{profile="default",state="held"}')


def wait_held(d, n, what):
    ok = wait_for(lambda: held(d) == n, 180, step=0.2)
    expect(ok, "%s: the pool holds %s sandboxes, not %d; log:\n%s"
           % (what, held(d), n, d.logtext()[-2000:]))


def sandbox_processes(session):
    """A session's processes below it (its gateway, its sandbox's init)."""
    return [p for p in descendants(session) if os.path.exists("/proc/%d" % p)]


@case
def pool_claims_fits_refills_and_ends(e):
    """The pool fills to two held sandboxes; a create that fits is claimed
    from it (answer and metrics), its execs run and its secret reaches the
    loopback server; the pool refills; a create that does not fit is cold
    and the pool keeps two; delete leaves nothing of the claimed one;
    SIGTERM ends everything, the pool's sandboxes too."""
    before = run_cgroup_dirs()
    with Setup() as t, Daemon(e, "--operator-policy", t.op) as d:
        wait_held(d, 2, "at the start")
        sessions = session_pids(d)
        expect(len(sessions) == 2, "two held session processes: %s" % sessions)
        for s in sessions:
            expect(len(sandbox_processes(s)) >= 2,
                   "session %d holds no sandbox: %s" % (s, sandbox_processes(s)))
        st, doc = d.json("GET", "/v1/health")
        expect(st == 200 and doc["sandboxes"] == 0, "the pool is no one's: %s" % doc)
        st, doc = d.json("GET", "/v1/sandboxes")
        expect(doc == {"sandboxes": []}, "the pool is not listed: %s" % doc)
        expect('airlock_sandboxes{state="ready"} 2' in metrics(d), "the ready gauge")

        st, doc = d.json("POST", "/v1/sandboxes", t.create())
        expect(st == 201 and doc.get("pool") is True, "a create that fits: %d %s" % (st, doc))
        sid = doc["id"]
        expect(sid in [s["id"] for s in d.json("GET", "/v1/sandboxes")[1]["sandboxes"]],
               "the claimed sandbox is the caller's")
        expect(metric(d, 'airlock_pool_hits_total{profile="default"}') == 1, "one hit")
        expect(metric(d, 'airlock_create_pool_seconds_count{pool="warm"}') == 1,
               "the warm histogram counts it")
        out = run(d, sid, {"argv": ["/bin/sh", "-c", 'echo "token=$API_TOKEN"']})
        token = out["stdout"].strip()[len("token="):]
        expect(out["exit_code"] == 0 and token and token != t.value,
               "the sandbox holds a placeholder: %s" % out)
        out = run(d, sid, {"argv": ["/bin/sh", "-c",
                                    "curl -sS -m 60 -w ' %%{http_code}' "
                                    "http://api.test:%d/claimed" % t.port]})
        expect(out["stdout"] == "pong 200", "the loopback server through the gateway: %s" % out)
        got = [h.get("X-Api-Key") for p, h in t.server.requests if p == "/claimed"]
        expect(got == [t.value], "the server saw the real value: %s" % got)
        expect(t.value not in json.dumps(out), "the value is not in the exec's answer")

        wait_held(d, 2, "after the claim")
        expect(len(session_pids(d)) == 3, "two held and the claimed: %s" % session_pids(d))

        st, doc = d.json("POST", "/v1/sandboxes", t.create(memory="512M"))
        expect(st == 201 and doc.get("pool") is False,
               "a create that does not fit is cold: %d %s" % (st, doc))
        cold = doc["id"]
        expect(metric(d, 'airlock_pool_misses_total{profile="default",reason="limits"}') == 1,
               "one miss of class limits")
        expect(metric(d, 'airlock_create_pool_seconds_count{pool="cold"}') == 1,
               "the cold histogram counts it")
        expect(held(d) == 2, "the pool keeps its two: %s" % held(d))
        out = run(d, cold, {"argv": ["/bin/echo", "cold"]})
        expect(out["stdout"] == "cold\n", "the cold sandbox's exec: %s" % out)

        expect(len(session_pids(d)) == 4, "two held, claimed, cold: %s" % session_pids(d))
        st, doc = d.json("DELETE", "/v1/sandboxes/" + sid)
        expect(st == 200, "delete: %d %s" % (st, doc))
        expect(d.json("GET", "/v1/sandboxes/" + sid)[0] == 404, "the id answers 404")
        expect(wait_for(lambda: len(session_pids(d)) == 3, 30),
               "the claimed sandbox's session is gone: %s" % session_pids(d))
        expect(not slots_of(sid), "the claimed sandbox's id slot is gone")
        expect(held(d) == 2, "the pool still holds two: %s" % held(d))

        pids = descendants(d.p.pid)
        d.p.send_signal(signal.SIGTERM)
        rc = d.p.wait(60)
        expect(rc == 0, "the daemon's exit status after SIGTERM: %s" % rc)
        left = [p for p in pids if os.path.exists("/proc/%d" % p)]
        expect(not left, "processes left after SIGTERM: %s" % left)
        ours = set(str(p) for p in pids)
        stale = [c for c in run_cgroup_dirs() - before
                 if os.path.basename(c).split("-")[0] in ours and os.path.exists(c)]
        expect(not stale, "run cgroups left after SIGTERM: %s" % stale)


@case
def pool_answers_refusals_and_yields_to_max_sandboxes(e):
    """A create the pool's session refuses (a bad limit: 400) is answered
    and its sandbox held again, no miss counted; with --max-sandboxes 2
    and a pool of two, a cold create ends a held pool sandbox to take its
    place, and the pool refills once the cold one is deleted."""
    with Setup() as t, Daemon(e, "--operator-policy", t.op, "--max-sandboxes", "2") as d:
        wait_held(d, 2, "at the start")
        st, doc = d.json("POST", "/v1/sandboxes", dict(t.create(), limits={"memory": "x"}))
        expect(st == 400 and "memory" in doc.get("error", ""), "a bad limit: %d %s" % (st, doc))
        expect(held(d) == 2, "the pool's sandbox is held again: %s" % held(d))
        misses = [l for l in metrics(d) if l.startswith("airlock_pool_misses_total")
                  and not l.endswith(" 0")]
        expect(not misses, "a refusal is no miss: %s" % misses)
        st, doc = d.json("POST", "/v1/sandboxes", t.create(memory="512M"))
        expect(st == 201 and doc.get("pool") is False, "cold at the limit: %d %s" % (st, doc))
        expect(held(d) == 1 and len(session_pids(d)) == 2,
               "one held pool sandbox made room: %s %s" % (held(d), session_pids(d)))
        st, doc = d.json("DELETE", "/v1/sandboxes/" + doc["id"])
        expect(st == 200, "delete: %d %s" % (st, doc))
        wait_held(d, 2, "after the delete")


@case
def pool_that_cannot_be_made_backs_off(e):
    """A pool request beyond its profile (memory over the ceiling): each
    fill fails, is counted and logged naming the refusal, and is retried
    after a back-off, not at once; creates for the profile are made cold
    (a miss of class "empty")."""
    with Setup() as t:
        with open(t.op) as f:
            op = json.load(f)
        op["profiles"]["default"]["limits"] = {"memory": {"max": "128M"}}
        with open(t.op, "w") as f:
            json.dump(op, f)
        with Daemon(e, "--operator-policy", t.op) as d:
            failed = 'airlock_pool_fills_total{profile="default",result="failed"}'
            expect(wait_for(lambda: (metric(d, failed) or 0) >= 2, 60, step=0.2),
                   "no failed fill counted: %s" % metric(d, failed))
            expect("memory" in d.logtext() and "warm pool" in d.logtext(),
                   "the log names the pool and the refusal: %s" % d.logtext()[-1500:])
            started = metric(d, 'airlock_pool_fills_total{profile="default",result="started"}')
            # Two at once, then one retry each per back-off (1 s, 2 s,
            # ...): never dozens.
            expect(started < 20, "fills are retried after a back-off: %s started" % started)
            st, doc = d.json("POST", "/v1/sandboxes", t.create(memory="64M"))
            expect(st == 201 and doc.get("pool") is False, "cold: %d %s" % (st, doc))
            expect(metric(d, 'airlock_pool_misses_total{profile="default",reason="empty"}') == 1,
                   "a miss of class empty")


@case
def pool_dies_with_the_daemon(e):
    """SIGKILL of a daemon holding a pool: every process it had is gone
    within seconds, and the next start removes the run cgroups left."""
    before = run_cgroup_dirs()
    with Setup() as t:
        with Daemon(e, "--operator-policy", t.op) as d:
            wait_held(d, 2, "at the start")
            pids = descendants(d.p.pid)
            ours = set(str(p) for p in pids)
            mine = [c for c in run_cgroup_dirs() - before
                    if os.path.basename(c).split("-")[0] in ours]
            expect(len(mine) >= 2, "the pool's run cgroups seen: %s" % mine)
            kill_pid(d.p.pid)
            d.p.wait(10)
            gone = wait_for(lambda: not any(os.path.exists("/proc/%d" % p) for p in pids), 10)
            expect(gone, "processes of the killed daemon remain: %s"
                   % [p for p in pids if os.path.exists("/proc/%d" % p)])
        with Daemon(e) as d2:
            expect(d2.json("GET", "/v1/health")[0] == 200, "the restarted daemon")
            stale = [c for c in mine if os.path.exists(c)]
            expect(not stale, "run cgroups left after the restart: %s" % stale)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        print("usage: %s AIRLOCK PROBE [CASE-SUBSTRING...]" % sys.argv[0], file=sys.stderr)
        sys.exit(2)
    sys.exit(suite.run(Env(sys.argv[1], sys.argv[2]), only=sys.argv[3:]))
