#!/usr/bin/python3
"""Egress benchmark: the gateway's paths vs the same client on the host, interleaved.

A loopback HTTP server in this process (127.0.0.1, a port the kernel picks)
serves a large body (/big: a sparse memfd sent with sendfile, so nothing
touches the disk) and a tiny one (/tiny). Three measurements, each
interleaved round by round (every case runs once per round, in turn) so
that machine noise hits all sides alike; the report gives medians and the
ratios the issue sets targets on:

  download   curl of /big: directly on the host; through a bare splice
             relay on the host (a reference, not a peer: the least a relay
             on the data path costs); inside `airlock run
             --allow bench.internal:PORT --map-host bench.internal=127.0.0.1`
             through the HTTP proxy (HTTP_PROXY), the transparent path
             (--noproxy '*': DNS stub + nftables redirect) and SOCKS5
             (--proxy socks5h://127.0.0.1:1080); and, when it can be
             installed and runs, inside Anthropic's sandbox-runtime (srt)
             through its proxy. MB/s from curl's speed_download
             (1 MB = 10^6 bytes). Target: >= 0.9x direct.
  requests   one python3 process makes N sequential short requests, a new
             connection each (http.client): on the host directly vs inside
             the sandbox through the proxy (and, extra, the transparent
             path, which also asks the DNS stub each time). The time for
             all N is measured inside the process. Target: <= 1.2x direct.
  start-up   `airlock run --allow x.test -- /bin/true` vs `airlock run --
             /bin/true` vs bwrap (as bench/startup.py runs it).
             Target: <= 1.0x bwrap.

With --baseline PATH every airlock case also runs with that (earlier)
binary, next to it in each round, named "baseline, ...". Every other round
runs the cases in reverse order.

Safety: every server listens on 127.0.0.1 only; the sandbox's names are
mapped to 127.0.0.1 with --map-host; no measured traffic leaves the host
(installing srt with npm reaches the npm registry once; --no-srt or --srt
PATH avoids that). Every child runs with a timeout and is killed by
subprocess (by its pid) if it hangs.
Run as root, like bench/startup.py. Takes 1 to 2 minutes with the defaults.
Usage: bench/egress.py [--rounds N] [--request-rounds N] [--requests N]
                       [--start-rounds N] [--size-mb N] [--no-srt] [--srt PATH]
                       [--airlock PATH] [--json FILE]
"""
import argparse
import http.server
import json
import os
import shlex
import shutil
import socketserver
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = "/usr/bin/python3"
NAME = "bench.internal"
CURL_FMT = "%{speed_download} %{size_download} %{http_code}"


# ---------------------------------------------------------------- server

class Body:
    """The /big body: a sparse memfd (no disk, no resident pages)."""

    def __init__(self, size):
        self.size = size
        self.fd = os.memfd_create("egress-bench-body", os.MFD_CLOEXEC)
        os.ftruncate(self.fd, size)

    def close(self):
        os.close(self.fd)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    body = None  # set on the class before the server starts

    def do_GET(self):
        if self.path == "/big":
            size = self.body.size
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(size))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.flush()
            off, sock = 0, self.connection.fileno()
            while off < size:
                n = os.sendfile(sock, self.body.fd, off, size - off)
                if n <= 0:
                    break
                off += n
            self.close_connection = True
        elif self.path == "/tiny":
            # One write for head and body: a second small write would wait
            # for an ACK (Nagle + delayed ACK) and measure the server.
            self.log_request(200)
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                             b"Content-Length: 3\r\n\r\nok\n")
        else:
            self.send_error(404)

    def log_message(self, *args):
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


def start_server(size):
    Handler.body = Body(size)
    srv = Server(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
    t.start()
    return srv


# ---------------------------------------------------------------- helpers

def run(argv, timeout, what):
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=timeout)
    if r.returncode != 0:
        sys.exit(f"egress: {what}: {shlex.join(argv)} exited {r.returncode}: "
                 f"{(r.stderr or r.stdout).strip()[-400:]}")
    return r.stdout


def stats(v):
    s = sorted(v)
    return {"median": statistics.median(s), "p10": s[len(s) // 10],
            "p90": s[min(len(s) - 1, len(s) * 9 // 10)], "n": len(s)}


def airlock_gw(args, port, cmd, binary=None):
    return [binary or args.airlock, "run", "--allow", f"{NAME}:{port}",
            "--map-host", f"{NAME}=127.0.0.1", "--"] + cmd


def with_baseline(args, cases):
    """With --baseline, each airlock case again with the earlier binary,
    right after it in every round."""
    if not args.baseline:
        return cases
    out = []
    for name, argv in cases:
        out.append((name, argv))
        if argv[0] == args.airlock:
            out.append(("baseline" + name[len("airlock"):], [args.baseline] + argv[1:]))
    return out


# ---------------------------------------------------------------- srt

SRT_PKG = "@anthropic-ai/sandbox-runtime"


def setup_srt(args, port, tmp):
    """Returns (argv prefix for a shell command string, version) or
    (None, reason it was skipped)."""
    if args.no_srt:
        return None, "skipped by --no-srt"
    srt = args.srt
    if not srt:
        npm = shutil.which("npm")
        if not npm:
            return None, "npm not found (Debian package npm)"
        d = os.path.join(tmp, "srt")
        os.mkdir(d)
        try:
            r = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--silent",
                                "--prefix", d, SRT_PKG], stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, timeout=180)
        except subprocess.TimeoutExpired:
            return None, f"npm install {SRT_PKG} did not finish in 180 s"
        srt = os.path.join(d, "node_modules", ".bin", "srt")
        if r.returncode != 0 or not os.path.exists(srt):
            last = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["no output"]
            return None, f"npm install {SRT_PKG} failed: {last[0]}"
    settings = os.path.join(tmp, "srt-settings.json")
    with open(settings, "w") as f:
        json.dump({"network": {"allowedDomains": [f"localhost:{port}"], "deniedDomains": []},
                   "filesystem": {"denyRead": [], "allowWrite": [], "denyWrite": []}}, f)
    prefix = [srt, "--settings", settings, "-c"]
    try:
        r = subprocess.run(prefix + ["/bin/true"], stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return None, "srt -c /bin/true did not finish in 60 s"
    if r.returncode != 0:
        msg = (r.stderr or r.stdout).strip().replace("\n", " ")[-300:]
        return None, f"srt does not run here: {msg}"
    version = ""
    pj = os.path.join(os.path.dirname(os.path.realpath(srt)), "..", "package.json")
    try:
        with open(pj) as f:
            version = json.load(f).get("version", "")
    except (OSError, ValueError):
        pass
    return prefix, version


# ---------------------------------------------------------------- download

# The least any relay can cost: a process on the host that only splices
# bytes between two loopback sockets (1 MiB pipes, a blocking thread per
# direction, no parsing, no policy, no sandbox). Not a peer: it shows how
# far any design that keeps a relay on the data path can get here.
RELAY = r"""
import os, socket, sys, threading
up_port = int(sys.argv[1])
ls = socket.socket(); ls.bind(("127.0.0.1", 0)); ls.listen(16)
print(ls.getsockname()[1], flush=True)
def pump(a, b):
    r, w = os.pipe()
    try:
        import fcntl
        fcntl.fcntl(w, 1031, 1 << 20)  # F_SETPIPE_SZ
    except OSError:
        pass
    try:
        while True:
            n = os.splice(a.fileno(), w, 1 << 20)
            if n == 0:
                break
            while n:
                n -= os.splice(r, b.fileno(), n)
        b.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    os.close(r); os.close(w)
def serve(c):
    u = socket.create_connection(("127.0.0.1", up_port))
    t = threading.Thread(target=pump, args=(c, u)); t.start()
    pump(u, c); t.join(); c.close(); u.close()
while True:
    c, _ = ls.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"""


def start_relay(port):
    """The reference relay as a child process: (Popen, its port)."""
    p = subprocess.Popen([PY, "-c", RELAY, str(port)], stdout=subprocess.PIPE, text=True)
    return p, int(p.stdout.readline())


def download_cases(args, port, srt_prefix, relay_port):
    curl = ["curl", "-s", "-o", "/dev/null", "-w", CURL_FMT]
    cases = [
        ("direct (host)", curl + [f"http://127.0.0.1:{port}/big"]),
        ("bare splice relay (host)", curl + [f"http://127.0.0.1:{relay_port}/big"]),
        ("airlock, HTTP proxy", airlock_gw(args, port, curl + [f"http://{NAME}:{port}/big"])),
        ("airlock, transparent", airlock_gw(args, port, curl + ["--noproxy", "*",
                                                               f"http://{NAME}:{port}/big"])),
        ("airlock, SOCKS5", airlock_gw(args, port, curl + ["--proxy", "socks5h://127.0.0.1:1080",
                                                          f"http://{NAME}:{port}/big"])),
    ]
    cases = with_baseline(args, cases)
    if srt_prefix:
        # srt puts localhost in NO_PROXY; --noproxy '' sends it through srt's proxy.
        cmd = shlex.join(curl + ["--noproxy", "", f"http://localhost:{port}/big"])
        cases.append(("srt, HTTP proxy", srt_prefix + [cmd]))
    return cases


def download_once(argv, size):
    """(MB/s, None) or (None, what went wrong)."""
    try:
        r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=120)
    except subprocess.TimeoutExpired:
        return None, "no answer in 120 s"
    out = r.stdout.split()
    if r.returncode != 0 or len(out) != 3 or out[1] != str(size) or out[2] != "200":
        return None, (f"exit {r.returncode}, curl wrote {r.stdout.strip()!r}, "
                      f"stderr {r.stderr.strip()[-200:]!r}")
    return float(out[0]) / 1e6, None


def in_turn(cases, i):
    """Round i's order: every other round in reverse, so that no case always
    runs right after the same one (what ran before a case biased it by a
    few percent in bench/startup.py)."""
    return cases if i % 2 == 0 else cases[::-1]


def measure_downloads(cases, rounds, size, peers):
    """airlock's and the host's failures end the benchmark; a peer's (srt)
    is retried twice, then the peer is dropped with the reason."""
    speeds = {name: [] for name, _ in cases}
    dropped = {}
    for i in range(rounds + 1):  # round 0 warms up
        for name, argv in in_turn(cases, i):
            if name in dropped:
                continue
            for attempt in range(3 if name in peers else 1):
                mbs, why = download_once(argv, size)
                if mbs is not None:
                    break
                print(f"  ({name}: attempt {attempt + 1} failed: {why})")
            if mbs is None:
                if name not in peers:
                    sys.exit(f"egress: download ({name}): {shlex.join(argv)}: {why}")
                dropped[name] = f"failed 3 times in a row in round {i}: {why}"
                continue
            if i > 0:
                speeds[name].append(mbs)
    return {name: stats(v) for name, v in speeds.items() if v and name not in dropped}, dropped


# ---------------------------------------------------------------- requests

CLIENT = r"""
import http.client, sys, time
mode, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if mode == "direct":
    host, hport, target = "127.0.0.1", port, "/tiny"
elif mode == "proxy":
    host, hport, target = "127.0.0.1", 3128, "http://%s:%d/tiny" % (sys.argv[4], port)
else:  # transparent: resolve the name (DNS stub) and connect to it
    host, hport, target = sys.argv[4], port, "/tiny"
# A new connection per request, so say so (the gateway says it upstream anyway).
hdr = {"Host": "%s:%d" % (sys.argv[4] if mode != "direct" else "127.0.0.1", port),
       "Connection": "close"}
t = time.perf_counter()
for _ in range(n):
    c = http.client.HTTPConnection(host, hport, timeout=10)
    c.request("GET", target, headers=hdr)
    r = c.getresponse()
    body = r.read()
    c.close()
    if r.status != 200 or body != b"ok\n":
        sys.exit("bad answer %d %r" % (r.status, body[:80]))
print("%.6f" % (time.perf_counter() - t))
"""


def request_cases(args, port, n, transparent):
    cases = [("direct (host)", [PY, "-c", CLIENT, "direct", str(port), str(n), NAME]),
             ("airlock, HTTP proxy",
              airlock_gw(args, port, [PY, "-c", CLIENT, "proxy", str(port), str(n), NAME]))]
    if transparent:
        cases.append(("airlock, transparent",
                      airlock_gw(args, port, [PY, "-c", CLIENT, "transparent", str(port), str(n),
                                              NAME])))
    return with_baseline(args, cases)


def measure_requests(cases, rounds):
    times = {name: [] for name, _ in cases}
    for i in range(rounds + 1):  # round 0 warms up
        for name, argv in in_turn(cases, i):
            dt = float(run(argv, 120, f"requests ({name})").strip()) * 1000.0
            if i > 0:
                times[name].append(dt)
    return {name: stats(v) for name, v in times.items()}


# ---------------------------------------------------------------- start-up

def run_quiet(argv):
    t = time.perf_counter()
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=30)
    dt = (time.perf_counter() - t) * 1000.0
    if r.returncode != 0:
        sys.exit(f"egress: start-up: {shlex.join(argv)} exited {r.returncode}")
    return dt


def measure_startup(args, rounds, warmup):
    true = "/bin/true"
    cases = []
    bwrap = shutil.which("bwrap")
    if bwrap:
        cases.append(("bwrap", [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                                "--tmpfs", "/tmp", "--unshare-all", "--die-with-parent", true]))
    cases += [("airlock run -- /bin/true", [args.airlock, "run", "--", true]),
              ("airlock run --allow x.test -- /bin/true",
               [args.airlock, "run", "--allow", "x.test", "--", true])]
    cases = with_baseline(args, cases)
    times = {name: [] for name, _ in cases}
    for i in range(warmup + rounds):
        for name, argv in in_turn(cases, i):
            dt = run_quiet(argv)
            if i >= warmup:
                times[name].append(dt)
    return {name: stats(v) for name, v in times.items()}, bool(bwrap)


# ---------------------------------------------------------------- main

def machine_note():
    try:
        with open("/etc/debian_version") as f:
            deb = "Debian " + f.read().strip()
    except OSError:
        deb = "not Debian"
    curl = subprocess.run(["curl", "--version"], capture_output=True, text=True).stdout.split()
    return (f"{os.cpu_count()} CPUs, kernel {os.uname().release}, {deb}, "
            f"curl {curl[1] if len(curl) > 1 else '?'}, uid {os.getuid()}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15, help="download rounds (default 15)")
    ap.add_argument("--request-rounds", type=int, default=11, help="rounds of N requests (11)")
    ap.add_argument("--requests", type=int, default=1000, help="requests per round (1000)")
    ap.add_argument("--start-rounds", type=int, default=300, help="start-up rounds (300)")
    ap.add_argument("--warmup", type=int, default=10, help="start-up warm-up rounds (10)")
    ap.add_argument("--size-mb", type=int, default=200, help="download size, 10^6 bytes (200)")
    ap.add_argument("--no-transparent-requests", action="store_true",
                    help="leave the transparent path out of the request test")
    ap.add_argument("--no-srt", action="store_true", help="do not try sandbox-runtime (srt)")
    ap.add_argument("--srt", help="an installed srt to use instead of npm install")
    ap.add_argument("--airlock", default=os.path.join(ROOT, "build", "airlock"))
    ap.add_argument("--baseline", help="an earlier airlock binary to run in the same rounds")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    if args.baseline:
        args.baseline = os.path.abspath(args.baseline)
    args.airlock = os.path.abspath(args.airlock)

    if not shutil.which("curl"):
        sys.exit("egress: curl (Debian package curl) is required")
    size = args.size_mb * 1000 * 1000
    t0 = time.perf_counter()
    note = machine_note()
    print(f"machine: {note}")
    srv = start_server(size)
    port = srv.server_address[1]
    tmp = tempfile.mkdtemp(prefix="egress-bench-")
    out = {"machine": note, "size_bytes": size}
    try:
        srt_prefix, srt_info = setup_srt(args, port, tmp)
        if srt_prefix:
            print(f"srt: {SRT_PKG} {srt_info}, through its HTTP proxy")
            out["srt"] = {"version": srt_info}
        else:
            print(f"srt: not measured: {srt_info}")
            out["srt"] = {"skipped": srt_info}

        relay, relay_port = start_relay(port)
        try:
            dl, dropped = measure_downloads(download_cases(args, port, srt_prefix, relay_port),
                                            args.rounds, size, peers={"srt, HTTP proxy"})
        finally:
            relay.kill()
            relay.wait()
        for name, why in dropped.items():
            print(f"{name}: dropped: {why}")
            out["srt"] = {"version": srt_info, "dropped": why}
        direct = dl["direct (host)"]["median"]
        print(f"\ndownload of {args.size_mb} MB, {args.rounds} interleaved rounds "
              f"(MB/s, 1 MB = 10^6 bytes):")
        for name, r in dl.items():
            r["ratio"] = r["median"] / direct
            print(f"  {name:24s} median {r['median']:8.1f} MB/s  (p10 {r['p10']:.1f}, "
                  f"p90 {r['p90']:.1f})  {r['ratio']:.2f}x direct")
        print("  target: each airlock path >= 0.90x direct; the bare relay is the most any\n"
              "  relay on the data path reaches on this machine")
        out["download_mb_s"] = dl

        rq = measure_requests(request_cases(args, port, args.requests,
                                            not args.no_transparent_requests),
                              args.request_rounds)
        direct = rq["direct (host)"]["median"]
        print(f"\n{args.requests} sequential requests, a new connection each, one python3 "
              f"process, {args.request_rounds} interleaved rounds (ms for all):")
        for name, r in rq.items():
            r["ratio"] = r["median"] / direct
            r["added_us_per_request"] = (r["median"] - direct) * 1000.0 / args.requests
            print(f"  {name:24s} median {r['median']:8.1f} ms  (p10 {r['p10']:.1f}, "
                  f"p90 {r['p90']:.1f})  {r['ratio']:.2f}x direct, "
                  f"{r['added_us_per_request']:+.0f} us/request")
        print("  target: HTTP proxy <= 1.20x direct")
        out["requests_ms"] = rq
        out["requests"] = args.requests
    finally:
        srv.shutdown()
        srv.server_close()
        Handler.body.close()
        shutil.rmtree(tmp, ignore_errors=True)

    st, have_bwrap = measure_startup(args, args.start_rounds, args.warmup)
    print(f"\nstart-up, {args.start_rounds} interleaved rounds ({args.warmup} warm-up):")
    for name, r in st.items():
        if have_bwrap:
            r["ratio_to_bwrap"] = r["median"] / st["bwrap"]["median"]
        print(f"  {name:40s} median {r['median']:6.2f} ms  (p10 {r['p10']:.2f}, "
              f"p90 {r['p90']:.2f})" +
              (f"  {r['ratio_to_bwrap']:.2f}x bwrap" if have_bwrap else ""))
    if have_bwrap:
        print("  target: airlock with the gateway <= 1.00x bwrap")
    else:
        print("  bwrap (Debian package bubblewrap) not found: no ratio")
    out["startup_ms"] = st
    out["total_s"] = time.perf_counter() - t0
    print(f"\ntotal {out['total_s']:.0f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
