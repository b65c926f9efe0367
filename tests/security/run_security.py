#!/usr/bin/python3
"""Attacks from inside an airlock sandbox, judged by host-side evidence (TAP).

usage: run_security.py AIRLOCK PROBE [CASE-SUBSTRING...]

Each case tries one way out (or one way to hurt the host) with the static
probe, and asserts something that would fail if the protection broke: the
host file is unchanged, the host process is alive, the host listener saw no
connection, the host path does not appear in a listing, the errno is the one
the filter gives. Attacks use harmless payloads, and the probe refuses its
attack subcommands (kill, syscall, mount-tmpfs, ...) unless it finds itself
confined (no_new_privs, seccomp, not uid 0): a broken airlock makes these
cases fail, never harms the host. Never run an attack by hand outside the
sandbox: `probe kill -1 9` as root on the host kills every process.
"""

import fcntl
import json
import os
import random
import select
import shutil
import socket
import struct
import subprocess
import sys
import termios
import time
import tty

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))

from harness import (PIN_BASE, pinned_opts, multi, expect_one_error_line, HOST_SANDBOX_UID, IS_ROOT, PROBE_IN, Skip, Suite,  # noqa: E402
                     TempDir, children_of, expect, expect_errno, expect_ok, expect_rc, finish,
                     host_mount_count,
                     kill_pid, kv, main, read_outputs, sha256_file, shquote, start, tag,
                     write_file)
from harness import (AT_HOST_PATHS, HIDDEN, OWN_KERNEL, bind, in_pool_user, lacks,  # noqa: E402
                     per_backend)

suite = Suite()
case = suite.case

DENIED = ("EACCES", "EPERM")




def first(sections, label):
    return sections[label][0] if sections[label] else ""


def expect_step_errno(res, sections, label, allowed):
    line = first(sections, label)
    got = line.split("errno=", 1)[1] if "errno=" in line else None
    expect(got in allowed, "step %s: expected errno in %s, probe said %r"
           % (label, "/".join(allowed), line), res)


def host_only_root_entries():
    """Names in the host's / that the sandbox's / must never show."""
    sandbox = {"usr", "bin", "lib", "lib64", "sbin", "etc", "proc", "dev", "tmp", "work",
               "opt", "input"}
    return set(os.listdir("/")) - sandbox


# ---- /proc escapes -----------------------------------------------------------

@case
def proc_root_links_stay_inside(e):
    """/proc/1/root and /proc/self/root do not lead to the host's root: pid 1
    (the sandbox init) is out of reach, and /proc/self/root is the sandbox's
    own /, showing none of the host-only top-level entries."""
    res, s = multi(e, [("init_root", ["ls", "/proc/1/root/"]),
                        ("init_cwd", ["ls", "/proc/1/cwd/"]),
                        ("init_shadow", ["read", "/proc/1/root/etc/shadow"]),
                        ("self_root", ["ls", "/proc/self/root/"]),
                        ("self_shadow", ["read", "/proc/self/root/etc/shadow"]),
                        ("root", ["ls", "/"])])
    host_only = host_only_root_entries()
    for label in ("init_root", "init_cwd"):
        if first(s, label) == "ok":
            leaked = set(s[label][1:]) & host_only
            expect(not leaked, "%s shows host entries %s" % (label, sorted(leaked)), res)
        else:
            expect_step_errno(res, s, label, DENIED)
    expect_step_errno(res, s, "init_shadow", DENIED + ("ENOENT",))
    expect_step_errno(res, s, "self_shadow", ("ENOENT",))
    expect(s["self_root"] == s["root"], "/proc/self/root lists %r but / lists %r"
           % (s["self_root"], s["root"]), res)
    leaked = set(s["self_root"][1:]) & host_only
    expect(not leaked, "/proc/self/root shows host entries %s" % sorted(leaked), res)


@case
def init_is_out_of_reach(e):
    """The sandbox init (pid 1, non-dumpable) cannot be inspected: its fds,
    environ and mem are closed to the command, and ptrace is denied."""
    res, s = multi(e, [("fd", ["ls", "/proc/1/fd"]), ("environ", ["read", "/proc/1/environ"]),
                        ("mem_w", ["open", "/proc/1/mem", "w"]),
                        ("mem_r", ["open", "/proc/1/mem", "r"]),
                        ("ptrace", ["ptrace", "1"])])
    for label in ("fd", "environ", "mem_w", "mem_r"):
        expect_step_errno(res, s, label, DENIED)
    expect_step_errno(res, s, "ptrace", ("EPERM",))


@case
def ptrace_sibling_denied(e):
    """A process cannot ptrace another sandbox process of the same uid."""
    res = e.run(["/bin/sh", "-c", "sleep 5 & pid=$!; %s ptrace $pid; kill $pid" % PROBE_IN])
    expect_errno(res, "EPERM")


@per_backend("hides_processes")
@case
def host_processes_invisible(e):
    """A host process (a sleep with a unique argument, running as the
    sandbox's own host uid: the run pins its range to know it) is invisible
    in the sandbox's /proc, and kill() of its host pid finds nothing."""
    arg = "59.%09d" % random.randrange(10 ** 9)
    canary = start_canary(arg)
    try:
        res = e.run(["/bin/sh", "-c", "cat /proc/[0-9]*/cmdline | tr '\\0' ' '; echo; "
                     "ls -d /proc/[0-9]* | wc -l; %s kill %d 0" % (PROBE_IN, canary.pid)],
                    opts=pinned_opts())
        expect_rc(res, 0)
        lines = res.text.splitlines()
        expect(arg not in res.text, "the host canary is visible inside", res)
        expect(int(lines[1]) <= 6, "%s processes visible inside" % lines[1], res)
        expect(lines[2] == "errno=ESRCH", "kill(host pid, 0) said %r" % lines[2], res)
        expect(canary.poll() is None, "the canary died")
    finally:
        stop(canary)


def start_canary(arg):
    """A host `sleep` running as the sandbox's host uid when we are root (so
    only the pid namespace separates it from the sandbox), else as us."""
    argv = ["sleep", arg]
    if IS_ROOT:
        argv = ["setpriv", "--reuid", str(HOST_SANDBOX_UID), "--regid", str(HOST_SANDBOX_UID),
                "--clear-groups", "--"] + argv
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


def stop(p):
    if p.poll() is None:
        kill_pid(p.pid)
    p.wait()


@per_backend()
@case
def kill_all_spares_host(e):
    """kill(-1, SIGKILL) and kill(host pid, SIGKILL) from inside leave a host
    canary (same host uid as the sandbox when root) alive."""
    canary = start_canary("59.%09d" % random.randrange(10 ** 9))
    # The process backend runs as a slot uid of its own and refuses a
    # pinned range: its canary is another uid, which kill(-1) cannot reach.
    pin = [] if AT_HOST_PATHS else pinned_opts()
    try:
        res = e.probe_run("kill", "-1", "9", opts=pin)
        if lacks("hides_processes"):
            # process: kill(-1) also reaches the run's own init (same uid,
            # no pid namespace): the run ends as killed by that signal
            # (137), not as a failure of airlock's setup (125).
            expect(res.rc == 137 and "setup failed" not in res.errtext,
                   "kill -1 run exited %d" % res.rc, res)
        else:
            expect_rc(res, 0)
        expect(res.text in ("ret=0\n", "errno=ESRCH\n"), "kill -1 said %r" % res.text, res)
        expect(canary.poll() is None, "kill -9 -1 inside killed the host canary", res)
        res = e.probe_run("kill", canary.pid, "9", opts=pin)
        # ESRCH: not in the sandbox's pid namespace; EPERM where the host's
        # processes are visible (process): another uid's, not to be signalled.
        expect_errno(res, "EPERM" if lacks("hides_processes") else "ESRCH")
        expect(canary.poll() is None, "kill -9 -1 inside killed the host canary", res)
    finally:
        stop(canary)


# ---- mounts and namespaces ---------------------------------------------------

@per_backend()
@case
def mount_denied(e):
    """mount(2) of a tmpfs over /, /tmp or /usr fails with EPERM, and the
    host's mount table is unchanged."""
    before = host_mount_count()
    res, s = multi(e, [("root", ["mount-tmpfs", "/"]), ("tmp", ["mount-tmpfs", "/tmp"]),
                        ("usr", ["mount-tmpfs", "/usr"])])
    for label in ("root", "tmp", "usr"):
        expect_step_errno(res, s, label, ("EPERM",))
    expect(host_mount_count() == before, "host mount table changed", res)


@case
def chroot_escape_denied(e):
    """The chroot-and-walk-up trick fails at the first chroot with EPERM."""
    res = e.probe_run("chroot", "/tmp/jail")
    expect_rc(res, 0)
    expect(res.text == "chroot errno=EPERM\n", "probe said %r" % res.text, res)


@case
def unshare_binary_fails(e):
    """util-linux unshare(1) and nsenter(1) cannot make or enter namespaces
    (user, mount, net, pid): each fails with EPERM."""
    if not os.path.exists("/usr/bin/unshare"):
        raise Skip("util-linux unshare not installed")
    cmds = ["unshare -U true", "unshare -Ur id -u", "unshare -m true", "unshare -n true",
            "unshare -p -f true", "nsenter -t 1 -m true"]
    sh = "; ".join("%s 2>&1; echo \"rc=$?\"" % c for c in cmds)
    res = e.run(["/bin/sh", "-c", sh])
    expect_rc(res, 0)
    rcs = [l for l in res.text.splitlines() if l.startswith("rc=")]
    expect(len(rcs) == len(cmds), "unexpected output", res)
    for c, rc in zip(cmds, rcs):
        expect(rc != "rc=0", "`%s` succeeded inside the sandbox" % c, res)
    expect("Operation not permitted" in res.text, "no EPERM reported", res)


@case
def open_by_handle_denied(e):
    """open_by_handle_at (the "shocker" escape) and name_to_handle_at fail
    with EPERM."""
    res = e.probe_run("syscall", "open_by_handle_at", "name_to_handle_at")
    expect_rc(res, 0)
    expect(res.text == "open_by_handle_at errno=EPERM\nname_to_handle_at errno=EPERM\n",
           "probe said %r" % res.text, res)


# ---- devices and kernel interfaces -------------------------------------------

@per_backend()
@case
def no_host_devices(e):
    """No host disk or memory device is reachable through /dev, and device
    nodes cannot be created in the scratch."""
    disks = sorted(os.listdir("/sys/block"))[:6] if os.path.isdir("/sys/block") else []
    names = ["sda", "vda", "nvme0n1", "mem", "kmem", "port", "kmsg", "console", "tty",
             "ptmx", "fuse", "kvm", "net/tun", "loop-control"] + disks
    steps = [("d%d" % i, ["open", "/dev/" + n, "r"]) for i, n in enumerate(names)]
    steps += [("mknod_tmp", ["mknod", "/tmp/mem"]), ("mknod_shm", ["mknod", "/dev/shm/mem"]),
              ("mknod_work", ["mknod", "/work/mem"]), ("ls", ["ls", "/dev"])]
    res, s = multi(e, steps)
    # ENOENT: the sandbox's /dev has no such node; without mounts (process)
    # the host's /dev is there but landlock refuses every node not in the
    # plan (EACCES), or the host has none (ENOENT). A backend with a kernel
    # of its own (gvisor) has its own emulated tty, ptmx, fuse and tun,
    # none of them the host's: only the host's disks and memory must be
    # absent there.
    own = ("tty", "ptmx", "fuse", "net/tun") if OWN_KERNEL else ()
    for i, n in enumerate(names):
        if n in own:
            continue
        expect_step_errno(res, s, "d%d" % i, ("ENOENT",) + (HIDDEN if AT_HOST_PATHS else ()))
    for label in ("mknod_tmp", "mknod_shm", "mknod_work"):
        expect_step_errno(res, s, label, DENIED)
    extra = set(s["ls"][1:]) - {"null", "zero", "full", "random", "urandom", "fd", "stdin",
                                "stdout", "stderr", "shm"}
    extra -= {"tty", "ptmx", "fuse", "net", "pts"} if OWN_KERNEL else set()
    expect(not extra, "unexpected /dev entries %s" % sorted(extra), res)


@case
def sys_not_mounted(e):
    """/sys is absent: no cgroup fs, no uevent_helper, no block devices."""
    res, s = multi(e, [("sys", ["ls", "/sys"]),
                        ("uevent", ["open", "/sys/kernel/uevent_helper", "w"]),
                        ("cgroup", ["ls", "/sys/fs/cgroup"])])
    for label in ("sys", "uevent", "cgroup"):
        expect_step_errno(res, s, label, ("ENOENT",))


@case
def proc_kernel_knobs_closed(e):
    """Kernel knobs in /proc cannot be opened for writing (sysrq-trigger,
    sys/kernel/hostname, core_pattern) and /proc/kcore cannot be read; the
    host hostname is unchanged. (Opened only, never written.)"""
    before = socket.gethostname()
    res, s = multi(e, [("sysrq", ["open", "/proc/sysrq-trigger", "w"]),
                        ("hostname", ["open", "/proc/sys/kernel/hostname", "w"]),
                        ("core", ["open", "/proc/sys/kernel/core_pattern", "w"]),
                        ("kcore", ["open", "/proc/kcore", "r"])])
    for label in ("sysrq", "hostname", "core", "kcore"):
        expect_step_errno(res, s, label, DENIED + ("EROFS", "ENOENT"))
    expect(socket.gethostname() == before, "host hostname changed", res)


@case
def tiocsti_on_real_terminal(e):
    """With a real pty as airlock's stdin, TIOCSTI (also with high bits set
    on the request) fails with EPERM, nothing is injected into the host
    terminal, and the command has no controlling terminal."""
    master, slave = os.openpty()
    try:
        tty.setraw(slave)
        res = e.run(["/bin/sh", "-c", "%s syscall tiocsti tiocsti-high; %s sid"
                     % (PROBE_IN, PROBE_IN)], stdin=slave)
        expect_rc(res, 0)
        got = kv(res.text.replace(" errno=", "=").replace("tty errno", "tty"))
        expect(got.get("tiocsti") == "EPERM", "tiocsti: %r" % got.get("tiocsti"), res)
        expect(got.get("tiocsti-high") == "EPERM", "tiocsti-high: %r" % got.get("tiocsti-high"),
               res)
        expect(got.get("tty") in ("ENXIO", "ENOENT"), "the command has a controlling tty", res)
        os.set_blocking(slave, False)
        try:
            injected = os.read(slave, 100)
        except BlockingIOError:
            injected = b""
        expect(injected == b"", "bytes were injected into the host terminal: %r" % injected, res)
    finally:
        os.close(master)
        os.close(slave)


@per_backend("tty")
@case
def tiocsti_with_tty(e):
    """With -t and a real pty as airlock's stdin (the test holds its
    master): TIOCSTI on the command's own terminal fails with EPERM (also
    with high bits on the request), the command's stdio is a pty other than
    airlock's, and nothing reaches the host terminal as input: after the
    run the outer slave has no unread byte and none of the bytes the
    command tried to type ('#') came back out of its pty either."""
    master, slave = os.openpty()
    try:
        def ctty():
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        argv = e.argv(["/bin/sh", "-c", "%s syscall tiocsti tiocsti-high; readlink /proc/self/fd/0"
                       % PROBE_IN], ["-t", "--timeout", "20"])
        p = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave,
                             start_new_session=True, preexec_fn=ctty,
                             env=dict(os.environ, TERM="dumb"))
        out, deadline = b"", time.monotonic() + 30
        while time.monotonic() < deadline:
            r, _, _ = select.select([master], [], [], 0.1)
            if r:
                try:
                    out += os.read(master, 65536)
                except OSError:
                    break
            elif p.poll() is not None:
                break
        if p.poll() is None:
            kill_pid(p.pid)
            p.wait()
            raise AssertionError("airlock did not end; output %r" % out)
        text = out.decode("utf-8", "replace").replace("\r", "")
        expect(p.returncode == 0, "exit %s: %r" % (p.returncode, text))
        got = kv(text.replace(" errno=", "="))
        expect(got.get("tiocsti") == "EPERM", "tiocsti: %r in %r" % (got.get("tiocsti"), text))
        expect(got.get("tiocsti-high") == "EPERM", "tiocsti-high: %r" % got.get("tiocsti-high"))
        expect("/dev/pts/0\n" in text, "the command's stdin is not its own pty: %r" % text)
        expect("#" not in text, "an injected byte came back: %r" % text)
        n = struct.unpack("i", fcntl.ioctl(slave, termios.FIONREAD, b"\0\0\0\0"))[0]
        expect(n == 0, "%d bytes were typed into the host terminal" % n)
        os.set_blocking(slave, False)
        try:
            injected = os.read(slave, 100)
        except BlockingIOError:
            injected = b""
        expect(injected == b"", "bytes were injected into the host terminal: %r" % injected)
    finally:
        os.close(master)
        os.close(slave)


# ---- privilege -----------------------------------------------------------------

@per_backend()
@case
def setuid_does_not_grant_root(e):
    """A setuid-root binary (and, as root, one owned by the sandbox's own root
    id) runs with euid 1000 inside; /usr, inputs and scratch are nosuid."""
    res = e.probe_run("read", "/proc/self/mountinfo")
    expect_ok(res)
    # Without mounts (process) the table is the host's, and gVisor's
    # mountinfo does not show the nosuid its bundle asks for: there
    # no_new_privs is what keeps a setuid bit from granting, and the runs
    # below prove it.
    for line in ([] if AT_HOST_PATHS or OWN_KERNEL else res.text.splitlines()[1:]):
        fields = line.split()
        if len(fields) > 5 and fields[4] in ("/usr", "/tmp", "/work", "/dev/shm", PROBE_IN):
            expect("nosuid" in fields[5].split(","), "%s is mounted without nosuid: %s"
                   % (fields[4], line), res)
    if not IS_ROOT:
        raise Skip("nosuid checked; a setuid-root file needs root to create")
    # The dir must be traversable by the sandbox's host uid (airlock opens
    # the input from inside the user namespace); it is not listable, and the
    # probe refuses everything but `id` when its ids differ.
    with TempDir(mode=0o711, prefix="airlock-sec-suid-") as d:
        owners = {"hostroot": (0, 0), "sbroot": (PIN_BASE, PIN_BASE)}
        opts = []
        for name, (uid, gid) in owners.items():
            path = os.path.join(d, name)
            shutil.copy(e.probe, path)
            os.chown(path, uid, gid)
            os.chmod(path, 0o6755)
            opts += ["--ro", bind(path, "/opt/suid/" + name)]
        at = [o.split(":")[1] for o in opts if o != "--ro"]
        res = e.run(["/bin/sh", "-c", "%s id; echo ==; %s id" % tuple(at)],
                    opts=([] if AT_HOST_PATHS else pinned_opts()) + opts)
        expect_rc(res, 0)

        def unprivileged(v):
            # 1000 inside a user namespace; process: the run's own slot uid.
            return v == "1000" or (AT_HOST_PATHS and v.isdigit() and in_pool_user(int(v)))
        for part, name in zip(res.text.split("==\n"), owners):
            ids = kv(part)
            for k in ("uid", "euid", "suid"):
                expect(unprivileged(ids.get(k, "")),
                       "setuid %s binary: %s=%r" % (name, k, ids.get(k)), res)
            for k in ("gid", "egid", "sgid"):
                expect(unprivileged(ids.get(k, "")),
                       "setgid %s binary: %s=%r" % (name, k, ids.get(k)), res)


@per_backend()
@case
def host_fds_not_inherited(e):
    """An fd open in airlock's caller (on a host secret file) is not present
    in the sandbox: only 0, 1 and 2 are open."""
    with TempDir(mode=0o700, prefix="airlock-sec-fd-") as d:
        secret = write_file(os.path.join(d, "secret"), "s3cret\n", mode=0o666)
        fd = os.open(secret, os.O_RDWR)
        try:
            os.set_inheritable(fd, True)
            res = e.probe_run("fds", pass_fds=(fd,))
            expect_rc(res, 0)
            fds = sorted(int(l.split()[0]) for l in res.text.splitlines())
            expect(fds == [0, 1, 2], "open fds inside: %s" % res.text.strip(), res)
            expect("secret" not in res.text, "the host file is reachable", res)
        finally:
            os.close(fd)


@case
def stdio_files_not_reopenable(e):
    """Host files given as airlock's stdin/stdout cannot be reopened through
    /proc/self/fd: the stdin file is not modified, and the earlier content of
    the stdout file cannot be read back inside."""
    with TempDir(mode=0o700, prefix="airlock-sec-stdio-") as d:
        inp = write_file(os.path.join(d, "in"), "input-data\n", mode=0o666)
        out = write_file(os.path.join(d, "out"), "EARLIER-SECRET\n", mode=0o666)
        digest = sha256_file(inp)
        sh = ("%s write /proc/self/fd/0 overwritten; %s find /proc/self/fd/1 EARLIER-SECRET"
              % (PROBE_IN, PROBE_IN))
        with open(inp, "rb") as fin, open(out, "ab") as fout:
            p = subprocess.run(e.argv(["/bin/sh", "-c", sh]), stdin=fin, stdout=fout,
                               stderr=subprocess.PIPE, timeout=30)
        expect(p.returncode == 0, "airlock exited %s: %r" % (p.returncode, p.stderr))
        expect(sha256_file(inp) == digest, "the stdin host file was modified through "
               "/proc/self/fd/0")
        with open(out) as f:
            lines = f.read().splitlines()
        expect(lines[0] == "EARLIER-SECRET" and len(lines) == 3, "stdout file: %r" % lines)
        expect(lines[2] != "found", "the stdout host file's earlier content was readable "
               "inside through /proc/self/fd/1: %r" % lines)


@case
def host_ipc_invisible(e):
    """A host SysV shared memory segment and a host /dev/shm file are
    invisible inside (own IPC namespace, /dev/shm is scratch)."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    IPC_PRIVATE, IPC_CREAT, IPC_RMID = 0, 0o1000, 0
    shmid = libc.shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0o666)
    name = "airlock-sec-" + tag()
    path = os.path.join("/dev/shm", name)
    try:
        expect(shmid >= 0, "host shmget failed: errno %d" % ctypes.get_errno())
        write_file(path, "host-shm\n", mode=0o666)
        res = e.run(["/bin/sh", "-c", "cat /proc/sysvipc/shm; echo ==; ls -a /dev/shm"])
        expect_rc(res, 0)
        shm, listing = res.text.split("==\n", 1)
        segments = [l for l in shm.splitlines()[1:] if l.strip()]
        expect(not segments, "SysV segments visible inside: %s" % segments, res)
        expect(name not in listing, "the host /dev/shm file is visible inside", res)
    finally:
        if shmid >= 0:
            libc.shmctl(shmid, IPC_RMID, None)
        if os.path.exists(path):
            os.unlink(path)


@case
def hostname_change_denied(e):
    """sethostname(2) inside fails (no capability) and the host's hostname is
    unchanged."""
    before = socket.gethostname()
    res = e.probe_run("sethostname", "pwned-" + tag())
    expect_errno(res, "EPERM")
    expect(socket.gethostname() == before, "the host's hostname changed", res)


# ---- network -----------------------------------------------------------------

@case
def abstract_unix_socket_isolated(e):
    """A host abstract unix socket is unreachable from inside (the net
    namespace separates them) and its listener sees no connection."""
    name = "airlock-sec-" + tag()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind("\0" + name)
        s.listen(4)
        s.setblocking(False)
        res = e.probe_run("connect-unix", "@" + name)
        expect_errno(res, ("ECONNREFUSED", "EPERM", "EACCES"))
        try:
            conn, _ = s.accept()
            conn.close()
            raise AssertionError("the host abstract socket got a connection")
        except BlockingIOError:
            pass
    finally:
        s.close()


@per_backend()
@case
def host_unix_sockets_invisible(e):
    """Host unix socket files (a fresh one, plus dbus/docker if present) do
    not exist inside (process: its seccomp refuses a Unix socket outside the
    scratch, EAFNOSUPPORT at socket())."""
    with TempDir(mode=0o777, prefix="airlock-sec-sock-") as d:
        path = os.path.join(d, "s")
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.bind(path)
            os.chmod(path, 0o777)
            s.listen(4)
            paths = [path, "/run/dbus/system_bus_socket", "/var/run/docker.sock",
                     "/run/systemd/private"]
            res, sec = multi(e, [("p%d" % i, ["connect-unix", p]) for i, p in enumerate(paths)])
            for i in range(len(paths)):
                if AT_HOST_PATHS and sec["p%d" % i][:1] == ["socket errno=EAFNOSUPPORT"]:
                    continue
                expect_step_errno(res, sec, "p%d" % i, ("ENOENT",))
        finally:
            s.close()


PLANT = r"""
import os, sys
d = sys.argv[1]
# The old temporary name was predictable (<name>.tmp.<supervisor pid>):
# plant a link for every pid, and links at the final names.
for p in range(2, 33000):
    try:
        os.symlink(d + "/victim", d + "/result.json.tmp.%d" % p)
    except OSError:
        pass
for name in ("result.json", "audit.jsonl"):
    os.symlink(d + "/victim", d + "/" + name)
os.symlink("/", d + "/sub")  # a directory link on the way to an output file
print("planted")
"""


@case
def output_files_not_redirected(e):
    """Code that can write to the directory where airlock writes its result
    record and audit stream (a --rw directory, world-writable as airlock
    requires as root) plants symbolic links there: at the predictable
    temporary name of the old writer, at the final names, and as a
    directory on the way. Judged on the host: a root-only file beside them
    (victim, 0600) is unchanged, the record is a regular file replacing
    the planted link, and a later run that names the planted audit link or
    a path through the planted directory link is refused (125) without
    writing anything."""
    with TempDir(mode=0o777, prefix="airlock-sec-out-") as d:
        victim = os.path.join(d, "victim")
        write_file(victim, "root only\n")
        os.chmod(victim, 0o600)
        res = e.run(["/usr/bin/python3", "-c", PLANT, "/w"],
                    ["--rw", "%s:/w" % d, "--result", os.path.join(d, "result.json")],
                    timeout=120, bind_probe=False)
        expect_rc(res, 0)
        expect("planted" in res.text, "the planting script did not finish", res)
        with open(victim) as f:
            expect(f.read() == "root only\n", "the root-only file was changed", res)
        rec = os.path.join(d, "result.json")
        expect(not os.path.islink(rec) and os.path.isfile(rec),
               "the result record is not a regular file", res)
        with open(rec) as f:
            expect('"reason": "exited"' in f.read(), "the record is not the run's", res)
        expect(not [n for n in os.listdir(d) if n.startswith(".result.json.")],
                   "a temporary file was left behind", res)
        t = tag("outlink-")
        outside = ["/tmp/%s.json" % t, "/tmp/%s.jsonl" % t]
        for opts, word in ((["--audit", os.path.join(d, "audit.jsonl")], "symbolic link"),
                           (["--result", os.path.join(d, "sub", outside[0][1:])],
                            "symbolic link"),
                           (["--audit", os.path.join(d, "sub", outside[1][1:])],
                            "symbolic link")):
            res = e.run(["/bin/true"], opts, bind_probe=False)
            expect_one_error_line(res, 125, word)
        with open(victim) as f:
            expect(f.read() == "root only\n", "the root-only file was changed", res)
        expect(not any(os.path.exists(p) for p in outside),
               "a file was written through the planted directory link")


# ---- the seccomp allowlist ---------------------------------------------------

def run_audited(e, probe_args):
    """The probe in a sandbox with an audit stream: (result, syscall.denied
    events)."""
    from harness import read_outputs
    with TempDir(mode=0o777, prefix="airlock-sec-audit-") as d:
        res = e.probe_run(*probe_args, opts=["--audit", os.path.join(d, "audit.jsonl")])
        _, events = read_outputs(d)
    expect_rc(res, 0)
    return res, [ev for ev in events if ev.get("event") == "syscall.denied"]


def probe_answers(res):
    return dict(l.split(" ", 1) for l in res.text.splitlines() if " " in l)


@case
def mptcp_socket_denied(e):
    """socket(AF_INET and AF_INET6, SOCK_STREAM, IPPROTO_MPTCP) fails with EPERM
    (INET sockets are allowed only as TCP, UDP and ICMP), while a TCP socket
    works; each MPTCP attempt is a syscall.denied event for socket, EPERM."""
    res, den = run_audited(e, ["syscall", "mptcp", "mptcp6", "socket-inet"])
    got = probe_answers(res)
    for name in ("mptcp", "mptcp6"):
        expect(got.get(name) == "errno=EPERM", "%s: probe said %r" % (name, got.get(name)), res)
    expect((got.get("socket-inet") or "").startswith("ret="), "a TCP socket failed", res)
    socket_den = [ev for ev in den if ev.get("syscall") == "socket"]
    expect(len(socket_den) == 2 and all(ev.get("errno") == "EPERM" for ev in socket_den),
           "expected two syscall.denied events for socket with EPERM, got %s" % den, res)


@case
def modify_ldt_denied(e):
    """modify_ldt, writing a valid, not-present entry into the caller's own LDT,
    fails with EPERM and is a syscall.denied event for modify_ldt, EPERM."""
    res, den = run_audited(e, ["syscall", "modify_ldt"])
    got = probe_answers(res)
    expect(got.get("modify_ldt") == "errno=EPERM", "probe said %r" % got.get("modify_ldt"), res)
    expect([ev.get("errno") for ev in den if ev.get("syscall") == "modify_ldt"] == ["EPERM"],
           "expected one syscall.denied event for modify_ldt, got %s" % den, res)


# Newer than the table: tried in this order; the case uses the first the
# host kernel implements (called on the host with all-zero arguments:
# mseal of an empty range does nothing, the others fault on NULL).
UNKNOWN_CALLS = [(462, "mseal"), (461, "lsm_list_modules"), (458, "listmount"),
                 (457, "statmount")]


@case
def unknown_syscall_enosys(e):
    """A system call the host kernel implements but the seccomp table does not
    name (the first of mseal, lsm_list_modules, listmount, statmount the host
    answers with anything but ENOSYS) fails inside with ENOSYS, as on an
    older kernel, and is a syscall.denied event with its number and errno
    ENOSYS."""
    import ctypes
    import errno
    import json
    from harness import run_host
    res = run_host([e.airlock, "check", "--json"])
    expect_rc(res, 0)
    seccomp = json.loads(res.out)["seccomp"]
    named = {r["syscall"] for k in ("allow", "errno", "deny") for r in seccomp.get(k, [])}
    libc = ctypes.CDLL(None, use_errno=True)
    pick = None
    for nr, name in UNKNOWN_CALLS:
        if name in named:
            continue
        ctypes.set_errno(0)
        if libc.syscall(nr, 0, 0, 0, 0) >= 0 or ctypes.get_errno() != errno.ENOSYS:
            pick = (nr, name)
            break
    if pick is None:
        raise Skip("the host kernel implements none of %s outside the table"
                   % ", ".join(n for _, n in UNKNOWN_CALLS))
    nr, name = pick
    res, den = run_audited(e, ["syscall", "nr", str(nr)])
    got = probe_answers(res)
    expect(got.get("nr-%d" % nr) == "errno=ENOSYS", "%s (%d): probe said %r"
           % (name, nr, got.get("nr-%d" % nr)), res)
    expect([ev.get("errno") for ev in den if ev.get("nr") == nr] == ["ENOSYS"],
           "expected one syscall.denied event for nr %d with ENOSYS, got %s" % (nr, den), res)


# Kernel memory: socket buffers filled from inside, judged from the host
# (the kernel's own count of the memory the sockets of the run's network
# namespace hold, sampled while the run lasts) and from the run's record.
# The host's MemAvailable is not used: other work on the machine (another
# suite's runs) moves it by more than any bound a test could allow. The
# filler is bounded (at most ~1.2 GB of payload in all where nothing stops
# it) and exits by itself.

SOCKFILL = os.environ.get("AIRLOCK_SOCKFILL", "")
SOCKFILL_IN = "/opt/sockfill"
KMEM_MEMORY = 256 << 20
MB = 1 << 20


def run_netns(airlock_pid):
    """The network namespaces of airlock's children (the sandbox's init,
    the gateway) other than ours, as /proc paths to enter."""
    own = os.readlink("/proc/self/ns/net")
    found = {}
    for kid in children_of(airlock_pid):
        try:
            ns = os.readlink("/proc/%d/ns/net" % kid)
        except OSError:
            continue
        if ns != own:
            found.setdefault(ns, "/proc/%d/ns/net" % kid)
    return list(found.values())


def socket_bytes(netns):
    """Bytes the kernel holds for every socket of the network namespace at
    /proc path netns (ss -m: the receive queue, the queued send bytes and
    the forward allocation, r + w + f, as the protocols charge them), or
    None when it could not be read (the namespace is gone)."""
    r = subprocess.run(["nsenter", "--net=" + netns, "ss", "-atuwnmH"],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    if r.returncode != 0:
        return None
    total = 0
    for word in r.stdout.decode("ascii", "replace").split():
        if word.startswith("skmem:("):
            fields = dict((f[:1], f[1:]) for f in word[7:].rstrip(")").split(",")
                          if f[:1] in "rwf" and f[1:].isdigit())
            total += sum(int(v) for v in fields.values())
    return total


def host_kernel_memory(e):
    """What `airlock check` says this host does with socket buffers."""
    res = e.run(None, ["--memory", "256M", "--json"], subcommand="check", bind_probe=False)
    expect_rc(res, 0)
    # (An airlock without the bound has no such key; the fill cases then
    # judge by the host's memory alone.)
    return json.loads(res.text).get("kernel_memory", {"sockets": "not reported"})


def fill_sockets(e, args, pids=64):
    """Run sockfill ARGS under --memory 256M; returns (result, record, held),
    held being the most memory the run's sockets held in one sample."""
    if not os.access(SOCKFILL, os.X_OK):
        raise AssertionError("AIRLOCK_SOCKFILL is not an executable: %r" % SOCKFILL)
    with TempDir() as d:
        argv = e.argv([SOCKFILL_IN] + [str(a) for a in args],
                      ["--memory", "256M", "--pids", str(pids), "--timeout", "60",
                       "--ro", "%s:%s" % (SOCKFILL, SOCKFILL_IN),
                       "--result", os.path.join(d, "result.json")], bind_probe=False)
        t0 = time.monotonic()
        p = start(argv)
        held, samples = 0, 0
        while p.poll() is None and time.monotonic() - t0 < 90:
            got = [socket_bytes(ns) for ns in run_netns(p.pid)]
            got = [g for g in got if g is not None]
            if got:
                held, samples = max(held, sum(got)), samples + 1
            else:
                time.sleep(0.02)  # not made yet, or gone
        lasted = time.monotonic() - t0
        res = finish(p, argv, t0, 30)
        record, _ = read_outputs(d)
    expect(record is not None, "no result record", res)
    # A run stopped within its first instants (a fast machine: 0.06 s seen)
    # can end before one `ss` through nsenter has read its namespace. That
    # is the bound working, not a lack of evidence: a filler nothing stops
    # holds its sockets for SECONDS (>= 3 here) and is always measured. So
    # with no sample the run must have been killed (137), and within a
    # second; each case then checks the record's reason.
    if samples == 0:
        expect(res.rc == 137 and lasted < 1.0,
               "the run's sockets were never measured from the host, and the run "
               "was not killed at once (exit %s after %.2f s)" % (res.rc, lasted), res)
        print("# %s: stopped after %.2f s, before the host's first measure"
              % (args[0], lasted), flush=True)
    print("# %s: the run's sockets held at most %d MB (%d samples); record: %s"
          % (args[0], held // MB, samples, record["reason"]), flush=True)
    return res, record, held


def expect_held(res, record, held, what):
    km = record["limits"].get("kernel_memory") or {}
    # What the run's sockets may hold: the memory limit itself (charged),
    # the documented bound outside it (32 MB at 256M on v1,
    # docs/security.md), and the 128 MB of slack the host-wide measure had.
    allowed = KMEM_MEMORY + (km.get("bound_bytes") or 32 * MB) + 128 * MB
    expect(held <= allowed,
           "%s: the run's sockets held %d MB, more than the memory limit + bound "
           "+ 128 MB (%d MB)" % (what, held // MB, allowed // MB), res)
    expect(km.get("sockets") in ("limited", "charged"),
           "socket buffers are %r in the record" % km.get("sockets"), res)
    return km


def need_counted_sockets(e):
    """Skip where the run would be refused: the host cannot count socket
    buffers (the refusal itself is unit-tested, tests/unit/test_kmem.c)."""
    if host_kernel_memory(e)["sockets"] == "none":
        raise Skip("this host's memory cgroup does not count socket buffers; runs refuse")


# How far past the stop socket buffers may peak. What the writers charge
# between two of the supervisor's 2 ms checks depends on how soon the
# machine runs the supervisor beside them (16 writers on 2 cores; slower
# still under ASan): 16 MB held for months, then 16 to 49 MB past the stop
# were seen here on 2026-12-06 with no change to the supervisor. The
# bound these cases prove is that the run stops near its limit (32 MB
# here) rather than at the 0.8 to 1.2 GB the fillers reach without one.
STOP_SLACK_MB = 64


def expect_stopped_near(res, record, km, slack_mb=STOP_SLACK_MB):
    """Stopped for memory, with the peak at most slack_mb past the stop."""
    expect(record["reason"] == "memory", "the run was not stopped: %s" % record["reason"], res)
    expect(km["socket_peak_bytes"] <= km["stop_bytes"] + slack_mb * MB,
           "socket buffers peaked at %d MB, past the stop (%d MB) + %d MB"
           % (km["socket_peak_bytes"] // MB, km["stop_bytes"] // MB, slack_mb), res)


@case
def socket_buffers_tcp_bounded(e):
    """TCP over the sandbox's own loopback, never read: 16 processes x 350
    connections x up to 200 KB. Without a bound this pins ~1.2 GB (the issue
    saw 1.1 GB with the run exiting 0)."""
    need_counted_sockets(e)
    res, record, drop = fill_sockets(e, ["tcp", 16, 350, 200000, 5])
    km = expect_held(res, record, drop, "tcp")
    if km["sockets"] == "limited":
        # v1: the kernel limit holds until forced charges pass it; then the
        # supervisor stops the run within one 2 ms check (STOP_SLACK_MB).
        expect_stopped_near(res, record, km)
        expect("socket buffers" in res.errtext, "the message does not say why", res)
    else:
        expect(km["socket_peak_bytes"] > 0, "v2: no socket memory was charged", res)


@case
def socket_buffers_accept_queue_bounded(e):
    """TCP connections that are never accepted: 8 processes x 1,200
    connections x up to 100 KB. The kernel charges their buffers to no
    cgroup (v1 or v2) until accept(), so only the supervisor's count of the
    namespace's sockets stops this (842 MB of host memory before)."""
    need_counted_sockets(e)
    res, record, drop = fill_sockets(e, ["backlog", 8, 1200, 100000, 3])
    expect_stopped_near(res, record, expect_held(res, record, drop, "accept queue"))


@case
def socket_buffers_lowered_listener_bounded(e):
    """Waiting connections keep the receive buffer their listener had when
    they were made: a listener with the largest buffer gets 400
    connections, lowers its buffer (so that it no longer looks like it
    could hold much), then they are written 2 MB each (769 MB of host
    memory with an estimate from the listener's current buffer)."""
    need_counted_sockets(e)
    res, record, drop = fill_sockets(e, ["lowered", 1, 400, 2000000, 3])
    # The full counts that see these connections come at most every ten
    # times as long as the last one took (docs/security.md), and a
    # sanitizer makes the supervisor's count several times slower: 81 MB
    # past the stop were seen under ASan (59 MB without). Under a
    # sanitizer the case proves the stop, with a quarter of the 769 MB.
    sanitized = os.environ.get("AIRLOCK_TEST_SANITIZE", "none") != "none"
    expect_stopped_near(res, record, expect_held(res, record, drop, "lowered listener"),
                        192 if sanitized else STOP_SLACK_MB)


@case
def many_listeners_stopped(e):
    """The supervisor reads the sandbox's listeners every tick; tens of
    thousands of them on one port kept it at 100% of a CPU (the kernel's
    dump restarts each batch from the start of a hash bucket). More than
    4,096 stop the run. 20 processes x 400 listeners."""
    need_counted_sockets(e)
    res, record, _ = fill_sockets(e, ["listeners", 20, 400, 0, 5])
    expect(record["reason"] == "memory", "the run was not stopped: %s" % record["reason"], res)
    expect("listening sockets" in res.errtext, "the message does not say why", res)
    # A hang guard, half its 60 s timeout: how long 8,000 listeners take
    # to make depends on the machine's load.
    expect(record["wall_ms"] < 30000, "stopped only after %d ms" % record["wall_ms"], res)


@case
def socket_buffers_udp_bounded(e):
    """UDP receive queues that are never read: 8 processes x 50 sockets x
    1,000 datagrams of 1 KiB (each queue may hold 8 MB here). v1 charges
    none of it unless memory.kmem.tcp is limited (the issue saw 0.7 GB)."""
    need_counted_sockets(e)
    res, record, drop = fill_sockets(e, ["udp", 8, 50, 1000, 3])
    km = expect_held(res, record, drop, "udp")
    if km["sockets"] == "limited":
        # UDP never forces a charge: the kernel limit itself holds.
        expect(km["socket_peak_bytes"] <= km["socket_limit_bytes"] + MB,
               "UDP buffers peaked at %d MB, past the kernel limit (%d MB)"
               % (km["socket_peak_bytes"] // MB, km["socket_limit_bytes"] // MB), res)
        expect(km["socket_peak_bytes"] >= km["socket_limit_bytes"] - 2 * MB,
               "the filler did not reach the limit (%d MB): the test proves nothing"
               % (km["socket_peak_bytes"] // MB), res)
        expect_rc(res, 0)


@case
def kernel_memory_shown_and_verified(e):
    """`airlock check` names the bound; verify checks it from outside."""
    km = host_kernel_memory(e)
    res = e.run(None, ["--memory", "256M"], subcommand="check", bind_probe=False)
    expect_rc(res, 0)
    line = [l for l in res.text.splitlines() if l.startswith("kernel memory:")]
    expect(len(line) == 1, "no kernel memory line in airlock check", res)
    if km["sockets"] == "limited":
        expect("at most 32M outside the cgroup" in line[0], "wrong bound: %s" % line[0], res)
        expect(km["bound_bytes"] == 32 * MB and km["socket_limit_bytes"] == 16 * MB,
               "wrong JSON bound: %r" % km, res)
    elif km["sockets"] == "charged":
        expect("at most 32M outside the cgroup" in line[0], "wrong bound: %s" % line[0], res)
    res = e.run(None, ["--memory", "256M"], subcommand="verify")
    rows = [l for l in res.text.splitlines() if l.startswith("kernel memory")]
    expect(len(rows) == 1, "verify has no kernel memory row", res)
    if km["sockets"] != "none":
        expect("in force" in rows[0], "kernel memory not in force: %s" % rows[0], res)
        expect_rc(res, 0)


@case
def kernel_object_rlimits(e):
    """POSIX message queues, queued signals and locked memory are capped."""
    res = e.run(["/bin/bash", "-c", "ulimit -q; ulimit -i; ulimit -l"], ["--memory", "256M"],
                bind_probe=False)
    expect_rc(res, 0)
    expect(res.text.split() == ["262144", "4096", "8192"],
           "rlimits inside: %r" % res.text.split(), res)


@case
def conntrack_not_filled_from_loopback(e):
    """With the gateway, the kernel tracks connections in the sandbox's
    namespace, in memory no cgroup is charged for (131,068 entries, ~40 MB,
    from this loop before the fix). Loopback flows must not be tracked."""
    code = ("import socket\n"
            "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            "for a in (1, 2):\n"
            "    for port in range(1, 20001):\n"
            "        s.sendto(b'x', ('127.0.%d.1' % a, port))\n"
            "c = socket.socket()\n"
            "c.bind(('127.0.0.1', 0)); c.listen(64)\n"
            "for i in range(200):\n"
            "    k = socket.create_connection(c.getsockname()); k.close()\n"
            "    c.accept()[0].close()\n"
            "print('count', open('/proc/sys/net/netfilter/nf_conntrack_count').read().strip())\n")
    res = e.run(["/usr/bin/python3", "-c", code], ["--allow", "example.test"], timeout=120,
                bind_probe=False)
    expect_rc(res, 0)
    count = [l.split()[1] for l in res.text.splitlines() if l.startswith("count ")]
    expect(count and int(count[0]) < 100,
           "40,000 loopback flows left %s conntrack entries" % (count or "?"), res)


@case
def denied_call_flood_paced(e):
    """A loop of refused calls costs the supervisor's CPU, outside every
    limit of the sandbox: it answers at most about 2,000 a second and the
    callers wait. Four threads call an unknown number for 2 s (about 18,000
    a second got answered before)."""
    code = ("import ctypes, threading, time\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "end = time.monotonic() + 2\n"
            "def spin():\n"
            "    while time.monotonic() < end:\n"
            "        libc.syscall(1000)\n"
            "ts = [threading.Thread(target=spin) for _ in range(4)]\n"
            "[t.start() for t in ts]; [t.join() for t in ts]\n"
            "print('errno', ctypes.get_errno())\n")
    with TempDir() as d:
        res = e.run(["/usr/bin/python3", "-c", code],
                    ["--result", os.path.join(d, "result.json")], timeout=60, bind_probe=False)
        record, _ = read_outputs(d)
    expect_rc(res, 0)
    expect(record is not None, "no result record", res)
    n, secs = record["denials"]["syscalls"], record["wall_ms"] / 1000.0
    expect(n > 100, "the loop made only %d refused calls: the test proves nothing" % n, res)
    expect(n / secs <= 3000, "%d refused calls in %.1f s (%.0f/s): not paced"
           % (n, secs, n / secs), res)


if __name__ == "__main__":
    main(suite, require_confinement=True)
