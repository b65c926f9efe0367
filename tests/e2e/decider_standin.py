#!/usr/bin/python3
"""A stand-in for the operator's external decider (Open Policy Agent's data
API: POST PATH with {"input": ...}, answered {"result": ...}), for tests.

usage: decider_standin.py MODE [ARG] (--socket PATH | --port-file FILE)
                          [--log FILE]

It listens on a Unix socket (--socket) or on 127.0.0.1 with a port the
kernel picks (--port-file: the port is written there, and printed, once it
listens), and answers every question by MODE:

  allow             true, to every question
  narrow RULE       a run question: {"allow": true, "network": {"allow":
                    [every rule of input.network.allow but RULE]}};
                    egress: true
  deny-run REASON   a run question: {"allow": false, "reason": REASON};
                    egress: true
  deny-egress HOST  egress for HOST: {"allow": false, "reason": "HOST is
                    not on the list"}; everything else: true
  hang              reads the question and never answers
  garbage           200 with a body that is not JSON
  undefined         {} (no "result": an undefined decision)

An egress question is one whose input has "method" and "host"; any other is
a run question. With --log, each question is appended as one JSON line
{"path", "input"} before it is answered, so a test can count them.

It runs until killed (SIGTERM or SIGINT end it cleanly) and removes its
socket on the way out. Only the standard library; loopback only.
"""

import argparse
import json
import os
import signal
import socket
import socketserver
import sys
import threading
from http.server import BaseHTTPRequestHandler

STOP = threading.Event()


def answer_for(mode, arg, inp):
    """The "result" for input inp, or None when MODE answers otherwise."""
    egress = isinstance(inp, dict) and "method" in inp and "host" in inp
    if mode == "allow":
        return True
    if mode == "narrow":
        if egress:
            return True
        rules = ((inp or {}).get("network") or {}).get("allow") or []
        return {"allow": True, "network": {"allow": [r for r in rules if r != arg]}}
    if mode == "deny-run":
        return True if egress else {"allow": False, "reason": arg}
    if mode == "deny-egress":
        if egress and inp.get("host") == arg:
            return {"allow": False, "reason": "%s is not on the list" % arg}
        return True
    raise ValueError(mode)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "decider-standin"

    def log_message(self, fmt, *args):  # quiet; and a Unix peer has no address
        pass

    def address_string(self):
        return "local"

    def send(self, status, body):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True

    def do_POST(self):
        cfg = self.server.cfg
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n > 0 else b""
        try:
            inp = json.loads(raw).get("input")
        except (ValueError, AttributeError):
            self.send(400, b'{"code": "invalid_parameter", "message": "body is not JSON"}')
            return
        if cfg.log:
            with cfg.lock, open(cfg.log, "a") as f:
                f.write(json.dumps({"path": self.path, "input": inp}) + "\n")
        if cfg.mode == "hang":
            STOP.wait()
            self.close_connection = True
            return
        if cfg.mode == "garbage":
            self.send(200, b"this is not JSON at all")
            return
        if cfg.mode == "undefined":
            self.send(200, b"{}")
            return
        self.send(200, json.dumps({"result": answer_for(cfg.mode, cfg.arg, inp)}).encode())


class UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class TCPServer(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    p = argparse.ArgumentParser(description="a stand-in decider for tests")
    p.add_argument("mode", choices=["allow", "narrow", "deny-run", "deny-egress", "hang",
                                    "garbage", "undefined"])
    p.add_argument("arg", nargs="?")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--socket")
    where.add_argument("--port-file")
    p.add_argument("--log")
    cfg = p.parse_args()
    if cfg.mode in ("narrow", "deny-run", "deny-egress") and cfg.arg is None:
        p.error("%s needs an argument" % cfg.mode)
    cfg.lock = threading.Lock()

    if cfg.socket:
        # Bound and listening under another name first, so the socket
        # never exists without a listener behind it.
        tmp = cfg.socket + ".tmp"
        for name in (tmp, cfg.socket):
            if os.path.exists(name):
                os.unlink(name)
        srv = UnixServer(tmp, Handler)
        os.rename(tmp, cfg.socket)
    else:
        srv = TCPServer(("127.0.0.1", 0), Handler)
        port = srv.server_address[1]
        tmp = cfg.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % port)
        os.rename(tmp, cfg.port_file)
        print(port, flush=True)
    srv.cfg = cfg

    def stop(signum, frame):
        STOP.set()
        threading.Thread(target=srv.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        srv.serve_forever(poll_interval=0.1)
    finally:
        STOP.set()
        srv.server_close()
        if cfg.socket and os.path.exists(cfg.socket):
            os.unlink(cfg.socket)
    return 0


if __name__ == "__main__":
    sys.exit(main())
