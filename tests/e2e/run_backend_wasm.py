#!/usr/bin/python3
"""The wasm backend end to end (TAP), judged from the host.

usage: run_backend_wasm.py AIRLOCK PROBE MODULE_DIR [CASE-SUBSTRING...]

MODULE_DIR holds the C test modules (tests/e2e/wasm/*.c) compiled to WASI
at build time; without them (no wasm32-wasi toolchain) the module cases
skip with that reason, and every case skips with `airlock backends`'s
reason where the layer is unusable. Cases: a module reads an input and
writes the scratch (copied out); one tries a host path, a symlink out of
its preopen, every socket call and reads the environment (nothing written
on the host, no host environment value in any output); a memory bomb ends
with the memory reason, a loop at the timeout; network rules and -t are
refused with one line; the seed's analysis step under Pyodide (the
standard library's csv) writes its report (Pyodide installed with npm ci
beside the binary first, from src/backend/wasm/pyodide's lock file). Then nothing of the runs is
left (processes, cgroups, mounts). An attacker's cases: the plan's
environment configures node in no way (NODE_OPTIONS), a FIFO or device as
the module is refused at once, modules importing node's internals, `env` or
exporting no _start end with one line, memory outside linear memory (tables,
JS buffers under Pyodide) ends for memory, and Python's reach into node's
API (documented) is still bounded by the native layer. Every bomb is
bounded by itself (the allocator stops at 2 GiB, the tables under 2 GiB,
the JS buffers at 2.5 GiB, the loop at the 3 s timeout).
"""

import json
import os
import shutil
import socket
import subprocess
import sys

from harness import MarkedSuite, Skip, TempDir, expect, main, new_marker

suite = MarkedSuite()
case = suite.case
MODULES = os.path.abspath(sys.argv.pop(3)) if len(sys.argv) > 3 else ""
HERE = os.path.dirname(os.path.abspath(__file__))
SALES = os.path.join(HERE, "..", "..", "examples", "data", "sales.csv")
SECRET = "hostsecret-" + os.urandom(6).hex()


def usable(env):
    r = subprocess.run([env.airlock, "backends", "--json"], capture_output=True, text=True,
                       timeout=30)
    for b in json.loads(r.stdout)["backends"]:
        if b["name"] == "wasm":
            if not b["usable"]:
                raise Skip("wasm unusable here: %s" % b.get("why", "?"))
            return
    raise Skip("this airlock has no wasm backend")


def module(env, name):
    usable(env)
    path = os.path.join(MODULES, name + ".wasm")
    if not MODULES or not os.path.exists(path):
        raise Skip("no WASI toolchain at build time (apt-get install wasi-libc "
                   "libclang-rt-14-dev-wasm32)")
    return path


def run(env, opts, cmd, timeout=60):
    """airlock run --backend wasm with a marker, a result record and the
    host secret in airlock's own environment."""
    marker = new_marker("wasm-")
    with TempDir() as d:
        rec = os.path.join(d, "r.json")
        argv = [env.airlock, "run", "--backend", "wasm", "--result", rec,
                "--env", "AIRLOCK_MARK=" + marker] + list(opts) + ["--"] + list(cmd)
        e = dict(os.environ, AIRLOCK_HOST_SECRET=SECRET)
        p = subprocess.run(argv, capture_output=True, env=e, timeout=timeout)
        record = json.load(open(rec)) if os.path.exists(rec) and os.path.getsize(rec) else None
    return p, record


@case
def module_reads_input_writes_scratch(env):
    """A module reads an input (preopened read-only) and writes the scratch;
    the copy-out has its output, the input is unchanged, the record names
    the backend."""
    m = module(env, "io")
    with TempDir() as d:
        os.mkdir(os.path.join(d, "in"))
        src = os.path.join(d, "in", "data.txt")
        open(src, "w").write("hello wasm\n")
        out = os.path.join(d, "out")
        p, rec = run(env, ["--ro", "%s:/input" % os.path.join(d, "in"),
                           "--copy-out", "/work:%s" % out], [m, "/input/data.txt", "/work/o.txt"])
        expect(p.returncode == 0, "exit %d: %s" % (p.returncode, p.stderr[-300:]))
        expect(open(os.path.join(out, "o.txt")).read() == "HELLO WASM\n", "wrong copy-out")
        expect(open(src).read() == "hello wasm\n", "input changed")
        expect(b"copied 11 bytes" in p.stdout, p.stdout)


@case
def escapes_fail(env):
    """A host path, a symlink out of the preopen, every socket call on fds
    0-7: none works; nothing appears on the host; the host environment's
    value is in no output."""
    m = module(env, "escape")
    with TempDir() as d:
        host_out, target = os.path.join(d, "written"), os.path.join(d, "target")
        p, _ = run(env, [], [m, host_out, target])
        out = p.stdout.decode()
        expect(p.returncode == 0, "exit %d: %s" % (p.returncode, p.stderr[-300:]))
        worked = [line for line in out.splitlines() if line.endswith(": ok")]
        expect(not worked, "escapes worked: %s" % worked)
        expect(out.count("sock_") == 24, "not every socket call was tried: %s" % out)
        expect(not os.path.exists(host_out) and not os.path.exists(target),
               "a file appeared on the host")
        expect(SECRET.encode() not in p.stdout + p.stderr, "the host environment leaked")
        expect("env AIRLOCK_MARK=" in out, "the plan's environment is missing: %s" % out)


@case
def memory_bomb_ends_for_memory(env):
    """Allocation without bound ends at the linear memory cap with reason
    memory and exit 137."""
    m = module(env, "grow")
    p, rec = run(env, ["--memory", "256M"], [m])
    expect(rec and rec["reason"] == "memory", "record: %s %s" % (rec, p.stderr[-300:]))
    expect(p.returncode == 137, "exit %d" % p.returncode)
    # The line names the cap that stopped it (256M less node's reserve),
    # not the --memory value as if the cgroup had been reached.
    err = p.stderr.decode(errors="replace")
    expect("linear memory came within an eighth of its cap of 128 M" in err and "--memory 256M" in err,
           "the limit's line: %r" % err[-300:])


def leb(n):
    """n as unsigned LEB128 (WebAssembly's integers)."""
    out = bytearray()
    while True:
        b, n = n & 0x7f, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def sec(i, body):
    """A module section: its id, its size, its body."""
    return bytes([i]) + leb(len(body)) + body


def name(text):
    return leb(len(text)) + text.encode()


MAGIC = b"\x00asm\x01\x00\x00\x00"
MEMORY = sec(5, b"\x01\x00\x01")  # one memory of one page
VOID = sec(1, b"\x01\x60\x00\x00")  # type 0: () -> ()


def table_bomb(path, tables=20):
    """Writes a module whose _start grows each of `tables` externref tables
    by 2^20 entries at a time until V8 refuses (its cap is 10^7 entries a
    table): memory outside the linear memory, so no --wasm-max-mem-pages
    applies. Bounded by itself (20 full tables are under 2 GiB)."""
    body = b"\x00"  # no locals
    for t in range(tables):
        # loop: table.grow t (ref.null, 2^20); repeat while it is not -1
        body += (b"\x03\x40\xd0\x6f\x41\x80\x80\xc0\x00\xfc\x0f" + leb(t) +
                 b"\x41\x7f\x47\x0d\x00\x0b")
    body += b"\x0b"
    m = MAGIC + VOID + sec(3, b"\x01\x00")
    m += sec(4, leb(tables) + b"\x6f\x00\x00" * tables) + MEMORY
    m += sec(7, b"\x02" + name("memory") + b"\x02\x00" + name("_start") + b"\x00\x00")
    m += sec(10, b"\x01" + leb(len(body)) + body)
    open(path, "wb").write(m)


def importer(path, module_name, field):
    """Writes a module importing module_name.field as a function () -> ()
    that its _start calls."""
    m = MAGIC + VOID + sec(2, b"\x01" + name(module_name) + name(field) + b"\x00\x00")
    m += sec(3, b"\x01\x00") + MEMORY
    m += sec(7, b"\x02" + name("memory") + b"\x02\x00" + name("_start") + b"\x00\x01")
    m += sec(10, b"\x01\x04\x00\x10\x00\x0b")
    open(path, "wb").write(m)


@case
def unexpected_modules_refused(env):
    """Modules that import node's internals through the WASI import object
    (its constructor, _setMemory: C++ functions that abort node on a failed
    check), import from `env`, or export no _start each end with exit 126
    and one airlock-wasm line, never a crash of node."""
    usable(env)
    with TempDir() as d:
        cases = []
        for field in ("constructor", "_setMemory", "__proto__"):
            path = os.path.join(d, "imp-%s.wasm" % field)
            importer(path, "wasi_snapshot_preview1", field)
            cases.append((path, "cannot be instantiated"))
        path = os.path.join(d, "env.wasm")
        importer(path, "env", "foo")
        cases.append((path, "cannot be instantiated"))
        path = os.path.join(d, "nostart.wasm")
        open(path, "wb").write(MAGIC + MEMORY + sec(7, b"\x01" + name("memory") + b"\x02\x00"))
        cases.append((path, "exports no _start"))
        for path, word in cases:
            p, rec = run(env, [], [path])
            err = p.stderr.decode()
            expect(p.returncode == 126, "%s: exit %d: %s" % (path, p.returncode, err[-400:]))
            expect(word in err and "Native stack trace" not in err,
                   "%s: %s" % (path, err[-400:]))
            expect(rec and rec["reason"] == "exited", "%s: record %s" % (path, rec))


@case
def python_script_missing_one_line(env):
    """--language python with a script that is not there ends with exit 2
    and one airlock-wasm line naming it, not node's stack trace."""
    usable(env)
    install_pyodide(os.path.join(os.path.dirname(env.airlock), "pyodide"))
    p, _ = run(env, ["--language", "python"], ["/nowhere/script.py"])
    lines = p.stderr.decode().strip().splitlines()
    expect(p.returncode == 2, "exit %d: %s" % (p.returncode, lines))
    expect(len(lines) == 1 and "cannot read the script /nowhere/script.py" in lines[0],
           "%s" % lines)


@case
def tables_outside_linear_memory_end_for_memory(env):
    """A module that exhausts memory through tables (V8's heap, outside the
    capped linear memory, so the driver's verdict never sees it) is still
    stopped by the run's cgroup, with reason memory."""
    usable(env)
    with TempDir() as d:
        m = os.path.join(d, "tables.wasm")
        table_bomb(m)
        p, rec = run(env, ["--memory", "192M", "--timeout", "30"], [m])
    expect(rec and rec["reason"] == "memory", "record: %s %s" % (rec, p.stderr[-300:]))


@case
def loop_ends_at_timeout(env):
    """An endless loop ends at the run's timeout with reason timeout."""
    m = module(env, "loop")
    p, rec = run(env, ["--timeout", "3"], [m])
    expect(rec and rec["reason"] == "timeout", "record: %s" % rec)


@case
def refusals(env):
    """A network rule, a terminal, a file that is no module, a FIFO and a
    device as the module are each refused with one line naming what, and
    nothing runs."""
    m = module(env, "io")
    with TempDir() as d:
        fifo = os.path.join(d, "fifo.wasm")
        os.mkfifo(fifo)
        # A FIFO as the module: refused at once, never waited on (the run's
        # own 20 s timeout below fails the case if airlock blocks on it).
        for opts, cmd, word in ((["--allow", "example.com"], [m], "network"),
                                (["-t"], [m], "terminal"),
                                ([], ["/bin/true"], "not a WebAssembly module"),
                                ([], [fifo], "not a regular file"),
                                ([], ["/dev/zero"], "not a regular file")):
            try:
                p, rec = run(env, opts, cmd, timeout=20)
            except subprocess.TimeoutExpired:
                raise AssertionError("%s %s: airlock blocked" % (opts, cmd))
            lines = p.stderr.decode().strip().splitlines()
            expect(p.returncode == 125, "%s %s: exit %d" % (opts, cmd, p.returncode))
            expect(len(lines) == 1 and word in lines[0], "%s %s: %s" % (opts, cmd, lines))


@case
def environment_configures_no_engine(env):
    """The plan's environment is the module's, never node's: NODE_OPTIONS
    asking node to --require a script (which would run JavaScript with
    node's whole API, here writing a file into the copied-out scratch)
    reaches the module as a plain variable and runs nothing."""
    m = module(env, "escape")
    with TempDir() as d:
        os.mkdir(os.path.join(d, "in"))
        hook = os.path.join(d, "in", "hook.cjs")
        open(hook, "w").write("require('fs').writeFileSync('/work/hooked', 'x');\n"
                              "console.log('HOOK RAN');\n")
        out = os.path.join(d, "out")
        p, _ = run(env, ["--ro", "%s:/input" % os.path.join(d, "in"),
                         "--env", "NODE_OPTIONS=--require /input/hook.cjs",
                         "--copy-out", "/work:%s" % out], [m, "/nowhere", "/nowhere2"])
        expect(p.returncode == 0, "exit %d: %s" % (p.returncode, p.stderr[-300:]))
        expect(b"HOOK RAN" not in p.stdout + p.stderr, "node ran the plan's NODE_OPTIONS")
        expect(not os.path.exists(os.path.join(out, "hooked")), "the hook wrote the scratch")
        expect(b"env NODE_OPTIONS=--require /input/hook.cjs" in p.stdout,
               "the module lost its variable: %s" % p.stdout[-300:])


def install_pyodide(into):
    """npm ci of src/backend/wasm/pyodide's lock file beside the binary
    (where airlock looks for Pyodide), again only when the lock changed;
    an install that fails fails the case."""
    pkg = os.path.join(HERE, "..", "..", "src", "backend", "wasm", "pyodide")
    lock = open(os.path.join(pkg, "package-lock.json"), "rb").read()
    stamp = os.path.join(into, "node_modules", ".airlock-lock")
    if os.path.exists(stamp) and open(stamp, "rb").read() == lock:
        return
    os.makedirs(into, exist_ok=True)
    for f in ("package.json", "package-lock.json"):
        shutil.copyfile(os.path.join(pkg, f), os.path.join(into, f))
    r = subprocess.run(["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund"], cwd=into,
                       capture_output=True, timeout=300)
    expect(r.returncode == 0, "npm ci of pyodide into %s failed: %s" % (into, r.stderr[-500:]))
    open(stamp, "wb").write(lock)


@case
def pyodide_analysis_step(env):
    """The seed's analysis step under Pyodide: the standard library's csv
    reads the demo's CSV input and writes a report to the scratch, copied
    out; the injected instructions reach nothing (no network, no secret)."""
    usable(env)
    install_pyodide(os.path.join(os.path.dirname(env.airlock), "pyodide"))
    code = ("import csv, collections\n"
            "rows = [r for r in csv.DictReader(l for l in open('/input/data.csv')"
            " if not l.startswith('#'))]\n"
            "by = collections.Counter()\n"
            "for r in rows: by[r['region']] += int(r['units']) * float(r['unit_price'])\n"
            "with open('/work/report.txt', 'w') as f:\n"
            "    for k, v in sorted(by.items()): f.write('%s %.2f\\n' % (k, v))\n"
            "print(len(rows), 'rows')\n")
    with TempDir() as d:
        os.mkdir(os.path.join(d, "in"))
        open(os.path.join(d, "in", "data.csv"), "w").write(open(SALES).read())
        out = os.path.join(d, "out")
        p, rec = run(env, ["--language", "python", "--timeout", "120",
                           "--ro", "%s:/input" % os.path.join(d, "in"),
                           "--copy-out", "/work/report.txt:%s" % out], ["-c", code],
                     timeout=150)
        expect(p.returncode == 0, "exit %d: %s" % (p.returncode, p.stderr[-500:]))
        report = open(os.path.join(out, "report.txt")).read()
        expect("East" in report, "report: %s" % report)
        expect(SECRET not in report, "the host environment leaked")


@case
def pyodide_js_memory_ends_for_memory(env):
    """Python allocating JavaScript buffers (outside Pyodide's linear
    memory) is stopped by the run's cgroup with reason memory; the loop
    stops by itself at 2.5 GiB."""
    usable(env)
    install_pyodide(os.path.join(os.path.dirname(env.airlock), "pyodide"))
    code = ("import js\nkeep = []\nfor i in range(40):\n"
            "    b = js.Uint8Array.new(64 << 20)\n    b.fill(1)\n    keep.append(b)\n"
            "print('survived')\n")
    p, rec = run(env, ["--language", "python", "--memory", "384M", "--timeout", "120"],
                 ["-c", code], timeout=150)
    expect(rec and rec["reason"] == "memory", "record: %s %s" % (rec, p.stderr[-300:]))
    expect(b"survived" not in p.stdout, "the allocations were not stopped")


# Python under Pyodide reaches node's whole API through its JavaScript
# bridge (docs/backends.md says so): these are the bounds that still hold.
NODE_API = r"""
import js, sys
from pyodide.ffi import to_js
port, hostfile = int(sys.argv[1]), sys.argv[2]
get = js.process.getBuiltinModule
utf8 = to_js({"encoding": "utf8"}, dict_converter=js.Object.fromEntries)
def t(name, f):
    try:
        print(name, "->", f())
    except BaseException as e:
        print(name, "denied", str(e).splitlines()[0][:200])
t("env", lambda: js.JSON.stringify(js.process.env))
t("read-host", lambda: get("fs").readFileSync(hostfile, "utf8"))
t("write-input", lambda: get("fs").writeFileSync("/input/data.txt", "changed"))
conn = ("require('net').connect(%d, '127.0.0.1').on('connect', () => console.log('connected'))"
        ".on('error', e => console.log('error', e.code))" % port)
t("connect", lambda: get("child_process").spawnSync("/usr/bin/node", to_js(["-e", conn]),
                                                    utf8).stdout.strip())
"""


@case
def pyodide_node_api_bounded_by_native(env):
    """Python under Pyodide calls node's fs, child_process and net (the
    layer's documented limit); the native layer around it still holds: no
    host environment value, a host file outside the plan unreadable, the
    input unchanged, and the host's loopback listener never reached."""
    usable(env)
    install_pyodide(os.path.join(os.path.dirname(env.airlock), "pyodide"))
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.setblocking(False)
    with TempDir() as d, listener:
        os.mkdir(os.path.join(d, "in"))
        src = os.path.join(d, "in", "data.txt")
        open(src, "w").write("input\n")
        hostfile = os.path.join(d, "hostfile")
        open(hostfile, "w").write(SECRET)
        p, rec = run(env, ["--language", "python", "--timeout", "120",
                           "--ro", "%s:/input" % os.path.join(d, "in")],
                     ["-c", NODE_API, str(listener.getsockname()[1]), hostfile], timeout=150)
        out = p.stdout.decode()
        expect(p.returncode == 0, "exit %d: %s" % (p.returncode, p.stderr[-500:]))
        expect("env ->" in out and "connect ->" in out, "the probe did not run: %s" % out)
        expect(SECRET not in out + p.stderr.decode(), "host env or file reached: %s" % out)
        expect("read-host denied" in out and "write-input denied" in out, out)
        expect(open(src).read() == "input\n", "the input changed")
        try:
            listener.accept()
            raise AssertionError("the sandbox reached the host's loopback")
        except BlockingIOError:
            pass
        expect("connected" not in out.replace("connect ->", ""), out)


if __name__ == "__main__":
    main(suite)
