#!/usr/bin/python3
"""Attacks on `airlock serve` found in review (TAP): each case asserts what
the daemon must do and fails while the hole it names is open.

usage: serve_attacks.py AIRLOCK PROBE [CASE-SUBSTRING...]

- a TCP client with any valid token, and no operator policy, may not have
  the root session run host commands (a secret's command source) or read
  root-only files (a "copy" mount of the token file: another client's
  token);
- a task in a sandbox whose run mounted the socket's directory may not
  talk to the daemon (the idmapped mount shows the root-owned 0600 socket
  as the sandbox user's);
- a secret read from descriptor 3 (the session's own channel to the
  monitor) may not wedge the session and its sandbox slot for ever;
- the front, forked from the monitor, may hold no bearer token, none of
  the daemon's environment, and no descriptor the daemon inherited;
- clients that trickle a head one byte at a time may not hold every
  connection for ever, nor may one identity;
- escapes in paths and ambiguous framing are refused (400);
- a killed front is restarted and the sandboxes live on.

Every daemon is ended by its pid, its temp dir removed, also when a case
fails. Network: 127.0.0.1 only.
"""

import json
import os
import socket
import subprocess
import sys
import threading
import time

from harness import Env, Skip, Suite, TempDir, expect, wait_for, children_of
from run_serve import Daemon, UnixHTTP  # noqa: F401 (UnixHTTP: Daemon.request)

suite = Suite()
case = suite.case

TOKEN_A = "tokA-" + "a" * 20
TOKEN_B = "tokB-" + "b" * 20


class DaemonWith(Daemon):
    """Daemon with extra environment and inherited descriptors."""

    def __init__(self, env, *args, extra_env=None, pass_fds=()):
        super().__init__(env, *args)
        self.extra_env = extra_env or {}
        self.pass_fds = pass_fds

    def __enter__(self):
        self.tmp = TempDir(mode=0o755)
        self.dir = self.tmp.__enter__()
        self.sock = os.path.join(self.dir, "sock")
        self.log = open(os.path.join(self.dir, "log"), "w+")
        environ = dict(os.environ)
        environ.update(self.extra_env)
        self.p = subprocess.Popen([self.env.airlock, "serve", "--socket", self.sock] + self.args,
                                  stdout=self.log, stderr=self.log, env=environ,
                                  pass_fds=self.pass_fds)
        if not wait_for(lambda: self.ready() or self.p.poll() is not None, 10):
            raise AssertionError("the daemon did not answer in 10 s: %s" % self.logtext())
        expect(self.p.poll() is None, "the daemon ended at once: %s" % self.logtext())
        return self

    def front_pid(self):
        for p in children_of(self.p.pid):
            with open("/proc/%d/status" % p) as f:
                if any(l.split()[:2] == ["Uid:", "65534"] for l in f):
                    return p
        raise AssertionError("no front process (uid 65534) under the daemon")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def token_file(dirname):
    path = os.path.join(dirname, "tokens")
    with open(path, "w") as f:
        f.write("%s alice\n%s bob\n" % (TOKEN_A, TOKEN_B))
    os.chmod(path, 0o600)
    return path


def tcp_run(port, token, body, timeout=60):
    r = subprocess.run(["curl", "-s", "-m", str(timeout), "-H", "Authorization: Bearer " + token,
                        "-d", json.dumps(body), "http://127.0.0.1:%d/v1/run" % port],
                       stdout=subprocess.PIPE)
    return json.loads(r.stdout or b"{}")


def memory_holds(pid, needle):
    """Whether needle is anywhere in pid's readable memory (as root)."""
    with open("/proc/%d/maps" % pid) as maps, open("/proc/%d/mem" % pid, "rb", 0) as mem:
        for line in maps:
            addr, perm = line.split()[:2]
            if "r" not in perm:
                continue
            start, end = (int(x, 16) for x in addr.split("-"))
            try:
                mem.seek(start)
                if needle in mem.read(end - start):
                    return True
            except (OSError, ValueError, OverflowError):
                continue
    return False


@case
def token_client_gets_no_host_root(e):
    """A TCP client holding a valid token (alice), on a daemon without an
    operator policy: a secret whose source is a command must not run that
    command on the host (as root), and a "copy" mount of the daemon's own
    token file must not hand alice bob's token."""
    if os.geteuid() != 0:
        raise Skip("needs root")
    with TempDir(mode=0o700) as t:
        port = free_port()
        tokens = token_file(t)
        marker = os.path.join(t, "ran-as-host-root")
        with Daemon(e, "--listen", "127.0.0.1:%d" % port, "--token-file", tokens):
            doc = tcp_run(port, TOKEN_A, {
                "argv": ["/bin/true"],
                "network": {"allow": ["a.test:80"], "hosts": {"a.test": "127.0.0.1"}},
                "secrets": {"S": {"source": {"command": ["/bin/sh", "-c",
                                                         "id > %s; echo x" % marker]},
                                  "hosts": ["a.test:80"], "header": "X: {}"}}})
            problems = []
            if os.path.exists(marker):
                problems.append("a token client ran a host command as root (%s)"
                                % open(marker).read().strip())
            doc = tcp_run(port, TOKEN_A, {
                "argv": ["/bin/cat", "/x/tokens"],
                "filesystem": {"mounts": [{"host": tokens, "path": "/x/tokens", "mode": "ro",
                                           "copy": True}]}})
            if TOKEN_B in str(doc.get("stdout")):
                problems.append("alice read bob's token from the daemon's token file")
            expect(not problems, "; ".join(problems))


INNER = r"""
import socket
s = socket.socket(socket.AF_UNIX)
try:
    s.connect("/d/sock")
    s.sendall(b"GET /v1/health HTTP/1.0\r\n\r\n")
    s.settimeout(10)
    got = b""
    while len(got) < 65536:  # to the close: the head and body may come apart
        b = s.recv(4096)
        if not b:
            break
        got += b
    print(got.decode(errors="replace"))
except OSError as e:
    print("refused:", e)
"""


# The monitor answers a peer it refuses at once, before reading: read first.
INNER_READ = INNER.replace('    s.sendall(b"GET /v1/health HTTP/1.0\\r\\n\\r\\n")\n', "")


@case
def sandbox_cannot_reach_the_daemon(e):
    """A run that mounts the socket's directory read-only (root-owned, the
    socket 0600) is refused: the socket is one of the daemon's own paths,
    which no plan may show. And a task that reaches the socket by another
    name (a hard link in a directory it may mount; as root the mount is
    idmapped, so the socket shows as the sandbox user's own) gets a 403
    from the monitor, which serves no sandbox's process."""
    with Daemon(e) as d:
        st, doc = d.json("POST", "/v1/run", {
            "code": INNER, "language": "python",
            "filesystem": {"mounts": [{"host": d.dir, "path": "/d", "mode": "ro"}]}})
        expect(st == 403 and "belongs to the daemon" in json.dumps(doc),
               "the mount of the socket's directory: %d %s" % (st, doc))
        with TempDir(mode=0o755) as other:
            os.link(d.sock, os.path.join(other, "sock"))
            st, doc = d.json("POST", "/v1/run", {
                "code": INNER_READ if os.geteuid() == 0 else INNER, "language": "python",
                "filesystem": {"mounts": [{"host": other, "path": "/d", "mode": "ro"}]}})
            expect(st == 200, "the run: %d %s" % (st, doc))
            out = doc["stdout"]
            expect("HTTP/1.1 200" not in out,
                   "the task in the sandbox talked to the daemon: %r" % out[:300])
            if os.geteuid() == 0:
                expect("403" in out and "does not serve" in out,
                       "the monitor did not refuse the sandbox's process: %r" % out[:300])


@case
def fd_secret_source_does_not_wedge(e):
    """A secret read from descriptor 3, which in a session is its channel to
    the monitor: the request is answered (refused or failed) within 20 s,
    and the sandbox slot is free again."""
    with Daemon(e) as d:
        t0 = time.monotonic()
        try:
            st, doc = d.json("POST", "/v1/run", {
                "argv": ["/bin/true"],
                "network": {"allow": ["a.test:80"], "hosts": {"a.test": "127.0.0.1"}},
                "secrets": {"S": {"source": {"fd": 3}, "hosts": ["a.test:80"],
                                  "header": "X: {}"}}}, timeout=20)
        except OSError as ex:
            st, doc = None, str(ex)
        expect(st is not None and st != 200,
               "no answer after %.0f s (%s): the session reads its own channel"
               % (time.monotonic() - t0, doc))
        expect(wait_for(lambda: b'state="running"} 0' in d.request("GET", "/metrics")[2], 5),
               "the sandbox slot is still taken")


def skip_if_sanitized(why):
    """Some cases judge a process's memory, which a sanitizer changes past
    meaning (meson passes b_sanitize in AIRLOCK_TEST_SANITIZE): they run in
    the default build's suite."""
    san = os.environ.get("AIRLOCK_TEST_SANITIZE", "none")
    if san not in ("", "none"):
        raise Skip("built with -Db_sanitize=%s: %s" % (san, why))


@case
def front_holds_nothing(e):
    """The front (uid 65534) parses what clients send: its memory must not
    hold a bearer token no client has sent yet, nor a variable of the
    daemon's environment (where `env` secret sources read their values);
    it must not hold a descriptor the daemon inherited."""
    if os.geteuid() != 0:
        raise Skip("needs root")
    skip_if_sanitized("the front's readable memory is terabytes of ASan's shadow")
    secret = "env-secret-" + os.urandom(8).hex()
    r, w = os.pipe()
    try:
        with TempDir(mode=0o700) as t:
            tokens = token_file(t)
            with DaemonWith(e, "--listen", "127.0.0.1:%d" % free_port(), "--token-file", tokens,
                            extra_env={"ANALYSIS_TOKEN": secret}, pass_fds=(w,)) as d:
                front = d.front_pid()
                problems = []
                if memory_holds(front, TOKEN_B.encode()):
                    problems.append("its memory holds bob's bearer token (never sent to it)")
                if memory_holds(front, secret.encode()):
                    problems.append("its memory holds the daemon's environment "
                                    "(ANALYSIS_TOKEN's value)")
                # The inherited pipe by what it is (its inode), not its
                # number: the front's own descriptors may reuse the number.
                pipe = os.readlink("/proc/self/fd/%d" % w)
                fds = {n: os.readlink("/proc/%d/fd/%s" % (front, n))
                       for n in os.listdir("/proc/%d/fd" % front)}
                if pipe in fds.values():
                    problems.append("it holds the pipe %s the daemon inherited (its fds: %s)"
                                    % (pipe, fds))
                expect(not problems, "the front: " + "; ".join(problems))
    finally:
        os.close(r)
        os.close(w)


@case
def trickling_clients_are_dropped(e):
    """--client-timeout 2: four connections that each send one byte of a
    head every 0.25 s are never idle, but a head that never ends must still
    be dropped: after 8 s (four timeouts) the daemon has closed every one
    of them. Today they are held for as long as the trickle lasts (32 KiB
    of head at one byte per timeout: days), and past --max-clients every
    other client gets 503 meanwhile."""
    with Daemon(e, "--max-clients", "4", "--client-timeout", "2") as d:
        held = []
        stop = threading.Event()
        closed = set()

        def trickle():
            while not stop.wait(0.25):
                for i, s in enumerate(held):
                    try:
                        s.sendall(b"X")
                    except OSError:
                        closed.add(i)

        try:
            for _ in range(4):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(d.sock)
                s.sendall(b"GET /v1/health HTTP/1.1\r\n")
                held.append(s)
            th = threading.Thread(target=trickle)
            th.start()
            time.sleep(8)
            stop.set()
            th.join()
            for i, s in enumerate(held):
                s.setblocking(False)
                try:
                    if s.recv(4096) == b"":
                        closed.add(i)
                except BlockingIOError:
                    pass
                except OSError:
                    closed.add(i)
        finally:
            stop.set()
            for s in held:
                s.close()
        expect(len(closed) == 4, "%d of 4 clients trickling a head still held after 8 s"
               % (4 - len(closed)))


def raw(sock_path, data, timeout=10):
    """Send bytes on a new connection to the socket; the whole answer."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(sock_path)
        s.sendall(data)
        out = b""
        while True:
            b = s.recv(65536)
            if not b:
                return out
            out += b
    except socket.timeout:
        return out
    finally:
        s.close()


def status_of(answer):
    parts = answer.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None


@case
def escapes_in_paths_refused(e):
    """The path is decoded once, and an escaped NUL or '/' (which would
    make files/a%00b act on files/a, or %2F a second segment) is a 400
    naming it; so is a bad escape. A plain escape (%61 = a) still works."""
    from run_serve import sandbox, run
    with Daemon(e) as d:
        sid = sandbox(d)
        st, doc = d.json("PUT", "/v1/sandboxes/%s/files/tmp/a" % sid, "x")
        expect(st in (200, 201), "upload: %d %s" % (st, doc))
        for path, word in (("tmp/a%00b", "%00"), ("tmp%2Fa", "%2F"), ("tmp/a%2fb", "%2F"),
                           ("tmp/a%zz", "hex"), ("tmp/a%3Fb", "%3F")):
            st, doc = d.json("GET", "/v1/sandboxes/%s/files/%s" % (sid, path))
            expect(st == 400 and word in doc.get("error", ""),
                   "GET files/%s: %d %s (wanted 400 naming %s)" % (path, st, doc, word))
        st, doc = d.json("GET", "/v1/sandboxes/%s%%00x" % sid)
        expect(st == 400, "an id with %%00: %d %s" % (st, doc))
        st, _, body = d.request("GET", "/v1/sandboxes/%s/files/tmp/%%61" % sid)
        expect(st == 200 and body == b"x", "files/tmp/%%61 (a): %d %r" % (st, body[:100]))
        st, doc = d.json("GET", "/v1/sandboxes/%s/execs?follow=1%%26x" % sid)
        expect(st == 400 and "follow" in doc.get("error", ""), "a flag's value with &: %d %s"
               % (st, doc))


@case
def ambiguous_framing_refused(e):
    """Two Content-Length headers, or Content-Length with chunked: 400 (a
    proxy in front and the daemon could read different bodies); two
    Authorization headers: 400. The daemon serves the next client."""
    with Daemon(e) as d:
        body = b'{"argv":["/bin/true"]}'
        for head, word in (
                (b"Content-Length: %d\r\nContent-Length: %d\r\n" % (len(body), len(body)),
                 b"Content-Length"),
                (b"Content-Length: %d\r\nTransfer-Encoding: chunked\r\n" % len(body),
                 b"Transfer-Encoding"),
                (b"Authorization: Bearer a\r\nAuthorization: Bearer b\r\nContent-Length: "
                 b"%d\r\n" % len(body), b"Authorization")):
            ans = raw(d.sock, b"POST /v1/run HTTP/1.1\r\nHost: x\r\n" + head +
                      b"Connection: close\r\n\r\n" + body)
            expect(status_of(ans) == 400, "%r: answered %r" % (head, ans[:200]))
            expect(word in ans, "%r: the 400 does not name %s: %r" % (head, word, ans[-200:]))
        expect(d.ready(), "the daemon stopped answering")


@case
def one_identity_cannot_hold_every_connection(e):
    """--max-clients 8 --max-clients-per-identity 3: a fourth connection
    from the same uid is answered 429 by the monitor and closed, while the
    three held stay served."""
    with Daemon(e, "--max-clients", "8", "--max-clients-per-identity", "3") as d:
        held = []
        try:
            # Three held: each one the monitor did not answer at once (the
            # fixture's readiness connection may still be counted for a
            # moment: a refused one is tried again).
            for _ in range(100):
                if len(held) == 3:
                    break
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(d.sock)
                s.settimeout(0.2)
                try:
                    s.recv(1)
                    s.close()  # refused: closed or answered at once
                except socket.timeout:
                    held.append(s)
            expect(len(held) == 3, "three connections of uid 0 could not be held")
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(10)
            s.connect(d.sock)
            ans = b""
            try:
                while len(ans) < 4096:  # the monitor answers at once, then closes
                    b = s.recv(4096)
                    if not b:
                        break
                    ans += b
            except socket.timeout:
                pass
            finally:
                s.close()
            expect(status_of(ans) == 429 and b"--max-clients-per-identity" in ans,
                   "a 4th connection of uid 0: %r" % ans[:300])
            held[0].sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            held[0].settimeout(10)
            expect(status_of(held[0].recv(4096)) == 200, "a held connection is not served")
        finally:
            for s in held:
                s.close()


@case
def one_identity_cannot_hold_every_sandbox(e):
    """--max-sandboxes 4 --max-sandboxes-per-identity 2: alice's third live
    sandbox is refused 429 naming the flag, while bob still gets his; once
    alice deleted one she may make another."""
    import http.client
    with TempDir(mode=0o700) as t:
        port = free_port()
        tokens = token_file(t)
        op = os.path.join(t, "operator.json")
        with open(op, "w") as f:
            json.dump({"version": 1, "profiles": {"default": {}},
                       "serve": {"identities": {"token:alice": {"profiles": ["default"]},
                                                "token:bob": {"profiles": ["default"]}}}}, f)
        with Daemon(e, "--listen", "127.0.0.1:%d" % port, "--token-file", tokens,
                    "--operator-policy", op, "--max-sandboxes", "4",
                    "--max-sandboxes-per-identity", "2"):
            def call(token, method, path, body=None):
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                try:
                    c.request(method, path, body=json.dumps(body) if body is not None else None,
                              headers={"Authorization": "Bearer " + token})
                    r = c.getresponse()
                    return r.status, json.loads(r.read() or b"{}"), r.getheader("Retry-After")
                finally:
                    c.close()
            made = []
            for _ in range(2):
                st, doc, _ = call(TOKEN_A, "POST", "/v1/sandboxes", {})
                expect(st == 201, "alice's sandbox: %d %s" % (st, doc))
                made.append(doc["id"])
            st, doc, retry = call(TOKEN_A, "POST", "/v1/sandboxes", {})
            expect(st == 429 and "--max-sandboxes-per-identity" in doc.get("error", "") and
                   retry == "1", "alice's third sandbox: %d %s" % (st, doc))
            st, doc, _ = call(TOKEN_B, "POST", "/v1/sandboxes", {})
            expect(st == 201, "bob's sandbox past alice's cap: %d %s" % (st, doc))
            st, doc, _ = call(TOKEN_A, "DELETE", "/v1/sandboxes/%s" % made[0])
            expect(st == 200, "alice's delete: %d %s" % (st, doc))
            # The monitor drops the record when the session has ended.
            ok = wait_for(lambda: call(TOKEN_A, "POST", "/v1/sandboxes", {})[0] == 201, 20)
            expect(ok, "after a delete alice could not make a sandbox again")


@case
def unread_answers_are_capped(e):
    """Sixteen clients download a 24 MiB file and never read (384 MiB of
    answers): the front holds at most 256 MiB of answers not yet read (one
    copy each), so its memory stays under 330 MiB, and the answers past
    the cap are refused (503) or their slowest clients dropped; the daemon
    still answers."""
    skip_if_sanitized("the front's memory under ASan is not what its buffering holds")
    with DaemonWith(e) as d:
        st, doc = d.json("POST", "/v1/sandboxes", {})
        expect(st == 201, "create: %d %s" % (st, doc))
        sid = doc["id"]
        st, _, data = d.request("PUT", "/v1/sandboxes/%s/files/tmp/big" % sid,
                                b"x" * (24 << 20))
        expect(st == 201, "upload: %d %s" % (st, data[:200]))
        front = d.front_pid()
        held = []
        try:
            for _ in range(16):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                s.connect(d.sock)
                s.sendall(b"GET /v1/sandboxes/%s/files/tmp/big HTTP/1.1\r\nHost: x\r\n\r\n"
                          % sid.encode())
                held.append(s)
                time.sleep(0.05)
            peak = 0

            def settled():
                nonlocal peak
                with open("/proc/%d/status" % front) as f:
                    rss = [int(l.split()[1]) for l in f if l.startswith("VmRSS:")][0]
                peak = max(peak, rss)
                return False
            wait_for(settled, 3)
            expect(peak < 330 * 1024, "the front holds %d MiB for clients that do not read"
                   % (peak // 1024))
            heads = []
            for s in held:
                s.settimeout(5)
                try:
                    heads.append(s.recv(64))
                except OSError:
                    heads.append(b"")
            refused = [h for h in heads if not h or h.startswith(b"HTTP/1.1 503")]
            expect(refused, "no answer was refused or dropped: %r" % heads)
        finally:
            for s in held:
                s.close()
        st, doc = d.json("GET", "/v1/health")
        expect(st == 200, "health after: %d %s" % (st, doc))
        d.json("DELETE", "/v1/sandboxes/%s" % sid)


@case
def a_dead_front_is_restarted(e):
    """The front is killed (by its pid, from the test): the daemon starts a
    new one, and a sandbox made before still answers an exec after; the
    front is a fresh program (`__front`), with an empty environment. The
    clients connected when it died see their connection end (the monitor
    closes its own descriptors of them), and the new front holds no socket
    but its channel."""
    from run_serve import sandbox, run
    with Daemon(e) as d:
        sid = sandbox(d)
        old = d.front_pid()
        expect(old, "no front process")
        cmd = open("/proc/%d/cmdline" % old, "rb").read().split(b"\0")
        expect(b"__front" in cmd, "the front is not exec'd as __front: %r" % cmd)
        expect(open("/proc/%d/environ" % old, "rb").read() == b"",
               "the front has an environment")
        # Clients connected when it dies: the monitor's own descriptors
        # of their connections go too (they see the end, not a hang), and
        # the new front gets none of them.
        held = []
        for _ in range(3):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(d.sock)
            s.sendall(b"GET /v1/health HTTP/1.1\r\n")  # a head not finished
            held.append(s)
        time.sleep(0.5)
        os.kill(old, 9)
        try:
            for s in held:
                s.settimeout(10)
                try:
                    end = s.recv(4096) == b""
                except ConnectionResetError:
                    end = True
                except socket.timeout:
                    end = False
                expect(end, "a client connected when the front died was not closed")
        finally:
            for s in held:
                s.close()
        expect(wait_for(lambda: d.ready(), 15),
               "no answer 15 s after the front was killed: %s" % d.logtext())
        new = d.front_pid()
        expect(new and new != old, "the front %s was not replaced (%s)" % (old, new))

        def sockets_of_new():
            return [os.readlink("/proc/%d/fd/%s" % (new, n))
                    for n in os.listdir("/proc/%d/fd" % new)
                    if os.readlink("/proc/%d/fd/%s" % (new, n)).startswith("socket:")]
        expect(wait_for(lambda: len(sockets_of_new()) == 1, 10),
               "the new front holds sockets besides its channel: %s" % sockets_of_new())
        doc = run(d, sid, {"argv": ["/bin/echo", "still here"]})
        expect(doc["stdout"] == "still here\n", "the sandbox's exec after: %s" % doc)
        expect("a new one starts" in d.logtext(), "the restart is not logged")

if __name__ == "__main__":
    if len(sys.argv) < 3:
        print("usage: %s AIRLOCK PROBE [CASE-SUBSTRING...]" % sys.argv[0], file=sys.stderr)
        sys.exit(2)
    sys.exit(suite.run(Env(sys.argv[1], sys.argv[2]), only=sys.argv[3:]))
