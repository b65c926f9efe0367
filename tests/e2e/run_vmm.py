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
set refused; a bad CONFIG_JSON refused
with exit 125 naming the field. TAP."""
import atexit
import json
import shutil
import os
import signal
import subprocess
import sys
import tempfile
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


@case
def bad_config():
    """A missing or wrong field: exit 125 and a line naming it."""
    for mangle, what in ((lambda c: c.pop("silence_ms"), "silence_ms"),
                         (lambda c: c["exec"].update(argv=[]), "exec.argv"),
                         (lambda c: c.update(copy_out=7), "copy_out"),
                         (lambda c: c.update(extra=1), "extra: unknown field")):
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
