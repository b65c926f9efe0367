#!/usr/bin/python3
"""End-to-end tests of `airlock run` and `airlock check` (TAP).

usage: run_e2e.py AIRLOCK PROBE [CASE-SUBSTRING...]

Each case runs the real binary with the static probe bound read-only at
/opt/probe/probe, asserts exact exit codes, and judges from outside the
sandbox where it can (host /proc, host files, host sockets). Cases are run in
order; a case's docstring says what it proves.
"""

import fcntl
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

from harness import (HOST_DISK_ID, HOST_SANDBOX_UID, in_pool_user, multi, pinned_opts, IS_ROOT, PROBE_IN, SANDBOX_PATH, Skip, Suite, TempDir,
                     airlock_tmp_entries, children_of, expect, expect_ok, expect_one_error_line, expect_out, expect_rc,
                     finish, host_mount_count, kill_pid, kv, main, probe_listing,
                     procs_matching, read_line_with_timeout, run_host, sha256_file, shquote,
                     start, status_ids, tag, wait_for, write_file)
from harness import (AT_HOST_PATHS, HIDDEN, LOOPBACK_REFUSED, bind, hidden_step, inside,
                     per_backend)

suite = Suite()
case = suite.case

WRITE_DENIED = ("EROFS", "EACCES", "EPERM")


def section_errno(res, sections, label, allowed):
    first = sections[label][0] if sections[label] else ""
    got = first[6:] if first.startswith("errno=") else None
    expect(got in allowed, "step %s: expected errno in %s, probe said %r"
           % (label, "/".join(allowed), first), res)


def section_ok(res, sections, label):
    first = sections[label][0] if sections[label] else ""
    expect(first == "ok", "step %s: expected ok, probe said %r" % (label, first), res)


def refusal(e, argv, rc, *words, cwd=None):
    """Run an airlock command line that must be refused; check the message
    and that nothing was left behind (host mounts, child processes, /tmp)."""
    mounts = host_mount_count()
    tmp_before = airlock_tmp_entries()
    res = run_host(argv, cwd=cwd)
    expect_one_error_line(res, rc, *words)
    expect(host_mount_count() == mounts, "host mount count changed: %d -> %d"
           % (mounts, host_mount_count()), res)
    kids = children_of(os.getpid())
    expect(not kids, "child processes left behind: %s" % kids, res)
    tmp_after = airlock_tmp_entries()
    expect(tmp_after <= tmp_before, "new /tmp entries left behind: %s"
           % sorted(tmp_after - tmp_before), res)
    return res


# ---- command line ------------------------------------------------------------

@case
def help_and_version(e):
    """`airlock --help`, `airlock run --help` and `airlock --version` exit 0
    and print usage / the version."""
    res = run_host([e.airlock, "--help"])
    expect_rc(res, 0)
    expect("run" in res.text and "check" in res.text, "--help does not list run and check", res)
    res = run_host([e.airlock, "run", "--help"])
    expect_rc(res, 0)
    expect("--ro" in res.text and "--timeout" in res.text, "run --help lacks options", res)
    res = run_host([e.airlock, "--version"])
    expect_rc(res, 0)
    expect("0." in res.text, "--version prints no version", res)
    res = run_host([e.airlock, "-V"])
    expect_rc(res, 0)


# ---- environment and identity ------------------------------------------------

@per_backend()
@case
def host_environment_absent(e):
    """Host variables never leak: inside there are exactly PATH, HOME, LANG,
    TMPDIR and the --env ones, with the documented values."""
    secret = tag("secret-")
    env = dict(os.environ, AIRLOCK_E2E_SECRET=secret, AWS_SECRET_ACCESS_KEY=secret,
               HOME="/root/" + secret, LD_LIBRARY_PATH="/nonexistent/" + secret)
    res = e.probe_run("env", opts=["--env", "FOO=bar baz", "--env", "EMPTY="], env=env)
    expect_rc(res, 0)
    expect(secret not in res.text, "a host variable's value leaked into the sandbox", res)
    got = dict(line.split("=", 1) for line in res.text.splitlines())
    want = {"PATH": SANDBOX_PATH, "HOME": "/work", "LANG": "C.UTF-8", "TMPDIR": "/tmp",
            "FOO": "bar baz", "EMPTY": ""}
    if AT_HOST_PATHS:
        # No mounts (process): HOME and TMPDIR are the workdir and tmp of
        # the run's private scratch at its host path, gone after the run.
        home, tmp = got.get("HOME", ""), got.get("TMPDIR", "")
        scratch = os.path.dirname(home)
        expect(home.endswith("/work") and tmp == scratch + "/tmp" and scratch.startswith("/"),
               "HOME %r and TMPDIR %r are not the scratch's work and tmp" % (home, tmp), res)
        expect(wait_for(lambda: not os.path.lexists(scratch), 10),
               "the scratch %s is still on the host after the run" % scratch, res)
        want.update(HOME=home, TMPDIR=tmp)
    expect(got == want, "environment is %r, expected %r" % (got, want), res)


@case
def workdir_is_cwd_and_home(e):
    """The command starts in the workdir, HOME is the workdir, and --workdir
    moves both (and the workdir is writable scratch)."""
    res = e.run(["/bin/sh", "-c", "pwd; echo $HOME"])
    expect_out(res, "/work\n/work\n")
    res = e.run(["/bin/sh", "-c", "pwd; echo $HOME; echo x > f && cat f"],
                opts=["--workdir", "/job"])
    expect_out(res, "/job\n/job\nx\n")


@case
def ids_inside(e):
    """The command runs as uid/gid 1000 (real, effective, saved) with no
    supplementary groups beyond 1000, and /etc/passwd names it sandbox."""
    res = e.probe_run("id")
    expect_rc(res, 0)
    ids = kv(res.text)
    for k in ("uid", "euid", "suid", "gid", "egid", "sgid"):
        expect(ids.get(k) == "1000", "%s is %r, expected 1000" % (k, ids.get(k)), res)
    groups = [g for g in ids.get("groups", "").split(",") if g]
    expect(set(groups) <= {"1000"}, "supplementary groups %s" % groups, res)
    res = e.probe_run("read", "/etc/passwd")
    expect_ok(res)
    expect("\nsandbox:x:1000:1000:" in res.text, "/etc/passwd lacks sandbox:x:1000:1000", res)


@case
def host_uid_of_sandbox_processes(e):
    """From the host, every process of a running sandbox (found by its unique
    argv, and everything in its pid namespace) has a non-root host uid: as
    root, sandbox uid 1000 is a host uid of the run's own slot of the pool
    (base + 1000); rootless, it is ours."""
    t = tag("hostuid-")
    p = subprocess.Popen(e.argv([PROBE_IN, "sleep", "3", t]), stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True)
    try:
        pids = wait_for(lambda: procs_matching(t), 10)
        expect(pids, "no host process with argv containing %s appeared" % t)
        pid = pids[0]
        uids, gids = status_ids(pid)
        want = uids[0] if IS_ROOT else HOST_SANDBOX_UID
        expect(uids == [want] * 4, "probe's host uids are %s, expected %s" % (uids, want))
        if IS_ROOT:
            expect(in_pool_user(want), "probe's host uid %d is not a slot's user" % want)
            expect(gids == [want] * 4, "probe's host gids are %s" % gids)
        ns = os.readlink("/proc/%d/ns/pid" % pid)
        expect(ns != os.readlink("/proc/self/ns/pid"), "the probe is in the host pid namespace")
        members = []
        for q in [int(d) for d in os.listdir("/proc") if d.isdigit()]:
            try:
                if os.readlink("/proc/%d/ns/pid" % q) == ns:
                    members.append((q, status_ids(q)[0]))
            except OSError:
                pass
        # Rootless, the non-dumpable init's /proc/PID/ns is closed to us.
        expect(len(members) >= (2 if IS_ROOT else 1),
               "expected init and probe in the sandbox pid ns: %s" % members)
        for q, u in members:
            expect(u and 0 not in u, "sandbox process %d runs as host uid %s" % (q, u))
        out, err = p.communicate(timeout=15)
        expect(p.returncode == 0, "airlock exited %s: %r" % (p.returncode, err))
    finally:
        if p.poll() is None:
            kill_pid(p.pid)
            p.wait()


@case
def supervisor_confines_itself(e):
    """While the command runs, airlock itself (the supervisor, which also
    runs the egress gateway) has no_new_privs and, as root, only CAP_KILL
    and CAP_DAC_OVERRIDE left in every set, bounding set included; rootless
    it has none. Read from the host in /proc/PID/status."""
    t = tag("confined-")
    argv = e.argv([PROBE_IN, "sleep", "3", t], ["--allow", "x.test"])
    t0 = time.monotonic()
    p = start(argv)
    try:
        started = wait_for(lambda: procs_matching(t), 10)
        with open("/proc/%d/status" % p.pid) as f:
            got = {k.strip(): v.strip() for k, v in (l.split(":", 1) for l in f)}
    finally:
        res = finish(p, argv, t0, 15)
    expect(started, "the sandboxed probe did not start", res)
    expect_rc(res, 0)
    want = "0000000000000022" if IS_ROOT else "0000000000000000"
    for k in ("CapPrm", "CapEff", "CapBnd") if IS_ROOT else ("CapPrm", "CapEff"):
        expect(got.get(k) == want, "the supervisor's %s is %r, expected %s"
               % (k, got.get(k), want), res)
    expect(got.get("CapAmb") == "0000000000000000", "CapAmb is %r" % got.get("CapAmb"), res)
    expect(got.get("NoNewPrivs") == "1", "the supervisor's NoNewPrivs is %r"
           % got.get("NoNewPrivs"), res)


@case
def no_capabilities(e):
    """Every capability set is empty, no_new_privs is set and seccomp is in
    filter mode."""
    res = e.probe_run("caps")
    expect_rc(res, 0)
    got = {k.strip(): v.strip() for k, v in (l.split(":", 1) for l in res.text.splitlines())}
    for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        expect(got.get(k) == "0000000000000000", "%s is %r" % (k, got.get(k)), res)
    expect(got.get("NoNewPrivs") == "1", "NoNewPrivs is %r" % got.get("NoNewPrivs"), res)
    expect(got.get("Seccomp") == "2", "Seccomp is %r" % got.get("Seccomp"), res)


# ---- filesystem view ---------------------------------------------------------

@per_backend()
@case
def host_private_paths_invisible(e):
    """/root, /home and /etc/shadow do not exist inside (ENOENT; on a
    backend without mounts, process, they cannot be listed or read:
    EACCES), and /etc/passwd is the synthesized one, not the host's (or,
    process, unreadable)."""
    res, s = multi(e, [hidden_step("root", "/root", True), hidden_step("home", "/home", True),
                       hidden_step("shadow", "/etc/shadow", False),
                       hidden_step("gshadow", "/etc/gshadow", False),
                       ("passwd", ["read", "/etc/passwd"])])
    for label in ("root", "home", "shadow", "gshadow"):
        section_errno(res, s, label, HIDDEN)
    host_users = set()
    with open("/etc/passwd") as f:
        host_users = {l.split(":")[0] for l in f if ":" in l}
    inside = {l.split(":")[0] for l in s["passwd"][1:] if ":" in l}
    leaked = (host_users & inside) - {"root", "nobody"}
    expect(not leaked, "host accounts visible in the sandbox /etc/passwd: %s" % sorted(leaked), res)


@per_backend()
@case
def only_named_inputs_visible(e):
    """Of a host dir with two files, only the one bound with --ro is visible
    (at its sandbox path, with its content); the other and the host dir are
    not."""
    with TempDir() as d:
        a = write_file(os.path.join(d, "a.txt"), "alpha\n")
        write_file(os.path.join(d, "b.txt"), "bravo\n")
        # Without mounts (process) a.txt is at its host path, and its
        # directory is the host's: listing it is refused (hostdir).
        steps = [("a", ["read", inside(a, "/input/a.txt")]),
                 hidden_step("hostdir", d, True),
                 hidden_step("hostb", os.path.join(d, "b.txt"), False)]
        if not AT_HOST_PATHS:
            steps += [("b", ["stat", "/input/b.txt"]), ("ls", ["ls", "/input"])]
        res, s = multi(e, steps, opts=["--ro", bind(a, "/input/a.txt")])
        expect(s["a"] == ["ok", "alpha"], "a.txt content %r" % s["a"], res)
        section_errno(res, s, "hostdir", HIDDEN)
        section_errno(res, s, "hostb", HIDDEN)
        if not AT_HOST_PATHS:
            section_errno(res, s, "b", ("ENOENT",))
            expect(s["ls"] == ["ok", "a.txt"], "/input lists %r" % s["ls"], res)


def host_dir_outside_scratch():
    """A new world-readable host dir whose path is not under /tmp (which is
    the scratch inside), or None."""
    for parent in ("/var/lib", os.path.expanduser("~"), os.getcwd()):
        if parent.startswith(("/tmp", "/var/tmp", "/dev", "/proc", "/usr", "/etc", "/work")):
            continue
        try:
            d = tempfile.mkdtemp(prefix="airlock-e2e-", dir=parent)
        except OSError:
            continue
        os.chmod(d, 0o755)
        return d
    return None


@case
def ro_default_path_is_host_path(e):
    """--ro HOST without :PATH shows the file at its absolute host path."""
    base = host_dir_outside_scratch()
    if base is None:
        raise Skip("no writable host dir outside /tmp, /usr, /etc and /work")
    try:
        f = write_file(os.path.join(base, "in.txt"), "same-path\n")
        res = e.probe_run("read", f, opts=["--ro", f])
        expect_out(res, "ok\nsame-path\n")
    finally:
        shutil.rmtree(base, ignore_errors=True)


def expected_root_entries(extra):
    names = {"etc", "proc", "dev", "tmp", "work"} | set(extra)
    for s in ("usr", "bin", "lib", "lib64", "sbin"):
        if os.path.lexists("/" + s):
            names.add(s)
    return names


@case
def root_listing_exact(e):
    """`ls /` inside shows only the system dirs, etc, proc, dev, tmp, the
    workdir and the parents of named inputs: nothing else of the host."""
    with TempDir() as d:
        a = write_file(os.path.join(d, "data.csv"), "x\n")
        res = e.probe_run("ls", "/", opts=["--ro", "%s:/input/data.csv" % a])
        got = set(probe_listing(res))
        want = expected_root_entries({"opt", "input"})
        expect(got == want, "/ has %s; expected %s" % (sorted(got), sorted(want)), res)


@case
def dev_is_minimal(e):
    """/dev holds only null zero full random urandom, the fd/stdin/stdout/
    stderr links and shm; /dev/null and /dev/zero work."""
    res, s = multi(e, [("ls", ["ls", "/dev"]), ("null", ["write", "/dev/null", "x"]),
                       ("zero", ["open", "/dev/zero", "r"])])
    got = set(s["ls"][1:])
    want = {"null", "zero", "full", "random", "urandom", "fd", "stdin", "stdout", "stderr", "shm"}
    expect(got == want, "/dev has %s; expected %s" % (sorted(got), sorted(want)), res)
    section_ok(res, s, "null")
    section_ok(res, s, "zero")


@per_backend()
@case
def readonly_input_unmodifiable(e):
    """A --ro file and a --ro dir cannot be written, appended, or added to
    from inside; the host copies are byte-for-byte unchanged."""
    with TempDir() as d:
        sub = os.path.join(d, "dir")
        os.mkdir(sub)
        os.chmod(sub, 0o755)
        f = write_file(os.path.join(d, "data.csv"), "a,b\n1,2\n")
        g = write_file(os.path.join(sub, "inner.txt"), "inner\n")
        before = (sha256_file(f), sha256_file(g), sorted(os.listdir(sub)))
        di = inside(sub, "/input/dir")
        res, s = multi(e, [("file", ["write", inside(f, "/input/data.csv"), "evil"]),
                           ("inner", ["write", di + "/inner.txt", "evil"]),
                           ("new", ["write", di + "/new.txt", "evil"]),
                           ("mkdir", ["mkdir", di + "/newdir"])],
                       opts=["--ro", bind(f, "/input/data.csv"), "--ro", bind(sub, "/input/dir")])
        for label in ("file", "inner", "new", "mkdir"):
            section_errno(res, s, label, WRITE_DENIED)
        after = (sha256_file(f), sha256_file(g), sorted(os.listdir(sub)))
        expect(before == after, "host input changed: %s -> %s" % (before, after), res)


@per_backend()
@case
def writes_outside_scratch_fail(e):
    """Writes to /, /usr, /etc, /opt (an input's parent), /proc and /dev fail
    and create nothing on the host."""
    name = tag("airlock-e2e-w-")
    targets = ["/" + name, "/usr/" + name, "/etc/" + name, "/opt/" + name,
               "/proc/" + name, "/dev/" + name, "/usr/bin/" + name]
    steps = [("t%d" % i, ["write", t]) for i, t in enumerate(targets)]
    steps.append(("mkdir", ["mkdir", "/" + name + "-d"]))
    try:
        res, s = multi(e, steps)
        for i, t in enumerate(targets):
            pseudo = t.startswith("/proc/") or t.startswith("/dev/")
            section_errno(res, s, "t%d" % i, WRITE_DENIED + (("ENOENT",) if pseudo else ()))
        section_errno(res, s, "mkdir", WRITE_DENIED)
        for t in targets + ["/" + name + "-d"]:
            expect(not os.path.lexists(t), "host path %s exists after the run" % t, res)
    finally:
        # Only if the sandbox leaked: remove what the probe created on the host.
        for t in targets:
            if t.startswith(("/proc/", "/dev/")):
                continue
            if os.path.isfile(t):
                os.unlink(t)
        if os.path.isdir("/" + name + "-d"):
            os.rmdir("/" + name + "-d")


@case
def writes_to_scratch_succeed(e):
    """/tmp, the workdir and /dev/shm are writable, and read back."""
    res, s = multi(e, [("tmp", ["write", "/tmp/x", "t\n"]), ("work", ["write", "/work/x", "w\n"]),
                       ("shm", ["write", "/dev/shm/x", "s\n"]), ("rtmp", ["read", "/tmp/x"]),
                       ("rwork", ["read", "/work/x"]), ("rshm", ["read", "/dev/shm/x"])])
    for label in ("tmp", "work", "shm"):
        section_ok(res, s, label)
    expect(s["rtmp"] == ["ok", "t"] and s["rwork"] == ["ok", "w"] and s["rshm"] == ["ok", "s"],
           "read back %r %r %r" % (s["rtmp"], s["rwork"], s["rshm"]), res)


def host_find(name, roots=("/tmp", "/dev/shm", "/var/tmp", "/run")):
    hits = []
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root, onerror=lambda err: None):
            for n in dirnames + filenames:
                if name in n:
                    hits.append(os.path.join(dirpath, n))
    return hits


@per_backend("private_tmp")
@case
def scratch_gone_after_run(e):
    """Files written to /tmp, /work and /dev/shm exist on no host path
    afterwards, and a second run starts with empty scratch."""
    name = tag("airlock-e2e-scratch-")
    res, s = multi(e, [("tmp", ["write", "/tmp/" + name]), ("work", ["write", "/work/" + name]),
                       ("shm", ["write", "/dev/shm/" + name]), ("ls", ["ls", "/tmp"])])
    for label in ("tmp", "work", "shm"):
        section_ok(res, s, label)
    expect(name in s["ls"], "the file was not in /tmp during the run", res)
    hits = host_find(name)
    expect(not hits, "scratch files found on the host after the run: %s" % hits, res)
    res, s = multi(e, [("tmp", ["ls", "/tmp"]), ("work", ["ls", "/work"]),
                       ("shm", ["ls", "/dev/shm"])])
    for label in ("tmp", "work", "shm"):
        expect(s[label] == ["ok"], "second run sees %s in %s" % (s[label], label), res)


@case
def scratch_size_enforced(e):
    """--scratch 8M: filling /tmp stops with ENOSPC at about 8 MiB, and
    /dev/shm shares the same budget (it gets less than 1 MiB more)."""
    res, s = multi(e, [("tmp", ["fill", "/tmp/big"]), ("shm", ["fill", "/dev/shm/big"])],
                   opts=["--scratch", "8M"])
    r = kv("\n".join(s["tmp"]))
    expect(r.get("errno") == "ENOSPC", "filling /tmp ended with %r" % r.get("errno"), res)
    n = int(r.get("bytes", "-1"))
    expect(4 << 20 <= n <= 8 << 20, "wrote %d bytes into an 8M scratch" % n, res)
    r = kv("\n".join(s["shm"]))
    n = int(r.get("bytes", "-1"))
    expect(0 <= n < 1 << 20, "/dev/shm took %d more bytes: not the same 8M budget" % n, res)


@case
def rw_dir_visible_on_host(e):
    """A --rw dir is writable inside and the file is on the host afterwards,
    owned (as root) by the dir's host owner through an idmapped mount, even
    when the dir is 0700; rootless, by airlock's own uid."""
    with TempDir(mode=0o700) as d:
        owner = (1001, 1002) if IS_ROOT else (os.geteuid(), os.getegid())
        os.chown(d, *owner)
        res = e.probe_run("write", "/output/result.txt", "hello-from-sandbox\n",
                          opts=["--rw", "%s:/output" % d])
        expect_ok(res)
        path = os.path.join(d, "result.txt")
        expect(os.path.exists(path), "result.txt not on the host", res)
        with open(path) as f:
            expect(f.read() == "hello-from-sandbox\n", "host content differs", res)
        st = os.stat(path)
        expect((st.st_uid, st.st_gid) == owner, "host file owned by %d:%d, expected %d:%d"
               % (st.st_uid, st.st_gid, owner[0], owner[1]), res)
        expect(not in_pool_user(st.st_uid) or not IS_ROOT,
               "the sandbox's own host id shows on disk", res)


@case
def private_inputs_as_root(e):
    """As root, a 0600 input under a 0700 parent (root's, or chown'd to
    another host user) is read inside, shown as the sandbox user's own; the
    sandbox cannot write it."""
    if not IS_ROOT:
        raise Skip("as root only (rootless reads what airlock's user can)")
    with TempDir(mode=0o700) as d:
        sub = os.path.join(d, "uploads")
        os.mkdir(sub, 0o700)
        f = write_file(os.path.join(sub, "x.csv"), "a,b\n1,2\n", mode=0o600)
        g = write_file(os.path.join(sub, "y.csv"), "other-owner\n", mode=0o600)
        os.chown(g, 1001, 1001)
        res = e.run(["/bin/sh", "-c", "cat /input/x.csv /input/y.csv; stat -c '%u:%g %a' "
                     "/input/x.csv; echo z >> /input/x.csv; echo rc=$?"],
                    ["--ro", "%s:/input/x.csv" % f, "--ro", "%s:/input/y.csv" % g])
        expect_rc(res, 0)
        expect(res.text.startswith("a,b\n1,2\nother-owner\n1000:1000 600\n"),
               "inputs not read as their owner: %r" % res.text, res)
        expect("rc=0" not in res.text, "the read-only input was writable", res)
        with open(f) as fh:
            expect(fh.read() == "a,b\n1,2\n", "the host file changed", res)


class Ramfs:
    """A ramfs (a filesystem that cannot be idmapped) mounted on a fresh
    directory, unmounted and removed on exit."""

    def __enter__(self):
        self.path = tempfile.mkdtemp(prefix="airlock-e2e-ramfs-")
        r = subprocess.run(["mount", "-t", "ramfs", "ramfs", self.path], capture_output=True)
        if r.returncode != 0:
            os.rmdir(self.path)
            raise Skip("cannot mount a ramfs: %s" % r.stderr.decode().strip())
        os.chmod(self.path, 0o755)
        return self.path

    def __exit__(self, *exc):
        subprocess.run(["umount", self.path], capture_output=True)
        os.rmdir(self.path)


@case
def not_idmappable_inputs(e):
    """As root, on a filesystem that cannot be idmapped: --rw is refused
    with the reason; a --ro file others may read is shown as it is; one
    they may not is refused, naming "copy": true, and with it is a
    read-only copy in the scratch, read as the tree's owner."""
    if not IS_ROOT:
        raise Skip("as root only")
    with Ramfs() as fs, TempDir() as d:
        out = os.path.join(fs, "out")
        os.mkdir(out, 0o700)
        os.chown(out, 1001, 1001)
        refusal(e, e.argv([PROBE_IN, "id"], ["--rw", "%s:/output" % out]), 125, out,
                "cannot be idmapped", "--rw refused")
        pub = write_file(os.path.join(fs, "pub.txt"), "public\n", mode=0o644)
        res = e.run(["/bin/cat", "/input/pub.txt"], ["--ro", "%s:/input/pub.txt" % pub])
        expect_out(res, "public\n")
        priv = write_file(os.path.join(fs, "priv.txt"), "private\n", mode=0o600)
        refusal(e, e.argv([PROBE_IN, "id"], ["--ro", "%s:/input/priv.txt" % priv]), 125,
                priv, "\"copy\": true")
        tree = os.path.join(fs, "tree")
        os.makedirs(os.path.join(tree, "sub"))
        write_file(os.path.join(tree, "sub", "f.txt"), "deep\n", mode=0o600)
        os.chmod(os.path.join(tree, "sub"), 0o700)
        os.chmod(tree, 0o700)
        pol = write_file(os.path.join(d, "p.json"), json.dumps({"version": 1, "filesystem": {
            "mounts": [{"host": priv, "path": "/input/priv.txt", "copy": True},
                       {"host": tree, "path": "/input/tree", "copy": True}]}}))
        res = e.run(["/bin/sh", "-c", "cat /input/priv.txt /input/tree/sub/f.txt; "
                     "echo x >> /input/priv.txt && echo wrote; "
                     "touch /input/tree/new && echo made; chmod 666 /input/priv.txt && "
                     "echo chmod; true"], ["--policy", pol])
        expect_out(res, "private\ndeep\n")
        with open(priv) as fh:
            expect(fh.read() == "private\n", "the host file changed", res)
        # A copy is read as the tree's owner, whom the sandbox would have
        # acted as: a root-only file in alice's tree is not copied.
        alice = os.path.join(fs, "alice")
        os.mkdir(alice, 0o700)
        write_file(os.path.join(alice, "root.key"), "root-only secret\n", mode=0o600)
        os.chown(alice, 1001, 1001)
        pol2 = write_file(os.path.join(d, "p2.json"), json.dumps({"version": 1, "filesystem": {
            "mounts": [{"host": alice, "path": "/input/alice", "copy": True}]}}))
        res = e.run(["/bin/cat", "/input/alice/root.key"], ["--policy", pol2])
        expect_rc(res, 125)
        expect("root-only secret" not in res.text and "root.key" in res.errtext,
               "the owner's copy read a root-only file", res)
        # Nor through root's groups: a root:root 0640 file is not the
        # owner's to read either.
        os.rename(os.path.join(alice, "root.key"), os.path.join(alice, "group.key"))
        os.chmod(os.path.join(alice, "group.key"), 0o640)
        res = e.run(["/bin/cat", "/input/alice/group.key"], ["--policy", pol2])
        expect_rc(res, 125)
        expect("root-only secret" not in res.text and "group.key" in res.errtext,
               "the owner's copy read a root-group file", res)


@case
def no_setid_files(e):
    """No set-user-ID or set-group-ID file can be made (through a --rw dir
    the sandbox acts as its host owner): chmod u+s/g+s and creating with
    those bits are refused, and no such file reaches the host."""
    with TempDir(mode=0o777) as d:
        os.chmod(d, 0o777)
        script = ("import os\n"
                  "open('/output/a','w').close()\n"
                  "for m in (0o4755, 0o2755):\n"
                  "    try: os.chmod('/output/a', m); print('chmod', oct(m))\n"
                  "    except PermissionError: print('refused')\n"
                  "try: os.close(os.open('/output/b', os.O_CREAT|os.O_WRONLY, 0o4755)); "
                  "print('created')\n"
                  "except PermissionError: print('refused')\n"
                  "os.chmod('/output/a', 0o755); print('plain ok')\n")
        res = e.run(["python3", "-c", script], ["--rw", "%s:/output" % d])
        expect_out(res, "refused\nrefused\nrefused\nplain ok\n")
        for name in os.listdir(d):
            mode = os.lstat(os.path.join(d, name)).st_mode
            expect(not mode & 0o6000, "%s has mode %o on the host" % (name, mode), res)
        expect("denied 3 system calls: chmod, openat" in res.errtext,
               "the denial summary does not name the refused call", res)


@case
def mount_under_workdir(e):
    """A mount may be a subdirectory of the workdir: it is the host's there,
    and the scratch still backs the rest of the workdir, the directories on
    the way to it included (the sandbox user's, like the workdir)."""
    with TempDir() as d:
        write_file(os.path.join(d, "in.txt"), "input\n")
        res = e.run(["/bin/sh", "-c", "cat /work/input/in.txt; echo s > /work/scratch.txt && "
                     "cat /work/scratch.txt; echo x > /work/input/new 2>/dev/null || echo ro; "
                     "cat /work/a/b/in.txt; touch /work/a/mine && echo parents-writable"],
                    ["--ro", "%s:/work/input" % d, "--ro", "%s:/work/a/b" % d])
        expect_out(res, "input\ns\nro\ninput\nparents-writable\n")
        expect(sorted(os.listdir(d)) == ["in.txt"], "the host dir changed", res)


def copy_report(res, path):
    rec = json.loads(open(path).read())
    expect(isinstance(rec.get("copy_out"), list), "no copy_out in the record", res)
    return rec["copy_out"]


@case
def copy_in_and_out(e):
    """--copy-in puts a host tree (a 0600 file under a 0700 dir, a link kept
    as a link, never followed on the host) into the scratch, owned by the
    sandbox user; --copy-out brings back regular files and directories with
    their sha256 in the record, and skips a planted link and a FIFO."""
    with TempDir(mode=0o700) as src, TempDir() as d:
        os.makedirs(os.path.join(src, "proj", "sub"))
        write_file(os.path.join(src, "proj", "a.py"), "print(1)\n", mode=0o600)
        write_file(os.path.join(src, "proj", "sub", "b.txt"), "bee\n")
        os.symlink("/etc/shadow", os.path.join(src, "proj", "shadow"))
        os.chmod(os.path.join(src, "proj"), 0o700)
        out = os.path.join(d, "results")
        rec = os.path.join(d, "r.json")
        script = ("cat /work/proj/a.py /work/proj/sub/b.txt; readlink /work/proj/shadow; "
                  "stat -c '%U %a' /work/proj/a.py; mkdir -p /work/out/d; "
                  "echo one > /work/out/1.txt; echo two > /work/out/d/2.txt; "
                  "ln -s /etc/passwd /work/out/evil; mkfifo /work/out/fifo")
        res = e.run(["/bin/sh", "-c", script],
                    ["--copy-in", "%s:/work/proj" % os.path.join(src, "proj"),
                     "--copy-out", "/work/out:%s" % out, "--result", rec])
        expect_rc(res, 0)
        expect_out(res, "print(1)\nbee\n/etc/shadow\nsandbox 600\n")
        expect(sorted(os.listdir(out)) == ["1.txt", "d"], "host got %s" % os.listdir(out), res)
        with open(os.path.join(out, "d", "2.txt")) as f:
            expect(f.read() == "two\n", "2.txt differs", res)
        rep = copy_report(res, rec)[0]
        got = {f["path"]: (f["size"], f["sha256"]) for f in rep["files"]}
        want = {"/work/out/1.txt": (4, sha256_file(os.path.join(out, "1.txt"))),
                "/work/out/d/2.txt": (4, sha256_file(os.path.join(out, "d", "2.txt")))}
        expect(got == want, "copy_out files %s, expected %s" % (got, want), res)
        why = {s["path"]: s["why"] for s in rep["skipped"]}
        expect("symbolic link" in why.get("/work/out/evil", "") and
               "/work/out/fifo" in why, "skipped: %s" % why, res)
        expect("skipped 2" in res.errtext, "stderr does not say what was skipped", res)


@case
def root_owned_rw_is_not_root(e):
    """As root, the sandbox never writes as host root: a root-owned --rw dir
    is not idmapped (a shared mapping could rewrite a set-uid file there
    keeping its bit); at 0700 it is refused naming chown, at 0777 files come
    back owned by host id 1000001000 (the same in every run: the run's own
    ids never reach the disk), and with a pinned range by its user."""
    if not IS_ROOT:
        raise Skip("as root only")
    with TempDir(mode=0o700) as d:
        refusal(e, e.argv([PROBE_IN, "id"], ["--rw", "%s:/output" % d]), 125, d,
                "belongs to root", "chown")
        os.chmod(d, 0o777)
        res = e.probe_run("write", "/output/r.txt", "r\n", opts=["--rw", "%s:/output" % d])
        expect_ok(res)
        st = os.stat(os.path.join(d, "r.txt"))
        expect((st.st_uid, st.st_gid) == (HOST_DISK_ID, HOST_DISK_ID),
               "root-owned --rw wrote as %d:%d" % (st.st_uid, st.st_gid), res)
        res = e.probe_run("write", "/output/p.txt", "p\n",
                          opts=pinned_opts() + ["--rw", "%s:/output" % d])
        expect_ok(res)
        st = os.stat(os.path.join(d, "p.txt"))
        expect(st.st_uid == HOST_SANDBOX_UID, "pinned, root-owned --rw wrote as %d"
               % st.st_uid, res)


@case
def copy_out_never_harms_the_host(e):
    """Copy-out never replaces or merges into what the host has, drops exec
    bits and others' write, leaves out .git (its config runs commands),
    skips a file mount under the workdir (its host file stays whole),
    prints sandbox-chosen names as printable ASCII, and refuses a HOSTDIR
    reached through a symbolic link or lying in a --rw input."""
    with TempDir() as d:
        out = os.path.join(d, "out")
        os.mkdir(out)
        write_file(os.path.join(out, "keep.txt"), "host's own\n")
        os.mkdir(os.path.join(out, "hooks"))
        data = write_file(os.path.join(d, "data.csv"), "precious input\n")
        rec = os.path.join(d, "r.json")
        script = ("mkdir -p /work/out/hooks; echo x > /work/out/keep.txt; "
                  "printf '#!/bin/sh\\necho pwned\\n' > /work/out/hooks/pre-commit; "
                  "printf '#!/bin/sh\\n' > /work/out/run.sh; chmod 755 /work/out/run.sh; "
                  "mkdir -p /work/out/repo/.git; echo '[core] fsmonitor = sh -c x' > "
                  "/work/out/repo/.git/config; echo w > /work/out/repo/w.txt; "
                  "chmod 666 /work/out/repo/w.txt; chmod 777 /work/out/repo; "
                  "ln -s /etc/passwd \"/work/out/x$(printf '\\n')airlock: fake$(printf '\\033')[2K\"")
        res = e.run(["/bin/sh", "-c", script],
                    ["--ro", "%s:/work/out/data.csv" % data, "--copy-out", "/work/out:%s" % out,
                     "--result", rec])
        expect_rc(res, 122)  # keep.txt and hooks were left behind
        with open(os.path.join(out, "keep.txt")) as f:
            expect(f.read() == "host's own\n", "an existing host file was replaced", res)
        expect(os.listdir(os.path.join(out, "hooks")) == [], "merged into a host dir", res)
        with open(data) as f:
            expect(f.read() == "precious input\n", "the input's host file was overwritten", res)
        mode = os.stat(os.path.join(out, "run.sh")).st_mode
        expect(not mode & 0o111, "exec bits kept: %o" % mode, res)
        expect(sorted(os.listdir(os.path.join(out, "repo"))) == ["w.txt"],
               "a .git came out: %s" % os.listdir(os.path.join(out, "repo")), res)
        for name in ("repo", "repo/w.txt"):
            mode = os.stat(os.path.join(out, name)).st_mode
            expect(not mode & 0o002, "%s is writable by others: %o" % (name, mode), res)
        why = {x["path"]: x["why"] for x in copy_report(res, rec)[0]["skipped"]}
        expect(why.get("/work/out/data.csv") == "a mount point" and
               "never replaced" in why.get("/work/out/keep.txt", "") and
               "never merged" in why.get("/work/out/hooks", ""), "skipped: %s" % why, res)
        expect("\x1b" not in res.errtext and "\nairlock: fake" not in res.errtext,
               "a sandbox-chosen name reached stderr raw: %r" % res.errtext, res)
        link = os.path.join(d, "link")
        os.symlink(out, link)
        refusal(e, e.argv(["/bin/true"], ["--copy-out", "/work:%s" % link]), 125, link,
                "symbolic link")
        rw = os.path.join(d, "rw")
        os.mkdir(rw, 0o777)
        os.chmod(rw, 0o777)
        refusal(e, e.argv(["/bin/true"], ["--rw", "%s:/output" % rw, "--copy-out",
                                          "/work:%s/res" % rw]), 125, "lies in the --rw input")


@case
def copy_out_after_memory_kill(e):
    """Copy-out happens when a limit ended the run: a file written before a
    memory hog (1 MiB chunks, stopping by itself at 1 GiB) was killed comes
    back."""
    with TempDir() as d:
        out = os.path.join(d, "o")
        rec = os.path.join(d, "r.json")
        script = ("open('/work/out.txt','w').write('before the kill\\n')\n"
                  "x = []\n"
                  "for i in range(1024): x.append(b'\\x01' * (1 << 20))\n")
        res = e.run(["python3", "-c", script], ["--memory", "64M", "--copy-out",
                    "/work:%s" % out, "--result", rec], timeout=60)
        expect_rc(res, 137)
        with open(os.path.join(out, "out.txt")) as f:
            expect(f.read() == "before the kill\n", "copy-out after the kill differs", res)
        expect(json.load(open(rec))["reason"] == "memory", "not ended by the memory limit", res)


@case
def copy_out_caps(e):
    """A 100,000-file tree in the scratch: copy-out stops at the file-count
    cap (default 10,000) and says so; the size cap skips what does not fit.
    Nothing past a cap is written."""
    with TempDir() as d:
        out = os.path.join(d, "o")
        rec = os.path.join(d, "r.json")
        script = ("import os\n"
                  "os.makedirs('/work/many')\n"
                  "for i in range(100000): open('/work/many/f%d' % i, 'w').close()\n")
        res = e.run(["python3", "-c", script], ["--scratch", "512M", "--memory", "1G",
                    "--copy-out", "/work/many:%s" % out, "--result", rec], timeout=120)
        expect_rc(res, 0)
        rep = copy_report(res, rec)[0]
        expect(len(rep["files"]) == 10000 and len(os.listdir(out)) == 10000,
               "copied %d files (%d on the host)" % (len(rep["files"]), len(os.listdir(out))),
               res)
        expect(rep["stopped"] == "the file-count cap", "stopped: %r" % rep["stopped"], res)
        expect("stopped at the file-count cap" in res.errtext, "stderr does not say so", res)
    with TempDir() as d:
        out = os.path.join(d, "o")
        rec = os.path.join(d, "r.json")
        res = e.run(["/bin/sh", "-c", "mkdir /work/o; for i in 1 2 3; do "
                     "printf '%060d' 0 > /work/o/f$i; done"],
                    ["--copy-out", "/work/o:%s" % out, "--copy-out-size", "100",
                     "--result", rec])
        expect_rc(res, 0)
        rep = copy_report(res, rec)[0]
        expect(len(rep["files"]) == 1 and len(os.listdir(out)) == 1,
               "size cap: %d files copied" % len(rep["files"]), res)
        expect([s["why"] for s in rep["skipped"]] == ["over the size cap"] * 2,
               "size cap skips: %s" % rep["skipped"], res)


@case
def copy_in_refusals(e):
    """A copy-in larger than the scratch fails the run (125, "the scratch is
    full") before the command; a copy-in outside the scratch or a copy-out
    to a missing place is refused up front."""
    with TempDir() as d:
        big = os.path.join(d, "big")
        with open(big, "wb") as f:
            f.truncate(0)
            f.write(b"x" * (9 << 20))
        res = e.run(["/bin/echo", "ran"], ["--scratch", "8M", "--copy-in", "%s:/work/big" % big])
        expect_rc(res, 125)
        expect("the scratch is full" in res.errtext and "ran" not in res.text,
               "not refused as a full scratch", res)
        refusal(e, e.argv(["/bin/true"], ["--copy-in", "%s:/input/big" % big]), 125,
                "/input/big", "not in the scratch")
        refusal(e, e.argv(["/bin/true"], ["--copy-out", "/work:%s/no/such" % d]), 125,
                "no/such", "parent")


@case
def mount_targets_refused(e):
    """A mount over or inside /usr, /etc, /proc, /dev, /tmp or / is refused
    with 125 and names the sandbox path (under the workdir it is allowed:
    mount_under_workdir)."""
    with TempDir() as d:
        f = write_file(os.path.join(d, "x.txt"), "x\n")
        for target in ("/usr/x.txt", "/etc/x.txt", "/proc/x.txt", "/dev/x.txt", "/tmp/x.txt",
                       "/"):
            refusal(e, e.argv([PROBE_IN, "id"], ["--ro", "%s:%s" % (f, target)]), 125, target)


# ---- network -----------------------------------------------------------------

@case
def names_do_not_exist(e):
    """A name outside the rules reads "does not exist", never "temporary
    failure", to glibc, Python and Node: without the gateway (nsswitch
    "hosts: files") and through its stub (NXDOMAIN)."""
    script = ("getent hosts nope.test; echo getent=$?\n"
              "python3 -c \"import socket\n"
              "try: socket.getaddrinfo('nope.test', 80)\n"
              "except socket.gaierror as e: print('python', e.errno)\"\n"
              "node -e \"require('dns').lookup('nope.test', e => console.log('node', "
              "e && e.code))\"\n")
    want = "getent=2\npython -2\nnode ENOTFOUND\n"
    if not shutil.which("node"):
        raise Skip("node is not installed")
    for opts in ([], ["--allow", "allowed.test"]):
        res = e.run(["/bin/sh", "-c", script], opts)
        expect_out(res, want)


@per_backend()
@case
def no_network_to_host(e):
    """A TCP listener on the host's 127.0.0.1 and ::1 is unreachable from inside
    (ECONNREFUSED on the sandbox's own loopback; EACCES from landlock where
    the loopback is the host's, process) and never sees a connection."""
    listeners = []
    try:
        for fam, addr in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
            try:
                s = socket.socket(fam, socket.SOCK_STREAM)
                s.bind((addr, 0))
            except OSError:
                continue
            s.listen(8)
            s.setblocking(False)
            listeners.append((addr, s))
        expect(listeners, "could not open a host listener")
        steps = [(addr, ["connect", addr, str(s.getsockname()[1])]) for addr, s in listeners]
        res, sec = multi(e, steps)
        for addr, s in listeners:
            section_errno(res, sec, addr, LOOPBACK_REFUSED)
            try:
                conn, peer = s.accept()
                conn.close()
                raise AssertionError("host listener on %s got a connection from %s"
                                     % (addr, peer))
            except BlockingIOError:
                pass
    finally:
        for _, s in listeners:
            s.close()


@case
def loopback_inside_works(e):
    """The sandbox has its own working loopback: a listener on 127.0.0.1
    inside accepts a connection from inside."""
    res = e.probe_run("listen-self")
    expect_out(res, "ok\n")


@case
def only_loopback_interface(e):
    """/proc/net/dev inside lists only lo, and there is no route."""
    res, s = multi(e, [("dev", ["read", "/proc/net/dev"]), ("route", ["read", "/proc/net/route"])])
    ifaces = [l.split(":")[0].strip() for l in s["dev"][1:] if ":" in l]
    expect(ifaces == ["lo"], "interfaces inside: %s" % ifaces, res)
    routes = [l for l in s["route"][2:] if l.strip()]
    expect(not routes, "IPv4 routes inside: %s" % routes, res)


# ---- seccomp -----------------------------------------------------------------

DENIED = ["mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen",
          "fsconfig", "fsmount", "fspick", "mount_setattr", "setns", "unshare", "unshare-newns",
          "clone-newuser", "clone-newns", "clone-newpid", "clone-newnet", "clone-newipc",
          "clone-newuts", "clone-newcgroup", "bpf", "perf_event_open", "userfaultfd",
          "io_uring_setup", "io_uring_enter", "io_uring_register", "keyctl", "add_key",
          "request_key", "ptrace", "process_vm_readv", "process_vm_writev", "kcmp",
          "pidfd_getfd", "kexec_load", "kexec_file_load", "init_module", "finit_module",
          "delete_module", "reboot", "swapon", "swapoff", "acct", "settimeofday",
          "clock_settime", "clock_adjtime", "adjtimex", "syslog", "quotactl", "lookup_dcookie",
          "vhangup", "iopl", "ioperm", "open_by_handle_at", "name_to_handle_at", "tiocsti",
          "tiocsti-high", "tioclinux", "tioclinux-high", "socket-packet", "socket-packet-dgram",
          "socket-raw", "socket-raw-cloexec", "socket-raw6", "socket-inet-packet",
          "socket-netlink", "socket-netlink-dgram", "socket-alg", "socket-vsock"]
EXPECTED_ERRNO = dict({n: "EPERM" for n in DENIED}, clone3="ENOSYS")
ALLOWED = ["fork", "getpid", "socket-unix", "socket-inet", "socket-inet6"]

_syscall_results = {}


def syscall_results(e):
    """One sandbox run answers every syscall probe; cached across cases."""
    if "res" not in _syscall_results:
        try:
            res = e.probe_run("syscall", *(list(EXPECTED_ERRNO) + ALLOWED))
        except AssertionError as err:
            _syscall_results["res"] = (None, str(err))
            raise
        _syscall_results["res"] = (res, None)
    res, err = _syscall_results["res"]
    if err:
        raise AssertionError(err)
    expect_rc(res, 0)
    return res, dict(l.split(" ", 1) for l in res.text.splitlines() if " " in l)


def make_seccomp_case(name, want):
    def fn(e):
        res, got = syscall_results(e)
        expect(got.get(name) == "errno=" + want, "%s: expected errno=%s, probe said %r"
               % (name, want, got.get(name)), res)
    fn.__doc__ = "seccomp makes %s fail with %s." % (name, want)
    return fn


for _name, _want in EXPECTED_ERRNO.items():
    suite.add("seccomp denies %s with %s" % (_name, _want), make_seccomp_case(_name, _want))


@case
def seccomp_allows_ordinary_calls(e):
    """Controls: fork, getpid and unix/inet/inet6 sockets still work, so the
    EPERMs above come from the filter's rules, not from a deny-all."""
    res, got = syscall_results(e)
    for n in ALLOWED:
        expect((got.get(n) or "").startswith("ret="), "%s: probe said %r" % (n, got.get(n)), res)


# ---- processes ---------------------------------------------------------------

@case
def daemon_does_not_outlive_run(e):
    """A double-forked, setsid daemon (with stdout still open) is gone when
    airlock returns, and airlock does not wait for it."""
    name = tag("pd")  # 12 chars: fits in comm
    try:
        res = e.probe_run("daemon", name, timeout=25)
        expect_rc(res, 0)
        expect("daemon_pid=" in res.text, "the daemon never reported", res)
        expect(res.elapsed < 10, "airlock waited %.1fs for the daemon" % res.elapsed, res)
        left = wait_for(lambda: not procs_matching(name), 2)
        expect(left, "daemon still running on the host after airlock exited: pids %s"
               % procs_matching(name), res)
    finally:
        for pid in procs_matching(name):
            kill_pid(pid)


@per_backend()
@case
def timeout_kills_everything(e):
    """--timeout 1 on a 30 s sleep exits 124 well before the sleep's end
    (the bound is a hang guard: how long the setup takes depends on the
    machine's load) and leaves no process."""
    t = tag("timeout-")
    try:
        res = e.probe_run("sleep", "30", t, opts=["--timeout", "1"])
        expect_rc(res, 124)
        expect(res.elapsed < 20, "took %.2fs" % res.elapsed, res)
        expect(wait_for(lambda: not procs_matching(t), 5), "processes left: %s"
               % procs_matching(t), res)
    finally:
        for pid in procs_matching(t):
            kill_pid(pid)


@case
def timeout_units(e):
    """--timeout accepts "250ms" (and enforces it: a 30 s sleep ends with
    124, well before its end) and "2m"."""
    res = e.probe_run("sleep", "30", opts=["--timeout", "250ms"])
    expect_rc(res, 124)
    expect(res.elapsed < 20, "250ms timeout took %.2fs" % res.elapsed, res)
    res = e.probe_run("hostname", opts=["--timeout", "2m"])
    expect_rc(res, 0)


@per_backend()
@case
def exit_code_passthrough(e):
    """The command's exit status is airlock's: 0, 1, 7 and 255."""
    for code in (0, 1, 7, 255):
        res = e.run(["/bin/sh", "-c", "exit %d" % code])
        expect_rc(res, code)


@case
def signal_exit_code(e):
    """A command killed by signal N gives 128+N (TERM 143, KILL 137, SEGV 139)."""
    for sig, code in (("TERM", 143), ("KILL", 137), ("SEGV", 139)):
        res = e.run(["/bin/sh", "-c", "kill -%s $$" % sig])
        expect_rc(res, code)


@case
def command_not_found(e):
    """A missing command exits 127 with one "airlock: " line naming it."""
    refusal(e, e.argv(["no-such-command-e2e"]), 127, "no-such-command-e2e")
    refusal(e, e.argv(["/nonexistent/bin/tool"]), 127, "/nonexistent/bin/tool")


@case
def not_executable(e):
    """A --ro file without x bits and /etc/passwd exit 126, naming the path."""
    with TempDir() as d:
        f = write_file(os.path.join(d, "script.sh"), "#!/bin/sh\necho hi\n", mode=0o644)
        res = e.run(["/opt/data/script.sh"], opts=["--ro", "%s:/opt/data/script.sh" % f])
        expect_rc(res, 126)
        expect("/opt/data/script.sh" in res.errtext, "message does not name the path", res)
        res = e.run(["/etc/passwd"])
        expect_rc(res, 126)
        expect("/etc/passwd" in res.errtext, "message does not name the path", res)


@case
def sigterm_forwarded(e):
    """SIGTERM sent to airlock reaches the command: its trap runs and its exit
    code (42) comes back."""
    p = subprocess.Popen(e.argv(["/bin/sh", "-c", 'trap "exit 42" TERM; echo ready; '
                                 'sleep 30 & wait']),
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, start_new_session=True)
    try:
        line = read_line_with_timeout(p.stdout, 10)
        expect(line == b"ready\n", "the command never got ready (read %r)" % line)
        time.sleep(0.5)
        t0 = time.monotonic()
        p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=20)  # a hang guard: the sleep would take 30 s
        expect(rc == 42, "expected exit 42 after SIGTERM, got %s (stderr %r) after %.1f s"
               % (rc, p.stderr.read(), time.monotonic() - t0))
    finally:
        if p.poll() is None:
            kill_pid(p.pid)
            p.wait()


@case
def supervisor_sigkill_leaves_nothing(e):
    """If airlock itself is SIGKILLed, every sandbox process dies with it."""
    t = tag("orphan-")
    p = subprocess.Popen(e.argv([PROBE_IN, "sleep", "30", t]), stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    try:
        expect(wait_for(lambda: procs_matching(t), 10), "the sandbox never started")
        kill_pid(p.pid)
        p.wait(timeout=10)
        expect(wait_for(lambda: not procs_matching(t), 15),
               "sandbox processes survived airlock's death: %s" % procs_matching(t))
    finally:
        if p.poll() is None:
            kill_pid(p.pid)
            p.wait()
        for pid in procs_matching(t):
            kill_pid(pid)


# ---- a real job --------------------------------------------------------------

PANDAS_JOB = """\
import pandas as pd
df = pd.read_csv("/input/data.csv")
totals = df.groupby("city")["amount"].sum().sort_index()
totals.to_csv("/work/result.csv")
with open("/work/result.csv") as f:
    print(f.read(), end="")
print("rows", len(df))
"""


@case
def pandas_csv_job(e):
    """Debian's python3 with pandas reads a --ro CSV at /input/data.csv, writes
    the result to /work and prints it; the output is exact."""
    check = subprocess.run(["/usr/bin/python3", "-c", "import pandas"], capture_output=True)
    if check.returncode != 0:
        raise Skip("/usr/bin/python3 cannot import pandas on this host")
    with TempDir() as d:
        data = write_file(os.path.join(d, "data.csv"),
                          "city,amount\nParis,5\nBerlin,10\nParis,7\nOslo,1\nBerlin,20\n")
        job = write_file(os.path.join(d, "job.py"), PANDAS_JOB)
        digest = sha256_file(data)
        res = e.run(["python3", "/opt/job/job.py"], timeout=90,
                    opts=["--ro", "%s:/input/data.csv" % data, "--ro", "%s:/opt/job/job.py" % job])
        expect_out(res, "city,amount\nBerlin,30\nOslo,1\nParis,12\nrows 5\n")
        expect(sha256_file(data) == digest, "the input changed", res)


# ---- stdio -------------------------------------------------------------------

@case
def stdin_relayed(e):
    """`echo hi | airlock run -- cat` prints hi."""
    res = e.run(["cat"], input=b"hi\n")
    expect_out(res, "hi\n")


@case
def closed_stdio_of_airlock(e):
    """airlock started with its stdin closed (not /dev/null) still wires the
    sandbox's stdio right: the command sees EOF on stdin and its output
    arrives."""
    script = 'exec "$0" run -- sh -c "echo out; cat; echo done" <&-'
    res = run_host(["/bin/sh", "-c", script, e.airlock])
    expect_rc(res, 0)
    expect_out(res, "out\ndone\n")


def spew_pattern(n):
    """The bytes `probe spew n` writes: byte i is (7*i + i//251) % 256."""
    t7 = bytes((7 * i) % 256 for i in range(256)) * 2
    out = bytearray()
    for k in range(n // 251 + 1):
        start = 251 * k
        seg_len = min(251, n - start)
        if seg_len <= 0:
            break
        off = start % 256
        seg = t7[off:off + seg_len]
        add = bytes((j + k) % 256 for j in range(256))
        out += seg.translate(add)
    return bytes(out)


@case
def large_stdout_intact(e):
    """5 MB written by the probe to stdout arrive byte for byte."""
    n = 5 * 1000 * 1000
    res = e.probe_run("spew", n)
    expect_rc(res, 0)
    expect(res.out == spew_pattern(n), "spew output differs (%d of %d bytes received)"
           % (len(res.out), n))


@case
def large_stdin_from_pipe_intact(e):
    """5 MB piped into airlock's stdin reach the command: cat echoes them
    byte for byte (the sandbox's stdin pipe fills up many times)."""
    n = 5 * 1000 * 1000
    data = os.urandom(n)
    res = e.run(["cat"], input=data)
    expect_rc(res, 0)
    expect(res.out == data, "cat echoed %d of %d bytes" % (len(res.out), n))


@case
def large_stdin_from_file_intact(e):
    """5 MB from a regular file as airlock's stdin reach the command intact."""
    n = 5 * 1000 * 1000
    data = os.urandom(n)
    with tempfile.TemporaryFile() as f:
        f.write(data)
        f.seek(0)
        res = e.run(["cat"], stdin=f)
    expect_rc(res, 0)
    expect(res.out == data, "cat echoed %d of %d bytes" % (len(res.out), n))


@case
def hostname_default_and_flag(e):
    """The hostname is "airlock" by default; --hostname sets it and
    /etc/hostname; the host's hostname is untouched."""
    host_before = socket.gethostname()
    res = e.probe_run("hostname")
    expect_out(res, "airlock\n")
    res, s = multi(e, [("uname", ["hostname"]), ("file", ["read", "/etc/hostname"])],
                   opts=["--hostname", "box-1"])
    expect(s["uname"] == ["box-1"] and s["file"] == ["ok", "box-1"],
           "hostname %r, /etc/hostname %r" % (s["uname"], s["file"]), res)
    expect(socket.gethostname() == host_before, "the host's hostname changed", res)


@case
def stderr_separate(e):
    """The command's stdout and stderr arrive on airlock's stdout and stderr,
    each unmixed."""
    res = e.run(["/bin/sh", "-c", "echo out; echo err >&2; echo out2"])
    expect_rc(res, 0)
    expect(res.text == "out\nout2\n", "stdout is %r" % res.text, res)
    expect(res.errtext == "err\n", "stderr is %r" % res.errtext, res)


@case
def quiet_and_verbose_flags(e):
    """-q/--quiet and -v/--verbose are accepted and leave the command's
    stdout alone."""
    for flag in ("-q", "--quiet", "-v", "--verbose"):
        res = e.probe_run("hostname", opts=[flag])
        expect_rc(res, 0)
        expect(res.text == "airlock\n", "stdout with %s is %r" % (flag, res.text), res)


@case
def phase_times(e):
    """$AIRLOCK_PHASES prints each phase of a run with its monotonic time,
    in order, even with -q; without it, no phase line is printed."""
    env = dict(os.environ, AIRLOCK_PHASES="1")
    res = e.probe_run("hostname", opts=["-q"], env=env)
    expect_rc(res, 0)
    expect(res.text == "airlock\n", "stdout is %r" % res.text, res)
    phases = [l for l in res.errtext.splitlines() if l.startswith("airlock: phase ")]
    names = [l.partition(" ms: ")[2] for l in phases]
    times = [float(l[len("airlock: phase "):].partition(" ms: ")[0]) for l in phases]
    for want in ("main", "plan built", "plan lowered",
                 "cloned into new namespaces", "verified", "command started",
                 "command ended", "cleaned up"):
        expect(want in names, "no phase %r in %r" % (want, names), res)
    expect(times == sorted(times), "phase times go back: %r" % phases, res)
    env.pop("AIRLOCK_PHASES")
    res = e.probe_run("hostname", env=env)
    expect_rc(res, 0)
    expect("airlock: phase" not in res.errtext, "phase lines without $AIRLOCK_PHASES", res)


@case
def double_dash_optional(e):
    """The command may follow the options without "--"."""
    res = e.run(None, raw_argv=[e.airlock, "run", "--ro", "%s:%s" % (e.probe, PROBE_IN),
                                PROBE_IN, "hostname"])
    expect_out(res, "airlock\n")


@case
def rw_dir_as_workdir(e):
    """--rw HOST:/work makes the workdir the host dir: files the command
    writes in its cwd are on the host afterwards."""
    with TempDir(mode=0o777) as d:
        os.chmod(d, 0o777)
        res = e.run(["/bin/sh", "-c", "pwd; echo data > out.txt"], opts=["--rw", "%s:/work" % d])
        expect_out(res, "/work\n")
        path = os.path.join(d, "out.txt")
        expect(os.path.exists(path), "out.txt is not on the host", res)
        with open(path) as f:
            expect(f.read() == "data\n", "host out.txt differs", res)


def exec_check_script(path):
    return "cp /bin/true %s && chmod 755 %s && %s; echo rc=$?" % (path, path, path)


@case
def scratch_exec_policy(e):
    """Binaries copied to the scratch run by default; with
    filesystem.scratch_exec false they are refused (exit 126 from sh)."""
    res = e.run(["/bin/sh", "-c", exec_check_script("/tmp/t")])
    expect_out(res, "rc=0\n")
    with TempDir() as d:
        pol = {"version": 1, "filesystem": {"scratch_exec": False}}
        p = write_file(os.path.join(d, "noexec.json"), json.dumps(pol))
        for path in ("/tmp/t", "/work/t", "/dev/shm/t"):
            res = e.run(["/bin/sh", "-c", exec_check_script(path)], opts=["--policy", p])
            expect_out(res, "rc=126\n")


@case
def input_exec_false(e):
    """A policy mount with "exec": false cannot be executed (126), while the
    same file bound with exec allowed runs."""
    with TempDir() as d:
        copy = shutil.copy(e.probe, os.path.join(d, "probe"))
        os.chmod(copy, 0o755)
        pol = {"version": 1, "filesystem": {"mounts": [
            {"host": copy, "path": "/opt/noexec/probe", "mode": "ro", "exec": False}]}}
        p = write_file(os.path.join(d, "p.json"), json.dumps(pol))
        res = e.run(["/bin/sh", "-c", "/opt/noexec/probe hostname; echo rc=$?; "
                     "%s hostname" % PROBE_IN], opts=["--policy", p])
        expect_rc(res, 0)
        expect(res.text.endswith("rc=126\nairlock\n"), "output %r" % res.text, res)
        res = e.run(["/opt/noexec/probe", "hostname"], opts=["--policy", p])
        expect_rc(res, 126)


@case
def timeout_kills_term_ignoring_process(e):
    """--timeout still ends a command that ignores SIGTERM: 124, well
    before its 30 s sleep would end, nothing left."""
    t = tag("stubborn-")
    try:
        res = e.run(["/bin/sh", "-c", "trap '' TERM INT HUP; %s sleep 30 %s; %s sleep 30 %s"
                     % (PROBE_IN, t, PROBE_IN, t)], opts=["--timeout", "1"])
        expect_rc(res, 124)
        expect(res.elapsed < 20, "took %.2fs" % res.elapsed, res)
        expect(wait_for(lambda: not procs_matching(t), 5), "processes left: %s"
               % procs_matching(t), res)
    finally:
        for pid in procs_matching(t):
            kill_pid(pid)


# ---- bad input ---------------------------------------------------------------

@case
def bad_policy_malformed_json(e):
    """A policy that is not JSON: 125, one line naming the file."""
    with TempDir() as d:
        p = write_file(os.path.join(d, "broken.json"), '{"version": 1, "command": [')
        refusal(e, e.argv(None, ["--policy", p]), 125, "broken.json")


@case
def bad_policy_unknown_key(e):
    """An unknown key: 125, one line naming the file and the key."""
    with TempDir() as d:
        p = write_file(os.path.join(d, "unk.json"),
                       json.dumps({"version": 1, "command": ["true"], "frobnicate": 1}))
        refusal(e, e.argv(None, ["--policy", p]), 125, "unk.json", "frobnicate")
        p = write_file(os.path.join(d, "unk2.json"),
                       json.dumps({"version": 1, "command": ["true"],
                                   "limits": {"timeout": 5, "memroy": "1G"}}))
        refusal(e, e.argv(None, ["--policy", p]), 125, "unk2.json", "memroy")


@case
def bad_policy_wrong_type(e):
    """A value of the wrong type: 125, one line naming the file and JSON path."""
    with TempDir() as d:
        p = write_file(os.path.join(d, "type.json"),
                       json.dumps({"version": 1, "command": ["true"], "hostname": 5}))
        refusal(e, e.argv(None, ["--policy", p]), 125, "type.json", "hostname")
        p = write_file(os.path.join(d, "type2.json"),
                       json.dumps({"version": 1, "command": "true"}))
        refusal(e, e.argv(None, ["--policy", p]), 125, "type2.json", "command")


@case
def bad_policy_size(e):
    """limits.scratch "12Q" in a policy: 125 naming the file and limits.scratch."""
    with TempDir() as d:
        p = write_file(os.path.join(d, "p.json"),
                       json.dumps({"version": 1, "command": ["true"],
                                   "limits": {"scratch": "12Q"}}))
        refusal(e, e.argv(None, ["--policy", p]), 125, "p.json", "limits.scratch")


@case
def bad_policy_relative_path(e):
    """A relative sandbox path in filesystem.mounts: 125 naming the file and
    the JSON path."""
    with TempDir() as d:
        f = write_file(os.path.join(d, "x.txt"), "x\n")
        p = write_file(os.path.join(d, "rel.json"),
                       json.dumps({"version": 1, "command": ["true"],
                                   "filesystem": {"mounts": [{"host": f, "path": "input/x.txt",
                                                              "mode": "ro"}]}}))
        refusal(e, e.argv(None, ["--policy", p]), 125, "rel.json", "filesystem.mounts[0]")


@case
def bad_missing_policy_file(e):
    """--policy naming a file that does not exist: 125 naming it."""
    refusal(e, e.argv(None, ["--policy", "/nonexistent/e2e-policy.json"]), 125,
            "/nonexistent/e2e-policy.json")


@case
def bad_missing_input(e):
    """--ro of a host path that does not exist: 125 naming the path."""
    refusal(e, e.argv([PROBE_IN, "id"], ["--ro", "/nonexistent-e2e-input:/input/x"]), 125,
            "/nonexistent-e2e-input")


@case
def bad_size_flag(e):
    """--scratch 12Q: 125 naming the value."""
    refusal(e, e.argv([PROBE_IN, "id"], ["--scratch", "12Q"]), 125, "12Q")


@case
def bad_timeout_flag(e):
    """--timeout 5y: 125 naming the value."""
    refusal(e, e.argv([PROBE_IN, "id"], ["--timeout", "5y"]), 125, "5y")


@per_backend()
@case
def bad_backend(e):
    """--backend with a name airlock does not have: run and check exit 125
    with one line naming it and every backend this airlock has (the names
    `airlock backends --json` lists)."""
    names = [b["name"] for b in backends_json(e)]
    for sub in ("run", "check"):
        res = refusal(e, e.argv([PROBE_IN, "id"], ["--backend", "nosuchlayer"], subcommand=sub),
                      125, '"nosuchlayer"', "this build has: " + ", ".join(names))


def backends_json(e):
    res = run_host([e.airlock, "backends", "--json"])
    expect_rc(res, 0)
    return json.loads(res.out)["backends"]


@case
def backend_names_in_help_and_docs(e):
    """`--backend`'s help (run's and check's) ends with every layer `airlock
    backends --json` lists, in its order (generated from al_backends[]);
    the README's options table and airlock.1 name the same layers."""
    names = [b["name"] for b in backends_json(e)]
    for sub in ("run", "check"):
        res = run_host([e.airlock, sub, "--help"])
        expect_rc(res, 0)
        lines = [l for l in res.text.splitlines() if "--backend NAME" in l]
        expect(len(lines) == 1 and
               lines[0].endswith("(see airlock backends); this build has: " + ", ".join(names)),
               "airlock %s --help's --backend line: %r" % (sub, lines), res)
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    with open(os.path.join(root, "README.md")) as f:
        readme = f.read()
    want = "this build: " + ", ".join("`%s`" % n for n in names)
    expect(any(l.startswith("| `--backend NAME` |") and want in l for l in readme.splitlines()),
           "README.md's --backend row does not say %r" % want)
    with open(os.path.join(root, "docs", "airlock.1")) as f:
        man = f.read()
    want = "(this build: %s)." % ", ".join(names)
    expect(want in man, "airlock.1 does not say %r" % want)


BACKEND_FEATURES = {"exec", "tty", "network", "hides_processes", "private_tmp",
                    "private_loopback", "pause", "mounts_elsewhere", "oci_root"}
BACKEND_ROWS = ("files", "egress", "processes", "kernel", "limits", "exec")
BACKENDS_DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs",
                            "backends.md")


@case
def backends_listed(e):
    """`airlock backends --json`: native first among the layers, each with
    usable (and a why when false), a summary, every promise's row and every
    feature as a boolean; native is usable here and has them all. The text
    form names each layer on a line of its own with "usable here" or "not
    usable here: WHY", each row's label and what it cannot do."""
    listed = backends_json(e)
    names = [b["name"] for b in listed]
    expect("native" in names, "native is not listed: %s" % names)
    expect(len(set(names)) == len(names), "a name is listed twice: %s" % names)
    for b in listed:
        expect(isinstance(b.get("usable"), bool), "%s: usable is %r" % (b["name"], b.get("usable")))
        expect(b["usable"] or b.get("why"), "%s is unusable without a why" % b["name"])
        expect(b.get("summary"), "%s has no summary" % b["name"])
        for row in BACKEND_ROWS:
            expect(isinstance(b.get(row), str) and b[row], "%s has no %s row" % (b["name"], row))
        expect(set(b.get("features", {})) == BACKEND_FEATURES,
               "%s's features are %s" % (b["name"], sorted(b.get("features", {}))))
    native = listed[names.index("native")]
    expect(native["usable"], "native is not usable here: %s" % native.get("why"))
    expect(all(native["features"].values()), "native lacks a feature: %s" % native["features"])
    res = run_host([e.airlock, "backends"])
    expect_rc(res, 0)
    heads = [l for l in res.text.splitlines() if l and not l.startswith(" ")]
    expect([h.split(":", 1)[0] for h in heads] == names,
           "the text lists %s, --json %s" % (heads, names), res)
    for b, h in zip(listed, heads):
        want = "usable here" if b["usable"] else "not usable here: " + b["why"]
        expect(h == "%s: %s" % (b["name"], want), "line %r" % h, res)
    for label in ("file view", "egress", "processes", "kernel surface", "limits", "exec",
                  "cannot"):
        expect(("\n  %s " % label) in res.text, "no %r row" % label, res)


@case
def backends_bad_arguments(e):
    """`airlock backends` with an unknown argument: 125 with one line naming
    it; --help answers 0 with the usage."""
    refusal(e, [e.airlock, "backends", "--bogus"], 125, '"--bogus"')
    refusal(e, [e.airlock, "backends", "native"], 125, '"native"')
    res = run_host([e.airlock, "backends", "--help"])
    expect_rc(res, 0)
    expect("Usage: airlock backends [--json]" in res.text, "no usage", res)


@case
def backends_doc_matches(e):
    """docs/backends.md's table of layers has a row for every backend
    `airlock backends` lists (and one for every name of the operator
    policy's ranking, whether built here or not), in the ranking's order."""
    ranking = ["process", "native", "wasm", "gvisor", "microvm", "vm"]
    with open(BACKENDS_DOC) as f:
        doc = f.read()
    rows = re.findall(r"^\| \*\*(\w+)\*\* \|", doc, re.M)
    expect(rows == ranking, "docs/backends.md's table rows are %s, expected %s"
           % (rows, ranking))
    for name in (b["name"] for b in backends_json(e)):
        expect(name in rows, "%s is listed by airlock backends but not in docs/backends.md"
               % name)
    expect(" < ".join(ranking) in doc, "docs/backends.md does not give the ranking")


@case
def run_help_lists_exit_statuses(e):
    """`airlock run --help` names every exit status the man page lists."""
    res = run_host([e.airlock, "run", "--help"])
    expect_rc(res, 0)
    text = " ".join(res.text.split())
    for word in ("128+N", "124", "125", "126", "127", "137", "stopped by signal"):
        expect(word in text, "run --help does not mention %s" % word, res)


@case
def bad_flag(e):
    """An unknown flag: 125 naming it."""
    refusal(e, e.argv([PROBE_IN, "id"], ["--frobnicate"]), 125, "frobnicate")


@case
def bad_env_flag(e):
    """--env NAME for a NAME airlock's environment lacks: 125 naming it."""
    refusal(e, e.argv([PROBE_IN, "id"], ["--env", "NOEQUALS"]), 125, "NOEQUALS")


@case
def env_passed_and_from_file(e):
    """--env NAME passes airlock's own value and --env-file FILE sets its
    NAME=VALUE lines (comments and blank lines skipped, the value as it is:
    '=' and quotes kept, a CRLF ending dropped); `check` and `check --json`
    show both hidden, with the length, never the value. A malformed line is
    refused naming FILE:LINE, an unset NAME naming it."""
    secret, fsecret = "tok-" + tag("e2e"), "abc=def"
    with TempDir() as d:
        f = write_file(os.path.join(d, "env"), "# a comment\n\nAPI_KEY=%s\r\nQUOTED=\"x y\"\n"
                       "  # indented\n" % fsecret)
        env = dict(os.environ, E2E_TOKEN=secret)
        opts = ["--env", "E2E_TOKEN", "--env-file", f]
        res = run_host(e.argv(["/bin/sh", "-c", 'echo "$E2E_TOKEN|$API_KEY|$QUOTED"'], opts),
                       env=env)
        expect_rc(res, 0)
        expect(res.text.strip() == '%s|%s|"x y"' % (secret, fsecret), "values inside", res)
        for extra in ([], ["--json"]):
            res = run_host([e.airlock, "check"] + opts + extra, env=env)
            expect_rc(res, 0)
            expect(secret not in res.text and fsecret not in res.text,
                   "check shows a hidden value", res)
            expect("E2E_TOKEN=<hidden: %d bytes>" % len(secret) in res.text
                   and "API_KEY=<hidden: 7 bytes>" in res.text, "check's hidden entries", res)
        bad = write_file(os.path.join(d, "bad"), "# c\n\nOK=1\nNOT A LINE\n")
        refusal(e, [e.airlock, "check", "--env-file", bad], 125, bad + ":4", "NAME=VALUE")
        fifo = os.path.join(d, "fifo")
        os.mkfifo(fifo)
        refusal(e, [e.airlock, "check", "--env-file", fifo], 125, "not a regular file")


@case
def result_dir_missing(e):
    """--result in a directory that does not exist: refused before anything
    starts (125, naming the path), rather than the run going ahead and
    its record being lost at the end."""
    refusal(e, e.argv([PROBE_IN, "id"], ["--result", "/nonexistent-e2e-dir/r.json"]), 125,
            "/nonexistent-e2e-dir")


@case
def result_target_must_be_regular(e):
    """--result's last component must be a regular file or absent: a
    symbolic link (like /dev/stdout), a device, a directory or a FIFO is
    refused (125, naming what it is) and left as it was; a regular file is
    replaced by the record."""
    with TempDir() as d:
        target = write_file(os.path.join(d, "target"), "keep\n")
        link = os.path.join(d, "link.json")
        os.symlink(target, link)
        fifo = os.path.join(d, "fifo")
        os.mkfifo(fifo)
        os.mkdir(os.path.join(d, "dir.json"))
        for path, kind in ((link, "symbolic link"), ("/dev/null", "character device"),
                           (os.path.join(d, "dir.json"), "directory"), (fifo, "FIFO")):
            refusal(e, e.argv([PROBE_IN, "id"], ["--result", path]), 125, path, kind,
                    "--result-fd")
        expect(os.path.islink(link) and open(target).read() == "keep\n",
               "the link or its target changed")
        res = run_host(e.argv([PROBE_IN, "id"], ["--result", target]))
        expect_rc(res, 0)
        expect(json.load(open(target)).get("reason") == "exited", "regular file not replaced")


@case
def result_and_audit_to_descriptors(e):
    """--result-fd N and --audit-fd N write to descriptors the caller
    passes (here two pipes), --result - to stdout after the output; the
    record names the run (the audit's run id) and its start (RFC 3339).
    A descriptor that is not open, or open only for reading, and two
    places for one record are refused (125)."""
    rr, rw = os.pipe()
    ar, aw = os.pipe()
    try:
        res = run_host(e.argv([PROBE_IN, "id"], ["--result-fd", str(rw), "--audit-fd", str(aw)]),
                       pass_fds=(rw, aw))
        os.close(rw)
        os.close(aw)
        rw = aw = -1
        expect_rc(res, 0)
        with os.fdopen(rr, "rb") as f:
            rr = -1
            rec = json.loads(f.read())
        with os.fdopen(ar, "rb") as f:
            ar = -1
            events = [json.loads(l) for l in f.read().splitlines()]
        expect([ev["event"] for ev in events] == ["run.start", "run.end"],
               "audit events %s" % [ev["event"] for ev in events], res)
        expect(rec.get("run") == events[0]["run"], "record and audit name other runs", res)
        expect(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", rec.get("started", "")),
               "started %r is not RFC 3339" % rec.get("started"), res)
    finally:
        for fd in (rr, rw, ar, aw):
            if fd >= 0:
                os.close(fd)
    res = run_host(e.argv([PROBE_IN, "hostname"], ["--result", "-"]))
    expect_rc(res, 0)
    head, _, tail = res.text.partition("\n")
    expect(head == "airlock" and json.loads(tail).get("reason") == "exited",
           "--result - did not put the record after the output", res)
    refusal(e, e.argv([PROBE_IN, "id"], ["--result-fd", "97"]), 125, "--result-fd 97",
            "no such open descriptor")
    with open("/etc/hostname", "rb") as f:
        refusal_fd = f.fileno()
        res = run_host(e.argv([PROBE_IN, "id"], ["--audit-fd", str(refusal_fd)]),
                       pass_fds=(refusal_fd,))
        expect_one_error_line(res, 125, "not open for writing")
    refusal(e, e.argv([PROBE_IN, "id"], ["--result", "-", "--result-fd", "1"]), 125,
            "one place")
    for opts, words in ((["--result-fd", "0"], ["stdin"]), (["--audit-fd", "2"], ["stderr"]),
                        (["--audit", "-"], ["does not share stdout"]),
                        (["--audit-fd", "1"], ["does not share stdout"])):
        refusal(e, e.argv([PROBE_IN, "id"], opts), 125, *words)


@case
def audit_reader_stall_does_not_stop_the_run(e):
    """An --audit-fd pipe nobody reads (filled before the run) does not
    stall the supervisor: after a second it drops audit lines and says so,
    and the timeout still ends the run (124) at its time."""
    r, w = os.pipe()
    try:
        fl = fcntl.fcntl(w, fcntl.F_GETFL)
        fcntl.fcntl(w, fcntl.F_SETFL, fl | os.O_NONBLOCK)
        try:
            while True:
                os.write(w, b"x" * 4096)
        except BlockingIOError:
            pass
        fcntl.fcntl(w, fcntl.F_SETFL, fl)
        res = run_host(e.argv(["/bin/sleep", "30"], ["--timeout", "2", "--audit-fd", str(w)]),
                       pass_fds=(w,), timeout=20)
    finally:
        os.close(r)
        os.close(w)
    expect_rc(res, 124)
    expect(res.elapsed < 20, "the run took %.1f s (its sleep, 30 s)" % res.elapsed, res)
    expect("dropping audit lines" in res.errtext and "could not be written" in res.errtext,
           "no word of the dropped audit lines", res)


@case
def messages_say_what_to_do(e):
    """Common mistakes get a message that says what to give instead (125,
    one line): a URL as an allow rule, a port in a host map (flag and
    policy file), the version as a string, a docker-style :ro suffix on
    --ro; and durations take combined units (--timeout 1m30s is 90 s)."""
    with TempDir() as d:
        cases = [
            (["--allow", "http://api.example.test/v1"], ["not a URL", "api.example.com:443"]),
            (["--allow", "api.example.test", "--map-host", "api.example.test=127.0.0.1:8080"],
             ["without a port"]),
            (["--ro", "/etc/hostname:/x:ro"], ["no mode suffix", "--ro or --rw"]),
            (["--policy", write_file(os.path.join(d, "v.json"), json.dumps({"version": "1"}))],
             ["version is an integer", "not a string"]),
            (["--policy", write_file(os.path.join(d, "h.json"), json.dumps(
                {"version": 1, "network": {"allow": ["api.example.test"],
                                           "hosts": {"api.example.test": "127.0.0.1:80"}}}))],
             ["network.hosts", "without a port"]),
        ]
        for opts, words in cases:
            refusal(e, [e.airlock, "check"] + opts, 125, *words)
    res = run_host([e.airlock, "check", "--timeout", "1m30s"])
    expect_rc(res, 0)
    expect("timeout 90000 ms" in res.text, "--timeout 1m30s is not 90 s", res)


@case
def no_command(e):
    """airlock run with no command and no policy: 125."""
    refusal(e, e.argv(None, []), 125)


# ---- policy files ------------------------------------------------------------

def good_policy(d, command):
    data = write_file(os.path.join(d, "data.csv"), "a,b\n1,2\n")
    return {"version": 1, "command": command, "hostname": "polhost",
            "filesystem": {"mounts": [{"host": data, "path": "/input/data.csv", "mode": "ro",
                                       "exec": False}],
                           "workdir": "/work", "scratch_exec": True, "landlock": "required"},
            "env": {"A": "b"}, "limits": {"timeout": 30, "scratch": "64M"},
            "network": {"mode": "none"}, "backend": {"name": "native"}}


@case
def policy_file_run(e):
    """A policy file's command, env, hostname and mounts are applied."""
    with TempDir() as d:
        pol = good_policy(d, ["/bin/sh", "-c", "hostname; echo $A; cat /input/data.csv"])
        p = write_file(os.path.join(d, "good.json"), json.dumps(pol))
        res = e.run(None, ["--policy", p])
        expect_out(res, "polhost\nb\na,b\n1,2\n")


@case
def check_prints_plan(e):
    """`airlock check --policy good.json` exits 0 and prints the plan naming
    the input; --json is JSON with command, filesystem, landlock, seccomp."""
    with TempDir() as d:
        p = write_file(os.path.join(d, "good.json"),
                       json.dumps(good_policy(d, ["python3", "x.py"])))
        res = run_host([e.airlock, "check", "--policy", p])
        expect_rc(res, 0)
        expect("/input/data.csv" in res.text, "the plan does not show the input", res)
        res = run_host([e.airlock, "check", "--policy", p, "--json"])
        expect_rc(res, 0)
        try:
            plan = json.loads(res.text)
        except ValueError as err:
            raise AssertionError("check --json is not JSON: %s\n%s" % (err, res.describe()))
        missing = [k for k in ("command", "filesystem", "landlock", "seccomp") if k not in plan]
        expect(not missing, "check --json lacks keys %s" % missing, res)


@case
def no_landlock_refuses(e):
    """On a kernel without landlock (the probe's no-landlock mode answers
    the landlock calls ENOSYS, then execs airlock): `airlock run` and
    `airlock check` refuse with exit 125 and one line naming best-effort,
    before anything is written (no result record, no audit stream); with
    "landlock": "best-effort" the run goes ahead and exits 0."""
    with TempDir() as d:
        rec, aud = os.path.join(d, "r.json"), os.path.join(d, "a.jsonl")
        nl = [e.probe, "no-landlock"]
        refusal(e, nl + [e.airlock, "run", "--result", rec, "--audit", aud, "--", "/bin/true"],
                125, "landlock is not available", "best-effort")
        expect(not os.path.exists(rec) and not os.path.exists(aud),
               "a refused run wrote %s" % os.listdir(d))
        refusal(e, nl + [e.airlock, "check"], 125, "landlock is not available")
        be = write_file(os.path.join(d, "be.json"), json.dumps(
            {"version": 1, "filesystem": {"landlock": "best-effort"}}))
        res = run_host(nl + [e.airlock, "run", "--policy", be, "--result", rec, "--",
                             "/bin/echo", "ran"])
        expect_rc(res, 0)
        expect(res.text.strip() == "ran", "the best-effort run's output", res)
        expect(json.load(open(rec)).get("reason") == "exited", "best-effort record", res)


@case
def check_refuses_bad_policy(e):
    """`airlock check` on a bad policy exits 125 with one line naming the file."""
    with TempDir() as d:
        p = write_file(os.path.join(d, "bad.json"), json.dumps({"version": 1, "oops": True}))
        refusal(e, [e.airlock, "check", "--policy", p], 125, "bad.json", "oops")


def expect_error_lines(res, rc, wanted):
    """A refusal that names several errors: exit rc, nothing on stdout, and
    exactly one stderr line per entry of wanted (a list of word lists), in
    that order, each starting "airlock: " and holding its words."""
    expect_rc(res, rc)
    expect(res.text == "", "stdout is not empty: %r" % res.text, res)
    lines = res.errtext.splitlines()
    expect(len(lines) == len(wanted), "expected %d stderr lines, got %d"
           % (len(wanted), len(lines)), res)
    for line, words in zip(lines, wanted):
        expect(line.startswith("airlock: "), "stderr line without 'airlock: ': %r" % line, res)
        for w in words:
            expect(w in line, "stderr line %r does not mention %r" % (line, w), res)


@case
def check_reports_every_error(e):
    """`airlock check` reports every error of the policy file and the flags,
    not only the first: a file with three schema errors and a bad flag give
    four lines (125), each naming the file and the JSON path or the flag;
    with --json stdout is {"ok": false, "errors": [...]} with where, path
    and message for each and nothing on stderr; `airlock run` refuses with
    the same lines and starts nothing; plan errors (after a good parse)
    come out the same way; 150 errors show 100 and "and 50 more"; a valid
    policy's --json starts with "ok": true."""
    with TempDir() as d:
        bad = write_file(os.path.join(d, "three.json"), json.dumps({
            "version": 1,
            "filesystem": {"mounts": [{"host": "/srv", "path": "/input"},
                                      {"host": "/srv", "path": "/input/b", "mode": "rx"},
                                      {"host": "data.csv", "path": "/input/c"}]},
            "limits": {"memory": "lots"}}))
        wanted = [
            (bad, "filesystem.mounts[1].mode", 'expected "ro" or "rw", got "rx"'),
            (bad, "filesystem.mounts[2].host", "expected a clean absolute path"),
            (bad, "limits.memory", 'bad size "lots"'),
        ]
        res = run_host([e.airlock, "check", "--policy", bad])
        expect_error_lines(res, 125, [["%s: %s: %s" % w] for w in wanted])

        res = run_host([e.airlock, "check", "--timeout", "soon", "--policy", bad, "--json"])
        expect_rc(res, 125)
        expect(res.errtext == "", "check --json wrote to stderr: %r" % res.errtext, res)
        try:
            doc = json.loads(res.text)
        except ValueError as err:
            raise AssertionError("check --json is not JSON: %s\n%s" % (err, res.describe()))
        expect(doc.get("ok") is False and doc.get("omitted") == 0,
               "ok/omitted: %r" % {k: doc.get(k) for k in ("ok", "omitted")}, res)
        errors = doc.get("errors") or []
        expect(len(errors) == 4, "expected 4 errors, got %d" % len(errors), res)
        flag = errors[0] if errors else {}
        expect(flag.get("where") == "--timeout soon" and flag.get("path") is None
               and flag.get("message", "").startswith("expected seconds"),
               "the flag's error: %r" % flag, res)
        for got, (where, path, message) in zip(errors[1:], wanted):
            expect(got.get("where") == where and got.get("path") == path
                   and message in got.get("message", "")
                   and got.get("text") == "%s: %s: %s" % (where, path, got.get("message")),
                   "error %r, expected %r" % (got, (where, path, message)), res)

        res = run_host([e.airlock, "run", "--policy", bad, "--", "/bin/true"])
        expect_error_lines(res, 125, [["%s: %s: %s" % w] for w in wanted])

        # A file that parses, with plan errors: no file, a reserved path,
        # a limit below its minimum (and a syntax error stops at itself).
        plan = write_file(os.path.join(d, "plan.json"), json.dumps({
            "version": 1, "limits": {"memory": 1048576},
            "filesystem": {"mounts": [{"host": "/nonexistent-airlock-e2e", "path": "/input/x"},
                                      {"host": "/srv", "path": "/etc/x"}]}}))
        res = run_host([e.airlock, "check", "--policy", plan])
        expect_error_lines(res, 125, [["below the 4M minimum"],
                                      ["filesystem.mounts[1]", "/etc/x would cover"],
                                      ["/nonexistent-airlock-e2e", "No such file"]])
        res = run_host([e.airlock, "check", "--policy", plan, "--json"])
        expect_rc(res, 125)
        errors = json.loads(res.text)["errors"]
        expect(len(errors) == 3 and all(x["where"] is None and x["message"] == x["text"]
                                        for x in errors), "plan errors as JSON: %r" % errors, res)
        syntax = write_file(os.path.join(d, "syntax.json"), '{"version": 1,\n "limits": {,}}')
        res = run_host([e.airlock, "check", "--policy", syntax, "--json"])
        errors = json.loads(res.text)["errors"]
        expect(len(errors) == 1 and errors[0]["line"] == 2 and errors[0]["where"] == syntax
               and errors[0]["text"].startswith(syntax + ":2:"), "syntax error: %r" % errors, res)

        many = write_file(os.path.join(d, "many.json"), json.dumps(
            {"version": 1, "env": {"%d-BAD" % i: "x" for i in range(150)}}))
        res = run_host([e.airlock, "check", "--policy", many])
        expect_rc(res, 125)
        lines = res.errtext.splitlines()
        expect(len(lines) == 101 and all("not a valid variable name" in l for l in lines[:100])
               and lines[100] == "airlock: and 50 more errors (only the first 100 are shown)",
               "150 errors: %d lines, last %r" % (len(lines), lines[-1:]), res)
        res = run_host([e.airlock, "check", "--policy", many, "--json"])
        doc = json.loads(res.text)
        expect(len(doc["errors"]) == 100 and doc["omitted"] == 50, "150 errors as JSON", res)

        res = run_host([e.airlock, "check", "--json"])
        expect_rc(res, 0)
        expect(res.text.startswith('{\n  "ok": true,'), "a valid plan's JSON: %r"
               % res.text[:40], res)


# ---- rootless ----------------------------------------------------------------

@case
def rootless_run(e):
    """Run by an ordinary user, airlock works rootless: uid 1000 inside is the
    caller's uid on the host, scratch is writable, and a --rw dir's file is
    owned by the caller."""
    if not IS_ROOT:
        # We are the ordinary user already: the other cases are rootless runs.
        res = e.probe_run("id")
        expect_rc(res, 0)
        expect(kv(res.text).get("uid") == "1000", "uid inside", res)
        return
    if not shutil.which("useradd") or not shutil.which("runuser"):
        raise Skip("useradd/runuser not available")
    user = "airlock-e2e-%s" % tag("")[:6]
    created = False
    tmp = tempfile.mkdtemp(prefix="airlock-e2e-rootless-")
    try:
        r = subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", user],
                           capture_output=True)
        if r.returncode != 0:
            raise Skip("useradd failed: %s" % r.stderr.decode().strip())
        created = True
        uid = pwd.getpwnam(user).pw_uid
        r = subprocess.run(["runuser", "-u", user, "--", "unshare", "-U", "true"],
                           capture_output=True)
        if r.returncode != 0:
            raise Skip("unprivileged user namespaces are not allowed here: %s"
                       % r.stderr.decode().strip())
        os.chmod(tmp, 0o755)
        airlock = shutil.copy(e.airlock, os.path.join(tmp, "airlock"))
        probe = shutil.copy(e.probe, os.path.join(tmp, "probe"))
        os.chmod(airlock, 0o755)
        os.chmod(probe, 0o755)
        out = os.path.join(tmp, "out")
        os.mkdir(out)
        os.chown(out, uid, -1)
        os.chmod(out, 0o700)

        def run_as(cmd, opts=()):
            return e.run(cmd, opts, user=user, cwd=tmp, airlock=airlock, probe=probe,
                         env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})

        res = run_as([PROBE_IN, "id"])
        expect_rc(res, 0)
        expect(kv(res.text).get("uid") == "1000", "uid inside is not 1000", res)
        res = run_as(["/bin/sh", "-c", "%s write /tmp/x 'rootless\n' && %s read /tmp/x"
                      % (PROBE_IN, PROBE_IN)])
        expect_out(res, "ok\nok\nrootless\n")
        res = run_as([PROBE_IN, "write", "/output/r.txt", "r\n"], ["--rw", "%s:/output" % out])
        expect_ok(res)
        st = os.stat(os.path.join(out, "r.txt"))
        expect(st.st_uid == uid, "rootless --rw file owned by %d, expected %d"
               % (st.st_uid, uid), res)
        # Its own private input, copies in and out.
        priv = os.path.join(out, "priv")
        os.mkdir(priv, 0o700)
        write_file(os.path.join(priv, "x.txt"), "mine\n", mode=0o600)
        for path in (priv, os.path.join(priv, "x.txt")):
            os.chown(path, uid, -1)
        res = run_as(["/bin/sh", "-c", "cat /input/x.txt /work/c.txt; echo o > /work/o.txt"],
                     ["--ro", "%s/x.txt:/input/x.txt" % priv, "--copy-in",
                      "%s/x.txt:/work/c.txt" % priv, "--copy-out", "/work:%s/co" % out])
        expect_out(res, "mine\nmine\n")
        st = os.stat(os.path.join(out, "co", "o.txt"))
        expect(st.st_uid == uid, "rootless copy-out owned by %d" % st.st_uid, res)
        res = run_as([PROBE_IN, "caps"])
        expect_rc(res, 0)
        expect("CapEff:\t0000000000000000" in res.text, "capabilities left rootless", res)
        t = tag("rootless-")
        argv = e.wrap_user(e.argv([PROBE_IN, "sleep", "3", t], airlock=airlock, probe=probe), user)
        p = subprocess.Popen(argv, cwd=tmp, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            pids = wait_for(lambda: procs_matching(t), 10)
            expect(pids, "rootless sandbox process not found on the host")
            uids, _ = status_ids(pids[0])
            expect(uids == [uid] * 4, "rootless probe runs as host uids %s, expected %d"
                   % (uids, uid))
            expect(p.wait(timeout=15) == 0, "rootless sleep run failed")
        finally:
            if p.poll() is None:
                kill_pid(p.pid)
                p.wait()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if created:
            subprocess.run(["userdel", "-r", user], capture_output=True)
            subprocess.run(["userdel", user], capture_output=True)


if __name__ == "__main__":
    main(suite)
