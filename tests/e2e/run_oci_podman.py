#!/usr/bin/python3
"""podman with an OCI runtime under test (TAP): airlock's runc-compatible
command line, or runc itself as the reference.

usage: run_oci_podman.py RUNTIME [NAME] [CASE-SUBSTRING...]

RUNTIME is the path podman gets as --runtime (airlock-runc, or runc); NAME
is how the messages call it (default: its file name). The cases that need
airlock's own promises (egress by annotation, its audit stream) run only
when `RUNTIME --version` says "airlock", and are skipped with that reason
otherwise.

Everything lives under one temporary directory removed at the end, even on
failure (tests/oci/images.py): the busybox and python roots made from this
host's files, imported into a private podman store (storage driver overlay,
its own containers.conf: default_ulimits of 1024 since root here lacks
CAP_SYS_RESOURCE, cgroupfs, events to a file, no network by default).
Every container is run with --network none, so podman hands the runtime a
config asking for a new, empty network namespace (no path).

Judged from the host: exit codes, podman inspect's State, the container's
cgroup files read through /proc/PID/cgroup of its process while it runs,
and after `rm` no mount, cgroup directory, process or runtime state of the
container. Bombs are bounded: the memory hog allocates at most 256 MiB,
the fork loop starts at most 100 sleeps.
"""

import json
import os
import pty
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import fcntl
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "oci"))

import images  # noqa: E402
from harness import LoopbackApi, Skip, Suite, children_of, expect, kill_pid, own_mount_ns, \
    wait_for  # noqa: E402

class PodmanSuite(Suite):
    def nothing_left_behind(self, env):
        """After all cases: no child process of the test, no trace of any
        container a case made (see nothing_left_after_rm), podman's store
        lists no container."""
        r = env.podman("ps", "--all", "--quiet")
        expect(not text(r).strip(), "podman still lists containers: %s" % text(r))
        def traces():
            return {c[:12]: t for c in env.made for t in [container_traces(env, c)] if t}
        wait_for(lambda: not traces(), 15, step=0.2)  # podman's cleanup, as above
        left = traces()
        expect(not left, "traces of the cases' containers remain: %s" % left)
        kids = [k for k in children_of(os.getpid())]
        expect(not kids, "child processes of the test remain: %s" % kids)


suite = PodmanSuite()
case = suite.case

BUSYBOX = "localhost/al-busybox"
PYTHON = "localhost/al-python"
# Where a runtime keeps its state when the engine passes no --root (podman
# 4.3's conmon passes none): each runtime's own default.
STATE_ROOTS = {"runc": "/run/runc", "crun": "/run/crun"}
# The audit events that say a connection was denied (docs/audit.md:
# net.connect, and net.dns for a name no rule allows), with "decision":
# "deny" and the host in "name".
DENY_EVENTS = ("net.connect", "net.dns")


class Env:
    """The runtime under test and the private store the cases share."""

    def __init__(self, runtime, name):
        self.runtime = os.path.abspath(runtime)
        self.name = name
        ver = subprocess.run([self.runtime, "--version"], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, timeout=30)
        self.version = ver.stdout.decode(errors="replace").strip()
        self.is_airlock = "airlock" in self.version.lower()
        self.base = tempfile.mkdtemp(prefix="airlock-e2e-oci-podman-")
        self.pod = images.Podman(os.path.join(self.base, "podman"), runtime=self.runtime)
        self.made = []  # ids of every container a case made, for the final checks
        self.state_root = STATE_ROOTS.get(os.path.basename(self.runtime))

    def setup(self):
        t0 = time.monotonic()
        bb = images.busybox_root(os.path.join(self.base, "busybox"))
        py = images.python_root(os.path.join(self.base, "python"))
        self.pod.import_root(bb, BUSYBOX)
        self.pod.import_root(py, PYTHON)
        return time.monotonic() - t0

    def podman(self, *args, timeout=120):
        return self.pod.run(*args, timeout=timeout)

    def close(self):
        self.pod.close()
        left = images.mounts_below(self.base)
        shutil.rmtree(self.base, ignore_errors=True)
        return left


def text(r):
    return r.stdout.decode(errors="replace")


def describe(r):
    return "command: %s\nexit: %d\nstdout: %r\nstderr: %r" % (
        " ".join(r.args), r.returncode, r.stdout[-1500:], r.stderr[-1500:])


def expect_rc(r, rc):
    expect(r.returncode == rc, "expected exit %d, got %d\n%s" % (rc, r.returncode, describe(r)))


def run_args(*args):
    """podman run's arguments every case gives: no network."""
    return ("run", "--network", "none") + args


def inspect(env, cid):
    r = env.podman("inspect", "--type", "container", cid)
    expect_rc(r, 0)
    return json.loads(r.stdout)[0]


def start_detached(env, image, *cmd, opts=()):
    """podman run -d; the container's full id (recorded for the final checks)."""
    r = env.podman(*run_args("-d", *opts, image, *cmd))
    expect_rc(r, 0)
    cid = text(r).strip().splitlines()[-1]
    env.made.append(cid)
    return cid


def cgroup_dir(pid, controller):
    """The host path of pid's cgroup of controller (v1), or its v2 cgroup."""
    with open("/proc/%d/cgroup" % pid) as f:
        lines = f.read().splitlines()
    for line in lines:
        _, ctrls, path = line.split(":", 2)
        if controller in ctrls.split(","):
            return "/sys/fs/cgroup/%s%s" % (controller, path)
    for line in lines:
        if line.startswith("0::"):
            return "/sys/fs/cgroup" + line[3:]
    raise AssertionError("pid %d has no %s cgroup: %s" % (pid, controller, lines))


def container_pid(env, cid):
    """A process of the container, from the runtime's own `ps --format
    json` (runc: its init; airlock: a process of its sandbox; the pid
    podman's inspect gives is airlock's supervisor, outside the sandbox's
    cgroup)."""
    r = subprocess.run([env.runtime, "ps", "--format", "json", cid], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=30)
    expect(r.returncode == 0, "%s ps: %s" % (env.runtime, r.stderr.decode(errors="replace")))
    pids = json.loads(r.stdout)
    expect(pids, "%s ps lists no process of %s" % (env.runtime, cid))
    return min(pids)


def limit_dir(pid, controller, files, unlimited):
    """The cgroup of pid that holds its limit: pid's own, or the nearest
    parent whose file (the first of files that exists there) is not
    unlimited (an exec's cgroup below the container's takes the
    container's limit from its parent). (dir, file, value)."""
    cg = cgroup_dir(pid, controller)
    top = "/sys/fs/cgroup/%s" % controller if "/%s/" % controller in cg + "/" else "/sys/fs/cgroup"
    while True:
        for name in files:
            path = os.path.join(cg, name)
            if os.path.exists(path):
                value = read(path)
                if value not in unlimited:
                    return cg, name, value
                break
        if cg.rstrip("/") == top or "/" not in cg.rstrip("/"):
            return cgroup_dir(pid, controller), files[0], None
        cg = os.path.dirname(cg.rstrip("/"))


def procs_below(cg):
    """The processes in cg and the cgroups below it."""
    procs = []
    for root, _, _ in os.walk(cg):
        try:
            procs += read(os.path.join(root, "cgroup.procs")).split()
        except OSError:
            pass
    return procs


def read(path):
    with open(path) as f:
        return f.read().strip()


def remove(env, cid):
    r = env.podman("rm", "--force", "--time", "0", cid)
    expect_rc(r, 0)


@case
def true_exits_0(env):
    """`podman run --rm IMAGE /bin/true` exits 0."""
    t0 = time.monotonic()
    r = env.podman(*run_args("--rm", BUSYBOX, "/bin/true"))
    expect_rc(r, 0)
    print("# %s: run --rm /bin/true took %.2fs" % (env.name, time.monotonic() - t0))


@case
def exit_code_returned(env):
    """`podman run --rm IMAGE sh -c 'exit 7'` exits 7, and the command's
    output reaches podman's stdout."""
    r = env.podman(*run_args("--rm", BUSYBOX, "sh", "-c", "echo out-marker; exit 7"))
    expect_rc(r, 7)
    expect(text(r).strip() == "out-marker", "output not relayed\n%s" % describe(r))


@case
def missing_command_fails(env):
    """A command that is not in the image fails the run with podman's 127
    (the runtime could not exec it), not 0."""
    r = env.podman(*run_args("--rm", BUSYBOX, "/no/such/binary"))
    expect(r.returncode in (126, 127), "expected 126/127, got %d\n%s" % (r.returncode, describe(r)))


@case
def detached_exec_stop_rm(env):
    """`run -d`, then `exec` (output and exit code), `stop` (the container's
    SIGTERM trap exits 0 and inspect says it exited 0), `rm` (inspect no
    longer finds it)."""
    cid = start_detached(env, BUSYBOX, "sh", "-c",
                         "trap 'exit 0' TERM; while :; do sleep 1 & wait; done")
    st = inspect(env, cid)["State"]
    expect(st["Running"] and st["Pid"] > 0, "not running after run -d: %s" % st)
    r = env.podman("exec", cid, "sh", "-c", "echo exec-marker; cat /etc/hostname")
    expect_rc(r, 0)
    expect(text(r).startswith("exec-marker\n"), "exec output wrong\n%s" % describe(r))
    r = env.podman("exec", cid, "sh", "-c", "exit 3")
    expect_rc(r, 3)
    r = env.podman("stop", "--time", "10", cid)
    expect_rc(r, 0)
    st = inspect(env, cid)["State"]
    expect(not st["Running"] and st["ExitCode"] == 0, "after stop: %s" % st)
    r = env.podman("rm", cid)
    expect_rc(r, 0)
    r = env.podman("inspect", "--type", "container", cid)
    expect(r.returncode != 0, "inspect still finds the container after rm\n%s" % describe(r))


HOG = ("import sys\n"
       "b = []\n"
       "for i in range(256):\n"
       "    b.append(bytearray(1 << 20)); b[-1][::4096] = b'x' * 256\n"
       "print('hog survived', flush=True)")


def oom_kills(cg):
    """How many OOM kills the memory cgroup cg and those below it have seen
    (v1's memory.oom_control, or v2's memory.events; airlock's execs each
    have a cgroup below the container's)."""
    total = 0
    for root, _, _ in os.walk(cg):
        name = "memory.oom_control" if os.path.exists(os.path.join(root, "memory.oom_control")) \
            else "memory.events"
        try:
            lines = read(os.path.join(root, name)).splitlines()
        except OSError:
            continue
        for line in lines:
            k, _, v = line.partition(" ")
            if k == "oom_kill":
                total += int(v)
    return total


@case
def memory_limit_enforced(env):
    """`--memory 64m --memory-swap 64m`: the container's memory cgroup holds
    that limit (read from the host while it runs, before the hog is told to
    start), and a hog of up to 256 MiB in 1 MiB steps run by the container's
    shell is killed by SIGKILL (the shell sees 137) and the cgroup counts an
    OOM kill. (The shell stays so that the cgroup can be read afterwards:
    podman 4.3's inspect does not say OOMKilled for runc on cgroup v1.)"""
    cid = start_detached(env, PYTHON, "sh", "-c",
                         "while [ ! -e /tmp/go ]; do sleep 0.05; done;"
                         " python3 -c \"$HOG\"; echo hog-rc=$?; sleep 300",
                         opts=("--memory", "64m", "--memory-swap", "64m", "--env", "HOG=" + HOG))
    try:
        pid = container_pid(env, cid)
        cg, limit_file, limit = limit_dir(pid, "memory", ("memory.limit_in_bytes", "memory.max"),
                                          ("max", "9223372036854771712"))
        expect(limit is not None and int(limit) == 64 << 20,
               "%s/%s is %s, not 64 MiB" % (cg, limit_file, limit))
        expect_rc(env.podman("exec", cid, "touch", "/tmp/go"), 0)  # the hog starts
        done = wait_for(lambda: "hog-rc=" in text(env.podman("logs", cid)), 60, step=0.2)
        logs = text(env.podman("logs", cid))
        expect(done, "the hog did not end within 60 s: %r" % logs)
        expect("hog survived" not in logs, "the hog got 256 MiB under a 64 MiB limit")
        expect("hog-rc=137" in logs, "the hog did not end by SIGKILL: %r" % logs)
        expect(oom_kills(cg) >= 1, "the memory cgroup %s counts no OOM kill" % cg)
    finally:
        remove(env, cid)


SIZE_UNITS = {"B": 1, "kB": 1000, "KB": 1000, "MB": 1000 ** 2, "GB": 1000 ** 3}


def human_bytes(v):
    """podman's "41.94MB" (decimal units) as a number of bytes."""
    m = re.match(r"^\s*([0-9.]+)\s*([kKMG]?B)\s*$", v)
    expect(m, "not a size: %r" % v)
    return float(m.group(1)) * SIZE_UNITS[m.group(2)]


def cgroups_path(env, cid):
    """The linux.cgroupsPath podman gave the runtime for container cid."""
    r = env.podman("inspect", "--type", "container", "--format", "{{.OCIConfigPath}}", cid)
    expect_rc(r, 0)
    with open(text(r).strip()) as f:
        path = json.load(f).get("linux", {}).get("cgroupsPath")
    expect(path and path.startswith("/"), "podman gave no cgroupsPath: %r" % path)
    return path


@case
def stats_show_container(env):
    """`podman stats --no-stream` on a running container whose shell has put
    40 MiB in /dev/shm under `--memory 64m`: it shows a memory usage of at
    least 40 MiB and the 64 MiB limit, and so does the container's cgroup
    at the cgroupsPath podman gave (memory.usage_in_bytes,
    memory.limit_in_bytes; v2: memory.current, memory.max). (podman 4.3
    reads the cgroup of the state's pid: with airlock, its supervisor, which
    holds only a few MiB of its own.)"""
    cid = start_detached(env, BUSYBOX, "sh", "-c",
                         "head -c 41943040 /dev/zero > /dev/shm/fill && echo filled;"
                         " sleep 300", opts=("--memory", "64m", "--memory-swap", "64m"))
    try:
        filled = wait_for(lambda: "filled" in text(env.podman("logs", cid)), 30, step=0.2)
        expect(filled, "the shell did not fill /dev/shm: %r" % text(env.podman("logs", cid)))
        path = cgroups_path(env, cid)
        v1 = os.path.isdir("/sys/fs/cgroup/memory")
        cg = "/sys/fs/cgroup/memory" + path if v1 else "/sys/fs/cgroup" + path
        usage = int(read(os.path.join(cg, "memory.usage_in_bytes" if v1 else "memory.current")))
        limit = int(read(os.path.join(cg, "memory.limit_in_bytes" if v1 else "memory.max")))
        expect(usage >= 40 << 20 and limit == 64 << 20,
               "the cgroup at %s: usage %d, limit %d" % (cg, usage, limit))
        r = env.podman("stats", "--no-stream", "--format", "json", cid)
        expect_rc(r, 0)
        st = json.loads(r.stdout)[0]
        used, _, lim = st["mem_usage"].partition("/")
        expect(human_bytes(used) >= 40 << 20,
               "podman stats shows %s used, not the container's 40 MiB and more: %s"
               % (used.strip(), st))
        expect(abs(human_bytes(lim) - (64 << 20)) < 100000,
               "podman stats shows a limit of %s, not 64 MiB: %s" % (lim.strip(), st))
        print("# %s: podman stats: %s, pids %s" % (env.name, st["mem_usage"], st["pids"]))
    finally:
        remove(env, cid)


FORKER = ("import os, time\n"
          "ok = failed = 0\n"
          "for i in range(100):\n"
          "    try:\n"
          "        pid = os.fork()\n"
          "    except OSError:\n"
          "        failed += 1\n"
          "        continue\n"
          "    if pid == 0:\n"
          "        time.sleep(300)\n"
          "        os._exit(0)\n"
          "    ok += 1\n"
          "print('forks', ok, failed, flush=True)\n"
          "time.sleep(300)")


@case
def pids_limit_enforced(env):
    """`--pids-limit 32`: a loop trying 100 forks stops at the limit. The
    loop itself says it made 28 to 31 children and failed the rest; from
    the host: the pids cgroup's pids.max is 32, its pids.current and the
    processes in it at most 32."""
    cid = start_detached(env, PYTHON, "python3", "-c", FORKER, opts=("--pids-limit", "32"))
    try:
        pid = container_pid(env, cid)
        cg, _, _ = limit_dir(pid, "pids", ("pids.max",), ("max",))
        done = wait_for(lambda: "forks" in text(env.podman("logs", cid)), 30, step=0.2)
        logs = text(env.podman("logs", cid))
        expect(done, "the fork loop did not finish within 30 s: %r" % logs)
        ok, failed = map(int, logs.split("forks", 1)[1].split()[:2])
        pmax, cur = read(os.path.join(cg, "pids.max")), int(read(os.path.join(cg, "pids.current")))
        procs = procs_below(cg)
    finally:
        remove(env, cid)
    expect(pmax == "32", "%s/pids.max is %s, not 32" % (cg, pmax))
    expect(28 <= ok <= 31 and ok + failed == 100, "forks made %d, failed %d (limit 32)"
           % (ok, failed))
    expect(cur <= 32, "pids.current is %d (limit 32)" % cur)
    expect(len(procs) <= 32, "%d processes in the cgroup (limit 32)" % len(procs))


def set_size(fd, rows, cols):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def run_in_pty(env, args, rows=37, cols=101, timeout=60):
    """podman ARGS on the slave of a pty of ours (its stdin, stdout and
    stderr; podman the session leader), sized rows x cols; returns (exit
    code, everything read from the master)."""
    master, slave = pty.openpty()
    set_size(slave, rows, cols)

    def own_tty():
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    p = subprocess.Popen(env.pod.argv(*args), stdin=slave, stdout=slave, stderr=slave,
                         env=env.pod.env, preexec_fn=own_tty)
    os.close(slave)
    out = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    data = os.read(master, 4096)
                except OSError:  # EIO: every slave closed
                    break
                if not data:
                    break
                out += data
            elif p.poll() is not None:
                break
        else:
            kill_pid(p.pid)
            raise AssertionError("podman -it did not end within %ds; output %r" % (timeout, out))
        return p.wait(30), out
    finally:
        os.close(master)


@case
def interactive_terminal(env):
    """`podman run --rm -it` through a pty: the command's stdin is a
    terminal (`tty` prints /dev/pts/N), it has the outer terminal's size
    (`stty size`), and what is typed reaches it."""
    rc, out = run_in_pty(env, run_args("--rm", "-it", BUSYBOX, "sh", "-c",
                                       "tty; stty size; echo status=$?"))
    s = out.decode(errors="replace").replace("\r", "")
    expect(rc == 0, "podman -it exited %d; output %r" % (rc, s))
    expect(re.search(r"^/dev/pts/\d+$", s, re.M), "tty did not print /dev/pts/N: %r" % s)
    expect(re.search(r"^37 101$", s, re.M), "stty size did not say 37 101: %r" % s)


def container_traces(env, cid):
    """What of container cid is still on the host: mounts naming it, cgroup
    directories named after it, processes with it in their command line,
    the runtime's state directory of it."""
    found = []
    with open("/proc/self/mountinfo") as f:
        found += ["mount " + l.split()[4] for l in f if cid in l]
    for ctrl in os.listdir("/sys/fs/cgroup"):
        top = os.path.join("/sys/fs/cgroup", ctrl)
        if not os.path.isdir(top) or os.path.islink(top):
            continue
        for parent in (top, os.path.join(top, "libpod_parent"), os.path.join(top, "machine.slice")):
            try:
                found += ["cgroup " + os.path.join(parent, n) for n in os.listdir(parent)
                          if cid in n]
            except OSError:
                pass
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open("/proc/%s/cmdline" % p, "rb") as f:
                    cmd = f.read()
                if cid.encode() in cmd:
                    found.append("process %s: %s" % (p, cmd.replace(b"\0", b" ")[:300]))
            except OSError:
                pass
    if env.state_root and os.path.exists(os.path.join(env.state_root, cid)):
        found.append("runtime state " + os.path.join(env.state_root, cid))
    r = subprocess.run([env.runtime, "state", cid], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=30)
    if r.returncode == 0:
        found.append("`%s state` still answers: %s" % (env.name, r.stdout[:200]))
    return found


@case
def nothing_left_after_rm(env):
    """A container run -d, exec'd into and rm -f'd leaves nothing: no mount,
    cgroup (its cgroup at the cgroupsPath podman gave, there while it runs,
    included), process (conmon and podman's cleanup included) or runtime
    state naming its id, and `RUNTIME state ID` fails."""
    cid = start_detached(env, BUSYBOX, "sleep", "300", opts=("--memory", "64m",
                                                             "--pids-limit", "32"))
    r = env.podman("exec", cid, "true")
    expect_rc(r, 0)
    traces = container_traces(env, cid)
    expect(traces, "a running container shows no trace (the check is blind)")
    # Its cgroup at the cgroupsPath podman gave: there while it runs.
    path = cgroups_path(env, cid)
    at_path = [t for t in traces if t.startswith("cgroup ") and t.endswith(path)]
    expect(at_path, "no cgroup at the cgroupsPath %s among the traces: %s" % (path, traces))
    remove(env, cid)
    # conmon runs podman's exit command (`podman container cleanup`) when the
    # container ends, beside the rm: it may outlive rm by a moment.
    wait_for(lambda: not container_traces(env, cid), 15, step=0.2)
    left = container_traces(env, cid)
    expect(not left, "left 15 s after rm: %s" % left)


def expect_audit_denied(audit_path, host):
    """The audit stream at audit_path (JSON lines) holds a denial of host: an
    event of DENY_EVENTS with "decision": "deny" and "name" host."""
    try:
        with open(audit_path) as f:
            events = [json.loads(l) for l in f if l.strip()]
    except OSError as err:
        raise AssertionError("no audit stream at %s: %s" % (audit_path, err))
    denied = [e for e in events if e.get("event") in DENY_EVENTS
              and e.get("decision") == "deny" and e.get("name") == host]
    expect(denied, "the audit stream has no denial of %s; events: %s"
           % (host, [(e.get("event"), e.get("name"), e.get("decision")) for e in events]))


@case
def annotation_allows_loopback_api(env):
    """airlock only: `io.airlock.network.allow=api.test:PORT` with
    `io.airlock.network.hosts=api.test=127.0.0.1` lets the container reach
    the test's HTTP server on the host's 127.0.0.1:PORT as
    http://api.test:PORT/; denied.test (not allowed) gets nothing and the
    server sees no request for it; the audit stream (io.airlock.audit) says
    denied.test was denied."""
    if not env.is_airlock:
        raise Skip("%s is not airlock (--version: %s): egress annotations are airlock's"
                   % (env.name, env.version.splitlines()[0] if env.version else "?"))
    egress_by_annotation(env, "egress-test")


def egress_by_annotation(env, tag, *opts):
    """The annotation case's run and checks, with opts added to podman run
    and the audit stream named tag."""
    audit_dir = os.path.join(env.base, "audit")
    os.makedirs(audit_dir, exist_ok=True)
    audit = os.path.join(audit_dir, "%s.jsonl" % tag)
    with LoopbackApi() as api:
        port = api.port
        code = ("import urllib.request\n"
                "print(urllib.request.urlopen('http://api.test:%d/ok', timeout=10).read().decode(), end='')\n"
                "try:\n"
                "    urllib.request.urlopen('http://denied.test:%d/no', timeout=10)\n"
                "    print('denied-host-reached')\n"
                "except Exception as e:\n"
                "    print('denied-host-failed', type(e).__name__)\n" % (port, port))
        r = env.podman("--runtime-flag", "audit-dir=%s" % audit_dir, *run_args(
            "--rm",
            "--annotation", "io.airlock.network.allow=api.test:%d" % port,
            "--annotation", "io.airlock.network.hosts=api.test=127.0.0.1",
            "--annotation", "io.airlock.audit=%s" % tag, *opts,
            PYTHON, "python3", "-c", code), timeout=180)
    expect_rc(r, 0)
    out = text(r)
    expect("api-answer-marker" in out, "the allowed API did not answer\n%s" % describe(r))
    expect("denied-host-failed" in out, "the denied host was reached\n%s" % describe(r))
    expect("/no" not in api.paths(), "the server got the denied host's request: %s" % api.hits)
    expect_audit_denied(audit, "denied.test")
    # The run's record, kept beside the audit stream once podman removed
    # the container (--rm): how it ended and what the gateway refused.
    def records():
        return [n for n in os.listdir(audit_dir)
                if n.startswith(tag + ".") and n.endswith(".result.json")]
    expect(wait_for(lambda: records(), 15, step=0.2),
           "no run record %s.ID.result.json in %s after rm" % (tag, audit_dir))
    with open(os.path.join(audit_dir, records()[0])) as f:
        rec = json.load(f)
    expect(rec.get("reason") and rec.get("network"), "the record says too little: %s" % rec)



# --- io.airlock.backend=microvm: the container's root in a guest ---------

MICROVM = ("--annotation", "io.airlock.backend=microvm")
VM_ROOTS = "/var/lib/airlock/vm-run"  # guest-root.c's root images


def require_microvm(env):
    """Skip unless the runtime is airlock and its microvm layer is usable
    here (`airlock backends --json`: QEMU, a guest kernel, the agent)."""
    if not env.is_airlock:
        raise Skip("%s is not airlock: io.airlock.backend is airlock's" % env.name)
    r = subprocess.run([env.runtime.replace("airlock-runc", "airlock"), "backends", "--json"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    for b in json.loads(r.stdout or b"{}").get("backends", []):
        if b.get("name") == "microvm":
            if not b.get("usable"):
                raise Skip("the microvm backend is not usable here: %s" % b.get("why"))
            return
    raise Skip("this airlock has no microvm backend")


def root_images():
    try:
        return sorted(n for n in os.listdir(VM_ROOTS) if n.startswith("root-"))
    except FileNotFoundError:
        return []


@case
def microvm_run_rm(env):
    """`io.airlock.backend=microvm`: `run --rm` runs the image's own files in
    a guest (its kernel's command line carries airlock.guest=1), as the
    config's user (uid 0) with no capability in any set, on a root it may
    write; the config's seccomp program holds there (podman's
    `--security-opt seccomp=` profile failing mkdir with EPERM while the
    rest runs); the command's exit code (7) and output come back;
    afterwards no root image of the container is left on the host."""
    require_microvm(env)
    prof = os.path.join(env.base, "no-mkdir.json")
    with open(prof, "w") as f:
        json.dump({"defaultAction": "SCMP_ACT_ALLOW",
                   "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO",
                                 "errnoRet": 1}]}, f)
    r = env.podman(*run_args("--rm", "--security-opt", "seccomp=" + prof, *MICROVM, BUSYBOX,
                             "sh", "-c",
                             "id -u; grep -c airlock.guest=1 /proc/cmdline;"
                             " grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status;"
                             " echo written > /etc/marker && cat /etc/marker;"
                             " mkdir /tmp/d 2>/dev/null || echo mkdir-refused; exit 7"),
                   timeout=180)
    expect_rc(r, 7)
    out = text(r).split()
    expect(out[:2] == ["0", "1"], "not uid 0 in a guest\n%s" % describe(r))
    caps = text(r).splitlines()[2:7]
    expect(len(caps) == 5 and all(c.split()[1] == "0" * 16 for c in caps),
           "capabilities left\n%s" % describe(r))
    expect("written" in out, "the root was not writable\n%s" % describe(r))
    expect(out[-1] == "mkdir-refused", "the config's seccomp did not hold\n%s" % describe(r))
    expect(not root_images(), "root images left in %s: %s" % (VM_ROOTS, root_images()))


@case
def microvm_writes_stay_in_guest(env):
    """A detached microvm container: an exec's write to /etc is seen by the
    next exec (one guest, one overlay) but never reaches the image's files
    on the host (`podman mount`); exec exit codes, stop (SIGTERM trapped,
    exit 0) and rm work as under native."""
    require_microvm(env)
    cid = start_detached(env, BUSYBOX, "sh", "-c",
                         "trap 'exit 0' TERM; while :; do sleep 1 & wait; done", opts=MICROVM)
    try:
        r = env.podman("exec", cid, "sh", "-c", "echo guest-marker > /etc/guest-marker")
        expect_rc(r, 0)
        r = env.podman("exec", cid, "cat", "/etc/guest-marker")
        expect(text(r).strip() == "guest-marker", "the next exec lost the write\n%s" % describe(r))
        r = env.podman("exec", cid, "sh", "-c", "exit 3")
        expect_rc(r, 3)
        r = env.podman("mount", cid)
        expect_rc(r, 0)
        merged = text(r).strip()
        expect(os.path.isdir(os.path.join(merged, "etc")), "podman mount gave %r" % merged)
        expect(not os.path.exists(os.path.join(merged, "etc", "guest-marker")),
               "the guest's write reached the host's root %s" % merged)
        env.podman("umount", cid)
        r = env.podman("stop", "--time", "20", cid)
        expect_rc(r, 0)
        st = inspect(env, cid)["State"]
        expect(not st["Running"] and st["ExitCode"] == 0, "after stop: %s" % st)
    finally:
        remove(env, cid)
    wait_for(lambda: not container_traces(env, cid), 15, step=0.2)
    expect(not container_traces(env, cid), "left after rm: %s" % container_traces(env, cid))
    expect(not root_images(), "root images left in %s: %s" % (VM_ROOTS, root_images()))


@case
def microvm_user_readonly_binds(env):
    """In a guest: `--user 1234:1234` runs as that user, who cannot write
    the image's root-owned /; `--read-only` makes / read-only (EROFS) with
    podman's /tmp still writable; a read-only bind of a host file and of a
    host directory shows their content and refuses writes; a writable bind
    of a host directory is refused naming the mount and the way out, and
    leaves nothing behind."""
    require_microvm(env)
    data = os.path.join(env.base, "bind-dir")
    os.makedirs(data, exist_ok=True)
    with open(os.path.join(data, "in-dir"), "w") as f:
        f.write("dir-content\n")
    one = os.path.join(env.base, "bind-file")
    with open(one, "w") as f:
        f.write("file-content\n")
    r = env.podman(*run_args("--rm", "--user", "1234:1234", "-v", "%s:/data/dir:ro" % data,
                             "-v", "%s:/data/file:ro" % one, *MICROVM, BUSYBOX, "sh", "-c",
                             "id -u; id -g; echo x > /x 2>/dev/null || echo write-denied;"
                             " cat /data/dir/in-dir /data/file;"
                             " echo x > /data/file 2>/dev/null || echo bind-ro"), timeout=180)
    expect_rc(r, 0)
    expect(text(r).split() == ["1234", "1234", "write-denied", "dir-content", "file-content",
                               "bind-ro"], "the user or the binds are wrong\n%s" % describe(r))
    r = env.podman(*run_args("--rm", "--read-only", *MICROVM, BUSYBOX, "sh", "-c",
                             "echo x > /x || echo root-ro; echo t > /tmp/t && cat /tmp/t"),
                   timeout=180)
    expect_rc(r, 0)
    expect("Read-only file system" in r.stderr.decode(errors="replace") + text(r)
           and "root-ro" in text(r), "--read-only's root was writable\n%s" % describe(r))
    expect(text(r).split()[-1] == "t", "/tmp not writable under --read-only\n%s" % describe(r))
    before = container_count(env)
    r = env.podman(*run_args("--rm", "-v", "%s:/data/dir" % data, *MICROVM, BUSYBOX, "true"),
                   timeout=180)
    err = r.stderr.decode(errors="replace")
    expect(r.returncode != 0 and "/data/dir" in err and "io.airlock.backend native" in err,
           "a writable host directory was not refused by name\n%s" % describe(r))
    expect(container_count(env) == before, "the refused container is still listed")
    expect(not root_images(), "root images left in %s: %s" % (VM_ROOTS, root_images()))


def container_count(env):
    return len(text(env.podman("ps", "--all", "--quiet")).split())


@case
def microvm_hostile_image(env):
    """An image whose /etc/hosts is a link to /proc/sys/kernel/domainname
    (a file of the guest's kernel the agent, root there, could write): the
    container sees podman's hosts file at /etc/hosts, and the kernel's
    domain name is untouched (the agent replaces the link, never writes
    through it). An image with a FIFO at /etc/hostname (podman binds its
    own there) fails at once rather than hang the guest's setup until the
    boot deadline, and the runtime's log says why (the agent's line and
    the VMM's)."""
    require_microvm(env)
    link_root = images.busybox_root(os.path.join(env.base, "hostile-link"))
    os.symlink("/proc/sys/kernel/domainname", os.path.join(link_root, "etc", "hosts"))
    link_img = env.pod.import_root(link_root, "localhost/al-hostile-link")
    r = env.podman(*run_args("--rm", *MICROVM, link_img, "sh", "-c",
                             "cat /proc/sys/kernel/domainname; grep -c localhost /etc/hosts;"
                             " [ -L /etc/hosts ] && echo still-a-link; true"), timeout=180)
    expect_rc(r, 0)
    out = text(r).split()
    expect(out[:1] == ["(none)"], "the kernel's domain name was written\n%s" % describe(r))
    expect(len(out) == 2 and int(out[1]) >= 1, "podman's hosts file is not at /etc/hosts\n%s"
           % describe(r))
    fifo_root = images.busybox_root(os.path.join(env.base, "hostile-fifo"))
    os.mkfifo(os.path.join(fifo_root, "etc", "hostname"))
    fifo_img = env.pod.import_root(fifo_root, "localhost/al-hostile-fifo")
    t0 = time.monotonic()
    r = env.podman(*run_args("--rm", *MICROVM, fifo_img, "true"), timeout=180)
    took = time.monotonic() - t0
    expect(r.returncode != 0, "a FIFO at /etc/hostname did not fail the run\n%s" % describe(r))
    expect(took < 60, "the FIFO held the guest's setup for %.0fs" % took)
    # Why, in the runtime's log (podman passes none: run the runtime itself
    # on a bundle of that root with a writable bind of a file there).
    bundle = os.path.join(env.base, "hostile-bundle")
    os.makedirs(bundle)
    r = subprocess.run([env.runtime, "spec", "--bundle", bundle], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    expect(r.returncode == 0, "spec failed: %s" % r.stderr)
    with open(os.path.join(bundle, "config.json")) as f:
        cfg = json.load(f)
    src = os.path.join(env.base, "hostile-hostname")
    with open(src, "w") as f:
        f.write("h\n")
    cfg["root"] = {"path": fifo_root, "readonly": False}
    cfg["process"]["args"] = ["true"]
    cfg["process"]["terminal"] = False
    cfg["mounts"].append({"destination": "/etc/hostname", "type": "bind", "source": src,
                          "options": ["rbind", "rw"]})
    cfg["annotations"]["io.airlock.backend"] = "microvm"
    with open(os.path.join(bundle, "config.json"), "w") as f:
        json.dump(cfg, f)
    log = os.path.join(env.base, "hostile.log")
    state = os.path.join(env.base, "hostile-state")
    try:
        r = subprocess.run([env.runtime, "--root", state, "--log", log, "run", "--bundle",
                            bundle, "hostile-fifo"], stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=180)
    finally:
        subprocess.run([env.runtime, "--root", state, "delete", "--force", "hostile-fifo"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
    logged = open(log).read() if os.path.exists(log) else ""
    expect(r.returncode != 0 and "copying to /etc/hostname" in logged
           and "powered off during its boot" in logged,
           "the runtime's log does not say why the guest failed (exit %d): %r"
           % (r.returncode, logged))
    expect(not root_images(), "root images left in %s: %s" % (VM_ROOTS, root_images()))


@case
def microvm_memory_limit(env):
    """`--memory 64m` in a guest: a 150 MiB allocation never succeeds; the
    limit, held by a cgroup inside the guest, ends the container as it ends
    an `airlock run --backend microvm` (SIGKILL: podman says 137). One
    allocation, not the 1 MiB steps of memory_limit_enforced: under TCG a
    guest kernel reclaiming python's own pages before it declares the OOM
    can take a minute, which is the guest's kernel, not the limit."""
    require_microvm(env)
    r = env.podman(*run_args("--rm", "--memory", "64m", "--memory-swap", "64m", *MICROVM,
                             PYTHON, "sh", "-c",
                             "python3 -c \"b = b'x' * (150 << 20); print('hog survived')\";"
                             " echo hog-rc=$?"), timeout=180)
    expect("hog survived" not in text(r), "the hog got 150 MiB under a 64 MiB limit\n%s"
           % describe(r))
    expect_rc(r, 137)


@case
def microvm_interactive_terminal(env):
    """`podman run --rm -it` with the container in a guest: a terminal of
    the guest's own (/dev/pts/N), the outer terminal's size."""
    require_microvm(env)
    rc, out = run_in_pty(env, run_args("--rm", "-it", *MICROVM, BUSYBOX, "sh", "-c",
                                       "tty; stty size; echo status=$?"), timeout=120)
    s = out.decode(errors="replace").replace("\r", "")
    expect(rc == 0, "podman -it exited %d; output %r" % (rc, s))
    expect(re.search(r"^/dev/pts/\d+$", s, re.M), "tty did not print /dev/pts/N: %r" % s)
    expect(re.search(r"^37 101$", s, re.M), "stty size did not say 37 101: %r" % s)


@case
def microvm_egress_by_annotation(env):
    """The egress annotations hold in a guest as under native: the allowed
    loopback API answers by its mapped name, the denied name gets nothing,
    the audit says so."""
    require_microvm(env)
    egress_by_annotation(env, "egress-microvm", *MICROVM)

# A listener for 120 s at most, in the namespace it is started in: answers
# each connection with its marker and notes it in the hits file.
LISTENER = r"""
import socket, sys, time
addr, port, marker, hits = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((addr, port))
s.listen(16)
s.settimeout(0.2)
print("listening", flush=True)
end = time.monotonic() + 120
while time.monotonic() < end:
    try:
        c, a = s.accept()
    except socket.timeout:
        continue
    with open(hits, "a") as f:
        f.write(a[0] + "\n")
    c.sendall(marker.encode() + b"\n")
    c.close()
"""

CONNECT = r"""
import socket, sys
try:
    c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3)
    print(c.recv(100).decode().strip())
except OSError as e:
    print("failed", e)
"""


def in_ns(nsfd, *argv):
    """argv run in the network namespace nsfd (ours, open) holds."""
    return subprocess.run(["nsenter", "--net=/proc/%d/fd/%d" % (os.getpid(), nsfd)]
                          + list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=30, pass_fds=(nsfd,))


@case
def engine_network_namespace_joined(env):
    """airlock only: on podman's bridge network the container's processes
    are in the network namespace podman made (inspect's SandboxKey) and
    keep podman's address; airlock's tables are in it while the container
    runs and gone once it was removed (the test holds the namespace); a
    listener the test runs inside that namespace on the container's own
    (non-loopback) address gets no connection from the container (nor from
    the namespace outside the sandbox: the rules are the namespace's),
    while loopback works inside. (The bridge's address on the host is not
    tried: it is not in a namespace the test made.)"""
    if not env.is_airlock:
        raise Skip("%s is not airlock: airlock's rules are airlock's" % env.name)
    had_bridge = os.path.exists("/sys/class/net/cni-podman0")
    had_cni = cni_traces()
    nsfd, lis = -1, None
    hits = os.path.join(env.base, "own-address.hits")
    open(hits, "w").close()
    r = env.podman("run", "-d", "--network", "bridge", BUSYBOX, "sleep", "300")
    expect_rc(r, 0)
    cid = text(r).strip().splitlines()[-1]
    env.made.append(cid)
    try:
        net = inspect(env, cid)["NetworkSettings"]
        key = net.get("SandboxKey")
        addr = net.get("IPAddress") or next(
            (n.get("IPAddress") for n in (net.get("Networks") or {}).values()), None)
        expect(key and addr, "podman gave no namespace or address: %s" % net)
        nsfd = os.open(key, os.O_RDONLY | os.O_CLOEXEC)
        pid = container_pid(env, cid)
        expect(os.stat("/proc/%d/ns/net" % pid).st_ino == os.fstat(nsfd).st_ino,
               "the container's process %d is not in podman's namespace %s" % (pid, key))
        rules = in_ns(nsfd, "nft", "list", "ruleset").stdout.decode()
        expect("table ip airlock" in rules and "table ip6 airlock" in rules,
               "airlock's tables are not in podman's namespace:\n%s" % rules)
        r = env.podman("exec", cid, "cat", "/proc/net/dev")
        expect_rc(r, 0)
        expect("eth0" in text(r), "podman's interface is not in the container: %s" % text(r))
        lis = subprocess.Popen(["nsenter", "--net=%s" % key, sys.executable, "-c", LISTENER,
                                addr, "8099", "own-marker", hits], stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               start_new_session=True)
        expect(lis.stdout.readline().decode().strip() == "listening", "the listener failed")
        # The rules are the namespace's: a connect of the test's own from
        # it (outside the sandbox) gets nothing either.
        got = in_ns(nsfd, sys.executable, "-c", CONNECT, addr, "8099").stdout.decode().strip()
        expect(got.startswith("failed"), "%s answered in the namespace: %r" % (addr, got))
        before = read(hits).split()
        r = env.podman("exec", cid, "sh", "-c",
                       "echo lo-marker | nc -l -p 7777 & sleep 0.5; "
                       "echo \"lo:$(timeout 3 nc 127.0.0.1 7777 </dev/null)\"; "
                       "echo \"own:$(timeout 3 nc %s 8099 </dev/null)\"" % addr)
        expect_rc(r, 0)
        out = text(r)
        expect("lo:lo-marker" in out, "loopback inside failed: %r" % out)
        expect("own:\n" in out, "the container reached %s: %r" % (addr, out))
        expect(read(hits).split() == before, "the listener saw the container: %s" % read(hits))
        remove(env, cid)
        wait_for(lambda: "airlock" not in in_ns(nsfd, "nft", "list", "ruleset").stdout.decode(),
                 15, step=0.2)
        rules = in_ns(nsfd, "nft", "list", "ruleset").stdout.decode()
        expect("airlock" not in rules, "airlock's tables remain after rm:\n%s" % rules)
    finally:
        if lis:
            kill_pid(lis.pid)
            lis.wait()
        if nsfd >= 0:
            os.close(nsfd)
        env.podman("rm", "--force", "--time", "0", cid)
        # The bridge podman made for this case (none was there before),
        # once no container is on it.
        brif = "/sys/class/net/cni-podman0/brif"
        if not had_bridge and os.path.isdir(brif) and not os.listdir(brif):
            subprocess.run(["ip", "link", "del", "cni-podman0"], timeout=30)
            remove_cni_traces(had_cni)


CNI_IPAM = "/var/lib/cni/networks/podman"


def cni_traces():
    """What CNI keeps on the host past a container: its firewall chains,
    its address allocations."""
    r = subprocess.run(["iptables", "-S"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                       timeout=30)
    return {"chains": b"-N CNI-FORWARD" in r.stdout, "ipam": os.path.isdir(CNI_IPAM)}


def remove_cni_traces(had):
    """Those of cni_traces() that were not there before the case."""
    if not had["chains"]:
        for argv in (["-D", "FORWARD", "-m", "comment", "--comment",
                      "CNI firewall plugin rules", "-j", "CNI-FORWARD"],
                     ["-F", "CNI-FORWARD"], ["-X", "CNI-FORWARD"], ["-F", "CNI-ADMIN"],
                     ["-X", "CNI-ADMIN"]):
            subprocess.run(["iptables"] + argv, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=30)
    if not had["ipam"]:
        shutil.rmtree(CNI_IPAM, ignore_errors=True)


def main():
    if len(sys.argv) < 2:
        print("usage: %s RUNTIME [NAME] [CASE-SUBSTRING...]" % sys.argv[0], file=sys.stderr)
        return 2
    runtime = sys.argv[1]
    name = sys.argv[2] if len(sys.argv) > 2 else os.path.basename(runtime)
    if not os.access(runtime, os.X_OK):
        print("1..0 # SKIP runtime %s not found" % runtime)
        return 0
    if shutil.which("podman") is None:
        print("1..0 # SKIP podman is not installed")
        return 0
    if os.geteuid() != 0:
        print("1..0 # SKIP needs root (rootful podman)")
        return 0
    t0 = time.monotonic()
    own_mount_ns()  # podman's mounts in a namespace of ours (Suite.run makes another)
    env = Env(runtime, name)
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(1))
    try:
        print("# runtime %s (%s): %s" % (name, env.runtime, env.version.splitlines()[0]))
        print("# images built and imported in %.1fs under %s" % (env.setup(), env.base),
              flush=True)
        rc = suite.run(env, only=sys.argv[3:])
    finally:
        left = env.close()
        print("# total %.1fs" % (time.monotonic() - t0), flush=True)
    if left:
        print("# mounts left below %s after cleanup: %s" % (env.base, left))
        return 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
