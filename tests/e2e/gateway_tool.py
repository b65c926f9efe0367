#!/usr/bin/python3
"""The client side of run_gateway.py: runs INSIDE the sandbox.

usage: gateway_tool.py STEPS.json

STEPS.json is a list of steps, each a dict with an "op" and its arguments;
the tool runs them in order and prints one JSON list with one result dict
per step on stdout. A step never raises: errors go into its result, so one
run of the sandbox can exercise many requests and the test judges them all
from outside. Python 3 standard library only (plus /usr/bin/curl for the
"curl" op).

ops:
  env                     the proxy variables and every variable name
  curl    args            /usr/bin/curl -sS ARGS; code, headers, body, rc
  urllib  url [method] [body_file] [headers]
                          urllib.request with the environment's proxies
  raw     send [host] [port]
                          send bytes (latin-1 text) to host:port (default
                          the HTTP proxy), read until EOF
  connect target [host_header] [http]
                          HTTP CONNECT through the proxy, then (if 200) send
                          http through the tunnel and read until EOF
  socks   [greeting] [cmd] [atyp] [host] [port] [http] [request_in_greeting]
                          SOCKS5 by hand on 127.0.0.1:1080 (the request
                          may be sent in the greeting's write)
  many    n send          hold n connections to the HTTP proxy that each
                          sent an unfinished request head, send one request
                          on another, close them, send again
  tcp     host port       a direct TCP connect: "ok" or the errno name
  direct  host port [send]
                          resolve host inside, connect to it directly (no
                          proxy), send bytes, read until EOF or reset
  resolve name            socket.getaddrinfo inside: the addresses or error
  tls     host port server_name [connect]
                          a TLS ClientHello naming server_name, sent on a
                          direct connection or (with connect) through an
                          HTTP CONNECT tunnel to host:port
  dns     name [qtype] [id] [tcp]
                          one DNS query to 127.0.0.1:53 (UDP, or TCP)
"""

import errno
import hashlib
import json
import os
import socket
import ssl
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request

PROXY = ("127.0.0.1", 3128)
SOCKS = ("127.0.0.1", 1080)
TIMEOUT = 10


def text(b, limit=4000):
    s = b.decode("latin-1")
    return s if len(s) <= limit else s[:limit] + "...[%d bytes]" % len(b)


def errname(e):
    if isinstance(e, socket.timeout):
        return "TIMEOUT"
    if isinstance(e, OSError) and e.errno:
        return errno.errorcode.get(e.errno, str(e.errno))
    return repr(e)


def read_all(s):
    out = b""
    while True:
        try:
            b = s.recv(65536)
        except OSError as e:
            return out, errname(e)
        if not b:
            return out, None
        out += b


def recv_exact(s, n):
    out = b""
    while len(out) < n:
        b = s.recv(n - len(out))
        if not b:
            break
        out += b
    return out


def split_response(data):
    """(status, {lower-case header: value}, body) of an HTTP response."""
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = None
    parts = lines[0].split(" ", 2) if lines and lines[0] else []
    if len(parts) >= 2 and parts[0].startswith("HTTP/") and parts[1].isdigit():
        status = int(parts[1])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    return status, headers, body


def op_env(step):
    names = sorted(os.environ)
    return {"proxy": {k: v for k, v in os.environ.items() if "proxy" in k.lower()},
            "names": names}


def op_curl(step):
    hdr, out = "/tmp/curl.h", "/tmp/curl.b"
    for p in (hdr, out):
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass
    argv = ["/usr/bin/curl", "-sS", "--max-time", str(TIMEOUT), "-D", hdr, "-o", out,
            "-w", "%{http_code} %{size_download}"] + step["args"]
    p = subprocess.run(argv, capture_output=True)
    r = {"rc": p.returncode, "stderr": text(p.stderr)}
    w = p.stdout.decode().split()
    if len(w) == 2:
        r["code"], r["size"] = int(w[0]), int(w[1])
    if os.path.exists(hdr):
        with open(hdr, "rb") as f:
            # The last response's headers (a CONNECT adds one before).
            blocks = [b for b in f.read().split(b"\r\n\r\n") if b.strip()]
        _, r["headers"], _ = split_response(blocks[-1] + b"\r\n\r\n") if blocks else (0, {}, b"")
    if os.path.exists(out):
        with open(out, "rb") as f:
            body = f.read()
        r["body"] = text(body, 2000)
        r["sha256"] = hashlib.sha256(body).hexdigest()
    return r


def op_urllib(step):
    data = None
    if step.get("body_file"):
        with open(step["body_file"], "rb") as f:
            data = f.read()
    req = urllib.request.Request(step["url"], data=data, method=step.get("method", "GET"),
                                 headers=step.get("headers", {}))
    opener = urllib.request.build_opener(
        *([urllib.request.ProxyHandler({})] if step.get("noproxy") else []))
    try:
        with opener.open(req, timeout=TIMEOUT) as resp:
            body = resp.read()
            return {"status": resp.status,
                    "headers": {k.lower(): v for k, v in resp.headers.items()},
                    "body": text(body, 2000), "size": len(body)}
    except urllib.error.HTTPError as e:
        return {"status": e.code, "headers": {k.lower(): v for k, v in e.headers.items()},
                "body": text(e.read(), 2000), "error": "HTTPError"}
    except urllib.error.URLError as e:
        return {"error": "URLError", "reason": str(e.reason)}
    except OSError as e:
        return {"error": errname(e), "reason": str(e)}


def connect_to(host, port):
    return socket.create_connection((host, port), timeout=TIMEOUT)


def op_raw(step):
    try:
        s = connect_to(step.get("host", PROXY[0]), step.get("port", PROXY[1]))
    except OSError as e:
        return {"error": errname(e)}
    with s:
        s.sendall(step["send"].encode("latin-1"))
        data, err = read_all(s)
    status, headers, body = split_response(data)
    return {"status": status, "headers": headers, "body": text(body), "read_error": err,
            "size": len(data)}


def op_connect(step):
    target = step["target"]
    try:
        s = connect_to(*PROXY)
    except OSError as e:
        return {"error": errname(e)}
    with s:
        s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n"
                   % (target, step.get("host_header", target))).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            b = s.recv(1)
            if not b:
                break
            head += b
        status, headers, _ = split_response(head)
        r = {"status": status, "headers": headers}
        if status != 200:
            rest, _ = read_all(s)
            r["body"] = text(rest)
            return r
        if step.get("http"):
            s.sendall(step["http"].encode("latin-1"))
            data, err = read_all(s)
            st, hd, body = split_response(data)
            r["inner"] = {"status": st, "headers": hd, "body": text(body), "read_error": err,
                          "size": len(body), "sha256": hashlib.sha256(body).hexdigest()}
        return r


def op_many(step):
    """Open n connections to the HTTP proxy, each stalled in the middle of
    its request head (the proxy accepts a connection once the client has
    spoken), then send one request on a further connection while they are
    open and report its fate; close them all and send the request again."""
    held, r = [], {}
    try:
        for _ in range(step["n"]):
            h = connect_to(*PROXY)
            held.append(h)
            h.sendall(b"GET ")
        r["held"] = len(held)
        time.sleep(0.3)  # let the gateway accept them all
        extra = op_raw({"send": step["send"]})
        r["while_full"] = {k: extra.get(k) for k in ("status", "size", "read_error", "error")}
    except OSError as e:
        r["error"] = errname(e)
    finally:
        for h in held:
            h.close()
    time.sleep(0.3)
    after = op_raw({"send": step["send"]})
    r["after"] = {k: after.get(k) for k in ("status", "size", "read_error", "error")}
    return r


def op_socks(step):
    """SOCKS5 by hand. Returns the method the server chose, the reply code
    and, after a successful CONNECT with "http" given, the HTTP response."""
    try:
        s = connect_to(*SOCKS)
    except OSError as e:
        return {"error": errname(e)}
    with s:
        s.sendall(bytes.fromhex(step.get("greeting", "050100")))
        m = recv_exact(s, 2)
        r = {"method_reply": m.hex()}
        if len(m) != 2 or m[1] != 0:
            rest, err = read_all(s)
            r["after"] = rest.hex()
            r["closed"] = err is None
            return r
        atyp = step.get("atyp", 3)
        host = step.get("host", "")
        if atyp == 1:
            addr = socket.inet_pton(socket.AF_INET, host)
        elif atyp == 4:
            addr = socket.inet_pton(socket.AF_INET6, host)
        else:
            addr = bytes([len(host)]) + host.encode()
        if not step.get("request_in_greeting"):
            s.sendall(bytes([5, step.get("cmd", 1), 0, atyp]) + addr
                      + struct.pack(">H", step["port"]))
        hdr = recv_exact(s, 4)
        if len(hdr) < 4:
            r["reply"] = None
            r["raw"] = hdr.hex()
            return r
        r["reply"] = hdr[1]
        alen = {1: 4, 4: 16}.get(hdr[3])
        if alen is None:
            alen = recv_exact(s, 1)[0]
        recv_exact(s, alen + 2)
        if hdr[1] == 0 and step.get("http"):
            s.sendall(step["http"].encode("latin-1"))
            data, err = read_all(s)
            st, hd, body = split_response(data)
            r["inner"] = {"status": st, "headers": hd, "body": text(body), "read_error": err}
        else:
            rest, err = read_all(s)
            r["closed"] = err is None
            r["after"] = rest.hex()
        return r


def op_tcp(step):
    host = step["host"]
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(5)
    try:
        s.connect((host, step["port"]))
        return {"result": "ok"}
    except OSError as e:
        return {"result": errname(e)}
    finally:
        s.close()


def op_dns(step):
    qtype = step.get("qtype", 1)
    qid = step.get("id", 0x4a4c)
    q = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for label in step["name"].split("."):
        q += bytes([len(label)]) + label.encode()
    q += b"\0" + struct.pack(">HH", qtype, 1)
    tcp = step.get("tcp", False)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM if tcp else socket.SOCK_DGRAM)
    s.settimeout(3)
    try:
        s.connect(("127.0.0.1", 53))
        if tcp:
            s.sendall(struct.pack(">H", len(q)) + q)
            n = struct.unpack(">H", recv_exact(s, 2))[0]
            a = recv_exact(s, n)
        else:
            s.send(q)
            a = s.recv(4096)
    except (OSError, struct.error) as e:
        return {"error": errname(e)}
    finally:
        s.close()
    if len(a) < 12:
        return {"error": "short answer", "raw": a.hex()}
    aid, flags, qd, an, ns, ar = struct.unpack(">HHHHHH", a[:12])
    r = {"id_ok": aid == qid, "qr": bool(flags & 0x8000), "rcode": flags & 0xF,
         "ancount": an, "addresses": []}
    # Walk the question, then the answers (names may be compressed).
    off = 12

    def skip_name(off):
        while True:
            n = a[off]
            if n & 0xC0 == 0xC0:
                return off + 2
            off += 1
            if n == 0:
                return off
            off += n

    try:
        for _ in range(qd):
            off = skip_name(off) + 4
        for _ in range(an):
            off = skip_name(off)
            rtype, _, _, rdlen = struct.unpack(">HHIH", a[off:off + 10])
            off += 10
            rdata = a[off:off + rdlen]
            off += rdlen
            if rtype == 1 and rdlen == 4:
                r["addresses"].append(socket.inet_ntop(socket.AF_INET, rdata))
            elif rtype == 28 and rdlen == 16:
                r["addresses"].append(socket.inet_ntop(socket.AF_INET6, rdata))
    except (IndexError, struct.error):
        r["parse_error"] = True
    return r


def op_resolve(step):
    try:
        infos = socket.getaddrinfo(step["name"], step.get("port", 80), 0, socket.SOCK_STREAM)
    except socket.gaierror as e:
        return {"error": "gaierror", "reason": str(e)}
    return {"addresses": sorted({i[4][0] for i in infos})}


def op_direct(step):
    """Connect without any proxy: the name is resolved inside (by the DNS
    stub), the connection goes wherever the sandbox's routing sends it."""
    r = {}
    try:
        s = socket.create_connection((step["host"], step["port"]), timeout=TIMEOUT)
    except socket.gaierror as e:
        return {"connect": "gaierror", "reason": str(e)}
    except OSError as e:
        return {"connect": errname(e)}
    with s:
        r["connect"] = "ok"
        r["peer"] = s.getpeername()[0]
        try:
            if step.get("send"):
                s.sendall(step["send"].encode("latin-1"))
            data, err = read_all(s)
        except OSError as e:
            data, err = b"", errname(e)
    st, hd, body = split_response(data)
    r.update({"status": st, "headers": hd, "body": text(body), "read_error": err,
              "size": len(data)})
    return r


def op_tls(step):
    """Send a real ClientHello with SNI server_name (Python's ssl) and report
    how the connection ended; the servers here speak plain HTTP, so a
    handshake never completes: what matters is whether the gateway let the
    hello through (the server answers something) or cut it (reset/EOF)."""
    r = {}
    try:
        s = socket.create_connection((step["host"], step["port"]) if not step.get("connect")
                                     else PROXY, timeout=TIMEOUT)
    except OSError as e:
        return {"connect": errname(e)}
    with s:
        if step.get("connect"):
            s.sendall(("CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n"
                       % (step["host"], step["port"], step["host"], step["port"])).encode())
            head = b""
            while b"\r\n\r\n" not in head:
                b = s.recv(1)
                if not b:
                    break
                head += b
            r["connect_status"] = split_response(head)[0]
            if r["connect_status"] != 200:
                return r
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        try:
            t = ctx.wrap_socket(s, server_hostname=step["server_name"])
            r["handshake"] = "ok"
            t.close()
        except (ssl.SSLError, OSError) as e:
            r["handshake"] = errname(e) if not isinstance(e, ssl.SSLError) else "SSLError"
            r["reason"] = str(e)
    return r


OPS = {"env": op_env, "curl": op_curl, "urllib": op_urllib, "raw": op_raw,
       "connect": op_connect, "socks": op_socks, "tcp": op_tcp, "dns": op_dns,
       "resolve": op_resolve, "direct": op_direct, "tls": op_tls, "many": op_many}


def main(argv):
    with open(argv[1]) as f:
        steps = json.load(f)
    results = []
    for step in steps:
        try:
            r = OPS[step["op"]](step)
        except Exception as e:  # report, never crash: the test judges
            r = {"exception": "%s: %s" % (type(e).__name__, e)}
        r["op"] = step["op"]
        if "label" in step:
            r["label"] = step["label"]
        results.append(r)
    json.dump(results, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
