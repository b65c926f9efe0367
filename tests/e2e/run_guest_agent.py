#!/usr/bin/python3
"""The guest agent booted for real (TAP), with this script as the host side.

usage: run_guest_agent.py AGENT GUEST_TOOL

Builds an initramfs (the agent as /init, the cloud kernel's virtio modules,
a config in the format of src/guest/config.c, two inputs), an ext4 system
image (guest_tool, /etc, a symbolic link), boots Debian's cloud kernel on
QEMU's microvm machine under a timeout, and speaks the channel's protocol
(src/guest/proto.h) on QEMU's stdin and stdout: HELLO, PING, files into
/work, execs (their uid and gid, output, exit code, stdin, what they can
see of the guest), the network (a TCP stream to the proxy port, one to a
fake address's capture port, a DNS datagram: each reaches this script as
OPEN/DATA/DGRAM with the guest's destination, and the answers go back),
/work's files back, the file API's operations (EXEC with flags 1), also
against what the sandbox's own code set up (a FIFO, an input bound in
/tmp, a link at the end, odd names, 10001 entries), POWEROFF.
One boot serves every case. Skips with the
reason where the kernel, its modules, QEMU, cpio or mkfs.ext4 is missing.
Nothing here touches the host's network: the guest has no NIC, and its
connections end in this script.
"""

import errno
import glob
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import select

AGENT, TOOL = sys.argv[1], sys.argv[2]
MODULES = ["virtio_ring", "virtio", "virtio_mmio", "virtio_console", "virtio_blk"]
(HELLO, EXEC, EXEC_STARTED, EXEC_FAILED, STDIN, STDOUT, STDERR, EXIT, SIGNAL, OPEN, OPEN_OK,
 OPEN_FAILED, DATA, SHUT, CLOSE, WINDOW, DGRAM, PING, PONG, FILE_BEGIN, FILE_DATA, FILE_END,
 FILES_DONE, FILES_GET, POWEROFF, LOG) = range(1, 27)
UID, GID = 1000, 1000

results = []


def tap(ok, name, detail=""):
    results.append(ok)
    print("%s %d - %s" % ("ok" if ok else "not ok", len(results), name), flush=True)
    if detail and (not ok or os.environ.get("AIRLOCK_TEST_VERBOSE")):
        for line in str(detail).splitlines():
            print("#   " + line, flush=True)


def skip_all(why):
    print("1..0 # SKIP " + why, flush=True)
    sys.exit(0)


def find_kernel():
    kernels = sorted(glob.glob("/boot/vmlinuz-*-cloud-amd64"))
    if not kernels:
        skip_all("no /boot/vmlinuz-*-cloud-amd64 (Debian's linux-image-cloud-amd64)")
    for tool in ("qemu-system-x86_64", "cpio", "mkfs.ext4"):
        if not shutil.which(tool) and not os.path.exists("/usr/sbin/" + tool):
            skip_all(tool + " is not installed")
    kernel = kernels[-1]
    version = os.path.basename(kernel)[len("vmlinuz-"):]
    mods = []
    for m in MODULES:
        found = glob.glob("/lib/modules/%s/kernel/drivers/**/%s.ko" % (version, m), recursive=True)
        if not found:
            skip_all("module %s.ko of %s is missing (compressed or not installed)" % (m, version))
        mods.append(found[0])
    return kernel, version, mods


def kernel_args():
    """The guest kernel's command line. console=ttyS0 (a device microvm does not
    have here) keeps the kernel's console off hvc0, the channel: without a
    console= the first console registered, virtio's hvc0, gets the kernel's
    messages and /dev/console. tsc_early_khz: under TCG the guest's TSC is the
    host's, and on a busy host the guest's calibration of it against the PIT
    fails and the boot stalls at the delay loop; the host's constant TSC's
    frequency (its "cpu MHz") skips that calibration."""
    args = "console=ttyS0 quiet panic=-1 rdinit=/init"
    with open("/proc/cpuinfo") as f:
        info = f.read()
    mhz = [l.split(":")[1] for l in info.splitlines() if l.startswith("cpu MHz")]
    if mhz and " constant_tsc" in info:
        args += " tsc_early_khz=%d" % round(float(mhz[0]) * 1000)
    return args


def config_text(mods):
    recs = [("module", "/airlock/modules/%s.ko" % m) for m in MODULES]
    recs += [("root", "/dev/vda", "ext4"), ("channel", "/dev/vport0p1"), ("scratch", str(16 << 20)),
             ("input", "/airlock/in/0", "/input", "dir"),
             ("input", "/airlock/in/1", "/data.txt", "file"),
             ("input", "/airlock/in/1", "/tmp/in.txt", "file"),
             ("hostname", "guest-test"), ("ids", str(UID), str(GID)),
             ("memory", str(64 << 20)), ("pids", "64"), ("network", "1"),
             ("proxy_port", "3128"), ("capture_port", "80")]
    return "".join("\t".join(r) + "\n" for r in recs)


def build(tmp, mods):
    ird = os.path.join(tmp, "initrd")
    os.makedirs(ird + "/airlock/modules")
    os.makedirs(ird + "/airlock/in/0")
    shutil.copy(AGENT, ird + "/init")
    for m, path in zip(MODULES, mods):
        shutil.copy(path, "%s/airlock/modules/%s.ko" % (ird, m))
    with open(ird + "/airlock/in/0/input.txt", "w") as f:
        f.write("an input\n")
    with open(ird + "/airlock/in/1", "w") as f:
        f.write("a single file\n")
    with open(ird + "/airlock/config", "w") as f:
        f.write(config_text(mods))
    names = subprocess.run(["find", "."], cwd=ird, capture_output=True, check=True).stdout
    cpio = os.path.join(tmp, "initrd.cpio")
    with open(cpio, "wb") as out:
        subprocess.run(["cpio", "-o", "-H", "newc", "--owner", "0:0", "--quiet"], cwd=ird,
                       input=names, stdout=out, check=True)
    sysd = os.path.join(tmp, "sys")
    os.makedirs(sysd + "/bin")
    os.makedirs(sysd + "/etc")
    shutil.copy(TOOL, sysd + "/bin/guest_tool")
    os.symlink("bin", sysd + "/sbin")
    with open(sysd + "/etc/resolv.conf", "w") as f:
        f.write("nameserver 192.0.2.1\n")
    img = os.path.join(tmp, "sys.img")
    mkfs = shutil.which("mkfs.ext4") or "/usr/sbin/mkfs.ext4"
    subprocess.run([mkfs, "-q", "-F", "-E", "root_owner=0:0", "-d", sysd, img, "8M"],
                   stdout=subprocess.DEVNULL, check=True)
    return cpio, img


class Channel:
    """The host end of the channel: one end of a socketpair whose other end
    is QEMU's stdin and stdout, as the VMM has it."""

    def __init__(self, proc, sock):
        self.p = proc
        self.sock = sock
        self.buf = b""
        self.logs = []
        self.strays = []  # (type, id) of frames of other execs exec_run skipped
        self.exited = set()  # the ids whose EXIT exec_run took

    def send(self, t, ident=0, payload=b"", flags=0):
        self.sock.sendall(struct.pack("<BBHII", t, flags, 0, ident, len(payload)) + payload)

    def recv(self, timeout=30):
        end = time.monotonic() + timeout
        fd = self.sock.fileno()
        while True:
            if len(self.buf) >= 12:
                t, flags, res, ident, n = struct.unpack("<BBHII", self.buf[:12])
                if len(self.buf) >= 12 + n:
                    payload, self.buf = self.buf[12:12 + n], self.buf[12 + n:]
                    if t == LOG:
                        self.logs.append(payload.decode(errors="replace"))
                        continue
                    return t, flags, ident, payload
            left = end - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError("no message from the guest (logs: %r)" % self.logs)
            chunk = os.read(fd, 65536)
            if not chunk:
                raise EOFError("the channel closed (logs: %r)" % self.logs)
            self.buf += chunk


def exec_run(ch, ident, argv, stdin=None, env=("PATH=/bin",), cwd="/work", net=None, flags=0,
             raw=False):
    """One exec to its EXIT: (status, stdout, stderr, exit fields). net(ch, msg) answers
    the network's messages while it runs. flags 1: a file operation; raw: stdout as
    bytes."""
    strs = [cwd] + list(argv) + list(env)
    ch.send(EXEC, ident, struct.pack("<II", len(argv), len(env)) +
            b"".join((s if isinstance(s, bytes) else s.encode()) + b"\0" for s in strs),
            flags=flags)
    out, err = b"", b""
    while True:
        t, flags, i, p = ch.recv()
        if t in (EXEC_STARTED, EXEC_FAILED, STDOUT, STDERR, EXIT) and i != ident:
            # Another exec's (one a case left running or ending): noted,
            # never taken for this one's.
            ch.strays.append((t, i))
            continue
        if t == EXEC_STARTED and stdin is not None:
            for off in range(0, len(stdin), 65536):
                ch.send(STDIN, ident, stdin[off:off + 65536])
            ch.send(STDIN, ident, b"")
        elif t == EXEC_FAILED:
            return None, p[4:].decode(), b"", None
        elif t in (STDOUT, STDERR):
            if t == STDOUT:
                out += p
            else:
                err += p
            ch.send(WINDOW, ident, struct.pack("<I", len(p)), flags=2 if t == STDOUT else 3)
        elif t == EXIT:
            ch.exited.add(ident)
            status, oom, pids, _, _, user, system, peak = struct.unpack("<iBBBBQQQ", p)
            return status, out if raw else out.decode(errors="replace"), \
                err.decode(errors="replace"), (oom, user, system, peak, pids)
        elif net:
            net(ch, t, i, p)


def check_files_in(ch):
    def begin(ident, kind, mode, path):
        ch.send(FILE_BEGIN, ident, struct.pack("<IB", mode, kind) + path.encode() + b"\0")
    begin(1, 1, 0o755, "sub")
    ch.send(FILE_END, 1)
    begin(2, 2, 0o644, "sub/a.txt")
    ch.send(FILE_DATA, 2, b"hello-in")
    ch.send(FILE_END, 2)
    begin(3, 3, 0o777, "sub/link")
    ch.send(FILE_DATA, 3, b"a.txt")
    ch.send(FILE_END, 3)
    # A file through the link may not be made (O_NOFOLLOW on the way).
    begin(4, 2, 0o644, "sub/link/x")
    ch.send(FILE_END, 4)
    ch.send(FILES_DONE)
    t, _, _, p = ch.recv()
    tap(t == FILES_DONE and struct.unpack("<I", p)[0] != 0,
        "files in: a file through a link is refused (FILES_DONE carries the error)", (t, p))


def check_execs(ch):
    st, out, err, _ = exec_run(ch, 1, ["guest_tool", "id"])
    tap(st == 0 and out == "uid=%d gid=%d groups=0\n" % (UID, GID),
        "an exec runs as the config's uid and gid, no groups, PATH from its env", (st, out, err))
    st, out, _, _ = exec_run(ch, 2, ["/bin/guest_tool", "exit", "7"])
    tap(st is not None and st >> 8 == 7 and st & 0x7f == 0, "the exit code comes back", st)
    st, out, _, _ = exec_run(ch, 3, ["guest_tool", "stdin"], stdin=b"x" * 100000 + b"end")
    tap(st == 0 and out == "x" * 100000 + "end", "stdin reaches the command and its output returns",
        (st, len(out)))
    hidden = ["/init", "/airlock", "/airlock/config", "/dev/vport0p1", "/dev/hvc0", "/dev/vda", "/sys/block",
              "/dev/console", "/dev/mem"]
    shown = ["/bin/guest_tool", "/sbin/guest_tool", "/dev/null", "/dev/urandom", "/dev/ptmx",
             "/proc/self", "/work", "/tmp", "/input/input.txt", "/data.txt"]
    st, out, _, _ = exec_run(ch, 4, ["guest_tool", "exists"] + hidden + shown)
    want = "".join("%s no\n" % p for p in hidden) + "".join("%s yes\n" % p for p in shown)
    tap(st == 0 and out == want,
        "the command sees the image, /dev, /proc, the scratch and the inputs, and not the "
        "initramfs, the config, the channel or the image's device", out)
    st, out, _, _ = exec_run(ch, 5, ["guest_tool", "cat", "/work/sub/a.txt"])
    tap(st == 0 and out == "hello-in", "files in: a regular file reached /work", (st, out))
    st, out, _, _ = exec_run(ch, 6, ["guest_tool", "cat", "/input/input.txt"])
    st2, out2, _, _ = exec_run(ch, 7, ["guest_tool", "cat", "/data.txt"])
    tap(out == "an input\n" and out2 == "a single file\n", "the inputs are at their targets",
        (out, out2))
    bad = []
    for i, path in enumerate(["/input/new", "/data.txt", "/bin/new", "/new", "/etc/resolv.conf"]):
        st, out, _, _ = exec_run(ch, 10 + i, ["guest_tool", "write", path, "x"])
        if st == 0:
            bad.append(path)
    tap(not bad, "the inputs, the image and the root are read-only", bad)
    st, out, _, _ = exec_run(ch, 20, ["guest_tool", "write", "/work/out.txt", "made-in-guest"])
    st2, _, _, _ = exec_run(ch, 21, ["guest_tool", "write", "/tmp/t", "x"])
    tap(st == 0 and st2 == 0, "/work and /tmp are writable", (st, out, st2))
    st, out, _, _ = exec_run(ch, 22, ["guest_tool", "cat", "/etc/resolv.conf"])
    tap(out == "nameserver 127.0.0.1\n", "resolv.conf names the agent's DNS stub", out)
    st, out, _, _ = exec_run(ch, 23, ["no_such_program"])
    tap(st is None and "exec" in out, "a program that is not there: EXEC_FAILED", (st, out))


def check_net(ch):
    seen = {}

    def net(ch, t, i, p):
        if t == OPEN:
            proto, _, port, addr = struct.unpack("!BBH4s", p)
            seen.setdefault("open", []).append((proto, port, ".".join(map(str, addr))))
            ch.send(OPEN_OK, i)
        elif t == DATA:
            seen.setdefault("data", []).append(p)
            ch.send(WINDOW, i, struct.pack("<I", len(p)))
            ch.send(DATA, i, b"answer:" + p)
        elif t == SHUT:
            ch.send(SHUT, i)
        elif t == DGRAM:
            seen.setdefault("dgram", []).append(p)
            ch.send(DGRAM, i, b"dns:" + p)

    st, out, _, _ = exec_run(ch, 30, ["guest_tool", "tcp", "127.0.0.1", "3128", "GET"], net=net)
    st2, out2, _, _ = exec_run(ch, 31, ["guest_tool", "tcp", "198.18.0.7", "80", "HEAD"], net=net)
    st3, out3, _, _ = exec_run(ch, 32, ["guest_tool", "udp", "127.0.0.1", "53", "q"], net=net)
    tap(seen.get("open") == [(6, 3128, "127.0.0.1"), (6, 80, "198.18.0.7")],
        "each guest connection reaches the host as OPEN with the guest's destination", seen)
    tap(st == 0 and out == "answer:GET" and st2 == 0 and out2 == "answer:HEAD",
        "a stream's bytes go both ways, and its ends", (st, out, st2, out2))
    tap(st3 == 0 and out3 == "dns:q" and seen.get("dgram") == [b"q"],
        "a DNS datagram goes out as DGRAM and its answer back to the client", (st3, out3, seen))
    st, out, _, _ = exec_run(ch, 33, ["guest_tool", "tcp", "127.0.0.1", "25", "x"], net=net)
    tap(st != 0 and "refused" in out.lower(), "no listener where the config has none", out)


def check_limits(ch):
    st, out, _, x = exec_run(ch, 140, ["guest_tool", "alloc", "200"])
    tap(st is not None and st & 0x7f == 9 and x[0] == 1 and (32 << 20) < x[3] <= (66 << 20),
        "200 MiB against the config's 64 MiB: killed, EXIT says oom, the peak is the cgroup's",
        (st, x))
    st, out, _, x = exec_run(ch, 141, ["guest_tool", "fork", "100"])
    # The refused fork ends the exec (the agent watches pids.events): it
    # may have printed its count first; EXIT says pids either way.
    tap(st in (0, 9) and x[4] == 1 and (not out.strip() or 10 < int(out) < 64),
        "pids 64: fewer than 64 children start, the exec is ended and EXIT says pids",
        (st, out, x))
    ch.send(EXEC, 142, struct.pack("<II", 2, 0) + b"/work\0guest_tool\0wait\0")
    t, _, i, p = ch.recv()
    ch.send(SIGNAL, 142, struct.pack("<I", 15))
    while t != EXIT or i != 142:
        t, _, i, p = ch.recv()
    st = struct.unpack("<i", p[:4])[0]
    tap(st & 0x7f == 15, "SIGNAL reaches the command", st)


def check_window(ch):
    """2 MiB of output with no WINDOW back: exactly the window comes, then
    nothing until the credit does; then all of it. (On a virtio console
    port QEMU dropped bytes its host end could not take at once, and this
    stalled at 768 KiB: the channel is a plain serial port.)"""
    total = 2 << 20
    ch.send(EXEC, 150, struct.pack("<II", 3, 1) + b"/work\0guest_tool\0out\0%d\0PATH=/bin\0" % total)
    got, most, end = 0, 0, time.monotonic() + 60
    while got < 256 * 1024 and time.monotonic() < end:
        t, _, i, p = ch.recv()
        if t == STDOUT:
            got += len(p)
            most = max(most, got)
    try:
        t, _, _, p = ch.recv(timeout=1)
        late = (t, len(p))
    except TimeoutError:
        late = None
    tap(most == 256 * 1024 and late is None,
        "stdout stops at the window (256 KiB) while the host gives no credit", (most, late))
    ch.send(WINDOW, 150, struct.pack("<I", got), flags=2)
    while True:
        t, _, i, p = ch.recv()
        if t == STDOUT:
            got += len(p)
            ch.send(WINDOW, 150, struct.pack("<I", len(p)), flags=2)
        elif t == EXIT:
            break
    tap(got == total and struct.unpack("<i", p[:4])[0] == 0,
        "with credit given back, all 2 MiB arrive", got)


def check_files_out(ch):
    ch.send(FILES_GET, 0, struct.pack("<QQ", 1 << 20, 100))
    files, cur = {}, {}
    while True:
        t, _, i, p = ch.recv()
        if t == FILE_BEGIN:
            cur[i] = [p[4], p[5:-1].decode(), b""]
        elif t == FILE_DATA:
            cur[i][2] += p
        elif t == FILE_END:
            kind, path, data = cur.pop(i)
            files[path] = (kind, data)
        elif t == FILES_DONE:
            err = struct.unpack("<I", p)[0]
            break
    want = {"sub": (1, b""), "sub/a.txt": (2, b"hello-in"), "sub/link": (3, b"a.txt"),
            "out.txt": (2, b"made-in-guest")}
    tap(err == 0 and files == want, "/work comes back: directories, files, links as links",
        (err, files))
    ch.send(FILES_GET, 0, struct.pack("<QQ", 1 << 20, 2))
    n = 0
    while True:
        t, _, i, p = ch.recv()
        n += t == FILE_BEGIN
        if t == FILES_DONE:
            break
    tap(n == 2 and struct.unpack("<I", p)[0] != 0, "FILES_GET stops at the files cap and says so",
        (n, p))


def check_fops(ch):
    """File operations (EXEC flags 1, proto.h AL_GUEST_EXEC_FILE_OP): done by
    the agent as the command's user beneath the scratch's faces, no link
    followed, exit code the errno."""
    def fop(ident, op, path, stdin=None, env=()):
        st, out, err, _ = exec_run(ch, ident, [op, path], stdin=stdin, env=env, cwd="/",
                                   flags=1, raw=True)
        return (None if st is None else st >> 8), out, err
    data = bytes(range(256)) * 300 + b"\0"
    put = fop(40, "put", "/work/fop.bin", stdin=data)
    got = fop(41, "get", "/work/fop.bin")
    tap(put[0] == 0 and got == (0, b"f" + data, ""),
        "fop: put then get gives the bytes back, a NUL among them", (put, got[0], len(got[1])))
    st, listing, _ = fop(43, "get", "/work/sub")
    recs = sorted(listing[1:].split(b"\0")[:-1]) if listing[:1] == b"d" else listing
    tap(st == 0 and recs == [b"f 8 644 a.txt", b"l 5 777 link"],
        "fop: a directory's listing, the link listed as a link", (st, listing))
    refused = [fop(44, "get", "/work/sub/link")[0], fop(45, "put", "/work/sub/link/x", b"x")[0],
               fop(46, "get", "/etc/resolv.conf")[0], fop(47, "get", "/input/input.txt")[0],
               fop(48, "get", "/work/../etc/resolv.conf")[0], fop(49, "chmod", "/work/sub")[0],
               fop(50, "delete", "/work")[0]]
    want = [errno.ELOOP, errno.ELOOP, errno.EACCES, errno.EACCES, errno.EINVAL, errno.EINVAL,
            errno.EISDIR]
    tap(refused == want, "fop: a link, paths outside /work /tmp /dev/shm, '..', an unknown "
        "op and the face itself refused with their errno", (refused, want))
    made = [fop(51, "mkdir", "/work/d")[0], fop(52, "mkdir", "/work/d")[0],
            fop(53, "put", "/work/d/f", b"y")[0], fop(54, "delete", "/work/d")[0],
            fop(55, "delete", "/work/d/f")[0], fop(56, "delete", "/work/d")[0],
            fop(57, "delete", "/work/fop.bin")[0], fop(58, "get", "/work/d")[0]]
    tap(made == [0, errno.EEXIST, 0, errno.ENOTEMPTY, 0, 0, 0, errno.ENOENT],
        "fop: mkdir, its EEXIST, a non-empty directory kept, files and directories removed",
        made)
    bad = [fop(59, "get", "/work/sub", env=["A=B"])[0],
           exec_run(ch, 60, ["get", "/work", "x"], env=(), cwd="/", flags=1)[0]]
    tap(bad == [None, None], "fop: an env or a third argument is EXEC_FAILED", bad)


def check_fop_attacks(ch):
    """File operations against what the sandbox's own code (uid 1000) set up:
    a FIFO (refused at once, never waited on), an input bound inside a face
    (neither read nor written nor removed through it), a link at the end (not
    followed by put, removed itself by delete), names with a newline and
    bytes that are not UTF-8 (listed as they are), a directory of 10001
    entries (10000 listed), and what a put or mkdir makes is the sandbox
    user's."""
    def fop(ident, op, path, stdin=None):
        st, out, err, _ = exec_run(ch, ident, [op, path], stdin=stdin, env=(), cwd="/",
                                   flags=1, raw=True)
        return (None if st is None else st >> 8), out, err

    def tool(ident, *argv):
        st, out, _, _ = exec_run(ch, ident, ["guest_tool"] + list(argv))
        return st, out
    made = tool(70, "mkfifo", "/work/ff")
    fifo = [fop(71, "get", "/work/ff")[0], fop(72, "put", "/work/ff", b"x")[0]]
    tap(made[0] == 0 and fifo == [errno.ENXIO, errno.ENXIO],
        "fop: a FIFO the sandbox made is neither read nor written (ENXIO, no wait)",
        (made, fifo))
    inp = [fop(73, "get", "/tmp/in.txt")[0], fop(74, "put", "/tmp/in.txt", b"changed")[0],
           fop(75, "delete", "/tmp/in.txt")[0], tool(76, "cat", "/tmp/in.txt")]
    tap(inp == [errno.EXDEV, errno.EXDEV, errno.EXDEV, (0, "a single file\n")],
        "fop: an input bound inside /tmp is not reached: get, put and delete say EXDEV, "
        "the input unchanged", inp)
    link = [fop(77, "put", "/work/sub/link", b"through")[0], fop(78, "get", "/work/sub/a.txt"),
            fop(79, "delete", "/work/sub/link")[0], fop(80, "get", "/work/sub/a.txt")[1]]
    tap(link == [errno.ELOOP, (0, b"fhello-in", ""), 0, b"fhello-in"],
        "fop: put onto a link is ELOOP and its target unchanged; delete removes the link, "
        "not its target", link)
    names = [fop(81, "mkdir", "/work/names")[0],
             fop(82, "put", b"/work/names/new\nline", b"1")[0],
             fop(83, "put", b"/work/names/\xff\xfe", b"22")[0]]
    st, listing, _ = fop(84, "get", "/work/names")
    recs = sorted(listing[1:].split(b"\0")[:-1]) if listing[:1] == b"d" else listing
    tap(names == [0, 0, 0] and st == 0 and
        recs == [b"f 1 644 new\nline", b"f 2 644 \xff\xfe"],
        "fop: names with a newline or bytes that are not UTF-8 are listed as they are",
        (names, st, listing))
    owned = [fop(85, "put", "/tmp/owned", b"o")[0], fop(86, "mkdir", "/tmp/owned-d")[0],
             tool(87, "owner", "/tmp/owned"), tool(88, "owner", "/tmp/owned-d")]
    tap(owned == [0, 0, (0, "%d:%d 644\n" % (UID, GID)), (0, "%d:%d 755\n" % (UID, GID))],
        "fop: what put and mkdir make is the sandbox user's", owned)
    many = tool(89, "mkfiles", "/work/many", "10001")
    st, listing, _ = fop(90, "get", "/work/many")
    n = listing.count(b"\0") if listing[:1] == b"d" else None
    tap(many[0] == 0 and st == 0 and n == 10000,
        "fop: a directory of 10001 entries lists 10000 (AL_GUEST_FILE_OP_LIST)",
        (many, st, n, len(listing)))


def main():
    kernel, version, mods = find_kernel()
    print("1..37", flush=True)
    tmp = tempfile.mkdtemp(prefix="airlock-guest-agent-")
    proc = None
    try:
        cpio, img = build(tmp, mods)
        cmd = ["timeout", "280", "qemu-system-x86_64", "-M", "microvm,x-option-roms=off,rtc=off",
               "-accel", "tcg", "-cpu", "max", "-m", "256", "-nodefaults", "-no-user-config",
               "-nographic", "-no-reboot", "-kernel", kernel, "-initrd", cpio,
               "-append", kernel_args(),
               "-device", "virtio-serial-device", "-chardev", "stdio,id=ch,signal=off",
               "-device", "virtserialport,chardev=ch,name=airlock",
               "-drive", "file=%s,if=none,id=sys,format=raw,readonly=on" % img,
               "-device", "virtio-blk-device,drive=sys"]
        # The guest's console, for debugging this test: a file, named here.
        console = os.environ.get("AIRLOCK_TEST_GUEST_CONSOLE")
        if console:
            i = cmd.index("-append") + 1
            cmd[i] = cmd[i].replace(" quiet", "")
            cmd += ["-serial", "file:" + console]
        start = time.monotonic()
        # Its own process group: killing `timeout` alone would leave QEMU.
        # A socketpair, as the VMM gives QEMU: with two pipes, QEMU's stdio
        # chardev stalled here under a stream of output and credit.
        mine, theirs = socket.socketpair()
        proc = subprocess.Popen(cmd, stdin=theirs, stdout=theirs,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        theirs.close()
        ch = Channel(proc, mine)
        t, _, _, p = ch.recv(timeout=100)
        boot = time.monotonic() - start
        ok = t == HELLO and struct.unpack("<I", p[:4])[0] == 1 and p[4:].decode() == version
        tap(ok, "HELLO with version 1 and the kernel's release (%.2f s after QEMU started)" % boot,
            (t, p, ch.logs))
        ch.send(PING, 0, struct.pack("<Q", 0x1122334455667788))
        t, _, _, p = ch.recv()
        tap(t == PONG and p == struct.pack("<Q", 0x1122334455667788), "PING gets its PONG")
        check_files_in(ch)
        check_execs(ch)
        check_net(ch)
        check_limits(ch)
        check_window(ch)
        check_files_out(ch)
        check_fops(ch)
        check_fop_attacks(ch)
        late = [(t, i) for t, i in ch.strays if i in ch.exited]
        tap(not late, "no exec's frames come after its EXIT (each id here is used once)", late)
        ch.send(POWEROFF)
        try:
            rc = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            rc = None
        tap(rc == 0, "POWEROFF ends the guest and QEMU", rc)
        print("# guest logs: %r" % ch.logs, flush=True)
        if ch.strays:
            print("# frames of other execs seen while one ran: %r" % ch.strays, flush=True)
    except (TimeoutError, EOFError) as e:
        tap(False, "the session with the guest", e)
    finally:
        if proc:
            # timeout and QEMU, the group this script made (by its id).
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if all(results) and len(results) == 37 else 1


sys.exit(main())
