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
import os
import signal
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

PREVIEW = 300


class Sink(BaseHTTPRequestHandler):
    record_file = None

    def handle_any(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length > 0 else b""
        text = body.decode("utf-8", errors="replace")
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
    if len(argv) not in (3, 4):
        print(f"usage: {argv[0]} PORT RECORD_FILE [PORT_FILE]", file=sys.stderr)
        return 2
    Sink.record_file = argv[2]
    open(Sink.record_file, "a").close()
    server = HTTPServer(("127.0.0.1", int(argv[1])), Sink)
    port = server.server_address[1]

    def stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    if len(argv) == 4:
        with open(argv[3] + ".tmp", "w") as f:
            f.write(f"{port}\n")
        # Rename so that a reader never sees a half-written file.
        os.rename(argv[3] + ".tmp", argv[3])
    print(f"[collector] listening on http://127.0.0.1:{port}/, recording to {argv[2]}",
          flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
