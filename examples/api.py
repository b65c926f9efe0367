#!/usr/bin/python3
"""A loopback HTTP server that stands in for the team's internal analysis API:
the one place the agent is supposed to send its results.

usage: DEMO_API_TOKEN=TOKEN api.py PORT RECORD_FILE [PORT_FILE]

Listens on 127.0.0.1:PORT (PORT 0 picks a free port) and never on any other
address. Every request must carry "Authorization: Bearer TOKEN", TOKEN being
the value of DEMO_API_TOKEN in the server's environment (never on its command
line); one without it, or with another token, gets 401. POST /analyze with a
JSON body is accepted (200, {"status": "accepted", ...}); anything else gets
404. Every request is appended to RECORD_FILE as one JSON line {"method",
"path", "host", "token_ok", "token_sha256", "bytes", "body"}: token_ok says
whether it carried the right token, token_sha256 is the first 12 hex digits of
the SHA-256 of the bearer token it carried (null if none), never the token
itself. Each request is summarised on stdout. Once listening it writes the
port number to PORT_FILE, if given, so that a script can wait for it. Stops
on SIGTERM or SIGINT.
"""

import hashlib
import hmac
import json
import os
import sys
from http.server import BaseHTTPRequestHandler

from loopback import read_body, serve


def fingerprint(token):
    """A short name for a token that does not reveal it."""
    return hashlib.sha256(token.encode()).hexdigest()[:12]


class Api(BaseHTTPRequestHandler):
    record_file = None
    token = None

    def handle_any(self):
        body, text = read_body(self)
        auth = self.headers.get("Authorization") or ""
        given = auth[len("Bearer "):] if auth.startswith("Bearer ") else None
        token_ok = given is not None and hmac.compare_digest(given.encode(),
                                                             self.token.encode())
        with open(self.record_file, "a", encoding="utf-8") as f:
            f.write(json.dumps({"method": self.command, "path": self.path,
                                "host": self.headers.get("Host"), "token_ok": token_ok,
                                "token_sha256": fingerprint(given) if given is not None
                                else None,
                                "bytes": len(body), "body": text}) + "\n")
        summary = None
        if not token_ok:
            status, answer = 401, {"status": "unauthorized"}
        elif self.command == "POST" and self.path == "/analyze":
            try:
                summary = json.loads(text)
            except ValueError:
                pass
            if isinstance(summary, dict):
                status, answer = 200, {"status": "accepted", "fields": sorted(summary)}
            else:
                status, answer = 400, {"status": "not a JSON object"}
        else:
            status, answer = 404, {"status": "not found"}
        token = ("right token" if token_ok else
                 "no token" if given is None else "WRONG token")
        print(f"[api] {self.command} {self.path} (Host {self.headers.get('Host')}, "
              f"{token}): {len(body)} bytes -> {status}", flush=True)
        payload = (json.dumps(answer) + "\n").encode()
        self.send_response(status)
        if status == 401:
            self.send_header("WWW-Authenticate", 'Bearer realm="analysis"')
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PUT = handle_any

    def log_message(self, format, *args):
        pass


def main(argv):
    token = os.environ.get("DEMO_API_TOKEN")
    if not token:
        print(f"{argv[0]}: DEMO_API_TOKEN is not set", file=sys.stderr)
        return 2
    Api.token = token
    return serve(Api, argv, "api")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
