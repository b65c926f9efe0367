#!/usr/bin/python3
"""The client side of run_reflect.py: runs INSIDE the sandbox.

usage: reflect_tool.py STEPS.json

Each step opens one connection to host:port by one of the gateway's paths
and sends its requests on it in turn, reading each answer by its own
framing (Content-Length, chunked, or until the connection ends) and
keeping every byte exactly as it arrived. Per step it prints one line
"@@ " + JSON (run_cred.py's cred_run reads these), with each answer's bytes
in base64, and then every byte it received as it is, between a line
"## raw LABEL#N LEN" and a newline: whatever reached the sandbox is in
its output, for the test to search. Python 3 standard library only.

step: {"label", "via": proxy|tunnel|socks|direct|tls, "host", "port",
       "requests": [{"path", "headers": {...}}], "timeout": seconds}
  proxy   absolute-URI requests to the HTTP proxy (127.0.0.1:3128)
  tunnel  CONNECT through the proxy, then origin-form requests
  socks   SOCKS5 (127.0.0.1:1080) naming the host, then origin-form
  direct  a plain connect to the name as resolved inside (the transparent
          capture: this ignores every proxy variable)
  tls     CONNECT, then TLS verified against the environment's trust
          (SSL_CERT_FILE: the run's CA), then origin-form

{{env:NAME}} in a header value is that variable (a placeholder).
"""

import base64
import json
import os
import socket
import ssl
import struct
import sys
import time

# cred_run (run_cred.py) puts cred_tool.py beside this file as tool.py.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tool import errname, expand  # noqa: E402

PROXY = ("127.0.0.1", 3128)
SOCKS = ("127.0.0.1", 1080)


class Reader:
    """Reads from a socket, keeping every byte received."""

    def __init__(self, sock):
        self.sock, self.buf, self.got, self.eof = sock, b"", b"", None

    def more(self):
        try:
            b = self.sock.recv(65536)
        except (OSError, ssl.SSLError) as e:
            self.eof = errname(e)
            return False
        if not b:
            self.eof = "EOF"
            return False
        self.buf += b
        self.got += b
        return True

    def line(self):
        while b"\r\n" not in self.buf:
            if not self.more():
                return None
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def exactly(self, n):
        while len(self.buf) < n:
            if not self.more():
                return False
        self.buf = self.buf[n:]
        return True

    def take(self):
        got, self.got = self.got, b""
        return got


def read_response(rd):
    """Read one answer by its framing; True when it arrived whole."""
    status = rd.line()
    if status is None:
        return False
    fields = {}
    while True:
        line = rd.line()
        if line is None:
            return False
        if not line:
            break
        k, _, v = line.decode("latin-1").partition(":")
        fields[k.strip().lower()] = v.strip()
    if "chunked" in fields.get("transfer-encoding", "").lower():
        while True:
            size = rd.line()
            if size is None:
                return False
            n = int(size.split(b";")[0].strip() or b"0", 16)
            if n == 0:
                while True:  # trailers, then the empty line
                    t = rd.line()
                    if t is None:
                        return False
                    if not t:
                        return True
            if not rd.exactly(n + 2):
                return False
    if "content-length" in fields:
        return rd.exactly(int(fields["content-length"]))
    while rd.more():
        pass
    return True


def open_conn(step):
    """The connection for step's path, and whether requests go in absolute
    form. Raises OSError (or a ValueError naming the refusal)."""
    host, port, via = step["host"], step["port"], step["via"]
    if via == "direct":
        return socket.create_connection((host, port), timeout=step["timeout"]), False
    if via == "socks":
        s = socket.create_connection(SOCKS, timeout=step["timeout"])
        s.sendall(b"\x05\x01\x00")
        if s.recv(2) != b"\x05\x00":
            raise ValueError("SOCKS greeting refused")
        name = host.encode()
        s.sendall(b"\x05\x01\x00\x03" + bytes([len(name)]) + name + struct.pack(">H", port))
        rep = s.recv(4)
        if len(rep) < 4 or rep[1] != 0:
            raise ValueError("SOCKS request refused: %r" % rep)
        s.recv({1: 4, 4: 16}.get(rep[3], 0) + 2)
        return s, False
    s = socket.create_connection(PROXY, timeout=step["timeout"])
    if via == "proxy":
        return s, True
    target = "%s:%d" % (host, port)
    s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target)).encode())
    rd = Reader(s)
    status = rd.line()
    while rd.line():
        pass
    if not status or b" 200" not in status:
        raise ValueError("CONNECT answered %r" % status)
    if via == "tls":
        s = ssl.create_default_context().wrap_socket(s, server_hostname=host)
    return s, False


def run_step(step):
    out = {"answers": []}
    t0 = time.monotonic()
    try:
        s, absolute = open_conn(step)
    except (OSError, ValueError, ssl.SSLError) as e:
        out["connect_error"] = errname(e)
        return out
    rd = Reader(s)
    try:
        for rq in step["requests"]:
            target = rq["path"]
            if absolute:
                target = "http://%s:%d%s" % (step["host"], step["port"], rq["path"])
            head = "GET %s HTTP/1.1\r\nHost: %s:%d\r\n" % (target, step["host"], step["port"])
            for k, v in rq.get("headers", {}).items():
                head += "%s: %s\r\n" % (k, expand(v))
            a = {"path": rq["path"]}
            try:
                s.sendall((head + "\r\n").encode("latin-1"))
            except (OSError, ssl.SSLError) as e:
                a["send_error"] = errname(e)
            a["complete"] = read_response(rd)
            a["recv"] = base64.b64encode(rd.take()).decode()
            a["eof"] = rd.eof
            a["seconds"] = round(time.monotonic() - t0, 2)
            out["answers"].append(a)
            if not a["complete"]:
                break
    finally:
        s.close()
    return out


def main(argv):
    with open(argv[1]) as f:
        steps = json.load(f)
    for step in steps:
        step.setdefault("timeout", 15)
        try:
            r = run_step(step)
        except Exception as e:  # noqa: BLE001 - reported, judged outside
            r = {"exception": "%s: %s" % (type(e).__name__, e)}
        r["label"] = step["label"]
        sys.stdout.write("@@ " + json.dumps(r) + "\n")
        for i, a in enumerate(r.get("answers", [])):
            raw = base64.b64decode(a["recv"])
            sys.stdout.write("## raw %s#%d %d\n" % (step["label"], i, len(raw)))
            sys.stdout.flush()
            sys.stdout.buffer.write(raw + b"\n")
            sys.stdout.buffer.flush()
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
