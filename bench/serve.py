#!/usr/bin/python3
"""Sessions benchmark: `airlock serve` against bubblewrap and a bare fork+exec.

One client (this process) talks to a daemon it starts on a Unix socket in a
temp dir, over persistent HTTP/1.1 connections, and times every case at the
client. The references are timed by the same client: `/bin/true` started
with a plain fork + exec (and with posix_spawn, glibc's vfork path), and
bubblewrap's cold start. Sections (each can be left out with --skip):

  latency     interleaved rounds: fork+exec, posix_spawn, bwrap, `airlock
              run` (the CLI, cold), an exec of /bin/true in a live session,
              create + first exec (warm when the daemon reports a pool hit:
              a true `pool`/`warm`/`claimed` in the create answer, or its
              `airlock_pool_hits_total` counting up), and a cold create +
              first exec (a request no pool fits: its own pids limit);
              each created sandbox is deleted after its round's timing;
  concurrent  100 sessions at once, each running a short Python snippet:
              create + exec + delete per client thread, and one exec in each
              of 100 live sessions; against 100 bare python3 and 100 bwrap
              python3 started at once by the same threads;
  idle        N idle sessions (without and with the gateway): PSS of every
              process each keeps (smaps_rollup), the drop in MemAvailable,
              and the descriptors the daemon's monitor and front hold;
  hold        1,000 idle sessions held at once: all answer an exec, the
              daemon's descriptors and the memory they take, all deleted.

The load average is printed with each section. Run as root (a slot of host
ids per sandbox) on a machine with bubblewrap (Debian package bubblewrap).
The daemon gets an operator policy whose default profile allows what the
bench asks for and keeps --pool sandboxes ready (default 4).
Usage: bench/serve.py [--airlock PATH] [--rounds N] [--idle N] [--hold N]
                      [--concurrent N] [--pool N] [--skip SECTION,...] [--json FILE]
"""
import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TRUE = "/bin/true"
PY = "/usr/bin/python3"
SNIPPET = "import json; print(json.dumps({'sum': sum(range(1000))}))"
# A live sandbox outlives the bench's sections (the default lifetime is
# the task's 60 s timeout).
LIVE = {"limits": {"timeout": "3600s"}}
# A request a pool made with the defaults never fits (pool.md: every limit
# is fixed when the pool's sandbox is made).
COLD = {"limits": {"timeout": "3600s", "pids": 199}}
# The gateway on: its own process per sandbox. No connection is made.
GATEWAY = {"limits": {"timeout": "3600s"}, "network": {"allow": ["api.example.test:443"]}}


def bwrap_argv(bwrap, cmd):
    return [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
            "--unshare-all", "--die-with-parent"] + cmd


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path, timeout=300):
        super().__init__("localhost", timeout=timeout)
        self.sock_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.sock_path)


class Client:
    """One persistent connection; bodies are encoded before the clock
    starts, so that every case pays the same small client cost."""

    def __init__(self, path):
        self.c = UnixHTTP(path)

    def request(self, method, path, body=None):
        headers = {"Content-Type": "application/json"} if body is not None else {}
        self.c.request(method, path, body=body, headers=headers)
        r = self.c.getresponse()
        data = r.read()
        if r.getheader("Connection", "").lower() == "close":
            self.c.close()
        return r.status, data

    def json(self, method, path, body=None, want=200):
        st, data = self.request(method, path, None if body is None else json.dumps(body))
        if st != want:
            raise RuntimeError(f"{method} {path}: {st}, not {want}: {data[:300]!r}")
        return json.loads(data)

    def fresh(self):
        """A new connection, made before a timed request: the daemon closes
        one idle for its --client-timeout (30 s)."""
        self.c.close()
        self.c.connect()

    def close(self):
        self.c.close()


class MemCgroup:
    """A cgroup v1 memory cgroup of the bench's own, below ours, that the
    daemon is started in: the sandboxes' cgroups are made below the
    daemon's, so its hierarchical counters charge what the daemon and every
    session cost, user and kernel memory (the kernel objects the kernel
    accounts: namespaces, sockets, nftables rules, page tables), and
    nothing of the other work on the machine, which moves MemAvailable
    too. None on cgroup v2 or without a v1 memory hierarchy."""

    ROOT = "/sys/fs/cgroup/memory"

    def __init__(self):
        self.path = None
        try:
            with open("/proc/self/cgroup") as f:
                own = [line.rstrip("\n").split(":", 2)[2] for line in f
                       if line.split(":")[1].split(",").count("memory")]
        except (OSError, IndexError):
            return
        if not own or not os.path.isfile(self.ROOT + "/memory.usage_in_bytes"):
            return
        path = f"{self.ROOT}{own[0].rstrip('/')}/airlock-bench-serve-{os.getpid()}"
        os.mkdir(path)
        self.path = path

    def enter(self):
        """In the daemon's child before exec."""
        if self.path:
            with open(self.path + "/cgroup.procs", "w") as f:
                f.write(str(os.getpid()))

    def usage_kb(self):
        if not self.path:
            return {}
        out = {}
        for k in ("usage", "kmem.usage"):
            with open(f"{self.path}/memory.{k}_in_bytes") as f:
                out[k] = int(f.read()) // 1024
        # The user pages among it: anonymous, and page cache (tmpfs too).
        with open(f"{self.path}/memory.stat") as f:
            for line in f:
                k, v = line.split()
                if k in ("total_rss", "total_cache", "total_shmem"):
                    out[k[6:]] = int(v) // 1024
        return out

    def remove(self):
        """Once the daemon is gone: its base and what a killed one left."""
        if not self.path:
            return
        for top, dirs, _ in os.walk(self.path, topdown=False):
            for d in dirs:
                try:
                    os.rmdir(os.path.join(top, d))
                except OSError as e:
                    print(f"serve: cannot remove {os.path.join(top, d)}: {e}")
        os.rmdir(self.path)


class Daemon:
    """`airlock serve` on a socket in a temp dir, in the bench's memory
    cgroup; ended by its pid."""

    def __init__(self, airlock, max_sandboxes, pool):
        self.dir = tempfile.mkdtemp(prefix="airlock-bench-serve-")
        self.sock = os.path.join(self.dir, "sock")
        self.log = open(os.path.join(self.dir, "log"), "w+")
        self.cg = MemCgroup()
        # The operator policy: the default profile allows what the bench
        # asks for, and its warm pool keeps `pool` sandboxes ready.
        op = os.path.join(self.dir, "operator.json")
        with open(op, "w") as f:
            json.dump({"version": 1, "profiles": {"default": {
                "network": {"allow": ["*.example.test:443"]},
                "limits": {"memory": {"max": "1G", "default": "512M"},
                           "timeout": {"max": "7200s", "default": "60s"}, "pids": {"max": 256}},
                "env": {"allow": ["*"]}}},
                "serve": {"pool": {"default": pool}}}, f)
        os.chmod(op, 0o644)
        self.p = subprocess.Popen([airlock, "serve", "--socket", self.sock, "--max-sandboxes",
                                   str(max_sandboxes), "--max-clients", "512",
                                   "--operator-policy", op],
                                  stdout=self.log, stderr=self.log, preexec_fn=self.cg.enter)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.p.poll() is not None:
                break
            try:
                if Client(self.sock).request("GET", "/v1/health")[0] == 200:
                    return
            except OSError:
                time.sleep(0.05)
        self.stop()
        sys.exit("serve: the daemon did not start: " + self.logtext())

    def logtext(self):
        self.log.seek(0)
        return self.log.read()[-2000:]

    def children(self):
        return children_of(self.p.pid)

    def front_pid(self):
        kids = [k for k in self.children() if b"__session" not in cmdline(k)]
        return kids[0] if kids else None

    def session_pids(self):
        return [k for k in self.children() if b"__session" in cmdline(k)]

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(60)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        self.cg.remove()


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def children_of(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def pss_kb(pid):
    """Pss and the private pages (kB) of a process, from smaps_rollup."""
    out = {"pss": 0, "private": 0}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k == "Pss":
                    out["pss"] = int(v.split()[0])
                elif k in ("Private_Clean", "Private_Dirty"):
                    out["private"] += int(v.split()[0])
    except OSError:
        pass
    return out


def fd_count(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def meminfo(key):
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


# Where MemAvailable goes: processes' pages, and the kernel's own memory
# (namespaces, cgroups, sockets, nftables rules: slab and per-CPU data).
MEMINFO_KEYS = ("AnonPages", "Shmem", "Slab", "SUnreclaim", "KernelStack", "PageTables",
                "Percpu")


def meminfo_all():
    out = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in MEMINFO_KEYS:
                out[k] = int(v.split()[0])
    return out


def load():
    return "load %.2f %.2f %.2f" % os.getloadavg()


def stats(v):
    s = sorted(v)
    return {"median_ms": statistics.median(s), "p10_ms": s[len(s) // 10],
            "p90_ms": s[min(len(s) - 1, len(s) * 9 // 10)], "n": len(s)}


def fork_exec(argv):
    """The plain reference: fork, exec in the child, wait."""
    pid = os.fork()
    if pid == 0:
        try:
            os.execv(argv[0], argv)
        finally:
            os._exit(127)
    _, st = os.waitpid(pid, 0)
    if st != 0:
        raise RuntimeError(f"{argv[0]} ended with wait status {st}")


def spawn(argv):
    pid = os.posix_spawn(argv[0], argv, os.environ)
    _, st = os.waitpid(pid, 0)
    if st != 0:
        raise RuntimeError(f"{argv[0]} ended with wait status {st}")


def pool_hits(cl):
    st, data = cl.request("GET", "/metrics")
    n = 0
    for line in data.decode().splitlines():
        if line.startswith("airlock_pool_hits_total"):
            n += int(float(line.split()[-1]))
    return n


def exec_body(argv=None, code=None):
    if code is not None:
        return json.dumps({"code": code, "language": "python", "wait": True})
    return json.dumps({"argv": argv, "wait": True})


def exec_ok(cl, sid, body):
    st, data = cl.request("POST", f"/v1/sandboxes/{sid}/exec", body)
    if st != 200:
        raise RuntimeError(f"exec in {sid}: {st}: {data[:300]!r}")
    rec = json.loads(data)
    if rec.get("exit_code") != 0:
        raise RuntimeError(f"exec in {sid}: {rec}")
    return rec


def create(cl, body):
    st, data = cl.request("POST", "/v1/sandboxes", body)
    if st != 201:
        raise RuntimeError(f"create: {st}: {data[:300]!r}")
    return json.loads(data)


def delete(cl, sid):
    st, data = cl.request("DELETE", f"/v1/sandboxes/{sid}")
    if st != 200:
        raise RuntimeError(f"delete {sid}: {st}: {data[:300]!r}")


# --- latency ---------------------------------------------------------------


def measure_latency(args, d, bwrap):
    cl = Client(d.sock)
    live = create(cl, json.dumps(LIVE))["id"]
    true_exec = exec_body([TRUE])
    warm_body, cold_body = json.dumps(LIVE), json.dumps(COLD)
    hits = {"create": 0, "last": False}
    times = {}

    def create_exec(name, body):
        def run():
            h0 = pool_hits(cl)
            t = time.perf_counter()
            sb = create(cl, body)
            exec_ok(cl, sb["id"], true_exec)
            dt = time.perf_counter() - t
            hits["last"] = name == "create" and (pool_hits(cl) > h0 or any(
                sb.get(k) is True for k in ("pool", "warm", "claimed")))
            delete(cl, sb["id"])
            return dt
        return run

    def timed(f):
        def run():
            t = time.perf_counter()
            f()
            return time.perf_counter() - t
        return run

    cases = [
        ("fork+exec /bin/true", timed(lambda: fork_exec([TRUE]))),
        ("posix_spawn /bin/true", timed(lambda: spawn([TRUE]))),
        ("bwrap /bin/true (cold)", timed(lambda: fork_exec(bwrap_argv(bwrap, [TRUE])))),
        ("airlock run /bin/true (CLI, cold)",
         timed(lambda: fork_exec([args.airlock, "run", "--", TRUE]))),
        ("exec /bin/true in a live session", timed(lambda: exec_ok(cl, live, true_exec))),
        ("create + first exec", create_exec("create", warm_body)),
        ("cold create + first exec", create_exec("cold", cold_body)),
    ]
    for i in range(args.warmup + args.rounds):
        # Every other round in reverse, as bench/startup.py does: what ran
        # just before a case biases it otherwise.
        for name, f in (cases if i % 2 == 0 else cases[::-1]):
            hits["last"] = False
            dt = f() * 1000.0
            if i >= args.warmup:
                times.setdefault(name, []).append(dt)
                hits["create"] += hits["last"]
    delete(cl, live)
    cl.close()
    res = {name: stats(v) for name, v in times.items()}
    warm = hits["create"] == args.rounds
    if hits["create"] and not warm:
        print(f"  note: {hits['create']} of {args.rounds} creates were pool hits")
    res["_warm"] = warm
    return res


# --- concurrent ------------------------------------------------------------


def at_once(n, work, prep=None):
    """work(i) in n threads released together (prep(i) first, untimed);
    each thread's own time and the wall time until the last ended."""
    barrier = threading.Barrier(n + 1)
    out, errs = [0.0] * n, []

    def body(i):
        try:
            if prep:
                prep(i)
        except OSError as e:
            errs.append(f"{i}: {e}")
        barrier.wait()
        t = time.perf_counter()
        try:
            work(i)
        except Exception as e:  # noqa: BLE001 (reported below)
            errs.append(f"{i}: {e}")
        out[i] = (time.perf_counter() - t) * 1000.0

    ts = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in ts:
        t.join()
    wall = (time.perf_counter() - t0) * 1000.0
    if errs:
        raise RuntimeError(f"{len(errs)} of {n} failed, first: {errs[0]}")
    return out, wall


def run_quiet(argv):
    # A session of its own, as each exec in a sandbox has (setsid): with
    # the scheduler's autogroups on (sched_autogroup_enabled), each session
    # gets its own share of the CPU, and 100 references in the bench's one
    # session would share one against the machine's other work.
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, start_new_session=True)
    if r.returncode != 0:
        raise RuntimeError(f"{argv[0]} exited {r.returncode}")


def measure_concurrent(args, d, bwrap):
    n = args.concurrent
    code = exec_body(code=SNIPPET)
    body = json.dumps(LIVE)
    clients = [Client(d.sock) for _ in range(n)]

    def session(i):
        cl = clients[i]
        sid = create(cl, body)["id"]
        exec_ok(cl, sid, code)
        delete(cl, sid)

    def live_exec(i):
        exec_ok(clients[i], lives[i], code)

    cases = [("bare python3 -c", lambda i: run_quiet([PY, "-c", SNIPPET])),
             ("bwrap python3 -c", lambda i: run_quiet(bwrap_argv(bwrap, [PY, "-c", SNIPPET]))),
             ("create + python exec + delete", session),
             ("python exec in a live session", live_exec)]
    lives = []
    per, walls = {}, {}
    for r in range(args.concurrent_rounds):
        lives = [create(clients[i], body)["id"] for i in range(n)]
        for name, work in (cases if r % 2 == 0 else cases[::-1]):
            ts, wall = at_once(n, work, lambda i: clients[i].fresh())
            per.setdefault(name, []).extend(ts)
            walls.setdefault(name, []).append(wall)
        for i in range(n):
            delete(clients[i], lives[i])
    for cl in clients:
        cl.close()
    return {name: dict(stats(per[name]), wall_ms=statistics.median(walls[name]),
                       walls_ms=walls[name]) for name in per}


# --- idle footprint --------------------------------------------------------


def settle_mem():
    """MemAvailable once it stops moving (two reads 0.5 s apart within
    1 MiB), in kB."""
    prev = meminfo("MemAvailable")
    for _ in range(20):
        time.sleep(0.5)
        cur = meminfo("MemAvailable")
        if abs(cur - prev) < 1024:
            return cur
        prev = cur
    return prev


def session_tree(d, gateway=False):
    """Every process a sandbox keeps, by role: the session process (the
    monitor's child), and below it the sandbox's init (in the sandbox's
    pid namespace, not as root) and, with the network on, the gateway."""
    roles = {}
    for s in d.session_pids():
        roles.setdefault("session process", []).append(s)
        stack = children_of(s)
        while stack:
            p = stack.pop()
            stack.extend(children_of(p))
            try:
                uid = os.stat(f"/proc/{p}").st_uid
                with open(f"/proc/{p}/comm") as f:
                    comm = f.read().strip()
            except OSError:
                continue
            nsdiff = os.readlink(f"/proc/{p}/ns/pid") != os.readlink("/proc/self/ns/pid")
            # The gateway is forked by the session process (its comm is the
            # binary's, as the session's is) and stays in the host's pid
            # namespace.
            role = ("sandbox init" if nsdiff and uid != 0 else
                    "gateway" if gateway and not nsdiff else f"other ({comm}, uid {uid})")
            roles.setdefault(role, []).append(p)
    return roles


def settle_fds(pids):
    """The descriptor counts once they stop moving (the connections of an
    earlier section are closed by the daemon after the client's)."""
    prev = [fd_count(p) for p in pids]
    for _ in range(50):
        time.sleep(0.2)
        cur = [fd_count(p) for p in pids]
        if cur == prev:
            break
        prev = cur
    return prev


def measure_idle(args, d, kind, body, n):
    cl = Client(d.sock)
    mon, front = d.p.pid, d.front_pid()
    fd0 = dict(zip(("monitor", "front"), settle_fds([mon, front])))
    pss0 = {"monitor": pss_kb(mon)["private"], "front": pss_kb(front)["private"]}
    mem0 = settle_mem()
    cg0 = d.cg.usage_kb()
    parts0 = meminfo_all()
    t = time.perf_counter()
    ids = [create(cl, body)["id"] for _ in range(n)]
    made_s = time.perf_counter() - t
    # One exec in each, so that what an exec leaves behind is counted too.
    for sid in ids:
        exec_ok(cl, sid, exec_body([TRUE]))
    mem1 = settle_mem()
    cg1 = d.cg.usage_kb()
    parts1 = meminfo_all()
    roles = session_tree(d, kind == "gateway")
    res = {"kind": kind, "sessions": n, "create_s": made_s,
           "memavailable_drop_kb_per_session": (mem0 - mem1) / n,
           "monitor_fds_per_session": (fd_count(mon) - fd0["monitor"]) / n,
           "front_fds_per_session": (fd_count(front) - fd0["front"]) / n,
           "monitor_private_kb_per_session": (pss_kb(mon)["private"] - pss0["monitor"]) / n,
           "front_private_kb_per_session": (pss_kb(front)["private"] - pss0["front"]) / n,
           "meminfo_kb_per_session": {k: (parts1[k] - parts0[k]) / n for k in parts0},
           "cgroup_kb_per_session": {k: (cg1[k] - cg0[k]) / n for k in cg0},
           "roles": {}}
    for role, pids in sorted(roles.items()):
        p = [pss_kb(x) for x in pids]
        res["roles"][role] = {
            "count": len(pids),
            "pss_kb_median": statistics.median(x["pss"] for x in p),
            "private_kb_median": statistics.median(x["private"] for x in p),
            "fds_median": statistics.median(fd_count(x) for x in pids)}
    t = time.perf_counter()
    for sid in ids:
        delete(cl, sid)
    res["delete_s"] = time.perf_counter() - t
    # MemAvailable given back: measured over a shorter time than the
    # drop, so less of the machine's other work is in it.
    res["memavailable_back_kb_per_session"] = (settle_mem() - mem1) / n
    cl.close()
    return res


# --- 1,000 held --------------------------------------------------------------


def measure_hold(args, d):
    n = args.hold
    body = json.dumps(LIVE)
    mon, front = d.p.pid, d.front_pid()
    fd0, mem0, cg0 = fd_count(mon), settle_mem(), d.cg.usage_kb()
    workers = 4
    ids, errs = [[] for _ in range(workers)], []

    def make(w):
        cl = Client(d.sock)
        try:
            for _ in range(w, n, workers):
                ids[w].append(create(cl, body)["id"])
        except Exception as e:  # noqa: BLE001 (reported below)
            errs.append(str(e))
        cl.close()

    t = time.perf_counter()
    ts = [threading.Thread(target=make, args=(w,)) for w in range(workers)]
    for x in ts:
        x.start()
    for x in ts:
        x.join()
    made_s = time.perf_counter() - t
    all_ids = [i for w in ids for i in w]
    res = {"asked": n, "created": len(all_ids), "create_s": made_s,
           "errors": errs[:3], "monitor_fds": fd_count(mon), "monitor_fds_before": fd0,
           "front_fds": fd_count(front), "fd_limit": open_files_limit(mon)}
    cl = Client(d.sock)
    listed = len(cl.json("GET", "/v1/sandboxes")["sandboxes"])
    res["listed"] = listed
    # Every held sandbox still answers an exec.
    t, failed = time.perf_counter(), 0
    for sid in all_ids:
        try:
            exec_ok(cl, sid, exec_body([TRUE]))
        except Exception:  # noqa: BLE001 (counted)
            failed += 1
    res["exec_all_s"], res["exec_failed"] = time.perf_counter() - t, failed
    mem1 = settle_mem()
    res["memavailable_drop_mb"] = (mem0 - mem1) / 1024
    res["cgroup_mb"] = {k: (v - cg0[k]) / 1024 for k, v in d.cg.usage_kb().items()}
    res["processes"] = sum(len(v) for v in session_tree(d).values())
    res["load"] = load()
    t = time.perf_counter()
    for sid in all_ids:
        delete(cl, sid)
    res["delete_s"] = time.perf_counter() - t
    res["memavailable_back_mb"] = (settle_mem() - mem1) / 1024
    res["sessions_left"] = len(d.session_pids())
    res["monitor_fds_after"] = fd_count(mon)
    cl.close()
    return res


def open_files_limit(pid):
    with open(f"/proc/{pid}/limits") as f:
        for line in f:
            if line.startswith("Max open files"):
                return line.split()[3:5]
    return None


# --- report ----------------------------------------------------------------


def verdict(ok):
    return "met" if ok else "NOT met"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--airlock", default=os.path.join(ROOT, "build", "airlock"))
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--concurrent", type=int, default=100)
    ap.add_argument("--concurrent-rounds", type=int, default=2)
    ap.add_argument("--idle", type=int, default=100, help="idle sessions for the footprint")
    ap.add_argument("--hold", type=int, default=1000)
    ap.add_argument("--pool", type=int, default=4,
                    help="ready sandboxes in the default profile's warm pool (0: none)")
    ap.add_argument("--skip", default="", help="sections left out: latency,concurrent,idle,hold")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))

    if os.getuid() != 0:
        sys.exit("serve: run as root (the daemon's sandboxes take slots of host ids)")
    bwrap = shutil.which("bwrap")
    if not bwrap:
        sys.exit("serve: bwrap (Debian package bubblewrap) is required as the peer")
    out = {"machine": f"{os.cpu_count()} CPUs, kernel {os.uname().release}",
           "load_start": load()}
    print(f"{out['machine']}; {out['load_start']}")
    d = Daemon(args.airlock, max(args.hold, args.concurrent * 2, args.idle) + 16 + args.pool,
               args.pool)
    try:
        if "latency" not in skip:
            print(f"latency: {args.rounds} rounds ({load()})")
            lat = measure_latency(args, d, bwrap)
            out["latency"], out["latency_load"] = lat, load()
            warm = lat.pop("_warm")
            for name, r in lat.items():
                print(f"  {name:36s} median {r['median_ms']:8.2f} ms  "
                      f"(p10 {r['p10_ms']:.2f}, p90 {r['p90_ms']:.2f})")
            print(f"  ({out['latency_load']})")
            fe = lat["fork+exec /bin/true"]["median_ms"]
            sp = lat["posix_spawn /bin/true"]["median_ms"]
            bw = lat["bwrap /bin/true (cold)"]["median_ms"]
            ex = lat["exec /bin/true in a live session"]["median_ms"]
            ce = lat["create + first exec"]["median_ms"]
            co = lat["cold create + first exec"]["median_ms"]
            out["ratios"] = {"exec_over_fork_exec": ex / fe, "exec_over_posix_spawn": ex / sp,
                             "create_exec_over_bwrap": ce / bw, "cold_over_bwrap": co / bw,
                             "create_was_warm": warm}
            print(f"  exec in a live session / fork+exec = {ex / fe:.2f}  (target <= 2: "
                  f"{verdict(ex / fe <= 2)}); / posix_spawn = {ex / sp:.2f}")
            if warm:
                print(f"  warm create + first exec / bwrap = {ce / bw:.2f}  (target <= 0.5: "
                      f"{verdict(ce / bw <= 0.5)})")
            else:
                print(f"  no pool hit: create + first exec was cold: / bwrap = {ce / bw:.2f}  "
                      "(the warm target <= 0.5 is not measurable without a pool)")
            print(f"  cold create + first exec / bwrap = {co / bw:.2f}")
        if "concurrent" not in skip:
            print(f"concurrent: {args.concurrent} at once, {args.concurrent_rounds} rounds "
                  f"({load()})")
            con = measure_concurrent(args, d, bwrap)
            out["concurrent"], out["concurrent_load"] = con, load()
            for name, r in con.items():
                print(f"  {name:32s} each: median {r['median_ms']:8.1f} ms, p90 "
                      f"{r['p90_ms']:8.1f}; all {args.concurrent}: {r['wall_ms']:8.1f} ms")
            print(f"  ({out['concurrent_load']})")
        if "idle" not in skip:
            out["idle"] = []
            for kind, body in (("no network", json.dumps(LIVE)),
                               ("gateway", json.dumps(GATEWAY))):
                print(f"idle: {args.idle} sessions, {kind} ({load()})")
                r = measure_idle(args, d, kind, body, args.idle)
                r["load"] = load()
                out["idle"].append(r)
                print(f"  MemAvailable drop per session {r['memavailable_drop_kb_per_session']:.0f} kB"
                      f" (target <= 1024: "
                      f"{verdict(r['memavailable_drop_kb_per_session'] <= 1024)}); given back "
                      f"at delete {r['memavailable_back_kb_per_session']:.0f} kB")
                if r["cgroup_kb_per_session"]:
                    print("  charged to the daemon's memory cgroup per session: " + ", ".join(
                        f"{k} {v:.0f} kB" for k, v in r["cgroup_kb_per_session"].items()))
                print(f"  daemon per session: monitor {r['monitor_fds_per_session']:.2f} fds, "
                      f"{r['monitor_private_kb_per_session']:.1f} kB private; front "
                      f"{r['front_fds_per_session']:.2f} fds, "
                      f"{r['front_private_kb_per_session']:.1f} kB private")
                print("  meminfo per session (kB): " + ", ".join(
                    f"{k} {v:.0f}" for k, v in r["meminfo_kb_per_session"].items()))
                for role, x in r["roles"].items():
                    print(f"  {role:16s} x{x['count']:4d}: PSS {x['pss_kb_median']} kB, private "
                          f"{x['private_kb_median']} kB, {x['fds_median']} fds (medians)")
                print(f"  made in {r['create_s']:.1f} s, deleted in {r['delete_s']:.1f} s "
                      f"({r['load']})")
        if "hold" not in skip:
            print(f"hold: {args.hold} idle sessions ({load()})")
            h = measure_hold(args, d)
            out["hold"] = h
            ok = h["created"] == args.hold and h["exec_failed"] == 0 and h["listed"] == args.hold
            print(f"  created {h['created']} in {h['create_s']:.1f} s, listed {h['listed']}, "
                  f"exec failed in {h['exec_failed']} ({h['exec_all_s']:.1f} s for all)")
            print(f"  monitor fds {h['monitor_fds_before']} -> {h['monitor_fds']} (limit "
                  f"{h['fd_limit']}), front fds {h['front_fds']}, processes {h['processes']}, "
                  f"MemAvailable drop {h['memavailable_drop_mb']:.0f} MB "
                  f"({h['memavailable_drop_mb'] * 1024 / max(1, h['created']):.0f} kB each)")
            print(f"  charged to the daemon's memory cgroup: " + ", ".join(
                f"{k} {v:.0f} MB" for k, v in h["cgroup_mb"].items()) +
                f"; MemAvailable given back at delete {h['memavailable_back_mb']:.0f} MB")
            print(f"  deleted in {h['delete_s']:.1f} s, sessions left {h['sessions_left']}, "
                  f"monitor fds after {h['monitor_fds_after']} ({h['load']})")
            if h["errors"]:
                print(f"  errors: {h['errors']}")
            print(f"  {args.hold} idle sessions held: {verdict(ok)}")
    finally:
        d.stop()
    out["load_end"] = load()
    print(out["load_end"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
