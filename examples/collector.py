#!/usr/bin/python3
"""A loopback HTTP sink that stands in for the attacker's collector.

usage: collector.py PORT RECORD_FILE [PORT_FILE]

Listens on 127.0.0.1:PORT (PORT 0 picks a free port) and never on any other
address. Every request is appended to RECORD_FILE as one JSON line
{"method", "path", "bytes", "body"} and summarised on stdout. Once listening
it writes the port number to PORT_FILE, if given, so that a script can wait
for it. Stops on SIGTERM or SIGINT.
"""

import json
import sys
from http.server import BaseHTTPRequestHandler

from loopback import read_body, serve

PREVIEW = 300


class Sink(BaseHTTPRequestHandler):
    record_file = None

    def handle_any(self):
        body, text = read_body(self)
        with open(self.record_file, "a", encoding="utf-8") as f:
            f.write(json.dumps({"method": self.command, "path": self.path,
                                "bytes": len(body), "body": text}) + "\n")
        preview = text if len(text) <= PREVIEW else text[:PREVIEW] + "..."
        print(f"[collector] {self.command} {self.path}: {len(body)} bytes: {preview}",
              flush=True)
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", "9")
        self.end_headers()
        self.wfile.write(b"received\n")

    do_GET = do_POST = do_PUT = handle_any

    def log_message(self, format, *args):
        pass


def main(argv):
    return serve(Sink, argv, "collector")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
