#!/usr/bin/python3
"""End-to-end tests of runs as tenants of one host (TAP): one run must not
use up what the kernel counts for another, or for host root.

usage: run_tenants.py AIRLOCK PROBE [CASE-SUBSTRING...]

The kernel keeps some counters per host user (pipe pages beyond
fs.pipe-user-pages-soft, descriptors in flight over unix sockets) and some
per user namespace and per creator of a user namespace, all the way up to
the initial one (inotify instances and watches, namespaces). As root,
every run gets a host id range of its own from a pool (host base
0x70000000 + slot * 65536, slot 0..4093: sandbox 0 -> base, 1000 -> base +
1000), its user namespace is owned by its base, not by root, and the
per-namespace limits inside are set low (/proc/sys/user: inotify 64
instances and 16384 watches, no namespaces, no fanotify). A lock file per
live run's slot is /run/airlock/ids/SLOT; the result record says
"identity": {"host_uid", "host_gid", "slot"}.

Each attack case starts an attacker run that takes one counter until the
kernel refuses (tenant_tool.py inside, every loop bounded, and it lets go
by itself after 10 s), checks that it really got there (else the case
proves nothing), and while it holds, a victim run (and for inotify
instances, this script as host root) asks for one of the same: it must get
it. The identity cases judge from the host: /proc/PID/status, uid_map and
gid_map, the owner of the run's user namespace (NS_GET_OWNER_UID), the
files in /run/airlock/ids. Every sandbox has a --timeout; signals go only
to processes this script started, by pid. No network is used.
"""

import ctypes
import fcntl
import json
import os
import pwd
import shutil
import signal
import struct
import subprocess
import time

from harness import (IS_ROOT, PROBE_IN, SANDBOX_UID, SPAWNED, STARTED, MarkedSuite, Skip, TempDir,
                     ThrowawayUser, expect, expect_rc, finish, kill_pid, main, pid_starttime,
                     proc_read, procs_matching, procs_with_marker, read_line_with_timeout, start,
                     status_ids, tag, wait_for, write_file)
from harness import new_marker as new_marker_with

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "tenant_tool.py")
TOOL_IN = "/opt/t/tool.py"
PY = "/usr/bin/python3"

# The pool of per-run host id ranges (as root).
POOL_BASE = 0x70000000
SLOT_SIZE = 65536
POOL_SLOTS = 4094
POOL_END = POOL_BASE + POOL_SLOTS * SLOT_SIZE
IDS_DIR = "/run/airlock/ids"

RUN_TIMEOUT = "20"  # every sandbox's --timeout (seconds)
NS_GET_OWNER_UID = 0xb704  # _IO(0xb7, 0x4)
MiB = 1 << 20

# /proc/sys/user inside every sandbox, by default.
LIMITS_INSIDE = {
    "max_inotify_instances": 64,
    "max_inotify_watches": 16384,
    "max_user_namespaces": 0,
    "max_fanotify_groups": 0,
}


def new_marker():
    return new_marker_with("ten-")


suite = MarkedSuite()
case = suite.case

libc = ctypes.CDLL("libc.so.6", use_errno=True)


def need_root():
    if not IS_ROOT:
        raise Skip("not root: rootless, every run is the caller; the id pool is root's")


def read_int(path):
    with open(path) as f:
        return int(f.read())


# ---- host ids ----------------------------------------------------------------

def in_pool(uid):
    return POOL_BASE <= uid < POOL_END


def slot_of(uid):
    return (uid - POOL_BASE) // SLOT_SIZE if in_pool(uid) else None


def slot_files():
    """Slots with a lock file in /run/airlock/ids (decimal names only: a
    name starting with '.' may be a temporary file)."""
    try:
        names = os.listdir(IDS_DIR)
    except FileNotFoundError:
        return set()
    return {int(n) for n in names if n.isdigit()}


def live_slots():
    """Slots some live host process's uid lies in (any airlock's runs):
    the owner of /proc/PID is the euid, or, for a non-dumpable process in
    a user namespace, that namespace's root, the slot's base."""
    slots = set()
    for n in os.listdir("/proc"):
        if n.isdigit():
            try:
                s = slot_of(os.stat("/proc/" + n).st_uid)
            except OSError:
                continue
            if s is not None and alive(n):
                slots.add(s)
    return slots


def locked_files():
    """(major, minor, inode) of every file with a lock in /proc/locks."""
    held = set()
    with open("/proc/locks") as f:
        for line in f:
            for word in line.split():
                parts = word.split(":")
                if len(parts) == 3:
                    try:
                        held.add((int(parts[0], 16), int(parts[1], 16), int(parts[2])))
                    except ValueError:
                        pass
    return held


def slot_owner(slot):
    """(pid, starttime) of the airlock that wrote IDS_DIR/SLOT, or None."""
    try:
        with open("%s/%d" % (IDS_DIR, slot)) as f:
            pid, start = f.read().split()[:2]
        return int(pid), int(start)
    except (OSError, ValueError):
        return None


def stale_slot_files():
    """Slots whose lock file was written by an airlock this script started
    (another suite's killed run on this host rightly leaves its file for
    gc: not ours to judge), nobody holds (no lock on it in /proc/locks),
    and whose range no live process is in: what no live run owns."""
    held, stale = locked_files(), set()
    for slot in slot_files():
        try:
            st = os.stat("%s/%d" % (IDS_DIR, slot))
        except FileNotFoundError:
            continue
        if slot_owner(slot) not in SPAWNED:
            continue
        if (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino) not in held:
            stale.add(slot)
    return stale - live_slots() if stale else stale


def lingering(slots, timeout=3):
    """Those of slots whose lock file is still there, stale, after timeout
    seconds (other airlocks on this host may hold a slot of ours again by
    then: their lock, or their processes, say so)."""
    slots = set(slots)
    wait_for(lambda: not (slots & stale_slot_files()), timeout)
    return sorted(slots & stale_slot_files())


def id_map(pid, name):
    """/proc/PID/uid_map or gid_map as a list of (inside, host, count)."""
    text = (proc_read(pid, name) or b"").decode()
    return [tuple(int(x) for x in line.split()) for line in text.splitlines() if line.strip()]


def ns_owner_uid(pid):
    """The host uid that owns PID's user namespace (NS_GET_OWNER_UID), or
    what failed, as a string."""
    try:
        fd = os.open("/proc/%d/ns/user" % pid, os.O_RDONLY)
    except OSError as err:
        return "open: %s" % err.strerror
    try:
        return struct.unpack("I", fcntl.ioctl(fd, NS_GET_OWNER_UID, b"\0" * 4))[0]
    except OSError as err:
        return "ioctl: %s" % err.strerror
    finally:
        os.close(fd)


def identity(record):
    """The record's identity as (host_uid, host_gid, slot), None if absent."""
    ident = (record or {}).get("identity")
    if not isinstance(ident, dict):
        return None
    return tuple(ident.get(k, "missing") for k in ("host_uid", "host_gid", "slot"))


def wait_procs(t, p, timeout=10):
    """Host pids of the probe tagged t, waiting until they appear or our
    airlock p has exited."""
    wait_for(lambda: procs_matching(t) or p.poll() is not None, timeout)
    return procs_matching(t)


def alive(pid):
    """Exists and is not a zombie."""
    stat = proc_read(pid, "stat")
    return bool(stat) and stat.rsplit(b")", 1)[-1].split()[:1] != [b"Z"]


# ---- attacker and victim runs ------------------------------------------------

def tool_opts(m, extra=(), tool=TOOL):
    return ["--env", "AIRLOCK_MARK=" + m, "--timeout", RUN_TIMEOUT,
            "--ro", "%s:%s" % (tool, TOOL_IN)] + list(extra)


class Attack:
    """An attack run of tenant_tool.py in the background (a with block):
    airlock in its own session with stdin a pipe, so that release() (which
    closes it) ends the hold. report() is the attack's first line."""

    def __init__(self, e, op, cap, opts=()):
        self.m = new_marker()
        self.argv = e.argv([PY, TOOL_IN, op, str(cap)], tool_opts(self.m, opts))
        self.p = None

    def __enter__(self):
        self.t0 = time.monotonic()
        self.p = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, start_new_session=True)
        STARTED.add((self.p.pid, pid_starttime(self.p.pid)))
        return self

    def report(self, timeout=30):
        line = read_line_with_timeout(self.p.stdout, timeout)
        if line is None:
            res = self.release()
            raise AssertionError("the attack printed no report\n%s" % res.describe())
        return json.loads(line)

    def release(self):
        """End the hold (communicate closes stdin) and wait: the Result."""
        return finish(self.p, self.argv, self.t0, 20)

    def __exit__(self, *exc):
        if self.p.poll() is None:
            kill_pid(self.p.pid)
            self.p.wait()
        for f in (self.p.stdin, self.p.stdout, self.p.stderr):
            try:
                f.close()
            except (OSError, ValueError):
                pass
        # What carries our marker is this run's: its airlock and the sandbox's init.
        for pid in procs_with_marker(self.m):
            kill_pid(pid)


def victim(e, op, n, opts=()):
    """One victim run of tenant_tool.py: (its report, the Result)."""
    m = new_marker()
    argv = e.argv([PY, TOOL_IN, op, str(n)], tool_opts(m, opts))
    res = finish(start(argv), argv, time.monotonic(), 40)
    expect(res.rc == 0, "the victim run failed (exit %s) while another run held its maximum"
           % res.rc, res)
    lines = res.text.splitlines()
    expect(lines, "the victim printed nothing", res)
    return json.loads(lines[0]), res


def expect_held(res):
    """The attack exited 0 and held what it got until we released it (its
    last line; report() has read the first), so the victim ran while it
    held."""
    expect_rc(res, 0)
    lines = res.text.splitlines()
    last = json.loads(lines[-1]) if lines else {}
    expect(last.get("released") is True,
           "the attack let go by itself (after %ss) before the test released it: the victim "
           "may have run after that" % last.get("held"), res)


def expect_victim_ok(vic, vres, what):
    expect(vic["ok"] == vic["tries"], "the victim's %s failed %d of %d times (%s) while another "
           "run held its maximum" % (what, vic["tries"] - vic["ok"], vic["tries"],
                                     ", ".join(vic["errs"])), vres)


def root_inotify_init():
    """inotify_init1 as this process (host root): "ok" or the errno name."""
    fd = libc.inotify_init1(os.O_CLOEXEC)
    if fd < 0:
        import errno
        return errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
    os.close(fd)
    return "ok"


# ---- identity ----------------------------------------------------------------

@case
def two_runs_have_different_host_uids(e):
    """As root, two sandboxes running at once (`probe sleep 3`, found on the
    host by a unique argv tag) run their commands as different host uids,
    neither 0: each is base + 1000 of a slot in the pool [0x70000000,
    0x70000000 + 4094 * 65536), with gid equal to uid; each process's
    uid_map and gid_map are exactly "0 base 1" and "1000 base+1000 1"; its
    user namespace is owned by base (not root); the record's identity is
    {host_uid: base + 1000, host_gid: base + 1000, slot}; while they run,
    /run/airlock/ids holds a file named after each slot, and afterwards
    neither."""
    need_root()
    runs = []
    with TempDir() as d:
        try:
            for i in range(2):
                t, m = tag("tenant-"), new_marker()
                rp = os.path.join(d, "r%d.json" % i)
                argv = e.argv([PROBE_IN, "sleep", "3", t],
                              ["--env", "AIRLOCK_MARK=" + m, "--timeout", RUN_TIMEOUT,
                               "--result", rp])
                runs.append({"tag": t, "rp": rp, "argv": argv, "t0": time.monotonic(),
                             "p": start(argv)})
            for r in runs:
                pids = wait_procs(r["tag"], r["p"])
                expect(pids, "no host process with argv containing %s appeared" % r["tag"])
                pid = r["pid"] = pids[0]
                r["uids"], r["gids"] = status_ids(pid)
                r["uid_map"], r["gid_map"] = id_map(pid, "uid_map"), id_map(pid, "gid_map")
                r["owner"] = ns_owner_uid(pid)
            during = slot_files()
            for r in runs:
                r["res"] = finish(r["p"], r["argv"], r["t0"], 20)
        finally:
            for r in runs:
                if r["p"].poll() is None:
                    kill_pid(r["p"].pid)
                    r["p"].wait()
        for r in runs:
            expect_rc(r["res"], 0)
            with open(r["rp"]) as f:
                r["record"] = json.load(f)
    a, b = runs
    for r in runs:
        expect(r["uids"] and len(set(r["uids"])) == 1 and len(set(r["gids"])) == 1,
               "a probe's real/effective/saved/fs ids differ: uids %s gids %s"
               % (r["uids"], r["gids"]))
        r["uid"], r["gid"] = r["uids"][0], r["gids"][0]
    print("# host uid/gid of the two commands: %d/%d and %d/%d"
          % (a["uid"], a["gid"], b["uid"], b["gid"]), flush=True)
    expect(a["uid"] != b["uid"], "both runs' commands are host uid %d: what the kernel counts "
           "per host user, one run can take from the other" % a["uid"])
    expect(a["gid"] != b["gid"], "both runs' commands are host gid %d" % a["gid"])
    for r in runs:
        uid, gid = r["uid"], r["gid"]
        expect(uid != 0 and gid != 0, "a command runs as host uid %d gid %d" % (uid, gid))
        expect(in_pool(uid) and (uid - POOL_BASE) % SLOT_SIZE == SANDBOX_UID,
               "host uid %d (0x%x) is not base + 1000 of a slot in the pool [0x%x, 0x%x)"
               % (uid, uid, POOL_BASE, POOL_END))
        expect(gid == uid, "host gid %d differs from host uid %d" % (gid, uid))
        base, slot = uid - SANDBOX_UID, slot_of(uid)
        want = [(0, base, 1), (SANDBOX_UID, uid, 1)]
        expect(r["uid_map"] == want, "uid_map of %d is %s, expected %s"
               % (r["pid"], r["uid_map"], want))
        expect(r["gid_map"] == want, "gid_map of %d is %s, expected %s"
               % (r["pid"], r["gid_map"], want))
        expect(r["owner"] == base, "the run's user namespace is owned by host uid %s, expected "
               "its base %d: what the kernel charges to its creator lands on that owner"
               % (r["owner"], base))
        got = identity(r["record"])
        expect(got == (uid, gid, slot), "the record's identity is %s, expected host_uid %d "
               "host_gid %d slot %d" % (r["record"].get("identity"), uid, gid, slot))
        expect(slot in during, "no %s/%d while the run with slot %d ran (there: %s)"
               % (IDS_DIR, slot, slot, sorted(during)))
    left = lingering([slot_of(a["uid"]), slot_of(b["uid"])])
    expect(not left, "stale slot files left after both runs ended: %s"
           % ["%s/%d" % (IDS_DIR, s) for s in left])


@case
def pinned_host_ids_from_policy(e):
    """As root, a task policy with {"identity": {"host_ids": B}} (B =
    0x60000000, outside the pool) pins the run's range: the command is host
    uid and gid B + 1000, its uid_map and gid_map are "0 B 1" and "1000
    B+1000 1", its user namespace is owned by B, and the record's identity
    is {host_uid: B + 1000, host_gid: B + 1000, slot: null}."""
    need_root()
    pinned = 0x60000000
    t, m = tag("pinned-"), new_marker()
    with TempDir() as d:
        pol = write_file(os.path.join(d, "policy.json"),
                         json.dumps({"version": 1, "identity": {"host_ids": pinned}}))
        rp = os.path.join(d, "r.json")
        argv = e.argv([PROBE_IN, "sleep", "2", t],
                      ["--policy", pol, "--env", "AIRLOCK_MARK=" + m, "--timeout", RUN_TIMEOUT,
                       "--result", rp])
        t0 = time.monotonic()
        p = start(argv)
        try:
            pids = wait_procs(t, p)
            if pids:
                pid = pids[0]
                uids, gids = status_ids(pid)
                maps = id_map(pid, "uid_map"), id_map(pid, "gid_map")
                owner = ns_owner_uid(pid)
        finally:
            res = finish(p, argv, t0, 20)
        expect(pids, "the pinned run's probe never appeared on the host", res)
        expect_rc(res, 0)
        with open(rp) as f:
            record = json.load(f)
    uid = pinned + SANDBOX_UID
    expect(uids == [uid] * 4 and gids == [uid] * 4, "the pinned run's command has host uids %s "
           "gids %s, expected %d" % (uids, gids, uid))
    want = [(0, pinned, 1), (SANDBOX_UID, uid, 1)]
    expect(maps == (want, want), "uid_map/gid_map %s, expected %s twice" % (maps, want))
    expect(owner == pinned, "the user namespace is owned by %s, expected %d" % (owner, pinned))
    expect(identity(record) == (uid, uid, None), "the record's identity is %s, expected "
           "host_uid = host_gid = %d, slot null" % (record.get("identity"), uid))


@case
def slot_of_killed_run_reclaimed_by_gc(e):
    """As root, SIGKILL of airlock mid-run (`probe sleep 30`, whose host uid
    names its slot, and whose slot file exists while it runs): the sandbox
    is gone within 3 s, and once its processes are reaped (the orphaned
    init by host pid 1), `airlock gc` leaves no stale file for that slot
    in /run/airlock/ids."""
    need_root()
    t, m = tag("killed-"), new_marker()
    argv = e.argv([PROBE_IN, "sleep", "30", t],
                  ["--env", "AIRLOCK_MARK=" + m, "--timeout", "40"])
    p = start(argv)
    members, gc_done = [], False
    try:
        pids = wait_procs(t, p)
        expect(pids, "the probe never appeared on the host")
        members = pids + procs_with_marker(m, exclude=(p.pid,))
        uid = status_ids(pids[0])[0][0]
        slot = slot_of(uid)
        expect(slot is not None, "the run's command is host uid %d, outside the pool" % uid)
        expect(wait_for(lambda: slot in slot_files(), 2), "no %s/%d while the run ran"
               % (IDS_DIR, slot))
        os.kill(p.pid, signal.SIGKILL)
        p.communicate(timeout=10)
        gone = wait_for(lambda: not [q for q in members if alive(q)], 15)
        expect(gone, "sandbox processes still alive 15 s after airlock's SIGKILL: %s"
               % [q for q in members if alive(q)])
        # The sandbox's init, orphaned, stays a zombie (with the slot's ids)
        # until host pid 1 reaps it; gc rightly leaves a slot in use till then.
        reaped = wait_for(lambda: not [q for q in members if proc_read(q, "stat")], 10)
        expect(reaped, "processes of the killed run still exist (zombies?) 10 s after: %s"
               % [(q, proc_read(q, "stat")) for q in members if proc_read(q, "stat")])
        after_kill = slot in slot_files()
        res = finish(start([e.airlock, "gc"]), [e.airlock, "gc"], time.monotonic(), 30)
        gc_done = True
        expect_rc(res, 0)
        left = lingering([slot])
        expect(not left, "airlock gc left %s/%d of the killed run" % (IDS_DIR, slot), res)
        print("# slot %d: its file %s after the SIGKILL, gone after airlock gc"
              % (slot, "left" if after_kill else "already gone"), flush=True)
    finally:
        if p.poll() is None:
            kill_pid(p.pid)
            p.wait()
        for q in members:
            if alive(q):
                kill_pid(q)
        if not gc_done:  # the killed run's cgroup dirs
            subprocess.run([e.airlock, "gc"], capture_output=True, timeout=30)


# ---- one run against another -------------------------------------------------

@case
def pipe_pages_of_one_run_do_not_starve_another(e):
    """As root, an attacker run makes pipes and resizes each to 1 MiB
    (F_SETPIPE_SZ) until the kernel says EPERM (its user is over
    fs.pipe-user-pages-soft; at most 4 times the pipes that takes), and
    holds them; meanwhile a victim run resizes 4 pipes of its own to 1 MiB:
    every resize succeeds."""
    need_root()
    soft = read_int("/proc/sys/fs/pipe-user-pages-soft")
    if not soft:
        raise Skip("fs.pipe-user-pages-soft is 0: no per-user pipe limit to reach")
    pages = MiB // os.sysconf("SC_PAGE_SIZE")
    cap = 4 * (soft // pages + 1)
    if cap + 64 > 65536:
        raise Skip("fs.pipe-user-pages-soft is %d: reaching it takes %d pipes" % (soft, cap // 4))
    opts = ["--open-files", str(cap + 64)] if cap + 64 > 1024 else []
    with Attack(e, "pipes-attack", cap, opts) as a:
        rep = a.report()
        vic, vres = victim(e, "pipes-victim", 4)
        res = a.release()
    print("# attacker: %d pipes of 1 MiB, then %s (fs.pipe-user-pages-soft %d pages); "
          "victim: %d of %d resized, errors %s"
          % (rep["got"], rep["err"], soft, vic["ok"], vic["tries"], vic["errs"]), flush=True)
    expect(rep["err"] == "EPERM", "the attacker did not reach its pipe limit (%d pipes of 1 MiB, "
           "cap %d, stopped by %s): the case proves nothing" % (rep["got"], cap, rep["err"]), res)
    expect_victim_ok(vic, vres, "F_SETPIPE_SZ to 1 MiB")
    expect_held(res)


@case
def inflight_fds_of_one_run_do_not_starve_another(e):
    """As root, an attacker run sends descriptors over a unix socketpair
    (SCM_RIGHTS, 16 a message, never received; at most 5000 sends) until
    sendmsg says ETOOMANYREFS (its user has more in flight than its
    RLIMIT_NOFILE, 1024), and holds them; meanwhile a victim run passes a
    descriptor to itself over a socketpair of its own 5 times: every pass
    succeeds."""
    need_root()
    with Attack(e, "fds-attack", 5000) as a:
        rep = a.report()
        vic, vres = victim(e, "fds-victim", 5)
        res = a.release()
    print("# attacker: %d descriptors in flight in %d sends, then %s (RLIMIT_NOFILE %s); "
          "victim: %d of %d passed, errors %s"
          % (rep["inflight"], rep["sends"], rep["err"], rep["nofile"], vic["ok"], vic["tries"],
             vic["errs"]), flush=True)
    expect(rep["err"] == "ETOOMANYREFS", "the attacker did not reach its in-flight limit (%d in "
           "flight, stopped by %s): the case proves nothing" % (rep["inflight"], rep["err"]), res)
    expect_victim_ok(vic, vres, "SCM_RIGHTS pass")
    expect_held(res)


@case
def inotify_instances_of_one_run_do_not_starve_another_or_root(e):
    """As root, an attacker run creates inotify instances until EMFILE (at
    most 1000, fewer than its RLIMIT_NOFILE, so EMFILE is the instance
    limit) and holds them; meanwhile a victim run creates 4 instances, and
    this script, host root, creates one: all succeed. (Every user namespace
    root creates charges root's fs.inotify.max_user_instances, 128.)"""
    need_root()
    if root_inotify_init() != "ok":
        raise Skip("host root cannot create an inotify instance even before the attack: %s"
                   % root_inotify_init())
    with Attack(e, "inotify-attack", 1000) as a:
        rep = a.report()
        root = root_inotify_init()
        vic, vres = victim(e, "inotify-victim", 4)
        res = a.release()
    print("# attacker: %d instances, then %s (max_inotify_instances inside %s); victim: %d of "
          "%d, errors %s; host root: %s"
          % (rep["got"], rep["err"], rep["max"], vic["ok"], vic["tries"], vic["errs"], root),
          flush=True)
    expect(rep["err"] == "EMFILE" and rep["got"] < rep["cap"], "the attacker did not reach its "
           "instance limit (%d instances, cap %d, stopped by %s): the case proves nothing"
           % (rep["got"], rep["cap"], rep["err"]), res)
    expect(root == "ok", "host root's inotify_init1 failed (%s) while a sandbox held %d "
           "instances: the runs' instances are charged to root" % (root, rep["got"]), res)
    expect_victim_ok(vic, vres, "inotify_init1")
    expect_held(res)


@case
def inotify_watches_of_one_run_do_not_starve_another(e):
    """As root, an attacker run creates files in its scratch (/tmp) and
    adds an inotify watch on each until ENOSPC (at most 20000: the limit of
    a run is 16384) and holds them; meanwhile a victim run adds 50 watches:
    all succeed."""
    need_root()
    with Attack(e, "watches-attack", 20000) as a:
        rep = a.report()
        vic, vres = victim(e, "watches-victim", 50)
        res = a.release()
    print("# attacker: %d watches, then %s (max_inotify_watches inside %s); victim: %d of %d, "
          "errors %s" % (rep["got"], rep["err"], rep["max"], vic["ok"], vic["tries"],
                         vic["errs"]), flush=True)
    expect(rep["err"] == "ENOSPC", "the attacker did not reach a watch limit (%d watches, cap "
           "%d, stopped by %s): nothing bounds one run's watches below the host's %d"
           % (rep["got"], rep["cap"], rep["err"],
              read_int("/proc/sys/fs/inotify/max_user_watches")), res)
    expect_victim_ok(vic, vres, "inotify_add_watch")
    expect_held(res)


# ---- limits inside -----------------------------------------------------------

def check_limits(got, res):
    """got: {name: value} read inside. Every name of LIMITS_INSIDE the host
    kernel has must read its value."""
    host = set(os.listdir("/proc/sys/user"))
    wrong = ["%s=%s (want %d)" % (n, got.get(n, "missing"), v)
             for n, v in sorted(LIMITS_INSIDE.items()) if n in host and got.get(n) != v]
    expect(not wrong, "inside the sandbox /proc/sys/user reads: %s" % ", ".join(wrong), res)


@case
def namespace_limits_inside(e):
    """Inside a sandbox (as whoever runs this script: root, or rootless),
    /proc/sys/user/max_inotify_instances reads 64, max_inotify_watches
    16384, and max_user_namespaces and max_fanotify_groups (where the
    host kernel has it) read 0. (No other namespace can be made without a
    user namespace of its own, so their limits are not set.)"""
    m = new_marker()
    argv = e.argv([PY, TOOL_IN, "limits"], tool_opts(m))
    res = finish(start(argv), argv, time.monotonic(), 40)
    expect_rc(res, 0)
    check_limits(json.loads(res.text), res)


@case
def rootless_namespace_limits_and_identity(e):
    """Rootless (as a throwaway user when we are root, else as ourselves),
    the same /proc/sys/user values inside, and the record's identity is
    {host_uid: the user's uid, host_gid: its gid, slot: null}."""
    user = ThrowawayUser() if IS_ROOT else None
    if user:
        user.__enter__()
    try:
        with TempDir(mode=0o755, prefix="airlock-tenants-rootless-") as d:
            paths = {}
            for name, src in (("airlock", e.airlock), ("probe", e.probe), ("tool.py", TOOL)):
                paths[name] = shutil.copy(src, os.path.join(d, name))
                os.chmod(paths[name], 0o755)
            out = os.path.join(d, "out")
            os.mkdir(out)
            os.chmod(out, 0o777)
            rp = os.path.join(out, "r.json")
            sub = e.__class__(paths["airlock"], paths["probe"])
            m = new_marker()
            argv = sub.argv([PY, TOOL_IN, "limits"],
                            tool_opts(m, ["--result", rp], tool=paths["tool.py"]))
            res = finish(start(argv, user=user.name if user else None, cwd=d), argv,
                         time.monotonic(), 40)
            expect_rc(res, 0)
            with open(rp) as f:
                record = json.load(f)
        if user:
            uid, gid = user.uid, pwd.getpwnam(user.name).pw_gid
        else:
            uid, gid = os.geteuid(), os.getegid()
        check_limits(json.loads(res.text), res)
        expect(identity(record) == (uid, gid, None), "the rootless record's identity is %s, "
               "expected host_uid %d host_gid %d slot null" % (record.get("identity"), uid, gid))
    finally:
        if user:
            user.__exit__(None, None, None)


@case
def parent_death_signal_kept(e):
    """As root, creating the sandbox's user namespace as the run's own uid
    (an euid change) does not lose a parent-death signal airlock's caller
    set: airlock still dies with its parent, and its sandbox with it."""
    if not IS_ROOT:
        raise Skip("as root only (rootless makes no euid change)")
    m = new_marker()
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    r, w = os.pipe()
    middle = os.fork()
    if middle == 0:
        try:
            os.close(r)
            child = os.fork()
            if child == 0:
                libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
                argv = e.argv(["/bin/sleep", "8"], ["--env", "AIRLOCK_MARK=" + m,
                                                    "--timeout", "20"])
                os.execv(argv[0], argv)
            os.write(w, b"%d" % child)
            # airlock is past its clone once the sandbox's init (a clone
            # of it, with the marker in its argv too) is there.
            wait_for(lambda: [q for q in procs_with_marker(m) if q != child], 20)
        finally:
            os._exit(0)
    os.close(w)
    airlock = int(os.read(r, 32) or b"0")
    os.close(r)
    os.waitpid(middle, 0)
    try:
        gone = wait_for(lambda: not os.path.exists("/proc/%d" % airlock)
                        or (proc_read(airlock, "stat") or b") Z").rsplit(b")", 1)[1].split()[0]
                        == b"Z", 5)
        expect(gone, "airlock %d outlived its parent by 5 s" % airlock)
        left = wait_for(lambda: not procs_with_marker(m), 5)
        expect(left, "the sandbox outlived airlock: %s" % procs_with_marker(m))
    finally:
        if os.path.exists("/proc/%d" % airlock):
            kill_pid(airlock)


if __name__ == "__main__":
    main(suite)
