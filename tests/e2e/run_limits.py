#!/usr/bin/python3
"""End-to-end tests of airlock's runtime limits and teardown (TAP).

usage: run_limits.py AIRLOCK PROBE [CASE-SUBSTRING...]

Each case runs a bounded "bomb" (memory hog, fork bomb, CPU spinner, output
flood, disk fill, ...) under a limit and checks three things: airlock's exit
code, the result record (--result: reason and the relevant counters) and
the audit stream (--audit), and that nothing of the run is left on the host:
no process carrying the run's unique marker (airlock's argv always holds
it, and so does the sandbox's init, a clone of airlock), no new run cgroup
directory in any hierarchy, no new entry in /proc/self/mountinfo.

Every bomb stops by itself, so it is harmless even if airlock failed to
contain it: the memory hog at 2 GB, the fork bomb after 5,000 forks (its
children sleep 30 s), the CPU spinner after 20 s, the output flood at 500
MB, the disk fill at 2 GB (and it writes only to the sandbox's /tmp).
Signals go only to processes this script started, by pid.
"""

import errno
import json
import os
import re
import shutil
import signal
import subprocess
import time

from harness import (IS_ROOT, PROBE_IN, MarkedSuite, Skip, TempDir, ThrowawayUser, cgroup_is_stale,
                     cgroup_supervisor, children_of, expect, expect_rc, finish, host_mount_count,
                     kill_pid, main, ours, proc_read, procs_matching, procs_with_marker,
                     pid_starttime, read_outputs, run_cgroup_bases, run_cgroup_dirs,
                     signal_pending, start, wait_for)
from harness import new_marker as new_marker_with
from harness import BACKEND, per_backend

# gvisor's sentry runs the command: no host process is the probe, so the
# sandbox's processes are the run cgroup's (runsc, its gofer and sentry).
COMMAND_IN_SENTRY = BACKEND in ("gvisor", "microvm", "vm")


def new_marker():
    return new_marker_with("lim-")


suite = MarkedSuite()
case = suite.case

MiB = 1 << 20
CUT_MARKER = b"\n[airlock: output cut at the limit]\n"



# ---- running airlock ---------------------------------------------------------

class Run:
    """One `airlock run` with a unique marker, a result record and an audit
    stream: .res (Result), .record (dict or None), .events (list)."""

    def __init__(self, res, record, events, marker):
        self.res, self.record, self.events, self.marker = res, record, events, marker

    def rec(self, *keys):
        v = self.record
        for k in keys:
            v = v[k]
        return v

    def describe(self):
        return "%s\nresult record: %s\naudit: %s" % (
            self.res.describe(), json.dumps(self.record), json.dumps(self.events)[:3000])

    def expect(self, cond, msg):
        if not cond:
            raise AssertionError(msg + "\n" + self.describe())

    def events_named(self, name):
        return [ev for ev in self.events if ev.get("event") == name]


def run(e, cmd, opts=(), marker=None, timeout=60, user=None):
    """airlock run [opts] --env AIRLOCK_MARK=marker --result --audit -- cmd.
    The marker puts the run's identity into airlock's argv (so into init's)."""
    marker = marker or new_marker()
    with TempDir(mode=0o777) as d:
        os.chmod(d, 0o777)
        argv = e.argv(cmd, ["--env", "AIRLOCK_MARK=" + marker,
                            "--result", os.path.join(d, "result.json"),
                            "--audit", os.path.join(d, "audit.jsonl")] + list(opts))
        t0 = time.monotonic()
        p = start(argv, user=user, cwd=d if user else None)
        res = finish(p, argv, t0, timeout)
        record, events = read_outputs(d)
    r = Run(res, record, events, marker)
    r.expect(record is not None, "no result record was written")
    return r


def expect_limit_run(r, rc, reason):
    """Exit code, reason and exit_code in the record, and the audit stream's
    run.start / run.end pair with the record's run id."""
    r.expect(r.res.rc == rc, "expected exit %d, got %s" % (rc, r.res.rc))
    r.expect(r.rec("reason") == reason, "expected reason %r, got %r" % (reason, r.rec("reason")))
    r.expect(r.rec("exit_code") == rc, "record exit_code %r" % r.rec("exit_code"))
    names = [ev.get("event") for ev in r.events]
    r.expect(names[:1] == ["run.start"] and names[-1:] == ["run.end"],
             "audit stream does not go run.start ... run.end: %s" % names)
    ids = {ev.get("run") for ev in r.events}
    r.expect(ids == {r.rec("run")}, "audit run ids %s vs record run %r" % (ids, r.rec("run")))


def expect_limit_hit(r, limit, value=None):
    hits = [ev for ev in r.events_named("limit.hit") if ev.get("limit") == limit]
    r.expect(len(hits) == 1, "expected one limit.hit event for %s" % limit)
    if value is not None:
        r.expect(hits[0].get("limit_value") == value, "limit.hit limit_value %r, expected %r"
                 % (hits[0].get("limit_value"), value))
    return hits[0]


# ---- nothing left behind -----------------------------------------------------

class HostState:
    """Host mount count and run cgroup dirs before a case; check() says what
    the case left behind, cleanup() removes it (our runs' cgroups, our
    sandbox processes, by pid)."""

    def __init__(self):
        self.bases = run_cgroup_bases()
        self.mounts = host_mount_count()
        self.cgroups = run_cgroup_dirs(self.bases)

    def new_cgroups(self):
        """Run cgroup dirs that appeared since and were made by an airlock
        we started (whatever other airlocks on the host do is not ours)."""
        return sorted(d for d in run_cgroup_dirs(self.bases) - self.cgroups if ours(d))

    def check(self, *markers, res=None):
        left = {}
        for m in markers:
            if wait_for(lambda: not procs_with_marker(m), 2):
                continue
            pids = procs_with_marker(m)
            if pids:
                left[m] = ["%d %s" % (p, (proc_read(p, "cmdline") or b"")
                                      .replace(b"\0", b" ")[:120].decode("utf-8", "replace"))
                           for p in pids]
        expect(not left, "processes of the run remain on the host: %s" % left, res)
        kids = children_of(os.getpid())
        expect(not kids, "child processes of the test remain: %s" % kids, res)
        cg = wait_for(lambda: not self.new_cgroups(), 2)
        expect(cg, "run cgroup dirs left behind: %s" % self.new_cgroups(), res)
        after = host_mount_count()
        expect(after == self.mounts, "host mount count changed: %d -> %d"
               % (self.mounts, after), res)

    def cleanup(self, *markers):
        for m in markers:
            for pid in procs_with_marker(m):
                kill_pid(pid)
        for d in self.new_cgroups():
            for _ in range(50):
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    try:
                        with open(os.path.join(d, "cgroup.procs")) as f:
                            pids = [int(x) for x in f.read().split()]
                    except OSError:
                        pids = []
                    # Only processes of our own runs live in our run's cgroup.
                    for pid in pids:
                        kill_pid(pid)
                    time.sleep(0.02)


def limits_case(fn):
    """A case wrapped with the nothing-left-behind check and cleanup. The
    function gets (e, marker) and returns the Run results it made, or a
    list of markers it used."""
    def wrapped(e):
        need_cgroup(e)
        st = HostState()
        marker = new_marker()
        used = [marker]
        try:
            out = fn(e, marker)
            for x in out or ():
                used.append(x.marker if isinstance(x, Run) else x)
            st.check(*used)
        finally:
            st.cleanup(*used)
    wrapped.__name__ = fn.__name__
    wrapped.__doc__ = fn.__doc__
    return suite.case(wrapped)


_cgroup_ok = None


def need_cgroup(e):
    """Skip the limit cases when airlock cannot make a cgroup here (an
    ordinary user without a delegated cgroup)."""
    global _cgroup_ok
    if _cgroup_ok is None:
        r = run(e, ["true"], ["--memory", "512M"])
        _cgroup_ok = (r.res.rc == 0, r.res.errtext.strip())
    if not _cgroup_ok[0]:
        raise Skip("airlock cannot create a cgroup here: %s" % _cgroup_ok[1][:200])


def py(code):
    return ["/usr/bin/python3", "-c", code]


# ---- 1. memory ---------------------------------------------------------------

MEMORY_HOG = r"""
import sys
chunks = []
for i in range(2048):                 # stops by itself at 2 GB
    chunks.append(b"\x01" * (1 << 20))
print("allocated", len(chunks), "MiB")
"""


@per_backend()
@limits_case
def memory_hog_killed(e, m):
    """A python memory hog (1 MiB chunks up to 2 GB, then exit 0) under
    --memory 128M: exit 137, reason "memory", peak memory between 100 MiB
    and 128 MiB (+4 MiB slack), one OOM kill counted, a limit.hit event;
    stderr names the value and the flag (--memory 128M was reached)."""
    r = run(e, py(MEMORY_HOG) + [m], ["--memory", "128M"], marker=m)
    expect_limit_run(r, 137, "memory")
    peak = r.rec("peak_memory_bytes")
    r.expect(isinstance(peak, int) and 100 * MiB <= peak <= 132 * MiB,
             "peak_memory_bytes %r not in [100M, 132M]" % peak)
    r.expect(r.rec("denials", "oom_kills") >= 1, "no OOM kill counted")
    r.expect(r.rec("limits", "memory_bytes") == 128 * MiB, "limits.memory_bytes")
    r.expect(r.rec("limits", "cgroup") is True, "limits.cgroup is not true")
    r.expect(b"allocated" not in r.res.out, "the hog finished: memory was not limited")
    hit = expect_limit_hit(r, "memory", 128 * MiB)
    r.expect(hit.get("observed", 0) >= 100 * MiB, "limit.hit observed %r" % hit.get("observed"))
    r.expect("limit: memory" in r.res.errtext, "stderr does not say limit: memory")
    r.expect("--memory 128M was reached" in r.res.errtext,
             "stderr does not give the value and the flag (--memory 128M was reached)")
    return [r]


# ---- 2. pids -----------------------------------------------------------------

FORK_BOMB = r"""
import os, sys, time
n = refused = 0
while n < 5000:                       # stops by itself after 5,000 forks
    n += 1
    try:
        pid = os.fork()
    except OSError:
        refused += 1
        time.sleep(0.001)
        continue
    if pid == 0:
        time.sleep(30)                # the children end by themselves too
        os._exit(0)
print("forks", n, "refused", refused)
"""


@per_backend()
@limits_case
def fork_bomb_killed(e, m):
    """A fork bomb (python os.fork loop capped at 5,000 forks, children
    sleep 30 s) under --pids 64: exit 137, reason "pids", forks_refused >= 1,
    a limit.hit event; afterwards the host can still fork and no process
    with the run's marker exists."""
    r = run(e, py(FORK_BOMB) + [m], ["--pids", "64"], marker=m)
    expect_limit_run(r, 137, "pids")
    r.expect(r.rec("denials", "forks_refused") >= 1, "no refused fork counted")
    r.expect(b"forks 5000" not in r.res.out, "the bomb ran to its end: pids were not limited")
    expect_limit_hit(r, "pids", 64)
    r.expect("--pids 64 was reached" in r.res.errtext,
             "stderr does not give the value and the flag (--pids 64 was reached)")
    r.expect(r.res.elapsed < 25, "took %.1fs (the children sleep 30 s)" % r.res.elapsed)
    host = subprocess.run(["/bin/true"])
    expect(host.returncode == 0, "the host cannot fork /bin/true after the bomb")
    left = wait_for(lambda: not procs_with_marker(m), 2)
    expect(left, "fork bomb processes remain on the host: %s" % procs_with_marker(m))
    return [r]


# ---- 3. cpu-time ---------------------------------------------------------------

SPINNER = r"""
import time
t = time.monotonic()
while time.monotonic() - t < 20:      # stops by itself after 20 s
    pass
print("spun 20 s")
"""


@per_backend()
@limits_case
def cpu_spinner_killed(e, m):
    """A CPU spinner (stops itself after 20 s) under --cpu-time 1: exit 137,
    reason "cpu-time", cpu_total_ms >= 1000, wall_ms < 5000, limit.hit."""
    r = run(e, py(SPINNER) + [m], ["--cpu-time", "1"], marker=m)
    expect_limit_run(r, 137, "cpu-time")
    r.expect(r.rec("cpu_total_ms") >= 1000, "cpu_total_ms %r < 1000" % r.rec("cpu_total_ms"))
    r.expect(r.rec("wall_ms") < 5000, "wall_ms %r >= 5000" % r.rec("wall_ms"))
    r.expect(r.rec("limits", "cpu_time_ms") == 1000, "limits.cpu_time_ms")
    hit = expect_limit_hit(r, "cpu-time", 1000)
    r.expect(hit.get("observed", 0) >= 1000, "limit.hit observed %r" % hit.get("observed"))
    r.expect("--cpu-time 1s was reached" in r.res.errtext,
             "stderr does not give the value and the flag (--cpu-time 1s was reached)")
    return [r]


# ---- 4. timeout ----------------------------------------------------------------

@limits_case
def sleeper_timeout(e, m):
    """`probe sleep 30` under --timeout 1: exit 124, reason "timeout",
    wall_ms < 3000, a limit.hit event for timeout with limit_value 1000."""
    r = run(e, [PROBE_IN, "sleep", "30", m], ["--timeout", "1"], marker=m)
    expect_limit_run(r, 124, "timeout")
    r.expect(1000 <= r.rec("wall_ms") < 3000, "wall_ms %r" % r.rec("wall_ms"))
    expect_limit_hit(r, "timeout", 1000)
    r.expect("limit: timeout" in r.res.errtext, "stderr does not say limit: timeout")
    r.expect("--timeout 1s was reached" in r.res.errtext,
             "stderr does not give the value and the flag (--timeout 1s was reached)")
    return [r]


SPIN_FOREVER = r"""
import os, sys, time
t = time.monotonic()
while time.monotonic() - t < 20:      # stops by itself after 20 s
    for _ in range(20000):
        pass
    # Its own CPU time, measured by the kernel for this process alone.
    os.write(1, b"cpu %d\n" % int(time.process_time() * 1000))
"""


@limits_case
def cpu_counted_when_killed(e, m):
    """A CPU spinner ended by --timeout 2 (no --cpu-time, so no cpuacct
    cgroup), which writes its own CPU time as it goes: the record's
    cpu_total_ms is at least the last figure it wrote (less 10 ms of
    rounding), however much CPU the machine had to spare. (A regression
    test: when init was SIGKILLed with the command unreaped, the kernel
    reaped it and rusage reported ~0 ms.)"""
    r = run(e, py(SPIN_FOREVER) + [m], ["--timeout", "2"], marker=m)
    expect_limit_run(r, 124, "timeout")
    seen = [int(x) for x in re.findall(rb"^cpu (\d+)$", r.res.out, re.M)]
    r.expect(seen and seen[-1] > 0, "the spinner reported no CPU time: %r" % r.res.out[-200:])
    if seen:
        r.expect(r.rec("cpu_total_ms") >= seen[-1] - 10,
                 "cpu_total_ms %r, but the spinner had used %d ms when it was killed"
                 % (r.rec("cpu_total_ms"), seen[-1]))
    return [r]


# ---- 5. output -----------------------------------------------------------------

@limits_case
def stdout_flood_cut(e, m):
    """500 MB of zeros to stdout under --output-limit 1M: exit 137, reason
    "output", output.truncated, airlock's stdout is exactly 1 MiB of the
    command's bytes plus the cut marker line, and it is over well before
    the 500 MB would be written."""
    r = run(e, ["head", "-c", "500000000", "/dev/zero"], ["--output-limit", "1M"], marker=m)
    expect_limit_run(r, 137, "output")
    r.expect(r.rec("output", "truncated") is True, "output.truncated is not true")
    r.expect(r.rec("output", "stdout_bytes") == MiB, "output.stdout_bytes %r"
             % r.rec("output", "stdout_bytes"))
    r.expect(len(r.res.out) == MiB + len(CUT_MARKER), "airlock wrote %d bytes to stdout"
             % len(r.res.out))
    r.expect(r.res.out == b"\0" * MiB + CUT_MARKER,
             "stdout is not 1 MiB of zeros followed by the cut marker (tail %r)"
             % r.res.out[-60:])
    r.expect("--output-limit 1M was reached" in r.res.errtext,
             "stderr does not give the value and the flag (--output-limit 1M was reached)")
    r.expect(r.res.elapsed < 25, "took %.1fs" % r.res.elapsed)  # a hang guard
    hit = expect_limit_hit(r, "output", MiB)
    r.expect(hit.get("observed", 0) >= MiB, "limit.hit observed %r" % hit.get("observed"))
    return [r]


# ---- 6. scratch ----------------------------------------------------------------

@limits_case
def disk_fill_enospc(e, m):
    """dd of 2 GB from /dev/zero to /tmp inside under --scratch 32M: dd
    fails with ENOSPC ("No space left"), its exit 1 is airlock's exit,
    reason "exited", and no file is left on the host."""
    name = "/tmp/fill-" + m
    expect(not os.path.exists(name), "%s exists before the run" % name)
    r = run(e, ["dd", "if=/dev/zero", "of=" + name, "bs=1M", "count=2048"],
            ["--scratch", "32M"], marker=m)
    expect_limit_run(r, 1, "exited")
    r.expect("No space left" in r.res.errtext, "dd did not report ENOSPC")
    got = re.search(r"(\d+) bytes", r.res.errtext)
    r.expect(got and 16 * MiB <= int(got.group(1)) <= 32 * MiB,
             "dd copied %s bytes into a 32M scratch" % (got.group(1) if got else "?"))
    r.expect(not r.events_named("limit.hit"), "a limit.hit event for a full scratch")
    expect(not os.path.exists(name), "%s exists on the host" % name)
    # By the run's marker: other suites on this host make /tmp entries too.
    new = [n for n in os.listdir("/tmp") if m in n]
    expect(not new, "new host /tmp entries: %s" % new)
    return [r]


# ---- 7. cpus -------------------------------------------------------------------

BUSY_1_5 = r"""
import time
while time.process_time() < 1.5:      # 1.5 s of CPU, then exit
    pass
"""


@limits_case
def cpus_half_throttles(e, m):
    """--cpus 0.5: a loop burning 1.5 s of CPU takes >= 2.5 s of wall time,
    and the record's cpu_total_ms / wall_ms is <= 0.6."""
    r = run(e, py(BUSY_1_5) + [m], ["--cpus", "0.5"], marker=m)
    expect_limit_run(r, 0, "exited")
    wall, cpu = r.rec("wall_ms"), r.rec("cpu_total_ms")
    r.expect(cpu >= 1400, "cpu_total_ms %r: the loop should have burned 1.5 s" % cpu)
    r.expect(wall >= 2500, "wall_ms %r < 2500: not throttled" % wall)
    r.expect(cpu / wall <= 0.6, "cpu/wall = %.2f > 0.6" % (cpu / wall))
    r.expect(r.rec("limits", "cpus") == 0.5, "limits.cpus %r" % r.rec("limits", "cpus"))
    return [r]


# ---- 8. rlimits ----------------------------------------------------------------

OPEN_100 = r"""
import errno, os, sys
fds = []
try:
    for i in range(100):
        fds.append(os.open("/dev/null", os.O_RDONLY))
    print("opened", len(fds), "max", max(fds), "none")
except OSError as err:
    print("opened", len(fds), "max", max(fds), errno.errorcode[err.errno])
"""

WRITE_2M = r"""
import errno, os
fd = os.open("/tmp/big", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
n, how = 0, "none"
try:
    for i in range(32):
        n += os.write(fd, bytes(65536))
except OSError as err:
    how = errno.errorcode[err.errno]
print("wrote", n, how, os.fstat(fd).st_size)
"""


@limits_case
def open_files_and_file_size(e, m):
    """--open-files 32: opening 100 files fails with EMFILE once fd 31 is
    taken. --file-size 1M, writing 2 MiB to /tmp: dd (SIGXFSZ at its default
    action) is killed by SIGXFSZ: exit 153, reason "signaled", signal 25;
    python (which ignores SIGXFSZ) gets EFBIG after exactly 1 MiB."""
    runs = []
    r = run(e, py(OPEN_100) + [m], ["--open-files", "32"], marker=m)
    runs.append(r)
    expect_limit_run(r, 0, "exited")
    got = r.res.text.split()
    r.expect(len(got) == 5 and got[4] == "EMFILE", "expected EMFILE")
    r.expect(got[3] == "31", "the highest fd opened is %s, expected 31" % got[3])
    r.expect(20 <= int(got[1]) <= 29, "opened %s files under a 32 fd limit" % got[1])
    r.expect(r.rec("limits", "open_files") == 32, "limits.open_files")

    m2 = new_marker()
    r = run(e, ["dd", "if=/dev/zero", "of=/tmp/big", "bs=64k", "count=32"],
            ["--file-size", "1M"], marker=m2)
    runs.append(r)
    expect_limit_run(r, 128 + signal.SIGXFSZ, "signaled")
    r.expect(r.rec("signal") == signal.SIGXFSZ, "signal %r, expected SIGXFSZ (%d)"
             % (r.rec("signal"), signal.SIGXFSZ))
    r.expect(r.rec("limits", "file_size_bytes") == MiB, "limits.file_size_bytes")

    m3 = new_marker()
    r = run(e, py(WRITE_2M) + [m3], ["--file-size", "1M"], marker=m3)
    runs.append(r)
    expect_limit_run(r, 0, "exited")
    r.expect(r.res.text == "wrote %d EFBIG %d\n" % (MiB, MiB),
             "expected python to write exactly 1 MiB and then get EFBIG")
    return runs


# ---- 9. SIGKILL of the supervisor -----------------------------------------------

def sandbox_members(probe_pid):
    """Host pids in the probe's pid namespace (init and the probe); where
    the sandbox has no pid namespace of its own (the process backend), the
    host pids of the probe's uid, which is the run's own (the slot pool)."""
    try:
        ns = os.readlink("/proc/%d/ns/pid" % probe_pid)
        uid = os.stat("/proc/%d" % probe_pid).st_uid
    except OSError:
        return []
    own_ns = ns != os.readlink("/proc/self/ns/pid")
    members = []
    for pid in [int(d) for d in os.listdir("/proc") if d.isdigit()]:
        try:
            if own_ns and os.readlink("/proc/%d/ns/pid" % pid) == ns:
                members.append(pid)
            elif not own_ns and os.stat("/proc/%d" % pid).st_uid == uid:
                members.append(pid)
        except OSError:
            pass
    return members


def cgroup_procs(dirs):
    """The pids in the cgroup.procs of dirs."""
    pids = set()
    for d in dirs:
        try:
            with open(os.path.join(d, "cgroup.procs")) as f:
                pids |= {int(x) for x in f.read().split()}
        except OSError:
            pass
    return pids


def alive(pid):
    """Exists and is not a zombie (a zombie holds nothing but its pid)."""
    stat = proc_read(pid, "stat")
    return bool(stat) and stat.rsplit(b")", 1)[-1].split()[:1] != [b"Z"]


def kill_supervisor_round(e, m, st, clear_with):
    argv = e.argv([PROBE_IN, "sleep", "30", m], ["--env", "AIRLOCK_MARK=" + m])
    p = start(argv)
    try:
        def my_dirs():
            return sorted(d for d in run_cgroup_dirs(st.bases)
                          if cgroup_supervisor(d) == (p.pid, pid_starttime(p.pid)))
        if COMMAND_IN_SENTRY:
            found = wait_for(lambda: len(cgroup_procs(my_dirs())) >= 2, 10)
            expect(found, "the run cgroup never held the layer's processes (runsc and its sandbox, or the VMM and QEMU)")
            members = cgroup_procs(my_dirs())
        else:
            found = wait_for(lambda: procs_matching(m), 10)
            expect(found, "the sandboxed probe never appeared on the host")
            members = (set(sandbox_members(found[0]))
                       | set(procs_with_marker(m, exclude=(p.pid,))))
            expect(len(members) >= 2, "expected init and the probe, found %s" % sorted(members))
        # A run without --cpus / --cpu-time joins only memory and pids (v1).
        want = sorted(st.bases[h] for h in ("memory", "pids", "v2") if h in st.bases)
        mine = my_dirs()
        expect([os.path.dirname(d) for d in mine] == want,
               "expected one run cgroup dir under each of %s named after airlock pid %d, "
               "found %s" % (want, p.pid, mine))
        os.kill(p.pid, signal.SIGKILL)
        p.communicate(timeout=10)
        t0 = time.monotonic()
        # The kernel ends them (init's parent-death signal, then the pid
        # namespace); 15 s is a hang guard, not a speed the load allows.
        gone = wait_for(lambda: not [q for q in members if alive(q)], 15, step=0.005)
        took = time.monotonic() - t0
        expect(gone, "sandbox processes still alive 15 s after the supervisor's SIGKILL: %s"
               % [q for q in members if alive(q)])
        # Another airlock running on this host at the same time may gc a
        # stale dir as soon as it is stale; one left is proof enough.
        still = [d for d in mine if os.path.isdir(d)]
        expect(still, "no run cgroup dir was left (stale) after the SIGKILL: %s" % mine)
        expect(all(cgroup_is_stale(d) for d in still), "the left dirs are not stale: %s" % still)
        if clear_with == "run":
            r = run(e, ["true"])
            expect_limit_run(r, 0, "exited")
        else:
            # (Another airlock's start may remove some of them first: gc
            # must report removing what was still there when it started.)
            pre = [d for d in still if os.path.isdir(d)]
            res = finish(start([e.airlock, "gc"]), [e.airlock, "gc"], time.monotonic(), 30)
            expect_rc(res, 0)
            got = re.search(r"removed (\d+) stale cgroups?", res.text + res.errtext)
            expect(not pre or (got and int(got.group(1)) >= 1),
                   "airlock gc did not report removing the stale cgroups %s" % pre, res)
        left = [d for d in mine if os.path.isdir(d)]
        expect(not left, "%s did not remove the stale run cgroups: %s"
               % ("airlock run -- true" if clear_with == "run" else "airlock gc", left))
        return took, len(still)
    finally:
        if p.poll() is None:
            kill_pid(p.pid)
            p.wait()


@per_backend()
@limits_case
def supervisor_sigkill(e, m):
    """SIGKILL of airlock mid-run (`probe sleep 30`): every process of the
    sandbox (its pid namespace, seen from the host) is gone (the time it took
    is printed); the run's
    cgroup dirs are left, stale; round 1: the next `airlock run -- true`
    removes them; round 2: `airlock gc` reports removing them."""
    st = HostState()
    took1, n1 = kill_supervisor_round(e, m, st, "run")
    m2 = new_marker()
    took2, n2 = kill_supervisor_round(e, m2, st, "gc")
    print("# sandbox gone %.0f ms / %.0f ms after the SIGKILL; %d / %d stale dirs left"
          % (took1 * 1000, took2 * 1000, n1, n2), flush=True)
    return [m2]


# ---- 10. SIGTERM of the supervisor ---------------------------------------------

def sigterm_round(e, m, cmd, ends):
    """SIGTERM to airlock running cmd; ends: whether the first should end
    the run (then it has 20 s to, a hang guard of the 30 s sleep), else it
    must still run 1 s after airlock took the signal and a second SIGTERM
    (sent once the first is no longer pending, so that the two are not
    merged into one) ends it."""
    with TempDir(mode=0o755) as d:
        rp = os.path.join(d, "r.json")
        argv = e.argv(cmd, ["--env", "AIRLOCK_MARK=" + m, "--result", rp])
        t0 = time.monotonic()
        p = start(argv)
        try:
            # sh has set its trap by the time the probe runs.
            expect(wait_for(lambda: procs_matching(m), 10), "the probe never appeared")
            os.kill(p.pid, signal.SIGTERM)
            wait_for(lambda: not signal_pending(p.pid, signal.SIGTERM), 10)
            try:
                p.wait(timeout=20 if ends else 1)
            except subprocess.TimeoutExpired:
                pass
            first_survived = p.poll() is None
            if first_survived:
                expect(procs_matching(m), "airlock runs on but the probe is gone")
                os.kill(p.pid, signal.SIGTERM)
            res = finish(p, argv, t0, 20)
        finally:
            if p.poll() is None:
                kill_pid(p.pid)
                p.wait()
        with open(rp) as f:
            record = json.load(f)
    return res, record, first_survived


@limits_case
def supervisor_sigterm(e, m):
    """SIGTERM to airlock is forwarded to the command: `probe sleep 30` dies
    of it (exit 143, reason "signaled", signal 15). A command that ignores
    SIGTERM (sh with trap "" TERM) survives the first; a second SIGTERM kills
    the sandbox (exit 143 = 128+15, reason "killed", signal 15). Nothing is
    left either way."""
    res, rec, survived = sigterm_round(e, m, [PROBE_IN, "sleep", "30", m], True)
    expect_rc(res, 143)
    expect(not survived, "the first SIGTERM did not end a plain probe sleep", res)
    expect(rec["reason"] == "signaled" and rec["signal"] == 15,
           "reason %r signal %r, expected signaled 15" % (rec["reason"], rec["signal"]), res)
    m2 = new_marker()
    res, rec, survived = sigterm_round(
        e, m2, ["/bin/sh", "-c", "trap '' TERM; %s sleep 30 %s; echo after" % (PROBE_IN, m2)],
        False)
    expect_rc(res, 143)
    expect(survived, "the TERM-ignoring command did not survive the first SIGTERM", res)
    expect(rec["reason"] == "killed" and rec["signal"] == 15,
           "reason %r signal %r, expected killed 15" % (rec["reason"], rec["signal"]), res)
    expect(b"after" not in res.out, "the shell went on after the probe", res)
    expect("stopped by" in res.errtext, "stderr does not say it was stopped", res)
    return [m2]


# ---- 11. denied syscall in the audit stream ----------------------------------------

MOUNT_CALL = ('import ctypes; print(ctypes.CDLL(None, use_errno=True).mount(b"none", b"/tmp", '
              'b"tmpfs", 0, None), ctypes.get_errno())')


@limits_case
def denied_syscall_audited(e, m):
    """mount(2) from python ctypes returns -1 EPERM; the audit stream has a
    syscall.denied event naming "mount" (with the host pid that made it),
    between run.start and run.end with the record's run id; the record
    counts denials.syscalls >= 1."""
    r = run(e, py(MOUNT_CALL) + [m], marker=m)
    expect_limit_run(r, 0, "exited")
    r.expect(r.res.text == "-1 %d\n" % errno.EPERM, "expected output '-1 1'")
    den = [ev for ev in r.events_named("syscall.denied") if ev.get("syscall") == "mount"]
    r.expect(den, "no syscall.denied event for mount")
    r.expect(den[0].get("errno") == "EPERM" and isinstance(den[0].get("nr"), int)
             and isinstance(den[0].get("pid"), int), "syscall.denied fields %s" % den[0])
    r.expect(r.rec("denials", "syscalls") >= 1, "denials.syscalls %r"
             % r.rec("denials", "syscalls"))
    end = r.events_named("run.end")[0]
    r.expect(end.get("denials", {}).get("syscalls") == r.rec("denials", "syscalls"),
             "run.end and the record disagree on denials")
    return [r]


@limits_case
def denied_syscall_events_capped(e, m):
    """A loop of 500 denied mount(2) calls: every call fails with EPERM and
    is counted (denials.syscalls >= 500), but only the first 20 are written
    as syscall.denied events, the twentieth saying so ("more")."""
    code = ('import ctypes; f = ctypes.CDLL(None, use_errno=True).mount; '
            'print(sum(f(b"none", b"/tmp", b"tmpfs", 0, None) == -1 for _ in range(500)))')
    r = run(e, py(code) + [m], marker=m)
    expect_limit_run(r, 0, "exited")
    r.expect(r.res.text == "500\n", "not every call failed: %r" % r.res.text)
    den = [ev for ev in r.events_named("syscall.denied") if ev.get("syscall") == "mount"]
    r.expect(len(den) == 20, "%d syscall.denied events for mount, expected 20" % len(den))
    r.expect("more" in den[-1] and not any("more" in ev for ev in den[:-1]),
             "the twentieth event does not say more are only counted")
    r.expect(r.rec("denials", "syscalls") >= 500, "denials.syscalls %r"
             % r.rec("denials", "syscalls"))
    return [r]


@limits_case
def timeout_with_stuck_reader(e, m):
    """airlock's own stdout is a pipe nobody reads (a paused terminal, a
    caller that reads only at the end) while the command writes 3 MB and
    then sleeps 30 s: --timeout 2 still ends the sandbox (no process of the
    run but airlock itself is left, judged from the host, well before the
    sleep would end: 20 s, a hang guard), and once the reader drains the
    pipe airlock exits 124, reason timeout.
    (A supervisor blocked in a write to its stdout would enforce nothing.)"""
    with TempDir(mode=0o777) as d:
        argv = e.argv(["/bin/sh", "-c", "head -c 3000000 /dev/zero; sleep 30", m],
                      ["--env", "AIRLOCK_MARK=" + m, "--timeout", "2",
                       "--result", os.path.join(d, "result.json")])
        t0 = time.monotonic()
        p = start(argv)
        try:
            def sandbox():
                return [q for q in procs_with_marker(m) if q != p.pid]
            started = wait_for(sandbox, 20)
            gone = wait_for(lambda: not sandbox(), 20)
            left = sandbox()
        finally:
            res = finish(p, argv, t0, 60)
        record, _ = read_outputs(d)
    expect(started, "the sandbox never appeared on the host", res)
    expect(gone, "sandbox processes still running 20 s into a 2 s timeout: %s" % left, res)
    expect_rc(res, 124)
    expect((record or {}).get("reason") == "timeout", "record reason %r"
           % (record or {}).get("reason"), res)
    return [m]


# ---- 12. limit.hit events ----------------------------------------------------------

@limits_case
def limit_hit_events(e, m):
    """limit.hit events: --memory 64M and --timeout 1 each give exactly one,
    after run.start and before run.end, with limit, limit_value and (memory)
    observed; run.end carries the same reason as the record. (Cases 1-5
    check their own limit.hit as well.)"""
    runs = []
    for opts, cmd, limit, value, reason, rc in (
            (["--memory", "64M"], py(MEMORY_HOG) + [m], "memory", 64 * MiB, "memory", 137),
            (["--timeout", "1"], [PROBE_IN, "sleep", "30", m], "timeout", 1000, "timeout", 124)):
        r = run(e, cmd, opts, marker=m if not runs else new_marker())
        runs.append(r)
        expect_limit_run(r, rc, reason)
        names = [ev["event"] for ev in r.events]
        r.expect(names == ["run.start", "limit.hit", "run.end"],
                 "audit events %s, expected run.start, limit.hit, run.end" % names)
        hit = expect_limit_hit(r, limit, value)
        if limit == "memory":
            r.expect(hit.get("observed", 0) >= 48 * MiB, "observed %r" % hit.get("observed"))
        r.expect(r.events[-1].get("reason") == reason, "run.end reason")
        r.expect(r.events[0].get("limits", {}).get(
            "memory_bytes" if limit == "memory" else "timeout_ms") == value,
            "run.start does not carry the limit")
    return runs


# ---- 13. verify --------------------------------------------------------------------

@limits_case
def verify_all_in_force(e, m):
    """`airlock verify` exits 0 and every layer row says "in force"; it shows
    the run's host id range (as root, its slot's) and the user namespace's
    limits, attacked inside and read back from outside."""
    argv = [e.airlock, "verify"]
    res = finish(start(argv), argv, time.monotonic(), 60)
    expect_rc(res, 0)
    rows = [l for l in res.text.splitlines()
            if l.strip() and not l.startswith(("LAYER", "--", "RESULT"))]
    expect(len(rows) >= 10, "only %d layer rows" % len(rows), res)
    bad = [l for l in rows if "in force" not in l or "not in force" in l]
    expect(not bad, "rows not in force: %s" % bad, res)
    expect(any(l.startswith("cgroup") for l in rows), "no cgroup row", res)
    userns = [l for l in rows if l.startswith("userns limits")]
    expect(len(userns) == 2, "expected a userns limits row inside and outside: %s" % userns,
           res)
    expect("max_user_namespaces 0" in userns[0] and "-> EMFILE" in userns[0],
           "inside row: %s" % userns[0], res)
    expect("inotify 64 instances, 16384 watches" in userns[1], "outside row: %s" % userns[1],
           res)
    ident = [l for l in rows if l.startswith("identity") and "host" in l]
    expect(len(ident) == 1, "no outside identity row: %s" % ident, res)
    if IS_ROOT:
        m2 = re.search(r"slot (\d+) of the pool: host ids (\d+)-(\d+)\); user namespace owned "
                       r"by (\d+)", ident[0])
        expect(m2, "identity row names no slot: %s" % ident[0], res)
        slot, lo, hi, owner = (int(x) for x in m2.groups())
        expect(lo == 0x70000000 + slot * 65536 and hi == lo + 65535 and owner == lo,
               "identity row: %s" % ident[0], res)
    expect("RESULT: every layer is in force" in res.text, "no RESULT line", res)


# ---- 14. non-root ------------------------------------------------------------------

@case
def rootless_limits(e):
    """As an ordinary user (a throwaway one when we are root), without a
    delegated cgroup: --memory 64M is refused (exit 125, one message naming
    the cgroup); with default limits the run works (exit 0, limits.cgroup
    false) and stderr warns that the default limits are NOT enforced (and a
    limit.unenforced audit event says so). Nothing is left."""
    st = HostState()
    m = new_marker()
    tmp = None
    try:
        if IS_ROOT:
            user = ThrowawayUser()
            user.__enter__()
        else:
            user = None
        try:
            tmp = TempDir(mode=0o755, prefix="airlock-limits-rootless-")
            d = tmp.__enter__()
            airlock = shutil.copy(e.airlock, os.path.join(d, "airlock"))
            probe = shutil.copy(e.probe, os.path.join(d, "probe"))
            os.chmod(airlock, 0o755)
            os.chmod(probe, 0o755)
            out = os.path.join(d, "out")
            os.mkdir(out)
            os.chmod(out, 0o777)
            uname = user.name if user else None
            sub = e.__class__(airlock, probe)

            argv = sub.argv(["true"], ["--env", "AIRLOCK_MARK=" + m, "--memory", "64M"])
            res = finish(start(argv, user=uname, cwd=d), argv, time.monotonic(), 30)
            if res.rc == 0 and not user:
                raise Skip("this user has a writable cgroup: limits are enforced rootless")
            expect_rc(res, 125)
            expect("cgroup" in res.errtext, "the refusal does not mention the cgroup", res)
            expect(res.errtext.startswith("airlock: "), "stderr must start with airlock:", res)

            rp, ap = os.path.join(out, "r.json"), os.path.join(out, "a.jsonl")
            argv = sub.argv([PROBE_IN, "id"], ["--env", "AIRLOCK_MARK=" + m,
                                               "--result", rp, "--audit", ap])
            res = finish(start(argv, user=uname, cwd=d), argv, time.monotonic(), 30)
            expect_rc(res, 0)
            expect("uid=1000" in res.text, "the probe did not run", res)
            expect("NOT enforced" in res.errtext, "no warning that limits are NOT enforced", res)
            with open(rp) as f:
                rec = json.load(f)
            with open(ap) as f:
                evs = [json.loads(l) for l in f if l.strip()]
            expect(rec["limits"]["cgroup"] is False, "limits.cgroup is %r"
                   % rec["limits"]["cgroup"], res)
            expect(rec["peak_memory_bytes"] is None, "peak_memory_bytes without a cgroup", res)
            expect(any(ev["event"] == "limit.unenforced" for ev in evs),
                   "no limit.unenforced event: %s" % [ev["event"] for ev in evs], res)
            st.check(m, res=res)
        finally:
            if tmp:
                tmp.__exit__(None, None, None)
            if user:
                user.__exit__(None, None, None)
    finally:
        st.cleanup(m)


if __name__ == "__main__":
    main(suite)
