#!/usr/bin/python3
"""airlock serve under load (TAP), issue 25's "Done when":

- 200 concurrent clients for 60 s against one daemon, a mix of health
  checks, one-shot runs of /bin/true and live sandboxes (create, exec,
  delete), past a small configured capacity: every answer is a success or
  one of the documented refusals (429, 503), and once the load stopped the
  daemon's own processes (the monitor and the front) hold no more
  descriptors, no more memory (RSS, within an allowance for the
  allocator) and no run cgroup of theirs is left;
- SIGKILL of the daemon in the middle of load: none of its processes (the
  front, sessions, sandboxes) is left running, and the next daemon's start
  removes the run cgroups and id slots the killed one left.

The CPU it takes is bounded: the clients pause between requests, at most
--max-sandboxes (4) sandboxes run at once (the rest are refused), and the
daemon and the clients run at nice 10. Under a sanitizer build (meson
passes b_sanitize in AIRLOCK_TEST_SANITIZE) it is skipped: the sanitizers'
own memory and slowness would make the numbers meaningless.

usage: serve_load.py AIRLOCK PROBE [CASE-SUBSTRING...]
"""

import json
import os
import random
import socket
import sys
import threading
import time

from harness import Env, Skip, Suite, expect, kill_pid, run_cgroup_dirs, wait_for, \
    cgroup_supervisor, pid_starttime
from run_serve import Daemon, descendants

suite = Suite()
case = suite.case

LOAD_S = 60
CLIENTS = 200
# The configured capacity, well under what the clients ask for.
CAPACITY = ["--max-sandboxes", "4", "--max-sandboxes-per-identity", "4",
            "--max-clients", "64", "--max-clients-per-identity", "64"]
# What the daemon's processes may grow by in RSS after the load, for the
# allocator keeping freed pages (a leak per request, over the thousands of
# requests made, is far past it).
RSS_SLACK_KB = 16 * 1024


def skip_if_sanitized():
    san = os.environ.get("AIRLOCK_TEST_SANITIZE", "none")
    if san not in ("", "none"):
        raise Skip("built with -Db_sanitize=%s: the load test's memory and time numbers "
                   "mean nothing under a sanitizer" % san)


def http(sock, method, path, body=None, timeout=60):
    """One request on its own connection (Connection: close): (status,
    body bytes). A refusal the monitor writes at once and closes may come
    before the request was sent whole: what was received is read anyway."""
    data = b"" if body is None else json.dumps(body).encode()
    head = ("%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
            "Content-Length: %d\r\n\r\n" % (method, path, len(data))).encode()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(sock)
        try:
            s.sendall(head + data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        resp = b""
        while True:
            try:
                b = s.recv(65536)
            except ConnectionResetError:
                break
            if not b:
                break
            resp += b
    finally:
        s.close()
    line, _, rest = resp.partition(b"\r\n")
    parts = line.split()
    if len(parts) < 2 or not parts[1].isdigit():
        raise OSError("no HTTP answer: %r" % resp[:200])
    return int(parts[1]), rest.partition(b"\r\n\r\n")[2]


class Load:
    """CLIENTS threads for a while; every answer tallied, every answer that
    is not a success or a documented refusal kept as an error."""

    def __init__(self, sock, exec_argv=("/bin/true",)):
        self.sock = sock
        self.exec_argv = list(exec_argv)
        self.lock = threading.Lock()
        self.tally = {}
        self.errors = []
        self.stop = threading.Event()

    def note(self, what, status, ok):
        with self.lock:
            self.tally[(what, status)] = self.tally.get((what, status), 0) + 1
            if not ok:
                self.errors.append("%s: %s" % (what, status))

    def call(self, what, method, path, body=None, good=(200,)):
        try:
            st, data = http(self.sock, method, path, body)
        except OSError as ex:
            self.note(what, "error %s" % ex, False)
            return None, None
        ok = st in good or st in (429, 503)
        self.note(what, st, ok)
        if not ok:
            with self.lock:
                self.errors[-1] += " %r" % data[:200]
        try:
            return st, json.loads(data or b"null")
        except ValueError:
            return st, None

    def health(self):
        self.call("health", "GET", "/v1/health")
        self.stop.wait(1.0)

    def run(self):
        st, doc = self.call("run", "POST", "/v1/run", {"argv": ["/bin/true"]})
        if st == 200 and doc.get("exit_code") != 0:
            self.note("run exit", doc.get("exit_code"), False)
        self.stop.wait(2.0)

    def sandbox(self):
        st, doc = self.call("create", "POST", "/v1/sandboxes", {}, good=(201,))
        if st == 201:
            sid = doc["id"]
            st, doc = self.call("exec", "POST", "/v1/sandboxes/%s/exec" % sid,
                                {"argv": self.exec_argv, "wait": True})
            if st == 200 and doc.get("exit_code") != 0:
                self.note("exec exit", doc.get("exit_code"), False)
            # A delete refused past capacity (503) is asked again.
            for _ in range(100):
                st, _ = self.call("delete", "DELETE", "/v1/sandboxes/%s" % sid)
                if st == 200 or st is None:
                    break
                time.sleep(0.1)
        self.stop.wait(2.0)

    def client(self, i):
        # Spread out, then a fixed role: most check health, some run, some
        # keep sandboxes.
        self.stop.wait(random.random())
        step = self.health if i % 10 < 6 else self.run if i % 10 < 8 else self.sandbox
        while not self.stop.is_set():
            step()

    def go(self, seconds, clients=CLIENTS, on_the_way=None):
        threads = [threading.Thread(target=self.client, args=(i,), daemon=True)
                   for i in range(clients)]
        for t in threads:
            t.start()
        if on_the_way:
            on_the_way()
        else:
            time.sleep(seconds)
        self.stop.set()
        for t in threads:
            t.join(120)
        expect(not any(t.is_alive() for t in threads), "clients still waiting 120 s after")

    def count(self, what, status):
        return self.tally.get((what, status), 0)


def daemon_pids(d):
    return [d.p.pid] + [p for p in descendants(d.p.pid) if open(
        "/proc/%d/status" % p).read().find("Uid:\t65534") >= 0]


def fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        return [int(line.split()[1]) for line in f if line.startswith("VmRSS:")][0]


def renice(pids):
    for p in pids:
        try:
            os.setpriority(os.PRIO_PROCESS, p, 10)
        except OSError:
            pass


class Sessions:
    """The daemon's descendants seen while it runs (sampled), by (pid,
    start time): run cgroups are named after their session's pid."""

    def __init__(self, d):
        self.d = d
        self.seen = set()
        self.stop = threading.Event()
        self.t = threading.Thread(target=self.sample, daemon=True)
        self.t.start()

    def sample(self):
        while not self.stop.is_set():
            for p in descendants(self.d.p.pid):
                st = pid_starttime(p)
                if st is not None:
                    self.seen.add((p, st))
            self.stop.wait(0.05)

    def done(self):
        self.stop.set()
        self.t.join()

    def cgroups(self, dirs):
        return sorted(c for c in dirs if cgroup_supervisor(c) in self.seen)


def settled(d):
    """No sandbox left, and no process under the daemon but the front."""
    st, data = http(d.sock, "GET", "/v1/health")
    doc = json.loads(data)
    return st == 200 and doc["sandboxes"] == 0 and len(descendants(d.p.pid)) == 1


@case
def two_hundred_clients_for_a_minute(e):
    """200 clients for 60 s: only successes and 429/503; afterwards no fd,
    RSS or run cgroup growth of the daemon."""
    skip_if_sanitized()
    os.nice(10) if os.getpriority(os.PRIO_PROCESS, 0) < 10 else None
    before = run_cgroup_dirs()
    with Daemon(e, *CAPACITY) as d:
        renice(descendants(d.p.pid) + [d.p.pid])
        watch = Sessions(d)
        # A warm-up of each kind first: what is made once, lazily, is in the
        # baseline.
        warm = Load(d.sock)
        for _ in range(2):
            warm.health()
            warm.run()
            warm.sandbox()
        expect(not warm.errors, "warm-up: %s" % warm.errors[:5])
        expect(wait_for(lambda: settled(d), 20), "the daemon did not settle after the warm-up")
        pids = daemon_pids(d)
        expect(len(pids) == 2, "the monitor and the front: %s" % pids)
        fd0 = {p: fds(p) for p in pids}
        rss0 = {p: rss_kb(p) for p in pids}
        load = Load(d.sock)
        t0 = time.monotonic()
        load.go(LOAD_S)
        took = time.monotonic() - t0
        expect(wait_for(lambda: settled(d), 30),
               "30 s after the load the daemon still has sandboxes or sessions: %s"
               % descendants(d.p.pid))
        watch.done()
        fd1 = {p: fds(p) for p in pids}
        rss1 = {p: rss_kb(p) for p in pids}
        summary = ", ".join("%s %s: %d" % (w, s, n) for (w, s), n in sorted(
            load.tally.items(), key=lambda kv: str(kv[0])))
        print("# %.0f s of load: %s" % (took, summary), flush=True)
        print("# fds %s -> %s; RSS KiB %s -> %s" % (fd0, fd1, rss0, rss1), flush=True)
        expect(not load.errors, "%d answers neither a success nor 429/503, e.g. %s"
               % (len(load.errors), load.errors[:5]))
        expect(load.count("health", 200) > 1000 and load.count("run", 200) > 0 and
               load.count("exec", 200) > 0 and load.count("delete", 200) > 0,
               "too little was served: %s" % summary)
        expect(load.count("create", 429) + load.count("run", 429) > 0,
               "the capacity was never reached: %s" % summary)
        expect(fd1 == fd0, "the daemon's descriptors grew: %s -> %s" % (fd0, fd1))
        grown = {p: rss1[p] - rss0[p] for p in pids if rss1[p] - rss0[p] > RSS_SLACK_KB}
        expect(not grown, "the daemon's memory grew (KiB): %s (from %s)" % (grown, rss0))
        left = watch.cgroups(run_cgroup_dirs() - before)
        expect(not left, "run cgroups of the daemon's sessions left: %s" % left)


@case
def sigkill_under_load(e):
    """SIGKILL of the daemon while 60 clients load it: nothing of it is left
    running; the next start removes its run cgroups and id slots."""
    skip_if_sanitized()
    before = run_cgroup_dirs()
    with Daemon(e, *CAPACITY) as d:
        renice(descendants(d.p.pid) + [d.p.pid])
        watch = Sessions(d)
        # Execs that last: sandboxes are up when it is killed.
        load = Load(d.sock, exec_argv=("/bin/sleep", "5"))
        killed = {}

        def kill_in_the_middle():
            pids = []
            cgroups = []

            # Busy means many processes and at least one run cgroup whose
            # supervisor the sampler has seen: a session is made in steps,
            # so the processes can be there before any cgroup is.
            def busy():
                pids[:] = descendants(d.p.pid)
                cgroups[:] = watch.cgroups(run_cgroup_dirs() - before)
                return len(pids) > 8 and cgroups
            wait_for(busy, 20)
            killed["pids"] = pids
            killed["cgroups"] = cgroups
            kill_pid(d.p.pid)
            d.p.wait(10)
        load.go(0, clients=60, on_the_way=kill_in_the_middle)
        watch.done()
        pids = killed["pids"]
        expect(len(pids) > 8, "too little was running when it was killed: %s" % pids)
        gone = wait_for(lambda: not any(os.path.exists("/proc/%d" % p) for p in pids), 10)
        expect(gone, "processes of the killed daemon left: %s"
               % [p for p in pids if os.path.exists("/proc/%d" % p)])
        expect(killed["cgroups"], "no run cgroup was seen before the kill")
        ours = set(watch.cgroups(run_cgroup_dirs() - before))
    with Daemon(e) as d2:
        st, _ = http(d2.sock, "GET", "/v1/health")
        expect(st == 200, "the restarted daemon: %d" % st)
        stale = [c for c in ours if os.path.exists(c)]
        expect(not stale, "run cgroups left after the restart: %s" % stale)
        slots = []
        if os.path.isdir("/run/airlock/ids"):
            for n in os.listdir("/run/airlock/ids"):
                try:
                    with open(os.path.join("/run/airlock/ids", n)) as f:
                        owner = f.read().split()
                except OSError:
                    continue
                if (len(owner) >= 2 and owner[0].isdigit() and owner[1].isdigit() and
                        (int(owner[0]), int(owner[1])) in watch.seen):
                    slots.append(n)
        expect(not slots, "id slots of the killed daemon's sessions left: %s" % slots)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        print("usage: %s AIRLOCK PROBE [CASE-SUBSTRING...]" % sys.argv[0], file=sys.stderr)
        sys.exit(2)
    sys.exit(suite.run(Env(sys.argv[1], sys.argv[2]), only=sys.argv[3:]))
