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
import os
import signal
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer


class Api(BaseHTTPRequestHandler):
    record_file = None

    def handle_any(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length > 0 else b""
        text = body.decode("utf-8", errors="replace")
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
    if len(argv) not in (3, 4):
        print(f"usage: {argv[0]} PORT RECORD_FILE [PORT_FILE]", file=sys.stderr)
        return 2
    Api.record_file = argv[2]
    open(Api.record_file, "a").close()
    server = HTTPServer(("127.0.0.1", int(argv[1])), Api)
    port = server.server_address[1]

    def stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    if len(argv) == 4:
        with open(argv[3] + ".tmp", "w") as f:
            f.write(f"{port}\n")
        # Rename so that a reader never sees a half-written file.
        os.rename(argv[3] + ".tmp", argv[3])
    print(f"[api] listening on http://127.0.0.1:{port}/, recording to {argv[2]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
