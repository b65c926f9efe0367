#!/usr/bin/python3
"""Sessions on the native backend, judged from the host (TAP).

session_driver runs each script as one exec in one live sandbox. Checks:
files kept between three execs; every try on init from inside (kill(1, sig)
for every signal incl. SIGRTMIN+2, ptrace, /proc/1/fd, /proc/1/environ,
/proc/1/mem) fails or has no effect and the next exec runs; a memory bomb
(a 64 MiB limit, allocating at most 256 MiB) ends its exec with reason
memory and the next exec succeeds; execs with a terminal of their own
(bash -i, python3 -i answer typed lines, a resize seen by stty size, the
output filter on request); a spinning exec paused uses no CPU for a
second (its ticks in /proc from the host, its freezer cgroup FROZEN), is not
ended by its timeout meanwhile, and resumed it runs out its timeout with the
pause left out of its duration and of the run's deadline; a 3 s lifetime
extended by 5 s lets an exec past the old deadline reach a loopback server
with tokens PyJWT accepts then (a per-request token minted after the old
deadline, the run token minted again to the new one); nothing of the run
is left afterwards (processes, cgroups, mounts)."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import own_mount_ns  # noqa: E402

DRIVER = sys.argv[1]
AIRLOCK = sys.argv[2] if len(sys.argv) > 2 else None
MARK = "777.25"  # sleep's argument: finds a leftover process by its cmdline
n = 0
failed = 0
drivers = []  # the pids of the session drivers this script started


def ok(cond, what):
    global n, failed
    n += 1
    # one TAP line: a message that quotes a command's output keeps its lines on it
    print(("ok" if cond else "not ok") + " %d - %s" % (n, " | ".join(str(what).splitlines())),
          flush=True)
    if not cond:
        failed += 1


def drive(*scripts, opts=()):
    with subprocess.Popen([DRIVER, *opts, *scripts], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as q:
        drivers.append(q.pid)
        try:
            out, err = q.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            q.kill()
            out, err = q.communicate()
    p = subprocess.CompletedProcess(q.args, q.returncode, out, err)
    lines = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    return p, [l for l in lines if "exec_id" in l], lines[-1] if lines else {}


def cgroup_dirs():
    """The cgroups of this script's runs: a run's cgroup is named
    PID-STARTTIME-N after the airlock (here the driver) that made it, and
    its execs' are exec-N below it. Other suites' runs on this host are not
    ours to judge."""
    found = set()
    mine = tuple("/%d-" % pid for pid in drivers)
    for root, dirs, _ in os.walk("/sys/fs/cgroup"):
        for d in dirs:
            if any(m in os.path.join(root, d) for m in mine):
                found.add(os.path.join(root, d))
        if root.count("/") > 8:
            dirs[:] = []
    return found


def leftovers():
    left = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    if MARK.encode() in f.read():
                        left.append(pid)
            except OSError:
                pass
    return left


own_mount_ns()  # mounts made elsewhere on the host meanwhile are not seen
with open("/proc/self/mountinfo") as f:
    mounts_before = len(f.readlines())
cg_before = cgroup_dirs()

# Three execs keep files in the scratch (the workdir).
p, ex, end = drive("echo one > f", "cat f; echo two >> f", "cat f; (sleep %s &) ; true" % MARK)
ok(p.returncode == 0 and len(ex) == 3, "three execs ran (%s)" % p.stderr.strip())
ok(len(ex) == 3 and ex[2]["stdout"] == "one\ntwo\n", "files kept between execs")
ok(all(e["reason"] == "exited" and e["exit_code"] == 0 for e in ex), "each exited 0")
ok(end.get("run_end") == "killed", "the session ended when killed")

# Tries on init from inside, each followed by an exec that must run.
ATTACKS = {
    "signals": "python3 -c 'import os, signal\n"
    "for s in list(range(1, 32)) + [signal.SIGRTMIN + 2, signal.SIGRTMIN, signal.SIGRTMAX]:\n"
    "    try: os.kill(1, s)\n"
    "    except OSError as e: pass\n"
    "print(\"sent\")'",
    "ptrace": "python3 -c 'import ctypes\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "r = libc.ptrace(16, 1, 0, 0)\n"
    "print(\"ptrace\", r)'",
    "fds": "ls /proc/1/fd/ 2>&1; cat /proc/1/fd/3 2>&1; echo done",
    "environ": "echo X > /proc/1/environ 2>&1; cat /proc/1/environ 2>&1; echo done",
    "mem": "python3 -c 'open(\"/proc/1/mem\", \"r+b\")' 2>&1; echo done",
}
for name, script in ATTACKS.items():
    p, ex, end = drive(script, "echo alive")
    ok(len(ex) == 2 and ex[1]["stdout"] == "alive\n" and ex[1]["reason"] == "exited",
       "after %s at init the next exec runs: %s" % (name, [e.get("stdout") for e in ex]))
    if name == "ptrace":
        ok(ex and "ptrace -1" in ex[0]["stdout"], "ptrace of init fails")
    if name in ("fds", "environ", "mem"):
        out = ex[0]["stdout"].lower() if ex else ""
        ok("denied" in out or "not permitted" in out,
           "%s of init refused: %r" % (name, ex[0]["stdout"][:200] if ex else None))
    ok(end.get("run_end") == "killed", "%s: the session ended only when killed" % name)

# A bounded memory bomb in one exec: reason memory there, the next runs.
bomb = ("python3 -c 'b = []\n"
        "for i in range(256): b.append(bytearray(1 << 20))\n"
        "print(len(b))'")
p, ex, end = drive(bomb, "echo next", opts=("--exec-memory", str(64 << 20)))
ok(len(ex) == 2 and ex[0]["reason"] == "memory", "the bomb's exec ends with reason memory: %s"
   % (ex[0] if ex else p.stderr))
ok(len(ex) == 2 and ex[1]["stdout"] == "next\n" and ex[1]["reason"] == "exited",
   "the next exec succeeds")
ok(end.get("run_end") == "killed", "the memory hit did not end the session")

# A terminal per exec: a shell and a REPL answer typed lines, a resize is
# seen by stty, the output re-encoded only when asked.
p, ex, end = drive("bash -i", opts=("--tty", "1", "--exec-timeout", "30000",
                                     "--input", "echo $((6*7))\nexit 5\n"))
ok(ex and ex[0]["reason"] == "exited" and ex[0]["exit_code"] == 5 and
   "\r\n42\r\n" in ex[0]["stdout"],
   "bash -i in a terminal answers a typed line: %r" % (ex[0]["stdout"] if ex else p.stderr))
p, ex, end = drive("python3 -i -q", opts=("--tty", "1", "--exec-timeout", "30000", "--input",
                                          "print(6*7)\nraise SystemExit(3)\n"))
ok(ex and ex[0]["exit_code"] == 3 and "\r\n42\r\n" in ex[0]["stdout"],
   "python3 -i in a terminal answers a typed line: %r" % (ex[0]["stdout"] if ex else p.stderr))
p, ex, end = drive("stty size; echo ready; read x; stty size; tty",
                   opts=("--tty", "1", "--resize", "40x120", "--input", "go\n"))
ok(ex and ex[0]["stdout"].startswith("24 80\r\n") and "40 120\r\n/dev/pts/" in
   ex[0]["stdout"], "its terminal is 24x80, then 40x120 once resized, from the sandbox's "
   "devpts: %r" % (ex[0]["stdout"] if ex else p.stderr))
QUERY = "printf 'a\\033[6nb\\n'"
p, ex, end = drive(QUERY, opts=("--tty", "1", "--ttyfilter", "1"))
p2, ex2, _ = drive(QUERY, opts=("--tty", "1"))
ok(ex and ex2 and "ab" in ex[0]["stdout"] and "\x1b[6n" not in ex[0]["stdout"] and
   "\x1b[6n" in ex2[0]["stdout"], "a terminal query is left out with ttyfilter, kept "
   "without: %r %r" % (ex and ex[0]["stdout"], ex2 and ex2[0]["stdout"]))

# Pause and resume: a spinner with a 2 s timeout, paused 300 ms in.
SPIN = "777.26"


def cpu_ticks(mark):
    """utime + stime of the processes whose cmdline has mark (host view),
    but the drivers (whose arguments have it too)."""
    total, found = 0, 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) in drivers:
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                if mark.encode() not in f.read():
                    continue
            with open("/proc/%s/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
            found += 1
        except (OSError, IndexError, ValueError):
            pass
    return total, found


def freezer_states():
    states = []
    for d in cgroup_dirs():
        try:
            with open(os.path.join(d, "freezer.state")) as f:
                states.append(f.read().strip())
        except OSError:
            pass
    return states


with subprocess.Popen([DRIVER, "--exec-timeout", "2000", "--pause", "1",
                       "exec sh -c 'while :; do :; done' spin %s" % SPIN, "echo after"],
                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                      text=True) as q:
    drivers.append(q.pid)
    before = json.loads(q.stdout.readline() or "{}")  # {"scratch": ...}
    paused = json.loads(q.stdout.readline() or "{}")
    t1, found = cpu_ticks(SPIN)
    print("# the spinner's processes: %d" % found)
    frozen = freezer_states()
    import time
    time.sleep(1.0)
    t2, _ = cpu_ticks(SPIN)
    q.stdin.write("resume\n")
    q.stdin.flush()
    resumed = json.loads(q.stdout.readline() or "{}")
    time.sleep(0.5)
    t3, _ = cpu_ticks(SPIN)
    try:
        out, err = q.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        q.kill()
        out, err = q.communicate()
    rest = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
ok(paused.get("paused") == 0 and found >= 1 and not paused.get("ended_before"),
   "the spinner was paused while it ran: %s (%d found) %s" % (paused, found, err.strip()))
ok("FROZEN" in frozen, "its freezer cgroup is FROZEN from the host: %s" % frozen)
# A tick or two can still land after the freeze as the kernel's per-task
# accounting catches up (seen under load: 2); a spinner that ran would use
# ~100 in that second.
ok(t2 - t1 <= 3, "paused, it used no CPU for a second: %d ticks" % (t2 - t1))
ok(paused.get("exec_while_paused") == -11, "an exec asked for while paused waits (EAGAIN)")
ok(resumed.get("resumed") == 0 and t3 - t2 > 3, "resumed, it runs again: %d ticks in 0.5 s"
   % (t3 - t2))
ok(0 <= paused.get("remaining_ms", -1) - resumed.get("remaining_ms", 0) < 500,
   "the run's deadline moved by the pause: %s left when paused, %s after 1 s paused"
   % (paused.get("remaining_ms"), resumed.get("remaining_ms")))
spin = rest[0] if rest else {}
ok(spin.get("reason") == "timeout" and 1900 <= spin.get("duration_ms", 0) < 3000 and
   spin.get("wall_ms", 0) >= spin.get("duration_ms", 0) + 900,
   "its 2 s timeout ran out after the pause, the pause left out: %s"
   % {k: spin.get(k) for k in ("reason", "duration_ms", "wall_ms")})
ok(len(rest) >= 2 and rest[1].get("stdout") == "after\n", "the next exec runs")
ok(rest and rest[-1].get("run_end") == "killed", "the session ended when killed")

# A driver killed (SIGKILL) with its sandbox paused and an exec running:
# its cgroups stay (the run's, the exec's below it, the frozen freezer
# one) until `airlock gc`, which thaws, kills and removes them all.
if AIRLOCK:
    with subprocess.Popen([DRIVER, "--pause", "1", "exec sleep %s" % MARK],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as q:
        drivers.append(q.pid)
        q.stdout.readline()
        paused = json.loads(q.stdout.readline() or "{}")
        left = {os.path.basename(d) for d in cgroup_dirs()} - \
            {os.path.basename(d) for d in cg_before}
        q.kill()
        q.communicate()
    ok(paused.get("paused") == 0 and "exec-1" in left,
       "a paused session with an exec in its own cgroup: %s" % sorted(left))
    g = subprocess.run([AIRLOCK, "gc"], capture_output=True, text=True, timeout=60)
    ok(g.returncode == 0, "airlock gc ran: %s" % g.stderr.strip())
    ok(cgroup_dirs() == cg_before and leftovers() == [],
       "gc removed the killed session's cgroups (%s) and its processes (%s)"
       % (cgroup_dirs() - cg_before, leftovers()))

# A 3 s lifetime extended by 5 s, with a run token (presented by the
# gateway as X-Run-Token) and a per-request token (Authorization). An exec
# asks a loopback server through the gateway until it is answered "ok",
# which it is only 3.5 s after its first request (past the old deadline,
# which counts from before the exec): the tokens that last request brought
# are checked by PyJWT as it arrives, the per-request one minted after the
# old deadline, the run token minted again to the new one.
def extended_tokens():
    import http.server
    import tempfile
    import threading
    import time
    try:
        import jwt  # python3-jwt
        from cryptography.hazmat.primitives.serialization import load_pem_private_key
    except ImportError as e:
        ok(False, "extend: PyJWT or cryptography missing: %s" % e)
        return
    got = []  # (arrival, {header: PyJWT's claims or its error}) of the answered request
    first = []

    def verify(tok):
        try:
            return jwt.decode(tok, pub, algorithms=["EdDSA"], audience="analysis.internal")
        except jwt.PyJWTError as e:
            return e

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            now = time.time()
            first.append(now)
            done = now > first[0] + 3.5
            if done:
                auth = self.headers.get("Authorization", "")
                got.append((now, {
                    "req": verify(auth[7:]) if auth.startswith("Bearer ") else auth,
                    "run": verify(self.headers.get("X-Run-Token", ""))}))
            body = b"ok" if done else b"wait"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    port = srv.server_address[1]
    hp = "analysis.internal:%d" % port
    with tempfile.TemporaryDirectory() as d:
        key = os.path.join(d, "token.key")
        subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", key],
                       check=True, capture_output=True)
        os.chmod(key, 0o600)
        pub = load_pem_private_key(open(key, "rb").read(), None).public_key()
        pol = os.path.join(d, "task.json")
        with open(pol, "w") as f:
            json.dump({"version": 1, "limits": {"timeout": "3s"},
                       "network": {"allow": [hp], "hosts": {"analysis.internal": "127.0.0.1"}},
                       "tokens": {
                           "RUN_TOKEN": {"key": key, "hosts": [hp],
                                         "header": "X-Run-Token: {}"},
                           "REQ_TOKEN": {"key": key, "hosts": [hp], "per_request": True,
                                         "ttl": "30s"}}}, f)
        script = ("python3 -c 'import time, urllib.request as u\n"
                  "for i in range(100):\n"
                  "    if u.urlopen(\"http://%s/\", timeout=10).read() == b\"ok\": break\n"
                  "    time.sleep(0.25)\n"
                  "print(\"answered\")'" % hp)
        p, ex, end = drive(script, opts=("--policy", pol, "--extend", "5000"))
    srv.shutdown()
    lines = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    ext = next((l for l in lines if "extended" in l), {})
    old, new = ext.get("old_deadline", 0), ext.get("new_deadline", 0)
    ok(ext.get("extended") == 0 and 4 <= new - old <= 6,
       "extend: the lifetime moved by 5 s: %s %s" % (ext, p.stderr.strip()[-300:]))
    ok(ex and ex[0]["reason"] == "exited" and ex[0]["stdout"] == "answered\n",
       "extend: an exec past the old deadline was answered: %s"
       % (ex[0] if ex else p.stderr.strip()[-300:]))
    ok(end.get("run_end") == "killed", "extend: the session lived until killed: %s" % end)
    ok(len(got) == 1, "extend: the server answered ok once: %d" % len(got))
    if len(got) != 1:
        return
    t, c = got[0]
    ok(t > old, "extend: that request came after the old deadline (%.1f > %d)" % (t, old))
    r = c["req"]
    ok(isinstance(r, dict) and r.get("iat", 0) >= old and r.get("exp", 0) <= new,
       "extend: the per-request token minted after the old deadline is accepted, "
       "bounded by the new one: %r (old %d, new %d)" % (r, old, new))
    r = c["run"]
    ok(isinstance(r, dict) and new - 1 <= r.get("exp", 0) <= new + 1,
       "extend: the run token minted again to the new deadline is accepted: %r "
       "(old %d, new %d)" % (r, old, new))


extended_tokens()

# Nothing left.
with open("/proc/self/mountinfo") as f:
    ok(len(f.readlines()) == mounts_before, "no mount left")
ok(cgroup_dirs() == cg_before, "no cgroup left: %s" % (cgroup_dirs() - cg_before))
ok(leftovers() == [], "no process left")
print("1..%d" % n)
sys.exit(1 if failed else 0)
