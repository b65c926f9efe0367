#!/usr/bin/env python3
"""A stand-in for QEMU and the guest agent, for run_vmm.py: `airlock __vmm`
starts it as config.qemu with the channel on its stdin and stdout, and it
speaks the channel protocol (src/guest/proto.h) as one scripted guest,
well or badly: python3 vmm_guest.py MODE. Before its EXIT it writes its
parent's (the VMM's) VmHWM to $VMM_HWM_FILE when that is set."""
import os
import socket
import struct
import sys
import threading
import time

(HELLO, EXEC, EXEC_STARTED, EXEC_FAILED, STDIN, STDOUT, STDERR, EXIT, SIGNAL, OPEN, OPEN_OK,
 OPEN_FAILED, DATA, SHUT, CLOSE, WINDOW, DGRAM, PING, PONG, FILE_BEGIN, FILE_DATA, FILE_END,
 FILES_DONE, FILES_GET, POWEROFF, LOG, WINSIZE) = range(1, 28)
WINDOW_BYTES = 256 * 1024
MODE = sys.argv[1]
inp = sys.stdin.buffer
out = sys.stdout.buffer
lock = threading.Lock()


def send(t, ident=0, payload=b"", flags=0):
    with lock:
        out.write(struct.pack("<BBHII", t, flags, 0, ident, len(payload)) + payload)
        out.flush()


def read_exact(n):
    b = b""
    while len(b) < n:
        c = inp.read(n - len(b))
        if not c:
            sys.exit(0)
        b += c
    return b


def recv():
    t, flags, _, ident, n = struct.unpack("<BBHII", read_exact(12))
    return t, flags, ident, read_exact(n)


def recv_not_ping(answer=True, skip=()):
    """The next message that is not a PING (answered unless told) nor of
    a type in skip."""
    while True:
        m = recv()
        if m[0] in skip:
            continue
        if m[0] != PING:
            return m
        if answer:
            send(PONG, 0, m[3])


def exit_msg(status, oom=0):
    return struct.pack("<iB3xQQQ", status, oom, 1000, 2000, 3 << 20)


def hwm():
    path = os.environ.get("VMM_HWM_FILE")
    if not path:
        return
    with open("/proc/%d/status" % os.getppid()) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                with open(path, "w") as o:
                    o.write(line.split()[1])


def start():
    send(HELLO, 0, struct.pack("<I", 1) + b"6.1.0-fake")
    t, _, ident, p = recv_not_ping()
    assert t == EXEC and ident == 1, (t, ident)
    send(EXEC_STARTED, 1, struct.pack("<I", 42))
    return p


def finish(status, oom=0):
    hwm()
    send(EXIT, 1, exit_msg(status, oom))
    while True:
        t, _, _, p = recv_not_ping()
        if t == POWEROFF:
            sys.exit(0)


def windowed_stdout(total, chunk=65536):
    """total bytes of STDOUT, never past the window the VMM grants."""
    credit = WINDOW_BYTES
    sent = 0
    while sent < total:
        while credit < chunk:
            t, flags, _, p = recv_not_ping()
            if t == WINDOW and flags == 2:
                credit += struct.unpack("<I", p)[0]
        n = min(chunk, total - sent)
        send(STDOUT, 1, b"x" * n)
        credit -= n
        sent += n


def mode_ok():
    p = start()
    argc, envc = struct.unpack("<II", p[:8])
    strs = p[8:].split(b"\0")[:-1]
    send(STDOUT, 1, b"argv=" + b",".join(strs[1:1 + argc]) + b" cwd=" + strs[0] + b"\n")
    send(STDERR, 1, b"env=" + b",".join(strs[1 + argc:]) + b"\n")
    send(LOG, 0, b"a log line\x1b[31m")
    finish(3 << 8)


def mode_stdin():
    start()
    got = b""
    while True:
        t, _, _, p = recv_not_ping()
        if t == STDIN:
            if not p:
                break
            got += p
            send(WINDOW, 1, struct.pack("<I", len(p)), flags=1)
    send(STDOUT, 1, b"stdin=%d:%s\n" % (len(got), got[:20]))
    finish(0)


def mode_tty():
    """-t ("tty": true): the EXEC's flags and its terminal's size ("tty=RxC
    flags=F"), then each STDIN chunk back on STDOUT as it came and each
    WINSIZE as "winsize=RxC"; a "q" typed ends it with exit code 7."""
    send(HELLO, 0, struct.pack("<I", 1) + b"6.1.0-fake")
    t, flags, ident, p = recv_not_ping()
    assert t == EXEC and ident == 1, (t, ident)
    send(EXEC_STARTED, 1, struct.pack("<I", 42))
    rows, cols, zero = struct.unpack("<HHI", p[-8:]) if flags & 4 else (0, 0, 0)
    assert zero == 0, zero
    send(STDOUT, 1, b"tty=%dx%d flags=%d\n" % (rows, cols, flags))
    while True:
        t, _, _, p = recv_not_ping()
        if t == STDIN and p:
            send(WINDOW, 1, struct.pack("<I", len(p)), flags=1)
            if b"q" in p:
                finish(7 << 8)
            send(STDOUT, 1, p)
        elif t == WINSIZE:
            send(STDOUT, 1, b"winsize=%dx%d\n" % struct.unpack("<HH", p))


def mode_signal():
    start()
    finish(15)  # SIGTERM


def mode_oom():
    start()
    finish(9, oom=1)


def mode_stopsig():
    """The command "killed" by SIGTSTP, a signal whose default action
    stops rather than ends (no real process dies of it)."""
    start()
    finish(20)


def mode_logflood():
    """5000 LOG lines (outside any window), then a normal end."""
    start()
    for i in range(5000):
        send(LOG, 0, b"line %d" % i)
    finish(0)


def mode_garbage():
    start()
    with lock:
        out.write(b"\xff" * 64)
        out.flush()
    time.sleep(5)


def mode_flood():
    """STDOUT far past the window the VMM granted."""
    start()
    try:
        for _ in range(100 * 16):
            send(STDOUT, 1, b"y" * 65536)
    except BrokenPipeError:
        pass
    time.sleep(5)


def mode_bigout():
    """100 MiB of STDOUT within the windows: the VMM passes it on bounded."""
    start()
    windowed_stdout(100 << 20)
    finish(0)


def mode_nohello():
    time.sleep(30)


def mode_silent():
    send(HELLO, 0, struct.pack("<I", 1) + b"6.1.0-fake")
    recv()  # the EXEC
    while True:
        recv()  # PINGs, never answered


def mode_off_at_boot():
    """The agent's death before its channel: the guest powers off, QEMU
    exits 0, nothing was said."""
    sys.exit(0)


def mode_off_at_boot_said():
    """The agent's death after its channel opened: its LOG, then off."""
    send(LOG, 0, b"guest agent: mount none on /airlock/root: no space")
    sys.exit(0)


def mode_qemu_dies():
    send(HELLO, 0, struct.pack("<I", 1) + b"6.1.0-fake")
    sys.stderr.write("qemu-system-x86_64: something broke\n")
    sys.exit(3)


def mode_net():
    """A server of our own on 127.0.0.1:3128 in the VMM's network
    namespace (the test made it); one stream carried there, echoed, and
    two refused: a port and an address outside the allowed set."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 3128))
    srv.listen(4)

    def serve():
        c, _ = srv.accept()
        data = b""
        while True:
            b = c.recv(4096)
            if not b:
                break
            data += b
        c.sendall(b"echo:" + data)
        c.close()

    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 53))

    def serve_udp():
        data, peer = udp.recvfrom(4096)
        udp.sendto(b"ans:" + data, peer)

    threading.Thread(target=serve, daemon=True).start()
    threading.Thread(target=serve_udp, daemon=True).start()
    start()
    res = []
    send(OPEN, 7, struct.pack("!BBHI", 6, 0, 3128, 0x7f000001))
    t, _, ident, p = recv_not_ping(skip=(STDIN,))
    res.append("open=%d" % t)
    got = b"none"
    if t == OPEN_OK:
        got = b""
        send(DATA, 7, b"hello")
        send(SHUT, 7)
        while True:
            t, flags, ident, p = recv_not_ping(skip=(STDIN,))
            if t == DATA:
                got += p
                send(WINDOW, 7, struct.pack("<I", len(p)))
            elif t in (SHUT, CLOSE):
                if t == CLOSE:
                    break
            # WINDOW credits for our DATA are taken as they come
    res.append("got=" + got.decode())
    for ident, port, addr in ((8, 22, 0x7f000001), (9, 80, 0x0a000001)):
        send(OPEN, ident, struct.pack("!BBHI", 6, 0, port, addr))
        t, _, _, p = recv_not_ping(skip=(STDIN, WINDOW))
        res.append("%d=%d/%d" % (port, t, struct.unpack("<I", p)[0] if len(p) == 4 else -1))
    if got != b"none":  # without network a datagram is dropped: not waited for
        send(DGRAM, 4, b"query")
        t, _, ident, p = recv_not_ping(skip=(STDIN, WINDOW))
        res.append("dgram=%d/%d/%s" % (t, ident, p.decode()))
    send(CLOSE, 7)
    send(STDOUT, 1, (" ".join(res) + "\n").encode())
    finish(0)


def files_in():
    """The copy-in tree as sorted entries (acknowledged with FILES_DONE),
    then the EXEC's payload."""
    send(HELLO, 0, struct.pack("<I", 1) + b"6.1.0-fake")
    entries, cur = [], None
    while True:
        t, _, ident, p = recv_not_ping()
        if t == EXEC:
            break
        if t == FILE_BEGIN:
            kind = p[4]
            cur = [{1: "DIR", 2: "REG", 3: "LINK"}[kind], p[5:-1].decode(), b""]
        elif t == FILE_DATA:
            cur[2] += p
        elif t == FILE_END:
            entries.append(cur[0] + " " + cur[1] + ("=" + cur[2].decode() if cur[0] != "DIR"
                                                     else ""))
        elif t == FILES_DONE:
            # As the agent does: the copy-in is acknowledged (no error)
            # before the host sends the EXEC.
            send(FILES_DONE, 0, struct.pack("<I", 0))
    send(EXEC_STARTED, 1, struct.pack("<I", 42))
    return sorted(entries)


def file_msgs(ident, kind, path, data=None):
    send(FILE_BEGIN, ident, struct.pack("<IB", 0o644, kind) + path + b"\0")
    if data is not None:
        send(FILE_DATA, ident, data)
    send(FILE_END, ident)


def until_files_get():
    hwm()
    send(EXIT, 1, exit_msg(0))
    while True:
        t, _, _, p = recv_not_ping()
        if t == FILES_GET:
            return


def mode_files():
    entries = files_in()
    send(STDOUT, 1, ("in: " + "; ".join(entries) + "\n").encode())
    until_files_get()
    file_msgs(1, 1, b"out")
    file_msgs(2, 2, b"out/new", b"newdata../x")
    file_msgs(3, 3, b"out/link", b"../../etc/shadow")
    send(FILES_DONE, 0, struct.pack("<I", 0))
    while recv_not_ping()[0] != POWEROFF:
        pass


def mode_files_evil():
    start()
    until_files_get()
    what = os.environ.get("EVIL", "dotdot")
    if what == "dotdot":
        file_msgs(1, 2, b"../x", b"escaped")
    elif what == "link-parent":
        # A link made earlier in the same copy-out, then a file below it.
        file_msgs(1, 3, b"l", b"/x")
        file_msgs(2, 2, b"l/f", b"escaped")
    elif what == "replace":
        # A file, then a directory (and a link) of the same name.
        file_msgs(1, 2, b"d", b"file")
        file_msgs(2, 1, b"d")
    elif what == "link-over":
        file_msgs(1, 3, b"l", b"/x")
        file_msgs(2, 2, b"l", b"escaped")
    time.sleep(5)


def open_ok(ident, port=3128, addr=0x7f000001):
    send(OPEN, ident, struct.pack("!BBHI", 6, 0, port, addr))
    while True:
        t, _, i, p = recv_not_ping()
        if t in (OPEN_OK, OPEN_FAILED) and i == ident:
            return t, p


def mode_hostile():
    """One attack on the VMM, named by $HOSTILE; the run_vmm case checks
    that the VMM ends it with the right line (or refuses the OPENs)."""
    what = os.environ["HOSTILE"]
    if what == "exit-before-start":
        send(HELLO, 0, struct.pack("<I", 1) + b"6.1.0-fake")
        recv_not_ping()
        send(EXIT, 1, exit_msg(0))
    elif what == "exit-twice":
        start()
        send(EXIT, 1, exit_msg(0))
        send(EXIT, 1, exit_msg(9, 1))
    elif what == "stdin-credit":
        start()
        send(WINDOW, 1, struct.pack("<I", 0xffffffff), flags=1)
    elif what == "window-unknown":
        start()
        send(WINDOW, 99, struct.pack("<I", 1))
    else:
        srv = socket.socket()
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind(("127.0.0.1", 3128))
        srv.listen(4)
        start()
        if what == "refused":
            res = []
            for port, addr in ((3128, 0x7f000002), (0, 0x7f000001), (22, 0xc6120101),
                               (3128, 0xc6120101), (443, 0xc6140001)):
                t, p = open_ok(len(res) + 10, port, addr)
                res.append("%d/%d" % (t, struct.unpack("<I", p)[0]))
            send(STDOUT, 1, (" ".join(res) + "\n").encode())
            finish(0)
        assert open_ok(7)[0] == OPEN_OK
        if what == "close-then-data":
            send(CLOSE, 7)
            send(DATA, 7, b"x")
        elif what == "reuse":
            send(OPEN, 7, struct.pack("!BBHI", 6, 0, 3128, 0x7f000001))
        elif what == "credit-overflow":
            send(WINDOW, 7, struct.pack("<I", 0xffffffff))
    time.sleep(5)



def mode_session():
    """A session's guest: HELLO after half a second (requests made during
    the boot wait for it), then several EXECs served at once, each by its
    argv[0]: "echo" prints its id, argv, cwd and env; "cat" sends its stdin
    back on STDOUT (within the windows both ways) until stdin ends;
    "sleep" waits for a SIGNAL and dies by it; "missing" fails with ENOENT;
    "forge started|stdout|exit" sends EXEC_STARTED for the next id, STDOUT
    for id 1 (the configured exec's, never a session's) or EXIT for an id
    five on;
    "big N" writes N bytes within the windows; "events" prints the SIGNALs
    every exec got ("id:sig ...") and the ids seen. The VMM's EXITs come
    with oom 0 and fixed CPU figures. "echo" also prints the EXEC's flags
    when they are not 0 (a file operation's, passed through). "tty" (flag
    4, a terminal) prints "tty=RxC" from its trailer, then sends its stdin
    back and each WINSIZE for it as "winsize=RxC"; a "q" ends it with
    exit code 7."""
    time.sleep(0.5)
    send(HELLO, 0, struct.pack("<I", 1) + b"6.1.0-fake")
    execs = {}  # id -> {"argv", "credit", "pending", "eof", "mode"}
    signals, seen = [], []

    def flush(ident):
        x = execs[ident]
        while x["pending"] and x["credit"]:
            n = min(len(x["pending"]), x["credit"], 65536)
            send(STDOUT, ident, x["pending"][:n])
            x["pending"] = x["pending"][n:]
            x["credit"] -= n
        if not x["pending"] and x["done"] is not None:
            send(EXIT, ident, exit_msg(x["done"]))
            del execs[ident]

    while True:
        t, flags, ident, p = recv_not_ping()
        if t == EXEC:
            memory = tty = None
            if flags & 4:  # a terminal: its trailer is the last
                tty, p = struct.unpack("<HHI", p[-8:])[:2], p[:-8]
            if flags & 2:  # an exec's own memory limit: the trailer
                memory, p = struct.unpack("<Q", p[-8:])[0], p[:-8]
            argc, envc = struct.unpack("<II", p[:8])
            strs = [x.decode() for x in p[8:].split(b"\0")[:-1]]
            cwd, argv, env = strs[0], strs[1:1 + argc], strs[1 + argc:]
            seen.append(ident)
            if argv[0] == "missing":
                send(EXEC_FAILED, ident, struct.pack("<I", 2) + b"no such file")
                continue
            if argv[0] == "forge":  # messages for ids this guest was not given
                if argv[1] == "started":
                    send(EXEC_STARTED, ident + 1, struct.pack("<I", 1))
                elif argv[1] == "stdout":
                    send(STDOUT, 1, b"x")
                else:
                    send(EXEC_STARTED, ident, struct.pack("<I", 100 + ident))
                    send(EXIT, ident + 5, exit_msg(0))
                continue
            send(EXEC_STARTED, ident, struct.pack("<I", 100 + ident))
            x = execs[ident] = {"argv": argv, "credit": WINDOW_BYTES, "pending": b"",
                                "done": None}
            if argv[0] == "echo":
                x["pending"] = ("id=%d argv=%s cwd=%s%s%s\n" % (
                    ident, ",".join(argv), cwd, " flags=%d" % flags if flags else "",
                    " memory=%d" % memory if memory is not None else "")).encode()
                send(STDERR, ident, ("env=%s\n" % ",".join(env)).encode())
                x["done"] = 0
            elif argv[0] == "tty":
                x["pending"] = b"tty=%dx%d\n" % tty
            elif argv[0] == "big":
                x["pending"] = b"b" * int(argv[1])
                x["done"] = 0
            elif argv[0] == "events":
                x["pending"] = ("signals=%s seen=%s\n" % (
                    " ".join("%d:%d" % s for s in signals),
                    ",".join(str(i) for i in seen))).encode()
                x["done"] = 0
            flush(ident)
        elif t == STDIN:
            x = execs.get(ident)
            if x is None:
                continue
            if not p:
                if x["argv"][0] == "cat":
                    x["done"] = 0
            elif x["argv"][0] == "tty" and b"q" in p:
                send(WINDOW, ident, struct.pack("<I", len(p)), flags=1)
                x["done"] = 7 << 8
            else:
                x["pending"] += p
                send(WINDOW, ident, struct.pack("<I", len(p)), flags=1)
            flush(ident)
        elif t == WINDOW and flags == 2 and ident in execs:
            execs[ident]["credit"] += struct.unpack("<I", p)[0]
            flush(ident)
        elif t == WINSIZE and ident in execs:
            execs[ident]["pending"] += b"winsize=%dx%d\n" % struct.unpack("<HH", p)
            flush(ident)
        elif t == SIGNAL:
            sig = struct.unpack("<I", p)[0]
            signals.append((ident, sig))
            x = execs.get(ident)
            if x is not None and x["done"] is None:
                x["pending"] = b""
                x["done"] = sig
                flush(ident)
        elif t == POWEROFF:
            sys.exit(0)


globals()["mode_" + MODE.replace("-", "_")]()
