#!/usr/bin/python3
"""The client side of run_cred.py: runs INSIDE the sandbox.

usage: cred_tool.py STEPS.json

STEPS.json is a list of steps, each a dict with an "op", a "label" and the
op's arguments ({{env:NAME}} in any string is replaced by that variable). The tool runs them in order and prints, as soon as each is
done, one line "@@ " + JSON of its result (so that a run the budget or a
limit ends still shows the steps that finished). A step never raises:
errors go into its result, and the test judges them all from outside.
Python 3 standard library only (plus /usr/bin/curl and getent).

ops:
  env                      every variable, and every file under /etc/airlock
  http   host port [tls] [via] [ca] [alpn] requests
                           http.client through the gateway's HTTP proxy:
                           plain HTTP as absolute-URI requests on one proxy
                           connection (via "proxy") or origin-form inside
                           one CONNECT tunnel (via "tunnel"); with tls,
                           HTTPS inside a CONNECT tunnel, the certificate
                           checked by an ssl context (ca: "default" = the
                           environment's trust, a file, or "none"). Each
                           request {method, path, headers, body | body_len}
                           is sent on the same connection while it stays
                           open; per request: status, headers, body, the
                           local port it was sent from, whether the
                           connection stayed open
  loop   n request ...     the http op's request n times, each on a new
                           connection; one result line per attempt, it
                           stops at the first answer that is not 200
  alpn   host port protocols
                           TLS in a CONNECT tunnel offering only these ALPN
                           protocols: the handshake's outcome, the protocol
                           chosen, and (if it completed) what an HTTP/2
                           preface gets
  stream host port path body
                           a POST through the HTTP proxy written in pieces:
                           the head, then the body in two halves 0.3 s
                           apart; the answer's status and headers
  curl   args              /usr/bin/curl -sS ARGS: rc, code, body, stderr
  getent name              getent hosts NAME: rc and output
  tcp    host port         a direct connect (resolved inside): ok or errno
  spin   seconds           burn CPU until killed (at most seconds)
"""

import errno
import http.client
import json
import os
import re
import socket
import ssl
import subprocess
import sys
import time

PROXY = ("127.0.0.1", 3128)
TIMEOUT = 10


def text(b, limit=4000):
    s = b.decode("latin-1")
    return s if len(s) <= limit else s[:limit] + "...[%d bytes]" % len(b)


def errname(e):
    if isinstance(e, socket.timeout):
        return "TIMEOUT"
    if isinstance(e, ssl.SSLError):
        return "SSLError: %s" % (e.reason or e)
    if isinstance(e, OSError) and e.errno:
        return errno.errorcode.get(e.errno, str(e.errno))
    return "%s: %s" % (type(e).__name__, e)


def expand(v):
    """{{env:NAME}} in a string becomes that variable's value (the sandbox's
    placeholder, which the test cannot know in advance)."""
    if isinstance(v, str):
        return re.sub(r"\{\{env:([A-Za-z_][A-Za-z0-9_]*)\}\}",
                      lambda m: os.environ.get(m.group(1), ""), v)
    if isinstance(v, list):
        return [expand(x) for x in v]
    if isinstance(v, dict):
        return {k: expand(x) for k, x in v.items()}
    return v


def emit(result):
    sys.stdout.write("@@ " + json.dumps(result) + "\n")
    sys.stdout.flush()


def op_env(step):
    files = {}
    for root, _, names in os.walk("/etc/airlock"):
        for n in names:
            p = os.path.join(root, n)
            try:
                with open(p, "rb") as f:
                    files[p] = text(f.read(), 1 << 20)
            except OSError as e:
                files[p] = "ERROR " + errname(e)
    return {"env": dict(os.environ), "files": files}


def make_ctx(ca, alpn=None):
    if ca == "none":
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    elif ca == "default":
        ctx = ssl.create_default_context()
    else:
        ctx = ssl.create_default_context(cafile=ca)
    if alpn:
        ctx.set_alpn_protocols(alpn)
    return ctx


def connection(step):
    host, port = step["host"], step["port"]
    if step.get("tls"):
        conn = http.client.HTTPSConnection(PROXY[0], PROXY[1], timeout=TIMEOUT,
                                           context=make_ctx(step.get("ca", "default"),
                                                            step.get("alpn")))
        conn.set_tunnel(host, port)
        return conn, False
    conn = http.client.HTTPConnection(PROXY[0], PROXY[1], timeout=TIMEOUT)
    if step.get("via") == "tunnel":
        conn.set_tunnel(host, port)
        return conn, False
    return conn, True


def tls_info(conn):
    s = conn.sock
    if not isinstance(s, ssl.SSLSocket):
        return {}
    info = {"alpn": s.selected_alpn_protocol(), "version": s.version()}
    cert = s.getpeercert()
    if cert:
        info["issuer"] = dict(x[0] for x in cert.get("issuer", ()))
        info["subject"] = dict(x[0] for x in cert.get("subject", ()))
    return info


def one_request(conn, absolute, step, rq):
    path = rq.get("path", "/")
    url = "http://%s:%d%s" % (step["host"], step["port"], path) if absolute else path
    body = rq.get("body")
    if body is None and rq.get("body_len") is not None:
        body = b"x" * rq["body_len"]
    elif isinstance(body, str):
        body = body.encode()
    r = {}
    try:
        conn.request(rq.get("method", "GET"), url, body=body, headers=rq.get("headers", {}))
        r["local_port"] = conn.sock.getsockname()[1] if conn.sock else None
        r.update(tls_info(conn))
        resp = conn.getresponse()
        data = resp.read()
        r.update({"status": resp.status,
                  "headers": {k.lower(): v for k, v in resp.getheaders()},
                  "body": text(data), "kept_open": conn.sock is not None})
    except Exception as e:  # noqa: BLE001 - reported, judged outside
        r["error"] = errname(e)
    return r


def op_http(step):
    conn, absolute = connection(step)
    out = []
    try:
        for rq in step["requests"]:
            r = one_request(conn, absolute, step, rq)
            out.append(r)
            if "error" in r:
                break
    finally:
        conn.close()
    return {"responses": out}


def op_loop(step):
    for i in range(step["n"]):
        conn, absolute = connection(step)
        try:
            r = one_request(conn, absolute, step, dict(step["request"], path="%s%d" % (
                step["request"].get("path", "/"), i)))
        finally:
            conn.close()
        r["label"] = "%s#%d" % (step["label"], i)
        emit(r)
        if r.get("status") != 200:
            break
    return {"done": True}


def read_head(s):
    head = b""
    while b"\r\n\r\n" not in head:
        b = s.recv(1)
        if not b:
            break
        head += b
    return head


def op_alpn(step):
    r = {}
    t0 = time.monotonic()
    target = "%s:%d" % (step["host"], step["port"])
    try:
        s = socket.create_connection(PROXY, timeout=TIMEOUT)
    except OSError as e:
        return {"connect": errname(e)}
    try:
        s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target)).encode())
        head = read_head(s)
        r["connect_status"] = head.split(b"\r\n", 1)[0].decode("latin-1")
        if b" 200" not in head.split(b"\r\n", 1)[0]:
            return r
        ctx = make_ctx("default", step["protocols"])
        try:
            t = ctx.wrap_socket(s, server_hostname=step["host"])
        except (ssl.SSLError, OSError) as e:
            r["handshake"] = errname(e)
            return r
        s = t
        r["handshake"] = "ok"
        r["alpn"] = t.selected_alpn_protocol()
        try:
            t.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes.fromhex("000000040000000000"))
            data = b""
            while len(data) < 65536:
                b = t.recv(65536)
                if not b:
                    break
                data += b
            r["after_preface"] = text(data, 400)
            r["closed"] = True
        except (ssl.SSLError, OSError) as e:
            r["after_preface_error"] = errname(e)
        return r
    finally:
        r["seconds"] = round(time.monotonic() - t0, 2)
        s.close()


def op_stream(step):
    body = step["body"].encode()
    target = "%s:%d" % (step["host"], step["port"])
    head = ("POST http://%s%s HTTP/1.1\r\nHost: %s\r\nContent-Type: text/plain\r\n"
            "Content-Length: %d\r\n\r\n" % (target, step["path"], target, len(body)))
    r = {}
    try:
        s = socket.create_connection(PROXY, timeout=TIMEOUT)
    except OSError as e:
        return {"error": errname(e)}
    with s:
        try:
            s.sendall(head.encode())
            time.sleep(0.3)
            half = len(body) // 2
            s.sendall(body[:half])
            time.sleep(0.3)
            s.sendall(body[half:])
        except OSError as e:
            r["send_error"] = errname(e)
        data = b""
        try:
            while True:
                b = s.recv(65536)
                if not b:
                    break
                data += b
                if b"\r\n\r\n" in data:
                    break
        except OSError as e:
            r["read_error"] = errname(e)
    line = data.split(b"\r\n", 1)[0].split()
    r["status"] = int(line[1]) if len(line) > 1 and line[1].isdigit() else None
    r["head"] = text(data.split(b"\r\n\r\n", 1)[0], 2000)
    return r


def op_curl(step):
    out = "/tmp/curl.body"
    argv = ["/usr/bin/curl", "-sS", "--max-time", str(TIMEOUT), "-o", out,
            "-w", "%{http_code}"] + step["args"]
    p = subprocess.run(argv, capture_output=True)
    r = {"rc": p.returncode, "stderr": text(p.stderr)}
    w = p.stdout.decode().strip()
    if w.isdigit():
        r["code"] = int(w)
    if os.path.exists(out):
        with open(out, "rb") as f:
            r["body"] = text(f.read())
        os.unlink(out)
    return r


def op_getent(step):
    p = subprocess.run(["getent", "hosts", step["name"]], capture_output=True, timeout=20)
    return {"rc": p.returncode, "out": text(p.stdout), "err": text(p.stderr)}


def op_tcp(step):
    try:
        s = socket.create_connection((step["host"], step["port"]), timeout=5)
        s.close()
        return {"result": "ok"}
    except socket.gaierror as e:
        return {"result": "gaierror", "reason": str(e)}
    except OSError as e:
        return {"result": errname(e)}


def op_spin(step):
    end = time.monotonic() + step.get("seconds", 10)
    n = 0
    while time.monotonic() < end:
        n += 1
    return {"spun": n}


OPS = {"env": op_env, "http": op_http, "loop": op_loop, "alpn": op_alpn, "stream": op_stream,
       "curl": op_curl,
       "getent": op_getent, "tcp": op_tcp, "spin": op_spin}


def main(argv):
    with open(argv[1]) as f:
        steps = json.load(f)
    for step in steps:
        try:
            r = OPS[step["op"]](expand(step))
        except Exception as e:  # noqa: BLE001 - report, never crash
            r = {"exception": "%s: %s" % (type(e).__name__, e)}
        r["op"] = step["op"]
        r["label"] = step.get("label")
        emit(r)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
