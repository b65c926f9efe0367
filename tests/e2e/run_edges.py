#!/usr/bin/python3
"""End-to-end tests of sharp edges a new user trips over (TAP): help for
each command, every bad --env-file line, duplicate mount points, copy-out
onto existing host files, rootless cgroup limits and --rw directories with
root-made subdirectories.

usage: run_edges.py AIRLOCK PROBE [CASE-SUBSTRING...]
"""

import json
import os
import shutil
import subprocess
import tempfile

from harness import (IS_ROOT, PROBE_IN, Skip, Suite, TempDir, ThrowawayUser, expect,
                     expect_one_error_line, expect_out, expect_rc, main, run_host,
                     write_file)

suite = Suite()
case = suite.case


# ---- command line ------------------------------------------------------------

@case
def help_command(e):
    """`airlock help CMD` prints CMD's own help (exit 0), the same as
    `airlock CMD --help`; `airlock help` alone the general help; an unknown
    CMD is refused naming it."""
    for cmd in (["run"], ["check"], ["verify"], ["gc"], ["token"], ["token", "mint"], ["mcp"]):
        want = run_host([e.airlock] + cmd + ["--help"])
        expect_rc(want, 0)
        got = run_host([e.airlock, "help"] + cmd)
        expect_rc(got, 0)
        expect(got.out == want.out and got.out,
               "airlock help %s differs from airlock %s --help" % (" ".join(cmd), " ".join(cmd)),
               got)
    res = run_host([e.airlock, "help", "run"])
    expect("--ro" in res.text and "--timeout" in res.text, "help run lacks run's options", res)
    general = run_host([e.airlock, "--help"])
    res = run_host([e.airlock, "help"])
    expect_rc(res, 0)
    expect(res.out == general.out, "airlock help is not the general help", res)
    res = run_host([e.airlock, "help", "nosuch"])
    expect_one_error_line(res, 125, "nosuch")


@case
def env_file_every_bad_line(e):
    """--env-file with three bad lines among good ones: exit 125 before
    anything runs, one stderr line per bad line, each naming FILE:LINE."""
    with TempDir() as d:
        f = write_file(os.path.join(d, "vars.env"),
                       "GOOD=1\nno equals here\n# comment\n\n9BAD=2\nOK_TOO=3\nsp ace=4\n")
        res = e.run(["/bin/true"], ["--env-file", f])
        expect_rc(res, 125)
        lines = res.errtext.splitlines()
        expect(len(lines) == 3, "expected 3 error lines, got %d" % len(lines), res)
        for line, n in zip(lines, (2, 5, 7)):
            expect(line.startswith("airlock: --env-file %s:%d: expected NAME=VALUE" % (f, n)),
                   "line %d not reported as such: %r" % (n, line), res)
        res = run_host([e.airlock, "check", "--json", "--env-file", f])
        expect_rc(res, 125)
        where = [x["where"] for x in json.loads(res.out)["errors"]]
        expect(where == ["--env-file %s:%d" % (f, n) for n in (2, 5, 7)],
               "check --json errors' where: %r" % where, res)


# ---- mounts ------------------------------------------------------------------

@case
def duplicate_mount_point(e):
    """Two mounts at one sandbox path are refused (125, "duplicate mount
    point" naming the path and both origins), whether both are flags, both
    are the file's, or two flags over the file's; never last-wins. One flag
    over the file's mount still replaces it."""
    with TempDir() as d:
        a, b = os.path.join(d, "a"), os.path.join(d, "b")
        for p, text in ((a, "A\n"), (b, "B\n")):
            os.mkdir(p)
            os.chmod(p, 0o755)
            write_file(os.path.join(p, "f"), text)
        res = e.run(["/bin/cat", "/x/f"], ["--ro", a + ":/x", "--rw", b + ":/x"])
        expect_one_error_line(res, 125, "duplicate mount point /x", "--ro %s:/x" % a,
                              "--rw %s:/x" % b)
        pol = write_file(os.path.join(d, "p.json"), json.dumps(
            {"version": 1, "filesystem": {"mounts": [{"host": a, "path": "/x"},
                                                     {"host": b, "path": "/x"}]}}))
        res = e.run(["/bin/cat", "/x/f"], ["--policy", pol])
        expect_one_error_line(res, 125, "duplicate mount point /x", "filesystem.mounts[0]",
                              "filesystem.mounts[1]")
        one = write_file(os.path.join(d, "one.json"), json.dumps(
            {"version": 1, "filesystem": {"mounts": [{"host": a, "path": "/x"}]}}))
        res = e.run(["/bin/cat", "/x/f"], ["--policy", one, "--ro", b + ":/x"])
        expect_out(res, "B\n")  # the documented override: one flag wins
        res = e.run(["/bin/cat", "/x/f"], ["--policy", one, "--ro", b + ":/x",
                                           "--ro", a + ":/x"])
        expect_one_error_line(res, 125, "duplicate mount point /x", "--ro %s:/x" % b,
                              "--ro %s:/x" % a)


# ---- copy-out onto existing host files ---------------------------------------

COPY_OUT_EXISTS = 122
MAKE_OUT = "mkdir -p o/sub && echo new > o/a.txt && echo newb > o/sub/b.txt && echo c > o/c.txt"


@case
def copy_out_existing_not_missed(e):
    """--copy-out into a host directory that already holds a file and a
    directory of those names: the command exits 0 but the run exits 122
    (record: exit_code 122, reason exited, existing_count 2), stderr names
    each left-behind name with its host path, the host files are
    unchanged and the new file is copied."""
    with TempDir() as d:
        out = os.path.join(d, "out")
        os.makedirs(os.path.join(out, "sub"))
        write_file(os.path.join(out, "a.txt"), "old\n")
        write_file(os.path.join(out, "sub", "b.txt"), "oldb\n")
        rec = os.path.join(d, "r.json")
        res = e.run(["/bin/sh", "-c", MAKE_OUT],
                    ["--copy-out", "/work/o:" + out, "--result", rec])
        expect_rc(res, COPY_OUT_EXISTS)
        lines = [x for x in res.errtext.splitlines() if x.startswith("airlock: copy-out: ")]
        expect(len(lines) == 2, "expected one line per name left behind", res)
        expect("/work/o/a.txt not copied: %s/a.txt exists on the host" % out in lines[0]
               or "/work/o/a.txt not copied: %s/a.txt exists on the host" % out in lines[1],
               "a.txt not named", res)
        expect(any("/work/o/sub not copied: %s/sub exists" % out in x for x in lines),
               "sub not named", res)
        expect(open(os.path.join(out, "a.txt")).read() == "old\n", "a.txt replaced", res)
        expect(open(os.path.join(out, "sub", "b.txt")).read() == "oldb\n", "sub merged", res)
        expect(open(os.path.join(out, "c.txt")).read() == "c\n", "c.txt not copied", res)
        with open(rec) as f:
            r = json.load(f)
        expect(r["exit_code"] == COPY_OUT_EXISTS and r["reason"] == "exited",
               "record: %s %s" % (r["exit_code"], r["reason"]), res)
        expect(r["copy_out"][0]["existing_count"] == 2, "existing_count", res)
        # A command that failed keeps its own status.
        res = e.run(["/bin/sh", "-c", MAKE_OUT + "; exit 3"], ["--copy-out", "/work/o:" + out])
        expect_rc(res, 3)


@case
def copy_out_replace(e):
    """--copy-out-replace replaces the caller's own regular files and merges
    into the caller's own directories (exit 0); a symbolic link (its target
    untouched), another user's file and a directory where a file comes are
    never replaced: skipped, named, exit 122."""
    with TempDir() as d:
        out = os.path.join(d, "out")
        os.makedirs(os.path.join(out, "sub"))
        write_file(os.path.join(out, "a.txt"), "old\n")
        write_file(os.path.join(out, "sub", "b.txt"), "oldb\n")
        res = e.run(["/bin/sh", "-c", MAKE_OUT],
                    ["--copy-out-replace", "--copy-out", "/work/o:" + out])
        expect_rc(res, 0)
        expect(open(os.path.join(out, "a.txt")).read() == "new\n", "a.txt not replaced", res)
        expect(open(os.path.join(out, "sub", "b.txt")).read() == "newb\n", "sub not merged",
               res)
        # Now a link, a directory and (as root) another user's file.
        target = write_file(os.path.join(d, "target"), "keep\n")
        os.unlink(os.path.join(out, "a.txt"))
        os.symlink(target, os.path.join(out, "a.txt"))
        os.unlink(os.path.join(out, "c.txt"))
        os.mkdir(os.path.join(out, "c.txt"))
        want = 2
        if IS_ROOT:
            os.chown(os.path.join(out, "sub", "b.txt"), 54321, 54321)
            want = 3
        res = e.run(["/bin/sh", "-c", MAKE_OUT],
                    ["--copy-out-replace", "--copy-out", "/work/o:" + out])
        expect_rc(res, COPY_OUT_EXISTS)
        lines = [x for x in res.errtext.splitlines() if x.startswith("airlock: copy-out: ")]
        expect(len(lines) == want, "expected %d lines naming what was kept" % want, res)
        expect(all("not a regular file of yours" in x for x in lines), "why not said", res)
        expect(os.path.islink(os.path.join(out, "a.txt")), "the link was replaced", res)
        expect(open(target).read() == "keep\n", "the link's target was written", res)
        expect(os.path.isdir(os.path.join(out, "c.txt")), "the directory was replaced", res)
        if IS_ROOT:
            expect(open(os.path.join(out, "sub", "b.txt")).read() == "newb\n",
                   "another user's file was replaced", res)
            expect(os.stat(os.path.join(out, "sub", "b.txt")).st_uid == 54321,
                   "another user's file was replaced", res)


# ---- rootless ----------------------------------------------------------------

def rootless_copy(e, d):
    """airlock and the probe where a throwaway user can run them."""
    os.chmod(d, 0o755)
    airlock = shutil.copy(e.airlock, os.path.join(d, "airlock"))
    probe = shutil.copy(e.probe, os.path.join(d, "probe"))
    os.chmod(airlock, 0o755)
    os.chmod(probe, 0o755)
    return airlock, probe


def run_as(e, user, d, airlock, probe, cmd, opts):
    return e.run(cmd, opts, user=user, cwd=d, airlock=airlock, probe=probe,
                 env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})


@case
def rootless_cgroup_limit_named(e):
    """Rootless, where no cgroup can be made, an explicit --memory and
    --pids refuse the run (125) with one line naming each limit with its
    value and the ways to get it: systemd --user delegation, running as
    root, or dropping the flag."""
    with ThrowawayUser() as u, TempDir() as d:
        airlock, probe = rootless_copy(e, d)
        res = run_as(e, u.name, d, airlock, probe, ["/bin/true"],
                     ["--memory", "64M", "--pids", "20"])
        if res.rc == 0:
            raise Skip("this host gives an ordinary user a cgroup")
        expect_one_error_line(res, 125, "--memory 64M", "--pids 20",
                              "systemd-run --user --scope -p Delegate=yes", "as root",
                              "drop --memory, --pids")


@case
def rootless_rw_foreign_subdir_refused(e):
    """Rootless, a --rw directory of the caller's holding a subdirectory
    root made is refused up front (125), naming the subdirectory and its
    owner, instead of showing it as an unwritable nobody's; the same tree
    with the subdirectory the caller's runs and writes there."""
    with ThrowawayUser() as u, TempDir() as d:
        airlock, probe = rootless_copy(e, d)
        rw = os.path.join(d, "rw")
        os.makedirs(os.path.join(rw, "mine", "build"))
        for p in (rw, os.path.join(rw, "mine")):
            os.chown(p, u.uid, -1)
        os.chmod(os.path.join(rw, "mine", "build"), 0o755)  # root's
        res = run_as(e, u.name, d, airlock, probe,
                     [PROBE_IN, "write", "/out/mine/build/x", "x\n"], ["--rw", rw + ":/out"])
        expect_one_error_line(res, 125, "%s/mine/build belongs to uid 0 (root)" % rw,
                              "rootless", "chown")
        expect(not os.path.exists(os.path.join(rw, "mine", "build", "x")), "written", res)
        os.chown(os.path.join(rw, "mine", "build"), u.uid, -1)
        res = run_as(e, u.name, d, airlock, probe,
                     [PROBE_IN, "write", "/out/mine/build/x", "x\n"], ["--rw", rw + ":/out"])
        expect_out(res, "ok\n")
        expect(os.stat(os.path.join(rw, "mine", "build", "x")).st_uid == u.uid, "owner", res)


if __name__ == "__main__":
    main(suite)
