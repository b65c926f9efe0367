"""The Python client's tests run against one real daemon: `airlock serve`
(AIRLOCK_BIN, with airlock-serve built beside it) as root on a socket in a
temporary directory, under an operator policy the tests write. It is
ended by its pid at the end of the session (SIGTERM, then SIGKILL and
`airlock gc` if it does not exit)."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

# The profile every sandbox of these tests is held to: memory capped at
# 256M (a request for more is refused: the PolicyError case), egress only
# to analysis.internal, which a task may map to loopback (the seed
# scenario's analysis API, a server the test runs on 127.0.0.1).
# The loopback listener's token is the identity "pyclient", served the
# same profile.
TOKEN = "pyclient-token-" + "t" * 24
OPERATOR_POLICY = {"version": 1, "profiles": {"default": {
    "limits": {"memory": {"max": "256M"}},
    "network": {"allow": ["analysis.internal:*"], "hosts": ["127.0.0.1"]}}},
    "serve": {"identities": {"token:pyclient": {"profiles": ["default"]}}}}


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _ready(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(2)
        s.connect(path)
        s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        return s.recv(64).startswith(b"HTTP/1.1 200")
    except OSError:
        return False
    finally:
        s.close()


class Daemon:
    """One `airlock serve` on DIR/s and on 127.0.0.1:PORT with TOKEN;
    .socket, .url, .log()."""

    def __init__(self, airlock):
        self.airlock = airlock
        self.dir = tempfile.mkdtemp(prefix="airlock-pyclient-")
        os.chmod(self.dir, 0o755)
        self.socket = os.path.join(self.dir, "s")
        op = os.path.join(self.dir, "operator.json")
        with open(op, "w") as f:
            json.dump(OPERATOR_POLICY, f)
        os.chmod(op, 0o644)
        tokens = os.path.join(self.dir, "tokens")
        with open(tokens, "w") as f:
            f.write(TOKEN + " pyclient\n")
        os.chmod(tokens, 0o600)
        port = _free_port()
        self.url = "http://127.0.0.1:%d" % port
        self.logf = open(os.path.join(self.dir, "log"), "w+")
        self.p = subprocess.Popen([airlock, "serve", "--socket", self.socket,
                                   "--operator-policy", op, "--listen",
                                   "127.0.0.1:%d" % port, "--token-file", tokens],
                                  stdout=self.logf, stderr=self.logf)
        deadline = time.monotonic() + 15
        while not _ready(self.socket):
            if self.p.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("airlock serve did not start: %s" % self.log())
            time.sleep(0.05)

    def log(self):
        self.logf.seek(0)
        return self.logf.read()

    def stop(self):
        killed = False
        if self.p.poll() is None:
            os.kill(self.p.pid, signal.SIGTERM)
            try:
                self.p.wait(20)
            except subprocess.TimeoutExpired:
                os.kill(self.p.pid, signal.SIGKILL)
                self.p.wait()
                killed = True
        if killed:
            subprocess.run([self.airlock, "gc"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        self.logf.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def daemon():
    airlock = os.environ.get("AIRLOCK_BIN")
    if not airlock or not os.access(airlock, os.X_OK):
        pytest.fail("AIRLOCK_BIN must name the built airlock binary (got %r)" % airlock)
    if os.geteuid() != 0:
        pytest.fail("these tests run the daemon as root (as CI does); uid is %d"
                    % os.geteuid())
    d = Daemon(airlock)
    os.environ["AIRLOCK_SOCKET"] = d.socket
    try:
        yield d
    finally:
        d.stop()
