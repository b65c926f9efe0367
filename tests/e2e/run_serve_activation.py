#!/usr/bin/python3
"""Socket activation of `airlock serve` without systemd (TAP).

usage: run_serve_activation.py AIRLOCK PROBE [CASE-SUBSTRING...]

The test plays systemd's part (sd_listen_fds(3)): it makes the listening
Unix socket itself, puts it at fd 3 of a small shell wrapper that exports
LISTEN_PID as its own pid and execs `airlock serve` (which execs
airlock-serve: the pid stays the same), with LISTEN_FDS=1. Covers: the
daemon serving on that socket, a sandbox made through it whose session
process neither sees the LISTEN_* variables nor holds the socket, the
socket left in place at a SIGTERM and served again by the next daemon;
a running daemon whose binary is replaced as a package upgrade replaces it
(it keeps serving, new sessions included); LISTEN_PID naming another
process (ignored); and each thing at fd 3 or in the variables that is
refused with exit 125 and a message naming it. Every
daemon is ended by its pid, and its temp dir removed.
"""

import http.client
import json
import os
import signal
import socket
import stat
import subprocess
import sys

from harness import Env, Suite, TempDir, children_of, expect, kill_pid, wait_for

suite = Suite()
case = suite.case

# The wrapper: its own pid is the daemon's pid after exec.
WRAPPER = 'LISTEN_PID=$$; export LISTEN_PID; exec "$@"'


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path, timeout=30):
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


def request(path, method, url, body=None):
    c = UnixHTTP(path)
    try:
        c.request(method, url, body=body, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def healthy(path):
    try:
        return request(path, "GET", "/v1/health")[0] == 200
    except OSError:
        return False


def listening_socket(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    os.chmod(path, 0o600)
    s.listen(16)
    return s


def start(e, fd3, args=(), env=None, listen_pid=True, log=None):
    """airlock serve ARGS with fd3 at descriptor 3 (None: nothing there)
    and env added to ours; LISTEN_PID is the daemon's own pid when
    listen_pid, else left as env says."""
    full = dict(os.environ)
    for k in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"):
        full.pop(k, None)
    full.update(env or {})
    argv = [e.airlock, "serve"] + list(args)
    if listen_pid:
        argv = ["/bin/sh", "-c", WRAPPER, "sh"] + argv

    def child():
        if fd3 == 3:
            os.set_inheritable(3, True)
        elif fd3 is not None:
            os.dup2(fd3, 3)  # dup2 leaves the copy inheritable

    # close_fds would close fd 3 again after child() ran; Python's own
    # descriptors are not inheritable, so nothing else leaks in.
    return subprocess.Popen(argv, env=full, stdin=subprocess.DEVNULL, stdout=log,
                            stderr=subprocess.STDOUT if log else subprocess.PIPE,
                            close_fds=False, preexec_fn=child)


def stop(p):
    if p.poll() is None:
        kill_pid(p.pid, signal.SIGTERM)
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            kill_pid(p.pid)
            p.wait()
    return p.returncode


def refused(e, fd3, *words, args=(), env=None):
    """The daemon exits 125 at once with one line holding each of words."""
    p = start(e, fd3, args, dict({"LISTEN_FDS": "1"}, **(env or {})))
    try:
        _, err = p.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        stop(p)
        raise AssertionError("the daemon did not refuse fd 3 (%s); stopped it" % (words,))
    err = err.decode(errors="replace")
    expect(p.returncode == 125, "exit %s, not 125: %r" % (p.returncode, err))
    expect(len(err.strip().splitlines()) == 1, "more than one line: %r" % err)
    for w in words:
        expect(w in err, "%r not in the error %r" % (w, err))


def holds_socket(pid, ino):
    """Whether process pid has socket inode ino open."""
    fds = "/proc/%d/fd" % pid
    for fd in os.listdir(fds):
        try:
            if os.readlink(os.path.join(fds, fd)) == "socket:[%d]" % ino:
                return True
        except OSError:
            pass
    return False


@case
def activated_socket_served(e):
    """With LISTEN_PID its own pid and LISTEN_FDS=1, the daemon (without
    --socket) serves on the socket at fd 3: health answers 200 and a
    sandbox is made and runs an exec; the session process has no LISTEN_*
    variable and does not hold the listening socket; at SIGTERM the daemon
    exits 0 and leaves the socket file (systemd's) in place, and a second
    daemon given the same socket serves on it again."""
    with TempDir() as t:
        path = os.path.join(t, "serve.sock")
        lsock = listening_socket(path)
        # The kernel's inode of the socket object (what /proc/PID/fd shows).
        ino = os.fstat(lsock.fileno()).st_ino
        with open(os.path.join(t, "log"), "w+") as log:
            p = start(e, lsock.fileno(), env={"LISTEN_FDS": "1", "LISTEN_FDNAMES": "serve.sock"},
                      log=log)
            try:
                ok = wait_for(lambda: healthy(path) or p.poll() is not None, 10)
                log.seek(0)
                expect(ok and p.poll() is None, "no health answer: %s" % log.read())
                st, body = request(path, "POST", "/v1/sandboxes", b"{}")
                expect(st == 201, "create: %d %r" % (st, body))
                sid = json.loads(body)["id"]
                st, body = request(path, "POST", "/v1/sandboxes/%s/exec" % sid,
                                   b'{"argv": ["/bin/echo", "activated"], "wait": true}')
                expect(st == 200 and b"activated" in body, "exec: %d %r" % (st, body))
                sessions = [k for k in children_of(p.pid)
                            if b"__session" in open("/proc/%d/cmdline" % k, "rb").read()]
                expect(len(sessions) == 1, "one session process: %s" % sessions)
                environ = open("/proc/%d/environ" % sessions[0], "rb").read().split(b"\0")
                leaked = [v for v in environ if v.startswith(b"LISTEN_")]
                expect(not leaked, "the session process sees %s" % leaked)
                for k in children_of(p.pid):
                    expect(not holds_socket(k, ino),
                           "child %d of the daemon holds the listening socket" % k)
                expect(holds_socket(p.pid, ino), "the daemon does not hold the socket")
                st, _ = request(path, "DELETE", "/v1/sandboxes/" + sid)
                expect(st in (200, 204), "delete: %d" % st)
            finally:
                rc = stop(p)
            expect(rc == 0, "the daemon exited %s at SIGTERM" % rc)
            expect(os.path.exists(path) and stat.S_ISSOCK(os.lstat(path).st_mode),
                   "the daemon removed the socket systemd made")
            # systemd's next start of the service: the same socket again.
            p = start(e, lsock.fileno(), env={"LISTEN_FDS": "1"}, log=log)
            try:
                ok = wait_for(lambda: healthy(path) or p.poll() is not None, 10)
                log.seek(0)
                expect(ok and p.poll() is None, "second daemon: %s" % log.read())
            finally:
                stop(p)
        lsock.close()


@case
def activation_for_another_process(e):
    """LISTEN_PID naming another process (here: this test's) is ignored:
    the daemon makes its own --socket and serves there, and the socket at
    fd 3 gets no answer; without --socket it says --socket is needed."""
    with TempDir() as t:
        other = os.path.join(t, "other.sock")
        own = os.path.join(t, "own.sock")
        lsock = listening_socket(other)
        env = {"LISTEN_PID": str(os.getpid()), "LISTEN_FDS": "1"}
        with open(os.path.join(t, "log"), "w+") as log:
            p = start(e, lsock.fileno(), ["--socket", own], env, listen_pid=False, log=log)
            try:
                ok = wait_for(lambda: healthy(own) or p.poll() is not None, 10)
                log.seek(0)
                expect(ok and p.poll() is None, "no health answer on --socket: %s" % log.read())
                lsock.setblocking(False)
                try:
                    lsock.accept()[0].close()
                except BlockingIOError:
                    pass
                c = socket.socket(socket.AF_UNIX)
                c.settimeout(1)
                c.connect(other)  # queued: nobody accepts it but us
                c.close()
                lsock.accept()[0].close()  # still ours: the daemon left it alone
            finally:
                stop(p)
        p = start(e, lsock.fileno(), [], env, listen_pid=False)
        _, err = p.communicate(timeout=15)
        expect(p.returncode == 125 and b"--socket PATH is needed" in err,
               "exit %s: %r" % (p.returncode, err))
        lsock.close()


@case
def binary_replaced_under_a_running_daemon(e):
    """What a package upgrade does to a running daemon (debian/rules stops
    and restarts nothing): airlock and airlock-serve copied to a temp dir,
    the daemon started from there on a socket systemd-style, a sandbox
    made; then airlock-serve is replaced by rename, as dpkg does, with a
    program that only fails. The running daemon keeps serving: the sandbox
    it had runs an exec, and a new sandbox (a session process exec'd from
    the daemon's own binary, /proc/self/exe) is made and runs one."""
    with TempDir() as t:
        for name in ("airlock", "airlock-serve"):
            src = os.path.join(os.path.dirname(os.path.realpath(e.airlock)), name)
            dst = os.path.join(t, name)
            with open(src, "rb") as f, open(dst, "wb") as g:
                g.write(f.read())
            os.chmod(dst, 0o755)
        path = os.path.join(t, "serve.sock")
        lsock = listening_socket(path)

        class Copy:
            airlock = os.path.join(t, "airlock")

        def exec_echo(sid, word):
            st, body = request(path, "POST", "/v1/sandboxes/%s/exec" % sid,
                               json.dumps({"argv": ["/bin/echo", word], "wait": True}).encode())
            expect(st == 200 and word.encode() in body, "exec: %d %r" % (st, body))

        with open(os.path.join(t, "log"), "w+") as log:
            p = start(Copy, lsock.fileno(), env={"LISTEN_FDS": "1"}, log=log)
            try:
                ok = wait_for(lambda: healthy(path) or p.poll() is not None, 10)
                log.seek(0)
                expect(ok and p.poll() is None, "no health answer: %s" % log.read())
                st, body = request(path, "POST", "/v1/sandboxes", b"{}")
                expect(st == 201, "create: %d %r" % (st, body))
                old = json.loads(body)["id"]
                new = os.path.join(t, "airlock-serve.dpkg-new")
                with open(new, "w") as f:
                    f.write("#!/bin/sh\nexit 1\n")
                os.chmod(new, 0o755)
                os.rename(new, os.path.join(t, "airlock-serve"))
                exec_echo(old, "before")
                st, body = request(path, "POST", "/v1/sandboxes", b"{}")
                expect(st == 201, "create after the upgrade: %d %r" % (st, body))
                exec_echo(json.loads(body)["id"], "after")
            finally:
                stop(p)
        lsock.close()


@case
def activation_refusals(e):
    """Exit 125 and one line naming what is wrong: fd 3 a pipe, a Unix
    stream socket that does not listen, a datagram socket, an abstract
    socket, a TCP socket; LISTEN_FDS 2 or not a number; LISTEN_FDNAMES
    with two names; --socket naming another path; --socket-group."""
    with TempDir() as t:
        r, w = os.pipe()
        refused(e, r, "fd 3 is not a listening Unix stream socket")
        os.close(r)
        os.close(w)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(os.path.join(t, "quiet.sock"))
        refused(e, s.fileno(), "fd 3 is not a listening Unix stream socket")
        s.close()
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        s.bind(os.path.join(t, "dgram.sock"))
        refused(e, s.fileno(), "fd 3 is not a listening Unix stream socket")
        s.close()
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        refused(e, s.fileno(), "fd 3 is not a listening Unix stream socket")
        s.close()
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind("\0airlock-e2e-abstract-%d" % os.getpid())
        s.listen(1)
        refused(e, s.fileno(), "not bound to a path", "abstract")
        s.close()
        path = os.path.join(t, "serve.sock")
        s = listening_socket(path)
        refused(e, s.fileno(), "LISTEN_FDS=2", "takes one socket", env={"LISTEN_FDS": "2"})
        refused(e, s.fileno(), 'LISTEN_FDS="x" is not a number', env={"LISTEN_FDS": "x"})
        refused(e, s.fileno(), 'LISTEN_FDNAMES="a:b"', env={"LISTEN_FDNAMES": "a:b"})
        refused(e, s.fileno(), "--socket /elsewhere.sock", "systemd passed the socket " + path,
                args=["--socket", "/elsewhere.sock"])
        refused(e, s.fileno(), "--socket-group", "SocketGroup=", args=["--socket-group", "root"])
        s.close()
        expect(os.path.exists(path), "a refused start removed the socket")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        print("usage: %s AIRLOCK PROBE [CASE-SUBSTRING...]" % sys.argv[0], file=sys.stderr)
        sys.exit(2)
    sys.exit(suite.run(Env(sys.argv[1], sys.argv[2]), only=sys.argv[3:]))
