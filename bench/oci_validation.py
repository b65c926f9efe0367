#!/usr/bin/python3
"""Run the OCI runtime-tools validation programs against OCI runtimes and
count what passes.

usage: oci_validation.py [--json FILE] [--tap-dir DIR] [--timeout S]
                         [--only SUBSTR]... BINDIR NAME=RUNTIME [NAME=RUNTIME...]

BINDIR holds the validation programs built by hand from
github.com/opencontainers/runtime-tools (validation/*/NAME.go built as
NAME.t; its September 2023 commit builds with Debian's Go 1.19 from its own
vendor tree), beside `runtimetest` (./cmd/runtimetest, static) and the
repository's rootfs-amd64.tar.gz, which the programs take from their
working directory. Nothing of that suite is part of airlock.

Each program runs once per runtime, as root, with RUNTIME=PATH (the
variable the suite reads), under a timeout, in a fresh working directory
holding copies of runtimetest and the rootfs tarball, and with TMPDIR there
too, so that the bundles it makes are below it. After each program: the
containers it left in the runtime (new ids in `RUNTIME list --quiet`,
where the runtime has `list`, whose bundle is below that directory: never
another user's) are deleted with `delete --force`, mounts
below the directory are unmounted, the directory is removed, and the
suite's fixed cgroup `/cgrouptest` is removed (empty, deepest first) in
every hierarchy where the program left it (crun's failed creates leave it
in pids here, which airlock, refusing a cgroupsPath that exists, would
meet in the next runtime's turn).

Its TAP output is parsed: "ok" / "not ok" lines, a "# SKIP" directive
counted as a skip, "# TODO" as a todo. A program passes cleanly when it
exits 0 within the timeout, has a plan, and every test point it planned is
there and none is "not ok", and it planned at least one; a program that
exits 0 with the plan 1..0 (the hook programs do so here) is counted
apart, as having run no test. Printed: one line per program and runtime, and
per runtime the programs passed cleanly and the ok / not ok / skip totals;
--json FILE writes all of it, with every failing test point's text;
--tap-dir DIR keeps each program's whole output (TAP and the program's own
messages) as DIR/NAME/PROGRAM.tap.
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

TAP_LINE = re.compile(r"^(not ok|ok)\b\s*(\d+)?\s*-?\s*(.*)$")
PLAN = re.compile(r"^1\.\.(\d+)")


def parse_tap(text):
    """{plan, ok, not_ok, skip, todo, bailed, failures: [line]} of TAP text."""
    res = {"plan": None, "ok": 0, "not_ok": 0, "skip": 0, "todo": 0, "bailed": False,
           "failures": []}
    for line in text.splitlines():
        line = line.rstrip()
        m = PLAN.match(line)
        if m:
            res["plan"] = int(m.group(1))
            continue
        if line.startswith("Bail out!"):
            res["bailed"] = True
            continue
        m = TAP_LINE.match(line)
        if not m:
            continue
        directive = m.group(3).split("#", 1)[1].strip().lower() if "#" in m.group(3) else ""
        if directive.startswith("skip"):
            res["skip"] += 1
        elif directive.startswith("todo"):
            res["todo"] += 1
        elif m.group(1) == "ok":
            res["ok"] += 1
        else:
            res["not_ok"] += 1
            res["failures"].append(line)
    return res


def runtime_list(runtime):
    """The container ids `RUNTIME list --quiet` shows, or None without list."""
    try:
        r = subprocess.run([runtime, "list", "--quiet"], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return set(r.stdout.decode().split()) if r.returncode == 0 else None


def bundle_below(runtime, cid, path):
    """Container cid's bundle (`RUNTIME state`) is path or below it."""
    try:
        r = subprocess.run([runtime, "state", cid], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, timeout=30)
        bundle = json.loads(r.stdout).get("bundle", "") if r.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError, ValueError):
        return False
    return bundle == path or bundle.startswith(path + "/")


def unmount_below(path):
    """Unmount (lazily, deepest first) every mount at or below path."""
    with open("/proc/self/mountinfo") as f:
        points = [l.split()[4] for l in f]
    path = os.path.realpath(path)
    below = [p for p in points if p == path or p.startswith(path + "/")]
    for p in sorted(below, key=len, reverse=True):
        subprocess.run(["umount", "-l", p], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=30)
    return below


# The suite's programs give the fixed linux.cgroupsPath /cgrouptest (and
# relative ones below the runtime's own cgroup); a runtime whose create
# fails may leave the directory (crun 1.8 here, in pids), and the next
# runtime then meets a cgroup that exists already (which airlock refuses).
SUITE_CGROUP = "cgrouptest"


def suite_cgroups():
    """The suite's fixed cgroup directories that exist now, in every
    hierarchy."""
    root = "/sys/fs/cgroup"
    found = set()
    for h in os.listdir(root):
        d = os.path.join(root, h, SUITE_CGROUP)
        if os.path.isdir(d):
            found.add(d)
    return found


def remove_cgroups(dirs):
    """Remove the (empty) cgroup directories dirs and what is below them,
    deepest first: a cgroup that still holds a process stays."""
    left = []
    for top in dirs:
        below = [os.path.join(w, d) for w, ds, _ in os.walk(top) for d in ds]
        for d in sorted(below, key=len, reverse=True) + [top]:
            try:
                os.rmdir(d)
            except OSError:
                left.append(d)
    return left


def run_program(prog, runtime, bindir, timeout, tap_path=None):
    """One validation program against one runtime: its parsed TAP, exit
    code, time and what had to be cleaned up after it."""
    work = tempfile.mkdtemp(prefix="al-oci-validation-")
    # Copies, not links: the programs copy runtimetest into each bundle as
    # it is, and a link would point outside the container's root.
    for name in ("runtimetest", "rootfs-amd64.tar.gz"):
        shutil.copy2(os.path.join(bindir, name), os.path.join(work, name))
    before = runtime_list(runtime)
    cgroups_before = suite_cgroups()
    env = dict(os.environ, RUNTIME=runtime, TMPDIR=work)
    t0 = time.monotonic()
    p = subprocess.Popen([os.path.join(bindir, prog)], cwd=work, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL, start_new_session=True)
    timed_out = False
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(p.pid, signal.SIGKILL)  # the program's own session: it and its children
        out, _ = p.communicate()
    elapsed = time.monotonic() - t0
    text = out.decode(errors="replace")
    if tap_path:
        with open(tap_path, "w") as f:
            f.write(text)
    res = parse_tap(text)
    leftover = []
    after = runtime_list(runtime)
    if before is not None and after is not None:
        for cid in sorted(after - before):
            # Only the program's own: its bundle is below work (an engine's
            # containers in the same runtime root are none of ours).
            if not bundle_below(runtime, cid, work):
                continue
            leftover.append(cid)
            subprocess.run([runtime, "delete", "--force", cid], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=30)
    mounts = unmount_below(work)
    shutil.rmtree(work, ignore_errors=True)
    cgroups = sorted(suite_cgroups() - cgroups_before)
    remove_cgroups(cgroups)
    planned = res["plan"] if res["plan"] is not None else -1
    seen = res["ok"] + res["not_ok"] + res["skip"] + res["todo"]
    res.update(program=prog, exit=p.returncode, timed_out=timed_out, seconds=round(elapsed, 2),
               clean=(p.returncode == 0 and not timed_out and not res["bailed"]
                      and res["not_ok"] == 0 and planned == seen and planned > 0),
               empty=(p.returncode == 0 and planned == 0 and seen == 0),
               containers_left=leftover, mounts_left=len(mounts), cgroups_left=cgroups,
               output_tail=text[-2000:] if p.returncode != 0 or res["not_ok"] else "")
    return res


def summary(results):
    return {"programs": len(results), "clean": sum(r["clean"] for r in results),
            "empty": sum(r["empty"] for r in results),
            "ok": sum(r["ok"] for r in results), "not_ok": sum(r["not_ok"] for r in results),
            "skip": sum(r["skip"] for r in results), "todo": sum(r["todo"] for r in results),
            "timed_out": sum(r["timed_out"] for r in results),
            "seconds": round(sum(r["seconds"] for r in results), 1)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("bindir")
    ap.add_argument("runtimes", nargs="+", metavar="NAME=RUNTIME")
    ap.add_argument("--json", metavar="FILE", help="write the results as JSON to FILE")
    ap.add_argument("--tap-dir", metavar="DIR",
                    help="keep each program's whole output as DIR/NAME/PROGRAM.tap")
    ap.add_argument("--timeout", type=float, default=120, help="seconds per program (120)")
    ap.add_argument("--only", action="append", default=[], metavar="SUBSTR",
                    help="run only the programs whose name contains SUBSTR (repeatable)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        ap.error("the validation programs create containers: run as root")
    bindir = os.path.abspath(args.bindir)
    for need in ("runtimetest", "rootfs-amd64.tar.gz"):
        if not os.path.isfile(os.path.join(bindir, need)):
            ap.error("%s: no %s (build runtime-tools' cmd/runtimetest there and copy the "
                     "repository's rootfs-amd64.tar.gz beside it)" % (bindir, need))
    programs = sorted(n for n in os.listdir(bindir) if n.endswith(".t")
                      and (not args.only or any(o in n for o in args.only)))
    if not programs:
        ap.error("%s: no validation programs (*.t)" % bindir)
    runtimes = []
    for spec in args.runtimes:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            ap.error("runtime %r: expected NAME=PATH, e.g. runc=/usr/sbin/runc" % spec)
        path = shutil.which(path) or path
        if not os.access(path, os.X_OK):
            ap.error("runtime %s: %s is not an executable" % (name, path))
        runtimes.append((name, os.path.abspath(path)))
    results = {name: [] for name, _ in runtimes}
    if args.tap_dir:
        for name, _ in runtimes:
            os.makedirs(os.path.join(args.tap_dir, name), exist_ok=True)
    # Interleaved: each program against every runtime before the next one.
    for prog in programs:
        for name, path in runtimes:
            tap = os.path.join(args.tap_dir, name, prog + ".tap") if args.tap_dir else None
            r = run_program(prog, path, bindir, args.timeout, tap)
            results[name].append(r)
            print("%-8s %-40s %-5s ok %2d  not ok %2d  skip %2d%s%s  (%.1fs)"
                  % (name, prog, "CLEAN" if r["clean"] else "empty" if r["empty"] else "fail",
                     r["ok"], r["not_ok"],
                     r["skip"], "  TIMEOUT" if r["timed_out"] else "",
                     "  left %d container(s)" % len(r["containers_left"])
                     if r["containers_left"] else "", r["seconds"]), flush=True)
    print()
    sums = {name: summary(rs) for name, rs in results.items()}
    for name, path in runtimes:
        s = sums[name]
        print("%s (%s): %d of %d programs clean (%d more ran no test); TAP ok %d, not ok %d,"
              " skip %d, todo %d; %d timed out; %.0fs"
              % (name, path, s["clean"], s["programs"], s["empty"], s["ok"], s["not_ok"],
                 s["skip"], s["todo"], s["timed_out"], s["seconds"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"bindir": bindir, "runtimes": dict(runtimes), "summary": sums,
                       "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
