#!/usr/bin/env python3
"""The microvm backend's VMM (`airlock __vmm`, src/backend/microvm/vmm.c)
without a VM: config.qemu is vmm_guest.py, a scripted guest speaking the
channel protocol on its stdin and stdout. Proves: the guest command's
output, stdin (past one window) and exit code relayed; its death by a
signal that only stops (SIGTSTP) as exit 148, not a stopped VMM; the
guest's LOG lines bounded (100); its death by a
signal and the memory verdict passed on as vmm.h says; a guest that sends
garbage, floods STDOUT past its window, never says HELLO, stops answering
pings or whose QEMU dies ends with its one line and SIGUSR1, quickly; 100
MiB of output passes with the VMM's peak RSS under 64 MiB; a connection
carried to a TCP server of the test's own on 127.0.0.1:3128 inside a
network namespace the test made, and two refused; a DNS datagram answered; --copy-in and
--copy-out through the VMM's /work (a tmpfs in a mount namespace of the
test's), and a guest path with ".." refused, as are a file below a link
the guest made, a file over its link and a directory over its file;
stream ids and credits confused and EXIT forged (before EXEC_STARTED,
twice) end the run with their protocol error, OPENs outside the allowed
set refused; a session's execs on the VMM's socket (several at once,
stdin, signals, a hang-up that kills, the 16-exec bound, bad requests
refused without harm to the session, a file operation's flag and an
exec's memory limit passed on,
a pause longer than the silence limit not taken for a silent guest), and
a session's guest sending STARTED, STDOUT or EXIT for an id it was not
given ended with its protocol error; terminals (a session's tty exec, and
-t's "tty": true): raw, the size in the EXEC, resizes as WINSIZE; a bad CONFIG_JSON refused with exit
125 naming the field. TAP."""
import array
import atexit
import errno
import fcntl
import json
import shutil
import os
import signal
import socket
import struct
import subprocess
import sys
import select
import tempfile
import termios
import threading
import time
import traceback

AIRLOCK = os.path.abspath(sys.argv[1])
GUEST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "vmm_guest.py")
# The file cases mount a tmpfs on /work, which may hide the build tree:
# they run copies of airlock (static) and the guest from here.
COPIES = tempfile.mkdtemp(prefix="airlock-vmm-test.", dir="/var/tmp")
atexit.register(shutil.rmtree, COPIES, True)
cases = []


class Skip(Exception):
    pass


def case(f):
    cases.append(f)
    return f


def copies():
    """airlock and the guest where a tmpfs on /work does not hide them."""
    a, g = os.path.join(COPIES, "airlock"), os.path.join(COPIES, "vmm_guest.py")
    if not os.path.exists(a):
        shutil.copy(AIRLOCK, a)
        shutil.copy(GUEST, g)
    return a, g


def config(mode, guest=GUEST, **kw):
    c = {"qemu": [sys.executable, guest, mode], "boot_timeout_ms": 5000, "silence_ms": 3000,
         "exec": {"argv": ["echo", "hi"], "env": ["A=1", "B=two"], "cwd": "/work"},
         "network": False, "copy_in": False, "copy_out": None}
    c.update(kw)
    return json.dumps(c)


def vmm(mode, stdin=b"", wrap=(), timeout=30, env=None, **kw):
    t = time.monotonic()
    p = subprocess.run(list(wrap) + [AIRLOCK, "__vmm", config(mode, **kw)], input=stdin,
                       capture_output=True, timeout=timeout, env=env)
    return p, time.monotonic() - t


def guest_failed(p, line, took, within=10):
    err = p.stderr.decode(errors="replace")
    assert p.returncode == -signal.SIGUSR1, (p.returncode, err)
    assert "airlock: microvm: " + line in err, err
    assert took < within, took


@case
def output_and_exit_code():
    """stdout, stderr, a sanitised LOG line and the exit code."""
    p, _ = vmm("ok")
    out, err = p.stdout.decode(), p.stderr.decode()
    assert p.returncode == 3, (p.returncode, err)
    assert out == "argv=echo,hi cwd=/work\n", out
    assert "env=A=1,B=two\n" in err, err
    assert "airlock: microvm: guest: a log line?[31m\n" in err, err


@case
def stdin_relayed_with_windows():
    """300 KiB of stdin (more than one window) reaches the guest whole."""
    data = bytes(range(256)) * 1200
    p, _ = vmm("stdin", stdin=data)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(b"stdin=%d:" % len(data) + data[:20]), p.stdout[:60]


@case
def death_by_signal():
    """The guest command killed by SIGTERM: the VMM dies by SIGTERM."""
    p, _ = vmm("signal")
    assert p.returncode == -signal.SIGTERM, (p.returncode, p.stderr)


@case
def stop_signal_not_raised():
    """A wait status naming a signal that stops rather than ends (SIGTSTP):
    the VMM must not raise it on itself (it would stop, and the run hang
    until its timeout) but exit with 128 + 20."""
    p, took = vmm("stopsig", timeout=10)
    assert p.returncode == 128 + signal.SIGTSTP, (p.returncode, p.stderr)


@case
def log_lines_bounded():
    """5000 LOG lines from the guest: the first 100 on stderr, one line
    saying the rest were dropped, and the run ends as the guest said."""
    p, _ = vmm("logflood")
    err = p.stderr.decode(errors="replace")
    assert p.returncode == 0, (p.returncode, err[-500:])
    lines = [x for x in err.splitlines() if x.startswith("airlock: microvm: guest: ")]
    assert len(lines) == 101, len(lines)
    assert lines[99] == "airlock: microvm: guest: line 99", lines[99]
    assert "more than 100 lines: the rest dropped" in lines[100], lines[100]


@case
def memory_verdict():
    """The guest's memory limit killed it: the VMM dies by SIGUSR2."""
    p, _ = vmm("oom")
    assert p.returncode == -signal.SIGUSR2, (p.returncode, p.stderr)


@case
def garbage():
    """Bytes that are no frame end the run at once."""
    p, took = vmm("garbage")
    guest_failed(p, "the guest broke the channel protocol: a bad frame header", took, 4)


@case
def flood_past_window():
    """STDOUT past its window while nobody reads our stdout: ended, not
    buffered."""
    r, w = os.pipe()
    t = time.monotonic()
    p = subprocess.run([AIRLOCK, "__vmm", config("flood")], stdin=subprocess.DEVNULL, stdout=w,
                       stderr=subprocess.PIPE, timeout=30)
    took = time.monotonic() - t
    os.close(w)
    os.close(r)
    guest_failed(p, "the guest broke the channel protocol: STDOUT past its window", took, 4)


def peak_kb(mode, rc):
    """The VMM's VmHWM in kB at the guest's EXIT (the guest reads it from
    /proc/PPID), and how many bytes came out on its stdout."""
    with tempfile.NamedTemporaryFile() as f:
        env = dict(os.environ, VMM_HWM_FILE=f.name)
        p = subprocess.Popen([AIRLOCK, "__vmm", config(mode)], stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        n = 0
        while True:
            b = p.stdout.read(1 << 20)
            if not b:
                break
            n += len(b)
        err = p.stderr.read()
        assert p.wait(timeout=30) == rc, (p.returncode, err)
        return int(open(f.name).read()), n


@case
def big_output_bounded():
    """100 MiB of STDOUT within the windows: all of it out, and the VMM's
    peak RSS within 24 MiB of its peak for a run with almost no output (so that a sanitizer's own overhead does not count:
    vmm-internal.h bounds the VMM's buffers at 19 MiB in all)."""
    base, _ = peak_kb("ok", 3)
    hwm, n = peak_kb("bigout", 0)
    print("# VMM VmHWM %d kB for 100 MiB of output, %d kB for a line" % (hwm, base))
    assert n == 100 << 20, n
    assert hwm - base < 24 * 1024, (hwm, base)


@case
def no_hello():
    """A guest that never says HELLO: ended at the boot timeout."""
    p, took = vmm("nohello", boot_timeout_ms=1500)
    guest_failed(p, "the guest did not boot within 2 s", took, 6)


@case
def stops_answering():
    """A guest that stops answering pings: ended after silence_ms."""
    p, took = vmm("silent", silence_ms=2000)
    guest_failed(p, "the guest stopped answering for 2 s", took, 7)


@case
def qemu_dies():
    """QEMU exiting early: its status and its stderr's tail."""
    p, took = vmm("qemu-dies")
    guest_failed(p, "QEMU exited with status 3", took, 5)
    assert "qemu-system-x86_64: something broke" in p.stderr.decode(), p.stderr


@case
def off_at_boot():
    """A guest powering off before HELLO (its agent could not set up):
    said so, not as a bare QEMU exit status; pointing at the guest's own
    lines when it sent some first."""
    p, took = vmm("off-at-boot")
    guest_failed(p, "the guest powered off during its boot, before its agent answered", took, 5)
    assert "QEMU exited with status" not in p.stderr.decode(), p.stderr
    assert "had a channel" in p.stderr.decode(), p.stderr
    # One that said why first: its line, and the message pointing at it.
    p, took = vmm("off-at-boot-said")
    guest_failed(p, "the guest powered off during its boot, before its agent answered: its "
                 "setup failed", took, 5)
    assert "guest agent: mount none on /airlock/root: no space" in p.stderr.decode(), p.stderr


def in_namespace(*flags, setup="ip link set lo up"):
    if os.geteuid() != 0:
        raise Skip("needs root for unshare %s" % " ".join(flags))
    return ["unshare"] + list(flags) + ["sh", "-c", setup + ' && exec "$@"', "sh"]


@case
def connection_carried():
    """In a network namespace of the test's own: a stream to 127.0.0.1:3128
    (the guest's server there) carried both ways with SHUT and CLOSE; port 22
    of 127.0.0.1 and 10.0.0.1:80 refused with EACCES (13) before any
    connect; a DNS datagram to 127.0.0.1:53 there answered with its id."""
    p, _ = vmm("net", wrap=in_namespace("-n"), network=True)
    assert p.returncode == 0, (p.returncode, p.stderr)
    assert p.stdout == b"open=11 got=echo:hello 22=12/13 80=12/13 dgram=17/4/ans:query\n", \
        p.stdout


@case
def hostile_channel():
    """Stream ids and credits confused, EXIT forged: each ends the run with
    its protocol error at once (in a network namespace of the test's own,
    with the guest's server on 127.0.0.1:3128 there); OPENs to 127.0.0.2,
    port 0, a fake address (198.18.1.1) at ports other than 80 and 443, and
    198.20.0.1:443 (outside 198.18.0.0/15) refused with EACCES."""
    for what, line in (
            ("exit-before-start", "EXIT for exec 1, which is not running"),
            ("exit-twice", "message type 8 after POWEROFF"),
            ("stdin-credit", "WINDOW of stdin acknowledges more than was sent"),
            ("window-unknown", "message type 16 for stream 99, which is not open"),
            ("close-then-data", "message type 13 for stream 7, which is not open"),
            ("reuse", "OPEN of stream 7, which is open"),
            ("credit-overflow", "WINDOW of stream 7 acknowledges more than was sent")):
        p, took = vmm("hostile", wrap=in_namespace("-n"), network=True,
                      env=dict(os.environ, HOSTILE=what))
        guest_failed(p, "the guest broke the channel protocol: " + line, took, 4)
    p, _ = vmm("hostile", wrap=in_namespace("-n"), network=True,
               env=dict(os.environ, HOSTILE="refused"))
    assert p.returncode == 0, (p.returncode, p.stderr)
    assert p.stdout == b"12/13 12/13 12/13 12/13 12/13\n", p.stdout


@case
def no_network_refused():
    """network false: every OPEN refused (the server is never reached)."""
    p, _ = vmm("net", wrap=in_namespace("-n"), timeout=15)
    assert p.returncode == 0, (p.returncode, p.stderr)
    assert p.stdout == b"open=12 got=none 22=12/13 80=12/13\n", p.stdout


@case
def files_in_and_out():
    """--copy-in sends the VMM's /work tree (a file, a directory, a link,
    not followed); --copy-out writes the guest's tree back into an emptied
    /work within the caps."""
    setup = ("mount -t tmpfs tmpfs /work && mkdir /work/d && printf 123 > /work/d/f && "
             "ln -s /etc/passwd /work/l && printf x > /work/gone")
    # The guest lists what came in on STDOUT, then sends back its own
    # tree; after the run /work's contents are printed.
    cmd = in_namespace("-m", setup=setup)
    airlock, guest = copies()
    cfg = config("files", guest=guest, copy_in=True, copy_out={"bytes": 1000, "files": 10})
    p = subprocess.run(cmd + ["sh", "-c", '"$0" __vmm "$1"; echo rc=$?; cd /work && '
                              'find . | sort && cat out/new && echo && readlink out/link',
                              airlock, cfg], capture_output=True, timeout=30)
    out = p.stdout.decode()
    lines = out.splitlines()
    assert lines[0] == "in: DIR d; LINK l=/etc/passwd; REG d/f=123; REG gone=x", (out, p.stderr)
    assert "rc=0" in lines, (out, p.stderr)
    assert lines[lines.index("rc=0") + 1:] == [".", "./out", "./out/link", "./out/new",
                                               "newdata../x", "../../etc/shadow"], out


@case
def copy_out_escape_refused():
    """A FILE_BEGIN path with ".." ends the run as a protocol error, and
    nothing is written outside /work."""
    cmd = in_namespace("-m", setup="mount -t tmpfs tmpfs /work")
    airlock, guest = copies()
    cfg = config("files-evil", guest=guest, copy_out={"bytes": 1000, "files": 10})
    p = subprocess.run(cmd + ["sh", "-c", '"$0" __vmm "$1"; echo rc=$?; ls -A /work; ls /x',
                              airlock, cfg], capture_output=True, timeout=30)
    assert b"the guest broke the channel protocol: FILE_BEGIN with a path refused" in p.stderr, \
        p.stderr
    assert p.stdout == b"rc=138\n", p.stdout
    assert b"ls: cannot access '/x'" in p.stderr, p.stderr


@case
def copy_out_links_refused():
    """The guest's copy-out making a link and then a file below it, a file
    over its own link, or a directory over its own file: each ends the run
    with the path named, and nothing is written through the link (to /x)."""
    cmd = in_namespace("-m", setup="mount -t tmpfs tmpfs /work")
    airlock, guest = copies()
    cfg = config("files-evil", guest=guest, copy_out={"bytes": 1000, "files": 10})
    for what, line in (("link-parent", "--copy-out: /work/l/f: "),
                       ("link-over", "--copy-out: /work/l: File exists"),
                       ("replace", "--copy-out: /work/d: File exists")):
        p = subprocess.run(cmd + ["sh", "-c", '"$0" __vmm "$1"; echo rc=$?; ls /x',
                                  airlock, cfg], capture_output=True, timeout=30,
                           env=dict(os.environ, EVIL=what))
        assert ("airlock: microvm: " + line).encode() in p.stderr, (what, p.stderr)
        assert p.stdout == b"rc=138\n", (what, p.stdout)
        assert b"ls: cannot access '/x'" in p.stderr, (what, p.stderr)


@case
def copy_out_caps():
    """More bytes than FILES_GET allowed: refused on the host side."""
    cmd = in_namespace("-m", setup="mount -t tmpfs tmpfs /work")
    airlock, guest = copies()
    cfg = config("files", guest=guest, copy_in=False, copy_out={"bytes": 5, "files": 10})
    p = subprocess.run(cmd + [airlock, "__vmm", cfg], capture_output=True, timeout=30)
    assert p.returncode == -signal.SIGUSR1, (p.returncode, p.stderr)
    assert b"protocol: more bytes than the 5 asked for" in p.stderr, p.stderr


REQ_EXEC, REQ_SIGNAL = 1, 2
ANS_STARTED, ANS_FAILED, ANS_ENDED = 1, 2, 3


def exec_payload(argv, env=(), cwd="/work"):
    strs = [cwd] + list(argv) + list(env)
    return struct.pack("<II", len(argv), len(env)) + b"".join(x.encode() + b"\0" for x in strs)


class Client:
    """One exec of a session's VMM: a connection to its socket, the request
    with three pipes' ends (or what a case passes instead), and threads
    that read the exec's stdout and stderr whole."""

    def __init__(self, path, argv, env=(), stdin=b"", nfds=3, header=None, flags=0,
                 trailer=b"", tty=None):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(20)
        self.s.connect(path)
        payload = exec_payload(argv, env) + trailer
        hdr = header or struct.pack("<BBHI", REQ_EXEC, flags, 0, len(payload))
        self.master = None
        if tty:  # no fds: the VMM makes the pty and sends its master with STARTED
            self.s.sendall(hdr + payload)
            self.readers = []
            return
        pipes = [os.pipe() for _ in range(3)]
        far = [pipes[0][0], pipes[1][1], pipes[2][1]][:nfds]
        self.s.sendmsg([hdr + payload], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                          array.array("i", far))])
        for fd in (pipes[0][0], pipes[1][1], pipes[2][1]):
            os.close(fd)
        self.got = [b"", b""]
        self.readers = [threading.Thread(target=self._read, args=(i, pipes[1 + i][0]))
                        for i in range(2)]
        for t in self.readers:
            t.start()
        self.stdin = pipes[0][1]
        self.writer = threading.Thread(target=self._write, args=(stdin,))
        self.writer.start()

    def _read(self, i, fd):
        with os.fdopen(fd, "rb") as f:
            self.got[i] = f.read()

    def _write(self, data):
        try:
            with os.fdopen(self.stdin, "wb") as f:
                f.write(data)
        except BrokenPipeError:
            pass

    def answer(self):
        """(type, payload), or None when the VMM closed the connection."""
        b = b""
        while len(b) < 8:
            c = self.s.recv(8 - len(b))
            if not c:
                return None
            b += c
        t, _, _, n = struct.unpack("<BBHI", b)
        p = b""
        while len(p) < n:
            c = self.s.recv(n - len(p))
            assert c, "the answer cut short"
            p += c
        return t, p

    def started_tty(self):
        """STARTED of a tty exec, with the pty's master (SCM_RIGHTS on its
        first bytes): the pid; the master in self.master."""
        fds = array.array("i")
        msg, anc, _, _ = self.s.recvmsg(12, socket.CMSG_SPACE(4 * fds.itemsize))
        for level, kind, data in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(data[:len(data) - len(data) % fds.itemsize])
        while len(msg) < 12:
            c = self.s.recv(12 - len(msg))
            assert c, "STARTED cut short"
            msg += c
        t, _, _, n = struct.unpack("<BBHI", msg[:8])
        assert t == ANS_STARTED and n == 4 and len(fds) == 1, (msg, list(fds))
        self.master = fds[0]
        return struct.unpack("<I", msg[8:])[0]

    def started(self):
        a = self.answer()
        assert a and a[0] == ANS_STARTED and len(a[1]) == 4, a
        return struct.unpack("<I", a[1])[0]

    def failed(self):
        a = self.answer()
        assert a and a[0] == ANS_FAILED and len(a[1]) == 4, a
        assert self.answer() is None, "the connection stays open after FAILED"
        return struct.unpack("<I", a[1])[0]

    def ended(self):
        """The wait status, once the output is whole (it came before)."""
        a = self.answer()
        assert a and a[0] == ANS_ENDED and len(a[1]) == 32, a
        assert self.answer() is None, "the connection stays open after ENDED"
        for t in self.readers:
            t.join(20)
        return struct.unpack("<iB3xQQQ", a[1])

    def signal(self, sig):
        self.s.sendall(struct.pack("<BBHII", REQ_SIGNAL, 0, 0, 4, sig))

    def close(self):
        self.s.close()
        for t in self.readers + [self.writer]:
            t.join(20)


def session_vmm(**kw):
    """A session's VMM in a mount namespace of the test's own (its socket
    goes to /tmp there, a tmpfs), and its socket's path from here."""
    airlock, guest = copies()
    c = json.loads(config("session", guest=guest, **kw))
    del c["exec"]
    c["session"] = True
    cmd = in_namespace("-m", setup="mount -t tmpfs tmpfs /tmp")
    p = subprocess.Popen(cmd + [airlock, "__vmm", json.dumps(c)], stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    path = "/proc/%d/root/tmp/.airlock-vmm.sock" % p.pid
    deadline = time.monotonic() + 20
    while not os.path.exists(path):
        assert p.poll() is None and time.monotonic() < deadline, p.stderr.read()
        time.sleep(0.01)
    return p, path


@case
def session_forged_ids():
    """A session's guest that sends EXEC_STARTED, STDOUT or EXIT for an
    exec id it was not given (one not yet asked for, the configured exec's
    id 1, one never used): the VMM ends the session with its protocol
    error (SIGUSR1), and the client's exec ends with the connection."""
    for what, line in (("started", "EXEC_STARTED for exec 3, which was not asked for"),
                       ("stdout", "STDOUT for exec 1, which is not running"),
                       ("exit", "EXIT for exec 7, which is not running")):
        p, path = session_vmm()
        try:
            c = Client(path, ["forge", what])
            a = c.answer()
            if what == "exit":
                assert a and a[0] == ANS_STARTED, a
                a = c.answer()
            assert a is None, a
            c.close()
        finally:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
            rc = p.wait(20)
            err = p.stderr.read().decode(errors="replace")
        assert rc == -signal.SIGUSR1, (what, rc, err)
        assert "the guest broke the channel protocol: " + line in err, (what, err)


@case
def session_execs():
    """A session ("session": true): execs on the VMM's socket, one
    connection each. An exec asked for during the boot runs once the guest
    is up (id 2, its argv, cwd, env, stdout and stderr through the passed
    fds, ENDED after them); two at once, one with 300 KiB of stdin (past
    one window) sent back whole while the other is signalled (SIGTERM,
    ended by it); a missing command FAILED ENOENT; a hang-up kills its
    exec (SIGNAL 9); 16 execs at once and the 17th FAILED EAGAIN, the
    slots free again once their clients went; a request with two fds, a
    bad header, flags other than 0, 1, 2 (and 4, 6: session_tty), a memory
    limit missing or
    zero, or signal 0 FAILED EINVAL, the session unharmed; a file
    operation's flag 1 and an exec's memory limit (flag 2 and its trailer)
    reach the guest's EXEC; SIGTERM ends the VMM by SIGTERM."""
    p, path = session_vmm()
    try:
        a = Client(path, ["echo", "a b"], env=["K=V"])  # while the guest boots
        assert a.started() == 102
        assert a.ended()[0] == 0
        assert a.got == [b"id=2 argv=echo,a b cwd=/work\n", b"env=K=V\n"], a.got

        data = bytes(range(256)) * 1200
        cat = Client(path, ["cat"], stdin=data)
        sleep = Client(path, ["sleep"])
        cat.started(), sleep.started()
        sleep.signal(15)
        st = sleep.ended()
        assert st[0] == 15, st
        assert cat.ended()[0] == 0
        assert cat.got[0] == data, len(cat.got[0])

        assert Client(path, ["missing"]).failed() == errno.ENOENT

        gone = Client(path, ["sleep"])
        gone_pid = gone.started()
        gone.close()

        many = [Client(path, ["sleep"]) for _ in range(16)]
        for m in many:
            m.started()
        assert Client(path, ["echo"]).failed() == errno.EAGAIN
        for m in many:
            m.close()
        deadline = time.monotonic() + 20
        while True:  # the slots come free as the guest reports each end
            e = Client(path, ["events"])
            a = e.answer()
            if a[0] == ANS_STARTED:
                break
            assert a == (ANS_FAILED, struct.pack("<I", errno.EAGAIN)), a
            assert time.monotonic() < deadline, "the slots never came free"
            e.close()
            time.sleep(0.05)
        assert e.ended()[0] == 0
        events = e.got[0].decode()
        assert "%d:9" % (gone_pid - 100) in events.split("seen=")[0].split(), events
        seen = events.split("seen=")[1].split(",")
        assert len(seen) == len(set(seen)), events

        assert Client(path, ["echo"], nfds=2).failed() == errno.EINVAL
        assert Client(path, ["echo"], header=struct.pack("<BBHI", REQ_EXEC, 8, 0, 20)
                      ).failed() == errno.EINVAL
        assert Client(path, ["echo"], flags=3).failed() == errno.EINVAL
        # An exec's own memory limit (flag 2): the trailer reaches the
        # guest's EXEC; one missing or zero is refused.
        mem = Client(path, ["echo"], flags=2, trailer=struct.pack("<Q", 64 << 20))
        mem.started()
        assert mem.ended()[0] == 0 and mem.got[0].endswith(b" flags=2 memory=67108864\n"), \
            mem.got
        assert Client(path, ["echo"], flags=2).failed() == errno.EINVAL
        assert Client(path, ["echo"], flags=2, trailer=bytes(8)).failed() == errno.EINVAL
        # A file operation's flag (1) passes to the guest's EXEC unchanged.
        fop = Client(path, ["echo", "/work/x"], flags=1)
        fop.started()
        assert fop.ended()[0] == 0 and fop.got[0].endswith(b" flags=1\n"), fop.got
        bad = Client(path, ["sleep"])
        bad.started()
        bad.signal(0)
        assert bad.failed() == errno.EINVAL
        ok = Client(path, ["echo"])
        ok.started()
        assert ok.ended()[0] == 0 and ok.got[0].startswith(b"id="), ok.got
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
        rc = p.wait(20)
        err = p.stderr.read().decode(errors="replace")
    assert rc == -signal.SIGTERM, (rc, err)
    assert "airlock: microvm" not in err, err


def read_until(fd, want, timeout=10):
    """What fd gives until want is in it (or its end, EIO for a pty's
    master), within timeout."""
    got, end = b"", time.monotonic() + timeout
    while want not in got:
        left = end - time.monotonic()
        assert left > 0, (want, got)
        r, _, _ = select.select([fd], [], [], left)
        if not r:
            continue
        try:
            c = os.read(fd, 4096)
        except OSError as e:
            assert e.errno == errno.EIO, e
            c = b""
        if not c:
            break
        got += c
    return got


def set_size(fd, rows, cols):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("<HHHH", rows, cols, 0, 0))


@case
def session_tty():
    """A session's tty exec (flag 4, rows and cols in its trailer, no fds):
    the VMM makes a pty of its size and sends its master with STARTED; its
    slave is raw (no echo, no line mode, no CR/NL translation either way:
    the guest's pty does the discipline), the guest's EXEC carries flag 4 and the size; input typed
    on the master reaches the guest unchanged and its output comes back
    unchanged; a resize of the pty reaches the guest as WINSIZE with the
    new size within the VMM's wake-up (a second); with a memory limit too
    (flag 6) both trailers reach the guest; the exit code comes back and
    the master reads its end once the exec ended (the VMM kept no slave).
    A tty request that brings fds, or with rows 0, rows 1001 or a short
    trailer, is refused EINVAL, the session unharmed."""
    p, path = session_vmm()
    try:
        c = Client(path, ["tty"], flags=4, trailer=struct.pack("<HHI", 30, 100, 0), tty=True)
        c.started_tty()
        master = c.master
        assert os.isatty(master)
        assert b"tty=30x100\n" in read_until(master, b"tty=30x100\n")
        attrs = termios.tcgetattr(master)
        assert not attrs[3] & (termios.ECHO | termios.ICANON | termios.ISIG), attrs
        assert not attrs[1] & termios.OPOST and not attrs[0] & termios.ICRNL, attrs
        os.write(master, b"a\rb\n\x03")
        assert read_until(master, b"a\rb\n\x03").endswith(b"a\rb\n\x03")
        set_size(master, 50, 160)
        t = time.monotonic()
        read_until(master, b"winsize=50x160\n", timeout=5)
        assert time.monotonic() - t < 3, time.monotonic() - t
        os.write(master, b"q")
        assert c.ended()[0] == 7 << 8
        read_until(master, b"never", timeout=10)  # the end (EIO): nothing holds the slave
        os.close(master)

        both = Client(path, ["tty"], flags=6,
                      trailer=struct.pack("<Q", 64 << 20) + struct.pack("<HHI", 24, 80, 0),
                      tty=True)
        both.started_tty()
        read_until(both.master, b"tty=24x80\n")
        os.write(both.master, b"q")
        assert both.ended()[0] == 7 << 8
        os.close(both.master)

        for trailer in (struct.pack("<HHI", 0, 80, 0), struct.pack("<HHI", 1001, 80, 0),
                        struct.pack("<HH", 24, 80)):
            bad = Client(path, ["tty"], flags=4, trailer=trailer, tty=True)
            assert bad.failed() == errno.EINVAL, trailer
        # A tty request that brings fds (the pty is the VMM's to make).
        assert Client(path, ["tty"], flags=4,
                      trailer=struct.pack("<HHI", 24, 80, 0)).failed() == errno.EINVAL
        ok = Client(path, ["echo"])
        ok.started()
        assert ok.ended()[0] == 0 and ok.got[0].startswith(b"id="), ok.got
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
        rc = p.wait(20)
        err = p.stderr.read().decode(errors="replace")
    assert rc == -signal.SIGTERM, (rc, err)
    assert "airlock: microvm" not in err, err


@case
def oneshot_tty():
    """-t ("tty": true): the VMM's stdio is a pty's slave (its controlling
    terminal, as the native layer gives it): the EXEC carries flag 4 and
    the pty's size, the pty is made raw, typed bytes pass unchanged, a
    resize (SIGWINCH) reaches the guest as WINSIZE, the exit code comes
    back. "tty": true with stdin not a terminal: exit 125, said."""
    master, slave = os.openpty()
    set_size(master, 33, 111)

    def ctty():
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    p = subprocess.Popen([AIRLOCK, "__vmm", config("tty", tty=True)], stdin=slave,
                         stdout=slave, stderr=subprocess.PIPE, preexec_fn=ctty)
    os.close(slave)
    try:
        read_until(master, b"tty=33x111 flags=4\n")
        attrs = termios.tcgetattr(master)
        assert not attrs[3] & (termios.ECHO | termios.ICANON), attrs
        os.write(master, b"x\ry")
        read_until(master, b"x\ry")
        set_size(master, 40, 120)
        t = time.monotonic()
        read_until(master, b"winsize=40x120\n", timeout=5)
        assert time.monotonic() - t < 2, time.monotonic() - t
        os.write(master, b"q")
        rc = p.wait(20)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        os.close(master)
    assert rc == 7, (rc, p.stderr.read())
    q, _ = vmm("tty", tty=True)
    assert q.returncode == 125, q.returncode
    assert b'"tty": true, but stdin' in q.stderr, q.stderr


@case
def paused_session_not_silent():
    """A session's VMM that did not run for longer than its silence limit
    (stopped here as a pause freezes the run's cgroup; the scripted guest
    runs on) does not blame the guest: after it runs again, an exec works
    and the VMM ends by SIGTERM, not by "stopped answering"."""
    p, path = session_vmm(silence_ms=1500)
    try:
        a = Client(path, ["echo", "before"])
        a.started()
        assert a.ended()[0] == 0
        os.kill(p.pid, signal.SIGSTOP)
        time.sleep(3.5)
        os.kill(p.pid, signal.SIGCONT)
        time.sleep(0.5)
        assert p.poll() is None, p.stderr.read()
        b = Client(path, ["echo", "after"])
        b.started()
        assert b.ended()[0] == 0, b.got
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
        rc = p.wait(20)
        err = p.stderr.read().decode(errors="replace")
    assert rc == -signal.SIGTERM, (rc, err)
    assert "stopped answering" not in err, err


@case
def bad_config():
    """A missing or wrong field: exit 125 and a line naming it."""
    for mangle, what in ((lambda c: c.pop("silence_ms"), "silence_ms"),
                         (lambda c: c["exec"].update(argv=[]), "exec.argv"),
                         (lambda c: c.update(copy_out=7), "copy_out"),
                         (lambda c: c.update(extra=1), "extra: unknown field"),
                         (lambda c: c.update(session=True), "exec: not with"),
                         (lambda c: (c.pop("exec"), c.update(session=True,
                                                             copy_out={"bytes": 1, "files": 1})),
                          "copy_out: must be null with")):
        c = json.loads(config("ok"))
        mangle(c)
        p = subprocess.run([AIRLOCK, "__vmm", json.dumps(c)], capture_output=True, timeout=10)
        assert p.returncode == 125, (what, p.returncode)
        assert what in p.stderr.decode(), (what, p.stderr)
    p = subprocess.run([AIRLOCK, "__vmm", "{"], capture_output=True, timeout=10)
    assert p.returncode == 125 and b"CONFIG_JSON: line 1" in p.stderr, p.stderr


def main():
    print("1..%d" % len(cases))
    failed = 0
    for i, c in enumerate(cases, 1):
        try:
            c()
            print("ok %d %s" % (i, c.__name__))
        except Skip as e:
            print("ok %d %s # SKIP %s" % (i, c.__name__, e))
        except Exception:
            failed += 1
            print("not ok %d %s" % (i, c.__name__))
            for line in traceback.format_exc().splitlines():
                print("# " + line)
        sys.stdout.flush()
    return 1 if failed else 0


sys.exit(main())
