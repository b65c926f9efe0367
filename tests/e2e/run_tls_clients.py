#!/usr/bin/python3
"""Leaves of a run CA (src/tls) as other TLS implementations judge them (TAP).

usage: run_tls_clients.py TLS_SERVE [CASE-SUBSTRING...]

tls-serve (tests/e2e/tls_serve.c) makes a run CA whose nameConstraints
permit api.test, *.svc.test and 127.0.0.1, and serves HTTPS on 127.0.0.1
with a server end per host: api.test, a.svc.test, 127.0.0.1 and
outside.test (which the CA may not issue for). Each case connects to one of
them, on 127.0.0.1 only, with Python's ssl module (ssl.VERIFY_X509_STRICT
set explicitly, the CA as the only trust anchor), curl --cacert, or Node's
tls module, and checks what the client saw and what the server end
reported for that connection.
"""

import os
import queue
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading

HOSTS = ["api.test", "a.svc.test", "127.0.0.1", "outside.test"]
PERMITTED = "api.test,*.svc.test,127.0.0.1"


class Skip(Exception):
    pass


class Server:
    def __init__(self, binary, workdir):
        self.ca = os.path.join(workdir, "ca.pem")
        self.p = subprocess.Popen([binary, self.ca, PERMITTED] + HOSTS, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        self.lines = queue.Queue()
        threading.Thread(target=self.read_lines, daemon=True).start()
        self.ports = {}
        self.unread = 0  # connections made whose line has not been read
        for _ in HOSTS:
            host, port = self.line().split()
            self.ports[host] = int(port)
        if self.line() != "ready":
            raise AssertionError("tls-serve did not say ready")

    def read_lines(self):
        for s in self.p.stdout:
            self.lines.put(s.rstrip("\n"))
        self.lines.put(None)

    def line(self, timeout=20):
        # tls-serve drops a stalled connection after 10 s and then reports it.
        try:
            s = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("tls-serve said nothing for %d s" % timeout) from None
        if s is None:
            raise AssertionError("tls-serve exited (%s)" % self.p.poll())
        return s

    def port(self, host):
        """host's port, for a new connection (which tls-serve reports)."""
        self.unread += 1
        return self.ports[host]

    def skip_unread(self):
        """Read the lines of connections a failed case left unread."""
        while self.unread > 0:
            self.unread -= 1
            self.line()

    def close(self):
        self.p.stdin.close()
        try:
            self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()


def python_ctx(srv, alpn=("http/1.1",)):
    ctx = ssl.create_default_context(cafile=srv.ca)
    ctx.verify_flags |= ssl.VERIFY_X509_STRICT
    if alpn:
        ctx.set_alpn_protocols(list(alpn))
    return ctx


def python_get(srv, host, server_hostname=None, alpn=("http/1.1",)):
    """GET / from host's port as Python's ssl would: the body, or raises."""
    ctx = python_ctx(srv, alpn)
    with socket.create_connection(("127.0.0.1", srv.port(host)), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname=server_hostname or host) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: %s\r\n\r\n" % host.encode())
            data = b""
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
            return s.selected_alpn_protocol(), data.split(b"\r\n\r\n", 1)[1].decode()


def python_fails(srv, host, want, **kw):
    try:
        python_get(srv, host, **kw)
    except ssl.SSLError as e:
        if want not in str(e):
            raise AssertionError("Python's error %r does not say %r" % (str(e), want))
        return
    raise AssertionError("Python's ssl accepted %s" % host)


def expect_line(srv, want):
    srv.unread -= 1
    got = srv.line()
    if got != want:
        raise AssertionError("tls-serve said %r, expected %r" % (got, want))


def case_python_name(srv):
    alpn, body = python_get(srv, "api.test")
    assert alpn == "http/1.1", alpn
    assert body == "hello api.test", body
    expect_line(srv, "api.test ok sni=api.test alpn=http/1.1")


def case_python_wildcard_subtree(srv):
    _, body = python_get(srv, "a.svc.test")
    assert body == "hello a.svc.test", body
    expect_line(srv, "a.svc.test ok sni=a.svc.test alpn=http/1.1")


def case_python_address(srv):
    # Python sends no SNI for an address and checks the leaf's IP name.
    _, body = python_get(srv, "127.0.0.1")
    assert body == "hello 127.0.0.1", body
    expect_line(srv, "127.0.0.1 ok sni=- alpn=http/1.1")


def case_python_name_constraints(srv):
    python_fails(srv, "outside.test", "permitted subtree violation")
    expect_line(srv, "outside.test error: client sent alert: certificate unknown (outside.test)")


def case_python_sni_mismatch(srv):
    python_fails(srv, "api.test", "unrecognized name", server_hostname="a.svc.test")
    expect_line(srv, "api.test error: client sent SNI a.svc.test, not the decided host (api.test)")


def case_python_h2_only(srv):
    python_fails(srv, "api.test", "no application protocol", alpn=("h2",))
    expect_line(srv, "api.test error: client offered ALPN h2, not http/1.1 (api.test)")


def case_python_other_ca(srv):
    ctx = ssl.create_default_context()  # the host's store, not the run's CA
    ctx.verify_flags |= ssl.VERIFY_X509_STRICT
    with socket.create_connection(("127.0.0.1", srv.port("api.test")), timeout=10) as raw:
        try:
            ctx.wrap_socket(raw, server_hostname="api.test")
        except ssl.SSLCertVerificationError as e:
            assert "unable to get local issuer certificate" in str(e), str(e)
        else:
            raise AssertionError("a client without the run's CA accepted its leaf")
    expect_line(srv, "api.test error: client sent alert: unknown CA (api.test)")


def curl(srv, host, url_host=None):
    if not shutil.which("curl"):
        raise Skip("curl not found")
    port = srv.port(host)
    url_host = url_host or host
    argv = ["curl", "-sS", "--max-time", "10", "--cacert", srv.ca, "--noproxy", "*",
            "-o", "-", "https://%s:%d/" % (url_host, port)]
    if url_host != "127.0.0.1":
        argv[1:1] = ["--resolve", "%s:%d:127.0.0.1" % (url_host, port)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30)


def case_curl_name(srv):
    r = curl(srv, "api.test")
    assert r.returncode == 0 and r.stdout == "hello api.test", (r.returncode, r.stdout, r.stderr)
    expect_line(srv, "api.test ok sni=api.test alpn=http/1.1")


def case_curl_address(srv):
    r = curl(srv, "127.0.0.1")
    assert r.returncode == 0 and r.stdout == "hello 127.0.0.1", (r.returncode, r.stdout, r.stderr)
    expect_line(srv, "127.0.0.1 ok sni=- alpn=http/1.1")


def case_curl_name_constraints(srv):
    r = curl(srv, "outside.test")
    # 60: the peer's certificate could not be verified.
    assert r.returncode == 60, (r.returncode, r.stderr)
    assert "permitted subtree violation" in r.stderr, r.stderr
    expect_line(srv, "outside.test error: client sent alert: certificate unknown (outside.test)")


NODE_CLIENT = r"""
const tls = require('tls'), fs = require('fs');
const [port, servername] = [Number(process.argv[1]), process.argv[2]];
const s = tls.connect({host: '127.0.0.1', port, servername, ca: fs.readFileSync(process.argv[3]),
                       ALPNProtocols: ['http/1.1']}, () => {
  s.write('GET / HTTP/1.1\r\nHost: ' + servername + '\r\n\r\n');
});
let data = '';
s.on('data', d => { data += d; });
s.on('end', () => { console.log(s.alpnProtocol + ' ' + data.split('\r\n\r\n')[1]); });
s.on('error', e => { console.log('error ' + e.message); process.exitCode = 1; });
"""


def node(srv, host):
    if not shutil.which("node"):
        raise Skip("node not found")
    return subprocess.run(["node", "-e", NODE_CLIENT, str(srv.port(host)), host, srv.ca],
                          capture_output=True, text=True, timeout=30)


def case_node_name(srv):
    r = node(srv, "api.test")
    assert r.returncode == 0 and r.stdout.strip() == "http/1.1 hello api.test", (r.stdout,
                                                                                 r.stderr)
    expect_line(srv, "api.test ok sni=api.test alpn=http/1.1")


def case_node_name_constraints(srv):
    r = node(srv, "outside.test")
    assert r.returncode == 1 and "permitted subtree violation" in r.stdout, (r.stdout, r.stderr)
    # Node judges the chain after the handshake and then just closes: no
    # alert reaches the server end.
    expect_line(srv, "outside.test error: closed before a request")


CASES = [(name[5:], fn) for name, fn in sorted(globals().items()) if name.startswith("case_")]


def main():
    if len(sys.argv) < 2:
        print("usage: %s TLS_SERVE [CASE-SUBSTRING...]" % sys.argv[0], file=sys.stderr)
        return 2
    only = sys.argv[2:]
    cases = [(n, f) for n, f in CASES if not only or any(o in n for o in only)]
    print("1..%d" % len(cases), flush=True)
    failed = 0
    with tempfile.TemporaryDirectory(prefix="airlock-tls-") as d:
        srv = Server(sys.argv[1], d)
        try:
            for i, (name, fn) in enumerate(cases, 1):
                try:
                    fn(srv)
                except Skip as e:
                    print("ok %d - %s # SKIP %s" % (i, name, e), flush=True)
                except Exception as e:  # noqa: BLE001 - every failure is reported
                    failed += 1
                    print("not ok %d - %s" % (i, name), flush=True)
                    for line in ("%s: %s" % (type(e).__name__, e)).splitlines():
                        print("# " + line, flush=True)
                else:
                    print("ok %d - %s" % (i, name), flush=True)
                srv.skip_unread()
        finally:
            srv.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
