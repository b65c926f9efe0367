#!/usr/bin/python3
"""The OCI runtime spec's lifecycle against a runtime's command line (TAP):
every order of create, start, kill and delete the spec allows and refuses,
unknown and invalid ids, pause/resume, ps, exec, events, concurrent verbs
on one id, and the runtime's own processes killed at bad moments.

usage: run_oci_states.py RUNTIME [CASE-SUBSTRING...]

RUNTIME is airlock-runc. The cases hold it to the runtime spec and runc's
command line, and to airlock's own promises where runc differs: every
error names the id or the value that was wrong, a container's process is
not the PID 1 of its namespace (TERM ends a `sleep`), kill with signal 0
is refused, the pid file's process is airlock's supervisor (it dies of
the container's signal). Run against runc, most
cases fail on those (runc's "container does not exist" names no id).

Everything lives under one temporary directory removed at the end, even
on failure: a busybox root made from this host's files
(tests/oci/images.py), one bundle per case whose config.json points at
that root (read-only), and the runtime's state under a private --root.
Every container id carries this run's tag, so that its processes (the
supervisor is a fork of `create`, same command line) can be found on the
host. Containers are judged from the host: /proc/PID/stat of the pid
file's process and of the processes `ps --format json` names, their
cgroup directories (/proc/PID/cgroup, read while they run), the state
directory ROOT/ID. A container a case leaves is deleted with --force at
the end and its processes killed by pid.

Exit statuses of the pid file's process are read as conmon reads them: a
helper process of the test sets PR_SET_CHILD_SUBREAPER, runs `create`
(whose supervisor then becomes its child when create exits), and waits
for the pid in the pid file (oci_reaper below).
"""

import faulthandler
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "oci"))

import images  # noqa: E402
from harness import (LoopbackApi, Suite, children_of, expect, kill_pid, pid_starttime,  # noqa: E402
                     proc_read, wait_for)

TAG = "st" + secrets.token_hex(3)
CMD_TIMEOUT = 60

# A subreaper that runs the given commands in order (each must exit 0;
# the first's stdout and stderr go to the files given, since a create's
# supervisor keeps them as the container's), prints the pid in the pid
# file, then waits for that pid (reaping every other orphan too) and
# prints how it ended. Commands given on stdin after the pid line run
# while it waits ("run ARGV-JSON" lines), for verbs that must come
# from the same place (start).
REAPER = r"""
import ctypes, json, os, subprocess, sys, time
spec = json.loads(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
    print(json.dumps({"error": "prctl: %d" % ctypes.get_errno()}), flush=True)
    sys.exit(1)
rcs = []
for i, argv in enumerate(spec["steps"]):
    out = open(spec["out"], "ab") if i == 0 else subprocess.DEVNULL
    err = open(spec["err"], "ab") if i == 0 else subprocess.DEVNULL
    rcs.append(subprocess.call(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                               timeout=60))
    if rcs[-1] != 0:
        print(json.dumps({"steps": rcs}), flush=True)
        sys.exit(1)
with open(spec["pid_file"]) as f:
    pid = int(f.read())
print(json.dumps({"steps": rcs, "pid": pid}), flush=True)
deadline = time.monotonic() + spec["wait_s"]
while time.monotonic() < deadline:
    try:
        got, status = os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        break
    if got == pid:
        res = {"pid": pid}
        if os.WIFEXITED(status):
            res["exited"] = os.WEXITSTATUS(status)
        if os.WIFSIGNALED(status):
            res["signaled"] = os.WTERMSIG(status)
        print(json.dumps(res), flush=True)
        sys.exit(0)
    if got == 0:
        time.sleep(0.02)
print(json.dumps({"pid": pid, "timeout": True}), flush=True)
sys.exit(1)
"""


class StatesSuite(Suite):
    def nothing_left_behind(self, env):
        """After all cases: no container of this run in the runtime's
        --root, no process anywhere with this run's tag in its command
        line, none of the cgroup directories the cases saw their
        containers in, no child process of the test."""
        left = sorted(os.listdir(env.root)) if os.path.isdir(env.root) else []
        expect(not left, "state directories remain under --root: %s" % left)
        procs = wait_for(lambda: not tagged_procs(), 10, step=0.1)
        expect(procs, "processes of this run's containers remain: %s" % tagged_procs())
        cgs = sorted(d for d in env.cgroups if os.path.isdir(d))
        expect(not cgs, "cgroup directories of the containers remain: %s" % cgs)
        kids = children_of(os.getpid())
        expect(not kids, "child processes of the test remain: %s" % kids)


suite = StatesSuite()


def case(fn):
    """A case whose containers are deleted (--force) when it ends, passed
    or not, so that one failure does not leave state for the next."""
    import functools

    @functools.wraps(fn)
    def run(env):
        first = len(env.ids)
        try:
            fn(env)
        finally:
            for cid in env.ids[first:]:
                if os.path.isdir(os.path.join(env.root, cid)):
                    env.rt("delete", "--force", cid, timeout=30)
    return suite.case(run)


def tagged_procs():
    """Live processes (not zombies, not us) with TAG in their command line."""
    found = []
    for p in os.listdir("/proc"):
        if not p.isdigit() or int(p) == os.getpid():
            continue
        cmd = proc_read(int(p), "cmdline") or b""
        if TAG.encode() in cmd:
            stat = proc_read(int(p), "stat") or b""
            if stat.rsplit(b")", 1)[-1].split()[:1] != [b"Z"]:
                found.append("%s: %s" % (p, cmd.replace(b"\0", b" ")[:200].decode(
                    errors="replace")))
    return found


def alive(pid, start=None):
    """pid runs (not a zombie), and it is the same process (start time)."""
    stat = proc_read(pid, "stat")
    if not stat:
        return False
    fields = stat.rsplit(b")", 1)[-1].split()
    if fields[0] == b"Z":
        return False
    return start is None or int(fields[19]) == start


def cpu_ticks(pid):
    """utime + stime of pid, from the host's /proc/PID/stat."""
    fields = (proc_read(pid, "stat") or b"").rsplit(b")", 1)[-1].split()
    return int(fields[11]) + int(fields[12])


class Res:
    def __init__(self, argv, rc, out, err):
        self.argv, self.rc, self.out, self.err = argv, rc, out, err

    def describe(self):
        return "command: %s\nexit: %s\nstdout: %r\nstderr: %r" % (
            " ".join(self.argv), self.rc, self.out[-1500:], self.err[-1500:])


class Env:
    def __init__(self, runtime):
        self.runtime = os.path.abspath(runtime)
        self.base = tempfile.mkdtemp(prefix="airlock-e2e-oci-states-")
        self.root = os.path.join(self.base, "state")
        self.flags = []  # global flags before each verb (a case's, for a while)
        self.rootfs = os.path.join(self.base, "rootfs")
        self.ids = []  # every id a case used, deleted with --force at the end
        self.pids = set()  # (pid, start time) of every container's pid-file process
        self.cgroups = set()  # every cgroup directory a container's process was in

    def setup(self):
        images.busybox_root(self.rootfs)

    def argv(self, *args):
        return [self.runtime, "--root", self.root] + self.flags + [str(a) for a in args]

    def rt(self, *args, input=None, timeout=CMD_TIMEOUT):
        """A verb whose process ends with it (not create: see create())."""
        argv = self.argv(*args)
        p = subprocess.Popen(argv, stdin=subprocess.PIPE if input is not None
                             else subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, start_new_session=True)
        try:
            out, err = p.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_pid(p.pid)
            p.communicate()
            raise AssertionError("%s did not end within %ds" % (" ".join(argv), timeout))
        return Res(argv, p.returncode, out.decode(errors="replace"),
                   err.decode(errors="replace"))

    def new_id(self, name):
        cid = "%s-%s" % (TAG, name)
        self.ids.append(cid)
        return cid

    def bundle(self, name, args, terminal=False, linux=None):
        """A bundle named name whose process is args, on the shared root;
        linux: members set in its config's "linux" object."""
        d = os.path.join(self.base, "bundles", name)
        os.makedirs(d, exist_ok=True)
        if not os.path.exists(os.path.join(d, "config.json")):
            r = self.rt("spec", "--bundle", d)
            expect(r.rc == 0, "spec failed\n%s" % r.describe())
        path = os.path.join(d, "config.json")
        with open(path) as f:
            cfg = json.load(f)
        cfg["process"]["terminal"] = terminal
        cfg["process"]["args"] = list(args)
        cfg["root"] = {"path": self.rootfs, "readonly": True}
        cfg["linux"].update(linux or {})
        with open(path, "w") as f:
            json.dump(cfg, f)
        return d

    def files(self, cid):
        """The pid file and the stdout/stderr files of container cid."""
        d = os.path.join(self.base, "io")
        os.makedirs(d, exist_ok=True)
        return tuple(os.path.join(d, "%s.%s" % (cid, k)) for k in ("pid", "out", "err"))

    def create_popen(self, cid, bundle, pid_file=None, out=None, err=None):
        """`create` started: its stdout and stderr are files, since the
        supervisor it leaves keeps them as the container's stdio."""
        pf, o, e = self.files(cid)
        argv = self.argv("create", "--bundle", bundle, "--pid-file", pid_file or pf, cid)
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=open(out or o, "ab"),
                                stderr=open(err or e, "ab"), start_new_session=True)

    def create(self, cid, bundle, expect_ok=True):
        """`create`; (rc, its stderr); on success the pid file's process is
        recorded for the final checks."""
        pf, o, e = self.files(cid)
        p = self.create_popen(cid, bundle)
        try:
            rc = p.wait(CMD_TIMEOUT)
        except subprocess.TimeoutExpired:
            kill_pid(p.pid)
            p.wait()
            raise AssertionError("create %s did not end within %ds" % (cid, CMD_TIMEOUT))
        err = read(e)
        if expect_ok:
            expect(rc == 0, "create %s exited %d: %s" % (cid, rc, err))
        if rc == 0:
            pid = int(read(pf))
            self.pids.add((pid, pid_starttime(pid)))
        return rc, err

    def pid_of(self, cid):
        return int(read(self.files(cid)[0]))

    def state(self, cid):
        r = self.rt("state", cid)
        expect(r.rc == 0, "state %s failed\n%s" % (cid, r.describe()))
        return json.loads(r.out)

    def status(self, cid):
        return self.state(cid)["status"]

    def wait_status(self, cid, want, timeout=15):
        wait_for(lambda: self.status(cid) == want, timeout, step=0.05)
        st = self.state(cid)
        expect(st["status"] == want, "%s is %s, not %s, after %ds: %s"
               % (cid, st["status"], want, timeout, st))
        return st

    def ps(self, cid):
        r = self.rt("ps", "--format", "json", cid)
        expect(r.rc == 0, "ps failed\n%s" % r.describe())
        return json.loads(r.out)

    def note_cgroups(self, cid):
        """The cgroup directories of the container's processes (ps), noted
        for the checks that they are gone; the processes with their start
        times."""
        procs = []
        for pid in self.ps(cid):
            try:
                with open("/proc/%d/cgroup" % pid) as f:
                    lines = f.read().splitlines()
            except OSError:
                continue
            procs.append((pid, pid_starttime(pid)))
            for line in lines:
                _, ctrls, path = line.split(":", 2)
                if path == "/" or not ctrls or ctrls.startswith("name="):
                    continue
                d = "/sys/fs/cgroup/%s%s" % (ctrls.split(",")[0], path)
                if os.path.isdir(d):
                    self.cgroups.add(d)
                    mine.setdefault(cid, set()).add(d)
        return procs

    def gone(self, cid, procs=()):
        """The container leaves nothing: no state directory, `state` fails
        naming it, its pid file's process and procs ended, its cgroups
        removed."""
        pid = self.pid_of(cid) if os.path.exists(self.files(cid)[0]) else None
        start = next((s for p, s in self.pids if p == pid), None)
        left = lambda: [p for p, s in procs if alive(p, s)] + (
            [pid] if pid and start and alive(pid, start) else [])
        wait_for(lambda: not left(), 10, step=0.05)
        expect(not left(), "processes of %s remain: %s" % (cid, left()))
        d = os.path.join(self.root, cid)
        expect(not os.path.exists(d), "state directory %s remains: %s"
               % (d, os.listdir(d) if os.path.isdir(d) else "?"))
        r = self.rt("state", cid)
        expect(r.rc != 0 and cid in r.err, "state of a deleted %s\n%s" % (cid, r.describe()))
        cgs = [c for c in mine.get(cid, ()) if os.path.isdir(c)]
        wait_for(lambda: not [c for c in cgs if os.path.isdir(c)], 5, step=0.05)
        cgs = [c for c in cgs if os.path.isdir(c)]
        expect(not cgs, "cgroups of %s remain: %s" % (cid, cgs))

    def close(self):
        for cid in self.ids:
            if os.path.isdir(os.path.join(self.root, cid)):
                self.rt("delete", "--force", cid, timeout=30)
        for pid, start in self.pids:
            if start and alive(pid, start):
                kill_pid(pid)
        # What a killed supervisor leaves (see supervisor_killed): its
        # cgroups, removed deepest first once empty, and its host id slot,
        # which `airlock gc` takes back.
        for d in sorted(self.cgroups, key=len, reverse=True):
            try:
                os.rmdir(d)
            except OSError:
                pass
        gc = os.path.join(os.path.dirname(self.runtime), "airlock")
        if os.access(gc, os.X_OK):
            subprocess.run([gc, "gc"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=60)
        left = images.mounts_below(self.base)
        shutil.rmtree(self.base, ignore_errors=True)
        return left


mine = {}  # container id: its cgroup directories


def read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def expect_fail(r, *words):
    """r failed (non-zero) and its stderr says each of words."""
    expect(r.rc != 0, "expected a failure\n%s" % r.describe())
    for w in words:
        expect(w in r.err, "the error does not say %r\n%s" % (w, r.describe()))


SLEEP = ("sleep", "300")


def running(env, name, args=SLEEP, wait=True):
    """A created and started container of args (running, unless wait is
    False); its id."""
    cid = env.new_id(name)
    env.create(cid, env.bundle(name, args))
    r = env.rt("start", cid)
    expect(r.rc == 0, "start failed\n%s" % r.describe())
    if wait:
        env.wait_status(cid, "running")
    return cid


@case
def nofile_soft_below_hard(env):
    """process.rlimits RLIMIT_NOFILE 512 soft, 1024 hard (an engine's
    --ulimit nofile=512:1024): the container's process has both, read
    from its own /proc/self/limits."""
    cid = env.new_id("nofile")
    d = env.bundle("nofile", ["sh", "-c", "grep 'Max open files' /proc/self/limits"])
    cfgp = os.path.join(d, "config.json")
    with open(cfgp) as f:
        cfg = json.load(f)
    cfg["process"]["rlimits"] = [{"type": "RLIMIT_NOFILE", "soft": 512, "hard": 1024}]
    with open(cfgp, "w") as f:
        json.dump(cfg, f)
    env.create(cid, d)
    r = env.rt("start", cid)
    expect(r.rc == 0, "start failed\n%s" % r.describe())
    env.wait_status(cid, "stopped")
    got = read(env.files(cid)[1]).split()
    expect(got[3:5] == ["512", "1024"], "limits: %r" % got)
    expect(env.rt("delete", cid).rc == 0, "delete failed")
    env.gone(cid)


@case
def lifecycle_create_start_kill_delete(env):
    """create: state is created, its pid the pid file's, that process
    alive; start: running, the process the config named runs (ps); kill
    TERM: stopped; delete: no state directory, no process, no cgroup, and
    `state` fails naming the id."""
    cid = env.new_id("life")
    env.create(cid, env.bundle("life", SLEEP))
    st = env.state(cid)
    pid = env.pid_of(cid)
    expect(st["status"] == "created", "after create: %s" % st)
    expect(st["pid"] == pid, "state's pid %s is not the pid file's %d" % (st["pid"], pid))
    expect(alive(pid), "the pid file's process %d is not alive" % pid)
    expect(st["id"] == cid and st["bundle"].endswith("/life"), "state: %s" % st)
    r = env.rt("start", cid)
    expect(r.rc == 0, "start failed\n%s" % r.describe())
    env.wait_status(cid, "running")
    procs = env.note_cgroups(cid)
    expect(any(b"sleep" in (proc_read(p, "cmdline") or b"") for p, _ in procs),
           "ps lists no process running sleep: %s" % procs)
    r = env.rt("kill", cid, "TERM")
    expect(r.rc == 0, "kill TERM failed\n%s" % r.describe())
    st = env.wait_status(cid, "stopped")
    # runc's words, which containerd's shim takes as "already gone".
    r = env.rt("kill", cid, "KILL")
    expect(r.rc != 0 and "container not running" in r.err,
           "kill of a stopped container\n%s" % r.describe())
    r = env.rt("delete", cid)
    expect(r.rc == 0, "delete of a stopped container failed\n%s" % r.describe())
    env.gone(cid, procs)


@case
def start_twice(env):
    """A second start of a running container fails (non-zero exit, a
    message naming its state), and the container still runs."""
    cid = running(env, "twice")
    r = env.rt("start", cid)
    expect_fail(r, "running")
    expect(env.status(cid) == "running", "no longer running after a second start")
    expect(env.rt("delete", "--force", cid).rc == 0, "delete --force failed")


@case
def start_after_exit(env):
    """start of a container whose process has exited fails (non-zero, a
    message saying it is stopped)."""
    cid = running(env, "exited", ("true",), wait=False)
    env.wait_status(cid, "stopped")
    r = env.rt("start", cid)
    expect_fail(r, "stopped")
    expect(env.rt("delete", cid).rc == 0, "delete failed")
    env.gone(cid)


@case
def delete_running_needs_force(env):
    """delete of a running container without --force fails naming it and
    leaves it running (its processes alive); with --force it is removed:
    no state directory, no process of it on the host, no cgroup."""
    cid = running(env, "busy", ("sh", "-c", "sleep 300 & sleep 301"))
    procs = env.note_cgroups(cid)
    expect(len(procs) >= 2, "ps lists %s" % procs)
    r = env.rt("delete", cid)
    expect_fail(r, cid, "--force")
    expect(env.status(cid) == "running", "not running after a refused delete")
    dead = [p for p, s in procs if not alive(p, s)]
    expect(not dead, "processes died after a refused delete: %s" % dead)
    r = env.rt("delete", "--force", cid)
    expect(r.rc == 0, "delete --force failed\n%s" % r.describe())
    env.gone(cid, procs)


@case
def delete_created(env):
    """delete of a created (never started) container removes it and its
    process."""
    cid = env.new_id("delcreated")
    env.create(cid, env.bundle("delcreated", SLEEP))
    r = env.rt("delete", cid)
    expect(r.rc == 0, "delete of a created container failed\n%s" % r.describe())
    env.gone(cid)


@case
def kill_created(env):
    """kill TERM of a created container: it is stopped (its process never
    ran), start then fails, delete removes it."""
    cid = env.new_id("killcreated")
    env.create(cid, env.bundle("killcreated", ("sh", "-c", "echo started-marker; sleep 300")))
    r = env.rt("kill", cid, "TERM")
    expect(r.rc == 0, "kill of a created container failed\n%s" % r.describe())
    env.wait_status(cid, "stopped")
    expect_fail(env.rt("start", cid))
    expect(env.rt("delete", cid).rc == 0, "delete failed")
    env.gone(cid)
    expect("started-marker" not in read(env.files(cid)[1]), "the process ran")


@case
def kill_bad_signal(env):
    """kill with a signal that is none (a name, 65, SIGFOO) fails naming
    it, and the container still runs; 0, as kill(2)'s and runc's, is a
    probe: it succeeds on a running container and sends nothing."""
    cid = running(env, "badsig")
    for sig in ("NOPE", "65", "SIGFOO"):
        r = env.rt("kill", cid, sig)
        expect_fail(r, sig)
    r = env.rt("kill", cid, "0")
    expect(r.rc == 0, "kill 0 of a running container failed\n%s" % r.describe())
    expect(env.status(cid) == "running", "not running after bad kills")
    expect(env.rt("delete", "--force", cid).rc == 0, "delete --force failed")


@case
def unknown_id(env):
    """state, start, kill, delete (with and without --force), pause, ps,
    exec and events of an id that does not exist fail, naming the id."""
    cid = "%s-nosuch" % TAG
    for verb in (("state",), ("start",), ("kill",), ("delete",), ("delete", "--force"),
                 ("pause",), ("resume",), ("ps", "--format", "json"), ("events", "--stats")):
        r = env.rt(*verb, cid)
        expect_fail(r, cid)
        expect("does not exist" in r.err, "%s: not 'does not exist'\n%s"
               % (verb[0], r.describe()))
    r = env.rt("exec", cid, "true")
    expect_fail(r, cid)


@case
def create_existing_id(env):
    """create with the id of a running container fails ("already
    exists"), and the first is untouched: same pid, still running,
    its state directory and process alive."""
    cid = running(env, "dup")
    pid = env.pid_of(cid)
    pf = os.path.join(env.base, "dup-second.pid")
    p = env.create_popen(cid, env.bundle("dup2", SLEEP), pid_file=pf,
                         err=os.path.join(env.base, "dup-second.err"))
    rc = p.wait(CMD_TIMEOUT)
    err = read(os.path.join(env.base, "dup-second.err"))
    expect(rc != 0 and "already exists" in err and cid in err,
           "second create: exit %d, %r" % (rc, err))
    expect(not os.path.exists(pf), "the failed create wrote a pid file")
    st = env.state(cid)
    expect(st["status"] == "running" and st["pid"] == pid and alive(pid),
           "the first container changed: %s (pid file %d)" % (st, pid))
    expect(st["bundle"].endswith("/dup"), "the bundle changed: %s" % st)
    expect(env.rt("delete", "--force", cid).rc == 0, "delete --force failed")
    env.gone(cid)


@case
def invalid_ids(env):
    """create (and state) with ids that are not ids fail with a message
    naming what is wrong: "../x" (a path), "" (empty), 1025 bytes (too
    long), "a/b"; nothing is made in --root or beside it."""
    before = set(os.listdir(env.base))
    bundle = env.bundle("badid", SLEEP)
    for bad, word in (("../%s-x" % TAG, "invalid"), ("", "empty"), ("a" * 1025, "1024"),
                      ("%s/b" % TAG, "invalid"), ("..", "invalid")):
        err = os.path.join(env.base, "badid.err")
        p = env.create_popen(bad, bundle, pid_file=os.path.join(env.base, "badid.pid"),
                             out=os.devnull, err=err)
        rc = p.wait(CMD_TIMEOUT)
        msg = read(err)
        os.unlink(err)
        expect(rc != 0 and word in msg, "create %r: exit %d, %r (wanted %r)"
               % (bad[:40], rc, msg, word))
        r = env.rt("state", bad)
        expect(r.rc != 0 and r.err, "state %r\n%s" % (bad[:40], r.describe()))
    expect(not os.path.exists(os.path.join(env.base, "badid.pid")), "a pid file was written")
    made = set(os.listdir(env.base)) - before - {"bundles", "io"}
    expect(not made, "made beside --root: %s" % made)
    left = os.listdir(env.root) if os.path.isdir(env.root) else []
    expect(not any("-x" in n or n == "b" for n in left), "made in --root: %s" % left)


@case
def pause_resume(env):
    """pause: state says paused and a busy loop of the container gains no
    CPU time (its utime+stime in the host's /proc/PID/stat, the pid from
    ps) for a second; resume: running, and it gains CPU time again."""
    cid = running(env, "pause", ("sh", "-c", "while :; do :; done"))
    try:
        procs = env.note_cgroups(cid)
        busy = [p for p, _ in procs if b"while" in (proc_read(p, "cmdline") or b"")]
        expect(busy, "ps lists no busy loop: %s" % procs)
        pid = busy[0]
        t0 = cpu_ticks(pid)
        expect(wait_for(lambda: cpu_ticks(pid) > t0, 15, step=0.05),
               "the loop gained no CPU time while running")
        r = env.rt("pause", cid)
        expect(r.rc == 0, "pause failed\n%s" % r.describe())
        expect(env.status(cid) == "paused", "state after pause: %s" % env.state(cid))
        time.sleep(0.2)  # pause waits for FROZEN; a tick being charged then shows late
        t1 = cpu_ticks(pid)
        time.sleep(1.0)
        t2 = cpu_ticks(pid)
        expect(t2 == t1, "the paused loop gained %d ticks in 1s" % (t2 - t1))
        r = env.rt("resume", cid)
        expect(r.rc == 0, "resume failed\n%s" % r.describe())
        expect(env.status(cid) == "running", "state after resume: %s" % env.state(cid))
        expect(wait_for(lambda: cpu_ticks(pid) > t2, 15, step=0.05),
               "the loop gained no CPU time after resume")
    finally:
        env.rt("delete", "--force", cid)
    env.gone(cid, procs)


@case
def ps_lists_processes(env):
    """ps --format json lists the container's processes: its shell and
    the two sleeps it started, each in the container's cgroups, and not
    the supervisor (which is outside the container)."""
    cid = running(env, "ps", ("sh", "-c", "sleep 300 & sleep 301 & wait"))
    wait_for(lambda: len(env.ps(cid)) >= 3, 10, step=0.05)
    pids = env.ps(cid)
    cmds = {p: (proc_read(p, "cmdline") or b"").replace(b"\0", b" ") for p in pids}
    for want in (b"sleep 300", b"sleep 301", b"sh -c"):
        expect(any(c.startswith(want) for c in cmds.values()), "ps lists no %r: %s"
               % (want, cmds))
    expect(env.pid_of(cid) not in pids, "ps lists the supervisor")
    procs = env.note_cgroups(cid)
    expect(env.rt("delete", "--force", cid).rc == 0, "delete --force failed")
    env.gone(cid, procs)


def reaper(env, steps, pid_file, wait_s=60):
    """The subreaper helper (REAPER) started: runs steps, prints the pid
    file's pid, waits for it."""
    spec = {"steps": steps, "pid_file": pid_file, "wait_s": wait_s,
            "out": os.path.join(env.base, "reaper.out"),
            "err": os.path.join(env.base, "reaper.err")}
    return subprocess.Popen([sys.executable, "-c", REAPER, json.dumps(spec)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)


def reaper_line(p, timeout):
    """The next JSON line of the reaper, within timeout seconds (read from
    its pipe unbuffered: a line read ahead would hide from select)."""
    import select
    buf = getattr(p, "linebuf", b"")
    deadline = time.monotonic() + timeout
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        ready, _, _ = select.select([p.stdout.fileno()], [], [], max(left, 0))
        expect(ready, "the reaper said nothing within %ds (so far %r)" % (timeout, buf))
        chunk = os.read(p.stdout.fileno(), 4096)
        expect(chunk, "the reaper ended after %r" % buf)
        buf += chunk
    line, p.linebuf = buf.split(b"\n", 1)
    return json.loads(line)


@case
def exec_code_stdio_detach(env):
    """exec: the exit code of the process is exec's (5); stdin reaches it
    and its stdout comes back (cat); --detach --pid-file returns at once,
    and the pid file's process ends when the exec ends, with its code
    (3; waited for as its subreaper)."""
    cid = running(env, "exec")
    try:
        r = env.rt("exec", cid, "sh", "-c", "exit 5")
        expect(r.rc == 5, "exec exit 5\n%s" % r.describe())
        r = env.rt("exec", cid, "sh", "-c", "cat; echo err-marker >&2", input=b"in-marker\n")
        expect(r.rc == 0 and r.out == "in-marker\n" and "err-marker" in r.err,
               "stdio not relayed\n%s" % r.describe())
        pf = os.path.join(env.base, "exec-detach.pid")
        p = reaper(env, [env.argv("exec", "--detach", "--pid-file", pf, cid, "sh", "-c",
                                  "while [ ! -e /tmp/go ]; do sleep 0.05; done; exit 3")], pf)
        try:
            first = reaper_line(p, CMD_TIMEOUT)
            expect(first.get("steps") == [0], "exec --detach failed: %s %r"
                   % (first, read(os.path.join(env.base, "reaper.err"))))
            expect(alive(first["pid"]), "the pid file's process %s is gone while its exec "
                   "waits" % first)
            r = env.rt("exec", cid, "touch", "/tmp/go")
            expect(r.rc == 0, "exec touch\n%s" % r.describe())
            end = reaper_line(p, CMD_TIMEOUT)
            expect(end.get("exited") == 3, "the pid file's process ended: %s" % end)
        finally:
            kill_pid(p.pid)
            p.wait()
    finally:
        env.rt("delete", "--force", cid)


@case
def events_stats(env):
    """events --stats prints one JSON object: type stats, the id, data
    with memory (usage > 0) and pids (current >= 1)."""
    cid = running(env, "events")
    try:
        r = env.rt("events", "--stats", cid)
        expect(r.rc == 0, "events --stats failed\n%s" % r.describe())
        ev = json.loads(r.out)
        expect(ev.get("type") == "stats" and ev.get("id") == cid, "events: %s" % ev)
        data = ev.get("data", {})
        expect(data.get("memory", {}).get("usage", 0) > 0, "no memory usage: %s" % data)
        expect(data.get("pids", {}).get("current", 0) >= 1, "no pids: %s" % data)
    finally:
        env.rt("delete", "--force", cid)


def parallel(env, n, *args):
    """n runs of the verb args at once; their Res."""
    ps = [subprocess.Popen(env.argv(*args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, start_new_session=True) for _ in range(n)]
    out = []
    for p in ps:
        try:
            o, e = p.communicate(timeout=CMD_TIMEOUT)
        except subprocess.TimeoutExpired:
            kill_pid(p.pid)
            o, e = p.communicate()
        out.append(Res(env.argv(*args), p.returncode, o.decode(errors="replace"),
                       e.decode(errors="replace")))
    return out


@case
def concurrent_state(env):
    """10 `state` of one running container at once all succeed and say
    running."""
    cid = running(env, "cstate")
    try:
        rs = parallel(env, 10, "state", cid)
        bad = [r.describe() for r in rs if r.rc != 0 or json.loads(r.out)["status"] != "running"]
        expect(not bad, "%d of 10 failed:\n%s" % (len(bad), "\n".join(bad[:3])))
    finally:
        env.rt("delete", "--force", cid)


@case
def concurrent_start(env):
    """5 `start` of one created container at once: exactly one succeeds,
    the others fail; the process ran once (its marker once on stdout)."""
    cid = env.new_id("cstart")
    env.create(cid, env.bundle("cstart", ("sh", "-c", "echo start-marker; sleep 300")))
    try:
        rs = parallel(env, 5, "start", cid)
        ok = [r for r in rs if r.rc == 0]
        expect(len(ok) == 1, "%d of 5 starts succeeded:\n%s"
               % (len(ok), "\n".join(r.describe() for r in rs)))
        env.wait_status(cid, "running")
        out = env.files(cid)[1]
        wait_for(lambda: "start-marker" in read(out), 10, step=0.05)
        n = read(out).count("start-marker")
        expect(n == 1, "the process printed its marker %d times" % n)
    finally:
        env.rt("delete", "--force", cid)


@case
def concurrent_delete_force(env):
    """2 `delete --force` of one running container at once: both end, each
    succeeds or says the container does not exist, and it is gone."""
    cid = running(env, "cdelete")
    procs = env.note_cgroups(cid)
    rs = parallel(env, 2, "delete", "--force", cid)
    bad = [r.describe() for r in rs if r.rc != 0 and "does not exist" not in r.err]
    expect(not bad, "a delete failed otherwise:\n%s" % "\n".join(bad))
    env.gone(cid, procs)


@case
def concurrent_create(env):
    """3 `create` of one id at once: exactly one succeeds, the others fail
    saying it already exists; the container is the winner's (its pid
    file's pid), created."""
    cid = env.new_id("ccreate")
    bundle = env.bundle("ccreate", SLEEP)
    ps, files = [], []
    for i in range(3):
        f = [os.path.join(env.base, "ccreate%d.%s" % (i, k)) for k in ("pid", "err")]
        files.append(f)
        ps.append(env.create_popen(cid, bundle, pid_file=f[0], err=f[1]))
    rcs = [p.wait(CMD_TIMEOUT) for p in ps]
    errs = [read(f[1]) for f in files]
    ok = [i for i, rc in enumerate(rcs) if rc == 0]
    for i in ok:
        pid = int(read(files[i][0]))
        env.pids.add((pid, pid_starttime(pid)))
    expect(len(ok) == 1, "%d of 3 creates succeeded: %s %s" % (len(ok), rcs, errs))
    for i, rc in enumerate(rcs):
        if rc != 0:
            expect("already exists" in errs[i], "create %d: %r" % (i, errs[i]))
            expect(not os.path.exists(files[i][0]), "a failed create wrote its pid file")
    st = env.state(cid)
    pid = int(read(files[ok[0]][0]))
    expect(st["status"] == "created" and st["pid"] == pid, "state %s, winner's pid %d"
           % (st, pid))
    expect(env.rt("delete", cid).rc == 0, "delete failed")
    expect(wait_for(lambda: not alive(pid), 10), "the winner's supervisor remains")


def new_run_cgroups(before):
    """Run cgroup directories (ROOT/.../airlock/PID-START-N) that were not
    there before and whose supervisor is one of ours (its command line has
    TAG) or is gone."""
    from harness import run_cgroup_dirs, cgroup_supervisor
    found = []
    for d in run_cgroup_dirs() - before:
        sup = cgroup_supervisor(d)
        if not sup:
            continue
        if alive(sup[0], sup[1]) and TAG.encode() not in (proc_read(sup[0], "cmdline") or b""):
            continue  # another airlock's, on this shared host
        found.append(d)
    return found


@case
def create_killed_midway(env):
    """The create process killed by SIGKILL at several points (after 0, 2,
    5, 10, 20, 50 and 100 ms): then `state` says stopped or that the
    container does not exist (never created/running/creating), `delete
    --force` leaves nothing (no state directory, no process with the id,
    no run cgroup of its supervisor)."""
    from harness import run_cgroup_dirs
    problems = []
    for ms in (0, 2, 5, 10, 20, 50, 100):
        cid = env.new_id("k%d" % ms)
        bundle = env.bundle("killed", SLEEP)
        before = run_cgroup_dirs()
        p = env.create_popen(cid, bundle)
        time.sleep(ms / 1000.0)
        kill_pid(p.pid)
        rc = p.wait(CMD_TIMEOUT)
        # create commits by writing the pid file and telling the
        # supervisor to go on; killed after that (under ASan its exit
        # alone takes tens of ms) the container is rightly created, with
        # the pid file's process as state's pid. Killed before, the
        # supervisor removes what was made, which under load takes a
        # while: wait (up to 10 s) until the state has settled.
        def wrong():
            """What state says that it should not, or None."""
            r = env.rt("state", cid)
            if r.rc != 0:
                return None if "does not exist" in r.err else "state failed: " + r.err.strip()
            state = json.loads(r.out)
            committed = rc == 0 or read(env.files(cid)[0]) == str(state.get("pid"))
            if state["status"] == "stopped" or (committed and state["status"] == "created"):
                return None
            return "state says " + state["status"]
        wait_for(lambda: wrong() is None, 10, step=0.05)
        w = wrong()
        if w:
            problems.append("%dms (create exit %s): %s" % (ms, rc, w))
        r = env.rt("delete", "--force", cid)
        if r.rc != 0 and "does not exist" not in r.err:
            problems.append("%dms: delete --force: %s" % (ms, r.err.strip()))
        wait_for(lambda: not [t for t in tagged_procs() if cid in t], 10, step=0.05)
        procs = [t for t in tagged_procs() if cid in t]
        if procs:
            problems.append("%dms: processes remain: %s" % (ms, procs))
        if os.path.exists(os.path.join(env.root, cid)):
            problems.append("%dms: state directory remains: %s"
                            % (ms, os.listdir(os.path.join(env.root, cid))))
            env.rt("delete", "--force", cid)
        wait_for(lambda: not new_run_cgroups(before), 5, step=0.05)
        cgs = new_run_cgroups(before)
        if cgs:
            problems.append("%dms: run cgroups remain: %s" % (ms, cgs))
            env.cgroups.update(cgs)
        print("# killed after %dms: create exit %s" % (ms, rc), flush=True)
    expect(not problems, "\n".join(problems))


@case
def supervisor_killed(env):
    """The pid file's process (airlock's supervisor) killed by SIGKILL:
    the container's processes end, `state` says stopped with
    io.airlock.end naming the supervisor, delete removes it and leaves
    nothing (no process, no cgroup, no state directory)."""
    cid = running(env, "supkill", ("sh", "-c", "sleep 300 & sleep 301"))
    procs = env.note_cgroups(cid)
    pid = env.pid_of(cid)
    kill_pid(pid)
    wait_for(lambda: not alive(pid), 10)
    st = env.wait_status(cid, "stopped")
    end = st.get("io.airlock.end", "")
    expect("supervisor" in end and str(pid) in end, "io.airlock.end: %r" % end)
    wait_for(lambda: not [p for p, s in procs if alive(p, s)], 10, step=0.05)
    left = [p for p, s in procs if alive(p, s)]
    r = env.rt("delete", cid)
    expect(r.rc == 0, "delete failed\n%s" % r.describe())
    expect(not left, "the container's processes outlived its supervisor: %s" % left)
    try:
        env.gone(cid, procs)
    finally:
        # Reported above; removed here so that the final check judges
        # only what no case has reported.
        for d in sorted(mine.get(cid, ()), key=len, reverse=True):
            try:
                os.rmdir(d)
            except OSError:
                pass


CG = "/sys/fs/cgroup"
# The v1 hierarchies airlock makes a container's cgroup in at its
# cgroupsPath (docs/oci.md), where the host has them.
CG_V1 = ("memory", "pids", "cpu", "cpuacct", "freezer")
# The v1 hierarchies without a limit of airlock's where the supervisor
# itself goes to the path (podman takes the longest path of the state
# pid's /proc/PID/cgroup as the container's cgroup).
CG_TAGS = ("blkio", "perf_event", "net_cls", "hugetlb")


def cg_dirs(path, tags=False):
    """Where the cgroup at path is in each hierarchy airlock uses (tags: and
    in those where only the supervisor goes): the v1 ones mounted here, or
    the v2 mount."""
    if os.path.isdir(os.path.join(CG, "memory")):
        return {c: CG + "/" + c + path for c in CG_V1 + (CG_TAGS if tags else ())
                if os.path.isdir(os.path.join(CG, c)) and not os.path.islink(os.path.join(CG, c))}
    return {"": CG + path}


def cg_parent_removed(top):
    """The test's own parent cgroup (top: "/airlock-test-...") removed in
    every hierarchy, deepest directories first (what a failed case left)."""
    for d in cg_dirs(top, tags=True).values():
        for root, _, _ in sorted(os.walk(d), key=lambda w: -len(w[0])):
            try:
                os.rmdir(root)
            except OSError:
                pass


def cg_of(pid, ctrl):
    """pid's cgroup path in the hierarchy of ctrl ("" for v2)."""
    with open("/proc/%d/cgroup" % pid) as f:
        for line in f.read().splitlines():
            _, ctrls, path = line.split(":", 2)
            if (ctrl and ctrl in ctrls.split(",")) or (not ctrl and not ctrls):
                return path
    return None


@case
def cgroups_path_placed(env):
    """linux.cgroupsPath /airlock-test-TAG/c1 (a parent that does not
    exist): while the container runs, its process's /proc/PID/cgroup names
    that path (or airlock's cgroup of the exec below it) for memory, pids,
    cpu, cpuacct and freezer (v1; or v2's), the pid is in the path's
    cgroup.procs or below, the limits
    of config.json read back from the files there (memory.limit_in_bytes
    64 MiB, pids.max 40, cpu.cfs_quota_us 50000 per 100000; v2's
    memory.max, pids.max, cpu.max), `events --stats` reads that cgroup;
    the pid file's process (airlock's supervisor) is at the path in the v1
    hierarchies airlock sets no limit in (blkio...: podman takes the
    longest path of that pid's cgroups as the container's); after delete
    the cgroup is gone in every hierarchy, and so is its parent, which
    create made (one that was there before create stays)."""
    top = "/airlock-test-" + TAG
    path = top + "/c1"
    res = {"memory": {"limit": 64 << 20}, "pids": {"limit": 40},
           "cpu": {"quota": 50000, "period": 100000}}
    try:
        cid = env.new_id("cgpath")
        env.create(cid, env.bundle("cgpath", SLEEP, linux={"cgroupsPath": path,
                                                          "resources": res}))
        dirs = cg_dirs(path)
        expect(all(os.path.isdir(d) for d in dirs.values()),
               "after create, not every cgroup at the path exists: %s"
               % {c: os.path.isdir(d) for c, d in dirs.items()})
        r = env.rt("start", cid)
        expect(r.rc == 0, "start failed\n%s" % r.describe())
        env.wait_status(cid, "running")
        pids = env.ps(cid)
        sleeper = [p for p in pids if b"sleep" in (proc_read(p, "cmdline") or b"")]
        expect(sleeper, "ps lists no sleep: %s" % pids)
        for ctrl in dirs:
            got = cg_of(sleeper[0], ctrl)
            expect(got == path or (got or "").startswith(path + "/"),
                   "the container's %s cgroup is %s, not %s or below it"
                   % (ctrl or "v2", got, path))
        if "memory" in dirs:
            want = {("memory", "memory.limit_in_bytes"): str(64 << 20),
                    ("pids", "pids.max"): "40", ("cpu", "cpu.cfs_quota_us"): "50000",
                    ("cpu", "cpu.cfs_period_us"): "100000"}
        else:
            want = {("", "memory.max"): str(64 << 20), ("", "pids.max"): "40",
                    ("", "cpu.max"): "50000 100000"}
        for (ctrl, name), v in want.items():
            got = read(os.path.join(dirs[ctrl], name))
            expect(got == v, "%s/%s reads %r, not %r" % (dirs[ctrl], name, got, v))
        below = []
        for root, _, _ in os.walk(dirs.get("pids", dirs.get(""))):
            below += read(os.path.join(root, "cgroup.procs")).split()
        expect(str(sleeper[0]) in below, "%s is not in the path's cgroup.procs or below: %s"
               % (sleeper[0], below))
        sup = env.pid_of(cid)
        for ctrl in set(cg_dirs(path, tags=True)) - set(dirs):
            got = cg_of(sup, ctrl)
            expect(got == path, "the supervisor's %s cgroup is %s, not %s" % (ctrl, got, path))
        r = env.rt("events", "--stats", cid)
        expect(r.rc == 0, "events --stats failed\n%s" % r.describe())
        pcur = json.loads(r.out).get("data", {}).get("pids", {}).get("current", 0)
        expect(pcur >= 1, "events --stats: no pids: %s" % r.out)
        procs = env.note_cgroups(cid)
        r = env.rt("kill", cid, "KILL")
        expect(r.rc == 0, "kill failed\n%s" % r.describe())
        env.wait_status(cid, "stopped")
        r = env.rt("delete", cid)
        expect(r.rc == 0, "delete failed\n%s" % r.describe())
        env.gone(cid, procs)
        left = [d for d in cg_dirs(path, tags=True).values() if os.path.exists(d)]
        expect(not left, "cgroups at the path remain after delete: %s" % left)
        kept = [d for d in cg_dirs(top, tags=True).values() if os.path.isdir(d)]
        expect(not kept, "the parent made by create remains after delete: %s" % kept)
    finally:
        env.rt("delete", "--force", "%s-cgpath" % TAG)
        cg_parent_removed(top)


@case
def cgroups_path_refused(env):
    """A cgroupsPath that exists already (made by the test in one
    hierarchy), one with "..", the systemd form and one of 600 bytes: each
    create fails naming linux.cgroupsPath and leaves nothing (no state
    directory, nothing made at or beside the path, the test's own cgroup
    still there and empty)."""
    top = "/airlock-test-" + TAG
    first = next(iter(cg_dirs(top)))
    taken = cg_dirs(top + "/taken")[first]
    bad = {"exists": (top + "/taken", "exists already"),
           "dotdot": (top + "/a/../b", "\".\""),
           "systemd": ("system.slice:airlock:x", "systemd"),
           "long": ("/" + "x" * 600, "at most"),
           "control": (top + "/cf/tasks", "cgroup file"),
           "deep": (top + "/d" * 16, "more than 16 components")}
    try:
        os.makedirs(taken)
        for name, (path, why) in bad.items():
            cid = env.new_id("cgbad-" + name)
            rc, err = env.create(cid, env.bundle("cgbad-" + name, SLEEP,
                                                 linux={"cgroupsPath": path}), expect_ok=False)
            expect(rc != 0, "create with cgroupsPath %r succeeded" % path)
            expect("linux.cgroupsPath" in err and why in err,
                   "create with cgroupsPath %r: the error does not say linux.cgroupsPath "
                   "and %r: %s" % (path, why, err))
            expect(not os.path.exists(os.path.join(env.root, cid)),
                   "a state directory of %s remains" % cid)
        expect(os.path.isdir(taken) and not read(os.path.join(taken, "cgroup.procs")),
               "the test's own cgroup %s is gone or holds processes" % taken)
        made = {c: sorted(os.listdir(d)) for c, d in cg_dirs(top, tags=True).items()
                if os.path.isdir(d)
                and [n for n in os.listdir(d) if os.path.isdir(os.path.join(d, n))
                     and n != "taken"]}
        expect(not made, "cgroups made below %s by refused creates: %s" % (top, made))
        others = [d for c, d in cg_dirs(top, tags=True).items()
                  if c != first and os.path.exists(d)]
        expect(not others, "a refused create made %s" % others)
    finally:
        cg_parent_removed(top)


@case
def backend_annotation_refusals(env):
    """io.airlock.backend: gvisor and process cannot run a container's own
    root and say so naming the annotation's way out (native, microvm or
    vm); an unknown layer is refused by name; each create leaves no state
    directory."""
    cases = {"gvisor": "cannot run a container's own root filesystem "
                       "(io.airlock.backend: the OCI runtime's containers run on native, "
                       "microvm or vm)",
             "process": "cannot run a container's own root filesystem",
             "bogus": "bogus"}
    for name, why in cases.items():
        cid = env.new_id("backend-" + name)
        b = env.bundle("backend-" + name, ["true"])
        with open(os.path.join(b, "config.json")) as f:
            cfg = json.load(f)
        cfg.setdefault("annotations", {})["io.airlock.backend"] = name
        with open(os.path.join(b, "config.json"), "w") as f:
            json.dump(cfg, f)
        rc, err = env.create(cid, b, expect_ok=False)
        expect(rc != 0 and why in err, "io.airlock.backend=%s: rc %d, %r" % (name, rc, err))
        expect(not os.path.exists(os.path.join(env.root, cid)),
               "a state directory of %s remains" % cid)


@case
def cgroups_path_nested_refused(env):
    """A container whose cgroupsPath lies inside a running container's
    cgroup (/airlock-test-TAG/a/b under /airlock-test-TAG/a) is refused
    naming linux.cgroupsPath and the other container's cgroup; nothing
    is made below the first, whose processes still run."""
    top = "/airlock-test-" + TAG
    try:
        first = env.new_id("cgouter")
        env.create(first, env.bundle("cgouter", SLEEP, linux={"cgroupsPath": top + "/a"}))
        r = env.rt("start", first)
        expect(r.rc == 0, "start failed\n%s" % r.describe())
        env.wait_status(first, "running")
        before = env.ps(first)
        cid = env.new_id("cginner")
        rc, err = env.create(cid, env.bundle("cginner", SLEEP,
                                             linux={"cgroupsPath": top + "/a/b"}),
                             expect_ok=False)
        expect(rc != 0, "a container inside another's cgroup was made")
        expect("linux.cgroupsPath" in err and "another airlock container's" in err,
               "the refusal does not say linux.cgroupsPath and why: %s" % err)
        made = [d for d in cg_dirs(top + "/a/b", tags=True).values() if os.path.exists(d)]
        expect(not made, "the refused create made %s" % made)
        expect(not os.path.exists(os.path.join(env.root, cid)), "a state directory of %s" % cid)
        expect(env.status(first) == "running" and all(alive(p) for p in before),
               "the first container was touched: %s, %s" % (env.status(first), before))
    finally:
        env.rt("delete", "--force", "%s-cgouter" % TAG)
        cg_parent_removed(top)


@case
def cgroups_path_supervisor_killed(env):
    """A container at a cgroupsPath whose supervisor is killed by SIGKILL:
    its cgroup at the path is left by the dead supervisor, and `delete`
    removes it in every hierarchy (airlock gc knows only its own place)."""
    top = "/airlock-test-" + TAG
    path = top + "/dead"
    try:
        cid = env.new_id("cgdead")
        env.create(cid, env.bundle("cgdead", SLEEP, linux={"cgroupsPath": path}))
        r = env.rt("start", cid)
        expect(r.rc == 0, "start failed\n%s" % r.describe())
        env.wait_status(cid, "running")
        procs = env.note_cgroups(cid)
        pid = env.pid_of(cid)
        kill_pid(pid)
        wait_for(lambda: not alive(pid), 10)
        env.wait_status(cid, "stopped")
        dirs = cg_dirs(path, tags=True)
        expect([d for d in dirs.values() if os.path.isdir(d)],
               "no cgroup at the path after the supervisor died (the check is blind)")
        r = env.rt("delete", cid)
        expect(r.rc == 0, "delete failed\n%s" % r.describe())
        env.gone(cid, procs)
        left = [d for d in cg_dirs(path, tags=True).values() if os.path.exists(d)]
        expect(not left, "cgroups at the path remain after delete: %s" % left)
    finally:
        env.rt("delete", "--force", "%s-cgdead" % TAG)
        cg_parent_removed(top)


def foreign_cgroup(path):
    """A cgroup made by the test at path in the first hierarchy airlock
    uses (not airlock's: another runtime's container, say), holding a
    `sleep 60` of the test's (bounded: it ends by itself); (dir, process)."""
    d = next(iter(cg_dirs(path).values()))
    os.mkdir(d)
    victim = subprocess.Popen(["sleep", "60"], start_new_session=True)
    with open(os.path.join(d, "cgroup.procs"), "w") as f:
        f.write(str(victim.pid))
    return d, victim


def foreign_cgroup_removed(d, victim):
    if victim.poll() is None:
        victim.kill()
    victim.wait()
    wait_for(lambda: not read(os.path.join(d, "cgroup.procs")), 5, step=0.05)
    try:
        os.rmdir(d)
    except OSError:
        pass


@case
def cgroups_path_foreign_child(env):
    """A cgroup someone else made below a running container's cgroupsPath
    (the test's, holding a process of the test's): `ps` does not list
    that process, and `delete --force` ends the container's processes but
    not that one; delete succeeds, warning that it leaves the path's
    directory, which is left with the foreign cgroup in it."""
    top = "/airlock-test-" + TAG
    path = top + "/f"
    d = victim = None
    try:
        cid = env.new_id("cgforeign")
        env.create(cid, env.bundle("cgforeign", SLEEP, linux={"cgroupsPath": path}))
        expect(env.rt("start", cid).rc == 0, "start failed")
        env.wait_status(cid, "running")
        d, victim = foreign_cgroup(path + "/foreign")
        ps = env.ps(cid)
        expect(victim.pid not in ps, "ps of the container lists the foreign process: %s" % ps)
        procs = env.note_cgroups(cid)
        log = os.path.join(env.base, "cgforeign.log")
        r = env.rt("--log", log, "delete", "--force", cid)
        expect(r.rc == 0, "delete --force failed\n%s" % r.describe())
        said = read(log)
        expect("level=warning" in said and "did not make" in said
               and os.path.dirname(d) + " " in said,
               "delete does not warn that it leaves the path's directory: %r" % said)
        left = wait_for(lambda: not [p for p, st in procs if alive(p, st)], 10, step=0.05)
        expect(left, "the container's processes remain: %s" % procs)
        time.sleep(0.3)
        expect(victim.poll() is None, "the foreign cgroup's process was killed")
        expect(os.path.isdir(d) and read(os.path.join(d, "cgroup.procs")) == str(victim.pid),
               "the foreign cgroup was touched: %s" % read(os.path.join(d, "cgroup.procs")))
    finally:
        env.rt("delete", "--force", "%s-cgforeign" % TAG)
        if d:
            foreign_cgroup_removed(d, victim)
        cg_parent_removed(top)


@case
def cgroups_path_dead_supervisor_neighbour(env):
    """A container at /airlock-test-TAG/d whose supervisor was SIGKILLed:
    a second container at /airlock-test-TAG/d/b is refused (its cgroup is
    still airlock's), and `delete` of the first kills nothing in a cgroup
    below it that someone else made (the test's /d/b, holding a process)."""
    top = "/airlock-test-" + TAG
    path = top + "/d"
    d = victim = None
    try:
        cid = env.new_id("cgdeada")
        env.create(cid, env.bundle("cgdeada", SLEEP, linux={"cgroupsPath": path}))
        expect(env.rt("start", cid).rc == 0, "start failed")
        env.wait_status(cid, "running")
        procs = env.note_cgroups(cid)
        pid = env.pid_of(cid)
        kill_pid(pid)
        wait_for(lambda: not alive(pid), 10)
        env.wait_status(cid, "stopped")
        other = env.new_id("cgdeadb")
        rc, err = env.create(other, env.bundle("cgdeadb", SLEEP,
                                               linux={"cgroupsPath": path + "/b"}),
                             expect_ok=False)
        expect(rc != 0 and "linux.cgroupsPath" in err and "another airlock container's" in err,
               "a container below a dead one's cgroup: rc %d, %s" % (rc, err))
        d, victim = foreign_cgroup(path + "/b")
        r = env.rt("delete", cid)
        expect(r.rc == 0, "delete failed\n%s" % r.describe())
        left = wait_for(lambda: not [p for p, st in procs if alive(p, st)], 10, step=0.05)
        expect(left, "the container's processes remain: %s" % procs)
        time.sleep(0.3)
        expect(victim.poll() is None, "delete killed the process in the cgroup below")
    finally:
        env.rt("delete", "--force", "%s-cgdeada" % TAG)
        if d:
            foreign_cgroup_removed(d, victim)
        cg_parent_removed(top)


@case
def cgroups_path_nested_created(env):
    """A container created but not started at /airlock-test-TAG/n/c (no
    process in its cgroup yet): one at /airlock-test-TAG/n/c/b (below) is
    refused naming linux.cgroupsPath and the other container's cgroup,
    one at /airlock-test-TAG/n (above) naming linux.cgroupsPath, both
    making nothing. After delete, the parents create made are gone in
    every hierarchy, but /airlock-test-TAG, which the test made first in
    one hierarchy, stays there."""
    top = "/airlock-test-" + TAG
    path = top + "/n/c"
    first = next(iter(cg_dirs(top)))
    try:
        os.makedirs(cg_dirs(top)[first])
        cid = env.new_id("cgcreated")
        env.create(cid, env.bundle("cgcreated", SLEEP, linux={"cgroupsPath": path}))
        for name, p, why in (("below", path + "/b", "another airlock container's"),
                             ("above", top + "/n", "exists already")):
            other = env.new_id("cg" + name)
            rc, err = env.create(other, env.bundle("cg" + name, SLEEP,
                                                   linux={"cgroupsPath": p}), expect_ok=False)
            expect(rc != 0 and "linux.cgroupsPath" in err and why in err,
                   "a container %s a created one's cgroup: rc %d, %s" % (name, rc, err))
            expect(not os.path.exists(os.path.join(env.root, other)),
                   "a state directory of %s" % other)
        made = [d for d in cg_dirs(path + "/b", tags=True).values() if os.path.exists(d)]
        expect(not made, "a refused create made %s" % made)
        expect(env.status(cid) == "created", "the first container is %s" % env.status(cid))
        r = env.rt("delete", cid)
        expect(r.rc == 0, "delete failed\n%s" % r.describe())
        left = [d for d in cg_dirs(top + "/n", tags=True).values() if os.path.exists(d)]
        expect(not left, "parents made by create remain after delete: %s" % left)
        expect(os.path.isdir(cg_dirs(top)[first]), "the test's own parent was removed")
    finally:
        env.rt("delete", "--force", "%s-cgcreated" % TAG)
        cg_parent_removed(top)


@case
def cgroups_path_deep_parents_removed(env):
    """A container at a path of 16 components (the most), none of which
    existed: it runs there, and after it ended and was deleted no cgroup
    directory is left of the 15 parents create made, in any hierarchy."""
    top = "/airlock-test-" + TAG
    path = top + "".join("/p%d" % i for i in range(15))
    try:
        cid = env.new_id("cgdeep")
        env.create(cid, env.bundle("cgdeep", ("true",), linux={"cgroupsPath": path}))
        made = [d for d in cg_dirs(path).values() if not os.path.isdir(d)]
        expect(not made, "after create, not every cgroup at the path exists: %s" % made)
        expect(env.rt("start", cid).rc == 0, "start failed")
        env.wait_status(cid, "stopped")
        r = env.rt("delete", cid)
        expect(r.rc == 0, "delete failed\n%s" % r.describe())
        left = [root for d in cg_dirs(top, tags=True).values() for root, _, _ in os.walk(d)]
        expect(not left, "%d cgroup directories left after delete: %s" % (len(left), left[:4]))
    finally:
        env.rt("delete", "--force", "%s-cgdeep" % TAG)
        cg_parent_removed(top)


@case
def exit_code_of_pid_file_process(env):
    """The pid file's process, waited for as its subreaper (as conmon
    does): exits 42 when the container's process exits 42; dies of
    SIGTERM when the container is killed with TERM (its process dying of
    it)."""
    cid = env.new_id("code42")
    pf, _, _ = env.files(cid)
    p = reaper(env, [env.argv("create", "--bundle", env.bundle("code42", (
        "sh", "-c", "sleep 0.5; exit 42")), "--pid-file", pf, cid), env.argv("start", cid)], pf)
    try:
        first = reaper_line(p, CMD_TIMEOUT)
        expect(first.get("steps") == [0, 0], "create/start failed: %s %r"
               % (first, read(os.path.join(env.base, "reaper.err"))))
        env.pids.add((first["pid"], pid_starttime(first["pid"])))
        end = reaper_line(p, CMD_TIMEOUT)
        expect(end.get("exited") == 42, "the pid file's process ended: %s" % end)
    finally:
        kill_pid(p.pid)
        p.wait()
    expect(env.status(cid) == "stopped", "state %s" % env.state(cid))
    expect(env.rt("delete", cid).rc == 0, "delete failed")

    cid = env.new_id("term")
    pf, _, _ = env.files(cid)
    p = reaper(env, [env.argv("create", "--bundle", env.bundle("term", SLEEP), "--pid-file",
                              pf, cid), env.argv("start", cid)], pf)
    try:
        first = reaper_line(p, CMD_TIMEOUT)
        expect(first.get("steps") == [0, 0], "create/start failed: %s" % first)
        env.pids.add((first["pid"], pid_starttime(first["pid"])))
        env.wait_status(cid, "running")
        r = env.rt("kill", cid, "TERM")
        expect(r.rc == 0, "kill failed\n%s" % r.describe())
        end = reaper_line(p, CMD_TIMEOUT)
        expect(end.get("signaled") == signal.SIGTERM, "the pid file's process ended: %s" % end)
    finally:
        kill_pid(p.pid)
        p.wait()
    expect(env.rt("delete", cid).rc == 0, "delete failed")
    env.gone(cid)

# --- An engine's network namespace (docs/oci.md, exception 3) -------------
#
# The test makes two network namespaces of its own (ip netns, names with
# this run's tag): C, the one handed to the containers as an engine would,
# and P, a peer joined to C by a veth pair, with addresses of the
# documentation ranges (192.0.2.0/24, 2001:db8::/64) that exist only in
# these two namespaces. Listeners of the test run inside them; nothing is
# sent anywhere else. Both are removed at the end, passed or not.

NET_C, NET_P = "al-%s-c" % TAG, "al-%s-p" % TAG
ADDR_C, ADDR_P, ADDR6_P = "192.0.2.1", "192.0.2.2", "2001:db8::2"
PEER_PORT, OWN_PORT, IN_PORT = 8080, 8081, 9000

# A listener for lifetime seconds at most: answers each connection with
# its marker and notes the peer's address in the hits file.
LISTENER = r"""
import socket, sys, time
addr, port, marker, hits = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
s = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET)
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

# A connect from a namespace, outside any sandbox: what the peer said.
CONNECT = r"""
import socket, sys
try:
    c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3)
    print(c.recv(100).decode().strip())
except OSError as e:
    print("failed", e)
"""


def sh(*argv, check=True):
    r = subprocess.run(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    if check and r.returncode != 0:
        raise AssertionError("%s exited %d: %s" % (" ".join(argv), r.returncode,
                                                   r.stderr.decode(errors="replace")))
    return r.stdout.decode(errors="replace")


class NetLab:
    """C and P with their veth pair and listeners (see above)."""

    def __init__(self, env):
        self.env = env
        self.procs = []
        self.dir = os.path.join(env.base, "netlab")
        os.makedirs(self.dir, exist_ok=True)
        self.made = []

    def __enter__(self):
        try:
            for ns in (NET_C, NET_P):
                sh("ip", "netns", "add", ns)
                self.made.append(ns)
            sh("ip", "link", "add", "vc" + TAG, "netns", NET_C, "type", "veth", "peer", "name",
               "vp" + TAG, "netns", NET_P)
            for ns, dev, a4, a6 in ((NET_C, "vc" + TAG, ADDR_C, "2001:db8::1"),
                                    (NET_P, "vp" + TAG, ADDR_P, ADDR6_P)):
                sh("ip", "-n", ns, "addr", "add", a4 + "/24", "dev", dev)
                sh("ip", "-n", ns, "addr", "add", a6 + "/64", "dev", dev, "nodad")
                sh("ip", "-n", ns, "link", "set", dev, "up")
                sh("ip", "-n", ns, "link", "set", "lo", "up")
            # As an engine's: a default route out through the veth.
            sh("ip", "-n", NET_C, "route", "add", "default", "via", ADDR_P)
            self.listen(NET_P, ADDR_P, PEER_PORT, "peer-marker", "peer")
            self.listen(NET_P, ADDR6_P, PEER_PORT, "peer6-marker", "peer6")
            self.listen(NET_C, ADDR_C, OWN_PORT, "own-marker", "own")
        except BaseException:
            self.close()
            raise
        return self

    def listen(self, ns, addr, port, marker, name):
        p = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", LISTENER, addr,
                              str(port), marker, self.hits_file(name)],
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, start_new_session=True)
        self.procs.append(p)
        line = p.stdout.readline().decode()
        expect(line.strip() == "listening", "listener %s:%d: %r %s" % (
            addr, port, line, p.stderr.read(500) if p.poll() is not None else ""))

    def hits_file(self, name):
        return os.path.join(self.dir, name + ".hits")

    def hits(self, name):
        return read(self.hits_file(name)).split()

    def connect_from_c(self, addr, port):
        """Outside any sandbox, from C: what the listener said."""
        return self.connect_from(NET_C, addr, port)

    def connect_from(self, ns, addr, port):
        return sh("ip", "netns", "exec", ns, sys.executable, "-c", CONNECT, addr,
                  str(port)).strip()

    def ruleset(self):
        return sh("nsenter", "--net=/run/netns/" + NET_C, "nft", "list", "ruleset")

    def __exit__(self, *exc):
        self.close()

    def close(self):
        for p in self.procs:
            kill_pid(p.pid)
            p.wait()
        for ns in reversed(self.made):
            sh("ip", "netns", "del", ns, check=False)
        self.made = []


def netns_bundle(env, name, script, path, annotations=None):
    """A bundle running script (busybox sh) whose network namespace is
    path."""
    d = env.bundle(name, ["sh", "-c", script])
    cfgp = os.path.join(d, "config.json")
    with open(cfgp) as f:
        cfg = json.load(f)
    for ns in cfg["linux"]["namespaces"]:
        if ns["type"] == "network":
            ns["path"] = path
    if annotations:
        cfg.setdefault("annotations", {}).update(annotations)
    with open(cfgp, "w") as f:
        json.dump(cfg, f)
    return d


# Each probe: a line "NAME:WHAT THE PEER SAID" (empty when nothing came).
# The three that must get nothing wait 1 s each: a dropped SYN never
# answers, and the peer's listeners, which would see a SYN that got out,
# are read as well.
PROBES = ("echo lo-marker | nc -l -p 7777 & sleep 0.5; "
          "echo \"lo:$(timeout 3 nc 127.0.0.1 7777 </dev/null)\"; "
          "echo \"peer:$(timeout 1 nc %s %d </dev/null)\"; "
          "echo \"own:$(timeout 1 nc %s %d </dev/null)\"; "
          "echo \"peer6:$(timeout 1 nc %s %d </dev/null)\"; "
          % (ADDR_P, PEER_PORT, ADDR_C, OWN_PORT, ADDR6_P, PEER_PORT))


def probe_lines(out):
    return dict(l.split(":", 1) for l in out.splitlines() if ":" in l)


def in_netns(pids, path):
    """Which of pids are not in the namespace at path."""
    want = os.stat(path).st_ino
    return [p for p in pids if os.stat("/proc/%d/ns/net" % p).st_ino != want]


@case
def engine_netns_joined_rules_in_and_out(env):
    """A config naming a network namespace the test made: every process
    of the container is in it; airlock's tables are in it while the
    container runs, and gone after delete; from inside, loopback works
    while the peer's address, the namespace's own non-loopback address
    and the peer's IPv6 address get nothing (the listeners see no
    connection), though from the same namespace outside the sandbox they
    answer, before and after; the peer reaches a listener of the
    container's on the namespace's address (answers of connections made
    from outside pass); a second container given the same path is
    refused naming the field, leaving nothing, the first untouched; the
    host's own namespace is refused."""
    with NetLab(env) as lab:
        path = "/run/netns/" + NET_C
        for addr, port, marker in ((ADDR_P, PEER_PORT, "peer-marker"),
                                   (ADDR_C, OWN_PORT, "own-marker"),
                                   (ADDR6_P, PEER_PORT, "peer6-marker")):
            got = lab.connect_from_c(addr, port)
            expect(got == marker, "the lab does not work (%s:%d said %r): the case would be "
                   "blind" % (addr, port, got))
        before = {n: len(lab.hits(n)) for n in ("peer", "own", "peer6")}
        cid = env.new_id("netns")
        # A listener of the container's own on the namespace's address,
        # for a connection from the peer (inbound: its answers pass).
        env.create(cid, netns_bundle(env, "netns", "echo in-marker | nc -l -p %d & " % IN_PORT
                                     + PROBES + "echo probes-done; exec sleep 300", path))
        ruleset = lab.ruleset()
        expect("table ip airlock" in ruleset and "table ip6 airlock" in ruleset,
               "airlock's tables are not in the namespace after create:\n%s" % ruleset)
        expect(env.rt("start", cid).rc == 0, "start failed")
        out_file = env.files(cid)[1]
        wait_for(lambda: "probes-done" in read(out_file), 30, step=0.1)
        got = probe_lines(read(out_file))
        expect(got.get("lo") == "lo-marker", "loopback inside failed: %r" % read(out_file))
        for name in ("peer", "own", "peer6"):
            expect(got.get(name) == "", "%s answered the sandbox: %r" % (name, read(out_file)))
            expect(len(lab.hits(name)) == before[name],
                   "the %s listener saw a connection: %s" % (name, lab.hits(name)))
        got = lab.connect_from(NET_P, ADDR_C, IN_PORT)
        expect(got == "in-marker", "a connection from the peer to the container's listener "
               "got %r" % got)
        procs = env.note_cgroups(cid)
        pids = [p for p, _ in procs] + [env.pid_of(cid)]
        expect(len(procs) >= 2, "ps shows too few processes: %s" % procs)
        # The pid file's process is the supervisor, on the host's side.
        outside = in_netns([p for p, _ in procs], path)
        expect(not outside, "processes of the container outside the namespace: %s of %s"
               % (outside, pids))

        # The same namespace again while the first runs: refused, nothing made.
        cid2 = env.new_id("netns2")
        rc, err = env.create(cid2, netns_bundle(env, "netns2", "true", path), expect_ok=False)
        expect(rc != 0 and "linux.namespaces[" in err and path in err and "already" in err,
               "a second container in the namespace: rc %d: %s" % (rc, err))
        expect(not os.path.exists(os.path.join(env.root, cid2)),
               "the refused create left its state directory")
        expect(lab.ruleset() == ruleset, "the refused create changed the namespace's rules")
        expect(env.status(cid) == "running", "the first container is not running any more")

        # The host's namespace is never one to install rules in.
        cid3 = env.new_id("hostns")
        rc, err = env.create(cid3, netns_bundle(env, "hostns", "true",
                                                "/proc/%d/ns/net" % os.getpid()),
                             expect_ok=False)
        expect(rc != 0 and "host's own network namespace" in err,
               "the host's namespace: rc %d: %s" % (rc, err))
        expect(not os.path.exists(os.path.join(env.root, cid3)),
               "the refused create left its state directory")
        expect("airlock" not in sh("nft", "list", "tables"),
               "a table airlock is in the host's namespace")

        expect(env.rt("delete", "--force", cid).rc == 0, "delete failed")
        env.gone(cid, procs)
        ruleset = lab.ruleset()
        expect("airlock" not in ruleset, "airlock's tables remain after delete:\n%s" % ruleset)
        for addr, port, marker in ((ADDR_P, PEER_PORT, "peer-marker"),
                                   (ADDR_C, OWN_PORT, "own-marker")):
            got = lab.connect_from_c(addr, port)
            expect(got == marker, "%s:%d from the namespace after delete: %r"
                   % (addr, port, got))


# A UDP listener of the peer's for lifetime seconds at most: notes each
# datagram in the hits file.
UDP_LISTENER = r"""
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
s.settimeout(0.2)
print("listening", flush=True)
end = time.monotonic() + 120
while time.monotonic() < end:
    try:
        d, a = s.recvfrom(100)
    except socket.timeout:
        continue
    with open(sys.argv[3], "a") as f:
        f.write(a[0] + "\n")
"""


@case
def engine_netns_supervisor_killed(env):
    """The supervisor of a container in the test's namespace killed
    (SIGKILL) while the container sends UDP to the peer without pause
    (eight loops, bounded to 60 s, and 60 sleeping processes): the container is killed before
    airlock's tables leave the namespace, so that the peer receives
    nothing, in several rounds (the test's own UDP from the namespace,
    outside any sandbox, does reach it); the tables still leave (removed
    by the process airlock keeps in it for that), and a new container can
    use the namespace."""
    rounds = 6
    with NetLab(env) as lab:
        path = "/run/netns/" + NET_C
        udp = subprocess.Popen(["ip", "netns", "exec", NET_P, sys.executable, "-c",
                                UDP_LISTENER, ADDR_P, "9999", lab.hits_file("udp")],
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, start_new_session=True)
        lab.procs.append(udp)
        expect(udp.stdout.readline().decode().strip() == "listening", "no UDP listener")
        send = ("import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                "s.sendto(b'control', ('%s', 9999))" % ADDR_P)
        sh("ip", "netns", "exec", NET_C, sys.executable, "-c", send)
        wait_for(lambda: lab.hits("udp"), 5, step=0.05)
        expect(len(lab.hits("udp")) == 1, "the control datagram did not reach the peer: the "
               "case would be blind")
        loop = ("end=$(($(date +%%s) + 60)); while [ $(date +%%s) -lt $end ]; do "
                "tftp -g -r f -l /dev/null %s 9999 2>/dev/null; done" % ADDR_P)
        for i in range(rounds):
            cid = env.new_id("netnskill%d" % i)
            env.create(cid, netns_bundle(env, "netnskill%d" % i,
                                         # 60 sleepers: a pid namespace
                                         # slower to die.
                                         "for i in $(seq 60); do sleep 60 & done; "
                                         + "(%s) & " * 7 % ((loop,) * 7) + loop, path))
            expect("table ip airlock" in lab.ruleset(), "no rules after create")
            expect(env.rt("start", cid).rc == 0, "start failed")
            time.sleep(0.5)
            procs = env.note_cgroups(cid)
            expect(len(procs) >= 9, "the container's loops are not running: %s" % procs)
            kill_pid(env.pid_of(cid))
            wait_for(lambda: "airlock" not in lab.ruleset(), 10, step=0.05)
            ruleset = lab.ruleset()
            expect("airlock" not in ruleset,
                   "rules remain after the supervisor died:\n%s" % ruleset)
            left = [p for p, t in procs if alive(p, t)]
            expect(not left, "processes of the container outlive the rules: %s" % left)
            time.sleep(0.2)
            expect(len(lab.hits("udp")) == 1, "round %d: the container's UDP reached the peer "
                   "around its supervisor's death: %s" % (i, lab.hits("udp")))
            expect(env.rt("delete", "--force", cid).rc == 0, "delete failed")
        cid2 = env.new_id("netnsagain")
        env.create(cid2, netns_bundle(env, "netnsagain", "true", path))
        expect(env.rt("delete", "--force", cid2).rc == 0, "delete failed")
        expect("airlock" not in lab.ruleset(), "rules remain after delete")


@case
def engine_netns_one_table_gone(env):
    """One of airlock's two tables removed by hand while the container
    runs (ip6, then ip in a second round): delete still removes the
    other, and a new container can use the namespace."""
    with NetLab(env) as lab:
        path = "/run/netns/" + NET_C
        for fam in ("ip6", "ip"):
            cid = env.new_id("onegone" + fam)
            env.create(cid, netns_bundle(env, "onegone" + fam, "exec sleep 300", path))
            sh("nsenter", "--net=" + path, "nft", "delete", "table", fam, "airlock")
            expect(env.rt("delete", "--force", cid).rc == 0, "delete failed")
            ruleset = lab.ruleset()
            expect("airlock" not in ruleset, "with table %s gone first, the other remains "
                   "after delete:\n%s" % (fam, ruleset))
            again = env.new_id("onegoneagain" + fam)
            env.create(again, netns_bundle(env, "onegoneagain", "true", path))
            expect(env.rt("delete", "--force", again).rc == 0, "delete failed")


@case
def engine_netns_later_tables_kept(env):
    """A's tables removed by hand while A runs, then B made in the same
    namespace: deleting A leaves B's tables (removed by their handles,
    not by name); deleting B removes
    them."""
    with NetLab(env) as lab:
        path = "/run/netns/" + NET_C
        a = env.new_id("handlea")
        env.create(a, netns_bundle(env, "handlea", "exec sleep 300", path))
        for fam in ("ip", "ip6"):
            sh("nsenter", "--net=" + path, "nft", "delete", "table", fam, "airlock")
        b = env.new_id("handleb")
        env.create(b, netns_bundle(env, "handleb", "exec sleep 300", path))
        before = lab.ruleset()
        expect(env.rt("delete", "--force", a).rc == 0, "delete of A failed")
        after = lab.ruleset()
        expect(after == before and "table ip airlock" in after and "table ip6 airlock" in after,
               "deleting A changed B's tables:\n%s\nbefore:\n%s" % (after, before))
        expect(env.rt("delete", "--force", b).rc == 0, "delete of B failed")
        ruleset = lab.ruleset()
        expect("airlock" not in ruleset, "B's tables remain after its delete:\n%s" % ruleset)


@case
def engine_netns_refused_writes_no_sysctl(env):
    """A second container in the namespace, refused (the first one's
    tables are there), whose config sets a net sysctl: the namespace's
    value is unchanged; the first container, given the same key, did set
    it."""
    with NetLab(env) as lab:
        path = "/run/netns/" + NET_C
        key = "/proc/sys/net/ipv4/ip_local_port_range"

        def port_range():
            return sh("ip", "netns", "exec", NET_C, "cat", key).split()

        def with_sysctl(name, value):
            d = netns_bundle(env, name, "exec sleep 300", path)
            cfgp = os.path.join(d, "config.json")
            with open(cfgp) as f:
                cfg = json.load(f)
            cfg["linux"]["sysctl"] = {"net.ipv4.ip_local_port_range": value}
            with open(cfgp, "w") as f:
                json.dump(cfg, f)
            return d

        cid = env.new_id("sysctlfirst")
        env.create(cid, with_sysctl("sysctlfirst", "40000 40200"))
        expect(port_range() == ["40000", "40200"], "the first container's sysctl is not "
               "in the namespace: %s" % port_range())
        cid2 = env.new_id("sysctlsecond")
        rc, err = env.create(cid2, with_sysctl("sysctlsecond", "41000 41100"), expect_ok=False)
        expect(rc != 0 and "already" in err, "the second container: rc %d: %s" % (rc, err))
        expect(port_range() == ["40000", "40200"], "the refused create changed the "
               "namespace's sysctl: %s" % port_range())
        expect(env.rt("delete", "--force", cid).rc == 0, "delete failed")


@case
def engine_netns_foreign_userns_refused(env):
    """A network namespace owned by another user namespace (made by
    unshare -Urn as uid 65534, held by a sleeping process of the test):
    its root could remove airlock's rules, so create refuses it naming
    the field, leaving no state directory and no table in it; so it does
    for a pod's sandbox container, whose supervisor would enter it."""
    sleeper = ["unshare", "-Urn", "sh", "-c", "echo ready; exec sleep 60"]
    p = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
                         + sleeper, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, start_new_session=True)
    try:
        line = p.stdout.readline().decode().strip()
        if line != "ready":
            # No unprivileged user namespaces here: root's own unshare -Urn
            # makes one owned by another user namespace just as well.
            p.wait()
            p = subprocess.Popen(sleeper, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, start_new_session=True)
            line = p.stdout.readline().decode().strip()
        if line != "ready":
            raise AssertionError("unshare -Urn failed: %r" % p.stderr.read(300))
        # unshare execs sh, which execs sleep: p.pid holds the namespace.
        path = "/proc/%d/ns/net" % p.pid
        cid = env.new_id("foreignuser")
        rc, err = env.create(cid, netns_bundle(env, "foreignuser", "exec sleep 60", path),
                             expect_ok=False)
        expect(rc != 0 and "linux.namespaces[" in err and "another user namespace" in err,
               "a namespace owned by another user namespace: rc %d: %s" % (rc, err))
        expect(not os.path.exists(os.path.join(env.root, cid)),
               "the refused create left its state directory")
        rules = sh("nsenter", "--net=" + path, "nft", "list", "ruleset")
        expect("airlock" not in rules, "airlock's tables are in the namespace:\n%s" % rules)
        # Nor does a pod's sandbox container's supervisor enter it.
        cid = env.new_id("foreignsandbox")
        rc, err = env.create(cid, netns_bundle(env, "foreignsandbox", "exec sleep 60", path, {
            "io.kubernetes.cri.container-type": "sandbox"}), expect_ok=False)
        expect(rc != 0 and "the pod's network namespace" in err and
               "another user namespace" in err,
               "a pod sandbox given a namespace of another user namespace: rc %d: %s"
               % (rc, err))
        expect(not os.path.exists(os.path.join(env.root, cid)),
               "the refused create left its state directory")
    finally:
        kill_pid(p.pid)
        p.wait()


@case
def engine_netns_pod_sandbox_not_joined(env):
    """A pod's sandbox (pause) container, as containerd's CRI marks it,
    given the test's namespace: it is not joined (the container's
    processes are in another namespace, with only lo) and no airlock
    table goes into it, but its supervisor, the state's pid, is in it;
    the pod's app container then joins it as containerd's CRI names it,
    /proc/PID/ns/net of that pid; the same with CRI-O's annotation. A
    sandbox container given the host's namespace is refused."""
    with NetLab(env) as lab:
        path = "/run/netns/" + NET_C
        for key in ("io.kubernetes.cri.container-type", "io.kubernetes.cri-o.ContainerType"):
            cid = env.new_id("podsandbox")
            env.create(cid, netns_bundle(env, "podsandbox", "exec sleep 300", path,
                                         {key: "sandbox"}))
            expect(env.rt("start", cid).rc == 0, "start failed")
            procs = env.note_cgroups(cid)
            expect(procs, "ps shows no process of the sandbox container")
            pids = [p for p, _ in procs]
            expect(in_netns(pids, path) == pids,
                   "%s=sandbox: processes in the given namespace: %s" % (key, pids))
            links = sh("nsenter", "--net=/proc/%d/ns/net" % pids[0], "ip", "-o", "link")
            expect(": lo:" in links and "vc" + TAG not in links,
                   "the sandbox container's namespace has the lab's veth:\n%s" % links)
            ruleset = lab.ruleset()
            expect("airlock" not in ruleset,
                   "%s=sandbox: airlock's tables in the given namespace:\n%s" % (key, ruleset))
            sup = env.state(cid)["pid"]
            expect(sup > 0 and not in_netns([sup], path),
                   "%s=sandbox: the state's pid %d is not in the given namespace"
                   % (key, sup))
            # The pod's app container then joins it, as containerd's CRI
            # gives it: the sandbox's pid's namespace.
            app = env.new_id("podapp")
            env.create(app, netns_bundle(env, "podapp", "true", "/proc/%d/ns/net" % sup))
            expect("table ip airlock" in lab.ruleset(), "the app container's rules are missing")
            expect(env.rt("delete", "--force", app).rc == 0, "delete failed")
            expect(env.rt("delete", "--force", cid).rc == 0, "delete failed")
            env.gone(cid, procs)
            expect("airlock" not in lab.ruleset(), "rules remain after delete")
        # Its supervisor never sits in the runtime's own (the host's)
        # namespace: app containers told to join it would be given it.
        cid = env.new_id("podsandbox-host")
        rc, err = env.create(cid, netns_bundle(
            env, "podsandbox-host", "exec sleep 300", "/proc/%d/ns/net" % os.getpid(),
            {"io.kubernetes.cri.container-type": "sandbox"}), expect_ok=False)
        expect(rc != 0 and "the pod's network namespace" in err and
               "host's own network namespace" in err,
               "a pod sandbox given the host's namespace: rc %d: %s" % (rc, err))
        expect(not os.path.exists(os.path.join(env.root, cid)),
               "the refused create left its state directory")


def run_start(audit):
    """The run.start event of the audit stream at audit."""
    with open(audit) as f:
        starts = [e for e in map(json.loads, f) if e.get("event") == "run.start"]
    expect(len(starts) == 1, "%s holds %d run.start events" % (audit, len(starts)))
    return starts[0]


@case
def pod_sandbox_lifetime(env):
    """A pod's sandbox container lives as long as its pod: without the
    pod's io.airlock.timeout it gets the longest lifetime allowed (a year
    without an operator policy; the profile's ceiling under one, 600 s
    here), not the default (60 s), which would end the pod under its app
    containers, and run.start's oci.exceptions says so; with the
    annotation, the annotation's. An app container keeps the default."""
    with NetLab(env):
        path = "/run/netns/" + NET_C
        audit_dir = os.path.join(env.base, "audit-lifetime")
        os.makedirs(audit_dir)
        op = os.path.join(env.base, "op-lifetime.json")
        with open(op, "w") as f:
            json.dump({"version": 1, "profiles": {"default": {
                "filesystem": {"rw": [env.base]},
                "limits": {"timeout": {"max": "10m", "default": "30s"}}}}}, f)
        cases = [("sandbox", {}, [], 365 * 24 * 3600 * 1000, True),
                 ("sandbox", {"io.airlock.timeout": "7"}, [], 7000, False),
                 ("sandbox", {}, ["--operator-policy", op], 600 * 1000, True),
                 ("container", {}, [], 60 * 1000, False)]
        for i, (kind, ann, flags, want, noted) in enumerate(cases):
            cid = env.new_id("lifetime%d" % i)
            env.flags = ["--audit-dir", audit_dir] + flags
            try:
                b = netns_bundle(env, "lifetime%d" % i, "exec sleep 300", path)
                with open(os.path.join(b, "config.json")) as f:
                    cfg = json.load(f)
                # Only these (`spec` writes an io.airlock.timeout).
                cfg["annotations"] = dict(ann, **{"io.kubernetes.cri.container-type": kind})
                with open(os.path.join(b, "config.json"), "w") as f:
                    json.dump(cfg, f)
                env.create(cid, b)
                start = run_start(os.path.join(audit_dir, "container-%s.jsonl" % cid))
                got = start.get("limits", {}).get("timeout_ms")
                expect(got == want, "%s %s %s: timeout_ms %s, not %d"
                       % (kind, ann, flags, got, want))
                notes = [e for e in start.get("oci", {}).get("exceptions", [])
                         if e.get("field") == "io.airlock.timeout"]
                expect(bool(notes) == noted, "%s %s %s: oci.exceptions on the timeout: %s"
                       % (kind, ann, flags, notes))
                expect(env.rt("delete", "--force", cid).rc == 0, "delete failed")
                env.gone(cid)
            finally:
                env.flags = []


@case
def engine_netns_fifo_refused(env):
    """A FIFO as the network namespace's path: create is refused at once
    (never blocked in an open of it) naming the field."""
    fifo = os.path.join(env.base, "netns-fifo")
    os.mkfifo(fifo)
    cid = env.new_id("fifo")
    p = env.create_popen(cid, netns_bundle(env, "fifo", "true", fifo))
    try:
        rc = p.wait(10)
    except subprocess.TimeoutExpired:
        # Unblock the open (a writer), so that create ends.
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        p.wait(CMD_TIMEOUT)
        raise AssertionError("create with a FIFO as the network namespace hangs")
    finally:
        if p.poll() is None:
            kill_pid(p.pid)
            p.wait()
        os.unlink(fifo)
    err = read(env.files(cid)[2])
    expect(rc != 0 and "linux.namespaces[" in err and "not a namespace" in err,
           "a FIFO as the namespace: rc %d: %s" % (rc, err))
    expect(not os.path.exists(os.path.join(env.root, cid)),
           "the refused create left its state directory")


@case
def engine_netns_gateway(env):
    """With io.airlock.network.allow and io.airlock.network.hosts mapping
    api.test to the test's HTTP server on the host's 127.0.0.1, a
    container in the test's namespace reaches http://api.test:PORT/
    through the gateway (its resolver is airlock's stub at 127.0.0.1),
    while the peer in its namespace gets nothing; the tables are gone once
    the container ended by itself."""
    with LoopbackApi() as api, NetLab(env) as lab:
        port = api.port
        path = "/run/netns/" + NET_C
        before = len(lab.hits("peer"))
        # nc, not busybox's wget (which crashes on its proxy answer):
        # the transparent capture, the way a program that ignores
        # http_proxy goes.
        script = ("echo \"resolv:$(grep nameserver /etc/resolv.conf | tr '\\n' ' ')\"; "
                  "printf 'GET /ok HTTP/1.0\\r\\nHost: api.test\\r\\n\\r\\n' | "
                  "timeout 10 nc api.test %d | tail -n 1 | sed 's/^/api:/'; "
                  "echo \"peer:$(timeout 3 nc %s %d </dev/null)\"; echo probes-done"
                  % (port, ADDR_P, PEER_PORT))
        cid = env.new_id("netnsgw")
        env.create(cid, netns_bundle(env, "netnsgw", script, path, {
            "io.airlock.network.allow": "api.test:%d" % port,
            "io.airlock.network.hosts": "api.test=127.0.0.1"}))
        ruleset = lab.ruleset()
        expect("redirect to :15001" in ruleset,
               "no capture in the namespace after create:\n%s" % ruleset)
        expect(env.rt("start", cid).rc == 0, "start failed")
        env.wait_status(cid, "stopped", timeout=60)
        out = read(env.files(cid)[1])
        got = probe_lines(out)
        expect(got.get("resolv", "").split() == ["nameserver", "127.0.0.1"],
               "the resolver is not airlock's stub: %r" % out)
        expect(got.get("api") == "api-answer-marker", "the API was not reached: %r" % out)
        expect(api.paths() == ["/ok"], "the API saw %s" % api.hits)
        expect(got.get("peer") == "" and len(lab.hits("peer")) == before,
               "the peer answered: %r, hits %s" % (out, lab.hits("peer")))
        expect(env.rt("delete", cid).rc == 0, "delete failed")
        env.gone(cid)
        ruleset = lab.ruleset()
        expect("airlock" not in ruleset, "airlock's tables remain:\n%s" % ruleset)
        routes = sh("ip", "-n", NET_C, "route", "show", "table", "all")
        expect("198.18.0.0/15" not in routes, "the gateway's route remains:\n%s" % routes)


def main():
    if len(sys.argv) < 2:
        print("usage: %s RUNTIME [CASE-SUBSTRING...]" % sys.argv[0], file=sys.stderr)
        return 2
    runtime = sys.argv[1]
    if not os.access(runtime, os.X_OK):
        print("1..0 # SKIP runtime %s not found" % runtime)
        return 0
    if os.geteuid() != 0:
        print("1..0 # SKIP needs root (an OCI runtime's containers)")
        return 0
    t0 = time.monotonic()
    env = Env(runtime)
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(1))
    faulthandler.register(signal.SIGUSR1)  # where a stuck run is: kill -USR1 PID
    try:
        env.setup()
        print("# runtime %s, state under %s, tag %s" % (env.runtime, env.root, TAG), flush=True)
        rc = suite.run(env, only=sys.argv[2:])
    finally:
        left = env.close()
        print("# total %.1fs" % (time.monotonic() - t0), flush=True)
    if left:
        print("# mounts left below %s after cleanup: %s" % (env.base, left))
        return 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
