"""Shared helpers for airlock's end-to-end and security TAP scripts.

Both scripts take the airlock binary and the static probe as arguments, run
the real binary, and judge each case by exact exit codes and, where possible,
by evidence gathered from outside the sandbox (host /proc, host files, host
sockets). Python 3 standard library only.

A case is a function registered with @case; its docstring says what it
proves. It passes by returning, fails by raising AssertionError (the message
becomes TAP diagnostics), and skips by raising Skip("reason").
"""

import atexit
import hashlib
import json
import os
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

PROBE_IN = "/opt/probe/probe"  # where the probe is bound inside the sandbox
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
SANDBOX_UID = 1000
DEFAULT_TIMEOUT = 30
# As root each run's ids come from a slot of this pool (src/ids/slots.h):
# sandbox 0 is POOL_BASE + slot * SLOT_SIZE, sandbox 1000 that plus 1000.
POOL_BASE = 0x70000000
SLOT_SIZE = 65536
POOL_SLOTS = 4094
IDS_DIR = "/run/airlock/ids"
# What files the sandbox creates in a root-owned --rw directory belong to.
HOST_DISK_ID = 1000001000
# A fixed range a test may pin (identity.host_ids) when it needs to know the
# sandbox's host ids before the run: see pinned_opts().
PIN_BASE = 0x60000000

IS_ROOT = os.geteuid() == 0

# The backend this script's runs use: $AIRLOCK_TEST_BACKEND (the per-backend
# suites, e2e-NAME and security-NAME in tests/e2e/meson.build, set it). Every
# `airlock run`, `check` and `verify` the script makes then gets --backend
# NAME (with_backend()), only the cases marked @per_backend run, and each is
# skipped, with the reason, where the backend lacks a feature it needs (the
# names of `airlock backends --json`'s "features"). Unset: airlock's default
# (native), no flag added, every case runs.
BACKEND = os.environ.get("AIRLOCK_TEST_BACKEND") or None
BACKEND_COMMANDS = ("run", "check", "verify")
FEATURES = ("exec", "tty", "network", "hides_processes", "private_tmp", "private_loopback",
            "pause", "mounts_elsewhere")
_backend_facts = None  # the backend's entry of `airlock backends --json`


def per_backend(*needs):
    """Mark a case as one of the per-backend subset: the cases that prove
    each promise once, from the host. needs: the features (FEATURES) it
    cannot run without; a backend lacking one skips it with the reason."""
    for n in needs:
        if n not in FEATURES:
            raise ValueError("unknown backend feature %r (one of %s)" % (n, ", ".join(FEATURES)))

    def mark(fn):
        fn.per_backend = True
        fn.needs = needs
        return fn
    return mark


def with_backend(argv):
    """argv with --backend BACKEND after the subcommand of an airlock
    run/check/verify in it (also behind runuser), unless it names one."""
    if not BACKEND:
        return argv
    argv = list(argv)
    for i, a in enumerate(argv[:-1]):
        if os.path.basename(str(a)) == "airlock" and argv[i + 1] in BACKEND_COMMANDS:
            if "--backend" not in argv and not any(str(x).startswith("--backend=") for x in argv):
                argv[i + 2:i + 2] = ["--backend", BACKEND]
            break
    return argv


def backend_facts(env):
    """BACKEND's entry in `airlock backends --json`; raises AssertionError
    when airlock does not list it."""
    global _backend_facts
    if _backend_facts is None:
        r = subprocess.run([env.airlock, "backends", "--json"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=60)
        if r.returncode != 0:
            raise AssertionError("airlock backends --json exited %d: %s"
                                 % (r.returncode, r.stderr.decode(errors="replace").strip()))
        listed = json.loads(r.stdout)["backends"]
        by_name = {b["name"]: b for b in listed}
        if BACKEND not in by_name:
            raise AssertionError("backend %s is not in this airlock (it has: %s)"
                                 % (BACKEND, ", ".join(by_name)))
        _backend_facts = by_name[BACKEND]
    return _backend_facts


def missing_features(env, needs):
    """The features of needs that BACKEND lacks (none without BACKEND)."""
    if not BACKEND:
        return []
    have = backend_facts(env).get("features", {})
    return [n for n in needs if not have.get(n)]


def require(env, *needs):
    """Skip the calling case unless BACKEND has every feature in needs."""
    lacking = missing_features(env, needs)
    if lacking:
        raise Skip("backend %s lacks %s (airlock backends --json)"
                   % (BACKEND, ", ".join("features." + n for n in lacking)))


def _import_features():
    """BACKEND's features (`airlock backends --json`), asked once at import
    of the airlock every script takes as its first argument, since PROBE_IN
    and the errnos below are constants the scripts import; {} when there is
    no BACKEND or airlock cannot say (Suite.run then reports why)."""
    if not BACKEND or len(sys.argv) < 3 or not os.access(sys.argv[1], os.X_OK):
        return {}
    try:
        r = subprocess.run([sys.argv[1], "backends", "--json"], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, timeout=60)
        listed = {b["name"]: b for b in json.loads(r.stdout)["backends"]}
        return listed[BACKEND]["features"]
    except (OSError, ValueError, KeyError, subprocess.SubprocessError):
        return {}


_FEATURES_AT_IMPORT = _import_features()


def lacks(feature):
    """BACKEND is known (at import) to lack feature; False without BACKEND."""
    return _FEATURES_AT_IMPORT.get(feature, True) is False


# A backend that shows host paths only at their own path (no
# mounts_elsewhere: process) gets the probe at the probe's host path, and
# inputs where they are (inside()), so that its cases judge its promises
# rather than stop at the argument check.
AT_HOST_PATHS = lacks("mounts_elsewhere")
# A backend whose code runs on a kernel of its own (gvisor's sentry): what
# it shows in /dev and /proc/self/mountinfo is that kernel's, not the host's.
OWN_KERNEL = BACKEND in ("gvisor", "microvm", "vm")
if AT_HOST_PATHS:
    PROBE_IN = os.path.abspath(sys.argv[2])
# How a host path outside the plan answers inside. Where the sandbox has a
# root of its own, it does not exist (ENOENT). A backend that makes no
# mounts shows the host's own tree under landlock: the path exists (stat
# works, landlock does not cover it) but cannot be read or listed (EACCES),
# so its cases read or list (HIDDEN_OP) where native's stat.
HIDDEN = ("EACCES",) if AT_HOST_PATHS else ("ENOENT",)
# A connect to a host loopback port that is not the run's: refused by the
# sandbox's own loopback, or (no private_loopback: the host's is shared) by
# landlock's TCP rule (EACCES).
LOOPBACK_REFUSED = (("ECONNREFUSED", "ENETUNREACH", "EADDRNOTAVAIL")
                    + (("EACCES",) if lacks("private_loopback") else ()))


def hidden_step(label, path, is_dir):
    """A probe step that must fail with an errno of HIDDEN for path."""
    if not AT_HOST_PATHS:
        return (label, ["stat", path])
    return (label, ["ls", path] if is_dir else ["read", path])


def inside(host, path):
    """Where the sandbox sees host path host that a case binds at path:
    path, or host itself on a backend that shows paths only where they are."""
    return str(host) if AT_HOST_PATHS else path


def bind(host, path):
    """The --ro/--rw argument that shows host at inside(host, path)."""
    return "%s:%s" % (host, inside(host, path))


# What sandbox uid 1000 is on the host when the run is pinned to PIN_BASE
# (as root), or rootless (always the caller).
HOST_SANDBOX_UID = PIN_BASE + SANDBOX_UID if IS_ROOT else os.geteuid()


def in_pool_user(uid):
    """uid is what sandbox uid 1000 is on the host in a run holding a slot."""
    off = uid - POOL_BASE
    return 0 <= off < POOL_SLOTS * SLOT_SIZE and off % SLOT_SIZE == SANDBOX_UID


_pinned_policy = None


def pinned_opts():
    """Options that pin the run's host ids to PIN_BASE (as root; rootless
    nothing is needed: the sandbox user is the caller)."""
    global _pinned_policy
    if not IS_ROOT:
        return []
    if _pinned_policy is None:
        fd, _pinned_policy = tempfile.mkstemp(prefix="airlock-pinned-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump({"version": 1, "identity": {"host_ids": PIN_BASE}}, f)
        os.chmod(_pinned_policy, 0o644)
        atexit.register(_remove_quietly, _pinned_policy)
    return ["--policy", _pinned_policy]


def _remove_quietly(path):
    try:
        os.unlink(path)
    except OSError:
        pass


# (pid, starttime) of every process this script started, through any
# subprocess call: check_slots_reclaimed() judges only the host id slots of
# airlocks among them (other airlocks may run on this host at the same
# time: another clone's suite, a user's own runs).
SPAWNED = set()


class _TrackedPopen(subprocess.Popen):
    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        SPAWNED.add((self.pid, pid_starttime(self.pid)))


subprocess.Popen = _TrackedPopen  # subprocess.run() and friends use it too


class Skip(Exception):
    """Raised by a case that cannot run here; the message is the reason."""


class Result:
    """One finished airlock invocation."""

    def __init__(self, argv, rc, out, err, elapsed):
        self.argv = argv
        self.rc = rc
        self.out = out
        self.err = err
        self.elapsed = elapsed

    @property
    def text(self):
        return self.out.decode("utf-8", "replace")

    @property
    def errtext(self):
        return self.err.decode("utf-8", "replace")

    def describe(self):
        def clip(b):
            s = b.decode("utf-8", "replace")
            return s if len(s) < 1500 else s[:1500] + "...[%d bytes]" % len(b)

        return "command: %s\nexit: %s (%.2fs)\nstdout: %r\nstderr: %r" % (
            " ".join(shquote(a) for a in self.argv),
            self.rc,
            self.elapsed,
            clip(self.out),
            clip(self.err),
        )


def shquote(s):
    s = str(s)
    if s and all(c.isalnum() or c in "-_./:=@%+," for c in s):
        return s
    return "'" + s.replace("'", "'\\''") + "'"


class Env:
    """The binaries under test and the options every run needs."""

    def __init__(self, airlock, probe):
        self.airlock = os.path.abspath(airlock)
        self.probe = os.path.abspath(probe)
        self.user = None  # run airlock as this user through runuser

    def argv(self, cmd, opts=(), subcommand="run", airlock=None, probe=None,
             bind_probe=True):
        a = [airlock or self.airlock, subcommand]
        if bind_probe:
            a += ["--ro", "%s:%s" % (probe or self.probe, PROBE_IN)]
        a += list(opts)
        if cmd is not None:
            a += ["--"] + list(cmd)
        return a

    def wrap_user(self, argv, user):
        user = user or self.user
        if user:
            return ["runuser", "-u", user, "--"] + argv
        return argv

    def run(self, cmd, opts=(), input=None, timeout=DEFAULT_TIMEOUT, env=None,
            user=None, cwd=None, pass_fds=(), stdin=None, raw_argv=None, **kw):
        """Run `airlock run [opts] -- cmd` and return a Result.

        The probe is bound at PROBE_IN. raw_argv replaces the whole airlock
        command line. On timeout the airlock process (ours) is killed by pid
        and the case fails."""
        argv = raw_argv if raw_argv is not None else self.argv(cmd, opts, **kw)
        argv = self.wrap_user(argv, user)
        return run_host(argv, input=input, timeout=timeout, env=env, cwd=cwd,
                        pass_fds=pass_fds, stdin=stdin)

    def probe_run(self, *args, opts=(), **kw):
        """Run the probe inside a sandbox: `probe_run("id")`."""
        return self.run([PROBE_IN] + [str(a) for a in args], opts=opts, **kw)


def run_host(argv, input=None, timeout=DEFAULT_TIMEOUT, env=None, cwd=None,
             pass_fds=(), stdin=None):
    argv = with_backend(argv)
    if env is None:
        env = dict(os.environ)
    t0 = time.monotonic()
    if stdin is None:
        stdin = subprocess.PIPE if input is not None else subprocess.DEVNULL
    p = subprocess.Popen(argv, stdin=stdin, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env, cwd=cwd,
                         pass_fds=pass_fds, start_new_session=True)
    try:
        out, err = p.communicate(input=input, timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_pid(p.pid)
        out, err = p.communicate()
        res = Result(argv, p.returncode, out, err, time.monotonic() - t0)
        raise AssertionError("airlock did not finish within %ss; killed it\n%s"
                             % (timeout, res.describe()))
    return Result(argv, p.returncode, out, err, time.monotonic() - t0)


def kill_pid(pid, sig=signal.SIGKILL):
    """Signal one process we started; ignore it being gone already."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


# ---- assertions --------------------------------------------------------------

def expect_rc(res, rc):
    if res.rc != rc:
        raise AssertionError("expected exit %s, got %s\n%s" % (rc, res.rc, res.describe()))


def expect(cond, msg, res=None):
    if not cond:
        raise AssertionError(msg + ("\n" + res.describe() if res else ""))


def expect_out(res, want):
    """Exit 0 and stdout exactly `want` (str)."""
    expect_rc(res, 0)
    if res.text != want:
        raise AssertionError("expected stdout %r, got %r\n%s" % (want, res.text, res.describe()))


def expect_errno(res, allowed):
    """The probe ran (exit 0) and its first line is errno=X with X in allowed."""
    expect_rc(res, 0)
    first = res.text.split("\n", 1)[0]
    got = first[len("errno="):] if first.startswith("errno=") else None
    if isinstance(allowed, str):
        allowed = (allowed,)
    if got not in allowed:
        raise AssertionError("expected errno in %s, probe said %r\n%s"
                             % ("/".join(allowed), first, res.describe()))


def expect_ok(res):
    """The probe ran and its first line is "ok"."""
    expect_rc(res, 0)
    if res.text.split("\n", 1)[0] != "ok":
        raise AssertionError("expected the probe to say ok\n%s" % res.describe())


def expect_one_error_line(res, rc, *words):
    """An airlock refusal: exit rc, exactly one stderr line, starting with
    "airlock: " and containing every word, nothing on stdout."""
    expect_rc(res, rc)
    lines = res.errtext.splitlines()
    expect(len(lines) == 1, "expected exactly one line on stderr, got %d" % len(lines), res)
    expect(lines[0].startswith("airlock: "), "stderr must start with 'airlock: '", res)
    for w in words:
        expect(w in lines[0], "stderr does not mention %r" % w, res)


def kv(text):
    """Parse k=v lines."""
    d = {}
    for line in text.splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            d[k] = v
    return d


def probe_listing(res):
    """Entries printed by `probe ls` (after its "ok" line)."""
    expect_ok(res)
    return res.text.splitlines()[1:]


# ---- host-side evidence ------------------------------------------------------

def host_mount_count():
    with open("/proc/self/mountinfo") as f:
        return len(f.readlines())


def proc_read(pid, name):
    try:
        with open("/proc/%s/%s" % (pid, name), "rb") as f:
            return f.read()
    except OSError:
        return None


def all_pids():
    return [int(d) for d in os.listdir("/proc") if d.isdigit()]


def procs_running(path):
    """Host pids (not zombies) whose executable is the file at path, by
    device and inode: a probe bound into sandboxes shows its sandbox path
    in argv, but /proc/PID/exe still leads to this build's own file, not to
    another checkout's probe run by another suite on the same host."""
    st = os.stat(path)
    found = []
    for pid in all_pids():
        try:
            ex = os.stat("/proc/%d/exe" % pid)
        except OSError:
            continue  # gone, a kernel thread, or not ours to read
        if (ex.st_dev, ex.st_ino) != (st.st_dev, st.st_ino):
            continue
        stat = proc_read(pid, "stat") or b""
        if stat.rsplit(b")", 1)[-1].split()[:1] != [b"Z"]:
            found.append(pid)
    return found


def procs_matching(tag):
    """Host pids of sandbox processes carrying tag: the probe (argv[0] is its
    in-sandbox path) with tag in its argv, or any process whose comm is tag.
    airlock's own argv also contains the tag, so it is not matched. Zombies
    are ignored: they hold nothing and are about to be reaped."""
    tag_b = tag.encode()
    found = []
    for pid in all_pids():
        if pid == os.getpid():
            continue
        cmdline = proc_read(pid, "cmdline") or b""
        comm = (proc_read(pid, "comm") or b"").rstrip(b"\n")
        in_sandbox = cmdline.split(b"\0", 1)[0] == PROBE_IN.encode() and tag_b in cmdline
        if in_sandbox or comm == tag_b[:15]:
            stat = proc_read(pid, "stat") or b""
            state = stat.rsplit(b")", 1)[-1].split()[:1]
            if state == [b"Z"]:
                continue
            found.append(pid)
    return found


def children_of(pid):
    kids = []
    for p in all_pids():
        stat = proc_read(p, "stat")
        if not stat:
            continue
        fields = stat.rsplit(b")", 1)[-1].split()
        if len(fields) > 1 and int(fields[1]) == pid and fields[0] != b"Z":
            kids.append(p)
    return kids


def status_ids(pid):
    """(uids, gids) lists from /proc/PID/status."""
    st = (proc_read(pid, "status") or b"").decode()
    uids = gids = None
    for line in st.splitlines():
        if line.startswith("Uid:"):
            uids = [int(x) for x in line.split()[1:]]
        if line.startswith("Gid:"):
            gids = [int(x) for x in line.split()[1:]]
    return uids, gids


def signal_pending(pid, sig):
    """Whether sig is pending for pid (/proc/PID/status SigPnd or ShdPnd):
    sent but not yet delivered or read from a signalfd. Two of one signal
    sent while the first is still pending are one: wait for this to be
    false before sending the second."""
    for line in (proc_read(pid, "status") or b"").splitlines():
        if line.startswith((b"SigPnd:", b"ShdPnd:")) and int(line.split()[1], 16) >> (sig - 1) & 1:
            return True
    return False


class LoopbackApi:
    """The tests' API: an HTTP server on the host's 127.0.0.1 at a port the
    kernel picks (port), in a thread of its own while the `with` lasts.
    Every GET is answered 200 with "api-answer-marker" and noted in hits as
    (its Host header, its path)."""

    def __init__(self):
        import http.server
        import threading
        hits = self.hits = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                hits.append((self.headers.get("Host"), self.path))
                body = b"api-answer-marker\n"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.srv.server_address[1]
        self.thread = threading.Thread(target=self.srv.serve_forever, daemon=True)

    def paths(self):
        return [p for _, p in self.hits]

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.srv.shutdown()
        self.srv.server_close()


def wait_for(pred, timeout, step=0.02):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v or time.monotonic() > deadline:
            return v
        time.sleep(step)


def sha256_file(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def tag(prefix="al"):
    return "%s%s" % (prefix, secrets.token_hex(5))


# Every run marker a script handed out with new_marker(): airlock and the
# sandbox's init carry it in argv, so it finds what a run left running.
MARKERS = []


def new_marker(prefix):
    m = tag(prefix)
    MARKERS.append(m)
    return m


class TempDir:
    """A host temp dir, world-traversable (mode given), removed on exit."""

    def __init__(self, mode=0o755, prefix="airlock-e2e-"):
        self.mode = mode
        self.prefix = prefix

    def __enter__(self):
        # A backend that shows inputs at their host path (AT_HOST_PATHS)
        # cannot show one under /tmp, its sandbox's scratch: there the dirs
        # are made in /var/lib.
        self.path = tempfile.mkdtemp(prefix=self.prefix,
                                     dir="/var/lib" if AT_HOST_PATHS else None)
        os.chmod(self.path, self.mode)
        return self.path

    def __exit__(self, *exc):
        shutil.rmtree(self.path, ignore_errors=True)


def write_file(path, data, mode=0o644):
    with open(path, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)
    os.chmod(path, mode)
    return path


def read_line_with_timeout(stream, timeout):
    """Read one line from a pipe, or None after timeout seconds."""
    buf = b""
    deadline = time.monotonic() + timeout
    fd = stream.fileno()
    while not buf.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        r, _, _ = select.select([fd], [], [], left)
        if not r:
            return None
        ch = os.read(fd, 1)
        if not ch:
            return buf or None
        buf += ch
    return buf


# ---- run cgroups (shared by run_limits.py and bench/soak.py) ----------------

CG_ROOT = "/sys/fs/cgroup"
V1_CONTROLLERS = ("memory", "pids", "cpu", "cpuacct")


def own_cgroups(pid="self"):
    """{controller: path} from /proc/PID/cgroup; "" is the v2 entry."""
    own = {}
    with open("/proc/%s/cgroup" % pid) as f:
        for line in f:
            parts = line.rstrip("\n").split(":", 2)
            if len(parts) != 3:
                continue
            for c in parts[1].split(",") if parts[1] else [""]:
                own[c] = parts[2]
    return own


def _under(mount, path):
    return mount + ("" if path == "/" else path)


def run_cgroup_bases(pid="self"):
    """{hierarchy: base dir} where an airlock started by PID (default: us)
    puts its run cgroups, <own cgroup>/airlock, computed as airlock does:
    v2 when a v2 mount offers memory and pids to us, else one base per v1
    hierarchy among memory, pids, cpu and cpuacct (co-mounted ones once)."""
    own = own_cgroups(pid)
    for mount in (CG_ROOT, CG_ROOT + "/unified"):
        if "" not in own or not os.path.exists(mount + "/cgroup.controllers"):
            continue
        d = _under(mount, own[""])
        try:
            with open(d + "/cgroup.controllers") as f:
                words = f.read().split()
        except OSError:
            continue
        if "memory" in words and "pids" in words:
            return {"v2": d + "/airlock"}
    bases, seen = {}, set()
    for c in V1_CONTROLLERS:
        mount = "%s/%s" % (CG_ROOT, c)
        if c not in own or not os.path.isdir(mount):
            continue
        real = os.path.realpath(mount)
        if real in seen:
            continue
        seen.add(real)
        bases[c] = _under(real, own[c]) + "/airlock"
    return bases


def run_cgroup_dirs(bases=None):
    """Every run cgroup dir (<base>/<pid>-<starttime>-<n>) now present."""
    dirs = set()
    for base in (bases or run_cgroup_bases()).values():
        try:
            names = os.listdir(base)
        except OSError:
            continue
        for n in names:
            if os.path.isdir(os.path.join(base, n)):
                dirs.add(os.path.join(base, n))
    return dirs


def pid_starttime(pid):
    stat = proc_read(pid, "stat")
    if not stat:
        return None
    fields = stat.rsplit(b")", 1)[-1].split()
    return int(fields[19]) if len(fields) > 19 else None


def cgroup_supervisor(path):
    """(pid, starttime) from a run cgroup dir's name, or None."""
    parts = os.path.basename(path).split("-")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        return None
    return int(parts[0]), int(parts[1])


def cgroup_is_stale(path):
    """True when the airlock that made this run cgroup is gone."""
    sup = cgroup_supervisor(path)
    return sup is not None and pid_starttime(sup[0]) != sup[1]


def procs_with_marker(marker, exclude=()):
    """Host pids (not zombies, not us, not in exclude) whose argv contains
    marker: the airlock supervisor, the sandbox's init (a clone of airlock,
    same argv) and any command process that carries it."""
    m = marker.encode()
    found = []
    for pid in all_pids():
        if pid == os.getpid() or pid in exclude:
            continue
        if m in (proc_read(pid, "cmdline") or b""):
            stat = proc_read(pid, "stat") or b""
            if stat.rsplit(b")", 1)[-1].split()[:1] == [b"Z"]:
                continue
            found.append(pid)
    return found


# ---- starting airlock in the background --------------------------------------

# (pid, starttime) of every airlock this script started with start(): a run
# cgroup dir is named <supervisor pid>-<its starttime>-<n>, so these name the
# dirs our runs made (and only those: other airlocks may run on this host at
# the same time, and their gc may clear stale dirs, ours included).
STARTED = set()


def start(argv, user=None, cwd=None, stdout=subprocess.PIPE):
    """Start argv (as user, through runuser) in its own session; stdin is
    /dev/null, stderr a pipe. Remembers it in STARTED."""
    if user:
        argv = ["runuser", "-u", user, "--"] + argv
    argv = with_backend(argv)
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=stdout,
                         stderr=subprocess.PIPE, cwd=cwd, start_new_session=True)
    STARTED.add((p.pid, pid_starttime(p.pid)))
    return p


def ours(cgroup_dir):
    """Whether a run cgroup dir was made by an airlock this script started."""
    return cgroup_supervisor(cgroup_dir) in STARTED


def finish(p, argv, t0, timeout):
    """Wait for a start()ed process; kill it and fail if it takes longer
    than timeout seconds."""
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_pid(p.pid)
        out, err = p.communicate()
        res = Result(argv, p.returncode, out or b"", err or b"", time.monotonic() - t0)
        raise AssertionError("airlock did not finish within %ss; killed it\n%s"
                             % (timeout, res.describe()))
    return Result(argv, p.returncode, out or b"", err or b"", time.monotonic() - t0)


def read_outputs(d):
    """The result record (d/result.json) and audit events (d/audit.jsonl)
    of a run, None and [] where missing."""
    record, events = None, []
    rp, ap = os.path.join(d, "result.json"), os.path.join(d, "audit.jsonl")
    if os.path.exists(rp):
        with open(rp) as f:
            record = json.load(f)
    if os.path.exists(ap):
        with open(ap) as f:
            events = [json.loads(line) for line in f if line.strip()]
    return record, events


class ThrowawayUser:
    """A new local user for the duration of a with block (needs root,
    useradd and runuser); raises Skip when it cannot be made, or when the
    user may not create user namespaces. .name and .uid are set."""

    def __init__(self, prefix="airlock-t-"):
        self.name = "%s%s" % (prefix, secrets.token_hex(3))
        self.created = False

    def __enter__(self):
        import pwd
        if not IS_ROOT:
            raise Skip("not root: cannot create a throwaway user")
        if not shutil.which("useradd") or not shutil.which("runuser"):
            raise Skip("useradd/runuser not available")
        r = subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", self.name],
                           capture_output=True)
        if r.returncode != 0:
            raise Skip("useradd failed: %s" % r.stderr.decode().strip())
        self.created = True
        self.uid = pwd.getpwnam(self.name).pw_uid
        try:
            r = subprocess.run(["runuser", "-u", self.name, "--", "unshare", "-U", "true"],
                               capture_output=True)
            if r.returncode != 0:
                raise Skip("unprivileged user namespaces are not allowed here: %s"
                           % r.stderr.decode().strip())
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        if self.created:
            subprocess.run(["userdel", "-r", self.name], capture_output=True)
            subprocess.run(["userdel", self.name], capture_output=True)
            self.created = False


# ---- TAP ---------------------------------------------------------------------

class Suite:
    """Registered cases, run in order, reported as TAP."""

    def __init__(self):
        self.cases = []

    def case(self, fn):
        self.cases.append((fn.__name__, fn))
        return fn

    def add(self, name, fn):
        self.cases.append((name, fn))

    def run(self, env, only=None):
        own_mount_ns()
        cases = [c for c in self.cases if not only or any(o in c[0] for o in only)]
        if BACKEND:
            try:
                facts = backend_facts(env)
            except (AssertionError, OSError, ValueError, subprocess.SubprocessError) as err:
                print("Bail out! %s" % str(err).splitlines()[0], flush=True)
                return 1
            if not facts.get("usable"):
                print("1..0 # SKIP backend %s is not usable here: %s"
                      % (BACKEND, facts.get("why", "(no reason given)")), flush=True)
                return 0
            cases = [c for c in cases if getattr(c[1], "per_backend", False)]
        cases.append(("nothing_left_behind", self.nothing_left_behind))
        print("1..%d" % len(cases), flush=True)
        if BACKEND:
            diag("backend %s: the %d per-backend cases" % (BACKEND, len(cases) - 1))
        failed = 0
        self.mounts_before = host_mount_count()
        for i, (name, fn) in enumerate(cases, 1):
            t0 = time.monotonic()
            try:
                require(env, *getattr(fn, "needs", ()))
                fn(env)
            except Skip as e:
                print("ok %d - %s # SKIP %s" % (i, name, e), flush=True)
                continue
            except AssertionError as e:
                failed += 1
                print("not ok %d - %s" % (i, name), flush=True)
                diag(str(e))  # first: the line a CI log's tail shows (scripts/tally.py)
                diag(fn.__doc__)
                continue
            except Exception:  # a bug in the test or an unexpected host state
                failed += 1
                print("not ok %d - %s" % (i, name), flush=True)
                diag(traceback.format_exc().rstrip().splitlines()[-1])
                diag(traceback.format_exc())
                diag(fn.__doc__)
                continue
            print("ok %d - %s (%.2fs)" % (i, name, time.monotonic() - t0), flush=True)
        return 1 if failed else 0

    def nothing_left_behind(self, env):
        """After all cases: no child process of the test runner, no process
        anywhere on the host running this build's probe (the one our runs
        bound in; another suite's probe on the same host is another file),
        and the script's mount table (see own_mount_ns()) has as many
        entries as before the first case."""
        kids = children_of(os.getpid())
        expect(not kids, "child processes of the test remain: %s" % kids)
        stray = procs_running(env.probe)
        expect(not stray, "sandbox processes running our probe remain on the host: %s" % stray)
        after = host_mount_count()
        expect(after == self.mounts_before, "host mount count changed during the suite: %d -> %d"
               % (self.mounts_before, after))
        check_slots_reclaimed(env)


def dead_slots():
    """Host id slot files (IDS_DIR/SLOT) whose airlock, one this script
    started, is gone: left by a killed airlock for `airlock gc`. Other
    airlocks' slots are not judged: a killed run of another suite keeps its
    slot while its processes live, which is right and none of our doing."""
    dead = []
    try:
        names = os.listdir(IDS_DIR)
    except OSError:
        return dead
    for n in names:
        if not n.isdigit():
            continue
        try:
            with open(os.path.join(IDS_DIR, n)) as f:
                pid, start = f.read().split()[:2]
        except (OSError, ValueError):
            continue
        if (int(pid), int(start)) not in SPAWNED:
            continue
        st = proc_read(int(pid), "stat")
        fields = st.rsplit(b")", 1)[1].split() if st else []
        # A zombie airlock (its parent gone, host pid 1 not yet reaping) is dead.
        alive = fields and fields[0] != b"Z" and fields[19].decode() == start
        if not alive:
            dead.append(n)
    return dead


def check_slots_reclaimed(env):
    """Slots of killed airlocks are taken back by `airlock gc`; none is left
    after it (slots of live runs, ours or another airlock's, are not judged)."""
    if not IS_ROOT or not dead_slots():
        return

    def gc():
        r = subprocess.run([env.airlock, "gc"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=30)
        expect(r.returncode == 0, "airlock gc exited %d: %s" % (r.returncode, r.stderr))
        return not dead_slots()
    # gc rightly keeps a slot while a killed run's orphaned init is a zombie
    # with its ids (host pid 1 reaps it, in a container within a second or so).
    expect(wait_for(gc, 10, step=0.5),
           "host id slots of dead airlocks remain after gc: %s" % dead_slots())


class MarkedSuite(Suite):
    """A suite whose runs are start()ed with a new_marker() each."""

    def nothing_left_behind(self, env):
        """After all cases, only what this script is answerable for (other
        airlocks may run on the same host): no child process of the test, no
        process carrying any marker of this script's runs, no run cgroup dir
        made by an airlock this script started, and as many host mounts as
        before the first case."""
        kids = children_of(os.getpid())
        expect(not kids, "child processes of the test remain: %s" % kids)
        left = {m: procs_with_marker(m) for m in MARKERS}
        left = {m: p for m, p in left.items() if p}
        expect(not left, "processes of the runs remain on the host: %s" % left)
        dirs = sorted(d for d in run_cgroup_dirs() if ours(d))
        expect(not dirs, "run cgroup dirs of our runs remain: %s" % dirs)
        after = host_mount_count()
        expect(after == self.mounts_before, "host mount count changed during the suite: %d -> %d"
               % (self.mounts_before, after))
        check_slots_reclaimed(env)


def diag(text):
    if not text:
        return
    import textwrap
    for line in textwrap.dedent(text).strip("\n").splitlines():
        print("# " + line, flush=True)


def preflight(env):
    """Bail out unless a sandboxed probe reports itself confined (seccomp
    filter, no_new_privs, uid 1000). Used by the security suite, whose
    attacks must never run unconfined."""
    try:
        res = env.probe_run("caps")
        ids = env.probe_run("id")
    except AssertionError as err:
        return "airlock did not run the probe: %s" % err
    caps = res.text.replace("\t", "")
    confined = res.rc == 0 and "Seccomp:2" in caps and "NoNewPrivs:1" in caps
    if not confined and res.rc == 0 and "CapEff:0000000000000000" in caps:
        # gvisor: the probe's system calls reach a second kernel (the
        # sentry), whose /proc/self/status has no seccomp of the host's;
        # that kernel answering /proc/version instead of the host's, with
        # no capability, is what confined means there.
        with open("/proc/version") as f:
            host_version = f.read().strip()
        ver = env.probe_run("read", "/proc/version")
        confined = ver.rc == 0 and host_version not in ver.text and "Linux" in ver.text
    if not confined:
        return "the probe is not confined:\n%s" % res.describe()
    # The process backend runs the command as the run's own host uid (the
    # slot pool's sandbox 1000), never root.
    uid = kv(ids.text).get("uid", "")
    if ids.rc != 0 or not (uid == str(SANDBOX_UID) or
                           (lacks("hides_processes") and uid.isdigit() and in_pool_user(int(uid)))):
        return "the probe does not run as uid %d:\n%s" % (SANDBOX_UID, ids.describe())
    return None


def own_mount_ns():
    """As root, go on in a mount namespace of our own, private: mounts and
    unmounts made elsewhere on the host after this point (another suite's
    ramfs, a user's own) are not seen here, while a mount that an airlock
    we start leaked into the namespace it was started from still is. The
    checks of the mount table then count only what this script and its
    airlocks did. Not root (or where it cannot be made) nothing is done and
    those checks see the host's table."""
    if not IS_ROOT:
        return
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    clone_newns, ms_rec, ms_private = 0x20000, 16384, 1 << 18
    if libc.unshare(clone_newns) != 0:
        diag("no mount namespace of our own (%s): mount checks see the host's"
             % os.strerror(ctypes.get_errno()))
        return
    if libc.mount(None, b"/", None, ms_rec | ms_private, None) != 0:
        raise OSError(ctypes.get_errno(), "making our mount namespace private")


# Prefixes of the temporary files and directories this project's tests and
# scripts make in /tmp (other suites on the same host make them at any
# time), and the process backend's scratch (airlock-process.*, a tmpfs of
# each such run, which another suite may be running at the same time; the
# backend-process and e2e-process suites judge its removal). A native run
# makes nothing in the host's /tmp, so a new entry there with "airlock" in
# its name and none of these prefixes is a run's.
TEST_TMP_PREFIXES = ("airlock-e2e-", "airlock-pinned-", "airlock-compat-", "airlock-cred-",
                     "airlock-limits-", "airlock-tenants-", "airlock-sec-", "airlock-tls-",
                     "airlock-test-tls-", "airlock-slots-", "airlock-unit-",
                     "airlock-confine-", "airlock-demo", "airlock-process.")


def airlock_tmp_entries():
    """Names in /tmp with "airlock" in them that no test made (see
    TEST_TMP_PREFIXES)."""
    return {n for n in os.listdir("/tmp")
            if "airlock" in n and not n.startswith(TEST_TMP_PREFIXES)}


def main(suite, require_confinement=False):
    if len(sys.argv) < 3:
        print("usage: %s AIRLOCK PROBE [CASE-SUBSTRING...]" % sys.argv[0], file=sys.stderr)
        sys.exit(2)
    env = Env(sys.argv[1], sys.argv[2])
    if not os.access(env.airlock, os.X_OK):
        print("1..0 # SKIP airlock binary not found at %s" % env.airlock)
        sys.exit(0)
    if require_confinement:
        why = preflight(env)
        if why:
            print("Bail out! %s" % why.splitlines()[0], flush=True)
            diag(why)
            sys.exit(1)
    sys.exit(suite.run(env, only=sys.argv[3:]))


def multi(e, steps, opts=(), **kw):
    """Run several probe commands in one sandbox (through /bin/sh), for the
    e2e and security suites.

    steps is a list of (label, [probe args]). Returns (result, {label: output}).
    A probe that exits non-zero fails the case."""
    parts = []
    for label, args in steps:
        parts.append("echo '==%s'; %s %s || echo \"PROBE-FAILED rc=$?\""
                     % (label, PROBE_IN, " ".join(shquote(a) for a in args)))
    res = e.run(["/bin/sh", "-c", "; ".join(parts)], opts, **kw)
    expect_rc(res, 0)
    sections, cur = {}, None
    for line in res.text.splitlines():
        if line.startswith("==") and line[2:] in dict(steps):
            cur = line[2:]
            sections[cur] = []
        elif cur is not None:
            sections[cur].append(line)
    for label, _ in steps:
        expect(label in sections, "no output for step %s" % label, res)
        expect(not any(l.startswith("PROBE-FAILED") for l in sections[label]),
               "probe failed in step %s" % label, res)
    return res, {k: v for k, v in sections.items()}
