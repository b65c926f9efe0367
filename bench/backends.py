#!/usr/bin/python3
"""Backends side by side: the same commands under every backend, interleaved.

Each round runs every (backend, command) pair once, in turn, so that machine
noise hits all of them alike; the report gives each pair's median wall time
and its ratio to native for the same command. A backend that `airlock
backends` says is unusable here is left out, with its reason. Other layers add
their rows to ROWS. With --baseline OLD, OLD's airlock runs every usable
(backend, command) pair too, in the same rounds, as backend "NAME@old"
(its ratio is to the new native).
microvm and vm rows add the VMM's phases (the guest's boot to the agent's
HELLO, the exec, the command, the power-off), medians in ms; under TCG
(no /dev/kvm) every guest instruction is emulated, which `airlock backends`
says as the platform.
Usage: bench/backends.py [--rounds N] [--airlock PATH] [--baseline OLD] [--wasm-module M.wasm]
                         [--json FILE]
(the wasm row runs the no-op module M where the others run /bin/true)

Then, unless --no-session: an exec of /bin/true in a live session of each
backend that takes execs (`airlock serve` on a socket of the bench's own:
one sandbox per backend, created first and timed with its first exec
as "create+1st" (a guest may boot after the create's answer); each round
then execs /bin/true once in each, in turn, timed at the client over one
HTTP connection per sandbox), its ratio to native's exec.
"""
import argparse
import shutil
import signal
import tempfile
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = "/usr/bin/python3"  # Debian's, which has pandas

# (backend, label, command): the command is what runs inside.
ROWS = [
    ("native", "/bin/true", ["/bin/true"]),
    ("process", "/bin/true", ["/bin/true"]),
    ("gvisor", "/bin/true", ["/bin/true"]),
    ("native", "import pandas", [PY, "-c", "import pandas"]),
    ("process", "import pandas", [PY, "-c", "import pandas"]),
    ("gvisor", "import pandas", [PY, "-c", "import pandas"]),
    ("microvm", "/bin/true", ["/bin/true"]),
    ("vm", "/bin/true", ["/bin/true"]),
    ("microvm", "import pandas", [PY, "-c", "import pandas"]),
    ("vm", "import pandas", [PY, "-c", "import pandas"]),
]
# microvm and vm: the VMM's own times ($AIRLOCK_PHASES), in µs, per run:
# QEMU's start to the agent's HELLO (the boot), HELLO to the command's
# start (the exec), the command, its end to QEMU's (the power-off).
VM_PHASES = ("boot", "exec", "command", "poweroff")
VM_BACKENDS = ("microvm", "vm")


def run_once(argv, phases=None):
    """Wall ms of one run; with phases (a dict), the VMM's phase times
    (ms) are appended to it from its $AIRLOCK_PHASES line."""
    env = dict(os.environ, AIRLOCK_PHASES="1") if phases is not None else None
    t = time.perf_counter()
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, env=env)
    dt = (time.perf_counter() - t) * 1000.0
    if r.returncode != 0:
        sys.exit("backends: %s exited %d: %s" % (" ".join(argv), r.returncode,
                                                 r.stderr.decode(errors="replace")[-300:]))
    if phases is not None:
        for line in r.stderr.decode(errors="replace").splitlines():
            if line.startswith("airlock: vmm phases: "):
                for part in line.split(": ", 2)[2].split(", "):
                    name, us, _ = part.split(" ")
                    phases.setdefault(name, []).append(int(us) / 1000.0)
    return dt


def session_execs(airlock, backends, rounds, warmup):
    """Per backend: the create's ms and the execs' ms in a live sandbox."""
    sys.path.insert(0, HERE)
    from serve import Client  # bench/serve.py's persistent HTTP client
    d = tempfile.mkdtemp(prefix="airlock-bench-backends-")
    sock = os.path.join(d, "sock")
    log = open(os.path.join(d, "log"), "w+")
    p = subprocess.Popen([airlock, "serve", "--socket", sock, "--max-sandboxes",
                          str(len(backends) + 1)], stdout=log, stderr=log)
    made = {}
    try:
        deadline = time.monotonic() + 10
        while not os.path.exists(sock):
            if p.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                sys.exit("backends: airlock serve did not start: " + log.read()[-500:])
            time.sleep(0.05)
        clients, create_ms = {}, {}
        exec_body = json.dumps({"argv": ["/bin/true"], "wait": True})
        for b in backends:
            cl = Client(sock)
            body = json.dumps({"backend": {"name": b}, "limits": {"timeout": "3600s"}})
            t = time.perf_counter()
            st, data = cl.request("POST", "/v1/sandboxes", body)
            if st != 201:
                sys.exit("backends: create on %s: %d %s" % (b, st, data[:300]))
            made[b] = json.loads(data)["id"]
            clients[b] = cl
            # The guest may still boot after the create's answer: its
            # first exec waits for it, so "create" is both.
            st, data = cl.request("POST", "/v1/sandboxes/%s/exec" % made[b], exec_body)
            create_ms[b] = (time.perf_counter() - t) * 1000.0
            if st != 200 or json.loads(data).get("exit_code") != 0:
                sys.exit("backends: first exec on %s: %d %s" % (b, st, data[:300]))
        body = exec_body
        times = {b: [] for b in backends}
        for i in range(warmup + rounds):
            for b in backends:
                t = time.perf_counter()
                st, data = clients[b].request("POST", "/v1/sandboxes/%s/exec" % made[b], body)
                dt = (time.perf_counter() - t) * 1000.0
                if st != 200 or json.loads(data).get("exit_code") != 0:
                    sys.exit("backends: exec on %s: %d %s" % (b, st, data[:300]))
                if i >= warmup:
                    times[b].append(dt)
        return create_ms, times
    finally:
        for b, sid in made.items():
            try:
                Client(sock).request("DELETE", "/v1/sandboxes/%s" % sid)
            except OSError:
                pass
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        log.close()
        shutil.rmtree(d, ignore_errors=True)


def usable(airlock):
    out = subprocess.run([airlock, "backends", "--json"], capture_output=True, check=True)
    return {b["name"]: (b["usable"], b.get("why", "")) for b in json.loads(out.stdout)["backends"]}


def backend_features(airlock):
    out = subprocess.run([airlock, "backends", "--json"], capture_output=True, check=True)
    return {b["name"]: b.get("features", {}) for b in json.loads(out.stdout)["backends"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--airlock", default=os.path.join(ROOT, "build", "airlock"))
    ap.add_argument("--baseline", help="an older airlock, run side by side as NAME@old")
    ap.add_argument("--json")
    ap.add_argument("--no-session", action="store_true",
                    help="leave out the exec in a live session")
    ap.add_argument("--wasm-module",
                    help="a WASI module that exits at once (int main(void) { return 0; } built "
                    "with clang --target=wasm32-wasi -O2): wasm's start-up row, beside "
                    "/bin/true under the others (bench/wasm.py compares it with bare node)")
    a = ap.parse_args()
    have = usable(a.airlock)
    features = backend_features(a.airlock)
    rows = []
    table = list(ROWS)
    if a.wasm_module:
        table.insert(3, ("wasm", "/bin/true", [os.path.abspath(a.wasm_module)]))
    for backend, label, cmd in table:
        ok, why = have.get(backend, (False, "not built"))
        if not ok:
            print("skipping %s: %s" % (backend, why), file=sys.stderr)
            continue
        # Emulated guests on a busy machine may pass the default 60 s.
        limit = ["--timeout", "600s"] if backend in VM_BACKENDS else []
        rows.append((backend, label, [a.airlock, "run", "--backend", backend] + limit + ["--"] +
                     cmd))
        if a.baseline:
            rows.append((backend + "@old", label,
                         [a.baseline, "run", "--backend", backend] + limit + ["--"] + cmd))
    bare = {}
    for _, label, cmd in ROWS:
        bare.setdefault(label, cmd)
    times = {(b, l): [] for b, l, _ in rows}
    times.update({("bare", l): [] for l in bare})
    phases = {}
    for i in range(a.warmup + a.rounds):
        for label, cmd in bare.items():
            dt = run_once(cmd)
            if i >= a.warmup:
                times[("bare", label)].append(dt)
        for b, l, argv in rows:
            ph = phases.setdefault((b, l), {}) if b.split("@")[0] in VM_BACKENDS else None
            dt = run_once(argv, ph if i >= a.warmup else None)
            if i >= a.warmup:
                times[(b, l)].append(dt)
    med = {k: statistics.median(v) for k, v in times.items()}
    print("%-12s %-15s %10s %10s %9s" % ("backend", "command", "median ms", "min ms", "x native"))
    for (b, l), v in sorted(times.items(), key=lambda kv: (kv[0][1], kv[0][0] != "bare",
                                                              kv[0][0] != "native")):
        nat = med.get(("native", l))
        ratio = "%.2f" % (med[(b, l)] / nat) if nat and b != "bare" else "-"
        print("%-12s %-15s %10.1f %10.1f %9s" % (b, l, med[(b, l)], min(v), ratio))
    if phases:
        print()
        print("%-12s %-15s %s" % ("backend", "command",
                                  "  ".join("%10s" % ("%s ms" % n) for n in VM_PHASES)))
        for (b, l), ph in sorted(phases.items()):
            print("%-12s %-15s %s" % (b, l, "  ".join(
                "%10.1f" % statistics.median(ph[n]) if ph.get(n) else "%10s" % "-"
                for n in VM_PHASES)))
    out = {"%s %s" % k: {"median_ms": med[k], "runs_ms": v} for k, v in times.items()}
    if not a.no_session:
        live = [b for b in ("native", "process", "gvisor", "microvm", "vm")
                if have.get(b, (False,))[0] and features.get(b, {}).get("exec")]
        create_ms, st = session_execs(a.airlock, live, a.rounds, a.warmup)
        print()
        print("%-12s %-15s %10s %10s %9s %12s" % ("backend", "live session", "median ms",
                                                  "min ms", "x native", "create+1st ms"))
        nat = statistics.median(st["native"]) if st.get("native") else None
        for b in live:
            m = statistics.median(st[b])
            print("%-12s %-15s %10.1f %10.1f %9s %12.1f" % (
                b, "exec /bin/true", m, min(st[b]), "%.2f" % (m / nat) if nat else "-",
                create_ms[b]))
            out["%s session exec" % b] = {"median_ms": m, "runs_ms": st[b],
                                          "create_ms": create_ms[b]}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
