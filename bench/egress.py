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
             path, which also asks the DNS stub each time), and through
             the floor proxy (bench/proxy-floor.c, --proxy-floor: the least
             an HTTP proxy does per request), once on the host and once
             with its client in a network namespace the floor made (its
             listener passed out to it, as the gateway's are). The time for
             all N is measured inside the process. Target: <= 1.2x direct.
  start-up   `airlock run --allow x.test -- /bin/true` vs `airlock run --
             /bin/true` vs bwrap (as bench/startup.py runs it).
             Target: <= 1.0x bwrap.
  https      a second loopback server speaks TLS (Python's ssl; a test CA
             and an ECDSA P-256 leaf for bench.internal, made with the
             openssl command in the temporary directory) and serves the
             same /big (written in 1 MiB chunks: sendfile cannot encrypt)
             and /tiny. Three cases, interleaved: curl on the host
             (--cacert TESTCA --resolve); curl inside `airlock run --policy
             P` whose rule is {"host": "bench.internal:PORT", "tls":
             "intercept", "ca": TESTCA} (through HTTPS_PROXY, trusting the
             run's CA through the CURL_CA_BUNDLE airlock sets); and, as a
             reference, the same through the gateway with a plain rule (TLS
             passed through; curl gets TESTCA with --ro). Throughput:
             curl's speed_download, and the body alone (size over
             time_total minus time_pretransfer: curl loads its CA file for
             every connection, and the sandbox's is the host's bundle plus
             the run's CA). Target: intercepted >= 0.4x direct.
             Latency: one python3 process per case makes N sequential
             requests for /tiny, a new TCP and TLS connection each (its
             SSLContext made once, before the clock; through the proxy
             with CONNECT), each timed, the first one apart from the rest:
             inside, the first has the gateway mint the run's leaf for
             bench.internal, later ones find it cached. Target: <= 2 ms
             added to the first request (intercepted minus direct).
  secret     the answer search (docs/credentials.md): `airlock run --policy
             P` whose policy scopes a secret (a random 32-character value
             in airlock's environment, EGRESS_BENCH_SECRET, presented as
             `Authorization: Bearer {}`) to the plain HTTP port and to the
             intercepted HTTPS port, so every answer on those connections
             is searched. First a check that the search runs: the server's
             /echo sends back the Authorization it got, and the value must
             not reach curl inside (/echo.gz, the same gzipped: cut by a
             gateway that decodes; only reported for the baseline). Then
             curl of /big, interleaved: on the host; filtered (plain HTTP
             through the proxy); filtered, gzip (/big.gz: the size's worth
             of hex text compressed ahead with gzip, sent with
             Content-Encoding: gzip whatever curl asked for; curl does not
             decode it, the gateway does for its search; MB/s on the wire,
             and decoded); filtered, text (/big.txt: the same hex text
             uncompressed, as text/plain, which the gateway also searches
             with its escapes undone; /big and /big.gz are
             application/octet-stream, which skip that view);
             intercepted + secret, of /big and of /big.txt; and as
             references without a secret, the HTTP proxy (the splice
             relay) and intercepted. The load average at each round's
             start is reported.
             With --baseline, new/old for each secret case: of the
             medians, and the median of each round's ratio.

With --baseline PATH every airlock case also runs with that (earlier)
binary, next to it in each round, named "baseline, ...". Every other round
runs the cases in reverse order.

A baseline from before HTTPS interception needs --no-https.

Safety: every server listens on 127.0.0.1 only; the sandbox's names are
mapped to 127.0.0.1 with --map-host; no measured traffic leaves the host
(installing srt with npm reaches the npm registry once; --no-srt or --srt
PATH avoids that). Every child runs with a timeout and is killed by
subprocess (by its pid) if it hangs.
Run as root, like bench/startup.py. Takes 2 to 3 minutes with the defaults.
Usage: bench/egress.py [--rounds N] [--request-rounds N] [--requests N]
                       [--start-rounds N] [--size-mb N] [--no-srt] [--srt PATH]
                       [--https-rounds N] [--tls-request-rounds N] [--tls-requests N]
                       [--tls-tickets N] [--no-https | --only-https | --only-secret]
                       [--no-secret] [--secret-rounds N] [--serve]
                       [--airlock PATH] [--proxy-floor PATH] [--json FILE]
"""
import argparse
import gzip
import http.server
import json
import os
import shlex
import secrets
import shutil
import socketserver
import ssl
import statistics
import string
import subprocess
import sys
import tempfile
import threading
import time
import zlib

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


class TextBody(Body):
    """The /big.txt body: SIZE bytes of hex text (random bytes' hex) in a
    memfd, served as text/plain, so the gateway's unescaped view searches
    it too. Hex has no byte that starts an escape, so the view copies it
    whole: its least cost per byte of text."""

    def __init__(self, size):
        self.size = size
        self.fd = os.memfd_create("egress-bench-text", os.MFD_CLOEXEC)
        left = size
        while left:
            n = min(left, 1 << 22)
            os.write(self.fd, os.urandom((n + 1) // 2).hex()[:n].encode())
            left -= n


class GzipBody(Body):
    """The /big.gz body: the text body (hex, about 2:1 in gzip, as text
    compresses) compressed ahead with gzip level 1, in a memfd. Its
    decoded size is the text's."""

    def __init__(self, text):
        self.decoded = text.size
        self.fd = os.memfd_create("egress-bench-gzip", os.MFD_CLOEXEC)
        z = zlib.compressobj(1, zlib.DEFLATED, 31)  # 31: a gzip wrapper
        off = 0
        while off < text.size:
            piece = os.pread(text.fd, min(text.size - off, 1 << 22), off)
            os.write(self.fd, z.compress(piece))
            off += len(piece)
        os.write(self.fd, z.flush())
        self.size = os.lseek(self.fd, 0, os.SEEK_CUR)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    body = None  # set on the class before the server starts
    gz = None  # the gzip body, when the secret cases run (GzipBody)
    text = None  # the text body, when the secret cases run (TextBody)
    echoed = []  # what /echo and /echo.gz were sent, in order

    def do_GET(self):
        if self.path in ("/big", "/big.gz", "/big.txt"):
            body = {"/big": self.body, "/big.gz": self.gz, "/big.txt": self.text}[self.path]
            if body is None:
                self.send_error(404)
                return
            self.send_response(200)
            # Not text: the gateway's answer search skips its unescaped
            # view (src/gateway/answer-head.c); /big.txt gets it.
            self.send_header("Content-Type", "text/plain" if body is self.text
                             else "application/octet-stream")
            if body is self.gz:
                # Compressed ahead (not negotiated): the gateway decodes it
                # for its answer search whatever the client asked for.
                self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(body.size))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.flush()
            if isinstance(self.connection, ssl.SSLSocket):
                self.send_tls(body)
            else:
                off, sock = 0, self.connection.fileno()
                while off < body.size:
                    n = os.sendfile(sock, body.fd, off, body.size - off)
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
        elif self.path in ("/echo", "/echo.gz"):
            # The request's Authorization field sent back in the body (as
            # a debug endpoint would): on a connection that carries a
            # secret the gateway must cut it. Records what it was sent.
            got = (self.headers.get("Authorization") or "").encode()
            Handler.echoed.append(got)
            body, enc = got, b""
            if self.path == "/echo.gz":
                body, enc = gzip.compress(got), b"Content-Encoding: gzip\r\n"
            self.log_request(200)
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n" + enc +
                             b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
                             + body)
            self.close_connection = True
        else:
            self.send_error(404)

    def send_tls(self, body):
        """The body through TLS: read from the memfd (a hole reads as zeros
        and allocates nothing) into one buffer, written a chunk at a time."""
        view = memoryview(bytearray(TLS_CHUNK))
        off = 0
        while off < body.size:
            n = os.preadv(body.fd, [view[:min(TLS_CHUNK, body.size - off)]], off)
            if n <= 0:
                break
            self.connection.sendall(view[:n])
            off += n

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


TLS_CHUNK = 1 << 20


class TLSHandler(Handler):
    timeout = 30  # a client that stops halfway through its handshake

    def setup(self):
        # The handshake here, in the connection's thread, not in accept().
        self.request.settimeout(self.timeout)
        self.request.do_handshake()
        super().setup()


class TLSServer(Server):
    def __init__(self, addr, handler, ctx):
        super().__init__(addr, handler)
        self.ctx = ctx

    def get_request(self):
        sock, addr = self.socket.accept()
        return self.ctx.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr


def make_test_ca(d):
    """A test CA and a leaf for NAME signed by it, ECDSA P-256, made with
    the openssl command: (CA file, leaf file, leaf key file)."""
    ca, ca_key = os.path.join(d, "ca.pem"), os.path.join(d, "ca.key")
    leaf, key = os.path.join(d, "leaf.pem"), os.path.join(d, "leaf.key")
    csr, ext = os.path.join(d, "leaf.csr"), os.path.join(d, "leaf.ext")
    with open(ext, "w") as f:
        f.write(f"subjectAltName=DNS:{NAME}\nbasicConstraints=critical,CA:FALSE\n"
                "keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    run(["openssl", "req", "-x509"] + ec + ["-keyout", ca_key, "-out", ca, "-days", "2",
         "-subj", "/CN=airlock egress bench test CA",
         "-addext", "basicConstraints=critical,CA:TRUE",
         "-addext", "keyUsage=critical,keyCertSign,cRLSign"], 30, "test CA")
    run(["openssl", "req"] + ec + ["-keyout", key, "-out", csr, "-subj", f"/CN={NAME}"], 30,
        "test leaf request")
    run(["openssl", "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
         "-days", "2", "-extfile", ext, "-out", leaf], 30, "test leaf")
    return ca, leaf, key


def start_tls_server(leaf, key, tickets):
    """The HTTPS server, on another port (the body is the one start_server
    made)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(leaf, key)
    # TLS 1.3 session tickets after each handshake (nobody here resumes a
    # session): OpenSSL's default is 2, as most servers send.
    ctx.num_tickets = tickets
    srv = TLSServer(("127.0.0.1", 0), TLSHandler, ctx)
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


def download_once(argv, size, env=None):
    """(MB/s, None) or (None, what went wrong)."""
    try:
        r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=120, env=env)
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
elif mode == "proxy":  # airlock's proxy port, or the floor proxy's (argv[5])
    hport = int(sys.argv[5]) if len(sys.argv) > 5 else 3128
    host, target = "127.0.0.1", "http://%s:%d/tiny" % (sys.argv[4], port)
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


def start_proxy_floors(args):
    """bench/proxy-floor.c twice, as child processes: listening on the
    host's loopback, and (--netns) in a network namespace it makes, as the
    gateway's listeners are in the sandbox's. Returns [(Popen, port, pid of
    the namespace's holder or None)], or [] when the program is not built."""
    if not os.access(args.proxy_floor, os.X_OK):
        return []
    floors = []
    for extra in ([], ["--netns"]):
        p = subprocess.Popen([args.proxy_floor] + extra, stdout=subprocess.PIPE, text=True)
        floors.append(p)
        words = p.stdout.readline().split()
        if not words:
            for q in floors:
                q.kill()
                q.wait()
            sys.exit(f"egress: {args.proxy_floor} {' '.join(extra)}: did not start")
        floors[-1] = (p, int(words[0]), int(words[1]) if extra else None)
    return floors


def request_cases(args, port, n, transparent, floors=()):
    cases = [("direct (host)", [PY, "-c", CLIENT, "direct", str(port), str(n), NAME])]
    for _, fport, holder in floors:
        client = [PY, "-c", CLIENT, "proxy", str(port), str(n), NAME, str(fport)]
        if holder is None:
            cases.append(("floor proxy (host)", client))
        else:
            # The client in the floor's namespace, the floor in the host's.
            cases.append(("floor proxy (netns)", ["nsenter", f"--net=/proc/{holder}/ns/net"]
                          + client))
    cases.append(("airlock, HTTP proxy",
                  airlock_gw(args, port, [PY, "-c", CLIENT, "proxy", str(port), str(n), NAME])))
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


# ---------------------------------------------------------------- https

# curl's timings, for the HTTPS downloads: the body alone is what arrives
# after time_pretransfer (TCP, CONNECT, the handshake and curl's loading of
# its CA file are before it).
CURL_FMT_TLS = CURL_FMT + " %{time_appconnect} %{time_pretransfer} %{time_total}"
IN_CA = "/input/egress-bench-ca.pem"  # the test CA inside, for the passed-through case


def tls_policies(tmp, tport, ca):
    """(intercepting policy, passing-through policy) files."""
    hosts = {NAME: "127.0.0.1"}
    out = []
    for what, rule in (("intercept", {"host": f"{NAME}:{tport}", "tls": "intercept", "ca": ca}),
                       ("pass", f"{NAME}:{tport}")):
        path = os.path.join(tmp, f"policy-{what}.json")
        with open(path, "w") as f:
            json.dump({"version": 1, "network": {"allow": [rule], "hosts": hosts}}, f)
        out.append(path)
    return out


def tls_cases(args, ca, pols, direct_cmd, inside_cmd):
    """(name, argv) for direct, intercepted, passed through; inside_cmd(cafile)
    is the command inside, cafile None when the run's CA is to be trusted."""
    icp, pas = pols
    cases = [
        ("direct (host)", direct_cmd),
        ("airlock, intercepted", [args.airlock, "run", "--policy", icp, "--"] + inside_cmd(None)),
        ("airlock, passed through", [args.airlock, "run", "--policy", pas, "--ro",
                                     f"{ca}:{IN_CA}", "--"] + inside_cmd(IN_CA)),
    ]
    return with_baseline(args, cases)


def https_download_cases(args, tport, ca, pols):
    curl = ["curl", "-s", "-o", "/dev/null", "-w", CURL_FMT_TLS]
    url = f"https://{NAME}:{tport}/big"
    direct = curl + ["--cacert", ca, "--resolve", f"{NAME}:{tport}:127.0.0.1", url]
    return tls_cases(args, ca, pols, direct,
                     lambda cafile: curl + (["--cacert", cafile] if cafile else []) + [url])


def measure_https_downloads(cases, rounds, size):
    """Per case: speed_download (MB/s), the body's own rate (MB/s) and curl's
    time to the end of the handshake (ms)."""
    got = {name: {"speed": [], "body": [], "appconnect": []} for name, _ in cases}
    nf = len(CURL_FMT_TLS.split())
    for i in range(rounds + 1):  # round 0 warms up
        for name, argv in in_turn(cases, i):
            try:
                r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                   timeout=120)
            except subprocess.TimeoutExpired:
                sys.exit(f"egress: https download ({name}): {shlex.join(argv)}: no answer in 120 s")
            out = r.stdout.split()
            if r.returncode != 0 or len(out) != nf or out[1] != str(size) or out[2] != "200":
                sys.exit(f"egress: https download ({name}): {shlex.join(argv)}: exit "
                         f"{r.returncode}, curl wrote {r.stdout.strip()!r}, "
                         f"stderr {r.stderr.strip()[-300:]!r}")
            if i == 0:
                continue
            speed, appconnect, pretransfer, total = (float(out[0]), float(out[3]),
                                                     float(out[4]), float(out[5]))
            got[name]["speed"].append(speed / 1e6)
            got[name]["body"].append(size / (total - pretransfer) / 1e6)
            got[name]["appconnect"].append(appconnect * 1000.0)
    return {name: {k: stats(v) for k, v in g.items()} for name, g in got.items()}


# N sequential requests for /tiny, a new TCP and TLS connection each, each
# timed from connect to the last byte of the answer. Through the proxy
# (HTTPS_PROXY inside) with CONNECT, as curl does.
TLS_CLIENT = r"""
import json, socket, ssl, sys, time
mode, name, port, n, cafile = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
# Made once, before the clock: with no cafile, OpenSSL's default paths, i.e.
# inside the SSL_CERT_FILE airlock sets (the host's bundle and the run's CA).
ctx = ssl.create_default_context(cafile=cafile or None)
req = ("GET /tiny HTTP/1.1\r\nHost: %s:%d\r\nConnection: close\r\n\r\n" % (name, port)).encode()
connect = ("CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (name, port, name, port)).encode()
times = []
for _ in range(n):
    t = time.perf_counter()
    if mode == "direct":
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
    else:
        s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
        s.sendall(connect)
        h = b""
        while b"\r\n\r\n" not in h:
            d = s.recv(4096)
            if not d:
                sys.exit("the proxy closed: %r" % h[:200])
            h += d
        if not h.startswith((b"HTTP/1.1 200", b"HTTP/1.0 200")) or not h.endswith(b"\r\n\r\n"):
            sys.exit("CONNECT answered %r" % h[:200])
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    c = ctx.wrap_socket(s, server_hostname=name)
    c.sendall(req)
    b = b""
    while not b.endswith(b"\r\n\r\nok\n"):  # the answer is complete: no wait for the close
        d = c.recv(4096)
        if not d:
            break
        b += d
    times.append((time.perf_counter() - t) * 1000.0)
    c.close()
    if not b.startswith(b"HTTP/1.1 200") or not b.endswith(b"\r\n\r\nok\n"):
        sys.exit("bad answer %r" % b[:200])
print(json.dumps(times))
"""


def https_request_cases(args, tport, ca, pols, n):
    def cmd(mode, cafile):
        return [PY, "-c", TLS_CLIENT, mode, NAME, str(tport), str(n), cafile or ""]
    return tls_cases(args, ca, pols, cmd("direct", ca), lambda cafile: cmd("proxy", cafile))


def measure_https_requests(cases, rounds):
    """Per case: the first request's ms (one a round) and the later ones'
    (each round's median of them)."""
    got = {name: {"first": [], "later": []} for name, _ in cases}
    for i in range(rounds + 1):  # round 0 warms up
        for name, argv in in_turn(cases, i):
            times = json.loads(run(argv, 120, f"https requests ({name})"))
            if i > 0:
                got[name]["first"].append(times[0])
                got[name]["later"].append(statistics.median(times[1:]))
    return {name: {k: stats(v) for k, v in g.items()} for name, g in got.items()}


def measure_https(args, size, tmp, out):
    d = os.path.join(tmp, "tls")
    os.mkdir(d, 0o700)
    ca, leaf, key = make_test_ca(d)
    tsrv = start_tls_server(leaf, key, args.tls_tickets)
    tport = tsrv.server_address[1]
    try:
        pols = tls_policies(tmp, tport, ca)
        dl = measure_https_downloads(https_download_cases(args, tport, ca, pols),
                                     args.https_rounds, size)
        rq = measure_https_requests(https_request_cases(args, tport, ca, pols, args.tls_requests),
                                    args.tls_request_rounds)
    finally:
        tsrv.shutdown()
        tsrv.server_close()

    direct = dl["direct (host)"]
    print(f"\nHTTPS download of {args.size_mb} MB, {args.https_rounds} interleaved rounds (MB/s "
          f"from speed_download; body: after curl's time_pretransfer; handshake: its "
          f"time_appconnect, CA file loading included):")
    for name, r in dl.items():
        r["ratio"] = r["speed"]["median"] / direct["speed"]["median"]
        r["body_ratio"] = r["body"]["median"] / direct["body"]["median"]
        print(f"  {name:24s} median {r['speed']['median']:7.1f} MB/s  (p10 "
              f"{r['speed']['p10']:.1f}, p90 {r['speed']['p90']:.1f})  {r['ratio']:.2f}x direct;"
              f"  body {r['body']['median']:7.1f} MB/s  {r['body_ratio']:.2f}x;"
              f"  handshake {r['appconnect']['median']:6.1f} ms")
    print("  target: intercepted >= 0.40x direct")
    out["https_download_mb_s"] = dl

    direct = rq["direct (host)"]
    print(f"\nHTTPS requests for /tiny, a new TLS connection each, one python3 process of "
          f"{args.tls_requests}, {args.tls_request_rounds} interleaved rounds (ms each; later: "
          f"each round's median of requests 2..{args.tls_requests}; added: minus direct):")
    for name, r in rq.items():
        for k in ("first", "later"):
            r[f"added_ms_{k}"] = r[k]["median"] - direct[k]["median"]
        print(f"  {name:24s} first {r['first']['median']:6.2f} ms (p10 {r['first']['p10']:.2f}, "
              f"p90 {r['first']['p90']:.2f}) {r['added_ms_first']:+.2f};  later "
              f"{r['later']['median']:6.2f} ms (p10 {r['later']['p10']:.2f}, "
              f"p90 {r['later']['p90']:.2f}) {r['added_ms_later']:+.2f}")
    print("  target: intercepted adds <= 2 ms to the first request")
    out["https_requests_ms"] = rq
    out["tls_requests"] = args.tls_requests


# ---------------------------------------------------------------- secret

SECRET_ENV = "EGRESS_BENCH_SECRET"


def secret_policy(tmp, port, tport, ca):
    """One policy for the secret cases: plain HTTP to PORT and intercepted
    HTTPS to TPORT, a secret scoped to both, presented as a header. Every
    request to them gets it, so every answer on them is searched."""
    hosts = [f"{NAME}:{port}", f"{NAME}:{tport}"]
    pol = {"version": 1,
           "network": {"allow": [hosts[0], {"host": hosts[1], "tls": "intercept", "ca": ca}],
                       "hosts": {NAME: "127.0.0.1"}},
           "secrets": {"BENCH_TOKEN": {"source": {"env": SECRET_ENV}, "hosts": hosts,
                                       "header": "Authorization: Bearer {}"}}}
    path = os.path.join(tmp, "policy-secret.json")
    with open(path, "w") as f:
        json.dump(pol, f)
    return path


def check_echo(args, pol, port, value, env):
    """Before measuring, that the answer search runs on these connections:
    the server echoes the Authorization it received (so the secret went in)
    and the value must not reach curl inside. /echo.gz sends it gzipped:
    the new binary must cut it too (it decodes); the baseline's result is
    only reported. Returns {binary name: {path: "cut" or "passed"}}."""
    out = {}
    for who, binary in [("airlock", args.airlock)] + (
            [("baseline", args.baseline)] if args.baseline else []):
        out[who] = {}
        for path in ("/echo", "/echo.gz"):
            argv = [binary, "run", "--policy", pol, "--", "curl", "-s", "--compressed",
                    f"http://{NAME}:{port}{path}"]
            n = len(Handler.echoed)
            r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                               timeout=60, env=env)
            got = Handler.echoed[n:]
            if got != [f"Bearer {value}".encode()]:
                sys.exit(f"egress: {who}: {path}: the server was sent {len(got)} requests, "
                         f"not one with the secret's value in Authorization")
            cut = value.encode() not in r.stdout
            out[who][path] = "cut" if cut else "passed"
            if who == "airlock" and not cut:
                sys.exit(f"egress: {shlex.join(argv)}: the secret's value came back through "
                         f"the gateway: the answer search is not running")
    return out


def secret_cases(args, port, tport, pol, ca, icp):
    """(name, argv, expected size_download) for the secret cases, each
    with the baseline next to it, then references without a secret (the
    new binary only): the splice relay and interception without a search."""
    curl = ["curl", "-s", "-o", "/dev/null", "-w", CURL_FMT]
    http = f"http://{NAME}:{port}"
    big = f"https://{NAME}:{tport}/big"
    size, gz, text = Handler.body.size, Handler.gz.size, Handler.text.size
    run = [args.airlock, "run", "--policy", pol, "--"]
    cases = [("airlock, filtered", run + curl + [f"{http}/big"], size),
             ("airlock, filtered, gzip", run + curl + [f"{http}/big.gz"], gz),
             ("airlock, filtered, text", run + curl + [f"{http}/big.txt"], text),
             ("airlock, intercepted + secret", run + curl + [big], size),
             ("airlock, intercepted + secret, text", run + curl + [big + ".txt"], text)]
    out = [("direct (host)", curl + [f"http://127.0.0.1:{port}/big"], size)]
    for name, argv, want in cases:
        out.append((name, argv, want))
        if args.baseline:
            out.append(("baseline" + name[len("airlock"):], [args.baseline] + argv[1:], want))
    out += [("airlock, HTTP proxy (no secret)",
             airlock_gw(args, port, curl + [f"{http}/big"]), size),
            ("airlock, intercepted (no secret)",
             [args.airlock, "run", "--policy", icp, "--"] + curl + [big], size)]
    return out


def make_text_bodies(size):
    """/big.txt and /big.gz (the same text, gzipped), on the handler."""
    t = time.perf_counter()
    Handler.text = TextBody(size)
    Handler.gz = GzipBody(Handler.text)
    print(f"\nsecret cases: /big.txt and /big.gz made in {time.perf_counter() - t:.1f} s: "
          f"{size} bytes of hex text, {Handler.gz.size} bytes of it gzipped", flush=True)


def close_text_bodies():
    for body in (Handler.text, Handler.gz):
        if body:
            body.close()
    Handler.text = Handler.gz = None


def measure_secret(args, size, port, tmp, out):
    """The answer search: download throughput with a secret scoped to the
    bench's host, plain HTTP (filtered), gzip, intercepted HTTPS."""
    d = os.path.join(tmp, "tls-secret")
    os.mkdir(d, 0o700)
    ca, leaf, key = make_test_ca(d)
    make_text_bodies(size)
    tsrv = start_tls_server(leaf, key, args.tls_tickets)
    tport = tsrv.server_address[1]
    # A random 32-character value in airlock's environment: the secret's source.
    value = "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(32))
    env = dict(os.environ, **{SECRET_ENV: value})
    try:
        pol = secret_policy(tmp, port, tport, ca)
        icp = tls_policies(tmp, tport, ca)[0]
        echo = check_echo(args, pol, port, value, env)
        cases = secret_cases(args, port, tport, pol, ca, icp)
        speeds = {name: [] for name, _, _ in cases}
        gz_size = Handler.gz.size
        load = []  # the 1-minute load average at each round's start
        failed = {}  # name: [(round, what went wrong)]; the run goes on
        for i in range(args.secret_rounds + 1):  # round 0 warms up
            load.append(os.getloadavg()[0])
            for name, argv, want in in_turn(cases, i):
                mbs, why = download_once(argv, want, env)
                if mbs is None:
                    # Counted and left out of the rates, not fatal: one
                    # stalled download would lose the whole run.
                    failed.setdefault(name, []).append((i, why))
                    print(f"egress: round {i}: secret download ({name}) failed: "
                          f"{shlex.join(argv)}: {why}", flush=True)
                    if len(failed[name]) > max(2, args.secret_rounds // 3):
                        sys.exit(f"egress: {name}: {len(failed[name])} downloads failed")
                elif i > 0:
                    speeds[name].append(mbs)
    finally:
        tsrv.shutdown()
        tsrv.server_close()
        close_text_bodies()
    for name in failed:
        if not speeds[name]:
            sys.exit(f"egress: {name}: every download failed")
    res = {name: stats(v) for name, v in speeds.items()}
    for name, v in speeds.items():
        # Each round's new/old (the two ran next to each other), less
        # moved by the machine's load changing between rounds; only when
        # no download of either failed (the lists would not line up).
        base = "baseline" + name[len("airlock"):]
        b = speeds.get(base) if name.startswith("airlock") else None
        if b and name not in failed and base not in failed:
            res[name]["round_ratio"] = stats([x / y for x, y in zip(v, b)])
        if name in failed:
            res[name]["failed"] = [{"round": i, "why": why} for i, why in failed[name]]
    load.append(os.getloadavg()[0])
    ratio = size / gz_size  # decoded bytes per byte on the wire
    print(f"answer search: {SECRET_ENV} in airlock's environment, a secret scoped to the "
          f"bench's host; /echo: {echo}")
    print(f"load average (1 min) at each round's start and the end: min {min(load):.1f}, "
          f"median {statistics.median(load):.1f}, max {max(load):.1f}")
    print(f"download of {args.size_mb} MB (gzip: {gz_size / 1e6:.1f} MB on the wire; "
          f"text: hex as text/plain, the unescaped view searched too; the rest not text), "
          f"{args.secret_rounds} interleaved rounds (MB/s from speed_download):")
    for name, r in res.items():
        base = res.get("baseline" + name[len("airlock"):]) if name.startswith("airlock") else None
        if base:
            r["new_over_old"] = r["median"] / base["median"]
        extra = ""
        if base:
            extra = f"  new/old {r['new_over_old']:.3f}"
        if "round_ratio" in r:
            rr = r["round_ratio"]
            extra += (f" (each round's: median {rr['median']:.3f}, p10 {rr['p10']:.3f}, "
                      f"p90 {rr['p90']:.3f})")
        if "failed" in r:
            extra += f"  FAILED {len(r['failed'])} (rounds {[f['round'] for f in r['failed']]})"
        if "gzip" in name:
            extra += f"  (decoded {r['median'] * ratio:.1f} MB/s)"
        print(f"  {name:40s} median {r['median']:8.1f} MB/s  (p10 {r['p10']:.1f}, "
              f"p90 {r['p90']:.1f}){extra}")
    if args.baseline:
        print("  target: new/old >= 0.90 for filtered and intercepted + secret, text or not")
    out["secret"] = {"echo": echo, "gzip_bytes": gz_size, "download_mb_s": res,
                     "load_average": load}


def serve_secret(args, size, port, tmp):
    """--serve: the secret cases' servers and policy, kept up until stdin
    closes, with the commands that download through them, for profiling the
    gateway (perf) by hand."""
    d = os.path.join(tmp, "tls-secret")
    os.mkdir(d, 0o700)
    ca, leaf, key = make_test_ca(d)
    make_text_bodies(size)
    tsrv = start_tls_server(leaf, key, args.tls_tickets)
    tport = tsrv.server_address[1]
    value = "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(32))
    pol = secret_policy(tmp, port, tport, ca)
    curl = "curl -s -o /dev/null -w '%{speed_download}\\n'"
    run = f"{SECRET_ENV}={value} {args.airlock} run --policy {pol} --"
    print(f"serving until stdin closes; commands:\n"
          f"  {run} {curl} http://{NAME}:{port}/big\n"
          f"  {run} {curl} http://{NAME}:{port}/big.gz\n"
          f"  {run} {curl} http://{NAME}:{port}/big.txt\n"
          f"  {run} {curl} https://{NAME}:{tport}/big\n"
          f"  {run} {curl} https://{NAME}:{tport}/big.txt\n"
          f"  (old binary: the same with {args.baseline or 'the --baseline binary'})",
          flush=True)
    try:
        sys.stdin.read()
    finally:
        tsrv.shutdown()
        tsrv.server_close()
        close_text_bodies()


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


def measure_http(args, size, port, tmp, out):
    """srt, the plain HTTP downloads and the short requests."""
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

    floors = start_proxy_floors(args)
    if not floors:
        print(f"floor proxy: not measured: {args.proxy_floor} is not built")
    try:
        rq = measure_requests(request_cases(args, port, args.requests,
                                            not args.no_transparent_requests, floors),
                              args.request_rounds)
    finally:
        for p, _, _ in floors:
            p.kill()  # its namespace's holder dies with it (PR_SET_PDEATHSIG)
            p.wait()
    direct = rq["direct (host)"]["median"]
    print(f"\n{args.requests} sequential requests, a new connection each, one python3 "
          f"process, {args.request_rounds} interleaved rounds (ms for all):")
    for name, r in rq.items():
        r["ratio"] = r["median"] / direct
        r["added_us_per_request"] = (r["median"] - direct) * 1000.0 / args.requests
        print(f"  {name:24s} median {r['median']:8.1f} ms  (p10 {r['p10']:.1f}, "
              f"p90 {r['p90']:.1f})  {r['ratio']:.2f}x direct, "
              f"{r['added_us_per_request']:+.0f} us/request")
    floor = rq.get("floor proxy (host)")
    for name, r in rq.items():
        if floor and name.startswith(("airlock", "baseline")):
            r["over_floor_us_per_request"] = ((r["median"] - floor["median"]) * 1000.0
                                              / args.requests)
            print(f"  {name:24s} {r['over_floor_us_per_request']:+.0f} us/request over the "
                  f"floor proxy (host)")
    print("  target: HTTP proxy <= 1.20x direct; the floor proxy is the least any HTTP proxy\n"
          "  pays per request here (bench/proxy-floor.c), (netns) with its client in\n"
          "  another network namespace, as the gateway's is")
    out["requests_ms"] = rq
    out["requests"] = args.requests


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15, help="download rounds (default 15)")
    ap.add_argument("--request-rounds", type=int, default=11, help="rounds of N requests (11)")
    ap.add_argument("--requests", type=int, default=1000, help="requests per round (1000)")
    ap.add_argument("--start-rounds", type=int, default=300, help="start-up rounds (300)")
    ap.add_argument("--warmup", type=int, default=10, help="start-up warm-up rounds (10)")
    ap.add_argument("--size-mb", type=int, default=200, help="download size, 10^6 bytes (200)")
    ap.add_argument("--https-rounds", type=int, default=15, help="HTTPS download rounds (15)")
    ap.add_argument("--tls-request-rounds", type=int, default=21,
                    help="rounds of N HTTPS requests (21)")
    ap.add_argument("--tls-requests", type=int, default=20,
                    help="HTTPS requests per round, the first one reported apart (20)")
    ap.add_argument("--tls-tickets", type=int, default=2,
                    help="TLS 1.3 session tickets the HTTPS server sends after each handshake "
                         "(2, OpenSSL's default; 0 shows the gateway's missing TCP_NODELAY, "
                         "docs/benchmarks.md)")
    only = ap.add_mutually_exclusive_group()
    only.add_argument("--no-https", action="store_true", help="leave out the HTTPS measurements")
    only.add_argument("--only-https", action="store_true",
                      help="only the HTTPS measurements (no srt, plain HTTP, secret or start-up)")
    only.add_argument("--only-secret", action="store_true",
                      help="only the downloads with a secret (the answer search) and their "
                           "references")
    ap.add_argument("--no-secret", action="store_true",
                    help="leave out the downloads with a secret")
    ap.add_argument("--secret-rounds", type=int, default=11,
                    help="rounds of the downloads with a secret (11)")
    ap.add_argument("--serve", action="store_true",
                    help="measure nothing: serve the secret cases, print the commands that "
                         "download through them and wait for stdin to close (for perf)")
    ap.add_argument("--no-transparent-requests", action="store_true",
                    help="leave the transparent path out of the request test")
    ap.add_argument("--no-srt", action="store_true", help="do not try sandbox-runtime (srt)")
    ap.add_argument("--srt", help="an installed srt to use instead of npm install")
    ap.add_argument("--airlock", default=os.path.join(ROOT, "build", "airlock"))
    ap.add_argument("--baseline", help="an earlier airlock binary to run in the same rounds")
    ap.add_argument("--proxy-floor", default=os.path.join(ROOT, "build", "bench",
                                                          "bench-proxy-floor"),
                    help="bench/proxy-floor.c built (build/bench/bench-proxy-floor); "
                         "the requests case runs it as the floor proxy rows")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    if args.baseline:
        args.baseline = os.path.abspath(args.baseline)
    args.airlock = os.path.abspath(args.airlock)
    args.proxy_floor = os.path.abspath(args.proxy_floor)
    if args.tls_requests < 2:
        sys.exit("egress: --tls-requests must be 2 or more (the first is reported apart)")

    if not shutil.which("curl"):
        sys.exit("egress: curl (Debian package curl) is required")
    if args.only_secret and args.no_secret:
        sys.exit("egress: --only-secret and --no-secret leave nothing to measure")
    secret = not args.no_secret and not args.only_https
    if (secret or not args.no_https) and not shutil.which("openssl"):
        sys.exit("egress: openssl (Debian package openssl) is required, or --no-https "
                 "--no-secret")
    size = args.size_mb * 1000 * 1000
    t0 = time.perf_counter()
    note = machine_note()
    print(f"machine: {note}")
    srv = start_server(size)
    port = srv.server_address[1]
    tmp = tempfile.mkdtemp(prefix="egress-bench-")
    out = {"machine": note, "size_bytes": size}
    try:
        if args.serve:
            serve_secret(args, size, port, tmp)
            return
        if not args.only_https and not args.only_secret:
            measure_http(args, size, port, tmp, out)
        if not args.no_https and not args.only_secret:
            measure_https(args, size, tmp, out)
        if secret:
            measure_secret(args, size, port, tmp, out)
    finally:
        srv.shutdown()
        srv.server_close()
        Handler.body.close()
        shutil.rmtree(tmp, ignore_errors=True)

    if not args.only_https and not args.only_secret:
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
