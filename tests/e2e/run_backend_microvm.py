#!/usr/bin/python3
"""End-to-end tests of the microvm and vm backends (TAP), judged from the host.

usage: run_backend_microvm.py AIRLOCK PROBE [CASE-SUBSTRING...]

Every run is `airlock run --backend microvm` (the vm_* cases: --backend vm).
The generic promises (host environment absent, inputs unchanged, scratch
gone, egress only through the gateway, limits with their reasons) are
proven for microvm by the per-backend suites (e2e-microvm, limits-microvm,
gateway-microvm, security-microvm); these cases add what is the layer's
own: the guest's view (its own kernel, no device, initramfs or channel in
reach of the command, uid 1000), --copy-in and --copy-out through the
agent, the refusals as one line, the record naming the backend and its
platform (tcg, or kvm where a guest boots on /dev/kvm), and nothing left
behind: no QEMU process, no initramfs file under /run/airlock/vm, also
after airlock itself was SIGKILLed and `airlock gc` ran. The seed scenario (scripts/demo,
python3 and pandas from the system image) runs under both. Under TCG every
guest instruction is emulated: the cases are few runs each. Where `airlock
backends` says a kind is unusable here, its cases skip with the reason; the
KVM case skips where /dev/kvm is missing. Bombs are bounded (the memory hog
stops at 1 GB).
"""

import http.client
import json
import os
import signal
import socket
import time

from harness import (Skip, Suite, TempDir, cgroup_supervisor, expect, expect_rc, kill_pid, main,
                     pid_starttime, run_host, start, wait_for, write_file)

suite = Suite()
case = suite.case
RUN_DIR = "/run/airlock/vm"
_usable = {}


def need(env, kind="microvm"):
    """Skip unless `airlock backends` says kind is usable here."""
    if kind not in _usable:
        res = run_host([env.airlock, "backends", "--json"])
        expect_rc(res, 0)
        for b in json.loads(res.text)["backends"]:
            if b["name"] in ("microvm", "vm"):
                _usable[b["name"]] = "" if b["usable"] else b.get("why", "unusable")
        expect(kind in _usable, "airlock backends does not list %s" % kind, res)
    if _usable[kind]:
        raise Skip("%s is not usable here: %s" % (kind, _usable[kind]))


def descends_from(pid, ancestor):
    """Whether process pid is ancestor's descendant."""
    while pid > 1:
        try:
            with open("/proc/%d/stat" % pid) as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
        if pid == ancestor:
            return True
    return False


def cpu_ticks(pid):
    """User and system CPU of process pid (all its threads), in ticks."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def qemu_procs():
    """Pids of QEMU processes started by a run (their command line names the
    guest kernel's place in the VMM's sandbox)."""
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if cmd.startswith(b"/usr/bin/qemu-system") and b"/.airlock/vmlinuz" in cmd:
            out.append(int(p))
    return out


def supervisor_of(pid):
    """The airlock (pid, starttime) whose run cgroup holds pid, or None."""
    try:
        with open("/proc/%d/cgroup" % pid) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        for part in line.split(":", 2)[-1].split("/"):
            sup = cgroup_supervisor(part)
            if sup:
                return sup
    return None


def left_qemu(owner=None):
    """QEMU processes of runs whose airlock is gone (left behind); with
    owner (an airlock pid), those of that airlock's runs, gone or not.
    Other suites' live runs may have QEMU processes at the same time: this
    suite runs beside them."""
    out = []
    for pid in qemu_procs():
        sup = supervisor_of(pid)
        if owner is not None:
            if sup and sup[0] == owner:
                out.append(pid)
        elif not sup or pid_starttime(sup[0]) != sup[1]:
            out.append(pid)
    return out


def initrds():
    """Initramfs files of runs whose airlock is gone (initrd-PID-XXXXXX)."""
    try:
        names = [d for d in os.listdir(RUN_DIR) if d.startswith("initrd-")]
    except FileNotFoundError:
        return []
    return [d for d in names if not os.path.exists("/proc/%s" % d.split("-")[1])]


def vm(al, cmd, opts=(), kind="microvm", timeout=120, **kw):
    return al.run(cmd, ["--backend", kind] + list(opts), bind_probe=False, timeout=timeout, **kw)


def record_of(al, cmd, opts, kind="microvm", **kw):
    with TempDir() as d:
        rec = os.path.join(d, "result.json")
        res = vm(al, cmd, list(opts) + ["--result", rec], kind=kind, **kw)
        with open(rec) as f:
            return res, json.load(f)


@case
def host_files_invisible(env):
    """A host file is not in the guest (not even by its host path); the
    guest's /proc shows only the guest's few processes; its kernel is not
    the host's; the initramfs, the channel and the system image's device
    are out of the command's reach."""
    need(env)
    with TempDir() as d:
        secret = os.path.join(d, "secret.txt")
        write_file(secret, "vm-host-file\n")
        res, record = record_of(env, ["/bin/sh", "-c",
                                      "cat %s; echo /*; echo /proc/[0-9]*; uname -r; "
                                      "echo /dev/*; echo $(ls -A /root /home /boot /mnt 2>&1); "
                                      "cat /airlock/config /init 2>&1 | head -c 300; "
                                      "id -u" % secret], [])
    expect_rc(res, 0)
    lines = res.text.splitlines()
    expect(b"vm-host-file" not in res.out, "a host file was readable", res)
    top = lines[0].split()
    expect(os.path.dirname(os.path.dirname(secret)) not in top or "/tmp" in top,
           "the host's root is visible: %s" % top, res)
    expect(len(lines[1].split()) <= 6, "more than the guest's own processes: %s" % lines[1], res)
    expect(lines[2] != os.uname().release, "the guest runs the host's kernel", res)
    devs = [os.path.basename(x) for x in lines[3].split()]
    expect(not any(x.startswith(("vd", "hvc", "vport", "mem", "kmsg", "port", "sd")) for x in devs),
           "a device beyond the minimal set is in the guest's /dev: %s" % devs, res)
    # The system image's own top-level directories, if there, hold nothing
    # of the host's (ls -A lists only their names: "/root:" and so on).
    expect(all(w.endswith(":") or "No such file" in lines[4] for w in lines[4].split()
               if not w.startswith(("ls:", "cannot", "access", "'", "No", "such", "file",
                                    "or", "directory"))),
           "a host directory has content in the guest: %r" % lines[4], res)
    expect(b"No such file" in res.out[res.out.find(b"/airlock/config"):] or
           b"/airlock/config" not in res.out, "the agent's config is readable", res)
    expect(lines[-1] == "1000", "the command does not run as uid 1000: %r" % lines[-1], res)
    expect(record["backend"] == "microvm" and record["platform"] in ("tcg", "kvm"),
           "the record does not name the backend and platform: %s %s"
           % (record.get("backend"), record.get("platform")), res)


@case
def rw_input_refused(env):
    """--rw and --workdir (the guest's is /work) are refused with one line
    naming the field."""
    need(env)
    with TempDir() as d:
        for opts, word in ((["--rw", "%s:/out" % d], b"--rw"),
                           (["--workdir", "/home/w"], b"--workdir /home/w")):
            res = vm(env, ["/bin/true"], opts)
            expect_rc(res, 125)
            lines = [l for l in res.err.splitlines() if l.strip()]
            expect(len(lines) == 1 and word in lines[0] and b"microvm" in lines[0],
                   "not one line naming %r" % word, res)


class _NoProbe:
    """run_tty.Term's env: airlock's argv without the probe bound in."""

    def __init__(self, env):
        self.env = env

    def argv(self, cmd, opts):
        return self.env.argv(cmd, opts, bind_probe=False)


@case
def tty_run(env):
    """airlock run -t --backend microvm under a pty this script holds (as
    run_tty.py drives native -t): an interactive sh in the guest; what is
    typed echoes once (the guest's pty does the line discipline; the native
    layer's pty and the VMM's pass bytes raw), `tty` names a /dev/pts
    device, `stty size` the outer terminal's size, and after the outer
    terminal is resized the new one (SIGWINCH to airlock, then to the VMM,
    WINSIZE to the guest); the exit code comes back and the outer
    terminal's modes are restored."""
    need(env)
    from run_tty import PROMPT, Term, expect_restored, set_size
    with Term(_NoProbe(env), ["/bin/sh", "-i"],
              ["--backend", "microvm", "--env", "PS1=" + PROMPT, "--timeout", "120"],
              rows=27, cols=91) as t:
        t.expect(PROMPT, timeout=90, what="the guest's sh prompt")
        t.send("tty; stty size\r")
        t.expect(r"tty; stty size\r\n", what="the echo of what was typed")
        t.expect(r"/dev/pts/\d+\r\n", what="a /dev/pts device from tty")
        t.expect(r"27 91\r\n", what="27 91 from stty size")
        t.expect(PROMPT)
        set_size(t.master, 41, 123)
        deadline = time.monotonic() + 30
        while True:  # the resize travels through three layers
            t.send("stty size\r")
            m = t.expect(r"\r\n(\d+ \d+)\r\n", what="stty size")
            t.expect(PROMPT)
            if m.group(1) == b"41 123":
                break
            expect(time.monotonic() < deadline, "the resize never reached the guest: %r"
                   % m.group(1))
        t.send("echo typed-$((6*7))\r")
        m = t.expect(r"typed-42\r\n", what="typed-42")
        t.send("exit 6\r")
        rc = t.wait(60)
        expect(rc == 6, "-t: exit code %s, not 6" % rc)
        expect_restored(t)
    expect(wait_for(lambda: not left_qemu(), 10), "QEMU left: %s" % left_qemu())


@case
def scratch_gone_copy_in_out(env):
    """What the guest wrote to /work and /tmp is nowhere on the host after
    the run; --copy-in puts a file in the guest's /work (the host's copy
    unchanged by the guest's change) and --copy-out brings /work's file
    back."""
    need(env)
    with TempDir() as d:
        out = os.path.join(d, "out")
        cin = os.path.join(d, "in.txt")
        write_file(cin, "vm-copied-in\n")
        res = vm(env, ["/bin/sh", "-c", "echo vm-scratch-mark > /work/r.txt; "
                       "echo vm-scratch-mark > /tmp/t.txt; cat /work/r.txt /work/in.txt; "
                       "echo changed >> /work/in.txt"],
                 ["--copy-out", "/work/r.txt:%s" % out, "--copy-in", "%s:/work/in.txt" % cin])
        expect_rc(res, 0)
        expect(b"vm-scratch-mark" in res.out, "the scratch was not writable", res)
        expect(b"vm-copied-in" in res.out, "--copy-in did not put the file in /work", res)
        with open(cin) as f:
            expect(f.read() == "vm-copied-in\n", "the host's copy-in source changed")
        with open(os.path.join(out, "r.txt")) as f:
            expect(f.read() == "vm-scratch-mark\n", "--copy-out did not bring /work/r.txt")
    expect(not initrds(), "initramfs files left: %s" % initrds())


@case
def stdio_streams(env):
    """12 MB of output and 5 MB of stdin cross the channel whole (the
    windows of both directions, many times over)."""
    need(env)
    res = vm(env, ["/bin/sh", "-c", "head -c 12000000 /dev/zero"])
    expect_rc(res, 0)
    expect(len(res.out) == 12000000 and res.out.count(b"\0") == 12000000,
           "stdout: %d bytes" % len(res.out), res)
    data = os.urandom(5000000)
    res = vm(env, ["/bin/sh", "-c", "cat | sha256sum"], input=data)
    expect_rc(res, 0)
    import hashlib
    expect(res.text.split()[0] == hashlib.sha256(data).hexdigest(),
           "stdin did not arrive whole", res)


def seed(env, kind):
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with TempDir() as d:
        wrap = os.path.join(d, "airlock")
        write_file(wrap, "#!/bin/sh\nif [ \"$1\" = run ]; then shift; exec %s run --backend "
                   "%s \"$@\"; fi\nexec %s \"$@\"\n" % (env.airlock, kind, env.airlock),
                   mode=0o755)
        res = run_host([os.path.join(repo, "scripts", "demo")], timeout=400,
                       env=dict(os.environ, AIRLOCK_BIN=wrap))
        expect_rc(res, 0)
        expect(b"demo: OK" in res.out, "the demo did not say OK", res)


@case
def seed_scenario(env):
    """The README demo (scripts/demo: python3 and pandas from the system
    image) under --backend microvm: the injected exfiltration denied and
    audited, the analysis done, the token put in by the gateway."""
    need(env)
    seed(env, "microvm")


@case
def vm_seed_scenario(env):
    """The same demo under --backend vm (q35, the generic kernel)."""
    need(env, "vm")
    seed(env, "vm")


@case
def vm_basics(env):
    """Under vm: the exit code passes, the host's variable is absent, the
    record names vm and its platform."""
    need(env, "vm")
    e = dict(os.environ, AL_VM_SECRET="vm-secret-4712")
    res, record = record_of(env, ["/bin/sh", "-c", "env; exit 3"], [], kind="vm", env=e)
    expect_rc(res, 3)
    expect(b"vm-secret-4712" not in res.out, "the host's variable reached the guest", res)
    expect(record["backend"] == "vm" and record["platform"] in ("tcg", "kvm"),
           "the record: %s %s" % (record.get("backend"), record.get("platform")), res)
    # `airlock backends` says the same platform for both kinds.
    res = run_host([env.airlock, "backends", "--json"])
    plat = {b["name"]: b.get("platform") for b in json.loads(res.text)["backends"]}
    expect(plat.get("vm") == record["platform"] and plat.get("microvm") == record["platform"],
           "airlock backends says %s, the record %s" % (plat, record["platform"]), res)


@case
def kvm_boot(env):
    """Where /dev/kvm works, the guest boots on it (the record says kvm).
    A nested /dev/kvm may open and still hang every guest (this kind of VM
    had one on 2026-12-07): airlock's bounded boot on it, kept for this
    boot of the host in /run/airlock/vm/kvm, then says "0", and the case is
    skipped saying so."""
    need(env)
    if not os.path.exists("/dev/kvm"):
        raise Skip("no /dev/kvm on this machine: the KVM path is not exercised here")
    res, record = record_of(env, ["/bin/true"], [])
    expect_rc(res, 0)
    if record["platform"] != "kvm":
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
        try:
            with open("/run/airlock/vm/kvm") as f:
                probed = f.read().split()
        except OSError:
            probed = []
        if probed == ["0", boot]:
            raise Skip("/dev/kvm exists but a guest does not boot on it here (airlock's "
                       "bounded boot on it failed this boot of the host): the KVM path "
                       "is not exercised")
    expect(record["platform"] == "kvm",
           "/dev/kvm exists but the guest ran on %s" % record["platform"], res)


@case
def killed_airlock_leaves_nothing_after_gc(env):
    """airlock SIGKILLed mid-run: QEMU goes with its sandbox, and `airlock
    gc` removes the run's initramfs file and cgroup."""
    need(env)
    argv = [env.airlock, "run", "--backend", "microvm", "--timeout", "60s", "--",
            "/bin/sleep", "50"]
    p = start(argv)
    expect(wait_for(lambda: left_qemu(p.pid), 60), "QEMU never started")
    time.sleep(0.5)
    kill_pid(p.pid)
    p.communicate()
    res = run_host([env.airlock, "gc"])
    expect_rc(res, 0)
    expect(wait_for(lambda: not left_qemu(p.pid), 15), "QEMU left: %s" % left_qemu(p.pid))
    expect(not initrds(), "initramfs files left after gc: %s" % initrds())


@case
def nothing_left(env):
    """After every case: no QEMU process and no initramfs file."""
    need(env)
    expect(not left_qemu(), "QEMU processes left: %s" % left_qemu())
    expect(not initrds(), "initramfs files left: %s" % initrds())


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path, timeout=120):
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


def api(sock, method, path, body=None):
    c = UnixHTTP(sock)
    try:
        c.request(method, path, body=json.dumps(body) if body is not None else b"")
        r = c.getresponse()
        data = r.read()
        return r.status, json.loads(data) if data else None
    finally:
        c.close()


def raw(sock, method, path, body=b""):
    """(status, body bytes) of one request with a raw body."""
    c = UnixHTTP(sock)
    try:
        c.request(method, path, body=body)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def session_files(sock, base):
    """The file API on the live guest, as docs/api.md says it works on
    native: done by the guest agent, as the sandbox's user, no link
    followed, inside the scratch only, within the cap."""
    f = base + "/files/"
    data = bytes(range(256)) * 64 + b"\0end\n"
    st, doc = raw(sock, "PUT", f + "work/up.bin", data)
    expect(st == 201 and json.loads(doc) == {"path": "/work/up.bin", "type": "file",
                                             "size": len(data)}, "put: %s %s" % (st, doc))
    st, got = raw(sock, "GET", f + "work/up.bin")
    expect(st == 200 and got == data, "get back: %s, %d bytes" % (st, len(got)))
    st, a = api(sock, "POST", base + "/exec", {
        "argv": ["/bin/sh", "-c", "stat -c '%u %g %s' /work/up.bin; stat -c %a /work/note; "
                 "ln -s /etc/passwd /work/pw; ln -s /etc /work/etc; "
                 "mkfifo /work/fifo; truncate -s 33554433 /work/big"],
        "wait": True})
    lines = a["stdout"].split("\n") if st == 200 else ["", ""]
    expect(st == 200 and a["exit_code"] == 0 and lines[0] == "1000 1000 %d" % len(data),
           "the upload is not the sandbox user's: %s %s" % (st, a))
    st, d = api(sock, "GET", f + "work")
    names = {e["name"]: e for e in d["entries"]} if st == 200 else {}
    expect(st == 200 and d["path"] == "/work" and names.get("up.bin", {}).get("size") ==
           len(data) and names["up.bin"]["type"] == "file" and names["pw"]["type"] == "symlink"
           and names["fifo"]["type"] == "other" and names["note"]["mode"] == int(lines[1], 8),
           "list: %s %s" % (st, d))
    for method, path, code, words in (
            ("GET", "work/pw", 400, "symbolic link"), ("GET", "work/etc/passwd", 400,
                                                        "symbolic link"),
            ("PUT", "work/pw", 400, "symbolic link"), ("PUT", "work/etc/x", 400,
                                                        "symbolic link"),
            ("GET", "work/fifo", 400, "not a regular file"),
            ("GET", "etc/passwd", 403, "not in the sandbox's scratch"),
            ("GET", "work/big", 413, "33554433 bytes"),
            ("GET", "work/up.bin?list=1", 400, "?list is for directories"),
            ("GET", "work/none", 404, "no such file"),
            ("DELETE", "work", 400, "scratch face"),
            ("PUT", "work/d?mkdir=1", 201, ""), ("PUT", "work/d?mkdir=1", 409, "exists"),
            ("PUT", "work/d/in", 201, ""), ("DELETE", "work/d", 409, "not empty"),
            ("DELETE", "work/d/in", 200, ""), ("DELETE", "work/d", 200, ""),
            ("GET", "work/d", 404, "")):
        st, doc = raw(sock, method, f + path, b"x" if method == "PUT" else b"")
        expect(st == code and words in json.loads(doc).get("error", ""),
               "%s %s: %s %s (wanted %d %r)" % (method, path, st, doc[:300], code, words))
    st, doc = api(sock, "GET", f + "tmp")
    expect(st == 200 and doc["path"] == "/tmp", "list /tmp: %s %s" % (st, doc))


def session_process(daemon):
    """The pid of the daemon's one session process (`airlock __session`;
    not its gateway, a child of it by the same command line)."""
    def session(pid):
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                return b"__session" in f.read()
        except OSError:
            return False
    found = [int(q) for q in os.listdir("/proc") if q.isdigit() and session(int(q)) and
             descends_from(int(q), daemon) and not session(parent_of(int(q)))]
    expect(len(found) == 1, "not one session process: %s" % found)
    return found[0]


def parent_of(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def ptys_held(pid):
    """The descriptors of process pid that are ptys (host side)."""
    out = []
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            t = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if t == "/dev/ptmx" or t.startswith("/dev/pts/"):
            out.append(t)
    return out


def session_tty(sock, base, daemon):
    """A tty exec in the live guest, as docs/api.md says it works: started
    streamed with rows and cols, typed to through execs/{eid}/stdin (the
    guest's pty echoes it), resized through execs/{eid}/resize; `tty` names
    a /dev/pts device, `stty size` the sizes asked for; its exit code comes
    back; the session process (confined, landlock) opened the host's pty
    and holds none of it afterwards."""
    sess = session_process(daemon)
    c = UnixHTTP(sock)
    try:
        c.request("POST", base + "/exec", body=json.dumps({
            "argv": ["/bin/sh", "-c", "stty size; tty; read x; echo got=$x; stty size; exit 5"],
            "tty": True, "rows": 30, "cols": 100}))
        r = c.getresponse()
        expect(r.status == 200, "tty exec: %d" % r.status)
        eid = json.loads(r.readline())["exec_id"]
        out, end = "", None

        def until(pred):
            nonlocal out, end
            deadline = time.monotonic() + 60
            while end is None and not pred(out) and time.monotonic() < deadline:
                line = r.readline()
                if not line:
                    break
                ev = json.loads(line)
                if ev["type"] == "stdout":
                    out += ev["data"]
                elif ev["type"] == "end":
                    end = ev
        until(lambda o: "/dev/pts/" in o and o.endswith("\n"))
        expect(out.startswith("30 100\r\n/dev/pts/"), "stty size; tty: %r %s" % (out, end))
        st, doc = api(sock, "POST", base + "/execs/%s/resize" % eid, {"rows": 40, "cols": 120})
        expect(st == 200, "resize: %s %s" % (st, doc))
        st, doc = raw(sock, "POST", base + "/execs/%s/stdin" % eid, b"hello\n")
        expect(st == 200, "stdin: %s %s" % (st, doc))
        until(lambda o: False)
        expect("hello\r\ngot=hello\r\n40 120\r\n" in out,
               "typed input echoed, read, and the new size: %r" % out)
        expect(end and end["result"]["exit_code"] == 5, "the end: %s" % end)
    finally:
        c.close()
    expect(wait_for(lambda: not ptys_held(sess), 10),
           "the session process holds ptys: %s" % ptys_held(sess))


@case
def session_execs(env):
    """airlock serve (on a socket of the test's own): POST /v1/sandboxes
    with backend microvm boots one guest, then execs in it: the first writes
    /work/note and prints the guest's kernel, the second (with stdin and an
    env variable of its own) reads the note back in the same guest, a
    missing command ends exec-failed, two at once both end; a tty exec
    (session_tty); the file API
    in the same guest (session_files); an exec's own memory limit ends it
    as memory; pause freezes QEMU (no CPU time
    gained by a spinning exec's guest) and resume brings it back; DELETE
    leaves no QEMU process and no initramfs file."""
    need(env)
    with TempDir(mode=0o755) as d:
        sock = os.path.join(d, "sock")
        p = start([env.airlock, "serve", "--socket", sock])
        try:
            expect(wait_for(lambda: os.path.exists(sock), 10), "serve did not start")
            st, sb = api(sock, "POST", "/v1/sandboxes", {"backend": {"name": "microvm"}})
            expect(st == 201, "create: %s %s" % (st, sb))
            base = "/v1/sandboxes/%s" % sb["id"]
            st, a = api(sock, "POST", base + "/exec", {
                "argv": ["/bin/sh", "-c", "echo kept > /work/note; uname -r; id -u"],
                "wait": True})
            expect(st == 200 and a["reason"] == "exited" and a["exit_code"] == 0,
                   "first exec: %s %s" % (st, a))
            kernel, uid = a["stdout"].split()
            expect(kernel != os.uname().release and uid == "1000",
                   "not the guest's kernel or user: %r" % a["stdout"])
            session_tty(sock, base, p.pid)
            st, b = api(sock, "POST", base + "/exec", {
                "argv": ["/bin/sh", "-c", "cat /work/note; cat; echo $MINE; exit 3"],
                "stdin": "from stdin\n", "env": {"MINE": "mine"}, "wait": True})
            expect(st == 200 and b["exit_code"] == 3 and
                   b["stdout"] == "kept\nfrom stdin\nmine\n",
                   "second exec: %s %s" % (st, b))
            st, c = api(sock, "POST", base + "/exec", {"argv": ["/no/such"], "wait": True})
            expect(st == 200 and c["reason"] == "exec-failed", "missing: %s %s" % (st, c))
            ids = []
            for i in range(2):
                st, x = api(sock, "POST", base + "/exec", {
                    "argv": ["/bin/sh", "-c", "sleep 1; echo %d" % i], "background": True})
                expect(st == 201, "background exec: %s %s" % (st, x))
                ids.append(x["exec_id"])
            def ended():
                execs = api(sock, "GET", base + "/execs")[1]["execs"]
                res = {x["exec_id"]: x.get("result") or {} for x in execs}
                return all(res.get(i, {}).get("reason") == "exited" for i in ids)
            expect(wait_for(ended, 60, step=0.5), "the background execs did not both end: %s"
                   % api(sock, "GET", base + "/execs")[1])
            session_files(sock, base)
            # An exec's own memory limit, below the sandbox's 512 MiB: held
            # by its cgroup in the guest (150 MiB touched under 64 MiB).
            st, m = api(sock, "POST", base + "/exec", {
                "argv": ["/usr/bin/python3", "-c", "b = b'x' * (150 << 20); print(len(b))"],
                "memory": "64M", "wait": True})
            expect(st == 200 and m["reason"] == "memory" and not m["stdout"],
                   "an exec's own memory limit: %s %s" % (st, m))
            # Pause freezes QEMU with its guest: a spinning exec's QEMU
            # gains no CPU time while paused (host-side, from /proc); after
            # the resume the session answers as before.
            st, spin = api(sock, "POST", base + "/exec", {
                "argv": ["/bin/sh", "-c", "while :; do :; done"], "background": True})
            expect(st == 201, "spinner: %s %s" % (st, spin))
            ours = [q for q in qemu_procs() if descends_from(q, p.pid)]
            expect(len(ours) == 1, "not one QEMU of this daemon: %s" % ours)
            st, x = api(sock, "POST", base + "/pause")
            expect(st == 200 and x["state"] == "paused", "pause: %s %s" % (st, x))
            before = cpu_ticks(ours[0])
            time.sleep(1.5)
            expect(cpu_ticks(ours[0]) == before, "QEMU ran while paused: %s -> %s ticks"
                   % (before, cpu_ticks(ours[0])))
            st, x = api(sock, "POST", base + "/resume")
            expect(st == 200 and x["state"] == "running", "resume: %s %s" % (st, x))
            st, d = api(sock, "POST", base + "/exec", {"argv": ["/bin/echo", "back"],
                                                       "wait": True})
            expect(st == 200 and d["stdout"] == "back\n", "after resume: %s %s" % (st, d))
            st, _ = api(sock, "DELETE", base)
            expect(st == 200, "delete: %s" % st)
        finally:
            kill_pid(p.pid, signal.SIGTERM)
            p.wait(30)
    expect(wait_for(lambda: not left_qemu(), 10), "QEMU left: %s" % left_qemu())
    expect(not initrds(), "initramfs files left: %s" % initrds())


if __name__ == "__main__":
    main(suite)
