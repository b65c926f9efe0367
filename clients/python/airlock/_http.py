"""HTTP/1.1 to the daemon, standard library only: over its Unix socket
(AF_UNIX, no authentication header: the daemon reads the caller's uid from
the socket), or over loopback TCP with a bearer token."""

import http.client
import json
import os
import socket
import urllib.parse

from .errors import AirlockError, error_from_answer

DEFAULT_SOCKET = "/run/airlock/serve.sock"


class _UnixConnection(http.client.HTTPConnection):
    """An HTTPConnection whose socket is the daemon's Unix socket."""

    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(self.timeout)
            s.connect(self._path)
        except OSError:
            s.close()
            raise
        self.sock = s


class Transport:
    """Where the daemon is and how to reach it. socket: the Unix socket's
    path (default: $AIRLOCK_SOCKET, else /run/airlock/serve.sock); url:
    http://127.0.0.1:PORT (or [::1]) for the daemon's --listen, with
    token, one of its --token-file's tokens. request_timeout: seconds a
    request that is not an exec may take (None: no bound)."""

    def __init__(self, socket=None, url=None, token=None, request_timeout=60):
        if url is not None and socket is not None:
            raise ValueError("give the daemon's socket or its url, not both")
        self.request_timeout = request_timeout
        self.token = token
        self.url = url
        if url is not None:
            u = urllib.parse.urlsplit(url)
            if u.scheme != "http" or not u.hostname or u.path not in ("", "/"):
                raise ValueError("url %r: expected http://HOST:PORT (the daemon's --listen)"
                                 % url)
            if token is None:
                raise ValueError("url %r: a TCP connection needs a token (the daemon's "
                                 "--token-file)" % url)
            self._host, self._port = u.hostname, u.port or 80
            self.socket = None
        else:
            self.socket = socket or os.environ.get("AIRLOCK_SOCKET") or DEFAULT_SOCKET

    def where(self):
        """The daemon's address, for messages."""
        return self.url if self.url is not None else self.socket

    def connection(self, timeout):
        if self.url is not None:
            return http.client.HTTPConnection(self._host, self._port, timeout=timeout)
        return _UnixConnection(self.socket, timeout)

    def _send(self, method, path, body, timeout, headers=None):
        """Sends one request; returns the connection and its response."""
        h = dict(headers or {})
        if self.token is not None:
            h["Authorization"] = "Bearer " + self.token
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        elif isinstance(body, str):
            body = body.encode()
        elif body is None and method in ("POST", "PUT"):
            body = b""
        c = self.connection(timeout)
        try:
            c.request(method, path, body=body, headers=h)
            return c, c.getresponse()
        except (OSError, http.client.HTTPException) as e:
            c.close()
            raise AirlockError("%s %s: the daemon at %s: %s" % (method, path, self.where(), e))

    def request(self, method, path, body=None, timeout="default", headers=None):
        """One request, its whole answer read: (status, content type,
        bytes). Raises the typed error for a status of 400 or more."""
        if timeout == "default":
            timeout = self.request_timeout
        c, r = self._send(method, path, body, timeout, headers)
        try:
            data = r.read()
        except (OSError, http.client.HTTPException) as e:
            raise AirlockError("%s %s: reading the answer: %s" % (method, path, e))
        finally:
            c.close()
        ctype = r.getheader("Content-Type") or ""
        if r.status >= 400:
            raise error_from_answer(r.status, _json_or_none(data, ctype), "%s %s" % (method, path))
        return r.status, ctype, data

    def json(self, method, path, body=None, timeout="default"):
        """One request whose answer is a JSON object: that object."""
        st, ctype, data = self.request(method, path, body, timeout)
        doc = _json_or_none(data, ctype)
        if not isinstance(doc, dict):
            raise AirlockError("%s %s: the answer is not a JSON object: %r"
                               % (method, path, data[:200]), st)
        return doc

    def events(self, method, path, body=None, timeout=None):
        """A streamed NDJSON answer: yields each event (a dict) as its line
        arrives; the connection is closed when the generator is."""
        c, r = self._send(method, path, body, timeout)
        try:
            ctype = r.getheader("Content-Type") or ""
            if r.status >= 400:
                raise error_from_answer(r.status, _json_or_none(r.read(), ctype),
                                        "%s %s" % (method, path))
            while True:
                try:
                    line = r.readline()
                except (OSError, http.client.HTTPException) as e:
                    raise AirlockError("%s %s: reading the stream: %s" % (method, path, e))
                if not line:
                    return
                if line.strip():
                    try:
                        ev = json.loads(line)
                    except ValueError:
                        raise AirlockError("%s %s: a line of the stream is not JSON: %r"
                                           % (method, path, line[:200]))
                    yield ev
        finally:
            c.close()


def _json_or_none(data, ctype):
    if not ctype.startswith("application/json"):
        return None
    try:
        return json.loads(data)
    except ValueError:
        return None


def quote_path(path):
    """A sandbox path as the file API's URL takes it: absolute, its
    leading slash dropped, each component percent-encoded (so a '?', '#'
    or '%' in a name is that byte, never a query)."""
    if not isinstance(path, str) or not path.startswith("/"):
        raise ValueError("path %r: expected an absolute sandbox path (/work/...)" % (path,))
    parts = [p for p in path.split("/") if p]
    return "/".join(urllib.parse.quote(p, safe="") for p in parts)
