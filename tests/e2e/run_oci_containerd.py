#!/usr/bin/python3
"""containerd with an OCI runtime under test (TAP), through ctr and the
standard runc v2 shim (io.containerd.runc.v2).

usage: run_oci_containerd.py RUNTIME [NAME] [CASE-SUBSTRING...]

RUNTIME is the runc-compatible binary the shim is given (airlock-runc, or
runc); NAME is how the messages call it. The test starts a containerd of
its own (tests/oci/images.py: a config written here, its own root, state
and socket, no CRI plugin, snapshotter overlayfs), imports the busybox
root made from this host's files as an OCI archive, and runs it:

  - `ctr run --rm --runc-binary RUNTIME IMAGE ID /bin/true`, and a command's
    exit code returned by ctr;
  - the runtime the shim calls is the one given: ctr 1.6 cannot select a
    configured handler (containerd's `runtimes.NAME` tables are the CRI
    plugin's, and ctr ignores --runtime-config-path for io.containerd.runc.v2),
    but --runc-binary sets the same shim option, BinaryName: a wrapper of
    RUNTIME given there records its calls;
  - a task started detached, exec'd into (exit code), killed and deleted,
    leaving no process, mount or runtime state.

Skipped with the reason when containerd or ctr is missing, the test is not
root, or the daemon does not start here. Everything is under one temporary
directory removed at the end (the daemon stopped by its pid first).
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "oci"))

import images  # noqa: E402
from harness import Skip, Suite, children_of, expect, own_mount_ns, wait_for  # noqa: E402

IMAGE = "localhost/al-busybox:latest"


class ContainerdSuite(Suite):
    def nothing_left_behind(self, env):
        """After all cases: ctr lists no container and no task, no trace of
        any container a case made (see task_exec_kill_delete), no child
        process of the test but the daemon."""
        r = env.ctr("containers", "list", "--quiet", check=False)
        expect(not r.stdout.strip(), "ctr still lists containers: %s" % r.stdout)
        r = env.ctr("tasks", "list", "--quiet", check=False)
        expect(not r.stdout.strip(), "ctr still lists tasks: %s" % r.stdout)
        left = {c: t for c in env.made for t in [traces(env, c)] if t}
        expect(not left, "traces of the cases' containers remain: %s" % left)
        kids = [k for k in children_of(os.getpid()) if k != env.ctd.proc.pid]
        expect(not kids, "child processes of the test remain: %s" % kids)


suite = ContainerdSuite()
case = suite.case


class Env:
    def __init__(self, runtime, name):
        self.runtime = os.path.abspath(runtime)
        self.name = name
        self.base = tempfile.mkdtemp(prefix="airlock-e2e-oci-ctr-")
        self.ctd = images.Containerd(os.path.join(self.base, "containerd"))
        self.made = []
        self.seq = 0

    def setup(self):
        t0 = time.monotonic()
        self.ctd.start()
        bb = images.busybox_root(os.path.join(self.base, "busybox"))
        self.ctd.import_root(bb, IMAGE)
        return time.monotonic() - t0

    def new_id(self):
        self.seq += 1
        cid = "al-test-%d-%d" % (os.getpid(), self.seq)
        self.made.append(cid)
        return cid

    def ctr(self, *args, check=False, timeout=120):
        return self.ctd.ctr(*args, check=check, timeout=timeout)

    def run(self, cid, *cmd, flags=(), runtime_flags=None):
        """ctr run --rm with the runtime (--runc-binary unless runtime_flags
        says otherwise) and the private FIFO and runc root directories."""
        rt = ["--runc-binary", self.runtime] if runtime_flags is None else list(runtime_flags)
        return self.ctr("run", "--rm", *self.ctd.run_flags(), *rt, *flags, IMAGE, cid, *cmd)

    def close(self):
        self.ctd.close()
        left = images.mounts_below(self.base)
        shutil.rmtree(self.base, ignore_errors=True)
        return left


def describe(r):
    return "command: %s\nexit: %d\nstdout: %r\nstderr: %r" % (
        " ".join(r.args), r.returncode, r.stdout[-1500:], r.stderr[-1500:])


def expect_rc(r, rc):
    expect(r.returncode == rc, "expected exit %d, got %d\n%s" % (rc, r.returncode, describe(r)))


def traces(env, cid):
    """What of container cid is on the host: mounts naming it, processes
    with it in their command line (the shim's and the runtime's), its
    cgroup at the cgroupsPath ctr gives (/NAMESPACE/ID) in any hierarchy,
    the runtime's state under the private runc root, a `RUNTIME state`
    answer."""
    found = []
    for top in ["/sys/fs/cgroup"] + [os.path.join("/sys/fs/cgroup", c)
                                     for c in os.listdir("/sys/fs/cgroup")]:
        d = os.path.join(top, images.Containerd.NAMESPACE, cid)
        if os.path.isdir(d):
            found.append("cgroup " + d)
    with open("/proc/self/mountinfo") as f:
        found += ["mount " + l.split()[4] for l in f if cid in l]
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open("/proc/%s/cmdline" % p, "rb") as f:
                    cmd = f.read()
            except OSError:
                continue
            if cid.encode() in cmd:
                found.append("process %s: %s" % (p, cmd.replace(b"\0", b" ")[:300]))
    root = os.path.join(env.ctd.run_flags()[3], images.Containerd.NAMESPACE)
    if os.path.exists(os.path.join(root, cid)):
        found.append("runtime state " + os.path.join(root, cid))
    r = subprocess.run([env.runtime, "--root", root, "state", cid], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=30)
    if r.returncode == 0:
        found.append("`%s state` still answers: %s" % (env.name, r.stdout[:200]))
    return found


@case
def run_true(env):
    """`ctr run --rm --runc-binary RUNTIME IMAGE ID /bin/true` exits 0."""
    t0 = time.monotonic()
    r = env.run(env.new_id(), "/bin/true")
    expect_rc(r, 0)
    print("# %s: ctr run --rm /bin/true took %.2fs" % (env.name, time.monotonic() - t0))


@case
def run_exit_code(env):
    """ctr returns the command's exit code (7) and relays its output."""
    r = env.run(env.new_id(), "sh", "-c", "echo out-marker; exit 7")
    expect_rc(r, 7)
    expect(r.stdout.decode().strip() == "out-marker", "output not relayed\n%s" % describe(r))


@case
def runc_binary_is_used(env):
    """The shim runs the binary it is given (--runc-binary sets the runc
    shim's options.BinaryName, the field a containerd `runtimes.NAME`
    handler's options set): a wrapper of RUNTIME given that way records the
    create, start and delete of the container, and the command's exit code
    (5) comes back."""
    calls = os.path.join(env.base, "wrapper-calls.txt")
    wrapper = os.path.join(env.base, "runtime-wrapper")
    with open(wrapper, "w") as f:
        f.write('#!/bin/sh\necho "$*" >> %s\nexec %s "$@"\n' % (calls, env.runtime))
    os.chmod(wrapper, 0o755)
    cid = env.new_id()
    r = env.run(cid, "sh", "-c", "exit 5", runtime_flags=["--runc-binary", wrapper])
    expect_rc(r, 5)
    try:
        with open(calls) as f:
            lines = f.read().splitlines()
    except OSError:
        lines = []
    verbs = {w for l in lines if cid in l for w in l.split() if w in ("create", "start", "delete")}
    expect(verbs == {"create", "start", "delete"},
           "the wrapper given as --runc-binary saw %s of %s, not create, start and delete: %s"
           % (sorted(verbs), cid, lines))


@case
def task_exec_kill_delete(env):
    """A task started with `ctr run -d`, an exec in it (exit code 4), then
    `ctr task kill -s SIGKILL`, `task delete`, `container delete`: nothing of
    it is left (no process, mount, cgroup at its cgroupsPath or runtime
    state; RUNTIME state fails); while it runs, its cgroup is there."""
    cid = env.new_id()
    r = env.ctr("run", "-d", *env.ctd.run_flags(), "--runc-binary", env.runtime, IMAGE, cid,
                "sleep", "300")
    expect_rc(r, 0)
    try:
        r = env.ctr("task", "exec", "--fifo-dir", env.ctd.run_flags()[1], "--exec-id", "e1", cid,
                    "sh", "-c", "exit 4")
        expect_rc(r, 4)
        r = env.ctr("task", "list")
        expect(cid in r.stdout.decode() and "RUNNING" in r.stdout.decode(),
               "the task is not listed running\n%s" % describe(r))
        found = traces(env, cid)
        expect([t for t in found if t.startswith("cgroup ")],
               "a running container shows no cgroup at /%s/%s (the check is blind): %s"
               % (images.Containerd.NAMESPACE, cid, found))
        expect_rc(env.ctr("task", "kill", "--signal", "SIGKILL", cid), 0)
        stopped = wait_for(lambda: "STOPPED" in env.ctr("task", "list").stdout.decode(), 30,
                           step=0.2)
        expect(stopped, "the task did not stop within 30 s of SIGKILL")
        expect_rc(env.ctr("task", "delete", cid), 0)
    finally:
        env.ctr("task", "delete", "--force", cid)
        env.ctr("container", "delete", cid)
    wait_for(lambda: not traces(env, cid), 15, step=0.2)  # the shim's exit
    left = traces(env, cid)
    expect(not left, "left 15 s after delete: %s" % left)


def main():
    if len(sys.argv) < 2:
        print("usage: %s RUNTIME [NAME] [CASE-SUBSTRING...]" % sys.argv[0], file=sys.stderr)
        return 2
    runtime = sys.argv[1]
    name = sys.argv[2] if len(sys.argv) > 2 else os.path.basename(runtime)
    for prog in ("containerd", "ctr", "containerd-shim-runc-v2"):
        if shutil.which(prog) is None:
            print("1..0 # SKIP %s is not installed" % prog)
            return 0
    if not os.access(runtime, os.X_OK):
        print("1..0 # SKIP runtime %s not found" % runtime)
        return 0
    if os.geteuid() != 0:
        print("1..0 # SKIP needs root (containerd)")
        return 0
    t0 = time.monotonic()
    own_mount_ns()  # the daemon's and the shims' mounts in a namespace of ours
    env = Env(runtime, name)
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(1))
    try:
        try:
            took = env.setup()
        except RuntimeError as err:
            print("1..0 # SKIP containerd cannot run here: %s" % str(err).splitlines()[0])
            return 0
        print("# runtime %s (%s); containerd started and image imported in %.1fs"
              % (name, env.runtime, took), flush=True)
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
