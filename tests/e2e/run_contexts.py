#!/usr/bin/python3
"""End-to-end tests of code contexts (TAP): POST /v1/sandboxes/{id}/contexts
and .../contexts/{cid}/run against a real `airlock serve`.

usage: run_contexts.py AIRLOCK PROBE [CASE-SUBSTRING...]

One daemon serves every case (on loopback TCP with two bearer-token
identities, alice and bob, so that a sandbox of one is 404 to the other),
and one sandbox of alice's most of them. Covers state kept between runs in
Python and Node, the last expression's value, output with and without a
newline and from a subprocess, an exception returned as the run's error
with the context alive after it, a memory limit and a timeout ending the
interpreter (restarted, its state gone), frames forged by the user's code
(a wrong nonce, the right nonce with garbage, a frame over its cap), a
second run at once (409), the context's exec among the sandbox's execs,
delete, and bad requests named. The last case stops the daemon by its pid
and checks that no run cgroup is left.
"""

import http.client
import json
import os
import signal
import subprocess
import sys
import threading

from harness import (Env, Skip, Suite, TempDir, cgroup_supervisor, expect, kill_pid,
                     own_mount_ns, run_cgroup_dirs, wait_for)
from run_serve import Daemon, free_port, session_pids

suite = Suite()
case = suite.case

ALICE, BOB = "a" * 32, "b" * 32


class World:
    """The daemon and alice's sandbox, made by the first case that needs
    them and ended by the last case (or at exit)."""

    def __init__(self):
        self.tmp = self.daemon = self.sid = None
        self.port = None

    def start(self, e):
        if self.daemon:
            return
        self.tmp = TempDir()
        t = self.tmp.__enter__()
        tokens = os.path.join(t, "tokens")
        with open(tokens, "w") as f:
            f.write(ALICE + " alice\n" + BOB + " bob\n")
        os.chmod(tokens, 0o600)
        op = os.path.join(t, "operator.json")
        with open(op, "w") as f:
            json.dump({"version": 1, "profiles": {"default": {}},
                       "serve": {"identities": {
                           "token:alice": {"profiles": ["default"]},
                           "token:bob": {"profiles": ["default"]}}}}, f)
        os.chmod(op, 0o644)
        self.port = free_port()
        self.daemon = Daemon(e, "--listen", "127.0.0.1:%d" % self.port, "--token-file",
                             tokens, "--operator-policy", op).__enter__()
        st, doc = self.call("POST", "/v1/sandboxes", {"max_execs": 16, "limits": {"output": "64M"}})
        expect(st == 201, "alice's sandbox: %d %s" % (st, doc))
        self.sid = doc["id"]

    def call(self, m, path, body=None, who=ALICE, timeout=120):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            c.request(m, path, body=json.dumps(body) if body is not None else None,
                      headers={"Authorization": "Bearer " + who})
            r = c.getresponse()
            data = r.read()
            return r.status, json.loads(data or b"{}")
        finally:
            c.close()

    def stop(self):
        """SIGTERM and wait; a daemon that did not end is killed by its
        pid, and `airlock gc` removes what it left."""
        if not self.daemon:
            return
        d, self.daemon = self.daemon, None
        killed = False
        if d.p.poll() is None:
            kill_pid(d.p.pid, signal.SIGTERM)
            try:
                d.p.wait(15)
            except subprocess.TimeoutExpired:
                kill_pid(d.p.pid)
                d.p.wait()
                killed = True
        d.__exit__(None, None, None)
        if killed:
            subprocess.run([d.env.airlock, "gc"], check=False)
        self.tmp.__exit__(None, None, None)


W = World()


def ctx(e, language="python", sid=None, **fields):
    W.start(e)
    st, doc = W.call("POST", "/v1/sandboxes/%s/contexts" % (sid or W.sid),
                     dict(fields, language=language))
    expect(st == 201, "create a %s context: %d %s" % (language, st, doc))
    return doc


def run(cid, code, status=200, sid=None, **fields):
    st, doc = W.call("POST", "/v1/sandboxes/%s/contexts/%s/run" % (sid or W.sid, cid),
                     dict(fields, code=code))
    expect(st == status, "run %r: %d %s" % (code[:80], st, doc))
    return doc


def delete(cid):
    st, doc = W.call("DELETE", "/v1/sandboxes/%s/contexts/%s" % (W.sid, cid))
    expect(st == 200 and doc == {"context_id": cid, "deleted": True},
           "delete %s: %d %s" % (cid, st, doc))


@case
def python_state_value_and_output(e):
    """A variable set in one run is read in the next; the last expression's
    value comes back as its repr, none for a statement; print output with
    and without a newline, stderr, and a subprocess's output are the run's."""
    c = ctx(e)
    expect(c["state"] == "idle" and c["runs"] == 0 and c["restarts"] == 0 and
           c["language"] == "python", "a new context: %s" % c)
    cid = c["context_id"]
    r = run(cid, "x = 41")
    expect(r["reason"] == "ok" and r["value"] is None and r["error"] is None and
           r["restarted"] is False and r["stdout"] == "", "x = 41: %s" % r)
    r = run(cid, "x + 1")
    expect(r["value"] == "42", "x + 1: %s" % r)
    r = run(cid, "'a' * 3")
    expect(r["value"] == "'aaa'", "a string's repr: %s" % r)
    r = run(cid, "print('one')\nprint('two', end='')")
    expect(r["stdout"] == "one\ntwo" and r["value"] is None, "print: %s" % r)
    r = run(cid, "import sys\nsys.stderr.write('warn\\n')")
    expect(r["stderr"] == "warn\n" and r["value"] == "5", "stderr: %s" % r)
    r = run(cid, "import os\nos.system('echo hi from a subprocess')")
    expect(r["stdout"] == "hi from a subprocess\n" and r["value"] == "0",
           "a subprocess's output: %s" % r)
    st, doc = W.call("GET", "/v1/sandboxes/%s/contexts/%s" % (W.sid, cid))
    expect(st == 200 and doc["runs"] == 6 and doc["state"] == "idle", "get: %d %s" % (st, doc))
    delete(cid)


@case
def python_exception_is_the_runs_error(e):
    """An exception raised by the code is the run's error (reason "error",
    name, message, a traceback naming the cell's lines and none of the
    driver's frames), what it printed before it kept, and the context's
    state alive after it."""
    cid = ctx(e)["context_id"]
    run(cid, "x = 7")
    r = run(cid, "def f():\n    raise ValueError('boom')\nprint('before')\nf()")
    err = r["error"] or {}
    expect(r["reason"] == "error" and err.get("name") == "ValueError" and
           err.get("message") == "boom" and r["stdout"] == "before\n",
           "an exception: %s" % r)
    tb = err.get("traceback", "")
    expect('File "<cell>", line 4' in tb and "raise ValueError('boom')" in tb and
           '"<string>"' not in tb and "ValueError: boom" in tb, "its traceback: %r" % tb)
    r = run(cid, "x")
    expect(r["value"] == "7" and r["restarted"] is False, "state after the exception: %s" % r)
    r = run(cid, "def (")
    expect(r["reason"] == "error" and r["error"]["name"] == "SyntaxError",
           "a syntax error: %s" % r)
    delete(cid)


@case
def context_exec_listed_and_deleted(e):
    """The context's interpreter is one of the sandbox's execs (argv shows
    the interpreter, not the driver); DELETE kills it and the context is
    404 after it."""
    c = ctx(e)
    st, doc = W.call("GET", "/v1/sandboxes/%s/execs" % W.sid)
    mine = [x for x in doc.get("execs", []) if x["exec_id"] == c["exec_id"]]
    expect(st == 200 and len(mine) == 1 and mine[0]["state"] == "running" and
           mine[0]["argv"][0] == "python3" and mine[0]["background"] is True and
           len(json.dumps(mine[0]["argv"])) < 100, "the context's exec: %s" % doc)
    st, doc = W.call("GET", "/v1/sandboxes/%s/contexts" % W.sid)
    expect(st == 200 and c["context_id"] in [x["context_id"] for x in doc["contexts"]],
           "the list: %s" % doc)
    delete(c["context_id"])

    def ended():
        _, d = W.call("GET", "/v1/sandboxes/%s/execs" % W.sid)
        return [x for x in d["execs"] if x["exec_id"] == c["exec_id"] and x["state"] == "ended"]
    expect(wait_for(ended, 10), "the deleted context's exec did not end")
    st, doc = W.call("GET", "/v1/sandboxes/%s/contexts/%s" % (W.sid, c["context_id"]))
    expect(st == 404 and c["context_id"] in doc["error"], "after delete: %d %s" % (st, doc))


@case
def second_run_at_once_is_409(e):
    """While a run is in progress a second run of the same context is 409;
    the first one ends as it would have."""
    cid = ctx(e)["context_id"]
    out = {}
    t = threading.Thread(target=lambda: out.update(
        r=run(cid, "import time\nwhile not __import__('os').path.exists('/tmp/go'):\n"
              "    time.sleep(0.05)\n'done'")))
    t.start()
    try:
        expect(wait_for(lambda: W.call("GET", "/v1/sandboxes/%s/contexts/%s" %
                                       (W.sid, cid))[1]["state"] == "running", 20),
               "the first run is not running")
        r = run(cid, "1", status=409)
        expect("running" in r["error"], "the second run: %s" % r)
    finally:
        # The first run waits for this file: a second exec makes it.
        W.call("POST", "/v1/sandboxes/%s/exec" % W.sid,
               {"argv": ["/bin/touch", "/tmp/go"], "wait": True})
        t.join(60)
    expect(out.get("r", {}).get("value") == "'done'", "the first run: %s" % out)
    delete(cid)


@case
def memory_limit_restarts_the_context(e):
    """A run that allocates past the context's memory limit (64M; 8 MiB at a
    time, 256 MiB at most: bounded even unconfined) ends with reason memory
    and restarted; the next run is in a new interpreter (its variable gone,
    restarted with restart_reason memory) and the one after it is not."""
    c = ctx(e, memory="64M")
    cid = c["context_id"]
    run(cid, "keep = 1")
    r = run(cid, "a = []\nfor i in range(32):\n    a.append(bytearray(8 << 20))\n"
            "print('survived')")
    expect(r["reason"] == "memory" and r["restarted"] is True and
           "survived" not in r["stdout"], "the allocation: %s" % r)
    r = run(cid, "keep")
    expect(r["reason"] == "error" and r["error"]["name"] == "NameError" and
           r["restarted"] is True and r["restart_reason"] == "memory",
           "the run after it: %s" % r)
    r = run(cid, "keep = 2\nkeep")
    expect(r["value"] == "2" and r["restarted"] is False and r["restart_reason"] is None,
           "the next run: %s" % r)
    st, doc = W.call("GET", "/v1/sandboxes/%s/contexts/%s" % (W.sid, cid))
    expect(doc["restarts"] == 1 and doc["exec_id"] != c["exec_id"], "restarts: %s" % doc)
    delete(cid)


@case
def timeout_ends_the_run(e):
    """A run over its timeout kills the interpreter: reason timeout,
    restarted, what it printed before kept; the next run's state is new."""
    cid = ctx(e)["context_id"]
    run(cid, "y = 1")
    r = run(cid, "import time\nprint('started', flush=True)\ntime.sleep(60)", timeout=1)
    expect(r["reason"] == "timeout" and r["restarted"] is True and
           r["stdout"] == "started\n" and r["duration_ms"] < 30000, "timeout: %s" % r)
    r = run(cid, "'y' in globals()")
    expect(r["value"] == "False" and r["restart_reason"] == "timeout", "after it: %s" % r)
    delete(cid)


FIND_NONCE = ("import sys\nf = sys._getframe()\nwhile 'req' not in f.f_locals:\n"
              "    f = f.f_back\nn = f.f_locals['req']['nonce']\n")


@case
def forged_frames(e):
    """The user's code writes frames: with a wrong nonce they are output
    like any other; with the run's own nonce (found in the driver's frame)
    and garbage, or a frame of the wrong types, the interpreter is ended
    (reason protocol, restarted) and the next run works; a huge line after
    the nonce (over the 8 MiB cap) likewise; a 9 MiB line without the
    marker is output, cut at 8 MiB."""
    cid = ctx(e, output="64M")["context_id"]
    forged = "\\x1eALCTX:" + "0" * 32 + ":{\"id\": 1, \"value\": \"forged\", \"error\": null}"
    r = run(cid, "v = 3\nprint('%s')\nv" % forged)
    expect(r["reason"] == "ok" and r["value"] == "3" and "forged" in r["stdout"] and
           r["restarted"] is False, "a wrong nonce: %s" % r)
    r = run(cid, FIND_NONCE + "print('\\x1eALCTX:%s:{garbage' % n)")
    expect(r["reason"] == "protocol" and r["restarted"] is True, "garbage: %s" % r)
    r = run(cid, "v = 4\nv")
    expect(r["value"] == "4" and r["restart_reason"] == "protocol", "after garbage: %s" % r)
    r = run(cid, FIND_NONCE + "print('\\x1eALCTX:%s:{\"id\": \"1\", \"value\": 5, "
            "\"error\": null}' % n)")
    expect(r["reason"] == "protocol", "a frame of the wrong types: %s" % r)
    r = run(cid, FIND_NONCE + "sys.stdout.write('\\x1eALCTX:%s:' % n + 'a' * (17 << 20))\n"
            "sys.stdout.flush()")
    expect(r["reason"] == "protocol" and r["restarted"] is True, "a huge frame: %s" % r)
    r = run(cid, "print('b' * (9 << 20))\n1")
    expect(r["reason"] == "ok" and r["value"] == "1" and r.get("stdout_truncated") is True and
           len(r["stdout"]) == 8 << 20, "a 9 MiB line: %s" % {k: v for k, v in r.items()
                                                            if k != "stdout"})
    delete(cid)


def node_present():
    st, doc = W.call("POST", "/v1/sandboxes/%s/exec" % W.sid,
                     {"argv": ["/bin/sh", "-c", "command -v node"], "wait": True})
    return st == 200 and doc["exit_code"] == 0


@case
def node_state_value_and_error(e):
    """Node: a variable kept between runs, the completion value through
    util.inspect, console output, a returned promise awaited, a thrown
    error as the run's error, a variable gone after the process exits."""
    W.start(e)
    if not node_present():
        raise Skip("node is not in the sandbox's PATH")
    cid = ctx(e, "node")["context_id"]
    r = run(cid, "var x = 41")
    expect(r["reason"] == "ok" and r["value"] is None, "var x: %s" % r)
    r = run(cid, "x + 1")
    expect(r["value"] == "42", "x + 1: %s" % r)
    r = run(cid, "console.log('hi'); process.stdout.write('no newline'); ({a: x})")
    expect(r["stdout"] == "hi\nno newline" and r["value"] == "{ a: 41 }", "output: %s" % r)
    r = run(cid, "Promise.resolve(x * 2)")
    expect(r["value"] == "82", "a promise: %s" % r)
    r = run(cid, "require('child_process').execSync('echo sub', {stdio: 'inherit'}); 1")
    expect(r["stdout"] == "sub\n", "a subprocess: %s" % r)
    r = run(cid, "function f() { throw new TypeError('bad ' + x) }\nf()")
    err = r["error"] or {}
    expect(r["reason"] == "error" and err.get("name") == "TypeError" and
           err.get("message") == "bad 41" and "<cell>" in err.get("traceback", "") and
           "[eval]" not in err.get("traceback", "") and
           "node:" not in err.get("traceback", ""), "a throw: %s" % r)
    r = run(cid, "process.exit(3)")
    expect(r["reason"] == "exited" and r["restarted"] is True, "an exit: %s" % r)
    r = run(cid, "typeof x")
    expect(r["value"] == "'undefined'" and r["restart_reason"] == "exited", "after: %s" % r)
    delete(cid)


@case
def bad_requests_named(e):
    """An unknown language, an unknown field, a run without code, an
    unknown context: 400 or 404 naming what was wrong."""
    W.start(e)
    base = "/v1/sandboxes/%s/contexts" % W.sid
    for body, word in (({"language": "ruby"}, "ruby"), ({}, "language"),
                       ({"language": "python", "colour": "red"}, "colour"),
                       ({"language": "python", "memory": "lots"}, "memory"),
                       ({"language": "python", "cwd": "rel"}, "cwd"),
                       ({"language": "python", "output": "1G"}, "output")):
        st, doc = W.call("POST", base, body)
        expect(st == 400 and word in doc["error"], "%s: %d %s" % (body, st, doc))
    cid = ctx(e)["context_id"]
    for body, word in (({}, "code"), ({"code": 1}, "code"), ({"code": "1", "tmeout": 1},
                                                              "tmeout"),
                       ({"code": "1", "timeout": -1}, "timeout")):
        st, doc = W.call("POST", "%s/%s/run" % (base, cid), body)
        expect(st == 400 and word in doc["error"], "run %s: %d %s" % (body, st, doc))
    st, doc = W.call("POST", base + "/ctx-999/run", {"code": "1"})
    expect(st == 404 and "ctx-999" in doc["error"], "an unknown context: %d %s" % (st, doc))
    delete(cid)


@case
def at_most_eight_contexts(e):
    """A sandbox holds at most 8 contexts: the ninth is a 429 saying so,
    and one more fits once one is deleted."""
    made = [ctx(e)["context_id"] for _ in range(8)]
    try:
        st, doc = W.call("POST", "/v1/sandboxes/%s/contexts" % W.sid, {"language": "python"})
        expect(st == 429 and "8 contexts" in doc["error"], "the ninth: %d %s" % (st, doc))
        delete(made.pop())
        made.append(ctx(e)["context_id"])
    finally:
        for cid in made:
            delete(cid)


@case
def idle_context_lets_the_sandbox_idle(e):
    """A context's interpreter waiting for its next run does not keep the
    sandbox busy: a sandbox with a 1 s idle timeout ends after its last
    run, as one with no exec running does."""
    W.start(e)
    st, doc = W.call("POST", "/v1/sandboxes", {"idle_timeout": 1})
    expect(st == 201, "a sandbox with an idle timeout: %d %s" % (st, doc))
    sid = doc["id"]
    cid = ctx(e, sid=sid)["context_id"]
    r = run(cid, "import time\ntime.sleep(1.5)\n'slept'", sid=sid)
    expect(r["value"] == "'slept'", "a run longer than the idle timeout: %s" % r)
    expect(wait_for(lambda: W.call("GET", "/v1/sandboxes/" + sid)[0] == 404, 15),
           "the sandbox with only an idle context did not end when idle")


@case
def other_identity_gets_404(e):
    """Bob gets 404 for every context route of alice's sandbox, as for the
    sandbox itself."""
    cid = ctx(e)["context_id"]
    base = "/v1/sandboxes/%s/contexts" % W.sid
    for m, path, body in (("GET", "", None), ("POST", "", {"language": "python"}),
                          ("GET", "/" + cid, None), ("POST", "/%s/run" % cid, {"code": "1"}),
                          ("DELETE", "/" + cid, None)):
        st, doc = W.call(m, base + path, body, who=BOB)
        expect(st == 404 and W.sid in doc.get("error", ""), "bob %s %s: %d %s" %
               (m, path, st, doc))
    r = run(cid, "1")
    expect(r["value"] == "1", "alice's context after bob: %s" % r)
    delete(cid)


@case
def daemon_stops_leaving_nothing(e):
    """The daemon ends on SIGTERM with its contexts running; no run cgroup
    of it is left."""
    W.start(e)
    ctx(e)
    # A run's cgroup is named PID-STARTTIME-N after the session process
    # that made it: these are this daemon's (other suites' may be there).
    sessions = set(session_pids(W.daemon))
    mine = lambda: {c for c in run_cgroup_dirs()
                    if (cgroup_supervisor(c) or (0,))[0] in sessions}
    expect(sessions and mine(), "no run cgroup of the daemon's sessions %s" % sessions)
    W.stop()
    expect(not mine(), "run cgroups left: %s" % mine())


if __name__ == "__main__":
    if len(sys.argv) < 3:
        print("usage: %s AIRLOCK PROBE [CASE-SUBSTRING...]" % sys.argv[0], file=sys.stderr)
        sys.exit(2)
    own_mount_ns()
    try:
        # The daemon's stop is a case of its own, run also when cases are
        # picked, so that nothing_left_behind comes after it.
        only = sys.argv[3:] + ["daemon_stops"] if sys.argv[3:] else []
        rc = suite.run(Env(sys.argv[1], sys.argv[2]), only=only)
    finally:
        W.stop()
    sys.exit(rc)
