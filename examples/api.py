#!/usr/bin/python3
"""A loopback HTTP server that stands in for the team's internal analysis API:
the one place the agent is supposed to send its results.

usage: api.py PORT RECORD_FILE [PORT_FILE]

Listens on 127.0.0.1:PORT (PORT 0 picks a free port) and never on any other
address. POST /analyze with a JSON body is accepted (200, {"status":
"accepted", ...}); anything else gets 404. Every request is appended to
RECORD_FILE as one JSON line {"method", "path", "host", "bytes", "body"} and
summarised on stdout. Once listening it writes the port number to PORT_FILE,
if given, so that a script can wait for it. Stops on SIGTERM or SIGINT.
"""

import json
import sys
from http.server import BaseHTTPRequestHandler

from loopback import read_body, serve


class Api(BaseHTTPRequestHandler):
    record_file = None

    def handle_any(self):
        body, text = read_body(self)
        with open(self.record_file, "a", encoding="utf-8") as f:
            f.write(json.dumps({"method": self.command, "path": self.path,
                                "host": self.headers.get("Host"), "bytes": len(body),
                                "body": text}) + "\n")
        ok = self.command == "POST" and self.path == "/analyze"
        if ok:
            try:
                summary = json.loads(text)
            except ValueError:
                ok = False
        status = 200 if ok else 404
        answer = {"status": "accepted", "fields": sorted(summary)} if ok else {
            "status": "not found"}
        print(f"[api] {self.command} {self.path} (Host {self.headers.get('Host')}): "
              f"{len(body)} bytes -> {status}", flush=True)
        payload = (json.dumps(answer) + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PUT = handle_any

    def log_message(self, format, *args):
        pass


def main(argv):
    return serve(Api, argv, "api")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
