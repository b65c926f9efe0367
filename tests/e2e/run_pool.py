#!/usr/bin/python3
"""The claim of a warm pool's sandbox on the native backend, judged from the
host (TAP). docs/pool.md says what a claim applies.

pool_driver --pool starts a session from a task request with a gateway
and no egress rule, no credentials; the claim is a second request (built
through the request layer, as the daemon builds one) that allows one host
(a loopback HTTP server this script runs, reached through a name that both
requests map to 127.0.0.1) and a secret read from a file, presented as a
header to that host. Checks:
- before the claim an exec is refused, and the held gateway refuses what
  the host sends it from inside the sandbox's network namespace (HTTP
  proxy, SOCKS5, DNS): the server sees no connection, the refusals are
  audited with the held reason;
- a claim that does not fit (another memory limit) is refused naming
  limits.memory, and the sandbox stays held (an exec is still refused);
- the claim succeeds, a second claim is refused;
- an exec reaches the server through the gateway, which sees the secret's
  real value in the header; the sandbox's environment and every exec's
  output hold only the placeholder; the value is not in the audit stream;
- a host not on the allowlist (a second loopback server, also mapped) is
  denied and that server sees no connection;
- a held sandbox outlives its own plan's timeout, and the claim's lifetime
  (counted from the claim) ends the session, killing the exec in it;
- nothing is left (processes, this script's cgroups, mounts)."""
import json
import os
import secrets
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import own_mount_ns  # noqa: E402

DRIVER = sys.argv[1]
MARK = "777.26"  # sleep's argument: finds a leftover process by its cmdline
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


class Server(ThreadingHTTPServer):
    """A loopback HTTP server that counts every connection it accepts
    (before any byte is read) and keeps each request's path and headers."""
    daemon_threads = True

    def __init__(self):
        self.connections = 0
        self.requests = []
        super().__init__(("127.0.0.1", 0), Handler)

    def get_request(self):
        conn = super().get_request()
        self.connections += 1
        return conn


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


def start_server():
    s = Server()
    threading.Thread(target=s.serve_forever, daemon=True).start()
    return s


class Driver:
    """One pool_driver in pool mode: its JSON lines read as they come,
    its stdin the go-ahead for the claim."""

    def __init__(self, *args):
        self.p = subprocess.Popen([DRIVER, *args], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True)
        drivers.append(self.p.pid)
        self.lines = []

    def next_line(self, timeout=120):
        """The next JSON line, or {} when the driver ended or took longer
        than timeout (then it is killed)."""
        timer = threading.Timer(timeout, self.p.kill)
        timer.start()
        try:
            while True:
                line = self.p.stdout.readline()
                if not line:
                    return {}
                if line.startswith("{"):
                    o = json.loads(line)
                    self.lines.append(o)
                    return o
        finally:
            timer.cancel()

    def go(self):
        try:
            self.p.stdin.write("go\n")
            self.p.stdin.flush()
        except BrokenPipeError:  # it ended: what it printed says why
            pass

    def finish(self, timeout=120):
        try:
            out, err = self.p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            out, err = self.p.communicate()
        self.lines += [json.loads(l) for l in out.splitlines() if l.startswith("{")]
        self.stderr = err
        return self.p.returncode


def cgroup_dirs():
    """The cgroups of this script's runs (named PID-STARTTIME-N after the
    driver that made them, execs' exec-N below); other suites' are not ours
    to judge."""
    found = set()
    mine = tuple("/%d-" % pid for pid in drivers)
    for root, dirs, _ in os.walk("/sys/fs/cgroup"):
        for d in dirs:
            if any(m in os.path.join(root, d) for m in mine):
                found.add(os.path.join(root, d))
        if root.count("/") > 8:
            dirs[:] = []
    return found


def sandbox_pid():
    """A process of the live sandbox: in the driver's cgroup, in another
    network namespace than ours."""
    ours = os.readlink("/proc/self/ns/net")
    for d in sorted(cgroup_dirs()):
        try:
            with open(os.path.join(d, "cgroup.procs")) as f:
                pids = f.read().split()
        except OSError:
            continue
        for pid in pids:
            try:
                if os.readlink("/proc/%s/ns/net" % pid) != ours:
                    return int(pid)
            except OSError:
                pass
    return None


# Run inside the sandbox's network namespace (the host's root, entered by
# nsenter): the gateway's HTTP proxy, SOCKS5 and DNS stub asked for the
# allowed-to-be name. Prints one JSON object of what each answered.
TRY_HELD = r"""
import json, socket, struct, sys
port = int(sys.argv[1])
res = {}
s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
s.sendall(b"GET http://api.test:%d/held HTTP/1.1\r\nHost: api.test:%d\r\n"
          b"Connection: close\r\n\r\n" % (port, port))
data = b""
while True:
    b = s.recv(4096)
    if not b:
        break
    data += b
res["http"] = data.split(b"\r\n")[0].decode(errors="replace")
s = socket.create_connection(("127.0.0.1", 1080), timeout=20)
s.sendall(b"\x05\x01\x00")
s.recv(2)
s.sendall(b"\x05\x01\x00\x03\x08api.test" + struct.pack(">H", port))
r = s.recv(10)
res["socks"] = r[1] if len(r) > 1 else None
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.settimeout(20)
q = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
q += b"\x03api\x04test\x00" + struct.pack(">HH", 1, 1)
u.sendto(q, ("127.0.0.1", 53))
a = u.recv(512)
res["dns_rcode"] = a[3] & 0xF
res["dns_answers"] = struct.unpack(">H", a[6:8])[0]
print(json.dumps(res))
"""


def starttime(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except OSError:
        return None


def descendants(pid):
    """Every process below pid (the driver's gateway, the sandbox's init
    and what runs in it), each with its start time, so that a pid used
    again later is not taken for it."""
    found, todo = set(), [pid]
    while todo:
        p = todo.pop()
        try:
            tids = os.listdir("/proc/%d/task" % p)
        except OSError:
            continue
        for t in tids:
            try:
                with open("/proc/%d/task/%s/children" % (p, t)) as f:
                    kids = [int(k) for k in f.read().split()]
            except OSError:
                continue
            for k in kids:
                found.add((k, starttime(k)))
                todo.append(k)
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
tmp = tempfile.TemporaryDirectory(prefix="airlock-pool-")
api, other = start_server(), start_server()
PA, PB = api.server_address[1], other.server_address[1]
VALUE = "pool-secret-" + secrets.token_hex(12)
secret_file = os.path.join(tmp.name, "api-token")
with open(secret_file, "w") as f:
    f.write(VALUE + "\n")
os.chmod(secret_file, 0o600)
HOSTS = {"api.test": "127.0.0.1", "other.test": "127.0.0.1"}


def request(name, network, limits, secrets_=None):
    doc = {"version": 1, "network": network, "limits": limits}
    if secrets_:
        doc["secrets"] = secrets_
    path = os.path.join(tmp.name, name)
    with open(path, "w") as f:
        json.dump(doc, f)
    return path


pool = request("pool.json", {"mode": "gateway", "hosts": HOSTS}, {"memory": "256M"})
CLAIM_NET = {"allow": ["api.test:%d" % PA], "hosts": HOSTS}
SECRETS = {"API_TOKEN": {"source": {"file": secret_file}, "hosts": ["api.test:%d" % PA],
                         "header": "X-Api-Key: {}"}}
claim = request("claim.json", CLAIM_NET, {"memory": "256M", "timeout": "300s"}, SECRETS)
misfit = request("misfit.json", CLAIM_NET, {"memory": "512M", "timeout": "300s"}, SECRETS)
audit = os.path.join(tmp.name, "audit.jsonl")
SCRIPTS = [
    'echo "token=$API_TOKEN"; env',
    "curl -sS -m 60 -w ' %%{http_code}' http://api.test:%d/claimed" % PA,
    "curl -sS -m 60 -w ' %%{http_code}' http://other.test:%d/denied" % PB,
]

d = Driver("--pool", pool, "--claim", claim, "--misfit", misfit, "--audit", audit, *SCRIPTS)
held = d.next_line()
ok(held.get("held") is True, "the pool's session got ready: %s" % held)
ok(held.get("exec", {}).get("errno") == 1 and "claimed" in held["exec"].get("error", ""),
   "an exec before the claim is refused: %s" % held.get("exec"))
pid = sandbox_pid() if held else None
ok(pid is not None, "the sandbox's process found in the driver's cgroup")
tried = {}
if pid:
    q = subprocess.run(["nsenter", "--net=/proc/%d/ns/net" % pid, "--", sys.executable,
                        "-c", TRY_HELD, str(PA)], capture_output=True, text=True, timeout=120)
    try:
        tried = json.loads(q.stdout)
    except ValueError:
        tried = {"error": q.stdout + q.stderr}
ok(" 403 " in tried.get("http", ""), "the held gateway's HTTP proxy refuses: %s" % tried)
ok(tried.get("socks") not in (None, 0), "the held gateway's SOCKS5 refuses: %s" % tried)
ok(tried.get("dns_rcode") == 5 and tried.get("dns_answers") == 0,
   "the held gateway's DNS stub refuses: %s" % tried)
ok(api.connections == 0 and not api.requests,
   "the allowed-to-be server saw nothing before the claim (%d connections)" % api.connections)
below = descendants(d.p.pid)
ok(len(below) >= 2, "the driver's gateway and sandbox seen from the host (%d processes)"
   % len(below))
d.go()
mis = d.next_line()
m = mis.get("misfit", {})
ok(m.get("errno") == 22 and any("limits.memory" in r for r in m.get("reasons", [])),
   "a claim with another memory limit is refused naming limits.memory: %s" % m)
# The socket buffers' bounds follow the memory limit: those differ too.
ok(m.get("reasons") and all(r.startswith("pool: limits.") for r in m["reasons"]),
   "and for nothing but limits: %s" % m.get("reasons"))
ok(mis.get("exec", {}).get("errno") == 1, "the sandbox stays held: %s" % mis.get("exec"))
c = d.next_line()
ok(c.get("claim", {}).get("errno") == 0, "the claim that fits succeeds: %s" % c)
c2 = d.next_line()
ok(c2.get("second_claim", {}).get("errno") == 114,
   "a second claim is refused (EALREADY): %s" % c2)
rc = d.finish()
ex = [l for l in d.lines if "exec_id" in l]
end = d.lines[-1] if d.lines else {}
ok(rc == 0 and len(ex) == 3, "three execs ran after the claim (%s)" % d.stderr.strip()[-500:])
ex += [{}] * (3 - len(ex))
env_out = ex[0].get("stdout", "")
token = env_out.split("\n")[0][len("token="):] if env_out.startswith("token=") else ""
ok(token != "" and token != VALUE, "the sandbox's variable holds a placeholder: %r" % token)
ok("http_proxy=http://127.0.0.1:3128" in env_out, "the exec has the gateway's proxy variables")
ok(ex[1].get("stdout") == "pong 200", "the allowed host answered through the gateway: %r"
   % ex[1].get("stdout"))
got = [h for p, h in api.requests if p == "/claimed"]
ok(len(got) == 1 and got[0].get("X-Api-Key") == VALUE,
   "the server saw the real value in the header: %s" % [h.get("X-Api-Key") for h in got])
ok(ex[2].get("stdout", "").endswith(" 403"), "a host not on the allowlist is denied: %r"
   % ex[2].get("stdout"))
ok(other.connections == 0, "the server not allowed saw nothing (%d connections)"
   % other.connections)
outputs = "".join(e.get("stdout", "") + e.get("stderr", "") for e in ex)
ok(VALUE not in outputs and token in outputs,
   "no exec's output holds the value, only the placeholder")
ok(end.get("run_end") == "killed", "the session ended when killed: %s" % end)
with open(audit) as f:
    text = f.read()
events = [json.loads(l) for l in text.splitlines() if l.strip()]
held_lines = [e for e in events if "not claimed yet" in json.dumps(e)]
ok(len(held_lines) >= 3, "the held gateway's refusals are audited (%d lines)" % len(held_lines))
ok(sum(e.get("event") == "run.claim" for e in events) == 1, "run.claim audited once")
ok(VALUE not in text, "the value is not in the audit stream")

# Lifetime: a held sandbox outlives its own plan's timeout (1 s), the
# claim's (5 s) counts from the claim and ends the session and its exec.
pool1 = request("pool1.json", {"mode": "gateway", "hosts": HOSTS},
                {"memory": "256M", "timeout": "1s"})
claim5 = request("claim5.json", CLAIM_NET, {"memory": "256M", "timeout": "5s"}, SECRETS)
audit3 = os.path.join(tmp.name, "audit3.jsonl")
d = Driver("--pool", pool1, "--claim", claim5, "--wait-end", "1", "--audit", audit3,
           "sleep %s" % MARK)
held = d.next_line()
time.sleep(2)  # past the pool's plan's timeout: not its lifetime while held
d.go()
c = d.next_line()
ok(held.get("held") is True and c.get("claim", {}).get("errno") == 0,
   "a sandbox held past its plan's timeout is claimed: %s %s" % (held, c))
rc = d.finish()
ex = [l for l in d.lines if "exec_id" in l]
end = d.lines[-1] if d.lines else {}
ok(end.get("run_end") == "timeout", "the claim's lifetime ended the session: %s (%s)"
   % (end, d.stderr.strip()[-300:]))
ok(5000 <= end.get("ms_since_claim", 0) < 777000,
   "counted from the claim: %s ms" % end.get("ms_since_claim"))
ok(len(ex) == 1 and ex[0].get("reason") == "killed",
   "the exec running then was ended: %s" % (ex[0].get("reason") if ex else None))
with open(audit3) as f:
    events = [json.loads(l) for l in f if l.strip()]
hits = [e for e in events if e.get("event") == "limit.hit"]
ok([h.get("limit_value") for h in hits if h.get("limit") == "timeout"] == [5000],
   "the timeout's audit names the claim's lifetime: %s" % hits)
ends = [e.get("limits", {}).get("timeout_ms") for e in events if e.get("event") == "run.end"]
ok(ends == [5000], "run.end gives the claim's lifetime: %s" % ends)

# Nothing left.
api.shutdown()
other.shutdown()
tmp.cleanup()
with open("/proc/self/mountinfo") as f:
    ok(len(f.readlines()) == mounts_before, "no mount left")
ok(cgroup_dirs() == cg_before, "no cgroup left: %s" % (cgroup_dirs() - cg_before))
left = leftovers()
ok(left == [], "no process left: %s" % left)
gone = [p for p, t in below if t is not None and starttime(p) == t]
ok(gone == [], "none of the first driver's processes is left: %s" % gone)
for pid in left:  # ours by their mark: not left running either way
    try:
        os.kill(int(pid), 9)
    except OSError:
        pass
print("1..%d" % n)
sys.exit(1 if failed else 0)
