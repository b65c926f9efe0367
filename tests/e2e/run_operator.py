#!/usr/bin/python3
"""End-to-end tests of the operator policy (TAP): bounds every run is held to.

usage: run_operator.py AIRLOCK PROBE [CASE-SUBSTRING...]

Each case writes an operator policy into a temp dir of its own (root-owned,
not writable by others, as airlock requires when it runs as root), runs the
real binary against it with --operator-policy or $AIRLOCK_OPERATOR_POLICY,
and judges from outside: the exit code, stderr's lines, the result record
and the audit stream. No network is used: egress rules are only checked,
never connected to.
"""

import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from harness import (PROBE_IN, Skip, Suite, TempDir, expect, expect_rc, kill_pid, main,
                     run_host, wait_for, write_file)

STANDIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "decider_standin.py")

suite = Suite()
case = suite.case


def operator_doc(jobs, probe_dir, **profile):
    """A default profile reading jobs and the probe's directory, writing
    jobs/out, never jobs/keys; egress *.example.com:443 and one forced
    rule; memory at most 1G (default 256M), pids at most 64, timeout at
    most 120s."""
    base = {
        "filesystem": {"ro": [jobs, probe_dir], "rw": [os.path.join(jobs, "out")],
                       "never": [os.path.join(jobs, "keys")]},
        "network": {"allow": ["*.example.com:443"], "always": ["telemetry.example.com:443"]},
        "limits": {"memory": {"max": "1G", "default": "256M"}, "pids": {"max": 64},
                   "timeout": {"max": "120s"}},
    }
    base.update(profile)
    return {"version": 1, "profiles": {"default": base,
                                       "wide": {"filesystem": {"ro": [jobs, probe_dir]},
                                                "limits": {"memory": {"max": "2G"}}}}}


class Setup:
    """A temp dir with jobs/ (a.csv, keys/k, out/) and an operator policy."""

    def __init__(self, env, doc=None, **profile):
        self.env = env
        self.tmp = TempDir()
        self.doc = doc
        self.profile = profile

    def __enter__(self):
        d = self.tmp.__enter__()
        self.dir = d
        self.jobs = os.path.join(d, "jobs")
        os.makedirs(os.path.join(self.jobs, "keys"))
        os.makedirs(os.path.join(self.jobs, "out"))
        os.makedirs(os.path.join(self.jobs, "data"))
        write_file(os.path.join(self.jobs, "a.csv"), "region,sales\nnorth,1\n")
        write_file(os.path.join(self.jobs, "keys", "k"), "not-for-tasks\n")
        doc = self.doc or operator_doc(self.jobs, os.path.dirname(self.env.probe),
                                       **self.profile)
        self.op = write_file(os.path.join(d, "operator.json"), json.dumps(doc, indent=1))
        return self

    def __exit__(self, *exc):
        self.tmp.__exit__(*exc)

    def sha256(self):
        with open(self.op, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()


def no_operator_env():
    env = dict(os.environ)
    env.pop("AIRLOCK_OPERATOR_POLICY", None)
    return env


def refusals(res):
    return [l for l in res.errtext.splitlines() if l.startswith("airlock: refused: ")]


@case
def three_bounds_refused(e):
    """A run whose flags break three bounds (memory over the ceiling, a
    host path outside every allowed prefix, an egress rule outside the
    operator's) exits 125 with exactly those three reasons, each naming
    the flag, the value asked and the operator file with the bound's JSON
    path; nothing runs: the record says "refused" and lists them, and the
    audit has one policy.refused event and no run.start."""
    with Setup(e) as s:
        rec, audit = os.path.join(s.dir, "r.json"), os.path.join(s.dir, "a.jsonl")
        res = e.probe_run("id", opts=["--operator-policy", s.op, "--memory", "2G",
                                      "--ro", "/etc/hostname:/input/h",
                                      "--allow", "files.evil.test:443",
                                      "--result", rec, "--audit", audit])
        expect_rc(res, 125)
        lines = refusals(res)
        expect(len(lines) == 3, "expected three refusals, got %d" % len(lines), res)
        want = [("--memory 2G", "over the ceiling 1G", "profiles.default.limits.memory.max"),
                ("--ro /etc/hostname:/input/h", "/etc/hostname", "profiles.default.filesystem.ro"),
                ("--allow files.evil.test:443", "*.example.com:443",
                 "profiles.default.network.allow")]
        for flag, bound, path in want:
            hit = [l for l in lines if flag in l and bound in l and s.op in l and path in l]
            expect(hit, "no refusal names %r, %r and %s" % (flag, bound, path), res)
        expect("uid=" not in res.text, "the probe ran", res)
        with open(rec) as f:
            r = json.load(f)
        expect(r["reason"] == "refused" and r["exit_code"] == 125
               and len(r["policy"]["refused"]) == 3
               and r["policy"]["operator_policy"]["sha256"] == s.sha256(),
               "record: %r" % r, res)
        events = [json.loads(l) for l in open(audit)]
        kinds = [ev["event"] for ev in events]
        expect(kinds == ["policy.refused"], "audit events: %r" % kinds, res)
        expect(len(events[0]["reasons"]) == 3 and events[0]["profile"] == "default",
               "policy.refused: %r" % events[0], res)


@case
def within_bounds_runs(e):
    """The same operator policy and a request within it runs exactly as
    asked: the mount is there, the limit the task left out is the
    profile's default (memory 256M in the record), and run.start and the
    record name the profile and the operator file's sha256."""
    with Setup(e) as s:
        rec, audit = os.path.join(s.dir, "r.json"), os.path.join(s.dir, "a.jsonl")
        res = e.run(["/bin/cat", "/input/a.csv"],
                    opts=["--operator-policy", s.op, "--timeout", "30",
                          "--ro", os.path.join(s.jobs, "a.csv") + ":/input/a.csv",
                          "--allow", "api.example.com:443", "--result", rec, "--audit", audit])
        expect_rc(res, 0)
        expect(res.text == "region,sales\nnorth,1\n", "the mount was not shown", res)
        with open(rec) as f:
            r = json.load(f)
        expect(r["limits"]["memory_bytes"] == 256 << 20, "memory: %r" % r["limits"], res)
        expect(r["limits"]["timeout_ms"] == 30000, "timeout: %r" % r["limits"], res)
        expect(r["operator_policy"] == {"file": s.op, "sha256": s.sha256(),
                                        "profile": "default"}, "record: %r" % r, res)
        start = [json.loads(l) for l in open(audit)][0]
        expect(start["event"] == "run.start" and start["profile"] == "default"
               and start["operator_policy"]["sha256"] == s.sha256()
               and "telemetry.example.com:443" in start["allow"]
               and "api.example.com:443" in start["allow"], "run.start: %r" % start, res)


@case
def check_explain_origins(e):
    """check --explain says where each value came from: a limit the task
    set (task), one it left out (the profile's default value), one whose built-in
    default is over the ceiling (operator ceiling), the operator's forced
    rule (operator forced), the task's rule with the operator rule it lies
    within; --json gives the same as data."""
    with Setup(e) as s:
        opts = ["check", "--operator-policy", s.op, "--explain", "--timeout", "30",
                "--allow", "api.example.com:443"]
        res = run_host([e.airlock] + opts, env=no_operator_env())
        expect_rc(res, 0)
        lines = res.text.splitlines()

        def line(what):
            hit = [l for l in lines if l.strip().startswith(what + " ")]
            expect(hit, "no decision line for %s" % what, res)
            return hit[0]
        expect("task (--timeout)" in line("limits.timeout"), "timeout origin", res)
        expect("the profile's default value" in line("limits.memory")
               and "256M" in line("limits.memory")
               and "profiles.default.limits.memory.default" in line("limits.memory"),
               "memory origin", res)
        expect("operator ceiling" in line("limits.pids") and " 64 " in line("limits.pids"),
               "pids origin", res)
        expect("operator forced" in line("network.allow telemetry.example.com:443"),
               "forced rule", res)
        expect("*.example.com:443" in line("network.allow api.example.com:443"),
               "the rule it lies within", res)
        res = run_host([e.airlock] + opts + ["--json"], env=no_operator_env())
        expect_rc(res, 0)
        doc = json.loads(res.text)
        dec = {d["what"]: d for d in doc["operator_policy"]["decisions"]}
        expect(dec["limits.memory"]["from"] == "the profile's default value"
               and dec["limits.timeout"]["from"] == "task"
               and dec["limits.timeout"]["task"] == "--timeout"
               and dec["limits.pids"]["from"] == "operator ceiling"
               and dec["network.allow telemetry.example.com:443"]["from"] == "operator forced",
               "decisions: %r" % dec, res)
        expect(doc["operator_policy"]["profile"] == "default"
               and doc["operator_policy"]["operator_policy"]["sha256"] == s.sha256(),
               "operator_policy: %r" % doc["operator_policy"], res)


@case
def unsafe_operator_file_refused(e):
    """As root the operator file must be root's and writable by no one
    else, reached without a link: mode 0666, a group-writable directory
    above it, a file owned by another user and a symbolic link are each
    refused with one line naming the file and what is wrong."""
    if os.geteuid() != 0:
        raise Skip("needs root (the ownership check applies to root's runs)")
    with Setup(e) as s:
        argv = [e.airlock, "check", "--operator-policy", s.op]
        os.chmod(s.op, 0o666)
        res = run_host(argv)
        expect_rc(res, 125)
        expect(s.op in res.errtext and "0666" in res.errtext, "mode not named", res)
        os.chmod(s.op, 0o644)
        os.chmod(s.dir, 0o775)
        res = run_host(argv)
        expect_rc(res, 125)
        expect(s.dir in res.errtext and "0775" in res.errtext, "directory not named", res)
        os.chmod(s.dir, 0o755)
        os.chown(s.op, 65534, 65534)
        res = run_host(argv)
        expect_rc(res, 125)
        expect("uid 65534" in res.errtext, "owner not named", res)
        os.chown(s.op, 0, 0)
        link = os.path.join(s.dir, "link.json")
        os.symlink(s.op, link)
        res = run_host([e.airlock, "check", "--operator-policy", link])
        expect_rc(res, 125)
        expect("symbolic link" in res.errtext, "link not refused", res)
        res = run_host(argv)
        expect_rc(res, 0)


@case
def lookup_order_and_profiles(e):
    """$AIRLOCK_OPERATOR_POLICY is used when no flag names a file, and the
    flag wins over it; --profile picks a profile (wide allows 2G), an
    unknown one is refused naming the profiles there are, and --profile
    with no operator policy at all is an error."""
    with Setup(e) as s:
        env = no_operator_env()
        env["AIRLOCK_OPERATOR_POLICY"] = s.op
        res = run_host([e.airlock, "check", "--memory", "2G"], env=env)
        expect_rc(res, 125)
        expect(len(refusals(res)) == 1 and "--memory 2G" in res.errtext, "env file not used",
               res)
        res = run_host([e.airlock, "check", "--memory", "2G", "--profile", "wide"], env=env)
        expect_rc(res, 0)
        expect('the profile named "wide"' in res.text, "profile not named", res)
        res = run_host([e.airlock, "check", "--profile", "nope"], env=env)
        expect_rc(res, 125)
        expect("nope" in res.errtext and "default, wide" in res.errtext,
               "unknown profile", res)
        other = write_file(os.path.join(s.dir, "other.json"),
                           json.dumps({"version": 1, "profiles": {"default": {}}}))
        res = run_host([e.airlock, "check", "--operator-policy", other, "--memory", "2G"],
                       env=env)
        expect_rc(res, 125)
        expect(other in res.errtext and s.op in res.errtext, "the flag replaced $AIRLOCK_"
               "OPERATOR_POLICY", res)
        env.pop("AIRLOCK_OPERATOR_POLICY")
        if os.path.exists("/etc/airlock/operator.json"):
            raise Skip("this machine has /etc/airlock/operator.json")
        res = run_host([e.airlock, "check", "--profile", "wide"], env=env)
        expect_rc(res, 125)
        expect("no operator policy" in res.errtext, "profile without a policy", res)
        res = run_host([e.airlock, "check"], env=env)
        expect_rc(res, 0)
        expect("operator policy: none (the run is unbounded" in res.text, "unbounded line", res)


def machine_file(argv, opdir):
    """argv as it runs on a machine whose /etc/airlock is opdir (so
    /etc/airlock/operator.json is opdir's operator.json): in a mount
    namespace of its own, /etc is an overlay of the host's with an airlock/
    directory added, and opdir is bound there. The host's /etc is never
    changed, and the mounts go with the namespace."""
    if os.path.exists("/etc/airlock/operator.json"):
        raise Skip("this machine has /etc/airlock/operator.json")
    if os.geteuid() != 0:
        raise Skip("needs root (a mount namespace with an overlay over /etc)")
    import tempfile
    layer = tempfile.mkdtemp(dir=os.path.dirname(opdir), prefix="layer-")
    os.makedirs(os.path.join(layer, "upper", "airlock"))
    os.makedirs(os.path.join(layer, "work"))
    script = ('mount -t overlay overlay -o lowerdir=/etc,upperdir="$1"/upper,'
              'workdir="$1"/work /etc && mount --bind "$2" /etc/airlock && shift 2 && '
              'exec "$@"')
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh",
            layer, opdir] + list(argv)


class Sources:
    """Two directories, each with an operator policy: the operator's
    (op/operator.json, a hard link to it, op/same.json, and memory at most
    1G) and another, looser one (other/operator.json, memory 4G); both let
    a task read the probe's directory."""

    def __init__(self, e):
        self.probe_dir = os.path.dirname(e.probe)

    def __enter__(self):
        self.tmp = TempDir()
        d = self.tmp.__enter__()
        self.opdir, self.otherdir = os.path.join(d, "op"), os.path.join(d, "other")
        os.mkdir(self.opdir, 0o755)
        os.mkdir(self.otherdir, 0o755)
        fs = {"ro": [self.probe_dir]}
        strict = {"version": 1, "profiles": {"default": {"filesystem": fs, "limits": {
            "memory": {"max": "1G"}}}}}
        loose = {"version": 1, "profiles": {"default": {"filesystem": fs, "limits": {
            "memory": {"max": "4G"}}}}}
        self.op = write_file(os.path.join(self.opdir, "operator.json"), json.dumps(strict))
        self.same = os.path.join(self.opdir, "same.json")
        os.link(self.op, self.same)
        self.other = write_file(os.path.join(self.otherdir, "operator.json"),
                                json.dumps(loose))
        return self

    def __exit__(self, *exc):
        self.tmp.__exit__(*exc)


def source_pair(e, run, operator_name, other_name, refused):
    """run(name) runs a task with the operator's bounds and name given the
    other way; refused: the run exits 125 with one line naming both files
    and nothing ran; else it runs (exit 0) under the operator's bounds."""
    res = run(other_name)
    if refused:
        expect_rc(res, 125)
        lines = [l for l in res.errtext.splitlines() if l.startswith("airlock: ")]
        expect(len(lines) == 1 and other_name in lines[0] and operator_name in lines[0],
               "not one line naming %s and %s" % (other_name, operator_name), res)
        expect("uid=" not in res.text, "the probe ran", res)
    else:
        expect_rc(res, 0)
        expect("uid=" in res.text, "the probe did not run", res)


@case
def operator_source_not_replaced(e):
    """With the operator's bounds in $AIRLOCK_OPERATOR_POLICY, a task's
    --operator-policy naming another (looser) file is refused with one
    line naming both; the same file again (a hard link: compared by device
    and inode, not by name) runs."""
    with Sources(e) as s:
        env = no_operator_env()
        env["AIRLOCK_OPERATOR_POLICY"] = s.op

        def run(name):
            return e.probe_run("id", opts=["--operator-policy", name, "--memory", "512M"],
                               env=env)
        source_pair(e, run, s.op, s.other, True)
        source_pair(e, run, s.op, s.same, False)
        source_pair(e, run, s.op, s.op, False)


@case
def machine_file_not_replaced(e):
    """With /etc/airlock/operator.json (in a mount namespace of the test's
    own), --operator-policy or $AIRLOCK_OPERATOR_POLICY naming another file
    is refused with one line naming both; naming the same file by another
    name (a hard link) runs."""
    with Sources(e) as s:
        machine = "/etc/airlock/operator.json"
        same = "/etc/airlock/same.json"
        for how in ("flag", "env"):
            def run(name, how=how):
                env = no_operator_env()
                opts = ["--memory", "512M"]
                if how == "env":
                    env["AIRLOCK_OPERATOR_POLICY"] = name
                else:
                    opts = ["--operator-policy", name] + opts
                argv = e.argv([PROBE_IN, "id"], opts)
                return run_host(machine_file(argv, s.opdir), env=env)
            source_pair(e, run, machine, s.other, True)
            source_pair(e, run, machine, same, False)
            res = run(s.same)  # the host's name of the same file
            expect_rc(res, 0)


@case
def linked_file_under_never_refused(e):
    """A profile reads jobs/ and never allows home/: a hard link in jobs/
    to home/.netrc, shown with --ro or copied in with --copy-in, is refused
    (its other names cannot be checked), the message saying why and how to
    allow it, and its contents never reach the sandbox; a file with one
    link runs; with "linked_files": true the linked file runs."""
    with TempDir() as d:
        jobs, home = os.path.join(d, "jobs"), os.path.join(d, "home")
        os.mkdir(jobs, 0o755)
        os.mkdir(home, 0o755)
        netrc = write_file(os.path.join(home, ".netrc"), "machine x password hunter2-netrc\n")
        link = os.path.join(jobs, "notes.txt")
        os.link(netrc, link)
        single = write_file(os.path.join(jobs, "a.csv"), "region,sales\n")
        probe_dir = os.path.dirname(e.probe)

        def op(linked):
            fs = {"ro": [jobs, probe_dir], "never": [home]}
            if linked is not None:
                fs["linked_files"] = linked
            return write_file(os.path.join(d, "op.json"), json.dumps(
                {"version": 1, "profiles": {"default": {"filesystem": fs}}}))
        for opts, cmd in ((["--ro", link + ":/input/n"], ["/bin/cat", "/input/n"]),
                          (["--copy-in", link + ":/work/n"], ["/bin/cat", "/work/n"])):
            for linked in (None, False):
                res = e.run(cmd, opts=["--operator-policy", op(linked)] + opts,
                            env=no_operator_env())
                expect_rc(res, 125)
                lines = refusals(res)
                expect(len(lines) == 1 and link in lines[0] and "2 hard links" in lines[0]
                       and "linked_files" in lines[0] and "cannot be checked" in lines[0],
                       "linked file not refused as such: %r" % lines, res)
                expect("hunter2" not in res.text, "the never file's contents were read", res)
            res = e.run(cmd, opts=["--operator-policy", op(True)] + opts,
                        env=no_operator_env())
            expect_rc(res, 0)
            expect("hunter2-netrc" in res.text, "linked_files: true did not allow it", res)
        res = e.run(["/bin/cat", "/input/a"], opts=["--operator-policy", op(None), "--ro",
                                                    single + ":/input/a"],
                    env=no_operator_env())
        expect_rc(res, 0)
        expect("region,sales" in res.text, "a file with one link did not run", res)
        bad = write_file(os.path.join(d, "bad.json"), json.dumps(
            {"version": 1, "profiles": {"default": {"filesystem": {"linked_files": "yes"}}}}))
        res = run_host([e.airlock, "check", "--operator-policy", bad], env=no_operator_env())
        expect_rc(res, 125)
        expect("profiles.default.filesystem.linked_files" in res.errtext,
               "a non-boolean linked_files not refused at its path", res)


@case
def operator_file_validated(e):
    """check --operator-policy FILE alone validates the file and lists its
    profiles; a malformed one gives every error, each naming the file and
    the JSON path, and exits 125."""
    with Setup(e) as s:
        res = run_host([e.airlock, "check", "--operator-policy", s.op])
        expect_rc(res, 0)
        expect("OK" in res.text and "profile default" in res.text
               and "profile wide" in res.text, "profiles not listed", res)
        bad = write_file(os.path.join(s.dir, "bad.json"), json.dumps({
            "version": 1, "profiles": {"default": {
                "limits": {"memory": {"max": "1G", "default": "2G"}, "pids": {"max": "x"}},
                "filesystem": {"ro": ["relative/path"]},
                "network": {"allow": ["bad rule!"]}, "colour": "red"}}}))
        res = run_host([e.airlock, "check", "--operator-policy", bad])
        expect_rc(res, 125)
        for path in ["profiles.default.limits.memory", "profiles.default.limits.pids.max",
                     "profiles.default.filesystem.ro[0]", "profiles.default.network.allow[0]",
                     "profiles.default: unknown key \"colour\""]:
            expect(path in res.errtext and bad in res.errtext, "no error at %s" % path, res)


@case
def backend_this_airlock_lacks_refused(e):
    """An operator policy whose profile allows or defaults to a backend this
    airlock does not have (every layer of the design is built now, so a
    name no build has: firecracker) is refused when it is read (exit 125),
    naming the field and the valid names, not accepted and failed at run
    time."""
    with TempDir() as d:
        for backend, path in [({"allowed": ["native", "firecracker"]}, "backend.allowed[1]"),
                              ({"default": "firecracker"}, "backend.default")]:
            op = write_file(os.path.join(d, "op.json"), json.dumps({
                "version": 1, "profiles": {"default": {"backend": backend}}}))
            os.chmod(op, 0o644)
            res = run_host([e.airlock, "check", "--operator-policy", op], env=no_operator_env())
            expect_rc(res, 125)
            expect("profiles.default." + path in res.errtext and "valid: process, native" in res.errtext,
                   "no refusal naming %s and the valid names" % path, res)


@case
def docs_and_example_validate(e):
    """The complete example in docs/operator-policy.md and the demo's
    examples/operator-demo.json are valid operator policies."""
    import re
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "docs", "operator-policy.md")) as f:
        m = re.search(r"## A complete example\n\n```json\n(.*?)```", f.read(), re.S)
    expect(m, "no example in docs/operator-policy.md")
    with TempDir() as d:
        for name, text in [("docs.json", m.group(1)),
                           ("demo.json", open(os.path.join(root, "examples",
                                                           "operator-demo.json")).read())]:
            path = write_file(os.path.join(d, name), text)
            res = run_host([e.airlock, "check", "--operator-policy", path],
                           env=no_operator_env())
            expect_rc(res, 0)
            expect("profile default" in res.text, "%s: no default profile listed" % name, res)


@case
def symlink_and_dotdot_tricks(e):
    """A link inside an allowed prefix that points outside it, and a path
    whose '..' climbs out of it, are judged by where they resolve to and
    refused; a link to the never path is refused as that path."""
    with Setup(e) as s:
        os.symlink("/etc", os.path.join(s.jobs, "etc-link"))
        os.symlink(os.path.join(s.jobs, "keys"), os.path.join(s.jobs, "keys-link"))
        res = run_host([e.airlock, "check", "--operator-policy", s.op,
                        "--ro", os.path.join(s.jobs, "etc-link") + ":/input/etc",
                        "--ro", s.jobs + "/../../../etc/hostname:/input/h",
                        "--ro", os.path.join(s.jobs, "keys-link") + ":/input/k"])
        expect_rc(res, 125)
        lines = refusals(res)
        expect(len(lines) == 3, "expected three refusals", res)
        expect(any("/etc is not under" in l for l in lines), "link out not resolved", res)
        expect(any("/etc/hostname is not under" in l for l in lines), "'..' not resolved", res)
        expect(any("which the operator never allows" in l and "keys-link" in l for l in lines),
               "link to the never path", res)


@case
def env_and_rw_bounds(e):
    """LD_PRELOAD (the default never list) and passing airlock's own value
    of a variable (--env NAME, not in env.pass) are refused; a --rw mount
    outside the rw prefixes is refused though it is readable; the same
    under rw is allowed."""
    with Setup(e) as s:
        env = no_operator_env()
        env["AL_E2E_SECRET"] = "host-value"
        res = run_host([e.airlock, "check", "--operator-policy", s.op,
                        "--env", "LD_PRELOAD=/tmp/x.so", "--env", "AL_E2E_SECRET",
                        "--rw", os.path.join(s.jobs, "data") + ":/data"], env=env)
        expect_rc(res, 125)
        lines = refusals(res)
        expect(len(lines) == 3, "expected three refusals", res)
        expect(any("LD_PRELOAD" in l and "env.never" in l for l in lines), "LD_PRELOAD", res)
        expect(any("AL_E2E_SECRET" in l and "env.pass" in l for l in lines), "passed env", res)
        expect(any("--rw" in l and "write" in l for l in lines), "rw outside rw prefixes", res)
        expect("host-value" not in res.errtext, "the value leaked into a message", res)
        res = run_host([e.airlock, "check", "--operator-policy", s.op,
                        "--rw", os.path.join(s.jobs, "out") + ":/data"], env=env)
        expect_rc(res, 0)


@case
def check_takes_runs_command_line(e):
    """check is run without running: the command line of a run, with
    `run` replaced by `check`, is accepted as it is (the command after
    `--` or after the flags, --result and --audit), and the plan shows the
    command and where the record would go; nothing is written there. A
    bad --result is the error run gives. The operator policy with a
    command is not "the operator policy alone": the task is checked."""
    with Setup(e) as s:
        rec, audit = os.path.join(s.dir, "r.json"), os.path.join(s.dir, "a.jsonl")
        flags = ["--operator-policy", s.op, "--timeout", "30", "--result", rec,
                 "--audit", audit]
        res = run_host([e.airlock, "check"] + flags + ["--", "/bin/echo", "hi there"],
                       env=no_operator_env())
        expect_rc(res, 0)
        expect("command:    /bin/echo 'hi there'" in res.text
               or "command:    /bin/echo hi there" in res.text, "command not shown", res)
        expect(("record:     %s" % rec) in res.text and ("audit:      %s" % audit) in res.text,
               "outputs not shown", res)
        expect(not os.path.exists(rec) and not os.path.exists(audit),
               "check wrote the record or the audit", res)
        res = run_host([e.airlock, "check", "--json"] + flags + ["/bin/echo", "hi"],
                       env=no_operator_env())
        expect_rc(res, 0)
        doc = json.loads(res.text)
        expect(doc["command"] == ["/bin/echo", "hi"] and doc["outputs"] == {
            "result": rec, "audit": audit}, "plan JSON: %r" % {
                k: doc.get(k) for k in ("command", "outputs")}, res)
        res = run_host([e.airlock, "check", "--result", "/nonexistent-dir/r.json", "--",
                        "/bin/true"], env=no_operator_env())
        expect_rc(res, 125)
        expect("--result /nonexistent-dir/r.json" in res.errtext, "bad --result not named", res)
        res = run_host([e.airlock, "check", "--operator-policy", s.op, "--", "/bin/true"],
                       env=no_operator_env())
        expect_rc(res, 0)
        expect("command:    /bin/true" in res.text and "policy (flags only): OK" in res.text,
               "the task with a command was not checked", res)
        res = run_host([e.airlock, "check", "--operator-policy", s.op, "--bogus"],
                       env=no_operator_env())
        expect_rc(res, 125)
        expect("unknown option --bogus" in res.errtext, "a bad flag passed", res)


def explain_policy(s, probe_dir):
    """The Setup's operator policy with a third profile, big (memory at
    most 4G, reading jobs): default caps memory at 1G, wide at 2G."""
    doc = operator_doc(s.jobs, probe_dir)
    doc["profiles"]["big"] = {"filesystem": {"ro": [s.jobs]}, "limits": {"memory": {"max": "4G"}}}
    return write_file(os.path.join(s.dir, "three.json"), json.dumps(doc))


@case
def check_explain_refused(e):
    """Refused, check --explain still prints the decision table (the
    values decided, then the refusal) and names the profiles that would
    allow the request: 2G of memory is over default's 1G but within wide
    and big; 3G only within big; a path no profile lets a task read, none.
    With --json the same, as "operator_policy" and "allowed_by"."""
    with Setup(e) as s:
        op = explain_policy(s, os.path.dirname(e.probe))
        base = [e.airlock, "check", "--operator-policy", op, "--explain"]
        res = run_host(base + ["--memory", "2G"], env=no_operator_env())
        expect_rc(res, 125)
        expect(len(refusals(res)) == 1, "one refusal on stderr", res)
        lines = res.text.splitlines()
        expect(any(l.split()[:2] == ["limits.pids", "64"] and "operator ceiling" in l
                   for l in lines), "no decision table on stdout", res)
        expect(any(l.strip().startswith("refused: --memory 2G") for l in lines),
               "the table does not show the refusal", res)
        expect(("profiles of %s that would allow this request: wide, big" % op) in res.text,
               "allowing profiles not named", res)
        res = run_host(base + ["--memory", "3G"], env=no_operator_env())
        expect_rc(res, 125)
        expect(("would allow this request: big\n") in res.text, "3G: only big", res)
        res = run_host(base + ["--ro", "/etc/hostname:/input/h"], env=no_operator_env())
        expect_rc(res, 125)
        expect(("no profile of %s allows this request" % op) in res.text, "none allows", res)
        res = run_host(base + ["--memory", "2G", "--json"], env=no_operator_env())
        expect_rc(res, 125)
        doc = json.loads(res.text)
        expect(doc["allowed_by"] == ["wide", "big"], "allowed_by: %r" % doc.get("allowed_by"),
               res)
        expect(doc["operator_policy"]["profile"] == "default"
               and any(d["what"] == "limits.pids" for d in doc["operator_policy"]["decisions"])
               and len(doc["operator_policy"]["refused"]) == 1,
               "operator_policy: %r" % doc.get("operator_policy"), res)
        res = run_host([e.airlock, "check", "--operator-policy", op, "--memory", "2G", "--json"],
                       env=no_operator_env())
        expect("allowed_by" not in json.loads(res.text), "allowed_by without --explain", res)


@case
def check_json_refusals_like_the_record(e):
    """check --json's refusals carry the record's refused[] keys (task,
    asked, bound, operator_path, message) with the same values as the
    record of the same request run; every other error has those keys too,
    null, and "refused": false."""
    with Setup(e) as s:
        rec = os.path.join(s.dir, "r.json")
        flags = ["--operator-policy", s.op, "--memory", "2G", "--allow", "files.evil.test:443"]
        res = run_host([e.airlock, "check", "--json"] + flags, env=no_operator_env())
        expect_rc(res, 125)
        doc = json.loads(res.text)
        res2 = run_host([e.airlock, "run", "--result", rec] + flags + ["--", "/bin/true"],
                        env=no_operator_env())
        expect_rc(res2, 125)
        with open(rec) as f:
            want = json.load(f)["policy"]["refused"]
        keys = ("task", "asked", "bound", "operator_path", "message")
        got = [{k: x.get(k) for k in keys} for x in doc["errors"] if x.get("refused")]
        expect(len(want) == 2 and got == want, "check: %r\nrecord: %r" % (got, want), res)
        mem = [x for x in doc["errors"] if x.get("task") == "--memory"]
        expect(mem and mem[0]["asked"] == "2G" and mem[0]["bound"] == "1G"
               and mem[0]["operator_path"] == "profiles.default.limits.memory.max"
               and mem[0]["text"] == "refused: " + mem[0]["message"], "memory: %r" % mem, res)
        res = run_host([e.airlock, "check", "--json", "--timeout", "soon"], env=no_operator_env())
        expect_rc(res, 125)
        err = json.loads(res.text)["errors"][0]
        expect(err["refused"] is False and all(err[k] is None for k in keys[:4]),
               "a flag error: %r" % err, res)


@case
def check_plan_json_nulls(e):
    """The plan JSON says null for "none", as the record does: no
    command yet, no CPU cap, no CPU-time limit, no file-size limit, no
    request or byte limit on the network, no record or audit asked for;
    set, they are numbers and strings."""
    res = run_host([e.airlock, "check", "--json", "--allow", "api.example.com:443"],
                   env=no_operator_env())
    expect_rc(res, 0)
    doc = json.loads(res.text)
    lim, net = doc["limits"], doc["network"]
    expect(doc["command"] is None and lim["cpus"] is None and lim["cpu_time_ms"] is None
           and lim["file_size"] is None and net["limits"]["requests"] is None
           and net["limits"]["bytes_out"] is None and net["per_host"]["connections"] is None
           and doc["outputs"] == {"result": None, "audit": None},
           "nones: %r" % {k: doc.get(k) for k in ("command", "limits", "network", "outputs")},
           res)
    res = run_host([e.airlock, "check", "--json", "--cpus", "0.5", "--cpu-time", "10",
                    "--file-size", "1M", "--", "/bin/true"], env=no_operator_env())
    expect_rc(res, 0)
    lim = json.loads(res.text)["limits"]
    expect(lim["cpus"] == 0.5 and lim["cpu_time_ms"] == 10000 and lim["file_size"] == 1 << 20,
           "set: %r" % lim, res)


@case
def explain_words_profile_and_default(e):
    """--explain tells the profile named "default" from a profile's own
    default value, and names no profile as the origin of what it does not
    set: the profile line says none was asked; a limit from the profile's
    default says "the profile's default value"; the backend, airlock's
    system directories and never rules the profile does not set are
    airlock's built-in values with no bound in the operator file."""
    with Setup(e) as s:
        res = run_host([e.airlock, "check", "--operator-policy", s.op, "--explain",
                        "--allow", "api.example.com:443", "--json"], env=no_operator_env())
        expect_rc(res, 0)
        dec = json.loads(res.text)["operator_policy"]["decisions"]
        by = {d["what"]: d for d in dec}
        expect(by["profile"]["from"] == 'none asked: the profile named "default"',
               "profile: %r" % by["profile"], res)
        expect(by["limits.memory"]["from"] == "the profile's default value",
               "memory: %r" % by["limits.memory"], res)
        expect(by["backend"]["from"] == "airlock's built-in value"
               and by["backend"]["bound"] is None, "backend: %r" % by["backend"], res)
        builtin = [d for d in dec if d["what"].startswith("network.never ")
                   or d["what"].startswith("system ")]
        expect(builtin and all(d["from"] == "airlock's built-in value" and d["bound"] is None
                               for d in builtin), "built-in: %r" % builtin, res)
        res = run_host([e.airlock, "check", "--operator-policy", s.op, "--explain",
                        "--timeout", "30"], env=no_operator_env())
        expect_rc(res, 0)
        expect("limits.timeout" in res.text and "profile default" not in res.text, "\"profile default\" is still said", res)


class Decider:
    """decider_standin.py MODE [ARG] on a Unix socket in dir, logging each
    question; stopped (by pid) on exit."""

    def __init__(self, d, mode, arg=None):
        self.sock = os.path.join(d, "decider.sock")
        self.log = os.path.join(d, "decider.log")
        argv = [sys.executable, STANDIN, mode] + ([arg] if arg else []) + [
            "--socket", self.sock, "--log", self.log]
        self.p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        if not wait_for(lambda: os.path.exists(self.sock), 10):
            self.stop()
            raise AssertionError("the stand-in decider did not start")

    def questions(self):
        if not os.path.exists(self.log):
            return []
        return [json.loads(l) for l in open(self.log)]

    def stop(self):
        kill_pid(self.p.pid, 15)
        try:
            self.p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            kill_pid(self.p.pid)
            self.p.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def decider_doc(s, sock, **extra):
    doc = operator_doc(s.jobs, os.path.dirname(s.env.probe))
    doc["decider"] = dict({"socket": sock, "run": "/v1/data/airlock/run",
                           "timeout": "400ms"}, **extra)
    return doc


def write_op(s, doc):
    return write_file(os.path.join(s.dir, "operator.json"), json.dumps(doc))


@case
def decider_narrows_and_refuses_runs(e):
    """The decider, asked once per run with the whole request: an answer
    that drops one allow rule runs without it (run.start's allow lacks it,
    and --explain says the decider dropped it); "no" with a reason is a
    refusal (exit 125) naming the decider and the reason; one that hangs
    fails closed within its timeout; one that answers garbage or an
    undefined decision is a refusal saying so."""
    with Setup(e) as s:
        with Decider(s.dir, "narrow", "b.example.com:443") as dec:
            op = write_op(s, decider_doc(s, dec.sock))
            audit = os.path.join(s.dir, "a.jsonl")
            res = e.run(["/bin/true"], opts=["--operator-policy", op,
                                             "--allow", "a.example.com:443",
                                             "--allow", "b.example.com:443", "--audit", audit])
            expect_rc(res, 0)
            start = [json.loads(l) for l in open(audit)][0]
            expect("a.example.com:443" in start["allow"]
                   and "b.example.com:443" not in start["allow"], "run.start: %r" % start, res)
            qs = dec.questions()
            expect(len(qs) == 1 and qs[0]["path"] == "/v1/data/airlock/run"
                   and "b.example.com:443" in qs[0]["input"]["network"]["allow"]
                   and qs[0]["input"]["run"] == start["run"]
                   and qs[0]["input"]["profile"] == "default", "questions: %r" % qs, res)
        for mode, arg, words in [("deny-run", "no jobs on sundays", ["said no: no jobs on sundays"]),
                                 ("garbage", None, ["not JSON"]),
                                 ("undefined", None, ["undefined"]),
                                 ("hang", None, ["400 ms"])]:
            with Decider(s.dir, mode, arg) as dec:
                op = write_op(s, decider_doc(s, dec.sock))
                rec = os.path.join(s.dir, "r.json")
                t0 = time.monotonic()
                res = e.probe_run("id", opts=["--operator-policy", op, "--result", rec])
                took = time.monotonic() - t0
                expect_rc(res, 125)
                lines = refusals(res)
                expect(len(lines) == 1 and all(w in lines[0] for w in words)
                       and dec.sock in lines[0], "%s: refusal %r" % (mode, lines), res)
                expect("uid=" not in res.text, "%s: the probe ran" % mode, res)
                # A hang guard: a hanging decider never answers.
                expect(took < 20, "%s: took %.1fs" % (mode, took), res)
                with open(rec) as f:
                    expect(json.load(f)["reason"] == "refused", "%s: record" % mode, res)


class Upstream:
    """A loopback HTTP server answering 200 "up" and counting requests."""

    def __init__(self):
        outer = self
        self.hits = 0

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                outer.hits += 1
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"up")

        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.srv.server_address[1]
        self.t = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.t.start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


@case
def egress_decider_and_never_rules(e):
    """Per egress request: the decider denies one host (403, its reason in
    the net.connect audit event) and allows another; a second request to
    the denied host is answered from the cache (one question, not two);
    a name that the operator's never rules hold is refused by the gateway
    although the task's wildcard allows it, and the server sees nothing
    from either refused host."""
    up = Upstream()
    try:
        with Setup(e) as s, Decider(s.dir, "deny-egress", "denied.test") as dec:
            doc = decider_doc(s, dec.sock, egress="/v1/data/airlock/egress")
            del doc["decider"]["run"]
            prof = doc["profiles"]["default"]
            prof["network"] = {"allow": ["*.test:1024-65535"], "hosts": ["127.0.0.1"],
                               "never": ["secret.test:*"]}
            op = write_op(s, doc)
            audit = os.path.join(s.dir, "a.jsonl")
            opts = ["--operator-policy", op, "--allow", "*.test:%d" % up.port, "--audit", audit]
            for n in ("ok.test", "denied.test", "secret.test"):
                opts += ["--map-host", "%s=127.0.0.1" % n]
            curl = " ".join("/usr/bin/curl -s -o /dev/null -w '%s %%{http_code}\\n' "
                            "http://%s:%d/;" % (n, n, up.port)
                            for n in ("ok.test", "denied.test", "denied.test", "secret.test"))
            res = e.run(["/bin/sh", "-c", curl], opts=opts, timeout=60)
            expect_rc(res, 0)
            expect(res.text.splitlines() == ["ok.test 200", "denied.test 403", "denied.test 403",
                                             "secret.test 403"], "codes: %r" % res.text, res)
            expect(up.hits == 1, "the server saw %d requests, expected 1" % up.hits, res)
            qs = [q for q in dec.questions() if "method" in q["input"]]
            hosts = sorted(q["input"]["host"] for q in qs)
            expect(hosts == ["denied.test", "ok.test"], "egress questions: %r" % qs, res)
            expect(all(q["input"]["method"] == "GET" and q["input"]["port"] == up.port
                       and q["input"]["profile"] == "default" for q in qs), "inputs: %r" % qs, res)
            ev = [json.loads(l) for l in open(audit)]
            deny = [x for x in ev if x["event"] == "net.connect" and x["decision"] == "deny"]
            expect(any(x["name"] == "denied.test" and "not on the list" in x["reason"]
                       for x in deny), "no decider denial: %r" % deny, res)
            expect(any(x["name"] == "secret.test" and "never allows" in x["reason"]
                       for x in deny), "no never denial: %r" % deny, res)
    finally:
        up.close()


if __name__ == "__main__":
    main(suite)
