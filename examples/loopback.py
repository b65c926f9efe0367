"""What examples/api.py and examples/collector.py share: read a request's
body, and run a handler class on 127.0.0.1 until SIGTERM or SIGINT.

serve(handler, argv, label) takes the command line PORT RECORD_FILE
[PORT_FILE]: PORT 0 picks a free port; RECORD_FILE is created empty if
missing and stored as handler.record_file; once listening the port number
is written to PORT_FILE, if given, so that a script can wait for it.
"""

import os
import signal
import sys
from http.server import HTTPServer


def read_body(handler):
    """The request body (Content-Length bytes) and its text."""
    length = int(handler.headers.get("Content-Length") or 0)
    body = handler.rfile.read(length) if length > 0 else b""
    return body, body.decode("utf-8", errors="replace")


def serve(handler, argv, label):
    if len(argv) not in (3, 4):
        print(f"usage: {argv[0]} PORT RECORD_FILE [PORT_FILE]", file=sys.stderr)
        return 2
    handler.record_file = argv[2]
    open(handler.record_file, "a").close()
    server = HTTPServer(("127.0.0.1", int(argv[1])), handler)
    port = server.server_address[1]

    def stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    if len(argv) == 4:
        with open(argv[3] + ".tmp", "w") as f:
            f.write(f"{port}\n")
        # Rename so that a reader never sees a half-written file.
        os.rename(argv[3] + ".tmp", argv[3])
    print(f"[{label}] listening on http://127.0.0.1:{port}/, recording to {argv[2]}",
          flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    server.server_close()
    return 0
