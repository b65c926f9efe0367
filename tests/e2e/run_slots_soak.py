#!/usr/bin/python3
"""Soak test of the per-run host id pool (TAP).

usage: run_slots_soak.py AIRLOCK PROBE [--runs N] [--parallel P]

As root, every run takes a slot of the pool (host ids 0x70000000 + slot *
65536 up, slot 0..4093) for as long as it lives, with a lock file in
/run/airlock/ids/SLOT. This runs N (default 1000) short runs back to back,
P (default 8) at a time, each `/bin/sh -c 'date +%s%N; sleep 0.05; date
+%s%N'` with a result record (the command waits, 10 s at most, before its
last date until the sampler has seen its run, so that how many runs are
seen does not depend on the CPU the machine leaves the sampler), while a
sampler thread scans /proc every few
milliseconds for processes whose uid lies in the pool, and for each one
which run it belongs to (the airlock we started that it descends from; for
another airlock's run on this host, its nearest ancestor outside the pool).
It asserts:

  - every run exited 0 and its record has identity.slot, an integer in
    0..4093;
  - host side: no scan saw processes of two runs in one slot, confirmed by
    reading both again after the scan (each still alive, still in the
    slot); a run seen on the host is in the slot its record names; the
    sampler saw at least half of the runs and at some moment two or more
    runs at once (else it proves nothing);
  - records: no two runs with the same slot have overlapping command
    intervals (the command's first and last date, printed inside: the slot
    is surely held between them). The records' own started and wall_ms
    are compared too and any overlap printed, but not judged: "started" is
    taken before the sandbox is set up and wall_ms counts from the
    command's start, so that interval is not one the slot is known to be
    held over;
  - afterwards /run/airlock/ids holds no stale slot file of its runs (a
    decimal name whose owner line names an airlock this script started;
    one starting with '.' may be a temporary file): one with no lock on it
    in /proc/locks and no live process in its range (another airlock on
    this host may hold the slot again, and it says so with its lock; a
    killed run of another suite leaves its own file for gc).

Prints the runtime. Rootless there is no pool: skipped. Signals go only
to processes this script started, by pid. No network is used.
"""

import argparse
import json
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone

from harness import (IS_ROOT, Env, MarkedSuite, Skip, TempDir, expect, finish, new_marker,
                     pid_starttime, proc_read, start)
from run_tenants import IDS_DIR, POOL_SLOTS, lingering, slot_files, slot_of

# Each run's command lasts 50 ms and then until the sampler has seen the
# run (a file named after it in /seen, bound from the host), 10 s at most:
# how many runs the sampler sees must not depend on how much CPU the
# machine leaves it for its scans.
COMMAND = ["/bin/sh", "-c", "date +%s%N; /bin/sleep 0.05; i=0; "
           "while [ ! -e /seen/$AIRLOCK_RUN ] && [ $i -lt 200 ]; do /bin/sleep 0.05; "
           "i=$((i + 1)); done; date +%s%N"]
SCAN_EVERY = 0.003  # seconds between two scans of /proc

suite = MarkedSuite()
case = suite.case
OPTS = argparse.Namespace(runs=1000, parallel=8)


def state_and_parent(pid):
    """(state letter, parent pid) from /proc/PID/stat, None if it is gone."""
    stat = proc_read(pid, "stat")
    fields = stat.rsplit(b")", 1)[-1].split() if stat else []
    return (fields[0].decode(), int(fields[1])) if len(fields) > 1 else None


def parent(pid):
    sp = state_and_parent(pid)
    return sp[1] if sp else None


def uid_of(pid):
    try:
        return os.stat("/proc/%d" % pid).st_uid
    except OSError:
        return None


class Sampler(threading.Thread):
    """Scans /proc for processes in the pool until stop is set. The owner
    of /proc/PID is the process's euid (for a non-dumpable one in a user
    namespace, that namespace's root: the slot's base), so one stat a
    process finds them."""

    def __init__(self):
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.me = os.getpid()
        self.scans = 0
        self.seen = {}  # run key -> slots its processes were seen in
        self.max_live = 0  # most runs seen in one scan
        self.conflicts = []  # (slot, {run key: [pid]}) confirmed
        self.unconfirmed = 0  # two runs in one scan, not both still there after it
        self.zombies = 0  # most zombies seen in the pool in one scan (not judged)
        self.error = None
        self.seen_dir = None  # where to tell a run it was seen
        self.index = {}  # airlock pid -> the run's index (its file in seen_dir)

    def run_key(self, pid):
        """Which run a pool process belongs to: ("airlock", P, starttime)
        when it descends from P, an airlock we started; for another
        airlock's run, ("other", A, starttime) with A its nearest ancestor
        outside the pool (that run's airlock: its processes in the host pid
        namespace and in the sandbox's share it), or ("pidns", NS) for an
        orphan; None if it went away meanwhile."""
        p, outside = pid, None
        for _ in range(32):
            pp = parent(p)
            if pp is None:
                return None
            if pp == self.me:
                st = pid_starttime(p)
                return ("airlock", p, st) if st is not None else None
            if pp <= 1:
                break
            if outside is None and slot_of(uid_of(pp) or 0) is None:
                outside = pp
            p = pp
        if outside is not None:
            st = pid_starttime(outside)
            return ("other", outside, st) if st is not None else None
        try:
            return ("pidns", os.readlink("/proc/%d/ns/pid" % pid))
        except OSError:
            return None

    def scan(self):
        by_slot, zombies = {}, 0
        for n in os.listdir("/proc"):
            if not n.isdigit():
                continue
            pid = int(n)
            uid = uid_of(pid)
            slot = slot_of(uid) if uid is not None else None
            if slot is None:
                continue
            sp = state_and_parent(pid)
            if sp and sp[0] == "Z":
                # Not live: it holds nothing but its pid (and its user's
                # process count) until its parent reaps it.
                zombies += 1
                continue
            key = self.run_key(pid)
            if key is None:
                continue
            by_slot.setdefault(slot, {}).setdefault(key, []).append((pid, pid_starttime(pid)))
        live = set()
        for slot, runs in by_slot.items():
            live.update(runs)
            for key in runs:
                self.seen.setdefault(key, set()).add(slot)
                i = self.index.get(key[1]) if key[0] == "airlock" else None
                if i is not None and self.seen_dir:
                    open(os.path.join(self.seen_dir, str(i)), "w").close()
            if len(runs) < 2:
                continue
            # The scan is not atomic: one run may have ended and another
            # taken its slot while it went on. Confirm with both there now.
            still = {}
            for key, procs in runs.items():
                pids = [p for p, st in procs
                        if pid_starttime(p) == st and slot_of(uid_of(p) or 0) == slot
                        and (state_and_parent(p) or ("Z",))[0] != "Z"]
                if pids:
                    still[key] = pids
            if len(still) > 1:
                self.conflicts.append((slot, still))
            else:
                self.unconfirmed += 1
        self.max_live = max(self.max_live, len(live))
        self.zombies = max(self.zombies, zombies)

    def run(self):
        try:
            while not self.stop.is_set():
                self.scan()
                self.scans += 1
                time.sleep(SCAN_EVERY)
        except Exception as err:  # reported by the case, which then fails
            self.error = repr(err)


def epoch_ms(started):
    """A record's "started" (2026-12-01T23:27:15.833Z) as ms since the epoch."""
    t = datetime.strptime(started, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    return t.timestamp() * 1000


def overlaps(intervals):
    """[(slot, start, end, run index)] -> pairs of runs with one slot whose
    intervals overlap."""
    by_slot, found = {}, []
    for iv in intervals:
        by_slot.setdefault(iv[0], []).append(iv)
    for slot, ivs in by_slot.items():
        ivs.sort(key=lambda iv: iv[1])
        last = None  # the interval that ends last so far
        for iv in ivs:
            if last and iv[1] < last[2]:
                found.append((slot, last[3], iv[3]))
            if not last or iv[2] > last[2]:
                last = iv
    return found


@case
def slots_soak(e):
    """As root, N runs (default 1000), P at a time (default 8): no two runs
    that lived at the same time had the same slot, seen from the host
    (/proc) and from the records' identity.slot with the commands' own
    start and end times; every record has a slot; a run seen on the host
    is in the slot its record names; afterwards no slot file of ours is left in
    /run/airlock/ids."""
    if not IS_ROOT:
        raise Skip("not root: rootless there is no id pool")
    n, par = OPTS.runs, OPTS.parallel
    m = new_marker("soak-")
    sampler = Sampler()
    with TempDir() as d:
        sampler.seen_dir = os.path.join(d, "seen")
        os.mkdir(sampler.seen_dir)

        def one(i):
            rp = os.path.join(d, "r%d.json" % i)
            argv = e.argv(COMMAND, ["--env", "AIRLOCK_MARK=" + m, "--env", "AIRLOCK_RUN=%d" % i,
                                    "--ro", sampler.seen_dir + ":/seen", "--timeout", "20",
                                    "--result", rp], bind_probe=False)
            t0 = time.monotonic()
            p = start(argv)
            sampler.index[p.pid] = i
            key = ("airlock", p.pid, pid_starttime(p.pid))
            res = finish(p, argv, t0, 60)
            record = None
            if os.path.exists(rp):
                with open(rp) as f:
                    record = json.load(f)
            return res, record, key

        t0 = time.monotonic()
        sampler.start()
        try:
            with ThreadPoolExecutor(max_workers=par) as pool:
                results = list(pool.map(one, range(n)))
        finally:
            sampler.stop.set()
            sampler.join()
        took = time.monotonic() - t0

    bad = [(i, r) for i, (r, _, _) in enumerate(results) if r.rc != 0]
    expect(not bad, "%d of %d runs failed; the first:\n%s"
           % (len(bad), n, bad[0][1].describe() if bad else ""))
    slots, cmd_iv, rec_iv, no_slot = {}, [], [], []
    for i, (res, record, key) in enumerate(results):
        ident = (record or {}).get("identity")
        slot = ident.get("slot") if isinstance(ident, dict) else None
        if not isinstance(slot, int) or isinstance(slot, bool) or not 0 <= slot < POOL_SLOTS:
            no_slot.append((i, ident))
            continue
        slots[key] = slot
        times = res.text.split()
        expect(len(times) == 2 and all(t.isdigit() for t in times),
               "run %d did not print two dates" % i, res)
        cmd_iv.append((slot, int(times[0]), int(times[1]), i))
        start_ms = epoch_ms(record["started"])
        rec_iv.append((slot, start_ms, start_ms + record["wall_ms"], i))
    ours = {k: v for k, v in sampler.seen.items() if k[0] == "airlock"}
    used = set(slots.values())
    print("# %d runs, %d at a time: %.1f s (%.1f runs/s); %d scans of /proc (one every %.1f ms); "
          "%d runs seen on the host, at most %d at once, %d times two in one slot; %d slots used"
          % (n, par, took, n / took, sampler.scans, took * 1000 / max(sampler.scans, 1),
             len(ours), sampler.max_live, len(sampler.conflicts), len(used)), flush=True)
    rec_over = overlaps(rec_iv)
    if rec_over:
        print("# note: %d pairs of runs in one slot whose records' [started, started + wall_ms] "
              "overlap (not judged), e.g. %s" % (len(rec_over), rec_over[:3]), flush=True)
    if sampler.zombies:
        print("# note: up to %d zombies in the pool's uid range at once (not judged)"
              % sampler.zombies, flush=True)
    if sampler.unconfirmed:
        print("# note: %d scans saw two runs in one slot that were not both still there "
              "after the scan (a slot handed on during the scan)" % sampler.unconfirmed,
              flush=True)
    expect(sampler.error is None, "the sampler failed: %s" % sampler.error)
    expect(not no_slot, "%d of %d records have no identity.slot in 0..%d; e.g. run %d: "
           "identity %s" % (len(no_slot), n, POOL_SLOTS - 1, no_slot[0][0], no_slot[0][1])
           if no_slot else "")
    expect(not sampler.conflicts, "%d times two live runs were seen in one slot; the first: "
           "slot %d: %s" % (len(sampler.conflicts), sampler.conflicts[0][0],
                            sampler.conflicts[0][1]) if sampler.conflicts else "")
    over = overlaps(cmd_iv)
    expect(not over, "%d pairs of runs with one slot ran their commands at the same time; "
           "e.g. (slot, run, run) %s" % (len(over), over[:5]))
    wrong = {k: (v, slots.get(k)) for k, v in ours.items() if v != {slots.get(k)}}
    expect(not wrong, "runs seen on the host in slots other than their records': %s"
           % list(wrong.items())[:5])
    expect(len(ours) >= n // 2, "the sampler saw only %d of %d runs on the host: the host-side "
           "check proves little" % (len(ours), n))
    expect(sampler.max_live >= 2, "the sampler never saw two runs at once")
    left = lingering(used | slot_files())
    expect(not left, "stale slot files left in %s (no lock held, no live process in the "
           "range): %s" % (IDS_DIR, left[:20]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("airlock")
    ap.add_argument("probe")
    ap.add_argument("--runs", type=int, default=1000, help="runs in all (default 1000)")
    ap.add_argument("--parallel", type=int, default=8, help="runs at a time (default 8)")
    ap.parse_args(namespace=OPTS)
    env = Env(OPTS.airlock, OPTS.probe)
    if not os.access(env.airlock, os.X_OK):
        print("1..0 # SKIP airlock binary not found at %s" % env.airlock)
        sys.exit(0)
    sys.exit(suite.run(env))


if __name__ == "__main__":
    main()
