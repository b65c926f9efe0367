#!/usr/bin/env python3
"""The process backend (no namespaces), judged from the host: the host's
environment absent, host files invisible, an input unchanged, the scratch
gone, no socket out (TCP to a loopback listener of ours, UDP, a Unix
socket), a limit that ends the run with its reason, nothing left behind,
and the plans it refuses. TAP; skips with `airlock backends`' reason where
the layer is unusable here."""
import json
import os
import socket
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import run_host, wait_for  # noqa: E402

AIRLOCK = os.path.abspath(sys.argv[1])
cases = []


def case(f):
    cases.append(f)
    return f


def run(cmd, opts=(), env=None):
    return run_host([AIRLOCK, "run", "--backend", "process"] + list(opts) + ["--"] + cmd,
                    env=env, timeout=60)


def sh(script, opts=(), env=None):
    return run(["/bin/sh", "-c", script], opts, env)


@case
def host_environment_absent():
    env = dict(os.environ, AL_PROCESS_SECRET="host-secret-value")
    r = sh("env", env=env)
    assert r.rc == 0, r.describe()
    assert "host-secret-value" not in r.text and "AL_PROCESS_SECRET" not in r.text, r.text


@case
def host_files_invisible():
    with tempfile.NamedTemporaryFile("w", dir="/tmp", delete=False) as f:
        f.write("host-only\n")
    os.chmod(f.name, 0o644)
    try:
        r = sh("cat %s; echo rc=$?; ls /root; echo rc=$?; cat /etc/hostname; echo rc=$?" % f.name)
        assert "host-only" not in r.text, r.describe()
        assert r.text.count("rc=0") == 0, r.describe()
    finally:
        os.unlink(f.name)


@case
def input_unchanged():
    d = tempfile.mkdtemp(prefix="al-proc-in.", dir="/var/tmp")
    path = os.path.join(d, "data.csv")
    with open(path, "w") as f:
        f.write("a,b\n1,2\n")
    os.chmod(d, 0o755)
    os.chmod(path, 0o644)
    try:
        r = sh("cat %s; echo x >> %s; echo rc=$?; rm -f %s; echo rc=$?" % (path, path, path),
               opts=["--ro", "%s:%s" % (path, path)])
        assert "1,2" in r.text, r.describe()
        assert "rc=0" not in r.text, r.describe()
        assert open(path).read() == "a,b\n1,2\n"
    finally:
        os.unlink(path)
        os.rmdir(d)


@case
def scratch_private_and_gone():
    r = sh("pwd; stat -c '%a %u' .. ; id -u; echo data > f; sleep 0")
    assert r.rc == 0, r.describe()
    lines = r.text.split()
    work, mode, owner, uid = lines[0], lines[1], lines[2], lines[3]
    assert mode == "700" and owner == uid and uid != "0", r.text
    scratch = os.path.dirname(work)
    assert not os.path.exists(scratch), scratch
    assert scratch not in open("/proc/mounts").read()
    # nothing of the run's uid is left (init's own exit may still be
    # winding down for a moment after the record is written)
    def left():
        out = []
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    if str(os.stat("/proc/" + pid).st_uid) == uid:
                        out.append(pid)
                except FileNotFoundError:
                    pass
        return out
    assert wait_for(lambda: not left(), 5), "processes of the run's uid left: %s" % left()


@case
def no_socket_out():
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(4)
    lst.settimeout(0.2)
    port = lst.getsockname()[1]
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.settimeout(0.2)
    uport = udp.getsockname()[1]
    code = (
        "import socket\n"
        "def t(name, f):\n"
        "    try:\n        f(); print(name, 'OPEN')\n"
        "    except OSError as e:\n        print(name, 'refused', e.errno)\n"
        "t('tcp', lambda: socket.create_connection(('127.0.0.1', %d), timeout=2))\n"
        "t('udp', lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM)"
        ".sendto(b'x', ('127.0.0.1', %d)))\n"
        "t('unix', lambda: socket.socket(socket.AF_UNIX).connect('/run/airlock.sock'))\n"
        "t('netlink', lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0))\n"
        # Stream sockets that are not TCP, which landlock's port rules do
        # not hold: SCTP (132) and MPTCP (262).
        "t('sctp', lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM, 132))\n"
        "t('mptcp', lambda: socket.socket(socket.AF_INET6, socket.SOCK_STREAM, 262))\n"
        # What stays allowed: a TCP socket, and a connected pair.
        "a, b = socket.socketpair(); a.send(b'p'); print('pair', b.recv(1))\n"
        "socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP).close()\n"
        "print('tcp socket made')\n"
    ) % (port, uport)
    try:
        r = run(["python3", "-c", code])
        assert "OPEN" not in r.text and r.text.count("refused") == 6, r.describe()
        assert "pair b'p'" in r.text and "tcp socket made" in r.text, r.describe()
        try:
            lst.accept()
            assert False, "the listener got a connection"
        except socket.timeout:
            pass
        try:
            udp.recvfrom(16)
            assert False, "the UDP socket got a datagram"
        except socket.timeout:
            pass
    finally:
        lst.close()
        udp.close()


@case
def memory_limit_reason():
    with tempfile.TemporaryDirectory() as d:
        rec = os.path.join(d, "r.json")
        r = run(["python3", "-c", "b = bytearray(256 << 20); print(len(b))"],
                opts=["--memory", "64M", "--result", rec])
        assert r.rc != 0, r.describe()
        doc = json.load(open(rec))
        assert doc.get("reason") == "memory", doc
        assert doc.get("backend", "process") == "process", doc


@case
def refusals():
    for opts, word in ((["--allow", "example.com:443"], "egress rules"),
                       (["-t"], "terminal"),
                       (["--ro", "/etc/hostname:/input/h"], "no mounts")):
        r = run(["/bin/true"], opts)
        assert r.rc != 0 and word in r.errtext and "backend process" in r.errtext, r.describe()


def main():
    r = run_host([AIRLOCK, "backends", "--json"], timeout=30)
    doc = json.loads(r.text)
    rows = doc if isinstance(doc, list) else doc.get("backends", [])
    me = [b for b in rows if b.get("name") == "process"]
    print("1..%d" % len(cases))
    if not me or not me[0].get("usable"):
        why = me[0].get("why", "not built") if me else "not built"
        for i, c in enumerate(cases, 1):
            print("ok %d %s # SKIP backend process unusable: %s" % (i, c.__name__, why))
        return 0
    bad = 0
    for i, c in enumerate(cases, 1):
        try:
            c()
            print("ok %d %s" % (i, c.__name__))
        except Exception as e:  # noqa: BLE001
            bad += 1
            print("not ok %d %s" % (i, c.__name__))
            for line in str(e).splitlines():
                print("# " + line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
