#!/usr/bin/python3
"""Attacks on `airlock serve` found in the third review (TAP): each case
asserts what the daemon must do and fails while the hole it names is open.

usage: serve_attacks3.py AIRLOCK PROBE [CASE-SUBSTRING...]

- a URL whose percent-escapes decode to bytes that are not UTF-8 may not
  stop the daemon (the front's 404 message is built with json_pack, which
  returns NULL for such a string, and strlen(NULL) kills the front; the
  monitor then stops and every tenant's sandbox ends). On the TCP
  listener no token is needed;
- a file path that is not UTF-8 may not end the sandbox it names (the
  session's error message hits the same NULL);
- one identity may not hold every --max-sandboxes slot for ever by pausing
  its sandboxes (a paused sandbox's clocks stop, nothing bounds the pause,
  and there is no per-identity cap): another identity must still be
  served once the first one's sandboxes are past their lifetime;
- an exec's own "output" limit may not raise the operator profile's;
- huge numbers of seconds are 400s, not a sandbox ended or a 500.

Every daemon is ended by its pid, its temp dir removed, also when a case
fails. Network: 127.0.0.1 only.
"""

import http.client
import json
import os
import socket
import sys
import time

from harness import Env, Suite, TempDir, expect, wait_for
from run_serve import Daemon, UnixHTTP  # noqa: F401 (UnixHTTP: Daemon.request)

suite = Suite()
case = suite.case

TOKEN_A = "tokA-" + "a" * 27
TOKEN_B = "tokB-" + "b" * 27


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def raw(sock_or_addr, head):
    """Send head as it is (no client library would send these bytes) and
    return the status line's code, or None when the connection closed
    without an answer."""
    if isinstance(sock_or_addr, str):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    else:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(10)
    try:
        s.connect(sock_or_addr)
        s.sendall(head)
        data = b""
        while b"\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    except OSError:
        return None
    finally:
        s.close()
    parts = data.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None


def write_tokens(dirname):
    path = os.path.join(dirname, "tokens")
    with open(path, "w") as f:
        f.write("%s alice\n%s bob\n" % (TOKEN_A, TOKEN_B))
    os.chmod(path, 0o600)
    return path


def write_operator(dirname):
    path = os.path.join(dirname, "operator.json")
    with open(path, "w") as f:
        json.dump({"version": 1, "profiles": {"default": {}},
                   "serve": {"identities": {
                       "token:alice": {"profiles": ["default"]},
                       "token:bob": {"profiles": ["default"]}}}}, f)
    os.chmod(path, 0o644)
    return path


def tcp_json(port, token, method, path, body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        c.request(method, path, body=json.dumps(body) if body is not None else None,
                  headers={"Authorization": "Bearer " + token})
        r = c.getresponse()
        return r.status, json.loads(r.read() or b"{}")
    finally:
        c.close()


def alive(d, sid):
    """The daemon answers and still holds uid 0's sandbox sid."""
    try:
        st, doc = d.json("GET", "/v1/sandboxes/" + sid, timeout=10)
    except OSError as ex:
        return False, "the daemon does not answer (%s); its log: %s" % (ex, d.logtext()[-400:])
    return st == 200, "GET the sandbox: %d %s" % (st, doc)


@case
def non_utf8_url_keeps_the_daemon(e):
    """GET /nope%ff (on the Unix socket), and the same on the TCP listener
    with no token at all: each gets a 404 and the daemon goes on serving,
    root's live sandbox included. Today the front dies on the first (its
    404 message is not UTF-8: json_pack gives NULL, reply_error calls
    strlen on json_dumps(NULL)), and the monitor stops with it: one
    request from anyone who can connect ends every tenant's sandboxes."""
    with TempDir() as t:
        port = free_port()
        with Daemon(e, "--listen", "127.0.0.1:%d" % port, "--token-file",
                    write_tokens(t)) as d:
            st, doc = d.json("POST", "/v1/sandboxes", {"lifetime": 60})
            expect(st == 201, "root's create: %d %s" % (st, doc))
            sid = doc["id"]
            code = raw(("127.0.0.1", port), b"GET /nope%ff HTTP/1.1\r\nHost: x\r\n\r\n")
            ok, why = alive(d, sid)
            expect(ok, "after a token-less TCP client's GET /nope%%ff (answered %s): %s"
                   % (code, why))
            code = raw(d.sock, b"GET /v1/x%c3 HTTP/1.1\r\nHost: x\r\n\r\n")
            ok, why = alive(d, sid)
            expect(ok, "after GET /v1/x%%c3 on the Unix socket (answered %s): %s" % (code, why))
            expect(code == 404, "GET /v1/x%%c3: %s, not 404" % code)


@case
def non_utf8_file_path_keeps_the_sandbox(e):
    """GET /v1/sandboxes/ID/files/work/%ff: a 4xx, and the sandbox lives
    on. Today its session process dies (sess_error's json_pack gives NULL
    for a message that is not UTF-8, sess_answer calls strlen(NULL)), the
    client gets 500 and the sandbox is gone."""
    with Daemon(e) as d:
        st, doc = d.json("POST", "/v1/sandboxes", {"lifetime": 60})
        expect(st == 201, "create: %d %s" % (st, doc))
        sid = doc["id"]
        code = raw(d.sock, ("GET /v1/sandboxes/%s/files/work/%%ff HTTP/1.1\r\nHost: x\r\n\r\n"
                            % sid).encode())
        ok, why = alive(d, sid)
        expect(ok, "after GET files/work/%%ff (answered %s): %s" % (code, why))
        expect(code is not None and 400 <= code < 500, "GET files/work/%%ff: %s" % code)


@case
def a_paused_identity_cannot_hold_every_slot(e):
    """--max-sandboxes 2; alice makes two sandboxes with a 2 s lifetime and
    pauses both. Once 6 s have passed (three lifetimes), bob must be able
    to make one. Today a paused sandbox's clocks stop and nothing bounds
    the pause (not max_lifetime, not the operator), and nothing caps one
    identity's share: alice holds every slot for as long as she likes and
    bob gets 429 for ever."""
    with TempDir() as t:
        port = free_port()
        with Daemon(e, "--max-sandboxes", "2", "--listen", "127.0.0.1:%d" % port,
                    "--token-file", write_tokens(t), "--operator-policy",
                    write_operator(t)) as d:
            ids = []
            for _ in range(2):
                st, doc = tcp_json(port, TOKEN_A, "POST", "/v1/sandboxes",
                                   {"lifetime": 2, "max_lifetime": 2})
                expect(st == 201, "alice's create: %d %s" % (st, doc))
                ids.append(doc["id"])
            for sid in ids:
                st, doc = tcp_json(port, TOKEN_A, "POST", "/v1/sandboxes/%s/pause" % sid, {})
                expect(st == 200 and doc.get("state") == "paused",
                       "alice's pause: %d %s" % (st, doc))
            time.sleep(6)
            st, doc = tcp_json(port, TOKEN_B, "POST", "/v1/sandboxes", {"lifetime": 2})
            left = [sid for sid in ids
                    if tcp_json(port, TOKEN_A, "GET", "/v1/sandboxes/" + sid)[0] == 200]
            expect(st == 201, "bob's create 6 s after alice paused her two 2-second "
                   "sandboxes: %d %s (alice's still held: %d)" % (st, doc, len(left)))


@case
def exec_limits_stay_within_the_profile(e):
    """Under an operator profile whose limits.output max is 64K, an exec
    asking "output": "10M" and writing 1 MB must not get past 64K (a 4xx
    for the request, or its output cut at 64K). Today the exec's own
    output limit replaces the profile's (run/session.c: req->output_bytes
    over p->output_bytes, never checked against the plan): the operator's
    bound does not hold for any exec that asks for more."""
    with TempDir() as t:
        op = os.path.join(t, "operator.json")
        with open(op, "w") as f:
            json.dump({"version": 1, "profiles": {"default": {
                "limits": {"output": {"max": "64K"}}}}}, f)
        os.chmod(op, 0o644)
        with Daemon(e, "--operator-policy", op) as d:
            st, doc = d.json("POST", "/v1/sandboxes", {"lifetime": 60})
            expect(st == 201, "create: %d %s" % (st, doc))
            sid = doc["id"]
            st, doc = d.json("POST", "/v1/sandboxes/%s/exec" % sid,
                             {"argv": ["/bin/sh", "-c", "head -c 1000000 /dev/zero | tr '\\0' a"],
                              "output": "10M", "wait": True})
            if 400 <= st < 500:
                return
            expect(st == 200, "exec: %d %s" % (st, str(doc)[:300]))
            got = len(doc.get("stdout", ""))
            expect(got <= 65536, "an exec under a 64K output bound asked for 10M and wrote "
                   "%d bytes of stdout (reason %s)" % (got, doc.get("reason")))


@case
def huge_seconds_are_400s(e):
    """POST .../timeout {"timeout": 1e20} and an exec's "timeout": 1e300
    are each a 400 naming the field, and the sandbox lives on. Today the
    first answers 200 and ends the sandbox at once (sclock.c: the double
    cast to uint64_t is 0 on x86-64, so the max_lifetime check passes, and
    the cast to int64_t puts the deadline in the past); the second is a
    500 ("timeout_ms -9223372036854775808 is negative")."""
    with Daemon(e) as d:
        st, doc = d.json("POST", "/v1/sandboxes", {"lifetime": 60})
        expect(st == 201, "create: %d %s" % (st, doc))
        sid = doc["id"]
        st, doc = d.json("POST", "/v1/sandboxes/%s/exec" % sid,
                         {"argv": ["/bin/true"], "wait": True, "timeout": 1e300})
        expect(st == 400, "an exec's timeout 1e300: %d %s" % (st, doc))
        st, doc = d.json("POST", "/v1/sandboxes/%s/timeout" % sid, {"timeout": 1e20})
        expect(st == 400, "timeout 1e20 s: %d %s" % (st, doc))
        time.sleep(1.5)
        ok, why = alive(d, sid)
        expect(ok, "after timeout 1e20: %s" % why)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        print("usage: %s AIRLOCK PROBE [CASE-SUBSTRING...]" % sys.argv[0], file=sys.stderr)
        sys.exit(2)
    sys.exit(suite.run(Env(sys.argv[1], sys.argv[2]), only=sys.argv[3:]))
